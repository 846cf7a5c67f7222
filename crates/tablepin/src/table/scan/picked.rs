//! The planner's positional form: rows chosen by where they are stored,
//! not by what they hold. `diff` reads the positions two versions do not
//! share, a merge the same with where each row is, the Delta view a file's
//! live rows under its deletion vector. Each is a list of [`Picked`] reads,
//! decided by its caller with no I/O, and one executor
//! ([`read_picked`]) fetches the files, verifies each against its name and
//! decodes the chosen rows as one job per file on all cores.

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use roaring::RoaringBitmap;
use tablepin_format::ObjectId;
use tablepin_store::Store;

use crate::error::Result;
use crate::table::datafile::{DataFile, Select};

/// Which rows of a data file a read takes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Pick {
    /// The rows this deletion vector leaves (`None`: every row).
    Live(Option<RoaringBitmap>),
    /// These positions, ascending.
    Positions(Vec<u32>),
}

impl Pick {
    /// The positions picked of a file of `rows` rows, ascending.
    pub(crate) fn positions(&self, rows: u64) -> Vec<u32> {
        match self {
            Pick::Positions(p) => p.clone(),
            Pick::Live(None) => (0..rows as u32).collect(),
            Pick::Live(Some(dv)) => (0..rows as u32).filter(|p| !dv.contains(*p)).collect(),
        }
    }

    fn select(&self) -> Select<'_> {
        match self {
            Pick::Live(d) => Select::Live(d.as_ref()),
            Pick::Positions(p) => Select::Positions(p),
        }
    }
}

/// One data file's picked rows, decoded as `schema` (a column the file
/// lacks reads as nulls), or as the file stores them (`None`).
#[derive(Debug, Clone)]
pub(crate) struct Picked {
    pub(crate) blob: ObjectId,
    pub(crate) schema: Option<SchemaRef>,
    pub(crate) rows: Pick,
}

/// What one [`Picked`] read gave: the schema its batches have, and them.
pub(crate) struct PickedRows {
    pub(crate) schema: SchemaRef,
    pub(crate) batches: Vec<RecordBatch>,
}

/// Executes picked reads: each file fetched, verified and decoded as one
/// job (`Store::map_blobs`), in the order given.
pub(crate) async fn read_picked(store: &Store, reads: &[Picked]) -> Result<Vec<PickedRows>> {
    let ids: Vec<ObjectId> = reads.iter().map(|r| r.blob).collect();
    store
        .map_blobs(&ids, |i, bytes| {
            let r = &reads[i];
            let file = DataFile::open(r.blob, bytes)?;
            let schema = r.schema.clone().unwrap_or_else(|| file.schema());
            let batches = file.read(&schema, r.rows.select())?;
            Ok(PickedRows { schema, batches })
        })
        .await
}
