//! Rows handed to Python in batches pyarrow imports cheaply.
//!
//! pyarrow imports each batch of an Arrow C stream array by array, a fixed
//! cost per batch of about what copying a few hundred rows costs. A merged
//! read of a keyed table with upserts scattered through it hands over a
//! zero-copy slice for each run between them, thousands of short ones,
//! and spent about as long importing them as the engine spent reading.
//! Batches shorter than [`SHORT_ROWS`] are therefore copied together into
//! batches of about [`JOINED_ROWS`], the copies shared out over the cores;
//! longer batches pass through as they are, since copying them would cost
//! more than importing them (BENCHMARKS.md, "reading the head of the lab's
//! history").

use arrow::compute::concat_batches;
use arrow::datatypes::SchemaRef;
use arrow::error::ArrowError;
use arrow::record_batch::RecordBatch;

/// Rows under which a batch is joined with its short neighbours.
const SHORT_ROWS: usize = 512;
/// Rows a batch of joined short ones aims for.
const JOINED_ROWS: usize = 65_536;

/// Consecutive batches of `rows` grouped: a batch of `short` rows or more
/// alone, shorter neighbours together until a group holds `joined` rows;
/// positions into `rows`.
fn groups(rows: &[usize], short: usize, joined: usize) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let (mut start, mut held) = (0, 0);
    for (i, &n) in rows.iter().enumerate() {
        if n >= short {
            if start < i {
                out.push(start..i);
            }
            out.push(i..i + 1);
            (start, held) = (i + 1, 0);
            continue;
        }
        held += n;
        if held >= joined {
            out.push(start..i + 1);
            (start, held) = (i + 1, 0);
        }
    }
    if start < rows.len() {
        out.push(start..rows.len());
    }
    out
}

/// `batches` in the same order, the short ones joined (see the module's
/// docs), the joins spread over `threads` threads.
pub(crate) fn joined(
    schema: &SchemaRef,
    batches: Vec<RecordBatch>,
    threads: usize,
) -> Result<Vec<RecordBatch>, ArrowError> {
    let rows: Vec<usize> = batches.iter().map(|b| b.num_rows()).collect();
    let groups = groups(&rows, SHORT_ROWS, JOINED_ROWS);
    if groups.len() == batches.len() {
        return Ok(batches);
    }
    let per_thread = groups.len().div_ceil(threads.max(1));
    let joined: Vec<Result<Vec<RecordBatch>, ArrowError>> = std::thread::scope(|s| {
        let handles: Vec<_> = groups
            .chunks(per_thread.max(1))
            .map(|part| {
                let batches = &batches;
                s.spawn(move || {
                    part.iter()
                        .map(|g| match g.len() {
                            1 => Ok(batches[g.start].clone()),
                            _ => concat_batches(schema, &batches[g.clone()]),
                        })
                        .collect()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(ArrowError::ComputeError(
                        "a thread joining batches panicked".into(),
                    ))
                })
            })
            .collect()
    });
    let mut out = Vec::with_capacity(groups.len());
    for part in joined {
        out.extend(part?);
    }
    Ok(out)
}
