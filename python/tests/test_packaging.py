"""The package as a user installs it: `maturin sdist` and `maturin build
--release` from this checkout, both passing `twine check`, and each
installed into a fresh virtual environment of its own (nothing else of the
test environment in it) running the README's Python example: the wheel as
`pip install tablepin` gets it, the sdist as a platform without a wheel
builds it (with maturin from PyPI, in the shared build folder, so that it
compiles only the extension again)."""

import os
import subprocess
import sys
import venv

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
BIN = os.path.dirname(sys.executable)

EXAMPLE = """
import pyarrow as pa
import tablepin
repo = tablepin.Repo.init(".")
v = repo.commit("sales", pa.table({"id": [1, 2], "qty": [3, 4]}), key="id", message="first")
repo.tag("train-v1")
repo.commit("sales", pa.table({"id": [2], "qty": [5]}), mode="upsert")
train = repo.read("sales", rev="train-v1")
assert train.sort_by("id").column("qty").to_pylist() == [3, 4]
assert tablepin.content_hash(train) == v.content_hash
print(tablepin.__version__, v.content_hash)
"""


def run(*args, cwd=ROOT):
    out = subprocess.run(args, cwd=cwd, capture_output=True, text=True)
    assert out.returncode == 0, f"{args}: {out.stdout}\n{out.stderr}"
    return out.stdout


def test_the_sdist_and_the_wheel_pass_twine_and_each_runs_the_example_in_a_fresh_venv(tmp_path):
    dist = tmp_path / "dist"
    maturin = os.path.join(BIN, "maturin")
    run(maturin, "sdist", "--out", str(dist))
    run(maturin, "build", "--release", "--locked", "--out", str(dist))
    sdists = list(dist.glob("tablepin-*.tar.gz"))
    wheels = list(dist.glob("tablepin-*-abi3-*.whl"))
    assert len(sdists) == 1 and len(wheels) == 1, list(dist.iterdir())
    checked = run(sys.executable, "-m", "twine", "check", "--strict", *map(str, sdists + wheels))
    assert checked.count("PASSED") == 2, checked
    for name, package in [("wheel", wheels[0]), ("sdist", sdists[0])]:
        fresh = tmp_path / f"venv-{name}"
        venv.create(fresh, with_pip=True)
        python = str(fresh / "bin" / "python")
        run(python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(package))
        work = tmp_path / f"work-{name}"
        work.mkdir()
        version, content_hash = run(python, "-c", EXAMPLE, cwd=work).split()
        assert version == "0.1.0" and len(content_hash) == 64, name
