//! gc and erase on the command line: error cases, a commit racing a gc in
//! two processes, and an erase killed at every write.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{copy_dir, Project};

fn history(p: &Project, n: usize) {
    for k in 0..n {
        let mut csv = String::from("id,Customer_ID,qty\n");
        for i in 0..=k {
            csv.push_str(&format!("{i},{}.0,{}\n", 17380 + (i % 10), i * 2));
        }
        let f = p.write("t.csv", &csv);
        let key = if k == 0 { vec!["--key", "id"] } else { vec![] };
        let mut args = vec!["commit", "sales", f.as_str(), "-m"];
        let msg = format!("c{k}");
        args.push(&msg);
        args.extend(key);
        p.run(&args).ok();
    }
}

#[test]
fn erase_and_gc_errors_change_nothing() {
    let p = Project::new();
    history(&p, 3);
    p.run(&["tag", "trained"]).ok();
    p.fails_unchanged(
        &["erase", "sales", "--where", "nope = 1", "--reason", "r"],
        2,
        "nope",
    );
    p.fails_unchanged(
        &[
            "erase",
            "sales",
            "--where",
            "Customer_ID = = 1",
            "--reason",
            "r",
        ],
        2,
        "does not fit table 'sales'",
    );
    p.fails_unchanged(
        &[
            "erase",
            "sales",
            "--where",
            "Customer_ID = 'abc'",
            "--reason",
            "r",
        ],
        2,
        "abc",
    );
    p.fails_unchanged(
        &["erase", "sales", "--where", "Customer_ID = 17388"],
        2,
        "needs a reason",
    );
    p.fails_unchanged(
        &["erase", "nosuch", "--where", "x = 1", "--reason", "r"],
        3,
        "no table 'nosuch'",
    );
    p.fails_unchanged(
        &["gc", "--keep-tags", "--no-keep-tags"],
        2,
        "contradict each other",
    );
    p.fails_unchanged(&["gc", "--keep-last", "0"], 2, "--keep-last 0");
    // Dry runs change nothing either.
    let before = p.fingerprint();
    p.run(&[
        "gc",
        "--keep-last",
        "1",
        "--grace",
        "0s",
        "--sole-writer",
        "--dry-run",
    ])
    .ok();
    p.run(&[
        "erase",
        "sales",
        "--where",
        "Customer_ID = 17381",
        "--reason",
        "r",
        "--dry-run",
    ])
    .ok();
    assert_eq!(before, p.fingerprint());
}

/// `erase --plan FILE` applies the plan that `erase --dry-run --json`
/// printed, and only that: with another predicate (2), or once a commit
/// has moved the repository (4), it is refused and nothing changes.
/// The texts of a JSON value (its keys and strings, not its numbers, nor
/// the hex digits of a blob or version id, where any five digits may
/// occur) that hold any of `words`.
fn texts_holding(v: &serde_json::Value, words: &[&str]) -> Vec<String> {
    let holds = |t: &str| {
        let id = t.len() >= 16 && t.chars().all(|c| c.is_ascii_hexdigit());
        !id && words.iter().any(|w| t.contains(w))
    };
    let mut out = Vec::new();
    match v {
        serde_json::Value::String(t) if holds(t) => out.push(t.clone()),
        serde_json::Value::Array(items) => {
            for i in items {
                out.extend(texts_holding(i, words));
            }
        }
        serde_json::Value::Object(fields) => {
            for (k, i) in fields {
                if holds(k) {
                    out.push(k.clone());
                }
                out.extend(texts_holding(i, words));
            }
        }
        _ => {}
    }
    out
}

#[test]
fn erase_applies_a_saved_plan_and_refuses_a_stale_one() {
    let p = Project::new();
    history(&p, 4);
    p.run(&["tag", "trained", "main~1"]).ok();
    let erase = ["erase", "sales", "--where", "Customer_ID = 17381"];
    let dry = p.run(
        &[
            &["--json"],
            &erase[..],
            &["--reason", "GDPR 2", "--dry-run"],
        ]
        .concat(),
    );
    dry.ok();
    let saved: serde_json::Value = serde_json::from_str(&dry.stdout).unwrap();
    assert_eq!(
        texts_holding(&saved, &["Customer_ID", "17381"]),
        Vec::<String>::new(),
        "the plan holds no predicate"
    );
    let plan = p.write("plan.json", &dry.stdout);
    let with_plan = |pred: &'static str| -> Vec<&str> {
        vec!["erase", "sales", "--where", pred, "--plan", plan.as_str()]
    };
    p.fails_unchanged(
        &with_plan("Customer_ID = 17382"),
        2,
        "not the one the saved erasure plan",
    );
    p.fails_unchanged(
        &[
            "erase",
            "other",
            "--where",
            "Customer_ID = 17381",
            "--plan",
            plan.as_str(),
        ],
        2,
        "erases from table 'sales', not 'other'",
    );
    let bad = p.write("bad.json", "{\"plan\": 3}");
    p.fails_unchanged(
        &["erase", "sales", "--where", "x = 1", "--plan", bad.as_str()],
        2,
        "is not an erasure plan",
    );
    let e = p.run(&with_plan("Customer_ID = 17381"));
    e.ok();
    assert!(e.stdout.contains("Erased"), "{}", e.stdout);
    p.run(&["verify", "--erased"]).ok();
    let audit = p.run(&["--json", "audit"]);
    assert!(
        audit.stdout.contains("GDPR 2"),
        "the plan's reason is recorded"
    );

    // A plan made before a commit is stale after it.
    let dry = p.run(&[
        "--json",
        "erase",
        "sales",
        "--where",
        "Customer_ID = 17383",
        "--reason",
        "r",
        "--dry-run",
    ]);
    let plan = p.write("plan.json", &dry.stdout);
    history(&p, 6);
    p.fails_unchanged(
        &[
            "erase",
            "sales",
            "--where",
            "Customer_ID = 17383",
            "--plan",
            plan.as_str(),
        ],
        4,
        "no longer fits the repository",
    );
}

#[test]
fn erase_then_verify_erased_and_audit() {
    let p = Project::new();
    history(&p, 4);
    p.run(&["tag", "trained", "main~1"]).ok();
    let e = p.run(&[
        "erase",
        "sales",
        "--where",
        "Customer_ID = 17381",
        "--reason",
        "GDPR 1",
    ]);
    e.ok();
    assert!(e.stdout.contains("Erased"), "{}", e.stdout);
    let v = p.run(&["verify", "--erased"]);
    v.ok();
    assert!(
        v.stdout.contains("no stored blob holds an erased row"),
        "{}",
        v.stdout
    );
    let a = p.run(&["--json", "audit"]);
    a.ok();
    assert!(
        !a.stdout.contains("Customer_ID = 17381"),
        "no predicate in the audit record"
    );
    let rec: serde_json::Value = serde_json::from_str(&a.stdout).unwrap();
    assert_eq!(rec[0]["reason"], "GDPR 1");
    let cat = p.run(&["--json", "cat", "trained", "sales", "--limit", "100"]);
    cat.ok();
    assert!(!cat.stdout.contains("17381"), "{}", cat.stdout);
    let log = p.run(&["log"]);
    assert!(log.stdout.contains("replaces"), "{}", log.stdout);
}

#[test]
fn a_commit_racing_gc_in_another_process_loses_nothing() {
    let p = Project::new();
    history(&p, 1);
    let dir = p.path().to_path_buf();
    let commits = std::thread::spawn(move || {
        let p = Project {
            dir: tempfile::TempDir::new_in(&dir).unwrap(),
        };
        let repo = dir.join(".tablepin");
        let repo = repo.to_str().unwrap().to_string();
        for k in 1..=12 {
            let f = p.write(
                "row.csv",
                &format!("id,Customer_ID,qty\n{},1.0,{k}\n", 1000 + k),
            );
            let r = p.run(&["--repo", &repo, "commit", "sales", &f, "--mode", "append"]);
            r.ok();
        }
    });
    for _ in 0..8 {
        p.run(&["gc", "--keep-last", "2"]).ok();
    }
    commits.join().unwrap();
    p.run(&["gc", "--keep-last", "2"]).ok();
    let v = p.run(&["verify"]);
    assert_eq!(v.code, Some(0), "{}", v.stdout);
    let cat = p.run(&["--json", "cat", "main", "sales", "--limit", "100"]);
    cat.ok();
    let got: serde_json::Value = serde_json::from_str(&cat.stdout).unwrap();
    assert_eq!(got["total_rows"], 13, "every appended row is there");
    let log = p.run(&["--json", "log"]);
    let log: serde_json::Value = serde_json::from_str(&log.stdout).unwrap();
    assert_eq!(
        log.as_array().unwrap().len(),
        13,
        "every commit is in the log, expired ones as tombstones"
    );
}

#[test]
fn an_erase_killed_at_any_write_is_finished_by_running_it_again() {
    let base = Project::new();
    history(&base, 3);
    base.run(&["tag", "trained", "main~1"]).ok();
    erase_killed_at_every_write(&base);
}

#[test]
fn an_erase_killed_at_any_write_leaves_a_tagged_version_past_a_tombstone_whole() {
    // The head reaches the tagged version only through the tombstone of
    // the expired version between them, so a stored record there must be
    // whole whenever the erasure stops.
    let base = Project::new();
    history(&base, 4);
    base.run(&["tag", "trained", "main~2"]).ok();
    base.run(&["gc", "--keep-last", "1", "--grace", "0s", "--sole-writer"])
        .ok();
    let v = base.run(&["--json", "verify"]);
    v.ok();
    assert!(v.stdout.contains("\"expired\": 2"), "{}", v.stdout);
    erase_killed_at_every_write(&base);
}

/// Runs an erasure in a copy of `base` killed after k writes, for every k
/// until it completes: each crashed state passes `verify`, and running the
/// erasure again finishes it.
fn erase_killed_at_every_write(base: &Project) {
    let erase = [
        "erase",
        "sales",
        "--where",
        "Customer_ID = 17381",
        "--reason",
        "r",
    ];
    let mut k = 0u64;
    loop {
        let p = Project {
            dir: tempfile::tempdir().unwrap(),
        };
        copy_dir(&base.file(".tablepin"), &p.file(".tablepin"));
        let r = p.run_env(&erase, &[("TABLEPIN_FAULT_AFTER_WRITES", &k.to_string())]);
        let crashed = r.code != Some(0);
        let v = p.run(&["verify"]);
        assert_eq!(v.code, Some(0), "after a kill at write {k}: {}", v.stdout);
        if crashed {
            assert_eq!(r.code, None, "a kill, not an error: {}", r.stderr);
            // The tag names its old version (still whole) or its replacement.
            let cat = p.run(&["--json", "cat", "trained", "sales", "--limit", "100"]);
            cat.ok();
            // Running it again finishes the job.
            p.run(&erase).ok();
        }
        let v = p.run(&["verify", "--erased"]);
        assert_eq!(
            v.code,
            Some(0),
            "after finishing at write {k}: {}",
            v.stdout
        );
        let cat = p.run(&["--json", "cat", "trained", "sales", "--limit", "100"]);
        cat.ok();
        assert!(!cat.stdout.contains("17381"), "{}", cat.stdout);
        if !crashed {
            break;
        }
        k += 1;
        assert!(k < 400);
    }
    assert!(k > 5, "an erase makes several writes ({k})");
}
