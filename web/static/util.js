// Shared helpers: API access (with the optional bearer token), units,
// escaping, tooltip and toast.

const TOKEN_KEY = "heapfleet.token";

export class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

// One prompt per browser tab, however many requests get a 401 at once: they
// all wait for the same answer (the snapshot page loads four things in
// parallel). A wrong token clears the stored one and asks once more.
let tokenAsk = null;
function askToken(rejected) {
  if (!tokenAsk) {
    tokenAsk = new Promise((resolve) => {
      if (rejected) sessionStorage.removeItem(TOKEN_KEY);
      const t = window.prompt(rejected ? "That token was refused. This heapfleet server needs a token (the contents of its --token-file):"
        : "This heapfleet server needs a token (the contents of its --token-file):");
      if (t) sessionStorage.setItem(TOKEN_KEY, t.trim());
      resolve(!!t);
    }).finally(() => { setTimeout(() => { tokenAsk = null; }, 0); });
  }
  return tokenAsk;
}

function authHeaders() {
  const headers = {};
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = "Bearer " + token;
  return headers;
}

// fetch with the token; on a 401 ask (once for all concurrent callers) and
// retry once.
export async function authFetch(path, init = {}) {
  const sent = sessionStorage.getItem(TOKEN_KEY);
  let res = await fetch(path, { ...init, headers: { ...(init.headers || {}), ...authHeaders() } });
  if (res.status === 401) {
    // Another request may have stored a token meanwhile: use it.
    const now = sessionStorage.getItem(TOKEN_KEY);
    if (now && now !== sent) return fetch(path, { ...init, headers: { ...(init.headers || {}), ...authHeaders() } });
    if (await askToken(!!sent)) res = await fetch(path, { ...init, headers: { ...(init.headers || {}), ...authHeaders() } });
  }
  return res;
}

export async function api(path, init) {
  const res = await authFetch(path, init);
  const type = res.headers.get("content-type") || "";
  if (!res.ok) {
    let msg = res.statusText;
    if (type.startsWith("application/json")) {
      try { msg = (await res.json()).error || msg; } catch (e) { /* keep statusText */ }
    }
    throw new ApiError(res.status, msg);
  }
  return type.startsWith("application/json") ? res.json() : res.text();
}

// Download through fetch so the token header goes along and errors show.
export async function download(path, fallbackName) {
  const res = await authFetch(path);
  if (!res.ok) {
    let msg = res.statusText;
    try { msg = (await res.json()).error || msg; } catch (e) { /* keep */ }
    toast(`Download failed (${res.status}): ${msg}`);
    return;
  }
  const cd = res.headers.get("content-disposition") || "";
  const m = /filename="([^"]+)"/.exec(cd);
  const blob = await res.blob();
  const a = document.createElement("a");
  a.href = URL.createObjectURL(blob);
  a.download = m ? m[1] : fallbackName;
  document.body.appendChild(a);
  a.click();
  setTimeout(() => { URL.revokeObjectURL(a.href); a.remove(); }, 1000);
}

const UNITS = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
export function fmtBytes(n) {
  if (n === null || n === undefined || Number.isNaN(n)) return "–";
  const neg = n < 0; let v = Math.abs(n), i = 0;
  while (v >= 1024 && i < UNITS.length - 1) { v /= 1024; i++; }
  const s = i === 0 ? String(Math.round(v)) : v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2);
  return (neg ? "−" : "") + s + " " + UNITS[i];
}
export function fmtCount(n) {
  if (n === null || n === undefined) return "–";
  const a = Math.abs(n);
  if (a >= 1e9) return (n / 1e9).toFixed(2) + "G";
  if (a >= 1e6) return (n / 1e6).toFixed(2) + "M";
  if (a >= 1e4) return (n / 1e3).toFixed(1) + "k";
  return String(Math.round(n));
}
export function fmtValue(n, unit) { return unit === "objects" ? fmtCount(n) : fmtBytes(n); }
export function fmtSigned(n, unit) {
  if (!n) return fmtValue(0, unit);
  return (n > 0 ? "+" : "−") + fmtValue(Math.abs(n), unit);
}
export function fmtPct(x) {
  if (!Number.isFinite(x)) return "–";
  const p = x * 100;
  return (Math.abs(p) >= 10 ? p.toFixed(1) : p.toFixed(2)) + "%";
}
// Times are UTC unless the user picks local time (kept per browser); every
// label names its zone.
const ZONE_KEY = "heapfleet.localtime";
export function useLocalTime() { return localStorage.getItem(ZONE_KEY) === "1"; }
export function setLocalTime(on) { localStorage.setItem(ZONE_KEY, on ? "1" : "0"); }
export function zoneName() {
  if (!useLocalTime()) return "UTC";
  const off = -new Date().getTimezoneOffset();
  if (off === 0) return "local (UTC+00:00)";
  const a = Math.abs(off);
  return `local (UTC${off < 0 ? "−" : "+"}${String(Math.floor(a / 60)).padStart(2, "0")}:${String(a % 60).padStart(2, "0")})`;
}
// Calendar fields of ms in the chosen zone.
export function timeParts(ms) {
  const d = new Date(ms);
  return useLocalTime()
    ? { y: d.getFullYear(), mo: d.getMonth() + 1, d: d.getDate(), h: d.getHours(), mi: d.getMinutes(), s: d.getSeconds() }
    : { y: d.getUTCFullYear(), mo: d.getUTCMonth() + 1, d: d.getUTCDate(), h: d.getUTCHours(), mi: d.getUTCMinutes(), s: d.getUTCSeconds() };
}
const pad2 = (x) => String(x).padStart(2, "0");
// "2026-11-22 07:00 UTC" (zone: false leaves the zone off, for tables under
// a header that names it).
export function fmtTime(ms, zone = true) {
  if (!ms) return "–";
  const p = timeParts(ms);
  const z = zone ? " " + (useLocalTime() ? "local" : "UTC") : "";
  return `${p.y}-${pad2(p.mo)}-${pad2(p.d)} ${pad2(p.h)}:${pad2(p.mi)}${z}`;
}
export function relTime(ms) {
  if (!ms) return "never";
  const s = (Date.now() - ms) / 1000;
  if (s < 60) return "just now";
  if (s < 3600) return Math.round(s / 60) + " min ago";
  if (s < 86400 * 2) return Math.round(s / 3600) + " h ago";
  return Math.round(s / 86400) + " d ago";
}
export function esc(s) {
  return String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}

const tip = () => document.getElementById("tooltip");
export function showTooltip(e, html) {
  const t = tip();
  t.innerHTML = html;
  t.hidden = false;
  const pad = 14, w = t.offsetWidth, h = t.offsetHeight;
  let x = e.clientX + pad, y = e.clientY + pad;
  if (x + w > window.innerWidth - 8) x = e.clientX - w - pad;
  if (y + h > window.innerHeight - 8) y = e.clientY - h - pad;
  t.style.left = Math.max(4, x) + "px";
  t.style.top = Math.max(4, y) + "px";
}
export function hideTooltip() { const t = tip(); if (t) t.hidden = true; }

let toastTimer = 0;
export function toast(msg) {
  const t = document.getElementById("toast");
  t.textContent = msg;
  t.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { t.hidden = true; }, 5000);
}

// A sparkline as an inline SVG string (cheap for a thousand rows).
export function sparkSVG(values, w = 120, h = 28) {
  const v = (values || []).filter((x) => x !== null);
  if (v.length < 2) return `<svg class="spark" width="${w}" height="${h}"><line x1="0" y1="${h - 4}" x2="${w}" y2="${h - 4}" stroke="#dfe3ea" stroke-width="1"/></svg>`;
  const min = Math.min(...v), max = Math.max(...v), span = max - min || 1;
  const pts = v.map((x, i) => [(i / (v.length - 1)) * (w - 4) + 2, h - 3 - ((x - min) / span) * (h - 6)]);
  const d = pts.map(([x, y], i) => (i ? "L" : "M") + x.toFixed(1) + " " + y.toFixed(1)).join("");
  const up = v[v.length - 1] > v[0] * 1.1;
  const color = up ? "#d6336c" : "#3b5bdb";
  const [lx, ly] = pts[pts.length - 1];
  return `<svg class="spark" width="${w}" height="${h}" viewBox="0 0 ${w} ${h}"><path d="${d} L${lx.toFixed(1)} ${h} L2 ${h} Z" fill="${color}" opacity=".08"/><path d="${d}" fill="none" stroke="${color}" stroke-width="1.6" stroke-linejoin="round"/><circle cx="${lx.toFixed(1)}" cy="${ly.toFixed(1)}" r="2.2" fill="${color}"/></svg>`;
}

// Sortable table helper: columns [{key, label, num, get, fmt, cls}], rows.
export function sortableTable(container, columns, rows, opts = {}) {
  let sortKey = opts.sortKey || columns[0].key, asc = !!opts.asc;
  const limit = opts.limit || 2000;
  const render = () => {
    const col = columns.find((c) => c.key === sortKey);
    const get = col.get || ((r) => r[col.key]);
    const sorted = rows.map((_, i) => i).sort((ia, ib) => {
      const x = get(rows[ia]), y = get(rows[ib]);
      const c = typeof x === "string" ? x.localeCompare(y) : (x ?? -Infinity) - (y ?? -Infinity);
      return asc ? c : -c;
    });
    const head = columns.map((c) => `<th data-sort="${c.key}" class="${c.num ? "num" : ""} ${c.key === sortKey ? "sorted" + (asc ? " asc" : "") : ""}">${esc(c.label)}</th>`).join("");
    const body = sorted.slice(0, limit).map((i) => rows[i]).map((r, k) => `<tr class="${opts.onRow ? "clickable" : ""}" data-i="${sorted[k]}">` +
      columns.map((c) => `<td class="${c.num ? "num" : ""} ${c.cls || ""}" ${c.title ? `title="${esc(c.title(r))}"` : ""}>${c.fmt ? c.fmt(r) : esc((c.get || ((x) => x[c.key]))(r))}</td>`).join("") + "</tr>").join("");
    container.innerHTML = `<table class="grid" ${opts.testid ? `data-test="${opts.testid}"` : ""}><thead><tr>${head}</tr></thead><tbody>${body || `<tr><td colspan="${columns.length}" class="empty">Nothing to show.</td></tr>`}</tbody></table>` +
      (sorted.length > limit ? `<div class="muted small" style="padding:8px 12px">Showing ${limit} of ${sorted.length} rows.</div>` : "");
  };
  // One delegated listener for headers and rows, however many rows.
  container.addEventListener("click", (e) => {
    const th = e.target.closest("th[data-sort]");
    if (th && container.contains(th)) {
      if (sortKey === th.dataset.sort) asc = !asc; else { sortKey = th.dataset.sort; asc = !!columns.find((c) => c.key === sortKey).asc; }
      render();
      return;
    }
    const tr = e.target.closest("tbody tr[data-i]");
    if (tr && opts.onRow && !e.target.closest("a")) opts.onRow(rows[+tr.dataset.i]);
  });
  render();
  return { update(newRows) { rows = newRows; render(); } };
}

// What this server can answer (GET /api/v1), fetched once: pages ask only
// for wired endpoints and say why the others are missing.
let capsPromise = null;
export function caps() {
  if (!capsPromise) capsPromise = api("/api/v1").catch((e) => { capsPromise = null; throw e; });
  return capsPromise;
}
export async function endpoint(path) {
  const c = await caps();
  return c.endpoints.find((e) => e.path === path) || { path, available: false, note: "unknown endpoint" };
}
