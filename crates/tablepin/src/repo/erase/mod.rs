//! Erasure: remove the rows matching a predicate from the head AND from
//! every kept version, physically, with an audit record that holds no
//! personal data.
//!
//! [`Erasure::plan`] finds every data file, in every stored version, that
//! holds a matching row (deleted positions count: their bytes are still
//! there), and plans a rewrite of each without those rows. A file shared by
//! many versions is rewritten once and shared again; each version's deletion
//! vector is renumbered onto the rewritten file. Every version that held the
//! rows, and every descendant of one (its parent id changes, as in
//! `git filter-branch`), gets a replacement version with the same time,
//! author and message and a `replaces` link. Rewrites are deterministic, so
//! planning twice gives the same blobs and the same version ids.
//!
//! [`Erasure::apply`] then: (1) writes the new blobs; (2) writes a
//! pending record naming the old blobs to delete; (3) moves each branch and
//! tag onto its replacement; (4) deletes the old blobs at once, whatever
//! the grace period; (5) writes the audit record and drops the pending one.
//! Killed at any point, the repository passes `verify`, each ref names its
//! old version (still whole) or its replacement, and `erase` with the same
//! predicate finishes the job (the pending record survives).
//!
//! The audit record keeps, to let `verify --erased` prove later that no
//! blob holds an erased row, a keyed fingerprint of each erased row: BLAKE3
//! keyed with a random per-erasure salt over the row's `rowhash-v1`,
//! truncated to 128 bits. It cannot be turned back into the row; confirming
//! a guess needs the exact whole row (every column, to the bit), which is
//! the data that was erased. We chose this over encrypting the predicate
//! under a user-held key because the proof then needs no secret and checks
//! rows, not a predicate that later schema changes could reinterpret.
//!
//! When the repository moved since the plan (a commit moved a branch, a gc
//! expired a version it replaces), apply plans again and retries; after the
//! first lost race it first holds each branch it moves (a ref entry naming
//! the same version with a `RefHold`, which lapses on its own after two
//! minutes), so that commits, which start from `Repo::head_to_write`, wait
//! rather than outrun a plan that reads every version. The audit record
//! holds only what was done: the replacements the refs reach and the moves
//! the ref logs show. Readers follow a replacement only where no tombstone
//! stands, and an interrupted erasure's only once it is stored.

mod apply;
mod audit;
mod plan;

pub(crate) use apply::*;
pub(crate) use plan::*;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use arrow::array::RecordBatch;
use arrow::compute::{concat_batches, filter_record_batch};
use arrow::datatypes::SchemaRef;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tablepin_format::{
    encode_manifest, AuditMovedRef, AuditRecord, AuditVersion, ContentHash, ErasedFingerprint,
    FileEntry, ObjectId, RefEntry, RefHold, RefKind, TableSnapshot, Version, VersionId,
    FORMAT_VERSION,
};
use tablepin_rowhash::hash_rows;
use tablepin_store::layout;

use super::lease::LeaseKind;
use super::{list_or_none, now_ms, Progress, Repo};
use crate::error::{Error, Result};
use crate::table::datafile::{read_data_file, Select};
use crate::table::plan::new_data_file;
use crate::table::predicate::Predicate;
use crate::table::types::conform;
use crate::table::{dv, keys, schema_of};

/// How long an erasure keeps planning again while commits move the refs
/// it must move.
const ERASE_RETRY_FOR: std::time::Duration = std::time::Duration::from_secs(60);

/// How many times an erasure tries to hold a branch that commits keep
/// moving before it plans again without that hold.
const HOLD_TRIES: u32 = 20;

/// Options of an erasure.
#[derive(Debug, Clone, Default)]
pub struct EraseOptions {
    /// The table.
    pub table: String,
    /// The SQL predicate.
    pub predicate: String,
    /// Why (required).
    pub reason: String,
}

/// A data file the erasure rewrites.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedFile {
    /// The file now.
    pub blob: ObjectId,
    /// Rows it holds.
    pub rows: u64,
    /// Rows that match (and go).
    pub rows_removed: u64,
    /// Its rewrite (none: no row is left).
    pub rewritten: Option<ObjectId>,
    /// Bytes of the rewrite.
    pub bytes: u64,
}

/// A version the erasure replaces.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedVersion {
    /// The version.
    pub old: VersionId,
    /// Its replacement.
    pub new: VersionId,
    /// Matching rows it shows (0 for a descendant replaced for its parent).
    pub rows_removed: u64,
    /// Content hash of the table before and after.
    pub old_content_hash: ContentHash,
    /// After.
    pub new_content_hash: ContentHash,
    /// Refs that name it.
    pub refs: Vec<String>,
}

/// What an erasure will do. It holds no personal data: not the predicate
/// (only its BLAKE3), not the rows. Its JSON is the whole plan: every new
/// blob is named by its id, and since rewrites are deterministic, planning
/// again with the same predicate on the same repository gives the same
/// ids; [`Erasure::apply_saved`] applies a plan read back from its JSON
/// when that holds, and refuses it otherwise.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErasePlan {
    /// The table.
    pub table: String,
    /// The reason.
    pub reason: String,
    /// BLAKE3 of the predicate text.
    pub predicate_hash: String,
    /// Versions replaced, parents first.
    pub versions: Vec<PlannedVersion>,
    /// Files rewritten.
    pub files: Vec<PlannedFile>,
    /// Distinct matching rows stored.
    pub rows_removed: u64,
    /// Bytes of new blobs to write.
    pub bytes_to_write: u64,
    /// Tags that move: name, old, new.
    pub tags: Vec<(String, VersionId, VersionId)>,
    /// An earlier run with this predicate was interrupted; applying
    /// finishes it.
    pub resumes: bool,
    /// Versions holding files whose schema lacks a column the predicate
    /// names (written before the column was added, or after it was
    /// dropped): no row of those files can match, and none is removed.
    #[serde(default)]
    pub not_applied: Vec<VersionId>,
    /// The bytes the plan names, kept from planning to apply in the same
    /// process; a plan read back from JSON has none and is planned again.
    #[serde(skip)]
    work: Work,
}

#[derive(Debug, Clone, Default)]
struct Work {
    /// What was asked, to plan again when the repository moved before
    /// the plan was applied.
    options: EraseOptions,
    blobs: Vec<Bytes>,
    fingerprints: Vec<[u8; 32]>,
    moves: Vec<RefMove>,
    delete: Vec<ObjectId>,
}

impl ErasePlan {
    /// True when there is nothing to do: no stored row matches and no
    /// interrupted run to finish.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty() && self.versions.is_empty() && !self.resumes
    }

    /// What differs between two plans in what they do (the versions
    /// replaced and their replacements, the files rewritten and their
    /// rewrites, the tags moved, the rows and bytes); `None` when they do
    /// the same.
    pub fn differs_from(&self, other: &ErasePlan) -> Option<String> {
        let pairs = [
            ("table", self.table == other.table),
            ("predicate", self.predicate_hash == other.predicate_hash),
            ("versions replaced", self.versions == other.versions),
            ("files rewritten", self.files == other.files),
            ("tags moved", self.tags == other.tags),
            ("rows removed", self.rows_removed == other.rows_removed),
            (
                "bytes to write",
                self.bytes_to_write == other.bytes_to_write,
            ),
        ];
        let off: Vec<&str> = pairs
            .iter()
            .filter(|(_, same)| !same)
            .map(|(w, _)| *w)
            .collect();
        (!off.is_empty()).then(|| format!("its {} differ", off.join(", ")))
    }
}

/// What an erasure did.
#[derive(Debug, Clone, Serialize)]
pub struct EraseReport {
    /// The audit record written.
    pub audit: AuditRecord,
    /// Seconds taken by apply.
    pub seconds: f64,
}

/// What `verify --erased` found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ErasedCheck {
    /// Erasure records checked.
    pub records: u64,
    /// Data files scanned.
    pub files: u64,
    /// Rows scanned.
    pub rows: u64,
    /// Data files still holding an erased row, with how many.
    pub holders: Vec<(ObjectId, u64)>,
    /// Copies in this machine's blob cache of blobs the repository no
    /// longer holds (deleted by an erasure or a gc run elsewhere): removed
    /// by this check, so that no erased row survives in the cache either.
    pub cache_removed: u64,
}

impl ErasedCheck {
    /// True when no blob holds an erased row.
    pub fn ok(&self) -> bool {
        self.holders.is_empty()
    }
}

/// A repository's erasures ([`Repo::erasure`]): planned, applied, read
/// back from their audit records, and checked.
#[derive(Debug, Clone, Copy)]
pub struct Erasure<'a> {
    repo: &'a Repo,
}

impl Repo {
    /// The repository's erasures.
    pub fn erasure(&self) -> Erasure<'_> {
        Erasure { repo: self }
    }
}

impl Erasure<'_> {
    /// Plans an erasure. Changes nothing.
    pub async fn plan(&self, opts: &EraseOptions) -> Result<ErasePlan> {
        if opts.reason.trim().is_empty() {
            return Err(Error::NoReason);
        }
        let lease = self.repo.take_lease(LeaseKind::Erase).await?;
        let out = self.repo.plan_erasure(opts).await;
        lease.release(self.repo).await;
        out
    }

    /// Applies an erasure plan (see the module docs for the order),
    /// holding the gc/erasure lease. When the repository moved since the
    /// plan (a commit moved a branch, a gc expired a version it replaces),
    /// it plans again and applies that, retrying with a random, growing
    /// pause while commits keep moving the refs, for up to a minute.
    pub async fn apply(&self, plan: ErasePlan) -> Result<EraseReport> {
        let lease = self.repo.take_lease(LeaseKind::Erase).await?;
        let out = self.repo.apply_erasure_leased(plan, false).await;
        lease.release(self.repo).await;
        Ok(out?.1)
    }

    /// Plans and applies an erasure under one hold of the gc/erasure
    /// lease, so that nothing deletes in between: what
    /// [`Erasure::plan`] then [`Erasure::apply`] do, without the
    /// second checking and reading again what the first read. Returns the
    /// plan applied (planned again if commits moved the refs meanwhile)
    /// and the report, or only the plan when it is empty (no stored row
    /// matches: nothing is written).
    pub async fn run(&self, opts: &EraseOptions) -> Result<(ErasePlan, Option<EraseReport>)> {
        if opts.reason.trim().is_empty() {
            return Err(Error::NoReason);
        }
        let lease = self.repo.take_lease(LeaseKind::Erase).await?;
        let out = async {
            let plan = self.repo.plan_erasure(opts).await?;
            if plan.is_empty() {
                return Ok((plan, None));
            }
            let (plan, report) = self.repo.apply_erasure_leased(plan, true).await?;
            Ok((plan, Some(report)))
        }
        .await;
        lease.release(self.repo).await;
        out
    }

    /// Applies a plan read back from its JSON (made by [`Erasure::plan`],
    /// maybe in another process, and reviewed): plans again with
    /// `predicate`, which the plan does not hold, and applies that only if
    /// it does exactly what the saved plan says. Otherwise nothing changes:
    /// [`Error::PlanPredicate`] for another predicate,
    /// [`Error::PlanOutdated`] when the repository moved since.
    pub async fn apply_saved(&self, saved: &ErasePlan, predicate: &str) -> Result<EraseReport> {
        let hash = blake3::hash(predicate.as_bytes()).to_hex().to_string();
        if hash != saved.predicate_hash {
            return Err(Error::PlanPredicate {
                planned: saved.predicate_hash.clone(),
            });
        }
        let options = EraseOptions {
            table: saved.table.clone(),
            predicate: predicate.to_string(),
            reason: saved.reason.clone(),
        };
        let lease = self.repo.take_lease(LeaseKind::Erase).await?;
        let out = async {
            let plan = self.repo.plan_erasure(&options).await?;
            if let Some(detail) = plan.differs_from(saved) {
                return Err(Error::PlanOutdated {
                    what: "erasure",
                    detail,
                });
            }
            // A ref that moves while this applies is `RefMoved`, as for
            // any erasure: the same erase, run again, finishes it.
            self.repo.apply_erasure(&plan).await
        }
        .await;
        lease.release(self.repo).await;
        out
    }
}
