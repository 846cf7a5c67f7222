//! Windows of a streamed commit: what to do with an input too large to
//! hold, decided without I/O.
//!
//! A streamed commit ([`crate::Input::Stream`]) takes its input a
//! window of rows at a time and plans each window as an ordinary commit
//! against a part of the parent, its sub-parent. For that to give the same
//! snapshot as one commit of the whole input, no two windows may touch the
//! same parent file or the same key:
//!
//! - A keyed table's input comes in key order (checked as it is read).
//!   Windows are cut between keys, never inside the key range of a group
//!   of the parent's overlapping files ([`Spans`]), so each group, and
//!   each key, falls in exactly one window, whose sub-parent it joins: an
//!   overwrite then deletes what its window's range no longer holds, an
//!   upsert or append looks its keys up where they can be.
//! - An unkeyed append adds rows without looking anything up: the first
//!   window's sub-parent is the whole parent, the others' none.
//!
//! The windows' snapshots are then put together ([`combine`]): the parent's
//! files in their order, each as its window left it, then the new files,
//! and the content hash moved by what each window moved.

use std::collections::HashMap;

use tablepin_format::{ContentHash, FileEntry, KeyBound, TableSnapshot, FORMAT_VERSION};

/// The parent's files in groups whose key ranges overlap, in key order:
/// `(smallest key, largest key, files)`, no two groups overlapping.
pub(crate) struct Spans {
    spans: Vec<(KeyBound, KeyBound, Vec<usize>)>,
    /// The first group not given to a window yet.
    next: usize,
}

/// Where a window ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Upper {
    /// It holds the keys up to this one, this one too.
    Through(KeyBound),
    /// It holds the keys below this one.
    Below(KeyBound),
    /// It holds every key left (the last window).
    Open,
}

impl Upper {
    fn admits(&self, k: &KeyBound) -> bool {
        match self {
            Upper::Through(u) => k <= u,
            Upper::Below(u) => k < u,
            Upper::Open => true,
        }
    }
}

/// Files a keyed read opens together, and the key below which every row
/// they and the files before them hold can be given; `None`: every row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stage {
    pub(crate) files: Vec<usize>,
    pub(crate) below: Option<KeyBound>,
}

impl Stage {
    fn new(files: Vec<usize>) -> Self {
        Self { files, below: None }
    }
}

impl Spans {
    /// The groups of `files`; `None` when a file has no key range (then
    /// the windows cannot be cut by key).
    pub(crate) fn of(files: &[FileEntry]) -> Option<Self> {
        let mut by_min: Vec<(usize, &KeyBound, &KeyBound)> = Vec::with_capacity(files.len());
        for (i, f) in files.iter().enumerate() {
            by_min.push((i, f.key_min.as_ref()?, f.key_max.as_ref()?));
        }
        by_min.sort_by(|a, b| a.1.cmp(b.1));
        let mut spans: Vec<(KeyBound, KeyBound, Vec<usize>)> = Vec::new();
        for (i, lo, hi) in by_min {
            match spans.last_mut() {
                Some((_, top, members)) if lo <= top => {
                    if hi > top {
                        *top = hi.clone();
                    }
                    members.push(i);
                }
                _ => spans.push((lo.clone(), hi.clone(), vec![i])),
            }
        }
        Some(Self { spans, next: 0 })
    }

    /// Where to cut a buffer of input rows whose keys, in order, are
    /// `keys`: the rows that go into the window and where it ends, or
    /// `None` to read on (every buffered key lies inside one group's
    /// range, which the cut may not split). A cut after the last key is
    /// moved back to a multiple of `unit` rows (the rows of a data file)
    /// where that splits no group and no key, so that a window's new
    /// files are full ones, as one commit of the whole input writes them.
    pub(crate) fn cut(&self, keys: &[KeyBound], unit: usize) -> Option<(usize, Upper)> {
        let last = keys.last()?;
        if let Some(lo) = self.inside(last) {
            let rows = keys.partition_point(|k| k < lo);
            return (rows > 0).then(|| (rows, Upper::Below(lo.clone())));
        }
        let whole = keys.len() - keys.len() % unit.max(1);
        if whole > 0 && whole < keys.len() && keys[whole - 1] < keys[whole] {
            let k = &keys[whole - 1];
            if self.inside(k).is_none() {
                return Some((whole, Upper::Through(k.clone())));
            }
        }
        Some((keys.len(), Upper::Through(last.clone())))
    }

    /// The smallest key of the group not yet given to a window whose
    /// range holds `k` with keys above it, if any (a cut after `k` would
    /// split it).
    fn inside(&self, k: &KeyBound) -> Option<&KeyBound> {
        let rest = &self.spans[self.next..];
        let i = rest.partition_point(|(_, hi, _)| hi <= k);
        match rest.get(i) {
            Some((lo, _, _)) if lo <= k => Some(lo),
            _ => None,
        }
    }

    /// The stages of a keyed read that merges `files` (the files these
    /// spans were made of) in key order: each group of overlapping files,
    /// and a group whose files hold more than `max_bytes` cut before a file
    /// where its files so far, by smallest key, reach that (at least one
    /// file a stage). A stage's rows below the next stage's smallest key
    /// can be given once its files are open: no later file holds a smaller
    /// one. So a read holds the files that span the key it is at (a weekly
    /// file of changes across the whole range, say) and one stage's files,
    /// not a whole group that every later change overlaps (`table::scan`).
    pub(crate) fn stages(self, files: &[FileEntry], max_bytes: u64) -> Vec<Stage> {
        let mut out: Vec<Stage> = Vec::new();
        for (_, _, members) in self.spans {
            let mut bytes = 0u64;
            let mut stage: Vec<usize> = Vec::new();
            for i in members {
                if !stage.is_empty() && bytes.saturating_add(files[i].bytes) > max_bytes {
                    out.push(Stage::new(std::mem::take(&mut stage)));
                    bytes = 0;
                }
                bytes = bytes.saturating_add(files[i].bytes);
                stage.push(i);
            }
            out.push(Stage::new(stage));
        }
        let firsts: Vec<Option<KeyBound>> = out
            .iter()
            .map(|s| s.files.first().and_then(|&i| files[i].key_min.clone()))
            .collect();
        for (stage, next) in out.iter_mut().zip(firsts.into_iter().skip(1)) {
            stage.below = next;
        }
        out
    }

    /// The parent files of the groups a window ending at `upper` holds
    /// (the groups after the previous window's, up to `upper`), ascending.
    pub(crate) fn take(&mut self, upper: &Upper) -> Vec<usize> {
        let mut files = Vec::new();
        while let Some((_, hi, members)) = self.spans.get(self.next) {
            if !upper.admits(hi) {
                break;
            }
            files.extend_from_slice(members);
            self.next += 1;
        }
        files.sort_unstable();
        files
    }
}

/// A window's part of the parent, as a snapshot to plan against: its
/// files, their live rows, and a content hash that is theirs when no file
/// hides rows (an overwrite that finds the same rows then reads nothing);
/// otherwise a sum no input matches, so the planner reads what it must.
/// What the window changed is its snapshot's hash less this one.
pub(crate) fn sub_parent(parent: &TableSnapshot, files: &[usize]) -> TableSnapshot {
    let files: Vec<FileEntry> = files.iter().map(|i| parent.files[*i].clone()).collect();
    let mut content = ContentHash::EMPTY;
    for f in &files {
        content.merge(&f.hash_sum);
    }
    TableSnapshot {
        format: FORMAT_VERSION,
        schema: parent.schema.clone(),
        key: parent.key.clone(),
        rows: files.iter().map(FileEntry::live_rows).sum(),
        files,
        content_hash: content,
    }
}

/// A table with `like`'s schema and key and no rows: the sub-parent of a
/// window that has no part of the parent, or the side of a diff where a
/// table is absent.
pub(crate) fn empty_like(like: &TableSnapshot) -> TableSnapshot {
    TableSnapshot {
        format: FORMAT_VERSION,
        schema: like.schema.clone(),
        key: like.key.clone(),
        files: Vec::new(),
        rows: 0,
        content_hash: ContentHash::EMPTY,
    }
}

/// One window planned: its sub-parent's content hash (empty when it had
/// none) and the snapshot its plan made.
pub(crate) struct Planned {
    pub(crate) sub_content: ContentHash,
    pub(crate) snapshot: TableSnapshot,
}

/// The windows' snapshots as one: the parent's files in the parent's
/// order, each as its window left it (with a new deletion vector, or gone
/// when compacted away), then every new file in window order; the content
/// hash is the parent's moved by each window's change.
pub(crate) fn combine(parent: Option<&TableSnapshot>, windows: Vec<Planned>) -> TableSnapshot {
    let Some(last) = windows.last() else {
        return parent.cloned().unwrap_or_else(|| TableSnapshot {
            format: FORMAT_VERSION,
            schema: arrow::datatypes::Schema::empty(),
            key: Vec::new(),
            files: Vec::new(),
            rows: 0,
            content_hash: ContentHash::EMPTY,
        });
    };
    let (schema, key) = (last.snapshot.schema.clone(), last.snapshot.key.clone());
    let at: HashMap<_, usize> = parent
        .map(|p| {
            p.files
                .iter()
                .enumerate()
                .map(|(i, f)| (f.data, i))
                .collect()
        })
        .unwrap_or_default();
    let mut kept: Vec<(usize, FileEntry)> = Vec::new();
    let mut new = Vec::new();
    let mut content = parent.map_or(ContentHash::EMPTY, |p| p.content_hash);
    for w in windows {
        content.unmerge(&w.sub_content);
        content.merge(&w.snapshot.content_hash);
        for f in w.snapshot.files {
            match at.get(&f.data) {
                Some(i) => kept.push((*i, f)),
                None => new.push(f),
            }
        }
    }
    kept.sort_by_key(|(i, _)| *i);
    let mut files: Vec<FileEntry> = kept.into_iter().map(|(_, f)| f).collect();
    files.extend(new);
    TableSnapshot {
        format: FORMAT_VERSION,
        schema,
        key,
        rows: files.iter().map(FileEntry::live_rows).sum(),
        files,
        content_hash: content,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tablepin_format::ObjectId;

    fn file(lo: i64, hi: i64) -> FileEntry {
        FileEntry {
            data: ObjectId::of(format!("{lo}-{hi}").as_bytes()),
            rows: (hi - lo + 1) as u64,
            bytes: 1,
            hash_sum: ContentHash::EMPTY,
            deletes: None,
            key_min: Some(KeyBound::Int(lo)),
            key_max: Some(KeyBound::Int(hi)),
        }
    }

    fn keys(v: &[i64]) -> Vec<KeyBound> {
        v.iter().map(|k| KeyBound::Int(*k)).collect()
    }

    #[test]
    fn a_cut_never_splits_a_group_of_overlapping_files() {
        // Groups: [0,9] (files 0, 2 overlap), [20,29], [40,49].
        let files = [file(0, 5), file(20, 29), file(3, 9), file(40, 49)];
        let mut s = Spans::of(&files).unwrap();
        // The buffer ends inside [20,29]: cut below 20.
        assert_eq!(
            s.cut(&keys(&[1, 4, 12, 22]), 1),
            Some((3, Upper::Below(KeyBound::Int(20))))
        );
        assert_eq!(s.take(&Upper::Below(KeyBound::Int(20))), vec![0, 2]);
        // Every buffered key inside one group: read on.
        assert_eq!(s.cut(&keys(&[22, 25]), 1), None);
        // Ending on a group's last key or between groups: cut after all.
        assert_eq!(
            s.cut(&keys(&[22, 29]), 1),
            Some((2, Upper::Through(KeyBound::Int(29))))
        );
        assert_eq!(s.take(&Upper::Through(KeyBound::Int(29))), vec![1]);
        assert_eq!(
            s.cut(&keys(&[30, 35]), 1),
            Some((2, Upper::Through(KeyBound::Int(35))))
        );
        // Back to whole files (of two rows here) where that splits no
        // key: after 31, but not between two rows of key 30.
        assert_eq!(
            s.cut(&keys(&[30, 31, 33]), 2),
            Some((2, Upper::Through(KeyBound::Int(31))))
        );
        assert_eq!(
            s.cut(&keys(&[30, 30, 30]), 2),
            Some((3, Upper::Through(KeyBound::Int(30))))
        );
        assert_eq!(
            s.take(&Upper::Through(KeyBound::Int(35))),
            Vec::<usize>::new()
        );
        // The last window takes every group left.
        assert_eq!(s.take(&Upper::Open), vec![3]);
        assert_eq!(s.take(&Upper::Open), Vec::<usize>::new());
    }

    #[test]
    fn a_large_group_is_read_in_stages_by_smallest_key() {
        // One group: a file spanning everything (a weekly file of changes)
        // and four disjoint files of 10 bytes each; then a group apart.
        let mut files = vec![file(0, 99), file(0, 24), file(25, 49), file(50, 74)];
        files.push(file(75, 99));
        files.push(file(200, 209));
        for f in &mut files {
            f.bytes = 10;
        }
        let stage = |f: &[usize], below: Option<i64>| Stage {
            files: f.to_vec(),
            below: below.map(KeyBound::Int),
        };
        // At most 20 bytes a stage: the spanning file opens with the first.
        assert_eq!(
            Spans::of(&files).unwrap().stages(&files, 20),
            vec![
                stage(&[0, 1], Some(25)),
                stage(&[2, 3], Some(75)),
                stage(&[4], Some(200)),
                stage(&[5], None),
            ]
        );
        // A budget the group fits in: one stage a group, as before.
        assert_eq!(
            Spans::of(&files).unwrap().stages(&files, 1000),
            vec![stage(&[0, 1, 2, 3, 4], Some(200)), stage(&[5], None)]
        );
    }

    #[test]
    fn combined_windows_keep_the_parent_s_order_and_move_the_hash_by_each_change() {
        let h = |b: &[u8]| -> ContentHash {
            let row: tablepin_format::RowHash = *blake3::hash(b).as_bytes();
            [row].into_iter().collect()
        };
        let mut files = vec![file(0, 9), file(10, 19), file(20, 29)];
        for (i, f) in files.iter_mut().enumerate() {
            f.hash_sum = h(&[i as u8]);
        }
        let mut parent = empty_like(&TableSnapshot {
            format: FORMAT_VERSION,
            schema: arrow::datatypes::Schema::empty(),
            key: vec!["id".into()],
            files: Vec::new(),
            rows: 0,
            content_hash: ContentHash::EMPTY,
        });
        parent.files = files.clone();
        parent.rows = 30;
        for f in &files {
            parent.content_hash.merge(&f.hash_sum);
        }
        // Window 1 holds files 1 and 2 and replaces file 2 by a new one;
        // window 2 holds file 0, unchanged.
        let w1_sub = sub_parent(&parent, &[1, 2]);
        let mut w1 = w1_sub.clone();
        let mut replaced = file(20, 29);
        replaced.data = ObjectId::of(b"new");
        replaced.hash_sum = h(b"new");
        w1.files = vec![files[1].clone(), replaced.clone()];
        w1.content_hash = ContentHash::EMPTY;
        w1.content_hash.merge(&files[1].hash_sum);
        w1.content_hash.merge(&replaced.hash_sum);
        let w2_sub = sub_parent(&parent, &[0]);
        let w2 = w2_sub.clone();
        let out = combine(
            Some(&parent),
            vec![
                Planned {
                    sub_content: w1_sub.content_hash,
                    snapshot: w1,
                },
                Planned {
                    sub_content: w2_sub.content_hash,
                    snapshot: w2,
                },
            ],
        );
        assert_eq!(
            out.files,
            vec![files[0].clone(), files[1].clone(), replaced.clone()]
        );
        let mut want = ContentHash::EMPTY;
        for f in &out.files {
            want.merge(&f.hash_sum);
        }
        assert_eq!(out.content_hash, want);
        assert_eq!(out.rows, 30);
    }
}
