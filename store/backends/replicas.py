"""What several bot processes on one database share, written once for both backends: each
Slack event handled by one replica (processed_events) and named leases with an epoch fence
(leases). The SQL is standard upserts both SQLite and PostgreSQL run as written; a backend
mixes this in and says how it writes placeholders, starts a transaction and reads a row.
"""
from __future__ import annotations

from .shared_sql import SQLTables


class ReplicaTables(SQLTables):
    """Mixin: claim_event, the lease methods and the per-replica meta rows of the Store protocol (m006_replicas)."""

    def claim_event(self, event_id: str, *, replica: str, now: float, keep: float = 86_400.0) -> bool:
        """True for the one replica that handles this Slack event; False for every redelivery.

        Records older than `keep` seconds are dropped on the way (Slack retries within minutes).
        """
        with self.transaction() as db:
            db.execute(self._q("delete from processed_events where seen_at < ?"), [now - keep])
            return db.execute(self._q(
                "insert into processed_events(event_id, replica, seen_at) values (?, ?, ?) "
                "on conflict(event_id) do nothing"), [event_id, replica, now]).rowcount == 1

    def acquire_lease(self, name: str, *, holder: str, ttl: float, now: float) -> int | None:
        """Take or renew the lease `name` for ttl seconds; its epoch if we hold it now, else None.

        A live lease is renewed by its holder only; an expired one goes to whoever asks first,
        and every change of hands (or a lapse) raises the epoch, so writes fenced with an old
        epoch are refused (holds_lease).
        """
        with self.transaction() as db:
            row = db.execute(self._q(
                "insert into leases(name, holder, epoch, expires_at) values (?, ?, 1, ?) "
                "on conflict(name) do update set "
                "epoch = case when leases.holder = excluded.holder and leases.expires_at > ? "
                "then leases.epoch else leases.epoch + 1 end, "
                "holder = excluded.holder, expires_at = excluded.expires_at "
                "where leases.holder = excluded.holder or leases.expires_at <= ? returning epoch"),
                [name, holder, now + ttl, now, now]).fetchone()
            return int(row[0]) if row else None

    def release_lease(self, name: str, *, holder: str, epoch: int) -> bool:
        """Give the lease up at once (a clean shutdown); False if it was no longer ours."""
        with self.transaction() as db:
            return db.execute(self._q("update leases set expires_at = 0 where name = ? and holder = ? "
                                      "and epoch = ?"), [name, holder, epoch]).rowcount == 1

    def lease_holder(self, name: str, *, now: float) -> dict | None:
        """{holder, epoch, expires_at} of the live lease `name`, None when nobody holds it."""
        row = self._read_one(self._q("select holder, epoch, expires_at from leases "
                                     "where name = ? and expires_at > ?"), [name, now])
        return {"holder": row[0], "epoch": int(row[1]), "expires_at": row[2]} if row else None

    def holds_lease(self, name: str, *, holder: str, epoch: int, now: float) -> bool:
        """The fence: True only while `holder` holds `name` at this epoch and it has not expired."""
        return self._read_one(self._q("select 1 from leases where name = ? and holder = ? and epoch = ? "
                                      "and expires_at > ?"), [name, holder, epoch, now]) is not None

    # -- a shared clock for polite spacing (arXiv: one request every 3 s, whoever asks) -----------
    def reserve_slot(self, name: str, *, interval: float, now: float, horizon: float = 120.0) -> float:
        """The time (epoch seconds, >= now) at which the caller may send its next request to `name`.

        Atomic across processes and replicas: each call takes the next free slot, `interval`
        after the one before it, so however many ask at once their requests stay spaced. A slot
        more than `horizon` seconds ahead was written by a clock that ran fast: it is let go.
        """
        with self.transaction() as db:
            row = db.execute(self._q(
                "insert into meta(key, value) values (?, ?) on conflict(key) do update set value = "
                "cast(case when cast(meta.value as double precision) + ? between ? and ? "
                "then cast(meta.value as double precision) + ? else ? end as text) returning value"),
                [f"slot:{name}", repr(float(now)), interval, now, now + horizon, interval, now]).fetchone()
            return float(row[0])

    # -- each replica's own meta rows (heartbeats, liveness), read and dropped by prefix ----------
    def meta_items(self, prefix: str) -> dict[str, str]:
        """Every meta row whose key starts with `prefix`, as key -> value."""
        with self.transaction() as db:
            rows = db.execute(self._q("select key, value from meta where substr(key, 1, ?) = ?"),
                              [len(prefix), prefix]).fetchall()
        return {k: v for k, v in rows}

    def delete_meta(self, keys) -> int:
        """Drop these meta rows; how many there were."""
        keys = list(keys)
        if not keys:
            return 0
        with self.transaction() as db:
            return sum(db.execute(self._q("delete from meta where key = ?"), [k]).rowcount for k in keys)

