// Sim evaluation dashboard: leaderboard, run pages, compare, sim vs real (sim2real.js). Hash routing, no framework.
// Store content is data: it only ever reaches the page through textContent / attributes,
// never innerHTML, and the server's CSP forbids inline script on top of that.
"use strict";

const app = document.getElementById("app");

function h(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (k === "class") e.className = v;
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    e.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

// replaceChildren() would turn a null into the text "null"; optional sections are null.
function mount(...nodes) {
  app.replaceChildren(...nodes.filter((n) => n !== null && n !== undefined && n !== false));
}

async function getJSON(url) {
  const r = await fetch(url, { headers: { Accept: "application/json" } });
  if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
  return r.json();
}

const pct = (v) => (v === null || v === undefined ? "—" : `${(100 * v).toFixed(1)}%`);
const num = (v, d = 3) => (v === null || v === undefined ? "—" : (+v).toPrecision(d));
const dash = (v) => (v === null || v === undefined || v === "" ? "—" : String(v));
const runHref = (name) => `#/run/${encodeURIComponent(name)}`;
const episodesHref = (run, ev) => `#/episodes?${new URLSearchParams({ run, eval: ev })}`;
// Invalid evaluations (a malformed eval file) are listed on the run page but never summarised.
// A run's headline is its latest standard evaluation (robot_rl/store/kinds.py), never a SITL, bundle,
// zero-policy or stress one that happened to run last.
const headline = (run) => run.evaluations.find((e) => !e.invalid && e.kind === "standard");
const PAGE_SIZE = 50;
const FILTERS = ["task", "algo", "reward", "guidance", "randomization"];
// Runs ticked for comparison, kept while paging through the leaderboard.
const selected = new Set();

function successCell(v, lo, hi) {
  const txt = v === null || v === undefined ? "—" : `${pct(v)} [${pct(lo)}, ${pct(hi)}]`;
  return h("td", { class: "success", "data-value": typeof v === "number" ? v : null }, Plot.interval(v, lo, hi), " ", txt);
}

// Click a column header to sort by it (again: reverse). Numbers sort as numbers, "—" last.
function sortable(table) {
  const heads = table.querySelectorAll("thead th");
  heads.forEach((th, col) => {
    th.classList.add("sortable");
    th.addEventListener("click", () => {
      const body = table.tBodies[0];
      const dir = th.dataset.sort === "asc" ? -1 : 1;
      for (const other of heads) delete other.dataset.sort;
      th.dataset.sort = dir === 1 ? "asc" : "desc";
      const key = (tr) => {
        const cell = tr.cells[col];
        const text = cell ? (cell.dataset.value ?? cell.textContent.trim()) : "";
        const v = parseFloat(text);
        return text === "—" || text === "" ? null : Number.isNaN(v) ? text : v;
      };
      const rows = [...body.rows].sort((a, b) => {
        const ka = key(a), kb = key(b);
        if (ka === null || kb === null) return (ka === null) - (kb === null);
        if (typeof ka === "number" && typeof kb === "number") return dir * (ka - kb);
        return dir * String(ka).localeCompare(String(kb));
      });
      body.replaceChildren(...rows);
    });
  });
  return table;
}

function route() {
  const raw = location.hash.replace(/^#/, "") || "/";
  const [path, qs] = raw.split("?");
  const params = new URLSearchParams(qs || "");
  let view;
  if (path.startsWith("/run/")) view = runPage(decodeURIComponent(path.slice(5)));
  else if (path === "/compare") view = comparePage(params.getAll("run"));
  else if (path === "/curves") view = curvesPage(params);
  else if (path === "/episodes") view = episodesPage(params.get("run") || "", params.get("eval") || "");
  else if (path === "/sim2real") view = sim2realPage(null);
  else if (path.startsWith("/sim2real/")) view = sim2realPage(decodeURIComponent(path.slice(10)));
  else view = leaderboardPage(params);
  view.catch((err) => {
    mount(h("p", { class: "error" }, `Could not load this page: ${err.message}`));
  });
}

// ---------------------------------------------------------------- leaderboard
function boardHash(filterValues, page) {
  const p = new URLSearchParams();
  for (const k of FILTERS) if (filterValues[k]) p.set(k, filterValues[k]);
  if (page > 1) p.set("page", String(page));
  return `#/?${p}`;
}

function pager(data, filterValues, page) {
  const pages = Math.max(1, Math.ceil(data.total / data.limit));
  const link = (label, target, id) => (target >= 1 && target <= pages && target !== page
    ? h("a", { href: boardHash(filterValues, target), class: "page-link", id }, label)
    : h("span", { class: "page-link disabled" }, label));
  const first = data.runs.length ? data.offset + 1 : 0;
  const last = Math.min(data.offset + data.runs.length, data.total);
  return h("nav", { class: "pager", "aria-label": "pages" },
    link("« first", 1, "page-first"), link("‹ prev", page - 1, "page-prev"),
    h("span", { class: "page-info", id: "page-info" }, `runs ${first}–${last} of ${data.total} · page ${page} of ${pages}`),
    link("next ›", page + 1, "page-next"), link("last »", pages, "page-last"));
}

async function leaderboardPage(params) {
  const api = new URLSearchParams();
  const filterValues = {};
  for (const k of FILTERS) if (params.get(k)) { api.set(k, params.get(k)); filterValues[k] = params.get(k); }
  const page = Math.max(1, parseInt(params.get("page") || "1", 10) || 1);
  api.set("limit", String(PAGE_SIZE));
  api.set("offset", String((page - 1) * PAGE_SIZE));
  const data = await getJSON(`/api/leaderboard?${api}`);
  document.title = "robot_rl — leaderboard";

  const filters = h("form", { class: "filters", id: "filters", onsubmit: (e) => e.preventDefault() });
  for (const k of FILTERS) {
    const sel = h("select", { name: k, id: `filter-${k}`, onchange: () => {
      const chosen = {};
      for (const s of filters.querySelectorAll("select")) if (s.value) chosen[s.name] = s.value;
      location.hash = boardHash(chosen, 1);
    } }, h("option", { value: "" }, `all`));
    for (const v of data.facets[k] || []) sel.appendChild(h("option", { value: v, selected: params.get(k) === v }, v));
    filters.appendChild(h("label", {}, `${k} `, sel));
  }

  if (!data.total) {
    const filtered = Object.keys(data.filters || {}).length > 0;
    mount(h("h1", {}, "Leaderboard"), filters, h("p", { class: "empty", id: "empty" },
      filtered ? "No runs match these filters." :
        "No runs in the store yet. Train one (robot-rl train task=...) or start the dashboard with --runs-root pointing at your runs."));
    return;
  }

  const boards = data.tasks.map((t) => h("section", { class: "task-board" },
    h("h2", {}, `Task: ${dash(t.task)}`),
    sortable(h("table", { class: "groups" },
      h("thead", {}, h("tr", {}, ["algo", "reward", "guidance", "seeds", "success (mean, 95% CI across seeds)", "episodes"].map((c) => h("th", {}, c)))),
      h("tbody", {}, t.groups.map((g) => h("tr", {},
        h("td", {}, dash(g.algo)), h("td", {}, dash(g.reward)), h("td", {}, dash(g.guidance)),
        h("td", {}, h("a", { href: boardHash({ ...filterValues, task: g.task, algo: g.algo, reward: g.reward, guidance: g.guidance }, 1),
          title: "list these runs" }, String(g.n_seeds))),
        successCell(g.success_mean, g.success_lo, g.success_hi),
        h("td", {}, String(g.episodes)))))))));

  const compareBtn = h("button", { id: "compare", disabled: selected.size < 2, onclick: () => {
    const p = new URLSearchParams();
    for (const n of selected) p.append("run", n);
    location.hash = `#/compare?${p}`;
  } }, "Compare selected");
  const curvesBtn = h("button", { id: "curves-selected", disabled: selected.size < 1, onclick: () => {
    const p = new URLSearchParams();
    for (const n of selected) p.append("run", n);
    location.hash = `#/curves?${p}`;
  } }, "Curves across seeds");

  const runRow = (r) => h("tr", { class: "run-row", "data-run": r.name },
    h("td", {}, h("input", { type: "checkbox", "aria-label": `select ${r.name}`, checked: selected.has(r.name), onchange: (e) => {
      if (e.target.checked) selected.add(r.name); else selected.delete(r.name);
      compareBtn.disabled = selected.size < 2;
      curvesBtn.disabled = selected.size < 1;
    } })),
    h("td", {}, h("a", { href: runHref(r.name), class: "run-link" }, r.name)),
    h("td", {}, dash(r.task)), h("td", {}, dash(r.algo)), h("td", {}, dash(r.reward)),
    h("td", {}, dash(r.guidance)), h("td", {}, dash(r.seed)),
    h("td", {}, h("span", { class: `status status-${r.status || "unknown"}` }, dash(r.status))),
    h("td", {}, r.eval_name ? `${r.eval_name} (${dash(r.randomization)}, ${dash(r.episodes)} ep)` : "no standard evaluation"),
    successCell(r.success_rate, r.success_lo, r.success_hi),
    h("td", {}, num(r.position_error_m)), h("td", {}, pct(r.crash_rate)),
    h("td", { class: "bundle" }, pct(r.bundle_success_rate)), h("td", { class: "zero" }, pct(r.zero_success_rate)),
    h("td", { class: "sitl" }, num(r.sitl_error_m)));
  // One page of runs from the server: 10,000 rows would cost the browser and the server seconds.
  mount(
    h("h1", {}, "Leaderboard"), filters, ...boards,
    h("section", {}, h("h2", {}, `Runs (${data.total})`), compareBtn, " ", curvesBtn,
      pager(data, filterValues, page),
      sortable(h("table", { class: "runs", id: "runs" },
        h("thead", {}, h("tr", {}, ["", "run", "task", "algo", "reward", "guidance", "seed", "status", "standard evaluation", "success [95% CI]", "pos. error (m)", "crash rate", "bundle success", "zero-policy success", "SITL error (m)"].map((c) => h("th", {}, c)))),
        h("tbody", {}, data.runs.map(runRow)))),
      data.total > data.limit ? pager(data, filterValues, page) : null));
}

// ---------------------------------------------------------------- run page
function curveGrid(scalars, only) {
  const tags = Object.keys(scalars.tags || {}).filter((t) => !only || only(t));
  if (scalars.status === "refused") {
    return h("p", { class: "error", id: "tb-refused" }, `TensorBoard logs not read: ${scalars.reason}`);
  }
  if (!tags.length) {
    const msg = scalars.status === "no-logs" ? "No TensorBoard logs yet." : "No scalars logged yet.";
    return h("p", { class: "empty" }, msg);
  }
  return h("div", { class: "plots" }, tags.map((t) => h("figure", { class: "curve", "data-tag": t },
    Plot.line([{ name: t, points: scalars.tags[t] }], { title: t }))));
}

function evalTable(run) {
  if (!run.evaluations.length) return h("p", { class: "empty" }, "Not evaluated yet.");
  const extraKeys = [...new Set(run.evaluations.flatMap((e) => Object.keys(e.metrics || {})))]
    .filter((k) => !["success_rate", "success_ci95", "position_error_m", "crash_rate"].includes(k));
  const columns = ["evaluation", "kind", "randomization", "episodes", "seed", "success [95% CI]", "pos. error (m)", "crash rate", ...extraKeys];
  return h("table", { class: "evals", id: "evals" },
    h("thead", {}, h("tr", {}, columns.map((c) => h("th", {}, c)))),
    h("tbody", {}, run.evaluations.map((e) => e.invalid ? h("tr", { class: "invalid", "data-eval": e.name },
      h("td", {}, e.name), h("td", { colspan: columns.length - 1, class: "error" }, `invalid: ${e.invalid}`)) : h("tr", { "data-eval": e.name },
      h("td", {}, h("a", { href: episodesHref(run.name, e.name), class: "episodes-link", title: "per-episode outcomes" }, e.name)),
      h("td", { class: "kind" }, dash(e.kind)), h("td", {}, dash(e.randomization)), h("td", {}, dash(e.episodes)), h("td", {}, dash(e.seed)),
      successCell(e.success_rate, e.success_lo, e.success_hi), h("td", {}, num(e.position_error_m)), h("td", {}, pct(e.crash_rate)),
      extraKeys.map((k) => h("td", {}, typeof e.metrics[k] === "number" ? num(e.metrics[k]) : dash(JSON.stringify(e.metrics[k]))))))));
}

function planView(plan) {
  if (plan === null || plan === undefined) return null;
  const parts = [h("h2", {}, "LLM plan")];
  const subgoals = Array.isArray(plan.subgoals) ? plan.subgoals : Array.isArray(plan.steps) ? plan.steps : null;
  if (subgoals) {
    parts.push(h("ol", { class: "plan-steps" }, subgoals.map((s) => h("li", {},
      typeof s === "string" ? s : dash(s.description || s.name || s.goal || JSON.stringify(s))))));
  }
  const stats = plan.verification || plan.verification_stats || plan.stats;
  if (stats && typeof stats === "object") {
    parts.push(h("h3", {}, "Verification statistics"), h("table", { class: "kv" }, Object.entries(stats).map(([k, v]) =>
      h("tr", {}, h("th", {}, k), h("td", {}, typeof v === "object" ? JSON.stringify(v) : dash(v))))));
  }
  parts.push(h("details", {}, h("summary", {}, "plan.json"), h("pre", { class: "json" }, JSON.stringify(plan, null, 2))));
  return h("section", { id: "plan" }, parts);
}

async function runPage(name) {
  const [run, scalars] = await Promise.all([
    getJSON(`/api/run?name=${encodeURIComponent(name)}`),
    getJSON(`/api/scalars?name=${encodeURIComponent(name)}`),
  ]);
  document.title = `robot_rl — ${run.name}`;
  const art = (kind) => run.artifacts.filter((a) => a.kind === kind);
  const latest = headline(run);
  let terms = latest ? Object.entries(latest.reward_terms || {}).map(([label, value]) => ({ label, value })) : [];
  let termsSource = latest ? `evaluation "${latest.name}"` : "";
  if (!terms.length) {
    // Before any evaluation, the last logged per-term episode rewards are the best breakdown.
    terms = Object.entries(scalars.tags || {}).filter(([t]) => t.startsWith("Episode/rew_"))
      .map(([t, pts]) => ({ label: t.slice("Episode/rew_".length), value: pts[pts.length - 1][1] }));
    termsSource = terms.length ? "latest training episodes" : "";
  }
  const meta = [["task", run.task], ["algorithm", run.algo], ["reward", run.reward], ["guidance", run.guidance],
    ["seed", run.seed], ["status", run.status], ["git revision", run.git_revision], ["started", run.started_at],
    ["finished", run.finished_at], ["train wall time (s)", run.train_wall_time_s]];
  const videos = art("video");
  const prompts = art("keypoints_prompt");
  const bundle = [...art("policy_onnx"), ...art("policy_yaml")];

  mount(
    h("p", {}, h("a", { href: "#/" }, "← leaderboard")),
    h("h1", { id: "run-name" }, run.name),
    h("table", { class: "kv" }, meta.map(([k, v]) => h("tr", {}, h("th", {}, k), h("td", {}, dash(v))))),
    h("section", { id: "curves" }, h("h2", {}, "Learning curves"), curveGrid(scalars)),
    h("section", { id: "reward-terms" }, h("h2", {}, "Reward terms"),
      termsSource ? h("p", { class: "note" }, `mean per episode, ${termsSource}`) : null,
      Plot.bars(terms.sort((a, b) => Math.abs(b.value) - Math.abs(a.value)))),
    h("section", {}, h("h2", {}, "Evaluations"), evalTable(run)),
    h("section", { id: "videos" }, h("h2", {}, "Videos"), videos.length ? videos.map((v) => h("figure", {},
      h("video", { src: v.url, controls: true, muted: true, preload: "metadata", playsinline: true, width: 480 }),
      h("figcaption", {}, v.relpath))) : h("p", { class: "empty" }, "No videos.")),
    prompts.length ? h("section", { id: "keypoints" }, h("h2", {}, "VLM keypoint prompt"),
      prompts.map((p) => h("img", { src: p.url, alt: "keypoint prompt with numbered marks", class: "prompt" }))) : null,
    planView(run.plan),
    bundle.length ? h("section", {}, h("h2", {}, "Policy bundle"), h("ul", {}, bundle.map((b) =>
      h("li", {}, h("a", { href: b.url }, b.relpath), ` (${b.size_bytes} bytes)`)))) : null,
    h("section", {}, h("h2", {}, "Resolved config"),
      run.config_yaml ? h("pre", { class: "config" }, run.config_yaml) : h("p", { class: "empty" }, "No config.yaml.")),
    Object.keys(run.versions || {}).length ? h("section", {}, h("h2", {}, "Package versions"), h("table", { class: "kv" },
      Object.entries(run.versions).map(([k, v]) => h("tr", {}, h("th", {}, k), h("td", {}, dash(v)))))) : null,
  );
  // Muted + attribute is not always reflected into the property; set it for autoplay policy.
  for (const v of app.querySelectorAll("video")) v.muted = true;
}

// ---------------------------------------------------------------- compare
async function comparePage(names) {
  if (names.length < 1) { location.hash = "#/"; return; }
  const runs = await Promise.all(names.map((n) => getJSON(`/api/run?name=${encodeURIComponent(n)}`)));
  const scalars = await Promise.all(names.map((n) => getJSON(`/api/scalars?name=${encodeURIComponent(n)}`)));
  document.title = "robot_rl — compare";
  const rowsDef = [["task", (r) => dash(r.task)], ["algorithm", (r) => dash(r.algo)], ["reward", (r) => dash(r.reward)],
    ["guidance", (r) => dash(r.guidance)], ["seed", (r) => dash(r.seed)], ["status", (r) => dash(r.status)],
    ["standard evaluation", (r) => (headline(r) ? headline(r).name : "—")],
    ["success", (r) => { const e = headline(r); return e ? `${pct(e.success_rate)} [${pct(e.success_lo)}, ${pct(e.success_hi)}]` : "—"; }],
    ["pos. error (m)", (r) => num(headline(r) && headline(r).position_error_m)],
    ["crash rate", (r) => pct(headline(r) && headline(r).crash_rate)]];
  const keys = [...new Set(runs.flatMap((r) => Object.keys(r.config_flat || {})))].sort();
  const differing = keys.filter((k) => new Set(runs.map((r) => (r.config_flat || {})[k])).size > 1);
  const tags = [...new Set(scalars.flatMap((s) => Object.keys(s.tags || {})))].sort();
  const video = (r) => r.artifacts.find((a) => a.kind === "video");

  mount(
    h("p", {}, h("a", { href: "#/" }, "← leaderboard")),
    h("h1", {}, `Compare ${runs.length} runs`),
    h("table", { class: "compare", id: "compare-table" },
      h("thead", {}, h("tr", {}, h("th", {}, ""), runs.map((r) => h("th", {}, h("a", { href: runHref(r.name) }, r.name))))),
      h("tbody", {}, rowsDef.map(([label, f]) => h("tr", {}, h("th", {}, label), runs.map((r) => h("td", {}, f(r))))))),
    h("h2", {}, "Config differences"),
    differing.length ? h("table", { class: "compare" }, h("tbody", {}, differing.map((k) => h("tr", {}, h("th", {}, k),
      runs.map((r) => h("td", {}, dash((r.config_flat || {})[k]))))))) : h("p", { class: "empty" }, "Configs are identical."),
    h("h2", {}, "Learning curves"),
    tags.length ? h("div", { class: "plots" }, tags.map((t) => h("figure", { class: "curve", "data-tag": t },
      Plot.line(scalars.map((s, i) => ({ name: runs[i].name, points: (s.tags || {})[t] || [] })), { title: t }))))
      : h("p", { class: "empty" }, "No learning curves."),
    h("h2", {}, "Videos"),
    h("div", { class: "side-by-side" }, runs.map((r) => h("figure", {}, video(r)
      ? h("video", { src: video(r).url, controls: true, muted: true, preload: "metadata", width: 360 })
      : h("p", { class: "empty" }, "no video"), h("figcaption", {}, r.name)))),
  );
}

// ---------------------------------------------------------------- curves across seeds
const X_CHOICES = [["steps", "env steps"], ["time", "wall time"], ["iteration", "iteration"]];

function download(label, href, name, id) {
  return h("a", { href, download: name, id, class: "download" }, label);
}

function svgDataUrl(svg) {
  const copy = svg.cloneNode(true);
  copy.setAttribute("xmlns", "http://www.w3.org/2000/svg");
  return `data:image/svg+xml;charset=utf-8,${encodeURIComponent(new XMLSerializer().serializeToString(copy))}`;
}

function pngLink(svg) {
  // Rasterised on click: the SVG drawn into a canvas (data: images are allowed by the page's CSP).
  const a = h("a", { href: "#", id: "download-png", class: "download" }, "PNG");
  a.addEventListener("click", (ev) => {
    ev.preventDefault();
    const img = new Image();
    img.onload = () => {
      const c = document.createElement("canvas");
      c.width = svg.width.baseVal.value * 2; c.height = svg.height.baseVal.value * 2;
      const g = c.getContext("2d");
      g.fillStyle = "#fff"; g.fillRect(0, 0, c.width, c.height);
      g.drawImage(img, 0, 0, c.width, c.height);
      const out = h("a", { href: c.toDataURL("image/png"), download: "curves.png" });
      out.click();
    };
    img.src = svgDataUrl(svg);
  });
  return a;
}

async function curvesPage(params) {
  const names = params.getAll("run");
  if (!names.length) { location.hash = "#/"; return; }
  const tag = params.get("tag") || "Train/success_rate";
  const x = params.get("x") || "steps";
  const smooth = params.get("smooth") || "0";
  const q = new URLSearchParams();
  for (const n of names) q.append("run", n);
  q.set("tag", tag); q.set("x", x); q.set("smooth", smooth);
  const [data, first] = await Promise.all([
    getJSON(`/api/curves?${q}`),
    getJSON(`/api/scalars?name=${encodeURIComponent(names[0])}`),
  ]);
  document.title = "robot_rl — curves across seeds";
  const go = (changes) => {
    const p = new URLSearchParams(q);
    for (const [k, v] of Object.entries(changes)) p.set(k, v);
    location.hash = `#/curves?${p}`;
  };
  const tags = Object.keys(first.tags || {}).filter((t) => !t.startsWith("Perf/total_env_steps") && !t.startsWith("Perf/train_time_s"));
  if (!tags.includes(tag)) tags.unshift(tag);
  const controls = h("form", { class: "filters", id: "curve-controls", onsubmit: (e) => e.preventDefault() },
    h("label", {}, "metric ", h("select", { id: "curve-tag", onchange: (e) => go({ tag: e.target.value }) },
      tags.map((t) => h("option", { value: t, selected: t === tag }, t)))),
    h("label", {}, " x axis ", h("select", { id: "curve-x", onchange: (e) => go({ x: e.target.value }) },
      X_CHOICES.map(([v, l]) => h("option", { value: v, selected: v === x }, l)))),
    h("label", {}, " smoothing ", h("input", { id: "curve-smooth", type: "range", min: "0", max: "0.95", step: "0.05", value: smooth,
      onchange: (e) => go({ smooth: e.target.value }) }), ` ${smooth}`));
  const series = data.groups.map((g, i) => ({
    name: `${g.label} (${g.n_seeds} seed${g.n_seeds === 1 ? "" : "s"})`,
    group: g.label,
    color: Plot.COLORS[i % Plot.COLORS.length],
    points: g.points.map((p) => [p[0], p[1]]),
    band: g.n_with_data > 1 ? g.points.map((p) => [p[0], p[2], p[3]]) : null,
  }));
  const figure = Plot.line(series, { title: `${tag}: mean and 95% interval across seeds`, xlabel: data.x_label, width: 760, height: 340 });
  figure.id = "curve-figure";
  const last = (g) => (g.points.length ? g.points[g.points.length - 1] : null);
  const table = sortable(h("table", { class: "groups", id: "curve-groups" },
    h("thead", {}, h("tr", {}, ["configuration", "seeds", `final ${tag} (mean)`, "95% interval", `${data.x_label} reached`, "runs"].map((c) => h("th", {}, c)))),
    h("tbody", {}, data.groups.map((g) => h("tr", { "data-group": g.label },
      h("td", {}, g.label), h("td", { "data-value": g.n_seeds }, g.n_with_data === g.n_seeds ? String(g.n_seeds) : `${g.n_seeds} (${g.n_with_data} with data)`),
      h("td", {}, last(g) ? num(last(g)[1], 4) : "—"),
      h("td", { "data-value": last(g) ? last(g)[2] : null }, last(g) && g.n_with_data > 1 ? `[${num(last(g)[2], 4)}, ${num(last(g)[3], 4)}]` : "—"),
      h("td", {}, last(g) ? num(last(g)[0], 4) : g.n_with_data ? "seeds do not overlap" : "no data"),
      h("td", {}, g.runs.flatMap((n, k) => [k ? ", " : null, h("a", { href: runHref(n) }, n)])))))));
  mount(
    h("p", {}, h("a", { href: "#/" }, "← leaderboard")),
    h("h1", {}, `Curves across seeds: ${names.length} runs, ${data.groups.length} configuration${data.groups.length === 1 ? "" : "s"}`),
    h("p", { class: "note" }, "Runs are grouped by their config without seed, name and evaluation settings; each group is drawn over the range all its seeds reached."),
    controls,
    h("figure", { class: "curve wide", "data-tag": tag }, figure),
    h("p", { class: "downloads" }, "Download: ", download("CSV", `/api/curves.csv?${q}`, "curves.csv", "download-csv"), " · ",
      download("SVG", svgDataUrl(figure), "curves.svg", "download-svg"), " · ", pngLink(figure)),
    table,
  );
}

// ---------------------------------------------------------------- where an evaluation failed
function histogram(values, opts) {
  const o = Object.assign({ bins: 20, title: "", xlabel: "" }, opts || {});
  const finite = values.filter((v) => Number.isFinite(v));
  if (!finite.length) return Plot.line([], o);
  let lo = Infinity, hi = -Infinity;
  for (const v of finite) { if (v < lo) lo = v; if (v > hi) hi = v; }
  if (hi === lo) hi = lo + 1e-9;
  const width = (hi - lo) / o.bins;
  const counts = new Array(o.bins).fill(0);
  for (const v of finite) counts[Math.min(o.bins - 1, Math.floor((v - lo) / width))] += 1;
  // drawn as a step outline: one horizontal segment per bin
  const points = counts.flatMap((c, i) => [[lo + i * width, c], [lo + (i + 1) * width, c]]);
  const svg = Plot.line([{ name: "episodes", points: [[lo, 0], ...points, [hi, 0]] }], { title: o.title, xlabel: o.xlabel });
  svg.dataset.counts = counts.join(",");
  return svg;
}

async function episodesPage(runName, evalName) {
  const eps = await getJSON(`/api/episodes?${new URLSearchParams({ name: runName, eval: evalName })}`);
  document.title = `robot_rl — ${runName} · ${evalName}`;
  const extraKeys = [...new Set(eps.flatMap((e) => Object.keys(e)))]
    .filter((k) => !["episode", "success", "crashed", "position_error_m", "return", "trace_dt_s"].includes(k))
    .filter((k) => eps.every((e) => e[k] === undefined || e[k] === null || typeof e[k] !== "object"));
  // The first episodes' paths (Task.trace_position): height over time and the path seen from above.
  const traced = eps.filter((e) => Array.isArray(e.trace_position_m) && e.trace_position_m.length);
  const trajectories = traced.length ? h("section", { id: "trajectories" }, h("h2", {}, "Trajectories"),
    h("div", { class: "plots" },
      h("figure", { class: "curve", id: "trace-height" }, Plot.line(traced.map((e) => ({
        name: `episode ${e.episode}${e.success ? "" : " (failed)"}`, group: `episode-${e.episode}`,
        points: e.trace_position_m.map((p, k) => [k * (e.trace_dt_s || 1), p[2]]) })), { title: "height z (m)", xlabel: "s" })),
      h("figure", { class: "curve", id: "trace-path" }, Plot.line(traced.map((e) => ({
        name: `episode ${e.episode}`, group: `episode-${e.episode}`,
        points: e.trace_position_m.map((p) => [p[0], p[1]]) })), { title: "path from above: y (m) against x (m)", xlabel: "x (m)" }))))
    : null;
  const failed = eps.filter((e) => !e.success).length;
  const columns = ["episode", "success", "crashed", "position error (m)", "return", ...extraKeys];
  const play = (e) => `robot-rl play run=runs/${runName} episode=${e.episode} evaluation=${evalName}`;
  mount(
    h("p", {}, h("a", { href: runHref(runName) }, `← ${runName}`)),
    h("h1", {}, `Episodes of ${evalName}`),
    h("p", { id: "episode-summary" }, `${eps.length} episodes, ${failed} failed. Click a column to sort; `,
      "replay one with ", h("code", {}, play({ episode: "<id>" }))),
    eps.length ? h("div", { class: "plots" },
      h("figure", { class: "curve", id: "hist-error" }, histogram(eps.map((e) => e.position_error_m), { title: "final position error (m)", xlabel: "m" })),
      h("figure", { class: "curve", id: "hist-return" }, histogram(eps.map((e) => e.return), { title: "episode return", xlabel: "return" })))
      : h("p", { class: "empty" }, "No per-episode records for this evaluation."),
    trajectories,
    sortable(h("table", { class: "runs", id: "episodes" },
      h("thead", {}, h("tr", {}, columns.map((c) => h("th", {}, c)))),
      h("tbody", {}, eps.map((e) => h("tr", { class: e.success ? "ok" : "failed", "data-episode": e.episode, title: play(e) },
        h("td", {}, String(e.episode)), h("td", {}, e.success ? "yes" : "no"), h("td", {}, e.crashed ? "yes" : "no"),
        h("td", {}, num(e.position_error_m, 4)), h("td", {}, num(e.return, 4)),
        extraKeys.map((k) => h("td", {}, typeof e[k] === "number" ? num(e[k], 4) : dash(e[k])))))))),
  );
}

window.addEventListener("hashchange", route);
route();
