//! The four reference layouts of the original experiment, each storing
//! Parquet files under the hash of their bytes (so the same bytes are
//! stored once), written with the settings closest to pyarrow's defaults:
//!
//! - `month`: one file per month of sale; a change rewrites that file;
//! - `week`: one file per week of arrival; a change rewrites the file that
//!   holds the line;
//! - `changes`: like week, but each commit writes the changed old lines
//!   whole into one small change file (a deleted line as its id alone with a
//!   `deleted` flag); a reader keeps the newest copy of each line;
//! - `copy` (every version a whole copy of the month files) and
//!   `copy_hashed` (skipping versions whose month files did not change) are
//!   counted from the month layout, not written.
//!
//! Files are encoded on two threads; only their hash, size, lines and, while
//! a version still uses them, their bytes are kept. A file whose lines are
//! those of its previous version (only returns touched it) copies nine
//! column chunks from its previous bytes and encodes `returned` alone
//! ([`encode_returned`]): same bytes, a tenth of the work.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Int64Array, RecordBatch};
use arrow::datatypes::Int64Type;
use bytes::Bytes;
use parquet::arrow::arrow_writer::compute_leaves;
use parquet::arrow::ArrowWriter;
use parquet::column::writer::ColumnCloseResult;
use parquet::file::metadata::{
    ColumnChunkMetaData, PageIndexPolicy, ParquetMetaDataOptions, ParquetMetaDataReader,
};
use parquet::file::page_index::column_index::ColumnIndexMetaData;
use parquet::file::properties::WriterProperties;
use parquet::file::statistics::Statistics;
use tablepin_format::{ContentHash, ObjectId};

use crate::data::Lines;
use crate::experiment::{sort_lines, Delta, Master, State};
use crate::LabError;

/// A row of the changes layout as written: line, `returned`, deleted flag.
pub type Row = (u32, i64, bool);
/// A file's rows to encode.
enum Rows {
    /// Every column.
    Whole(RecordBatch),
    /// The same lines, in the same order, as the previous file `prev`,
    /// with new `returned` values: only that column is encoded.
    Returned { prev: Bytes, returned: ArrayRef },
}

/// A file to encode: its rows and the lines it holds with data.
struct Job {
    rows: Rows,
    lines: Arc<Vec<u32>>,
}

impl Job {
    /// The rows the file holds (data and deletion markers).
    fn lines_rows(&self) -> u64 {
        match &self.rows {
            Rows::Whole(b) => b.num_rows() as u64,
            Rows::Returned { returned, .. } => returned.len() as u64,
        }
    }

    /// A rough cost, to balance the threads: rows, ten times fewer when
    /// one column is encoded.
    fn cost(&self) -> u64 {
        match &self.rows {
            Rows::Whole(b) => b.num_rows() as u64 * 10,
            Rows::Returned { returned, .. } => returned.len() as u64,
        }
    }
}
/// A decoded file: each row's line, row hash and deleted flag.
pub type Decoded = Vec<(i64, [u8; 32], bool)>;

/// What a read-back keeps of a decoded file: the sum of its row hashes and
/// its rows, plus (changes layout only) each row's line, hash and flag.
#[derive(Debug, Clone)]
pub struct FileHashes {
    pub sum: ContentHash,
    pub rows: u64,
    pub lines: Option<Decoded>,
}

/// One stored file.
#[derive(Debug, Clone)]
pub struct Rec {
    pub id: ObjectId,
    pub size: u64,
    pub bytes: Bytes,
    /// The lines it holds with data (not deletion markers).
    pub lines: Arc<Vec<u32>>,
    pub rows: u64,
}

/// Encodes a batch as a Parquet file.
pub fn encode(batch: &RecordBatch, props: &WriterProperties) -> Result<Bytes, LabError> {
    let mut w = ArrowWriter::try_new(Vec::new(), batch.schema(), Some(props.clone()))?;
    w.write(batch)?;
    Ok(Bytes::from(w.into_inner()?))
}

/// Encodes the previous file of the same lines again with a new last
/// column (`returned`): every other column chunk is copied as it was
/// encoded, and only the last is encoded anew. The bytes equal those of
/// [`encode`] on the whole batch (tested), since Parquet encodes each
/// column chunk on its own; a return moves only `returned`, so most of a
/// week's rewritten files cost one int64 column instead of ten.
pub fn encode_returned(
    prev: &Bytes,
    returned: &ArrayRef,
    props: &WriterProperties,
) -> Result<Bytes, LabError> {
    // The chunks' metadata must come back whole (page encoding stats as
    // written, not as a mask) for the footer to be written the same.
    let meta = ParquetMetaDataReader::new()
        .with_page_index_policy(PageIndexPolicy::Optional)
        .with_metadata_options(Some(
            ParquetMetaDataOptions::new().with_encoding_stats_as_mask(false),
        ))
        .parse_and_finish(prev)?;
    let schema = crate::experiment::schema();
    let field = schema
        .fields()
        .last()
        .cloned()
        .ok_or_else(|| LabError::Other("the table schema has no columns".into()))?;
    let rows: i64 = meta.row_groups().iter().map(|g| g.num_rows()).sum();
    if rows != returned.len() as i64 {
        return Err(LabError::Other(format!(
            "a file of {rows} rows cannot take {} new `returned` values",
            returned.len()
        )));
    }
    let writer = ArrowWriter::try_new(Vec::new(), schema.clone(), Some(props.clone()))?;
    let (mut file, factory) = writer.into_serialized_writer()?;
    let mut offset = 0usize;
    for (g, group) in meta.row_groups().iter().enumerate() {
        let n = group.num_rows() as usize;
        let last = group.num_columns().saturating_sub(1);
        let mut writers = factory.create_column_writers(g)?;
        let mut out = file.next_row_group()?;
        for c in 0..last {
            let chunk = group.column(c);
            let close = ColumnCloseResult {
                bytes_written: chunk.compressed_size().max(0) as u64,
                rows_written: n as u64,
                metadata: as_written(chunk)?,
                bloom_filter: None,
                column_index: meta
                    .column_index()
                    .and_then(|i| i.get(g)?.get(c).cloned())
                    .filter(|i| !matches!(i, ColumnIndexMetaData::NONE)),
                offset_index: meta.offset_index().and_then(|i| i.get(g)?.get(c).cloned()),
            };
            out.append_column(prev, close)?;
        }
        let mut w = writers
            .pop()
            .ok_or_else(|| LabError::Other("no writer for `returned`".into()))?;
        for leaf in compute_leaves(&field, &returned.slice(offset, n))? {
            w.write(&leaf)?;
        }
        w.close()?.append_to_row_group(&mut out)?;
        out.close()?;
        offset += n;
    }
    Ok(Bytes::from(file.into_inner()?))
}

/// A column chunk's metadata as its writer built it. Parsing a footer
/// loses one flag: whether the statistics also carry the deprecated
/// `min`/`max` fields, which parquet writes for signed sort orders.
fn as_written(chunk: &ColumnChunkMetaData) -> Result<ColumnChunkMetaData, LabError> {
    let Some(stats) = chunk.statistics() else {
        return Ok(chunk.clone());
    };
    let signed = chunk.column_descr().sort_order().is_signed();
    let stats = match stats.clone() {
        Statistics::Boolean(v) => Statistics::Boolean(v.with_backwards_compatible_min_max(signed)),
        Statistics::Int32(v) => Statistics::Int32(v.with_backwards_compatible_min_max(signed)),
        Statistics::Int64(v) => Statistics::Int64(v.with_backwards_compatible_min_max(signed)),
        Statistics::Int96(v) => Statistics::Int96(v.with_backwards_compatible_min_max(signed)),
        Statistics::Float(v) => Statistics::Float(v.with_backwards_compatible_min_max(signed)),
        Statistics::Double(v) => Statistics::Double(v.with_backwards_compatible_min_max(signed)),
        Statistics::ByteArray(v) => {
            Statistics::ByteArray(v.with_backwards_compatible_min_max(signed))
        }
        Statistics::FixedLenByteArray(v) => {
            Statistics::FixedLenByteArray(v.with_backwards_compatible_min_max(signed))
        }
    };
    Ok(chunk.clone().into_builder().set_statistics(stats).build()?)
}

/// Encodes one job.
fn encode_job(job: &Job, props: &WriterProperties) -> Result<Bytes, LabError> {
    match &job.rows {
        Rows::Whole(b) => encode(b, props),
        Rows::Returned { prev, returned } => encode_returned(prev, returned, props),
    }
}

/// Applies `f` to every item on two threads (the shared work-taking loop,
/// so that one thread is not left with the large items while the other has
/// finished), and returns the results in item order.
fn on_two_threads<T: Sync, R: Send>(
    items: &[T],
    f: impl Fn(&T) -> Result<R, LabError> + Sync,
) -> Result<Vec<R>, LabError> {
    tablepin_format::try_map(2, items, f)
        .unwrap_or_else(|| Err(LabError::Other("a worker thread failed".into())))
}

/// Encodes jobs on two threads, largest first, keeping their order.
fn encode_all(jobs: Vec<Job>, props: &WriterProperties) -> Result<Vec<Rec>, LabError> {
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by_key(|i| std::cmp::Reverse(jobs[*i].cost()));
    let encoded = on_two_threads(&order, |&i| {
        let job = &jobs[i];
        encode_job(job, props).map(|bytes| Rec {
            id: ObjectId::of(&bytes),
            size: bytes.len() as u64,
            bytes,
            lines: job.lines.clone(),
            rows: job.lines_rows(),
        })
    })?;
    let mut recs: Vec<Option<Rec>> = (0..jobs.len()).map(|_| None).collect();
    for (i, r) in order.into_iter().zip(encoded) {
        recs[i] = Some(r);
    }
    recs.into_iter()
        .map(|r| r.ok_or_else(|| LabError::Other("a job was not encoded".into())))
        .collect()
}

/// A layout's history: every distinct file stored, and each version's files.
#[derive(Debug, Default)]
pub struct History {
    pub stored: HashMap<ObjectId, (u64, Arc<Vec<u32>>)>,
    pub stored_bytes: u64,
    /// Each version's files, in read order.
    pub versions: Vec<Vec<ObjectId>>,
    /// Bytes newly stored by each commit.
    pub added: Vec<u64>,
    /// Files (re)written by each commit with new bytes.
    pub rewritten: Vec<usize>,
}

impl History {
    fn store(&mut self, r: &Rec) -> bool {
        if self.stored.contains_key(&r.id) {
            return false;
        }
        self.stored.insert(r.id, (r.size, r.lines.clone()));
        self.stored_bytes += r.size;
        true
    }
}

/// The month or week layout: one file per partition.
pub struct Partitioned {
    pub name: &'static str,
    key: Box<dyn Fn(u32) -> i64 + Send + Sync>,
    parts: BTreeMap<i64, Vec<u32>>,
    pub current: BTreeMap<i64, Rec>,
    pub history: History,
}

impl Partitioned {
    pub fn new(name: &'static str, key: Box<dyn Fn(u32) -> i64 + Send + Sync>) -> Self {
        Self {
            name,
            key,
            parts: BTreeMap::new(),
            current: BTreeMap::new(),
            history: History::default(),
        }
    }

    /// Applies one commit; returns the partitions whose file changed bytes.
    pub fn commit(
        &mut self,
        l: &Lines,
        m: &Master,
        s: &State,
        d: &Delta,
        props: &WriterProperties,
    ) -> Result<BTreeSet<i64>, LabError> {
        let mut dirty: BTreeSet<i64> = BTreeSet::new();
        for &i in &d.added {
            let k = (self.key)(i);
            self.parts.entry(k).or_default().push(i);
            dirty.insert(k);
        }
        for &i in &d.changed {
            dirty.insert((self.key)(i));
        }
        let erased: HashSet<u32> = d.erased.iter().copied().collect();
        for &i in &d.erased {
            dirty.insert((self.key)(i));
        }
        if !erased.is_empty() {
            for v in self.parts.values_mut() {
                v.retain(|i| !erased.contains(i));
            }
        }
        if d.reorder {
            dirty.extend(self.parts.keys().copied());
        }
        let mut jobs = Vec::new();
        let mut keys = Vec::new();
        for k in &dirty {
            let Some(lines) = self.parts.get(k) else {
                continue;
            };
            if lines.is_empty() {
                self.current.remove(k);
                continue;
            }
            let mut lines = lines.clone();
            if s.sorted {
                sort_lines(l, &mut lines);
            }
            let rows = match self.current.get(k) {
                Some(prev) if *prev.lines == lines => Rows::Returned {
                    prev: prev.bytes.clone(),
                    returned: Arc::new(Int64Array::from_iter_values(
                        lines.iter().map(|&i| s.returned[i as usize]),
                    )),
                },
                _ => Rows::Whole(m.current(&lines, s)?),
            };
            jobs.push(Job {
                rows,
                lines: Arc::new(lines),
            });
            keys.push(*k);
        }
        let recs = encode_all(jobs, props)?;
        let mut added = 0;
        let mut changed = BTreeSet::new();
        for (k, r) in keys.into_iter().zip(recs) {
            if self.current.get(&k).map(|c| c.id) != Some(r.id) {
                changed.insert(k);
            }
            if self.history.store(&r) {
                added += r.size;
            }
            self.current.insert(k, r);
        }
        self.history.added.push(added);
        self.history.rewritten.push(changed.len());
        self.history
            .versions
            .push(self.current.values().map(|r| r.id).collect());
        Ok(changed)
    }
}

/// One file of the changes layout: its rows (line, returned, deleted) as
/// written, and its record.
#[derive(Debug, Clone)]
pub struct ChangeFile {
    pub rows: Vec<(u32, i64, bool)>,
    pub is_change: bool,
    pub rec: Rec,
}

/// The changes layout.
#[derive(Default)]
pub struct Changes {
    pub files: BTreeMap<u64, ChangeFile>,
    next: u64,
    pub history: History,
}

impl Changes {
    fn job(m: &Master, rows: &[(u32, i64, bool)], is_change: bool) -> Result<Job, LabError> {
        let lines: Vec<u32> = rows.iter().filter(|r| !r.2).map(|r| r.0).collect();
        let batch = if is_change {
            m.change_rows(rows)?
        } else {
            let ret: Vec<i64> = rows.iter().map(|r| r.1).collect();
            let ls: Vec<u32> = rows.iter().map(|r| r.0).collect();
            m.rows(&ls, &ret)?
        };
        Ok(Job {
            rows: Rows::Whole(batch),
            lines: Arc::new(lines),
        })
    }

    pub fn commit(
        &mut self,
        l: &Lines,
        m: &Master,
        s: &State,
        d: &Delta,
        props: &WriterProperties,
    ) -> Result<(), LabError> {
        let mut new_files: Vec<(Vec<Row>, bool)> = Vec::new();
        if !d.added.is_empty() {
            let mut lines = d.added.clone();
            if s.sorted {
                sort_lines(l, &mut lines);
            }
            new_files.push((
                lines
                    .iter()
                    .map(|&i| (i, s.returned[i as usize], false))
                    .collect(),
                false,
            ));
        }
        if !d.changed.is_empty() || !d.erased.is_empty() {
            let mut rows: Vec<(u32, i64, bool)> = d
                .changed
                .iter()
                .map(|&i| (i, s.returned[i as usize], false))
                .collect();
            rows.extend(d.erased.iter().map(|&i| (i, 0, true)));
            rows.sort_by_key(|r| r.0);
            if s.sorted {
                let rank = crate::experiment::key_ranks(l);
                rows.sort_by_key(|r| rank[r.0 as usize]);
            }
            new_files.push((rows, true));
        }
        let mut jobs = Vec::new();
        let mut slots: Vec<(Option<u64>, Vec<Row>, bool)> = Vec::new();
        if d.reorder {
            for (seq, f) in &self.files {
                let mut rows = f.rows.clone();
                let rank = crate::experiment::key_ranks(l);
                rows.sort_by_key(|r| rank[r.0 as usize]);
                jobs.push(Self::job(m, &rows, f.is_change)?);
                slots.push((Some(*seq), rows, f.is_change));
            }
        }
        for (rows, is_change) in new_files {
            jobs.push(Self::job(m, &rows, is_change)?);
            slots.push((None, rows, is_change));
        }
        let recs = encode_all(jobs, props)?;
        let mut added = 0;
        let mut rewritten = 0;
        for ((seq, rows, is_change), rec) in slots.into_iter().zip(recs) {
            if self.history.store(&rec) {
                added += rec.size;
                rewritten += 1;
            }
            let seq = seq.unwrap_or_else(|| {
                self.next += 1;
                self.next
            });
            self.files.insert(
                seq,
                ChangeFile {
                    rows,
                    is_change,
                    rec,
                },
            );
        }
        self.history.added.push(added);
        self.history.rewritten.push(rewritten);
        self.history
            .versions
            .push(self.files.values().map(|f| f.rec.id).collect());
        Ok(())
    }
}

/// Reads a version of a layout back from its files: the content hash of
/// the rows it holds, the rows it holds, and the rows read. For the changes
/// layout (`newest`), the newest copy of each line wins and deleted lines
/// are dropped.
pub fn read_back(
    files: &[(ObjectId, Bytes)],
    newest: bool,
    cache: &mut HashMap<ObjectId, FileHashes>,
) -> Result<(ContentHash, u64, u64), LabError> {
    let todo: Vec<&(ObjectId, Bytes)> = files
        .iter()
        .filter(|(id, _)| !cache.get(id).is_some_and(|c| c.lines.is_some() || !newest))
        .collect();
    let decoded = decode_many(&todo.iter().map(|(_, b)| b).collect::<Vec<_>>())?;
    for ((id, _), d) in todo.iter().zip(decoded) {
        let sum: ContentHash = d.iter().map(|r| r.1).collect();
        let rows = d.len() as u64;
        cache.insert(
            *id,
            FileHashes {
                sum,
                rows,
                lines: newest.then_some(d),
            },
        );
    }
    let mut rows_read = 0u64;
    let mut content = ContentHash::EMPTY;
    let mut rows = 0u64;
    let mut per_line: HashMap<i64, Option<[u8; 32]>> = HashMap::new();
    for (id, _) in files {
        let Some(f) = cache.get(id) else {
            continue;
        };
        rows_read += f.rows;
        match (&f.lines, newest) {
            (Some(lines), true) => {
                for (line, h, deleted) in lines {
                    per_line.insert(*line, if *deleted { None } else { Some(*h) });
                }
            }
            _ => {
                content.merge(&f.sum);
                rows += f.rows;
            }
        }
    }
    if newest {
        for h in per_line.values().flatten() {
            content.add(h);
            rows += 1;
        }
    }
    Ok((content, rows, rows_read))
}

fn decode_many(files: &[&Bytes]) -> Result<Vec<Decoded>, LabError> {
    on_two_threads(files, |b| decode_one(b))
}

fn decode_one(b: &Bytes) -> Result<Decoded, LabError> {
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(b.clone())?
        .with_batch_size(64 * 1024)
        .build()?;
    let mut out = Vec::new();
    for batch in reader {
        let batch = batch?;
        let deleted: Vec<bool> = match batch.column_by_name("deleted") {
            Some(c) => c.as_boolean().iter().map(|v| v == Some(true)).collect(),
            None => vec![false; batch.num_rows()],
        };
        let table = batch.project(&(0..10).collect::<Vec<_>>())?;
        let hashes = tablepin_rowhash::hash_rows(&table)?;
        let lines = table.column(0).as_primitive::<Int64Type>();
        for i in 0..table.num_rows() {
            out.push((lines.value(i), hashes[i], deleted[i]));
        }
    }
    Ok(out)
}

/// The line ids of a decoded file with data (for the checks of the
/// independent test).
pub fn lines_of(rec: &Rec) -> &[u32] {
    &rec.lines
}

/// Rows of a stored Parquet file, for tests.
pub fn count_rows(b: &Bytes) -> Result<u64, LabError> {
    let r = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(b.clone())?;
    Ok(r.metadata().file_metadata().num_rows().max(0) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Float64Array, StringArray, TimestampSecondArray};
    use tablepin::WriteSettings;

    /// Rows of the sales table: text with nulls and repeats, `returned`
    /// from `ret`.
    fn batch(n: usize, ret: impl Fn(usize) -> i64) -> RecordBatch {
        let text = |k: usize| -> ArrayRef {
            Arc::new(StringArray::from_iter((0..n).map(|i| {
                (i % 7 != 3).then(|| format!("v{}-{}", k, (i * 31 + k) % 13))
            })))
        };
        let ints = |f: fn(usize) -> i64| -> ArrayRef {
            Arc::new(Int64Array::from_iter((0..n).map(|i| Some(f(i)))))
        };
        let cols: Vec<ArrayRef> = vec![
            ints(|i| i as i64),
            text(1),
            text(2),
            text(3),
            ints(|i| (i % 5) as i64 - 1),
            Arc::new(TimestampSecondArray::from_iter_values(
                (0..n).map(|i| 1_260_000_000 + (i as i64) * 60),
            )),
            Arc::new(Float64Array::from_iter_values(
                (0..n).map(|i| i as f64 / 4.0),
            )),
            Arc::new(Float64Array::from_iter(
                (0..n).map(|i| (i % 3 != 0).then_some(12_000.0 + (i % 9) as f64)),
            )),
            text(4),
            Arc::new(Int64Array::from_iter((0..n).map(|i| Some(ret(i))))),
        ];
        RecordBatch::try_new(crate::experiment::schema(), cols).unwrap()
    }

    /// Re-encoding only `returned` gives the very bytes of a whole encode,
    /// with the experiment's settings and with tablepin's (page index on),
    /// over several row groups and pages.
    #[test]
    fn encode_returned_equals_a_whole_encode() {
        let mut small = WriteSettings::pyarrow_like();
        small.row_group_rows = 1500;
        let paged = WriteSettings {
            row_group_rows: 1500,
            ..Default::default()
        };
        for settings in [WriteSettings::pyarrow_like(), small, paged] {
            let props = settings.properties().unwrap();
            let old = batch(4000, |_| 0);
            let new = batch(4000, |i| if i % 97 == 5 { (i % 4) as i64 + 1 } else { 0 });
            let prev = encode(&old, &props).unwrap();
            let whole = encode(&new, &props).unwrap();
            assert_ne!(prev, whole, "the test must change the file");
            let again = encode_returned(&prev, new.column(9), &props).unwrap();
            assert_eq!(ObjectId::of(&again), ObjectId::of(&whole));
        }
    }

    #[test]
    fn encode_returned_refuses_a_wrong_row_count() {
        let props = WriteSettings::pyarrow_like().properties().unwrap();
        let prev = encode(&batch(100, |_| 0), &props).unwrap();
        let short: ArrayRef = Arc::new(Int64Array::from(vec![1i64; 99]));
        let e = encode_returned(&prev, &short, &props).unwrap_err();
        assert!(e.to_string().contains("100 rows"), "{e}");
    }
}
