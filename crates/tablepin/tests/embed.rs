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
