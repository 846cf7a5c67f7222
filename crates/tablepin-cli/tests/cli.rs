//! The command line, end to end: each command's happy path, and every error
//! case with its message, its exit code, and the repository unchanged.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{Project, SALES};

#[test]
fn quickstart_commit_tag_read_back() {
    let p = Project::new();
    let f = p.write("sales.csv", SALES);
    p.run(&["commit", "sales", &f, "--key", "id", "-m", "first"])
        .ok();
    let f2 = p.write(
        "sales2.csv",
        "id,name,qty\n1,apple,3\n2,pear,6\n3,plum,7\n4,fig,1\n",
    );
    let c = p.run(&["commit", "sales", &f2, "-m", "second"]);
    c.ok();
    assert!(c.stdout.contains("+1 ~1 -0"), "{}", c.stdout);
    p.run(&["tag", "train-1", "main~1", "-m", "model A"]).ok();
    let cat = p.run(&["cat", "train-1", "sales"]);
    cat.ok();
    assert!(
        cat.stdout.contains("pear") && !cat.stdout.contains("fig"),
        "{}",
        cat.stdout
    );
    let out = p.file("out.csv");
    p.run(&["export", "train-1", "sales", "-o", out.to_str().unwrap()])
        .ok();
    assert_eq!(std::fs::read_to_string(&out).unwrap(), SALES);
    let log = p.run(&["log"]);
    log.ok();
    assert_eq!(log.stdout.lines().count(), 2);
    assert!(
        log.stdout.contains("checks=rows,files,content"),
        "{}",
        log.stdout
    );
    let tags = p.run(&["--json", "tag", "--list"]);
    tags.ok();
    let v: serde_json::Value = serde_json::from_str(&tags.stdout).unwrap();
    assert_eq!(v[0]["name"], "train-1");
    p.run(&["show", "train-1"]).ok();
    let verify = p.run(&["verify"]);
    verify.ok();
    assert!(verify.stdout.contains("OK"));
    // Export to Parquet and Arrow, then commit those back: nothing changes.
    for ext in ["parquet", "arrow"] {
        let o = p.file(&format!("o.{ext}"));
        p.run(&["export", "main", "sales", "-o", o.to_str().unwrap()])
            .ok();
        let c = p.run(&["--json", "commit", "sales", o.to_str().unwrap()]);
        c.ok();
        let v: serde_json::Value = serde_json::from_str(&c.stdout).unwrap();
        assert_eq!(v["change"]["bytes_new"], 0, "{ext}");
    }
    // Branches.
    p.run(&["branch", "dev", "train-1"]).ok();
    let b = p.run(&["branch", "--list"]);
    assert!(b.stdout.contains("dev") && b.stdout.contains("main"));
    p.run(&["branch", "--delete", "dev"]).ok();
    p.run(&["tag", "--delete", "train-1"]).ok();
}

#[test]
fn gzipped_csv_and_stdin_ipc_are_read() {
    let p = Project::new();
    let gz = p.file("s.csv.gz");
    {
        use std::io::Write;
        let f = std::fs::File::create(&gz).unwrap();
        let mut e = flate2::write::GzEncoder::new(f, flate2::Compression::default());
        e.write_all(SALES.as_bytes()).unwrap();
        e.finish().unwrap();
    }
    p.run(&["commit", "sales", gz.to_str().unwrap(), "--key", "id"])
        .ok();
    // stdin: an Arrow IPC stream.
    let arrow = p.file("s.arrow");
    p.run(&["export", "main", "sales", "-o", arrow.to_str().unwrap()])
        .ok();
    let bytes = std::fs::read(&arrow).unwrap();
    let reader =
        arrow::ipc::reader::FileReader::try_new(std::io::Cursor::new(bytes), None).unwrap();
    let schema = reader.schema();
    let mut stream = Vec::new();
    {
        let mut w = arrow::ipc::writer::StreamWriter::try_new(&mut stream, &schema).unwrap();
        for b in reader {
            w.write(&b.unwrap()).unwrap();
        }
        w.finish().unwrap();
    }
    use std::io::Write;
    let mut child = p
        .cmd(&["--json", "commit", "sales", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&stream).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["change"]["bytes_new"], 0);
}

#[test]
fn errors_name_what_failed_and_change_nothing() {
    let p = Project::new();
    let f = p.write("sales.csv", SALES);
    p.run(&["commit", "sales", &f, "--key", "id"]).ok();
    p.run(&["tag", "v1"]).ok();

    bad_files_are_named(&p);
    bad_keys_are_named(&p, &f);
    schema_changes_are_named(&p);
    bad_revisions_and_refs_are_named(&p);
    repository_errors_are_named(&p);
}

/// Files: each failure names what failed, and changes nothing.
fn bad_files_are_named(p: &Project) {
    p.fails_unchanged(
        &["commit", "sales", "nope.csv"],
        2,
        "cannot read 'nope.csv': no such file",
    );
    std::fs::create_dir(p.file("adir.csv")).unwrap();
    p.fails_unchanged(
        &["commit", "sales", "adir.csv"],
        2,
        "cannot read 'adir.csv'",
    );
    let bad = p.write("bad.parquet", "this is not parquet");
    p.fails_unchanged(&["commit", "sales", &bad], 2, "not a valid Parquet file");
    let ragged = p.write("ragged.csv", "id,name,qty\n1,apple,3\n2,pear\n");
    p.fails_unchanged(
        &["commit", "sales", &ragged],
        2,
        "line 3 has 2 fields but the header has 3",
    );
    p.fails_unchanged(
        &["commit", "sales", &p.write("x.txt", "a")],
        2,
        "unknown file type",
    );
}

/// Keys: each failure names what failed, and changes nothing.
fn bad_keys_are_named(p: &Project, f: &str) {
    p.fails_unchanged(
        &["commit", "fresh", f, "--key", "nope"],
        2,
        "table 'fresh' has no column 'nope' (columns: id, name, qty)",
    );
    let nullkey = p.write("nullkey.csv", "id,name,qty\n1,a,1\n,b,2\n");
    p.fails_unchanged(
        &["commit", "sales", &nullkey],
        2,
        "key column 'id' of table 'sales' is null in row 2 of the input",
    );
    let dup = p.write("dup.csv", "id,name,qty\n1,a,1\n2,b,2\n1,c,3\n");
    p.fails_unchanged(
        &["commit", "sales", &dup],
        2,
        "rows 1 and 3 of the input have the same key id=1",
    );
    p.fails_unchanged(
        &["commit", "sales", f, "--key", "name"],
        2,
        "table 'sales' is keyed by [id], not [name]",
    );
    p.fails_unchanged(
        &["commit", "sales", f, "--mode", "append"],
        2,
        "key id=1 exists already in table 'sales'; use --mode upsert",
    );
}

/// Schema: each failure names what failed, and changes nothing.
fn schema_changes_are_named(p: &Project) {
    let typed = p.write("typed.csv", "id,name,qty\n1,apple,3.5\n");
    p.fails_unchanged(
        &["commit", "sales", &typed],
        2,
        "column 'qty' would change type from Int64 to Float64; pass --allow-schema-change",
    );
    let fewer = p.write("fewer.csv", "id,name\n1,apple\n");
    p.fails_unchanged(
        &["commit", "sales", &fewer],
        2,
        "column 'qty' is missing from the input",
    );
}

/// Revisions and refs: each failure names what failed, and changes nothing.
fn bad_revisions_and_refs_are_named(p: &Project) {
    p.fails_unchanged(&["cat", "nope", "sales"], 3, "unknown revision 'nope'");
    p.fails_unchanged(
        &["cat", "main", "nosuch"],
        3,
        "has no table 'nosuch' (tables: sales)",
    );
    p.fails_unchanged(&["tag", "v1"], 4, "tag 'v1' exists already");
    p.fails_unchanged(&["tag", "--delete", "v9"], 3, "tag 'v9' does not exist");
    p.fails_unchanged(
        &["tag", "bad/name"],
        2,
        "'bad/name' is not a valid tag name",
    );
    p.fails_unchanged(&["cat", "main~7", "sales"], 2, "goes back 7 versions");
    p.fails_unchanged(
        &["cat", "@not-a-time", "sales"],
        2,
        "is not an RFC 3339 time",
    );
    p.fails_unchanged(
        &["export", "main", "sales", "-o", "x.xlsx"],
        2,
        "cannot export to 'x.xlsx'",
    );
}

/// Repository: each failure names what failed, and changes nothing.
fn repository_errors_are_named(p: &Project) {
    p.fails_unchanged(&["init"], 4, "exists already");
    // A failed init still says what it asked of the store (it printed
    // nothing before the init was split from opening its store).
    let again = p.run(&["--stats", "init"]);
    assert_eq!(again.code, Some(4), "{}", again.stderr);
    assert!(
        again.stderr.contains("exists already") && again.stderr.contains("requests:"),
        "{}",
        again.stderr
    );
    let elsewhere = tempfile::tempdir().unwrap();
    let r = std::process::Command::new(env!("CARGO_BIN_EXE_tablepin"))
        .args(["log"])
        .current_dir(elsewhere.path())
        .env_remove("TABLEPIN_REPO")
        .output()
        .unwrap();
    assert_eq!(r.status.code(), Some(3));
    assert!(
        String::from_utf8_lossy(&r.stderr).contains("run `tablepin init` there, or pass --repo")
    );
}

#[test]
fn an_ambiguous_prefix_is_refused() {
    let p = Project::new();
    let f = p.write("s.csv", SALES);
    p.run(&["commit", "t", &f, "--key", "id"]).ok();
    // Commit until two version ids share their first 4 hex digits.
    let mut seen = std::collections::HashMap::new();
    let mut prefix = None;
    for i in 0..2000 {
        let g = p.write("g.csv", &format!("id,name,qty\n1,apple,{i}\n"));
        let r = p.run(&["--json", "commit", "t", &g, "--mode", "upsert"]);
        r.ok();
        let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
        let id = v["version"].as_str().unwrap().to_string();
        if let Some(other) = seen.insert(id[..4].to_string(), id.clone()) {
            assert_ne!(other, id);
            prefix = Some(id[..4].to_string());
            break;
        }
    }
    let prefix = prefix.expect("two of 2000 version ids share 4 hex digits");
    p.fails_unchanged(
        &["show", &prefix],
        2,
        &format!("version id prefix '{prefix}' is ambiguous"),
    );
}

#[test]
fn a_damaged_blob_is_named_and_nothing_panics() {
    let p = Project::new();
    let f = p.write("sales.csv", SALES);
    p.run(&["commit", "sales", &f, "--key", "id"]).ok();
    let show = p.run(&["--json", "show", "main"]);
    let v: serde_json::Value = serde_json::from_str(&show.stdout).unwrap();
    let blob = v["tables"][0]["files"][0]["data"]
        .as_str()
        .unwrap()
        .to_string();
    let version = v["version"].as_str().unwrap().to_string();
    let path = p
        .file(".tablepin/objects")
        .join(&blob[..2])
        .join(&blob[2..]);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[10] ^= 0x01;
    std::fs::write(&path, bytes).unwrap();

    let verify = p.run(&["verify"]);
    assert_eq!(verify.code, Some(5), "{}", verify.stdout);
    assert!(
        verify.stdout.contains(&format!("blob {blob} is damaged")),
        "{}",
        verify.stdout
    );
    assert!(
        verify.stdout.contains(&version),
        "names the version: {}",
        verify.stdout
    );
    let cat = p.run(&["cat", "main", "sales"]);
    cat.fails(5, &format!("blob {blob} is damaged"));
    assert!(
        cat.stderr.contains(&version[..12]) || cat.stderr.contains(&version),
        "{}",
        cat.stderr
    );
    assert!(!cat.stderr.contains("panicked"));
    // export streams its rows to the file: a damaged blob found on the
    // way leaves no file, and a file that was there as it was.
    for out in ["new.csv", "old.parquet"] {
        let path = p.file(out);
        if out == "old.parquet" {
            std::fs::write(&path, b"what was there").unwrap();
        }
        let export = p.run(&["export", "main", "sales", "-o", path.to_str().unwrap()]);
        export.fails(5, &format!("blob {blob} is damaged"));
        match out {
            "new.csv" => assert!(!path.exists(), "a half-written {out} was left"),
            _ => assert_eq!(std::fs::read(&path).unwrap(), b"what was there"),
        }
        let left: Vec<_> = std::fs::read_dir(p.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains("partial"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }
}

#[test]
fn compact_rewrites_once_then_has_nothing_to_do() {
    let p = Project::new();
    let f = p.write("sales.csv", SALES);
    p.run(&["commit", "sales", &f, "--key", "id"]).ok();
    let g = p.write("later.csv", "id,name,qty\n1,apple,3\n2,pear,6\n4,fig,1\n");
    p.run(&["commit", "sales", &g]).ok();
    let before = p.run(&["cat", "main", "sales"]);
    before.ok();

    let r = p.run(&["--json", "compact", "sales", "-m", "tidy"]);
    r.ok();
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["compacted"], true);
    assert_eq!(v["files_before"], 2);
    assert_eq!(v["files_after"], 1);
    // Two of three rows hidden is past 1%: the second commit compacted its
    // old file already, so no hidden rows are left to drop, but the two
    // files (apple; pear and fig) become one.
    assert_eq!(v["hidden_rows_dropped"], 0);
    assert_eq!(v["commit"]["rows"], 3);
    let after = p.run(&["cat", "main", "sales"]);
    after.ok();
    // The same rows; only the version named under them differs.
    let rows = |out: &str| {
        out.lines()
            .filter(|l| !l.contains(" rows of "))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(rows(&after.stdout), rows(&before.stdout));
    assert!(before.stdout.contains("3 of 3 rows"), "{}", before.stdout);
    let log = p.run(&["log"]);
    log.ok();
    assert!(
        log.stdout.lines().next().unwrap().contains("\"tidy\""),
        "{}",
        log.stdout
    );

    // Nothing left to do: success, and the repository as it was.
    let prints = p.fingerprint();
    let again = p.run(&["compact", "sales"]);
    again.ok();
    assert!(
        again.stdout.contains("already compact; nothing written"),
        "{}",
        again.stdout
    );
    assert_eq!(p.fingerprint(), prints);
    p.fails_unchanged(
        &["compact", "nosuch"],
        2,
        "table 'nosuch' does not exist yet, so there is nothing to compact",
    );
    // A branch that does not exist is named as such, not as an empty table.
    p.fails_unchanged(
        &["compact", "sales", "--branch", "nope"],
        3,
        "branch 'nope' does not exist (branches: main)",
    );
    p.run(&["verify"]).ok();
}

#[test]
fn help_explains_every_command() {
    let p = Project::new();
    let top = p.run(&["--help"]);
    top.ok();
    // Every command the top help lists, so a command added later is held
    // to this too.
    let commands: Vec<&str> = top
        .stdout
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        // A description's wrapped lines are indented further.
        .filter(|l| !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .collect();
    for c in [
        "init", "commit", "diff", "sql", "restore", "generate", "erase", "export",
    ] {
        assert!(commands.contains(&c), "{c} is not listed: {}", top.stdout);
    }
    for c in commands {
        let r = p.run(&[c, "--help"]);
        r.ok();
        assert!(
            r.stdout.contains(&format!("Usage: tablepin {c}")),
            "{c}: {}",
            r.stdout
        );
        // What the command does, in a sentence, before its usage.
        let about = r.stdout.split("Usage:").next().unwrap_or_default();
        assert!(
            about.split_whitespace().count() >= 5,
            "{c} has no sentence saying what it does: {}",
            r.stdout
        );
        let bare = unexplained(&r.stdout);
        assert!(
            bare.is_empty(),
            "{c} --help: {bare:?} have no explanation:\n{}",
            r.stdout
        );
    }
}

/// The arguments and options of a `--help` page listed without a word of
/// explanation: on their own line with nothing after them, and no more
/// indented text on the line below.
fn unexplained(help: &str) -> Vec<String> {
    let lines: Vec<&str> = help.lines().collect();
    let mut out = Vec::new();
    let mut listing = false;
    for (i, line) in lines.iter().enumerate() {
        if line.ends_with(':') && !line.starts_with(' ') {
            listing = matches!(*line, "Arguments:" | "Options:");
            continue;
        }
        let entry = line.trim_start();
        let indent = line.len() - entry.len();
        // An entry starts 2 spaces in ("-m, --message"), or 6 when it has
        // no short flag ("      --json"); its wrapped text is further in.
        if !listing || indent > 6 || !entry.starts_with(['-', '<', '[']) {
            continue;
        }
        let inline = entry.contains("  ");
        let below = lines.get(i + 1).is_some_and(|next| {
            let text = next.trim_start();
            !text.is_empty() && next.len() - text.len() > indent
        });
        if !inline && !below {
            out.push(entry.to_string());
        }
    }
    out
}

#[test]
fn commit_dry_run_writes_nothing_and_its_plan_commits_exactly_that() {
    let p = Project::new();
    let v1 = p.write("v1.csv", "id,qty\n1,10\n2,20\n3,30\n");
    p.run(&["commit", "t", v1.as_str(), "--key", "id", "-m", "first"])
        .ok();
    let v2 = p.write("v2.csv", "id,qty\n1,10\n2,21\n4,40\n");
    let before = p.fingerprint();
    let text = p.run(&["commit", "t", v2.as_str(), "--dry-run"]);
    text.ok();
    assert!(
        text.stdout.contains("3 rows after (+1 ~1 -1)"),
        "{}",
        text.stdout
    );
    assert!(text.stdout.contains("nothing was committed"));
    let dry = p.run(&["--json", "commit", "t", v2.as_str(), "--dry-run"]);
    dry.ok();
    assert_eq!(before, p.fingerprint(), "--dry-run changed the repository");
    let plan = p.write("plan.json", &dry.stdout);
    let v: serde_json::Value = serde_json::from_str(&dry.stdout).unwrap();
    assert_eq!(v["plan"]["mode"], "overwrite");
    let hash = v["plan"]["plan"]["snapshot"]["content_hash"].clone();

    // The plan's own flags cannot be given again; another file or table is
    // refused; nothing changes.
    let stderr = p.run(&[
        "commit",
        "t",
        v2.as_str(),
        "--plan",
        plan.as_str(),
        "--mode",
        "append",
    ]);
    assert_eq!(stderr.code, Some(2), "{}", stderr.stderr);
    let other = p.write("other.csv", "id,qty\n1,11\n");
    p.fails_unchanged(
        &["commit", "t", other.as_str(), "--plan", plan.as_str()],
        2,
        "not the one the saved commit plan for table 't' was made with",
    );
    p.fails_unchanged(
        &["commit", "u", v2.as_str(), "--plan", plan.as_str()],
        2,
        "commits to table 't', not 'u'",
    );

    let done = p.run(&[
        "--json",
        "commit",
        "t",
        v2.as_str(),
        "--plan",
        plan.as_str(),
        "-m",
        "second",
    ]);
    done.ok();
    let r: serde_json::Value = serde_json::from_str(&done.stdout).unwrap();
    assert_eq!(r["content_hash"], hash);
    assert_eq!(
        (
            &r["change"]["rows_added"],
            &r["change"]["rows_changed"],
            &r["change"]["rows_deleted"]
        ),
        (&1.into(), &1.into(), &1.into())
    );
    let log = p.run(&["log"]);
    assert!(log.stdout.contains("second"), "{}", log.stdout);

    // Applied again, the plan no longer fits: the branch moved.
    p.fails_unchanged(
        &["commit", "t", v2.as_str(), "--plan", plan.as_str()],
        4,
        "no longer fits the repository",
    );
}

/// A file larger than `--window-rows` is committed a window at a time and
/// gives what committing it whole gives: the same counts and content hash
/// on each step (a new table from a CSV, an overwrite from a Parquet file
/// with 5 rows changed), and the same table read back.
#[test]
fn a_file_committed_a_window_at_a_time_equals_it_committed_whole() {
    let (small, whole) = (Project::new(), Project::new());
    let base = small.file("base.csv");
    let later = small.file("later.parquet");
    for (f, returns) in [(&base, "0"), (&later, "5")] {
        small
            .run(&[
                "generate",
                "--rows",
                "150000",
                "--returns",
                returns,
                "-o",
                f.to_str().unwrap(),
            ])
            .ok();
    }
    let commit = |p: &Project, f: &std::path::Path, window: &str| -> serde_json::Value {
        let r = p.run(&[
            "--json",
            "commit",
            "sales",
            f.to_str().unwrap(),
            "--key",
            "id",
            "--window-rows",
            window,
        ]);
        r.ok();
        serde_json::from_str(&r.stdout).unwrap()
    };
    // A file is read 65,536 rows at a time, so 150,000 rows make windows.
    let files = |p: &Project| -> usize {
        let show: serde_json::Value =
            serde_json::from_str(&p.run(&["--json", "show", "main"]).stdout).unwrap();
        show["tables"][0]["files"].as_array().unwrap().len()
    };
    for (i, f) in [&base, &later].into_iter().enumerate() {
        let (a, b) = (commit(&small, f, "40000"), commit(&whole, f, "0"));
        if i == 0 {
            // Each window wrote its own file; one commit, one file.
            assert!(files(&small) > 1, "the file was not cut into windows");
            assert_eq!(files(&whole), 1);
        }
        for field in ["rows", "content_hash"] {
            assert_eq!(a[field], b[field], "{field} of {}", f.display());
        }
        for field in ["rows_added", "rows_changed", "rows_deleted", "checks"] {
            assert_eq!(
                a["change"][field],
                b["change"][field],
                "{field} of {}",
                f.display()
            );
        }
    }
    // The rows; the last line names the version, which differs by its time.
    let cat = |p: &Project| {
        let out = p.run(&["cat", "main", "sales", "--limit", "200000"]).stdout;
        let rows: Vec<String> = out.lines().map(String::from).collect();
        assert!(rows.len() > 150_000, "{} lines", rows.len());
        rows[..rows.len() - 1].to_vec()
    };
    assert!(cat(&small) == cat(&whole), "the tables differ");
    small.run(&["verify"]).ok();
}

#[test]
fn bash_completes_commands_from_the_generated_script() {
    let p = Project::new();
    let script = p.run(&["completions", "bash"]);
    script.ok();
    let path = p.write("tablepin.bash", &script.stdout);
    let complete = |line: &str| {
        let words: Vec<&str> = line.split(' ').collect();
        let probe = format!(
            "source {path} && COMP_WORDS=({}) && COMP_CWORD={} && COMP_LINE='{line}' && COMP_POINT={} && _tablepin tablepin '{}' '{}' && printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            line,
            words.len() - 1,
            line.len(),
            words[words.len() - 1],
            words[words.len() - 2],
        );
        let out = std::process::Command::new("bash")
            .args(["-c", &probe])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.stderr.is_empty(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let got = complete("tablepin com");
    let words: Vec<&str> = got.lines().collect();
    assert_eq!(words, ["commit", "compact", "completions"], "{got}");
    assert!(complete("tablepin commit --mo")
        .lines()
        .any(|w| w == "--mode"));
}

#[test]
fn man_renders_the_page_of_a_command() {
    let p = Project::new();
    let page = p.run(&["man", "commit"]);
    page.ok();
    let path = p.write("tablepin-commit.1", &page.stdout);
    let out = std::process::Command::new("man")
        .args(["-l", "-P", "cat", &path])
        .env("MANWIDTH", "100")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("tablepin-commit"), "{text}");
    assert!(
        text.contains("Commit a table file as a new version"),
        "{text}"
    );
    assert!(text.contains("--mode"), "{text}");
    // All of them, to a folder, one per command.
    let dir = p.path().join("man1");
    p.run(&["man", "--out", dir.to_str().unwrap()]).ok();
    for name in [
        "tablepin.1",
        "tablepin-commit.1",
        "tablepin-erase.1",
        "tablepin-man.1",
    ] {
        assert!(dir.join(name).exists(), "{name}");
    }
    let unknown = p.run(&["man", "comit"]);
    assert_eq!(unknown.code, Some(2));
    assert!(
        unknown.stderr.contains("no command 'comit'"),
        "{}",
        unknown.stderr
    );
}

#[test]
fn version_names_the_commit_and_the_format_it_writes() {
    let p = Project::new();
    let v = p.run(&["--version"]);
    v.ok();
    let line = v.stdout.trim();
    assert!(line.starts_with("tablepin 0."), "{line}");
    assert!(
        line.ends_with(&format!(
            "repository format {})",
            tablepin::format::REPO_FORMAT
        )),
        "{line}"
    );
    let commit = line
        .split("(commit ")
        .nth(1)
        .and_then(|t| t.split(',').next())
        .unwrap();
    assert!(
        commit == "unknown"
            || (commit.len() == 12 && commit.chars().all(|c| c.is_ascii_hexdigit())),
        "{line}"
    );
}

/// On a terminal (a pseudo-terminal made by `script`), help is styled,
/// and NO_COLOR turns the styling off.
#[test]
fn no_color_turns_styling_off_on_a_terminal() {
    let on_a_terminal = |no_color: bool| {
        let mut c = std::process::Command::new("script");
        c.args([
            "-qec",
            &format!("{} --help", env!("CARGO_BIN_EXE_tablepin")),
            "/dev/null",
        ]);
        c.env_remove("NO_COLOR");
        if no_color {
            c.env("NO_COLOR", "1");
        }
        let out = c.output().unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let styled = on_a_terminal(false);
    assert!(
        styled.contains("Usage") && styled.contains('\u{1b}'),
        "{styled:?}"
    );
    let plain = on_a_terminal(true);
    assert!(
        plain.contains("Usage") && !plain.contains('\u{1b}'),
        "{plain:?}"
    );
}
