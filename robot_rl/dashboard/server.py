"""The sim evaluation dashboard: a small stdlib HTTP server over the evaluation store.

The page is static (``static/``); it fetches JSON from ``/api/*`` and media from
``/artifacts/<run>/<path>``. Everything user-controlled (run names, configs, plans) travels as
JSON and is put into the page as text nodes, never parsed as HTML. This module builds, runs and
re-indexes the server (and is ``robot-rl dashboard``); ``handler`` answers requests, ``api``
builds the JSON, ``static`` and ``artifacts`` say which files are served and how.
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import socket
import sys
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path

from robot_rl.dashboard.handler import DashboardHandler
from robot_rl.dashboard.tb import ScalarReader
from robot_rl.store import Store, StoreError, index_runs_root, open_store

log = logging.getLogger(__name__)


def is_loopback(host: str) -> bool:
    """True for addresses that only this machine can reach (no name resolution, no traffic)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


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
