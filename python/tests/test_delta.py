"""The Delta view (`tablepin export REV TABLE --format delta -o DIR`): every
version of a 20-commit history of every mode, read back by delta-rs (its
DataFusion reader, which applies deletion vectors) and by polars, gives the
version's rows and content hash; files are hard-linked, not copied."""

import json
import os

import deltalake
import polars as pl
import pyarrow as pa
import pytest

import tablepin
from conftest import cli, s3_location, s3_options


def history(repo):
    """20 commits of every mode on a keyed table; the versions, oldest first."""
    rows = pa.table({"id": pa.array(range(100), pa.int64()), "qty": pa.array([i % 7 for i in range(100)], pa.int64()),
                     "name": [f"n{i}" for i in range(100)]})
    repo.commit("sales", rows, key="id", message="first")
    for i in range(1, 20):
        kind = i % 4
        if kind == 0:
            t = pa.table({"id": pa.array([1000 + i], pa.int64()), "qty": pa.array([i], pa.int64()), "name": [f"new{i}"]})
            repo.commit("sales", t, mode="append")
        elif kind == 1:
            ids = [i, i + 20, i + 40]
            t = pa.table({"id": pa.array(ids, pa.int64()), "qty": pa.array([100 + i] * 3, pa.int64()), "name": [f"up{i}"] * 3})
            repo.commit("sales", t, mode="upsert")
        elif kind == 2:
            repo.commit("sales", pa.table({"id": pa.array([i + 60], pa.int64())}), mode="delete")
        else:
            current = repo.read("sales")
            keep = current.filter(pa.compute.not_equal(pa.compute.field("id"), i + 70))
            repo.commit("sales", keep)  # overwrite with one row fewer
    return [e.version for e in reversed(repo.log())]


def by_id(t):
    return t.sort_by("id")


def test_every_version_of_a_history_reads_back_through_delta_rs_and_polars(tmp_path):
    repo = tablepin.Repo.init(tmp_path / "repo")
    versions = history(repo)
    assert len(versions) == 20
    out = cli(tmp_path, "--repo", "repo", "--json", "export", "main", "sales", "--format", "delta", "--history", "-o", "view")
    assert [v["version"] for v in out["delta_versions"]] == versions
    assert out["copied"] == 0 and out["linked"] == out["files"] > 0
    view = str(tmp_path / "view")
    for n, vid in enumerate(versions):
        want = by_id(repo.read("sales", rev=vid))
        dt = deltalake.DeltaTable(view, version=n)
        got = pa.table(deltalake.QueryBuilder().register("t", dt).execute("SELECT * FROM t").read_all())
        got = by_id(got.select(want.column_names).cast(want.schema))
        assert got.equals(want), f"Delta version {n} (delta-rs)"
        assert tablepin.content_hash(got) == out["delta_versions"][n]["content_hash"]
        polars = by_id(pl.read_delta(view, version=n).to_arrow().cast(want.schema))
        assert polars.equals(want), f"Delta version {n} (polars)"
        # polars' lazy reader too, with a filter it pushes into the scan.
        lazy = pl.scan_delta(view, version=n).filter(pl.col("id") >= 0).collect()
        assert by_id(lazy.to_arrow().cast(want.schema)).equals(want), f"Delta version {n} (polars scan_delta)"
    # The Python package writes the same view.
    py = repo.export_delta("main", "sales", tmp_path / "py", history=True)
    assert [v[1] for v in py.versions] == versions and py.copied == 0
    for n in (0, 9, 19):
        same = by_id(pl.read_delta(str(tmp_path / "py"), version=n).to_arrow())
        assert tablepin.content_hash(same.cast(by_id(repo.read("sales", rev=versions[n])).schema)) == py.versions[n][3]
    with pytest.raises(tablepin.BadInput, match="is not empty"):
        repo.export_delta("main", "sales", tmp_path / "py")
    # A data file of the view is the repository's blob itself.
    some = next(os.scandir(tmp_path / "view" / "data"))
    assert os.stat(some.path).st_nlink >= 2


def test_a_delta_view_of_one_version_and_its_errors(tmp_path):
    repo = tablepin.Repo.init(tmp_path / "repo")
    versions = history(repo)
    repo.tag("train-v1", rev=versions[9])
    out = cli(tmp_path, "--repo", "repo", "--json", "export", "train-v1", "sales", "--format", "delta", "-o", "v1")
    assert [v["version"] for v in out["delta_versions"]] == [versions[9]]
    got = by_id(pl.read_delta(str(tmp_path / "v1")).to_arrow())
    want = by_id(repo.read("sales", rev="train-v1"))
    assert tablepin.content_hash(got.cast(want.schema)) == repo.show("train-v1").tables["sales"].content_hash
    # A folder that is not empty, an unknown table, a format that is not
    # there: one sentence each, nothing written.
    for args, msg in [
        (["train-v1", "sales", "--format", "delta", "-o", "v1"], "is not empty"),
        (["train-v1", "nope", "--format", "delta", "-o", "v2"], "nope"),
        (["train-v1", "sales", "--format", "iceberg", "-o", "v3"], "--format takes delta"),
    ]:
        r = cli(tmp_path, "--repo", "repo", "export", *args, ok=False)
        assert r.returncode != 0 and msg in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert not (tmp_path / "v2").exists() and not (tmp_path / "v3").exists()


def test_a_delta_view_in_a_bucket(tmp_path, monkeypatch):
    """A view written under an s3:// URL (files copied from the repository,
    log entries created put-if-absent) reads back through delta-rs and
    polars, every version of the history; the prefix must be new."""
    monkeypatch.setenv("TABLEPIN_CACHE", "off")
    for where in ("folder", "bucket"):
        repo = tablepin.Repo.init(tmp_path / "repo" if where == "folder" else s3_location("delta-repo"))
        versions = history(repo)
        url = s3_location("delta-view")
        out = cli(tmp_path, "--repo", repo.location, "--json", "export", "main", "sales", "--format", "delta",
                  "--history", "-o", url)
        assert out["dir"] == url and out["linked"] == 0 and out["copied"] == out["files"] > 0, out
        assert [v["version"] for v in out["delta_versions"]] == versions
        opts = s3_options()
        for n in (0, 7, 19):
            want = by_id(repo.read("sales", rev=versions[n]))
            dt = deltalake.DeltaTable(url, version=n, storage_options=opts)
            got = pa.table(deltalake.QueryBuilder().register("t", dt).execute("SELECT * FROM t").read_all())
            got = by_id(got.select(want.column_names).cast(want.schema))
            assert got.equals(want), f"{where}: Delta version {n} (delta-rs)"
            polars = by_id(pl.read_delta(url, version=n, storage_options=opts).to_arrow().cast(want.schema))
            assert polars.equals(want), f"{where}: Delta version {n} (polars)"
            assert tablepin.content_hash(polars) == out["delta_versions"][n]["content_hash"]
        r = cli(tmp_path, "--repo", repo.location, "export", "main", "sales", "--format", "delta", "-o", url, ok=False)
        assert r.returncode == 2 and "is not empty" in r.stderr, r.stderr
        with pytest.raises(tablepin.BadInput, match="is not empty"):
            repo.export_delta("main", "sales", url)


def test_every_tag_of_the_lab_reads_back_through_delta(tmp_path, lab_out):
    # The lab leaves its 110-version repository with its eight tags.
    repo = tablepin.Repo(lab_out / "repo")
    tags = repo.tags()
    assert len(tags) == 8
    for t in tags:
        view = tmp_path / f"view-{t.name}"
        out = cli(tmp_path, "--repo", str(lab_out / "repo"), "--json", "export", t.name, "sales", "--format", "delta", "-o", str(view))
        assert out["copied"] == 0
        want = repo.show(t.name).tables["sales"]
        # Delta has no second-unit timestamps and one string type: the
        # readers give microseconds and large strings, the same values.
        schema = repo.read("sales", rev=t.name).schema
        got = pl.read_delta(str(view)).to_arrow()
        assert got.num_rows == want.rows, t.name
        assert tablepin.content_hash(got.cast(schema)) == want.content_hash, t.name
        dt = deltalake.DeltaTable(str(view))
        rs = pa.table(deltalake.QueryBuilder().register("t", dt).execute("SELECT * FROM t").read_all())
        assert tablepin.content_hash(rs.select(schema.names).cast(schema)) == want.content_hash, t.name
