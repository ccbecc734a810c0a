"""Fresh-paper sources (cursors and health, announcements, channels' feeds) and the reading
group's tables (store/club.py holds the logic): SQL both backends share (shared_sql.py
says how it runs).
"""
from __future__ import annotations

import json
from typing import Iterable, Sequence

from ..errors import StoreError
from .rows import CLUB_FIELDS, SESSION_FIELDS, source_from_row
from .shared_sql import SQLTables, cursor_dicts

ANNOUNCE_BATCH = 1000  # rows per insert of mark_announced (3 parameters each)


class SourceTables(SQLTables):
    """Each source's cursor and health, when papers were announced, and channels' feeds."""

    def source_state(self, source: str) -> dict | None:
        rows = self._select("select * from source_state where source = ?", [source])
        return source_from_row(rows[0]) if rows else None

    def source_states(self) -> list[dict]:
        return [source_from_row(r) for r in self._select("select * from source_state order by source")]

    def update_source(self, source: str, *, now: float, cursor: dict | None = None,
                      ok: bool | None = None, error: str | None = None, papers: int | None = None) -> None:
        """Set a source's cursor and/or record a success (clears the failure) or an error; `papers`:
        how many its latest read brought that it had not announced before (None: left as it was)."""
        with self.transaction() as db:
            self._run(db, "insert into source_state(source, cursor, updated_at) values (?, '{}', ?) "
                          "on conflict do nothing", [source, now])
            if cursor is not None:
                self._run(db, "update source_state set cursor = ?, updated_at = ? where source = ?",
                          [json.dumps(cursor, sort_keys=True), now, source])
            if ok:
                self._run(db, "update source_state set last_success = ?, failing_since = null, updated_at = ? "
                              "where source = ?", [now, now, source])
            if papers is not None:
                self._run(db, "update source_state set last_papers = ? where source = ?", [papers, source])
            if error is not None:
                self._run(db, "update source_state set last_error = ?, last_error_at = ?, "
                              "failing_since = coalesce(failing_since, ?), updated_at = ? where source = ?",
                          [error[:500], now, now, now, source])

    def mark_announced(self, rows: Iterable[tuple[str, str, float]]) -> int:
        """(paper id, source, announced at): the first announcement per source is kept."""
        rows = list(rows)
        if not rows:
            return 0
        added = 0
        with self.transaction() as db:
            # One statement per batch (executemany's rowcount is not a total on every driver);
            # DO NOTHING also keeps the first of two rows for one (paper, source) in a batch.
            for i in range(0, len(rows), ANNOUNCE_BATCH):
                batch = rows[i : i + ANNOUNCE_BATCH]
                added += self._run(db, "insert into paper_announcements(paper_id, source, announced_at) values "
                                       + ", ".join(["(?, ?, ?)"] * len(batch)) + " on conflict do nothing",
                                   [v for pid, src, at in batch for v in (pid, src, float(at))]).rowcount
        return added

    def announced_since(self, since: float, sources: Iterable[str] | None = None) -> dict[str, float]:
        """Paper id -> its earliest announcement at or after `since` (by these sources, if given)."""
        sql, args = "select paper_id, min(announced_at) from paper_announcements where announced_at >= ?", [since]
        if sources is not None:
            sources = list(sources)
            if not sources:
                return {}
            test, in_args = self._in(sources)
            sql += f" and source{test}"
            args += in_args
        return dict(self._select_tuples(sql + " group by paper_id", args))

    def add_feed(self, channel: str, kind: str, target: str, added_by: str | None, *, now: float) -> int | None:
        """The new feed's id; None when the channel already follows it."""
        with self.transaction() as db:
            rows = self._run(db, "insert into feeds(channel, kind, target, added_by, created_at) "
                                 "values (?, ?, ?, ?, ?) on conflict do nothing returning id",
                             [channel, kind, target, added_by, now]).fetchall()
            return rows[0][0] if rows else None

    def feeds(self, channel: str | None = None) -> list[dict]:
        if channel is None:
            return self._select("select * from feeds order by id")
        return self._select("select * from feeds where channel = ? order by id", [channel])

    def remove_feed(self, channel: str, feed_id: int) -> dict | None:
        with self.transaction() as db:
            rows = cursor_dicts(self._run(db, "delete from feeds where channel = ? and id = ? returning *",
                                          [channel, feed_id]))
            return rows[0] if rows else None


class ClubTables(SQLTables):
    """The reading group: a channel's club, members and aways, sessions, nominations, votes."""

    def _lock(self, db, *name: str) -> None:
        """Writers of the same name queue, inside the caller's transaction. SQLite has one
        writer at a time already; PostgreSQL takes an advisory lock."""

    def set_club(self, channel: str, *, set_by: str | None, now: float,
                 moves: Sequence[tuple[str, str]] = (), **fields) -> None:
        """Create or change a channel's club (fields from CLUB_FIELDS), and in the same transaction move
        the ballots of the sessions the change no longer holds: `moves`, (session, to_session) pairs,
        each as a skip carries one (not carried: no unskip brings them back). A failure or a busy
        database leaves neither done, so the retry still finds the old setup to move them from."""
        unknown = set(fields) - set(CLUB_FIELDS)
        if unknown:
            raise StoreError(f"unknown club fields {sorted(unknown)}")
        # Column names below come only from CLUB_FIELDS (checked above).
        with self.transaction() as db:
            # Two first set-ups of one channel at once: the second waits, then updates,
            # instead of failing on the primary key.
            self._lock(db, "club", channel)
            if self._run(db, "select 1 from clubs where channel = ?", [channel]).fetchall():
                sets = "".join(f"{k} = ?, " for k in fields)
                self._run(db, f"update clubs set {sets}set_by = ?, updated_at = ? where channel = ?",
                          [*fields.values(), set_by, now, channel])
            else:
                cols = ["channel", *fields, "set_by", "updated_at"]
                self._run(db, f"insert into clubs({', '.join(cols)}) values ({', '.join('?' * len(cols))})",
                          [channel, *fields.values(), set_by, now])
            for session, to_session in moves:
                self._move_ballot(db, channel, session, to_session)

    def get_club(self, channel: str) -> dict | None:
        rows = self._select("select * from clubs where channel = ?", [channel])
        return rows[0] if rows else None

    def clubs(self) -> list[dict]:
        return self._select("select * from clubs where active = 1 order by channel")

    def set_club_member(self, channel: str, user: str, *, active: bool, now: float) -> bool:
        """Join (active) or leave the rotation; False when nothing changed (leaving a rotation one
        was never in writes no row)."""
        with self.transaction() as db:
            if not active:
                return self._run(db, 'update club_members set active = 0 where channel = ? and "user" = ? '
                                     "and active = 1", [channel, user]).rowcount == 1
            return self._run(db, 'insert into club_members(channel, "user", active, joined_at) values (?, ?, 1, ?) '
                                 'on conflict(channel, "user") do update set active = 1 '
                                 "where club_members.active = 0", [channel, user, now]).rowcount == 1

    def club_members(self, channel: str, *, active_only: bool = True) -> list[dict]:
        sql = "select * from club_members where channel = ?" + (" and active = 1" if active_only else "")
        return self._select(sql + ' order by joined_at, "user"', [channel])

    def add_club_away(self, channel: str, user: str, start: str, end: str, *, now: float) -> int:
        with self.transaction() as db:
            return self._run(db, 'insert into club_aways(channel, "user", start, "end", added_at) '
                                 "values (?, ?, ?, ?, ?) returning id", [channel, user, start, end, now]).fetchall()[0][0]

    def club_aways(self, channel: str) -> list[dict]:
        return self._select("select * from club_aways where channel = ? order by start, id", [channel])

    def put_club_session(self, channel: str, date: str, *, now: float, **fields) -> None:
        """Create or update one session row (state, paper_id, presenter, thread_ts, ...)."""
        unknown = set(fields) - set(SESSION_FIELDS)
        if unknown:
            raise StoreError(f"unknown session fields {sorted(unknown)}")
        with self.transaction() as db:
            self._run(db, "insert into club_sessions(channel, date, state, updated_at) "
                          "values (?, ?, 'planned', ?) on conflict do nothing", [channel, date, now])
            if fields:  # names checked against SESSION_FIELDS above
                sets = ", ".join(f"{k} = ?" for k in fields)
                self._run(db, f"update club_sessions set {sets}, updated_at = ? where channel = ? and date = ?",
                          [*fields.values(), now, channel, date])

    def get_club_session(self, channel: str, date: str) -> dict | None:
        rows = self._select("select * from club_sessions where channel = ? and date = ?", [channel, date])
        return rows[0] if rows else None

    def club_sessions(self, channel: str) -> list[dict]:
        return self._select("select * from club_sessions where channel = ? order by date", [channel])

    def add_nomination(self, channel: str, session: str, paper_id: str, user: str, *, now: float) -> bool:
        """Put a paper on a session's list; False when it is already there (the first nominator keeps it)."""
        with self.transaction() as db:
            return self._run(db, 'insert into club_nominations(channel, session, paper_id, "user", nominated_at) '
                                 "values (?, ?, ?, ?, ?) on conflict do nothing",
                             [channel, session, paper_id, user, now]).rowcount == 1

    def nominations(self, channel: str, session: str | None = None) -> list[dict]:
        """A session's ballot, first nominated first (None: every session's of the channel)."""
        if session is None:
            return self._select("select * from club_nominations where channel = ? "
                                "order by session, nominated_at, paper_id", [channel])
        return self._select("select * from club_nominations where channel = ? and session = ? "
                            "order by nominated_at, paper_id", [channel, session])

    def skip_club_session(self, channel: str, date: str, to_session: str | None, *, now: float) -> dict | None:
        """Cancel a session and move its ballot to `to_session` (the next one; None: nowhere), in one
        transaction: a crash or a busy database leaves both done or neither. Each nomination keeps its
        nominator and time and records the session it was made for (carried_from: kept through a second
        skip); one already on that ballot stays where it was. {"carried": how many
        nominations the next ballot got from it, "votes": how many were cast for it (they stay with
        it)}; None when it was cancelled already (nothing changes)."""
        with self.transaction() as db:
            self._run(db, "insert into club_sessions(channel, date, state, updated_at) "
                          "values (?, ?, 'planned', ?) on conflict do nothing", [channel, date, now])
            # The state test is in the update, so of two skips at once only one finds it planned.
            if not self._run(db, "update club_sessions set state = 'skipped', updated_at = ? "
                                 "where channel = ? and date = ? and state != 'skipped'",
                             [now, channel, date]).rowcount:
                return None
            if to_session is None:
                return {"carried": 0, "votes": 0}
            # Those on both ballots count once, on the next one.
            carried = self._run(db, "select count(*) from club_nominations where channel = ? and session = ?",
                                [channel, date]).fetchone()[0]
            votes = self._run(db, "select count(*) from club_votes where channel = ? and session = ?",
                              [channel, date]).fetchone()[0]
            self._move_ballot(db, channel, date, to_session, carried_from=date)
            return {"carried": carried, "votes": votes}

    def _move_ballot(self, db, channel: str, session: str, to_session: str, *, carried_from: str | None = None) -> int:
        """Each nomination of `session` onto `to_session`'s ballot, keeping its nominator and time (and
        the session it was first made for, else `carried_from`); one already on that ballot stays."""
        return self._run(db, "update club_nominations set session = ?, carried_from = coalesce(carried_from, ?) "
                             "where channel = ? and session = ? "
                             "and paper_id not in (select paper_id from club_nominations "
                             "where channel = ? and session = ?)",
                         [to_session, carried_from, channel, session, channel, to_session]).rowcount

    def unskip_club_session(self, channel: str, date: str, *, now: float) -> dict | None:
        """Hold a cancelled session after all and bring its carried nominations back, in one transaction.

        Back come those a skip carried on from it, or from an earlier cancelled session through it, to
        a later ballot (carried_from at or before it, on a ballot after it), each keeping its nominator
        and time; one whose paper is on its ballot already stays where it is, as do those made for the
        later session itself. Votes cast for the returning papers on the later ballots are withdrawn
        (a vote is for a paper at one session): skip_club_session kept the session's own votes, and
        they count again. {"ballot": how many nominations it has now, "from": the sessions some came
        back from, "votes": how many votes were withdrawn}; None when it was not cancelled."""
        with self.transaction() as db:
            if not self._run(db, "update club_sessions set state = 'planned', updated_at = ? "
                                 "where channel = ? and date = ? and state = 'skipped'",
                             [now, channel, date]).rowcount:
                return None
            carried = self._run(db, "select session, paper_id from club_nominations where channel = ? "
                                    "and carried_from <= ? and session > ? order by session, nominated_at, paper_id",
                                [channel, date, date]).fetchall()
            came_from, votes = set(), 0
            # One at a time, so of two carried copies of one paper only the nearest comes back.
            for session, paper_id in carried:
                if not self._run(db, "update club_nominations set session = ?, carried_from = nullif(carried_from, ?) "
                                     "where channel = ? and session = ? and paper_id = ? and not exists (select 1 "
                                     "from club_nominations where channel = ? and session = ? and paper_id = ?)",
                                 [date, date, channel, session, paper_id, channel, date, paper_id]).rowcount:
                    continue
                came_from.add(session)
                votes += self._run(db, "delete from club_votes where channel = ? and session = ? and paper_id = ?",
                                   [channel, session, paper_id]).rowcount
            ballot = self._run(db, "select count(*) from club_nominations where channel = ? and session = ?",
                               [channel, date]).fetchone()[0]
            return {"ballot": ballot, "from": sorted(came_from), "votes": votes}

    def add_vote(self, channel: str, session: str, user: str, paper_id: str, *, limit: int, now: float) -> str:
        """One approval vote: 'added', 'already' (idempotent) or 'full' (the member used `limit`)."""
        with self.transaction() as db:
            # A member's votes in a session are counted under a lock on (channel, session, user),
            # so two clicks at once cannot both slip under the limit.
            self._lock(db, "club_vote", channel, session, user)
            if self._run(db, 'select 1 from club_votes where channel = ? and session = ? and "user" = ? '
                             "and paper_id = ?", [channel, session, user, paper_id]).fetchall():
                return "already"
            used = self._run(db, 'select count(*) from club_votes where channel = ? and session = ? '
                                 'and "user" = ?', [channel, session, user]).fetchone()[0]
            if used >= limit:
                return "full"
            self._run(db, 'insert into club_votes(channel, session, "user", paper_id, voted_at) '
                          "values (?, ?, ?, ?, ?)", [channel, session, user, paper_id, now])
            return "added"

    def clear_votes(self, channel: str, session: str, user: str) -> int:
        with self.transaction() as db:
            return self._run(db, 'delete from club_votes where channel = ? and session = ? and "user" = ?',
                             [channel, session, user]).rowcount

    def club_votes(self, channel: str, session: str) -> list[dict]:
        return self._select("select * from club_votes where channel = ? and session = ? "
                            'order by voted_at, "user", paper_id', [channel, session])
