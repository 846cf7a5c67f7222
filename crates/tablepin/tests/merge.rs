//! `merge` and `revert`: a three-way merge of random changes on two
//! branches equals the merge computed row by row from the three versions
//! read whole (for either side settling conflicts), its content hash equals
//! the hash of those rows, conflicts leave the branch untouched and name
//! the base, ours and theirs values, a fast-forward writes nothing, and a
//! revert undoes one version under later ones.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::Int64Type;
use proptest::prelude::*;
use tablepin::{
    CommitOptions, MergeOptions, MergeOutcome, Mode, RefKind, Repo, Strategy as Side, VersionId,
    WriteSettings,
};

mod common;

use common::{batch, rows_of, runtime, Row};

fn keys(ids: &[i64]) -> RecordBatch {
    RecordBatch::try_from_iter(vec![(
        "id",
        Arc::new(Int64Array::from(ids.to_vec())) as ArrayRef,
    )])
    .unwrap()
}

async fn read(repo: &Repo, rev: &str) -> Vec<Row> {
    let mut r = rows_of(&repo.read(rev, "t", None).await.unwrap().batches);
    r.sort();
    r
}

fn opts(branch: &str, mode: Mode, keyed: bool) -> CommitOptions {
    CommitOptions {
        mode,
        key: keyed.then(|| vec!["id".into()]),
        branch: branch.into(),
        ..Default::default()
    }
}

/// One side's edit: rows upserted and keys deleted (keyed), or rows
/// appended and rows removed by position (unkeyed, as an overwrite).
#[derive(Debug, Clone)]
struct Edit {
    put: Vec<Row>,
    delete: Vec<i64>,
}

const BASE: i64 = 400;

fn edit() -> impl proptest::strategy::Strategy<Value = Edit> {
    (
        proptest::collection::vec((0i64..BASE + 40, proptest::option::of(0i64..3)), 0..30),
        proptest::collection::vec(0i64..BASE + 40, 0..12),
    )
        .prop_map(|(put, mut delete)| {
            let put: BTreeMap<i64, Option<i64>> = put.into_iter().collect();
            delete.sort();
            delete.dedup();
            Edit {
                put: put.into_iter().collect(),
                delete,
            }
        })
}

async fn apply(repo: &Repo, branch: &str, keyed: bool, e: &Edit) {
    if keyed {
        let del: Vec<i64> = e
            .delete
            .iter()
            .copied()
            .filter(|d| !e.put.iter().any(|p| p.0 == *d))
            .collect();
        if !del.is_empty() {
            let k = keys(&del);
            let o = opts(branch, Mode::Delete, true);
            repo.commit("t", k.schema(), vec![k], &o).await.unwrap();
        }
        let b = batch(&e.put);
        let o = opts(branch, Mode::Upsert, true);
        repo.commit("t", b.schema(), vec![b], &o).await.unwrap();
    } else {
        // Unkeyed: the rows whose ids are listed are removed, then the
        // put rows appended.
        let mut now = rows_of(&repo.read(branch, "t", None).await.unwrap().batches);
        now.retain(|r| !e.delete.contains(&r.0));
        now.extend(e.put.iter().copied());
        let b = batch(&now);
        let o = opts(branch, Mode::Overwrite, false);
        repo.commit("t", b.schema(), vec![b], &o).await.unwrap();
    }
}

/// A keyed edit of `branch`.
async fn change(repo: &Repo, branch: &str, put: Vec<Row>, delete: Vec<i64>) {
    apply(repo, branch, true, &Edit { put, delete }).await;
}

/// The keyed merge row by row: a key theirs changed takes theirs' row when
/// theirs settles conflicts or ours left the key as it was; otherwise ours.
fn naive_keyed(base: &[Row], ours: &[Row], theirs: &[Row], strategy: Side) -> Vec<Row> {
    let map = |r: &[Row]| r.iter().map(|r| (r.0, r.1)).collect::<BTreeMap<_, _>>();
    let (b, o, t) = (map(base), map(ours), map(theirs));
    let mut all: Vec<i64> = b.keys().chain(o.keys()).chain(t.keys()).copied().collect();
    all.sort();
    all.dedup();
    let mut out = Vec::new();
    for k in all {
        let (bv, ov, tv) = (b.get(&k), o.get(&k), t.get(&k));
        let take = if tv == bv {
            ov
        } else if ov == bv || ov == tv || strategy == Side::Theirs {
            tv
        } else {
            ov
        };
        if let Some(v) = take {
            out.push((k, *v));
        }
    }
    out
}

/// The unkeyed merge as multisets: ours, less what theirs removed and ours
/// did not, plus what theirs added and ours did not.
fn naive_unkeyed(base: &[Row], ours: &[Row], theirs: &[Row]) -> Vec<Row> {
    let count = |r: &[Row]| {
        let mut m: BTreeMap<Row, i64> = BTreeMap::new();
        for x in r {
            *m.entry(*x).or_default() += 1;
        }
        m
    };
    let (b, o, t) = (count(base), count(ours), count(theirs));
    let mut out = Vec::new();
    let all: std::collections::BTreeSet<Row> =
        b.keys().chain(o.keys()).chain(t.keys()).copied().collect();
    for r in all {
        let (bn, on, tn) = (
            b.get(&r).copied().unwrap_or(0),
            o.get(&r).copied().unwrap_or(0),
            t.get(&r).copied().unwrap_or(0),
        );
        let (o_add, o_rem) = ((on - bn).max(0), (bn - on).max(0));
        let (t_add, t_rem) = ((tn - bn).max(0), (bn - tn).max(0));
        let n = on + (t_add - o_add).max(0) - (t_rem - o_rem).max(0);
        for _ in 0..n.max(0) {
            out.push(r);
        }
    }
    out
}

async fn branched(keyed: bool, base: &[Row]) -> (Repo, VersionId) {
    let repo = Repo::init("memory://", WriteSettings::default())
        .await
        .unwrap();
    let b = batch(base);
    let o = opts("main", Mode::Overwrite, keyed);
    let v = repo
        .commit("t", b.schema(), vec![b], &o)
        .await
        .unwrap()
        .version;
    repo.refs()
        .create(RefKind::Branch, "side", "main", "")
        .await
        .unwrap();
    (repo, v)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    #[test]
    fn a_merge_equals_the_merge_of_the_three_versions_read_whole(
        keyed in any::<bool>(),
        ours in proptest::collection::vec(edit(), 1..3),
        theirs in proptest::collection::vec(edit(), 1..3),
        theirs_wins in any::<bool>(),
    ) {
        runtime().block_on(async {
            let base: Vec<Row> = (0..BASE).map(|i| (if keyed { i } else { i % 50 }, Some(i % 3))).collect();
            let (repo, v0) = branched(keyed, &base).await;
            for e in &ours { apply(&repo, "main", keyed, e).await; }
            for e in &theirs { apply(&repo, "side", keyed, e).await; }
            let (b, o, t) = (read(&repo, &v0.to_string()).await, read(&repo, "main").await, read(&repo, "side").await);
            let strategy = if theirs_wins { Side::Theirs } else { Side::Ours };
            let head = repo.resolve("main").await.unwrap();
            let m = repo
                .merge("side", &MergeOptions { strategy: Some(strategy), ..Default::default() })
                .await
                .unwrap();
            let mut expected = if keyed { naive_keyed(&b, &o, &t, strategy) } else { naive_unkeyed(&b, &o, &t) };
            expected.sort();
            let got = read(&repo, "main").await;
            prop_assert_eq!(&got, &expected);
            let snap = repo.snapshot(repo.resolve("main").await.unwrap()).await.unwrap().table("t").await.unwrap();
            let hash = tablepin::content_hash([&batch(&expected)]).unwrap();
            prop_assert_eq!(snap.content_hash, hash);
            prop_assert_eq!(snap.rows, expected.len() as u64);
            if m.outcome == MergeOutcome::Merged {
                let v = repo.version(&m.version.unwrap()).await.unwrap();
                prop_assert_eq!(v.parents, vec![head, repo.resolve("side").await.unwrap()]);
            }
            let report = repo.verify(&tablepin::NoProgress).await.unwrap();
            prop_assert!(report.problems.is_empty(), "{:?}", report.problems);
            Ok(())
        })?;
    }
}

#[tokio::test]
async fn conflicts_leave_the_branch_untouched_and_name_the_three_values() {
    let base: Vec<Row> = (0..100).map(|i| (i, Some(0))).collect();
    let (repo, _) = branched(true, &base).await;
    // Ours changes 0..10 to 1 and deletes 50; theirs changes 5..15 to 2,
    // deletes 20 and changes 50 to 2; both change 90 to 7.
    let ours: Vec<Row> = (0..10)
        .map(|i| (i, Some(1)))
        .chain([(90, Some(7))])
        .collect();
    let theirs: Vec<Row> = (5..15)
        .map(|i| (i, Some(2)))
        .chain([(50, Some(2)), (90, Some(7))])
        .collect();
    change(&repo, "main", ours, vec![50]).await;
    change(&repo, "side", theirs, vec![20]).await;
    let head = repo.resolve("main").await.unwrap();
    let m = repo.merge("side", &MergeOptions::default()).await.unwrap();
    assert_eq!(m.outcome, MergeOutcome::Conflicts);
    assert_eq!(m.version, None);
    assert_eq!(
        repo.resolve("main").await.unwrap(),
        head,
        "the branch is untouched"
    );
    let t = &m.tables[0];
    assert_eq!(
        (t.conflicts, t.same),
        (6, 1),
        "keys 5..10 and 50 conflict; 90 alike"
    );
    let rows = t.conflict_rows.as_ref().unwrap();
    let shown = arrow::util::pretty::pretty_format_batches(std::slice::from_ref(rows))
        .unwrap()
        .to_string();
    assert!(
        shown.contains("| 5  | modified/modified | v       | 0      | 1      | 2        |"),
        "{shown}"
    );
    assert!(
        shown.contains("| 50 | deleted/modified  | v       | 0      |        | 2        |"),
        "{shown}"
    );

    // A resolution gives each conflicting key its row.
    let fixed: Vec<Row> = (5..10)
        .map(|i| (i, Some(9)))
        .chain([(50, Some(9))])
        .collect();
    let b = batch(&fixed);
    let mut o = MergeOptions::default();
    o.resolved.insert("t".into(), (b.schema(), vec![b]));
    let m = repo.merge("side", &o).await.unwrap();
    assert_eq!(m.outcome, MergeOutcome::Merged);
    let got: BTreeMap<i64, Option<i64>> = read(&repo, "main").await.into_iter().collect();
    assert_eq!(got[&0], Some(1));
    assert_eq!(got[&7], Some(9));
    assert_eq!(got[&12], Some(2));
    assert_eq!(got[&50], Some(9));
    assert_eq!(got[&90], Some(7));
    assert!(!got.contains_key(&20));
    assert_eq!(got.len(), 99);
    // Merged again: nothing left to bring in.
    let again = repo.merge("side", &MergeOptions::default()).await.unwrap();
    assert_eq!(again.outcome, MergeOutcome::UpToDate);
}

#[tokio::test]
async fn a_resolution_missing_a_key_is_refused_and_changes_nothing() {
    let base: Vec<Row> = (0..10).map(|i| (i, Some(0))).collect();
    let (repo, _) = branched(true, &base).await;
    change(&repo, "main", vec![(1, Some(1)), (2, Some(1))], vec![]).await;
    change(&repo, "side", vec![(1, Some(2)), (2, Some(2))], vec![]).await;
    let head = repo.resolve("main").await.unwrap();
    let b = batch(&[(1, Some(5))]);
    let mut o = MergeOptions::default();
    o.resolved.insert("t".into(), (b.schema(), vec![b]));
    let e = repo.merge("side", &o).await.unwrap_err();
    assert!(
        e.to_string().contains("no row for conflicting key (id=2)"),
        "{e}"
    );
    assert_eq!(repo.resolve("main").await.unwrap(), head);
}

#[tokio::test]
async fn a_branch_behind_fast_forwards_without_writing() {
    let base: Vec<Row> = (0..10).map(|i| (i, Some(0))).collect();
    let (repo, _) = branched(true, &base).await;
    change(&repo, "side", vec![(1, Some(5))], vec![]).await;
    let before = repo.gc().stored().await.unwrap();
    let m = repo.merge("side", &MergeOptions::default()).await.unwrap();
    assert_eq!(m.outcome, MergeOutcome::FastForward);
    assert_eq!(
        repo.resolve("main").await.unwrap(),
        repo.resolve("side").await.unwrap()
    );
    assert_eq!(repo.gc().stored().await.unwrap(), before, "no blob written");
    let m = repo.merge("side", &MergeOptions::default()).await.unwrap();
    assert_eq!(m.outcome, MergeOutcome::UpToDate);
}

#[tokio::test]
async fn a_revert_undoes_one_version_under_later_ones() {
    let base: Vec<Row> = (0..20).map(|i| (i, Some(0))).collect();
    let (repo, _) = branched(true, &base).await;
    change(&repo, "main", vec![(1, Some(1)), (30, Some(1))], vec![2]).await;
    let undone = repo.resolve("main").await.unwrap();
    change(&repo, "main", vec![(5, Some(5))], vec![6]).await;
    let m = repo
        .revert(&undone.to_string(), &MergeOptions::default())
        .await
        .unwrap();
    assert_eq!(m.outcome, MergeOutcome::Merged);
    // (`apply` deleted 2 in a version of its own, before the one undone.)
    let mut expected: Vec<Row> = (0..20)
        .filter(|i| *i != 2 && *i != 6)
        .map(|i| (i, Some(if i == 5 { 5 } else { 0 })))
        .collect();
    expected.sort();
    assert_eq!(read(&repo, "main").await, expected);
    let v = repo.version(&m.version.unwrap()).await.unwrap();
    assert_eq!(v.parents.len(), 1);
    let snap = table_t(&repo, m.version.unwrap()).await;
    assert_eq!(
        snap.content_hash,
        tablepin::content_hash([&batch(&expected)]).unwrap()
    );

    // A later change to a key the reverted version changed conflicts.
    change(&repo, "main", vec![(5, Some(6))], vec![]).await;
    let five = repo.log("main", &Default::default()).await.unwrap()[1].id;
    let m = repo
        .revert(&five.to_string(), &MergeOptions::default())
        .await
        .unwrap();
    assert_eq!(
        m.outcome,
        MergeOutcome::Merged,
        "undoing the revert brings 1, 2 and 30 back"
    );
    let m = repo
        .revert(
            &repo.log("main", &Default::default()).await.unwrap()[3]
                .id
                .to_string(),
            &MergeOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(m.outcome, MergeOutcome::Conflicts, "key 5 changed since");
}

fn with_note(rows: &[(i64, i64, Option<&str>)]) -> RecordBatch {
    let ids = Int64Array::from_iter_values(rows.iter().map(|r| r.0));
    let v = Int64Array::from_iter_values(rows.iter().map(|r| r.1));
    let note = StringArray::from(rows.iter().map(|r| r.2).collect::<Vec<_>>());
    RecordBatch::try_from_iter_with_nullable(vec![
        ("id", Arc::new(ids) as ArrayRef, false),
        ("v", Arc::new(v) as ArrayRef, false),
        ("note", Arc::new(note) as ArrayRef, true),
    ])
    .unwrap()
}

#[tokio::test]
async fn a_column_added_on_one_side_merges_and_a_dropped_one_is_refused() {
    let base: Vec<Row> = (0..6).map(|i| (i, Some(0))).collect();
    let (repo, _) = branched(true, &base).await;
    change(&repo, "main", vec![(1, Some(1))], vec![]).await;
    // Theirs adds a column `note` with the rows of keys 2 and 3.
    let b = with_note(&[(2, 0, Some("two")), (3, 5, Some("three"))]);
    let o = opts("side", Mode::Upsert, true);
    repo.commit("t", b.schema(), vec![b], &o).await.unwrap();
    let m = repo.merge("side", &MergeOptions::default()).await.unwrap();
    assert_eq!(m.outcome, MergeOutcome::Merged);
    assert!(
        m.tables[0].change.checks.schema,
        "the schema check saw the new column"
    );
    let read = repo.read("main", "t", None).await.unwrap();
    let all = arrow::compute::concat_batches(&read.schema, &read.batches).unwrap();
    let names: Vec<&str> = read
        .schema
        .fields()
        .iter()
        .map(|f| f.name().as_str())
        .collect();
    assert_eq!(names, ["id", "v", "note"]);
    let mut got: Vec<(i64, i64, Option<String>)> = (0..all.num_rows())
        .map(|i| {
            let id = all.column(0).as_primitive::<Int64Type>().value(i);
            let v = all.column(1).as_primitive::<Int64Type>().value(i);
            let n = all.column(2).as_string::<i32>();
            (id, v, n.is_valid(i).then(|| n.value(i).to_string()))
        })
        .collect();
    got.sort();
    let expected = [
        (0, 0, None),
        (1, 1, None),
        (2, 0, Some("two")),
        (3, 5, Some("three")),
        (4, 0, None),
        (5, 0, None),
    ];
    let expected: Vec<(i64, i64, Option<String>)> = expected
        .iter()
        .map(|(a, b, c)| (*a, *b, c.map(str::to_string)))
        .collect();
    assert_eq!(got, expected);
    let snap = table_t(&repo, m.version.unwrap()).await;
    let rows: Vec<(i64, i64, Option<&str>)> = expected
        .iter()
        .map(|(a, b, c)| (*a, *b, c.as_deref()))
        .collect();
    assert_eq!(
        snap.content_hash,
        tablepin::content_hash([&with_note(&rows)]).unwrap()
    );

    // A side that drops a column both had cannot be merged by rows.
    repo.refs()
        .create(RefKind::Branch, "narrow", "main", "")
        .await
        .unwrap();
    let b = batch(&[(0, Some(9)), (1, Some(1))]);
    let o = CommitOptions {
        allow_schema_change: true,
        ..opts("narrow", Mode::Overwrite, true)
    };
    repo.commit("t", b.schema(), vec![b], &o).await.unwrap();
    let b = with_note(&[(4, 4, None)]);
    let o = opts("main", Mode::Upsert, true);
    repo.commit("t", b.schema(), vec![b], &o).await.unwrap();
    let head = repo.resolve("main").await.unwrap();
    let e = repo
        .merge("narrow", &MergeOptions::default())
        .await
        .unwrap_err();
    assert!(
        e.to_string().contains("not columns dropped or retyped"),
        "{e}"
    );
    assert_eq!(
        e.way_out(),
        vec![tablepin::Fix::KeepSide { table: "t".into() }],
        "{e}"
    );
    assert!(e.to_string().contains("Strategy::Theirs"), "{e}");
    assert_eq!(repo.resolve("main").await.unwrap(), head);
    // The way out it names: theirs' table, whole.
    let theirs = MergeOptions {
        table_strategy: BTreeMap::from([("t".to_string(), Side::Theirs)]),
        ..MergeOptions::default()
    };
    let m = repo.merge("narrow", &theirs).await.unwrap();
    assert_eq!(m.outcome, MergeOutcome::Merged);
    let narrow = repo.resolve("narrow").await.unwrap();
    assert_eq!(
        table_t(&repo, m.version.unwrap()).await,
        table_t(&repo, narrow).await
    );
}

/// Table "t"'s snapshot in a version.
async fn table_t(r: &Repo, v: tablepin::VersionId) -> tablepin::format::TableSnapshot {
    r.snapshot(v).await.unwrap().table("t").await.unwrap()
}
