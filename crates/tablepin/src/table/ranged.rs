//! A data file read by verified byte ranges (`Store::read_ranges`): the
//! footer and page index from the file's tail, then, for each read, only
//! the pages it needs (each column chunk's dictionary page, and the data
//! pages that hold a selected row), every piece checked against the blob's
//! name through its outboard. A commit's look-up of a few keys in a large
//! file then fetches a few pages of it, not all of it.
//!
//! Which bytes a read needs is decided from the page index alone
//! ([`pages_needed`], no I/O); the decoding is `DataFile`'s, over the
//! pieces fetched ([`Source::Pieces`]), so a read by range gives the same
//! batches as a read of the whole file.

use std::ops::Range;
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use bytes::{Buf, Bytes};
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
use parquet::errors::ParquetError;
use parquet::file::metadata::{PageIndexPolicy, ParquetMetaData, ParquetMetaDataReader};
use parquet::file::reader::{ChunkReader, Length};
use tablepin_format::ObjectId;
use tablepin_store::ranged::RangedBlob;
use tablepin_store::Store;

use super::datafile::{DataFile, PageIndex};
use crate::error::Result;

/// Bytes read from a file's end first: the footer and the page locations
/// of a data file of 256 Ki rows and about ten columns fit in it (the
/// pages' statistics, which a look-up of a dense file does not need, lie
/// before them); a larger tail costs one more read of the bytes before.
const TAIL_FIRST: u64 = 32 * 1024;

/// The bytes of a data file a reader has.
#[derive(Clone)]
pub(crate) enum Source {
    /// All of them.
    Whole(Bytes),
    /// The pieces fetched so far, each at its offset in a file of `size`
    /// bytes; a read of bytes not fetched fails (an internal error: the
    /// pages a read needs are fetched before it).
    Pieces {
        size: u64,
        at: Arc<Vec<(u64, Bytes)>>,
    },
}

impl Source {
    fn piece(&self, start: u64, len: Option<usize>) -> parquet::errors::Result<Bytes> {
        let (at, bytes) = match self {
            Source::Whole(b) => (0u64, b),
            Source::Pieces { at, .. } => {
                let end = start + len.unwrap_or(0) as u64;
                let found = at
                    .iter()
                    .find(|(p, b)| *p <= start && end <= p + b.len() as u64);
                match found {
                    Some((p, b)) => (*p, b),
                    None => {
                        return Err(ParquetError::General(format!(
                            "bytes {start}..{end} of the data file were not fetched"
                        )))
                    }
                }
            }
        };
        let from = (start - at) as usize;
        let to = len.map_or(bytes.len(), |n| from + n);
        if to > bytes.len() || from > to {
            return Err(ParquetError::EOF(format!(
                "bytes {start}..{} are past the data file's end",
                at + to as u64
            )));
        }
        Ok(bytes.slice(from..to))
    }
}

impl Length for Source {
    fn len(&self) -> u64 {
        match self {
            Source::Whole(b) => b.len() as u64,
            Source::Pieces { size, .. } => *size,
        }
    }
}

impl ChunkReader for Source {
    type T = bytes::buf::Reader<Bytes>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        Ok(self.piece(start, None)?.reader())
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        self.piece(start, Some(length))
    }
}

/// The byte ranges of a data file that a read of the leaf columns
/// `leaves` at the rows `rows` (sorted, not overlapping) needs: each
/// column chunk's dictionary page and the data pages holding a selected
/// row. `None` when the file has no page locations (then it is read
/// whole). No I/O.
pub(crate) fn pages_needed(
    md: &ParquetMetaData,
    leaves: &[usize],
    rows: &[Range<usize>],
) -> Option<Vec<Range<u64>>> {
    let index = md.offset_index()?;
    let selected = |r: Range<usize>| {
        let i = rows.partition_point(|s| s.end <= r.start);
        rows.get(i).is_some_and(|s| s.start < r.end)
    };
    let mut out = Vec::new();
    let mut first = 0usize;
    for (g, group) in md.row_groups().iter().enumerate() {
        let end = first + usize::try_from(group.num_rows()).ok()?;
        for &leaf in leaves {
            let pages = index.get(g)?.get(leaf)?.page_locations();
            let data_start = u64::try_from(pages.first()?.offset).ok()?;
            if let Some(dict) = group.column(leaf).dictionary_page_offset() {
                out.push(u64::try_from(dict).ok()?..data_start);
            }
            for (i, p) in pages.iter().enumerate() {
                let from = first + usize::try_from(p.first_row_index).ok()?;
                let to = match pages.get(i + 1) {
                    Some(n) => first + usize::try_from(n.first_row_index).ok()?,
                    None => end,
                };
                if selected(from..to) {
                    let at = u64::try_from(p.offset).ok()?;
                    out.push(at..at + u64::try_from(p.compressed_page_size).ok()?);
                }
            }
        }
        first = end;
    }
    Some(out)
}

/// A data file opened for reads by range: its blob, its footer and page
/// index, and the pieces fetched.
pub(crate) struct RangedFile {
    blob: RangedBlob,
    meta: ArrowReaderMetadata,
    pieces: Vec<(u64, Bytes)>,
}

impl RangedFile {
    /// Opens blob `id` of `size` bytes (as its snapshot records it): its
    /// footer and page index from its tail, with what verifies them (the
    /// outboard, or the hash pairs on their paths).
    pub(crate) async fn open(
        store: &Store,
        id: ObjectId,
        size: u64,
        index: PageIndex,
    ) -> Result<Self> {
        let blob = store.open_ranged_sized(&id, size).await?;
        let stats = match index {
            PageIndex::Locations => PageIndexPolicy::Skip,
            PageIndex::WithStats => PageIndexPolicy::Optional,
        };
        let bad = |e: ParquetError| super::datafile::bad(id, "Parquet data file")(e.to_string());
        let size = blob.size();
        let mut have = TAIL_FIRST.min(size);
        let mut tail = store
            .read_ranges(&blob, std::slice::from_ref(&(size - have..size)))
            .await?
            .pop()
            .unwrap_or_default();
        loop {
            let mut reader = ParquetMetaDataReader::new()
                .with_offset_index_policy(PageIndexPolicy::Optional)
                .with_column_index_policy(stats);
            match reader.try_parse_sized(&tail, size) {
                Ok(()) => {
                    let md = reader.finish().map_err(bad)?;
                    let meta =
                        ArrowReaderMetadata::try_new(Arc::new(md), ArrowReaderOptions::new())
                            .map_err(bad)?;
                    return Ok(Self {
                        blob,
                        meta,
                        pieces: vec![(size - have, tail)],
                    });
                }
                // The footer or the page index starts further back: only
                // the bytes before those fetched.
                Err(ParquetError::NeedMoreData(n)) if (n as u64) > have && (n as u64) <= size => {
                    let more = store
                        .read_ranges(&blob, std::slice::from_ref(&(size - n as u64..size - have)))
                        .await?
                        .pop()
                        .unwrap_or_default();
                    let mut joined = Vec::with_capacity(n);
                    joined.extend_from_slice(&more);
                    joined.extend_from_slice(&tail);
                    tail = Bytes::from(joined);
                    have = n as u64;
                }
                Err(e) => return Err(bad(e)),
            }
        }
    }

    /// Fetches what a read of `schema`'s columns at `rows` needs (see
    /// [`pages_needed`]); a file without page locations, whole.
    pub(crate) async fn fetch(
        &mut self,
        store: &Store,
        schema: &SchemaRef,
        rows: &[Range<usize>],
    ) -> Result<()> {
        if self.blob.whole_bytes().is_some() || rows.is_empty() {
            return Ok(());
        }
        let leaves = leaves_of(&self.meta, schema);
        let size = self.blob.size();
        let needed = pages_needed(self.meta.metadata(), &leaves, rows)
            .unwrap_or_else(|| std::iter::once(0..size).collect());
        // Whole chunk groups, as the store fetches them, and none fetched
        // already.
        let group = self.blob.group_bytes();
        let wanted: Vec<Range<u64>> =
            (tablepin_store::ranged::fetch_plan(size, &needed, store.join_below(), group))
                .into_iter()
                .filter(|r| {
                    !(self.pieces.iter())
                        .any(|(at, b)| *at <= r.start && r.end <= at + b.len() as u64)
                })
                .collect();
        if wanted.is_empty() {
            return Ok(());
        }
        let got = store.read_ranges(&self.blob, &wanted).await?;
        self.pieces.extend(wanted.iter().map(|r| r.start).zip(got));
        Ok(())
    }

    /// The file as the pieces fetched so far give it.
    pub(crate) fn file(&self) -> DataFile {
        let source = match self.blob.whole_bytes() {
            Some(b) => Source::Whole(b.clone()),
            None => Source::Pieces {
                size: self.blob.size(),
                at: Arc::new(self.pieces.clone()),
            },
        };
        DataFile::from_parts(self.blob.id(), source, self.meta.clone())
    }

    /// The whole blob, when it was read whole (it has no outboard).
    pub(crate) fn whole_bytes(&self) -> Option<&Bytes> {
        self.blob.whole_bytes()
    }
}

/// The leaf columns of a data file that hold `schema`'s columns (by name;
/// a column the file lacks has none).
fn leaves_of(meta: &ArrowReaderMetadata, schema: &SchemaRef) -> Vec<usize> {
    let file_schema = meta.schema();
    let roots: Vec<usize> = schema
        .fields()
        .iter()
        .filter_map(|f| file_schema.index_of(f.name()).ok())
        .collect();
    let descr = meta.metadata().file_metadata().schema_descr();
    (0..descr.num_columns())
        .filter(|&leaf| roots.contains(&descr.get_column_root_idx(leaf)))
        .collect()
}
