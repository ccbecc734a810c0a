"""Posting exactly once, whatever crashes: the one machine behind the paper of the day, the
club's agenda, winner, reminder, thread and recap, and the presenter's DM.

A post is a `Post`: the claim's (channel, key), what to send, and the metadata that finds it in
Slack. `Poster.post_once` runs the machine:
- claim: a row in `posts` is inserted first, and the database's primary key decides which
  process posts; an unfinished row is taken over by compare-and-swap on its claimer and claim
  time, once its holder is gone (bot/replica.py says who is alive);
- look: the message carries Slack metadata, so after a crash, or a failure Slack may have
  accepted anyway, `find_message` tells whether it is already there before anything is sent;
- deliver: 429s, 5xx and timeouts are retried with backoff for a bounded time;
- finish: the ts is recorded only while the claim is still the one this try made.

Time comes in as `now`; the scheduler (bot/scheduler.py), the club's tick (bot/club/posts.py)
and `paperclub pick --post` call it.
"""
from __future__ import annotations

import http.client
import logging
import random
import socket
import threading
import time
import urllib.error
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Callable

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler

from store.errors import PaperNotFound, StoreError
from store.pick import DailyPick, PickSettings
from store.posts import PostStatus
from store import feedback as fb
from store.daily import pick_for_day
from store.schedule import channel_tz, local_today
from store.text import member_tag

from . import blocks as bk
from .commands import club_meets, paper_summary
from .outgoing import gated
from .replica import holder_alive, replica_id

if TYPE_CHECKING:
    from store import Store
    from store.search import Searcher

    from .config import Settings
    from .deps import Deps, Feedback

log = logging.getLogger("paperclub.daily")

EVENT_TYPE = "paperclub_daily"  # metadata of the paper of the day: {"date", "paper_id"}
SCHEDULED_EVENT = "paperclub_scheduled"  # metadata of every other post: {"kind", "key"}
DAILY = "daily"  # posts.kind of the paper of the day (store/backends/posts.py)
POST_BUDGET = 600.0  # seconds the post loop keeps retrying before leaving it to the next start
SHARE_BUDGET = 4.0  # a member pressed Share and waits: a retry or two (backoff 1-2 s, then 2-4 s), then the
# apology; pressing again is safe, as the machine looks for the post before sending it again
LOOK_BACK = timedelta(hours=36)  # how far back a daily claim looks for its post already in the channel
HISTORY_PAGE = 999  # conversations.history's largest page
NEWEST_PAGES = 5  # pages read when a post has no claim time to look back from
# Slack's refusals of a post to a channel the bot cannot post in (removed, deleted, archived): the
# post is certainly not there, and nothing changes until someone invites the bot back.
CHANNEL_GONE = frozenset({"not_in_channel", "channel_not_found", "is_archived"})
# So the sweeps (the daily catch-up, the club's tick) ask again only once the bot is invited back or
# the channel unarchived (bot/hello.py records it), or after this long: an invite the bot never heard
# of (it was down) still gets its post within the hour, without a refusal every few minutes.
REFUSED_WAIT = timedelta(hours=1)
INVITED_KEY = "invited:"  # meta key (+ channel): when the bot last joined it or it was unarchived, epoch s


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


def find_message(client: WebClient, conversation: str, event_type: str, match: dict, *,
                 thread_ts: str | None = None, oldest: float | None = None) -> str | None:
    """The ts of the bot's message whose metadata has this event type and these payload fields.

    With `oldest` (less two minutes for clock skew), every page from then to now is read: how
    busy the channel is changes how many pages that takes, never whether the post is found.
    Without it, the newest NEWEST_PAGES pages (the key names one session, whatever a claim's
    clock said). With `thread_ts`, the thread's replies.
    """
    cursor = None
    seen: set[str] = set()
    for _ in range(NEWEST_PAGES if oldest is None else 1_000_000):
        kwargs = dict(channel=conversation, include_all_metadata=True, limit=HISTORY_PAGE)
        if thread_ts:
            kwargs["ts"] = thread_ts
        elif oldest:
            kwargs["oldest"] = f"{max(0.0, oldest - 120):.6f}"
        if cursor:
            kwargs["cursor"] = cursor
        resp = client.conversations_replies(**kwargs) if thread_ts else client.conversations_history(**kwargs)
        for msg in resp.get("messages") or []:
            meta = msg.get("metadata") or {}
            payload = meta.get("event_payload") or {}
            if meta.get("event_type") == event_type and all(payload.get(k) == v for k, v in match.items()):
                return msg.get("ts")
        cursor = (resp.get("response_metadata") or {}).get("next_cursor")
        if not cursor or cursor in seen:  # a cursor seen before would loop forever
            return None
        seen.add(cursor)
    return None


@dataclass(frozen=True)
class Post:
    """One post to make exactly once: its claim row, what to send and how to find it in Slack."""

    channel: str  # the claim's channel
    key: str  # the claim's key: the date for the paper of the day, '<kind>:<date>' for the club
    kind: str
    day: date
    build: Callable[[dict], dict]  # the claim ({"pick", "paper_id"}) -> chat.postMessage arguments
    to: str | None = None  # where it goes and is looked for, when not `channel` (the presenter's DM)
    thread_ts: str | None = None
    paper_id: str | None = None  # stored with a daily claim (a paper is shown once per channel)
    pick: dict | None = None
    look_back: timedelta | None = None  # look for it from the claim time less this; None: newest pages

    @property
    def marker(self) -> tuple[str, dict]:
        """(event type, payload fields that name this post) in its message metadata."""
        if self.kind == DAILY:
            return EVENT_TYPE, {"date": self.key}
        return SCHEDULED_EVENT, {"kind": self.kind, "key": self.key}


class Poster:
    """The machine, built once per process (with Deps): its identity, and the posts it has in flight.

    A post in flight here is never started again by another thread of this process (a cron fire
    and the start-up catch-up, a swap and the tick); the set holds only posts in flight.
    """

    def __init__(self, replica: str | None = None):
        self.replica = replica or replica_id()
        self._in_flight: set[tuple[str, str]] = set()
        self._guard = threading.Lock()

    def post_once(self, client: WebClient, store: Store, post: Post, now: datetime, *,
                  budget: float = POST_BUDGET, sleep: Callable[[float], None] = time.sleep) -> PostResult:
        """Claim, look, deliver, finish: `post` is in Slack once, or the row says why not yet."""
        where = (post.channel, post.key)
        with self._guard:
            if where in self._in_flight:
                return PostResult("busy", post.day, detail="this process is already posting it")
            self._in_flight.add(where)
        try:
            return self._post(client, store, post, now, budget=budget, sleep=sleep)
        finally:
            with self._guard:
                self._in_flight.discard(where)

    def _post(self, client: WebClient, store: Store, post: Post, now: datetime, *, budget: float,
              sleep: Callable[[float], None]) -> PostResult:
        me, at = self.replica, now.timestamp()
        claim = {"pick": post.pick, "paper_id": post.paper_id}
        since = claimed_at = at
        if not store.claim_post(post.channel, post.key, kind=post.kind, claimer=me, now=at,
                                paper_id=post.paper_id, pick=post.pick):
            row = store.get_post(post.channel, post.key)
            if row is None:
                return PostResult("busy", post.day, detail="could not claim it")
            if row["status"] == PostStatus.POSTED:
                return PostResult("already", post.day, row["paper_id"], row["ts"])
            if row["status"] == PostStatus.EMPTY:
                return PostResult("empty", post.day)
            if row["status"] == PostStatus.MISSED:
                return PostResult("missed", post.day, detail=row.get("error") or "")
            # Claimed or failed: whoever retries, this process included, re-claims by compare-and-swap
            # on the exact row it read, so only one process ever holds it. A claim whose holder may
            # still be posting is the holder's.
            mine = row["claimed_by"] == me
            if (not mine and row["status"] == PostStatus.CLAIMED
                    and holder_alive(store, row["claimed_by"], row["claimed_at"], now, me=me)):
                return PostResult("busy", post.day, row["paper_id"], detail=f"claimed by {row['claimed_by']}")
            claimed_at = store.take_over_post(post.channel, post.key, status=row["status"],
                                              old_claimer=row["claimed_by"], claimed_at=row["claimed_at"],
                                              claimer=me, now=at)
            if claimed_at is None:
                return PostResult("busy", post.day, row["paper_id"], detail="another process claimed it first")
            if not mine:
                log.info("took over the %s post for %s from %s", post.key, post.channel, row["claimed_by"])
            claim = {"pick": row["pick"], "paper_id": row["paper_id"]}
            # A re-claim overwrites the row's claim time: look back from the claim it replaced.
            since = row["claimed_at"] if row["claimed_at"] is not None else claimed_at
        poster = _posting_client(client)
        target = post.to or post.channel
        event_type, match = post.marker
        # A fresh claim looks too: a database restored from a backup (or a second copy of it)
        # has no row for a post that is already in the channel.
        oldest = since - post.look_back.total_seconds() if post.look_back is not None else None
        look = lambda: find_message(poster, target, event_type, match, thread_ts=post.thread_ts,  # noqa: E731
                                    oldest=oldest)
        ts, unsure = None, False
        try:
            ts = look()
        except Exception as exc:  # send_with_retries looks again (with backoff) before posting
            log.warning("could not check the channel for an earlier %s post: %s", post.key, _describe(exc))
            unsure = True
        status = "recovered" if ts else "posted"
        if ts:
            log.info("the %s post for %s was already in the channel (ts %s); not posting again", post.key, post.channel, ts)
        else:
            try:
                message = dict(post.build(claim))
                message["channel"] = target
                if post.thread_ts:
                    message["thread_ts"] = post.thread_ts
                message["metadata"] = {"event_type": event_type,
                                       "event_payload": {**match, **(message.get("metadata") or {})
                                                         .get("event_payload", {})}}
                ts = send_with_retries(poster, message, budget=budget, sleep=sleep, already_posted=look,
                                       unsure=unsure)
            except Exception as exc:
                store.fail_post(post.channel, post.key, claimer=me, error=_describe(exc), claimed_at=claimed_at)
                log.error("the %s post for %s was not posted: %s", post.key, post.channel, _describe(exc))
                return PostResult("failed", post.day, claim["paper_id"], detail=_describe(exc))
        if not store.finish_post(post.channel, post.key, claimer=me, ts=ts, now=at, claimed_at=claimed_at):
            log.warning("the %s post for %s went out (ts %s) but the claim had moved on", post.key, post.channel, ts)
        return PostResult(status, post.day, claim["paper_id"], ts)


# -- the paper of the day ---------------------------------------------------------------------
def post_daily(client: WebClient, store: Store, searcher: Searcher, channel: str, now: datetime, *,
               feedback: Feedback, day: date | None = None, settings: Settings | None = None, llm=None,
               poster: Poster | None = None, budget: float = POST_BUDGET, pick_settings: PickSettings | None = None,
               sleep: Callable[[float], None] = time.sleep) -> PostResult:
    """Post the channel's paper of the day for `day` (default: today in its zone) exactly once,
    picked with `pick_settings` (the deps' `pick`; default PickSettings()'s)."""
    poster = poster or Poster()
    day = day or local_today(channel_tz(store, channel, getattr(settings, "timezone", None)), now)
    key = day.isoformat()
    command = getattr(settings, "command", None) or "/paper"

    def build(claim: dict) -> dict:
        pick = DailyPick.from_dict(claim["pick"], channel, day)
        return build_digest(store, pick, channel, day, feedback=feedback, llm=llm, command=command,
                            now=now.timestamp())

    for _ in range(2):  # a second round only when a concurrent pick took "our" paper
        pick = None
        if store.get_post(channel, key) is None:
            _release_missed(store, channel, key)
            pick = pick_for_day(store, searcher, channel, day, feedback=feedback, settings=pick_settings)
            if pick is None:
                return _post_empty(client, store, channel, day, poster.replica, now, command, budget, sleep)
            log.info("picked for %s on %s: %s (%s)", channel, key, pick.paper_id,
                     pick.explain(member_tag))  # members as hashes: INFO logs name nobody
        post = Post(channel, key, DAILY, day, build, paper_id=pick and pick.paper_id,
                    pick=pick and pick.to_dict(), look_back=LOOK_BACK)
        result = poster.post_once(client, store, post, now, budget=budget, sleep=sleep)
        if result.status != "busy" or store.get_post(channel, key) is not None:
            break
    if result.status == "busy" and store.get_post(channel, key) is None:
        return PostResult("busy", day, detail="could not claim the day")
    if result.status in ("posted", "recovered"):
        _abstract_reply(client, store, channel, day, result, budget=budget, sleep=sleep, llm=llm,
                        now=now.timestamp())
        log.info("paper of the day %s for %s: %s (ts %s)", key, channel, result.paper_id, result.ts)
    return result


def post_day(deps: Deps, client: WebClient, channel: str, day: date, now: datetime, *, store: Store | None = None,
             budget: float = POST_BUDGET, sleep: Callable[[float], None] = time.sleep) -> PostResult:
    """post_daily for `day` with the bot's own wiring: the scheduler's jobs, and the bot invited back."""
    return post_daily(client, store or deps.store, deps.searcher, channel, now, day=day, feedback=deps.feedback,
                      settings=deps.settings, llm=deps.llm, poster=deps.poster, budget=budget,
                      pick_settings=deps.pick, sleep=sleep)


def channel_gone(error: str | None) -> bool:
    """Whether a post row's error (`_describe`'s "HTTP 200 not_in_channel") is Slack refusing the channel."""
    return bool(error) and error.split()[-1] in CHANNEL_GONE


def refused(row: dict | None) -> bool:
    """Whether a post row's last try was refused for the channel itself (the bot not in it)."""
    return bool(row) and row["status"] == PostStatus.FAILED and channel_gone(row.get("error"))


def invited(store: Store, channel: str, now: datetime) -> None:
    """The bot was just invited into `channel`, or it was unarchived: the refusals before now no longer stand."""
    store.set_meta(INVITED_KEY + channel, repr(now.timestamp()))


def refused_lately(store: Store, channel: str, key: str, now: datetime) -> bool:
    """Whether the post's last try was refused for the channel less than REFUSED_WAIT ago, with no
    invite since: a sweep leaves it alone rather than ask Slack for a refusal again."""
    row = store.get_post(channel, key)
    if not refused(row):
        return False
    tried = row.get("claimed_at") or 0.0
    back = float(store.get_meta(INVITED_KEY + channel) or 0.0)
    return now.timestamp() - tried < REFUSED_WAIT.total_seconds() and back < tried


def refused_today(store: Store, channel: str, now: datetime, settings: Settings | None = None) -> date | None:
    """Today, in the channel's zone, when Slack refused today's paper of the day for the channel: the
    day the bot, invited back, posts at once. An earlier day's is over: it stays unposted."""
    day = local_today(channel_tz(store, channel, getattr(settings, "timezone", None)), now)
    return day if refused(store.get_post(channel, day.isoformat())) else None


def _release_missed(store: Store, channel: str, key: str) -> None:
    """Earlier days Slack refused because the bot could not post in the channel: their papers were
    never seen, so the pick for `key` may choose them again (and says nothing of "Also today")."""
    for row in store.post_history(channel):
        if row["day"] < key and refused(row) \
                and store.miss_post(channel, row["key"], claimed_at=row["claimed_at"]):
            log.info("the %s post for %s never went out (%s): its papers are free again",
                     row["key"], channel, row["error"])


def _abstract_reply(client: WebClient, store: Store, channel: str, day: date, result: PostResult, *,
                    budget: float, sleep: Callable[[float], None], llm=None, now: float) -> None:
    """The paper's key points and abstract in the digest's thread; a missing one is not worth a retry storm."""
    paper = store.get_paper(result.paper_id) if result.paper_id else None
    if paper is None or not paper.abstract:
        return
    try:
        summary = paper_summary(store, paper, llm, now=now)  # cached by the post itself
    except StoreError:
        summary = None
    try:
        reply = send_with_retries(_posting_client(client), {
            "channel": channel, "thread_ts": result.ts, "text": bk.esc(f"Abstract of {paper.short_name}"),
            "blocks": [b.to_dict() for b in bk.abstract_blocks(paper, points=getattr(summary, "points", None))],
            "unfurl_links": False, "unfurl_media": False}, budget=min(budget, 60.0), sleep=sleep)
        store.set_post_abstract(channel, day.isoformat(), reply)
    except Exception as exc:
        log.warning("abstract reply for %s %s failed: %s", channel, day.isoformat(), _describe(exc))


def reaction_line(store: Store, channel: str, day: date, feedback: Feedback) -> str | None:
    """One line on the previous post: how the team reacted to it, else which paper it was."""
    previous = store.previous_post(channel, day.isoformat())
    if not previous or not previous.get("paper_id"):
        return None
    paper = store.get_paper(previous["paper_id"])
    when = date.fromisoformat(previous["day"])
    try:
        counts, people = fb.post_tally(store, channel, previous)
    except Exception:  # as with the pick: the digest goes out without the tally
        log.warning("reaction tally for %s failed", channel, exc_info=True)
        counts, people = {}, set()
    if counts:
        name = bk.esc(paper.short_name if paper else previous["paper_id"])
        n = len(people)
        return (f"How the team took the last pick ({when:%a %-d %b}), *{name}*: "
                f"{fb.format_tally(counts, feedback.weights)} from {n} {'person' if n == 1 else 'people'}.")
    if paper is None:
        return None
    return (f"Previous pick ({when:%a %-d %b}): *{bk.esc(paper.short_name)}*. "
            "React to today's paper to tell me what this team likes.")


def build_digest(store: Store, pick: DailyPick, channel: str, day: date, *, feedback: Feedback, now: float,
                 llm=None, command: str = "/paper") -> dict:
    """chat.postMessage arguments for the digest, metadata included."""
    ids = [pick.paper_id, *[c.paper_id for c in pick.shown]]
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
    if not club_meets(store, channel):
        blocks = bk.without_nominate(blocks)
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
    """Nothing left to pick: say so in the channel, once (not again on the following days).

    The row is claimed as `empty` at once and never retried, so this notice sits beside the
    machine rather than in it; it shares the finder and the sender."""
    key = day.isoformat()
    if not store.claim_post(channel, key, claimer=claimer, status=PostStatus.EMPTY, now=now.timestamp()):
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
                               already_posted=lambda: find_message(poster, channel, EVENT_TYPE, {"date": key}))
        store.set_post_abstract(channel, key, ts)  # keeps the notice's ts with the row
    except Exception as exc:
        log.error("could not tell %s there is nothing left to pick: %s", channel, _describe(exc))
    log.info("nothing left to pick for %s on %s", channel, key)
    return PostResult("empty", day)
