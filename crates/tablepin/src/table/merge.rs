//! Reading a keyed table in key order from files that are each sorted by key.
//!
//! A keyed table is a set of rows read back in key order. Each data file is
//! written sorted by key, so a read is a k-way merge of sorted runs. The
//! merge works on runs, not rows: it takes the file with the smallest next
//! key, finds by binary search how far that file stays below every other
//! file's next key, and emits that whole stretch as a zero-copy slice. A
//! table whose files do not overlap (the common case: appends of growing
//! keys) is one slice per batch, as cheap as reading the files in order;
//! rows moved by an upsert cost two slices each.
//!
//! # What a keyed read does
//!
//! A read hands every file to `Store::map_blobs`, which reads, verifies and
//! decodes each file (minus its deletion vector, as a Parquet `RowSelection`)
//! as one job on all cores; a local folder is read inside the job, so the
//! bytes are hashed and decoded while in cache. The merge then emits
//! zero-copy slices of whole runs, joining runs under 64 rows. A single
//! integer key is compared as `i64` (`keys::SortKeys`); other keys through
//! `arrow_row`.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use arrow::array::RecordBatch;
use arrow::compute::concat_batches;
use arrow::datatypes::SchemaRef;

use crate::error::{Error, Result};
use crate::table::keys::{KeyCodec, KeyRef, SortKeys};
use tablepin_format::KeyBound;

/// One sorted input: its batches and the key rows of all of them.
struct Source {
    batches: Vec<RecordBatch>,
    /// Start offset of each batch in `keys`.
    starts: Vec<usize>,
    keys: SortKeys,
}

impl Source {
    fn len(&self) -> usize {
        self.keys.len()
    }

    /// Emits rows `[from, to)` as slices of the batches that hold them.
    fn emit(&self, from: usize, to: usize, out: &mut Vec<RecordBatch>) {
        let mut b = match self.starts.binary_search(&from) {
            Ok(i) => i,
            Err(i) => i - 1,
        };
        let mut pos = from;
        while pos < to {
            // Skip empty batches.
            while self.batches[b].num_rows() == 0 {
                b += 1;
            }
            let start = self.starts[b];
            let end = start + self.batches[b].num_rows();
            let stop = to.min(end);
            out.push(self.batches[b].slice(pos - start, stop - pos));
            pos = stop;
            b += 1;
        }
    }
}

#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Head<'a> {
    key: KeyRef<'a>,
    source: usize,
    pos: usize,
}

/// Merges inputs, each sorted by key, into key order.
pub(crate) fn merge_sorted(
    schema: &SchemaRef,
    inputs: Vec<Vec<RecordBatch>>,
    codec: &KeyCodec,
) -> Result<Vec<RecordBatch>> {
    let mut sources = Vec::new();
    for batches in inputs {
        let keys = codec.sort_keys(&batches)?;
        if keys.is_empty() {
            continue;
        }
        let mut starts = Vec::with_capacity(batches.len());
        let mut acc = 0;
        for b in &batches {
            starts.push(acc);
            acc += b.num_rows();
        }
        sources.push(Source {
            batches,
            starts,
            keys,
        });
    }
    let mut runs = Vec::new();
    let mut heap: BinaryHeap<Reverse<Head<'_>>> = sources
        .iter()
        .enumerate()
        .map(|(i, s)| {
            Reverse(Head {
                key: s.keys.get(0),
                source: i,
                pos: 0,
            })
        })
        .collect();
    while let Some(Reverse(head)) = heap.pop() {
        let src = &sources[head.source];
        let end = match heap.peek() {
            None => src.len(),
            // First position in this source whose key exceeds the next
            // source's head.
            Some(Reverse(next)) => src.keys.first_above(head.pos + 1, next.key),
        };
        src.emit(head.pos, end, &mut runs);
        if end < src.len() {
            heap.push(Reverse(Head {
                key: src.keys.get(end),
                source: head.source,
                pos: end,
            }));
        }
    }
    coalesce(schema, runs)
}

/// Rows below which a slice is merged with its neighbours. Low on purpose:
/// the runs between upserted rows are long enough to pass on as zero-copy
/// slices, and copying them into larger batches cost a read of a table with
/// a thousand scattered upserts a third of its time (BENCHMARKS.md).
const SMALL: usize = 64;
/// Rows a merged batch of small slices aims for.
const TARGET: usize = 8192;

/// Joins runs of small slices into batches of about [`TARGET`] rows; large
/// slices pass through without a copy.
fn coalesce(schema: &SchemaRef, runs: Vec<RecordBatch>) -> Result<Vec<RecordBatch>> {
    let mut out = Vec::with_capacity(runs.len());
    let mut pending: Vec<RecordBatch> = Vec::new();
    let mut pending_rows = 0;
    let flush = |pending: &mut Vec<RecordBatch>, out: &mut Vec<RecordBatch>| -> Result<()> {
        match pending.len() {
            0 => {}
            1 => out.append(pending),
            _ => {
                out.push(
                    concat_batches(schema, pending.iter()).map_err(Error::arrow("merging rows"))?,
                );
                pending.clear();
            }
        }
        Ok(())
    };
    for r in runs {
        if r.num_rows() >= SMALL {
            flush(&mut pending, &mut out)?;
            pending_rows = 0;
            out.push(r);
        } else {
            pending_rows += r.num_rows();
            pending.push(r);
            if pending_rows >= TARGET {
                flush(&mut pending, &mut out)?;
                pending_rows = 0;
            }
        }
    }
    flush(&mut pending, &mut out)?;
    Ok(out)
}

/// One sorted input decoded a batch at a time.
pub(crate) type Batches = Box<dyn Iterator<Item = Result<RecordBatch>> + Send>;

/// Where one input of a [`MergeIter`] is: its current batch, that batch's
/// keys, and the next row.
struct Cursor {
    rest: Batches,
    batch: RecordBatch,
    keys: SortKeys,
    pos: usize,
}

impl Cursor {
    /// The input's next non-empty batch as a cursor, or `None` at its end.
    fn next_of(mut rest: Batches, codec: &KeyCodec) -> Result<Option<Cursor>> {
        for batch in rest.by_ref() {
            let batch = batch?;
            if batch.num_rows() == 0 {
                continue;
            }
            let keys = codec.sort_keys(std::slice::from_ref(&batch))?;
            return Ok(Some(Cursor {
                rest,
                batch,
                keys,
                pos: 0,
            }));
        }
        Ok(None)
    }
}

/// [`merge_sorted`] as an iterator: each input is decoded a batch at a
/// time, so memory holds one batch per input rather than the inputs. Runs
/// are found as `merge_sorted` finds them (the input with the smallest next
/// key, as far as it stays below every other input's next key, cut at its
/// batch's end) and small ones are joined the same way.
pub(crate) struct MergeIter {
    schema: SchemaRef,
    codec: KeyCodec,
    cursors: Vec<Cursor>,
    /// Give only rows whose key is below this one (a single key), the
    /// inputs that may hold smaller keys being all open: a read in stages
    /// (`window::Stage`) sets it as it adds each stage's files.
    below: Option<SortKeys>,
    pending: Vec<RecordBatch>,
    pending_rows: usize,
    ready: std::collections::VecDeque<RecordBatch>,
}

impl MergeIter {
    pub(crate) fn new(schema: &SchemaRef, inputs: Vec<Batches>, codec: KeyCodec) -> Result<Self> {
        let mut cursors = Vec::with_capacity(inputs.len());
        for input in inputs {
            cursors.extend(Cursor::next_of(input, &codec)?);
        }
        Ok(Self {
            schema: schema.clone(),
            codec,
            cursors,
            below: None,
            pending: Vec::new(),
            pending_rows: 0,
            ready: Default::default(),
        })
    }

    /// Adds inputs (sorted, as the others) and sets the key below which
    /// rows may be given (`None`: all of them); the iterator, which ended
    /// at the previous bound, then goes on from where it stopped.
    pub(crate) fn extend(&mut self, inputs: Vec<Batches>, below: Option<&KeyBound>) -> Result<()> {
        for input in inputs {
            self.cursors.extend(Cursor::next_of(input, &self.codec)?);
        }
        self.below = match below {
            Some(b) => Some(self.codec.bound_keys(&self.schema, b)?),
            None => None,
        };
        Ok(())
    }

    /// The next run of rows, in key order; `None` when every input is done
    /// or the next key is not below the bound.
    fn run(&mut self) -> Result<Option<RecordBatch>> {
        let Some(min) = (0..self.cursors.len()).min_by(|&a, &b| {
            let (a, b) = (&self.cursors[a], &self.cursors[b]);
            a.keys.get(a.pos).cmp(&b.keys.get(b.pos))
        }) else {
            return Ok(None);
        };
        let c = &self.cursors[min];
        let bound = self
            .below
            .as_ref()
            .filter(|b| !b.is_empty())
            .map(|b| b.get(0));
        if bound.is_some_and(|b| c.keys.get(c.pos) >= b) {
            return Ok(None);
        }
        let next = (0..self.cursors.len())
            .filter(|&j| j != min)
            .map(|j| self.cursors[j].keys.get(self.cursors[j].pos))
            .min();
        let mut end = match next {
            None => c.keys.len(),
            Some(k) => c.keys.first_above(c.pos + 1, k),
        };
        if let Some(b) = bound {
            end = end.min(c.keys.first_not_below(b));
        }
        let run = c.batch.slice(c.pos, end - c.pos);
        if end < c.keys.len() {
            self.cursors[min].pos = end;
        } else {
            let done = self.cursors.swap_remove(min);
            self.cursors
                .extend(Cursor::next_of(done.rest, &self.codec)?);
        }
        Ok(Some(run))
    }

    /// Joins the pending small runs into one batch, queued.
    fn flush(&mut self) -> Result<()> {
        match self.pending.len() {
            0 => {}
            1 => self.ready.extend(self.pending.drain(..)),
            _ => {
                let b = concat_batches(&self.schema, self.pending.iter())
                    .map_err(Error::arrow("merging rows"))?;
                self.pending.clear();
                self.ready.push_back(b);
            }
        }
        self.pending_rows = 0;
        Ok(())
    }

    fn next_batch(&mut self) -> Result<Option<RecordBatch>> {
        loop {
            if let Some(b) = self.ready.pop_front() {
                return Ok(Some(b));
            }
            let Some(r) = self.run()? else {
                self.flush()?;
                return Ok(self.ready.pop_front());
            };
            if r.num_rows() >= SMALL {
                self.flush()?;
                self.ready.push_back(r);
            } else {
                self.pending_rows += r.num_rows();
                self.pending.push(r);
                if self.pending_rows >= TARGET {
                    self.flush()?;
                }
            }
        }
    }
}

impl Iterator for MergeIter {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.next_batch() {
            Ok(b) => b.map(Ok),
            Err(e) => {
                // An input failed: the merge ends with its error.
                self.cursors.clear();
                self.pending.clear();
                self.ready.clear();
                Some(Err(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::first_ints as ids;
    use arrow::array::{ArrayRef, Int64Array};
    use std::sync::Arc;

    fn b(ids: &[i64]) -> RecordBatch {
        RecordBatch::try_from_iter(vec![(
            "k",
            Arc::new(Int64Array::from(ids.to_vec())) as ArrayRef,
        )])
        .unwrap()
    }

    #[test]
    fn merges_interleaved_sorted_inputs() {
        let schema = b(&[]).schema();
        let codec = KeyCodec::new(&schema, vec![0]).unwrap();
        let inputs = vec![
            vec![b(&[1, 2, 5]), b(&[]), b(&[8, 9, 20])],
            vec![b(&[3, 4]), b(&[10])],
            vec![b(&[0, 21])],
            vec![],
        ];
        let out = merge_sorted(&schema, inputs, &codec).unwrap();
        assert_eq!(ids(&out), vec![0, 1, 2, 3, 4, 5, 8, 9, 10, 20, 21]);
    }

    #[test]
    fn disjoint_inputs_pass_through_without_copies() {
        let schema = b(&[]).schema();
        let codec = KeyCodec::new(&schema, vec![0]).unwrap();
        let big: Vec<i64> = (0..5000).collect();
        let big2: Vec<i64> = (5000..10000).collect();
        let out = merge_sorted(&schema, vec![vec![b(&big2)], vec![b(&big)]], &codec).unwrap();
        assert_eq!(out.len(), 2);
        assert_eq!(ids(&out), (0..10000).collect::<Vec<_>>());
    }

    /// The streaming merge gives the rows, in the order, that the whole
    /// merge gives, whatever the inputs' batch sizes.
    #[test]
    fn the_streaming_merge_equals_the_whole_merge() {
        let schema = b(&[]).schema();
        let codec = || KeyCodec::new(&schema, vec![0]).unwrap();
        let inputs = vec![
            vec![b(&[1, 2, 5]), b(&[]), b(&[8, 9, 20])],
            vec![b(&[3, 4]), b(&[10])],
            vec![b(&[0, 21])],
            vec![],
            vec![
                b(&(100..400).collect::<Vec<_>>()),
                b(&(401..900).step_by(2).collect::<Vec<_>>()),
            ],
            vec![b(&(400..1000).step_by(2).collect::<Vec<_>>())],
        ];
        let whole = merge_sorted(&schema, inputs.clone(), &codec()).unwrap();
        let streams: Vec<Batches> = inputs
            .into_iter()
            .map(|v| Box::new(v.into_iter().map(Ok)) as Batches)
            .collect();
        let out: Vec<RecordBatch> = MergeIter::new(&schema, streams, codec())
            .unwrap()
            .collect::<Result<_>>()
            .unwrap();
        assert_eq!(ids(&out), ids(&whole));
        let mut sorted = ids(&out);
        sorted.sort_unstable();
        assert_eq!(ids(&out), sorted);
    }

    fn input(batches: Vec<RecordBatch>) -> Batches {
        Box::new(batches.into_iter().map(Ok))
    }

    /// Read in stages (inputs added as the read reaches their smallest
    /// key), the merge gives only rows below each stage's bound, and in all
    /// the rows and order of one merge of every input.
    #[test]
    fn a_merge_in_stages_stops_at_each_bound_and_equals_the_whole_merge() {
        let schema = b(&[]).schema();
        let codec = || KeyCodec::new(&schema, vec![0]).unwrap();
        let spanning = vec![b(&[3, 30, 60]), b(&[90])];
        let stages = vec![
            (
                vec![spanning.clone(), vec![b(&(0..25).collect::<Vec<_>>())]],
                Some(25),
            ),
            (
                vec![vec![b(&(25..50).collect::<Vec<_>>())], vec![b(&[50, 74])]],
                Some(75),
            ),
            (
                vec![vec![b(&(75..100).step_by(3).collect::<Vec<_>>())]],
                None,
            ),
        ];
        let all: Vec<Vec<RecordBatch>> = stages.iter().flat_map(|(i, _)| i.clone()).collect();
        let whole = merge_sorted(&schema, all, &codec()).unwrap();
        let mut m = MergeIter::new(&schema, Vec::new(), codec()).unwrap();
        let mut out = Vec::new();
        for (inputs, below) in stages {
            let bound = below.map(KeyBound::Int);
            m.extend(inputs.into_iter().map(input).collect(), bound.as_ref())
                .unwrap();
            let given: Vec<RecordBatch> = m.by_ref().collect::<Result<_>>().unwrap();
            if let Some(k) = below {
                assert!(
                    ids(&given).iter().all(|&v| v < k),
                    "{below:?}: {:?}",
                    ids(&given)
                );
            }
            out.extend(given);
        }
        assert_eq!(ids(&out), ids(&whole));
        assert_eq!(ids(&out).len(), 25 + 25 + 2 + 9 + 4);
    }

    /// A text key's bound compares with the rows' keys as the keys do.
    #[test]
    fn a_text_bound_stops_a_merge_of_text_keys() {
        use arrow::array::StringArray;
        let s = |v: &[&str]| {
            RecordBatch::try_from_iter(vec![(
                "k",
                Arc::new(StringArray::from(v.to_vec())) as ArrayRef,
            )])
            .unwrap()
        };
        let schema = s(&[]).schema();
        let codec = KeyCodec::new(&schema, vec![0]).unwrap();
        let bound = KeyBound::Str("m".into());
        let mut m = MergeIter::new(&schema, Vec::new(), codec).unwrap();
        m.extend(
            vec![
                input(vec![s(&["a", "m", "z"])]),
                input(vec![s(&["b", "l"])]),
            ],
            Some(&bound),
        )
        .unwrap();
        let given: Vec<RecordBatch> = m.by_ref().collect::<Result<_>>().unwrap();
        let text: Vec<String> = given
            .iter()
            .flat_map(|b| {
                let c = b
                    .column(0)
                    .as_any()
                    .downcast_ref::<StringArray>()
                    .unwrap()
                    .clone();
                c.iter().map(|v| v.unwrap().to_string()).collect::<Vec<_>>()
            })
            .collect();
        assert_eq!(text, vec!["a", "b", "l"]);
        m.extend(Vec::new(), None).unwrap();
        let rest: usize = m.map(|b| b.unwrap().num_rows()).sum();
        assert_eq!(rest, 2);
    }
}
