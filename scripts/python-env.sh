#!/usr/bin/env bash
# Makes the Python environment the tests and the quickstart use: a virtual
# environment (default ~/.cache/tablepin-venv, or $TABLEPIN_VENV) with the
# test requirements from PyPI and the `tablepin` package built into it by
# maturin from this checkout. Prints the venv's python on its last line.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/tablepin-target}"
venv="${TABLEPIN_VENV:-$HOME/.cache/tablepin-venv}"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv" >&2
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$root/python/requirements-test.txt" >&2
# The extension, from the same workspace build as the CLI (see README);
# TABLEPIN_VENV_ONLY=1 stops before it (the test script's first call, which
# needs only the test server).
if [ "${TABLEPIN_VENV_ONLY:-}" = 1 ]; then
  echo "$venv/bin/python"
  exit 0
fi
(cd "$root" && VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH" \
  "$venv/bin/maturin" develop --release --locked --quiet >&2)
echo "$venv/bin/python"
