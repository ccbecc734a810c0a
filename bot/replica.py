"""This process among the replicas on one database: its one identity, its one heartbeat, who
is alive, and forgetting replicas gone silent.

The identity (`replica_id`: PAPERCLUB_REPLICA_ID, else host:pid) names the process in the sweeps'
lease, in event claims and in post claims. `paperclub run` beats every 10 s under one key family,
`heartbeat:<replica>`: the value is the time of the beat, followed by the time it was last
connected to Slack when it is not connected now. `paperclub health` reads the connected time;
another replica deciding whether a claim's holder may still be posting reads the beat.
"""
from __future__ import annotations

import os
import socket
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from store.errors import StoreError
from store.text import parse_number

if TYPE_CHECKING:
    from store import Store

    from .config import Settings

HEARTBEAT_KEY = "heartbeat"  # + ":<replica>": "<beat>[ <last connected>]", epoch seconds
HEARTBEAT_BY_KEY = "heartbeat_by"  # + ":<replica>": process_identity() of the process that beats
REPLICA_ON_KEY = "replica_on:"  # + host name: the replica last started there (health's default)
BEAT_SECONDS = 10.0
ALIVE_SECONDS = 45.0  # a replica whose beat is older than this is gone (four missed beats)
CLAIM_LEASE = timedelta(minutes=30)  # how long a claim by a process that never beats counts as alive
FORGET_AFTER = 86_400.0  # seconds a replica may be silent before its rows are dropped


def replica_id(settings: Settings | None = None) -> str:
    """This process among the replicas on one database: PAPERCLUB_REPLICA_ID, else host:pid."""
    return getattr(settings, "replica_id", None) or f"{socket.gethostname()}:{os.getpid()}"


def process_identity(pid: int | None = None) -> str | None:
    """boot id, pid and the pid's start time: names one process, never a later one with its pid.

    None where /proc cannot tell (not Linux): health then checks the heartbeat's age only.
    """
    pid = os.getpid() if pid is None else pid
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None
    start = stat.rsplit(")", 1)[1].split()[19]  # field 22, starttime (the name may hold spaces)
    return f"{boot}:{pid}:{start}"


def write_heartbeat(store: Store, now: float, replica: str | None = None, *,
                    connected_at: float | None = None) -> None:
    """The one beat: this process runs, and is connected to Slack unless `connected_at` says
    when it last was. With a replica id its own keys too: several replicas share one database,
    and each container's health check reads its own bot's heartbeat."""
    by = process_identity() or ""
    value = str(now) if connected_at is None else f"{now} {connected_at}"
    if replica:
        store.set_meta(REPLICA_ON_KEY + socket.gethostname(), replica)
        store.set_meta(f"{HEARTBEAT_BY_KEY}:{replica}", by)
        store.set_meta(f"{HEARTBEAT_KEY}:{replica}", value)
    if connected_at is None:
        store.set_meta(HEARTBEAT_BY_KEY, by)
        store.set_meta(HEARTBEAT_KEY, str(now))


def beat_times(value: str | None) -> tuple[float | None, float | None]:
    """(last beat, last connected) from a heartbeat value; None where it holds no time."""
    parts = (value or "").split()
    try:
        times = [float(p) for p in parts[:2]]
    except ValueError:
        return None, None
    if not times:
        return None, None
    return times[0], times[-1]


def holder_alive(store: Store, holder: str | None, claimed_at: float | None, now: datetime, *,
                 me: str) -> bool:
    """Whether the replica holding a claim may still be posting.

    On this host, its pid says (replica ids are host:pid). Elsewhere, its beat says within a
    minute; a process that never beats (`paperclub pick --post`) counts as alive for
    CLAIM_LEASE after its claim.
    """
    if not holder:
        return False
    if holder == me:
        return True
    host, _, rest = holder.partition(":")
    pid_text = rest.partition(":")[0]
    pid = parse_number(pid_text, 1, 2**63)
    if host == socket.gethostname() and pid is not None:
        if pid == os.getpid():
            return False  # our pid under another name: a previous life of this container
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    try:
        beat, _ = beat_times(store.get_meta(f"{HEARTBEAT_KEY}:{holder}"))
    except StoreError:
        beat = None  # cannot tell: the claim's age decides
    if beat is not None:
        return now.timestamp() - beat < ALIVE_SECONDS
    return claimed_at is not None and now.timestamp() - claimed_at < CLAIM_LEASE.total_seconds()


def forget_silent_replicas(store: Store, now: float, *, after: float = FORGET_AFTER) -> int:
    """Drop the rows of replicas silent for `after` seconds (each start of a replica named
    host:pid leaves its own; the sweep on the lease holder tidies them). How many rows went."""
    gone = []
    for key, value in store.meta_items(HEARTBEAT_KEY + ":").items():
        beat, _ = beat_times(value)
        if beat is not None and beat < now - after:
            gone.append(key[len(HEARTBEAT_KEY) + 1:])
    keys = [f"{HEARTBEAT_KEY}:{r}" for r in gone] + [f"{HEARTBEAT_BY_KEY}:{r}" for r in gone]
    keys += [k for k, v in store.meta_items(REPLICA_ON_KEY).items() if v in gone]
    keys += list(store.meta_items("alive:"))  # the second beat of older versions, read by nothing now
    return store.delete_meta(keys)
