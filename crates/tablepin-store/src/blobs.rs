//! Blobs: written put-if-absent under their BLAKE3 name, read and checked
//! against it, listed, deleted; and the temporary files an interrupted
//! local write leaves.

use super::*;

/// Blobs of this size and more are looked for before they are written
/// (see [`Store::put_blob`]).
pub(crate) const PROBE_FIRST_BYTES: usize = 1 << 20;

/// A blob's bytes as [`Store::read_blob`] gives them, and whether they are
/// checked against its name already.
pub(crate) type Read = (Bytes, bool);

/// `range` of an open file, read into a buffer of that size.
pub(crate) fn read_file_range(
    mut file: std::fs::File,
    range: std::ops::Range<u64>,
) -> std::io::Result<Bytes> {
    use std::io::{Read, Seek, SeekFrom};
    let len = range.end.saturating_sub(range.start);
    let mut buf = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    file.seek(SeekFrom::Start(range.start))?;
    file.take(len).read_to_end(&mut buf)?;
    if (buf.len() as u64) < len {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!("the file ended after {} of {len} bytes", buf.len()),
        ));
    }
    Ok(Bytes::from(buf))
}

/// A blob read under `id` whose bytes hash to `actual` is damaged unless
/// the two agree.
/// A failed read of a local file the store holds; a missing one is
/// [`StoreError::NotFound`], as through the store.
pub(crate) fn local_io(path: &std::path::Path, e: std::io::Error) -> StoreError {
    let path = path.display().to_string();
    if e.kind() == std::io::ErrorKind::NotFound {
        return StoreError::NotFound { path };
    }
    StoreError::Io {
        path,
        source: Box::new(object_store::Error::Generic {
            store: "LocalFileSystem",
            source: Box::new(e),
        }),
    }
}

pub(crate) fn check_blob(id: &ObjectId, actual: ObjectId) -> Result<()> {
    if actual == *id {
        Ok(())
    } else {
        Err(StoreError::Corrupt { id: *id, actual })
    }
}

/// `object_store`'s local folder writes a file as `NAME#N` and renames it;
/// a write killed in between leaves that temporary file.
pub(crate) fn is_temporary_name(name: &str) -> bool {
    name.split_once('#')
        .is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The leftover a temporary file of a listing is, or `None` when it is
/// gone by the time it is looked at: a write in flight when the folder was
/// listed has since linked its file into place and removed the temporary
/// one, which is no leftover and no failure.
pub(crate) fn leftover_at(
    file: &std::path::Path,
    path: String,
) -> std::io::Result<Option<Leftover>> {
    let meta = match std::fs::metadata(file) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    Ok(Some(Leftover {
        path,
        size: meta.len(),
        last_modified: meta.modified()?.into(),
    }))
}

impl Store {
    /// Stores bytes under their hash, put-if-absent; says whether they were
    /// new.
    ///
    /// A blob of [`ranged::OUTBOARD_FROM`] bytes or more gets its outboard
    /// first (one hashing gives both its name and the outboard), so that a
    /// stored large blob always has one for ranged reads.
    pub async fn put_blob(&self, bytes: Bytes) -> Result<PutOutcome> {
        let outboard = (bytes.len() >= ranged::OUTBOARD_FROM)
            .then(|| ranged::outboard(&bytes, self.outboard_log));
        let id = match &outboard {
            Some((id, _)) => *id,
            None => ObjectId::of(&bytes),
        };
        let len = bytes.len() as u64;
        let path = layout::blob(&id);
        // A large blob is looked for first: a repeated write then finds it
        // and writes nothing. A small one is created straight away: writing
        // it costs about what the look costs, and a commit's small blobs
        // (its version, snapshot and deletion vectors) are nearly always
        // new, so the look would only add a round trip to every commit.
        if bytes.len() >= PROBE_FIRST_BYTES {
            match retried(|_| self.os.head(&path)).await {
                Ok(_) => {
                    return Ok(PutOutcome {
                        id,
                        new: false,
                        bytes: len,
                    })
                }
                Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(io(&path, e)),
            }
        }
        if let Some((_, ob)) = outboard {
            self.put_outboard(&id, ob).await?;
        }
        let (put, ambiguous) = self.create_retried(&path, &bytes).await;
        match put {
            Ok(_) => Ok(PutOutcome {
                id,
                new: true,
                bytes: len,
            }),
            // Either another writer stored these bytes, or an earlier
            // attempt of this put landed though its answer was lost: the
            // name is the hash, so the stored bytes are these either way.
            Err(object_store::Error::AlreadyExists { .. }) => Ok(PutOutcome {
                id,
                new: ambiguous,
                bytes: len,
            }),
            Err(e) => Err(io(&path, e)),
        }
    }

    /// Stores bytes under their hash like [`Store::put_blob`], and when the
    /// repository holds them already, writes them again (identical bytes,
    /// atomically) so that their age restarts. A commit freshens every blob
    /// it refers to, so that a garbage collection running at the same time,
    /// which spares blobs younger than its grace period, cannot delete an
    /// old blob this commit is about to use again.
    pub async fn freshen_blob(&self, bytes: Bytes) -> Result<PutOutcome> {
        let out = self.put_blob(bytes.clone()).await?;
        if out.new {
            return Ok(out);
        }
        self.put_over(&layout::blob(&out.id), bytes).await?;
        Ok(out)
    }

    /// A blob's size and age, or `None` when it is not stored.
    pub async fn blob_meta(&self, id: &ObjectId) -> Result<Option<BlobMeta>> {
        let path = layout::blob(id);
        match retried(|_| self.os.head(&path)).await {
            Ok(m) => Ok(Some(BlobMeta {
                id: *id,
                size: m.size,
                last_modified: m.last_modified,
            })),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(io(&path, e)),
        }
    }

    /// Reads a blob and checks its bytes against its name.
    pub async fn get_blob(&self, id: &ObjectId) -> Result<Bytes> {
        let (bytes, checked) = self.read_blob(id, true).await?;
        self.check_read(id, &bytes, checked, true)?;
        Ok(bytes)
    }

    /// Reads several blobs at once, each verified against its name as
    /// [`Store::get_blob`] does: the reads run concurrently and the hashing
    /// is spread over the machine's cores. The result is in `ids` order.
    pub async fn get_blobs(&self, ids: &[ObjectId]) -> Result<Vec<Bytes>> {
        self.map_blobs(ids, |_, b| Ok::<_, StoreError>(b)).await
    }

    /// Reads several blobs at once and hands each, verified against its
    /// name as [`Store::get_blob`] does, to `f` with its index in `ids`.
    /// Each blob's hashing and its `f` run as one job on the machine's
    /// cores, so a blob is worked on while its bytes are still in cache, and
    /// the caller waits once for all the work rather than once per step.
    /// The results are in `ids` order; the first error in that order wins.
    pub async fn map_blobs<R, E, F>(&self, ids: &[ObjectId], f: F) -> std::result::Result<Vec<R>, E>
    where
        R: Send,
        E: From<StoreError> + Send,
        F: Fn(usize, Bytes) -> std::result::Result<R, E> + Sync,
    {
        self.map_blobs_from(ids, f, true).await
    }

    /// [`Store::map_blobs`] over the repository's own copies, never the
    /// local cache's: what `verify` checks.
    pub async fn map_stored_blobs<R, E, F>(
        &self,
        ids: &[ObjectId],
        f: F,
    ) -> std::result::Result<Vec<R>, E>
    where
        R: Send,
        E: From<StoreError> + Send,
        F: Fn(usize, Bytes) -> std::result::Result<R, E> + Sync,
    {
        self.map_blobs_from(ids, f, false).await
    }

    /// A blob read from the repository (never the local cache) and checked
    /// against its name.
    pub async fn get_stored_blob(&self, id: &ObjectId) -> Result<Bytes> {
        let (bytes, checked) = self.read_blob(id, false).await?;
        self.check_read(id, &bytes, checked, false)?;
        Ok(bytes)
    }

    pub(crate) async fn map_blobs_from<R, E, F>(
        &self,
        ids: &[ObjectId],
        f: F,
        cached: bool,
    ) -> std::result::Result<Vec<R>, E>
    where
        R: Send,
        E: From<StoreError> + Send,
        F: Fn(usize, Bytes) -> std::result::Result<R, E> + Sync,
    {
        let read = |id: &ObjectId| {
            let id = *id;
            async move { self.read_blob(&id, cached).await }
        };
        let threads = tablepin_format::threads();
        // A store that answers without a runtime (local folder, memory) is
        // read inside each job, on the worker thread that then hashes the
        // blob: no hand-off to a blocking-pool thread and back per blob, and
        // no wait for every read before the first hash. Otherwise, and on
        // one thread (where the jobs would run on the caller's runtime
        // thread, one read after another), the blobs are read concurrently
        // first.
        let fetched: Vec<Option<Read>> = if self.inline_reads && threads > 1 && ids.len() > 1 {
            vec![None; ids.len()]
        } else {
            futures::future::try_join_all(ids.iter().map(read))
                .await?
                .into_iter()
                .map(Some)
                .collect()
        };
        let items: Vec<(usize, &ObjectId, Option<Read>)> = ids
            .iter()
            .zip(fetched)
            .enumerate()
            .map(|(i, (id, b))| (i, id, b))
            .collect();
        let job = |(i, id, b): &(usize, &ObjectId, Option<Read>)| {
            let (b, checked) = match b {
                Some(b) => b.clone(),
                None => futures::executor::block_on(read(id))?,
            };
            self.check_read(id, &b, checked, cached)?;
            f(*i, b)
        };
        match tablepin_format::try_map(threads, &items, job) {
            Some(r) => r,
            // The worker threads could not run: work here instead.
            None => items.iter().map(job).collect(),
        }
    }

    /// A blob's bytes and whether they are checked against its name
    /// already: from the local cache when `cached` and it holds a good copy
    /// (checked, since the cache hashes what it reads), else from the store
    /// (not yet: [`Store::check_read`] does it, once).
    pub(crate) async fn read_blob(&self, id: &ObjectId, cached: bool) -> Result<(Bytes, bool)> {
        // Read from the store and checked by this command already.
        if let Some(bytes) = self.memo.as_ref().and_then(|m| m.get(id)) {
            return Ok((bytes, true));
        }
        if let (true, Some(cache)) = (cached, &self.cache) {
            match cache.get(id) {
                Ok(Some(bytes)) => return Ok((bytes, true)),
                Ok(None) => {}
                Err(damaged) => self
                    .cache_repairs
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(damaged),
            }
        }
        Ok((self.get_path(&layout::blob(id)).await?, false))
    }

    /// Checks bytes [`Store::read_blob`] read from the store against their
    /// name, and keeps good ones in the local cache when `cached`.
    pub(crate) fn check_read(
        &self,
        id: &ObjectId,
        bytes: &Bytes,
        checked: bool,
        cached: bool,
    ) -> Result<()> {
        if checked {
            return Ok(());
        }
        check_blob(id, ObjectId::of(bytes))?;
        if let (true, Some(cache)) = (cached, &self.cache) {
            cache.put(id, bytes);
        }
        if let Some(memo) = &self.memo {
            memo.put(id, bytes);
        }
        Ok(())
    }

    /// True when the blob is stored.
    pub async fn has_blob(&self, id: &ObjectId) -> Result<bool> {
        let path = layout::blob(id);
        match retried(|_| self.os.head(&path)).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(io(&path, e)),
        }
    }

    /// Every stored blob. Files under `objects/` whose names are not ids
    /// (temporary files of an interrupted write) are skipped.
    pub async fn list_blobs(&self) -> Result<Vec<BlobMeta>> {
        let prefix = Path::from("objects");
        let metas = self.list(&prefix).await?;
        let mut out: Vec<BlobMeta> = metas
            .into_iter()
            .filter_map(|m| {
                let parts: Vec<_> = m.location.parts().collect();
                let [_, a, b] = parts.as_slice() else {
                    return None;
                };
                let id: ObjectId = format!("{}{}", a.as_ref(), b.as_ref()).parse().ok()?;
                Some(BlobMeta {
                    id,
                    size: m.size,
                    last_modified: m.last_modified,
                })
            })
            .collect();
        out.sort_by_key(|m| m.id);
        Ok(out)
    }

    /// Temporary files that interrupted writes left in a local repository
    /// (under `objects/`, and beside the documents: `locks/`, `refs/`,
    /// `tombstones/`, `audit/`); none elsewhere: an object store's
    /// interrupted upload leaves no object. `object_store` does not list
    /// them, so the folders are read here.
    pub fn leftovers(&self) -> Result<Vec<Leftover>> {
        let Some(root) = &self.local_root else {
            return Ok(Vec::new());
        };
        let fail = |path: &std::path::Path, e: std::io::Error| StoreError::Io {
            path: path.display().to_string(),
            source: Box::new(object_store::Error::Generic {
                store: "LocalFileSystem",
                source: Box::new(e),
            }),
        };
        let mut out = Vec::new();
        let mut todo = vec![(root.clone(), String::new())];
        while let Some((dir, rel)) = todo.pop() {
            let entries = match std::fs::read_dir(&dir) {
                Ok(d) => d,
                // Removed since it was listed (a delete drops folders it
                // leaves empty).
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(fail(&dir, e)),
            };
            for f in entries {
                let f = f.map_err(|e| fail(&dir, e))?;
                let name = f.file_name().to_string_lossy().into_owned();
                let path = format!("{rel}{name}");
                if f.path().is_dir() {
                    todo.push((f.path(), format!("{path}/")));
                } else if is_temporary_name(&name) {
                    if let Some(l) = leftover_at(&f.path(), path).map_err(|e| fail(&f.path(), e))? {
                        out.push(l);
                    }
                }
            }
        }
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(out)
    }

    /// Deletes a leftover temporary file (garbage collection only).
    pub fn delete_leftover(&self, leftover: &Leftover) -> Result<()> {
        let Some(root) = &self.local_root else {
            return Ok(());
        };
        let name = leftover.path.rsplit('/').next().unwrap_or_default();
        if leftover
            .path
            .split('/')
            .any(|part| part == ".." || part.is_empty())
            || !is_temporary_name(name)
        {
            return Ok(());
        }
        self.before_write();
        let path = root.join(&leftover.path);
        match std::fs::remove_file(&path) {
            Ok(()) => {
                // Its folder goes too when it is left empty, as a delete
                // of the store's own takes it (a failure leaves it).
                if let Some(dir) = path.parent().filter(|d| *d != root.as_path()) {
                    let _ = std::fs::remove_dir(dir);
                }
                Ok(())
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(StoreError::Io {
                path: leftover.path.clone(),
                source: Box::new(object_store::Error::Generic {
                    store: "LocalFileSystem",
                    source: Box::new(e),
                }),
            }),
        }
    }

    /// Deletes a blob (garbage collection and erasure only).
    pub async fn delete_blob(&self, id: &ObjectId) -> Result<()> {
        self.before_write();
        let path = layout::blob(id);
        if let Some(cache) = &self.cache {
            cache.remove(id);
        }
        if let Some(memo) = &self.memo {
            memo.forget(id);
        }
        match retried(|_| self.os.delete(&path)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => return Err(io(&path, e)),
        }
        // Its outboard after it: an outboard left by a failure here
        // describes no blob and is never read (gc deletes it later).
        self.delete_outboard(id).await
    }

    /// Deletes a blob's outboard: one whose blob is gone (a failure
    /// between writing the outboard and the blob, or in `delete_blob`).
    pub async fn delete_outboard(&self, id: &ObjectId) -> Result<()> {
        self.before_write();
        let path = layout::outboard(id);
        match retried(|_| self.os.delete(&path)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(io(&path, e)),
        }
    }
}
