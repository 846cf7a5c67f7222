//! Retention and erasure: gc never loses a kept version; erase removes the
//! rows from every kept version, physically, and the tags stay readable.
//! Property tests run random histories of commits, deletes, tags, branches,
//! erasures and gc with random policies.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow::compute::concat_batches;
use proptest::prelude::*;
use tablepin::{
    CommitOptions, ContentHash, EraseOptions, GcPolicy, Mode, NoProgress, RefKind, Repo, VersionId,
    WriteSettings,
};
use tablepin_rowhash::{content_hash, hash_rows};

fn rows(ids: &[i64], owner: &[i64]) -> RecordBatch {
    RecordBatch::try_from_iter(vec![
        ("id", Arc::new(Int64Array::from(ids.to_vec())) as ArrayRef),
        (
            "owner",
            Arc::new(Int64Array::from(owner.to_vec())) as ArrayRef,
        ),
        (
            "note",
            Arc::new(StringArray::from_iter_values(
                ids.iter().map(|i| format!("n{i}")),
            )) as ArrayRef,
        ),
    ])
    .unwrap()
}

fn opts(mode: Mode) -> CommitOptions {
    CommitOptions {
        mode,
        key: Some(vec!["id".into()]),
        ..Default::default()
    }
}

async fn all_rows(r: &Repo, v: &VersionId) -> RecordBatch {
    let read = r.snapshot(v).await.unwrap().read("t", None).await.unwrap();
    concat_batches(&read.schema, &read.batches).unwrap()
}

/// Rows of a batch whose owner is not `who`.
fn without(b: &RecordBatch, who: i64) -> RecordBatch {
    let owner = b.column(1).as_any().downcast_ref::<Int64Array>().unwrap();
    let keep: arrow::array::BooleanArray = owner.iter().map(|o| Some(o != Some(who))).collect();
    arrow::compute::filter_record_batch(b, &keep).unwrap()
}

/// Data blobs of the repository holding a row owned by `who`.
async fn blobs_holding(r: &Repo, who: i64) -> usize {
    let mut n = 0;
    for b in r.store().list_blobs().await.unwrap() {
        let bytes = r.store().get_blob(&b.id).await.unwrap();
        if &bytes[..4.min(bytes.len())] != b"PAR1" {
            continue;
        }
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(bytes)
            .unwrap()
            .build()
            .unwrap();
        let mut hit = false;
        for batch in reader {
            let batch = batch.unwrap();
            let owner = batch.column_by_name("owner").unwrap();
            let owner = owner.as_any().downcast_ref::<Int64Array>().unwrap();
            hit |= owner.iter().any(|o| o == Some(who));
        }
        n += usize::from(hit);
    }
    n
}

/// Appends rows `k * 10 .. k * 10 + 10` to table t, each owned by its id
/// modulo `owners`.
async fn append_ten(r: &Repo, k: i64, owners: i64) {
    let ids: Vec<i64> = (k * 10..k * 10 + 10).collect();
    let owner: Vec<i64> = ids.iter().map(|i| i % owners).collect();
    r.commit(
        "t",
        rows(&[], &[]).schema(),
        vec![rows(&ids, &owner)],
        &opts(Mode::Append),
    )
    .await
    .unwrap();
}

async fn new_repo() -> (tempfile::TempDir, Repo) {
    let dir = tempfile::tempdir().unwrap();
    let r = Repo::init(dir.path().to_str().unwrap(), WriteSettings::default())
        .await
        .unwrap();
    (dir, r)
}

#[tokio::test]
async fn gc_expires_old_versions_keeps_tags_and_leaves_tombstones() {
    let (_d, r) = new_repo().await;
    let mut versions = Vec::new();
    for k in 0..8i64 {
        let c = r
            .commit(
                "t",
                rows(&[], &[]).schema(),
                vec![rows(&[k], &[k % 3])],
                &opts(Mode::Append),
            )
            .await
            .unwrap();
        versions.push(c.version);
    }
    r.refs()
        .create(RefKind::Tag, "trained", &versions[2].to_string(), "model A")
        .await
        .unwrap();
    let expected = all_rows(&r, &versions[2]).await;
    let policy = GcPolicy {
        keep_last: Some(2),
        grace_ms: 0,
        sole_writer: true,
        ..Default::default()
    };
    let plan = r.gc().plan(&policy).await.unwrap();
    assert_eq!(plan.versions_kept.len(), 3, "2 newest and the tagged one");
    assert_eq!(plan.versions_expired.len(), 5);
    assert!(plan.tags.iter().all(|t| t.readable));
    assert!(plan.bytes_freed > 0);
    // The plan changed nothing.
    assert_eq!(
        r.log("main", &Default::default())
            .await
            .unwrap()
            .iter()
            .filter(|e| e.expired)
            .count(),
        0
    );
    let report = r.gc().apply(plan).await.unwrap();
    assert_eq!(report.tombstones, 5);
    let v = r.verify(&NoProgress).await.unwrap();
    assert!(v.problems.is_empty(), "{:?}", v.problems);
    assert_eq!(all_rows(&r, &versions[2]).await, expected);
    let log = r.log("main", &Default::default()).await.unwrap();
    assert_eq!(log.len(), 8, "expired versions still show in the log");
    assert_eq!(log.iter().filter(|e| e.expired).count(), 5);
    assert!(
        async { r.snapshot(versions[0]).await?.read("t", None).await }
            .await
            .is_err()
    );

    // Without keep-tags the tag goes with its version, never dangling.
    let p = r
        .gc()
        .plan(&GcPolicy {
            keep_last: Some(1),
            keep_tags: false,
            grace_ms: 0,
            sole_writer: true,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(p.tags_deleted, vec!["trained".to_string()]);
    r.gc().apply(p).await.unwrap();
    assert!(r.resolve("trained").await.is_err());
    assert!(r.verify(&NoProgress).await.unwrap().problems.is_empty());
}

#[tokio::test]
async fn a_contradictory_policy_is_refused() {
    let (_d, r) = new_repo().await;
    let err = r
        .gc()
        .plan(&GcPolicy {
            keep_last: Some(0),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert!(matches!(err, tablepin::Error::KeepNone), "{err:?}");
    assert!(
        err.to_string()
            .contains("keeping the last 0 versions would expire every branch head"),
        "{err}"
    );
}

#[tokio::test]
async fn erase_removes_rows_from_every_version_and_tags_stay_exact() {
    let (_d, r) = new_repo().await;
    let mut tags = Vec::new();
    for k in 0..6i64 {
        append_ten(&r, k, 4).await;
        let name = format!("v{k}");
        let id = r
            .refs()
            .create(RefKind::Tag, &name, "main", "")
            .await
            .unwrap();
        tags.push((name, all_rows(&r, &id).await));
    }
    assert!(blobs_holding(&r, 3).await > 0);
    let plan = r
        .erasure()
        .plan(&EraseOptions {
            table: "t".into(),
            predicate: "owner = 3".into(),
            reason: "request 1".into(),
        })
        .await
        .unwrap();
    assert_eq!(plan.rows_removed, 15);
    assert_eq!(plan.tags.len(), 6);
    let report = r.erasure().apply(plan).await.unwrap();
    assert_eq!(blobs_holding(&r, 3).await, 0, "no blob holds the rows");
    for (name, old) in &tags {
        let id = r.resolve(name).await.unwrap();
        let got = all_rows(&r, &id).await;
        assert_eq!(got, without(old, 3), "tag {name}");
        let snap = r.snapshot(id).await.unwrap().table("t").await.unwrap();
        assert_eq!(snap.content_hash, content_hash([&got]).unwrap());
    }
    assert!(r.verify(&NoProgress).await.unwrap().problems.is_empty());
    assert!(r.erasure().verify(&NoProgress).await.unwrap().ok());
    let audit = r.erasure().audit().await.unwrap();
    assert_eq!(audit.len(), 1);
    assert_eq!(audit[0].reason, "request 1");
    assert_eq!(audit[0].fingerprint.rows.len(), 15);
    assert_eq!(
        audit[0]
            .moved_refs
            .iter()
            .filter(|m| m.kind == RefKind::Tag)
            .count(),
        6
    );
    let json = serde_json::to_string(&report.audit).unwrap();
    assert!(!json.contains("owner = 3"), "the record holds no predicate");
    // Erasing again finds nothing.
    let again = r
        .erasure()
        .plan(&EraseOptions {
            table: "t".into(),
            predicate: "owner = 3".into(),
            reason: "request 1".into(),
        })
        .await
        .unwrap();
    assert!(again.is_empty());
}

/// Six appends with fixed times, each tagged: two repositories given this
/// history hold the same versions, to the id.
async fn tagged_history(r: &Repo) {
    for k in 0..6i64 {
        let ids: Vec<i64> = (k * 10..k * 10 + 10).collect();
        let owners: Vec<i64> = ids.iter().map(|i| i % 4).collect();
        let o = CommitOptions {
            time_ms: Some(1_700_000_000_000 + k),
            message: format!("week {k}"),
            ..opts(Mode::Append)
        };
        r.commit("t", rows(&[], &[]).schema(), vec![rows(&ids, &owners)], &o)
            .await
            .unwrap();
        r.refs()
            .create(RefKind::Tag, &format!("v{k}"), "main", "")
            .await
            .unwrap();
    }
}

async fn heads(r: &Repo) -> Vec<VersionId> {
    let mut out = vec![r.resolve("main").await.unwrap()];
    for k in 0..6 {
        out.push(r.resolve(&format!("v{k}")).await.unwrap());
    }
    out
}

/// A plan written to JSON and read back (as `erase --dry-run --json` then
/// `erase --plan FILE` do) applies exactly as the plan itself: the same
/// replacement versions under every ref, the same audit. It holds no
/// predicate; with another predicate, or once the repository has moved,
/// it is refused and nothing changes.
#[tokio::test]
async fn a_saved_erasure_plan_applies_as_the_plan_itself_and_is_refused_once_stale() {
    let erase = EraseOptions {
        table: "t".into(),
        predicate: "owner = 3".into(),
        reason: "request 7".into(),
    };
    let (_da, a) = new_repo().await;
    let (_db, b) = new_repo().await;
    tagged_history(&a).await;
    tagged_history(&b).await;
    assert_eq!(
        heads(&a).await,
        heads(&b).await,
        "the same history, the same ids"
    );
    let plan = a.erasure().plan(&erase).await.unwrap();
    let json = serde_json::to_string(&plan).unwrap();
    assert!(!json.contains("owner = 3"), "the plan holds no predicate");
    let direct = a.erasure().apply(plan).await.unwrap();

    let saved: tablepin::ErasePlan = serde_json::from_str(&json).unwrap();
    let before = heads(&b).await;
    let err = b
        .erasure()
        .apply_saved(&saved, "owner = 2")
        .await
        .unwrap_err();
    assert!(
        matches!(err, tablepin::Error::PlanPredicate { .. }),
        "{err}"
    );
    assert_eq!(heads(&b).await, before, "a refused plan changes nothing");
    let from_json = b.erasure().apply_saved(&saved, "owner = 3").await.unwrap();
    assert_eq!(
        heads(&b).await,
        heads(&a).await,
        "every ref on the same replacement"
    );
    assert_ne!(heads(&b).await, before);
    assert_eq!(from_json.audit.versions, direct.audit.versions);
    assert_eq!(from_json.audit.moved_refs, direct.audit.moved_refs);
    assert_eq!(from_json.audit.bytes_written, direct.audit.bytes_written);
    assert_eq!(blobs_holding(&b, 3).await, 0);
    assert!(b.erasure().verify(&NoProgress).await.unwrap().ok());

    // A plan made before a commit no longer fits after it.
    let (_dc, c) = new_repo().await;
    tagged_history(&c).await;
    let stale: tablepin::ErasePlan = serde_json::from_str(
        &serde_json::to_string(&c.erasure().plan(&erase).await.unwrap()).unwrap(),
    )
    .unwrap();
    c.commit(
        "t",
        rows(&[], &[]).schema(),
        vec![rows(&[99], &[3])],
        &opts(Mode::Append),
    )
    .await
    .unwrap();
    let before = heads(&c).await;
    let err = c
        .erasure()
        .apply_saved(&stale, "owner = 3")
        .await
        .unwrap_err();
    assert!(matches!(err, tablepin::Error::PlanOutdated { .. }), "{err}");
    assert!(err.to_string().contains("versions replaced"), "{err}");
    assert_eq!(heads(&c).await, before, "nothing changed");
    assert!(c.erasure().audit().await.unwrap().is_empty());
}

#[tokio::test]
async fn bad_predicates_are_clear_errors() {
    let (_d, r) = new_repo().await;
    r.commit(
        "t",
        rows(&[], &[]).schema(),
        vec![rows(&[1], &[1])],
        &opts(Mode::Append),
    )
    .await
    .unwrap();
    let plan = |p: &str, reason: &str| {
        let o = EraseOptions {
            table: "t".into(),
            predicate: p.into(),
            reason: reason.into(),
        };
        let r = &r;
        async move { r.erasure().plan(&o).await.unwrap_err().to_string() }
    };
    assert!(plan("nope = 1", "x").await.contains("nope"));
    assert!(plan("owner = = 1", "x")
        .await
        .contains("does not fit table 't'"));
    let e = plan("owner = 'abc'", "x").await;
    assert!(e.contains("abc"), "{e}");
    assert!(plan("owner = 1", " ").await.contains("needs a reason"));
    assert!(plan("owner + 1", "x").await.contains("not a boolean"));
}

/// A random step of a history.
#[derive(Debug, Clone)]
enum Step {
    Upsert(Vec<(i64, i64)>),
    Delete(Vec<i64>),
    Tag,
    Branch,
    Erase(i64),
    Gc(Option<usize>, bool),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => proptest::collection::vec((0i64..40, 0i64..4), 1..8).prop_map(Step::Upsert),
        1 => proptest::collection::vec(0i64..40, 1..4).prop_map(Step::Delete),
        2 => Just(Step::Tag),
        1 => Just(Step::Branch),
        1 => (0i64..4).prop_map(Step::Erase),
        2 => (proptest::option::of(1usize..4), any::<bool>()).prop_map(|(n, t)| Step::Gc(n, t)),
    ]
}

/// Commits rows and records what the new version must read back as.
async fn commit_and_record(
    r: &Repo,
    ids: &[i64],
    owners: &[i64],
    mode: Mode,
    expected: &mut BTreeMap<VersionId, RecordBatch>,
) {
    let c = r
        .commit(
            "t",
            rows(&[], &[]).schema(),
            vec![rows(ids, owners)],
            &opts(mode),
        )
        .await
        .unwrap();
    expected.insert(c.version, all_rows(r, &c.version).await);
}

/// Every ref reads back as `expected` says, and its content hash is the
/// sum of its rows' hashes.
async fn refs_read_back(r: &Repo, expected: &BTreeMap<VersionId, RecordBatch>) {
    for kind in [RefKind::Tag, RefKind::Branch] {
        for rf in r.refs().list(kind).await.unwrap() {
            if let Some(want) = expected.get(&rf.target) {
                let got = all_rows(r, &rf.target).await;
                assert_eq!(&got, want, "{} {}", kind.dir(), rf.name);
                let snap = r
                    .snapshot(rf.target)
                    .await
                    .unwrap()
                    .table("t")
                    .await
                    .unwrap();
                let mut h = ContentHash::EMPTY;
                for x in hash_rows(&got).unwrap() {
                    h.add(&x);
                }
                assert_eq!(snap.content_hash, h);
            }
        }
    }
}

/// A gc keeping the last `keep_last` versions (and the tags' when
/// `keep_tags`): the repository verifies after it, and every kept version
/// reads back exactly as before.
async fn gc_and_check(
    r: &Repo,
    keep_last: Option<usize>,
    keep_tags: bool,
    expected: &BTreeMap<VersionId, RecordBatch>,
) {
    let plan = r
        .gc()
        .plan(&GcPolicy {
            keep_last,
            keep_tags,
            grace_ms: 0,
            sole_writer: true,
            ..Default::default()
        })
        .await
        .unwrap();
    let kept = plan.versions_kept.clone();
    r.gc().apply(plan).await.unwrap();
    let v = r.verify(&NoProgress).await.unwrap();
    assert!(v.problems.is_empty(), "{:?}", v.problems);
    for id in kept {
        if let Some(want) = expected.get(&id) {
            assert_eq!(&all_rows(r, &id).await, want);
        }
    }
}

async fn run_history(steps: Vec<Step>) {
    let (_d, r) = new_repo().await;
    // What every ref's version must read back as: its rows, minus the rows
    // of every owner erased since.
    let mut expected: BTreeMap<VersionId, RecordBatch> = BTreeMap::new();
    let mut erased: HashSet<i64> = HashSet::new();
    let mut n_tags = 0;
    let mut n_branches = 0;
    for s in steps {
        match s {
            Step::Upsert(kv) => {
                let mut m: BTreeMap<i64, i64> = BTreeMap::new();
                for (k, v) in kv {
                    if !erased.contains(&v) {
                        m.insert(k, v);
                    }
                }
                if m.is_empty() {
                    continue;
                }
                let ids: Vec<i64> = m.keys().copied().collect();
                let own: Vec<i64> = m.values().copied().collect();
                commit_and_record(&r, &ids, &own, Mode::Upsert, &mut expected).await;
            }
            Step::Delete(mut ids) => {
                ids.sort_unstable();
                ids.dedup();
                if r.resolve("main").await.is_err() {
                    continue;
                }
                let own = vec![0; ids.len()];
                commit_and_record(&r, &ids, &own, Mode::Delete, &mut expected).await;
            }
            Step::Tag => {
                if r.resolve("main").await.is_ok() {
                    n_tags += 1;
                    r.refs()
                        .create(RefKind::Tag, &format!("t{n_tags}"), "main", "")
                        .await
                        .unwrap();
                }
            }
            Step::Branch => {
                if r.resolve("main").await.is_ok() {
                    n_branches += 1;
                    r.refs()
                        .create(RefKind::Branch, &format!("b{n_branches}"), "main", "")
                        .await
                        .unwrap();
                }
            }
            Step::Erase(who) => {
                if r.resolve("main").await.is_err() {
                    continue;
                }
                let plan = r
                    .erasure()
                    .plan(&EraseOptions {
                        table: "t".into(),
                        predicate: format!("owner = {who}"),
                        reason: "p".into(),
                    })
                    .await
                    .unwrap();
                let map: Vec<(VersionId, VersionId)> =
                    plan.versions.iter().map(|v| (v.old, v.new)).collect();
                if !plan.is_empty() {
                    r.erasure().apply(plan).await.unwrap();
                }
                erased.insert(who);
                let mut next = BTreeMap::new();
                for (old, rows_) in expected {
                    let id = map.iter().find(|m| m.0 == old).map_or(old, |m| m.1);
                    next.insert(id, without(&rows_, who));
                }
                expected = next;
                assert_eq!(blobs_holding(&r, who).await, 0, "after erasing owner {who}");
                assert!(r.erasure().verify(&NoProgress).await.unwrap().ok());
            }
            Step::Gc(keep_last, keep_tags) => {
                gc_and_check(&r, keep_last, keep_tags, &expected).await
            }
        }
        refs_read_back(&r, &expected).await;
    }
    let v = r.verify(&NoProgress).await.unwrap();
    assert!(v.problems.is_empty(), "{:?}", v.problems);
    let _ = Array::len(&Int64Array::from(vec![0]));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn random_histories_keep_their_promises(steps in proptest::collection::vec(step(), 1..18)) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(run_history(steps));
    }
}

/// A history of five versions in a folder: owner 7's row in the first,
/// one row appended by each later one.
async fn five_versions(dir: &std::path::Path) -> Repo {
    let r = Repo::init(dir.to_str().unwrap(), WriteSettings::default())
        .await
        .unwrap();
    let first = rows(&[0, 1], &[7, 1]);
    r.commit("t", first.schema(), vec![first], &opts(Mode::Append))
        .await
        .unwrap();
    for k in 2..6i64 {
        let b = rows(&[k], &[1]);
        r.commit("t", b.schema(), vec![b], &opts(Mode::Append))
            .await
            .unwrap();
    }
    r
}

/// The repository in `dir` opened as the command line opens it: its
/// store keeps the blobs it read in memory.
async fn with_memo(dir: &std::path::Path) -> Repo {
    let store = tablepin::repo::store_at(dir.to_str().unwrap(), &Default::default())
        .unwrap()
        .with_memo(tablepin::store::memo::COMMAND_BYTES);
    Repo::open_store(store).await.unwrap()
}

fn erase_owner_7() -> EraseOptions {
    EraseOptions {
        table: "t".into(),
        predicate: "owner = 7".into(),
        reason: "request".into(),
    }
}

fn last_one() -> GcPolicy {
    GcPolicy {
        keep_last: Some(1),
        grace_ms: 0,
        sole_writer: true,
        ..Default::default()
    }
}

/// The repository afterwards: whole, owner 7 in no blob, the head's rows.
async fn whole_without_owner_7(dir: &std::path::Path) {
    let r = Repo::open(dir.to_str().unwrap()).await.unwrap();
    let v = r.verify(&NoProgress).await.unwrap();
    assert!(v.problems.is_empty(), "{:?}", v.problems);
    assert!(r.erasure().verify(&NoProgress).await.unwrap().ok());
    assert_eq!(blobs_holding(&r, 7).await, 0);
    let head = r.resolve("main").await.unwrap();
    let ids = all_rows(&r, &head).await;
    let ids = ids.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
    assert_eq!(ids.values(), &[1, 2, 3, 4, 5]);
}

/// A gc planned in one process (whose store keeps what it read in
/// memory, as the command line's does), an erasure by another, then the
/// gc applied: the versions the gc expires were replaced and deleted
/// meanwhile. The gc passes over them rather than reading their records
/// from its memory and failing on their deleted snapshots (before the
/// fix: "table snapshot ... is missing").
#[tokio::test]
async fn a_gc_applied_after_another_process_erased_passes_over_what_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let writer = five_versions(dir.path()).await;
    let collector = with_memo(dir.path()).await;
    let plan = collector.gc().plan(&last_one()).await.unwrap();
    assert_eq!(plan.versions_expired.len(), 4);
    writer
        .erasure()
        .apply(writer.erasure().plan(&erase_owner_7()).await.unwrap())
        .await
        .unwrap();
    let report = collector.gc().apply(plan).await.unwrap();
    assert_eq!(report.tombstones, 0, "the expired versions were replaced");
    whole_without_owner_7(dir.path()).await;
}

/// Its sibling the other way round: an erasure planned in one process,
/// a gc by another that expires and deletes old versions, then the
/// erasure applied. It plans again on what is stored, not on the records
/// it remembers, and replaces no expired version by one naming deleted
/// files.
#[tokio::test]
async fn an_erasure_applied_after_another_process_collected_plans_on_what_is_stored() {
    let dir = tempfile::tempdir().unwrap();
    let collector = five_versions(dir.path()).await;
    let eraser = with_memo(dir.path()).await;
    let plan = eraser.erasure().plan(&erase_owner_7()).await.unwrap();
    assert_eq!(plan.versions.len(), 5);
    collector.gc().run(&last_one()).await.unwrap();
    let report = eraser.erasure().apply(plan).await.unwrap();
    assert_eq!(report.audit.versions.len(), 1, "only the head is stored");
    whole_without_owner_7(dir.path()).await;
}

/// The same with this machine's cache of blobs (kept across commands)
/// holding every version: another machine's gc deleted the old ones; an
/// erasure here replaces only what the repository stores, and deletes
/// the erased rows' file although a cached expired version names it.
#[tokio::test]
async fn an_erasure_does_not_plan_on_versions_only_the_cache_still_holds() {
    let dir = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let other = five_versions(dir.path()).await;
    let location = dir.path().to_str().unwrap();
    let here = Repo::open_store(
        tablepin::repo::store_at(location, &Default::default())
            .unwrap()
            .with_cache(Some(tablepin::store::cache::BlobCache::new(
                cache.path(),
                location,
                1 << 30,
            ))),
    )
    .await
    .unwrap();
    for v in here.gc().versions().await.unwrap() {
        all_rows(&here, &v).await;
    }
    other.gc().run(&last_one()).await.unwrap();
    let (plan, report) = here.erasure().run(&erase_owner_7()).await.unwrap();
    assert_eq!(plan.versions.len(), 1, "{plan:?}");
    assert!(report.is_some());
    whole_without_owner_7(dir.path()).await;
}

/// The head entry of main.
async fn main_head(r: &Repo) -> tablepin::format::RefEntry {
    r.store()
        .ref_head(RefKind::Branch, "main")
        .await
        .unwrap()
        .unwrap()
}

/// A commit that finds main held by an erasure waits for the next entry
/// and lands after it, not on the held entry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_waits_while_an_erasure_holds_its_branch() {
    let (d, r) = new_repo().await;
    r.commit(
        "t",
        rows(&[], &[]).schema(),
        vec![rows(&[1], &[1])],
        &opts(Mode::Append),
    )
    .await
    .unwrap();
    let head = main_head(&r).await;
    let held = tablepin::format::RefEntry {
        seq: head.seq + 1,
        time_ms: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64,
        hold: Some(tablepin::format::RefHold {
            by: "erase".into(),
            until_ms: i64::MAX,
        }),
        ..head.clone()
    };
    r.store()
        .append_ref(RefKind::Branch, "main", &held)
        .await
        .unwrap();
    let other = Repo::open(d.path().to_str().unwrap()).await.unwrap();
    let commit = tokio::spawn(async move {
        other
            .commit(
                "t",
                rows(&[], &[]).schema(),
                vec![rows(&[2], &[2])],
                &opts(Mode::Append),
            )
            .await
            .unwrap()
    });
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(main_head(&r).await, held, "the commit waited on the hold");
    let released = tablepin::format::RefEntry {
        seq: held.seq + 1,
        hold: None,
        ..held.clone()
    };
    r.store()
        .append_ref(RefKind::Branch, "main", &released)
        .await
        .unwrap();
    let landed = commit.await.unwrap();
    let now = main_head(&r).await;
    assert_eq!(now.seq, released.seq + 1);
    assert_eq!(now.target, Some(landed.version));
    assert_eq!(landed.parent, head.target);
}

/// An erasure on a branch that commits keep moving finishes: after it
/// loses a race it holds the branch, so planning again catches up. Every
/// commit acknowledged keeps its rows, and the erased owner's are gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_erasure_finishes_while_commits_keep_landing() {
    let (d, r) = new_repo().await;
    for k in 0..40i64 {
        append_ten(&r, k, 5).await;
    }
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let committer = {
        let (other, done) = (
            Repo::open(d.path().to_str().unwrap()).await.unwrap(),
            done.clone(),
        );
        tokio::spawn(async move {
            let mut acknowledged = Vec::new();
            let mut id = 10_000i64;
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                other
                    .commit(
                        "t",
                        rows(&[], &[]).schema(),
                        vec![rows(&[id], &[1])],
                        &opts(Mode::Append),
                    )
                    .await
                    .unwrap();
                acknowledged.push(id);
                id += 1;
            }
            acknowledged
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let erased = r
        .erasure()
        .run(&EraseOptions {
            table: "t".into(),
            predicate: "owner = 3".into(),
            reason: "request 5".into(),
        })
        .await;
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    let acknowledged = committer.await.unwrap();
    let (_, report) = erased.unwrap();
    assert!(report.is_some());
    assert!(!acknowledged.is_empty());
    let head = r.resolve("main").await.unwrap();
    let live = all_rows(&r, &head).await;
    let ids = live
        .column(0)
        .as_any()
        .downcast_ref::<Int64Array>()
        .unwrap();
    let live_ids: HashSet<i64> = ids.iter().flatten().collect();
    for id in &acknowledged {
        assert!(live_ids.contains(id), "acknowledged row {id} kept");
    }
    assert_eq!(live.num_rows(), 400 - 80 + acknowledged.len());
    assert_eq!(blobs_holding(&r, 3).await, 0);
    assert!(main_head(&r).await.hold.is_none());
    assert!(r.verify(&NoProgress).await.unwrap().problems.is_empty());
    assert!(r.erasure().verify(&NoProgress).await.unwrap().ok());
}
