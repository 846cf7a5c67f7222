//! Data files and deletion vectors: the two kinds of blob that hold rows.
//!
//! A data file is Parquet written with fixed settings ([`WriteSettings`]) and
//! nothing that varies between runs (no time, no host), so the same rows with
//! the same settings give the same bytes and so the same blob. A deletion
//! vector is a portable-format roaring bitmap of row positions. Reads turn a
//! deletion vector into a Parquet `RowSelection`, so deleted rows are skipped
//! while decoding instead of being filtered out afterwards (which would copy
//! every batch that holds one).
//!
//! # The settings, and why
//!
//! zstd, pages of 1,024 rows with a page index, dictionaries up to 128 KiB
//! per column chunk (past that a column falls back to plain encoding), one
//! row group of 256 Ki rows a file (`row_group_rows` = `file_rows`). Small
//! pages and small dictionaries make a few-row read cheap: a read of 40 rows
//! from a 256 Ki-row file decodes the pages that hold them and at most
//! 128 KiB of dictionary per column, not 1 MiB (BENCHMARKS.md). One group a
//! file, because a read of a few rows sets up a page reader and a zstd
//! context per column chunk, and a second group doubled that. A single-column
//! key has no dictionary (`plain_key`): it is unique in a file.
//!
//! With adaptive encoding (`adaptive_encoding`) the encodings also follow the
//! rows being written: a column whose first 4,096 rows are over half distinct
//! gets no dictionary; integer, date and timestamp columns without one are
//! delta-encoded; text and binary columns without one (or past their
//! dictionary) are written as lengths then bytes (`length_encoding`,
//! DELTA_LENGTH_BYTE_ARRAY). Every writer of a table's files (commit,
//! compaction, erasure) takes its properties from
//! `WriteSettings::properties_for(key, rows)`, a function of the settings and
//! the rows alone, so the same rows give the same bytes whichever writes
//! them. A file's column chunks are encoded on all cores and spliced in
//! column order; the bytes are those of one `ArrowWriter`.

use std::collections::HashSet;
use std::ops::Range;
use std::sync::Mutex;

use arrow::array::{ArrayRef, RecordBatch};
use arrow::datatypes::{DataType, SchemaRef};
use arrow::row::{RowConverter, SortField};
use bytes::Bytes;
use parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder, RowSelection,
    RowSelectionPolicy, RowSelector,
};
use parquet::arrow::arrow_writer::compute_leaves;
use parquet::arrow::arrow_writer::ArrowWriterOptions;
use parquet::arrow::{parquet_to_arrow_schema, ArrowSchemaConverter, ArrowWriter, ProjectionMask};
use parquet::basic::{Compression, Encoding};
use parquet::file::metadata::PageIndexPolicy;
use parquet::file::properties::{EnabledStatistics, WriterProperties, WriterPropertiesBuilder};
use parquet::schema::types::ColumnPath;
use roaring::RoaringBitmap;
use serde::{Deserialize, Serialize};
use tablepin_format::ObjectId;

use super::par;
use super::ranged::Source;
use crate::error::{Error, Result};

/// How a repository writes its Parquet data files. Fixed per repository (in
/// its config), so that the same rows always give the same bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriteSettings {
    /// Parquet compression, as parquet-rs spells it: `ZSTD(3)`, `SNAPPY`,
    /// `UNCOMPRESSED`.
    pub compression: String,
    /// Write page-level statistics and the page index, so that reads of a
    /// few rows decode only the pages that hold them.
    pub page_index: bool,
    /// Start a new data page after this many rows (page index only).
    pub data_page_rows: Option<usize>,
    /// Largest dictionary page per column chunk, in bytes: past it a column
    /// falls back to plain encoding (none: parquet's default, 1 MiB). Small
    /// dictionaries keep low-cardinality columns dictionary-encoded while
    /// unique-ish columns (ids, invoice numbers, free text) stop paying for
    /// a dictionary that every read of one row must decode whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dictionary_page_bytes: Option<usize>,
    /// Write a single-column key without a dictionary. Its values are
    /// unique in a file, so a dictionary only holds each of them once more,
    /// and every commit that looks keys up must decode it whole (measured:
    /// a weekly commit 46 -> 31-35 ms, the table 12.7 -> 12.5 MB).
    /// Repositories made before keep dictionaries (serde default).
    #[serde(default)]
    pub plain_key: bool,
    /// Choose each column's encoding from the rows a file holds: a column
    /// whose first rows are mostly distinct (a key, a timestamp, free text)
    /// gets no dictionary, which would only overflow and fall back after
    /// every read of one row had to decode it whole; integer, date and
    /// timestamp columns without a dictionary are delta-encoded. Measured on
    /// the generated table: a 262,144-row file 3.26 -> 2.56 MB, reading 40
    /// scattered rows of it 2.8 -> 1.2 ms. Same rows still give the same
    /// bytes. Repositories made before read it as off (serde default).
    #[serde(default)]
    pub adaptive_encoding: bool,
    /// With adaptive encoding: text and binary columns are written as
    /// DELTA_LENGTH_BYTE_ARRAY where they have no dictionary (and fall back
    /// to it where a dictionary overflows): the values' lengths,
    /// delta-encoded, then their bytes back to back, which zstd compresses
    /// better than values each behind its length. Measured on a generated
    /// 262,144-row file: 2.54 -> 2.42 MB, reading 37 scattered rows of all
    /// columns 975 -> 809 µs (of the mostly-distinct text column, 499 ->
    /// 329 µs). Repositories made before read it as off (serde default).
    #[serde(default)]
    pub length_encoding: bool,
    /// Rows per row group.
    pub row_group_rows: usize,
    /// Rows per data file: larger writes are split.
    pub file_rows: usize,
    /// Compact when the rows deletion vectors hide exceed this many per
    /// thousand of the rows in the table's files (0: never). A commit that
    /// hides rows past it rewrites the files with the most hidden rows, live
    /// rows only, until they are under half of it.
    #[serde(default = "default_hidden_permille")]
    pub compact_hidden_permille: u32,
}

fn default_hidden_permille() -> u32 {
    10
}

impl Default for WriteSettings {
    /// tablepin's defaults: zstd, small dictionaries, page index with small
    /// pages (BENCHMARKS.md has the measurements behind each).
    fn default() -> Self {
        Self {
            compression: "ZSTD(3)".into(),
            page_index: true,
            data_page_rows: Some(1024),
            dictionary_page_bytes: Some(128 * 1024),
            plain_key: true,
            adaptive_encoding: true,
            length_encoding: true,
            // One row group per file: a read of a few rows sets up a page
            // reader (and a zstd context) per column chunk, so two groups
            // cost it twice (BENCHMARKS.md).
            row_group_rows: 256 * 1024,
            file_rows: 256 * 1024,
            compact_hidden_permille: default_hidden_permille(),
        }
    }
}

impl WriteSettings {
    /// The settings closest to pyarrow's defaults (snappy, dictionaries,
    /// column-chunk statistics, 1 Mi-row row groups), for comparisons with
    /// layouts written by pyarrow.
    pub fn pyarrow_like() -> Self {
        Self {
            compression: "SNAPPY".into(),
            page_index: false,
            data_page_rows: None,
            dictionary_page_bytes: None,
            plain_key: false,
            adaptive_encoding: false,
            length_encoding: false,
            row_group_rows: 1024 * 1024,
            file_rows: 1024 * 1024,
            compact_hidden_permille: default_hidden_permille(),
        }
    }

    /// The Parquet writer properties these settings stand for, for a table
    /// without a key, whatever its rows (no adaptive encoding).
    pub fn properties(&self) -> Result<WriterProperties> {
        Ok(self.builder(&[])?.build())
    }

    /// The Parquet writer properties for writing `rows` as one file of a
    /// table with these key columns. Every writer of a table's files
    /// (commit, compaction, erasure) asks here, so the same rows give the
    /// same bytes whichever writes them.
    pub fn properties_for(&self, key: &[String], rows: &RecordBatch) -> Result<WriterProperties> {
        let mut b = self.builder(key)?;
        if self.adaptive_encoding {
            let sample = rows.slice(0, rows.num_rows().min(ADAPTIVE_SAMPLE_ROWS));
            for (field, col) in sample.schema().fields().iter().zip(sample.columns()) {
                let path = ColumnPath::from(field.name().as_str());
                if mostly_distinct(col)? {
                    b = b.set_column_dictionary_enabled(path.clone(), false);
                }
                if delta_encodable(field.data_type()) {
                    b = b.set_column_encoding(path, Encoding::DELTA_BINARY_PACKED);
                } else if self.length_encoding && length_encodable(field.data_type()) {
                    b = b.set_column_encoding(path, Encoding::DELTA_LENGTH_BYTE_ARRAY);
                }
            }
        }
        Ok(b.build())
    }

    fn builder(&self, key: &[String]) -> Result<WriterPropertiesBuilder> {
        let compression: Compression = self.compression.parse().map_err(|e| {
            Error::InvalidArgument(format!(
                "compression '{}' is not one parquet knows: {e}",
                self.compression
            ))
        })?;
        let mut b = WriterProperties::builder()
            .set_compression(compression)
            .set_dictionary_enabled(true)
            .set_max_row_group_row_count(Some(self.row_group_rows.max(1)))
            .set_statistics_enabled(if self.page_index {
                EnabledStatistics::Page
            } else {
                EnabledStatistics::Chunk
            });
        if let Some(n) = self.data_page_rows {
            // The writer checks the page row limit once per write batch.
            b = b
                .set_data_page_row_count_limit(n.max(1))
                .set_write_batch_size(n.clamp(1, 1024));
        }
        if let [k] = key {
            if self.plain_key {
                b = b.set_column_dictionary_enabled(ColumnPath::from(k.as_str()), false);
            }
        }
        if let Some(n) = self.dictionary_page_bytes {
            b = b.set_dictionary_page_size_limit(n.max(1));
        }
        Ok(b)
    }
}

/// How many of a file's first rows adaptive encoding looks at.
const ADAPTIVE_SAMPLE_ROWS: usize = 4096;

/// Whether over half of a (sampled) column's values are distinct, so that a
/// dictionary would hold nearly every value once more. Nested columns, and
/// samples too small to tell, keep their dictionary.
fn mostly_distinct(col: &ArrayRef) -> Result<bool> {
    if col.len() < 64 || col.data_type().is_nested() {
        return Ok(false);
    }
    more_distinct_than(col, col.len() / 2)
}

/// Whether a column has more than `limit` distinct values (null counts as
/// one value). Integers and text are compared as they are; other types
/// through their `arrow_row` encoding, which is one-to-one with their
/// values. The direct comparison is what a commit's small file pays:
/// through `arrow_row`, choosing the encodings of a 10,000-row file took
/// 0.5 ms. The count stops as soon as the answer is known (past `limit`, or
/// short of it even if every value left were new), which for a limit of
/// half the values is about half of them.
fn more_distinct_than(col: &ArrayRef, limit: usize) -> Result<bool> {
    use arrow::array::AsArray;
    use arrow::datatypes::{Int32Type, Int64Type};
    // A fixed-seed hash (nothing here may vary between runs), and a fast
    // one: with SipHash, counting took two thirds of choosing the
    // encodings of a 10,000-row file.
    fn more<T: std::hash::Hash + Eq>(
        values: impl Iterator<Item = T>,
        n: usize,
        limit: usize,
    ) -> bool {
        let mut distinct: HashSet<T, foldhash::fast::FixedState> =
            HashSet::with_capacity_and_hasher(
                n.min(limit + 1),
                foldhash::fast::FixedState::default(),
            );
        for (i, v) in values.enumerate() {
            if distinct.len() + (n - i) <= limit {
                return false;
            }
            distinct.insert(v);
            if distinct.len() > limit {
                return true;
            }
        }
        false
    }
    let n = col.len();
    Ok(match col.data_type() {
        DataType::Int64 => more(col.as_primitive::<Int64Type>().iter(), n, limit),
        DataType::Int32 => more(col.as_primitive::<Int32Type>().iter(), n, limit),
        DataType::Utf8 => more(col.as_string::<i32>().iter(), n, limit),
        DataType::LargeUtf8 => more(col.as_string::<i64>().iter(), n, limit),
        _ => {
            let converter = RowConverter::new(vec![SortField::new(col.data_type().clone())])
                .map_err(Error::arrow("sampling a column's values"))?;
            let rows = converter
                .convert_columns(std::slice::from_ref(col))
                .map_err(Error::arrow("sampling a column's values"))?;
            more(rows.iter().map(|r| r.data()), n, limit)
        }
    })
}

/// Whether a column is stored as Parquet INT32/INT64 integers that delta
/// encoding serves (not decimals or durations, whose storage varies).
fn delta_encodable(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
            | DataType::UInt64
            | DataType::Date32
            | DataType::Date64
            | DataType::Timestamp(..)
            | DataType::Time32(_)
            | DataType::Time64(_)
    )
}

/// Whether a column is stored as Parquet byte arrays, whose values
/// (without a dictionary) are written as their lengths, delta-encoded, then
/// their bytes back to back: zstd then finds the repeats across values that
/// a length before each value hid.
fn length_encodable(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Binary | DataType::LargeBinary
    )
}

/// Encodes one batch as a Parquet data file, its column chunks on all
/// cores. Parquet encodes each column chunk on its own, so the bytes are
/// those of one `ArrowWriter` writing the batch (tested): row groups split
/// at the same rows, chunks spliced in column order.
pub(crate) fn write_data_file(batch: &RecordBatch, props: &WriterProperties) -> Result<Bytes> {
    let err = |e: parquet::errors::ParquetError| Error::arrow("writing a data file")(e.into());
    let schema = batch.schema();
    let writer = ArrowWriter::try_new_with_options(
        Vec::new(),
        schema.clone(),
        writer_options(batch, props)?,
    )
    .map_err(err)?;
    let (mut file, factory) = writer.into_serialized_writer().map_err(err)?;
    let group_rows = props.max_row_group_row_count().unwrap_or(usize::MAX).max(1);
    let (mut start, mut g) = (0usize, 0usize);
    while start < batch.num_rows() {
        let n = group_rows.min(batch.num_rows() - start);
        let rows = batch.slice(start, n);
        let mut writers = factory.create_column_writers(g).map_err(err)?.into_iter();
        // One job per leaf column, each with its own writer.
        let mut jobs = Vec::new();
        for (field, col) in schema.fields().iter().zip(rows.columns()) {
            for leaf in compute_leaves(field, col).map_err(err)? {
                let w = writers
                    .next()
                    .ok_or_else(|| Error::Internal("fewer column writers than leaves".into()))?;
                jobs.push((Mutex::new(Some(w)), leaf));
            }
        }
        let chunks = par::map(&jobs, |(w, leaf)| {
            let mut w = w
                .lock()
                .ok()
                .and_then(|mut w| w.take())
                .ok_or_else(|| Error::Internal("a column writer was used twice".into()))?;
            w.write(leaf).map_err(err)?;
            w.close().map_err(err)
        })?;
        let mut out = file.next_row_group().map_err(err)?;
        for c in chunks {
            c.append_to_row_group(&mut out).map_err(err)?;
        }
        out.close().map_err(err)?;
        start += n;
        g += 1;
    }
    Ok(Bytes::from(file.into_inner().map_err(err)?))
}

/// The writer's options: `props`, and the Arrow schema in the footer only
/// where the Parquet schema alone would read back as other Arrow types.
/// Every read takes its types from the table's snapshot, and for the usual
/// types (integers, floats, text, dates, timestamps in UTC) the Parquet
/// schema says the same; the serialized Arrow schema was over a third of a
/// small file's footer (840 of 2,383 bytes in the lab's weekly files).
fn writer_options(batch: &RecordBatch, props: &WriterProperties) -> Result<ArrowWriterOptions> {
    Ok(ArrowWriterOptions::new()
        .with_properties(props.clone())
        .with_skip_arrow_metadata(!needs_arrow_schema(&batch.schema())?))
}

/// Whether `schema` reads back from its Parquet schema alone as other
/// fields (or without its metadata).
fn needs_arrow_schema(schema: &SchemaRef) -> Result<bool> {
    let err = |e: parquet::errors::ParquetError| Error::arrow("writing a data file")(e.into());
    if !schema.metadata().is_empty() {
        return Ok(true);
    }
    let parquet = ArrowSchemaConverter::new().convert(schema).map_err(err)?;
    let back = parquet_to_arrow_schema(&parquet, None).map_err(err)?;
    Ok(back.fields() != schema.fields())
}

/// The same file written by one `ArrowWriter`, which [`write_data_file`]
/// must equal byte for byte.
#[cfg(test)]
fn write_data_file_serially(batch: &RecordBatch, props: &WriterProperties) -> Result<Bytes> {
    let err = |e: parquet::errors::ParquetError| Error::arrow("writing a data file")(e.into());
    let mut w = ArrowWriter::try_new_with_options(
        Vec::new(),
        batch.schema(),
        writer_options(batch, props)?,
    )
    .map_err(err)?;
    w.write(batch).map_err(err)?;
    Ok(Bytes::from(w.into_inner().map_err(err)?))
}

pub(crate) fn bad(blob: ObjectId, what: &'static str) -> impl Fn(String) -> Error {
    move |message| Error::BadBlob {
        blob,
        what,
        message,
    }
}

/// Rows selected from a data file: everything, everything but a deletion
/// vector, a set of positions (ascending), or ranges of rows (ascending,
/// disjoint).
pub(crate) enum Select<'a> {
    All,
    Live(Option<&'a RoaringBitmap>),
    Positions(&'a [u32]),
    Ranges(&'a [Range<usize>]),
}

fn selection(select: &Select<'_>, rows: usize) -> Option<RowSelection> {
    let ranges: Vec<Range<usize>> = match select {
        Select::All | Select::Live(None) => return None,
        Select::Live(Some(dv)) => {
            let mut out = Vec::new();
            let mut start = 0usize;
            for p in dv.iter() {
                let p = p as usize;
                if p > start {
                    out.push(start..p);
                }
                start = p + 1;
            }
            if start < rows {
                out.push(start..rows);
            }
            out
        }
        Select::Ranges(r) => r.to_vec(),
        Select::Positions(ps) => {
            let mut out: Vec<Range<usize>> = Vec::new();
            for &p in ps.iter() {
                let p = p as usize;
                match out.last_mut() {
                    Some(r) if r.end == p => r.end = p + 1,
                    _ => out.push(p..p + 1),
                }
            }
            out
        }
    };
    if ranges.is_empty() {
        return Some(RowSelection::from(vec![RowSelector::skip(rows)]));
    }
    Some(RowSelection::from_consecutive_ranges(
        ranges.into_iter(),
        rows,
    ))
}

/// A data file opened for reading: its (verified) bytes and its parsed
/// footer with the page index, so that several reads of one file parse the
/// footer once.
pub(crate) struct DataFile {
    blob: ObjectId,
    bytes: Source,
    meta: ArrowReaderMetadata,
}

/// The data pages of one column of a data file: each page's rows, and the
/// smallest and largest value in it (null where the file has no statistic).
pub(crate) struct ColumnPages {
    pub(crate) rows: Vec<Range<usize>>,
    pub(crate) mins: ArrayRef,
    pub(crate) maxes: ArrayRef,
}

/// How much of a data file's page index a read parses with its footer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PageIndex {
    /// Page locations only (the offset index): enough to read chosen rows
    /// and skip the pages that hold none of them. Every read but a key
    /// look-up by page needs no more.
    Locations,
    /// Page locations and each page's smallest and largest value (the
    /// column index too), for [`DataFile::pages`]. Parsing those statistics
    /// for every column was a quarter of opening a 262,144-row file.
    WithStats,
}

impl DataFile {
    /// Parses a data file's footer and its page locations.
    pub(crate) fn open(blob: ObjectId, bytes: Bytes) -> Result<Self> {
        Self::open_with(blob, bytes, PageIndex::Locations)
    }

    /// Parses a data file's footer and as much of its page index as asked.
    pub(crate) fn open_with(blob: ObjectId, bytes: Bytes, index: PageIndex) -> Result<Self> {
        let stats = match index {
            PageIndex::Locations => PageIndexPolicy::Skip,
            PageIndex::WithStats => PageIndexPolicy::Optional,
        };
        let options = ArrowReaderOptions::new()
            .with_offset_index_policy(PageIndexPolicy::Optional)
            .with_column_index_policy(stats);
        let meta = ArrowReaderMetadata::load(&bytes, options)
            .map_err(|e| bad(blob, "Parquet data file")(e.to_string()))?;
        Ok(Self {
            blob,
            bytes: Source::Whole(bytes),
            meta,
        })
    }

    /// A data file from its bytes (whole, or the pieces a read by range
    /// fetched) and its parsed footer.
    pub(crate) fn from_parts(blob: ObjectId, bytes: Source, meta: ArrowReaderMetadata) -> Self {
        Self { blob, bytes, meta }
    }

    /// The file's own schema, as stored.
    pub(crate) fn schema(&self) -> SchemaRef {
        self.meta.schema().clone()
    }

    /// Rows in the file.
    pub(crate) fn rows(&self) -> usize {
        self.meta.metadata().file_metadata().num_rows().max(0) as usize
    }

    /// Reads rows as batches of `schema` (a column the file lacks, added to
    /// the table later, reads as nulls; a column `schema` lacks is not read).
    pub(crate) fn read(&self, schema: &SchemaRef, select: Select<'_>) -> Result<Vec<RecordBatch>> {
        self.read_limited(schema, select, None)
    }

    /// [`DataFile::read`], stopping after `limit` of the selected rows: the
    /// pages past them are not decoded.
    pub(crate) fn read_limited(
        &self,
        schema: &SchemaRef,
        select: Select<'_>,
        limit: Option<usize>,
    ) -> Result<Vec<RecordBatch>> {
        self.batches(schema, select, limit)?.collect()
    }

    /// The rows [`DataFile::read_limited`] reads, decoded a batch (8,192
    /// rows) at a time as the iterator is advanced.
    pub(crate) fn batches(
        &self,
        schema: &SchemaRef,
        select: Select<'_>,
        limit: Option<usize>,
    ) -> Result<impl Iterator<Item = Result<RecordBatch>> + Send + 'static> {
        let blob = self.blob;
        let bad = move |m: String| bad(blob, "Parquet data file")(m);
        let builder = ParquetRecordBatchReaderBuilder::new_with_metadata(
            self.bytes.clone(),
            self.meta.clone(),
        );
        let file_schema = builder.schema().clone();
        let wanted: Vec<usize> = schema
            .fields()
            .iter()
            .filter_map(|f| file_schema.index_of(f.name()).ok())
            .collect();
        let mask = ProjectionMask::roots(builder.parquet_schema(), wanted);
        let mut builder = builder.with_projection(mask).with_batch_size(8192);
        if matches!(self.bytes, Source::Pieces { .. }) {
            // A selection read as a mask decodes every page, and of a file
            // read by range only the selected rows' pages were fetched.
            builder = builder.with_row_selection_policy(RowSelectionPolicy::Selectors);
        }
        if let Some(sel) = selection(&select, self.rows()) {
            builder = builder.with_row_selection(sel);
        }
        if let Some(n) = limit {
            builder = builder.with_limit(n);
        }
        let reader = builder.build().map_err(|e| bad(e.to_string()))?;
        let schema = schema.clone();
        Ok(reader.map(move |batch| {
            let batch = batch.map_err(|e| bad(e.to_string()))?;
            super::types::conform(&batch, &schema).map_err(bad)
        }))
    }

    /// The data pages of `column`, from the page index; `None` when the
    /// file has no page index or not that column, or was opened without
    /// its statistics ([`PageIndex::Locations`]).
    pub(crate) fn pages(&self, column: &str) -> Option<ColumnPages> {
        let md = self.meta.metadata();
        let (Some(column_index), Some(offset_index)) = (md.column_index(), md.offset_index())
        else {
            return None;
        };
        let conv =
            StatisticsConverter::try_new(column, self.meta.schema(), self.meta.parquet_schema())
                .ok()?;
        let groups: Vec<usize> = (0..md.num_row_groups()).collect();
        let mins = conv
            .data_page_mins(column_index, offset_index, &groups)
            .ok()?;
        let maxes = conv
            .data_page_maxes(column_index, offset_index, &groups)
            .ok()?;
        let counts = conv
            .data_page_row_counts(offset_index, md.row_groups(), &groups)
            .ok()??;
        let mut rows = Vec::with_capacity(counts.len());
        let mut start = 0usize;
        for c in counts.iter() {
            let end = start + c? as usize;
            rows.push(start..end);
            start = end;
        }
        (rows.len() == mins.len() && rows.len() == maxes.len() && start == self.rows())
            .then_some(ColumnPages { rows, mins, maxes })
    }
}

impl DataFile {
    /// Reads the rows of a data file that a deletion vector leaves, as batches
    /// of `schema`. A few deleted rows are cut out of the decoded batches as
    /// zero-copy slices: a `RowSelection` with a gap every few hundred rows made
    /// the decoder half as fast again (BENCHMARKS.md). Many deleted rows are
    /// skipped while decoding instead.
    pub(crate) fn live(
        &self,
        schema: &SchemaRef,
        dv: Option<&RoaringBitmap>,
    ) -> Result<Vec<RecordBatch>> {
        let Some(dv) = dv.filter(|d| !d.is_empty()) else {
            return self.read(schema, Select::All);
        };
        if dv.len().saturating_mul(SLICE_BELOW) > self.rows() as u64 {
            return self.read(schema, Select::Live(Some(dv)));
        }
        let mut out = Vec::new();
        let mut start = 0u32;
        for b in self.read(schema, Select::All)? {
            let end = start + b.num_rows() as u32;
            let mut from = start;
            for p in dv.range(start..end) {
                if p > from {
                    out.push(b.slice((from - start) as usize, (p - from) as usize));
                }
                from = p + 1;
            }
            if end > from {
                out.push(b.slice((from - start) as usize, (end - from) as usize));
            }
            start = end;
        }
        Ok(out)
    }
}

/// Deleted rows are sliced out while fewer than one in this many.
const SLICE_BELOW: u64 = 64;

/// Reads rows of a data file as batches of `schema` (see [`DataFile::read`]).
pub(crate) fn read_data_file(
    blob: ObjectId,
    bytes: Bytes,
    schema: &SchemaRef,
    select: Select<'_>,
) -> Result<Vec<RecordBatch>> {
    DataFile::open(blob, bytes)?.read(schema, select)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::first_ints;
    use arrow::array::{Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use std::sync::Arc;

    fn batch(n: i64) -> RecordBatch {
        RecordBatch::try_from_iter(vec![
            (
                "id",
                Arc::new(Int64Array::from_iter_values(0..n)) as ArrayRef,
            ),
            (
                "s",
                Arc::new(StringArray::from_iter_values(
                    (0..n).map(|i| format!("v{}", i % 7)),
                )),
            ),
        ])
        .unwrap()
    }

    /// Whether each column of a written file's first row group has a
    /// dictionary, and whether it uses delta encoding.
    fn encodings(b: &RecordBatch, props: &WriterProperties) -> Vec<(bool, bool)> {
        encodings_of(b, props, Encoding::DELTA_BINARY_PACKED)
    }

    /// Per column: whether it has a dictionary, and whether `encoding` is
    /// among its encodings.
    fn encodings_of(
        b: &RecordBatch,
        props: &WriterProperties,
        encoding: Encoding,
    ) -> Vec<(bool, bool)> {
        let bytes = write_data_file(b, props).unwrap();
        let r = ParquetRecordBatchReaderBuilder::try_new(bytes).unwrap();
        let g = r.metadata().row_group(0).clone();
        (0..g.num_columns())
            .map(|c| {
                let col = g.column(c);
                (
                    col.dictionary_page_offset().is_some(),
                    col.encodings().any(|e| e == encoding),
                )
            })
            .collect()
    }

    /// The settings as a repository made before `fields` existed reads
    /// them (each serde default).
    fn without(settings: &WriteSettings, fields: &[&str]) -> WriteSettings {
        let mut json = serde_json::to_value(settings).unwrap();
        for f in fields {
            assert!(json.as_object_mut().unwrap().remove(*f).is_some(), "{f}");
        }
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn a_single_key_column_is_written_without_a_dictionary() {
        let b = tablepin_datagen::sales(0, 5_000, 3);
        let dictionaries = |props: &WriterProperties| -> Vec<bool> {
            encodings(&b, props).into_iter().map(|(d, _)| d).collect()
        };
        let settings = WriteSettings {
            adaptive_encoding: false,
            ..Default::default()
        };
        let keyed = dictionaries(&settings.properties_for(&["id".into()], &b).unwrap());
        assert!(!keyed[0], "the key column `id` has a dictionary");
        assert!(keyed[1..].iter().all(|d| *d), "{keyed:?}");
        // Without a key, with a two-column key, and in settings from before
        // `plain_key` existed (serde default false), every column keeps one.
        let two = settings.properties_for(&["id".into(), "customer".into()], &b);
        let old = without(&settings, &["plain_key"]);
        assert!(!old.plain_key);
        for props in [
            settings.properties().unwrap(),
            two.unwrap(),
            old.properties_for(&["id".into()], &b).unwrap(),
        ] {
            assert!(dictionaries(&props).iter().all(|d| *d));
        }
    }

    /// Adaptive encoding: the mostly-distinct columns of the generated table
    /// (`id`, `customer`, `product`, `sold_at`: over half of the first 4,096
    /// values distinct) lose their dictionary, the repetitive ones keep it,
    /// integer columns without a dictionary are delta-encoded, and settings
    /// from before it existed write what they wrote.
    #[test]
    fn adaptive_encoding_drops_dictionaries_of_mostly_distinct_columns() {
        let b = tablepin_datagen::sales(0, 20_000, 3);
        let settings = WriteSettings::default();
        let got = encodings(&b, &settings.properties_for(&[], &b).unwrap());
        let names: Vec<String> = b
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        let plain: Vec<&str> = names
            .iter()
            .zip(&got)
            .filter(|(_, (dict, _))| !dict)
            .map(|(n, _)| n.as_str())
            .collect();
        assert_eq!(plain, ["id", "customer", "product", "sold_at"]);
        let delta: Vec<&str> = names
            .iter()
            .zip(&got)
            .filter(|(_, (_, delta))| *delta)
            .map(|(n, _)| n.as_str())
            .collect();
        assert_eq!(delta, ["id", "customer", "sold_at"]);
        // Text without a dictionary: lengths, then bytes back to back.
        let length = |settings: &WriteSettings| -> Vec<String> {
            let got = encodings_of(
                &b,
                &settings.properties_for(&[], &b).unwrap(),
                Encoding::DELTA_LENGTH_BYTE_ARRAY,
            );
            names
                .iter()
                .zip(&got)
                .filter(|(_, (_, l))| *l)
                .map(|(n, _)| n.clone())
                .collect()
        };
        assert_eq!(length(&settings), ["product"]);
        // A repository made before length encoding writes what it wrote.
        let earlier = without(&settings, &["length_encoding"]);
        assert!(!earlier.length_encoding && earlier.adaptive_encoding);
        assert!(length(&earlier).is_empty());
        let bytes_of = |s: &WriteSettings| {
            write_data_file(&b, &s.properties_for(&["id".into()], &b).unwrap()).unwrap()
        };
        let off = WriteSettings {
            length_encoding: false,
            ..settings.clone()
        };
        assert_eq!(bytes_of(&earlier), bytes_of(&off));
        assert!(bytes_of(&settings).len() < bytes_of(&off).len());
        // Every value reads back.
        let bytes = write_data_file(&b, &settings.properties_for(&[], &b).unwrap()).unwrap();
        let back = read_data_file(ObjectId::of(&bytes), bytes, &b.schema(), Select::All).unwrap();
        let back = arrow::compute::concat_batches(&b.schema(), &back).unwrap();
        assert_eq!(back, b);
        // A sample too small to tell keeps every dictionary.
        let small = tablepin_datagen::sales(0, 40, 3);
        let got = encodings(&small, &settings.properties_for(&[], &small).unwrap());
        assert!(got.iter().all(|(dict, _)| *dict), "{got:?}");
        // Settings from before adaptive encoding: the bytes they wrote.
        let old = without(&settings, &["adaptive_encoding"]);
        assert!(!old.adaptive_encoding);
        let before = WriteSettings {
            adaptive_encoding: false,
            ..settings.clone()
        };
        let a = write_data_file(&b, &old.properties_for(&["id".into()], &b).unwrap()).unwrap();
        let c = write_data_file(&b, &before.properties_for(&["id".into()], &b).unwrap()).unwrap();
        assert_eq!(a, c);
        assert!(encodings(&b, &old.properties().unwrap())
            .iter()
            .all(|(d, _)| *d));
    }

    #[test]
    fn distinct_values_are_counted_as_the_row_encoding_counts_them() {
        use arrow::array::{Int32Array, LargeStringArray};
        let by_rows = |col: &ArrayRef| {
            let conv = RowConverter::new(vec![SortField::new(col.data_type().clone())]).unwrap();
            let rows = conv.convert_columns(std::slice::from_ref(col)).unwrap();
            rows.iter()
                .map(|r| r.data().to_vec())
                .collect::<HashSet<_>>()
                .len()
        };
        let cols: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(vec![
                Some(1),
                None,
                Some(1),
                Some(-1),
                None,
                Some(0),
            ])),
            Arc::new(Int32Array::from(vec![
                Some(7),
                Some(7),
                None,
                Some(i32::MIN),
            ])),
            Arc::new(StringArray::from(vec![
                Some(""),
                None,
                Some(""),
                Some("é"),
                Some("e"),
                None,
            ])),
            Arc::new(LargeStringArray::from(vec![
                Some("a"),
                Some("a"),
                None,
                Some(""),
            ])),
            Arc::new(arrow::array::Float64Array::from(vec![
                0.0,
                -0.0,
                f64::NAN,
                0.0,
            ])),
        ];
        // Every limit, on both sides of each column's count.
        for col in &cols {
            let distinct = by_rows(col);
            for limit in 0..=col.len() + 1 {
                assert_eq!(
                    more_distinct_than(col, limit).unwrap(),
                    distinct > limit,
                    "{col:?} over {limit}"
                );
            }
        }
        assert_eq!(by_rows(&cols[0]), 4);
        assert_eq!(by_rows(&cols[2]), 4);
    }

    #[test]
    fn parallel_columns_write_the_bytes_of_one_writer() {
        let small = WriteSettings {
            row_group_rows: 3_000,
            ..Default::default()
        };
        for settings in [
            WriteSettings::default(),
            WriteSettings::pyarrow_like(),
            small,
        ] {
            // The generated sales table: integers, floats, text with
            // nulls, timestamps.
            for n in [1, 2_999, 10_000] {
                let b = tablepin_datagen::sales(0, n, 7);
                for props in [
                    settings.properties().unwrap(),
                    settings.properties_for(&["id".into()], &b).unwrap(),
                ] {
                    let parallel = write_data_file(&b, &props).unwrap();
                    let serial = write_data_file_serially(&b, &props).unwrap();
                    assert_eq!(ObjectId::of(&parallel), ObjectId::of(&serial), "{n} rows");
                }
            }
        }
    }

    /// A file's footer holds the Arrow schema only where the Parquet schema
    /// alone reads back as other types, and every file reads back as the
    /// types it was written with.
    #[test]
    fn the_arrow_schema_is_in_the_footer_only_where_parquet_alone_reads_other_types() {
        use arrow::array::{Array, DictionaryArray, Int64Array, LargeStringArray};
        use arrow::datatypes::{Field, Int32Type, Schema};
        use std::sync::Arc;
        let props = WriteSettings::default().properties().unwrap();
        let has_hint = |bytes: &Bytes| {
            let r = ParquetRecordBatchReaderBuilder::try_new(bytes.clone()).unwrap();
            (r.metadata().file_metadata().key_value_metadata())
                .is_some_and(|kv| kv.iter().any(|k| k.key == "ARROW:schema"))
        };
        // Integers, text with nulls, floats; and the same with a timestamp
        // in seconds, which Parquet stores in milliseconds.
        let sales = tablepin_datagen::sales(0, 1_000, 7);
        let seconds = sales.schema().index_of("sold_at").unwrap();
        let usual: Vec<usize> = (0..sales.num_columns()).filter(|c| *c != seconds).collect();
        let usual = sales.project(&usual).unwrap();
        let id = Arc::new(Int64Array::from(vec![1, 2, 3])) as ArrayRef;
        let large = Arc::new(LargeStringArray::from(vec!["a", "b", "c"])) as ArrayRef;
        let dict: DictionaryArray<Int32Type> = vec!["x", "y", "x"].into_iter().collect();
        let odd = RecordBatch::try_new(
            Arc::new(Schema::new(vec![
                Field::new("id", DataType::Int64, false),
                Field::new("large", DataType::LargeUtf8, false),
                Field::new("dict", dict.data_type().clone(), false),
            ])),
            vec![id, large, Arc::new(dict) as ArrayRef],
        )
        .unwrap();
        for (b, hint) in [(&usual, false), (&sales, true), (&odd, true)] {
            let bytes = write_data_file(b, &props).unwrap();
            assert_eq!(has_hint(&bytes), hint, "{:?}", b.schema());
            let f = DataFile::open(ObjectId::of(&bytes), bytes).unwrap();
            assert_eq!(f.schema(), b.schema());
            let back = f.read(&b.schema(), Select::All).unwrap();
            assert_eq!(
                arrow::compute::concat_batches(&b.schema(), &back).unwrap(),
                *b
            );
        }
    }

    #[test]
    fn same_rows_same_settings_same_bytes() {
        for settings in [WriteSettings::default(), WriteSettings::pyarrow_like()] {
            let props = settings.properties().unwrap();
            let a = write_data_file(&batch(10_000), &props).unwrap();
            let b = write_data_file(&batch(10_000), &props).unwrap();
            assert_eq!(ObjectId::of(&a), ObjectId::of(&b));
        }
    }

    #[test]
    fn selections_skip_deleted_and_pick_positions() {
        let props = WriteSettings::default().properties().unwrap();
        let bytes = write_data_file(&batch(20_000), &props).unwrap();
        let schema = batch(1).schema();
        let id = ObjectId::of(&bytes);
        let mut dv = RoaringBitmap::new();
        dv.insert_range(0..5);
        dv.insert(19_999);
        dv.insert(7_000);
        let live = read_data_file(id, bytes.clone(), &schema, Select::Live(Some(&dv))).unwrap();
        let n: usize = live.iter().map(|b| b.num_rows()).sum();
        assert_eq!(n, 20_000 - 7);
        let ids = first_ints(&live);
        assert_eq!(ids[0], 5);
        assert!(!ids.contains(&7_000));
        let picked = read_data_file(
            id,
            bytes.clone(),
            &schema,
            Select::Positions(&[3, 4, 9_999]),
        )
        .unwrap();
        let ids = first_ints(&picked);
        assert_eq!(ids, vec![3, 4, 9_999]);
    }

    /// Both ways of leaving out deleted rows (slicing decoded batches for a
    /// few, skipping while decoding for many) give the live rows in order,
    /// across batch boundaries.
    #[test]
    fn read_live_slices_or_skips_and_keeps_exactly_the_live_rows() {
        let props = WriteSettings::default().properties().unwrap();
        let n = 20_000u32;
        let bytes = write_data_file(&batch(n as i64), &props).unwrap();
        let schema = batch(1).schema();
        let id = ObjectId::of(&bytes);
        let sparse: RoaringBitmap = [0u32, 1, 8_191, 8_192, 8_193, 12_345, n - 1]
            .into_iter()
            .collect();
        let dense: RoaringBitmap = (0..n).filter(|p| p % 3 == 0).collect();
        for dv in [sparse, dense, RoaringBitmap::new()] {
            let got = DataFile::open(id, bytes.clone())
                .unwrap()
                .live(&schema, Some(&dv))
                .unwrap();
            let ids = first_ints(&got);
            let expect: Vec<i64> = (0..n).filter(|p| !dv.contains(*p)).map(i64::from).collect();
            assert_eq!(ids, expect, "{} deleted", dv.len());
        }
    }

    #[test]
    fn a_column_added_later_reads_as_null() {
        let props = WriteSettings::default().properties().unwrap();
        let bytes = write_data_file(&batch(3), &props).unwrap();
        let wider = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("s", DataType::Utf8, false),
            Field::new("extra", DataType::Float64, true),
        ]));
        let out = read_data_file(ObjectId::of(&bytes), bytes, &wider, Select::All).unwrap();
        assert_eq!(out[0].num_columns(), 3);
        assert_eq!(out[0].column(2).null_count(), 3);
    }

    #[test]
    fn garbage_is_a_bad_blob_error() {
        let schema = batch(1).schema();
        let err = read_data_file(
            ObjectId::of(b"x"),
            Bytes::from_static(b"not parquet"),
            &schema,
            Select::All,
        )
        .unwrap_err();
        assert!(matches!(err, Error::BadBlob { .. }), "{err}");
    }
}
