//! Retention, erasure, audit, the lab and the benchmarks: thin wrappers
//! that plan, print the plan, and apply it unless `--dry-run`.

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
        let plan = repo.gc().plan(&policy).await?;
        if json_out {
            output::json(&json!({ "dry_run": true, "plan": plan }))?;
        } else {
            print_gc_plan(&plan)?;
            outln!("(dry run: nothing was changed)");
        }
        return Ok(ExitCode::SUCCESS);
    }
    let report = repo.gc().run(&policy).await?;
    if json_out {
        output::json(&report)?;
    } else {
        print_gc_plan(&report.plan)?;
        outln!(
            "Deleted {} blobs ({}), {} leftover temporary files and {} outboards of blobs not stored, wrote {} tombstones; {} blobs spared (in use by a concurrent commit or younger than the grace period)",
            report.blobs_deleted,
            size(report.bytes_freed),
            report.leftovers_deleted,
            report.orphan_outboards_deleted,
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
        let report = repo.erasure().apply_saved(&saved, &a.predicate).await?;
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
        let plan = repo.erasure().plan(&options).await?;
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
    let (plan, report) = repo.erasure().run(&options).await?;
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
    let records = repo.erasure().audit().await?;
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

pub async fn upgrade(repo: &Repo, a: UpgradeArgs, json_out: bool) -> Result<ExitCode> {
    if a.dry_run {
        let plan = repo.upgrade_plan().await?;
        if json_out {
            output::json(&json!({ "dry_run": true, "plan": plan }))?;
        } else {
            outln!(
                "Would upgrade the repository from format {} to {}: {} blobs of 1 MiB or more to read ({}) and give an outboard",
                plan.from,
                plan.to,
                plan.blobs.len(),
                size(plan.bytes)
            );
            outln!("(dry run: nothing was changed)");
        }
        return Ok(ExitCode::SUCCESS);
    }
    let bar = output::Bar::new();
    let report = repo.upgrade(&bar).await?;
    if json_out {
        output::json(&report)?;
    } else if report.from == report.to && report.outboards_written == 0 {
        outln!(
            "The repository is of format {} already; nothing to do",
            report.to
        );
    } else {
        outln!(
            "Upgraded the repository from format {} to {}: {} outboards written, {} read in {:.2} s",
            report.from,
            report.to,
            report.outboards_written,
            size(report.bytes_read),
            report.seconds
        );
    }
    Ok(ExitCode::SUCCESS)
}
