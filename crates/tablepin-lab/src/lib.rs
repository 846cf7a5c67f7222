//! The lab: the Online Retail II experiment reproduced in one command, with
//! tablepin as a fifth layout beside the four of the original, and the
//! benchmarks.
//!
//! The lab is a client of the engine like the command line: it commits
//! through `tablepin::Repo` as a user would, erases and collects garbage with
//! the real commands, and formats what comes back. The reference layouts
//! ([`layouts`]) and the experiment's rules ([`experiment`]) are its own.

#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod bench;
pub mod charts;
pub mod data;
pub mod dvc;
pub mod experiment;
pub mod layouts;
pub mod on_disk;
pub mod playground;
pub mod remote_bench;
pub mod run;

/// Errors of the lab.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LabError {
    /// The data file is missing or wrong.
    #[error("cannot use the data at '{path}': {message}")]
    Data {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// The engine failed.
    #[error(transparent)]
    Engine(#[from] tablepin::Error),
    /// Arrow failed.
    #[error("arrow: {0}")]
    Arrow(#[from] arrow::error::ArrowError),
    /// Parquet failed.
    #[error("parquet: {0}")]
    Parquet(#[from] parquet::errors::ParquetError),
    /// Row hashing failed.
    #[error(transparent)]
    RowHash(#[from] tablepin_rowhash::RowHashError),
    /// Writing results failed.
    #[error("cannot write '{path}': {message}")]
    Output {
        /// The file.
        path: String,
        /// Why.
        message: String,
    },
    /// Anything else.
    #[error("{0}")]
    Other(String),
}

impl LabError {
    /// A file or folder at `path` that could not be written (or read back).
    pub fn output(path: &std::path::Path, e: impl std::fmt::Display) -> Self {
        LabError::Output {
            path: path.display().to_string(),
            message: e.to_string(),
        }
    }
}

/// The CPU time this process has used so far, on all its threads (user and
/// system, from `/proc/self/stat`, in 10 ms ticks); `None` where there is no
/// such file. Summed over many runs it says what a step costs in CPU, which
/// a busy machine moves less than it moves wall time.
pub fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name, which is in parentheses and may hold
    // spaces: state is field 3, utime and stime are fields 14 and 15.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i)?.parse::<f64>().ok();
    // USER_HZ, the unit of /proc's times, is 100 on Linux.
    Some((ticks(11)? + ticks(12)?) / 100.0)
}

/// Peak resident memory of this process, in bytes (Linux; 0 elsewhere).
pub fn peak_rss_bytes() -> u64 {
    status_bytes("VmHWM:")
}

/// Resident memory of this process now, in bytes (Linux; 0 elsewhere).
pub fn rss_bytes() -> u64 {
    status_bytes("VmRSS:")
}

/// A memory field of `/proc/self/status` (given in kB), in bytes.
fn status_bytes(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}
