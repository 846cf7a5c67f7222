//! `diff` and `restore` from the command line: what they print, what they
//! write, and every mistake refused in one sentence with nothing changed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{Project, SALES};

fn history(p: &Project) {
    let f = p.write("s.csv", SALES);
    p.run(&["commit", "sales", &f, "--key", "id", "-m", "one"])
        .ok();
    p.run(&["tag", "v1"]).ok();
    // pear's qty changes, plum goes, fig comes.
    let f = p.write("s.csv", "id,name,qty\n1,apple,3\n2,pear,6\n4,fig,1\n");
    p.run(&["commit", "sales", &f, "-m", "two"]).ok();
    let f = p.write("o.csv", "a\nx\nx\n");
    p.run(&["commit", "other", &f, "-m", "unkeyed"]).ok();
}

#[test]
fn diff_prints_added_removed_and_modified_rows_with_old_and_new_values() {
    let p = Project::new();
    history(&p);
    let r = p.run(&["diff", "v1", "main"]);
    r.ok();
    let out = &r.stdout;
    assert!(
        out.contains("table 'sales' (key id): 1 added, 1 removed, 1 modified (columns: qty 1)"),
        "{out}"
    );
    assert!(out.contains("  - id=3: name=plum, qty=7"), "{out}");
    assert!(out.contains("  ~ id=2: qty 5 -> 6"), "{out}");
    assert!(out.contains("  + id=4: name=fig, qty=1"), "{out}");
    assert!(out.contains("table 'other' (new table)"), "{out}");
    // --stat: counts only.
    let r = p.run(&["diff", "v1", "main", "sales", "--stat"]);
    r.ok();
    assert!(!r.stdout.contains("plum"), "{}", r.stdout);
    // --json: counts, and the rows with from_ and to_ columns.
    let r = p.run(&["--json", "diff", "v1", "main", "sales"]);
    r.ok();
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let t = &v["tables"][0];
    assert_eq!(t["counts"]["modified"], 1);
    let rows = t["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3);
    let modified = rows.iter().find(|r| r["diff_type"] == "modified").unwrap();
    assert_eq!(
        (modified["from_qty"].as_i64(), modified["to_qty"].as_i64()),
        (Some(5), Some(6))
    );
    // -o writes every differing row.
    let out = p.file("d.csv");
    p.run(&["diff", "v1", "main", "sales", "-o", out.to_str().unwrap()])
        .ok();
    let text = std::fs::read_to_string(&out).unwrap();
    assert_eq!(
        text.lines().next().unwrap(),
        "diff_type,from_id,to_id,from_name,to_name,from_qty,to_qty"
    );
    assert_eq!(text.lines().count(), 4, "{text}");
    // An unkeyed table is compared as a multiset of rows.
    let f = p.write("o.csv", "a\nx\ny\n");
    p.run(&["commit", "other", &f]).ok();
    let r = p.run(&["diff", "main~1", "main", "other"]);
    r.ok();
    assert!(
        r.stdout.contains("1 added, 1 removed, 0 modified"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("  - a=x") && r.stdout.contains("  + a=y"),
        "{}",
        r.stdout
    );
}

#[test]
fn diff_refuses_mistakes_in_one_sentence_changing_nothing() {
    let p = Project::new();
    history(&p);
    p.fails_unchanged(&["diff", "v2", "main"], 3, "v2");
    p.fails_unchanged(&["diff", "v1", "main", "nope"], 3, "no table 'nope'");
    p.fails_unchanged(
        &["diff", "v1", "main", "-o", "d.parquet"],
        2,
        "-o writes the rows of one table",
    );
    p.fails_unchanged(
        &["diff", "v1", "main", "sales", "-o", "d.txt"],
        2,
        "name the file .parquet",
    );
    assert!(!p.file("d.parquet").exists());
}

#[test]
fn restore_brings_back_a_tag_s_tables_as_a_new_version() {
    let p = Project::new();
    history(&p);
    let hash = |rev: &str| {
        let r = p.run(&["--json", "show", rev]);
        r.ok();
        let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
        let tables = v["tables"].as_array().unwrap();
        let sales = tables.iter().find(|t| t["table"] == "sales").unwrap();
        sales["content_hash"].as_str().unwrap().to_string()
    };
    let r = p.run(&["restore", "v1", "--table", "sales", "-m", "back to v1"]);
    r.ok();
    assert!(
        r.stdout.contains("restored table 'sales' of v1"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("sales: 1 added, 1 changed, 1 deleted"),
        "{}",
        r.stdout
    );
    assert_eq!(hash("main"), hash("v1"));
    // The other table stays; the log keeps the versions in between.
    p.run(&["cat", "main", "other"]).ok();
    let r = p.run(&["log"]);
    assert!(
        r.stdout.contains("back to v1") && r.stdout.contains("two"),
        "{}",
        r.stdout
    );
    let r = p.run(&["restore", "v1", "--table", "sales"]);
    r.ok();
    assert!(r.stdout.contains("nothing written"), "{}", r.stdout);
    p.fails_unchanged(
        &["restore", "v1", "--table", "other"],
        3,
        "no table 'other'",
    );
    p.fails_unchanged(&["restore", "nope"], 3, "nope");
    p.fails_unchanged(
        &["restore", "v1", "--branch", "dev"],
        3,
        "branch 'dev' does not exist",
    );
}

#[test]
fn sql_reads_any_version_prints_json_and_writes_files() {
    let p = Project::new();
    history(&p);
    let q = "SELECT o.id, o.qty AS before, n.qty AS after FROM \"sales@v1\" o JOIN sales n ON o.id = n.id WHERE o.qty <> n.qty";
    let r = p.run(&["sql", q]);
    r.ok();
    assert!(r.stdout.contains("| 2  | 5      | 6     |"), "{}", r.stdout);
    assert!(r.stdout.contains("1 rows"), "{}", r.stdout);
    let r = p.run(&[
        "--json",
        "sql",
        "SELECT name FROM \"sales@v1\" WHERE qty > 4 ORDER BY name",
    ]);
    r.ok();
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(
        v["rows"],
        serde_json::json!([{"name": "pear"}, {"name": "plum"}])
    );
    assert_eq!(v["tables"][0]["name"], "sales@v1");
    assert_eq!(v["tables"][0]["stats"]["columns_decoded"], 2);
    // No rows: the header still shows.
    let r = p.run(&["sql", "SELECT name FROM sales WHERE qty > 100"]);
    r.ok();
    assert!(
        r.stdout.contains("| name |") && r.stdout.contains("0 rows"),
        "{}",
        r.stdout
    );
    let out = p.file("r.csv");
    p.run(&[
        "sql",
        "SELECT id FROM sales ORDER BY id",
        "-o",
        out.to_str().unwrap(),
    ])
    .ok();
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "id\n1\n2\n4\n");
    p.fails_unchanged(
        &["sql", "SELECT * FROM \"sales@v9\""],
        3,
        "unknown revision 'v9'",
    );
    p.fails_unchanged(&["sql", "SELECT * FROM nope"], 3, "no table 'nope'");
    p.fails_unchanged(&["sql", "SELECT nope FROM sales"], 2, "nope");
    p.fails_unchanged(&["sql", "SELEC 1"], 2, "SQL syntax error");
    p.fails_unchanged(&["sql", "DELETE FROM sales"], 2, "not supported");
    p.fails_unchanged(
        &["sql", "SELECT 1", "-o", "r.txt"],
        2,
        "name the file .parquet",
    );
}
