//! What a scan does with one data file's verified bytes; no I/O.

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::compute::filter_record_batch;
use arrow::datatypes::SchemaRef;
use bytes::Bytes;
use datafusion::physical_optimizer::pruning::PruningPredicate;
use roaring::RoaringBitmap;
use tablepin_format::ObjectId;

use super::prune;
use crate::error::{Error, Result};
use crate::table::datafile::{DataFile, PageIndex, Select};
use crate::table::predicate::Predicate;

/// How a scan reads each data file.
pub(super) struct FileRead {
    /// The columns decoded, in the table's order.
    pub(super) schema: SchemaRef,
    /// The columns returned, as positions in `schema`.
    out: Vec<usize>,
    pub(super) out_schema: SchemaRef,
    pub(super) filter: Option<Predicate>,
    /// Conditions on one column each, for skipping pages.
    pages: Vec<(String, Arc<PruningPredicate>)>,
}

impl FileRead {
    /// Reads `decode` (table positions, ascending: `schema`'s columns),
    /// returns `out` (table positions, each decoded), keeps the rows
    /// `filter` (compiled over `schema`) matches.
    pub(super) fn new(
        schema: SchemaRef,
        decode: &[usize],
        out: &[usize],
        filter: Option<Predicate>,
    ) -> Result<Self> {
        let at: Vec<usize> = out
            .iter()
            .map(|i| {
                decode
                    .binary_search(i)
                    .map_err(|_| Error::Internal(format!("column {i} was not decoded")))
            })
            .collect::<Result<_>>()?;
        let out_schema = Arc::new(
            schema
                .project(&at)
                .map_err(Error::arrow("projecting columns"))?,
        );
        let pages = filter
            .as_ref()
            .map(|f| prune::single_column_conditions(f, &schema))
            .unwrap_or_default();
        Ok(Self {
            schema,
            out: at,
            out_schema,
            filter,
            pages,
        })
    }

    /// One data file's rows that the deletion vector leaves and the filter
    /// keeps, with every decoded column (a keyed read merges by the key
    /// before it drops the columns not returned: [`FileRead::project`]),
    /// and how many rows were decoded. Without a filter, at most `limit`
    /// rows are decoded.
    pub(super) fn decoded(
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
        let (batches, decoded) = match prune::pages_allowed(&self.pages, &file) {
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
            let b = self.filtered(b)?;
            if b.num_rows() > 0 {
                out.push(b);
            }
        }
        Ok((out, decoded))
    }

    /// The rows of a decoded batch the filter keeps.
    pub(super) fn filtered(&self, b: RecordBatch) -> Result<RecordBatch> {
        match &self.filter {
            Some(p) => {
                filter_record_batch(&b, &p.eval(&b)?).map_err(Error::arrow("filtering rows"))
            }
            None => Ok(b),
        }
    }

    /// A decoded batch with the columns returned.
    pub(super) fn project(&self, b: &RecordBatch) -> Result<RecordBatch> {
        b.project(&self.out)
            .map_err(Error::arrow("projecting columns"))
    }
}
