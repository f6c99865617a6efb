// "Sim vs real": per flight log replayed by `robot-rl replay` (runs/sim2real/<name>/replay.json), the logged
// trajectory against each model's open-loop windows (and the closed-loop replay), the open-loop error over
// horizon, the fitted parameters with their intervals beside the nominal ones, and the log's repair report.
// Uses h() and mount() from app.js and Plot from plot.js; everything from the files goes in as text.
"use strict";

const S2R_AXES = ["x", "y", "z"];
const S2R_COLORS = { log: "#222", nominal: "#d62728", fitted: "#1f77b4" };
const S2R_OTHER = ["#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"];
const s2rColor = (label, i) => S2R_COLORS[label] || S2R_OTHER[i % S2R_OTHER.length];
const finite = (v) => typeof v === "number" && Number.isFinite(v);
const cm = (v) => (finite(v) ? (100 * v).toFixed(2) : "—");

// [[t, value], ...] of one axis, skipping samples without a number (NaN became null on the way).
function axisPoints(t, position, axis) {
  const out = [];
  for (let k = 0; k < t.length; k++) {
    const p = position[k];
    if (finite(t[k]) && p && finite(p[axis])) out.push([t[k], p[axis]]);
  }
  return out;
}

// The y range of an axis: the logged trajectory and the closed loop, with room around them (a quarter of their
// span, at least 5 cm); open-loop windows that run away leave the plot at its edge.
function logRange(series, axis) {
  let lo = Infinity, hi = -Infinity;
  for (const s of series) {
    if (s.group !== "log" && !s.group.startsWith("closed-")) continue;
    for (const p of s.points) { if (p[1] < lo) lo = p[1]; if (p[1] > hi) hi = p[1]; }
  }
  if (!(hi >= lo)) return null;
  const pad = Math.max(0.25 * (hi - lo), 0.05);
  return [lo - pad, hi + pad];
}

function trajectoryPlots(lg) {
  return h("div", { class: "plots s2r-trajectories" }, S2R_AXES.map((name, axis) => {
    const series = [{ name: "log", group: "log", color: S2R_COLORS.log, width: 1.4, points: axisPoints(lg.t, lg.position, axis) }];
    lg.open_loop.forEach((r, i) => r.shown.forEach((w, j) => series.push({
      name: `${r.label} open loop`, group: `open-${r.label}`, color: s2rColor(r.label, i), width: 1.0,
      legend: j === 0, points: axisPoints(w.t, w.position, axis),
    })));
    lg.closed_loop.forEach((c, i) => series.push({
      name: `${c.label} closed loop`, group: `closed-${c.label}`, color: s2rColor(c.label, i), width: 1.2, dash: "5,3",
      points: axisPoints(c.t, c.position, axis),
    }));
    return h("figure", { class: "curve s2r-axis", "data-axis": name },
      Plot.line(series, { title: `${name} (m)`, xlabel: "time (s)", width: 560, height: 240, yrange: logRange(series, axis) }));
  }));
}

function windowsNote(lg) {
  const parts = lg.open_loop.map((r) => `${r.label}: ${r.windows} windows${r.shown.length < r.windows ? ` (${r.shown.length} drawn)` : ""}`);
  return parts.length ? h("p", { class: "note" },
    `open-loop windows from logged states, ${parts.join("; ")}; the y axes span the log and the closed loop, windows leaving them are cut at the edge`) : null;
}

function horizonTable(lg) {
  if (!lg.open_loop.length) return h("p", { class: "empty" }, "No open-loop replay in this file.");
  const head = ["model", "horizon (s)", ...S2R_AXES.flatMap((a) => [`|e${a}| median (cm)`, `|e${a}| p90 (cm)`])];
  const rows = lg.open_loop.flatMap((r) => r.horizons_s.map((hz, i) => h("tr", { "data-model": r.label, "data-horizon": hz },
    h("td", {}, r.label), h("td", {}, String(hz)),
    S2R_AXES.flatMap((a, j) => [
      h("td", { class: "median", "data-axis": a, "data-value": r.median_m[i][j] }, cm(r.median_m[i][j])),
      h("td", { class: "p90", "data-axis": a, "data-value": r.p90_m[i][j] }, cm(r.p90_m[i][j])),
    ]))));
  return h("table", { class: "s2r-horizons" }, h("thead", {}, h("tr", {}, head.map((c) => h("th", {}, c)))), h("tbody", {}, rows));
}

function horizonPlots(lg) {
  if (!lg.open_loop.length) return null;
  return h("div", { class: "plots s2r-horizon-plots" }, S2R_AXES.map((a, j) => h("figure", { class: "curve s2r-horizon-plot", "data-axis": a },
    Plot.line(lg.open_loop.map((r, i) => ({
      name: `${r.label} median`, group: r.label, color: s2rColor(r.label, i),
      points: r.horizons_s.map((hz, k) => [hz, 100 * r.median_m[k][j]]).filter((p) => finite(p[1])),
    })), { title: `|e${a}| median (cm)`, xlabel: "horizon (s)", width: 300, height: 200 }))));
}

function paramTable(lg, source) {
  if (!lg.parameters.length) return h("p", { class: "empty" }, "No parameters in this file.");
  const fmt = (v) => (finite(v) ? String(+v.toPrecision(4)) : "—");
  return h("div", {},
    h("p", { class: "note" }, source ? `fit from ${source}` : "no fit (replay ran with the nominal model only)"),
    h("table", { class: "s2r-params" },
      h("thead", {}, h("tr", {}, ["parameter", "nominal", "fitted", "95% interval", "how"].map((c) => h("th", {}, c)))),
      h("tbody", {}, lg.parameters.map((p) => {
        const iv = Array.isArray(p.interval) ? p.interval : null;
        return h("tr", { "data-param": p.name },
          h("th", {}, p.name),
          h("td", { class: "nominal", "data-value": p.nominal }, fmt(p.nominal)),
          h("td", { class: "fitted", "data-value": p.value }, fmt(p.value)),
          h("td", { class: "interval", "data-lo": iv ? iv[0] : null, "data-hi": iv ? iv[1] : null },
            iv ? `[${fmt(iv[0])}, ${fmt(iv[1])}]` : "—"),
          h("td", { class: "how" }, dash(p.how)));
      }))));
}

function closedLoopTable(lg) {
  if (!lg.closed_loop.length) return null;
  return h("section", {}, h("h4", {}, "Closed loop (the policy run in simulation under the logged goals or targets)"),
    h("table", { class: "s2r-closed" },
      h("thead", {}, h("tr", {}, ["model", ...S2R_AXES.map((a) => `RMS ${a} (cm)`), "crashed"].map((c) => h("th", {}, c)))),
      h("tbody", {}, lg.closed_loop.map((c) => h("tr", { "data-model": c.label }, h("td", {}, c.label),
        S2R_AXES.map((a) => h("td", { "data-axis": a, "data-value": c.rms_m[a] }, cm(c.rms_m[a]))),
        h("td", {}, c.crashed ? "yes" : "no"))))));
}

// Pick-and-place: per axis, where perception saw the object in the log against where each closed loop put it in
// simulation, the bowl as a dotted line; a table of the RMS apart and whether the simulated object ended in the bowl.
function objectView(lg) {
  const runs = lg.closed_loop.filter((c) => c.object);
  if (!runs.length) return null;
  const plots = h("div", { class: "plots s2r-object-plots" }, S2R_AXES.map((name, axis) => {
    const first = runs[0];
    const series = [{ name: "log (perception)", group: "object-log", color: S2R_COLORS.log, width: 1.4, points: axisPoints(first.t, first.object.log, axis) }];
    runs.forEach((c, i) => series.push({
      name: `${c.label} closed loop`, group: `object-${c.label}`, color: s2rColor(c.label, i), width: 1.2, dash: "5,3",
      points: axisPoints(c.t, c.object.sim, axis),
    }));
    const g = first.object.goal[axis], t0 = first.t[0], t1 = first.t[first.t.length - 1];
    if (finite(g) && finite(t0) && finite(t1)) series.push({ name: "bowl", group: "object-goal", color: "#888", width: 1.0, dash: "2,3", points: [[t0, g], [t1, g]] });
    return h("figure", { class: "curve s2r-object-axis", "data-axis": name },
      Plot.line(series, { title: `object ${name} (m)`, xlabel: "time (s)", width: 560, height: 240 }));
  }));
  const table = h("table", { class: "s2r-object" },
    h("thead", {}, h("tr", {}, ["model", ...S2R_AXES.map((a) => `RMS ${a} (cm)`), "in the bowl in sim"].map((c) => h("th", {}, c)))),
    h("tbody", {}, runs.map((c) => h("tr", { "data-model": c.label }, h("td", {}, c.label),
      S2R_AXES.map((a) => h("td", { "data-axis": a, "data-value": c.object.rms_m[a] }, cm(c.object.rms_m[a]))),
      h("td", { class: "in-goal", "data-value": String(c.object.sim_in_goal) }, c.object.sim_in_goal ? "yes" : "no")))));
  return h("section", {}, h("h4", {}, "Object: where the log saw it vs where the closed loop put it"), plots, table);
}

function logView(lg, source) {
  if (lg.invalid) {
    return h("article", { class: "s2r-log invalid", "data-log": lg.log },
      h("h3", {}, lg.log), h("p", { class: "error" }, `invalid: ${lg.invalid}`));
  }
  return h("article", { class: "s2r-log", "data-log": lg.log },
    h("h3", {}, lg.log),
    h("p", { class: "note" }, `${lg.duration_s.toFixed(1)} s, ${lg.samples} samples`),
    h("h4", {}, "Trajectories per axis: log vs simulation"), windowsNote(lg), trajectoryPlots(lg),
    h("h4", {}, "Open-loop error over horizon"), horizonTable(lg), horizonPlots(lg),
    closedLoopTable(lg), objectView(lg),
    h("h4", {}, "Parameters: nominal and fitted"), paramTable(lg, source),
    h("h4", {}, "Log report"),
    lg.report.length ? h("ul", { class: "s2r-report" }, lg.report.map((l) => h("li", {}, l))) : h("p", { class: "empty" }, "No report lines."));
}

const S2R_FILE_LABELS = { "report.html": "sysid report", "replay.svg": "replay plot (SVG)", "sysid.yaml": "sysid.yaml", "replay.json": "replay.json" };

function entryView(name, data, err) {
  const parts = [h("h2", {}, name)];
  if (err) {
    parts.push(h("p", { class: "error s2r-invalid" }, `Could not load this entry: ${err.message}`));
    return h("section", { class: "s2r-entry invalid", "data-entry": name }, parts);
  }
  const links = Object.entries(data.files || {}).map(([f, url]) => h("li", {}, h("a", { href: url, class: `s2r-file`, "data-file": f, target: "_blank", rel: "noopener" }, S2R_FILE_LABELS[f] || f)));
  if (links.length) parts.push(h("ul", { class: "s2r-files" }, links));
  for (const r of [...(data.refused || []), ...(data.notes || [])]) parts.push(h("p", { class: "error s2r-note" }, r));
  if (data.invalid) {
    parts.push(h("p", { class: "error s2r-invalid" }, `invalid: ${data.invalid}`));
    return h("section", { class: "s2r-entry invalid", "data-entry": name }, parts);
  }
  for (const lg of data.logs) parts.push(logView(lg, data.fit_source));
  return h("section", { class: "s2r-entry", "data-entry": name }, parts);
}

async function sim2realPage(only) {
  const list = await getJSON("/api/sim2real");
  document.title = "robot_rl — sim vs real";
  const entries = only ? list.entries.filter((e) => e.name === only) : list.entries;
  if (!entries.length) {
    mount(h("h1", {}, "Sim vs real"), h("p", { class: "empty", id: "s2r-empty" },
      only ? `No sim2real folder named ${only}.` :
        "No replays yet: robot-rl replay log=<flight.mcap> params=<sysid.yaml> writes <runs root>/sim2real/<log name>/replay.json."));
    return;
  }
  // One request per entry: a corrupt file (or a failed request) is that entry's message, the others render.
  const loaded = await Promise.all(entries.map((e) => getJSON(`/api/sim2real/entry?name=${encodeURIComponent(e.name)}`)
    .then((d) => [e.name, d, null], (err) => [e.name, null, err])));
  mount(
    h("h1", {}, "Sim vs real"),
    h("p", { class: "note" }, `${entries.length} replay folder${entries.length === 1 ? "" : "s"} under sim2real/ of the runs root${list.truncated ? " (the newest shown)" : ""}`),
    h("nav", { class: "s2r-index" }, h("ul", {}, entries.map((e) => h("li", {}, h("a", { href: `#/sim2real/${encodeURIComponent(e.name)}` }, e.name))))),
    ...loaded.map(([name, data, err]) => entryView(name, data, err)),
  );
}
