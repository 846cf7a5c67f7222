// The page of `tablepin ui`: it asks this server's /api for JSON (the same
// as the commands' --json) and draws it. Text goes into the page as text,
// never as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
const SVG = "http://www.w3.org/2000/svg";

// An element with attributes and children (strings become text).
function el(tag, attrs = {}, ...children) {
  const e = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.setAttribute("class", v);
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

const num = (n) => Number(n).toLocaleString("en-US");
function bytes(n) {
  const units = ["B", "KB", "MB", "GB", "TB"];
  let v = Number(n), i = 0;
  while (v >= 1000 && i < units.length - 1) { v /= 1000; i++; }
  return (i === 0 ? String(v) : v.toFixed(v < 10 ? 2 : 1)) + " " + units[i];
}
const short = (id) => String(id).slice(0, 12);
// "2011-12-13 09:30" (UTC) from RFC 3339.
const when = (t) => (t ? String(t).slice(0, 16).replace("T", " ") : "");
// A number shown rounded, its exact value kept for readers and tests.
const figure = (n, text, name) => el("span", { "data-value": n, "data-field": name, title: num(n) }, text);

async function api(path) {
  const r = await fetch(path, { headers: { Accept: "application/json" } });
  const body = await r.json().catch(() => ({ error: `the server answered ${r.status} without JSON` }));
  if (!r.ok) throw new Error(body.error || `the server answered ${r.status}`);
  return body;
}

function showError(where, e) {
  const target = $(where) || $("error");
  target.textContent = e.message || String(e);
}

const state = { history: null, selected: null, expires: new Set(), diff: null };

// ---- History --------------------------------------------------------------

async function loadHistory() {
  const h = await api("/api/history");
  state.history = h;
  $("repo").textContent = h.repository;
  $("nversions").textContent = h.versions.length;
  $("nbranches").textContent = h.branches.length;
  $("nbranches-word").textContent = h.branches.length === 1 ? "branch" : "branches";
  $("ntags").textContent = h.tags.length;
  const revs = $("revs");
  revs.replaceChildren(...[...h.branches, ...h.tags].map((r) => el("option", { value: r.name })));
  drawRefs(h);
  drawVersions(h);
  drawGraph(h);
}

function refsAt(h) {
  const at = new Map();
  const add = (id, chip) => at.set(id, [...(at.get(id) || []), chip]);
  for (const b of h.branches) add(b.target, { kind: "branch", name: b.name });
  for (const t of h.tags) add(t.target, { kind: "tag", name: t.name });
  return at;
}

function chip(r) {
  return el("span", { class: `chip ${r.kind}`, title: `${r.kind} ${r.name}` }, r.name);
}

function drawRefs(h) {
  const items = [...h.branches.map((b) => ({ kind: "branch", ...b })), ...h.tags.map((t) => ({ kind: "tag", ...t }))];
  $("refs").replaceChildren(...items.map((r) =>
    el("li", {}, el("button", { type: "button", class: `chip ${r.kind}`, "data-ref": r.name,
      "aria-label": `${r.kind} ${r.name}, version ${short(r.target)}`, onclick: () => selectVersion(r.target) }, r.name))));
}

function changeText(e) {
  return Object.entries(e.changes || {}).map(([t, c]) =>
    `${t} +${num(c.rows_added)} ~${num(c.rows_changed)} −${num(c.rows_deleted)}, ${bytes(c.bytes_new)} new`).join("; ");
}

function checksCell(e) {
  const fired = new Set();
  for (const c of Object.values(e.changes || {})) {
    for (const [k, v] of Object.entries(c.checks || {})) if (v) fired.add(k);
  }
  return fired.size ? [...fired].join(", ") : "none";
}

function drawVersions(h) {
  const at = refsAt(h);
  const rows = h.versions.map((e) => {
    const rows = Object.values(e.tables).reduce((s, t) => s + Number(t[0]), 0);
    return el("tr", { "data-version": e.id, class: e.expired ? "expired" : null },
      el("td", {}, el("button", { type: "button", class: "link", onclick: () => selectVersion(e.id),
        "aria-label": `Show version ${short(e.id)}` }, short(e.id))),
      el("td", { class: "time", title: e.time }, when(e.time)),
      el("td", {}, (at.get(e.id) || []).map(chip)),
      el("td", {}, e.expired ? `(expired) ${e.message}` : e.message),
      el("td", { class: "num" }, num(rows)),
      el("td", {}, changeText(e)),
      el("td", {}, checksCell(e)));
  });
  $("versions").tBodies[0].replaceChildren(...rows);
}

function drawGraph(h) {
  const svg = $("graph");
  const oldest = [...h.versions].reverse();
  const x = new Map(oldest.map((e, i) => [e.id, i]));
  const lanes = Math.max(1, ...h.versions.map((e) => e.lane + 1));
  const step = 12, pad = 16, laneH = 22, top = 22;
  const px = (id) => pad + x.get(id) * step;
  const py = (e) => top + e.lane * laneH;
  const byId = new Map(h.versions.map((e) => [e.id, e]));
  const tagged = new Set(h.tags.map((t) => t.target));
  const width = pad * 2 + Math.max(0, oldest.length - 1) * step + 90;
  const height = top + lanes * laneH + 8;
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  const parts = [];
  for (const e of oldest) {
    for (const p of e.parents) {
      const pe = byId.get(p);
      if (!pe) continue;
      const [x1, y1, x2, y2] = [px(p), py(pe), px(e.id), py(e)];
      parts.push(y1 === y2 ? el("svg:line", { x1, y1, x2, y2 })
        : el("svg:path", { d: `M${x1},${y1} C${x1 + step},${y1} ${x2 - step},${y2} ${x2},${y2}` }));
    }
  }
  for (const e of oldest) {
    const classes = [tagged.has(e.id) ? "tagged" : "", state.expires.has(e.id) ? "expires" : "",
      state.selected === e.id ? "selected" : ""].filter(Boolean).join(" ");
    parts.push(el("svg:circle", { cx: px(e.id), cy: py(e), r: 4, class: classes || null, "data-version": e.id,
      onclick: () => selectVersion(e.id) }, el("svg:title", {}, `${short(e.id)} ${e.message}`)));
  }
  for (const b of h.branches) {
    const e = byId.get(b.target);
    if (e) parts.push(el("svg:text", { x: px(e.id) + 8, y: py(e) + 4 }, b.name));
  }
  if (oldest.length) {
    parts.push(el("svg:text", { x: pad - 4, y: 12 }, when(oldest[0].time).slice(0, 10)));
    parts.push(el("svg:text", { x: px(oldest[oldest.length - 1].id) - 60, y: 12 }, when(oldest[oldest.length - 1].time).slice(0, 10)));
  }
  svg.replaceChildren(...parts);
}

// ---- One version ------------------------------------------------------------

async function selectVersion(id) {
  state.selected = id;
  for (const tr of $("versions").querySelectorAll("tr[data-version]")) {
    tr.classList.toggle("selected", tr.dataset.version === id);
  }
  if (state.history) drawGraph(state.history);
  try {
    const v = await api(`/api/version?rev=${encodeURIComponent(id)}`);
    drawVersion(v);
    location.hash = "#version";
  } catch (e) {
    showError("error", e);
  }
}

function drawVersion(v) {
  $("version-id").textContent = v.version;
  const facts = el("dl", {},
    el("dt", {}, "Time"), el("dd", {}, when(v.time)),
    el("dt", {}, "Author"), el("dd", {}, v.author),
    el("dt", {}, "Message"), el("dd", {}, v.message),
    el("dt", {}, "Parents"), el("dd", {}, v.parents.length ? v.parents.map((p) =>
      el("button", { type: "button", class: "link", onclick: () => selectVersion(p) }, short(p), " ")) : "none"),
    v.replaces ? [el("dt", {}, "Replaces"), el("dd", {}, `${v.replaces} (an erasure rewrote it)`)] : null);
  const head = el("tr", {}, ["Table", "Rows", "Bytes", "Content hash", "Key", "Files", "Change", "Checks"].map((t) =>
    el("th", { scope: "col" }, t)));
  const body = v.tables.map((t) => {
    const c = (v.changes || {})[t.table];
    const checks = c ? Object.entries(c.checks).map(([k, on]) => el("span", { class: on ? "on" : "off" }, k, " ")) : "—";
    return el("tr", { "data-table": t.table },
      el("td", {}, t.table),
      el("td", { class: "num" }, figure(t.rows, num(t.rows), "rows")),
      el("td", { class: "num" }, figure(t.bytes, bytes(t.bytes), "bytes")),
      el("td", { class: "hash", "data-field": "content_hash" }, t.content_hash),
      el("td", {}, t.key.join(", ") || "(none)"),
      el("td", { class: "num" }, num(t.files.length)),
      el("td", {}, c ? `+${num(c.rows_added)} ~${num(c.rows_changed)} −${num(c.rows_deleted)}, ${bytes(c.bytes_new)} new` : "unchanged"),
      el("td", { class: "checks" }, checks));
  });
  $("version-body").replaceChildren(facts,
    el("div", { class: "scroll" }, el("table", { id: "version-tables" }, el("thead", {}, head), el("tbody", {}, body))),
    el("button", { type: "button", onclick: () => diffWithParent(v) , disabled: !v.parents.length }, "Diff with its parent"));
}

function diffWithParent(v) {
  $("diff-old").value = v.parents[0];
  $("diff-new").value = v.version;
  runDiff(0);
  location.hash = "#diff";
}

// ---- Diff --------------------------------------------------------------------

async function runDiff(offset) {
  const old = $("diff-old").value.trim(), nw = $("diff-new").value.trim(), kind = $("diff-kind").value;
  const table = state.diff && state.diff.old_rev === old && state.diff.new_rev === nw ? state.diff.table : null;
  const q = new URLSearchParams({ old, new: nw, kind, offset, limit: 100 });
  if (table) q.set("table", table);
  $("diff-range").textContent = "Reading…";
  try {
    const d = await api(`/api/diff?${q}`);
    d.old_rev = old; d.new_rev = nw;
    state.diff = d;
    drawDiff(d);
  } catch (e) {
    $("diff-range").textContent = "";
    $("diff-tables").replaceChildren(el("p", { class: "error", id: "diff-error" }, e.message));
    $("diff-rows").replaceChildren();
  }
}

function drawDiff(d) {
  const tables = d.tables.map((t) => {
    const c = t.counts;
    return el("p", { "data-table": t.table }, el("strong", {}, t.table), ": ",
      figure(c.added, num(c.added), "added"), " added, ",
      figure(c.removed, num(c.removed), "removed"), " removed, ",
      figure(c.modified, num(c.modified), "modified"), " modified",
      t.key.length ? ` (by ${t.key.join(", ")})` : " (unkeyed: rows compared as a multiset)",
      `; read ${num(t.stats.files_read)} data files, ${num(t.stats.files_shared)} shared and not read.`,
      d.tables.length > 1 && t.table !== d.table
        ? el("button", { type: "button", onclick: () => { state.diff.table = t.table; runDiff(0); } }, "Show its rows") : null);
  });
  $("diff-tables").replaceChildren(el("p", {}, `From ${short(d.old)} to ${short(d.new)}.`), ...tables);
  const head = el("tr", {}, el("th", { scope: "col" }, "Change"),
    d.columns.map((c) => el("th", { scope: "col" }, d.key && d.key.includes(c) ? el("strong", {}, c) : c)));
  const rows = d.rows.map((r) => el("tr", { class: r.diff_type }, el("td", {}, r.diff_type),
    d.columns.map((c) => cell(r, c))));
  $("diff-rows").replaceChildren(el("thead", {}, head), el("tbody", {}, rows));
  const first = d.total ? d.offset + 1 : 0, last = Math.min(d.offset + d.limit, d.total);
  $("diff-range").textContent = `Rows ${num(first)}–${num(last)} of ${num(d.total)}` + (d.kind !== "all" ? ` ${d.kind}` : "");
  $("diff-range").dataset.offset = d.offset;
  $("diff-range").dataset.total = d.total;
  $("diff-prev").disabled = d.offset === 0;
  $("diff-next").disabled = d.offset + d.limit >= d.total;
}

function value(v) {
  return v === undefined || v === null ? "null" : typeof v === "object" ? JSON.stringify(v) : String(v);
}

function cell(r, c) {
  const from = r["from_" + c], to = r["to_" + c];
  if (r.diff_type === "added") return el("td", {}, value(to));
  if (r.diff_type === "removed") return el("td", {}, value(from));
  if (value(from) === value(to)) return el("td", {}, value(to));
  return el("td", { class: "changed", "data-changed": "" }, el("del", {}, value(from)), " → ", el("ins", {}, value(to)));
}

// ---- Retention ---------------------------------------------------------------

async function runRetention() {
  const q = new URLSearchParams({ keep_tags: $("keep-tags").checked });
  const last = $("keep-last").value.trim(), within = $("keep-within").value.trim();
  if (last) q.set("keep_last", last);
  if (within) q.set("keep_within", within);
  $("gc-command").textContent = "tablepin gc --dry-run" + (last ? ` --keep-last ${last}` : "") +
    (within ? ` --keep-within ${within}` : "") + ($("keep-tags").checked ? "" : " --no-keep-tags");
  try {
    const p = await api(`/api/retention?${q}`);
    drawRetention(p);
  } catch (e) {
    $("gc-table").tBodies[0].replaceChildren(el("tr", {}, el("td", { class: "error", id: "gc-error" }, e.message)));
  }
}

function drawRetention(p) {
  state.expires = new Set(p.versions_expired);
  for (const tr of $("versions").querySelectorAll("tr[data-version]")) {
    tr.classList.toggle("expires", state.expires.has(tr.dataset.version));
  }
  if (state.history) drawGraph(state.history);
  const readable = p.tags.filter((t) => t.readable).length;
  const row = (label, ...v) => el("tr", {}, el("th", { scope: "row" }, label), el("td", { class: "num" }, ...v));
  $("gc-table").tBodies[0].replaceChildren(
    row("Versions kept", figure(p.versions_kept.length, num(p.versions_kept.length), "versions_kept")),
    row("Versions expired", figure(p.versions_expired.length, num(p.versions_expired.length), "versions_expired")),
    row("Bytes kept", figure(p.bytes_kept, bytes(p.bytes_kept), "bytes_kept"), ` in ${num(p.blobs_kept)} blobs`),
    row("Bytes freed", figure(p.bytes_freed, bytes(p.bytes_freed), "bytes_freed"), ` in ${num(p.blobs_deleted.length)} blobs`),
    row("Blobs in the grace period", figure(p.blobs_in_grace, num(p.blobs_in_grace), "blobs_in_grace")),
    row("Tags readable", figure(readable, `${readable} of ${p.tags.length}`, "tags_readable"),
      p.tags.filter((t) => !t.readable).map((t) => ` ${t.name} expires`)),
    p.blobs_holding_erased ? row("Kept files holding erased rows", figure(p.blobs_holding_erased, num(p.blobs_holding_erased), "holding")) : null);
}

// ---- Audit ---------------------------------------------------------------------

async function loadAudit() {
  const records = await api("/api/audit");
  if (!records.length) {
    $("audit-body").replaceChildren(el("p", {}, "No erasures recorded."));
    return;
  }
  $("audit-body").replaceChildren(...records.map((r) => {
    const removed = r.versions.reduce((s, v) => s + Number(v.rows_removed), 0);
    return el("article", { class: "erasure", "data-seq": r.seq },
      el("h3", {}, `Erasure ${r.seq} on table ${r.table}`),
      el("p", {}, `${when(r.time)} by ${r.author}: ${r.reason}`),
      el("p", {}, `${num(r.versions.length)} versions rewritten, `, figure(removed, num(removed), "rows_removed"),
        ` rows removed across them, ${num(r.blobs_deleted)} blobs deleted, ${bytes(r.bytes_written)} written. Predicate hash `,
        el("code", {}, r.predicate_hash), "."),
      r.moved_refs.length ? el("div", { class: "scroll" }, el("table", {},
        el("thead", {}, el("tr", {}, ["Ref", "Was", "Now", "Content hash before", "after"].map((t) => el("th", { scope: "col" }, t)))),
        el("tbody", {}, r.moved_refs.map((m) => el("tr", {}, el("td", {}, `${m.kind} ${m.name}`),
          el("td", {}, el("code", {}, short(m.old))), el("td", {}, el("code", {}, short(m.new))),
          el("td", { class: "hash" }, short(m.old_content_hash)), el("td", { class: "hash" }, short(m.new_content_hash))))))) : null);
  }));
}

// ---- Start -----------------------------------------------------------------------

function start() {
  $("diff-form").addEventListener("submit", (ev) => { ev.preventDefault(); state.diff = null; runDiff(0); });
  $("diff-kind").addEventListener("change", () => runDiff(0));
  $("diff-prev").addEventListener("click", () => state.diff && runDiff(Math.max(0, state.diff.offset - state.diff.limit)));
  $("diff-next").addEventListener("click", () => state.diff && runDiff(state.diff.offset + state.diff.limit));
  $("gc-form").addEventListener("submit", (ev) => { ev.preventDefault(); runRetention(); });
  $("keep-tags").addEventListener("change", runRetention);
  loadHistory()
    .then(() => {
      const main = state.history.branches.find((b) => b.name === "main") || state.history.branches[0];
      if (main) {
        const head = state.history.versions.find((e) => e.id === main.target);
        $("diff-new").value = main.name;
        $("diff-old").value = head && head.parents.length ? `${main.name}~1` : main.name;
        runDiff(0);
      }
      return runRetention();
    })
    .catch((e) => showError("error", e));
  loadAudit().catch((e) => showError("error", e));
}

start();
