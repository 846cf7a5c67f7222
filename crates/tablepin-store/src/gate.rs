//! Tests that need something from outside (a test server, the real data, a
//! browser) and find it missing: in CI (`CI` set) that is a failure, never
//! a pass; elsewhere the test says it did not run, and `scripts/test.sh`
//! counts it as skipped (it lists such tests in `TABLEPIN_SKIPS`).
//!
//! Test support, public so that every crate's tests share one rule.

use std::io::Write as _;

/// Says that test `test` cannot run because `why`: `Err` with a sentence
/// naming both in CI, where the test must then fail; `Ok` elsewhere, after
/// saying so on stderr and adding a line to the file `TABLEPIN_SKIPS`
/// names (when it is set). `var` looks a variable up: the test passes
/// `std::env::var_os`, so that no library reads the environment.
pub fn not_run(
    test: &str,
    why: &str,
    var: impl Fn(&str) -> Option<std::ffi::OsString>,
) -> Result<(), String> {
    if var("CI").is_some() {
        return Err(format!("{test} could not run in CI: {why}"));
    }
    eprintln!("{test}: not run: {why}");
    if let Some(list) = var("TABLEPIN_SKIPS") {
        std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(&list)
            .and_then(|mut f| writeln!(f, "{test}: {why}"))
            .map_err(|e| format!("{test}: cannot list it as skipped in {list:?}: {e}"))?;
    }
    Ok(())
}
