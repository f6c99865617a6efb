"""HTTP-level tests of the dashboard: API, artifacts with ranges, traversal, binding."""

from __future__ import annotations

import http.client
import json
import socket
from pathlib import Path
from urllib.parse import quote

import pytest

from robot_rl.dashboard import artifacts
from robot_rl.dashboard import server as dash
from robot_rl.dashboard.server import DashboardServer, make_server

HTML_RUN = '<img src=x onerror="window.__pwned=1">'  # same as conftest.HTML_RUN


def get(srv: DashboardServer, path: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    # http.client sends the path byte for byte: no client-side "../" normalisation that would
    # hide a traversal attempt from the server.
    host, port = srv.server_address[:2]
    conn = http.client.HTTPConnection(host, port, timeout=10)
    try:
        conn.request("GET", path, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def get_json(srv: DashboardServer, path: str) -> object:
    status, _, body = get(srv, path)
    assert status == 200, body
    return json.loads(body)


def test_leaderboard_groups_seeds_and_filters(server: DashboardServer) -> None:
    board = get_json(server, "/api/leaderboard")
    names = {r["name"] for r in board["runs"]}
    assert {"hover_ppo_s1", "hover_ppo_s2", "lift_vlm_s1", "hover_live", HTML_RUN} <= names
    hover = next(t for t in board["tasks"] if t["task"] == "crazyflie_hover")
    dense = next(g for g in hover["groups"] if g["reward"] == "dense" and g["guidance"] == "none")
    # hover_ppo_s1, hover_ppo_s2 and the real training run hover_real
    assert dense["n_seeds"] == 3 and dense["success_lo"] <= dense["success_mean"] <= dense["success_hi"]
    assert set(board["facets"]["task"]) == {"crazyflie_hover", "franka_lift"}
    live = next(r for r in board["runs"] if r["name"] == "hover_live")
    assert live["status"] == "running" and live["success_rate"] is None  # half-written eval skipped
    narrowed = get_json(server, "/api/leaderboard?task=franka_lift")
    assert [r["name"] for r in narrowed["runs"]] == ["lift_vlm_s1"]


def test_run_api_and_tolerant_scalars(server: DashboardServer) -> None:
    run = get_json(server, "/api/run?name=lift_vlm_s1")
    kinds = {a["kind"] for a in run["artifacts"]}
    assert {"video", "keypoints_prompt", "plan"} <= kinds
    assert run["plan"]["verification"]["attempts"] == 12
    assert "run_dir" not in run and run["config_flat"]["task.name"] == "franka_lift"
    scalars = get_json(server, "/api/scalars?name=hover_live")  # truncated event file
    assert scalars["status"] == "ok" and len(scalars["tags"]["Train/mean_reward"]) >= 20
    assert get_json(server, "/api/scalars?name=..")["status"] == "no-logs"
    assert get(server, "/api/run?name=nope")[0] == 404


def test_video_served_with_type_and_ranges(server: DashboardServer, video_file: Path) -> None:
    url = "/artifacts/hover_ppo_s1/videos/rollout.mp4"
    size = video_file.stat().st_size
    status, headers, body = get(server, url)
    assert status == 200 and headers["content-type"] == "video/mp4" and headers["accept-ranges"] == "bytes"
    assert body == video_file.read_bytes()
    status, headers, body = get(server, url, {"Range": "bytes=100-199"})
    assert status == 206 and headers["content-range"] == f"bytes 100-199/{size}" and len(body) == 100
    assert body == video_file.read_bytes()[100:200]
    status, headers, body = get(server, url, {"Range": "bytes=-50"})
    assert status == 206 and body == video_file.read_bytes()[-50:]
    status, headers, _ = get(server, url, {"Range": f"bytes={size + 10}-"})
    assert status == 416 and headers["content-range"] == f"bytes */{size}"


@pytest.mark.parametrize(
    "path",
    [
        "/artifacts/../../etc/passwd",
        "/artifacts/hover_ppo_s1/../../secret.txt",
        "/artifacts/hover_ppo_s1/videos/../../../secret.txt",
        "/artifacts/%2e%2e/secret.txt/x",
        "/artifacts/hover_ppo_s1/videos/%2e%2e/%2e%2e/%2e%2e/secret.txt",
        "/artifacts/hover_ppo_s1/videos/%2E%2E%2F%2E%2E%2F%2E%2E%2Fsecret.txt",
        "/artifacts/hover_ppo_s1/videos/%252e%252e/%252e%252e/%252e%252e/secret.txt",
        "/artifacts/hover_ppo_s1/videos/%25252e%25252e%25252fsecret.txt",
        "/artifacts/hover_ppo_s1/videos/..%5c..%5c..%5csecret.txt",
        "/artifacts/hover_ppo_s1/videos/escape.mp4",  # symlink out of the runs root
        "/artifacts/hover_ppo_s1/tb/x",  # not an artifact directory
        "/artifacts/hover_ppo_s1/meta.json",
        "/artifacts/eval_store.sqlite",
        "/artifacts/hover_ppo_s1/videos/rollout.mp4%00.png",
        "/static/../server.py",
        "/static/%2e%2e/server.py",
    ],
)
def test_traversal_refused(server: DashboardServer, path: str) -> None:
    status, _, body = get(server, path)
    assert status in (400, 403, 404), (path, status)
    assert b"top secret" not in body and b"root:" not in body and b"import" not in body


def test_symlink_inside_root_is_listed_only_when_inside(server: DashboardServer) -> None:
    run = get_json(server, "/api/run?name=hover_ppo_s1")
    assert [a["relpath"] for a in run["artifacts"] if a["kind"] == "video"] == ["videos/rollout.mp4"]


def test_html_run_name_travels_as_data(server: DashboardServer) -> None:
    run = get_json(server, "/api/run?name=" + quote(HTML_RUN, safe=""))
    assert run["name"] == HTML_RUN
    status, headers, body = get(server, "/")
    assert "script-src 'self'" in headers["content-security-policy"]
    assert headers["x-content-type-options"] == "nosniff"
    app_js = get(server, "/static/app.js")[2].decode()
    for sink in (".innerHTML", ".outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
        assert sink not in app_js


def test_empty_store(tmp_path: Path) -> None:
    srv = make_server(tmp_path, port=0, rescan_interval_s=0)
    try:
        import threading

        t = threading.Thread(target=srv.serve_forever, daemon=True)
        t.start()
        board = get_json(srv, "/api/leaderboard")
        assert board["runs"] == [] and board["tasks"] == []
        srv.shutdown()
        t.join(5)
    finally:
        srv.server_close()
    assert (tmp_path / "eval_store.sqlite").exists()


def test_binds_loopback_by_default(tmp_path: Path) -> None:
    srv = make_server(tmp_path, port=0, rescan_interval_s=0)
    try:
        assert srv.socket.getsockname()[0] == "127.0.0.1"
    finally:
        srv.server_close()


def test_public_bind_needs_flag(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="allow_public"):
        make_server(tmp_path, host="0.0.0.0", port=0)
    srv = make_server(tmp_path, host="0.0.0.0", port=0, allow_public=True, rescan_interval_s=0)
    try:
        # Checked on the socket only: no traffic goes to any non-loopback address.
        assert srv.socket.getsockname()[0] == "0.0.0.0"
        assert srv.socket.family == socket.AF_INET
    finally:
        srv.server_close()


def test_main_rejects_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert dash.main(["--runs-root", str(tmp_path), "--host", "0.0.0.0"]) == 2
    assert dash.main(["--runs-root", str(tmp_path / "missing")]) == 2
    assert dash.main(["--runs-root", str(tmp_path), "--port", "70000"]) == 2
    assert dash.main(["--port", "abc"]) == 2
    assert dash.main(["--bogus"]) == 2
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(lines) == 5 and all(ln.startswith("robot-rl dashboard: error:") for ln in lines)


def test_resolve_artifact_unit(runs_root: Path) -> None:
    assert artifacts.resolve_artifact(runs_root, "hover_ppo_s1/videos/rollout.mp4") is not None
    assert artifacts.resolve_artifact(runs_root, quote("hover_ppo_s1", safe="") + "/videos/rollout.mp4") is not None
    assert artifacts.resolve_artifact(runs_root, "hover_ppo_s1/videos/%2e%2e/videos/rollout.mp4") is None


def test_live_runs_are_picked_up(tmp_path: Path) -> None:
    import threading
    import time

    srv = make_server(tmp_path, port=0, rescan_interval_s=0.2)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        assert get_json(srv, "/api/leaderboard")["runs"] == []
        (tmp_path / "new_run").mkdir()
        (tmp_path / "new_run" / "meta.json").write_text(json.dumps({"task": "t", "status": "running"}))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            runs = get_json(srv, "/api/leaderboard")["runs"]
            if runs:
                break
            time.sleep(0.1)
        assert [r["name"] for r in runs] == ["new_run"]
    finally:
        srv.shutdown()
        srv.server_close()
        t.join(5)


def test_main_serves_on_loopback(tmp_path: Path) -> None:
    import subprocess
    import sys

    code = "import sys; from robot_rl.dashboard.server import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "--runs-root", str(tmp_path), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        assert "http://127.0.0.1:" in line, (line, proc.stderr.read() if proc.poll() is not None else "")
        port = int(line.rsplit(":", 1)[1].strip().strip("/"))
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/api/health")
        assert conn.getresponse().status == 200
        conn.close()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
