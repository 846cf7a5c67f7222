//! `verify`: proves the repository is whole.
//!
//! Every blob is read and hashed against its name; every ref must name a
//! readable version (or an expired one that left a tombstone); every version
//! reachable from a ref must decode, and every table snapshot's row count
//! and content hash are computed again from its rows. The versions are
//! walked first and their snapshots decoded; then each data file is read
//! once, on all cores, and reduced to its row count, the sum of its row
//! hashes and, for each deletion vector a snapshot puts on it, the sum of
//! the rows it hides; each snapshot is checked from those sums. So the
//! cost grows with the distinct rows stored, not with the number of
//! versions, and memory holds a file's row hashes while it is read, not
//! the table's.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::time::Instant;

use serde::Serialize;
use tablepin_format::{
    decode_manifest, ContentHash, ObjectId, RefKind, RowHash, TableSnapshot, Version, VersionId,
};
use tablepin_rowhash::hash_rows;
use tablepin_store::ranged::{Checked, OUTBOARD_FROM};
use tablepin_store::{layout, StoreError};

use super::{Progress, Repo};
use crate::error::Result;
use crate::table::datafile::{read_data_file, Select};
use crate::table::{dv, schema_of};

use arrow::datatypes::SchemaRef;
use roaring::RoaringBitmap;

/// A data file to read, under one schema, with the deletion vectors the
/// snapshots put on it.
struct FileCheck {
    data: ObjectId,
    schema: SchemaRef,
    dvs: Vec<RoaringBitmap>,
    /// Where each deletion vector (its blob and offset) is in `dvs`.
    dv_at: HashMap<(ObjectId, Option<u64>), usize>,
}

/// What a data file's rows hash to, read once however many snapshots
/// share it: its rows, their sum, and for each of its deletion vectors the
/// sum of the rows it hides (or a position past the file's end).
struct FileSums {
    rows: u64,
    sum: ContentHash,
    hidden: Vec<std::result::Result<ContentHash, u32>>,
}

/// For each file of a snapshot: which [`FileCheck`] it is, and which of
/// its deletion vectors.
type Needs = Vec<(usize, Option<usize>)>;

/// A version to check, where it was reached from, and (for a ref's head)
/// the ref entry's path and the tables it records for the version.
struct Reached {
    from: String,
    id: VersionId,
    tables: Option<(String, BTreeMap<String, ObjectId>)>,
}

impl Reached {
    fn parent(child: &VersionId, id: VersionId) -> Self {
        Self {
            from: format!("version {}", child.short(12)),
            id,
            tables: None,
        }
    }
}

/// What the walk over versions has found: the snapshots to check (each
/// once), and the deletion vectors read.
#[derive(Default)]
struct Walk {
    snapshots_done: HashSet<ObjectId>,
    snapshots: Vec<(VersionId, String, TableSnapshot)>,
    dv_known: dv::Known,
}

/// What `verify` checked and found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct VerifyReport {
    /// Blobs read and hashed.
    pub blobs: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Refs checked.
    pub refs: u64,
    /// Versions checked.
    pub versions: u64,
    /// Expired versions met (tombstones).
    pub expired: u64,
    /// Table snapshots whose content hash was recomputed.
    pub snapshots: u64,
    /// Rows hashed.
    pub rows_hashed: u64,
    /// Seconds taken.
    pub seconds: f64,
    /// Blob bytes hashed per second, in MB (10^6 bytes).
    pub mb_per_s: f64,
    /// Every problem found, one sentence each. Empty: the repository is whole.
    pub problems: Vec<String>,
    /// Temporary files that interrupted writes left (not damage: no version
    /// names them; `gc` deletes them after its grace period).
    pub leftovers: Vec<String>,
}

/// The problem of a blob that lacks the outboard its repository's format
/// promises (from [`tablepin_format::OUTBOARDS_FROM_FORMAT`] on: every blob
/// of 1 MiB or more has one), if it does.
/// Not damage of the blob: a read of it reads it whole.
fn missing_outboard(format: u32, id: &ObjectId, checked: &Checked) -> Option<String> {
    let promised =
        format >= tablepin_format::OUTBOARDS_FROM_FORMAT && checked.size >= OUTBOARD_FROM as u64;
    (promised && !checked.outboard).then(|| {
        format!(
            "blob {id} ({} bytes) has no outboard, which a repository of format {format} keeps \
             for every blob of {OUTBOARD_FROM} bytes or more: its reads by range read it whole; \
             `tablepin upgrade` writes it again from the blob",
            checked.size
        )
    })
}

/// Bytes of blobs `verify` reads and hashes at once.
const VERIFY_BATCH_BYTES: u64 = 64 << 20;

impl Repo {
    /// Checks every blob, ref, version and snapshot.
    pub async fn verify(&self, progress: &dyn Progress) -> Result<VerifyReport> {
        let start = Instant::now();
        let mut r = VerifyReport::default();
        let bad = self.check_blobs(&mut r, progress).await?;
        let hash_secs = start.elapsed().as_secs_f64();
        r.mb_per_s = if hash_secs > 0.0 {
            r.bytes as f64 / 1e6 / hash_secs
        } else {
            0.0
        };

        // The repository's documents: each is checked on its own, and
        // every damaged one is named.
        r.problems.extend(self.check_documents().await?);
        r.leftovers = self
            .store()
            .leftovers()?
            .into_iter()
            .map(|l| l.path)
            .collect();
        let roots = self.check_refs(&mut r).await?;
        self.check_versions(roots, &bad, &mut r, progress).await?;
        r.seconds = start.elapsed().as_secs_f64();
        Ok(r)
    }

    /// Reads and hashes every blob against its name (and a large blob's
    /// outboard against it), a batch at a time on all cores, naming every
    /// damaged blob. Returns the damaged ones.
    async fn check_blobs(
        &self,
        r: &mut VerifyReport,
        progress: &dyn Progress,
    ) -> Result<HashSet<ObjectId>> {
        let blobs = self.store().list_blobs().await?;
        let total: u64 = blobs.iter().map(|b| b.size).sum();
        progress.begin("verifying blobs", total);
        let mut bad: HashSet<ObjectId> = HashSet::new();
        let mut batch: Vec<ObjectId> = Vec::new();
        let mut batch_bytes = 0u64;
        for (i, b) in blobs.iter().enumerate() {
            batch.push(b.id);
            batch_bytes += b.size;
            if batch_bytes < VERIFY_BATCH_BYTES && i + 1 < blobs.len() {
                continue;
            }
            for (id, answer) in batch
                .iter()
                .zip(self.store().check_stored_blobs(&batch).await)
            {
                match answer {
                    Ok(checked) => {
                        r.bytes += checked.size;
                        if let Some(p) = missing_outboard(self.config().format, id, &checked) {
                            r.problems.push(p);
                        }
                    }
                    Err(e) => {
                        // A damaged outboard leaves the blob whole: what
                        // reads it whole still reads.
                        if !matches!(e, StoreError::OutboardDamaged { .. }) {
                            bad.insert(*id);
                        }
                        r.problems.push(e.to_string());
                    }
                }
            }
            r.blobs += batch.len() as u64;
            progress.advance(batch_bytes);
            batch.clear();
            batch_bytes = 0;
        }
        progress.end();
        Ok(bad)
    }

    /// Checks every entry of every ref log; returns the versions the refs
    /// name now, each with where it was reached from and the tables its
    /// head entry records (which must be the version's).
    async fn check_refs(&self, r: &mut VerifyReport) -> Result<Vec<Reached>> {
        let mut roots = Vec::new();
        for kind in [RefKind::Branch, RefKind::Tag] {
            for name in self.store().ref_names(kind).await? {
                r.refs += 1;
                let entries = self.store().ref_log_checked(kind, &name).await?;
                for (seq, path, entry) in &entries {
                    match entry {
                        Ok(e) if e.seq != *seq => r.problems.push(format!(
                            "ref entry {path} says it is entry {}, not {seq}",
                            e.seq
                        )),
                        Ok(_) => {}
                        Err(e) => r.problems.push(format!("ref entry {e}")),
                    }
                }
                if let Some((_, path, Ok(head))) = entries.last() {
                    roots.extend(head.target.map(|t| Reached {
                        from: format!("{} '{name}'", super::kind_name(kind)),
                        id: t,
                        tables: head.tables.clone().map(|tables| (path.clone(), tables)),
                    }));
                }
            }
        }
        Ok(roots)
    }

    /// Walks the versions from `roots` along their parents (through
    /// tombstones and erasures' replacements), decoding each and checking
    /// each distinct table snapshot's rows.
    async fn check_versions(
        &self,
        roots: Vec<Reached>,
        bad: &HashSet<ObjectId>,
        r: &mut VerifyReport,
        progress: &dyn Progress,
    ) -> Result<()> {
        // A damaged audit record was named above; the others still map
        // the versions they replaced.
        let (replaced, _) = self.replacements_checked().await?;
        let mut seen = BTreeSet::new();
        let mut todo = roots;
        let mut walk = Walk::default();
        progress.begin("checking versions", 0);
        while let Some(Reached { from, id, tables }) = todo.pop() {
            if !seen.insert(id) {
                continue;
            }
            let v: Version = match self.store().get_blob(&id.0).await {
                Ok(bytes) => match decode_manifest("version", &bytes) {
                    Ok(v) => v,
                    Err(e) => {
                        r.problems.push(format!(
                            "version {id} (reached from {from}) does not decode: {e}"
                        ));
                        continue;
                    }
                },
                Err(e) => {
                    let missing = matches!(e, StoreError::NotFound { .. });
                    match self.tombstone(&id).await {
                        // Expired by gc: its tombstone names its parents.
                        Ok(Some(t)) if missing => {
                            r.expired += 1;
                            todo.extend(t.parents.into_iter().map(|p| Reached::parent(&id, p)));
                        }
                        // Named among the documents above.
                        Err(_) => {}
                        _ => match replaced.get(&id) {
                            // An erasure replaced it; its replacement stands in.
                            Some(new) if missing => todo.push(Reached::parent(&id, *new)),
                            _ => r.problems.push(format!(
                                "version {id} (reached from {from}) is unreadable: {e}"
                            )),
                        },
                    }
                    continue;
                }
            };
            if let Some((path, recorded)) = tables.filter(|(_, t)| *t != v.tables) {
                r.problems.push(format!(
                    "ref entry {path} records tables {recorded:?} for version {id}, whose tables are {:?}; a commit on it would start from the wrong snapshots",
                    v.tables
                ));
            }
            r.versions += 1;
            progress.advance(1);
            for (table, sid) in &v.tables {
                self.check_table(&id, table, sid, &mut walk, r).await?;
            }
            todo.extend(v.parents.iter().map(|p| Reached::parent(&id, *p)));
        }
        progress.end();
        self.check_snapshots(walk, bad, r).await
    }

    /// Takes one table snapshot of a version to check, once however many
    /// versions share it.
    async fn check_table(
        &self,
        id: &VersionId,
        table: &str,
        sid: &ObjectId,
        walk: &mut Walk,
        r: &mut VerifyReport,
    ) -> Result<()> {
        if !walk.snapshots_done.insert(*sid) {
            return Ok(());
        }
        let snap: TableSnapshot = match self.store().get_blob(sid).await {
            Ok(b) => match decode_manifest("table snapshot", &b) {
                Ok(s) => s,
                Err(e) => {
                    r.problems.push(format!(
                        "table '{table}' of version {id}: snapshot {sid} does not decode: {e}"
                    ));
                    return Ok(());
                }
            },
            Err(e) => {
                r.problems
                    .push(format!("table '{table}' of version {id}: {e}"));
                return Ok(());
            }
        };
        r.snapshots += 1;
        walk.snapshots.push((*id, table.to_string(), snap));
        Ok(())
    }

    /// Checks the snapshots the walk found: what each file must be read
    /// for, each file read once, then each snapshot's rows and content
    /// hash from the files' sums.
    async fn check_snapshots(
        &self,
        walk: Walk,
        bad: &HashSet<ObjectId>,
        r: &mut VerifyReport,
    ) -> Result<()> {
        let Walk {
            snapshots,
            mut dv_known,
            ..
        } = walk;
        let mut files: Vec<FileCheck> = Vec::new();
        let mut at: HashMap<(ObjectId, String), usize> = HashMap::new();
        let mut needs = Vec::with_capacity(snapshots.len());
        for (_, _, snap) in &snapshots {
            let n = self
                .snapshot_needs(snap, bad, &mut files, &mut at, &mut dv_known)
                .await;
            needs.push(n);
        }
        let sums = self.file_sums(&files).await;
        r.rows_hashed += sums.iter().flatten().map(|s| s.rows).sum::<u64>();
        for ((id, table, snap), need) in snapshots.iter().zip(needs) {
            if let Err(p) = need.and_then(|n| snapshot_sums(snap, &n, &sums)) {
                r.problems
                    .push(format!("table '{table}' of version {id}: {p}"));
            }
        }
        Ok(())
    }

    /// What checking `snap` needs read: its files (added to `files` once
    /// per blob and schema) and their deletion vectors, loaded here.
    async fn snapshot_needs(
        &self,
        snap: &TableSnapshot,
        bad: &HashSet<ObjectId>,
        files: &mut Vec<FileCheck>,
        at: &mut HashMap<(ObjectId, String), usize>,
        dv_known: &mut dv::Known,
    ) -> std::result::Result<Needs, String> {
        let schema = schema_of(snap);
        let schema_key = serde_json::to_string(&snap.schema).unwrap_or_default();
        let mut out = Vec::with_capacity(snap.files.len());
        for f in &snap.files {
            if bad.contains(&f.data) {
                return Err(format!("data file {} is damaged", f.data));
            }
            if let Some(d) = &f.deletes {
                if bad.contains(&d.blob) {
                    return Err(format!("deletion vector {} is damaged", d.blob));
                }
            }
            let fi = *at.entry((f.data, schema_key.clone())).or_insert_with(|| {
                files.push(FileCheck {
                    data: f.data,
                    schema: schema.clone(),
                    dvs: Vec::new(),
                    dv_at: HashMap::new(),
                });
                files.len() - 1
            });
            let Some(d) = &f.deletes else {
                out.push((fi, None));
                continue;
            };
            let check = &mut files[fi];
            let di = match check.dv_at.get(&(d.blob, d.offset)) {
                Some(di) => *di,
                None => {
                    let bm = dv::load(self.store(), f, dv_known)
                        .await
                        .map_err(|e| e.to_string())?
                        .unwrap_or_default();
                    if bm.len() != d.count {
                        return Err(format!("deletion vector of data file {} holds {} positions, the snapshot says otherwise", f.data, bm.len()));
                    }
                    check.dvs.push(bm);
                    check.dv_at.insert((d.blob, d.offset), check.dvs.len() - 1);
                    check.dvs.len() - 1
                }
            };
            out.push((fi, Some(di)));
        }
        Ok(out)
    }

    /// Each file read and reduced to its sums ([`FileSums`]), on all
    /// cores; when a read fails, each file again on its own, so that each
    /// unreadable file is named by the snapshots that hold it.
    async fn file_sums(&self, files: &[FileCheck]) -> Vec<std::result::Result<FileSums, String>> {
        let ids: Vec<ObjectId> = files.iter().map(|f| f.data).collect();
        let all = self
            .store()
            .map_blobs(&ids, |i, bytes| {
                Ok::<_, StoreError>(sums_of(&files[i], bytes))
            })
            .await;
        if let Ok(all) = all {
            return all;
        }
        let mut out = Vec::with_capacity(files.len());
        for f in files {
            out.push(match self.store().get_blob(&f.data).await {
                Ok(bytes) => sums_of(f, bytes),
                Err(e) => Err(e.to_string()),
            });
        }
        out
    }

    /// Reads the config, every tombstone and every audit record (finished
    /// or pending) on its own, and names each that does not decode.
    async fn check_documents(&self) -> Result<Vec<String>> {
        let mut problems = Vec::new();
        match self.store().get_doc(super::CONFIG).await {
            Ok(Some(b)) => {
                if let Err(e) = serde_json::from_slice::<super::RepoConfig>(&b) {
                    problems.push(format!(
                        "the repository's config {} is damaged: {e}",
                        super::CONFIG
                    ));
                }
            }
            Ok(None) => problems.push(format!(
                "the repository's config {} is missing",
                super::CONFIG
            )),
            Err(e) => problems.push(format!("the repository's config: {e}")),
        }
        for path in self.store().list_docs(layout::TOMBSTONES).await? {
            let read = self.store().get_doc(&path).await;
            let problem = match read {
                Ok(Some(b)) => serde_json::from_slice::<tablepin_format::Tombstone>(&b)
                    .err()
                    .map(|e| format!("tombstone {path} is damaged: {e}")),
                Ok(None) => None,
                Err(e) => Some(format!("tombstone {path}: {e}")),
            };
            problems.extend(problem);
        }
        let (_, audit_problems) = self.replacements_checked().await?;
        problems.extend(audit_problems);
        Ok(problems)
    }
}

/// A data file's sums ([`FileSums`]) from its bytes.
fn sums_of(f: &FileCheck, bytes: bytes::Bytes) -> std::result::Result<FileSums, String> {
    let batches =
        read_data_file(f.data, bytes, &f.schema, Select::All).map_err(|e| e.to_string())?;
    let mut hs: Vec<RowHash> = Vec::new();
    for b in &batches {
        hs.extend(hash_rows(b).map_err(|e| e.to_string())?);
    }
    let hidden = f
        .dvs
        .iter()
        .map(|bm| {
            let mut h = ContentHash::EMPTY;
            for p in bm {
                h.add(hs.get(p as usize).ok_or(p)?);
            }
            Ok(h)
        })
        .collect();
    Ok(FileSums {
        rows: hs.len() as u64,
        sum: hs.iter().copied().collect(),
        hidden,
    })
}

/// Checks a snapshot's files, rows and content hash against its files'
/// sums.
fn snapshot_sums(
    snap: &TableSnapshot,
    needs: &Needs,
    sums: &[std::result::Result<FileSums, String>],
) -> std::result::Result<(), String> {
    let mut content = ContentHash::EMPTY;
    let mut rows = 0u64;
    for (f, (fi, di)) in snap.files.iter().zip(needs) {
        let s = sums[*fi].as_ref().map_err(Clone::clone)?;
        if s.rows != f.rows {
            return Err(format!(
                "data file {} holds {} rows, the snapshot says {}",
                f.data, s.rows, f.rows
            ));
        }
        if s.sum != f.hash_sum {
            return Err(format!(
                "data file {} hashes to {}, the snapshot says {}",
                f.data,
                s.sum.short(16),
                f.hash_sum.short(16)
            ));
        }
        let mut live = s.sum;
        if let Some(di) = di {
            match s.hidden[*di] {
                Ok(h) => live.unmerge(&h),
                Err(p) => {
                    return Err(format!(
                        "deletion vector of data file {} names row {p}, past its end",
                        f.data
                    ))
                }
            }
        }
        content.merge(&live);
        rows += f.live_rows();
    }
    if rows != snap.rows {
        return Err(format!(
            "its files hold {rows} rows, the snapshot says {}",
            snap.rows
        ));
    }
    if content != snap.content_hash {
        return Err(format!(
            "its rows hash to {}, the snapshot says {}",
            content.short(16),
            snap.content_hash.short(16)
        ));
    }
    Ok(())
}
