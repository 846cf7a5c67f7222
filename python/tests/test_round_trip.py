"""Issue 41: rows read back through pandas, polars, pyarrow and DuckDB hash
as the version they came from, and a frame read from a version commits
back, edited, without options."""

import datetime as dt
from decimal import Decimal

import duckdb
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

import tablepin


def sales():
    """A table with the types readers change: timestamps in seconds,
    nullable integers, decimals and categories."""
    return pa.table(
        {
            "id": pa.array([1, 2, 3, 4], pa.int64()),
            "sold_at": pa.array(
                [dt.datetime(2010, 12, 1, 8, 26), dt.datetime(2010, 12, 1, 9, 0, 5), None, dt.datetime(2011, 1, 4)],
                pa.timestamp("s"),
            ),
            "qty": pa.array([6, None, -2, 12], pa.int64()),
            "price": pa.array([Decimal("2.55"), Decimal("10.00"), None, Decimal("0.85")], pa.decimal128(10, 2)),
            "country": pa.array(["France", "UK", "France", None]).dictionary_encode(),
        }
    )


def test_a_version_read_through_any_reader_hashes_as_show_says(tmp_path):
    repo = tablepin.Repo.init(str(tmp_path / "repo"))
    v = repo.commit("sales", sales(), key="id")
    want = repo.show("main").tables["sales"].content_hash
    assert want == v.content_hash
    schema = repo.schema("sales")
    read = repo.read("sales")
    readers = {
        "pyarrow": read,
        "pandas": read.to_pandas(),
        "pandas ArrowDtype": read.to_pandas(types_mapper=pd.ArrowDtype),
        "polars": pl.from_arrow(read),
        "polars scan": pl.DataFrame(repo.scan("sales")),
        "duckdb": duckdb.sql("select * from read").arrow(),
    }
    # The readers do change the types: without the schema, the hashes differ.
    assert tablepin.content_hash(readers["pandas"]) != want
    for name, rows in readers.items():
        assert tablepin.content_hash(rows, schema=schema) == want, name
    # A value that changed is not hidden by the reading.
    edited = read.to_pandas()
    edited.loc[0, "qty"] = 7
    assert tablepin.content_hash(edited, schema=schema) != want
    # Columns other than the schema's are refused, not ignored.
    with pytest.raises(tablepin.BadInput, match="hash the same columns"):
        tablepin.content_hash(read.drop_columns(["qty"]), schema=schema)


def test_a_frame_read_from_a_version_commits_back_edited_without_options(tmp_path):
    repo = tablepin.Repo.init(str(tmp_path / "repo"))
    repo.commit("sales", sales(), key="id")
    # pandas: nullable integers come back as floats, decimals as objects.
    df = repo.read("sales").to_pandas()
    assert str(df["qty"].dtype) == "float64"
    df.loc[df["id"] == 2, "qty"] = 5.0
    v = repo.commit("sales", df, mode="upsert")
    assert (v.change.rows_changed, v.change.rows_added) == (1, 0), v.change
    assert repo.read("sales").column("qty").to_pylist() == [6, 5, -2, 12]
    assert repo.schema("sales") == repo.schema("sales", "main~1")
    # polars: no timestamp in seconds.
    frame = pl.from_arrow(repo.read("sales")).with_columns(
        pl.when(pl.col("id") == 3).then(pl.lit(-3)).otherwise(pl.col("qty")).alias("qty")
    )
    v = repo.commit("sales", frame, mode="upsert")
    assert (v.change.rows_changed, v.change.rows_added) == (1, 0), v.change
    assert repo.read("sales").column("qty").to_pylist() == [6, 5, -3, 12]
    # A value that would change is refused, named with its column and row.
    df = repo.read("sales").to_pandas()
    df["qty"] = df["qty"].astype("float64")
    df.loc[df["id"] == 4, "qty"] = 12.5
    with pytest.raises(tablepin.BadInput, match=r"column 'qty' cannot become Int64 without changing a value: row 4 holds 12.5"):
        repo.commit("sales", df, mode="upsert")
    # Arrow data keeps its types: a float for an integer is for cast=True.
    with pytest.raises(tablepin.BadInput, match="cast=True"):
        repo.commit("sales", pa.table({"id": [9.0]}), mode="upsert")


def test_read_refuses_a_negative_limit_as_bad_input(tmp_path):
    repo = tablepin.Repo.init(str(tmp_path / "repo"))
    repo.commit("sales", sales(), key="id")
    with pytest.raises(tablepin.BadInput, match="0 or more"):
        repo.read("sales", limit=-1)


def test_a_delta_view_without_deletion_vectors_reads_in_deltalake_s_to_pandas(tmp_path):
    deltalake = pytest.importorskip("deltalake")
    repo = tablepin.Repo.init(str(tmp_path / "repo"))
    # Large enough that a change hides rows with a deletion vector rather
    # than writing the file again.
    n = 20000
    repo.commit("sales", pa.table({"id": list(range(n)), "qty": list(range(n))}), key="id")
    repo.commit("sales", pa.table({"id": [3, n + 5], "qty": [-3, 200]}), mode="upsert")
    repo.commit("sales", pa.table({"id": [5]}), mode="delete")
    want = repo.read("sales").sort_by("id")
    view = repo.export_delta("main", "sales", tmp_path / "view", deletion_vectors=False)
    assert view.rewritten >= 1 and view.linked + view.rewritten + view.copied == view.files, view
    t = deltalake.DeltaTable(str(tmp_path / "view"))
    got = pa.Table.from_pandas(t.to_pandas(), preserve_index=False).sort_by("id")
    assert got.select(want.column_names).cast(want.schema).equals(want)
    assert t.to_pyarrow_table().sort_by("id").cast(want.schema).equals(want)
    assert tablepin.content_hash(t.to_pyarrow_table(), schema=want.schema) == repo.show("main").tables["sales"].content_hash
    # The CLI's flag writes the same rows.
    from conftest import cli

    cli(tmp_path, "--repo", "repo", "export", "main", "sales", "--format", "delta", "--no-deletion-vectors", "-o", "v2")
    again = deltalake.DeltaTable(str(tmp_path / "v2")).to_pyarrow_table().sort_by("id")
    assert again.cast(want.schema).equals(want)


def test_a_commit_that_changes_nothing_makes_no_version_unless_asked(tmp_path):
    repo = tablepin.Repo.init(str(tmp_path / "repo"))
    first = repo.commit("sales", sales(), key="id")
    again = repo.commit("sales", repo.read("sales").to_pandas(), mode="upsert")
    assert again.empty and again.version == first.version, again
    assert len(repo.log()) == 1
    forced = repo.commit("sales", sales(), allow_empty=True)
    assert not forced.empty and len(repo.log()) == 2


def test_the_audit_is_typed_with_times_as_datetimes(tmp_path):
    repo = tablepin.Repo.init(str(tmp_path / "repo"))
    v = repo.commit("sales", sales(), key="id")
    repo.tag("t1")
    repo.erase("sales", "id = 2", reason="GDPR 7").apply()
    [record] = repo.audit()
    assert isinstance(record, tablepin.AuditRecord)
    assert (record.seq, record.table, record.reason) == (1, "sales", "GDPR 7")
    assert record.time.tzinfo is not None
    assert record.versions[0].old == v.version and record.versions[0].rows_removed == 1
    assert {(r.kind, r.name) for r in record.moved_refs} == {("branch", "main"), ("tag", "t1")}
