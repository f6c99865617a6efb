"""The dashboard's JSON API (``/api/*``), built on the evaluation store and the run directories.

Each endpoint takes the query string (last value per key) and returns what is sent as JSON, or
raises ApiError with the status and message to answer instead.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import yaml

from robot_rl.dashboard import sim2real as s2r
from robot_rl.dashboard.artifacts import PREFIX, artifact_url, resolve_artifact
from robot_rl.dashboard.tb import ScalarReader
from robot_rl.store import Store
from robot_rl.store.leaderboard import LEADERBOARD_LIMIT, MAX_LEADERBOARD_LIMIT
from robot_rl.store.paths import run_dir_in

MAX_PLAN_BYTES = 2 * 1024 * 1024
# A config.yaml is a few hundred keys; YAML aliases can make a small file a huge tree to walk.
MAX_CONFIG_KEYS = 5000
MAX_CONFIG_DEPTH = 32
MAX_OFFSET = 10**9
MAX_EPISODES = 100000


class Backend(Protocol):
    """What the endpoints read: the store, the runs root and the TensorBoard reader."""

    store: Store
    runs_root: Path
    scalars: ScalarReader


class ApiError(Exception):
    """An answer other than 200: ``status`` and the message sent as ``{"error": ...}``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


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


def _read_plan(runs_root: Path, name: str, artifacts: Sequence[Mapping[str, Any]]) -> Any:
    for a in artifacts:
        if a["kind"] != "plan":
            continue
        path = resolve_artifact(runs_root, artifact_url(name, a["relpath"])[len(PREFIX) :])
        if path is None or path.stat().st_size > MAX_PLAN_BYTES:
            return None
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {"error": "plan.json is not valid JSON (still being written?)"}
    return None


def leaderboard(backend: Backend, q: Mapping[str, str]) -> dict[str, Any]:
    try:
        limit = int(q.get("limit", LEADERBOARD_LIMIT))
        offset = int(q.get("offset", "0"))
    except ValueError:
        raise ApiError(400, "limit and offset must be integers") from None
    if not 1 <= limit <= MAX_LEADERBOARD_LIMIT or not 0 <= offset <= MAX_OFFSET:
        raise ApiError(400, f"limit must be in 1..{MAX_LEADERBOARD_LIMIT} and offset in 0..{MAX_OFFSET}")
    return backend.store.leaderboard(
        task=q.get("task") or None,
        algo=q.get("algo") or None,
        reward=q.get("reward") or None,
        guidance=q.get("guidance") or None,
        randomization=q.get("randomization") or None,
        limit=limit,
        offset=offset,
    )


def run(backend: Backend, q: Mapping[str, str]) -> dict[str, Any]:
    name = q.get("name", "")
    found = backend.store.get_run(name) if name else None
    if found is None:
        raise ApiError(404, "no such run")
    found.pop("run_dir", None)  # server paths are not the page's business
    found.pop("fingerprint", None)
    for a in found["artifacts"]:
        a["url"] = artifact_url(name, a["relpath"])
    config_flat: dict[str, str] = {}
    if found.get("config_yaml"):
        try:
            config_flat = _flatten(yaml.safe_load(found["config_yaml"]))
        except (yaml.YAMLError, RecursionError, ValueError):
            config_flat = {}
    found["config_flat"] = config_flat
    found["plan"] = _read_plan(backend.runs_root, name, found["artifacts"])
    return found


def scalars(backend: Backend, q: Mapping[str, str]) -> dict[str, Any]:
    # The run's directory by name only: the store's run_dir column is never trusted.
    run_dir = run_dir_in(backend.runs_root, q.get("name", ""))
    if run_dir is None:
        return {"status": "no-logs", "tags": {}}
    return backend.scalars.read(run_dir)


def episodes(backend: Backend, q: Mapping[str, str]) -> list[dict[str, Any]]:
    try:
        limit = max(1, min(int(q.get("limit", "2000")), MAX_EPISODES))
    except ValueError:
        raise ApiError(400, "bad limit") from None
    return backend.store.episodes(q.get("name", ""), q.get("eval", ""), limit)


def sim2real_list(backend: Backend, q: Mapping[str, str]) -> dict[str, Any]:
    return s2r.list_entries(backend.runs_root)


def sim2real_entry(backend: Backend, q: Mapping[str, str]) -> dict[str, Any]:
    # A bad replay.json is the entry's "invalid" reason (200), so the page shows it in place of that entry.
    found = s2r.read_entry(backend.runs_root, q.get("name", ""))
    if found.get("missing"):
        raise ApiError(404, found["invalid"])
    return found


def health(backend: Backend, q: Mapping[str, str]) -> dict[str, Any]:
    return {"ok": True}


ROUTES: dict[str, Callable[[Backend, Mapping[str, str]], Any]] = {
    "/api/leaderboard": leaderboard,
    "/api/run": run,
    "/api/scalars": scalars,
    "/api/episodes": episodes,
    "/api/sim2real": sim2real_list,
    "/api/sim2real/entry": sim2real_entry,
    "/api/health": health,
}
