//! The repository: versions, refs and the operations a user runs. Commits
//! go through one [`Transaction`] (`transaction`).

mod log;
mod open;
mod refs;

pub use log::*;
pub use open::*;
pub use refs::*;

mod diff;
mod erase;
mod gc;
mod lease;
mod merge;
mod rev;
mod snapshot;
mod streamed;
mod transaction;
mod upgrade;
mod verify;

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use serde::{Deserialize, Serialize};
use tablepin_format::{
    decode_manifest, ContentHash, FileEntry, ObjectId, RefEntry, RefHold, RefKind, TableChange,
    TableSnapshot, Tombstone, Version, VersionId, FORMAT_VERSION, REPO_FORMAT,
};
use tablepin_store::{layout, Store, StoreError, StoreSettings, LOCAL_DIR};

pub use diff::{Diff, RestoreOptions, RestoreResult, TableDiff};
pub use erase::{
    EraseOptions, ErasePlan, EraseReport, ErasedCheck, Erasure, PlannedFile, PlannedVersion,
};
pub use gc::{Gc, GcPlan, GcPolicy, GcReport, TagFate, MIN_GRACE_MS};
pub use merge::{MergeOptions, MergeOutcome, MergeResult, Strategy, TableMerge};
pub use rev::{Replaced, ReplacedBy};
pub use snapshot::{Rev, Snapshot, TableRead, TableStream};
pub use streamed::CommitInput;
pub(crate) use transaction::{retry_pause, Planned, Retry};
pub use transaction::{
    CommitOptions, CommitOutcome, CommitPlan, CommitResult, Input, Transaction, DEFAULT_BRANCH,
    DEFAULT_WINDOW_ROWS,
};
pub use upgrade::{LackingBlob, UpgradePlan, UpgradeReport};
pub use verify::VerifyReport;

use crate::error::{Error, Result};
use crate::table::{self, ReadStats, ScanOptions, WriteSettings};

pub use crate::progress::{NoProgress, Progress};

pub(crate) use tablepin_store::layout::CONFIG;

/// The name among `names` closest to `name` (by edit distance), when it is
/// close enough to be a likely typo.
pub(crate) fn closest<'a>(name: &str, names: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    names
        .into_iter()
        .map(|n| (strsim::levenshtein(name, n), n))
        .filter(|(d, n)| *d <= (n.len().max(name.len()) / 3).max(2))
        .min()
        .map(|(_, n)| n)
}

/// The parents a log walk follows.
fn follow(parents: &[VersionId], all: bool) -> Vec<VersionId> {
    match all {
        true => parents.to_vec(),
        false => parents.first().copied().into_iter().collect(),
    }
}

/// Takes the newest of the versions a log walk has still to list (the
/// first queued of equal times).
fn pop_newest(frontier: &mut Vec<(i64, VersionId)>) -> Option<(i64, VersionId)> {
    let at = (0..frontier.len()).rev().max_by_key(|&i| frontier[i].0)?;
    Some(frontier.remove(at))
}

/// A tablepin repository.
#[derive(Debug)]
pub struct Repo {
    store: Arc<Store>,
    config: RepoConfig,
    author: String,
}

pub(crate) fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

impl Repo {
    /// The same repository, its commits and erasures made by `author`
    /// ([`crate::Settings::author`]; "unknown" unless set).
    pub fn with_author(mut self, author: impl Into<String>) -> Self {
        self.author = author.into();
        self
    }

    /// Who this handle's commits and erasures name.
    pub(crate) fn author(&self) -> &str {
        &self.author
    }

    /// The store under the repository, shared.
    pub(crate) fn store_arc(&self) -> Arc<Store> {
        self.store.clone()
    }

    /// The store under the repository.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The repository's settings.
    pub fn config(&self) -> &RepoConfig {
        &self.config
    }

    /// Loads a version record.
    pub async fn version(&self, id: &VersionId) -> Result<Version> {
        let bytes = self
            .store
            .get_blob(&id.0)
            .await
            .map_err(|source| Error::version_record(*id, source))?;
        Ok(decode_manifest("version", &bytes)?)
    }

    pub(crate) async fn load_snapshot(
        &self,
        id: &VersionId,
        table: &str,
        snap_id: &ObjectId,
    ) -> Result<TableSnapshot> {
        let bytes = self
            .store
            .get_blob(snap_id)
            .await
            .map_err(|source| Error::Damaged {
                what: format!("table snapshot {}", snap_id.short(12)),
                version: *id,
                table: format!(", table '{table}'"),
                source: Box::new(source),
            })?;
        Ok(decode_manifest("table snapshot", &bytes)?)
    }
}

impl WriteSettings {
    /// Checks that the settings can build writer properties.
    pub(crate) fn properties_check(&self) -> Result<()> {
        self.properties().map(|_| ())
    }
}
