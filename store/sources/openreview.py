"""OpenReview API v2: a venue's notes (by content.venueid or by invitation), paged -> ingest records.

Plain HTTP and a small parser rather than openreview-py: we read public notes
only, and the client would bring its own HTTP stack, retries and a dozen
dependencies where our Fetcher already does the politeness.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timezone

from ..ingest import Record
from .http import Fetcher, SourceError

DEFAULT_API = "https://api2.openreview.net"
MIN_INTERVAL = 1.0
PAGE_SIZE = 1000
NEWEST_FIRST = "tmdate:desc"  # a note's last change (true modification date): a decision is one too
_FORUM_URL = re.compile(r"openreview\.net/(?:forum|pdf)\?(?:.*&)?id=([\w-]+)", re.I)
_FORUM_ID = re.compile(r"^[A-Za-z0-9_-]{8,16}$")
# Path segments that start with a letter or digit ('..' and '.' are not), or the '-' of an
# invitation ('ICLR.cc/2026/Conference/-/Submission').
_VENUE = re.compile(r"^[A-Za-z0-9][\w.-]*(/(?:[A-Za-z0-9][\w.-]*|-))+$", re.ASCII)


def parse_forum(text: str) -> str | None:
    """An openreview.net forum/pdf URL, or a bare forum id -> the forum id; else None."""
    text = (text or "").strip().strip("<>")
    m = _FORUM_URL.search(text)
    if m:
        return m.group(1)
    # A bare word ("attention", "Attention") is not an id: real ids mix cases within the word
    # ("rJxbJeHFPS") or digits with letters ("pTyGJMuHb7").
    mixed = (any(c.isupper() for c in text[1:]) and any(c.islower() for c in text)) or (
        any(c.isdigit() for c in text) and any(c.isalpha() for c in text))
    return text if _FORUM_ID.match(text) and mixed else None


def valid_venue(text: str) -> bool:
    """'ICLR.cc/2026/Conference' (a venue id or an invitation prefix)."""
    return bool(_VENUE.match(text or ""))


def _value(content: dict, name: str):
    field = content.get(name)
    return field.get("value") if isinstance(field, dict) else field


def _text(value) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def _strings(value) -> list[str]:
    """A list of plain strings (authors, keywords); anything else in it is dropped, not rendered."""
    return [v.strip() for v in value if isinstance(v, str) and v.strip()] if isinstance(value, list) else []


def _seconds(ms) -> float | None:
    """OpenReview's milliseconds as epoch seconds; None for anything that is not a plausible time."""
    if isinstance(ms, bool) or not isinstance(ms, (int, float)) or not 0 < ms < 1e14:  # 1e14 ms: year 5138
        return None
    return ms / 1000


def _ms(ms) -> int | None:
    """A plausible OpenReview time in milliseconds, as it came; None for anything else."""
    return int(ms) if _seconds(ms) is not None else None


def _year(ms) -> int | None:
    at = _seconds(ms)
    return datetime.fromtimestamp(at, timezone.utc).year if at is not None else None


def note_record(note: dict) -> Record | None:
    """One note as an ingest record; None for a note with no abstract (withdrawn, desk-rejected stubs)."""
    content = note.get("content") or {}
    if not isinstance(content, dict):
        raise SourceError(f"OpenReview: note {str(note.get('id'))[:40]!r} has content that is not an object")
    forum = note.get("forum") or note.get("id")
    abstract, title = _text(_value(content, "abstract")), _text(_value(content, "title"))
    if not isinstance(forum, str) or not _FORUM_ID.match(forum) or not abstract:
        return None
    venue = _text(_value(content, "venue")) or _text(_value(content, "venueid")) or _text(note.get("domain"))
    return Record(
        abstract=re.sub(r"\s+", " ", abstract).strip(),
        title=re.sub(r"\s+", " ", title).strip() if title else None,
        id=f"https://openreview.net/forum?id={forum}",
        url=f"https://openreview.net/forum?id={forum}",
        authors=_strings(_value(content, "authors")),
        venue=venue.strip() if venue else None,
        year=_year(note.get("pdate") or note.get("cdate")),
        keywords=_strings(_value(content, "keywords")),
        source="openreview",
    )


@dataclass
class NotesPage:
    records: list[Record]
    count: int
    notes: int  # notes on the page, with or without an abstract: what the offset advances by
    dates: dict[str, float]  # forum id -> pdate (or cdate), epoch seconds
    changed: tuple[int, int] | None = None  # (oldest, newest) tmdate on the page, ms; None when none has one


def parse_notes(text: str, what: str = "OpenReview") -> NotesPage:
    """One page of notes; SourceError for anything not of the documented shape."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise SourceError(f"{what}: not a whole JSON page ({e.msg})") from None
    except RecursionError:  # nested deeper than the parser goes: no real page is
        raise SourceError(f"{what}: JSON nested too deep") from None
    if not isinstance(data, dict) or not isinstance(data.get("notes"), list):
        raise SourceError(f"{what}: expected {{'notes': [...], 'count': N}}")
    records, dates, changed = [], {}, []
    for note in data["notes"]:
        if not isinstance(note, dict):
            raise SourceError(f"{what}: a note is not an object")
        if (tm := _ms(note.get("tmdate"))) is not None:
            changed.append(tm)
        rec = note_record(note)
        if rec:
            records.append(rec)
            at = _seconds(note.get("pdate") or note.get("cdate"))
            if at is not None:
                dates[rec.url.rsplit("=", 1)[-1]] = at
    count = data.get("count")
    count = count if isinstance(count, int) and not isinstance(count, bool) and count >= 0 else len(data["notes"])
    return NotesPage(records, count, len(data["notes"]), dates, (min(changed), max(changed)) if changed else None)


def venue_params(venue: str) -> dict:
    """Notes of a venue: an invitation ('…/-/Submission') is asked as such, anything else as content.venueid."""
    return {"invitation": venue} if "/-/" in venue else {"content.venueid": venue}


def note_pages(fetcher: Fetcher, venue: str, *, offset: int = 0, page_size: int = PAGE_SIZE,
               base: str = DEFAULT_API, until: float | None = None, newest_first: bool = False):
    """(offset, NotesPage) for each page of a venue's notes from `offset` until exhausted (each asked
    by `until` when a member waits: `Fetcher.get`); with `newest_first`, the last changed first."""
    url = base.rstrip("/") + "/notes"
    order = {"sort": NEWEST_FIRST} if newest_first else {}
    while True:
        resp = fetcher.get(url, {**venue_params(venue), **order, "limit": page_size, "offset": offset},
                           until=until)
        if resp.status_code >= 400:
            raise SourceError(f"OpenReview answered HTTP {resp.status_code} for {venue!r}")
        page = parse_notes(resp.text)
        yield offset, page
        offset += page.notes
        if page.notes == 0 or offset >= page.count:
            return


def venue_exists(fetcher: Fetcher, venue: str, *, base: str = DEFAULT_API, until: float | None = None) -> bool:
    """Whether OpenReview has this venue (its group) or invitation, notes or none: a conference's group
    is there months before its accepted papers are. NotFoundError (HTTP 404) or an empty list: no."""
    kind = "invitations" if "/-/" in venue else "groups"
    resp = fetcher.get(f"{base.rstrip('/')}/{kind}", {"id": venue}, until=until)
    if resp.status_code >= 400:
        return False
    try:
        data = json.loads(resp.text)
    except (json.JSONDecodeError, RecursionError):
        raise SourceError(f"OpenReview: the {kind} answer is not a whole JSON page") from None
    found = data.get(kind) if isinstance(data, dict) else None
    if not isinstance(found, list):
        raise SourceError(f"OpenReview: expected {{'{kind}': [...]}}")
    return any(isinstance(g, dict) and g.get("id") == venue for g in found)


def fetch_forum(fetcher: Fetcher, forum: str, *, base: str = DEFAULT_API,
                until: float | None = None) -> Record | None:
    """The paper of one forum, or None when OpenReview does not know it (asked by `until`: `Fetcher.get`)."""
    resp = fetcher.get(base.rstrip("/") + "/notes", {"id": forum}, until=until)
    if resp.status_code >= 400:
        return None
    page = parse_notes(resp.text)
    return page.records[0] if page.records else None
