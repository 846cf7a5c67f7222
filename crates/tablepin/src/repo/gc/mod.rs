//! Retention and garbage collection: plan first, then apply.
//!
//! A [`GcPolicy`] names what to keep; [`Gc::plan`] turns it, the refs
//! and the version graph into a [`GcPlan`] (versions kept and expired, blobs
//! kept and freed, the fate of every tag) without changing anything, and
//! [`Gc::apply`] carries it out. The rules:
//!
//! 1. Every branch head is kept. With `keep_tags` (the default) every tagged
//!    version is kept; without it, a tag whose version expires is deleted,
//!    never left dangling.
//! 2. `keep_last N` keeps the N newest versions of each branch (first-parent
//!    order); `keep_within D` keeps versions committed within D of now. With
//!    neither, every version reachable from a ref is kept and only
//!    unreferenced blobs are swept.
//! 3. Mark: every blob reachable from a kept version (the version record,
//!    its table snapshots, their data files and deletion vectors) is kept.
//! 4. Sweep: every other blob is deleted, except one younger than the grace
//!    period (a commit may be writing it, or may have just freshened it to
//!    use it again; see `Store::freshen_blob`). Just before sweeping, the
//!    refs are read again and anything a concurrent commit made reachable
//!    is kept; each blob's age is read again just before it is deleted.
//! 5. An expired version leaves a tombstone (id, parents, time, message,
//!    row counts and content hashes) so `log` still shows it. Tombstones are
//!    written before any blob is deleted, so an interrupted `gc` leaves a
//!    repository `verify` passes; running it again finishes the job.

mod keep;

pub(crate) use keep::*;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use bytes::Bytes;
use serde::Serialize;
use tablepin_format::{
    decode_manifest, ObjectId, RefKind, TableSnapshot, Tombstone, Version, VersionId,
    FORMAT_VERSION,
};
use tablepin_store::layout;

use super::lease::LeaseKind;
use super::{now_ms, Repo};
use crate::error::{Error, Result};

/// The shortest grace a gc takes while other processes may write: longer
/// than a commit takes between writing its first blob and naming it (a
/// streamed commit, which can take longer, holds a lease that gc waits
/// for). A shorter one, down to none, needs `GcPolicy::sole_writer`.
pub const MIN_GRACE_MS: i64 = 600_000;

/// What retention keeps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GcPolicy {
    /// Keep the last N versions of each branch.
    pub keep_last: Option<usize>,
    /// Keep versions younger than this many milliseconds.
    pub keep_within_ms: Option<i64>,
    /// Keep every tagged version.
    pub keep_tags: bool,
    /// Spare unreferenced blobs younger than this many milliseconds: a
    /// commit in flight has written its blobs and not yet named them. At
    /// least [`MIN_GRACE_MS`] unless `sole_writer`.
    pub grace_ms: i64,
    /// The caller knows that no other process writes to the repository
    /// while this gc runs, so a grace shorter than a commit can take (down
    /// to none) deletes nothing a commit still needs.
    pub sole_writer: bool,
    /// "Now" (ms), for tests and the lab; default the clock.
    pub now_ms: Option<i64>,
}

impl Default for GcPolicy {
    fn default() -> Self {
        Self {
            keep_last: None,
            keep_within_ms: None,
            keep_tags: true,
            grace_ms: 3_600_000,
            sole_writer: false,
            now_ms: None,
        }
    }
}

impl GcPolicy {
    /// Refuses a policy that contradicts itself.
    pub fn validate(&self) -> Result<()> {
        if self.keep_last == Some(0) {
            return Err(Error::KeepNone);
        }
        if self.grace_ms < MIN_GRACE_MS && !self.sole_writer {
            return Err(Error::ShortGrace {
                grace_ms: self.grace_ms,
                min_ms: MIN_GRACE_MS,
            });
        }
        if self.keep_within_ms.is_some_and(|d| d < 0) || self.grace_ms < 0 {
            return Err(Error::InvalidArgument(
                "durations cannot be negative".into(),
            ));
        }
        Ok(())
    }
}

/// What happens to one tag.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TagFate {
    /// The tag.
    pub name: String,
    /// The version it names.
    pub version: VersionId,
    /// It stays readable.
    pub readable: bool,
}

/// What a garbage collection will do. Computed without changing anything.
#[derive(Debug, Clone, Serialize)]
pub struct GcPlan {
    /// The policy.
    pub policy: GcPolicy,
    /// "Now" used for ages.
    pub now_ms: i64,
    /// Versions kept.
    pub versions_kept: Vec<VersionId>,
    /// Versions expired (they leave tombstones).
    pub versions_expired: Vec<VersionId>,
    /// Blobs kept and their bytes.
    pub blobs_kept: u64,
    /// Bytes of the blobs kept.
    pub bytes_kept: u64,
    /// Blobs to delete.
    pub blobs_deleted: Vec<ObjectId>,
    /// Bytes freed.
    pub bytes_freed: u64,
    /// Unreferenced blobs spared because they are younger than the grace period.
    pub blobs_in_grace: u64,
    /// Every tag and whether it stays readable.
    pub tags: Vec<TagFate>,
    /// Tags to delete (their version expires and `keep_tags` is off).
    pub tags_deleted: Vec<String>,
    /// Kept data files that still hold rows an erasure removed.
    pub blobs_holding_erased: u64,
    /// Temporary files of interrupted writes, older than the grace period,
    /// to delete (a younger one may belong to a write still running).
    pub leftovers: Vec<String>,
    /// Outboards whose blob is not stored, older than the grace period, to
    /// delete (a commit writes a large blob's outboard just before it).
    pub orphan_outboards: Vec<ObjectId>,
}

/// What `gc_apply` did.
#[derive(Debug, Clone, Serialize)]
pub struct GcReport {
    /// The plan applied.
    pub plan: GcPlan,
    /// Blobs deleted.
    pub blobs_deleted: u64,
    /// Bytes freed.
    pub bytes_freed: u64,
    /// Blobs spared at the last moment (a concurrent commit used them).
    pub blobs_spared: u64,
    /// Tombstones written.
    pub tombstones: u64,
    /// Temporary files of interrupted writes deleted.
    pub leftovers_deleted: u64,
    /// Outboards of blobs not stored deleted.
    pub orphan_outboards_deleted: u64,
}

impl Repo {
    /// Every blob a version reaches: itself, its snapshots, their files.
    pub(crate) async fn reach(
        &self,
        id: &VersionId,
        out: &mut HashSet<ObjectId>,
    ) -> Result<Version> {
        let v = self.version(id).await?;
        out.insert(id.0);
        for (table, sid) in &v.tables {
            if out.insert(*sid) {
                let s: TableSnapshot = self.load_snapshot(id, table, sid).await?;
                for f in &s.files {
                    out.insert(f.data);
                    if let Some(d) = &f.deletes {
                        out.insert(d.blob);
                    }
                }
            }
        }
        Ok(v)
    }

    /// Every blob a version needs, with what it is (see [`Need`]): the
    /// version record and its snapshots are read (and so verified), the
    /// data files and deletion vectors are named with their sizes.
    pub(crate) async fn needs(
        &self,
        id: &VersionId,
        out: &mut HashMap<ObjectId, Need>,
    ) -> Result<Version> {
        let v = self.version(id).await?;
        for (table, sid) in &v.tables {
            let s: TableSnapshot = self.load_snapshot(id, table, sid).await?;
            for f in &s.files {
                out.entry(f.data).or_insert_with(|| Need {
                    what: "data file",
                    version: *id,
                    table: table.clone(),
                    bytes: Some(f.bytes),
                });
                if let Some(d) = &f.deletes {
                    out.entry(d.blob).or_insert_with(|| Need {
                        what: "deletion vector",
                        version: *id,
                        table: table.clone(),
                        // A pack holds other bitmaps too: only its presence
                        // can be checked from the listing.
                        bytes: d.offset.is_none().then_some(d.bytes),
                    });
                }
            }
        }
        Ok(v)
    }

    /// Every ref's whole log, read once: what a gc plans on. Heads and
    /// histories from one read keep the plan consistent: a commit that
    /// lands while gc plans is in neither, so gc never expires a new head
    /// while it keeps that head's ancestors (a gap that would leave stored
    /// versions reachable only through a tombstone).
    async fn ref_logs(&self) -> Result<RefLogs> {
        let mut out = Vec::new();
        for kind in [RefKind::Branch, RefKind::Tag] {
            for name in self.store().ref_names(kind).await? {
                let log = self.store().ref_log(kind, &name).await?;
                out.push((kind, name, log));
            }
        }
        Ok(RefLogs(out))
    }

    /// The versions every branch reaches, newest first per branch
    /// (first-parent order), from `roots` (name, head, live).
    async fn branch_chains(
        &self,
        roots: Vec<(String, VersionId, bool)>,
        listed: &HashSet<ObjectId>,
    ) -> Result<BTreeMap<String, Vec<(VersionId, i64)>>> {
        let mut out = BTreeMap::new();
        for (name, target, live) in roots {
            let mut chain = Vec::new();
            let mut next = Some(target);
            while let Some(id) = next {
                // Not in the listing: gone, whatever a memo or cache holds
                // (see `stored_ancestry`).
                let read = if listed.contains(&id.0) {
                    self.store().get_blob(&id.0).await
                } else {
                    Err(tablepin_store::StoreError::NotFound {
                        path: layout::blob(&id.0).to_string(),
                    })
                };
                match read {
                    Ok(bytes) => {
                        let v: Version = decode_manifest("version", &bytes)?;
                        chain.push((id, v.time_ms));
                        next = v.parents.first().copied();
                    }
                    // Expired: the chain of stored versions ends. (A
                    // deleted branch's last version may be gone too.)
                    Err(tablepin_store::StoreError::NotFound { .. })
                        if !chain.is_empty() || !live =>
                    {
                        break
                    }
                    // A damaged version is not an expired one: gc must not
                    // plan on it.
                    Err(source) => return Err(Error::version_record(id, source)),
                }
            }
            out.insert(name, chain);
        }
        Ok(out)
    }

    /// The refs of a kind whose versions gc keeps, as (name, version,
    /// live): the live ones at their heads, and those deleted after
    /// `deleted_since` (ms) at the version they named last while that is
    /// still stored, so that a ref deleted by mistake can be restored
    /// within the grace period.
    fn gc_roots(
        logs: &RefLogs,
        kind: RefKind,
        deleted_since: i64,
        listed: &HashSet<ObjectId>,
    ) -> Vec<(String, VersionId, bool)> {
        logs.roots(kind, deleted_since)
            .into_iter()
            .filter(|(_, target, live)| *live || listed.contains(&target.0))
            .collect()
    }

    /// The ids of the blobs a listing of the store finds.
    pub(crate) async fn listed_blobs(&self) -> Result<HashSet<ObjectId>> {
        Ok(self
            .store()
            .list_blobs()
            .await?
            .iter()
            .map(|b| b.id)
            .collect())
    }

    /// A plan, and the ids of the blobs listed for it.
    async fn plan_gc(&self, policy: &GcPolicy) -> Result<(GcPlan, HashSet<ObjectId>)> {
        let now = policy.now_ms.unwrap_or_else(now_ms);
        let grace_cut = now - policy.grace_ms;
        // The refs, then the blobs: every version a ref log names that is
        // stored is in the listing (only gc and erasure delete, and they
        // wait for this lease).
        let logs = self.ref_logs().await?;
        let blobs = self.store().list_blobs().await?;
        let listed: HashSet<ObjectId> = blobs.iter().map(|b| b.id).collect();
        let branch_roots = Self::gc_roots(&logs, RefKind::Branch, grace_cut, &listed);
        let chains = self.branch_chains(branch_roots, &listed).await?;
        let tag_roots = Self::gc_roots(&logs, RefKind::Tag, grace_cut, &listed);
        let stored_versions = self.stored_ancestry(logs.targets(), Some(&listed)).await?;
        let (kept, fates, tags_deleted) = kept_versions(&chains, &tag_roots, policy, now);
        let expired: Vec<VersionId> = stored_versions.difference(&kept).copied().collect();

        let mut needs = HashMap::new();
        for id in &kept {
            needs.insert(id.0, Need::manifest(*id));
            let v = self.needs(id, &mut needs).await?;
            for sid in v.tables.values() {
                needs.insert(*sid, Need::manifest(*id));
            }
        }
        check_needs(&needs, &blobs)?;
        let reachable: HashSet<ObjectId> = needs.keys().copied().collect();
        let expired_ids: HashSet<ObjectId> = expired.iter().map(|v| v.0).collect();
        let mut plan = GcPlan {
            policy: policy.clone(),
            now_ms: now,
            versions_kept: kept.iter().copied().collect(),
            versions_expired: expired,
            blobs_kept: 0,
            bytes_kept: 0,
            blobs_deleted: Vec::new(),
            bytes_freed: 0,
            blobs_in_grace: 0,
            tags: fates,
            tags_deleted,
            blobs_holding_erased: 0,
            leftovers: self
                .store()
                .leftovers()?
                .into_iter()
                .filter(|l| l.last_modified.timestamp_millis() <= grace_cut)
                .map(|l| l.path)
                .collect(),
            orphan_outboards: orphans(
                &self.store().list_outboard_metas().await?,
                &listed,
                grace_cut,
            ),
        };
        let mut kept_data = Vec::new();
        for b in &blobs {
            if reachable.contains(&b.id) {
                plan.blobs_kept += 1;
                plan.bytes_kept += b.size;
                kept_data.push((b.id, b.last_modified.timestamp_millis()));
            } else if b.last_modified.timestamp_millis() > grace_cut && !expired_ids.contains(&b.id)
            {
                plan.blobs_in_grace += 1;
                plan.blobs_kept += 1;
                plan.bytes_kept += b.size;
            } else {
                plan.blobs_deleted.push(b.id);
                plan.bytes_freed += b.size;
            }
        }
        // A damaged audit record does not stop gc (it deletes nothing by
        // it): the count is over the records that read, and `verify`
        // names the damaged one.
        let (records, _) = self.audit_checked().await?;
        plan.blobs_holding_erased =
            self.erased_holders(records, &kept_data, true).await?.len() as u64;
        Ok((plan, listed))
    }

    /// Applies a plan; `listed` is what a listing made under this hold of
    /// the lease found.
    async fn apply_gc(&self, plan: GcPlan, listed: &HashSet<ObjectId>) -> Result<GcReport> {
        let mut report = GcReport {
            blobs_deleted: 0,
            bytes_freed: 0,
            blobs_spared: 0,
            tombstones: 0,
            leftovers_deleted: 0,
            orphan_outboards_deleted: 0,
            plan: plan.clone(),
        };
        // Tombstones first: the log keeps every expired version's record.
        for id in &plan.versions_expired {
            // Gone already: a gc before this one expired it (or this one
            // ran before and was cut short after its sweep; its tombstone
            // was written first), or an erasure replaced it. A read of it
            // may still succeed from memory or the cache: the listing
            // decides. Any other failure stops the gc before it deletes
            // anything, so no record is lost without its tombstone.
            if !listed.contains(&id.0) {
                continue;
            }
            let v = match self.version(id).await {
                Ok(v) => v,
                Err(e) if e.is_missing() && !self.store().has_blob(&id.0).await? => continue,
                Err(e) => return Err(e),
            };
            let mut tables = BTreeMap::new();
            for (name, sid) in &v.tables {
                let s = self.load_snapshot(id, name, sid).await?;
                tables.insert(name.clone(), (s.rows, s.content_hash));
            }
            let t = Tombstone {
                format: FORMAT_VERSION,
                id: *id,
                parents: v.parents.clone(),
                time_ms: v.time_ms,
                message: v.message.clone(),
                tables,
                expired_ms: plan.now_ms,
                reason: policy_text(&plan.policy),
            };
            let bytes = serde_json::to_vec_pretty(&t)
                .map_err(|e| Error::Internal(format!("encoding a tombstone: {e}")))?;
            match self
                .store()
                .create_doc(&format!("tombstones/{id}.json"), Bytes::from(bytes))
                .await
            {
                Ok(()) => report.tombstones += 1,
                Err(tablepin_store::StoreError::Exists { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        for name in &plan.tags_deleted {
            if let Some(h) = self.store().ref_head(RefKind::Tag, name).await? {
                if h.target.is_some() {
                    self.move_ref(RefKind::Tag, name, h.seq, None, "gc: its version expired")
                        .await?;
                }
            }
        }
        // Anything a commit made reachable since the plan is spared, and
        // what a ref deleted since names.
        let mut reachable = HashSet::new();
        let deleted_since = chrono::Utc::now().timestamp_millis() - plan.policy.grace_ms;
        let logs = self.ref_logs().await?;
        for kind in [RefKind::Branch, RefKind::Tag] {
            for (_, target, live) in logs.roots(kind, deleted_since) {
                // A deleted ref's version that is gone has nothing to spare.
                if live || self.store().has_blob(&target.0).await? {
                    self.reach(&target, &mut reachable).await?;
                }
            }
        }
        let kept: HashSet<VersionId> = plan.versions_kept.iter().copied().collect();
        let grace_cut = chrono::Utc::now().timestamp_millis() - plan.policy.grace_ms;
        let expired: HashSet<ObjectId> = plan.versions_expired.iter().map(|v| v.0).collect();
        for id in sweep_order(&plan.blobs_deleted, &expired) {
            if reachable.contains(id) || kept.contains(&VersionId(*id)) {
                report.blobs_spared += 1;
                continue;
            }
            let Some(meta) = self.store().blob_meta(id).await? else {
                continue;
            };
            if meta.last_modified.timestamp_millis() > grace_cut && !expired.contains(id) {
                report.blobs_spared += 1;
                continue;
            }
            self.store().delete_blob(id).await?;
            report.blobs_deleted += 1;
            report.bytes_freed += meta.size;
        }
        for l in self.store().leftovers()? {
            if plan.leftovers.contains(&l.path) && l.last_modified.timestamp_millis() <= grace_cut {
                self.store().delete_leftover(&l)?;
                report.leftovers_deleted += 1;
            }
        }
        // An outboard is read only with its blob: one whose blob a commit
        // stored since the plan stays.
        for id in &plan.orphan_outboards {
            if !self.store().has_blob(id).await? {
                self.store().delete_outboard(id).await?;
                report.orphan_outboards_deleted += 1;
            }
        }
        Ok(report)
    }
}

/// The outboards of `outboards` whose blob is not in `listed`, written
/// before `grace_cut`.
fn orphans(
    outboards: &[tablepin_store::BlobMeta],
    listed: &HashSet<ObjectId>,
    grace_cut: i64,
) -> Vec<ObjectId> {
    outboards
        .iter()
        .filter(|o| !listed.contains(&o.id) && o.last_modified.timestamp_millis() <= grace_cut)
        .map(|o| o.id)
        .collect()
}

#[cfg(test)]
mod tests;

/// A repository's garbage collection ([`Repo::gc`]): planned, applied,
/// or both under one hold of the gc/erasure lease.
#[derive(Debug, Clone, Copy)]
pub struct Gc<'a> {
    repo: &'a Repo,
}

impl Repo {
    /// The repository's garbage collection.
    pub fn gc(&self) -> Gc<'_> {
        Gc { repo: self }
    }
}

impl Gc<'_> {
    /// Every version that a ref names or named, and their ancestors, that
    /// is still stored: what gc's rules choose among.
    pub async fn versions(&self) -> Result<BTreeSet<VersionId>> {
        self.repo.known_versions().await
    }

    /// Bytes and count of every stored blob.
    pub async fn stored(&self) -> Result<(u64, u64)> {
        let blobs = self.repo.store.list_blobs().await?;
        Ok((blobs.iter().map(|b| b.size).sum(), blobs.len() as u64))
    }

    /// Plans a garbage collection (holding the gc/erasure lease while it
    /// reads, see `lease`).
    pub async fn plan(&self, policy: &GcPolicy) -> Result<GcPlan> {
        policy.validate()?;
        let lease = self.repo.take_lease(LeaseKind::Gc).await?;
        let out = self.repo.plan_gc(policy).await;
        lease.release(self.repo).await;
        Ok(out?.0)
    }

    /// Applies a plan: tombstones, tag deletions, then the sweep (holding
    /// the gc/erasure lease). What the plan expires and another gc or an
    /// erasure has deleted since is passed over.
    pub async fn apply(&self, plan: GcPlan) -> Result<GcReport> {
        let lease = self.repo.take_lease(LeaseKind::Gc).await?;
        let out = async {
            let listed = self.repo.listed_blobs().await?;
            self.repo.apply_gc(plan, &listed).await
        }
        .await;
        lease.release(self.repo).await;
        out
    }

    /// Plans and applies a garbage collection under one hold of the
    /// gc/erasure lease, so that nothing deletes in between: what
    /// [`Gc::plan`] then [`Gc::apply`] do, without the second
    /// reading again what the first read.
    pub async fn run(&self, policy: &GcPolicy) -> Result<GcReport> {
        policy.validate()?;
        let lease = self.repo.take_lease(LeaseKind::Gc).await?;
        let out = async {
            let (plan, listed) = self.repo.plan_gc(policy).await?;
            self.repo.apply_gc(plan, &listed).await
        }
        .await;
        lease.release(self.repo).await;
        out
    }

    /// The blobs a version needs to stay readable, and so the blobs `gc`
    /// keeps for it: its record, its table snapshots, their data files and
    /// deletion vectors (a pack once, however many files it serves). What
    /// a retention rule keeps is the union of its kept versions' sets.
    pub async fn blobs_of(&self, id: &VersionId) -> Result<BTreeSet<ObjectId>> {
        let mut out = HashSet::new();
        self.repo.reach(id, &mut out).await?;
        Ok(out.into_iter().collect())
    }
}
