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

#[test]
fn a_commit_that_writes_a_deletion_vector_pack_killed_at_any_write_leaves_old_or_new() {
    // 300,000 rows: two data files (262,144 rows a file), so an upsert that
    // changes a row in each hides rows in both and packs the two bitmaps.
    let base = Project::new();
    let mut csv = String::from("id,name\n");
    for i in 0..300_000 {
        csv.push_str(&format!("{i},n{i}\n"));
    }
    let f = base.write("big.csv", &csv);
    base.run(&["commit", "big", &f, "--key", "id"]).ok();
    let old = base.head();
    base.write("change.csv", "id,name\n5,x\n290000,y\n");
    let args = ["commit", "big", "change.csv", "--mode", "upsert"];
    let packed = |p: &Project| -> Vec<serde_json::Value> {
        let show = p.run(&["--json", "show", "main"]);
        show.ok();
        let v: serde_json::Value = serde_json::from_str(&show.stdout).unwrap();
        v["tables"][0]["files"]
            .as_array()
            .unwrap()
            .iter()
            // `show --json` gives `"deletes": null` for a file without one.
            .filter_map(|f| f.get("deletes").filter(|d| !d.is_null()).cloned())
            .collect()
    };
    let writes = kill_at_every_write(&base, &args, |p, _| {
        let h = p.head();
        let dvs = packed(p);
        if h == old {
            assert!(dvs.is_empty(), "{dvs:?}");
        } else {
            assert_eq!(dvs.len(), 2, "{dvs:?}");
            assert_eq!(dvs[0]["blob"], dvs[1]["blob"], "one pack: {dvs:?}");
        }
        let cat = p.run(&["--json", "cat", "main", "big", "--limit", "1"]);
        cat.ok();
        assert!(
            cat.stdout.contains("\"total_rows\": 300000"),
            "{}",
            cat.stdout
        );
    });
    // The data file, the pack, the snapshot, the version and the ref entry
    // (with a blob for each bitmap it was 6).
    assert_eq!(writes, 5, "the commit's writes");
    // `show` says where each bitmap is: in the one pack, at its offset.
    base.run(&args).ok();
    let show = base.run(&["show", "main"]);
    show.ok();
    let dvs = packed(&base);
    assert_ne!(dvs[0]["offset"], dvs[1]["offset"], "{dvs:?}");
    for d in &dvs {
        let pack = &d["blob"].as_str().unwrap()[..12];
        let want = format!("deletion vector in pack {pack} at byte {}", d["offset"]);
        assert!(show.stdout.contains(&want), "{want}: {}", show.stdout);
    }
}

#[test]
fn a_gc_killed_at_any_write_leaves_every_stored_version_whole() {
    // Each version overwrites the table with rows of its own, so each
    // expired version has a record, a snapshot and a data file to delete.
    let base = Project::new();
    for v in 0..6 {
        let mut csv = String::from("id,name\n");
        for i in 0..20 {
            csv.push_str(&format!("{},v{v}\n", v * 100 + i));
        }
        let f = base.write(&format!("v{v}.csv"), &csv);
        base.run(&["commit", "t", &f, "--key", "id", "--mode", "overwrite"])
            .ok();
    }
    let head = base.head();
    let args = ["gc", "--keep-last", "1", "--grace", "0s", "--sole-writer"];
    let writes = kill_at_every_write(&base, &args, |p, _| {
        assert_eq!(p.head(), head);
        // Running it again finishes the job, and the head is whole.
        p.run(&args).ok();
        let v = p.run(&["verify"]);
        assert_eq!(v.code, Some(0), "after gc ran again: {}", v.stdout);
        let cat = p.run(&["--json", "cat", "main", "t"]);
        cat.ok();
        assert!(cat.stdout.contains("\"total_rows\": 20"), "{}", cat.stdout);
    });
    // Tombstones for 5 versions, then their 15 blobs.
    assert!(writes >= 20, "the gc's writes ({writes})");
}
