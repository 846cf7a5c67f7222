//! SQL over versions: each query gives what DataFusion gives over the same
//! versions exported to Parquet and read back by the parquet crate; the
//! scans decode only the columns a query reads; mistakes are one sentence.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::util::pretty::pretty_format_batches_with_schema;
use datafusion::common::TableReference;
use datafusion::datasource::MemTable;
use datafusion::prelude::{SessionConfig, SessionContext};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use tablepin::{CommitOptions, ErrorKind, Mode, RefKind, Repo, WriteSettings};

const QUERIES: &[&str] = &[
    "SELECT count(*) FROM sales",
    "SELECT count(*) FROM \"sales@train-v1\" WHERE country = 'France'",
    "SELECT sum(quantity), round(avg(price), 6) FROM \"sales@week-2\"",
    "SELECT country, count(*) AS n FROM \"sales@train-v1\" GROUP BY country ORDER BY country",
    "SELECT id, returned FROM sales WHERE returned > 0 ORDER BY id LIMIT 10",
    "SELECT * FROM \"sales@main~1\" ORDER BY id LIMIT 5",
    "SELECT id FROM sales ORDER BY id DESC LIMIT 3",
    "SELECT count(*) FROM \"sales@train-v1\" o JOIN sales n ON o.id = n.id WHERE o.returned <> n.returned",
    "SELECT count(*) FROM sales n LEFT JOIN \"sales@train-v1\" o ON o.id = n.id WHERE o.id IS NULL",
    "SELECT max(sold_at), min(sold_at) FROM \"sales@week-2\"",
    "SELECT product, round(sum(quantity * price), 4) AS revenue FROM sales GROUP BY product ORDER BY revenue DESC, product LIMIT 5",
    "SELECT count(DISTINCT customer) FROM \"sales@train-v1\"",
    "SELECT count(*) FROM sales WHERE description IS NULL",
    "SELECT count(*) FROM sales WHERE description LIKE '%HEART%'",
    "SELECT country, sum(returned) FROM sales WHERE country IN ('France', 'EIRE') GROUP BY country ORDER BY country",
    "SELECT 'old' AS v, count(*) AS n FROM \"sales@train-v1\" UNION ALL SELECT 'new', count(*) FROM sales ORDER BY v",
    "SELECT count(*) FROM sales WHERE id IN (SELECT id FROM \"sales@week-2\" WHERE returned > 0)",
    "SELECT id, quantity, rank() OVER (ORDER BY quantity DESC, id) AS r FROM \"sales@train-v1\" ORDER BY r LIMIT 5",
    "WITH f AS (SELECT * FROM sales WHERE country = 'France') SELECT count(*), sum(quantity) FROM f",
    "SELECT customer, count(*) FROM \"sales@week-2\" WHERE customer IS NOT NULL GROUP BY customer ORDER BY count(*) DESC, customer LIMIT 5",
    "SELECT count(*) FROM sales WHERE price BETWEEN 1 AND 2 AND quantity < 10",
    "SELECT count(*), sum(quantity) FROM sales WHERE id BETWEEN 20000 AND 20999",
    "SELECT id, returned FROM sales WHERE id >= 41500 AND returned >= 0 ORDER BY id",
    "SELECT round(avg(price), 6), count(*) FROM events WHERE country = 'Germany'",
    "SELECT e.country, count(*) FROM events e JOIN \"sales@train-v1\" s ON e.id = s.id GROUP BY e.country ORDER BY e.country",
];

/// Four weekly versions of a keyed table (tags on the first and third) and
/// an unkeyed one.
async fn repo() -> Repo {
    let repo = Repo::init("memory://", WriteSettings::default())
        .await
        .unwrap();
    let history = tablepin_datagen::history(40_000, 4, 2_000, 150, 7);
    let keyed = CommitOptions {
        key: Some(vec!["id".into()]),
        ..Default::default()
    };
    for (i, t) in history.iter().enumerate() {
        let v = repo
            .commit("sales", t.schema(), vec![t.clone()], &keyed)
            .await
            .unwrap();
        let tag = match i {
            0 => "train-v1",
            2 => "week-2",
            _ => continue,
        };
        repo.refs()
            .create(RefKind::Tag, tag, &v.version.to_string(), "")
            .await
            .unwrap();
    }
    let events = tablepin_datagen::sales(0, 5_000, 9);
    let append = CommitOptions {
        mode: Mode::Append,
        ..Default::default()
    };
    for _ in 0..2 {
        repo.commit("events", events.schema(), vec![events.clone()], &append)
            .await
            .unwrap();
    }
    repo
}

/// A plain DataFusion context over the versions exported to Parquet files.
async fn reference(repo: &Repo, dir: &std::path::Path) -> SessionContext {
    let config =
        SessionConfig::new().set_bool("datafusion.sql_parser.enable_ident_normalization", false);
    let ctx = SessionContext::new_with_config(config);
    for (name, table, rev) in [
        ("sales", "sales", "main"),
        ("sales@train-v1", "sales", "train-v1"),
        ("sales@week-2", "sales", "week-2"),
        ("sales@main~1", "sales", "main~1"),
        ("events", "events", "main"),
    ] {
        let read = repo.read(rev, table, None).await.unwrap();
        let path = dir.join(format!("{}.parquet", name.replace(['@', '~'], "_")));
        let path = path.to_str().unwrap();
        tablepin::files::write_table_file(path, &read.schema, &read.batches).unwrap();
        let file = std::fs::File::open(path).unwrap();
        let builder = ParquetRecordBatchReaderBuilder::try_new(file).unwrap();
        let schema = builder.schema().clone();
        let batches: Vec<RecordBatch> = builder.build().unwrap().map(|b| b.unwrap()).collect();
        let mem = MemTable::try_new(schema, vec![batches]).unwrap();
        ctx.register_table(TableReference::bare(name), Arc::new(mem))
            .unwrap();
    }
    ctx
}

fn text(schema: &arrow::datatypes::SchemaRef, batches: &[RecordBatch]) -> String {
    pretty_format_batches_with_schema(schema.clone(), batches)
        .unwrap()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_query_gives_what_datafusion_gives_over_the_exported_versions() {
    let repo = repo().await;
    let dir = tempfile::tempdir().unwrap();
    let ctx = reference(&repo, dir.path()).await;
    assert!(QUERIES.len() >= 20);
    for q in QUERIES {
        let ours = repo.sql(q).await.unwrap_or_else(|e| panic!("{q}: {e}"));
        let df = ctx.sql(q).await.unwrap();
        let schema: arrow::datatypes::SchemaRef = df.schema().inner().clone();
        let theirs = df.collect().await.unwrap();
        let (a, b) = (text(&ours.schema, &ours.batches), text(&schema, &theirs));
        assert_eq!(a, b, "{q}");
        assert!(
            ours.batches.iter().map(|b| b.num_rows()).sum::<usize>() > 0,
            "{q}: no rows"
        );
    }
}

#[tokio::test]
async fn a_query_decodes_only_the_columns_it_reads() {
    let repo = repo().await;
    let r = repo
        .sql("SELECT count(*) FROM \"sales@train-v1\" WHERE country = 'France'")
        .await
        .unwrap();
    let t = &r.tables[0];
    assert_eq!(t.name, "sales@train-v1");
    assert_eq!(t.version, repo.resolve("train-v1").await.unwrap());
    // Only `country`: not the key, not the other seven columns.
    assert_eq!(t.stats.columns_decoded, 1);
    // The filter ran while reading: only the French rows came out.
    let french = repo
        .snapshot("train-v1")
        .await
        .unwrap()
        .scan(
            "sales",
            &tablepin::ScanOptions {
                filter: Some("country = 'France'".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(t.stats.rows, french.stats.rows);
    assert!(t.stats.rows < 40_000 / 4, "{:?}", t.stats);
    let r = repo.sql("SELECT sum(quantity) FROM sales").await.unwrap();
    assert_eq!(r.tables[0].stats.columns_decoded, 1);
}

/// Pushdown by statistics: a condition on the key skips the files whose key
/// range rules it out (never fetched) and, in the others, the pages whose
/// smallest and largest keys do (never decoded); the answers are checked
/// against plain Parquet with the other queries.
#[tokio::test]
async fn a_filter_on_the_key_skips_files_and_pages() {
    let repo = repo().await;
    let all = repo.sql("SELECT count(*) FROM sales").await.unwrap();
    let in_files = all.tables[0].stats.rows_in_files;
    assert!(in_files > 40_000, "{:?}", all.tables[0].stats);
    let r = repo
        .sql("SELECT count(*) FROM sales WHERE id BETWEEN 20000 AND 20999")
        .await
        .unwrap();
    let s = &r.tables[0].stats;
    // 1,000 keys lie on two or three pages of 1,024 rows in the first
    // version's file, and on a page or two of each later file.
    assert!(s.rows_decoded < 8 * 1024, "{s:?}");
    assert!(s.rows_decoded >= 1_000, "{s:?}");
    let plain = repo
        .snapshot("main")
        .await
        .unwrap()
        .scan(
            "sales",
            &tablepin::ScanOptions {
                filter: Some("id BETWEEN 20000 AND 20999".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(s.rows, plain.stats.rows, "{s:?}");
    // Keys past the first version's are in the later files only.
    let r = repo
        .sql("SELECT count(*) FROM sales WHERE id >= 41500")
        .await
        .unwrap();
    let s = &r.tables[0].stats;
    assert!(s.files_skipped >= 1, "{s:?}");
    assert!(s.rows_in_files < in_files - 30_000, "{s:?}");
}

#[tokio::test]
async fn a_bad_query_is_one_sentence_of_the_right_kind() {
    let repo = repo().await;
    for (q, kind, says) in [
        ("SELECT * FROM nope", ErrorKind::NotFound, "no table 'nope'"),
        (
            "SELECT * FROM \"sales@nope\"",
            ErrorKind::NotFound,
            "unknown revision 'nope'",
        ),
        ("SELECT nope FROM sales", ErrorKind::InvalidInput, "nope"),
        ("SELEC 1", ErrorKind::InvalidInput, "SQL syntax error"),
        ("DROP TABLE sales", ErrorKind::InvalidInput, "not supported"),
        (
            "SELECT 1; SELECT 2",
            ErrorKind::InvalidInput,
            "one SQL statement",
        ),
    ] {
        let e = repo.sql(q).await.unwrap_err();
        assert_eq!(e.kind(), kind, "{q}: {e}");
        let m = e.to_string();
        assert!(m.contains(says), "{q}: {m}");
        assert!(!m.contains('\n'), "{q}: {m}");
    }
}
