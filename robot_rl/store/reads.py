"""Reading runs back out of the store: one run with its evaluations and artifacts, episodes, counts."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from robot_rl.store.db import Database

_TABLES = ("runs", "evaluations", "episodes", "artifacts")


def _decode_run(row: Mapping[str, Any]) -> dict[str, Any]:
    run = dict(row)
    run["versions"] = json.loads(run.pop("versions_json") or "{}")
    run["meta"] = json.loads(run.pop("meta_json") or "{}")
    return run


def _decode_eval(row: Mapping[str, Any]) -> dict[str, Any]:
    ev = dict(row)
    ev["metrics"] = json.loads(ev.pop("metrics_json") or "{}")
    ev["reward_terms"] = json.loads(ev.pop("reward_terms_json") or "{}")
    return ev


def _decode_episode(row: Mapping[str, Any]) -> dict[str, Any]:
    rec = {
        "episode": row["episode"],
        "success": None if row["success"] is None else bool(row["success"]),
        "return": row["ep_return"],
        "position_error_m": row["position_error_m"],
        "crashed": None if row["crashed"] is None else bool(row["crashed"]),
    }
    if row["extra_json"]:
        rec.update(json.loads(row["extra_json"]))
    return rec


def get_fingerprint(db: Database, run_name: str) -> str | None:
    rows = db.query("SELECT fingerprint FROM runs WHERE name = :n", {"n": run_name})
    return rows[0]["fingerprint"] if rows else None


def fingerprints(db: Database) -> dict[str, str | None]:
    """Every run's fingerprint in one query (a re-index pass over 10,000 runs needs them all)."""
    return {r["name"]: r["fingerprint"] for r in db.query("SELECT name, fingerprint FROM runs")}


def get_run(db: Database, run_name: str) -> dict[str, Any] | None:
    """One run with its evaluations (newest first) and artifacts, or None; one snapshot."""
    with db.transaction(write=False) as tx:
        rows = tx.execute("SELECT * FROM runs WHERE name = :n", {"n": run_name})
        if not rows:
            return None
        run = _decode_run(rows[0])
        evals = tx.execute(
            "SELECT * FROM evaluations WHERE run_id = :r ORDER BY created_at DESC, id DESC",
            {"r": run["id"]},
        )
        run["evaluations"] = [_decode_eval(e) for e in evals]
        run["artifacts"] = tx.execute(
            "SELECT kind, relpath, size_bytes, mtime FROM artifacts WHERE run_id = :r ORDER BY kind, relpath",
            {"r": run["id"]},
        )
    return run


def episodes(db: Database, run_name: str, eval_name: str, limit: int) -> list[dict[str, Any]]:
    """Per-episode records of one evaluation, in episode order (extra fields merged back in)."""
    rows = db.query(
        "SELECT p.episode, p.success, p.ep_return, p.position_error_m, p.crashed, p.extra_json"
        " FROM episodes p JOIN evaluations e ON e.id = p.evaluation_id JOIN runs r ON r.id = e.run_id"
        " WHERE r.name = :n AND e.name = :e ORDER BY p.episode LIMIT :lim",
        {"n": run_name, "e": eval_name, "lim": int(limit)},
    )
    return [_decode_episode(r) for r in rows]


def counts(db: Database) -> dict[str, int]:
    """Rows per table, from one snapshot."""
    with db.transaction(write=False) as tx:
        return {t: int(tx.execute(f"SELECT COUNT(*) AS n FROM {t}")[0]["n"]) for t in _TABLES}
