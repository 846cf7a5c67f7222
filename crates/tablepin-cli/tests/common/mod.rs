//! Shared helpers of the command-line tests: a temporary project folder,
//! a way to run `tablepin` in it, and a fingerprint of the repository's
//! files to prove a failed command changed nothing.

#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub struct Project {
    pub dir: tempfile::TempDir,
}

pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    fn from(o: Output) -> Self {
        Self {
            code: o.status.code(),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }

    #[track_caller]
    pub fn ok(&self) -> &Self {
        assert_eq!(
            self.code,
            Some(0),
            "stdout: {}\nstderr: {}",
            self.stdout,
            self.stderr
        );
        self
    }

    /// Fails with this exit code and a one-sentence error containing `msg`.
    #[track_caller]
    pub fn fails(&self, code: i32, msg: &str) -> &Self {
        assert_eq!(
            self.code,
            Some(code),
            "stdout: {}\nstderr: {}",
            self.stdout,
            self.stderr
        );
        assert!(
            self.stderr.contains(msg),
            "stderr lacks {msg:?}: {}",
            self.stderr
        );
        assert_eq!(
            self.stderr.trim_end().lines().count(),
            1,
            "one line: {}",
            self.stderr
        );
        assert!(self.stderr.starts_with("tablepin: "), "{}", self.stderr);
        self
    }
}

impl Project {
    pub fn new() -> Self {
        let p = Self {
            dir: tempfile::tempdir().unwrap(),
        };
        p.run(&["init"]).ok();
        p
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn write(&self, name: &str, text: &str) -> String {
        let p = self.file(name);
        std::fs::write(&p, text).unwrap();
        p.to_string_lossy().into_owned()
    }

    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_tablepin"));
        c.args(args)
            .current_dir(self.dir.path())
            .env_remove("TABLEPIN_REPO")
            .env("TABLEPIN_AUTHOR", "test")
            .env_remove("TABLEPIN_FAULT_AFTER_WRITES");
        c
    }

    pub fn run(&self, args: &[&str]) -> Run {
        Run::from(self.cmd(args).output().unwrap())
    }

    pub fn run_env(&self, args: &[&str], env: &[(&str, &str)]) -> Run {
        let mut c = self.cmd(args);
        for (k, v) in env {
            c.env(k, v);
        }
        Run::from(c.output().unwrap())
    }

    /// Every file of the repository and a hash of its bytes.
    pub fn fingerprint(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        walk(&self.file(".tablepin"), &mut out);
        out
    }

    /// Runs a command that must fail with `code` and `msg`, and proves the
    /// repository did not change.
    #[track_caller]
    pub fn fails_unchanged(&self, args: &[&str], code: i32, msg: &str) -> Run {
        let before = self.fingerprint();
        let r = self.run(args);
        r.fails(code, msg);
        assert_eq!(
            before,
            self.fingerprint(),
            "the failed command changed the repository"
        );
        r
    }

    /// The version a branch names (12 digits).
    pub fn head(&self) -> String {
        let r = self.run(&["--json", "log"]);
        r.ok();
        let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
        v[0]["id"].as_str().unwrap().to_string()
    }
}

fn walk(dir: &Path, out: &mut BTreeMap<String, String>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            walk(&p, out);
        } else {
            let bytes = std::fs::read(&p).unwrap_or_default();
            out.insert(p.to_string_lossy().into_owned(), blake3_hex(&bytes));
        }
    }
}

fn blake3_hex(b: &[u8]) -> String {
    // A cheap stable digest is enough to see a change.
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    b.hash(&mut h);
    format!("{:016x}-{}", h.finish(), b.len())
}

pub const SALES: &str = "id,name,qty\n1,apple,3\n2,pear,5\n3,plum,7\n";

/// Copies a folder tree (a repository, for crash tests).
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let t = to.join(e.file_name());
        if e.path().is_dir() {
            copy_dir(&e.path(), &t);
        } else {
            std::fs::copy(e.path(), &t).unwrap();
        }
    }
}
