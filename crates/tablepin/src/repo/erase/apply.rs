//! Applying an erasure: the rewritten versions stored, the refs moved (held
//! while a writer keeps winning), the pending record, the old blobs deleted
//! and the audit record written.

use super::*;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Pending {
    pub(crate) table: String,
    pub(crate) reason: String,
    pub(crate) predicate_hash: String,
    pub(crate) salt: String,
    pub(crate) started_ms: i64,
    pub(crate) fingerprints: Vec<String>,
    pub(crate) delete: Vec<ObjectId>,
    pub(crate) versions: Vec<AuditVersion>,
    pub(crate) moved_refs: Vec<AuditMovedRef>,
    pub(crate) bytes_written: u64,
}

impl Pending {
    /// A new erasure's record, with a fresh salt.
    pub(crate) fn new(plan: &ErasePlan) -> Self {
        Self {
            table: plan.table.clone(),
            reason: plan.reason.clone(),
            predicate_hash: plan.predicate_hash.clone(),
            salt: hex::encode(rand_salt()),
            started_ms: now_ms(),
            ..Default::default()
        }
    }

    /// Adds what a plan (of this erasure's predicate) does: its rows'
    /// fingerprints, the blobs to delete, the versions replaced and the
    /// refs moved.
    pub(crate) fn add(&mut self, plan: &ErasePlan) {
        let key = fingerprint_key(&self.salt);
        let mut fps: BTreeSet<String> = self.fingerprints.iter().cloned().collect();
        fps.extend(plan.work.fingerprints.iter().map(|h| fingerprint(&key, h)));
        self.fingerprints = fps.into_iter().collect();
        let mut del: BTreeSet<ObjectId> = self.delete.iter().copied().collect();
        del.extend(plan.work.delete.iter().copied());
        self.delete = del.into_iter().collect();
        for v in &plan.versions {
            if !self.versions.iter().any(|a| a.old == v.old) {
                self.versions.push(AuditVersion {
                    old: v.old,
                    new: v.new,
                    rows_removed: v.rows_removed,
                    old_content_hash: v.old_content_hash,
                    new_content_hash: v.new_content_hash,
                });
            }
        }
        let content_of: HashMap<VersionId, ContentHash> = (plan.versions.iter())
            .flat_map(|v| [(v.old, v.old_content_hash), (v.new, v.new_content_hash)])
            .collect();
        for (kind, name, old, new) in &plan.work.moves {
            self.moved_refs.push(AuditMovedRef {
                kind: *kind,
                name: name.clone(),
                old: *old,
                new: *new,
                old_content_hash: content_of.get(old).copied().unwrap_or_default(),
                new_content_hash: content_of.get(new).copied().unwrap_or_default(),
            });
        }
    }
}

impl Repo {
    /// The newest pending record of an interrupted erasure with this
    /// predicate, and the paths of all its entries. Pending records are
    /// append-only numbered entries, so a crash never loses one.
    pub(crate) async fn pending(
        &self,
        predicate_hash: &str,
    ) -> Result<(Option<Pending>, Vec<String>)> {
        let paths = self
            .store()
            .list_docs(&layout::audit_pending(predicate_hash))
            .await?;
        let Some(last) = paths.last() else {
            return Ok((None, paths));
        };
        let Some(b) = self.store().get_doc(last).await? else {
            return Ok((None, paths));
        };
        let p = serde_json::from_slice(&b).map_err(|source| {
            Error::Store(tablepin_store::StoreError::Decode {
                path: last.clone(),
                source,
            })
        })?;
        Ok((Some(p), paths))
    }

    /// Applies a plan under the lease, planning again while commits move
    /// the refs; `fresh` when it was made under this hold of the lease
    /// (nothing can have deleted since). Returns the plan applied.
    ///
    /// Planning reads every version of the table, which on a busy branch
    /// takes longer than the commits between two reads of it: planning
    /// again and again would never catch up. So after the first lost race
    /// the branches it moves are held ([`RefHold`]): commits wait while it
    /// plans again and moves them, and the holds go with the move (or are
    /// released when it ends otherwise).
    pub(crate) async fn apply_erasure_leased(
        &self,
        mut plan: ErasePlan,
        fresh: bool,
    ) -> Result<(ErasePlan, EraseReport)> {
        let started = std::time::Instant::now();
        let mut attempt = 0u32;
        let mut held: Vec<String> = Vec::new();
        let out = loop {
            if attempt > 0 {
                tokio::time::sleep(super::super::retry_pause(attempt)).await;
                if let Err(e) = self.hold_branches(&plan, &mut held).await {
                    break Err(e);
                }
            }
            if attempt > 0 || (!fresh && !self.erase_plan_holds(&plan).await?) {
                match self.plan_erasure(&plan.work.options).await {
                    Ok(p) => plan = p,
                    Err(e) => break Err(e),
                }
            }
            attempt += 1;
            match self.apply_erasure(&plan).await {
                Err(Error::RefMoved { .. }) if started.elapsed() < ERASE_RETRY_FOR => continue,
                other => break other.map(|report| (plan, report)),
            }
        };
        self.release_holds(&held).await;
        out
    }

    /// Holds each branch the plan moves that is not held yet (`held`
    /// grows with those it holds). A branch a commit moves while it is
    /// being held is read again and held where it is then.
    pub(crate) async fn hold_branches(
        &self,
        plan: &ErasePlan,
        held: &mut Vec<String>,
    ) -> Result<()> {
        let reason = &plan.work.options.reason;
        for (kind, name, _, _) in &plan.work.moves {
            if *kind != RefKind::Branch || held.contains(name) {
                continue;
            }
            for _ in 0..HOLD_TRIES {
                let Some(head) = self.store().ref_head(RefKind::Branch, name).await? else {
                    break;
                };
                if head.target.is_none() || head.held_at(now_ms()).is_some() {
                    break;
                }
                let entry = RefEntry {
                    seq: head.seq + 1,
                    time_ms: now_ms(),
                    author: self.author.clone(),
                    message: format!("erase: held while it plans again ({reason})"),
                    hold: Some(RefHold {
                        by: "erase".into(),
                        until_ms: now_ms() + RefHold::MAX_MS,
                    }),
                    ..head
                };
                match self.store().append_ref(RefKind::Branch, name, &entry).await {
                    Ok(()) => {
                        held.push(name.clone());
                        break;
                    }
                    Err(tablepin_store::StoreError::RefConflict { .. }) => continue,
                    Err(e) => return Err(e.into()),
                }
            }
        }
        Ok(())
    }

    /// Releases the holds still standing on these branches (an erasure
    /// that moved a branch released its hold with the move). Best effort:
    /// a hold left behind lapses on its own.
    pub(crate) async fn release_holds(&self, held: &[String]) {
        for name in held {
            let Ok(Some(head)) = self.store().ref_head(RefKind::Branch, name).await else {
                continue;
            };
            if head.hold.is_none() {
                continue;
            }
            let entry = RefEntry {
                seq: head.seq + 1,
                time_ms: now_ms(),
                author: self.author.clone(),
                message: "erase: released".into(),
                hold: None,
                ..head
            };
            let _ = self.store().append_ref(RefKind::Branch, name, &entry).await;
        }
    }

    /// The plan still fits the repository: every version it replaces is
    /// stored and not expired, and every ref it moves names what it did.
    pub(crate) async fn erase_plan_holds(&self, plan: &ErasePlan) -> Result<bool> {
        for v in &plan.versions {
            if !self.store().has_blob(&v.old.0).await? || self.tombstone(&v.old).await?.is_some() {
                return Ok(false);
            }
        }
        for (kind, name, old, new) in &plan.work.moves {
            let head = self
                .store()
                .ref_head(*kind, name)
                .await?
                .and_then(|h| h.target);
            if head != Some(*old) && head != Some(*new) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// What the ref logs show an erasure did: each move once, and only
    /// those a ref's log holds (an attempt that lost a ref race recorded
    /// moves it never made).
    pub(crate) async fn moves_made(
        &self,
        intended: &[AuditMovedRef],
    ) -> Result<Vec<AuditMovedRef>> {
        let mut out: Vec<AuditMovedRef> = Vec::new();
        for m in intended {
            if out
                .iter()
                .any(|x| x.kind == m.kind && x.name == m.name && x.new == m.new)
            {
                continue;
            }
            let log = self.store().ref_log(m.kind, &m.name).await?;
            if log.iter().any(|e| e.target == Some(m.new)) {
                out.push(m.clone());
            }
        }
        Ok(out)
    }

    /// Applies one plan; [`Error::RefMoved`] when a ref moved under it.
    pub(crate) async fn apply_erasure(&self, plan: &ErasePlan) -> Result<EraseReport> {
        let start = std::time::Instant::now();
        let (previous, mut pending_paths) = self.pending(&plan.predicate_hash).await?;
        let mut pending = previous.unwrap_or_else(|| Pending::new(plan));
        // 1. New blobs.
        for b in &plan.work.blobs {
            let out = self.store().freshen_blob(b.clone()).await?;
            if out.new {
                pending.bytes_written += out.bytes;
            }
        }
        // 2. The pending record (replaced when a later run adds to it).
        pending.add(plan);
        let pb = Bytes::from(
            serde_json::to_vec_pretty(&pending)
                .map_err(|e| Error::Internal(format!("encoding an audit record: {e}")))?,
        );
        let pending_path =
            layout::audit_pending_entry(&plan.predicate_hash, pending_paths.len() + 1);
        self.store().create_doc(&pending_path, pb).await?;
        pending_paths.push(pending_path);
        // 3. Move the refs.
        for m in &plan.work.moves {
            self.move_erased_ref(m, &plan.reason).await?;
        }
        // 4. Delete the old blobs that nothing reaches now.
        let reachable = self.reachable_blobs().await?;
        let mut deleted = 0u64;
        let records: HashSet<ObjectId> = pending.versions.iter().map(|v| v.old.0).collect();
        for id in super::super::gc::sweep_order(&pending.delete, &records) {
            if !reachable.contains(id) && self.store().has_blob(id).await? {
                self.store().delete_blob(id).await?;
                deleted += 1;
            }
        }
        // 5. The audit record, then the pending entries dropped.
        let audit = self.write_audit(pending, &reachable, deleted).await?;
        for p in &pending_paths {
            self.store().delete_doc(p).await?;
        }
        Ok(EraseReport {
            audit,
            seconds: start.elapsed().as_secs_f64(),
        })
    }

    /// Moves one ref of an erasure from its old version to the new one
    /// (done already when it names the new one); [`Error::RefMoved`] when
    /// it names neither, or another writer took its next entry first.
    pub(crate) async fn move_erased_ref(&self, m: &RefMove, reason: &str) -> Result<()> {
        let (kind, name, old, new) = m;
        let moved = || Error::RefMoved {
            name: format!("{}/{name}", kind.dir()),
        };
        match self.store().ref_head(*kind, name).await? {
            Some(h) if h.target == Some(*old) => {
                let how = format!("erase: {reason}");
                match self.move_ref(*kind, name, h.seq, Some(*new), &how).await {
                    Err(Error::Store(tablepin_store::StoreError::RefConflict { .. })) => {
                        Err(moved())
                    }
                    other => other.map(drop),
                }
            }
            Some(h) if h.target == Some(*new) => Ok(()),
            _ => Err(moved()),
        }
    }

    /// Every blob the refs reach now, along first parents to where gc
    /// expired the chain: to the first version a listing made after
    /// reading the refs lacks, whatever a read of it from memory or the
    /// cache gives.
    pub(crate) async fn reachable_blobs(&self) -> Result<HashSet<ObjectId>> {
        let heads = self.ref_targets().await?;
        let listed = self.listed_blobs().await?;
        let mut reachable = HashSet::new();
        for head in heads {
            let mut next = Some(head);
            while let Some(id) = next {
                if reachable.contains(&id.0) || !listed.contains(&id.0) {
                    break;
                }
                match self.reach(&id, &mut reachable).await {
                    Ok(v) => next = v.parents.first().copied(),
                    // Expired by gc: the stored chain ends here.
                    Err(e) if e.is_missing() && !self.store().has_blob(&id.0).await? => break,
                    // A failed read is not the end of the chain: what
                    // lies past it may still need the blobs below.
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(reachable)
    }

    /// Writes the audit record of a finished erasure, once: a run that
    /// died after writing it finds it and returns it. The record holds
    /// only what this erasure did: the replacements the refs reach now and
    /// the moves their logs show.
    pub(crate) async fn write_audit(
        &self,
        mut pending: Pending,
        reachable: &HashSet<ObjectId>,
        deleted: u64,
    ) -> Result<AuditRecord> {
        let existing = self.erasure().audit().await?;
        if let Some(done) = existing.iter().find(|a| {
            a.predicate_hash == pending.predicate_hash && a.fingerprint.salt == pending.salt
        }) {
            return Ok(done.clone());
        }
        pending.versions.retain(|v| reachable.contains(&v.new.0));
        pending.moved_refs = self.moves_made(&pending.moved_refs).await?;
        let mut seq = existing.last().map_or(1, |a| a.seq + 1);
        let mut record = AuditRecord {
            format: FORMAT_VERSION,
            seq,
            time_ms: pending.started_ms,
            author: self.author().to_string(),
            table: pending.table,
            reason: pending.reason,
            predicate_hash: pending.predicate_hash,
            versions: pending.versions,
            moved_refs: pending.moved_refs,
            blobs_deleted: deleted,
            bytes_written: pending.bytes_written,
            fingerprint: ErasedFingerprint {
                salt: pending.salt,
                rows: pending.fingerprints,
            },
        };
        loop {
            let bytes = Bytes::from(
                serde_json::to_vec_pretty(&record)
                    .map_err(|e| Error::Internal(format!("encoding an audit record: {e}")))?,
            );
            match self
                .store()
                .create_doc(&layout::audit_record(seq), bytes)
                .await
            {
                Ok(()) => return Ok(record),
                Err(tablepin_store::StoreError::Exists { .. }) => {
                    seq += 1;
                    record.seq = seq;
                }
                Err(e) => return Err(e.into()),
            }
        }
    }
}
