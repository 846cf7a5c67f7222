//! How an input column's type fits the table's: the same logical type in
//! another physical form (text as `Utf8`, `LargeUtf8` or `Utf8View`; a
//! dictionary and its values; a timestamp in another unit), a narrower or
//! wider number, a cast on request, or a change of type.
//!
//! Decisions only: no I/O. [`conform`] applies them to the input and checks
//! every cast by casting back, so a commit never changes a value silently.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, RecordBatch, RecordBatchOptions};
use arrow::compute::{can_cast_types, cast};
use arrow::datatypes::{DataType, SchemaRef};
use arrow::util::display::array_value_to_string;

/// How an input column's type relates to the table's column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fit {
    /// The same type.
    Same,
    /// The same values in another form, or a narrower number: the input is
    /// cast to the table's type (every value checked).
    Conform,
    /// A wider number (Int32 to Int64, Float32 to Float64): the table's
    /// column takes the input's type. Old files are read cast to it, and
    /// their row hashes do not change (rowhash-v1 hashes every signed
    /// integer as i64 and every float as f64).
    Widen,
    /// Another type arrow can cast to the table's: only with `--cast`.
    Cast,
    /// A change of type.
    Change,
}

/// The rank of a number type within its family, for widening: a wider
/// type holds every value of a narrower one.
fn rank(t: &DataType) -> Option<(u8, u8)> {
    use DataType as D;
    Some(match t {
        D::Int8 => (0, 1),
        D::Int16 => (0, 2),
        D::Int32 => (0, 3),
        D::Int64 => (0, 4),
        D::UInt8 => (1, 1),
        D::UInt16 => (1, 2),
        D::UInt32 => (1, 3),
        D::UInt64 => (1, 4),
        D::Float16 => (2, 1),
        D::Float32 => (2, 2),
        D::Float64 => (2, 3),
        _ => return None,
    })
}

/// `to` holds every value of `from` and hashes it the same (see [`Fit`]).
fn widens(from: &DataType, to: &DataType) -> bool {
    use DataType as D;
    match (rank(from), rank(to)) {
        (Some((f, a)), Some((g, b))) if f == g => a < b,
        // An unsigned integer fits a wider signed one; rowhash-v1 hashes
        // them apart (tag 03 against 02), so this is only a conform (the
        // input is cast to the table's signed type), never a widening of
        // the table.
        _ => matches!(
            (from, to),
            (D::UInt8, D::Int16 | D::Int32 | D::Int64)
                | (D::UInt16, D::Int32 | D::Int64)
                | (D::UInt32, D::Int64)
        ),
    }
}

/// The same logical values in another physical form.
fn same_logical(a: &DataType, b: &DataType) -> bool {
    use DataType as D;
    let text = |t: &DataType| matches!(t, D::Utf8 | D::LargeUtf8 | D::Utf8View);
    let bin = |t: &DataType| matches!(t, D::Binary | D::LargeBinary | D::BinaryView);
    match (a, b) {
        (D::Dictionary(_, v), other) | (other, D::Dictionary(_, v)) => {
            v.as_ref() == other || same_logical(v, other)
        }
        (D::Timestamp(_, tz1), D::Timestamp(_, tz2)) => tz1 == tz2,
        (D::List(x) | D::LargeList(x), D::List(y) | D::LargeList(y)) => {
            x.data_type() == y.data_type() || same_logical(x.data_type(), y.data_type())
        }
        _ => (text(a) && text(b)) || (bin(a) && bin(b)),
    }
}

/// The type a diff compares a column in when its type changed between
/// two versions: one that holds every value of both sides, so a change
/// of type neither hides a change of value (Float64 49.5 read as Int64
/// would be 49) nor loses the old value (text `x` read as Int64 would be
/// null). The newer type when it holds the older one's values; a float
/// for mixed numbers, a decimal for integers of two families or decimals;
/// text for any other pair arrow can write as text.
pub(crate) fn common_type(old: &DataType, new: &DataType) -> DataType {
    use DataType as D;
    let finer = |a: &arrow::datatypes::TimeUnit, b: &arrow::datatypes::TimeUnit| {
        use arrow::datatypes::TimeUnit as U;
        let n = |u: &U| match u {
            U::Second => 0,
            U::Millisecond => 1,
            U::Microsecond => 2,
            U::Nanosecond => 3,
        };
        if n(a) > n(b) {
            *a
        } else {
            *b
        }
    };
    match (old, new) {
        _ if old == new => return new.clone(),
        (D::Timestamp(a, tz1), D::Timestamp(b, tz2)) if tz1 == tz2 => {
            return D::Timestamp(finer(a, b), tz2.clone())
        }
        _ => {}
    }
    if same_logical(new, old) || widens(old, new) {
        return new.clone();
    }
    if widens(new, old) {
        return old.clone();
    }
    let decimal_scale = |t: &DataType| match t {
        D::Decimal32(_, s) | D::Decimal64(_, s) | D::Decimal128(_, s) | D::Decimal256(_, s) => {
            Some(*s)
        }
        _ => None,
    };
    let float = |t: &DataType| matches!(rank(t), Some((2, _)));
    let number = |t: &DataType| rank(t).is_some() || decimal_scale(t).is_some();
    if number(old) && number(new) {
        if float(old) || float(new) {
            return D::Float64;
        }
        let scale = decimal_scale(old).max(decimal_scale(new)).unwrap_or(0);
        return D::Decimal128(38, scale);
    }
    if can_cast_types(old, &D::Utf8) && can_cast_types(new, &D::Utf8) {
        return D::Utf8;
    }
    new.clone()
}

/// How an input column of type `input` fits a table column of type `table`.
pub(crate) fn fit(table: &DataType, input: &DataType) -> Fit {
    if table == input {
        Fit::Same
    } else if same_logical(table, input) || widens(input, table) {
        Fit::Conform
    } else if widens(table, input) && rank(table).map(|r| r.0) == rank(input).map(|r| r.0) {
        Fit::Widen
    } else if can_cast_types(input, table) {
        Fit::Cast
    } else {
        Fit::Change
    }
}

/// The input's columns in the schema's order and types, with a null column
/// for a column the input lacks (an added nullable column). Every column
/// whose type changes is cast back to its own type and compared: a value
/// that the cast would change refuses the commit, naming the column, the
/// row and both values.
pub(crate) fn conform(batch: &RecordBatch, schema: &SchemaRef) -> Result<RecordBatch, String> {
    conform_rows(batch, schema).map_err(|e| e.to_string())
}

/// Why rows do not conform to a schema.
#[derive(Debug)]
pub(crate) enum Unfit {
    /// A value would change: in `column`, at the 0-based `row`.
    Lossy {
        column: String,
        to: String,
        row: usize,
        held: String,
        becomes: String,
    },
    /// Anything else (a cast Arrow cannot make).
    Other(String),
}

impl std::fmt::Display for Unfit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unfit::Lossy {
                column,
                to,
                row,
                held,
                becomes,
            } => write!(
                f,
                "column '{column}' cannot become {to} without changing a value: row {} holds {held} and would become {becomes}",
                row + 1
            ),
            Unfit::Other(m) => f.write_str(m),
        }
    }
}

/// [`conform`], saying which value would change as data.
pub(crate) fn conform_rows(batch: &RecordBatch, schema: &SchemaRef) -> Result<RecordBatch, Unfit> {
    if batch.schema().fields() == schema.fields() {
        return Ok(batch.clone());
    }
    let cols: Vec<ArrayRef> = schema
        .fields()
        .iter()
        .map(|f| match batch.column_by_name(f.name()) {
            Some(c) if c.data_type() == f.data_type() => Ok(c.clone()),
            Some(c) => exact_cast(f.name(), c, f.data_type()),
            None => Ok(arrow::array::new_null_array(
                f.data_type(),
                batch.num_rows(),
            )),
        })
        .collect::<Result<_, _>>()?;
    let options = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
    RecordBatch::try_new_with_options(Arc::clone(schema), cols, &options)
        .map_err(|e| Unfit::Other(e.to_string()))
}

/// The content hash of rows as a table of `schema` holds them: each
/// column read as the table's type when no value changes (as a commit
/// with `cast` reads its input), so rows that came back through pandas
/// (nullable integers as floats), polars (no timestamp in seconds) or any
/// other reader hash as the version they were read from does. The
/// columns must be the schema's, by name, in any order.
pub fn content_hash_as(
    schema: &SchemaRef,
    batches: &[RecordBatch],
) -> crate::Result<tablepin_format::ContentHash> {
    let bad = |m: String| crate::Error::InvalidArgument(m);
    let mut out = Vec::with_capacity(batches.len());
    for b in batches {
        let mut have: Vec<&str> = b
            .schema_ref()
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        let mut want: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        have.sort_unstable();
        want.sort_unstable();
        if have != want {
            return Err(bad(format!(
                "the rows have the columns [{}], and the schema [{}]; hash the same columns",
                have.join(", "),
                want.join(", ")
            )));
        }
        let (_, canonical) = crate::files::normalize(&b.schema(), vec![b.clone()])
            .map_err(crate::Error::arrow("reading the rows to hash"))?;
        for c in canonical {
            out.push(conform(&c, schema).map_err(bad)?);
        }
    }
    Ok(tablepin_rowhash::content_hash(&out)?)
}

/// `col` cast to `to`, refused when any value changes.
fn exact_cast(name: &str, col: &ArrayRef, to: &DataType) -> Result<ArrayRef, Unfit> {
    let from = col.data_type();
    let fail = |e: arrow::error::ArrowError| {
        Unfit::Other(format!(
            "column '{name}' cannot be cast from {from} to {to}: {e}"
        ))
    };
    let out = cast(col, to).map_err(fail)?;
    let back = cast(&out, from).map_err(fail)?;
    let differ = arrow::compute::kernels::cmp::distinct(&back, col).map_err(fail)?;
    if let Some(row) = differ.iter().position(|d| d == Some(true)) {
        let show = |a: &dyn Array| {
            if a.is_null(row) {
                "null".to_string()
            } else {
                array_value_to_string(a, row).unwrap_or_else(|_| "?".into())
            }
        };
        return Err(Unfit::Lossy {
            column: name.to_string(),
            to: to.to_string(),
            row,
            held: show(col.as_ref()),
            becomes: show(out.as_ref()),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_diff_compares_a_retyped_column_in_a_type_holding_both_sides() {
        use arrow::datatypes::TimeUnit as U;
        use DataType as D;
        let cases = [
            (D::Float64, D::Int64, D::Float64),
            (D::Int64, D::Float64, D::Float64),
            (D::Int32, D::Int64, D::Int64),
            (D::Int64, D::Int32, D::Int64),
            (D::UInt64, D::Int64, D::Decimal128(38, 0)),
            (D::Decimal128(10, 2), D::Int64, D::Decimal128(38, 2)),
            (D::Utf8, D::Int64, D::Utf8),
            (D::Int64, D::Utf8, D::Utf8),
            (D::Boolean, D::Int64, D::Utf8),
            (D::LargeUtf8, D::Utf8, D::Utf8),
            (
                D::Timestamp(U::Millisecond, None),
                D::Timestamp(U::Second, None),
                D::Timestamp(U::Millisecond, None),
            ),
        ];
        for (old, new, want) in cases {
            assert_eq!(common_type(&old, &new), want, "{old} -> {new}");
        }
    }
    use arrow::array::{
        DictionaryArray, Float64Array, Int32Array, Int64Array, LargeStringArray, StringArray,
        TimestampMicrosecondArray, TimestampSecondArray,
    };
    use arrow::datatypes::{Field, Int32Type, Schema, TimeUnit};

    #[test]
    fn physical_variants_conform_and_numbers_widen_or_conform() {
        use DataType as D;
        assert_eq!(fit(&D::Utf8, &D::LargeUtf8), Fit::Conform);
        assert_eq!(fit(&D::LargeUtf8, &D::Utf8View), Fit::Conform);
        assert_eq!(
            fit(
                &D::Utf8,
                &D::Dictionary(Box::new(D::Int32), Box::new(D::Utf8))
            ),
            Fit::Conform
        );
        assert_eq!(fit(&D::Binary, &D::LargeBinary), Fit::Conform);
        assert_eq!(
            fit(
                &D::Timestamp(TimeUnit::Microsecond, None),
                &D::Timestamp(TimeUnit::Second, None)
            ),
            Fit::Conform
        );
        assert_eq!(
            fit(
                &D::Timestamp(TimeUnit::Second, Some("UTC".into())),
                &D::Timestamp(TimeUnit::Second, None)
            ),
            Fit::Cast
        );
        assert_eq!(fit(&D::Int64, &D::Int32), Fit::Conform);
        assert_eq!(fit(&D::Int32, &D::Int64), Fit::Widen);
        assert_eq!(fit(&D::Float32, &D::Float64), Fit::Widen);
        assert_eq!(fit(&D::Int64, &D::UInt16), Fit::Conform);
        assert_eq!(fit(&D::Float64, &D::Int64), Fit::Cast);
        assert_eq!(fit(&D::Int64, &D::Float64), Fit::Cast);
        assert_eq!(fit(&D::Int64, &D::Utf8), Fit::Cast);
        assert_eq!(fit(&D::Boolean, &D::Date32), Fit::Change);
    }

    fn one(name: &str, col: ArrayRef) -> RecordBatch {
        RecordBatch::try_from_iter(vec![(name, col)]).unwrap()
    }

    fn schema(name: &str, t: DataType) -> SchemaRef {
        Arc::new(Schema::new(vec![Field::new(name, t, true)]))
    }

    #[test]
    fn conform_casts_when_no_value_changes_and_names_the_first_that_would() {
        let secs = one(
            "t",
            Arc::new(TimestampSecondArray::from(vec![Some(1_259_654_460), None])),
        );
        let us = conform(
            &secs,
            &schema("t", DataType::Timestamp(TimeUnit::Microsecond, None)),
        )
        .unwrap();
        let got = us
            .column(0)
            .as_any()
            .downcast_ref::<TimestampMicrosecondArray>()
            .unwrap();
        assert_eq!(got.value(0), 1_259_654_460_000_000);
        assert!(got.is_null(1));
        // Back to seconds loses the microseconds of the second row.
        let fine = one(
            "t",
            Arc::new(TimestampMicrosecondArray::from(vec![2_000_000, 2_000_001])),
        );
        let err = conform(
            &fine,
            &schema("t", DataType::Timestamp(TimeUnit::Second, None)),
        )
        .unwrap_err();
        assert!(err.contains("column 't'") && err.contains("row 2"), "{err}");
        // 30.0 becomes 30; 30.5 would not.
        let f = one("q", Arc::new(Float64Array::from(vec![30.0, 2.0])));
        let i = conform(&f, &schema("q", DataType::Int64)).unwrap();
        assert_eq!(
            i.column(0)
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap()
                .values(),
            &[30, 2]
        );
        let f = one("q", Arc::new(Float64Array::from(vec![30.0, 30.5])));
        let err = conform(&f, &schema("q", DataType::Int64)).unwrap_err();
        assert!(err.contains("row 2 holds 30.5"), "{err}");
        // Text in any form, and a dictionary, become the table's text.
        let large = one("s", Arc::new(LargeStringArray::from(vec!["a", "b"])));
        let plain = conform(&large, &schema("s", DataType::Utf8)).unwrap();
        assert_eq!(
            plain
                .column(0)
                .as_any()
                .downcast_ref::<StringArray>()
                .unwrap()
                .value(1),
            "b"
        );
        let dict: DictionaryArray<Int32Type> = vec!["x", "y", "x"].into_iter().collect();
        let plain = conform(&one("s", Arc::new(dict)), &schema("s", DataType::Utf8)).unwrap();
        assert_eq!(plain.column(0).len(), 3);
        let narrow = one("n", Arc::new(Int32Array::from(vec![1, 2])));
        assert!(conform(&narrow, &schema("n", DataType::Int64)).is_ok());
    }
}
