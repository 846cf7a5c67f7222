//! `tablepin bench`: the engine's costs, each measured side by side with its
//! baseline in one run (the machine is shared and noisy, so ratios of
//! interleaved measurements are what count; each figure is the median of
//! `repeat` runs).
//!
//! - a weekly-style commit (10,000 appended rows and 150 changed old rows,
//!   an upsert) against rewriting the whole table to Parquet with the same
//!   settings;
//! - reading the head version against reading the same rows from one plain
//!   Parquet file with the same reader, both returning every batch (the
//!   plain read is also timed dropping each batch once decoded, which
//!   leaves out the cost of the memory a whole table takes);
//! - `verify` throughput;
//! - with the lab's data: `gc` plan and apply and `erase` on the 110
//!   versions, against the bytes they touch.

use std::time::Instant;

use arrow::array::RecordBatch;
use serde_json::{json, Value};
use tablepin::{CommitOptions, GcPolicy, Mode, Repo, WriteSettings};

use crate::run::Replay;
use crate::{cpu_seconds, LabError};

/// Options of a benchmark run.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    pub rows: usize,
    pub repeat: usize,
    pub data: Option<String>,
    pub verbose: bool,
}

/// The generated table's first commit, keyed by `id`.
pub(crate) async fn commit_base(
    repo: &Repo,
    base: &RecordBatch,
) -> Result<tablepin::CommitResult, LabError> {
    let opts = CommitOptions {
        key: Some(vec!["id".into()]),
        message: "base".into(),
        ..Default::default()
    };
    Ok(repo
        .commit("sales", base.schema(), vec![base.clone()], &opts)
        .await?)
}

/// Week `r`'s upsert: 10,000 new rows from id `next_id` and 150 rows of
/// `base` changed (returns); and the new rows alone.
pub(crate) fn weekly_input(
    base: &RecordBatch,
    r: usize,
    next_id: i64,
) -> Result<(RecordBatch, RecordBatch), LabError> {
    let ids = tablepin_datagen::pick_ids(base.num_rows() as i64, 150, 100 + r as u64);
    let changed = tablepin_datagen::with_returns(base, &ids, 1 + r as i64);
    let added = tablepin_datagen::sales(next_id, 10_000, 2 + r as u64);
    let input = arrow::compute::concat_batches(&base.schema(), [&added, &changed])?;
    Ok((input, added))
}

/// CPU time summed over steps (`None` once a read of it fails).
struct CpuTotal(Option<f64>);

impl CpuTotal {
    /// Adds the CPU time used since `before` (a [`cpu_seconds`] reading).
    fn add_since(&mut self, before: Option<f64>) {
        self.0 = match (self.0, before, cpu_seconds()) {
            (Some(t), Some(b), Some(a)) => Some(t + (a - b)),
            _ => None,
        };
    }
}

pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() {
        0.0
    } else {
        v[v.len() / 2]
    }
}

/// The plain Parquet file: one writer, the repository's settings for the
/// table (keyed by `id`).
fn parquet_bytes(batches: &[RecordBatch], settings: &WriteSettings) -> Result<Vec<u8>, LabError> {
    let first = batches
        .first()
        .cloned()
        .unwrap_or_else(|| RecordBatch::new_empty(tablepin_datagen::schema()));
    let mut w = parquet::arrow::ArrowWriter::try_new(
        Vec::new(),
        first.schema(),
        Some(settings.properties_for(&["id".into()], &first)?),
    )?;
    for b in batches {
        w.write(b)?;
    }
    Ok(w.into_inner()?)
}

/// Reads a plain Parquet file with one reader: either keeping every batch,
/// as a read of the head version returns the whole table, or dropping each
/// batch once counted (decoding alone). Returns the rows and the batches
/// kept, to be dropped after the clock stops, as the head read's are.
fn read_plain(path: &std::path::Path, keep: bool) -> Result<(usize, Vec<RecordBatch>), LabError> {
    let bytes = bytes::Bytes::from(std::fs::read(path).map_err(|e| LabError::output(path, e))?);
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(bytes)?
        .with_batch_size(8192)
        .build()?;
    let (mut n, mut kept) = (0, Vec::new());
    for b in reader {
        let b = b?;
        n += b.num_rows();
        if keep {
            kept.push(b);
        }
    }
    Ok((n, kept))
}

/// Runs the benchmarks; returns their figures.
pub async fn run(opts: &BenchOptions) -> Result<Value, LabError> {
    let dir = tempfile::tempdir().map_err(|e| LabError::Other(e.to_string()))?;
    let settings = WriteSettings::default();
    let repo = Repo::init(&dir.path().join("repo").to_string_lossy(), settings.clone()).await?;
    let n = opts.rows;
    let base = tablepin_datagen::sales(0, n, 1);
    let t = Instant::now();
    let first = commit_base(&repo, &base).await?;
    let first_s = t.elapsed().as_secs_f64();
    let base_bytes = first.change.bytes_new;
    if opts.verbose {
        eprintln!("base: {n} rows, {base_bytes} bytes in {first_s:.2}s");
    }
    let weekly = weekly_bench(&repo, &base, base_bytes, &settings, opts).await?;
    let plain = dir.path().join("plain.parquet");
    let repeat = opts.repeat.max(1);
    let read_head = head_bench(&repo, &plain, &settings, repeat).await?;
    let query = query_bench(&repo, &plain, repeat).await?;
    let overwrite = overwrite_bench(dir.path(), &base, &settings, repeat).await?;
    let merge = merge_bench(dir.path(), &base, &settings, repeat).await?;

    // verify.
    let vr = repo.verify(&tablepin::NoProgress).await?;
    if !vr.problems.is_empty() {
        return Err(LabError::Other(format!(
            "verify found problems: {:?}",
            vr.problems
        )));
    }
    let (stored, _) = repo.gc().stored().await?;
    let mut out = json!({
        "rows": n,
        "repeat": opts.repeat,
        "threads": tablepin_format::threads(),
        "base_commit_seconds": first_s,
        "weekly_commit": weekly,
        "read_head": read_head,
        "query": query,
        "overwrite": overwrite,
        "merge": merge,
        "verify": {
            "mb_per_s": vr.mb_per_s, "seconds": vr.seconds, "bytes": vr.bytes, "blobs": vr.blobs,
            "rows_hashed": vr.rows_hashed, "repository_bytes": stored,
        },
    });
    if let Some(data) = &opts.data {
        out["lab_gc_erase"] = lab_gc_erase(data, dir.path()).await?;
    }
    Ok(out)
}

/// The weekly commit (10,000 new rows, 150 changed) against a full
/// rewrite of the table as one Parquet file, interleaved.
async fn weekly_bench(
    repo: &Repo,
    base: &RecordBatch,
    base_bytes: u64,
    settings: &WriteSettings,
    opts: &BenchOptions,
) -> Result<Value, LabError> {
    let mut commit_s = Vec::new();
    let mut rewrite_s = Vec::new();
    let mut weekly_bytes = Vec::new();
    let mut current: Vec<RecordBatch> = vec![base.clone()];
    let mut next_id = opts.rows as i64;
    let (mut commit_cpu, mut rewrite_cpu) = (CpuTotal(Some(0.0)), CpuTotal(Some(0.0)));
    for r in 0..opts.repeat.max(1) {
        let (input, added) = weekly_input(base, r, next_id)?;
        next_id += 10_000;
        let t = Instant::now();
        let cpu = cpu_seconds();
        let c = repo
            .commit(
                "sales",
                input.schema(),
                vec![input],
                &CommitOptions {
                    mode: Mode::Upsert,
                    message: format!("week {r}"),
                    ..Default::default()
                },
            )
            .await?;
        commit_s.push(t.elapsed().as_secs_f64());
        commit_cpu.add_since(cpu);
        weekly_bytes.push(c.change.bytes_new as f64);
        current.push(added);
        let t = Instant::now();
        let cpu = cpu_seconds();
        let full = parquet_bytes(&current, settings)?;
        rewrite_cpu.add_since(cpu);
        rewrite_s.push(t.elapsed().as_secs_f64());
        if opts.verbose {
            eprintln!(
                "weekly commit {r}: {:.3}s, {} bytes new; full rewrite {:.3}s ({} bytes)",
                commit_s[r],
                c.change.bytes_new,
                rewrite_s[r],
                full.len()
            );
        }
    }
    let (commit_m, rewrite_m) = (median(commit_s.clone()), median(rewrite_s.clone()));
    Ok(json!({
        "seconds_median": commit_m, "full_rewrite_seconds_median": rewrite_m,
        "ratio": commit_m / rewrite_m, "target_ratio": 0.05,
        "bytes_new_median": median(weekly_bytes.clone()), "table_bytes": base_bytes,
        "bytes_share": median(weekly_bytes) / base_bytes as f64,
        "seconds": commit_s, "full_rewrite_seconds": rewrite_s,
        // CPU time on all threads, summed over the runs.
        "cpu_seconds": commit_cpu.0, "full_rewrite_cpu_seconds": rewrite_cpu.0,
        "cpu_ratio": commit_cpu.0.zip(rewrite_cpu.0).map(|(c, w)| c / w),
    }))
}

/// Reading the head against one plain Parquet file of the same rows
/// (written to `plain`, kept for the query bench), interleaved.
async fn head_bench(
    repo: &Repo,
    plain: &std::path::Path,
    settings: &WriteSettings,
    repeat: usize,
) -> Result<Value, LabError> {
    let head = repo.read("main", "sales", None).await?;
    std::fs::write(plain, parquet_bytes(&head.batches, settings)?)
        .map_err(|e| LabError::Other(e.to_string()))?;
    let mut head_s = Vec::new();
    let mut plain_s = Vec::new();
    let mut streamed_s = Vec::new();
    let rows = head.stats.rows;
    drop(head);
    for _ in 0..repeat {
        let t = Instant::now();
        let h = repo.read("main", "sales", None).await?;
        head_s.push(t.elapsed().as_secs_f64());
        drop(h);
        for (keep, times) in [(true, &mut plain_s), (false, &mut streamed_s)] {
            let t = Instant::now();
            let (got, kept) = read_plain(plain, keep)?;
            times.push(t.elapsed().as_secs_f64());
            drop(kept);
            if got as u64 != rows {
                return Err(LabError::Other(format!(
                    "plain read gave {got} rows, head {rows}"
                )));
            }
        }
    }
    let (head_m, plain_m) = (median(head_s.clone()), median(plain_s.clone()));
    let streamed_m = median(streamed_s.clone());
    Ok(json!({
        "seconds_median": head_m, "plain_parquet_seconds_median": plain_m,
        "ratio": head_m / plain_m, "target_ratio": 1.1, "rows": rows,
        "seconds": head_s, "plain_seconds": plain_s,
        "plain_streamed_seconds_median": streamed_m,
        "ratio_to_streamed": head_m / streamed_m,
        "plain_streamed_seconds": streamed_s,
    }))
}

/// A merge of a branch with 1,000 changed rows into main with 1,000 other
/// changed rows, against a weekly commit on the same table, interleaved (a
/// repository of its own, the base committed once). Each round branches
/// from main's head, so the merge base is one version back on each side.
async fn merge_bench(
    dir: &std::path::Path,
    base: &RecordBatch,
    settings: &WriteSettings,
    repeat: usize,
) -> Result<Value, LabError> {
    let path = dir.join("merge");
    let repo = Repo::init(&path.to_string_lossy(), settings.clone()).await?;
    commit_base(&repo, base).await?;
    let n = base.num_rows() as i64;
    let upsert = |branch: &str, message: String| CommitOptions {
        mode: Mode::Upsert,
        branch: branch.into(),
        message,
        ..Default::default()
    };
    let (mut merge_s, mut weekly_s) = (Vec::new(), Vec::new());
    let mut next_id = n;
    for r in 0..repeat {
        let side = format!("side-{r}");
        repo.refs()
            .create(tablepin::RefKind::Branch, &side, "main", "")
            .await?;
        for (branch, seed) in [
            (side.as_str(), 7_000 + r as u64),
            ("main", 8_000 + r as u64),
        ] {
            let ids = tablepin_datagen::pick_ids(n, 1_000, seed);
            let rows = tablepin_datagen::with_returns(base, &ids, seed as i64);
            repo.commit(
                "sales",
                rows.schema(),
                vec![rows],
                &upsert(branch, format!("{branch} {r}")),
            )
            .await?;
        }
        let t = Instant::now();
        let m = repo
            .merge(
                &side,
                &tablepin::MergeOptions {
                    strategy: Some(tablepin::Strategy::Theirs),
                    ..Default::default()
                },
            )
            .await?;
        merge_s.push(t.elapsed().as_secs_f64());
        if m.outcome != tablepin::MergeOutcome::Merged {
            return Err(LabError::Other(format!("merge {r} ended {:?}", m.outcome)));
        }
        let (input, _) = weekly_input(base, r, next_id)?;
        next_id += 10_000;
        let t = Instant::now();
        repo.commit(
            "sales",
            input.schema(),
            vec![input],
            &upsert("main", format!("week {r}")),
        )
        .await?;
        weekly_s.push(t.elapsed().as_secs_f64());
    }
    drop(repo);
    std::fs::remove_dir_all(&path).map_err(|e| LabError::Other(e.to_string()))?;
    let (m, w) = (median(merge_s.clone()), median(weekly_s.clone()));
    Ok(json!({
        "changed_rows_each_side": 1_000,
        "seconds_median": m, "weekly_commit_seconds_median": w,
        "ratio": m / w, "target_ratio": 2.0,
        "seconds": merge_s, "weekly_commit_seconds": weekly_s,
    }))
}

/// Overwrites of the generated table (a repository of its own, the base
/// committed once) against reading and hashing the same input alone: the
/// same rows, the same rows in another order, and 150 rows changed. Each
/// measurement reads its input from a Parquet file, as a job that writes
/// the table hands it over; the baseline reads the same file and hashes
/// its rows. After the changed rows' commit the base is restored, so every
/// round overwrites the same parent.
async fn overwrite_bench(
    dir: &std::path::Path,
    base: &RecordBatch,
    settings: &WriteSettings,
    repeat: usize,
) -> Result<Value, LabError> {
    let repo = Repo::init(&dir.join("overwrite").to_string_lossy(), settings.clone()).await?;
    let first = commit_base(&repo, base).await?;
    let n = base.num_rows();
    let reversed = {
        let idx: Vec<u32> = (0..n as u32).rev().collect();
        arrow::compute::take_record_batch(base, &arrow::array::UInt32Array::from(idx))?
    };
    let write = |name: &str, b: &RecordBatch| -> Result<std::path::PathBuf, LabError> {
        let path = dir.join(format!("overwrite-{name}.parquet"));
        std::fs::write(&path, parquet_bytes(std::slice::from_ref(b), settings)?)
            .map_err(|e| LabError::Other(e.to_string()))?;
        Ok(path)
    };
    let same = write("same", base)?;
    let other_order = write("reversed", &reversed)?;
    let ids = tablepin_datagen::pick_ids(n as i64, 150, 7);
    // The whole table with 150 of its rows changed (row i has id i).
    let changed = {
        let keep: arrow::array::BooleanArray = (0..n as i64)
            .map(|i| Some(ids.binary_search(&i).is_err()))
            .collect();
        let kept = arrow::compute::filter_record_batch(base, &keep)?;
        let new = tablepin_datagen::with_returns(base, &ids, 3);
        write(
            "changed",
            &arrow::compute::concat_batches(&base.schema(), [&kept, &new])?,
        )?
    };
    let cases = [
        ("same_rows", &same),
        ("another_order", &other_order),
        ("changed_150", &changed),
    ];
    let mut times: Vec<(Vec<f64>, Vec<f64>)> = vec![(Vec::new(), Vec::new()); cases.len()];
    let mut bytes_new = vec![0u64; cases.len()];
    for _ in 0..repeat {
        for (ci, (name, path)) in cases.iter().enumerate() {
            let t = Instant::now();
            let (_, batches) = read_plain(path, true)?;
            let all = arrow::compute::concat_batches(&base.schema(), &batches)?;
            drop(batches);
            let hashes = tablepin_rowhash::hash_rows(&all)?;
            times[ci].1.push(t.elapsed().as_secs_f64());
            drop((all, hashes));
            let t = Instant::now();
            let (_, batches) = read_plain(path, true)?;
            let opts = CommitOptions {
                mode: Mode::Overwrite,
                message: (*name).into(),
                ..Default::default()
            };
            let c = repo.commit("sales", base.schema(), batches, &opts).await?;
            times[ci].0.push(t.elapsed().as_secs_f64());
            bytes_new[ci] = c.change.bytes_new;
            if c.content_hash != first.content_hash {
                let back = tablepin::RestoreOptions {
                    message: Some("back to the base".into()),
                    ..Default::default()
                };
                repo.restore(&first.version.to_string(), &back).await?;
            }
        }
    }
    let mut out = serde_json::Map::new();
    for (ci, (name, _)) in cases.iter().enumerate() {
        let (commit, baseline) = (median(times[ci].0.clone()), median(times[ci].1.clone()));
        let target = if *name == "changed_150" { 2.0 } else { 1.5 };
        out.insert(
            (*name).into(),
            json!({"seconds_median": commit, "read_and_hash_seconds_median": baseline,
                   "ratio": commit / baseline, "target_ratio": target, "bytes_new": bytes_new[ci],
                   "seconds": times[ci].0, "read_and_hash_seconds": times[ci].1}),
        );
    }
    Ok(Value::Object(out))
}

/// The query the SQL measurement runs: a filtered aggregate over one column.
const AGGREGATE: &str = "SELECT sum(quantity) FROM sales WHERE country = 'France'";

/// Diff and SQL against their baselines, interleaved: the diff of the last
/// two versions (a weekly commit apart) against reading both whole, and a
/// filtered aggregate through `Repo::sql` against DataFusion over the same
/// rows decoded from one plain Parquet file (the two columns the query
/// reads, with the same Parquet reader).
async fn query_bench(
    repo: &Repo,
    plain: &std::path::Path,
    repeat: usize,
) -> Result<Value, LabError> {
    let (mut diff_s, mut both_s, mut sql_s, mut df_s) = (vec![], vec![], vec![], vec![]);
    let mut diff_rows_read = 0;
    for _ in 0..repeat {
        let t = Instant::now();
        let d = repo.diff("main~1", "main", Some("sales")).await?;
        diff_s.push(t.elapsed().as_secs_f64());
        diff_rows_read = d.tables.first().map_or(0, |t| t.stats.rows_read);
        drop(d);
        let t = Instant::now();
        let (a, b) = (
            repo.read("main~1", "sales", None).await?,
            repo.read("main", "sales", None).await?,
        );
        both_s.push(t.elapsed().as_secs_f64());
        drop((a, b));
        let t = Instant::now();
        let ours = repo.sql(AGGREGATE).await?;
        sql_s.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let theirs = plain_aggregate(plain).await?;
        df_s.push(t.elapsed().as_secs_f64());
        if ours.batches != theirs {
            return Err(LabError::Other(format!(
                "{AGGREGATE}: tablepin and plain DataFusion disagree"
            )));
        }
    }
    let (dm, bm, sm, fm) = (
        median(diff_s.clone()),
        median(both_s.clone()),
        median(sql_s.clone()),
        median(df_s.clone()),
    );
    Ok(json!({
        "diff_adjacent": {"seconds_median": dm, "read_both_seconds_median": bm, "ratio": dm / bm,
                          "target_ratio": 0.1, "rows_read": diff_rows_read, "seconds": diff_s, "read_both_seconds": both_s},
        "sql_filtered_aggregate": {"query": AGGREGATE, "seconds_median": sm, "plain_datafusion_seconds_median": fm,
                                   "ratio": sm / fm, "target_ratio": 1.2, "seconds": sql_s, "plain_seconds": df_s},
    }))
}

/// [`AGGREGATE`] by DataFusion over the columns it reads, decoded from one
/// plain Parquet file.
async fn plain_aggregate(path: &std::path::Path) -> Result<Vec<RecordBatch>, LabError> {
    use datafusion::prelude::SessionContext;
    let other = |e: datafusion::error::DataFusionError| LabError::Other(e.to_string());
    let bytes =
        bytes::Bytes::from(std::fs::read(path).map_err(|e| LabError::Other(e.to_string()))?);
    let builder = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(bytes)?;
    let mask =
        parquet::arrow::ProjectionMask::columns(builder.parquet_schema(), ["country", "quantity"]);
    let reader = builder
        .with_projection(mask)
        .with_batch_size(8192)
        .build()?;
    let schema = arrow::array::RecordBatchReader::schema(&reader);
    let batches = reader.collect::<Result<Vec<_>, _>>()?;
    let ctx = SessionContext::new();
    let mem = datafusion::datasource::MemTable::try_new(schema, vec![batches]).map_err(other)?;
    ctx.register_table("sales", std::sync::Arc::new(mem))
        .map_err(other)?;
    ctx.sql(AGGREGATE)
        .await
        .map_err(other)?
        .collect()
        .await
        .map_err(other)
}

/// gc and erase on the lab's 110 versions.
async fn lab_gc_erase(data: &str, dir: &std::path::Path) -> Result<Value, LabError> {
    let path = std::path::PathBuf::from(data);
    let repo_path = dir.join("lab");
    let t = Instant::now();
    let repo = crate::run::tablepin_only(&path, &repo_path, Replay::AsUsers).await?;
    let as_users_s = t.elapsed().as_secs_f64();
    let (stored, blobs) = repo.gc().stored().await?;
    // The same history, every version committed as an overwrite with the
    // whole table.
    let over_path = dir.join("lab-overwrites");
    let t = Instant::now();
    let over = crate::run::tablepin_only(&path, &over_path, Replay::Overwrites).await?;
    let overwrites_s = t.elapsed().as_secs_f64();
    let (over_stored, _) = over.gc().stored().await?;
    drop(over);
    std::fs::remove_dir_all(&over_path).map_err(|e| LabError::Other(e.to_string()))?;
    let mut rules = serde_json::Map::new();
    for (rule, keep_last, keep_tags) in [("last4", Some(4), false), ("last4_tags", Some(4), true)] {
        let copy = dir.join(format!("gc-{rule}"));
        crate::run::copy_dir(&repo_path, &copy)?;
        let r = Repo::open(&copy.to_string_lossy()).await?;
        let policy = GcPolicy {
            keep_last,
            keep_tags,
            grace_ms: 0,
            sole_writer: true,
            ..Default::default()
        };
        let t = Instant::now();
        let plan = r.gc().plan(&policy).await?;
        let plan_s = t.elapsed().as_secs_f64();
        let freed = plan.bytes_freed;
        let t = Instant::now();
        let rep = r.gc().apply(plan).await?;
        let apply_s = t.elapsed().as_secs_f64();
        rules.insert(rule.into(), json!({"plan_seconds": plan_s, "apply_seconds": apply_s, "bytes_freed": freed, "blobs_deleted": rep.blobs_deleted}));
    }
    let t = Instant::now();
    let plan = repo
        .erasure()
        .plan(&tablepin::EraseOptions {
            table: "sales".into(),
            predicate: "Customer_ID = 17388".into(),
            reason: "benchmark".into(),
        })
        .await?;
    let plan_s = t.elapsed().as_secs_f64();
    let files_bytes: u64 = plan.files.iter().map(|f| f.bytes).sum();
    let files = plan.files.len();
    let t = Instant::now();
    let rep = repo.erasure().apply(plan).await?;
    let apply_s = t.elapsed().as_secs_f64();
    Ok(json!({
        "repository_bytes": stored, "repository_blobs": blobs, "gc": rules,
        // Both include loading the data and deriving the history (~1 s).
        "replay": {"as_users_seconds": as_users_s, "overwrites_seconds": overwrites_s,
                   "as_users_bytes": stored, "overwrites_bytes": over_stored},
        "erase": {"plan_seconds": plan_s, "apply_seconds": apply_s, "files_rewritten": files,
                  "bytes_written": rep.audit.bytes_written, "rewritten_file_bytes": files_bytes,
                  "versions_replaced": rep.audit.versions.len()},
    }))
}
