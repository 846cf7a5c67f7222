//! Comparing two versions (`diff`) and making a branch equal an older one
//! (`restore`).

use std::collections::{BTreeMap, BTreeSet};

use arrow::array::RecordBatch;
use serde::Serialize;
use tablepin_format::{
    ContentHash, ObjectId, RefKind, TableChange, TableSnapshot, Version, VersionId, FORMAT_VERSION,
};

use super::{list_or_none, now_ms, Repo, Retry};
use crate::error::{Error, Result};
use crate::table::diff::{self, ColumnChange, DiffCounts, DiffStats};
use crate::table::plan;
use crate::table::window::empty_like;

/// What differs in one table between two versions.
#[derive(Debug, Clone, Serialize)]
pub struct TableDiff {
    /// The table.
    pub table: String,
    /// The key the rows were matched by (empty: compared as multisets of
    /// rows).
    pub key: Vec<String>,
    /// Rows in the older version (`None`: it has no such table).
    pub old_rows: Option<u64>,
    /// Rows in the newer version (`None`: it has no such table).
    pub new_rows: Option<u64>,
    /// Content hash in the older version.
    pub old_content_hash: Option<ContentHash>,
    /// Content hash in the newer version.
    pub new_content_hash: Option<ContentHash>,
    /// Columns added, dropped or retyped.
    pub columns: ColumnChange,
    /// Keys (rows) added, removed and modified.
    pub counts: DiffCounts,
    /// What the diff read and what it skipped.
    pub stats: DiffStats,
    /// The differing rows: `diff_type` (`added`, `removed`, `modified`),
    /// then `from_C` and `to_C` for each column both versions have; keyed
    /// tables in key order.
    #[serde(skip)]
    pub rows: RecordBatch,
}

/// What differs between two versions.
#[derive(Debug, Clone, Serialize)]
pub struct Diff {
    /// The older version.
    pub old: VersionId,
    /// The newer version.
    pub new: VersionId,
    /// Each table either version has (or the one asked for), by name.
    pub tables: Vec<TableDiff>,
}

/// Options of [`Repo::restore`].
#[derive(Debug, Clone)]
pub struct RestoreOptions {
    /// The branch that gets the new version.
    pub branch: String,
    /// Only this table (default: every table, and tables the revision does
    /// not have are dropped).
    pub table: Option<String>,
    /// The commit message (default: "restore REV").
    pub message: Option<String>,
    /// How long to keep retrying while other writers move the branch.
    pub retry_for: std::time::Duration,
}

impl Default for RestoreOptions {
    fn default() -> Self {
        Self {
            branch: super::DEFAULT_BRANCH.into(),
            table: None,
            message: None,
            retry_for: std::time::Duration::from_secs(60),
        }
    }
}

/// What a restore did.
#[derive(Debug, Clone, Serialize)]
pub struct RestoreResult {
    /// The version restored from.
    pub from: VersionId,
    /// The new version (`None`: the branch had those tables already).
    pub version: Option<VersionId>,
    /// The branch's head before.
    pub parent: Option<VersionId>,
    /// The branch.
    pub branch: String,
    /// What changed, by table.
    pub changes: BTreeMap<String, TableChange>,
}

impl Repo {
    /// What differs between two revisions, for one table or all of them.
    /// Only what the versions do not share is read: the data files one has
    /// and the other has not, and the positions their deletion vectors
    /// disagree on.
    /// Each side is a revision or a version id ([`super::Rev`]).
    pub async fn diff<'a, 'b>(
        &self,
        old: impl Into<super::Rev<'a>>,
        new: impl Into<super::Rev<'b>>,
        table: Option<&str>,
    ) -> Result<Diff> {
        let (old, new) = (old.into(), new.into());
        let (old, new) = futures::try_join!(self.resolve_rev(old), self.resolve_rev(new))?;
        let (old, new) = (&old, &new);
        let (vo, vn) = futures::try_join!(self.version(old), self.version(new))?;
        let names: BTreeSet<&String> = vo.tables.keys().chain(vn.tables.keys()).collect();
        let names: Vec<String> = match table {
            None => names.into_iter().cloned().collect(),
            Some(t) if names.contains(&t.to_string()) => vec![t.to_string()],
            Some(t) => {
                return Err(Error::UnknownTable {
                    table: t.to_string(),
                    version: format!("{} or {}", old.short(12), new.short(12)),
                    available: list_or_none(names.iter().map(|s| s.as_str())),
                })
            }
        };
        let mut tables = Vec::with_capacity(names.len());
        for name in names {
            let load = |id: VersionId, v: &Version| {
                let name = name.clone();
                let snap = v.tables.get(&name).copied();
                async move {
                    match snap {
                        Some(s) => self.load_snapshot(&id, &name, &s).await.map(Some),
                        None => Ok(None),
                    }
                }
            };
            let (so, sn) = futures::try_join!(load(*old, &vo), load(*new, &vn))?;
            // A data file lost or damaged is the version's damage (exit 5),
            // named as every other read names it.
            let at = if sn.is_some() { *new } else { *old };
            let d = self.diff_snapshots(&name, so.as_ref(), sn.as_ref()).await;
            tables.push(d.map_err(|e| super::named(e, Some(at), &name))?);
        }
        Ok(Diff {
            old: *old,
            new: *new,
            tables,
        })
    }

    /// The diff of one table's two snapshots (at least one present).
    async fn diff_snapshots(
        &self,
        table: &str,
        old: Option<&TableSnapshot>,
        new: Option<&TableSnapshot>,
    ) -> Result<TableDiff> {
        let (old_s, new_s) = match (old, new) {
            (Some(o), Some(n)) => (o.clone(), n.clone()),
            (Some(o), None) => (o.clone(), empty_like(o)),
            (None, Some(n)) => (empty_like(n), n.clone()),
            (None, None) => {
                return Err(Error::Internal(format!(
                    "diff of table '{table}' that neither version has"
                )))
            }
        };
        let unshared = diff::unshared(&self.store, &old_s, &new_s).await?;
        let (os, ns) = (
            crate::table::schema_of(&old_s),
            crate::table::schema_of(&new_s),
        );
        let aligned = diff::align(&os, &unshared.old, &ns, &unshared.new)?;
        let key = if old_s.key == new_s.key {
            old_s.key.clone()
        } else {
            Vec::new()
        };
        let key_at: Option<Vec<usize>> = key
            .iter()
            .map(|k| aligned.schema.index_of(k).ok())
            .collect();
        let (key, key_at) = match key_at {
            Some(at) => (key, at),
            None => (Vec::new(), Vec::new()),
        };
        let compared = diff::compare(&key_at, &aligned.old, &aligned.new)?;
        Ok(TableDiff {
            table: table.to_string(),
            key,
            old_rows: old.map(|s| s.rows),
            new_rows: new.map(|s| s.rows),
            old_content_hash: old.map(|s| s.content_hash),
            new_content_hash: new.map(|s| s.content_hash),
            counts: DiffCounts::of(&aligned, &compared),
            rows: diff::rows_batch(&aligned, &compared)?,
            columns: aligned.columns,
            stats: unshared.stats,
        })
    }

    /// Makes a new version on a branch whose tables are those of `rev`
    /// (all of them, or `opts.table`'s): no data is written, the version
    /// names the snapshots `rev` names. Returns no version when the branch
    /// has those tables already.
    pub async fn restore(&self, rev: &str, opts: &RestoreOptions) -> Result<RestoreResult> {
        super::check_name("branch", &opts.branch)?;
        let from = self.resolve(rev).await?;
        let source = self.version(&from).await?;
        if let Some(t) = &opts.table {
            if !source.tables.contains_key(t) {
                return Err(Error::UnknownTable {
                    table: t.clone(),
                    version: format!("{rev} ({})", from.short(12)),
                    available: list_or_none(source.tables.keys().map(String::as_str)),
                });
            }
        }
        let message = opts
            .message
            .clone()
            .unwrap_or_else(|| format!("restore {rev}"));
        let mut retry = Retry::new(&opts.branch, opts.retry_for);
        loop {
            retry.next().await?;
            let Some(head) = self.head_to_write(&opts.branch).await? else {
                return Err(self.unknown_ref(RefKind::Branch, &opts.branch).await);
            };
            let parent = head.target;
            let parent_version = match &parent {
                Some(p) => Some(self.version(p).await?),
                None => None,
            };
            let current = parent_version
                .as_ref()
                .map(|v| v.tables.clone())
                .unwrap_or_default();
            let tables = restored_tables(&current, &source.tables, opts.table.as_deref());
            let mut result = RestoreResult {
                from,
                version: None,
                parent,
                branch: opts.branch.clone(),
                changes: BTreeMap::new(),
            };
            if tables == current {
                return Ok(result);
            }
            result.changes = self
                .restore_changes(parent.as_ref(), &current, &from, &tables)
                .await?;
            let version = Version {
                format: FORMAT_VERSION,
                parents: parent.into_iter().collect(),
                time_ms: now_ms(),
                author: self.author.clone(),
                message: message.clone(),
                tables,
                changes: result.changes.clone(),
                replaces: None,
            };
            if let Some((id, _)) = self
                .land_version(&version, &opts.branch, Some(&head))
                .await?
            {
                result.version = Some(id);
                return Ok(result);
            }
        }
    }

    /// What a restore changes in each table whose snapshot it replaces.
    pub(crate) async fn restore_changes(
        &self,
        parent: Option<&VersionId>,
        current: &BTreeMap<String, ObjectId>,
        from: &VersionId,
        tables: &BTreeMap<String, ObjectId>,
    ) -> Result<BTreeMap<String, TableChange>> {
        let mut out = BTreeMap::new();
        let names: BTreeSet<&String> = current.keys().chain(tables.keys()).collect();
        for name in names {
            if current.get(name) == tables.get(name) {
                continue;
            }
            let old = match (parent, current.get(name)) {
                (Some(p), Some(s)) => Some(self.load_snapshot(p, name, s).await?),
                _ => None,
            };
            let new = match tables.get(name) {
                Some(s) => Some(self.load_snapshot(from, name, s).await?),
                None => None,
            };
            let d = self
                .diff_snapshots(name, old.as_ref(), new.as_ref())
                .await
                .map_err(|e| super::named(e, Some(*from), name))?;
            let checks = match &new {
                Some(n) => plan::checks(old.as_ref(), n),
                None => old
                    .as_ref()
                    .map(|o| plan::checks(Some(o), &empty_like(o)))
                    .unwrap_or_default(),
            };
            out.insert(
                name.clone(),
                TableChange {
                    rows_added: d.counts.added,
                    rows_changed: d.counts.modified,
                    rows_deleted: d.counts.removed,
                    bytes_new: 0,
                    blobs_new: 0,
                    checks,
                },
            );
        }
        Ok(out)
    }
}

/// The tables of a restored version: `source`'s, or `current`'s with one
/// table taken from `source`. No I/O.
fn restored_tables(
    current: &BTreeMap<String, ObjectId>,
    source: &BTreeMap<String, ObjectId>,
    table: Option<&str>,
) -> BTreeMap<String, ObjectId> {
    match table {
        None => source.clone(),
        Some(t) => {
            let mut out = current.clone();
            if let Some(s) = source.get(t) {
                out.insert(t.to_string(), *s);
            }
            out
        }
    }
}
