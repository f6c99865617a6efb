"""Writing the store's rows inside a caller's transaction: runs, evaluations, episodes, artifacts.

Every value is coerced to what both SQLite and PostgreSQL columns hold (finite floats, 64-bit
integers, text), so one odd field never fails a whole write. Each function changes rows only;
the caller refreshes the run's leaderboard rows (``refresh_board``) before committing.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

from robot_rl.store import schema
from robot_rl.store.db import Tx
from robot_rl.store.jsonsafe import json_safe
from robot_rl.store.kinds import evaluation_kind
from robot_rl.store.stats import wilson_ci95
from robot_rl.store.validate import INT64_MAX

RUN_COLUMNS = (
    "run_dir",
    "task",
    "algo",
    "reward",
    "guidance",
    "seed",
    "git_revision",
    "versions_json",
    "config_yaml",
    "meta_json",
    "status",
    "started_at",
    "finished_at",
    "train_wall_time_s",
    "fingerprint",
)
_TEXT_RUN_COLUMNS = ("task", "algo", "reward", "guidance", "status", "git_revision", "started_at", "finished_at")
_EPISODE_KEYS = {"episode", "success", "return", "position_error_m", "crashed"}
# Every leaderboard write bumps the generation; readers key their caches by it.
_BUMP = "UPDATE store_state SET generation = generation + 1"


def _finite(value: Any) -> float | None:
    """A float for the database, or None: NaN would poison averages and break JSON."""
    if value is None or isinstance(value, bool):
        return None
    try:
        f = float(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an int too large for a float
        return None
    return f if math.isfinite(f) else None


def _int_or_none(value: Any) -> int | None:
    """An integer the database can hold (64 bits), or None: a larger one would fail the write."""
    try:
        i = None if value is None else int(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return i if i is None or -INT64_MAX - 1 <= i <= INT64_MAX else None


def _text_or_none(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, Mapping):
        # Hydra config groups resolve to mappings; their "name" is what people filter on.
        value = value.get("name")
        return None if value is None else str(value)
    return str(value)


def _flag(value: Any) -> int | None:
    return None if value is None else int(bool(value))


def upsert_run(tx: Tx, name: str, fields: Mapping[str, Any]) -> int:
    """Insert or update one run and return its id; fields left out (or None) keep their stored value."""
    unknown = set(fields) - set(RUN_COLUMNS) - {"versions", "meta"}
    if unknown:
        raise TypeError(f"unknown run fields: {sorted(unknown)}")
    values: dict[str, Any] = {c: fields.get(c) for c in RUN_COLUMNS}
    if fields.get("versions") is not None:
        values["versions_json"] = json.dumps(fields["versions"], sort_keys=True, default=str)
    if fields.get("meta") is not None:
        values["meta_json"] = json.dumps(fields["meta"], sort_keys=True, default=str)
    for key in _TEXT_RUN_COLUMNS:
        values[key] = _text_or_none(values[key])
    if values["run_dir"] is not None:
        values["run_dir"] = os.fspath(values["run_dir"])
    values["seed"] = _int_or_none(values["seed"])
    values["train_wall_time_s"] = _finite(values["train_wall_time_s"])
    values["name"] = str(name)
    values["updated_at"] = time.time()
    cols = ("name", *RUN_COLUMNS, "updated_at")
    sets = ", ".join(f"{c} = COALESCE(excluded.{c}, runs.{c})" for c in RUN_COLUMNS)
    rows = tx.execute(
        f"INSERT INTO runs ({', '.join(cols)}) VALUES ({', '.join(':' + c for c in cols)}) "
        f"ON CONFLICT (name) DO UPDATE SET {sets}, updated_at = excluded.updated_at RETURNING id",
        values,
    )
    return int(rows[0]["id"])


def find_run_id(tx: Tx, run_name: str, create: bool) -> int:
    """The id of run ``run_name``; a missing run is created (``create``) or raises KeyError."""
    rows = tx.execute("SELECT id FROM runs WHERE name = :n", {"n": run_name})
    if rows:
        return int(rows[0]["id"])
    if not create:
        raise KeyError(run_name)
    return upsert_run(tx, run_name, {})


def upsert_evaluation(tx: Tx, run_id: int, ev: Mapping[str, Any], created_at: float | None) -> int:
    """Insert or replace one (already validated) evaluation and its episodes; returns its id."""
    metrics = dict(ev.get("metrics") or {})
    per_episode = list(ev.get("per_episode") or [])
    episodes = _int_or_none(ev.get("episodes"))
    if episodes is None:
        episodes = len(per_episode) or None
    success = _finite(metrics.get("success_rate"))
    if success is None and per_episode:
        success = sum(bool(e.get("success")) for e in per_episode) / len(per_episode)
    lo = hi = None
    ci = metrics.get("success_ci95")
    if isinstance(ci, Sequence) and not isinstance(ci, str) and len(ci) == 2:
        lo, hi = _finite(ci[0]), _finite(ci[1])
    if (lo is None or hi is None) and success is not None and episodes:
        lo, hi = wilson_ci95(success * episodes, episodes)
    values = {
        "run_id": run_id,
        "name": str(ev.get("name") or "eval"),
        "task": _text_or_none(ev.get("task")),
        "episodes": episodes,
        "randomization": _text_or_none(ev.get("randomization")),
        "seed": _int_or_none(ev.get("seed")),
        "success_rate": success,
        "success_lo": lo,
        "success_hi": hi,
        "position_error_m": _finite(metrics.get("position_error_m", ev.get("final_position_error_m"))),
        "crash_rate": _finite(metrics.get("crash_rate")),
        "metrics_json": json.dumps(json_safe(metrics), sort_keys=True),
        "reward_terms_json": json.dumps(json_safe(dict(ev.get("reward_terms") or {})), sort_keys=True),
        "created_at": time.time() if created_at is None else float(created_at),
        "invalid": None,
        "kind": evaluation_kind(ev),
    }
    cols = list(values)
    updates = ", ".join(f"{c} = excluded.{c}" for c in cols if c not in ("run_id", "name"))
    rows = tx.execute(
        f"INSERT INTO evaluations ({', '.join(cols)}) VALUES ({', '.join(':' + c for c in cols)}) "
        f"ON CONFLICT (run_id, name) DO UPDATE SET {updates} RETURNING id",
        values,
    )
    eval_id = int(rows[0]["id"])
    # Re-recording an evaluation replaces its episodes rather than mixing two attempts.
    tx.execute("DELETE FROM episodes WHERE evaluation_id = :e", {"e": eval_id})
    rows_ep = []
    for i, e in enumerate(per_episode):
        extra = {k: v for k, v in e.items() if k not in _EPISODE_KEYS}
        rows_ep.append(
            {
                "evaluation_id": eval_id,
                "episode": _int_or_none(e.get("episode")) if e.get("episode") is not None else i,
                "success": _flag(e.get("success")),
                "ep_return": _finite(e.get("return")),
                "position_error_m": _finite(e.get("position_error_m")),
                "crashed": _flag(e.get("crashed")),
                "extra_json": json.dumps(json_safe(extra), sort_keys=True) if extra else None,
            }
        )
    tx.executemany(
        "INSERT INTO episodes (evaluation_id, episode, success, ep_return, position_error_m, crashed,"
        " extra_json) VALUES (:evaluation_id, :episode, :success, :ep_return, :position_error_m,"
        " :crashed, :extra_json) ON CONFLICT (evaluation_id, episode) DO NOTHING",
        rows_ep,
    )
    return eval_id


def drop_invalid_evaluations(tx: Tx, run_id: int) -> None:
    """Invalid rows mirror the run's files as last indexed; the indexer re-adds current ones."""
    tx.execute("DELETE FROM evaluations WHERE run_id = :r AND invalid IS NOT NULL", {"r": run_id})


def record_invalid_evaluation(tx: Tx, run_id: int, name: str, reason: str, created_at: float) -> None:
    """An evaluation file that could not be read: listed on the run page, never ranked."""
    rows = tx.execute(
        "INSERT INTO evaluations (run_id, name, invalid, created_at, metrics_json, reward_terms_json)"
        " VALUES (:r, :n, :why, :t, '{}', '{}') ON CONFLICT (run_id, name) DO UPDATE SET"
        " invalid = excluded.invalid, created_at = excluded.created_at, task = NULL, episodes = NULL,"
        " randomization = NULL, seed = NULL, success_rate = NULL, success_lo = NULL, success_hi = NULL,"
        " position_error_m = NULL, crash_rate = NULL, metrics_json = '{}', reward_terms_json = '{}'"
        " RETURNING id",
        {"r": run_id, "n": name, "why": reason, "t": float(created_at)},
    )
    tx.execute("DELETE FROM episodes WHERE evaluation_id = :e", {"e": int(rows[0]["id"])})


def refresh_board(tx: Tx, run_id: int) -> None:
    """Rebuild one run's leaderboard rows (after any change to it or its evaluations)."""
    tx.execute("DELETE FROM board WHERE run_id = :r", {"r": run_id})
    tx.execute(schema.BOARD_FILL_ANY + " AND r.id = :r", {"r": run_id})
    tx.execute(schema.BOARD_FILL_BY_RZ + " AND r.id = :r", {"r": run_id})
    tx.execute(_BUMP)


def replace_artifacts(tx: Tx, run_id: int, artifacts: Sequence[Mapping[str, Any]]) -> None:
    """Set a run's artifact list: files come and go."""
    tx.execute("DELETE FROM artifacts WHERE run_id = :r", {"r": run_id})
    tx.executemany(
        "INSERT INTO artifacts (run_id, kind, relpath, size_bytes, mtime) VALUES"
        " (:run_id, :kind, :relpath, :size_bytes, :mtime)",
        [{"run_id": run_id, **a} for a in artifacts],
    )


def upsert_artifact(tx: Tx, run_id: int, kind: str, relpath: str, size_bytes: int | None, mtime: float | None) -> None:
    """Add or update one artifact (path relative to the run directory)."""
    tx.execute(
        "INSERT INTO artifacts (run_id, kind, relpath, size_bytes, mtime) VALUES"
        " (:r, :k, :p, :s, :m) ON CONFLICT (run_id, relpath) DO UPDATE SET kind = excluded.kind,"
        " size_bytes = excluded.size_bytes, mtime = excluded.mtime",
        {"r": run_id, "k": kind, "p": relpath, "s": size_bytes, "m": mtime},
    )


def delete_run(tx: Tx, run_name: str) -> None:
    """Remove a run with its evaluations, episodes, artifacts and board rows (if it exists)."""
    rows = tx.execute("SELECT id FROM runs WHERE name = :n", {"n": run_name})
    if not rows:
        return
    rid = rows[0]["id"]
    # Explicit child deletes: PostgreSQL and SQLite agree on them even where a
    # connection was opened without foreign-key enforcement.
    tx.execute(
        "DELETE FROM episodes WHERE evaluation_id IN (SELECT id FROM evaluations WHERE run_id = :r)",
        {"r": rid},
    )
    tx.execute("DELETE FROM evaluations WHERE run_id = :r", {"r": rid})
    tx.execute("DELETE FROM artifacts WHERE run_id = :r", {"r": rid})
    tx.execute("DELETE FROM board WHERE run_id = :r", {"r": rid})
    tx.execute(_BUMP)
    tx.execute("DELETE FROM runs WHERE id = :r", {"r": rid})
