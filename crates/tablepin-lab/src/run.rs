//! One run of the experiment: the 110 commits through every layout and
//! through tablepin, then every figure, `results.json`, `report.md` and the
//! charts.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::Float64Type;
use bytes::Bytes;
use parquet::file::properties::WriterProperties;
use serde_json::{json, Value};
use tablepin::{
    CommitOptions, ContentHash, GcPolicy, Mode, RefKind, Repo, VersionId, WriteSettings,
};
use tablepin_format::{ObjectId, RowHash};
use tablepin_rowhash::hash_rows;

use crate::data::{self, Lines};
use crate::dvc::Dvc;
use crate::experiment::{
    self, month_of, week_end, week_of, Commit, Delta, Derived, Kind, Master, State, TAG_WEEKS,
};
use crate::layouts::{read_back, Changes, FileHashes, Partitioned, Rec};
use crate::on_disk::Disks;
use crate::playground::{check_presets, Layout, Playground, PLAYGROUND};
use crate::LabError;

/// Options of a lab run.
#[derive(Debug, Clone)]
pub struct LabOptions {
    /// The data file (see `data::locate`).
    pub data: Option<String>,
    /// The output folder.
    pub out: PathBuf,
    /// The customer to erase.
    pub customer: i64,
    /// Print progress lines on stderr.
    pub verbose: bool,
    /// The data is a sample in Online Retail II's format, not the whole
    /// file: its row and cancellation counts are not checked.
    pub sample: bool,
    /// Also version the month layout with the real `dvc` command (see
    /// `dvc`), and compare its remote with the layout.
    pub dvc: bool,
    /// What the lab takes from the environment.
    pub env: data::Env,
}

/// The original experiment's figures, set beside ours in the report.
pub const ORIGINAL: &[(&str, f64)] = &[
    ("sale_lines", 1_047_877.0),
    ("cancellations", 19_494.0),
    ("returns_matched", 16_675.0),
    ("returns_changed_nothing", 2_819.0),
    ("commits", 110.0),
    ("last_version.rows", 1_047_820.0),
    ("late_returns.lines_changed", 134.0),
    ("late_returns.rows", 665_731.0),
    ("erasure.lines", 57.0),
    ("erasure.month_files", 9.0),
    ("erasure.week_files", 10.0),
    ("files_stored.month", 816.0),
    ("files_stored.week", 1_880.0),
    ("files_stored.changes", 329.0),
    ("last_version_files.month", 25.0),
    ("last_version_files.week", 105.0),
    ("last_version_files.changes", 210.0),
    ("changes_rows_read", 1_060_857.0),
    ("stored.copy", 754.5e6),
    ("stored.month", 431.9e6),
    ("stored.week", 301.6e6),
    ("stored.changes", 27.8e6),
    ("last_version.month_bytes", 14.5e6),
];

struct Tag {
    week: i64,
    version_index: usize,
    present: Vec<bool>,
    returned: Vec<i64>,
    content: ContentHash,
    /// Content hash of the erased customer's rows in this tag.
    customer_content: ContentHash,
    customer_rows: u64,
    rows: u64,
    /// Each reference layout's files read back when the tag was made:
    /// whether their rows hash to the tag's content.
    layout_read_back: BTreeMap<&'static str, bool>,
    tablepin: VersionId,
}

/// A progress line: time since the start, memory now and at its peak.
fn log(verbose: bool, start: &Instant, msg: &str) {
    if verbose {
        eprintln!(
            "[{:6.1}s {:5.0} MB, peak {:5.0} MB] {msg}",
            start.elapsed().as_secs_f64(),
            crate::rss_bytes() as f64 / 1e6,
            crate::peak_rss_bytes() as f64 / 1e6
        );
    }
}

fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn share(n: usize, of: usize) -> f64 {
    if of == 0 {
        0.0
    } else {
        n as f64 / of as f64
    }
}

/// What stays fixed through a run: the data, what is derived from it, the
/// commits, the writer settings of the reference layouts, the customer to
/// erase, and the progress clock.
struct Ctx<'a> {
    l: &'a Lines,
    d: &'a Derived,
    commits: &'a [Commit],
    master: &'a Master,
    props: &'a WriterProperties,
    customer: f64,
    v: bool,
    start: &'a Instant,
}

impl Ctx<'_> {
    fn log(&self, msg: &str) {
        log(self.v, self.start, msg);
    }
}

/// The two tablepin repositories the commits go to: default settings, and
/// pyarrow's.
struct Repos {
    path: PathBuf,
    main: Arc<Repo>,
    py: Arc<Repo>,
}

impl Repos {
    async fn init(work: &Path) -> Result<Self, LabError> {
        let path = work.join("tablepin");
        let py_path = work.join("tablepin-pyarrow");
        let main = Arc::new(Repo::init(&path.to_string_lossy(), WriteSettings::default()).await?);
        let py =
            Arc::new(Repo::init(&py_path.to_string_lossy(), WriteSettings::pyarrow_like()).await?);
        Ok(Self { path, main, py })
    }
}

/// A commit running on a task of its own.
type CommitTask = tokio::task::JoinHandle<tablepin::Result<tablepin::CommitResult>>;
/// What a commit task gave.
type Joined = Result<tablepin::Result<tablepin::CommitResult>, tokio::task::JoinError>;

fn joined(j: Joined) -> Result<tablepin::CommitResult, LabError> {
    j.map_err(|e| LabError::Other(format!("a commit task failed: {e}")))?
        .map_err(LabError::from)
}

/// How the replay commits week `c` (commit number `ci`): keyed on the
/// invoice line, stamped at the week's end so the history reads as it
/// happened.
fn commit_options(ci: usize, c: &Commit, mode: Mode) -> CommitOptions {
    CommitOptions {
        mode,
        key: Some(vec!["line".into()]),
        message: format!("{} (week {})", c.kind.name(), c.week),
        time_ms: Some(week_end(c.week) * 1000 + ci as i64),
        ..Default::default()
    }
}

/// Commit `ci` to both repositories, as a user commits, each on a task.
fn commit_tasks(
    repos: &Repos,
    ci: usize,
    c: &Commit,
    mode: Mode,
    input: &RecordBatch,
) -> (CommitTask, CommitTask) {
    let copts = commit_options(ci, c, mode);
    let task = |r: &Arc<Repo>| {
        let (r, input, copts) = (r.clone(), input.clone(), copts.clone());
        tokio::spawn(async move { r.commit("sales", input.schema(), vec![input], &copts).await })
    };
    (task(&repos.main), task(&repos.py))
}

/// The commits replayed so far: the lab's table and its content hash,
/// every reference layout's files and history, tablepin's bytes and
/// checks, and the tags.
struct Replayed {
    state: State,
    month: Partitioned,
    week: Partitioned,
    changes: Changes,
    /// The lab's own content hash, kept per line and updated as lines
    /// change.
    row_hash: Vec<RowHash>,
    content: ContentHash,
    tags: Vec<Tag>,
    per_commit: Vec<Value>,
    ref_checks: BTreeMap<Kind, [u64; 5]>,
    tp_checks: BTreeMap<Kind, [u64; 5]>,
    week_rewrites: BTreeMap<i64, BTreeSet<i64>>,
    tp_added: Vec<u64>,
    tp_py_added: Vec<u64>,
    late: (usize, usize),
    erased_lines: Vec<u32>,
    copy_total: u64,
    copy_hashed: u64,
    copy_sizes: Vec<u64>,
    prev_month_files: Vec<ObjectId>,
    prev_rows: usize,
    tp_seconds: f64,
    layout_seconds: f64,
    /// Each file's rows read back, by id, for the tags and the last version.
    cache: HashMap<ObjectId, FileHashes>,
    dvc: Option<Dvc>,
}

impl Replayed {
    fn new(ctx: &Ctx<'_>, dvc: Option<Dvc>) -> Result<Self, LabError> {
        let times = ctx.l.time.clone();
        let month = Partitioned::new("month", Box::new(move |i| month_of(times[i as usize])));
        let times = ctx.l.time.clone();
        let week = Partitioned::new("week", Box::new(move |i| week_of(times[i as usize])));
        let all: Vec<u32> = (0..ctx.l.len() as u32).collect();
        let zero = vec![0i64; ctx.l.len()];
        Ok(Self {
            state: State::new(ctx.l.len()),
            month,
            week,
            changes: Changes::default(),
            row_hash: hash_rows(&ctx.master.rows(&all, &zero)?)?,
            content: ContentHash::EMPTY,
            tags: Vec::new(),
            per_commit: Vec::new(),
            ref_checks: BTreeMap::new(),
            tp_checks: BTreeMap::new(),
            week_rewrites: BTreeMap::new(),
            tp_added: Vec::new(),
            tp_py_added: Vec::new(),
            late: (0, 0),
            erased_lines: Vec::new(),
            copy_total: 0,
            copy_hashed: 0,
            copy_sizes: Vec::new(),
            prev_month_files: Vec::new(),
            prev_rows: 0,
            tp_seconds: 0.0,
            layout_seconds: 0.0,
            cache: HashMap::new(),
            dvc,
        })
    }

    /// Commit `ci`: the lab's table, tablepin (on two tasks) and the
    /// reference layouts (on this thread) take it; then the tag, if the
    /// week is tagged.
    async fn commit(
        &mut self,
        ctx: &Ctx<'_>,
        repos: &Repos,
        disk: &Disks,
        ci: usize,
        c: &Commit,
    ) -> Result<(), LabError> {
        let old_content = self.content;
        let delta = self.apply(ctx, c)?;
        let t = Instant::now();
        let (mode, input) = tablepin_input(ctx.l, ctx.master, &self.state, c, &delta)?;
        let (a, b) = commit_tasks(repos, ci, c, mode, &input);
        let ((res_a, res_b), (checks, month_size)) =
            if matches!(c.kind, Kind::WrittenAgain | Kind::AnotherOrder) {
                // The two whole-table commits are the memory peak: let them
                // finish before the layouts re-encode every file.
                let done = (a.await, b.await);
                (
                    done,
                    self.layouts(ctx, disk, ci, c, &delta, old_content, t)?,
                )
            } else {
                let figures = self.layouts(ctx, disk, ci, c, &delta, old_content, t)?;
                let t = Instant::now();
                let done = (a.await, b.await);
                self.tp_seconds += t.elapsed().as_secs_f64();
                (done, figures)
            };
        let r = joined(res_a)?;
        let r_py = joined(res_b)?;
        self.record_tablepin(ci, c, &r, &r_py, checks, month_size)?;
        self.tag(ctx, repos, ci, c).await?;
        if ctx.v && (ci + 1).is_multiple_of(10) {
            ctx.log(&format!("commit {} of {}", ci + 1, ctx.commits.len()));
        }
        Ok(())
    }

    /// Applies commit `c` to the lab's table and moves its content hash by
    /// the lines added, changed and erased.
    fn apply(&mut self, ctx: &Ctx<'_>, c: &Commit) -> Result<Delta, LabError> {
        let delta = self.state.apply(ctx.l, ctx.d, c, ctx.customer);
        for &i in &delta.added {
            self.content.add(&self.row_hash[i as usize]);
        }
        let mut touched: Vec<u32> = delta.changed.clone();
        if !delta.added.is_empty() {
            // Same-week returns changed some added lines after they were
            // counted: rehash every added line whose `returned` moved.
            touched.extend(
                delta
                    .added
                    .iter()
                    .copied()
                    .filter(|i| self.state.returned[*i as usize] != 0),
            );
        }
        touched.sort_unstable();
        touched.dedup();
        if !touched.is_empty() {
            let fresh = hash_rows(&ctx.master.current(&touched, &self.state)?)?;
            for (k, &i) in touched.iter().enumerate() {
                if self.state.present[i as usize] {
                    self.content.sub(&self.row_hash[i as usize]);
                    self.content.add(&fresh[k]);
                }
                self.row_hash[i as usize] = fresh[k];
            }
        }
        for &i in &delta.erased {
            self.content.sub(&self.row_hash[i as usize]);
        }
        if c.kind == Kind::Erasure {
            self.erased_lines = delta.erased.clone();
        }
        if c.kind == Kind::LateReturns {
            self.late = (delta.changed.len(), self.state.rows);
        }
        Ok(delta)
    }

    /// The reference layouts take commit `c`; the three encode at once, so
    /// that one layout's small files fill the cores while another's largest
    /// file is encoded. Returns the reference checks that fired and the
    /// bytes of the month files (a whole copy's).
    #[allow(clippy::too_many_arguments)]
    fn layouts(
        &mut self,
        ctx: &Ctx<'_>,
        disk: &Disks,
        ci: usize,
        c: &Commit,
        delta: &Delta,
        old_content: ContentHash,
        t: Instant,
    ) -> Result<([u64; 5], u64), LabError> {
        let Self {
            month,
            week,
            changes,
            state,
            ..
        } = self;
        let month_changed = std::thread::scope(|sc| {
            let (l, m, st, de, pr) = (ctx.l, ctx.master, &*state, delta, ctx.props);
            let w = sc.spawn(|| week.commit(l, m, st, de, pr).map(drop));
            let c = sc.spawn(|| changes.commit(l, m, st, de, pr));
            let month_changed = month.commit(l, m, st, de, pr);
            for done in [w.join(), c.join()] {
                done.map_err(|_| LabError::Other("a layout thread failed".into()))??;
            }
            month_changed
        })?;
        self.layout_seconds += t.elapsed().as_secs_f64();
        disk.put(&self.month, &self.week, &self.changes)?;
        if let Some(dvc) = self.dvc.as_mut() {
            dvc.version(&self.month.current)?;
        }
        // Week 0 creates its month file; rewrites start in week 1.
        if matches!(c.kind, Kind::Weekly | Kind::LinesOnly | Kind::LateReturns) {
            self.week_rewrites
                .entry(c.week)
                .or_default()
                .extend(month_changed.iter().copied());
        }
        let month_files: Vec<ObjectId> = self.month.current.values().map(|r| r.id).collect();
        let month_size: u64 = self.month.current.values().map(|r| r.size).sum();
        self.copy_total += month_size;
        self.copy_sizes.push(self.copy_total);
        if month_files != self.prev_month_files {
            self.copy_hashed += month_size;
        }
        let checks = [
            1,
            u64::from(self.state.rows != self.prev_rows),
            0,
            u64::from(month_files != self.prev_month_files),
            u64::from(self.content != old_content),
        ];
        self.prev_month_files = month_files;
        self.prev_rows = self.state.rows;
        if ci > 0 {
            let e = self.ref_checks.entry(c.kind).or_default();
            for (n, fired) in e.iter_mut().zip(checks) {
                *n += fired;
            }
        }
        Ok((checks, month_size))
    }

    /// Checks tablepin's commit `ci` against the lab's table, and records
    /// its bytes and the checks it saw.
    fn record_tablepin(
        &mut self,
        ci: usize,
        c: &Commit,
        r: &tablepin::CommitResult,
        r_py: &tablepin::CommitResult,
        checks: [u64; 5],
        month_size: u64,
    ) -> Result<(), LabError> {
        if r.content_hash != self.content || r.rows != self.state.rows as u64 {
            return Err(LabError::Other(format!(
                "commit {ci} ({}): tablepin holds {} rows hashing to {}, the lab's table {} rows hashing to {}",
                c.kind.name(),
                r.rows,
                r.content_hash.short(16),
                self.state.rows,
                self.content.short(16)
            )));
        }
        self.tp_added.push(r.change.bytes_new + r.version_bytes);
        self.tp_py_added
            .push(r_py.change.bytes_new + r_py.version_bytes);
        if ci > 0 {
            let ch = r.change.checks;
            let e = self.tp_checks.entry(c.kind).or_default();
            e[0] += 1;
            e[1] += u64::from(ch.rows);
            e[2] += u64::from(ch.schema);
            e[3] += u64::from(ch.files);
            e[4] += u64::from(ch.content);
        }
        self.per_commit.push(json!({
            "commit": ci + 1, "kind": c.kind, "week": c.week, "rows": self.state.rows,
            "added_bytes": {
                "copy": month_size, "month": self.month.history.added[ci], "week": self.week.history.added[ci],
                "changes": self.changes.history.added[ci], "tablepin": self.tp_added[ci], "tablepin_pyarrow": self.tp_py_added[ci],
            },
            "checks_reference": {"rows": checks[1] == 1, "schema": false, "files": checks[3] == 1, "content": checks[4] == 1},
            "checks_tablepin": r.change.checks,
        }));
        Ok(())
    }

    /// After the last commit of a tagged week: the tag in both
    /// repositories, and the reference layouts' files read back now, while
    /// they hold this version, rather than keeping eight versions' bytes to
    /// the end.
    async fn tag(
        &mut self,
        ctx: &Ctx<'_>,
        repos: &Repos,
        ci: usize,
        c: &Commit,
    ) -> Result<(), LabError> {
        let last_of_week = ctx.commits.get(ci + 1).is_none_or(|n| n.week != c.week);
        if !(last_of_week && TAG_WEEKS.contains(&c.week)) {
            return Ok(());
        }
        let name = format!("week-{}", c.week);
        let id = repos
            .main
            .refs()
            .create(RefKind::Tag, &name, "main", "training set")
            .await?;
        repos
            .py
            .refs()
            .create(RefKind::Tag, &name, "main", "training set")
            .await?;
        let mut layout_read_back = BTreeMap::new();
        for (layout, files) in [
            ("month", files_of(self.month.current.values())),
            ("week", files_of(self.week.current.values())),
            (
                "changes",
                files_of(self.changes.files.values().map(|f| &f.rec)),
            ),
        ] {
            let (h, _, _) = read_back(&files, layout == "changes", &mut self.cache)?;
            layout_read_back.insert(layout, h == self.content);
        }
        let mut cust_content = ContentHash::EMPTY;
        let mut cust_rows = 0;
        for &i in &self.state.order {
            let iu = i as usize;
            if !ctx.l.customer.is_null(iu) && ctx.l.customer.value(iu) == ctx.customer {
                cust_content.add(&self.row_hash[iu]);
                cust_rows += 1;
            }
        }
        self.tags.push(Tag {
            week: c.week,
            version_index: ci,
            present: self.state.present.clone(),
            returned: self.state.returned.clone(),
            content: self.content,
            customer_content: cust_content,
            customer_rows: cust_rows,
            rows: self.state.rows as u64,
            layout_read_back,
            tablepin: id,
        });
        Ok(())
    }

    /// Each layout's bytes stored after every commit, running totals.
    fn series(&self) -> Value {
        let running = |added: &[u64]| -> Vec<u64> {
            let mut acc = 0;
            added
                .iter()
                .map(|a| {
                    acc += a;
                    acc
                })
                .collect()
        };
        json!({
            "copy": self.copy_sizes, "month": running(&self.month.history.added),
            "week": running(&self.week.history.added), "changes": running(&self.changes.history.added),
            "tablepin": running(&self.tp_added), "tablepin_pyarrow": running(&self.tp_py_added),
        })
    }

    /// Bytes added by each kind of commit, in every layout.
    fn added_by_kind(&self, commits: &[Commit]) -> Value {
        let mut by_kind: BTreeMap<Kind, BTreeMap<&str, u64>> = BTreeMap::new();
        for (ci, c) in commits.iter().enumerate() {
            let e = by_kind.entry(c.kind).or_default();
            *e.entry("copy").or_default() +=
                self.copy_sizes[ci] - if ci > 0 { self.copy_sizes[ci - 1] } else { 0 };
            *e.entry("month").or_default() += self.month.history.added[ci];
            *e.entry("week").or_default() += self.week.history.added[ci];
            *e.entry("changes").or_default() += self.changes.history.added[ci];
            *e.entry("tablepin").or_default() += self.tp_added[ci];
            *e.entry("tablepin_pyarrow").or_default() += self.tp_py_added[ci];
        }
        by_kind
            .iter()
            .map(|(k, m)| (k.name().to_string(), json!(m)))
            .collect::<serde_json::Map<_, _>>()
            .into()
    }
}

/// The checks that fired, by kind of commit.
fn checks_json(m: &BTreeMap<Kind, [u64; 5]>) -> Value {
    let mut o = serde_json::Map::new();
    for (k, c) in m {
        o.insert(
            serde_json::to_value(k)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            json!({"commits": c[0], "rows": c[1], "schema": c[2], "files": c[3], "content": c[4]}),
        );
    }
    Value::Object(o)
}

/// Runs the experiment and writes its outputs; returns `results.json`.
pub async fn run(opts: &LabOptions) -> Result<Value, LabError> {
    let start = Instant::now();
    // Refused before any work: --dvc without the command.
    let dvc_command = (opts.dvc)
        .then(|| Dvc::find(opts.env.path.as_deref()))
        .transpose()?;
    let path = data::locate(opts.data.as_deref(), &opts.env);
    let (l, d, commits) = load(opts, &path, &start)?;
    std::fs::create_dir_all(&opts.out).map_err(|e| LabError::output(&opts.out, e))?;
    let work = tempfile::Builder::new()
        .prefix(".lab-repos-")
        .tempdir_in(&opts.out)
        .map_err(|e| LabError::output(&opts.out, e))?;
    let repos = Repos::init(work.path()).await?;
    let master = Master::new(&l);
    let props = WriteSettings::pyarrow_like().properties()?;
    let ctx = Ctx {
        l: &l,
        d: &d,
        commits: &commits,
        master: &master,
        props: &props,
        customer: opts.customer as f64,
        v: opts.verbose,
        start: &start,
    };
    // The reference layouts' files kept on disk, for their retention
    // measured after a real deletion (see `on_disk`).
    let disk = Disks::new(work.path())?;
    let dvc = match dvc_command {
        Some(command) => {
            ctx.log("versioning the month files with dvc too");
            Some(Dvc::start(command, &work.path().join("dvc"))?)
        }
        None => None,
    };
    let mut rp = Replayed::new(&ctx, dvc)?;
    for (ci, c) in commits.iter().enumerate() {
        rp.commit(&ctx, &repos, &disk, ci, c).await?;
    }
    ctx.log(&format!(
        "commits done (layouts {:.1}s, tablepin {:.1}s)",
        rp.layout_seconds, rp.tp_seconds
    ));
    let dvc_check = (rp.dvc.take())
        .map(|d| dvc_figures(&d, &rp.month.history))
        .transpose()?;
    let figures = measure(&ctx, &repos, &disk, &mut rp, opts, work.path()).await?;
    let seconds = start.elapsed().as_secs_f64();
    let results = results_json(&ctx, &rp, &figures, opts, &path, dvc_check, seconds);
    drop(repos);
    keep_repository(
        &work.path().join("tablepin"),
        &opts.out.join(KEPT_REPOSITORY),
    )?;
    write_outputs(&opts.out, &results, &figures.page)?;
    drop(work);
    Ok(results)
}

/// Loads the data (the whole file, or a sample) and derives the commits.
fn load(
    opts: &LabOptions,
    path: &Path,
    start: &Instant,
) -> Result<(Lines, Derived, Vec<Commit>), LabError> {
    let cache = data::cache_dir(&opts.env);
    log(opts.verbose, start, &format!("loading {}", path.display()));
    let l = if opts.sample {
        data::load_sample(path, Some(&cache))?
    } else {
        data::load(path, Some(&cache))?
    };
    let d = experiment::derive(&l);
    let commits = experiment::commits(&l, &d);
    log(
        opts.verbose,
        start,
        &format!(
            "{} lines, {} returns, {} commits",
            l.len(),
            d.returns.len(),
            commits.len()
        ),
    );
    Ok((l, d, commits))
}

/// Everything measured after the commits.
struct Figures {
    last: LastRead,
    read_back_of: BTreeMap<&'static str, (u64, u64)>,
    tag_rows: Vec<Value>,
    as_of: Vec<Value>,
    erased: Erased,
    retention: serde_json::Map<String, Value>,
    purge: serde_json::Map<String, Value>,
    tp: TablepinRetention,
    page: String,
    playground_check: crate::playground::PresetCheck,
    /// Bytes of the repository with pyarrow's settings.
    py_stored: u64,
    /// Bytes and blobs of tablepin's repository after the erasure.
    after_erasure: (u64, u64),
}

/// The phases after the commits, in order: the last version and the tags
/// read back, the tags diffed, retention on every layout, tablepin's
/// erasure and retention, and the playground.
async fn measure(
    ctx: &Ctx<'_>,
    repos: &Repos,
    disk: &Disks,
    rp: &mut Replayed,
    opts: &LabOptions,
    work: &Path,
) -> Result<Figures, LabError> {
    let head = repos.main.resolve("main").await?;
    let last = read_last(repos, &head, rp).await?;
    ctx.log("last version read back");
    let (read_back_of, tag_rows) = read_back_tags(repos, &rp.tags, &last.ok).await?;
    ctx.log("tags read back");
    let as_of = diff_tags(ctx, repos, &head, rp).await?;
    ctx.log("tags diffed against the last version");
    let erased = Erased::new(ctx.l, &rp.erased_lines);
    let rules = retention_rules(ctx.commits.len(), &rp.tags);
    let (mut retention, purge) = layout_retention(ctx, rp, &erased, &rules)?;
    retention.insert("copy".into(), copy_retention(rp, &erased, &rules));
    let tag_indices: Vec<usize> = rp.tags.iter().map(|t| t.version_index).collect();
    disk.measure(
        [&rp.month.history, &rp.week.history, &rp.changes.history],
        &rules,
        &tag_indices,
        &mut retention,
    )?;
    ctx.log("layout retention done");
    let tp = tablepin_retention(ctx, repos, rp, opts, work).await?;
    retention.insert("tablepin".into(), Value::Object(tp.retention.clone()));
    ctx.log("tablepin retention done");
    let (page, playground_check) = playground(
        ctx.commits.len(),
        repos,
        rp,
        &erased,
        &tp.holding,
        &rules,
        &retention,
    )
    .await?;
    ctx.log("playground written and checked");
    let (py_stored, _) = repos.py.gc().stored().await?;
    let after_erasure = repos.main.gc().stored().await?;
    Ok(Figures {
        last,
        read_back_of,
        tag_rows,
        as_of,
        erased,
        retention,
        purge,
        tp,
        page,
        playground_check,
        py_stored,
        after_erasure,
    })
}

/// The last version read back from every layout.
struct LastRead {
    /// Month, week, changes and tablepin read back exactly.
    ok: [bool; 4],
    month_bytes: u64,
    month_rows: u64,
    /// Rows read: month, week, changes.
    rows_read: [u64; 3],
    /// tablepin's read, its rows dropped once checked.
    tablepin: tablepin::TableRead,
}

async fn read_last(
    repos: &Repos,
    head: &VersionId,
    rp: &mut Replayed,
) -> Result<LastRead, LabError> {
    let month_last = files_of(rp.month.current.values());
    let week_last = files_of(rp.week.current.values());
    let changes_last = files_of(rp.changes.files.values().map(|f| &f.rec));
    let (mc, month_rows, mread) = read_back(&month_last, false, &mut rp.cache)?;
    let (wc, _, wread) = read_back(&week_last, false, &mut rp.cache)?;
    let (cc, _, cread) = read_back(&changes_last, true, &mut rp.cache)?;
    let mut tp_head = repos.main.snapshot(head).await?.read("sales", None).await?;
    let tp_head_content = tablepin_rowhash::content_hash(&tp_head.batches)?;
    // The rows are checked; keep only what the read touched.
    tp_head.batches = Vec::new();
    let content = rp.content;
    Ok(LastRead {
        ok: [
            mc == content,
            wc == content,
            cc == content,
            tp_head_content == content,
        ],
        month_bytes: rp.month.current.values().map(|r| r.size).sum(),
        month_rows,
        rows_read: [mread, wread, cread],
        tablepin: tp_head,
    })
}

/// Every tag read back from every layout (the reference layouts' when
/// the tag was made, tablepin's now): how many read back exactly, by
/// layout, and a row per tag. Any inexact read is an error.
async fn read_back_tags(
    repos: &Repos,
    tags: &[Tag],
    last_ok: &[bool; 4],
) -> Result<(BTreeMap<&'static str, (u64, u64)>, Vec<Value>), LabError> {
    let mut read_back_of: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    let mut tag_rows = Vec::new();
    for t in tags {
        let mut row =
            json!({"week": t.week, "rows": t.rows, "content_hash": t.content.to_string()});
        for (&layout, &exact) in &t.layout_read_back {
            let e = read_back_of.entry(layout).or_default();
            e.1 += 1;
            e.0 += u64::from(exact);
            row[layout] = json!(exact);
            if layout == "month" {
                let c = read_back_of.entry("copy").or_default();
                c.1 += 1;
                c.0 += u64::from(exact);
                row["copy"] = json!(exact);
            }
        }
        let tr = repos
            .main
            .snapshot(t.tablepin)
            .await?
            .read("sales", None)
            .await?;
        let th = tablepin_rowhash::content_hash(&tr.batches)?;
        let ok =
            th == t.content && tr.stats.rows == t.rows && tr.snapshot.content_hash == t.content;
        let e = read_back_of.entry("tablepin").or_default();
        e.1 += 1;
        if ok {
            e.0 += 1;
        }
        row["tablepin"] = json!(ok);
        tag_rows.push(row);
    }
    exact_read_backs(&read_back_of, last_ok)?;
    Ok((read_back_of, tag_rows))
}

/// As of: today's lines dated before the end of each tag's week; and
/// tablepin's own diff of each tag against the last version, which must
/// find the same changed and removed lines.
async fn diff_tags(
    ctx: &Ctx<'_>,
    repos: &Repos,
    head: &VersionId,
    rp: &Replayed,
) -> Result<Vec<Value>, LabError> {
    let mut as_of = as_of(ctx.l, ctx.d, &rp.state, &rp.tags);
    for (row, t) in as_of.iter_mut().zip(&rp.tags) {
        let diff = repos.main.diff(&t.tablepin, head, Some("sales")).await?;
        if let Some(td) = diff.tables.first() {
            let by_column = &td.counts.modified_by_column;
            let agrees = json!(td.counts.modified) == row["changed"]
                && json!(td.counts.removed) == row["only_in_tag"]
                && by_column.keys().all(|c| c == "returned");
            if !agrees {
                return Err(LabError::Other(format!(
                    "tablepin's diff of week-{} against the last version ({} modified, {} removed, columns {:?}) disagrees with the reference ({} changed, {} only in the tag)",
                    t.week, td.counts.modified, td.counts.removed, by_column.keys().collect::<Vec<_>>(), row["changed"], row["only_in_tag"]
                )));
            }
            row["tablepin_diff"] = json!({
                "agrees_with_reference": agrees,
                "added": td.counts.added, "removed": td.counts.removed,
                "modified": td.counts.modified, "modified_by_column": td.counts.modified_by_column,
                "files_read": td.stats.files_read, "files_shared": td.stats.files_shared,
                "rows_read": td.stats.rows_read,
            });
        }
    }
    Ok(as_of)
}

/// The returns' ages, and how many month files a week rewrites.
fn returns_json(ctx: &Ctx<'_>, rp: &Replayed) -> (Value, Value) {
    let (l, d) = (ctx.l, ctx.d);
    let mut ages: Vec<f64> = d
        .returns
        .iter()
        .map(|r| (r.time - l.time[r.sale as usize]) as f64 / 86_400.0)
        .collect();
    let n_ret = ages.len();
    let over = |days: f64| ages.iter().filter(|a| **a > days).count();
    let (o7, o28, o90) = (over(7.0), over(28.0), over(90.0));
    let max_age = ages.iter().copied().fold(0.0, f64::max);
    let earlier_month = d
        .returns
        .iter()
        .filter(|r| month_of(l.time[r.sale as usize]) < month_of(r.time))
        .count();
    let med_age = median(&mut ages);
    let mut per_week: Vec<f64> = rp.week_rewrites.values().map(|s| s.len() as f64).collect();
    let weeks_n = per_week.len();
    let more_than_one = per_week.iter().filter(|x| **x > 1.0).count();
    let max_rewrites = per_week.iter().copied().fold(0.0, f64::max);
    let med_rewrites = median(&mut per_week);
    (
        json!({
            "median_days": med_age, "max_days": max_age, "over_7": share(o7, n_ret), "over_28": share(o28, n_ret),
            "over_90": share(o90, n_ret), "earlier_month_file": share(earlier_month, n_ret),
        }),
        json!({"median": med_rewrites, "max": max_rewrites, "share_over_one": share(more_than_one, weeks_n), "weeks": weeks_n}),
    )
}

/// The erased customer's lines, and the month and week files they fall in.
struct Erased {
    lines: HashSet<u32>,
    months: BTreeSet<i64>,
    weeks: BTreeSet<i64>,
}

impl Erased {
    fn new(l: &Lines, erased: &[u32]) -> Self {
        Self {
            lines: erased.iter().copied().collect(),
            months: erased
                .iter()
                .map(|&i| month_of(l.time[i as usize]))
                .collect(),
            weeks: erased
                .iter()
                .map(|&i| week_of(l.time[i as usize]))
                .collect(),
        }
    }

    /// A layout's stored file holds a line of the erased customer.
    fn holds(&self, id: &ObjectId, hist: &crate::layouts::History) -> bool {
        hist.stored
            .get(id)
            .is_some_and(|s| s.1.iter().any(|i| self.lines.contains(i)))
    }
}

/// The retention rules measured: every version, the last four, the last
/// four and the tags; each as the versions it keeps.
fn retention_rules(n_versions: usize, tags: &[Tag]) -> [(&'static str, Vec<usize>); 3] {
    [
        ("all", (0..n_versions).collect()),
        ("last4", (n_versions - 4..n_versions).collect()),
        ("last4_tags", {
            let mut k: BTreeSet<usize> = (n_versions - 4..n_versions).collect();
            k.extend(tags.iter().map(|t| t.version_index));
            k.into_iter().collect()
        }),
    ]
}

type Rules = [(&'static str, Vec<usize>); 3];

/// Figures by layout (or by rule), as `results.json` holds them.
type ByName = serde_json::Map<String, Value>;

/// Retention on the reference layouts: per layout and rule, the bytes
/// kept, the tags still readable and the files holding the erased
/// customer; and the purge that rewrites those files without the
/// customer's lines (keeping the last 4 and the tags).
fn layout_retention(
    ctx: &Ctx<'_>,
    rp: &Replayed,
    erased: &Erased,
    rules: &Rules,
) -> Result<(ByName, ByName), LabError> {
    let mut retention = serde_json::Map::new();
    let mut purge = serde_json::Map::new();
    for (layout, hist) in [
        ("month", &rp.month.history),
        ("week", &rp.week.history),
        ("changes", &rp.changes.history),
    ] {
        let mut per_rule = serde_json::Map::new();
        for (rule, kept_versions) in rules {
            let kept: BTreeSet<ObjectId> = kept_versions
                .iter()
                .flat_map(|i| hist.versions[*i].iter().copied())
                .collect();
            let size = |id: &ObjectId| hist.stored.get(id).map_or(0, |s| s.0);
            let bytes: u64 = kept.iter().map(size).sum();
            let mut readable = 0;
            let mut shares = Vec::new();
            for t in &rp.tags {
                let files = &hist.versions[t.version_index];
                let total: u64 = files.iter().map(size).sum();
                let kept_b: u64 = files.iter().filter(|id| kept.contains(id)).map(size).sum();
                if files.iter().all(|f| kept.contains(f)) {
                    readable += 1;
                }
                shares.push(share(kept_b as usize, total as usize));
            }
            let holding: Vec<ObjectId> = kept
                .iter()
                .filter(|id| erased.holds(id, hist))
                .copied()
                .collect();
            per_rule.insert(
                rule.to_string(),
                json!({"bytes": bytes, "tags_readable": readable, "tag_bytes_kept": shares, "files_holding_erased": holding.len()}),
            );
            if *rule == "last4_tags" {
                let written = purged_bytes(ctx, rp, erased, hist, &holding)?;
                purge.insert(
                    layout.to_string(),
                    json!({"files_rewritten": holding.len(), "bytes_written": written}),
                );
            }
        }
        retention.insert(layout.to_string(), Value::Object(per_rule));
    }
    Ok((retention, purge))
}

/// The bytes a purge writes: each file of `holding` encoded again without
/// the erased customer's lines.
fn purged_bytes(
    ctx: &Ctx<'_>,
    rp: &Replayed,
    erased: &Erased,
    hist: &crate::layouts::History,
    holding: &[ObjectId],
) -> Result<u64, LabError> {
    let mut written = 0u64;
    for id in holding {
        if let Some((_, lines)) = hist.stored.get(id) {
            let mut keep: Vec<u32> = lines
                .iter()
                .copied()
                .filter(|i| !erased.lines.contains(i))
                .collect();
            if rp.state.sorted {
                experiment::sort_lines(ctx.l, &mut keep);
            }
            if !keep.is_empty() {
                written += crate::layouts::encode(
                    &ctx.master.current(&keep, &rp.state)?,
                    ctx.props,
                )?
                .len() as u64;
            }
        }
    }
    Ok(written)
}

/// Retention of the copy layout: every version a whole copy of its month
/// files.
fn copy_retention(rp: &Replayed, erased: &Erased, rules: &Rules) -> Value {
    let month = &rp.month.history;
    let mut per_rule = serde_json::Map::new();
    for (rule, kept_versions) in rules {
        let bytes: u64 = kept_versions
            .iter()
            .map(|i| {
                month.versions[*i]
                    .iter()
                    .map(|id| month.stored.get(id).map_or(0, |s| s.0))
                    .sum::<u64>()
            })
            .sum();
        let kept: BTreeSet<usize> = kept_versions.iter().copied().collect();
        let readable = rp
            .tags
            .iter()
            .filter(|t| kept.contains(&t.version_index))
            .count();
        // Each kept copy holds its own copies of the month files that
        // hold the customer.
        let holding: usize = kept_versions
            .iter()
            .map(|i| {
                month.versions[*i]
                    .iter()
                    .filter(|id| erased.holds(id, month))
                    .count()
            })
            .sum();
        per_rule.insert(
            rule.to_string(),
            json!({"bytes": bytes, "tags_readable": readable, "files_holding_erased": holding}),
        );
    }
    Value::Object(per_rule)
}

/// tablepin's erasure of the customer from every kept version, then each
/// retention rule run for real (gc) on a copy of the repository.
struct TablepinRetention {
    retention: serde_json::Map<String, Value>,
    /// The blobs still holding the customer after the erasure (none).
    holding: BTreeSet<ObjectId>,
    stored: (u64, u64),
    files_stored: u64,
    before_holding: usize,
    rows_removed: u64,
    versions_replaced: usize,
    report: tablepin::EraseReport,
}

async fn tablepin_retention(
    ctx: &Ctx<'_>,
    repos: &Repos,
    rp: &Replayed,
    opts: &LabOptions,
    work: &Path,
) -> Result<TablepinRetention, LabError> {
    let repo = &repos.main;
    let stored = repo.gc().stored().await?;
    let files_stored = count_data_blobs(repo).await?;
    let before_holding = holding_customer(repo, ctx.customer).await?.len();
    ctx.log("holders before erasure counted");
    let erase = repo
        .erasure()
        .plan(&tablepin::EraseOptions {
            table: "sales".into(),
            predicate: format!("Customer_ID = {}", opts.customer),
            reason: "right to erasure request (lab)".into(),
        })
        .await?;
    ctx.log("erasure planned");
    let (rows_removed, versions_replaced) = (erase.rows_removed, erase.versions.len());
    let report = repo.erasure().apply(erase).await?;
    ctx.log(&format!("erased in {:.2}s", report.seconds));
    let mut retention = serde_json::Map::new();
    let mut holding = BTreeSet::new();
    for (rule, keep_last, keep_tags) in [
        ("all", None, true),
        ("last4", Some(4), false),
        ("last4_tags", Some(4), true),
    ] {
        let dir = work.join(format!("rule-{rule}"));
        copy_dir(&repos.path, &dir)?;
        let policy = GcPolicy {
            keep_last,
            keep_tags,
            grace_ms: 0,
            sole_writer: true,
            ..Default::default()
        };
        let (figures, holders) = gc_rule(ctx, rp, &dir, rule, &policy).await?;
        if rule == "all" {
            holding = holders;
        }
        retention.insert(rule.to_string(), figures);
    }
    Ok(TablepinRetention {
        retention,
        holding,
        stored,
        files_stored,
        before_holding,
        rows_removed,
        versions_replaced,
        report,
    })
}

/// One retention rule on a copy of the erased repository at `dir`: its gc,
/// a verify, the bytes kept, the tags still readable (with the customer's
/// rows gone), and the blobs still holding the customer.
async fn gc_rule(
    ctx: &Ctx<'_>,
    rp: &Replayed,
    dir: &Path,
    rule: &str,
    policy: &GcPolicy,
) -> Result<(Value, BTreeSet<ObjectId>), LabError> {
    let r = Repo::open(&dir.to_string_lossy()).await?;
    let t = Instant::now();
    let plan = r.gc().plan(policy).await?;
    let plan_s = t.elapsed().as_secs_f64();
    let report = r.gc().apply(plan).await?;
    let seconds = t.elapsed().as_secs_f64();
    ctx.log(&format!("{rule}: gc done"));
    let verify = r.verify(&tablepin::NoProgress).await?;
    ctx.log(&format!("{rule}: verify done"));
    let (bytes, blobs) = r.gc().stored().await?;
    // A tag is readable when its snapshot is there with the expected
    // rows and content hash: `verify` above read every blob and
    // recomputed every snapshot's content hash from its rows.
    let mut readable = 0;
    for t in &rp.tags {
        let mut want = t.content;
        want.unmerge(&t.customer_content);
        let name = format!("week-{}", t.week);
        let Ok(id) = r.resolve(&name).await else {
            continue;
        };
        let Ok(at) = r.snapshot(id).await else {
            continue;
        };
        let Ok(s) = at.table("sales").await else {
            continue;
        };
        if verify.problems.is_empty()
            && s.content_hash == want
            && s.rows == t.rows - t.customer_rows
        {
            readable += 1;
        }
    }
    ctx.log(&format!("{rule}: tags checked"));
    let holders = holding_customer(&r, ctx.customer).await?;
    ctx.log(&format!("{rule}: holders counted"));
    Ok((
        json!({
            "bytes": bytes, "blobs": blobs, "tags_readable": readable, "blobs_holding_erased": holders.len(),
            "versions_expired": report.plan.versions_expired.len(), "gc_plan_seconds": plan_s, "gc_seconds": seconds,
            "verify_ok": verify.problems.is_empty(),
        }),
        holders,
    ))
}

/// The playground: every layout's files and versions, its arithmetic
/// checked against the retention just measured before it is written.
async fn playground(
    n_versions: usize,
    repos: &Repos,
    rp: &Replayed,
    erased: &Erased,
    tp_holding: &BTreeSet<ObjectId>,
    rules: &Rules,
    retention: &serde_json::Map<String, Value>,
) -> Result<(String, crate::playground::PresetCheck), LabError> {
    let tag_versions: Vec<(String, usize)> = rp
        .tags
        .iter()
        .map(|t| (format!("week-{}", t.week), t.version_index))
        .collect();
    let mut layouts = Vec::new();
    for (name, hist) in [
        ("month", &rp.month.history),
        ("week", &rp.week.history),
        ("changes", &rp.changes.history),
    ] {
        layouts.push(Layout::new(
            name,
            &hist.versions,
            |id| hist.stored.get(id).map(|s| s.0),
            |id| erased.holds(id, hist),
        )?);
    }
    layouts.push(tablepin_layout(&repos.main, &tag_versions, tp_holding).await?);
    let playground = Playground {
        versions: n_versions,
        tags: tag_versions,
        layouts,
    };
    let page = playground.html();
    let check = check_presets(&playground, rules, retention)?;
    Ok((page, check))
}

/// `results.json`: every figure of the run.
fn results_json(
    ctx: &Ctx<'_>,
    rp: &Replayed,
    f: &Figures,
    opts: &LabOptions,
    path: &Path,
    dvc_check: Option<Value>,
    seconds: f64,
) -> Value {
    let (d, tags) = (ctx.d, &rp.tags);
    let (return_ages, rewrites) = returns_json(ctx, rp);
    let read_back = |k: &str| f.read_back_of.get(k).map_or(0, |x| x.0);
    let mut results = json!({
        "data": path.display().to_string(),
        "sample": opts.sample,
        "sale_lines": d.sales.len(),
        "cancellations": d.cancellations,
        "returns_matched": d.returns.len(),
        "returns_changed_nothing": d.unmatched,
        "commits": ctx.commits.len(),
        "weeks": rp.week_rewrites.len(),
        "tags": tags.iter().map(|t| json!({"name": format!("week-{}", t.week), "week": t.week, "version": n_index(t.version_index), "rows": t.rows})).collect::<Vec<_>>(),
        "last_version": {"rows": rp.state.rows, "month_bytes": f.last.month_bytes, "read_back_exact": f.last.ok},
        "added_by_kind": rp.added_by_kind(ctx.commits),
        "month_rows": f.last.month_rows,
        "late_returns": {"lines_changed": rp.late.0, "rows": rp.late.1},
        "erasure": {
            "customer": opts.customer, "lines": rp.erased_lines.len(), "month_files": f.erased.months.len(),
            "week_files": f.erased.weeks.len(),
            "tablepin": {
                "bytes_written": f.tp.report.audit.bytes_written, "seconds": f.tp.report.seconds, "rows_removed": f.tp.rows_removed,
                "versions_replaced": f.tp.versions_replaced, "blobs_deleted": f.tp.report.audit.blobs_deleted,
                "blobs_holding_before": f.tp.before_holding,
            },
        },
        "return_ages": return_ages,
        "month_files_rewritten_per_week": rewrites,
        "as_of": f.as_of,
        "tags_read_back": read_back("month") + read_back("week") + read_back("changes"),
        "tags_read_back_of": f.read_back_of.iter().map(|(k, (ok, of))| (k.to_string(), json!({"exact": ok, "of": of}))).collect::<serde_json::Map<_, _>>(),
        "tag_read_back": f.tag_rows,
        "checks": {"reference": checks_json(&rp.ref_checks), "tablepin": checks_json(&rp.tp_checks)},
        "retention": f.retention,
        "purge": f.purge,
        "per_commit": rp.per_commit,
        "series": rp.series(),
        "timing": {"layouts_seconds": rp.layout_seconds, "tablepin_commit_seconds": rp.tp_seconds},
        "seconds": seconds,
        "peak_rss_bytes": crate::peak_rss_bytes(),
        "repository": KEPT_REPOSITORY,
        "dvc": dvc_check,
        "playground": {"file": PLAYGROUND, "bytes": f.page.len(), "presets_checked": f.playground_check.agreed, "presets_independent": f.playground_check.independent},
    });
    layout_figures(&mut results, rp, f);
    results
}

/// The figures that set the layouts side by side: bytes and files stored,
/// files and rows read for the last version.
fn layout_figures(results: &mut Value, rp: &Replayed, f: &Figures) {
    let month_last_bytes = f.last.month_bytes as f64;
    let (tp_stored, tp_blobs_stored) = f.tp.stored;
    let [mread, wread, cread] = f.last.rows_read;
    let tp_head = &f.last.tablepin;
    results["stored"] = json!({
        "copy": rp.copy_total, "copy_hashed": rp.copy_hashed, "month": rp.month.history.stored_bytes,
        "week": rp.week.history.stored_bytes, "changes": rp.changes.history.stored_bytes,
        "tablepin": tp_stored, "tablepin_pyarrow": f.py_stored, "tablepin_after_erasure": f.after_erasure.0,
    });
    results["stored_over_last_version"] = json!({
        "tablepin": tp_stored as f64 / month_last_bytes,
        "tablepin_pyarrow": f.py_stored as f64 / month_last_bytes,
        "changes": rp.changes.history.stored_bytes as f64 / month_last_bytes,
    });
    results["files_stored"] = json!({
        "month": rp.month.history.stored.len(), "week": rp.week.history.stored.len(),
        "changes": rp.changes.history.stored.len(), "tablepin": f.tp.files_stored,
        "tablepin_blobs": tp_blobs_stored, "tablepin_blobs_after_erasure": f.after_erasure.1,
    });
    results["last_version_files"] = json!({
        "month": rp.month.current.len(), "week": rp.week.current.len(), "changes": rp.changes.files.len(),
        "tablepin": tp_head.snapshot.files.len(),
    });
    results["last_version_rows_read"] = json!({"month": mread, "week": wread, "changes": cread, "tablepin": tp_head.stats.rows_in_files, "tablepin_returned": tp_head.stats.rows});
    results["changes_rows_read"] = json!(cread);
}

/// Where in the output folder the lab leaves its tablepin repository (110
/// versions, the tags, the customer erased), for `log`, `show`, `diff`,
/// `sql` and `export`.
pub const KEPT_REPOSITORY: &str = "repo";

/// Moves the lab's repository to `to`, replacing the one an earlier run
/// left there; anything else at `to` is refused rather than deleted.
fn keep_repository(from: &Path, to: &Path) -> Result<(), LabError> {
    let fail = |e: std::io::Error| LabError::output(to, e);
    if to.exists() {
        if !to.join("meta").join("config.json").is_file() {
            return Err(LabError::Output {
                path: to.display().to_string(),
                message: "it exists and is not a tablepin repository; move it away, or give another --out".into(),
            });
        }
        std::fs::remove_dir_all(to).map_err(fail)?;
    }
    std::fs::rename(from, to).map_err(fail)
}

/// How [`tablepin_only`] commits each version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replay {
    /// As a user would: the week's new and changed lines as an upsert, a
    /// deletion as a delete, the whole table where it is written again.
    AsUsers,
    /// Every version as an overwrite with the whole table, as a job that
    /// "just writes the table" does.
    Overwrites,
}

/// Commits the experiment's 110 versions (with its tags) to a new
/// repository at `dir`, through tablepin alone.
pub async fn tablepin_only(data_path: &Path, dir: &Path, replay: Replay) -> Result<Repo, LabError> {
    let l = data::load(data_path, None)?;
    let d = experiment::derive(&l);
    let commits = experiment::commits(&l, &d);
    let master = Master::new(&l);
    let mut state = State::new(l.len());
    let repo = Repo::init(&dir.to_string_lossy(), WriteSettings::default()).await?;
    for (ci, c) in commits.iter().enumerate() {
        let delta = state.apply(&l, &d, c, 17388.0);
        let (mode, input) = match replay {
            Replay::AsUsers => tablepin_input(&l, &master, &state, c, &delta)?,
            Replay::Overwrites => (Mode::Overwrite, master.current(&state.order, &state)?),
        };
        let copts = commit_options(ci, c, mode);
        repo.commit("sales", input.schema(), vec![input], &copts)
            .await?;
        let last_of_week = commits.get(ci + 1).is_none_or(|n| n.week != c.week);
        if last_of_week && TAG_WEEKS.contains(&c.week) {
            repo.refs()
                .create(
                    RefKind::Tag,
                    &format!("week-{}", c.week),
                    "main",
                    "training set",
                )
                .await?;
        }
    }
    Ok(repo)
}

/// What real DVC stored for the month layout, beside the layout: the
/// same files, to the byte, or an error.
fn dvc_figures(dvc: &Dvc, month: &crate::layouts::History) -> Result<Value, LabError> {
    let remote = dvc.remote()?;
    let (files, bytes) = (month.stored.len() as u64, month.stored_bytes);
    if (remote.files, remote.bytes) != (files, bytes) {
        return Err(LabError::Other(format!(
            "dvc's remote holds {} files of {} bytes, the month layout {files} files of {bytes} bytes",
            remote.files, remote.bytes
        )));
    }
    if let Some(differs) = dvc.file_for_file()? {
        return Err(LabError::Other(format!(
            "dvc's remote is not the month layout file for file: {differs}"
        )));
    }
    Ok(json!({
        "versions": dvc.versions, "remote_files": remote.files, "remote_bytes": remote.bytes,
        "listings": remote.listings, "listing_bytes": remote.listing_bytes,
        "month_files": files, "month_bytes": bytes, "matches_month": true, "dvc_seconds": dvc.seconds,
    }))
}

/// The tablepin layout of the playground: main's versions oldest first
/// (after the erasure, which rewrote them), each as the blobs it needs,
/// which is what `gc` keeps for it.
async fn tablepin_layout(
    repo: &Repo,
    tags: &[(String, usize)],
    holding: &BTreeSet<ObjectId>,
) -> Result<Layout, LabError> {
    let sizes: HashMap<ObjectId, u64> = repo
        .store()
        .list_blobs()
        .await
        .map_err(tablepin::Error::from)?
        .into_iter()
        .map(|b| (b.id, b.size))
        .collect();
    let mut chain = repo.log("main", &Default::default()).await?;
    chain.reverse();
    let mut versions = Vec::with_capacity(chain.len());
    for e in &chain {
        versions.push(repo.gc().blobs_of(&e.id).await?.into_iter().collect());
    }
    // The tags name these versions by number: each must be where the
    // tag's rewritten version stands.
    for (name, n) in tags {
        let id = repo.resolve(name).await?;
        if chain.get(*n).map(|e| e.id) != Some(id) {
            return Err(LabError::Other(format!(
                "playground: tag {name} names {}, not main's version {n}",
                id.short(12)
            )));
        }
    }
    Layout::new(
        "tablepin",
        &versions,
        |id| sizes.get(id).copied(),
        |id| holding.contains(id),
    )
}

fn n_index(i: usize) -> usize {
    i + 1
}

/// What tablepin is asked to commit for one step, as a user would.
fn tablepin_input(
    l: &Lines,
    m: &Master,
    s: &State,
    c: &Commit,
    d: &experiment::Delta,
) -> Result<(Mode, RecordBatch), LabError> {
    Ok(match c.kind {
        Kind::First | Kind::Weekly | Kind::LateReturns => {
            let mut lines = d.added.clone();
            lines.extend(&d.changed);
            (Mode::Upsert, m.current(&lines, s)?)
        }
        Kind::LinesOnly => (Mode::Append, m.current(&d.added, s)?),
        Kind::WrittenAgain => (Mode::Overwrite, m.current(&s.order, s)?),
        Kind::AnotherOrder => {
            let mut lines = s.order.clone();
            experiment::sort_lines(l, &mut lines);
            (Mode::Overwrite, m.current(&lines, s)?)
        }
        Kind::Erasure => (Mode::Delete, m.current(&d.erased, s)?.project(&[0])?),
    })
}

// Indexes several per-line arrays at once; a range loop reads clearest.
#[allow(clippy::needless_range_loop)]
fn as_of(l: &Lines, d: &Derived, today: &State, tags: &[Tag]) -> Vec<Value> {
    let mut out = Vec::new();
    for t in tags {
        let end = week_end(t.week);
        // Today's returns, counted only when dated before the week's end.
        let mut filtered = vec![0i64; l.len()];
        for r in &d.returns {
            if r.time < end {
                filtered[r.sale as usize] += r.units;
            }
        }
        let (mut changed, mut only_tag, mut only_today, mut tag_lines) = (0u64, 0u64, 0u64, 0u64);
        let (mut units_tag, mut units_today, mut changed_f, mut units_f) = (0i64, 0i64, 0u64, 0i64);
        for i in 0..l.len() {
            let in_tag = t.present[i];
            let in_today = today.present[i] && l.time[i] < end;
            if in_tag {
                tag_lines += 1;
                units_tag += t.returned[i];
            }
            if in_today {
                units_today += today.returned[i];
                units_f += filtered[i];
            }
            match (in_tag, in_today) {
                (true, true) => {
                    if today.returned[i] != t.returned[i] {
                        changed += 1;
                    }
                    if filtered[i] != t.returned[i] {
                        changed_f += 1;
                    }
                }
                (true, false) => only_tag += 1,
                (false, true) => only_today += 1,
                _ => {}
            }
        }
        out.push(json!({
            "week": t.week, "tag_lines": tag_lines, "changed": changed, "only_in_tag": only_tag,
            "only_in_today": only_today, "units_returned_tag": units_tag, "units_returned_today": units_today,
            "filtered_by_date": {"changed": changed_f, "only_in_tag": only_tag, "units_returned_today": units_f},
        }));
    }
    out
}

/// The repository's stored Parquet blobs (data files), each read and
/// verified.
async fn data_blobs(repo: &Repo) -> Result<Vec<(ObjectId, Bytes)>, LabError> {
    let ids: Vec<ObjectId> = repo
        .store()
        .list_blobs()
        .await
        .map_err(tablepin::Error::from)?
        .into_iter()
        .map(|b| b.id)
        .collect();
    let blobs = repo
        .store()
        .get_blobs(&ids)
        .await
        .map_err(tablepin::Error::from)?;
    Ok(ids
        .into_iter()
        .zip(blobs)
        .filter(|(_, b)| b.len() >= 4 && &b[..4] == b"PAR1")
        .collect())
}

/// Stored data blobs of a repository that hold a row of the customer,
/// found by reading every Parquet blob (the lab's own check, independent of
/// the engine's fingerprints).
async fn holding_customer(repo: &Repo, customer: f64) -> Result<BTreeSet<ObjectId>, LabError> {
    let mut out = BTreeSet::new();
    for (id, bytes) in data_blobs(repo).await? {
        let builder =
            parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(bytes)?;
        let Ok(col) = builder.schema().index_of("Customer_ID") else {
            continue;
        };
        let mask = parquet::arrow::ProjectionMask::roots(builder.parquet_schema(), [col]);
        let reader = builder.with_projection(mask).build()?;
        let mut hit = false;
        for batch in reader {
            let batch = batch?;
            if let Some(c) = batch.column_by_name("Customer_ID") {
                let c = c.as_primitive::<Float64Type>();
                if c.iter().any(|v| v == Some(customer)) {
                    hit = true;
                }
            }
        }
        if hit {
            out.insert(id);
        }
    }
    Ok(out)
}

async fn count_data_blobs(repo: &Repo) -> Result<u64, LabError> {
    Ok(data_blobs(repo).await?.len() as u64)
}

/// Copies a repository's folder tree as hard links (a copy where linking
/// fails). A repository never changes a file in place: blobs and ref-log
/// entries are written whole and renamed into place, and deletions unlink,
/// so the copy and the original cannot see each other's changes. Copying
/// ~1,700 files three times cost 15% of a lab run in inode allocation.
pub fn copy_dir(from: &Path, to: &Path) -> Result<(), LabError> {
    let err = |e: std::io::Error| LabError::output(to, e);
    std::fs::create_dir_all(to).map_err(err)?;
    for entry in std::fs::read_dir(from).map_err(err)? {
        let entry = entry.map_err(err)?;
        let target = to.join(entry.file_name());
        if entry.file_type().map_err(err)?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            if std::fs::hard_link(entry.path(), &target).is_err() {
                std::fs::copy(entry.path(), &target).map_err(err)?;
            }
        }
    }
    Ok(())
}

fn write_outputs(out: &Path, results: &Value, page: &str) -> Result<(), LabError> {
    let w = |name: &str, bytes: &[u8]| -> Result<(), LabError> {
        std::fs::write(out.join(name), bytes).map_err(|e| LabError::output(&out.join(name), e))
    };
    let json = serde_json::to_vec_pretty(results).map_err(|e| LabError::Other(e.to_string()))?;
    w("results.json", &json)?;
    w(PLAYGROUND, page.as_bytes())?;
    w("report.md", crate::charts::report(results).as_bytes())?;
    crate::charts::charts(out, results)?;
    Ok(())
}

/// Helper for the summary: a field of the results by dotted path.
pub fn get<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(v, |v, k| v.get(k))
}

/// Keeps `Array` in use for trait methods on arrays.
#[allow(dead_code)]
fn _array_len(a: &dyn Array) -> usize {
    a.len()
}

/// A version's files as read back: each one's id (its bytes' hash, taken
/// when it was encoded) and bytes.
fn files_of<'a>(recs: impl Iterator<Item = &'a Rec>) -> Vec<(ObjectId, Bytes)> {
    recs.map(|r| (r.id, r.bytes.clone())).collect()
}

/// The blob's id, for tests that compare files.
pub fn id_of(b: &Bytes) -> ObjectId {
    ObjectId::of(b)
}

/// The lab's first claim: every layout reads every tag, and the last
/// version, back exactly. A read-back that is not exact stops the lab
/// (a report of "7 of 8" would be a figure, not a check).
fn exact_read_backs(tags: &BTreeMap<&str, (u64, u64)>, last: &[bool; 4]) -> Result<(), LabError> {
    if let Some((layout, (ok, of))) = tags.iter().find(|(_, (ok, of))| ok != of) {
        return Err(LabError::Other(format!(
            "the {layout} layout read {ok} of {of} tags back exactly: a stored version must read back as it was committed"
        )));
    }
    let names = ["month", "week", "changes", "tablepin"];
    if let Some(i) = last.iter().position(|ok| !ok) {
        return Err(LabError::Other(format!(
            "the {} layout's last version does not read back as the table it stored",
            names[i]
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_back_that_is_not_exact_stops_the_lab() {
        let all = BTreeMap::from([("month", (8, 8)), ("tablepin", (8, 8))]);
        assert!(exact_read_backs(&all, &[true; 4]).is_ok());
        let patched = BTreeMap::from([("month", (8, 8)), ("tablepin", (7, 8))]);
        let err = exact_read_backs(&patched, &[true; 4]).unwrap_err();
        assert!(
            err.to_string().contains("tablepin layout read 7 of 8"),
            "{err}"
        );
        let err = exact_read_backs(&all, &[true, false, true, true]).unwrap_err();
        assert!(err.to_string().contains("week layout's last"), "{err}");
    }
}
