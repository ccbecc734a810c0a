"""Rows to records and back, the same for every backend: the Python half of methods whose
SQL differs by engine (papers, posts, interests, a channel's messages, forgetting a member,
source cursors, the club's writable fields)."""
from __future__ import annotations

import json
import re
from datetime import datetime
from zoneinfo import ZoneInfo

import numpy as np

from ..paper import Paper

JSON_FIELDS = ("authors", "keywords", "code_urls", "numbers")
MEMBER_ID = re.compile(r"\b[UW][A-Z0-9]+\b")  # member ids a text (a stored pick, a claim key) may hold
# The columns set_club and put_club_session may write (the names go into SQL: checked first).
CLUB_FIELDS = ("weekday", "hour", "minute", "tz", "cadence", "anchor", "lead_hours", "cutoff_hours",
               "mode", "active")
SESSION_FIELDS = ("state", "paper_id", "presenter", "nominator", "thread_ts", "agenda_ts", "votes", "tiebreak",
                  "chosen")


def paper_from_row(row: dict) -> Paper:
    """A papers row (JSON list columns as text) as a Paper."""
    fields = {k: row.get(k) for k in (
        "id", "short_name", "headline", "abstract", "collection", "year", "title", "url", "raw")}
    for k in JSON_FIELDS:
        fields[k] = json.loads(row.get(k) or "[]")
    fields["collection"] = fields["collection"] or ""
    fields["raw"] = fields["raw"] or ""
    return Paper(**fields)


def interest_from_row(row: dict) -> dict:
    """An interests row with its vector as float32 (None when it has none)."""
    row = dict(row)
    blob = row.pop("vector", None)
    row["vector"] = np.frombuffer(bytes(blob), dtype=np.float32) if blob else None
    return row


def post_from_row(row: dict) -> dict:
    """A posts row with its pick decoded."""
    row = dict(row)
    row["pick"] = json.loads(row["pick"]) if row.get("pick") else None
    return row


def local_day(t: float, tz: str = "UTC") -> str:
    """The date of epoch seconds t in zone `tz`, clamped to datetime's range (for 0 and inf)."""
    t = min(max(t, 0.0), 253402214400.0)
    return datetime.fromtimestamp(t, ZoneInfo(tz)).date().isoformat()


def channel_message_rows(daily: list[tuple], shares: list[tuple]) -> list[dict]:
    """channel_messages' answer from (ts, paper_id, posted_at, day, abstract_ts) daily posts and
    (ts, paper_id, kind, posted_at, posted_by) shares, in posting order."""
    rows = [{"ts": ts, "paper_id": pid, "kind": "daily", "posted_at": at, "posted_by": None, "day": day,
             "abstract_ts": abstract} for ts, pid, at, day, abstract in daily]
    rows += [{"ts": ts, "paper_id": pid, "kind": kind, "posted_at": at, "posted_by": by, "day": None,
              "abstract_ts": None} for ts, pid, kind, at, by in shares]
    # Slack's message ts is the time it was posted, whatever clock wrote posted_at.
    return sorted(rows, key=lambda r: (float(r["ts"]), r["ts"]))


def pick_without(pick: str, user: str) -> str | None:
    """A stored pick (JSON) with this member taken off its choice and runners-up, their fields
    and their texts ("which got 🔥 from @UDAN"); None when the member was not in it."""
    data = json.loads(pick)
    named = re.compile(rf"@?\b{re.escape(user)}\b")
    changed = False
    for c in [data.get("choice") or {}, *(data.get("runners_up") or [])]:
        for key in ("added_by", "member"):
            if c.get(key) == user:
                c[key] = None
                changed = True
        for key, value in list(c.items()):
            if isinstance(value, str) and named.search(value):
                c[key] = named.sub("a member", value)
                changed = True
    return json.dumps(data, ensure_ascii=False) if changed else None


def paper_signal(code_urls: str | None, numbers: str | None) -> float:
    """The prior of a paper without feedback: has code (0.5), reports numbers (0.5)."""
    return 0.5 * (code_urls not in (None, "", "[]")) + 0.5 * (numbers not in (None, "", "[]"))


def newer_schema_line(where: str, applied: set[str], known: list[str]) -> str | None:
    """One line naming both versions when a newer paperclub migrated the database (it applied
    migrations this one does not know); None when it did not."""
    unknown = sorted(applied - set(known))
    if not unknown:
        return None
    return (f"database {where} is at schema {len(applied)} ({unknown[-1]}), from a newer paperclub; "
            f"this one knows schema {len(known)} ({known[-1]}). Upgrade paperclub, or use a backup "
            "made by this version.")


def older_schema_line(where: str, applied: int, known: int) -> str | None:
    """One line for a database opened read-only at a schema older than this code's, which it
    cannot migrate; None when it is current (or newer: newer_schema_line says that)."""
    if applied >= known:
        return None
    return (f"database {where} is at schema {applied}, older than this paperclub's schema {known}, and "
            "cannot be migrated: it is read-only here (a standby, a read-only role or volume). Run "
            "paperclub once against the primary (or a writable copy) to migrate it, or use the paperclub "
            "version that made it.")


def source_from_row(row: dict) -> dict:
    """A source_state row with its cursor decoded ({} before the first page)."""
    return {**row, "cursor": json.loads(row["cursor"]) if row.get("cursor") else {}}
