//! Landing a commit: its blobs written, its version stored, its branch
//! moved put-if-absent (or the race lost, with what moved).

use super::*;

/// The staged data files of an input, as blobs written already (counted as
/// the commit's new bytes).
pub(crate) fn staged_outcomes(input: &Prepared<'_>) -> Vec<PutOutcome> {
    match input {
        Prepared::Staged(s) => s
            .files
            .iter()
            .map(|f| PutOutcome {
                id: f.data,
                bytes: f.bytes,
                new: true,
            })
            .collect(),
        _ => Vec::new(),
    }
}

impl Repo {
    /// Writes one attempt: the blobs, the snapshot, the version, and last
    /// the ref entry; `None` when another writer moved the branch first.
    /// Some of the plan's blobs may be written already (`prior`, counted
    /// in the change: a streamed commit writes each window's blobs as it
    /// goes, a staged commit's data files were written by its workers).
    pub(crate) async fn write_commit_after(
        &self,
        table: &str,
        p: Planned,
        prior: &[PutOutcome],
        opts: &CommitOptions,
        earlier: &mut HashSet<ObjectId>,
    ) -> Result<Option<CommitResult>> {
        let Planned {
            head,
            parent_id,
            parent_tables: mut tables,
            plan: plan::Staged { plan, blobs },
        } = p;
        let mut change = TableChange {
            rows_added: plan.rows_added,
            rows_changed: plan.rows_changed,
            rows_deleted: plan.rows_deleted,
            bytes_new: 0,
            blobs_new: 0,
            checks: plan.checks,
        };
        // Freshen blobs the repository holds already: a gc running now
        // spares young blobs, so this commit's reuse of an old one is safe.
        // The writes are independent (each blob is its own file) and run
        // at once; all of them end before the version that names them
        // is written.
        let snap_bytes = Bytes::from(encode_manifest("table snapshot", &plan.snapshot)?);
        if let Some(same) = unchanged(table, opts, parent_id, &tables, &snap_bytes, &plan, &change)
        {
            return Ok(Some(same));
        }
        let started = std::time::Instant::now();
        let (written, out) = futures::try_join!(
            futures::future::try_join_all(blobs.iter().map(|b| self.store.freshen_blob(b.clone()))),
            self.store.freshen_blob(snap_bytes.clone()),
        )?;
        for o in prior.iter().chain(&written).chain([&out]) {
            if o.new || earlier.contains(&o.id) {
                change.bytes_new += o.bytes;
                change.blobs_new += 1;
            }
        }
        earlier.extend(
            prior
                .iter()
                .chain(&written)
                .chain([&out])
                .filter(|o| o.new)
                .map(|o| o.id),
        );
        tables.insert(table.to_string(), out.id);
        let time_ms = opts.time_ms.unwrap_or_else(now_ms);
        let version = Version {
            format: FORMAT_VERSION,
            parents: parent_id.into_iter().collect(),
            time_ms,
            author: self.author.clone(),
            message: opts.message.clone(),
            tables,
            changes: BTreeMap::from([(table.to_string(), change.clone())]),
            replaces: None,
        };
        let Some((vid, version_bytes)) = self
            .land_version(&version, &opts.branch, head.as_ref())
            .await?
        else {
            return Ok(None);
        };
        // Belt and braces against a gc that read the blobs' ages just
        // before this commit freshened them: put back any blob of this
        // commit that is gone. A blob this commit created can be gone only
        // if the commit took longer than the gc's grace between writing it
        // and landing (a gc deletes unreferenced blobs older than that): a
        // commit that took long (a stalled process, a slow store) freshens
        // all it wrote, its version record too, so a gc still sweeping
        // spares them (it looks at each blob's age just before deleting).
        let slow = started.elapsed() >= SLOW_LANDING;
        futures::future::try_join_all(
            blobs
                .iter()
                .chain([&snap_bytes])
                .zip(written.iter().chain([&out]))
                .filter(|(_, w)| slow || !w.new)
                .map(|(b, w)| async move {
                    if slow {
                        self.store.freshen_blob(b.clone()).await?;
                    } else if !self.store.has_blob(&w.id).await? {
                        self.store.put_blob(b.clone()).await?;
                    }
                    Ok::<_, StoreError>(())
                }),
        )
        .await?;
        if slow {
            let bytes = encode_manifest("version", &version)?;
            self.store.freshen_blob(Bytes::from(bytes)).await?;
        }
        Ok(Some(CommitResult {
            version: vid,
            parent: parent_id,
            branch: opts.branch.clone(),
            table: table.to_string(),
            rows: plan.snapshot.rows,
            content_hash: plan.snapshot.content_hash,
            change,
            version_bytes,
            empty: false,
        }))
    }

    /// Writes a version (whose blobs are stored already), then the
    /// branch's next ref entry after `head` (the first when `None`): the
    /// version's id and bytes, or `None` when another writer moved the
    /// branch first.
    pub(crate) async fn land_version(
        &self,
        version: &Version,
        branch: &str,
        head: Option<&RefEntry>,
    ) -> Result<Option<(VersionId, u64)>> {
        let bytes = encode_manifest("version", version)?;
        let out = self.store.put_blob(Bytes::from(bytes)).await?;
        let id = VersionId(out.id);
        let entry = RefEntry {
            format: FORMAT_VERSION,
            seq: head.map_or(1, |h| h.seq + 1),
            target: Some(id),
            time_ms: version.time_ms,
            author: self.author.clone(),
            message: format!("commit: {}", version.message),
            tables: Some(version.tables.clone()),
            hold: None,
        };
        match self.store.append_ref(RefKind::Branch, branch, &entry).await {
            Ok(()) => Ok(Some((id, out.bytes))),
            Err(StoreError::RefConflict { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// The refusal of a commit to a deleted branch, naming its last head.
    pub(crate) async fn deleted_branch(&self, name: &str) -> Error {
        let target = match self.store.ref_log(RefKind::Branch, name).await {
            Ok(log) => log
                .iter()
                .rev()
                .find_map(|e| e.target)
                .map_or_else(|| "nothing".to_string(), |t| t.short(12)),
            Err(e) => return e.into(),
        };
        Error::DeletedBranch {
            name: name.to_string(),
            target,
        }
    }

    /// Where a commit to a branch without a head starts: at the default
    /// branch's head with `create`, nowhere in a repository without
    /// branches; otherwise the branch name is refused as unknown.
    pub(crate) async fn new_branch_start(
        &self,
        branch: &str,
        create: bool,
    ) -> Result<Option<VersionId>> {
        if create {
            if branch == DEFAULT_BRANCH {
                return Ok(None);
            }
            return Ok(self
                .store
                .ref_head(RefKind::Branch, DEFAULT_BRANCH)
                .await?
                .and_then(|h| h.target));
        }
        let live = self.refs().list(RefKind::Branch).await?;
        if live.is_empty() {
            return Ok(None);
        }
        if let Some(now) = live.iter().find(|r| r.name == branch) {
            // Created or restored since its head was read: build on it (the
            // ref write then loses the race, and the commit plans again).
            return Ok(Some(now.target));
        }
        let hint = closest(branch, live.iter().map(|r| r.name.as_str()))
            .map(|n| format!("; did you mean '{n}'?"))
            .unwrap_or_default();
        Err(Error::UnknownBranch {
            name: branch.to_string(),
            branches: live
                .iter()
                .map(|r| r.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            hint,
        })
    }
}
