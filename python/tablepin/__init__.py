"""tablepin: every version of a training table, kept for the rows that changed.

Read any version into pyarrow, pandas or polars, commit from any of them, and
prove what a model trained on::

    import tablepin

    repo = tablepin.Repo()                      # the repository of this folder
    train = repo.read("sales", rev="train-v1")  # a pyarrow.Table, exactly as tagged
    print(repo.show("train-v1").tables["sales"].content_hash)

The engine is the same Rust crate as the `tablepin` command; rows cross into
Python through the Arrow C stream interface without copying a buffer, and
every call that does I/O releases the GIL.
"""

from __future__ import annotations

import datetime as _dt
import os as _os
from typing import Any, Iterator, Sequence

import pyarrow as _pa

from . import _tablepin
from ._tablepin import (
    BadInput,
    Conflict,
    Damaged,
    Error,
    InternalError,
    NotFound,
    StorageError,
)
from ._parts import DataFile, Part, Split, parts_of as _parts_of
from ._types import (
    AuditMovedRef,
    AuditRecord,
    AuditVersion,
    Change,
    Column,
    EraseReport,
    ErasedCheck,
    Erasure,
    GcReport,
    LogEntry,
    Merged,
    Ref,
    Replaced,
    Restored,
    DeltaView,
    TableDiff,
    TableMerge,
    TableInfo,
    TableState,
    Version,
    VersionInfo,
    VerifyReport,
)

__version__: str = _tablepin.__version__

__all__ = [
    "Repo", "Scan", "GcPlan", "ErasePlan", "content_hash",
    "Error", "BadInput", "NotFound", "Conflict", "Damaged", "StorageError", "InternalError",
    "Version", "Change", "LogEntry", "TableState", "VersionInfo", "TableInfo", "Column",
    "Ref", "Replaced", "Erasure", "TableDiff", "Restored", "DeltaView", "VerifyReport", "ErasedCheck", "GcReport", "EraseReport",
    "AuditRecord", "AuditVersion", "AuditMovedRef", "DataFile", "Part", "Split", "Merged", "TableMerge",
]


def _arrow_stream(data: Any) -> Any:
    """Anything that holds rows, as an object exporting an Arrow C stream:
    a pyarrow Table, RecordBatch or RecordBatchReader, a pandas or polars
    DataFrame, or any object with `__arrow_c_stream__`."""
    mod = type(data).__module__.split(".")[0]
    if mod == "pandas":
        # Through pyarrow, without the index (a RangeIndex carries no
        # rows' data) and without pandas' own schema metadata.
        t = _pa.Table.from_pandas(data, preserve_index=False)
        return t.replace_schema_metadata(None)
    if isinstance(data, _pa.RecordBatch):
        return _pa.Table.from_batches([data])
    if hasattr(data, "__arrow_c_stream__"):
        return data
    raise BadInput(
        f"cannot commit a {type(data).__name__}: give a pyarrow Table or RecordBatchReader, "
        "a pandas or polars DataFrame, or an object with __arrow_c_stream__"
    )


def content_hash(data: Any, schema: _pa.Schema | None = None) -> str:
    """The content hash (rowhash-v1) of any rows, equal to what `show`
    reports for a version holding the same rows: a training job can prove
    what it read without a repository at hand.

    Readers change types on the way: `to_pandas()` turns nullable integers
    into floats, polars has no timestamp in seconds, pandas infers a
    decimal's precision from its values. Give the table's `schema`
    (`Scan.schema`, `Repo.schema(table, rev)`) and the rows are read as
    that table holds them first, as a commit reads its input (a value that
    would change is refused, named with its column and row), so any frame
    holding the version's values gives the version's hash."""
    if schema is None:
        return _tablepin.content_hash(_arrow_stream(data))
    return _tablepin.content_hash(_arrow_stream(data), schema)


def _ms(d: _dt.timedelta | float | int | None) -> int | None:
    if d is None:
        return None
    seconds = d.total_seconds() if isinstance(d, _dt.timedelta) else float(d)
    return int(seconds * 1000)


class Scan:
    """The rows of one table at one version, as a stream of record batches.

    It exports the Arrow C stream interface (`__arrow_c_stream__`), so
    `pyarrow.RecordBatchReader.from_stream(scan)`, `polars.DataFrame(scan)`
    and DuckDB (`duckdb.sql("select ... from scan")`) take it without a
    copy. (`polars.from_arrow(scan)` gives one struct Series, as for any
    bare Arrow stream; `.struct.unnest()` makes it the DataFrame.) A stream
    is read once.
    """

    def __init__(self, reader: _pa.RecordBatchReader, meta: dict[str, Any], handle: Any):
        self._reader = reader
        self._handle = handle
        self.rev: str = meta["rev"]
        """The revision asked for."""
        self.version: str = meta["version"]
        """The version read."""
        self.rows: int = meta["rows"]
        """The table's rows in that version (before any filter or limit)."""
        self.content_hash: str = meta["content_hash"]
        """The table's content hash in that version (before any filter)."""
        self.key: tuple[str, ...] = tuple(meta["key"])
        self.replaced: Replaced | None = Replaced._from(meta["replaced"])
        """Set when `rev` named a version an erasure replaced since."""
        self.files: tuple[DataFile, ...] = tuple(
            DataFile(i, f["rows"], f["bytes"]) for i, f in enumerate(meta["files"])
        )
        """The version's data files (all of them, whatever the scan reads)."""

    @property
    def stats(self) -> dict[str, int]:
        """What the scan read so far (all of it once every batch was
        read): `files` read and `files_skipped` (their key range or
        statistics ruled the filter out), `bytes` fetched, `rows`
        returned, `rows_decoded`."""
        return self._handle.stats()

    @property
    def schema(self) -> _pa.Schema:
        """The schema of the batches (the columns asked for)."""
        return self._reader.schema

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        return self._reader.__arrow_c_stream__(requested_schema)

    def __iter__(self) -> Iterator[_pa.RecordBatch]:
        """The record batches, in order (key order for a keyed table), each
        read when asked for."""
        try:
            yield from self._reader
        except _pa.ArrowException:
            self._handle.raise_failure()
            raise

    def read_all(self) -> _pa.Table:
        """Every remaining batch as one pyarrow Table."""
        try:
            return self._reader.read_all()
        except _pa.ArrowException:
            self._handle.raise_failure()
            raise

    def __repr__(self) -> str:
        return f"Scan(version={self.version[:12]!r}, rows={self.rows}, columns={self.schema.names})"


class GcPlan:
    """What retention would keep and delete (nothing is deleted yet).
    `apply()` deletes it, once."""

    def __init__(self, plan: Any):
        self._plan = plan
        raw = plan.raw
        self.raw: dict[str, Any] = raw
        self.versions_kept: int = len(raw["versions_kept"])
        self.versions_expired: int = len(raw["versions_expired"])
        self.blobs_kept: int = raw["blobs_kept"]
        self.bytes_kept: int = raw["bytes_kept"]
        self.blobs_to_delete: int = len(raw["blobs_deleted"])
        self.bytes_to_free: int = raw["bytes_freed"]
        self.tags_deleted: tuple[str, ...] = tuple(raw["tags_deleted"])

    def apply(self) -> GcReport:
        """Deletes what the plan found: the expired versions' blobs no kept
        version needs."""
        r = self._plan.apply()
        return GcReport(
            r["blobs_deleted"], r["bytes_freed"], r["blobs_spared"], r["tombstones"],
            r["leftovers_deleted"], r,
        )

    def __repr__(self) -> str:
        return (
            f"GcPlan(versions_kept={self.versions_kept}, versions_expired={self.versions_expired}, "
            f"bytes_kept={self.bytes_kept}, bytes_to_free={self.bytes_to_free})"
        )


class ErasePlan:
    """What erasing rows would do, from the live table and every kept
    version (nothing is changed yet). `apply()` does it, once."""

    def __init__(self, plan: Any):
        self._plan = plan
        raw = plan.raw
        self.raw: dict[str, Any] = raw
        self.table: str = raw["table"]
        self.reason: str = raw["reason"]
        self.rows_removed: int = raw["rows_removed"]
        self.files: int = len(raw["files"])
        self.versions: int = len(raw["versions"])
        self.bytes_to_write: int = raw["bytes_to_write"]
        self.tags: dict[str, tuple[str, str]] = {n: (o, w) for n, o, w in raw["tags"]}
        """Tags that move: name -> (old version, new version)."""

    @property
    def empty(self) -> bool:
        """No stored row matches (and no interrupted erasure is left to finish)."""
        return self.rows_removed == 0 and not self.raw.get("resumes")

    def apply(self) -> EraseReport:
        """Erases the rows physically and writes the audit record."""
        r = self._plan.apply()
        a = r["audit"]
        return EraseReport(a["seq"], a["blobs_deleted"], a["bytes_written"], r["seconds"], r)

    def __repr__(self) -> str:
        return (
            f"ErasePlan(table={self.table!r}, rows_removed={self.rows_removed}, files={self.files}, "
            f"versions={self.versions}, bytes_to_write={self.bytes_to_write})"
        )


class Repo:
    """A tablepin repository.

    `Repo()` finds it as the command does: `TABLEPIN_REPO`, else a
    `.tablepin` folder in the current folder or a parent. `Repo(path)`
    opens the one at `path` (a project folder holding `.tablepin`, or the
    repository folder itself).
    """

    def __init__(self, path_or_url: str | _os.PathLike[str] | None = None):
        if path_or_url is None:
            path_or_url = _os.environ.get("TABLEPIN_REPO") or None
        self._repo = _tablepin._Repo.open(None if path_or_url is None else _os.fspath(path_or_url))

    @classmethod
    def init(cls, path_or_url: str | _os.PathLike[str] | None = None) -> Repo:
        """Creates a repository: at `path_or_url`, or in `.tablepin` of the
        current folder (as `tablepin init`)."""
        at = _os.fspath(path_or_url) if path_or_url is not None else _os.path.join(_os.getcwd(), ".tablepin")
        self = cls.__new__(cls)
        self._repo = _tablepin._Repo.init(at)
        return self

    @property
    def location(self) -> str:
        """Where the repository is (its folder, or URL)."""
        return self._repo.location

    def __repr__(self) -> str:
        return f"Repo({self.location!r})"

    # Reads

    def scan(
        self,
        table: str,
        rev: str = "main",
        columns: Sequence[str] | None = None,
        filter: str | None = None,
        limit: int | None = None,
        files: Sequence[int] | None = None,
    ) -> Scan:
        """The rows of `table` at `rev` (a branch, tag, version id or prefix,
        `HEAD`, `main~3`, a date) as a stream of record batches.

        `columns` picks columns (only those, the key and the filter's are
        decoded); `filter` keeps the rows an SQL condition over the columns
        matches (`"Country = 'France' AND Quantity < 0"`), evaluated by the
        engine; `limit` keeps the first rows (key order for a keyed table).
        `files` reads only those data files of the version (positions in
        `Scan.files`), one at a time, unmerged and so in no key order: a
        task's part of a distributed read (see `split`).

        The scan streams: each batch is read when asked for, the files
        whose key range or statistics rule the filter out are never
        fetched (nor the pages, where the filter is on one column), and
        memory holds the files being read, not the table. `stats` says
        what it read.
        """
        return self._scan(table, rev, columns, filter, limit, files, whole=False)

    def _scan(self, table, rev, columns, filter, limit, files, whole: bool) -> Scan:
        if limit is not None and limit < 0:
            raise BadInput(f"limit is a number of rows, 0 or more, not {limit}")
        reader, meta, handle = self._repo.scan(
            table,
            rev,
            list(columns) if columns is not None else None,
            filter,
            limit,
            whole,
            list(files) if files is not None else None,
        )
        return Scan(reader, meta, handle)

    def schema(self, table: str, rev: str = "main") -> _pa.Schema:
        """The schema of `table` at `rev` (reads no rows): give it to
        `content_hash` to hash rows read back through pandas or polars as
        the version holds them."""
        return self.scan(table, rev, limit=0).schema

    def read(
        self,
        table: str,
        rev: str = "main",
        columns: Sequence[str] | None = None,
        filter: str | None = None,
        limit: int | None = None,
        files: Sequence[int] | None = None,
    ) -> _pa.Table:
        """The rows of `table` at `rev` as a pyarrow Table (see `scan`):
        read whole, a keyed table's files merged on every core."""
        return self._scan(table, rev, columns, filter, limit, files, whole=True).read_all()

    def split(
        self,
        table: str,
        rev: str = "main",
        parts: int | None = None,
        columns: Sequence[str] | None = None,
        filter: str | None = None,
    ) -> Split:
        """`table` at `rev` cut into `parts` parts (default: one per data
        file; never more than the files) of rows as even as whole files
        allow, for tasks on other processes or machines: each part names
        the version (not `rev`), so every task reads what was planned, and
        reading every part once reads each row of the version exactly once.
        Reads no rows."""
        if parts is not None and parts < 1:
            raise BadInput(f"parts is a number of parts, 1 or more, not {parts}")
        head = self.scan(table, rev, columns, filter, limit=0)
        cols = tuple(columns) if columns is not None else None
        like = Part(self.location, table, head.version, (), 0, 0, cols, filter)
        files = tuple(head.files)
        cut = _parts_of(like, files, parts if parts is not None else len(files))
        return Split(rev, head.version, head.rows, head.content_hash, head.schema, cut, files)

    def requests(self) -> dict[str, int]:
        """The requests this `Repo` has made of its store so far, as the
        CLI's `--stats` counts them: `get`, `head`, `put`, `list`,
        `delete`, `copy`, `bytes_read`, `bytes_written` and the rest
        (docs/json.md)."""
        return self._repo.requests()

    # Writes

    def commit(
        self,
        table: str,
        data: Any,
        mode: str = "overwrite",
        key: Sequence[str] | str | None = None,
        message: str = "",
        branch: str | None = None,
        *,
        allow_schema_change: bool = False,
        cast: bool | None = None,
        create_branch: bool = False,
        window_rows: int | None = None,
        allow_empty: bool = False,
    ) -> Version:
        """Commits rows to `table`: a pyarrow Table or RecordBatchReader, a
        pandas or polars DataFrame, any object with `__arrow_c_stream__`, or
        the path of a Parquet, Arrow IPC or CSV file.

        `mode` is "overwrite" (the rows are the table now), "append",
        "upsert" or "delete" (by key). `key` names the key columns on the
        first commit. Only the rows that changed are stored.

        A file of more than `window_rows` rows (2,097,152 by default; 0 reads
        it whole) is committed a window at a time, as `tablepin commit`
        does, so memory holds a window rather than the table: a keyed table
        streams when the file's rows are in key order, an unkeyed one when
        appended; other files are committed whole, with the same result.

        A commit that changes nothing makes no version (as git refuses an
        empty commit): the answer's `empty` is True and its `version` is the
        branch head. `allow_empty=True` makes one anyway.

        `cast` reads input columns as the table's types where they differ,
        when no value changes (a value that would change is refused, named
        with its column and row). It is on by default for a pandas or
        polars DataFrame, whose conversions change types (nullable integers
        read back by `to_pandas()` are floats, a decimal's precision is
        inferred from its values, polars has no timestamp in seconds), so a
        frame read from a version commits back as it is; off for Arrow
        data and files, whose types are the caller's.
        """
        if cast is None:
            cast = type(data).__module__.split(".")[0] in ("pandas", "polars")
        if isinstance(key, str):
            key = [key]
        keys = list(key) if key is not None else None
        if window_rows is not None and window_rows < 0:
            raise BadInput(f"window_rows is a number of rows, 0 or more, not {window_rows}")
        if isinstance(data, (str, _os.PathLike)):
            rows, path = None, _os.fspath(data)
        elif window_rows is not None:
            raise BadInput("window_rows applies to a file's path; rows given in memory are committed whole")
        else:
            rows, path = _arrow_stream(data), None
        out = self._repo.commit(
            table, data=rows, path=path, mode=mode, key=keys, message=message,
            branch=branch, allow_schema_change=allow_schema_change, cast=cast,
            create_branch=create_branch, window_rows=window_rows,
            allow_empty=allow_empty,
        )
        return Version._from(out)

    def stage(
        self,
        table: str,
        data: Any,
        key: Sequence[str] | str | None = None,
        branch: str | None = None,
        mode: str = "append",
    ) -> str:
        """Writes rows as data files of `table` for a later commit by another
        process, and returns their description: a JSON string, small and
        picklable, to send to the process that commits (`commit_staged`).

        For jobs whose workers each produce part of a version (Spark, Ray,
        a pool of processes): each worker stages its rows, the driver commits
        every description as one version. The rows take the table's columns
        at the head of `branch` and are sorted by its key (`key` names it for
        a new table), which must be unique among them. Until a commit takes
        them the files belong to no version: a job that dies leaves them to
        `gc`. With `mode="delete"` the rows need only the key columns: their
        keys are staged, and `commit_staged(..., mode="delete")` removes the
        rows with those keys."""
        if isinstance(key, str):
            key = [key]
        keys = list(key) if key is not None else None
        return self._repo.stage(table, _arrow_stream(data), key=keys, branch=branch, mode=mode)

    def commit_staged(
        self,
        table: str,
        staged: Sequence[str],
        mode: str = "append",
        message: str = "",
        branch: str | None = None,
    ) -> Version:
        """Commits the data files workers staged (`stage`'s descriptions) as
        one version: "append" adds their rows, "upsert" replaces the rows
        with their keys, "overwrite" makes them the table, "delete" removes
        the rows whose keys were staged (`stage(..., mode="delete")`). The counts and
        the content hash are those a commit of the same rows gives. The same
        descriptions committed again land nothing (the answer's `empty` is
        True): a driver that retries makes one version. A staged file that
        `gc` removed before the commit raises NotFound, and nothing lands."""
        if isinstance(staged, str):
            raise BadInput("staged is a list of the descriptions stage returned, not one string")
        out = self._repo.commit(
            table, staged=list(staged), mode=mode, message=message, branch=branch
        )
        return Version._from(out)

    # Comparing and restoring

    def diff(self, old: str, new: str = "main", table: str | None = None) -> list[TableDiff]:
        """What differs between two revisions, per table: keys added, removed
        and modified (unkeyed: rows only one side has), with the differing
        rows as a pyarrow.Table. Reads only what the versions do not share."""
        return [
            TableDiff._from(meta, rows.read_all())
            for meta, rows in self._repo.diff(old, new, table)
        ]

    def sql(self, query: str) -> _pa.Table:
        """A read-only SQL query (DataFusion) over any table at any version:
        `sales` is main's head, `"sales@train-v1"` the table at a tag (any
        revision), so two versions join like two tables. Only the columns the
        query reads are decoded."""
        reader, _meta = self._repo.sql(query)
        return reader.read_all()

    def restore(
        self, rev: str, table: str | None = None, message: str | None = None, branch: str = "main"
    ) -> Restored:
        """A new version on `branch` whose tables (or `table` only) are those
        of `rev`; no data is copied."""
        return Restored._from(self._repo.restore(rev, table, message, branch))

    def merge(
        self,
        source: str,
        into: str = "main",
        strategy: str | None = None,
        tables: dict[str, str] | None = None,
        resolved: dict[str, Any] | None = None,
        message: str | None = None,
    ) -> Merged:
        """Merges `source` (a branch or any revision) into the branch `into`:
        a three-way merge by key from their nearest common ancestor (a
        fast-forward when `into` is behind). Keys both sides changed
        differently are conflicts: with no `strategy` ("ours" or "theirs",
        or per table in `tables`) and no `resolved` rows for the table (the
        rows each conflicting key should have), the result lists them in
        `conflicts` (pyarrow Tables) and the branch is untouched."""
        return self._merge(source, into, strategy, tables, resolved, message, False)

    def revert(
        self,
        rev: str,
        branch: str = "main",
        strategy: str | None = None,
        tables: dict[str, str] | None = None,
        resolved: dict[str, Any] | None = None,
        message: str | None = None,
    ) -> Merged:
        """A new version on `branch` that undoes the version `rev` (later
        changes stay); conflicts as `merge` reports them."""
        return self._merge(rev, branch, strategy, tables, resolved, message, True)

    def _merge(self, source, into, strategy, tables, resolved, message, revert) -> Merged:
        streams = {t: _arrow_stream(d) for t, d in (resolved or {}).items()}
        meta, conflicts = self._repo.merge(source, into, strategy, tables, streams, message, revert)
        return Merged._from(meta, {t: r.read_all() for t, r in conflicts})

    def export_delta(
        self,
        rev: str,
        table: str,
        path: str | _os.PathLike[str],
        history: bool = False,
        deletion_vectors: bool = True,
    ) -> DeltaView:
        """Writes a Delta Lake table of `table` at `rev` into the new folder
        `path` (or under a bucket URL, `s3://…`, where nothing is yet), for
        polars (`pl.read_delta`), delta-rs and Spark: its data files are the
        repository's own (hard-linked; copied into a bucket), its deletion
        vectors Delta's. With `history`, one Delta version per version along
        `rev`'s first parents, oldest first (`version=n` reads the n-th).

        `deletion_vectors=False` writes a view for readers without deletion
        vectors (deltalake's `to_pyarrow_table()` and `to_pandas()`): each
        file a deletion vector touches is written again without the rows it
        hides, the rest linked as always."""
        return DeltaView._from(
            self._repo.export_delta(rev, table, _os.fspath(path), history, deletion_vectors)
        )

    # History and refs

    def log(self, branch: str | None = None, max: int | None = None, table: str | None = None) -> list[LogEntry]:
        """A branch's versions, newest first; `table` keeps those that changed it."""
        out = self._repo.log(branch or "main", max, table)
        return [LogEntry._from(e) for e in out]

    def show(self, rev: str = "main") -> VersionInfo:
        """A version: its record and each table's rows, content hash and columns."""
        return VersionInfo._from(self._repo.show(rev))

    def resolve(self, rev: str) -> str:
        """The full version id `rev` names."""
        return self._repo.resolve(rev)

    def tags(self) -> list[Ref]:
        """Every tag, with the version it names and its message."""
        return [Ref._from("tag", r) for r in self._repo.refs("tag")]

    def branches(self) -> list[Ref]:
        """Every branch, with its head."""
        return [Ref._from("branch", r) for r in self._repo.refs("branch")]

    def _ref(self, kind: str, name: str) -> Ref:
        for r in self._repo.refs(kind):
            if r["name"] == name:
                return Ref._from(kind, r)
        raise InternalError(f"{kind} '{name}' was made but is not listed")

    def tag(self, name: str, rev: str = "main", message: str = "") -> Ref:
        """Tags the version `rev` names; a tag never moves (but for an erasure)."""
        self._repo.create_ref("tag", name, rev, message)
        return self._ref("tag", name)

    def delete_tag(self, name: str) -> str:
        """Deletes a tag; the version it named (which retention may then expire)."""
        return self._repo.delete_ref("tag", name, False)

    def branch(self, name: str, rev: str = "main") -> Ref:
        """Creates a branch at `rev`."""
        self._repo.create_ref("branch", name, rev, "")
        return self._ref("branch", name)

    def delete_branch(self, name: str, force: bool = False) -> str:
        """Deletes a branch (main, or the only one, needs `force`)."""
        return self._repo.delete_ref("branch", name, force)

    def restore_branch(self, name: str) -> Ref:
        """Restores a deleted branch where its head was (until gc expires
        that version), as `tablepin branch --restore` does."""
        self._repo.restore_ref("branch", name)
        return self._ref("branch", name)

    # Checks, retention, erasure

    def verify(self) -> VerifyReport:
        """Reads and checks every blob, ref, version and content hash."""
        return VerifyReport._from(self._repo.verify())

    def upgrade(self, dry_run: bool = False) -> dict[str, Any]:
        """Brings the repository to this tablepin's format (4: an outboard
        of 2 KiB chunk groups beside every blob of 1 MiB or more, for reads
        by verified range; outboards format 3 wrote are kept):
        writes the missing outboards, then the format number. Returns what
        was done (`from`, `to`, `outboards_written`, `bytes_read`), or with
        `dry_run` what would be (`from`, `to`, `blobs`, `bytes`), changing
        nothing."""
        return self._repo.upgrade(dry_run)

    def verify_erased(self) -> ErasedCheck:
        """Checks that no stored data file holds a row an erasure removed."""
        return ErasedCheck._from(self._repo.verify_erased())

    def gc(
        self,
        keep_last: int | None = None,
        keep_within: _dt.timedelta | float | None = None,
        keep_tags: bool = True,
        grace: _dt.timedelta | float = _dt.timedelta(hours=1),
        sole_writer: bool = False,
    ) -> GcPlan:
        """Plans retention: keep the last `keep_last` versions of each
        branch, those younger than `keep_within`, and (by default) every
        tagged version. Nothing is deleted until `.apply()`.

        Unreferenced blobs younger than `grace` are spared (a commit may be
        writing them); a grace under 10 minutes needs `sole_writer=True`,
        the caller's word that no other process writes meanwhile."""
        return GcPlan(self._repo.gc_plan(keep_last, _ms(keep_within), keep_tags, _ms(grace), sole_writer))

    def erase(self, table: str, where: str, reason: str) -> ErasePlan:
        """Plans erasing the rows of `table` that `where` (an SQL condition)
        matches, from the live table and every kept version. Nothing is
        changed until `.apply()`."""
        return ErasePlan(self._repo.erase_plan(table, where, reason))

    def audit(self) -> list[AuditRecord]:
        """The erasures' audit records, oldest first (times as UTC
        `datetime`s, as everywhere in this package)."""
        return [AuditRecord._from(r) for r in self._repo.audit()]
