"""Any version read into Ray Data, and a Ray Dataset committed as one version.

    import ray
    import tablepin.ray

    ds = tablepin.ray.read("s3://bucket/repo", "sales", "train-v1")
    ...
    v = tablepin.ray.write(ds, "s3://bucket/repo", "sales", mode="upsert")

A read is one Ray read task per part of the version (`Repo.split`: whole
data files, rows balanced), each opening the repository on its worker and
reading its files verified against their names; the version is resolved
once, on the driver, so every task reads the same rows. A write stages each
block in the task that holds it (`Repo.stage`: data files, no version) and
commits every task's files as one version when the whole write succeeded
(`Repo.commit_staged`): a write that fails leaves no version, only files
for `gc`.

Requires the `ray` extra (`pip install 'tablepin[ray]'`).
"""

from __future__ import annotations

import os as _os
from typing import Any, Iterable, Sequence

import pyarrow as _pa
from ray.data import Dataset as _Dataset
from ray.data import read_datasource as _read_datasource
from ray.data.block import BlockAccessor as _BlockAccessor
from ray.data.block import BlockMetadata as _BlockMetadata
from ray.data.datasource import Datasink as _Datasink
from ray.data.datasource import Datasource as _Datasource
from ray.data.datasource import ReadTask as _ReadTask

from . import BadInput, InternalError, Repo, Version
from ._parts import Part, location_of as _location

__all__ = ["read", "write", "TableDatasource", "TableDatasink"]



def _read_part(part: Part) -> Iterable[_pa.Table]:
    for batch in part.batches():
        yield _pa.Table.from_batches([batch])


class TableDatasource(_Datasource):
    """A version of a table as a Ray `Datasource` (see the module's text)."""

    def __init__(
        self,
        repo: Repo | str | _os.PathLike[str],
        table: str,
        rev: str = "main",
        columns: Sequence[str] | None = None,
        filter: str | None = None,
    ):
        super().__init__()
        self._repo = repo if isinstance(repo, Repo) else Repo(repo)
        self._table, self._columns, self._filter = table, columns, filter
        # Resolved here, once: every task reads this version.
        self.split = self._repo.split(table, rev, columns=columns, filter=filter)

    def get_name(self) -> str:
        return f"tablepin({self._table}@{self.split.version[:12]})"

    def estimate_inmemory_data_size(self) -> int | None:
        return sum(p.bytes for p in self.split.parts)

    def get_read_tasks(self, parallelism: int, per_task_row_limit: int | None = None, data_context: Any = None) -> list[_ReadTask]:
        # The version's files are known since __init__: cut them again.
        split = self.split.cut(max(parallelism, 1))
        return [
            _ReadTask(
                lambda p=part: _read_part(p),
                _BlockMetadata(num_rows=part.rows, size_bytes=part.bytes, input_files=None, exec_stats=None),
                schema=split.schema,
            )
            for part in split.parts
        ]


def read(
    repo: Repo | str | _os.PathLike[str],
    table: str,
    rev: str = "main",
    *,
    columns: Sequence[str] | None = None,
    filter: str | None = None,
    **ray_args: Any,
) -> _Dataset:
    """`table` at `rev` as a `ray.data.Dataset` (one read task per part of
    the version; `ray_args` go to `ray.data.read_datasource`, such as
    `override_num_blocks`). `filter` is an SQL condition the engine
    evaluates in each task, skipping files that cannot match."""
    return _read_datasource(TableDatasource(repo, table, rev, columns, filter), **ray_args)


class TableDatasink(_Datasink):
    """A Ray `Datasink` that stages blocks in the tasks and commits them as
    one version on completion (see the module's text); `result` is the
    `Version` the commit made."""

    def __init__(
        self,
        repo: Repo | str | _os.PathLike[str],
        table: str,
        mode: str = "append",
        key: Sequence[str] | str | None = None,
        message: str = "",
        branch: str | None = None,
    ):
        if mode not in ("append", "upsert", "overwrite", "delete"):
            raise BadInput(f"a Ray write's mode is one of 'append', 'upsert', 'overwrite' or 'delete', not '{mode}'")
        self.location = _location(repo)
        self.table, self.mode, self.message, self.branch = table, mode, message, branch
        self.key = [key] if isinstance(key, str) else (list(key) if key is not None else None)
        self.result: Version | None = None
        # A delete stages the rows' keys; the other modes stage rows.
        self._stage_mode = "delete" if mode == "delete" else "append"

    def write(self, blocks: Iterable[Any], ctx: Any) -> list[str]:
        repo = Repo(self.location)
        staged = []
        for block in blocks:
            rows = _BlockAccessor.for_block(block).to_arrow()
            if rows.num_rows:
                staged.append(repo.stage(self.table, rows, self.key, self.branch, self._stage_mode))
        return staged

    def on_write_complete(self, write_result: Any) -> None:
        staged = [s for task in write_result.write_returns for s in task]
        self.result = Repo(self.location).commit_staged(
            self.table, staged, mode=self.mode, message=self.message, branch=self.branch
        )


def write(
    dataset: _Dataset,
    repo: Repo | str | _os.PathLike[str],
    table: str,
    *,
    mode: str = "append",
    key: Sequence[str] | str | None = None,
    message: str = "",
    branch: str | None = None,
) -> Version:
    """Commits the rows of `dataset` to `table` as one version: "append",
    "upsert" (by the table's key), "overwrite" or "delete" (the rows with
    the dataset's keys go; it needs only the key columns). Each write task stages
    its blocks; the commit lands only when every task succeeded. `key`
    names the key of a new table."""
    sink = TableDatasink(repo, table, mode, key, message, branch)
    dataset.write_datasink(sink)
    if sink.result is None:
        raise InternalError("Ray finished the write without calling on_write_complete; nothing was committed")
    return sink.result
