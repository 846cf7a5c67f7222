//! `rowhash-v1`: a stable hash of one row's values, and the content hash of a
//! table built from it.
//!
//! A row hash depends on the row's values and their logical types, never on
//! the row's position, the batch it came in, or the physical Arrow layout
//! (a `Utf8View` and a `Utf8` of the same text hash the same; a dictionary
//! hashes as its values). The encoding is versioned: any change to it is a
//! new `rowhash-v2`, and the golden vectors in the tests pin v1 so it cannot
//! change by accident.
//!
//! # The encoding (rowhash-v1)
//!
//! `row_hash = BLAKE3-keyed(K, enc(row))` with
//! `K = BLAKE3-derive-key("tablepin rowhash-v1", "")`, and
//! `enc(row) = u32le(column count) ‖ enc(v₁) ‖ … ‖ enc(vₙ)` in schema order,
//! where for each value:
//!
//! | value | bytes |
//! |---|---|
//! | null (any type, also inside lists and structs) | `00` |
//! | boolean | `01` ‖ `00`/`01` |
//! | signed integer (Int8…Int64) | `02` ‖ i64le |
//! | unsigned integer (UInt8…UInt64) | `03` ‖ u64le |
//! | float (Float16/32/64) | `04` ‖ f64 bits le; every NaN as `0x7ff8000000000000`; `-0.0` stays distinct from `0.0` |
//! | text (Utf8, LargeUtf8, Utf8View) | `05` ‖ u64le(byte length) ‖ UTF-8 bytes |
//! | binary (Binary, LargeBinary, BinaryView, FixedSizeBinary) | `06` ‖ u64le(length) ‖ bytes |
//! | Date32 | `07` ‖ i64le(days) |
//! | Date64 | `08` ‖ i64le(ms) |
//! | Timestamp(unit, tz) | `09` ‖ unit ‖ u32le(len tz) ‖ tz ‖ i64le |
//! | Time32/Time64(unit) | `0a` ‖ unit ‖ i64le |
//! | Duration(unit) | `0b` ‖ unit ‖ i64le |
//! | Decimal128/256(p, s) | `0c` ‖ u8(p) ‖ i8(s) ‖ i256le (sign-extended) |
//! | List, LargeList, FixedSizeList | `0d` ‖ u64le(n) ‖ enc(e₁) ‖ … ‖ enc(eₙ) |
//! | Struct | `0e` ‖ u32le(n) ‖ (u32le(len name) ‖ name ‖ enc(v))… |
//!
//! `unit` is one byte: `00` s, `01` ms, `02` µs, `03` ns. Dictionary arrays
//! are hashed as their decoded values. Any other type is an error naming the
//! column.
//!
//! The content hash of a table is the sum modulo 2^256 of its row hashes
//! ([`ContentHash`]): order-free, duplicates count, O(changed rows) updates.

#![warn(missing_docs)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

use std::sync::OnceLock;

use arrow::array::{
    Array, ArrayRef, AsArray, BinaryArray, BinaryViewArray, BooleanArray, Decimal128Array,
    Decimal256Array, FixedSizeBinaryArray, FixedSizeListArray, Float64Array, Int64Array,
    LargeBinaryArray, LargeListArray, LargeStringArray, ListArray, StringArray, StringViewArray,
    StructArray, UInt64Array,
};
use arrow::compute::cast;
use arrow::datatypes::{DataType, TimeUnit};
use arrow::record_batch::RecordBatch;
pub use tablepin_format::{ContentHash, RowHash};

/// The name of this encoding, recorded beside every content hash.
pub const ROWHASH_VERSION: &str = "rowhash-v1";

/// A column that rowhash-v1 cannot encode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RowHashError {
    /// The column's type has no rowhash-v1 encoding.
    #[error("column '{column}' has type {data_type}, which rowhash-v1 cannot hash; cast it to a supported type")]
    UnsupportedType {
        /// The column.
        column: String,
        /// Its type.
        data_type: String,
    },
    /// A hashing thread stopped without an answer.
    #[error("a row-hashing thread failed")]
    ThreadFailed,
    /// Casting a column to its canonical form failed.
    #[error("column '{column}': {message}")]
    Cast {
        /// The column.
        column: String,
        /// Arrow's message.
        message: String,
    },
}

fn key() -> &'static [u8; 32] {
    static KEY: OnceLock<[u8; 32]> = OnceLock::new();
    KEY.get_or_init(|| blake3::derive_key("tablepin rowhash-v1", b""))
}

fn unit_byte(u: &TimeUnit) -> u8 {
    match u {
        TimeUnit::Second => 0,
        TimeUnit::Millisecond => 1,
        TimeUnit::Microsecond => 2,
        TimeUnit::Nanosecond => 3,
    }
}

enum ListKind {
    List(ListArray),
    Large(LargeListArray),
    Fixed(FixedSizeListArray),
}

impl ListKind {
    fn range(&self, i: usize) -> (usize, usize) {
        match self {
            ListKind::List(a) => {
                let o = a.value_offsets();
                (o[i] as usize, o[i + 1] as usize)
            }
            ListKind::Large(a) => {
                let o = a.value_offsets();
                (o[i] as usize, o[i + 1] as usize)
            }
            ListKind::Fixed(a) => {
                let n = a.value_length() as usize;
                let start = (a.offset() + i) * n;
                (start, start + n)
            }
        }
    }
}

/// One column prepared for encoding.
enum Enc {
    Null,
    Bool(BooleanArray),
    Int(Int64Array),
    UInt(UInt64Array),
    Float(Float64Array),
    Utf8(StringArray),
    LargeUtf8(LargeStringArray),
    Utf8View(StringViewArray),
    Bin(BinaryArray),
    LargeBin(LargeBinaryArray),
    BinView(BinaryViewArray),
    FixedBin(FixedSizeBinaryArray),
    /// Tag, prefix bytes (unit, tz), values.
    Temporal(u8, Vec<u8>, Int64Array),
    Dec128(u8, i8, Decimal128Array),
    Dec256(u8, i8, Decimal256Array),
    List(ArrayRef, ListKind, Box<Enc>),
    Struct(StructArray, Vec<Vec<u8>>, Vec<Enc>),
}

fn cast_to(column: &str, a: &ArrayRef, t: &DataType) -> Result<ArrayRef, RowHashError> {
    cast(a, t).map_err(|e| RowHashError::Cast {
        column: column.to_string(),
        message: e.to_string(),
    })
}

fn unsupported(column: &str, t: &DataType) -> RowHashError {
    RowHashError::UnsupportedType {
        column: column.to_string(),
        data_type: t.to_string(),
    }
}

impl Enc {
    fn new(column: &str, a: &ArrayRef) -> Result<Enc, RowHashError> {
        use DataType as D;
        let t = a.data_type();
        Ok(match t {
            D::Null => Enc::Null,
            D::Boolean => Enc::Bool(a.as_boolean().clone()),
            D::Int8 | D::Int16 | D::Int32 | D::Int64 => {
                Enc::Int(cast_to(column, a, &D::Int64)?.as_primitive().clone())
            }
            D::UInt8 | D::UInt16 | D::UInt32 | D::UInt64 => {
                Enc::UInt(cast_to(column, a, &D::UInt64)?.as_primitive().clone())
            }
            D::Float16 | D::Float32 | D::Float64 => {
                Enc::Float(cast_to(column, a, &D::Float64)?.as_primitive().clone())
            }
            D::Utf8 => Enc::Utf8(a.as_string::<i32>().clone()),
            D::LargeUtf8 => Enc::LargeUtf8(a.as_string::<i64>().clone()),
            D::Utf8View => Enc::Utf8View(a.as_string_view().clone()),
            D::Binary => Enc::Bin(a.as_binary::<i32>().clone()),
            D::LargeBinary => Enc::LargeBin(a.as_binary::<i64>().clone()),
            D::BinaryView => Enc::BinView(a.as_binary_view().clone()),
            D::FixedSizeBinary(_) => Enc::FixedBin(a.as_fixed_size_binary().clone()),
            D::Date32 => Enc::Temporal(0x07, vec![], cast_int64(column, a)?),
            D::Date64 => Enc::Temporal(0x08, vec![], cast_int64(column, a)?),
            D::Timestamp(u, tz) => {
                let mut p = vec![unit_byte(u)];
                let tz = tz.as_deref().unwrap_or("");
                p.extend_from_slice(&(tz.len() as u32).to_le_bytes());
                p.extend_from_slice(tz.as_bytes());
                Enc::Temporal(0x09, p, cast_int64(column, a)?)
            }
            D::Time32(u) | D::Time64(u) => {
                Enc::Temporal(0x0a, vec![unit_byte(u)], cast_int64(column, a)?)
            }
            D::Duration(u) => Enc::Temporal(0x0b, vec![unit_byte(u)], cast_int64(column, a)?),
            D::Decimal128(p, s) => Enc::Dec128(*p, *s, a.as_primitive().clone()),
            D::Decimal256(p, s) => Enc::Dec256(*p, *s, a.as_primitive().clone()),
            D::List(_) => {
                let l = a.as_list::<i32>().clone();
                let child = Enc::new(column, l.values())?;
                Enc::List(a.clone(), ListKind::List(l), Box::new(child))
            }
            D::LargeList(_) => {
                let l = a.as_list::<i64>().clone();
                let child = Enc::new(column, l.values())?;
                Enc::List(a.clone(), ListKind::Large(l), Box::new(child))
            }
            D::FixedSizeList(_, _) => {
                let l = a.as_fixed_size_list().clone();
                let child = Enc::new(column, l.values())?;
                Enc::List(a.clone(), ListKind::Fixed(l), Box::new(child))
            }
            D::Struct(fields) => {
                let s = a.as_struct().clone();
                let names = fields
                    .iter()
                    .map(|f| f.name().as_bytes().to_vec())
                    .collect();
                let children = s
                    .columns()
                    .iter()
                    .map(|c| Enc::new(column, c))
                    .collect::<Result<Vec<_>, _>>()?;
                Enc::Struct(s, names, children)
            }
            D::Dictionary(_, value) => {
                let decoded = cast_to(column, a, value)?;
                Enc::new(column, &decoded)?
            }
            other => return Err(unsupported(column, other)),
        })
    }

    fn write(&self, i: usize, buf: &mut Vec<u8>) {
        macro_rules! nullable {
            ($a:expr, $body:expr) => {
                if $a.is_null(i) {
                    buf.push(0);
                } else {
                    $body
                }
            };
        }
        fn bytes(buf: &mut Vec<u8>, tag: u8, b: &[u8]) {
            buf.push(tag);
            buf.extend_from_slice(&(b.len() as u64).to_le_bytes());
            buf.extend_from_slice(b);
        }
        match self {
            Enc::Null => buf.push(0),
            Enc::Bool(a) => nullable!(a, {
                buf.push(0x01);
                buf.push(u8::from(a.value(i)));
            }),
            Enc::Int(a) => nullable!(a, {
                buf.push(0x02);
                buf.extend_from_slice(&a.value(i).to_le_bytes());
            }),
            Enc::UInt(a) => nullable!(a, {
                buf.push(0x03);
                buf.extend_from_slice(&a.value(i).to_le_bytes());
            }),
            Enc::Float(a) => nullable!(a, {
                buf.push(0x04);
                let v = a.value(i);
                let bits = if v.is_nan() {
                    0x7ff8_0000_0000_0000u64
                } else {
                    v.to_bits()
                };
                buf.extend_from_slice(&bits.to_le_bytes());
            }),
            Enc::Utf8(a) => nullable!(a, bytes(buf, 0x05, a.value(i).as_bytes())),
            Enc::LargeUtf8(a) => nullable!(a, bytes(buf, 0x05, a.value(i).as_bytes())),
            Enc::Utf8View(a) => nullable!(a, bytes(buf, 0x05, a.value(i).as_bytes())),
            Enc::Bin(a) => nullable!(a, bytes(buf, 0x06, a.value(i))),
            Enc::LargeBin(a) => nullable!(a, bytes(buf, 0x06, a.value(i))),
            Enc::BinView(a) => nullable!(a, bytes(buf, 0x06, a.value(i))),
            Enc::FixedBin(a) => nullable!(a, bytes(buf, 0x06, a.value(i))),
            Enc::Temporal(tag, prefix, a) => nullable!(a, {
                buf.push(*tag);
                buf.extend_from_slice(prefix);
                buf.extend_from_slice(&a.value(i).to_le_bytes());
            }),
            Enc::Dec128(p, s, a) => nullable!(a, {
                buf.push(0x0c);
                buf.push(*p);
                buf.push(*s as u8);
                let v = a.value(i);
                buf.extend_from_slice(&v.to_le_bytes());
                let ext = if v < 0 { [0xffu8; 16] } else { [0u8; 16] };
                buf.extend_from_slice(&ext);
            }),
            Enc::Dec256(p, s, a) => nullable!(a, {
                buf.push(0x0c);
                buf.push(*p);
                buf.push(*s as u8);
                buf.extend_from_slice(&a.value(i).to_le_bytes());
            }),
            Enc::List(arr, kind, child) => nullable!(arr, {
                let (start, end) = kind.range(i);
                buf.push(0x0d);
                buf.extend_from_slice(&((end - start) as u64).to_le_bytes());
                for j in start..end {
                    child.write(j, buf);
                }
            }),
            Enc::Struct(s, names, children) => nullable!(s, {
                buf.push(0x0e);
                buf.extend_from_slice(&(children.len() as u32).to_le_bytes());
                for (name, c) in names.iter().zip(children) {
                    buf.extend_from_slice(&(name.len() as u32).to_le_bytes());
                    buf.extend_from_slice(name);
                    c.write(i, buf);
                }
            }),
        }
    }
}

fn cast_int64(column: &str, a: &ArrayRef) -> Result<Int64Array, RowHashError> {
    // Temporal types share their physical i32/i64 with plain integers; a
    // reinterpreting cast to Int64 keeps the stored value.
    let physical = match a.data_type() {
        DataType::Date32 | DataType::Time32(_) => cast_to(column, a, &DataType::Int32)?,
        _ => a.clone(),
    };
    Ok(cast_to(column, &physical, &DataType::Int64)?
        .as_primitive()
        .clone())
}

/// The rows of a set of columns, prepared for hashing one at a time.
pub struct RowEncoder {
    cols: Vec<Enc>,
    rows: usize,
}

impl RowEncoder {
    /// Prepares the columns of a batch.
    pub fn new(batch: &RecordBatch) -> Result<Self, RowHashError> {
        let schema = batch.schema();
        let cols = schema
            .fields()
            .iter()
            .zip(batch.columns())
            .map(|(f, c)| Enc::new(f.name(), c))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            cols,
            rows: batch.num_rows(),
        })
    }

    /// Appends the rowhash-v1 encoding of row `i` to `buf`.
    pub fn encode(&self, i: usize, buf: &mut Vec<u8>) {
        buf.extend_from_slice(&(self.cols.len() as u32).to_le_bytes());
        for c in &self.cols {
            c.write(i, buf);
        }
    }

    /// The hash of row `i`.
    pub fn hash(&self, i: usize, buf: &mut Vec<u8>) -> RowHash {
        buf.clear();
        self.encode(i, buf);
        *blake3::keyed_hash(key(), buf).as_bytes()
    }

    fn hash_range(&self, start: usize, end: usize, out: &mut Vec<RowHash>) {
        let mut buf = Vec::with_capacity(256);
        for i in start..end {
            out.push(self.hash(i, &mut buf));
        }
    }
}

/// Rows per work item when hashing spreads over threads.
const PARALLEL_MIN_ROWS: usize = 4 * 1024;

/// The rowhash-v1 hash of every row of a batch, in row order. A batch of
/// more than `PARALLEL_MIN_ROWS` rows is hashed in pieces of that many on
/// the process's shared worker threads (`tablepin_format::try_map`).
pub fn hash_rows(batch: &RecordBatch) -> Result<Vec<RowHash>, RowHashError> {
    let enc = RowEncoder::new(batch)?;
    let n = enc.rows;
    let threads = tablepin_format::threads();
    if threads == 1 || n <= PARALLEL_MIN_ROWS {
        let mut out = Vec::with_capacity(n);
        enc.hash_range(0, n, &mut out);
        return Ok(out);
    }
    let pieces: Vec<usize> = (0..n).step_by(PARALLEL_MIN_ROWS).collect();
    let parts = tablepin_format::try_map(threads, &pieces, |start| {
        let end = (start + PARALLEL_MIN_ROWS).min(n);
        let mut out = Vec::with_capacity(end - start);
        enc.hash_range(*start, end, &mut out);
        Ok::<_, RowHashError>(out)
    })
    .ok_or(RowHashError::ThreadFailed)??;
    Ok(parts.into_iter().flatten().collect())
}

/// The content hash of a sequence of batches.
pub fn content_hash<'a>(
    batches: impl IntoIterator<Item = &'a RecordBatch>,
) -> Result<ContentHash, RowHashError> {
    let mut h = ContentHash::EMPTY;
    for b in batches {
        for r in hash_rows(b)? {
            h.add(&r);
        }
    }
    Ok(h)
}

#[cfg(test)]
mod tests;
