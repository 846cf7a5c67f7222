//! The repository: versions, refs and the operations a user runs. Commits
//! go through one [`Transaction`] (`transaction`).

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
use tablepin_store::{Store, StoreError, StoreSettings, LOCAL_DIR};

pub use diff::{Diff, RestoreOptions, RestoreResult, TableDiff};
pub use erase::{EraseOptions, ErasePlan, EraseReport, ErasedCheck, PlannedFile, PlannedVersion};
pub use gc::{GcPlan, GcPolicy, GcReport, TagFate, MIN_GRACE_MS};
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

/// A repository's fixed settings, in `meta/config.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepoConfig {
    /// Format number.
    pub format: u32,
    /// How data files are written.
    pub write: WriteSettings,
}

pub(crate) const CONFIG: &str = "meta/config.json";

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

/// One line of `log`.
#[derive(Debug, Clone, Serialize)]
pub struct LogEntry {
    /// The version.
    pub id: VersionId,
    /// Its parents.
    pub parents: Vec<VersionId>,
    /// Commit time (ms).
    pub time_ms: i64,
    /// Author.
    pub author: String,
    /// Message.
    pub message: String,
    /// Each table's rows and content hash.
    pub tables: BTreeMap<String, (u64, ContentHash)>,
    /// What the commit changed, by table.
    pub changes: BTreeMap<String, TableChange>,
    /// The version was expired by retention: only its tombstone is left.
    pub expired: bool,
    /// The version this one replaced (erasure).
    pub replaces: Option<VersionId>,
}

/// What `log` lists.
#[derive(Debug, Clone, Default)]
pub struct LogOptions {
    /// At most this many entries.
    pub max: Option<usize>,
    /// Only versions that changed this table.
    pub table: Option<String>,
    /// Follow every parent (a merge's second parent too), newest first,
    /// a version always before its parents; default: first parents only.
    pub all_parents: bool,
}

/// A ref as listed.
#[derive(Debug, Clone, Serialize)]
pub struct RefInfo {
    /// Its name.
    pub name: String,
    /// The version it names.
    pub target: VersionId,
    /// When it was last moved (ms).
    pub time_ms: i64,
    /// Its message: a tag's own message (given when it was created); a
    /// branch's last entry's.
    pub message: String,
    /// What moved a tag since it was created (an erasure), if anything.
    pub note: Option<String>,
    /// Entries in its log.
    pub entries: u64,
}

/// A store's damage or loss while reading a version's files, named as the
/// version's damage (which table, which version).
pub(crate) fn named(e: Error, version: Option<VersionId>, table: &str) -> Error {
    match (e, version) {
        (
            Error::Store(source @ (StoreError::Corrupt { .. } | StoreError::NotFound { .. })),
            Some(version),
        ) => Error::Damaged {
            what: "a data file or deletion vector".into(),
            version,
            table: format!(", table '{table}'"),
            source: Box::new(source),
        },
        (e, _) => e,
    }
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

/// The message a deleted tag was created with: that of the first entry
/// after the deletion before its last one.
fn tag_message_before_deletion(log: &[RefEntry]) -> Option<String> {
    let deleted = log.iter().rposition(|e| e.target.is_none())?;
    let created = log[..deleted]
        .iter()
        .rposition(|e| e.target.is_none())
        .map_or(0, |d| d + 1);
    log.get(created).map(|e| e.message.clone())
}

/// The version a ref's log named last (before a deletion, if it ends in
/// one).
pub(crate) fn last_named(log: &[RefEntry]) -> Option<VersionId> {
    log.iter().rev().find_map(|e| e.target)
}

/// The local folder a location names: a path, or a `file://` URL.
fn local_folder(location: &str) -> Option<std::path::PathBuf> {
    if !location.contains("://") {
        return Some(location.into());
    }
    url::Url::parse(location)
        .ok()
        .filter(|u| u.scheme() == "file")
        .and_then(|u| u.to_file_path().ok())
}

/// Names as a comma-separated list, or "none".
pub(crate) fn list_or_none<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    let v: Vec<&str> = names.into_iter().collect();
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

/// "branch" or "tag".
pub(crate) fn kind_name(kind: RefKind) -> &'static str {
    match kind {
        RefKind::Branch => "branch",
        RefKind::Tag => "tag",
    }
}

/// Checks a tag, branch or table name.
pub fn check_name(what: &'static str, name: &str) -> Result<()> {
    let bad = |reason: &str| Error::InvalidName {
        what,
        name: name.to_string(),
        reason: reason.to_string(),
    };
    if name.is_empty() || name.len() > 200 {
        return Err(bad("it must have 1 to 200 characters"));
    }
    if !name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric())
    {
        return Err(bad("it must start with a letter or digit"));
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    {
        return Err(bad("use only letters, digits, '.', '_' and '-'"));
    }
    if name.contains("..") {
        return Err(bad("it cannot contain '..'"));
    }
    Ok(())
}

impl Repo {
    /// Finds the repository for a command: `location` if given (a path or
    /// URL), else a `.tablepin` folder in `start` or a parent of it, or
    /// one of those folders that is itself a repository (made by
    /// `--repo PATH init` or `Repo.init(path)`).
    pub fn discover(location: Option<&str>, start: &std::path::Path) -> Result<String> {
        if let Some(l) = location {
            // A project folder holding `.tablepin` means that repository,
            // given as a path or a `file://` URL.
            if let Some(p) = local_folder(l).filter(|p| p.join(LOCAL_DIR).is_dir()) {
                return Ok(p.join(LOCAL_DIR).to_string_lossy().into_owned());
            }
            return Ok(l.to_string());
        }
        let mut dir = Some(start);
        while let Some(d) = dir {
            let candidate = d.join(LOCAL_DIR);
            if candidate.is_dir() {
                return Ok(candidate.to_string_lossy().into_owned());
            }
            if d.join(CONFIG).is_file() {
                return Ok(d.to_string_lossy().into_owned());
            }
            dir = d.parent();
        }
        Err(Error::NoRepository {
            start: start.display().to_string(),
        })
    }

    /// Creates a repository at `location` (a folder, created if missing, or
    /// `memory://`).
    pub async fn init(location: &str, write: WriteSettings) -> Result<Repo> {
        Self::init_store(
            Self::store_for_init(location, &StoreSettings::default())?,
            write,
        )
        .await
    }

    /// The store a new repository at `location` goes into (a local folder
    /// is created if missing): [`Repo::init`] in two steps, for a caller
    /// that wants the store's request counts (`Store::stats`) even when
    /// [`Repo::init_store`] then fails.
    pub fn store_for_init(location: &str, settings: &StoreSettings) -> Result<Store> {
        if let Some(folder) = local_folder(location) {
            std::fs::create_dir_all(&folder).map_err(|e| Error::Output {
                path: location.to_string(),
                message: e.to_string(),
            })?;
        }
        Ok(Store::open_with(location, settings)?)
    }

    /// Creates a repository on a store the caller supplies: any
    /// `object_store::ObjectStore`, wrapped by [`Store::from_object_store`].
    /// The store must honour put-if-absent (`PutMode::Create`), as a local
    /// folder, memory, S3, GCS and Azure do: blobs and ref entries rely on
    /// it. A store that lets a second create of one object through is
    /// refused here ([`tablepin_store::StoreError::NoConditionalWrites`]).
    pub async fn init_store(store: Store, write: WriteSettings) -> Result<Repo> {
        let config = RepoConfig {
            format: FORMAT_VERSION,
            write,
        };
        config.write.properties_check()?;
        store.check_conditional_writes().await?;
        let bytes = serde_json::to_vec_pretty(&config)
            .map_err(|e| Error::Internal(format!("encoding the config: {e}")))?;
        match store.create_doc(CONFIG, Bytes::from(bytes)).await {
            Err(StoreError::Exists { .. }) => {
                return Err(Error::RepositoryExists {
                    path: store.location().to_string(),
                })
            }
            other => other?,
        }
        Ok(Repo {
            store: Arc::new(store),
            config,
            author: crate::Settings::default().author,
        })
    }

    /// Opens an existing repository.
    pub async fn open(location: &str) -> Result<Repo> {
        Self::open_store(Self::store_at(location, &StoreSettings::default())?).await
    }

    /// The store of the repository at `location`: a local folder or
    /// `file://` URL that does not exist is [`Error::NoRepository`]; any
    /// other location that cannot be opened (a scheme this build does not
    /// support, say) says why.
    pub fn store_at(location: &str, settings: &StoreSettings) -> Result<Store> {
        Store::open_with(location, settings).map_err(|e| match e {
            StoreError::Location { .. } if local_folder(location).is_some() => {
                Error::NoRepository {
                    start: location.to_string(),
                }
            }
            e => e.into(),
        })
    }

    /// Opens a repository over a store (tests, fault injection).
    pub async fn open_store(store: Store) -> Result<Repo> {
        let Some(bytes) = store.get_doc(CONFIG).await? else {
            return Err(Error::NoRepository {
                start: store.location().to_string(),
            });
        };
        let config: RepoConfig = serde_json::from_slice(&bytes).map_err(|source| {
            Error::Store(StoreError::Decode {
                path: CONFIG.into(),
                source,
            })
        })?;
        Ok(Repo {
            store: Arc::new(store),
            config,
            author: crate::Settings::default().author,
        })
    }

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

    /// The versions of a branch, newest first, following first parents.
    /// Expired versions appear from their tombstones.
    pub async fn log(&self, branch: &str) -> Result<Vec<LogEntry>> {
        self.log_with(branch, &LogOptions::default()).await
    }

    /// [`Repo::log`], stopping after `opts.max` entries and keeping only the
    /// versions that changed `opts.table` when given.
    pub async fn log_with(&self, branch: &str, opts: &LogOptions) -> Result<Vec<LogEntry>> {
        let head = self.ref_target(RefKind::Branch, branch).await?;
        // Read only when a version is gone: a damaged audit record then
        // stops only the logs that need it.
        let mut replaced: Option<std::collections::HashMap<VersionId, VersionId>> = None;
        let mut out: Vec<LogEntry> = Vec::new();
        // (entry, version, table, snapshot) for the snapshots to read.
        let mut snapshots: Vec<(usize, VersionId, String, ObjectId)> = Vec::new();
        // Versions to list, newest first: (time, id), the newest popped
        // first (with first parents only there is never more than one).
        let mut frontier: Vec<(i64, VersionId)> = vec![(i64::MAX, head)];
        let mut queued = std::collections::HashSet::from([head]);
        let wanted = |e: &LogEntry| {
            opts.table
                .as_ref()
                .is_none_or(|t| e.changes.contains_key(t))
        };
        while let Some((time, id)) = pop_newest(&mut frontier) {
            if out.len() >= opts.max.unwrap_or(usize::MAX) {
                break;
            }
            let next: Vec<VersionId>;
            match self.store.get_blob(&id.0).await {
                Ok(bytes) => {
                    let v: Version = decode_manifest("version", &bytes)?;
                    // Each table's rows and hash are filled in below, from
                    // snapshots read all at once.
                    let tables = BTreeMap::new();
                    for (name, sid) in &v.tables {
                        snapshots.push((out.len(), id, name.clone(), *sid));
                    }
                    next = follow(&v.parents, opts.all_parents);
                    let e = LogEntry {
                        id,
                        parents: v.parents,
                        time_ms: v.time_ms,
                        author: v.author,
                        message: v.message,
                        tables,
                        changes: v.changes,
                        expired: false,
                        replaces: v.replaces,
                    };
                    if wanted(&e) {
                        out.push(e);
                    } else {
                        snapshots.retain(|(at, ..)| *at < out.len());
                    }
                }
                Err(StoreError::NotFound { .. }) => match self.tombstone(&id).await? {
                    Some(t) => {
                        next = follow(&t.parents, opts.all_parents);
                        let e = LogEntry {
                            id,
                            parents: t.parents,
                            time_ms: t.time_ms,
                            author: String::new(),
                            message: t.message,
                            tables: t.tables,
                            changes: BTreeMap::new(),
                            expired: true,
                            replaces: None,
                        };
                        // What an expired version changed is not kept.
                        if opts.table.is_none() {
                            out.push(e);
                        }
                    }
                    None => {
                        if replaced.is_none() {
                            replaced = Some(self.replacements().await?);
                        }
                        match replaced.as_ref().and_then(|r| r.get(&id)) {
                            // An erasure replaced it: history goes on
                            // through its replacement.
                            Some(new) => next = vec![*new],
                            None => {
                                return Err(Error::version_record(
                                    id,
                                    StoreError::NotFound {
                                        path: format!("objects/{}", id.0.fanout_path()),
                                    },
                                ))
                            }
                        }
                    }
                },
                Err(source) => return Err(Error::version_record(id, source)),
            }
            for p in next {
                if queued.insert(p) {
                    let t = match opts.all_parents {
                        true => self.version_time(&p).await?.unwrap_or(time),
                        false => time,
                    };
                    frontier.push((t.min(time), p));
                }
            }
        }
        self.fill_log_tables(&mut out, snapshots).await?;
        Ok(out)
    }

    /// A version's commit time, from its record or its tombstone (`None`:
    /// neither is stored).
    async fn version_time(&self, id: &VersionId) -> Result<Option<i64>> {
        match self.store.get_blob(&id.0).await {
            Ok(bytes) => Ok(Some(decode_manifest::<Version>("version", &bytes)?.time_ms)),
            Err(StoreError::NotFound { .. }) => Ok(self.tombstone(id).await?.map(|t| t.time_ms)),
            Err(source) => Err(Error::version_record(*id, source)),
        }
    }

    /// Fills each log entry's tables with their rows and content hash,
    /// reading every distinct snapshot once, several at a time: the walk
    /// along the parents is one read after another, these need not be.
    async fn fill_log_tables(
        &self,
        out: &mut [LogEntry],
        snapshots: Vec<(usize, VersionId, String, ObjectId)>,
    ) -> Result<()> {
        let mut first: BTreeMap<ObjectId, (VersionId, String)> = BTreeMap::new();
        for (_, id, name, sid) in &snapshots {
            first.entry(*sid).or_insert_with(|| (*id, name.clone()));
        }
        let reads = first.into_iter().map(|(sid, (id, name))| async move {
            let s = self.load_snapshot(&id, &name, &sid).await?;
            Ok::<_, Error>((sid, (s.rows, s.content_hash)))
        });
        let read: BTreeMap<ObjectId, (u64, ContentHash)> = futures::stream::iter(reads)
            .buffered(16)
            .try_collect()
            .await?;
        for (at, _, name, sid) in snapshots {
            if let (Some(e), Some(facts)) = (out.get_mut(at), read.get(&sid)) {
                e.tables.insert(name, *facts);
            }
        }
        Ok(())
    }

    /// The tombstone of an expired version, if it has one.
    pub async fn tombstone(&self, id: &VersionId) -> Result<Option<Tombstone>> {
        let path = format!("tombstones/{id}.json");
        match self.store.get_doc(&path).await? {
            None => Ok(None),
            Some(b) => Ok(Some(serde_json::from_slice(&b).map_err(|e| {
                Error::DamagedDocument(format!(
                    "tombstone {path} of expired version {} is damaged: {e}",
                    id.short(12)
                ))
            })?)),
        }
    }

    /// The version a ref names now.
    pub async fn ref_target(&self, kind: RefKind, name: &str) -> Result<VersionId> {
        match self.store.ref_head(kind, name).await? {
            Some(RefEntry {
                target: Some(t), ..
            }) => Ok(t),
            _ => Err(self.unknown_ref(kind, name).await),
        }
    }

    /// The error for a ref that does not exist, with the closest name of
    /// a live ref of that kind when one is near (a typo).
    pub(crate) async fn unknown_ref(&self, kind: RefKind, name: &str) -> Error {
        let hint = match self.store.ref_names(kind).await {
            Ok(names) => closest(
                name,
                names.iter().map(String::as_str).filter(|n| *n != name),
            )
            .map(|n| format!("; did you mean '{n}'?"))
            .unwrap_or_default(),
            Err(e) => return e.into(),
        };
        Error::UnknownRef {
            kind: kind_name(kind),
            name: name.to_string(),
            hint,
        }
    }

    /// Every live ref of a kind.
    pub async fn refs(&self, kind: RefKind) -> Result<Vec<RefInfo>> {
        let mut out = Vec::new();
        for name in self.store.ref_names(kind).await? {
            if let Some(h) = self.store.ref_head(kind, &name).await? {
                if let Some(t) = h.target {
                    let (message, note) = match kind {
                        RefKind::Tag => self.tag_message(&name, &h).await?,
                        RefKind::Branch => (h.message, None),
                    };
                    out.push(RefInfo {
                        name,
                        target: t,
                        time_ms: h.time_ms,
                        message,
                        note,
                        entries: h.seq,
                    });
                }
            }
        }
        Ok(out)
    }

    /// A tag's own message (that of the entry that created it, after its
    /// last deletion) and, when an erasure moved it since, that entry's.
    async fn tag_message(&self, name: &str, head: &RefEntry) -> Result<(String, Option<String>)> {
        if head.seq <= 1 {
            return Ok((head.message.clone(), None));
        }
        let log = self.store.ref_log(RefKind::Tag, name).await?;
        let created = log
            .iter()
            .rposition(|e| e.target.is_none())
            .map_or(0, |deleted| deleted + 1);
        let Some(first) = log.get(created) else {
            return Ok((head.message.clone(), None));
        };
        let note = (first.seq != head.seq).then(|| head.message.clone());
        Ok((first.message.clone(), note))
    }

    /// Creates a ref at a revision.
    pub async fn create_ref(
        &self,
        kind: RefKind,
        name: &str,
        rev: &str,
        message: &str,
    ) -> Result<VersionId> {
        let what = match kind {
            RefKind::Branch => "branch",
            RefKind::Tag => "tag",
        };
        check_name(what, name)?;
        let other = match kind {
            RefKind::Branch => RefKind::Tag,
            RefKind::Tag => RefKind::Branch,
        };
        if let Some(RefEntry {
            target: Some(t), ..
        }) = self.store.ref_head(other, name).await?
        {
            // A revision naming both would be ambiguous.
            return Err(Error::NameTaken {
                kind: what,
                name: name.to_string(),
                other: kind_name(other),
                target: t.short(12),
            });
        }
        let target = self.resolve(rev).await?;
        let head = self.store.ref_head(kind, name).await?;
        if let Some(RefEntry {
            target: Some(t), ..
        }) = &head
        {
            return Err(Error::RefExists {
                kind: what,
                name: name.to_string(),
                target: t.short(12),
            });
        }
        self.move_ref(
            kind,
            name,
            head.as_ref().map_or(0, |h| h.seq),
            Some(target),
            message,
        )
        .await?;
        Ok(target)
    }

    /// Deletes a ref (appends a deleting entry to its log; the ref stays
    /// restorable with [`Repo::restore_ref`], and gc keeps what it named
    /// for its grace period). Without `force`, the default branch and the
    /// repository's only branch are refused: with no branch left, gc would
    /// expire every version.
    pub async fn delete_ref(&self, kind: RefKind, name: &str, force: bool) -> Result<VersionId> {
        let old = self.ref_target(kind, name).await?;
        if kind == RefKind::Branch && !force {
            let live = self.refs(RefKind::Branch).await?;
            let reason = if live.len() == 1 {
                Some(format!("'{name}' is the repository's only branch"))
            } else if name == DEFAULT_BRANCH {
                Some(format!("'{name}' is the branch commits go to by default"))
            } else {
                None
            };
            if let Some(reason) = reason {
                return Err(Error::ProtectedBranch {
                    name: name.to_string(),
                    reason,
                    what: "every version only it reaches".into(),
                });
            }
        }
        let head = self.store.ref_head(kind, name).await?;
        self.move_ref(kind, name, head.map_or(0, |h| h.seq), None, "deleted")
            .await?;
        Ok(old)
    }

    /// Every deleted ref of a kind: its name, the version it named last,
    /// and when it was deleted (`time_ms`, `message` of the deleting entry);
    /// `note` says when gc has expired that version since.
    pub async fn deleted_refs(&self, kind: RefKind) -> Result<Vec<RefInfo>> {
        let mut out = self.deleted_refs_as_logged(kind).await?;
        for r in &mut out {
            // Past gc's grace its version may be gone: say so, rather than
            // offer a restore that cannot be.
            if let Some(t) = self.tombstone(&r.target).await? {
                if !self.store.has_blob(&r.target.0).await? {
                    r.note = Some(format!(
                        "its version was expired by gc ({}); it cannot be restored",
                        t.reason
                    ));
                }
            }
        }
        Ok(out)
    }

    /// The deleted refs of a kind and what each named last, as their logs
    /// say (no note: nothing else is read).
    async fn deleted_refs_as_logged(&self, kind: RefKind) -> Result<Vec<RefInfo>> {
        let mut out = Vec::new();
        for name in self.store.ref_names(kind).await? {
            let log = self.store.ref_log(kind, &name).await?;
            let Some(head) = log.last() else { continue };
            if head.target.is_some() {
                continue;
            }
            if let Some(last) = last_named(&log) {
                out.push(RefInfo {
                    name,
                    target: last,
                    time_ms: head.time_ms,
                    message: head.message.clone(),
                    note: None,
                    entries: head.seq,
                });
            }
        }
        Ok(out)
    }

    /// Restores a deleted ref to the version it named last.
    pub async fn restore_ref(&self, kind: RefKind, name: &str) -> Result<VersionId> {
        let what = kind_name(kind);
        let Some(d) = self
            .deleted_refs_as_logged(kind)
            .await?
            .into_iter()
            .find(|r| r.name == name)
        else {
            return Err(match self.store.ref_head(kind, name).await? {
                Some(RefEntry {
                    target: Some(t), ..
                }) => Error::RefExists {
                    kind: what,
                    name: name.to_string(),
                    target: t.short(12),
                },
                _ => self.unknown_ref(kind, name).await,
            });
        };
        // The version must still be readable (gc keeps it for the grace
        // period after the deletion; later it may have expired, which is
        // said as such); an erasure since stands in with its replacement.
        let target = self
            .erased_since(d.target)
            .await?
            .map_or(d.target, |r| r.new);
        // A tag comes back with its own message: the one it was created
        // with before its deletion.
        let message = match kind {
            RefKind::Tag => {
                let log = self.store.ref_log(kind, name).await?;
                tag_message_before_deletion(&log).unwrap_or_else(|| "restored".into())
            }
            RefKind::Branch => "restored".into(),
        };
        self.move_ref(kind, name, d.entries, Some(target), &message)
            .await?;
        Ok(target)
    }

    pub(crate) async fn move_ref(
        &self,
        kind: RefKind,
        name: &str,
        seq: u64,
        target: Option<VersionId>,
        message: &str,
    ) -> Result<()> {
        let entry = RefEntry {
            format: FORMAT_VERSION,
            seq: seq + 1,
            target,
            time_ms: now_ms(),
            author: self.author.clone(),
            message: message.to_string(),
            tables: None,
            hold: None,
        };
        Ok(self.store.append_ref(kind, name, &entry).await?)
    }

    /// The head of a branch that a write starts from. While an erasure
    /// holds the branch ([`RefHold`]) it waits for the next entry, or for
    /// the hold to lapse, and never for longer than a hold can count: the
    /// erasure moves the branch from the held entry, and a write that
    /// started from it would only lose that race.
    pub(crate) async fn head_to_write(&self, branch: &str) -> Result<Option<RefEntry>> {
        let started = std::time::Instant::now();
        let longest = std::time::Duration::from_millis(RefHold::MAX_MS as u64);
        let mut attempt = 0;
        loop {
            let head = self.store.ref_head(RefKind::Branch, branch).await?;
            let held = head.as_ref().and_then(|h| h.held_at(now_ms())).is_some();
            if !held || started.elapsed() >= longest {
                return Ok(head);
            }
            attempt += 1;
            tokio::time::sleep(transaction::retry_pause(attempt)).await;
        }
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
