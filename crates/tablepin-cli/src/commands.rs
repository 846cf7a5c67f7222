//! One function per subcommand: validate arguments, call the library,
//! print text or JSON.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use serde_json::json;
use std::io::Write as _;
use tablepin::format::FileEntry;
use tablepin::{CommitOptions, Mode, RefKind, Repo, WriteSettings};

use crate::cli::*;
use crate::output::{self, size, time, Bar};

/// A usage mistake the parser cannot see (exit code 2).
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

pub fn usage(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(UsageError(msg.into()))
}

/// The repository a command works on, and a handle on its store's request
/// counts (set as soon as the store exists, so that `--stats` can report a
/// command that failed while opening it).
async fn open(
    cli_repo: &Option<String>,
    stats: &mut Option<tablepin::store::StoreStats>,
) -> Result<Repo> {
    let cwd = std::env::current_dir().context("cannot read the current folder")?;
    let location = tablepin::repo::discover(cli_repo.as_deref(), &cwd)?;
    let settings = settings();
    let store = tablepin::repo::store_at(&location, &settings.store)?
        .with_memo(tablepin::store::memo::COMMAND_BYTES);
    let store = with_test_hooks(store)?;
    *stats = Some(store.stats());
    Ok(Repo::open_store(store).await?.with_author(settings.author))
}

/// Test hooks, in the project's test builds only (`--features testing`):
/// stop the process (as a kill would) before the N+1-th write to the
/// repository (`TABLEPIN_FAULT_AFTER_WRITES=N`); inject a seeded schedule
/// of store faults (`TABLEPIN_FAULTS=seed=N,rate=R`).
#[cfg(feature = "testing")]
fn with_test_hooks(store: tablepin::Store) -> Result<tablepin::Store> {
    let fault = std::env::var("TABLEPIN_FAULT_AFTER_WRITES")
        .ok()
        .and_then(|v| v.parse::<u64>().ok());
    let mut store = store.with_fault_after(fault);
    if let Ok(spec) = std::env::var("TABLEPIN_FAULTS") {
        let plan = tablepin::store::faults::FaultPlan::parse(&spec).ok_or_else(|| {
            usage(format!(
                "TABLEPIN_FAULTS takes seed=N,rate=R (R from 0 to 1), not '{spec}'"
            ))
        })?;
        store = store.with_faults(plan);
    }
    Ok(store)
}

/// The installed binary has no test hooks.
#[cfg(not(feature = "testing"))]
fn with_test_hooks(store: tablepin::Store) -> Result<tablepin::Store> {
    Ok(store)
}

/// The process's settings, from its environment (the libraries read
/// none): author, blob cache, request tracing, threads.
pub fn settings() -> tablepin::Settings {
    tablepin::Settings::from_vars(|k| std::env::var(k).ok())
}

/// `--stats`: what the command asked of the repository's store, on stderr
/// (stdout stays the command's own output).
fn print_stats(stats: &tablepin::store::StoreStats, json_out: bool) {
    // The command's output first, where both go to one terminal.
    let _ = std::io::Write::flush(&mut std::io::stdout());
    let requests = stats.requests();
    let faults = stats.faults_injected();
    if json_out {
        eprintln!(
            "{}",
            json!({ "requests": requests, "requests_total": requests.total(), "faults_injected": faults })
        );
    } else {
        match faults {
            Some(n) => eprintln!("tablepin: {requests}; {n} faults injected"),
            None => eprintln!("tablepin: {requests}"),
        }
    }
}

pub async fn run(cli: Cli) -> Result<ExitCode> {
    settings().apply_to_process();
    let json_out = cli.json;
    let command = match cli.command {
        Command::Init(a) => return init(&cli.repo, a, json_out, cli.stats).await,
        #[cfg(feature = "lab")]
        Command::Lab(a) => return crate::lab::lab(a, json_out).await,
        #[cfg(feature = "lab")]
        Command::Bench(a) => return crate::lab::bench(a, json_out).await,
        Command::Generate(a) => return generate(a, json_out),
        Command::Completions(a) => return completions(a),
        Command::Man(a) => return man(a),
        command => command,
    };
    let mut stats = None;
    let result = match open(&cli.repo, &mut stats).await {
        Ok(repo) => {
            let result = on_repo(&repo, command, json_out).await;
            for id in repo.store().cache_repairs() {
                eprintln!(
                    "tablepin: warning: the cached copy of blob {id} was damaged; it was dropped and read from the repository again"
                );
            }
            result
        }
        Err(e) => Err(e),
    };
    if let (true, Some(stats)) = (cli.stats, &stats) {
        print_stats(stats, json_out);
    }
    result
}

/// Runs a command that works on an open repository.
async fn on_repo(repo: &Repo, command: Command, json_out: bool) -> Result<ExitCode> {
    match command {
        Command::Commit(a) => commit(repo, a, json_out).await,
        Command::Log(a) => log(repo, a, json_out).await,
        Command::Show(a) => show(repo, a, json_out).await,
        Command::Tag(a) => {
            let r = RefArgs {
                kind: RefKind::Tag,
                name: a.name,
                rev: a.rev,
                message: a.message,
                list: a.list,
                delete: a.delete,
                force: false,
                deleted: a.deleted,
                restore: a.restore,
            };
            refs(repo, r, json_out).await
        }
        Command::Branch(a) => {
            let r = RefArgs {
                kind: RefKind::Branch,
                name: a.name,
                rev: a.rev,
                message: String::new(),
                list: a.list,
                delete: a.delete,
                force: a.force,
                deleted: a.deleted,
                restore: a.restore,
            };
            refs(repo, r, json_out).await
        }
        Command::Export(a) => export(repo, a, json_out).await,
        Command::Cat(a) => cat(repo, a, json_out).await,
        Command::Diff(a) => crate::compare::diff(repo, a, json_out).await,
        Command::Sql(a) => crate::compare::sql(repo, a, json_out).await,
        Command::Restore(a) => crate::compare::restore(repo, a, json_out).await,
        Command::Merge(a) => crate::merge::merge(repo, a, json_out).await,
        Command::Revert(a) => crate::merge::revert(repo, a, json_out).await,
        Command::Verify(a) => verify(repo, a, json_out).await,
        Command::Upgrade(a) => crate::admin::upgrade(repo, a, json_out).await,
        Command::Compact(a) => compact(repo, a, json_out).await,
        Command::Gc(a) => crate::admin::gc(repo, a, json_out).await,
        Command::Erase(a) => crate::admin::erase(repo, a, json_out).await,
        Command::Audit => crate::admin::audit(repo, json_out).await,
        Command::Ui(a) => crate::ui::ui(repo, a, json_out).await,
        #[cfg(feature = "lab")]
        Command::Lab(_) | Command::Bench(_) => Err(anyhow::anyhow!(
            "internal: {command:?} does not run on an open repository"
        )),
        Command::Init(_) | Command::Generate(_) | Command::Completions(_) | Command::Man(_) => Err(
            anyhow::anyhow!("internal: {command:?} does not run on an open repository"),
        ),
    }
}

async fn init(repo: &Option<String>, a: InitArgs, json_out: bool, stats: bool) -> Result<ExitCode> {
    let location = match repo {
        Some(r) => r.clone(),
        None => std::env::current_dir()?
            .join(tablepin::LOCAL_DIR)
            .to_string_lossy()
            .into_owned(),
    };
    let write = if a.pyarrow_like {
        WriteSettings::pyarrow_like()
    } else {
        WriteSettings::default()
    };
    let store = tablepin::repo::store_for_init(&location, &settings().store)?;
    // Taken before the attempt, so that a failed init (a store without
    // put-if-absent, a repository already there) still reports its requests.
    let counts = store.stats();
    let made = Repo::init_store(store, write).await;
    if let Ok(r) = &made {
        if json_out {
            output::json(&json!({ "repository": location, "write": r.config().write }))?;
        } else {
            outln!("Initialized an empty tablepin repository in {location}");
        }
    }
    if stats {
        print_stats(&counts, json_out);
    }
    made?;
    Ok(ExitCode::SUCCESS)
}

async fn commit(repo: &Repo, a: CommitArgs, json_out: bool) -> Result<ExitCode> {
    let delimiter = delimiter(a.delimiter.as_deref())?;
    let saved = match &a.plan {
        Some(path) => Some(saved_commit_plan(path, &a.table)?),
        None => None,
    };
    let opts = match &saved {
        Some(plan) => plan.options(&commit_options(&a)),
        None => commit_options(&a),
    };
    let bytes = std::fs::metadata(&a.file).map(|m| m.len()).unwrap_or(0);
    // One line on a terminal: the bytes of a CSV file parsed of its
    // total (and the window a streamed commit is in), then the step.
    let bar = Arc::new(output::Bar::new());
    bar.spin(format!("reading {} ({})", a.file, size(bytes)));
    let read_opts = tablepin::files::ReadOptions {
        delimiter,
        progress: Some(bar.clone()),
    };
    if !a.dry_run && saved.is_none() {
        let input = tablepin::files::TableFile {
            path: a.file.clone(),
            opts: read_opts.clone(),
        };
        if more_rows_than(&input, opts.window_rows)? {
            let windows = Windows {
                file: input,
                bar: bar.clone(),
                rows: opts.window_rows as u64,
            };
            let r = repo
                .transaction(&a.table, &opts)
                .commit(tablepin::Input::Stream(&windows))
                .await?;
            drop(bar);
            return committed(&r, opts.mode, json_out);
        }
    }
    let (mut schema, mut batches) = tablepin::files::read_table_file_with(&a.file, &read_opts)?;
    let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
    bar.spin(format!(
        "committing {rows} rows to '{}': hashing, comparing with the branch head, writing what changed",
        a.table
    ));
    let header_only = tablepin::files::is_header_only_csv(&a.file, &batches);
    if header_only {
        // A CSV header says nothing of the columns' types: read it with the
        // table's schema, or refuse it for a new table.
        let Some(table_schema) = repo.transaction(&a.table, &opts).schema().await? else {
            return Err(tablepin::Error::Input {
                path: a.file.clone(),
                message: format!(
                    "has a header but no rows, and table '{}' does not exist yet on '{}'; a new table's column types come from its rows, so commit a file with at least one row",
                    a.table, opts.branch
                ),
            }
            .into());
        };
        schema = tablepin::files::empty_with_schema(&a.file, &schema, &table_schema)?;
        batches = Vec::new();
    }
    if a.dry_run {
        let plan = repo
            .transaction(&a.table, &opts)
            .plan(tablepin::Input::Rows(schema, batches))
            .await?;
        drop(bar);
        return planned_commit(&plan, json_out);
    }
    let r = match &saved {
        Some(plan) => {
            repo.transaction(&a.table, &opts)
                .apply(plan, tablepin::Input::Rows(schema, batches))
                .await?
        }
        None => repo.commit(&a.table, schema, batches, &opts).await?,
    };
    drop(bar);
    if header_only && opts.mode == Mode::Overwrite && r.change.rows_deleted > 0 {
        eprintln!(
            "note: {} has no rows, so this overwrite deleted all {} rows of '{}' (the version before keeps them)",
            a.file, r.change.rows_deleted, a.table
        );
    }
    committed(&r, opts.mode, json_out)
}

/// A file committed a window at a time, naming on the bar the window its
/// rows are read into (a window is planned and written once its rows are
/// read, so the window read is the one at work).
struct Windows {
    file: tablepin::files::TableFile,
    bar: Arc<output::Bar>,
    rows: u64,
}

impl tablepin::CommitInput for Windows {
    fn open(&self) -> tablepin::Result<(arrow::datatypes::SchemaRef, tablepin::files::BatchIter)> {
        let (schema, batches) = tablepin::CommitInput::open(&self.file)?;
        let (bar, per) = (self.bar.clone(), self.rows.max(1));
        let path = self.file.path.clone();
        let mut read = 0u64;
        let batches = batches.inspect(move |b| {
            if let Ok(b) = b {
                read += b.num_rows() as u64;
                bar.say(format!(
                    "committing {path}: window {} ({per} rows each), {read} rows read",
                    read.saturating_sub(1) / per + 1
                ));
            }
        });
        Ok((schema, Box::new(batches)))
    }
}

/// Whether `input` holds more than `rows` rows (reading at most those);
/// never for standard input, which is read whole.
fn more_rows_than(input: &tablepin::files::TableFile, rows: usize) -> Result<bool> {
    if input.path == "-" || rows == 0 {
        return Ok(false);
    }
    let (_, batches) = tablepin::files::open_table_file(&input.path, &input.opts)?;
    let mut seen = 0usize;
    for b in batches {
        seen += b?.num_rows();
        if seen > rows {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Prints what a commit did.
fn committed(r: &tablepin::CommitResult, mode: Mode, json_out: bool) -> Result<ExitCode> {
    if json_out {
        output::json(r)?;
    } else if r.empty {
        outln!(
            "Nothing to commit: '{}' on {} holds these rows already (version {}, content hash {}); no version made. Pass --allow-empty to make one anyway",
            r.table,
            r.branch,
            r.version.short(12),
            r.content_hash.short(16)
        );
    } else {
        let c = &r.change;
        outln!(
            "[{} {}] {} '{}': {} rows (+{} ~{} -{}), {} new in {} blobs, checks: {}",
            r.branch,
            r.version.short(12),
            mode.name(),
            r.table,
            r.rows,
            c.rows_added,
            c.rows_changed,
            c.rows_deleted,
            size(c.bytes_new),
            c.blobs_new,
            fired(&c.checks),
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The field separator `--delimiter` names.
fn delimiter(given: Option<&str>) -> Result<Option<u8>> {
    match given {
        None => Ok(None),
        Some("\\t" | "\t" | "tab") => Ok(Some(b'\t')),
        Some(d) if d.len() == 1 => Ok(Some(d.as_bytes()[0])),
        Some(d) => Err(usage(format!(
            "--delimiter takes one character (or \\t for a tab), not '{d}'"
        ))),
    }
}

/// The commit the flags ask for.
fn commit_options(a: &CommitArgs) -> CommitOptions {
    CommitOptions {
        mode: match a.mode {
            ModeArg::Overwrite => Mode::Overwrite,
            ModeArg::Append => Mode::Append,
            ModeArg::Upsert => Mode::Upsert,
            ModeArg::Delete => Mode::Delete,
        },
        key: a.key.clone(),
        allow_schema_change: a.allow_schema_change,
        cast: a.cast,
        message: a.message.clone(),
        branch: a.branch.clone(),
        time_ms: None,
        create_branch: a.create_branch,
        retry_for: a.retry_for.into(),
        window_rows: a.window_rows,
        allow_empty: a.allow_empty,
    }
}

/// A plan saved from `tablepin COMMAND --dry-run --json`: that output
/// (whose "plan" is the plan) or the plan alone; `what` names the plan
/// ("commit", "erasure") in the message when it is neither.
pub(crate) fn read_saved_plan<T: serde::de::DeserializeOwned>(
    path: &std::path::Path,
    what: &str,
    command: &str,
) -> Result<T> {
    let name = path.display();
    let text =
        std::fs::read(path).map_err(|e| usage(format!("cannot read the plan {name}: {e}")))?;
    let not_a_plan = |e: serde_json::Error| {
        usage(format!(
            "{name} is not {what} plan saved by `tablepin {command} --dry-run --json` ({e})"
        ))
    };
    let mut value: serde_json::Value = serde_json::from_slice(&text).map_err(not_a_plan)?;
    // The dry run's output: the plan is its "plan" (a commit plan has a
    // "plan" of its own, so only the output's is unwrapped).
    if value.get("dry_run").is_some() {
        if let Some(inner) = value.get_mut("plan") {
            value = inner.take();
        }
    }
    serde_json::from_value(value).map_err(not_a_plan)
}

/// A commit plan saved from `commit --dry-run --json`, for `table`.
fn saved_commit_plan(path: &std::path::Path, table: &str) -> Result<tablepin::CommitPlan> {
    let plan: tablepin::CommitPlan = read_saved_plan(path, "a commit", "commit")?;
    if plan.table != table {
        return Err(usage(format!(
            "the plan {} commits to table '{}', not '{table}'",
            path.display(),
            plan.table
        )));
    }
    Ok(plan)
}

/// Reports a planned commit (`commit --dry-run`).
fn planned_commit(p: &tablepin::CommitPlan, json_out: bool) -> Result<ExitCode> {
    if json_out {
        output::json(&json!({ "dry_run": true, "plan": p }))?;
        return Ok(ExitCode::SUCCESS);
    }
    let t = &p.plan;
    let bytes: u64 = t.writes.iter().map(|w| w.bytes).sum();
    outln!(
        "plan: {} '{}' on {} from {}: {} rows after (+{} ~{} -{}), writes {} blob{} ({}) unless stored already, checks: {}",
        p.mode.name(),
        p.table,
        p.branch,
        p.parent.map_or("no version".into(), |v| v.short(12)),
        t.snapshot.rows,
        t.rows_added,
        t.rows_changed,
        t.rows_deleted,
        t.writes.len(),
        if t.writes.len() == 1 { "" } else { "s" },
        size(bytes),
        fired(&t.checks),
    );
    outln!("content hash after: {}", t.snapshot.content_hash);
    outln!("(dry run: nothing was committed; `--dry-run --json > PLAN`, then `--plan PLAN`, commits exactly this)");
    Ok(ExitCode::SUCCESS)
}

async fn compact(repo: &Repo, a: CompactArgs, json_out: bool) -> Result<ExitCode> {
    let opts = CommitOptions {
        message: a.message,
        branch: a.branch.clone(),
        ..Default::default()
    };
    let Some(r) = repo.transaction(&a.table, &opts).compact().await? else {
        if json_out {
            output::json(&json!({
                "compacted": false, "table": a.table, "branch": a.branch,
            }))?;
        } else {
            outln!(
                "'{}' on {} is already compact; nothing written",
                a.table,
                a.branch
            );
        }
        return Ok(ExitCode::SUCCESS);
    };
    let after = repo.snapshot(r.version).await?.files(&r.table).await?;
    let before = match r.parent {
        Some(p) => repo.snapshot(p).await?.files(&r.table).await?,
        None => Vec::new(),
    };
    let hidden: u64 = before.iter().map(|f| f.rows - f.live_rows()).sum();
    if json_out {
        output::json(&json!({
            "compacted": true,
            "files_before": before.len(),
            "files_after": after.len(),
            "hidden_rows_dropped": hidden,
            "commit": r,
        }))?;
    } else {
        outln!(
            "[{} {}] compact '{}': {} files ({} hidden rows) -> {} files; {} rows, content hash unchanged; {} new in {} blobs",
            r.branch,
            r.version.short(12),
            r.table,
            before.len(),
            hidden,
            after.len(),
            r.rows,
            size(r.change.bytes_new),
            r.change.blobs_new,
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn fired(c: &tablepin::format::Checks) -> String {
    let f = c.fired();
    if f.is_empty() {
        "none".into()
    } else {
        f.join(",")
    }
}

async fn log(repo: &Repo, a: LogArgs, json_out: bool) -> Result<ExitCode> {
    let branch = a
        .branch
        .or(a.branch_flag)
        .unwrap_or_else(|| tablepin::DEFAULT_BRANCH.to_string());
    let opts = tablepin::LogOptions {
        max: a.max_count,
        table: a.table,
        all_parents: a.graph,
    };
    let entries = repo.log(&branch, &opts).await?;
    if json_out {
        output::json(&entries)?;
        return Ok(ExitCode::SUCCESS);
    }
    let drawn = match a.graph {
        true => {
            let v: Vec<_> = entries.iter().map(|e| (e.id, e.parents.clone())).collect();
            crate::graph::draw(&v)
        }
        false => Vec::new(),
    };
    for (i, e) in entries.iter().enumerate() {
        let g = drawn.get(i);
        let lane = g.map(|g| format!("{} ", g.line)).unwrap_or_default();
        outln!("{lane}{}", log_line(e));
        for line in g.map(|g| g.after.as_slice()).unwrap_or_default() {
            outln!("{line}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// One version's line of `log`.
fn log_line(e: &tablepin::LogEntry) -> String {
    let rows: u64 = e.tables.values().map(|t| t.0).sum();
    if e.expired {
        return format!(
            "{} {} (expired) {:?} rows={} content={}",
            e.id.short(12),
            time(e.time_ms),
            e.message,
            rows,
            e.tables
                .values()
                .next()
                .map(|t| t.1.short(16))
                .unwrap_or_default()
        );
    }
    // Which table changed, and by how much.
    let changes = e
        .changes
        .iter()
        .map(|(table, c)| {
            format!(
                "{table} +{} ~{} -{} new={} checks={}",
                c.rows_added,
                c.rows_changed,
                c.rows_deleted,
                size(c.bytes_new),
                fired(&c.checks)
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    let replaced = e
        .replaces
        .map(|r| format!(" (replaces {})", r.short(12)))
        .unwrap_or_default();
    format!(
        "{} {} {:?} rows={} {}{}",
        e.id.short(12),
        time(e.time_ms),
        e.message,
        rows,
        changes,
        replaced
    )
}

/// A data file as `show --json` gives it: every field present, `null`
/// where there is nothing (the stored manifest leaves such fields out).
fn file_json(f: &tablepin::format::FileEntry) -> serde_json::Value {
    let mut v = serde_json::to_value(f).unwrap_or_default();
    if let Some(map) = v.as_object_mut() {
        for key in ["deletes", "key_min", "key_max"] {
            map.entry(key).or_insert(serde_json::Value::Null);
        }
        if let Some(d) = map.get_mut("deletes").and_then(|d| d.as_object_mut()) {
            d.entry("offset").or_insert(serde_json::Value::Null);
        }
    }
    v
}

/// Resolves a revision for a read. A version id that an erasure replaced
/// reads as its replacement, with a note on stderr saying so.
async fn resolve_read<'r>(repo: &'r Repo, rev: &str) -> Result<tablepin::Snapshot<'r>> {
    let at = repo.snapshot(rev).await?;
    if let Some(r) = at.replaced() {
        eprintln!("note: {}", replaced_text(r));
    }
    Ok(at)
}

fn replaced_text(r: &tablepin::Replaced) -> String {
    let by = r
        .erasures
        .iter()
        .map(|e| {
            format!(
                "erasure {} at {} ({:?})",
                e.audit,
                time(e.time_ms),
                e.reason
            )
        })
        .collect::<Vec<_>>()
        .join(", then ");
    format!(
        "version {} was replaced by {} by {by}; it holds the same rows but the erased ones (see `tablepin audit`)",
        r.old.short(12),
        r.new.short(12)
    )
}

/// Each table of a version with its snapshot.
async fn snapshots(
    at: &tablepin::Snapshot<'_>,
) -> Result<Vec<(String, tablepin::format::TableSnapshot)>> {
    let mut tables = Vec::new();
    for name in at.version().tables.keys() {
        tables.push((name.clone(), at.table(name).await?));
    }
    Ok(tables)
}

/// A version as `show --json` (and the web page) gives it: its parents,
/// time, author, message and changes, and each table's rows, content
/// hash, key, schema, files and bytes, and the note when the revision
/// named a version an erasure replaced.
pub async fn version_json(at: &tablepin::Snapshot<'_>) -> Result<serde_json::Value> {
    let (id, v) = (at.id(), at.version());
    let tables: Vec<_> = snapshots(at)
        .await?
        .iter()
        .map(|(n, s)| {
            json!({
                "table": n, "rows": s.rows, "content_hash": s.content_hash, "key": s.key,
                "schema": s.schema.fields().iter().map(|f| json!({"name": f.name(), "type": f.data_type().to_string(), "nullable": f.is_nullable()})).collect::<Vec<_>>(),
                "files": s.files.iter().map(file_json).collect::<Vec<_>>(),
                "bytes": s.files.iter().map(FileEntry::stored_bytes).sum::<u64>(),
            })
        })
        .collect();
    Ok(json!({
        "version": id, "parents": v.parents, "time_ms": v.time_ms, "author": v.author,
        "message": v.message, "changes": v.changes, "replaces": v.replaces, "tables": tables,
        "replaced": at.replaced(),
    }))
}

async fn show(repo: &Repo, a: ShowArgs, json_out: bool) -> Result<ExitCode> {
    let at = resolve_read(repo, &a.rev).await?;
    if json_out {
        output::json(&version_json(&at).await?)?;
        return Ok(ExitCode::SUCCESS);
    }
    let (id, v, tables) = (at.id(), at.version(), snapshots(&at).await?);
    if let Some(r) = at.replaced() {
        outln!("asked for {}: {}", r.old, replaced_text(r));
    }
    outln!("version {id}");
    for p in &v.parents {
        outln!("parent  {p}");
    }
    outln!(
        "time    {}\nauthor  {}\nmessage {}",
        time(v.time_ms),
        v.author,
        v.message
    );
    if let Some(r) = v.replaces {
        outln!("replaces {r} (erasure)");
    }
    for (name, s) in &tables {
        let bytes: u64 = s.files.iter().map(FileEntry::stored_bytes).sum();
        outln!(
            "\ntable '{name}': {} rows, key [{}], content hash {} (rowhash-v1)",
            s.rows,
            s.key.join(","),
            s.content_hash
        );
        outln!("  columns: {}", tablepin::table::columns_line(&s.schema));
        outln!("  {} data files, {}", s.files.len(), size(bytes));
        for f in &s.files {
            let dv = f
                .deletes
                .as_ref()
                .map(|d| {
                    let blob = d.blob.short(12);
                    let place = match d.offset {
                        Some(o) => format!("in pack {blob} at byte {o}"),
                        None => blob,
                    };
                    format!(
                        ", {} deleted ({} deletion vector {place})",
                        d.count,
                        size(d.bytes)
                    )
                })
                .unwrap_or_default();
            outln!(
                "  {} {:>9} rows {:>9}{}",
                f.data.short(12),
                f.rows,
                size(f.bytes),
                dv
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// What `tag` and `branch` were asked to do.
struct RefArgs {
    kind: RefKind,
    name: Option<String>,
    rev: String,
    message: String,
    list: bool,
    delete: bool,
    force: bool,
    deleted: bool,
    restore: bool,
}

async fn refs(repo: &Repo, a: RefArgs, json_out: bool) -> Result<ExitCode> {
    let what = match a.kind {
        RefKind::Tag => "tag",
        RefKind::Branch => "branch",
    };
    if a.deleted {
        let all = repo.refs().deleted(a.kind).await?;
        if json_out {
            output::json(&all)?;
        } else {
            for r in all {
                let way = match &r.note {
                    Some(n) => n.clone(),
                    None => format!("restore: tablepin {what} --restore {}", r.name),
                };
                outln!(
                    "{:<24} was {} deleted {} ({way})",
                    r.name,
                    r.target.short(12),
                    time(r.time_ms),
                );
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    if a.list || a.name.is_none() {
        if a.delete || a.restore {
            let flag = if a.delete { "--delete" } else { "--restore" };
            return Err(usage(format!("{flag} needs the {what} to act on")));
        }
        let all = repo.refs().list(a.kind).await?;
        if json_out {
            output::json(&all)?;
        } else {
            for r in all {
                let note = r
                    .note
                    .as_ref()
                    .map(|n| format!(" [{n}]"))
                    .unwrap_or_default();
                outln!(
                    "{:<24} {} {} {}{note}",
                    r.name,
                    r.target.short(12),
                    time(r.time_ms),
                    r.message
                );
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    let name = a.name.unwrap_or_default();
    if a.delete {
        let old = repo.refs().delete(a.kind, &name, a.force).await?;
        if json_out {
            output::json(&json!({ "deleted": name, "was": old }))?;
        } else {
            outln!(
                "Deleted {what} '{name}' (was {}); undo with `tablepin {what} --restore {name}`",
                old.short(12)
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    if a.restore {
        let target = repo.refs().restore(a.kind, &name).await?;
        if json_out {
            output::json(&json!({ "restored": name, "version": target }))?;
        } else {
            outln!("Restored {what} '{name}' at {}", target.short(12));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let target = repo
        .refs()
        .create(a.kind, &name, &a.rev, &a.message)
        .await?;
    if json_out {
        output::json(&json!({ what: name, "version": target }))?;
    } else {
        outln!("Created {what} '{name}' at {}", target.short(12));
    }
    Ok(ExitCode::SUCCESS)
}

/// Refuses, before any work, an output file whose name says no format
/// tablepin writes; `what` says what was to be written ("export to").
pub fn check_output(what: &str, path: &str) -> Result<()> {
    if tablepin::files::can_write(path) {
        return Ok(());
    }
    Err(usage(format!(
        "cannot {what} '{path}': name the file .parquet, .csv, .csv.gz, .tsv, .arrow or .feather"
    )))
}

/// How `export` writes: a file named for its format, or standard output
/// in the format `--format` names (CSV by default).
fn export_target(a: &ExportArgs) -> Result<Option<tablepin::files::OutputFormat>> {
    use tablepin::files::OutputFormat;
    let formats = "csv, tsv, csv.gz, tsv.gz, parquet, arrow or delta";
    match (a.output.as_str(), a.format.as_deref()) {
        (_, None) if a.history => Err(usage("--history goes with --format delta")),
        ("-", None) => Ok(OutputFormat::of_name("csv")),
        ("-", Some(f)) => match OutputFormat::of_name(f) {
            Some(o) => Ok(Some(o)),
            None if f == "delta" => Err(usage("a Delta view is a folder: name one with -o")),
            None => Err(usage(format!("--format takes {formats}, not '{f}'"))),
        },
        (path, None) => {
            check_output("export to", path)?;
            Ok(None)
        }
        (_, Some(other)) if OutputFormat::of_name(other).is_none() => Err(usage(format!(
            "--format takes delta (or, with -o - for standard output, csv, tsv, csv.gz, tsv.gz, parquet or arrow), not '{other}'"
        ))),
        (_, Some(other)) => Err(usage(format!(
            "--format {other} goes with -o - (standard output); a file's name tells its format ({formats})"
        ))),
    }
}

async fn export(repo: &Repo, a: ExportArgs, json_out: bool) -> Result<ExitCode> {
    if a.format.as_deref() == Some("delta") && a.output != "-" {
        return export_delta(repo, a, json_out).await;
    }
    if a.no_deletion_vectors {
        return Err(usage("--no-deletion-vectors goes with --format delta"));
    }
    let to_stdout = export_target(&a)?;
    // Streamed: the rows go to the file as they are read, never all held.
    let at = repo.snapshot(&a.rev).await?;
    let replaced = at.replaced().cloned();
    let mut read = at.stream(&a.table, &Default::default()).await?;
    if let Some(r) = &replaced {
        eprintln!("note: {}", replaced_text(r));
    }
    let mut file = match to_stdout {
        Some(format) => tablepin::files::TableFileWriter::stdout(&read.schema, format)?,
        None => tablepin::files::TableFileWriter::create(&a.output, &read.schema)?,
    };
    // Rows written of the version's, on a terminal (not when the rows go
    // to standard output).
    let bar = match to_stdout {
        None => Some(output::Bar::rows("exporting", read.snapshot.rows)),
        Some(_) => None,
    };
    while let Some(batch) = read.next_batch().await {
        let batch = batch?;
        if let Some(bar) = &bar {
            bar.inc(batch.num_rows() as u64);
        }
        file.write(&batch)?;
        if file.closed() {
            // The reader went away (`| head`): nothing more to write.
            return Ok(ExitCode::SUCCESS);
        }
    }
    file.finish()?;
    if to_stdout.is_some() {
        return Ok(ExitCode::SUCCESS);
    }
    let rows = read.stats().rows;
    if json_out {
        output::json(&json!({
            "version": read.version, "table": a.table, "rows": rows,
            "content_hash": read.snapshot.content_hash, "output": a.output,
        }))?;
    } else {
        outln!(
            "Wrote {} rows of '{}' at {} to {} (content hash {})",
            rows,
            a.table,
            read.version.short(12),
            a.output,
            read.snapshot.content_hash.short(16)
        );
    }
    Ok(ExitCode::SUCCESS)
}

async fn export_delta(repo: &Repo, a: ExportArgs, json_out: bool) -> Result<ExitCode> {
    let opts = tablepin::delta::DeltaOptions {
        history: a.history,
        deletion_vectors: !a.no_deletion_vectors,
    };
    let out = repo
        .export_delta(&a.rev, &a.table, &a.output, &opts)
        .await?;
    if json_out {
        output::json(&out)?;
    } else {
        let last = out.delta_versions.last();
        outln!(
            "Wrote a Delta table of '{}' to {}: {} Delta version(s), the last {} rows of {} (content hash {}); {} data files, {} linked, {} copied ({}), {} written again without hidden rows ({})",
            a.table,
            out.dir,
            out.delta_versions.len(),
            last.map_or(0, |v| v.rows),
            last.map_or(String::new(), |v| v.version.short(12)),
            last.map_or("", |v| &v.content_hash[..16]),
            out.files,
            out.linked,
            out.copied,
            size(out.bytes_copied),
            out.rewritten,
            size(out.bytes_rewritten)
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Rows as a JSON array of objects, one per row.
pub fn rows_json(batches: &[arrow::array::RecordBatch]) -> Result<serde_json::Value> {
    let mut buf = Vec::new();
    {
        let mut w = arrow::json::ArrayWriter::new(&mut buf);
        for b in batches {
            w.write(b)?;
        }
        w.finish()?;
    }
    Ok(if buf.is_empty() {
        json!([])
    } else {
        serde_json::from_slice(&buf)?
    })
}

async fn cat(repo: &Repo, a: CatArgs, json_out: bool) -> Result<ExitCode> {
    // Streamed: only the first rows are read (the files that can hold
    // them, each up to the limit), and printed as they come.
    let opts = tablepin::ScanOptions {
        limit: Some(a.limit),
        ..Default::default()
    };
    let at = repo.snapshot(&a.rev).await?;
    let replaced = at.replaced().cloned();
    let mut read = at.stream(&a.table, &opts).await?;
    if let Some(r) = &replaced {
        eprintln!("note: {}", replaced_text(r));
    }
    if json_out {
        let head =
            json!({ "version": read.version, "table": a.table, "total_rows": read.snapshot.rows });
        let head = output::json_text(&head)?;
        let fields = head.trim_end().trim_end_matches('}').trim_end();
        let mut w = std::io::stdout().lock();
        write!(w, "{fields},\n  \"rows\": ")?;
        let mut rows = JsonRows::new(&mut w)?;
        while let Some(b) = read.next_batch().await {
            rows.write(&mut w, &b?)?;
        }
        rows.finish(&mut w)?;
        writeln!(w, "\n}}")?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut table = Chunks::new(read.schema.clone());
    while let Some(b) = read.next_batch().await {
        table.push(b?)?;
    }
    table.finish()?;
    outln!(
        "{} of {} rows of '{}' at {}",
        read.stats().rows,
        read.snapshot.rows,
        a.table,
        read.version.short(12)
    );
    Ok(ExitCode::SUCCESS)
}

/// Rows printed as tables of a chunk each: the first rows show before the
/// last are read (`| head`), and memory holds a chunk, not the answer; a
/// long answer repeats the header every chunk.
pub struct Chunks {
    schema: arrow::datatypes::SchemaRef,
    held: Vec<arrow::array::RecordBatch>,
    rows: usize,
    printed: bool,
}

impl Chunks {
    /// Rows printed at once.
    const ROWS: usize = 1000;

    pub fn new(schema: arrow::datatypes::SchemaRef) -> Self {
        Self {
            schema,
            held: Vec::new(),
            rows: 0,
            printed: false,
        }
    }

    pub fn push(&mut self, b: arrow::array::RecordBatch) -> Result<()> {
        let mut at = 0;
        while at < b.num_rows() {
            let take = (Self::ROWS - self.rows).min(b.num_rows() - at);
            self.held.push(b.slice(at, take));
            self.rows += take;
            at += take;
            if self.rows >= Self::ROWS {
                self.print()?;
            }
        }
        Ok(())
    }

    /// Prints what is held; a header alone when no row came at all.
    pub fn finish(mut self) -> Result<()> {
        if self.rows > 0 || !self.printed {
            self.print()?;
        }
        Ok(())
    }

    fn print(&mut self) -> Result<()> {
        outln!(
            "{}",
            arrow::util::pretty::pretty_format_batches_with_schema(
                self.schema.clone(),
                &self.held
            )?
        );
        self.held.clear();
        self.rows = 0;
        self.printed = true;
        Ok(())
    }
}

/// A JSON array of rows (objects in column order, as `rows_json` gives
/// them) written as batches come.
pub struct JsonRows {
    count: usize,
}

impl JsonRows {
    pub fn new(w: &mut impl std::io::Write) -> Result<Self> {
        w.write_all(b"[")?;
        Ok(Self { count: 0 })
    }

    pub fn write(
        &mut self,
        w: &mut impl std::io::Write,
        b: &arrow::array::RecordBatch,
    ) -> Result<()> {
        if b.num_rows() == 0 {
            return Ok(());
        }
        let mut buf = Vec::new();
        let mut aw = arrow::json::ArrayWriter::new(&mut buf);
        aw.write(b)?;
        aw.finish()?;
        let text = String::from_utf8(buf)?;
        let inner = text.trim().trim_start_matches('[').trim_end_matches(']');
        if self.count > 0 {
            w.write_all(b",")?;
        }
        w.write_all(inner.as_bytes())?;
        self.count += b.num_rows();
        Ok(())
    }

    /// Closes the array; the number of rows written.
    pub fn finish(self, w: &mut impl std::io::Write) -> Result<usize> {
        w.write_all(b"]")?;
        Ok(self.count)
    }
}

async fn verify(repo: &Repo, a: VerifyArgs, json_out: bool) -> Result<ExitCode> {
    let bar = Bar::new();
    let mut report = repo.verify(&bar).await?;
    let erased = if a.erased {
        match repo.erasure().verify(&bar).await {
            Ok(e) => Some(e),
            // A damaged audit record is one more problem to report.
            Err(e) if e.kind() == tablepin::ErrorKind::Damaged => {
                report.problems.push(e.to_string());
                None
            }
            Err(e) => return Err(e.into()),
        }
    } else {
        None
    };
    let ok = report.problems.is_empty() && erased.as_ref().is_none_or(|e| e.ok());
    if json_out {
        output::json(&json!({ "ok": ok, "report": report, "erased": erased }))?;
    } else {
        outln!(
            "Checked {} blobs ({}) at {}, {} refs, {} versions ({} expired), {} snapshots, {} rows hashed in {:.2} s",
            report.blobs,
            size(report.bytes),
            rate(report.mb_per_s),
            report.refs,
            report.versions,
            report.expired,
            report.snapshots,
            report.rows_hashed,
            report.seconds
        );
        for p in &report.problems {
            outln!("problem: {p}");
        }
        for l in &report.leftovers {
            outln!("leftover: {l} (a temporary file of an interrupted write, not damage; gc deletes it after its grace period)");
        }
        if let Some(e) = &erased {
            crate::admin::print_erased(e)?;
        }
        outln!("{}", if ok { "OK" } else { "FAILED" });
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(5)
    })
}

/// Rows `generate` makes and writes at a time: a table of any size is
/// written with the memory of this many rows.
const GENERATE_CHUNK: usize = 1 << 20;

fn generate(a: GenerateArgs, json_out: bool) -> Result<ExitCode> {
    // Returns raise rows in place, so the table stays in id order (a
    // later overwrite with it streams: see `commit --window-rows`).
    let returned = tablepin_datagen::pick_ids(a.rows as i64, a.returns, a.seed.wrapping_add(7));
    let chunk = |c: usize| {
        let from = c * GENERATE_CHUNK;
        let n = GENERATE_CHUNK.min(a.rows - from);
        // The first chunk is `sales(start, rows, seed)` for a table of
        // one chunk, so small tables are what they always were.
        let t = tablepin_datagen::sales(a.start + from as i64, n, a.seed.wrapping_add(c as u64));
        let lo = returned.partition_point(|p| (*p as usize) < from);
        let hi = returned.partition_point(|p| (*p as usize) < from + n);
        let at: Vec<usize> = returned[lo..hi]
            .iter()
            .map(|p| *p as usize - from)
            .collect();
        tablepin_datagen::returned_in_place(&t, &at, 1)
    };
    let chunks = a.rows.div_ceil(GENERATE_CHUNK).max(1);
    if a.output == "-" || chunks == 1 {
        let t = chunk(0);
        tablepin::files::write_table_file(&a.output, &t.schema(), &[t])?;
    } else {
        let mut file =
            tablepin::files::TableFileWriter::create(&a.output, &tablepin_datagen::schema())?;
        let bar = output::Bar::rows("generating", a.rows as u64);
        for c in 0..chunks {
            let t = chunk(c);
            file.write(&t)?;
            bar.inc(t.num_rows() as u64);
        }
        drop(bar);
        file.finish()?;
    }
    if json_out && a.output != "-" {
        output::json(&json!({ "rows": a.rows, "output": a.output, "seed": a.seed }))?;
    } else if a.output != "-" {
        outln!("Wrote {} generated rows to {}", a.rows, a.output);
    }
    Ok(ExitCode::SUCCESS)
}

/// A rate in MB/s, with a decimal where it is small (a small repository,
/// or one in a bucket, reads slower than a whole MB a second).
pub fn rate(mb_per_s: f64) -> String {
    if mb_per_s < 10.0 {
        format!("{mb_per_s:.2} MB/s")
    } else {
        format!("{mb_per_s:.0} MB/s")
    }
}

/// Prints the completion script of a shell.
fn completions(a: CompletionsArgs) -> Result<ExitCode> {
    let mut cmd = <Cli as clap::CommandFactory>::command();
    let mut out = std::io::stdout().lock();
    clap_complete::generate(a.shell, &mut cmd, "tablepin", &mut out);
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// Prints one manual page, or writes them all to a folder.
fn man(a: ManArgs) -> Result<ExitCode> {
    let cmd = <Cli as clap::CommandFactory>::command();
    let pages = man_pages(&cmd);
    match (a.out, a.command) {
        (Some(dir), _) => {
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("cannot create the folder {}", dir.display()))?;
            for (name, page) in &pages {
                let path = dir.join(format!("{name}.1"));
                std::fs::write(&path, page)
                    .with_context(|| format!("cannot write {}", path.display()))?;
            }
            outln!("Wrote {} manual pages to {}", pages.len(), dir.display());
        }
        (None, command) => {
            let name = command.map_or("tablepin".to_string(), |c| format!("tablepin-{c}"));
            let Some((_, page)) = pages.iter().find(|(n, _)| *n == name) else {
                let known: Vec<&str> = cmd.get_subcommands().map(|c| c.get_name()).collect();
                return Err(usage(format!(
                    "tablepin has no command '{}' (commands: {})",
                    name.trim_start_matches("tablepin-"),
                    known.join(", ")
                )));
            };
            std::io::stdout().lock().write_all(page)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Every manual page in roff: tablepin's own, then one per command, each
/// named as `man` finds it (tablepin-commit).
fn man_pages(cmd: &clap::Command) -> Vec<(String, Vec<u8>)> {
    let mut pages = Vec::new();
    let mut render = |name: String, c: clap::Command| {
        let mut page = Vec::new();
        // Writing to a Vec cannot fail.
        if clap_mangen::Man::new(c).render(&mut page).is_ok() {
            pages.push((name, page));
        }
    };
    render("tablepin".into(), cmd.clone());
    for sub in cmd.get_subcommands().filter(|c| c.get_name() != "help") {
        let name = format!("tablepin-{}", sub.get_name());
        render(
            name.clone(),
            sub.clone().name(name).version(crate::version()),
        );
    }
    pages
}
