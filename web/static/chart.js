// Time-series chart on a canvas: several byte series over time, points you
// can hover and click (each point is a snapshot).
import { fmtBytes, fmtTime, timeParts, useLocalTime, zoneName, esc, showTooltip, hideTooltip } from "./util.js";

// The points a line needs to look as all of them would (M4: per pixel
// column its first, last, lowest and highest point, in time order). A year
// of hourly points is 8 a pixel: drawn one by one, a line going back and
// forth within each column painted a thick band of anti-aliasing instead of
// the line; the column's extremes keep every peak and dip visible.
function m4(pts, L) {
  if (pts.length < 2 * (L.W - L.pad.l - L.pad.r)) return pts;
  const out = [];
  let col = null, first = null, last = null, lo = null, hi = null;
  const flush = () => {
    if (!first) return;
    const keep = [first, lo, hi, last].sort((a, b) => a.t - b.t);
    for (const p of keep) if (out[out.length - 1] !== p) out.push(p);
  };
  for (const p of pts) {
    const c = Math.round(L.x(p.t));
    if (c !== col) { flush(); col = c; first = lo = hi = p; }
    if (p.v < lo.v) lo = p;
    if (p.v > hi.v) hi = p;
    last = p;
  }
  flush();
  return out;
}

export class TimeChart {
  constructor(container, opts = {}) {
    this.opts = opts;
    this.wrap = document.createElement("div");
    this.wrap.className = "chartwrap";
    this.canvas = document.createElement("canvas");
    this.canvas.setAttribute("role", "img");
    this.canvas.setAttribute("aria-label", opts.label || "chart over time");
    this.wrap.appendChild(this.canvas);
    this.legend = document.createElement("div");
    this.legend.className = "legend";
    this.legend.style.padding = "8px 4px 0";
    container.appendChild(this.wrap);
    container.appendChild(this.legend);
    this.ctx = this.canvas.getContext("2d");
    this.series = [];
    this.hidden = new Set();
    this.hoverIdx = null;
    this.canvas.addEventListener("mousemove", (e) => this.onMove(e));
    this.canvas.addEventListener("mouseleave", () => { this.hover = null; hideTooltip(); this.draw(); });
    this.canvas.addEventListener("click", (e) => {
      const h = this.nearest(e);
      if (h && h.pt.ref !== undefined && this.opts.onClick) this.opts.onClick(h.pt.ref);
    });
    this.ro = new ResizeObserver(() => this.draw());
    this.ro.observe(this.wrap);
  }

  destroy() { this.ro.disconnect(); hideTooltip(); }

  setSeries(series) {
    this.series = series.filter((s) => s.points.some((p) => p.v !== null && p.v !== undefined));
    this.legend.innerHTML = this.series.map((s, i) => `<span data-i="${i}" style="cursor:pointer;${this.hidden.has(s.name) ? "opacity:.4" : ""}"><i style="background:${s.color}"></i>${esc(s.name)}</span>`).join("");
    this.legend.querySelectorAll("span[data-i]").forEach((el) => el.addEventListener("click", () => {
      const s = this.series[+el.dataset.i];
      if (this.hidden.has(s.name)) this.hidden.delete(s.name); else this.hidden.add(s.name);
      el.style.opacity = this.hidden.has(s.name) ? ".4" : "1";
      this.draw();
    }));
    this.draw();
  }

  layout() {
    const W = Math.max(300, this.wrap.clientWidth), H = 300;
    const pad = { l: 72, r: 16, t: 12, b: 28 };
    const vis = this.series.filter((s) => !this.hidden.has(s.name));
    let tmin = Infinity, tmax = -Infinity, vmax = 0;
    for (const s of vis) for (const p of s.points) {
      if (p.v === null || p.v === undefined) continue;
      tmin = Math.min(tmin, p.t); tmax = Math.max(tmax, p.t); vmax = Math.max(vmax, p.v);
    }
    if (!Number.isFinite(tmin)) { tmin = Date.now() - 3600e3; tmax = Date.now(); }
    if (tmax === tmin) { tmin -= 1800e3; tmax += 1800e3; }
    const step = niceStep(vmax || 1024);
    vmax = Math.ceil((vmax || 1024) / step) * step;
    const span = tmax - tmin;
    tmin -= span * 0.03; tmax += span * 0.03;
    return { W, H, pad, vis, tmin, tmax, vmax, step,
      x: (t) => pad.l + ((t - tmin) / (tmax - tmin)) * (W - pad.l - pad.r),
      y: (v) => H - pad.b - (v / vmax) * (H - pad.t - pad.b) };
  }

  draw() {
    const L = this.layout();
    this.L = L;
    const dpr = window.devicePixelRatio || 1;
    if (this.canvas.width !== Math.round(L.W * dpr)) { this.canvas.width = Math.round(L.W * dpr); this.canvas.height = Math.round(L.H * dpr); }
    const ctx = this.ctx;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, L.W, L.H);
    ctx.font = "12px " + getComputedStyle(document.body).getPropertyValue("--sans");
    ctx.textBaseline = "middle";
    // Grid and y labels.
    ctx.strokeStyle = "#eceef2"; ctx.fillStyle = "#6b7385"; ctx.lineWidth = 1;
    for (let v = 0; v <= L.vmax + 1e-9; v += L.step) {
      const y = Math.round(L.y(v)) + 0.5;
      ctx.beginPath(); ctx.moveTo(L.pad.l, y); ctx.lineTo(L.W - L.pad.r, y); ctx.stroke();
      ctx.textAlign = "right"; ctx.fillText(fmtBytes(v), L.pad.l - 8, y);
    }
    // x labels: round steps in the chosen zone, each label once (a date
    // only where the day changes).
    ctx.textAlign = "center";
    const ticks = timeTicks(L.tmin, L.tmax, Math.max(2, Math.floor((L.W - L.pad.l - L.pad.r) / 110)));
    this.canvas.xLabels = ticks.map((t) => t.label);
    for (const t of ticks) {
      const x = Math.round(L.x(t.t)) + 0.5;
      ctx.strokeStyle = "#f3f4f7"; ctx.beginPath(); ctx.moveTo(x, L.pad.t); ctx.lineTo(x, L.H - L.pad.b); ctx.stroke();
      ctx.fillStyle = "#6b7385"; ctx.fillText(t.label, x, L.H - L.pad.b + 16);
    }
    ctx.textAlign = "right";
    ctx.fillText(zoneName(), L.W - L.pad.r, L.H - 4);
    // Marks (process restarts): a dashed line and its label.
    const marks = (this.opts.marks || []).filter((m) => m.t >= L.tmin && m.t <= L.tmax);
    this.canvas.marks = marks.map((m) => ({ x: L.x(m.t), label: m.label }));
    for (const m of marks) {
      const x = Math.round(L.x(m.t)) + 0.5;
      ctx.save(); ctx.setLineDash([4, 3]); ctx.strokeStyle = "#c92a2a"; ctx.lineWidth = 1.5;
      ctx.beginPath(); ctx.moveTo(x, L.pad.t); ctx.lineTo(x, L.H - L.pad.b); ctx.stroke(); ctx.restore();
      ctx.fillStyle = "#c92a2a"; ctx.textAlign = "left"; ctx.fillText(m.label, x + 4, L.pad.t + 8);
    }
    for (const s of L.vis) {
      const pts = s.points.filter((p) => p.v !== null && p.v !== undefined);
      ctx.strokeStyle = s.color; ctx.lineWidth = 2; ctx.lineJoin = "round";
      ctx.beginPath();
      m4(pts, L).forEach((p, i) => { const x = L.x(p.t), y = L.y(p.v); if (i) ctx.lineTo(x, y); else ctx.moveTo(x, y); });
      ctx.stroke();
      // A mark on every point while they stand apart; on a dense series
      // (a year of hourly snapshots) only the hovered one, or the marks
      // would paint a band over the line.
      const span = pts.length > 1 ? (L.x(pts[pts.length - 1].t) - L.x(pts[0].t)) / (pts.length - 1) : 99;
      for (const p of pts) {
        const big = this.hover && this.hover.pt === p;
        if (span < 6 && !big) continue;
        ctx.beginPath(); ctx.arc(L.x(p.t), L.y(p.v), big ? 5.5 : 3.5, 0, Math.PI * 2);
        ctx.fillStyle = "#fff"; ctx.fill(); ctx.lineWidth = 2; ctx.strokeStyle = s.color; ctx.stroke();
      }
    }
    // Where the points are, for tests and tools (CSS pixels in the canvas).
    this.canvas.points = L.vis.length ? L.vis[0].points.filter((p) => p.v !== null && p.v !== undefined).map((p) => ({ x: L.x(p.t), y: L.y(p.v), ref: p.ref })) : [];
    if (this.hover) {
      const x = Math.round(L.x(this.hover.pt.t)) + 0.5;
      ctx.strokeStyle = "rgba(29,35,48,.25)"; ctx.lineWidth = 1;
      ctx.beginPath(); ctx.moveTo(x, L.pad.t); ctx.lineTo(x, L.H - L.pad.b); ctx.stroke();
    }
  }

  nearest(e) {
    if (!this.L) return null;
    const r = this.canvas.getBoundingClientRect();
    const mx = e.clientX - r.left, my = e.clientY - r.top;
    let best = null, bd = 24 * 24;
    for (const s of this.L.vis) for (const p of s.points) {
      if (p.v === null || p.v === undefined) continue;
      const dx = this.L.x(p.t) - mx, dy = this.L.y(p.v) - my, d = dx * dx + dy * dy * 0.25;
      if (d < bd) { bd = d; best = { s, pt: p }; }
    }
    return best;
  }

  onMove(e) {
    const h = this.nearest(e);
    const changed = (h && h.pt) !== (this.hover && this.hover.pt);
    this.hover = h;
    if (changed) this.draw();
    if (!h) { hideTooltip(); this.canvas.style.cursor = "crosshair"; return; }
    this.canvas.style.cursor = h.pt.ref !== undefined ? "pointer" : "crosshair";
    const rows = this.L.vis.map((s) => {
      const p = s.points.find((q) => q.t === h.pt.t);
      return p && p.v !== null ? `<div class="trow"><span><i style="display:inline-block;width:8px;height:8px;border-radius:2px;background:${s.color};margin-right:6px"></i>${esc(s.name)}</span><span>${fmtBytes(p.v)}</span></div>` : "";
    }).join("");
    const mk = (this.opts.marks || []).filter((m) => Math.abs(m.t - h.pt.t) < 1).map((m) => `<div class="small" style="color:#ffa8a8">${esc(m.title || m.label)}</div>`).join("");
    showTooltip(e, `${mk}<div class="tname">${fmtTime(h.pt.t)}${h.pt.label ? " · " + esc(h.pt.label) : ""}</div>${rows}${h.pt.ref !== undefined ? '<div class="muted small" style="margin-top:4px;color:#aab3c5">click to open this snapshot</div>' : ""}`);
  }
}

// A round step for about five grid lines, in the unit the labels will use.
function niceStep(max) {
  const base = max >= 1024 ** 3 ? 1024 ** 3 : max >= 1024 ** 2 ? 1024 ** 2 : max >= 1024 ? 1024 : 1;
  const raw = max / base / 5;
  const mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const r = raw / mag;
  const m = r <= 1 ? 1 : r <= 2 ? 2 : r <= 2.5 ? 2.5 : r <= 5 ? 5 : 10;
  return Math.max(1, m * mag * base);
}

// Round time steps for about n labels between t0 and t1, aligned in the
// chosen zone; a label carries the date only on its first tick and where the
// day changes, so no label repeats another.
const STEPS = [60e3, 5 * 60e3, 15 * 60e3, 30 * 60e3, 3600e3, 3 * 3600e3, 6 * 3600e3, 12 * 3600e3, 86400e3, 7 * 86400e3, 30 * 86400e3];
export function timeTicks(t0, t1, n) {
  const span = Math.max(1, t1 - t0);
  const step = STEPS.find((s) => span / s <= n) || STEPS[STEPS.length - 1];
  const off = useLocalTime() ? -new Date(t0).getTimezoneOffset() * 60e3 : 0;
  let t = Math.ceil((t0 + off) / step) * step - off;
  const out = [];
  let lastDay = "";
  const pad = (x) => String(x).padStart(2, "0");
  for (; t <= t1 && out.length < 200; t += step) {
    const p = timeParts(t);
    const day = `${p.y}-${pad(p.mo)}-${pad(p.d)}`;
    const hm = `${pad(p.h)}:${pad(p.mi)}`;
    let label;
    if (step >= 86400e3) label = `${pad(p.mo)}-${pad(p.d)}`;
    else label = day !== lastDay ? (out.length || span > 86400e3 ? `${pad(p.mo)}-${pad(p.d)} ${hm}` : hm) : hm;
    lastDay = day;
    if (out.length && out[out.length - 1].label === label) continue;
    out.push({ t, label });
  }
  return out;
}

// A range picker for a chart: buttons that set `range` (a duration the API
// takes as since=, or "all").
export const RANGES = ["1h", "6h", "24h", "7d", "30d", "all"];
export function rangePicker(current, onPick) {
  const el = document.createElement("span");
  el.className = "seg";
  el.dataset.test = "range-picker";
  el.innerHTML = RANGES.map((r) => `<button type="button" data-range="${r}" class="${r === current ? "on" : ""}" aria-pressed="${r === current}">${r === "all" ? "All" : r}</button>`).join("");
  el.addEventListener("click", (e) => { const b = e.target.closest("button[data-range]"); if (b) onPick(b.dataset.range); });
  return el;
}
