"""`repo.scan` streams and prunes: a key range of a large keyed table is
read by fetching the few files that can hold it, in bounded memory, and an
engine error met mid-stream is raised as its own class."""

import json
import subprocess
import sys

import pyarrow as pa
import pytest

import tablepin
from conftest import cli

ROWS = 5_000_000

# Runs in a fresh interpreter, so that its peak memory is the scan's (and
# the interpreter's, pyarrow's and the module's), not this test process's.
SCAN = """
import json, sys
import tablepin
repo = tablepin.Repo(sys.argv[1])
table_bytes = repo.show("main").tables["sales"].bytes
before = repo.requests()["bytes_read"]
scan = repo.scan("sales", filter="id >= 2500000 AND id < 2550000")
rows, ids = 0, []
for batch in scan:
    rows += batch.num_rows
    col = batch.column("id")
    ids.append((col[0].as_py(), col[-1].as_py()) if batch.num_rows else None)
after = repo.requests()["bytes_read"]
print(json.dumps({
    "rows": rows, "first": ids[0][0], "last": ids[-1][1], "table_bytes": table_bytes,
    "bytes_read": after - before, "stats": scan.stats,
    # VmHWM: this process's own peak (ru_maxrss would carry over the
    # peak of the pytest process that started it).
    "peak_mb": next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")) / 1024,
}))
"""


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """The generated 5,000,000-row table, keyed by `id`, committed from a
    file in key order (so in windows, each file a key range)."""
    d = tmp_path_factory.mktemp("big")
    cli(d, "generate", "--rows", str(ROWS), "-o", "sales.parquet")
    cli(d, "init")
    cli(d, "commit", "sales", "sales.parquet", "--key", "id", "-m", "5M rows")
    return d / ".tablepin"


def test_a_key_range_of_a_5m_row_table_reads_a_few_percent_of_its_bytes_in_bounded_memory(big):
    out = subprocess.run([sys.executable, "-c", SCAN, str(big)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    # 1% of the rows, exactly those, in key order.
    assert (got["rows"], got["first"], got["last"]) == (50_000, 2_500_000, 2_549_999)
    assert got["stats"]["rows"] == 50_000
    # The table is 20 files of 262,144 key-ordered rows (the last one
    # smaller); the range lies in one of them, and only that one is
    # fetched: 1/19th of the bytes, whole, because a blob is verified
    # whole (fetching only its pages needs verified ranged reads).
    files = got["stats"]["files"] + got["stats"]["files_skipped"]
    assert (got["stats"]["files"], files) == (1, 20), got["stats"]
    data_file = got["stats"]["bytes"]
    assert data_file < got["table_bytes"] / 18, got
    # Beside the data file, only the ref and the snapshot are read.
    assert got["bytes_read"] - data_file < 64 * 1024, got
    assert got["peak_mb"] < 200, got
    print(f"read {got['bytes_read']} of {got['table_bytes']} bytes, peak {got['peak_mb']:.0f} MB")


def test_a_scan_is_pulled_batch_by_batch(big):
    repo = tablepin.Repo(str(big))
    scan = repo.scan("sales", columns=["id"])
    it = iter(scan)
    first = next(it)
    # One batch read: the scan has not read the table.
    assert 0 < scan.stats["rows"] < ROWS, scan.stats
    rest = sum(b.num_rows for b in it)
    assert first.num_rows + rest == ROWS
    assert scan.stats["rows"] == ROWS


def test_a_damaged_file_met_mid_stream_raises_damaged_naming_it(tmp_path):
    d = tmp_path
    repo = tablepin.Repo.init(str(d / "r"))
    repo.commit("t", pa.table({"id": list(range(100)), "v": list(range(100))}), key="id")
    data = [p for p in (d / "r" / "objects").rglob("*") if p.is_file() and p.read_bytes()[:4] == b"PAR1"]
    assert len(data) == 1
    raw = bytearray(data[0].read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    data[0].write_bytes(bytes(raw))
    scan = repo.scan("t")
    with pytest.raises(tablepin.Damaged, match=data[0].name[:12]):
        scan.read_all()
    scan = repo.scan("t")
    with pytest.raises(tablepin.Damaged, match=data[0].name[:12]):
        list(scan)
