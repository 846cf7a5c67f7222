//! Erasure: remove the rows matching a predicate from the head AND from
//! every kept version, physically, with an audit record that holds no
//! personal data.
//!
//! [`Repo::erase_plan`] finds every data file, in every stored version, that
//! holds a matching row (deleted positions count: their bytes are still
//! there), and plans a rewrite of each without those rows. A file shared by
//! many versions is rewritten once and shared again; each version's deletion
//! vector is renumbered onto the rewritten file. Every version that held the
//! rows, and every descendant of one (its parent id changes, as in
//! `git filter-branch`), gets a replacement version with the same time,
//! author and message and a `replaces` link. Rewrites are deterministic, so
//! planning twice gives the same blobs and the same version ids.
//!
//! [`Repo::erase_apply`] then: (1) writes the new blobs; (2) writes a
//! pending record naming the old blobs to delete; (3) moves each branch and
//! tag onto its replacement; (4) deletes the old blobs at once, whatever
//! the grace period; (5) writes the audit record and drops the pending one.
//! Killed at any point, the repository passes `verify`, each ref names its
//! old version (still whole) or its replacement, and `erase` with the same
//! predicate finishes the job (the pending record survives).
//!
//! The audit record keeps, to let `verify --erased` prove later that no
//! blob holds an erased row, a keyed fingerprint of each erased row: BLAKE3
//! keyed with a random per-erasure salt over the row's `rowhash-v1`,
//! truncated to 128 bits. It cannot be turned back into the row; confirming
//! a guess needs the exact whole row (every column, to the bit), which is
//! the data that was erased. We chose this over encrypting the predicate
//! under a user-held key because the proof then needs no secret and checks
//! rows, not a predicate that later schema changes could reinterpret.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use arrow::array::RecordBatch;
use arrow::compute::{concat_batches, filter_record_batch};
use arrow::datatypes::SchemaRef;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tablepin_format::{
    encode_manifest, AuditMovedRef, AuditRecord, AuditVersion, ContentHash, ErasedFingerprint,
    FileEntry, ObjectId, RefEntry, RefHold, RefKind, TableSnapshot, Version, VersionId,
    FORMAT_VERSION,
};
use tablepin_rowhash::hash_rows;

use super::lease::LeaseKind;
use super::{list_or_none, now_ms, Progress, Repo};
use crate::error::{Error, Result};
use crate::table::datafile::{read_data_file, Select};
use crate::table::plan::new_data_file;
use crate::table::predicate::Predicate;
use crate::table::types::conform;
use crate::table::{dv, keys, schema_of};

/// How long an erasure keeps planning again while commits move the refs
/// it must move.
const ERASE_RETRY_FOR: std::time::Duration = std::time::Duration::from_secs(60);

/// How many times an erasure tries to hold a branch that commits keep
/// moving before it plans again without that hold.
const HOLD_TRIES: u32 = 20;

/// Options of an erasure.
#[derive(Debug, Clone, Default)]
pub struct EraseOptions {
    /// The table.
    pub table: String,
    /// The SQL predicate.
    pub predicate: String,
    /// Why (required).
    pub reason: String,
}

/// A data file the erasure rewrites.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedFile {
    /// The file now.
    pub blob: ObjectId,
    /// Rows it holds.
    pub rows: u64,
    /// Rows that match (and go).
    pub rows_removed: u64,
    /// Its rewrite (none: no row is left).
    pub rewritten: Option<ObjectId>,
    /// Bytes of the rewrite.
    pub bytes: u64,
}

/// A version the erasure replaces.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedVersion {
    /// The version.
    pub old: VersionId,
    /// Its replacement.
    pub new: VersionId,
    /// Matching rows it shows (0 for a descendant replaced for its parent).
    pub rows_removed: u64,
    /// Content hash of the table before and after.
    pub old_content_hash: ContentHash,
    /// After.
    pub new_content_hash: ContentHash,
    /// Refs that name it.
    pub refs: Vec<String>,
}

/// What an erasure will do. It holds no personal data: not the predicate
/// (only its BLAKE3), not the rows. Its JSON is the whole plan: every new
/// blob is named by its id, and since rewrites are deterministic, planning
/// again with the same predicate on the same repository gives the same
/// ids; [`Repo::erase_apply_saved`] applies a plan read back from its JSON
/// when that holds, and refuses it otherwise.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErasePlan {
    /// The table.
    pub table: String,
    /// The reason.
    pub reason: String,
    /// BLAKE3 of the predicate text.
    pub predicate_hash: String,
    /// Versions replaced, parents first.
    pub versions: Vec<PlannedVersion>,
    /// Files rewritten.
    pub files: Vec<PlannedFile>,
    /// Distinct matching rows stored.
    pub rows_removed: u64,
    /// Bytes of new blobs to write.
    pub bytes_to_write: u64,
    /// Tags that move: name, old, new.
    pub tags: Vec<(String, VersionId, VersionId)>,
    /// An earlier run with this predicate was interrupted; applying
    /// finishes it.
    pub resumes: bool,
    /// Versions holding files whose schema lacks a column the predicate
    /// names (written before the column was added, or after it was
    /// dropped): no row of those files can match, and none is removed.
    #[serde(default)]
    pub not_applied: Vec<VersionId>,
    /// The bytes the plan names, kept from planning to apply in the same
    /// process; a plan read back from JSON has none and is planned again.
    #[serde(skip)]
    work: Work,
}

#[derive(Debug, Clone, Default)]
struct Work {
    /// What was asked, to plan again when the repository moved before
    /// the plan was applied.
    options: EraseOptions,
    blobs: Vec<Bytes>,
    fingerprints: Vec<[u8; 32]>,
    moves: Vec<RefMove>,
    delete: Vec<ObjectId>,
}

impl ErasePlan {
    /// True when there is nothing to do: no stored row matches and no
    /// interrupted run to finish.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty() && self.versions.is_empty() && !self.resumes
    }

    /// What differs between two plans in what they do (the versions
    /// replaced and their replacements, the files rewritten and their
    /// rewrites, the tags moved, the rows and bytes); `None` when they do
    /// the same.
    pub fn differs_from(&self, other: &ErasePlan) -> Option<String> {
        let pairs = [
            ("table", self.table == other.table),
            ("predicate", self.predicate_hash == other.predicate_hash),
            ("versions replaced", self.versions == other.versions),
            ("files rewritten", self.files == other.files),
            ("tags moved", self.tags == other.tags),
            ("rows removed", self.rows_removed == other.rows_removed),
            (
                "bytes to write",
                self.bytes_to_write == other.bytes_to_write,
            ),
        ];
        let off: Vec<&str> = pairs
            .iter()
            .filter(|(_, same)| !same)
            .map(|(w, _)| *w)
            .collect();
        (!off.is_empty()).then(|| format!("its {} differ", off.join(", ")))
    }
}

/// What an erasure did.
#[derive(Debug, Clone, Serialize)]
pub struct EraseReport {
    /// The audit record written.
    pub audit: AuditRecord,
    /// Seconds taken by apply.
    pub seconds: f64,
}

/// What `verify --erased` found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ErasedCheck {
    /// Erasure records checked.
    pub records: u64,
    /// Data files scanned.
    pub files: u64,
    /// Rows scanned.
    pub rows: u64,
    /// Data files still holding an erased row, with how many.
    pub holders: Vec<(ObjectId, u64)>,
    /// Copies in this machine's blob cache of blobs the repository no
    /// longer holds (deleted by an erasure or a gc run elsewhere): removed
    /// by this check, so that no erased row survives in the cache either.
    pub cache_removed: u64,
}

impl ErasedCheck {
    /// True when no blob holds an erased row.
    pub fn ok(&self) -> bool {
        self.holders.is_empty()
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Pending {
    table: String,
    reason: String,
    predicate_hash: String,
    salt: String,
    started_ms: i64,
    fingerprints: Vec<String>,
    delete: Vec<ObjectId>,
    versions: Vec<AuditVersion>,
    moved_refs: Vec<AuditMovedRef>,
    bytes_written: u64,
}

impl Pending {
    /// A new erasure's record, with a fresh salt.
    fn new(plan: &ErasePlan) -> Self {
        Self {
            table: plan.table.clone(),
            reason: plan.reason.clone(),
            predicate_hash: plan.predicate_hash.clone(),
            salt: hex::encode(rand_salt()),
            started_ms: now_ms(),
            ..Default::default()
        }
    }

    /// Adds what a plan (of this erasure's predicate) does: its rows'
    /// fingerprints, the blobs to delete, the versions replaced and the
    /// refs moved.
    fn add(&mut self, plan: &ErasePlan) {
        let key = fingerprint_key(&self.salt);
        let mut fps: BTreeSet<String> = self.fingerprints.iter().cloned().collect();
        fps.extend(plan.work.fingerprints.iter().map(|h| fingerprint(&key, h)));
        self.fingerprints = fps.into_iter().collect();
        let mut del: BTreeSet<ObjectId> = self.delete.iter().copied().collect();
        del.extend(plan.work.delete.iter().copied());
        self.delete = del.into_iter().collect();
        for v in &plan.versions {
            if !self.versions.iter().any(|a| a.old == v.old) {
                self.versions.push(AuditVersion {
                    old: v.old,
                    new: v.new,
                    rows_removed: v.rows_removed,
                    old_content_hash: v.old_content_hash,
                    new_content_hash: v.new_content_hash,
                });
            }
        }
        let content_of: HashMap<VersionId, ContentHash> = (plan.versions.iter())
            .flat_map(|v| [(v.old, v.old_content_hash), (v.new, v.new_content_hash)])
            .collect();
        for (kind, name, old, new) in &plan.work.moves {
            self.moved_refs.push(AuditMovedRef {
                kind: *kind,
                name: name.clone(),
                old: *old,
                new: *new,
                old_content_hash: content_of.get(old).copied().unwrap_or_default(),
                new_content_hash: content_of.get(new).copied().unwrap_or_default(),
            });
        }
    }
}

fn fingerprint_key(salt: &str) -> [u8; 32] {
    blake3::derive_key("tablepin erase fingerprint v1", salt.as_bytes())
}

fn fingerprint(key: &[u8; 32], row_hash: &[u8; 32]) -> String {
    hex::encode(&blake3::keyed_hash(key, row_hash).as_bytes()[..16])
}

/// A file's rows under its own schema.
fn own_rows(blob: ObjectId, bytes: Bytes) -> Result<(SchemaRef, Vec<RecordBatch>)> {
    let builder =
        parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(bytes.clone())
            .map_err(|e| Error::BadBlob {
                blob,
                what: "Parquet data file",
                message: e.to_string(),
            })?;
    let schema = builder.schema().clone();
    Ok((
        schema.clone(),
        read_data_file(blob, bytes, &schema, Select::All)?,
    ))
}

/// What [`Repo::match_files`] found: the rewrites by file, the planned
/// files, the blobs to write, and the versions the predicate could not
/// apply to.
type Matched = (
    BTreeMap<ObjectId, FileRewrite>,
    Vec<PlannedFile>,
    Vec<Bytes>,
    Vec<VersionId>,
);

/// An erasure's predicate compiled for each file schema met; `None` for a
/// schema that lacks a column it names (no row there can match).
struct BySchema<'a> {
    table: &'a str,
    text: &'a str,
    compiled: Vec<(SchemaRef, Option<Predicate>)>,
}

impl BySchema<'_> {
    fn for_schema(&mut self, schema: &SchemaRef) -> Result<Option<&Predicate>> {
        let at = match self
            .compiled
            .iter()
            .position(|(s, _)| s.fields() == schema.fields())
        {
            Some(at) => at,
            None => {
                let p = Predicate::compile_if_applies(self.table, self.text, schema)?;
                self.compiled.push((schema.clone(), p));
                self.compiled.len() - 1
            }
        };
        Ok(self.compiled[at].1.as_ref())
    }

    fn applies_anywhere(&self) -> bool {
        self.compiled.iter().any(|(_, p)| p.is_some())
    }
}

struct FileRewrite {
    matched: Vec<u32>,
    /// Matching rows, under the file's own schema.
    matched_rows: RecordBatch,
    new: Option<FileEntry>,
}

/// What an erasure looks at ([`Repo::erasure_scope`]).
struct Stored {
    /// The table's schema at a head.
    schema: SchemaRef,
    /// Every version the refs reach.
    versions: BTreeMap<VersionId, Version>,
    /// Their snapshots of the table (versions without it have none).
    snaps: BTreeMap<VersionId, TableSnapshot>,
    /// The refs naming each version.
    ref_names: HashMap<VersionId, Vec<(RefKind, String)>>,
}

/// A ref move of an erasure: kind, name, old version, new version.
type RefMove = (RefKind, String, VersionId, VersionId);

/// The ref moves that replacing versions asks for (every ref naming a
/// replaced version moves to its replacement), in name order, and the
/// tags among them.
fn ref_moves(
    ref_names: &HashMap<VersionId, Vec<(RefKind, String)>>,
    replaced: &HashMap<VersionId, VersionId>,
) -> (Vec<RefMove>, Vec<(String, VersionId, VersionId)>) {
    let mut moves = Vec::new();
    let mut tag_moves = Vec::new();
    for (old, refs) in ref_names {
        if let Some(new) = replaced.get(old) {
            for (k, n) in refs {
                moves.push((*k, n.clone(), *old, *new));
                if *k == RefKind::Tag {
                    tag_moves.push((n.clone(), *old, *new));
                }
            }
        }
    }
    moves.sort_by(|a, b| (a.1.clone(), a.0.dir()).cmp(&(b.1.clone(), b.0.dir())));
    tag_moves.sort();
    (moves, tag_moves)
}

/// Old blobs an erasure deletes: the files that held rows, and the
/// replaced versions' records and snapshots that name them.
fn blobs_to_delete(
    table: &str,
    rewrites: &BTreeMap<ObjectId, FileRewrite>,
    planned: &[PlannedVersion],
    versions: &BTreeMap<VersionId, Version>,
) -> Vec<ObjectId> {
    let mut delete: BTreeSet<ObjectId> = rewrites.keys().copied().collect();
    for p in planned {
        delete.insert(p.old.0);
        if let Some(s) = versions.get(&p.old).and_then(|v| v.tables.get(table)) {
            delete.insert(*s);
        }
    }
    delete.into_iter().collect()
}

impl Repo {
    /// The newest pending record of an interrupted erasure with this
    /// predicate, and the paths of all its entries. Pending records are
    /// append-only numbered entries, so a crash never loses one.
    async fn pending(&self, predicate_hash: &str) -> Result<(Option<Pending>, Vec<String>)> {
        let paths = self
            .store()
            .list_docs(&format!("audit/pending/{predicate_hash}"))
            .await?;
        let Some(last) = paths.last() else {
            return Ok((None, paths));
        };
        let Some(b) = self.store().get_doc(last).await? else {
            return Ok((None, paths));
        };
        let p = serde_json::from_slice(&b).map_err(|source| {
            Error::Store(tablepin_store::StoreError::Decode {
                path: last.clone(),
                source,
            })
        })?;
        Ok((Some(p), paths))
    }

    /// Plans an erasure. Changes nothing.
    pub async fn erase_plan(&self, opts: &EraseOptions) -> Result<ErasePlan> {
        if opts.reason.trim().is_empty() {
            return Err(Error::NoReason);
        }
        let lease = self.take_lease(LeaseKind::Erase).await?;
        let out = self.plan_erasure(opts).await;
        lease.release(self).await;
        out
    }

    async fn plan_erasure(&self, opts: &EraseOptions) -> Result<ErasePlan> {
        let table = opts.table.as_str();
        let predicate_hash = blake3::hash(opts.predicate.as_bytes()).to_hex().to_string();
        let stored = self.erasure_scope(table).await?;
        // Each file is matched in its own schema: a column may have
        // changed type, or be gone at the head and held by old versions.
        let at_head = Predicate::compile_if_applies(table, &opts.predicate, &stored.schema)?;
        let mut preds = BySchema {
            table,
            text: &opts.predicate,
            compiled: Vec::new(),
        };
        let matched = self.match_files(table, &stored.snaps, &mut preds).await?;
        let (rewrites, files, mut blobs, not_applied) = matched;
        if at_head.is_none() && !preds.applies_anywhere() {
            // It names a column no version holds: the head's error says so.
            Predicate::compile(table, &opts.predicate, &stored.schema)?;
        }
        let mut fingerprints = Vec::new();
        for r in rewrites.values() {
            fingerprints.extend(hash_rows(&r.matched_rows)?);
        }
        let (replaced, planned) = self
            .replace_versions(table, &stored, &rewrites, &mut blobs)
            .await?;
        let (moves, tag_moves) = ref_moves(&stored.ref_names, &replaced);
        let delete = blobs_to_delete(table, &rewrites, &planned, &stored.versions);
        let bytes_to_write = blobs.iter().map(|b| b.len() as u64).sum();
        let resumes = self.pending(&predicate_hash).await?.0.is_some();
        Ok(ErasePlan {
            table: table.to_string(),
            reason: opts.reason.clone(),
            predicate_hash,
            rows_removed: rewrites.values().map(|r| r.matched.len() as u64).sum(),
            versions: planned,
            files,
            bytes_to_write,
            tags: tag_moves,
            resumes,
            not_applied,
            work: Work {
                options: opts.clone(),
                blobs,
                fingerprints,
                moves,
                delete,
            },
        })
    }

    /// What an erasure of `table` looks at: the table's schema at a head
    /// that has it, every version the refs reach with its snapshot of the
    /// table, and the refs naming each version.
    async fn erasure_scope(&self, table: &str) -> Result<Stored> {
        let branches = self.refs(RefKind::Branch).await?;
        let tags = self.refs(RefKind::Tag).await?;
        let mut head_schema = None;
        let mut tables = BTreeSet::new();
        for b in &branches {
            let v = self.version(&b.target).await?;
            tables.extend(v.tables.keys().cloned());
            if v.tables.contains_key(table) {
                head_schema = Some(schema_of(&self.snapshot_of(&b.target, &v, table).await?));
                break;
            }
        }
        let Some(schema) = head_schema else {
            return Err(Error::NoTableAtHeads {
                table: table.to_string(),
                available: list_or_none(tables.iter().map(String::as_str)),
            });
        };
        // Versions the refs reach now. (Versions only an old ref-log entry
        // names are garbage for gc; a half-finished erasure may have deleted
        // part of them, and its pending record lists the rest.) Stored
        // means listed: a version another machine's gc expired may still
        // read from this one's cache, and must not be replaced by one that
        // names its deleted files.
        let listed = self.listed_blobs().await?;
        let roots = branches.iter().chain(&tags).map(|r| r.target).collect();
        let reachable = self.stored_ancestry(roots, Some(&listed)).await?;
        let mut versions: BTreeMap<VersionId, Version> = BTreeMap::new();
        let mut snaps: BTreeMap<VersionId, TableSnapshot> = BTreeMap::new();
        for id in &reachable {
            let v = self.version(id).await?;
            if v.tables.contains_key(table) {
                snaps.insert(*id, self.snapshot_of(id, &v, table).await?);
            }
            versions.insert(*id, v);
        }
        let mut ref_names: HashMap<VersionId, Vec<(RefKind, String)>> = HashMap::new();
        for (kind, refs) in [(RefKind::Branch, &branches), (RefKind::Tag, &tags)] {
            for r in refs {
                let names = ref_names.entry(r.target).or_default();
                names.push((kind, r.name.clone()));
            }
        }
        Ok(Stored {
            schema,
            versions,
            snaps,
            ref_names,
        })
    }

    /// Every data file of the snapshots once: the rows the predicate
    /// matches, and the file's rewrite without them (its bytes pushed to
    /// the blobs to write).
    async fn match_files(
        &self,
        table: &str,
        snaps: &BTreeMap<VersionId, TableSnapshot>,
        preds: &mut BySchema<'_>,
    ) -> Result<Matched> {
        let mut rewrites: BTreeMap<ObjectId, FileRewrite> = BTreeMap::new();
        let mut seen: HashMap<ObjectId, bool> = HashMap::new();
        let mut blobs: Vec<Bytes> = Vec::new();
        let mut files = Vec::new();
        let mut not_applied = Vec::new();
        for (vid, s) in snaps {
            for f in &s.files {
                if let Some(applies) = seen.get(&f.data) {
                    if !applies && not_applied.last() != Some(vid) {
                        not_applied.push(*vid);
                    }
                    continue;
                }
                // Lost or damaged: that version's damage (exit 5).
                let bytes = self
                    .store()
                    .get_blob(&f.data)
                    .await
                    .map_err(|e| super::named(e.into(), Some(*vid), table))?;
                let (own, batches) = own_rows(f.data, bytes)?;
                let Some(pred) = preds.for_schema(&own)? else {
                    seen.insert(f.data, false);
                    if not_applied.last() != Some(vid) {
                        not_applied.push(*vid);
                    }
                    continue;
                };
                seen.insert(f.data, true);
                let all =
                    concat_batches(&own, &batches).map_err(Error::arrow("reading a data file"))?;
                let mask = pred.eval(&all)?;
                if mask.true_count() == 0 {
                    continue;
                }
                let matched: Vec<u32> = (0..mask.len())
                    .filter(|i| mask.value(*i))
                    .map(|i| i as u32)
                    .collect();
                let keep = arrow::compute::not(&mask).map_err(Error::arrow("erasing rows"))?;
                let kept =
                    filter_record_batch(&all, &keep).map_err(Error::arrow("erasing rows"))?;
                let matched_rows =
                    filter_record_batch(&all, &mask).map_err(Error::arrow("erasing rows"))?;
                let new = if kept.num_rows() == 0 {
                    None
                } else {
                    let key_idx = keys::key_indices(table, &own, &s.key).unwrap_or_default();
                    // The hash sum depends on the snapshot's schema: set
                    // by `rewrite_snapshot`.
                    let (entry, nb) =
                        new_data_file(&kept, ContentHash::EMPTY, &key_idx, &self.config().write)?;
                    blobs.push(nb);
                    Some(entry)
                };
                files.push(PlannedFile {
                    blob: f.data,
                    rows: f.rows,
                    rows_removed: matched.len() as u64,
                    rewritten: new.as_ref().map(|n| n.data),
                    bytes: new.as_ref().map_or(0, |n| n.bytes),
                });
                let rewrite = FileRewrite {
                    matched,
                    matched_rows,
                    new,
                };
                rewrites.insert(f.data, rewrite);
            }
        }
        Ok((rewrites, files, blobs, not_applied))
    }

    /// Replacement versions, parents first: for every version whose
    /// snapshot holds a rewritten file, or whose parent is replaced (its
    /// records and snapshots pushed to the blobs to write). Returns the
    /// replacements by old version, and the plan of each.
    async fn replace_versions(
        &self,
        table: &str,
        stored: &Stored,
        rewrites: &BTreeMap<ObjectId, FileRewrite>,
        blobs: &mut Vec<Bytes>,
    ) -> Result<(HashMap<VersionId, VersionId>, Vec<PlannedVersion>)> {
        let mut replaced: HashMap<VersionId, VersionId> = HashMap::new();
        let mut planned = Vec::new();
        let mut hash_cache: HashMap<(ObjectId, String), Vec<[u8; 32]>> = HashMap::new();
        let mut dv_known = dv::Known::new();
        for id in topo_order(&stored.versions) {
            let Some(v) = stored.versions.get(&id) else {
                continue;
            };
            let new_parents: Vec<VersionId> = (v.parents.iter())
                .map(|p| *replaced.get(p).unwrap_or(p))
                .collect();
            let snap = stored.snaps.get(&id);
            let touches =
                snap.is_some_and(|s| s.files.iter().any(|f| rewrites.contains_key(&f.data)));
            if !touches && new_parents == v.parents {
                continue;
            }
            let mut nv = v.clone();
            nv.parents = new_parents;
            nv.replaces = Some(id);
            let (mut old_hash, mut new_hash, mut removed) =
                (ContentHash::EMPTY, ContentHash::EMPTY, 0u64);
            if let Some(s) = snap {
                old_hash = s.content_hash;
                let (ns, n_removed, dvs) = self
                    .rewrite_snapshot(s, rewrites, &mut hash_cache, &mut dv_known)
                    .await?;
                new_hash = ns.content_hash;
                removed = n_removed;
                blobs.extend(dvs);
                let sb = Bytes::from(encode_manifest("table snapshot", &ns)?);
                nv.tables.insert(table.to_string(), ObjectId::of(&sb));
                blobs.push(sb);
            }
            let vb = Bytes::from(encode_manifest("version", &nv)?);
            let nid = VersionId(ObjectId::of(&vb));
            blobs.push(vb);
            replaced.insert(id, nid);
            let refs = (stored.ref_names.get(&id))
                .map(|r| r.iter().map(|(k, n)| format!("{}/{n}", k.dir())).collect())
                .unwrap_or_default();
            planned.push(PlannedVersion {
                old: id,
                new: nid,
                rows_removed: removed,
                old_content_hash: old_hash,
                new_content_hash: new_hash,
                refs,
            });
        }
        Ok((replaced, planned))
    }

    /// A snapshot with every rewritten file swapped in and its deletion
    /// vector renumbered; returns it, the matching live rows it lost, and
    /// the new deletion-vector blobs.
    async fn rewrite_snapshot(
        &self,
        s: &TableSnapshot,
        rewrites: &BTreeMap<ObjectId, FileRewrite>,
        cache: &mut HashMap<(ObjectId, String), Vec<[u8; 32]>>,
        dv_known: &mut dv::Known,
    ) -> Result<(TableSnapshot, u64, Vec<Bytes>)> {
        let schema = schema_of(s);
        let skey = serde_json::to_string(&s.schema).unwrap_or_default();
        let mut out = s.clone();
        out.files.clear();
        let mut content = s.content_hash;
        let mut removed = 0u64;
        let mut dv_blobs = Vec::new();
        for f in &s.files {
            let Some(rw) = rewrites.get(&f.data) else {
                out.files.push(f.clone());
                continue;
            };
            let key = (f.data, skey.clone());
            if !cache.contains_key(&key) {
                let aligned = conform(&rw.matched_rows, &schema).map_err(Error::Query)?;
                cache.insert(key.clone(), hash_rows(&aligned)?);
            }
            let hashes = cache.get(&key).map(Vec::as_slice).unwrap_or_default();
            let dv = dv::load(self.store(), f, dv_known).await?;
            let mut sum_all = ContentHash::EMPTY;
            for (h, p) in hashes.iter().zip(&rw.matched) {
                sum_all.add(h);
                if !dv.as_ref().is_some_and(|d| d.contains(*p)) {
                    content.sub(h);
                    removed += 1;
                }
            }
            let Some(new) = &rw.new else { continue };
            let mut nf = new.clone();
            let mut hs = f.hash_sum;
            hs.unmerge(&sum_all);
            nf.hash_sum = hs;
            if let Some(dv) = dv {
                let mut renumbered = roaring::RoaringBitmap::new();
                for p in dv.iter() {
                    if rw.matched.binary_search(&p).is_err() {
                        let below = rw.matched.partition_point(|m| *m < p) as u32;
                        renumbered.insert(p - below);
                    }
                }
                if renumbered.len() >= nf.rows {
                    continue;
                }
                if !renumbered.is_empty() {
                    let (d, b) = dv::new(&renumbered)?;
                    nf.deletes = Some(d);
                    dv_blobs.push(b);
                }
            }
            out.files.push(nf);
        }
        out.rows = out.files.iter().map(FileEntry::live_rows).sum();
        out.content_hash = content;
        let dv_blobs = dv::pack(&mut out.files, dv_blobs);
        if out
            .files
            .iter()
            .any(|f| f.deletes.as_ref().is_some_and(|d| d.offset.is_some()))
        {
            out.format = out.format.max(FORMAT_VERSION);
        }
        Ok((out, removed, dv_blobs))
    }

    /// Applies an erasure plan (see the module docs for the order),
    /// holding the gc/erasure lease. When the repository moved since the
    /// plan (a commit moved a branch, a gc expired a version it replaces),
    /// it plans again and applies that, retrying with a random, growing
    /// pause while commits keep moving the refs, for up to a minute.
    pub async fn erase_apply(&self, plan: ErasePlan) -> Result<EraseReport> {
        let lease = self.take_lease(LeaseKind::Erase).await?;
        let out = self.apply_erasure_leased(plan, false).await;
        lease.release(self).await;
        Ok(out?.1)
    }

    /// Plans and applies an erasure under one hold of the gc/erasure
    /// lease, so that nothing deletes in between: what
    /// [`Repo::erase_plan`] then [`Repo::erase_apply`] do, without the
    /// second checking and reading again what the first read. Returns the
    /// plan applied (planned again if commits moved the refs meanwhile)
    /// and the report, or only the plan when it is empty (no stored row
    /// matches: nothing is written).
    pub async fn erase(&self, opts: &EraseOptions) -> Result<(ErasePlan, Option<EraseReport>)> {
        if opts.reason.trim().is_empty() {
            return Err(Error::NoReason);
        }
        let lease = self.take_lease(LeaseKind::Erase).await?;
        let out = async {
            let plan = self.plan_erasure(opts).await?;
            if plan.is_empty() {
                return Ok((plan, None));
            }
            let (plan, report) = self.apply_erasure_leased(plan, true).await?;
            Ok((plan, Some(report)))
        }
        .await;
        lease.release(self).await;
        out
    }

    /// Applies a plan read back from its JSON (made by [`Repo::erase_plan`],
    /// maybe in another process, and reviewed): plans again with
    /// `predicate`, which the plan does not hold, and applies that only if
    /// it does exactly what the saved plan says. Otherwise nothing changes:
    /// [`Error::PlanPredicate`] for another predicate,
    /// [`Error::PlanOutdated`] when the repository moved since.
    pub async fn erase_apply_saved(
        &self,
        saved: &ErasePlan,
        predicate: &str,
    ) -> Result<EraseReport> {
        let hash = blake3::hash(predicate.as_bytes()).to_hex().to_string();
        if hash != saved.predicate_hash {
            return Err(Error::PlanPredicate {
                planned: saved.predicate_hash.clone(),
            });
        }
        let options = EraseOptions {
            table: saved.table.clone(),
            predicate: predicate.to_string(),
            reason: saved.reason.clone(),
        };
        let lease = self.take_lease(LeaseKind::Erase).await?;
        let out = async {
            let plan = self.plan_erasure(&options).await?;
            if let Some(detail) = plan.differs_from(saved) {
                return Err(Error::PlanOutdated {
                    what: "erasure",
                    detail,
                });
            }
            // A ref that moves while this applies is `RefMoved`, as for
            // any erasure: the same erase, run again, finishes it.
            self.apply_erasure(&plan).await
        }
        .await;
        lease.release(self).await;
        out
    }

    /// Applies a plan under the lease, planning again while commits move
    /// the refs; `fresh` when it was made under this hold of the lease
    /// (nothing can have deleted since). Returns the plan applied.
    ///
    /// Planning reads every version of the table, which on a busy branch
    /// takes longer than the commits between two reads of it: planning
    /// again and again would never catch up. So after the first lost race
    /// the branches it moves are held ([`RefHold`]): commits wait while it
    /// plans again and moves them, and the holds go with the move (or are
    /// released when it ends otherwise).
    async fn apply_erasure_leased(
        &self,
        mut plan: ErasePlan,
        fresh: bool,
    ) -> Result<(ErasePlan, EraseReport)> {
        let started = std::time::Instant::now();
        let mut attempt = 0u32;
        let mut held: Vec<String> = Vec::new();
        let out = loop {
            if attempt > 0 {
                tokio::time::sleep(super::retry_pause(attempt)).await;
                if let Err(e) = self.hold_branches(&plan, &mut held).await {
                    break Err(e);
                }
            }
            if attempt > 0 || (!fresh && !self.erase_plan_holds(&plan).await?) {
                match self.plan_erasure(&plan.work.options).await {
                    Ok(p) => plan = p,
                    Err(e) => break Err(e),
                }
            }
            attempt += 1;
            match self.apply_erasure(&plan).await {
                Err(Error::RefMoved { .. }) if started.elapsed() < ERASE_RETRY_FOR => continue,
                other => break other.map(|report| (plan, report)),
            }
        };
        self.release_holds(&held).await;
        out
    }

    /// Holds each branch the plan moves that is not held yet (`held`
    /// grows with those it holds). A branch a commit moves while it is
    /// being held is read again and held where it is then.
    async fn hold_branches(&self, plan: &ErasePlan, held: &mut Vec<String>) -> Result<()> {
        let reason = &plan.work.options.reason;
        for (kind, name, _, _) in &plan.work.moves {
            if *kind != RefKind::Branch || held.contains(name) {
                continue;
            }
            for _ in 0..HOLD_TRIES {
                let Some(head) = self.store().ref_head(RefKind::Branch, name).await? else {
                    break;
                };
                if head.target.is_none() || head.held_at(now_ms()).is_some() {
                    break;
                }
                let entry = RefEntry {
                    seq: head.seq + 1,
                    time_ms: now_ms(),
                    author: self.author.clone(),
                    message: format!("erase: held while it plans again ({reason})"),
                    hold: Some(RefHold {
                        by: "erase".into(),
                        until_ms: now_ms() + RefHold::MAX_MS,
                    }),
                    ..head
                };
                match self.store().append_ref(RefKind::Branch, name, &entry).await {
                    Ok(()) => {
                        held.push(name.clone());
                        break;
                    }
                    Err(tablepin_store::StoreError::RefConflict { .. }) => continue,
                    Err(e) => return Err(e.into()),
                }
            }
        }
        Ok(())
    }

    /// Releases the holds still standing on these branches (an erasure
    /// that moved a branch released its hold with the move). Best effort:
    /// a hold left behind lapses on its own.
    async fn release_holds(&self, held: &[String]) {
        for name in held {
            let Ok(Some(head)) = self.store().ref_head(RefKind::Branch, name).await else {
                continue;
            };
            if head.hold.is_none() {
                continue;
            }
            let entry = RefEntry {
                seq: head.seq + 1,
                time_ms: now_ms(),
                author: self.author.clone(),
                message: "erase: released".into(),
                hold: None,
                ..head
            };
            let _ = self.store().append_ref(RefKind::Branch, name, &entry).await;
        }
    }

    /// The plan still fits the repository: every version it replaces is
    /// stored and not expired, and every ref it moves names what it did.
    async fn erase_plan_holds(&self, plan: &ErasePlan) -> Result<bool> {
        for v in &plan.versions {
            if !self.store().has_blob(&v.old.0).await? || self.tombstone(&v.old).await?.is_some() {
                return Ok(false);
            }
        }
        for (kind, name, old, new) in &plan.work.moves {
            let head = self
                .store()
                .ref_head(*kind, name)
                .await?
                .and_then(|h| h.target);
            if head != Some(*old) && head != Some(*new) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// What the ref logs show an erasure did: each move once, and only
    /// those a ref's log holds (an attempt that lost a ref race recorded
    /// moves it never made).
    async fn moves_made(&self, intended: &[AuditMovedRef]) -> Result<Vec<AuditMovedRef>> {
        let mut out: Vec<AuditMovedRef> = Vec::new();
        for m in intended {
            if out
                .iter()
                .any(|x| x.kind == m.kind && x.name == m.name && x.new == m.new)
            {
                continue;
            }
            let log = self.store().ref_log(m.kind, &m.name).await?;
            if log.iter().any(|e| e.target == Some(m.new)) {
                out.push(m.clone());
            }
        }
        Ok(out)
    }

    /// Applies one plan; [`Error::RefMoved`] when a ref moved under it.
    async fn apply_erasure(&self, plan: &ErasePlan) -> Result<EraseReport> {
        let start = std::time::Instant::now();
        let (previous, mut pending_paths) = self.pending(&plan.predicate_hash).await?;
        let mut pending = previous.unwrap_or_else(|| Pending::new(plan));
        // 1. New blobs.
        for b in &plan.work.blobs {
            let out = self.store().freshen_blob(b.clone()).await?;
            if out.new {
                pending.bytes_written += out.bytes;
            }
        }
        // 2. The pending record (replaced when a later run adds to it).
        pending.add(plan);
        let pb = Bytes::from(
            serde_json::to_vec_pretty(&pending)
                .map_err(|e| Error::Internal(format!("encoding an audit record: {e}")))?,
        );
        let pending_path = format!(
            "audit/pending/{}/{:08}.json",
            plan.predicate_hash,
            pending_paths.len() + 1
        );
        self.store().create_doc(&pending_path, pb).await?;
        pending_paths.push(pending_path);
        // 3. Move the refs.
        for m in &plan.work.moves {
            self.move_erased_ref(m, &plan.reason).await?;
        }
        // 4. Delete the old blobs that nothing reaches now.
        let reachable = self.reachable_blobs().await?;
        let mut deleted = 0u64;
        let records: HashSet<ObjectId> = pending.versions.iter().map(|v| v.old.0).collect();
        for id in super::gc::sweep_order(&pending.delete, &records) {
            if !reachable.contains(id) && self.store().has_blob(id).await? {
                self.store().delete_blob(id).await?;
                deleted += 1;
            }
        }
        // 5. The audit record, then the pending entries dropped.
        let audit = self.write_audit(pending, &reachable, deleted).await?;
        for p in &pending_paths {
            self.store().delete_doc(p).await?;
        }
        Ok(EraseReport {
            audit,
            seconds: start.elapsed().as_secs_f64(),
        })
    }

    /// Moves one ref of an erasure from its old version to the new one
    /// (done already when it names the new one); [`Error::RefMoved`] when
    /// it names neither, or another writer took its next entry first.
    async fn move_erased_ref(&self, m: &RefMove, reason: &str) -> Result<()> {
        let (kind, name, old, new) = m;
        let moved = || Error::RefMoved {
            name: format!("{}/{name}", kind.dir()),
        };
        match self.store().ref_head(*kind, name).await? {
            Some(h) if h.target == Some(*old) => {
                let how = format!("erase: {reason}");
                match self.move_ref(*kind, name, h.seq, Some(*new), &how).await {
                    Err(Error::Store(tablepin_store::StoreError::RefConflict { .. })) => {
                        Err(moved())
                    }
                    other => other.map(drop),
                }
            }
            Some(h) if h.target == Some(*new) => Ok(()),
            _ => Err(moved()),
        }
    }

    /// Every blob the refs reach now, along first parents to where gc
    /// expired the chain: to the first version a listing made after
    /// reading the refs lacks, whatever a read of it from memory or the
    /// cache gives.
    async fn reachable_blobs(&self) -> Result<HashSet<ObjectId>> {
        let heads = self.ref_targets().await?;
        let listed = self.listed_blobs().await?;
        let mut reachable = HashSet::new();
        for head in heads {
            let mut next = Some(head);
            while let Some(id) = next {
                if reachable.contains(&id.0) || !listed.contains(&id.0) {
                    break;
                }
                match self.reach(&id, &mut reachable).await {
                    Ok(v) => next = v.parents.first().copied(),
                    // Expired by gc: the stored chain ends here.
                    Err(e) if e.is_missing() && !self.store().has_blob(&id.0).await? => break,
                    // A failed read is not the end of the chain: what
                    // lies past it may still need the blobs below.
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(reachable)
    }

    /// Writes the audit record of a finished erasure, once: a run that
    /// died after writing it finds it and returns it. The record holds
    /// only what this erasure did: the replacements the refs reach now and
    /// the moves their logs show.
    async fn write_audit(
        &self,
        mut pending: Pending,
        reachable: &HashSet<ObjectId>,
        deleted: u64,
    ) -> Result<AuditRecord> {
        let existing = self.audit().await?;
        if let Some(done) = existing.iter().find(|a| {
            a.predicate_hash == pending.predicate_hash && a.fingerprint.salt == pending.salt
        }) {
            return Ok(done.clone());
        }
        pending.versions.retain(|v| reachable.contains(&v.new.0));
        pending.moved_refs = self.moves_made(&pending.moved_refs).await?;
        let mut seq = existing.last().map_or(1, |a| a.seq + 1);
        let mut record = AuditRecord {
            format: FORMAT_VERSION,
            seq,
            time_ms: pending.started_ms,
            author: self.author().to_string(),
            table: pending.table,
            reason: pending.reason,
            predicate_hash: pending.predicate_hash,
            versions: pending.versions,
            moved_refs: pending.moved_refs,
            blobs_deleted: deleted,
            bytes_written: pending.bytes_written,
            fingerprint: ErasedFingerprint {
                salt: pending.salt,
                rows: pending.fingerprints,
            },
        };
        loop {
            let bytes = Bytes::from(
                serde_json::to_vec_pretty(&record)
                    .map_err(|e| Error::Internal(format!("encoding an audit record: {e}")))?,
            );
            match self
                .store()
                .create_doc(&format!("audit/{seq:08}.json"), bytes)
                .await
            {
                Ok(()) => return Ok(record),
                Err(tablepin_store::StoreError::Exists { .. }) => {
                    seq += 1;
                    record.seq = seq;
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Every version an erasure replaced (and deleted), with its
    /// replacement, from the audit records and any interrupted erasure.
    /// A damaged audit record is an error naming it.
    pub async fn replacements(&self) -> Result<HashMap<VersionId, VersionId>> {
        let (map, problems) = self.replacements_checked().await?;
        match problems.into_iter().next() {
            None => Ok(map),
            Some(p) => Err(Error::DamagedDocument(p)),
        }
    }

    /// [`Repo::replacements`] from every audit record that decodes, and a
    /// sentence for each one that does not. An interrupted erasure's
    /// replacement counts only once it is stored: a reader must never
    /// follow a replacement that an erasure did not put in place.
    pub(crate) async fn replacements_checked(
        &self,
    ) -> Result<(HashMap<VersionId, VersionId>, Vec<String>)> {
        let (records, mut problems) = self.audit_checked().await?;
        let mut out: HashMap<VersionId, VersionId> = records
            .iter()
            .flat_map(|r| r.versions.iter().map(|v| (v.old, v.new)))
            .collect();
        for p in self.store().list_docs("audit/pending").await? {
            let Some(b) = self.store().get_doc(&p).await? else {
                continue;
            };
            match serde_json::from_slice::<Pending>(&b) {
                Ok(pending) => {
                    for v in &pending.versions {
                        if self.store().has_blob(&v.new.0).await? {
                            out.insert(v.old, v.new);
                        }
                    }
                }
                Err(e) => problems.push(format!(
                    "the record of an interrupted erasure, {p}, is damaged: {e}"
                )),
            }
        }
        Ok((out, problems))
    }

    /// Every audit record, oldest first. A damaged one is an error naming
    /// it.
    pub async fn audit(&self) -> Result<Vec<AuditRecord>> {
        let (records, problems) = self.audit_checked().await?;
        match problems.into_iter().next() {
            None => Ok(records),
            Some(p) => Err(Error::DamagedDocument(p)),
        }
    }

    /// Every audit record that decodes, oldest first, and a sentence for
    /// each one that does not.
    pub(crate) async fn audit_checked(&self) -> Result<(Vec<AuditRecord>, Vec<String>)> {
        let mut out = Vec::new();
        let mut problems = Vec::new();
        for p in self.store().list_docs("audit").await? {
            if p.contains("/pending/") || !p.ends_with(".json") {
                continue;
            }
            if let Some(b) = self.store().get_doc(&p).await? {
                match serde_json::from_slice(&b) {
                    Ok(r) => out.push(r),
                    Err(e) => problems.push(format!("audit record {p} is damaged: {e}")),
                }
            }
        }
        Ok((out, problems))
    }

    /// The data files among `blobs` that hold a row an erasure removed.
    /// With `since_erasure`, blobs last written before the earliest erasure
    /// are skipped: that erasure read and rewrote every stored data file,
    /// and a commit that reuses an old blob rewrites it (freshens it), so
    /// only a blob written since can hold its rows. `verify --erased`
    /// checks every blob.
    pub(crate) async fn erased_holders(
        &self,
        records: Vec<AuditRecord>,
        blobs: &[(ObjectId, i64)],
        since_erasure: bool,
    ) -> Result<Vec<(ObjectId, u64)>> {
        let first = records.iter().map(|r| r.time_ms).min().unwrap_or(i64::MAX);
        let blobs: Vec<ObjectId> = blobs
            .iter()
            .filter(|(_, t)| !since_erasure || *t >= first)
            .map(|b| b.0)
            .collect();
        let mut sets = Vec::new();
        for r in records {
            let rows: HashSet<String> = r.fingerprint.rows.iter().cloned().collect();
            sets.push((fingerprint_key(&r.fingerprint.salt), rows));
        }
        let mut out = Vec::new();
        if sets.is_empty() {
            return Ok(out);
        }
        for id in &blobs {
            let bytes = self.store().get_blob(id).await?;
            if bytes.len() < 4 || &bytes[..4] != b"PAR1" {
                continue;
            }
            let (_, batches) = own_rows(*id, bytes)?;
            let mut hits = 0u64;
            for b in &batches {
                for h in hash_rows(b)? {
                    if sets
                        .iter()
                        .any(|(k, rows)| rows.contains(&fingerprint(k, &h)))
                    {
                        hits += 1;
                    }
                }
            }
            if hits > 0 {
                out.push((*id, hits));
            }
        }
        Ok(out)
    }

    /// Proves that no stored blob holds a row any recorded erasure removed.
    pub async fn verify_erased(&self, progress: &dyn Progress) -> Result<ErasedCheck> {
        let blobs = self.store().list_blobs().await?;
        let records = self.audit().await?;
        progress.begin("checking erasures", blobs.iter().map(|b| b.size).sum());
        let mut check = ErasedCheck {
            records: records.len() as u64,
            ..Default::default()
        };
        let ids: Vec<(ObjectId, i64)> = blobs
            .iter()
            .map(|b| (b.id, b.last_modified.timestamp_millis()))
            .collect();
        for b in &blobs {
            let bytes = self.store().get_stored_blob(&b.id).await?;
            if bytes.len() >= 4 && &bytes[..4] == b"PAR1" {
                check.files += 1;
                check.rows += parquet::file::reader::SerializedFileReader::new(bytes)
                    .map(|r| {
                        parquet::file::reader::FileReader::metadata(&r)
                            .file_metadata()
                            .num_rows() as u64
                    })
                    .unwrap_or(0);
            }
            progress.advance(b.size);
        }
        check.holders = self.erased_holders(records, &ids, false).await?;
        if let Some(cache) = self.store().cache() {
            let stored: HashSet<ObjectId> = blobs.iter().map(|b| b.id).collect();
            for id in cache.ids().into_iter().filter(|id| !stored.contains(id)) {
                cache.remove(&id);
                check.cache_removed += 1;
            }
        }
        progress.end();
        Ok(check)
    }
}

fn rand_salt() -> [u8; 16] {
    rand::random()
}

/// Versions in an order where every parent comes before its children.
fn topo_order(versions: &BTreeMap<VersionId, Version>) -> Vec<VersionId> {
    let mut out = Vec::with_capacity(versions.len());
    let mut done: HashSet<VersionId> = HashSet::new();
    for start in versions.keys() {
        let mut stack = vec![(*start, false)];
        while let Some((id, expanded)) = stack.pop() {
            if done.contains(&id) {
                continue;
            }
            if expanded {
                done.insert(id);
                out.push(id);
                continue;
            }
            stack.push((id, true));
            if let Some(v) = versions.get(&id) {
                for p in &v.parents {
                    if !done.contains(p) && versions.contains_key(p) {
                        stack.push((*p, false));
                    }
                }
            }
        }
    }
    out
}
