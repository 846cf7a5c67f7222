//! The collect executor of a [`ScanPlan`]: every row it asks for, at once.

use std::sync::Mutex;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use tablepin_format::TableSnapshot;
use tablepin_store::Store;

use super::stream::Files;
use super::{ScanPlan, ScanRequest};
use crate::error::Result;
use crate::table::datafile::{DataFile, Select};
use crate::table::{dv, keys, merge, take_rows, ReadStats};

/// The rows of `snap` that `req` asks for, with what the read touched:
/// keyed tables merged in key order when `req.ordered` (and no files are
/// chosen), file by file otherwise.
pub(crate) async fn collect(
    store: &Store,
    snap: &TableSnapshot,
    table: &str,
    req: &ScanRequest<'_>,
) -> Result<(SchemaRef, Vec<RecordBatch>, ReadStats)> {
    let plan = ScanPlan::decide(snap, table, req)?;
    match (&plan.order, plan.limit) {
        (Some(_), Some(n)) if plan.read.filter.is_none() => first(store, plan, n).await,
        _ => all(store, plan).await,
    }
}

/// Every kept file fetched, verified and decoded on all cores (unordered
/// with a limit, a few files at a time until the limit), then merged by
/// key when the plan has an order.
async fn all(store: &Store, plan: ScanPlan) -> Result<(SchemaRef, Vec<RecordBatch>, ReadStats)> {
    let dvs = dv::load_many(store, &plan.files).await?;
    let stats = Mutex::new(plan.stats());
    let files = Files {
        plan: &plan,
        dvs: &dvs,
        stats: &stats,
    };
    let every: Vec<usize> = (0..plan.files.len()).collect();
    let step = match (&plan.order, plan.limit) {
        (None, Some(_)) => tablepin_format::threads(),
        _ => every.len(),
    };
    let mut per_file: Vec<Vec<RecordBatch>> = Vec::new();
    let mut have = 0;
    for idx in every.chunks(step.max(1)) {
        let left = plan.limit.map(|n| n.saturating_sub(have));
        if left == Some(0) {
            break;
        }
        let read = files.decode(store, idx, left).await?;
        have += read.iter().flatten().map(|b| b.num_rows()).sum::<usize>();
        per_file.extend(read);
    }
    let schema = &plan.read.schema;
    let batches = match &plan.order {
        Some(key) if per_file.len() > 1 => {
            let codec = keys::KeyCodec::new(schema, key.clone())?;
            merge::merge_sorted(schema, per_file, &codec)?
        }
        _ => per_file.into_iter().flatten().collect(),
    };
    let batches = match plan.limit {
        Some(n) => take_rows(batches, n),
        None => batches,
    };
    let batches = batches
        .iter()
        .map(|b| plan.read.project(b))
        .collect::<Result<Vec<_>>>()?;
    let mut stats = stats.into_inner().unwrap_or_default();
    stats.rows = batches.iter().map(|b| b.num_rows() as u64).sum();
    Ok((plan.schema(), batches, stats))
}

/// The first `n` rows of a keyed plan with no filter, in key order,
/// reading as few files as it can: the files by their smallest key, until
/// the next file's smallest key is past the `n`-th key found, each only
/// its first `n` live rows, loading only their deletion vectors. Without
/// key ranges on every file, every file is read (each still only its first
/// `n` rows).
async fn first(
    store: &Store,
    plan: ScanPlan,
    n: usize,
) -> Result<(SchemaRef, Vec<RecordBatch>, ReadStats)> {
    let mut stats = plan.stats();
    if n == 0 {
        return Ok((plan.schema(), Vec::new(), stats));
    }
    let schema = &plan.read.schema;
    let key_at = plan.order.clone().unwrap_or_default();
    let ranged = plan.files.iter().all(|f| f.key_min.is_some());
    let mut order: Vec<usize> = (0..plan.files.len()).collect();
    if ranged {
        order.sort_by(|&a, &b| plan.files[a].key_min.cmp(&plan.files[b].key_min));
    }
    // Key ranges are kept for single-column keys only.
    let key_col = key_at.first().copied().filter(|_| ranged);
    let codec = keys::KeyCodec::new(schema, key_at)?;
    let mut known = dv::Known::new();
    let mut per_file: Vec<Vec<RecordBatch>> = Vec::new();
    let mut found: Vec<RecordBatch> = Vec::new();
    for i in order {
        let f = &plan.files[i];
        let have: usize = found.iter().map(|b| b.num_rows()).sum();
        if have >= n {
            // Every later file starts past the n-th key found: done. A
            // keyed table without key ranges: any file may hold a smaller key.
            let past = match (key_col, found.last()) {
                (Some(k), Some(last)) => {
                    let nth = keys::bound_at(last.column(k), last.num_rows() - 1);
                    f.key_min.as_ref() > nth.as_ref()
                }
                _ => false,
            };
            if past {
                break;
            }
        }
        let dv = dv::load(store, f, &mut known).await?;
        let bytes = store.get_blob(&f.data).await?;
        stats.count_file(f);
        let file = DataFile::open(f.data, bytes)?;
        let read = file.read_limited(schema, Select::Live(dv.as_ref()), Some(n))?;
        stats.rows_decoded += read.iter().map(|b| b.num_rows() as u64).sum::<u64>();
        per_file.push(read);
        found = match per_file.len() {
            1 => take_rows(per_file[0].clone(), n),
            _ => take_rows(merge::merge_sorted(schema, per_file.clone(), &codec)?, n),
        };
    }
    let batches = found
        .iter()
        .map(|b| plan.read.project(b))
        .collect::<Result<Vec<_>>>()?;
    stats.rows = batches.iter().map(|b| b.num_rows() as u64).sum();
    Ok((plan.schema(), batches, stats))
}
