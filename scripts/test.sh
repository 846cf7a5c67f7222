#!/usr/bin/env bash
# Every test: the Rust workspace (optimized: some tests run over a million
# rows), then the Python tests (pytest): of the `tablepin` package, built by
# maturin into a virtual environment this script creates and fills from the
# package registry, and of the binary the Rust build made. Ends with one
# line of totals over both.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/tablepin-target}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
# maturin sets this for the extension; setting it for every build keeps the
# workspace's build of the extension crate and maturin's the same one.
export PYO3_BUILD_EXTENSION_MODULE=1
log="$(mktemp)"
trap 'rm -f "$log"' EXIT

set +e
cargo test --workspace --release --locked --no-fail-fast 2>&1 | tee "$log"
rust=${PIPESTATUS[0]}
# The engine's example program (cargo test built it; it asserts what it shows).
if "$CARGO_TARGET_DIR/release/examples/embed" >/dev/null; then
  echo "example embed: ok"
else
  echo "example embed: FAILED"
  rust=1
fi
set -e

# The binary the Python tests drive: the test build above made it (a
# no-op build here when nothing changed).
cargo build --release --workspace --tests --locked 2>&1 | tail -n 1
python="$(bash scripts/python-env.sh | tail -n 1)"
set +e
TABLEPIN_BIN="$CARGO_TARGET_DIR/release/tablepin" "$python" -m pytest -q python/tests 2>&1 | tee -a "$log"
py=${PIPESTATUS[0]}
set -e

# cargo's last line is the doc tests' (no totals) and pytest's is its own:
# one closing line over both.
awk '
  /^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
  /^[0-9]+ (passed|failed)/ || / passed in / || / failed in / {
    for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i }
  }
  END { printf "%d passed, %d failed\n", p, f }' "$log"
[ "$rust" -eq 0 ] && [ "$py" -eq 0 ]
