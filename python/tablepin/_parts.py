"""A version's rows cut into parts, for readers that run on many processes.

A version's rows live in data files; every live row is in exactly one of
them (a file's deletion vector hides the rows later versions changed). A
part is a set of those files, named by their positions in the version's
file list: reading each part once, anywhere, reads every row of the version
exactly once. Spark partitions, Ray read tasks and the shards of a PyTorch
dataset are parts. A part holds plain values only (it pickles), and names
the version, never a branch, so a task started later reads what the
driver planned.
"""

from __future__ import annotations

import os as _os
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Iterator, Sequence

import pyarrow as _pa

if TYPE_CHECKING:
    from . import Repo, Scan


def location_of(repo: Repo | str | _os.PathLike[str]) -> str:
    """Where a repository is, as a task on another process opens it."""
    from . import Repo

    return repo.location if isinstance(repo, Repo) else Repo(repo).location


@dataclass(frozen=True)
class DataFile:
    """One data file of a version: its position and its live rows."""

    index: int
    rows: int
    """Rows the version sees in the file."""
    bytes: int
    """Bytes stored for it (data file and deletion vector)."""


@dataclass(frozen=True)
class Part:
    """Some data files of one version of a table: one task's share."""

    location: str
    """The repository (folder or URL)."""
    table: str
    version: str
    """The version id (not a branch: every task reads the same rows)."""
    files: tuple[int, ...]
    rows: int
    bytes: int
    columns: tuple[str, ...] | None = None
    filter: str | None = None

    def scan(self) -> Scan:
        """The part's rows as a stream, one file at a time (each verified
        against its name), so memory holds one file."""
        from . import Repo

        return Repo(self.location).scan(
            self.table, self.version, columns=self.columns, filter=self.filter, files=self.files
        )

    def batches(self) -> Iterator[_pa.RecordBatch]:
        """The part's record batches (see `scan`)."""
        return iter(self.scan())

    def read(self) -> _pa.Table:
        """The part's rows as one pyarrow Table."""
        return self.scan().read_all()


@dataclass(frozen=True)
class Split:
    """A version of a table cut into parts (`Repo.split`)."""

    rev: str
    version: str
    rows: int
    """The table's rows in the version (before any filter)."""
    content_hash: str
    schema: _pa.Schema
    """The schema of the rows the parts give (the columns asked for)."""
    parts: tuple[Part, ...]
    files: tuple[DataFile, ...] = ()
    """The version's data files, which the parts share out."""

    def cut(self, parts: int) -> Split:
        """The same version cut into `parts` parts instead (never more than
        its files), with no engine call: what a reader that learns its
        parallelism late (Ray's `get_read_tasks`) asks for."""
        if parts < 1:
            from . import BadInput

            raise BadInput(f"parts is a number of parts, 1 or more, not {parts}")
        like = self.parts[0]
        return replace(self, parts=parts_of(like, self.files, parts))


def parts_of(like: Part, files: Sequence[DataFile], parts: int) -> tuple[Part, ...]:
    """`files` in `parts` balanced parts (`balanced`), each a `Part` of the
    repository, table, version, columns and filter of `like`."""
    return tuple(
        replace(
            like,
            files=tuple(f.index for f in p),
            rows=sum(f.rows for f in p),
            bytes=sum(f.bytes for f in p),
        )
        for p in balanced(files, parts)
    )


def deal(files: Sequence[DataFile], parts: int) -> list[list[DataFile]]:
    """Deals `files`, in the order given, to `parts` parts: each to the part
    with the fewest rows so far (the first such part on a tie). Plain data
    in, plain data out: the same files and count give the same parts on
    every process."""
    dealt: list[list[DataFile]] = [[] for _ in range(max(parts, 1))]
    rows = [0] * len(dealt)
    for f in files:
        i = min(range(len(dealt)), key=lambda p: (rows[p], p))
        dealt[i].append(f)
        rows[i] += f.rows
    return dealt


def balanced(files: Sequence[DataFile], parts: int) -> list[list[DataFile]]:
    """`files` in at most `parts` parts of rows as even as dealing allows
    (largest files first), each part's files in the version's order; no
    part is empty unless the version has no file (then one part, empty)."""
    n = max(1, min(parts, len(files)))
    largest_first = sorted(files, key=lambda f: (-f.rows, f.index))
    return [sorted(p, key=lambda f: f.index) for p in deal(largest_first, n)]
