//! A version as read. [`Repo::snapshot`] resolves a revision once, to a
//! [`Snapshot`]; every read of its tables goes through [`Snapshot::scan`]
//! (collected) or [`Snapshot::stream`], the two executors of one read plan
//! (`table::scan`), which prunes files by key range and statistics and
//! pages by the page index before anything is decoded.

use super::*;

/// What names a version: a revision as a user writes it (resolved, and
/// followed to its replacement when an erasure replaced it), or a version
/// id taken as it is.
#[derive(Debug, Clone, Copy)]
pub enum Rev<'a> {
    /// A tag, a branch, a version id or prefix, `~N`, `@TIME`: see
    /// `repo::rev`.
    Named(&'a str),
    /// Exactly this version.
    Id(VersionId),
}

impl<'a> From<&'a str> for Rev<'a> {
    fn from(rev: &'a str) -> Self {
        Rev::Named(rev)
    }
}

impl<'a> From<&'a String> for Rev<'a> {
    fn from(rev: &'a String) -> Self {
        Rev::Named(rev)
    }
}

impl From<VersionId> for Rev<'_> {
    fn from(id: VersionId) -> Self {
        Rev::Id(id)
    }
}

impl From<&VersionId> for Rev<'_> {
    fn from(id: &VersionId) -> Self {
        Rev::Id(*id)
    }
}

/// A table being read: the version, its snapshot, and the rows as a stream
/// ([`Snapshot::stream`]).
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

/// A version of the repository, resolved once ([`Repo::snapshot`]): its
/// record, its tables, and the reads of them.
#[derive(Debug, Clone)]
pub struct Snapshot<'a> {
    repo: &'a Repo,
    /// The revision it was resolved from, to resolve again when a read
    /// loses a race with an erasure that replaced the version.
    rev: Option<String>,
    id: VersionId,
    version: Version,
    replaced: Option<Replaced>,
}

impl Repo {
    /// The version a revision (or a version id) names.
    pub(crate) async fn resolve_rev(&self, rev: Rev<'_>) -> Result<VersionId> {
        match rev {
            Rev::Named(rev) => self.resolve(rev).await,
            Rev::Id(id) => Ok(id),
        }
    }

    /// The version a revision (or a version id) names, as read: a
    /// revision naming a version that an erasure replaced gives the
    /// replacement, and [`Snapshot::replaced`] says so.
    pub async fn snapshot<'r>(&self, rev: impl Into<Rev<'r>>) -> Result<Snapshot<'_>> {
        let (named, (id, replaced)) = match rev.into() {
            Rev::Named(rev) => (Some(rev.to_string()), self.resolve_noted(rev).await?),
            Rev::Id(id) => (None, (id, None)),
        };
        Ok(Snapshot {
            repo: self,
            rev: named,
            id,
            version: self.version(&id).await?,
            replaced,
        })
    }

    /// Reads a table at a revision: [`Repo::snapshot`] then
    /// [`Snapshot::read`].
    pub async fn read(
        &self,
        rev: &str,
        table: &str,
        columns: Option<&[String]>,
    ) -> Result<TableRead> {
        self.snapshot(rev).await?.read(table, columns).await
    }

    /// A table's snapshot in a version whose record the caller has read
    /// already.
    pub(crate) async fn snapshot_of(
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
}

impl Snapshot<'_> {
    /// The version's id.
    pub fn id(&self) -> VersionId {
        self.id
    }

    /// The version's record.
    pub fn version(&self) -> &Version {
        &self.version
    }

    /// When the revision named a version that an erasure replaced: which,
    /// and by what. Reading reads the replacement, which holds the same
    /// rows but the erased ones.
    pub fn replaced(&self) -> Option<&Replaced> {
        self.replaced.as_ref()
    }

    /// A table's snapshot: its files, key, schema and content hash.
    pub async fn table(&self, table: &str) -> Result<TableSnapshot> {
        self.repo.snapshot_of(&self.id, &self.version, table).await
    }

    /// The data files a table is made of.
    pub async fn files(&self, table: &str) -> Result<Vec<FileEntry>> {
        Ok(self.table(table).await?.files)
    }

    /// Reads a table's columns (all of them with `None`).
    pub async fn read(&self, table: &str, columns: Option<&[String]>) -> Result<TableRead> {
        self.scan(table, &ScanOptions::columns(columns)).await
    }

    /// Reads the columns and rows `opts` asks for of a table. A blob that
    /// vanishes because the revision moved meanwhile (an erasure replaced
    /// the branch head) is a lost race: the read starts again on what the
    /// revision names now, and [`TableRead::version`] says which version
    /// that was.
    pub async fn scan(&self, table: &str, opts: &ScanOptions) -> Result<TableRead> {
        let mut version = self.id;
        let mut tries = 0;
        loop {
            let read = match version == self.id {
                true => self.scan_once(&self.id, &self.version, table, opts).await,
                false => {
                    let v = self.repo.version(&version).await?;
                    self.scan_once(&version, &v, table, opts).await
                }
            };
            match (read, &self.rev) {
                (Err(e), Some(rev)) if e.is_missing() && tries < 3 => {
                    let now = self.repo.resolve(rev).await?;
                    if now == version {
                        return Err(e);
                    }
                    version = now;
                    tries += 1;
                }
                (other, _) => return other,
            }
        }
    }

    async fn scan_once(
        &self,
        id: &VersionId,
        v: &Version,
        table: &str,
        opts: &ScanOptions,
    ) -> Result<TableRead> {
        let store = &self.repo.store;
        let snapshot = self.repo.snapshot_of(id, v, table).await?;
        let (schema, batches, stats) = table::read(store, &snapshot, table, opts)
            .await
            .map_err(|e| named(e, Some(*id), table))?;
        Ok(TableRead {
            version: *id,
            snapshot,
            schema,
            batches,
            stats,
        })
    }

    /// Streams the columns and rows `opts` asks for of a table, in the
    /// order [`Snapshot::scan`] gives them, without holding the table: an
    /// unkeyed table file by file, a keyed one merged by key as each file
    /// decodes a batch at a time (the files' verified bytes are held
    /// meanwhile, not their decoded rows).
    pub async fn stream(&self, table: &str, opts: &ScanOptions) -> Result<TableStream> {
        let version = self.id;
        let snapshot = self.table(table).await?;
        let s = table::scan::open(self.repo.store.clone(), &snapshot, table, opts)
            .await
            .map_err(|e| named(e, Some(version), table))?;
        let name = table.to_string();
        let rows = s
            .rows
            .map(move |r| r.map_err(|e| named(e, Some(version), &name)))
            .boxed();
        Ok(TableStream {
            version,
            snapshot,
            schema: s.schema,
            rows,
            stats: s.stats,
        })
    }
}
