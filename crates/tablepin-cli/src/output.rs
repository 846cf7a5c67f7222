//! Printing: human text or `--json`, sizes, times, and progress bars that
//! show only on a terminal.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

/// Prints a value as pretty JSON on stdout.
pub fn json<T: Serialize>(value: &T) -> anyhow::Result<()> {
    let s = serde_json::to_string_pretty(value)?;
    println!("{s}");
    Ok(())
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

impl tablepin::Progress for Bar {
    fn begin(&self, what: &str, total: u64) {
        let style = if total > 0 {
            ProgressStyle::with_template(
                "{msg:>20} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec}",
            )
        } else {
            ProgressStyle::with_template("{msg:>20} {spinner} {pos}")
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
