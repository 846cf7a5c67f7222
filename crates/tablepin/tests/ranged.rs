//! A commit's look-up of a few keys in a large data file reads a few of its
//! pages by verified ranges (through the file's outboard), not the file;
//! the table it writes is the one a whole read would have written, and a
//! damaged outboard or page is refused and named with its blob.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use arrow::array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
mod common;

use common::{keyed, upsert};
use tablepin::{Repo, WriteSettings};

/// Rows of ids `ids` (not dense: a look-up must read key pages).
fn rows(ids: &[i64], price: f64) -> RecordBatch {
    // Text that does not compress away, so that the file is large.
    let name: Vec<String> = ids
        .iter()
        .map(|i| format!("{:016x}", (*i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)))
        .collect();
    let note: Vec<String> = name.iter().map(|n| n.chars().rev().collect()).collect();
    RecordBatch::try_from_iter(vec![
        ("id", Arc::new(Int64Array::from(ids.to_vec())) as ArrayRef),
        ("name", Arc::new(StringArray::from(name)) as ArrayRef),
        ("note", Arc::new(StringArray::from(note)) as ArrayRef),
        (
            "price",
            Arc::new(Float64Array::from(
                ids.iter().map(|i| *i as f64 * price).collect::<Vec<_>>(),
            )) as ArrayRef,
        ),
    ])
    .unwrap()
}

/// Table `t` at the head of `main`.
async fn table(repo: &Repo) -> tablepin_format::TableSnapshot {
    repo.snapshot("main")
        .await
        .unwrap()
        .table("t")
        .await
        .unwrap()
}

/// Ids 0, 3, 6, … : 260,000 rows, one data file of several MiB.
fn ids() -> Vec<i64> {
    (0..260_000).map(|i| i * 3).collect()
}

async fn large(location: &str) -> Repo {
    let repo = Repo::init(location, WriteSettings::default())
        .await
        .unwrap();
    let b = rows(&ids(), 0.25);
    repo.commit("t", b.schema(), vec![b], &keyed())
        .await
        .unwrap();
    repo
}

#[tokio::test]
async fn an_upsert_of_a_few_keys_reads_a_few_pages_of_a_large_file() {
    let repo = large("memory://").await;
    let snap = table(&repo).await;
    assert_eq!(snap.files.len(), 1);
    let file_bytes = snap.files[0].bytes;
    assert!(
        file_bytes >= 1 << 20,
        "the test needs a file with an outboard: {file_bytes} bytes"
    );
    let changed: Vec<i64> = vec![3, 150_000, 299_997, 7]; // 7 is new
    let before = repo.store().requests();
    let b = rows(&changed, 10.0);
    repo.commit("t", b.schema(), vec![b], &upsert())
        .await
        .unwrap();
    let read = repo.store().requests().since(&before).bytes_read;
    // Its outboard, footer and page index, a key page a key, and a page
    // a column of each row found: an eighth of the file at most.
    assert!(
        read * 8 < file_bytes,
        "the upsert read {read} bytes of a {file_bytes}-byte file"
    );
    // The same table as one commit of the final rows.
    let mut all = ids();
    all.push(7);
    all.sort_unstable();
    let want = Repo::init("memory://", WriteSettings::default())
        .await
        .unwrap();
    let mut price: Vec<f64> = all.iter().map(|i| *i as f64 * 0.25).collect();
    for (i, id) in all.iter().enumerate() {
        if changed.contains(id) {
            price[i] = *id as f64 * 10.0;
        }
    }
    let b = rows(&all, 0.0);
    let b = RecordBatch::try_new(
        b.schema(),
        vec![
            b.column(0).clone(),
            b.column(1).clone(),
            b.column(2).clone(),
            Arc::new(Float64Array::from(price)),
        ],
    )
    .unwrap();
    want.commit("t", b.schema(), vec![b], &keyed())
        .await
        .unwrap();
    let got = table(&repo).await;
    let expected = table(&want).await;
    assert_eq!(got.rows, expected.rows);
    assert_eq!(got.content_hash, expected.content_hash);
    let v = repo.verify(&tablepin::NoProgress).await.unwrap();
    assert!(v.problems.is_empty(), "{:?}", v.problems);
}

#[tokio::test]
async fn a_damaged_outboard_or_page_stops_the_look_up_and_names_its_blob() {
    let dir = tempfile::tempdir().unwrap();
    let location = dir.path().to_str().unwrap();
    let repo = large(location).await;
    let blob = table(&repo).await.files[0].data;
    let head = repo.resolve("main").await.unwrap();
    let outboard = dir.path().join("outboards").join(blob.fanout_path());
    let good = std::fs::read(&outboard).unwrap();
    // The first hash pair: every range's path to the root passes it.
    let mut bad = good.clone();
    bad[8] ^= 1;
    std::fs::write(&outboard, &bad).unwrap();
    let refused = |words: &'static str| async move {
        let repo = Repo::open(location).await.unwrap();
        let b = rows(&[150_000], 10.0);
        let err = repo
            .commit("t", b.schema(), vec![b], &upsert())
            .await
            .unwrap_err();
        assert!(err.to_string().contains(&blob.to_string()), "{err}");
        assert!(err.to_string().contains(words), "{err}");
        assert_eq!(
            repo.resolve("main").await.unwrap(),
            head,
            "nothing committed"
        );
        repo
    };
    refused("outboard").await;
    std::fs::write(&outboard, &good).unwrap();
    // A byte flipped in every chunk group but those of the footer and
    // page index: whichever pages the look-up reads, each is damaged.
    let data = dir.path().join("objects").join(blob.fanout_path());
    let whole = std::fs::read(&data).unwrap();
    let mut flipped = whole.clone();
    let footer = whole.len() - 256 * 1024;
    for at in (100..footer).step_by(16 * 1024) {
        flipped[at] ^= 0x40;
    }
    std::fs::write(&data, &flipped).unwrap();
    let repo = refused("damaged in bytes").await;
    let v = repo.verify(&tablepin::NoProgress).await.unwrap();
    assert!(
        v.problems.iter().any(|p| p.contains(&blob.to_string())),
        "{:?}",
        v.problems
    );
}

/// The format `init` writes.
const NEWEST: u32 = tablepin::format::REPO_FORMAT;

/// A repository of format 2 (its large blob stored without an outboard, as
/// a build before outboards stored it) is read whole until `upgrade`
/// writes the outboard and the format number; from then on its large blob
/// is read by range, and `verify` names a large blob whose outboard goes
/// missing, which `upgrade` writes again.
#[tokio::test]
async fn an_older_repository_is_upgraded_and_then_every_large_blob_has_its_outboard() {
    let dir = tempfile::tempdir().unwrap();
    let location = dir.path().to_str().unwrap();
    let snap = table(&large(location).await).await;
    let (blob, file_bytes) = (snap.files[0].data, snap.files[0].bytes);
    let outboard = dir.path().join("outboards").join(blob.fanout_path());
    let stored = std::fs::read(&outboard).unwrap();
    std::fs::remove_file(&outboard).unwrap();
    let config = dir.path().join("meta/config.json");
    let format_of = || -> u64 {
        let c: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&config).unwrap()).unwrap();
        c["format"].as_u64().unwrap()
    };
    assert_eq!(format_of(), u64::from(NEWEST));
    let mut c: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&config).unwrap()).unwrap();
    c["format"] = 2.into();
    std::fs::write(&config, serde_json::to_vec_pretty(&c).unwrap()).unwrap();

    let repo = Repo::open(location).await.unwrap();
    let v = repo.verify(&tablepin::NoProgress).await.unwrap();
    assert!(v.problems.is_empty(), "{:?}", v.problems);
    let plan = repo.upgrade_plan().await.unwrap();
    assert_eq!((plan.from, plan.to, plan.bytes), (2, NEWEST, file_bytes));
    assert_eq!(plan.blobs.len(), 1);
    assert_eq!(plan.blobs[0].blob, blob);
    let report = repo.upgrade(&tablepin::NoProgress).await.unwrap();
    assert_eq!((report.from, report.to), (2, NEWEST));
    assert_eq!(
        (report.outboards_written, report.bytes_read),
        (1, file_bytes)
    );
    assert_eq!(format_of(), u64::from(NEWEST));
    assert_eq!(std::fs::read(&outboard).unwrap(), stored);

    let repo = Repo::open(location).await.unwrap();
    let plan = repo.upgrade_plan().await.unwrap();
    assert_eq!((plan.from, plan.to, plan.blobs.len()), (NEWEST, NEWEST, 0));
    let v = repo.verify(&tablepin::NoProgress).await.unwrap();
    assert!(v.problems.is_empty(), "{:?}", v.problems);
    // Read by range again: a few keys' pages, not the file.
    let before = repo.store().requests();
    let b = rows(&[3, 150_000], 10.0);
    repo.commit("t", b.schema(), vec![b], &upsert())
        .await
        .unwrap();
    let read = repo.store().requests().since(&before).bytes_read;
    assert!(read * 8 < file_bytes, "read {read} of {file_bytes}");
    // From format 3 on a large blob without its outboard is named.
    std::fs::remove_file(&outboard).unwrap();
    let v = repo.verify(&tablepin::NoProgress).await.unwrap();
    assert_eq!(v.problems.len(), 1, "{:?}", v.problems);
    assert!(
        v.problems[0].contains(&blob.to_string()) && v.problems[0].contains("tablepin upgrade"),
        "{}",
        v.problems[0]
    );
    let report = repo.upgrade(&tablepin::NoProgress).await.unwrap();
    assert_eq!(
        (report.from, report.to, report.outboards_written),
        (NEWEST, NEWEST, 1)
    );
    let v = repo.verify(&tablepin::NoProgress).await.unwrap();
    assert!(v.problems.is_empty(), "{:?}", v.problems);
}

/// gc deletes an outboard whose blob is not stored (a commit stopped
/// between writing a large blob's outboard and the blob), past the grace
/// period, and keeps every outboard whose blob is kept.
#[tokio::test]
async fn gc_deletes_an_outboard_without_its_blob_and_keeps_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let location = dir.path().to_str().unwrap();
    let repo = large(location).await;
    let blob = table(&repo).await.files[0].data;
    let outboards = dir.path().join("outboards");
    let kept = outboards.join(blob.fanout_path());
    let orphan_id = tablepin_format::ObjectId::of(b"never stored");
    let orphan = outboards.join(orphan_id.fanout_path());
    std::fs::create_dir_all(orphan.parent().unwrap()).unwrap();
    std::fs::copy(&kept, &orphan).unwrap();
    let policy = tablepin::GcPolicy {
        grace_ms: 0,
        sole_writer: true,
        ..Default::default()
    };
    let plan = repo.gc().plan(&policy).await.unwrap();
    assert_eq!(plan.orphan_outboards, [orphan_id]);
    let report = repo.gc().apply(plan).await.unwrap();
    assert_eq!(report.orphan_outboards_deleted, 1);
    assert!(!orphan.exists() && kept.exists());
    let v = repo.verify(&tablepin::NoProgress).await.unwrap();
    assert!(v.problems.is_empty(), "{:?}", v.problems);
}
