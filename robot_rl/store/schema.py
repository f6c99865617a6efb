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
]

SCHEMA_VERSION = len(MIGRATIONS)


def render(statement: str, dialect: str) -> str:
    """Fill the dialect-specific type placeholders of one migration statement."""
    types = DIALECT_TYPES.get(dialect, DIALECT_TYPES["postgresql"])
    return statement.format(**types)
