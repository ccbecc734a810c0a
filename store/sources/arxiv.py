"""arXiv: the Atom API (ids, category + date range) and the daily RSS listings -> ingest records.

Parsed with the standard library's XML parser: a truncated or malformed page
raises (SourceError) instead of yielding the papers before the break, so a page
is taken whole or not at all. (feedparser would have added a dependency whose
forgiving parser is the opposite of what we want here.)
"""
from __future__ import annotations

import difflib
import email.utils
import functools
import hashlib
import logging
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone

from ..ingest import Record
from ..text import parse_number
from .http import Fetcher, SourceError

log = logging.getLogger("paperclub.sources")

DEFAULT_API = "https://export.arxiv.org/api/query"
DEFAULT_RSS = "https://rss.arxiv.org/rss/"
MIN_INTERVAL = 3.0  # arXiv's terms: no more than one request every 3 seconds
MAX_IDS_PER_CALL = 100
KEEP_TYPES = {"new", "cross"}
UPDATE_TYPES = {"replace", "replace-cross"}

NS = {"atom": "http://www.w3.org/2005/Atom", "os": "http://a9.com/-/spec/opensearch/1.1/",
      "arxiv": "http://arxiv.org/schemas/atom", "dc": "http://purl.org/dc/elements/1.1/"}

_NEW_ID = r"\d{4}\.\d{4,5}"
_OLD_ID = r"[a-z][a-z.-]+/\d{7}"
ID_RE = re.compile(rf"^(?:arxiv:\s*)?({_NEW_ID}|{_OLD_ID})(v\d+)?$", re.I | re.ASCII)  # '２５０１…' is no id
_ID_IN_URL = re.compile(rf"arxiv\.org/(?:abs|pdf|html)/({_NEW_ID}|{_OLD_ID})(v\d+)?", re.I | re.ASCII)


def parse_id(text: str) -> str | None:
    """'2501.01234v2', 'arXiv:2501.01234' or an arxiv.org abs/pdf URL -> '2501.01234'; else None."""
    text = (text or "").strip().strip("<>")
    m = ID_RE.match(text) or _ID_IN_URL.search(text)
    return m.group(1).lower() if m else None


@functools.cache
def _taxonomy() -> dict[str, str]:
    """Every arXiv category id and archive (store/data/arxiv_categories.txt), by its lower case."""
    from importlib import resources

    text = resources.files("store").joinpath("data/arxiv_categories.txt").read_text(encoding="utf-8")
    ids = [w for line in text.splitlines() if not line.startswith("#") for w in line.split()]
    return {i.lower(): i for i in ids}


def category(text: str) -> str:
    """The category as arXiv writes it ('cs.lg' -> 'cs.LG'; several joined by '+', as the RSS
    URLs take them); SourceError, with the nearest real one, for a category arXiv does not have."""
    known = _taxonomy()
    out = []
    for part in (text or "").strip().split("+"):
        found = known.get(part.strip().lower())
        if found is None:
            close = difflib.get_close_matches(part.strip().lower(), list(known), n=1, cutoff=0.6)
            hint = f" Did you mean {known[close[0]]}?" if close else ""
            raise SourceError(f"{part.strip()!r} is not an arXiv category (e.g. cs.LG, or cs.CV+cs.CL).{hint}")
        if found not in out:
            out.append(found)
    return "+".join(out)


def _squash(text: str | None) -> str:
    return re.sub(r"\s+", " ", text or "").strip()


def record(arxiv_id: str, *, title: str, abstract: str, authors: list[str], categories: list[str],
           primary: str | None, published: str | None, doi: str | None = None, source: str = "arxiv") -> Record:
    """The ingest record of one arXiv paper (no version: a new version is the same paper)."""
    year = parse_number((published or "")[:4], 1000, 9999)
    return Record(
        abstract=_squash(abstract),
        title=_squash(title) or None,
        # With a DOI the DOI is the id and the arXiv id comes from the URL: both become identity keys.
        id=doi.strip() if doi else f"arXiv:{arxiv_id}",
        url=f"https://arxiv.org/abs/{arxiv_id}",
        authors=[_squash(a) for a in authors if _squash(a)],
        venue=f"arXiv {primary}" if primary else "arXiv",
        year=year,
        keywords=list(dict.fromkeys(categories)),
        source=source,
    )


def _xml(text: str, what: str) -> ET.Element:
    try:
        return ET.fromstring(text)
    except ET.ParseError as e:
        raise SourceError(f"{what}: not a whole XML page ({e})") from None


# -- the API (Atom) ----------------------------------------------------------------
@dataclass
class AtomPage:
    records: list[Record]
    total: int
    start: int
    errors: list[str] = field(default_factory=list)  # arXiv's error entries (a malformed id)
    published: list[float | None] = field(default_factory=list)  # per record, epoch seconds


def parse_atom(text: str, what: str = "arXiv API") -> AtomPage:
    """One API response page; SourceError if it is cut short or an entry lacks its text."""
    root = _xml(text, what)
    if root.tag != f"{{{NS['atom']}}}feed":
        raise SourceError(f"{what}: not an Atom feed")

    def num(tag: str, default: int) -> int:
        node = root.find(f"os:{tag}", NS)
        try:
            return int(node.text) if node is not None and node.text else default
        except ValueError:
            raise SourceError(f"{what}: {tag} is not a number") from None

    records, errors, published = [], [], []
    for entry in root.findall("atom:entry", NS):
        raw_id = _squash(entry.findtext("atom:id", "", NS))
        if "/api/errors" in raw_id:
            errors.append(_squash(entry.findtext("atom:summary", "", NS)) or "error")
            continue
        arxiv_id = parse_id(raw_id)
        title, summary = entry.findtext("atom:title", None, NS), entry.findtext("atom:summary", None, NS)
        if not arxiv_id or not _squash(title) or not _squash(summary):
            raise SourceError(f"{what}: an entry ({raw_id or 'no id'}) lacks its id, title or abstract")
        primary = entry.find("arxiv:primary_category", NS)
        records.append(record(
            arxiv_id, title=title, abstract=summary,
            authors=[a.findtext("atom:name", "", NS) for a in entry.findall("atom:author", NS)],
            categories=[c.get("term") for c in entry.findall("atom:category", NS) if c.get("term")],
            primary=primary.get("term") if primary is not None else None,
            published=entry.findtext("atom:published", None, NS),
            doi=entry.findtext("arxiv:doi", None, NS),
            source="arxiv-api",
        ))
        published.append(_iso(entry.findtext("atom:published", None, NS)))
    return AtomPage(records, total=num("totalResults", len(records)), start=num("startIndex", 0), errors=errors,
                    published=published)


def _iso(text: str | None) -> float | None:
    try:
        return datetime.fromisoformat(text.strip().replace("Z", "+00:00")).timestamp() if text else None
    except ValueError:
        return None


def fetch_ids(fetcher: Fetcher, ids: list[str], *, base: str = DEFAULT_API, until: float | None = None) -> list[Record]:
    """The papers with these arXiv ids (unknown ids are simply absent), many ids per request; every
    request done by `until` when a member waits (`Fetcher.get`).

    arXiv answers a list holding one id it cannot read with an error alone: such a list is asked
    again in halves, so one bad id costs a few requests, not the papers of the others.
    """
    out = []
    for i in range(0, len(ids), MAX_IDS_PER_CALL):
        out += _fetch_chunk(fetcher, ids[i : i + MAX_IDS_PER_CALL], base, until)
    return out


def _fetch_chunk(fetcher: Fetcher, chunk: list[str], base: str, until: float | None) -> list[Record]:
    resp = fetcher.get(base, {"id_list": ",".join(chunk), "max_results": len(chunk)}, until=until)
    page = parse_atom(resp.text) if resp.status_code < 400 else None
    if page is not None and not page.errors:
        return page.records
    if len(chunk) == 1:  # this one id is what arXiv cannot read: none such paper
        return page.records if page is not None else []
    half = len(chunk) // 2
    return _fetch_chunk(fetcher, chunk[:half], base, until) + _fetch_chunk(fetcher, chunk[half:], base, until)


def date_query(category: str, since: date, until: date) -> str:
    cats = " OR ".join(f"cat:{c}" for c in category.split("+"))
    cats = f"({cats})" if "+" in category else cats
    return f"{cats} AND submittedDate:[{since:%Y%m%d}0000 TO {until:%Y%m%d}2359]"


def query_pages(fetcher: Fetcher, query: str, *, start: int = 0, page_size: int = 100,
                base: str = DEFAULT_API):
    """(start, AtomPage) for each page of a search, oldest submissions first, from `start`."""
    while True:
        resp = fetcher.get(base, {"search_query": query, "start": start, "max_results": page_size,
                                  "sortBy": "submittedDate", "sortOrder": "ascending"})
        if resp.status_code >= 400:
            raise SourceError(f"{base} answered HTTP {resp.status_code}")
        page = parse_atom(resp.text)
        yield start, page
        start += len(page.records)
        if not page.records or start >= page.total:
            return


# -- the RSS listings -----------------------------------------------------------------
@dataclass
class Listing:
    category: str
    announced: datetime | None  # the channel's pubDate: the announcement this listing holds
    items: list[tuple[str, Record]]  # (announce type, record)

    @property
    def signature(self) -> str:
        """Same papers, same versions -> same signature: how a stale listing is recognised."""
        guids = sorted(f"{t}:{r.id}:{r.abstract[:200]}" for t, r in self.items)
        return hashlib.sha1("\n".join(guids).encode()).hexdigest()[:20]


def _rfc822(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return email.utils.parsedate_to_datetime(text.strip())
    except (TypeError, ValueError):
        return None


_DESCRIPTION = re.compile(r"^\s*arXiv:\S+\s+Announce Type:\s*([\w-]+)\s*Abstract:\s*(.*)$", re.S | re.I)


def parse_rss(text: str, category: str = "") -> Listing:
    """One day's RSS 2.0 listing; SourceError if it is cut short or an item lacks its text."""
    what = f"arXiv RSS {category}".strip()
    root = _xml(text, what)
    channel = root.find("channel")
    if root.tag != "rss" or channel is None:
        raise SourceError(f"{what}: not an RSS 2.0 channel")
    items = []
    for item in channel.findall("item"):
        link = item.findtext("link", "")
        arxiv_id = parse_id(link) or parse_id(item.findtext("guid", "").rsplit(":", 1)[-1])
        kind = _squash(item.findtext("arxiv:announce_type", "", NS)).lower()
        desc = item.findtext("description", "")
        m = _DESCRIPTION.match(desc)
        abstract = m.group(2) if m else desc
        kind = kind or (m.group(1).lower() if m else "")
        title = item.findtext("title", None)
        if not arxiv_id or not _squash(title) or not _squash(abstract):
            raise SourceError(f"{what}: an item ({link or 'no link'}) lacks its id, title or abstract")
        creators = item.findtext("dc:creator", "", NS)
        items.append((kind, record(
            arxiv_id, title=title, abstract=abstract,
            authors=[a for a in re.split(r",\s*|\s+and\s+", creators) if a.strip()],
            categories=[_squash(c.text) for c in item.findall("category") if _squash(c.text)],
            primary=category.split("+")[0] if category else None,
            published=None, source="arxiv-rss",
        )))
    announced = _rfc822(channel.findtext("pubDate")) or _rfc822(channel.findtext("lastBuildDate"))
    for _, rec in items:
        rec.year = announced.year if announced else None
    return Listing(category, announced, items)


def fetch_listing(fetcher: Fetcher, category: str, *, base: str = DEFAULT_RSS) -> Listing:
    resp = fetcher.get(base.rstrip("/") + "/" + category)
    if resp.status_code >= 400:
        raise SourceError(f"arXiv has no listing for {category!r} (HTTP {resp.status_code})")
    return parse_rss(resp.text, category)


def last_announcement(now: datetime) -> datetime:
    """The most recent 20:00 US Eastern announcement, Sunday to Thursday, at or before `now`."""
    from zoneinfo import ZoneInfo

    et = now.astimezone(ZoneInfo("America/New_York"))
    day = et.date()
    for back in range(8):
        d = day - timedelta(days=back)
        at = datetime(d.year, d.month, d.day, 20, 0, tzinfo=et.tzinfo)
        if d.weekday() in (6, 0, 1, 2, 3) and at <= et:  # Sun..Thu
            return at.astimezone(timezone.utc)
    raise AssertionError("unreachable")  # pragma: no cover


def next_announcement(after: datetime) -> datetime:
    """The first 20:00 US Eastern announcement, Sunday to Thursday, after `after` (holidays unknown)."""
    from zoneinfo import ZoneInfo

    et = after.astimezone(ZoneInfo("America/New_York"))
    for ahead in range(9):
        d = et.date() + timedelta(days=ahead)
        at = datetime(d.year, d.month, d.day, 20, 0, tzinfo=et.tzinfo)
        if d.weekday() in (6, 0, 1, 2, 3) and at > et:
            return at.astimezone(timezone.utc)
    raise AssertionError("unreachable")  # pragma: no cover


def listing_slot(listing: Listing, now: datetime) -> datetime:
    """The announcement a listing holds: the last one by its pubDate (arXiv dates it at or a few hours
    after 20:00 US Eastern), or by `now` when it has none or one still to come."""
    at = now if listing.announced is None else min(now, listing.announced + timedelta(hours=6))
    return last_announcement(at)
