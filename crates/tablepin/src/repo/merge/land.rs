//! A merge landed: the merge version stored and the branch moved, or moved
//! forward when it holds nothing of its own.

use super::*;

impl Repo {
    /// Moves the branch to `to` after `head`; false when another writer
    /// moved it first.
    pub(crate) async fn fast_forward(
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
}

impl Repo {
    /// Writes the merged tables' blobs and snapshots, then the version
    /// and last the branch's ref entry; the new version, or `None` when
    /// another writer moved the branch first.
    pub(crate) async fn land_merge(
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
