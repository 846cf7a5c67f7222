"""merge and revert from Python and the command line, on a small table and
on the lab's repository: conflicts named with the three values and the
branch untouched, settled merges whose content hash equals one computed here
from the versions read whole, a fast-forward that writes nothing, and a
revert of a weekly commit."""

import json
import os
import shutil

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import tablepin

from conftest import cli


def objects(repo_path):
    return sum(len(files) for _, _, files in os.walk(os.path.join(repo_path, "objects")))


def test_a_small_merge_from_python_names_conflicts_then_settles_them(tmp_path):
    repo = tablepin.Repo.init(str(tmp_path / "repo"))
    repo.commit("t", pa.table({"id": [1, 2, 3, 4], "qty": [10, 20, 30, 40]}), key=["id"])
    repo.branch("relabel")
    repo.commit("t", pa.table({"id": [2], "qty": [21]}), mode="upsert")
    repo.commit("t", pa.table({"id": [1, 2], "qty": [11, 22]}), mode="upsert", branch="relabel")
    repo.commit("t", pa.table({"id": [4]}), mode="delete", branch="relabel")
    head = repo.resolve("main")
    m = repo.merge("relabel")
    assert m.outcome == "conflicts" and m.version is None
    assert repo.resolve("main") == head
    assert m.tables["t"].conflicts == 1
    assert m.conflicts["t"].to_pylist() == [
        {"id": 2, "conflict": "modified/modified", "columns": "qty", "base_qty": 20, "ours_qty": 21, "theirs_qty": 22}
    ]
    # A person's resolution: the row key 2 should have.
    m = repo.merge("relabel", resolved={"t": pa.table({"id": [2], "qty": [25]})})
    assert m.outcome == "merged"
    assert repo.read("t").sort_by("id").to_pylist() == [
        {"id": 1, "qty": 11}, {"id": 2, "qty": 25}, {"id": 3, "qty": 30},
    ]
    info = repo.show("main")
    assert info.parents == (head, repo.resolve("relabel"))
    assert repo.merge("relabel").outcome == "up-to-date"
    with pytest.raises(tablepin.BadInput, match="'ours' or 'theirs'"):
        repo.merge("relabel", strategy="mine")


def test_a_table_that_cannot_be_merged_by_rows_names_the_way_to_keep_one_side(tmp_path):
    """Each front end names its own way to keep one side's table (Python
    named the command line's --ours=t), and the named way works."""
    path = str(tmp_path / "repo")
    repo = tablepin.Repo.init(path)
    repo.commit("t", pa.table({"id": [1, 2], "qty": [1, 2], "note": ["a", "b"]}), key=["id"])
    repo.branch("narrow")
    narrow = pa.table({"id": [1, 2], "qty": [9, 2]})
    repo.commit("t", narrow, mode="overwrite", allow_schema_change=True, branch="narrow")
    repo.commit("t", pa.table({"id": [3], "qty": [3], "note": ["c"]}), mode="upsert")
    head = repo.resolve("main")
    with pytest.raises(tablepin.BadInput) as e:
        repo.merge("narrow")
    said = str(e.value)
    assert "not columns dropped or retyped" in said, said
    assert 'keep one side\'s table with tables={"t": "ours"} or tables={"t": "theirs"}' in said, said
    assert "--" not in said, said
    assert repo.resolve("main") == head
    out = cli(tmp_path, "--repo", path, "merge", "narrow", ok=False)
    assert out.returncode == 2, out.stderr
    assert "keep one side's table with --ours=t or --theirs=t" in out.stderr, out.stderr
    assert repo.resolve("main") == head
    m = repo.merge("narrow", tables={"t": "theirs"})
    assert m.outcome == "merged"
    assert repo.read("t").sort_by("id") == narrow


def test_merge_and_revert_on_the_command_line_report_json_and_write_conflicts(tmp_path):
    import pyarrow.parquet as pq

    run = lambda *a, **k: cli(tmp_path, *a, **k)  # noqa: E731
    run("init")
    pq.write_table(pa.table({"id": [1, 2, 3], "qty": [1, 2, 3]}), tmp_path / "a.parquet")
    run("commit", "t", "a.parquet", "--key", "id")
    run("branch", "side")
    pq.write_table(pa.table({"id": [1, 2, 3], "qty": [1, 5, 3]}), tmp_path / "b.parquet")
    run("commit", "t", "b.parquet")
    pq.write_table(pa.table({"id": [1, 2, 3], "qty": [7, 6, 3]}), tmp_path / "c.parquet")
    run("commit", "t", "c.parquet", "--branch", "side")
    out = run("--json", "merge", "side", "-o", "conflicts.parquet", ok=False)
    assert out.returncode == 4, out.stderr
    r = json.loads(out.stdout)
    assert r["outcome"] == "conflicts" and r["tables"][0]["conflicts"] == 1
    assert r["tables"][0]["conflict_rows"][0]["theirs_qty"] == 6
    conflicts = pq.read_table(tmp_path / "conflicts.parquet")
    assert conflicts.column("ours_qty").to_pylist() == [5]
    text = run("merge", "side", ok=False).stdout
    assert "--theirs=t" in text and "--resolved t=FILE" in text, text
    # Fixed and merged again.
    pq.write_table(pa.table({"id": [2], "qty": [8]}), tmp_path / "fixed.parquet")
    r = run("--json", "merge", "side", "--resolved", "fixed.parquet")
    assert r["outcome"] == "merged"
    assert tablepin.Repo(str(tmp_path / ".tablepin")).read("t").sort_by("id").to_pylist() == [
        {"id": 1, "qty": 7}, {"id": 2, "qty": 8}, {"id": 3, "qty": 3},
    ]
    graph = run("log", "--graph").splitlines()
    assert graph[0].startswith("* ") and "| \\" in graph and "| /" in graph, graph
    assert sum(line.startswith(("* ", "| * ")) for line in graph) == 4, graph
    assert len(run("log").splitlines()) == 3, "log follows first parents"
    r = run("--json", "revert", "main~1", "--theirs")
    assert r["outcome"] == "merged"
    assert "revert main~1" in run("log")
    bad = run("merge", "side", "--ours", "--theirs", ok=False)
    assert bad.returncode == 2 and "--ours and --theirs" in bad.stderr


@pytest.fixture
def lab_repo(lab_out, tmp_path):
    path = tmp_path / "repo"
    shutil.copytree(lab_out / "repo", path)
    return path


def by_key(table, key):
    cols = table.column_names
    rows = table.to_pylist()
    return {tuple(r[k] for k in key): tuple(r[c] for c in cols) for r in rows}


def test_the_lab_s_week_51_branch_merges_into_main_with_exactly_its_conflicts(lab_repo):
    repo = tablepin.Repo(str(lab_repo))
    key = repo.show("week-51").tables["sales"].key
    base = repo.read("sales", "week-51")
    main = repo.read("sales", "main")
    col = next(
        f.name for f in base.schema
        if f.name not in key and (pa.types.is_floating(f.type) or pa.types.is_integer(f.type))
    )
    b, m = by_key(base, key), by_key(main, key)
    # Keys whose rows main has not changed since week 51.
    same = sorted(k for k, row in b.items() if m.get(k) == row)
    changed, deleted = same[1000:100_000:990][:100], same[200_000:200_010]
    assert len(changed) == 100 and len(deleted) == 10
    at = base.column_names.index(col)
    key_table = lambda ks: pa.table({k: [x[i] for x in ks] for i, k in enumerate(key)}, schema=pa.schema([base.schema.field(k) for k in key]))  # noqa: E731

    def rows(ks, delta):
        t = pa.Table.from_pylist(
            [dict(zip(base.column_names, b[k])) for k in ks], schema=base.schema
        )
        return t.set_column(at, col, pc.add(t.column(col), pa.scalar(delta, t.schema.field(col).type)))

    repo.branch("relabel", "week-51")
    repo.commit("sales", rows(changed, 1000), mode="upsert", branch="relabel", message="relabel 100")
    repo.commit("sales", key_table(deleted), mode="delete", branch="relabel", message="drop 10")
    repo.commit("sales", rows(changed[:50], 2000), mode="upsert", message="main changes 50")
    head = repo.resolve("main")
    merged = repo.merge("relabel")
    assert merged.outcome == "conflicts"
    assert repo.resolve("main") == head
    c = merged.conflicts["sales"]
    assert c.num_rows == 50
    assert sorted(tuple(r[k] for k in key) for r in c.to_pylist()) == sorted(changed[:50])
    first = c.to_pylist()[0]
    k0 = tuple(first[k] for k in key)
    assert first[f"base_{col}"] == b[k0][at]
    assert first[f"ours_{col}"] == pytest.approx(b[k0][at] + 2000)
    assert first[f"theirs_{col}"] == pytest.approx(b[k0][at] + 1000)
    assert first["conflict"] == "modified/modified" and first["columns"] == col

    # Settled for theirs: main with both sides' changes applied by key.
    done = repo.merge("relabel", strategy="theirs")
    assert done.outcome == "merged"
    now = by_key(main, key)
    for k in changed:
        row = list(b[k])
        row[at] = row[at] + 1000
        now[k] = tuple(row)
    for k in deleted:
        del now[k]
    expected = pa.Table.from_pylist([dict(zip(base.column_names, r)) for r in now.values()], schema=base.schema)
    assert repo.show("main").tables["sales"].content_hash == tablepin.content_hash(expected)
    assert repo.show("main").tables["sales"].rows == len(now)

    # A branch behind main fast-forwards and writes nothing.
    repo.branch("behind", "main~3")
    before = objects(lab_repo)
    ff = repo.merge("main", into="behind")
    assert ff.outcome == "fast-forward" and repo.resolve("behind") == repo.resolve("main")
    assert objects(lab_repo) == before


def test_reverting_a_weekly_commit_of_the_lab_gives_its_parent_plus_later_changes(lab_repo):
    repo = tablepin.Repo(str(lab_repo))
    key = repo.show("main").tables["sales"].key
    # The last weekly commit: its parent's table exactly.
    parent_hash = repo.show("main~1").tables["sales"].content_hash
    r = repo.revert("main")
    assert r.outcome == "merged"
    assert repo.show("main").tables["sales"].content_hash == parent_hash
    # An earlier one, settled for the version before it: every key it
    # changed takes that version's row, every other key stays as the head
    # has it.
    log = repo.log("main", max=8)
    target = log[6].version
    p, v, h = (by_key(repo.read("sales", rev), key) for rev in (target + "~1", target, "main"))
    expected = dict(h)
    for k in set(p) | set(v):
        if p.get(k) != v.get(k):
            if k in p:
                expected[k] = p[k]
            else:
                expected.pop(k, None)
    r = repo.revert(target, strategy="theirs")
    assert r.outcome == "merged"
    schema = repo.read("sales", "main").schema
    table = pa.Table.from_pylist([dict(zip(schema.names, r)) for r in expected.values()], schema=schema)
    assert repo.show("main").tables["sales"].content_hash == tablepin.content_hash(table)
