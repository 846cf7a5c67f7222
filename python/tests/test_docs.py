"""Every code example of README.md and docs/ runs, as written, on the
tables it says (issue 41, item 19).

Each fenced block is preceded by a marker naming where it runs:

- `<!-- example: generated -->`: a project whose `sales` table is the one
  `tablepin generate` writes (keyed by `id`, four versions, `train-v1` on
  the second), beside the files the README's commands name;
- `<!-- example: lab -->`: the lab's repository (`tablepin lab`) with
  `tablepin tag train-v1 week-51`, as docs/python.md says;
- `<!-- example: empty -->`: an empty folder;
- `<!-- example: bucket -->`: the generated files, with the README's
  bucket URLs pointing into the S3 test server;
- `<!-- example: project -->`: the project's own folder;
- `<!-- example: not run: WHY -->`: a block that is not run, and why.

A block without a marker fails, so a new example cannot go untested. In a
shell block, `[...]` is an optional part (left out), a comment after two
spaces is dropped, and commands written side by side (three spaces apart)
run one after another; the block runs under `bash -e`. The Python blocks
of one file run in one namespace, in order, as a reader would type them.
"""

import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import BIN, cli, s3_location

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DOCS = ["README.md", "docs/python.md", "docs/json.md", "docs/distributed.md"]


def examples(path):
    """The fenced blocks of a Markdown file: (line, language, marker, code)."""
    lines = open(os.path.join(ROOT, path), encoding="utf-8").read().split("\n")
    out, i = [], 0
    while i < len(lines):
        m = re.match(r"^```(\w*)$", lines[i])
        if not m or not m.group(1):
            i += 1
            continue
        start, lang = i, m.group(1)
        marker = re.match(r"^<!-- example: (.*) -->$", lines[i - 1]) if i else None
        i += 1
        body = []
        while lines[i] != "```":
            body.append(lines[i])
            i += 1
        out.append((start + 1, lang, marker.group(1) if marker else None, "\n".join(body)))
        i += 1
    return out


ALL = [(path, *e) for path in DOCS for e in examples(path)]


def shell_script(code):
    """A shell block as a script: optional parts, comments and side-by-side
    commands resolved as the module's docs say."""
    out = []
    for line in code.split("\n"):
        if line.lstrip().startswith("#"):
            continue
        line = re.sub(r"\s{2,}#.*$", "", line)
        line = re.sub(r"\s*\[[^\]]*\]", "", line)
        out.extend(part for part in re.split(r"\s{3,}(?=tablepin )", line.strip()) if part)
    return "\n".join(out) + "\n"


def run_shell(code, cwd, env):
    script = shell_script(code)
    out = subprocess.run(["bash", "-e", "-c", script], cwd=cwd, env=env, capture_output=True, text=True)
    assert out.returncode == 0, f"{script}\nexit {out.returncode}\nstdout: {out.stdout[-2000:]}\nstderr: {out.stderr[-2000:]}"
    return out


def env_with_bin(**extra):
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([os.path.dirname(os.path.abspath(BIN)), os.path.dirname(sys.executable), env["PATH"]])
    env.pop("TABLEPIN_REPO", None)
    env.update(extra)
    return env


def generated(folder):
    """The README's project: a generated `sales` table (key `id`) in four
    versions, `train-v1` on the second, and the files its commands name."""
    folder.mkdir(parents=True, exist_ok=True)
    run = lambda *a: cli(folder, *a)
    run("init")
    run("generate", "--rows", "1000", "-o", "sales.csv")
    run("commit", "sales", "sales.csv", "--key", "id", "-m", "first load")
    for seed in (2, 3, 4):
        run("generate", "--rows", "1000", "--returns", "5", "--seed", str(seed), "-o", "later.csv")
        run("commit", "sales", "later.csv", "-m", f"late returns {seed}")
    run("tag", "train-v1", "main~2", "-m", "model A")
    run("generate", "--rows", "100", "--start", "1000", "-o", "week.parquet")
    run("generate", "--rows", "50", "--returns", "3", "--seed", "5", "-o", "fixes.csv")
    run("generate", "--rows", "10", "--start", "990", "-o", "gone.csv")
    text = open(folder / "sales.csv").read().split("\n")
    header = text[0].split(",")
    q = header.index("quantity")
    rows = [",".join(f"{v}.5" if i == q else v for i, v in enumerate(r.split(","))) for r in text[1:] if r]
    open(folder / "v2.csv", "w").write("\n".join([text[0], *rows]) + "\n")
    return folder


@pytest.fixture
def lab_world(lab_out, tmp_path):
    """A copy of the lab's repository with `train-v1` on week 51, as
    docs/python.md says."""
    shutil.copytree(lab_out / "repo", tmp_path / "lab-out" / "repo")
    repo = str(tmp_path / "lab-out" / "repo")
    cli(tmp_path, "--repo", repo, "tag", "train-v1", "week-51")
    return tmp_path, repo


def test_every_example_says_where_it_runs():
    assert len(ALL) > 15, ALL
    kinds = {"generated", "lab", "empty", "bucket", "project"}
    for path, line, lang, marker, _ in ALL:
        assert marker is not None, f"{path}:{line}: a ```{lang} block with no <!-- example: ... --> marker"
        assert marker in kinds or re.match(r"not run: \S", marker), f"{path}:{line}: unknown marker {marker!r}"


SHELL = [e for e in ALL if e[2] == "sh" and e[3] and not e[3].startswith("not run")]


@pytest.mark.parametrize("path,line,lang,marker,code", SHELL, ids=[f"{e[0]}:{e[1]}" for e in SHELL])
def test_a_shell_example_runs(path, line, lang, marker, code, tmp_path, request):
    if marker == "generated":
        run_shell(code, generated(tmp_path / "project"), env_with_bin())
    elif marker == "empty":
        run_shell(code, tmp_path, env_with_bin())
    elif marker == "project":
        run_shell(code, ROOT, env_with_bin())
    elif marker == "bucket":
        base = s3_location("docs")
        code = code.replace("s3://my-bucket/tables", base).replace("s3://bucket/", base + "/")
        run_shell(code, generated(tmp_path / "project"), env_with_bin(AWS_ALLOW_HTTP="true"))
    elif marker == "lab":
        cwd, repo = request.getfixturevalue("lab_world")
        base = None
        if "s3://" in code:
            base = s3_location("docs-lab")
            code = code.replace("s3://bucket/", base + "/")
        run_shell(code, cwd, env_with_bin(TABLEPIN_REPO=repo, AWS_ALLOW_HTTP="true"))
    else:
        pytest.fail(f"{path}:{line}: marker {marker!r}")


def python_blocks(path):
    return [e for e in ALL if e[0] == path and e[2] == "python"]


@pytest.mark.parametrize("path", [p for p in DOCS if python_blocks(p)])
def test_the_python_examples_run_in_order(path, tmp_path, request, monkeypatch):
    blocks = python_blocks(path)
    markers = {b[3] for b in blocks}
    assert len(markers) == 1, f"{path}: the Python examples of one file share one world: {markers}"
    marker = markers.pop()
    if marker == "lab":
        cwd, repo = request.getfixturevalue("lab_world")
        monkeypatch.setenv("TABLEPIN_REPO", repo)
    elif marker == "generated":
        cwd = generated(tmp_path / "project")
    else:
        pytest.fail(f"{path}: Python examples on {marker!r}")
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", (tmp_path / "mlruns").as_uri())
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    # Spark's Python workers run this Python, as in an activated venv.
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    # The one name the docs leave to the reader: their own training function.
    namespace = {"train": lambda rows, seed: None, "__name__": "docs"}
    for _, line, _, _, code in blocks:
        try:
            exec(compile(code, f"{path}:{line}", "exec"), namespace)
        except Exception as e:
            raise AssertionError(f"{path}:{line} failed: {type(e).__name__}: {e}") from e
    if path == "docs/python.md":
        # What the examples show is there to be seen.
        assert namespace["few"].num_rows > 0
        assert namespace["t"].num_rows > 0
