"""`tablepin cat --limit 10` on a generated 5,000,000-row table: wall time
and peak memory of each run (os.wait4's rusage), median of N runs.

    python3 scripts/bench_cat_limit.py [--rows 5000000] [--runs 9] [--bin PATH]

Needs only the Python standard library and the `tablepin` binary (default:
the release build in $CARGO_TARGET_DIR, else ~/.cache/tablepin-target).
"""

import argparse
import os
import statistics
import subprocess
import tempfile
import time


def run(cmd, cwd):
    """Runs cmd; returns (seconds, peak RSS in MB)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {proc.stderr.read().decode()}")
    return seconds, usage.ru_maxrss / 1024


def main():
    target = os.environ.get("CARGO_TARGET_DIR", os.path.expanduser("~/.cache/tablepin-target"))
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--bin", default=os.path.join(target, "release", "tablepin"))
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        data = os.path.join(d, "sales.parquet")
        subprocess.run([a.bin, "generate", "--rows", str(a.rows), "-o", data], check=True, capture_output=True)
        subprocess.run([a.bin, "init"], cwd=d, check=True, capture_output=True)
        subprocess.run([a.bin, "commit", "sales", data, "--key", "id"], cwd=d, check=True, capture_output=True)
        cat = [(run([a.bin, "cat", "main", "sales", "--limit", "10"], d)) for _ in range(a.runs)]
        show = [(run([a.bin, "show", "main"], d)) for _ in range(a.runs)]
    for name, rs in (("cat --limit 10", cat), ("show (for scale: opens the repository, reads no data)", show)):
        secs = statistics.median(r[0] for r in rs)
        mb = statistics.median(r[1] for r in rs)
        print(f"{name}: median {secs * 1000:.1f} ms, peak RSS median {mb:.1f} MB "
              f"(ms {min(r[0] for r in rs) * 1000:.1f}-{max(r[0] for r in rs) * 1000:.1f}, {a.runs} runs, {a.rows:,} rows)")


if __name__ == "__main__":
    main()
