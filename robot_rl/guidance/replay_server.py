"""An OpenAI-compatible chat server on loopback that replays recorded answers (tests, offline demos).

Recordings are a list (or a JSON file holding the list) of entries::

    {"match": ["substring", ...], "responses": [<response>, ...]}

A request matches an entry when every substring occurs in the request's text: all text parts of
all its messages (system, user and assistant, in order, joined by newlines). Entries are tried in
order and the first match wins; an empty ``match`` list matches everything. An entry's responses
are served in order, one per matching request, and the last one repeats. A response is one of:

- ``{"content": "..."}``: a chat.completion whose assistant message has this text;
- ``{"status": 500, "body": "..."}``: an HTTP error (``body`` text or JSON; default an OpenAI error);
- ``{"raw_body": "..."}``: HTTP 200 with this (typically non-JSON) body;

and any of them may carry ``"delay_s": 3.0`` to sleep first (timeout tests).

Every request body received is appended, parsed, to ``ReplayServer.requests``; the server adds
``"_path"`` (the request path) and ``"_headers"`` (a dict of the HTTP headers, names lower-cased)
to each entry. A body that is not JSON is stored as ``{"_raw": text, ...}``.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

_RESPONSE_KINDS = ("content", "status", "raw_body")


def load_recordings(recordings: list[dict] | str | Path) -> list[dict]:
    """The recordings list, validated (ValueError names the bad entry)."""
    if isinstance(recordings, (str, Path)):
        path = Path(recordings)
        try:
            recordings = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise ValueError(f"cannot read recordings file {path}: {e}") from e
    if not isinstance(recordings, list):
        raise ValueError("recordings must be a list of {'match': [...], 'responses': [...]} entries")
    for i, entry in enumerate(recordings):
        if not isinstance(entry, dict):
            raise ValueError(f"recording {i} is not an object")
        match = entry.get("match", [])
        if not isinstance(match, list) or not all(isinstance(m, str) for m in match):
            raise ValueError(f"recording {i}: 'match' must be a list of strings")
        responses = entry.get("responses")
        if not isinstance(responses, list) or not responses:
            raise ValueError(f"recording {i}: 'responses' must be a non-empty list")
        for j, resp in enumerate(responses):
            if not isinstance(resp, dict) or not any(k in resp for k in _RESPONSE_KINDS):
                raise ValueError(f"recording {i} response {j}: needs one of {', '.join(_RESPONSE_KINDS)}")
    return recordings


def request_text(body: dict) -> str:
    """All text parts of all messages, in order, joined by newlines (what ``match`` substrings search)."""
    texts: list[str] = []
    for msg in body.get("messages") or []:
        content = msg.get("content") if isinstance(msg, dict) else None
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts += [p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
    return "\n".join(texts)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a handler sleeping on delay_s must not hold up close()
    replay: ReplayServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that gave up (timeout test) is expected; no tracebacks on stderr


class _Server6(_Server):
    address_family = socket.AF_INET6


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: tests inspect ReplayServer.requests instead

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            models = {"object": "list", "data": [{"id": "replay", "object": "model", "owned_by": "robot_rl"}]}
            self._send(200, json.dumps(models))
        else:
            self._send(404, _error_json(f"no route GET {self.path}", "not_found"))

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length).decode("utf-8", "replace") if length > 0 else ""
        try:
            body = json.loads(raw)
            if not isinstance(body, dict):
                body = {"_raw": raw}
        except ValueError:
            body = {"_raw": raw}
        body["_path"] = self.path
        body["_headers"] = {k.lower(): v for k, v in self.headers.items()}
        replay = self.server.replay
        with replay._lock:
            replay.requests.append(body)
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send(404, _error_json(f"no route POST {self.path}", "not_found"))
            return
        resp = replay._next_response(body)
        if resp is None:
            text = request_text(body)
            msg = f"no recorded answer matches the request text: {text[:300]!r}"
            self._send(404, _error_json(msg, "replay_miss"))
            return
        delay = float(resp.get("delay_s", 0.0))
        if delay > 0 and replay._closing.wait(delay):
            return  # server closing: drop the request
        if "status" in resp:
            payload = resp.get("body", _error_json("recorded error", "replay_error"))
            self._send(int(resp["status"]), payload if isinstance(payload, str) else json.dumps(payload))
        elif "raw_body" in resp:
            self._send(200, str(resp["raw_body"]), content_type="text/plain; charset=utf-8")
        else:
            self._send(200, json.dumps(_completion(str(resp["content"]), body.get("model"))))

    def _send(self, status: int, text: str, content_type: str = "application/json") -> None:
        data = text.encode("utf-8")
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client timed out and left


def _error_json(message: str, kind: str) -> str:
    return json.dumps({"error": {"message": message, "type": kind}})


def _completion(content: str, model: Any) -> dict:
    return {
        "id": f"chatcmpl-replay-{time.monotonic_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model if isinstance(model, str) else "replay",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }


class ReplayServer:
    """Serve recorded chat answers on ``url`` (bound at construction; ``start()`` begins serving)."""

    def __init__(
        self,
        recordings: list[dict] | str | Path,
        host: str = "127.0.0.1",
        port: int = 0,
        allow_remote: bool = False,
    ):
        if not allow_remote and not _is_loopback(host):
            raise ValueError(f"ReplayServer binds loopback only; host {host!r} needs allow_remote=True")
        self.recordings = load_recordings(recordings)
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        self._served = [0] * len(self.recordings)
        self._closing = threading.Event()
        self._thread: threading.Thread | None = None
        server_cls = _Server6 if ":" in host else _Server
        self._httpd = server_cls((host, port), _Handler)
        self._httpd.replay = self
        bound_host, bound_port = self._httpd.server_address[:2]
        shown = f"[{bound_host}]" if ":" in str(bound_host) else bound_host
        self.url = f"http://{shown}:{bound_port}/v1"

    @property
    def socket(self) -> socket.socket:
        """The listening socket (tests check ``getsockname()``)."""
        return self._httpd.socket

    def start(self) -> ReplayServer:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._httpd.serve_forever, args=(0.05,), name="replay-server", daemon=True
            )
            self._thread.start()
        return self

    def close(self) -> None:
        self._closing.set()  # wake handlers sleeping on delay_s
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> ReplayServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _next_response(self, body: dict) -> dict | None:
        text = request_text(body)
        with self._lock:
            for i, entry in enumerate(self.recordings):
                if all(m in text for m in entry.get("match", [])):
                    responses = entry["responses"]
                    resp = responses[min(self._served[i], len(responses) - 1)]
                    self._served[i] += 1
                    return resp
        return None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Replay recorded chat answers as an OpenAI-compatible server.")
    parser.add_argument("--recordings", required=True, help="JSON file holding the list of recordings")
    parser.add_argument("--port", type=int, default=0, help="port (default: any free port)")
    parser.add_argument("--host", default="127.0.0.1", help="bind address (loopback unless --allow-remote)")
    parser.add_argument("--allow-remote", action="store_true", help="allow a non-loopback --host")
    args = parser.parse_args(argv)
    try:
        server = ReplayServer(args.recordings, host=args.host, port=args.port, allow_remote=args.allow_remote)
    except (ValueError, OSError) as e:
        parser.error(str(e))
    with server:
        print(server.url, flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
