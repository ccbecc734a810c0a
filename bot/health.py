"""Operations: is the bot healthy (`paperclub health`), and verified backups (`paperclub backup`).

Both open an existing database only: a health check or a backup that quietly
created an empty file would report on the wrong thing. Neither imports torch,
so a container HEALTHCHECK stays well under a second.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from store import BackupResult, SchemaError, Store, StoreError, open_store

__all__ = ["Health", "BackupResult", "check_health", "backup_database", "open_existing"]

HEARTBEAT_KEY = "heartbeat"  # epoch seconds; the running bot writes it while connected to Slack
DEFAULT_MAX_AGE = 180.0  # the bot beats about every 30 s: three minutes is several missed beats


@dataclass(frozen=True)
class Health:
    """The outcome of one check: ok, and one line for a person (or a container log)."""

    ok: bool
    message: str


def open_existing(path: str | Path) -> Store:
    """A Store on a database that must already exist; never creates or migrates it."""
    return open_store(path, must_exist=True, migrate=False)


def check_health(path: str | Path, now: float, max_age: float = DEFAULT_MAX_AGE) -> Health:
    """Healthy when the database is at this code's schema and the bot's heartbeat is recent."""
    try:
        store = open_existing(path)
    except StoreError as e:
        return Health(False, str(e))
    try:
        try:
            applied, known = store.schema_version()
        except SchemaError as e:
            return Health(False, f"{e} (written by a newer paperclub?)")
        if applied != known:
            return Health(False, f"database {path} is at schema {applied} of {known}: "
                                 "the bot has not started on it with this version")
        beat = store.get_meta(HEARTBEAT_KEY)
    except StoreError as e:  # not a database, locked for too long, unreadable...
        return Health(False, str(e))
    finally:
        store.close()
    if beat is None:
        return Health(False, "the bot has never connected to Slack (no heartbeat yet)")
    try:
        age = now - float(beat)
    except ValueError:
        return Health(False, f"heartbeat is not a time: {beat!r}")
    if age > max_age:
        return Health(False, f"last heartbeat {age:.0f} s ago (limit {max_age:.0f} s): "
                             "the bot is not connected to Slack")
    return Health(True, f"ok: schema {applied}/{known}, heartbeat {max(age, 0):.0f} s ago")


def backup_database(source: str | Path, target: str | Path, *, force: bool = False) -> BackupResult:
    """A consistent, verified copy of a live database; atomic, so target is never half-written."""
    live = open_existing(source)
    try:
        return live.backup_to(target, force=force)
    finally:
        live.close()
