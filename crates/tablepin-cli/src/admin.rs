//! Retention, erasure, audit, the lab and the benchmarks: thin wrappers
//! that plan, print the plan, and apply it unless `--dry-run`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use serde_json::json;
use tablepin::{EraseOptions, ErasedCheck, GcPolicy, Repo};

use crate::cli::*;
use crate::commands::UsageError;
use crate::output::{self, size, time};

pub async fn gc(repo: &Repo, a: GcArgs, json_out: bool) -> Result<ExitCode> {
    if a.keep_tags && a.no_keep_tags {
        return Err(anyhow::Error::new(UsageError(
            "--keep-tags and --no-keep-tags contradict each other; give one".into(),
        )));
    }
    let policy = GcPolicy {
        keep_last: a.keep_last,
        keep_within_ms: a.keep_within.map(|d| d.as_millis() as i64),
        keep_tags: !a.no_keep_tags,
        grace_ms: a.grace.as_millis() as i64,
        sole_writer: a.sole_writer,
        now_ms: None,
    };
    if a.dry_run {
        let plan = repo.gc_plan(&policy).await?;
        if json_out {
            output::json(&json!({ "dry_run": true, "plan": plan }))?;
        } else {
            print_gc_plan(&plan)?;
            outln!("(dry run: nothing was changed)");
        }
        return Ok(ExitCode::SUCCESS);
    }
    let report = repo.gc(&policy).await?;
    if json_out {
        output::json(&report)?;
    } else {
        print_gc_plan(&report.plan)?;
        outln!(
            "Deleted {} blobs ({}) and {} leftover temporary files, wrote {} tombstones; {} blobs spared (in use by a concurrent commit or younger than the grace period)",
            report.blobs_deleted,
            size(report.bytes_freed),
            report.leftovers_deleted,
            report.tombstones,
            report.blobs_spared
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn print_gc_plan(p: &tablepin::GcPlan) -> Result<()> {
    outln!(
        "Versions: {} kept, {} expired. Blobs: {} kept ({}), {} to delete ({}), {} in the grace period.",
        p.versions_kept.len(),
        p.versions_expired.len(),
        p.blobs_kept,
        size(p.bytes_kept),
        p.blobs_deleted.len(),
        size(p.bytes_freed),
        p.blobs_in_grace
    );
    for t in &p.tags {
        outln!(
            "  tag {:<24} {} {}",
            t.name,
            t.version.short(12),
            if t.readable {
                "stays readable"
            } else {
                "EXPIRES (the tag is deleted)"
            }
        );
    }
    if p.blobs_holding_erased > 0 {
        outln!(
            "  warning: {} kept data files still hold rows an erasure removed; run `tablepin erase` again with the same predicate",
            p.blobs_holding_erased
        );
    }
    Ok(())
}

pub async fn erase(repo: &Repo, a: EraseArgs, json_out: bool) -> Result<ExitCode> {
    if let Some(path) = &a.plan {
        let saved = saved_plan(path, &a.table)?;
        let report = repo.erase_apply_saved(&saved, &a.predicate).await?;
        return erased(&report, json_out);
    }
    let Some(reason) = a.reason.filter(|r| !r.trim().is_empty()) else {
        return Err(anyhow::Error::new(UsageError(
            "an erasure needs a reason for the audit record: pass --reason \"…\"".into(),
        )));
    };
    let options = EraseOptions {
        table: a.table.clone(),
        predicate: a.predicate,
        reason,
    };
    let print_plan = |p: &tablepin::ErasePlan| -> Result<()> {
        outln!(
            "Erase from table '{}': {} stored rows in {} data files; {} versions replaced; {} to write.",
            p.table,
            p.rows_removed,
            p.files.len(),
            p.versions.len(),
            size(p.bytes_to_write)
        );
        for v in p
            .versions
            .iter()
            .filter(|v| v.rows_removed > 0 || !v.refs.is_empty())
        {
            outln!(
                "  version {} -> {}: {} rows removed{}",
                v.old.short(12),
                v.new.short(12),
                v.rows_removed,
                if v.refs.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", v.refs.join(", "))
                }
            );
        }
        if p.resumes {
            outln!("  (finishes an erasure with this predicate that was interrupted)");
        }
        if !p.not_applied.is_empty() {
            outln!("{}", not_applied(&p.not_applied));
        }
        Ok(())
    };
    let nothing = |plan: &tablepin::ErasePlan| -> Result<ExitCode> {
        if json_out {
            output::json(&json!({ "plan": plan, "applied": false }))?;
        } else {
            outln!("No stored row of '{}' matches; nothing to erase.", a.table);
            if !plan.not_applied.is_empty() {
                outln!("{}", not_applied(&plan.not_applied));
            }
        }
        Ok(ExitCode::SUCCESS)
    };
    if a.dry_run {
        let plan = repo.erase_plan(&options).await?;
        if plan.is_empty() {
            return nothing(&plan);
        }
        if json_out {
            output::json(&json!({ "dry_run": true, "plan": plan }))?;
        } else {
            print_plan(&plan)?;
            outln!("(dry run: nothing was changed)");
        }
        return Ok(ExitCode::SUCCESS);
    }
    // Planned and applied under one hold of the gc/erasure lease.
    let (plan, report) = repo.erase(&options).await?;
    let Some(report) = report else {
        return nothing(&plan);
    };
    if !json_out {
        print_plan(&plan)?;
    }
    erased(&report, json_out)
}

/// The note on versions an erasure's predicate could not apply to.
fn not_applied(versions: &[tablepin::VersionId]) -> String {
    let ids: Vec<String> = versions.iter().map(|v| v.short(12)).collect();
    format!(
        "  note: {} versions hold files without a column the condition names, so none of their rows can match there: {}",
        ids.len(),
        ids.join(", ")
    )
}

/// An erasure plan saved from `erase --dry-run --json`, for `table`.
fn saved_plan(path: &std::path::Path, table: &str) -> Result<tablepin::ErasePlan> {
    let plan: tablepin::ErasePlan = crate::commands::read_saved_plan(path, "an erasure", "erase")?;
    if plan.table != table {
        return Err(anyhow::Error::new(UsageError(format!(
            "the plan {} erases from table '{}', not '{table}'",
            path.display(),
            plan.table
        ))));
    }
    Ok(plan)
}

/// Reports an applied erasure.
fn erased(report: &tablepin::EraseReport, json_out: bool) -> Result<ExitCode> {
    if json_out {
        output::json(report)?;
    } else {
        outln!(
            "Erased: audit record {} written, {} blobs deleted, {} written in {:.2} s. Run `tablepin verify --erased` to prove it.",
            report.audit.seq,
            report.audit.blobs_deleted,
            size(report.audit.bytes_written),
            report.seconds
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn audit(repo: &Repo, json_out: bool) -> Result<ExitCode> {
    let records = repo.audit().await?;
    if json_out {
        output::json(&records)?;
        return Ok(ExitCode::SUCCESS);
    }
    if records.is_empty() {
        outln!("No erasures recorded.");
    }
    for r in &records {
        let rows: u64 = r.versions.iter().map(|v| v.rows_removed).sum();
        outln!(
            "erasure {} at {} by {} on table '{}': {:?}\n  predicate hash {}\n  {} versions rewritten ({} rows removed across them), {} blobs deleted, {} written, {} erased rows fingerprinted",
            r.seq,
            time(r.time_ms),
            r.author,
            r.table,
            r.reason,
            r.predicate_hash,
            r.versions.len(),
            rows,
            r.blobs_deleted,
            size(r.bytes_written),
            r.fingerprint.rows.len()
        );
        for m in &r.moved_refs {
            outln!(
                "  {} {}: {} -> {} (content {} -> {})",
                m.kind
                    .dir()
                    .trim_end_matches('s')
                    .replace("branche", "branch"),
                m.name,
                m.old.short(12),
                m.new.short(12),
                m.old_content_hash.short(12),
                m.new_content_hash.short(12)
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn print_erased(e: &ErasedCheck) -> Result<()> {
    outln!(
        "Erasures: {} records checked against {} data files ({} rows): {}",
        e.records,
        e.files,
        e.rows,
        if e.ok() {
            "no stored blob holds an erased row".to_string()
        } else {
            format!("{} blobs hold erased rows", e.holders.len())
        }
    );
    for (b, n) in &e.holders {
        outln!("problem: blob {b} holds {n} erased rows");
    }
    if e.cache_removed > 0 {
        outln!(
            "Removed {} blobs from this machine's cache that the repository no longer holds",
            e.cache_removed
        );
    }
    Ok(())
}

pub async fn lab(a: LabArgs, json_out: bool) -> Result<ExitCode> {
    let opts = tablepin_lab::run::LabOptions {
        data: a.data,
        out: PathBuf::from(&a.out),
        customer: a.customer,
        verbose: !json_out,
        dvc: a.dvc,
        sample: a.sample,
    };
    let r = tablepin_lab::run::run(&opts).await?;
    if json_out {
        output::json(&r)?;
    } else {
        print_lab(&r)?;
        outln!(
            "\nWrote {0}/results.json, {0}/report.md, {0}/playground.html and charts in {0}/",
            a.out
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn print_lab(r: &serde_json::Value) -> Result<()> {
    let g = |k: &str| {
        tablepin_lab::run::get(r, k)
            .cloned()
            .unwrap_or(serde_json::Value::Null)
    };
    let mb = |k: &str| {
        g(k).as_f64()
            .map(|b| format!("{:.1} MB", b / 1e6))
            .unwrap_or_default()
    };
    outln!(
        "Online Retail II: {} sale lines, {} cancellations, {} returns matched, {} changed nothing",
        g("sale_lines"),
        g("cancellations"),
        g("returns_matched"),
        g("returns_changed_nothing")
    );
    outln!(
        "{} commits; last version {} rows ({} in its month files)",
        g("commits"),
        g("last_version.rows"),
        mb("last_version.month_bytes")
    );
    outln!("Bytes stored for all versions:");
    for l in [
        "copy",
        "copy_hashed",
        "month",
        "week",
        "changes",
        "tablepin_pyarrow",
        "tablepin",
    ] {
        outln!("  {l:<17} {:>10}", mb(&format!("stored.{l}")));
    }
    outln!(
        "tablepin stores all versions in {:.2}x the last version's month files; tags read back: {}",
        g("stored_over_last_version.tablepin")
            .as_f64()
            .unwrap_or(0.0),
        g("tags_read_back_of")
    );
    outln!(
        "Erasure: {} lines of customer {}; tablepin erase wrote {} in {:.2}s",
        g("erasure.lines"),
        g("erasure.customer"),
        mb("erasure.tablepin.bytes_written"),
        g("erasure.tablepin.seconds").as_f64().unwrap_or(0.0)
    );
    outln!(
        "Ran in {:.1} s, peak memory {:.0} MB",
        g("seconds").as_f64().unwrap_or(0.0),
        g("peak_rss_bytes").as_f64().unwrap_or(0.0) / 1e6
    );
    Ok(())
}

pub async fn bench(a: BenchArgs, json_out: bool) -> Result<ExitCode> {
    if let Some(remote) = &a.remote {
        let r = tablepin_lab::remote_bench::run(remote, a.rows, a.repeat, a.latency.into()).await?;
        if json_out {
            output::json(&r)?;
        } else {
            outln!(
                "{} rows, median of {} (targets: a weekly commit in at most 15 requests and under 0.5 s with {} ms per request; a head read in at most one GET per data file + 4)",
                r["rows"], r["repeat"], r["latency_ms"]
            );
            for s in r["stores"].as_array().into_iter().flatten() {
                outln!(
                    "{:<28} weekly commit {:>7.1} ms, {:>3} requests; head read {:>7.1} ms, {:>3} requests ({} GET, {} data files)",
                    s["store"].as_str().unwrap_or(""),
                    s["weekly_commit_seconds_median"].as_f64().unwrap_or(0.0) * 1e3,
                    s["weekly_commit_requests_median"],
                    s["head_read_seconds_median"].as_f64().unwrap_or(0.0) * 1e3,
                    s["head_read_requests_median"],
                    s["head_read_gets_median"],
                    s["head_data_files"],
                );
            }
            for (name, c) in r["commands"].as_object().into_iter().flatten() {
                outln!(
                    "{name:<40} {:>4} requests ({} GET, {} HEAD, {} PUT, {} LIST, {} DELETE)",
                    c["get"].as_u64().unwrap_or(0)
                        + c["head"].as_u64().unwrap_or(0)
                        + c["put"].as_u64().unwrap_or(0)
                        + c["list"].as_u64().unwrap_or(0)
                        + c["delete"].as_u64().unwrap_or(0)
                        + c["copy"].as_u64().unwrap_or(0),
                    c["get"],
                    c["head"],
                    c["put"],
                    c["list"],
                    c["delete"]
                );
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    let opts = tablepin_lab::bench::BenchOptions {
        rows: a.rows,
        repeat: a.repeat,
        data: a.data,
        verbose: !json_out,
    };
    let r = tablepin_lab::bench::run(&opts).await?;
    if json_out {
        output::json(&r)?;
    } else {
        let w = &r["weekly_commit"];
        let h = &r["read_head"];
        let v = &r["verify"];
        outln!(
            "Table: {} generated rows, {} stored; tablepin used {} thread(s) (TABLEPIN_THREADS), the plain reader and writer one",
            r["rows"],
            size(w["table_bytes"].as_u64().unwrap_or(0)),
            r["threads"]
        );
        outln!(
            "weekly commit (10,000 appended + 150 changed): {:.1} ms vs full Parquet rewrite {:.1} ms: ratio {:.3} (target < 0.05); {} new ({:.2}% of the table)",
            w["seconds_median"].as_f64().unwrap_or(0.0) * 1e3,
            w["full_rewrite_seconds_median"].as_f64().unwrap_or(0.0) * 1e3,
            w["ratio"].as_f64().unwrap_or(0.0),
            size(w["bytes_new_median"].as_f64().unwrap_or(0.0) as u64),
            100.0 * w["bytes_share"].as_f64().unwrap_or(0.0)
        );
        if let Some(cpu) = w["cpu_ratio"].as_f64() {
            outln!(
                "  in CPU time on all threads, summed over the runs: {:.0} ms vs {:.0} ms, ratio {cpu:.3}",
                w["cpu_seconds"].as_f64().unwrap_or(0.0) * 1e3,
                w["full_rewrite_cpu_seconds"].as_f64().unwrap_or(0.0) * 1e3,
            );
        }
        outln!(
            "read head: {:.1} ms vs one plain Parquet file {:.1} ms, both keeping every batch: ratio {:.3} (target <= 1.1); the plain read dropping each batch: {:.1} ms, ratio {:.3}",
            h["seconds_median"].as_f64().unwrap_or(0.0) * 1e3,
            h["plain_parquet_seconds_median"].as_f64().unwrap_or(0.0) * 1e3,
            h["ratio"].as_f64().unwrap_or(0.0),
            h["plain_streamed_seconds_median"].as_f64().unwrap_or(0.0) * 1e3,
            h["ratio_to_streamed"].as_f64().unwrap_or(0.0)
        );
        outln!(
            "verify: {:.0} MB/s of blobs, {:.2} s in all",
            v["mb_per_s"].as_f64().unwrap_or(0.0),
            v["seconds"].as_f64().unwrap_or(0.0)
        );
        if let Some(l) = r.get("lab_gc_erase") {
            outln!(
                "lab gc/erase: {}",
                serde_json::to_string_pretty(l).unwrap_or_default()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
