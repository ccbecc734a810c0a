"""Paper of the day: /paper interests, /paper schedule, /paper today, and the scheduled post.

The schedules table is the source of truth. `DailyService` mirrors it into an
APScheduler 3 BackgroundScheduler (one cron job per channel), rebuilds it at
start, applies changes from `/paper schedule` at once (and notices changes
made by other processes within a minute), and on start-up makes a post that
was missed by less than the catch-up window.

`post_daily` posts a channel's digest exactly once per (channel, local date):
- a claim row is inserted first; the database's primary key decides which
  process posts;
- 429s, 5xx and timeouts are retried with backoff for a bounded time;
- the message carries Slack metadata (event_type "paperclub_daily", the date
  and paper id), so after a crash, or a failure Slack may have accepted
  anyway, `conversations.history` tells whether it is already in the channel
  before anything is posted again.
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
from datetime import date, datetime, timedelta, timezone
from typing import Callable, Mapping

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler
from slack_sdk.models.blocks import ActionsBlock, Block, ButtonElement, DividerBlock, SectionBlock

from store.errors import PaperNotFound
from store.pick import DailyPick, like_text, pick_for_channel
from store.schedule import (
    DEFAULT_GRACE,
    ScheduleError,
    ScheduleSpec,
    catch_up,
    check_timezone,
    describe_next,
    format_duration,
    is_off,
    last_fire,
    local_today,
    make_trigger,
    next_fire,
    parse_schedule,
    post_date,
)

from . import blocks as bk
from .commands import Call, Deps, Reply, code, get_summary, has_words, problem_reply, resolve, subcommand

log = logging.getLogger("paperclub.daily")

EVENT_TYPE = "paperclub_daily"  # Slack message metadata on every daily post
ACTION_SAVE = "paper_save"  # the Save button (the reading list arrives with reactions)
MAX_INTERESTS = 50
MAX_INTEREST_CHARS = 200
CLAIM_LEASE = timedelta(minutes=30)  # a claim by another host older than this is taken over
POST_BUDGET = 600.0  # seconds the post loop keeps retrying before leaving it to the next start
LOOK_BACK = timedelta(hours=36)  # how far back a fresh claim looks for the day's post already in the channel
POLL_SECONDS = 60  # how often a running scheduler looks for schedules changed elsewhere
SWEEP_EVERY = 10  # every 10th poll retries today's failed or orphaned posts (within the window)
CONSOLE_CHANNEL = "console"

# Hooks for the reactions feature: each returns per-paper score adjustments (or
# (adjustment, reason) pairs) for a channel and day, or one line on how the team
# reacted to a previous post. Register by appending.
FeedbackSource = Callable[[object, str, date], Mapping]
ReactionLine = Callable[[object, str, dict], "str | None"]
FEEDBACK_SOURCES: list[FeedbackSource] = []
REACTION_LINES: list[ReactionLine] = []


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def _claimer_id() -> str:
    """Who holds a claim: host, pid, and a per-process token (a restarted container reuses pids)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


PROCESS_CLAIMER = _claimer_id()


def claimer_alive(claimer: str | None, claimed_at: float | None, now: datetime) -> bool:
    """Whether the process holding a claim may still be posting."""
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
    return claimed_at is not None and now.timestamp() - claimed_at < CLAIM_LEASE.total_seconds()


# -- channel settings ---------------------------------------------------------------------
def channel_of(call: Call) -> str:
    return call.channel_id or CONSOLE_CHANNEL


def spec_of(row: dict | None) -> ScheduleSpec | None:
    if not row:
        return None
    return ScheduleSpec(int(row["hour"]), int(row["minute"]), row["tz"], row["days"])


def channel_tz(store, channel: str, settings) -> str:
    """The zone a channel lives in: its schedule's, else PAPERCLUB_TIMEZONE (else UTC)."""
    spec = spec_of(store.get_schedule(channel))
    if spec:
        return spec.tz
    try:
        return check_timezone(getattr(settings, "timezone", None) or "UTC")
    except ScheduleError:
        return "UTC"


def grace_of(settings) -> timedelta:
    hours = getattr(settings, "catch_up_hours", None)
    return timedelta(hours=float(hours)) if hours is not None else DEFAULT_GRACE


def _vectors(searcher):
    """The searcher's in-memory (ids, matrix), so a pick does not reload every vector."""
    try:
        index = searcher.index()
        return index.ids, index.matrix
    except AttributeError:
        return None


def feedback_for(store, channel: str, day: date) -> dict:
    """Merged adjustments from every registered feedback source (none until reactions exist)."""
    merged: dict = {}
    for source in FEEDBACK_SOURCES:
        try:
            merged.update(source(store, channel, day) or {})
        except Exception:  # feedback is a refinement: a broken source must not stop the post
            log.warning("feedback source %s failed", getattr(source, "__name__", source), exc_info=True)
    return merged


def make_pick(store, searcher, channel: str, day: date) -> DailyPick | None:
    """The channel's pick for `day` from the current interests, history and feedback."""
    return pick_for_channel(store, searcher.embedder, channel, day, vectors=_vectors(searcher),
                            feedback=feedback_for(store, channel, day) or None)


# -- blocks -------------------------------------------------------------------------------
def mention(user: str) -> str:
    return f"<@{user}>" if user and user[0] in "UW" else f"@{user}"


def daily_buttons(paper, *, block_id: str) -> ActionsBlock:
    """Summary / More like this / Save for a paper in the digest."""
    buttons = bk.paper_buttons(paper, share=False, block_id=block_id)
    buttons.elements.append(ButtonElement(text="Save", action_id=ACTION_SAVE, value=paper.id))
    return buttons


def explanation(pick_or_choice) -> str:
    """The team-terms reason in mrkdwn (interest text escaped, members as mentions)."""
    choice = getattr(pick_or_choice, "choice", pick_or_choice)
    text = choice.explain(lambda u: "\x00" + u + "\x01")
    # Escape everything the pick wrote, then turn the placeholders into real mentions.
    text = bk.esc(text)
    while "\x00" in text:
        start = text.index("\x00")
        end = text.index("\x01", start)
        text = text[:start] + mention(text[start + 1:end]) + text[end + 1:]
    return text


def reaction_line(store, channel: str, day: date) -> str | None:
    """One line on the previous post: what the reaction hooks say, else which paper it was."""
    previous = store.previous_post(channel, day.isoformat())
    if not previous:
        return None
    for hook in REACTION_LINES:
        try:
            line = hook(store, channel, previous)
        except Exception:
            log.warning("reaction line hook failed", exc_info=True)
            continue
        if line:
            return line
    paper = store.get_paper(previous["paper_id"]) if previous.get("paper_id") else None
    if paper is None:
        return None
    when = date.fromisoformat(previous["day"])
    return (f"Previous pick ({when:%a %-d %b}): *{bk.esc(paper.short_name)}*. "
            "React to today's paper to tell me what this team likes.")


def digest_blocks(store, pick: DailyPick, papers: dict, *, summary=None, command: str = "/paper",
                  previous: str | None = None, preview: str | None = None) -> list[Block]:
    """The channel's daily digest: the paper in full, two runners-up, how the last one went."""
    paper = papers[pick.paper_id]
    title = "Exploration day" if pick.exploration else "Paper of the day"
    blocks: list[Block] = [bk.header(f"{title} · {pick.day:%a %-d %b}")]
    if preview:
        blocks.append(bk.context(preview))
    blocks.append(bk.section(
        f"*{bk.esc(bk.cut_words(paper.short_name, 120))}*  ·  {bk.esc(bk.venue(paper)) or 'paper'}\n"
        f"{bk.esc(bk.cut_sentences(paper.headline, 600))}", block_id=f"daily-{paper.id}"[:255]))
    tldr = getattr(summary, "tldr", None)
    if tldr:
        blocks.append(bk.section(f"*TL;DR* {bk.esc(bk.cut_sentences(tldr, bk.SECTION_TEXT - 20))}"))
    fields = bk._points_fields(getattr(summary, "points", None))
    if fields:
        blocks.append(SectionBlock(fields=fields))
    icon = ":compass:" if pick.exploration else ":dart:"
    blocks.append(bk.context(f"{icon} _Why:_ {explanation(pick)}", f"id `{bk.esc(paper.id)}`",
                             bk.paper_links(paper)))
    blocks.append(daily_buttons(paper, block_id=f"daily-act-{paper.id}"[:255]))
    if pick.no_interests:
        blocks.append(bk.context(
            f"No interests yet, so I picked for breadth. Tell me what this team reads: "
            f"{code(command + ' interests add <topic>')} or {code(command + ' interests add like <paper>')}."))
    runners = [(c, papers[c.paper_id]) for c in pick.runners_up if c.paper_id in papers]
    if runners:
        blocks.append(DividerBlock())
        blocks.append(bk.context("*Also today*"))
        for i, (choice, p) in enumerate(runners, start=1):
            blocks.append(bk.section(
                f"*{bk.esc(bk.cut_words(p.short_name, 80))}*: {bk.esc(bk.cut_words(p.headline, 160))}  "
                f"_({explanation(choice)})_", block_id=f"daily-ru{i}-{p.id}"[:255]))
            blocks.append(daily_buttons(p, block_id=f"daily-ru{i}-act-{p.id}"[:255]))
    if previous:
        blocks.append(DividerBlock())
        blocks.append(bk.context(previous))
    return blocks[: bk.MAX_MESSAGE_BLOCKS]


def digest_text(pick: DailyPick, paper) -> str:
    """The notification text of the digest."""
    kind = "Exploration day" if pick.exploration else "Paper of the day"
    return f"{kind}: {paper.short_name}: {paper.headline}"


def abstract_blocks(paper) -> list[Block]:
    """The thread reply under the digest: the abstract, the full title, links."""
    blocks: list[Block] = [bk.section("*Abstract*\n" + bk.esc(bk.cut_sentences(paper.abstract, bk.ABSTRACT_TEXT)))]
    extra = []
    if paper.title and paper.title != paper.headline:
        extra.append(f"_{bk.esc(bk.cut_words(paper.title, 300))}_")
    links = bk.paper_links(paper)
    if links:
        extra.append(links)
    if extra:
        blocks.append(bk.context(*extra))
    return blocks


def empty_blocks(command: str) -> list[Block]:
    return bk.message_blocks(
        "I have shown this channel every paper in the library, so there is no paper of the day. "
        f"Add more abstracts with `paperclub ingest FILE`, and the next post picks up from there.",
        footer=f"{code(command + ' schedule off')} pauses the daily post.")


# -- posting exactly once -------------------------------------------------------------------
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
    return WebClient(token=client.token, base_url=client.base_url, timeout=client.timeout,
                     ssl=client.ssl, proxy=client.proxy, headers=dict(client.headers or {}),
                     retry_handlers=[RateLimitErrorRetryHandler(max_retry_count=2)])


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


def find_daily_message(client: WebClient, channel: str, day: date, *, oldest: float | None = None) -> str | None:
    """The ts of this day's digest if it is already in the channel (found by its metadata)."""
    cursor = None
    for _ in range(5):  # a few pages of recent history is plenty: the post is from today
        kwargs = dict(channel=channel, include_all_metadata=True, limit=200)
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
        if not cursor:
            return None
    return None


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


def post_daily(client: WebClient, store, searcher, channel: str, now: datetime, *,
               day: date | None = None, settings=None, llm=None, claimer: str = PROCESS_CLAIMER,
               budget: float = POST_BUDGET, sleep: Callable[[float], None] = time.sleep) -> PostResult:
    """Post the channel's paper of the day for `day` (default: today in its zone) exactly once."""
    day = day or local_today(channel_tz(store, channel, settings), now)
    lock = _day_lock(channel, day.isoformat())
    if not lock.acquire(blocking=False):
        return PostResult("busy", day, detail="this process is already posting it")
    try:
        return _post_daily(client, store, searcher, channel, now, day, settings, llm, claimer, budget, sleep)
    finally:
        lock.release()


def _post_daily(client, store, searcher, channel, now, day, settings, llm, claimer, budget, sleep) -> PostResult:
    key = day.isoformat()
    command = getattr(settings, "command", None) or "/paper"
    row = store.get_post(channel, key)
    for _ in range(2):  # a second round only when a concurrent pick took "our" paper
        if row is not None:
            break
        pick = make_pick(store, searcher, channel, day)
        if pick is None:
            return _post_empty(client, store, channel, day, claimer, now, command, budget, sleep)
        if store.claim_post(channel, key, claimer=claimer, paper_id=pick.paper_id, pick=pick.to_dict(),
                            now=now.timestamp()):
            log.info("claimed %s for %s: %s (%s)", key, channel, pick.paper_id, pick.explain())
            return _deliver(client, store, channel, day, claimer, pick.to_dict(), llm, command,
                            budget, sleep, recover=False, claimed_at=now.timestamp(), now=now.timestamp())
        row = store.get_post(channel, key)
    if row is None:
        return PostResult("busy", day, detail="could not claim the day")
    if row["status"] == "posted":
        return PostResult("already", day, row["paper_id"], row["ts"])
    if row["status"] == "empty":
        return PostResult("empty", day)
    if row["claimed_by"] != claimer:
        if row["status"] == "claimed" and claimer_alive(row["claimed_by"], row["claimed_at"], now):
            return PostResult("busy", day, row["paper_id"], detail=f"claimed by {row['claimed_by']}")
        if not store.take_over_post(channel, key, old_claimer=row["claimed_by"], claimer=claimer,
                                    now=now.timestamp()):
            return PostResult("busy", day, row["paper_id"], detail="another process took it over")
        log.info("took over the %s post for %s from %s", key, channel, row["claimed_by"])
    return _deliver(client, store, channel, day, claimer, row["pick"], llm, command, budget, sleep,
                    recover=True, claimed_at=row["claimed_at"], now=now.timestamp())


def _deliver(client, store, channel, day, claimer, pick_data, llm, command, budget, sleep, *,
             recover: bool, claimed_at: float | None = None, now: float) -> PostResult:
    """Post the claimed pick (or find it already posted), record the ts, add the abstract."""
    key = day.isoformat()
    pick = DailyPick.from_dict(pick_data, channel, day)
    poster = _posting_client(client)
    # A fresh claim looks too: a database restored from a backup (or a second copy of it)
    # has no row for a post that is already in the channel.
    since = claimed_at if recover or claimed_at is None else claimed_at - LOOK_BACK.total_seconds()
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
            message = build_digest(store, pick, channel, day, llm=llm, command=command)
            ts = send_with_retries(poster, message, budget=budget, sleep=sleep, already_posted=look,
                                   unsure=unsure)
        except Exception as exc:
            store.fail_post(channel, key, claimer=claimer, error=_describe(exc))
            log.error("the %s paper of the day for %s was not posted: %s", key, channel, _describe(exc))
            return PostResult("failed", day, pick.paper_id, detail=_describe(exc))
    if not store.finish_post(channel, key, claimer=claimer, ts=ts, now=now):
        log.warning("the %s post for %s went out (ts %s) but the claim had moved on", key, channel, ts)
    paper = store.get_paper(pick.paper_id)
    if paper is not None and paper.abstract:
        try:
            reply = send_with_retries(poster, {
                "channel": channel, "thread_ts": ts, "text": f"Abstract of {paper.short_name}",
                "blocks": [b.to_dict() for b in abstract_blocks(paper)],
                "unfurl_links": False, "unfurl_media": False}, budget=min(budget, 60.0), sleep=sleep)
            store.set_post_abstract(channel, key, reply)
        except Exception as exc:  # the digest is out; a missing abstract reply is not worth a retry storm
            log.warning("abstract reply for %s %s failed: %s", channel, key, _describe(exc))
    log.info("paper of the day %s for %s: %s (ts %s)", key, channel, pick.paper_id, ts)
    return PostResult(status, day, pick.paper_id, ts)


def paper_summary(store, paper, llm=None):
    """TL;DR and key points from store.summary when it is there; None otherwise or on failure."""
    from store.summary import paper_summary as summarize_cached

    try:
        return summarize_cached(store, paper, llm=llm, now=time.time())
    except Exception:  # the digest goes out without a TL;DR rather than not at all
        log.warning("summary failed for %s; posting without it", paper.id, exc_info=True)
        return None


def build_digest(store, pick: DailyPick, channel: str, day: date, *, llm=None, command="/paper") -> dict:
    """chat.postMessage arguments for the digest, metadata included."""
    ids = [pick.paper_id, *[c.paper_id for c in pick.runners_up]]
    papers = {p.id: p for p in store.get_papers(ids)}
    if pick.paper_id not in papers:
        raise PaperNotFound(f"paper {pick.paper_id} is no longer in the library")
    paper = papers[pick.paper_id]
    summary = paper_summary(store, paper, llm)
    blocks = digest_blocks(store, pick, papers, summary=summary, command=command,
                           previous=reaction_line(store, channel, day))
    return {
        "channel": channel,
        "text": bk.fallback_text(digest_text(pick, paper)),
        "blocks": [b.to_dict() for b in blocks],
        "metadata": {"event_type": EVENT_TYPE,
                     "event_payload": {"date": day.isoformat(), "paper_id": pick.paper_id}},
        "unfurl_links": False,
        "unfurl_media": False,
    }


def _post_empty(client, store, channel, day, claimer, now, command, budget, sleep) -> PostResult:
    """Nothing left to pick: say so in the channel, once (not again on the following days)."""
    key = day.isoformat()
    if not store.claim_post(channel, key, claimer=claimer, paper_id=None, pick=None, status="empty",
                            now=now.timestamp()):
        return PostResult("empty", day)
    before = store.post_days(channel, (day - timedelta(days=7)).isoformat())
    if any(s == "empty" and d < key for d, s in before.items()):
        log.info("nothing left to pick for %s on %s (already said so)", channel, key)
        return PostResult("empty", day, detail="already said")
    poster = _posting_client(client)
    message = {"channel": channel, "text": "No paper of the day: every paper has been shown here.",
               "blocks": [b.to_dict() for b in empty_blocks(command)],
               "metadata": {"event_type": EVENT_TYPE, "event_payload": {"date": key, "paper_id": None}}}
    try:
        ts = send_with_retries(poster, message, budget=budget, sleep=sleep,
                               already_posted=lambda: find_daily_message(poster, channel, day))
        store.set_post_abstract(channel, key, ts)  # keeps the notice's ts with the row
    except Exception as exc:
        log.error("could not tell %s there is nothing left to pick: %s", channel, _describe(exc))
    log.info("nothing left to pick for %s on %s", channel, key)
    return PostResult("empty", day)


# -- the scheduler -------------------------------------------------------------------------
class DailyService:
    """APScheduler jobs mirroring the schedules table, plus catch-up and exactly-once posting."""

    def __init__(self, client: WebClient, store, searcher, settings, *, llm=None,
                 clock: Callable[[], datetime] = utc_now, sleep: Callable[[float], None] = time.sleep,
                 budget: float = POST_BUDGET, poll_seconds: float = POLL_SECONDS):
        from apscheduler.schedulers.background import BackgroundScheduler

        self.client, self.store, self.searcher, self.settings, self.llm = client, store, searcher, settings, llm
        self.clock, self.sleep, self.budget, self.poll_seconds = clock, sleep, budget, poll_seconds
        self.grace = grace_of(settings)
        self.scheduler = BackgroundScheduler(timezone=timezone.utc, job_defaults={
            "coalesce": True, "max_instances": 1,
            "misfire_grace_time": int(self.grace.total_seconds())})
        self._version: int | None = None
        self._polls = 0
        self._lock = threading.RLock()
        self.results: list[PostResult] = []  # recent outcomes, for tests and `health`

    @staticmethod
    def job_id(channel: str) -> str:
        return f"post:{channel}"

    def start(self) -> None:
        """Build the jobs from the table, start the scheduler, then make any post missed by downtime."""
        self.rebuild()
        self.scheduler.start()
        self.scheduler.add_job(self.poll, "interval", seconds=self.poll_seconds, id="daily:poll",
                               replace_existing=True)
        log.info("daily posts scheduled for %d channel(s)", len(self.store.schedules()))
        # Catch-up may retry Slack for minutes: run it on the scheduler's pool, not the caller's thread.
        self.scheduler.add_job(self.catch_up_now, id="daily:catch-up", replace_existing=True)

    def catch_up_now(self) -> list[PostResult]:
        return self.catch_up(self.clock())

    def shutdown(self) -> None:
        if self.scheduler.running:
            self.scheduler.shutdown(wait=False)

    def rebuild(self) -> None:
        """Make the jobs match the schedules table exactly."""
        with self._lock:
            self._version = self.store.schedules_version()
            rows = {r["channel"]: r for r in self.store.schedules()}
            for job in self.scheduler.get_jobs():
                if job.id.startswith("post:") and job.id[5:] not in rows:
                    job.remove()
            for channel, row in rows.items():
                self._put_job(channel, spec_of(row))

    def reload(self, channel: str) -> None:
        """Apply one channel's schedule change now (called by /paper schedule)."""
        with self._lock:
            spec = spec_of(self.store.get_schedule(channel))
            if spec is None:
                if self.scheduler.get_job(self.job_id(channel)):
                    self.scheduler.remove_job(self.job_id(channel))
            else:
                self._put_job(channel, spec)
            self._version = self.store.schedules_version()

    def poll(self) -> None:
        """Pick up schedules changed by another process; now and then retry a failed post."""
        if self.store.schedules_version() != self._version:
            self.rebuild()
        self._polls += 1
        if self._polls % SWEEP_EVERY == 0:
            # A post that failed (Slack down longer than the retry budget) or whose poster died
            # gets another go while it is still within the catch-up window.
            self.catch_up(self.clock(), quiet=True)

    def _put_job(self, channel: str, spec: ScheduleSpec) -> None:
        self.scheduler.add_job(self.fire, make_trigger(spec), args=[channel], id=self.job_id(channel),
                               name=f"paper of the day for {channel} at {spec.describe()}",
                               replace_existing=True)

    def next_run(self, channel: str) -> datetime | None:
        job = self.scheduler.get_job(self.job_id(channel))
        return getattr(job, "next_run_time", None) if job else None

    def run_now(self, channel: str) -> None:
        """Have the scheduler run this channel's job at once (tests, with an injected clock)."""
        self.scheduler.modify_job(self.job_id(channel), next_run_time=utc_now())

    def fire(self, channel: str) -> PostResult | None:
        """The cron job: post today's paper for the fire that just passed (if within the window)."""
        now = self.clock()
        spec = spec_of(self.store.get_schedule(channel))
        if spec is None:
            return None
        fire = last_fire(spec, now)
        if fire is None or now - fire > self.grace:
            log.info("skipping the %s post: its scheduled time is more than %s past",
                     channel, format_duration(self.grace))
            return None
        return self._post(channel, post_date(spec, fire), now)

    def catch_up(self, now: datetime, *, quiet: bool = False) -> list[PostResult]:
        """On start-up: make each missed post once if it is less than `grace` late, else log it."""
        results = []
        for row in self.store.schedules():
            channel, spec = row["channel"], spec_of(row)
            since_day = (now - timedelta(days=9)).date().isoformat()
            days = self.store.post_days(channel, since_day)
            done = {date.fromisoformat(d) for d, s in days.items() if s in ("posted", "empty")}
            since = datetime.fromtimestamp(row["updated_at"], timezone.utc) if row.get("updated_at") else None
            decision = catch_up(spec, now, done_days=done, since=since, grace=self.grace)
            if decision.action == "post":
                log.info("catching up the %s post for %s (%s late)", decision.day, channel,
                         format_duration(decision.late))
                results.append(self._post(channel, decision.day, now))
            elif decision.action == "skip" and not quiet:
                log.info("skipping the missed %s post for %s: %s late, more than the %s catch-up window "
                         "(PAPERCLUB_CATCH_UP_HOURS)", decision.day, channel,
                         format_duration(decision.late), format_duration(self.grace))
        return results

    def _post(self, channel: str, day: date, now: datetime) -> PostResult:
        try:
            result = post_daily(self.client, self.store, self.searcher, channel, now, day=day,
                                settings=self.settings, llm=self.llm, budget=self.budget, sleep=self.sleep)
        except Exception as exc:  # a scheduler job must never die silently
            log.error("daily post for %s on %s failed: %s", channel, day, exc, exc_info=True)
            result = PostResult("failed", day, detail=str(exc))
        with self._lock:
            self.results = (self.results + [result])[-50:]
        return result


def register(app, deps: Deps) -> None:
    """bot.app extension hook: a (not yet started) DailyService on deps, and the Save button."""
    deps.daily = DailyService(app.client, deps.store, deps.searcher, deps.settings, llm=deps.llm)

    @app.action(ACTION_SAVE)
    def handle_save_button(ack, action, body, respond):
        ack()
        paper = deps.store.get_paper((action.get("value") or "").strip())
        user = (body.get("user") or {}).get("id") or ""
        if paper is None:
            respond(text="That paper is no longer in the library.", response_type="ephemeral",
                    replace_original=False)
            return
        save = getattr(deps.store, "save_paper", None)
        if save is not None:
            save(user, paper.id, now=time.time())
            text = f"Saved *{bk.esc(paper.short_name)}* to your reading list."
        else:
            text = (f"Noted *{bk.esc(paper.short_name)}*. Find it again any time with "
                    f"{code(deps.command + ' summary ' + paper.id)}.")
        respond(text=text, response_type="ephemeral", replace_original=False)


# -- who may change what -------------------------------------------------------------------
def is_admin(deps: Deps, user: str) -> bool:
    """PAPERCLUB_ADMINS lists who may change schedules and remove others' interests; empty: everyone."""
    admins = getattr(deps.settings, "admin_ids", None) or set()
    return not admins or user in admins


def _admins_only(deps: Deps, what: str) -> Reply:
    admins = sorted(getattr(deps.settings, "admin_ids", None) or [])
    who = ", ".join(mention(a) for a in admins[:5])
    return problem_reply(deps, f"Only the reading group's admins can {what} here.",
                         hint=f"Ask {who}." if who else None)


# -- /paper interests -------------------------------------------------------------------------
def _interest_lines(rows: list[dict]) -> str:
    lines = []
    for n, row in enumerate(rows, start=1):
        who = f" (added by {mention(row['added_by'])})" if row.get("added_by") else ""
        lines.append(f"{n}. *{bk.esc(row['text'])}*{who}")
    return "\n".join(lines)


def _interests_reply(deps: Deps, channel: str, *, note: str | None = None) -> Reply:
    rows = deps.store.interests(channel)
    cmd = deps.command
    footer = (f"{code(cmd + ' interests add <topic>')} · {code(cmd + ' interests add like <paper>')} · "
              f"{code(cmd + ' interests remove <number>')}")
    if not rows:
        text = ("This channel has no interests yet, so the paper of the day is picked for breadth. "
                "Add the topics your team reads, in your own words, or name a paper you liked.")
        if note:
            text = f"{note}\n{text}"
        return Reply("No interests yet.", bk.message_blocks(text, title="Interests", footer=footer))
    blocks = [bk.header(f"Interests of this channel ({len(rows)})")]
    if note:
        blocks.append(bk.section(note))
    blocks.append(bk.section(_interest_lines(rows)))
    blocks.append(bk.context("Each day I pick the paper that best matches one member's interests, "
                             "taking turns so everyone is served.", footer))
    return Reply(f"{len(rows)} interests: " + "; ".join(r["text"] for r in rows), blocks)


def _closest(deps: Deps, vector, exclude: str | None = None) -> str:
    try:
        hits = deps.searcher.index().search(vector, 4, exclude=exclude)
    except Exception:
        return ""
    papers = {p.id: p for p in deps.store.get_papers([pid for pid, _ in hits])}
    names = [f"*{bk.esc(papers[pid].short_name)}* ({score:.2f})" for pid, score in hits[:3] if pid in papers]
    return f"Closest papers right now: {', '.join(names)}." if names else ""


def _add_interest(deps: Deps, call: Call, text: str) -> Reply:
    channel = channel_of(call)
    rows = deps.store.interests(channel)
    if len(rows) >= MAX_INTERESTS:
        return problem_reply(deps, f"This channel already has {MAX_INTERESTS} interests; remove one first.",
                             hint=code(deps.command + " interests remove <number>"))
    embedder = deps.searcher.embedder
    like = text.lower().startswith("like ") or text.lower() == "like"
    if like:
        ref = text[5:].strip() if len(text) > 4 else ""
        if not has_words(ref):
            return problem_reply(deps, "Which paper? Give its id, short name or some words from it.",
                                 hint=code(deps.command + " interests add like temporal video grounding"))
        paper, note = resolve(deps, ref)
        label = like_text(paper)
        vector = deps.store.get_vector(paper.id, embedder.name)
        if vector is None:
            vector = embedder.encode([f"{paper.headline}. {paper.abstract}"])[0]
        paper_id = paper.id
    else:
        label = bk.cut_words(text, MAX_INTEREST_CHARS)
        if not has_words(label):
            return problem_reply(deps, "What topic? Describe it in a few words.",
                                 hint=code(deps.command + " interests add video understanding"))
        vector, paper_id, note = deps.searcher.embed_query(label), None, None
    if any(r["text"].lower() == label.lower() for r in rows):
        return _interests_reply(deps, channel, note=f"*{bk.esc(label)}* is already on the list.")
    deps.store.add_interest(channel, label, call.user_id or None, model=embedder.name, vector=vector,
                            paper_id=paper_id, now=time.time())
    said = f"Added *{bk.esc(label)}*." + (f" {note}" if note else "")
    closest = _closest(deps, vector, exclude=paper_id)
    return _interests_reply(deps, channel, note=f"{said} {closest}".strip())


def _remove_interest(deps: Deps, call: Call, arg: str) -> Reply:
    channel = channel_of(call)
    rows = deps.store.interests(channel)
    number = arg.strip().lstrip("#")
    if not number.isdigit() or not 1 <= int(number) <= len(rows):
        have = f"this channel has {len(rows)}" if rows else "this channel has none"
        return problem_reply(deps, f"There is no interest {bk.esc(arg) or '(no number)'}; {have}.",
                             hint=f"{code(deps.command + ' interests')} lists them with their numbers.")
    row = rows[int(number) - 1]
    if row.get("added_by") != call.user_id and not is_admin(deps, call.user_id):
        return _admins_only(deps, "remove an interest someone else added")
    deps.store.remove_interest(channel, row["id"])
    who = f" (added by {mention(row['added_by'])})" if row.get("added_by") else ""
    return _interests_reply(deps, channel, note=f"Removed {number}. *{bk.esc(row['text'])}*{who}.")


@subcommand("interests", usage="interests [add <topic> | add like <paper> | remove <n>]",
            example="interests add video understanding",
            help="The topics this channel reads; the paper of the day serves each member's in turn.",
            aliases=("interest", "topics"))
def handle_interests(deps: Deps, call: Call) -> Reply:
    verb, _, rest = call.args.partition(" ")
    verb = verb.lower()
    if not verb or verb in ("list", "show", "ls"):
        return _interests_reply(deps, channel_of(call))
    if verb in ("add", "+"):
        return _add_interest(deps, call, rest.strip())
    if verb in ("remove", "rm", "delete", "del", "-"):
        return _remove_interest(deps, call, rest)
    return _add_interest(deps, call, call.args.strip())  # "/paper interests diffusion" adds it


# -- /paper schedule --------------------------------------------------------------------------
def _clock(deps: Deps) -> datetime:
    service = getattr(deps, "daily", None)
    return service.clock() if service is not None else utc_now()


def _schedule_usage(deps: Deps) -> str:
    return f"{code(deps.command + ' schedule 09:30 Europe/Berlin weekdays')} or {code(deps.command + ' schedule off')}"


@subcommand("schedule", usage="schedule [HH:MM [time zone] [daily|weekdays] | off]",
            example="schedule 09:30 Europe/Berlin weekdays",
            help="When this channel gets its paper of the day (or turn it off).", aliases=("daily", "when"))
def handle_schedule(deps: Deps, call: Call) -> Reply:
    channel = channel_of(call)
    now = _clock(deps)
    service = getattr(deps, "daily", None)
    if not call.args.strip():
        spec = spec_of(deps.store.get_schedule(channel))
        if spec is None:
            return Reply("No daily paper here yet.", bk.message_blocks(
                "This channel has no paper of the day yet.", footer=f"Set one: {_schedule_usage(deps)}"))
        text = (f"The paper of the day comes at *{spec.describe()}*.\n"
                f"Next post: {bk.esc(describe_next(spec, now))}.")
        return Reply(f"Daily paper: {spec.describe()}", bk.message_blocks(text, footer=_schedule_usage(deps)))
    if not call.channel_id:
        return problem_reply(deps, "Schedules belong to a Slack channel: set one from the channel "
                             "that should get the paper of the day.", hint=_schedule_usage(deps))
    if not is_admin(deps, call.user_id):
        return _admins_only(deps, "change the paper of the day's schedule")
    if is_off(call.args):
        had = deps.store.delete_schedule(channel)
        if service is not None:
            service.reload(channel)
        if not had:
            return Reply("There was no daily paper to turn off.", bk.message_blocks(
                "This channel had no paper of the day, so there was nothing to turn off."))
        text = f"{mention(call.user_id)} turned the paper of the day off for this channel."
        return Reply(text, bk.message_blocks(text, footer=f"Turn it back on with {_schedule_usage(deps).split(' or ')[0]}."),
                     in_channel=True)
    try:
        default_tz = getattr(deps.settings, "timezone", None) or "UTC"
        spec = parse_schedule(call.args, default_tz)
    except ScheduleError as e:
        return problem_reply(deps, str(e), hint=_schedule_usage(deps))
    deps.store.set_schedule(channel, hour=spec.hour, minute=spec.minute, tz=spec.tz, days=spec.days,
                            set_by=call.user_id or None, now=now.timestamp())
    if service is not None:
        service.reload(channel)
    text = (f"{mention(call.user_id)} set the paper of the day to *{spec.describe()}*.\n"
            f"First post: {bk.esc(describe_next(spec, now))}.")
    footer = f"{code(deps.command + ' today')} previews it; {code(deps.command + ' interests')} steers it."
    return Reply(f"Paper of the day: {spec.describe()}", bk.message_blocks(text, footer=footer), in_channel=True)


# -- /paper today ------------------------------------------------------------------------------
def _permalink(deps: Deps, channel: str, ts: str) -> str | None:
    service = getattr(deps, "daily", None)
    if service is None:
        return None
    try:
        return service.client.chat_getPermalink(channel=channel, message_ts=ts).get("permalink")
    except Exception:
        return None


@subcommand("today", usage="today", example="today",
            help="This channel's paper of the day, and why it was picked.", aliases=("pick", "potd"))
def handle_today(deps: Deps, call: Call) -> Reply:
    channel = channel_of(call)
    now = _clock(deps)
    tz = channel_tz(deps.store, channel, deps.settings)
    day = local_today(tz, now)
    row = deps.store.get_post(channel, day.isoformat())
    spec = spec_of(deps.store.get_schedule(channel))
    if row is None and spec is not None:
        day = post_date(spec, next_fire(spec, now))  # today's post is done or not a posting day
        row = deps.store.get_post(channel, day.isoformat())
    if row and row["status"] == "posted" and row.get("pick"):
        pick = DailyPick.from_dict(row["pick"], channel, day)
        paper = deps.store.get_paper(pick.paper_id)
        link = _permalink(deps, channel, row["ts"])
        where = f"<{link}|posted here>" if link else f"posted in <#{channel}>" if channel[0] in "CG" else "posted"
        name = bk.esc(paper.short_name if paper else pick.paper_id)
        text = f"Today's paper is *{name}*, {where}.\n_Why:_ {explanation(pick)}"
        return Reply(f"Today's paper: {paper.short_name if paper else pick.paper_id}",
                     bk.message_blocks(text))
    if row and row["status"] == "empty":
        return Reply("Nothing left to pick.", empty_blocks(deps.command))
    if row and row.get("pick"):
        pick = DailyPick.from_dict(row["pick"], channel, day)
        status = ("it is being posted right now." if row["status"] == "claimed" else
                  "Slack did not take it yet; it will be retried.")
    else:
        pick = make_pick(deps.store, deps.searcher, channel, day)
        if pick is None:
            return Reply("Nothing left to pick.", empty_blocks(deps.command))
        status = (f"it posts {bk.esc(describe_next(spec, now))}." if spec else
                  f"this channel has no schedule yet: {_schedule_usage(deps)}")
    ids = [pick.paper_id, *[c.paper_id for c in pick.runners_up]]
    papers = {p.id: p for p in deps.store.get_papers(ids)}
    if pick.paper_id not in papers:
        raise PaperNotFound("Today's paper is no longer in the library.")
    summary = get_summary(deps, papers[pick.paper_id])
    blocks = digest_blocks(deps.store, pick, papers, summary=summary, command=deps.command,
                           preview=f"Preview (only you see this): {status}")
    return Reply(f"Today's pick: {papers[pick.paper_id].short_name}", blocks)
