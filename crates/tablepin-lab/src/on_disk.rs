//! The reference layouts kept on disk as their users keep them, so that
//! their retention is measured, not computed.
//!
//! A shared layout (month, week, changes) writes each stored file once
//! under `objects/`, and each version as a list of its files under
//! `versions/` (kept for good, as `.dvc` files stay in git history); its
//! garbage collection reads the lists of the versions a rule keeps back
//! from disk and deletes every object none of them names. The copy layout
//! keeps each version as a folder of its own files (hard links to the
//! month layout's, so the disk holds them once; each link counts as the
//! copy it stands for). What a rule keeps is then
//! measured from the file system: the bytes and files present, and the tags
//! whose every file is there with the bytes its name is the hash of.
//!
//! The playground's figures are checked against these measurements, which
//! share no arithmetic with the page or with the lab's retention table.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use tablepin_format::ObjectId;

use crate::layouts::{Changes, History, Partitioned};
use crate::LabError;

/// What a rule kept, measured from the file system.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Measured {
    pub bytes: u64,
    pub files: u64,
    pub tags_readable: u64,
}

/// One layout on disk.
pub struct OnDisk {
    dir: PathBuf,
    /// Every version a folder of its own files (the copy layout).
    copies: bool,
}

impl OnDisk {
    /// A layout of shared files in `dir` (created).
    pub fn shared(dir: &Path) -> Result<Self, LabError> {
        Self::create(dir, false)
    }

    /// The copy layout in `dir`: each version a folder of its own files.
    pub fn copies(dir: &Path) -> Result<Self, LabError> {
        Self::create(dir, true)
    }

    fn create(dir: &Path, copies: bool) -> Result<Self, LabError> {
        for sub in ["objects", "versions"] {
            let p = dir.join(sub);
            std::fs::create_dir_all(&p).map_err(|e| LabError::output(&p, e))?;
        }
        Ok(Self {
            dir: dir.to_path_buf(),
            copies,
        })
    }

    fn object(&self, id: &ObjectId) -> PathBuf {
        self.dir.join("objects").join(format!("{id}.parquet"))
    }

    fn version(&self, n: usize) -> PathBuf {
        self.dir.join("versions").join(n.to_string())
    }

    /// Stores a file's bytes unless a file of that id is there.
    pub fn put(&self, id: &ObjectId, bytes: &[u8]) -> Result<(), LabError> {
        let p = self.object(id);
        if !p.exists() {
            std::fs::write(&p, bytes).map_err(|e| LabError::output(&p, e))?;
        }
        Ok(())
    }

    /// Records version `n` as its files: a list for a shared layout, a
    /// folder of links for copies (to `from`'s objects, which must hold
    /// them).
    pub fn add_version(&self, n: usize, files: &[ObjectId], from: &OnDisk) -> Result<(), LabError> {
        let p = self.version(n);
        if !self.copies {
            let list: String = files.iter().map(|id| format!("{id}\n")).collect();
            return std::fs::write(&p, list).map_err(|e| LabError::output(&p, e));
        }
        std::fs::create_dir_all(&p).map_err(|e| LabError::output(&p, e))?;
        for id in files {
            let to = p.join(format!("{id}.parquet"));
            std::fs::hard_link(from.object(id), &to).map_err(|e| LabError::output(&to, e))?;
        }
        Ok(())
    }

    /// Applies a rule keeping the versions `keep`. Copies: deletes the
    /// other versions' folders. Shared layouts: deletes every object no
    /// kept version names (read back from disk); the lists themselves stay,
    /// as a DVC user's `.dvc` files stay in git history, so an old version
    /// whose files all survive can still be read.
    pub fn gc(&self, keep: &BTreeSet<usize>) -> Result<(), LabError> {
        if self.copies {
            for (n, p) in self.versions()? {
                if !keep.contains(&n) {
                    std::fs::remove_dir_all(&p).map_err(|e| LabError::output(&p, e))?;
                }
            }
            return Ok(());
        }
        let mut named = BTreeSet::new();
        for (n, p) in self.versions()? {
            if keep.contains(&n) {
                named.extend(self.list(&p)?);
            }
        }
        for p in files_in(&self.dir.join("objects"))? {
            if !named.contains(&p) {
                std::fs::remove_file(&p).map_err(|e| LabError::output(&p, e))?;
            }
        }
        Ok(())
    }

    /// The versions on disk, by number.
    fn versions(&self) -> Result<Vec<(usize, PathBuf)>, LabError> {
        let dir = self.dir.join("versions");
        let mut out = Vec::new();
        for p in std::fs::read_dir(&dir).map_err(|e| LabError::output(&dir, e))? {
            let p = p.map_err(|e| LabError::output(&dir, e))?.path();
            let n = p.file_name().and_then(|n| n.to_str()?.parse().ok());
            let n =
                n.ok_or_else(|| LabError::Other(format!("{} is not a version", p.display())))?;
            out.push((n, p));
        }
        Ok(out)
    }

    /// The files of a version on disk.
    fn list(&self, version: &Path) -> Result<Vec<PathBuf>, LabError> {
        if self.copies {
            return files_in(version);
        }
        let text = std::fs::read_to_string(version).map_err(|e| LabError::output(version, e))?;
        text.lines()
            .map(|s| {
                let id: ObjectId = s.parse().map_err(|_| {
                    LabError::Other(format!("{}: '{s}' is not a file id", version.display()))
                })?;
                Ok(self.object(&id))
            })
            .collect()
    }

    /// Measures what is on disk: bytes and files present (each copy
    /// counted), and which of `tags` (version numbers) have every file
    /// there with the bytes its name is the hash of.
    pub fn measure(&self, tags: &[usize]) -> Result<Measured, LabError> {
        let present = if self.copies {
            let mut all = Vec::new();
            for (_, p) in self.versions()? {
                all.extend(files_in(&p)?);
            }
            all
        } else {
            files_in(&self.dir.join("objects"))?
        };
        let mut bytes = 0;
        for p in &present {
            bytes += std::fs::metadata(p)
                .map_err(|e| LabError::output(p, e))?
                .len();
        }
        let mut tags_readable = 0;
        for &t in tags {
            let v = self.version(t);
            if v.exists() && self.list(&v)?.iter().all(|f| intact(f)) {
                tags_readable += 1;
            }
        }
        Ok(Measured {
            bytes,
            files: present.len() as u64,
            tags_readable,
        })
    }
}

/// A file is there and its bytes hash to its name.
fn intact(p: &Path) -> bool {
    let name = p.file_stem().and_then(|s| s.to_str());
    let Some(want) = name.and_then(|s| s.parse::<ObjectId>().ok()) else {
        return false;
    };
    std::fs::File::open(p)
        .and_then(|f| ObjectId::of_reader(std::io::BufReader::new(f)))
        .is_ok_and(|got| got == want)
}

fn files_in(dir: &Path) -> Result<Vec<PathBuf>, LabError> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).map_err(|e| LabError::output(dir, e))? {
        out.push(e.map_err(|e| LabError::output(dir, e))?.path());
    }
    out.sort();
    Ok(out)
}

/// The four reference layouts on disk, fed as the lab commits.
pub struct Disks {
    month: OnDisk,
    week: OnDisk,
    changes: OnDisk,
    copy: OnDisk,
}

impl Disks {
    /// The layouts' folders under `dir`.
    pub fn new(dir: &Path) -> Result<Self, LabError> {
        let d = dir.join("on-disk");
        Ok(Self {
            month: OnDisk::shared(&d.join("month"))?,
            week: OnDisk::shared(&d.join("week"))?,
            changes: OnDisk::shared(&d.join("changes"))?,
            copy: OnDisk::copies(&d.join("copy"))?,
        })
    }

    /// Stores the files each layout holds after a commit.
    pub fn put(
        &self,
        month: &Partitioned,
        week: &Partitioned,
        changes: &Changes,
    ) -> Result<(), LabError> {
        for r in month.current.values() {
            self.month.put(&r.id, &r.bytes)?;
        }
        for r in week.current.values() {
            self.week.put(&r.id, &r.bytes)?;
        }
        for f in changes.files.values() {
            self.changes.put(&f.rec.id, &f.rec.bytes)?;
        }
        Ok(())
    }

    /// Records every version, then applies each rule, the one keeping most
    /// first (each keeps a subset of the one before), measures what is
    /// left on disk and sets it beside the retention computed from the
    /// layouts' histories as `on_disk`. A measured figure that disagrees
    /// with the computed one is an error.
    pub fn measure(
        &self,
        [month, week, changes]: [&History; 3],
        rules: &[(&str, Vec<usize>)],
        tags: &[usize],
        retention: &mut serde_json::Map<String, Value>,
    ) -> Result<(), LabError> {
        let layouts = [
            ("month", &self.month, month),
            ("week", &self.week, week),
            ("changes", &self.changes, changes),
            ("copy", &self.copy, month),
        ];
        for (_, disk, hist) in &layouts {
            for (n, files) in hist.versions.iter().enumerate() {
                disk.add_version(n, files, &self.month)?;
            }
        }
        let mut order: Vec<&(&str, Vec<usize>)> = rules.iter().collect();
        order.sort_by_key(|(_, kept)| std::cmp::Reverse(kept.len()));
        let mut before: Option<BTreeSet<usize>> = None;
        for (rule, kept) in order {
            let keep: BTreeSet<usize> = kept.iter().copied().collect();
            if before.as_ref().is_some_and(|b| !keep.is_subset(b)) {
                return Err(LabError::Other(format!(
                    "the rule {rule} keeps a version an earlier rule dropped: measure it on a copy"
                )));
            }
            for (layout, disk, _) in &layouts {
                disk.gc(&keep)?;
                let m = disk.measure(tags)?;
                let entry = retention
                    .get_mut(*layout)
                    .and_then(|r| r.get_mut(*rule))
                    .ok_or_else(|| {
                        LabError::Other(format!("no retention for {layout} keeping {rule}"))
                    })?;
                for (field, got) in [("bytes", m.bytes), ("tags_readable", m.tags_readable)] {
                    if entry.get(field).and_then(Value::as_u64) != Some(got) {
                        return Err(LabError::Other(format!(
                            "{layout} keeping {rule}: {got} {field} on disk after a real deletion, {} computed",
                            entry[field]
                        )));
                    }
                }
                entry["on_disk"] = json!(m);
            }
            before = Some(keep);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gc_keeps_what_kept_versions_name_and_measures_it() {
        let dir = tempfile::tempdir().unwrap();
        let shared = OnDisk::shared(&dir.path().join("month")).unwrap();
        let copies = OnDisk::copies(&dir.path().join("copy")).unwrap();
        let (a, b, c) = (b"aaaa".as_slice(), b"bb".as_slice(), b"c".as_slice());
        let id = |x: &[u8]| ObjectId::of(x);
        for x in [a, b, c] {
            shared.put(&id(x), x).unwrap();
        }
        let versions = [vec![id(a)], vec![id(a), id(b)], vec![id(c), id(b)]];
        for (n, v) in versions.iter().enumerate() {
            shared.add_version(n, v, &shared).unwrap();
            copies.add_version(n, v, &shared).unwrap();
        }
        let all = shared.measure(&[0, 2]).unwrap();
        assert_eq!((all.bytes, all.files, all.tags_readable), (7, 3, 2));
        let all = copies.measure(&[0, 2]).unwrap();
        assert_eq!((all.bytes, all.files, all.tags_readable), (13, 5, 2));

        let keep: BTreeSet<usize> = [2].into();
        shared.gc(&keep).unwrap();
        copies.gc(&keep).unwrap();
        let kept = shared.measure(&[0, 2]).unwrap();
        assert_eq!((kept.bytes, kept.files, kept.tags_readable), (3, 2, 1));
        // A dropped version whose files a kept one names stays readable.
        assert_eq!(shared.measure(&[1]).unwrap().tags_readable, 0);
        shared.add_version(3, &[id(b)], &shared).unwrap();
        assert_eq!(shared.measure(&[3]).unwrap().tags_readable, 1);
        let kept = copies.measure(&[0, 2]).unwrap();
        assert_eq!((kept.bytes, kept.files, kept.tags_readable), (3, 2, 1));

        // A damaged file makes its tag unreadable.
        std::fs::write(shared.object(&id(c)), b"x").unwrap();
        assert_eq!(shared.measure(&[2]).unwrap().tags_readable, 0);
    }
}
