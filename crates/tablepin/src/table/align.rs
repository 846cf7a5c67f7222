//! Comparing a parent file with the input rows at its positions, column by
//! column, for an overwrite whose input has as many rows in the file's key
//! range as the file holds (`decide::Aligned`): the rows that differ are
//! found without hashing the file's rows or looking their keys up. It does
//! no I/O.

use arrow::array::{RecordBatch, UInt32Array};
use arrow::buffer::BooleanBuffer;
use arrow::compute::kernels::cmp::not_distinct;
use arrow::compute::take_record_batch;
use tablepin_format::RowHash;
use tablepin_rowhash::hash_rows;

use crate::error::{Error, Result};

/// The positions where `new` (the input rows at a file's positions, in key
/// order) differs from `old` (the file's rows), each with the hash of the
/// old row there; `None` when a key differs somewhere (the input does not
/// hold the file's keys) or a column's type has no comparison kernel, and
/// the file is decided by key instead.
///
/// Two values are the same when their bits are (nulls alike; floats by
/// their bits, so -0.0 is not 0.0), which implies the same row hash; rows
/// found different are hashed, and those whose hashes agree (NaNs of other
/// bits, which hash alike) are kept, so the outcome is what comparing the
/// hashes of every row gives.
pub(crate) fn row_differences(
    old: &RecordBatch,
    new: &RecordBatch,
    key_idx: &[usize],
) -> Result<Option<Vec<(u32, RowHash)>>> {
    let (a, b) = (old.schema(), new.schema());
    let alike = a.fields().len() == b.fields().len()
        && a.fields()
            .iter()
            .zip(b.fields())
            .all(|(x, y)| x.name() == y.name() && x.data_type() == y.data_type());
    if !alike || old.num_rows() != new.num_rows() {
        return Ok(None);
    }
    let same = |j: usize| not_distinct(old.column(j), new.column(j)).ok();
    for k in key_idx {
        match same(*k) {
            Some(m) if m.true_count() == m.len() => {}
            _ => return Ok(None),
        }
    }
    let mut all = BooleanBuffer::new_set(old.num_rows());
    for j in (0..old.num_columns()).filter(|j| !key_idx.contains(j)) {
        let Some(m) = same(j) else {
            return Ok(None);
        };
        all = &all & m.values();
    }
    let positions: Vec<u32> = (!&all).set_indices().map(|p| p as u32).collect();
    if positions.is_empty() {
        return Ok(Some(Vec::new()));
    }
    let idx = UInt32Array::from(positions.clone());
    let take = |batch: &RecordBatch| {
        take_record_batch(batch, &idx).map_err(Error::arrow("taking the rows that differ"))
    };
    let (old_hashes, new_hashes) = (hash_rows(&take(old)?)?, hash_rows(&take(new)?)?);
    Ok(Some(
        positions
            .into_iter()
            .zip(old_hashes.into_iter().zip(new_hashes))
            .filter(|(_, (o, n))| o != n)
            .map(|(p, (o, _))| (p, o))
            .collect(),
    ))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{ArrayRef, Float64Array, Int64Array, ListArray, StringArray};
    use arrow::datatypes::Int64Type;

    use super::*;

    fn batch(ids: &[i64], x: &[Option<f64>], s: &[Option<&str>]) -> RecordBatch {
        RecordBatch::try_from_iter(vec![
            ("id", Arc::new(Int64Array::from(ids.to_vec())) as ArrayRef),
            ("x", Arc::new(Float64Array::from(x.to_vec())) as ArrayRef),
            ("s", Arc::new(StringArray::from(s.to_vec())) as ArrayRef),
        ])
        .unwrap()
    }

    fn hash_at(b: &RecordBatch, p: usize) -> RowHash {
        hash_rows(&b.slice(p, 1)).unwrap()[0]
    }

    #[test]
    fn rows_that_differ_are_found_with_their_old_hashes() {
        let nan2 = f64::from_bits(0x7ff8_0000_0000_0001);
        let old = batch(
            &[1, 2, 3, 4, 5, 6],
            &[Some(1.0), Some(0.0), None, Some(f64::NAN), Some(2.0), None],
            &[Some("a"), Some("b"), Some("c"), Some("d"), None, None],
        );
        let new = batch(
            &[1, 2, 3, 4, 5, 6],
            &[
                Some(1.0),
                Some(-0.0),
                None,
                Some(nan2),
                Some(2.0),
                Some(0.0),
            ],
            &[Some("a"), Some("b"), Some("c"), Some("d"), Some(""), None],
        );
        // -0.0 is not 0.0 (their hashes differ); NaNs of other bits hash
        // alike; an empty string is not a null, nor 0.0 a null.
        let d = row_differences(&old, &new, &[0]).unwrap().unwrap();
        assert_eq!(
            d,
            vec![
                (1, hash_at(&old, 1)),
                (4, hash_at(&old, 4)),
                (5, hash_at(&old, 5))
            ]
        );
        for p in [0, 2, 3] {
            assert_eq!(hash_at(&old, p), hash_at(&new, p));
        }
        assert_eq!(row_differences(&old, &old, &[0]).unwrap(), Some(vec![]));
    }

    #[test]
    fn another_key_or_shape_is_not_aligned() {
        let old = batch(&[1, 2], &[Some(1.0), Some(2.0)], &[None, None]);
        let other_key = batch(&[1, 3], &[Some(1.0), Some(2.0)], &[None, None]);
        assert_eq!(row_differences(&old, &other_key, &[0]).unwrap(), None);
        let fewer = old.slice(0, 1);
        assert_eq!(row_differences(&old, &fewer, &[0]).unwrap(), None);
        // A nested type has no comparison kernel: decided by key instead.
        let list = |v: i64| {
            let l = ListArray::from_iter_primitive::<Int64Type, _, _>(vec![Some(vec![Some(v)])]);
            RecordBatch::try_from_iter(vec![
                ("id", Arc::new(Int64Array::from(vec![1])) as ArrayRef),
                ("l", Arc::new(l) as ArrayRef),
            ])
            .unwrap()
        };
        assert_eq!(row_differences(&list(1), &list(2), &[0]).unwrap(), None);
    }
}
