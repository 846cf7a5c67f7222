//! Refs: append-only logs of numbered entries, each created put-if-absent.

use super::*;

/// A ref's hint is written at every this many-th entry (see `append_ref`).
/// It is read only for a log longer than [`REF_PAGE`] entries.
pub(crate) const HINT_EVERY: u64 = 100;

/// Entries of a ref's log listed before its hint is needed: the page of an
/// S3 or GCS listing (Azure's holds 5,000).
pub(crate) const REF_PAGE: usize = 1000;

/// Small objects (ref entries) read at once when a command reads many.
pub(crate) const CONCURRENT_READS: usize = 16;

impl Store {
    /// The names of every ref of a kind, sorted.
    pub async fn ref_names(&self, kind: RefKind) -> Result<Vec<String>> {
        let prefix = layout::refs(kind);
        let listed = retried(|_| self.os.list_with_delimiter(Some(&prefix)))
            .await
            .map_err(|e| io(&prefix, e))?;
        let mut names: Vec<String> = listed
            .common_prefixes
            .iter()
            .filter_map(|p| p.filename().map(str::to_string))
            .collect();
        names.sort();
        Ok(names)
    }

    /// The entry numbers of a ref's log after `after` (all when `None`),
    /// ascending.
    pub(crate) async fn ref_seqs_after(
        &self,
        kind: RefKind,
        name: &str,
        after: Option<u64>,
    ) -> Result<Vec<u64>> {
        let prefix = layout::ref_dir(kind, name);
        let metas = match after {
            None => self.list(&prefix).await?,
            Some(seq) => {
                let offset = layout::ref_entry(kind, name, seq);
                retried(|_| {
                    self.os
                        .list_with_offset(Some(&prefix), &offset)
                        .try_collect()
                })
                .await
                .map_err(|e| io(&prefix, e))?
            }
        };
        let mut seqs: Vec<u64> = metas
            .iter()
            .filter_map(|m| m.location.filename()?.parse().ok())
            .filter(|s| after.is_none_or(|a| *s > a))
            .collect();
        seqs.sort_unstable();
        Ok(seqs)
    }

    pub(crate) async fn get_ref_entry(
        &self,
        kind: RefKind,
        name: &str,
        seq: u64,
    ) -> Result<RefEntry> {
        let path = layout::ref_entry(kind, name, seq);
        let bytes = self.get_path(&path).await?;
        serde_json::from_slice(&bytes).map_err(|source| StoreError::Decode {
            path: path.to_string(),
            source,
        })
    }

    /// The entry number a ref's hint gives, if it has a readable one.
    pub(crate) async fn ref_hint(&self, kind: RefKind, name: &str) -> Result<Option<u64>> {
        match self.get_path(&layout::hint(kind, name)).await {
            // A damaged hint is no hint: the listing finds the head anyway.
            Ok(b) => Ok(std::str::from_utf8(&b)
                .ok()
                .and_then(|t| t.trim().parse().ok())),
            Err(StoreError::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// A ref's newest entry, if the ref has any. A log that fits in one
    /// page of a listing (1,000 entries: every log but one of
    /// decades of weekly commits) costs a listing and a read; a longer one,
    /// the start of that listing, the hint, the entries listed after it,
    /// and the newest of them read (four requests, however long the log).
    /// A hint whose entry is missing is ignored.
    pub async fn ref_head(&self, kind: RefKind, name: &str) -> Result<Option<RefEntry>> {
        let prefix = layout::ref_dir(kind, name);
        // At most one page: a log shorter than that is listed whole, in
        // whatever order the store lists it.
        let first: Vec<object_store::ObjectMeta> =
            retried(|_| self.os.list(Some(&prefix)).take(REF_PAGE).try_collect())
                .await
                .map_err(|e| io(&prefix, e))?;
        if first.len() < REF_PAGE {
            let newest = first
                .iter()
                .filter_map(|m| m.location.filename()?.parse::<u64>().ok())
                .max();
            return match newest {
                Some(seq) => self.get_ref_entry(kind, name, seq).await.map(Some),
                None => Ok(None),
            };
        }
        let hint = self.ref_hint(kind, name).await?;
        let newer = self.ref_seqs_after(kind, name, hint).await?;
        let Some(seq) = newer.last().copied().or(hint) else {
            return Ok(None);
        };
        match self.get_ref_entry(kind, name, seq).await {
            Err(StoreError::NotFound { .. }) if newer.is_empty() => {
                // The hint names an entry that is not there.
                match self.ref_seqs_after(kind, name, None).await?.last() {
                    Some(seq) => Ok(Some(self.get_ref_entry(kind, name, *seq).await?)),
                    None => Ok(None),
                }
            }
            other => other.map(Some),
        }
    }

    /// Every entry of a ref's log, oldest first, each read on its own with
    /// its number and its path: a damaged entry comes back as its error, so
    /// that `verify` can name every one instead of stopping at the first.
    /// The entries are read several at a time.
    pub async fn ref_log_checked(
        &self,
        kind: RefKind,
        name: &str,
    ) -> Result<Vec<(u64, String, Result<RefEntry>)>> {
        let seqs = self.ref_seqs_after(kind, name, None).await?;
        let reads = seqs.into_iter().map(|seq| async move {
            let path = layout::ref_entry(kind, name, seq).to_string();
            (seq, path, self.get_ref_entry(kind, name, seq).await)
        });
        Ok(futures::stream::iter(reads)
            .buffered(CONCURRENT_READS)
            .collect()
            .await)
    }

    /// A ref's whole log, oldest first.
    pub async fn ref_log(&self, kind: RefKind, name: &str) -> Result<Vec<RefEntry>> {
        self.ref_log_checked(kind, name)
            .await?
            .into_iter()
            .map(|(_, _, entry)| entry)
            .collect()
    }

    /// Appends an entry to a ref's log: creates entry `entry.seq`
    /// put-if-absent. Fails with [`StoreError::RefConflict`] when another
    /// writer created it first; an entry holding exactly these bytes is this
    /// writer's own (an earlier attempt landed though its answer was lost),
    /// not a conflict. Then moves the ref's hint forward.
    pub async fn append_ref(&self, kind: RefKind, name: &str, entry: &RefEntry) -> Result<()> {
        let path = layout::ref_entry(kind, name, entry.seq);
        let bytes = serde_json::to_vec_pretty(entry).map_err(|source| StoreError::Decode {
            path: path.to_string(),
            source,
        })?;
        let bytes = Bytes::from(bytes);
        match self.create_path(&path, bytes.clone(), true).await {
            Err(StoreError::Exists { .. }) => {
                return Err(StoreError::RefConflict {
                    name: format!("{}/{}", kind.dir(), name),
                    seq: entry.seq,
                })
            }
            other => other?,
        }
        // The hint only saves requests: a lost or late one is corrected by
        // the listing after it, so its failure does not fail the command.
        // It moves every HINT_EVERY entries: the listing after it then
        // stays within one page, and most commits write one object less.
        if !entry.seq.is_multiple_of(HINT_EVERY) {
            return Ok(());
        }
        self.before_write();
        let hint = layout::hint(kind, name);
        let _ = self
            .os
            .put_opts(
                &hint,
                PutPayload::from(entry.seq.to_string()),
                PutOptions::default(),
            )
            .await;
        Ok(())
    }
}
