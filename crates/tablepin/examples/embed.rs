//! tablepin embedded in a program: a repository on an object store the
//! program supplies (here `object_store`'s in-memory store; any store with
//! put-if-absent works the same), a commit, a tag, a later change, and reads
//! of the tag back: whole and proved by its content hash, then only some
//! columns of some rows, decoded without the others.
//!
//! ```sh
//! cargo run --release --example embed -p tablepin
//! ```

use std::sync::Arc;

use arrow::array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow::util::pretty::pretty_format_batches;
use tablepin::{CommitOptions, Mode, RefKind, Repo, ScanOptions, Store, WriteSettings};

fn sales(
    ids: &[i64],
    country: &[&str],
    price: &[f64],
) -> Result<RecordBatch, arrow::error::ArrowError> {
    RecordBatch::try_from_iter(vec![
        ("id", Arc::new(Int64Array::from(ids.to_vec())) as ArrayRef),
        (
            "country",
            Arc::new(StringArray::from(country.to_vec())) as ArrayRef,
        ),
        (
            "price",
            Arc::new(Float64Array::from(price.to_vec())) as ArrayRef,
        ),
    ])
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let os: Arc<dyn object_store::ObjectStore> = Arc::new(object_store::memory::InMemory::new());
    let repo = Repo::init_store(
        Store::from_object_store(os, "memory://example"),
        WriteSettings::default(),
    )
    .await?;

    let first = sales(
        &[1, 2, 3],
        &["France", "EIRE", "France"],
        &[2.55, 3.39, 0.85],
    )?;
    let keyed = CommitOptions {
        key: Some(vec!["id".into()]),
        message: "first load".into(),
        ..Default::default()
    };
    let v1 = repo
        .commit("sales", first.schema(), vec![first.clone()], &keyed)
        .await?;
    repo.refs()
        .create(RefKind::Tag, "train-v1", &v1.version.to_string(), "model A")
        .await?;
    println!(
        "committed {} rows as {} (content hash {})",
        v1.rows,
        v1.version.short(12),
        v1.content_hash
    );

    // The live table moves on: a price is corrected, a sale is added.
    let later = sales(&[2, 4], &["EIRE", "Spain"], &[3.10, 9.95])?;
    let upsert = CommitOptions {
        mode: Mode::Upsert,
        message: "week 2".into(),
        ..Default::default()
    };
    let v2 = repo
        .commit("sales", later.schema(), vec![later], &upsert)
        .await?;
    println!(
        "week 2: +{} ~{} rows, checks: {}",
        v2.change.rows_added,
        v2.change.rows_changed,
        v2.change.checks.fired().join(",")
    );

    // The tag reads back exactly, and its rows prove it.
    let tagged = repo.read("train-v1", "sales", None).await?;
    assert_eq!(tagged.batches, vec![first]);
    assert_eq!(tablepin::content_hash(&tagged.batches)?, v1.content_hash);
    println!(
        "train-v1 reads back its {} rows; content hash checked",
        tagged.snapshot.rows
    );

    // Some columns of some rows of the head.
    let opts = ScanOptions {
        columns: Some(vec!["price".into()]),
        filter: Some("price > 3".into()),
        files: None,
        limit: None,
    };
    let read = repo.snapshot("main").await?.scan("sales", &opts).await?;
    assert_eq!(read.stats.columns_decoded, 2);
    println!(
        "main, price where price > 3 ({} of 3 columns decoded: price, and the key for the merge):\n{}",
        read.stats.columns_decoded,
        pretty_format_batches(&read.batches)?
    );
    Ok(())
}
