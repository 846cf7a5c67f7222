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
use std::ops::Range;
use std::sync::Arc;

use arrow::array::{Array, RecordBatch, UInt32Array};
use arrow::compute::{concat_batches, take_record_batch};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use bytes::Bytes;
use roaring::RoaringBitmap;
use serde::{Deserialize, Serialize};
use tablepin_format::{
    Checks, ContentHash, DeletionVector, FileEntry, KeyBound, ObjectId, RowHash, TableSnapshot,
    FORMAT_VERSION,
};
use tablepin_rowhash::{hash_rows, RowHashError};
use tablepin_store::Store;

use super::datafile::{
    read_data_file, write_data_file, DataFile, PageIndex, Select, WriteSettings,
};
use super::decide::{self, Decision, Loc, OldRow};
use super::keys::{self, KeyCodec, SortKeys};
use super::types::{self, Fit};
use super::{align, diff, dv, par, schema_of};
use crate::error::{Error, Result};

/// How a commit's input relates to the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
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
    /// No input: the table's live rows are written again as full files,
    /// in key order, without deletion vectors (`tablepin compact`).
    Compact,
}

impl Mode {
    /// The mode's name on the command line.
    pub fn name(&self) -> &'static str {
        match self {
            Mode::Overwrite => "overwrite",
            Mode::Append => "append",
            Mode::Upsert => "upsert",
            Mode::Delete => "delete",
            Mode::Compact => "compact",
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
    pub(crate) rules: SchemaRules,
    pub(crate) settings: &'a WriteSettings,
}

/// The planned change to one table: the snapshot it makes and the blobs it
/// writes, named by their ids. It holds ids and counts, not bytes: the bytes
/// are made again from the same input when a saved plan is applied
/// ([`crate::Transaction::apply`]), and every id says they are the same.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TablePlan {
    /// The table's snapshot after the commit (every file it will list).
    pub snapshot: TableSnapshot,
    /// The data files and deletion vectors the commit writes, in write
    /// order (those the repository holds already are not stored again).
    pub writes: Vec<PlannedBlob>,
    /// Rows whose key (or, unkeyed, whose value) is new.
    pub rows_added: u64,
    /// Rows whose key existed with other values.
    pub rows_changed: u64,
    /// Rows removed.
    pub rows_deleted: u64,
    /// Which checks see the change against the parent.
    pub checks: Checks,
}

/// One blob a plan writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedBlob {
    /// Its id (the BLAKE3 of its bytes).
    pub id: ObjectId,
    /// Its size.
    pub bytes: u64,
}

/// A plan with the bytes it writes, ready to be written.
pub(crate) struct Staged {
    pub(crate) plan: TablePlan,
    /// The bytes of `plan.writes`, in the same order.
    pub(crate) blobs: Vec<Bytes>,
}

impl Staged {
    /// The plan of a new snapshot, its checks taken against the parent's;
    /// `rows` are the rows added, changed and deleted.
    pub(crate) fn new(
        parent: Option<&TableSnapshot>,
        snapshot: TableSnapshot,
        blobs: Vec<Bytes>,
        rows: (u64, u64, u64),
    ) -> Self {
        let checks = checks(parent, &snapshot);
        let writes = blobs
            .iter()
            .map(|b| PlannedBlob {
                id: ObjectId::of(b),
                bytes: b.len() as u64,
            })
            .collect();
        Self {
            plan: TablePlan {
                snapshot,
                writes,
                rows_added: rows.0,
                rows_changed: rows.1,
                rows_deleted: rows.2,
                checks,
            },
            blobs,
        }
    }
}

/// The input's keys as bounds (single integer or text key), in key order,
/// beside the input rows they belong to: which input rows a file's key
/// range can hold is then two binary searches, not a comparison per row
/// and file.
pub(crate) struct SortedBounds {
    /// `None` when the key has no bounds (composite or other types).
    bounds: Option<Vec<KeyBound>>,
    /// Input rows in key order.
    order: Vec<u32>,
}

impl SortedBounds {
    pub(crate) fn new(input: &RecordBatch, key_idx: &[usize], order: &[u32]) -> Self {
        let bounds = match key_idx {
            [k] => keys::all_bounds(input.column(*k))
                .map(|b| order.iter().map(|i| b[*i as usize].clone()).collect()),
            _ => None,
        };
        Self {
            bounds,
            order: order.to_vec(),
        }
    }

    /// The input rows (in key order) whose keys lie in `file`'s key range;
    /// `None` when that cannot be told from bounds.
    fn within(&self, file: &FileEntry) -> Option<&[u32]> {
        let (Some(b), Some(lo), Some(hi)) = (&self.bounds, &file.key_min, &file.key_max) else {
            return None;
        };
        let start = b.partition_point(|k| k < lo);
        let end = b.partition_point(|k| k <= hi);
        Some(&self.order[start..end.max(start)])
    }
}

/// How the input's columns may differ from the table's.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SchemaRules {
    /// Accept any change (the table is rewritten; overwrite only).
    pub(crate) allow_change: bool,
    /// Cast input columns to the table's types when no value changes.
    pub(crate) cast: bool,
}

/// The schema the table has after this commit, whether it moved, and
/// whether the old files must be dropped (an incompatible change that
/// `--allow-schema-change` accepted). Physical variants of the table's
/// types and narrower numbers are read as the table's types, a wider
/// number widens a column that is not a key, and a new nullable column is
/// added, in any mode (see `types::Fit`).
pub(crate) fn resolve_schema(
    table: &str,
    parent: Option<&Schema>,
    input: &Schema,
    rules: SchemaRules,
    mode: Mode,
    key: &[String],
) -> Result<(SchemaRef, bool, bool)> {
    let Some(parent) = parent else {
        return Ok((Arc::new(Schema::new(input.fields().clone())), true, false));
    };
    let mut problem: Option<String> = None;
    let mut cast_to = None;
    let mut fields: Vec<Field> = Vec::new();
    let mut moved = false;
    for pf in parent.fields() {
        let Ok(inf) = input.field_with_name(pf.name()) else {
            problem.get_or_insert(format!("column '{}' is missing from the input", pf.name()));
            continue;
        };
        let change = || {
            format!(
                "column '{}' would change type from {} to {}",
                pf.name(),
                pf.data_type(),
                inf.data_type()
            )
        };
        let is_key = key.iter().any(|k| k == pf.name());
        let data_type = match types::fit(pf.data_type(), inf.data_type()) {
            Fit::Same | Fit::Conform => pf.data_type().clone(),
            Fit::Widen if !is_key => {
                moved = true;
                inf.data_type().clone()
            }
            Fit::Widen | Fit::Cast if rules.cast => pf.data_type().clone(),
            Fit::Widen | Fit::Cast => {
                if problem.is_none() {
                    let why = if is_key {
                        " (a key column's type does not widen)"
                    } else {
                        ""
                    };
                    problem = Some(format!("{}{why}", change()));
                    cast_to = Some((pf.name().clone(), pf.data_type().to_string()));
                }
                continue;
            }
            Fit::Change => {
                problem.get_or_insert(change());
                continue;
            }
        };
        let nullable = pf.is_nullable() || inf.is_nullable();
        moved |= nullable != pf.is_nullable();
        fields.push(
            pf.as_ref()
                .clone()
                .with_nullable(nullable)
                .with_data_type(data_type),
        );
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
        Some(detail) if !rules.allow_change => Err(Error::SchemaChange {
            table: table.to_string(),
            detail,
            cast_to,
        }),
        Some(detail) if mode != Mode::Overwrite => Err(Error::RewriteNeedsOverwrite {
            table: table.to_string(),
            detail,
        }),
        Some(_) => Ok((Arc::new(Schema::new(input.fields().clone())), true, true)),
    }
}

/// The pages of a file's (single, integer or text) key column that can hold
/// one of `keys`, as row ranges; `None` when the file has no usable page
/// index, and then every row is a candidate.
fn key_pages(
    file: &DataFile,
    key_schema: &SchemaRef,
    codec: &KeyCodec,
    keys: &SortKeys,
    cand: &[usize],
) -> Result<Option<Vec<Range<usize>>>> {
    let field = key_schema.field(0);
    if key_schema.fields().len() != 1
        || !matches!(
            field.data_type(),
            DataType::Int8
                | DataType::Int16
                | DataType::Int32
                | DataType::Int64
                | DataType::Utf8
                | DataType::LargeUtf8
        )
    {
        return Ok(None);
    }
    let Some(pages) = file.pages(field.name()) else {
        return Ok(None);
    };
    if pages.mins.null_count() > 0 || pages.maxes.null_count() > 0 {
        return Ok(None);
    }
    let as_keys = |col: &arrow::array::ArrayRef| -> Result<SortKeys> {
        let b = RecordBatch::try_new(key_schema.clone(), vec![col.clone()])
            .map_err(Error::arrow("reading key statistics"))?;
        codec.sort_keys(&[b])
    };
    let (mins, maxes) = (as_keys(&pages.mins)?, as_keys(&pages.maxes)?);
    let mut picked: Vec<usize> = Vec::new();
    for &i in cand {
        let k = keys.get(i);
        // The file is sorted by key, so its pages are too: the first page
        // whose largest key reaches `k` is the only one that can hold it.
        let p = maxes.first_not_below(k);
        if p < mins.len() && mins.get(p) <= k {
            picked.push(p);
        }
    }
    picked.sort_unstable();
    picked.dedup();
    let mut ranges: Vec<Range<usize>> = Vec::with_capacity(picked.len());
    for p in picked {
        let r = pages.rows[p].clone();
        match ranges.last_mut() {
            Some(last) if last.end == r.start => last.end = r.end,
            _ => ranges.push(r),
        }
    }
    Ok(Some(ranges))
}

/// The live positions of the keys `cand` (indices into `keys`) in a file
/// whose integer keys are dense: as many distinct keys as rows between its
/// smallest and largest, so (the file being sorted by key) the row of key
/// `k` is `k - smallest`, and nothing needs reading. A table keyed by a
/// counter has such files (its first commit's, compaction's); a weekly
/// file of new and changed rows does not. `None` for any other file.
fn dense_positions(
    file: &FileEntry,
    dv: Option<&RoaringBitmap>,
    keys: &SortKeys,
    cand: &[usize],
) -> Option<Vec<(usize, u32)>> {
    let (SortKeys::Int(keys), Some(KeyBound::Int(lo)), Some(KeyBound::Int(hi))) =
        (keys, &file.key_min, &file.key_max)
    else {
        return None;
    };
    let span = hi.checked_sub(*lo)?.checked_add(1)?;
    if u64::try_from(span).ok()? != file.rows || file.rows > u64::from(u32::MAX) {
        return None;
    }
    Some(
        cand.iter()
            .filter_map(|&i| {
                let k = *keys.get(i)?;
                let pos = u32::try_from(k.checked_sub(*lo)?).ok()?;
                (k <= *hi && !dv.is_some_and(|d| d.contains(pos))).then_some((i, pos))
            })
            .collect(),
    )
}

/// Finds the live positions of the keys `cand` (indices into `keys`) in one
/// file, reading only the key pages that can hold them.
fn locate_in_file(
    file: &DataFile,
    dv: Option<&RoaringBitmap>,
    key_schema: &SchemaRef,
    codec: &KeyCodec,
    keys: &SortKeys,
    cand: &[usize],
) -> Result<Vec<(usize, u32)>> {
    let ranges = match key_pages(file, key_schema, codec, keys, cand)? {
        Some(r) => r,
        None => std::iter::once(0..file.rows()).collect(),
    };
    if ranges.is_empty() {
        return Ok(Vec::new());
    }
    let batches = file.read(key_schema, Select::Ranges(&ranges))?;
    let found = codec.sort_keys(&batches)?;
    // Where each range starts among the rows read.
    let mut starts = Vec::with_capacity(ranges.len());
    let mut acc = 0usize;
    for r in &ranges {
        starts.push(acc);
        acc += r.len();
    }
    let mut out = Vec::new();
    for &i in cand {
        let Some(j) = found.find(keys.get(i)) else {
            continue;
        };
        let r = starts.partition_point(|s| *s <= j) - 1;
        let pos = (ranges[r].start + (j - starts[r])) as u32;
        if !dv.is_some_and(|d| d.contains(pos)) {
            out.push((i, pos));
        }
    }
    Ok(out)
}

/// What a look-up found in the parent: each input key's live position, the
/// hash of each row found (under the commit's schema), and the deletion
/// vectors it read (by parent file), which the commit then extends.
pub(crate) struct Found {
    pub(crate) locs: Vec<Option<Loc>>,
    pub(crate) hashes: HashMap<(usize, u32), RowHash>,
    pub(crate) dvs: Dvs,
    held: Held,
}

impl Found {
    /// What a look-up would find, known without one: each input row's
    /// live parent row, if any, and the hash of each row named.
    pub(crate) fn known(locs: Vec<Option<Loc>>, hashes: HashMap<(usize, u32), RowHash>) -> Self {
        Self {
            locs,
            hashes,
            dvs: Dvs::new(),
            held: Held::new(),
        }
    }
}

/// The verified bytes of the parent's data files a plan read, by blob:
/// compaction, which rewrites the files hiding the most rows (often the
/// ones just read), takes them from here instead of asking the store again.
pub(crate) type Held = HashMap<ObjectId, Bytes>;

/// Deletion vectors read already, by parent file index (`None`: the file
/// has none).
pub(crate) type Dvs = HashMap<usize, Option<RoaringBitmap>>;

/// A look-up of input keys in the parent: each input key's live position
/// among the parent's files, and the hashes of the rows found. In two
/// steps: [`LookUp::prepare`] picks the files whose key range can hold an
/// input key and reads their deletion vectors (small reads, done before a
/// commit starts its CPU-bound work: queued behind it they waited ~4 ms
/// for a core); [`LookUp::run`] reads in those files only the key pages
/// that can hold an input key, and then the pages of the rows found. Each
/// file is fetched, verified, opened, looked up and hashed as one job on
/// the machine's cores: one wait for all of it.
pub(crate) struct LookUp {
    /// Parent file index and the input rows its key range can hold.
    work: Vec<(usize, Vec<usize>)>,
    dvs: Vec<Option<RoaringBitmap>>,
}

impl LookUp {
    pub(crate) async fn prepare(
        store: &Store,
        parent: &TableSnapshot,
        sorted: &SortedBounds,
        n: usize,
    ) -> Result<Self> {
        let mut work = Vec::new();
        if n > 0 {
            for (fi, f) in parent.files.iter().enumerate() {
                let cand: Vec<usize> = match sorted.within(f) {
                    Some(rows) => rows.iter().map(|i| *i as usize).collect(),
                    None => (0..n).collect(),
                };
                if !cand.is_empty() {
                    work.push((fi, cand));
                }
            }
        }
        let dvs = dv::load_many(store, work.iter().map(|(fi, _)| &parent.files[*fi])).await?;
        Ok(Self { work, dvs })
    }

    pub(crate) async fn run(
        self,
        store: &Store,
        parent: &TableSnapshot,
        schema: &SchemaRef,
        key_schema: &SchemaRef,
        codec: &KeyCodec,
        input_keys: &RecordBatch,
    ) -> Result<Found> {
        let n = input_keys.num_rows();
        let mut found = Found {
            locs: vec![None; n],
            hashes: HashMap::new(),
            dvs: HashMap::new(),
            held: HashMap::new(),
        };
        if self.work.is_empty() {
            return Ok(found);
        }
        let Self { work, dvs } = self;
        let keys = codec.sort_keys(std::slice::from_ref(input_keys))?;
        let ids: Vec<ObjectId> = work.iter().map(|(fi, _)| parent.files[*fi].data).collect();
        let per_file = store
            .map_blobs(&ids, |i, bytes| {
                let held = bytes.clone();
                let (entry, dv, cand) = (&parent.files[work[i].0], dvs[i].as_ref(), &work[i].1);
                // A dense file's hits are known without its key pages, so
                // it is opened without the pages' statistics.
                let dense = dense_positions(entry, dv, &keys, cand);
                let index = match dense {
                    Some(_) => PageIndex::Locations,
                    None => PageIndex::WithStats,
                };
                let file = DataFile::open_with(ids[i], bytes, index)?;
                let hits = match dense {
                    Some(hits) => hits,
                    None => locate_in_file(&file, dv, key_schema, codec, &keys, cand)?,
                };
                let mut positions: Vec<u32> = hits.iter().map(|(_, p)| *p).collect();
                positions.sort_unstable();
                let mut hashes = Vec::with_capacity(positions.len());
                if !positions.is_empty() {
                    for b in file.read(schema, Select::Positions(&positions))? {
                        hashes.extend(hash_rows(&b)?);
                    }
                }
                Ok::<_, Error>((hits, positions, hashes, held))
            })
            .await?;
        for ((fi, _), (hits, positions, hashes, held)) in work.iter().zip(per_file) {
            found.held.insert(parent.files[*fi].data, held);
            for (i, pos) in hits {
                found.locs[i] = Some(Loc { file: *fi, pos });
            }
            for (p, h) in positions.into_iter().zip(hashes) {
                found.hashes.insert((*fi, p), h);
            }
        }
        found.dvs = work.iter().map(|(fi, _)| *fi).zip(dvs).collect();
        Ok(found)
    }
}

/// The input's row hashes, computed on a worker thread while the commit
/// reads the parent's files.
struct InputHashes {
    task: Option<tokio::task::JoinHandle<std::result::Result<Vec<RowHash>, RowHashError>>>,
    done: Vec<RowHash>,
}

impl InputHashes {
    fn start(input: &RecordBatch) -> Self {
        let input = input.clone();
        Self {
            task: Some(tokio::task::spawn_blocking(move || hash_rows(&input))),
            done: Vec::new(),
        }
    }

    async fn get(&mut self) -> Result<&[RowHash]> {
        if let Some(task) = self.task.take() {
            self.done = task.await.map_err(|_| RowHashError::ThreadFailed)??;
        }
        Ok(&self.done)
    }
}

/// What [`read_all`] read of the parent's files: their live rows, their
/// deletion vectors and bytes.
pub(crate) struct ParentRows {
    pub(crate) rows: Vec<OldRow>,
    dvs: Dvs,
    held: Held,
}

/// Reads every live row of the parent files `which` with its hash, under
/// `schema` (an unkeyed overwrite's multiset); each file read, verified,
/// decoded and hashed as one job (`Store::map_blobs`).
pub(crate) async fn read_all(
    store: &Store,
    parent: &TableSnapshot,
    which: &[usize],
    schema: &SchemaRef,
) -> Result<ParentRows> {
    let dvs = dv::load_many(store, which.iter().map(|fi| &parent.files[*fi])).await?;
    let ids: Vec<ObjectId> = which.iter().map(|fi| parent.files[*fi].data).collect();
    let per_file = store
        .map_blobs(&ids, |i, bytes| {
            let held = bytes.clone();
            let file = DataFile::open(ids[i], bytes)?;
            let dv = dvs[i].as_ref();
            let batches = file.read(schema, Select::All)?;
            let mut rows = Vec::with_capacity(file.rows());
            let mut pos = 0u32;
            for b in &batches {
                for hash in hash_rows(b)? {
                    if !dv.is_some_and(|d| d.contains(pos)) {
                        let loc = Loc {
                            file: which[i],
                            pos,
                        };
                        rows.push(OldRow { loc, hash });
                    }
                    pos += 1;
                }
            }
            Ok::<_, Error>((rows, held))
        })
        .await?;
    let mut out = ParentRows {
        rows: Vec::new(),
        dvs: which.iter().copied().zip(dvs).collect(),
        held: Held::new(),
    };
    for (i, (r, bytes)) in per_file.into_iter().enumerate() {
        out.rows.extend(r);
        out.held.insert(ids[i], bytes);
    }
    Ok(out)
}

/// The key a commit's table has: the parent's, or the one given (which may
/// not change a table's key).
pub(crate) fn table_key(
    table: &str,
    parent: Option<&TableSnapshot>,
    given: &Option<Vec<String>>,
    mode: Mode,
) -> Result<Vec<String>> {
    let key: Vec<String> = match (parent, given) {
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
    if key.is_empty() && matches!(mode, Mode::Upsert | Mode::Delete) {
        return Err(Error::NoKey {
            table: table.to_string(),
            mode: mode.name().to_string(),
        });
    }
    Ok(key)
}

/// A commit's input made ready: its schema against the parent's, its rows
/// conformed to it, its key columns and its rows in key order (checked
/// unique).
struct Ready {
    schema: SchemaRef,
    /// The schema differs from the parent's.
    schema_moved: bool,
    /// Every row is written again (a schema change that rewrites).
    rewrite_all: bool,
    input: RecordBatch,
    key: Vec<String>,
    key_idx: Vec<usize>,
    codec: Option<KeyCodec>,
    order: Vec<u32>,
}

fn ready(table: &str, p: &PlanInput<'_>, input: &RecordBatch, key: &[String]) -> Result<Ready> {
    let parent_schema = p.parent.map(|s| &s.schema);
    let (schema, schema_moved, rewrite_all) =
        resolve_schema(table, parent_schema, &input.schema(), p.rules, p.mode, key)?;
    let input = conform_input(table, input, &schema)?;
    let key_idx = keys::key_indices(table, &schema, key)?;
    let codec = if key.is_empty() {
        None
    } else {
        Some(KeyCodec::new(&schema, key_idx.clone())?)
    };
    let order: Vec<u32> = match &codec {
        Some(c) => keys::validate_and_order(table, &input, c)?,
        None => (0..input.num_rows() as u32).collect(),
    };
    Ok(Ready {
        schema,
        schema_moved,
        rewrite_all,
        input,
        key: key.to_vec(),
        key_idx,
        codec,
        order,
    })
}

/// The input's rows in `schema`'s columns and types (`types::conform_rows`),
/// a value that would change named as the table's error.
pub(crate) fn conform_input(
    table: &str,
    input: &RecordBatch,
    schema: &SchemaRef,
) -> Result<RecordBatch> {
    types::conform_rows(input, schema).map_err(|e| match e {
        types::Unfit::Lossy {
            column,
            to,
            row,
            held,
            becomes,
        } => Error::LossyValue {
            table: table.to_string(),
            column,
            to,
            row,
            change: format!("holds {held} and would become {becomes}"),
        },
        other => Error::InvalidArgument(format!("the input of table '{table}': {other}")),
    })
}

/// A decision with what was read to reach it: the parent's deletion
/// vectors and data files, which the rest of the commit reuses.
struct Decided {
    decision: Decision,
    dvs: Dvs,
    held: Held,
}

/// Plans a commit to one table: reads what the decision needs, decides
/// (`decide`), then writes what it decided.
pub(crate) async fn plan(store: &Store, p: PlanInput<'_>) -> Result<Staged> {
    plan_known(store, p, None).await
}

/// [`plan`] of an upsert whose input keys' rows in the parent are known
/// already (`known`, as a look-up would find them: a merge knows them from
/// its diffs), so the parent's files are not searched for them.
pub(crate) async fn plan_known(
    store: &Store,
    p: PlanInput<'_>,
    known: Option<Found>,
) -> Result<Staged> {
    let table = p.table;
    let input = concat_batches(&p.schema, &p.batches).map_err(Error::arrow("reading the input"))?;
    let parent = p.parent;
    let key = table_key(table, parent, &p.key, p.mode)?;
    if matches!(p.mode, Mode::Compact | Mode::Delete) {
        let Some(par) = parent else {
            return Err(Error::InvalidArgument(format!(
                "table '{table}' does not exist yet, so there is nothing to {}",
                p.mode.name()
            )));
        };
        return match p.mode {
            Mode::Compact => plan_compact(store, table, par, p.settings).await,
            _ => plan_delete(store, table, par, &input, &key, p.settings).await,
        };
    }
    let r = ready(table, &p, &input, &key)?;
    drop(input);
    let parent_live = if r.rewrite_all { None } else { parent };
    let sorted = SortedBounds::new(&r.input, &r.key_idx, &r.order);
    let looks_up = matches!(p.mode, Mode::Append | Mode::Upsert) && r.codec.is_some();
    // An append or upsert of a keyed table looks its keys up in the parent:
    // the look-up's small reads go first, before the CPU-bound work below
    // takes the cores.
    let prepared = match (parent_live, known) {
        (Some(_), Some(known)) if looks_up && p.mode == Mode::Upsert => Some(Ok(known)),
        (Some(par), _) if looks_up => Some(Err(LookUp::prepare(
            store,
            par,
            &sorted,
            r.input.num_rows(),
        )
        .await?)),
        _ => None,
    };
    let mut in_hashes = InputHashes::start(&r.input);
    // Every input row is written when there is no parent, on an append, and
    // on an upsert unless some row is the same again: the new file is
    // written on a worker thread while the commit reads the parent, and
    // used if the look-up agrees (a weekly commit's appended and changed
    // rows); otherwise it is dropped and the rows are written afterwards.
    let expected = parent_live.is_none() || matches!(p.mode, Mode::Append | Mode::Upsert);
    let guess = WriteTask::start(
        if expected {
            r.order.clone()
        } else {
            Vec::new()
        },
        &r.input,
        &r.key_idx,
        p.settings,
    );
    let n = r.input.num_rows();
    let decided = match (parent_live, prepared) {
        (None, _) => Decided {
            decision: match parent {
                Some(par) => rewritten(store, par, &r).await?,
                None => Decision::all_new(n),
            },
            dvs: Dvs::new(),
            held: Held::new(),
        },
        (Some(par), Some(lookup)) => {
            let found = match lookup {
                Ok(known) => known,
                Err(lookup) => lookup.run_for(store, par, &r).await?,
            };
            found.decide(table, p.mode, &r, in_hashes.get().await?)?
        }
        (Some(_), None) if p.mode == Mode::Append => Decided {
            decision: Decision::all_new(n),
            dvs: Dvs::new(),
            held: Held::new(),
        },
        (Some(par), None) => {
            let hashes = in_hashes.get().await?;
            decide_overwrite(store, par, &r, &sorted, hashes).await?
        }
    };
    let in_hashes = in_hashes.get().await?;
    let rows_out: Vec<u32> = (r.order.iter().copied())
        .filter(|i| decided.decision.write[*i as usize])
        .collect();
    let written = match guess.finish(&rows_out).await? {
        Some(written) => written,
        None => write_files(&r.input, &rows_out, &r.key_idx, p.settings)?,
    };
    let how = Finish {
        parent,
        parent_live,
        ready: &r,
        settings: p.settings,
        in_hashes,
    };
    finish(store, &how, decided, &rows_out, written).await
}

/// A schema change that writes every row again: every input row is
/// written and every parent file dropped, but the change is counted as
/// `diff` counts it (`diff::align`, `diff::compare`: by key, in types that
/// hold both sides' values), so that `log`, `restore` and `diff` give one
/// count for one change.
async fn rewritten(store: &Store, par: &TableSnapshot, r: &Ready) -> Result<Decision> {
    let old = diff::unshared(store, par, &super::window::empty_like(par)).await?;
    let aligned = diff::align(
        &schema_of(par),
        &old.old,
        &r.schema,
        std::slice::from_ref(&r.input),
    )?;
    let key_at: Option<Vec<usize>> = (r.key.iter())
        .map(|k| aligned.schema.index_of(k).ok())
        .collect();
    let key_at = key_at.filter(|_| par.key == r.key).unwrap_or_default();
    let c = diff::compare(&key_at, &aligned.old, &aligned.new)?;
    Ok(Decision {
        added: c.added.len() as u64,
        changed: c.changed.len() as u64,
        deleted: c.removed.len() as u64,
        ..Decision::keep_all(r.input.num_rows())
    }
    .writing_all())
}

/// An overwrite: the input is the whole table. Input rows whose hashes add
/// up to those of the whole parent, or (keyed) of a group of its files,
/// are those rows, and those files are not read (`decide::overwrite_scope`).
async fn decide_overwrite(
    store: &Store,
    par: &TableSnapshot,
    r: &Ready,
    sorted: &SortedBounds,
    hashes: &[RowHash],
) -> Result<Decided> {
    let n = r.input.num_rows();
    if !r.schema_moved && decide::same_rows(hashes, par) {
        return Ok(Decided {
            decision: Decision::keep_all(n),
            dvs: Dvs::new(),
            held: Held::new(),
        });
    }
    let Some(codec) = &r.codec else {
        let all: Vec<usize> = (0..par.files.len()).collect();
        let old = read_all(store, par, &all, &r.schema).await?;
        return Ok(Decided {
            decision: decide::by_multiset(hashes, &old.rows),
            dvs: old.dvs,
            held: old.held,
        });
    };
    let mut scope = match r.schema_moved {
        false => decide::overwrite_scope(&par.files, sorted.bounds.as_deref(), &r.order, hashes),
        true => decide::Scope {
            read: (0..par.files.len()).collect(),
            rows: r.order.clone(),
            aligned: Vec::new(),
        },
    };
    let mut decision = Decision::keep_all(n);
    let (mut aligned_dvs, mut aligned_held) = (Dvs::new(), Held::new());
    let compared = compare_aligned(store, par, &scope.aligned, r).await?;
    for (a, found) in scope.aligned.iter().zip(compared) {
        let rows = &r.order[a.rows.clone()];
        match found {
            Some((differs, bytes)) => {
                decide::by_position(&mut decision, a.file, rows, differs);
                aligned_dvs.insert(a.file, None);
                aligned_held.insert(par.files[a.file].data, bytes);
            }
            // Its keys are not the input's: decided by key with the rest.
            None => {
                scope.read.push(a.file);
                scope.rows.extend_from_slice(rows);
            }
        }
    }
    scope.read.sort_unstable();
    let (files, mut dvs, mut held) = read_keyed(store, par, &scope.read, &r.schema, codec).await?;
    dvs.extend(aligned_dvs);
    held.extend(aligned_held);
    let in_keys = codec.sort_keys(std::slice::from_ref(&r.input))?;
    let input = scope
        .rows
        .iter()
        .map(|i| (*i as usize, in_keys.get(*i as usize)));
    let old = files.iter().enumerate().flat_map(|(fi, f)| {
        f.live
            .iter()
            .map(move |p| (f.keys.get(*p as usize), (fi, *p)))
    });
    let join = decide::join_by_key(input, old);
    let (changed, gone) = compare_joined(&files, &join, r, hashes)?;
    decide::by_join(&mut decision, &join.added, changed, gone);
    Ok(Decided {
        decision,
        dvs,
        held,
    })
}

/// A parent file read whole for a keyed overwrite: every row (hidden ones
/// too, so positions index them), their keys, and its live positions.
struct ReadFile {
    file: usize,
    rows: RecordBatch,
    keys: SortKeys,
    live: Vec<u32>,
}

/// Reads the parent files `which` under `schema`, without hashing their
/// rows: each file read, verified and decoded as one job.
async fn read_keyed(
    store: &Store,
    parent: &TableSnapshot,
    which: &[usize],
    schema: &SchemaRef,
    codec: &KeyCodec,
) -> Result<(Vec<ReadFile>, Dvs, Held)> {
    let dvs = dv::load_many(store, which.iter().map(|fi| &parent.files[*fi])).await?;
    let ids: Vec<ObjectId> = which.iter().map(|fi| parent.files[*fi].data).collect();
    let read = store
        .map_blobs(&ids, |i, bytes| {
            let batches = DataFile::open(ids[i], bytes.clone())?.read(schema, Select::All)?;
            let keys = codec.sort_keys(&batches)?;
            let rows =
                concat_batches(schema, &batches).map_err(Error::arrow("reading a parent file"))?;
            let dv = dvs[i].as_ref();
            let live = (0..rows.num_rows() as u32)
                .filter(|p| !dv.is_some_and(|d| d.contains(*p)))
                .collect();
            let file = which[i];
            Ok::<_, Error>((
                ReadFile {
                    file,
                    rows,
                    keys,
                    live,
                },
                bytes,
            ))
        })
        .await?;
    // `map_blobs` answers in `ids` order.
    let (files, bytes): (Vec<ReadFile>, Vec<Bytes>) = read.into_iter().unzip();
    let held: Held = ids.into_iter().zip(bytes).collect();
    Ok((files, which.iter().copied().zip(dvs).collect(), held))
}

/// Input rows that change their parent row, with that row.
type Changed = Vec<(usize, OldRow)>;

/// The joined rows compared: the input rows that change their parent row
/// (with its hash) and the parent rows gone (with their hashes). Matched
/// rows are compared column by column (`align::row_differences`), so only
/// rows that differ, and rows gone, are hashed; a file with a column no
/// kernel compares has its matched rows hashed instead.
fn compare_joined(
    files: &[ReadFile],
    join: &decide::Join<(usize, u32)>,
    r: &Ready,
    hashes: &[RowHash],
) -> Result<(Changed, Vec<OldRow>)> {
    let mut matched: Vec<(Vec<u32>, Vec<u32>)> = vec![(Vec::new(), Vec::new()); files.len()];
    for (i, (fi, pos)) in &join.matched {
        matched[*fi].0.push(*i as u32);
        matched[*fi].1.push(*pos);
    }
    let mut gone: Vec<Vec<u32>> = vec![Vec::new(); files.len()];
    for (fi, pos) in &join.gone {
        gone[*fi].push(*pos);
    }
    let jobs: Vec<usize> = (0..files.len()).collect();
    let per_file = par::map(&jobs, |fi| {
        let f = &files[*fi];
        let (ins, poss) = &matched[*fi];
        let take = |b: &RecordBatch, at: &[u32]| {
            take_record_batch(b, &UInt32Array::from(at.to_vec()))
                .map_err(Error::arrow("taking rows of a parent file"))
        };
        let loc = |pos: u32| Loc { file: f.file, pos };
        let mut changed = Vec::new();
        if !ins.is_empty() {
            let (old, new) = (take(&f.rows, poss)?, take(&r.input, ins)?);
            let differs = match align::row_differences(&old, &new, &r.key_idx)? {
                Some(d) => d,
                None => hash_rows(&old)?
                    .into_iter()
                    .enumerate()
                    .filter(|(k, h)| *h != hashes[ins[*k] as usize])
                    .map(|(k, h)| (k as u32, h))
                    .collect(),
            };
            for (k, hash) in differs {
                let k = k as usize;
                let row = OldRow {
                    loc: loc(poss[k]),
                    hash,
                };
                changed.push((ins[k] as usize, row));
            }
        }
        let gone_rows = match gone[*fi].as_slice() {
            [] => Vec::new(),
            at => hash_rows(&take(&f.rows, at)?)?
                .into_iter()
                .zip(at)
                .map(|(hash, pos)| OldRow {
                    loc: loc(*pos),
                    hash,
                })
                .collect(),
        };
        Ok((changed, gone_rows))
    })?;
    let (mut changed, mut gone) = (Vec::new(), Vec::new());
    for (c, g) in per_file {
        changed.extend(c);
        gone.extend(g);
    }
    Ok((changed, gone))
}

/// Each aligned file compared with the input rows at its positions
/// ([`align::row_differences`]): its positions that differ, with their old
/// hashes, and its bytes (which compaction reuses); `None` for a file to
/// decide by key after all.
async fn compare_aligned(
    store: &Store,
    par: &TableSnapshot,
    aligned: &[decide::Aligned],
    r: &Ready,
) -> Result<Vec<Option<(Vec<(u32, RowHash)>, Bytes)>>> {
    let ids: Vec<ObjectId> = aligned.iter().map(|a| par.files[a.file].data).collect();
    store
        .map_blobs(&ids, |i, bytes| {
            let file = DataFile::open(ids[i], bytes.clone())?;
            let old = concat_batches(&r.schema, &file.read(&r.schema, Select::All)?)
                .map_err(Error::arrow("reading a parent file"))?;
            let at = UInt32Array::from(r.order[aligned[i].rows.clone()].to_vec());
            let new = take_record_batch(&r.input, &at)
                .map_err(Error::arrow("taking the input rows of a parent file"))?;
            let found = align::row_differences(&old, &new, &r.key_idx)?;
            Ok::<_, Error>(found.map(|d| (d, bytes)))
        })
        .await
}

/// What [`finish`] builds the snapshot from.
struct Finish<'a> {
    parent: Option<&'a TableSnapshot>,
    /// The parent whose files the new snapshot keeps (none when every row
    /// is written again).
    parent_live: Option<&'a TableSnapshot>,
    ready: &'a Ready,
    settings: &'a WriteSettings,
    in_hashes: &'a [RowHash],
}

/// The new snapshot from a decision and the files written for it: the old
/// files with their new deletion vectors (compacted where they hide too
/// many rows), the new files, and the content hash moved by the rows
/// added and removed.
async fn finish(
    store: &Store,
    how: &Finish<'_>,
    decided: Decided,
    rows_out: &[u32],
    written: NewFiles,
) -> Result<Staged> {
    let Finish {
        parent,
        parent_live,
        ready: r,
        settings,
        in_hashes,
    } = *how;
    let Decided {
        decision: d,
        dvs: known_dvs,
        held,
    } = decided;
    let (mut new_files, mut blobs) = written;
    for (f, rows) in new_files.iter_mut().zip(file_chunks(rows_out, settings)) {
        f.hash_sum = rows.iter().map(|i| in_hashes[*i as usize]).collect();
    }
    let added_hash: ContentHash = rows_out.iter().map(|i| in_hashes[*i as usize]).collect();
    // Old files: new deletion vectors where rows were removed.
    let (mut files, mut dvs) = (Vec::new(), Vec::new());
    if let Some(par) = parent_live {
        (files, dvs) = apply_removals(store, par, &d.removals, known_dvs).await?;
    }
    let old_count = files.len();
    files.extend(new_files);
    if !r.schema_moved && !d.removals.is_empty() {
        let how = Compaction {
            schema: &r.schema,
            key_idx: &r.key_idx,
            settings,
            held: &held,
        };
        compact(store, &mut files, &mut dvs, &mut blobs, &how).await?;
    }
    let mut content = parent_live.map_or(ContentHash::EMPTY, |par| par.content_hash);
    content.unmerge(&d.removed_hash);
    content.merge(&added_hash);
    if r.schema_moved && parent_live.is_some() {
        // Every row's hash includes every column: a new column changes them
        // all, so the old files are hashed again under the new schema.
        content = rehash(store, &mut files[..old_count], &dvs, &r.schema).await?;
        content.merge(&added_hash);
    }
    blobs.extend(dv::pack(&mut files, dvs));
    let rows: u64 = files.iter().map(FileEntry::live_rows).sum();
    let snapshot = TableSnapshot {
        format: FORMAT_VERSION,
        schema: (*r.schema).clone(),
        key: r.key.clone(),
        files,
        rows,
        content_hash: content,
    };
    Ok(Staged::new(
        parent,
        snapshot,
        blobs,
        (d.added, d.changed, d.deleted),
    ))
}

impl LookUp {
    /// [`LookUp::run`] for a commit's input keys.
    async fn run_for(self, store: &Store, par: &TableSnapshot, r: &Ready) -> Result<Found> {
        let kschema = keys::key_schema(&r.schema, &r.key_idx);
        let kcodec = KeyCodec::new(&kschema, (0..r.key_idx.len()).collect())?;
        let in_keys = (r.input.project(&r.key_idx)).map_err(Error::arrow("reading keys"))?;
        self.run(store, par, &r.schema, &kschema, &kcodec, &in_keys)
            .await
    }
}

impl Found {
    /// Each input row's live parent row with the same key, if any.
    fn rows(&self) -> Result<Vec<Option<OldRow>>> {
        (self.locs.iter())
            .map(|l| match l {
                None => Ok(None),
                Some(loc) => match self.hashes.get(&(loc.file, loc.pos)) {
                    Some(hash) => Ok(Some(OldRow {
                        loc: *loc,
                        hash: *hash,
                    })),
                    None => Err(Error::Internal(format!(
                        "the look-up found row {} of file {} of the parent without hashing it",
                        loc.pos, loc.file
                    ))),
                },
            })
            .collect()
    }

    /// An append or upsert decided from what the look-up found (an append
    /// may not name a key the table has).
    fn decide(self, table: &str, mode: Mode, r: &Ready, hashes: &[RowHash]) -> Result<Decided> {
        if mode == Mode::Append {
            if let Some(i) = self.locs.iter().position(Option::is_some) {
                return Err(Error::KeyExists {
                    table: table.to_string(),
                    key: keys::key_text(&r.input, &r.key_idx, i),
                });
            }
        }
        let found = self.rows()?;
        Ok(Decided {
            decision: decide::by_found(&found, hashes),
            dvs: self.dvs,
            held: self.held,
        })
    }
}

/// Compaction on request: the table's live rows written again as files of
/// `file_rows` rows, in the order a read returns them (key order for a
/// keyed table), with no deletion vectors. Afterwards a key
/// look-up finds each key in one file whose range holds no other file's
/// keys, and a read opens the fewest files. The rows, and so the content
/// hash, stay the same: the new files' row hashes must add up to the
/// snapshot's content hash, or nothing is written.
/// [`Error::AlreadyCompact`] when the files would be the ones there are.
async fn plan_compact(
    store: &Store,
    table: &str,
    par: &TableSnapshot,
    settings: &WriteSettings,
) -> Result<Staged> {
    let (schema, batches, _) =
        super::scan(store, par, table, &super::ScanOptions::default()).await?;
    let rows = concat_batches(&schema, &batches).map_err(Error::arrow("compacting the table"))?;
    drop(batches);
    let key_idx = keys::key_indices(table, &schema, &par.key)?;
    // `scan` returns a keyed table's rows in key order already.
    let order: Vec<u32> = (0..rows.num_rows() as u32).collect();
    let hashes = hash_rows(&rows)?;
    let (mut files, blobs) = write_files(&rows, &order, &key_idx, settings)?;
    for (f, chunk) in files.iter_mut().zip(file_chunks(&order, settings)) {
        f.hash_sum = chunk.iter().map(|i| hashes[*i as usize]).collect();
    }
    let content: ContentHash = hashes.iter().copied().collect();
    if content != par.content_hash {
        return Err(Error::ContentMismatch {
            table: table.to_string(),
        });
    }
    let unchanged = files.len() == par.files.len()
        && files
            .iter()
            .zip(&par.files)
            .all(|(a, b)| a.data == b.data && b.deletes.is_none());
    if unchanged {
        return Err(Error::AlreadyCompact {
            table: table.to_string(),
        });
    }
    let snapshot = TableSnapshot {
        format: FORMAT_VERSION,
        schema: (*schema).clone(),
        key: par.key.clone(),
        files,
        rows: par.rows,
        content_hash: par.content_hash,
    };
    Ok(Staged::new(Some(par), snapshot, blobs, (0, 0, 0)))
}

/// New data files' entries and bytes, in the same order.
type NewFiles = (Vec<FileEntry>, Vec<Bytes>);

/// The rows of each new data file, `file_rows` at most.
pub(crate) fn file_chunks<'r>(
    rows: &'r [u32],
    settings: &WriteSettings,
) -> std::slice::Chunks<'r, u32> {
    rows.chunks(settings.file_rows.max(1))
}

/// Writes the rows `rows` of `input` (in that order) as new data files;
/// their entries' `hash_sum` is left empty for the caller to fill.
pub(crate) fn write_files(
    input: &RecordBatch,
    rows: &[u32],
    key_idx: &[usize],
    settings: &WriteSettings,
) -> Result<NewFiles> {
    let mut files = Vec::new();
    let mut blobs = Vec::new();
    for chunk in file_chunks(rows, settings) {
        let b = keys::take(input, chunk)?;
        let (entry, bytes) = new_data_file(&b, ContentHash::EMPTY, key_idx, settings)?;
        files.push(entry);
        blobs.push(bytes);
    }
    Ok((files, blobs))
}

/// New data files written on a worker thread while the commit goes on,
/// for rows the commit expects to write.
struct WriteTask {
    rows: Vec<u32>,
    task: Option<tokio::task::JoinHandle<Result<NewFiles>>>,
}

impl WriteTask {
    fn start(
        rows: Vec<u32>,
        input: &RecordBatch,
        key_idx: &[usize],
        settings: &WriteSettings,
    ) -> Self {
        if rows.is_empty() {
            return Self { rows, task: None };
        }
        let (input, key_idx, settings) = (input.clone(), key_idx.to_vec(), settings.clone());
        let todo = rows.clone();
        Self {
            rows,
            task: Some(tokio::task::spawn_blocking(move || {
                write_files(&input, &todo, &key_idx, &settings)
            })),
        }
    }

    /// The files, when the rows to write are the rows expected; `None`
    /// otherwise (the work is dropped).
    async fn finish(self, rows: &[u32]) -> Result<Option<NewFiles>> {
        match self.task {
            Some(t) if self.rows == rows => Ok(Some(t.await.map_err(|_| {
                Error::Internal("the thread writing the new data files failed".into())
            })??)),
            _ => Ok(None),
        }
    }
}

/// Hashes every row of `files` again under `schema`; sets each file's
/// `hash_sum` and returns the sum over their live rows. `fresh` are the
/// deletion vectors this commit wrote, not stored yet.
async fn rehash(
    store: &Store,
    files: &mut [FileEntry],
    fresh: &[Bytes],
    schema: &SchemaRef,
) -> Result<ContentHash> {
    let mut live = ContentHash::EMPTY;
    let dvs = dv::load_with(store, files.iter(), &mut dv::known(fresh)).await?;
    for (f, dv) in files.iter_mut().zip(dvs) {
        let bytes = store.get_blob(&f.data).await?;
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
/// blobs, each on its own ([`dv::pack`] packs them once the files are final).
pub(crate) async fn apply_removals(
    store: &Store,
    parent: &TableSnapshot,
    removals: &BTreeMap<usize, Vec<u32>>,
    mut old_dvs: Dvs,
) -> Result<(Vec<FileEntry>, Vec<Bytes>)> {
    let mut files = Vec::with_capacity(parent.files.len());
    let mut blobs = Vec::new();
    // The deletion vectors that grow and were not read yet, fetched at once.
    let growing: Vec<usize> = removals
        .keys()
        .copied()
        .filter(|fi| *fi < parent.files.len() && !old_dvs.contains_key(fi))
        .collect();
    let loaded = dv::load_many(store, growing.iter().map(|fi| &parent.files[*fi])).await?;
    old_dvs.extend(growing.into_iter().zip(loaded));
    for (fi, f) in parent.files.iter().enumerate() {
        let Some(pos) = removals.get(&fi) else {
            files.push(f.clone());
            continue;
        };
        let mut bm = old_dvs.remove(&fi).flatten().unwrap_or_default();
        bm.extend(pos.iter().copied());
        if bm.len() >= f.rows {
            continue;
        }
        let (d, bytes) = dv::new(&bm)?;
        let mut nf = f.clone();
        nf.deletes = Some(d);
        files.push(nf);
        blobs.push(bytes);
    }
    Ok((files, blobs))
}

/// Writes rows (in their final order) as a new data file and its entry:
/// commits, compaction and erasure write every data file through here.
pub(crate) fn new_data_file(
    rows: &RecordBatch,
    hash_sum: ContentHash,
    key_idx: &[usize],
    settings: &WriteSettings,
) -> Result<(FileEntry, Bytes)> {
    let schema = rows.schema();
    let key: Vec<String> = key_idx
        .iter()
        .map(|i| schema.field(*i).name().clone())
        .collect();
    let bytes = write_data_file(rows, &settings.properties_for(&key, rows)?)?;
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

/// What compaction rewrites with: the commit's schema, key and settings,
/// and the parent files the plan read already.
#[derive(Clone, Copy)]
struct Compaction<'a> {
    schema: &'a SchemaRef,
    key_idx: &'a [usize],
    settings: &'a WriteSettings,
    held: &'a Held,
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
    dvs: &mut Vec<Bytes>,
    blobs: &mut Vec<Bytes>,
    how: &Compaction<'_>,
) -> Result<usize> {
    let Compaction {
        schema,
        key_idx,
        settings,
        held,
    } = *how;
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
    let mut rewritten = 0;
    // This commit's bitmaps, named once (compaction may drop some from
    // `dvs` below; a dropped one's file is the one just rewritten).
    let mut known = dv::known(dvs);
    for i in order {
        if hidden as f64 <= target {
            break;
        }
        let f = files[i].clone();
        let Some(dv) = &f.deletes else { continue };
        let Some(bm) = dv::load(store, &f, &mut known).await? else {
            continue;
        };
        let data = match held.get(&f.data) {
            Some(bytes) => bytes.clone(),
            None => store.get_blob(&f.data).await?,
        };
        let data = DataFile::open(f.data, data)?;
        let live = data.read(schema, Select::Live(Some(&bm)))?;
        let live = concat_batches(schema, &live).map_err(Error::arrow("compacting a data file"))?;
        let gone: Vec<u32> = bm.iter().collect();
        let gone = data.read(schema, Select::Positions(&gone))?;
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
        let (entry, bytes) = new_data_file(&live, hash_sum, key_idx, settings)?;
        files[i] = entry;
        // The deletion vector this commit wrote for the file, if no other
        // file uses the same bitmap, is no longer needed.
        if !files
            .iter()
            .any(|g| g.deletes.as_ref().map(|d| d.blob) == Some(dv.blob))
        {
            dvs.retain(|b| ObjectId::of(b) != dv.blob);
        }
        blobs.push(bytes);
        hidden -= f.rows - f.live_rows();
        rewritten += 1;
    }
    Ok(rewritten)
}

/// The key columns of `input` in the types `schema` (the table's) gives
/// them, where they fit without changing a value: the keys a delete
/// looks up, and their schema.
pub(crate) fn conform_keys(
    table: &str,
    schema: &SchemaRef,
    input: &RecordBatch,
    key: &[String],
) -> Result<(RecordBatch, SchemaRef)> {
    let key_idx = keys::key_indices(table, schema, key)?;
    let in_idx = keys::key_indices(table, &input.schema(), key)?;
    let in_keys = input
        .project(&in_idx)
        .map_err(Error::arrow("reading keys"))?;
    let kschema = keys::key_schema(schema, &key_idx);
    for (f_in, f_t) in in_keys.schema().fields().iter().zip(kschema.fields()) {
        if !matches!(
            types::fit(f_t.data_type(), f_in.data_type()),
            Fit::Same | Fit::Conform
        ) {
            return Err(Error::SchemaChange {
                table: table.to_string(),
                detail: format!(
                    "key column '{}' is {} in the input but {} in the table",
                    f_t.name(),
                    f_in.data_type(),
                    f_t.data_type()
                ),
                cast_to: None,
            });
        }
    }
    let in_keys = types::conform(&in_keys, &kschema).map_err(|message| Error::Input {
        path: table.to_string(),
        message,
    })?;
    Ok((in_keys, kschema))
}

/// `--mode delete`: remove the rows whose keys the input lists.
pub(crate) async fn plan_delete(
    store: &Store,
    table: &str,
    par: &TableSnapshot,
    input: &RecordBatch,
    key: &[String],
    settings: &WriteSettings,
) -> Result<Staged> {
    let schema = schema_of(par);
    let key_idx = keys::key_indices(table, &schema, key)?;
    let (in_keys, kschema) = conform_keys(table, &schema, input, key)?;
    let kcodec = KeyCodec::new(&kschema, (0..key_idx.len()).collect())?;
    let order = keys::validate_and_order(table, &in_keys, &kcodec)?;
    let sorted = SortedBounds::new(&in_keys, &(0..key_idx.len()).collect::<Vec<_>>(), &order);
    let Found {
        locs: found,
        hashes: old,
        dvs,
        held,
    } = LookUp::prepare(store, par, &sorted, in_keys.num_rows())
        .await?
        .run(store, par, &schema, &kschema, &kcodec, &in_keys)
        .await?;
    let mut removals: BTreeMap<usize, Vec<u32>> = BTreeMap::new();
    for l in found.iter().flatten() {
        removals.entry(l.file).or_default().push(l.pos);
    }
    removals.values_mut().for_each(|v| v.sort_unstable());
    let mut content = par.content_hash;
    for h in old.values() {
        content.sub(h);
    }
    let deleted = old.len() as u64;
    let (mut files, mut dvs) = apply_removals(store, par, &removals, dvs).await?;
    let mut blobs = Vec::new();
    if !removals.is_empty() {
        let how = Compaction {
            schema: &schema,
            key_idx: &key_idx,
            settings,
            held: &held,
        };
        compact(store, &mut files, &mut dvs, &mut blobs, &how).await?;
    }
    blobs.extend(dv::pack(&mut files, dvs));
    let rows = files.iter().map(FileEntry::live_rows).sum();
    let snapshot = TableSnapshot {
        format: FORMAT_VERSION,
        schema: par.schema.clone(),
        key: par.key.clone(),
        files,
        rows,
        content_hash: content,
    };
    Ok(Staged::new(Some(par), snapshot, blobs, (0, 0, deleted)))
}

/// The four checks of a new snapshot against its parent.
pub(crate) fn checks(parent: Option<&TableSnapshot>, new: &TableSnapshot) -> Checks {
    let file_ids = |s: &TableSnapshot| -> Vec<(ObjectId, Option<DeletionVector>)> {
        s.files
            .iter()
            .map(|f| (f.data, f.deletes.clone()))
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

    /// A file of dense integer keys is looked up by arithmetic, with the
    /// answer the page-pruned look-up gives; other files are not.
    #[test]
    fn dense_keys_are_found_by_position_as_the_pages_would_find_them() {
        use arrow::array::{ArrayRef, Int64Array};
        let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, false)]));
        let props = WriteSettings::default().properties().unwrap();
        let entry_of = |col: ArrayRef| {
            let batch = RecordBatch::try_new(schema.clone(), vec![col]).unwrap();
            let (lo, hi) = keys::bounds(&batch, &[0]);
            let bytes = write_data_file(&batch, &props).unwrap();
            let entry = FileEntry {
                data: ObjectId::of(&bytes),
                rows: batch.num_rows() as u64,
                bytes: bytes.len() as u64,
                hash_sum: ContentHash::EMPTY,
                deletes: None,
                key_min: lo,
                key_max: hi,
            };
            let id = ObjectId::of(&bytes);
            (
                entry,
                DataFile::open_with(id, bytes, PageIndex::WithStats).unwrap(),
            )
        };
        let codec = KeyCodec::new(&schema, vec![0]).unwrap();
        let wanted = Int64Array::from(vec![99, 5_000, 100, 7_099, 7_100, -3, 100_050, 4_321]);
        let want = RecordBatch::try_new(schema.clone(), vec![Arc::new(wanted)]).unwrap();
        let keys = codec.sort_keys(std::slice::from_ref(&want)).unwrap();
        let cand: Vec<usize> = (0..want.num_rows()).collect();
        let mut dv = RoaringBitmap::new();
        dv.insert(4_900); // key 5,000
        let (dense, file) = entry_of(Arc::new(Int64Array::from_iter_values(100..7_100)));
        let by_position = dense_positions(&dense, Some(&dv), &keys, &cand).unwrap();
        let by_pages = locate_in_file(&file, Some(&dv), &schema, &codec, &keys, &cand).unwrap();
        assert_eq!(by_position, by_pages);
        assert_eq!(by_position, [(2, 0), (3, 6_999), (7, 4_221)]);
        // A gap among the keys: the file is not dense.
        let gappy = (100..7_100).filter(|k| *k != 200).chain([100_050]);
        let (sparse, _) = entry_of(Arc::new(Int64Array::from_iter_values(gappy)));
        assert!(dense_positions(&sparse, None, &keys, &cand).is_none());
    }

    /// The page-pruned look-up finds exactly what a scan of every key finds,
    /// for integer and text keys, present and absent, with a deletion vector.
    #[test]
    fn locate_in_file_reads_only_candidate_pages_and_agrees_with_a_full_scan() {
        use arrow::array::{ArrayRef, Int64Array, StringArray};
        let n = 20_000i64;
        let ints: ArrayRef = Arc::new(Int64Array::from_iter_values((0..n).map(|i| i * 3)));
        let texts: ArrayRef = Arc::new(StringArray::from_iter_values(
            (0..n).map(|i| format!("key-{:08}", i * 3)),
        ));
        let settings = WriteSettings::default();
        let props = settings.properties().unwrap();
        for col in [ints, texts] {
            let schema = Arc::new(Schema::new(vec![Field::new(
                "k",
                col.data_type().clone(),
                false,
            )]));
            let batch = RecordBatch::try_new(schema.clone(), vec![col.clone()]).unwrap();
            let bytes = write_data_file(&batch, &props).unwrap();
            let id = ObjectId::of(&bytes);
            let file = DataFile::open_with(id, bytes.clone(), PageIndex::WithStats).unwrap();
            let pages = file.pages("k").unwrap();
            assert!(pages.rows.len() >= 20, "{} pages", pages.rows.len());
            // Wanted: a few multiples of 3 (present) and some other values
            // (absent), unsorted; row 0 is deleted.
            let wanted: Vec<i64> = (0..3 * n + 10)
                .step_by(4999)
                .chain([3 * n + 3, 1, 0])
                .collect();
            let wanted_col: ArrayRef = match col.data_type() {
                DataType::Int64 => Arc::new(Int64Array::from(wanted.clone())),
                _ => Arc::new(StringArray::from_iter_values(
                    wanted.iter().map(|i| format!("key-{i:08}")),
                )),
            };
            let want = RecordBatch::try_new(schema.clone(), vec![wanted_col]).unwrap();
            let codec = KeyCodec::new(&schema, vec![0]).unwrap();
            let keys = codec.sort_keys(std::slice::from_ref(&want)).unwrap();
            let cand: Vec<usize> = (0..wanted.len()).collect();
            let ranges = key_pages(&file, &schema, &codec, &keys, &cand)
                .unwrap()
                .unwrap();
            let picked: usize = ranges.iter().map(|r| r.len()).sum();
            let page_rows = pages.rows[0].len();
            assert!(
                picked <= wanted.len() * page_rows,
                "read {picked} of {n} rows for {} keys",
                wanted.len()
            );
            let dv: RoaringBitmap = [0u32].into_iter().collect();
            let mut got = locate_in_file(&file, Some(&dv), &schema, &codec, &keys, &cand).unwrap();
            got.sort_unstable();
            let expect: Vec<(usize, u32)> = wanted
                .iter()
                .enumerate()
                .filter(|(_, v)| **v % 3 == 0 && **v < 3 * n && **v != 0)
                .map(|(i, v)| (i, (*v / 3) as u32))
                .collect();
            assert_eq!(got, expect, "{}", col.data_type());
            // Opened with page locations only, the file has no page
            // statistics: the look-up reads every key, and finds the same.
            let located = DataFile::open(id, bytes).unwrap();
            assert!(located.pages("k").is_none());
            let mut all =
                locate_in_file(&located, Some(&dv), &schema, &codec, &keys, &cand).unwrap();
            all.sort_unstable();
            assert_eq!(all, expect, "{}", col.data_type());
        }
    }

    #[test]
    fn physical_variants_conform_and_wider_numbers_widen_in_any_mode() {
        let p = schema(&[
            ("id", DataType::Int32, false),
            ("s", DataType::Utf8, true),
            ("x", DataType::Float32, true),
        ]);
        let i = schema(&[
            ("id", DataType::Int32, false),
            ("s", DataType::LargeUtf8, true),
            ("x", DataType::Float64, true),
        ]);
        let key = ["id".to_string()];
        let (s, moved, rewrite) =
            resolve_schema("t", Some(&p), &i, NONE, Mode::Upsert, &key).unwrap();
        assert!(moved && !rewrite);
        assert_eq!(s.field(1).data_type(), &DataType::Utf8);
        assert_eq!(s.field(2).data_type(), &DataType::Float64);
        // A key column does not widen; --cast reads it as the table's type.
        let wide_key = schema(&[("id", DataType::Int64, false)]);
        let p = schema(&[("id", DataType::Int32, false)]);
        let err = resolve_schema("t", Some(&p), &wide_key, NONE, Mode::Upsert, &key).unwrap_err();
        assert!(err.to_string().contains("does not widen"), "{err}");
        assert!(
            err.to_string()
                .contains("or cast the input's 'id' to Int32 when no value changes"),
            "{err}"
        );
        assert!(
            matches!(&err, Error::SchemaChange { cast_to: Some((c, t)), .. } if c == "id" && t == "Int32"),
            "{err:?}"
        );
        let cast = SchemaRules { cast: true, ..NONE };
        let (s, moved, _) =
            resolve_schema("t", Some(&p), &wide_key, cast, Mode::Upsert, &key).unwrap();
        assert!(!moved);
        assert_eq!(s.field(0).data_type(), &DataType::Int32);
        // Float64 for an Int64 column needs --cast.
        let p = schema(&[("q", DataType::Int64, true)]);
        let f = schema(&[("q", DataType::Float64, true)]);
        let err = resolve_schema("t", Some(&p), &f, NONE, Mode::Append, &[]).unwrap_err();
        assert!(
            matches!(&err, Error::SchemaChange { cast_to: Some((c, t)), .. } if c == "q" && t == "Int64"),
            "{err:?}"
        );
        assert!(resolve_schema("t", Some(&p), &f, cast, Mode::Append, &[]).is_ok());
    }

    const NONE: SchemaRules = SchemaRules {
        allow_change: false,
        cast: false,
    };
    const ALLOW: SchemaRules = SchemaRules {
        allow_change: true,
        cast: false,
    };

    #[test]
    fn adding_a_nullable_column_is_allowed() {
        let p = schema(&[("a", DataType::Int64, false)]);
        let i = schema(&[("a", DataType::Int64, false), ("b", DataType::Utf8, true)]);
        let (s, moved, rewrite) =
            resolve_schema("t", Some(&p), &i, NONE, Mode::Append, &[]).unwrap();
        assert!(moved && !rewrite);
        assert_eq!(s.fields().len(), 2);
    }

    #[test]
    fn other_changes_are_refused_unless_allowed() {
        let p = schema(&[("a", DataType::Int64, false)]);
        let t = schema(&[("a", DataType::Utf8, false)]);
        let err = resolve_schema("t", Some(&p), &t, NONE, Mode::Overwrite, &[]).unwrap_err();
        assert!(
            err.to_string()
                .contains("column 'a' would change type from Int64 to Utf8"),
            "{err}"
        );
        let (_, moved, rewrite) =
            resolve_schema("t", Some(&p), &t, ALLOW, Mode::Overwrite, &[]).unwrap();
        assert!(moved && rewrite);
        assert!(resolve_schema("t", Some(&p), &t, ALLOW, Mode::Append, &[]).is_err());
        let missing = schema(&[("z", DataType::Int64, true)]);
        let err = resolve_schema("t", Some(&p), &missing, NONE, Mode::Overwrite, &[]).unwrap_err();
        assert!(err.to_string().contains("column 'a' is missing"), "{err}");
    }
}
