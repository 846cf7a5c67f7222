"""`tablepin.torch.TableDataset`: a version fed to PyTorch training, sharded
over ranks and DataLoader workers so that every row is read exactly once,
in an order that the version, the seed and the epoch alone decide.

Rows are compared by the content hash (the sum of the rows' hashes, so
two row sets have the same hash and count only when they hold the same
rows), computed by `tablepin.content_hash` over what the workers yielded,
apart from the engine's stored figure."""

import json
import os
import subprocess
import sys

import pyarrow as pa
import pytest

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader  # noqa: E402

import tablepin  # noqa: E402
from tablepin.torch import TableDataset, to_tensors  # noqa: E402


def epoch_rows(location, world, workers, **kw):
    """Every batch each rank's DataLoader gives in one epoch, per rank."""
    seen = []
    for rank in range(world):
        ds = TableDataset(location, "sales", rank=rank, world_size=world, convert=None, batch_size=4096, **kw)
        # The DataLoader's default start method (fork on Linux) after the
        # engine's runtime ran in this process: the workers make their own.
        loader = DataLoader(ds, batch_size=None, num_workers=workers)
        seen.append(list(loader))
    return seen


def test_four_ranks_of_two_workers_read_every_row_exactly_once(generated_1m):
    repo = tablepin.Repo(generated_1m)
    head = repo.scan("sales", limit=0)
    # Fewer files than the 8 shards: runs of rows are cut across them.
    assert len(head.files) < 8
    seen = epoch_rows(repo.location, world=4, workers=2)
    # Every rank has the same work (DDP waits for the slowest).
    assert [sum(b.num_rows for b in rank) for rank in seen] == [250_000] * 4
    rows = pa.Table.from_batches([b for rank in seen for b in rank])
    assert rows.num_rows == head.rows == 1_000_000
    assert tablepin.content_hash(rows) == head.content_hash
    # No row twice, by key as well.
    assert len(set(rows.column("id").to_pylist())) == head.rows


def test_shuffle_is_decided_by_the_seed_and_the_epoch(generated_1m):
    def order(seed, epoch):
        ds = TableDataset(generated_1m, "sales", columns=["id"], shuffle=True, seed=seed, epoch=epoch,
                          rank=1, world_size=2, convert=None, batch_size=1000)
        return [i for b in ds for i in b.column("id").to_pylist()]

    first = order(7, 0)
    assert order(7, 0) == first
    other_epoch = order(7, 1)
    assert other_epoch != first
    # Another order of the same rows? No: each epoch deals the files
    # anew, so a rank's rows differ too; over both ranks they are the
    # version's, which the exactly-once test checks with shuffling on.
    assert order(8, 0) != first
    # Unshuffled, a rank's rows come in the version's file order.
    plain = TableDataset(generated_1m, "sales", columns=["id"], rank=0, world_size=1, convert=None)
    ids = [i for b in plain for i in b.column("id").to_pylist()]
    assert ids != first and sorted(ids) == list(range(len(ids)))


def test_shuffled_epochs_still_read_every_row_once(generated_1m):
    repo = tablepin.Repo(generated_1m)
    for epoch in (0, 3):
        seen = epoch_rows(repo.location, world=2, workers=2, shuffle=True, seed=11, epoch=epoch)
        rows = pa.Table.from_batches([b for rank in seen for b in rank])
        assert tablepin.content_hash(rows) == repo.scan("sales", limit=0).content_hash


def test_batches_become_tensors(generated_1m):
    schema = tablepin.Repo(generated_1m).schema("sales")
    # `customer` is an integer column with nulls: no tensor holds it.
    columns = [n for n in schema.names if n != "customer"]
    ds = TableDataset(generated_1m, "sales", columns=columns, batch_size=256, rank=0, world_size=1)
    batch = next(iter(DataLoader(ds, batch_size=None)))
    assert batch["sold_at"].dtype == torch.int64
    for name in columns:
        t = schema.field(name).type
        if pa.types.is_integer(t) or pa.types.is_floating(t):
            assert isinstance(batch[name], torch.Tensor) and batch[name].shape == (256,), name
        elif pa.types.is_string(t):
            assert isinstance(batch[name], list) and len(batch[name]) == 256, name
    with pytest.raises(tablepin.BadInput, match="column 'customer' has [0-9]+ nulls"):
        next(iter(TableDataset(generated_1m, "sales", columns=["customer"], rank=0, world_size=1)))
    with_nulls = to_tensors(pa.record_batch({"x": pa.array([1.0, None]), "n": pa.array([1, 2])}))
    assert torch.isnan(with_nulls["x"][1]) and with_nulls["n"].tolist() == [1, 2]


def test_bad_arguments_are_one_sentence(generated_1m):
    with pytest.raises(tablepin.BadInput, match="rank 4 is not one of world size 4"):
        TableDataset(generated_1m, "sales", rank=4, world_size=4)
    with pytest.raises(tablepin.BadInput, match="together"):
        TableDataset(generated_1m, "sales", rank=1)
    with pytest.raises(tablepin.NotFound, match="nope"):
        TableDataset(generated_1m, "sales", "nope")


PEAK = r"""
import json, resource, sys
from tablepin.torch import TableDataset
location, rank, world = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ds = TableDataset(location, "sales", columns=["id", "product", "quantity", "price", "sold_at"],
                  rank=rank, world_size=world, shuffle=True, seed=1, batch_size=1024)
# Warm: the engine's threads, the allocators and the code of torch and
# numpy's generator paged in, on a few rows, so that what grows after is
# the rows held.
import numpy as np, tablepin
from tablepin.torch import _gather, to_tensors
few = tablepin.Repo(location).read("sales", ds.version, list(ds.columns), limit=1000, files=[0])
to_tensors(_gather(few.to_batches(), np.array([0, few.num_rows]), np.random.default_rng(0).permutation(5)))
start = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
rows = 0
for batch in ds:
    rows += len(batch["id"])
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"grew": peak - start, "rows": rows, "files": sorted({f for f, _, _ in ds.shard_rows(rank, world)})}))
"""


def test_a_rank_holds_about_one_file(generated_1m):
    """A rank's memory grows by less than 1.5 times the largest of its
    files decoded, not with its share of the version: it reads a file at
    a time and shuffles by taking one batch at a time."""
    out = subprocess.run(
        [sys.executable, "-c", PEAK, str(generated_1m), "0", "2"], capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    repo = tablepin.Repo(generated_1m)
    assert len(got["files"]) >= 2, "the rank must read several files for this to say anything"
    columns = ["id", "product", "quantity", "price", "sold_at"]
    decoded = max(repo.read("sales", columns=columns, files=[i]).nbytes for i in got["files"])
    share = repo.read("sales", columns=columns, files=got["files"]).nbytes
    assert got["rows"] > 0
    assert got["grew"] < 1.5 * decoded < share, (got, decoded, share)


def test_the_mlflow_record_feeds_the_run_again(generated_1m, tmp_path, monkeypatch):
    mlflow = pytest.importorskip("mlflow")
    import tablepin.mlflow

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    mlflow.set_tracking_uri(f"file://{tmp_path / 'mlruns'}")
    try:
        ds = TableDataset(generated_1m, "sales", columns=["id"], shuffle=True, seed=5, epoch=2,
                          rank=0, world_size=3, convert=None)
        with mlflow.start_run() as run:
            ds.log_input()
        rec = tablepin.mlflow.recorded(run.info.run_id)["sales"]
    finally:
        mlflow.set_tracking_uri(None)
    assert (rec.version, rec.seed, rec.content_hash) == (ds.version, 5, ds.content_hash)
    again = TableDataset(generated_1m, "sales", rec.version, columns=["id"], shuffle=True, seed=rec.seed,
                         epoch=2, rank=0, world_size=3, convert=None)
    ids = lambda d: [i for b in d for i in b.column("id").to_pylist()]
    assert ids(again) == ids(ds)
