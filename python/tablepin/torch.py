"""Feeding a version to PyTorch training: `tablepin.torch.TableDataset`.

    from torch.utils.data import DataLoader
    from tablepin.torch import TableDataset

    ds = TableDataset(repo, "sales", "train-v1", columns=["x", "y"],
                      batch_size=1024, shuffle=True, seed=7)
    for epoch in range(3):
        ds.set_epoch(epoch)
        for batch in DataLoader(ds, batch_size=None, num_workers=2):
            ...  # batch["x"] is a tensor of up to 1024 rows

The dataset is an `IterableDataset` over one version (resolved when it is
made, so a branch that moves later changes nothing). Its rows are cut into
even runs, one per DataLoader worker of each rank (the rank and world
size from `torch.distributed` when it is initialized, or given), so that
every row of the version is read by exactly one worker of one rank in an
epoch and every rank has the same number of rows (give or take one).
Each worker reads the data files its run touches one at a time, each
verified against its name, and never holds more than one file's rows.

With `shuffle`, the order depends on the version, `seed` and the epoch
only: the files are laid end to end in an order drawn from (seed, epoch)
before the cut, and each run's rows of a file are yielded in an order
drawn from (seed, epoch, file, first row). The
same three give the same batches on any machine; record them in MLflow
(`ds.log_input()`) and the run can be fed again exactly.

Requires the `torch` extra (`pip install 'tablepin[torch]'`).
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, Sequence

import numpy as _np
import pyarrow as _pa
import pyarrow.compute as _pc
import torch as _torch
from torch.utils.data import IterableDataset as _IterableDataset
from torch.utils.data import get_worker_info as _worker_info

from . import BadInput, Repo
from ._parts import DataFile

__all__ = ["TableDataset", "to_tensors"]


def to_tensors(batch: _pa.RecordBatch) -> dict[str, Any]:
    """A record batch as a dict of columns: numbers, booleans, dates and
    times as tensors (times as int64 in their unit), text and other columns
    as Python lists. A null in a float column is NaN; an integer, boolean
    or time column with nulls is refused, naming it (a tensor has no null
    and no NaN of those types)."""
    out: dict[str, Any] = {}
    for name, col in zip(batch.schema.names, batch.columns):
        t = col.type
        if _pa.types.is_floating(t):
            out[name] = _torch.from_numpy(col.to_numpy(zero_copy_only=False).copy())
        elif _pa.types.is_integer(t) or _pa.types.is_boolean(t):
            if col.null_count:
                raise BadInput(
                    f"column '{name}' has {col.null_count} nulls in this batch, which a tensor cannot hold; "
                    "fill them (or leave the column out with `columns`)"
                )
            out[name] = _torch.from_numpy(col.to_numpy(zero_copy_only=False).copy())
        elif _pa.types.is_temporal(t) and not _pa.types.is_interval(t):
            if col.null_count:
                raise BadInput(f"column '{name}' has {col.null_count} nulls in this batch, which a tensor cannot hold")
            out[name] = _torch.from_numpy(col.cast(_pa.int64()).to_numpy().copy())
        else:
            out[name] = col.to_pylist()
    return out


def _gather(chunks: list[_pa.RecordBatch], offsets: Any, rows: Any) -> _pa.RecordBatch:
    """The rows at positions `rows` (in that order) of the record batches
    `chunks` laid end to end (`offsets`: where each starts). pyarrow's
    `take` on a table of many chunks first joins each column into one
    array, a copy of the whole file for every batch; this takes from each
    chunk only its rows, then puts them in the order asked. Its short-lived
    buffers come from the system's allocator, which reuses freed memory at
    once, where pyarrow's default pool keeps it a while: a rank's memory
    stays near one file's rows."""
    pool = _pa.system_memory_pool()
    chunk = _np.searchsorted(offsets, rows, side="right") - 1
    by_chunk = _np.argsort(chunk, kind="stable")
    pieces = [
        _pc.take(chunks[c], _pa.array(rows[chunk == c] - offsets[c], memory_pool=pool), memory_pool=pool)
        for c in _np.unique(chunk)
    ]
    gathered = _pa.Table.from_batches(pieces, schema=chunks[0].schema).combine_chunks(memory_pool=pool)
    # Row j of `gathered` is rows[by_chunk[j]]: put each back in its place.
    back = _pa.array(_np.argsort(by_chunk), memory_pool=pool)
    return _pc.take(gathered, back, memory_pool=pool).to_batches()[0]


class TableDataset(_IterableDataset):
    """One version of a table as an `IterableDataset` of batches (see the
    module's text). Use it with `DataLoader(ds, batch_size=None)`: each
    item is already a batch of up to `batch_size` rows, made by `convert`
    (default `to_tensors`; pass `None` for pyarrow record batches)."""

    def __init__(
        self,
        repo: Repo | str,
        table: str,
        rev: str = "main",
        *,
        columns: Sequence[str] | None = None,
        batch_size: int = 1024,
        shuffle: bool = False,
        seed: int = 0,
        epoch: int = 0,
        rank: int | None = None,
        world_size: int | None = None,
        convert: Callable[[_pa.RecordBatch], Any] | None = to_tensors,
    ):
        if batch_size < 1:
            raise BadInput(f"batch_size is a number of rows, 1 or more, not {batch_size}")
        if (rank is None) != (world_size is None):
            raise BadInput("give rank and world_size together, or neither (then torch.distributed's are used)")
        if world_size is not None and not 0 <= rank < world_size:  # type: ignore[operator]
            raise BadInput(f"rank {rank} is not one of world size {world_size}'s (0 to {world_size - 1})")
        repo = repo if isinstance(repo, Repo) else Repo(repo)
        head = repo.scan(table, rev, columns, limit=0)
        self.location = repo.location
        self.table = table
        self.rev = rev
        self.version: str = head.version
        """The version read (resolved from `rev` when the dataset was made)."""
        self.content_hash: str = head.content_hash
        self.rows: int = head.rows
        self.files: tuple[DataFile, ...] = head.files
        self.columns = tuple(columns) if columns is not None else None
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = epoch
        self.convert = convert
        self._rank = rank
        self._world = world_size

    def log_input(self, context: str = "training") -> Any:
        """Records in the active MLflow run the version this dataset reads
        (not its revision, which may have moved), the proof of its rows
        and the seed (`tablepin.mlflow.log_input`): with the epoch, all
        that decides the batches. `TableDataset(repo, table,
        record.version, shuffle=True, seed=record.seed)` feeds the run
        again."""
        from . import mlflow as _mlflow

        return _mlflow.log_input(Repo(self.location), self.table, self.version, context, seed=self.seed)

    def set_epoch(self, epoch: int) -> None:
        """The epoch the next iteration is (its order, with `shuffle`)."""
        self.epoch = epoch

    def _place(self) -> tuple[int, int]:
        """This process's shard and the number of shards."""
        if self._world is not None:
            rank, world = self._rank or 0, self._world
        elif _torch.distributed.is_available() and _torch.distributed.is_initialized():
            rank, world = _torch.distributed.get_rank(), _torch.distributed.get_world_size()
        else:
            rank, world = 0, 1
        info = _worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        return rank * workers + worker, world * workers

    def shard_rows(self, shard: int, shards: int) -> list[tuple[int, int, int]]:
        """What shard `shard` of `shards` reads this epoch, in the order it
        reads it: (data file, first row, end row) slices of the files' live
        rows. The files are laid end to end (in the version's order, or
        one drawn from the seed and the epoch) and cut into `shards` runs
        of rows as even as rows allow (they differ by one at most), so
        every rank has the same work whatever the files' sizes. A pure
        function of the version, the seed, the epoch and the shard."""
        order: Sequence[DataFile] = self.files
        if self.shuffle:
            rng = _np.random.default_rng([self.seed, self.epoch])
            order = [self.files[i] for i in rng.permutation(len(self.files))]
        total = sum(f.rows for f in order)
        lo, hi = shard * total // shards, (shard + 1) * total // shards
        out, at = [], 0
        for f in order:
            start, end = max(lo - at, 0), min(hi - at, f.rows)
            if start < end:
                out.append((f.index, start, end))
            at += f.rows
        return out

    def __iter__(self) -> Iterator[Any]:
        shard, shards = self._place()
        repo = Repo(self.location)
        for index, start, end in self.shard_rows(shard, shards):
            # One file at a time: its rows are let go (the generator ends)
            # before the next file is read.
            for batch in self._batches(repo, index, start, end):
                yield batch if self.convert is None else self.convert(batch)

    def _batches(self, repo: Repo, index: int, start: int, end: int) -> Iterator[_pa.RecordBatch]:
        """Rows `start` to `end` of file `index` in batches: in file order,
        or taken a batch at a time in an order drawn from the seed, the
        epoch and the slice (so memory holds the file and one batch, not a
        shuffled copy)."""
        rows = repo.read(self.table, self.version, self.columns, files=[index]).slice(start, end - start)
        if not self.shuffle:
            yield from rows.to_batches(max_chunksize=self.batch_size)
            return
        rng = _np.random.default_rng([self.seed, self.epoch, index, start])
        order = rng.permutation(_np.arange(rows.num_rows, dtype=_np.int32))
        chunks = rows.to_batches()
        offsets = _np.cumsum([0] + [c.num_rows for c in chunks])
        for at in range(0, rows.num_rows, self.batch_size):
            yield _gather(chunks, offsets, order[at : at + self.batch_size])

    def __repr__(self) -> str:
        return (
            f"TableDataset(table={self.table!r}, version={self.version[:12]!r}, rows={self.rows}, "
            f"files={len(self.files)}, shuffle={self.shuffle}, seed={self.seed}, epoch={self.epoch})"
        )
