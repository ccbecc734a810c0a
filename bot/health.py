"""Operations: is the bot healthy (`paperclub health`), verified backups (`paperclub backup`),
and whether the bot looks to be running before a restore (`paperclub restore`).

Both open an existing database only: a health check or a backup that quietly
created an empty file would report on the wrong thing. Neither imports torch,
so a container HEALTHCHECK stays well under a second.
"""
from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path

from store import BackupResult, SchemaError, Store, StoreBusy, StoreError, is_server_database, open_store
from store.text import parse_number

from .lease import SWEEP_LEASE
from .replica import (ALIVE_SECONDS, HEARTBEAT_BY_KEY, HEARTBEAT_KEY, REPLICA_ON_KEY, beat_times,
                      forget_silent_replicas, process_identity, write_heartbeat)

__all__ = ["Health", "BackupResult", "check_health", "backup_database", "bot_running", "open_existing",
           "failing_feeds", "forget_silent_replicas", "write_heartbeat"]

DEFAULT_MAX_AGE = 45.0  # the bot beats every 10 s while connected: 45 s is four missed beats


def _writer_gone(by: str | None) -> str | None:
    """Why the process that wrote the heartbeat is not running; None if it runs (or none can tell)."""
    if by is None:
        return "the heartbeat names no process: an older paperclub wrote it"
    if not by or process_identity() is None:  # written or read where /proc cannot tell
        return None
    pid = by.split(":")[1] if by.count(":") == 2 else ""
    if (number := parse_number(pid, 1, 2**63)) is not None and process_identity(number) == by:
        return None
    return f"pid {pid or '?'} of that boot is not running"


@dataclass(frozen=True)
class Health:
    """The outcome of one check: ok, and one line for a person (or a container log)."""

    ok: bool
    message: str


def open_existing(path: str | Path) -> Store:
    """A Store on a database that must already exist; never creates or migrates it."""
    return open_store(path, must_exist=True, migrate=False)


def check_health(path: str | Path, now: float, max_age: float = DEFAULT_MAX_AGE,
                 replica: str | None = None) -> Health:
    """Healthy when the database is at this code's schema and the bot's heartbeat is recent.

    `replica` (PAPERCLUB_REPLICA_ID) names the bot process to check among several on one
    database; by default, the one last started on this host. The line says which replica it
    is, whether it holds the sweeps' lease, and whether the database answered.
    """
    try:
        store = open_existing(path)
    except StoreError as e:
        who = f"replica {replica}: " if replica else ""
        what = "database not reachable: " if is_server_database(path) else ""  # a server; a file says itself
        return Health(False, f"{who}{what}{e}")
    try:
        try:
            applied, known = store.schema_version()
        except SchemaError as e:  # its message names both versions and the newer paperclub
            return Health(False, str(e))
        if applied != known:
            return Health(False, f"database {store.path} is at schema {applied} of {known}: "
                                 "the bot has not started on it with this version")
        replica = replica or store.get_meta(REPLICA_ON_KEY + socket.gethostname())
        suffix = f":{replica}" if replica else ""
        beat = store.get_meta(HEARTBEAT_KEY + suffix)
        by = store.get_meta(HEARTBEAT_BY_KEY + suffix)
        lease = store.lease_holder(SWEEP_LEASE, now=now)
        failing = failing_feeds(store, now)
    except StoreError as e:  # not a database, locked for too long, unreadable...
        return Health(False, f"database not reachable: {e}")
    finally:
        store.close()
    if replica:
        if lease is None:
            role = "nobody holds the sweeps lease"
        elif lease["holder"] == replica:
            role = f"holds the sweeps lease (epoch {lease['epoch']})"
        else:
            role = f"standby (the sweeps lease is {lease['holder']}'s)"
        ident = f"replica {replica}, {role}, database reachable"
    else:
        ident = "database reachable"
    if beat is None:
        return Health(False, f"{ident}; the bot has never connected to Slack (no heartbeat yet)")
    beat_at, connected = beat_times(beat)
    if connected is None:
        return Health(False, f"{ident}; heartbeat is not a time: {beat!r}")
    age, silent = now - connected, now - beat_at
    gone = _writer_gone(by)
    if age > max_age:
        if replica and silent > max_age and not gone:  # its own key: beats whether connected or not
            # No beat at all is not Slack's doing.
            return Health(False, f"{ident}; no heartbeat written for {silent:.0f} s (limit {max_age:.0f} s): "
                                 "the bot has stopped, is stuck, or cannot write to the database (locked by "
                                 "another writer? disk full? its log says \"heartbeat not written\")")
        return Health(False, f"{ident}; last heartbeat {age:.0f} s ago (limit {max_age:.0f} s): "
                             "the bot is not connected to Slack")
    if gone:  # a heartbeat left on the volume by an earlier container, not this bot's
        return Health(False, f"{ident}; the last heartbeat ({max(age, 0):.0f} s ago) came from a process "
                             f"that has stopped ({gone}): this bot has not connected to Slack yet")
    # A feed down for long is reported, not made unhealthy: restarting the container cannot fix arXiv.
    warn = "".join(f"; warning: {f}" for f in failing)
    return Health(True, f"ok: {ident}, schema {applied}/{known}, heartbeat {max(age, 0):.0f} s ago{warn}")


FEED_FAILING_SECONDS = 86400.0


def failing_feeds(store: Store, now: float, limit: float = FEED_FAILING_SECONDS) -> list[str]:
    """One line per source that has failed, without a success since, for more than `limit` seconds."""
    out = []
    for st in store.source_states():
        since = st.get("failing_since")
        if since and now - since > limit:
            out.append(f"feed {st['source']} failing for {(now - since) / 86400:.1f} days "
                       f"({(st.get('last_error') or '')[:120]})")
    return out


def backup_database(source: str | Path, target: str | Path, *, force: bool = False) -> BackupResult:
    """A consistent, verified copy of a live database; atomic, so target is never half-written."""
    live = open_existing(source)
    try:
        return live.backup_to(target, force=force)
    finally:
        live.close()


def bot_running(path: str | Path, now: float) -> str | None:
    """Why a bot looks to be running on the database at path (a live sweeps lease, a heartbeat
    written in the last ALIVE_SECONDS by a process not known to have stopped); None if none does."""
    if not is_server_database(path) and not Path(path).is_file():
        return None
    try:
        store = open_existing(path)
        try:
            lease = store.lease_holder(SWEEP_LEASE, now=now)
            meta = store.meta_items(HEARTBEAT_KEY)
        finally:
            store.close()
    except StoreBusy as e:  # held by another writer: a running bot, most likely
        return f"the database is busy ({e})"
    except StoreError:  # unreadable (damaged?): no bot runs on it, and the restore is what it needs
        return None
    if lease is not None:
        return (f"replica {lease['holder']} holds the sweeps lease (for {max(lease['expires_at'] - now, 0):.0f} s "
                "more unless renewed)")
    for key, value in sorted(meta.items(), key=lambda kv: (kv[0] == HEARTBEAT_KEY, kv[0])):  # replicas by name first
        if key != HEARTBEAT_KEY and not key.startswith(HEARTBEAT_KEY + ":"):
            continue  # heartbeat_by:..., whose values name processes, not times
        beat, _ = beat_times(value)
        by = meta.get(HEARTBEAT_BY_KEY + key[len(HEARTBEAT_KEY):])
        if beat is not None and now - beat < ALIVE_SECONDS and not (by and _writer_gone(by)):
            who = f"replica {key[len(HEARTBEAT_KEY) + 1:]}" if key != HEARTBEAT_KEY else "the bot"
            return f"{who} wrote its heartbeat {max(now - beat, 0):.0f} s ago"
    return None
