//! Printing: human text or `--json`, sizes, times, and progress bars that
//! show only on a terminal.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

/// Writes a line to stdout and returns the write's error instead of
/// panicking as `println!` does: a reader that closed the pipe early
/// (`tablepin cat ... | head -1`) ends the command quietly (see `main`).
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*)?
    }};
}

/// Prints a value as pretty JSON on stdout, every time as an RFC 3339
/// string (see [`times_as_text`]).
pub fn json<T: Serialize>(value: &T) -> anyhow::Result<()> {
    let s = json_text(value)?;
    outln!("{s}");
    Ok(())
}

/// A value as `--json` prints it (see [`json`]).
pub fn json_text<T: Serialize>(value: &T) -> anyhow::Result<String> {
    Ok(serde_json::to_string_pretty(&json_value(value)?)?)
}

/// A value as `--json` gives it, before printing: times as text.
pub fn json_value<T: Serialize>(value: &T) -> anyhow::Result<serde_json::Value> {
    let mut v = serde_json::to_value(value)?;
    times_as_text(&mut v);
    Ok(v)
}

/// The library reports times as milliseconds since the epoch in fields
/// named `time_ms`, `expired_ms`, `now_ms` and `started_ms`; `--json`
/// gives each as an RFC 3339 string named without the `_ms` (`time`).
/// Durations (`grace_ms`, `keep_within_ms`) stay numbers.
fn times_as_text(v: &mut serde_json::Value) {
    use serde_json::Value;
    match v {
        Value::Object(map) => {
            for key in ["time_ms", "expired_ms", "now_ms", "started_ms"] {
                if let Some(ms) = map.get(key).and_then(Value::as_i64) {
                    map.remove(key);
                    map.insert(
                        key.trim_end_matches("_ms").to_string(),
                        Value::from(time_ms_text(ms)),
                    );
                }
            }
            map.values_mut().for_each(times_as_text);
        }
        Value::Array(items) => items.iter_mut().for_each(times_as_text),
        _ => {}
    }
}

/// A time in ms as RFC 3339 with milliseconds, UTC.
fn time_ms_text(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_else(|| ms.to_string())
}

/// Bytes for people: 1.2 MB, 734 B (decimal units, as `du --si`).
pub fn size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "kB", "MB", "GB", "TB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1000.0 && u < UNITS.len() - 1 {
        v /= 1000.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// A time in ms as RFC 3339 (seconds, UTC).
pub fn time(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_else(|| ms.to_string())
}

/// A progress bar on stderr when it is a terminal; hidden otherwise.
pub struct Bar(ProgressBar);

impl Bar {
    pub fn new() -> Self {
        if std::io::stderr().is_terminal() {
            Self(ProgressBar::new(0))
        } else {
            Self(ProgressBar::hidden())
        }
    }
}

impl Bar {
    /// A bar of rows done of `total` (hidden when stderr is not a terminal).
    pub fn rows(what: &str, total: u64) -> Self {
        let bar = Self::new();
        let style = ProgressStyle::with_template(
            "{msg:>20} [{bar:30}] {human_pos}/{human_len} rows ({per_sec})",
        );
        if let Ok(s) = style {
            bar.0.set_style(s.progress_chars("=> "));
        }
        bar.0.set_length(total);
        bar.0.set_message(what.to_string());
        bar
    }

    /// `n` more done.
    pub fn inc(&self, n: u64) {
        self.0.inc(n);
    }

    /// A step with no measure of its own (comparing with the branch head,
    /// writing what changed): a spinner naming it, ticking on its own.
    pub fn spin(&self, what: impl Into<String>) {
        if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} ({elapsed})") {
            self.0.set_style(style);
        }
        self.0.set_message(what.into());
        self.0
            .enable_steady_tick(std::time::Duration::from_millis(120));
    }

    /// Names what the bar measures now, keeping its position.
    pub fn say(&self, what: impl Into<String>) {
        self.0.set_message(what.into());
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        self.0.finish_and_clear();
    }
}

impl tablepin::Progress for Bar {
    fn begin(&self, what: &str, total: u64) {
        let style = if total > 0 {
            ProgressStyle::with_template(
                "{msg} [{bar:30}] {bytes}/{total_bytes} ({bytes_per_sec}, {eta} left)",
            )
        } else {
            ProgressStyle::with_template("{msg} {spinner} {pos}")
        };
        if let Ok(s) = style {
            self.0.set_style(s.progress_chars("=> "));
        }
        self.0.set_length(total);
        self.0.set_position(0);
        self.0.set_message(what.to_string());
        self.0.reset_elapsed();
    }
    fn advance(&self, n: u64) {
        self.0.inc(n);
    }
    fn end(&self) {
        self.0.finish_and_clear();
    }
}
