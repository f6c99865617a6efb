"""Versioned schema of the evaluation store and its migrations.

Each migration is a list of statements written once for both SQLite and PostgreSQL; the few
column types that differ between them are placeholders filled per dialect. A store records the
version it is at in ``schema_version`` and every open applies the missing migrations inside one
write transaction, so two processes opening an old store at once migrate it exactly once.
"""

from __future__ import annotations

# Type spellings that differ: SQLite's REAL is a double, PostgreSQL's REAL is a float4 (so
# metrics would silently lose precision); integer primary keys autoincrement differently.
DIALECT_TYPES: dict[str, dict[str, str]] = {
    "sqlite": {"pk": "INTEGER PRIMARY KEY AUTOINCREMENT", "float": "REAL", "fk": "INTEGER"},
    "postgresql": {"pk": "BIGSERIAL PRIMARY KEY", "float": "DOUBLE PRECISION", "fk": "BIGINT"},
}

MIGRATIONS: list[list[str]] = [
    # v1: runs, evaluations, per-episode records, artifacts.
    [
        """CREATE TABLE runs (
            id {pk},
            name TEXT NOT NULL UNIQUE,
            run_dir TEXT,
            task TEXT,
            algo TEXT,
            reward TEXT,
            guidance TEXT,
            seed INTEGER,
            git_revision TEXT,
            versions_json TEXT,
            config_yaml TEXT,
            meta_json TEXT,
            status TEXT,
            started_at TEXT,
            finished_at TEXT,
            train_wall_time_s {float},
            fingerprint TEXT,
            updated_at {float}
        )""",
        "CREATE INDEX runs_task ON runs (task)",
        """CREATE TABLE evaluations (
            id {pk},
            run_id {fk} NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
            name TEXT NOT NULL,
            task TEXT,
            episodes INTEGER,
            randomization TEXT,
            seed INTEGER,
            success_rate {float},
            success_lo {float},
            success_hi {float},
            position_error_m {float},
            crash_rate {float},
            metrics_json TEXT,
            reward_terms_json TEXT,
            created_at {float},
            UNIQUE (run_id, name)
        )""",
        "CREATE INDEX evaluations_run_created ON evaluations (run_id, created_at)",
        """CREATE TABLE episodes (
            evaluation_id {fk} NOT NULL REFERENCES evaluations (id) ON DELETE CASCADE,
            episode INTEGER NOT NULL,
            success INTEGER,
            ep_return {float},
            position_error_m {float},
            crashed INTEGER,
            extra_json TEXT,
            PRIMARY KEY (evaluation_id, episode)
        )""",
        """CREATE TABLE artifacts (
            id {pk},
            run_id {fk} NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
            kind TEXT NOT NULL,
            relpath TEXT NOT NULL,
            size_bytes INTEGER,
            mtime {float},
            UNIQUE (run_id, relpath)
        )""",
        "CREATE INDEX artifacts_run ON artifacts (run_id)",
    ],
    # v2: evaluations the indexer found malformed (kept, with the reason, so the run page can say
    # so), and the leaderboard table: one narrow row per run and randomization holding that run's
    # latest valid evaluation, so a page of 10,000 runs is an index range, not 10,000 subqueries.
    [
        "ALTER TABLE evaluations ADD COLUMN invalid TEXT",
        """CREATE TABLE board (
            run_id {fk} NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
            rz_key TEXT NOT NULL,
            name TEXT NOT NULL,
            task TEXT,
            algo TEXT,
            reward TEXT,
            guidance TEXT,
            seed INTEGER,
            status TEXT,
            started_at TEXT,
            finished_at TEXT,
            train_wall_time_s {float},
            eval_name TEXT,
            eval_randomization TEXT,
            episodes INTEGER,
            success_rate {float},
            success_lo {float},
            success_hi {float},
            position_error_m {float},
            crash_rate {float},
            created_at {float},
            sort_rate {float} NOT NULL,
            PRIMARY KEY (run_id, rz_key)
        )""",
        "CREATE INDEX board_page ON board (rz_key, task, sort_rate DESC, name)",
        "CREATE INDEX board_groups ON board (rz_key, task, algo, reward, guidance, success_rate, success_lo,"
        " success_hi, episodes)",
        # Bumped by every write to the board: the dashboard caches its aggregates by it.
        "CREATE TABLE store_state (generation BIGINT NOT NULL)",
        "INSERT INTO store_state (generation) VALUES (0)",
    ],
]

# The board rows of runs (all of them, or one: the store appends "AND r.id = :r").
_BOARD_COLUMNS_V2 = (
    "run_id, rz_key, name, task, algo, reward, guidance, seed, status, started_at, finished_at, train_wall_time_s,"
    " eval_name, eval_randomization, episodes, success_rate, success_lo, success_hi, position_error_m, crash_rate,"
    " created_at, sort_rate"
)
_BOARD_VALUES_V2 = (
    "r.name, r.task, r.algo, r.reward, r.guidance, r.seed, r.status, r.started_at, r.finished_at,"
    " r.train_wall_time_s, e.name, e.randomization, e.episodes, e.success_rate, e.success_lo, e.success_hi,"
    " e.position_error_m, e.crash_rate, e.created_at, COALESCE(e.success_rate, -1.0)"
)
_LATEST_V2 = (
    "SELECT e2.id FROM evaluations e2 WHERE e2.run_id = r.id AND e2.invalid IS NULL{also}"
    " ORDER BY e2.created_at DESC, e2.id DESC LIMIT 1"
)
# v2's fill (the latest valid evaluation of any kind), kept as v2 ran it: a store made before v2 backfills
# with it, then v3 refills by the headline rule.
MIGRATIONS[1] += [
    f"INSERT INTO board ({_BOARD_COLUMNS_V2}) SELECT r.id, '', {_BOARD_VALUES_V2} FROM runs r"
    f" LEFT JOIN evaluations e ON e.id = ({_LATEST_V2.format(also='')}) WHERE 1 = 1",
    f"INSERT INTO board ({_BOARD_COLUMNS_V2}) SELECT r.id, e.randomization, {_BOARD_VALUES_V2} FROM runs r"
    " JOIN evaluations e ON e.run_id = r.id"
    f" WHERE e.id = ({_LATEST_V2.format(also=' AND e2.randomization = e.randomization')})"
    " AND e.randomization IS NOT NULL AND e.randomization <> ''",
]

# v3: the headline evaluation by rule, not the most recent. Each evaluation has a kind (kinds.py):
# 'standard' (the checkpoint under training randomization and sensing), 'stress' (the checkpoint under other
# conditions), 'bundle' (the exported ONNX through the deploy runtime), 'zero' (zero actions: the plan alone)
# and 'sitl'. A run's headline ('' row) is its latest standard evaluation; a randomization row is its latest
# standard or stress evaluation there; bundle, zero-policy and SITL results have columns of their own.
# Existing rows get their kind from their names (what robot-rl eval and demo call them).
MIGRATIONS.append(
    [
        "ALTER TABLE evaluations ADD COLUMN kind TEXT",
        "UPDATE evaluations SET kind = CASE WHEN name LIKE 'sitl%' THEN 'sitl'"
        " WHEN name LIKE 'zero%' OR name LIKE 'corrected_plan%' THEN 'zero' WHEN name LIKE 'bundle%' THEN 'bundle'"
        " WHEN randomization IS NULL OR randomization = 'train' THEN 'standard' ELSE 'stress' END",
        "ALTER TABLE board ADD COLUMN bundle_success_rate {float}",
        "ALTER TABLE board ADD COLUMN zero_success_rate {float}",
        "ALTER TABLE board ADD COLUMN sitl_error_m {float}",
        "DELETE FROM board",
    ]
)
_BOARD_COLUMNS = _BOARD_COLUMNS_V2 + ", bundle_success_rate, zero_success_rate, sitl_error_m"
_LATEST = (
    "SELECT e2.id FROM evaluations e2 WHERE e2.run_id = r.id AND e2.invalid IS NULL AND e2.kind IN ({kinds}){also}"
    " ORDER BY e2.created_at DESC, e2.id DESC LIMIT 1"
)
_LATEST_OF_KIND = (
    "(SELECT e3.{column} FROM evaluations e3 WHERE e3.run_id = r.id AND e3.invalid IS NULL AND e3.kind = '{kind}'"
    " ORDER BY e3.created_at DESC, e3.id DESC LIMIT 1)"
)
_BOARD_VALUES = ", ".join(
    [_BOARD_VALUES_V2]
    + [
        _LATEST_OF_KIND.format(column=column, kind=kind)
        for column, kind in (("success_rate", "bundle"), ("success_rate", "zero"), ("position_error_m", "sitl"))
    ]
)
_HEADLINE = _LATEST.format(kinds="'standard'", also="")
_HEADLINE_BY_RZ = _LATEST.format(kinds="'standard', 'stress'", also=" AND e2.randomization = e.randomization")
BOARD_FILL_ANY = (
    f"INSERT INTO board ({_BOARD_COLUMNS}) SELECT r.id, '', {_BOARD_VALUES} FROM runs r"
    f" LEFT JOIN evaluations e ON e.id = ({_HEADLINE}) WHERE 1 = 1"
)
BOARD_FILL_BY_RZ = (
    f"INSERT INTO board ({_BOARD_COLUMNS}) SELECT r.id, e.randomization, {_BOARD_VALUES} FROM runs r"
    f" JOIN evaluations e ON e.run_id = r.id WHERE e.id = ({_HEADLINE_BY_RZ})"
    " AND e.randomization IS NOT NULL AND e.randomization <> ''"
)
MIGRATIONS[2] += [BOARD_FILL_ANY, BOARD_FILL_BY_RZ]

SCHEMA_VERSION = len(MIGRATIONS)


def render(statement: str, dialect: str) -> str:
    """Fill the dialect-specific type placeholders of one migration statement."""
    types = DIALECT_TYPES.get(dialect, DIALECT_TYPES["postgresql"])
    return statement.format(**types)
