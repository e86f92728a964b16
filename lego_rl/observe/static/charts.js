// Small SVG charts for the lego-rl dashboard: line/scatter and stacked bars. No dependencies.
// Every chart is an <svg data-chart=NAME>; each series is a <g data-series=NAME data-run=RUN>
// holding one <circle> (line/scatter) or <rect> (bars) per point, with a <title> tooltip.
"use strict";
const Charts = (() => {
  const NS = "http://www.w3.org/2000/svg";
  const M = { top: 10, right: 12, bottom: 26, left: 46 };

  function el(name, attrs, parent) {
    const node = document.createElementNS(NS, name);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    if (parent) parent.appendChild(node);
    return node;
  }

  function niceTicks(lo, hi, count) {
    if (!(hi > lo)) { hi = lo + 1; }
    const raw = (hi - lo) / Math.max(count, 1);
    const mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw) || raw;
    const ticks = [];
    for (let t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) ticks.push(+t.toPrecision(15));
    return ticks;
  }

  function fmt(v) {
    if (v === null || v === undefined || Number.isNaN(v)) return "–";
    const a = Math.abs(v);
    if (a !== 0 && (a < 1e-3 || a >= 1e5)) return v.toExponential(1);
    return String(+v.toPrecision(3));
  }

  // Enough digits to tell neighbouring ticks apart (a Pearson of 0.99999999998 vs 1).
  function fmtTick(t, span) {
    if (t === 0 || Math.abs(t) >= 1e5 || Math.abs(t) < 1e-3) return fmt(t);
    const digits = Math.min(15, Math.max(3, Math.ceil(Math.log10(Math.abs(t) / span)) + 1));
    return String(+t.toPrecision(digits));
  }

  function frame(container, name, opts) {
    container.innerHTML = "";
    const width = Math.max(container.clientWidth || 0, 260);
    const height = opts.height || 200;
    const svg = el("svg", { width, height, viewBox: `0 0 ${width} ${height}`, "data-chart": name, class: "chart" }, container);
    return { svg, width, height, w: width - M.left - M.right, h: height - M.top - M.bottom };
  }

  function axes(f, xs, ys, opts) {
    const g = el("g", { class: "axes" }, f.svg);
    const [x0, x1] = xs, [y0, y1] = ys;
    const sx = (x) => M.left + (x1 === x0 ? f.w / 2 : ((x - x0) / (x1 - x0)) * f.w);
    const sy = (y) => M.top + f.h - (y1 === y0 ? f.h / 2 : ((y - y0) / (y1 - y0)) * f.h);
    const yt = niceTicks(y0, y1, 4);
    const span = yt.length > 1 ? yt[1] - yt[0] : 1;
    for (const t of yt) {
      el("line", { x1: M.left, x2: M.left + f.w, y1: sy(t), y2: sy(t), class: "grid" }, g);
      el("text", { x: M.left - 5, y: sy(t) + 3, "text-anchor": "end" }, g).textContent = fmtTick(t, span);
    }
    const xt = opts.xTicks || niceTicks(x0, x1, Math.min(8, Math.max(1, x1 - x0))).filter((t) => Number.isInteger(t));
    for (const t of xt) {
      el("text", { x: sx(t), y: M.top + f.h + 15, "text-anchor": "middle" }, g).textContent = String(t);
    }
    el("line", { x1: M.left, x2: M.left + f.w, y1: M.top + f.h, y2: M.top + f.h, class: "axis" }, g);
    if (opts.xLabel) el("text", { x: M.left + f.w, y: f.height - 1, "text-anchor": "end", class: "label" }, g).textContent = opts.xLabel;
    return { sx, sy };
  }

  function extent(values, lo, hi) {
    const finite = values.filter((v) => v !== null && v !== undefined && Number.isFinite(v));
    let a = lo !== undefined ? lo : Math.min(...finite);
    let b = hi !== undefined ? hi : Math.max(...finite);
    if (!finite.length) { a = lo ?? 0; b = hi ?? 1; }
    if (a === b) { const pad = Math.abs(a) * 0.1 || 1; a -= lo !== undefined ? 0 : pad; b += pad; }
    return [a, b];
  }

  function empty(container, name, message) {
    const f = frame(container, name, { height: 60 });
    el("text", { x: f.width / 2, y: 34, "text-anchor": "middle", class: "empty" }, f.svg).textContent = message;
    return f.svg;
  }

  // series: [{name, run, color, points: [[x, y, tip?], ...], line: bool, radius}]
  function line(container, name, series, opts = {}) {
    const all = series.flatMap((s) => s.points.filter((p) => p[1] !== null && p[1] !== undefined && Number.isFinite(p[1])));
    if (!all.length) return empty(container, name, opts.emptyText || "no data yet");
    const f = frame(container, name, opts);
    let xs = extent(all.map((p) => p[0]), opts.xMin);
    if (series.some((s) => s.line === false)) xs = [xs[0] - 0.4, xs[1] + 0.4];  // room for jittered dots
    const ys = extent(all.map((p) => p[1]), opts.yMin, opts.yMax);
    const { sx, sy } = axes(f, xs, ys, opts);
    for (const s of series) {
      const g = el("g", { "data-series": s.name, "data-run": s.run || "", class: "series" }, f.svg);
      const pts = s.points.filter((p) => p[1] !== null && p[1] !== undefined && Number.isFinite(p[1]));
      if (s.line !== false && pts.length > 1) {
        const d = pts.map((p, i) => `${i ? "L" : "M"}${sx(p[0]).toFixed(1)},${sy(p[1]).toFixed(1)}`).join("");
        el("path", { d, fill: "none", stroke: s.color, "stroke-width": 1.8, "stroke-dasharray": s.dash || "none" }, g);
      }
      for (const p of pts) {
        const c = el("circle", { cx: sx(p[0] + (p[3] || 0)), cy: sy(p[1]), r: s.radius || 2.6, fill: s.color, "fill-opacity": s.opacity || 1 }, g);
        el("title", {}, c).textContent = p[2] || `${s.name}: step ${p[0]}: ${fmt(p[1])}`;
        if (s.onClick) { c.classList.add("clickable"); c.addEventListener("click", () => s.onClick(p)); }
      }
    }
    return f.svg;
  }

  // x: [step...]; stacks: [{name, color, values: [n per x]}]
  function stacked(container, name, x, stacks, opts = {}) {
    if (!x.length) return empty(container, name, opts.emptyText || "no data yet");
    const f = frame(container, name, opts);
    const totals = x.map((_, i) => stacks.reduce((a, s) => a + (s.values[i] || 0), 0));
    const ys = [0, Math.max(1, ...totals)];
    const xs = [Math.min(...x) - 0.5, Math.max(...x) + 0.5];
    const { sx, sy } = axes(f, xs, ys, { ...opts, xTicks: x.length <= 20 ? x : undefined });
    const bw = Math.max(2, (f.w / (xs[1] - xs[0])) * 0.7);
    const base = x.map(() => 0);
    for (const s of stacks) {
      const g = el("g", { "data-series": s.name, class: "series" }, f.svg);
      x.forEach((step, i) => {
        const v = s.values[i] || 0;
        if (!v) return;
        const r = el("rect", { x: sx(step) - bw / 2, y: sy(base[i] + v), width: bw, height: sy(base[i]) - sy(base[i] + v), fill: s.color }, g);
        el("title", {}, r).textContent = `step ${step}: ${s.name} ${fmt(v)}`;
        base[i] += v;
      });
    }
    return f.svg;
  }

  // One horizontal bar split into parts: [{name, value, color, mark?}]
  function strip(container, name, parts, opts = {}) {
    const total = parts.reduce((a, p) => a + p.value, 0);
    if (!total) return empty(container, name, opts.emptyText || "nothing recorded");
    const f = frame(container, name, { height: opts.height || 46 });
    const w = f.width - 4;
    let x = 2;
    for (const p of parts) {
      const pw = (p.value / total) * w;
      const g = el("g", { "data-series": p.name, class: "series" }, f.svg);
      const r = el("rect", { x, y: 4, width: Math.max(pw - 1, 0.5), height: 24, fill: p.color }, g);
      el("title", {}, r).textContent = p.tip || `${p.name}: ${fmt(p.value)}`;
      if (p.mark) el("line", { x1: x, x2: x, y1: 0, y2: 32, class: "mark" }, g);
      if (pw > 50) el("text", { x: x + 4, y: 20, class: "inbar" }, g).textContent = p.label || p.name;
      x += pw;
    }
    if (opts.caption) el("text", { x: 2, y: 43, class: "label" }, f.svg).textContent = opts.caption;
    return f.svg;
  }

  function legend(container, items) {
    const div = document.createElement("div");
    div.className = "legend";
    for (const it of items) {
      const span = document.createElement("span");
      span.innerHTML = it.dash ? `<i style="border-top:2px dashed ${it.color};height:0"></i>` : `<i style="background:${it.color}"></i>`;
      span.appendChild(document.createTextNode(it.name));
      div.appendChild(span);
    }
    container.appendChild(div);
  }

  return { line, stacked, strip, legend, fmt, empty };
})();
