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
  return h("td", { class: "success" }, Plot.interval(v, lo, hi), " ", txt);
}

function route() {
  const raw = location.hash.replace(/^#/, "") || "/";
  const [path, qs] = raw.split("?");
  const params = new URLSearchParams(qs || "");
  let view;
  if (path.startsWith("/run/")) view = runPage(decodeURIComponent(path.slice(5)));
  else if (path === "/compare") view = comparePage(params.getAll("run"));
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
    h("table", { class: "groups" },
      h("thead", {}, h("tr", {}, ["algo", "reward", "guidance", "seeds", "success (mean, 95% CI across seeds)", "episodes"].map((c) => h("th", {}, c)))),
      h("tbody", {}, t.groups.map((g) => h("tr", {},
        h("td", {}, dash(g.algo)), h("td", {}, dash(g.reward)), h("td", {}, dash(g.guidance)),
        h("td", {}, h("a", { href: boardHash({ ...filterValues, task: g.task, algo: g.algo, reward: g.reward, guidance: g.guidance }, 1),
          title: "list these runs" }, String(g.n_seeds))),
        successCell(g.success_mean, g.success_lo, g.success_hi),
        h("td", {}, String(g.episodes))))))));

  const compareBtn = h("button", { id: "compare", disabled: selected.size < 2, onclick: () => {
    const p = new URLSearchParams();
    for (const n of selected) p.append("run", n);
    location.hash = `#/compare?${p}`;
  } }, "Compare selected");

  const runRow = (r) => h("tr", { class: "run-row", "data-run": r.name },
    h("td", {}, h("input", { type: "checkbox", "aria-label": `select ${r.name}`, checked: selected.has(r.name), onchange: (e) => {
      if (e.target.checked) selected.add(r.name); else selected.delete(r.name);
      compareBtn.disabled = selected.size < 2;
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
    h("section", {}, h("h2", {}, `Runs (${data.total})`), compareBtn,
      pager(data, filterValues, page),
      h("table", { class: "runs", id: "runs" },
        h("thead", {}, h("tr", {}, ["", "run", "task", "algo", "reward", "guidance", "seed", "status", "standard evaluation", "success [95% CI]", "pos. error (m)", "crash rate", "bundle success", "zero-policy success", "SITL error (m)"].map((c) => h("th", {}, c)))),
        h("tbody", {}, data.runs.map(runRow))),
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
      h("td", {}, e.name), h("td", { class: "kind" }, dash(e.kind)), h("td", {}, dash(e.randomization)), h("td", {}, dash(e.episodes)), h("td", {}, dash(e.seed)),
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

window.addEventListener("hashchange", route);
route();
