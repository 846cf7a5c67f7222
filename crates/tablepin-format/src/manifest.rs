//! The manifests a repository stores, and their encoding.
//!
//! Versions and table snapshots are blobs: zstd-compressed JSON, named by the
//! hash of those bytes. Ref entries, tombstones and audit records live in the
//! small mutable area beside the blobs and are plain JSON, so a person can read
//! them with `cat`. Field order is fixed by the struct definitions and maps are
//! `BTreeMap`s, so the same manifest always encodes to the same bytes.

use std::collections::BTreeMap;

use arrow_schema::Schema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::{ContentHash, FormatError, ObjectId, VersionId};

/// The newest format this crate writes and reads. 2: a deletion vector may
/// lie in a pack (`DeletionVector::offset`), which a reader of format 1
/// would take for a single bitmap.
pub const FORMAT_VERSION: u32 = 2;

/// The newest repository format (`meta/config.json`) this crate's users
/// write and read. 3: every blob of 1 MiB or more has its BLAKE3 outboard
/// stored beside it (`tablepin_store::ranged`), so a reader may read any
/// part of it by range and `verify` counts a missing one as damage. The
/// objects themselves are encoded as in format 2 ([`FORMAT_VERSION`]): a
/// build of format 2 reads every object, and refuses the repository only
/// because it would write large blobs without outboards. 4: an outboard's
/// size field may name its chunk group (format 4 writes 2 KiB groups, so
/// that a ranged read fetches a page's few bytes and only the hash pairs
/// on its path; `tablepin_store::ranged`), which a build of format 3 would
/// take for a damaged outboard. `tablepin upgrade` takes a repository of
/// format 1, 2 or 3 to 4.
pub const REPO_FORMAT: u32 = 4;

/// The first repository format whose outboards have 2 KiB chunk groups.
pub const SMALL_GROUPS_FROM_FORMAT: u32 = 4;

/// The first repository format that promises an outboard for every blob
/// of 1 MiB or more (what `verify` asks of a repository from it on).
pub const OUTBOARDS_FROM_FORMAT: u32 = 3;

/// Implemented by every encoded object: the format number it was written with.
pub trait Formatted {
    /// The `format` field.
    fn format(&self) -> u32;
}

macro_rules! formatted {
    ($($t:ty),*) => {$(
        impl Formatted for $t {
            fn format(&self) -> u32 { self.format }
        }
    )*};
}

/// Encodes a manifest blob: JSON, then zstd at level 3 (deterministic).
pub fn encode_manifest<T: Serialize>(
    what: &'static str,
    value: &T,
) -> Result<Vec<u8>, FormatError> {
    let json = serde_json::to_vec(value).map_err(|source| FormatError::Json { what, source })?;
    zstd::encode_all(json.as_slice(), 3).map_err(|source| FormatError::Zstd { what, source })
}

/// Decodes a manifest blob written by [`encode_manifest`], refusing one
/// written by a newer format.
pub fn decode_manifest<T: DeserializeOwned + Formatted>(
    what: &'static str,
    bytes: &[u8],
) -> Result<T, FormatError> {
    let json = zstd::decode_all(bytes).map_err(|source| FormatError::Zstd { what, source })?;
    let value: T =
        serde_json::from_slice(&json).map_err(|source| FormatError::Json { what, source })?;
    if value.format() > FORMAT_VERSION {
        return Err(FormatError::TooNew {
            what,
            found: value.format(),
            reads: FORMAT_VERSION,
        });
    }
    Ok(value)
}

/// Which of the four checks saw a commit's change to one table, against the
/// parent version.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checks {
    /// The row count moved.
    pub rows: bool,
    /// The schema (names, types, nullability) or key columns moved.
    pub schema: bool,
    /// The list of data files or deletion vectors moved.
    pub files: bool,
    /// The content hash (the multiset of rows) moved.
    pub content: bool,
}

impl Checks {
    /// The names of the checks that fired, in a fixed order.
    pub fn fired(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.rows {
            out.push("rows");
        }
        if self.schema {
            out.push("schema");
        }
        if self.files {
            out.push("files");
        }
        if self.content {
            out.push("content");
        }
        out
    }

    /// True when any check fired.
    pub fn any(&self) -> bool {
        self.rows || self.schema || self.files || self.content
    }

    /// The union of two sets of fired checks.
    pub fn or(self, other: Checks) -> Checks {
        Checks {
            rows: self.rows || other.rows,
            schema: self.schema || other.schema,
            files: self.files || other.files,
            content: self.content || other.content,
        }
    }
}

/// What one commit did to one table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableChange {
    /// Rows whose key (or, unkeyed, whose value) is new.
    pub rows_added: u64,
    /// Rows whose key existed with other values.
    pub rows_changed: u64,
    /// Rows removed.
    pub rows_deleted: u64,
    /// Bytes of blobs this commit stored that the repository did not hold.
    pub bytes_new: u64,
    /// Blobs this commit stored that the repository did not hold.
    pub blobs_new: u64,
    /// The checks that fired.
    pub checks: Checks,
}

/// A version: the one immutable record of a commit. Its id is the hash of
/// its encoding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Version {
    /// Format number.
    pub format: u32,
    /// Parent versions (none for a root, one for a commit).
    pub parents: Vec<VersionId>,
    /// Commit time, milliseconds since the Unix epoch (UTC).
    pub time_ms: i64,
    /// Who committed.
    pub author: String,
    /// The commit message.
    pub message: String,
    /// Each table's snapshot blob.
    pub tables: BTreeMap<String, ObjectId>,
    /// What this commit changed, by table (tables it did not touch are absent).
    pub changes: BTreeMap<String, TableChange>,
    /// For a version written by an erasure: the version it replaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<VersionId>,
}
formatted!(Version);

/// A deletion vector: the positions of one data file that a snapshot no
/// longer sees, as a serialized roaring bitmap. A commit that writes two or
/// more of them writes them as one blob, a pack, back to back (as Delta
/// keeps many deletion vectors in one file at offsets): one file to create
/// and read instead of one per bitmap. Format 2 and later.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeletionVector {
    /// The bitmap's blob, or the pack that holds it at `offset`.
    pub blob: ObjectId,
    /// Positions deleted.
    pub count: u64,
    /// Bytes of the bitmap.
    pub bytes: u64,
    /// Where the bitmap starts in its pack (absent: it is the whole blob).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
}

/// A bound of a single-column key, kept per file so that key look-ups read
/// only the files whose range holds the key.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(untagged)]
pub enum KeyBound {
    /// An integer key value.
    Int(i64),
    /// A text key value.
    Str(String),
}

/// One data file of a table snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    /// The Parquet blob.
    pub data: ObjectId,
    /// Rows in the file (including those the deletion vector hides).
    pub rows: u64,
    /// Bytes of the blob.
    pub bytes: u64,
    /// The sum of the row hashes of every row in the file.
    pub hash_sum: ContentHash,
    /// Positions this snapshot no longer sees.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletes: Option<DeletionVector>,
    /// Smallest key in the file (single-column integer or text keys).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_min: Option<KeyBound>,
    /// Largest key in the file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_max: Option<KeyBound>,
}

impl FileEntry {
    /// Rows this snapshot sees in the file.
    pub fn live_rows(&self) -> u64 {
        self.rows - self.deletes.as_ref().map_or(0, |d| d.count)
    }

    /// Bytes stored for the file in this snapshot: the data file and its
    /// deletion vector.
    pub fn stored_bytes(&self) -> u64 {
        self.bytes + self.deletes.as_ref().map_or(0, |d| d.bytes)
    }
}

/// A table at one version: schema, key, files, row count and content hash.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TableSnapshot {
    /// Format number.
    pub format: u32,
    /// The Arrow schema of the rows.
    pub schema: Schema,
    /// Key columns (empty: unkeyed, insertion order).
    pub key: Vec<String>,
    /// The data files, in read order for unkeyed tables.
    pub files: Vec<FileEntry>,
    /// Rows the table holds.
    pub rows: u64,
    /// The multiset hash of the rows' `rowhash-v1` hashes.
    pub content_hash: ContentHash,
}
formatted!(TableSnapshot);

/// Kinds of ref.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RefKind {
    /// A branch: moves with each commit.
    Branch,
    /// A tag: names one version.
    Tag,
}

impl RefKind {
    /// The folder under `refs/`.
    pub fn dir(&self) -> &'static str {
        match self {
            RefKind::Branch => "branches",
            RefKind::Tag => "tags",
        }
    }
}

/// One numbered entry of a ref's append-only log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefEntry {
    /// Format number.
    pub format: u32,
    /// The entry's number; entry N+1 is created put-if-absent.
    pub seq: u64,
    /// The version the ref names from this entry on (`None`: deleted).
    pub target: Option<VersionId>,
    /// When the entry was written (ms since the epoch).
    pub time_ms: i64,
    /// Who wrote it.
    pub author: String,
    /// Why: "commit", "tag", "erase: …", a tag message.
    pub message: String,
    /// The target version's tables (name to snapshot id), where the writer
    /// recorded them: the next commit on the ref then starts from the
    /// snapshot without reading the version record (one request fewer on
    /// a bucket). `None` in entries written without them (older ones,
    /// deletions, tags), and then the version record is read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tables: Option<BTreeMap<String, ObjectId>>,
    /// Set on an entry that keeps the ref where it is and asks other
    /// writers to wait (see [`RefHold`]). `None` in every other entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold: Option<RefHold>,
}
formatted!(RefEntry);

/// A ref held by one writer: an erasure that lost its ref race to commits
/// appends an entry naming the same version with a hold, then plans again
/// and moves the ref from that entry. Writers that find a held head wait
/// for the next entry, or for the hold to lapse, rather than take it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefHold {
    /// Who holds it: "erase".
    pub by: String,
    /// When the hold lapses (ms since the epoch) if the holder never
    /// writes the next entry (it crashed).
    pub until_ms: i64,
}

impl RefEntry {
    /// The hold on this entry still stands at `now_ms`. A hold counts for
    /// at most [`RefHold::MAX_MS`] after its entry was written, whatever
    /// its `until_ms`, so a skewed clock cannot hold a ref for long.
    pub fn held_at(&self, now_ms: i64) -> Option<&RefHold> {
        let h = self.hold.as_ref()?;
        let until = h.until_ms.min(self.time_ms.saturating_add(RefHold::MAX_MS));
        (now_ms < until).then_some(h)
    }
}

impl RefHold {
    /// The longest a hold counts.
    pub const MAX_MS: i64 = 120_000;
}

/// What is left of a version that retention expired.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tombstone {
    /// Format number.
    pub format: u32,
    /// The expired version.
    pub id: VersionId,
    /// Its parents (so `log` can walk past it).
    pub parents: Vec<VersionId>,
    /// Its commit time.
    pub time_ms: i64,
    /// Its message.
    pub message: String,
    /// Each table's row count and content hash.
    pub tables: BTreeMap<String, (u64, ContentHash)>,
    /// When it was expired.
    pub expired_ms: i64,
    /// Why (the policy).
    pub reason: String,
}
formatted!(Tombstone);

/// The keyed fingerprints of erased rows: enough to prove later that no
/// stored blob holds one of them, and nothing that reveals their values.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErasedFingerprint {
    /// A random salt drawn for this erasure (hex).
    pub salt: String,
    /// BLAKE3-keyed(salt, row hash), truncated to 16 bytes, hex, sorted.
    pub rows: Vec<String>,
}

/// How an erasure changed one version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditVersion {
    /// The version that held matching rows.
    pub old: VersionId,
    /// Its replacement (for the head: the new version without the rows).
    pub new: VersionId,
    /// Rows removed from each table.
    pub rows_removed: u64,
    /// Old and new content hash of the erased table.
    pub old_content_hash: ContentHash,
    /// New content hash.
    pub new_content_hash: ContentHash,
}

/// A ref an erasure moved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditMovedRef {
    /// "tag" or "branch".
    pub kind: RefKind,
    /// The ref's name.
    pub name: String,
    /// The version it named.
    pub old: VersionId,
    /// The version it names now.
    pub new: VersionId,
    /// Content hash of the table at the old version.
    pub old_content_hash: ContentHash,
    /// Content hash at the new version.
    pub new_content_hash: ContentHash,
}

/// The audit record of one erasure. It holds no personal data: counts,
/// hashes, the reason, and a hash of the predicate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditRecord {
    /// Format number.
    pub format: u32,
    /// A sequence number (records are `audit/00000001.json`, …).
    pub seq: u64,
    /// Started (ms since the epoch).
    pub time_ms: i64,
    /// Who ran it.
    pub author: String,
    /// The table.
    pub table: String,
    /// The reason given.
    pub reason: String,
    /// BLAKE3 of the predicate text, hex.
    pub predicate_hash: String,
    /// Every version rewritten.
    pub versions: Vec<AuditVersion>,
    /// Every ref moved.
    pub moved_refs: Vec<AuditMovedRef>,
    /// Blobs deleted because they held the rows.
    pub blobs_deleted: u64,
    /// Bytes written by the rewrite.
    pub bytes_written: u64,
    /// Fingerprints for `verify --erased`.
    pub fingerprint: ErasedFingerprint,
}
formatted!(AuditRecord);

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_schema::{DataType, Field};

    fn snapshot() -> TableSnapshot {
        TableSnapshot {
            format: FORMAT_VERSION,
            schema: Schema::new(vec![
                Field::new("id", DataType::Int64, false),
                Field::new("name", DataType::Utf8, true),
            ]),
            key: vec!["id".into()],
            files: vec![FileEntry {
                data: ObjectId::of(b"x"),
                rows: 10,
                bytes: 100,
                hash_sum: ContentHash::EMPTY,
                deletes: Some(DeletionVector {
                    blob: ObjectId::of(b"dv"),
                    count: 2,
                    bytes: 12,
                    offset: Some(30),
                }),
                key_min: Some(KeyBound::Int(1)),
                key_max: Some(KeyBound::Int(10)),
            }],
            rows: 8,
            content_hash: ContentHash::EMPTY,
        }
    }

    #[test]
    fn snapshot_roundtrips_and_is_deterministic() {
        let s = snapshot();
        let a = encode_manifest("table snapshot", &s).unwrap();
        let b = encode_manifest("table snapshot", &s.clone()).unwrap();
        assert_eq!(a, b);
        let back: TableSnapshot = decode_manifest("table snapshot", &a).unwrap();
        assert_eq!(back, s);
        assert_eq!(back.files[0].live_rows(), 8);
        // A bitmap that is a blob of its own has no offset, and its entry
        // reads as format 1 wrote it.
        let mut plain = s.clone();
        if let Some(d) = plain.files[0].deletes.as_mut() {
            d.offset = None;
        }
        let json = serde_json::to_string(&plain.files[0]).unwrap();
        assert!(!json.contains("offset"), "{json}");
        let a = encode_manifest("table snapshot", &plain).unwrap();
        let back: TableSnapshot = decode_manifest("table snapshot", &a).unwrap();
        assert_eq!(back, plain);
    }

    #[test]
    fn newer_format_is_refused() {
        let mut s = snapshot();
        s.format = FORMAT_VERSION + 1;
        let a = encode_manifest("table snapshot", &s).unwrap();
        let err = decode_manifest::<TableSnapshot>("table snapshot", &a).unwrap_err();
        assert!(err.to_string().contains("upgrade tablepin"), "{err}");
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(decode_manifest::<Version>("version", b"not zstd").is_err());
        let z = zstd::encode_all(&b"{\"format\":1}"[..], 3).unwrap();
        assert!(decode_manifest::<Version>("version", &z).is_err());
    }

    #[test]
    fn checks_fired_names() {
        let c = Checks {
            rows: false,
            schema: false,
            files: true,
            content: true,
        };
        assert_eq!(c.fired(), vec!["files", "content"]);
        assert!(c.any());
        assert!(!Checks::default().any());
    }
}
