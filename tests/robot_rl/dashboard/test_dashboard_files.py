"""Files stay inside their run (issue 24): symlinks out of a run are refused by the server and
the TensorBoard reader, malformed evaluation files mark that evaluation invalid without hiding
the run, and the leaderboard answers in pages.

The hostile runs root is built in conftest.make_hostile_root.
"""

from __future__ import annotations

import http.client
import json
import logging
import threading
import time
from pathlib import Path

import pytest

from robot_rl.dashboard.server import DashboardServer, make_server
from robot_rl.dashboard.tb import ScalarReader
from robot_rl.store import Store

OTHER_SECRETS = (b"other run's video", b"other run's plan", b"SQLite format 3", b"root:")


def get(srv: DashboardServer, path: str) -> tuple[int, bytes]:
    host, port = srv.server_address[:2]
    conn = http.client.HTTPConnection(host, port, timeout=30)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def get_json(srv: DashboardServer, path: str) -> dict:
    status, body = get(srv, path)
    assert status == 200, (path, status, body[:300])
    return json.loads(body)


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/artifacts/thief/videos/db.mp4", 403),  # the store database
        ("/artifacts/thief/videos/other.mp4", 403),  # another run's file
        ("/artifacts/thief/videos/root/etc/passwd", 403),  # a directory link to /
        ("/artifacts/thief/bundle/etc/passwd", 403),  # an artifact directory that is a link to /
        ("/artifacts/thief/guidance/plan.json", 403),  # another run's plan
        ("/artifacts/thief/checkpoints/meta.pt", 403),  # inside the run, but not an artifact
        ("/artifacts/alias/videos/rollout.mp4", 404),  # a run directory that is a link to another run
        ("/artifacts/thief/tb/x", 404),
    ],
)
def test_symlinks_out_of_a_run_are_refused(
    hostile_server: DashboardServer, hostile_root: Path, path: str, status: int
) -> None:
    got, body = get(hostile_server, path)
    assert got == status, (path, got, body[:200])
    assert not any(s in body for s in OTHER_SECRETS), body[:200]
    if status == 403:  # a short reason, naming the path within the run and no server path
        reason = json.loads(body)["error"]
        assert reason.startswith("refused: ") and str(hostile_root) not in reason, reason


def test_links_inside_a_run_are_served(hostile_server: DashboardServer) -> None:
    assert get(hostile_server, "/artifacts/thief/videos/own.mp4") == (200, b"thief's own video")
    assert get(hostile_server, "/artifacts/thief/videos/same.mp4") == (200, b"thief's own video")
    assert get(hostile_server, "/artifacts/other/videos/rollout.mp4") == (200, b"other run's video")


def test_run_page_lists_and_reads_only_its_own_files(hostile_server: DashboardServer) -> None:
    run = get_json(hostile_server, "/api/run?name=thief")
    assert sorted(a["relpath"] for a in run["artifacts"]) == ["videos/own.mp4", "videos/same.mp4"]
    assert run["plan"] is None  # guidance/plan.json is another run's
    # eval/stolen.json links to other's evaluation: not read, so not this run's result
    assert [e["name"] for e in run["evaluations"]] == ["final"]
    board = get_json(hostile_server, "/api/leaderboard?limit=500")
    names = [r["name"] for r in board["runs"]]
    assert "alias" not in names and {"thief", "other", "victim", "badeval", "tb_links"} <= set(names)
    assert get(hostile_server, "/api/run?name=alias")[0] == 404


def test_tb_symlink_to_root_is_not_walked(hostile_server: DashboardServer) -> None:
    start = time.monotonic()
    scalars = get_json(hostile_server, "/api/scalars?name=thief")
    # Walking / for event files takes minutes and answered 1,212 tags before the fix.
    assert time.monotonic() - start < 5
    assert scalars["status"] == "refused" and scalars["tags"] == {}
    assert "outside its run" in scalars["reason"]


def test_tb_reads_own_event_files_only(hostile_root: Path) -> None:
    """tb_links/tb holds its own event file plus a link to another run's tb/ directory, a
    link to another run's event file and a link to /: only its own file is read."""
    own = ScalarReader().read(hostile_root / "tb_links")
    other = ScalarReader().read(hostile_root / "other")
    assert own["status"] == "ok" and set(own["tags"]) == set(other["tags"])  # no "borrowed/..." tags
    assert own["tags"]["Train/mean_reward"] != other["tags"]["Train/mean_reward"]  # seeds 1 and 2


def test_malformed_evaluations_leave_the_run_visible(
    hostile_root: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    srv = make_server(hostile_root, port=0, store=str(tmp_path / "fresh.sqlite"), rescan_interval_s=0)
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    try:
        run = get_json(srv, "/api/run?name=badeval")
        evals = {e["name"]: e for e in run["evaluations"]}
        assert set(evals) == {"final", "wrong_types", "huge_ints", "huge_digits", "junk_rows", "not_json", "deep"}
        assert evals["final"]["invalid"] is None and evals["final"]["success_rate"] is not None
        reasons = {k: e["invalid"] for k, e in evals.items() if k != "final"}
        assert reasons["wrong_types"].startswith("episodes: expected an integer")
        assert reasons["huge_ints"].startswith("episodes: expected an integer") and "30 digits" in reasons["huge_ints"]
        assert reasons["huge_digits"].startswith("not valid JSON")
        assert reasons["junk_rows"] == "per_episode[1]: expected an object, got a number"
        assert reasons["not_json"].startswith("not valid JSON")
        assert reasons["deep"].startswith("not valid JSON")
        for e in evals.values():
            if e["invalid"]:
                assert e["success_rate"] is None and e["episodes"] is None
                assert get_json(srv, f"/api/episodes?name=badeval&eval={e['name']}") == []
        # The leaderboard ranks the run by its valid evaluation.
        row = next(r for r in get_json(srv, "/api/leaderboard?task=franka_lift")["runs"] if r["name"] == "badeval")
        assert row["eval_name"] == "final" and row["success_rate"] == evals["final"]["success_rate"]
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(timeout=5)
    # One log line per malformed file (no traceback), one per refused link.
    lines = [r for r in caplog.records if r.name.startswith("robot_rl.")]
    assert not [r for r in lines if r.exc_info], [r.getMessage() for r in lines if r.exc_info]
    invalid = [r.getMessage() for r in lines if "is invalid" in r.getMessage()]
    assert len(invalid) == 6 and all(m.startswith("run badeval: evaluation eval/") for m in invalid), invalid
    refused = sorted(r.getMessage().split()[3].rstrip(":") for r in lines if "run thief: refused" in r.getMessage())
    # tb/ is not the indexer's to read; videos/root matches no artifact pattern
    assert refused == [
        "bundle",
        "checkpoints/meta.pt",
        "eval/stolen.json",
        "guidance/plan.json",
        "videos/db.mp4",
        "videos/other.mp4",
    ], refused


def test_leaderboard_pages(tmp_path: Path) -> None:
    store = Store(tmp_path / "eval_store.sqlite")
    for i in range(23):
        name = f"run_{i:02d}"
        store.record_run(name, task=("a", "b")[i % 2], algo="ppo", reward="dense", guidance="none", seed=i)
        if i % 5:  # every fifth run is not evaluated
            store.record_evaluation(name, {"name": "final", "episodes": 10, "metrics": {"success_rate": i / 23}})
    store.close()
    srv = make_server(tmp_path, port=0, rescan_interval_s=0)
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    try:
        full = get_json(srv, "/api/leaderboard?limit=500")
        assert full["total"] == 23 and len(full["runs"]) == 23
        pages = [get_json(srv, f"/api/leaderboard?limit=5&offset={o}") for o in range(0, 25, 5)]
        assert [len(p["runs"]) for p in pages] == [5, 5, 5, 5, 3]
        assert [r["name"] for p in pages for r in p["runs"]] == [r["name"] for r in full["runs"]]
        assert all(p["total"] == 23 and p["tasks"] == full["tasks"] for p in pages)  # groups: all runs
        assert sum(g["n_seeds"] for t in full["tasks"] for g in t["groups"]) == 18
        # Within a task: best first, unevaluated last.
        a_runs = [r for r in full["runs"] if r["task"] == "a"]
        rates = [r["success_rate"] for r in a_runs]
        assert rates[-3:] == [None] * 3 and rates[:-3] == sorted(rates[:-3], reverse=True)
        filtered = get_json(srv, "/api/leaderboard?task=b&limit=4&offset=8")
        assert (
            filtered["total"] == 11
            and [r["name"] for r in filtered["runs"]] == [r["name"] for r in full["runs"] if r["task"] == "b"][8:12]
        )
        assert get_json(srv, "/api/leaderboard?offset=100")["runs"] == []
        for bad in ("limit=0", "limit=501", "limit=x", "offset=-1", "offset=1e3"):
            status, body = get(srv, f"/api/leaderboard?{bad}")
            assert status == 400 and b"limit" in body, bad
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(timeout=5)
