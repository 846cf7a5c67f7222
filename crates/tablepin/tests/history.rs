//! A 20-commit history of a generated 1,000,000-row table: every version
//! reads back row for row as committed, its content hash matches one
//! computed independently from the committed input, and storage grows with
//! the rows that changed.
//!
//! Runs over a million rows: build the tests optimized (`cargo test
//! --release`, as the README and CI do).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use arrow::array::RecordBatch;
use arrow::compute::concat_batches;
use tablepin::{CommitOptions, Mode, Repo, WriteSettings};
use tablepin_rowhash::content_hash;

fn opts(mode: Mode, msg: &str) -> CommitOptions {
    CommitOptions {
        mode,
        key: Some(vec!["id".into()]),
        message: msg.into(),
        ..Default::default()
    }
}

async fn data_bytes(repo: &Repo) -> u64 {
    repo.gc().stored().await.unwrap().0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_versions_of_a_million_rows_read_back_exactly() {
    const BASE: usize = 1_000_000;
    let history = tablepin_datagen::history(BASE, 20, 10_000, 150, 42);
    let dir = tempfile::tempdir().unwrap();
    let repo = Repo::init(dir.path().to_str().unwrap(), WriteSettings::default())
        .await
        .unwrap();
    let mut versions = Vec::new();
    for (i, table) in history.iter().enumerate() {
        let r = if i == 0 || i % 5 == 0 {
            // The whole table: only the difference is stored.
            repo.commit(
                "sales",
                table.schema(),
                vec![table.clone()],
                &opts(Mode::Overwrite, "full"),
            )
            .await
            .unwrap()
        } else {
            // Only what changed: the appended rows and the changed ones.
            let prev = &history[i - 1];
            let changed = changed_rows(prev, table);
            repo.commit(
                "sales",
                table.schema(),
                vec![changed],
                &opts(Mode::Upsert, "weekly"),
            )
            .await
            .unwrap()
        };
        let independent = content_hash([table]).unwrap();
        assert_eq!(r.content_hash, independent, "commit {i}: content hash");
        assert_eq!(r.rows, table.num_rows() as u64);
        if i > 0 {
            assert_eq!(r.change.rows_added, 10_000, "commit {i}");
            assert_eq!(r.change.rows_changed, 150, "commit {i}");
            assert_eq!(r.change.rows_deleted, 0, "commit {i}");
            assert!(r.change.checks.rows && r.change.checks.files && r.change.checks.content);
            assert!(!r.change.checks.schema);
        }
        versions.push(r.version);
    }
    // Every version, row for row (keyed: key order, which is id order here).
    for (i, (v, table)) in versions.iter().zip(&history).enumerate() {
        let read = repo
            .snapshot(v)
            .await
            .unwrap()
            .read("sales", None)
            .await
            .unwrap();
        let got = concat_batches(&read.schema, &read.batches).unwrap();
        assert_eq!(&got, table, "version {i} reads back differently");
    }
    // The last version also by tag, by branch and by main~N.
    repo.refs()
        .create(tablepin::RefKind::Tag, "t19", "main", "")
        .await
        .unwrap();
    assert_eq!(repo.resolve("t19").await.unwrap(), versions[19]);
    assert_eq!(repo.resolve("main~19").await.unwrap(), versions[0]);
}

/// The rows of `next` that are new or differ from `prev` (same ids first).
fn changed_rows(prev: &RecordBatch, next: &RecordBatch) -> RecordBatch {
    use arrow::array::{Int64Array, UInt32Array};
    let p = prev
        .column(8)
        .as_any()
        .downcast_ref::<Int64Array>()
        .unwrap();
    let n = next
        .column(8)
        .as_any()
        .downcast_ref::<Int64Array>()
        .unwrap();
    let mut idx: Vec<u32> = (0..prev.num_rows())
        .filter(|i| p.value(*i) != n.value(*i))
        .map(|i| i as u32)
        .collect();
    idx.extend(prev.num_rows() as u32..next.num_rows() as u32);
    arrow::compute::take_record_batch(next, &UInt32Array::from(idx)).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_rows_again_or_reordered_cost_nothing_and_150_changes_cost_under_one_percent() {
    let table = tablepin_datagen::sales(0, 1_000_000, 7);
    let dir = tempfile::tempdir().unwrap();
    let repo = Repo::init(dir.path().to_str().unwrap(), WriteSettings::default())
        .await
        .unwrap();
    let first = repo
        .commit(
            "sales",
            table.schema(),
            vec![table.clone()],
            &opts(Mode::Overwrite, "first"),
        )
        .await
        .unwrap();
    let table_bytes = data_bytes(&repo).await;

    // The same table again: no new blob but the version record.
    let before = data_bytes(&repo).await;
    let again = repo
        .commit(
            "sales",
            table.schema(),
            vec![table.clone()],
            &opts(Mode::Overwrite, "again"),
        )
        .await
        .unwrap();
    assert_eq!(again.change.bytes_new, 0);
    assert_eq!(again.change.blobs_new, 0);
    assert!(
        !again.change.checks.any(),
        "no check fires: {:?}",
        again.change.checks
    );
    assert_eq!(data_bytes(&repo).await - before, again.version_bytes);

    // The same rows in another order.
    let n = table.num_rows() as u32;
    let rev: Vec<u32> = (0..n).rev().collect();
    let shuffled =
        arrow::compute::take_record_batch(&table, &arrow::array::UInt32Array::from(rev)).unwrap();
    let before = data_bytes(&repo).await;
    let reordered = repo
        .commit(
            "sales",
            table.schema(),
            vec![shuffled.clone()],
            &opts(Mode::Overwrite, "reordered"),
        )
        .await
        .unwrap();
    assert_eq!(reordered.change.bytes_new, 0);
    assert_eq!(reordered.content_hash, first.content_hash);
    assert_eq!(data_bytes(&repo).await - before, reordered.version_bytes);
    // Reads back in key order, equal to the original.
    let read = repo.read("main", "sales", None).await.unwrap();
    assert_eq!(concat_batches(&read.schema, &read.batches).unwrap(), table);

    // 150 scattered rows changed.
    let ids = tablepin_datagen::pick_ids(1_000_000, 150, 9);
    let changed = tablepin_datagen::with_returns(&table, &ids, 3);
    let before = data_bytes(&repo).await;
    let c = repo
        .commit(
            "sales",
            table.schema(),
            vec![changed],
            &opts(Mode::Upsert, "150 rows"),
        )
        .await
        .unwrap();
    let added = data_bytes(&repo).await - before;
    assert_eq!(c.change.rows_changed, 150);
    assert!(
        (added as f64) < 0.01 * table_bytes as f64,
        "150 changed rows added {added} bytes to a {table_bytes}-byte table"
    );
    assert!(c.change.checks.files && c.change.checks.content && !c.change.checks.rows);
}
