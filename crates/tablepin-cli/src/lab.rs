//! The lab and the bench (`--features lab`): the Online Retail II
//! experiment and the engine's benchmarks, for the project's own builds.
//! The installed binary leaves them out, and with them the lab's charts,
//! spreadsheet reader and experiment (plotters, calamine, zip).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;

use crate::cli::{BenchArgs, LabArgs};
use crate::output::{self, size};

pub async fn lab(a: LabArgs, json_out: bool) -> Result<ExitCode> {
    let opts = tablepin_lab::run::LabOptions {
        data: a.data,
        out: PathBuf::from(&a.out),
        customer: a.customer,
        verbose: !json_out,
        dvc: a.dvc,
        sample: a.sample,
        env: tablepin_lab::data::Env {
            lab_data: std::env::var("TABLEPIN_LAB_DATA").ok(),
            xdg_cache_home: std::env::var_os("XDG_CACHE_HOME").map(PathBuf::from),
            home: std::env::var_os("HOME").map(PathBuf::from),
            path: std::env::var_os("PATH"),
            temp_dir: std::env::temp_dir(),
        },
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
            print_remote_bench(&r)?;
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
        print_bench(&r)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `bench --remote`'s figures as text.
fn print_remote_bench(r: &serde_json::Value) -> Result<()> {
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
    Ok(())
}

/// `bench`'s figures as text.
fn print_bench(r: &serde_json::Value) -> Result<()> {
    let w = &r["weekly_commit"];
    let m = &r["merge"];
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
    outln!(
        "merge (1,000 changed rows on each side): {:.1} ms vs a weekly commit on the same table {:.1} ms: ratio {:.2} (target <= 2)",
        m["seconds_median"].as_f64().unwrap_or(0.0) * 1e3,
        m["weekly_commit_seconds_median"].as_f64().unwrap_or(0.0) * 1e3,
        m["ratio"].as_f64().unwrap_or(0.0)
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
    Ok(())
}
