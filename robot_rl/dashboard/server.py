"""The sim evaluation dashboard: a small stdlib HTTP server over the evaluation store.

The page is static (``static/``); it fetches JSON from ``/api/*`` and media from
``/artifacts/<run>/<path>``. Everything user-controlled (run names, configs, plans) travels as
JSON and is put into the page as text nodes, never parsed as HTML.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import logging
import math
import os
import re
import socket
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

import yaml

from robot_rl.dashboard.tb import ScalarReader
from robot_rl.store import Store, StoreError, index_runs_root, open_store
from robot_rl.store.leaderboard import LEADERBOARD_LIMIT, MAX_LEADERBOARD_LIMIT
from robot_rl.store.paths import ARTIFACT_DIRS, Refused, in_artifact_dir, resolve_file, run_dir_in

log = logging.getLogger(__name__)

STATIC_DIR = Path(__file__).with_name("static")
# Exactly these files are served from the package: no path from the request reaches the disk.
STATIC_FILES = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "plot.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
}
# Known types only; anything else is served as an inert download. HTML/SVG are deliberately
# not mapped to their types, so a file dropped into a run directory cannot run script here.
ARTIFACT_TYPES = {
    ".mp4": "video/mp4",
    ".webm": "video/webm",
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".json": "application/json",
    ".yaml": "text/plain; charset=utf-8",
    ".onnx": "application/octet-stream",
    ".pt": "application/octet-stream",
}
INLINE_TYPES = {
    "video/mp4",
    "video/webm",
    "image/png",
    "image/jpeg",
    "application/json",
    "text/plain; charset=utf-8",
}
PAGE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; media-src 'self';"
    " connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
ARTIFACT_CSP = "default-src 'none'; sandbox"
MAX_PLAN_BYTES = 2 * 1024 * 1024
# A config.yaml is a few hundred keys; YAML aliases can make a small file a huge tree to walk.
MAX_CONFIG_KEYS = 5000
MAX_CONFIG_DEPTH = 32
_RANGE_RE = re.compile(r"^bytes=(\d*)-(\d*)$")


def is_loopback(host: str) -> bool:
    """True for addresses that only this machine can reach (no name resolution, no traffic)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _json_safe(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, Mapping):
        return {str(k): _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    return obj


def _flatten(obj: Any, prefix: str = "", out: dict[str, str] | None = None, depth: int = 0) -> dict[str, str]:
    """Dotted keys -> compact values, for the side-by-side config diff (bounded in keys and depth)."""
    out = {} if out is None else out
    if isinstance(obj, Mapping) and depth < MAX_CONFIG_DEPTH:
        for k, v in obj.items():
            if len(out) >= MAX_CONFIG_KEYS:
                break
            _flatten(v, f"{prefix}.{k}" if prefix else str(k), out, depth + 1)
    elif len(out) < MAX_CONFIG_KEYS:
        text = obj if isinstance(obj, str) else json.dumps(obj, default=str)
        out[prefix or "(value)"] = text[:1000]
    return out


def artifact_url(run_name: str, relpath: str) -> str:
    return "/artifacts/" + quote(run_name, safe="") + "/" + "/".join(quote(s, safe="") for s in relpath.split("/"))


def _fully_decoded(segment: str) -> str:
    for _ in range(4):
        nxt = unquote(segment)
        if nxt == segment:
            break
        segment = nxt
    return segment


def artifact_path(runs_root: Path, raw_path: str) -> Path:
    """Map the still-encoded part of ``/artifacts/<run>/<rel>`` to the file to serve.

    Raises FileNotFoundError (404) for: empty, ``.`` or ``..`` segments (also when
    percent-encoded once or several times), separators or NUL hidden in a segment, directories
    outside ``ARTIFACT_DIRS``, a run that is not a real directory under the runs root, and
    missing files. Raises Refused (403, with the reason) when the file's real location (every
    symlink followed) is outside its own run or outside the run's artifact directories (a link to
    the store database, to another run, to ``/``, or to the run's private ``tb/``), or is not a
    regular file.
    """
    segments = raw_path.split("/")
    if len(segments) < 3:
        raise FileNotFoundError(raw_path)
    decoded = []
    for raw in segments:
        once = unquote(raw)
        deep = _fully_decoded(raw)
        for s in (once, deep):
            if s in ("", ".", "..") or "/" in s or "\\" in s or "\x00" in s:
                raise FileNotFoundError(raw_path)
        decoded.append(once)
    if decoded[1] not in ARTIFACT_DIRS:
        raise FileNotFoundError(raw_path)
    run_dir = run_dir_in(runs_root, decoded[0])
    if run_dir is None:
        raise FileNotFoundError(raw_path)
    real, _ = resolve_file(run_dir, run_dir.joinpath(*decoded[1:]))
    if not in_artifact_dir(run_dir, real):
        raise Refused(f"{'/'.join(decoded[1:])} leads out of the run's artifact directories")
    return real


def resolve_artifact(runs_root: Path, raw_path: str) -> Path | None:
    """``artifact_path``, or None for anything it refuses."""
    try:
        return artifact_path(runs_root, raw_path)
    except (Refused, OSError):
        return None


class DashboardServer(ThreadingHTTPServer):
    """HTTP server holding the store, the runs root and a background re-indexer."""

    daemon_threads = True  # an open video stream must not keep the process alive at exit

    def __init__(self, address: tuple[str, int], runs_root: Path, store: Store, rescan_interval_s: float) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, DashboardHandler)
        self.runs_root = runs_root
        self.store = store
        self.scalars = ScalarReader()
        self._stop = threading.Event()
        self._rescanner: threading.Thread | None = None
        if rescan_interval_s > 0:
            self._rescanner = threading.Thread(
                target=self._rescan_loop, args=(rescan_interval_s,), name="dashboard-rescan", daemon=True
            )
            self._rescanner.start()

    def _rescan_loop(self, interval: float) -> None:
        # Picks up runs that training writes while the dashboard is open; the fingerprint
        # check makes an unchanged run cost a few stat() calls. With many runs a pass takes a
        # while (about 2 s for 10,000 here): waiting at least twice that between passes keeps
        # the re-indexer to a third of a core, whatever the runs root holds.
        wait = interval
        while not self._stop.wait(wait):
            start = time.monotonic()
            try:
                index_runs_root(self.store, self.runs_root)
            except Exception:  # noqa: BLE001 - keep serving whatever is indexed
                log.exception("re-indexing %s failed", self.runs_root)
            wait = max(interval, 2.0 * (time.monotonic() - start))

    def server_close(self) -> None:
        self._stop.set()
        super().server_close()
        if self._rescanner is not None:
            self._rescanner.join(timeout=5)
        self.store.close()

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{port}/"


class DashboardHandler(BaseHTTPRequestHandler):
    server: DashboardServer
    protocol_version = "HTTP/1.1"  # keep-alive and ranges, which video elements rely on
    server_version = "robot-rl-dashboard"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        log.debug("%s %s", self.address_string(), format % args)

    # -- plumbing -------------------------------------------------------------------------------

    def _headers(self, status: int, ctype: str, length: int, extra: Mapping[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(length))
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()

    def _send_bytes(self, status: int, body: bytes, ctype: str, extra: Mapping[str, str] | None = None) -> None:
        self._headers(status, ctype, len(body), extra)
        if self.command != "HEAD":
            self.wfile.write(body)

    def _send_json(self, obj: Any, status: int = 200) -> None:
        body = json.dumps(_json_safe(obj), separators=(",", ":")).encode()
        self._send_bytes(status, body, "application/json", {"Cache-Control": "no-store"})

    def _error(self, status: int, message: str) -> None:
        self._send_json({"error": message}, status)

    def do_HEAD(self) -> None:  # noqa: N802 - stdlib naming
        self.do_GET()

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        try:
            self._route()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the browser cancelled (video seeking does this constantly)
        except Exception:  # noqa: BLE001 - answer 500, keep serving
            log.exception("error serving %s", self.path)
            try:
                self._error(500, "internal error")
            except OSError:
                pass

    def _route(self) -> None:
        parts = urlsplit(self.path)
        path = parts.path
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        if path == "/" or path == "/index.html":
            return self._static("index.html")
        if path.startswith("/static/"):
            return self._static(path[len("/static/") :])
        if path.startswith("/artifacts/"):
            return self._artifact(path[len("/artifacts/") :])
        api = {
            "/api/leaderboard": self._api_leaderboard,
            "/api/run": self._api_run,
            "/api/scalars": self._api_scalars,
            "/api/episodes": self._api_episodes,
            "/api/health": lambda q: self._send_json({"ok": True}),
        }.get(path)
        if api is None:
            return self._error(404, "not found")
        return api(query)

    def _static(self, name: str) -> None:
        ctype = STATIC_FILES.get(name)
        if ctype is None:
            return self._error(404, "not found")
        body = (STATIC_DIR / name).read_bytes()
        extra = {"Cache-Control": "no-cache"}
        if name == "index.html":
            extra.update({"Content-Security-Policy": PAGE_CSP, "X-Frame-Options": "DENY"})
        self._send_bytes(200, body, ctype, extra)

    # -- API ------------------------------------------------------------------------------------

    def _api_leaderboard(self, q: Mapping[str, str]) -> None:
        try:
            limit = int(q.get("limit", LEADERBOARD_LIMIT))
            offset = int(q.get("offset", "0"))
        except ValueError:
            return self._error(400, "limit and offset must be integers")
        if not 1 <= limit <= MAX_LEADERBOARD_LIMIT or not 0 <= offset <= 10**9:
            return self._error(400, f"limit must be in 1..{MAX_LEADERBOARD_LIMIT} and offset in 0..1000000000")
        board = self.server.store.leaderboard(
            task=q.get("task") or None,
            algo=q.get("algo") or None,
            reward=q.get("reward") or None,
            guidance=q.get("guidance") or None,
            randomization=q.get("randomization") or None,
            limit=limit,
            offset=offset,
        )
        self._send_json(board)

    def _api_run(self, q: Mapping[str, str]) -> None:
        name = q.get("name", "")
        run = self.server.store.get_run(name) if name else None
        if run is None:
            return self._error(404, "no such run")
        run.pop("run_dir", None)  # server paths are not the page's business
        run.pop("fingerprint", None)
        for a in run["artifacts"]:
            a["url"] = artifact_url(name, a["relpath"])
        config_flat: dict[str, str] = {}
        if run.get("config_yaml"):
            try:
                config_flat = _flatten(yaml.safe_load(run["config_yaml"]))
            except (yaml.YAMLError, RecursionError, ValueError):
                config_flat = {}
        run["config_flat"] = config_flat
        run["plan"] = self._read_plan(name, run["artifacts"])
        self._send_json(run)

    def _read_plan(self, name: str, artifacts: Sequence[Mapping[str, Any]]) -> Any:
        for a in artifacts:
            if a["kind"] != "plan":
                continue
            path = resolve_artifact(self.server.runs_root, artifact_url(name, a["relpath"])[len("/artifacts/") :])
            if path is None or path.stat().st_size > MAX_PLAN_BYTES:
                return None
            try:
                return json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                return {"error": "plan.json is not valid JSON (still being written?)"}
        return None

    def _api_scalars(self, q: Mapping[str, str]) -> None:
        # The run's directory by name only: the store's run_dir column is never trusted.
        run_dir = run_dir_in(self.server.runs_root, q.get("name", ""))
        if run_dir is None:
            return self._send_json({"status": "no-logs", "tags": {}})
        self._send_json(self.server.scalars.read(run_dir))

    def _api_episodes(self, q: Mapping[str, str]) -> None:
        try:
            limit = max(1, min(int(q.get("limit", "2000")), 100000))
        except ValueError:
            return self._error(400, "bad limit")
        self._send_json(self.server.store.episodes(q.get("name", ""), q.get("eval", ""), limit))

    # -- artifacts ------------------------------------------------------------------------------

    def _artifact(self, raw: str) -> None:
        try:
            path = artifact_path(self.server.runs_root, raw)
        except Refused as exc:
            log.warning("refused /artifacts/%s: %s", raw[:200], exc)
            return self._error(403, f"refused: {exc}")
        except OSError:
            return self._error(404, "not found")
        ctype = ARTIFACT_TYPES.get(path.suffix.lower(), "application/octet-stream")
        st = path.stat()
        size = st.st_size
        extra = {
            "Accept-Ranges": "bytes",
            "Content-Security-Policy": ARTIFACT_CSP,
            "Cache-Control": "no-cache",
            "Last-Modified": self.date_time_string(int(st.st_mtime)),
            "ETag": f'"{st.st_mtime_ns:x}-{size:x}"',
            "Content-Disposition": "inline" if ctype in INLINE_TYPES else "attachment",
        }
        start, end = 0, size - 1
        status = 200
        header = self.headers.get("Range")
        if header:
            m = _RANGE_RE.match(header.strip())
            # Multi-range requests are answered with the whole file, which RFC 9110 allows.
            if m and (m.group(1) or m.group(2)):
                if m.group(1):
                    start = int(m.group(1))
                    end = min(int(m.group(2)), size - 1) if m.group(2) else size - 1
                else:  # suffix range: the last N bytes
                    start = max(0, size - int(m.group(2)))
                if start >= size or start > end:
                    return self._send_bytes(416, b"", "text/plain", {"Content-Range": f"bytes */{size}"})
                status = 206
                extra["Content-Range"] = f"bytes {start}-{end}/{size}"
        length = end - start + 1 if size else 0
        self._headers(status, ctype, length, extra)
        if self.command == "HEAD" or length == 0:
            return
        with open(path, "rb") as f:
            f.seek(start)
            remaining = length
            while remaining > 0:
                chunk = f.read(min(256 * 1024, remaining))
                if not chunk:
                    break
                self.wfile.write(chunk)
                remaining -= len(chunk)


def make_server(
    runs_root: str | os.PathLike[str] = "runs",
    host: str = "127.0.0.1",
    port: int = 8765,
    allow_public: bool = False,
    *,
    store: Store | str | None = None,
    rescan_interval_s: float = 5.0,
    index: bool = True,
) -> DashboardServer:
    """Build (bind, not yet serve) the dashboard server; ``port=0`` picks a free port.

    A non-loopback ``host`` (0.0.0.0, a LAN address, a host name) raises ValueError unless
    ``allow_public`` is set: the dashboard has no authentication.
    """
    if not is_loopback(host) and not allow_public:
        raise ValueError(
            f"refusing to listen on {host!r}: the dashboard has no authentication; pass allow_public=True"
            " (--allow-public) to expose it beyond this machine"
        )
    root = Path(runs_root)
    if not isinstance(store, Store):
        store = open_store(store, runs_root=root)
    if index:
        index_runs_root(store, root)
    try:
        return DashboardServer((host, port), root, store, rescan_interval_s)
    except BaseException:
        store.close()
        raise


def serve(
    runs_root: str | os.PathLike[str] = "runs",
    host: str = "127.0.0.1",
    port: int = 8765,
    allow_public: bool = False,
    *,
    store: Store | str | None = None,
) -> None:
    """Serve the dashboard until interrupted."""
    server = make_server(runs_root, host, port, allow_public, store=store)
    print(f"robot-rl dashboard: serving {Path(runs_root).resolve()} at {server.url}", flush=True)
    try:
        server.serve_forever(poll_interval=0.5)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


class _ArgError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise _ArgError(message)


def main(argv: list[str] | None = None) -> int:
    """``robot-rl dashboard`` entry point; returns the exit status (2: bad input)."""
    parser = _Parser(prog="robot-rl dashboard", description="Serve the sim evaluation dashboard.")
    parser.add_argument("--runs-root", default="runs", help="directory holding run directories (default: runs)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8765, help="TCP port (default: 8765; 0 picks one)")
    parser.add_argument("--allow-public", action="store_true", help="allow binding a non-loopback address")
    parser.add_argument(
        "--store", default=None, help="store path or SQLAlchemy URL (default: <runs-root>/eval_store.sqlite)"
    )
    try:
        args = parser.parse_args(argv)
    except _ArgError as exc:
        print(f"robot-rl dashboard: error: {exc}", file=sys.stderr)
        return 2
    if not 0 <= args.port <= 65535:
        print(f"robot-rl dashboard: error: --port {args.port} is not in 0..65535", file=sys.stderr)
        return 2
    if not Path(args.runs_root).is_dir():
        print(
            f"robot-rl dashboard: error: runs root {args.runs_root!r} is not a directory"
            " (train a policy first or pass --runs-root)",
            file=sys.stderr,
        )
        return 2
    if not is_loopback(args.host) and not args.allow_public:
        print(
            f"robot-rl dashboard: error: --host {args.host} is not loopback; add --allow-public to expose"
            " the unauthenticated dashboard",
            file=sys.stderr,
        )
        return 2
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        serve(args.runs_root, args.host, args.port, args.allow_public, store=args.store)
    except OSError as exc:
        print(
            f"robot-rl dashboard: error: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}",
            file=sys.stderr,
        )
        return 1
    except StoreError as exc:
        print(f"robot-rl dashboard: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
