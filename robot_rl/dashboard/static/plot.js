// Tiny offline SVG plotting: line charts, horizontal bars, interval bars. No CDN, no deps.
// Every label is set with textContent, so run or tag names can never inject markup.
"use strict";

const Plot = (() => {
  const NS = "http://www.w3.org/2000/svg";
  let clipCount = 0;
  const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];

  function el(tag, attrs, text) {
    const e = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    if (text !== undefined) e.textContent = String(text);
    return e;
  }

  // "Nice" tick values (1, 2, 5 x 10^k) so axes read like a human drew them.
  function ticks(lo, hi, count) {
    if (!(hi > lo)) { hi = lo + 1; lo = lo - 1; }
    const raw = (hi - lo) / Math.max(1, count);
    const mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw) || raw;
    const out = [];
    for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(+v.toPrecision(12));
    return out;
  }

  function fmt(v) {
    const a = Math.abs(v);
    if (a !== 0 && (a >= 1e5 || a < 1e-3)) return v.toExponential(1);
    return String(+v.toPrecision(4));
  }

  // series: [{name, points: [[x, y], ...], band: [[x, lo, hi], ...] (optional, drawn under the line)}]
  function line(series, opts) {
    const o = Object.assign({ width: 420, height: 220, title: "", xlabel: "step" }, opts || {});
    const m = { l: 52, r: 10, t: o.title ? 22 : 8, b: 30 };
    const svg = el("svg", { width: o.width, height: o.height, viewBox: `0 0 ${o.width} ${o.height}`, class: "plot", role: "img" });
    if (o.title) svg.appendChild(el("text", { x: m.l, y: 15, class: "plot-title" }, o.title));
    const pts = series.flatMap((s) => s.points);
    if (!pts.length) {
      svg.appendChild(el("text", { x: o.width / 2, y: o.height / 2, "text-anchor": "middle", class: "plot-empty" }, "no data yet"));
      return svg;
    }
    let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
    for (const p of pts) {  // a loop, not Math.min(...): long series would overflow the argument stack
      if (p[0] < x0) x0 = p[0]; if (p[0] > x1) x1 = p[0];
      if (p[1] < y0) y0 = p[1]; if (p[1] > y1) y1 = p[1];
    }
    for (const s of series) for (const b of s.band || []) {
      if (b[1] < y0) y0 = b[1]; if (b[2] > y1) y1 = b[2];
    }
    // yrange: [lo, hi] fixes the y axis; what leaves it is cut at the frame (a diverging model's windows must
    // not flatten the trajectory they are compared with).
    if (o.yrange) [y0, y1] = o.yrange;
    if (x1 === x0) { x0 -= 1; x1 += 1; }
    if (y1 === y0) { const d = Math.abs(y0) * 0.1 || 1; y0 -= d; y1 += d; }
    const W = o.width - m.l - m.r, H = o.height - m.t - m.b;
    const sx = (x) => m.l + ((x - x0) / (x1 - x0)) * W;
    const sy = (y) => m.t + H - ((y - y0) / (y1 - y0)) * H;
    const axes = el("g", { class: "plot-axes" });
    for (const t of ticks(y0, y1, 4)) {
      axes.appendChild(el("line", { x1: m.l, x2: m.l + W, y1: sy(t), y2: sy(t), class: "plot-grid" }));
      axes.appendChild(el("text", { x: m.l - 4, y: sy(t) + 4, "text-anchor": "end" }, fmt(t)));
    }
    for (const t of ticks(x0, x1, 5)) {
      axes.appendChild(el("text", { x: sx(t), y: m.t + H + 14, "text-anchor": "middle" }, fmt(t)));
    }
    axes.appendChild(el("rect", { x: m.l, y: m.t, width: W, height: H, class: "plot-frame" }));
    axes.appendChild(el("text", { x: m.l + W, y: o.height - 2, "text-anchor": "end" }, o.xlabel));
    svg.appendChild(axes);
    let target = svg;
    if (o.yrange) {
      const id = `plot-clip-${++clipCount}`;
      const defs = el("defs");
      const clip = el("clipPath", { id });
      clip.appendChild(el("rect", { x: m.l, y: m.t, width: W, height: H }));
      defs.appendChild(clip);
      svg.appendChild(defs);
      target = el("g", { "clip-path": `url(#${id})` });
      svg.appendChild(target);
    }
    // Optional per series: color, width, dash, legend (false: no legend entry, e.g. the 2nd..Kth window of a
    // model drawn as many polylines under one name), group (set as data-series, for tests and styling).
    let legendRow = 0;
    series.forEach((s, i) => {
      const color = s.color || COLORS[i % COLORS.length];
      if (s.band && s.band.length > 1) {
        const upper = s.band.map((b) => `${sx(b[0]).toFixed(1)},${sy(b[2]).toFixed(1)}`);
        const lower = s.band.map((b) => `${sx(b[0]).toFixed(1)},${sy(b[1]).toFixed(1)}`).reverse();
        const band = { points: upper.concat(lower).join(" "), fill: color, "fill-opacity": 0.18, stroke: "none", class: "plot-band" };
        if (s.group) band["data-series"] = s.group;
        target.appendChild(el("polygon", band));
      }
      const d = s.points.map((p) => `${sx(p[0]).toFixed(1)},${sy(p[1]).toFixed(1)}`).join(" ");
      const attrs = { points: d, fill: "none", stroke: color, "stroke-width": s.width || 1.6, class: "plot-line" };
      if (s.dash) attrs["stroke-dasharray"] = s.dash;
      if (s.group) attrs["data-series"] = s.group;
      target.appendChild(el("polyline", attrs));
      if (s.points.length === 1) {
        target.appendChild(el("circle", { cx: sx(s.points[0][0]), cy: sy(s.points[0][1]), r: 3, fill: color }));
      }
      if (series.length > 1 && s.legend !== false) {
        svg.appendChild(el("text", { x: m.l + 6, y: m.t + 12 + 12 * legendRow, fill: color, class: "plot-legend" }, s.name));
        legendRow += 1;
      }
    });
    return svg;
  }

  // items: [{label, value}]; negative values grow left of the zero line.
  function bars(items, opts) {
    const o = Object.assign({ width: 420, title: "" }, opts || {});
    const rowH = 18, labelW = 150, top = o.title ? 22 : 6;
    const height = top + rowH * Math.max(1, items.length) + 6;
    const svg = el("svg", { width: o.width, height, viewBox: `0 0 ${o.width} ${height}`, class: "plot", role: "img" });
    if (o.title) svg.appendChild(el("text", { x: 4, y: 15, class: "plot-title" }, o.title));
    if (!items.length) {
      svg.appendChild(el("text", { x: 4, y: top + 12, class: "plot-empty" }, "no reward terms"));
      return svg;
    }
    const lo = Math.min(0, ...items.map((i) => i.value)), hi = Math.max(0, ...items.map((i) => i.value));
    const W = o.width - labelW - 60;
    const sx = (v) => labelW + ((v - lo) / ((hi - lo) || 1)) * W;
    items.forEach((it, k) => {
      const y = top + k * rowH;
      svg.appendChild(el("text", { x: labelW - 6, y: y + 12, "text-anchor": "end" }, it.label));
      const a = sx(Math.min(0, it.value)), b = sx(Math.max(0, it.value));
      svg.appendChild(el("rect", { x: a, y: y + 3, width: Math.max(1, b - a), height: rowH - 6,
        fill: it.value < 0 ? "#d62728" : "#1f77b4" }));
      svg.appendChild(el("text", { x: b + 4, y: y + 12 }, fmt(it.value)));
    });
    svg.appendChild(el("line", { x1: sx(0), x2: sx(0), y1: top, y2: height - 6, class: "plot-zero" }));
    return svg;
  }

  // A [0, 1] interval with its point estimate, for success-rate cells.
  function interval(value, lo, hi, opts) {
    const o = Object.assign({ width: 110, height: 14 }, opts || {});
    const svg = el("svg", { width: o.width, height: o.height, class: "ci", role: "img" });
    const sx = (v) => 2 + Math.min(1, Math.max(0, v)) * (o.width - 4);
    svg.appendChild(el("line", { x1: 2, x2: o.width - 2, y1: o.height / 2, y2: o.height / 2, class: "ci-axis" }));
    if (lo !== null && hi !== null && lo !== undefined && hi !== undefined) {
      svg.appendChild(el("rect", { x: sx(lo), y: 3, width: Math.max(1, sx(hi) - sx(lo)), height: o.height - 6, class: "ci-band" }));
    }
    if (value !== null && value !== undefined) {
      svg.appendChild(el("circle", { cx: sx(value), cy: o.height / 2, r: 3, class: "ci-point" }));
    }
    return svg;
  }

  return { line, bars, interval, ticks, COLORS };
})();
