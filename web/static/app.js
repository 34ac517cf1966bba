// heapfleet UI: a hash router and seven pages (fleet, node, snapshot,
// compare, discrepancy, fleet leaks, function trend) over the JSON API in
// web/API.md. Plain ES modules, no build step.
import { api, caps, endpoint, download, ApiError, fmtBytes, fmtValue, fmtSigned, fmtPct, fmtTime, relTime, esc, sparkSVG, sortableTable, toast, useLocalTime, setLocalTime, zoneName } from "./util.js";
import { FlameGraph, flameIcicle, setFlameIcicle, hideFrames, sandwich } from "./flame.js";
import { TimeChart, rangePicker } from "./chart.js";

const main = document.getElementById("main");
let cleanups = [];
let navSeq = 0;

const enc = encodeURIComponent;
const selPath = (sel) => enc(sel);

function setStatus(text) { document.getElementById("status").textContent = text || ""; }

// A normal state (not enough data yet, not wired here) is a notice, not a
// red error.
class NormalState extends Error {}
// A stored snapshot over the collector's view budget is drawn from its
// heaviest stacks only (web/API.md, "pruned"): say so above the view.
function prunedNotice(snap, label = "") {
  return snap && snap.pruned ? `<div class="notice warn" data-test="pruned">${label}${esc(snap.pruned.note)}</div>` : "";
}

function notice(err, extra = "") {
  if (err instanceof NormalState) return `<div class="notice info" data-test="notice">${esc(err.message)}${extra}</div>`;
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
  const navs = ["compare", "discrepancy", "leaks", "function"];
  document.querySelectorAll("header nav a").forEach((a) => a.classList.toggle("active",
    a.dataset.nav === (navs.includes(parts[0]) ? parts[0] : "fleet")));
  window.scrollTo(0, 0);
  let page;
  if (parts.length === 0) page = fleetPage();
  else if (parts[0] === "node" && parts[1]) page = nodePage(parts[1], q);
  else if (parts[0] === "snapshot" && parts[1]) page = snapshotPage(parts[1], q);
  else if (parts[0] === "compare") page = comparePage(q);
  else if (parts[0] === "discrepancy") page = discrepancyPage(q);
  else if (parts[0] === "leaks") page = leaksPage(q);
  else if (parts[0] === "median") page = medianPage(q);
  else if (parts[0] === "function") page = functionPage(q);
  else { main.innerHTML = `<div class="notice error">No such page. <a href="#/">Back to the fleet</a></div>`; return; }
  page.catch((e) => {
    if (seq !== navSeq) return;
    console.warn(e);
    main.innerHTML = notice(e, ` · <a href="#/">Back to the fleet</a>`);
  });
}
window.addEventListener("hashchange", route);
const tzButton = document.getElementById("tz");
const tzLabel = () => { tzButton.textContent = useLocalTime() ? "Local time" : "UTC"; tzButton.setAttribute("aria-label", "times shown in " + zoneName()); };
tzLabel();
tzButton.addEventListener("click", () => { setLocalTime(!useLocalTime()); tzLabel(); route(); });
route(); // module scripts run once the document is parsed

// ---- fleet --------------------------------------------------------------------

async function fleetPage() {
  const seq = navSeq;
  main.innerHTML = `<p class="muted">Loading the fleet…</p>`;
  const data = await api("/api/v1/nodes?spark=24");
  if (seq !== navSeq) return; // the user went elsewhere meanwhile
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

// Process lifetimes from the leaks analysis, as chart marks (restarts).
function restartMarks(nl) {
  return (nl.lifetimes || []).filter((lt) => lt.restart).map((lt) => ({
    t: lt.start * 1000, label: "restart", title: `restart: ${lt.restart}`,
  }));
}

function leaksState(count) {
  return new NormalState(`Leak analysis needs 3 snapshots, ${count} so far.`);
}

async function nodePage(name, q) {
  const seq = navSeq;
  const range = q.get("range") || "all";
  main.innerHTML = `<p class="muted">Loading ${esc(name)}…</p>`;
  const since = range === "all" ? "" : `&since=${enc(range)}`;
  const [snapsRes, nodesRes] = await Promise.all([
    // points: the server thins long histories keeping each stretch's
    // extremes, so the chart covers the whole range, never a silent cap.
    api(`/api/v1/nodes/${enc(name)}/snapshots?points=800${since}`),
    api(`/api/v1/nodes`),
  ]);
  const info = nodesRes.nodes.find((n) => n.name === name) || { name, kind: "unknown", status: "never" };
  const snaps = snapsRes.snapshots;
  const last = snaps[snaps.length - 1], first = snaps[0];
  const growth = last && first ? (last.totals.inuse_space || 0) - (first.totals.inuse_space || 0) : 0;
  const spanH = last && first ? (last.time_ms - first.time_ms) / 3600e3 : 0;
  const total = snapsRes.total ?? snaps.length;
  const pollEp = await endpoint("/api/v1/nodes/{node}/snapshot").catch(() => ({ available: false }));
  if (seq !== navSeq) return; // the user went elsewhere meanwhile
  const flash = snapNowFlash && snapNowFlash.node === name ? snapNowFlash.html : "";
  snapNowFlash = null;
  main.innerHTML = `
    <div class="crumbs"><a href="#/">Fleet</a> / ${esc(name)}</div>
    <div class="pagehead"><div><h1 data-test="node-title">${esc(name)}</h1>
      <div class="sub"><span class="badge kind">${esc(info.kind)}</span><span class="badge ${esc(info.status)}">${esc(info.status)}</span>${info.address ? esc(info.address) : ""}</div></div>
      <span class="spacer" style="flex:1"></span>
      <div class="toolbar">
        ${snaps.length > 1 ? `<a class="button" href="#/compare?a=${enc("#" + first.id)}&b=${enc("#" + last.id)}" data-test="compare-range">Compare first → latest</a>` : ""}
        ${last ? `<a class="button" href="#/median?node=${enc(name)}" data-test="vs-median">Against the fleet median</a>` : ""}
        <a class="button" href="#/discrepancy?node=${enc(name)}">Discrepancy report</a>
        ${pollEp.available ? `<button class="primary" id="snapnow" data-test="snapshot-now" title="poll ${esc(name)} now, outside the schedule">Take a snapshot now</button>` : ""}
      </div>
    </div>
    <div id="snapnow-result">${flash}</div>
    ${info.error ? `<div class="notice error" data-test="node-error">Last poll failed: ${esc(info.error)}</div>` : ""}
    <div class="cards">
      <div class="card"><div class="label">Heap in use (latest)</div><div class="value">${last ? fmtBytes(last.totals.inuse_space) : "–"}</div></div>
      <div class="card"><div class="label">Change over ${spanH ? spanH.toFixed(spanH < 10 ? 1 : 0) + " h" : "the range"}</div><div class="value ${growth > 0 ? "grow" : growth < 0 ? "shrink" : ""}">${fmtSigned(growth, "bytes")}</div></div>
      <div class="card"><div class="label">Snapshots${range === "all" ? "" : " in " + esc(range)}</div><div class="value" data-test="snapshot-count">${total}</div></div>
      <div class="card"><div class="label">Last snapshot</div><div class="value" style="font-size:18px">${last ? esc(relTime(last.time_ms)) : "never"}</div></div>
      <div class="card"><div class="label">Named bytes (latest)</div><div class="value" data-test="node-named-bytes">${last && last.figures.symbolized_ratio != null ? fmtPct(last.figures.symbolized_ratio) : "–"}</div></div>
    </div>
    <div id="unnamed"></div>
    <div class="panel"><div class="panelhead" style="padding:0 0 8px;border:0"><h2>Memory over time</h2><span class="grow"></span><span id="range"></span></div>
      ${snapsRes.downsampled ? `<div class="small muted" data-test="downsampled">${snaps.length} of ${total} snapshots drawn: long stretches are thinned on the server, keeping each stretch's highest and lowest heap.</div>` : ""}
      <div id="chart"></div><div id="lifetimes" class="small muted"></div>${snaps.length ? "" : `<div class="empty">No snapshots ${range === "all" ? "yet" : "in the last " + esc(range)}.</div>`}</div>
    <div class="two">
      <div class="panel flush"><div class="panelhead"><h2>Snapshots</h2>${snapsRes.downsampled ? `<span class="muted small">the ${snaps.length} drawn</span>` : ""}</div><div class="tablewrap" id="snaps"></div></div>
      <div class="panel flush"><div class="panelhead"><h2>Leak suspects</h2></div><div id="leaks" style="padding:14px 16px"><span class="muted">Loading…</span></div></div>
    </div>`;
  // What stayed unnamed in the latest snapshot, and what each source said.
  if (last && last.figures.symbolized_ratio != null && last.figures.symbolized_ratio < 1) {
    api(`/api/v1/snapshots/${selPath("#" + last.id)}`).then((s) => {
      const el = document.getElementById("unnamed");
      if (el) el.innerHTML = unnamedPanel(s.symbols);
    }).catch(() => { /* the cards above still stand */ });
  }
  document.getElementById("range").appendChild(rangePicker(range, (r) => { location.hash = `#/node/${enc(name)}?range=${enc(r)}`; }));
  const snapBtn = document.getElementById("snapnow");
  if (snapBtn) snapBtn.addEventListener("click", () => takeSnapshot(name, snapBtn));
  let chart = null;
  if (snaps.length) {
    chart = new TimeChart(document.getElementById("chart"), {
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
    { key: "time_ms", label: `Taken (${zoneName()})`, fmt: (r) => `<a href="#/snapshot/${selPath("#" + r.id)}" data-test="snapshot-link">${esc(fmtTime(r.time_ms, false))}</a>` },
    { key: "id", label: "Id", num: true, fmt: (r) => `#${r.id}` },
    { key: "heap", label: "Heap", num: true, fmt: (r) => fmtBytes(r.heap) },
    { key: "delta", label: "Δ previous", num: true, fmt: (r) => r.delta === null ? "" : `<a class="${r.delta > 0 ? "grow-text" : r.delta < 0 ? "shrink-text" : ""}" href="#/compare?a=${enc("#" + r.prev)}&b=${enc("#" + r.id)}" title="compare with the previous snapshot">${fmtSigned(r.delta, "bytes")}</a>` },
    { key: "format", label: "Format", fmt: (r) => `<span class="muted">${esc(r.format || "?")}</span>` },
  ], rows, { sortKey: "time_ms", asc: false });
  const leaks = document.getElementById("leaks");
  try {
    const ep = await endpoint("/api/v1/leaks");
    if (!ep.available) throw new ApiError(501, ep.note);
    if (total < 3) throw leaksState(total);
    const l = await api(`/api/v1/leaks?node=${enc(name)}&top=30${since}`);
    const nl = (l.nodes || [])[0] || { functions: [] };
    const marks = restartMarks(nl);
    if (chart) { chart.opts.marks = marks; chart.draw(); }
    const lts = nl.lifetimes || [];
    document.getElementById("lifetimes").innerHTML = lts.length > 1
      ? `<span data-test="lifetimes">${lts.length} process lifetimes; restarts at ${marks.map((m) => `<b>${esc(fmtTime(m.t))}</b> (${esc(m.title.replace(/^restart: /, ""))})`).join(", ")}. Leak fits are made within each lifetime.</span>` : "";
    const rows = (nl.functions || []).filter((f) => !f.via).slice(0, 12);
    leaks.innerHTML = `<div class="small muted" style="margin-bottom:8px">The heap grew ${fmtSigned(nl.total_rate_per_hour, "bytes")}/h over ${nl.snapshots} snapshots. Functions whose own allocations rise steadily:</div>` +
      (rows.length ? `<table class="grid" data-test="leaks"><thead><tr><th>Function</th><th class="num">Growth / h</th><th class="num">Cum / h</th><th class="num">Of the growth</th><th class="num">Now</th></tr></thead><tbody>` +
        rows.map((f) => `<tr><td class="fn" title="${esc(f.name)}"><a href="#/function?fn=${enc(reQuote(f.name))}" title="this function across time and the fleet">${esc(f.name)}</a>${f.grows_while_idle ? ' <span class="badge failing">grows while idle</span>' : ""}</td><td class="num grow-text">${fmtSigned(f.rate_per_hour, "bytes")}</td><td class="num muted">${f.cum_rate_per_hour !== undefined ? fmtSigned(f.cum_rate_per_hour, "bytes") : ""}</td><td class="num">${fmtPct(f.share)}</td><td class="num">${fmtBytes(f.last)}</td></tr>`).join("") +
        `</tbody></table>` : `<div class="empty" data-test="no-leaks">No steadily growing function.</div>`) +
      ((nl.stacks || []).length && rows.length ? `<div class="small muted" style="margin:12px 0 6px">Growing call paths (suspect ← callers):</div><table class="grid" data-test="leak-stacks"><thead><tr><th class="num">Growth / h</th><th class="num">Share</th><th>Call path</th></tr></thead><tbody>` +
        nl.stacks.slice(0, 5).map((st) => `<tr><td class="num grow-text">${fmtSigned(st.rate_per_hour, "bytes")}</td><td class="num">${fmtPct(st.share)}</td><td class="mono small">${stackPath(st, 5)}</td></tr>`).join("") + `</tbody></table>` : "");
  } catch (e) {
    leaks.innerHTML = notice(e) + (growth > 0 && snaps.length > 2 ? `<p class="small">Meanwhile: the heap grew by <b>${fmtBytes(growth)}</b> over these snapshots; <a href="#/compare?a=${enc("#" + first.id)}&b=${enc("#" + last.id)}">compare the first and the latest</a> to see which call paths grew.</p>` : "");
  }
}

// "Take a snapshot now": POST, which returns when the poll is over (as long
// as the node's timeouts and retries allow). Progress while it runs; then
// the page reloads with the new snapshot, or says in words why there is
// none (a node that failed is not an error of this page).
let snapNowFlash = null;
async function takeSnapshot(name, btn) {
  const out = document.getElementById("snapnow-result");
  const seq = navSeq;
  const t0 = Date.now();
  btn.disabled = true;
  const tick = () => {
    const s = Math.round((Date.now() - t0) / 1000);
    out.innerHTML = `<div class="notice info" data-test="snapnow-progress">Polling ${esc(name)}… ${s} s</div>`;
  };
  tick();
  const timer = setInterval(tick, 1000);
  let html;
  try {
    const r = await api(`/api/v1/nodes/${enc(name)}/snapshot`, { method: "POST" });
    const s = r.snapshot;
    html = s
      ? `<div class="notice info" data-test="snapnow-done">New snapshot <a href="#/snapshot/${selPath("#" + s.id)}" data-test="snapnow-link">#${s.id}</a> taken ${esc(fmtTime(s.time_ms))} (${fmtBytes(s.totals.inuse_space)} in use; ${(r.elapsed_ms / 1000).toFixed(1)} s, ${r.attempts} request${r.attempts === 1 ? "" : "s"}).</div>`
      : `<div class="notice info" data-test="snapnow-done">${esc(name)} was polled${r.note ? `: ${esc(r.note)}` : "."}</div>`;
  } catch (e) {
    const msg = String(e.message || e);
    const cls = e instanceof ApiError && (e.status === 409 || e.status === 503) ? "notice" : "notice error";
    const lead = e instanceof ApiError && e.status === 409 ? "Already polling: "
      : e instanceof ApiError && e.status === 403 ? "Not allowed here: "
      : e instanceof ApiError && e.status === 502 ? "No snapshot: " : "Could not take a snapshot: ";
    html = `<div class="${cls}" data-test="snapnow-failed">${esc(lead + msg)}</div>`;
  } finally {
    clearInterval(timer);
    btn.disabled = false;
  }
  if (seq !== navSeq) return; // the user went elsewhere meanwhile
  snapNowFlash = { node: name, html };
  route(); // the node page again, with the new snapshot in its chart and counts
}

// A growing stack as "suspect ← caller ← …" (frames come root first).
function stackPath(st, n = 4) {
  const f = (st.frames || []).slice().reverse();
  return f.slice(0, n).map(esc).join(" <span class=\"muted\">←</span> ") + (f.length > n ? ` <span class="muted">← …</span>` : "");
}

const reQuote = (name) => "^" + name.replace(/[.*+?^${}()|[\]\\]/g, "\\$&") + "$";

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

function wireDownloads(root, pathOf) {
  root.querySelectorAll("button[data-dl]").forEach((b) => b.addEventListener("click", () => {
    const f = b.dataset.dl;
    download(f === "raw" ? pathOf.raw : pathOf(f), `heapfleet.${f === "raw" ? "heap" : f}`);
  }));
}

// The dump as the node served it, where the server keeps it (query export --raw).
function rawButton(capab) {
  const ep = (capab.endpoints || []).find((e) => e.path === "/api/v1/snapshots/{sel}/raw");
  return ep && ep.available
    ? `<span class="seg"><button data-dl="raw" data-test="raw-download" title="the dump as the node served it, byte for byte (for jeprof, or a bug report)">raw dump</button></span>`
    : "";
}

// Query-string parameters the flame graph's filters send to the API.
function filterQuery(q) {
  const out = [];
  for (const k of ["sample", "focus", "ignore"]) if (q.get(k)) out.push(`${k}=${enc(q.get(k))}`);
  return out.join("&");
}

function orientationToggle() {
  return `<label class="small muted" title="root at the bottom (as the SVG download) or on top"><input type="checkbox" id="icicle" data-test="icicle" ${flameIcicle() ? "checked" : ""}> root on top</label>`;
}

// Objects no source could name, each with every source asked and its answer
// (the API's "symbols" object; "" when all is named).
function unnamedPanel(sym) {
  if (!sym || !sym.unnamed || !sym.unnamed.length) return sym && sym.resymbolized ? `<div class="small muted" data-test="resymbolized">${esc(sym.resymbolized)}</div>` : "";
  return `<div class="panel" data-test="unnamed"><div class="panelhead" style="padding:0 0 8px;border:0"><h2>Unnamed objects</h2></div>
    ${sym.resymbolized ? `<div class="small muted" data-test="resymbolized">${esc(sym.resymbolized)}</div>` : ""}
    ${sym.unnamed.map((u) => `<div class="small"><b>${esc(u.object)}</b>${u.build_id ? ` <span class="muted">build-id ${esc(u.build_id)}</span>` : ` <span class="muted">no build-id known</span>`}
      <table class="small"><tbody>${(u.tried.length ? u.tried : [{ source: "", said: u.message }]).map((t) => `<tr><td>${esc(t.source)}</td><td>${esc(t.said)}</td></tr>`).join("")}</tbody></table></div>`).join("")}</div>`;
}

async function snapshotPage(sel, q) {
  const seq = navSeq;
  const sample = q.get("sample") || "inuse_space";
  main.innerHTML = `<p class="muted">Loading snapshot ${esc(sel)}…</p>`;
  const info = await api(`/api/v1/snapshots/${selPath(sel)}`);
  // A page the user already left must neither draw nor rewrite the URL
  // (a stale render would replace the page they went to).
  if (seq !== navSeq) return;
  // Pin: a page opened as "latest" (or NODE@TIME) shows one snapshot and
  // keeps showing it: the URL and every download name its id, so a new
  // snapshot arriving meanwhile changes nothing on screen.
  const pinned = "#" + info.id;
  const openedAs = sel !== pinned ? sel : null;
  if (openedAs) {
    const qs = q.toString();
    history.replaceState(null, "", `#/snapshot/${selPath(pinned)}${qs ? "?" + qs : ""}`);
  }
  const fq = filterQuery(q);
  const sq = fq ? "&" + fq : "";
  let tree, top, capab;
  try {
    [tree, top, capab] = await Promise.all([
      api(`/api/v1/snapshots/${selPath(pinned)}/tree?${sq.slice(1)}`),
      api(`/api/v1/snapshots/${selPath(pinned)}/top?top=2000${sq}`), // the table shows at most 2000 rows
      caps(),
    ]);
  } catch (e) {
    if (seq !== navSeq) return;
    if (!(e instanceof ApiError && e.status === 400)) throw e;
    // A bad focus/ignore pattern: say so and offer the page without it.
    main.innerHTML = notice(e, ` · <a href="#/snapshot/${selPath(pinned)}">show the snapshot without filters</a>`);
    return;
  }
  if (seq !== navSeq) return;
  const unit = tree.unit;
  const p = info.profile;
  const hide = q.get("hide") || "";
  let hideRe = null;
  if (hide) { try { hideRe = new RegExp(hide); } catch (e) { toast(`hide: ${e.message}`); } }
  const shown = hideRe ? hideFrames(tree, hideRe) : tree;
  // Over the view budget the server draws the heaviest stacks only; the
  // snapshot's total and percentages still count what it left out (unless
  // a focus/ignore filter is on: that filters the drawn stacks only).
  const pruned = tree.snapshot && tree.snapshot.pruned;
  const filtered = fq && fq !== "sample=" + sample;
  const dropped = pruned && !filtered ? pruned.dropped[sample] || 0 : 0;
  main.innerHTML = `
    <div class="crumbs"><a href="#/">Fleet</a> / <a href="#/node/${enc(info.node)}">${esc(info.node)}</a> / snapshot #${info.id}</div>
    <div class="pagehead"><div><h1 data-test="snapshot-title">${esc(info.node)} · ${esc(fmtTime(info.time_ms))}</h1>
      <div class="sub"><span data-test="snapshot-id">#${info.id}</span>${openedAs ? ` <span class="badge kind" data-test="pinned" title="opened as ${esc(openedAs)}; this page and its downloads stay on #${info.id}">pinned: opened as ${esc(openedAs)}</span>` : ""} · ${esc(p.format)}${p.period > 1 ? ` · sampled every ${fmtBytes(p.period)}` : " · every allocation recorded"} · ${pruned ? `${pruned.stacks_total.toLocaleString()} stacks (${pruned.stacks_kept.toLocaleString()} drawn)` : `${p.stacks.toLocaleString()} stacks`} · ${fmtBytes(info.raw_bytes)} on disk</div></div>
      <span style="flex:1"></span>
      <div class="toolbar"><a class="button" href="#/compare?a=${enc(info.node + "@<=" + new Date(info.time_ms - 1).toISOString())}&b=${enc(pinned)}" title="compare with the snapshot before this one">Compare with previous</a></div>
    </div>
    ${prunedNotice(tree.snapshot)}
    <div class="cards">
      <div class="card"><div class="label">${esc(sample.replace("_", " "))}${fq && fq !== "sample=" + sample ? " (filtered)" : ""}</div><div class="value" data-test="snapshot-total">${fmtValue(tree.total + dropped, unit)}</div>${dropped ? `<div class="muted small">${fmtValue(tree.total, unit)} drawn</div>` : ""}</div>
      <div class="card"><div class="label">Functions</div><div class="value">${top.functions_total.toLocaleString()}</div></div>
      <div class="card"><div class="label">Frames in graph</div><div class="value">${tree.nodes.toLocaleString()}</div></div>
      <div class="card"><div class="label">Named bytes</div><div class="value" data-test="named-bytes">${info.symbols && info.symbols.named_bytes_ratio != null ? fmtPct(info.symbols.named_bytes_ratio) : "–"}</div></div>
    </div>
    ${unnamedPanel(info.symbols)}
    <div class="panel flush">
      <div class="panelhead"><h2>Flame graph</h2>
        <input type="search" id="search" placeholder="Search functions (regex)…" aria-label="search the flame graph" style="width:240px">
        <button id="reset">Reset zoom</button>
        <select id="sample" aria-label="sample type">${["inuse_space", "inuse_objects", "alloc_space", "alloc_objects"].map((s) => `<option ${s === sample ? "selected" : ""} ${info.totals[s] || s === sample ? "" : "disabled title=\"this profile has no data for it\""}>${s}</option>`).join("")}</select>
        ${orientationToggle()}
        <span style="flex:1"></span>${downloadButtons(capab.formats)}${rawButton(capab)}
      </div>
      <form class="filters" id="filters" data-test="filters">
        <label class="small">focus <input type="text" name="focus" value="${esc(q.get("focus") || "")}" placeholder="keep stacks through (regex)" aria-label="focus"></label>
        <label class="small">ignore <input type="text" name="ignore" value="${esc(q.get("ignore") || "")}" placeholder="drop stacks through (regex)" aria-label="ignore"></label>
        <label class="small">hide <input type="text" name="hide" value="${esc(hide)}" placeholder="take frames out of stacks (regex)" aria-label="hide"></label>
        <button type="submit">Apply</button>
        ${fq.replace(/(^|&)sample=[^&]*/, "") || hide ? `<a href="#/snapshot/${selPath(pinned)}${sample !== "inuse_space" ? "?sample=" + enc(sample) : ""}" data-test="clear-filters">clear</a>` : ""}
        <span class="muted small">focus and ignore as in <code>query top --focus/--ignore</code>; the downloads follow them</span>
      </form>
      <div id="flame"></div>
    </div>
    <div class="panel flush" id="sandwich" hidden></div>
    <div class="panel flush"><div class="panelhead"><h2>Top functions</h2><span class="muted small">click a row to find it in the flame graph; ⇅ shows its callers and callees</span></div><div class="tablewrap" id="top"></div></div>`;
  const dl = (f) => `/api/v1/snapshots/${selPath(pinned)}/profile?format=${f}&download=1${sq}`;
  dl.raw = `/api/v1/snapshots/${selPath(pinned)}/raw?download=1`;
  wireDownloads(main, dl);
  const fg = new FlameGraph(document.getElementById("flame"));
  cleanups.push(() => fg.destroy());
  fg.setData(shown, unit);
  const setQ = (mut) => {
    const n = new URLSearchParams(q);
    mut(n);
    for (const [k, v] of [...n]) if (!v) n.delete(k);
    const qs = n.toString();
    location.hash = `#/snapshot/${selPath(pinned)}${qs ? "?" + qs : ""}`;
  };
  document.getElementById("filters").addEventListener("submit", (e) => {
    e.preventDefault();
    const form = new FormData(e.target);
    setQ((n) => { for (const k of ["focus", "ignore", "hide"]) n.set(k, String(form.get(k) || "").trim()); n.delete("fn"); });
  });
  document.getElementById("icicle").addEventListener("change", (e) => { setFlameIcicle(e.target.checked); fg.setIcicle(e.target.checked); });
  const search = document.getElementById("search");
  let timer = 0;
  search.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(() => fg.setSearch(search.value.trim()), 120); });
  search.addEventListener("keydown", (e) => { if (e.key === "Escape") { search.value = ""; fg.setSearch(""); } });
  document.getElementById("reset").addEventListener("click", () => fg.reset());
  document.getElementById("sample").addEventListener("change", (e) => setQ((n) => n.set("sample", e.target.value)));
  const total = (top.total || 0) + dropped || 1;
  const topEl = document.getElementById("top");
  sortableTable(topEl, [
    { key: "name", label: "Function", asc: true, cls: "fn", title: (r) => r.name, fmt: (r) => `<a href="#" data-sandwich="${esc(r.name)}" title="callers and callees (sandwich)" data-test="sandwich-link">⇅</a> ${esc(r.name)}` },
    { key: "flat", label: "Flat", num: true, fmt: (r) => fmtValue(r.flat, unit) },
    { key: "flatp", label: "Flat %", num: true, get: (r) => r.flat, fmt: (r) => fmtPct(r.flat / total) },
    { key: "cum", label: "Cum", num: true, fmt: (r) => fmtValue(r.cum, unit) },
    { key: "cump", label: "Cum %", num: true, get: (r) => r.cum, fmt: (r) => fmtPct(r.cum / total) },
  ], top.functions, { sortKey: "flat", testid: "top-table", onRow: (r) => {
    search.value = reQuote(r.name);
    fg.setSearch(search.value);
    document.getElementById("flame").scrollIntoView({ behavior: "smooth", block: "center" });
  } });
  topEl.addEventListener("click", (e) => {
    const a = e.target.closest("a[data-sandwich]");
    if (!a) return;
    e.preventDefault();
    setQ((n) => n.set("fn", a.dataset.sandwich));
  });
  if (q.get("fn")) showSandwich(document.getElementById("sandwich"), shown, q.get("fn"), unit, () => setQ((n) => n.delete("fn")));
  setStatus("");
}

// Callers above, callees below one function, as pprof's sandwich view.
function showSandwich(el, tree, name, unit, close) {
  const sw = sandwich(tree, name);
  el.hidden = false;
  if (!sw) { el.innerHTML = `<div class="panelhead"><h2>Callers and callees</h2></div><div class="empty">${esc(name)} is not in this graph (filters may have removed it).</div>`; return; }
  el.innerHTML = `<div class="panelhead"><h2>Callers and callees of <span class="mono" data-test="sandwich-fn">${esc(name)}</span></h2>
      <span class="muted small" data-test="sandwich-total">${fmtValue(sw.total, unit)} through ${sw.calls} call path${sw.calls === 1 ? "" : "s"}</span><span style="flex:1"></span><button id="swclose">Close</button></div>
    <div class="sandwich"><h3>Callers <span class="muted small">(who calls it; the function at the bottom)</span></h3><div id="swcallers" data-test="sandwich-callers"></div>
      <h3>Callees <span class="muted small">(what it calls; the function on top)</span></h3><div id="swcallees" data-test="sandwich-callees"></div></div>`;
  const up = new FlameGraph(document.getElementById("swcallers"), { icicle: false, namedRoot: true });
  const down = new FlameGraph(document.getElementById("swcallees"), { icicle: true, namedRoot: true });
  cleanups.push(() => { up.destroy(); down.destroy(); });
  up.setData(sw.callers, unit);
  down.setData(sw.callees, unit);
  document.getElementById("swclose").addEventListener("click", close);
  el.scrollIntoView({ block: "start" });
}

// ---- compare ------------------------------------------------------------------

async function comparePage(q) {
  const a = q.get("a") || "", b = q.get("b") || "";
  const sample = q.get("sample") || "inuse_space";
  const normalize = q.get("normalize") === "1";
  const seq = navSeq;
  main.innerHTML = `<p class="muted">Loading…</p>`;
  const nodes = (await api("/api/v1/nodes")).nodes.filter((n) => n.snapshots > 0);
  if (seq !== navSeq) return;
  main.innerHTML = `
    <div class="pagehead"><div><h1>Compare</h1><div class="sub">B minus A: two nodes, or two times of one node</div></div></div>
    <div class="panel"><form id="cmpform"><div class="pickers">
      ${["a", "b"].map((k) => `<label>${k.toUpperCase()} — ${k === "a" ? "baseline" : "compared"}<div class="row">
        <input type="text" class="selinput" id="${k}text" name="${k}" value="${esc(k === "a" ? a : b)}" placeholder="NODE, NODE@-1h, NODE@2026-11-22T07:00Z, #ID" aria-label="${k} selector" data-test="${k}-input" spellcheck="false">
        <select id="${k}node" aria-label="${k} node">${nodes.map((n) => `<option>${esc(n.name)}</option>`).join("")}</select>
        <select id="${k}snap" aria-label="${k} snapshot"></select></div></label>`).join("")}
      <label>Sample<div class="row"><select id="csample" name="sample" aria-label="sample type">${["inuse_space", "inuse_objects", "alloc_space", "alloc_objects"].map((x) => `<option ${x === sample ? "selected" : ""}>${x}</option>`).join("")}</select>
        <label class="small"><input type="checkbox" id="cnorm" name="normalize" value="1" ${normalize ? "checked" : ""}> normalize</label></div></label>
      <button class="primary" id="go" type="submit">Compare</button>
    </div></form><div class="small muted" style="margin-top:8px">Type selectors as in the CLI (<code class="mono">NODE</code>, <code class="mono">NODE@TIME</code> with an ISO time or a relative one such as <code class="mono">-3h</code>, <code class="mono">#ID</code>) or pick them. <i>normalize</i> compares each function's share of its side's total. Current: A = <b data-test="sel-a">${esc(a || "–")}</b>, B = <b data-test="sel-b">${esc(b || "–")}</b></div></div>
    <div id="result"></div>`;
  const fill = async (k, sel) => {
    const nodeSel = document.getElementById(k + "node"), snapSel = document.getElementById(k + "snap");
    const text = document.getElementById(k + "text");
    const load = async (pick) => {
      const r = await api(`/api/v1/nodes/${enc(nodeSel.value)}/snapshots?points=500`);
      snapSel.innerHTML = `<option value="${esc(nodeSel.value)}">latest</option>` + r.snapshots.slice().reverse().map((s) => `<option value="#${s.id}">${esc(fmtTime(s.time_ms))} · #${s.id} · ${fmtBytes(s.totals.inuse_space)}</option>`).join("");
      if (pick) snapSel.value = pick;
      if (pick && snapSel.value !== pick) {
        snapSel.insertAdjacentHTML("afterbegin", `<option value="${esc(pick)}">${esc(pick)}</option>`);
        snapSel.value = pick;
      }
      if (!pick || !text.value) text.value = snapSel.value;
    };
    nodeSel.addEventListener("change", () => load(null));
    snapSel.addEventListener("change", () => { text.value = snapSel.value; });
    let pick = sel || null;
    if (sel && !sel.startsWith("#")) nodeSel.value = sel.split("@")[0];
    else if (sel && sel.startsWith("#")) {
      try { const s = await api(`/api/v1/snapshots/${selPath(sel)}`); nodeSel.value = s.node; } catch (e) { /* shown below */ }
    } else if (k === "b" && nodes.length > 1) nodeSel.selectedIndex = 1;
    await load(pick);
  };
  await Promise.all([fill("a", a), fill("b", b)]);
  document.getElementById("cmpform").addEventListener("submit", (e) => {
    e.preventDefault();
    const n = new URLSearchParams();
    n.set("a", document.getElementById("atext").value.trim());
    n.set("b", document.getElementById("btext").value.trim());
    if (document.getElementById("csample").value !== "inuse_space") n.set("sample", document.getElementById("csample").value);
    if (document.getElementById("cnorm").checked) n.set("normalize", "1");
    location.hash = `#/compare?${n.toString()}`;
  });
  if (!a || !b) {
    document.getElementById("result").innerHTML = `<div class="panel empty">Pick two snapshots: two nodes to see which call paths one holds more of, or two times of one node to see what grew.</div>`;
    return;
  }
  const res = document.getElementById("result");
  res.innerHTML = `<p class="muted">Computing the difference…</p>`;
  const opts = `${sample !== "inuse_space" ? "&sample=" + enc(sample) : ""}${normalize ? "&normalize=1" : ""}`;
  let d;
  try { d = await api(`/api/v1/diff?a=${enc(a)}&b=${enc(b)}${opts}`); } catch (e) { res.innerHTML = notice(e); return; }
  const unit = d.unit, ta = d.a.total, tb = d.b.total;
  const label = (x) => `${esc(x.snapshot.node)} · ${esc(fmtTime(x.snapshot.time_ms))} <span class="muted">#${x.snapshot.id}</span>`;
  // Downloads name the two snapshots this page shows (pinned by id).
  const pinA = "#" + d.a.snapshot.id, pinB = "#" + d.b.snapshot.id;
  const fmtShare = (v) => (v > 0 ? "+" : v < 0 ? "−" : "") + fmtPct(Math.abs(v));
  res.innerHTML = `
    ${prunedNotice(d.a.snapshot, "A: ")}${prunedNotice(d.b.snapshot, "B: ")}
    <div class="cards">
      <div class="card"><div class="label">A</div><div class="value" style="font-size:18px">${fmtValue(ta, unit)}</div><div class="small" data-test="label-a">${label(d.a)}</div></div>
      <div class="card"><div class="label">B</div><div class="value" style="font-size:18px">${fmtValue(tb, unit)}</div><div class="small" data-test="label-b">${label(d.b)}</div></div>
      <div class="card"><div class="label">Change</div><div class="value ${d.delta > 0 ? "grow" : d.delta < 0 ? "shrink" : ""}" data-test="diff-delta">${fmtSigned(d.delta, unit)}</div><div class="small muted">${ta ? (d.delta >= 0 ? "+" : "−") + fmtPct(Math.abs(d.delta) / ta) : ""}${d.sigma ? ` · ±${fmtValue(d.sigma, unit)} sampling noise${d.noise ? " (within noise)" : ""}` : ""}</div></div>
      <div class="card"><div class="label">Functions changed</div><div class="value">${d.functions.filter((f) => f.delta_flat || f.delta_cum).length}${d.functions_total > d.functions.length ? "+" : ""}</div></div>
    </div>
    <div class="panel flush"><div class="panelhead"><h2>Differential flame graph</h2><span class="muted small">width: the larger of A and B, so vanished stacks show; colour: the change from A</span><span style="flex:1"></span>
      <input type="search" id="dsearch" placeholder="Search functions…" aria-label="search the differential flame graph" style="width:200px"><button id="dreset">Reset zoom</button>${orientationToggle()}
      <span class="muted small">Download</span><span class="seg" data-test="diff-downloads">${[["text", "text"], ["collapsed", "collapsed"], ["json", "JSON"], ["svg", "SVG"]].map(([f, l]) => `<button data-dl="${f}" title="download the diff as ${l} (query diff --format ${f})">${l}</button>`).join("")}</span></div>
      <div id="dflame"></div></div>
    <div class="panel flush"><div class="panelhead"><h2>Largest changes</h2>${normalize ? `<span class="muted small" data-test="normalized">Δ columns are changes in share of each side's total</span>` : ""}</div><div class="tablewrap" id="dtable"></div></div>`;
  wireDownloads(res, (f) => `/api/v1/diff?a=${enc(pinA)}&b=${enc(pinB)}${opts}&format=${f}&download=1`);
  document.getElementById("icicle").addEventListener("change", (e) => { setFlameIcicle(e.target.checked); fg.setIcicle(e.target.checked); });
  const dfmt = (v) => (normalize ? fmtShare(v) : fmtSigned(v, unit));
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
    { key: "delta_flat", label: "Δ flat", num: true, get: (r) => Math.abs(r.delta_flat), fmt: (r) => `<span class="${dcls(r.delta_flat)}">${dfmt(r.delta_flat)}</span>` },
    { key: "a_cum", label: "A cum", num: true, fmt: (r) => fmtValue(r.a_cum, unit) },
    { key: "b_cum", label: "B cum", num: true, fmt: (r) => fmtValue(r.b_cum, unit) },
    { key: "delta_cum", label: "Δ cum", num: true, get: (r) => Math.abs(r.delta_cum), fmt: (r) => `<span class="${dcls(r.delta_cum)}">${dfmt(r.delta_cum)}</span>` },
    { key: "sigma_flat", label: "± noise", num: true, title: () => `standard error of Δ flat from sampling; ~ marks a change within ${d.noise_sigmas}σ`,
      fmt: (r) => `<span class="muted">${r.noise_flat ? "~ " : ""}${r.sigma_flat ? "±" + (normalize ? fmtPct(r.sigma_flat) : fmtValue(r.sigma_flat, unit)) : "exact"}</span>` },
  ], d.functions, { sortKey: "delta_flat", testid: "delta-table", onRow: (r) => {
    s.value = "^" + r.name.replace(/[.*+?^${}()|[\]\\]/g, "\\$&") + "$"; fg.setSearch(s.value);
  } });
}

// ---- one node against the fleet median -------------------------------------------

// Every peer's latest snapshot as a call tree (pinned by id); per call path
// the median of the peers' values (a peer without the path counts 0); the
// node against it as a differential flame graph: width the larger of the two,
// colour the node's excess (red) or shortfall (blue). Peers are the nodes of
// the same kind when there are at least 3, else the whole fleet.
const MAX_PEERS = 60;
async function medianPage(q) {
  const name = q.get("node") || "";
  const sample = q.get("sample") || "inuse_space";
  const seq = navSeq;
  main.innerHTML = `<p class="muted">Loading the fleet…</p>`;
  const nodes = (await api("/api/v1/nodes")).nodes.filter((n) => n.latest);
  if (seq !== navSeq) return;
  const me = nodes.find((n) => n.name === name);
  if (!me) { main.innerHTML = notice(new NormalState(`${name || "No node"} has no snapshot to compare with the fleet yet.`)); return; }
  const sameKind = nodes.filter((n) => n.kind === me.kind);
  const pool0 = sameKind.length >= 3 ? sameKind : nodes;
  const peers = pool0.slice(0, MAX_PEERS);
  if (!peers.includes(me)) peers.push(me);
  main.innerHTML = `
    <div class="crumbs"><a href="#/">Fleet</a> / <a href="#/node/${enc(name)}">${esc(name)}</a> / against the fleet median</div>
    <div class="pagehead"><div><h1 data-test="median-title">${esc(name)} against the fleet median</h1>
      <div class="sub" data-test="median-peers">${peers.length} ${pool0 === sameKind ? esc(me.kind) + " " : ""}nodes' latest snapshots${pool0.length > MAX_PEERS ? ` (the first ${MAX_PEERS} of ${pool0.length})` : ""}; per call path the median across them</div></div></div>
    <div id="mresult"><p class="muted" id="mprog">Reading ${peers.length} call trees…</p></div>`;
  const trees = await pool(peers, 4, async (n) => ({ node: n.name, id: n.latest.id,
    t: await api(`/api/v1/snapshots/${selPath("#" + n.latest.id)}/tree?prune=0.001&sample=${enc(sample)}`) }));
  if (seq !== navSeq) return;
  // path key -> values per peer
  const SEP = "\u0001";
  const vals = new Map();
  trees.forEach(({ t }, k) => {
    const st = [[t.root, ""]];
    while (st.length) {
      const [nd, key] = st.pop();
      const kk = nd === t.root ? "" : key + SEP + (nd.m ? "(small frames)" : t.names[nd.n]);
      let a = vals.get(kk);
      if (!a) { a = new Float64Array(trees.length); vals.set(kk, a); }
      a[k] += nd.v;
      for (const ch of nd.c || []) st.push([ch, kk]);
    }
  });
  const med = (a) => { const x = Array.from(a).sort((p, r) => p - r); const m = x.length >> 1; return x.length % 2 ? x[m] : (x[m - 1] + x[m]) / 2; };
  const mine = trees.findIndex((x) => x.node === name);
  const names = [], nameIdx = new Map();
  const ni = (s) => { let i = nameIdx.get(s); if (i === undefined) { i = names.length; names.push(s); nameIdx.set(s, i); } return i; };
  ni("all");
  const root = { n: 0, v: 0, b: 0 };
  const byKey = new Map([["", root]]);
  const keys = [...vals.keys()].sort((x, y) => x.split(SEP).length - y.split(SEP).length);
  for (const key of keys) {
    const a = vals.get(key);
    const v = Math.round(a[mine]), b = Math.round(med(a));
    if (key === "") { root.v = v; root.b = b; continue; }
    if (!v && !b) continue;
    const cut = key.lastIndexOf(SEP);
    const parent = byKey.get(key.slice(0, cut));
    if (!parent) continue;
    const nd = { n: ni(key.slice(cut + 1)), v, b };
    (parent.c || (parent.c = [])).push(nd);
    byKey.set(key, nd);
  }
  for (const nd of byKey.values()) if (nd.c) nd.c.sort((x, y) => names[x.n].localeCompare(names[y.n]));
  // Self values per function: the node's excess over the median.
  const self = new Map();
  for (const nd of byKey.values()) {
    if (nd === root) continue;
    let sv = nd.v, sb = nd.b;
    for (const ch of nd.c || []) { sv -= ch.v; sb -= ch.b; }
    const f = names[nd.n], cur = self.get(f) || { name: f, node: 0, median: 0 };
    cur.node += sv; cur.median += sb;
    self.set(f, cur);
  }
  const rows = [...self.values()].map((r) => ({ ...r, delta: r.node - r.median })).filter((r) => r.delta);
  const unit = trees[0]?.t.unit || "bytes";
  const out = document.getElementById("mresult");
  out.innerHTML = `
    <div class="cards">
      <div class="card"><div class="label">${esc(name)}</div><div class="value">${fmtValue(root.v, unit)}</div><div class="small muted">#${me.latest.id} · ${esc(fmtTime(me.latest.time_ms))}</div></div>
      <div class="card"><div class="label">Fleet median (sum of per-path medians)</div><div class="value">${fmtValue(root.b, unit)}</div></div>
      <div class="card"><div class="label">Difference</div><div class="value ${root.v > root.b ? "grow" : "shrink"}" data-test="median-delta">${fmtSigned(root.v - root.b, unit)}</div></div>
    </div>
    <div class="panel flush"><div class="panelhead"><h2>Differential flame graph</h2><span class="muted small">width: the larger of the node and the median; red: the node holds more</span><span style="flex:1"></span>${orientationToggle()}</div><div id="mflame"></div></div>
    <div class="panel flush"><div class="panelhead"><h2>Functions the node holds more or less of</h2><span class="muted small">self values</span></div><div class="tablewrap" id="mtable"></div></div>`;
  const fg = new FlameGraph(document.getElementById("mflame"));
  cleanups.push(() => fg.destroy());
  fg.setData({ names, root }, unit);
  document.getElementById("icicle").addEventListener("change", (e) => { setFlameIcicle(e.target.checked); fg.setIcicle(e.target.checked); });
  sortableTable(document.getElementById("mtable"), [
    { key: "name", label: "Function", asc: true, cls: "fn", title: (r) => r.name, fmt: (r) => esc(r.name) },
    { key: "node", label: name, num: true, fmt: (r) => fmtValue(r.node, unit) },
    { key: "median", label: "Fleet median", num: true, fmt: (r) => fmtValue(r.median, unit) },
    { key: "delta", label: "Difference", num: true, get: (r) => r.delta, fmt: (r) => `<span class="${r.delta > 0 ? "grow-text" : "shrink-text"}">${fmtSigned(r.delta, unit)}</span>` },
  ], rows, { sortKey: "delta", testid: "median-table" });
}

// ---- fleet leaks ---------------------------------------------------------------

// Run fn over items, at most `width` at a time (the server runs 16 data
// requests at once; a 1,000-node fleet must not get 503s).
async function pool(items, width, fn) {
  const out = new Array(items.length);
  let next = 0;
  const worker = async () => { while (next < items.length) { const i = next++; out[i] = await fn(items[i], i); } };
  await Promise.all(Array.from({ length: Math.min(width, items.length) }, worker));
  return out;
}

async function leaksPage(q) {
  const range = q.get("range") || "all";
  const since = range === "all" ? "" : `&since=${enc(range)}`;
  main.innerHTML = `<p class="muted">Loading the fleet…</p>`;
  const [nodesRes, ep] = await Promise.all([api("/api/v1/nodes"), endpoint("/api/v1/leaks")]);
  main.innerHTML = `
    <div class="pagehead"><div><h1>Leak suspects across the fleet</h1><div class="sub">Per node, the functions whose own allocations rise steadily (query leaks), fitted within each process lifetime</div></div>
      <span style="flex:1"></span><span id="range"></span></div>
    <div class="panel flush"><div class="panelhead"><h2>Nodes</h2><span class="muted small" id="lprogress"></span></div><div id="ltable"></div></div>`;
  document.getElementById("range").appendChild(rangePicker(range, (r) => { location.hash = `#/leaks?range=${enc(r)}`; }));
  if (!ep.available) { document.getElementById("ltable").innerHTML = notice(new ApiError(501, ep.note)); return; }
  const nodes = nodesRes.nodes;
  const prog = document.getElementById("lprogress");
  let done = 0;
  const seq = navSeq;
  const rows = await pool(nodes, 4, async (n) => {
    const row = { node: n.name, kind: n.kind, count: 0, rate: null, suspect: null, others: [], state: null, lifetimes: 0 };
    try {
      // Stored snapshots in range (the node list's count includes failed
      // polls): fewer than 3 is a normal state, not a request to fail.
      row.count = (await api(`/api/v1/nodes/${enc(n.name)}/snapshots?points=2${since}`)).total;
      if (row.count < 3) row.state = leaksState(row.count).message;
      else {
        const l = await api(`/api/v1/leaks?node=${enc(n.name)}&top=5${since}`);
        const nl = (l.nodes || [])[0] || {};
        const fs = (nl.functions || []).filter((x) => !x.via);
        row.lifetimes = (nl.lifetimes || []).length;
        row.restarts = restartMarks(nl);
        if (fs.length) { row.suspect = fs[0]; row.others = fs.slice(1, 3); row.rate = fs[0].rate_per_hour; row.stack = (nl.stacks || [])[0]; } else row.state = "No steadily growing function.";
      }
    } catch (e) {
      row.state = e instanceof ApiError && e.status === 400 ? e.message : `error: ${e.message}`;
    }
    if (seq === navSeq) prog.textContent = `${++done} of ${nodes.length} nodes analysed`;
    return row;
  });
  if (seq !== navSeq) return;
  prog.textContent = `${rows.filter((r) => r.suspect).length} of ${nodes.length} nodes have a suspect`;
  sortableTable(document.getElementById("ltable"), [
    { key: "node", label: "Node", asc: true, fmt: (r) => `<a href="#/node/${enc(r.node)}">${esc(r.node)}</a> <span class="badge kind">${esc(r.kind)}</span>` },
    { key: "suspect", label: "Suspects", get: (r) => (r.suspect ? r.suspect.name : ""), cls: "fn",
      fmt: (r) => r.suspect ? [r.suspect, ...r.others].map((f, i) => `<div${i ? ' class="small"' : ""}><a href="#/function?fn=${enc(reQuote(f.name))}" data-test="leak-suspect" title="${esc(f.name)}">${esc(f.name)}</a>${i ? ` <span class="muted">${fmtSigned(f.rate_per_hour, "bytes")}/h</span>` : ""}</div>`).join("") +
        (r.stack ? `<div class="small mono" data-test="leak-stack" style="margin-top:2px">${stackPath(r.stack, 3)}</div>` : "") : `<span class="muted">${esc(r.state)}</span>` },
    { key: "rate", label: "Growth / h", num: true, fmt: (r) => r.rate === null ? "" : `<span class="grow-text">${fmtSigned(r.rate, "bytes")}</span>` },
    { key: "share", label: "Of the node's growth", num: true, get: (r) => (r.suspect ? r.suspect.share : null), fmt: (r) => r.suspect ? fmtPct(r.suspect.share) : "" },
    { key: "lifetimes", label: "Lifetimes", num: true, title: (r) => (r.restarts || []).map((m) => m.title).join("; "), fmt: (r) => r.lifetimes ? `${r.lifetimes}${r.lifetimes > 1 ? ` <span class="badge outlier" data-test="restarted">restarted</span>` : ""}` : "" },
    { key: "count", label: "Snapshots", num: true },
  ], rows, { sortKey: "rate", testid: "fleet-leaks" });
}

// ---- one function across time and the fleet ---------------------------------------

const COLORS = ["#e8590c", "#3b5bdb", "#2b8a3e", "#c2255c", "#7048e8", "#0c8599", "#e67700", "#495057", "#d6336c", "#5c940d"];

async function functionPage(q) {
  const fn = q.get("fn") || "";
  const range = q.get("range") || "all";
  const since = range === "all" ? "" : `&since=${enc(range)}`;
  main.innerHTML = `
    <div class="pagehead"><div><h1>Function trend</h1><div class="sub">One function's cumulative bytes across time, node by node, and across the fleet now</div></div></div>
    <div class="panel"><form id="fnform" class="row" style="display:flex;gap:8px;align-items:center">
      <input type="text" class="selinput" style="width:420px" name="fn" id="fninput" value="${esc(fn)}" placeholder="function (regex), e.g. TabletSchema" aria-label="function" data-test="fn-input" spellcheck="false">
      <button class="primary" type="submit">Show</button><span style="flex:1"></span><span id="range"></span></form></div>
    <div id="fnresult"></div>`;
  document.getElementById("range").appendChild(rangePicker(range, (r) => { location.hash = `#/function?fn=${enc(fn)}&range=${enc(r)}`; }));
  document.getElementById("fnform").addEventListener("submit", (e) => {
    e.preventDefault();
    location.hash = `#/function?fn=${enc(document.getElementById("fninput").value.trim())}${range !== "all" ? "&range=" + enc(range) : ""}`;
  });
  const out = document.getElementById("fnresult");
  if (!fn) { out.innerHTML = `<div class="panel empty">Name a function (a regular expression, as <code>query trend --function</code> takes) to see it on every node over time.</div>`; return; }
  const ep = await endpoint("/api/v1/trend");
  if (!ep.available) { out.innerHTML = notice(new ApiError(501, ep.note)); return; }
  const nodes = (await api("/api/v1/nodes")).nodes.filter((n) => n.snapshots > 0);
  out.innerHTML = `<p class="muted" id="fnprog">Reading ${nodes.length} nodes…</p>`;
  const seq = navSeq;
  const per = await pool(nodes, 4, async (n) => {
    try { return { node: n.name, t: await api(`/api/v1/trend?node=${enc(n.name)}&function=${enc(fn)}${since}`) }; }
    catch (e) { return { node: n.name, error: e }; }
  });
  if (seq !== navSeq) return;
  const bad = per.find((p) => p.error && p.error instanceof ApiError && p.error.status === 400);
  if (bad) { out.innerHTML = notice(bad.error); return; }
  // The functions the pattern matched, with their largest value anywhere.
  const peak = new Map();
  for (const p of per) if (p.t) p.t.columns.forEach((c, i) => {
    if (!c.startsWith("fn:")) return;
    for (const r of p.t.rows) if (r.values[i] !== null) peak.set(c, Math.max(peak.get(c) || 0, r.values[i]));
  });
  const fns = [...peak.entries()].filter(([, v]) => v > 0).sort((x, y) => y[1] - x[1]);
  if (!fns.length) { out.innerHTML = `<div class="notice info" data-test="notice">No stored snapshot holds memory in a function matching <code>${esc(fn)}</code>${range === "all" ? "" : " in the last " + esc(range)}.</div>`; return; }
  const col = fns[0][0], name = col.slice(3);
  const series = [], fleet = [];
  per.forEach((p, k) => {
    if (!p.t) return;
    const i = p.t.columns.indexOf(col), h = p.t.columns.indexOf("heap_total");
    const pts = p.t.rows.map((r) => ({ t: r.time_unix * 1000, v: i >= 0 ? r.values[i] : 0 }));
    const last = p.t.rows[p.t.rows.length - 1];
    if (!last) return;
    const v = i >= 0 ? last.values[i] || 0 : 0;
    const first = p.t.rows[0];
    fleet.push({ node: p.node, now: v, heap: h >= 0 ? last.values[h] : null, change: v - (i >= 0 ? first.values[i] || 0 : 0), time: last.time_unix * 1000 });
    if (pts.some((x) => x.v)) series.push({ name: p.node, color: COLORS[series.length % COLORS.length], points: pts });
  });
  const med = fleet.map((r) => r.now).sort((x, y) => x - y);
  const median = med.length ? (med.length % 2 ? med[(med.length - 1) / 2] : (med[med.length / 2 - 1] + med[med.length / 2]) / 2) : 0;
  out.innerHTML = `
    <div class="panel"><div class="panelhead" style="padding:0 0 8px;border:0"><h2>Across time: <span class="mono" data-test="fn-name">${esc(name)}</span></h2></div>
      ${fns.length > 1 ? `<div class="small muted" style="margin-bottom:6px">${fns.length} functions match; showing the largest. Others: ${fns.slice(1, 8).map(([c]) => `<a href="#/function?fn=${enc(reQuote(c.slice(3)))}">${esc(c.slice(3))}</a>`).join(", ")}</div>` : ""}
      <div id="fnchart"></div></div>
    <div class="panel flush"><div class="panelhead"><h2>Across the fleet, latest snapshot</h2><span class="muted small">fleet median ${fmtBytes(median)}</span></div><div id="fntable"></div></div>`;
  const chart = new TimeChart(document.getElementById("fnchart"), { label: `${name} over time per node` });
  cleanups.push(() => chart.destroy());
  chart.setSeries(series.slice(0, 10));
  const maxNow = Math.max(1, ...fleet.map((r) => r.now));
  sortableTable(document.getElementById("fntable"), [
    { key: "node", label: "Node", asc: true, fmt: (r) => `<a href="#/node/${enc(r.node)}">${esc(r.node)}</a>` },
    { key: "now", label: "Holds now", num: true, fmt: (r) => fmtBytes(r.now) },
    { key: "bar", label: "", get: (r) => r.now, fmt: (r) => `<div class="bar"><span style="width:${(100 * r.now / maxNow).toFixed(1)}%"></span></div>` },
    { key: "ratio", label: "Against the median", num: true, get: (r) => (median ? r.now / median : 0), fmt: (r) => median ? (r.now / median).toFixed(1) + "×" : "" },
    { key: "share", label: "Of the node's heap", num: true, get: (r) => (r.heap ? r.now / r.heap : 0), fmt: (r) => r.heap ? fmtPct(r.now / r.heap) : "" },
    { key: "change", label: `Change over ${range === "all" ? "the history" : esc(range)}`, num: true, fmt: (r) => `<span class="${r.change > 0 ? "grow-text" : r.change < 0 ? "shrink-text" : ""}">${fmtSigned(r.change, "bytes")}</span>` },
  ], fleet, { sortKey: "now", testid: "fn-fleet" });
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
  const findings = d.findings || [];
  rep.innerHTML = `
    ${findings.map((f) => `<div class="notice warn" data-test="finding"><b>${esc(f.name.replace(/_/g, " "))}</b>: ${esc(f.why || "")}</div>`).join("")}
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
        <td><span class="badge ${verdictCls(c.verdict)}">${esc(c.verdict)}</span>${c.why ? `<div class="muted small" data-test="why">${esc(c.why)}</div>` : ""}</td>
        <td class="mono small">${(c.held_in || []).map((h) => `${esc(h.frame)} <span class="muted">${fmtBytes(h.bytes)}</span>`).join("<br>")}</td></tr>`).join("") || `<tr><td colspan="7" class="empty">No category holds memory.</td></tr>`}
      </tbody></table></div>
    <div class="panel"><h2>Memory ladder</h2><div class="small muted" style="margin-bottom:10px">From the process's resident memory down to what its trackers account for; each step names the gap.</div>
      <table class="grid ladder" data-test="ladder"><thead><tr><th>Level</th><th class="num">Bytes</th><th style="width:36%"></th><th class="num">Gap from previous</th><th>What the gap is</th></tr></thead><tbody>
      ${ladder.map((x) => `<tr><td>${esc(x.step.replace(/_/g, " "))}${x.figure ? `<div class="muted small mono">${esc(x.figure)}</div>` : ""}</td>
        <td class="num">${x.value === null ? `<span class="muted">not reported</span>` : fmtBytes(x.value)}</td>
        <td>${x.value ? `<div class="bar"><span style="width:${(100 * x.value / lmax).toFixed(1)}%;background:${x.step === "heap_profile" ? "#e8590c" : "#748ffc"}"></span></div>` : ""}</td>
        <td class="num">${x.gap_from_previous === null ? "" : fmtSigned(x.gap_from_previous, "bytes")}</td>
        <td class="gapname">${esc(x.gap_is || "")}${x.why ? `<div class="muted small" data-test="why">${esc(x.why)}</div>` : ""}</td></tr>`).join("")}
      </tbody></table>
      ${ladder.every((x) => x.value === null || x.step === "heap_profile") ? `<div class="small muted" style="margin-top:8px">No process or tracker figures are stored for ${esc(node)}; the collector records them from the node's /metrics and memory tracker.</div>` : ""}
    </div>`;
}

window.addEventListener("error", (e) => toast("Error: " + e.message));
window.addEventListener("unhandledrejection", (e) => { console.warn(e.reason); });
