//! `merge` and `revert`: options from the command line, the result as
//! text or JSON, conflicts written to a file on request.

use std::collections::BTreeMap;
use std::process::ExitCode;

use anyhow::Result;
use serde_json::json;
use tablepin::{MergeOptions, MergeOutcome, MergeResult, Repo, Strategy};

use crate::cli::{MergeArgs, RevertArgs, SettleArgs};
use crate::commands::{check_output, rows_json, usage};
use crate::output;

/// Exit code of a merge left with conflicts (as for other conflicts).
const CONFLICTS: u8 = 4;

pub async fn merge(repo: &Repo, a: MergeArgs, json_out: bool) -> Result<ExitCode> {
    let opts = options(repo, a.into.clone(), &a.settle).await?;
    let r = repo.merge(&a.source, &opts).await?;
    report(&r, &a.settle, json_out, "merge")
}

pub async fn revert(repo: &Repo, a: RevertArgs, json_out: bool) -> Result<ExitCode> {
    let opts = options(repo, a.branch.clone(), &a.settle).await?;
    let r = repo.revert(&a.rev, &opts).await?;
    report(&r, &a.settle, json_out, "revert")
}

/// The engine's options from the flags: which side settles which table's
/// conflicts, and the resolution files, read.
async fn options(repo: &Repo, into: String, s: &SettleArgs) -> Result<MergeOptions> {
    if let Some(out) = &s.output {
        check_output("write the conflicts to", out)?;
    }
    let mut opts = MergeOptions {
        into,
        message: s.message.clone(),
        retry_for: s.retry_for.into(),
        ..MergeOptions::default()
    };
    for (given, strategy) in [(&s.ours, Strategy::Ours), (&s.theirs, Strategy::Theirs)] {
        let Some(tables) = given else { continue };
        if tables.is_empty() {
            if opts.strategy.is_some() {
                return Err(usage(
                    "--ours and --theirs both settle every table: give one, or name tables (--ours=TABLE)",
                ));
            }
            opts.strategy = Some(strategy);
        }
        for t in tables {
            if opts.table_strategy.insert(t.clone(), strategy).is_some() {
                return Err(usage(format!(
                    "table '{t}' is settled for both sides: give it to --ours or to --theirs"
                )));
            }
        }
    }
    for r in &s.resolved {
        let (table, file) = match r.split_once('=') {
            Some((t, f)) if !t.is_empty() && !t.contains(['/', '\\']) => (t.to_string(), f),
            _ => (only_table(repo, &opts.into, r).await?, r.as_str()),
        };
        let rows = tablepin::files::read_table_file(file)?;
        if opts.resolved.insert(table.clone(), rows).is_some() {
            return Err(usage(format!(
                "--resolved gives table '{table}' twice: give one file per table"
            )));
        }
    }
    Ok(opts)
}

/// The table a resolution file without TABLE= is for: the branch's one
/// table.
async fn only_table(repo: &Repo, branch: &str, given: &str) -> Result<String> {
    let head = repo.resolve(branch).await?;
    let v = repo.version(&head).await?;
    match v.tables.keys().collect::<Vec<_>>().as_slice() {
        [one] => Ok((*one).clone()),
        many => Err(usage(format!(
            "--resolved {given}: branch '{branch}' has tables {}; name the table (--resolved TABLE={given})",
            many.iter().map(|t| t.as_str()).collect::<Vec<_>>().join(", ")
        ))),
    }
}

/// The result as text or JSON, the conflicts written to `-o`; exit code 4
/// when conflicts are left.
fn report(r: &MergeResult, s: &SettleArgs, json_out: bool, what: &str) -> Result<ExitCode> {
    let conflicted: Vec<_> = r
        .tables
        .iter()
        .filter(|t| t.conflict_rows.is_some())
        .collect();
    let mut written = None;
    if let Some(out) = &s.output {
        let chosen =
            match (&s.table, conflicted.as_slice()) {
                (Some(name), _) => conflicted.iter().find(|t| &t.table == name),
                (None, [one]) => Some(one),
                (None, []) => None,
                (None, many) => {
                    return Err(usage(format!(
                    "-o writes one table's conflicts, and {} have conflicts: name one with --table",
                    many.iter().map(|t| t.table.as_str()).collect::<Vec<_>>().join(", ")
                )))
                }
            };
        if let Some(rows) = chosen.and_then(|t| t.conflict_rows.as_ref()) {
            tablepin::files::write_table_file(out, &rows.schema(), std::slice::from_ref(rows))?;
            written = Some(out.clone());
        }
    }
    let code = match r.outcome {
        MergeOutcome::Conflicts => ExitCode::from(CONFLICTS),
        _ => ExitCode::SUCCESS,
    };
    if json_out {
        let mut v = serde_json::to_value(r)?;
        for (i, t) in r.tables.iter().enumerate() {
            if let Some(rows) = &t.conflict_rows {
                v["tables"][i]["conflict_rows"] = rows_json(std::slice::from_ref(rows))?;
            }
        }
        v["output"] = json!(written);
        output::json(&v)?;
        return Ok(code);
    }
    print_text(r, what, written.as_deref())?;
    Ok(code)
}

fn print_text(r: &MergeResult, what: &str, written: Option<&str>) -> Result<()> {
    match r.outcome {
        MergeOutcome::UpToDate => {
            outln!(
                "{} already holds {} ({}); nothing written",
                r.into,
                r.source,
                r.theirs.short(12)
            );
            return Ok(());
        }
        MergeOutcome::FastForward => {
            outln!(
                "[{} {}] fast-forward to {}; no data written",
                r.into,
                r.theirs.short(12),
                r.source
            );
            return Ok(());
        }
        MergeOutcome::Merged => {
            let v = r.version.map(|v| v.short(12)).unwrap_or_default();
            outln!(
                "[{} {v}] {what} {} (base {})",
                r.into,
                r.source,
                r.base.map_or("none".into(), |b| b.short(12))
            );
        }
        MergeOutcome::Conflicts => {
            outln!(
                "{what} {} into {} stopped: keys changed differently on both sides; {} is unchanged",
                r.source,
                r.into,
                r.into
            );
        }
    }
    let mut hints = BTreeMap::new();
    for t in &r.tables {
        let c = &t.change;
        let mut line = format!(
            "  {}: {} ({} added, {} changed, {} deleted",
            t.table, t.how, c.rows_added, c.rows_changed, c.rows_deleted
        );
        if t.same > 0 {
            line.push_str(&format!(", {} alike on both sides", t.same));
        }
        if t.conflicts > 0 {
            line.push_str(&format!(", {} conflicts", t.conflicts));
        }
        line.push(')');
        outln!("{line}");
        if let Some(rows) = &t.conflict_rows {
            hints.insert(t.table.clone(), rows.num_rows());
        }
    }
    if let Some(out) = written {
        outln!("Wrote the conflicts to {out}");
    }
    for (table, n) in hints {
        outln!(
            "  {n} conflicting keys in '{table}': settle with --ours={table} or --theirs={table}, or write them out (-o conflicts.parquet --table {table}), fix them, and run again with --resolved {table}=FILE"
        );
    }
    Ok(())
}
