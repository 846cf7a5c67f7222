//! Commit modes, schema evolution, unkeyed tables and revisions, on small
//! tables where every expected row can be written out.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use arrow::array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow::compute::concat_batches;
use tablepin::{CommitOptions, Error, Mode, RefKind, Repo, WriteSettings};
use tablepin_rowhash::content_hash;

fn t(ids: &[i64], names: &[&str]) -> RecordBatch {
    RecordBatch::try_from_iter(vec![
        ("id", Arc::new(Int64Array::from(ids.to_vec())) as ArrayRef),
        (
            "name",
            Arc::new(StringArray::from(names.to_vec())) as ArrayRef,
        ),
    ])
    .unwrap()
}

fn o(mode: Mode) -> CommitOptions {
    CommitOptions {
        mode,
        key: Some(vec!["id".into()]),
        ..Default::default()
    }
}

/// Commits rows of the keyed test table `t` with this mode.
async fn put(r: &Repo, rows: RecordBatch, mode: Mode) -> tablepin::Result<tablepin::CommitResult> {
    r.commit("t", rows.schema(), vec![rows], &o(mode)).await
}

async fn repo() -> (tempfile::TempDir, Repo) {
    repo_with(WriteSettings::default()).await
}

async fn repo_with(settings: WriteSettings) -> (tempfile::TempDir, Repo) {
    let dir = tempfile::tempdir().unwrap();
    let r = Repo::init(dir.path().to_str().unwrap(), settings)
        .await
        .unwrap();
    (dir, r)
}

/// Rows of `t` named after their ids ("n12").
fn named(ids: impl IntoIterator<Item = i64>) -> RecordBatch {
    let ids: Vec<i64> = ids.into_iter().collect();
    let names: Vec<String> = ids.iter().map(|i| format!("n{i}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    t(&ids, &names)
}

async fn head(r: &Repo) -> RecordBatch {
    let read = r.read("main", "t", None).await.unwrap();
    concat_batches(&read.schema, &read.batches).unwrap()
}

#[tokio::test]
async fn append_upsert_delete_keep_key_order_and_hash() {
    let (_d, r) = repo().await;
    put(&r, t(&[3, 1], &["c", "a"]), Mode::Overwrite)
        .await
        .unwrap();
    put(&r, t(&[2], &["b"]), Mode::Append).await.unwrap();
    assert_eq!(head(&r).await, t(&[1, 2, 3], &["a", "b", "c"]));
    let up = put(&r, t(&[3, 4, 1], &["C", "d", "a"]), Mode::Upsert)
        .await
        .unwrap();
    assert_eq!(
        (up.change.rows_added, up.change.rows_changed),
        (1, 1),
        "row 1 is unchanged"
    );
    assert_eq!(head(&r).await, t(&[1, 2, 3, 4], &["a", "b", "C", "d"]));
    let del = put(&r, t(&[2, 9], &["", ""]), Mode::Delete).await.unwrap();
    assert_eq!(del.change.rows_deleted, 1);
    let want = t(&[1, 3, 4], &["a", "C", "d"]);
    assert_eq!(head(&r).await, want);
    assert_eq!(del.content_hash, content_hash([&want]).unwrap());
    // Delete needs only the key column.
    let keys = RecordBatch::try_from_iter(vec![(
        "id",
        Arc::new(Int64Array::from(vec![4])) as ArrayRef,
    )])
    .unwrap();
    put(&r, keys, Mode::Delete).await.unwrap();
    assert_eq!(head(&r).await, t(&[1, 3], &["a", "C"]));
    let v = r.verify(&tablepin::NoProgress).await.unwrap();
    assert!(v.problems.is_empty(), "{:?}", v.problems);
}

#[tokio::test]
async fn overwrite_stores_only_the_difference() {
    let (_d, r) = repo().await;
    put(&r, t(&[1, 2, 3], &["a", "b", "c"]), Mode::Overwrite)
        .await
        .unwrap();
    let c = put(&r, t(&[4, 3, 1], &["d", "c", "A"]), Mode::Overwrite)
        .await
        .unwrap();
    assert_eq!(
        (
            c.change.rows_added,
            c.change.rows_changed,
            c.change.rows_deleted
        ),
        (1, 1, 1)
    );
    assert_eq!(head(&r).await, t(&[1, 3, 4], &["A", "c", "d"]));
}

#[tokio::test]
async fn unkeyed_tables_keep_insertion_order_and_compare_multisets() {
    let (_d, r) = repo().await;
    let no_key = CommitOptions::default();
    let a = t(&[5, 5, 1], &["x", "x", "y"]);
    r.commit("u", a.schema(), vec![a.clone()], &no_key)
        .await
        .unwrap();
    // The same multiset in another order: nothing changes.
    let same = t(&[1, 5, 5], &["y", "x", "x"]);
    let c = r
        .commit("u", same.schema(), vec![same], &no_key)
        .await
        .unwrap();
    assert!(!c.change.checks.any());
    assert_eq!(c.change.bytes_new, 0);
    // One duplicate fewer: one row deleted; duplicates count.
    let fewer = t(&[5, 1], &["x", "y"]);
    let c = r
        .commit("u", fewer.schema(), vec![fewer.clone()], &no_key)
        .await
        .unwrap();
    assert_eq!((c.change.rows_added, c.change.rows_deleted), (0, 1));
    assert_eq!(c.content_hash, content_hash([&fewer]).unwrap());
    // Appends come after, in insertion order.
    let more = t(&[0], &["z"]);
    r.commit(
        "u",
        more.schema(),
        vec![more],
        &CommitOptions {
            mode: Mode::Append,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let read = r.read("main", "u", None).await.unwrap();
    let got = concat_batches(&read.schema, &read.batches).unwrap();
    assert_eq!(got.num_rows(), 3);
    assert_eq!(got.slice(2, 1), t(&[0], &["z"]));
    // Upsert needs a key.
    let err = r
        .commit(
            "u",
            a.schema(),
            vec![a],
            &CommitOptions {
                mode: Mode::Upsert,
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NoKey { .. }), "{err}");
}

#[tokio::test]
async fn adding_a_nullable_column_rehashes_and_reads_old_rows_as_null() {
    let (_d, r) = repo().await;
    put(&r, t(&[1, 2], &["a", "b"]), Mode::Overwrite)
        .await
        .unwrap();
    // The new column is declared nullable: old rows have no value for it.
    let wider = RecordBatch::try_from_iter_with_nullable(vec![
        ("id", Arc::new(Int64Array::from(vec![3])) as ArrayRef, false),
        (
            "name",
            Arc::new(StringArray::from(vec!["c"])) as ArrayRef,
            false,
        ),
        (
            "score",
            Arc::new(Float64Array::from(vec![Some(0.5)])) as ArrayRef,
            true,
        ),
    ])
    .unwrap();
    // Declared non-nullable, the same column is refused.
    let strict = RecordBatch::try_new(
        Arc::new(arrow::datatypes::Schema::new(vec![
            arrow::datatypes::Field::new("id", arrow::datatypes::DataType::Int64, false),
            arrow::datatypes::Field::new("name", arrow::datatypes::DataType::Utf8, false),
            arrow::datatypes::Field::new("score", arrow::datatypes::DataType::Float64, false),
        ])),
        wider.columns().to_vec(),
    )
    .unwrap();
    let err = put(&r, strict, Mode::Append).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("new column 'score' is not nullable"),
        "{err}"
    );
    let c = put(&r, wider.clone(), Mode::Append).await.unwrap();
    assert!(c.change.checks.schema);
    let got = head(&r).await;
    assert_eq!(got.num_columns(), 3);
    assert_eq!(got.column(2).null_count(), 2);
    assert_eq!(c.content_hash, content_hash([&got]).unwrap());
    let v = r.verify(&tablepin::NoProgress).await.unwrap();
    assert!(v.problems.is_empty(), "{:?}", v.problems);
}

#[tokio::test]
async fn a_type_change_is_refused_unless_allowed_and_then_rewrites() {
    let (_d, r) = repo().await;
    put(&r, t(&[1, 2], &["a", "b"]), Mode::Overwrite)
        .await
        .unwrap();
    let other = RecordBatch::try_from_iter(vec![
        ("id", Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef),
        (
            "name",
            Arc::new(Float64Array::from(vec![1.0, 2.0])) as ArrayRef,
        ),
    ])
    .unwrap();
    let err = r
        .commit(
            "t",
            other.schema(),
            vec![other.clone()],
            &o(Mode::Overwrite),
        )
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("column 'name' would change type from Utf8 to Float64"),
        "{err}"
    );
    let mut allow = o(Mode::Overwrite);
    allow.allow_schema_change = true;
    r.commit("t", other.schema(), vec![other.clone()], &allow)
        .await
        .unwrap();
    assert_eq!(head(&r).await, other);
}

#[tokio::test]
async fn revisions_resolve_by_tag_branch_prefix_tilde_and_time() {
    let (_d, r) = repo().await;
    let mut ids = Vec::new();
    for (i, ms) in [1_000i64, 2_000, 3_000].iter().enumerate() {
        let c = r
            .commit(
                "t",
                t(&[], &[]).schema(),
                vec![t(&[i as i64], &["x"])],
                &CommitOptions {
                    mode: Mode::Append,
                    key: Some(vec!["id".into()]),
                    time_ms: Some(*ms),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        ids.push(c.version);
    }
    r.refs()
        .create(RefKind::Tag, "v1", &ids[1].to_string(), "")
        .await
        .unwrap();
    assert_eq!(r.resolve("v1").await.unwrap(), ids[1]);
    assert_eq!(r.resolve("main").await.unwrap(), ids[2]);
    assert_eq!(r.resolve("main~2").await.unwrap(), ids[0]);
    assert_eq!(r.resolve(&ids[0].to_string()[..10]).await.unwrap(), ids[0]);
    assert_eq!(r.resolve("@1970-01-01T00:00:02.5Z").await.unwrap(), ids[1]);
    assert!(matches!(
        r.resolve("nope").await,
        Err(Error::UnknownRev { .. })
    ));
    assert!(r
        .resolve("main~5")
        .await
        .unwrap_err()
        .to_string()
        .contains("has only 2 before it"));
    r.refs()
        .create(RefKind::Branch, "dev", "v1", "")
        .await
        .unwrap();
    let c = r
        .commit(
            "t",
            t(&[], &[]).schema(),
            vec![t(&[9], &["z"])],
            &CommitOptions {
                mode: Mode::Append,
                branch: "dev".into(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(c.parent, Some(ids[1]));
    assert_eq!(
        r.resolve("main").await.unwrap(),
        ids[2],
        "main did not move"
    );
    assert_eq!(r.log("dev", &Default::default()).await.unwrap().len(), 3);
}

#[tokio::test]
async fn racing_commits_both_land() {
    let (_d, r) = repo().await;
    let r = Arc::new(r);
    put(&r, t(&[0], &["a"]), Mode::Overwrite).await.unwrap();
    let mut handles = Vec::new();
    for k in 1..=8i64 {
        let r = r.clone();
        handles.push(tokio::spawn(async move {
            put(&r, t(&[k], &["x"]), Mode::Append).await.unwrap()
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    let got = head(&r).await;
    assert_eq!(
        got.num_rows(),
        9,
        "every racing append landed after rebasing"
    );
    assert_eq!(r.log("main", &Default::default()).await.unwrap().len(), 9);
}

#[tokio::test]
async fn hidden_rows_past_one_percent_are_compacted_and_the_hash_stays() {
    let (_d, r) = repo().await;
    put(&r, named(0..1000), Mode::Overwrite).await.unwrap();
    // 5 changed rows of 1,005 in files: under 1%, a deletion vector hides them.
    let c = put(&r, t(&[1, 2, 3, 4, 5], &["x"; 5]), Mode::Upsert)
        .await
        .unwrap();
    let s = table_t(&r, c.version).await;
    assert!(s.files.iter().any(|f| f.deletes.is_some()));
    assert_eq!(s.files.iter().map(|f| f.rows).sum::<u64>(), 1005);
    // 10 more: 15 hidden of 1,015, past 1%: the file is rewritten.
    let more: Vec<i64> = (10..20).collect();
    let c = put(&r, t(&more, &["y"; 10]), Mode::Upsert).await.unwrap();
    let s = table_t(&r, c.version).await;
    let in_files: u64 = s.files.iter().map(|f| f.rows).sum();
    assert!(
        in_files <= 1000 + (1000 / 200),
        "hidden rows under half of 1%: {in_files}"
    );
    let got = head(&r).await;
    assert_eq!(got.num_rows(), 1000);
    assert_eq!(
        c.content_hash,
        content_hash([&got]).unwrap(),
        "compaction keeps the content hash"
    );
    let v = r.verify(&tablepin::NoProgress).await.unwrap();
    assert!(v.problems.is_empty(), "{:?}", v.problems);
}

#[tokio::test]
async fn an_upsert_writes_one_file_of_exactly_the_new_and_changed_rows() {
    use tablepin::format::KeyBound;
    // No compaction, so that the files a commit adds are the only new ones.
    let (_d, r) = repo_with(WriteSettings {
        compact_hidden_permille: 0,
        ..WriteSettings::default()
    })
    .await;
    put(&r, named(10..20), Mode::Overwrite).await.unwrap();
    put(&r, t(&[17], &["n17"]), Mode::Delete).await.unwrap();
    // Upserts rows; returns (added, changed) and each new file's rows and
    // key range.
    let upsert = |rows: RecordBatch| {
        let r = &r;
        async move {
            let before = r.read("main", "t", None).await.unwrap().snapshot.files;
            let up = put(r, rows, Mode::Upsert).await.unwrap();
            let snap = r.read("main", "t", None).await.unwrap().snapshot;
            let new: Vec<_> = snap
                .files
                .iter()
                .filter(|f| !before.iter().any(|b| b.data == f.data))
                .map(|f| (f.rows, f.key_min.clone(), f.key_max.clone()))
                .collect();
            ((up.change.rows_added, up.change.rows_changed), new)
        }
    };
    // 15 is the same row again, so the file written while the parent was
    // read (every input row) is dropped and the rows are written again
    // without it: 12 changes, 17 comes back, 5, 25 and 30 are new.
    assert_eq!(
        upsert(t(
            &[30, 12, 5, 15, 25, 17],
            &["x", "N12", "y", "n15", "z", "back"],
        ))
        .await,
        (
            (4, 1),
            vec![(5, Some(KeyBound::Int(5)), Some(KeyBound::Int(30)))]
        )
    );
    // Every row new or changed: the file written meanwhile is the one kept.
    assert_eq!(
        upsert(t(&[40, 11], &["w", "N11"])).await,
        (
            (1, 1),
            vec![(2, Some(KeyBound::Int(11)), Some(KeyBound::Int(40)))]
        )
    );
    let mut want_ids: Vec<i64> = (10..20).chain([5, 25, 30, 40]).collect();
    want_ids.sort_unstable();
    let want_names: Vec<String> = want_ids
        .iter()
        .map(|i| match i {
            5 => "y".into(),
            11 => "N11".into(),
            12 => "N12".into(),
            17 => "back".into(),
            25 => "z".into(),
            30 => "x".into(),
            40 => "w".into(),
            i => format!("n{i}"),
        })
        .collect();
    let want_names: Vec<&str> = want_names.iter().map(String::as_str).collect();
    let want = t(&want_ids, &want_names);
    assert_eq!(head(&r).await, want);
    let snap = r.read("main", "t", None).await.unwrap().snapshot;
    assert_eq!(snap.content_hash, content_hash([&want]).unwrap());
}

#[tokio::test]
async fn compact_rewrites_live_rows_in_key_order_and_keeps_the_hash() {
    // Small files and no automatic compaction, so that the table has
    // several files, deletion vectors and overlapping key ranges.
    let (_d, r) = repo_with(WriteSettings {
        compact_hidden_permille: 0,
        file_rows: 300,
        row_group_rows: 300,
        ..WriteSettings::default()
    })
    .await;
    put(&r, named(0..1000), Mode::Overwrite).await.unwrap();
    let mut up: Vec<i64> = vec![3, 500, 999];
    up.extend(1000..1050);
    put(&r, t(&up, &vec!["u"; up.len()]), Mode::Upsert)
        .await
        .unwrap();
    let last = put(&r, t(&[10, 11], &["", ""]), Mode::Delete)
        .await
        .unwrap();
    let before = head(&r).await;
    let old = table_t(&r, last.version).await;
    assert!(old.files.iter().any(|f| f.deletes.is_some()));
    assert_eq!(old.files.len(), 5);

    let c = r
        .transaction("t", &CommitOptions::default())
        .compact()
        .await
        .unwrap()
        .expect("a table with deletion vectors is compacted");
    assert_eq!(c.parent, Some(last.version));
    assert_eq!(c.content_hash, last.content_hash);
    assert_eq!(c.rows, 1048);
    assert_eq!(
        (
            c.change.rows_added,
            c.change.rows_changed,
            c.change.rows_deleted
        ),
        (0, 0, 0)
    );
    assert_eq!(c.change.checks.fired(), ["files"]);
    let s = table_t(&r, c.version).await;
    assert!(s.files.iter().all(|f| f.deletes.is_none()));
    assert_eq!(
        s.files.iter().map(|f| f.rows).collect::<Vec<_>>(),
        [300, 300, 300, 148]
    );
    for w in s.files.windows(2) {
        assert!(w[0].key_max < w[1].key_min, "key ranges overlap");
    }
    assert_eq!(head(&r).await, before, "the same rows, in key order");
    assert_eq!(content_hash([&before]).unwrap(), c.content_hash);

    // Compact already: nothing is written and the branch stays.
    let stored = r.gc().stored().await.unwrap();
    assert!(r
        .transaction("t", &CommitOptions::default())
        .compact()
        .await
        .unwrap()
        .is_none());
    assert_eq!(r.gc().stored().await.unwrap(), stored);
    assert_eq!(
        r.refs().target(RefKind::Branch, "main").await.unwrap(),
        c.version
    );
    // A table that does not exist: a clear error, nothing written.
    let err = r
        .transaction("missing", &CommitOptions::default())
        .compact()
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("'missing' does not exist yet"),
        "{err}"
    );
    assert_eq!(r.gc().stored().await.unwrap(), stored);
    assert_eq!(
        r.refs().target(RefKind::Branch, "main").await.unwrap(),
        c.version
    );
    let v = r.verify(&tablepin::NoProgress).await.unwrap();
    assert!(v.problems.is_empty(), "{:?}", v.problems);
}

/// `named(0..n)` with some names replaced.
fn named_with(n: i64, changed: &[(i64, &str)]) -> RecordBatch {
    let mut names: Vec<String> = (0..n).map(|i| format!("n{i}")).collect();
    for (i, s) in changed {
        names[*i as usize] = s.to_string();
    }
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    t(&(0..n).collect::<Vec<_>>(), &names)
}

#[tokio::test]
async fn a_commit_s_deletion_vectors_share_one_blob_that_later_commits_read() {
    let (d, r) = repo_with(WriteSettings {
        file_rows: 1000,
        ..Default::default()
    })
    .await;
    put(&r, named(0..4000), Mode::Overwrite).await.unwrap();
    let (_, blobs_before) = r.gc().stored().await.unwrap();
    // One changed row in each of three of the four files, each at another
    // position (the same bitmap twice would be one blob).
    let c1 = put(&r, t(&[10, 1011, 2012], &["x"; 3]), Mode::Upsert)
        .await
        .unwrap();
    let s1 = table_t(&r, c1.version).await;
    let dvs: Vec<_> = s1.files.iter().filter_map(|f| f.deletes.clone()).collect();
    assert_eq!(dvs.len(), 3);
    let pack = dvs[0].blob;
    assert!(dvs.iter().all(|d| d.blob == pack && d.count == 1));
    let offsets: Vec<_> = dvs.iter().map(|d| d.offset).collect();
    assert_eq!(offsets[0], Some(0));
    assert!(offsets.windows(2).all(|w| w[0] < w[1]), "{offsets:?}");
    // Its new blobs: the data file, the pack, the snapshot and the version.
    let (_, blobs_after) = r.gc().stored().await.unwrap();
    assert_eq!(blobs_after - blobs_before, 4);

    // The next commit grows the second file's bitmap (read from the pack)
    // and starts the fourth's; the first and third keep theirs.
    r.refs()
        .create(RefKind::Tag, "week1", "main", "")
        .await
        .unwrap();
    let c2 = put(&r, t(&[1020, 3013], &["y"; 2]), Mode::Upsert)
        .await
        .unwrap();
    let s2 = table_t(&r, c2.version).await;
    assert_eq!(s2.files[0].deletes, s1.files[0].deletes);
    assert_eq!(s2.files[2].deletes, s1.files[2].deletes);
    let (d1, d3) = (
        s2.files[1].deletes.clone().unwrap(),
        s2.files[3].deletes.clone().unwrap(),
    );
    assert_eq!((d1.count, d3.count), (2, 1));
    assert_eq!(d1.blob, d3.blob);
    assert_ne!(d1.blob, pack);

    let want = named_with(
        4000,
        &[
            (10, "x"),
            (1011, "x"),
            (2012, "x"),
            (1020, "y"),
            (3013, "y"),
        ],
    );
    assert_eq!(head(&r).await, want);
    assert_eq!(c2.content_hash, content_hash([&want]).unwrap());
    let week1 = r.read("week1", "t", None).await.unwrap();
    let week1 = concat_batches(&week1.schema, &week1.batches).unwrap();
    assert_eq!(
        week1,
        named_with(4000, &[(10, "x"), (1011, "x"), (2012, "x")])
    );
    let v = r.verify(&tablepin::NoProgress).await.unwrap();
    assert!(v.problems.is_empty(), "{:?}", v.problems);

    // One byte of the first pack flipped: reading a version that names it
    // fails naming the pack, and verify names it in both versions.
    let path = d.path().join("objects").join(pack.fanout_path());
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[0] ^= 1;
    std::fs::write(&path, bytes).unwrap();
    let err = r.read("week1", "t", None).await.unwrap_err();
    assert!(err.to_string().contains(&pack.to_string()), "{err}");
    let v = r.verify(&tablepin::NoProgress).await.unwrap();
    let named: Vec<_> = v
        .problems
        .iter()
        .filter(|p| p.contains(&format!("deletion vector {pack} is damaged")))
        .collect();
    assert_eq!(named.len(), 2, "{:?}", v.problems);
}

#[tokio::test]
async fn a_new_nullable_column_with_changed_old_rows_hashes_them_once() {
    let (_d, r) = repo_with(WriteSettings {
        file_rows: 1000,
        ..Default::default()
    })
    .await;
    put(&r, named(0..2000), Mode::Overwrite).await.unwrap();
    // An upsert that adds a nullable column and changes a row in each
    // file: the old files are hashed again under the new schema, minus the
    // rows this commit's (not yet stored) deletion vectors hide.
    let wider = RecordBatch::try_from_iter_with_nullable(vec![
        (
            "id",
            Arc::new(Int64Array::from(vec![5, 1500])) as ArrayRef,
            false,
        ),
        (
            "name",
            Arc::new(StringArray::from(vec!["x", "y"])) as ArrayRef,
            false,
        ),
        (
            "score",
            Arc::new(Float64Array::from(vec![Some(0.5), None])) as ArrayRef,
            true,
        ),
    ])
    .unwrap();
    let c = put(&r, wider, Mode::Upsert).await.unwrap();
    assert!(c.change.checks.schema);
    assert_eq!((c.change.rows_added, c.change.rows_changed), (0, 2));
    let got = head(&r).await;
    assert_eq!(got.num_rows(), 2000);
    assert_eq!(got.column(2).null_count(), 1999);
    assert_eq!(c.content_hash, content_hash([&got]).unwrap());
    let v = r.verify(&tablepin::NoProgress).await.unwrap();
    assert!(v.problems.is_empty(), "{:?}", v.problems);
}

/// The library's messages name no command-line flags: the CLI and the
/// Python package each say the way out in their own words.
#[tokio::test]
async fn library_messages_name_no_command_line_flags() {
    let repo = Repo::init("memory://", WriteSettings::default())
        .await
        .unwrap();
    let b = RecordBatch::try_from_iter(vec![(
        "id",
        Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef,
    )])
    .unwrap();
    let keyed = CommitOptions {
        key: Some(vec!["id".into()]),
        ..Default::default()
    };
    repo.commit("k", b.schema(), vec![b.clone()], &keyed)
        .await
        .unwrap();
    repo.commit("u", b.schema(), vec![b.clone()], &CommitOptions::default())
        .await
        .unwrap();
    let with = |mode, key: Option<&str>, branch: &str| CommitOptions {
        mode,
        key: key.map(|k| vec![k.to_string()]),
        branch: branch.to_string(),
        ..Default::default()
    };
    for (table, opts) in [
        ("k", with(Mode::Append, None, "main")),
        ("u", with(Mode::Upsert, None, "main")),
        ("k", with(Mode::Overwrite, Some("other"), "main")),
        ("u", with(Mode::Overwrite, Some("id"), "main")),
        ("k", with(Mode::Overwrite, None, "dev")),
    ] {
        let e = repo
            .commit(table, b.schema(), vec![b.clone()], &opts)
            .await
            .unwrap_err();
        assert!(!e.to_string().contains("--"), "{e}");
    }
    let e = tablepin::repo::discover(None, std::path::Path::new("/")).unwrap_err();
    assert!(!e.to_string().contains("--"), "{e}");
    // A schema change (with a cast that would do), and the last branch.
    let floats = RecordBatch::try_from_iter(vec![(
        "id",
        Arc::new(Float64Array::from(vec![1.0, 2.0])) as ArrayRef,
    )])
    .unwrap();
    let e = repo
        .commit(
            "k",
            floats.schema(),
            vec![floats],
            &CommitOptions::default(),
        )
        .await
        .unwrap_err();
    assert!(
        e.to_string().contains("cast the input's 'id' to Int64"),
        "{e}"
    );
    assert!(!e.to_string().contains("--"), "{e}");
    let e = repo
        .refs()
        .delete(RefKind::Branch, "main", false)
        .await
        .unwrap_err();
    assert!(!e.to_string().contains("--"), "{e}");
}

/// A commit starts from the snapshot its branch head's ref entry records,
/// without reading the parent's version record (one request fewer on a
/// bucket); `verify` holds each head entry's record to its version.
#[tokio::test]
async fn a_commit_starts_from_the_tables_its_head_entry_records() {
    let (_dir, r) = repo().await;
    let first = put(&r, named(0..3), Mode::Overwrite).await.unwrap();
    // The head's version record, gone: a commit that read it would fail.
    let path = r.store().local_blob_path(&first.version.0).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    let second = put(&r, named(3..5), Mode::Append).await.unwrap();
    assert_eq!(second.parent, Some(first.version));
    std::fs::write(&path, bytes).unwrap();
    assert_eq!(head(&r).await, named(0..5));
    let report = r.verify(&tablepin::NoProgress).await.unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);

    // A head entry recording other tables than its version's is named.
    let entry = r
        .store()
        .ref_head(RefKind::Branch, "main")
        .await
        .unwrap()
        .unwrap();
    let old_tables = r.version(&first.version).await.unwrap().tables;
    let wrong = tablepin::format::RefEntry {
        seq: entry.seq + 1,
        tables: Some(old_tables),
        ..entry
    };
    r.store()
        .append_ref(RefKind::Branch, "main", &wrong)
        .await
        .unwrap();
    let report = r.verify(&tablepin::NoProgress).await.unwrap();
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.contains("records tables") && p.contains("refs/branches/main/00000003")),
        "{:?}",
        report.problems
    );
}

/// Table "t"'s snapshot in a version.
async fn table_t(r: &Repo, v: tablepin::VersionId) -> tablepin::format::TableSnapshot {
    r.snapshot(v).await.unwrap().table("t").await.unwrap()
}
