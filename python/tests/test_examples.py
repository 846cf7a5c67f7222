"""The guide's example runs as written (docs/python.md)."""

import os
import subprocess
import sys

HERE = os.path.dirname(__file__)


def test_train_record_and_reproduce_from_the_run_id(tmp_path):
    script = os.path.join(HERE, "..", "examples", "train_and_reproduce.py")
    out = subprocess.run([sys.executable, script, str(tmp_path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "same coefficients" in out.stdout, out.stdout
