// Flame graph on a canvas: root at the bottom as in the SVG export (or on
// top, "icicle", by a toggle the browser remembers), zoom by click, search
// highlight, hover details. Built for 100k-frame trees: only frames wider than
// half a pixel are visited, and runs of tinier siblings are drawn as one grey
// block, so a frame costs nothing once it is too small to see.
//
// Data is the API's tree: {names: [...], root: {n, v, b?, c?: [...], m?}},
// n indexing names, v the value, b the base value in a diff (then colours
// show growth and shrinkage), m the count of merged small frames. In a diff a
// frame is as wide as the larger of its two values (and at least as wide as
// its callees together), so stacks that vanished in B still show.
import { fmtValue, fmtPct, esc, showTooltip, hideTooltip } from "./util.js";

const ROW = 18;
const MIN_W = 0.5;
const ORIENT_KEY = "heapfleet.flame.icicle";
export function flameIcicle() { return localStorage.getItem(ORIENT_KEY) === "1"; }
export function setFlameIcicle(on) { localStorage.setItem(ORIENT_KEY, on ? "1" : "0"); }

export class FlameGraph {
  constructor(container, opts = {}) {
    this.opts = opts;
    this.wrap = document.createElement("div");
    this.wrap.className = "flamewrap";
    this.canvas = document.createElement("canvas");
    this.canvas.setAttribute("role", "img");
    this.canvas.setAttribute("aria-label", "flame graph");
    this.wrap.appendChild(this.canvas);
    this.info = document.createElement("div");
    this.info.className = "flameinfo";
    container.appendChild(this.wrap);
    container.appendChild(this.info);
    this.ctx = this.canvas.getContext("2d");
    this.search = null;
    this.rects = [];
    this.hover = null;
    this.canvas.addEventListener("mousemove", (e) => this.onMove(e));
    this.canvas.addEventListener("mouseleave", () => { this.hover = null; hideTooltip(); this.draw(); });
    this.canvas.addEventListener("click", (e) => this.onClick(e));
    this.resizeObs = new ResizeObserver(() => this.draw());
    this.resizeObs.observe(this.wrap);
  }

  destroy() { this.resizeObs.disconnect(); hideTooltip(); }

  setData(data, unit) {
    this.names = data.names;
    this.root = data.root;
    this.unit = unit || data.unit || "bytes";
    this.diff = this.root.b !== undefined;
    this.icicle = this.opts.icicle !== undefined ? this.opts.icicle : flameIcicle();
    // Widths: v, or in a diff the larger side, never narrower than the
    // callees together (post-order over an explicit stack).
    const post = [], st = [this.root];
    while (st.length) { const nd = st.pop(); post.push(nd); if (nd.c) for (const ch of nd.c) st.push(ch); }
    for (let i = post.length - 1; i >= 0; i--) {
      const nd = post[i];
      let w = this.diff ? Math.max(nd.v, nd.b || 0) : nd.v;
      if (this.diff && nd.c) { let sum = 0; for (const ch of nd.c) sum += ch.w; if (sum > w) w = sum; }
      nd.w = w;
    }
    // One pass: parents, absolute offsets, depth.
    let maxDepth = 0, count = 0;
    const stack = [[this.root, null, 0, 0]];
    while (stack.length) {
      const [node, parent, x, depth] = stack.pop();
      node.p = parent; node.x = x; node.d = depth; count++;
      if (depth > maxDepth) maxDepth = depth;
      if (node.c) {
        let off = x;
        for (const ch of node.c) { stack.push([ch, node, off, depth + 1]); off += ch.w; }
      }
    }
    this.maxDepth = maxDepth;
    this.count = count;
    this.zoom = this.root;
    this.searchTotal = 0;
    this.canvas.dataset.orientation = this.icicle ? "icicle" : "flame";
    // Where row `depth` is drawn (CSS pixels, centre), for tests and tools.
    this.canvas.rowY = (depth) => this.rowTop(depth) + ROW / 2;
    // The first frame named `name` (breadth first): value, base, drawn width.
    this.canvas.frameInfo = (name) => {
      const q = [this.root];
      while (q.length) {
        const nd = q.shift();
        if (nd !== this.root && !nd.m && this.names[nd.n] === name) return { v: nd.v, b: nd.b, w: nd.w, depth: nd.d };
        if (nd.c) q.push(...nd.c);
      }
      return null;
    };
    this.canvas.frameCount = count;
    this.draw();
    this.updateInfo();
  }

  setIcicle(on) {
    this.icicle = on;
    this.canvas.dataset.orientation = on ? "icicle" : "flame";
    this.draw();
  }

  rowTop(depth) { return this.icicle ? depth * ROW + 1 : (this.maxDepth - depth) * ROW + 1; }

  name(node) {
    if (node.m) return `${node.m} small frames`;
    return this.names[node.n];
  }

  setSearch(text) {
    let re = null;
    if (text) {
      try { re = new RegExp(text, "i"); } catch (e) { re = new RegExp(text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"), "i"); }
    }
    this.search = re;
    this.matchCache = new Map();
    // Matched total: a matching frame counts once, its descendants not again.
    let total = 0;
    if (re && this.root) {
      const stack = [this.root];
      while (stack.length) {
        const node = stack.pop();
        if (!node.m && node !== this.root && this.matches(node)) { total += node.v; continue; }
        if (node.c) for (const ch of node.c) stack.push(ch);
      }
    }
    this.searchTotal = total;
    this.draw();
    this.updateInfo();
    return total;
  }

  matches(node) {
    if (!this.search) return false;
    const n = node.n;
    let m = this.matchCache.get(n);
    if (m === undefined) { m = this.search.test(this.names[n]); this.matchCache.set(n, m); }
    return m;
  }

  zoomTo(node) { this.zoom = node || this.root; this.draw(); this.updateInfo(); }
  reset() { this.zoomTo(this.root); }

  color(node, dim) {
    if (node.m) return "#d5d9e0";
    if (node === this.root) return "#c9ced8";
    if (this.search) {
      if (this.matches(node)) return "#c2255c";
      if (dim) return "#eceef2";
    }
    if (this.diff) {
      const a = node.b || 0, b = node.v;
      const delta = b - a;
      const rel = Math.min(1, Math.abs(delta) / Math.max(1, Math.max(a, b)));
      if (Math.abs(delta) < 1) return "#e9ebef";
      const l = 92 - 42 * Math.sqrt(rel);
      return delta > 0 ? `hsl(350 75% ${l}%)` : `hsl(212 80% ${l}%)`;
    }
    // Warm palette, stable per name.
    const s = this.names[node.n];
    let h = 2166136261;
    for (let i = 0; i < s.length; i++) { h ^= s.charCodeAt(i); h = Math.imul(h, 16777619); }
    h >>>= 0;
    const hue = 10 + (h % 38);
    const light = 56 + ((h >>> 8) % 14);
    const sat = /^0x[0-9a-f]+/i.test(s) ? 25 : 78;
    return `hsl(${hue} ${sat}% ${light}%)`;
  }

  draw() {
    if (!this.root) return;
    const dpr = window.devicePixelRatio || 1;
    const W = Math.max(200, this.wrap.clientWidth);
    const rows = this.maxDepth + 1;
    const H = rows * ROW + 2;
    if (this.canvas.width !== Math.round(W * dpr) || this.canvas.height !== Math.round(H * dpr)) {
      this.canvas.width = Math.round(W * dpr);
      this.canvas.height = Math.round(H * dpr);
      this.canvas.style.height = H + "px";
    }
    const ctx = this.ctx;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, W, H);
    ctx.font = "12px " + getComputedStyle(document.body).getPropertyValue("--mono");
    ctx.textBaseline = "middle";
    if (!this.charW) this.charW = ctx.measureText("MMMMMMMMMM").width / 10;
    this.rects = [];
    const z = this.zoom;
    const scale = z.w > 0 ? W / z.w : 0;
    const x0 = z.x;
    // Ancestors of the zoomed frame span the whole width, dimmed.
    for (let a = z.p; a; a = a.p) this.box(a, 0, W, a.d, true);
    const stack = [z];
    while (stack.length) {
      const node = stack.pop();
      const px = (node.x - x0) * scale, pw = node.w * scale;
      this.box(node, px, pw, node.d, false);
      if (!node.c) continue;
      let runX = -1, runW = 0;
      for (const ch of node.c) {
        const cw = ch.w * scale;
        if (cw >= MIN_W && !ch.m) {
          if (runW > 0) { this.tiny(runX, runW, ch.d); runW = 0; }
          stack.push(ch);
        } else {
          if (runW === 0) runX = (ch.x - x0) * scale;
          runW += cw;
        }
      }
      if (runW > 0) this.tiny(runX, runW, node.d + 1);
    }
  }

  tiny(x, w, depth) {
    if (w < 0.2) return;
    const ctx = this.ctx;
    ctx.fillStyle = "#d5d9e0";
    ctx.fillRect(x, this.rowTop(depth), Math.max(w - 0.5, 0.5), ROW - 2);
  }

  box(node, x, w, depth, dim) {
    const ctx = this.ctx, y = this.rowTop(depth);
    const searchDim = this.search && !this.matches(node);
    ctx.fillStyle = this.color(node, searchDim);
    ctx.globalAlpha = dim ? 0.55 : 1;
    ctx.fillRect(x, y, Math.max(w - 1, 0.5), ROW - 2);
    if (this.hover === node) {
      ctx.strokeStyle = "#161b26"; ctx.lineWidth = 1.5;
      ctx.strokeRect(x + 0.75, y + 0.75, Math.max(w - 2.5, 0.5), ROW - 3.5);
    }
    if (w > 28) {
      const label = node === this.root ? `${this.opts.namedRoot ? this.name(node) : "all"} (${fmtValue(node.v, this.unit)})` : this.name(node);
      const max = Math.floor((w - 8) / this.charW);
      if (max >= 2) {
        ctx.fillStyle = this.search && searchDim ? "#9aa1ad" : (this.search ? "#fff" : "#1d2330");
        const text = label.length > max ? label.slice(0, max - 1) + "…" : label;
        ctx.fillText(text, x + 4, y + (ROW - 2) / 2 + 0.5);
      }
    }
    ctx.globalAlpha = 1;
    this.rects.push([x, y, w, node]);
  }

  hit(e) {
    const r = this.canvas.getBoundingClientRect();
    const x = e.clientX - r.left, y = e.clientY - r.top;
    for (let i = this.rects.length - 1; i >= 0; i--) {
      const [rx, ry, rw, node] = this.rects[i];
      if (x >= rx && x < rx + Math.max(rw, 1) && y >= ry && y < ry + ROW) return node;
    }
    return null;
  }

  onMove(e) {
    const node = this.hit(e);
    if (node !== this.hover) { this.hover = node; this.draw(); }
    if (!node) { hideTooltip(); return; }
    const total = this.root.v;
    const rows = [];
    if (this.diff) {
      const a = node.b || 0, b = node.v, d = b - a;
      rows.push(["before", fmtValue(a, this.unit)], ["after", fmtValue(b, this.unit)],
        ["change", (d > 0 ? "+" : d < 0 ? "−" : "") + fmtValue(Math.abs(d), this.unit) + (a > 0 ? ` (${d >= 0 ? "+" : "−"}${fmtPct(Math.abs(d) / a)})` : b > 0 ? " (new)" : "")]);
    } else {
      let self = node.v;
      if (node.c) for (const ch of node.c) self -= ch.v;
      rows.push([this.unit === "bytes" ? "bytes" : "objects", fmtValue(node.v, this.unit)],
        ["share of total", fmtPct(total ? node.v / total : 0)],
        ["self", fmtValue(Math.max(0, self), this.unit)]);
      if (node.p && node.p !== this.root) rows.push(["share of caller", fmtPct(node.p.v ? node.v / node.p.v : 0)]);
    }
    showTooltip(e, `<div class="tname">${esc(this.name(node))}</div>` +
      rows.map(([k, v]) => `<div class="trow"><span>${k}</span><span>${esc(v)}</span></div>`).join(""));
  }

  onClick(e) {
    const node = this.hit(e);
    if (!node || node.m) return;
    this.zoomTo(node === this.zoom ? (node.p || this.root) : node);
    if (this.opts.onZoom) this.opts.onZoom(node);
  }

  updateInfo() {
    if (!this.root) return;
    const parts = [];
    const path = [];
    for (let n = this.zoom; n && n !== this.root; n = n.p) path.unshift(this.name(n));
    parts.push(`<span class="path" title="${esc(path.join(" → "))}">${path.length ? "Zoomed: " + esc(path.join(" → ")) : `${this.count.toLocaleString()} frames · click a frame to zoom`}</span>`);
    if (this.search) {
      parts.push(`<span data-test="match">Matched: <b>${fmtValue(this.searchTotal, this.unit)}</b> (${fmtPct(this.root.v ? this.searchTotal / this.root.v : 0)})</span>`);
    }
    if (this.diff) {
      parts.push(`<span class="legend"><span><i style="background:hsl(350 75% 55%)"></i>grew</span><span><i style="background:hsl(212 80% 55%)"></i>shrank</span><span><i style="background:#e9ebef"></i>unchanged</span></span>`);
    }
    this.info.innerHTML = parts.join("");
  }
}

// ---- tree transforms (the API's {names, root} trees, new objects) ----------

// Children lists merged by frame name, values summed, recursively.
function mergeNodes(list) {
  const by = new Map();
  for (const nd of list) {
    const k = nd.m ? -1 - by.size : nd.n; // merged small frames stay apart
    const have = by.get(k);
    if (!have) by.set(k, { n: nd.n, v: nd.v, ...(nd.m ? { m: nd.m } : {}), kids: nd.c ? [...nd.c] : [] });
    else { have.v += nd.v; if (nd.c) have.kids.push(...nd.c); }
  }
  return [...by.values()].map((x) => {
    const out = { n: x.n, v: x.v };
    if (x.m) out.m = x.m;
    if (x.kids.length) out.c = mergeNodes(x.kids);
    return out;
  }).sort((a, b) => (a.n - b.n));
}

// pprof's hide: frames whose name matches `re` are taken out of every stack;
// their callees move up to the caller (merged by name), their own bytes stay
// with the caller.
export function hideFrames(data, re) {
  const strip = (nd) => {
    const out = [];
    for (const ch of nd.c || []) {
      if (!ch.m && re.test(data.names[ch.n])) out.push(...strip(ch));
      else out.push(keep(ch));
    }
    return out;
  };
  const keep = (nd) => {
    const o = { n: nd.n, v: nd.v };
    if (nd.m) o.m = nd.m;
    if (nd.c) { const k = strip(nd); if (k.length) o.c = mergeNodes(k); }
    return o;
  };
  return { ...data, root: keep(data.root) };
}

// A sandwich around one function: its callers (inverted: the function at the
// root, its callers above it) and its callees (every call of it merged). A
// recursive call counts once, at its outermost frame.
export function sandwich(data, name) {
  const idx = data.names.indexOf(name);
  if (idx < 0) return null;
  const occ = [];
  const st = [[data.root, []]];
  while (st.length) {
    const [nd, path] = st.pop();
    if (nd !== data.root && nd.n === idx && !nd.m) { occ.push([nd, path]); continue; }
    const p2 = nd === data.root ? [] : [...path, nd.n];
    for (const ch of nd.c || []) st.push([ch, p2]);
  }
  if (!occ.length) return null;
  const total = occ.reduce((s, [nd]) => s + nd.v, 0);
  const calleeKids = [];
  for (const [nd] of occ) if (nd.c) calleeKids.push(...nd.c);
  const callees = { n: idx, v: total };
  if (calleeKids.length) callees.c = mergeNodes(calleeKids);
  const callers = { n: idx, v: total, c: [] };
  for (const [nd, path] of occ) {
    let cur = callers;
    for (let i = path.length - 1; i >= 0; i--) {
      let ch = cur.c.find((x) => x.n === path[i]);
      if (!ch) { ch = { n: path[i], v: 0, c: [] }; cur.c.push(ch); }
      ch.v += nd.v;
      cur = ch;
    }
  }
  const tidy = (nd) => { if (nd.c && !nd.c.length) delete nd.c; else if (nd.c) { nd.c.sort((a, b) => a.n - b.n); nd.c.forEach(tidy); } return nd; };
  return { total, calls: occ.length, callers: { names: data.names, root: tidy(callers) }, callees: { names: data.names, root: callees } };
}
