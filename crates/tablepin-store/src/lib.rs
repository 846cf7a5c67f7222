//! Content-addressed blobs and append-only ref logs over `object_store`.
//!
//! This is the only layer that touches storage. Everything goes through an
//! `Arc<dyn ObjectStore>`, so a local folder, memory (tests), S3 (and
//! S3-compatible servers), GCS and Azure run the same code. Its rules:
//!
//! - a blob is written put-if-absent under `objects/ab/cdef…`, the BLAKE3-256
//!   of its bytes, and never changes (invariant 1); every read hashes what it
//!   read and refuses a mismatch (invariant 5);
//! - a ref is a folder of numbered entries (`refs/branches/main/00000042`);
//!   moving it creates entry N+1 with `PutMode::Create`, so of two racing
//!   writers one wins and the other gets [`StoreError::RefConflict`]
//!   (invariant 2). Compare-and-swap is never needed, which matters because
//!   `object_store`'s local store refuses `PutMode::Update`;
//! - small documents (tombstones, audit records, the repository's config) are
//!   plain JSON beside them, also written put-if-absent.
//!
//! - a ref's head is found from one page of its log's listing and a read
//!   of the newest entry; a log longer than a page also reads a hint
//!   (`heads/branches/main`, an entry number written at every 100th entry,
//!   overwritten freely) and lists the entries after it, so it costs four
//!   requests however long the log is; the hint is never trusted further
//!   than that listing;
//! - a request that fails for a reason that may pass (a server error,
//!   throttling, a timeout, a short read) is tried again a few times; a
//!   put-if-absent whose earlier attempt may have landed recognises its own
//!   bytes instead of reporting a conflict.
//!
//! Every store is wrapped in [`counted::Counted`], which counts requests.
//! Behind the `testing` feature (the project's test builds, the lab; never
//! the installed binary), a fault hook (`Store::with_fault_after`) stops
//! the process before the N+1-th write, so tests can kill a command at
//! every write it makes, `faults::Faulty` injects the faults a remote store
//! has, and `Store::with_latency` adds a distant store's wait.

#![warn(missing_docs)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures::{StreamExt, TryStreamExt};
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{
    GetResult, GetResultPayload, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload,
};
use tablepin_format::{ObjectId, RefEntry, RefKind};

mod blobs;
pub mod cache;
pub mod counted;
mod docs;
#[cfg(any(test, feature = "testing"))]
pub mod faults;
#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub mod gate;
pub mod layout;
pub mod memo;
pub mod ranged;
mod refs;
pub mod remote;
mod retry;
#[cfg(any(test, feature = "testing"))]
mod testing;

use blobs::{check_blob, local_io};
use retry::retried;

pub use counted::RequestCounts;

/// Errors of the store. Each names the object it was about.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// A blob's bytes do not hash to its name: the stored copy is damaged.
    #[error("blob {id} is damaged: its bytes hash to {actual}; restore it from a copy, or run `tablepin verify` to list what it breaks")]
    Corrupt {
        /// The blob's name.
        id: ObjectId,
        /// What its bytes hash to now.
        actual: ObjectId,
    },
    /// Bytes of a blob read by range do not hash into its name.
    #[error("blob {id} is damaged in bytes {}..{}: they do not hash into its name; restore it from a copy, or run `tablepin verify` to list what it breaks", range.start, range.end)]
    CorruptRange {
        /// The blob's name.
        id: ObjectId,
        /// The chunk group whose bytes are damaged.
        range: std::ops::Range<u64>,
    },
    /// A blob's outboard (the inner hashes its ranged reads are checked
    /// with) does not lead to the blob's name.
    #[error("the outboard of blob {id} is damaged: its hashes do not lead to the blob's name; run `tablepin verify` to check the blob itself")]
    OutboardDamaged {
        /// The blob's name.
        id: ObjectId,
    },
    /// A blob or document that should exist does not.
    #[error("{path} is missing from the repository")]
    NotFound {
        /// The object's path.
        path: String,
    },
    /// Another writer created this ref entry first.
    #[error("ref {name} moved while this command ran (entry {seq} exists); run the command again")]
    RefConflict {
        /// The ref.
        name: String,
        /// The entry number both wanted.
        seq: u64,
    },
    /// A document exists already where one was to be created.
    #[error("{path} exists already")]
    Exists {
        /// The object's path.
        path: String,
    },
    /// A bucket that does not exist, or that the credentials in use
    /// cannot see (a store answers both with "not found").
    #[error("the bucket of {location} does not exist, or these credentials cannot see it; create the bucket, or check its name and the credentials")]
    NoBucket {
        /// The repository's location.
        location: String,
    },
    /// The repository location cannot be opened.
    #[error("cannot open repository at {location}: {reason}")]
    Location {
        /// What was given.
        location: String,
        /// Why it failed.
        reason: String,
    },
    /// The store cannot create an object only where none exists, so two
    /// writers could both move a ref: tablepin refuses such a store.
    #[error("the store at {location} does not honour conditional writes (put-if-absent): {reason}; tablepin needs them so that two writers cannot both move a branch")]
    NoConditionalWrites {
        /// The store.
        location: String,
        /// What showed it.
        reason: String,
    },
    /// A stored document is not valid JSON of its kind.
    #[error("{path} is damaged: {source}")]
    Decode {
        /// The document.
        path: String,
        /// The decode error.
        #[source]
        source: serde_json::Error,
    },
    /// The object store failed. Its message is one sentence
    /// (`remote::said`); the store's whole answer is the source.
    #[error("storage error at {path}: {}", remote::said(source))]
    Io {
        /// The object's path.
        path: String,
        /// The object store's error.
        #[source]
        source: Box<object_store::Error>,
    },
}

/// Result alias of this crate.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

fn io(path: &Path, source: object_store::Error) -> StoreError {
    match source {
        object_store::Error::NotFound { .. } => StoreError::NotFound {
            path: path.to_string(),
        },
        source => StoreError::Io {
            path: path.to_string(),
            source: Box::new(source),
        },
    }
}

/// A stored blob as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlobMeta {
    /// Its name.
    pub id: ObjectId,
    /// Its size in bytes.
    pub size: u64,
    /// When it was written.
    pub last_modified: DateTime<Utc>,
}

/// The outcome of a blob put.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PutOutcome {
    /// The blob's name.
    pub id: ObjectId,
    /// False when the repository held these bytes already.
    pub new: bool,
    /// The blob's size.
    pub bytes: u64,
}

/// The requests a store made and the faults injected into it, read at any
/// time ([`Store::stats`]).
#[derive(Debug, Clone)]
pub struct StoreStats {
    counted: counted::Counted,
    faults: Option<Arc<AtomicU64>>,
}

impl StoreStats {
    /// The requests made so far.
    pub fn requests(&self) -> RequestCounts {
        self.counted.counts()
    }

    /// Faults injected so far, when a fault schedule is on.
    pub fn faults_injected(&self) -> Option<u64> {
        self.faults.as_ref().map(|f| f.load(Ordering::Relaxed))
    }
}

/// A repository's storage: blobs, refs and documents under one prefix.
#[derive(Debug)]
pub struct Store {
    /// The store as given, under the counting wrapper (what the `testing`
    /// layers wrap; a build without them keeps it unread).
    #[cfg_attr(not(any(test, feature = "testing")), allow(dead_code))]
    raw: Arc<dyn ObjectStore>,
    /// What every request goes through: `raw`, counted.
    os: Arc<dyn ObjectStore>,
    counted: counted::Counted,
    /// Faults injected so far, when a fault schedule is on.
    faults: Option<Arc<AtomicU64>>,
    /// Verified blobs kept on this machine (repositories in a bucket).
    cache: Option<cache::BlobCache>,
    /// Blobs this command read from the store and checked (see [`memo`]).
    memo: Option<Arc<memo::Memo>>,
    /// Cached copies found damaged (and dropped, and fetched again).
    cache_repairs: std::sync::Mutex<Vec<ObjectId>>,
    location: String,
    writes: AtomicU64,
    fault_after: Option<u64>,
    /// The object store answers without an async runtime (a local folder or
    /// memory): a worker thread can read a blob itself (see `map_blobs`).
    inline_reads: bool,
    /// The folder of a local repository, where an interrupted write can
    /// leave a temporary file that `object_store` does not list (see
    /// [`Store::leftovers`]).
    local_root: Option<std::path::PathBuf>,
    /// The chunk group of the outboards written (2^log chunks; see
    /// [`ranged`]): format 3's until the repository says it is format 4.
    outboard_log: u8,
}

/// A temporary file an interrupted write left behind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leftover {
    /// Its path in the repository, as `objects/ab/cdef…#3`.
    pub path: String,
    /// Its size.
    pub size: u64,
    /// When it was last written.
    pub last_modified: DateTime<Utc>,
}

/// The folder name a local repository lives in.
pub const LOCAL_DIR: &str = ".tablepin";

/// How a process sets up its stores, read from its environment by the
/// entry points (the CLI, the Python module): the libraries read none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreSettings {
    /// The local cache of verified blobs, for a repository in a bucket.
    pub cache: Option<cache::CacheSettings>,
    /// Print each request on stderr as it is made.
    pub trace_requests: bool,
}

impl StoreSettings {
    /// The settings the environment gives (`var` looks a variable up):
    /// the cache's ([`cache::CacheSettings::from_vars`]) and
    /// `TABLEPIN_TRACE_REQUESTS` (set: trace).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Self {
        Self {
            cache: cache::CacheSettings::from_vars(&var),
            trace_requests: var("TABLEPIN_TRACE_REQUESTS").is_some(),
        }
    }
}

impl Store {
    /// Opens storage at a location: a local folder path, `file://…`, or
    /// `memory://` (a fresh in-memory store, for tests). The folder must
    /// exist. No blob cache, no tracing: [`Store::open_with`] sets them.
    pub fn open(location: &str) -> Result<Self> {
        Self::open_with(location, &StoreSettings::default())
    }

    /// [`Store::open`] with `settings`: a bucket's blobs cached where they
    /// say, requests traced if they say so.
    pub fn open_with(location: &str, settings: &StoreSettings) -> Result<Self> {
        let mut store = Self::open_location(location, settings.cache.as_ref())?;
        if settings.trace_requests {
            store.counted = store.counted.traced(true);
            store.os = Arc::new(store.counted.clone());
        }
        Ok(store)
    }

    fn open_location(location: &str, cache: Option<&cache::CacheSettings>) -> Result<Self> {
        let err = |reason: String| StoreError::Location {
            location: remote::redacted(location),
            reason,
        };
        let mut local_root = None;
        let os: Arc<dyn ObjectStore> = if location == "memory://" {
            Arc::new(InMemory::new())
        } else if let Some(scheme) = location.split_once("://").map(|s| s.0) {
            if let Some(backend) = remote::Backend::of_scheme(scheme) {
                let url = url::Url::parse(location).map_err(|e| err(e.to_string()))?;
                let os = remote::open(&url, backend).map_err(err)?;
                let mut store = Self::from_object_store(os, location);
                store.cache = cache.map(|c| cache::BlobCache::new(&c.root, location, c.limit));
                return Ok(store);
            }
            if scheme != "file" {
                return Err(err(format!(
                    "unknown scheme '{scheme}'; use a local folder, file://, s3://, gs:// or az://"
                )));
            }
            let url = url::Url::parse(location).map_err(|e| err(e.to_string()))?;
            let path = url
                .to_file_path()
                .map_err(|_| err("not a local path".to_string()))?;
            local_root = Some(path.clone());
            Arc::new(local_folder(&path).map_err(err)?)
        } else {
            let path = std::path::Path::new(location);
            if !path.is_dir() {
                return Err(err("no such folder".to_string()));
            }
            local_root = Some(path.to_path_buf());
            Arc::new(local_folder(path).map_err(err)?)
        };
        let mut store = Self::from_object_store(os, location);
        store.local_root = local_root;
        // object_store's local folder reads on the calling thread when no
        // tokio runtime is running there, as on a worker thread; memory
        // never waits.
        store.inline_reads = true;
        Ok(store)
    }

    /// The object store at a bucket URL (`s3://`, `gs://`, `az://`, under
    /// the URL's path), opened as a repository's is, for files that are
    /// not a repository's (a Delta view); `None` for any other location.
    pub fn bucket(location: &str) -> Result<Option<Arc<dyn ObjectStore>>> {
        let Some(scheme) = location.split_once("://").map(|s| s.0) else {
            return Ok(None);
        };
        let Some(backend) = remote::Backend::of_scheme(scheme) else {
            return Ok(None);
        };
        let err = |reason: String| StoreError::Location {
            location: remote::redacted(location),
            reason,
        };
        let url = url::Url::parse(location).map_err(|e| err(e.to_string()))?;
        remote::open(&url, backend).map(Some).map_err(err)
    }

    /// Wraps any object store. It must honour put-if-absent
    /// (`PutMode::Create`); [`Store::check_conditional_writes`] tells.
    pub fn from_object_store(os: Arc<dyn ObjectStore>, location: &str) -> Self {
        let counted = counted::Counted::new(os.clone());
        Self {
            raw: os,
            os: Arc::new(counted.clone()),
            counted,
            faults: None,
            cache: None,
            memo: None,
            cache_repairs: std::sync::Mutex::default(),
            location: location.to_string(),
            writes: AtomicU64::new(0),
            fault_after: None,
            inline_reads: false,
            local_root: None,
            outboard_log: ranged::GROUP_LOG_FORMAT3,
        }
    }

    /// Sends every request through `wrapper` (around the store), counted.
    /// Its waits sleep on the runtime, so reads stay on it. Only the
    /// `testing` layers (faults, throttling) use it.
    #[cfg(any(test, feature = "testing"))]
    pub(crate) fn through(mut self, wrapper: Arc<dyn ObjectStore>) -> Self {
        self.counted = counted::Counted::new(wrapper).traced(self.counted.tracing());
        self.os = Arc::new(self.counted.clone());
        self.inline_reads = false;
        self
    }

    /// Keeps the blobs read from the store and checked in memory, up to
    /// `limit` bytes, for the rest of this store's life: for a process that
    /// runs one command (see [`memo`] for why not for longer ones).
    pub fn with_memo(mut self, limit: u64) -> Self {
        self.memo = Some(Arc::new(memo::Memo::new(limit)));
        self
    }

    /// Forgets every blob the memo holds. A blob never changes, but
    /// another process's gc or erasure may delete it: a gc or an erasure
    /// calls this as it takes its lease, so that it plans and applies on
    /// what the store holds, not on what this process read before.
    pub fn forget_memo(&self) {
        if let Some(memo) = &self.memo {
            memo.clear();
        }
    }

    /// Keeps verified blobs in `cache` (or in none) instead of where the
    /// settings the store was opened with say.
    pub fn with_cache(mut self, cache: Option<cache::BlobCache>) -> Self {
        self.cache = cache;
        self
    }

    /// The local cache of this repository's blobs, if it has one.
    pub fn cache(&self) -> Option<&cache::BlobCache> {
        self.cache.as_ref()
    }

    /// Blobs whose cached copy was found damaged during this handle's
    /// life: each was dropped and read from the repository again.
    pub fn cache_repairs(&self) -> Vec<ObjectId> {
        self.cache_repairs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Faults injected so far, when a fault schedule is on.
    pub fn faults_injected(&self) -> Option<u64> {
        self.faults.as_ref().map(|f| f.load(Ordering::Relaxed))
    }

    /// The requests made through this handle so far.
    pub fn requests(&self) -> RequestCounts {
        self.counted.counts()
    }

    /// A handle on this store's counts that outlives it: a command that
    /// fails while opening its repository can still say what it asked.
    pub fn stats(&self) -> StoreStats {
        StoreStats {
            counted: self.counted.clone(),
            faults: self.faults.clone(),
        }
    }

    /// The file that holds a blob, when the repository is a local folder
    /// (a Delta view links it instead of copying it).
    pub fn local_blob_path(&self, id: &ObjectId) -> Option<std::path::PathBuf> {
        let root = self.local_root.as_ref()?;
        Some(root.join("objects").join(id.fanout_path()))
    }

    /// Checks a local blob's file against its name before it is used by
    /// path rather than read through the store (a Delta view links it):
    /// a damaged file is [`StoreError::Corrupt`], as a read of it is.
    pub fn check_local_blob(&self, id: &ObjectId) -> Result<()> {
        let Some(path) = self.local_blob_path(id) else {
            return Ok(());
        };
        let file = std::fs::File::open(&path).map_err(|e| local_io(&path, e))?;
        let actual =
            ObjectId::of_reader(std::io::BufReader::new(file)).map_err(|e| local_io(&path, e))?;
        check_blob(id, actual)
    }

    /// Where this store is.
    pub fn location(&self) -> &str {
        &self.location
    }

    fn before_write(&self) {
        let n = self.writes.fetch_add(1, Ordering::SeqCst);
        if self.fault_after.is_some_and(|limit| n >= limit) {
            // Simulates a kill -9 between two writes: no destructors, no
            // flushing, exactly what a crash leaves.
            std::process::abort();
        }
    }

    /// Writes made through this handle so far.
    pub fn writes(&self) -> u64 {
        self.writes.load(Ordering::SeqCst)
    }
}

/// A local folder as an object store. A delete takes the folders it
/// leaves empty with it (`objects/ab/`, `locks/`, `probes/`), so no run
/// leaves empty folders behind; a write into a folder removed meanwhile
/// creates it again (object_store retries the create).
fn local_folder(path: &std::path::Path) -> std::result::Result<LocalFileSystem, String> {
    LocalFileSystem::new_with_prefix(path)
        .map(|fs| fs.with_automatic_cleanup(true))
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests;
