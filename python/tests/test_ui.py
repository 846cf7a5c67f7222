"""`tablepin ui`: the local web page of a repository. Its server over HTTP
(read-only, loopback names only, errors as one sentence), and the page in
headless Chromium on the lab's repository, every figure it shows checked
against the command that reports it."""

import http.client
import json
import re
import subprocess

import pyarrow.parquet as pq
import pytest

import browser
from conftest import BIN, cli


class Served:
    """A `tablepin ui` process and the address it printed."""

    def __init__(self, repo):
        self.proc = subprocess.Popen([BIN, "--repo", str(repo), "ui"], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        m = re.search(r"at (http://127\.0\.0\.1:(\d+)/) \(read-only", line)
        if not m:
            self.close()
            raise AssertionError(f"tablepin ui printed {line!r}; stderr: {self.proc.stderr.read()}")
        self.url, self.port = m.group(1), int(m.group(2))

    def get(self, path, method="GET", host=None):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        c.putrequest(method, path, skip_host=True)
        c.putheader("Host", host or f"127.0.0.1:{self.port}")
        c.endheaders()
        r = c.getresponse()
        body = r.read()
        c.close()
        return r, body

    def json(self, path):
        r, body = self.get(path)
        assert r.status == 200, body
        return json.loads(body)

    def close(self):
        browser.stop(self.proc)


@pytest.fixture
def small(tmp_path):
    """A small repository with a branch merged back into main."""
    import pyarrow as pa
    import pyarrow.csv  # noqa: F401

    def commit(rows, *extra):
        path = tmp_path / "t.parquet"
        pq.write_table(pa.table({"id": [r[0] for r in rows], "v": [r[1] for r in rows]}), path)
        cli(tmp_path, "commit", "t", str(path), "--key", "id", *extra)

    cli(tmp_path, "init")
    commit([(i, f"a{i}") for i in range(10)], "-m", "first")
    cli(tmp_path, "branch", "side")
    commit([(i, f"b{i}" if i < 3 else f"a{i}") for i in range(10)], "-m", "side change", "--branch", "side")
    commit([(i, f"a{i}") for i in range(12)], "-m", "two more")
    cli(tmp_path, "merge", "side", "-m", "merge side")
    cli(tmp_path, "tag", "v1")
    served = Served(tmp_path / ".tablepin")
    yield tmp_path, served
    served.close()


def test_the_server_answers_what_the_commands_report_and_refuses_the_rest(small):
    folder, s = small
    h = s.json("/api/history")
    log = cli(folder, "--json", "log", "--graph")
    assert [v["id"] for v in h["versions"]] == [e["id"] for e in log]
    assert [b["name"] for b in h["branches"]] == ["main", "side"]
    assert [t["name"] for t in h["tags"]] == ["v1"]
    lanes = {v["message"]: v["lane"] for v in h["versions"]}
    assert lanes == {"merge side": 0, "two more": 0, "side change": 1, "first": 0}
    merge = next(v for v in h["versions"] if v["message"] == "merge side")
    assert len(merge["parents"]) == 2

    assert s.json("/api/version?rev=v1") == cli(folder, "--json", "show", "v1")
    d = s.json("/api/diff?old=main~1&new=main&limit=2")
    want = cli(folder, "--json", "diff", "main~1", "main", "--stat")["tables"][0]
    assert d["tables"][0]["counts"] == want["counts"] == {"added": 0, "removed": 0, "modified": 3, "modified_by_column": {"v": 3}}
    assert (d["total"], d["columns"], d["key"]) == (3, ["id", "v"], ["id"])
    assert [r["to_id"] for r in d["rows"]] == [0, 1]
    d = s.json("/api/diff?old=main~1&new=main&limit=2&offset=2")
    assert [r["to_id"] for r in d["rows"]] == [2]
    plan = cli(folder, "--json", "gc", "--dry-run", "--keep-last", "1")["plan"]
    preview = s.json("/api/retention?keep_last=1")
    assert preview.pop("now") and plan.pop("now")  # when each was asked
    assert preview == plan and plan["versions_expired"]
    assert s.json("/api/audit") == []

    # The page's own files, with a policy that lets it load nothing else.
    r, page = s.get("/")
    assert r.status == 200 and b"<html" in page
    assert "default-src 'none'" in r.getheader("Content-Security-Policy")
    for asset in ["/", "/app.js", "/app.css", "/favicon.svg"]:
        r, body = s.get(asset)
        assert r.status == 200, asset
        assert not re.search(rb"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}/", body.replace(b"http://www.w3.org/2000/svg", b"")), asset

    # Refusals: one sentence, with the status a browser understands.
    for path, method, host, status, says in [
        ("/api/history", "POST", None, 405, "the page is read-only: POST is not served"),
        ("/api/history", "DELETE", None, 405, "read-only"),
        ("/api/history", "GET", "evil.example", 403, "not evil.example"),
        ("/api/version?rev=nope", "GET", None, 404, "nope"),
        ("/api/diff?old=main&new=main&limit=0", "GET", None, 400, "limit must be 1 to 1000"),
        ("/api/diff?old=main&new=main&table=other", "GET", None, 404, "other"),
        ("/.tablepin/refs", "GET", None, 404, "there is no page at"),
    ]:
        r, body = s.get(path, method, host)
        assert r.status == status, (path, method, body)
        error = json.loads(body)["error"]
        assert says in error and "\n" not in error, (path, error)
    # Nothing was written: the repository is as it was.
    assert cli(folder, "--json", "log", "--graph") == log


def test_a_port_in_use_is_named_with_the_way_out(small):
    folder, s = small
    out = cli(folder, "ui", "--port", str(s.port), ok=False)
    assert out.returncode != 0
    assert f"cannot listen on 127.0.0.1:{s.port}" in out.stderr and "--port" in out.stderr


def figures(page, selector):
    return page.evaluate(f"""Object.fromEntries([...document.querySelectorAll('{selector} [data-field]')]
      .filter(e => e.dataset.value !== undefined).map(e => [e.dataset.field, Number(e.dataset.value)]))""")


def press_enter_on(page, selector):
    page.evaluate(f"document.querySelector({selector!r}).focus()")
    page.press("Enter", "Enter", 13)


def set_input(page, selector, text):
    """Replaces an input's text by typing, as a person would."""
    page.evaluate(f"(() => {{ const e = document.querySelector({selector!r}); e.value = ''; e.focus(); }})()")
    page.type(text)


def test_the_page_shows_the_lab_s_history_diff_retention_and_audit(lab_out, chromium, tmp_path):
    repo = lab_out / "repo"
    page = chromium
    s = Served(repo)
    try:
        run = lambda *a: cli(tmp_path, "--repo", str(repo), "--json", *a)  # noqa: E731
        log, tags = run("log"), run("tag", "--list")
        assert (len(log), len(tags)) == (110, 8)
        page.open(s.url)
        page.wait_until("document.getElementById('nversions').textContent !== '…'")
        assert page.evaluate("document.getElementById('nversions').textContent") == "110"
        assert page.evaluate("document.getElementById('ntags').textContent") == "8"
        shown = page.evaluate("[...document.querySelectorAll('#versions tr[data-version]')].map(r => r.dataset.version)")
        assert shown == [e["id"] for e in log]
        assert page.evaluate("document.querySelectorAll('#graph circle').length") == 110
        assert page.evaluate("document.querySelectorAll('#graph circle.tagged').length") == 8

        # A version, chosen with the keyboard from its tag: its tables as
        # `show` reports them.
        press_enter_on(page, '#refs button[data-ref="week-51"]')
        want = run("show", "week-51")
        page.wait_until(f"document.getElementById('version-id').textContent === {want['version']!r}")
        got = figures(page, '#version-tables tr[data-table="sales"]')
        assert got == {"rows": want["tables"][0]["rows"], "bytes": want["tables"][0]["bytes"]}
        assert page.evaluate("document.querySelector('#version-tables [data-field=content_hash]').textContent") \
            == want["tables"][0]["content_hash"]

        # The diff of week-51 against main: the counts `diff --stat`
        # reports, paged 100 rows at a time.
        stat = run("diff", "week-51", "main", "--stat")["tables"][0]["counts"]
        assert (stat["added"], stat["modified"]) == (557_096, 911)
        set_input(page, "#diff-old", "week-51")
        set_input(page, "#diff-new", "main")
        page.press("Enter", "Enter", 13)
        total = stat["added"] + stat["removed"] + stat["modified"]
        page.wait_until("document.querySelector('#diff-tables [data-field=added]') && "
                        f"document.getElementById('diff-range').dataset.total === '{total}'", timeout=120)
        got = figures(page, "#diff-tables")
        assert (got["added"], got["removed"], got["modified"]) == (stat["added"], stat["removed"], stat["modified"])
        assert page.evaluate("document.querySelectorAll('#diff-rows tbody tr').length") == 100
        first = page.evaluate("document.querySelector('#diff-rows tbody tr').textContent")
        press_enter_on(page, "#diff-next")
        page.wait_until("document.getElementById('diff-range').dataset.offset === '100'")
        assert page.evaluate("document.querySelectorAll('#diff-rows tbody tr').length") == 100
        assert page.evaluate("document.querySelector('#diff-rows tbody tr').textContent") != first

        # The modified rows, their changed cells marked: the columns whose
        # old and new values differ in the rows `diff -o` writes.
        out = tmp_path / "diff.parquet"
        run("diff", "week-51", "main", "-o", str(out))
        rows = [r for r in pq.read_table(out).to_pylist() if r["diff_type"] == "modified"][:100]
        page.evaluate("(() => { const k = document.getElementById('diff-kind'); k.value = 'modified'; "
                      "k.dispatchEvent(new Event('change')); })()")
        page.wait_until("document.getElementById('diff-range').dataset.total === '911'")
        columns = page.evaluate("[...document.querySelectorAll('#diff-rows thead th')].slice(1).map(t => t.textContent)")
        marked = page.evaluate("""[...document.querySelectorAll('#diff-rows tbody tr')].map(tr =>
          [...tr.children].slice(1).flatMap((td, i) => td.hasAttribute('data-changed') ? [i] : []))""")
        want_marked = [[i for i, c in enumerate(columns) if r["from_" + c] != r["to_" + c]] for r in rows]
        assert marked == want_marked and all(marked)

        # The retention preview: keep-last 4 with tags, and then 10, as
        # `gc --dry-run` reports them.
        for last in ["4", "10"]:
            if last != "4":
                set_input(page, "#keep-last", last)
                page.press("Enter", "Enter", 13)
            plan = run("gc", "--dry-run", "--keep-last", last)["plan"]
            page.wait_until(f"document.getElementById('gc-command').textContent.includes('--keep-last {last}') && "
                            f"document.querySelector('#gc-table [data-field=versions_kept]')?.dataset.value === "
                            f"'{len(plan['versions_kept'])}'")
            got = figures(page, "#gc-table")
            assert got["bytes_kept"] == plan["bytes_kept"] and got["bytes_freed"] == plan["bytes_freed"], last
            assert got["versions_expired"] == len(plan["versions_expired"])
            assert got["tags_readable"] == sum(t["readable"] for t in plan["tags"]) == 8
            dimmed = page.evaluate("document.querySelectorAll('#versions tr.expires').length")
            assert dimmed == len(plan["versions_expired"])

        # The erasure audit, as `audit` records it.
        audit = run("audit")
        assert audit, "the lab erases a customer's rows"
        page.wait_until("document.querySelectorAll('#audit-body article.erasure').length > 0")
        assert page.evaluate("document.querySelectorAll('#audit-body article.erasure').length") == len(audit)
        removed = page.evaluate("[...document.querySelectorAll('#audit-body [data-field=rows_removed]')].map(e => Number(e.dataset.value))")
        assert removed == [sum(v["rows_removed"] for v in r["versions"]) for r in audit]

        # Usable at phone width, and nothing loaded from anywhere else.
        page.resize(390, 844, mobile=True)
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        page.resize(1100, 900)
        assert page.errors() == []
        assert all(r["status"] == 200 for r in page.responses()), page.responses()
        outside = [u for u in page.requests() if not u.startswith(s.url)]
        assert outside == []
        page.evaluate("document.getElementById('history').scrollIntoView()")
        page.screenshot(str(lab_out / "ui.png"))
        assert (lab_out / "ui.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    finally:
        s.close()
