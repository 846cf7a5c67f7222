//! The stream executor of a [`ScanPlan`]: rows as they are read, memory
//! holding the files being read and not the table.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use futures::stream::{self, BoxStream, StreamExt};
use roaring::RoaringBitmap;
use tablepin_format::{KeyBound, ObjectId, TableSnapshot};
use tablepin_store::Store;

use super::{ScanPlan, ScanRequest};
use crate::error::Result;
use crate::table::datafile::{DataFile, Select};
use crate::table::merge::{Batches, MergeIter};
use crate::table::window::{self, Stage};
use crate::table::{dv, keys, ReadStats, ScanOptions};

/// A plan being executed: its files' deletion vectors loaded, and what it
/// read so far.
pub(crate) struct Scan {
    store: Arc<Store>,
    pub(super) plan: ScanPlan,
    dvs: Vec<Option<RoaringBitmap>>,
    stats: Arc<Mutex<ReadStats>>,
}

impl Scan {
    /// Decides a read of `snap` and opens it.
    pub(crate) async fn new(
        store: Arc<Store>,
        snap: &TableSnapshot,
        table: &str,
        req: &ScanRequest<'_>,
    ) -> Result<Self> {
        Self::open(store, ScanPlan::decide(snap, table, req)?).await
    }

    /// Opens a plan: loads the deletion vectors of the files it reads.
    async fn open(store: Arc<Store>, plan: ScanPlan) -> Result<Self> {
        let dvs = dv::load_many(&store, &plan.files).await?;
        Ok(Self {
            store,
            stats: Arc::new(Mutex::new(plan.stats())),
            plan,
            dvs,
        })
    }

    /// The schema of the batches the scan gives.
    pub(crate) fn schema(&self) -> SchemaRef {
        self.plan.schema()
    }

    /// What the scan read so far (shared with the streams).
    pub(crate) fn stats(&self) -> Arc<Mutex<ReadStats>> {
        self.stats.clone()
    }

    /// The data files the scan reads.
    pub(crate) fn files(&self) -> usize {
        self.plan.files.len()
    }

    /// Counts rows given.
    fn gave(&self, rows: usize) {
        if let Ok(mut s) = self.stats.lock() {
            s.rows += rows as u64;
        }
    }

    /// The rows of files `part`, `part + parts`, … , file by file, reading
    /// `at_once` files at a time (fetched, verified and decoded as one job
    /// each, on all cores), stopping at the plan's limit.
    pub(crate) fn stream(
        self: Arc<Self>,
        part: usize,
        parts: usize,
        at_once: usize,
    ) -> BoxStream<'static, Result<RecordBatch>> {
        let cursor = Cursor {
            mine: (part..self.files()).step_by(parts.max(1)).collect(),
            scan: self,
            next: 0,
            taken: 0,
            ready: VecDeque::new(),
        };
        stream::unfold(cursor, move |mut c| async move {
            loop {
                if let Some(b) = c.ready.pop_front() {
                    return Some((Ok(b), c));
                }
                let left = c.scan.plan.limit.map(|l| l.saturating_sub(c.taken));
                if c.next >= c.mine.len() || left == Some(0) {
                    return None;
                }
                let end = (c.next + at_once.max(1)).min(c.mine.len());
                let step = c.mine[c.next..end].to_vec();
                c.next = end;
                match c.scan.read_files(&step, left).await {
                    Ok(batches) => {
                        let batches = match left {
                            Some(n) => crate::table::take_rows(batches, n),
                            None => batches,
                        };
                        let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
                        c.taken += rows;
                        c.scan.gave(rows);
                        c.ready.extend(batches);
                    }
                    Err(e) => {
                        c.next = c.mine.len();
                        return Some((Err(e), c));
                    }
                }
            }
        })
        .boxed()
    }

    /// Fetches, verifies and reads the files at `idx`, with the columns
    /// returned.
    async fn read_files(&self, idx: &[usize], left: Option<usize>) -> Result<Vec<RecordBatch>> {
        let at = Files {
            plan: &self.plan,
            dvs: &self.dvs,
            stats: &self.stats,
        };
        let per_file = at.decode(&self.store, idx, left).await?;
        per_file
            .iter()
            .flatten()
            .map(|b| self.plan.read.project(b))
            .collect()
    }
}

/// A plan's files with their deletion vectors, and what reading them
/// counted.
pub(super) struct Files<'a> {
    pub(super) plan: &'a ScanPlan,
    pub(super) dvs: &'a [Option<RoaringBitmap>],
    pub(super) stats: &'a Mutex<ReadStats>,
}

impl Files<'_> {
    /// Fetches, verifies and decodes the files at `idx` (each one job, on
    /// all cores), counting them: each file's rows the filter keeps, with
    /// every decoded column. Without a filter, each file decodes at most
    /// `left` rows.
    pub(super) async fn decode(
        &self,
        store: &Store,
        idx: &[usize],
        left: Option<usize>,
    ) -> Result<Vec<Vec<RecordBatch>>> {
        let files = &self.plan.files;
        let ids: Vec<ObjectId> = idx.iter().map(|&i| files[i].data).collect();
        let per_file = store
            .map_blobs(&ids, |j, bytes| {
                let i = idx[j];
                self.plan
                    .read
                    .decoded(files[i].data, bytes, self.dvs[i].as_ref(), left)
            })
            .await?;
        if let Ok(mut s) = self.stats.lock() {
            for (&i, (_, decoded)) in idx.iter().zip(&per_file) {
                s.count_file(&files[i]);
                s.rows_decoded += decoded;
            }
        }
        Ok(per_file.into_iter().map(|(b, _)| b).collect())
    }
}

/// Where a stream of a [`Scan`] is.
struct Cursor {
    scan: Arc<Scan>,
    /// The files this stream reads, by index, and the next one.
    mine: Vec<usize>,
    next: usize,
    /// Rows given so far.
    taken: usize,
    ready: VecDeque<RecordBatch>,
}

/// Rows as they are read, with what the read touched so far.
pub(crate) struct RowStream {
    pub(crate) schema: SchemaRef,
    pub(crate) rows: BoxStream<'static, Result<RecordBatch>>,
    pub(crate) stats: Arc<Mutex<ReadStats>>,
}

/// Streams the rows of a snapshot that `opts` asks for, in the order the
/// collect executor gives them: keyed tables in key order (each file
/// decoded a batch at a time and merged), unkeyed ones and chosen files
/// file by file (chosen files one at a time: a task's memory holds one
/// file).
pub(crate) async fn open(
    store: Arc<Store>,
    snap: &TableSnapshot,
    table: &str,
    opts: &ScanOptions,
) -> Result<RowStream> {
    let plan = ScanPlan::decide(snap, table, &ScanRequest::of(opts))?;
    if plan.order.is_some() {
        return merged(store, plan, STAGE_BYTES).await;
    }
    let at_once = match opts.files {
        Some(_) => 1,
        None => tablepin_format::threads(),
    };
    let scan = Arc::new(Scan::open(store, plan).await?);
    Ok(RowStream {
        schema: scan.schema(),
        stats: scan.stats(),
        rows: scan.stream(0, 1, at_once),
    })
}

/// What a stage of a keyed read may hold of the files it opens at once
/// (their stored bytes): a group of overlapping files larger than this is
/// read in stages (`window::Spans::stages`).
const STAGE_BYTES: u64 = 64 << 20;

/// [`open`] of a keyed table: the files merged by key as they decode, a
/// stage of files at a time in key order (a group of files whose key ranges
/// overlap, cut where it is large), the next stage read meanwhile, so that
/// memory holds the files that span the key the read is at and not the
/// table's.
async fn merged(store: Arc<Store>, plan: ScanPlan, stage_bytes: u64) -> Result<RowStream> {
    let scan = Arc::new(Scan::open(store, plan).await?);
    if let Ok(mut s) = scan.stats.lock() {
        for (f, dv) in scan.plan.files.iter().zip(&scan.dvs) {
            s.count_file(f);
            s.rows_decoded += f.rows - dv.as_ref().map_or(0, |d| d.len().min(f.rows));
        }
    }
    let stages = match window::Spans::of(&scan.plan.files) {
        Some(spans) => spans.stages(&scan.plan.files, stage_bytes),
        None => vec![Stage {
            files: (0..scan.files()).collect(),
            below: None,
        }],
    };
    let schema = &scan.plan.read.schema;
    let codec = keys::KeyCodec::new(schema, scan.plan.order.clone().unwrap_or_default())?;
    let merge = Arc::new(Mutex::new(MergeIter::new(schema, Vec::new(), codec)?));
    let stage_scan = scan.clone();
    let merged = stream::iter(stages)
        .map(move |stage| {
            let scan = stage_scan.clone();
            async move { open_stage(&scan, stage).await }
        })
        .buffered(2)
        .flat_map(move |opened| {
            let given = opened.and_then(|(inputs, below)| {
                let mut m = merge.lock().map_err(|_| poisoned())?;
                m.extend(inputs, below.as_ref())?;
                Ok(Drain(merge.clone()))
            });
            match given {
                Ok(rows) => stream::iter(rows).boxed(),
                Err(e) => stream::once(async move { Err(e) }).boxed(),
            }
        });
    let kept = scan.clone();
    // Ends at the limit (which stops the reading of further stages).
    let rows = merged
        .scan(scan.plan.limit, move |left, b| {
            if *left == Some(0) {
                return std::future::ready(None);
            }
            let read = &kept.plan.read;
            let out = match b.and_then(|b| read.project(&read.filtered(b)?)) {
                Err(e) => Some(Err(e)),
                Ok(b) => {
                    let b = match *left {
                        Some(n) if b.num_rows() > n => b.slice(0, n),
                        _ => b,
                    };
                    *left = left.map(|n| n - b.num_rows());
                    kept.gave(b.num_rows());
                    (b.num_rows() > 0).then_some(Ok(b))
                }
            };
            std::future::ready(Some(out))
        })
        .filter_map(std::future::ready);
    Ok(RowStream {
        schema: scan.schema(),
        stats: scan.stats(),
        rows: rows.boxed(),
    })
}

fn poisoned() -> crate::error::Error {
    crate::error::Error::Internal("a keyed read's merge failed in another thread".into())
}

/// A keyed read's merge, given until the bound of the stage last added.
struct Drain(Arc<Mutex<MergeIter>>);

impl Iterator for Drain {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.0.lock() {
            Ok(mut m) => m.next(),
            Err(_) => Some(Err(poisoned())),
        }
    }
}

/// The files of a stage of a keyed read, read, verified and opened as
/// sorted inputs of its merge, and the key the stage's rows lie below.
async fn open_stage(scan: &Scan, stage: Stage) -> Result<(Vec<Batches>, Option<KeyBound>)> {
    let schema = &scan.plan.read.schema;
    let files = &stage.files;
    let ids: Vec<ObjectId> = files.iter().map(|i| scan.plan.files[*i].data).collect();
    let opened = scan
        .store
        .map_blobs(&ids, |i, bytes| DataFile::open(ids[i], bytes))
        .await?;
    let mut inputs: Vec<Batches> = Vec::with_capacity(opened.len());
    for (file, i) in opened.iter().zip(files) {
        let dv = scan.dvs[*i].as_ref();
        inputs.push(Box::new(file.batches(schema, Select::Live(dv), None)?));
    }
    Ok((inputs, stage.below))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::plan::Mode;
    use crate::CommitOptions;
    use crate::{Repo, WriteSettings};
    use arrow::array::{ArrayRef, Float64Array, Int64Array};
    use arrow::compute::concat_batches;

    fn rows(ids: &[i64], bump: f64) -> RecordBatch {
        let price: Vec<f64> = ids.iter().map(|i| *i as f64 + bump).collect();
        RecordBatch::try_from_iter(vec![
            ("id", Arc::new(Int64Array::from(ids.to_vec())) as ArrayRef),
            ("price", Arc::new(Float64Array::from(price)) as ArrayRef),
        ])
        .unwrap()
    }

    /// A keyed read in stages (here a file a stage) gives what the whole
    /// read gives, row for row and in order: five disjoint files of 200
    /// rows, then two weekly upserts whose changed and new keys span them
    /// all, as a large table's weekly files do.
    #[tokio::test]
    async fn a_keyed_read_in_stages_gives_what_a_whole_read_gives() {
        let write = WriteSettings {
            file_rows: 200,
            row_group_rows: 200,
            ..WriteSettings::default()
        };
        let repo = Repo::init("memory://", write).await.unwrap();
        let keyed = CommitOptions {
            key: Some(vec!["id".into()]),
            ..Default::default()
        };
        let b = rows(&(0..1000).collect::<Vec<_>>(), 0.0);
        repo.commit("t", b.schema(), vec![b], &keyed).await.unwrap();
        let upsert = CommitOptions {
            mode: Mode::Upsert,
            ..Default::default()
        };
        for (week, changed) in [(1.0, vec![5, 250, 610, 990]), (2.0, vec![100, 250, 700])] {
            let new = (1000 + 50 * week as i64)..(1050 + 50 * week as i64);
            let ids: Vec<i64> = changed.into_iter().chain(new).collect();
            let b = rows(&ids, week / 4.0);
            repo.commit("t", b.schema(), vec![b], &upsert)
                .await
                .unwrap();
        }
        let cases = [
            ScanOptions::default(),
            ScanOptions {
                columns: Some(vec!["price".into()]),
                filter: Some("id > 150".into()),
                files: None,
                limit: Some(700),
            },
        ];
        for opts in &cases {
            let whole = repo
                .snapshot("main")
                .await
                .unwrap()
                .scan("t", opts)
                .await
                .unwrap();
            let plan = ScanPlan::decide(&whole.snapshot, "t", &ScanRequest::of(opts)).unwrap();
            let stages = window::Spans::of(&plan.files)
                .unwrap()
                .stages(&plan.files, 1);
            assert!(stages.len() >= 5, "{stages:?}");
            let s = merged(repo.store_arc(), plan, 1).await.unwrap();
            let got: Vec<RecordBatch> = s
                .rows
                .collect::<Vec<_>>()
                .await
                .into_iter()
                .collect::<Result<_>>()
                .unwrap();
            assert_eq!(
                concat_batches(&s.schema, &got).unwrap(),
                concat_batches(&whole.schema, &whole.batches).unwrap(),
                "{opts:?}"
            );
        }
    }
}
