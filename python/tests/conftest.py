"""Shared helpers of the Python tests: the `tablepin` binary the Rust build
made (TABLEPIN_BIN), and a runner for it."""

import json
import os
import subprocess

import pytest

BIN = os.environ.get("TABLEPIN_BIN", "tablepin")


def cli(cwd, *args, ok=True):
    """Runs the CLI in `cwd`; its stdout (JSON decoded when --json is given)."""
    out = subprocess.run([BIN, *args], cwd=cwd, capture_output=True, text=True)
    if ok:
        assert out.returncode == 0, out.stderr
    else:
        return out
    return json.loads(out.stdout) if "--json" in args else out.stdout


@pytest.fixture
def repo_dir(tmp_path):
    """An empty folder to make a repository in."""
    return tmp_path
