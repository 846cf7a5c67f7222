"""Exports read back with the same logical types in pyarrow, pandas, polars
and DuckDB (issue 20): a table with every type of the rowhash golden set is
committed, exported as Parquet and Arrow, and each reader must see in the
export what it sees in the same rows written by pyarrow itself."""

import math
import os
import subprocess
from decimal import Decimal

import duckdb
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest

BIN = os.environ.get("TABLEPIN_BIN", "tablepin")


def golden() -> pa.Table:
    """The rowhash golden set's columns (crates/tablepin-rowhash tests),
    three rows, with nulls everywhere, and a key."""
    return pa.table(
        {
            "id": pa.array([1, 2, 3], pa.int64()),
            "i8": pa.array([-8, None, 127], pa.int8()),
            "i64": pa.array([-(2**63), 0, None], pa.int64()),
            "u32": pa.array([None, 2**32 - 1, 1], pa.uint32()),
            "f64": pa.array([float("nan"), -0.0, None], pa.float64()),
            "f32": pa.array([1.5, None, float("inf")], pa.float32()),
            "s": pa.array(["", "Ünïcødé ✓", None], pa.string()),
            "bin": pa.array([b"\x00\xff", None, b""], pa.binary()),
            "b": pa.array([True, False, None], pa.bool_()),
            "d32": pa.array([14579, None, -1], pa.date32()),
            "d64": pa.array([None, 86_400_000, 0], pa.date64()),
            "ts_s": pa.array([1_259_654_700, None, 0], pa.timestamp("s")),
            "ts_ms_utc": pa.array([1, 2, None], pa.timestamp("ms", tz="UTC")),
            "ts_us_tz": pa.array([None, 3, 4], pa.timestamp("us", tz="Europe/London")),
            "ts_ns": pa.array([5, None, 6], pa.timestamp("ns")),
            "dec": pa.array([Decimal("-123.45"), Decimal("0.00"), None], pa.decimal128(10, 2)),
            "list": pa.array([[1, None], None, [3]], pa.list_(pa.int32())),
            "struct": pa.array(
                [{"x": 7, "y": "q"}, {"x": None, "y": "r"}, None],
                pa.struct([("x", pa.int64()), ("y", pa.string())]),
            ),
        }
    )


def run(cwd, *args):
    out = subprocess.run([BIN, *args], cwd=cwd, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("export")
    t = golden()
    with ipc.new_file(d / "in.arrow", t.schema) as w:
        w.write_table(t)
    pq.write_table(t, d / "ref.parquet")
    run(d, "init")
    run(d, "commit", "g", "in.arrow", "--key", "id")
    for ext in ["parquet", "arrow"]:
        run(d, "export", "main", "g", "-o", f"out.{ext}")
    return d


def same(a, b):
    """Values equal, NaN equal to NaN."""
    a = a.tolist() if hasattr(a, "tolist") and getattr(a, "ndim", 0) > 0 else a
    b = b.tolist() if hasattr(b, "tolist") and getattr(b, "ndim", 0) > 0 else b
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return a == b or (pd.isna(a) is True and pd.isna(b) is True)


def test_pyarrow_reads_the_parquet_export_as_its_own_parquet(files):
    ref = pq.read_table(files / "ref.parquet")
    got = pq.read_table(files / "out.parquet")
    assert got.schema.remove_metadata() == ref.schema.remove_metadata()
    assert same(got.to_pylist(), ref.to_pylist())


def test_pyarrow_reads_the_arrow_export_with_the_input_types(files):
    got = ipc.open_file(files / "out.arrow").read_all()
    want = golden()
    assert got.schema.remove_metadata() == want.schema.remove_metadata()
    assert same(got.to_pylist(), want.to_pylist())


def test_pandas_reads_the_export_as_pyarrows_parquet(files):
    ref = pd.read_parquet(files / "ref.parquet")
    got = pd.read_parquet(files / "out.parquet")
    assert dict(got.dtypes) == dict(ref.dtypes)
    assert str(got["ts_s"].dtype).startswith("datetime64")
    assert same(got.astype(object).values.tolist(), ref.astype(object).values.tolist())


def test_polars_reads_the_export_as_pyarrows_parquet(files):
    ref = pl.read_parquet(files / "ref.parquet")
    got = pl.read_parquet(files / "out.parquet")
    assert got.schema == ref.schema
    assert same(got.rows(), ref.rows())


def test_duckdb_reads_the_export_as_pyarrows_parquet(files):
    q = "select * from read_parquet('{}') order by id"
    ref = duckdb.sql(q.format(files / "ref.parquet"))
    got = duckdb.sql(q.format(files / "out.parquet"))
    assert got.types == ref.types
    assert same(got.fetchall(), ref.fetchall())
