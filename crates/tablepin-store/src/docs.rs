//! Documents (tombstones, audit records, the config, leases) and the
//! single-object reads and creates blobs and refs share.

use super::*;
use crate::blobs::read_file_range;
use crate::retry::short_read;

impl Store {
    /// Every object under a folder, the whole listing tried again when a
    /// page fails for a reason that may pass.
    pub(crate) async fn list(&self, prefix: &Path) -> Result<Vec<object_store::ObjectMeta>> {
        retried(|_| self.os.list(Some(prefix)).try_collect())
            .await
            .map_err(|e| io(prefix, e))
    }

    /// An object's bytes, the request made again when it fails for a reason
    /// that may pass (a short read among them).
    pub(crate) async fn get_path(&self, path: &Path) -> Result<Bytes> {
        retried(|_| self.get_path_once(path))
            .await
            .map_err(|e| io(path, e))
    }

    /// An object's bytes. A local file is read straight into a buffer that
    /// is not filled first: `object_store`'s own read zero-fills the whole
    /// buffer before reading into it, which was 3.0% of a weekly commit's
    /// CPU samples (9.6 MB of base files a commit), 1.2% after (BENCHMARKS.md).
    pub(crate) async fn get_path_once(
        &self,
        path: &Path,
    ) -> std::result::Result<Bytes, object_store::Error> {
        let GetResult {
            payload,
            meta,
            range,
            attributes,
        } = self.os.get(path).await?;
        let expected = range.end.saturating_sub(range.start);
        let file = match payload {
            GetResultPayload::File(file, _) => file,
            payload => {
                let got = GetResult {
                    payload,
                    meta,
                    range,
                    attributes,
                };
                let bytes = got.bytes().await?;
                if bytes.len() as u64 != expected {
                    return Err(short_read(bytes.len(), expected));
                }
                return Ok(bytes);
            }
        };
        let read = move || read_file_range(file, range);
        let read = match tokio::runtime::Handle::try_current() {
            // As `object_store` does: file reads leave the runtime's threads.
            Ok(rt) => rt
                .spawn_blocking(read)
                .await
                .unwrap_or_else(|e| Err(std::io::Error::other(e))),
            Err(_) => read(),
        };
        read.map_err(|e| object_store::Error::Generic {
            store: "LocalFileSystem",
            source: Box::new(e),
        })
    }

    /// One put-if-absent, made again while it fails for a reason that may
    /// pass; and whether it was ambiguous (an earlier attempt failed, and
    /// may have landed all the same).
    pub(crate) async fn create_retried(
        &self,
        path: &Path,
        bytes: &Bytes,
    ) -> (
        std::result::Result<object_store::PutResult, object_store::Error>,
        bool,
    ) {
        self.before_write();
        let mut ambiguous = false;
        let put = retried(|attempt| {
            ambiguous |= attempt > 0;
            let opts = PutOptions {
                mode: PutMode::Create,
                ..Default::default()
            };
            self.os
                .put_opts(path, PutPayload::from_bytes(bytes.clone()), opts)
        })
        .await;
        (put, ambiguous)
    }

    /// Creates an object put-if-absent. When `own_is_fine`, or when an
    /// earlier attempt of this call failed in a way that may have landed,
    /// an object already holding exactly `bytes` counts as created.
    pub(crate) async fn create_path(
        &self,
        path: &Path,
        bytes: Bytes,
        own_is_fine: bool,
    ) -> Result<()> {
        let (put, ambiguous) = self.create_retried(path, &bytes).await;
        match put {
            Ok(_) => Ok(()),
            Err(object_store::Error::AlreadyExists { .. }) => {
                if (own_is_fine || ambiguous) && self.get_path(path).await.ok() == Some(bytes) {
                    return Ok(());
                }
                Err(StoreError::Exists {
                    path: path.to_string(),
                })
            }
            Err(object_store::Error::NotImplemented { .. }) => {
                Err(StoreError::NoConditionalWrites {
                    location: self.location.clone(),
                    reason: "it does not implement put-if-absent".into(),
                })
            }
            Err(e) => Err(io(path, e)),
        }
    }

    /// Proves that the store honours put-if-absent: creates a probe object,
    /// tries to create it again with other bytes (which must fail and leave
    /// the first bytes), and deletes it. Refuses a store that lets the
    /// second write through ([`StoreError::NoConditionalWrites`]).
    pub async fn check_conditional_writes(&self) -> Result<()> {
        let nonce = ObjectId::of(
            format!(
                "{}-{:?}-{:?}",
                std::process::id(),
                std::time::SystemTime::now(),
                std::thread::current().id()
            )
            .as_bytes(),
        );
        let path = layout::probe(&nonce);
        // Nothing is there yet to be missing but the bucket itself.
        match self
            .create_path(&path, Bytes::from_static(b"first"), false)
            .await
        {
            Err(StoreError::NotFound { .. }) if self.local_root.is_none() => {
                return Err(StoreError::NoBucket {
                    location: remote::redacted(&self.location),
                })
            }
            other => other?,
        }
        let second = self
            .create_path(&path, Bytes::from_static(b"second"), false)
            .await;
        let kept = self.get_path(&path).await?;
        let refused = |reason: &str| StoreError::NoConditionalWrites {
            location: self.location.clone(),
            reason: reason.to_string(),
        };
        let verdict = match second {
            Err(StoreError::Exists { .. }) if kept == Bytes::from_static(b"first") => Ok(()),
            Err(StoreError::Exists { .. }) => Err(refused("a refused write replaced the object")),
            Ok(()) => Err(refused("a second create of one object succeeded")),
            Err(e) => Err(e),
        };
        self.delete_doc(path.as_ref()).await?;
        verdict
    }

    /// Creates a document (tombstone, audit record, config) put-if-absent.
    pub async fn create_doc(&self, path: &str, bytes: Bytes) -> Result<()> {
        self.create_path(&Path::from(path), bytes, false).await
    }

    /// Writes a document over whatever it held (the config, when `upgrade`
    /// moves the repository to a newer format).
    pub async fn replace_doc(&self, path: &str, bytes: Bytes) -> Result<()> {
        self.put_over(&Path::from(path), bytes).await
    }

    /// Writes an object over whatever it held, atomically, retried.
    pub(crate) async fn put_over(&self, path: &Path, bytes: Bytes) -> Result<()> {
        self.before_write();
        retried(|_| {
            self.os.put_opts(
                path,
                PutPayload::from_bytes(bytes.clone()),
                PutOptions::default(),
            )
        })
        .await
        .map(|_| ())
        .map_err(|e| io(path, e))
    }

    /// Reads a document, or `None` when it does not exist.
    pub async fn get_doc(&self, path: &str) -> Result<Option<Bytes>> {
        match self.get_path(&Path::from(path)).await {
            Ok(b) => Ok(Some(b)),
            Err(StoreError::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The paths of every document under a folder, sorted.
    pub async fn list_docs(&self, prefix: &str) -> Result<Vec<String>> {
        let p = Path::from(prefix);
        let metas = self.list(&p).await?;
        let mut out: Vec<String> = metas.into_iter().map(|m| m.location.to_string()).collect();
        out.sort();
        Ok(out)
    }

    /// Deletes a document.
    pub async fn delete_doc(&self, path: &str) -> Result<()> {
        self.before_write();
        let p = Path::from(path);
        match retried(|_| self.os.delete(&p)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(io(&p, e)),
        }
    }
}
