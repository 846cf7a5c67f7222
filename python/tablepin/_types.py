"""The small typed objects tablepin's calls return.

Each is a frozen dataclass built from the engine's JSON (the shapes
`tablepin --json` prints, see docs/json.md); times are timezone-aware
`datetime`s in UTC. Objects with more detail than their fields show keep the
whole answer in `raw`.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from typing import Any


def _time(ms: int | None) -> _dt.datetime | None:
    if ms is None:
        return None
    return _dt.datetime.fromtimestamp(ms / 1000, tz=_dt.timezone.utc)


@dataclass(frozen=True)
class Change:
    """What a commit changed in one table, and which checks saw it."""

    rows_added: int
    rows_changed: int
    rows_deleted: int
    bytes_new: int
    blobs_new: int
    checks: tuple[str, ...]
    """The checks that fired, of "rows", "schema", "files", "content"."""

    @classmethod
    def _from(cls, d: dict[str, Any]) -> Change:
        checks = d.get("checks", {})
        fired = tuple(c for c in ("rows", "schema", "files", "content") if checks.get(c))
        return cls(
            d["rows_added"], d["rows_changed"], d["rows_deleted"], d["bytes_new"], d["blobs_new"], fired
        )


@dataclass(frozen=True)
class Version:
    """A commit that landed: the new version of one table on a branch."""

    version: str
    parent: str | None
    branch: str
    table: str
    rows: int
    content_hash: str
    change: Change
    empty: bool = False
    """Nothing changed: no version was made, `version` is the branch head."""

    @classmethod
    def _from(cls, d: dict[str, Any]) -> Version:
        return cls(
            d["version"], d.get("parent"), d["branch"], d["table"], d["rows"],
            d["content_hash"], Change._from(d["change"]), d.get("empty", False),
        )


@dataclass(frozen=True)
class TableState:
    """A table's rows and content hash in a version."""

    rows: int
    content_hash: str


@dataclass(frozen=True)
class LogEntry:
    """One version of a branch's history."""

    version: str
    parents: tuple[str, ...]
    time: _dt.datetime
    author: str
    message: str
    tables: dict[str, TableState]
    changes: dict[str, Change]
    expired: bool
    """Retention expired it: only its record of rows and hashes is left."""
    replaces: str | None
    """The version an erasure replaced with this one."""

    @classmethod
    def _from(cls, d: dict[str, Any]) -> LogEntry:
        return cls(
            d["id"], tuple(d["parents"]), _time(d["time_ms"]), d["author"], d["message"],
            {t: TableState(r, h) for t, (r, h) in d["tables"].items()},
            {t: Change._from(c) for t, c in d["changes"].items()},
            d["expired"], d.get("replaces"),
        )


@dataclass(frozen=True)
class Column:
    """A column of a table."""

    name: str
    type: str
    nullable: bool


@dataclass(frozen=True)
class TableInfo:
    """A table as a version holds it."""

    table: str
    rows: int
    content_hash: str
    key: tuple[str, ...]
    columns: tuple[Column, ...]
    files: int
    bytes: int


@dataclass(frozen=True)
class Erasure:
    """An erasure that replaced a version (see `Repo.audit`)."""

    audit: int
    """The audit record's number."""
    time: _dt.datetime
    reason: str
    new: str


@dataclass(frozen=True)
class Replaced:
    """A version an erasure replaced, and the version that stands for it now."""

    old: str
    new: str
    erasures: tuple[Erasure, ...]

    @classmethod
    def _from(cls, d: dict[str, Any] | None) -> Replaced | None:
        if d is None:
            return None
        return cls(
            d["old"], d["new"],
            tuple(Erasure(e["audit"], _time(e["time_ms"]), e["reason"], e["new"]) for e in d["erasures"]),
        )


@dataclass(frozen=True)
class VersionInfo:
    """A version as `show` reports it."""

    version: str
    parents: tuple[str, ...]
    time: _dt.datetime
    author: str
    message: str
    tables: dict[str, TableInfo]
    changes: dict[str, Change]
    replaces: str | None
    replaced: Replaced | None
    """Set when the revision asked for named a version an erasure replaced."""

    @classmethod
    def _from(cls, d: dict[str, Any]) -> VersionInfo:
        tables = {
            t["table"]: TableInfo(
                t["table"], t["rows"], t["content_hash"], tuple(t["key"]),
                tuple(Column(c["name"], c["type"], c["nullable"]) for c in t["columns"]),
                t["files"], t["bytes"],
            )
            for t in d["tables"]
        }
        return cls(
            d["version"], tuple(d["parents"]), _time(d["time_ms"]), d["author"], d["message"],
            tables, {t: Change._from(c) for t, c in d["changes"].items()}, d.get("replaces"),
            Replaced._from(d.get("replaced")),
        )


@dataclass(frozen=True)
class Ref:
    """A branch or tag."""

    kind: str
    name: str
    version: str
    time: _dt.datetime
    message: str
    note: str | None
    """What moved a tag since it was made (an erasure), if anything."""

    @classmethod
    def _from(cls, kind: str, d: dict[str, Any]) -> Ref:
        return cls(kind, d["name"], d["target"], _time(d["time_ms"]), d["message"], d.get("note"))


@dataclass(frozen=True)
class VerifyReport:
    """What `verify` checked and found; `ok` when nothing is damaged."""

    blobs: int
    bytes: int
    refs: int
    versions: int
    snapshots: int
    rows_hashed: int
    problems: tuple[str, ...]
    leftovers: tuple[str, ...]
    seconds: float

    @property
    def ok(self) -> bool:
        """No problem was found."""
        return not self.problems

    @classmethod
    def _from(cls, d: dict[str, Any]) -> VerifyReport:
        return cls(
            d["blobs"], d["bytes"], d["refs"], d["versions"], d["snapshots"], d["rows_hashed"],
            tuple(d["problems"]), tuple(d["leftovers"]), d["seconds"],
        )


@dataclass(frozen=True)
class GcReport:
    """What retention deleted."""

    blobs_deleted: int
    bytes_freed: int
    blobs_spared: int
    tombstones: int
    leftovers_deleted: int
    raw: dict[str, Any] = field(repr=False)


@dataclass(frozen=True)
class EraseReport:
    """What an erasure did: the audit record it wrote."""

    audit: int
    """The audit record's number."""
    blobs_deleted: int
    bytes_written: int
    seconds: float
    raw: dict[str, Any] = field(repr=False)


@dataclass(frozen=True)
class ErasedCheck:
    """What `verify_erased` found: `ok` when no stored data file holds a
    row an erasure removed."""

    records: int
    """Audit records checked."""
    files: int
    rows: int
    holders: tuple[tuple[str, int], ...]
    """Data files still holding an erased row, with how many."""
    cache_removed: int = 0
    """Copies in this machine's blob cache (a repository in a bucket) of
    blobs the repository no longer holds, removed by the check."""

    @property
    def ok(self) -> bool:
        """No data file holds an erased row."""
        return not self.holders

    @classmethod
    def _from(cls, d: dict[str, Any]) -> ErasedCheck:
        return cls(
            d["records"], d["files"], d["rows"], tuple((b, n) for b, n in d["holders"]), d["cache_removed"]
        )


@dataclass(frozen=True)
class TableDiff:
    """What differs in one table between two versions (`Repo.diff`)."""

    table: str
    key: tuple[str, ...]
    """The key rows were matched by; empty: compared as multisets of rows."""
    old: str
    new: str
    old_rows: int | None
    """Rows in the older version; None: it has no such table."""
    new_rows: int | None
    old_content_hash: str | None
    new_content_hash: str | None
    added: int
    removed: int
    modified: int
    modified_by_column: dict[str, int]
    columns_added: tuple[str, ...]
    columns_dropped: tuple[str, ...]
    columns_retyped: tuple[str, ...]
    files_read: int
    """Data files read; those both versions see alike are not."""
    files_shared: int
    rows: Any = field(repr=False)
    """A pyarrow.Table: `diff_type` (added, removed, modified), then
    `from_C` and `to_C` for each column both versions have."""

    @classmethod
    def _from(cls, d: dict[str, Any], rows: Any) -> TableDiff:
        c, cols, st = d["counts"], d["columns"], d["stats"]
        return cls(
            d["table"], tuple(d["key"]), d["old"], d["new"], d.get("old_rows"), d.get("new_rows"),
            d.get("old_content_hash"), d.get("new_content_hash"), c["added"], c["removed"],
            c["modified"], dict(c["modified_by_column"]), tuple(cols["added"]),
            tuple(cols["dropped"]), tuple(cols["retyped"]), st["files_read"], st["files_shared"], rows,
        )


@dataclass(frozen=True)
class DeltaView:
    """What `Repo.export_delta` wrote: the folder, its Delta versions (each
    `(delta_version, version, rows, content_hash)`), and how many data files
    it names, hard-linked to the repository's blobs, copied, or (without
    deletion vectors) written again without their hidden rows."""

    dir: str
    versions: tuple[tuple[int, str, int, str], ...]
    files: int
    linked: int
    copied: int
    bytes_copied: int
    rewritten: int
    bytes_rewritten: int

    @classmethod
    def _from(cls, d: dict[str, Any]) -> DeltaView:
        versions = tuple((v["delta_version"], v["version"], v["rows"], v["content_hash"]) for v in d["delta_versions"])
        return cls(
            d["dir"], versions, d["files"], d["linked"], d["copied"], d["bytes_copied"],
            d["rewritten"], d["bytes_rewritten"],
        )


@dataclass(frozen=True)
class Restored:
    """What `Repo.restore` did: the new version (None when the branch had
    those tables already) and what changed, by table."""

    source: str
    version: str | None
    parent: str | None
    branch: str
    changes: dict[str, Change]

    @classmethod
    def _from(cls, d: dict[str, Any]) -> Restored:
        return cls(
            d["from"], d.get("version"), d.get("parent"), d["branch"],
            {t: Change._from(c) for t, c in d["changes"].items()},
        )


@dataclass(frozen=True)
class TableMerge:
    """What a merge did to one table either side changed."""

    table: str
    how: str
    """"theirs" (taken as the merged side has it), "merged", "dropped" or
    "conflicts"."""
    rows: int | None
    content_hash: str | None
    change: Change
    conflicts: int
    """Keys both sides changed differently."""
    same: int
    """Keys both sides changed alike (taken once)."""

    @classmethod
    def _from(cls, d: dict[str, Any]) -> TableMerge:
        return cls(
            d["table"], d["how"], d.get("rows"), d.get("content_hash"), Change._from(d["change"]),
            d["conflicts"], d["same"],
        )


@dataclass(frozen=True)
class Merged:
    """What `Repo.merge` or `Repo.revert` did. `outcome` is "merged",
    "fast-forward", "up-to-date" or "conflicts" (the branch is untouched;
    `conflicts` holds, by table, a pyarrow.Table with one row per key: the
    key, `conflict`, `columns`, then base_C, ours_C and theirs_C for each
    other column C)."""

    source: str
    into: str
    base: str | None
    ours: str
    theirs: str
    outcome: str
    version: str | None
    """The branch's new head; None when up to date or in conflict."""
    tables: dict[str, TableMerge]
    conflicts: dict[str, Any] = field(repr=False)

    @classmethod
    def _from(cls, d: dict[str, Any], conflicts: dict[str, Any]) -> Merged:
        return cls(
            d["source"], d["into"], d.get("base"), d["ours"], d["theirs"], d["outcome"],
            d.get("version"), {t["table"]: TableMerge._from(t) for t in d["tables"]}, conflicts,
        )


@dataclass(frozen=True)
class AuditVersion:
    """A version an erasure replaced, and its replacement."""

    old: str
    new: str
    rows_removed: int
    old_content_hash: str
    new_content_hash: str


@dataclass(frozen=True)
class AuditMovedRef:
    """A ref an erasure moved onto a replacement (`kind` "branch" or "tag")."""

    kind: str
    name: str
    old: str
    new: str
    old_content_hash: str
    new_content_hash: str


@dataclass(frozen=True)
class AuditRecord:
    """One erasure's audit record, as `tablepin audit` prints it: when, by
    whom, why, which versions it replaced and which refs it moved. The
    predicate is kept only as its BLAKE3, the erased rows only as keyed
    fingerprints (`fingerprint`, as stored)."""

    seq: int
    time: _dt.datetime
    author: str
    table: str
    reason: str
    predicate_hash: str
    versions: tuple[AuditVersion, ...]
    moved_refs: tuple[AuditMovedRef, ...]
    blobs_deleted: int
    bytes_written: int
    fingerprint: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def _from(cls, d: dict[str, Any]) -> AuditRecord:
        return cls(
            d["seq"], _time(d["time_ms"]), d["author"], d["table"], d["reason"], d["predicate_hash"],
            tuple(AuditVersion(**v) for v in d["versions"]),
            tuple(AuditMovedRef(**r) for r in d["moved_refs"]),
            d["blobs_deleted"], d["bytes_written"], d.get("fingerprint", {}),
        )
