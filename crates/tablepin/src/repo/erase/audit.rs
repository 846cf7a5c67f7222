//! The audit records of erasures, the versions they replaced, and the
//! check that erased rows are gone from every kept version.

use super::*;

impl Repo {
    /// Every version an erasure replaced (and deleted), with its
    /// replacement, from the audit records and any interrupted erasure.
    /// A damaged audit record is an error naming it.
    pub(crate) async fn replacements(&self) -> Result<HashMap<VersionId, VersionId>> {
        let (map, problems) = self.replacements_checked().await?;
        match problems.into_iter().next() {
            None => Ok(map),
            Some(p) => Err(Error::DamagedDocument(p)),
        }
    }

    /// [`Repo::replacements`] from every audit record that decodes, and a
    /// sentence for each one that does not. An interrupted erasure's
    /// replacement counts only once it is stored: a reader must never
    /// follow a replacement that an erasure did not put in place.
    pub(crate) async fn replacements_checked(
        &self,
    ) -> Result<(HashMap<VersionId, VersionId>, Vec<String>)> {
        let (records, mut problems) = self.audit_checked().await?;
        let mut out: HashMap<VersionId, VersionId> = records
            .iter()
            .flat_map(|r| r.versions.iter().map(|v| (v.old, v.new)))
            .collect();
        for p in self.store().list_docs(layout::AUDIT_PENDING).await? {
            let Some(b) = self.store().get_doc(&p).await? else {
                continue;
            };
            match serde_json::from_slice::<Pending>(&b) {
                Ok(pending) => {
                    for v in &pending.versions {
                        if self.store().has_blob(&v.new.0).await? {
                            out.insert(v.old, v.new);
                        }
                    }
                }
                Err(e) => problems.push(format!(
                    "the record of an interrupted erasure, {p}, is damaged: {e}"
                )),
            }
        }
        Ok((out, problems))
    }

    /// Every audit record that decodes, oldest first, and a sentence for
    /// each one that does not.
    pub(crate) async fn audit_checked(&self) -> Result<(Vec<AuditRecord>, Vec<String>)> {
        let mut out = Vec::new();
        let mut problems = Vec::new();
        for p in self.store().list_docs(layout::AUDIT).await? {
            if p.starts_with(layout::AUDIT_PENDING) || !p.ends_with(".json") {
                continue;
            }
            if let Some(b) = self.store().get_doc(&p).await? {
                match serde_json::from_slice(&b) {
                    Ok(r) => out.push(r),
                    Err(e) => problems.push(format!("audit record {p} is damaged: {e}")),
                }
            }
        }
        Ok((out, problems))
    }

    /// The data files among `blobs` that hold a row an erasure removed.
    /// With `since_erasure`, blobs last written before the earliest erasure
    /// are skipped: that erasure read and rewrote every stored data file,
    /// and a commit that reuses an old blob rewrites it (freshens it), so
    /// only a blob written since can hold its rows. `verify --erased`
    /// checks every blob.
    pub(crate) async fn erased_holders(
        &self,
        records: Vec<AuditRecord>,
        blobs: &[(ObjectId, i64)],
        since_erasure: bool,
    ) -> Result<Vec<(ObjectId, u64)>> {
        let first = records.iter().map(|r| r.time_ms).min().unwrap_or(i64::MAX);
        let blobs: Vec<ObjectId> = blobs
            .iter()
            .filter(|(_, t)| !since_erasure || *t >= first)
            .map(|b| b.0)
            .collect();
        let mut sets = Vec::new();
        for r in records {
            let rows: HashSet<String> = r.fingerprint.rows.iter().cloned().collect();
            sets.push((fingerprint_key(&r.fingerprint.salt), rows));
        }
        let mut out = Vec::new();
        if sets.is_empty() {
            return Ok(out);
        }
        for id in &blobs {
            let bytes = self.store().get_blob(id).await?;
            if bytes.len() < 4 || &bytes[..4] != b"PAR1" {
                continue;
            }
            let (_, batches) = own_rows(*id, bytes)?;
            let mut hits = 0u64;
            for b in &batches {
                for h in hash_rows(b)? {
                    if sets
                        .iter()
                        .any(|(k, rows)| rows.contains(&fingerprint(k, &h)))
                    {
                        hits += 1;
                    }
                }
            }
            if hits > 0 {
                out.push((*id, hits));
            }
        }
        Ok(out)
    }
}

impl Erasure<'_> {
    /// Every audit record, oldest first. A damaged one is an error naming
    /// it.
    pub async fn audit(&self) -> Result<Vec<AuditRecord>> {
        let (records, problems) = self.repo.audit_checked().await?;
        match problems.into_iter().next() {
            None => Ok(records),
            Some(p) => Err(Error::DamagedDocument(p)),
        }
    }

    /// Proves that no stored blob holds a row any recorded erasure removed.
    pub async fn verify(&self, progress: &dyn Progress) -> Result<ErasedCheck> {
        let blobs = self.repo.store().list_blobs().await?;
        let records = self.audit().await?;
        progress.begin("checking erasures", blobs.iter().map(|b| b.size).sum());
        let mut check = ErasedCheck {
            records: records.len() as u64,
            ..Default::default()
        };
        let ids: Vec<(ObjectId, i64)> = blobs
            .iter()
            .map(|b| (b.id, b.last_modified.timestamp_millis()))
            .collect();
        for b in &blobs {
            let bytes = self.repo.store().get_stored_blob(&b.id).await?;
            if bytes.len() >= 4 && &bytes[..4] == b"PAR1" {
                check.files += 1;
                check.rows += parquet::file::reader::SerializedFileReader::new(bytes)
                    .map(|r| {
                        parquet::file::reader::FileReader::metadata(&r)
                            .file_metadata()
                            .num_rows() as u64
                    })
                    .unwrap_or(0);
            }
            progress.advance(b.size);
        }
        check.holders = self.repo.erased_holders(records, &ids, false).await?;
        if let Some(cache) = self.repo.store().cache() {
            let stored: HashSet<ObjectId> = blobs.iter().map(|b| b.id).collect();
            for id in cache.ids().into_iter().filter(|id| !stored.contains(id)) {
                cache.remove(&id);
                check.cache_removed += 1;
            }
        }
        progress.end();
        Ok(check)
    }
}
