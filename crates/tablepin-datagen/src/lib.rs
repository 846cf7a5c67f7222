//! One seeded generator of synthetic sales tables, shared by the tests, the
//! benchmarks and the quickstart, so that they all speak of the same table.
//!
//! The table looks like an invoice-line table: a unique `id` key, a
//! customer (sometimes missing), a product code, quantity, price, a time,
//! a country, free text with empty and non-ASCII values, and a `returned`
//! count that later "weekly" changes correct in place. The same seed always
//! gives the same rows.

#![warn(missing_docs)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

use std::sync::Arc;

use arrow::array::{
    ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray, TimestampSecondArray,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const COUNTRIES: [&str; 8] = [
    "United Kingdom",
    "France",
    "Germany",
    "EIRE",
    "España",
    "Netherlands",
    "Österreich",
    "",
];
const WORDS: [&str; 10] = [
    "LANTERN", "HEART", "T-LIGHT", "HOLDER", "WHITE", "CRÈME", "MUG", "BAG", "RED", "STAR",
];

/// The schema of the generated table.
pub fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("customer", DataType::Int64, true),
        Field::new("product", DataType::Utf8, false),
        Field::new("description", DataType::Utf8, true),
        Field::new("quantity", DataType::Int64, false),
        Field::new("price", DataType::Float64, false),
        Field::new(
            "sold_at",
            DataType::Timestamp(TimeUnit::Second, None),
            false,
        ),
        Field::new("country", DataType::Utf8, true),
        Field::new("returned", DataType::Int64, false),
    ]))
}

/// Rows with ids `start..start + n`, from a seed.
pub fn sales(start: i64, n: usize, seed: u64) -> RecordBatch {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ (start as u64).wrapping_mul(0x9e37_79b9));
    let ids: Vec<i64> = (start..start + n as i64).collect();
    let customer: Vec<Option<i64>> = (0..n)
        .map(|_| {
            if rng.random_bool(0.2) {
                None
            } else {
                Some(rng.random_range(12_000..18_000))
            }
        })
        .collect();
    let product: Vec<String> = (0..n)
        .map(|_| {
            format!(
                "{}{}",
                rng.random_range(10_000..90_000),
                ["", "A", "B"][rng.random_range(0..3)]
            )
        })
        .collect();
    let description: Vec<Option<String>> = (0..n)
        .map(|_| match rng.random_range(0..20) {
            0 => None,
            1 => Some(String::new()),
            _ => Some(format!(
                "{} {} {}",
                WORDS[rng.random_range(0..WORDS.len())],
                WORDS[rng.random_range(0..WORDS.len())],
                WORDS[rng.random_range(0..WORDS.len())]
            )),
        })
        .collect();
    let quantity: Vec<i64> = (0..n).map(|_| rng.random_range(1..50)).collect();
    let price: Vec<f64> = (0..n)
        .map(|_| f64::from(rng.random_range(10u32..2000)) / 100.0)
        .collect();
    let t0 = 1_259_654_400i64; // 2009-12-01
    let sold_at: Vec<i64> = ids.iter().map(|i| t0 + i * 60).collect();
    let country: Vec<Option<&str>> = (0..n)
        .map(|_| {
            if rng.random_bool(0.01) {
                None
            } else {
                Some(COUNTRIES[rng.random_range(0..COUNTRIES.len())])
            }
        })
        .collect();
    let returned = vec![0i64; n];
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from(ids)) as ArrayRef,
            Arc::new(Int64Array::from(customer)),
            Arc::new(StringArray::from(product)),
            Arc::new(StringArray::from(description)),
            Arc::new(Int64Array::from(quantity)),
            Arc::new(Float64Array::from(price)),
            Arc::new(TimestampSecondArray::from(sold_at)),
            Arc::new(StringArray::from(country)),
            Arc::new(Int64Array::from(returned)),
        ],
    )
    .unwrap_or_else(|_| RecordBatch::new_empty(schema()))
}

/// Picks `k` distinct ids below `below` from a seed, sorted.
pub fn pick_ids(below: i64, k: usize, seed: u64) -> Vec<i64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut out = std::collections::BTreeSet::new();
    while out.len() < k.min(below.max(0) as usize) {
        out.insert(rng.random_range(0..below));
    }
    out.into_iter().collect()
}

/// The rows of `table` with the given ids (which must be its positions, as
/// in a table made by [`sales`] from 0), with `returned` raised by `delta`.
pub fn with_returns(table: &RecordBatch, ids: &[i64], delta: i64) -> RecordBatch {
    let idx = arrow::array::UInt32Array::from(ids.iter().map(|i| *i as u32).collect::<Vec<_>>());
    let Ok(rows) = arrow::compute::take_record_batch(table, &idx) else {
        return RecordBatch::new_empty(table.schema());
    };
    let Some(ret) = rows.column(8).as_any().downcast_ref::<Int64Array>() else {
        return rows;
    };
    let bumped: Int64Array = ret.iter().map(|v| v.map(|x| x + delta)).collect();
    let mut cols = rows.columns().to_vec();
    cols[8] = Arc::new(bumped);
    RecordBatch::try_new(rows.schema(), cols).unwrap_or(rows)
}

/// `table` with `returned` raised by `delta` on the rows at `positions`,
/// in place (the rows keep their order).
pub fn returned_in_place(table: &RecordBatch, positions: &[usize], delta: i64) -> RecordBatch {
    let Some(ret) = table.column(8).as_any().downcast_ref::<Int64Array>() else {
        return table.clone();
    };
    let mut values = ret.values().to_vec();
    for p in positions {
        if let Some(v) = values.get_mut(*p) {
            *v += delta;
        }
    }
    let mut cols = table.columns().to_vec();
    cols[8] = Arc::new(Int64Array::from(values));
    RecordBatch::try_new(table.schema(), cols).unwrap_or_else(|_| table.clone())
}

/// A history for tests: the generated table after each of `commits` weekly
/// changes. Commit 0 is `base` rows; each later one appends `append` rows
/// and raises `returned` on `change` scattered old rows.
pub fn history(
    base: usize,
    commits: usize,
    append: usize,
    change: usize,
    seed: u64,
) -> Vec<RecordBatch> {
    let mut out = Vec::with_capacity(commits);
    let mut table = sales(0, base, seed);
    out.push(table.clone());
    for c in 1..commits {
        let n = table.num_rows() as i64;
        let ids = pick_ids(n, change, seed.wrapping_add(c as u64));
        let changed = with_returns(&table, &ids, 1);
        // Replace changed rows in place, then append.
        let mut cols: Vec<ArrayRef> = Vec::new();
        let ret = table
            .column(8)
            .as_any()
            .downcast_ref::<Int64Array>()
            .map(|a| a.values().to_vec())
            .unwrap_or_default();
        let mut ret = ret;
        let new_ret = changed
            .column(8)
            .as_any()
            .downcast_ref::<Int64Array>()
            .map(|a| a.values().to_vec())
            .unwrap_or_default();
        for (i, id) in ids.iter().enumerate() {
            ret[*id as usize] = new_ret[i];
        }
        for (j, c) in table.columns().iter().enumerate() {
            if j == 8 {
                cols.push(Arc::new(Int64Array::from(ret.clone())));
            } else {
                cols.push(c.clone());
            }
        }
        let updated = RecordBatch::try_new(table.schema(), cols).unwrap_or(table.clone());
        let more = sales(n, append, seed.wrapping_add(1000 + c as u64));
        table = arrow::compute::concat_batches(&schema(), [&updated, &more]).unwrap_or(updated);
        out.push(table.clone());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_rows() {
        assert_eq!(sales(0, 1000, 7), sales(0, 1000, 7));
        assert_ne!(sales(0, 1000, 7), sales(0, 1000, 8));
    }

    #[test]
    fn history_appends_and_changes() {
        let h = history(1000, 3, 100, 10, 1);
        assert_eq!(h[0].num_rows(), 1000);
        assert_eq!(h[2].num_rows(), 1200);
        let ret = h[1]
            .column(8)
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap();
        assert_eq!(ret.iter().flatten().sum::<i64>(), 10);
    }
}
