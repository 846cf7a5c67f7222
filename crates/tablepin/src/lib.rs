//! tablepin: every version of a table, kept for the rows that changed.
//!
//! The engine's layers, top to bottom (see `ARCHITECTURE.md`):
//!
//! - [`repo`]: the repository: commit, refs, revisions, log, verify,
//!   retention and erasure;
//! - [`table`]: data files, deletion vectors, reads in key order, and the
//!   commit planner that stores only what changed;
//! - `tablepin-rowhash` (row and content hashes) and `tablepin-format`
//!   (manifests), which do no I/O;
//! - `tablepin-store`, the only layer that touches storage.
//!
//! [`files`] reads and writes the user's own table files for `commit` and
//! `export`.

#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

mod error;
pub mod files;
pub mod repo;
pub mod table;

pub use error::{Error, ErrorKind, Result};
pub use repo::{
    check_name, CommitOptions, CommitResult, EraseOptions, ErasePlan, EraseReport, ErasedCheck,
    GcPlan, GcPolicy, GcReport, LogEntry, LogOptions, NoProgress, Progress, RefInfo, Replaced,
    Repo, RepoConfig, TableRead, DEFAULT_BRANCH,
};
pub use table::plan::Mode;
pub use table::{ReadStats, WriteSettings};
pub use tablepin_format as format;
pub use tablepin_format::{ContentHash, RefKind, VersionId};
pub use tablepin_store::{Store, LOCAL_DIR};
