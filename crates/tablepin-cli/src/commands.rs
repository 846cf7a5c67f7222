//! One function per subcommand: validate arguments, call the library,
//! print text or JSON.

use std::process::ExitCode;

use anyhow::{Context, Result};
use arrow::util::pretty::pretty_format_batches;
use serde_json::json;
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

fn usage(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(UsageError(msg.into()))
}

async fn open(cli_repo: &Option<String>) -> Result<Repo> {
    let cwd = std::env::current_dir().context("cannot read the current folder")?;
    let location = Repo::discover(cli_repo.as_deref(), &cwd)?;
    // Test hook for crash-safety tests: stop the process (as a kill would)
    // before the N+1-th write to the repository.
    let fault = std::env::var("TABLEPIN_FAULT_AFTER_WRITES")
        .ok()
        .and_then(|v| v.parse::<u64>().ok());
    let store = tablepin::Store::open(&location).map_err(|_| tablepin::Error::NoRepository {
        start: location.clone(),
    })?;
    Ok(Repo::open_store(store.with_fault_after(fault)).await?)
}

pub async fn run(cli: Cli) -> Result<ExitCode> {
    let json_out = cli.json;
    match cli.command {
        Command::Init(a) => init(&cli.repo, a, json_out).await,
        Command::Commit(a) => commit(&open(&cli.repo).await?, a, json_out).await,
        Command::Log(a) => log(&open(&cli.repo).await?, a, json_out).await,
        Command::Show(a) => show(&open(&cli.repo).await?, a, json_out).await,
        Command::Tag(a) => {
            refs(
                &open(&cli.repo).await?,
                RefKind::Tag,
                a.name,
                a.rev,
                a.message,
                a.list,
                a.delete,
                json_out,
            )
            .await
        }
        Command::Branch(a) => {
            refs(
                &open(&cli.repo).await?,
                RefKind::Branch,
                a.name,
                a.rev,
                String::new(),
                a.list,
                a.delete,
                json_out,
            )
            .await
        }
        Command::Export(a) => export(&open(&cli.repo).await?, a, json_out).await,
        Command::Cat(a) => cat(&open(&cli.repo).await?, a, json_out).await,
        Command::Verify(a) => verify(&open(&cli.repo).await?, a, json_out).await,
        Command::Compact(a) => compact(&open(&cli.repo).await?, a, json_out).await,
        Command::Gc(a) => crate::admin::gc(&open(&cli.repo).await?, a, json_out).await,
        Command::Erase(a) => crate::admin::erase(&open(&cli.repo).await?, a, json_out).await,
        Command::Audit => crate::admin::audit(&open(&cli.repo).await?, json_out).await,
        Command::Lab(a) => crate::admin::lab(a, json_out).await,
        Command::Bench(a) => crate::admin::bench(a, json_out).await,
        Command::Generate(a) => generate(a),
    }
}

async fn init(repo: &Option<String>, a: InitArgs, json_out: bool) -> Result<ExitCode> {
    let location = match repo {
        Some(r) => r.clone(),
        None => std::env::current_dir()?
            .join(tablepin::LOCAL_DIR)
            .to_string_lossy()
            .into_owned(),
    };
    let settings = if a.pyarrow_like {
        WriteSettings::pyarrow_like()
    } else {
        WriteSettings::default()
    };
    let r = Repo::init(&location, settings).await?;
    if json_out {
        output::json(&json!({ "repository": location, "write": r.config().write }))?;
    } else {
        println!("Initialized an empty tablepin repository in {location}");
    }
    Ok(ExitCode::SUCCESS)
}

async fn commit(repo: &Repo, a: CommitArgs, json_out: bool) -> Result<ExitCode> {
    let (schema, batches) = tablepin::files::read_table_file(&a.file)?;
    let opts = CommitOptions {
        mode: match a.mode {
            ModeArg::Overwrite => Mode::Overwrite,
            ModeArg::Append => Mode::Append,
            ModeArg::Upsert => Mode::Upsert,
            ModeArg::Delete => Mode::Delete,
        },
        key: a.key,
        allow_schema_change: a.allow_schema_change,
        message: a.message,
        branch: a.branch,
        time_ms: None,
    };
    let r = repo.commit(&a.table, schema, batches, &opts).await?;
    if json_out {
        output::json(&r)?;
    } else {
        let c = &r.change;
        println!(
            "[{} {}] {} '{}': {} rows (+{} ~{} -{}), {} new in {} blobs, checks: {}",
            r.branch,
            r.version.short(12),
            opts.mode.name(),
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

async fn compact(repo: &Repo, a: CompactArgs, json_out: bool) -> Result<ExitCode> {
    let opts = CommitOptions {
        message: a.message,
        branch: a.branch.clone(),
        ..Default::default()
    };
    let Some(r) = repo.compact(&a.table, &opts).await? else {
        if json_out {
            output::json(&json!({
                "compacted": false, "table": a.table, "branch": a.branch,
            }))?;
        } else {
            println!(
                "'{}' on {} is already compact; nothing written",
                a.table, a.branch
            );
        }
        return Ok(ExitCode::SUCCESS);
    };
    let after = repo.files(&r.version, &r.table).await?;
    let before = match &r.parent {
        Some(p) => repo.files(p, &r.table).await?,
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
        println!(
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
    let entries = repo.log(&a.branch).await?;
    if json_out {
        output::json(&entries)?;
        return Ok(ExitCode::SUCCESS);
    }
    for e in &entries {
        let rows: u64 = e.tables.values().map(|t| t.0).sum();
        if e.expired {
            println!(
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
            continue;
        }
        let (mut a_, mut c_, mut d_, mut b_) = (0, 0, 0, 0);
        let mut checks = tablepin::format::Checks::default();
        for c in e.changes.values() {
            a_ += c.rows_added;
            c_ += c.rows_changed;
            d_ += c.rows_deleted;
            b_ += c.bytes_new;
            checks = checks.or(c.checks);
        }
        let replaced = e
            .replaces
            .map(|r| format!(" (replaces {})", r.short(12)))
            .unwrap_or_default();
        println!(
            "{} {} {:?} rows={} +{} ~{} -{} new={} checks={}{}",
            e.id.short(12),
            time(e.time_ms),
            e.message,
            rows,
            a_,
            c_,
            d_,
            size(b_),
            fired(&checks),
            replaced
        );
    }
    Ok(ExitCode::SUCCESS)
}

async fn show(repo: &Repo, a: ShowArgs, json_out: bool) -> Result<ExitCode> {
    let id = repo.resolve(&a.rev).await?;
    let v = repo.version(&id).await?;
    let mut tables = Vec::new();
    for name in v.tables.keys() {
        let s = repo.snapshot(&id, name).await?;
        tables.push((name.clone(), s));
    }
    if json_out {
        let t: Vec<_> = tables
            .iter()
            .map(|(n, s)| {
                json!({
                    "table": n, "rows": s.rows, "content_hash": s.content_hash, "key": s.key,
                    "schema": s.schema.fields().iter().map(|f| json!({"name": f.name(), "type": f.data_type().to_string(), "nullable": f.is_nullable()})).collect::<Vec<_>>(),
                    "files": s.files,
                    "bytes": s.files.iter().map(|f| f.bytes + f.deletes.as_ref().map_or(0, |d| d.bytes)).sum::<u64>(),
                })
            })
            .collect();
        output::json(&json!({
            "version": id, "parents": v.parents, "time": time(v.time_ms), "author": v.author,
            "message": v.message, "changes": v.changes, "replaces": v.replaces, "tables": t,
        }))?;
        return Ok(ExitCode::SUCCESS);
    }
    println!("version {id}");
    for p in &v.parents {
        println!("parent  {p}");
    }
    println!(
        "time    {}\nauthor  {}\nmessage {}",
        time(v.time_ms),
        v.author,
        v.message
    );
    if let Some(r) = v.replaces {
        println!("replaces {r} (erasure)");
    }
    for (name, s) in &tables {
        let bytes: u64 = s
            .files
            .iter()
            .map(|f| f.bytes + f.deletes.as_ref().map_or(0, |d| d.bytes))
            .sum();
        println!(
            "\ntable '{name}': {} rows, key [{}], content hash {} (rowhash-v1)",
            s.rows,
            s.key.join(","),
            s.content_hash
        );
        println!(
            "  columns: {}",
            s.schema
                .fields()
                .iter()
                .map(|f| format!("{} {}", f.name(), f.data_type()))
                .collect::<Vec<_>>()
                .join(", ")
        );
        println!("  {} data files, {}", s.files.len(), size(bytes));
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
            println!(
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

#[allow(clippy::too_many_arguments)]
async fn refs(
    repo: &Repo,
    kind: RefKind,
    name: Option<String>,
    rev: String,
    message: String,
    list: bool,
    delete: bool,
    json_out: bool,
) -> Result<ExitCode> {
    let what = match kind {
        RefKind::Tag => "tag",
        RefKind::Branch => "branch",
    };
    if list || name.is_none() {
        if delete {
            return Err(usage(format!("--delete needs the {what} to delete")));
        }
        let all = repo.refs(kind).await?;
        if json_out {
            output::json(&all)?;
        } else {
            for r in all {
                println!(
                    "{:<24} {} {} {}",
                    r.name,
                    r.target.short(12),
                    time(r.time_ms),
                    r.message
                );
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    let name = name.unwrap_or_default();
    if delete {
        let old = repo.delete_ref(kind, &name).await?;
        if json_out {
            output::json(&json!({ "deleted": name, "was": old }))?;
        } else {
            println!("Deleted {what} '{name}' (was {})", old.short(12));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let target = repo.create_ref(kind, &name, &rev, &message).await?;
    if json_out {
        output::json(&json!({ what: name, "version": target }))?;
    } else {
        println!("Created {what} '{name}' at {}", target.short(12));
    }
    Ok(ExitCode::SUCCESS)
}

async fn export(repo: &Repo, a: ExportArgs, json_out: bool) -> Result<ExitCode> {
    tablepin::files::FileFormat::from_path(&a.output).map_err(|_| {
        usage(format!(
            "cannot export to '{}': name the file .parquet, .csv, .arrow or .feather",
            a.output
        ))
    })?;
    let read = repo.read(&a.rev, &a.table, None).await?;
    tablepin::files::write_table_file(&a.output, &read.schema, &read.batches)?;
    if json_out {
        output::json(&json!({
            "version": read.version, "table": a.table, "rows": read.stats.rows,
            "content_hash": read.snapshot.content_hash, "output": a.output,
        }))?;
    } else {
        println!(
            "Wrote {} rows of '{}' at {} to {} (content hash {})",
            read.stats.rows,
            a.table,
            read.version.short(12),
            a.output,
            read.snapshot.content_hash.short(16)
        );
    }
    Ok(ExitCode::SUCCESS)
}

async fn cat(repo: &Repo, a: CatArgs, json_out: bool) -> Result<ExitCode> {
    let read = repo.read(&a.rev, &a.table, None).await?;
    let mut left = a.limit;
    let mut shown = Vec::new();
    for b in &read.batches {
        if left == 0 {
            break;
        }
        let take = left.min(b.num_rows());
        shown.push(b.slice(0, take));
        left -= take;
    }
    if json_out {
        let mut buf = Vec::new();
        {
            let mut w = arrow::json::ArrayWriter::new(&mut buf);
            for b in &shown {
                w.write(b)?;
            }
            w.finish()?;
        }
        let rows: serde_json::Value = if buf.is_empty() {
            json!([])
        } else {
            serde_json::from_slice(&buf)?
        };
        output::json(
            &json!({ "version": read.version, "table": a.table, "rows": rows, "total_rows": read.stats.rows }),
        )?;
    } else {
        println!("{}", pretty_format_batches(&shown)?);
        println!(
            "{} of {} rows of '{}' at {}",
            shown.iter().map(|b| b.num_rows()).sum::<usize>(),
            read.stats.rows,
            a.table,
            read.version.short(12)
        );
    }
    Ok(ExitCode::SUCCESS)
}

async fn verify(repo: &Repo, a: VerifyArgs, json_out: bool) -> Result<ExitCode> {
    let bar = Bar::new();
    let report = repo.verify(&bar).await?;
    let erased = if a.erased {
        Some(crate::admin::verify_erased(repo, &bar).await?)
    } else {
        None
    };
    let ok = report.problems.is_empty() && erased.as_ref().is_none_or(|e| e.ok());
    if json_out {
        output::json(&json!({ "ok": ok, "report": report, "erased": erased }))?;
    } else {
        println!(
            "Checked {} blobs ({}) at {:.0} MB/s, {} refs, {} versions ({} expired), {} snapshots, {} rows hashed in {:.2} s",
            report.blobs,
            size(report.bytes),
            report.mb_per_s,
            report.refs,
            report.versions,
            report.expired,
            report.snapshots,
            report.rows_hashed,
            report.seconds
        );
        for p in &report.problems {
            println!("problem: {p}");
        }
        if let Some(e) = &erased {
            crate::admin::print_erased(e);
        }
        println!("{}", if ok { "OK" } else { "FAILED" });
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(5)
    })
}

fn generate(a: GenerateArgs) -> Result<ExitCode> {
    let mut t = tablepin_datagen::sales(a.start, a.rows, a.seed);
    if a.returns > 0 {
        let ids = tablepin_datagen::pick_ids(a.rows as i64, a.returns, a.seed.wrapping_add(7));
        let positions: Vec<i64> = ids.clone();
        let changed = tablepin_datagen::with_returns(&t, &positions, 1);
        // Replace the changed rows: rows not picked, then the changed ones.
        let keep: Vec<u32> = (0..a.rows as u32)
            .filter(|i| !ids.contains(&(*i as i64)))
            .collect();
        let kept = arrow::compute::take_record_batch(&t, &arrow::array::UInt32Array::from(keep))?;
        t = arrow::compute::concat_batches(&t.schema(), [&kept, &changed])?;
    }
    tablepin::files::write_table_file(&a.output, &t.schema(), &[t.clone()])?;
    if !matches!(a.output.as_str(), "-") {
        eprintln!("Wrote {} generated rows to {}", t.num_rows(), a.output);
    }
    Ok(ExitCode::SUCCESS)
}
