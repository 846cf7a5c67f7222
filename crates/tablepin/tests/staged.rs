//! Staged commits: workers write data files ([`Transaction::stage`]), one
//! driver commits them as one version ([`Input::Staged`]). Each mode is
//! checked against the same rows committed as rows in another repository:
//! the same content hash and the same counts.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use tablepin::{
    CommitOptions, CommitResult, Error, GcPolicy, Input, Mode, NoProgress, Repo, StagedFiles,
    WriteSettings,
};

/// Rows `ids` of the table, their names depending on `version`.
fn rows(ids: impl IntoIterator<Item = i64>, version: i64) -> RecordBatch {
    let ids: Vec<i64> = ids.into_iter().collect();
    let names: Vec<String> = ids.iter().map(|i| format!("n{i}-v{version}")).collect();
    RecordBatch::try_from_iter(vec![
        ("id", Arc::new(Int64Array::from(ids)) as ArrayRef),
        ("name", Arc::new(StringArray::from(names)) as ArrayRef),
    ])
    .unwrap()
}

fn opts(mode: Mode, keyed: bool) -> CommitOptions {
    CommitOptions {
        mode,
        key: keyed.then(|| vec!["id".to_string()]),
        allow_empty: false,
        ..Default::default()
    }
}

async fn repo() -> (tempfile::TempDir, Repo) {
    let dir = tempfile::tempdir().unwrap();
    let settings = WriteSettings {
        file_rows: 300,
        ..Default::default()
    };
    let r = Repo::init(dir.path().to_str().unwrap(), settings)
        .await
        .unwrap();
    (dir, r)
}

/// Each worker's rows staged by a transaction of its own, as a worker
/// process would (its description through JSON).
async fn stage(r: &Repo, o: &CommitOptions, parts: &[RecordBatch]) -> Vec<StagedFiles> {
    let mut out = Vec::new();
    for p in parts {
        let s = r
            .transaction("t", o)
            .stage(p.schema(), vec![p.clone()])
            .await
            .unwrap();
        out.push(StagedFiles::from_json(&s.to_json().unwrap()).unwrap());
    }
    out
}

/// The same base, then `parts` committed as staged files in one repository
/// and as rows in another: the two results.
async fn both(
    base: RecordBatch,
    parts: Vec<RecordBatch>,
    mode: Mode,
    keyed: bool,
) -> (CommitResult, CommitResult, Repo, tempfile::TempDir) {
    let (da, a) = repo().await;
    let (_db, b) = repo().await;
    let first = opts(Mode::Overwrite, keyed);
    for r in [&a, &b] {
        r.commit("t", base.schema(), vec![base.clone()], &first)
            .await
            .unwrap();
    }
    let o = opts(mode, keyed);
    let staged = stage(&a, &o, &parts).await;
    let via_staged = a
        .transaction("t", &o)
        .commit(Input::Staged(staged))
        .await
        .unwrap();
    let schema = parts[0].schema();
    let via_rows = b.commit("t", schema, parts, &o).await.unwrap();
    (via_staged, via_rows, a, da)
}

fn counts(r: &CommitResult) -> (u64, u64, u64) {
    (
        r.change.rows_added,
        r.change.rows_changed,
        r.change.rows_deleted,
    )
}

async fn verified(r: &Repo) {
    let report = r.verify(&NoProgress).await.unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

#[tokio::test]
async fn staged_files_from_three_workers_land_as_one_version() {
    let parts = vec![
        rows(1000..1400, 1),
        rows(1400..1500, 1),
        rows(1500..2100, 1),
    ];
    for keyed in [false, true] {
        let (s, r, repo, _d) = both(rows(0..1000, 0), parts.clone(), Mode::Append, keyed).await;
        assert_eq!(s.content_hash, r.content_hash, "keyed {keyed}");
        assert_eq!(s.rows, 2100);
        assert_eq!(counts(&s), counts(&r));
        assert_eq!(counts(&s), (1100, 0, 0));
        let log = repo.log("main", &Default::default()).await.unwrap();
        assert_eq!(log.len(), 2, "one version for the three workers");
        let read = repo.read("main", "t", None).await.unwrap();
        assert_eq!(read.snapshot.content_hash, s.content_hash);
        let rows: usize = read.batches.iter().map(RecordBatch::num_rows).sum();
        assert_eq!(rows, 2100);
        verified(&repo).await;
    }
}

#[tokio::test]
async fn staged_upsert_and_overwrite_count_and_hash_as_rows_do() {
    let base = rows(0..1000, 0);
    // Keys 500..700 change, 700..760 come back the same, 1000..1200 are new.
    let parts = vec![rows(500..700, 1), rows(700..760, 0), rows(1000..1200, 1)];
    for mode in [Mode::Upsert, Mode::Overwrite] {
        let (s, r, repo, _d) = both(base.clone(), parts.clone(), mode, true).await;
        assert_eq!(s.content_hash, r.content_hash, "{mode:?}");
        assert_eq!(s.rows, r.rows, "{mode:?}");
        assert_eq!(counts(&s), counts(&r), "{mode:?}");
        verified(&repo).await;
    }
    // Unkeyed overwrite: by the rows' multiset.
    let (s, r, repo, _d) = both(base, parts, Mode::Overwrite, false).await;
    assert_eq!(s.content_hash, r.content_hash);
    assert_eq!(counts(&s), counts(&r));
    assert_eq!(counts(&s), (400, 0, 940));
    verified(&repo).await;
}

#[tokio::test]
async fn committing_the_same_staged_files_twice_makes_one_version() {
    let (_d, r) = repo().await;
    let o = opts(Mode::Append, false);
    r.commit("t", rows(0..10, 0).schema(), vec![rows(0..10, 0)], &o)
        .await
        .unwrap();
    let staged = stage(&r, &o, &[rows(10..20, 1), rows(20..30, 1)]).await;
    let tx = r.transaction("t", &o);
    let first = tx.commit(Input::Staged(staged.clone())).await.unwrap();
    let again = tx.commit(Input::Staged(staged.clone())).await.unwrap();
    assert!(!first.empty);
    assert!(again.empty, "the second commit landed something");
    assert_eq!(again.version, first.version);
    assert_eq!(r.log("main", &Default::default()).await.unwrap().len(), 2);
    // Part of them again, beside new files: refused, nothing lands.
    let mut mixed = stage(&r, &o, &[rows(30..40, 1)]).await;
    mixed.push(staged[0].clone());
    let err = tx.commit(Input::Staged(mixed)).await.unwrap_err();
    assert!(matches!(err, Error::Staged { .. }), "{err}");
    assert_eq!(r.log("main", &Default::default()).await.unwrap().len(), 2);
}

#[tokio::test]
async fn staged_keys_are_checked_across_workers_and_against_the_table() {
    let (_d, r) = repo().await;
    let o = opts(Mode::Append, true);
    r.commit("t", rows(0..100, 0).schema(), vec![rows(0..100, 0)], &o)
        .await
        .unwrap();
    // Two workers with one key in common.
    let staged = stage(&r, &o, &[rows(100..150, 1), rows(149..200, 1)]).await;
    let err = r
        .transaction("t", &o)
        .commit(Input::Staged(staged))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::DuplicateKey { ref key, .. } if key.contains("149")),
        "{err}"
    );
    // A key the table has, appended.
    let staged = stage(&r, &o, &[rows(99..120, 1)]).await;
    let err = r
        .transaction("t", &o)
        .commit(Input::Staged(staged))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::KeyExists { ref key, .. } if key.contains("99")),
        "{err}"
    );
    // A worker's own rows with a key twice: refused when staging.
    let dup = rows([5, 5], 1);
    let err = r
        .transaction("t", &o)
        .stage(dup.schema(), vec![dup])
        .await
        .unwrap_err();
    assert!(matches!(err, Error::DuplicateKey { .. }), "{err}");
    // Delete takes keys.
    let staged = stage(&r, &o, &[rows(300..310, 1)]).await;
    let err = r
        .transaction("t", &opts(Mode::Delete, true))
        .commit(Input::Staged(staged))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Staged { .. }), "{err}");
    assert_eq!(
        r.log("main", &Default::default()).await.unwrap().len(),
        1,
        "a refused commit landed"
    );
}

#[tokio::test]
async fn staged_files_a_gc_removed_are_named_and_nothing_lands() {
    let (_d, r) = repo().await;
    let o = opts(Mode::Append, false);
    r.commit("t", rows(0..10, 0).schema(), vec![rows(0..10, 0)], &o)
        .await
        .unwrap();
    let staged = stage(&r, &o, &[rows(10..20, 1)]).await;
    let blob = staged[0].files[0].data;
    r.gc()
        .run(&GcPolicy {
            grace_ms: 0,
            sole_writer: true,
            ..Default::default()
        })
        .await
        .unwrap();
    let err = r
        .transaction("t", &o)
        .commit(Input::Staged(staged))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::StagedGone { blob: b, .. } if b == blob),
        "{err}"
    );
    assert!(err.to_string().contains("stage its rows again"), "{err}");
    assert_eq!(r.log("main", &Default::default()).await.unwrap().len(), 1);
    verified(&r).await;
}

#[tokio::test]
async fn staged_rows_take_the_table_schema_or_are_refused() {
    let (_d, r) = repo().await;
    let o = opts(Mode::Append, false);
    r.commit("t", rows(0..10, 0).schema(), vec![rows(0..10, 0)], &o)
        .await
        .unwrap();
    let extra = |nullable: bool| {
        RecordBatch::try_from_iter_with_nullable(vec![
            ("id", Arc::new(Int64Array::from(vec![1])) as ArrayRef, false),
            (
                "name",
                Arc::new(StringArray::from(vec!["x"])) as ArrayRef,
                false,
            ),
            (
                "more",
                Arc::new(StringArray::from(vec!["y"])) as ArrayRef,
                nullable,
            ),
        ])
        .unwrap()
    };
    // A column old rows cannot have: the commit's own refusal.
    let b = extra(false);
    let err = r
        .transaction("t", &o)
        .stage(b.schema(), vec![b])
        .await
        .unwrap_err();
    assert!(matches!(err, Error::SchemaChange { .. }), "{err}");
    // A column a commit of rows would add: not by staged files.
    let b = extra(true);
    let err = r
        .transaction("t", &o)
        .stage(b.schema(), vec![b])
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Staged { .. }), "{err}");
    assert!(StagedFiles::from_json("{}").is_err());
}

/// Keys only, as a worker that knows which rows go sends them.
fn keys(ids: std::ops::Range<i64>) -> RecordBatch {
    RecordBatch::try_from_iter(vec![(
        "id",
        Arc::new(Int64Array::from_iter_values(ids)) as ArrayRef,
    )])
    .unwrap()
}

#[tokio::test]
async fn staged_keys_delete_as_the_same_keys_given_as_rows_do() {
    let base = rows(0..1000, 0);
    let (_da, a) = repo().await;
    let (_db, b) = repo().await;
    for r in [&a, &b] {
        let first = opts(Mode::Overwrite, true);
        r.commit("t", base.schema(), vec![base.clone()], &first)
            .await
            .unwrap();
    }
    // Three workers' keys; 2000.. are keys the table does not have.
    let parts = [keys(100..300), keys(900..1000), keys(2000..2010)];
    let del = opts(Mode::Delete, false);
    let staged = stage(&a, &del, &parts).await;
    assert!(staged.iter().all(|s| s.schema.fields().len() == 1));
    let s = a
        .transaction("t", &del)
        .commit(Input::Staged(staged.clone()))
        .await
        .unwrap();
    let all = arrow::compute::concat_batches(&parts[0].schema(), &parts).unwrap();
    let r = b.commit("t", all.schema(), vec![all], &del).await.unwrap();
    assert_eq!(counts(&s), (0, 0, 300));
    assert_eq!(counts(&s), counts(&r));
    assert_eq!(s.content_hash, r.content_hash);
    assert_eq!(s.rows, 700);
    // Committed again: nothing is left to delete, and nothing lands.
    let again = a
        .transaction("t", &del)
        .commit(Input::Staged(staged))
        .await
        .unwrap();
    assert!(again.empty, "a second delete of the same keys landed");
    assert_eq!(a.log("main", &Default::default()).await.unwrap().len(), 2);
    verified(&a).await;
    // Keys of another type than the table's key: named when staging.
    let text = RecordBatch::try_from_iter(vec![(
        "id",
        Arc::new(StringArray::from(vec!["x"])) as ArrayRef,
    )])
    .unwrap();
    let err = a
        .transaction("t", &del)
        .stage(text.schema(), vec![text])
        .await
        .unwrap_err();
    assert!(matches!(err, Error::SchemaChange { .. }), "{err}");
}
