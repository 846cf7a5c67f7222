//! Commit plans as data: a plan made and written out, read back and applied
//! does what committing directly does, and nothing else.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow::compute::concat_batches;
use tablepin::{CommitOptions, CommitPlan, Error, Input, Mode, Repo, WriteSettings};

fn rows(ids: &[i64], tag: &str) -> RecordBatch {
    let names: Vec<String> = ids.iter().map(|i| format!("{tag}{i}")).collect();
    RecordBatch::try_from_iter(vec![
        ("id", Arc::new(Int64Array::from(ids.to_vec())) as ArrayRef),
        ("name", Arc::new(StringArray::from(names)) as ArrayRef),
    ])
    .unwrap()
}

fn opts(mode: Mode, time_ms: i64) -> CommitOptions {
    CommitOptions {
        mode,
        key: Some(vec!["id".into()]),
        message: format!("at {time_ms}"),
        time_ms: Some(time_ms),
        ..Default::default()
    }
}

/// A repository whose table `t` holds ids 0..1000 ("a0" ...), committed
/// at a fixed time, so two of them hold the same version.
async fn repo() -> (tempfile::TempDir, Repo) {
    let dir = tempfile::tempdir().unwrap();
    let r = Repo::init(dir.path().to_str().unwrap(), WriteSettings::default())
        .await
        .unwrap();
    let base = rows(&(0..1000).collect::<Vec<_>>(), "a");
    r.commit("t", base.schema(), vec![base], &opts(Mode::Overwrite, 1))
        .await
        .unwrap();
    (dir, r)
}

/// The table as it is now: ids 0..1000 with 400..410 renamed, 990.. gone,
/// and 2000..2005 new.
fn changed() -> RecordBatch {
    let ids: Vec<i64> = (0..990).chain(2000..2005).collect();
    let names: Vec<String> = ids
        .iter()
        .map(|i| match i {
            400..410 => format!("b{i}"),
            _ => format!("a{i}"),
        })
        .collect();
    RecordBatch::try_from_iter(vec![
        ("id", Arc::new(Int64Array::from(ids)) as ArrayRef),
        ("name", Arc::new(StringArray::from(names)) as ArrayRef),
    ])
    .unwrap()
}

/// Every file under `dir`, with its size.
fn files(dir: &std::path::Path) -> Vec<(std::path::PathBuf, u64)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                todo.push(e.path());
            } else {
                out.push((e.path(), e.metadata().unwrap().len()));
            }
        }
    }
    out.sort();
    out
}

async fn head(r: &Repo) -> (tablepin::VersionId, RecordBatch) {
    let read = r.read("main", "t", None).await.unwrap();
    (
        read.version,
        concat_batches(&read.schema, &read.batches).unwrap(),
    )
}

#[tokio::test]
async fn a_commit_plan_written_out_and_applied_does_what_committing_directly_does() {
    let (dir_a, a) = repo().await;
    let (_dir_b, b) = repo().await;
    let input = changed();
    let o = opts(Mode::Overwrite, 2);

    let before = files(dir_a.path());
    let plan = a
        .transaction("t", &o)
        .plan(Input::Rows(input.schema(), vec![input.clone()]))
        .await
        .unwrap();
    assert_eq!(files(dir_a.path()), before, "planning wrote something");
    assert_eq!(
        (
            plan.plan.rows_added,
            plan.plan.rows_changed,
            plan.plan.rows_deleted
        ),
        (5, 10, 10)
    );
    assert!(!plan.plan.writes.is_empty());

    let json = serde_json::to_string_pretty(&plan).unwrap();
    let saved: CommitPlan = serde_json::from_str(&json).unwrap();
    assert_eq!(saved, plan);

    // Only the message and time come from the options given at apply.
    let at_apply = CommitOptions {
        mode: Mode::Append,
        key: None,
        branch: "elsewhere".into(),
        ..o.clone()
    };
    let applied = a
        .transaction(&saved.table, &at_apply)
        .apply(&saved, Input::Rows(input.schema(), vec![input.clone()]))
        .await
        .unwrap();
    let direct = b
        .commit("t", input.schema(), vec![input.clone()], &o)
        .await
        .unwrap();
    assert_eq!(applied.version, direct.version);
    assert_eq!(applied.change, direct.change);
    assert_eq!(applied.content_hash, saved.plan.snapshot.content_hash);
    assert_eq!(applied.rows, saved.plan.snapshot.rows);
    assert_eq!(
        (
            applied.change.rows_added,
            applied.change.rows_changed,
            applied.change.rows_deleted
        ),
        (5, 10, 10)
    );
    let stored: Vec<_> = files(dir_a.path()).into_iter().map(|(_, n)| n).collect();
    for w in &saved.plan.writes {
        assert!(a.store().has_blob(&w.id).await.unwrap(), "{:?}", w.id);
        assert!(stored.contains(&w.bytes));
    }
    let (va, rows_a) = head(&a).await;
    let (vb, rows_b) = head(&b).await;
    assert_eq!((va, &rows_a), (vb, &rows_b));
    assert_eq!(rows_a, input);
}

#[tokio::test]
async fn a_saved_commit_plan_is_refused_once_the_branch_moved_or_for_another_input() {
    let (_dir, r) = repo().await;
    let input = changed();
    let plan = r
        .transaction("t", &opts(Mode::Overwrite, 2))
        .plan(Input::Rows(input.schema(), vec![input.clone()]))
        .await
        .unwrap();

    // Another input: refused as bad input, nothing committed.
    let other = rows(&[1, 2, 3], "c");
    let (was, _) = head(&r).await;
    let err = r
        .transaction(&plan.table, &opts(Mode::Overwrite, 3))
        .apply(&plan, Input::Rows(other.schema(), vec![other]))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::PlanInput { .. }), "{err}");
    assert_eq!(err.kind(), tablepin::ErrorKind::InvalidInput);
    assert_eq!(head(&r).await.0, was);

    // The branch moved: refused as a conflict, nothing committed.
    let more = rows(&[5000], "d");
    let moved = r
        .commit("t", more.schema(), vec![more], &opts(Mode::Append, 4))
        .await
        .unwrap();
    let err = r
        .transaction(&plan.table, &opts(Mode::Overwrite, 5))
        .apply(&plan, Input::Rows(input.schema(), vec![input.clone()]))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::PlanOutdated { .. }), "{err}");
    assert_eq!(err.kind(), tablepin::ErrorKind::Conflict);
    assert_eq!(head(&r).await.0, moved.version);
}

#[tokio::test]
async fn the_first_commit_of_a_table_plans_and_applies_from_no_version() {
    let dir = tempfile::tempdir().unwrap();
    let r = Repo::init(dir.path().to_str().unwrap(), WriteSettings::default())
        .await
        .unwrap();
    let input = rows(&[3, 1, 2], "x");
    let plan = r
        .transaction("t", &opts(Mode::Upsert, 1))
        .plan(Input::Rows(input.schema(), vec![input.clone()]))
        .await
        .unwrap();
    assert_eq!(plan.parent, None);
    assert_eq!(plan.mode, Mode::Upsert);
    let json = serde_json::to_value(&plan).unwrap();
    assert_eq!(json["mode"], "upsert");
    let saved: CommitPlan = serde_json::from_value(json).unwrap();
    let done = r
        .transaction(&saved.table, &opts(Mode::Upsert, 1))
        .apply(&saved, Input::Rows(input.schema(), vec![input]))
        .await
        .unwrap();
    assert_eq!(done.parent, None);
    assert_eq!(done.rows, 3);
    assert_eq!(head(&r).await.1, rows(&[1, 2, 3], "x"));
}
