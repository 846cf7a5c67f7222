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
mod streamed;
mod transaction;
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
    TableSnapshot, Tombstone, Version, VersionId, FORMAT_VERSION,
};
use tablepin_store::{layout, Store, StoreError, StoreSettings, LOCAL_DIR};

pub use diff::{Diff, RestoreOptions, RestoreResult, TableDiff};
pub use erase::{
    EraseOptions, ErasePlan, EraseReport, ErasedCheck, Erasure, PlannedFile, PlannedVersion,
};
pub use gc::{Gc, GcPlan, GcPolicy, GcReport, TagFate, MIN_GRACE_MS};
pub use merge::{MergeOptions, MergeOutcome, MergeResult, Strategy, TableMerge};
pub use rev::{Replaced, ReplacedBy};
pub use streamed::CommitInput;
pub(crate) use transaction::{retry_pause, Planned, Retry};
pub use transaction::{
    CommitOptions, CommitOutcome, CommitPlan, CommitResult, Input, Transaction, DEFAULT_BRANCH,
    DEFAULT_WINDOW_ROWS,
};
pub use verify::VerifyReport;

use crate::error::{Error, Result};
use crate::table::plan::Mode;
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

/// A table being read: the version, its snapshot, and the rows as a stream
/// ([`Repo::scan_stream`]).
pub struct TableStream {
    /// The version read.
    pub version: VersionId,
    /// The table's snapshot.
    pub snapshot: TableSnapshot,
    /// Schema of the batches.
    pub schema: SchemaRef,
    /// The rows (key order for keyed tables, insertion order otherwise).
    pub rows: futures::stream::BoxStream<'static, Result<RecordBatch>>,
    stats: std::sync::Arc<std::sync::Mutex<ReadStats>>,
}

impl TableStream {
    /// The next batch of rows; `None` once every row was given.
    pub async fn next_batch(&mut self) -> Option<Result<RecordBatch>> {
        self.rows.next().await
    }

    /// What the read touched so far (all of it once `rows` has ended).
    pub fn stats(&self) -> ReadStats {
        self.stats.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// The counts [`TableStream::stats`] reads, shared: they stay readable
    /// after `rows` is handed on (to an Arrow stream, say).
    pub fn shared_stats(&self) -> std::sync::Arc<std::sync::Mutex<ReadStats>> {
        self.stats.clone()
    }
}

impl std::fmt::Debug for TableStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableStream")
            .field("version", &self.version)
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

/// A table read back.
#[derive(Debug, Clone)]
pub struct TableRead {
    /// The version read.
    pub version: VersionId,
    /// The table's snapshot.
    pub snapshot: TableSnapshot,
    /// Schema of the batches.
    pub schema: SchemaRef,
    /// The rows (key order for keyed tables, insertion order otherwise).
    pub batches: Vec<RecordBatch>,
    /// What the read touched.
    pub stats: ReadStats,
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
    pub fn author(&self) -> &str {
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

    /// Loads a table snapshot of a version.
    pub async fn snapshot(&self, id: &VersionId, table: &str) -> Result<TableSnapshot> {
        let v = self.version(id).await?;
        self.snapshot_of(id, &v, table).await
    }

    /// A table's snapshot in a version whose record the caller has read
    /// already ([`Repo::snapshot`] without reading the record again).
    pub async fn snapshot_of(
        &self,
        id: &VersionId,
        v: &Version,
        table: &str,
    ) -> Result<TableSnapshot> {
        let Some(snap_id) = v.tables.get(table) else {
            return Err(Error::UnknownTable {
                table: table.to_string(),
                version: id.short(12),
                available: list_or_none(v.tables.keys().map(String::as_str)),
            });
        };
        self.load_snapshot(id, table, snap_id).await
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

    /// The schema of a table at a branch's head, or `None` when the branch
    /// or the table does not exist yet.
    pub async fn table_schema(&self, branch: &str, table: &str) -> Result<Option<SchemaRef>> {
        let Some(head) = self
            .store
            .ref_head(RefKind::Branch, branch)
            .await?
            .and_then(|h| h.target)
        else {
            return Ok(None);
        };
        let v = self.version(&head).await?;
        if !v.tables.contains_key(table) {
            return Ok(None);
        }
        Ok(Some(table::schema_of(
            &self.snapshot_of(&head, &v, table).await?,
        )))
    }

    /// Compacts a table on a branch (`tablepin compact`): commits a version
    /// whose files hold the same rows written again as full files, in key
    /// order, without deletion vectors; the content hash does not change.
    /// `None` when the table is compact already (nothing is written).
    /// `opts.mode` and `opts.key` are ignored.
    pub async fn compact(&self, table: &str, opts: &CommitOptions) -> Result<Option<CommitResult>> {
        let opts = CommitOptions {
            mode: Mode::Compact,
            key: None,
            ..opts.clone()
        };
        let none = Arc::new(arrow::datatypes::Schema::empty());
        match self.commit(table, none, Vec::new(), &opts).await {
            Ok(done) => Ok(Some(done)),
            Err(Error::AlreadyCompact { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Reads a table at a revision.
    pub async fn read(
        &self,
        rev: &str,
        table: &str,
        columns: Option<&[String]>,
    ) -> Result<TableRead> {
        Ok(self.read_noted(rev, table, columns).await?.0)
    }

    /// Reads a table at a revision, saying when the revision named a
    /// version that an erasure replaced (see [`Repo::resolve_noted`]).
    pub async fn read_noted(
        &self,
        rev: &str,
        table: &str,
        columns: Option<&[String]>,
    ) -> Result<(TableRead, Option<Replaced>)> {
        self.scan(rev, table, &ScanOptions::columns(columns)).await
    }

    /// Reads the columns and rows `opts` asks for of a table at a
    /// revision, saying when the revision named a version that an erasure
    /// replaced (see [`Repo::resolve_noted`]). A blob that vanishes because
    /// the revision moved meanwhile (an erasure replaced the branch head)
    /// is a lost race: the read starts again on what the revision names
    /// now.
    pub async fn scan(
        &self,
        rev: &str,
        table: &str,
        opts: &ScanOptions,
    ) -> Result<(TableRead, Option<Replaced>)> {
        let mut tries = 0;
        loop {
            let (version, replaced) = self.resolve_noted(rev).await?;
            match self.scan_version(&version, table, opts).await {
                Err(e) if e.is_missing() && tries < 3 && self.resolve(rev).await? != version => {
                    tries += 1;
                }
                other => return other.map(|r| (r, replaced)),
            }
        }
    }

    /// Reads a table at a version.
    pub async fn read_version(
        &self,
        version: &VersionId,
        table: &str,
        columns: Option<&[String]>,
    ) -> Result<TableRead> {
        self.scan_version(version, table, &ScanOptions::columns(columns))
            .await
    }

    /// Reads the columns and rows `opts` asks for of a table at a version.
    pub async fn scan_version(
        &self,
        version: &VersionId,
        table: &str,
        opts: &ScanOptions,
    ) -> Result<TableRead> {
        let snapshot = self.snapshot(version, table).await?;
        let (schema, batches, stats) = match opts.files {
            // Chosen files are read as a stream reads them: unmerged.
            Some(_) => table::stream::collect(self.store.clone(), &snapshot, table, opts).await,
            None => table::scan(&self.store, &snapshot, table, opts).await,
        }
        .map_err(|e| named(e, Some(*version), table))?;
        Ok(TableRead {
            version: *version,
            snapshot,
            schema,
            batches,
            stats,
        })
    }

    /// Streams the columns and rows `opts` asks for of a table at a
    /// revision, in the order [`Repo::scan`] gives them, without holding
    /// the table: an unkeyed table file by file, a keyed one merged by key
    /// as each file decodes a batch at a time (the files' verified bytes
    /// are held meanwhile, not their decoded rows). Says, as `scan` does,
    /// when the revision named a version an erasure replaced.
    pub async fn scan_stream(
        &self,
        rev: &str,
        table: &str,
        opts: &ScanOptions,
    ) -> Result<(TableStream, Option<Replaced>)> {
        let (version, replaced) = self.resolve_noted(rev).await?;
        let snapshot = self.snapshot(&version, table).await?;
        let s = table::stream::open(self.store.clone(), &snapshot, table, opts)
            .await
            .map_err(|e| named(e, Some(version), table))?;
        let name = table.to_string();
        let rows = s
            .rows
            .map(move |r| r.map_err(|e| named(e, Some(version), &name)))
            .boxed();
        Ok((
            TableStream {
                version,
                snapshot,
                schema: s.schema,
                rows,
                stats: s.stats,
            },
            replaced,
        ))
    }

    /// Bytes and count of every stored blob.
    pub async fn stored(&self) -> Result<(u64, u64)> {
        let blobs = self.store.list_blobs().await?;
        Ok((blobs.iter().map(|b| b.size).sum(), blobs.len() as u64))
    }

    /// The data files a version's table is made of.
    pub async fn files(&self, version: &VersionId, table: &str) -> Result<Vec<FileEntry>> {
        Ok(self.snapshot(version, table).await?.files)
    }
}

impl WriteSettings {
    /// Checks that the settings can build writer properties.
    pub(crate) fn properties_check(&self) -> Result<()> {
        self.properties().map(|_| ())
    }
}
