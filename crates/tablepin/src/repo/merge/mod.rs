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
//!
//! The base is found breadth first from ours, over every parent.
//! `diff::unshared_many` reads a base file once for both sides (the union of
//! the positions they hide) and says where each row it read is stored. Alike
//! changes apply once; conflicts are settled by a side, by a person's rows,
//! or reported. The delete's blobs are stored before the upsert plans on its
//! deletion vectors, so counts, checks and the content hash come out as a
//! commit's would. The upsert skips the planner's key look-up when the diffs
//! already say where ours holds each key (`threeway::ours_rows`,
//! `plan::plan_known`): same schemas and keys on all three sides, no
//! deletes, no resolution. The version has two parents (ours first: `log`
//! follows first parents, `log --graph` every one); a fast-forward appends a
//! ref entry only. `revert REV` is the same merge with REV as the base and
//! its first parent as theirs. Proptest
//! `a_merge_equals_the_merge_of_the_three_versions_read_whole` checks the
//! rows and content hash against the merge computed from whole reads.

mod land;
mod tables;

pub(crate) use tables::*;

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
pub(crate) enum Merged {
    /// The merged side's snapshot (or none: dropped).
    Take(Option<ObjectId>),
    /// A new snapshot and the blobs it needs.
    Planned(Box<Staged>),
    /// Unsettled conflicts.
    Conflicts,
}

/// A three-way merge to run: the base, ours and theirs versions.
pub(crate) struct ThreeWay<'a> {
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
}
