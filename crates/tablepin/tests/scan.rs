//! Reads that ask for some columns, some rows, or a few rows: the answer is
//! what reading everything and then projecting, filtering and cutting gives,
//! and the files are decoded with the columns needed only.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use arrow::array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow::compute::{concat_batches, filter_record_batch};
use tablepin::{CommitOptions, Error, Mode, Repo, ScanOptions, WriteSettings};

fn rows(ids: &[i64]) -> RecordBatch {
    let country = ids
        .iter()
        .map(|i| ["France", "Spain", "EIRE"][(*i % 3) as usize])
        .collect::<Vec<_>>();
    let price = ids.iter().map(|i| *i as f64 / 4.0).collect::<Vec<_>>();
    RecordBatch::try_from_iter(vec![
        ("id", Arc::new(Int64Array::from(ids.to_vec())) as ArrayRef),
        ("country", Arc::new(StringArray::from(country)) as ArrayRef),
        ("price", Arc::new(Float64Array::from(price)) as ArrayRef),
    ])
    .unwrap()
}

/// A keyed table of ids 0..1000 spread over two data files (an upsert of
/// the odd ids lands in a second file), so reads merge in key order.
async fn repo() -> Repo {
    let repo = Repo::init("memory://", WriteSettings::default())
        .await
        .unwrap();
    let all: Vec<i64> = (0..1000).collect();
    let keyed = CommitOptions {
        key: Some(vec!["id".into()]),
        ..Default::default()
    };
    let b = rows(&all);
    repo.commit("t", b.schema(), vec![b], &keyed).await.unwrap();
    let odd: Vec<i64> = (0..1000).filter(|i| i % 2 == 1).collect();
    let mut changed = rows(&odd);
    let price: Vec<f64> = odd.iter().map(|i| *i as f64).collect();
    changed = RecordBatch::try_new(
        changed.schema(),
        vec![
            changed.column(0).clone(),
            changed.column(1).clone(),
            Arc::new(Float64Array::from(price)),
        ],
    )
    .unwrap();
    let upsert = CommitOptions {
        mode: Mode::Upsert,
        ..Default::default()
    };
    repo.commit("t", changed.schema(), vec![changed], &upsert)
        .await
        .unwrap();
    repo
}

async fn whole(repo: &Repo) -> RecordBatch {
    let r = repo.read("main", "t", None).await.unwrap();
    assert_eq!(r.snapshot.files.len(), 2, "the test needs a merge of files");
    concat_batches(&r.schema, &r.batches).unwrap()
}

async fn scan(repo: &Repo, opts: ScanOptions) -> tablepin::Result<RecordBatch> {
    let r = repo.snapshot("main").await?.scan("t", &opts).await?;
    Ok(concat_batches(&r.schema, &r.batches).unwrap())
}

#[tokio::test]
async fn columns_come_in_the_order_asked_even_without_the_key() {
    let repo = repo().await;
    let all = whole(&repo).await;
    let got = scan(
        &repo,
        ScanOptions {
            columns: Some(vec!["price".into(), "country".into()]),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(got, all.project(&[2, 1]).unwrap());
    // Only the columns asked for and the key (for the merge) are decoded.
    let r = repo
        .snapshot("main")
        .await
        .unwrap()
        .scan("t", &ScanOptions::columns(Some(&["price".into()])))
        .await
        .unwrap();
    assert_eq!(r.stats.columns_decoded, 2);
    // No column at all still counts the rows.
    let none = scan(&repo, ScanOptions::columns(Some(&[]))).await.unwrap();
    assert_eq!((none.num_columns(), none.num_rows()), (0, 1000));
}

#[tokio::test]
async fn a_filter_keeps_the_rows_it_matches_in_key_order() {
    let repo = repo().await;
    let all = whole(&repo).await;
    let got = scan(
        &repo,
        ScanOptions {
            columns: Some(vec!["id".into()]),
            filter: Some("country = 'France' AND price > 100".into()),
            files: None,
            limit: None,
        },
    )
    .await
    .unwrap();
    let want: Vec<i64> = (0..1000)
        .filter(|i| {
            i % 3 == 0
                && if i % 2 == 1 {
                    *i as f64
                } else {
                    *i as f64 / 4.0
                } > 100.0
        })
        .collect();
    assert_eq!(
        got,
        RecordBatch::try_from_iter(vec![("id", Arc::new(Int64Array::from(want)) as ArrayRef)])
            .unwrap()
    );
    // Filtering whole rows agrees with arrow's own filter over the read.
    let france = scan(
        &repo,
        ScanOptions {
            filter: Some("country = 'France'".into()),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let mask = arrow::compute::kernels::cmp::eq(all.column(1), &StringArray::new_scalar("France"))
        .unwrap();
    assert_eq!(france, filter_record_batch(&all, &mask).unwrap());
}

#[tokio::test]
async fn a_limit_cuts_after_the_filter() {
    let repo = repo().await;
    let all = whole(&repo).await;
    let first = scan(
        &repo,
        ScanOptions {
            limit: Some(7),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(first, all.slice(0, 7));
    let spain = scan(
        &repo,
        ScanOptions {
            columns: Some(vec!["id".into()]),
            filter: Some("country = 'Spain'".into()),
            files: None,
            limit: Some(3),
        },
    )
    .await
    .unwrap();
    assert_eq!(
        spain.column(0).as_ref(),
        &Int64Array::from(vec![1, 4, 7]) as &dyn arrow::array::Array
    );
}

#[tokio::test]
async fn bad_columns_and_filters_are_named() {
    let repo = repo().await;
    let err = scan(&repo, ScanOptions::columns(Some(&["nope".into()])))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::UnknownColumn { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "table 't' has no column 'nope' (columns: id, country, price)"
    );
    for (filter, says) in [
        ("nope > 1", "nope"),
        ("country >", "SQL syntax error"),
        ("price", "not a boolean condition"),
    ] {
        let err = scan(
            &repo,
            ScanOptions {
                filter: Some(filter.into()),
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
        assert_eq!(err.kind(), tablepin::ErrorKind::InvalidInput, "{filter}");
        let m = err.to_string();
        assert!(m.contains(says) && m.contains("table 't'"), "{filter}: {m}");
    }
}

async fn read_all(repo: &Repo) -> RecordBatch {
    let r = repo.read("main", "t", None).await.unwrap();
    concat_batches(&r.schema, &r.batches).unwrap()
}

/// A collected read of table "t" at main, as one batch, and its counts.
async fn collected(repo: &Repo, opts: ScanOptions) -> (RecordBatch, tablepin::ReadStats) {
    let r = repo
        .snapshot("main")
        .await
        .unwrap()
        .scan("t", &opts)
        .await
        .unwrap();
    (concat_batches(&r.schema, &r.batches).unwrap(), r.stats)
}

async fn first_rows(repo: &Repo, limit: usize) -> (RecordBatch, tablepin::ReadStats) {
    let opts = ScanOptions {
        limit: Some(limit),
        ..Default::default()
    };
    collected(repo, opts).await
}

/// A keyed table in three files with disjoint key ranges, the first rows
/// in the last committed.
async fn three_ranges(settings: WriteSettings) -> Repo {
    let repo = Repo::init("memory://", settings).await.unwrap();
    let keyed = CommitOptions {
        key: Some(vec!["id".into()]),
        ..Default::default()
    };
    let append = CommitOptions {
        mode: Mode::Append,
        ..Default::default()
    };
    let b = rows(&(2000..3000).collect::<Vec<_>>());
    repo.commit("t", b.schema(), vec![b], &keyed).await.unwrap();
    let b = rows(&(1000..2000).collect::<Vec<_>>());
    repo.commit("t", b.schema(), vec![b], &append)
        .await
        .unwrap();
    let b = rows(&(0..1000).collect::<Vec<_>>());
    repo.commit("t", b.schema(), vec![b], &append)
        .await
        .unwrap();
    repo
}

#[tokio::test]
async fn a_limit_reads_only_the_files_that_can_hold_the_first_rows() {
    // Then an upsert that moves a row of the highest range to the front in
    // key order (id 5 changes, its file hides it).
    let repo = three_ranges(WriteSettings::default()).await;
    let whole = read_all(&repo).await;
    for limit in [0, 1, 10, 999, 1000, 1001, 2500, 5000] {
        let (got, stats) = first_rows(&repo, limit).await;
        assert_eq!(got, whole.slice(0, limit.min(3000)), "limit {limit}");
        let files = match limit {
            0 => 0,
            1..=1000 => 1,
            1001..=2000 => 2,
            _ => 3,
        };
        assert_eq!(stats.files, files, "limit {limit}: {stats:?}");
    }
    // Rows hidden by a deletion vector are not among the first rows.
    let b = RecordBatch::try_new(
        rows(&[0]).schema(),
        vec![
            Arc::new(Int64Array::from(vec![0, 1])),
            Arc::new(StringArray::from(vec!["X", "Y"])),
            Arc::new(Float64Array::from(vec![9.0, 9.0])),
        ],
    )
    .unwrap();
    let upsert = CommitOptions {
        mode: Mode::Upsert,
        ..Default::default()
    };
    repo.commit("t", b.schema(), vec![b], &upsert)
        .await
        .unwrap();
    let whole = read_all(&repo).await;
    assert_eq!(first_rows(&repo, 3).await.0, whole.slice(0, 3));
}

/// A collected read (what `read`, `cat` and Python's `read` do) plans as
/// a stream does: a key range fetches only the file whose range can hold
/// it, and decodes only the pages of it that can.
#[tokio::test]
async fn a_collected_read_of_a_key_range_reads_only_the_files_and_pages_that_can_hold_it() {
    let settings = WriteSettings {
        page_index: true,
        data_page_rows: Some(100),
        ..WriteSettings::default()
    };
    let repo = three_ranges(settings).await;
    let whole = read_all(&repo).await;
    let range = ScanOptions {
        filter: Some("id >= 1200 AND id < 1250".into()),
        ..Default::default()
    };
    let (got, s) = collected(&repo, range).await;
    assert_eq!(got, whole.slice(1200, 50));
    assert_eq!((s.files, s.files_skipped, s.rows), (1, 2, 50), "{s:?}");
    // The range lies in one or two pages of 100 rows of the 1,000.
    assert!(s.rows_decoded >= 50 && s.rows_decoded <= 200, "{s:?}");
}

/// Everything a streamed read gives, as one batch.
async fn streamed(
    repo: &Repo,
    table: &str,
    opts: &ScanOptions,
) -> (RecordBatch, tablepin::ReadStats) {
    let mut s = repo
        .snapshot("main")
        .await
        .unwrap()
        .stream(table, opts)
        .await
        .unwrap();
    let mut batches = Vec::new();
    while let Some(b) = s.next_batch().await {
        batches.push(b.unwrap());
    }
    (concat_batches(&s.schema, &batches).unwrap(), s.stats())
}

/// A streamed read gives what a whole read gives, row for row and in the
/// same order, for columns, filters and limits, keyed (merged by key from
/// two files) and unkeyed.
#[tokio::test]
async fn a_streamed_read_gives_what_a_whole_read_gives() {
    let repo = repo().await;
    let unkeyed: Vec<i64> = (0..700).rev().collect();
    let b = rows(&unkeyed);
    repo.commit("u", b.schema(), vec![b], &CommitOptions::default())
        .await
        .unwrap();
    let b = rows(&(2000..2300).collect::<Vec<_>>());
    let append = CommitOptions {
        mode: Mode::Append,
        ..Default::default()
    };
    repo.commit("u", b.schema(), vec![b], &append)
        .await
        .unwrap();
    let cases = [
        ScanOptions::default(),
        ScanOptions::columns(Some(&["price".to_string(), "country".to_string()])),
        ScanOptions {
            filter: Some("country = 'EIRE' AND id > 100".into()),
            ..Default::default()
        },
        ScanOptions {
            limit: Some(333),
            ..Default::default()
        },
        ScanOptions {
            columns: Some(vec!["price".into()]),
            filter: Some("id < 600".into()),
            files: None,
            limit: Some(250),
        },
    ];
    for table in ["t", "u"] {
        for opts in &cases {
            let r = repo
                .snapshot("main")
                .await
                .unwrap()
                .scan(table, opts)
                .await
                .unwrap();
            let whole = concat_batches(&r.schema, &r.batches).unwrap();
            let (got, stats) = streamed(&repo, table, opts).await;
            assert_eq!(got, whole, "{table} {opts:?}");
            assert_eq!(stats.rows, whole.num_rows() as u64, "{table} {opts:?}");
        }
    }
}

/// Every file under a folder.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// A damaged data file found while streaming ends the stream with the
/// error naming the version, as a whole read does.
#[tokio::test]
async fn a_streamed_read_of_a_missing_file_names_the_version() {
    let dir = tempfile::tempdir().unwrap();
    let repo = Repo::init(dir.path().to_str().unwrap(), WriteSettings::default())
        .await
        .unwrap();
    let b = rows(&(0..100).collect::<Vec<_>>());
    let keyed = CommitOptions {
        key: Some(vec!["id".into()]),
        ..Default::default()
    };
    let v = repo.commit("t", b.schema(), vec![b], &keyed).await.unwrap();
    let snap = repo
        .snapshot(v.version)
        .await
        .unwrap()
        .table("t")
        .await
        .unwrap();
    let name = snap.files[0].data.fanout_path();
    let path = walk(dir.path())
        .into_iter()
        .find(|p| p.to_string_lossy().ends_with(&name))
        .expect("the data file on disk");
    std::fs::remove_file(path).unwrap();
    let e = match repo
        .snapshot("main")
        .await
        .unwrap()
        .stream("t", &ScanOptions::default())
        .await
    {
        Err(e) => e,
        Ok(mut s) => loop {
            match s.next_batch().await {
                Some(Err(e)) => break e,
                Some(Ok(_)) => continue,
                None => panic!("a missing file read as rows"),
            }
        },
    };
    assert_eq!(e.kind(), tablepin::ErrorKind::Damaged, "{e}");
    assert!(e.to_string().contains(&v.version.short(12)), "{e}");
}

fn ids(b: &RecordBatch) -> Vec<i64> {
    let col = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
    col.values().to_vec()
}

#[tokio::test]
async fn chosen_files_give_their_live_rows_and_together_the_version() {
    let repo = repo().await;
    let all = whole(&repo).await;
    let files = |f: Vec<usize>| ScanOptions {
        files: Some(f),
        ..Default::default()
    };
    // The first file's odd rows were replaced: its live rows are the even
    // ids; the second holds the odd ones, with their new prices.
    let first = scan(&repo, files(vec![0])).await.unwrap();
    let second = scan(&repo, files(vec![1])).await.unwrap();
    assert_eq!(ids(&first), (0..1000).step_by(2).collect::<Vec<i64>>());
    assert_eq!(ids(&second), (1..1000).step_by(2).collect::<Vec<i64>>());
    // In the order asked, unmerged: the second file first.
    let both = scan(&repo, files(vec![1, 0])).await.unwrap();
    assert_eq!(
        both,
        concat_batches(&both.schema(), &[second, first]).unwrap()
    );
    // Together, the version's rows exactly once.
    let mut rows: Vec<(i64, usize)> = ids(&both).into_iter().zip(0..).collect();
    rows.sort_unstable();
    let order: Vec<u32> = rows.iter().map(|&(_, at)| at as u32).collect();
    let sorted =
        arrow::compute::take_record_batch(&both, &arrow::array::UInt32Array::from(order)).unwrap();
    assert_eq!(sorted, all);
    // A streamed read of chosen files is the same rows.
    let s = repo
        .snapshot("main")
        .await
        .unwrap()
        .stream("t", &files(vec![1, 0]))
        .await
        .unwrap();
    use futures::TryStreamExt;
    let streamed: Vec<RecordBatch> = s.rows.try_collect().await.unwrap();
    assert_eq!(concat_batches(&both.schema(), &streamed).unwrap(), both);
    // With a filter and columns; and no file at all is no row.
    let spain = scan(
        &repo,
        ScanOptions {
            columns: Some(vec!["id".into()]),
            filter: Some("country = 'Spain'".into()),
            files: Some(vec![0]),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(
        ids(&spain),
        (0..1000)
            .filter(|i| i % 2 == 0 && i % 3 == 1)
            .collect::<Vec<i64>>()
    );
    assert_eq!(scan(&repo, files(vec![])).await.unwrap().num_rows(), 0);
}

#[tokio::test]
async fn a_file_that_is_not_there_or_asked_twice_is_named() {
    let repo = repo().await;
    let files = |f: Vec<usize>| ScanOptions {
        files: Some(f),
        ..Default::default()
    };
    let e = scan(&repo, files(vec![0, 2])).await.unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    assert_eq!(
        e.to_string(),
        "table 't' has 2 data files (0 to 1) in this version; there is no data file 2"
    );
    let e = scan(&repo, files(vec![1, 1])).await.unwrap_err();
    assert_eq!(
        e.to_string(),
        "data file 1 of table 't' is asked for twice; name each file once"
    );
    let e = repo
        .snapshot("main")
        .await
        .unwrap()
        .stream("t", &files(vec![5]))
        .await
        .err()
        .unwrap();
    assert!(e.to_string().contains("there is no data file 5"), "{e}");
}
