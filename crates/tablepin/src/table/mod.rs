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

pub mod datafile;
pub(crate) mod dv;
pub(crate) mod keys;
pub(crate) mod merge;
pub(crate) mod par;
pub(crate) mod plan;
pub(crate) mod predicate;
pub(crate) mod types;

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
/// order, unkeyed ones in insertion order. Files are decoded with only the
/// columns asked for, the key (for the merge) and the filter's.
pub(crate) async fn scan(
    store: &Store,
    snap: &TableSnapshot,
    table: &str,
    opts: &ScanOptions,
) -> Result<(SchemaRef, Vec<RecordBatch>, ReadStats)> {
    let schema = schema_of(snap);
    let out = match &opts.columns {
        Some(cols) => keys::key_indices(table, &schema, cols)?,
        None => (0..schema.fields().len()).collect(),
    };
    let filter = match &opts.filter {
        Some(text) => Some((text, predicate::Predicate::compile(table, text, &schema)?)),
        None => None,
    };
    let mut decode: BTreeSet<usize> = out.iter().copied().collect();
    decode.extend(keys::key_indices(table, &schema, &snap.key)?);
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
    let (mut batches, mut stats) = read_rows(store, snap, &read_schema).await?;
    stats.columns_decoded = decode.len();
    if let Some((text, _)) = &filter {
        // Compiled again over the decoded columns, so no batch is widened
        // with the columns the filter does not read.
        let p = predicate::Predicate::compile(table, text, &read_schema)?;
        batches = batches
            .iter()
            .map(|b| filter_record_batch(b, &p.eval(b)?).map_err(Error::arrow("filtering rows")))
            .filter(|b| b.as_ref().map_or(true, |b| b.num_rows() > 0))
            .collect::<Result<_>>()?;
    }
    if let Some(limit) = opts.limit {
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
fn take_rows(batches: Vec<RecordBatch>, limit: usize) -> Vec<RecordBatch> {
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
/// the table's that holds its key): keyed tables merged in key order.
async fn read_rows(
    store: &Store,
    snap: &TableSnapshot,
    schema: &SchemaRef,
) -> Result<(Vec<RecordBatch>, ReadStats)> {
    let mut stats = ReadStats::default();
    let dvs = dv::load_many(store, &snap.files).await?;
    for f in &snap.files {
        stats.files += 1;
        stats.bytes += f.bytes;
        if let Some(d) = &f.deletes {
            stats.deletion_vectors += 1;
            stats.bytes += d.bytes;
        }
        stats.rows_in_files += f.rows;
    }
    // Fetch, verify and decode each file as one job, on all cores.
    let ids: Vec<_> = snap.files.iter().map(|f| f.data).collect();
    let per_file = store
        .map_blobs(&ids, |i, bytes| {
            read_live(ids[i], bytes, schema, dvs[i].as_ref())
        })
        .await?;
    let batches: Vec<RecordBatch> = if snap.key.is_empty() || per_file.len() < 2 {
        per_file.into_iter().flatten().collect()
    } else {
        let idx = keys::key_indices("", schema, &snap.key)?;
        let codec = keys::KeyCodec::new(schema, idx)?;
        merge::merge_sorted(schema, per_file, &codec)?
    };
    Ok((batches, stats))
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
