"""The dashboard in a real browser: Debian's headless Chromium driven by Playwright.

Never downloads a browser (no ``playwright install``): it uses /usr/bin/chromium, and skips if
that or the playwright package is missing. A screenshot lands in test-artifacts/.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np
import pytest

from robot_rl.dashboard.server import DashboardServer

CHROMIUM = os.environ.get("ROBOT_RL_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[3] / "test-artifacts"
HTML_RUN = '<img src=x onerror="window.__pwned=1">'  # same as conftest.HTML_RUN
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--autoplay-policy=no-user-gesture-required",
]

sync_api = pytest.importorskip("playwright.sync_api")
if not Path(CHROMIUM).exists():
    pytest.skip(f"{CHROMIUM} not installed (apt-get install chromium)", allow_module_level=True)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


def _guarded_page(browser: Any, base_url: str) -> Iterator[Any]:
    # bypass_csp: Playwright's waits evaluate strings, which the page's CSP forbids. It also makes
    # the escaping test stricter: markup must stay inert without the CSP's help.
    context = browser.new_context(viewport={"width": 1280, "height": 1000}, bypass_csp=True)
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    # The page must never reach beyond the dashboard (no CDN): anything else is aborted and fails.
    offsite: list[str] = []

    def guard(route: Any) -> None:
        if route.request.url.startswith(base_url):
            route.continue_()
        else:
            offsite.append(route.request.url)
            route.abort()

    pg.route("**/*", guard)
    pg.errors = errors
    yield pg
    context.close()
    assert not offsite, offsite
    assert not errors, errors


@pytest.fixture()
def page(browser: Any, server: DashboardServer) -> Iterator[Any]:
    yield from _guarded_page(browser, server.url)


@pytest.fixture()
def hostile_page(browser: Any, hostile_server: DashboardServer) -> Iterator[Any]:
    yield from _guarded_page(browser, hostile_server.url)


def test_leaderboard_filter_run_page_video(page: Any, server: DashboardServer) -> None:
    page.goto(server.url)
    page.wait_for_selector("#runs tbody tr.run-row")
    names = page.locator("#runs a.run-link").all_inner_texts()
    assert {"hover_ppo_s1", "hover_ppo_s2", "lift_vlm_s1", "hover_live"} <= set(names)
    assert page.locator("table.groups").count() == 2  # one leaderboard per task
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "dashboard_leaderboard.png"), full_page=True)

    page.select_option("#filter-task", "franka_lift")
    page.wait_for_function("document.querySelectorAll('#runs tbody tr.run-row').length === 1")
    assert page.locator("#runs a.run-link").all_inner_texts() == ["lift_vlm_s1"]

    page.click("text=lift_vlm_s1")
    page.wait_for_selector("#curves svg.plot polyline")
    assert page.locator("#curves figure.curve").count() >= 3
    points = page.locator("#curves figure[data-tag='Train/mean_reward'] polyline").get_attribute("points")
    assert points and len(points.split()) >= 20
    assert page.locator("#reward-terms svg rect").count() == 3
    assert page.locator("#plan .plan-steps li").first.inner_text() == "reach above <b>cube</b>"
    page.wait_for_function("document.querySelector('#keypoints img').naturalWidth > 0")

    video = page.locator("#videos video").first
    video.wait_for()
    result = page.evaluate(
        """async () => {
            const v = document.querySelector('#videos video');
            let errored = false;
            v.addEventListener('error', () => { errored = true; });
            v.muted = true;
            if (v.readyState < 1) await new Promise((ok, bad) => {
                v.addEventListener('loadedmetadata', ok, { once: true });
                v.addEventListener('error', () => bad(new Error('video error ' + (v.error && v.error.code))),
                                   { once: true });
            });
            const t0 = v.currentTime;
            await v.play();
            await new Promise((ok) => setTimeout(ok, 1200));
            v.pause();
            return { width: v.videoWidth, t0, t1: v.currentTime, errored, code: v.error && v.error.code };
        }"""
    )
    assert result["width"] > 0, result
    assert result["t1"] - result["t0"] >= 0.5, result
    assert not result["errored"] and result["code"] is None, result

    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "dashboard_run_page.png"), full_page=True)


def test_real_training_run(page: Any, server: DashboardServer) -> None:
    """A run made by robot-rl train/eval/play: listed, its curves plotted, its video playing."""
    page.goto(server.url)
    page.wait_for_selector("#runs tbody tr.run-row")
    assert "hover_real" in page.locator("#runs a.run-link").all_inner_texts()
    page.click("text=hover_real")
    page.wait_for_selector("#curves figure[data-tag='Train/mean_reward'] polyline")
    assert page.locator("#reward-terms svg rect").count() >= 5  # our per-term reward breakdown
    result = page.evaluate(
        """async () => {
            const v = document.querySelector('#videos video');
            v.muted = true;
            if (v.readyState < 1) await new Promise((ok) => v.addEventListener('loadedmetadata', ok, { once: true }));
            const t0 = v.currentTime;
            await v.play();
            await new Promise((ok) => setTimeout(ok, 1000));
            return { width: v.videoWidth, dt: v.currentTime - t0, code: v.error && v.error.code };
        }"""
    )
    assert result["width"] > 0 and result["dt"] >= 0.5 and result["code"] is None, result
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "dashboard_real_run.png"), full_page=True)


def test_html_run_name_is_escaped(page: Any, server: DashboardServer) -> None:
    page.goto(server.url)
    page.wait_for_selector("#runs tbody tr.run-row")
    assert HTML_RUN in page.locator("#runs a.run-link").all_inner_texts()
    page.goto(server.url + "#/run/" + quote(HTML_RUN, safe=""))
    page.wait_for_selector("#run-name")
    assert page.locator("#run-name").inner_text() == HTML_RUN
    page.wait_for_timeout(300)
    assert page.evaluate("window.__pwned === undefined")
    assert "null" not in page.locator("main").inner_text().split()
    assert page.locator("main img[src='x']").count() == 0


def test_live_run_and_compare(page: Any, server: DashboardServer) -> None:
    page.goto(server.url + "#/run/hover_live")
    page.wait_for_selector("#curves svg.plot polyline")  # truncated event file still plots
    # Its only evaluation file is cut mid-write: listed as invalid, not as a result.
    assert page.locator("#evals tr.invalid").inner_text().startswith("partial\tinvalid: not valid JSON")
    page.goto(server.url)
    page.wait_for_selector("#runs tbody tr.run-row")
    page.check("tr[data-run='hover_ppo_s1'] input[type=checkbox]")
    page.check("tr[data-run='hover_ppo_s2'] input[type=checkbox]")
    page.click("#compare")
    page.wait_for_selector("#compare-table")
    assert page.locator("figure.curve polyline").count() >= 2
    assert "algo.learning_rate" in page.locator("main").inner_text()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "dashboard_compare.png"), full_page=True)


def test_empty_store_page(browser: Any, tmp_path: Path) -> None:
    import threading

    from robot_rl.dashboard.server import make_server

    srv = make_server(tmp_path, port=0, rescan_interval_s=0)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        context = browser.new_context()
        pg = context.new_page()
        pg.goto(srv.url)
        pg.wait_for_selector("#empty")
        assert "No runs in the store yet" in pg.locator("#empty").inner_text()
        context.close()
    finally:
        srv.shutdown()
        srv.server_close()
        t.join(5)


def test_pages_and_hostile_runs(hostile_page: Any, hostile_server: DashboardServer) -> None:
    """120 more runs page by page (50 a page), ticks kept across pages; a run with malformed
    evaluation files shows them as invalid; a run whose tb/ links to / says so."""
    store = hostile_server.store
    for i in range(120):
        store.record_run(f"paged_{i:03d}", task="ur5_reach", algo="ppo", reward="dense", guidance="none", seed=i)
        store.record_evaluation(
            f"paged_{i:03d}", {"name": "final", "episodes": 10, "metrics": {"success_rate": i / 200}}
        )
    hostile_page.goto(hostile_server.url + "#/?task=ur5_reach")
    hostile_page.wait_for_selector("#runs tbody tr.run-row")
    assert hostile_page.locator("#page-info").first.inner_text() == "runs 1–50 of 120 · page 1 of 3"
    first = hostile_page.locator("#runs a.run-link").all_inner_texts()
    assert first[:2] == ["paged_119", "paged_118"] and len(first) == 50
    hostile_page.check("tr[data-run='paged_119'] input[type=checkbox]")
    hostile_page.locator("#page-next").first.click()
    hostile_page.wait_for_function("document.querySelector('#page-info').textContent.startsWith('runs 51–100')")
    second = hostile_page.locator("#runs a.run-link").all_inner_texts()
    assert len(second) == 50 and not set(first) & set(second) and second[0] == "paged_069"
    hostile_page.check("tr[data-run='paged_069'] input[type=checkbox]")
    hostile_page.locator("#page-last").first.click()
    hostile_page.wait_for_function("document.querySelector('#page-info').textContent.startsWith('runs 101–120')")
    assert hostile_page.locator("#runs a.run-link").all_inner_texts()[-1] == "paged_000"
    assert hostile_page.locator("#compare").is_enabled()  # two ticked, on two other pages
    hostile_page.click("#compare")
    hostile_page.wait_for_selector("#compare-table")
    assert hostile_page.locator("#compare-table thead a").all_inner_texts() == ["paged_119", "paged_069"]

    hostile_page.goto(hostile_server.url + "#/run/badeval")
    hostile_page.wait_for_selector("#evals")
    invalid = hostile_page.locator("#evals tr.invalid").all_inner_texts()
    assert len(invalid) == 6 and all("\tinvalid: " in t for t in invalid), invalid
    assert hostile_page.locator("#evals tr[data-eval='final']:not(.invalid)").count() == 1
    assert hostile_page.locator("#reward-terms svg rect").count() == 3  # from the valid evaluation
    hostile_page.goto(hostile_server.url + "#/run/thief")
    hostile_page.wait_for_selector("#tb-refused")
    assert "outside its run" in hostile_page.locator("#tb-refused").inner_text()
    assert hostile_page.locator("#videos video").count() == 2  # own.mp4 and its in-run link, not db.mp4
    ARTIFACTS.mkdir(exist_ok=True)
    hostile_page.screenshot(path=str(ARTIFACTS / "dashboard_hostile_run.png"), full_page=True)


def test_the_headline_is_the_standard_evaluation(browser: Any, tiny_run: Path, tmp_path: Path, serve: Any) -> None:
    """A real run (tiny_run: train, eval, export) flown in SITL, then evaluated with zero actions and as its
    bundle, each by our own commands: the leaderboard keeps the standard evaluation's success and interval
    as the run's headline, and shows the others in their own columns."""
    import shutil

    from robot_rl.commands.evaluate import evaluate_run
    from robot_rl.sitl_flight import fly_sitl

    root = tmp_path / "runs"
    run = root / "demo_like"
    shutil.copytree(tiny_run, run)
    standard = json.loads((run / "eval" / "checkpoint_train.json").read_text())
    cfg = ["eval.episodes=32", f"runs_root={root}"]
    fly_sitl(run / "bundle", seconds=2.0, ros="false", out=run / "eval" / "sitl.json")  # as make demo does
    zero = evaluate_run(run, cfg, policy="zero")
    bundle = evaluate_run(run, cfg, use_bundle=True)
    assert zero["checkpoint"] is None and standard["checkpoint"].startswith("checkpoints/model_")
    server = serve(root)
    for pg in _guarded_page(browser, server.url):
        pg.goto(server.url)
        row = pg.locator("#runs tr.run-row[data-run='demo_like']")
        row.wait_for()
        cells = row.locator("td").all_inner_texts()
        m = standard["metrics"]
        lo, hi = m["success_ci95"]
        assert cells[8].startswith("checkpoint_train (train, 32 ep)")
        assert f"{100 * m['success_rate']:.1f}%" in cells[9] and f"{100 * lo:.1f}%" in cells[9]
        assert f"{100 * hi:.1f}%" in cells[9]
        assert cells[12] == f"{100 * bundle['metrics']['success_rate']:.1f}%"
        assert cells[13] == f"{100 * zero['metrics']['success_rate']:.1f}%"
        assert cells[14] != "—"  # the SITL flight's final error
        # where it failed: the standard evaluation's episodes, sortable, with their histograms
        pg.click("#runs tr.run-row[data-run='demo_like'] a.run-link")
        pg.click("#evals tr[data-eval='checkpoint_train'] a.episodes-link")
        rows = pg.locator("#episodes tbody tr")
        rows.nth(31).wait_for()
        assert rows.count() == 32 == len(standard["per_episode"])
        counts = pg.locator("#hist-error svg").get_attribute("data-counts")
        assert sum(int(c) for c in counts.split(",")) == 32
        failed = sum(not e["success"] for e in standard["per_episode"])
        assert f"32 episodes, {failed} failed" in pg.locator("#episode-summary").inner_text()
        pg.click("#episodes thead th:nth-child(4)")  # position error, ascending
        shown = [float(t) for t in pg.locator("#episodes tbody tr td:nth-child(4)").all_inner_texts()]
        recorded = sorted(e["position_error_m"] for e in standard["per_episode"])
        assert shown == pytest.approx(recorded, rel=1e-3)
        traced = [e for e in standard["per_episode"] if "trace_position_m" in e]
        assert [e["episode"] for e in traced] == [0, 1, 2, 3]  # evaluate records the first four episodes' paths
        heights = pg.locator("#trace-height polyline.plot-line")
        assert heights.count() == 4 and pg.locator("#trace-path polyline.plot-line").count() == 4
        # each drawn with one point per recorded control step
        assert len(heights.first.get_attribute("points").split()) == len(traced[0]["trace_position_m"])
        first = int(rows.first.get_attribute("data-episode"))
        assert standard["per_episode"][first]["position_error_m"] == pytest.approx(recorded[0])


@pytest.mark.slow
def test_sim_vs_real_page(browser: Any, sim2real_root: Path, serve: Any) -> None:
    """The sim-vs-real page over what robot-rl sysid and robot-rl replay wrote for the SITL "real" flight:
    reached from the main page's navigation; per axis the logged trajectory, each model's open-loop windows and
    the closed loop; the horizon errors equal replay.json's; the fit with its intervals beside the nominal
    values; the repair report; a working link to sysid's report. A cut replay.json and a bad log in a good
    file are messages in place of that entry or log, and the rest still renders."""
    doc = json.loads((sim2real_root / "sim2real" / "flight" / "replay.json").read_text())
    entry = doc["logs"][0]
    server = serve(sim2real_root)
    for pg in _guarded_page(browser, server.url):
        pg.goto(server.url)
        pg.wait_for_selector("#runs tbody tr.run-row")
        assert pg.locator("#runs a.run-link").all_inner_texts() == ["hover_ppo_s1"]  # sim2real/ is not a run
        pg.click("#nav-sim2real")
        flight = pg.locator("section.s2r-entry[data-entry='flight']")
        flight.locator("article.s2r-log").wait_for()
        assert pg.url.endswith("#/sim2real")
        assert {"flight", "broken", "two_logs"} == set(
            pg.locator("section.s2r-entry").evaluate_all("els => els.map(e => e.dataset.entry)")
        )
        log = flight.locator("article.s2r-log")
        assert log.get_attribute("data-log") == entry["log"]

        # trajectories: three axes, each with the log, every open-loop window of both models and the closed loop
        assert log.locator("figure.s2r-axis").evaluate_all("els => els.map(e => e.dataset.axis)") == ["x", "y", "z"]
        windows = {r["label"]: r["windows"] for r in entry["open_loop"]}
        assert set(windows) == {"nominal", "fitted"} and min(windows.values()) >= 5
        for axis in "xyz":
            fig = log.locator(f"figure.s2r-axis[data-axis='{axis}']")
            logged = fig.locator("polyline[data-series='log']").get_attribute("points").split()
            assert len(logged) == len(entry["t"])  # a 10 s log is drawn whole
            assert len({p.split(",")[1] for p in logged}) > 20  # it moves
            for label, k in windows.items():
                drawn = fig.locator(f"polyline[data-series='open-{label}']")
                assert drawn.count() == k
                assert len(drawn.first.get_attribute("points").split()) == len(entry["open_loop"][0]["predicted"][0])
            for label in entry["closed_loop"]:
                points = fig.locator(f"polyline[data-series='closed-{label}']").get_attribute("points").split()
                assert len(points) == len(entry["closed_loop"][label]["t"])
        legend = log.locator("figure.s2r-axis[data-axis='z'] text.plot-legend").all_text_contents()
        assert legend == ["log", "nominal open loop", "fitted open loop", "nominal closed loop", "fitted closed loop"]

        # error over horizon: the numbers replay.json holds, per model, horizon and axis
        for r in entry["open_loop"]:
            for i, hz in enumerate(r["horizons_s"]):
                row = log.locator(f"table.s2r-horizons tr[data-model='{r['label']}'][data-horizon='{hz:g}']")
                for j, axis in enumerate("xyz"):
                    for cls, values in (("median", r["median_m"]), ("p90", r["p90_m"])):
                        cell = row.locator(f"td.{cls}[data-axis='{axis}']")
                        assert float(cell.get_attribute("data-value")) == values[i][j]
                        assert abs(float(cell.inner_text()) - 100 * values[i][j]) <= 0.005 + 1e-9
        assert log.locator("figure.s2r-horizon-plot polyline").count() == 6  # 3 axes x 2 models
        at_1s = "table.s2r-horizons tr[data-model='{}'][data-horizon='1'] td.median[data-axis='z']"
        fitted_1s, nominal_1s = (float(log.locator(at_1s.format(m)).inner_text()) for m in ("fitted", "nominal"))
        assert fitted_1s < nominal_1s  # the fit predicts better

        # parameters: fitted value and interval from the fit, nominal beside
        nominal = entry["params"]["nominal"]
        for name, fit in doc["fit"].items():
            row = log.locator(f"table.s2r-params tr[data-param='{name}']")
            assert float(row.locator("td.fitted").get_attribute("data-value")) == fit["value"]
            iv = row.locator("td.interval")
            assert [float(iv.get_attribute("data-lo")), float(iv.get_attribute("data-hi"))] == fit["interval"]
            assert iv.inner_text().startswith("[") and iv.inner_text().count(",") == 1
            assert float(row.locator("td.nominal").get_attribute("data-value")) == nominal[name]
        assert "least squares" in log.locator("table.s2r-params tr[data-param='thrust_scale'] td.how").inner_text()
        closed = log.locator("table.s2r-closed tr[data-model='fitted'] td[data-axis='z']")
        assert float(closed.get_attribute("data-value")) == entry["closed_loop"]["fitted"]["rms_m"]["z"]

        assert log.locator("ul.s2r-report li").all_inner_texts() == entry["report"]

        # sysid's report, served from the folder under a sandbox CSP
        href = flight.locator("a.s2r-file[data-file='report.html']").get_attribute("href")
        assert href == "/sim2real/flight/report.html"
        resp = pg.request.get(server.url.rstrip("/") + href)
        assert resp.status == 200 and resp.headers["content-type"].startswith("text/html")
        assert "sandbox" in resp.headers["content-security-policy"] and "thrust_scale" in resp.text()

        # the cut file: a message in place of the entry; the bad log: a message in place of that log
        broken = pg.locator("section.s2r-entry[data-entry='broken']")
        assert "replay.json is not valid JSON" in broken.locator(".s2r-invalid").inner_text()
        assert broken.locator("article.s2r-log").count() == 0
        two = pg.locator("section.s2r-entry[data-entry='two_logs']")
        assert two.locator("article.s2r-log:not(.invalid) figure.s2r-axis polyline[data-series='log']").count() == 3
        bad = two.locator("article.s2r-log.invalid")
        assert bad.get_attribute("data-log") == "second_flight.mcap"
        assert "position is not a list of" in bad.inner_text()
        ARTIFACTS.mkdir(exist_ok=True)
        pg.screenshot(path=str(ARTIFACTS / "dashboard_sim2real.png"), full_page=True)

        pg.goto(server.url + "#/sim2real/flight")  # one entry on its own
        pg.wait_for_function("document.querySelectorAll('section.s2r-entry').length === 1")
        assert pg.locator("section.s2r-entry article.s2r-log figure.s2r-axis").count() == 3


def test_sim_vs_real_page_shows_where_the_object_went(browser: Any, pick_place_s2r_root: Path, serve: Any) -> None:
    """A pick-and-place replay: per axis the object where the log's perception saw it and where the closed loop put
    it, the bowl beside; the RMS apart and whether the simulated object ended in the bowl, as replay.json holds."""
    doc = json.loads((pick_place_s2r_root / "sim2real" / "pick" / "replay.json").read_text())
    closed = doc["logs"][0]["closed_loop"]["nominal"]
    server = serve(pick_place_s2r_root)
    for pg in _guarded_page(browser, server.url):
        pg.goto(server.url + "#/sim2real/pick")
        log = pg.locator("section.s2r-entry[data-entry='pick'] article.s2r-log")
        log.locator("table.s2r-object").wait_for()
        figs = log.locator("figure.s2r-object-axis")
        assert figs.evaluate_all("els => els.map(e => e.dataset.axis)") == ["x", "y", "z"]
        z = figs.nth(2)
        logged = z.locator("polyline[data-series='object-log']").get_attribute("points").split()
        sim = z.locator("polyline[data-series='object-nominal']").get_attribute("points").split()
        assert len(logged) == len(sim) == len(closed["t"])
        heights = [float(p.split(",")[1]) for p in logged]
        assert min(heights) < heights[0] - 10  # drawn in pixels, y down: the object was lifted above its start
        assert z.locator("polyline[data-series='object-goal']").count() == 1
        row = log.locator("table.s2r-object tr[data-model='nominal']")
        for axis in "xyz":
            cell = row.locator(f"td[data-axis='{axis}']")
            assert float(cell.get_attribute("data-value")) == closed["object"]["rms_m"][axis]
        assert row.locator("td.in-goal").inner_text() == ("yes" if closed["object"]["sim_in_goal"] else "no")
        assert closed["object"]["sim_in_goal"]
        ARTIFACTS.mkdir(exist_ok=True)
        log.locator("figure.s2r-object-axis").nth(2).screenshot(path=str(ARTIFACTS / "dashboard_sim2real_object_z.png"))


def _tb_series(run: Path, tag: str) -> dict[int, float]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    (events,) = (run / "tb").glob("events.*")
    acc = EventAccumulator(str(events), size_guidance={"scalars": 0})
    acc.Reload()
    return {e.step: e.value for e in acc.Scalars(tag)}


def test_curves_across_seeds_page(browser: Any, seed_sweep_root: Path, serve: Any) -> None:
    """Six real runs (two learning rates x 3 seeds), selected on the leaderboard: the curve page draws one
    line and one band per configuration against env steps; its CSV ends, per configuration, at the mean and
    t interval of the three seeds' last logged values (read here from their own TensorBoard files)."""
    import csv
    import io
    import urllib.request

    runs = sorted(p for p in seed_sweep_root.iterdir() if p.is_dir())
    server = serve(seed_sweep_root)
    for pg in _guarded_page(browser, server.url):
        pg.goto(server.url)
        for r in runs:
            pg.locator(f"#runs tr.run-row[data-run='{r.name}'] input[type=checkbox]").check()
        pg.click("#curves-selected")
        pg.locator("#curve-groups tbody tr").nth(1).wait_for()
        pg.select_option("#curve-tag", "Loss/value")
        pg.wait_for_function("location.hash.includes('Loss%2Fvalue')")
        pg.locator("#curve-figure polyline.plot-line").nth(1).wait_for()
        labels = sorted(
            pg.locator("#curve-figure polyline.plot-line").evaluate_all("ls => ls.map(l => l.dataset.series)")
        )
        assert labels == ["algo.learning_rate=0.0003", "algo.learning_rate=0.001"]
        assert pg.locator("#curve-figure polygon.plot-band").count() == 2
        assert pg.locator("#curve-groups tbody tr td:nth-child(2)").all_inner_texts() == ["3", "3"]
        listed = pg.locator("#curve-groups tbody tr td:nth-child(6) a").all_inner_texts()
        assert sorted(listed) == [r.name for r in runs]
        csv_href = pg.locator("#download-csv").get_attribute("href")
        assert pg.locator("#download-svg").get_attribute("href").startswith("data:image/svg+xml")
        pg.screenshot(path=str(ARTIFACTS / "dashboard_curves.png"), full_page=True)
    with urllib.request.urlopen(server.url + csv_href) as resp:
        assert resp.headers["Content-Type"].startswith("text/csv")
        rows = list(csv.DictReader(io.StringIO(resp.read().decode())))
    by_group: dict[str, list[dict[str, str]]] = {}
    for row in rows:
        by_group.setdefault(row["group"], []).append(row)
    assert sorted(by_group) == ["algo.learning_rate=0.0003", "algo.learning_rate=0.001"]
    for group, grows in by_group.items():
        members = grows[0]["runs"].split()
        assert len(members) == 3 and len(grows) > 1
        lr = group.split("=")[1]
        assert all(f"learning_rate: {lr}" in (seed_sweep_root / m / "config.yaml").read_text() for m in members)
        # each seed's logged (env steps, value), NaN iterations left out as the page does
        seeds = []
        for m in members:
            value, steps = (
                _tb_series(seed_sweep_root / m, "Loss/value"),
                _tb_series(seed_sweep_root / m, "Perf/total_env_steps"),
            )
            its = sorted(i for i in value if np.isfinite(value[i]))
            seeds.append((np.array([steps[i] for i in its]), np.array([value[i] for i in its])))
        end = min(float(x[-1]) for x, _ in seeds)  # the curve ends where the shortest seed does
        assert float(grows[-1]["x (env steps)"]) == end
        final = [float(np.interp(end, x, y)) for x, y in seeds]
        mean, sd = sum(final) / 3, float(np.std(final, ddof=1))
        half = 4.303 * sd / 3**0.5  # t(0.975, 2 dof), as robot_rl.store.stats tabulates it
        got = [float(grows[-1][k]) for k in ("mean Loss/value", "ci95_lo", "ci95_hi")]
        assert got == pytest.approx([mean, mean - half, mean + half], rel=1e-5, abs=1e-6)
