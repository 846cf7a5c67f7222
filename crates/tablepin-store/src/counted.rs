//! Requests counted as a remote store would bill them: every store a
//! repository opens is wrapped in [`Counted`], so a command can say what it
//! asked of its store (`tablepin --stats`) and tests can hold a command to a
//! number of requests.

use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use futures::stream::BoxStream;
use futures::StreamExt;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetRange, GetResult, ListResult, MultipartUpload, ObjectMeta,
    ObjectStore, PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};

/// What a list request returns at most: S3's page size, the smallest of the
/// clouds', so a long listing counts one request per page.
const LIST_PAGE: u64 = 1000;

/// Requests made through a store so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct RequestCounts {
    /// Object reads (whole or ranged).
    pub get: u64,
    /// Metadata reads (does it exist, how large, how old).
    pub head: u64,
    /// Object writes, conditional or not (a multipart upload counts once).
    pub put: u64,
    /// List requests, one per page of results.
    pub list: u64,
    /// Deletes.
    pub delete: u64,
    /// Server-side copies and renames.
    pub copy: u64,
    /// Bytes read by GETs.
    pub bytes_read: u64,
    /// Bytes sent by PUTs.
    pub bytes_written: u64,
    /// GETs of a blob this store had already read (the same object, the
    /// same range): blobs never change, so a command should ask once for
    /// what it holds. A ref or document read again is not counted: it may
    /// have changed, and reading it again is how a command checks.
    pub repeated: u64,
}

impl RequestCounts {
    /// All requests.
    pub fn total(&self) -> u64 {
        self.get + self.head + self.put + self.list + self.delete + self.copy
    }

    /// What was made between `earlier` and `self`.
    pub fn since(&self, earlier: &RequestCounts) -> RequestCounts {
        RequestCounts {
            get: self.get - earlier.get,
            head: self.head - earlier.head,
            put: self.put - earlier.put,
            list: self.list - earlier.list,
            delete: self.delete - earlier.delete,
            copy: self.copy - earlier.copy,
            bytes_read: self.bytes_read - earlier.bytes_read,
            bytes_written: self.bytes_written - earlier.bytes_written,
            repeated: self.repeated - earlier.repeated,
        }
    }
}

impl fmt::Display for RequestCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} requests: {} GET ({} bytes, {} of them repeated), {} HEAD, {} PUT ({} bytes), {} LIST, {} DELETE, {} COPY",
            self.total(),
            self.get,
            self.bytes_read,
            self.repeated,
            self.head,
            self.put,
            self.bytes_written,
            self.list,
            self.delete,
            self.copy
        )
    }
}

#[derive(Debug, Default)]
struct Counters {
    get: AtomicU64,
    head: AtomicU64,
    put: AtomicU64,
    list: AtomicU64,
    delete: AtomicU64,
    copy: AtomicU64,
    bytes_read: AtomicU64,
    bytes_written: AtomicU64,
    repeated: AtomicU64,
    /// What was read: each object and range.
    read: std::sync::Mutex<std::collections::HashSet<(Path, String)>>,
}

fn add(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

/// A store that counts the requests made through it.
#[derive(Debug, Clone)]
pub struct Counted {
    inner: Arc<dyn ObjectStore>,
    counters: Arc<Counters>,
    /// Each request is also printed on stderr, as it is made (which
    /// object, which range): [`crate::StoreSettings::trace_requests`].
    trace: bool,
}

impl Counted {
    /// Wraps a store.
    pub fn new(inner: Arc<dyn ObjectStore>) -> Self {
        Self {
            inner,
            counters: Arc::default(),
            trace: false,
        }
    }

    /// The same counts, each request also printed when `on`.
    pub fn traced(mut self, on: bool) -> Self {
        self.trace = on;
        self
    }

    /// Whether each request is printed.
    pub fn tracing(&self) -> bool {
        self.trace
    }

    /// The requests made so far.
    pub fn counts(&self) -> RequestCounts {
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        RequestCounts {
            get: get(&c.get),
            head: get(&c.head),
            put: get(&c.put),
            list: get(&c.list),
            delete: get(&c.delete),
            copy: get(&c.copy),
            bytes_read: get(&c.bytes_read),
            bytes_written: get(&c.bytes_written),
            repeated: get(&c.repeated),
        }
    }

    /// Prints a request on stderr when tracing.
    fn note(&self, what: &str, location: &Path, bytes: usize) {
        if self.trace {
            eprintln!("tablepin: request {what} {location} ({bytes} bytes)");
        }
    }

    /// Counts a GET of `location` (of `range`), and whether this store
    /// had read that blob's range before.
    fn count_get(&self, location: &Path, range: &Option<GetRange>) {
        add(&self.counters.get, 1);
        let blob = location.as_ref().starts_with("objects/");
        let what = (location.clone(), format!("{range:?}"));
        if let (true, Ok(mut read)) = (blob, self.counters.read.lock()) {
            if !read.insert(what) {
                add(&self.counters.repeated, 1);
            }
        }
    }

    fn note_list(&self, prefix: Option<&Path>) {
        if self.trace {
            let prefix = prefix.map(Path::as_ref).unwrap_or("");
            eprintln!("tablepin: request LIST {prefix}/");
        }
    }

    /// A listing that counts one request per page it reads.
    fn paged(
        &self,
        stream: BoxStream<'static, Result<ObjectMeta>>,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        let counters = self.counters.clone();
        add(&counters.list, 1);
        let mut seen = 0u64;
        stream
            .inspect(move |_| {
                seen += 1;
                if seen > LIST_PAGE && seen % LIST_PAGE == 1 {
                    add(&counters.list, 1);
                }
            })
            .boxed()
    }
}

impl fmt::Display for Counted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Counted({})", self.inner)
    }
}

#[async_trait::async_trait]
impl ObjectStore for Counted {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        add(&self.counters.put, 1);
        add(
            &self.counters.bytes_written,
            payload.content_length() as u64,
        );
        self.note("PUT", location, payload.content_length());
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        add(&self.counters.put, 1);
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        if options.head {
            add(&self.counters.head, 1);
            self.note("HEAD", location, 0);
        } else {
            self.count_get(location, &options.range);
        }
        let head = options.head;
        let got = self.inner.get_opts(location, options).await?;
        add(&self.counters.bytes_read, got.range.end - got.range.start);
        if !head {
            let (start, end) = (got.range.start, got.range.end);
            self.note("GET", location, (end - start) as usize);
        }
        Ok(got)
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        // Each range counted as the request a bucket would bill for it;
        // the store reads them as it does (a local folder: one open file,
        // one blocking task; `Store::read_ranges` asks this only of local
        // stores, and a bucket's ranges one request each).
        for r in ranges {
            self.count_get(location, &Some(GetRange::Bounded(r.clone())));
        }
        let got = self.inner.get_ranges(location, ranges).await?;
        for b in &got {
            add(&self.counters.bytes_read, b.len() as u64);
            self.note("GET", location, b.len());
        }
        Ok(got)
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        let counters = self.counters.clone();
        let trace = self.trace;
        let locations = locations
            .inspect(move |l| {
                add(&counters.delete, 1);
                if let (true, Ok(l)) = (trace, l) {
                    eprintln!("tablepin: request DELETE {l}");
                }
            })
            .boxed();
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.note_list(prefix);
        self.paged(self.inner.list(prefix))
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        self.note_list(prefix);
        self.paged(self.inner.list_with_offset(prefix, offset))
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        add(&self.counters.list, 1);
        self.note_list(prefix);
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        add(&self.counters.copy, 1);
        self.inner.copy_opts(from, to, options).await
    }
}
