//! Streamed commits: an input committed a window at a time gives what one
//! commit of the whole input gives (the rows, the content hash, the counts
//! and the checks), in every mode that streams, and the inputs that cannot
//! stream are committed whole with the same result or the same error.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use arrow::array::{ArrayRef, AsArray, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{Int64Type, SchemaRef};
use tablepin::files::BatchIter;
use tablepin::{
    CommitInput, CommitOptions, CommitResult, Input, Mode, NoProgress, Repo, WriteSettings,
};

type Row = (i64, i64);

fn batch(rows: &[Row]) -> RecordBatch {
    let text: Vec<String> = rows.iter().map(|r| format!("row {}", r.0)).collect();
    RecordBatch::try_from_iter(vec![
        (
            "id",
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0))) as ArrayRef,
        ),
        (
            "v",
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))) as ArrayRef,
        ),
        ("note", Arc::new(StringArray::from(text)) as ArrayRef),
    ])
    .unwrap()
}

/// Rows handed out in batches of `batch` rows, as a file reader would.
struct Rows {
    rows: Vec<Row>,
    batch: usize,
    /// Times the input was opened: twice when it streams (once to see it
    /// is larger than a window, once for the windows), three times when
    /// it is committed whole after all.
    opens: std::sync::atomic::AtomicUsize,
}

fn rows_of(rows: Vec<Row>) -> Rows {
    Rows {
        rows,
        batch: 700,
        opens: Default::default(),
    }
}

impl CommitInput for Rows {
    fn open(&self) -> tablepin::Result<(SchemaRef, BatchIter)> {
        self.opens
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let schema = batch(&[]).schema();
        let chunks: Vec<RecordBatch> = self.rows.chunks(self.batch).map(batch).collect();
        Ok((schema, Box::new(chunks.into_iter().map(Ok))))
    }
}

/// Small files, so that a window of a few thousand rows spans several.
fn settings() -> WriteSettings {
    WriteSettings {
        row_group_rows: 500,
        file_rows: 1000,
        ..WriteSettings::default()
    }
}

async fn repo() -> Repo {
    Repo::init("memory://", settings()).await.unwrap()
}

fn opts(mode: Mode, window_rows: usize) -> CommitOptions {
    CommitOptions {
        mode,
        key: Some(vec!["id".into()]),
        window_rows,
        ..CommitOptions::default()
    }
}

async fn read(repo: &Repo) -> Vec<Row> {
    let r = repo.read("main", "t", None).await.unwrap();
    let mut out = Vec::new();
    for b in &r.batches {
        let id = b.column(0).as_primitive::<Int64Type>();
        let v = b.column(1).as_primitive::<Int64Type>();
        for i in 0..b.num_rows() {
            out.push((id.value(i), v.value(i)));
        }
    }
    out.sort_unstable();
    out
}

/// One step of a history: the mode, the rows, and the key (None: unkeyed).
struct Step {
    mode: Mode,
    rows: Vec<Row>,
    keyed: bool,
    /// Old files may be compacted (rows are hidden).
    compacts: bool,
    /// The input streams (rather than being committed whole).
    streams: bool,
}

fn step(mode: Mode, rows: Vec<Row>, keyed: bool, compacts: bool, streams: bool) -> Step {
    Step {
        mode,
        rows,
        keyed,
        compacts,
        streams,
    }
}

/// The same history committed whole into one repository and streamed in
/// windows of 2,500 rows into another: after every step both hold the same
/// rows with the same content hash, and each commit counted the same
/// rows and saw the same checks.
async fn same_either_way(steps: &[Step]) -> (Repo, Repo, Vec<CommitResult>) {
    let (whole, streamed) = (repo().await, repo().await);
    let mut results = Vec::new();
    for (i, s) in steps.iter().enumerate() {
        let mut o = opts(s.mode, 2500);
        if !s.keyed {
            o.key = None;
        }
        let a = whole
            .commit("t", batch(&[]).schema(), vec![batch(&s.rows)], &o)
            .await
            .unwrap();
        let input = rows_of(s.rows.clone());
        let b = streamed
            .transaction("t", &o)
            .commit(Input::Stream(&input))
            .await
            .unwrap();
        let opens = input.opens.load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(opens, if s.streams { 2 } else { 3 }, "step {i}: opens");
        assert_eq!(a.content_hash, b.content_hash, "step {i}: content hash");
        assert_eq!(a.rows, b.rows, "step {i}: rows");
        let counts = |r: &CommitResult| {
            (
                r.change.rows_added,
                r.change.rows_changed,
                r.change.rows_deleted,
            )
        };
        assert_eq!(counts(&a), counts(&b), "step {i}: counts");
        assert_eq!(a.change.checks, b.change.checks, "step {i}: checks");
        assert_eq!(
            read(&whole).await,
            read(&streamed).await,
            "step {i}: rows read"
        );
        // The rows written: the same where nothing is compacted (new
        // rows are cut into whole files as one commit cuts them). A
        // window compacts its own files when they hide more than the
        // setting's share, so it may rewrite up to a window's rows more.
        let (wa, wb) = (
            rows_written(&whole, &a).await,
            rows_written(&streamed, &b).await,
        );
        match s.compacts {
            false => assert_eq!(wa, wb, "step {i}: rows written"),
            true => assert!(wb <= wa + 2500, "step {i}: {wb} rows written, {wa} whole"),
        }
        results.push(b);
    }
    let v = streamed.verify(&NoProgress).await.unwrap();
    assert!(v.problems.is_empty(), "{:?}", v.problems);
    (whole, streamed, results)
}

/// Rows in the files a commit's version has and its parent's has not.
async fn rows_written(repo: &Repo, r: &CommitResult) -> u64 {
    let after = repo
        .snapshot(r.version)
        .await
        .unwrap()
        .files("t")
        .await
        .unwrap();
    let old: std::collections::HashSet<_> = match &r.parent {
        Some(p) => repo
            .snapshot(p)
            .await
            .unwrap()
            .files("t")
            .await
            .unwrap()
            .iter()
            .map(|f| f.data)
            .collect(),
        None => Default::default(),
    };
    after
        .iter()
        .filter(|f| !old.contains(&f.data))
        .map(|f| f.rows)
        .sum()
}

fn table(n: i64) -> Vec<Row> {
    (0..n).map(|i| (i * 2, i)).collect()
}

#[tokio::test]
async fn a_streamed_history_equals_the_same_history_committed_whole() {
    let base = table(10_000);
    // 150 rows changed in place, in key order.
    let mut changed = base.clone();
    for i in (0..10_000).step_by(67) {
        changed[i].1 += 1;
    }
    // Rows gone from the middle and the end, new rows between old keys
    // and after the last.
    let mut edited: Vec<Row> = changed
        .iter()
        .copied()
        .filter(|(k, _)| !(4000..4400).contains(k) && *k < 19_000)
        .collect();
    edited.extend((0..300).map(|i| (i * 20 + 1, -i)));
    edited.extend((0..2000).map(|i| (30_000 + i, i)));
    edited.sort_unstable();
    let upsert: Vec<Row> = (0..6000).map(|i| (i * 5, 7)).collect();
    let append: Vec<Row> = (0..5000).map(|i| (100_000 + i, 1)).collect();
    let steps = [
        step(Mode::Overwrite, base.clone(), true, false, true),
        step(Mode::Overwrite, base.clone(), true, false, true),
        step(Mode::Overwrite, changed, true, true, true),
        step(Mode::Overwrite, edited, true, true, true),
        step(Mode::Upsert, upsert, true, true, true),
        step(Mode::Append, append, true, false, true),
        step(Mode::Overwrite, base, true, true, true),
    ];
    let (_, _, results) = same_either_way(&steps).await;
    assert_eq!(
        results[1].change.rows_added + results[1].change.rows_changed,
        0
    );
    assert_eq!(results[1].change.blobs_new, 0);
    assert_eq!(results[2].change.rows_changed, 150);
}

#[tokio::test]
async fn unkeyed_appends_stream_and_an_unkeyed_overwrite_is_committed_whole() {
    let rows = |from: i64, n: i64| -> Vec<Row> { (from..from + n).map(|i| (i % 97, i)).collect() };
    let steps = [
        Step {
            mode: Mode::Overwrite,
            rows: rows(0, 6000),
            keyed: false,
            compacts: false,
            streams: true,
        },
        Step {
            mode: Mode::Append,
            rows: rows(6000, 7000),
            keyed: false,
            compacts: false,
            streams: true,
        },
        Step {
            mode: Mode::Overwrite,
            rows: rows(3000, 9000),
            keyed: false,
            compacts: true,
            streams: false,
        },
    ];
    same_either_way(&steps).await;
}

#[tokio::test]
async fn a_keyed_input_out_of_key_order_is_committed_whole() {
    let mut rows = table(8000);
    rows.reverse();
    let steps = [
        step(Mode::Overwrite, table(8000), true, false, true),
        Step {
            mode: Mode::Overwrite,
            rows,
            keyed: true,
            compacts: false,
            streams: false,
        },
    ];
    same_either_way(&steps).await;
}

#[tokio::test]
async fn errors_are_those_of_the_whole_input_and_name_its_rows() {
    let repo = repo().await;
    // A key repeated across a window's edge.
    let mut rows = table(6000);
    rows.insert(3001, rows[3000]);
    let input = rows_of(rows);
    let e = repo
        .transaction("t", &opts(Mode::Overwrite, 2500))
        .commit(Input::Stream(&input))
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("rows 3001 and 3002"), "{e}");
    // An appended key the table has, found in a window's part of it.
    let input = rows_of(table(6000));
    repo.transaction("t", &opts(Mode::Overwrite, 2500))
        .commit(Input::Stream(&input))
        .await
        .unwrap();
    let mut again: Vec<Row> = vec![(10, 0)];
    again.extend((0..5000).map(|i| (20_000 + i, 0)));
    let input = rows_of(again);
    let e = repo
        .transaction("t", &opts(Mode::Append, 2500))
        .commit(Input::Stream(&input))
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("key id=10 exists already"), "{e}");
    // Nothing of the refused commits is visible.
    assert_eq!(read(&repo).await, table(6000));
}

/// What a reader told its progress: the totals begun and the bytes done.
#[derive(Default)]
struct Told {
    begun: std::sync::Mutex<Vec<(String, u64)>>,
    done: std::sync::atomic::AtomicU64,
}

impl tablepin::Progress for Told {
    fn begin(&self, what: &str, total: u64) {
        self.begun.lock().unwrap().push((what.to_string(), total));
        self.done.store(0, std::sync::atomic::Ordering::Relaxed);
    }
    fn advance(&self, n: u64) {
        self.done.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
    }
}

#[test]
fn reading_a_csv_file_tells_its_progress_of_every_byte_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.csv");
    let mut text = String::from("id,v\n");
    for i in 0..200_000 {
        text.push_str(&format!("{i},{}\n", i * 7));
    }
    std::fs::write(&path, &text).unwrap();
    let path = path.to_str().unwrap().to_string();
    let told = Arc::new(Told::default());
    let opts = tablepin::files::ReadOptions {
        delimiter: None,
        progress: Some(told.clone()),
    };
    let bytes = text.len() as u64;

    // Read whole: the bytes parsed, all of them.
    let (_, batches) = tablepin::files::read_table_file_with(&path, &opts).unwrap();
    assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), 200_000);
    assert_eq!(
        told.begun.lock().unwrap().clone(),
        vec![(format!("reading {path}"), bytes)]
    );
    assert_eq!(told.done.load(std::sync::atomic::Ordering::Relaxed), bytes);

    // A batch at a time (a streamed commit): the file's bytes as they are
    // read, the schema's sample pass not counted.
    let (_, batches) = tablepin::files::open_table_file(&path, &opts).unwrap();
    let mut rows = 0;
    let mut seen_before_end = Vec::new();
    for b in batches {
        rows += b.unwrap().num_rows();
        seen_before_end.push(told.done.load(std::sync::atomic::Ordering::Relaxed));
    }
    assert_eq!(rows, 200_000);
    assert_eq!(told.begun.lock().unwrap().len(), 2);
    assert_eq!(told.begun.lock().unwrap()[1].1, bytes);
    assert_eq!(told.done.load(std::sync::atomic::Ordering::Relaxed), bytes);
    assert!(
        seen_before_end.first().is_some_and(|first| *first < bytes),
        "the first batch came before the whole file was read: {seen_before_end:?}"
    );
}
