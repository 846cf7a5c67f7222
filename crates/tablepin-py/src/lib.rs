//! The extension module of the `tablepin` Python package
//! (`tablepin._tablepin`): the engine crate behind a thin binding.
//!
//! Rows cross the boundary as Arrow C streams (arrow-pyarrow's
//! conversions; no column buffer is copied). Everything else crosses as
//! Python dicts and lists made from the engine's own `Serialize` types
//! (`pythonize`), which the pure-Python layer (`python/tablepin/`) turns
//! into small typed objects: the binding stays one function per engine
//! call, and the shapes are those `--json` prints. A staged commit's
//! description alone is JSON text, made to travel between processes.
//! Every call that does I/O releases the GIL while it runs.

use std::sync::{Arc, Mutex};

mod handed;

use arrow::array::RecordBatchIterator;
use arrow::datatypes::SchemaRef;
use arrow::ffi_stream::ArrowArrayStreamReader;
use arrow::record_batch::{RecordBatch, RecordBatchReader};
use arrow_pyarrow::PyArrowType;
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use serde::Serialize;
use tablepin::format::FileEntry;
use tablepin::{
    CommitOptions, EraseOptions, ErasePlan, ErrorKind, Fix, GcPlan, GcPolicy, LogOptions, Mode,
    NoProgress, RefKind, Repo, RestoreOptions, ScanOptions, Words, WriteSettings,
};

create_exception!(tablepin, Error, PyException, "Every error tablepin raises.");
/// The kinds of error below [`Error`]. Each class is also the built-in
/// exception a Python user would catch for it (`except ValueError` catches
/// `BadInput`, `except LookupError` catches `NotFound`), which one base
/// class, as `create_exception!` makes, cannot say: the classes are made
/// once with Python's `type(name, bases, namespace)`.
#[derive(Debug, Clone, Copy)]
enum Kind {
    BadInput,
    NotFound,
    Conflict,
    Damaged,
    Storage,
    Internal,
}

impl Kind {
    const ALL: [Kind; 6] = [
        Kind::BadInput,
        Kind::NotFound,
        Kind::Conflict,
        Kind::Damaged,
        Kind::Storage,
        Kind::Internal,
    ];

    fn name(self) -> &'static str {
        match self {
            Kind::BadInput => "BadInput",
            Kind::NotFound => "NotFound",
            Kind::Conflict => "Conflict",
            Kind::Damaged => "Damaged",
            Kind::Storage => "StorageError",
            Kind::Internal => "InternalError",
        }
    }

    fn doc(self) -> &'static str {
        match self {
            Kind::BadInput => "Bad input: a table, a column, a key, a schema, a name or an argument (CLI exit code 2); a ValueError too.",
            Kind::NotFound => "A repository, ref, revision or table that does not exist (CLI exit code 3); a LookupError too.",
            Kind::Conflict => "Something exists already, or a ref moved under the call (CLI exit code 4).",
            Kind::Damaged => "Stored bytes are damaged or missing; the message names the blob (CLI exit code 5).",
            Kind::Storage => "Storage or another system failed (CLI exit code 1); an OSError too.",
            Kind::Internal => "A failure inside tablepin itself, a bug (CLI exit code 6); a RuntimeError too.",
        }
    }

    /// The class's bases: [`Error`], then the built-in it also is.
    fn bases<'py>(self, py: Python<'py>) -> Bound<'py, pyo3::types::PyTuple> {
        use pyo3::exceptions::{PyLookupError, PyOSError, PyRuntimeError, PyValueError};
        let error = py.get_type::<Error>();
        let builtin = match self {
            Kind::BadInput => Some(py.get_type::<PyValueError>()),
            Kind::NotFound => Some(py.get_type::<PyLookupError>()),
            Kind::Storage => Some(py.get_type::<PyOSError>()),
            Kind::Internal => Some(py.get_type::<PyRuntimeError>()),
            Kind::Conflict | Kind::Damaged => None,
        };
        let bases: Vec<Bound<'py, pyo3::types::PyType>> =
            std::iter::once(error).chain(builtin).collect();
        pyo3::types::PyTuple::new(py, bases).unwrap_or_else(|_| pyo3::types::PyTuple::empty(py))
    }

    /// The class, made on first use.
    fn class<'py>(self, py: Python<'py>) -> PyResult<Bound<'py, pyo3::types::PyType>> {
        static CLASSES: [pyo3::sync::PyOnceLock<Py<pyo3::types::PyType>>; 6] =
            [const { pyo3::sync::PyOnceLock::new() }; 6];
        CLASSES[self as usize]
            .get_or_try_init(py, || {
                let namespace = pyo3::types::PyDict::new(py);
                namespace.set_item("__doc__", self.doc())?;
                namespace.set_item("__module__", "tablepin")?;
                // What the error names (`tablepin::Subject`), None unless
                // the engine says.
                for name in SUBJECT {
                    namespace.set_item(name, py.None())?;
                }
                let made = py.import("builtins")?.getattr("type")?.call1((
                    self.name(),
                    self.bases(py),
                    namespace,
                ))?;
                Ok::<_, PyErr>(made.cast_into::<pyo3::types::PyType>()?.unbind())
            })
            .map(|c| c.bind(py).clone())
    }

    /// An exception of this kind saying `message`.
    fn err(self, message: impl Into<String>) -> PyErr {
        let message = message.into();
        Python::attach(|py| match self.class(py) {
            Ok(class) => PyErr::from_type(class, message),
            Err(e) => e,
        })
    }
}

/// The attributes every exception of the package has: what the error
/// names, as `tablepin::Subject` holds it.
const SUBJECT: [&str; 9] = [
    "table", "version", "rev", "ref", "path", "blob", "column", "row", "key",
];

/// The engine's error as the Python exception of its kind, with the same
/// one-sentence message the CLI prints and what it names as attributes
/// (`e.table`, `e.blob`, `e.rev`, ...).
fn err(e: tablepin::Error) -> PyErr {
    let m = e.say(&Arguments);
    let raised = match e.kind() {
        ErrorKind::InvalidInput => Kind::BadInput.err(m),
        ErrorKind::NotFound => Kind::NotFound.err(m),
        ErrorKind::Conflict => Kind::Conflict.err(m),
        ErrorKind::Damaged => Kind::Damaged.err(m),
        ErrorKind::Io => Kind::Storage.err(m),
        _ => Kind::Internal.err(m),
    };
    let s = e.subject();
    let text = [
        s.table, s.version, s.rev, s.r#ref, s.path, s.blob, s.column, None, s.key,
    ];
    Python::attach(|py| {
        let value = raised.value(py);
        for (name, v) in SUBJECT.iter().zip(text) {
            if let Some(v) = v {
                // An attribute that cannot be set leaves the sentence,
                // which names the same thing.
                let _ = value.setattr(*name, v);
            }
        }
        if let Some(row) = s.row {
            let _ = value.setattr("row", row);
        }
    });
    raised
}

/// How this package names the engine's ways out of an error: its
/// arguments and calls ([`tablepin::Words`]); the sentences are the
/// engine's.
struct Arguments;

impl Words for Arguments {
    fn name(&self, fix: &Fix) -> String {
        match fix {
            Fix::Mode(m) => format!("mode=\"{}\"", m.name()),
            Fix::Key(k) if k.is_empty() => "key=".into(),
            Fix::Key(k) => format!("key={k:?}"),
            Fix::AllowSchemaChange => "allow_schema_change=True".into(),
            Fix::Cast { .. } => "cast=True".into(),
            Fix::Force => "force=True".into(),
            Fix::Reason => "reason=\"…\"".into(),
            // Seconds, as `grace` takes them (or a timedelta).
            Fix::Grace { ms } if ms % 1000 == 0 => format!("grace={}", ms / 1000),
            Fix::Grace { ms } => format!("grace={}", *ms as f64 / 1000.0),
            Fix::SoleWriter => "sole_writer=True".into(),
            Fix::KeepLast(n) => format!("keep_last={n}"),
            Fix::CreateBranch => "create_branch=True".into(),
            Fix::Location => "tablepin.Repo(path)".into(),
            Fix::Again => "call it again".into(),
            Fix::RetryFor => "wait for the other writers first".into(),
            Fix::Init { at: None } => "tablepin.Repo.init(path)".into(),
            Fix::Init { at: Some(at) } => format!("tablepin.Repo.init({at:?})"),
            Fix::Branch {
                name,
                at_a_rev: false,
            } => format!("repo.branch({name:?})"),
            Fix::Branch {
                name,
                at_a_rev: true,
            } => format!("repo.branch({name:?}, rev)"),
            Fix::RestoreBranch { name } => format!("repo.restore_branch({name:?})"),
            Fix::DeleteTag { name } => format!("repo.delete_tag({name:?})"),
            Fix::KeepSide { table } => {
                format!("tables={{{table:?}: \"ours\"}} or tables={{{table:?}: \"theirs\"}}")
            }
            Fix::Verify => "repo.verify()".into(),
            Fix::Log => "repo.log()".into(),
            Fix::Tags => "repo.tags()".into(),
            other => format!("{other:?}"),
        }
    }

    fn take(&self, fix: &Fix) -> String {
        match fix {
            f if f.is_command() => format!("call {}", self.name(f)),
            Fix::Cast { column, to } => {
                format!("cast=True to read the input's '{column}' as {to} when no value changes")
            }
            Fix::Location => format!("open one with {}", self.name(fix)),
            _ => fix.clause(self.name(fix)),
        }
    }
}

/// Rows handed to Python as an Arrow C stream (no buffer copied).
fn stream(
    schema: SchemaRef,
    batches: Vec<RecordBatch>,
) -> PyArrowType<Box<dyn RecordBatchReader + Send>> {
    PyArrowType(Box::new(RecordBatchIterator::new(
        batches.into_iter().map(Ok),
        schema,
    )))
}

/// What a read or scan is of, for Python's `Scan`.
fn scan_meta(
    rev: &str,
    version: &tablepin::format::VersionId,
    snapshot: &tablepin::format::TableSnapshot,
    replaced: Option<tablepin::Replaced>,
) -> serde_json::Value {
    serde_json::json!({
        "rev": rev,
        "version": version,
        "rows": snapshot.rows,
        "content_hash": snapshot.content_hash,
        "key": snapshot.key,
        "replaced": replaced,
        // What a distributed reader splits into tasks (`files` of a scan).
        "files": snapshot.files.iter().map(|f| serde_json::json!({
            "rows": f.live_rows(),
            "bytes": f.stored_bytes(),
        })).collect::<Vec<_>>(),
    })
}

/// A scan's rows as pyarrow pulls them: each batch taken from the engine's
/// stream when asked, on the runtime (pyarrow's reader releases the GIL
/// while it waits). An engine error ends the stream; it is kept for
/// [`ScanHandle::raise_failure`], which raises it as its own exception
/// class where pyarrow would give a generic one.
struct Pulled {
    schema: SchemaRef,
    rows: Option<futures::stream::BoxStream<'static, tablepin::Result<RecordBatch>>>,
    failed: Arc<Mutex<Option<tablepin::Error>>>,
}

impl Iterator for Pulled {
    type Item = Result<RecordBatch, arrow::error::ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        use futures::StreamExt;
        let rows = self.rows.as_mut()?;
        let next = match runtime() {
            Ok(rt) => rt.block_on(rows.next()),
            Err(e) => {
                self.rows = None;
                return Some(Err(arrow::error::ArrowError::ExternalError(
                    e.to_string().into(),
                )));
            }
        };
        match next {
            Some(Ok(batch)) => Some(Ok(batch)),
            Some(Err(e)) => {
                self.rows = None;
                let message = e.to_string();
                if let Ok(mut failed) = self.failed.lock() {
                    *failed = Some(e);
                }
                Some(Err(arrow::error::ArrowError::ExternalError(message.into())))
            }
            None => {
                self.rows = None;
                None
            }
        }
    }
}

impl RecordBatchReader for Pulled {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }
}

/// What a scan read so far, and the engine error that ended it, if one did.
#[pyclass(name = "_ScanHandle", frozen)]
struct ScanHandle {
    stats: Arc<Mutex<tablepin::ReadStats>>,
    failed: Arc<Mutex<Option<tablepin::Error>>>,
}

impl ScanHandle {
    fn done(stats: tablepin::ReadStats) -> Self {
        Self {
            stats: Arc::new(Mutex::new(stats)),
            failed: Arc::new(Mutex::new(None)),
        }
    }
}

#[pymethods]
impl ScanHandle {
    /// The counts so far (a dict): files read and skipped, bytes, rows.
    fn stats(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let stats = self
            .stats
            .lock()
            .map_err(|_| internal("the scan's counts", "a reader thread failed"))?
            .clone();
        answer(py, &stats)
    }

    /// Raises the engine error that ended the stream, if one did.
    fn raise_failure(&self) -> PyResult<()> {
        let failed = self
            .failed
            .lock()
            .map_err(|_| internal("the scan's failure", "a reader thread failed"))?
            .take();
        failed.map_or(Ok(()), |e| Err(err(e)))
    }
}

fn internal(what: &str, e: impl std::fmt::Display) -> PyErr {
    Kind::Internal.err(format!("{what}: {e}"))
}

/// The process's settings from its environment, read at each open (the
/// engine reads none), the threads applied to the whole process.
fn settings() -> tablepin::Settings {
    let s = tablepin::Settings::from_vars(|k| std::env::var(k).ok());
    s.apply_to_process();
    s
}

/// The one runtime every call of this process runs on. A process forked
/// from one that had a runtime (a PyTorch DataLoader worker, a
/// multiprocessing pool) has its memory but none of its threads: it gets a
/// runtime of its own, and the parent's is left alone (dropping it would
/// wait for threads that are not there).
fn runtime() -> PyResult<&'static tokio::runtime::Runtime> {
    static RT: Mutex<Option<(u32, &'static tokio::runtime::Runtime)>> = Mutex::new(None);
    let pid = std::process::id();
    let mut held = RT
        .lock()
        .map_err(|e| internal("the I/O runtime's lock", e))?;
    match *held {
        Some((owner, rt)) if owner == pid => Ok(rt),
        _ => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .thread_name("tablepin")
                .build()
                .map_err(|e| internal("cannot start the I/O runtime", e))?;
            let rt: &'static tokio::runtime::Runtime = Box::leak(Box::new(rt));
            *held = Some((pid, rt));
            Ok(rt)
        }
    }
}

/// Runs an engine call to its end with the GIL released.
fn run<T: Send>(
    py: Python<'_>,
    f: impl std::future::Future<Output = tablepin::Result<T>> + Send,
) -> PyResult<T> {
    let rt = runtime()?;
    py.detach(|| rt.block_on(f)).map_err(err)
}

/// An answer as Python values (dicts, lists, strings and numbers, as
/// `json.loads` of its JSON would give), made from the Rust type itself.
fn answer(py: Python<'_>, v: &impl Serialize) -> PyResult<Py<PyAny>> {
    pythonize::pythonize(py, v)
        .map(Bound::unbind)
        .map_err(|e| internal("cannot hand the answer to Python", e))
}

/// Reads every batch of an Arrow C stream, as views and dictionaries
/// become plain arrays (what a file read gives the CLI), so the same rows
/// hash and store alike from any producer.
fn collect(data: ArrowArrayStreamReader) -> PyResult<(SchemaRef, Vec<RecordBatch>)> {
    let schema = data.schema();
    let batches = data
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Kind::BadInput.err(format!("cannot read the rows given: {e}")))?;
    tablepin::files::normalize(&schema, batches)
        .map_err(|e| Kind::BadInput.err(format!("cannot read the rows given: {e}")))
}

fn ref_kind(kind: &str) -> PyResult<RefKind> {
    match kind {
        "branch" => Ok(RefKind::Branch),
        "tag" => Ok(RefKind::Tag),
        other => Err(Kind::BadInput.err(format!("a ref is a 'branch' or a 'tag', not '{other}'"))),
    }
}

fn mode(name: &str) -> PyResult<Mode> {
    match name {
        "overwrite" => Ok(Mode::Overwrite),
        "append" => Ok(Mode::Append),
        "upsert" => Ok(Mode::Upsert),
        "delete" => Ok(Mode::Delete),
        other => Err(Kind::BadInput.err(format!(
            "mode is one of 'overwrite', 'append', 'upsert' or 'delete', not '{other}'"
        ))),
    }
}

/// Rows handed to Python as an Arrow C stream.
type RowStream = PyArrowType<Box<dyn RecordBatchReader + Send>>;

/// Streams by table name.
type TableStreams = Vec<(String, RowStream)>;

/// The side that settles conflicts, by name.
fn side(name: &str) -> PyResult<tablepin::Strategy> {
    match name {
        "ours" => Ok(tablepin::Strategy::Ours),
        "theirs" => Ok(tablepin::Strategy::Theirs),
        other => Err(Kind::BadInput.err(format!(
            "a merge strategy is 'ours' or 'theirs', not '{other}'"
        ))),
    }
}

/// An open repository.
#[pyclass(name = "_Repo", module = "tablepin._tablepin", frozen)]
struct PyRepo {
    repo: Arc<Repo>,
    location: String,
}

/// A retention plan, applied at most once.
#[pyclass(name = "_GcPlan", module = "tablepin._tablepin", frozen)]
struct PyGcPlan {
    repo: Arc<Repo>,
    plan: Mutex<Option<GcPlan>>,
    /// The plan's fields, as Python values.
    #[pyo3(get)]
    raw: Py<PyAny>,
}

/// An erasure plan, applied at most once.
#[pyclass(name = "_ErasePlan", module = "tablepin._tablepin", frozen)]
struct PyErasePlan {
    repo: Arc<Repo>,
    plan: Mutex<Option<ErasePlan>>,
    /// The plan's fields, as Python values.
    #[pyo3(get)]
    raw: Py<PyAny>,
}

/// Takes a plan out of its slot, once.
fn take<T>(slot: &Mutex<Option<T>>) -> PyResult<T> {
    slot.lock()
        .map_err(|e| internal("a plan's lock", e))?
        .take()
        .ok_or_else(|| {
            Kind::BadInput.err("this plan was applied already; make a new one to apply it again")
        })
}

#[pymethods]
impl PyGcPlan {
    /// Deletes what the plan found; the report as a dict.
    fn apply(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let plan = take(&self.plan)?;
        let repo = self.repo.clone();
        answer(py, &run(py, async move { repo.gc().apply(plan).await })?)
    }
}

#[pymethods]
impl PyErasePlan {
    /// Erases what the plan found; the report as a dict.
    fn apply(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let plan = take(&self.plan)?;
        let repo = self.repo.clone();
        answer(
            py,
            &run(py, async move { repo.erasure().apply(plan).await })?,
        )
    }
}

#[pymethods]
impl PyRepo {
    /// Opens the repository at `location` (a folder holding one, the
    /// repository folder itself, or a URL), or else the one found in the
    /// current folder or a parent of it.
    #[staticmethod]
    #[pyo3(signature = (location=None))]
    fn open(py: Python<'_>, location: Option<String>) -> PyResult<Self> {
        let cwd = std::env::current_dir()
            .map_err(|e| Kind::Storage.err(format!("cannot read the current folder: {e}")))?;
        let location = tablepin::repo::discover(location.as_deref(), &cwd).map_err(err)?;
        let settings = settings();
        let store = tablepin::repo::store_at(&location, &settings.store).map_err(err)?;
        let repo = run(py, async move {
            Ok(Repo::open_store(store).await?.with_author(settings.author))
        })?;
        Ok(Self {
            repo: Arc::new(repo),
            location,
        })
    }

    /// Creates a repository at `location` (a folder, created if missing).
    #[staticmethod]
    fn init(py: Python<'_>, location: String) -> PyResult<Self> {
        let settings = settings();
        let store = tablepin::repo::store_for_init(&location, &settings.store).map_err(err)?;
        let repo = run(py, async move {
            let repo = Repo::init_store(store, WriteSettings::default()).await?;
            Ok(repo.with_author(settings.author))
        })?;
        Ok(Self {
            repo: Arc::new(repo),
            location,
        })
    }

    /// Where the repository is.
    #[getter]
    fn location(&self) -> String {
        self.location.clone()
    }

    /// The rows asked for, what the scan is of (a dict) and a handle on its
    /// counts and its failure. `whole`: read at once by the planner that
    /// merges a keyed table's files on every core. Else a stream pulled
    /// batch by batch: files whose key range or statistics rule out the
    /// filter are never fetched, and memory holds what is being read, not
    /// the table. `files`: only those data files' live rows (positions in
    /// the meta's `files`), one file at a time and unmerged, as a task of
    /// a distributed read takes its part.
    #[pyo3(signature = (table, rev, columns=None, filter=None, limit=None, whole=false, files=None))]
    #[allow(clippy::type_complexity, clippy::too_many_arguments)]
    fn scan(
        &self,
        py: Python<'_>,
        table: String,
        rev: String,
        columns: Option<Vec<String>>,
        filter: Option<String>,
        limit: Option<usize>,
        whole: bool,
        files: Option<Vec<usize>>,
    ) -> PyResult<(
        PyArrowType<Box<dyn RecordBatchReader + Send>>,
        Py<PyAny>,
        ScanHandle,
    )> {
        let repo = self.repo.clone();
        let opts = ScanOptions {
            columns,
            filter,
            limit,
            files,
        };
        let at = rev.clone();
        if whole {
            let (read, replaced) = run(py, async move {
                let at = repo.snapshot(&at).await?;
                Ok((at.scan(&table, &opts).await?, at.replaced().cloned()))
            })?;
            let meta = scan_meta(&rev, &read.version, &read.snapshot, replaced);
            let (schema, batches) = (read.schema, read.batches);
            let threads = tablepin::format::threads();
            let batches = py
                .detach(|| handed::joined(&schema, batches, threads))
                .map_err(|e| internal("joining the rows read for Python", e))?;
            let handle = ScanHandle::done(read.stats);
            return Ok((stream(schema, batches), answer(py, &meta)?, handle));
        }
        let (s, replaced) = run(py, async move {
            let at = repo.snapshot(&at).await?;
            Ok((at.stream(&table, &opts).await?, at.replaced().cloned()))
        })?;
        let meta = scan_meta(&rev, &s.version, &s.snapshot, replaced);
        let handle = ScanHandle {
            stats: s.shared_stats(),
            failed: Arc::new(Mutex::new(None)),
        };
        let reader = Pulled {
            schema: s.schema.clone(),
            rows: Some(s.rows),
            failed: handle.failed.clone(),
        };
        Ok((PyArrowType(Box::new(reader)), answer(py, &meta)?, handle))
    }

    /// The store's requests so far, as `--stats` counts them (a dict).
    fn requests(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        answer(py, &self.repo.store().requests())
    }

    /// Commits rows given as an Arrow C stream, the Parquet, Arrow IPC or
    /// CSV file at `path` (read a window of `window_rows` rows at a time
    /// where it streams, `Input::Stream`), or the data files other
    /// processes staged (`staged`: their JSON descriptions); what the
    /// commit did (a dict). Every argument after the table by keyword.
    #[pyo3(signature = (table, *, data=None, path=None, staged=None, mode="overwrite", key=None, message=String::new(), branch=None, allow_schema_change=false, cast=false, create_branch=false, window_rows=None, allow_empty=false))]
    #[allow(clippy::too_many_arguments)]
    fn commit(
        &self,
        py: Python<'_>,
        table: String,
        data: Option<PyArrowType<ArrowArrayStreamReader>>,
        path: Option<String>,
        staged: Option<Vec<String>>,
        mode: &str,
        key: Option<Vec<String>>,
        message: String,
        branch: Option<String>,
        allow_schema_change: bool,
        cast: bool,
        create_branch: bool,
        window_rows: Option<usize>,
        allow_empty: bool,
    ) -> PyResult<Py<PyAny>> {
        let opts = CommitOptions {
            mode: self::mode(mode)?,
            key,
            allow_schema_change,
            cast,
            message,
            branch: branch.unwrap_or_else(|| tablepin::DEFAULT_BRANCH.into()),
            create_branch,
            window_rows: window_rows.unwrap_or(tablepin::DEFAULT_WINDOW_ROWS),
            allow_empty,
            ..Default::default()
        };
        let repo = self.repo.clone();
        let done = match (data, path, staged) {
            (Some(data), None, None) => {
                let (schema, batches) = collect(data.0)?;
                run(py, async move {
                    repo.commit(&table, schema, batches, &opts).await
                })?
            }
            (None, Some(path), None) => {
                let input = tablepin::files::TableFile {
                    path,
                    opts: Default::default(),
                };
                run(py, async move {
                    repo.transaction(&table, &opts)
                        .commit(tablepin::Input::Stream(&input))
                        .await
                })?
            }
            (None, None, Some(staged)) => {
                let sets = staged
                    .iter()
                    .map(|s| tablepin::StagedFiles::from_json(s))
                    .collect::<tablepin::Result<Vec<_>>>()
                    .map_err(err)?;
                run(py, async move {
                    repo.transaction(&table, &opts)
                        .commit(tablepin::Input::Staged(sets))
                        .await
                })?
            }
            _ => {
                return Err(internal(
                    "commit",
                    "the package passes rows, a file's path or staged files, one of the three",
                ))
            }
        };
        answer(py, &done)
    }

    /// Writes rows (an Arrow C stream) as data files of `table` for a
    /// commit by another process; their description (JSON). In "delete"
    /// mode the rows' keys are staged, for a delete commit.
    #[pyo3(signature = (table, data, *, key=None, branch=None, mode="append"))]
    fn stage(
        &self,
        py: Python<'_>,
        table: String,
        data: PyArrowType<ArrowArrayStreamReader>,
        key: Option<Vec<String>>,
        branch: Option<String>,
        mode: &str,
    ) -> PyResult<String> {
        let opts = CommitOptions {
            mode: self::mode(mode)?,
            key,
            branch: branch.unwrap_or_else(|| tablepin::DEFAULT_BRANCH.into()),
            ..Default::default()
        };
        let (schema, batches) = collect(data.0)?;
        let repo = self.repo.clone();
        let staged = run(py, async move {
            repo.transaction(&table, &opts).stage(schema, batches).await
        })?;
        staged.to_json().map_err(err)
    }

    /// What differs between two revisions: per table, its facts (a dict) and
    /// its differing rows (a stream).
    #[pyo3(signature = (old, new, table=None))]
    #[allow(clippy::type_complexity)]
    fn diff(
        &self,
        py: Python<'_>,
        old: String,
        new: String,
        table: Option<String>,
    ) -> PyResult<Vec<(Py<PyAny>, RowStream)>> {
        let repo = self.repo.clone();
        let d = run(
            py,
            async move { repo.diff(&old, &new, table.as_deref()).await },
        )?;
        d.tables
            .into_iter()
            .map(|t| {
                let mut meta =
                    serde_json::to_value(&t).map_err(|e| internal("encoding a diff", e))?;
                meta["old"] = serde_json::json!(d.old);
                meta["new"] = serde_json::json!(d.new);
                Ok((answer(py, &meta)?, stream(t.rows.schema(), vec![t.rows])))
            })
            .collect()
    }

    /// A read-only SQL query over any table at any version: the rows (a
    /// stream) and which versions were read (a dict).
    fn sql(&self, py: Python<'_>, query: String) -> PyResult<(RowStream, Py<PyAny>)> {
        let repo = self.repo.clone();
        let r = run(py, async move { repo.sql(&query).await })?;
        let meta = answer(py, &r)?;
        Ok((stream(r.schema, r.batches), meta))
    }

    /// A new version on `branch` with the tables of `rev` (a dict).
    #[pyo3(signature = (rev, table=None, message=None, branch=None))]
    fn restore(
        &self,
        py: Python<'_>,
        rev: String,
        table: Option<String>,
        message: Option<String>,
        branch: Option<String>,
    ) -> PyResult<Py<PyAny>> {
        let opts = RestoreOptions {
            branch: branch.unwrap_or_else(|| tablepin::DEFAULT_BRANCH.into()),
            table,
            message,
            ..Default::default()
        };
        let repo = self.repo.clone();
        answer(
            py,
            &run(py, async move { repo.restore(&rev, &opts).await })?,
        )
    }

    /// Merges `source` into `into` (or, with `revert`, undoes the version
    /// `source` on `into`): the result (a dict) and each table's conflicts
    /// (a stream of rows, by table).
    #[pyo3(signature = (source, into=None, strategy=None, tables=None, resolved=None, message=None, revert=false))]
    #[allow(clippy::too_many_arguments)]
    fn merge(
        &self,
        py: Python<'_>,
        source: String,
        into: Option<String>,
        strategy: Option<String>,
        tables: Option<std::collections::BTreeMap<String, String>>,
        resolved: Option<std::collections::BTreeMap<String, PyArrowType<ArrowArrayStreamReader>>>,
        message: Option<String>,
        revert: bool,
    ) -> PyResult<(Py<PyAny>, TableStreams)> {
        let mut opts = tablepin::MergeOptions {
            into: into.unwrap_or_else(|| tablepin::DEFAULT_BRANCH.into()),
            strategy: strategy.as_deref().map(side).transpose()?,
            message,
            ..Default::default()
        };
        for (t, s) in tables.unwrap_or_default() {
            opts.table_strategy.insert(t, side(&s)?);
        }
        for (t, rows) in resolved.unwrap_or_default() {
            opts.resolved.insert(t, collect(rows.0)?);
        }
        let repo = self.repo.clone();
        let r = run(py, async move {
            match revert {
                true => repo.revert(&source, &opts).await,
                false => repo.merge(&source, &opts).await,
            }
        })?;
        let conflicts = r
            .tables
            .iter()
            .filter_map(|t| {
                let rows = t.conflict_rows.clone()?;
                Some((t.table.clone(), stream(rows.schema(), vec![rows])))
            })
            .collect();
        Ok((answer(py, &r)?, conflicts))
    }

    /// Writes a Delta Lake view of `table` at `rev` (or, with `history`,
    /// at each version along its first parents) into the new folder
    /// `path`; what was written (a dict).
    #[pyo3(signature = (rev, table, path, history=false, deletion_vectors=true))]
    fn export_delta(
        &self,
        py: Python<'_>,
        rev: String,
        table: String,
        path: String,
        history: bool,
        deletion_vectors: bool,
    ) -> PyResult<Py<PyAny>> {
        let repo = self.repo.clone();
        let opts = tablepin::delta::DeltaOptions {
            history,
            deletion_vectors,
        };
        answer(
            py,
            &run(py, async move {
                repo.export_delta(&rev, &table, &path, &opts).await
            })?,
        )
    }

    /// A branch's versions, newest first (a list of dicts).
    #[pyo3(signature = (branch, max=None, table=None))]
    fn log(
        &self,
        py: Python<'_>,
        branch: String,
        max: Option<usize>,
        table: Option<String>,
    ) -> PyResult<Py<PyAny>> {
        let repo = self.repo.clone();
        answer(
            py,
            &run(py, async move {
                repo.log(
                    &branch,
                    &LogOptions {
                        max,
                        table,
                        all_parents: false,
                    },
                )
                .await
            })?,
        )
    }

    /// A version: its record, each table's snapshot facts, and the note
    /// when an erasure replaced it (a dict).
    fn show(&self, py: Python<'_>, rev: String) -> PyResult<Py<PyAny>> {
        let repo = self.repo.clone();
        let v = run(py, async move {
            let at = repo.snapshot(&rev).await?;
            let (id, v, replaced) = (at.id(), at.version(), at.replaced().cloned());
            let mut tables = Vec::new();
            for name in v.tables.keys() {
                let s = at.table(name).await?;
                tables.push(serde_json::json!({
                    "table": name, "rows": s.rows, "content_hash": s.content_hash, "key": s.key,
                    "columns": s.schema.fields().iter().map(|f| serde_json::json!({
                        "name": f.name(), "type": f.data_type().to_string(), "nullable": f.is_nullable()
                    })).collect::<Vec<_>>(),
                    "files": s.files.len(),
                    "bytes": s.files.iter().map(FileEntry::stored_bytes).sum::<u64>(),
                }));
            }
            Ok(serde_json::json!({
                "version": id, "parents": v.parents, "time_ms": v.time_ms, "author": v.author,
                "message": v.message, "changes": v.changes, "replaces": v.replaces,
                "tables": tables, "replaced": replaced,
            }))
        })?;
        answer(py, &v)
    }

    /// The branches or tags (a list of dicts).
    fn refs(&self, py: Python<'_>, kind: &str) -> PyResult<Py<PyAny>> {
        let kind = ref_kind(kind)?;
        let repo = self.repo.clone();
        answer(py, &run(py, async move { repo.refs().list(kind).await })?)
    }

    /// Creates a branch or tag at a revision; the version it names.
    fn create_ref(
        &self,
        py: Python<'_>,
        kind: &str,
        name: String,
        rev: String,
        message: String,
    ) -> PyResult<String> {
        let kind = ref_kind(kind)?;
        let repo = self.repo.clone();
        let id = run(py, async move {
            repo.refs().create(kind, &name, &rev, &message).await
        })?;
        Ok(id.to_string())
    }

    /// Deletes a branch or tag; the version it named.
    fn delete_ref(
        &self,
        py: Python<'_>,
        kind: &str,
        name: String,
        force: bool,
    ) -> PyResult<String> {
        let kind = ref_kind(kind)?;
        let repo = self.repo.clone();
        let id = run(
            py,
            async move { repo.refs().delete(kind, &name, force).await },
        )?;
        Ok(id.to_string())
    }

    /// Restores a deleted branch or tag where it pointed; the version.
    fn restore_ref(&self, py: Python<'_>, kind: &str, name: String) -> PyResult<String> {
        let kind = ref_kind(kind)?;
        let repo = self.repo.clone();
        let id = run(py, async move { repo.refs().restore(kind, &name).await })?;
        Ok(id.to_string())
    }

    /// The full version id a revision names.
    fn resolve(&self, py: Python<'_>, rev: String) -> PyResult<String> {
        let repo = self.repo.clone();
        Ok(run(py, async move { repo.resolve(&rev).await })?.to_string())
    }

    /// Checks every blob, ref, version and snapshot (a dict).
    fn verify(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let repo = self.repo.clone();
        answer(py, &run(py, async move { repo.verify(&NoProgress).await })?)
    }

    /// Brings the repository to this build's format (a dict: what was
    /// done, or with `dry_run` what would be).
    #[pyo3(signature = (dry_run=false))]
    fn upgrade(&self, py: Python<'_>, dry_run: bool) -> PyResult<Py<PyAny>> {
        let repo = self.repo.clone();
        if dry_run {
            answer(py, &run(py, async move { repo.upgrade_plan().await })?)
        } else {
            answer(
                py,
                &run(py, async move { repo.upgrade(&NoProgress).await })?,
            )
        }
    }

    /// Checks that no stored blob holds a row an erasure removed (a dict).
    fn verify_erased(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let repo = self.repo.clone();
        answer(
            py,
            &run(py, async move { repo.erasure().verify(&NoProgress).await })?,
        )
    }

    /// The erasures' audit records (a list of dicts).
    fn audit(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let repo = self.repo.clone();
        answer(py, &run(py, async move { repo.erasure().audit().await })?)
    }

    /// What retention would delete, as a plan to apply.
    #[pyo3(signature = (keep_last, keep_within_ms, keep_tags, grace_ms, sole_writer=false))]
    fn gc_plan(
        &self,
        py: Python<'_>,
        keep_last: Option<usize>,
        keep_within_ms: Option<i64>,
        keep_tags: bool,
        grace_ms: i64,
        sole_writer: bool,
    ) -> PyResult<PyGcPlan> {
        let policy = GcPolicy {
            keep_last,
            keep_within_ms,
            keep_tags,
            grace_ms,
            sole_writer,
            now_ms: None,
        };
        let repo = self.repo.clone();
        let plan = run(py, async move { repo.gc().plan(&policy).await })?;
        Ok(PyGcPlan {
            repo: self.repo.clone(),
            raw: answer(py, &plan)?,
            plan: Mutex::new(Some(plan)),
        })
    }

    /// What erasing the rows `predicate` matches would do, as a plan.
    fn erase_plan(
        &self,
        py: Python<'_>,
        table: String,
        predicate: String,
        reason: String,
    ) -> PyResult<PyErasePlan> {
        let opts = EraseOptions {
            table,
            predicate,
            reason,
        };
        let repo = self.repo.clone();
        let plan = run(py, async move { repo.erasure().plan(&opts).await })?;
        Ok(PyErasePlan {
            repo: self.repo.clone(),
            raw: answer(py, &plan)?,
            plan: Mutex::new(Some(plan)),
        })
    }
}

/// The content hash (rowhash-v1) of rows given as an Arrow C stream; with
/// a schema, of the rows read as a table of that schema holds them (each
/// column cast where no value changes).
#[pyfunction]
#[pyo3(signature = (data, schema=None))]
fn content_hash(
    py: Python<'_>,
    data: PyArrowType<ArrowArrayStreamReader>,
    schema: Option<PyArrowType<arrow::datatypes::Schema>>,
) -> PyResult<String> {
    let (_, batches) = collect(data.0)?;
    match schema {
        Some(s) => {
            let schema = std::sync::Arc::new(s.0);
            py.detach(|| tablepin::content_hash_as(&schema, &batches))
                .map(|h| h.to_string())
                .map_err(err)
        }
        None => py
            .detach(|| tablepin::content_hash(&batches))
            .map(|h| h.to_string())
            .map_err(|e| Kind::BadInput.err(e.to_string())),
    }
}

#[pymodule]
fn _tablepin(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<PyRepo>()?;
    m.add_class::<PyGcPlan>()?;
    m.add_class::<PyErasePlan>()?;
    m.add_class::<ScanHandle>()?;
    m.add_function(wrap_pyfunction!(content_hash, m)?)?;
    m.add("Error", py.get_type::<Error>())?;
    for kind in Kind::ALL {
        m.add(kind.name(), kind.class(py)?)?;
    }
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
