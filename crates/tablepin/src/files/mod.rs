//! The user's own files: reading the table a command commits (Parquet, CSV,
//! gzipped CSV, Arrow IPC file or stream, or an IPC stream on stdin) and
//! writing the table `export` produces.
//!
//! This is the one place outside the store that touches the local disk, as
//! `git add` reads the working tree: these are the user's files, not the
//! repository's. Every error names the file and says what is wrong with it.

use std::fs::File;
use std::io::{BufReader, Cursor, Read, Seek};
use std::path::Path;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::error::{Error, Result};
use crate::progress::Progress;

mod write;
pub use write::{can_write, write_table_file, OutputFormat, TableFileWriter};

/// The formats a table file can have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileFormat {
    /// Apache Parquet.
    Parquet,
    /// Comma-separated text with a header line, optionally gzipped.
    Csv,
    /// Arrow IPC (Feather v2) file or stream.
    Ipc,
}

impl FileFormat {
    /// The format a path's extension names.
    pub fn from_path(path: &str) -> Result<Self> {
        let lower = path.to_ascii_lowercase();
        let lower = lower.strip_suffix(".gz").unwrap_or(&lower);
        if lower.ends_with(".parquet") || lower.ends_with(".pq") {
            Ok(FileFormat::Parquet)
        } else if lower.ends_with(".csv") || lower.ends_with(".tsv") {
            Ok(FileFormat::Csv)
        } else if lower.ends_with(".arrow")
            || lower.ends_with(".feather")
            || lower.ends_with(".ipc")
            || lower.ends_with(".arrows")
        {
            Ok(FileFormat::Ipc)
        } else {
            Err(Error::Input {
                path: path.to_string(),
                message: "unknown file type; name it .parquet, .csv, .csv.gz, .arrow or .feather"
                    .into(),
            })
        }
    }
}

fn input_err(path: &str) -> impl Fn(String) -> Error + '_ {
    move |message| Error::Input {
        path: path.to_string(),
        message,
    }
}

/// How to read a table file.
#[derive(Clone, Default)]
pub struct ReadOptions {
    /// The field separator of a CSV file (default: tab for `.tsv` and
    /// `.tsv.gz`, comma otherwise).
    pub delimiter: Option<u8>,
    /// Told of a CSV file's bytes as they are parsed, parsing being where
    /// reading one takes its time: `begin` with the bytes to parse (the
    /// file as stored when read a batch at a time, as decompressed when
    /// read whole), `advance` as they are; the caller ends it.
    pub progress: Option<Arc<dyn Progress>>,
}

impl std::fmt::Debug for ReadOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadOptions")
            .field("delimiter", &self.delimiter)
            .field("progress", &self.progress.is_some())
            .finish()
    }
}

/// A reader that tells a [`Progress`] of the bytes read through it.
struct Told<R> {
    inner: R,
    progress: Arc<dyn Progress>,
}

impl<R: Read> Read for Told<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.progress.advance(n as u64);
        Ok(n)
    }
}

/// `r`, telling `progress` (when given) of `total` bytes to read and of
/// each read.
fn told<'a, R: Read + Send + 'a>(
    r: R,
    progress: Option<&Arc<dyn Progress>>,
    what: &str,
    total: u64,
) -> Box<dyn Read + Send + 'a> {
    match progress {
        Some(p) => {
            p.begin(what, total);
            Box::new(Told {
                inner: r,
                progress: p.clone(),
            })
        }
        None => Box::new(r),
    }
}

/// A table file as a commit's input, read a batch at a time: Parquet,
/// Arrow IPC or CSV by its name ([`open_table_file`]). It is a
/// [`crate::CommitInput`], so [`crate::Input::Stream`] commits a
/// file larger than memory a window at a time.
#[derive(Debug, Clone)]
pub struct TableFile {
    /// The file's path.
    pub path: String,
    /// How to read it.
    pub opts: ReadOptions,
}

/// Reads a whole table file into record batches with canonical types (see
/// [`normalize`]). `-` reads an Arrow IPC stream from stdin.
pub fn read_table_file(path: &str) -> Result<(SchemaRef, Vec<RecordBatch>)> {
    read_table_file_with(path, &ReadOptions::default())
}

/// True when `path` is a CSV file (by its name) that has a header and no
/// rows: its column types cannot be inferred, so a caller should read it
/// with the table's own schema ([`empty_with_schema`]) or refuse it.
pub fn is_header_only_csv(path: &str, batches: &[RecordBatch]) -> bool {
    path != "-"
        && FileFormat::from_path(path).is_ok_and(|f| f == FileFormat::Csv)
        && batches.iter().all(|b| b.num_rows() == 0)
}

/// A header-only file read with a table's schema: its header must name the
/// table's columns (in any order); the result has no rows.
pub fn empty_with_schema(path: &str, header: &Schema, table: &SchemaRef) -> Result<SchemaRef> {
    let mut names: Vec<&str> = header.fields().iter().map(|f| f.name().as_str()).collect();
    let mut want: Vec<&str> = table.fields().iter().map(|f| f.name().as_str()).collect();
    names.sort_unstable();
    want.sort_unstable();
    if names != want {
        return Err(Error::Input {
            path: path.to_string(),
            message: format!(
                "has a header but no rows, and its columns ({}) are not the table's ({})",
                names.join(", "),
                want.join(", ")
            ),
        });
    }
    Ok(table.clone())
}

/// Refuses a schema in which two columns have the same name: a later
/// look-up by name would read the first twice and lose the second's values.
pub fn check_unique_columns(schema: &Schema) -> std::result::Result<(), String> {
    let mut seen: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for (i, f) in schema.fields().iter().enumerate() {
        if let Some(first) = seen.insert(f.name().as_str(), i) {
            return Err(format!(
                "has two columns named '{}' (columns {} and {}); column names must be unique, so rename one",
                f.name(),
                first + 1,
                i + 1
            ));
        }
    }
    Ok(())
}

/// Record batches read one after another, each with canonical types.
pub type BatchIter = Box<dyn Iterator<Item = Result<RecordBatch>> + Send>;

/// Opens a table file for reading a batch at a time, so that a caller
/// holds one batch and not the file (a commit too large for memory,
/// [`crate::Input::Stream`]). Parquet and Arrow IPC files are read
/// as stored; a CSV file (gzipped or not) is read twice, once for the
/// column types (inferred from its first 10,000 lines, as
/// [`read_table_file_with`] infers them) and once for its rows. Standard
/// input (`-`) cannot be read twice and is refused: read it whole.
pub fn open_table_file(path: &str, opts: &ReadOptions) -> Result<(SchemaRef, BatchIter)> {
    let err = input_err(path);
    let p = Path::new(path);
    if path == "-" {
        return Err(err(
            "standard input cannot be read as a stream of windows; read it whole".into(),
        ));
    }
    if !p.exists() {
        return Err(err("no such file".into()));
    }
    let open = || File::open(p).map_err(|e| err(e.to_string()));
    let (schema, raw): (SchemaRef, RawBatches) = match FileFormat::from_path(path)? {
        FileFormat::Parquet => {
            let (schema, reader) = parquet_reader(open()?).map_err(&err)?;
            let it = reader.map(|b| b.map_err(|e| format!("not a valid Parquet file: {e}")));
            (schema, Box::new(it))
        }
        FileFormat::Ipc => ipc_stream(BufReader::new(open()?)).map_err(&err)?,
        FileFormat::Csv => {
            let (gz, format) = csv_format(path, opts);
            let text = |f: Box<dyn Read + Send>| -> Box<dyn Read + Send> {
                if gz {
                    Box::new(BufReader::new(flate2::read::MultiGzDecoder::new(
                        BufReader::new(f),
                    )))
                } else {
                    Box::new(BufReader::new(f))
                }
            };
            let (schema, _) = format
                .infer_schema(text(Box::new(open()?)), Some(10_000))
                .map_err(|e| err(csv_message(&e.to_string())))?;
            let schema = Arc::new(schema);
            let file = open()?;
            let stored = file.metadata().map(|m| m.len()).unwrap_or(0);
            let rows = told(
                file,
                opts.progress.as_ref(),
                &format!("reading {path}"),
                stored,
            );
            let reader = arrow::csv::ReaderBuilder::new(schema.clone())
                .with_format(format)
                .with_batch_size(64 * 1024)
                .build(text(rows))
                .map_err(|e| err(format!("not a valid CSV file: {e}")))?;
            let it = reader.map(|b| b.map_err(|e| csv_message(&e.to_string())));
            (schema, Box::new(it))
        }
    };
    check_unique_columns(&schema).map_err(&err)?;
    let (out_schema, _) = normalize(&schema, Vec::new()).map_err(|e| err(e.to_string()))?;
    let path = path.to_string();
    let it = raw.map(move |b| {
        let b = b.map_err(input_err(&path))?;
        let (_, mut v) =
            normalize(&b.schema(), vec![b]).map_err(|e| input_err(&path)(e.to_string()))?;
        v.pop()
            .ok_or_else(|| Error::Internal("normalizing a batch gave none".into()))
    });
    Ok((out_schema, Box::new(it)))
}

type RawBatches = Box<dyn Iterator<Item = std::result::Result<RecordBatch, String>> + Send>;

/// An Arrow IPC file or stream read a batch at a time.
fn ipc_stream<R: Read + Seek + Send + 'static>(
    mut r: R,
) -> std::result::Result<(SchemaRef, RawBatches), String> {
    let mut magic = [0u8; 6];
    let n = r.read(&mut magic).map_err(|e| e.to_string())?;
    r.rewind().map_err(|e| e.to_string())?;
    if n == 6 && &magic == b"ARROW1" {
        let reader = arrow::ipc::reader::FileReader::try_new(r, None)
            .map_err(|e| format!("not a valid Arrow IPC file: {e}"))?;
        let schema = reader.schema();
        let it = reader.map(|b| b.map_err(|e| format!("not a valid Arrow IPC file: {e}")));
        Ok((schema, Box::new(it)))
    } else {
        let reader = arrow::ipc::reader::StreamReader::try_new(r, None)
            .map_err(|e| format!("not a valid Arrow IPC stream: {e}"))?;
        let schema = reader.schema();
        let it = reader.map(|b| b.map_err(|e| format!("not a valid Arrow IPC stream: {e}")));
        Ok((schema, Box::new(it)))
    }
}

/// Reads a whole table file as [`read_table_file`] does, with options.
pub fn read_table_file_with(
    path: &str,
    opts: &ReadOptions,
) -> Result<(SchemaRef, Vec<RecordBatch>)> {
    let err = input_err(path);
    let (schema, batches) = if path == "-" {
        let mut buf = Vec::new();
        std::io::stdin()
            .read_to_end(&mut buf)
            .map_err(|e| err(e.to_string()))?;
        read_piped(buf, opts).map_err(&err)?
    } else {
        let p = Path::new(path);
        if !p.exists() {
            return Err(err("no such file".into()));
        }
        let file = File::open(p).map_err(|e| err(e.to_string()))?;
        match FileFormat::from_path(path)? {
            FileFormat::Parquet => read_parquet(file).map_err(&err)?,
            FileFormat::Ipc => read_ipc(BufReader::new(file)).map_err(&err)?,
            FileFormat::Csv => {
                let (gz, format) = csv_format(path, opts);
                let mut raw = Vec::new();
                if gz {
                    flate2::read::MultiGzDecoder::new(BufReader::new(file))
                        .read_to_end(&mut raw)
                        .map_err(|e| err(format!("not a valid gzip file: {e}")))?;
                } else {
                    BufReader::new(file)
                        .read_to_end(&mut raw)
                        .map_err(|e| err(e.to_string()))?;
                }
                read_csv(raw, format, opts.progress.as_ref(), path).map_err(&err)?
            }
        }
    };
    check_unique_columns(&schema).map_err(&err)?;
    normalize(&schema, batches).map_err(|e| err(e.to_string()))
}

/// Whether a CSV file is gzipped (by its name), and how to read it: a
/// header line, and the delimiter asked for or given by its name (tab for
/// `.tsv` and `.tsv.gz`, comma otherwise).
fn csv_format(path: &str, opts: &ReadOptions) -> (bool, arrow::csv::reader::Format) {
    let lower = path.to_ascii_lowercase();
    let plain = lower.strip_suffix(".gz");
    let tsv = plain.unwrap_or(&lower).ends_with(".tsv");
    let delimiter = opts.delimiter.unwrap_or(if tsv { b'\t' } else { b',' });
    let format = arrow::csv::reader::Format::default()
        .with_header(true)
        .with_delimiter(delimiter);
    (plain.is_some(), format)
}

/// A Parquet file's schema and a reader of its batches.
fn parquet_reader<T: parquet::file::reader::ChunkReader + 'static>(
    file: T,
) -> std::result::Result<
    (
        SchemaRef,
        parquet::arrow::arrow_reader::ParquetRecordBatchReader,
    ),
    String,
> {
    let builder = ParquetRecordBatchReaderBuilder::try_new(file)
        .map_err(|e| format!("not a valid Parquet file: {e}"))?;
    let schema = builder.schema().clone();
    let reader = builder
        .with_batch_size(64 * 1024)
        .build()
        .map_err(|e| format!("not a valid Parquet file: {e}"))?;
    Ok((schema, reader))
}

/// Reads a table piped in on standard input, told by its first bytes:
/// Parquet (`PAR1`), an Arrow IPC file (`ARROW1`) or stream (a
/// continuation marker), gzipped CSV, or else CSV text (tab-separated
/// when its header line has tabs and no commas, unless a delimiter is
/// given).
fn read_piped(
    buf: Vec<u8>,
    opts: &ReadOptions,
) -> std::result::Result<(SchemaRef, Vec<RecordBatch>), String> {
    if buf.starts_with(b"PAR1") {
        return read_parquet(bytes::Bytes::from(buf));
    }
    if buf.starts_with(b"ARROW1") || buf.starts_with(&[0xff, 0xff, 0xff, 0xff]) {
        return read_ipc(Cursor::new(buf));
    }
    let text = if buf.starts_with(&[0x1f, 0x8b]) {
        let mut raw = Vec::new();
        flate2::read::MultiGzDecoder::new(Cursor::new(buf))
            .read_to_end(&mut raw)
            .map_err(|e| format!("not valid gzip: {e}"))?;
        raw
    } else {
        buf
    };
    if text.is_empty() {
        return Err("standard input is empty: pipe in CSV, Parquet or Arrow IPC".into());
    }
    let header = text.split(|b| *b == b'\n').next().unwrap_or_default();
    let tabs = header.contains(&b'\t') && !header.contains(&b',');
    let delimiter = opts.delimiter.unwrap_or(if tabs { b'\t' } else { b',' });
    let format = arrow::csv::reader::Format::default()
        .with_header(true)
        .with_delimiter(delimiter);
    read_csv(text, format, opts.progress.as_ref(), "standard input")
}

fn read_parquet<T: parquet::file::reader::ChunkReader + 'static>(
    file: T,
) -> std::result::Result<(SchemaRef, Vec<RecordBatch>), String> {
    let (schema, reader) = parquet_reader(file)?;
    let batches = reader
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| format!("not a valid Parquet file: {e}"))?;
    Ok((schema, batches))
}

fn read_ipc<R: Read + Seek + Send + 'static>(
    r: R,
) -> std::result::Result<(SchemaRef, Vec<RecordBatch>), String> {
    let (schema, batches) = ipc_stream(r)?;
    Ok((schema, batches.collect::<std::result::Result<Vec<_>, _>>()?))
}

fn read_csv(
    raw: Vec<u8>,
    format: arrow::csv::reader::Format,
    progress: Option<&Arc<dyn Progress>>,
    path: &str,
) -> std::result::Result<(SchemaRef, Vec<RecordBatch>), String> {
    let (schema, _) = format
        .infer_schema(Cursor::new(&raw), Some(10_000))
        .map_err(|e| csv_message(&e.to_string()))?;
    let schema = Arc::new(schema);
    let total = raw.len() as u64;
    let reader = arrow::csv::ReaderBuilder::new(schema.clone())
        .with_format(format)
        .with_batch_size(64 * 1024)
        .build(told(
            Cursor::new(raw),
            progress,
            &format!("reading {path}"),
            total,
        ))
        .map_err(|e| format!("not a valid CSV file: {e}"))?;
    let batches = reader
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| csv_message(&e.to_string()))?;
    Ok((schema, batches))
}

/// Turns arrow's ragged-row error ("Expected 3 records, found 2 records at
/// line 3", lines counted from the header as line 1) into one sentence.
fn csv_message(e: &str) -> String {
    let nums: Vec<usize> = e
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|t| t.parse().ok())
        .collect();
    if e.contains("unequal lengths") {
        if let [expected, found, line] = nums[nums.len().saturating_sub(3)..] {
            return format!(
                "line {line} has {found} fields but the header has {expected}; every line needs one field per header column"
            );
        }
    }
    format!("not a valid CSV file: {e}")
}

/// The canonical type a column is stored with: views and dictionaries become
/// plain arrays, so the same rows read from any format store alike.
fn canonical(t: &DataType) -> DataType {
    match t {
        DataType::Utf8View => DataType::Utf8,
        DataType::BinaryView => DataType::Binary,
        DataType::Dictionary(_, v) => canonical(v),
        other => other.clone(),
    }
}

/// Casts views and dictionaries to plain arrays (`canonical` says which).
pub fn normalize(
    schema: &SchemaRef,
    batches: Vec<RecordBatch>,
) -> std::result::Result<(SchemaRef, Vec<RecordBatch>), arrow::error::ArrowError> {
    let needs = schema
        .fields()
        .iter()
        .any(|f| canonical(f.data_type()) != *f.data_type());
    if !needs {
        return Ok((schema.clone(), batches));
    }
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| f.as_ref().clone().with_data_type(canonical(f.data_type())))
        .collect();
    let out_schema = Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()));
    let out = batches
        .into_iter()
        .map(|b| {
            let cols = b
                .columns()
                .iter()
                .zip(out_schema.fields())
                .map(|(c, f)| cast(c, f.data_type()))
                .collect::<std::result::Result<Vec<ArrayRef>, _>>()?;
            RecordBatch::try_new(out_schema.clone(), cols)
        })
        .collect::<std::result::Result<Vec<_>, _>>()?;
    Ok((out_schema, out))
}
