//! Every path a repository uses, named in one place. The store writes the
//! first five kinds itself; the engine names its documents through the rest,
//! so that no other file formats a path of the repository.
//!
//! ```text
//! objects/ab/cdef…                 blobs, by BLAKE3 name       (store)
//! outboards/ab/cdef…               a blob's outboard, by its name (store)
//! refs/branches/main/00000042      a ref's numbered entries    (store)
//! heads/branches/main              a ref's head hint           (store)
//! probes/put-if-absent-…           the conditional-write probe (store)
//! meta/config.json                 the repository's config     (engine)
//! tombstones/<version>.json        why a version is gone       (engine)
//! audit/00000001.json              an erasure's audit record   (engine)
//! audit/pending/<hash>/00000001.json  one in progress          (engine)
//! locks/<kind>-<nonce>.json        leases                      (engine)
//! ```

use object_store::path::Path;
use tablepin_format::{ObjectId, RefKind};

/// The repository's config document.
pub const CONFIG: &str = "meta/config.json";
/// The folder of tombstones.
pub const TOMBSTONES: &str = "tombstones";
/// The folder of audit records (and, under `pending/`, erasures in progress).
pub const AUDIT: &str = "audit";
/// The folder of erasures in progress.
pub const AUDIT_PENDING: &str = "audit/pending";
/// The folder of leases.
pub const LOCKS: &str = "locks";

/// Where a blob lives.
pub fn blob(id: &ObjectId) -> Path {
    Path::from(format!("objects/{}", id.fanout_path()))
}

/// Where a blob's outboard lives (`ranged`): beside it, by its name.
pub fn outboard(id: &ObjectId) -> Path {
    Path::from(format!("outboards/{}", id.fanout_path()))
}

/// The folder of every ref of a kind.
pub fn refs(kind: RefKind) -> Path {
    Path::from(format!("refs/{}", kind.dir()))
}

/// The folder of one ref's entries.
pub fn ref_dir(kind: RefKind, name: &str) -> Path {
    Path::from(format!("refs/{}/{}", kind.dir(), name))
}

/// One entry of a ref's log.
pub fn ref_entry(kind: RefKind, name: &str, seq: u64) -> Path {
    Path::from(format!("refs/{}/{}/{:08}", kind.dir(), name, seq))
}

/// Where the hint of a ref's head is kept: outside `refs/`, so that a
/// ref's folder and its hint never share a name.
pub fn hint(kind: RefKind, name: &str) -> Path {
    Path::from(format!("heads/{}/{}", kind.dir(), name))
}

/// The object the conditional-write probe creates.
pub fn probe(nonce: &ObjectId) -> Path {
    Path::from(format!("probes/put-if-absent-{nonce}"))
}

/// The tombstone of an expired version (`id` as the version prints).
pub fn tombstone(id: impl std::fmt::Display) -> String {
    format!("{TOMBSTONES}/{id}.json")
}

/// The version a tombstone's path names, if it names one.
pub fn tombstone_id(path: &str) -> Option<&str> {
    path.strip_prefix(TOMBSTONES)?
        .strip_prefix('/')?
        .strip_suffix(".json")
}

/// The `seq`-th audit record.
pub fn audit_record(seq: u64) -> String {
    format!("{AUDIT}/{seq:08}.json")
}

/// The folder of an erasure in progress, by the hash of what it erases.
pub fn audit_pending(predicate_hash: &str) -> String {
    format!("{AUDIT_PENDING}/{predicate_hash}")
}

/// The `n`-th pending record of an erasure in progress.
pub fn audit_pending_entry(predicate_hash: &str, n: usize) -> String {
    format!("{AUDIT_PENDING}/{predicate_hash}/{n:08}.json")
}

/// The prefix of every lease of a kind (`commit`, `gc`, `erase`).
pub fn lock_prefix(kind: &str) -> String {
    format!("{LOCKS}/{kind}-")
}

/// A lease of a kind, told apart from others by its nonce.
pub fn lock(kind: &str, nonce: u64) -> String {
    format!("{LOCKS}/{kind}-{nonce:016x}.json")
}
