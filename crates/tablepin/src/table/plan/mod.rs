//! The commit planner: from "the table is now this" (or rows to append,
//! upsert or delete) to the smallest set of new blobs and the new snapshot.
//!
//! It reads what it must of the parent snapshot (key columns of the files
//! whose key range can hold an input key, and the few old rows it replaces),
//! never rewrites an old data file, and updates the content hash by adding
//! the new rows' hashes and subtracting the removed ones. A full read of the
//! parent happens only for `overwrite`, whose input is the whole table, and
//! on a schema change, which changes every row's hash.
//!
//! # What each mode reads
//!
//! - Upsert, append and delete (`lookup::LookUp`) read each parent file at
//!   most once per commit, and only the files whose key range can hold an
//!   input key (two binary searches over the input's keys in key order per
//!   file). Their deletion vectors are read before the commit's CPU-bound
//!   work starts (on two busy cores, small reads otherwise waited for
//!   milliseconds). In those files, the key pages whose page-index range can
//!   hold an input key are read (none in a file whose integer keys are dense,
//!   as many as its rows from its smallest to its largest: a key's row is
//!   then key - smallest), then the pages of the old rows found, by
//!   `RowSelection` over the page index. Each file is read, verified, opened,
//!   looked up and its found rows hashed as one job (`Store::map_blobs`). A
//!   data file is opened with its page locations only (the offset index,
//!   `PageIndex::Locations`); the pages' smallest and largest values (the
//!   column index) are parsed only for a file whose key pages are looked up
//!   (`PageIndex::WithStats`).
//! - Overwrite (the whole table) sums the input's row hashes first: when they
//!   add up to the parent's content hash over as many rows, the input is the
//!   parent's rows (in whatever order) and nothing is read. For a keyed
//!   table, a group of overlapping files that hide no rows is left unread
//!   when the input rows in its key range are as many and add up to its
//!   files' `hash_sum`s (`decide::overwrite_scope`). A file alone in its key
//!   range that hides no rows and gets back as many input rows, whose sum
//!   differs, is compared with them position by position (`decide::Aligned`,
//!   `align::row_differences`: the columns' bits, with Arrow's
//!   `not_distinct`): when every key matches, only the rows that differ are
//!   hashed and no key is looked up; otherwise (another key, a nested
//!   column) it is decided by key. Every other file is read whole and its
//!   rows matched to the input's by a merge join in key order
//!   (`decide::join_by_key`); matched pairs are compared by value the same
//!   way, so only the rows that changed and the rows gone are hashed
//!   (`overwrite::compare_joined`, then `decide::by_join`).
//! - The input is hashed on a worker thread meanwhile, and, when every input
//!   row is expected to be written (no parent, append, upsert), the new data
//!   file is written on another: the look-up then only confirms it (a weekly
//!   commit's appended and changed rows); when some row turns out the same
//!   again, that file is dropped and the rows are written afterwards. Old
//!   positions go into new deletion vectors; the content hash is updated by
//!   adding new rows' hashes and subtracting removed ones.

mod compact;
mod delete;
mod lookup;
mod overwrite;
mod schema;
mod state;
mod write;

pub(crate) use compact::*;
pub(crate) use delete::*;
pub(crate) use lookup::*;
pub(crate) use overwrite::*;
pub(crate) use schema::*;
pub use state::*;
pub(crate) use write::*;

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::sync::Arc;

use arrow::array::{Array, RecordBatch, UInt32Array};
use arrow::compute::{concat_batches, take_record_batch};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use bytes::Bytes;
use roaring::RoaringBitmap;
use serde::{Deserialize, Serialize};
use tablepin_format::{
    Checks, ContentHash, DeletionVector, FileEntry, KeyBound, ObjectId, RowHash, TableSnapshot,
    FORMAT_VERSION,
};
use tablepin_rowhash::{hash_rows, RowHashError};
use tablepin_store::Store;

use super::datafile::{
    read_data_file, write_data_file, DataFile, PageIndex, Select, WriteSettings,
};
use super::decide::{self, Decision, Loc, OldRow};
use super::keys::{self, KeyCodec, SortKeys};
use super::ranged::RangedFile;
use super::types::{self, Fit};
use super::{align, diff, dv, par, schema_of};
use crate::error::{Error, Result};

/// A commit's input made ready: its schema against the parent's, its rows
/// conformed to it, its key columns and its rows in key order (checked
/// unique).
pub(crate) struct Ready {
    pub(crate) schema: SchemaRef,
    /// The schema differs from the parent's.
    pub(crate) schema_moved: bool,
    /// Every row is written again (a schema change that rewrites).
    pub(crate) rewrite_all: bool,
    pub(crate) input: RecordBatch,
    pub(crate) key: Vec<String>,
    pub(crate) key_idx: Vec<usize>,
    pub(crate) codec: Option<KeyCodec>,
    pub(crate) order: Vec<u32>,
}

fn ready(table: &str, p: &PlanInput<'_>, input: &RecordBatch, key: &[String]) -> Result<Ready> {
    let parent_schema = p.parent.map(|s| &s.schema);
    let (schema, schema_moved, rewrite_all) =
        resolve_schema(table, parent_schema, &input.schema(), p.rules, p.mode, key)?;
    let input = conform_input(table, input, &schema)?;
    let key_idx = keys::key_indices(table, &schema, key)?;
    let codec = if key.is_empty() {
        None
    } else {
        Some(KeyCodec::new(&schema, key_idx.clone())?)
    };
    let order: Vec<u32> = match &codec {
        Some(c) => keys::validate_and_order(table, &input, c)?,
        None => (0..input.num_rows() as u32).collect(),
    };
    Ok(Ready {
        schema,
        schema_moved,
        rewrite_all,
        input,
        key: key.to_vec(),
        key_idx,
        codec,
        order,
    })
}

/// A decision with what was read to reach it: the parent's deletion
/// vectors and data files, which the rest of the commit reuses.
pub(crate) struct Decided {
    pub(crate) decision: Decision,
    pub(crate) dvs: Dvs,
    pub(crate) held: Held,
}

/// Plans a commit to one table: reads what the decision needs, decides
/// (`decide`), then writes what it decided.
pub(crate) async fn plan(store: &Store, p: PlanInput<'_>) -> Result<Staged> {
    plan_known(store, p, None).await
}

/// [`plan`] of an upsert whose input keys' rows in the parent are known
/// already (`known`, as a look-up would find them: a merge knows them from
/// its diffs), so the parent's files are not searched for them.
pub(crate) async fn plan_known(
    store: &Store,
    p: PlanInput<'_>,
    known: Option<Found>,
) -> Result<Staged> {
    let table = p.table;
    let input = concat_batches(&p.schema, &p.batches).map_err(Error::arrow("reading the input"))?;
    let parent = p.parent;
    let key = table_key(table, parent, &p.key, p.mode)?;
    if matches!(p.mode, Mode::Compact | Mode::Delete) {
        let Some(par) = parent else {
            return Err(Error::InvalidArgument(format!(
                "table '{table}' does not exist yet, so there is nothing to {}",
                p.mode.name()
            )));
        };
        return match p.mode {
            Mode::Compact => plan_compact(store, table, par, p.settings).await,
            _ => plan_delete(store, table, par, &input, &key, p.settings).await,
        };
    }
    let r = ready(table, &p, &input, &key)?;
    drop(input);
    let parent_live = if r.rewrite_all { None } else { parent };
    let sorted = SortedBounds::new(&r.input, &r.key_idx, &r.order);
    let looks_up = matches!(p.mode, Mode::Append | Mode::Upsert) && r.codec.is_some();
    // An append or upsert of a keyed table looks its keys up in the parent:
    // the look-up's small reads go first, before the CPU-bound work below
    // takes the cores.
    let prepared = match (parent_live, known) {
        (Some(_), Some(known)) if looks_up && p.mode == Mode::Upsert => Some(Ok(known)),
        (Some(par), _) if looks_up => Some(Err(LookUp::prepare(
            store,
            par,
            &sorted,
            r.input.num_rows(),
        )
        .await?)),
        _ => None,
    };
    let mut in_hashes = InputHashes::start(&r.input);
    // Every input row is written when there is no parent, on an append, and
    // on an upsert unless some row is the same again: the new file is
    // written on a worker thread while the commit reads the parent, and
    // used if the look-up agrees (a weekly commit's appended and changed
    // rows); otherwise it is dropped and the rows are written afterwards.
    let expected = parent_live.is_none() || matches!(p.mode, Mode::Append | Mode::Upsert);
    let guess = WriteTask::start(
        if expected {
            r.order.clone()
        } else {
            Vec::new()
        },
        &r.input,
        &r.key_idx,
        p.settings,
    );
    let n = r.input.num_rows();
    let decided = match (parent_live, prepared) {
        (None, _) => Decided {
            decision: match parent {
                Some(par) => rewritten(store, par, &r).await?,
                None => Decision::all_new(n),
            },
            dvs: Dvs::new(),
            held: Held::new(),
        },
        (Some(par), Some(lookup)) => {
            let found = match lookup {
                Ok(known) => known,
                Err(lookup) => lookup.run_for(store, par, &r).await?,
            };
            found.decide(table, p.mode, &r, in_hashes.get().await?)?
        }
        (Some(_), None) if p.mode == Mode::Append => Decided {
            decision: Decision::all_new(n),
            dvs: Dvs::new(),
            held: Held::new(),
        },
        (Some(par), None) => {
            let hashes = in_hashes.get().await?;
            decide_overwrite(store, par, &r, &sorted, hashes).await?
        }
    };
    let in_hashes = in_hashes.get().await?;
    let rows_out: Vec<u32> = (r.order.iter().copied())
        .filter(|i| decided.decision.write[*i as usize])
        .collect();
    let written = match guess.finish(&rows_out).await? {
        Some(written) => written,
        None => write_files(&r.input, &rows_out, &r.key_idx, p.settings)?,
    };
    let how = Finish {
        parent,
        parent_live,
        ready: &r,
        settings: p.settings,
        in_hashes,
    };
    finish(store, &how, decided, &rows_out, written).await
}

#[cfg(test)]
mod tests;
