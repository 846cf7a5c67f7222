//! The check against real DVC (`tablepin lab --dvc`): the month layout
//! versioned by the `dvc` command as the original experiment did it. For
//! each version, that version's month files are written into a folder
//! (only the files that changed are rewritten, files of months gone are
//! removed), then `dvc add` and `dvc push` to a local folder used as the
//! remote. At the end the remote's files are counted: DVC stores each
//! distinct file once, named by its MD5, plus one listing (`.dir`) per
//! distinct state of the folder. The files must be the month layout's,
//! to the byte.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde::Serialize;
use tablepin_format::ObjectId;

use crate::layouts::Rec;
use crate::LabError;

/// What DVC's remote holds at the end.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Remote {
    /// Data files (one per distinct file content).
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Folder listings (`.dir`), one per distinct state of the folder.
    pub listings: u64,
    /// Their bytes.
    pub listing_bytes: u64,
}

/// Adds up a remote's files from (path, bytes): a path ending in `.dir`
/// is one of DVC's folder listings, any other a data file.
pub fn tally(files: impl IntoIterator<Item = (String, u64)>) -> Remote {
    let mut r = Remote::default();
    for (path, bytes) in files {
        if path.ends_with(".dir") {
            r.listings += 1;
            r.listing_bytes += bytes;
        } else {
            r.files += 1;
            r.bytes += bytes;
        }
    }
    r
}

/// The MD5 of `bytes` in hex, as DVC names a file by its content.
pub fn md5_hex(bytes: &[u8]) -> String {
    use md5::Digest;
    format!("{:x}", md5::Md5::digest(bytes))
}

/// The content a remote's data file holds by its path, as DVC 3 names it
/// (`files/md5/ab/cdef...`: the MD5 split after two characters); `None`
/// for a folder listing (`.dir`) or another path.
pub fn md5_of_path(path: &str) -> Option<String> {
    let mut parts = path.rsplit('/');
    let (rest, first) = (parts.next()?, parts.next()?);
    let md5 = format!("{first}{rest}");
    (md5.len() == 32 && md5.bytes().all(|b| b.is_ascii_hexdigit())).then_some(md5)
}

/// Compares the MD5s written with a remote's paths: `None` when its data
/// files are exactly those, else what differs.
pub fn compare_md5s<'a>(
    written: &std::collections::BTreeSet<String>,
    paths: impl IntoIterator<Item = &'a str>,
) -> Option<String> {
    let held: std::collections::BTreeSet<String> = paths
        .into_iter()
        .filter(|p| !p.ends_with(".dir"))
        .filter_map(md5_of_path)
        .collect();
    if let Some(m) = written.difference(&held).next() {
        return Some(format!(
            "the month file with MD5 {m} is not in dvc's remote"
        ));
    }
    held.difference(written)
        .next()
        .map(|m| format!("dvc's remote holds a file with MD5 {m} that no month file has"))
}

/// A month file's name in the folder DVC versions (`2010-12.parquet`),
/// from the month layout's key (year * 12 + month, from 0).
pub fn file_name(month: i64) -> String {
    format!(
        "{}-{:02}.parquet",
        month.div_euclid(12),
        month.rem_euclid(12) + 1
    )
}

/// What to change in the folder to make it hold `current`: the files to
/// write (name, key) and the names to remove, given what it holds
/// (`written`: name to content).
pub fn sync_plan(
    written: &BTreeMap<String, ObjectId>,
    current: &BTreeMap<i64, Rec>,
) -> (Vec<(String, i64)>, Vec<String>) {
    let want: BTreeMap<String, (i64, ObjectId)> = current
        .iter()
        .map(|(k, r)| (file_name(*k), (*k, r.id)))
        .collect();
    let write = want
        .iter()
        .filter(|(name, (_, id))| written.get(*name) != Some(id))
        .map(|(name, (k, _))| (name.clone(), *k))
        .collect();
    let remove = written
        .keys()
        .filter(|name| !want.contains_key(*name))
        .cloned()
        .collect();
    (write, remove)
}

/// A DVC project in a folder, with a local folder as its remote.
pub struct Dvc {
    dvc: PathBuf,
    root: PathBuf,
    remote: PathBuf,
    written: BTreeMap<String, ObjectId>,
    /// The MD5 of every month file written, as DVC names them.
    md5s: std::collections::BTreeSet<String>,
    /// Versions added and pushed.
    pub versions: u64,
    /// Seconds spent in the `dvc` command.
    pub seconds: f64,
}

impl Dvc {
    /// The `dvc` command on `path` (the `PATH` variable's value), or an
    /// error saying how to get it.
    pub fn find(path: Option<&std::ffi::OsStr>) -> Result<PathBuf, LabError> {
        path.and_then(|p| find_on_path("dvc", p)).ok_or_else(|| {
            LabError::Other(
                "--dvc runs the `dvc` command, and there is none on PATH; install it (pip install dvc) or leave --dvc out".into(),
            )
        })
    }

    /// Makes a project (no Git) in `dir/project` whose default remote is
    /// `dir/remote`, run by the command `dvc` (see [`Dvc::find`]).
    pub fn start(dvc: PathBuf, dir: &Path) -> Result<Self, LabError> {
        let root = dir.join("project");
        let remote = dir.join("remote");
        for d in [&root, &root.join("data"), &remote] {
            std::fs::create_dir_all(d).map_err(|e| LabError::output(d, e))?;
        }
        let mut me = Self {
            dvc,
            root,
            remote,
            written: BTreeMap::new(),
            md5s: Default::default(),
            versions: 0,
            seconds: 0.0,
        };
        me.run(&["init", "--no-scm", "-q"])?;
        me.run(&["config", "core.analytics", "false"])?;
        let remote = me.remote.to_string_lossy().into_owned();
        me.run(&["remote", "add", "-d", "local", &remote])?;
        Ok(me)
    }

    /// Makes the folder hold `current` (the month layout's files now),
    /// then `dvc add` and `dvc push`.
    pub fn version(&mut self, current: &BTreeMap<i64, Rec>) -> Result<(), LabError> {
        let data = self.root.join("data");
        let (write, remove) = sync_plan(&self.written, current);
        for name in remove {
            let p = data.join(&name);
            std::fs::remove_file(&p).map_err(|e| LabError::output(&p, e))?;
            self.written.remove(&name);
        }
        for (name, key) in write {
            let Some(rec) = current.get(&key) else {
                continue;
            };
            let p = data.join(&name);
            std::fs::write(&p, &rec.bytes).map_err(|e| LabError::output(&p, e))?;
            self.md5s.insert(md5_hex(&rec.bytes));
            self.written.insert(name, rec.id);
        }
        self.run(&["add", "-q", "data"])?;
        self.run(&["push", "-q"])?;
        self.versions += 1;
        Ok(())
    }

    /// What the remote holds.
    pub fn remote(&self) -> Result<Remote, LabError> {
        let mut files = Vec::new();
        walk(&self.remote, &mut files)?;
        Ok(tally(files))
    }

    /// Whether the remote holds the month files written, file for file:
    /// `None` when its data files are exactly those DVC names by the
    /// MD5s of what was written, else a sentence naming the first that
    /// differs.
    pub fn file_for_file(&self) -> Result<Option<String>, LabError> {
        let mut files = Vec::new();
        walk(&self.remote, &mut files)?;
        Ok(compare_md5s(
            &self.md5s,
            files.iter().map(|(p, _)| p.as_str()),
        ))
    }

    fn run(&mut self, args: &[&str]) -> Result<(), LabError> {
        let t = Instant::now();
        let out = Command::new(&self.dvc)
            .args(args)
            .current_dir(&self.root)
            .env("DVC_NO_ANALYTICS", "1")
            .output()
            .map_err(|e| LabError::Other(format!("cannot run {}: {e}", self.dvc.display())))?;
        self.seconds += t.elapsed().as_secs_f64();
        if !out.status.success() {
            let said = String::from_utf8_lossy(&out.stderr);
            let said = said.lines().rfind(|l| !l.trim().is_empty()).unwrap_or("");
            return Err(LabError::Other(format!(
                "`dvc {}` in {} failed ({}): {said}",
                args.join(" "),
                self.root.display(),
                out.status
            )));
        }
        Ok(())
    }
}

/// Every file under `dir`, as (path, bytes).
fn walk(dir: &Path, out: &mut Vec<(String, u64)>) -> Result<(), LabError> {
    for entry in std::fs::read_dir(dir).map_err(|e| LabError::output(dir, e))? {
        let entry = entry.map_err(|e| LabError::output(dir, e))?;
        let meta = entry
            .metadata()
            .map_err(|e| LabError::output(&entry.path(), e))?;
        if meta.is_dir() {
            walk(&entry.path(), out)?;
        } else {
            out.push((entry.path().to_string_lossy().into_owned(), meta.len()));
        }
    }
    Ok(())
}

/// The first executable called `name` in the folders of `path` (as the
/// `PATH` variable lists them).
fn find_on_path(name: &str, path: &std::ffi::OsStr) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(path).map(|d| d.join(name)).find(|p| {
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::sync::Arc;

    use bytes::Bytes;

    use super::*;

    fn rec(content: &str) -> Rec {
        let bytes = Bytes::from(content.to_string());
        Rec {
            id: ObjectId::of(&bytes),
            size: bytes.len() as u64,
            bytes,
            lines: Arc::new(Vec::new()),
            rows: 0,
        }
    }

    #[test]
    fn dvc_is_found_on_the_path_given_or_named_missing() {
        let dir = tempfile::tempdir().unwrap();
        let e = super::Dvc::find(Some(dir.path().as_os_str())).unwrap_err();
        assert!(e.to_string().contains("pip install dvc"), "{e}");
        assert!(super::Dvc::find(None).is_err());
        let dvc = dir.path().join("dvc");
        std::fs::write(&dvc, "#!/bin/sh\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dvc, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = std::env::join_paths(["/nonexistent".as_ref(), dir.path()]).unwrap();
        assert_eq!(super::Dvc::find(Some(&path)).unwrap(), dvc);
    }

    #[test]
    fn month_files_are_named_by_year_and_month() {
        assert_eq!(file_name(2009 * 12 + 11), "2009-12.parquet");
        assert_eq!(file_name(2010 * 12), "2010-01.parquet");
    }

    #[test]
    fn the_folder_is_synced_by_what_changed() {
        let (jan, feb) = (2010 * 12, 2010 * 12 + 1);
        let mut written = BTreeMap::new();
        let now = BTreeMap::from([(jan, rec("a")), (feb, rec("b"))]);
        let (write, remove) = sync_plan(&written, &now);
        assert_eq!(write.len(), 2);
        assert!(remove.is_empty());
        for (name, k) in write {
            written.insert(name, now[&k].id);
        }
        // February changes, January goes: one write, one removal.
        let later = BTreeMap::from([(feb, rec("b2"))]);
        let (write, remove) = sync_plan(&written, &later);
        assert_eq!(write, vec![("2010-02.parquet".to_string(), feb)]);
        assert_eq!(remove, vec!["2010-01.parquet".to_string()]);
    }

    #[test]
    fn the_remote_is_compared_file_for_file_by_md5() {
        let a = md5_hex(b"month a");
        let b = md5_hex(b"month b");
        assert_eq!(md5_hex(b""), "d41d8cd98f00b204e9800998ecf8427e");
        let written = std::collections::BTreeSet::from([a.clone(), b.clone()]);
        let path = |m: &str| format!("/r/files/md5/{}/{}", &m[..2], &m[2..]);
        let listing = "/r/files/md5/0a/bc.dir".to_string();
        let same = [path(&a), path(&b), listing.clone()];
        assert_eq!(
            compare_md5s(&written, same.iter().map(String::as_str)),
            None
        );
        let missing = [path(&a), listing.clone()];
        let said = compare_md5s(&written, missing.iter().map(String::as_str)).unwrap();
        assert!(
            said.contains(&b) && said.contains("not in dvc's remote"),
            "{said}"
        );
        let other = md5_hex(b"other");
        let extra = [path(&a), path(&b), path(&other)];
        let said = compare_md5s(&written, extra.iter().map(String::as_str)).unwrap();
        assert!(said.contains(&other), "{said}");
    }

    #[test]
    fn listings_are_told_from_data_files() {
        let r = tally([
            ("remote/files/md5/ab/cdef".to_string(), 10),
            ("remote/files/md5/12/3456.dir".to_string(), 3),
            ("remote/files/md5/ff/0000".to_string(), 5),
        ]);
        assert_eq!(
            r,
            Remote {
                files: 2,
                bytes: 15,
                listings: 1,
                listing_bytes: 3
            }
        );
    }
}
