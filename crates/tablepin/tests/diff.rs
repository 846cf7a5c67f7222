//! `diff` and `restore`: a diff of any two versions of a random history
//! equals the diff computed by reading both versions whole, while reading
//! only what the versions do not share; a restore gives back a version's
//! tables without writing data.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Int64Array, RecordBatch};
use arrow::datatypes::Int64Type;
use proptest::prelude::*;
use tablepin::{CommitOptions, ErrorKind, Mode, Repo, RestoreOptions, VersionId, WriteSettings};

mod common;

use common::{batch, keyed, rows_of, runtime, upsert, Row};

#[derive(Debug, Clone)]
enum Op {
    Overwrite(Vec<Row>),
    /// The table as it is, with these rows put in (by key when keyed),
    /// rows at these positions left out, and the order reversed.
    Edit(Vec<Row>, Vec<usize>),
    Upsert(Vec<Row>),
    Append(Vec<Row>),
    Delete(Vec<i64>),
    Compact,
}

/// Rows of the first version: enough that a change of a few rows hides
/// positions under deletion vectors rather than rewriting the files.
const BASE: i64 = 3000;

fn row() -> impl Strategy<Value = Row> + Clone {
    (0i64..BASE, proptest::option::of(0i64..4))
}

fn op(keyed: bool) -> impl Strategy<Value = Op> {
    let rows = prop_oneof![
        4 => proptest::collection::vec(row(), 0..8),
        1 => proptest::collection::vec(row(), 0..40),
    ];
    let unique = |rs: Vec<Row>| {
        let m: BTreeMap<i64, Option<i64>> = rs.into_iter().collect();
        let mut v: Vec<Row> = m.into_iter().collect();
        // Input order is not key order.
        v.reverse();
        v
    };
    if keyed {
        prop_oneof![
            rows.clone().prop_map(move |r| Op::Overwrite(unique(r))),
            (
                rows.clone(),
                proptest::collection::vec(0usize..BASE as usize, 0..6)
            )
                .prop_map(move |(r, d)| Op::Edit(unique(r), d)),
            rows.clone().prop_map(move |r| Op::Upsert(unique(r))),
            proptest::collection::vec(0i64..BASE, 0..6).prop_map(|mut k| {
                k.sort_unstable();
                k.dedup();
                Op::Delete(k)
            }),
            Just(Op::Compact),
        ]
        .boxed()
    } else {
        prop_oneof![
            rows.clone().prop_map(Op::Overwrite),
            (
                rows.clone(),
                proptest::collection::vec(0usize..BASE as usize, 0..6)
            )
                .prop_map(|(r, d)| Op::Edit(r, d)),
            rows.prop_map(Op::Append),
        ]
        .boxed()
    }
}

async fn apply(repo: &Repo, keyed: bool, op: &Op) -> Option<VersionId> {
    let key = keyed.then(|| vec!["id".to_string()]);
    let (mode, b) = match op {
        Op::Overwrite(r) => (Mode::Overwrite, batch(r)),
        Op::Edit(put, drop) => {
            let mut now = rows_of(&repo.read("main", "t", None).await.unwrap().batches);
            if keyed {
                now.retain(|r| !put.iter().any(|p| p.0 == r.0));
            }
            let mut kept: Vec<Row> = now
                .iter()
                .enumerate()
                .filter(|(i, _)| !drop.contains(i))
                .map(|(_, r)| *r)
                .collect();
            kept.extend(put.iter().copied());
            kept.reverse();
            (Mode::Overwrite, batch(&kept))
        }
        Op::Upsert(r) => (Mode::Upsert, batch(r)),
        Op::Append(r) => (Mode::Append, batch(r)),
        Op::Delete(keys) => (
            Mode::Delete,
            RecordBatch::try_from_iter(vec![(
                "id",
                Arc::new(Int64Array::from(keys.clone())) as ArrayRef,
            )])
            .unwrap(),
        ),
        Op::Compact => {
            let opts = CommitOptions::default();
            return repo
                .transaction("t", &opts)
                .compact()
                .await
                .ok()
                .flatten()
                .map(|c| c.version);
        }
    };
    let opts = CommitOptions {
        mode,
        key,
        ..Default::default()
    };
    Some(
        repo.commit("t", b.schema(), vec![b], &opts)
            .await
            .unwrap()
            .version,
    )
}

/// (kind, from, to) of each differing row, computed from both versions
/// read whole.
fn naive(keyed: bool, old: &[Row], new: &[Row]) -> Vec<(String, Option<Row>, Option<Row>)> {
    let mut out = Vec::new();
    if keyed {
        let o: BTreeMap<i64, Option<i64>> = old.iter().copied().collect();
        let n: BTreeMap<i64, Option<i64>> = new.iter().copied().collect();
        for (k, v) in &o {
            match n.get(k) {
                None => out.push(("removed".into(), Some((*k, *v)), None)),
                Some(w) if w != v => out.push(("modified".into(), Some((*k, *v)), Some((*k, *w)))),
                _ => {}
            }
        }
        for (k, w) in &n {
            if !o.contains_key(k) {
                out.push(("added".into(), None, Some((*k, *w))));
            }
        }
    } else {
        let mut count: BTreeMap<Row, i64> = BTreeMap::new();
        for r in old {
            *count.entry(*r).or_default() -= 1;
        }
        for r in new {
            *count.entry(*r).or_default() += 1;
        }
        for (r, c) in count {
            let (kind, from, to) = if c < 0 {
                ("removed", Some(r), None)
            } else {
                ("added", None, Some(r))
            };
            for _ in 0..c.abs() {
                out.push((kind.to_string(), from, to));
            }
        }
    }
    out.sort();
    out
}

fn diff_rows(rows: &RecordBatch) -> Vec<(String, Option<Row>, Option<Row>)> {
    let kind = rows.column(0).as_string::<i32>();
    let col = |name: &str| {
        rows.column_by_name(name)
            .unwrap()
            .as_primitive::<Int64Type>()
            .clone()
    };
    let (fi, ti, fv, tv) = (col("from_id"), col("to_id"), col("from_v"), col("to_v"));
    let side = |id: &arrow::array::Int64Array, v: &arrow::array::Int64Array, i: usize| {
        id.is_valid(i)
            .then(|| (id.value(i), v.is_valid(i).then(|| v.value(i))))
    };
    let mut out: Vec<_> = (0..rows.num_rows())
        .map(|i| {
            (
                kind.value(i).to_string(),
                side(&fi, &fv, i),
                side(&ti, &tv, i),
            )
        })
        .collect();
    out.sort();
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn a_diff_equals_the_diff_of_both_versions_read_whole(
        (keyed, ops) in any::<bool>()
            .prop_flat_map(|k| (Just(k), proptest::collection::vec(op(k), 1..8))),
        pick in any::<(usize, usize)>(),
    ) {
        runtime().block_on(async {
            let repo = Repo::init("memory://", WriteSettings::default()).await.unwrap();
            // The first commit declares the key (or none).
            let base: Vec<Row> = (0..BASE).map(|i| (i % if keyed { BASE } else { 100 }, (i % 3 > 0).then_some(i % 4))).collect();
            let first = if keyed { Op::Overwrite(base) } else { Op::Append(base) };
            let mut versions = vec![apply(&repo, keyed, &first).await.unwrap()];
            for op in &ops {
                let op = match (keyed, op) {
                    (false, Op::Upsert(r)) => Op::Append(r.clone()),
                    (false, Op::Delete(_) | Op::Compact) => continue,
                    _ => op.clone(),
                };
                if let Some(v) = apply(&repo, keyed, &op).await {
                    versions.push(v);
                }
            }
            let a = versions[pick.0 % versions.len()];
            let b = versions[pick.1 % versions.len()];
            let d = repo.diff(&a, &b, Some("t")).await.unwrap();
            let t = &d.tables[0];
            let old = rows_of(&repo.snapshot(a).await.unwrap().read("t", None).await.unwrap().batches);
            let new = rows_of(&repo.snapshot(b).await.unwrap().read("t", None).await.unwrap().batches);
            let expected = naive(keyed, &old, &new);
            prop_assert_eq!(diff_rows(&t.rows), expected.clone());
            let count = |k: &str| expected.iter().filter(|e| e.0 == k).count() as u64;
            prop_assert_eq!(
                (t.counts.added, t.counts.removed, t.counts.modified),
                (count("added"), count("removed"), count("modified"))
            );
            prop_assert_eq!(t.key.is_empty(), !keyed);
            if a == b {
                prop_assert_eq!(t.stats.files_read, 0);
            }
            Ok(())
        })?;
    }
}

#[tokio::test]
async fn a_diff_reads_only_what_the_versions_do_not_share() {
    let repo = Repo::init("memory://", WriteSettings::default())
        .await
        .unwrap();
    let base: Vec<Row> = (0..20_000).map(|i| (i, Some(i % 7))).collect();
    let b = batch(&base);
    let v1 = repo
        .commit("t", b.schema(), vec![b], &keyed())
        .await
        .unwrap();
    // A week: 100 new rows and 3 changed ones.
    let mut week: Vec<Row> = (20_000..20_100).map(|i| (i, Some(0))).collect();
    week.extend([(5, Some(100)), (10_000, None), (19_999, Some(-1))]);
    let b = batch(&week);
    let v2 = repo
        .commit("t", b.schema(), vec![b], &upsert())
        .await
        .unwrap();
    let d = repo.diff(&v1.version, &v2.version, None).await.unwrap();
    let t = &d.tables[0];
    assert_eq!(
        (t.counts.added, t.counts.removed, t.counts.modified),
        (100, 0, 3)
    );
    assert_eq!(
        t.counts.modified_by_column,
        BTreeMap::from([("v".to_string(), 3)])
    );
    // The new file whole (103 rows) and the 3 hidden positions of the old.
    assert_eq!(t.stats.rows_read, 106);
    assert!(
        t.stats.files_shared == 0 && t.stats.files_read == 2,
        "{:?}",
        t.stats
    );
    let modified = diff_rows(&t.rows)
        .into_iter()
        .filter(|r| r.0 == "modified")
        .collect::<Vec<_>>();
    assert_eq!(
        modified,
        vec![
            ("modified".into(), Some((5, Some(5))), Some((5, Some(100)))),
            (
                "modified".into(),
                Some((10_000, Some(10_000 % 7))),
                Some((10_000, None))
            ),
            (
                "modified".into(),
                Some((19_999, Some(19_999 % 7))),
                Some((19_999, Some(-1)))
            ),
        ]
    );
    // The other way round, added and removed swap.
    let back = repo.diff(&v2.version, &v1.version, None).await.unwrap();
    let t = &back.tables[0];
    assert_eq!(
        (t.counts.added, t.counts.removed, t.counts.modified),
        (0, 100, 3)
    );
}

#[tokio::test]
async fn a_diff_across_a_schema_change_names_the_columns_and_a_new_table_is_all_added() {
    let repo = Repo::init("memory://", WriteSettings::default())
        .await
        .unwrap();
    let b = batch(&[(1, Some(1)), (2, Some(2))]);
    let v1 = repo
        .commit("t", b.schema(), vec![b], &keyed())
        .await
        .unwrap();
    let wider = RecordBatch::try_from_iter(vec![
        ("id", Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef),
        ("v", Arc::new(Int64Array::from(vec![1, 3])) as ArrayRef),
        (
            "w",
            Arc::new(Int64Array::from(vec![Some(9), None])) as ArrayRef,
        ),
    ])
    .unwrap();
    let v2 = repo
        .commit("t", wider.schema(), vec![wider.clone()], &keyed())
        .await
        .unwrap();
    let other = repo
        .commit("u", wider.schema(), vec![wider], &CommitOptions::default())
        .await
        .unwrap();
    let d = repo
        .diff(&v1.version.to_string(), "main", None)
        .await
        .unwrap();
    assert_eq!(d.tables.len(), 2);
    let t = &d.tables[0];
    assert_eq!(t.columns.added, vec!["w".to_string()]);
    // Key 1 gained a value in the new column, key 2 changed in v: both are
    // modified, as the commit counted them (issue 41, item 8).
    assert_eq!(
        (t.counts.added, t.counts.removed, t.counts.modified),
        (0, 0, 2)
    );
    let by_column: Vec<(&str, u64)> = (t.counts.modified_by_column.iter())
        .map(|(c, n)| (c.as_str(), *n))
        .collect();
    assert_eq!(by_column, vec![("v", 1), ("w", 1)]);
    let c = &v2.change;
    assert_eq!((c.rows_added, c.rows_changed, c.rows_deleted), (0, 2, 0));
    let u = &d.tables[1];
    assert_eq!(
        (u.table.as_str(), u.old_rows, u.new_rows),
        ("u", None, Some(2))
    );
    assert_eq!(u.counts.added, 2);
    assert_eq!(other.rows, 2);
    // A table neither version has, and a revision that does not exist.
    let e = repo.diff("main~1", "main", Some("nope")).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound);
    assert!(e.to_string().contains("no table 'nope'"), "{e}");
    let e = repo.diff("nope", "main", None).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
}

#[tokio::test]
async fn restore_gives_back_a_version_s_tables_without_writing_data() {
    let repo = Repo::init("memory://", WriteSettings::default())
        .await
        .unwrap();
    let b = batch(&[(1, Some(1)), (2, Some(2)), (3, None)]);
    let v1 = repo
        .commit("t", b.schema(), vec![b], &keyed())
        .await
        .unwrap();
    repo.refs()
        .create(
            tablepin::RefKind::Tag,
            "train-v1",
            &v1.version.to_string(),
            "",
        )
        .await
        .unwrap();
    let b = batch(&[(2, Some(20)), (4, Some(4))]);
    repo.commit("t", b.schema(), vec![b.clone()], &upsert())
        .await
        .unwrap();
    repo.commit("u", b.schema(), vec![b], &CommitOptions::default())
        .await
        .unwrap();
    let blobs_before = repo.gc().stored().await.unwrap();
    let r = repo
        .restore("train-v1", &RestoreOptions::default())
        .await
        .unwrap();
    let v = r.version.expect("a new version");
    let read = repo.read("main", "t", None).await.unwrap();
    assert_eq!(read.version, v);
    assert_eq!(read.snapshot.content_hash, v1.content_hash);
    // Only the version record and the ref entry are new: no data, no snapshot.
    let blobs_after = repo.gc().stored().await.unwrap();
    assert_eq!(
        blobs_after.1,
        blobs_before.1 + 1,
        "one new blob: the version"
    );
    let t = &r.changes["t"];
    assert_eq!((t.rows_added, t.rows_changed, t.rows_deleted), (0, 1, 1));
    assert!(t.checks.content && t.checks.rows);
    // Table u, absent at the tag, is dropped.
    assert_eq!(r.changes["u"].rows_deleted, 2);
    let version = repo.version(&v).await.unwrap();
    assert_eq!(version.tables.keys().collect::<Vec<_>>(), vec!["t"]);
    assert_eq!(version.parents.len(), 1);
    // Restoring again changes nothing.
    let again = repo
        .restore("train-v1", &RestoreOptions::default())
        .await
        .unwrap();
    assert!(again.version.is_none());
    // A table the revision lacks is refused, naming the tables it has.
    let e = repo
        .restore(
            "train-v1",
            &RestoreOptions {
                table: Some("u".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound);
    assert!(e.to_string().contains("tables: t"), "{e}");
    let e = repo
        .restore(
            "train-v1",
            &RestoreOptions {
                branch: "mian".into(),
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    assert!(
        e.to_string().contains("branch 'mian' does not exist"),
        "{e}"
    );
    assert_eq!(repo.gc().stored().await.unwrap(), blobs_after);
}

/// A schema change that writes every row again (a retyped or dropped
/// column) is counted by the commit as `diff` counts it: by key, in a type
/// that holds both sides, not as every row deleted and added again (issue
/// 41, item 8).
#[tokio::test]
async fn a_rewriting_schema_change_is_counted_by_the_commit_as_diff_counts_it() {
    use arrow::array::{Float64Array, StringArray};
    let repo = Repo::init("memory://", WriteSettings::default())
        .await
        .unwrap();
    let b = RecordBatch::try_from_iter(vec![
        ("id", Arc::new(Int64Array::from(vec![1, 2, 3])) as ArrayRef),
        ("q", Arc::new(Int64Array::from(vec![1, 2, 3])) as ArrayRef),
        (
            "note",
            Arc::new(StringArray::from(vec!["a", "b", "c"])) as ArrayRef,
        ),
    ])
    .unwrap();
    repo.commit("t", b.schema(), vec![b], &keyed())
        .await
        .unwrap();
    let allow = CommitOptions {
        allow_schema_change: true,
        ..Default::default()
    };
    // q becomes Float64 (1 the same, 2 becomes 2.5), key 3 goes, key 4 comes.
    let retyped = RecordBatch::try_from_iter(vec![
        ("id", Arc::new(Int64Array::from(vec![1, 2, 4])) as ArrayRef),
        (
            "q",
            Arc::new(Float64Array::from(vec![1.0, 2.5, 4.0])) as ArrayRef,
        ),
        (
            "note",
            Arc::new(StringArray::from(vec!["a", "b", "d"])) as ArrayRef,
        ),
    ])
    .unwrap();
    let v2 = repo
        .commit("t", retyped.schema(), vec![retyped], &allow)
        .await
        .unwrap();
    // note is dropped; q's values stay.
    let dropped = RecordBatch::try_from_iter(vec![
        ("id", Arc::new(Int64Array::from(vec![1, 2, 4])) as ArrayRef),
        (
            "q",
            Arc::new(Float64Array::from(vec![1.0, 2.5, 4.0])) as ArrayRef,
        ),
    ])
    .unwrap();
    let v3 = repo
        .commit("t", dropped.schema(), vec![dropped], &allow)
        .await
        .unwrap();
    let counts = |c: &tablepin::format::TableChange| (c.rows_added, c.rows_changed, c.rows_deleted);
    assert_eq!(counts(&v2.change), (1, 1, 1));
    assert_eq!(counts(&v3.change), (0, 0, 0));
    for (rev, commit) in [("main~1", &v2), ("main", &v3)] {
        let d = repo.diff(&format!("{rev}~1"), rev, None).await.unwrap();
        let t = &d.tables[0].counts;
        assert_eq!(
            (t.added, t.modified, t.removed),
            counts(&commit.change),
            "{rev}"
        );
    }
}
