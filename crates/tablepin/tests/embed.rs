//! The engine embedded in another program: a repository on an
//! `object_store::ObjectStore` the program supplies.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, RecordBatch};
use tablepin::{CommitOptions, Error, Input, Repo, Store, WriteSettings};

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
/// The race happens by construction, not by luck: the store holds each
/// round's ref writes until all eight writers have made theirs, so all
/// eight planned on the same head and exactly one of them lands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_commit_says_truly_whether_it_landed_or_lost_the_race() {
    use tablepin::{CommitOutcome, Mode};
    let (_, gate, repo) = stalled_repo("memory://racing").await;
    let repo = Arc::new(repo);
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
    *gate.gather.lock().await = Some(Arc::new(tokio::sync::Barrier::new(8)));
    for round in 0..5i64 {
        let landed_before = landed.len();
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
                        repo.transaction("t", &opts)
                            .attempt(Input::Rows(b.schema(), vec![b]))
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
        assert_eq!(
            landed.len() - landed_before,
            1,
            "round {round}: one of eight lands"
        );
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
    assert_eq!(
        repo.log("main", &Default::default()).await.unwrap().len(),
        landed.len()
    );
    assert_eq!(lost.len(), 5 * 7);
    *gate.gather.lock().await = None;
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

/// A store that, armed, holds the first ref write it sees for `stall`
/// while `during` runs: a commit stalled between writing its blobs and
/// landing, as a descheduled process or a slow store stalls it. With a
/// `gather` barrier, it holds every ref write until the barrier's count
/// of them have arrived: writers that all planned on one head, racing.
struct Stalling {
    inner: Arc<dyn object_store::ObjectStore>,
    armed: std::sync::atomic::AtomicBool,
    during:
        tokio::sync::Mutex<Option<std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>>>,
    gather: tokio::sync::Mutex<Option<Arc<tokio::sync::Barrier>>>,
}

impl std::fmt::Debug for Stalling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Stalling({:?})", self.inner)
    }
}

impl std::fmt::Display for Stalling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Stalling({})", self.inner)
    }
}

use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta,
    PutMultipartOptions, PutOptions, PutPayload, PutResult,
};

#[async_trait::async_trait]
impl object_store::ObjectStore for Stalling {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        let gather = self.gather.lock().await.clone();
        if let Some(barrier) = gather.filter(|_| location.as_ref().starts_with("refs/")) {
            barrier.wait().await;
        }
        if location.as_ref().starts_with("refs/")
            && self.armed.swap(false, std::sync::atomic::Ordering::SeqCst)
        {
            tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
            if let Some(f) = self.during.lock().await.take() {
                f.await;
            }
        }
        self.inner.put_opts(location, payload, opts).await
    }
    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }
    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        self.inner.get_opts(location, options).await
    }
    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        self.inner.delete_stream(locations)
    }
    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }
    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }
    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

/// A repository in memory whose next ref write, once armed, stalls and
/// runs `during` first; the memory store underneath, to reach it
/// unstalled.
async fn stalled_repo(name: &str) -> (Arc<dyn object_store::ObjectStore>, Arc<Stalling>, Repo) {
    let os: Arc<dyn object_store::ObjectStore> = Arc::new(object_store::memory::InMemory::new());
    let stalling = Arc::new(Stalling {
        inner: os.clone(),
        armed: false.into(),
        during: tokio::sync::Mutex::new(None),
        gather: tokio::sync::Mutex::new(None),
    });
    let repo = Repo::init_store(
        Store::from_object_store(stalling.clone(), name),
        WriteSettings::default(),
    )
    .await
    .unwrap();
    (os, stalling, repo)
}

/// A gc with a grace shorter than a stalled commit took deletes the
/// commit's new blobs before it lands; the commit, seeing it took long,
/// writes them again after landing, so what it acknowledged reads back.
/// (Before, it checked only the blobs it had reused: its head was left
/// naming a snapshot that was gone.)
#[tokio::test]
async fn a_commit_stalled_past_a_gc_grace_still_lands_whole() {
    let (os, stalling, repo) = stalled_repo("memory://stalled").await;
    let rows = |ids: Vec<i64>| {
        RecordBatch::try_from_iter(vec![("id", Arc::new(Int64Array::from(ids)) as ArrayRef)])
            .unwrap()
    };
    let opts = CommitOptions {
        key: Some(vec!["id".into()]),
        mode: tablepin::Mode::Upsert,
        ..Default::default()
    };
    let first = rows(vec![1, 2]);
    repo.commit("t", first.schema(), vec![first], &opts)
        .await
        .unwrap();
    let gc_os = os.clone();
    *stalling.during.lock().await = Some(Box::pin(async move {
        let other = Repo::open_store(Store::from_object_store(gc_os, "memory://stalled"))
            .await
            .unwrap();
        let policy = tablepin::GcPolicy {
            grace_ms: 0,
            sole_writer: true,
            ..Default::default()
        };
        let plan = other.gc().plan(&policy).await.unwrap();
        assert!(plan.blobs_deleted.len() >= 2, "{plan:?}");
        other.gc().apply(plan).await.unwrap();
    }));
    stalling
        .armed
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let second = rows(vec![3]);
    let c = repo
        .commit("t", second.schema(), vec![second], &opts)
        .await
        .unwrap();
    assert!(stalling.during.lock().await.is_none(), "the gc ran");
    let again = Repo::open_store(Store::from_object_store(os, "memory://stalled"))
        .await
        .unwrap();
    let read = again.read("main", "t", None).await.unwrap();
    assert_eq!(read.version, c.version);
    assert_eq!(read.batches, vec![rows(vec![1, 2, 3])]);
    let v = again.verify(&tablepin::NoProgress).await.unwrap();
    assert!(v.problems.is_empty(), "{:?}", v.problems);
}

/// Upserts rows of these ids into table `t` of `repo`'s main.
async fn upsert_ids(repo: &Repo, ids: Vec<i64>) -> tablepin::CommitResult {
    let b = RecordBatch::try_from_iter(vec![("id", Arc::new(Int64Array::from(ids)) as ArrayRef)])
        .unwrap();
    let opts = CommitOptions {
        key: Some(vec!["id".into()]),
        mode: tablepin::Mode::Upsert,
        ..Default::default()
    };
    repo.commit("t", b.schema(), vec![b], &opts).await.unwrap()
}

/// A commit whose first attempt lost the race for its branch, and that
/// landed on a retry, reports the data file its first attempt wrote as
/// new: no other version holds it (issue 41; before, "0 B new in 0
/// blobs" for its data). Its counts equal those of the same commit made
/// with no race, in a twin repository.
#[tokio::test]
async fn a_commit_that_lost_a_race_counts_what_its_first_attempt_wrote() {
    let twin = Repo::init("memory://", WriteSettings::default())
        .await
        .unwrap();
    upsert_ids(&twin, vec![1, 2]).await;
    upsert_ids(&twin, vec![10]).await;
    let direct = upsert_ids(&twin, (100..2000).collect()).await;

    let (os, stalling, repo) = stalled_repo("memory://raced").await;
    upsert_ids(&repo, vec![1, 2]).await;
    // While the commit is about to move the branch, another writer does.
    let other = Repo::open_store(Store::from_object_store(os, "memory://raced"))
        .await
        .unwrap();
    *stalling.during.lock().await = Some(Box::pin(async move {
        upsert_ids(&other, vec![10]).await;
    }));
    stalling
        .armed
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let raced = upsert_ids(&repo, (100..2000).collect()).await;
    assert!(
        stalling.during.lock().await.is_none(),
        "the other commit ran"
    );
    assert_eq!(raced.change.blobs_new, direct.change.blobs_new, "{raced:?}");
    assert_eq!(raced.change.bytes_new, direct.change.bytes_new, "{raced:?}");
    assert!(raced.change.blobs_new >= 2, "{raced:?}");
}
