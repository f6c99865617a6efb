"""Evaluation store: runs, evaluations, per-episode records and artifacts (SQLite by default)."""

from robot_rl.store.db import StoreError
from robot_rl.store.indexer import index_run, index_runs_root
from robot_rl.store.schema import SCHEMA_VERSION
from robot_rl.store.stats import mean_ci95, mean_ci95_from_sums, wilson_ci95
from robot_rl.store.store import DEFAULT_FILENAME, Store, open_store

__all__ = [
    "DEFAULT_FILENAME",
    "SCHEMA_VERSION",
    "Store",
    "StoreError",
    "index_run",
    "index_runs_root",
    "mean_ci95",
    "mean_ci95_from_sums",
    "open_store",
    "wilson_ci95",
]
