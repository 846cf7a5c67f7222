//! Bringing one branch's work into another (`merge`) and undoing a
//! version (`revert`): three-way merges from the nearest common ancestor.
//!
//! A table only one side changed since the base is taken from that side as
//! it is (its snapshot, no data written). A table both changed is merged
//! by key (`table::threeway` decides, with no I/O): each side's changes
//! are the diff of its snapshot against the base's, which reads only what
//! the two do not share, so a merge costs the rows that changed on both
//! sides since the base, not the table. What theirs changed and ours did
//! not is committed onto ours by the planner (a delete of the keys theirs
//! removed, then an upsert of the rows theirs set), as any commit is.
//!
//! Conflicts that no resolution settles leave the branch untouched: the
//! result names them, row by row, and nothing is written.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::Arc;

use arrow::array::{RecordBatch, UInt32Array};
use arrow::compute::{concat_batches, take_record_batch};
use arrow::datatypes::{Field, Schema, SchemaRef};
use bytes::Bytes;
use serde::Serialize;
use tablepin_format::{
    encode_manifest, ContentHash, ObjectId, RefEntry, RefKind, TableChange, TableSnapshot, Version,
    VersionId, FORMAT_VERSION,
};

use super::{now_ms, Repo, Retry};
use crate::error::{Error, Result};
use crate::table::decide::Loc;
use crate::table::diff::{self, Aligned, Compared};
use crate::table::plan::{self, Mode, PlanInput, SchemaRules, Staged};
use crate::table::schema_of;
use crate::table::threeway::{self, HeldBy, Settle, Side};
use crate::table::window::empty_like;
use tablepin_rowhash::hash_rows;

/// Which side a conflict is settled for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Strategy {
    /// The branch merged into keeps its rows.
    Ours,
    /// The merged branch's rows are taken.
    Theirs,
}

/// Options of [`Repo::merge`] and [`Repo::revert`].
#[derive(Debug, Clone)]
pub struct MergeOptions {
    /// The branch that gets the merge.
    pub into: String,
    /// How every table's conflicts are settled (`None`: they are reported
    /// and nothing is merged).
    pub strategy: Option<Strategy>,
    /// How one table's conflicts are settled, over `strategy`.
    pub table_strategy: BTreeMap<String, Strategy>,
    /// The rows conflicting keys should have, by table (in the table's
    /// schema, one row per conflicting key): a person's resolution.
    pub resolved: BTreeMap<String, (SchemaRef, Vec<RecordBatch>)>,
    /// The commit message (default: "merge SOURCE into BRANCH", "revert
    /// REV").
    pub message: Option<String>,
    /// How long to keep retrying while other writers move the branch.
    pub retry_for: std::time::Duration,
}

impl Default for MergeOptions {
    fn default() -> Self {
        Self {
            into: super::DEFAULT_BRANCH.into(),
            strategy: None,
            table_strategy: BTreeMap::new(),
            resolved: BTreeMap::new(),
            message: None,
            retry_for: std::time::Duration::from_secs(60),
        }
    }
}

/// How a merge ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MergeOutcome {
    /// The branch holds the merged history already: nothing was written.
    UpToDate,
    /// The branch was behind: it now names the merged head (no version,
    /// no data).
    FastForward,
    /// A new version holds both sides' changes.
    Merged,
    /// Keys both sides changed differently and nothing settled them: the
    /// branch is untouched.
    Conflicts,
}

/// What a merge did to one table (tables neither side changed are not
/// listed).
#[derive(Debug, Clone, Serialize)]
pub struct TableMerge {
    /// The table.
    pub table: String,
    /// `theirs` (taken as the merged side has it), `ours` (kept as the
    /// branch has it), `merged` (both sides' changes), `dropped` (the
    /// merged side dropped it) or `conflicts`.
    pub how: &'static str,
    /// Rows after the merge (`None`: dropped, or not merged).
    pub rows: Option<u64>,
    /// The content hash after the merge.
    pub content_hash: Option<ContentHash>,
    /// What the merge changed against the branch's head.
    pub change: TableChange,
    /// Keys both sides changed differently.
    pub conflicts: u64,
    /// Keys both sides changed alike (taken once).
    pub same: u64,
    /// The conflicts, one row per key: the key, `conflict`, `columns`,
    /// then `base_C`, `ours_C`, `theirs_C` for every other column C.
    #[serde(skip)]
    pub conflict_rows: Option<RecordBatch>,
}

/// What a merge or a revert did.
#[derive(Debug, Clone, Serialize)]
pub struct MergeResult {
    /// What was merged (the revision given).
    pub source: String,
    /// The branch merged into.
    pub into: String,
    /// The merge base (`None`: the histories share no version).
    pub base: Option<VersionId>,
    /// The branch's head before.
    pub ours: VersionId,
    /// The merged side's version.
    pub theirs: VersionId,
    /// How it ended.
    pub outcome: MergeOutcome,
    /// The branch's new head (`None`: up to date, or conflicts).
    pub version: Option<VersionId>,
    /// Each table either side changed.
    pub tables: Vec<TableMerge>,
}

/// One table's part of a merge.
enum Merged {
    /// The merged side's snapshot (or none: dropped).
    Take(Option<ObjectId>),
    /// A new snapshot and the blobs it needs.
    Planned(Box<Staged>),
    /// Unsettled conflicts.
    Conflicts,
}

/// A three-way merge to run: the base, ours and theirs versions.
struct ThreeWay<'a> {
    base: Option<&'a Version>,
    ours: &'a Version,
    theirs: &'a Version,
}

impl Repo {
    /// Merges `source` (a branch or any revision) into `opts.into`: a
    /// fast-forward when the branch is behind it, otherwise a version with
    /// two parents (the branch's head, then `source`) holding both sides'
    /// changes since their nearest common ancestor. Conflicts that
    /// `opts` does not settle are returned with nothing written
    /// ([`MergeOutcome::Conflicts`]).
    pub async fn merge(&self, source: &str, opts: &MergeOptions) -> Result<MergeResult> {
        super::check_name("branch", &opts.into)?;
        let message = opts
            .message
            .clone()
            .unwrap_or_else(|| format!("merge {source} into {}", opts.into));
        let mut retry = Retry::new(&opts.into, opts.retry_for);
        loop {
            retry.next().await?;
            let (head, ours) = self.branch_head(&opts.into).await?;
            let theirs = self.resolve(source).await?;
            let base = self.merge_base(ours, theirs).await?;
            let mut result = MergeResult {
                source: source.to_string(),
                into: opts.into.clone(),
                base,
                ours,
                theirs,
                outcome: MergeOutcome::UpToDate,
                version: None,
                tables: Vec::new(),
            };
            if base == Some(theirs) || ours == theirs {
                return Ok(result);
            }
            if base == Some(ours) {
                if self
                    .fast_forward(&head, &opts.into, theirs, &message)
                    .await?
                {
                    result.outcome = MergeOutcome::FastForward;
                    result.version = Some(theirs);
                    return Ok(result);
                }
                continue;
            }
            let parents = vec![ours, theirs];
            if self
                .merge_once(&head, parents, base, theirs, opts, &message, &mut result)
                .await?
            {
                return Ok(result);
            }
        }
    }

    /// Undoes `rev` on `opts.into`: a new version whose tables are the
    /// branch's head less `rev`'s changes (a three-way merge with `rev` as
    /// the base and its parent as the merged side), conflicts handled as
    /// [`Repo::merge`] handles them.
    pub async fn revert(&self, rev: &str, opts: &MergeOptions) -> Result<MergeResult> {
        super::check_name("branch", &opts.into)?;
        let target = self.resolve(rev).await?;
        let v = self.version(&target).await?;
        let Some(&parent) = v.parents.first() else {
            return Err(Error::InvalidArgument(format!(
                "{rev} ({}) is the first version and has no parent to go back to: `tablepin restore` a revision instead",
                target.short(12)
            )));
        };
        let message = opts
            .message
            .clone()
            .unwrap_or_else(|| format!("revert {rev}"));
        let mut retry = Retry::new(&opts.into, opts.retry_for);
        loop {
            retry.next().await?;
            let (head, ours) = self.branch_head(&opts.into).await?;
            let mut result = MergeResult {
                source: rev.to_string(),
                into: opts.into.clone(),
                base: Some(target),
                ours,
                theirs: parent,
                outcome: MergeOutcome::UpToDate,
                version: None,
                tables: Vec::new(),
            };
            if self
                .merge_once(
                    &head,
                    vec![ours],
                    Some(target),
                    parent,
                    opts,
                    &message,
                    &mut result,
                )
                .await?
            {
                return Ok(result);
            }
        }
    }

    /// A branch's head entry and version.
    async fn branch_head(&self, branch: &str) -> Result<(RefEntry, VersionId)> {
        match self.head_to_write(branch).await? {
            Some(h) => match h.target {
                Some(t) => Ok((h, t)),
                None => Err(self.unknown_ref(RefKind::Branch, branch).await),
            },
            None => Err(self.unknown_ref(RefKind::Branch, branch).await),
        }
    }

    /// The nearest common ancestor of two versions that is still stored
    /// (`None`: the histories share none): the first of `ours`'s
    /// ancestors, breadth first, that `theirs` reaches.
    pub(crate) async fn merge_base(
        &self,
        ours: VersionId,
        theirs: VersionId,
    ) -> Result<Option<VersionId>> {
        let reached = self.stored_ancestry(vec![theirs], None).await?;
        let mut todo = VecDeque::from([ours]);
        let mut seen = BTreeSet::new();
        while let Some(id) = todo.pop_front() {
            if !seen.insert(id) {
                continue;
            }
            if reached.contains(&id) {
                return Ok(Some(id));
            }
            let parents = match self.version(&id).await {
                Ok(v) => v.parents,
                Err(e) if e.is_missing() => match self.tombstone(&id).await? {
                    Some(t) => t.parents,
                    None => Vec::new(),
                },
                Err(e) => return Err(e),
            };
            todo.extend(parents);
        }
        Ok(None)
    }

    /// Moves the branch to `to` after `head`; false when another writer
    /// moved it first.
    async fn fast_forward(
        &self,
        head: &RefEntry,
        branch: &str,
        to: VersionId,
        message: &str,
    ) -> Result<bool> {
        let v = self.version(&to).await?;
        let entry = RefEntry {
            format: FORMAT_VERSION,
            seq: head.seq + 1,
            target: Some(to),
            time_ms: now_ms(),
            author: self.author.clone(),
            message: format!("merge (fast-forward): {message}"),
            tables: Some(v.tables),
            hold: None,
        };
        match self.store.append_ref(RefKind::Branch, branch, &entry).await {
            Ok(()) => Ok(true),
            Err(tablepin_store::StoreError::RefConflict { .. }) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// One attempt of a three-way merge onto `head` (whose version is
    /// `parents[0]`): fills `result` and lands the version. False when
    /// another writer moved the branch first.
    #[allow(clippy::too_many_arguments)]
    async fn merge_once(
        &self,
        head: &RefEntry,
        parents: Vec<VersionId>,
        base: Option<VersionId>,
        theirs: VersionId,
        opts: &MergeOptions,
        message: &str,
        result: &mut MergeResult,
    ) -> Result<bool> {
        let ours = parents[0];
        let base_v = match base {
            Some(b) => Some(self.version(&b).await?),
            None => None,
        };
        let (ours_v, theirs_v) = futures::try_join!(self.version(&ours), self.version(&theirs))?;
        let three = ThreeWay {
            base: base_v.as_ref(),
            ours: &ours_v,
            theirs: &theirs_v,
        };
        let ids = (base, ours, theirs);
        let mut merged = BTreeMap::new();
        result.tables.clear();
        for name in changed_tables(&three) {
            let (m, report) = self.merge_table(&name, &three, ids, opts).await?;
            merged.insert(name, m);
            result.tables.push(report);
        }
        if merged.values().any(|m| matches!(m, Merged::Conflicts)) {
            result.outcome = MergeOutcome::Conflicts;
            return Ok(true);
        }
        let Some(landed) = self
            .land_merge(head, parents, &ours_v, merged, message, result)
            .await?
        else {
            return Ok(false);
        };
        result.outcome = MergeOutcome::Merged;
        result.version = Some(landed);
        Ok(true)
    }

    /// One table's merge and its report.
    async fn merge_table(
        &self,
        name: &str,
        three: &ThreeWay<'_>,
        (base, ours, theirs): (Option<VersionId>, VersionId, VersionId),
        opts: &MergeOptions,
    ) -> Result<(Merged, TableMerge)> {
        let snap = |v: Option<&Version>| v.and_then(|v| v.tables.get(name)).copied();
        let (b, o, t) = (
            snap(three.base),
            snap(Some(three.ours)),
            snap(Some(three.theirs)),
        );
        let strategy = opts.table_strategy.get(name).copied().or(opts.strategy);
        let mut report = TableMerge {
            table: name.to_string(),
            how: "theirs",
            rows: None,
            content_hash: None,
            change: TableChange::default(),
            conflicts: 0,
            same: 0,
            conflict_rows: None,
        };
        // One side dropped it, the other changed it: the side asked for.
        if (o.is_none() || t.is_none()) && strategy == Some(Strategy::Ours) {
            report.how = "ours";
            return Ok((Merged::Take(o), report));
        }
        // Ours did not touch it: theirs as it is.
        if o == b || (o.is_none() || t.is_none()) && strategy == Some(Strategy::Theirs) {
            report.how = if t.is_some() { "theirs" } else { "dropped" };
            if let Some(t) = &t {
                let s = self.load_snapshot(&theirs, name, t).await?;
                (report.rows, report.content_hash) = (Some(s.rows), Some(s.content_hash));
            }
            return Ok((Merged::Take(t), report));
        }
        let (Some(o_id), Some(t_id)) = (o, t) else {
            let which = if o.is_none() {
                "ours dropped it and theirs changed it"
            } else {
                "theirs dropped it and ours changed it"
            };
            return Err(Error::InvalidArgument(format!(
                "table '{name}' cannot be merged: {which}; keep one side's table with --ours={name} or --theirs={name}"
            )));
        };
        let os = self.load_snapshot(&ours, name, &o_id).await?;
        let ts = self.load_snapshot(&theirs, name, &t_id).await?;
        let bs = match (base, b) {
            (Some(bv), Some(b)) => self.load_snapshot(&bv, name, &b).await?,
            _ => empty_like(&os),
        };
        let schema = merged_schema(name, &bs, &os, &ts)?;
        let (staged, counts) = self
            .merge_snapshots(
                name,
                &schema,
                [&bs, &os, &ts],
                strategy,
                opts.resolved.get(name),
            )
            .await
            .map_err(|e| super::named(e, Some(theirs), name))?;
        report.conflicts = counts.conflicts;
        report.same = counts.same;
        match staged {
            Some(s) => {
                report.how = "merged";
                report.rows = Some(s.plan.snapshot.rows);
                report.content_hash = Some(s.plan.snapshot.content_hash);
                report.change = TableChange {
                    rows_added: s.plan.rows_added,
                    rows_changed: s.plan.rows_changed,
                    rows_deleted: s.plan.rows_deleted,
                    bytes_new: 0,
                    blobs_new: 0,
                    checks: s.plan.checks,
                };
                Ok((Merged::Planned(Box::new(s)), report))
            }
            None => {
                report.how = "conflicts";
                report.conflict_rows = counts.rows;
                Ok((Merged::Conflicts, report))
            }
        }
    }
}

/// What a table's merge found besides its plan.
struct Found {
    conflicts: u64,
    same: u64,
    rows: Option<RecordBatch>,
}

/// One side's diff against the base, aligned and compared.
struct SideDiff {
    aligned: Aligned,
    compared: Compared,
    /// Where each row of `aligned.old` and `aligned.new` is stored.
    old_at: Vec<(ObjectId, u32)>,
    new_at: Vec<(ObjectId, u32)>,
}

impl SideDiff {
    fn side(&self) -> Side<'_> {
        Side {
            old: &self.aligned.old,
            new: &self.aligned.new,
            compared: &self.compared,
        }
    }
}

impl Repo {
    /// What `snap` changed since `base` (`u`, as read), its rows in the
    /// merged columns (`merged`).
    fn side_diff(
        base: &TableSnapshot,
        snap: &TableSnapshot,
        u: diff::Unshared,
        merged: &SchemaRef,
    ) -> Result<SideDiff> {
        let schema = schema_of(snap);
        let mut aligned = diff::align(&schema_of(base), &u.old, &schema, &u.new)?;
        let key = key_at(&aligned.schema, &snap.key)?;
        let compared = diff::compare(&key, &aligned.old, &aligned.new)?;
        aligned.old = widen(&aligned.old, merged)?;
        aligned.new = widen(&aligned.new, merged)?;
        aligned.schema = aligned.new.schema();
        Ok(SideDiff {
            aligned,
            compared,
            old_at: u.old_at,
            new_at: u.new_at,
        })
    }

    /// The merged snapshot of one table both sides changed (`None`:
    /// unsettled conflicts, in the second value).
    async fn merge_snapshots(
        &self,
        table: &str,
        schema: &SchemaRef,
        [base, ours, theirs]: [&TableSnapshot; 3],
        strategy: Option<Strategy>,
        resolved: Option<&(SchemaRef, Vec<RecordBatch>)>,
    ) -> Result<(Option<Staged>, Found)> {
        let mut read = diff::unshared_many(&self.store, base, &[ours, theirs], true).await?;
        let (Some(tu), Some(ou)) = (read.pop(), read.pop()) else {
            return Err(Error::Internal("a merge's diff read no side".into()));
        };
        let od = Self::side_diff(base, ours, ou, schema)?;
        let td = Self::side_diff(base, theirs, tu, schema)?;
        let (o, t) = (od.side(), td.side());
        if ours.key.is_empty() {
            let (append, remove) = threeway::decide_unkeyed(&o, &t)?;
            let found = Found {
                conflicts: 0,
                same: 0,
                rows: None,
            };
            let staged = self
                .apply_unkeyed(table, ours, schema, &td, &append, &remove)
                .await?;
            return Ok((Some(staged), found));
        }
        let key = key_at(&td.aligned.schema, &ours.key)?;
        let settle = match (resolved, strategy) {
            (Some(_), _) | (None, Some(Strategy::Ours)) => Settle::Ours,
            (None, Some(Strategy::Theirs)) => Settle::Theirs,
            (None, None) => Settle::No,
        };
        let d = threeway::decide(&key, &o, &t, settle)?;
        let mut found = Found {
            conflicts: d.conflicts.len() as u64,
            same: d.same,
            rows: None,
        };
        if settle == Settle::No && !d.conflicts.is_empty() {
            found.rows = Some(threeway::conflict_rows(&key, &o, &t, &d.conflicts)?);
            return Ok((None, found));
        }
        let mut upsert = vec![pick(&td.aligned.new, &d.upsert)?];
        if let Some((rschema, rows)) = resolved {
            let rows = concat_batches(rschema, rows).map_err(Error::arrow(format!(
                "reading the resolution of table '{table}'"
            )))?;
            let rows = plan::conform_input(table, &rows, schema)?;
            let aligned = as_aligned(&td.aligned.schema, &rows)?;
            threeway::check_resolution(table, &key, &t, &d.conflicts, &aligned)?;
            upsert.push(rows);
        }
        let known = match (resolved, d.delete.is_empty(), upsert.as_slice()) {
            (None, true, [rows]) => known_rows([base, ours, theirs], &key, &od, &td, rows)?,
            _ => None,
        };
        let (schema, upsert) = in_table(schema, upsert)?;
        let deletes = pick(&td.aligned.old, &d.delete)?;
        let staged = self
            .apply_keyed(table, ours, &schema, &key, deletes, (upsert, known))
            .await?;
        Ok((Some(staged), found))
    }

    /// Ours with `deletes`' keys removed, then `upsert`'s rows set: the
    /// planner's delete and upsert, one after the other (the blobs of the
    /// first are stored before the second plans on them, as it reads
    /// their deletion vectors). Where ours holds the upserted keys may be
    /// known already (with no deletes: [`known_rows`]).
    async fn apply_keyed(
        &self,
        table: &str,
        ours: &TableSnapshot,
        schema: &SchemaRef,
        key: &[usize],
        deletes: RecordBatch,
        (upsert, known): (Vec<RecordBatch>, Option<plan::Found>),
    ) -> Result<Staged> {
        let settings = &self.config.write;
        let mut now = ours.clone();
        let mut blobs = Vec::new();
        let mut deleted = 0;
        if deletes.num_rows() > 0 {
            let keys = deletes
                .project(key)
                .map_err(Error::arrow("taking the keys a merge deletes"))?;
            let s = plan::plan_delete(&self.store, table, &now, &keys, &now.key, settings).await?;
            futures::future::try_join_all(s.blobs.iter().map(|b| self.store.put_blob(b.clone())))
                .await?;
            deleted = s.plan.rows_deleted;
            blobs.extend(s.blobs);
            now = s.plan.snapshot;
        }
        let (mut added, mut changed) = (0, 0);
        let grows = schema.fields().len() > now.schema.fields().len();
        if grows || upsert.iter().any(|b| b.num_rows() > 0) {
            let input = PlanInput {
                table,
                parent: Some(&now),
                schema: schema.clone(),
                batches: upsert,
                mode: Mode::Upsert,
                key: None,
                rules: SchemaRules::default(),
                settings,
            };
            let known = known.filter(|_| deleted == 0 && blobs.is_empty());
            let s = plan::plan_known(&self.store, input, known).await?;
            (added, changed) = (s.plan.rows_added, s.plan.rows_changed);
            deleted += s.plan.rows_deleted;
            blobs.extend(s.blobs);
            now = s.plan.snapshot;
        }
        Ok(Staged::new(
            Some(ours),
            now,
            blobs,
            (added, changed, deleted),
        ))
    }

    /// Ours with theirs' rows `append` added and `remove` removed, one
    /// instance each: an append when nothing is removed, otherwise
    /// ours' rows read whole and committed again (a multiset has no key to
    /// find a row by).
    async fn apply_unkeyed(
        &self,
        table: &str,
        ours: &TableSnapshot,
        schema: &SchemaRef,
        theirs: &SideDiff,
        append: &[u32],
        remove: &[u32],
    ) -> Result<Staged> {
        let grows = schema.fields().len() > ours.schema.fields().len();
        if append.is_empty() && remove.is_empty() && !grows {
            return Ok(Staged::new(Some(ours), ours.clone(), Vec::new(), (0, 0, 0)));
        }
        let added = pick(&theirs.aligned.new, append)?;
        let (mode, batches) = if remove.is_empty() {
            (Mode::Append, vec![added])
        } else {
            let own = schema_of(ours);
            let (all, _) = crate::table::read_rows(&self.store, ours, &own, false).await?;
            let all = concat_batches(&own, &all)
                .map_err(Error::arrow(format!("reading table '{table}' to merge")))?;
            let all = widen(&all, schema)?;
            let gone = pick(&theirs.aligned.old, remove)?;
            let keep = pick(&all, &threeway::remaining(&all, &gone)?)?;
            (Mode::Overwrite, vec![keep, added])
        };
        let (schema, batches) = in_table(schema, batches)?;
        let input = PlanInput {
            table,
            parent: Some(ours),
            schema,
            batches,
            mode,
            key: None,
            rules: SchemaRules::default(),
            settings: &self.config.write,
        };
        plan::plan(&self.store, input).await
    }

    /// Writes the merged tables' blobs and snapshots, then the version
    /// and last the branch's ref entry; the new version, or `None` when
    /// another writer moved the branch first.
    async fn land_merge(
        &self,
        head: &RefEntry,
        parents: Vec<VersionId>,
        ours: &Version,
        merged: BTreeMap<String, Merged>,
        message: &str,
        result: &mut MergeResult,
    ) -> Result<Option<VersionId>> {
        let mut tables = ours.tables.clone();
        // Ours' tables with only the taken ones replaced: what a restore of
        // them would make, whose changes a restore computes.
        let mut taken = ours.tables.clone();
        let mut changes = BTreeMap::new();
        let mut written = Vec::new();
        for (name, m) in merged {
            match m {
                Merged::Take(Some(t)) => {
                    tables.insert(name.clone(), t);
                    taken.insert(name, t);
                }
                Merged::Take(None) => {
                    tables.remove(&name);
                    taken.remove(&name);
                }
                Merged::Planned(s) => {
                    let snap = Bytes::from(encode_manifest("table snapshot", &s.plan.snapshot)?);
                    let outs = futures::future::try_join_all(
                        s.blobs
                            .iter()
                            .chain([&snap])
                            .map(|b| self.store.freshen_blob(b.clone())),
                    )
                    .await?;
                    let report = result.tables.iter().find(|t| t.table == name);
                    let mut change = report.map(|r| r.change.clone()).unwrap_or_default();
                    for o in outs.iter().filter(|o| o.new) {
                        change.bytes_new += o.bytes;
                        change.blobs_new += 1;
                    }
                    let sid = outs.last().map(|o| o.id).ok_or_else(|| {
                        Error::Internal("a merged table without a snapshot".into())
                    })?;
                    tables.insert(name.clone(), sid);
                    written.extend(s.blobs.iter().cloned().chain([snap]).zip(outs));
                    changes.insert(name, change);
                }
                Merged::Conflicts => {
                    return Err(Error::Internal("landing a merge with conflicts".into()))
                }
            }
        }
        let parent = parents[0];
        if taken != ours.tables {
            let taken_changes = self
                .restore_changes(Some(&parent), &ours.tables, &result.theirs, &taken)
                .await?;
            changes.extend(taken_changes);
        }
        for r in result.tables.iter_mut() {
            if let Some(c) = changes.get(&r.table) {
                r.change = c.clone();
            }
        }
        let version = Version {
            format: FORMAT_VERSION,
            parents,
            time_ms: now_ms(),
            author: self.author.clone(),
            message: message.to_string(),
            tables,
            changes,
            replaces: None,
        };
        let Some((id, _)) = self
            .land_version(&version, &result.into, Some(head))
            .await?
        else {
            return Ok(None);
        };
        // As a commit does: a blob that was stored already when this merge
        // freshened it, and that a gc removed meanwhile, is put back.
        let old: HashSet<ObjectId> = written
            .iter()
            .filter(|(_, o)| !o.new)
            .map(|(_, o)| o.id)
            .collect();
        for (bytes, o) in &written {
            if old.contains(&o.id) && !self.store.has_blob(&o.id).await? {
                self.store.put_blob(bytes.clone()).await?;
            }
        }
        Ok(Some(id))
    }
}

/// Every table either side changed since the base (or that either has
/// and the base lacks). No I/O.
/// Where ours holds each of theirs' rows to upsert (`rows`), as the
/// planner's look-up would find it, and the hash of each row found, from
/// the two diffs alone (`threeway::ours_rows`). `None` where that cannot
/// be trusted: the three sides' schemas or keys differ (rows in the
/// merged schema might hash otherwise than in ours'), or a row is in a
/// file ours does not name. No I/O.
fn known_rows(
    [base, ours, theirs]: [&TableSnapshot; 3],
    key: &[usize],
    od: &SideDiff,
    td: &SideDiff,
    rows: &RecordBatch,
) -> Result<Option<plan::Found>> {
    let same = |s: &TableSnapshot| s.schema == ours.schema && s.key == ours.key;
    if !same(base) || !same(theirs) {
        return Ok(None);
    }
    let held = threeway::ours_rows(key, &od.side(), &td.side(), rows)?;
    let file_of: HashMap<ObjectId, usize> = (ours.files.iter().enumerate())
        .map(|(i, f)| (f.data, i))
        .collect();
    let (mut ours_hashes, mut base_hashes) = (None, None);
    let mut locs = Vec::with_capacity(held.len());
    let mut hashes = HashMap::new();
    for h in held {
        let (batch, at, cache, i) = match h {
            None => {
                locs.push(None);
                continue;
            }
            Some(HeldBy::OursNew(i)) => (&od.aligned.new, &od.new_at, &mut ours_hashes, i),
            Some(HeldBy::Base(i)) => (&td.aligned.old, &td.old_at, &mut base_hashes, i),
        };
        let Some(&(blob, pos)) = at.get(i as usize) else {
            return Ok(None);
        };
        let Some(&file) = file_of.get(&blob) else {
            return Ok(None);
        };
        let all = match cache {
            Some(all) => all,
            None => cache.insert(hash_rows(batch)?),
        };
        let Some(hash) = all.get(i as usize) else {
            return Ok(None);
        };
        hashes.insert((file, pos), *hash);
        locs.push(Some(Loc { file, pos }));
    }
    Ok(Some(plan::Found::known(locs, hashes)))
}

fn changed_tables(three: &ThreeWay<'_>) -> Vec<String> {
    let names: BTreeSet<&String> = three
        .ours
        .tables
        .keys()
        .chain(three.theirs.tables.keys())
        .collect();
    names
        .into_iter()
        .filter(|n| {
            let b = three.base.and_then(|v| v.tables.get(*n));
            let (o, t) = (three.ours.tables.get(*n), three.theirs.tables.get(*n));
            o != t && t != b
        })
        .cloned()
        .collect()
}

/// The schema of a table both sides changed, merged: ours' columns, then
/// the columns only theirs added (nullable: ours' rows have no value
/// there). Each side may add columns; dropping or retyping one of the
/// base's, a column both added in different types, or another key is
/// refused, naming the columns. No I/O.
fn merged_schema(
    table: &str,
    base: &TableSnapshot,
    ours: &TableSnapshot,
    theirs: &TableSnapshot,
) -> Result<SchemaRef> {
    let keep = format!("keep one side's table with --ours={table} or --theirs={table}");
    if ours.key != theirs.key || base.key != ours.key {
        return Err(Error::InvalidArgument(format!(
            "table '{table}' cannot be merged: its key is ({}) on this branch and ({}) on the merged side; {keep}",
            ours.key.join(", "),
            theirs.key.join(", ")
        )));
    }
    let cols = |s: &TableSnapshot| crate::table::columns_line(&s.schema);
    let refuse = || {
        Error::InvalidArgument(format!(
            "table '{table}' cannot be merged: both sides changed its rows and their columns do not fit together (base: {}; this branch: {}; merged side: {}): a merge takes columns added on either side, not columns dropped or retyped; give both sides the same columns first, or {keep}",
            cols(base),
            cols(ours),
            cols(theirs)
        ))
    };
    let same_type = |s: &Schema, f: &Field| {
        s.field_with_name(f.name())
            .is_ok_and(|g| g.data_type() == f.data_type())
    };
    for f in base.schema.fields() {
        if !same_type(&ours.schema, f) || !same_type(&theirs.schema, f) {
            return Err(refuse());
        }
    }
    let mut fields: Vec<Field> = ours
        .schema
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    for f in theirs.schema.fields() {
        match ours.schema.field_with_name(f.name()) {
            Ok(_) if same_type(&ours.schema, f) => {}
            Ok(_) => return Err(refuse()),
            Err(_) => fields.push(f.as_ref().clone().with_nullable(true)),
        }
    }
    Ok(Arc::new(Schema::new_with_metadata(
        fields,
        ours.schema.metadata().clone(),
    )))
}

/// `b`'s rows with the columns of `to` (by name; a column `b` lacks is
/// null), every column nullable as a diff's are. No I/O.
fn widen(b: &RecordBatch, to: &SchemaRef) -> Result<RecordBatch> {
    let fields: Vec<Field> = (to.fields().iter())
        .map(|f| f.as_ref().clone().with_nullable(true))
        .collect();
    let columns = fields
        .iter()
        .map(|f| match b.schema().index_of(f.name()) {
            Ok(i) => b.column(i).clone(),
            Err(_) => arrow::array::new_null_array(f.data_type(), b.num_rows()),
        })
        .collect();
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
        .map_err(Error::arrow("bringing a side's rows to the merged columns"))
}

/// The positions of `key`'s columns in `schema`.
fn key_at(schema: &SchemaRef, key: &[String]) -> Result<Vec<usize>> {
    key.iter()
        .map(|k| {
            schema.index_of(k).map_err(|_| {
                Error::Internal(format!("key column '{k}' missing from a merge's rows"))
            })
        })
        .collect()
}

/// The rows of `b` at `at`.
fn pick(b: &RecordBatch, at: &[u32]) -> Result<RecordBatch> {
    take_record_batch(b, &UInt32Array::from(at.to_vec()))
        .map_err(Error::arrow("taking merged rows"))
}

/// Rows of the table (from a diff's schema, where every column is
/// nullable) in the table's schema, a column nullable where the table's is
/// or where the rows hold a null (the merged side made it nullable, as a
/// commit of those rows would). No I/O.
fn in_table(
    schema: &SchemaRef,
    batches: Vec<RecordBatch>,
) -> Result<(SchemaRef, Vec<RecordBatch>)> {
    let fields: Vec<Field> = (schema.fields().iter().enumerate())
        .map(|(i, f)| {
            let nulls = batches.iter().any(|b| b.column(i).null_count() > 0);
            f.as_ref().clone().with_nullable(f.is_nullable() || nulls)
        })
        .collect();
    let to = Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()));
    let batches = batches
        .into_iter()
        .map(|b| RecordBatch::try_new(to.clone(), b.columns().to_vec()))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(Error::arrow("bringing merged rows to the table's schema"))?;
    Ok((to, batches))
}

/// Rows of the table's schema in the aligned one.
fn as_aligned(schema: &SchemaRef, b: &RecordBatch) -> Result<RecordBatch> {
    RecordBatch::try_new(Arc::clone(schema), b.columns().to_vec())
        .map_err(Error::arrow("comparing a resolution's rows"))
}
