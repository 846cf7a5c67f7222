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
//! a version still uses them, their bytes are kept.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::Int64Type;
use bytes::Bytes;
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;
use tablepin_format::{ContentHash, ObjectId};

use crate::data::Lines;
use crate::experiment::{sort_lines, Delta, Master, State};
use crate::LabError;

/// A row of the changes layout as written: line, `returned`, deleted flag.
pub type Row = (u32, i64, bool);
/// A file to encode: its rows and the lines it holds with data.
type Job = (RecordBatch, Arc<Vec<u32>>);
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

/// Encodes jobs on two threads, keeping their order.
fn encode_all(
    jobs: Vec<(RecordBatch, Arc<Vec<u32>>)>,
    props: &WriterProperties,
) -> Result<Vec<Rec>, LabError> {
    let threads = 2usize;
    let mut results: Vec<Option<Result<Rec, LabError>>> = (0..jobs.len()).map(|_| None).collect();
    std::thread::scope(|s| {
        let chunks: Vec<Vec<(usize, &Job)>> = {
            let mut c: Vec<Vec<_>> = (0..threads).map(|_| Vec::new()).collect();
            // Largest first, dealt round-robin, balances the two threads.
            let mut order: Vec<usize> = (0..jobs.len()).collect();
            order.sort_by_key(|i| std::cmp::Reverse(jobs[*i].0.num_rows()));
            for (k, i) in order.into_iter().enumerate() {
                c[k % threads].push((i, &jobs[i]));
            }
            c
        };
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|chunk| {
                s.spawn(move || {
                    chunk
                        .into_iter()
                        .map(|(i, (b, lines))| {
                            (
                                i,
                                encode(b, props).map(|bytes| Rec {
                                    id: ObjectId::of(&bytes),
                                    size: bytes.len() as u64,
                                    bytes,
                                    lines: lines.clone(),
                                    rows: b.num_rows() as u64,
                                }),
                            )
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for h in handles {
            if let Ok(v) = h.join() {
                for (i, r) in v {
                    results[i] = Some(r);
                }
            }
        }
    });
    results
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err(LabError::Other("an encoding thread failed".into()))))
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
            jobs.push((m.current(&lines, s)?, Arc::new(lines)));
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
    fn job(
        m: &Master,
        rows: &[(u32, i64, bool)],
        is_change: bool,
    ) -> Result<(RecordBatch, Arc<Vec<u32>>), LabError> {
        let lines: Vec<u32> = rows.iter().filter(|r| !r.2).map(|r| r.0).collect();
        let batch = if is_change {
            m.change_rows(rows)?
        } else {
            let ret: Vec<i64> = rows.iter().map(|r| r.1).collect();
            let ls: Vec<u32> = rows.iter().map(|r| r.0).collect();
            m.rows(&ls, &ret)?
        };
        Ok((batch, Arc::new(lines)))
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
                let keys = crate::experiment::sort_keys(l);
                rows.sort_by(|a, b| keys(a.0).cmp(&keys(b.0)));
            }
            new_files.push((rows, true));
        }
        let mut jobs = Vec::new();
        let mut slots: Vec<(Option<u64>, Vec<Row>, bool)> = Vec::new();
        if d.reorder {
            for (seq, f) in &self.files {
                let mut rows = f.rows.clone();
                let keys = crate::experiment::sort_keys(l);
                rows.sort_by(|a, b| keys(a.0).cmp(&keys(b.0)));
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
    files: &[Bytes],
    newest: bool,
    cache: &mut HashMap<ObjectId, FileHashes>,
) -> Result<(ContentHash, u64, u64), LabError> {
    let todo: Vec<&Bytes> = files
        .iter()
        .filter(|b| {
            !cache
                .get(&ObjectId::of(b))
                .is_some_and(|c| c.lines.is_some() || !newest)
        })
        .collect();
    let decoded = decode_many(&todo)?;
    for (b, d) in todo.iter().zip(decoded) {
        let sum: ContentHash = d.iter().map(|r| r.1).collect();
        let rows = d.len() as u64;
        cache.insert(
            ObjectId::of(b),
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
    for b in files {
        let Some(f) = cache.get(&ObjectId::of(b)) else {
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
    let mut out: Vec<Option<Result<Decoded, LabError>>> = (0..files.len()).map(|_| None).collect();
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..2)
            .map(|t| {
                s.spawn(move || {
                    files
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| i % 2 == t)
                        .map(|(i, b)| (i, decode_one(b)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for h in hs {
            if let Ok(v) = h.join() {
                for (i, r) in v {
                    out[i] = Some(r);
                }
            }
        }
    });
    out.into_iter()
        .map(|r| r.unwrap_or_else(|| Err(LabError::Other("a decoding thread failed".into()))))
        .collect()
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

/// Unused column guard: keeps `Array` in scope for trait methods.
#[allow(dead_code)]
fn _len(a: &dyn Array) -> usize {
    a.len()
}
