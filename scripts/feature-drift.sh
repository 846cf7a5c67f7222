#!/usr/bin/env bash
# Lists the dependencies whose features differ between the workspace build
# (what the tests compile) and the Python extension's own build (what
# maturin compiles): each one makes maturin compile it, and everything above
# it, a second time. Add them to crates/tablepin-py/Cargo.toml's alignment
# list. Prints nothing when the two agree.
set -euo pipefail
cd "$(dirname "$0")/.."
ws="$(mktemp)" py="$(mktemp)"
trap 'rm -f "$ws" "$py"' EXIT
cargo tree --workspace -e normal,build,dev -f '{p}|{f}' --prefix none >"$ws"
cargo tree -p tablepin-py -e normal,build -f '{p}|{f}' --prefix none >"$py"
python3 - "$ws" "$py" <<'PY'
import sys
def load(p):
    d = {}
    for line in open(p):
        if "|" in line:
            k, f = line.strip().replace(" (*)", "").replace(" (proc-macro)", "").split("|", 1)
            d.setdefault(k, set()).update(x for x in f.split(",") if x)
    return d
ws, py = load(sys.argv[1]), load(sys.argv[2])
for k in sorted(py):
    extra = ws.get(k, set()) - py[k]
    if extra:
        print(f"{k}: the workspace adds {', '.join(sorted(extra))}")
PY
