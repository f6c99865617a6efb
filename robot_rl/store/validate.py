"""Checks an evaluation file (``eval/<name>.json``) before any of it reaches the store.

A file that fails is not dropped silently and does not take its run down with it: the indexer
records that evaluation as invalid, with the first problem found as its reason, and the run page
shows it so. Only the fields the store and the page interpret are checked strictly; anything
else (``sitl.json``'s flight summary, extra metrics) only has to be plain, bounded JSON.
"""

from __future__ import annotations

import math
from typing import Any

INT64_MAX = 2**63 - 1  # SQLite and PostgreSQL integers; a larger one would fail the whole write
MAX_EPISODES = 10**9
MAX_TEXT = 256  # names, task, randomization: identifiers, not documents
MAX_DEPTH = 32  # deeper nesting is junk, and would blow the stack of recursive walkers
_UNIT = ("success_rate", "crash_rate")  # rates, in [0, 1]


def _kind(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, (int, float)):
        return "a number"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, list):
        return "a list"
    if isinstance(v, dict):
        return "an object"
    return type(v).__name__


def _show(v: Any) -> str:
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) > INT64_MAX:
        return f"an integer of {len(str(abs(v)))} digits"
    text = repr(v)
    return text if len(text) <= 40 else _kind(v)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_int(v: Any, lo: int, hi: int) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi


def _plain_problem(obj: Any, where: str) -> str | None:
    """Depth and integer bounds for free-form JSON (iterative: no recursion to exhaust)."""
    stack: list[tuple[Any, str, int]] = [(obj, where, 0)]
    while stack:
        v, path, depth = stack.pop()
        if depth > MAX_DEPTH:
            return f"{where}: nested deeper than {MAX_DEPTH} levels"
        if isinstance(v, int) and not isinstance(v, bool) and abs(v) > INT64_MAX:
            return f"{path}: {_show(v)} (larger than 64 bits)"
        if isinstance(v, dict):
            stack.extend((x, f"{path}.{k}", depth + 1) for k, x in v.items())
        elif isinstance(v, list):
            stack.extend((x, f"{path}[{i}]", depth + 1) for i, x in enumerate(v))
    return None


def _number_problem(v: Any, where: str, unit: bool = False) -> str | None:
    """None, NaN (no value) or a number; a rate must lie in [0, 1]."""
    if v is None:
        return None
    if not _is_number(v):
        return f"{where}: expected a number, got {_kind(v)}"
    if isinstance(v, int) and abs(v) > INT64_MAX:
        return f"{where}: {_show(v)} (larger than 64 bits)"
    if unit and math.isfinite(v) and not 0.0 <= v <= 1.0:
        return f"{where}: {_show(v)} is not in [0, 1]"
    return None


def _episode_problem(i: int, row: Any, seen: set[int]) -> str | None:
    where = f"per_episode[{i}]"
    if not isinstance(row, dict):
        return f"{where}: expected an object, got {_kind(row)}"
    ep = row.get("episode")
    if ep is not None:
        if not _is_int(ep, 0, MAX_EPISODES):
            return f"{where}.episode: expected an integer in [0, {MAX_EPISODES}], got {_show(ep)}"
        if ep in seen:
            return f"{where}.episode: episode {ep} appears twice"
        seen.add(ep)
    for key in ("success", "crashed"):
        v = row.get(key)
        if v is not None and not isinstance(v, bool) and v not in (0, 1):
            return f"{where}.{key}: expected true or false, got {_show(v)}"
    for key in ("return", "position_error_m"):
        if problem := _number_problem(row.get(key), f"{where}.{key}"):
            return problem
    return _plain_problem(row, where)


def evaluation_problem(ev: Any) -> str | None:
    """The first reason ``ev`` (a parsed evaluation file) cannot be stored, or None if it can."""
    if not isinstance(ev, dict):
        return f"expected a JSON object, got {_kind(ev)}"
    for key in ("name", "task", "randomization"):
        v = ev.get(key)
        if v is not None and not isinstance(v, str):
            return f"{key}: expected a string, got {_kind(v)}"
        if isinstance(v, str) and len(v) > MAX_TEXT:
            return f"{key}: longer than {MAX_TEXT} characters"
    episodes = ev.get("episodes")
    if episodes is not None and not _is_int(episodes, 0, MAX_EPISODES):
        return f"episodes: expected an integer in [0, {MAX_EPISODES}], got {_show(episodes)}"
    seed = ev.get("seed")
    if seed is not None and not _is_int(seed, -INT64_MAX - 1, INT64_MAX):
        return f"seed: expected a 64-bit integer, got {_show(seed)}"

    metrics = ev.get("metrics")
    if metrics is not None and not isinstance(metrics, dict):
        return f"metrics: expected an object, got {_kind(metrics)}"
    for key, v in (metrics or {}).items():
        if key in ("success_rate", "crash_rate", "position_error_m"):
            if problem := _number_problem(v, f"metrics.{key}", unit=key in _UNIT):
                return problem
        elif key == "success_ci95" and v is not None:
            if not isinstance(v, list) or len(v) != 2:
                return "metrics.success_ci95: expected [low, high]"
            for bound in v:
                if problem := _number_problem(bound, "metrics.success_ci95", unit=True):
                    return problem
    terms = ev.get("reward_terms")
    if terms is not None and not isinstance(terms, dict):
        return f"reward_terms: expected an object, got {_kind(terms)}"
    for key, v in (terms or {}).items():
        if problem := _number_problem(v, f"reward_terms.{key}"):
            return problem

    rows = ev.get("per_episode")
    if rows is not None and not isinstance(rows, list):
        return f"per_episode: expected a list, got {_kind(rows)}"
    seen: set[int] = set()
    for i, row in enumerate(rows or []):
        if problem := _episode_problem(i, row, seen):
            return problem
    rest = {k: v for k, v in ev.items() if k != "per_episode"}
    return _plain_problem(rest, "evaluation")
