//! The store's contract, run against memory and a local folder alike.

use super::*;
use tablepin_format::{VersionId, FORMAT_VERSION};

fn entry(seq: u64, target: Option<VersionId>) -> RefEntry {
    RefEntry {
        format: FORMAT_VERSION,
        seq,
        target,
        time_ms: 0,
        author: "t".into(),
        message: "m".into(),
    }
}

async fn conformance(store: &Store) {
    // Blobs: put-if-absent, dedup, verified reads.
    let a = store.put_blob(Bytes::from_static(b"hello")).await.unwrap();
    assert!(a.new);
    assert_eq!(a.id, ObjectId::of(b"hello"));
    let again = store.put_blob(Bytes::from_static(b"hello")).await.unwrap();
    assert!(!again.new, "the same bytes are stored once");
    assert_eq!(
        store.get_blob(&a.id).await.unwrap(),
        Bytes::from_static(b"hello")
    );
    assert!(store.has_blob(&a.id).await.unwrap());
    let listed = store.list_blobs().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].id, a.id);
    assert_eq!(listed[0].size, 5);
    let missing = ObjectId::of(b"nope");
    assert!(matches!(
        store.get_blob(&missing).await,
        Err(StoreError::NotFound { .. })
    ));

    // Refs: append-only, numbered, racing writers conflict.
    assert!(store
        .ref_head(RefKind::Branch, "main")
        .await
        .unwrap()
        .is_none());
    let v = VersionId(a.id);
    store
        .append_ref(RefKind::Branch, "main", &entry(1, Some(v)))
        .await
        .unwrap();
    store
        .append_ref(RefKind::Branch, "main", &entry(2, None))
        .await
        .unwrap();
    let conflict = store
        .append_ref(RefKind::Branch, "main", &entry(2, Some(v)))
        .await;
    assert!(
        matches!(conflict, Err(StoreError::RefConflict { seq: 2, .. })),
        "{conflict:?}"
    );
    let head = store
        .ref_head(RefKind::Branch, "main")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(head.seq, 2);
    assert_eq!(head.target, None);
    assert_eq!(
        store.ref_log(RefKind::Branch, "main").await.unwrap().len(),
        2
    );
    store
        .append_ref(RefKind::Tag, "t1", &entry(1, Some(v)))
        .await
        .unwrap();
    assert_eq!(
        store.ref_names(RefKind::Branch).await.unwrap(),
        vec!["main"]
    );
    assert_eq!(store.ref_names(RefKind::Tag).await.unwrap(), vec!["t1"]);

    // Documents.
    store
        .create_doc("audit/00000001.json", Bytes::from_static(b"{}"))
        .await
        .unwrap();
    assert!(matches!(
        store
            .create_doc("audit/00000001.json", Bytes::from_static(b"{}"))
            .await,
        Err(StoreError::Exists { .. })
    ));
    assert_eq!(
        store.list_docs("audit").await.unwrap(),
        vec!["audit/00000001.json"]
    );
    assert!(store.get_doc("audit/none").await.unwrap().is_none());

    store.delete_blob(&a.id).await.unwrap();
    assert!(!store.has_blob(&a.id).await.unwrap());
}

#[tokio::test]
async fn memory_store_keeps_the_contract() {
    conformance(&Store::open("memory://").unwrap()).await;
}

#[tokio::test]
async fn local_store_keeps_the_contract() {
    let dir = tempfile::tempdir().unwrap();
    conformance(&Store::open(dir.path().to_str().unwrap()).unwrap()).await;
    let url = format!("file://{}", dir.path().display());
    let s = Store::open(&url).unwrap();
    assert!(s.list_blobs().await.unwrap().is_empty());
}

/// Every file under `dir`, relative paths, sorted.
fn files_under(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else {
                out.push(p.strip_prefix(dir).unwrap().display().to_string());
            }
        }
    }
    out.sort();
    out
}

#[tokio::test]
async fn a_repeated_put_writes_nothing_whatever_the_size() {
    // A small blob is created straight away and a large one looked for
    // first: either way the second put of the same bytes is not new, keeps
    // the stored file as it was, and leaves no staging file behind.
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().to_str().unwrap()).unwrap();
    let small = Bytes::from(vec![7u8; 100]);
    let large = Bytes::from(
        (0..PROBE_FIRST_BYTES + 1)
            .map(|i| i as u8)
            .collect::<Vec<_>>(),
    );
    for bytes in [small, large] {
        let first = store.put_blob(bytes.clone()).await.unwrap();
        assert!(first.new);
        let path = dir.path().join("objects").join(first.id.fanout_path());
        let before = std::fs::metadata(&path).unwrap().modified().unwrap();
        let listed = files_under(dir.path());
        let writes = store.writes();
        let again = store.put_blob(bytes.clone()).await.unwrap();
        assert!(!again.new, "{} bytes stored twice", bytes.len());
        assert_eq!(again.bytes, bytes.len() as u64);
        assert_eq!(
            std::fs::metadata(&path).unwrap().modified().unwrap(),
            before
        );
        assert_eq!(files_under(dir.path()), listed);
        // Only a small blob's second put tries a write (and finds the blob).
        let tried = u64::from(bytes.len() < PROBE_FIRST_BYTES);
        assert_eq!(store.writes(), writes + tried);
        assert_eq!(store.get_blob(&first.id).await.unwrap(), bytes);
    }
}

#[tokio::test]
async fn damaged_blob_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().to_str().unwrap()).unwrap();
    let a = store
        .put_blob(Bytes::from_static(b"precious bytes"))
        .await
        .unwrap();
    let path = dir.path().join("objects").join(a.id.fanout_path());
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[3] ^= 1;
    std::fs::write(&path, bytes).unwrap();
    let err = store.get_blob(&a.id).await.unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { id, .. } if id == a.id));
    assert!(err.to_string().contains(&a.id.to_string()));

    // Several at once: the sound ones read back in order, and the damaged
    // one among them is named.
    let mut ids = Vec::new();
    for i in 0..5u8 {
        ids.push(store.put_blob(Bytes::from(vec![i; 1000])).await.unwrap().id);
    }
    let got = store.get_blobs(&ids).await.unwrap();
    assert_eq!(
        got,
        (0..5u8)
            .map(|i| Bytes::from(vec![i; 1000]))
            .collect::<Vec<_>>()
    );
    ids.insert(2, a.id);
    let err = store.get_blobs(&ids).await.unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { id, .. } if id == a.id));
}

#[test]
fn unsupported_scheme_is_a_clear_error() {
    let err = Store::open("s3://bucket/x").unwrap_err().to_string();
    assert!(err.contains("'s3'"), "{err}");
    let err = Store::open("/no/such/folder/anywhere")
        .unwrap_err()
        .to_string();
    assert!(err.contains("no such folder"), "{err}");
}

#[test]
fn a_local_read_gives_the_range_asked_for_and_refuses_a_short_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    let bytes: Vec<u8> = (0..=255u8).cycle().take(70_000).collect();
    std::fs::write(&path, &bytes).unwrap();
    let open = || std::fs::File::open(&path).unwrap();
    assert_eq!(read_file_range(open(), 0..70_000).unwrap(), bytes);
    assert_eq!(
        read_file_range(open(), 1_000..65_537).unwrap(),
        bytes[1_000..65_537]
    );
    assert!(read_file_range(open(), 5..5).unwrap().is_empty());
    // The file shrank after object_store measured it.
    let e = read_file_range(open(), 60_000..80_000).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof);
    assert!(e.to_string().contains("after 10000 of 20000 bytes"), "{e}");
}

#[tokio::test]
async fn a_local_read_works_outside_a_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().to_string_lossy()).unwrap();
    let b = Bytes::from(vec![7u8; 3 * 1024 * 1024]);
    let id = store.put_blob(b.clone()).await.unwrap().id;
    // map_blobs reads inside its worker threads, where no runtime runs.
    let got = std::thread::spawn(move || futures::executor::block_on(store.get_blob(&id)))
        .join()
        .unwrap()
        .unwrap();
    assert_eq!(got, b);
}
