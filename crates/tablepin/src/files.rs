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

/// Reads a whole table file into record batches with canonical types (see
/// [`normalize`]). `-` reads an Arrow IPC stream from stdin.
pub fn read_table_file(path: &str) -> Result<(SchemaRef, Vec<RecordBatch>)> {
    let err = input_err(path);
    let (schema, batches) = if path == "-" {
        let mut buf = Vec::new();
        std::io::stdin()
            .read_to_end(&mut buf)
            .map_err(|e| err(e.to_string()))?;
        read_ipc(Cursor::new(buf)).map_err(&err)?
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
                let mut raw = Vec::new();
                if path.to_ascii_lowercase().ends_with(".gz") {
                    flate2::read::MultiGzDecoder::new(BufReader::new(file))
                        .read_to_end(&mut raw)
                        .map_err(|e| err(format!("not a valid gzip file: {e}")))?;
                } else {
                    BufReader::new(file)
                        .read_to_end(&mut raw)
                        .map_err(|e| err(e.to_string()))?;
                }
                read_csv(raw).map_err(&err)?
            }
        }
    };
    normalize(&schema, batches).map_err(|e| err(e.to_string()))
}

fn read_parquet(file: File) -> std::result::Result<(SchemaRef, Vec<RecordBatch>), String> {
    let builder = ParquetRecordBatchReaderBuilder::try_new(file)
        .map_err(|e| format!("not a valid Parquet file: {e}"))?;
    let schema = builder.schema().clone();
    let reader = builder
        .with_batch_size(64 * 1024)
        .build()
        .map_err(|e| format!("not a valid Parquet file: {e}"))?;
    let batches = reader
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| format!("not a valid Parquet file: {e}"))?;
    Ok((schema, batches))
}

fn read_ipc<R: Read + Seek>(
    mut r: R,
) -> std::result::Result<(SchemaRef, Vec<RecordBatch>), String> {
    let mut magic = [0u8; 6];
    let n = r.read(&mut magic).map_err(|e| e.to_string())?;
    r.rewind().map_err(|e| e.to_string())?;
    if n == 6 && &magic == b"ARROW1" {
        let reader = arrow::ipc::reader::FileReader::try_new(r, None)
            .map_err(|e| format!("not a valid Arrow IPC file: {e}"))?;
        let schema = reader.schema();
        let batches = reader
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| format!("not a valid Arrow IPC file: {e}"))?;
        Ok((schema, batches))
    } else {
        let reader = arrow::ipc::reader::StreamReader::try_new(r, None)
            .map_err(|e| format!("not a valid Arrow IPC stream: {e}"))?;
        let schema = reader.schema();
        let batches = reader
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| format!("not a valid Arrow IPC stream: {e}"))?;
        Ok((schema, batches))
    }
}

fn read_csv(raw: Vec<u8>) -> std::result::Result<(SchemaRef, Vec<RecordBatch>), String> {
    use arrow::csv::reader::Format;
    let format = Format::default().with_header(true);
    let (schema, _) = format
        .infer_schema(Cursor::new(&raw), Some(10_000))
        .map_err(|e| csv_message(&e.to_string()))?;
    let schema = Arc::new(schema);
    let reader = arrow::csv::ReaderBuilder::new(schema.clone())
        .with_format(format)
        .with_batch_size(64 * 1024)
        .build(Cursor::new(raw))
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

/// Casts views and dictionaries to plain arrays (see [`canonical`]).
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

/// Writes batches to a file whose extension names the format.
pub fn write_table_file(path: &str, schema: &SchemaRef, batches: &[RecordBatch]) -> Result<()> {
    let err = |message: String| Error::Output {
        path: path.to_string(),
        message,
    };
    let format = FileFormat::from_path(path)
        .map_err(|_| err("unknown file type; name it .parquet, .csv, .arrow or .feather".into()))?;
    let file = File::create(path).map_err(|e| err(e.to_string()))?;
    let w = std::io::BufWriter::new(file);
    match format {
        FileFormat::Parquet => {
            let mut writer = parquet::arrow::ArrowWriter::try_new(w, schema.clone(), None)
                .map_err(|e| err(e.to_string()))?;
            for b in batches {
                writer.write(b).map_err(|e| err(e.to_string()))?;
            }
            writer.close().map_err(|e| err(e.to_string()))?;
        }
        FileFormat::Csv => {
            let mut writer = arrow::csv::WriterBuilder::new().with_header(true).build(w);
            for b in batches {
                writer.write(b).map_err(|e| err(e.to_string()))?;
            }
        }
        FileFormat::Ipc => {
            let mut writer = arrow::ipc::writer::FileWriter::try_new(w, schema)
                .map_err(|e| err(e.to_string()))?;
            for b in batches {
                writer.write(b).map_err(|e| err(e.to_string()))?;
            }
            writer.finish().map_err(|e| err(e.to_string()))?;
        }
    }
    Ok(())
}
