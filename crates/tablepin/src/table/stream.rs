//! Streaming reads: a snapshot's live rows file by file, in file order, so
//! memory holds the files being read and not the table.
//!
//! A [`Scan`] is decided before any data file is read: the columns to
//! decode (those asked for and the filter's), the filter compiled over
//! them, the files whose key range can hold a matching row (the others are
//! never fetched), and each file's deletion vector. Each file is then
//! fetched, verified against its name and decoded as one job; where the
//! filter has a condition on one column, the pages whose smallest and
//! largest values (the page index) rule out a match are skipped while
//! decoding, as are the rows the deletion vector hides. No order is
//! promised: a query engine that wants one sorts, and the merge of a keyed
//! read ([`super::scan`]) is not paid.
//!
//! A keyed table streamed in key order (`Snapshot::stream`, what `export`
//! writes from) is merged as its files decode a batch at a time
//! (`merge::MergeIter`), one group of files whose key ranges overlap at a
//! time, in key order, the next group read meanwhile: memory holds a group's
//! verified bytes and one batch per file, not the table (after `compact`, a
//! group is a file). `cat --limit` keeps its own read of the few files that
//! can hold the first rows (`read_first`), which fetches fewer files than a
//! merge of all of them would.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use arrow::array::{ArrayRef, BooleanArray, Int64Array, RecordBatch, StringArray};
use arrow::compute::filter_record_batch;
use arrow::datatypes::{DataType, SchemaRef};
use bytes::Bytes;
use datafusion::common::pruning::PruningStatistics;
use datafusion::common::{Column, ScalarValue};
use datafusion::physical_expr::split_conjunction;
use datafusion::physical_expr::utils::collect_columns;
use datafusion::physical_optimizer::pruning::{PruningPredicate, PruningPredicateBuilder};
use futures::stream::{self, BoxStream, StreamExt, TryStreamExt};
use roaring::RoaringBitmap;
use tablepin_format::{FileEntry, KeyBound, ObjectId, TableSnapshot};
use tablepin_store::Store;

use super::datafile::{DataFile, PageIndex, Select};
use super::{dv, keys, predicate::Predicate, schema_of, ReadStats, ScanRequest};
use crate::error::{Error, Result};

/// A scan decided: what each file decodes and keeps, and which files.
pub(crate) struct Scan {
    store: Arc<Store>,
    files: Vec<(FileEntry, Option<RoaringBitmap>)>,
    read: FileRead,
    limit: Option<usize>,
    stats: Arc<Mutex<ReadStats>>,
}

/// What a scan does with each data file's bytes; no I/O.
struct FileRead {
    /// The columns decoded, in the table's order.
    schema: SchemaRef,
    /// The columns returned, as positions in `schema`.
    out: Vec<usize>,
    out_schema: SchemaRef,
    filter: Option<Predicate>,
    /// Conditions on one column each, for skipping pages.
    pages: Vec<(String, Arc<PruningPredicate>)>,
}

impl Scan {
    /// Decides a scan of `snap` (`req.ordered` is not looked at: a
    /// stream is in file order), loading the deletion vectors of the
    /// files it will read.
    pub(crate) async fn new(
        store: Arc<Store>,
        snap: &TableSnapshot,
        table: &str,
        req: &ScanRequest<'_>,
    ) -> Result<Self> {
        Self::decoding(store, snap, table, req, &[]).await
    }

    /// [`Scan::new`], decoding the columns `also` too (not returned).
    async fn decoding(
        store: Arc<Store>,
        snap: &TableSnapshot,
        table: &str,
        req: &ScanRequest<'_>,
        also: &[String],
    ) -> Result<Self> {
        let schema = schema_of(snap);
        let out: Vec<usize> = match req.columns {
            Some(cols) => keys::key_indices(table, &schema, cols)?,
            None => (0..schema.fields().len()).collect(),
        };
        let mut decode = out.clone();
        decode.extend(keys::key_indices(table, &schema, also)?);
        if let Some(f) = &req.filter {
            let cols: Vec<String> = f.compile(table, &schema)?.columns().into_iter().collect();
            decode.extend(keys::key_indices(table, &schema, &cols)?);
        }
        decode.sort_unstable();
        decode.dedup();
        let read_schema = Arc::new(
            schema
                .project(&decode)
                .map_err(Error::arrow("projecting columns"))?,
        );
        let filter = match &req.filter {
            Some(f) => Some(f.compile(table, &read_schema)?),
            None => None,
        };
        let at: Vec<usize> = out
            .iter()
            .filter_map(|i| decode.binary_search(i).ok())
            .collect();
        let out_schema = Arc::new(
            read_schema
                .project(&at)
                .map_err(Error::arrow("projecting columns"))?,
        );
        let pages = filter
            .as_ref()
            .map(|f| single_column_conditions(f, &read_schema))
            .unwrap_or_default();
        let keep = match &filter {
            Some(f) => files_that_may_match(snap, f, &read_schema),
            None => vec![true; snap.files.len()],
        };
        let asked = files_asked(table, snap.files.len(), req.files)?;
        let chosen: Vec<&FileEntry> = asked
            .iter()
            .filter(|&&i| keep[i])
            .map(|&i| &snap.files[i])
            .collect();
        let dvs = dv::load_many(&store, chosen.iter().copied()).await?;
        let stats = ReadStats {
            columns_decoded: decode.len(),
            files_skipped: asked.len() - chosen.len(),
            ..ReadStats::default()
        };
        Ok(Self {
            store,
            files: chosen.into_iter().cloned().zip(dvs).collect(),
            read: FileRead {
                schema: read_schema,
                out: at,
                out_schema,
                filter,
                pages,
            },
            limit: req.limit,
            stats: Arc::new(Mutex::new(stats)),
        })
    }

    /// The schema of the batches the scan gives.
    pub(crate) fn schema(&self) -> SchemaRef {
        self.read.out_schema.clone()
    }

    /// What the scan read so far (shared with the streams).
    pub(crate) fn stats(&self) -> Arc<Mutex<ReadStats>> {
        self.stats.clone()
    }

    /// The data files the scan reads.
    pub(crate) fn files(&self) -> usize {
        self.files.len()
    }

    /// The rows of files `part`, `part + parts`, … , reading `at_once`
    /// files at a time (fetched, verified and decoded as one job each, on
    /// all cores), stopping at the scan's limit.
    pub(crate) fn stream(
        self: Arc<Self>,
        part: usize,
        parts: usize,
        at_once: usize,
    ) -> BoxStream<'static, Result<RecordBatch>> {
        let cursor = Cursor {
            mine: (part..self.files.len()).step_by(parts.max(1)).collect(),
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
                let left = c.scan.limit.map(|l| l.saturating_sub(c.taken));
                if c.next >= c.mine.len() || left == Some(0) {
                    return None;
                }
                let end = (c.next + at_once.max(1)).min(c.mine.len());
                let step = c.mine[c.next..end].to_vec();
                c.next = end;
                match c.scan.read_files(&step, left).await {
                    Ok(batches) => {
                        let batches = match left {
                            Some(n) => super::take_rows(batches, n),
                            None => batches,
                        };
                        let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
                        c.taken += rows;
                        if let Ok(mut s) = c.scan.stats.lock() {
                            s.rows += rows as u64;
                        }
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

    /// Fetches, verifies and reads the files at `idx`, counting them.
    async fn read_files(&self, idx: &[usize], left: Option<usize>) -> Result<Vec<RecordBatch>> {
        let ids: Vec<ObjectId> = idx.iter().map(|&i| self.files[i].0.data).collect();
        let per_file = self
            .store
            .map_blobs(&ids, |j, bytes| {
                let (f, dv) = &self.files[idx[j]];
                self.read.file(f.data, bytes, dv.as_ref(), left)
            })
            .await?;
        if let Ok(mut s) = self.stats.lock() {
            for (&i, (_, decoded)) in idx.iter().zip(&per_file) {
                s.count_file(&self.files[i].0);
                s.rows_decoded += decoded;
            }
        }
        Ok(per_file
            .into_iter()
            .flat_map(|(batches, _)| batches)
            .collect())
    }
}

/// The positions of the files a scan reads: `asked` (each a file of the
/// snapshot's `files`, at most once, kept in the order given), or all.
fn files_asked(table: &str, files: usize, asked: Option<&[usize]>) -> Result<Vec<usize>> {
    let Some(asked) = asked else {
        return Ok((0..files).collect());
    };
    let mut seen = vec![false; files];
    for &i in asked {
        match seen.get_mut(i) {
            None => {
                let have = match files {
                    0 => "no data file".to_string(),
                    n => format!("{n} data files (0 to {})", n - 1),
                };
                return Err(Error::InvalidArgument(format!(
                    "table '{table}' has {have} in this version; there is no data file {i}"
                )));
            }
            Some(true) => {
                return Err(Error::InvalidArgument(format!(
                    "data file {i} of table '{table}' is asked for twice; name each file once"
                )))
            }
            Some(s) => *s = true,
        }
    }
    Ok(asked.to_vec())
}

/// Rows as they are read, with what the read touched so far.
pub(crate) struct RowStream {
    pub(crate) schema: SchemaRef,
    pub(crate) rows: BoxStream<'static, Result<RecordBatch>>,
    pub(crate) stats: Arc<Mutex<ReadStats>>,
}

/// Streams the rows of a snapshot that `opts` asks for, as
/// [`super::scan`] returns them: keyed tables in key order (each file
/// decoded a batch at a time and merged; every file's verified bytes are
/// held meanwhile), unkeyed ones file by file.
pub(crate) async fn open(
    store: Arc<Store>,
    snap: &TableSnapshot,
    table: &str,
    opts: &super::ScanOptions,
) -> Result<RowStream> {
    let req = ScanRequest {
        columns: opts.columns.as_deref(),
        filter: opts.filter.as_deref().map(super::RowFilter::Sql),
        limit: opts.limit,
        ordered: true,
        files: opts.files.as_deref(),
    };
    if snap.key.is_empty() || req.files.is_some() {
        // Chosen files one at a time: a task's memory holds one file.
        let at_once = match req.files {
            Some(_) => 1,
            None => tablepin_format::threads(),
        };
        let scan = Arc::new(Scan::new(store, snap, table, &req).await?);
        return Ok(RowStream {
            schema: scan.schema(),
            stats: scan.stats(),
            rows: scan.stream(0, 1, at_once),
        });
    }
    ordered(store, snap, table, &req).await
}

/// [`open`], every batch collected.
pub(crate) async fn collect(
    store: Arc<Store>,
    snap: &TableSnapshot,
    table: &str,
    opts: &super::ScanOptions,
) -> Result<(SchemaRef, Vec<RecordBatch>, ReadStats)> {
    let s = open(store, snap, table, opts).await?;
    let batches: Vec<RecordBatch> = s.rows.try_collect().await?;
    let stats = s.stats.lock().map(|g| g.clone()).unwrap_or_default();
    Ok((s.schema, batches, stats))
}

/// [`open`] of a keyed table: the files merged by key as they decode, a
/// group of files whose key ranges overlap at a time, in key order (the
/// next group read meanwhile), so that memory holds a group's files and
/// not the table's.
async fn ordered(
    store: Arc<Store>,
    snap: &TableSnapshot,
    table: &str,
    req: &ScanRequest<'_>,
) -> Result<RowStream> {
    // The merge needs the key decoded too.
    let plan = Arc::new(Scan::decoding(store.clone(), snap, table, req, &snap.key).await?);
    let read_schema = plan.read.schema.clone();
    if let Ok(mut s) = plan.stats.lock() {
        for (f, dv) in &plan.files {
            s.count_file(f);
            s.rows_decoded += f.rows - dv.as_ref().map_or(0, |d| d.len().min(f.rows));
        }
    }
    let key_in_read = keys::key_indices(table, &read_schema, &snap.key)?;
    let entries: Vec<FileEntry> = plan.files.iter().map(|(f, _)| f.clone()).collect();
    let groups = match super::window::Spans::of(&entries) {
        Some(spans) => spans.groups(),
        None => vec![(0..entries.len()).collect()],
    };
    let group_plan = plan.clone();
    let merged = stream::iter(groups)
        .map(move |files| {
            let (store, plan, key) = (store.clone(), group_plan.clone(), key_in_read.clone());
            async move { merge_group(&store, &plan, &files, key).await }
        })
        .buffered(2)
        .flat_map(|group| match group {
            Ok(rows) => stream::iter(rows).boxed(),
            Err(e) => stream::once(async move { Err(e) }).boxed(),
        });
    let kept = plan.clone();
    // Ends at the limit (which stops the reading of further groups).
    let rows = merged
        .scan(plan.limit, move |left, b| {
            if *left == Some(0) {
                return std::future::ready(None);
            }
            let out = match b.and_then(|b| kept.read.keep(b)) {
                Err(e) => Some(Err(e)),
                Ok(b) => {
                    let b = match *left {
                        Some(n) if b.num_rows() > n => b.slice(0, n),
                        _ => b,
                    };
                    *left = left.map(|n| n - b.num_rows());
                    if let Ok(mut s) = kept.stats.lock() {
                        s.rows += b.num_rows() as u64;
                    }
                    (b.num_rows() > 0).then_some(Ok(b))
                }
            };
            std::future::ready(Some(out))
        })
        .filter_map(std::future::ready);
    Ok(RowStream {
        schema: plan.schema(),
        stats: plan.stats(),
        rows: rows.boxed(),
    })
}

/// The files `files` of a keyed scan read, verified and opened, and
/// merged by key (`key`: the key's columns in the decoded schema).
async fn merge_group(
    store: &Store,
    plan: &Scan,
    files: &[usize],
    key: Vec<usize>,
) -> Result<super::merge::MergeIter> {
    let schema = &plan.read.schema;
    let ids: Vec<ObjectId> = files.iter().map(|i| plan.files[*i].0.data).collect();
    let opened = store
        .map_blobs(&ids, |i, bytes| DataFile::open(ids[i], bytes))
        .await?;
    let mut inputs: Vec<super::merge::Batches> = Vec::with_capacity(opened.len());
    for (file, i) in opened.iter().zip(files) {
        let dv = plan.files[*i].1.as_ref();
        inputs.push(Box::new(file.batches(schema, Select::Live(dv), None)?));
    }
    let codec = keys::KeyCodec::new(schema, key)?;
    super::merge::MergeIter::new(schema, inputs, codec)
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

impl FileRead {
    /// One data file's rows that the deletion vector leaves and the filter
    /// keeps, and how many rows were decoded. Without a filter, at most
    /// `limit` rows are decoded.
    fn file(
        &self,
        blob: ObjectId,
        bytes: Bytes,
        dv: Option<&RoaringBitmap>,
        limit: Option<usize>,
    ) -> Result<(Vec<RecordBatch>, u64)> {
        let index = match self.pages.is_empty() {
            true => PageIndex::Locations,
            false => PageIndex::WithStats,
        };
        let file = DataFile::open_with(blob, bytes, index)?;
        let rows = file.rows();
        let limit = limit.filter(|_| self.filter.is_none());
        let (batches, decoded) = match self.allowed(&file) {
            None if limit.is_none() => {
                let live = rows as u64 - dv.map_or(0, |d| d.len().min(rows as u64));
                (file.live(&self.schema, dv)?, live)
            }
            None => {
                let live = file.read_limited(&self.schema, Select::Live(dv), limit)?;
                let n = live.iter().map(|b| b.num_rows() as u64).sum();
                (live, n)
            }
            Some(mut keep) => {
                if let Some(dv) = dv {
                    keep -= dv;
                }
                if keep.is_empty() {
                    return Ok((Vec::new(), 0));
                }
                let positions: Vec<u32> = keep.iter().collect();
                let read = file.read_limited(&self.schema, Select::Positions(&positions), limit)?;
                let n = read.iter().map(|b| b.num_rows() as u64).sum();
                (read, n)
            }
        };
        let mut out = Vec::with_capacity(batches.len());
        for b in batches {
            let b = self.keep(b)?;
            if b.num_rows() > 0 {
                out.push(b);
            }
        }
        Ok((out, decoded))
    }

    /// The rows of a decoded batch the filter keeps, with the columns
    /// returned.
    fn keep(&self, b: RecordBatch) -> Result<RecordBatch> {
        let b = match &self.filter {
            Some(p) => {
                filter_record_batch(&b, &p.eval(&b)?).map_err(Error::arrow("filtering rows"))?
            }
            None => b,
        };
        b.project(&self.out)
            .map_err(Error::arrow("projecting columns"))
    }

    /// The rows of `file` whose pages the filter's one-column conditions do
    /// not rule out (`None`: no page is ruled out, or the file has no page
    /// statistics).
    fn allowed(&self, file: &DataFile) -> Option<RoaringBitmap> {
        let mut keep: Option<RoaringBitmap> = None;
        for (column, condition) in &self.pages {
            let Some(pages) = file.pages(column) else {
                continue;
            };
            let stats = Bounds {
                column,
                mins: pages.mins.clone(),
                maxes: pages.maxes.clone(),
                containers: pages.rows.len(),
            };
            // A condition DataFusion cannot check on these statistics rules
            // nothing out.
            let Ok(may) = condition.prune(&stats) else {
                continue;
            };
            if may.iter().all(|m| *m) {
                continue;
            }
            let mut rows = RoaringBitmap::new();
            for (r, m) in pages.rows.iter().zip(may) {
                if m {
                    rows.insert_range(r.start as u32..r.end as u32);
                }
            }
            keep = Some(match keep {
                Some(k) => k & rows,
                None => rows,
            });
        }
        keep
    }
}

/// The filter's conditions (of those joined by AND) that read one column,
/// each ready to be checked against that column's page statistics.
fn single_column_conditions(
    filter: &Predicate,
    schema: &SchemaRef,
) -> Vec<(String, Arc<PruningPredicate>)> {
    split_conjunction(filter.physical())
        .into_iter()
        .filter_map(|c| {
            let cols = collect_columns(c);
            let [col] = cols.iter().collect::<Vec<_>>()[..] else {
                return None;
            };
            let p = PruningPredicateBuilder::new()
                .with_file_schema(schema.clone())
                .build(c.clone())?;
            Some((col.name().to_string(), p))
        })
        .collect()
}

/// Which files of a snapshot may hold a row the filter matches, by their
/// key range (kept for single-column integer and text keys): a file whose
/// range rules every match out is not read.
fn files_that_may_match(snap: &TableSnapshot, filter: &Predicate, schema: &SchemaRef) -> Vec<bool> {
    let all = vec![true; snap.files.len()];
    let [key] = &snap.key[..] else {
        return all;
    };
    let Ok(field) = schema.field_with_name(key) else {
        return all;
    };
    let (Some(mins), Some(maxes)) = (
        key_bounds(
            snap.files.iter().map(|f| f.key_min.as_ref()),
            field.data_type(),
        ),
        key_bounds(
            snap.files.iter().map(|f| f.key_max.as_ref()),
            field.data_type(),
        ),
    ) else {
        return all;
    };
    let Some(p) = PruningPredicateBuilder::new()
        .with_file_schema(schema.clone())
        .build(filter.physical().clone())
    else {
        return all;
    };
    let stats = Bounds {
        column: key,
        mins,
        maxes,
        containers: snap.files.len(),
    };
    p.prune(&stats).unwrap_or(all)
}

/// Key bounds as an array of the key column's type (null where a file has
/// none); `None` for a type bounds are not kept for.
fn key_bounds<'a>(
    b: impl Iterator<Item = Option<&'a KeyBound>>,
    ty: &DataType,
) -> Option<ArrayRef> {
    let b: Vec<Option<&KeyBound>> = b.collect();
    let array: ArrayRef = if ty.is_integer() {
        Arc::new(Int64Array::from_iter(b.iter().map(|k| match k {
            Some(KeyBound::Int(i)) => Some(*i),
            _ => None,
        })))
    } else if matches!(
        ty,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
    ) {
        Arc::new(StringArray::from_iter(b.iter().map(|k| match k {
            Some(KeyBound::Str(s)) => Some(s.as_str()),
            _ => None,
        })))
    } else {
        return None;
    };
    arrow::compute::cast(&array, ty).ok()
}

/// One column's smallest and largest values in each of some containers
/// (a file's pages, or a snapshot's files), for DataFusion's pruning.
struct Bounds<'a> {
    column: &'a str,
    mins: ArrayRef,
    maxes: ArrayRef,
    containers: usize,
}

impl PruningStatistics for Bounds<'_> {
    fn min_values(&self, column: &Column) -> Option<ArrayRef> {
        (column.name == self.column).then(|| self.mins.clone())
    }
    fn max_values(&self, column: &Column) -> Option<ArrayRef> {
        (column.name == self.column).then(|| self.maxes.clone())
    }
    fn num_containers(&self) -> usize {
        self.containers
    }
    fn null_counts(&self, _: &Column) -> Option<ArrayRef> {
        None
    }
    fn row_counts(&self) -> Option<ArrayRef> {
        None
    }
    fn contained(
        &self,
        _: &Column,
        _: &std::collections::HashSet<ScalarValue>,
    ) -> Option<BooleanArray> {
        None
    }
}
