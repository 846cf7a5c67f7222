"""The Python package (issue 22): commit from pyarrow, pandas and polars, read
any version back from Python and from the CLI value for value, hand rows to
other engines as an Arrow stream, prove them with the content hash, and
raise one exception class per kind of failure."""

import datetime as dt
import os
import threading
import time

import duckdb
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest

import tablepin
from conftest import cli, s3_location
from test_export_types import golden, same


def test_a_repository_is_made_found_and_opened_as_the_cli_does(tmp_path, monkeypatch):
    repo = tablepin.Repo.init(tmp_path / "r")
    assert repo.location.endswith("r")
    # A project folder: `tablepin init` there, then Repo() from a subfolder.
    cli(tmp_path, "init")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    assert tablepin.Repo().location == str(tmp_path / ".tablepin")
    monkeypatch.setenv("TABLEPIN_REPO", str(tmp_path / "r"))
    assert tablepin.Repo().location == str(tmp_path / "r")
    monkeypatch.delenv("TABLEPIN_REPO")
    monkeypatch.chdir("/")
    with pytest.raises(tablepin.NotFound, match=r"^no tablepin repository in / or any parent folder"):
        tablepin.Repo()


def pandas_frame():
    return pd.DataFrame(
        {
            "id": [3, 1, 2],
            "when": pd.to_datetime(["2010-12-01 08:26", "2011-01-04 10:00", "2011-12-09 12:50"]),
            "qty": pd.array([6, None, -2], dtype="Int64"),
            "country": pd.Categorical(["France", "EIRE", "France"]),
            "price": [2.55, 3.39, 0.85],
        }
    )


def test_pandas_rows_round_trip_through_python_and_the_cli(tmp_path):
    repo = tablepin.Repo.init(tmp_path / "r")
    df = pandas_frame()
    v = repo.commit("sales", df, key="id", message="from pandas")
    assert (v.rows, v.change.rows_added, v.branch) == (3, 3, "main")
    assert v.change.checks == ("rows", "schema", "files", "content")
    got = repo.read("sales")
    # Key order; the categorical comes back as its values.
    assert got.column("id").to_pylist() == [1, 2, 3]
    want = df.sort_values("id").reset_index(drop=True)
    back = got.to_pandas()
    assert str(back["when"].dtype).startswith("datetime64")
    assert back["when"].tolist() == want["when"].tolist()
    assert back["qty"].astype("Int64").tolist() == want["qty"].tolist()
    assert back["country"].tolist() == want["country"].astype(str).tolist()
    assert back["price"].tolist() == want["price"].tolist()
    # The CLI reads the same rows and the same content hash.
    cli(tmp_path, "--repo", "r", "export", "main", "sales", "-o", "out.arrow")
    exported = ipc.open_file(tmp_path / "out.arrow").read_all()
    assert exported.equals(got)
    shown = cli(tmp_path, "--repo", "r", "--json", "show", "main")
    assert shown["tables"][0]["content_hash"] == v.content_hash == tablepin.content_hash(got)


def test_polars_and_pyarrow_rows_round_trip(tmp_path):
    repo = tablepin.Repo.init(tmp_path / "r")
    frame = pl.DataFrame({"id": [1, 2, 3], "name": ["a", None, "ü"], "x": [0.5, None, 2.0]})
    v = repo.commit("p", frame, key=["id"])
    # polars takes the stream as a DataFrame (pl.from_arrow of a bare stream
    # gives one struct Series, as for any Arrow stream), or the read table.
    assert pl.DataFrame(repo.scan("p")).rows() == frame.rows()
    assert pl.from_arrow(repo.scan("p")).struct.unnest().rows() == frame.rows()
    assert pl.from_arrow(repo.read("p")).rows() == frame.rows()
    assert tablepin.content_hash(frame) == v.content_hash
    # Upsert from a pyarrow table, read the old version by id.
    change = pa.table({"id": [2, 4], "name": ["b", "d"], "x": [1.0, 4.0]})
    v2 = repo.commit("p", change, mode="upsert")
    assert (v2.change.rows_added, v2.change.rows_changed) == (1, 1)
    assert pl.from_arrow(repo.read("p", rev=v.version)).rows() == frame.rows()
    assert repo.read("p", rev="main~1").equals(repo.read("p", rev=v.version[:10]))
    assert repo.read("p").column("name").to_pylist() == ["a", "b", "ü", "d"]


def test_every_type_of_the_rowhash_golden_set_survives(tmp_path):
    repo = tablepin.Repo.init(tmp_path / "r")
    t = golden()
    v = repo.commit("g", t, key="id")
    got = repo.read("g")
    assert got.schema.remove_metadata() == t.schema
    assert same(got.to_pylist(), t.to_pylist())
    assert tablepin.content_hash(t) == v.content_hash
    # The same rows committed by the CLI from a file hash alike.
    with ipc.new_file(tmp_path / "g.arrow", t.schema) as w:
        w.write_table(t)
    out = cli(tmp_path, "--repo", "r", "--json", "commit", "g2", "g.arrow", "--key", "id")
    assert out["content_hash"] == v.content_hash


def test_a_scan_is_an_arrow_stream_for_pyarrow_polars_and_duckdb(tmp_path):
    repo = tablepin.Repo.init(tmp_path / "r")
    n = 50_000
    t = pa.table({"id": pa.array(range(n), pa.int64()), "g": pa.array([i % 7 for i in range(n)], pa.int64())})
    repo.commit("t", t, key="id")
    r = pa.RecordBatchReader.from_stream(repo.scan("t"))
    assert r.read_all().equals(t)
    assert pl.DataFrame(repo.scan("t")).height == n
    s = repo.scan("t", columns=["g"])
    assert duckdb.sql("select sum(g) as s from s").fetchall() == [(sum(i % 7 for i in range(n)),)]
    # Columns, a filter evaluated by the engine, and a limit.
    few = repo.read("t", columns=["g", "id"], filter="g = 3 AND id < 100", limit=5)
    assert few.column_names == ["g", "id"]
    assert few.column("id").to_pylist() == [3, 10, 17, 24, 31]
    scan = repo.scan("t", filter="id >= 49990")
    assert (scan.rows, scan.read_all().num_rows) == (n, 10)


def test_log_show_refs_and_typed_answers(tmp_path):
    repo = tablepin.Repo.init(tmp_path / "r")
    v1 = repo.commit("t", pa.table({"id": [1, 2]}), key="id", message="first")
    tag = repo.tag("train-v1", message="model A")
    assert (tag.name, tag.version, tag.message) == ("train-v1", v1.version, "model A")
    v2 = repo.commit("t", pa.table({"id": [3]}), mode="append", message="second")
    log = repo.log()
    assert [e.version for e in log] == [v2.version, v1.version]
    assert log[0].message == "second" and log[0].tables["t"].rows == 3
    assert isinstance(log[0].time, dt.datetime) and log[0].time.tzinfo is not None
    assert log[0].changes["t"].rows_added == 1
    info = repo.show("train-v1")
    assert info.version == v1.version and info.tables["t"].key == ("id",)
    assert info.tables["t"].columns[0].name == "id"
    assert [t.name for t in repo.tags()] == ["train-v1"]
    b = repo.branch("dev", rev="train-v1")
    assert b.version == v1.version
    assert {b.name for b in repo.branches()} == {"main", "dev"}
    dev = repo.commit("t", pa.table({"id": [9]}), mode="append", branch="dev")
    assert repo.read("t", rev="dev").column("id").to_pylist() == [1, 2, 9]
    assert repo.delete_branch("dev") == dev.version
    assert [b.name for b in repo.branches()] == ["main"]
    assert "Version(" in repr(v2) and "LogEntry(" in repr(log[0])


def test_verify_gc_and_erase_plan_then_apply(tmp_path):
    repo = tablepin.Repo.init(tmp_path / "r")
    base = pa.table({"id": list(range(100)), "who": ["x"] * 99 + ["alice"]})
    repo.commit("t", base, key="id")
    repo.tag("kept")
    for i in range(3):
        repo.commit("t", pa.table({"id": [1000 + i], "who": ["y"]}), mode="append")
    assert repo.verify().ok
    plan = repo.gc(keep_last=1, grace=0, sole_writer=True)
    assert plan.versions_expired == 2 and "GcPlan(" in repr(plan)
    report = plan.apply()
    assert report.tombstones == 2
    with pytest.raises(tablepin.BadInput, match="this plan was applied already"):
        plan.apply()
    erase = repo.erase("t", "who = 'alice'", reason="request 17")
    assert erase.rows_removed == 1 and "kept" in erase.tags
    done = erase.apply()
    assert done.audit == 1 and repo.audit()[0].reason == "request 17"
    assert "alice" not in repo.read("t", rev="kept").column("who").to_pylist()
    check = repo.verify_erased()
    assert check.ok and check.records == 1 and check.rows > 0
    assert repo.verify().ok


def test_upgrade_plans_then_writes_the_outboards_of_an_older_repository(tmp_path):
    import json
    import os
    import pyarrow.compute as pc

    path = tmp_path / "r"
    repo = tablepin.Repo.init(path)
    # Over 1 MiB of text that does not compress: one blob with an outboard.
    n = 150_000
    ids = pa.array(range(n), pa.int64())
    text = pc.binary_join_element_wise(pc.cast(pc.multiply(ids, 2654435761), pa.string()), pc.cast(ids, pa.string()), "-")
    repo.commit("t", pa.table({"id": ids, "text": text, "more": pc.utf8_reverse(text)}), key="id")
    outboards = [os.path.join(d, f) for d, _, fs in os.walk(path / "outboards") for f in fs]
    assert len(outboards) == 1
    assert repo.upgrade(dry_run=True)["blobs"] == []
    # As a build before outboards left it: format 2, no outboard.
    os.remove(outboards[0])
    config = json.loads((path / "meta" / "config.json").read_text())
    newest = config["format"]
    config["format"] = 2
    (path / "meta" / "config.json").write_text(json.dumps(config))
    old = tablepin.Repo(path)
    plan = old.upgrade(dry_run=True)
    assert (plan["from"], plan["to"], len(plan["blobs"])) == (2, newest, 1)
    assert not os.path.exists(outboards[0])
    done = old.upgrade()
    assert (done["from"], done["to"], done["outboards_written"]) == (2, newest, 1)
    assert done["bytes_read"] == plan["bytes"] and os.path.exists(outboards[0])
    assert json.loads((path / "meta" / "config.json").read_text())["format"] == newest
    assert tablepin.Repo(path).verify().ok


def test_every_error_class_with_its_message(tmp_path):
    repo = tablepin.Repo.init(tmp_path / "r")
    repo.commit("t", pa.table({"id": [1, 2]}), key="id")
    repo.tag("a")
    with pytest.raises(tablepin.NotFound, match=r"^version [0-9a-f]{12} has no table 'nope' \(tables: t\)$"):
        repo.read("nope")
    with pytest.raises(tablepin.BadInput, match=r"^table 't' has no column 'x' \(columns: id\)$"):
        repo.read("t", columns=["x"])
    with pytest.raises(tablepin.BadInput, match=r"mode is one of 'overwrite', 'append', 'upsert' or 'delete', not 'merge'"):
        repo.commit("t", pa.table({"id": [1]}), mode="merge")
    with pytest.raises(tablepin.BadInput, match=r"^cannot commit a list"):
        repo.commit("t", [1, 2])
    with pytest.raises(tablepin.Conflict, match=r"^tag 'a' exists already"):
        repo.tag("a")
    with pytest.raises(tablepin.StorageError, match=r"^cannot write '/dev/null/r'"):
        tablepin.Repo.init("/dev/null/r")
    # A damaged data file is named.
    blob = repo.show("main").tables["t"]
    assert blob.files == 1
    objects = [p for p in (tmp_path / "r" / "objects").rglob("*") if p.is_file()]
    data = [p for p in objects if p.read_bytes()[:4] == b"PAR1"]
    assert len(data) == 1
    raw = bytearray(data[0].read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    data[0].write_bytes(bytes(raw))
    with pytest.raises(tablepin.Damaged, match=data[0].name[:12]):
        repo.read("t")
    for cls in (tablepin.NotFound, tablepin.BadInput, tablepin.Conflict, tablepin.Damaged,
                tablepin.StorageError, tablepin.InternalError):
        assert issubclass(cls, tablepin.Error)
        assert cls.__module__ == "tablepin" and cls.__doc__
    # Each is also the built-in that Python code catches for its kind.
    with pytest.raises(LookupError):
        repo.read("nope")
    with pytest.raises(ValueError, match="has no column 'x'"):
        repo.read("t", columns=["x"])
    with pytest.raises(OSError, match="cannot write"):
        tablepin.Repo.init("/dev/null/r")
    assert issubclass(tablepin.InternalError, RuntimeError)
    assert not issubclass(tablepin.Conflict, ValueError)


def test_a_python_thread_runs_while_a_long_read_runs(tmp_path):
    bin_out = tmp_path / "big.parquet"
    cli(tmp_path, "generate", "--rows", "1000000", "-o", str(bin_out))
    cli(tmp_path, "init")
    cli(tmp_path, "commit", "sales", str(bin_out), "--key", "id")
    repo = tablepin.Repo(tmp_path)
    ticks = 0
    stop = threading.Event()

    def tick():
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            time.sleep(0.001)

    th = threading.Thread(target=tick)
    th.start()
    try:
        before = ticks
        t0 = time.perf_counter()
        rows = repo.read("sales")
        took = time.perf_counter() - t0
        during = ticks - before
    finally:
        stop.set()
        th.join()
    assert rows.num_rows == 1_000_000
    # With the GIL held for the whole read, the thread could not tick at all.
    assert during >= 5 and took > 0, (during, took)


def test_a_read_with_scattered_upserts_hands_pyarrow_few_batches(tmp_path):
    """A keyed table with an upsert every 200 keys merges into ~200 slices
    of up to 199 rows; they reach pyarrow joined (each short batch costs
    its import), in key order, with the version's rows and hash. The
    grouping rule is `crates/tablepin-py/src/handed.rs`."""
    repo = tablepin.Repo.init(tmp_path / "r")
    n = 20_000
    repo.commit("t", pa.table({"id": range(n), "v": [0] * n, "s": ["x"] * n}), key="id")
    # Long batches pass as the reader decoded them, not copied together.
    assert [b.num_rows for b in repo.read("t").to_batches()] == [8192, 8192, 3616]
    changed = list(range(0, n, 200))
    v = repo.commit("t", pa.table({"id": changed, "v": [1] * len(changed), "s": ["y"] * len(changed)}), mode="upsert")
    t = repo.read("t")
    assert len(t.to_batches()) == 1
    assert t.column("id").to_pylist() == list(range(n))
    assert sum(t.column("v").to_pylist()) == len(changed)
    assert tablepin.content_hash(t) == v.content_hash


def test_zero_copy_read_peak_memory(tmp_path):
    """Reading the head of the generated 1,000,000-row table into pyarrow
    raises peak memory by at most 1.3 times the table's nbytes (measured
    in a fresh process: its peak RSS before and after the read)."""
    import subprocess
    import sys

    f = tmp_path / "big.parquet"
    cli(tmp_path, "generate", "--rows", "1000000", "-o", str(f))
    cli(tmp_path, "init")
    cli(tmp_path, "commit", "sales", str(f), "--key", "id")
    code = (
        "import resource, tablepin, json\n"
        "repo = tablepin.Repo('.')\n"
        "repo.show('main')\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024\n"
        "t = repo.read('sales')\n"
        "after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024\n"
        "print(json.dumps({'nbytes': t.nbytes, 'rise': after - before, 'rows': t.num_rows}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    import json

    m = json.loads(out.stdout)
    assert m["rows"] == 1_000_000
    assert m["rise"] <= 1.3 * m["nbytes"], m


def test_a_file_url_is_a_folder_and_other_schemes_say_why(tmp_path):
    url = f"file://{tmp_path / 'by-url'}"
    repo = tablepin.Repo.init(url)
    repo.commit("t", pa.table({"id": [1, 2]}), key="id")
    assert tablepin.Repo(url).read("t").num_rows == 2
    with pytest.raises(tablepin.StorageError, match="unknown scheme 'ftp'"):
        tablepin.Repo("ftp://bucket/prefix")
    with pytest.raises(tablepin.NotFound, match="^no tablepin repository in /nonexistent/r"):
        tablepin.Repo("/nonexistent/r")


def test_diff_names_changed_keys_with_old_and_new_values_and_restore_brings_a_tag_back(tmp_path):
    repo = tablepin.Repo.init(str(tmp_path / "repo"))
    first = pa.table({"id": [1, 2, 3], "qty": [5, 6, 7]})
    repo.commit("sales", first, key=["id"])
    repo.tag("v1")
    repo.commit("sales", pa.table({"id": [2, 4], "qty": [60, 1]}), mode="upsert")
    [d] = repo.diff("v1", "main")
    assert (d.table, d.key, d.added, d.removed, d.modified) == ("sales", ("id",), 1, 0, 1)
    assert d.modified_by_column == {"qty": 1}
    rows = d.rows.to_pylist()
    assert rows == [
        {"diff_type": "modified", "from_id": 2, "to_id": 2, "from_qty": 6, "to_qty": 60},
        {"diff_type": "added", "from_id": None, "to_id": 4, "from_qty": None, "to_qty": 1},
    ]
    r = repo.restore("v1")
    assert r.version is not None and r.changes["sales"].rows_deleted == 1
    assert repo.show("main").tables["sales"].content_hash == repo.show("v1").tables["sales"].content_hash
    assert repo.restore("v1").version is None
    with pytest.raises(tablepin.NotFound, match="no table 'nope'"):
        repo.diff("v1", "main", "nope")


def test_sql_joins_two_versions_and_polars_reads_the_answer(tmp_path):
    repo = tablepin.Repo.init(str(tmp_path / "repo"))
    repo.commit("sales", pa.table({"id": [1, 2, 3], "qty": [5, 6, 7]}), key=["id"])
    repo.tag("v1")
    repo.commit("sales", pa.table({"id": [2], "qty": [60]}), mode="upsert")
    t = repo.sql('SELECT o.id, o.qty AS before, n.qty AS after FROM "sales@v1" o '
                 "JOIN sales n ON o.id = n.id WHERE o.qty <> n.qty")
    assert t.to_pylist() == [{"id": 2, "before": 6, "after": 60}]
    assert pl.from_arrow(t).shape == (1, 3)
    with pytest.raises(tablepin.NotFound, match="unknown revision 'v9'"):
        repo.sql('SELECT * FROM "sales@v9"')
    with pytest.raises(tablepin.BadInput, match="SQL syntax error"):
        repo.sql("SELEC 1")


def test_errors_name_this_package_s_arguments_not_the_command_line_s_flags(tmp_path):
    repo = tablepin.Repo.init(str(tmp_path / "repo"))
    repo.commit("sales", pa.table({"id": [1, 2]}), key=["id"])
    repo.commit("plain", pa.table({"id": [1, 2]}))
    cases = [
        (lambda: repo.commit("sales", pa.table({"id": [2]}), mode="append"), 'mode="upsert"'),
        (lambda: repo.commit("plain", pa.table({"id": [2]}), mode="upsert"), 'mode="overwrite"'),
        (lambda: repo.commit("sales", pa.table({"id": [3]}), key=["other"]), "omit key="),
        (lambda: repo.commit("sales", pa.table({"id": [3]}), branch="dev"), "create_branch=True"),
        (lambda: tablepin.Repo(str(tmp_path / "none")), "tablepin.Repo.init(path)"),
        (lambda: repo.commit("sales", pa.table({"id": [1.0, 2.0]})), "allow_schema_change=True"),
        (lambda: repo.commit("sales", pa.table({"id": [1.0, 2.0]})), "cast=True"),
        (lambda: repo.delete_branch("main"), "force=True"),
        (lambda: repo.read("sales", rev="nosuch"), "see repo.log() and repo.tags()"),
    ]
    for call, says in cases:
        with pytest.raises(tablepin.Error) as e:
            call()
        assert says in str(e.value)
        assert "--" not in str(e.value), str(e.value)


def test_a_deleted_branch_is_restored_with_the_call_its_error_names(tmp_path):
    """The way out of committing to a deleted branch is said as this
    package's call (it named the command line's `branch --restore` before),
    and the call restores the branch where its head was."""
    repo = tablepin.Repo.init(str(tmp_path / "repo"))
    repo.commit("sales", pa.table({"id": [1, 2]}), key=["id"])
    head = repo.branch("dev").version
    repo.delete_branch("dev")
    with pytest.raises(tablepin.NotFound) as e:
        repo.commit("sales", pa.table({"id": [3]}), mode="append", branch="dev")
    assert 'repo.restore_branch("dev")' in str(e.value), str(e.value)
    assert 'repo.branch("dev", rev)' in str(e.value), str(e.value)
    assert "--" not in str(e.value), str(e.value)
    assert e.value.ref == "dev"
    assert repo.restore_branch("dev").version == head
    repo.commit("sales", pa.table({"id": [3]}), mode="append", branch="dev")
    assert repo.read("sales", rev="dev").num_rows == 3


def test_erase_and_gc_mistakes_name_this_package_s_arguments(tmp_path):
    repo = tablepin.Repo.init(str(tmp_path / "repo"))
    repo.commit("sales", pa.table({"id": [1, 2]}), key=["id"])
    with pytest.raises(tablepin.BadInput, match='pass reason="'):
        repo.erase("sales", "id = 1", reason=" ")
    with pytest.raises(tablepin.BadInput, match="use keep_last=1 or more"):
        repo.gc(keep_last=0)


def test_a_repository_in_a_bucket_from_python_and_the_cli(tmp_path, monkeypatch, capfd):
    monkeypatch.setenv("TABLEPIN_CACHE", str(tmp_path / "cache"))
    url = s3_location("python")
    repo = tablepin.Repo.init(url)
    assert repo.location == url
    df = pandas_frame()
    v = repo.commit("sales", df, key="id", message="from pandas")
    repo.tag("train-v1")
    again = tablepin.Repo(url)
    got = again.read("sales", rev="train-v1")
    assert got.equals(repo.read("sales"))
    assert tablepin.content_hash(got) == v.content_hash
    shown = cli(tmp_path, "--repo", url, "--json", "show", "train-v1")
    assert shown["tables"][0]["content_hash"] == v.content_hash
    assert again.verify().problems == ()
    # A second read of a version downloads none of its blobs: every request
    # traced, a first reader with an empty cache GETs the version's blobs,
    # a second reader on the same machine none.
    monkeypatch.setenv("TABLEPIN_CACHE", str(tmp_path / "cold-cache"))
    monkeypatch.setenv("TABLEPIN_TRACE_REQUESTS", "1")

    def blob_gets(read):
        capfd.readouterr()
        read()
        err = capfd.readouterr().err
        return [line for line in err.splitlines() if line.startswith("tablepin: request GET objects/")]

    first = blob_gets(lambda: tablepin.Repo(url).read("sales", rev="train-v1"))
    assert first, "the first reader downloaded no blob: is every request traced?"
    assert blob_gets(lambda: tablepin.Repo(url).read("sales", rev="train-v1")) == []
    assert any((tmp_path / "cold-cache").rglob("*"))
    with pytest.raises(tablepin.Conflict, match="exists"):
        tablepin.Repo.init(url)


def test_a_file_s_path_commits_a_window_at_a_time_as_the_whole_table_would(tmp_path):
    """A file's path commits as `tablepin commit FILE` does: a window of
    `window_rows` rows at a time, to the rows, content hash and counts of the
    same table committed whole from memory. A file is read in batches of
    65,536 rows, so 200,000 rows make four windows."""
    n = 200_000
    ids = pa.array(range(n), pa.int64())
    first = pa.table({"id": ids, "v": pa.array([i * 7 % 1000 for i in range(n)], pa.int64())})
    changed = {i * (n // 150) for i in range(150)}
    later = first.set_column(1, "v", pa.array([-i - 1 if i in changed else i * 7 % 1000 for i in range(n)], pa.int64()))
    streamed = tablepin.Repo.init(tmp_path / "streamed")
    whole = tablepin.Repo.init(tmp_path / "whole")
    for i, t in enumerate([first, later]):
        path = tmp_path / f"week-{i}.parquet"
        pq.write_table(t, path, row_group_size=4096)
        # A pathlib path, then a str.
        a = streamed.commit("t", path if i == 0 else str(path), key="id", window_rows=10_000)
        b = whole.commit("t", t, key="id")
        facts = lambda v: (v.rows, v.content_hash, v.change.rows_added, v.change.rows_changed,
                           v.change.rows_deleted, v.change.checks)
        assert facts(a) == facts(b)
        if i == 0:
            # Cut into windows: each wrote its own file, where the whole
            # table is one.
            assert streamed.show("main").tables["t"].files > 1
            assert whole.show("main").tables["t"].files == 1
    assert a.change.rows_changed == 150
    assert streamed.read("t").equals(whole.read("t"))
    assert streamed.verify().ok
    with pytest.raises(tablepin.BadInput, match="no-such.parquet"):
        streamed.commit("t", tmp_path / "no-such.parquet")
    with pytest.raises(tablepin.BadInput, match="^window_rows applies to a file's path"):
        streamed.commit("t", first, window_rows=10)
    with pytest.raises(tablepin.BadInput, match="^window_rows is a number of rows, 0 or more, not -1$"):
        streamed.commit("t", str(path), window_rows=-1)


def test_errors_carry_what_they_name_as_attributes(tmp_path):
    repo = tablepin.Repo.init(tmp_path / "r")
    v = repo.commit("t", pa.table({"id": [1, 2]}), key="id")
    with pytest.raises(tablepin.NotFound) as e:
        repo.read("t", rev="no-such-rev")
    assert (e.value.rev, e.value.table, e.value.blob) == ("no-such-rev", None, None)
    with pytest.raises(tablepin.NotFound) as e:
        repo.read("nope")
    assert e.value.table == "nope" and v.version.startswith(e.value.version)
    with pytest.raises(tablepin.BadInput) as e:
        repo.read("t", columns=["x"])
    assert (e.value.table, e.value.column) == ("t", "x")
    with pytest.raises(tablepin.BadInput) as e:
        repo.commit("t", pa.table({"id": [2]}), mode="append")
    assert (e.value.table, e.value.key) == ("t", "id=2")
    with pytest.raises(tablepin.BadInput) as e:
        repo.commit("t", pa.table({"id": pa.array([3, None])}), mode="upsert")
    assert (e.value.table, e.value.column, e.value.row) == ("t", "id", 2)
    repo.tag("a")
    with pytest.raises(tablepin.Conflict) as e:
        repo.tag("a")
    assert e.value.ref == "a"
    # Raised by the package itself, before the engine: the attributes are
    # there, None.
    with pytest.raises(tablepin.BadInput) as e:
        repo.commit("t", pa.table({"id": [1]}), mode="merge")
    assert e.value.table is None and e.value.row is None
    # A damaged data file: the blob and the table, as data.
    [data] = [p for p in (tmp_path / "r" / "objects").rglob("*") if p.is_file() and p.read_bytes()[:4] == b"PAR1"]
    raw = bytearray(data.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    data.write_bytes(bytes(raw))
    with pytest.raises(tablepin.Damaged) as e:
        repo.read("t")
    assert (e.value.blob, e.value.table) == (data.parent.name + data.name, "t")
    assert e.value.version == v.version
