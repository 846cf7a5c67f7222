//! Loading Online Retail II: the CSV (optionally gzipped) or the UCI
//! workbook (both sheets, in order), checked against the published counts.
//!
//! The data's path comes from the caller (`--data`), else the
//! `TABLEPIN_LAB_DATA` variable, else a file in the user's cache folder;
//! when none exists it is downloaded from UCI with `curl` into that folder.
//! A wrong file (missing column, wrong row count, bad date) is an error
//! naming the file and what is wrong.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::OnceLock;

use arrow::array::{Array, ArrayRef, AsArray, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Float64Type, Int64Type, Schema};

use crate::LabError;

/// Rows the data set has.
pub const ROWS: usize = 1_067_371;
/// The UCI download.
pub const UCI_URL: &str = "https://archive.ics.uci.edu/static/public/502/online+retail+ii.zip";
/// 2009-12-01T00:00:00Z, the start of week 0.
pub const EPOCH: i64 = 1_259_625_600;

/// Every invoice line, in file order; a line's id is its index.
#[derive(Debug, Clone)]
pub struct Lines {
    pub invoice: StringArray,
    pub stock: StringArray,
    pub description: StringArray,
    pub quantity: Int64Array,
    /// InvoiceDate, seconds since the epoch (UTC).
    pub time: Vec<i64>,
    pub price: Float64Array,
    pub customer: Float64Array,
    pub country: StringArray,
    /// Each line's rank in the reorder's sort key, computed on first use
    /// (see `experiment::sort_lines`).
    pub key_rank: OnceLock<Vec<u32>>,
}

impl Lines {
    pub fn len(&self) -> usize {
        self.time.len()
    }

    pub fn is_empty(&self) -> bool {
        self.time.is_empty()
    }

    /// True for a cancellation (Invoice starts with `C`).
    pub fn is_cancel(&self, i: usize) -> bool {
        self.invoice.value(i).starts_with('C')
    }
}

/// What the lab takes from its environment, gathered by its caller (the
/// command line reads the variables; the library reads none).
#[derive(Debug, Clone, Default)]
pub struct Env {
    /// `TABLEPIN_LAB_DATA`: the data file when none is given.
    pub lab_data: Option<String>,
    /// `XDG_CACHE_HOME`.
    pub xdg_cache_home: Option<PathBuf>,
    /// `HOME`.
    pub home: Option<PathBuf>,
    /// `PATH`, where `--dvc` finds the `dvc` command.
    pub path: Option<std::ffi::OsString>,
    /// The system's temporary folder (`std::env::temp_dir`): the cache's
    /// home when neither of the others is set.
    pub temp_dir: PathBuf,
}

/// Where the data is: the argument, the environment, or the cache (which
/// may not exist yet).
pub fn locate(arg: Option<&str>, env: &Env) -> PathBuf {
    if let Some(a) = arg {
        return PathBuf::from(a);
    }
    if let Some(v) = env.lab_data.as_deref().filter(|v| !v.is_empty()) {
        return PathBuf::from(v);
    }
    cache_dir(env).join("online_retail_II.xlsx")
}

/// The lab's download cache: `$XDG_CACHE_HOME/tablepin`, else
/// `$HOME/.cache/tablepin`, else under the system's temporary folder.
pub fn cache_dir(env: &Env) -> PathBuf {
    (env.xdg_cache_home.clone())
        .or_else(|| env.home.as_ref().map(|h| h.join(".cache")))
        .unwrap_or_else(|| env.temp_dir.clone())
        .join("tablepin")
}

/// Downloads the UCI zip with curl and extracts the workbook.
pub fn download(to: &Path) -> Result<(), LabError> {
    download_from(UCI_URL, to)
}

/// Downloads a zip from `url` with curl and extracts its workbook to `to`.
fn download_from(url: &str, to: &Path) -> Result<(), LabError> {
    let err = |m: String| LabError::Data {
        path: to.display().to_string(),
        message: m,
    };
    let dir = to.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| err(e.to_string()))?;
    let zip_path = dir.join("online_retail_ii.zip");
    eprintln!("Downloading Online Retail II from {url} ...");
    let status = std::process::Command::new("curl")
        .args(["-fsSL", "-o"])
        .arg(&zip_path)
        .arg(url)
        .status()
        .map_err(|e| {
            err(format!(
                "cannot run curl to download the data ({e}); pass --data PATH"
            ))
        })?;
    if !status.success() {
        return Err(err(format!(
            "the download from {url} failed ({status}); pass --data PATH to a local copy"
        )));
    }
    let file = std::fs::File::open(&zip_path).map_err(|e| err(e.to_string()))?;
    let mut zip = zip::ZipArchive::new(file).map_err(|e| err(format!("not a zip file: {e}")))?;
    let name = (0..zip.len())
        .filter_map(|i| zip.by_index(i).ok().map(|f| f.name().to_string()))
        .find(|n| n.ends_with(".xlsx"))
        .ok_or_else(|| err("the zip holds no .xlsx workbook".into()))?;
    let mut entry = zip.by_name(&name).map_err(|e| err(e.to_string()))?;
    let mut bytes = Vec::new();
    entry
        .read_to_end(&mut bytes)
        .map_err(|e| err(e.to_string()))?;
    std::fs::write(to, bytes).map_err(|e| err(e.to_string()))?;
    Ok(())
}

/// Loads the data from a path (.csv, .csv.gz or .xlsx), downloading it
/// first when it is missing and lies in `cache` (the download cache), and
/// checks that it is the whole of Online Retail II.
pub fn load(path: &Path, cache: Option<&Path>) -> Result<Lines, LabError> {
    let lines = load_sample(path, cache)?;
    check(path, &lines)?;
    Ok(lines)
}

/// Loads a file in Online Retail II's format that may hold any of its
/// lines, or lines of its form (a sample, for trying the lab on less):
/// as [`load`], without checking that every line is there.
pub fn load_sample(path: &Path, cache: Option<&Path>) -> Result<Lines, LabError> {
    if !path.exists() {
        if cache.is_some_and(|c| path.starts_with(c)) {
            download(path)?;
        } else {
            return Err(LabError::Data {
                path: path.display().to_string(),
                message: "no such file; pass --data PATH or set TABLEPIN_LAB_DATA".into(),
            });
        }
    }
    let name = path.to_string_lossy().to_ascii_lowercase();
    if name.ends_with(".xlsx") {
        load_xlsx(path)
    } else {
        load_csv(path)
    }
}

fn data_err(path: &Path, message: impl Into<String>) -> LabError {
    LabError::Data {
        path: path.display().to_string(),
        message: message.into(),
    }
}

const HEADER: [&str; 8] = [
    "Invoice",
    "StockCode",
    "Description",
    "Quantity",
    "InvoiceDate",
    "Price",
    "Customer ID",
    "Country",
];

/// Parses `YYYY-MM-DD HH:MM:SS` as UTC seconds.
pub fn parse_time(s: &str) -> Option<i64> {
    chrono::NaiveDateTime::parse_from_str(s.trim(), "%Y-%m-%d %H:%M:%S")
        .ok()
        .map(|t| t.and_utc().timestamp())
}

fn load_csv(path: &Path) -> Result<Lines, LabError> {
    let file = std::fs::File::open(path).map_err(|e| data_err(path, e.to_string()))?;
    let mut raw = Vec::with_capacity(100 << 20);
    if path.to_string_lossy().to_ascii_lowercase().ends_with(".gz") {
        flate2::read::MultiGzDecoder::new(std::io::BufReader::new(file))
            .read_to_end(&mut raw)
            .map_err(|e| data_err(path, format!("not a valid gzip file: {e}")))?;
    } else {
        std::io::BufReader::new(file)
            .read_to_end(&mut raw)
            .map_err(|e| data_err(path, e.to_string()))?;
    }
    let header_end = raw.iter().position(|b| *b == b'\n').unwrap_or(raw.len());
    let header = String::from_utf8_lossy(&raw[..header_end]);
    let cols: Vec<&str> = header.trim_end_matches('\r').split(',').collect();
    if cols != HEADER {
        let missing: Vec<&str> = HEADER
            .iter()
            .filter(|h| !cols.contains(h))
            .copied()
            .collect();
        return Err(data_err(
            path,
            format!(
                "the header is not Online Retail II's (missing: {}); expected {}",
                if missing.is_empty() {
                    "none, but the order differs".to_string()
                } else {
                    missing.join(", ")
                },
                HEADER.join(",")
            ),
        ));
    }
    let schema = Arc::new(Schema::new(vec![
        Field::new("Invoice", DataType::Utf8, true),
        Field::new("StockCode", DataType::Utf8, true),
        Field::new("Description", DataType::Utf8, true),
        Field::new("Quantity", DataType::Int64, true),
        Field::new("InvoiceDate", DataType::Utf8, true),
        Field::new("Price", DataType::Float64, true),
        Field::new("Customer ID", DataType::Float64, true),
        Field::new("Country", DataType::Utf8, true),
    ]));
    let reader = arrow::csv::ReaderBuilder::new(schema.clone())
        .with_header(true)
        .with_batch_size(256 * 1024)
        .build(std::io::Cursor::new(raw))
        .map_err(|e| data_err(path, e.to_string()))?;
    let batches: Vec<RecordBatch> = reader
        .collect::<Result<_, _>>()
        .map_err(|e| data_err(path, format!("not valid CSV: {e}")))?;
    let all = arrow::compute::concat_batches(&schema, &batches)
        .map_err(|e| data_err(path, e.to_string()))?;
    let dates = all.column(4).as_string::<i32>();
    let mut time = Vec::with_capacity(all.num_rows());
    for i in 0..all.num_rows() {
        let t = if dates.is_null(i) {
            None
        } else {
            parse_time(dates.value(i))
        };
        match t {
            Some(t) => time.push(t),
            None => {
                return Err(data_err(
                    path,
                    format!(
                        "line {}: InvoiceDate '{}' is not a date (YYYY-MM-DD HH:MM:SS)",
                        i + 2,
                        if dates.is_null(i) { "" } else { dates.value(i) }
                    ),
                ))
            }
        }
    }
    Ok(Lines {
        invoice: all.column(0).as_string::<i32>().clone(),
        stock: all.column(1).as_string::<i32>().clone(),
        description: all.column(2).as_string::<i32>().clone(),
        quantity: all.column(3).as_primitive::<Int64Type>().clone(),
        time,
        price: all.column(5).as_primitive::<Float64Type>().clone(),
        customer: all.column(6).as_primitive::<Float64Type>().clone(),
        country: all.column(7).as_string::<i32>().clone(),
        key_rank: OnceLock::new(),
    })
}

fn load_xlsx(path: &Path) -> Result<Lines, LabError> {
    use calamine::{open_workbook_auto, Data, Reader};
    let mut wb = open_workbook_auto(path)
        .map_err(|e| data_err(path, format!("not a readable workbook: {e}")))?;
    let mut invoice = Vec::new();
    let mut stock = Vec::new();
    let mut description: Vec<Option<String>> = Vec::new();
    let mut quantity = Vec::new();
    let mut time = Vec::new();
    let mut price = Vec::new();
    let mut customer: Vec<Option<f64>> = Vec::new();
    let mut country: Vec<Option<String>> = Vec::new();
    let text = |d: &Data| -> Option<String> {
        match d {
            Data::Empty => None,
            Data::String(s) => Some(s.clone()),
            Data::Float(f) if f.fract() == 0.0 => Some(format!("{}", *f as i64)),
            Data::Float(f) => Some(f.to_string()),
            Data::Int(i) => Some(i.to_string()),
            other => Some(other.to_string()),
        }
    };
    let num = |d: &Data| -> Option<f64> {
        match d {
            Data::Float(f) => Some(*f),
            Data::Int(i) => Some(*i as f64),
            Data::String(s) => s.trim().parse().ok(),
            _ => None,
        }
    };
    for sheet in ["Year 2009-2010", "Year 2010-2011"] {
        let range = wb
            .worksheet_range(sheet)
            .map_err(|e| data_err(path, format!("no sheet '{sheet}': {e}")))?;
        let mut rows = range.rows();
        let header: Vec<String> = rows
            .next()
            .map(|r| r.iter().map(|c| c.to_string()).collect())
            .unwrap_or_default();
        if header.iter().map(String::as_str).collect::<Vec<_>>() != HEADER {
            return Err(data_err(
                path,
                format!(
                    "sheet '{sheet}' does not have the columns {}",
                    HEADER.join(",")
                ),
            ));
        }
        for (r, row) in rows.enumerate() {
            let cell = |i: usize| row.get(i).cloned().unwrap_or(Data::Empty);
            invoice.push(text(&cell(0)).unwrap_or_default());
            stock.push(text(&cell(1)).unwrap_or_default());
            description.push(text(&cell(2)));
            quantity.push(num(&cell(3)).map(|q| q as i64).unwrap_or(0));
            let t = match cell(4) {
                // Excel serial days since 1899-12-30.
                Data::DateTime(d) => Some(((d.as_f64() - 25_569.0) * 86_400.0).round() as i64),
                Data::DateTimeIso(s) => parse_time(&s.replace('T', " ")),
                Data::String(s) => parse_time(&s),
                _ => None,
            };
            time.push(t.ok_or_else(|| {
                data_err(
                    path,
                    format!("sheet '{sheet}' row {}: InvoiceDate is not a date", r + 2),
                )
            })?);
            price.push(num(&cell(5)).unwrap_or(0.0));
            customer.push(num(&cell(6)));
            country.push(text(&cell(7)));
        }
    }
    // Minute precision, as in the CSV.
    for t in &mut time {
        *t -= t.rem_euclid(60);
    }
    Ok(Lines {
        invoice: StringArray::from(invoice),
        stock: StringArray::from(stock),
        description: StringArray::from(description),
        quantity: Int64Array::from(quantity),
        time,
        price: Float64Array::from(price),
        customer: Float64Array::from(customer),
        country: StringArray::from(country),
        key_rank: OnceLock::new(),
    })
}

fn check(path: &Path, l: &Lines) -> Result<(), LabError> {
    if l.len() != ROWS {
        return Err(data_err(
            path,
            format!("it has {} rows; Online Retail II has {ROWS}", l.len()),
        ));
    }
    let cancels = (0..l.len()).filter(|i| l.is_cancel(*i)).count();
    if cancels != 19_494 {
        return Err(data_err(
            path,
            format!("it has {cancels} cancellations; Online Retail II has 19,494"),
        ));
    }
    Ok(())
}

/// The columns of the lines, for callers that want Arrow arrays.
pub fn columns(l: &Lines) -> Vec<ArrayRef> {
    vec![
        Arc::new(l.invoice.clone()),
        Arc::new(l.stock.clone()),
        Arc::new(l.description.clone()),
        Arc::new(l.quantity.clone()),
        Arc::new(l.price.clone()),
        Arc::new(l.customer.clone()),
        Arc::new(l.country.clone()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::Array;
    use rust_xlsxwriter::{ExcelDateTime, Format, Workbook};

    type Line<'a> = (
        &'a str,
        &'a str,
        Option<&'a str>,
        i64,
        &'a str,
        f64,
        Option<f64>,
        &'a str,
    );

    /// A few lines as UCI ships them, per sheet: numeric invoices and stock
    /// codes (numbers in the workbook), a cancellation, a missing
    /// description and customer.
    const SHEETS: [(&str, &[Line<'static>]); 2] = [
        (
            "Year 2009-2010",
            &[
                (
                    "489434",
                    "85048",
                    Some("15CM CHRISTMAS GLASS BALL 20 LIGHTS"),
                    12,
                    "2009-12-01 07:45:00",
                    6.95,
                    Some(13085.0),
                    "United Kingdom",
                ),
                (
                    "C489449",
                    "22087",
                    Some("PAPER BUNTING WHITE LACE"),
                    -12,
                    "2009-12-01 10:33:00",
                    2.95,
                    Some(16321.0),
                    "Australia",
                ),
                (
                    "489464",
                    "21733",
                    None,
                    -96,
                    "2009-12-01 10:52:00",
                    0.0,
                    None,
                    "United Kingdom",
                ),
            ],
        ),
        (
            "Year 2010-2011",
            &[(
                "536365",
                "85123A",
                Some("WHITE HANGING HEART T-LIGHT HOLDER"),
                6,
                "2010-12-01 08:26:00",
                2.55,
                Some(17850.0),
                "United Kingdom",
            )],
        ),
    ];

    fn write_csv(path: &Path) {
        let mut s = HEADER.join(",") + "\n";
        for (_, lines) in SHEETS {
            for (inv, stock, desc, q, date, price, cust, country) in lines {
                let cust = cust.map(|c| format!("{c:.1}")).unwrap_or_default();
                s += &format!(
                    "{inv},{stock},{},{q},{date},{price},{cust},{country}\n",
                    desc.unwrap_or("")
                );
            }
        }
        std::fs::write(path, s).unwrap();
    }

    /// The workbook, with `bad_date` written as text in the first line and
    /// only the first `sheets` sheets.
    fn write_xlsx(path: &Path, sheets: usize, bad_date: bool) {
        let mut wb = Workbook::new();
        let date = Format::new().set_num_format("yyyy-mm-dd hh:mm:ss");
        for (name, lines) in SHEETS.iter().take(sheets) {
            let ws = wb.add_worksheet();
            ws.set_name(*name).unwrap();
            for (c, h) in HEADER.iter().enumerate() {
                ws.write_string(0, c as u16, *h).unwrap();
            }
            for (r, (inv, stock, desc, q, when, price, cust, country)) in lines.iter().enumerate() {
                let r = r as u32 + 1;
                // Text that is a number is a number in UCI's workbook.
                for (c, v) in [(0u16, inv), (1, stock)] {
                    match v.parse::<f64>() {
                        Ok(n) => ws.write_number(r, c, n).unwrap(),
                        Err(_) => ws.write_string(r, c, *v).unwrap(),
                    };
                }
                if let Some(d) = desc {
                    ws.write_string(r, 2, *d).unwrap();
                }
                ws.write_number(r, 3, *q as f64).unwrap();
                if bad_date && r == 1 {
                    ws.write_string(r, 4, "yesterday").unwrap();
                } else {
                    let dt = ExcelDateTime::parse_from_str(when).unwrap();
                    ws.write_datetime_with_format(r, 4, &dt, &date).unwrap();
                }
                ws.write_number(r, 5, *price).unwrap();
                if let Some(c) = cust {
                    ws.write_number(r, 6, *c).unwrap();
                }
                ws.write_string(r, 7, *country).unwrap();
            }
        }
        wb.save(path).unwrap();
    }

    #[test]
    fn the_data_is_the_argument_then_the_environment_then_the_cache() {
        let env = Env {
            lab_data: Some("/d/x.csv.gz".into()),
            home: Some("/h".into()),
            ..Env::default()
        };
        assert_eq!(locate(Some("a.csv"), &env), PathBuf::from("a.csv"));
        assert_eq!(locate(None, &env), PathBuf::from("/d/x.csv.gz"));
        let env = Env {
            lab_data: Some(String::new()),
            ..env
        };
        let cached = PathBuf::from("/h/.cache/tablepin/online_retail_II.xlsx");
        assert_eq!(locate(None, &env), cached);
        let env = Env {
            xdg_cache_home: Some("/x".into()),
            ..env
        };
        assert_eq!(cache_dir(&env), PathBuf::from("/x/tablepin"));
    }

    #[test]
    fn the_workbook_reads_as_the_csv_does() {
        let dir = tempfile::tempdir().unwrap();
        let (csv, xlsx) = (dir.path().join("d.csv"), dir.path().join("d.xlsx"));
        write_csv(&csv);
        write_xlsx(&xlsx, 2, false);
        let (a, b) = (load_csv(&csv).unwrap(), load_xlsx(&xlsx).unwrap());
        assert_eq!(a.len(), 4);
        assert_eq!(a.invoice, b.invoice);
        assert_eq!(a.stock, b.stock);
        assert_eq!(a.description, b.description);
        assert_eq!(a.quantity, b.quantity);
        assert_eq!(a.time, b.time);
        assert_eq!(a.price, b.price);
        assert_eq!(a.customer, b.customer);
        assert_eq!(a.country, b.country);
        // Spot checks against the source lines.
        assert_eq!(b.invoice.value(1), "C489449");
        assert_eq!(b.stock.value(0), "85048");
        assert!(b.description.is_null(2) && b.customer.is_null(2));
        assert_eq!(Some(b.time[3]), parse_time("2010-12-01 08:26:00"));
    }

    /// The download path end to end, through curl, from a local zip laid
    /// out as UCI's (a folder entry, then the workbook, deflated).
    #[test]
    fn the_download_extracts_the_workbook_from_the_zip() {
        use std::io::Write;
        use zip::write::SimpleFileOptions;
        let dir = tempfile::tempdir().unwrap();
        let (xlsx, csv) = (dir.path().join("w.xlsx"), dir.path().join("d.csv"));
        write_xlsx(&xlsx, 2, false);
        write_csv(&csv);
        let zip_path = dir.path().join("online+retail+ii.zip");
        let mut z = zip::ZipWriter::new(std::fs::File::create(&zip_path).unwrap());
        let opts =
            SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
        z.start_file("README.txt", opts).unwrap();
        z.write_all(b"not the workbook").unwrap();
        z.start_file("online_retail_II.xlsx", opts).unwrap();
        z.write_all(&std::fs::read(&xlsx).unwrap()).unwrap();
        z.finish().unwrap();
        let to = dir.path().join("cache").join("online_retail_II.xlsx");
        download_from(&format!("file://{}", zip_path.display()), &to).unwrap();
        assert_eq!(std::fs::read(&to).unwrap(), std::fs::read(&xlsx).unwrap());
        assert_eq!(load_xlsx(&to).unwrap().time, load_csv(&csv).unwrap().time);

        // A failed download and a zip without a workbook are clear errors.
        let url = format!("file://{}/none.zip", dir.path().display());
        let e = download_from(&url, &to).unwrap_err().to_string();
        assert!(
            e.contains("the download from") && e.contains("failed"),
            "{e}"
        );
        let empty = dir.path().join("empty.zip");
        let mut z = zip::ZipWriter::new(std::fs::File::create(&empty).unwrap());
        z.start_file("README.txt", opts).unwrap();
        z.finish().unwrap();
        let e = download_from(&format!("file://{}", empty.display()), &to)
            .unwrap_err()
            .to_string();
        assert!(e.contains("the zip holds no .xlsx workbook"), "{e}");
    }

    #[test]
    fn a_wrong_workbook_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let one = dir.path().join("one.xlsx");
        write_xlsx(&one, 1, false);
        let e = load_xlsx(&one).unwrap_err().to_string();
        assert!(e.contains("no sheet 'Year 2010-2011'"), "{e}");
        let bad = dir.path().join("bad.xlsx");
        write_xlsx(&bad, 2, true);
        let e = load_xlsx(&bad).unwrap_err().to_string();
        assert!(
            e.contains("sheet 'Year 2009-2010' row 2: InvoiceDate is not a date"),
            "{e}"
        );
        // A whole load also checks the row count.
        let e = load(&bad.with_file_name("missing.xlsx"), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no such file"), "{e}");
        let csv = dir.path().join("d.csv");
        write_csv(&csv);
        let e = load(&csv, None).unwrap_err().to_string();
        assert!(
            e.contains("d.csv") && e.contains("it has 4 rows; Online Retail II has 1067371"),
            "{e}"
        );
    }
}
