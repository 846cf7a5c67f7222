"""Reading the head of a long history, side by side with Lance (issue 43;
BENCHMARKS.md, "Python: reading the head of the lab's history").

The lab's tablepin repository holds 110 versions of the Online Retail II
table `sales` (key `line`): weekly upserts and appends, and the erasure of
one customer. This script commits the same history to a Lance dataset the
way a Lance user would (the first version written, then for each later one
a `merge_insert` on `line` of the rows added or changed, and a `delete` of
the keys removed, all taken from `repo.diff` of the two versions), checks
that Lance's last version holds the same rows as tablepin's head, then reads
the head, alternating:

- `repo.read("sales")` into a `pyarrow.Table`;
- Lance's `dataset.to_table()` of its last version;
- `pyarrow.parquet.read_table` of the same rows as one plain Parquet file
  (written by `tablepin export`).

    tablepin lab --data ../shared/data/online_retail_II.csv.gz --out lab
    TABLEPIN_BIN=target/release/tablepin python python/bench/lab_head_bench.py lab/repo [--runs 9]

`pylance` is not in the test requirements (`pip install pylance`). The
targets: `repo.read` at most Lance's `to_table()`, and at most 1.2 times the
plain Parquet file.
"""

import argparse
import json
import os
import subprocess
import tempfile
import time

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from read_bench import BIN, alternating  # beside this script

import tablepin

TABLE = "sales"
KEY = "line"


def changes(diff: "tablepin.TableDiff", schema: pa.Schema) -> tuple[pa.Table, pa.Array]:
    """The rows to upsert (added or changed, as the newer version has them)
    and the keys removed, from a diff's rows."""
    rows = diff.rows
    kind = rows.column("diff_type")
    upsert = rows.filter(pc.is_in(kind, pa.array(["added", "modified"])))
    upsert = pa.table(
        [upsert.column(f"to_{f.name}").cast(f.type) for f in schema], schema=schema
    )
    removed = rows.filter(pc.equal(kind, "removed")).column(f"from_{KEY}")
    return upsert, removed


def replay(repo: "tablepin.Repo", path: str) -> tuple["lance.LanceDataset", int]:
    import lance

    versions = [e.version for e in reversed(repo.log(table=TABLE))]
    first = repo.read(TABLE, versions[0])
    ds = lance.write_dataset(first, path)
    for old, new in zip(versions, versions[1:]):
        (diff,) = repo.diff(old, new, TABLE)
        upsert, removed = changes(diff, first.schema)
        if upsert.num_rows:
            ds.merge_insert(KEY).when_matched_update_all().when_not_matched_insert_all().execute(upsert)
        if len(removed):
            keys = ", ".join(str(k) for k in removed.to_pylist())
            ds.delete(f"{KEY} IN ({keys})")
    return lance.dataset(path), len(versions)


def by_key(t: pa.Table) -> pa.Table:
    return t.sort_by(KEY).combine_chunks()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("repo", help="the lab's tablepin repository (LAB_OUT/repo)")
    ap.add_argument("--runs", type=int, default=9)
    a = ap.parse_args()
    repo = tablepin.Repo(a.repo)
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        ds, versions = replay(repo, os.path.join(d, "sales.lance"))
        replay_s = time.perf_counter() - t0
        head = repo.read(TABLE)
        if not by_key(ds.to_table()).equals(by_key(head)):
            raise SystemExit("Lance's last version differs from tablepin's head")
        plain = os.path.join(d, "head.parquet")
        subprocess.run([BIN, "export", "main", TABLE, "-o", plain], cwd=a.repo, check=True, capture_output=True)
        cases = {
            "repo.read": lambda: repo.read(TABLE),
            "lance to_table": lambda: ds.to_table(),
            "pyarrow.parquet.read_table": lambda: pq.read_table(plain),
        }
        med = alternating(cases, a.runs)
        print(json.dumps({
            "rows": head.num_rows,
            "versions": versions,
            "lance_fragments": len(ds.get_fragments()),
            "lance_replay_s": round(replay_s, 1),
            "runs": a.runs,
            "median_s": {k: round(v, 4) for k, v in med.items()},
            "repo.read / lance": round(med["repo.read"] / med["lance to_table"], 3),
            "repo.read / plain parquet": round(med["repo.read"] / med["pyarrow.parquet.read_table"], 3),
        }, indent=2))


if __name__ == "__main__":
    main()
