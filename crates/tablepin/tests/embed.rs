//! The engine embedded in another program: a repository on an
//! `object_store::ObjectStore` the program supplies.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, RecordBatch};
use tablepin::{CommitOptions, Error, Repo, Store, WriteSettings};

#[tokio::test]
async fn a_repository_lives_on_a_store_the_caller_supplies() {
    let os: Arc<dyn object_store::ObjectStore> = Arc::new(object_store::memory::InMemory::new());
    let store = || Store::from_object_store(os.clone(), "memory://embedded");
    let repo = Repo::init_store(store(), WriteSettings::default())
        .await
        .unwrap();
    let rows = RecordBatch::try_from_iter(vec![(
        "id",
        Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef,
    )])
    .unwrap();
    let opts = CommitOptions {
        key: Some(vec!["id".into()]),
        ..Default::default()
    };
    let c = repo
        .commit("t", rows.schema(), vec![rows.clone()], &opts)
        .await
        .unwrap();
    // Opened again over the same store, the repository has the commit.
    let again = Repo::open_store(store()).await.unwrap();
    assert_eq!(again.resolve("main").await.unwrap(), c.version);
    assert_eq!(
        again.read("main", "t", None).await.unwrap().batches,
        vec![rows]
    );
    // A second init over it is refused, naming where.
    match Repo::init_store(store(), WriteSettings::default()).await {
        Err(Error::RepositoryExists { path }) => assert_eq!(path, "memory://embedded"),
        other => panic!("{other:?}"),
    }
}

/// Writers racing with `try_commit`: each attempt lands or says it lost,
/// and what it says is true: every landed commit's rows are in the head,
/// no lost one's are, and a lost commit tried again with `commit` lands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_commit_says_truly_whether_it_landed_or_lost_the_race() {
    use tablepin::{CommitOutcome, Mode};
    let repo = Arc::new(
        Repo::init("memory://", WriteSettings::default())
            .await
            .unwrap(),
    );
    let rows = |from: i64| {
        let ids: Vec<i64> = (from..from + 2000).collect();
        RecordBatch::try_from_iter(vec![("id", Arc::new(Int64Array::from(ids)) as ArrayRef)])
            .unwrap()
    };
    let keyed = CommitOptions {
        key: Some(vec!["id".into()]),
        ..Default::default()
    };
    let first = rows(0);
    repo.commit("t", first.schema(), vec![first], &keyed)
        .await
        .unwrap();
    let (mut landed, mut lost) = (vec![0i64], Vec::new());
    for round in 0..5i64 {
        let barrier = Arc::new(tokio::sync::Barrier::new(8));
        let tasks: Vec<_> = (0..8i64)
            .map(|w| {
                let (repo, barrier) = (repo.clone(), barrier.clone());
                let from = (1 + round * 8 + w) * 10_000;
                tokio::spawn(async move {
                    let b = rows(from);
                    let opts = CommitOptions {
                        mode: Mode::Append,
                        ..Default::default()
                    };
                    barrier.wait().await;
                    (
                        from,
                        repo.try_commit("t", b.schema(), vec![b], &opts)
                            .await
                            .unwrap(),
                    )
                })
            })
            .collect();
        for t in tasks {
            match t.await.unwrap() {
                (from, CommitOutcome::Landed(_)) => landed.push(from),
                (from, CommitOutcome::Lost { branch }) => {
                    assert_eq!(branch, "main");
                    lost.push(from);
                }
            }
        }
    }
    let head = repo.read("main", "t", None).await.unwrap();
    let ids: std::collections::BTreeSet<i64> = head
        .batches
        .iter()
        .flat_map(|b| {
            b.column(0)
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap()
                .values()
                .to_vec()
        })
        .collect();
    for from in &landed {
        assert!(
            ids.contains(from) && ids.contains(&(from + 1999)),
            "landed {from} missing"
        );
    }
    for from in &lost {
        assert!(!ids.contains(from), "lost {from} is in the head");
    }
    assert_eq!(ids.len(), landed.len() * 2000);
    assert_eq!(repo.log("main").await.unwrap().len(), landed.len());
    // Eight writers released at once on two threads: some lost.
    assert!(!lost.is_empty(), "no attempt lost a race in 40");
    let opts = CommitOptions {
        mode: Mode::Append,
        ..Default::default()
    };
    for from in lost {
        let b = rows(from);
        repo.commit("t", b.schema(), vec![b], &opts).await.unwrap();
    }
    assert_eq!(
        repo.read("main", "t", None).await.unwrap().stats.rows,
        41 * 2000
    );
}
