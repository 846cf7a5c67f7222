//! Planning an erasure: which files of which kept versions hold the
//! matching rows, their rewrites, and the versions and refs that replace them.

use super::*;

pub(crate) fn fingerprint_key(salt: &str) -> [u8; 32] {
    blake3::derive_key("tablepin erase fingerprint v1", salt.as_bytes())
}

pub(crate) fn fingerprint(key: &[u8; 32], row_hash: &[u8; 32]) -> String {
    hex::encode(&blake3::keyed_hash(key, row_hash).as_bytes()[..16])
}

/// A file's rows under its own schema.
pub(crate) fn own_rows(blob: ObjectId, bytes: Bytes) -> Result<(SchemaRef, Vec<RecordBatch>)> {
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
pub(crate) type Matched = (
    BTreeMap<ObjectId, FileRewrite>,
    Vec<PlannedFile>,
    Vec<Bytes>,
    Vec<VersionId>,
);

/// An erasure's predicate compiled for each file schema met; `None` for a
/// schema that lacks a column it names (no row there can match).
pub(crate) struct BySchema<'a> {
    pub(crate) table: &'a str,
    pub(crate) text: &'a str,
    pub(crate) compiled: Vec<(SchemaRef, Option<Predicate>)>,
}

impl BySchema<'_> {
    pub(crate) fn for_schema(&mut self, schema: &SchemaRef) -> Result<Option<&Predicate>> {
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

    pub(crate) fn applies_anywhere(&self) -> bool {
        self.compiled.iter().any(|(_, p)| p.is_some())
    }
}

pub(crate) struct FileRewrite {
    pub(crate) matched: Vec<u32>,
    /// Matching rows, under the file's own schema.
    pub(crate) matched_rows: RecordBatch,
    pub(crate) new: Option<FileEntry>,
}

/// What an erasure looks at ([`Repo::erasure_scope`]).
pub(crate) struct Stored {
    /// The table's schema at a head.
    pub(crate) schema: SchemaRef,
    /// Every version the refs reach.
    pub(crate) versions: BTreeMap<VersionId, Version>,
    /// Their snapshots of the table (versions without it have none).
    pub(crate) snaps: BTreeMap<VersionId, TableSnapshot>,
    /// The refs naming each version.
    pub(crate) ref_names: HashMap<VersionId, Vec<(RefKind, String)>>,
}

/// A ref move of an erasure: kind, name, old version, new version.
pub(crate) type RefMove = (RefKind, String, VersionId, VersionId);

/// The ref moves that replacing versions asks for (every ref naming a
/// replaced version moves to its replacement), in name order, and the
/// tags among them.
pub(crate) fn ref_moves(
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
pub(crate) fn blobs_to_delete(
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
    pub(crate) async fn plan_erasure(&self, opts: &EraseOptions) -> Result<ErasePlan> {
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
    pub(crate) async fn erasure_scope(&self, table: &str) -> Result<Stored> {
        let branches = self.refs().list(RefKind::Branch).await?;
        let tags = self.refs().list(RefKind::Tag).await?;
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
    pub(crate) async fn match_files(
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
                    .map_err(|e| super::super::named(e.into(), Some(*vid), table))?;
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
    pub(crate) async fn replace_versions(
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
    pub(crate) async fn rewrite_snapshot(
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
}

pub(crate) fn rand_salt() -> [u8; 16] {
    rand::random()
}

/// Versions in an order where every parent comes before its children.
pub(crate) fn topo_order(versions: &BTreeMap<VersionId, Version>) -> Vec<VersionId> {
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
