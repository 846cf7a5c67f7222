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
//! A fault hook ([`Store::with_fault_after`]) stops the process before the
//! N+1-th write, so tests can kill a command at every write it makes;
//! [`faults::Faulty`] injects the faults a remote store has; every store is
//! wrapped in [`counted::Counted`], which counts requests.

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

pub mod cache;
pub mod counted;
pub mod faults;
#[doc(hidden)]
pub mod gate;
pub mod memo;
pub mod remote;

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

/// `range` of an open file, read into a buffer of that size.
fn read_file_range(mut file: std::fs::File, range: std::ops::Range<u64>) -> std::io::Result<Bytes> {
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

/// How often a request that failed for a reason that may pass is made in
/// all, and the pause before the first retry (it quadruples each time).
const ATTEMPTS: u32 = 4;
const FIRST_PAUSE: std::time::Duration = std::time::Duration::from_millis(25);

/// True when an object store's failure may pass if the request is made
/// again: server errors, throttling, timeouts, dropped connections and short
/// reads, as opposed to answers about the object or the caller.
fn transient(e: &object_store::Error) -> bool {
    use object_store::Error as E;
    !matches!(
        e,
        E::NotFound { .. }
            | E::AlreadyExists { .. }
            | E::Precondition { .. }
            | E::NotModified { .. }
            | E::NotImplemented { .. }
            | E::NotSupported { .. }
            | E::PermissionDenied { .. }
            | E::Unauthenticated { .. }
            | E::InvalidPath { .. }
            | E::UnknownConfigurationKey { .. }
    )
}

/// Makes a request (`op(attempt)`) until it succeeds, fails for a lasting
/// reason, or has been made [`ATTEMPTS`] times; the last answer is returned.
async fn retried<T, F, Fut>(mut op: F) -> std::result::Result<T, object_store::Error>
where
    F: FnMut(u32) -> Fut,
    Fut: std::future::Future<Output = std::result::Result<T, object_store::Error>>,
{
    let mut attempt = 0;
    loop {
        match op(attempt).await {
            Err(e) if transient(&e) && attempt + 1 < ATTEMPTS => {
                let pause = FIRST_PAUSE * 4u32.pow(attempt);
                match tokio::runtime::Handle::try_current() {
                    Ok(_) => tokio::time::sleep(pause).await,
                    // A worker thread reading a local blob (`map_blobs`).
                    Err(_) => std::thread::sleep(pause),
                }
                attempt += 1;
            }
            answer => return answer,
        }
    }
}

/// A read that returned fewer bytes than the object's range holds.
fn short_read(got: usize, expected: u64) -> object_store::Error {
    object_store::Error::Generic {
        store: "tablepin",
        source: format!("the read returned {got} of {expected} bytes").into(),
    }
}

/// A blob read under `id` whose bytes hash to `actual` is damaged unless
/// the two agree.
/// A failed read of a local file the store holds; a missing one is
/// [`StoreError::NotFound`], as through the store.
fn local_io(path: &std::path::Path, e: std::io::Error) -> StoreError {
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

fn check_blob(id: &ObjectId, actual: ObjectId) -> Result<()> {
    if actual == *id {
        Ok(())
    } else {
        Err(StoreError::Corrupt { id: *id, actual })
    }
}

/// A blob's bytes as [`Store::read_blob`] gives them, and whether they are
/// checked against its name already.
type Read = (Bytes, bool);

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
    /// The store as given, under the counting wrapper.
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

/// `object_store`'s local folder writes a file as `NAME#N` and renames it;
/// a write killed in between leaves that temporary file.
fn is_temporary_name(name: &str) -> bool {
    name.split_once('#')
        .is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The leftover a temporary file of a listing is, or `None` when it is
/// gone by the time it is looked at: a write in flight when the folder was
/// listed has since linked its file into place and removed the temporary
/// one, which is no leftover and no failure.
fn leftover_at(file: &std::path::Path, path: String) -> std::io::Result<Option<Leftover>> {
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

/// The folder name a local repository lives in.
pub const LOCAL_DIR: &str = ".tablepin";

/// Blobs of this size and more are looked for before they are written
/// (see [`Store::put_blob`]).
const PROBE_FIRST_BYTES: usize = 1 << 20;

/// A ref's hint is written at every this many-th entry (see `append_ref`).
/// It is read only for a log longer than [`REF_PAGE`] entries.
const HINT_EVERY: u64 = 100;

/// Entries of a ref's log listed before its hint is needed: the page of an
/// S3 or GCS listing (Azure's holds 5,000).
const REF_PAGE: usize = 1000;

/// Small objects (ref entries) read at once when a command reads many.
const CONCURRENT_READS: usize = 16;

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
        }
    }

    /// Stops the process (as a crash would) before the write after `n`
    /// writes. For crash-safety tests only.
    pub fn with_fault_after(mut self, n: Option<u64>) -> Self {
        self.fault_after = n;
        self
    }

    /// Puts a seeded fault schedule ([`faults::Faulty`]) between this
    /// handle and its store. For tests of failure handling only.
    pub fn with_faults(self, plan: faults::FaultPlan) -> Self {
        let faulty = faults::Faulty::new(self.raw.clone(), plan);
        self.with_faulty(faulty)
    }

    /// Adds `latency` before every request, as a distant store would
    /// (`object_store`'s throttling wrapper). For benchmarks.
    pub fn with_latency(mut self, latency: std::time::Duration) -> Self {
        let config = object_store::throttle::ThrottleConfig {
            wait_delete_per_call: latency,
            wait_get_per_call: latency,
            wait_list_per_call: latency,
            wait_list_with_delimiter_per_call: latency,
            wait_put_per_call: latency,
            ..Default::default()
        };
        self.raw = Arc::new(object_store::throttle::ThrottledStore::new(
            self.raw.clone(),
            config,
        ));
        let raw = self.raw.clone();
        self.through(raw)
    }

    /// Puts a fixed list of faults ([`faults::Faulty::scripted`]) before
    /// this handle's first requests. For tests only.
    pub fn with_fault_script(self, script: Vec<Option<faults::Fault>>) -> Self {
        let faulty = faults::Faulty::scripted(self.raw.clone(), script);
        self.with_faulty(faulty)
    }

    fn with_faulty(mut self, faulty: faults::Faulty) -> Self {
        self.faults = Some(faulty.injected());
        self.through(Arc::new(faulty))
    }

    /// Sends every request through `wrapper` (around the store), counted.
    /// Its waits sleep on the runtime, so reads stay on it.
    fn through(mut self, wrapper: Arc<dyn ObjectStore>) -> Self {
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

    fn blob_path(id: &ObjectId) -> Path {
        Path::from(format!("objects/{}", id.fanout_path()))
    }

    /// Stores bytes under their hash, put-if-absent; says whether they were
    /// new.
    pub async fn put_blob(&self, bytes: Bytes) -> Result<PutOutcome> {
        let id = ObjectId::of(&bytes);
        let len = bytes.len() as u64;
        let path = Self::blob_path(&id);
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
        self.before_write();
        let path = Self::blob_path(&out.id);
        retried(|_| {
            self.os.put_opts(
                &path,
                PutPayload::from_bytes(bytes.clone()),
                PutOptions::default(),
            )
        })
        .await
        .map_err(|e| io(&path, e))?;
        Ok(out)
    }

    /// A blob's size and age, or `None` when it is not stored.
    pub async fn blob_meta(&self, id: &ObjectId) -> Result<Option<BlobMeta>> {
        let path = Self::blob_path(id);
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

    async fn map_blobs_from<R, E, F>(
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
    async fn read_blob(&self, id: &ObjectId, cached: bool) -> Result<(Bytes, bool)> {
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
        Ok((self.get_path(&Self::blob_path(id)).await?, false))
    }

    /// Checks bytes [`Store::read_blob`] read from the store against their
    /// name, and keeps good ones in the local cache when `cached`.
    fn check_read(&self, id: &ObjectId, bytes: &Bytes, checked: bool, cached: bool) -> Result<()> {
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
        let path = Self::blob_path(id);
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
        let path = Self::blob_path(id);
        if let Some(cache) = &self.cache {
            cache.remove(id);
        }
        if let Some(memo) = &self.memo {
            memo.forget(id);
        }
        match retried(|_| self.os.delete(&path)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(io(&path, e)),
        }
    }

    fn ref_dir(kind: RefKind, name: &str) -> String {
        format!("refs/{}/{}", kind.dir(), name)
    }

    fn ref_entry_path(kind: RefKind, name: &str, seq: u64) -> Path {
        Path::from(format!("{}/{:08}", Self::ref_dir(kind, name), seq))
    }

    /// Where the hint of a ref's head is kept: outside `refs/`, so that a
    /// ref's folder and its hint never share a name.
    fn hint_path(kind: RefKind, name: &str) -> Path {
        Path::from(format!("heads/{}/{}", kind.dir(), name))
    }

    /// Every object under a folder, the whole listing tried again when a
    /// page fails for a reason that may pass.
    async fn list(&self, prefix: &Path) -> Result<Vec<object_store::ObjectMeta>> {
        retried(|_| self.os.list(Some(prefix)).try_collect())
            .await
            .map_err(|e| io(prefix, e))
    }

    /// The names of every ref of a kind, sorted.
    pub async fn ref_names(&self, kind: RefKind) -> Result<Vec<String>> {
        let prefix = Path::from(format!("refs/{}", kind.dir()));
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
    async fn ref_seqs_after(
        &self,
        kind: RefKind,
        name: &str,
        after: Option<u64>,
    ) -> Result<Vec<u64>> {
        let prefix = Path::from(Self::ref_dir(kind, name));
        let metas = match after {
            None => self.list(&prefix).await?,
            Some(seq) => {
                let offset = Self::ref_entry_path(kind, name, seq);
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

    async fn get_ref_entry(&self, kind: RefKind, name: &str, seq: u64) -> Result<RefEntry> {
        let path = Self::ref_entry_path(kind, name, seq);
        let bytes = self.get_path(&path).await?;
        serde_json::from_slice(&bytes).map_err(|source| StoreError::Decode {
            path: path.to_string(),
            source,
        })
    }

    /// The entry number a ref's hint gives, if it has a readable one.
    async fn ref_hint(&self, kind: RefKind, name: &str) -> Result<Option<u64>> {
        match self.get_path(&Self::hint_path(kind, name)).await {
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
        let prefix = Path::from(Self::ref_dir(kind, name));
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
            let path = Self::ref_entry_path(kind, name, seq).to_string();
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
        let path = Self::ref_entry_path(kind, name, entry.seq);
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
        let hint = Self::hint_path(kind, name);
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

    /// An object's bytes, the request made again when it fails for a reason
    /// that may pass (a short read among them).
    async fn get_path(&self, path: &Path) -> Result<Bytes> {
        retried(|_| self.get_path_once(path))
            .await
            .map_err(|e| io(path, e))
    }

    /// An object's bytes. A local file is read straight into a buffer that
    /// is not filled first: `object_store`'s own read zero-fills the whole
    /// buffer before reading into it, which was 3.0% of a weekly commit's
    /// CPU samples (9.6 MB of base files a commit), 1.2% after (BENCHMARKS.md).
    async fn get_path_once(&self, path: &Path) -> std::result::Result<Bytes, object_store::Error> {
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
    async fn create_retried(
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
    async fn create_path(&self, path: &Path, bytes: Bytes, own_is_fine: bool) -> Result<()> {
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
        let path = Path::from(format!("probes/put-if-absent-{nonce}"));
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
