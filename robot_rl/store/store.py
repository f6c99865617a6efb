"""The evaluation store: runs, evaluations, per-episode records and artifacts.

SQLite (stdlib ``sqlite3``) is the default: one file under the runs root, WAL so the dashboard
reads while training and evaluation write, ``BEGIN IMMEDIATE`` so a writer takes the write lock
before it reads (no lock-upgrade deadlock that would make one of two writers fail), and a busy
timeout so a second writer waits instead of erroring. A SQLAlchemy URL (``postgresql://...``)
selects a shared server store for teams; SQL is written once with ``:name`` parameters, which
both ``sqlite3`` and SQLAlchemy's ``text()`` accept.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from robot_rl.store import schema
from robot_rl.store.stats import mean_ci95_from_sums, wilson_ci95
from robot_rl.store.validate import INT64_MAX, evaluation_problem

DEFAULT_FILENAME = "eval_store.sqlite"
BUSY_TIMEOUT_S = 60.0

_RUN_COLUMNS = (
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
_FILTERS = ("task", "algo", "reward", "guidance")
LEADERBOARD_LIMIT = 50  # runs per page by default
MAX_LEADERBOARD_LIMIT = 500  # a page, not the whole store: 10,000 rows were 5 MB per request
# Every leaderboard write bumps the generation; readers key their caches by it.
_BUMP = "UPDATE store_state SET generation = generation + 1"
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
    " b.success_lo, b.success_hi, b.position_error_m, b.crash_rate, b.created_at"
)


class StoreError(RuntimeError):
    """The store cannot be opened or used (newer schema, missing driver, bad URL)."""


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


class _Tx:
    """One open transaction; rows come back as plain dicts whatever the backend."""

    def __init__(self, run: Any, runmany: Any) -> None:
        self._run = run
        self._runmany = runmany

    def execute(self, sql: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        return self._run(sql, dict(params or {}))

    def executemany(self, sql: str, rows: Sequence[Mapping[str, Any]]) -> None:
        if rows:
            self._runmany(sql, [dict(r) for r in rows])


class Store:
    """Evaluation store over SQLite (default) or a SQLAlchemy URL.

    Safe to share between threads: SQLite connections are per thread (sqlite3 objects must not
    cross threads), SQLAlchemy pools its own.
    """

    def __init__(self, url_or_path: str | os.PathLike[str], *, busy_timeout_s: float = BUSY_TIMEOUT_S) -> None:
        target = os.fspath(url_or_path)
        self.busy_timeout_s = busy_timeout_s
        self._local = threading.local()
        self._all_conns: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._group_cache: dict[str, tuple[int, list[dict[str, Any]]]] = {}
        self._engine: Any = None
        if "://" in target:
            self.url = target
            try:
                import sqlalchemy
            except ImportError as exc:  # only the optional team store needs it
                raise StoreError(
                    f"store URL {target.split('://')[0]}://... needs SQLAlchemy (pip install sqlalchemy)"
                ) from exc
            self._sa = sqlalchemy
            self._engine = sqlalchemy.create_engine(target)
            self.dialect = self._engine.dialect.name
            self.path: Path | None = None
        else:
            self.path = Path(target)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.url = str(self.path)
            self.dialect = "sqlite"
        self._migrate()

    # -- connections and transactions -------------------------------------------------------

    def _sqlite_conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            # isolation_level=None: we issue BEGIN ourselves, so the module never opens a
            # deferred transaction behind our back.
            conn = sqlite3.connect(
                str(self.path), timeout=self.busy_timeout_s, isolation_level=None, check_same_thread=False
            )
            conn.row_factory = sqlite3.Row
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_s * 1000)}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = ON")
            self._local.conn = conn
            with self._lock:
                self._all_conns.append(conn)
        return conn

    @contextmanager
    def transaction(self, write: bool = True) -> Iterator[_Tx]:
        """A transaction; ``write=True`` takes the write lock up front (BEGIN IMMEDIATE)."""
        if self._engine is not None:
            with self._engine.begin() as conn:

                def run(sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
                    result = conn.execute(self._sa.text(sql), params)
                    return [dict(r) for r in result.mappings()] if result.returns_rows else []

                def runmany(sql: str, rows: list[dict[str, Any]]) -> None:
                    conn.execute(self._sa.text(sql), rows)

                if write and self.dialect == "postgresql":
                    # Serialises writers like BEGIN IMMEDIATE does for SQLite (migrations too).
                    conn.execute(self._sa.text("SELECT pg_advisory_xact_lock(727001)"))
                yield _Tx(run, runmany)
            return

        conn = self._sqlite_conn()

        def run_sqlite(sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
            cur = conn.execute(sql, params)
            return [dict(r) for r in cur.fetchall()] if cur.description else []

        def runmany_sqlite(sql: str, rows: list[dict[str, Any]]) -> None:
            conn.executemany(sql, rows)

        conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        try:
            yield _Tx(run_sqlite, runmany_sqlite)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def query(self, sql: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """Run one read-only statement in its own snapshot."""
        with self.transaction(write=False) as tx:
            return tx.execute(sql, params)

    def close(self) -> None:
        """Close every connection this store opened (from any thread)."""
        with self._lock:
            conns, self._all_conns = self._all_conns, []
        for conn in conns:
            try:
                conn.close()
            except sqlite3.ProgrammingError:
                pass
        self._local = threading.local()
        if self._engine is not None:
            self._engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- schema -------------------------------------------------------------------------------

    def _migrate(self) -> None:
        migrations = schema.MIGRATIONS
        with self.transaction(write=True) as tx:
            tx.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
            rows = tx.execute("SELECT version FROM schema_version")
            if not rows:
                tx.execute("INSERT INTO schema_version (version) VALUES (0)")
                current = 0
            else:
                current = int(rows[0]["version"])
            if current > len(migrations):
                raise StoreError(
                    f"store {self.url} has schema v{current}, newer than this robot_rl (v{len(migrations)});"
                    " upgrade robot_rl"
                )
            for version in range(current, len(migrations)):
                for statement in migrations[version]:
                    tx.execute(schema.render(statement, self.dialect))
            if current != len(migrations):
                tx.execute("UPDATE schema_version SET version = :v", {"v": len(migrations)})

    def schema_version(self) -> int:
        return int(self.query("SELECT version FROM schema_version")[0]["version"])

    # -- writing --------------------------------------------------------------------------------

    def record_run(self, name: str, **fields: Any) -> int:
        """Insert or update one run; fields left out (or None) keep their stored value.

        Accepted fields: run_dir, task, algo, reward, guidance, seed, git_revision, versions
        (dict), config_yaml (text), meta (dict), status, started_at, finished_at,
        train_wall_time_s, fingerprint.
        """
        with self.transaction() as tx:
            run_id = self._upsert_run(tx, name, fields)
            self._refresh_board(tx, run_id)
            return run_id

    def _upsert_run(self, tx: _Tx, name: str, fields: Mapping[str, Any]) -> int:
        unknown = set(fields) - set(_RUN_COLUMNS) - {"versions", "meta"}
        if unknown:
            raise TypeError(f"unknown run fields: {sorted(unknown)}")
        values: dict[str, Any] = {c: fields.get(c) for c in _RUN_COLUMNS}
        if fields.get("versions") is not None:
            values["versions_json"] = json.dumps(fields["versions"], sort_keys=True, default=str)
        if fields.get("meta") is not None:
            values["meta_json"] = json.dumps(fields["meta"], sort_keys=True, default=str)
        for key in (
            "task",
            "algo",
            "reward",
            "guidance",
            "status",
            "git_revision",
            "started_at",
            "finished_at",
        ):
            values[key] = _text_or_none(values[key])
        if values["run_dir"] is not None:
            values["run_dir"] = os.fspath(values["run_dir"])
        values["seed"] = _int_or_none(values["seed"])
        values["train_wall_time_s"] = _finite(values["train_wall_time_s"])
        values["name"] = str(name)
        values["updated_at"] = time.time()
        cols = ("name", *_RUN_COLUMNS, "updated_at")
        sets = ", ".join(f"{c} = COALESCE(excluded.{c}, runs.{c})" for c in _RUN_COLUMNS)
        rows = tx.execute(
            f"INSERT INTO runs ({', '.join(cols)}) VALUES ({', '.join(':' + c for c in cols)}) "
            f"ON CONFLICT (name) DO UPDATE SET {sets}, updated_at = excluded.updated_at RETURNING id",
            values,
        )
        return int(rows[0]["id"])

    def record_evaluation(
        self, run_name: str, evaluation: Mapping[str, Any], *, created_at: float | None = None
    ) -> int:
        """Insert or replace one evaluation (the ``eval/<name>.json`` layout) and its episodes.

        The run is created if the store does not know it yet, so ``robot-rl eval`` can record
        before anyone indexes the run directory. A malformed evaluation raises ValueError with
        the reason (the indexer records such files as invalid instead).
        """
        problem = evaluation_problem(evaluation)
        if problem is not None:
            raise ValueError(f"evaluation for {run_name}: {problem}")
        with self.transaction() as tx:
            run_id = self._run_id(tx, run_name, create=True)
            eval_id = self._upsert_evaluation(tx, run_id, evaluation, created_at)
            self._refresh_board(tx, run_id)
            return eval_id

    def _run_id(self, tx: _Tx, run_name: str, create: bool) -> int:
        rows = tx.execute("SELECT id FROM runs WHERE name = :n", {"n": run_name})
        if rows:
            return int(rows[0]["id"])
        if not create:
            raise KeyError(run_name)
        return self._upsert_run(tx, run_name, {})

    def _upsert_evaluation(self, tx: _Tx, run_id: int, ev: Mapping[str, Any], created_at: float | None) -> int:
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
            "position_error_m": _finite(metrics.get("position_error_m")),
            "crash_rate": _finite(metrics.get("crash_rate")),
            "metrics_json": json.dumps(_clean(metrics), sort_keys=True),
            "reward_terms_json": json.dumps(_clean(dict(ev.get("reward_terms") or {})), sort_keys=True),
            "created_at": time.time() if created_at is None else float(created_at),
            "invalid": None,
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
        known = {"episode", "success", "return", "position_error_m", "crashed"}
        rows_ep = []
        for i, e in enumerate(per_episode):
            extra = {k: v for k, v in e.items() if k not in known}
            rows_ep.append(
                {
                    "evaluation_id": eval_id,
                    "episode": _int_or_none(e.get("episode")) if e.get("episode") is not None else i,
                    "success": None if e.get("success") is None else int(bool(e.get("success"))),
                    "ep_return": _finite(e.get("return")),
                    "position_error_m": _finite(e.get("position_error_m")),
                    "crashed": None if e.get("crashed") is None else int(bool(e.get("crashed"))),
                    "extra_json": json.dumps(_clean(extra), sort_keys=True) if extra else None,
                }
            )
        tx.executemany(
            "INSERT INTO episodes (evaluation_id, episode, success, ep_return, position_error_m, crashed,"
            " extra_json) VALUES (:evaluation_id, :episode, :success, :ep_return, :position_error_m,"
            " :crashed, :extra_json) ON CONFLICT (evaluation_id, episode) DO NOTHING",
            rows_ep,
        )
        return eval_id

    def _drop_invalid_evaluations(self, tx: _Tx, run_id: int) -> None:
        """Invalid rows mirror the run's files as last indexed; the indexer re-adds current ones."""
        tx.execute("DELETE FROM evaluations WHERE run_id = :r AND invalid IS NOT NULL", {"r": run_id})

    def _record_invalid_evaluation(self, tx: _Tx, run_id: int, name: str, reason: str, created_at: float) -> None:
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

    def _refresh_board(self, tx: _Tx, run_id: int) -> None:
        """Rebuild one run's leaderboard rows (after any change to it or its evaluations)."""
        tx.execute("DELETE FROM board WHERE run_id = :r", {"r": run_id})
        tx.execute(schema.BOARD_FILL_ANY + " AND r.id = :r", {"r": run_id})
        tx.execute(schema.BOARD_FILL_BY_RZ + " AND r.id = :r", {"r": run_id})
        tx.execute(_BUMP)

    def replace_artifacts(self, tx: _Tx, run_id: int, artifacts: Sequence[Mapping[str, Any]]) -> None:
        """Set a run's artifact list (inside the caller's transaction): files come and go."""
        tx.execute("DELETE FROM artifacts WHERE run_id = :r", {"r": run_id})
        tx.executemany(
            "INSERT INTO artifacts (run_id, kind, relpath, size_bytes, mtime) VALUES"
            " (:run_id, :kind, :relpath, :size_bytes, :mtime)",
            [{"run_id": run_id, **a} for a in artifacts],
        )

    def record_artifact(
        self,
        run_name: str,
        kind: str,
        relpath: str,
        size_bytes: int | None = None,
        mtime: float | None = None,
    ) -> None:
        """Add or update one artifact (path relative to the run directory)."""
        with self.transaction() as tx:
            run_id = self._run_id(tx, run_name, create=True)
            tx.execute(
                "INSERT INTO artifacts (run_id, kind, relpath, size_bytes, mtime) VALUES"
                " (:r, :k, :p, :s, :m) ON CONFLICT (run_id, relpath) DO UPDATE SET kind = excluded.kind,"
                " size_bytes = excluded.size_bytes, mtime = excluded.mtime",
                {"r": run_id, "k": kind, "p": relpath, "s": size_bytes, "m": mtime},
            )

    def delete_run(self, run_name: str) -> None:
        with self.transaction() as tx:
            rows = tx.execute("SELECT id FROM runs WHERE name = :n", {"n": run_name})
            if rows:
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

    # -- reading ----------------------------------------------------------------------------------

    def _groups(self, tx: _Tx, rz: str, generation: int) -> list[dict[str, Any]]:
        """Per-configuration sums over every run's board row for ``rz``, cached per generation.

        One aggregate over 10,000 rows is about 15-35 ms here, most of a leaderboard request;
        the store's generation changes with every write, so a cached copy is never stale.
        """
        with self._lock:
            hit = self._group_cache.get(rz)
        if hit is not None and hit[0] == generation:
            return hit[1]
        rows = tx.execute(_GROUPS_SQL, {"rz": rz})
        with self._lock:
            if len(self._group_cache) > 64:
                self._group_cache.clear()
            self._group_cache[rz] = (generation, rows)
        return rows

    def get_fingerprint(self, run_name: str) -> str | None:
        rows = self.query("SELECT fingerprint FROM runs WHERE name = :n", {"n": run_name})
        return rows[0]["fingerprint"] if rows else None

    def fingerprints(self) -> dict[str, str | None]:
        """Every run's fingerprint in one query (a re-index pass over 10,000 runs needs them all)."""
        return {r["name"]: r["fingerprint"] for r in self.query("SELECT name, fingerprint FROM runs")}

    def get_run(self, run_name: str) -> dict[str, Any] | None:
        """One run with its evaluations and artifacts, or None."""
        with self.transaction(write=False) as tx:
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

    def episodes(self, run_name: str, eval_name: str, limit: int = 10000) -> list[dict[str, Any]]:
        rows = self.query(
            "SELECT p.episode, p.success, p.ep_return, p.position_error_m, p.crashed, p.extra_json"
            " FROM episodes p JOIN evaluations e ON e.id = p.evaluation_id JOIN runs r ON r.id = e.run_id"
            " WHERE r.name = :n AND e.name = :e ORDER BY p.episode LIMIT :lim",
            {"n": run_name, "e": eval_name, "lim": int(limit)},
        )
        out = []
        for r in rows:
            rec = {
                "episode": r["episode"],
                "success": None if r["success"] is None else bool(r["success"]),
                "return": r["ep_return"],
                "position_error_m": r["position_error_m"],
                "crashed": None if r["crashed"] is None else bool(r["crashed"]),
            }
            if r["extra_json"]:
                rec.update(json.loads(r["extra_json"]))
            out.append(rec)
        return out

    def counts(self) -> dict[str, int]:
        with self.transaction(write=False) as tx:
            return {
                t: int(tx.execute(f"SELECT COUNT(*) AS n FROM {t}")[0]["n"])
                for t in ("runs", "evaluations", "episodes", "artifacts")
            }

    def leaderboard(
        self,
        task: str | None = None,
        algo: str | None = None,
        reward: str | None = None,
        guidance: str | None = None,
        randomization: str | None = None,
        *,
        limit: int = LEADERBOARD_LIMIT,
        offset: int = 0,
    ) -> dict[str, Any]:
        """One page of runs (each with its latest valid evaluation) and per-task groups across seeds.

        Runs are ordered by task, success (best first, unevaluated last) and name; ``total`` counts
        every run the filters match. With ``randomization``, only runs evaluated under it are listed,
        each with its latest evaluation of that randomization. A group is one (task, algo, reward,
        guidance) configuration over all matching runs, not only the page; its success is the mean of
        the seeds' success rates with a t interval across seeds (one seed: that evaluation's own
        interval over episodes).
        """
        limit = max(1, min(int(limit), MAX_LEADERBOARD_LIMIT))
        offset = max(0, int(offset))
        wanted = {"task": task, "algo": algo, "reward": reward, "guidance": guidance}
        params: dict[str, Any] = {k: v for k, v in wanted.items() if v}
        params["rz"] = randomization or ""
        where = " AND ".join(["b.rz_key = :rz", *(f"b.{k} = :{k}" for k in wanted if wanted[k])])
        with self.transaction(write=False) as tx:
            generation = int(tx.execute("SELECT generation FROM store_state")[0]["generation"])
            all_groups = self._groups(tx, "", generation)
            rz_groups = self._groups(tx, params["rz"], generation) if params["rz"] else all_groups
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
            n = int(g["n"])
            if n == 0:
                continue
            mean, lo, hi = mean_ci95_from_sums(n, float(g["s"]), float(g["ss"]))
            if n == 1 and g["ci_lo"] is not None and g["ci_hi"] is not None:
                lo, hi = g["ci_lo"], g["ci_hi"]
            tasks.setdefault(g["task"] or "", []).append(
                {
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
            )
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


def _clean(obj: Any) -> Any:
    """JSON-safe copy: NaN/inf become None (browsers' JSON.parse rejects them)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, Mapping):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if obj is None or isinstance(obj, (str, int, bool)):
        return obj
    return str(obj)


def open_store(url_or_path: str | os.PathLike[str] | None = None, runs_root: str | os.PathLike[str] = "runs") -> Store:
    """Open (creating and migrating if needed) the store: default ``<runs_root>/eval_store.sqlite``.

    The ``ROBOT_RL_STORE`` environment variable, when set, overrides the default so a team can
    point every command at one PostgreSQL URL.
    """
    if url_or_path is None:
        url_or_path = os.environ.get("ROBOT_RL_STORE") or Path(runs_root) / DEFAULT_FILENAME
    return Store(url_or_path)
