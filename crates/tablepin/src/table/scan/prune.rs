//! What a filter rules out before rows are decoded: files by their key
//! range, pages by the page index. Checked by DataFusion's pruning
//! predicates over the bounds we keep.

use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, Int64Array, StringArray};
use arrow::datatypes::{DataType, SchemaRef};
use datafusion::common::pruning::PruningStatistics;
use datafusion::common::{Column, ScalarValue};
use datafusion::physical_expr::split_conjunction;
use datafusion::physical_expr::utils::collect_columns;
use datafusion::physical_optimizer::pruning::{PruningPredicate, PruningPredicateBuilder};
use roaring::RoaringBitmap;
use tablepin_format::{KeyBound, TableSnapshot};

use crate::table::datafile::DataFile;
use crate::table::predicate::Predicate;

/// The rows of `file` whose pages the one-column conditions `pages` do
/// not rule out (`None`: no page is ruled out, or the file has no page
/// statistics).
pub(super) fn pages_allowed(
    pages: &[(String, Arc<PruningPredicate>)],
    file: &DataFile,
) -> Option<RoaringBitmap> {
    let mut keep: Option<RoaringBitmap> = None;
    for (column, condition) in pages {
        let Some(pages) = file.pages(column) else {
            continue;
        };
        let stats = Bounds {
            column,
            mins: pages.mins.clone(),
            maxes: pages.maxes.clone(),
            containers: pages.rows.len(),
        };
        // A condition DataFusion cannot check on these statistics rules
        // nothing out.
        let Ok(may) = condition.prune(&stats) else {
            continue;
        };
        if may.iter().all(|m| *m) {
            continue;
        }
        let mut rows = RoaringBitmap::new();
        for (r, m) in pages.rows.iter().zip(may) {
            if m {
                rows.insert_range(r.start as u32..r.end as u32);
            }
        }
        keep = Some(match keep {
            Some(k) => k & rows,
            None => rows,
        });
    }
    keep
}

/// The filter's conditions (of those joined by AND) that read one column,
/// each ready to be checked against that column's page statistics.
pub(super) fn single_column_conditions(
    filter: &Predicate,
    schema: &SchemaRef,
) -> Vec<(String, Arc<PruningPredicate>)> {
    split_conjunction(filter.physical())
        .into_iter()
        .filter_map(|c| {
            let cols = collect_columns(c);
            let [col] = cols.iter().collect::<Vec<_>>()[..] else {
                return None;
            };
            let p = PruningPredicateBuilder::new()
                .with_file_schema(schema.clone())
                .build(c.clone())?;
            Some((col.name().to_string(), p))
        })
        .collect()
}

/// Which files of a snapshot may hold a row the filter matches, by their
/// key range (kept for single-column integer and text keys): a file whose
/// range rules every match out is not read.
pub(super) fn files_that_may_match(
    snap: &TableSnapshot,
    filter: &Predicate,
    schema: &SchemaRef,
) -> Vec<bool> {
    let all = vec![true; snap.files.len()];
    let [key] = &snap.key[..] else {
        return all;
    };
    let Ok(field) = schema.field_with_name(key) else {
        return all;
    };
    let (Some(mins), Some(maxes)) = (
        key_bounds(
            snap.files.iter().map(|f| f.key_min.as_ref()),
            field.data_type(),
        ),
        key_bounds(
            snap.files.iter().map(|f| f.key_max.as_ref()),
            field.data_type(),
        ),
    ) else {
        return all;
    };
    let Some(p) = PruningPredicateBuilder::new()
        .with_file_schema(schema.clone())
        .build(filter.physical().clone())
    else {
        return all;
    };
    let stats = Bounds {
        column: key,
        mins,
        maxes,
        containers: snap.files.len(),
    };
    p.prune(&stats).unwrap_or(all)
}

/// Key bounds as an array of the key column's type (null where a file has
/// none); `None` for a type bounds are not kept for.
fn key_bounds<'a>(
    b: impl Iterator<Item = Option<&'a KeyBound>>,
    ty: &DataType,
) -> Option<ArrayRef> {
    let b: Vec<Option<&KeyBound>> = b.collect();
    let array: ArrayRef = if ty.is_integer() {
        Arc::new(Int64Array::from_iter(b.iter().map(|k| match k {
            Some(KeyBound::Int(i)) => Some(*i),
            _ => None,
        })))
    } else if matches!(
        ty,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
    ) {
        Arc::new(StringArray::from_iter(b.iter().map(|k| match k {
            Some(KeyBound::Str(s)) => Some(s.as_str()),
            _ => None,
        })))
    } else {
        return None;
    };
    arrow::compute::cast(&array, ty).ok()
}

/// One column's smallest and largest values in each of some containers
/// (a file's pages, or a snapshot's files), for DataFusion's pruning.
struct Bounds<'a> {
    column: &'a str,
    mins: ArrayRef,
    maxes: ArrayRef,
    containers: usize,
}

impl PruningStatistics for Bounds<'_> {
    fn min_values(&self, column: &Column) -> Option<ArrayRef> {
        (column.name == self.column).then(|| self.mins.clone())
    }
    fn max_values(&self, column: &Column) -> Option<ArrayRef> {
        (column.name == self.column).then(|| self.maxes.clone())
    }
    fn num_containers(&self) -> usize {
        self.containers
    }
    fn null_counts(&self, _: &Column) -> Option<ArrayRef> {
        None
    }
    fn row_counts(&self) -> Option<ArrayRef> {
        None
    }
    fn contained(
        &self,
        _: &Column,
        _: &std::collections::HashSet<ScalarValue>,
    ) -> Option<BooleanArray> {
        None
    }
}
