"""What a channel keeps: its interests and post schedule, the papers behind the bot's messages,
the reaction log and members' reading lists. SQL both backends share (shared_sql.py says how
it runs); the posts and their claims are in posts.py.
"""
from __future__ import annotations

from typing import Iterable

import numpy as np

from .rows import channel_message_rows, interest_from_row, local_day
from .shared_sql import SQLTables, cursor_dicts


def as_blob(vector) -> bytes:
    """A vector as the float32 bytes the store keeps."""
    return np.asarray(vector, dtype=np.float32).tobytes()


class InterestTables(SQLTables):
    """A channel's interests (with their vectors) and its daily post schedule."""

    _interest = staticmethod(interest_from_row)

    def add_interest(self, channel: str, text: str, added_by: str | None, *, model: str,
                     vector, paper_id: str | None = None, now: float) -> int:
        """Store one channel interest with its embedding; returns its id."""
        with self.transaction() as db:
            return self._run(db, "insert into interests(channel, text, paper_id, added_by, model, vector, "
                                 "created_at) values (?, ?, ?, ?, ?, ?, ?) returning id",
                             [channel, text, paper_id, added_by, model, as_blob(vector), now]).fetchall()[0][0]

    def interests(self, channel: str) -> list[dict]:
        """A channel's interests, oldest first (the order /paper interests numbers them in)."""
        return [self._interest(r) for r in self._select(
            "select * from interests where channel = ? order by created_at, id", [channel])]

    def remove_interest(self, channel: str, interest_id: int) -> dict | None:
        """Delete one interest of this channel; returns it, or None if there was none."""
        with self.transaction() as db:
            rows = cursor_dicts(self._run(db, "delete from interests where channel = ? and id = ? returning *",
                                          [channel, interest_id]))
            return self._interest(rows[0]) if rows else None

    def set_interest_vectors(self, rows: Iterable[tuple[int, str, np.ndarray]]) -> None:
        """Replace interest embeddings (id, model, vector) after a model change."""
        with self.transaction() as db:
            for iid, model, v in rows:
                self._run(db, "update interests set model = ?, vector = ? where id = ?", [model, as_blob(v), iid])

    def set_schedule(self, channel: str, *, hour: int, minute: int, tz: str, days: str,
                     set_by: str | None, now: float) -> None:
        """Create or replace a channel's post schedule."""
        with self.transaction() as db:
            self._run(db, "insert into schedules(channel, hour, minute, tz, days, set_by, updated_at) "
                          "values (?, ?, ?, ?, ?, ?, ?) on conflict(channel) do update set "
                          "hour = excluded.hour, minute = excluded.minute, tz = excluded.tz, days = excluded.days, "
                          "set_by = excluded.set_by, updated_at = excluded.updated_at",
                      [channel, hour, minute, tz, days, set_by, now])
            self._bump(db, "schedules_version")

    def delete_schedule(self, channel: str) -> bool:
        """Turn a channel's daily post off; False when it had none."""
        with self.transaction() as db:
            gone = self._run(db, "delete from schedules where channel = ?", [channel]).rowcount
            if gone:
                self._bump(db, "schedules_version")
            return bool(gone)

    def get_schedule(self, channel: str) -> dict | None:
        rows = self._select("select * from schedules where channel = ?", [channel])
        return rows[0] if rows else None

    def schedules(self) -> list[dict]:
        """Every channel's schedule (the scheduler is rebuilt from these)."""
        return self._select("select * from schedules order by channel")


class MessageTables(SQLTables):
    """The papers behind the bot's messages (daily posts, shares) and what members did with
    them (the reaction log, reading lists)."""

    def record_message_paper(self, channel: str, ts: str, paper_id: str, *, kind: str,
                             posted_by: str | None = None, now: float) -> bool:
        """Remember which paper one of the bot's messages shows (shares); False if already known."""
        with self.transaction() as db:
            return self._run(db, "insert into message_papers(channel, ts, paper_id, kind, posted_by, posted_at) "
                                 "values (?, ?, ?, ?, ?, ?) on conflict(channel, ts) do nothing",
                             [channel, ts, paper_id, kind, posted_by, now]).rowcount == 1

    def paper_for_message(self, channel: str, ts: str) -> dict | None:
        """{paper_id, kind, posted_at} for a bot message (daily post, its abstract reply, a share)."""
        row = self._select_one("select paper_id, posted_at from posts where channel = ? "
                               "and (ts = ? or abstract_ts = ?) and paper_id is not null", [channel, ts, ts])
        if row:
            return {"paper_id": row[0], "kind": "daily", "posted_at": row[1]}
        row = self._select_one("select paper_id, kind, posted_at from message_papers where channel = ? and ts = ?",
                               [channel, ts])
        return {"paper_id": row[0], "kind": row[1], "posted_at": row[2]} if row else None

    def channel_messages(self, channel: str, *, since: float, until: float, tz: str = "UTC") -> list[dict]:
        """The bot's paper messages in a channel from [since, until), in posting order.

        A daily post counts by its date (the channel's, in `tz`) as well as its posted_at, so a
        post made for a date (a catch-up, a test clock) lands in that date's window.
        """
        daily = self._select_tuples(
            "select ts, paper_id, posted_at, day, abstract_ts from posts where channel = ? "
            "and status = 'posted' and paper_id is not null and ts is not null "
            "and ((posted_at >= ? and posted_at < ?) or (day >= ? and day <= ?))",
            [channel, since, until, local_day(since, tz), local_day(until, tz)])
        shares = self._select_tuples(
            "select ts, paper_id, kind, posted_at, posted_by from message_papers where channel = ? "
            "and posted_at >= ? and posted_at < ?", [channel, since, until])
        return channel_message_rows(list(daily), list(shares))

    _REACTION_COLUMNS = ("event_id", "channel", "message_ts", "paper_id", "user", "emoji", "base", "action",
                         "event_ts", "event_time", "recorded_at")

    def add_reaction(self, row: dict) -> bool:
        """Append one reaction event to the log; False when its event_id is already there."""
        cols = self._REACTION_COLUMNS
        names = ", ".join(f'"{c}"' for c in cols)
        with self.transaction() as db:
            return self._run(db, f"insert into reactions({names}) values ({', '.join('?' * len(cols))}) "
                                 "on conflict(event_id) do nothing", [row.get(c) for c in cols]).rowcount == 1

    def reactions(self, *, channel: str | None = None, user: str | None = None,
                  paper_ids: Iterable[str] | None = None, before: float | None = None) -> list[dict]:
        """Reaction log rows (added and removed), in the order they happened."""
        sql, args = "select * from reactions where true", []
        if channel is not None:
            sql += " and channel = ?"
            args.append(channel)
        if user is not None:
            sql += ' and "user" = ?'
            args.append(user)
        if before is not None:
            sql += " and event_ts < ?"
            args.append(before)
        if paper_ids is not None:
            ids = list(dict.fromkeys(paper_ids))
            if not ids:
                return []
            test, in_args = self._in(ids)
            sql += f" and paper_id{test}"
            args += in_args
        return self._select(sql + " order by event_ts, id", args)

    def reaction_channels(self) -> list[str]:
        """Channels with at least one logged reaction."""
        return [r[0] for r in self._select_tuples("select distinct channel from reactions order by channel")]

    def save_paper(self, user: str, paper_id: str, *, source: str = "button", now: float) -> bool:
        """Put a paper on a member's reading list; False when it was already there.

        A Save click makes the entry the member's own choice ("button"), so taking a
        👀 off later does not remove it.
        """
        with self.transaction() as db:
            if self._run(db, 'insert into saved_papers("user", paper_id, source, saved_at) values (?, ?, ?, ?) '
                             "on conflict do nothing", [user, paper_id, source, now]).rowcount == 1:
                return True
            if source == "button":
                self._run(db, "update saved_papers set source = 'button' "
                              "where \"user\" = ? and paper_id = ? and source != 'button'", [user, paper_id])
            return False

    def unsave_paper(self, user: str, paper_id: str, *, source: str | None = None) -> bool:
        """Take a paper off a reading list (only if it was saved that way, when `source` is given)."""
        sql, args = 'delete from saved_papers where "user" = ? and paper_id = ?', [user, paper_id]
        if source is not None:
            sql += " and source = ?"
            args.append(source)
        with self.transaction() as db:
            return self._run(db, sql, args).rowcount > 0

    def saved_papers(self, user: str) -> list[dict]:
        """A member's reading list, newest first: {paper_id, source, saved_at}."""
        return self._select('select paper_id, source, saved_at from saved_papers where "user" = ? '
                            f"order by saved_at desc, {self._SEQ} desc", [user])
