//! Comparing, querying and restoring versions: `diff`, `sql`, `restore`.

use std::io::Write as _;
use std::process::ExitCode;

use anyhow::Result;
use arrow::array::{Array, AsArray, RecordBatch};
use arrow::util::display::{ArrayFormatter, FormatOptions};
use serde_json::json;
use tablepin::{Repo, RestoreOptions, TableDiff};

use crate::cli::{DiffArgs, RestoreArgs, SqlArgs};
use crate::commands::{check_output, rows_json, usage, Chunks, JsonRows};
use crate::output;

pub async fn diff(repo: &Repo, a: DiffArgs, json_out: bool) -> Result<ExitCode> {
    if let Some(out) = &a.output {
        check_output("write the diff to", out)?;
    }
    let d = repo.diff(&a.old, &a.new, a.table.as_deref()).await?;
    if let Some(out) = &a.output {
        let [t] = d.tables.as_slice() else {
            return Err(usage(format!(
                "-o writes the rows of one table, and {} and {} have {}: name the table (tablepin diff {} {} TABLE -o {out})",
                a.old,
                a.new,
                d.tables.iter().map(|t| t.table.as_str()).collect::<Vec<_>>().join(", "),
                a.old,
                a.new,
            )));
        };
        tablepin::files::write_table_file(out, &t.rows.schema(), std::slice::from_ref(&t.rows))?;
    }
    let limit = if a.limit == 0 { usize::MAX } else { a.limit };
    if json_out {
        let mut tables = Vec::new();
        for t in &d.tables {
            let mut v = serde_json::to_value(t)?;
            if !a.stat {
                let shown = t.rows.slice(0, t.rows.num_rows().min(limit));
                v["rows"] = rows_json(std::slice::from_ref(&shown))?;
            }
            tables.push(v);
        }
        output::json(&json!({
            "old": d.old, "new": d.new, "tables": tables, "output": a.output,
        }))?;
        return Ok(ExitCode::SUCCESS);
    }
    outln!("diff {} {}", d.old.short(12), d.new.short(12));
    for t in &d.tables {
        outln!("{}", summary(t));
        if !a.stat {
            print_rows(t, limit)?;
        }
    }
    if let Some(out) = &a.output {
        outln!(
            "Wrote {} rows to {out}",
            d.tables.iter().map(|t| t.rows.num_rows()).sum::<usize>()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// One table's counts, columns and what the diff read, in a few lines.
fn summary(t: &TableDiff) -> String {
    let c = &t.counts;
    let state = match (t.old_rows, t.new_rows) {
        (None, _) => " (new table)".to_string(),
        (_, None) => " (table dropped)".to_string(),
        _ => String::new(),
    };
    let key = if t.key.is_empty() {
        "unkeyed: rows compared as a multiset".to_string()
    } else {
        format!("key {}", t.key.join(", "))
    };
    let mut out = format!(
        "table '{}'{state} ({key}): {} added, {} removed, {} modified",
        t.table, c.added, c.removed, c.modified
    );
    if !c.modified_by_column.is_empty() {
        let cols: Vec<String> = c
            .modified_by_column
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        out.push_str(&format!(" (columns: {})", cols.join(", ")));
    }
    for (what, cols) in [
        ("added", &t.columns.added),
        ("dropped", &t.columns.dropped),
        ("retyped", &t.columns.retyped),
    ] {
        if !cols.is_empty() {
            out.push_str(&format!("\n  columns {what}: {}", cols.join(", ")));
        }
    }
    out.push_str(&format!(
        "\n  read {} data files ({} rows); {} shared, not read",
        t.stats.files_read, t.stats.rows_read, t.stats.files_shared
    ));
    out
}

/// Prints up to `limit` differing rows: `- key: row` removed, `+ key: row`
/// added, `~ key: column old -> new` modified.
fn print_rows(t: &TableDiff, limit: usize) -> Result<()> {
    let rows = &t.rows;
    let kinds = rows.column(0).as_string::<i32>();
    let opts = FormatOptions::default().with_null("null");
    let names: Vec<String> = rows
        .schema()
        .fields()
        .iter()
        .skip(1)
        .step_by(2)
        .map(|f| f.name().trim_start_matches("from_").to_string())
        .collect();
    let fmt = |i: usize| ArrayFormatter::try_new(rows.column(i).as_ref(), &opts);
    let formatters = (1..rows.num_columns())
        .map(fmt)
        .collect::<Result<Vec<_>, _>>()?;
    // Column k's old value is formatter 2k, its new value 2k + 1.
    let value =
        |k: usize, new: bool, r: usize| formatters[2 * k + usize::from(new)].value(r).to_string();
    let key_at: Vec<usize> = t
        .key
        .iter()
        .filter_map(|k| names.iter().position(|n| n == k))
        .collect();
    for r in 0..rows.num_rows().min(limit) {
        let kind = kinds.value(r);
        let new = kind != "removed";
        let key = if key_at.is_empty() {
            String::new()
        } else {
            let parts: Vec<String> = key_at
                .iter()
                .map(|&k| format!("{}={}", names[k], value(k, new, r)))
                .collect();
            format!("{}: ", parts.join(", "))
        };
        let body: Vec<String> = match kind {
            "modified" => (0..names.len())
                .filter(|&k| value(k, false, r) != value(k, true, r) || !same_validity(rows, k, r))
                .map(|k| {
                    format!(
                        "{} {} -> {}",
                        names[k],
                        value(k, false, r),
                        value(k, true, r)
                    )
                })
                .collect(),
            _ => (0..names.len())
                .filter(|k| !key_at.contains(k))
                .map(|k| format!("{}={}", names[k], value(k, new, r)))
                .collect(),
        };
        let sign = match kind {
            "added" => '+',
            "removed" => '-',
            _ => '~',
        };
        outln!("  {sign} {key}{}", body.join(", "));
    }
    if rows.num_rows() > limit {
        outln!(
            "  … {} more rows (--limit 0 prints all; -o FILE writes them)",
            rows.num_rows() - limit
        );
    }
    Ok(())
}

/// True when column `k`'s old and new value at row `r` are both null or
/// both not (a null and the text "null" print alike).
fn same_validity(rows: &RecordBatch, k: usize, r: usize) -> bool {
    rows.column(1 + 2 * k).is_valid(r) == rows.column(2 + 2 * k).is_valid(r)
}

pub async fn restore(repo: &Repo, a: RestoreArgs, json_out: bool) -> Result<ExitCode> {
    let opts = RestoreOptions {
        branch: a.branch.clone(),
        table: a.table.clone(),
        message: a.message.clone(),
        retry_for: a.retry_for.into(),
    };
    let r = repo.restore(&a.rev, &opts).await?;
    if json_out {
        output::json(&r)?;
        return Ok(ExitCode::SUCCESS);
    }
    let what = match &a.table {
        Some(t) => format!("table '{t}'"),
        None => "the tables".to_string(),
    };
    let Some(v) = r.version else {
        outln!(
            "{} already has {what} of {} ({}); nothing written",
            r.branch,
            a.rev,
            r.from.short(12)
        );
        return Ok(ExitCode::SUCCESS);
    };
    outln!(
        "[{} {}] restored {what} of {} ({}); no data written",
        r.branch,
        v.short(12),
        a.rev,
        r.from.short(12)
    );
    for (table, c) in &r.changes {
        outln!(
            "  {table}: {} added, {} changed, {} deleted",
            c.rows_added,
            c.rows_changed,
            c.rows_deleted
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn sql(repo: &Repo, a: SqlArgs, json_out: bool) -> Result<ExitCode> {
    if let Some(out) = &a.output {
        check_output("write the result to", out)?;
    }
    let mut q = repo.sql_stream(&a.query).await?;
    let mut rows = 0usize;
    if let Some(out) = &a.output {
        let mut file = tablepin::files::TableFileWriter::create(out, &q.schema)?;
        while let Some(b) = q.next_batch().await {
            let b = b?;
            rows += b.num_rows();
            file.write(&b)?;
        }
        file.finish()?;
        if json_out {
            output::json(&json!({ "row_count": rows, "output": out, "tables": q.tables() }))?;
        } else {
            outln!("Wrote {rows} rows to {out}");
        }
    } else if json_out {
        // One object, written as the rows come: `rows` first, in column
        // order, then what follows them.
        let mut w = std::io::stdout().lock();
        write!(w, "{{\n  \"rows\": ")?;
        let mut json_rows = JsonRows::new(&mut w)?;
        while let Some(b) = q.next_batch().await {
            json_rows.write(&mut w, &b?)?;
        }
        let rows = json_rows.finish(&mut w)?;
        let tail = output::json_text(&json!({ "row_count": rows, "tables": q.tables() }))?;
        let fields = tail.trim_start().trim_start_matches('{');
        writeln!(w, ",{fields}")?;
        return Ok(ExitCode::SUCCESS);
    } else {
        let mut table = Chunks::new(q.schema.clone());
        while let Some(b) = q.next_batch().await {
            let b = b?;
            rows += b.num_rows();
            table.push(b)?;
        }
        table.finish()?;
        outln!("{rows} rows");
    }
    for t in q.tables() {
        outln!(
            "  {} = version {}: read {} data files, {} columns decoded",
            t.name,
            t.version.short(12),
            t.stats.files,
            t.stats.columns_decoded
        );
    }
    Ok(ExitCode::SUCCESS)
}
