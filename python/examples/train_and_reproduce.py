"""Train a small model on a tagged version, record it in MLflow, then
reproduce it from the run id alone.

    python python/examples/train_and_reproduce.py [WORKDIR]

Needs tablepin, numpy and mlflow-skinny. It makes a repository and an MLflow
file store in WORKDIR (a new temporary folder by default).
"""

import os
import sys
import tempfile

import mlflow
import numpy as np
import pyarrow as pa

import tablepin
import tablepin.mlflow as tpm


def sales(n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    qty = rng.integers(1, 50, n)
    price = rng.uniform(0.5, 20.0, n).round(2)
    returned = (rng.uniform(size=n) < 0.02 + 0.002 * qty).astype(np.int64)
    return pa.table({"id": np.arange(n), "qty": qty, "price": price, "returned": returned})


def train(rows: pa.Table, seed: int) -> np.ndarray:
    """A least-squares fit of `returned` on qty and price, on a seeded
    90% sample: the same rows and seed give the same coefficients."""
    rng = np.random.default_rng(seed)
    pick = rng.permutation(rows.num_rows)[: rows.num_rows * 9 // 10]
    x = np.column_stack([np.ones(rows.num_rows), rows["qty"].to_numpy(), rows["price"].to_numpy()])[pick]
    y = rows["returned"].to_numpy()[pick].astype(float)
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    return coef


def main(workdir: str) -> None:
    os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    mlflow.set_tracking_uri(f"file://{os.path.join(workdir, 'mlruns')}")
    repo = tablepin.Repo.init(os.path.join(workdir, "repo"))
    repo.commit("sales", sales(20_000, seed=1), key="id", message="week 1")
    repo.tag("train-v1", message="the rows model A learns from")

    # Training: read the tagged version, fit, record what was read.
    seed = 7
    with mlflow.start_run() as run:
        rows = repo.read("sales", rev="train-v1")
        coef = train(rows, seed)
        tpm.log_input(repo, "sales", "train-v1", seed=seed)
        mlflow.log_params({f"coef_{i}": f"{c:.17g}" for i, c in enumerate(coef)})
    print(f"trained run {run.info.run_id} on {rows.num_rows} rows: coef {coef}")

    # The live table moves on: late returns rewrite old rows.
    late = repo.read("sales", rev="main", filter="id < 5")
    late = late.set_column(3, "returned", pa.array([1] * late.num_rows, pa.int64()))
    repo.commit("sales", late, mode="upsert", message="late returns")

    # Later, from the run id alone: the same rows, proved, the same model.
    rec = tpm.recorded(run.info.run_id)["sales"]
    again = tpm.load_input(run.info.run_id)
    coef2 = train(again, rec.seed)
    params = mlflow.get_run(run.info.run_id).data.params
    recorded = np.array([float(params[f"coef_{i}"]) for i in range(len(coef2))])
    assert np.array_equal(coef2, recorded), (coef2, recorded)
    print(f"reproduced from {rec.tag} ({rec.version[:12]}, content hash {rec.content_hash}): same coefficients")
    live = repo.show("main").tables["sales"].content_hash
    print(f"the live table's content hash is {live} now: training on it would not reproduce the model")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="tablepin-mlflow-"))
