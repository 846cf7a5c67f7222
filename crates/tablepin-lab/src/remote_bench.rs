//! The weekly commit and the head read on a bucket, beside a local folder:
//! `tablepin bench --remote s3://BUCKET/PREFIX`. Each store gets its own
//! repository holding the generated table; the repetitions go round the
//! stores in turn (one weekly commit and one head read each), so that the
//! machine's noise falls on all of them alike. Requests are counted by the
//! store ([`tablepin::store::RequestCounts`]); the added latency is
//! `object_store`'s throttling wrapper, before every request.

use std::time::{Duration, Instant};

use arrow::array::RecordBatch;
use serde_json::{json, Value};
use tablepin::{CommitOptions, Mode, Repo, Store, WriteSettings};

use crate::bench::median;
use crate::LabError;

/// One store the benchmark runs on.
struct Setup {
    name: String,
    repo: Repo,
    commit_s: Vec<f64>,
    commit_requests: Vec<u64>,
    /// The last weekly commit's requests, by kind.
    commit_kinds: tablepin::store::RequestCounts,
    read_s: Vec<f64>,
    read_requests: Vec<u64>,
    read_gets: Vec<u64>,
    files: u64,
}

fn median_u(v: &[u64]) -> u64 {
    let mut v = v.to_vec();
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

impl Setup {
    /// Week `r`: the weekly commit of `input`, then a read of the head,
    /// each timed and its requests counted.
    async fn week(&mut self, r: usize, input: &RecordBatch) -> Result<(), LabError> {
        let before = self.repo.store().requests();
        let t = Instant::now();
        self.repo
            .commit(
                "sales",
                input.schema(),
                vec![input.clone()],
                &CommitOptions {
                    mode: Mode::Upsert,
                    message: format!("week {r}"),
                    ..Default::default()
                },
            )
            .await?;
        self.commit_s.push(t.elapsed().as_secs_f64());
        self.commit_kinds = self.repo.store().requests().since(&before);
        self.commit_requests.push(self.commit_kinds.total());
        let before = self.repo.store().requests();
        let t = Instant::now();
        let head = self.repo.read("main", "sales", None).await?;
        self.read_s.push(t.elapsed().as_secs_f64());
        let cost = self.repo.store().requests().since(&before);
        self.read_requests.push(cost.total());
        self.read_gets.push(cost.get);
        self.files = head.stats.files as u64;
        Ok(())
    }

    /// The figures of this store.
    fn figures(&self) -> Value {
        json!({
            "store": self.name,
            "weekly_commit_seconds_median": median(self.commit_s.clone()),
            "weekly_commit_requests_median": median_u(&self.commit_requests),
            "weekly_commit_requests_last": self.commit_kinds,
            "head_read_seconds_median": median(self.read_s.clone()),
            "head_read_requests_median": median_u(&self.read_requests),
            "head_read_gets_median": median_u(&self.read_gets),
            "head_data_files": self.files,
            "weekly_commit_seconds": self.commit_s,
            "head_read_seconds": self.read_s,
        })
    }
}

/// Runs the benchmark on a local folder, on `remote`, and on `remote` with
/// `latency` added per request.
pub async fn run(
    remote: &str,
    rows: usize,
    repeat: usize,
    latency: Duration,
) -> Result<Value, LabError> {
    let dir = tempfile::tempdir().map_err(|e| LabError::Other(e.to_string()))?;
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    let remote = remote.trim_end_matches('/');
    let ms = latency.as_millis();
    let open = |at: &str| Store::open(at).map_err(tablepin::Error::from);
    let stores = vec![
        (
            "local folder".to_string(),
            open(&dir.path().to_string_lossy())?,
        ),
        (
            "bucket".to_string(),
            open(&format!("{remote}/bench-{stamp}-a"))?,
        ),
        (
            format!("bucket + {ms} ms per request"),
            open(&format!("{remote}/bench-{stamp}-b"))?.with_latency(latency),
        ),
    ];
    let base = tablepin_datagen::sales(0, rows, 1);
    let mut setups = Vec::new();
    for (name, store) in stores {
        // Measured without the cache: every read goes to the store.
        let repo = Repo::init_store(store.with_cache(None), WriteSettings::default()).await?;
        crate::bench::commit_base(&repo, &base).await?;
        setups.push(Setup {
            name,
            repo,
            commit_s: Vec::new(),
            commit_requests: Vec::new(),
            commit_kinds: Default::default(),
            read_s: Vec::new(),
            read_requests: Vec::new(),
            read_gets: Vec::new(),
            files: 0,
        });
    }
    let mut next_id = rows as i64;
    for r in 0..repeat.max(1) {
        let (input, _) = crate::bench::weekly_input(&base, r, next_id)?;
        next_id += 10_000;
        for s in &mut setups {
            s.week(r, &input).await?;
        }
    }
    let out: Vec<Value> = setups.iter().map(Setup::figures).collect();
    let commands = command_costs(&format!("{remote}/bench-{stamp}-c")).await?;
    Ok(json!({
        "commands": commands,
        "rows": rows,
        "repeat": repeat,
        "latency_ms": ms,
        "targets": {
            "weekly_commit_requests": 15,
            "head_read_requests": "GETs <= data files + 4",
            "weekly_commit_seconds_with_latency": 0.5,
        },
        "stores": out,
    }))
}

/// The requests each command makes on the bucket: init, then 100 commits
/// of one new row each (the last one counted), `log` of the 100 versions,
/// `verify`, a gc keeping the last 10, and an erasure of one row. Each
/// command gets its own store, as the command line opens one per command:
/// the repository's config read, no local cache, and the command's memo of
/// the blobs it read (`tablepin_store::memo`).
async fn command_costs(location: &str) -> Result<Value, LabError> {
    let mut costs = serde_json::Map::new();
    let (store, stats) = command_store(location)?;
    Repo::init_store(store, WriteSettings::default()).await?;
    costs.insert("init".into(), json!(stats.requests()));
    for i in 0..100 {
        let (repo, stats) = command_repo(location).await?;
        let rows = tablepin_datagen::sales(i, 1, i as u64);
        let opts = CommitOptions {
            key: Some(vec!["id".into()]),
            mode: if i == 0 {
                Mode::Overwrite
            } else {
                Mode::Append
            },
            message: format!("row {i}"),
            ..Default::default()
        };
        repo.commit("sales", rows.schema(), vec![rows], &opts)
            .await?;
        if i == 99 {
            costs.insert(
                "commit (1 row appended, 100th version)".into(),
                json!(stats.requests()),
            );
        }
    }
    let (repo, stats) = command_repo(location).await?;
    let log = repo.log("main", &Default::default()).await?;
    costs.insert(
        format!("log ({} versions)", log.len()),
        json!(stats.requests()),
    );
    let (repo, stats) = command_repo(location).await?;
    repo.verify(&tablepin::NoProgress).await?;
    costs.insert("verify".into(), json!(stats.requests()));
    let (repo, stats) = command_repo(location).await?;
    // As the command line runs them: plan and apply under one lease.
    repo.gc()
        .run(&tablepin::GcPolicy {
            keep_last: Some(10),
            grace_ms: 0,
            sole_writer: true,
            ..Default::default()
        })
        .await?;
    costs.insert("gc (keep the last 10)".into(), json!(stats.requests()));
    let (repo, stats) = command_repo(location).await?;
    repo.erasure()
        .run(&tablepin::EraseOptions {
            table: "sales".into(),
            predicate: "id = 95".into(),
            reason: "benchmark".into(),
        })
        .await?;
    costs.insert("erase (1 row)".into(), json!(stats.requests()));
    Ok(Value::Object(costs))
}

/// A store for one command, as the command line opens it, and a handle on
/// its request counts.
fn command_store(location: &str) -> Result<(Store, tablepin::store::StoreStats), LabError> {
    let store = Store::open(location)
        .map_err(tablepin::Error::from)?
        .with_cache(None)
        .with_memo(tablepin::store::memo::COMMAND_BYTES);
    let stats = store.stats();
    Ok((store, stats))
}

/// The repository opened for one command (see [`command_store`]).
async fn command_repo(location: &str) -> Result<(Repo, tablepin::store::StoreStats), LabError> {
    let (store, stats) = command_store(location)?;
    Ok((Repo::open_store(store).await?, stats))
}
