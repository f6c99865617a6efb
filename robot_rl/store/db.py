"""The store's database: connections, transactions and schema migrations.

SQLite (stdlib ``sqlite3``) is the default: one file under the runs root, WAL so the dashboard
reads while training and evaluation write, ``BEGIN IMMEDIATE`` so a writer takes the write lock
before it reads (no lock-upgrade deadlock that would make one of two writers fail), and a busy
timeout so a second writer waits instead of erroring. A SQLAlchemy URL (``postgresql://...``)
selects a shared server store for teams; SQL is written once with ``:name`` parameters, which
both ``sqlite3`` and SQLAlchemy's ``text()`` accept.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from robot_rl.store import schema

BUSY_TIMEOUT_S = 60.0

_Rows = list[dict[str, Any]]
_D = TypeVar("_D", bound="Database")


class StoreError(RuntimeError):
    """The store cannot be opened or used (newer schema, missing driver, bad URL)."""


class Tx:
    """One open transaction; rows come back as plain dicts whatever the backend."""

    def __init__(
        self, run: Callable[[str, dict[str, Any]], _Rows], runmany: Callable[[str, list[dict[str, Any]]], None]
    ) -> None:
        self._run = run
        self._runmany = runmany

    def execute(self, sql: str, params: Mapping[str, Any] | None = None) -> _Rows:
        return self._run(sql, dict(params or {}))

    def executemany(self, sql: str, rows: Sequence[Mapping[str, Any]]) -> None:
        if rows:
            self._runmany(sql, [dict(r) for r in rows])


class Database:
    """SQLite (default) or a SQLAlchemy URL, migrated to the current schema on open.

    Safe to share between threads: SQLite connections are per thread (sqlite3 objects must not
    cross threads), SQLAlchemy pools its own.
    """

    def __init__(self, url_or_path: str | os.PathLike[str], *, busy_timeout_s: float = BUSY_TIMEOUT_S) -> None:
        target = os.fspath(url_or_path)
        self.busy_timeout_s = busy_timeout_s
        self._local = threading.local()
        self._all_conns: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
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
    def transaction(self, write: bool = True) -> Iterator[Tx]:
        """A transaction; ``write=True`` takes the write lock up front (BEGIN IMMEDIATE)."""
        if self._engine is not None:
            with self._engine.begin() as conn:

                def run(sql: str, params: dict[str, Any]) -> _Rows:
                    result = conn.execute(self._sa.text(sql), params)
                    return [dict(r) for r in result.mappings()] if result.returns_rows else []

                def runmany(sql: str, rows: list[dict[str, Any]]) -> None:
                    conn.execute(self._sa.text(sql), rows)

                if write and self.dialect == "postgresql":
                    # Serialises writers like BEGIN IMMEDIATE does for SQLite (migrations too).
                    conn.execute(self._sa.text("SELECT pg_advisory_xact_lock(727001)"))
                yield Tx(run, runmany)
            return

        conn = self._sqlite_conn()

        def run_sqlite(sql: str, params: dict[str, Any]) -> _Rows:
            cur = conn.execute(sql, params)
            return [dict(r) for r in cur.fetchall()] if cur.description else []

        def runmany_sqlite(sql: str, rows: list[dict[str, Any]]) -> None:
            conn.executemany(sql, rows)

        conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        try:
            yield Tx(run_sqlite, runmany_sqlite)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def query(self, sql: str, params: Mapping[str, Any] | None = None) -> _Rows:
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

    def __enter__(self: _D) -> _D:
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
