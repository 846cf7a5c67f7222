//! Tables: how rows are kept in data files and deletion vectors, read back,
//! and changed.
//!
//! A table snapshot is a list of data files, each with an optional deletion
//! vector. Writes never rewrite an old file: new and changed rows go to new
//! files, old positions are hidden by new deletion vectors. Reads decode each
//! file minus its deletion vector and, for a keyed table, merge the files in
//! key order (`merge`). The commit planner (`plan`) turns "here is the
//! table now" (or rows to append, upsert or delete) into the smallest set of
//! new blobs, and updates the content hash in O(changed rows).

pub(crate) mod align;
pub mod datafile;
pub(crate) mod decide;
pub mod diff;
pub(crate) mod dv;
pub(crate) mod keys;
pub(crate) mod merge;
pub(crate) mod par;
pub(crate) mod plan;
pub(crate) mod predicate;
pub(crate) mod staged;
pub(crate) mod stream;
pub(crate) mod threeway;
pub(crate) mod types;
pub(crate) mod window;

use std::collections::BTreeSet;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::compute::filter_record_batch;
use arrow::datatypes::SchemaRef;
use serde::Serialize;
use tablepin_format::TableSnapshot;
use tablepin_store::Store;

use datafile::read_live;
pub use datafile::WriteSettings;
pub use staged::StagedFiles;

use crate::error::{Error, Result};

/// What a read touched.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ReadStats {
    /// Data files read.
    pub files: usize,
    /// Deletion vectors read.
    pub deletion_vectors: usize,
    /// Rows the files hold, deleted ones included.
    pub rows_in_files: u64,
    /// Rows returned.
    pub rows: u64,
    /// Bytes of blobs read.
    pub bytes: u64,
    /// Columns decoded: those asked for, the key and the filter's.
    pub columns_decoded: usize,
    /// Rows decoded: the files' rows less those their deletion vectors
    /// hide and those on pages the filter rules out (a streaming scan's
    /// count; 0 for a read that does not count them).
    #[serde(default)]
    pub rows_decoded: u64,
    /// Files not read because their key range rules out every row the
    /// filter matches (a streaming scan's count).
    #[serde(default)]
    pub files_skipped: usize,
}

impl ReadStats {
    /// Counts a file read: its blob, its deletion vector and its rows.
    pub(crate) fn count_file(&mut self, f: &tablepin_format::FileEntry) {
        self.files += 1;
        self.bytes += f.stored_bytes();
        self.deletion_vectors += usize::from(f.deletes.is_some());
        self.rows_in_files += f.rows;
    }
}

/// A schema's columns as one line: `name type, name type, …`.
pub fn columns_line(schema: &arrow::datatypes::Schema) -> String {
    schema
        .fields()
        .iter()
        .map(|f| format!("{} {}", f.name(), f.data_type()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The Arrow schema of a snapshot.
pub(crate) fn schema_of(snap: &TableSnapshot) -> SchemaRef {
    Arc::new(snap.schema.clone())
}

/// Which columns and rows a read returns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScanOptions {
    /// Only these columns, in this order (default: every column, in the
    /// table's order). Only these, the key and the filter's columns are
    /// decoded.
    pub columns: Option<Vec<String>>,
    /// Only the rows this SQL boolean expression over the table's columns
    /// matches (`Country = 'France' AND Quantity < 0`, as erasure takes).
    pub filter: Option<String>,
    /// At most this many rows (after the filter).
    pub limit: Option<usize>,
    /// Only the live rows of these data files of the version (positions
    /// in its snapshot's file list, each at most once), read one file at a
    /// time in the order given and not merged by key: the parts a
    /// distributed reader (Spark, Ray, a PyTorch rank) hands its tasks, so
    /// that every row of the version is read by the one task given its
    /// file.
    pub files: Option<Vec<usize>>,
}

impl ScanOptions {
    /// Every row, only `columns` (all when `None`).
    pub fn columns(columns: Option<&[String]>) -> Self {
        Self {
            columns: columns.map(<[String]>::to_vec),
            ..Self::default()
        }
    }
}

/// Reads the rows of a snapshot that `opts` asks for: keyed tables in key
/// order, unkeyed ones in insertion order (`opts.files` is for
/// [`stream::open`]). Files are decoded with only the
/// columns asked for, the key (for the merge) and the filter's.
pub(crate) async fn scan(
    store: &Store,
    snap: &TableSnapshot,
    table: &str,
    opts: &ScanOptions,
) -> Result<(SchemaRef, Vec<RecordBatch>, ReadStats)> {
    let request = ScanRequest {
        columns: opts.columns.as_deref(),
        filter: opts.filter.as_deref().map(RowFilter::Sql),
        limit: opts.limit,
        ordered: true,
        files: None,
    };
    scan_request(store, snap, table, &request).await
}

/// A row filter: SQL text, or an expression a query engine pushed down.
pub(crate) enum RowFilter<'a> {
    Sql(&'a str),
    Expr(&'a datafusion::logical_expr::Expr),
}

impl RowFilter<'_> {
    fn compile(&self, table: &str, schema: &SchemaRef) -> Result<predicate::Predicate> {
        match self {
            RowFilter::Sql(text) => predicate::Predicate::compile(table, text, schema),
            RowFilter::Expr(e) => predicate::Predicate::compile_expr(table, (*e).clone(), schema),
        }
    }
}

/// What a scan returns: [`ScanOptions`] as borrowed, and whether rows must
/// come in key order (a query engine that sorts for itself need not pay
/// for the merge, nor decode the key).
pub(crate) struct ScanRequest<'a> {
    pub(crate) columns: Option<&'a [String]>,
    pub(crate) filter: Option<RowFilter<'a>>,
    pub(crate) limit: Option<usize>,
    pub(crate) ordered: bool,
    /// Only these data files (see [`ScanOptions::files`]); only a
    /// [`stream::Scan`] reads them.
    pub(crate) files: Option<&'a [usize]>,
}

/// [`scan`] of a [`ScanRequest`].
pub(crate) async fn scan_request(
    store: &Store,
    snap: &TableSnapshot,
    table: &str,
    req: &ScanRequest<'_>,
) -> Result<(SchemaRef, Vec<RecordBatch>, ReadStats)> {
    let schema = schema_of(snap);
    let out = match req.columns {
        Some(cols) => keys::key_indices(table, &schema, cols)?,
        None => (0..schema.fields().len()).collect(),
    };
    let filter = match &req.filter {
        Some(f) => Some((f, f.compile(table, &schema)?)),
        None => None,
    };
    let ordered = req.ordered && !snap.key.is_empty();
    let mut decode: BTreeSet<usize> = out.iter().copied().collect();
    if ordered {
        decode.extend(keys::key_indices(table, &schema, &snap.key)?);
    }
    if let Some((_, p)) = &filter {
        let cols: Vec<String> = p.columns().into_iter().collect();
        decode.extend(keys::key_indices(table, &schema, &cols)?);
    }
    let decode: Vec<usize> = decode.into_iter().collect();
    let read_schema = Arc::new(
        schema
            .project(&decode)
            .map_err(Error::arrow("projecting columns"))?,
    );
    let (mut batches, mut stats) = match (&filter, req.limit) {
        (None, Some(n)) => read_first(store, snap, &read_schema, ordered, n).await?,
        _ => read_rows(store, snap, &read_schema, ordered).await?,
    };
    stats.columns_decoded = decode.len();
    if let Some((f, _)) = &filter {
        // Compiled again over the decoded columns, so no batch is widened
        // with the columns the filter does not read.
        let p = f.compile(table, &read_schema)?;
        batches = batches
            .iter()
            .map(|b| filter_record_batch(b, &p.eval(b)?).map_err(Error::arrow("filtering rows")))
            .filter(|b| b.as_ref().map_or(true, |b| b.num_rows() > 0))
            .collect::<Result<_>>()?;
    }
    if let Some(limit) = req.limit {
        batches = take_rows(batches, limit);
    }
    stats.rows = batches.iter().map(|b| b.num_rows() as u64).sum();
    let at: Vec<usize> = out
        .iter()
        .map(|i| {
            decode
                .binary_search(i)
                .map_err(|_| Error::Internal(format!("column {i} was not decoded")))
        })
        .collect::<Result<_>>()?;
    let out_schema = Arc::new(
        read_schema
            .project(&at)
            .map_err(Error::arrow("projecting columns"))?,
    );
    let batches = batches
        .iter()
        .map(|b| b.project(&at).map_err(Error::arrow("projecting columns")))
        .collect::<Result<_>>()?;
    Ok((out_schema, batches, stats))
}

/// The first `limit` rows of `batches`.
pub(crate) fn take_rows(batches: Vec<RecordBatch>, limit: usize) -> Vec<RecordBatch> {
    let mut left = limit;
    let mut out = Vec::new();
    for b in batches {
        if left == 0 {
            break;
        }
        let n = b.num_rows().min(left);
        out.push(if n == b.num_rows() { b } else { b.slice(0, n) });
        left -= n;
    }
    out
}

/// Every live row of a snapshot as batches of `schema` (a projection of
/// the table's, holding its key when `ordered`): keyed tables merged in key
/// order when `ordered`, file by file otherwise.
pub(crate) async fn read_rows(
    store: &Store,
    snap: &TableSnapshot,
    schema: &SchemaRef,
    ordered: bool,
) -> Result<(Vec<RecordBatch>, ReadStats)> {
    let mut stats = ReadStats::default();
    let dvs = dv::load_many(store, &snap.files).await?;
    for f in &snap.files {
        stats.count_file(f);
    }
    // Fetch, verify and decode each file as one job, on all cores.
    let ids: Vec<_> = snap.files.iter().map(|f| f.data).collect();
    let per_file = store
        .map_blobs(&ids, |i, bytes| {
            read_live(ids[i], bytes, schema, dvs[i].as_ref())
        })
        .await?;
    let batches: Vec<RecordBatch> = if !ordered || snap.key.is_empty() || per_file.len() < 2 {
        per_file.into_iter().flatten().collect()
    } else {
        let idx = keys::key_indices("", schema, &snap.key)?;
        let codec = keys::KeyCodec::new(schema, idx)?;
        merge::merge_sorted(schema, per_file, &codec)?
    };
    Ok((batches, stats))
}

/// The first `n` live rows of a snapshot, as [`read_rows`] would give
/// them, reading as few files as it can: unordered (or unkeyed), the files
/// in order until `n` rows; in key order, the files by their smallest key,
/// until the next file's smallest key is past the `n`-th key found. Each
/// file decodes only its first `n` live rows. Without key ranges on every
/// file, every file is read (each still only its first `n` rows).
async fn read_first(
    store: &Store,
    snap: &TableSnapshot,
    schema: &SchemaRef,
    ordered: bool,
    n: usize,
) -> Result<(Vec<RecordBatch>, ReadStats)> {
    if n == 0 {
        return Ok((Vec::new(), ReadStats::default()));
    }
    let keyed = ordered && !snap.key.is_empty();
    let key_at = match keyed {
        true => keys::key_indices("", schema, &snap.key)?,
        false => Vec::new(),
    };
    let ranged = snap.files.iter().all(|f| f.key_min.is_some());
    let mut order: Vec<usize> = (0..snap.files.len()).collect();
    if keyed && ranged {
        order.sort_by(|&a, &b| snap.files[a].key_min.cmp(&snap.files[b].key_min));
    }
    // Key ranges are kept for single-column keys only.
    let key_col = key_at.first().copied().filter(|_| ranged);
    let codec = match keyed {
        true => Some(keys::KeyCodec::new(schema, key_at)?),
        false => None,
    };
    let mut stats = ReadStats::default();
    let mut known = dv::Known::new();
    let mut per_file: Vec<Vec<RecordBatch>> = Vec::new();
    let mut first: Vec<RecordBatch> = Vec::new();
    for i in order {
        let f = &snap.files[i];
        let have: usize = first.iter().map(|b| b.num_rows()).sum();
        if have >= n {
            let past = match (key_col, first.last()) {
                // Every later file starts past the n-th key found: done.
                (Some(k), Some(last)) => {
                    let nth = keys::bound_at(last.column(k), last.num_rows() - 1);
                    f.key_min.as_ref() > nth.as_ref()
                }
                // Keyed without key ranges: any file may hold a smaller key.
                _ => !keyed,
            };
            if past {
                break;
            }
        }
        let dv = dv::load(store, f, &mut known).await?;
        let bytes = store.get_blob(&f.data).await?;
        stats.count_file(f);
        let file = datafile::DataFile::open(f.data, bytes)?;
        per_file.push(file.read_limited(schema, datafile::Select::Live(dv.as_ref()), Some(n))?);
        first = match &codec {
            Some(c) if per_file.len() > 1 => {
                take_rows(merge::merge_sorted(schema, per_file.clone(), c)?, n)
            }
            _ => take_rows(per_file.iter().flatten().cloned().collect(), n),
        };
    }
    Ok((first, stats))
}

/// The first column of batches, as integers (tests of reads).
#[cfg(test)]
pub(crate) fn first_ints(batches: &[RecordBatch]) -> Vec<i64> {
    use arrow::array::AsArray;
    batches
        .iter()
        .flat_map(|b| {
            b.column(0)
                .as_primitive::<arrow::datatypes::Int64Type>()
                .values()
                .to_vec()
        })
        .collect()
}
