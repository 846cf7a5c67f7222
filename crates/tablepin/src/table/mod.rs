//! Tables: how rows are kept in data files and deletion vectors, read back,
//! and changed.
//!
//! A table snapshot is a list of data files, each with an optional deletion
//! vector. Writes never rewrite an old file: new and changed rows go to new
//! files, old positions are hidden by new deletion vectors. Reads decode each
//! file minus its deletion vector and, for a keyed table, merge the files in
//! key order ([`merge`]). The commit planner ([`plan`]) turns "here is the
//! table now" (or rows to append, upsert or delete) into the smallest set of
//! new blobs, and updates the content hash in O(changed rows).

pub mod datafile;
pub(crate) mod dv;
pub(crate) mod keys;
pub(crate) mod merge;
pub(crate) mod par;
pub(crate) mod plan;
pub(crate) mod types;

use std::sync::Arc;

use arrow::array::RecordBatch;
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
}

/// The Arrow schema of a snapshot.
pub(crate) fn schema_of(snap: &TableSnapshot) -> SchemaRef {
    Arc::new(snap.schema.clone())
}

/// Reads every row of a snapshot: keyed tables in key order, unkeyed ones in
/// insertion order. `columns` limits the output (key columns are read for
/// the merge either way).
pub(crate) async fn scan(
    store: &Store,
    snap: &TableSnapshot,
    columns: Option<&[String]>,
) -> Result<(SchemaRef, Vec<RecordBatch>, ReadStats)> {
    let schema = schema_of(snap);
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
            read_live(ids[i], bytes, &schema, dvs[i].as_ref())
        })
        .await?;
    let mut batches: Vec<RecordBatch> = if snap.key.is_empty() || per_file.len() < 2 {
        per_file.into_iter().flatten().collect()
    } else {
        let idx = keys::key_indices("", &schema, &snap.key)?;
        let codec = keys::KeyCodec::new(&schema, idx)?;
        merge::merge_sorted(&schema, per_file, &codec)?
    };
    stats.rows = batches.iter().map(|b| b.num_rows() as u64).sum();
    let mut out_schema = schema.clone();
    if let Some(cols) = columns {
        let idx: Vec<usize> = cols
            .iter()
            .map(|c| {
                schema.index_of(c).map_err(|_| Error::UnknownColumn {
                    table: String::new(),
                    column: c.clone(),
                    available: schema
                        .fields()
                        .iter()
                        .map(|f| f.name().as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                })
            })
            .collect::<Result<_>>()?;
        batches = batches
            .iter()
            .map(|b| b.project(&idx).map_err(Error::arrow("projecting columns")))
            .collect::<Result<_>>()?;
        out_schema = Arc::new(
            schema
                .project(&idx)
                .map_err(Error::arrow("projecting columns"))?,
        );
    }
    Ok((out_schema, batches, stats))
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
