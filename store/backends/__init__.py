"""Store backends: each implements the Store protocol (store/__init__.py); only they run SQL."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import NewerSchema, SchemaError, StoreError
from .conninfo import is_server_database, redact
from .rows import older_schema_line

if TYPE_CHECKING:
    from ..base import RestoreResult, Store

_SQLITE_PREFIX = "sqlite:///"


def open_store(url: str | Path, *, migrate: bool = True, must_exist: bool = False,
               read_only: bool = False, migrate_wait: float | None = None) -> Store:
    """The Store at url: a file path, sqlite:///path (':memory:' too) or postgresql://user@host/db.

    must_exist=True refuses to create a database (health checks, backups); migrate=False
    leaves the schema as it is; read_only=True opens an existing database without writing at all
    (a read-only volume, a standby, or a database from a newer paperclub), and refuses one older
    than this code (SchemaError), which it cannot migrate and would fail to read. migrate_wait:
    the seconds a PostgreSQL store waits for another process migrating the schema (default: its
    lock timeout).
    """
    store = _open(url, migrate=migrate, must_exist=must_exist, read_only=read_only, migrate_wait=migrate_wait)
    if read_only:
        try:
            older = older_schema_line(store.path, *store.schema_version())
        except NewerSchema:
            older = None  # read anyway: the caller says so
        except BaseException:
            store.close()
            raise
        if older:
            store.close()
            raise SchemaError(older)
    return store


def _open(url: str | Path, *, migrate: bool, must_exist: bool, read_only: bool,
          migrate_wait: float | None) -> Store:
    text = str(url)
    if is_server_database(text):
        from .postgres import PostgresStore  # psycopg loads only for PostgreSQL

        wait = {} if migrate_wait is None else {"migrate_wait": migrate_wait}
        return PostgresStore(text, migrate=migrate, must_exist=must_exist, read_only=read_only, **wait)
    if text.startswith(_SQLITE_PREFIX):
        text = text[len(_SQLITE_PREFIX):] or ":memory:"
    elif text.startswith(("postgresql:", "postgres:")):  # a URL that went through Path() lost a slash
        raise StoreError("a PostgreSQL URL starts postgresql:// (this one has lost a slash), not a file name")
    elif "://" in text:
        raise StoreError(f"unknown database URL {redact(text)!r}: use a file path, sqlite:///path, "
                         "postgresql://... or a PostgreSQL key=value connection string")
    from .sqlite import SQLiteStore

    return SQLiteStore(text, migrate=migrate, must_exist=must_exist, read_only=read_only)


def restore_database(backup: str | Path, url: str | Path, *, lists=()) -> RestoreResult:
    """`paperclub restore`: put a backup made by `paperclub backup` in place of the SQLite
    database at url, keeping every forget-me request (sqlite.restore_sqlite)."""
    text = str(url)
    if is_server_database(text):  # backup_to makes no PostgreSQL backups: pg_dump does
        raise StoreError(f"paperclub restore puts back SQLite backups made by `paperclub backup`; "
                         f"{redact(text)} is PostgreSQL: restore your pg_dump with pg_restore and keep the "
                         "newest forget-me list, as docs/scaling.md shows")
    if text.startswith(_SQLITE_PREFIX):
        text = text[len(_SQLITE_PREFIX):]
    if not text or text == ":memory:" or "://" in text:
        raise StoreError(f"cannot restore into {redact(text) or ':memory:'!r}: give the database's file path")
    from .sqlite import restore_sqlite

    return restore_sqlite(backup, text, lists=lists)


def database_unreachable(url: str | Path) -> str | None:
    """Why the database server at url does not answer (yet), or None when it does.

    Always None for SQLite (a file needs no server). A PostgreSQL server that answers
    with a refusal waiting cannot fix (no such database, role or password) raises StoreError.
    """
    text = str(url)
    if not is_server_database(text):
        return None
    from .postgres import unreachable_reason

    return unreachable_reason(text)


def database_address(url: str | Path) -> str:
    """Where the database lives, for a person: host:port for PostgreSQL, the path for SQLite."""
    text = str(url)
    if not is_server_database(text):
        return text.removeprefix(_SQLITE_PREFIX)
    from .postgres import server_address

    return server_address(text)
