//! The pure core of a commit: from the input's row hashes (and keys) and
//! the parent's live rows that were found, which input rows to write and
//! which old positions to hide, with the counts and the content-hash
//! change. No I/O and no encoding: the planner (`plan.rs`) reads what these
//! functions need and writes what they decide.
//!
//! - [`by_found`]: append and upsert, where each input key was looked up
//!   in the parent (found live, or not at all);
//! - [`by_key`]: an overwrite of a keyed table, where the input is the
//!   whole table: a key in both is kept or changed, a key only in the
//!   input is added, a key only in the parent is deleted;
//! - [`by_multiset`]: an overwrite of an unkeyed table: each input row uses
//!   up one old row with the same hash; old rows left over are deleted;
//! - [`same_rows`] and [`overwrite_scope`]: what an overwrite need not read.
//!   The snapshot records the sum of the row hashes of the whole table and
//!   of every file, so input rows whose hashes add up to those of the rows
//!   they would replace are those rows (the content hash's own argument,
//!   `tablepin_format::ContentHash`), and the files holding them are never
//!   read.

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;

use tablepin_format::{ContentHash, FileEntry, KeyBound, RowHash, TableSnapshot};

/// Where a parent row is: its file's index in the snapshot, and its
/// position in that file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Loc {
    pub(crate) file: usize,
    pub(crate) pos: u32,
}

/// One live row of the parent: where it is and its hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct OldRow {
    pub(crate) loc: Loc,
    pub(crate) hash: RowHash,
}

/// What a commit does to one table, decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Decision {
    /// Per input row: whether it is written to a new data file.
    pub(crate) write: Vec<bool>,
    /// Parent positions to hide, by parent file index.
    pub(crate) removals: BTreeMap<usize, Vec<u32>>,
    /// The sum of the hidden rows' hashes.
    pub(crate) removed_hash: ContentHash,
    /// Input rows with a key the parent lacks (or, unkeyed, rows the parent
    /// has fewer of).
    pub(crate) added: u64,
    /// Input rows that replace an old row with the same key.
    pub(crate) changed: u64,
    /// Old rows gone without a replacement.
    pub(crate) deleted: u64,
}

impl Decision {
    /// Nothing written and nothing hidden yet, for `n` input rows.
    pub(crate) fn keep_all(n: usize) -> Self {
        Self {
            write: vec![false; n],
            removals: BTreeMap::new(),
            removed_hash: ContentHash::EMPTY,
            added: 0,
            changed: 0,
            deleted: 0,
        }
    }

    /// Every input row written as new (no parent, or an unkeyed append).
    pub(crate) fn all_new(n: usize) -> Self {
        Self {
            write: vec![true; n],
            added: n as u64,
            ..Self::keep_all(n)
        }
    }

    /// The same counts, with every input row written (a rewrite).
    pub(crate) fn writing_all(mut self) -> Self {
        self.write.fill(true);
        self
    }

    fn add(&mut self, i: usize) {
        self.write[i] = true;
        self.added += 1;
    }

    fn change(&mut self, i: usize, old: &OldRow) {
        self.write[i] = true;
        self.changed += 1;
        self.hide(old);
    }

    fn delete(&mut self, old: &OldRow) {
        self.deleted += 1;
        self.hide(old);
    }

    fn hide(&mut self, old: &OldRow) {
        self.removals
            .entry(old.loc.file)
            .or_default()
            .push(old.loc.pos);
        self.removed_hash.add(&old.hash);
    }

    /// The input rows written.
    #[cfg(test)]
    fn written(&self) -> usize {
        self.write.iter().filter(|w| **w).count()
    }
}

/// Append or upsert: `found[i]` is the live parent row with input row
/// `i`'s key, if there is one. A found row with the same hash stays; one
/// with another hash is replaced.
pub(crate) fn by_found(found: &[Option<OldRow>], input: &[RowHash]) -> Decision {
    let mut d = Decision::keep_all(input.len());
    for (i, (f, h)) in found.iter().zip(input).enumerate() {
        match f {
            None => d.add(i),
            Some(old) if old.hash != *h => d.change(i, old),
            Some(_) => {}
        }
    }
    d
}

/// Overwrite of a keyed table, for the input rows `input` (row index and
/// key) against the parent's live rows `old` (key and row, with its hash):
/// adds to `d`. Keys are unique on each side (checked before). Input rows
/// left out of `input` are left as `d` has them. The model the tests hold
/// the commit's way to: [`join_by_key`], the matched rows compared by
/// value, then [`by_join`].
#[cfg(test)]
pub(crate) fn by_key<K: Ord>(
    d: &mut Decision,
    input: impl IntoIterator<Item = (usize, K)>,
    hashes: &[RowHash],
    old: impl IntoIterator<Item = (K, OldRow)>,
) {
    let j = join_by_key(input, old);
    let changed = j
        .matched
        .into_iter()
        .filter(|(i, row)| row.hash != hashes[*i]);
    by_join(d, &j.added, changed, j.gone);
}

/// The input rows and the parent's rows matched by key ([`join_by_key`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Join<R> {
    /// Input rows whose key the parent holds, with the parent's row.
    pub(crate) matched: Vec<(usize, R)>,
    /// Input rows whose key is new.
    pub(crate) added: Vec<usize>,
    /// Parent rows whose key the input does not hold.
    pub(crate) gone: Vec<R>,
}

/// Matches the input rows `input` (row index and key) with the parent's
/// rows `old` (key and row) by key; keys are unique on each side.
///
/// A merge join of the two in key order: both come nearly sorted (the
/// input in its key order, the parent as each file's rows in key order),
/// so the sorts below merge a few runs, and no key is hashed.
pub(crate) fn join_by_key<K: Ord, R>(
    input: impl IntoIterator<Item = (usize, K)>,
    old: impl IntoIterator<Item = (K, R)>,
) -> Join<R> {
    let mut input: Vec<(usize, K)> = input.into_iter().collect();
    let mut old: Vec<(K, R)> = old.into_iter().collect();
    input.sort_by(|a, b| a.1.cmp(&b.1));
    old.sort_by(|a, b| a.0.cmp(&b.0));
    let mut j = Join {
        matched: Vec::new(),
        added: Vec::new(),
        gone: Vec::new(),
    };
    let mut olds = old.into_iter().peekable();
    for (i, k) in input {
        while let Some((_, row)) = olds.next_if(|(ok, _)| *ok < k) {
            j.gone.push(row);
        }
        match olds.next_if(|(ok, _)| *ok == k) {
            None => j.added.push(i),
            Some((_, row)) => j.matched.push((i, row)),
        }
    }
    j.gone.extend(olds.map(|(_, row)| row));
    j
}

/// A keyed overwrite's decision from its join: the input rows `added` are
/// new, `changed` replace the parent's row given, `gone` are deleted.
pub(crate) fn by_join(
    d: &mut Decision,
    added: &[usize],
    changed: impl IntoIterator<Item = (usize, OldRow)>,
    mut gone: Vec<OldRow>,
) {
    for i in added {
        d.add(*i);
    }
    for (i, row) in changed {
        d.change(i, &row);
    }
    // Removals are kept in a stable order: by file and position.
    gone.sort_unstable_by_key(|r| (r.loc.file, r.loc.pos));
    for r in &gone {
        d.delete(r);
    }
}

/// Overwrite of an unkeyed table: the rows' multisets decide. Each input
/// row uses up one old row with the same hash (the earliest); what is left
/// of the input is added and what is left of the parent deleted.
pub(crate) fn by_multiset(hashes: &[RowHash], old: &[OldRow]) -> Decision {
    let mut d = Decision::keep_all(hashes.len());
    let mut pool: HashMap<RowHash, Vec<Loc>> = HashMap::new();
    for r in old.iter().rev() {
        pool.entry(r.hash).or_default().push(r.loc);
    }
    for (i, h) in hashes.iter().enumerate() {
        if pool.get_mut(h).and_then(Vec::pop).is_none() {
            d.add(i);
        }
    }
    let mut gone: Vec<OldRow> = pool
        .into_iter()
        .flat_map(|(hash, locs)| locs.into_iter().map(move |loc| OldRow { loc, hash }))
        .collect();
    gone.sort_unstable_by_key(|r| (r.loc.file, r.loc.pos));
    for r in &gone {
        d.delete(r);
    }
    d
}

/// Whether an overwrite's input, whose row hashes are `hashes`, holds the
/// parent's rows exactly (in any order): the same count and the same sum.
pub(crate) fn same_rows(hashes: &[RowHash], parent: &TableSnapshot) -> bool {
    hashes.len() as u64 == parent.rows
        && hashes.iter().copied().collect::<ContentHash>() == parent.content_hash
}

/// What an overwrite of a keyed table must read: the parent files to read
/// (ascending) and the input rows to decide against their rows (in key
/// order). The input rows left out are, with the files left out, the same
/// rows: kept as they are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Scope {
    pub(crate) read: Vec<usize>,
    pub(crate) rows: Vec<u32>,
    /// Files compared with the input row by row instead ([`Aligned`]).
    pub(crate) aligned: Vec<Aligned>,
}

/// A parent file that no other file overlaps and that hides no row, with
/// as many input rows in its key range as it has rows: when their keys are
/// its keys, the input row at its position `p` (in key order) is its row
/// `p` again or that row changed, so comparing the two decides it without
/// hashing the file's rows or looking its keys up ([`by_position`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Aligned {
    /// The file.
    pub(crate) file: usize,
    /// Its input rows: this range of the input's key order.
    pub(crate) rows: Range<usize>,
}

/// An aligned file's decision (its keys matched the input's, position by
/// position): `rows` are the input rows at its positions, `differs` its
/// positions whose row differs from the input's, with its row's hash there.
pub(crate) fn by_position(
    d: &mut Decision,
    file: usize,
    rows: &[u32],
    differs: impl IntoIterator<Item = (u32, RowHash)>,
) {
    for (pos, hash) in differs {
        let old = OldRow {
            loc: Loc { file, pos },
            hash,
        };
        d.change(rows[pos as usize] as usize, &old);
    }
}

/// The parent's files joined where their key ranges overlap, in key order:
/// `(smallest key, largest key, files)`. `None` when a file has no bounds.
fn clusters(files: &[FileEntry]) -> Option<Vec<(&KeyBound, &KeyBound, Vec<usize>)>> {
    let mut by_min: Vec<(usize, &KeyBound, &KeyBound)> = Vec::with_capacity(files.len());
    for (i, f) in files.iter().enumerate() {
        by_min.push((i, f.key_min.as_ref()?, f.key_max.as_ref()?));
    }
    by_min.sort_by(|a, b| a.1.cmp(b.1));
    let mut out: Vec<(&KeyBound, &KeyBound, Vec<usize>)> = Vec::new();
    for (i, lo, hi) in by_min {
        match out.last_mut() {
            Some((_, top, members)) if lo <= *top => {
                if hi > *top {
                    *top = hi;
                }
                members.push(i);
            }
            _ => out.push((lo, hi, vec![i])),
        }
    }
    Some(out)
}

/// Which files an overwrite of a keyed table reads. `bounds` are the input
/// keys in key order, `order` the input rows in that order, `hashes` every
/// input row's hash. A group of overlapping files none of which hides rows
/// is left unread when the input rows in its key range are as many as its
/// rows and their hashes add up to its files' sums; a lone such file whose
/// sum differs is [`Aligned`]; every other file is read. Without bounds (a
/// composite key, or a file without its range) every file is read.
pub(crate) fn overwrite_scope(
    files: &[FileEntry],
    bounds: Option<&[KeyBound]>,
    order: &[u32],
    hashes: &[RowHash],
) -> Scope {
    let everything = || Scope {
        read: (0..files.len()).collect(),
        rows: order.to_vec(),
        aligned: Vec::new(),
    };
    let (Some(bounds), Some(groups)) = (bounds, clusters(files)) else {
        return everything();
    };
    let mut skip = vec![false; order.len()];
    let mut read = Vec::new();
    let mut aligned = Vec::new();
    for (lo, hi, members) in groups {
        let start = bounds.partition_point(|k| k < lo);
        let end = bounds.partition_point(|k| k <= hi).max(start);
        let whole = members.iter().all(|i| files[*i].deletes.is_none());
        let rows: u64 = members.iter().map(|i| files[*i].rows).sum();
        let same = whole && rows == (end - start) as u64 && {
            let sum: ContentHash = order[start..end]
                .iter()
                .map(|i| hashes[*i as usize])
                .collect();
            let mut theirs = ContentHash::EMPTY;
            members
                .iter()
                .for_each(|i| theirs.merge(&files[*i].hash_sum));
            sum == theirs
        };
        if same {
            skip[start..end].iter_mut().for_each(|s| *s = true);
        } else if let ([file], true, true) = (&members[..], whole, rows == (end - start) as u64) {
            skip[start..end].iter_mut().for_each(|s| *s = true);
            aligned.push(Aligned {
                file: *file,
                rows: start..end,
            });
        } else {
            read.extend(members);
        }
    }
    read.sort_unstable();
    let rows = order
        .iter()
        .zip(&skip)
        .filter(|(_, s)| !**s)
        .map(|(i, _)| *i)
        .collect();
    Scope {
        read,
        rows,
        aligned,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use tablepin_format::{DeletionVector, ObjectId};

    /// A row of the model: key and value; its hash is BLAKE3 of both.
    type Row = (i64, i64);

    fn hash((k, v): Row) -> RowHash {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&k.to_le_bytes());
        b[8..].copy_from_slice(&v.to_le_bytes());
        *blake3::hash(&b).as_bytes()
    }

    /// A parent: files of rows (sorted by key when keyed), some positions
    /// hidden.
    #[derive(Debug, Clone)]
    struct Parent {
        files: Vec<Vec<Row>>,
        hidden: Vec<Vec<u32>>,
    }

    impl Parent {
        fn live(&self) -> Vec<(Loc, Row)> {
            let mut out = Vec::new();
            for (fi, rows) in self.files.iter().enumerate() {
                for (p, r) in rows.iter().enumerate() {
                    if !self.hidden[fi].contains(&(p as u32)) {
                        out.push((
                            Loc {
                                file: fi,
                                pos: p as u32,
                            },
                            *r,
                        ));
                    }
                }
            }
            out
        }

        fn old_rows(&self) -> Vec<OldRow> {
            self.live()
                .into_iter()
                .map(|(loc, r)| OldRow { loc, hash: hash(r) })
                .collect()
        }

        /// The rows after the decision: the live rows it does not hide and
        /// the input rows it writes, sorted.
        fn apply(&self, d: &Decision, input: &[Row]) -> Vec<Row> {
            let mut out: Vec<Row> = self
                .live()
                .into_iter()
                .filter(|(l, _)| !d.removals.get(&l.file).is_some_and(|v| v.contains(&l.pos)))
                .map(|(_, r)| r)
                .collect();
            out.extend(
                input
                    .iter()
                    .zip(&d.write)
                    .filter(|(_, w)| **w)
                    .map(|(r, _)| *r),
            );
            out.sort_unstable();
            out
        }

        fn entries(&self) -> Vec<FileEntry> {
            self.files
                .iter()
                .zip(&self.hidden)
                .map(|(rows, hidden)| FileEntry {
                    data: ObjectId::of(format!("{rows:?}").as_bytes()),
                    rows: rows.len() as u64,
                    bytes: 0,
                    hash_sum: rows.iter().map(|r| hash(*r)).collect(),
                    deletes: (!hidden.is_empty()).then(|| DeletionVector {
                        blob: ObjectId::of(b"dv"),
                        count: hidden.len() as u64,
                        bytes: 0,
                        offset: None,
                    }),
                    key_min: rows.first().map(|r| KeyBound::Int(r.0)),
                    key_max: rows.last().map(|r| KeyBound::Int(r.0)),
                })
                .collect()
        }

        fn snapshot(&self) -> TableSnapshot {
            let live = self.live();
            TableSnapshot {
                format: tablepin_format::FORMAT_VERSION,
                schema: arrow::datatypes::Schema::empty(),
                key: vec!["k".into()],
                files: self.entries(),
                rows: live.len() as u64,
                content_hash: live.iter().map(|(_, r)| hash(*r)).collect(),
            }
        }
    }

    /// A keyed parent: unique keys from a small range spread over files
    /// (whose ranges may overlap), a few positions hidden.
    fn keyed_parent() -> impl Strategy<Value = Parent> {
        (
            prop::collection::btree_map(0i64..60, 0i64..4, 0..40),
            prop::collection::vec(0usize..4, 40),
            prop::collection::vec(any::<bool>(), 40),
            any::<bool>(),
        )
            .prop_map(|(rows, mut file_of, hide, apart)| {
                if apart {
                    // Files in key order, none overlapping another.
                    file_of.sort_unstable();
                }
                let mut files = vec![Vec::new(); 4];
                for (j, (k, v)) in rows.into_iter().enumerate() {
                    files[file_of[j]].push((k, v));
                }
                // Hide every other chosen row: a hidden row's key may come
                // back in the input.
                let hidden = files
                    .iter()
                    .enumerate()
                    .map(|(fi, f)| {
                        (0..f.len() as u32)
                            .filter(|p| hide[(fi * 7 + *p as usize) % 40] && p % 3 == 0)
                            .collect()
                    })
                    .collect();
                Parent { files, hidden }
            })
    }

    /// Input rows derived from the parent's live rows: some kept, some
    /// with another value, some new keys, shuffled.
    fn keyed_input(p: &Parent, edits: &[(u8, i64)], shuffle: &[usize]) -> Vec<Row> {
        let mut keys: BTreeMap<i64, i64> = BTreeMap::new();
        let live = p.live();
        for (j, (_, (k, v))) in live.iter().enumerate() {
            match edits.get(j).map_or(0, |e| e.0 % 4) {
                0 | 1 => {
                    keys.insert(*k, *v);
                }
                2 => {
                    keys.insert(*k, v + 1 + edits[j].1.rem_euclid(3));
                }
                _ => {} // dropped
            }
        }
        for (_, extra) in edits.iter().take(5) {
            keys.entry(60 + extra.rem_euclid(20)).or_insert(*extra);
        }
        let mut rows: Vec<Row> = keys.into_iter().collect();
        for (i, s) in shuffle.iter().enumerate() {
            let n = rows.len();
            if n > 0 {
                rows.swap(i % n, s % n);
            }
        }
        rows
    }

    fn sorted(mut rows: Vec<Row>) -> Vec<Row> {
        rows.sort_unstable();
        rows
    }

    proptest! {
        /// Overwrite, keyed: the parent with the decision applied is the
        /// input; only rows that differ from their old row are written;
        /// the hidden rows' hashes are summed.
        #[test]
        fn a_keyed_overwrite_applied_to_the_parent_gives_the_input(
            p in keyed_parent(),
            edits in prop::collection::vec((any::<u8>(), any::<i64>()), 40),
            shuffle in prop::collection::vec(any::<usize>(), 0..10),
        ) {
            let input = keyed_input(&p, &edits, &shuffle);
            let hashes: Vec<RowHash> = input.iter().map(|r| hash(*r)).collect();
            let mut d = Decision::keep_all(input.len());
            by_key(
                &mut d,
                input.iter().enumerate().map(|(i, r)| (i, r.0)),
                &hashes,
                p.live().into_iter().map(|(loc, r)| (r.0, OldRow { loc, hash: hash(r) })),
            );
            prop_assert_eq!(p.apply(&d, &input), sorted(input.clone()));
            let old: Vec<Row> = p.live().into_iter().map(|(_, r)| r).collect();
            let fresh = input.iter().filter(|r| !old.contains(r)).count();
            prop_assert_eq!(d.written(), fresh);
            prop_assert_eq!(d.added + d.changed, fresh as u64);
            let mut removed = ContentHash::EMPTY;
            for (l, r) in p.live() {
                if d.removals.get(&l.file).is_some_and(|v| v.contains(&l.pos)) {
                    removed.add(&hash(r));
                }
            }
            prop_assert_eq!(d.removed_hash, removed);
            prop_assert_eq!(d.changed + d.deleted, d.removals.values().map(Vec::len).sum::<usize>() as u64);
        }

        /// The shortcut: deciding over the scope gives what deciding over
        /// every file gives, and a group of files whose rows come again is
        /// not read.
        #[test]
        fn an_overwrite_reads_only_what_its_scope_names_and_decides_the_same(
            p in keyed_parent(),
            edits in prop::collection::vec((any::<u8>(), any::<i64>()), 40),
            shuffle in prop::collection::vec(any::<usize>(), 0..10),
        ) {
            let input = keyed_input(&p, &edits, &shuffle);
            let hashes: Vec<RowHash> = input.iter().map(|r| hash(*r)).collect();
            let mut order: Vec<u32> = (0..input.len() as u32).collect();
            order.sort_by_key(|i| input[*i as usize].0);
            let bounds: Vec<KeyBound> = order.iter().map(|i| KeyBound::Int(input[*i as usize].0)).collect();
            let entries = p.entries();
            let scope = overwrite_scope(&entries, Some(&bounds), &order, &hashes);
            let mut d = Decision::keep_all(input.len());
            // Aligned files: compared row by row when their keys are the
            // input's at every position, else decided by key after all.
            let (mut read, mut rows) = (scope.read.clone(), scope.rows.clone());
            for a in &scope.aligned {
                let file = &p.files[a.file];
                let ins = &order[a.rows.clone()];
                prop_assert!(p.hidden[a.file].is_empty());
                prop_assert_eq!(ins.len(), file.len());
                prop_assert!(!read.contains(&a.file));
                if ins.iter().zip(file).all(|(i, r)| input[*i as usize].0 == r.0) {
                    let differs = file
                        .iter()
                        .enumerate()
                        .filter(|(pos, r)| input[ins[*pos] as usize] != **r)
                        .map(|(pos, r)| (pos as u32, hash(*r)));
                    by_position(&mut d, a.file, ins, differs);
                } else {
                    read.push(a.file);
                    rows.extend_from_slice(ins);
                }
            }
            by_key(
                &mut d,
                rows.iter().map(|i| (*i as usize, input[*i as usize].0)),
                &hashes,
                p.live()
                    .into_iter()
                    .filter(|(l, _)| read.contains(&l.file))
                    .map(|(loc, r)| (r.0, OldRow { loc, hash: hash(r) })),
            );
            prop_assert_eq!(p.apply(&d, &input), sorted(input.clone()));
            let mut all = Decision::keep_all(input.len());
            by_key(
                &mut all,
                input.iter().enumerate().map(|(i, r)| (i, r.0)),
                &hashes,
                p.live().into_iter().map(|(loc, r)| (r.0, OldRow { loc, hash: hash(r) })),
            );
            // Removals are positions to hide: their order does not matter.
            for v in d.removals.values_mut().chain(all.removals.values_mut()) {
                v.sort_unstable();
            }
            prop_assert_eq!(&d, &all);
            // Unchanged, unhidden files are never read when their keys come
            // back with the same rows and no other file overlaps them.
            let same = same_rows(&hashes, &p.snapshot());
            if same && p.hidden.iter().all(Vec::is_empty) {
                prop_assert!(scope.read.is_empty(), "{:?}", scope);
            }
        }

        /// What a commit does, joining by key and comparing the matched
        /// rows by value (hashing only those that differ and those gone),
        /// decides what comparing every row's hash decides.
        #[test]
        fn a_join_compared_by_value_decides_as_comparing_hashes(
            p in keyed_parent(),
            edits in prop::collection::vec((any::<u8>(), any::<i64>()), 40),
            shuffle in prop::collection::vec(any::<usize>(), 0..10),
        ) {
            let input = keyed_input(&p, &edits, &shuffle);
            let hashes: Vec<RowHash> = input.iter().map(|r| hash(*r)).collect();
            let keyed = || input.iter().enumerate().map(|(i, r)| (i, r.0));
            let mut want = Decision::keep_all(input.len());
            by_key(&mut want, keyed(), &hashes, p.live().into_iter().map(|(loc, r)| (r.0, OldRow { loc, hash: hash(r) })));
            let j = join_by_key(keyed(), p.live().into_iter().map(|(loc, r)| (r.0, (loc, r))));
            let changed = j
                .matched
                .iter()
                .filter(|(i, (_, r))| input[*i] != *r)
                .map(|(i, (loc, r))| (*i, OldRow { loc: *loc, hash: hash(*r) }));
            let gone = j.gone.iter().map(|(loc, r)| OldRow { loc: *loc, hash: hash(*r) }).collect();
            let mut got = Decision::keep_all(input.len());
            by_join(&mut got, &j.added, changed, gone);
            for v in got.removals.values_mut().chain(want.removals.values_mut()) {
                v.sort_unstable();
            }
            prop_assert_eq!(got, want);
        }

        /// Upsert and append: looked-up rows replace or keep; the parent
        /// with the decision applied is the parent updated by the input.
        #[test]
        fn an_upsert_applied_to_the_parent_gives_the_parent_updated(
            p in keyed_parent(),
            edits in prop::collection::vec((any::<u8>(), any::<i64>()), 40),
        ) {
            let input = keyed_input(&p, &edits, &[]);
            let hashes: Vec<RowHash> = input.iter().map(|r| hash(*r)).collect();
            let live = p.live();
            let found: Vec<Option<OldRow>> = input
                .iter()
                .map(|r| live.iter().find(|(_, o)| o.0 == r.0).map(|(loc, o)| OldRow { loc: *loc, hash: hash(*o) }))
                .collect();
            let d = by_found(&found, &hashes);
            let mut expect: BTreeMap<i64, i64> = live.iter().map(|(_, r)| *r).collect();
            expect.extend(input.iter().copied());
            prop_assert_eq!(p.apply(&d, &input), expect.into_iter().collect::<Vec<_>>());
            prop_assert_eq!(d.deleted, 0);
            prop_assert_eq!(d.changed, d.removals.values().map(Vec::len).sum::<usize>() as u64);
        }

        /// Unkeyed, with duplicates: the parent with the decision applied
        /// has the input's multiset of rows; only surplus rows are written.
        #[test]
        fn an_unkeyed_overwrite_keeps_the_multiset(
            old in prop::collection::vec((0i64..4, 0i64..3), 0..30),
            new in prop::collection::vec((0i64..4, 0i64..3), 0..30),
            cut in 0usize..30,
        ) {
            let cut = cut.min(old.len());
            let p = Parent {
                files: vec![old[..cut].to_vec(), old[cut..].to_vec()],
                hidden: vec![Vec::new(), Vec::new()],
            };
            let hashes: Vec<RowHash> = new.iter().map(|r| hash(*r)).collect();
            let d = by_multiset(&hashes, &p.old_rows());
            prop_assert_eq!(p.apply(&d, &new), sorted(new.clone()));
            let mut left = sorted(old.clone());
            let mut surplus = 0;
            for r in &new {
                match left.binary_search(r) {
                    Ok(j) => { left.remove(j); }
                    Err(_) => surplus += 1,
                }
            }
            prop_assert_eq!(d.written(), surplus);
            prop_assert_eq!(d.deleted as usize, left.len());
            prop_assert_eq!(same_rows(&hashes, &p.snapshot()), sorted(old) == sorted(new));
        }
    }

    #[test]
    fn overlapping_files_are_one_group_and_a_changed_row_reads_its_group_only() {
        let p = Parent {
            files: vec![
                vec![(0, 0), (5, 0)],
                vec![(3, 0), (8, 0)],
                vec![(10, 0), (12, 0)],
            ],
            hidden: vec![vec![], vec![], vec![]],
        };
        let scope_of = |p: &Parent, input: &[Row]| {
            let hashes: Vec<RowHash> = input.iter().map(|r| hash(*r)).collect();
            let order: Vec<u32> = (0..input.len() as u32).collect();
            let bounds: Vec<KeyBound> = input.iter().map(|r| KeyBound::Int(r.0)).collect();
            (
                overwrite_scope(&p.entries(), Some(&bounds), &order, &hashes),
                overwrite_scope(&p.entries(), None, &order, &hashes),
            )
        };
        // Files 0 and 1 overlap (0..5, 3..8) and come back unchanged; file 2
        // holds the changed row and a new key (11) in its range: it is read,
        // and the input rows in its range are decided against it.
        let input = [(0, 0), (3, 0), (5, 0), (8, 0), (10, 0), (11, 0), (12, 1)];
        let (scope, no_bounds) = scope_of(&p, &input);
        assert_eq!(
            scope,
            Scope {
                read: vec![2],
                rows: vec![4, 5, 6],
                aligned: vec![],
            }
        );
        assert_eq!(no_bounds.read, vec![0, 1, 2], "no bounds, no shortcut");
        assert_eq!(no_bounds.rows, (0..7).collect::<Vec<u32>>());
        let hidden = Parent {
            hidden: vec![vec![1], vec![], vec![]],
            ..p.clone()
        };
        let (scope, _) = scope_of(&hidden, &input);
        assert_eq!(scope.read, vec![0, 1, 2], "a file that hides rows is read");

        // With as many rows in its range as it holds, file 2 is compared row
        // by row; key 20, outside every file, is decided by key (against
        // no file: added).
        let input = [(0, 0), (3, 0), (5, 0), (8, 0), (10, 0), (12, 1), (20, 0)];
        let (scope, _) = scope_of(&p, &input);
        assert_eq!(
            scope,
            Scope {
                read: vec![],
                rows: vec![6],
                aligned: vec![Aligned {
                    file: 2,
                    rows: 4..6
                }],
            }
        );
        let mut d = Decision::keep_all(input.len());
        by_position(&mut d, 2, &[4, 5], [(1, hash((12, 0)))]);
        assert_eq!(d.write, [false, false, false, false, false, true, false]);
        assert_eq!((d.added, d.changed, d.deleted), (0, 1, 0));
        assert_eq!(d.removals, BTreeMap::from([(2, vec![1])]));
        assert_eq!(d.removed_hash, [hash((12, 0))].into_iter().collect());
    }

    #[test]
    fn counts_of_a_small_upsert() {
        let old = |file, pos, r| {
            Some(OldRow {
                loc: Loc { file, pos },
                hash: hash(r),
            })
        };
        let input = [(1, 1), (2, 5), (3, 0)];
        let hashes: Vec<RowHash> = input.iter().map(|r| hash(*r)).collect();
        let d = by_found(&[old(0, 0, (1, 1)), old(0, 1, (2, 2)), None], &hashes);
        assert_eq!(d.write, vec![false, true, true]);
        assert_eq!((d.added, d.changed, d.deleted), (1, 1, 0));
        assert_eq!(d.removals, BTreeMap::from([(0, vec![1])]));
        assert_eq!(d.removed_hash, [hash((2, 2))].into_iter().collect());
    }
}
