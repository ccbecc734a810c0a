"""Posting exactly once: a channel's digest for one (channel, local date), whatever crashes.

- a claim row is inserted first; the database's primary key decides which
  process posts;
- 429s, 5xx and timeouts are retried with backoff for a bounded time;
- the message carries Slack metadata (event_type "paperclub_daily", the date
  and paper id), so after a crash, or a failure Slack may have accepted
  anyway, `conversations.history` tells whether it is already in the channel
  before anything is posted again.

Time comes in as `now`; the scheduler (bot/scheduler.py) and `paperclub pick
--post` call `post_daily`.
"""
from __future__ import annotations

import http.client
import logging
import os
import random
import socket
import threading
import time
import urllib.error
import uuid
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Callable

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler

from store.errors import PaperNotFound, StoreError
from store.pick import DailyPick
from store.posts import PostStatus
from store.schedule import local_today
from store.text import member_tag

from . import blocks as bk
from .commands import paper_summary
from .outgoing import gated
from .picks import channel_tz, make_pick, reaction_line

if TYPE_CHECKING:
    from store import Store
    from store.search import Searcher

    from .config import Settings
    from .deps import Feedback

log = logging.getLogger("paperclub.daily")

EVENT_TYPE = "paperclub_daily"  # Slack message metadata on every daily post
CLAIM_LEASE = timedelta(minutes=30)  # a claim by another host older than this is taken over
POST_BUDGET = 600.0  # seconds the post loop keeps retrying before leaving it to the next start
LOOK_BACK = timedelta(hours=36)  # how far back a fresh claim looks for the day's post already in the channel


def _claimer_id() -> str:
    """Who holds a claim: host, pid, and a per-process token (a restarted container reuses pids)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


PROCESS_CLAIMER = _claimer_id()


ALIVE_KEY = "alive:"  # + a claimer id: epoch seconds, written every heartbeat by `paperclub run`
ALIVE_SECONDS = 45.0  # a claimer whose beat is older than this is gone (it beats every 10 s)


def mark_alive(store: Store, now: float, claimer: str = PROCESS_CLAIMER) -> None:
    """Say this process is running (another host's replica reads it before taking a claim over)."""
    store.set_meta(ALIVE_KEY + claimer, str(now))


def claimer_alive(claimer: str | None, claimed_at: float | None, now: datetime,
                  store: Store | None = None) -> bool:
    """Whether the process holding a claim may still be posting.

    On this host, its pid says. On another host, a `paperclub run` replica's beat (mark_alive)
    says within a minute; a process that never beats (`paperclub pick --post`) counts as alive
    for CLAIM_LEASE after its claim.
    """
    if not claimer:
        return False
    if claimer == PROCESS_CLAIMER:
        return True
    host, _, rest = claimer.partition(":")
    pid_text = rest.partition(":")[0]
    if host == socket.gethostname() and pid_text.isdigit():
        pid = int(pid_text)
        if pid == os.getpid():
            return False  # our pid, another token: a previous life of this container
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    beat = None
    if store is not None:
        try:
            beat = store.get_meta(ALIVE_KEY + claimer)
        except StoreError:
            beat = None  # cannot tell: the claim's age decides, as before
    if beat is not None:
        try:
            return now.timestamp() - float(beat) < ALIVE_SECONDS
        except ValueError:
            pass
    return claimed_at is not None and now.timestamp() - claimed_at < CLAIM_LEASE.total_seconds()


class PostFailed(Exception):
    """Slack would not take the post (a permanent error, or the retry budget ran out)."""


@dataclass
class PostResult:
    """What post_daily did: posted, recovered, already, busy, empty, failed."""

    status: str
    day: date
    paper_id: str | None = None
    ts: str | None = None
    detail: str = ""


_RETRYABLE_ERRORS = {"ratelimited", "internal_error", "fatal_error", "service_unavailable",
                     "request_timeout", "team_added_to_org"}


def _posting_client(client: WebClient) -> WebClient:
    """A copy of the client that retries only rate limits by itself.

    The SDK's server-error and connection handlers would re-post blindly after
    a failure Slack may have accepted; our loop checks the channel first.
    """
    return gated(client, retry_handlers=[RateLimitErrorRetryHandler(max_retry_count=2)])


def _classify(exc: Exception) -> tuple[bool, bool, float | None]:
    """(retryable, ambiguous: Slack may have posted it, Retry-After seconds)."""
    if isinstance(exc, SlackApiError):
        status = getattr(exc.response, "status_code", 200)
        error = exc.response.get("error") if hasattr(exc.response, "get") else None
        if status == 429 or error == "ratelimited":
            headers = getattr(exc.response, "headers", {}) or {}
            after = headers.get("Retry-After") or headers.get("retry-after")
            try:
                return True, False, float(after[0] if isinstance(after, list) else after)
            except (TypeError, ValueError):
                return True, False, None
        if status >= 500 or error in _RETRYABLE_ERRORS:
            return True, True, None
        return False, False, None
    if isinstance(exc, (urllib.error.URLError, TimeoutError, socket.timeout, ConnectionError,
                        http.client.HTTPException)):
        return True, True, None
    return False, False, None


HISTORY_PAGE = 999  # conversations.history's largest page


def find_daily_message(client: WebClient, channel: str, day: date, *, oldest: float | None = None) -> str | None:
    """The ts of this day's digest if it is already in the channel (found by its metadata).

    Every page from `oldest` (less two minutes for clock skew) to now is read: how busy
    the channel is changes how many pages that takes, never whether the post is found.
    The time range is what bounds it (callers pass the claim time less LOOK_BACK).
    """
    cursor = None
    seen: set[str] = set()
    while True:
        kwargs = dict(channel=channel, include_all_metadata=True, limit=HISTORY_PAGE)
        if oldest:
            kwargs["oldest"] = f"{max(0.0, oldest - 120):.6f}"
        if cursor:
            kwargs["cursor"] = cursor
        resp = client.conversations_history(**kwargs)
        for msg in resp.get("messages") or []:
            meta = msg.get("metadata") or {}
            payload = meta.get("event_payload") or {}
            if meta.get("event_type") == EVENT_TYPE and payload.get("date") == day.isoformat():
                return msg.get("ts")
        cursor = (resp.get("response_metadata") or {}).get("next_cursor")
        if not cursor or cursor in seen:  # a cursor seen before would loop forever
            return None
        seen.add(cursor)


def send_with_retries(client: WebClient, message: dict, *, budget: float = POST_BUDGET,
                      sleep: Callable[[float], None] = time.sleep,
                      already_posted: Callable[[], str | None] | None = None, unsure: bool = False) -> str:
    """chat.postMessage until Slack takes it; returns the ts.

    After an ambiguous failure (5xx, timeout, dropped connection), or from the start
    when `unsure`, `already_posted` is asked first, so a post Slack accepted is never
    sent twice. A lookup that fails for a while is retried like a post, never skipped:
    only one that can never work (e.g. no channels:history scope) lets it post blind.
    """
    started = time.monotonic()
    attempt = 0
    unsure = unsure and already_posted is not None
    while True:
        looking = unsure
        try:
            if looking:
                found = already_posted()
                if found:
                    return found
                unsure = looking = False
            return client.chat_postMessage(**message)["ts"]
        except Exception as exc:  # classified below; anything unknown is re-raised
            retryable, ambiguous, wait = _classify(exc)
            if looking and not retryable:  # can't look at all: post rather than stay silent
                log.warning("could not check the channel for an earlier post: %s", _describe(exc))
                unsure = False
                continue
            if not retryable:
                raise
            unsure = unsure or (ambiguous and already_posted is not None)
            attempt += 1
            wait = wait if wait is not None else min(60.0, 2.0 ** attempt) * (0.5 + random.random() / 2)
            if time.monotonic() - started + wait > budget:
                raise PostFailed(f"gave up after {attempt} attempts: {exc}") from exc
            log.warning("daily post attempt %d failed (%s%s); retrying in %.1f s", attempt,
                        "checking the channel: " if looking else "", _describe(exc), wait)
            sleep(wait)


def _describe(exc: Exception) -> str:
    if isinstance(exc, SlackApiError):
        return f"HTTP {getattr(exc.response, 'status_code', '?')} {exc.response.get('error')}"
    return f"{type(exc).__name__}: {exc}"


_day_locks: dict[tuple[str, str], threading.Lock] = {}
_day_locks_guard = threading.Lock()


def _day_lock(channel: str, key: str) -> threading.Lock:
    """One poster per (channel, day) inside this process (a cron fire and the start-up catch-up)."""
    with _day_locks_guard:
        return _day_locks.setdefault((channel, key), threading.Lock())


def post_daily(client: WebClient, store: Store, searcher: Searcher, channel: str, now: datetime, *,
               feedback: Feedback, day: date | None = None, settings: Settings | None = None, llm=None,
               claimer: str = PROCESS_CLAIMER, budget: float = POST_BUDGET,
               sleep: Callable[[float], None] = time.sleep) -> PostResult:
    """Post the channel's paper of the day for `day` (default: today in its zone) exactly once."""
    day = day or local_today(channel_tz(store, channel, settings), now)
    lock = _day_lock(channel, day.isoformat())
    if not lock.acquire(blocking=False):
        return PostResult("busy", day, detail="this process is already posting it")
    try:
        return _post_daily(client, store, searcher, channel, now, day, settings, llm, feedback, claimer,
                           budget, sleep)
    finally:
        lock.release()


def _post_daily(client: WebClient, store: Store, searcher: Searcher, channel: str, now: datetime, day: date,
                settings: Settings | None, llm, feedback: Feedback, claimer: str, budget: float,
                sleep: Callable[[float], None]) -> PostResult:
    key = day.isoformat()
    command = getattr(settings, "command", None) or "/paper"
    row = store.get_post(channel, key)
    for _ in range(2):  # a second round only when a concurrent pick took "our" paper
        if row is not None:
            break
        pick = make_pick(store, searcher, channel, day, feedback=feedback)
        if pick is None:
            return _post_empty(client, store, channel, day, claimer, now, command, budget, sleep)
        if store.claim_post(channel, key, claimer=claimer, paper_id=pick.paper_id, pick=pick.to_dict(),
                            now=now.timestamp()):
            log.info("claimed %s for %s: %s (%s)", key, channel, pick.paper_id,
                     pick.explain(member_tag))  # members as hashes: INFO logs name nobody
            return _deliver(client, store, channel, day, now, claimer, pick.to_dict(), llm, feedback, command,
                            budget, sleep, claimed_at=now.timestamp())
        row = store.get_post(channel, key)
    if row is None:
        return PostResult("busy", day, detail="could not claim the day")
    if row["status"] == PostStatus.POSTED:
        return PostResult("already", day, row["paper_id"], row["ts"])
    if row["status"] == PostStatus.EMPTY:
        return PostResult("empty", day)
    # Claimed or failed: whoever retries, this process included, re-claims by compare-and-swap
    # on the exact row it read, so only one process ever holds the day. A row whose claimer
    # is still alive is that claimer's to retry, failed or not.
    mine = row["claimed_by"] == claimer
    if not mine and claimer_alive(row["claimed_by"], row["claimed_at"], now, store):
        return PostResult("busy", day, row["paper_id"], detail=f"claimed by {row['claimed_by']}")
    claimed_at = store.take_over_post(channel, key, status=row["status"], old_claimer=row["claimed_by"],
                                      claimed_at=row["claimed_at"], claimer=claimer, now=now.timestamp())
    if claimed_at is None:
        return PostResult("busy", day, row["paper_id"], detail="another process claimed it first")
    if not mine:
        log.info("took over the %s post for %s from %s", key, channel, row["claimed_by"])
    return _deliver(client, store, channel, day, now, claimer, row["pick"], llm, feedback, command, budget,
                    sleep, claimed_at=claimed_at, since=row["claimed_at"])


def _deliver(client: WebClient, store: Store, channel: str, day: date, now: datetime, claimer: str,
             pick_data: dict, llm, feedback: Feedback, command: str, budget: float,
             sleep: Callable[[float], None], *,
             claimed_at: float | None = None, since: float | None = None) -> PostResult:
    """Post the claimed pick (or find it already posted), record the ts, add the abstract."""
    key = day.isoformat()
    pick = DailyPick.from_dict(pick_data, channel, day)
    poster = _posting_client(client)
    # A fresh claim looks too: a database restored from a backup (or a second copy of it)
    # has no row for a post that is already in the channel. A retry looks back as far from
    # the claim it replaced, since a re-claim overwrites the row's earlier claim times; the
    # post is retried only within the catch-up window, well inside LOOK_BACK.
    anchor = since if since is not None else claimed_at
    since = anchor - LOOK_BACK.total_seconds() if anchor is not None else None
    look = lambda: find_daily_message(poster, channel, day, oldest=since)  # noqa: E731
    ts, unsure = None, False
    try:
        ts = look()
    except Exception as exc:  # send_with_retries looks again (with backoff) before posting
        log.warning("could not check the channel for an earlier post: %s", _describe(exc))
        unsure = True
    status = "recovered" if ts else "posted"
    if ts:
        log.info("the %s post for %s was already in the channel (ts %s); not posting again", key, channel, ts)
    else:
        try:
            message = build_digest(store, pick, channel, day, feedback=feedback, llm=llm, command=command,
                                   now=now.timestamp())
            ts = send_with_retries(poster, message, budget=budget, sleep=sleep, already_posted=look,
                                   unsure=unsure)
        except Exception as exc:
            store.fail_post(channel, key, claimer=claimer, error=_describe(exc), claimed_at=claimed_at)
            log.error("the %s paper of the day for %s was not posted: %s", key, channel, _describe(exc))
            return PostResult("failed", day, pick.paper_id, detail=_describe(exc))
    if not store.finish_post(channel, key, claimer=claimer, ts=ts, now=now.timestamp(), claimed_at=claimed_at):
        log.warning("the %s post for %s went out (ts %s) but the claim had moved on", key, channel, ts)
    paper = store.get_paper(pick.paper_id)
    if paper is not None and paper.abstract:
        try:
            reply = send_with_retries(poster, {
                "channel": channel, "thread_ts": ts, "text": bk.esc(f"Abstract of {paper.short_name}"),
                "blocks": [b.to_dict() for b in bk.abstract_blocks(paper)],
                "unfurl_links": False, "unfurl_media": False}, budget=min(budget, 60.0), sleep=sleep)
            store.set_post_abstract(channel, key, reply)
        except Exception as exc:  # the digest is out; a missing abstract reply is not worth a retry storm
            log.warning("abstract reply for %s %s failed: %s", channel, key, _describe(exc))
    log.info("paper of the day %s for %s: %s (ts %s)", key, channel, pick.paper_id, ts)
    return PostResult(status, day, pick.paper_id, ts)


def build_digest(store: Store, pick: DailyPick, channel: str, day: date, *, feedback: Feedback, now: float,
                 llm=None, command: str = "/paper") -> dict:
    """chat.postMessage arguments for the digest, metadata included."""
    ids = [pick.paper_id, *[c.paper_id for c in pick.runners_up]]
    papers = {p.id: p for p in store.get_papers(ids)}
    if pick.paper_id not in papers:
        raise PaperNotFound(f"paper {pick.paper_id} is no longer in the library")
    paper = papers[pick.paper_id]
    try:
        summary = paper_summary(store, paper, llm, now=now)
    except StoreError:  # the digest goes out without a TL;DR rather than not at all
        log.warning("summary failed for %s; posting without it", paper.id, exc_info=True)
        summary = None
    blocks = bk.digest_blocks(pick, papers, summary=summary, command=command,
                              previous=reaction_line(store, channel, day, feedback))
    return {
        "channel": channel,
        "text": bk.fallback_text(bk.digest_text(pick, paper)),
        "blocks": [b.to_dict() for b in blocks],
        "metadata": {"event_type": EVENT_TYPE,
                     "event_payload": {"date": day.isoformat(), "paper_id": pick.paper_id}},
        "unfurl_links": False,
        "unfurl_media": False,
    }


def _post_empty(client: WebClient, store: Store, channel: str, day: date, claimer: str, now: datetime,
                command: str, budget: float, sleep: Callable[[float], None]) -> PostResult:
    """Nothing left to pick: say so in the channel, once (not again on the following days)."""
    key = day.isoformat()
    if not store.claim_post(channel, key, claimer=claimer, paper_id=None, pick=None, status=PostStatus.EMPTY,
                            now=now.timestamp()):
        return PostResult("empty", day)
    before = store.post_days(channel, (day - timedelta(days=7)).isoformat())
    if any(s == PostStatus.EMPTY and d < key for d, s in before.items()):
        log.info("nothing left to pick for %s on %s (already said so)", channel, key)
        return PostResult("empty", day, detail="already said")
    poster = _posting_client(client)
    message = {"channel": channel, "text": "No paper of the day: every paper has been shown here.",
               "blocks": [b.to_dict() for b in bk.empty_blocks(command)],
               "metadata": {"event_type": EVENT_TYPE, "event_payload": {"date": key, "paper_id": None}}}
    try:
        ts = send_with_retries(poster, message, budget=budget, sleep=sleep,
                               already_posted=lambda: find_daily_message(poster, channel, day))
        store.set_post_abstract(channel, key, ts)  # keeps the notice's ts with the row
    except Exception as exc:
        log.error("could not tell %s there is nothing left to pick: %s", channel, _describe(exc))
    log.info("nothing left to pick for %s on %s", channel, key)
    return PostResult("empty", day)


# -- any other scheduled post (the club's agenda, winner, reminder, thread, recap) --------------
SCHEDULED_EVENT = "paperclub_scheduled"  # metadata: {"kind", "key"}; the key names the claim row


def find_scheduled_message(client: WebClient, channel: str, key: str, *, thread_ts: str | None = None,
                           oldest: float | None = None) -> str | None:
    """The ts of the post with this key if it is already in the channel (or the thread)."""
    cursor = None
    for _ in range(5):
        kwargs = dict(channel=channel, include_all_metadata=True, limit=200)
        if thread_ts:
            kwargs["ts"] = thread_ts
        elif oldest:
            kwargs["oldest"] = f"{max(0.0, oldest - 120):.6f}"
        if cursor:
            kwargs["cursor"] = cursor
        resp = client.conversations_replies(**kwargs) if thread_ts else client.conversations_history(**kwargs)
        for msg in resp.get("messages") or []:
            meta = msg.get("metadata") or {}
            if meta.get("event_type") == SCHEDULED_EVENT and (meta.get("event_payload") or {}).get("key") == key:
                return msg.get("ts")
        cursor = (resp.get("response_metadata") or {}).get("next_cursor")
        if not cursor:
            return None
    return None


def post_once(client: WebClient, store: Store, channel: str, key: str, build: Callable[[], dict], now: datetime,
              *, kind: str, thread_ts: str | None = None, claimer: str = PROCESS_CLAIMER,
              budget: float = POST_BUDGET, sleep: Callable[[float], None] = time.sleep,
              post_to: str | None = None) -> PostResult:
    """Post `build()` (chat.postMessage arguments) once for (channel, key), with the daily post's
    machine: a claim row, message metadata, a channel lookup before any re-post, retries.

    `post_to`: the conversation the message goes to and is looked for in, when it is not the
    claim's channel (the presenter's DM: the claim stays with the club's channel)."""
    day = now.date()
    lock = _day_lock(channel, key)
    if not lock.acquire(blocking=False):
        return PostResult("busy", day, detail="this process is already posting it")
    try:
        recover = False
        claimed_at = now.timestamp()
        if not store.claim_post(channel, key, kind=kind, claimer=claimer, now=claimed_at):
            row = store.get_post(channel, key)
            if row is None:
                return PostResult("busy", day, detail="could not claim it")
            if row["status"] == PostStatus.POSTED:
                return PostResult("already", day, ts=row["ts"])
            if (row["claimed_by"] != claimer and row["status"] == PostStatus.CLAIMED
                    and claimer_alive(row["claimed_by"], row["claimed_at"], now, store)):
                return PostResult("busy", day, detail=f"claimed by {row['claimed_by']}")
            claimed_at = store.take_over_post(channel, key, status=row["status"], old_claimer=row["claimed_by"],
                                              claimed_at=row["claimed_at"], claimer=claimer, now=now.timestamp())
            if claimed_at is None:
                return PostResult("busy", day, detail="another process took it over")
            recover = True
        poster = _posting_client(client)
        # No `oldest`: the key names one session, so the newest pages of the channel are searched
        # whatever the claim's clock said (a restored database, an injected test clock).
        target = post_to or channel
        look = lambda: find_scheduled_message(poster, target, key, thread_ts=thread_ts)  # noqa: E731
        ts, unsure = None, False
        try:
            ts = look()
        except Exception as exc:  # looked at again, with backoff, before posting
            log.warning("could not check the channel for an earlier %s: %s", key, _describe(exc))
            unsure = True
        status = "recovered" if ts else "posted"
        if not ts:
            try:
                message = dict(build())
                message["channel"] = target
                if thread_ts:
                    message["thread_ts"] = thread_ts
                message["metadata"] = {"event_type": SCHEDULED_EVENT, "event_payload": {"kind": kind, "key": key}}
                ts = send_with_retries(poster, message, budget=budget, sleep=sleep, already_posted=look,
                                       unsure=unsure)
            except Exception as exc:
                store.fail_post(channel, key, claimer=claimer, error=_describe(exc), claimed_at=claimed_at)
                log.error("the %s post for %s was not posted: %s", key, channel, _describe(exc))
                return PostResult("failed", day, detail=_describe(exc))
        if not store.finish_post(channel, key, claimer=claimer, ts=ts, now=now.timestamp(), claimed_at=claimed_at):
            log.warning("the %s post for %s went out (ts %s) but the claim had moved on", key, channel, ts)
        log.info("%s for %s: %s (ts %s)%s", kind, channel, key, ts, " recovered" if recover and ts else "")
        return PostResult(status, day, ts=ts)
    finally:
        lock.release()
