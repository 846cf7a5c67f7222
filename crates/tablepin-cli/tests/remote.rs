//! Repositories in a bucket: every command on an S3 repository (the moto
//! server that scripts/test.sh starts), many writers at once (processes, on
//! a folder and on the server), writers racing gc and erase, and a seeded
//! run of store faults over commit, read, gc and erase.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeSet;
use std::process::{Command, Output};

use common::Project;

/// A fresh prefix in the S3 test server's bucket; `None` (the test says it
/// did not run) outside scripts/test.sh, except in CI, where it fails.
fn s3_location(test: &str) -> Option<String> {
    match std::env::var("TABLEPIN_TEST_S3") {
        Ok(base) => {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos();
            Some(format!("{base}/{test}-{nanos}"))
        }
        Err(_) => {
            tablepin::store::gate::not_run(
                test,
                "TABLEPIN_TEST_S3 is not set (scripts/test.sh starts the S3 test server and sets it)",
                |k| std::env::var_os(k),
            )
            .unwrap();
            None
        }
    }
}

fn tablepin(dir: &std::path::Path, repo: &str, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tablepin"));
    c.arg("--repo")
        .arg(repo)
        .args(args)
        .current_dir(dir)
        .env("TABLEPIN_AUTHOR", "test")
        .env_remove("TABLEPIN_REPO")
        .env_remove("TABLEPIN_FAULTS")
        .env("TABLEPIN_CACHE", "off")
        .env_remove("TABLEPIN_FAULT_AFTER_WRITES");
    c
}

#[track_caller]
fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn run(p: &Project, repo: &str, args: &[&str]) -> Output {
    tablepin(p.path(), repo, args).output().unwrap()
}

/// The keys of a table at a revision.
fn keys(p: &Project, repo: &str, rev: &str, table: &str) -> BTreeSet<String> {
    let out = p.file(&format!("keys-{rev}.csv"));
    ok(&run(
        p,
        repo,
        &["export", rev, table, "-o", out.to_str().unwrap()],
    ));
    std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| l.split(',').next().unwrap().to_string())
        .collect()
}

/// Runs a command with `--stats`, and fails if it asked the store again
/// for something it had already read.
fn once(p: &Project, repo: &str, args: &[&str]) -> Output {
    let argv: Vec<&str> = std::iter::once("--stats")
        .chain(args.iter().copied())
        .collect();
    let o = run(p, repo, &argv);
    let stderr = String::from_utf8_lossy(&o.stderr);
    // The stats line: text, or JSON under --json.
    let none_repeated = stderr
        .lines()
        .find_map(|l| match serde_json::from_str::<serde_json::Value>(l) {
            Ok(v) => v["requests"]["repeated"].as_u64().map(|n| n == 0),
            Err(_) => l
                .contains(" requests: ")
                .then(|| l.contains(", 0 of them repeated)")),
        })
        .unwrap_or_else(|| panic!("{args:?}: no stats: {stderr}"));
    assert!(none_repeated, "{args:?} read something twice: {stderr}");
    o
}

fn every_command_works(repo: &str) {
    let p = Project::new();
    ok(&once(&p, repo, &["init"]));
    let again = run(&p, repo, &["init"]);
    assert_eq!(again.status.code(), Some(4), "{again:?}");
    let a = p.write("a.csv", "id,name,qty\n1,apple,3\n2,pear,5\n3,plum,7\n");
    let b = p.write("b.csv", "id,name,qty\n1,apple,4\n2,pear,5\n4,fig,1\n");
    ok(&once(
        &p,
        repo,
        &["commit", "sales", &a, "--key", "id", "-m", "first"],
    ));
    ok(&once(&p, repo, &["tag", "v1"]));
    ok(&once(&p, repo, &["commit", "sales", &b, "-m", "second"]));
    let log: serde_json::Value =
        serde_json::from_str(&ok(&once(&p, repo, &["--json", "log"]))).unwrap();
    assert_eq!(log.as_array().unwrap().len(), 2);
    assert!(ok(&once(&p, repo, &["show", "v1"])).contains("sales"));
    assert!(ok(&once(&p, repo, &["cat", "main", "sales", "--limit", "2"])).contains("apple"));
    assert_eq!(
        keys(&p, repo, "v1", "sales"),
        ["1", "2", "3"].map(String::from).into()
    );
    let diff = ok(&once(
        &p,
        repo,
        &["--json", "diff", "v1", "main", "sales", "--stat"],
    ));
    assert!(
        diff.contains("\"added\": 1") || diff.contains("\"added\":1"),
        "{diff}"
    );
    let sql = ok(&once(
        &p,
        repo,
        &["--json", "sql", "SELECT sum(qty) AS q FROM \"sales@v1\""],
    ));
    assert!(sql.contains("15"), "{sql}");
    let exported = p.path().join("v1.parquet");
    let exported = exported.to_str().unwrap();
    assert!(
        ok(&once(&p, repo, &["export", "v1", "sales", "-o", exported])).contains("Wrote 3 rows")
    );
    ok(&once(&p, repo, &["branch", "dev", "v1"]));
    assert!(ok(&once(&p, repo, &["branch", "--list"])).contains("dev"));
    ok(&once(&p, repo, &["compact", "sales"]));
    ok(&once(&p, repo, &["restore", "v1"]));
    assert_eq!(
        keys(&p, repo, "main", "sales"),
        ["1", "2", "3"].map(String::from).into()
    );
    // erase and gc plan and apply under one hold of the lease, asking the
    // store once for each blob.
    ok(&once(
        &p,
        repo,
        &[
            "erase",
            "sales",
            "--where",
            "id = 3",
            "--reason",
            "request 7",
        ],
    ));
    ok(&once(
        &p,
        repo,
        &["gc", "--keep-last", "1", "--grace", "0s", "--sole-writer"],
    ));
    assert!(ok(&once(&p, repo, &["audit"])).contains("request 7"));
    ok(&once(&p, repo, &["verify", "--erased"]));
    ok(&once(&p, repo, &["verify"]));
    assert_eq!(
        keys(&p, repo, "main", "sales"),
        ["1", "2"].map(String::from).into()
    );
    // --stats says what the command asked of the store.
    let o = run(&p, repo, &["--stats", "log"]);
    ok(&o);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains(" requests: ") && stderr.contains(" GET "),
        "{stderr}"
    );
}

#[test]
fn every_command_works_on_an_s3_repository() {
    if let Some(repo) = s3_location("commands") {
        every_command_works(&repo);
    }
}

#[test]
fn every_command_works_on_a_file_url() {
    let dir = tempfile::tempdir().unwrap();
    every_command_works(&format!("file://{}", dir.path().join("repo").display()));
}

#[test]
fn a_missing_remote_repository_says_so() {
    let Some(repo) = s3_location("missing") else {
        return;
    };
    let p = Project::new();
    let o = run(&p, &repo, &["log"]);
    assert_eq!(o.status.code(), Some(3), "{o:?}");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains(&repo) && stderr.contains("init"),
        "{stderr}"
    );
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
}

#[test]
fn init_into_a_bucket_that_does_not_exist_says_so() {
    if s3_location("nobucket").is_none() {
        return;
    }
    let p = Project::new();
    let repo = "s3://tablepin-no-such-bucket/repo";
    let o = run(&p, repo, &["init"]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("the bucket of s3://tablepin-no-such-bucket/repo does not exist, or these credentials cannot see it"),
        "{stderr}"
    );
    assert!(!stderr.contains("probes/"), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
}

/// A thread that commits `rounds` rows of keys of its own (`w{w}r{r}`),
/// one commit each, appending; it returns the keys, all acknowledged.
fn committer(
    repo: &str,
    dir: &std::path::Path,
    w: usize,
    rounds: usize,
) -> std::thread::JoinHandle<Vec<String>> {
    let (repo, dir) = (repo.to_string(), dir.to_path_buf());
    std::thread::spawn(move || {
        let mut landed = Vec::new();
        for r in 0..rounds {
            let key = format!("w{w}r{r}");
            let f = dir.join(format!("{key}.csv"));
            std::fs::write(&f, format!("id,writer,round\n{key},{w},{r}\n")).unwrap();
            let file = f.to_str().unwrap();
            let args = [
                "commit",
                "events",
                file,
                "--mode",
                "append",
                "--retry-for",
                "600s",
            ];
            let o = tablepin(&dir, &repo, &args).output().unwrap();
            assert!(
                o.status.success(),
                "{key}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            landed.push(key);
        }
        landed
    })
}

/// `writers` processes each commit `rounds` times at once to one branch,
/// each appending keys of its own; every acknowledged commit is in the head
/// and the log, and verify passes.
fn many_writers(repo: &str, writers: usize, rounds: usize) {
    let p = Project::new();
    ok(&run(&p, repo, &["init"]));
    let seed = p.write("seed.csv", "id,writer,round\nseed,0,0\n");
    ok(&run(&p, repo, &["commit", "events", &seed, "--key", "id"]));
    let handles: Vec<_> = (0..writers)
        .map(|w| committer(repo, p.path(), w, rounds))
        .collect();
    let mut expected: BTreeSet<String> = ["seed".to_string()].into();
    for h in handles {
        expected.extend(h.join().unwrap());
    }
    assert_eq!(keys(&p, repo, "main", "events"), expected);
    let log: serde_json::Value =
        serde_json::from_str(&ok(&run(&p, repo, &["--json", "log"]))).unwrap();
    assert_eq!(log.as_array().unwrap().len(), writers * rounds + 1);
    ok(&run(&p, repo, &["verify"]));
}

#[test]
fn eight_writers_at_once_on_a_folder() {
    let dir = tempfile::tempdir().unwrap();
    many_writers(dir.path().join("repo").to_str().unwrap(), 8, 50);
}

#[test]
fn eight_writers_at_once_on_s3() {
    if let Some(repo) = s3_location("writers") {
        many_writers(&repo, 8, 50);
    }
}

/// Four committers race gc runs and one erase: nothing acknowledged is
/// lost but the erased row, and no blob a kept version needs is deleted.
fn writers_racing_gc_and_erase(repo: &str) {
    let p = Project::new();
    ok(&run(&p, repo, &["init"]));
    let seed = p.write("seed.csv", "id,writer,round\nseed,0,0\nforget-me,0,0\n");
    ok(&run(&p, repo, &["commit", "events", &seed, "--key", "id"]));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let committers: Vec<_> = (0..4).map(|w| committer(repo, p.path(), w, 20)).collect();
    let collector = {
        let (repo, dir, stop) = (repo.to_string(), p.path().to_path_buf(), stop.clone());
        std::thread::spawn(move || {
            let mut runs = 0;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let o = tablepin(&dir, &repo, &["gc", "--keep-last", "3", "--grace", "10m"])
                    .output()
                    .unwrap();
                // A gc may find a lease held by the erase, and say so.
                let stderr = String::from_utf8_lossy(&o.stderr);
                assert!(
                    o.status.success() || stderr.contains("busy") || stderr.contains("lease"),
                    "{stderr}"
                );
                runs += 1;
            }
            runs
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(500));
    let erase = run(
        &p,
        repo,
        &[
            "erase",
            "events",
            "--where",
            "id = 'forget-me'",
            "--reason",
            "request 9",
        ],
    );
    ok(&erase);
    let mut expected: BTreeSet<String> = ["seed".to_string()].into();
    for h in committers {
        expected.extend(h.join().unwrap());
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    assert!(collector.join().unwrap() > 0);
    assert_eq!(keys(&p, repo, "main", "events"), expected);
    ok(&run(&p, repo, &["verify", "--erased"]));
}

#[test]
fn writers_racing_gc_and_an_erase_on_a_folder() {
    let dir = tempfile::tempdir().unwrap();
    writers_racing_gc_and_erase(dir.path().join("repo").to_str().unwrap());
}

#[test]
fn writers_racing_gc_and_an_erase_on_s3() {
    if let Some(repo) = s3_location("gc-race") {
        writers_racing_gc_and_erase(&repo);
    }
}

/// The lines of a command's stderr that are not `--stats`' line.
fn error_lines(o: &Output) -> Vec<String> {
    String::from_utf8_lossy(&o.stderr)
        .lines()
        .filter(|l| !l.contains(" requests: "))
        .map(str::to_string)
        .collect()
}

/// The faults `--stats` says were injected.
fn faults_injected(o: &Output) -> u64 {
    let stderr = String::from_utf8_lossy(&o.stderr);
    let line = stderr
        .lines()
        .find(|l| l.contains(" requests: "))
        .unwrap_or_else(|| panic!("no stats: {stderr}"));
    let (_, tail) = line.rsplit_once("; ").unwrap();
    tail.split(' ').next().unwrap().parse().unwrap()
}

/// `commands` commands, command `i` under the fault schedule of seed `i`
/// (the same commands and seeds every run; the faults they meet vary a
/// little with timing, so at least `min_faults` is asserted): commits (upserts, so that running one again is harmless),
/// reads, logs, gc runs, erasures and verifies. Every command succeeds or
/// fails with one sentence; the repository passes verify (run without
/// faults) all along; every acknowledged commit's row is in the head but
/// the erased ones; every failed command succeeds when run again without
/// the faults.
fn fault_run(repo: &str, commands: u64, min_faults: u64) {
    let p = Project::new();
    ok(&run(&p, repo, &["init"]));
    let seed = p.write("seed.csv", "id,v\nseed,0\n");
    ok(&run(&p, repo, &["commit", "events", &seed, "--key", "id"]));
    let (mut injected, mut failed, mut acknowledged, mut erased) =
        (0u64, Vec::new(), BTreeSet::new(), BTreeSet::new());
    acknowledged.insert("seed".to_string());
    // Erasures take acknowledged keys, oldest first.
    let mut to_erase = std::collections::VecDeque::new();
    for i in 0..commands {
        let out = p
            .file(&format!("out-{i}.parquet"))
            .to_string_lossy()
            .into_owned();
        let key = format!("k{i}");
        let f = p.write(&format!("{key}.csv"), &format!("id,v\n{key},{i}\n"));
        let target = to_erase
            .front()
            .cloned()
            .unwrap_or_else(|| "seed".to_string());
        let pred = format!("id = '{target}'");
        let args: Vec<String> = match i % 8 {
            0..=2 => vec!["commit", "events", &f, "--mode", "upsert", "--key", "id"],
            3 => vec!["cat", "main", "events", "--limit", "5"],
            4 => vec!["export", "main", "events", "-o", &out],
            5 => vec!["log"],
            6 => vec!["gc", "--keep-last", "4", "--grace", "5s", "--sole-writer"],
            _ => vec!["erase", "events", "--where", &pred, "--reason", "fault run"],
        }
        .into_iter()
        .map(String::from)
        .collect();
        let argv: Vec<&str> = std::iter::once("--stats")
            .chain(args.iter().map(String::as_str))
            .collect();
        let o = tablepin(p.path(), repo, &argv)
            .env("TABLEPIN_FAULTS", format!("seed={i},rate=0.3"))
            .output()
            .unwrap();
        injected += faults_injected(&o);
        let errors = error_lines(&o);
        if o.status.success() {
            if args[0] == "commit" {
                acknowledged.insert(key.clone());
                to_erase.push_back(key.clone());
            }
            if args[0] == "erase" {
                erased.insert(target.clone());
                to_erase.pop_front();
            }
        } else {
            assert_ne!(o.status.code(), Some(101), "panic: {errors:?}");
            assert_eq!(errors.len(), 1, "{args:?}: {errors:?}");
            assert!(errors[0].starts_with("tablepin: "), "{errors:?}");
            assert!(!errors[0].contains("panicked"), "{errors:?}");
            failed.push((i, args.clone(), target.clone()));
            if args[0] == "erase" {
                // Run again at the end; no later erasure aims at it.
                to_erase.pop_front();
            }
        }
        if i % 25 == 24 {
            ok(&run(&p, repo, &["verify"]));
        }
    }
    assert!(
        injected >= min_faults,
        "{commands} commands met {injected} faults, fewer than the {min_faults} this test claims"
    );
    ok(&run(&p, repo, &["verify"]));
    for (i, args, target) in &failed {
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = run(&p, repo, &argv);
        assert!(
            o.status.success(),
            "command {i} {args:?} again, without faults: {:?}",
            error_lines(&o)
        );
        if args[0] == "commit" {
            acknowledged.insert(format!("k{i}"));
        }
        if args[0] == "erase" {
            erased.insert(target.clone());
        }
    }
    let head = keys(&p, repo, "main", "events");
    for k in &acknowledged {
        assert_eq!(
            head.contains(k),
            !erased.contains(k),
            "{k}: acknowledged, erased: {}",
            erased.contains(k)
        );
    }
    ok(&run(&p, repo, &["verify", "--erased"]));
    eprintln!(
        "{commands} commands, {injected} faults, {} failed and succeeded again",
        failed.len()
    );
}

#[test]
fn a_thousand_faults_on_s3_lose_nothing_acknowledged() {
    if let Some(repo) = s3_location("faults") {
        fault_run(&repo, 70, 700);
    }
}

#[test]
fn faults_on_a_folder_lose_nothing_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    fault_run(dir.path().join("repo").to_str().unwrap(), 30, 200);
}
