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
pub(crate) mod ranged;
pub(crate) mod scan;
pub(crate) mod staged;
pub(crate) mod threeway;
pub(crate) mod types;
pub(crate) mod window;

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use serde::Serialize;
use tablepin_format::TableSnapshot;
use tablepin_store::Store;

pub use datafile::WriteSettings;
pub use staged::StagedFiles;

use crate::error::Result;

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

/// Reads the rows of a snapshot that `opts` asks for (through the read
/// planner, [`scan`]): keyed tables in key order, unkeyed ones and chosen
/// files file by file.
pub(crate) async fn read(
    store: &Store,
    snap: &TableSnapshot,
    table: &str,
    opts: &ScanOptions,
) -> Result<(SchemaRef, Vec<RecordBatch>, ReadStats)> {
    scan::collect(store, snap, table, &scan::ScanRequest::of(opts)).await
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
