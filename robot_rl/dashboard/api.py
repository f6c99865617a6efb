"""The dashboard's JSON API (``/api/*``), built on the evaluation store and the run directories.

Each endpoint takes the query string (a Query: last value per key, every value by ``all``) and
returns what is sent as JSON, or raises ApiError with the status and message to answer instead.
CSV_ROUTES return (CSV text, download file name).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import parse_qs

import yaml

from robot_rl.dashboard import curves as curves_mod
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


class Query(dict):
    """A query string: the last value of each key, and every value of a repeated key by ``all``."""

    def __init__(self, raw: str) -> None:
        lists = parse_qs(raw)
        super().__init__({k: v[-1] for k, v in lists.items()})
        self._lists = lists

    def all(self, key: str) -> list[str]:
        return list(self._lists.get(key, []))


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


def _config_flat(config_yaml: str | None) -> dict[str, str]:
    if not config_yaml:
        return {}
    try:
        return _flatten(yaml.safe_load(config_yaml))
    except (yaml.YAMLError, RecursionError, ValueError):
        return {}


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
    found["config_flat"] = _config_flat(found.get("config_yaml"))
    found["plan"] = _read_plan(backend.runs_root, name, found["artifacts"])
    return found


def scalars(backend: Backend, q: Mapping[str, str]) -> dict[str, Any]:
    # The run's directory by name only: the store's run_dir column is never trusted.
    run_dir = run_dir_in(backend.runs_root, q.get("name", ""))
    if run_dir is None:
        return {"status": "no-logs", "tags": {}}
    return backend.scalars.read(run_dir)


def _curve_groups(backend: Backend, q: Query) -> tuple[list[curves_mod.Group], str, str]:
    names = list(dict.fromkeys(q.all("run")))
    if not names:
        raise ApiError(400, "name the runs: run=NAME (repeated)")
    if len(names) > curves_mod.MAX_RUNS:
        raise ApiError(400, f"at most {curves_mod.MAX_RUNS} runs per curve page")
    tag = q.get("tag", "Train/success_rate")
    x_axis = q.get("x", "steps")
    if x_axis not in curves_mod.X_AXES:
        raise ApiError(400, f"x must be one of {', '.join(curves_mod.X_AXES)}")
    try:
        weight = float(q.get("smooth", "0"))
    except ValueError:
        raise ApiError(400, "smooth must be a number in [0, 1)") from None
    if not 0.0 <= weight < 1.0:
        raise ApiError(400, "smooth must be a number in [0, 1)")
    configs, series = {}, {}
    for name in names:
        found = backend.store.get_run(name)
        run_dir = run_dir_in(backend.runs_root, name)
        if found is None or run_dir is None:
            raise ApiError(404, f"no such run: {name[:200]}")
        configs[name] = _config_flat(found.get("config_yaml"))
        series[name] = backend.scalars.read(run_dir).get("tags", {})
    return curves_mod.curves(configs, series, tag, x_axis, weight), tag, x_axis


def curves(backend: Backend, q: Query) -> dict[str, Any]:
    groups, tag, x_axis = _curve_groups(backend, q)
    return {
        "tag": tag,
        "x": x_axis,
        "x_label": curves_mod.X_LABELS[x_axis],
        "groups": [
            {"label": g.label, "runs": g.runs, "n_seeds": g.n_seeds, "n_with_data": g.n_with_data, "points": g.points}
            for g in groups
        ],
    }


def curves_csv(backend: Backend, q: Query) -> tuple[str, str]:
    groups, tag, x_axis = _curve_groups(backend, q)
    return curves_mod.curves_csv(groups, tag, x_axis), "curves.csv"


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


ROUTES: dict[str, Callable[[Backend, Query], Any]] = {
    "/api/leaderboard": leaderboard,
    "/api/run": run,
    "/api/scalars": scalars,
    "/api/episodes": episodes,
    "/api/sim2real": sim2real_list,
    "/api/sim2real/entry": sim2real_entry,
    "/api/health": health,
    "/api/curves": curves,
}
CSV_ROUTES: dict[str, Callable[[Backend, Query], tuple[str, str]]] = {"/api/curves.csv": curves_csv}
