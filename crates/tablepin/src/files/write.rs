//! Table files written a batch at a time: Parquet, CSV (plain or gzipped,
//! comma- or tab-separated) or Arrow IPC, to a file named for its format
//! or to standard output.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use super::FileFormat;
use crate::error::{Error, Result};

/// How a table file is written: its format, whether it is gzipped (CSV
/// only), and a CSV file's field separator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputFormat {
    /// Parquet, CSV or Arrow IPC.
    pub format: FileFormat,
    /// Gzipped (CSV only).
    pub gz: bool,
    /// A CSV file's field separator.
    pub delimiter: u8,
}

impl OutputFormat {
    /// The format a file's name says (.parquet, .csv, .csv.gz, .tsv,
    /// .tsv.gz, .arrow, .feather); `None` for a name that says none, or a
    /// compression tablepin does not write (only CSV is written gzipped).
    pub fn of_path(path: &str) -> Option<Self> {
        let format = FileFormat::from_path(path).ok()?;
        let lower = path.to_ascii_lowercase();
        let plain = lower.strip_suffix(".gz");
        let gz = plain.is_some();
        if gz && format != FileFormat::Csv {
            return None;
        }
        let tsv = plain.unwrap_or(&lower).ends_with(".tsv");
        Some(Self {
            format,
            gz,
            delimiter: if tsv { b'\t' } else { b',' },
        })
    }

    /// A format by its name, for output with no file name to tell it
    /// (standard output): parquet, csv, csv.gz, tsv, tsv.gz, arrow.
    pub fn of_name(name: &str) -> Option<Self> {
        Self::of_path(&format!("x.{}", name.to_ascii_lowercase()))
    }
}

/// Whether a file named `path` can be written: its extension names a
/// format tablepin writes (.parquet, .csv, .csv.gz, .tsv, .tsv.gz, .arrow,
/// .feather).
pub fn can_write(path: &str) -> bool {
    OutputFormat::of_path(path).is_some()
}

/// The schema a Parquet export is written with: timestamps in seconds as
/// milliseconds (the same instants; Parquet cannot say "seconds").
fn parquet_schema(schema: &SchemaRef) -> SchemaRef {
    use arrow::datatypes::TimeUnit;
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| match f.data_type() {
            DataType::Timestamp(TimeUnit::Second, tz) => f
                .as_ref()
                .clone()
                .with_data_type(DataType::Timestamp(TimeUnit::Millisecond, tz.clone())),
            _ => f.as_ref().clone(),
        })
        .collect();
    Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

/// Writes batches to a file whose extension names the format.
pub fn write_table_file(path: &str, schema: &SchemaRef, batches: &[RecordBatch]) -> Result<()> {
    let mut w = TableFileWriter::create(path, schema)?;
    for b in batches {
        w.write(b)?;
    }
    w.finish()
}

/// Where the bytes go: a temporary file beside the target, or standard
/// output. A reader that closes standard output (`| head`) ends the
/// output quietly: later bytes are dropped, and [`TableFileWriter::closed`]
/// says so, so that the caller can stop reading.
enum Sink {
    File(BufWriter<File>),
    Stdout {
        out: BufWriter<std::io::Stdout>,
        closed: Arc<AtomicBool>,
    },
}

/// A write to standard output whose reader has gone: dropped.
fn unless_closed<T>(r: std::io::Result<T>, closed: &AtomicBool, dropped: T) -> std::io::Result<T> {
    match r {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            closed.store(true, Ordering::Relaxed);
            Ok(dropped)
        }
        other => other,
    }
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Sink::File(w) => w.write(buf),
            Sink::Stdout { closed, .. } if closed.load(Ordering::Relaxed) => Ok(buf.len()),
            Sink::Stdout { out, closed } => unless_closed(out.write(buf), closed, buf.len()),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Sink::File(w) => w.flush(),
            Sink::Stdout { closed, .. } if closed.load(Ordering::Relaxed) => Ok(()),
            Sink::Stdout { out, closed } => unless_closed(out.flush(), closed, ()),
        }
    }
}

/// Where a CSV export's text goes: the sink, or a gzip stream into it
/// (`.csv.gz`, `.tsv.gz`), as a commit reads them back.
enum CsvOut {
    Plain(Sink),
    Gz(Box<flate2::write::GzEncoder<Sink>>),
}

impl Write for CsvOut {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            CsvOut::Plain(w) => w.write(buf),
            CsvOut::Gz(w) => w.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            CsvOut::Plain(w) => w.flush(),
            CsvOut::Gz(w) => w.flush(),
        }
    }
}

impl CsvOut {
    /// Ends the gzip stream, if any, and gives back the sink.
    fn finish(self) -> std::io::Result<Sink> {
        match self {
            CsvOut::Plain(w) => Ok(w),
            CsvOut::Gz(w) => (*w).finish(),
        }
    }
}

/// The format's writer (boxed: they differ much in size).
enum Writer {
    Parquet(Box<parquet::arrow::ArrowWriter<Sink>>),
    Csv(Box<arrow::csv::Writer<CsvOut>>),
    Ipc(Box<arrow::ipc::writer::FileWriter<Sink>>),
}

/// A table file written a batch at a time. The rows go to a temporary file
/// beside `path`, which [`TableFileWriter::finish`] renames to `path`: a
/// write that fails or is dropped half-way leaves no file, and does not
/// touch a file that was there. Or they go to standard output
/// ([`TableFileWriter::stdout`]).
pub struct TableFileWriter {
    path: String,
    /// The temporary file (none for standard output).
    partial: Option<PathBuf>,
    schema: SchemaRef,
    writer: Option<Writer>,
    /// Set once the reader of standard output has gone.
    closed: Arc<AtomicBool>,
}

impl TableFileWriter {
    /// Starts a file whose extension names the format (.parquet, .csv,
    /// .csv.gz, .tsv, .tsv.gz, .arrow or .feather).
    pub fn create(path: &str, schema: &SchemaRef) -> Result<Self> {
        let err = output_error(path);
        let format = OutputFormat::of_path(path).ok_or_else(|| {
            err(
                "unknown file type; name it .parquet, .csv, .csv.gz, .tsv, .arrow or .feather"
                    .into(),
            )
        })?;
        let target = Path::new(path);
        let name = target
            .file_name()
            .ok_or_else(|| err("it names no file".into()))?;
        let partial = target.with_file_name(format!(
            ".{}.partial-{}",
            name.to_string_lossy(),
            std::process::id()
        ));
        let file = File::create(&partial).map_err(|e| err(e.to_string()))?;
        let mut w = Self::start(path, Sink::File(BufWriter::new(file)), schema, format);
        if let Ok(w) = &mut w {
            w.partial = Some(partial);
        } else {
            let _ = std::fs::remove_file(&partial);
        }
        w
    }

    /// Starts a table file on standard output, in `format`.
    pub fn stdout(schema: &SchemaRef, format: OutputFormat) -> Result<Self> {
        let out = BufWriter::new(std::io::stdout());
        let closed = Arc::new(AtomicBool::new(false));
        let sink = Sink::Stdout {
            out,
            closed: closed.clone(),
        };
        let mut w = Self::start("standard output", sink, schema, format)?;
        w.closed = closed;
        Ok(w)
    }

    fn start(path: &str, sink: Sink, schema: &SchemaRef, f: OutputFormat) -> Result<Self> {
        let err = output_error(path);
        let mut schema = schema.clone();
        let writer = match f.format {
            FileFormat::Parquet => {
                // Written for every reader, as pyarrow writes: Parquet has no
                // timestamp in seconds (pyarrow and pandas read one back as a
                // bare integer), so those become milliseconds, and the other
                // types without a Parquet twin (Date64) are coerced.
                schema = parquet_schema(&schema);
                let props = parquet::file::properties::WriterProperties::builder()
                    .set_coerce_types(true)
                    .build();
                parquet::arrow::ArrowWriter::try_new(sink, schema.clone(), Some(props))
                    .map(|w| Writer::Parquet(Box::new(w)))
                    .map_err(|e| err(e.to_string()))?
            }
            FileFormat::Csv => {
                let out = if f.gz {
                    CsvOut::Gz(Box::new(flate2::write::GzEncoder::new(
                        sink,
                        flate2::Compression::default(),
                    )))
                } else {
                    CsvOut::Plain(sink)
                };
                Writer::Csv(Box::new(
                    arrow::csv::WriterBuilder::new()
                        .with_header(true)
                        .with_delimiter(f.delimiter)
                        .build(out),
                ))
            }
            FileFormat::Ipc => arrow::ipc::writer::FileWriter::try_new(sink, &schema)
                .map(|w| Writer::Ipc(Box::new(w)))
                .map_err(|e| err(e.to_string()))?,
        };
        Ok(Self {
            path: path.to_string(),
            partial: None,
            schema,
            writer: Some(writer),
            closed: Arc::new(AtomicBool::new(false)),
        })
    }

    /// True once the reader of standard output has gone (`| head`): what
    /// is written from then on is dropped, so the caller can stop.
    pub fn closed(&self) -> bool {
        self.closed.load(Ordering::Relaxed)
    }

    /// Writes a batch of the schema the file was created with.
    pub fn write(&mut self, b: &RecordBatch) -> Result<()> {
        let err = output_error(&self.path);
        match &mut self.writer {
            Some(Writer::Parquet(w)) => {
                let b = if b.schema() == self.schema {
                    b.clone()
                } else {
                    crate::table::types::conform(b, &self.schema).map_err(&err)?
                };
                w.write(&b).map_err(|e| err(e.to_string()))
            }
            Some(Writer::Csv(w)) => w.write(b).map_err(|e| err(e.to_string())),
            Some(Writer::Ipc(w)) => w.write(b).map_err(|e| err(e.to_string())),
            None => Err(Error::Internal(format!(
                "'{}' was written to after it was finished",
                self.path
            ))),
        }
    }

    /// Ends the file and puts it at its path (or flushes standard output).
    pub fn finish(mut self) -> Result<()> {
        let err = output_error(&self.path);
        let sink = match self.writer.take() {
            Some(Writer::Parquet(w)) => (*w).into_inner().map_err(|e| err(e.to_string()))?,
            Some(Writer::Csv(w)) => (*w).into_inner().finish().map_err(|e| err(e.to_string()))?,
            Some(Writer::Ipc(mut w)) => {
                w.finish().map_err(|e| err(e.to_string()))?;
                w.into_inner().map_err(|e| err(e.to_string()))?
            }
            None => return Ok(()),
        };
        match (sink, &self.partial) {
            (Sink::File(buffered), Some(partial)) => {
                // Flushed here, so a failing disk is an error, not a short
                // file.
                let file = buffered.into_inner().map_err(|e| err(e.to_string()))?;
                file.sync_all().map_err(|e| err(e.to_string()))?;
                std::fs::rename(partial, &self.path).map_err(|e| err(e.to_string()))
            }
            (mut sink, _) => sink.flush().map_err(|e| err(e.to_string())),
        }
    }
}

impl Drop for TableFileWriter {
    fn drop(&mut self) {
        // Not finished (a failure or a drop half-way), or already renamed.
        if let Some(partial) = &self.partial {
            let _ = std::fs::remove_file(partial);
        }
    }
}

fn output_error(path: &str) -> impl Fn(String) -> Error + '_ {
    move |message| Error::Output {
        path: path.to_string(),
        message,
    }
}
