//! The three-way merge of one table, decided with no I/O.
//!
//! Each side (ours: the branch merged into; theirs: the one merged) is
//! given as what it changed since the merge base: the diff's rows
//! (`diff::unshared`, aligned) and which of them were added, removed or
//! changed (`diff::compare`). A merge applies to ours what theirs changed
//! and ours did not; a key both changed alike is taken once; a key both
//! changed differently (or one deleted and the other changed) is a
//! conflict, left to a resolution. Unkeyed tables merge as multisets: the
//! rows theirs added that ours did not add too, less the rows theirs
//! removed that ours did not remove too.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, StringArray, UInt32Array};
use arrow::compute::kernels::cmp::distinct;
use arrow::compute::{interleave, take};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::row::{RowConverter, Rows, SortField};

use super::diff::Compared;
use super::keys;
use crate::error::{Error, Result};

/// What one side changed since the base: its diff's rows, aligned to one
/// schema, and which of them differ.
pub(crate) struct Side<'a> {
    /// Rows of the base this side no longer sees as they were.
    pub(crate) old: &'a RecordBatch,
    /// Rows this side sees that the base did not.
    pub(crate) new: &'a RecordBatch,
    /// Which rows were added, removed or changed.
    pub(crate) compared: &'a Compared,
}

/// How conflicting keys are settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Settle {
    /// Not settled: they are reported and nothing is merged.
    No,
    /// Ours stays.
    Ours,
    /// Theirs is taken.
    Theirs,
}

/// A key both sides changed differently, as positions into the sides'
/// rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ConflictAt {
    /// The key's row at the base (in theirs' `old`), if it had one.
    pub(crate) base: Option<u32>,
    /// Ours' row (in ours' `new`); `None`: ours deleted the key.
    pub(crate) ours: Option<u32>,
    /// Theirs' row (in theirs' `new`); `None`: theirs deleted the key.
    pub(crate) theirs: Option<u32>,
}

impl ConflictAt {
    /// Where the conflicting key's value is: theirs' row (`true`, in
    /// `new`), or the base's when theirs deleted the key (`false`, in
    /// theirs' `old`); `None` for a key neither has (never built).
    fn key_at(&self) -> Option<(bool, usize)> {
        match (self.theirs, self.base) {
            (Some(j), _) => Some((true, j as usize)),
            (None, Some(i)) => Some((false, i as usize)),
            (None, None) => None,
        }
    }

    /// What each side did, as `ours/theirs`.
    fn kind(&self) -> &'static str {
        match (self.base, self.ours, self.theirs) {
            (None, _, _) => "added/added",
            (_, None, _) => "deleted/modified",
            (_, _, None) => "modified/deleted",
            _ => "modified/modified",
        }
    }
}

/// What a keyed merge applies to ours.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Decided {
    /// Rows to upsert (positions in theirs' `new`), in key order.
    pub(crate) upsert: Vec<u32>,
    /// Keys to delete (positions in theirs' `old`), in key order.
    pub(crate) delete: Vec<u32>,
    /// Keys both sides changed differently, in key order, whatever
    /// settled them.
    pub(crate) conflicts: Vec<ConflictAt>,
    /// Keys both sides changed alike (taken once).
    pub(crate) same: u64,
}

/// A side's change of one key: its base row (in `old`) and its row now
/// (in `new`; `None`: deleted).
#[derive(Debug, Clone, Copy)]
struct KeyChange {
    base: Option<u32>,
    now: Option<u32>,
}

fn arrow_err(what: &'static str) -> impl FnOnce(arrow::error::ArrowError) -> Error {
    Error::arrow(what)
}

fn converter(schema: &SchemaRef, cols: &[usize]) -> Result<RowConverter> {
    let fields = cols
        .iter()
        .map(|&i| SortField::new(schema.field(i).data_type().clone()))
        .collect();
    RowConverter::new(fields).map_err(arrow_err("encoding keys to merge"))
}

fn encode(conv: &RowConverter, b: &RecordBatch, cols: &[usize]) -> Result<Rows> {
    let arrays: Vec<ArrayRef> = cols.iter().map(|&i| b.column(i).clone()).collect();
    conv.convert_columns(&arrays)
        .map_err(arrow_err("encoding keys to merge"))
}

/// Each key a side changed, by its encoded key.
fn changes(
    conv: &RowConverter,
    key: &[usize],
    side: &Side<'_>,
) -> Result<HashMap<Vec<u8>, KeyChange>> {
    let (old, new) = (encode(conv, side.old, key)?, encode(conv, side.new, key)?);
    let c = side.compared;
    let mut out = HashMap::with_capacity(c.added.len() + c.removed.len() + c.changed.len());
    for &j in &c.added {
        let ch = KeyChange {
            base: None,
            now: Some(j),
        };
        out.insert(new.row(j as usize).data().to_vec(), ch);
    }
    for &i in &c.removed {
        let ch = KeyChange {
            base: Some(i),
            now: None,
        };
        out.insert(old.row(i as usize).data().to_vec(), ch);
    }
    for &(i, j) in &c.changed {
        let ch = KeyChange {
            base: Some(i),
            now: Some(j),
        };
        out.insert(new.row(j as usize).data().to_vec(), ch);
    }
    Ok(out)
}

/// The row of ours that holds a key, as the two diffs show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HeldBy {
    /// Row `i` of ours' `new`: ours added, changed or moved the key.
    OursNew(u32),
    /// Row `i` of theirs' `old`: a base row ours did not touch, so ours
    /// sees it where the base had it.
    Base(u32),
}

/// Where ours holds the key of each of `rows` (theirs' rows to upsert, in
/// the sides' schema), from the diffs alone: a key ours added, changed or
/// moved is in ours' `new`; one ours left alone and theirs changed is
/// ours' as the base had it, in theirs' `old`; any other (`None`) ours
/// has not (theirs added it, or ours deleted it). So applying theirs'
/// rows needs no look-up of their keys in ours' files. No I/O.
pub(crate) fn ours_rows(
    key: &[usize],
    ours: &Side<'_>,
    theirs: &Side<'_>,
    rows: &RecordBatch,
) -> Result<Vec<Option<HeldBy>>> {
    let conv = converter(&rows.schema(), key)?;
    let touched = encode(&conv, ours.old, key)?;
    let touched: std::collections::HashSet<&[u8]> = touched.iter().map(|r| r.data()).collect();
    let mut at: HashMap<Vec<u8>, HeldBy> = HashMap::new();
    let base = encode(&conv, theirs.old, key)?;
    for (i, k) in base.iter().enumerate() {
        if !touched.contains(k.data()) {
            at.insert(k.data().to_vec(), HeldBy::Base(i as u32));
        }
    }
    for (j, k) in encode(&conv, ours.new, key)?.iter().enumerate() {
        at.insert(k.data().to_vec(), HeldBy::OursNew(j as u32));
    }
    let wanted = encode(&conv, rows, key)?;
    Ok(wanted.iter().map(|k| at.get(k.data()).copied()).collect())
}

/// Decides a keyed merge (`key`: the key columns' positions in both sides'
/// schema, which is one). No I/O.
pub(crate) fn decide(
    key: &[usize],
    ours: &Side<'_>,
    theirs: &Side<'_>,
    settle: Settle,
) -> Result<Decided> {
    let schema = theirs.new.schema();
    let conv = converter(&schema, key)?;
    let (mine, their) = (changes(&conv, key, ours)?, changes(&conv, key, theirs)?);
    // Whole rows, to see whether both sides made the same change.
    let all: Vec<usize> = (0..schema.fields().len()).collect();
    let whole = converter(&schema, &all)?;
    let (ours_rows, theirs_rows) = (
        encode(&whole, ours.new, &all)?,
        encode(&whole, theirs.new, &all)?,
    );
    let mut keys: Vec<(&Vec<u8>, &KeyChange)> = their.iter().collect();
    keys.sort_unstable_by(|a, b| a.0.cmp(b.0));
    let mut out = Decided::default();
    for (k, t) in keys {
        let take_theirs = match mine.get(k) {
            None => true,
            Some(o) => {
                let alike = match (o.now, t.now) {
                    (None, None) => true,
                    (Some(a), Some(b)) => ours_rows.row(a as usize) == theirs_rows.row(b as usize),
                    _ => false,
                };
                if alike {
                    out.same += 1;
                    continue;
                }
                out.conflicts.push(ConflictAt {
                    base: t.base,
                    ours: o.now,
                    theirs: t.now,
                });
                settle == Settle::Theirs
            }
        };
        if take_theirs {
            match (t.now, t.base) {
                (Some(j), _) => out.upsert.push(j),
                (None, Some(i)) => out.delete.push(i),
                (None, None) => {
                    return Err(Error::Internal(
                        "a merged key neither added nor removed".into(),
                    ))
                }
            }
        }
    }
    Ok(out)
}

/// What an unkeyed merge applies to ours: rows to append (positions in
/// theirs' `new`) and rows to remove (in theirs' `old`), one instance
/// each. No I/O.
pub(crate) fn decide_unkeyed(ours: &Side<'_>, theirs: &Side<'_>) -> Result<(Vec<u32>, Vec<u32>)> {
    let schema = theirs.new.schema();
    let all: Vec<usize> = (0..schema.fields().len()).collect();
    let conv = converter(&schema, &all)?;
    // Theirs' rows less ours' same rows, as multisets.
    let less = |theirs_b: &RecordBatch,
                t_at: &[u32],
                ours_b: &RecordBatch,
                o_at: &[u32]|
     -> Result<Vec<u32>> {
        let (t, o) = (encode(&conv, theirs_b, &all)?, encode(&conv, ours_b, &all)?);
        let mut have: HashMap<&[u8], usize> = HashMap::new();
        for &i in o_at {
            *have.entry(o.row(i as usize).data()).or_default() += 1;
        }
        let mut keep = Vec::new();
        for &j in t_at {
            match have.get_mut(t.row(j as usize).data()) {
                Some(n) if *n > 0 => *n -= 1,
                _ => keep.push(j),
            }
        }
        Ok(keep)
    };
    let (o, t) = (ours.compared, theirs.compared);
    Ok((
        less(theirs.new, &t.added, ours.new, &o.added)?,
        less(theirs.old, &t.removed, ours.old, &o.removed)?,
    ))
}

/// `all`'s rows less one instance of each row of `remove` (same schema),
/// in `all`'s order: the positions of `all` that stay. No I/O.
pub(crate) fn remaining(all: &RecordBatch, remove: &RecordBatch) -> Result<Vec<u32>> {
    let cols: Vec<usize> = (0..all.num_columns()).collect();
    let conv = converter(&all.schema(), &cols)?;
    let (a, r) = (encode(&conv, all, &cols)?, encode(&conv, remove, &cols)?);
    let mut pending: HashMap<&[u8], usize> = HashMap::new();
    for row in r.iter() {
        *pending.entry(row.data()).or_default() += 1;
    }
    let mut out = Vec::with_capacity(all.num_rows());
    for (i, row) in a.iter().enumerate() {
        match pending.get_mut(row.data()) {
            Some(n) if *n > 0 => *n -= 1,
            _ => out.push(i as u32),
        }
    }
    Ok(out)
}

/// The conflicts as rows a person can read and resolve: the key columns,
/// `conflict` (what ours and theirs did: `modified/modified`,
/// `deleted/modified`, `modified/deleted`, `added/added`), `columns` (the
/// columns whose values ours and theirs disagree on, comma-separated), then
/// `base_C`, `ours_C` and `theirs_C` for each other column C (null where
/// that side has no row). No I/O.
pub(crate) fn conflict_rows(
    key: &[usize],
    ours: &Side<'_>,
    theirs: &Side<'_>,
    conflicts: &[ConflictAt],
) -> Result<RecordBatch> {
    let schema = theirs.new.schema();
    let at = |f: fn(&ConflictAt) -> Option<u32>| {
        UInt32Array::from(conflicts.iter().map(f).collect::<Vec<_>>())
    };
    let (base_at, ours_at, theirs_at) = (at(|c| c.base), at(|c| c.ours), at(|c| c.theirs));
    // A key's value: from theirs' row, or the base's when theirs deleted it.
    let key_from: Vec<(usize, usize)> = conflicts
        .iter()
        .map(|c| match c.key_at() {
            Some((true, j)) => (0, j),
            Some((false, i)) => (1, i),
            None => (1, 0),
        })
        .collect();
    let mut fields = Vec::new();
    let mut arrays: Vec<ArrayRef> = Vec::new();
    for &k in key {
        let (t, o) = (theirs.new.column(k), theirs.old.column(k));
        let v = interleave(&[t.as_ref(), o.as_ref()], &key_from)
            .map_err(arrow_err("writing the merge's conflicts"))?;
        fields.push(schema.field(k).as_ref().clone().with_nullable(false));
        arrays.push(v);
    }
    let mut per_column = Vec::new();
    let mut disagree: Vec<Vec<&str>> = vec![Vec::new(); conflicts.len()];
    for (c, f) in schema.fields().iter().enumerate() {
        if key.contains(&c) {
            continue;
        }
        let pick = |b: &RecordBatch, idx: &UInt32Array| {
            take(b.column(c), idx, None).map_err(arrow_err("writing the merge's conflicts"))
        };
        let (b, o, t) = (
            pick(theirs.old, &base_at)?,
            pick(ours.new, &ours_at)?,
            pick(theirs.new, &theirs_at)?,
        );
        let differs = distinct(&o, &t).map_err(arrow_err("writing the merge's conflicts"))?;
        for (i, d) in differs.values().iter().enumerate() {
            if d {
                disagree[i].push(f.name());
            }
        }
        per_column.push((f.name().clone(), f.data_type().clone(), [b, o, t]));
    }
    let kinds: StringArray = conflicts.iter().map(|c| Some(c.kind())).collect();
    let cols: StringArray = disagree.iter().map(|d| Some(d.join(","))).collect();
    fields.push(Field::new("conflict", DataType::Utf8, false));
    arrays.push(Arc::new(kinds));
    fields.push(Field::new("columns", DataType::Utf8, false));
    arrays.push(Arc::new(cols));
    for (name, ty, values) in per_column {
        for (side, v) in ["base", "ours", "theirs"].into_iter().zip(values) {
            fields.push(Field::new(format!("{side}_{name}"), ty.clone(), true));
            arrays.push(v);
        }
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays)
        .map_err(arrow_err("writing the merge's conflicts"))
}

/// The conflicting keys a resolution must give a row for: of `rows` (the
/// resolution, in the table's schema, key columns at `key`), the positions
/// of conflicting keys, or the sentence that names a key it lacks or one
/// that is not in conflict. No I/O.
pub(crate) fn check_resolution(
    table: &str,
    key: &[usize],
    theirs: &Side<'_>,
    conflicts: &[ConflictAt],
    rows: &RecordBatch,
) -> Result<()> {
    let schema = theirs.new.schema();
    let conv = converter(&schema, key)?;
    let (t_new, t_old) = (
        encode(&conv, theirs.new, key)?,
        encode(&conv, theirs.old, key)?,
    );
    let given = encode(&conv, rows, key)?;
    // Each conflicting key (encoded), whether the resolution gave it, and
    // where its value is for a message.
    let located: Vec<(&[u8], &RecordBatch, usize)> = conflicts
        .iter()
        .filter_map(|c| c.key_at())
        .map(|(new, at)| match new {
            true => (t_new.row(at).data(), theirs.new, at),
            false => (t_old.row(at).data(), theirs.old, at),
        })
        .collect();
    let mut wanted: HashMap<&[u8], bool> = located.iter().map(|(k, ..)| (*k, false)).collect();
    for i in 0..given.num_rows() {
        let problem = match wanted.get_mut(given.row(i).data()) {
            Some(seen @ false) => {
                *seen = true;
                continue;
            }
            Some(true) => "twice: give one row per conflicting key",
            None => "which is not in conflict: give rows for the conflicting keys only",
        };
        return Err(Error::InvalidArgument(format!(
            "the resolution of table '{table}' has key ({}) {problem}",
            keys::key_text(rows, key, i)
        )));
    }
    if let Some((_, b, at)) = located.iter().find(|(k, ..)| wanted.get(k) == Some(&false)) {
        return Err(Error::ResolutionShort {
            table: table.to_string(),
            key: keys::key_text(b, key, *at),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::Int64Array;

    fn batch(rows: &[(i64, i64)]) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("qty", DataType::Int64, true),
        ]));
        let ids = Int64Array::from_iter_values(rows.iter().map(|r| r.0));
        let qty = Int64Array::from_iter_values(rows.iter().map(|r| r.1));
        RecordBatch::try_new(schema, vec![Arc::new(ids), Arc::new(qty)]).unwrap()
    }

    fn compared(old: &RecordBatch, new: &RecordBatch, key: &[usize]) -> Compared {
        super::super::diff::compare(key, old, new).unwrap()
    }

    fn side<'a>(old: &'a RecordBatch, new: &'a RecordBatch, compared: &'a Compared) -> Side<'a> {
        Side { old, new, compared }
    }

    /// Ours holds a key theirs changed where the base had it unless ours
    /// touched it: then in its own new rows, or nowhere (deleted).
    #[test]
    fn ours_rows_are_found_in_the_diffs() {
        // Ours: 2→21, deletes 4, adds 6. Theirs: 1→11, 2→22, 4→41, 5, 6.
        let o_old = batch(&[(2, 20), (4, 40)]);
        let o_new = batch(&[(2, 21), (6, 60)]);
        let t_old = batch(&[(1, 10), (2, 20), (4, 40)]);
        let t_new = batch(&[(1, 11), (2, 22), (4, 41), (5, 50), (6, 61)]);
        let (oc, tc) = (
            compared(&o_old, &o_new, &[0]),
            compared(&t_old, &t_new, &[0]),
        );
        let got = ours_rows(
            &[0],
            &side(&o_old, &o_new, &oc),
            &side(&t_old, &t_new, &tc),
            &t_new,
        )
        .unwrap();
        use HeldBy::{Base, OursNew};
        assert_eq!(
            got,
            vec![
                Some(Base(0)),
                Some(OursNew(0)),
                None,
                None,
                Some(OursNew(1))
            ]
        );
    }

    #[test]
    fn a_key_changed_on_one_side_is_taken_and_on_both_differently_conflicts() {
        // Base: 1→10, 2→20, 3→30, 4→40. Ours: 2→21, deletes 4, adds 6→60.
        // Theirs: 1→11, 2→22 (conflict), 3 deleted, 4→41 (conflict:
        // deleted by ours), 5→50 added, 6→60 added alike.
        let o_old = batch(&[(2, 20), (4, 40)]);
        let o_new = batch(&[(2, 21), (6, 60)]);
        let t_old = batch(&[(1, 10), (2, 20), (3, 30), (4, 40)]);
        let t_new = batch(&[(1, 11), (2, 22), (4, 41), (5, 50), (6, 60)]);
        let (co, ct) = (
            compared(&o_old, &o_new, &[0]),
            compared(&t_old, &t_new, &[0]),
        );
        let (ours, theirs) = (side(&o_old, &o_new, &co), side(&t_old, &t_new, &ct));
        let d = decide(&[0], &ours, &theirs, Settle::No).unwrap();
        assert_eq!(d.upsert, vec![0, 3], "1→11 and 5→50");
        assert_eq!(d.delete, vec![2], "3 deleted");
        assert_eq!(d.same, 1, "6→60 added alike");
        assert_eq!(
            d.conflicts,
            vec![
                ConflictAt {
                    base: Some(1),
                    ours: Some(0),
                    theirs: Some(1)
                },
                ConflictAt {
                    base: Some(3),
                    ours: None,
                    theirs: Some(2)
                },
            ]
        );
        let settled = decide(&[0], &ours, &theirs, Settle::Theirs).unwrap();
        assert_eq!(settled.upsert, vec![0, 1, 2, 3]);
        let kept = decide(&[0], &ours, &theirs, Settle::Ours).unwrap();
        assert_eq!(kept.upsert, vec![0, 3]);

        let rows = conflict_rows(&[0], &ours, &theirs, &d.conflicts).unwrap();
        let schema = rows.schema();
        let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(
            names,
            [
                "id",
                "conflict",
                "columns",
                "base_qty",
                "ours_qty",
                "theirs_qty"
            ]
        );
        let shown = arrow::util::pretty::pretty_format_batches(&[rows])
            .unwrap()
            .to_string();
        assert!(
            shown.contains(
                "| 2  | modified/modified | qty     | 20       | 21       | 22         |"
            ),
            "{shown}"
        );
        assert!(
            shown.contains(
                "| 4  | deleted/modified  | qty     | 40       |          | 41         |"
            ),
            "{shown}"
        );

        // A resolution must give exactly the conflicting keys.
        check_resolution(
            "t",
            &[0],
            &theirs,
            &d.conflicts,
            &batch(&[(2, 25), (4, 44)]),
        )
        .unwrap();
        let short = check_resolution("t", &[0], &theirs, &d.conflicts, &batch(&[(2, 25)]));
        assert!(short
            .unwrap_err()
            .to_string()
            .contains("no row for conflicting key (id=4)"));
        let extra = check_resolution(
            "t",
            &[0],
            &theirs,
            &d.conflicts,
            &batch(&[(2, 25), (4, 1), (9, 9)]),
        );
        assert!(extra
            .unwrap_err()
            .to_string()
            .contains("key (id=9) which is not in conflict"));
    }

    #[test]
    fn unkeyed_sides_merge_as_multisets() {
        // Base {a, a, b}; ours removes one a, adds c; theirs removes one a
        // and b, adds c and d: the merge removes b (a went on both sides)
        // and adds d (c came on both).
        let (a, b, c, d) = ((1, 1), (2, 2), (3, 3), (4, 4));
        let o_old = batch(&[a]);
        let o_new = batch(&[c]);
        let t_old = batch(&[a, b]);
        let t_new = batch(&[c, d]);
        let (co, ct) = (compared(&o_old, &o_new, &[]), compared(&t_old, &t_new, &[]));
        let (ours, theirs) = (side(&o_old, &o_new, &co), side(&t_old, &t_new, &ct));
        let (append, remove) = decide_unkeyed(&ours, &theirs).unwrap();
        assert_eq!(append, vec![1]);
        assert_eq!(remove, vec![1]);
        let left = remaining(&batch(&[a, b, c, b]), &batch(&[b])).unwrap();
        assert_eq!(left, vec![0, 2, 3]);
    }
}
