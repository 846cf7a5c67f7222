use super::*;
use arrow::datatypes::DataType;

fn schema(fields: &[(&str, DataType, bool)]) -> Schema {
    Schema::new(
        fields
            .iter()
            .map(|(n, t, null)| Field::new(*n, t.clone(), *null))
            .collect::<Vec<_>>(),
    )
}

/// A file of dense integer keys is looked up by arithmetic, with the
/// answer the page-pruned look-up gives; other files are not.
#[test]
fn dense_keys_are_found_by_position_as_the_pages_would_find_them() {
    use arrow::array::{ArrayRef, Int64Array};
    let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, false)]));
    let props = WriteSettings::default().properties().unwrap();
    let entry_of = |col: ArrayRef| {
        let batch = RecordBatch::try_new(schema.clone(), vec![col]).unwrap();
        let (lo, hi) = keys::bounds(&batch, &[0]);
        let bytes = write_data_file(&batch, &props).unwrap();
        let entry = FileEntry {
            data: ObjectId::of(&bytes),
            rows: batch.num_rows() as u64,
            bytes: bytes.len() as u64,
            hash_sum: ContentHash::EMPTY,
            deletes: None,
            key_min: lo,
            key_max: hi,
        };
        let id = ObjectId::of(&bytes);
        (
            entry,
            DataFile::open_with(id, bytes, PageIndex::WithStats).unwrap(),
        )
    };
    let codec = KeyCodec::new(&schema, vec![0]).unwrap();
    let wanted = Int64Array::from(vec![99, 5_000, 100, 7_099, 7_100, -3, 100_050, 4_321]);
    let want = RecordBatch::try_new(schema.clone(), vec![Arc::new(wanted)]).unwrap();
    let keys = codec.sort_keys(std::slice::from_ref(&want)).unwrap();
    let cand: Vec<usize> = (0..want.num_rows()).collect();
    let mut dv = RoaringBitmap::new();
    dv.insert(4_900); // key 5,000
    let (dense, file) = entry_of(Arc::new(Int64Array::from_iter_values(100..7_100)));
    let by_position = dense_positions(&dense, Some(&dv), &keys, &cand).unwrap();
    let by_pages = locate_in_file(&file, Some(&dv), &schema, &codec, &keys, &cand).unwrap();
    assert_eq!(by_position, by_pages);
    assert_eq!(by_position, [(2, 0), (3, 6_999), (7, 4_221)]);
    // A gap among the keys: the file is not dense.
    let gappy = (100..7_100).filter(|k| *k != 200).chain([100_050]);
    let (sparse, _) = entry_of(Arc::new(Int64Array::from_iter_values(gappy)));
    assert!(dense_positions(&sparse, None, &keys, &cand).is_none());
}

/// The page-pruned look-up finds exactly what a scan of every key finds,
/// for integer and text keys, present and absent, with a deletion vector.
#[test]
fn locate_in_file_reads_only_candidate_pages_and_agrees_with_a_full_scan() {
    use arrow::array::{ArrayRef, Int64Array, StringArray};
    let n = 20_000i64;
    let ints: ArrayRef = Arc::new(Int64Array::from_iter_values((0..n).map(|i| i * 3)));
    let texts: ArrayRef = Arc::new(StringArray::from_iter_values(
        (0..n).map(|i| format!("key-{:08}", i * 3)),
    ));
    let settings = WriteSettings::default();
    let props = settings.properties().unwrap();
    for col in [ints, texts] {
        let schema = Arc::new(Schema::new(vec![Field::new(
            "k",
            col.data_type().clone(),
            false,
        )]));
        let batch = RecordBatch::try_new(schema.clone(), vec![col.clone()]).unwrap();
        let bytes = write_data_file(&batch, &props).unwrap();
        let id = ObjectId::of(&bytes);
        let file = DataFile::open_with(id, bytes.clone(), PageIndex::WithStats).unwrap();
        let pages = file.pages("k").unwrap();
        assert!(pages.rows.len() >= 20, "{} pages", pages.rows.len());
        // Wanted: a few multiples of 3 (present) and some other values
        // (absent), unsorted; row 0 is deleted.
        let wanted: Vec<i64> = (0..3 * n + 10)
            .step_by(4999)
            .chain([3 * n + 3, 1, 0])
            .collect();
        let wanted_col: ArrayRef = match col.data_type() {
            DataType::Int64 => Arc::new(Int64Array::from(wanted.clone())),
            _ => Arc::new(StringArray::from_iter_values(
                wanted.iter().map(|i| format!("key-{i:08}")),
            )),
        };
        let want = RecordBatch::try_new(schema.clone(), vec![wanted_col]).unwrap();
        let codec = KeyCodec::new(&schema, vec![0]).unwrap();
        let keys = codec.sort_keys(std::slice::from_ref(&want)).unwrap();
        let cand: Vec<usize> = (0..wanted.len()).collect();
        let ranges = key_pages(&file, &schema, &codec, &keys, &cand)
            .unwrap()
            .unwrap();
        let picked: usize = ranges.iter().map(|r| r.len()).sum();
        let page_rows = pages.rows[0].len();
        assert!(
            picked <= wanted.len() * page_rows,
            "read {picked} of {n} rows for {} keys",
            wanted.len()
        );
        let dv: RoaringBitmap = [0u32].into_iter().collect();
        let mut got = locate_in_file(&file, Some(&dv), &schema, &codec, &keys, &cand).unwrap();
        got.sort_unstable();
        let expect: Vec<(usize, u32)> = wanted
            .iter()
            .enumerate()
            .filter(|(_, v)| **v % 3 == 0 && **v < 3 * n && **v != 0)
            .map(|(i, v)| (i, (*v / 3) as u32))
            .collect();
        assert_eq!(got, expect, "{}", col.data_type());
        // Opened with page locations only, the file has no page
        // statistics: the look-up reads every key, and finds the same.
        let located = DataFile::open(id, bytes).unwrap();
        assert!(located.pages("k").is_none());
        let mut all = locate_in_file(&located, Some(&dv), &schema, &codec, &keys, &cand).unwrap();
        all.sort_unstable();
        assert_eq!(all, expect, "{}", col.data_type());
    }
}

#[test]
fn physical_variants_conform_and_wider_numbers_widen_in_any_mode() {
    let p = schema(&[
        ("id", DataType::Int32, false),
        ("s", DataType::Utf8, true),
        ("x", DataType::Float32, true),
    ]);
    let i = schema(&[
        ("id", DataType::Int32, false),
        ("s", DataType::LargeUtf8, true),
        ("x", DataType::Float64, true),
    ]);
    let key = ["id".to_string()];
    let (s, moved, rewrite) = resolve_schema("t", Some(&p), &i, NONE, Mode::Upsert, &key).unwrap();
    assert!(moved && !rewrite);
    assert_eq!(s.field(1).data_type(), &DataType::Utf8);
    assert_eq!(s.field(2).data_type(), &DataType::Float64);
    // A key column does not widen; --cast reads it as the table's type.
    let wide_key = schema(&[("id", DataType::Int64, false)]);
    let p = schema(&[("id", DataType::Int32, false)]);
    let err = resolve_schema("t", Some(&p), &wide_key, NONE, Mode::Upsert, &key).unwrap_err();
    assert!(err.to_string().contains("does not widen"), "{err}");
    assert!(
        err.to_string()
            .contains("or cast the input's 'id' to Int32 when no value changes"),
        "{err}"
    );
    assert!(
        matches!(&err, Error::SchemaChange { cast_to: Some((c, t)), .. } if c == "id" && t == "Int32"),
        "{err:?}"
    );
    let cast = SchemaRules { cast: true, ..NONE };
    let (s, moved, _) = resolve_schema("t", Some(&p), &wide_key, cast, Mode::Upsert, &key).unwrap();
    assert!(!moved);
    assert_eq!(s.field(0).data_type(), &DataType::Int32);
    // Float64 for an Int64 column needs --cast.
    let p = schema(&[("q", DataType::Int64, true)]);
    let f = schema(&[("q", DataType::Float64, true)]);
    let err = resolve_schema("t", Some(&p), &f, NONE, Mode::Append, &[]).unwrap_err();
    assert!(
        matches!(&err, Error::SchemaChange { cast_to: Some((c, t)), .. } if c == "q" && t == "Int64"),
        "{err:?}"
    );
    assert!(resolve_schema("t", Some(&p), &f, cast, Mode::Append, &[]).is_ok());
}

const NONE: SchemaRules = SchemaRules {
    allow_change: false,
    cast: false,
};
const ALLOW: SchemaRules = SchemaRules {
    allow_change: true,
    cast: false,
};

#[test]
fn adding_a_nullable_column_is_allowed() {
    let p = schema(&[("a", DataType::Int64, false)]);
    let i = schema(&[("a", DataType::Int64, false), ("b", DataType::Utf8, true)]);
    let (s, moved, rewrite) = resolve_schema("t", Some(&p), &i, NONE, Mode::Append, &[]).unwrap();
    assert!(moved && !rewrite);
    assert_eq!(s.fields().len(), 2);
}

#[test]
fn other_changes_are_refused_unless_allowed() {
    let p = schema(&[("a", DataType::Int64, false)]);
    let t = schema(&[("a", DataType::Utf8, false)]);
    let err = resolve_schema("t", Some(&p), &t, NONE, Mode::Overwrite, &[]).unwrap_err();
    assert!(
        err.to_string()
            .contains("column 'a' would change type from Int64 to Utf8"),
        "{err}"
    );
    let (_, moved, rewrite) =
        resolve_schema("t", Some(&p), &t, ALLOW, Mode::Overwrite, &[]).unwrap();
    assert!(moved && rewrite);
    assert!(resolve_schema("t", Some(&p), &t, ALLOW, Mode::Append, &[]).is_err());
    let missing = schema(&[("z", DataType::Int64, true)]);
    let err = resolve_schema("t", Some(&p), &missing, NONE, Mode::Overwrite, &[]).unwrap_err();
    assert!(err.to_string().contains("column 'a' is missing"), "{err}");
}

/// A look-up reads a file by range only when the pages it may need are a
/// small part of it: a few keys in a large file, not a weekly commit's
/// dozens of keys a file, nor a file without an outboard.
#[test]
fn a_file_is_read_by_range_only_when_its_pages_are_a_small_part_of_it() {
    let twelve = Arc::new(schema(
        &(0..12)
            .map(|i| {
                (
                    ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"][i],
                    DataType::Int64,
                    false,
                )
            })
            .collect::<Vec<_>>(),
    ));
    let file = |bytes: u64| FileEntry {
        data: ObjectId::of(b"f"),
        rows: 262_144,
        bytes,
        hash_sum: ContentHash::EMPTY,
        deletes: None,
        key_min: None,
        key_max: None,
    };
    // The 1,000,000-row bench's weekly commit: ~37 keys in each 2.4 MB file.
    let g = tablepin_store::ranged::group_bytes(tablepin_store::ranged::GROUP_LOG);
    assert!(!by_range_pays(&file(2_420_000), 37, &twelve, g));
    // The 100,000,000-row one: a key or two in a file of ~25 MB.
    assert!(by_range_pays(&file(25_000_000), 2, &twelve, g));
    // Under 1 MiB a file has no outboard, however few the keys.
    assert!(!by_range_pays(&file(1_000_000), 1, &twelve, g));
}
