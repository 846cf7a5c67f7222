//! Regression tests for ways a user lost data or was told something false
//! (issue 20): each test is named after what it guards, and failed before
//! its fix.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::io::Read;
use std::process::Stdio;

use common::{Project, SALES};

fn json(r: &common::Run) -> serde_json::Value {
    r.ok();
    serde_json::from_str(&r.stdout).unwrap()
}

/// The full id of a revision.
fn id_of(p: &Project, rev: &str) -> String {
    json(&p.run(&["--json", "show", rev]))["version"]
        .as_str()
        .unwrap()
        .to_string()
}

fn blob_path(p: &Project, id: &str) -> std::path::PathBuf {
    p.file(".tablepin")
        .join("objects")
        .join(&id[..2])
        .join(&id[2..])
}

fn three_versions(p: &Project) {
    let f = p.write("s.csv", SALES);
    p.run(&["commit", "sales", &f, "--key", "id", "-m", "one"])
        .ok();
    let f = p.write("s.csv", "id,name,qty\n1,apple,4\n2,pear,5\n3,plum,7\n");
    p.run(&["commit", "sales", &f, "-m", "two"]).ok();
    let f = p.write("s.csv", "id,name,qty\n1,apple,4\n2,pear,5\n");
    p.run(&["commit", "sales", &f, "-m", "three"]).ok();
}

#[test]
fn a_closed_pipe_ends_every_printing_command_quietly() {
    let p = Project::new();
    let g = p.file("g.csv");
    p.run(&["generate", "--rows", "5000", "-o", g.to_str().unwrap()])
        .ok();
    p.run(&["commit", "sales", g.to_str().unwrap(), "--key", "id"])
        .ok();
    for args in [
        &["cat", "main", "sales", "--limit", "5000"][..],
        &["--json", "cat", "main", "sales", "--limit", "5000"],
        &["verify"],
        &["show", "main"],
        &["log"],
        &["sql", "select * from sales"],
        &["--json", "sql", "select * from sales"],
        &["export", "main", "sales", "-o", "-"],
    ] {
        let mut child = p
            .cmd(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The reader goes away before the command writes a byte.
        drop(child.stdout.take());
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(0), "{args:?}: {err}");
        assert!(err.is_empty(), "{args:?}: {err}");
    }
}

#[test]
fn deleting_the_only_or_default_branch_needs_force_and_stays_restorable() {
    let p = Project::new();
    three_versions(&p);
    p.fails_unchanged(
        &["branch", "--delete", "main"],
        4,
        "'main' is the repository's only branch",
    );
    p.run(&["branch", "dev"]).ok();
    p.fails_unchanged(
        &["branch", "--delete", "main"],
        4,
        "'main' is the branch commits go to by default",
    );
    let head = id_of(&p, "main");
    let d = p.run(&["branch", "--delete", "main", "--force"]);
    d.ok();
    assert!(
        d.stdout.contains("tablepin branch --restore main"),
        "{}",
        d.stdout
    );
    let listed = json(&p.run(&["--json", "branch", "--deleted"]));
    assert_eq!(listed[0]["name"], "main");
    assert_eq!(listed[0]["target"], head.as_str());
    // gc within the grace period keeps what the deleted branch held.
    p.run(&["gc", "--keep-last", "1"]).ok();
    p.run(&["branch", "--restore", "main"]).ok();
    assert_eq!(id_of(&p, "main"), head);
    let log = json(&p.run(&["--json", "log"]));
    assert_eq!(log.as_array().unwrap().len(), 3, "{log}");
    p.run(&["verify"]).ok();
    p.fails_unchanged(&["branch", "--restore", "main"], 4, "exists already");
    p.fails_unchanged(&["branch", "--restore", "nosuch"], 3, "does not exist");
}

#[test]
fn a_deleted_tag_is_restorable_and_a_tag_cannot_take_a_branch_name() {
    let p = Project::new();
    three_versions(&p);
    p.run(&["tag", "v1", "main~2", "-m", "model A"]).ok();
    let v1 = id_of(&p, "v1");
    p.run(&["tag", "--delete", "v1"]).ok();
    p.run(&["tag", "--restore", "v1"]).ok();
    assert_eq!(id_of(&p, "v1"), v1);
    // With its own message (issue 41).
    let tags = json(&p.run(&["--json", "tag", "--list"]));
    assert_eq!(tags[0]["message"], "model A", "{tags}");
    // Said as a name taken, not with advice to delete the branch.
    for args in [&["tag", "main", "main~1"][..], &["tag", "main"]] {
        let r = p.fails_unchanged(args, 4, "'main' is the name of a branch (at ");
        assert!(!r.stderr.contains("delete"), "{}", r.stderr);
    }
    p.fails_unchanged(&["branch", "v1"], 4, "'v1' is the name of a tag (at ");
}

#[test]
fn a_typo_in_branch_is_refused_naming_the_branches_and_the_closest() {
    let p = Project::new();
    three_versions(&p);
    let f = p.write("w.csv", "id,name,qty\n9,fig,1\n");
    p.fails_unchanged(
        &[
            "commit", "sales", &f, "--mode", "append", "--branch", "mian",
        ],
        3,
        "branch 'mian' does not exist (branches: main); did you mean 'main'?",
    );
    // --create-branch starts at main's head, as `tablepin branch` would.
    let c = json(&p.run(&[
        "--json",
        "commit",
        "sales",
        &f,
        "--mode",
        "append",
        "--branch",
        "dev",
        "--create-branch",
    ]));
    assert_eq!(c["parent"], id_of(&p, "main").as_str());
    assert_eq!(c["rows"], 3);
    // A fresh repository's first commit may go to any branch.
    let q = Project::new();
    let f = q.write("s.csv", SALES);
    q.run(&["commit", "sales", &f, "--branch", "first"]).ok();
}

#[test]
fn duplicate_column_names_are_refused_in_every_input_format() {
    let p = Project::new();
    let f = p.write("dup.csv", "id,a,a\n1,2,3\n");
    p.fails_unchanged(
        &["commit", "t", &f, "--key", "id"],
        2,
        "has two columns named 'a' (columns 2 and 3)",
    );
    // The same through Arrow IPC.
    use arrow::array::{ArrayRef, Int64Array};
    use arrow::datatypes::{DataType, Field, Schema};
    use std::sync::Arc;
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("a", DataType::Int64, false),
        Field::new("a", DataType::Int64, false),
    ]));
    let col = |v: i64| Arc::new(Int64Array::from(vec![v])) as ArrayRef;
    let batch =
        arrow::array::RecordBatch::try_new(schema.clone(), vec![col(1), col(2), col(3)]).unwrap();
    let path = p.file("dup.arrow");
    {
        let file = std::fs::File::create(&path).unwrap();
        let mut w = arrow::ipc::writer::FileWriter::try_new(file, &schema).unwrap();
        w.write(&batch).unwrap();
        w.finish().unwrap();
    }
    p.fails_unchanged(
        &["commit", "t", path.to_str().unwrap(), "--key", "id"],
        2,
        "has two columns named 'a'",
    );
}

#[test]
fn a_header_only_csv_is_refused_for_a_new_table_and_empties_an_existing_one_plainly() {
    let p = Project::new();
    let empty = p.write("empty.csv", "id,name,qty\n");
    p.fails_unchanged(
        &["commit", "sales", &empty, "--key", "id"],
        2,
        "has a header but no rows, and table 'sales' does not exist yet on 'main'",
    );
    let f = p.write("s.csv", SALES);
    p.run(&["commit", "sales", &f, "--key", "id"]).ok();
    let wrong = p.write("wrong.csv", "id,nom,qty\n");
    p.fails_unchanged(
        &["commit", "sales", &wrong],
        2,
        "are not the table's (id, name, qty)",
    );
    let r = p.run(&["--json", "commit", "sales", &empty]);
    let c = json(&r);
    assert_eq!(c["rows"], 0);
    assert_eq!(c["change"]["rows_deleted"], 3);
    assert!(
        r.stderr
            .contains("has no rows, so this overwrite deleted all 3 rows of 'sales'"),
        "{}",
        r.stderr
    );
    // The schema stays the table's: the next real commit needs no flag.
    p.run(&["commit", "sales", &f]).ok();
    p.run(&["verify"]).ok();
}

#[test]
fn tsv_files_split_on_tabs_and_delimiter_is_taken() {
    let p = Project::new();
    let f = p.write("s.tsv", "id\tname\n1\tapple\n2\tpear\n");
    let c = json(&p.run(&["--json", "commit", "t", &f, "--key", "id"]));
    assert_eq!(c["rows"], 2);
    let show = json(&p.run(&["--json", "show"]));
    let cols: Vec<_> = show["tables"][0]["schema"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(cols, ["id", "name"]);
    let f = p.write("s.txt.csv", "id;name\n3;plum\n");
    p.run(&["commit", "u", &f, "--key", "id", "--delimiter", ";"])
        .ok();
    p.fails_unchanged(
        &["commit", "u", &f, "--delimiter", ";;"],
        2,
        "--delimiter takes one character",
    );
}

#[test]
fn a_damaged_version_record_is_damage_not_an_unknown_revision() {
    let p = Project::new();
    three_versions(&p);
    let middle = id_of(&p, "main~1");
    let first = id_of(&p, "main~2");
    let path = blob_path(&p, &middle);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[10] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    for rev in [&middle[..10], &first[..10]] {
        let r = p.run(&["cat", rev, "sales"]);
        r.fails(5, &format!("version {}", middle));
    }
    // A full id, and a path through the damaged version, the same.
    p.fails_unchanged(&["tag", "t0", &first], 5, &middle);
    p.run(&["cat", "main~1", "sales"]).fails(5, &middle);
}

#[test]
fn damaged_documents_are_damage_exit_5_naming_the_file() {
    let p = Project::new();
    three_versions(&p);
    let entry = p.file(".tablepin").join("refs/branches/main/00000003");
    std::fs::write(&entry, b"{\"format\": 2, \"seq\"").unwrap();
    let r = p.run(&["log"]);
    r.fails(5, "refs/branches/main/00000003 is damaged");
    // The cause is said once.
    assert_eq!(
        r.stderr.matches("EOF while parsing").count(),
        1,
        "{}",
        r.stderr
    );
}

#[test]
fn gc_refuses_in_the_plan_too_when_a_kept_blob_is_missing_or_empty() {
    for damage in ["delete", "empty"] {
        let p = Project::new();
        three_versions(&p);
        let show = json(&p.run(&["--json", "show", "main"]));
        let data = show["tables"][0]["files"][0]["data"]
            .as_str()
            .unwrap()
            .to_string();
        let path = blob_path(&p, &data);
        match damage {
            "delete" => std::fs::remove_file(&path).unwrap(),
            _ => std::fs::write(&path, b"").unwrap(),
        }
        let want = if damage == "delete" {
            "is missing".to_string()
        } else {
            "has 0 bytes where its snapshot records".to_string()
        };
        for args in [
            &[
                "gc",
                "--keep-last",
                "1",
                "--grace",
                "0s",
                "--sole-writer",
                "--dry-run",
            ][..],
            &["gc", "--keep-last", "1", "--grace", "0s", "--sole-writer"],
        ] {
            let r = p.fails_unchanged(args, 5, "gc changed nothing: data file");
            assert!(r.stderr.contains(&want), "{damage}: {}", r.stderr);
            assert!(r.stderr.contains(&data[..12]), "{}", r.stderr);
        }
    }
}

#[test]
fn eight_writers_taking_turns_all_land() {
    let p = Project::new();
    let f = p.write("s.csv", "id,w,i\n-1,-1,-1\n");
    p.run(&["commit", "t", &f, "--key", "id"]).ok();
    let writers: Vec<_> = (0..8)
        .map(|w| {
            let dir = p.path().to_path_buf();
            let bin = env!("CARGO_BIN_EXE_tablepin");
            std::thread::spawn(move || {
                let mut failed = Vec::new();
                for i in 0..25 {
                    let f = dir.join(format!("w{w}-{i}.csv"));
                    std::fs::write(&f, format!("id,w,i\n{},{w},{i}\n", w * 1000 + i)).unwrap();
                    let out = std::process::Command::new(bin)
                        .args(["commit", "t", f.to_str().unwrap(), "--mode", "append"])
                        .current_dir(&dir)
                        .env_remove("TABLEPIN_REPO")
                        .env_remove("TABLEPIN_FAULT_AFTER_WRITES")
                        .output()
                        .unwrap();
                    if !out.status.success() {
                        failed.push(String::from_utf8_lossy(&out.stderr).into_owned());
                    }
                }
                failed
            })
        })
        .collect();
    let failed: Vec<String> = writers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    assert!(
        failed.is_empty(),
        "{} failed: {:?}",
        failed.len(),
        failed.first()
    );
    let log = json(&p.run(&["--json", "log"]));
    assert_eq!(log.as_array().unwrap().len(), 201);
    let show = json(&p.run(&["--json", "show"]));
    assert_eq!(show["tables"][0]["rows"], 201);
    p.run(&["verify"]).ok();
}

#[test]
fn messages_say_each_thing_once_and_plainly() {
    let p = Project::new();
    let f = p.write("s.csv", SALES);
    p.run(&["commit", "plain", &f]).ok();
    p.fails_unchanged(
        &["commit", "plain", &f, "--key", "id"],
        2,
        "table 'plain' has no key (it was first committed without --key), so --key id does not apply to it; omit --key",
    );
    p.fails_unchanged(
        &["commit", "plain", &f, "--mode", "upsert"],
        2,
        "commit the whole table with --mode overwrite, or add rows with --mode append",
    );
    let r = p.fails_unchanged(
        &["erase", "plain", "--where", "id = ", "--reason", "r"],
        2,
        "SQL syntax error: Expected: an expression",
    );
    assert!(!r.stderr.contains("ParserError"), "{}", r.stderr);
    p.fails_unchanged(
        &["erase", "nope", "--where", "id = 1", "--reason", "r"],
        3,
        "the branch heads have no table 'nope' (tables: plain)",
    );
    // A missing argument is named (the sentence lost the list once).
    p.fails_unchanged(
        &["export"],
        2,
        "the following required arguments were not provided: --output <OUTPUT>, <REV>, <TABLE>;",
    );
    for cmd in ["checkout", "rebase"] {
        let r = p.fails_unchanged(&[cmd], 2, &format!("'{cmd}' is not a tablepin command"));
        assert!(!r.stderr.contains("erase"), "{}", r.stderr);
    }
    p.fails_unchanged(
        &["merge"],
        2,
        "the following required arguments were not provided: <SOURCE>;",
    );
    p.fails_unchanged(&["log", "--bogus"], 2, "--bogus");
}

#[test]
fn errors_are_json_on_stderr_under_json() {
    let p = Project::new();
    let r = p.run(&["--json", "cat", "nosuch", "t"]);
    assert_eq!(r.code, Some(3));
    let v: serde_json::Value = serde_json::from_str(r.stderr.trim()).unwrap();
    assert_eq!(v["exit_code"], 3);
    assert_eq!(v["kind"], "not_found");
    assert!(v["error"]
        .as_str()
        .unwrap()
        .contains("unknown revision 'nosuch'"));
    let r = p.run(&["--json", "frobnicate"]);
    assert_eq!(r.code, Some(2));
    let v: serde_json::Value = serde_json::from_str(r.stderr.trim()).unwrap();
    assert_eq!(v["kind"], "bad_input");
}

#[test]
fn head_and_a_date_alone_are_revisions() {
    let p = Project::new();
    three_versions(&p);
    assert_eq!(id_of(&p, "HEAD"), id_of(&p, "main"));
    assert_eq!(id_of(&p, "HEAD~1"), id_of(&p, "main~1"));
    // Tomorrow's date names today's head; a date before the first commit
    // names nothing.
    let tomorrow = (chrono::Utc::now() + chrono::Duration::days(1))
        .format("%Y-%m-%d")
        .to_string();
    assert_eq!(id_of(&p, &format!("@{tomorrow}")), id_of(&p, "main"));
    // Not found (exit 3), as an unknown revision is (issue 41).
    p.fails_unchanged(
        &["show", "@2001-01-01"],
        3,
        "named no version at 2001-01-01; its first commit is later, at 20",
    );
}

#[test]
fn log_takes_a_branch_a_count_and_a_table_and_names_each_change() {
    let p = Project::new();
    three_versions(&p);
    let f = p.write("o.csv", "k\n1\n");
    p.run(&["commit", "other", &f, "-m", "other"]).ok();
    let all = p.run(&["log", "main"]);
    all.ok();
    assert_eq!(all.stdout.lines().count(), 4);
    assert!(
        all.stdout
            .lines()
            .next()
            .unwrap()
            .contains("other +1 ~0 -0"),
        "{}",
        all.stdout
    );
    assert!(all.stdout.contains("sales +0 ~0 -1"), "{}", all.stdout);
    let two = json(&p.run(&["--json", "log", "-n", "2"]));
    assert_eq!(two.as_array().unwrap().len(), 2);
    let sales = json(&p.run(&["--json", "log", "--table", "sales"]));
    assert_eq!(sales.as_array().unwrap().len(), 3);
    assert_eq!(sales[0]["message"], "three");
    p.fails_unchanged(&["log", "nosuch"], 3, "branch 'nosuch' does not exist");
}

fn write_ipc(p: &Project, name: &str, cols: Vec<(&str, arrow::array::ArrayRef)>) -> String {
    let batch = arrow::array::RecordBatch::try_from_iter(cols).unwrap();
    let path = p.file(name);
    let file = std::fs::File::create(&path).unwrap();
    let mut w = arrow::ipc::writer::FileWriter::try_new(file, &batch.schema()).unwrap();
    w.write(&batch).unwrap();
    w.finish().unwrap();
    path.to_string_lossy().into_owned()
}

#[test]
fn physical_variants_of_the_table_types_commit_as_the_same_rows() {
    use arrow::array::{
        ArrayRef, Float64Array, Int32Array, Int64Array, LargeStringArray, TimestampMicrosecondArray,
    };
    use std::sync::Arc;
    let p = Project::new();
    let f = p.write(
        "s.csv",
        "id,name,sold_at,qty\n1,apple,2009-12-01 07:45:00,3\n2,pear,2010-12-01 09:00:00,5\n",
    );
    let first = json(&p.run(&["--json", "commit", "sales", &f, "--key", "id"]));
    let secs = [1_259_653_500i64, 1_291_194_000];
    // pyarrow-like: 64-bit offsets for text, microseconds, and `qty` as given.
    let sales = |name: &str, qty: ArrayRef| {
        write_ipc(
            &p,
            name,
            vec![
                ("id", Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef),
                (
                    "name",
                    Arc::new(LargeStringArray::from(vec!["apple", "pear"])),
                ),
                (
                    "sold_at",
                    Arc::new(TimestampMicrosecondArray::from(
                        secs.iter().map(|s| s * 1_000_000).collect::<Vec<_>>(),
                    )),
                ),
                ("qty", qty),
            ],
        )
    };
    let ipc = sales("s.arrow", Arc::new(Int32Array::from(vec![3, 5])));
    let again = json(&p.run(&["--json", "commit", "sales", &ipc]));
    assert_eq!(again["change"]["bytes_new"], 0, "{again}");
    assert_eq!(again["content_hash"], first["content_hash"]);
    assert_eq!(again["change"]["checks"]["schema"], false, "{again}");
    // A float column for an integer one: only with --cast, and only when
    // no value changes.
    let float = |q: Vec<f64>| sales("f.arrow", Arc::new(Float64Array::from(q)));
    let f = float(vec![3.0, 5.0]);
    p.fails_unchanged(
        &["commit", "sales", &f],
        2,
        "or --cast to read the input's 'qty' as Int64 when no value changes",
    );
    let cast = json(&p.run(&["--json", "commit", "sales", &f, "--cast"]));
    assert_eq!(cast["change"]["bytes_new"], 0);
    let f = float(vec![3.0, 5.5]);
    p.fails_unchanged(
        &["commit", "sales", &f, "--cast"],
        2,
        "column 'qty' cannot become Int64 without changing a value: row 2 holds 5.5",
    );
    // A sub-second timestamp cannot become the table's seconds.
    let fine = write_ipc(
        &p,
        "t.arrow",
        vec![
            ("id", Arc::new(Int64Array::from(vec![3])) as ArrayRef),
            ("name", Arc::new(LargeStringArray::from(vec!["fig"]))),
            (
                "sold_at",
                Arc::new(TimestampMicrosecondArray::from(vec![1_291_194_000_000_001])),
            ),
            ("qty", Arc::new(Int32Array::from(vec![1]))),
        ],
    );
    p.fails_unchanged(
        &["commit", "sales", &fine, "--mode", "append"],
        2,
        "column 'sold_at' cannot become Timestamp(s)",
    );
    p.run(&["verify"]).ok();
}

#[test]
fn a_wider_number_widens_the_column_in_any_mode_and_keeps_the_hashes() {
    use arrow::array::{ArrayRef, Float32Array, Float64Array, Int64Array};
    use std::sync::Arc;
    let p = Project::new();
    let narrow = write_ipc(
        &p,
        "n.arrow",
        vec![
            ("id", Arc::new(Int64Array::from(vec![1])) as ArrayRef),
            ("x", Arc::new(Float32Array::from(vec![1.5]))),
        ],
    );
    let first = json(&p.run(&["--json", "commit", "t", &narrow, "--key", "id"]));
    let wide = write_ipc(
        &p,
        "w.arrow",
        vec![
            ("id", Arc::new(Int64Array::from(vec![2])) as ArrayRef),
            ("x", Arc::new(Float64Array::from(vec![2.25]))),
        ],
    );
    let c = json(&p.run(&["--json", "commit", "t", &wide, "--mode", "append"]));
    assert_eq!(c["change"]["checks"]["schema"], true, "{c}");
    let show = json(&p.run(&["--json", "show"]));
    assert_eq!(show["tables"][0]["schema"][1]["type"], "Float64");
    // The old row's hash did not move: removing the new row gives the
    // first version's content hash back.
    let gone = p.write("gone.csv", "id\n2\n");
    let d = json(&p.run(&["--json", "commit", "t", &gone, "--mode", "delete"]));
    assert_eq!(d["content_hash"], first["content_hash"]);
    p.run(&["verify"]).ok();
}

#[test]
fn an_erased_version_id_still_answers_and_a_tag_keeps_its_message() {
    let p = Project::new();
    let f = p.write("s.csv", "id,Customer_ID,qty\n1,17388.0,2\n2,12000.0,3\n");
    p.run(&["commit", "sales", &f, "--key", "id"]).ok();
    p.run(&["tag", "trained", "-m", "model A"]).ok();
    let old = id_of(&p, "trained");
    p.run(&[
        "erase",
        "sales",
        "--where",
        "Customer_ID = 17388",
        "--reason",
        "GDPR 1",
    ])
    .ok();
    let new = id_of(&p, "trained");
    assert_ne!(old, new);
    let show = p.run(&["show", &old[..12]]);
    show.ok();
    assert!(
        show.stdout
            .contains(&format!("was replaced by {}", &new[..12])),
        "{}",
        show.stdout
    );
    assert!(show.stdout.contains("erasure 1"), "{}", show.stdout);
    let cat = p.run(&["--json", "cat", &old[..12], "sales"]);
    let rows = json(&cat);
    assert_eq!(rows["version"], new.as_str());
    assert_eq!(rows["total_rows"], 1);
    assert!(cat.stderr.starts_with("note: version"), "{}", cat.stderr);
    let tags = json(&p.run(&["--json", "tag", "--list"]));
    assert_eq!(tags[0]["message"], "model A");
    assert_eq!(tags[0]["note"], "erase: GDPR 1");
}

/// Every ref-log entry an erasure wrote, as (ref, version it moved to).
fn erase_entries(p: &Project) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for kind in ["branches", "tags"] {
        let dir = p.file(".tablepin").join("refs").join(kind);
        let Ok(refs) = std::fs::read_dir(&dir) else {
            continue;
        };
        for r in refs.flatten() {
            let mut entries: Vec<_> = (std::fs::read_dir(r.path()).unwrap().flatten())
                .map(|e| e.path())
                .collect();
            entries.sort();
            let mut before = serde_json::Value::Null;
            for e in entries {
                let v: serde_json::Value =
                    serde_json::from_slice(&std::fs::read(e).unwrap()).unwrap();
                // An erasure's hold, and its release, keep the ref where
                // it was: not a move.
                let moved = v["target"] != before;
                if moved && v["message"].as_str().unwrap_or("").starts_with("erase: ") {
                    out.push((
                        format!("{kind}/{}", r.file_name().to_string_lossy()),
                        v["target"].as_str().unwrap().to_string(),
                    ));
                }
                before = v["target"].clone();
            }
        }
    }
    out.sort();
    out
}

/// `tablepin ARGS` run in `dir`, without the hooks or repository the
/// test's environment may hold.
fn run_in(dir: &std::path::Path, args: Vec<String>) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_tablepin"))
        .args(&args)
        .current_dir(dir)
        .env_remove("TABLEPIN_REPO")
        .env_remove("TABLEPIN_FAULT_AFTER_WRITES")
        .output()
        .unwrap()
}

/// The ref moves an `audit --json` lists, as (`kind/name`, new version),
/// sorted.
fn audited_moves(audit: &serde_json::Value) -> Vec<(String, String)> {
    let mut moved: Vec<(String, String)> = audit
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["moved_refs"].as_array().unwrap().clone())
        .map(|m| {
            let kind = if m["kind"] == "Tag" || m["kind"] == "tag" {
                "tags"
            } else {
                "branches"
            };
            (
                format!("{kind}/{}", m["name"].as_str().unwrap()),
                m["new"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    moved.sort();
    moved
}

/// `tablepin erase` of customer `c`'s rows in `dir`: its failure, if any.
fn erase_customer(dir: &std::path::Path, c: u32) -> Vec<String> {
    let out = run_in(
        dir,
        vec![
            "erase".into(),
            "sales".into(),
            "--where".into(),
            format!("Customer_ID = {c}"),
            "--reason".into(),
            format!("request {c}"),
        ],
    );
    if out.status.success() {
        Vec::new()
    } else {
        vec![format!("erase: {}", String::from_utf8_lossy(&out.stderr))]
    }
}

#[test]
fn erasures_racing_commits_and_gc_leave_a_whole_repository_and_a_true_audit() {
    for round in 0..5 {
        let p = Project::new();
        let mut csv = String::from("id,Customer_ID,qty\n");
        for i in 0..40 {
            csv.push_str(&format!("{i},{}.0,{i}\n", 17380 + i % 5));
        }
        let f = p.write("base.csv", &csv);
        p.run(&["commit", "sales", &f, "--key", "id"]).ok();
        p.run(&["tag", "trained"]).ok();
        let dir = p.path().to_path_buf();
        let run = run_in;
        let mut jobs = Vec::new();
        for w in 0..4 {
            let dir = dir.clone();
            jobs.push(std::thread::spawn(move || {
                let mut failed = Vec::new();
                for i in 0..8 {
                    let id = 1000 + w * 100 + i;
                    let f = dir.join(format!("w{w}.csv"));
                    std::fs::write(
                        &f,
                        format!("id,Customer_ID,qty\n{id},{}.0,1\n", 17380 + id % 5),
                    )
                    .unwrap();
                    let out = run(
                        &dir,
                        vec![
                            "commit".into(),
                            "sales".into(),
                            f.to_string_lossy().into_owned(),
                            "--mode".into(),
                            "append".into(),
                        ],
                    );
                    if !out.status.success() {
                        failed.push(format!("commit: {}", String::from_utf8_lossy(&out.stderr)));
                    }
                }
                failed
            }));
        }
        {
            let dir = dir.clone();
            jobs.push(std::thread::spawn(move || {
                let mut failed = Vec::new();
                for _ in 0..5 {
                    let out = run(&dir, vec!["gc".into(), "--keep-last".into(), "3".into()]);
                    if !out.status.success() {
                        failed.push(format!("gc: {}", String::from_utf8_lossy(&out.stderr)));
                    }
                }
                failed
            }));
        }
        for c in [17381, 17382] {
            let dir = dir.clone();
            jobs.push(std::thread::spawn(move || erase_customer(&dir, c)));
        }
        let failed: Vec<String> = jobs.into_iter().flat_map(|j| j.join().unwrap()).collect();
        assert!(failed.is_empty(), "round {round}: {failed:?}");
        p.run(&["gc", "--keep-last", "3"]).ok();
        p.run(&["log"]).ok();
        let v = p.run(&["verify", "--erased"]);
        assert_eq!(v.code, Some(0), "round {round}: {}", v.stdout);
        // The audit lists exactly the moves the ref logs show.
        let audit = json(&p.run(&["--json", "audit"]));
        assert_eq!(
            audited_moves(&audit),
            erase_entries(&p),
            "round {round}: {audit}"
        );
        assert_eq!(audit.as_array().unwrap().len(), 2, "round {round}");
        // Every acknowledged row is there, but the erased customers' rows
        // that existed when the erasures ran (appends after them may add
        // new ones).
        let rows = json(&p.run(&["--json", "cat", "main", "sales", "--limit", "1000"]));
        let ids: std::collections::BTreeSet<i64> = rows["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_i64().unwrap())
            .collect();
        for id in (0..40).chain((0..4).flat_map(|w| (0..8).map(move |i| 1000 + w * 100 + i))) {
            let erased = matches!(id % 5, 1 | 2);
            assert!(ids.contains(&id) || erased, "round {round}: row {id} lost");
            if id < 40 && erased {
                assert!(!ids.contains(&id), "round {round}: erased row {id} is back");
            }
        }
    }
}

#[test]
fn json_gives_times_as_rfc3339_and_null_for_what_is_not_there() {
    let p = Project::new();
    three_versions(&p);
    p.run(&["tag", "t1"]).ok();
    let log = json(&p.run(&["--json", "log", "-n", "1"]));
    let t = log[0]["time"].as_str().unwrap();
    assert!(chrono::DateTime::parse_from_rfc3339(t).is_ok(), "{t}");
    assert!(log[0].get("time_ms").is_none(), "{log}");
    assert!(log[0]["replaces"].is_null(), "{log}");
    let show = json(&p.run(&["--json", "show"]));
    let file = &show["tables"][0]["files"][0];
    assert!(
        file["deletes"].is_null() && file.get("deletes").is_some(),
        "{file}"
    );
    assert!(show["replaced"].is_null());
    let tags = json(&p.run(&["--json", "tag", "--list"]));
    assert!(
        tags[0]["note"].is_null() && tags[0].get("note").is_some(),
        "{tags}"
    );
    assert!(chrono::DateTime::parse_from_rfc3339(tags[0]["time"].as_str().unwrap()).is_ok());
    let g = p.file("g.csv");
    let gen = json(&p.run(&[
        "--json",
        "generate",
        "--rows",
        "3",
        "-o",
        g.to_str().unwrap(),
    ]));
    assert_eq!(gen["rows"], 3);
}

#[test]
fn verify_names_every_damaged_document_and_gc_and_log_go_on_where_they_can() {
    let p = Project::new();
    three_versions(&p);
    let repo = p.file(".tablepin");
    std::fs::create_dir_all(repo.join("audit")).unwrap();
    std::fs::write(repo.join("audit/00000009.json"), b"garbage").unwrap();
    std::fs::create_dir_all(repo.join("tombstones")).unwrap();
    let fake = "0".repeat(64);
    std::fs::write(repo.join(format!("tombstones/{fake}.json")), b"{").unwrap();
    // The oldest ref entry, cut short.
    let oldest = repo.join("refs/branches/main/00000001");
    let bytes = std::fs::read(&oldest).unwrap();
    std::fs::write(&oldest, &bytes[..bytes.len() / 2]).unwrap();
    let v = p.run(&["verify", "--erased"]);
    assert_eq!(v.code, Some(5), "{}{}", v.stdout, v.stderr);
    for want in [
        "problem: audit record audit/00000009.json is damaged",
        &format!("problem: tombstone tombstones/{fake}.json is damaged"),
        "problem: ref entry refs/branches/main/00000001 is damaged",
    ] {
        assert!(v.stdout.contains(want), "{want}: {}", v.stdout);
    }
    // log needs none of them; gc needs every ref entry, and names it.
    p.run(&["log"]).ok();
    p.fails_unchanged(
        &["gc", "--keep-last", "1"],
        5,
        "refs/branches/main/00000001 is damaged",
    );
    std::fs::write(&oldest, &bytes).unwrap();
    // With the ref log whole again, a damaged audit record does not stop gc.
    p.run(&["gc", "--keep-last", "1"]).ok();
}

#[test]
fn leftovers_of_interrupted_writes_are_listed_by_verify_and_removed_by_gc() {
    let p = Project::new();
    three_versions(&p);
    let dir = p.file(".tablepin").join("objects").join("ab");
    std::fs::create_dir_all(&dir).unwrap();
    let left = dir.join(format!("{}#7", "c".repeat(62)));
    std::fs::write(&left, b"half a blob").unwrap();
    let v = p.run(&["verify"]);
    v.ok();
    assert!(
        v.stdout
            .contains(&format!("leftover: objects/ab/{}#7", "c".repeat(62))),
        "{}",
        v.stdout
    );
    // Young: a write may still be under way.
    p.run(&["gc"]).ok();
    assert!(left.exists());
    let gc = json(&p.run(&["--json", "gc", "--grace", "0s", "--sole-writer"]));
    assert_eq!(gc["leftovers_deleted"], 1, "{gc}");
    assert!(!left.exists());
    p.run(&["verify"]).ok();
}

#[test]
fn a_repository_url_says_what_is_wrong_with_it_and_file_urls_work() {
    let p = Project::new();
    // An unknown scheme is not "no repository here; run init there".
    p.run(&["--repo", "ftp://bucket/prefix", "log"]).fails(
        1,
        "unknown scheme 'ftp'; use a local folder, file://, s3://, gs:// or az://",
    );
    // A folder that does not exist is no repository.
    p.run(&["--repo", "/nonexistent/r", "log"])
        .fails(3, "no tablepin repository in /nonexistent/r");
    // A file:// URL is a folder: init creates it, and every command reads it.
    let url = format!("file://{}", p.file("by-url").display());
    p.run(&["--repo", &url, "init"]).ok();
    let f = p.write("s.csv", SALES);
    p.run(&["--repo", &url, "commit", "sales", &f, "--key", "id"])
        .ok();
    let shown = json(&p.run(&["--repo", &url, "--json", "show", "main"]));
    assert_eq!(shown["tables"][0]["rows"], 3);
}

// Issue 41: what a new user found wrong in diff, time travel, exports,
// erasure and the pandas round trip.

#[test]
fn a_commit_to_a_deleted_branch_is_refused_and_the_branch_stays_restorable() {
    let p = Project::new();
    three_versions(&p);
    let head = id_of(&p, "main");
    p.run(&["branch", "--delete", "main", "--force"]).ok();
    let f = p.write("a.csv", "id,name,qty\n9,fig,1\n");
    for args in [
        &["commit", "sales", &f][..],
        &["commit", "sales", &f, "--create-branch"],
        &["commit", "other", &f, "--mode", "append"],
    ] {
        let r = p.fails_unchanged(args, 3, "branch 'main' was deleted");
        assert!(
            r.stderr.contains("tablepin branch --restore main") && r.stderr.contains(&head[..12]),
            "{}",
            r.stderr
        );
    }
    p.run(&["branch", "--restore", "main"]).ok();
    assert_eq!(id_of(&p, "main"), head);
    p.run(&["commit", "sales", &f, "--mode", "upsert"]).ok();
    assert_eq!(
        json(&p.run(&["--json", "log"])).as_array().unwrap().len(),
        4
    );
}

/// `--json commit`'s content hash of table `t` committed from `file`.
fn committed_hash(p: &Project, t: &str, file: &str) -> String {
    json(&p.run(&["--json", "commit", t, file]))["content_hash"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn an_export_compresses_and_separates_as_its_extension_says() {
    let p = Project::new();
    let f = p.write("s.csv", SALES);
    let hash = committed_hash(&p, "sales", &f);
    let gz = p.file("x.csv.gz");
    let tsv = p.file("x.tsv");
    let tgz = p.file("x.tsv.gz");
    for out in [&gz, &tsv, &tgz] {
        p.run(&["export", "main", "sales", "-o", out.to_str().unwrap()])
            .ok();
    }
    let bytes = std::fs::read(&gz).unwrap();
    assert_eq!(&bytes[..2], &[0x1f, 0x8b], "x.csv.gz is not gzipped");
    let text = std::fs::read_to_string(&tsv).unwrap();
    let header = text.lines().next().unwrap();
    assert_eq!(header, "id\tname\tqty", "{text}");
    // Each reads back as the same table.
    for (t, out) in [("a", &gz), ("b", &tsv), ("c", &tgz)] {
        assert_eq!(
            committed_hash(&p, t, out.to_str().unwrap()),
            hash,
            "{out:?}"
        );
    }
    // A compression tablepin does not write is refused before any work.
    for bad in ["x.parquet.gz", "x.arrow.gz"] {
        let out = p.file(bad);
        p.fails_unchanged(
            &["export", "main", "sales", "-o", out.to_str().unwrap()],
            2,
            "name the file",
        );
        assert!(!out.exists());
    }
}

#[test]
fn time_travel_by_date_follows_an_erasure_to_the_replacement() {
    let p = Project::new();
    three_versions(&p);
    let second = json(&p.run(&["--json", "show", "main~1"]));
    let at = format!("main@{}", second["time"].as_str().unwrap());
    assert_eq!(id_of(&p, &at), second["version"].as_str().unwrap());
    p.run(&["erase", "sales", "--where", "id = 2", "--reason", "GDPR"])
        .ok();
    let now = id_of(&p, "main~1");
    assert_ne!(now, second["version"].as_str().unwrap());
    assert_eq!(id_of(&p, &at), now);
    let cat = p.run(&["--json", "cat", &at, "sales"]);
    let rows = json(&cat);
    assert_eq!(rows["version"], now.as_str());
    assert_eq!(rows["total_rows"], 2, "{rows}");
    assert!(cat.stderr.starts_with("note: version"), "{}", cat.stderr);
    let out = p.file("then.csv");
    p.run(&["export", &at, "sales", "-o", out.to_str().unwrap()])
        .ok();
    let text = std::fs::read_to_string(&out).unwrap();
    assert_eq!(text, "id,name,qty\n1,apple,4\n3,plum,7\n");
    // One before it, by date and then by parent, the same way.
    assert_eq!(id_of(&p, &format!("{at}~1")), id_of(&p, "main~2"));
}

#[test]
fn a_version_gc_expired_is_said_to_be_expired_not_damaged() {
    let p = Project::new();
    three_versions(&p);
    let old = id_of(&p, "main~1");
    p.run(&["branch", "dev", "main~2"]).ok();
    let dev = id_of(&p, "dev");
    p.run(&["branch", "--delete", "dev"]).ok();
    p.run(&["gc", "--keep-last", "1", "--grace", "0s", "--sole-writer"])
        .ok();
    for args in [
        &["show", "main~1"][..],
        &["show", &old[..12]],
        &["cat", "main~1", "sales"],
        &["cat", &old, "sales"],
        &["export", "main~2", "sales", "-o", "x.csv"],
    ] {
        let r = p.fails_unchanged(args, 3, "was expired by gc");
        assert!(r.stderr.contains("content hash"), "{args:?}: {}", r.stderr);
    }
    // A branch whose version expired is listed, not offered for restoring.
    let listed = p.run(&["branch", "--deleted"]);
    listed.ok();
    assert!(
        listed.stdout.contains("cannot be restored") && !listed.stdout.contains("--restore dev"),
        "{}",
        listed.stdout
    );
    let r = p.fails_unchanged(&["branch", "--restore", "dev"], 3, "was expired by gc");
    assert!(r.stderr.contains(&dev[..12]), "{}", r.stderr);
    // log still walks past them.
    let log = json(&p.run(&["--json", "log"]));
    assert_eq!(log.as_array().unwrap().len(), 3, "{log}");
}

#[test]
fn a_typo_in_a_branch_to_read_is_answered_with_the_closest_name() {
    let p = Project::new();
    three_versions(&p);
    p.run(&["branch", "dev"]).ok();
    p.fails_unchanged(
        &["log", "dve"],
        3,
        "branch 'dve' does not exist; did you mean 'dev'?",
    );
    p.fails_unchanged(&["show", "dve@2030-01-01"], 3, "did you mean 'dev'?");
    let r = p.fails_unchanged(&["log", "zzzzzzzz"], 3, "branch 'zzzzzzzz' does not exist");
    assert!(!r.stderr.contains("did you mean"), "{}", r.stderr);
}

/// Every folder under the repository, relative to it.
fn folders(p: &Project) -> Vec<String> {
    let root = p.file(".tablepin");
    let mut out = Vec::new();
    let mut todo = vec![root.clone()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap().path();
            if e.is_dir() {
                out.push(e.strip_prefix(&root).unwrap().display().to_string());
                todo.push(e);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn no_command_leaves_an_empty_folder_or_a_lease_half_taken() {
    let p = Project::new();
    assert!(
        !folders(&p).contains(&"probes".to_string()),
        "{:?}",
        folders(&p)
    );
    three_versions(&p);
    // A refused erasure and a done one leave no empty locks/ folder.
    p.run(&["erase", "sales", "--where", "nosuch = 1", "--reason", "x"]);
    p.run(&["erase", "sales", "--where", "id = 3", "--reason", "GDPR"])
        .ok();
    p.run(&["gc", "--keep-last", "1", "--grace", "0s", "--sole-writer"])
        .ok();
    for f in folders(&p) {
        let empty = std::fs::read_dir(p.file(".tablepin").join(&f))
            .unwrap()
            .next()
            .is_none();
        assert!(!empty, "empty folder {f} left: {:?}", folders(&p));
    }
    // A gc killed while it wrote its lease leaves a temporary file there:
    // verify lists it, gc removes it once it is past the grace.
    let locks = p.file(".tablepin").join("locks");
    std::fs::create_dir_all(&locks).unwrap();
    let half = locks.join("gc-0123.json#1");
    std::fs::write(&half, b"{\"half").unwrap();
    let v = p.run(&["verify"]);
    v.ok();
    assert!(
        v.stdout.contains("leftover: locks/gc-0123.json#1"),
        "{}",
        v.stdout
    );
    // A small repository's rate is not rounded down to nothing.
    assert!(!v.stdout.contains(" at 0 MB/s"), "{}", v.stdout);
    let gc = json(&p.run(&["--json", "gc", "--grace", "0s", "--sole-writer"]));
    assert_eq!(gc["leftovers_deleted"], 1, "{gc}");
    assert!(!half.exists() && !locks.exists());
}

#[test]
fn a_folder_that_is_a_repository_is_found_from_inside_and_by_file_url() {
    let p = Project::new();
    let f = p.write("s.csv", SALES);
    p.run(&["commit", "sales", &f, "--key", "id"]).ok();
    // A project folder named by a file:// URL, as by its path.
    let url = format!("file://{}", p.path().display());
    let shown = json(&p.run(&["--repo", &url, "--json", "show", "main"]));
    assert_eq!(shown["tables"][0]["rows"], 3);
    // A folder made a repository itself, then used from inside.
    let bare = p.file("bare");
    let bare_s = bare.to_str().unwrap();
    p.run(&["--repo", bare_s, "init"]).ok();
    p.run(&["--repo", bare_s, "commit", "other", &f]).ok();
    let out = p
        .cmd(&["--json", "show", "main"])
        .current_dir(&bare)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let shown: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(shown["tables"][0]["table"], "other", "{shown}");
}

#[test]
fn a_delta_view_of_a_damaged_or_missing_data_file_is_refused_as_damage() {
    for damage in ["flip", "delete"] {
        let p = Project::new();
        three_versions(&p);
        let show = json(&p.run(&["--json", "show", "main"]));
        let version = show["version"].as_str().unwrap().to_string();
        let data = show["tables"][0]["files"][0]["data"]
            .as_str()
            .unwrap()
            .to_string();
        let path = blob_path(&p, &data);
        if damage == "flip" {
            let mut bytes = std::fs::read(&path).unwrap();
            let at = bytes.len() / 2;
            bytes[at] ^= 0x40;
            std::fs::write(&path, &bytes).unwrap();
        } else {
            std::fs::remove_file(&path).unwrap();
        }
        let view = p.file("view");
        let r = p.fails_unchanged(
            &[
                "export",
                "main",
                "sales",
                "--format",
                "delta",
                "-o",
                view.to_str().unwrap(),
            ],
            5,
            &version,
        );
        assert!(r.stderr.contains("table 'sales'"), "{damage}: {}", r.stderr);
        assert!(
            !view.join("_delta_log").exists(),
            "{damage}: a view was written"
        );
    }
}

#[test]
fn tables_pipe_in_to_commit_and_out_of_export_in_every_format() {
    use std::io::Write;
    let p = Project::new();
    let f = p.write("s.csv", SALES);
    let hash = committed_hash(&p, "sales", &f);
    let out = p.run(&["export", "main", "sales", "-o", "-"]);
    out.ok();
    assert_eq!(out.stdout, SALES);
    for fmt in ["csv", "tsv", "csv.gz", "tsv.gz", "parquet", "arrow"] {
        let exported = p
            .cmd(&["export", "main", "sales", "-o", "-", "--format", fmt])
            .output()
            .unwrap();
        assert!(exported.status.success(), "{fmt}: {exported:?}");
        let table = format!("t-{}", fmt.replace('.', "-"));
        let mut child = p
            .cmd(&["--json", "commit", &table, "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(&exported.stdout)
            .unwrap();
        let done = child.wait_with_output().unwrap();
        assert!(
            done.status.success(),
            "{fmt}: {}",
            String::from_utf8_lossy(&done.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&done.stdout).unwrap();
        assert_eq!(v["content_hash"], hash.as_str(), "{fmt}");
    }
    p.fails_unchanged(
        &["export", "main", "sales", "-o", "-", "--format", "xlsx"],
        2,
        "--format takes csv, tsv",
    );
    p.fails_unchanged(
        &[
            "export", "main", "sales", "-o", "x.csv", "--format", "iceberg",
        ],
        2,
        "--format takes delta (or, with -o - for standard output, csv",
    );
    p.fails_unchanged(
        &[
            "export", "main", "sales", "-o", "x.csv", "--format", "parquet",
        ],
        2,
        "goes with -o -",
    );
}

#[test]
fn a_lost_data_file_is_damage_of_its_version_in_every_command() {
    let p = Project::new();
    three_versions(&p);
    let show = json(&p.run(&["--json", "show", "main"]));
    for f in show["tables"][0]["files"].as_array().unwrap() {
        std::fs::remove_file(blob_path(&p, f["data"].as_str().unwrap())).unwrap();
    }
    for args in [
        &["sql", "select * from sales"][..],
        &["diff", "main~2", "main"],
        &[
            "erase",
            "sales",
            "--where",
            "id = 1",
            "--reason",
            "x",
            "--dry-run",
        ],
        &["erase", "sales", "--where", "id = 1", "--reason", "x"],
        &["restore", "main~2"],
    ] {
        let r = p.fails_unchanged(args, 5, "table 'sales'");
        assert!(r.stderr.contains("is missing"), "{args:?}: {}", r.stderr);
    }
}

#[test]
fn an_erasure_matches_each_version_in_its_own_schema() {
    // A column's type changed and changed back.
    let p = Project::new();
    let f = p.write("a.csv", "id,q\n1,3\n5,4\n");
    p.run(&["commit", "s", &f, "--key", "id"]).ok();
    let f = p.write("b.csv", "id,q\n1,49.5\n5,4.5\n");
    p.run(&["commit", "s", &f, "--allow-schema-change"]).ok();
    p.run(&["restore", "main~1"]).ok();
    p.run(&[
        "erase",
        "s",
        "--where",
        "id = 5",
        "--reason",
        "GDPR",
        "--dry-run",
    ])
    .ok();
    p.run(&["erase", "s", "--where", "id = 5", "--reason", "GDPR"])
        .ok();
    for rev in ["main", "main~1", "main~2"] {
        let rows = json(&p.run(&["--json", "cat", rev, "s"]));
        assert_eq!(rows["total_rows"], 1, "{rev}: {rows}");
    }
    p.run(&["verify", "--erased"]).ok();

    // A column old versions hold and the head dropped.
    let p = Project::new();
    let f = p.write("a.csv", "id,email,qty\n1,a@x,3\n2,b@x,4\n");
    p.run(&["commit", "s", &f, "--key", "id"]).ok();
    let old = id_of(&p, "main");
    let f = p.write("b.csv", "id,qty\n1,3\n2,5\n");
    p.run(&["commit", "s", &f, "--allow-schema-change"]).ok();
    let head = id_of(&p, "main");
    let r = p.run(&["erase", "s", "--where", "email = 'a@x'", "--reason", "GDPR"]);
    r.ok();
    assert!(
        r.stdout.contains("none of their rows can match there") && r.stdout.contains(&head[..12]),
        "{}",
        r.stdout
    );
    let rows = json(&p.run(&["--json", "cat", &old[..12], "s"]));
    assert_eq!(rows["total_rows"], 1, "{rows}");
    // A column no version holds is still refused, naming it.
    p.fails_unchanged(
        &["erase", "s", "--where", "phone = '1'", "--reason", "GDPR"],
        2,
        "phone",
    );
}

#[test]
fn erase_s_usage_line_shows_its_reason_as_required() {
    let p = Project::new();
    let help = p.run(&["erase", "--help"]);
    help.ok();
    assert!(
        help.stdout.contains("--reason <REASON> [--dry-run"),
        "{}",
        help.stdout
    );
}

#[test]
fn cat_and_sql_print_rows_in_column_order_as_they_come() {
    let p = Project::new();
    let f = p.write("z.csv", "zed,alpha,mid\n1,a,x\n2,b,y\n");
    p.run(&["commit", "t", &f]).ok();
    for args in [
        &["--json", "cat", "main", "t"][..],
        &["--json", "sql", "select * from t"],
    ] {
        let r = p.run(args);
        r.ok();
        let first = r.stdout.find("\"zed\"").unwrap();
        let second = r.stdout.find("\"alpha\"").unwrap();
        let third = r.stdout.find("\"mid\"").unwrap();
        assert!(first < second && second < third, "{args:?}: {}", r.stdout);
        let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
        assert_eq!(v["rows"].as_array().unwrap().len(), 2, "{v}");
    }
    let cat = json(&p.run(&["--json", "cat", "main", "t"]));
    assert_eq!(cat["total_rows"], 2);
    let sql = json(&p.run(&["--json", "sql", "select * from t where zed > 5"]));
    assert_eq!(sql["rows"], serde_json::json!([]));
    assert_eq!(sql["row_count"], 0);
    // A long answer comes in tables of a thousand rows.
    let g = p.file("g.csv");
    p.run(&["generate", "--rows", "2500", "-o", g.to_str().unwrap()])
        .ok();
    p.run(&["commit", "sales", g.to_str().unwrap()]).ok();
    let r = p.run(&["sql", "select id from sales"]);
    r.ok();
    assert_eq!(r.stdout.matches("| id ").count(), 3, "{}", &r.stdout[..200]);
    assert!(r.stdout.contains("2500 rows"));
}

#[test]
fn a_grace_shorter_than_a_commit_is_refused_unless_no_one_else_writes() {
    let p = Project::new();
    three_versions(&p);
    for grace in ["0s", "5s", "9m"] {
        let r = p.fails_unchanged(
            &["gc", "--keep-last", "1", "--grace", grace],
            2,
            "could delete the files of a commit still landing",
        );
        assert!(r.stderr.contains("--sole-writer"), "{}", r.stderr);
    }
    p.run(&["gc", "--keep-last", "1", "--grace", "10m"]).ok();
    p.run(&["gc", "--keep-last", "1", "--grace", "0s", "--sole-writer"])
        .ok();
    p.run(&["verify"]).ok();
}

#[test]
fn a_commit_that_changes_nothing_makes_no_version_unless_asked() {
    let p = Project::new();
    let f = p.write("s.csv", SALES);
    p.run(&["commit", "sales", &f, "--key", "id"]).ok();
    let head = id_of(&p, "main");
    let same = p.write("same.csv", "id,name,qty\n3,plum,7\n1,apple,3\n2,pear,5\n");
    for args in [
        &["commit", "sales", &f][..],
        &["commit", "sales", &same, "-m", "again"],
        &["commit", "sales", &same, "--mode", "upsert"],
    ] {
        let before = p.fingerprint();
        let r = p.run(args);
        r.ok();
        assert!(
            r.stdout.starts_with("Nothing to commit"),
            "{args:?}: {}",
            r.stdout
        );
        assert_eq!(before, p.fingerprint(), "{args:?} wrote");
    }
    let j = json(&p.run(&["--json", "commit", "sales", &f]));
    assert_eq!(j["empty"], true);
    assert_eq!(j["version"], head.as_str());
    assert_eq!(
        json(&p.run(&["--json", "log"])).as_array().unwrap().len(),
        1
    );
    let forced = json(&p.run(&["--json", "commit", "sales", &f, "--allow-empty"]));
    assert_eq!(forced["empty"], false);
    assert_eq!(
        json(&p.run(&["--json", "log"])).as_array().unwrap().len(),
        2
    );
    // A change is a version as always.
    let f = p.write("c.csv", "id,name,qty\n1,apple,4\n2,pear,5\n3,plum,7\n");
    let changed = json(&p.run(&["--json", "commit", "sales", &f]));
    assert_eq!(changed["empty"], false);
    assert_eq!(changed["change"]["rows_changed"], 1);
}

/// A server that answers every request as S3 answers an unknown access
/// key: 403 with its XML body and a request id.
fn refusing_s3() -> u16 {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
                line.clear();
            }
            let body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>InvalidAccessKeyId</Code><Message>The AWS Access Key Id you provided does not exist in our records.</Message><AWSAccessKeyId>AKIAWRONG</AWSAccessKeyId><RequestId>4442587FB7D0A2F9</RequestId><HostId>a-host-id</HostId></Error>";
            let _ = write!(
                stream,
                "HTTP/1.1 403 Forbidden\r\ncontent-type: application/xml\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

/// An S3 error is one sentence naming the request (bucket and key), what
/// the server said and the variable to check, not the server's XML with
/// request ids and retry settings; `--verbose` adds the whole answer
/// (issue 41, item 11).
#[test]
fn an_s3_refusal_is_one_sentence_and_verbose_gives_the_whole_answer() {
    let p = Project::new();
    let endpoint = format!("http://127.0.0.1:{}", refusing_s3());
    let env = [
        ("AWS_ENDPOINT_URL", endpoint.as_str()),
        ("AWS_ALLOW_HTTP", "true"),
        ("AWS_ACCESS_KEY_ID", "AKIAWRONG"),
        ("AWS_SECRET_ACCESS_KEY", "wrong"),
        ("AWS_REGION", "us-east-1"),
    ];
    for args in [&["log"][..], &["init"]] {
        let mut all = vec!["--repo", "s3://bkt/repo"];
        all.extend_from_slice(args);
        let r = p.run_env(&all, &env);
        r.fails(1, "InvalidAccessKeyId (The AWS Access Key Id you provided does not exist in our records.)");
        for said in ["403 Forbidden", "/bkt/repo/", "check AWS_ACCESS_KEY_ID"] {
            assert!(
                r.stderr.contains(said),
                "{args:?} lacks {said}: {}",
                r.stderr
            );
        }
        for noise in [
            "<?xml",
            "RequestId",
            "4442587FB7D0A2F9",
            "retry_timeout",
            "<Error>",
        ] {
            assert!(
                !r.stderr.contains(noise),
                "{args:?} says {noise}: {}",
                r.stderr
            );
        }
        all.insert(0, "--verbose");
        let r = p.run_env(&all, &env);
        assert_eq!(r.code, Some(1), "{}", r.stderr);
        assert!(r.stderr.contains("check AWS_ACCESS_KEY_ID"), "{}", r.stderr);
        assert!(r.stderr.contains("4442587FB7D0A2F9"), "{}", r.stderr);
    }
}

/// Rows in errors count the input's data rows from 1 (a CSV's header is
/// not a row), in a file committed whole and a window at a time alike:
/// a value that a cast would change was named by its row in its window
/// (issue 41, item 20).
#[test]
fn rows_in_errors_count_from_1_across_the_whole_input_in_windows_too() {
    let p = Project::new();
    let first = p.write("first.csv", "id,qty\n1,1\n");
    p.run(&["commit", "t", &first, "--key", "id"]).ok();
    let mut text = String::from("id,qty\n");
    for i in 1..=150_000u32 {
        let qty = if i == 100_000 {
            "1.5".to_string()
        } else {
            format!("{i}.0")
        };
        text.push_str(&format!("{i},{qty}\n"));
    }
    let big = p.write("big.csv", &text);
    for window in ["40000", "0"] {
        p.fails_unchanged(
            &["commit", "t", &big, "--cast", "--window-rows", window],
            2,
            "column 'qty' cannot become Int64 without changing a value: row 100000 holds 1.5",
        );
    }
    let dup = p.write("dup.csv", "id,qty\n1,1\n2,2\n1,3\n");
    p.fails_unchanged(
        &["commit", "t", &dup],
        2,
        "rows 1 and 3 of the input have the same key id=1",
    );
}

/// "Wrote ..." is said on stdout by every command that writes a file
/// (`generate` said it on stderr), and not at all when the rows themselves
/// go to stdout (issue 41, item 20).
#[test]
fn every_command_that_writes_a_file_says_so_on_stdout() {
    let p = Project::new();
    let g = p.file("g.csv");
    let r = p.run(&["generate", "--rows", "100", "-o", g.to_str().unwrap()]);
    r.ok();
    assert!(
        r.stdout.starts_with("Wrote 100 generated rows"),
        "{}",
        r.stdout
    );
    assert_eq!(r.stderr, "");
    p.run(&["commit", "sales", g.to_str().unwrap(), "--key", "id"])
        .ok();
    p.run(&["commit", "sales", g.to_str().unwrap(), "--mode", "delete"])
        .ok();
    for args in [
        &["export", "main~1", "sales", "-o", "e.parquet"][..],
        &["sql", "select * from sales", "-o", "q.csv"],
        &["diff", "main~1", "main", "sales", "-o", "d.parquet"],
    ] {
        let r = p.run(args);
        r.ok();
        assert!(r.stdout.contains("Wrote "), "{args:?}: {}", r.stdout);
        assert!(!r.stderr.contains("Wrote"), "{args:?}: {}", r.stderr);
    }
    let r = p.run(&["export", "main~1", "sales", "-o", "-"]);
    r.ok();
    assert!(!r.stdout.contains("Wrote") && !r.stderr.contains("Wrote"));
}
