//! Crash safety: a command killed at every one of its writes (the store's
//! fault hook aborts the process before write N+1) leaves a repository that
//! `verify` passes, with each ref at its old version or its new one, never
//! between; running the command again finishes the job.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{copy_dir, Project, SALES};

/// Runs `args` in a fresh copy of `base` with the fault after k writes, for
/// every k until the command completes; checks each crashed state with
/// `check(project, crashed)`.
fn kill_at_every_write(base: &Project, args: &[&str], check: impl Fn(&Project, bool)) -> u64 {
    let mut k = 0u64;
    loop {
        let p = Project {
            dir: tempfile::tempdir().unwrap(),
        };
        copy_dir(&base.file(".tablepin"), &p.file(".tablepin"));
        for f in std::fs::read_dir(base.path()).unwrap().flatten() {
            if f.path().is_file() {
                std::fs::copy(f.path(), p.file(&f.file_name().to_string_lossy())).unwrap();
            }
        }
        let r = p.run_env(args, &[("TABLEPIN_FAULT_AFTER_WRITES", &k.to_string())]);
        let crashed = r.code != Some(0);
        if crashed {
            assert_eq!(
                r.code, None,
                "killed by the fault (a signal), not an error: {}",
                r.stderr
            );
        }
        let v = p.run(&["verify"]);
        assert_eq!(v.code, Some(0), "after a kill at write {k}: {}", v.stdout);
        check(&p, crashed);
        if !crashed {
            return k;
        }
        k += 1;
        assert!(k < 500, "the command never completed");
    }
}

#[test]
fn a_commit_killed_at_any_write_leaves_old_or_new() {
    let base = Project::new();
    let f = base.write("sales.csv", SALES);
    base.run(&["commit", "sales", &f, "--key", "id"]).ok();
    let old = base.head();
    base.write(
        "next.csv",
        "id,name,qty\n1,apple,3\n2,pear,9\n3,plum,7\n4,fig,2\n",
    );
    let writes = kill_at_every_write(&base, &["commit", "sales", "next.csv"], |p, crashed| {
        let h = p.head();
        if crashed {
            // Old version, still whole.
            if h == old {
                let cat = p.run(&["--json", "cat", "main", "sales"]);
                cat.ok();
                assert!(cat.stdout.contains("\"total_rows\": 3"), "{}", cat.stdout);
            }
        }
        let cat = p.run(&["--json", "cat", "main", "sales"]);
        cat.ok();
        let rows = if h == old { 3 } else { 4 };
        assert!(
            cat.stdout.contains(&format!("\"total_rows\": {rows}")),
            "{}",
            cat.stdout
        );
        // Running it again always lands the commit.
        p.run(&["commit", "sales", "next.csv"]).ok();
        assert!(p
            .run(&["--json", "cat", "main", "sales"])
            .stdout
            .contains("\"total_rows\": 4"));
    });
    assert!(writes >= 4, "a commit makes several writes ({writes})");
}
