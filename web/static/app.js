// heapfleet UI: a hash router and five pages (fleet, node, snapshot,
// compare, discrepancy) over the JSON API in web/API.md. Plain ES modules,
// no build step.
import { api, caps, endpoint, download, ApiError, fmtBytes, fmtValue, fmtSigned, fmtPct, fmtTime, relTime, esc, sparkSVG, sortableTable, toast } from "./util.js";
import { FlameGraph } from "./flame.js";
import { TimeChart } from "./chart.js";

const main = document.getElementById("main");
let cleanups = [];
let navSeq = 0;

const enc = encodeURIComponent;
const selPath = (sel) => enc(sel);

function setStatus(text) { document.getElementById("status").textContent = text || ""; }

function notice(err, extra = "") {
  const cls = err instanceof ApiError && err.status === 501 ? "notice" : "notice error";
  const what = err instanceof ApiError ? `${err.status}: ${err.message}` : String(err.message || err);
  return `<div class="${cls}" data-test="notice">${esc(what)}${extra}</div>`;
}

function route() {
  const seq = ++navSeq;
  for (const c of cleanups) c();
  cleanups = [];
  const hash = location.hash.replace(/^#/, "") || "/";
  const [path, qs] = hash.split("?");
  const q = new URLSearchParams(qs || "");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  document.querySelectorAll("header nav a").forEach((a) => a.classList.toggle("active",
    a.dataset.nav === (parts[0] === "compare" ? "compare" : parts[0] === "discrepancy" ? "discrepancy" : "fleet")));
  window.scrollTo(0, 0);
  let page;
  if (parts.length === 0) page = fleetPage();
  else if (parts[0] === "node" && parts[1]) page = nodePage(parts[1]);
  else if (parts[0] === "snapshot" && parts[1]) page = snapshotPage(parts[1], q);
  else if (parts[0] === "compare") page = comparePage(q);
  else if (parts[0] === "discrepancy") page = discrepancyPage(q);
  else { main.innerHTML = `<div class="notice error">No such page. <a href="#/">Back to the fleet</a></div>`; return; }
  page.catch((e) => {
    if (seq !== navSeq) return;
    console.warn(e);
    main.innerHTML = notice(e, ` · <a href="#/">Back to the fleet</a>`);
  });
}
window.addEventListener("hashchange", route);
route(); // module scripts run once the document is parsed

// ---- fleet --------------------------------------------------------------------

async function fleetPage() {
  main.innerHTML = `<p class="muted">Loading the fleet…</p>`;
  const data = await api("/api/v1/nodes?spark=24");
  const nodes = data.nodes;
  const f = data.fleet;
  const maxHeap = Math.max(1, ...nodes.map((n) => n.latest ? n.latest.totals.inuse_space || 0 : 0));
  main.innerHTML = `
    <div class="pagehead"><div><h1>Fleet</h1><div class="sub">${nodes.length} nodes · heap profiles and memory figures per node</div></div></div>
    <div class="cards">
      <div class="card"><div class="label">Nodes</div><div class="value" data-test="node-count">${nodes.length}</div></div>
      <div class="card"><div class="label">Failing</div><div class="value ${f.failing ? "bad" : ""}">${f.failing}</div></div>
      <div class="card"><div class="label">Fleet heap in use</div><div class="value">${fmtBytes(f.heap_total)}</div></div>
      <div class="card"><div class="label">Median per node</div><div class="value">${fmtBytes(f.heap_median)}</div></div>
    </div>
    <div class="panel flush">
      <div class="panelhead"><h2>Nodes</h2><span class="grow"></span>
        <input type="search" id="filter" placeholder="Filter by name, kind, status…" aria-label="filter nodes" style="width:260px">
        <label class="small muted"><input type="checkbox" id="anomOnly"> anomalies only</label>
      </div>
      <div id="nodes"></div>
    </div>
    <div class="panel flush"><div class="panelhead"><h2>Far above the fleet</h2><span class="muted small">each node's latest snapshot against the fleet median (query fleet)</span></div><div id="outliers" style="padding:12px 16px"><span class="muted">Comparing…</span></div></div>`;
  const rows = nodes.map((n) => ({
    name: n.name, kind: n.kind, status: n.status, error: n.error,
    time: n.latest ? n.latest.time_ms : 0,
    heap: n.latest ? n.latest.totals.inuse_space : null,
    spark: n.spark || [], anomalies: n.anomalies || [],
  }));
  for (const r of rows) r.sparkHtml = sparkSVG(r.spark); // once, not per re-render
  const table = sortableTable(document.getElementById("nodes"), [
    { key: "name", label: "Node", asc: true, fmt: (r) => `<span class="dot ${esc(r.status)}"></span><a href="#/node/${enc(r.name)}" data-test="node-link">${esc(r.name)}</a>` },
    { key: "kind", label: "Kind", asc: true, fmt: (r) => `<span class="badge kind">${esc(r.kind)}</span>` },
    { key: "status", label: "Status", asc: true, title: (r) => r.error || "", fmt: (r) => `<span class="badge ${esc(r.status)}">${esc(r.status)}</span>${r.error ? `<span class="muted small">${esc(r.error.slice(0, 60))}</span>` : ""}` },
    { key: "time", label: "Last snapshot", fmt: (r) => r.time ? `<span title="${esc(fmtTime(r.time))}">${esc(relTime(r.time))}</span>` : `<span class="muted">never</span>` },
    { key: "heap", label: "Heap in use", num: true, fmt: (r) => r.heap === null ? `<span class="muted">–</span>` : fmtBytes(r.heap) },
    { key: "bar", label: "", get: (r) => r.heap, fmt: (r) => `<div class="bar" title="share of the largest node"><span style="width:${r.heap ? (100 * r.heap / maxHeap).toFixed(1) : 0}%"></span></div>` },
    { key: "trend", label: "Trend", get: (r) => (r.spark.length > 1 ? r.spark[r.spark.length - 1] / (r.spark[0] || 1) : 0), fmt: (r) => r.sparkHtml },
    { key: "anomalies", label: "Anomalies", get: (r) => r.anomalies.length, fmt: (r) => r.anomalies.map((a) => `<span class="badge ${esc(a)}">${esc(a)}</span>`).join("") },
  ], rows, { sortKey: "name", asc: true, testid: "fleet-table", onRow: (r) => { location.hash = `#/node/${enc(r.name)}`; } });
  const filter = document.getElementById("filter"), anomOnly = document.getElementById("anomOnly");
  const apply = () => {
    const t = filter.value.trim().toLowerCase();
    table.update(rows.filter((r) => (!t || `${r.name} ${r.kind} ${r.status}`.toLowerCase().includes(t)) && (!anomOnly.checked || r.anomalies.length)));
  };
  filter.addEventListener("input", apply);
  anomOnly.addEventListener("change", apply);
  setStatus(`updated ${fmtTime(Date.now()).slice(11)}`);
  fleetOutliers(document.getElementById("outliers"));
}

async function fleetOutliers(el) {
  try {
    const ep = await endpoint("/api/v1/fleet");
    if (!ep.available) throw new ApiError(501, ep.note);
    const f = await api("/api/v1/fleet?top=15");
    const rows = [...(f.totals || []), ...(f.functions || [])];
    el.innerHTML = rows.length ? `<table class="grid" data-test="outliers"><thead><tr><th>Node</th><th>Holds</th><th class="num">Bytes</th><th class="num">Fleet median</th><th class="num">Ratio</th></tr></thead><tbody>` +
      rows.map((r) => `<tr><td><a href="#/node/${enc(r.node)}">${esc(r.node)}</a></td><td class="fn" title="${esc(r.name)}">${r.name === "heap total" ? "<b>heap total</b>" : esc(r.name)}</td><td class="num">${fmtBytes(r.value)}</td><td class="num">${fmtBytes(r.median)}</td><td class="num">${r.median > 0 ? (r.value / r.median).toFixed(1) + "×" : "new"}</td></tr>`).join("") +
      `</tbody></table>` : `<div class="muted">No node holds far more than the fleet median (${f.nodes} nodes compared).</div>`;
  } catch (e) { el.innerHTML = notice(e); }
}

// ---- node ---------------------------------------------------------------------

const SERIES = [
  ["heap profile (in use)", (s) => s.totals.inuse_space, "#e8590c"],
  ["RSS", (s) => s.figures.rss, "#495057"],
  ["jemalloc resident", (s) => s.figures.jemalloc_resident, "#7048e8"],
  ["jemalloc allocated", (s) => s.figures.jemalloc_allocated, "#3b5bdb"],
  ["tracker total", (s) => s.figures.tracker_total, "#2b8a3e"],
];

async function nodePage(name) {
  main.innerHTML = `<p class="muted">Loading ${esc(name)}…</p>`;
  const [snapsRes, nodesRes] = await Promise.all([
    api(`/api/v1/nodes/${enc(name)}/snapshots?limit=1000`),
    api(`/api/v1/nodes`),
  ]);
  const info = nodesRes.nodes.find((n) => n.name === name) || { name, kind: "unknown", status: "never" };
  const snaps = snapsRes.snapshots;
  const last = snaps[snaps.length - 1], first = snaps[0];
  const growth = last && first ? (last.totals.inuse_space || 0) - (first.totals.inuse_space || 0) : 0;
  const spanH = last && first ? (last.time_ms - first.time_ms) / 3600e3 : 0;
  main.innerHTML = `
    <div class="crumbs"><a href="#/">Fleet</a> / ${esc(name)}</div>
    <div class="pagehead"><div><h1 data-test="node-title">${esc(name)}</h1>
      <div class="sub"><span class="badge kind">${esc(info.kind)}</span><span class="badge ${esc(info.status)}">${esc(info.status)}</span>${info.address ? esc(info.address) : ""}</div></div>
      <span class="spacer" style="flex:1"></span>
      <div class="toolbar">
        ${snaps.length > 1 ? `<a class="button" href="#/compare?a=${enc("#" + first.id)}&b=${enc("#" + last.id)}" data-test="compare-range">Compare first → latest</a>` : ""}
        <a class="button" href="#/discrepancy?node=${enc(name)}">Discrepancy report</a>
      </div>
    </div>
    ${info.error ? `<div class="notice error">Last poll failed: ${esc(info.error)}</div>` : ""}
    <div class="cards">
      <div class="card"><div class="label">Heap in use (latest)</div><div class="value">${last ? fmtBytes(last.totals.inuse_space) : "–"}</div></div>
      <div class="card"><div class="label">Change over ${spanH ? spanH.toFixed(spanH < 10 ? 1 : 0) + " h" : "the range"}</div><div class="value ${growth > 0 ? "grow" : growth < 0 ? "shrink" : ""}">${fmtSigned(growth, "bytes")}</div></div>
      <div class="card"><div class="label">Snapshots</div><div class="value">${snaps.length}</div></div>
      <div class="card"><div class="label">Last snapshot</div><div class="value" style="font-size:18px">${last ? esc(relTime(last.time_ms)) : "never"}</div></div>
    </div>
    <div class="panel"><h2>Memory over time</h2><div id="chart"></div>${snaps.length ? "" : `<div class="empty">No snapshots yet.</div>`}</div>
    <div class="two">
      <div class="panel flush"><div class="panelhead"><h2>Snapshots</h2></div><div class="tablewrap" id="snaps"></div></div>
      <div class="panel flush"><div class="panelhead"><h2>Leak suspects</h2></div><div id="leaks" style="padding:14px 16px"><span class="muted">Loading…</span></div></div>
    </div>`;
  if (snaps.length) {
    const chart = new TimeChart(document.getElementById("chart"), {
      label: `memory of ${name} over time`,
      onClick: (id) => { location.hash = `#/snapshot/${selPath("#" + id)}`; },
    });
    cleanups.push(() => chart.destroy());
    chart.setSeries(SERIES.map(([label, get, color]) => ({
      name: label, color,
      points: snaps.map((s) => ({ t: s.time_ms, v: get(s) ?? null, ref: s.id, label: "#" + s.id })),
    })));
  }
  const rows = snaps.map((s, i) => ({ ...s, heap: s.totals.inuse_space, delta: i ? s.totals.inuse_space - snaps[i - 1].totals.inuse_space : null, prev: i ? snaps[i - 1].id : null }));
  sortableTable(document.getElementById("snaps"), [
    { key: "time_ms", label: "Taken", fmt: (r) => `<a href="#/snapshot/${selPath("#" + r.id)}" data-test="snapshot-link">${esc(fmtTime(r.time_ms))}</a>` },
    { key: "id", label: "Id", num: true, fmt: (r) => `#${r.id}` },
    { key: "heap", label: "Heap", num: true, fmt: (r) => fmtBytes(r.heap) },
    { key: "delta", label: "Δ previous", num: true, fmt: (r) => r.delta === null ? "" : `<a class="${r.delta > 0 ? "grow-text" : r.delta < 0 ? "shrink-text" : ""}" href="#/compare?a=${enc("#" + r.prev)}&b=${enc("#" + r.id)}" title="compare with the previous snapshot">${fmtSigned(r.delta, "bytes")}</a>` },
    { key: "format", label: "Format", fmt: (r) => `<span class="muted">${esc(r.format || "?")}</span>` },
  ], rows, { sortKey: "time_ms", asc: false });
  const leaks = document.getElementById("leaks");
  try {
    const ep = await endpoint("/api/v1/leaks");
    if (!ep.available) throw new ApiError(501, ep.note);
    if (snaps.length < 3) throw new ApiError(400, "leak analysis needs at least 3 snapshots");
    const l = await api(`/api/v1/leaks?node=${enc(name)}&top=30`);
    const nl = (l.nodes || [])[0] || { functions: [] };
    // Pass-through callers ("via") are hidden, as `query leaks` hides them.
    const rows = (nl.functions || []).filter((f) => !f.via).slice(0, 12);
    leaks.innerHTML = `<div class="small muted" style="margin-bottom:8px">The heap grew ${fmtSigned(nl.total_rate_per_hour, "bytes")}/h over ${nl.snapshots} snapshots. Functions whose bytes rise steadily:</div>` +
      (rows.length ? `<table class="grid" data-test="leaks"><thead><tr><th>Function</th><th class="num">Growth / h</th><th class="num">Of the growth</th><th class="num">Rising steps</th><th class="num">Now</th></tr></thead><tbody>` +
        rows.map((f) => `<tr><td class="fn" title="${esc(f.name)}">${esc(f.name)}${f.grows_while_idle ? ' <span class="badge failing">grows while idle</span>' : ""}</td><td class="num grow-text">${fmtSigned(f.rate_per_hour, "bytes")}</td><td class="num">${fmtPct(f.share)}</td><td class="num">${fmtPct(f.monotonic)}</td><td class="num">${fmtBytes(f.last)}</td></tr>`).join("") +
        `</tbody></table>` : `<div class="empty">No steadily growing function.</div>`);
  } catch (e) {
    leaks.innerHTML = notice(e) + (growth > 0 && snaps.length > 2 ? `<p class="small">Meanwhile: the heap grew by <b>${fmtBytes(growth)}</b> over these snapshots; <a href="#/compare?a=${enc("#" + first.id)}&b=${enc("#" + last.id)}">compare the first and the latest</a> to see which call paths grew.</p>` : "");
  }
}

// Render an analysis result whose exact shape this page does not know yet:
// every array of objects becomes a table.
function genericReport(obj) {
  const parts = [];
  for (const [k, v] of Object.entries(obj || {})) {
    if (Array.isArray(v) && v.length && typeof v[0] === "object") {
      const cols = Object.keys(v[0]).filter((c) => typeof v[0][c] !== "object");
      parts.push(`<h2 style="margin-top:12px">${esc(k)}</h2><div class="tablewrap"><table class="grid"><thead><tr>${cols.map((c) => `<th>${esc(c)}</th>`).join("")}</tr></thead><tbody>${v.slice(0, 500).map((r) => `<tr>${cols.map((c) => `<td class="${typeof r[c] === "number" ? "num" : ""}">${typeof r[c] === "number" && /bytes|heap|tracker|total|rss|delta|growth/.test(c) ? fmtBytes(r[c]) : esc(r[c])}</td>`).join("")}</tr>`).join("")}</tbody></table></div>`);
    } else if (typeof v !== "object") {
      parts.push(`<div><span class="muted">${esc(k)}:</span> ${esc(v)}</div>`);
    }
  }
  return parts.join("") || `<div class="empty">Nothing reported.</div>`;
}

// ---- snapshot -----------------------------------------------------------------

function downloadButtons(formats) {
  const fmts = [["pprof", "pprof"], ["collapsed", "collapsed"], ["svg", "SVG"], ["text", "text"], ["json", "JSON"]];
  return `<span class="muted small">Download</span><span class="seg">${fmts.map(([f, label]) => formats[f]
    ? `<button data-dl="${f}" title="download as ${label}">${label}</button>`
    : `<button disabled title="${label}: that renderer is not in this server's build yet" style="color:#adb5bd;cursor:not-allowed">${label}</button>`).join("")}</span>`;
}

function wireDownloads(root, sel, q) {
  root.querySelectorAll("button[data-dl]").forEach((b) => b.addEventListener("click", () => {
    const f = b.dataset.dl;
    const extra = q ? "&" + q : "";
    download(`/api/v1/snapshots/${selPath(sel)}/profile?format=${f}&download=1${extra}`, `snapshot.${f}`);
  }));
}

async function snapshotPage(sel, q) {
  const sample = q.get("sample") || "inuse_space";
  main.innerHTML = `<p class="muted">Loading snapshot ${esc(sel)}…</p>`;
  const sq = `sample=${enc(sample)}`;
  const [info, tree, top, capab] = await Promise.all([
    api(`/api/v1/snapshots/${selPath(sel)}`),
    api(`/api/v1/snapshots/${selPath(sel)}/tree?${sq}`),
    api(`/api/v1/snapshots/${selPath(sel)}/top?top=2000&${sq}`), // the table shows at most 2000 rows
    caps(),
  ]);
  const unit = tree.unit;
  const p = info.profile;
  main.innerHTML = `
    <div class="crumbs"><a href="#/">Fleet</a> / <a href="#/node/${enc(info.node)}">${esc(info.node)}</a> / snapshot #${info.id}</div>
    <div class="pagehead"><div><h1 data-test="snapshot-title">${esc(info.node)} · ${esc(fmtTime(info.time_ms))}</h1>
      <div class="sub">#${info.id} · ${esc(p.format)}${p.period > 1 ? ` · sampled every ${fmtBytes(p.period)}` : " · every allocation recorded"} · ${p.stacks.toLocaleString()} stacks · ${fmtBytes(info.raw_bytes)} on disk</div></div>
      <span style="flex:1"></span>
      <div class="toolbar"><a class="button" href="#/compare?a=${enc(info.node + "@" + new Date(info.time_ms - 1).toISOString())}&b=${enc("#" + info.id)}" title="compare with the snapshot before this one">Compare with previous</a></div>
    </div>
    <div class="cards">
      <div class="card"><div class="label">${esc(sample.replace("_", " "))}</div><div class="value" data-test="snapshot-total">${fmtValue(tree.total, unit)}</div></div>
      <div class="card"><div class="label">Functions</div><div class="value">${top.functions_total.toLocaleString()}</div></div>
      <div class="card"><div class="label">Frames in graph</div><div class="value">${tree.nodes.toLocaleString()}</div></div>
      <div class="card"><div class="label">Symbolized locations</div><div class="value">${p.locations ? fmtPct(p.symbolized_locations / p.locations) : "–"}</div></div>
    </div>
    <div class="panel flush">
      <div class="panelhead"><h2>Flame graph</h2>
        <input type="search" id="search" placeholder="Search functions (regex)…" aria-label="search the flame graph" style="width:280px">
        <button id="reset">Reset zoom</button>
        <select id="sample" aria-label="sample type">${["inuse_space", "inuse_objects", "alloc_space", "alloc_objects"].map((s) => `<option ${s === sample ? "selected" : ""} ${info.totals[s] || s === sample ? "" : "disabled title=\"this profile has no data for it\""}>${s}</option>`).join("")}</select>
        <span style="flex:1"></span>${downloadButtons(capab.formats)}
      </div>
      <div id="flame"></div>
    </div>
    <div class="panel flush"><div class="panelhead"><h2>Top functions</h2><span class="muted small">click a row to find it in the flame graph</span></div><div class="tablewrap" id="top"></div></div>`;
  wireDownloads(main, sel, sq);
  const fg = new FlameGraph(document.getElementById("flame"));
  cleanups.push(() => fg.destroy());
  fg.setData(tree, unit);
  const search = document.getElementById("search");
  let timer = 0;
  search.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(() => fg.setSearch(search.value.trim()), 120); });
  search.addEventListener("keydown", (e) => { if (e.key === "Escape") { search.value = ""; fg.setSearch(""); } });
  document.getElementById("reset").addEventListener("click", () => fg.reset());
  document.getElementById("sample").addEventListener("change", (e) => {
    location.hash = `#/snapshot/${selPath(sel)}?sample=${enc(e.target.value)}`;
  });
  const total = top.total || 1;
  sortableTable(document.getElementById("top"), [
    { key: "name", label: "Function", asc: true, cls: "fn", title: (r) => r.name, fmt: (r) => esc(r.name) },
    { key: "flat", label: "Flat", num: true, fmt: (r) => fmtValue(r.flat, unit) },
    { key: "flatp", label: "Flat %", num: true, get: (r) => r.flat, fmt: (r) => fmtPct(r.flat / total) },
    { key: "cum", label: "Cum", num: true, fmt: (r) => fmtValue(r.cum, unit) },
    { key: "cump", label: "Cum %", num: true, get: (r) => r.cum, fmt: (r) => fmtPct(r.cum / total) },
  ], top.functions, { sortKey: "flat", testid: "top-table", onRow: (r) => {
    search.value = "^" + r.name.replace(/[.*+?^${}()|[\]\\]/g, "\\$&") + "$";
    fg.setSearch(search.value);
    document.getElementById("flame").scrollIntoView({ behavior: "smooth", block: "center" });
  } });
  setStatus("");
}

// ---- compare ------------------------------------------------------------------

async function comparePage(q) {
  const a = q.get("a") || "", b = q.get("b") || "";
  main.innerHTML = `<p class="muted">Loading…</p>`;
  const nodes = (await api("/api/v1/nodes")).nodes.filter((n) => n.snapshots > 0);
  main.innerHTML = `
    <div class="pagehead"><div><h1>Compare</h1><div class="sub">B minus A: two nodes, or two times of one node</div></div></div>
    <div class="panel"><div class="pickers">
      ${["a", "b"].map((k) => `<label>${k.toUpperCase()} — ${k === "a" ? "baseline" : "compared"}<div class="row">
        <select id="${k}node" aria-label="${k} node">${nodes.map((n) => `<option>${esc(n.name)}</option>`).join("")}</select>
        <select id="${k}snap" aria-label="${k} snapshot"></select></div></label>`).join("")}
      <button class="primary" id="go">Compare</button>
    </div><div class="small muted" style="margin-top:8px">Selectors as in the CLI: <code class="mono">NODE</code>, <code class="mono">NODE@TIME</code>, <code class="mono">#ID</code>. Current: A = <b data-test="sel-a">${esc(a || "–")}</b>, B = <b data-test="sel-b">${esc(b || "–")}</b></div></div>
    <div id="result"></div>`;
  const fill = async (k, sel) => {
    const nodeSel = document.getElementById(k + "node"), snapSel = document.getElementById(k + "snap");
    const load = async (pick) => {
      const r = await api(`/api/v1/nodes/${enc(nodeSel.value)}/snapshots?limit=500`);
      snapSel.innerHTML = `<option value="${esc(nodeSel.value)}">latest</option>` + r.snapshots.slice().reverse().map((s) => `<option value="#${s.id}">${esc(fmtTime(s.time_ms))} · #${s.id} · ${fmtBytes(s.totals.inuse_space)}</option>`).join("");
      if (pick) snapSel.value = pick;
      if (pick && snapSel.value !== pick) {
        snapSel.insertAdjacentHTML("afterbegin", `<option value="${esc(pick)}">${esc(pick)}</option>`);
        snapSel.value = pick;
      }
    };
    nodeSel.addEventListener("change", () => load(null));
    let pick = sel || null;
    if (sel && !sel.startsWith("#")) nodeSel.value = sel.split("@")[0];
    else if (sel && sel.startsWith("#")) {
      try { const s = await api(`/api/v1/snapshots/${selPath(sel)}`); nodeSel.value = s.node; } catch (e) { /* shown below */ }
    } else if (k === "b" && nodes.length > 1) nodeSel.selectedIndex = 1;
    await load(pick);
  };
  await Promise.all([fill("a", a), fill("b", b)]);
  document.getElementById("go").addEventListener("click", () => {
    location.hash = `#/compare?a=${enc(document.getElementById("asnap").value)}&b=${enc(document.getElementById("bsnap").value)}`;
  });
  if (!a || !b) {
    document.getElementById("result").innerHTML = `<div class="panel empty">Pick two snapshots: two nodes to see which call paths one holds more of, or two times of one node to see what grew.</div>`;
    return;
  }
  const res = document.getElementById("result");
  res.innerHTML = `<p class="muted">Computing the difference…</p>`;
  let d;
  try { d = await api(`/api/v1/diff?a=${enc(a)}&b=${enc(b)}`); } catch (e) { res.innerHTML = notice(e); return; }
  const unit = d.unit, ta = d.a.total, tb = d.b.total;
  const label = (x) => `${esc(x.snapshot.node)} · ${esc(fmtTime(x.snapshot.time_ms))} <span class="muted">#${x.snapshot.id}</span>`;
  res.innerHTML = `
    <div class="cards">
      <div class="card"><div class="label">A</div><div class="value" style="font-size:18px">${fmtValue(ta, unit)}</div><div class="small">${label(d.a)}</div></div>
      <div class="card"><div class="label">B</div><div class="value" style="font-size:18px">${fmtValue(tb, unit)}</div><div class="small">${label(d.b)}</div></div>
      <div class="card"><div class="label">Change</div><div class="value ${d.delta > 0 ? "grow" : d.delta < 0 ? "shrink" : ""}" data-test="diff-delta">${fmtSigned(d.delta, unit)}</div><div class="small muted">${ta ? (d.delta >= 0 ? "+" : "−") + fmtPct(Math.abs(d.delta) / ta) : ""}${d.sigma ? ` · ±${fmtValue(d.sigma, unit)} sampling noise${d.noise ? " (within noise)" : ""}` : ""}</div></div>
      <div class="card"><div class="label">Functions changed</div><div class="value">${d.functions.filter((f) => f.delta_flat || f.delta_cum).length}${d.functions_total > d.functions.length ? "+" : ""}</div></div>
    </div>
    <div class="panel flush"><div class="panelhead"><h2>Differential flame graph</h2><span class="muted small">widths are B; colour is the change from A</span><span style="flex:1"></span>
      <input type="search" id="dsearch" placeholder="Search functions…" aria-label="search the differential flame graph" style="width:240px"><button id="dreset">Reset zoom</button></div>
      <div id="dflame"></div></div>
    <div class="panel flush"><div class="panelhead"><h2>Largest changes</h2></div><div class="tablewrap" id="dtable"></div></div>`;
  const fg = new FlameGraph(document.getElementById("dflame"));
  cleanups.push(() => fg.destroy());
  fg.setData(d, unit);
  const s = document.getElementById("dsearch");
  s.addEventListener("input", () => fg.setSearch(s.value.trim()));
  document.getElementById("dreset").addEventListener("click", () => fg.reset());
  const dcls = (v) => (v > 0 ? "grow-text" : v < 0 ? "shrink-text" : "muted");
  sortableTable(document.getElementById("dtable"), [
    { key: "name", label: "Function", asc: true, cls: "fn", title: (r) => r.name, fmt: (r) => esc(r.name) },
    { key: "a_flat", label: "A flat", num: true, fmt: (r) => fmtValue(r.a_flat, unit) },
    { key: "b_flat", label: "B flat", num: true, fmt: (r) => fmtValue(r.b_flat, unit) },
    { key: "delta_flat", label: "Δ flat", num: true, get: (r) => Math.abs(r.delta_flat), fmt: (r) => `<span class="${dcls(r.delta_flat)}">${fmtSigned(r.delta_flat, unit)}</span>` },
    { key: "a_cum", label: "A cum", num: true, fmt: (r) => fmtValue(r.a_cum, unit) },
    { key: "b_cum", label: "B cum", num: true, fmt: (r) => fmtValue(r.b_cum, unit) },
    { key: "delta_cum", label: "Δ cum", num: true, get: (r) => Math.abs(r.delta_cum), fmt: (r) => `<span class="${dcls(r.delta_cum)}">${fmtSigned(r.delta_cum, unit)}</span>` },
    { key: "sigma_flat", label: "± noise", num: true, title: () => `standard error of Δ flat from sampling; ~ marks a change within ${d.noise_sigmas}σ`,
      fmt: (r) => `<span class="muted">${r.noise_flat ? "~ " : ""}${r.sigma_flat ? "±" + fmtValue(r.sigma_flat, unit) : "exact"}</span>` },
  ], d.functions, { sortKey: "delta_flat", testid: "delta-table", onRow: (r) => {
    s.value = "^" + r.name.replace(/[.*+?^${}()|[\]\\]/g, "\\$&") + "$"; fg.setSearch(s.value);
  } });
}

// ---- discrepancy --------------------------------------------------------------

async function discrepancyPage(q) {
  main.innerHTML = `<p class="muted">Loading…</p>`;
  const nodes = (await api("/api/v1/nodes")).nodes;
  const node = q.get("node") || (nodes.find((n) => n.latest) || nodes[0] || {}).name || "";
  main.innerHTML = `
    <div class="pagehead"><div><h1>Tracker versus heap</h1><div class="sub">The node's own memory accounting next to its heap profile, category by category</div></div>
      <span style="flex:1"></span><label class="small muted">Node <select id="dnode" aria-label="node">${nodes.map((n) => `<option ${n.name === node ? "selected" : ""}>${esc(n.name)}</option>`).join("")}</select></label></div>
    <div id="report"></div>`;
  document.getElementById("dnode").addEventListener("change", (e) => { location.hash = `#/discrepancy?node=${enc(e.target.value)}`; });
  if (!node) return;
  const rep = document.getElementById("report");
  let d;
  try {
    const ep = await endpoint("/api/v1/discrepancy");
    if (!ep.available) throw new ApiError(501, ep.note);
    d = await api(`/api/v1/discrepancy?node=${enc(node)}`);
  } catch (e) { rep.innerHTML = notice(e); return; }
  const ladder = d.ladder || [];
  const lmax = Math.max(1, ...ladder.map((x) => x.value || 0));
  const verdictCls = (v) => /consistent/.test(v) ? "ok" : /leak/.test(v) ? "failing" : /no tracker/.test(v) ? "never" : "outlier";
  const cats = (d.categories || []).filter((c) => c.heap > 0 || c.tracker);
  rep.innerHTML = `
    <div class="cards">
      <div class="card"><div class="label">Heap profile total</div><div class="value">${fmtBytes(d.heap_total)}</div></div>
      <div class="card"><div class="label">Tracked total</div><div class="value">${d.tracked_total === null ? `<span class="muted" style="font-size:16px">not reported</span>` : fmtBytes(d.tracked_total)}</div></div>
      <div class="card"><div class="label">Untracked</div><div class="value">${d.tracked_total === null ? "–" : fmtSigned(d.heap_total - d.tracked_total, "bytes")}</div></div>
    </div>
    <div class="panel flush"><div class="panelhead"><h2>Categories</h2><span class="muted small">heap bytes of the stacks each category's frames match, against the tracker figure for it</span></div>
      <table class="grid" data-test="categories"><thead><tr><th>Category</th><th class="num">Tracker</th><th class="num">Heap</th><th class="num">Heap share</th><th class="num">Gap</th><th>Verdict</th><th>Held in</th></tr></thead><tbody>
      ${cats.map((c) => `<tr><td title="${esc(c.description)}"><b>${esc(c.category)}</b><div class="muted small">${esc(c.description)}</div></td>
        <td class="num">${c.tracker === null ? `<span class="muted">–</span>` : fmtBytes(c.tracker)}</td>
        <td class="num">${fmtBytes(c.heap)}${c.heap_sigma ? `<div class="muted small">± ${fmtBytes(2 * c.heap_sigma)}</div>` : ""}</td>
        <td class="num">${fmtPct(c.heap_share)}</td>
        <td class="num">${c.gap === null ? "" : fmtSigned(c.gap, "bytes")}</td>
        <td><span class="badge ${verdictCls(c.verdict)}">${esc(c.verdict)}</span></td>
        <td class="mono small">${(c.held_in || []).map((h) => `${esc(h.frame)} <span class="muted">${fmtBytes(h.bytes)}</span>`).join("<br>")}</td></tr>`).join("") || `<tr><td colspan="7" class="empty">No category holds memory.</td></tr>`}
      </tbody></table></div>
    <div class="panel"><h2>Memory ladder</h2><div class="small muted" style="margin-bottom:10px">From the process's resident memory down to what its trackers account for; each step names the gap.</div>
      <table class="grid ladder" data-test="ladder"><thead><tr><th>Level</th><th class="num">Bytes</th><th style="width:36%"></th><th class="num">Gap from previous</th><th>What the gap is</th></tr></thead><tbody>
      ${ladder.map((x) => `<tr><td>${esc(x.step.replace(/_/g, " "))}${x.figure ? `<div class="muted small mono">${esc(x.figure)}</div>` : ""}</td>
        <td class="num">${x.value === null ? `<span class="muted">not reported</span>` : fmtBytes(x.value)}</td>
        <td>${x.value ? `<div class="bar"><span style="width:${(100 * x.value / lmax).toFixed(1)}%;background:${x.step === "heap_profile" ? "#e8590c" : "#748ffc"}"></span></div>` : ""}</td>
        <td class="num">${x.gap_from_previous === null ? "" : fmtSigned(x.gap_from_previous, "bytes")}</td>
        <td class="gapname">${esc(x.gap_is || "")}</td></tr>`).join("")}
      </tbody></table>
      ${ladder.every((x) => x.value === null || x.step === "heap_profile") ? `<div class="small muted" style="margin-top:8px">No process or tracker figures are stored for ${esc(node)}; the collector records them from the node's /metrics and memory tracker.</div>` : ""}
    </div>`;
}

window.addEventListener("error", (e) => toast("Error: " + e.message));
window.addEventListener("unhandledrejection", (e) => { console.warn(e.reason); });
