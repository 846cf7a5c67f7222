"""Type stubs of the extension module (the engine behind a thin binding;
use the `tablepin` package's classes, not these)."""

from typing import Any

import pyarrow as pa

__version__: str

class Error(Exception):
    """What the error names, each None where it names none."""

    table: str | None
    version: str | None
    rev: str | None
    ref: str | None
    path: str | None
    blob: str | None
    column: str | None
    row: int | None
    key: str | None

class BadInput(Error, ValueError): ...
class NotFound(Error, LookupError): ...
class Conflict(Error): ...
class Damaged(Error): ...
class StorageError(Error, OSError): ...
class InternalError(Error, RuntimeError): ...

class _GcPlan:
    raw: dict[str, Any]
    def apply(self) -> dict[str, Any]: ...

class _ErasePlan:
    raw: dict[str, Any]
    def apply(self) -> dict[str, Any]: ...

class _ScanHandle:
    def stats(self) -> dict[str, Any]: ...
    def raise_failure(self) -> None: ...

class _Repo:
    @staticmethod
    def open(location: str | None = None) -> _Repo: ...
    @staticmethod
    def init(location: str) -> _Repo: ...
    @property
    def location(self) -> str: ...
    def scan(
        self,
        table: str,
        rev: str,
        columns: list[str] | None = None,
        filter: str | None = None,
        limit: int | None = None,
        whole: bool = False,
        files: list[int] | None = None,
    ) -> tuple[pa.RecordBatchReader, dict[str, Any], _ScanHandle]: ...
    def requests(self) -> dict[str, Any]: ...
    def commit(
        self,
        table: str,
        *,
        data: Any | None = None,
        path: str | None = None,
        staged: list[str] | None = None,
        mode: str = "overwrite",
        key: list[str] | None = None,
        message: str = "",
        branch: str | None = None,
        allow_schema_change: bool = False,
        cast: bool = False,
        create_branch: bool = False,
        window_rows: int | None = None,
        allow_empty: bool = False,
    ) -> dict[str, Any]: ...
    def stage(
        self,
        table: str,
        data: Any,
        *,
        key: list[str] | None = None,
        branch: str | None = None,
        mode: str = "append",
    ) -> str: ...
    def diff(
        self, old: str, new: str, table: str | None = None
    ) -> list[tuple[dict[str, Any], pa.RecordBatchReader]]: ...
    def sql(self, query: str) -> tuple[pa.RecordBatchReader, dict[str, Any]]: ...
    def restore(
        self, rev: str, table: str | None = None, message: str | None = None, branch: str | None = None
    ) -> dict[str, Any]: ...
    def merge(
        self,
        source: str,
        into: str | None = None,
        strategy: str | None = None,
        tables: dict[str, str] | None = None,
        resolved: dict[str, Any] | None = None,
        message: str | None = None,
        revert: bool = False,
    ) -> tuple[dict[str, Any], list[tuple[str, pa.RecordBatchReader]]]: ...
    def export_delta(
        self, rev: str, table: str, path: str, history: bool = False, deletion_vectors: bool = True
    ) -> dict[str, Any]: ...
    def log(self, branch: str, max: int | None = None, table: str | None = None) -> list[dict[str, Any]]: ...
    def show(self, rev: str) -> dict[str, Any]: ...
    def refs(self, kind: str) -> list[dict[str, Any]]: ...
    def create_ref(self, kind: str, name: str, rev: str, message: str) -> str: ...
    def delete_ref(self, kind: str, name: str, force: bool) -> str: ...
    def restore_ref(self, kind: str, name: str) -> str: ...
    def resolve(self, rev: str) -> str: ...
    def verify(self) -> dict[str, Any]: ...
    def verify_erased(self) -> dict[str, Any]: ...
    def audit(self) -> list[dict[str, Any]]: ...
    def gc_plan(
        self,
        keep_last: int | None,
        keep_within_ms: int | None,
        keep_tags: bool,
        grace_ms: int,
        sole_writer: bool = False,
    ) -> _GcPlan: ...
    def erase_plan(self, table: str, predicate: str, reason: str) -> _ErasePlan: ...

def content_hash(data: Any, schema: Any = None) -> str: ...
