"""HTTP for the dashboard: routing, security headers, JSON answers and ranged artifact downloads."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from robot_rl.dashboard import api
from robot_rl.dashboard import sim2real as s2r
from robot_rl.dashboard.artifacts import ARTIFACT_CSP, PREFIX, Unsatisfiable, artifact_path, byte_range, content_type
from robot_rl.dashboard.static import static_file
from robot_rl.store.jsonsafe import json_safe
from robot_rl.store.paths import Refused

if TYPE_CHECKING:
    from robot_rl.dashboard.server import DashboardServer

log = logging.getLogger(__name__)

_CHUNK = 256 * 1024


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
        body = json.dumps(json_safe(obj), separators=(",", ":")).encode()
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
        query = api.Query(parts.query)
        if path == "/" or path == "/index.html":
            return self._static("index.html")
        if path.startswith("/static/"):
            return self._static(path[len("/static/") :])
        if path.startswith(PREFIX):
            return self._artifact(path[len(PREFIX) :])
        if path.startswith(s2r.PREFIX):
            return self._sim2real_file(path[len(s2r.PREFIX) :])
        if path in api.CSV_ROUTES:
            try:
                text, filename = api.CSV_ROUTES[path](self.server, query)
            except api.ApiError as exc:
                return self._error(exc.status, exc.message)
            disposition = {"Content-Disposition": f'attachment; filename="{filename}"'}
            return self._send_bytes(200, text.encode("utf-8"), "text/csv; charset=utf-8", disposition)
        endpoint = api.ROUTES.get(path)
        if endpoint is None:
            return self._error(404, "not found")
        try:
            body = endpoint(self.server, query)
        except api.ApiError as exc:
            return self._error(exc.status, exc.message)
        return self._send_json(body)

    def _static(self, name: str) -> None:
        found = static_file(name)
        if found is None:
            return self._error(404, "not found")
        self._send_bytes(200, *found)

    # -- artifacts ------------------------------------------------------------------------------

    def _artifact(self, raw: str) -> None:
        try:
            path = artifact_path(self.server.runs_root, raw)
        except Refused as exc:
            log.warning("refused /artifacts/%s: %s", raw[:200], exc)
            return self._error(403, f"refused: {exc}")
        except OSError:
            return self._error(404, "not found")
        ctype, disposition = content_type(path)
        self._send_file(path, ctype, disposition, ARTIFACT_CSP)

    def _sim2real_file(self, raw: str) -> None:
        """A file of a sim2real/<name>/ folder: only its replay.json, replay.svg, report.html and sysid.yaml,
        each inside that folder; report.html renders under a sandbox CSP (no script, nothing from elsewhere)."""
        try:
            path, ctype = s2r.file_path(self.server.runs_root, raw)
        except Refused as exc:
            log.warning("refused /sim2real/%s: %s", raw[:200], exc)
            return self._error(403, f"refused: {exc}")
        except OSError:
            return self._error(404, "not found")
        self._send_file(path, ctype, "inline", s2r.FILE_CSP)

    def _send_file(self, path: Path, ctype: str, disposition: str, csp: str) -> None:
        try:
            st = path.stat()
        except OSError:
            return self._error(404, "not found")
        size = st.st_size
        extra = {
            "Accept-Ranges": "bytes",
            "Content-Security-Policy": csp,
            "Cache-Control": "no-cache",
            "Last-Modified": self.date_time_string(int(st.st_mtime)),
            "ETag": f'"{st.st_mtime_ns:x}-{size:x}"',
            "Content-Disposition": disposition,
        }
        try:
            wanted = byte_range(self.headers.get("Range"), size)
        except Unsatisfiable:
            return self._send_bytes(416, b"", "text/plain", {"Content-Range": f"bytes */{size}"})
        start, end = wanted or (0, size - 1)
        if wanted is not None:
            extra["Content-Range"] = f"bytes {start}-{end}/{size}"
        length = end - start + 1 if size else 0
        self._headers(200 if wanted is None else 206, ctype, length, extra)
        if self.command == "HEAD" or length == 0:
            return
        with open(path, "rb") as f:
            f.seek(start)
            remaining = length
            while remaining > 0:
                chunk = f.read(min(_CHUNK, remaining))
                if not chunk:
                    break
                self.wfile.write(chunk)
                remaining -= len(chunk)
