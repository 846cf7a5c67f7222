"""The JSON each command prints is the JSON docs/json.md describes, and the
Python types carry what the binding gives (issue 42: outputs kept once, and
a test that fails when a field is added on one side only).

Each command below runs with `--json` on a small generated repository; every
field of what it prints (at the top, and one level down where the docs
describe the inner objects) must be named in that command's row of
docs/json.md's table or in its shared shapes. Every field a Python type
has must be one the binding gives, and every field the binding gives must
reach the Python type or be listed as left out, with why; the binding's
fields are the command line's.
"""

import dataclasses
import os
import re

import pytest

import tablepin
from conftest import cli

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def documented():
    """docs/json.md: each command's row (command → the names in
    backquotes of its description), and the shared shapes' names."""
    text = open(os.path.join(ROOT, "docs", "json.md"), encoding="utf-8").read()
    rows, shared = {}, set()
    for line in text.split("\n"):
        m = re.match(r"^\| (`[^|]+`) \| (.*) \|$", line)
        if m:
            names = set(re.findall(r"`([^`]+)`", m.group(2)))
            for command in re.findall(r"`([^`]+)`", m.group(1)):
                rows[command] = names | {n.split(":")[0] for n in names}
    for paragraph in text.split("\n\n"):
        if paragraph.startswith("**"):
            shared |= set(re.findall(r"`([^`]+)`", paragraph))
    return rows, shared


def undocumented(command, value, rows, shared):
    """The fields of `value` (an object, or a list of them; and the
    objects right inside, where the docs name the field holding them)
    that `command`'s row of docs/json.md does not name."""
    names = rows[command] | shared
    objects = value if isinstance(value, list) else [value]
    missing = set()
    for obj in objects:
        for k, v in obj.items():
            if k not in names:
                missing.add(k)
            # An object the docs describe field by field (a plan, a
            # report), or a list of them; not a map by name (log's
            # tables), nor rows of data (named by their columns).
            if isinstance(v, dict) and k in {"plan", "report", "erased"}:
                inner = v
            elif isinstance(v, list) and v and isinstance(v[0], dict) and k != "rows":
                inner = v[0]
            else:
                inner = None
            if inner is not None:
                missing |= {f"{k}.{i}" for i in inner if i not in names}
    return missing


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    """Every reporting command's JSON, by its name in docs/json.md."""
    d = tmp_path_factory.mktemp("json")
    out = {}
    out["generate"] = cli(d, "generate", "--rows", "2000", "-o", "v1.parquet", "--json")
    cli(d, "generate", "--rows", "2000", "--returns", "50", "--seed", "2", "-o", "v2.parquet")
    out["init"] = cli(d, "init", "--json")
    out["commit"] = cli(d, "commit", "sales", "v1.parquet", "--key", "id", "--json")
    out["commit --dry-run"] = cli(d, "commit", "sales", "v2.parquet", "--key", "id", "--dry-run", "--json")
    out["tag NAME"] = cli(d, "tag", "train-v1", "--json")
    cli(d, "commit", "sales", "v2.parquet", "--key", "id")
    out["log"] = cli(d, "log", "--json")
    out["show"] = cli(d, "show", "HEAD", "--json")
    out["cat"] = cli(d, "cat", "HEAD", "sales", "--limit", "3", "--json")
    out["export"] = cli(d, "export", "HEAD", "sales", "-o", "out.parquet", "--json")
    out["diff"] = cli(d, "diff", "train-v1", "HEAD", "--json")
    out["sql"] = cli(d, "sql", "SELECT count(*) AS n FROM sales", "--json")
    out["tag --list"] = cli(d, "tag", "--list", "--json")
    out["verify"] = cli(d, "verify", "--json")
    out["gc --dry-run"] = cli(d, "gc", "--dry-run", "--json")
    out["restore"] = cli(d, "restore", "train-v1", "--json")
    out["compact"] = cli(d, "compact", "sales", "--json")
    out["upgrade --dry-run"] = cli(d, "upgrade", "--dry-run", "--json")
    out["upgrade"] = cli(d, "upgrade", "--json")
    return out


COMMANDS = [
    "generate", "init", "commit", "commit --dry-run", "tag NAME", "log", "show", "cat",
    "export", "diff", "sql", "tag --list", "verify", "gc --dry-run", "restore", "compact",
    "upgrade --dry-run", "upgrade",
]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_field_a_command_prints_is_documented(outputs, command):
    rows, shared = documented()
    assert command in rows, f"docs/json.md has no row for `{command}`"
    missing = undocumented(command, outputs[command], rows, shared)
    assert not missing, f"`{command} --json` prints {sorted(missing)}, which docs/json.md's row does not name"


def fields(cls):
    return {f.name for f in dataclasses.fields(cls)}


def one(value):
    """An output's object, or the first of a list of them."""
    return value[0] if isinstance(value, list) else value


@pytest.fixture(scope="module")
def binding(tmp_path_factory):
    """What the binding hands the Python types (Python dicts and lists, not
    JSON text), by method."""
    d = tmp_path_factory.mktemp("binding")
    cli(d, "generate", "--rows", "500", "-o", "v1.parquet")
    repo = tablepin.Repo.init(str(d))
    raw = repo._repo
    out = {"commit": raw.commit("sales", path=str(d / "v1.parquet"), mode="upsert", key=["id"], message="m")}
    out["log"] = raw.log("main", None, None)
    out["show"] = raw.show("main")
    repo.tag("t1")
    raw.commit("sales", path=str(d / "v1.parquet"), mode="delete", key=["id"], message="m2")
    out["refs"] = raw.refs("tag")
    out["restore"] = raw.restore("t1", None, "back", None)
    assert all(isinstance(v, (dict, list)) for v in out.values()), out
    return out


# Fields the binding gives that a Python type leaves out, on purpose.
LEFT_OUT = {
    # The bytes of the version record itself, a storage detail the command
    # line reports; a commit's cost is `change.bytes_new`.
    "commit": {"version_bytes"},
    "log": set(),
    "show": set(),
    # How many entries a ref's log holds: the command line's listing shows
    # it; a Python Ref names what it points at (`Repo.refs` lists them).
    "refs": {"entries"},
    "restore": set(),
}


@pytest.mark.parametrize(
    "method, cls, renamed, added",
    [
        ("commit", tablepin.Version, {}, set()),
        # Python names a version `version` wherever it is one, and turns
        # milliseconds into a datetime.
        ("log", tablepin.LogEntry, {"version": "id", "time": "time_ms"}, set()),
        ("show", tablepin.VersionInfo, {"time": "time_ms"}, set()),
        # A Ref says which kind it is, which the call that listed it knows.
        ("refs", tablepin.Ref, {"version": "target", "time": "time_ms"}, {"kind"}),
        # `from` is a keyword in Python.
        ("restore", tablepin.Restored, {"source": "from"}, set()),
    ],
)
def test_python_types_carry_what_the_binding_gives(binding, method, cls, renamed, added):
    value = binding[method]
    given = set(one(value).keys())
    python = {renamed.get(f, f) for f in fields(cls) if f not in added}
    assert python - given == set(), f"{cls.__name__} has fields the binding's {method} does not give"
    assert given - python == LEFT_OUT[method], f"the binding's {method} gives fields {cls.__name__} lacks"


def test_the_binding_gives_what_the_command_line_prints(outputs, binding):
    """One output type each: the binding's JSON is the command line's, but
    for times (milliseconds, not RFC 3339 text)."""
    commands = {"commit": "commit", "log": "log", "show": "show", "refs": "tag --list", "restore": "restore"}
    for method, command in commands.items():
        given = {k.replace("time_ms", "time") for k in one(binding[method])}
        assert given == set(one(outputs[command])), method
