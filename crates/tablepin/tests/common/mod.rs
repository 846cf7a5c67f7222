//! What the diff, merge and ranged-read tests share: a two-column table
//! `(id, v)` of rows, built and read back, the runtime the proptests block
//! on, and the commit options of a keyed table and of an upsert.

// Each test binary uses some of these.
#![allow(dead_code)]

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Int64Array, RecordBatch};
use arrow::datatypes::Int64Type;

/// A row: its key `id` and a nullable value `v`.
pub(crate) type Row = (i64, Option<i64>);

pub(crate) fn batch(rows: &[Row]) -> RecordBatch {
    RecordBatch::try_from_iter(vec![
        (
            "id",
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0))) as ArrayRef,
        ),
        (
            "v",
            Arc::new(Int64Array::from_iter(rows.iter().map(|r| r.1))) as ArrayRef,
        ),
    ])
    .unwrap()
}

pub(crate) fn rows_of(batches: &[RecordBatch]) -> Vec<Row> {
    let mut out = Vec::new();
    for b in batches {
        let id = b.column(0).as_primitive::<Int64Type>();
        let v = b.column(1).as_primitive::<Int64Type>();
        for i in 0..b.num_rows() {
            out.push((id.value(i), v.is_valid(i).then(|| v.value(i))));
        }
    }
    out
}

pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// A commit that makes a table keyed by `id`.
pub(crate) fn keyed() -> tablepin::CommitOptions {
    tablepin::CommitOptions {
        key: Some(vec!["id".into()]),
        ..Default::default()
    }
}

/// An upsert.
pub(crate) fn upsert() -> tablepin::CommitOptions {
    tablepin::CommitOptions {
        mode: tablepin::Mode::Upsert,
        ..Default::default()
    }
}
