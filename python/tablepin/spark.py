"""Any version read by Spark, and a Spark DataFrame committed as one version,
through Spark 4's Python Data Source API.

    import tablepin.spark
    tablepin.spark.register(spark)      # format("tablepin"), filter pushdown on

    df = spark.read.format("tablepin").options(repo="s3://bucket/repo",
             table="sales", rev="train-v1").load()
    df.write.format("tablepin").options(repo=..., table="sales",
             key="id").mode("append").save()

    # or, raising tablepin's own errors (NotFound for a wrong revision)
    # on the driver before Spark plans anything:
    df = tablepin.spark.read(spark, "s3://bucket/repo", "sales", "train-v1")
    v = tablepin.spark.write(df, "s3://bucket/repo", "sales", mode="upsert")

A read is one Spark partition per part of the version (`Repo.split`: whole
data files, rows balanced; option `parts` sets how many), each read on an
executor through the `tablepin` package and verified against its blobs'
names. The version is resolved once, when the read is planned, so every
partition reads the same rows. Comparisons of a column with a value
(`=`, `<`, `<=`, `>`, `>=`, `IN`, `IS NULL`, `IS NOT NULL`, `NOT`) are
pushed to the engine, which skips the data files and pages that cannot
match.

A write stages each task's rows as data files (`Repo.stage`) and the
driver commits every task's files as one version when all tasks succeeded
(`Repo.commit_staged`); a failed or killed job leaves no version, only
files `gc` removes. Spark's `mode("overwrite")` overwrites the table;
otherwise option `mode` is "append" (the default), "upsert" or "delete"
(the rows with the DataFrame's keys go).

Requires the `spark` extra (`pip install 'tablepin[spark]'`) and Java 17.
"""

from __future__ import annotations

import datetime as _dt
import os as _os
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Sequence

import pyarrow as _pa
from pyspark.sql import DataFrame as _DataFrame
from pyspark.sql import SparkSession as _SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    WriterCommitMessage,
)
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
from pyspark.sql.types import StructType

from . import BadInput, Repo, VersionInfo
from ._parts import Part, location_of as _location

__all__ = ["TablepinDataSource", "register", "read", "write"]

# Rows a write task stages at once: its memory holds this many rows.
_STAGE_ROWS = 500_000


def _option(options: Any, name: str, default: str | None = None) -> str:
    value = options.get(name, default)
    if value is None:
        raise BadInput(f"the tablepin data source needs the option '{name}' (.option(\"{name}\", ...))")
    return str(value)


def _sql_value(v: Any) -> str | None:
    """A Python value as an SQL literal the engine's filter takes, or None
    where it has no safe spelling (then Spark keeps the filter)."""
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return repr(v) if v == v and abs(v) != float("inf") else None
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    if isinstance(v, _dt.datetime) and v.tzinfo is None:
        return f"TIMESTAMP '{v.isoformat(sep=' ')}'"
    if isinstance(v, _dt.date) and not isinstance(v, _dt.datetime):
        return f"DATE '{v.isoformat()}'"
    return None


def _sql_filter(f: Any) -> str | None:
    """A pushed-down Spark filter as an SQL condition, or None."""
    if len(getattr(f, "attribute", ())) != 1 and not isinstance(f, Not):
        return None
    if isinstance(f, Not):
        inner = _sql_filter(f.child)
        return None if inner is None else f"NOT ({inner})"
    column = '"' + f.attribute[0].replace('"', '""') + '"'
    if isinstance(f, IsNull):
        return f"{column} IS NULL"
    if isinstance(f, IsNotNull):
        return f"{column} IS NOT NULL"
    if isinstance(f, In):
        values = [_sql_value(v) for v in f.value]
        return None if not values or None in values else f"{column} IN ({', '.join(values)})"  # type: ignore[arg-type]
    ops = {EqualTo: "=", GreaterThan: ">", GreaterThanOrEqual: ">=", LessThan: "<", LessThanOrEqual: "<="}
    op = ops.get(type(f))
    value = _sql_value(f.value) if op else None
    return None if value is None else f"{column} {op} {value}"


@dataclass
class _Partition(InputPartition):
    part: Part


class _Reader(DataSourceReader):
    def __init__(self, options: Any, schema: StructType):
        self.location = _option(options, "repo")
        self.table = _option(options, "table")
        self.version = _option(options, "version")
        self.parts = int(options["parts"]) if "parts" in options else None
        self.arrow_schema = to_arrow_schema(schema)
        self.filters: list[str] = []

    def pushFilters(self, filters: list[Any]) -> Iterable[Any]:
        for f in filters:
            sql = _sql_filter(f)
            if sql is None:
                yield f
            else:
                self.filters.append(sql)

    def partitions(self) -> Sequence[InputPartition]:
        where = " AND ".join(f"({s})" for s in self.filters) or None
        split = Repo(self.location).split(self.table, self.version, self.parts, filter=where)
        return [_Partition(p) for p in split.parts]

    def read(self, partition: InputPartition) -> Iterator[_pa.RecordBatch]:
        assert isinstance(partition, _Partition)
        for batch in partition.part.batches():
            # Spark's types (timestamps in microseconds): the schema it
            # planned with.
            yield batch.cast(self.arrow_schema) if batch.schema != self.arrow_schema else batch


@dataclass
class _Staged(WriterCommitMessage):
    staged: list[str]


class _Writer(DataSourceArrowWriter):
    def __init__(self, options: Any, overwrite: bool):
        self.location = _option(options, "repo")
        self.table = _option(options, "table")
        mode = "overwrite" if overwrite else options.get("mode", "append")
        if mode not in ("append", "upsert", "overwrite", "delete"):
            raise BadInput(
                f"option 'mode' is 'append', 'upsert' or 'delete' (or Spark's mode(\"overwrite\")), not '{mode}'"
            )
        self.mode = mode
        # A delete stages the rows' keys; the other modes stage rows.
        self.stage_mode = "delete" if mode == "delete" else "append"
        key = options.get("key")
        self.key = [k.strip() for k in key.split(",")] if key else None
        self.message = options.get("message", "")
        self.branch = options.get("branch")

    def write(self, iterator: Iterator[_pa.RecordBatch]) -> _Staged:
        repo = Repo(self.location)
        staged: list[str] = []
        held: list[_pa.RecordBatch] = []
        for batch in iterator:
            held.append(batch)
            if sum(b.num_rows for b in held) >= _STAGE_ROWS:
                staged.append(repo.stage(self.table, _pa.Table.from_batches(held), self.key, self.branch, self.stage_mode))
                held = []
        if any(b.num_rows for b in held):
            staged.append(repo.stage(self.table, _pa.Table.from_batches(held), self.key, self.branch, self.stage_mode))
        return _Staged(staged)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        staged = [s for m in messages if isinstance(m, _Staged) for s in m.staged]
        Repo(self.location).commit_staged(
            self.table, staged, mode=self.mode, message=self.message, branch=self.branch
        )

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        # Nothing to undo: staged files belong to no version, and gc
        # removes them after its grace.
        return None


class TablepinDataSource(DataSource):
    """`spark.read.format("tablepin")` and `df.write.format("tablepin")`
    (see the module's text). Options: `repo`, `table`, and for a read
    `rev` (default "main") or `version` and `parts`; for a write `mode`,
    `key` (comma-separated, for a new table), `message`, `branch`."""

    @classmethod
    def name(cls) -> str:
        return "tablepin"

    def _resolved(self) -> None:
        """Pins the revision to its version, once, where the read is
        planned: every partition then reads that version."""
        if "version" not in self.options:
            repo = Repo(_option(self.options, "repo"))
            self.options["version"] = repo.resolve(self.options.get("rev", "main"))

    def schema(self) -> StructType:
        self._resolved()
        repo = Repo(_option(self.options, "repo"))
        arrow = repo.schema(_option(self.options, "table"), self.options["version"])
        return from_arrow_schema(arrow, prefer_timestamp_ntz=True)

    def reader(self, schema: StructType) -> DataSourceReader:
        self._resolved()
        return _Reader(self.options, schema)

    def writer(self, schema: StructType, overwrite: bool) -> _Writer:
        return _Writer(self.options, overwrite)


def register(spark: _SparkSession) -> None:
    """Makes `format("tablepin")` known to `spark`, and turns on the
    filter pushdown of Python data sources
    (`spark.sql.python.filterPushdown.enabled`), which its reader uses:
    Spark refuses a reader that can take filters while it is off."""
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    spark.dataSource.register(TablepinDataSource)



def read(
    spark: _SparkSession,
    repo: Repo | str | _os.PathLike[str],
    table: str,
    rev: str = "main",
    parts: int | None = None,
) -> _DataFrame:
    """`table` at `rev` as a Spark DataFrame. The revision is resolved here,
    on the driver, so a wrong one raises `tablepin.NotFound` naming it."""
    opened = repo if isinstance(repo, Repo) else Repo(repo)
    version = opened.resolve(rev)
    opened.schema(table, version)  # a missing table is NotFound here too
    register(spark)
    reader = spark.read.format("tablepin").option("repo", opened.location).option("table", table)
    reader = reader.option("version", version)
    if parts is not None:
        reader = reader.option("parts", str(parts))
    return reader.load()


def write(
    df: _DataFrame,
    repo: Repo | str | _os.PathLike[str],
    table: str,
    *,
    mode: str = "append",
    key: Sequence[str] | str | None = None,
    message: str = "",
    branch: str | None = None,
) -> VersionInfo:
    """Commits the rows of `df` to `table` as one version ("append",
    "upsert" or "overwrite"), staged by Spark's tasks and landed by one
    commit (which runs in Spark's Python worker); returns the branch's
    head after it."""
    location = _location(repo)
    register(df.sparkSession)
    w = df.write.format("tablepin").option("repo", location).option("table", table)
    if key is not None:
        w = w.option("key", key if isinstance(key, str) else ",".join(key))
    if branch is not None:
        w = w.option("branch", branch)
    w = w.option("message", message)
    if mode == "overwrite":
        w.mode("overwrite").save()
    else:
        w.option("mode", mode).mode("append").save()
    return Repo(location).show(branch or "main")
