"""The sim-vs-real endpoints over folders that are not what robot-rl replay writes: bad replay.json files become
that entry's (or that log's) message, files outside an entry's folder are refused, and only the four files replay
and sysid write are served. The page over real replay output is test_dashboard_browser.test_sim_vs_real_page.

The bad files here are written by hand on purpose; every valid replay.json the tests read comes from our commands.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from robot_rl.dashboard.server import DashboardServer


def get(srv: DashboardServer, path: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    host, port = srv.server_address[:2]
    conn = http.client.HTTPConnection(host, port, timeout=10)  # sends the path byte for byte
    try:
        conn.request("GET", path, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def get_json(srv: DashboardServer, path: str) -> Any:
    status, _, body = get(srv, path)
    assert status == 200, (path, status, body[:300])
    return json.loads(body)


BAD_JSON = b"\x00\xff this is not JSON {"
REPORT = "<html><body><h1>thrust_scale</h1><script>window.ran = 1</script></body></html>"


@pytest.fixture(scope="module")
def s2r_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("s2r_hostile")
    (base / "secret.txt").write_text("top secret")
    root = base / "runs"
    s2r = root / "sim2real"
    for name in ("notjson", "deep", "shape", "nofile", "thief", "report", "fit_only"):
        (s2r / name).mkdir(parents=True)
    (s2r / "notjson" / "replay.json").write_bytes(BAD_JSON)
    (s2r / "deep" / "replay.json").write_text("[" * 100_000 + "]" * 100_000)
    (s2r / "shape" / "replay.json").write_text(
        json.dumps({"logs": [{"log": "a.mcap", "t": [0.0, 0.01], "position": [[0.0, 0.0, 0.0]]}, {"log": 7}]})
    )
    (s2r / "fit_only" / "replay.json").write_text(json.dumps({"logs": [], "fit": {"mass_kg": {"value": 1}}}))
    (s2r / "thief" / "report.html").symlink_to("../../eval_store.sqlite")
    (s2r / "thief" / "replay.json").symlink_to("../notjson/replay.json")
    (s2r / "thief" / "sysid.yaml").symlink_to("/etc/passwd")
    (s2r / "thief" / "replay.svg").symlink_to("../../../secret.txt")
    (s2r / "report" / "report.html").write_text(REPORT)
    (s2r / "report" / "notes.txt").write_text("not one of the four files")
    (s2r / "report" / "sysid.yaml").write_text("parameters: [1, 2\n")  # cut YAML
    (s2r / "alias").symlink_to("notjson", target_is_directory=True)
    return root


@pytest.fixture()
def s2r_server(s2r_root: Path, serve: Callable[[Path], DashboardServer]) -> DashboardServer:
    srv = serve(s2r_root)
    # the default store would live in the runs root; this one is elsewhere, so put a database where links point
    (s2r_root / "eval_store.sqlite").write_bytes(b"SQLite format 3\x00 the store")
    return srv


def entry(srv: DashboardServer, name: str) -> Any:
    return get_json(srv, f"/api/sim2real/entry?name={name}")


def test_listing_and_bad_entries(s2r_server: DashboardServer) -> None:
    listing = get_json(s2r_server, "/api/sim2real")
    names = {e["name"] for e in listing["entries"]}
    assert names == {"notjson", "deep", "shape", "nofile", "thief", "report", "fit_only"}  # not the alias link
    thief = next(e for e in listing["entries"] if e["name"] == "thief")
    assert thief["files"] == {} and len(thief["refused"]) == 4
    assert all("leads outside its sim2real folder" in r for r in thief["refused"])

    assert entry(s2r_server, "notjson")["invalid"].startswith("replay.json is not valid JSON")
    assert entry(s2r_server, "deep")["invalid"].startswith("replay.json is not valid JSON")
    assert entry(s2r_server, "nofile")["invalid"].startswith("no replay.json")
    assert entry(s2r_server, "thief")["invalid"] == "replay.json refused: replay.json leads outside its sim2real folder"
    assert "replay.json has no logs" in entry(s2r_server, "fit_only")["invalid"]
    shape = entry(s2r_server, "shape")
    assert "invalid" not in shape
    assert [(lg["log"], lg["invalid"]) for lg in shape["logs"]] == [
        ("a.mcap", "position is not a list of 2 [x, y, z]"),
        ("log 1", "log (the file it came from) is not a path"),
    ]
    report = entry(s2r_server, "report")
    assert len(report["notes"]) == 1 and report["notes"][0].startswith("sysid.yaml not read: ")
    assert set(report["files"]) == {"report.html", "sysid.yaml"}
    for name in ("nothere", "alias", "..", "%2e%2e", "a%2fb"):
        status, _, body = get(s2r_server, f"/api/sim2real/entry?name={name}")
        assert status == 404, (name, status, body)
    assert get(s2r_server, "/api/run?name=sim2real")[0] == 404  # the folder is not a run
    assert get_json(s2r_server, "/api/health") == {"ok": True}


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/sim2real/thief/report.html", 403),  # the store database
        ("/sim2real/thief/replay.json", 403),  # another entry's file
        ("/sim2real/thief/sysid.yaml", 403),  # /etc/passwd
        ("/sim2real/thief/replay.svg", 403),  # out of the runs root
        ("/sim2real/alias/replay.json", 404),  # an entry that is a link to another entry
        ("/sim2real/report/notes.txt", 404),  # inside, but not one of the four files
        ("/sim2real/report/../../eval_store.sqlite", 404),
        ("/sim2real/%2e%2e/eval_store.sqlite", 404),
        ("/sim2real/%252e%252e/eval_store.sqlite", 404),
        ("/sim2real/report/..%2f..%2feval_store.sqlite", 404),
        ("/sim2real/report", 404),
        ("/sim2real/nothere/report.html", 404),
        ("/sim2real/nofile/replay.json", 404),
    ],
)
def test_files_outside_an_entry_are_refused(s2r_server: DashboardServer, path: str, status: int) -> None:
    got, _, body = get(s2r_server, path)
    assert got == status, (path, got, body[:200])
    assert b"SQLite format 3" not in body and b"top secret" not in body and b"root:" not in body


def test_report_is_served_inert(s2r_server: DashboardServer) -> None:
    status, headers, body = get(s2r_server, "/sim2real/report/report.html")
    assert status == 200 and body.decode() == REPORT
    assert headers["content-type"] == "text/html; charset=utf-8"
    csp = headers["content-security-policy"]
    assert "sandbox" in csp and "default-src 'none'" in csp and "script-src" not in csp
    assert headers["x-content-type-options"] == "nosniff"
    status, headers, body = get(s2r_server, "/sim2real/report/sysid.yaml", {"Range": "bytes=0-9"})
    assert status == 206 and body == b"parameters" and headers["content-type"].startswith("text/plain")


def test_sim2real_folder_that_is_a_link(tmp_path: Path, serve: Callable[[Path], DashboardServer]) -> None:
    elsewhere = tmp_path / "elsewhere" / "flight"
    elsewhere.mkdir(parents=True)
    (elsewhere / "report.html").write_text("not under the runs root")
    root = tmp_path / "runs"
    root.mkdir()
    (root / "sim2real").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    srv = serve(root)
    assert get_json(srv, "/api/sim2real")["entries"] == []
    assert get(srv, "/sim2real/flight/report.html")[0] == 404


def test_page_script_has_no_html_sinks(s2r_server: DashboardServer) -> None:
    status, headers, body = get(s2r_server, "/static/sim2real.js")
    assert status == 200 and headers["content-type"].startswith("text/javascript")
    for sink in (".innerHTML", ".outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "http"):
        assert sink.encode() not in body
    index = get(s2r_server, "/")[2].decode()
    assert 'href="#/sim2real"' in index and "/static/sim2real.js" in index
