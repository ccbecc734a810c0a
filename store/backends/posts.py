"""Posts and their claims, written once for both backends: one row per (channel, key) in `posts`
(m010_one_claims_table). The daily paper's key is its date (kind 'daily', one per channel and
day); a club post's key is '<step>:<session date>' and the presenter's DM
'presenter:<date>:<member tag>'. bot/posting.py is the one machine that claims, takes over,
finishes and fails these rows; the states are store.posts.PostStatus.

The SQL is standard (ON CONFLICT, IS NOT DISTINCT FROM) that SQLite 3.39+ and PostgreSQL run
as written; shared.py mixes it into both backends (shared_sql.py says how it runs).
"""
from __future__ import annotations

import json

from .rows import post_from_row
from .shared_sql import SQLTables

DAILY = "daily"  # posts.kind of the paper of the day


# The one claims table and its constraints (m010_one_claims_table on both backends).
POSTS_TABLE = """create table {name} (
    channel text not null, key text not null, kind text not null default 'daily', day text,
    status text not null, paper_id text, pick text, claimed_by text, claimed_at double precision,
    attempts integer, error text, ts text, abstract_ts text, posted_at double precision,
    primary key (channel, key),
    check (kind != 'daily' or day = key))"""
POSTS_INDEXES = (
    # One paper of the day per channel and day, and a paper is the paper of the day once per channel.
    "create unique index posts_daily on posts(channel, day) where kind = 'daily'",
    "create unique index posts_channel_paper on posts(channel, paper_id) where paper_id is not null",
    "create index posts_channel_ts on posts(channel, ts)",
)


class PostClaims(SQLTables):
    """Mixin: the posts methods of the Store protocol, claims included."""

    def _post_rows(self, sql: str, args: list) -> list[dict]:
        return [post_from_row(r) for r in self._rows(self._q(sql), args)]

    def claim_post(self, channel: str, key: str, *, claimer: str, now: float, kind: str = DAILY,
                   paper_id: str | None = None, pick: dict | None = None, status: str = "claimed") -> bool:
        """Claim (channel, key) for posting; exactly one caller ever gets True.

        The primary key is the arbiter (and, for a daily post, the paper: a paper is the
        paper of the day once per channel): every process tries the insert, one gets through.
        """
        with self.transaction() as db:
            return db.execute(self._q(
                "insert into posts(channel, key, kind, day, status, paper_id, pick, claimed_by, claimed_at, "
                "attempts) values (?, ?, ?, ?, ?, ?, ?, ?, ?, 0) on conflict do nothing"),
                [channel, key, kind, key if kind == DAILY else None, status, paper_id,
                 json.dumps(pick, ensure_ascii=False) if pick else None, claimer, now]).rowcount == 1

    def take_over_post(self, channel: str, key: str, *, status: str, old_claimer: str | None,
                       claimed_at: float | None, claimer: str, now: float) -> float | None:
        """Re-claim an unfinished row by compare-and-swap; the new claimed_at for one caller only, else None.

        The row must still hold exactly the status, claimer and claimed_at the caller read:
        a retry by the same claimer re-claims too, so two processes can never both think
        they hold it. The new claimed_at always differs from the old one.
        """
        new_at = now if claimed_at is None or now > claimed_at else claimed_at + 0.001
        with self.transaction() as db:
            cur = db.execute(self._q(
                "update posts set claimed_by = ?, claimed_at = ?, status = 'claimed', "
                "attempts = coalesce(attempts, 0) + 1 "
                "where channel = ? and key = ? and status = ? and status in ('claimed', 'failed') "
                "and claimed_by is not distinct from ? and claimed_at is not distinct from ?"),
                [claimer, new_at, channel, key, status, old_claimer, claimed_at])
            return new_at if cur.rowcount == 1 else None

    def get_post(self, channel: str, key: str) -> dict | None:
        rows = self._post_rows("select * from posts where channel = ? and key = ?", [channel, key])
        return rows[0] if rows else None

    def finish_post(self, channel: str, key: str, *, claimer: str, ts: str, now: float, claimed_at: float) -> bool:
        """Record that Slack took the post (its ts); False if the claim is no longer ours: only the
        claim `claimer` made at `claimed_at` (take_over_post's answer, or the claim's `now`) counts."""
        with self.transaction() as db:
            return db.execute(self._q(
                "update posts set status = 'posted', ts = ?, posted_at = ?, error = null "
                "where channel = ? and key = ? and claimed_by = ? and claimed_at = ? and status != 'posted'"),
                [ts, now, channel, key, claimer, claimed_at]).rowcount == 1

    def fail_post(self, channel: str, key: str, *, claimer: str, error: str, claimed_at: float) -> None:
        """Give up for now, on the claim made at `claimed_at` only: the claimer's next try (or, once
        it is gone, another process) re-claims it."""
        with self.transaction() as db:
            db.execute(self._q(
                "update posts set status = 'failed', error = ? "
                "where channel = ? and key = ? and claimed_by = ? and claimed_at = ? and status = 'claimed'"),
                [error, channel, key, claimer, claimed_at])

    def miss_post(self, channel: str, key: str, *, claimed_at: float | None) -> bool:
        """A failed daily post whose day is over and that Slack never took: 'missed', its paper (and
        runners-up) no longer counted as shown. Only the failed claim made at `claimed_at` (a retry
        that re-claimed it meanwhile keeps it); True if this call changed it."""
        with self.transaction() as db:
            return db.execute(self._q(
                "update posts set status = 'missed', paper_id = null "
                "where channel = ? and key = ? and kind = 'daily' and status = 'failed' "
                "and claimed_at is not distinct from ?"), [channel, key, claimed_at]).rowcount == 1

    def set_post_abstract(self, channel: str, key: str, ts: str) -> None:
        """Keep the ts of the daily post's abstract reply (or the 'nothing left' notice) with its row."""
        with self.transaction() as db:
            db.execute(self._q("update posts set abstract_ts = ? where channel = ? and key = ?"), [ts, channel, key])

    def set_post_permalink(self, channel: str, key: str, ts: str, link: str) -> bool:
        """Keep the permalink Slack gave for the post's message `ts` with its row (for that ts only);
        a cache: False, skipped, when the database is busy or read-only (the next ask asks Slack)."""
        return self._cache_write("update posts set permalink = ? where channel = ? and key = ? and ts = ?",
                                [link, channel, key, ts])

    # -- the daily posts as a history ----------------------------------------------------------
    def post_history(self, channel: str) -> list[dict]:
        """Every day this channel was (or is being) shown a paper, oldest first."""
        return self._post_rows("select * from posts where channel = ? and kind = 'daily' "
                               "and paper_id is not null order by day", [channel])

    def post_days(self, channel: str, since: str) -> dict[str, str]:
        """day -> status for this channel's daily post rows on or after `since`."""
        return {r["day"]: r["status"] for r in self._rows(self._q(
            "select day, status from posts where channel = ? and kind = 'daily' and day >= ?"), [channel, since])}

    def previous_post(self, channel: str, before: str) -> dict | None:
        """The latest posted day before `before` (for 'how the team reacted')."""
        rows = self._post_rows("select * from posts where channel = ? and kind = 'daily' and day < ? "
                               "and status = 'posted' order by day desc limit 1", [channel, before])
        return rows[0] if rows else None

    def post_for_message(self, channel: str, ts: str) -> dict | None:
        """The daily post a Slack message ts belongs to (reactions are keyed by it)."""
        rows = self._post_rows("select * from posts where channel = ? and ts = ? and kind = 'daily'", [channel, ts])
        return rows[0] if rows else None

