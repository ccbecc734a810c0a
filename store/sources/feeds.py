"""Feeds: a category's or a venue's papers, harvested and polled into the store's ingest path.

HTTP in, records out (arxiv.py, openreview.py), then `ingest_records`, so
dedupe, the embedding cache and chunked transactions apply. Each source's
cursor lives in the store (`source_state`) and is written after the page's
papers are committed: a killed harvest resumes at the page it was on.
"""
from __future__ import annotations

import logging
from datetime import date, datetime, timedelta, timezone
from typing import Callable

from ..base import Store
from ..embed import Embedder
from ..errors import StoreError
from ..text import parse_number
from ..ingest import IngestResult, Record, external_ids, ingest_records
from . import arxiv, openreview
from .clients import Sources
from .http import MEMBER_WAIT, SourceError, SourceUnavailable

log = logging.getLogger("paperclub.sources")
FEED_KINDS = ("arxiv", "openreview")


def paper_ids(store: Store, records: list[Record]) -> dict[int, str]:
    """Index in records -> the paper id its external key names in the store (now)."""
    keys = {i: external_ids(r) for i, r in enumerate(records)}
    found = store.lookup_keys({k for ks in keys.values() for k in ks})
    out = {}
    for i, ks in keys.items():
        for k in ks:
            if found.get(k):
                out[i] = found[k][0]
                break
    return out


def ingest_batch(store: Store, records: list[Record], embedder: Embedder | None, *, now: float,
            announce: str | None = None, announced_at: float | None = None,
            result: IngestResult | None = None) -> IngestResult:
    """Ingest records; with `announce`, note the papers new to that source as announced then."""
    r = ingest_records(store, records, embedder, now=now) if records else IngestResult()
    if announce and records:
        ids = paper_ids(store, records)
        r.announced = store.mark_announced((pid, announce, announced_at or now) for pid in set(ids.values()))
    if result is not None:
        for k in ("added", "updated", "unchanged", "skipped", "embedded", "announced"):
            setattr(result, k, getattr(result, k) + getattr(r, k))
        result.warnings += r.warnings
    return r


def announce_source(kind: str, target: str) -> str:
    """The name a feed's announcements are kept under ('arxiv:cs.LG', 'openreview:ICLR.cc/2026/Conference'):
    a channel's news is what its own feeds announced, not what any feed of that kind did."""
    return f"{kind}:{target}"


def _failing(store: Store, source: str, error: Exception, now: float) -> None:
    store.update_source(source, now=now, error=str(error))


# -- arXiv: the API by category and date range ------------------------------------------
def harvest_arxiv(store: Store, sources: Sources, category: str, embedder: Embedder | None, *, now: float,
                  since: date, until: date | None = None, page_size: int = 200,
                  progress: Callable[[int, int], None] | None = None, announce: bool = True,
                  result: IngestResult | None = None) -> IngestResult:
    """Every paper submitted to `category` from `since` to `until`, resuming an interrupted run
    (counted into `result` too, when given)."""
    category = arxiv.category(category)  # as arXiv writes it, or SourceError
    until = until or datetime.fromtimestamp(now, timezone.utc).date()
    source = f"arxiv-api:{category}"
    query = arxiv.date_query(category, since, until)
    state = store.source_state(source) or {"cursor": {}}
    cur = state["cursor"]
    start = cur.get("start", 0) if cur.get("query") == query and not cur.get("done") else 0
    result = result if result is not None else IngestResult()
    try:
        for at, page in arxiv.query_pages(sources.arxiv_fetcher, query, start=start, page_size=page_size,
                                          base=sources.arxiv_api):
            ingest_batch(store, page.records, embedder, now=now, result=result)
            if announce:  # first seen now, but new as of its submission: a backfill is not "today's" news
                ids = paper_ids(store, page.records)
                result.announced += store.mark_announced(
                    (pid, announce_source("arxiv", category), min(now, page.published[i] or now))
                    for i, pid in ids.items())
            nxt = at + len(page.records)
            done = not page.records or nxt >= page.total
            store.update_source(source, now=now, cursor={"query": query, "start": nxt, "total": page.total,
                                                         "until": until.isoformat(), "done": done})
            if progress:
                progress(len(page.records), page.total)
    except SourceError as e:
        _failing(store, source, e, now)
        raise
    store.update_source(source, now=now, ok=True)
    return result


# -- arXiv: the daily listing -------------------------------------------------------------
def poll_arxiv(store: Store, sources: Sources, category: str, embedder: Embedder | None, *,
               now: float) -> tuple[str, IngestResult]:
    """Read today's listing: ('new' | 'unchanged' | 'empty' | 'stale', result).

    A listing holds its own night only. A stale one (the same as the last one although arXiv has
    announced since) catches up by the API, and so do nights missed since the last listing read
    (arXiv down, or no poll), once. A read of a night records how many papers it announced (the
    feed's `last_papers`, for `/paper feed`); a later read of the same listing keeps that count.
    """
    source = f"arxiv-rss:{category}"
    cur = (store.source_state(source) or {"cursor": {}})["cursor"]
    try:
        listing = arxiv.fetch_listing(sources.arxiv_fetcher, category, base=sources.arxiv_rss)
    except SourceError as e:
        _failing(store, source, e, now)
        raise
    result = IngestResult()
    at = datetime.fromtimestamp(now, timezone.utc)
    if not listing.items:  # no announcement tonight (Friday, Saturday, a holiday, a quiet category): normal
        night = _read_empty(cur, at)  # that night read (nothing new in it), or a listing that proves nothing
        store.update_source(source, now=now, ok=True, cursor=night, papers=0 if night else None)
        return "empty", result
    if listing.signature == cur.get("listing"):
        # The same listing again is news we already have, unless arXiv has announced since we read it:
        # then this category was not rebuilt (stale), and the API fills the gap.
        seen = cur.get("fetched_at") or 0
        if arxiv.last_announcement(at).timestamp() <= seen:
            if cur.get("gap"):  # a catch-up of missed nights that failed: its retry
                problem = _catch_up(store, sources, category, embedder, now, date.fromisoformat(cur["gap"]),
                                    datetime.fromtimestamp(cur["slot"], timezone.utc), result)
                store.update_source(source, now=now, ok=problem is None, error=problem,
                                    cursor={k: v for k, v in cur.items() if k != "gap" or problem})
            else:
                store.update_source(source, now=now, ok=True)
            return "unchanged", result
        log.warning("arXiv listing for %s is the same as the last one (stale): catching up by the API", category)
        store.update_source(source, now=now, error="stale listing (same as the last one); caught up by the API")
        last = cur.get("announced") or datetime.fromtimestamp(now - 3 * 86400, timezone.utc).date().isoformat()
        since = date.fromisoformat(last[:10]) - timedelta(days=3)  # papers can be held back a few days
        if cur.get("gap"):
            since = min(since, date.fromisoformat(cur["gap"]))
        try:
            caught = harvest_arxiv(store, sources, category, embedder, now=now, since=since)
        except SourceError:
            pass  # recorded on the API source; the listing is retried at the next poll
        else:  # the API has had everything up to now: no night before this one is missing any more, and
            # the feed is read (a holiday's listing left as it was looks stale too): not failing, the
            # stale note kept as its last error for `paperclub feeds`
            store.update_source(source, now=now, ok=True, papers=caught.announced,
                                cursor={**{k: v for k, v in cur.items() if k != "gap"},
                                        "slot": arxiv.last_announcement(at).timestamp()})
        return "stale", result
    announced_at = listing.announced.timestamp() if listing.announced else now
    fresh = [r for t, r in listing.items if t in arxiv.KEEP_TYPES]
    replaced = [r for t, r in listing.items if t in arxiv.UPDATE_TYPES]
    if replaced:  # a new version updates a paper we have; one we never had is not news
        known = paper_ids(store, replaced)
        replaced = [r for i, r in enumerate(replaced) if i in known]
    ingest_batch(store, fresh, embedder, now=now, announce=announce_source("arxiv", category),
                 announced_at=announced_at, result=result)
    ingest_batch(store, replaced, embedder, now=now, result=result)
    # Nights missed since the last listing read: after this night's papers, so that these keep
    # tonight's date (a paper's first announcement is the one kept).
    slot = arxiv.listing_slot(listing, at)
    gap = _missed_since(cur, slot)
    problem = _catch_up(store, sources, category, embedder, now, gap, slot, result) if gap else None
    day = (listing.announced or at).date().isoformat()
    cursor = {"listing": listing.signature, "announced": day, "items": len(listing.items), "fetched_at": now,
              "slot": slot.timestamp(), **({"gap": gap.isoformat()} if problem else {})}
    store.update_source(source, now=now, ok=problem is None, cursor=cursor, error=problem, papers=result.announced)
    return "new", result


def _read_empty(cur: dict, at: datetime) -> dict | None:
    """The cursor after an empty listing read at `at` (None: left as it was). arXiv rebuilds the
    listing after each announcement, so an empty one read within a day of a scheduled announcement
    (the feeds job reads half an hour and three and a half hours after it) is that night, read: a
    holiday (arXiv's schedule skips a few nights a year) or a category with nothing new. Counting
    it as read, rather than keeping a holiday calendar, keeps the next listing from taking it for
    a missed night to catch up by the API. Read later (a Friday), it proves nothing of that night."""
    night = arxiv.last_announcement(at)
    if at - night >= timedelta(days=1) or night.timestamp() <= (cur.get("slot") or 0):
        return None
    return {**cur, "slot": night.timestamp()}


MAX_CATCH_UP_DAYS = 14  # a longer outage catches up its last two weeks: older papers are past "new"


def _missed_since(cur: dict, slot: datetime) -> date | None:
    """The submission date to catch up from by the API when announcements before `slot` were never
    read (None: none were). Papers can be held back a few days, so a few days before the last
    night read; a catch-up that failed is asked again until it is done."""
    if cur.get("gap"):
        since = date.fromisoformat(cur["gap"])
    else:
        last = cur.get("slot")
        if last is None and cur.get("fetched_at"):  # a cursor written before slots were kept
            last = arxiv.last_announcement(datetime.fromtimestamp(cur["fetched_at"], timezone.utc)).timestamp()
        if last is None:  # a first poll reads tonight's listing, never a backlog
            return None
        last_at = datetime.fromtimestamp(last, timezone.utc)
        if arxiv.next_announcement(last_at) >= slot:  # holidays look missed: a few requests for nothing
            return None
        since = last_at.date() - timedelta(days=3)
    return max(since, slot.date() - timedelta(days=MAX_CATCH_UP_DAYS))


def _catch_up(store: Store, sources: Sources, category: str, embedder: Embedder | None, now: float,
              since: date, slot: datetime, result: IngestResult) -> str | None:
    """The papers submitted from `since` to the night of `slot`, by the API; what went wrong, if it did."""
    log.warning("arXiv %s: announcements missed since %s; catching up by the API", category, since)
    try:
        harvest_arxiv(store, sources, category, embedder, now=now, since=since, until=slot.date(), result=result)
    except SourceError as e:  # recorded on the API source too; the next poll tries again
        return f"missed announcements since {since} not caught up yet: {e}"
    return None


# -- OpenReview: a venue ---------------------------------------------------------------------
# How far before the last read's newest change a read of only the new notes goes on reading: a note's
# tmdate is stamped when its write begins, and one that took a while may become visible after a later one.
CHANGE_OVERLAP_MS = 3_600_000


def harvest_openreview(store: Store, sources: Sources, venue: str, embedder: Embedder | None, *, now: float,
                       page_size: int = openreview.PAGE_SIZE, restart: bool = False, only_new: bool = False,
                       progress: Callable[[int, int], None] | None = None) -> IngestResult:
    """Every note of a venue, last changed first, page by page; an interrupted run resumes at its page.

    With `only_new` (the nightly poll), once the venue has been read whole, only the notes changed
    since that read's newest change are asked for: pages stop at the first one reaching back past it.
    A change and not a creation date (`mintcdate`), because a paper joins a venue's accepted papers by
    its decision, months after it was created."""
    if not openreview.valid_venue(venue):
        raise SourceError(f"{venue!r} is not an OpenReview venue id (e.g. ICLR.cc/2026/Conference)")
    source = f"openreview:{venue}"
    cur = (store.source_state(source) or {"cursor": {}})["cursor"]
    # `mark`: the newest change (ms) a whole read (or a read of the new ones since) saw on its first page,
    # which, newest first, is the newest of the venue's when it began.
    mark = cur.get("mark") if cur.get("done") else None
    since = mark - CHANGE_OVERLAP_MS if only_new and isinstance(mark, int) else None
    offset = 0 if restart or since is not None or cur.get("done") else cur.get("offset", 0)
    first_mark = cur.get("next_mark") if offset else None  # resuming a whole read: its first page's
    # A note is news on OpenReview when its paper is new to the store. The keys of the new ones are
    # written down before they are ingested and dropped once they are announced, so a run killed in
    # between (a page's ingest takes a while) leaves them for the next run to announce, which would
    # otherwise find them stored and take them for the library's.
    pending = set(cur.get("pending") or ())

    def cursor(**kw) -> dict:
        # A read of the new ones leaves the whole read's cursor (offset, done, mark) as it was.
        base = dict(cur) if since is not None else kw
        base.pop("pending", None)
        return {**base, **({"pending": sorted(pending)} if pending else {})}

    result = IngestResult()
    try:
        for at, page in openreview.note_pages(sources.openreview_fetcher, venue, offset=offset,
                                              page_size=page_size, base=sources.openreview_api,
                                              newest_first=True):
            if at == 0 and page.changed:  # newest first: the venue's newest change as this read began
                first_mark = page.changed[1]
            keys = {i: set(external_ids(r)) for i, r in enumerate(page.records)}
            ids = paper_ids(store, page.records)  # before: which are new to the store
            new = {i for i in keys if i not in ids or keys[i] & pending}
            new_keys = {k for i in new for k in keys[i]}
            if new_keys - pending:
                pending |= new_keys
                store.update_source(source, now=now, cursor=cursor(offset=at, count=page.count, done=False,
                                                                   next_mark=first_mark))
            ingest_batch(store, page.records, embedder, now=now, result=result)
            after = paper_ids(store, page.records)
            name = announce_source("openreview", venue)
            result.announced += store.mark_announced(
                (pid, name, page.dates.get(page.records[i].url.rsplit("=", 1)[-1], now))
                for i, pid in after.items() if i in new)
            pending -= new_keys
            nxt = at + page.notes
            done = page.notes == 0 or nxt >= page.count
            store.update_source(source, now=now, cursor=cursor(
                offset=nxt, count=page.count, done=done,
                **({"mark": first_mark} if done and first_mark is not None else {"next_mark": first_mark})))
            if progress:
                progress(page.notes, page.count)
            if since is not None and page.changed and page.changed[0] < since:
                break  # the rest of the venue is as the last read left it
    except SourceError as e:
        _failing(store, source, e, now)
        raise
    if since is not None and first_mark is not None and first_mark > mark:
        store.update_source(source, now=now, cursor={**cursor(), "mark": first_mark})
    store.update_source(source, now=now, ok=True, papers=result.announced)
    return result


# -- feeds --------------------------------------------------------------------------------
def parse_feed(kind: str, target: str) -> tuple[str, str]:
    """A validated (kind, target); SourceError naming what is wrong."""
    kind = kind.lower()
    if kind == "arxiv":
        return kind, arxiv.category(target)  # one spelling: 'cs.lg' is the feed cs.LG
    if kind == "openreview":
        if not openreview.valid_venue(target):
            raise SourceError(f"{target!r} is not an OpenReview venue id (e.g. ICLR.cc/2026/Conference)")
        return kind, target
    raise SourceError(f"unknown feed kind {kind!r}: use arxiv or openreview")


def check_feed(store: Store, sources: Sources, kind: str, target: str) -> tuple[str | None, str | None]:
    """(why a parsed feed cannot be followed, what to say of it) asked of its source once (the first
    time any channel adds it); (None, None) when there is nothing to say. An OpenReview venue id that
    passes the pattern may still name nothing: one note asked for says whether it has papers, and,
    when it has none yet, its group (or invitation) whether OpenReview has it at all. SourceError
    when the source cannot answer."""
    if kind != "openreview" or any(f["kind"] == kind and f["target"] == target for f in store.feeds()):
        return None, None
    until = sources.openreview_fetcher.clock() + MEMBER_WAIT  # a member waits on `/paper feed add`
    _, page = next(openreview.note_pages(sources.openreview_fetcher, target, page_size=1,
                                         base=sources.openreview_api, until=until))
    if page.count or page.notes:
        return None, None
    if openreview.venue_exists(sources.openreview_fetcher, target, base=sources.openreview_api, until=until):
        return None, "It has no papers yet: they come in as OpenReview publishes them."
    return (f"OpenReview has no papers under {target!r}. Venue ids are case-sensitive and look like "
            "ICLR.cc/2026/Conference (or …/-/Submission for a venue's submissions)."), None


def feed_source(kind: str, target: str) -> str:
    """The source_state name a feed's health is kept under."""
    return f"arxiv-rss:{target}" if kind == "arxiv" else f"openreview:{target}"


def poll_feed(store: Store, sources: Sources, kind: str, target: str, embedder: Embedder | None, *,
              now: float) -> str:
    """Poll one feed once; a short word for the log."""
    if kind == "arxiv":
        return poll_arxiv(store, sources, target, embedder, now=now)[0]
    harvest_openreview(store, sources, target, embedder, now=now, restart=True, only_new=True)
    return "read"


def feeds_due(store: Store, since: dict[str, float]) -> list[tuple[str, str]]:
    """The distinct feeds (kind, target) not polled to an end since `since[kind]` (epoch seconds).

    A poll ends in a success or a recorded error; a poll whose process died on the way (a
    replica killed mid-harvest) recorded neither, so its feed is still due, as is a feed
    never polled at all.
    """
    out = []
    for kind, target in sorted({(f["kind"], f["target"]) for f in store.feeds() if f["kind"] in since}):
        st = store.source_state(feed_source(kind, target)) or {}
        ended = max(st.get("last_success") or 0.0, st.get("last_error_at") or 0.0)
        if ended < since[kind]:
            out.append((kind, target))
    return out


def poll_feeds(store: Store, sources: Sources, embedder: Embedder | None, *, now: float,
               kinds: tuple[str, ...] = FEED_KINDS,
               only: list[tuple[str, str]] | None = None) -> dict[tuple[str, str], str]:
    """Poll each distinct feed once (or those in `only`), however many channels follow it; a failure
    is recorded, not raised. A service that is down (SourceUnavailable after one feed's retries) is
    not asked again in this sweep: its other feeds record the same failure at once, and each is
    caught up by its next poll."""
    out = {}
    down: dict[str, SourceError] = {}
    feeds = {(f["kind"], f["target"]) for f in store.feeds() if f["kind"] in kinds}
    for kind, target in sorted(feeds if only is None else feeds & set(only)):
        if kind in down:
            try:
                store.update_source(feed_source(kind, target), now=now, error=f"not asked: {down[kind]}")
            except StoreError:
                pass  # the database is failing too: the sweep's log says what happened
            out[(kind, target)] = "failed"
            continue
        try:
            out[(kind, target)] = poll_feed(store, sources, kind, target, embedder, now=now)
        except SourceError as e:  # recorded on the source by poll_*; the next feed still runs
            log.warning("feed %s %s failed: %s", kind, target, e)
            out[(kind, target)] = "failed"
            if isinstance(e, SourceUnavailable):
                log.warning("%s is not answering: its other feeds wait for the next poll", kind)
                down[kind] = e
        except Exception as e:  # a fault of ours or the database's: one feed's, never the sweep's
            log.exception("feed %s %s failed", kind, target)
            try:
                store.update_source(feed_source(kind, target), now=now, error=f"{type(e).__name__}: {e}"[:300])
            except StoreError:
                pass  # the database itself is failing: the log line above is what is left
            out[(kind, target)] = "failed"
    return out


# -- freshness: what the paper of the day prefers for a channel with feeds -----------------------
DEFAULT_FRESH_DAYS = 7


def fresh_days(store: Store, channel: str) -> int:
    """How many days a feed's paper counts as new for this channel (`/paper feed fresh N`)."""
    value = store.get_meta(f"fresh_days:{channel}")
    return parse_number(value, 1, 10**6) or DEFAULT_FRESH_DAYS


def fresh_papers(store: Store, channel: str, day: date) -> dict[str, tuple[float, str]]:
    """Paper id -> (announced at, 'arxiv' | 'openreview') for papers new in the channel's feeds by `day`."""
    feeds = store.feeds(channel)
    if not feeds:
        return {}
    start = datetime(day.year, day.month, day.day, tzinfo=timezone.utc).timestamp()
    since = start - fresh_days(store, channel) * 86400
    out: dict[str, tuple[float, str]] = {}
    # Each feed's own announcements; a row under the bare kind ('arxiv') was written before
    # announcements named their feed, and counts for every feed of that kind until it ages out.
    names = {announce_source(f["kind"], f["target"]): f["kind"] for f in feeds}
    names.update({f["kind"]: f["kind"] for f in feeds})
    for name, kind in sorted(names.items()):
        for pid, at in store.announced_since(since, [name]).items():
            if at < start + 86400 and (pid not in out or at < out[pid][0]):
                out[pid] = (at, kind)
    return out


def fresh_label(kind: str, announced_at: float, day: date) -> str:
    """'new on arXiv today', 'new on arXiv this week', 'new on OpenReview' ... for the explanation."""
    where = {"arxiv": "arXiv", "openreview": "OpenReview"}.get(kind, kind)
    start = datetime(day.year, day.month, day.day, tzinfo=timezone.utc).timestamp()
    age = start - announced_at
    if age <= 86400:  # last evening's announcement (20:00 US Eastern is after midnight UTC)
        return f"new on {where} today"
    return f"new on {where} {int(age // 86400)} days ago" if age < 7 * 86400 else f"new on {where}"
