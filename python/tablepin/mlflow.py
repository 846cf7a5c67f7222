"""The MLflow record of what a model trained on, and the proof later.

`log_input` (inside an active run) records the tag, the version id, the
table's content hash and row count, the repository, the code's git commit and
the seed, as run tags under `tablepin.<table>.`, and logs an MLflow dataset
whose digest is the content hash and whose source names the repository,
version and table. `load_input(run_id)` reads back exactly those rows and
checks them against the recorded hash. MLflow is imported only when used;
`mlflow-skinny` is enough.
"""

from __future__ import annotations

import os
import subprocess
import urllib.parse
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

import tablepin
from tablepin import Damaged, Error, NotFound, Repo

PREFIX = "tablepin."
SOURCE_TYPE = "tablepin"


class RowsErased(Error):
    """The version a run recorded was rewritten by an erasure since: the
    rows are not the ones the model saw. Names the audit record(s) and both
    content hashes; `load_input(..., allow_erased=True)` reads the rows as
    they are now."""

    def __init__(self, message: str, audit: tuple[int, ...], recorded_hash: str, current_hash: str):
        super().__init__(message)
        self.audit = audit
        self.recorded_hash = recorded_hash
        self.current_hash = current_hash


@dataclass(frozen=True)
class InputRecord:
    """What `log_input` recorded for one table."""

    table: str
    rev: str
    tag: str | None
    version: str
    content_hash: str
    rows: int
    repository: str
    git_commit: str | None
    seed: int | None
    context: str


def public_location(location: str) -> str:
    """A repository location without credentials: no user or password in
    a URL, no query string (where signed URLs keep their secrets)."""
    if "://" not in location:
        return os.path.abspath(location)
    u = urllib.parse.urlsplit(location)
    host = u.hostname or ""
    if u.port:
        host = f"{host}:{u.port}"
    return urllib.parse.urlunsplit((u.scheme, host, u.path, "", ""))


def _git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    sha = out.stdout.strip()
    return sha if out.returncode == 0 and len(sha) >= 40 else None


def _source_class() -> type:
    from mlflow.data.dataset_source import DatasetSource

    class TablepinSource(DatasetSource):
        """An MLflow dataset source: one table at one tablepin version."""

        def __init__(self, repository: str, version: str, table: str, rev: str):
            self.repository = repository
            self.version = version
            self.table = table
            self.rev = rev

        @staticmethod
        def _get_source_type() -> str:
            return SOURCE_TYPE

        def load(self) -> pa.Table:
            return Repo(self.repository).read(self.table, rev=self.version)

        @staticmethod
        def _can_resolve(raw_source: Any) -> bool:
            return False

        @classmethod
        def _resolve(cls, raw_source: Any) -> TablepinSource:
            raise NotImplementedError

        def to_dict(self) -> dict[str, Any]:
            return {"repository": self.repository, "version": self.version, "table": self.table, "rev": self.rev}

        @classmethod
        def from_dict(cls, d: dict[Any, Any]) -> TablepinSource:
            return cls(d["repository"], d["version"], d["table"], d["rev"])

    return TablepinSource


def log_input(
    repo: Repo,
    table: str,
    rev: str = "main",
    context: str = "training",
    seed: int | None = None,
) -> InputRecord:
    """Records, in the active MLflow run, the version of `table` that `rev`
    names and the proof of its rows (see the module's docs). The arguments
    come in `Repo.read`'s order: the table, then the revision."""
    import mlflow
    from mlflow.data.meta_dataset import MetaDataset

    run = mlflow.active_run()
    if run is None:
        raise Error("no active MLflow run: call log_input inside `with mlflow.start_run():`")
    info = repo.show(rev)
    if table not in info.tables:
        raise NotFound(
            f"version {info.version[:12]} (from '{rev}') has no table '{table}' "
            f"(tables: {', '.join(info.tables) or 'none'})"
        )
    t = info.tables[table]
    tag = rev if any(r.name == rev for r in repo.tags()) else None
    location = public_location(repo.location)
    tags = run.data.tags if run.data else {}
    git = tags.get("mlflow.source.git.commit") or _git_commit()
    record = InputRecord(
        table, rev, tag, info.version, t.content_hash, t.rows, location, git, seed, context
    )
    p = f"{PREFIX}{table}."
    out = {
        p + "rev": rev,
        p + "version": info.version,
        p + "content_hash": t.content_hash,
        p + "rows": str(t.rows),
        p + "repository": location,
        p + "context": context,
    }
    if tag is not None:
        out[p + "tag"] = tag
    if seed is not None:
        out[p + "seed"] = str(seed)
    if git is not None:
        out[p + "git_commit"] = git
        if "mlflow.source.git.commit" not in tags:
            out["mlflow.source.git.commit"] = git
    mlflow.set_tags(out)
    source = _source_class()(location, info.version, table, rev)
    name = f"{table}@{tag or info.version[:12]}"
    mlflow.log_input(MetaDataset(source, name=name, digest=t.content_hash), context=context)
    return record


def recorded(run_id: str) -> dict[str, InputRecord]:
    """The inputs `log_input` recorded in a run, by table."""
    from mlflow.tracking import MlflowClient

    tags = MlflowClient().get_run(run_id).data.tags
    tables = sorted({k[len(PREFIX):].rsplit(".", 1)[0] for k in tags if k.startswith(PREFIX) and k.endswith(".version")})
    out = {}
    for table in tables:
        p = f"{PREFIX}{table}."
        out[table] = InputRecord(
            table, tags[p + "rev"], tags.get(p + "tag"), tags[p + "version"], tags[p + "content_hash"],
            int(tags[p + "rows"]), tags[p + "repository"], tags.get(p + "git_commit"),
            int(tags[p + "seed"]) if p + "seed" in tags else None, tags.get(p + "context", "training"),
        )
    return out


def load_input(
    run_id: str,
    table: str | None = None,
    allow_erased: bool = False,
    repo: Repo | None = None,
) -> pa.Table:
    """Reads back exactly the rows a run recorded and checks them against
    the recorded content hash.

    If an erasure rewrote the version since, raises `RowsErased` naming the
    audit record and both hashes, unless `allow_erased` (then the rows as
    they are now come back). Any other mismatch raises `Damaged`; a missing
    or damaged blob raises `Damaged` naming it. Never a silent read.
    """
    inputs = recorded(run_id)
    if not inputs:
        raise NotFound(f"run {run_id} recorded no tablepin input (log_input was not called in it)")
    if table is None:
        if len(inputs) > 1:
            raise tablepin.BadInput(
                f"run {run_id} recorded several tables ({', '.join(inputs)}); name one with table="
            )
        table = next(iter(inputs))
    if table not in inputs:
        raise NotFound(f"run {run_id} recorded no table '{table}' (it recorded: {', '.join(inputs)})")
    rec = inputs[table]
    repo = repo or Repo(rec.repository)
    scan = repo.scan(table, rev=rec.version)
    rows = scan.read_all()
    if scan.replaced is not None:
        audits = tuple(e.audit for e in scan.replaced.erasures)
        if not allow_erased:
            raise RowsErased(
                f"the version run {run_id} trained on ({rec.version[:12]}, table '{table}', content hash "
                f"{rec.content_hash}) was rewritten by erasure (audit record {', '.join(map(str, audits))}) "
                f"into {scan.version[:12]} (content hash {scan.content_hash}); pass allow_erased=True "
                "to read the rows as they are now",
                audits, rec.content_hash, scan.content_hash,
            )
        return rows
    got = tablepin.content_hash(rows)
    if got != rec.content_hash or len(rows) != rec.rows:
        raise Damaged(
            f"table '{table}' at version {rec.version[:12]} reads back with content hash {got} and "
            f"{len(rows)} rows, but run {run_id} recorded {rec.content_hash} and {rec.rows} rows"
        )
    return rows

