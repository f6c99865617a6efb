"""The leaderboard: a page of runs and per-configuration success across seeds, from the board table."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from robot_rl.store.db import Database, Tx
from robot_rl.store.stats import mean_ci95_from_sums

LEADERBOARD_LIMIT = 50  # runs per page by default
MAX_LEADERBOARD_LIMIT = 500  # a page, not the whole store: 10,000 rows are 5 MB per request
_FILTERS = ("task", "algo", "reward", "guidance")
_CACHE_ENTRIES = 64
_GROUPS_SQL = (
    "SELECT task, algo, reward, guidance, COUNT(*) AS n_all, COUNT(success_rate) AS n, SUM(success_rate) AS s,"
    " SUM(success_rate * success_rate) AS ss, MIN(success_rate) AS lo_rate, MAX(success_rate) AS hi_rate,"
    " SUM(CASE WHEN success_rate IS NULL THEN 0 ELSE COALESCE(episodes, 0) END) AS episodes,"
    " MIN(CASE WHEN success_rate IS NULL THEN NULL ELSE success_lo END) AS ci_lo,"
    " MIN(CASE WHEN success_rate IS NULL THEN NULL ELSE success_hi END) AS ci_hi"
    " FROM board WHERE rz_key = :rz GROUP BY task, algo, reward, guidance"
)
# The randomizations on the board, by a loose index scan: a few index seeks, not 30,000 entries.
_DISTINCT_RZ = (
    "WITH RECURSIVE k (v) AS (SELECT MIN(rz_key) FROM board WHERE rz_key > ''"
    " UNION ALL SELECT (SELECT MIN(rz_key) FROM board WHERE rz_key > k.v) FROM k WHERE k.v IS NOT NULL)"
    " SELECT v FROM k WHERE v IS NOT NULL"
)
_BOARD_RUN_FIELDS = (
    "b.name, b.task, b.algo, b.reward, b.guidance, b.seed, b.status, b.started_at, b.finished_at,"
    " b.train_wall_time_s, b.eval_name, b.eval_randomization AS randomization, b.episodes, b.success_rate,"
    " b.success_lo, b.success_hi, b.position_error_m, b.crash_rate, b.created_at, b.bundle_success_rate,"
    " b.zero_success_rate, b.sitl_error_m"
)


class GroupCache:
    """Per-configuration sums over every run's board row for one randomization, cached per generation.

    One aggregate over 10,000 rows is about 15-35 ms here, most of a leaderboard request; the
    store's generation changes with every write, so a cached copy is never stale.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[int, list[dict[str, Any]]]] = {}

    def groups(self, tx: Tx, rz: str, generation: int) -> list[dict[str, Any]]:
        with self._lock:
            hit = self._entries.get(rz)
        if hit is not None and hit[0] == generation:
            return hit[1]
        rows = tx.execute(_GROUPS_SQL, {"rz": rz})
        with self._lock:
            if len(self._entries) > _CACHE_ENTRIES:
                self._entries.clear()
            self._entries[rz] = (generation, rows)
        return rows


def _summary(g: Mapping[str, Any]) -> dict[str, Any]:
    """One configuration's success across seeds (one seed: its evaluation's own interval)."""
    n = int(g["n"])
    mean, lo, hi = mean_ci95_from_sums(n, float(g["s"]), float(g["ss"]))
    if n == 1 and g["ci_lo"] is not None and g["ci_hi"] is not None:
        lo, hi = g["ci_lo"], g["ci_hi"]
    return {
        "task": g["task"],
        "algo": g["algo"],
        "reward": g["reward"],
        "guidance": g["guidance"],
        "n_seeds": n,
        "episodes": int(g["episodes"] or 0),
        "success_mean": mean,
        "success_lo": lo,
        "success_hi": hi,
        "success_min": g["lo_rate"],
        "success_max": g["hi_rate"],
    }


def leaderboard(
    db: Database,
    cache: GroupCache,
    filters: Mapping[str, str | None],
    randomization: str | None,
    limit: int,
    offset: int,
) -> dict[str, Any]:
    """One page of runs and the groups of every run ``filters`` (task, algo, reward, guidance) match.

    See ``Store.leaderboard`` for the page's shape and ordering.
    """
    limit = max(1, min(int(limit), MAX_LEADERBOARD_LIMIT))
    offset = max(0, int(offset))
    wanted = {k: filters.get(k) for k in _FILTERS}
    params: dict[str, Any] = {k: v for k, v in wanted.items() if v}
    params["rz"] = randomization or ""
    where = " AND ".join(["b.rz_key = :rz", *(f"b.{k} = :{k}" for k in wanted if wanted[k])])
    with db.transaction(write=False) as tx:
        generation = int(tx.execute("SELECT generation FROM store_state")[0]["generation"])
        all_groups = cache.groups(tx, "", generation)
        rz_groups = cache.groups(tx, params["rz"], generation) if params["rz"] else all_groups
        runs = tx.execute(
            f"SELECT {_BOARD_RUN_FIELDS} FROM board b WHERE {where}"
            " ORDER BY b.task, b.sort_rate DESC, b.name LIMIT :limit OFFSET :offset",
            {**params, "limit": limit, "offset": offset},
        )
        rz_rows = tx.execute(_DISTINCT_RZ)
    facets: dict[str, list[str]] = {k: sorted({g[k] for g in all_groups if g[k]}) for k in _FILTERS}
    facets["randomization"] = sorted(r["v"] for r in rz_rows)
    # The filters are equalities on the group keys: the matching groups are a subset.
    matching = [g for g in rz_groups if all(g[k] == v for k, v in wanted.items() if v)]
    total = sum(int(g["n_all"]) for g in matching)

    tasks: dict[str, list[dict[str, Any]]] = {}
    for g in matching:
        if int(g["n"]) > 0:
            tasks.setdefault(g["task"] or "", []).append(_summary(g))
    board = [
        {"task": t, "groups": sorted(gs, key=lambda g: (-g["success_mean"], -g["success_lo"]))}
        for t, gs in sorted(tasks.items())
    ]
    return {
        "runs": runs,
        "total": total,
        "limit": limit,
        "offset": offset,
        "tasks": board,
        "facets": facets,
        "filters": {k: v for k, v in {**wanted, "randomization": randomization}.items() if v},
    }
