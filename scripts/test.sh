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
# Tests that cannot run here (no test server, no data) list themselves in
# this file (tablepin_store::gate): cargo counts them passed, the totals
# below count them skipped. In CI (CI set) they fail instead.
export TABLEPIN_SKIPS="$(mktemp)"
# An S3-compatible server (moto, from the test environment) for the
# remote-repository tests, on 127.0.0.1, stopped when this script ends.
python="$(TABLEPIN_VENV_ONLY=1 bash scripts/python-env.sh | tail -n 1)"
read -r s3_pid s3_port < <("$python" scripts/test-server.py s3) || true
[ -n "${s3_port:-}" ] || { echo "the S3 test server (moto) did not start"; exit 1; }
trap 'kill "$s3_pid" 2>/dev/null; rm -f "$log" "$TABLEPIN_SKIPS"' EXIT
export TABLEPIN_TEST_S3="s3://tablepin-test"
export AWS_ENDPOINT_URL="http://127.0.0.1:$s3_port" AWS_ALLOW_HTTP=true
export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_REGION=us-east-1
unset AWS_SESSION_TOKEN AWS_PROFILE
# The Azure emulator (Azurite, from the npm registry) where npm can install
# it: the store's conformance suite runs against it too.
azurite="$HOME/.cache/tablepin-azurite"
if command -v npm >/dev/null && { [ -x "$azurite/node_modules/.bin/azurite-blob" ] ||
  npm install --prefix "$azurite" --silent --no-audit --no-fund azurite@3 >/dev/null 2>&1; }; then
  azdata="$(mktemp -d)"
  read -r az_pid az_port < <("$python" scripts/test-server.py azure "$azurite/node_modules/.bin/azurite-blob" "$azdata") || true
  trap 'kill "$s3_pid" ${az_pid:-} 2>/dev/null; rm -rf "$log" "$azdata" "$TABLEPIN_SKIPS"' EXIT
  if [ -n "${az_port:-}" ]; then
    export TABLEPIN_TEST_AZURE="az://tablepin-test" AZURE_STORAGE_USE_EMULATOR=true
    export AZURITE_BLOB_STORAGE_URL="http://127.0.0.1:$az_port"
  else
    echo "Azurite did not start: the Azure tests fail in CI and are skipped elsewhere"
  fi
else
  echo "Azurite could not be installed from the npm registry: the Azure tests fail in CI and are skipped elsewhere"
fi

set +e
cargo test --workspace --release --locked --features tablepin-cli/lab,tablepin-cli/testing --no-fail-fast 2>&1 | tee "$log"
rust=${PIPESTATUS[0]}
# The engine's example program (cargo test built it; it asserts what it shows).
if "$CARGO_TARGET_DIR/release/examples/embed" >/dev/null; then
  echo "example embed: ok"
else
  echo "example embed: FAILED"
  rust=1
fi
set -e

# Headless Chromium, from the system's packages where missing: the lab's
# playground is tested in a real browser.
if ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } >/dev/null 2>&1 ||
      echo "Chromium could not be installed (apt-get install chromium): the playground's browser test fails in CI and is skipped elsewhere"
  else
    echo "Chromium is missing (as root: apt-get install chromium): the playground's browser test fails in CI and is skipped elsewhere"
  fi
fi

# Java 17, from the system's packages where missing: the Spark tests
# (tablepin.spark) run a local Spark on it.
if ! command -v java >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless; } >/dev/null 2>&1 ||
      echo "Java could not be installed (apt-get install openjdk-17-jre-headless): the Spark tests fail in CI and are skipped elsewhere"
  else
    echo "Java is missing (as root: apt-get install openjdk-17-jre-headless): the Spark tests fail in CI and are skipped elsewhere"
  fi
fi

# The binary the Python tests drive: the test build above made it (a
# no-op build here when nothing changed).
cargo build --release --workspace --tests --locked --features tablepin-cli/lab,tablepin-cli/testing 2>&1 | tail -n 1
python="$(bash scripts/python-env.sh | tail -n 1)"
set +e
TABLEPIN_BIN="$CARGO_TARGET_DIR/release/tablepin" "$python" -m pytest -q python/tests 2>&1 | tee -a "$log"
py=${PIPESTATUS[0]}
set -e

# cargo's last line is the doc tests' (no totals) and pytest's is its own:
# one closing line over both, the Rust tests that did not run counted as
# skipped (cargo counted them passed) and named above it.
skipped_rust=$(wc -l <"$TABLEPIN_SKIPS")
if [ "$skipped_rust" -gt 0 ]; then
  echo "Rust tests that did not run here:"
  sed 's/^/  /' "$TABLEPIN_SKIPS"
fi
awk -v sr="$skipped_rust" '
  function add(line) {
    n = split(line, w, /[ ,;]+/)
    for (i = 1; i < n; i++) {
      if (w[i+1] ~ /^passed/) p += w[i]; if (w[i+1] ~ /^failed/) f += w[i]
      if (w[i+1] ~ /^skipped/ || w[i+1] ~ /^ignored/) s += w[i]
    }
  }
  /^test result:/ { add($0) }
  /^[0-9]+ (passed|failed|skipped)/ || / passed in / || / failed in / || / skipped in / { add($0) }
  END { printf "%d passed, %d failed, %d skipped\n", p - sr, f, s + sr }' "$log"
[ "$rust" -eq 0 ] && [ "$py" -eq 0 ]
