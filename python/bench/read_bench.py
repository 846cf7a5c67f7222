"""Reading the head of the generated 1,000,000-row table from Python, side by
side in one run (BENCHMARKS.md, "Python read"):

- `repo.read`: the engine's read, then the rows handed to pyarrow through
  the Arrow C stream interface;
- the engine's read alone (`Repo::scan` through the extension, the same
  code the Rust bench's head read runs, the rows left in Rust);
- `pyarrow.parquet.read_table` of the same rows as one Parquet file (the
  head exported by `tablepin export`).

    TABLEPIN_BIN=target/release/tablepin python python/bench/read_bench.py [--runs 9]

Alternating, the median of each; the target is `repo.read` at most 1.2
times the engine's read.
"""

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time

import pyarrow.parquet as pq

import tablepin

BIN = os.environ.get("TABLEPIN_BIN", "tablepin")


def timed(f):
    t0 = time.perf_counter()
    out = f()
    return time.perf_counter() - t0, out


def alternating(cases: dict, runs: int) -> dict[str, float]:
    """Each case once to warm the page cache and the runtimes, then `runs`
    rounds of all of them, the order rotated each round; the median
    seconds of each."""
    for f in cases.values():
        f()
    times = {k: [] for k in cases}
    names = list(cases)
    for i in range(runs):
        n = i % len(names)
        for k in names[n:] + names[:n]:
            times[k].append(timed(cases[k])[0])
    return {k: statistics.median(v) for k, v in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--rows", type=int, default=1_000_000)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        run = lambda *args: subprocess.run([BIN, *args], cwd=d, check=True, capture_output=True)
        run("generate", "--rows", str(a.rows), "-o", "in.parquet")
        run("init")
        run("commit", "sales", "in.parquet", "--key", "id")
        run("export", "main", "sales", "-o", "head.parquet")
        repo = tablepin.Repo(d)
        head = os.path.join(d, "head.parquet")
        cases = {
            "repo.read": lambda: repo.read("sales"),
            "engine read": lambda: repo._repo.scan("sales", "main", whole=True),
            "pyarrow.parquet.read_table": lambda: pq.read_table(head),
        }
        med = alternating(cases, a.runs)
        t = repo.read("sales")
        print(json.dumps({
            "rows": t.num_rows, "nbytes": t.nbytes, "runs": a.runs,
            "median_s": {k: round(v, 4) for k, v in med.items()},
            "repo.read / engine read": round(med["repo.read"] / med["engine read"], 3),
            "repo.read / pyarrow.parquet": round(med["repo.read"] / med["pyarrow.parquet.read_table"], 3),
        }, indent=2))


if __name__ == "__main__":
    main()
