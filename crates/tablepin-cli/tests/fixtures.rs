//! Repositories written by every format this build reads, kept under
//! `tests/fixtures/` (as fjall keeps `test_fixture/v1`): format 1, before
//! deletion-vector packs, format 2, before outboards, format 3, with
//! outboards of 16 KiB chunk groups, and format 4, now.
//! Every later build must read each, verify it, find what the writing
//! build found at each ref (`expected.json`), and extend it, as it is and
//! once `upgrade`d. `tests/fixtures/make.sh` wrote them.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{copy_dir, Project};

fn json(r: &common::Run) -> serde_json::Value {
    r.ok();
    serde_json::from_str(&r.stdout).unwrap()
}

fn reads_verifies_and_extends(format: u32, upgrade: bool) {
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!("tests/fixtures/format{format}"));
    let p = Project {
        dir: tempfile::tempdir().unwrap(),
    };
    copy_dir(&fixture.join("repo"), &p.file(".tablepin"));
    let expected: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixture.join("expected.json")).unwrap()).unwrap();
    let config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(p.file(".tablepin/meta/config.json")).unwrap())
            .unwrap();
    assert_eq!(
        config["format"], format,
        "the fixture is of format {format}"
    );
    if upgrade {
        let dry = json(&p.run(&["--json", "upgrade", "--dry-run"]));
        assert_eq!(
            (dry["plan"]["from"].as_u64(), dry["plan"]["to"].as_u64()),
            (Some(format.into()), Some(4))
        );
        let done = json(&p.run(&["--json", "upgrade"]));
        assert_eq!(
            (done["from"].as_u64(), done["to"].as_u64()),
            (Some(format.into()), Some(4))
        );
        let config: serde_json::Value =
            serde_json::from_slice(&std::fs::read(p.file(".tablepin/meta/config.json")).unwrap())
                .unwrap();
        assert_eq!(config["format"], 4, "format {format} upgraded");
    }

    let v = p.run(&["verify", "--erased"]);
    assert_eq!(v.code, Some(0), "format {format}: {}", v.stdout);
    for rev in ["main", "dev", "trained"] {
        let show = json(&p.run(&["--json", "show", rev]));
        let want = &expected[rev];
        assert_eq!(show["version"], want["version"], "format {format}, {rev}");
        let t = &show["tables"][0];
        assert_eq!(
            t["content_hash"], want["content_hash"],
            "format {format}, {rev}"
        );
        assert_eq!(t["rows"], want["rows"], "format {format}, {rev}");
        let cat = json(&p.run(&["--json", "cat", rev, "sales", "--limit", "1000"]));
        assert_eq!(cat["total_rows"], want["rows"]);
        assert_eq!(
            cat["rows"].as_array().unwrap().len() as u64,
            want["rows"].as_u64().unwrap()
        );
    }
    let log = json(&p.run(&["--json", "log"]));
    assert_eq!(
        log.as_array().unwrap().len() as u64,
        expected["log_main"].as_u64().unwrap()
    );

    // Extend it: commits of every kind, a tag, an erasure, gc; it stays whole.
    let up = p.write(
        "up.csv",
        "id,Customer_ID,qty,name\n7,17382.0,70,seven\n50,17380.0,5,fifty\n",
    );
    p.run(&["commit", "sales", &up, "--mode", "upsert", "-m", "later"])
        .ok();
    p.run(&["tag", "later"]).ok();
    p.run(&[
        "erase",
        "sales",
        "--where",
        "Customer_ID = 17382",
        "--reason",
        "later",
    ])
    .ok();
    p.run(&["gc", "--keep-last", "1"]).ok();
    let v = p.run(&["verify", "--erased"]);
    assert_eq!(v.code, Some(0), "format {format} extended: {}", v.stdout);
    let trained = json(&p.run(&["--json", "show", "trained"]));
    assert_eq!(
        trained["tables"][0]["rows"],
        expected["trained"]["rows"].as_u64().unwrap() - 8
    );
}

#[test]
fn a_format_1_repository_reads_verifies_and_extends() {
    reads_verifies_and_extends(1, false);
    reads_verifies_and_extends(1, true);
}

#[test]
fn a_format_2_repository_reads_verifies_and_extends() {
    reads_verifies_and_extends(2, false);
    reads_verifies_and_extends(2, true);
}

#[test]
fn a_format_3_repository_reads_verifies_and_extends() {
    reads_verifies_and_extends(3, false);
    reads_verifies_and_extends(3, true);
}

#[test]
fn a_format_4_repository_reads_verifies_and_extends() {
    reads_verifies_and_extends(4, false);
}

/// docs/compatibility.md's table of formats lists exactly the formats that
/// have a fixture here, and its newest is the one `init` writes.
#[test]
fn the_compatibility_table_lists_every_fixture_and_init_writes_the_newest() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("../../docs/compatibility.md")).unwrap();
    let listed: std::collections::BTreeSet<u32> = doc
        .lines()
        .skip_while(|l| !l.starts_with("## Repository formats"))
        .filter_map(|l| l.strip_prefix("| ")?.split(' ').next()?.parse().ok())
        .collect();
    let fixtures: std::collections::BTreeSet<u32> = std::fs::read_dir(root.join("tests/fixtures"))
        .unwrap()
        .filter_map(|e| {
            e.ok()?
                .file_name()
                .to_str()?
                .strip_prefix("format")?
                .parse()
                .ok()
        })
        .collect();
    assert!(!fixtures.is_empty());
    assert_eq!(
        listed, fixtures,
        "docs/compatibility.md's formats and the fixtures"
    );
    let p = Project::new();
    let config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(p.file(".tablepin/meta/config.json")).unwrap())
            .unwrap();
    assert_eq!(
        config["format"].as_u64(),
        fixtures.last().map(|&n| u64::from(n))
    );
}

/// A repository a newer tablepin made (its config's format past this
/// build's) is refused before anything is read or written, by reads and
/// writes alike, naming the config and the way out: this build would
/// otherwise write versions of its own format among the newer one's.
#[test]
fn a_repository_of_a_newer_format_is_refused_and_left_unchanged() {
    let p = Project::new();
    let input = p.write("a.csv", "id,v\n1,2\n");
    p.run(&["commit", "t", &input, "--key", "id"]).ok();
    let path = p.file(".tablepin/meta/config.json");
    let mut config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let newer = config["format"].as_u64().unwrap() + 1;
    config["format"] = newer.into();
    std::fs::write(&path, serde_json::to_vec(&config).unwrap()).unwrap();
    let said = format!("the repository (meta/config.json) has format {newer}");
    for args in [
        &["log"][..],
        &["cat", "main", "t"],
        &["commit", "t", &input, "--mode", "upsert"],
        &["tag", "t1"],
    ] {
        let r = p.fails_unchanged(args, 5, &said);
        assert!(r.stderr.contains("upgrade tablepin"), "{}", r.stderr);
    }
}
