#!/usr/bin/env bash
# The README's first command: builds tablepin, then walks a small generated
# sales table through init, commit, a change, a tag, and reads the tag back.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/tablepin-target}"
export PYO3_BUILD_EXTENSION_MODULE=1   # as scripts/test.sh: one build of the Python extension
# The same build as the tests (`cargo test --workspace --release`), so the two
# share one set of compiled dependencies.
cargo build --release --workspace --tests --locked --features tablepin-cli/lab,tablepin-cli/testing --manifest-path "$root/Cargo.toml"
tp="$CARGO_TARGET_DIR/release/tablepin"
# Put `tablepin` on PATH as `cargo install` would: a link in cargo's own bin
# folder (on PATH wherever rustup installed Rust).
bin="${CARGO_HOME:-$HOME/.cargo}/bin"
if [ -d "$bin" ]; then
  ln -sf "$tp" "$bin/tablepin"
  echo "tablepin is on PATH: $bin/tablepin -> $tp"
else
  echo "tablepin is at $tp (add $(dirname "$tp") to PATH)"
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
set -x
"$tp" init
"$tp" generate --rows 1000 --output sales.csv
"$tp" commit sales sales.csv --key id -m "first load"
"$tp" generate --rows 1000 --returns 5 --output sales-later.csv
"$tp" commit sales sales-later.csv -m "5 late returns"
"$tp" tag train-v1 main~1 -m "model A trained on this"
"$tp" log
"$tp" cat train-v1 sales --limit 5
"$tp" export train-v1 sales --output train-v1.parquet
"$tp" show train-v1
"$tp" verify
set +x
# The same tag from Python: the package built into a virtual environment
# (scripts/python-env.sh), reading the tagged version as a pyarrow Table.
python="$(bash "$root/scripts/python-env.sh" | tail -n 1)"
set -x
"$python" - <<'PY'
import tablepin
repo = tablepin.Repo()
t = repo.read("sales", rev="train-v1")
info = repo.show("train-v1").tables["sales"]
print(f"train-v1 from Python: {t.num_rows} rows, columns {t.column_names}")
print(f"content hash {tablepin.content_hash(t)} (show says {info.content_hash})")
assert tablepin.content_hash(t) == info.content_hash
print(t.to_pandas().head())
PY
