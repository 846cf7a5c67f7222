"""Shared helpers of the Python tests: the `tablepin` binary the Rust build
made (TABLEPIN_BIN), and a runner for it."""

import json
import os
import subprocess
import time

import pytest

import browser

BIN = os.environ.get("TABLEPIN_BIN", "tablepin")

# Spark (test_spark.py, docs/distributed.md's examples) binds and
# advertises the loopback address only: tests talk to nothing else.
os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"


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


def s3_location(name):
    """A fresh prefix in the S3 test server's bucket (scripts/test.sh starts
    moto and sets TABLEPIN_TEST_S3); skipped elsewhere, failed in CI."""
    base = os.environ.get("TABLEPIN_TEST_S3")
    if not base:
        if os.environ.get("CI"):
            pytest.fail("TABLEPIN_TEST_S3 is not set: run scripts/test.sh, which starts the S3 test server")
        pytest.skip("TABLEPIN_TEST_S3 is not set (scripts/test.sh sets it)")
    return f"{base}/{name}-{time.time_ns()}"


def s3_options():
    """The S3 test server's endpoint and keys, as delta-rs and polars take
    them (`storage_options`)."""
    keys = ["AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION"]
    return {**{k: os.environ[k] for k in keys}, "AWS_ALLOW_HTTP": "true"}


DATA = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "data", "online_retail_II.csv.gz")


@pytest.fixture(scope="session")
def lab_out(tmp_path_factory):
    """The output folder of one `tablepin lab` run on the real data, shared
    by the tests that read it; skipped where the data is missing, failed in
    CI (which has it)."""
    if not os.path.exists(DATA):
        if os.environ.get("CI"):
            pytest.fail(f"the lab's data is missing: {DATA}")
        pytest.skip("the lab's data is not here")
    out = tmp_path_factory.mktemp("lab") / "lab-out"
    cli(out.parent, "lab", "--data", os.path.abspath(DATA), "--out", str(out))
    return out


@pytest.fixture(scope="session")
def generated_1m(tmp_path_factory):
    """A repository whose table `sales` (key `id`) holds the generated
    1,000,000-row table in one version, shared by the tests that only read
    it."""
    folder = tmp_path_factory.mktemp("generated-1m")
    cli(folder, "init")
    cli(folder, "generate", "--rows", "1000000", "-o", "sales.parquet")
    cli(folder, "commit", "sales", "sales.parquet", "--key", "id", "-m", "one million rows")
    return folder / ".tablepin"


@pytest.fixture(scope="module")
def chromium():
    """A headless Chromium page (browser.py), for the tests that look at a
    page: skipped where Chromium is missing, failed in CI (scripts/test.sh
    installs it)."""
    exe = browser.find()
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("Chromium is missing: scripts/test.sh installs it (apt-get install chromium)")
        pytest.skip("Chromium is not installed (apt-get install chromium)")
    with browser.Chromium(exe) as page:
        yield page
