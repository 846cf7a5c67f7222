//! tablepin's on-storage format: what the bytes in a repository mean.
//!
//! This crate owns the typed names of things ([`ObjectId`], [`VersionId`]),
//! the multiset [`ContentHash`] arithmetic, and the manifests that a
//! repository stores ([`Version`], [`TableSnapshot`], [`RefEntry`],
//! [`Tombstone`], [`AuditRecord`]) with their encoding. It does no I/O: the
//! store layer moves bytes, this layer says what they are. Every encoded
//! object carries a `format` number so a later release can still read it.

#![warn(missing_docs)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

mod content;
mod ids;
mod manifest;
mod par;

pub use content::{ContentHash, RowHash};
pub use par::try_map;

/// Threads set by [`set_threads`]; 0: the machine's cores.
static THREADS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// How many threads CPU-bound work (hashing, decoding files) may use: what
/// the process set ([`set_threads`]; the CLI and the Python module set
/// `TABLEPIN_THREADS`), else the machine's cores. Every layer asks here, so
/// one setting makes a run single-threaded (the benchmarks use it to show
/// per-core costs).
pub fn threads() -> usize {
    match THREADS.load(std::sync::atomic::Ordering::Relaxed) {
        0 => cores(),
        n => n,
    }
}

/// Sets [`threads`] for the whole process: `None` or 0, the machine's cores.
pub fn set_threads(n: Option<usize>) {
    THREADS.store(n.unwrap_or(0), std::sync::atomic::Ordering::Relaxed);
}

/// The threads `TABLEPIN_THREADS` asks for, from a variable's value: a
/// positive number, else none (every core).
pub fn threads_from(value: Option<&str>) -> Option<usize> {
    value
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|n| *n > 0)
}

/// The machine's cores, asked once: the standard library reads the
/// cgroup's CPU quota from files on every call, which cost 4% of a lab run.
fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}
pub use ids::{IdParseError, ObjectId, VersionId};
pub use manifest::{
    decode_manifest, encode_manifest, AuditMovedRef, AuditRecord, AuditVersion, Checks,
    DeletionVector, ErasedFingerprint, FileEntry, Formatted, KeyBound, RefEntry, RefHold, RefKind,
    TableChange, TableSnapshot, Tombstone, Version, FORMAT_VERSION, OUTBOARDS_FROM_FORMAT,
    REPO_FORMAT, SMALL_GROUPS_FROM_FORMAT,
};

/// Errors of decoding stored bytes. Encoding cannot fail for these types
/// except through serde, which is reported the same way.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FormatError {
    /// The bytes are not a manifest of the expected kind.
    #[error("cannot decode {what}: {source}")]
    Json {
        /// What was being decoded ("version", "table snapshot", ...).
        what: &'static str,
        /// The serde error.
        #[source]
        source: serde_json::Error,
    },
    /// The zstd frame around a manifest is damaged.
    #[error("cannot decompress {what}: {source}")]
    Zstd {
        /// What was being decoded.
        what: &'static str,
        /// The I/O error zstd reported.
        #[source]
        source: std::io::Error,
    },
    /// The object was written by a newer tablepin.
    #[error("{what} has format {found}, this tablepin reads up to {reads}; upgrade tablepin")]
    TooNew {
        /// What was being decoded.
        what: &'static str,
        /// The format number found.
        found: u32,
        /// The newest format of its kind this build reads (an object's
        /// [`FORMAT_VERSION`], a repository's [`REPO_FORMAT`]).
        reads: u32,
    },
}
