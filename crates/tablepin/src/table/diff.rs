//! What differs between two snapshots of a table.
//!
//! Two versions of a table usually share most of their data files: a commit
//! adds files and hides positions of old ones with deletion vectors. A row
//! both versions see at the same position of the same file is the same row,
//! so the diff reads only the rest (`unshared`): the files one side has and
//! the other has not, and, of a file both have, the positions one side hides
//! and the other does not. Its cost follows the change, not the table.
//!
//! `compare` then decides, with no I/O, which of those rows were added,
//! removed or changed: by key for a keyed table (a key on both sides whose
//! values differ is changed; one whose values are equal only moved, as
//! compaction moves rows), as a multiset of rows for an unkeyed one.
//!
//! Of a data file both sides have under the same deletion vector, nothing is
//! read; under different vectors, only the positions one hides and the other
//! sees (`scan::Pick::Positions`); a file only one side has is read live. The
//! result equals a diff of both versions read whole (proptest
//! `a_diff_equals_the_diff_of_both_versions_read_whole`). `restore` writes a
//! version naming the snapshots of the revision, so it adds no data blob.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use arrow::array::{new_null_array, Array, ArrayRef, RecordBatch, StringArray, UInt32Array};
use arrow::compute::kernels::cmp::distinct;
use arrow::compute::{cast, concat_batches, take};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::row::{RowConverter, SortField};
use roaring::RoaringBitmap;
use serde::{Deserialize, Serialize};
use tablepin_format::{ObjectId, TableSnapshot};
use tablepin_store::Store;

use super::scan::{read_picked, Pick, Picked};
use super::{dv, schema_of};
use crate::error::{Error, Result};

/// What a diff read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiffStats {
    /// Data files both versions see alike, not read.
    pub files_shared: usize,
    /// Data files read (whole, or the positions one side hides).
    pub files_read: usize,
    /// Rows read from them.
    pub rows_read: u64,
}

/// The rows one version sees and the other does not, each side in its own
/// schema.
pub(crate) struct Unshared {
    pub(crate) old: Vec<RecordBatch>,
    pub(crate) new: Vec<RecordBatch>,
    pub(crate) stats: DiffStats,
    /// Where each row of `old` is: data file and position (empty unless
    /// asked for, see [`unshared_many`]).
    pub(crate) old_at: Vec<(ObjectId, u32)>,
    /// Where each row of `new` is (likewise).
    pub(crate) new_at: Vec<(ObjectId, u32)>,
}

/// One read of a data file for the diff: which side, which rows.
struct Job {
    blob: ObjectId,
    new_side: bool,
    rows: Pick,
}

/// Decides which files and positions of two snapshots a diff reads: every
/// file one side has and the other has not (its live rows), and of a file
/// both have under different deletion vectors, the positions one side hides
/// and the other sees. No I/O.
fn jobs(
    old: &TableSnapshot,
    old_dvs: &[Option<RoaringBitmap>],
    new: &TableSnapshot,
    new_dvs: &[Option<RoaringBitmap>],
) -> (Vec<Job>, usize) {
    let index = |s: &TableSnapshot| -> HashMap<ObjectId, usize> {
        s.files
            .iter()
            .enumerate()
            .map(|(i, f)| (f.data, i))
            .collect()
    };
    let (in_old, in_new) = (index(old), index(new));
    let empty = RoaringBitmap::new();
    let mut out = Vec::new();
    let mut shared = 0;
    let sides = [
        (old, old_dvs, &in_new, new_dvs, false),
        (new, new_dvs, &in_old, old_dvs, true),
    ];
    for (this, this_dvs, other_index, other_dvs, new_side) in sides {
        for (i, f) in this.files.iter().enumerate() {
            let mine = this_dvs[i].as_ref().unwrap_or(&empty);
            let rows = match other_index.get(&f.data) {
                None => Pick::Live(this_dvs[i].clone()),
                Some(&j) => {
                    let theirs = other_dvs[j].as_ref().unwrap_or(&empty);
                    // Seen here, hidden there.
                    let only: Vec<u32> = (theirs - mine).iter().collect();
                    if only.is_empty() {
                        if !new_side && mine == theirs {
                            shared += 1;
                        }
                        continue;
                    }
                    Pick::Positions(only)
                }
            };
            out.push(Job {
                blob: f.data,
                new_side,
                rows,
            });
        }
    }
    (out, shared)
}

/// Reads the rows that one snapshot sees and the other does not (see the
/// module's docs). Either may be empty (a table only one version has).
pub(crate) async fn unshared(
    store: &Store,
    old: &TableSnapshot,
    new: &TableSnapshot,
) -> Result<Unshared> {
    let mut out = unshared_many(store, old, &[new], false).await?;
    out.pop()
        .ok_or_else(|| Error::Internal("a diff of one pair read no pair".into()))
}

/// [`unshared`] of `old` against each of `news`, reading each file of
/// `old` once: the two sides of a merge mostly hide positions of the same
/// base files, and one read of the union of those positions decodes the
/// pages they share once. With `located`, each side also says where each
/// of its rows is stored (`old_at`, `new_at`): a merge applies theirs'
/// rows by it; a diff does without a list as long as the rows it read.
pub(crate) async fn unshared_many(
    store: &Store,
    old: &TableSnapshot,
    news: &[&TableSnapshot],
    located: bool,
) -> Result<Vec<Unshared>> {
    // A pack several versions name is read once.
    let mut packs = dv::Known::new();
    let old_dvs = dv::load_with(store, &old.files, &mut packs).await?;
    let mut all_jobs = Vec::new();
    let mut shared = Vec::new();
    for (pair, new) in news.iter().enumerate() {
        let new_dvs = dv::load_with(store, &new.files, &mut packs).await?;
        let (jobs, files_shared) = jobs(old, &old_dvs, new, &new_dvs);
        all_jobs.extend(jobs.into_iter().map(|j| (pair, j)));
        shared.push(files_shared);
    }
    let file_rows: HashMap<ObjectId, u64> = std::iter::once(old)
        .chain(news.iter().copied())
        .flat_map(|s| s.files.iter().map(|f| (f.data, f.rows)))
        .collect();
    let (reads, served) = reads(&all_jobs, &file_rows);
    let schemas: Vec<SchemaRef> = std::iter::once(old)
        .chain(news.iter().copied())
        .map(schema_of)
        .collect();
    let picked: Vec<Picked> = (reads.into_iter())
        .map(|r| Picked {
            blob: r.blob,
            schema: Some(schemas[r.schema].clone()),
            rows: r.rows,
        })
        .collect();
    let read = read_picked(store, &picked).await?;
    let mut out: Vec<Unshared> = shared
        .into_iter()
        .map(|files_shared| Unshared {
            old: Vec::new(),
            new: Vec::new(),
            stats: DiffStats {
                files_shared,
                files_read: 0,
                rows_read: 0,
            },
            old_at: Vec::new(),
            new_at: Vec::new(),
        })
        .collect();
    for ((pair, job), s) in all_jobs.iter().zip(&served) {
        let batches = served_rows(&read[s.read].batches, &read[s.read].schema, s)?;
        let u = &mut out[*pair];
        u.stats.files_read += 1;
        u.stats.rows_read += batches.iter().map(|b| b.num_rows() as u64).sum::<u64>();
        let (side, side_at) = if job.new_side {
            (&mut u.new, &mut u.new_at)
        } else {
            (&mut u.old, &mut u.old_at)
        };
        side.extend(batches);
        if located {
            let n = file_rows.get(&job.blob).copied().unwrap_or(0);
            side_at.extend(job.rows.positions(n).into_iter().map(|p| (job.blob, p)));
        }
    }
    Ok(out)
}

/// One read of a data file, for one or more jobs.
struct Read {
    blob: ObjectId,
    /// The schema read in: 0 the old side's, k + 1 that of new side k.
    schema: usize,
    rows: Pick,
}

/// Where a job's rows come from: a read, and which of its rows (`None`:
/// all of them).
struct Served {
    read: usize,
    pick: Option<Vec<u32>>,
}

/// The reads that serve `jobs` (tagged with their pair): one per file and
/// side, the union of the positions of the jobs that share it. No I/O.
fn reads(jobs: &[(usize, Job)], file_rows: &HashMap<ObjectId, u64>) -> (Vec<Read>, Vec<Served>) {
    let schema = |(pair, j): &(usize, Job)| if j.new_side { pair + 1 } else { 0 };
    let mut groups: BTreeMap<(ObjectId, usize), Vec<usize>> = BTreeMap::new();
    for (i, j) in jobs.iter().enumerate() {
        groups.entry((j.1.blob, schema(j))).or_default().push(i);
    }
    let mut reads = Vec::new();
    let mut served: Vec<Option<Served>> = (0..jobs.len()).map(|_| None).collect();
    for ((blob, schema), members) in groups {
        let read = reads.len();
        if let [only] = members[..] {
            let rows = jobs[only].1.rows.clone();
            reads.push(Read { blob, schema, rows });
            served[only] = Some(Served { read, pick: None });
            continue;
        }
        let n = file_rows.get(&blob).copied().unwrap_or(0);
        let each: Vec<Vec<u32>> = (members.iter())
            .map(|m| jobs[*m].1.rows.positions(n))
            .collect();
        let mut union: Vec<u32> = each.iter().flatten().copied().collect();
        union.sort_unstable();
        union.dedup();
        for (m, ps) in members.iter().zip(each) {
            let pick = ps
                .iter()
                .map(|p| union.binary_search(p).unwrap_or_default() as u32)
                .collect();
            served[*m] = Some(Served {
                read,
                pick: Some(pick),
            });
        }
        reads.push(Read {
            blob,
            schema,
            rows: Pick::Positions(union),
        });
    }
    let served = served
        .into_iter()
        .map(|s| {
            s.unwrap_or(Served {
                read: 0,
                pick: None,
            })
        })
        .collect();
    (reads, served)
}

/// A job's rows of what its read returned.
fn served_rows(read: &[RecordBatch], schema: &SchemaRef, s: &Served) -> Result<Vec<RecordBatch>> {
    let Some(pick) = &s.pick else {
        return Ok(read.to_vec());
    };
    let all = concat_batches(schema, read).map_err(Error::arrow("reading a data file"))?;
    let idx = UInt32Array::from(pick.clone());
    let taken = arrow::compute::take_record_batch(&all, &idx)
        .map_err(Error::arrow("reading a data file"))?;
    Ok(vec![taken])
}

/// The columns two versions of a table have in common, and those only one
/// has.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ColumnChange {
    /// Columns only the newer version has.
    pub added: Vec<String>,
    /// Columns only the older version has.
    pub dropped: Vec<String>,
    /// Columns whose type changed (compared in the newer type).
    pub retyped: Vec<String>,
}

/// Which rows of two sides differ, as positions into each side (a pure
/// decision: see [`compare`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Compared {
    /// Positions of rows only the new side has.
    pub(crate) added: Vec<u32>,
    /// Positions of rows only the old side has.
    pub(crate) removed: Vec<u32>,
    /// (old, new) positions of a key both sides have with other values.
    pub(crate) changed: Vec<(u32, u32)>,
    /// For each compared column, how many changed keys differ in it.
    pub(crate) changed_by_column: Vec<u64>,
}

/// Decides what differs between `old` and `new`, two batches of the same
/// schema: by the columns at `key` when it is not empty (keys unique on each
/// side), as multisets of whole rows otherwise. Keyed, the result is in key
/// order; unkeyed, in each side's order. No I/O.
pub(crate) fn compare(key: &[usize], old: &RecordBatch, new: &RecordBatch) -> Result<Compared> {
    let ncols = old.num_columns();
    let match_on: Vec<usize> = if key.is_empty() {
        (0..ncols).collect()
    } else {
        key.to_vec()
    };
    let fields: Vec<SortField> = match_on
        .iter()
        .map(|&i| SortField::new(old.schema().field(i).data_type().clone()))
        .collect();
    let conv = RowConverter::new(fields).map_err(Error::arrow("encoding rows to compare"))?;
    let cols = |b: &RecordBatch| -> Vec<ArrayRef> {
        match_on.iter().map(|&i| b.column(i).clone()).collect()
    };
    let old_rows = conv
        .convert_columns(&cols(old))
        .map_err(Error::arrow("encoding rows to compare"))?;
    let new_rows = conv
        .convert_columns(&cols(new))
        .map_err(Error::arrow("encoding rows to compare"))?;
    let mut pending: HashMap<&[u8], Vec<u32>> = HashMap::new();
    for (i, r) in old_rows.iter().enumerate() {
        pending.entry(r.data()).or_default().push(i as u32);
    }
    // Unkeyed, a later duplicate on the old side cancels the later
    // duplicate on the new side: take positions from the front.
    for v in pending.values_mut() {
        v.reverse();
    }
    let mut out = Compared {
        changed_by_column: vec![0; ncols],
        ..Compared::default()
    };
    let mut pairs = Vec::new();
    for (j, r) in new_rows.iter().enumerate() {
        match pending.get_mut(r.data()).and_then(Vec::pop) {
            Some(i) => pairs.push((i, j as u32)),
            None => out.added.push(j as u32),
        }
    }
    let mut removed: Vec<u32> = pending.into_values().flatten().collect();
    removed.sort_unstable();
    out.removed = removed;
    if !key.is_empty() {
        changed_pairs(old, new, &pairs, &mut out)?;
        let by_key = |a: &u32, b: &u32, rows: &arrow::row::Rows| {
            rows.row(*a as usize).cmp(&rows.row(*b as usize))
        };
        out.added.sort_by(|a, b| by_key(a, b, &new_rows));
        out.removed.sort_by(|a, b| by_key(a, b, &old_rows));
        out.changed.sort_by(|a, b| by_key(&a.1, &b.1, &new_rows));
    }
    Ok(out)
}

/// Of pairs of rows with the same key, keeps in `out.changed` those whose
/// values differ in some column, counting the changes per column.
fn changed_pairs(
    old: &RecordBatch,
    new: &RecordBatch,
    pairs: &[(u32, u32)],
    out: &mut Compared,
) -> Result<()> {
    let at_old = UInt32Array::from_iter_values(pairs.iter().map(|p| p.0));
    let at_new = UInt32Array::from_iter_values(pairs.iter().map(|p| p.1));
    let mut any = vec![false; pairs.len()];
    for c in 0..old.num_columns() {
        let a = take(old.column(c), &at_old, None).map_err(Error::arrow("comparing rows"))?;
        let b = take(new.column(c), &at_new, None).map_err(Error::arrow("comparing rows"))?;
        let differs = distinct(&a, &b).map_err(Error::arrow("comparing rows"))?;
        for (k, d) in differs.values().iter().enumerate() {
            if d {
                any[k] = true;
                out.changed_by_column[c] += 1;
            }
        }
    }
    out.changed = pairs
        .iter()
        .zip(any)
        .filter(|(_, a)| *a)
        .map(|(p, _)| *p)
        .collect();
    Ok(())
}

/// The two sides of a diff in one schema: the newer version's columns in
/// its order, each in a type that holds both sides' values
/// (`types::common_type`: the newer type unless the older holds more). A
/// column the older version lacks is null on its side, so a row that gains
/// a value there is modified, as a commit counts it (it compares rows in the
/// new schema); a dropped column is not compared.
pub(crate) struct Aligned {
    pub(crate) schema: SchemaRef,
    pub(crate) old: RecordBatch,
    pub(crate) new: RecordBatch,
    pub(crate) columns: ColumnChange,
}

/// Brings both sides to the columns they share, each cast to a type that
/// holds both sides' values, so a retyped column's changes are all seen.
pub(crate) fn align(
    old_schema: &SchemaRef,
    old: &[RecordBatch],
    new_schema: &SchemaRef,
    new: &[RecordBatch],
) -> Result<Aligned> {
    let mut columns = ColumnChange::default();
    let mut fields = Vec::new();
    let (mut from_old, mut from_new) = (Vec::new(), Vec::new());
    for (j, f) in new_schema.fields().iter().enumerate() {
        match old_schema.index_of(f.name()) {
            Ok(i) => {
                let was = old_schema.field(i).data_type();
                if was != f.data_type() {
                    columns.retyped.push(f.name().clone());
                }
                let compared_as = super::types::common_type(was, f.data_type());
                fields.push(Field::new(f.name(), compared_as, true));
                from_old.push(Some(i));
                from_new.push(Some(j));
            }
            Err(_) => {
                columns.added.push(f.name().clone());
                fields.push(Field::new(f.name(), f.data_type().clone(), true));
                from_old.push(None);
                from_new.push(Some(j));
            }
        }
    }
    for f in old_schema.fields() {
        if new_schema.index_of(f.name()).is_err() {
            columns.dropped.push(f.name().clone());
        }
    }
    let schema = Arc::new(Schema::new(fields));
    let side = |s: &SchemaRef, b: &[RecordBatch], at: &[Option<usize>]| -> Result<RecordBatch> {
        let whole = concat_batches(s, b).map_err(Error::arrow("gathering rows to compare"))?;
        let cols = at
            .iter()
            .zip(schema.fields())
            .map(|(i, f)| {
                let Some(i) = *i else {
                    return Ok(new_null_array(f.data_type(), whole.num_rows()));
                };
                let c = whole.column(i);
                if c.data_type() == f.data_type() {
                    Ok(c.clone())
                } else {
                    cast(c, f.data_type()).map_err(Error::arrow("comparing a retyped column"))
                }
            })
            .collect::<Result<Vec<_>>>()?;
        RecordBatch::try_new_with_options(
            schema.clone(),
            cols,
            &arrow::array::RecordBatchOptions::new().with_row_count(Some(whole.num_rows())),
        )
        .map_err(Error::arrow("gathering rows to compare"))
    };
    Ok(Aligned {
        old: side(old_schema, old, &from_old)?,
        new: side(new_schema, new, &from_new)?,
        schema,
        columns,
    })
}

/// The differing rows as one batch: a `diff_type` column (`added`,
/// `removed`, `modified`), then `from_C` and `to_C` for every compared
/// column C (null on the side that has no such row).
pub(crate) fn rows_batch(a: &Aligned, c: &Compared) -> Result<RecordBatch> {
    let n = c.removed.len() + c.changed.len() + c.added.len();
    let mut kinds: Vec<&str> = Vec::with_capacity(n);
    let mut from: Vec<Option<u32>> = Vec::with_capacity(n);
    let mut to: Vec<Option<u32>> = Vec::with_capacity(n);
    for &i in &c.removed {
        kinds.push("removed");
        from.push(Some(i));
        to.push(None);
    }
    for &(i, j) in &c.changed {
        kinds.push("modified");
        from.push(Some(i));
        to.push(Some(j));
    }
    for &j in &c.added {
        kinds.push("added");
        from.push(None);
        to.push(Some(j));
    }
    let (from, to) = (UInt32Array::from(from), UInt32Array::from(to));
    let mut fields = vec![Field::new("diff_type", DataType::Utf8, false)];
    let mut cols: Vec<ArrayRef> = vec![Arc::new(StringArray::from(kinds))];
    for (k, f) in a.schema.fields().iter().enumerate() {
        for (prefix, side, at) in [("from_", &a.old, &from), ("to_", &a.new, &to)] {
            fields.push(Field::new(
                format!("{prefix}{}", f.name()),
                f.data_type().clone(),
                true,
            ));
            cols.push(take(side.column(k), at, None).map_err(Error::arrow("writing diff rows"))?);
        }
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), cols)
        .map_err(Error::arrow("writing diff rows"))
}

/// Counts of a diff of one table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiffCounts {
    /// Keys (unkeyed: rows) only the newer version has.
    pub added: u64,
    /// Keys (unkeyed: rows) only the older version has.
    pub removed: u64,
    /// Keys both have with other values (keyed tables only).
    pub modified: u64,
    /// For each column, how many modified keys differ in it (only columns
    /// that differ somewhere).
    pub modified_by_column: BTreeMap<String, u64>,
}

impl DiffCounts {
    /// The counts of a comparison of `a`.
    pub(crate) fn of(a: &Aligned, c: &Compared) -> Self {
        Self {
            added: c.added.len() as u64,
            removed: c.removed.len() as u64,
            modified: c.changed.len() as u64,
            modified_by_column: a
                .schema
                .fields()
                .iter()
                .zip(&c.changed_by_column)
                .filter(|(_, n)| **n > 0)
                .map(|(f, n)| (f.name().clone(), *n))
                .collect(),
        }
    }

    /// True when nothing differs.
    pub fn is_empty(&self) -> bool {
        self.added == 0 && self.removed == 0 && self.modified == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, StringArray};

    fn batch(ids: &[i64], vals: &[Option<&str>]) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("v", DataType::Utf8, true),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from(ids.to_vec())),
                Arc::new(StringArray::from(vals.to_vec())),
            ],
        )
        .unwrap()
    }

    #[test]
    fn keyed_compare_finds_added_removed_and_changed_and_ignores_moves() {
        let old = batch(&[3, 1, 2, 5], &[Some("c"), Some("a"), Some("b"), None]);
        let new = batch(&[2, 4, 1, 5], &[Some("B"), Some("d"), Some("a"), Some("e")]);
        let c = compare(&[0], &old, &new).unwrap();
        assert_eq!(c.added, vec![1]); // id 4
        assert_eq!(c.removed, vec![0]); // id 3
                                        // id 2 changed, id 5 from null to "e" changed, id 1 only moved.
        assert_eq!(c.changed, vec![(2, 0), (3, 3)]);
        assert_eq!(c.changed_by_column, vec![0, 2]);
    }

    /// Jobs of two pairs on one base file are one read of the union of
    /// their positions, each picking its own; other files read alone.
    #[test]
    fn jobs_on_one_base_file_share_one_read() {
        let (f, g) = (ObjectId::of(b"f"), ObjectId::of(b"g"));
        let job = |blob, new_side, rows| Job {
            blob,
            new_side,
            rows,
        };
        let hidden: RoaringBitmap = [0u32, 2].into_iter().collect();
        let jobs = vec![
            (0, job(f, false, Pick::Positions(vec![1, 3]))),
            (1, job(f, false, Pick::Positions(vec![3, 5]))),
            (1, job(f, true, Pick::Positions(vec![4]))),
            (0, job(g, false, Pick::Live(Some(hidden.clone())))),
            (1, job(g, false, Pick::Positions(vec![2]))),
        ];
        let rows = HashMap::from([(f, 8), (g, 4)]);
        let (reads, served) = reads(&jobs, &rows);
        let of = |i: usize| match &reads[served[i].read].rows {
            Pick::Positions(p) => (reads[served[i].read].schema, p.clone()),
            Pick::Live(_) => panic!("a shared read reads positions"),
        };
        assert_eq!(reads.len(), 3);
        assert_eq!(of(0), (0, vec![1, 3, 5]));
        assert_eq!(served[0].read, served[1].read);
        assert_eq!(served[0].pick, Some(vec![0, 1]));
        assert_eq!(served[1].pick, Some(vec![1, 2]));
        // The new side's file is read in its own schema, alone.
        assert_eq!(of(2), (2, vec![4]));
        assert_eq!(served[2].pick, None);
        // Live rows 1 and 3 with position 2: rows 1, 2, 3.
        assert_eq!(of(3), (0, vec![1, 2, 3]));
        assert_eq!(served[3].pick, Some(vec![0, 2]));
        assert_eq!(served[4].pick, Some(vec![1]));
    }

    #[test]
    fn unkeyed_compare_is_a_multiset_difference() {
        let old = batch(&[1, 1, 2, 7], &[Some("a"), Some("a"), None, Some("x")]);
        let new = batch(&[2, 1, 7, 7], &[None, Some("a"), Some("x"), Some("x")]);
        let c = compare(&[], &old, &new).unwrap();
        // One (1, a) fewer, one (7, x) more; (2, null) equal to itself.
        assert_eq!(c.removed, vec![1]);
        assert_eq!(c.added, vec![3]);
        assert!(c.changed.is_empty());
    }

    fn aligned(old: &RecordBatch, new: &RecordBatch) -> Aligned {
        align(
            &old.schema(),
            std::slice::from_ref(old),
            &new.schema(),
            std::slice::from_ref(new),
        )
        .unwrap()
    }

    #[test]
    fn a_retyped_column_is_compared_in_a_type_holding_both_sides() {
        use arrow::array::Float64Array;
        let side = |name: &str, col: ArrayRef| {
            let schema = Arc::new(Schema::new(vec![
                Field::new("id", DataType::Int64, false),
                Field::new(name, col.data_type().clone(), true),
            ]));
            let ids: ArrayRef = Arc::new(Int64Array::from(vec![1, 2, 3]));
            RecordBatch::try_new(schema, vec![ids, col]).unwrap()
        };
        // 49.5 became 49; 2.0 became 2 (the same value); "x" became 11.
        let cases: [(ArrayRef, ArrayRef, u64, &str); 2] = [
            (
                Arc::new(Float64Array::from(vec![49.5, 2.0, 3.0])),
                Arc::new(Int64Array::from(vec![49, 2, 3])),
                1,
                "| modified  | 1       | 1     | 49.5   | 49.0 |",
            ),
            (
                Arc::new(StringArray::from(vec!["x", "2", "3"])),
                Arc::new(Int64Array::from(vec![11, 2, 3])),
                1,
                "| modified  | 1       | 1     | x      | 11   |",
            ),
        ];
        for (old, new, modified, line) in cases {
            let a = aligned(&side("q", old), &side("q", new));
            assert_eq!(a.columns.retyped, vec!["q".to_string()]);
            let c = compare(&[0], &a.old, &a.new).unwrap();
            assert_eq!(DiffCounts::of(&a, &c).modified, modified);
            let rows = rows_batch(&a, &c).unwrap();
            let text = arrow::util::pretty::pretty_format_batches(&[rows])
                .unwrap()
                .to_string();
            assert!(text.contains(line), "{text}");
        }
    }

    #[test]
    fn rows_batch_pairs_from_and_to() {
        let old = batch(&[1, 2], &[Some("a"), Some("b")]);
        let new = batch(&[2, 3], &[Some("B"), Some("c")]);
        let a = aligned(&old, &new);
        let c = compare(&[0], &a.old, &a.new).unwrap();
        let rows = rows_batch(&a, &c).unwrap();
        let text = arrow::util::pretty::pretty_format_batches(&[rows])
            .unwrap()
            .to_string();
        let expected = [
            "+-----------+---------+-------+--------+------+",
            "| diff_type | from_id | to_id | from_v | to_v |",
            "+-----------+---------+-------+--------+------+",
            "| removed   | 1       |       | a      |      |",
            "| modified  | 2       | 2     | b      | B    |",
            "| added     |         | 3     |        | c    |",
            "+-----------+---------+-------+--------+------+",
        ];
        assert_eq!(text, expected.join("\n"));
        let counts = DiffCounts::of(&a, &c);
        assert_eq!((counts.added, counts.removed, counts.modified), (1, 1, 1));
        assert_eq!(
            counts.modified_by_column,
            BTreeMap::from([("v".to_string(), 1)])
        );
    }
}
