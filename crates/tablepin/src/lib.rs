//! tablepin: every version of a table, kept for the rows that changed.
//!
//! ```
//! use std::sync::Arc;
//! use arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};
//! use tablepin::{CommitOptions, Mode, RefKind, Repo, WriteSettings};
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! // A repository in memory (a folder path or file:// URL works the same).
//! let repo = Repo::init("memory://", WriteSettings::default()).await?;
//! let rows = |ids: Vec<i64>, names: Vec<&str>| {
//!     RecordBatch::try_from_iter(vec![
//!         ("id", Arc::new(Int64Array::from(ids)) as ArrayRef),
//!         ("name", Arc::new(StringArray::from(names)) as ArrayRef),
//!     ])
//! };
//! let first = rows(vec![1, 2], vec!["apple", "pear"])?;
//! let opts = CommitOptions { key: Some(vec!["id".into()]), ..Default::default() };
//! let v1 = repo.commit("sales", first.schema(), vec![first.clone()], &opts).await?;
//! repo.refs().create(RefKind::Tag, "train-v1", &v1.version.to_string(), "model A").await?;
//!
//! // The live table moves on: one row changes, one is added.
//! let later = rows(vec![2, 3], vec!["plum", "fig"])?;
//! let upsert = CommitOptions { mode: Mode::Upsert, ..Default::default() };
//! repo.commit("sales", later.schema(), vec![later], &upsert).await?;
//!
//! // The tag still reads back exactly, with the content hash that proves it.
//! let read = repo.read("train-v1", "sales", None).await?;
//! assert_eq!(read.batches, vec![first.clone()]);
//! assert_eq!(read.snapshot.content_hash, v1.content_hash);
//! assert_eq!(read.snapshot.content_hash, tablepin::content_hash(&[first])?);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
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

#![warn(missing_docs)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod delta;
mod error;
pub mod files;
mod progress;
pub mod repo;
mod settings;
pub mod sql;
mod subject;
pub mod table;

pub use error::{Error, ErrorKind, Fix, Library, Result, Words};
pub use repo::{
    check_name, CommitInput, CommitOptions, CommitOutcome, CommitPlan, CommitResult, Diff,
    EraseOptions, ErasePlan, EraseReport, ErasedCheck, Erasure, Gc, GcPlan, GcPolicy, GcReport,
    Input, LogEntry, LogOptions, MergeOptions, MergeOutcome, MergeResult, NoProgress, Progress,
    RefInfo, Refs, Replaced, Repo, RepoConfig, RestoreOptions, RestoreResult, Rev, Snapshot,
    Strategy, TableDiff, TableMerge, TableRead, TableStream, Transaction, UpgradePlan,
    UpgradeReport, DEFAULT_BRANCH, DEFAULT_WINDOW_ROWS, MIN_GRACE_MS,
};
pub use settings::Settings;
pub use subject::Subject;
pub use table::plan::{Mode, PlannedBlob, TablePlan};
pub use table::types::content_hash_as;
pub use table::{ReadStats, ScanOptions, StagedFiles, WriteSettings};
pub use tablepin_format as format;
pub use tablepin_format::{ContentHash, RefKind, VersionId};
/// The content hash (rowhash-v1) of any rows, as `show` reports it for a version.
pub use tablepin_rowhash::content_hash;
/// The storage layer: stores, request counts, remote backends, fault injection.
pub use tablepin_store as store;
pub use tablepin_store::{Store, StoreSettings, LOCAL_DIR};
