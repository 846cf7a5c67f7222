//! A local cache of verified blobs for repositories in a bucket.
//!
//! Blobs never change and are named by their hash, so a copy on this
//! machine is as good as the bucket's once it hashes to its name: a
//! training job that reads one version twice downloads it once. Each
//! repository has a folder of its own (named by a hash of its URL) under
//! the cache root, so that what one repository deletes (gc, erasure) can
//! be deleted here too, and `verify --erased` can prove that no blob the
//! repository no longer holds survives on this machine.
//!
//! Where it lives and how large it grows is [`CacheSettings`], which the
//! entry points read from the environment (`TABLEPIN_CACHE`, `off` turns
//! it off; else the user's cache folder, `$XDG_CACHE_HOME/tablepin/blobs`
//! or `~/.cache/tablepin/blobs`; `TABLEPIN_CACHE_SIZE` bytes, default 10
//! GiB): past its bound, the blobs used longest ago are removed.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use bytes::Bytes;
use tablepin_format::ObjectId;

/// The default bound of the cache's size.
const DEFAULT_SIZE: u64 = 10 << 30;

/// A repository's folder of cached blobs.
#[derive(Debug)]
pub struct BlobCache {
    dir: PathBuf,
    limit: u64,
    /// Bytes in the folder, counted when first needed.
    size: Mutex<Option<u64>>,
}

/// Where the blob caches live and how large each may grow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheSettings {
    /// The cache root: each repository has a folder under it.
    pub root: PathBuf,
    /// Bytes a repository's folder may hold.
    pub limit: u64,
}

impl CacheSettings {
    /// The settings the environment gives (`var` looks a variable up; the
    /// entry points pass the process's): `TABLEPIN_CACHE` (`off` or empty:
    /// no cache), else `$XDG_CACHE_HOME/tablepin/blobs` or
    /// `$HOME/.cache/tablepin/blobs`; `TABLEPIN_CACHE_SIZE` bytes, else
    /// 10 GiB. `None` when turned off or no folder can be found.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Option<Self> {
        let root = match var("TABLEPIN_CACHE") {
            Some(v) if v == "off" || v.is_empty() => return None,
            Some(v) => PathBuf::from(v),
            None => var("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".cache")))?
                .join("tablepin")
                .join("blobs"),
        };
        let limit = var("TABLEPIN_CACHE_SIZE")
            .and_then(|v| v.parse().ok())
            .unwrap_or(DEFAULT_SIZE);
        Some(Self { root, limit })
    }
}

impl BlobCache {
    /// The cache folder of the repository at `location` under `root`.
    pub fn new(root: &Path, location: &str, limit: u64) -> Self {
        let name = ObjectId::of(location.trim_end_matches('/').as_bytes()).to_string();
        Self {
            dir: root.join(&name[..16]),
            limit,
            size: Mutex::new(None),
        }
    }

    /// The repository's cache folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, id: &ObjectId) -> PathBuf {
        self.dir.join(id.fanout_path())
    }

    /// The cached copy of a blob, if there is one; a copy that does not hash
    /// to its name is removed and reported as `Err(id)`.
    pub fn get(&self, id: &ObjectId) -> Result<Option<Bytes>, ObjectId> {
        let path = self.path(id);
        let Ok(bytes) = std::fs::read(&path) else {
            return Ok(None);
        };
        if ObjectId::of(&bytes) != *id {
            let _ = std::fs::remove_file(&path);
            self.forget(bytes.len() as u64);
            return Err(*id);
        }
        // Its age is when it was last used: eviction takes the oldest.
        if let Ok(f) = std::fs::File::options().append(true).open(&path) {
            let _ = f.set_modified(std::time::SystemTime::now());
        }
        Ok(Some(Bytes::from(bytes)))
    }

    /// Keeps a verified blob. A cache that cannot be written is no cache:
    /// the failure is ignored.
    pub fn put(&self, id: &ObjectId, bytes: &[u8]) {
        let path = self.path(id);
        if path.exists() {
            return;
        }
        let Some(parent) = path.parent() else {
            return;
        };
        if std::fs::create_dir_all(parent).is_err() {
            return;
        }
        // Written aside and renamed: a reader never sees half a blob.
        let tmp = parent.join(format!(
            ".{}.{}.tmp",
            std::process::id(),
            rand::random::<u64>()
        ));
        let written = std::fs::File::create(&tmp)
            .and_then(|mut f| f.write_all(bytes))
            .and_then(|()| std::fs::rename(&tmp, &path));
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
            return;
        }
        self.grow(bytes.len() as u64);
    }

    /// Removes a blob's copy (the repository deleted the blob).
    pub fn remove(&self, id: &ObjectId) {
        let path = self.path(id);
        if let Ok(meta) = std::fs::metadata(&path) {
            if std::fs::remove_file(&path).is_ok() {
                self.forget(meta.len());
            }
        }
    }

    /// Every cached blob of the repository.
    pub fn ids(&self) -> Vec<ObjectId> {
        self.files()
            .into_iter()
            .filter_map(|(path, _, _)| {
                let dir = path.parent()?.file_name()?.to_str()?.to_string();
                let name = path.file_name()?.to_str()?;
                format!("{dir}{name}").parse().ok()
            })
            .collect()
    }

    /// Every file of the folder: path, size, last use.
    fn files(&self) -> Vec<(PathBuf, u64, std::time::SystemTime)> {
        let mut out = Vec::new();
        let Ok(dirs) = std::fs::read_dir(&self.dir) else {
            return out;
        };
        for d in dirs.flatten() {
            let Ok(files) = std::fs::read_dir(d.path()) else {
                continue;
            };
            for f in files.flatten() {
                if let Ok(m) = f.metadata() {
                    if m.is_file() && !f.file_name().to_string_lossy().starts_with('.') {
                        let used = m.modified().unwrap_or(std::time::UNIX_EPOCH);
                        out.push((f.path(), m.len(), used));
                    }
                }
            }
        }
        out
    }

    fn forget(&self, bytes: u64) {
        let mut size = self.size.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = size.as_mut() {
            *s = s.saturating_sub(bytes);
        }
    }

    /// Counts `bytes` more, and past the bound removes the blobs used
    /// longest ago until the folder is back under nine tenths of it.
    fn grow(&self, bytes: u64) {
        let mut size = self.size.lock().unwrap_or_else(|e| e.into_inner());
        let total = size.unwrap_or_else(|| self.files().iter().map(|f| f.1).sum()) + bytes;
        *size = Some(total);
        if total <= self.limit {
            return;
        }
        let mut files = self.files();
        files.sort_by_key(|f| f.2);
        let mut left = files.iter().map(|f| f.1).sum::<u64>();
        for (path, len, _) in files {
            if left <= self.limit / 10 * 9 {
                break;
            }
            if std::fs::remove_file(&path).is_ok() {
                left -= len;
            }
        }
        *size = Some(left);
    }
}
