"""The evaluation store: runs, evaluations, per-episode records and artifacts.

``Store`` is the one object callers use: each method is one transaction over the database
(``db``), made of the row writes (``writes``), run reads (``reads``) or the leaderboard query
(``leaderboard``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from robot_rl.store import leaderboard as board
from robot_rl.store import reads, writes
from robot_rl.store.db import BUSY_TIMEOUT_S, Database, Tx
from robot_rl.store.validate import evaluation_problem

DEFAULT_FILENAME = "eval_store.sqlite"


class Store(Database):
    """Evaluation store over SQLite (default) or a SQLAlchemy URL; safe to share between threads."""

    def __init__(self, url_or_path: str | os.PathLike[str], *, busy_timeout_s: float = BUSY_TIMEOUT_S) -> None:
        self._groups = board.GroupCache()
        super().__init__(url_or_path, busy_timeout_s=busy_timeout_s)

    # -- writing --------------------------------------------------------------------------------

    def record_run(self, name: str, **fields: Any) -> int:
        """Insert or update one run; fields left out (or None) keep their stored value.

        Accepted fields: run_dir, task, algo, reward, guidance, seed, git_revision, versions
        (dict), config_yaml (text), meta (dict), status, started_at, finished_at,
        train_wall_time_s, fingerprint.
        """
        with self.transaction() as tx:
            run_id = writes.upsert_run(tx, name, fields)
            writes.refresh_board(tx, run_id)
            return run_id

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
            run_id = writes.find_run_id(tx, run_name, create=True)
            eval_id = writes.upsert_evaluation(tx, run_id, evaluation, created_at)
            writes.refresh_board(tx, run_id)
            return eval_id

    def replace_artifacts(self, tx: Tx, run_id: int, artifacts: Sequence[Mapping[str, Any]]) -> None:
        """Set a run's artifact list (inside the caller's transaction): files come and go."""
        writes.replace_artifacts(tx, run_id, artifacts)

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
            run_id = writes.find_run_id(tx, run_name, create=True)
            writes.upsert_artifact(tx, run_id, kind, relpath, size_bytes, mtime)

    def delete_run(self, run_name: str) -> None:
        with self.transaction() as tx:
            writes.delete_run(tx, run_name)

    # -- reading ----------------------------------------------------------------------------------

    def get_fingerprint(self, run_name: str) -> str | None:
        return reads.get_fingerprint(self, run_name)

    def fingerprints(self) -> dict[str, str | None]:
        """Every run's fingerprint in one query (a re-index pass over 10,000 runs needs them all)."""
        return reads.fingerprints(self)

    def get_run(self, run_name: str) -> dict[str, Any] | None:
        """One run with its evaluations and artifacts, or None."""
        return reads.get_run(self, run_name)

    def episodes(self, run_name: str, eval_name: str, limit: int = 10000) -> list[dict[str, Any]]:
        return reads.episodes(self, run_name, eval_name, limit)

    def counts(self) -> dict[str, int]:
        return reads.counts(self)

    def leaderboard(
        self,
        task: str | None = None,
        algo: str | None = None,
        reward: str | None = None,
        guidance: str | None = None,
        randomization: str | None = None,
        *,
        limit: int = board.LEADERBOARD_LIMIT,
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
        filters = {"task": task, "algo": algo, "reward": reward, "guidance": guidance}
        return board.leaderboard(self, self._groups, filters, randomization, limit, offset)


def open_store(url_or_path: str | os.PathLike[str] | None = None, runs_root: str | os.PathLike[str] = "runs") -> Store:
    """Open (creating and migrating if needed) the store: default ``<runs_root>/eval_store.sqlite``.

    The ``ROBOT_RL_STORE`` environment variable, when set, overrides the default so a team can
    point every command at one PostgreSQL URL.
    """
    if url_or_path is None:
        url_or_path = os.environ.get("ROBOT_RL_STORE") or Path(runs_root) / DEFAULT_FILENAME
    return Store(url_or_path)
