"""The MLflow record (issue 22): a run records which version and rows a model
trained on, and the rows are read back and proved later; an erasure since, or
a damaged blob, is an exception, never a silent read. A real mlflow-skinny
tracking store in a temporary folder (its file store, which MLflow 3 keeps
behind MLFLOW_ALLOW_FILE_STORE)."""

import json
import subprocess

import mlflow
import pyarrow as pa
import pytest
from mlflow.tracking import MlflowClient

import tablepin
import tablepin.mlflow as tpm


@pytest.fixture
def tracking(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    mlflow.set_tracking_uri(f"file://{tmp_path / 'mlruns'}")
    yield
    mlflow.set_tracking_uri(None)


def sales(n=2000):
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "customer": pa.array(["alice" if i == 1500 else f"c{i % 97}" for i in range(n)]),
            "returned": pa.array([0] * n, pa.int64()),
        }
    )


def git_head():
    out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else None


def test_a_run_records_the_version_and_reads_back_exactly_its_rows(tmp_path, tracking):
    repo = tablepin.Repo.init(tmp_path / "r")
    v = repo.commit("sales", sales(), key="id")
    repo.tag("train-v1", message="model A")
    # The live table moves on: a late return changes an old row.
    repo.commit("sales", pa.table({"id": [7], "customer": ["c7"], "returned": [1]}), mode="upsert")
    with mlflow.start_run() as run:
        rec = tpm.log_input(repo, "sales", "train-v1", seed=42)
    assert rec.version == v.version and rec.tag == "train-v1"

    r = MlflowClient().get_run(run.info.run_id)
    tags = r.data.tags
    assert tags["tablepin.sales.tag"] == "train-v1"
    assert tags["tablepin.sales.rev"] == "train-v1"
    assert tags["tablepin.sales.version"] == v.version
    assert tags["tablepin.sales.content_hash"] == v.content_hash
    assert tags["tablepin.sales.rows"] == "2000"
    assert tags["tablepin.sales.repository"] == str(tmp_path / "r")
    assert tags["tablepin.sales.seed"] == "42"
    assert tags["tablepin.sales.context"] == "training"
    head = git_head()
    assert head is not None, "the tests run from a git clone"
    assert tags["tablepin.sales.git_commit"] == head
    assert tags["mlflow.source.git.commit"] == head
    (inp,) = r.inputs.dataset_inputs
    assert inp.dataset.digest == v.content_hash
    assert inp.dataset.source_type == "tablepin"
    assert inp.dataset.name == "sales@train-v1"
    assert json.loads(inp.dataset.source) == {
        "repository": str(tmp_path / "r"), "version": v.version, "table": "sales", "rev": "train-v1",
    }
    assert {t.key: t.value for t in inp.tags}["mlflow.data.context"] == "training"

    rows = tpm.load_input(run.info.run_id)
    assert tablepin.content_hash(rows) == v.content_hash
    assert rows.equals(sales())


def test_credentials_never_reach_the_record():
    assert tpm.public_location("s3://key:secret@bucket/prefix?X-Amz-Signature=abc") == "s3://bucket/prefix"
    assert tpm.public_location("https://u:p@host:9000/a/b") == "https://host:9000/a/b"


def test_an_erasure_since_is_named_and_read_only_when_asked(tmp_path, tracking):
    repo = tablepin.Repo.init(tmp_path / "r")
    v = repo.commit("sales", sales(), key="id")
    repo.tag("train-v1")
    with mlflow.start_run() as run:
        tpm.log_input(repo, "sales", "train-v1")
    repo.erase("sales", "customer = 'alice'", reason="request 17").apply()
    with pytest.raises(tpm.RowsErased, match=r"rewritten by erasure \(audit record 1\)") as e:
        tpm.load_input(run.info.run_id)
    assert e.value.audit == (1,)
    assert e.value.recorded_hash == v.content_hash
    assert e.value.current_hash == repo.show("train-v1").tables["sales"].content_hash
    assert e.value.current_hash != v.content_hash
    assert isinstance(e.value, tablepin.Error)
    rows = tpm.load_input(run.info.run_id, allow_erased=True)
    assert rows.num_rows == 1999 and "alice" not in rows.column("customer").to_pylist()


def test_a_damaged_blob_is_named(tmp_path, tracking):
    repo = tablepin.Repo.init(tmp_path / "r")
    repo.commit("sales", sales(), key="id")
    with mlflow.start_run() as run:
        tpm.log_input(repo, "sales", "main")
    data = [p for p in (tmp_path / "r" / "objects").rglob("*") if p.is_file() and p.read_bytes()[:4] == b"PAR1"]
    assert len(data) == 1
    raw = bytearray(data[0].read_bytes())
    raw[100] ^= 0xFF
    data[0].write_bytes(bytes(raw))
    with pytest.raises(tablepin.Damaged, match=data[0].name[:12]):
        tpm.load_input(run.info.run_id)


def test_wrong_calls_say_what_to_do(tmp_path, tracking):
    repo = tablepin.Repo.init(tmp_path / "r")
    repo.commit("sales", sales(10), key="id")
    with pytest.raises(tablepin.Error, match="no active MLflow run"):
        tpm.log_input(repo, "sales", "main")
    with mlflow.start_run() as run:
        with pytest.raises(tablepin.NotFound, match=r"has no table 'nope' \(tables: sales\)"):
            tpm.log_input(repo, "nope", "main")
    with pytest.raises(tablepin.NotFound, match="recorded no tablepin input"):
        tpm.load_input(run.info.run_id)
