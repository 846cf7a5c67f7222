//! The commit planner: from "the table is now this" (or rows to append,
//! upsert or delete) to the smallest set of new blobs and the new snapshot.
//!
//! It reads what it must of the parent snapshot (key columns of the files
//! whose key range can hold an input key, and the few old rows it replaces),
//! never rewrites an old data file, and updates the content hash by adding
//! the new rows' hashes and subtracting the removed ones. A full read of the
//! parent happens only for `overwrite`, whose input is the whole table, and
//! on a schema change, which changes every row's hash.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::compute::concat_batches;
use arrow::datatypes::{Field, Schema, SchemaRef};
use bytes::Bytes;
use tablepin_format::{
    Checks, ContentHash, DeletionVector, FileEntry, ObjectId, RowHash, TableSnapshot,
    FORMAT_VERSION,
};
use tablepin_rowhash::hash_rows;
use tablepin_store::Store;

use super::datafile::{align, encode_dv, read_data_file, write_data_file, Select, WriteSettings};
use super::keys::{self, KeyCodec};
use super::{load_dv, schema_of};
use crate::error::{Error, Result};

/// How a commit's input relates to the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// The input is the whole table now; only the difference is stored.
    #[default]
    Overwrite,
    /// The input's rows are added.
    Append,
    /// Rows replace the rows with the same key; new keys are added.
    Upsert,
    /// The rows with the input's keys are removed.
    Delete,
}

impl Mode {
    /// The mode's name on the command line.
    pub fn name(&self) -> &'static str {
        match self {
            Mode::Overwrite => "overwrite",
            Mode::Append => "append",
            Mode::Upsert => "upsert",
            Mode::Delete => "delete",
        }
    }
}

/// What to commit to one table.
pub(crate) struct PlanInput<'a> {
    pub(crate) table: &'a str,
    pub(crate) parent: Option<&'a TableSnapshot>,
    pub(crate) schema: SchemaRef,
    pub(crate) batches: Vec<RecordBatch>,
    pub(crate) mode: Mode,
    pub(crate) key: Option<Vec<String>>,
    pub(crate) allow_schema_change: bool,
    pub(crate) settings: &'a WriteSettings,
}

/// The planned change to one table.
pub(crate) struct TablePlan {
    pub(crate) snapshot: TableSnapshot,
    /// New data files and deletion vectors, in write order.
    pub(crate) blobs: Vec<Bytes>,
    pub(crate) rows_added: u64,
    pub(crate) rows_changed: u64,
    pub(crate) rows_deleted: u64,
    pub(crate) checks: Checks,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Loc {
    file: usize,
    pos: u32,
}

/// The schema the table has after this commit, whether it moved, and
/// whether the old files must be dropped (an incompatible change that
/// `--allow-schema-change` accepted).
fn resolve_schema(
    table: &str,
    parent: Option<&Schema>,
    input: &Schema,
    allow: bool,
    mode: Mode,
) -> Result<(SchemaRef, bool, bool)> {
    let Some(parent) = parent else {
        return Ok((Arc::new(Schema::new(input.fields().clone())), true, false));
    };
    let mut problem: Option<String> = None;
    let mut fields: Vec<Field> = Vec::new();
    let mut moved = false;
    for pf in parent.fields() {
        match input.field_with_name(pf.name()) {
            Err(_) => {
                problem.get_or_insert(format!("column '{}' is missing from the input", pf.name()));
            }
            Ok(inf) if inf.data_type() != pf.data_type() => {
                problem.get_or_insert(format!(
                    "column '{}' would change type from {} to {}",
                    pf.name(),
                    pf.data_type(),
                    inf.data_type()
                ));
            }
            Ok(inf) => {
                let nullable = pf.is_nullable() || inf.is_nullable();
                moved |= nullable != pf.is_nullable();
                fields.push(pf.as_ref().clone().with_nullable(nullable));
            }
        }
    }
    for inf in input.fields() {
        if parent.field_with_name(inf.name()).is_err() {
            if !inf.is_nullable() {
                problem.get_or_insert(format!(
                    "new column '{}' is not nullable, so old rows would have no value for it",
                    inf.name()
                ));
            }
            moved = true;
            fields.push(inf.as_ref().clone().with_nullable(true));
        }
    }
    match problem {
        None => Ok((Arc::new(Schema::new(fields)), moved, false)),
        Some(detail) if !allow => Err(Error::SchemaChange {
            table: table.to_string(),
            detail,
        }),
        Some(detail) if mode != Mode::Overwrite => Err(Error::InvalidArgument(format!(
            "schema of table '{table}' changes ({detail}); an incompatible schema change rewrites the table, so it needs --mode overwrite"
        ))),
        Some(_) => Ok((Arc::new(Schema::new(input.fields().clone())), true, true)),
    }
}

/// Reads the key columns of the files whose range can hold an input key and
/// finds each input key's live position.
async fn locate(
    store: &Store,
    parent: &TableSnapshot,
    key_schema: &SchemaRef,
    codec: &KeyCodec,
    input_keys: &RecordBatch,
) -> Result<Vec<Option<Loc>>> {
    let n = input_keys.num_rows();
    let mut out = vec![None; n];
    if n == 0 {
        return Ok(out);
    }
    let in_rows = codec.rows(input_keys)?;
    let bounds = if key_schema.fields().len() == 1 {
        keys::all_bounds(input_keys.column(0))
    } else {
        None
    };
    for (fi, f) in parent.files.iter().enumerate() {
        let cand: Vec<usize> = match (&bounds, &f.key_min, &f.key_max) {
            (Some(b), Some(lo), Some(hi)) => {
                (0..n).filter(|i| lo <= &b[*i] && &b[*i] <= hi).collect()
            }
            _ => (0..n).collect(),
        };
        if cand.is_empty() {
            continue;
        }
        let bytes = store.get_blob(&f.data).await?;
        let batches = read_data_file(f.data, bytes, key_schema, Select::All)?;
        let file_rows = codec.rows_of(&batches)?;
        let dv = load_dv(store, f).await?;
        for i in cand {
            let want = in_rows.row(i);
            let (mut lo, mut hi) = (0usize, file_rows.num_rows());
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                match file_rows.row(mid).cmp(&want) {
                    std::cmp::Ordering::Less => lo = mid + 1,
                    std::cmp::Ordering::Greater => hi = mid,
                    std::cmp::Ordering::Equal => {
                        let pos = mid as u32;
                        if !dv.as_ref().is_some_and(|d| d.contains(pos)) {
                            out[i] = Some(Loc { file: fi, pos });
                        }
                        break;
                    }
                }
            }
        }
    }
    Ok(out)
}

/// The hashes of old rows at the given positions, under `schema`.
async fn hashes_at(
    store: &Store,
    parent: &TableSnapshot,
    schema: &SchemaRef,
    locs: &BTreeMap<usize, Vec<u32>>,
) -> Result<HashMap<(usize, u32), RowHash>> {
    let mut out = HashMap::new();
    for (&fi, positions) in locs {
        let f = &parent.files[fi];
        let bytes = store.get_blob(&f.data).await?;
        let batches = read_data_file(f.data, bytes, schema, Select::Positions(positions))?;
        let mut it = positions.iter();
        for b in &batches {
            for h in hash_rows(b)? {
                if let Some(p) = it.next() {
                    out.insert((fi, *p), h);
                }
            }
        }
    }
    Ok(out)
}

/// One live row of the parent: where it is and its hash.
struct OldRow {
    loc: Loc,
    hash: RowHash,
}

/// Reads every live row of the parent with its hash, under `schema`, and
/// its key (for keyed tables).
async fn read_all(
    store: &Store,
    parent: &TableSnapshot,
    schema: &SchemaRef,
    codec: Option<&KeyCodec>,
) -> Result<(Vec<OldRow>, Vec<Vec<u8>>)> {
    let mut rows = Vec::new();
    let mut keys = Vec::new();
    for (fi, f) in parent.files.iter().enumerate() {
        let bytes = store.get_blob(&f.data).await?;
        let dv = load_dv(store, f).await?;
        let batches = read_data_file(f.data, bytes, schema, Select::All)?;
        let mut pos = 0u32;
        for b in &batches {
            let hashes = hash_rows(b)?;
            let krows = codec.map(|c| c.rows(b)).transpose()?;
            for (i, h) in hashes.into_iter().enumerate() {
                let live = !dv.as_ref().is_some_and(|d| d.contains(pos));
                if live {
                    rows.push(OldRow {
                        loc: Loc { file: fi, pos },
                        hash: h,
                    });
                    if let Some(k) = &krows {
                        keys.push(k.row(i).as_ref().to_vec());
                    }
                }
                pos += 1;
            }
        }
    }
    Ok((rows, keys))
}

/// Plans a commit to one table.
pub(crate) async fn plan(store: &Store, p: PlanInput<'_>) -> Result<TablePlan> {
    let table = p.table;
    let input = concat_batches(&p.schema, &p.batches).map_err(Error::arrow("reading the input"))?;
    let parent = p.parent;

    // The key the table has.
    let key: Vec<String> = match (parent, &p.key) {
        (Some(par), Some(k)) if par.key != *k && !(par.key.is_empty() && par.files.is_empty()) => {
            return Err(Error::KeyChange {
                table: table.to_string(),
                old: par.key.join(","),
                new: k.join(","),
            })
        }
        (_, Some(k)) => k.clone(),
        (Some(par), None) => par.key.clone(),
        (None, None) => Vec::new(),
    };
    if key.is_empty() && matches!(p.mode, Mode::Upsert | Mode::Delete) {
        return Err(Error::NoKey {
            table: table.to_string(),
            mode: p.mode.name().to_string(),
        });
    }

    if p.mode == Mode::Delete {
        let Some(par) = parent else {
            return Err(Error::InvalidArgument(format!(
                "table '{table}' does not exist yet, so there is nothing to delete"
            )));
        };
        return plan_delete(store, table, par, &input, &key, p.settings).await;
    }

    let (schema, schema_moved, rewrite_all) = resolve_schema(
        table,
        parent.map(|s| &s.schema),
        &input.schema(),
        p.allow_schema_change,
        p.mode,
    )?;
    let input = align(&input, &schema).map_err(|message| Error::Input {
        path: table.to_string(),
        message,
    })?;
    let key_idx = keys::key_indices(table, &schema, &key)?;
    let codec = if key.is_empty() {
        None
    } else {
        Some(KeyCodec::new(&schema, key_idx.clone())?)
    };
    let order: Vec<u32> = match &codec {
        Some(c) => keys::validate_and_order(table, &input, c)?,
        None => (0..input.num_rows() as u32).collect(),
    };
    let in_hashes = hash_rows(&input)?;
    let parent_live = if rewrite_all { None } else { parent };

    // Decide: which input rows to write, which old positions to remove.
    let mut write = vec![false; input.num_rows()];
    let mut removals: BTreeMap<usize, Vec<u32>> = BTreeMap::new();
    let mut removed_hash = ContentHash::EMPTY;
    let (mut added, mut changed, mut deleted) = (0u64, 0u64, 0u64);
    match (p.mode, parent_live) {
        (_, None) => {
            write.iter_mut().for_each(|w| *w = true);
            added = input.num_rows() as u64;
            deleted = parent.map_or(0, |s| s.rows);
        }
        (Mode::Append, Some(_)) if codec.is_none() => {
            write.iter_mut().for_each(|w| *w = true);
            added = input.num_rows() as u64;
        }
        (Mode::Append | Mode::Upsert, Some(par)) => {
            let kschema = keys::key_schema(&schema, &key_idx);
            let kcodec = KeyCodec::new(&kschema, (0..key_idx.len()).collect())?;
            let in_keys = input
                .project(&key_idx)
                .map_err(Error::arrow("reading keys"))?;
            let found = locate(store, par, &kschema, &kcodec, &in_keys).await?;
            if p.mode == Mode::Append {
                if let Some(i) = found.iter().position(Option::is_some) {
                    return Err(Error::KeyExists {
                        table: table.to_string(),
                        key: keys::key_text(&input, &key_idx, i),
                    });
                }
            }
            let mut by_file: BTreeMap<usize, Vec<u32>> = BTreeMap::new();
            for l in found.iter().flatten() {
                by_file.entry(l.file).or_default().push(l.pos);
            }
            by_file.values_mut().for_each(|v| v.sort_unstable());
            let old = hashes_at(store, par, &schema, &by_file).await?;
            for (i, f) in found.iter().enumerate() {
                match f {
                    None => {
                        write[i] = true;
                        added += 1;
                    }
                    Some(l) => {
                        let old_h = old.get(&(l.file, l.pos)).copied();
                        if old_h != Some(in_hashes[i]) {
                            write[i] = true;
                            changed += 1;
                            removals.entry(l.file).or_default().push(l.pos);
                            if let Some(h) = old_h {
                                removed_hash.add(&h);
                            }
                        }
                    }
                }
            }
        }
        (Mode::Overwrite, Some(par)) => {
            let (old_rows, old_keys) = read_all(store, par, &schema, codec.as_ref()).await?;
            if let Some(c) = &codec {
                let in_rows = c.rows(&input)?;
                let mut index: HashMap<&[u8], usize> = HashMap::with_capacity(old_keys.len());
                for (j, k) in old_keys.iter().enumerate() {
                    index.insert(k.as_slice(), j);
                }
                let mut seen = vec![false; old_rows.len()];
                for i in 0..input.num_rows() {
                    match index.get(in_rows.row(i).as_ref()) {
                        None => {
                            write[i] = true;
                            added += 1;
                        }
                        Some(&j) => {
                            seen[j] = true;
                            if old_rows[j].hash != in_hashes[i] {
                                write[i] = true;
                                changed += 1;
                                removals
                                    .entry(old_rows[j].loc.file)
                                    .or_default()
                                    .push(old_rows[j].loc.pos);
                                removed_hash.add(&old_rows[j].hash);
                            }
                        }
                    }
                }
                for (j, r) in old_rows.iter().enumerate() {
                    if !seen[j] {
                        deleted += 1;
                        removals.entry(r.loc.file).or_default().push(r.loc.pos);
                        removed_hash.add(&r.hash);
                    }
                }
            } else {
                // Unkeyed: the rows' multiset decides. Each input row uses up
                // one old row with the same hash; what is left over changed.
                let mut pool: HashMap<RowHash, Vec<Loc>> = HashMap::new();
                for r in old_rows.iter().rev() {
                    pool.entry(r.hash).or_default().push(r.loc);
                }
                for (i, h) in in_hashes.iter().enumerate() {
                    match pool.get_mut(h).and_then(Vec::pop) {
                        Some(_) => {}
                        None => {
                            write[i] = true;
                            added += 1;
                        }
                    }
                }
                for (h, locs) in pool {
                    for l in locs {
                        deleted += 1;
                        removals.entry(l.file).or_default().push(l.pos);
                        removed_hash.add(&h);
                    }
                }
            }
        }
        (Mode::Delete, Some(_)) => {
            return Err(Error::InvalidArgument(
                "internal: delete planned twice".into(),
            ))
        }
    }

    // New data files: the written rows, in key order (keyed) or input order.
    let rows_out: Vec<u32> = order
        .iter()
        .copied()
        .filter(|i| write[*i as usize])
        .collect();
    let mut blobs = Vec::new();
    let mut new_files = Vec::new();
    let props = p.settings.properties()?;
    for chunk in rows_out.chunks(p.settings.file_rows.max(1)) {
        let b = keys::take(&input, chunk)?;
        let hash_sum: ContentHash = chunk.iter().map(|i| in_hashes[*i as usize]).collect();
        let (entry, bytes) = new_data_file(&b, hash_sum, &key_idx, &props)?;
        new_files.push(entry);
        blobs.push(bytes);
    }
    let added_hash: ContentHash = rows_out.iter().map(|i| in_hashes[*i as usize]).collect();

    // Old files: new deletion vectors where rows were removed.
    let mut files = Vec::new();
    if let Some(par) = parent_live {
        let (kept, dv_blobs) = apply_removals(store, par, &removals).await?;
        files = kept;
        blobs.extend(dv_blobs);
    }
    let old_count = files.len();
    files.extend(new_files);
    if !schema_moved && !removals.is_empty() {
        compact(store, &mut files, &mut blobs, &schema, &key_idx, p.settings).await?;
    }

    let mut content = match parent_live {
        Some(par) => par.content_hash,
        None => ContentHash::EMPTY,
    };
    content.unmerge(&removed_hash);
    content.merge(&added_hash);
    if schema_moved && parent_live.is_some() {
        // Every row's hash includes every column: a new column changes them
        // all, so the old files are hashed again under the new schema.
        content = rehash(store, &mut files[..old_count], &schema).await?;
        content.merge(&added_hash);
    }

    let rows: u64 = files.iter().map(FileEntry::live_rows).sum();
    let snapshot = TableSnapshot {
        format: FORMAT_VERSION,
        schema: (*schema).clone(),
        key,
        files,
        rows,
        content_hash: content,
    };
    let checks = checks(parent, &snapshot);
    Ok(TablePlan {
        snapshot,
        blobs,
        rows_added: added,
        rows_changed: changed,
        rows_deleted: deleted,
        checks,
    })
}

/// Hashes every row of `files` again under `schema`; sets each file's
/// `hash_sum` and returns the sum over their live rows.
async fn rehash(store: &Store, files: &mut [FileEntry], schema: &SchemaRef) -> Result<ContentHash> {
    let mut live = ContentHash::EMPTY;
    for f in files.iter_mut() {
        let bytes = store.get_blob(&f.data).await?;
        let dv = load_dv(store, f).await?;
        let batches = read_data_file(f.data, bytes, schema, Select::All)?;
        let mut all = ContentHash::EMPTY;
        let mut pos = 0u32;
        for b in &batches {
            for h in hash_rows(b)? {
                all.add(&h);
                if !dv.as_ref().is_some_and(|d| d.contains(pos)) {
                    live.add(&h);
                }
                pos += 1;
            }
        }
        f.hash_sum = all;
    }
    Ok(live)
}

/// The parent's files with the removals folded into their deletion vectors;
/// a file with no live row left is dropped. Returns the new deletion-vector
/// blobs.
pub(crate) async fn apply_removals(
    store: &Store,
    parent: &TableSnapshot,
    removals: &BTreeMap<usize, Vec<u32>>,
) -> Result<(Vec<FileEntry>, Vec<Bytes>)> {
    let mut files = Vec::with_capacity(parent.files.len());
    let mut blobs = Vec::new();
    for (fi, f) in parent.files.iter().enumerate() {
        let Some(pos) = removals.get(&fi) else {
            files.push(f.clone());
            continue;
        };
        let mut bm = load_dv(store, f).await?.unwrap_or_default();
        bm.extend(pos.iter().copied());
        if bm.len() >= f.rows {
            continue;
        }
        let bytes = encode_dv(&bm)?;
        let mut nf = f.clone();
        nf.deletes = Some(DeletionVector {
            blob: ObjectId::of(&bytes),
            count: bm.len(),
            bytes: bytes.len() as u64,
        });
        files.push(nf);
        blobs.push(bytes);
    }
    Ok((files, blobs))
}

/// Writes rows (in their final order) as a new data file and its entry.
fn new_data_file(
    rows: &RecordBatch,
    hash_sum: ContentHash,
    key_idx: &[usize],
    props: &parquet::file::properties::WriterProperties,
) -> Result<(FileEntry, Bytes)> {
    let bytes = write_data_file(rows, props)?;
    let (key_min, key_max) = keys::bounds(rows, key_idx);
    let entry = FileEntry {
        data: ObjectId::of(&bytes),
        rows: rows.num_rows() as u64,
        bytes: bytes.len() as u64,
        hash_sum,
        deletes: None,
        key_min,
        key_max,
    };
    Ok((entry, bytes))
}

/// Automatic compaction (see `WriteSettings::compact_hidden_permille`):
/// rewrites the files whose deletion vectors hide the most rows, keeping
/// their live rows in their order, until the hidden rows are under half the
/// threshold. The rows the snapshot sees, and so its content hash, do not
/// change; each rewrite checks that its rows hash to the old file's sum
/// minus the hidden rows, and refuses otherwise. Returns the files
/// rewritten.
async fn compact(
    store: &Store,
    files: &mut [FileEntry],
    blobs: &mut Vec<Bytes>,
    schema: &SchemaRef,
    key_idx: &[usize],
    settings: &WriteSettings,
) -> Result<usize> {
    let threshold = f64::from(settings.compact_hidden_permille) / 1000.0;
    let total: u64 = files.iter().map(|f| f.rows).sum();
    let mut hidden: u64 = files.iter().map(|f| f.rows - f.live_rows()).sum();
    if threshold <= 0.0 || total == 0 || hidden as f64 <= threshold * total as f64 {
        return Ok(0);
    }
    let target = threshold / 2.0 * total as f64;
    let mut order: Vec<usize> = (0..files.len())
        .filter(|i| files[*i].deletes.is_some())
        .collect();
    order.sort_by_key(|i| std::cmp::Reverse(files[*i].rows - files[*i].live_rows()));
    let fresh: HashMap<ObjectId, Bytes> =
        blobs.iter().map(|b| (ObjectId::of(b), b.clone())).collect();
    let get = |id: ObjectId| {
        let fresh = fresh.get(&id).cloned();
        async move {
            match fresh {
                Some(b) => Ok(b),
                None => store.get_blob(&id).await.map_err(Error::from),
            }
        }
    };
    let props = settings.properties()?;
    let mut rewritten = 0;
    for i in order {
        if hidden as f64 <= target {
            break;
        }
        let f = files[i].clone();
        let Some(dv) = &f.deletes else { continue };
        let bm = super::datafile::decode_dv(dv.blob, &get(dv.blob).await?)?;
        let data = get(f.data).await?;
        let live = read_data_file(f.data, data.clone(), schema, Select::Live(Some(&bm)))?;
        let live = concat_batches(schema, &live).map_err(Error::arrow("compacting a data file"))?;
        let gone: Vec<u32> = bm.iter().collect();
        let gone = read_data_file(f.data, data, schema, Select::Positions(&gone))?;
        let mut expect = f.hash_sum;
        for b in &gone {
            for h in hash_rows(b)? {
                expect.sub(&h);
            }
        }
        let hash_sum: ContentHash = hash_rows(&live)?.into_iter().collect();
        if hash_sum != expect {
            return Err(Error::BadBlob {
                blob: f.data,
                what: "Parquet data file",
                message:
                    "its rows do not hash to the sum its snapshot records; run `tablepin verify`"
                        .into(),
            });
        }
        let (entry, bytes) = new_data_file(&live, hash_sum, key_idx, &props)?;
        files[i] = entry;
        // The deletion vector this commit wrote for the file, if no other
        // file uses the same bitmap, is no longer needed.
        if !files
            .iter()
            .any(|g| g.deletes.as_ref().map(|d| d.blob) == Some(dv.blob))
        {
            blobs.retain(|b| ObjectId::of(b) != dv.blob);
        }
        blobs.push(bytes);
        hidden -= f.rows - f.live_rows();
        rewritten += 1;
    }
    Ok(rewritten)
}

/// `--mode delete`: remove the rows whose keys the input lists.
async fn plan_delete(
    store: &Store,
    table: &str,
    par: &TableSnapshot,
    input: &RecordBatch,
    key: &[String],
    settings: &WriteSettings,
) -> Result<TablePlan> {
    let schema = schema_of(par);
    let key_idx = keys::key_indices(table, &schema, key)?;
    let in_idx = keys::key_indices(table, &input.schema(), key)?;
    let in_keys = input
        .project(&in_idx)
        .map_err(Error::arrow("reading keys"))?;
    let kschema = keys::key_schema(&schema, &key_idx);
    for (f_in, f_t) in in_keys.schema().fields().iter().zip(kschema.fields()) {
        if f_in.data_type() != f_t.data_type() {
            return Err(Error::SchemaChange {
                table: table.to_string(),
                detail: format!(
                    "key column '{}' is {} in the input but {} in the table",
                    f_t.name(),
                    f_in.data_type(),
                    f_t.data_type()
                ),
            });
        }
    }
    let in_keys = align(&in_keys, &kschema).map_err(|message| Error::Input {
        path: table.to_string(),
        message,
    })?;
    let kcodec = KeyCodec::new(&kschema, (0..key_idx.len()).collect())?;
    keys::validate_and_order(table, &in_keys, &kcodec)?;
    let found = locate(store, par, &kschema, &kcodec, &in_keys).await?;
    let mut removals: BTreeMap<usize, Vec<u32>> = BTreeMap::new();
    for l in found.iter().flatten() {
        removals.entry(l.file).or_default().push(l.pos);
    }
    removals.values_mut().for_each(|v| v.sort_unstable());
    let old = hashes_at(store, par, &schema, &removals).await?;
    let mut content = par.content_hash;
    for h in old.values() {
        content.sub(h);
    }
    let deleted = old.len() as u64;
    let (mut files, mut blobs) = apply_removals(store, par, &removals).await?;
    if !removals.is_empty() {
        compact(store, &mut files, &mut blobs, &schema, &key_idx, settings).await?;
    }
    let rows = files.iter().map(FileEntry::live_rows).sum();
    let snapshot = TableSnapshot {
        format: FORMAT_VERSION,
        schema: par.schema.clone(),
        key: par.key.clone(),
        files,
        rows,
        content_hash: content,
    };
    let checks = checks(Some(par), &snapshot);
    Ok(TablePlan {
        snapshot,
        blobs,
        rows_added: 0,
        rows_changed: 0,
        rows_deleted: deleted,
        checks,
    })
}

/// The four checks of a new snapshot against its parent.
pub(crate) fn checks(parent: Option<&TableSnapshot>, new: &TableSnapshot) -> Checks {
    let file_ids = |s: &TableSnapshot| -> Vec<(ObjectId, Option<ObjectId>)> {
        s.files
            .iter()
            .map(|f| (f.data, f.deletes.as_ref().map(|d| d.blob)))
            .collect()
    };
    match parent {
        None => Checks {
            rows: new.rows > 0,
            schema: true,
            files: !new.files.is_empty(),
            content: new.rows > 0,
        },
        Some(p) => Checks {
            rows: p.rows != new.rows,
            schema: p.schema != new.schema || p.key != new.key,
            files: file_ids(p) != file_ids(new),
            content: p.content_hash != new.content_hash,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::DataType;

    fn schema(fields: &[(&str, DataType, bool)]) -> Schema {
        Schema::new(
            fields
                .iter()
                .map(|(n, t, null)| Field::new(*n, t.clone(), *null))
                .collect::<Vec<_>>(),
        )
    }

    #[test]
    fn adding_a_nullable_column_is_allowed() {
        let p = schema(&[("a", DataType::Int64, false)]);
        let i = schema(&[("a", DataType::Int64, false), ("b", DataType::Utf8, true)]);
        let (s, moved, rewrite) = resolve_schema("t", Some(&p), &i, false, Mode::Append).unwrap();
        assert!(moved && !rewrite);
        assert_eq!(s.fields().len(), 2);
    }

    #[test]
    fn other_changes_are_refused_unless_allowed() {
        let p = schema(&[("a", DataType::Int64, false)]);
        let t = schema(&[("a", DataType::Utf8, false)]);
        let err = resolve_schema("t", Some(&p), &t, false, Mode::Overwrite).unwrap_err();
        assert!(
            err.to_string()
                .contains("column 'a' would change type from Int64 to Utf8"),
            "{err}"
        );
        let (_, moved, rewrite) = resolve_schema("t", Some(&p), &t, true, Mode::Overwrite).unwrap();
        assert!(moved && rewrite);
        assert!(resolve_schema("t", Some(&p), &t, true, Mode::Append).is_err());
        let missing = schema(&[("z", DataType::Int64, true)]);
        let err = resolve_schema("t", Some(&p), &missing, false, Mode::Overwrite).unwrap_err();
        assert!(err.to_string().contains("column 'a' is missing"), "{err}");
    }
}
