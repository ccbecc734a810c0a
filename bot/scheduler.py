"""The scheduler: one APScheduler BackgroundScheduler running the bot's jobs, built from `Deps`.

`DailyService` keeps one cron job per channel for the paper of the day: it
rebuilds them at start, applies a change from `/paper schedule` at once
(`deps.reschedule` calls `reload`) and notices changes made by other processes
within a minute, and on start-up makes a post that was missed by less than the
catch-up window. Each job calls `bot.posting.post_day`.

It composes the other jobs, each in its own home: the sweeps' lease
(bot/lease.py), the feed polls (bot/feed_polls.py) and the club's tick
(bot/club/posts.py, every minute). With several replicas on one database, each
replica runs the cron jobs (the post's claim row decides who makes it), but the
sweeps (the retry of failed and orphaned posts, the catch-up, the feed polls,
the club's tick) run only on the replica that holds the lease; a replica that
takes the lease over runs the catch-up at once, which picks up a post its dead
holder left half-made.
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import replace
from datetime import date, datetime, timedelta, timezone
from typing import TYPE_CHECKING, Callable

from store.errors import LeaseLost, StoreError
from store.posts import DAY_DONE
from store.schedule import (
    DEFAULT_GRACE,
    ScheduleSpec,
    catch_up,
    format_duration,
    last_fire,
    make_trigger,
    post_date,
)

from .club import club_tick
from .feed_polls import FeedPolls
from .replica import forget_silent_replicas
from .lease import LEASE_SECONDS, SweepLease
from .posting import POST_BUDGET, PostResult, post_day, refused_lately

if TYPE_CHECKING:
    from store import Store
    from store.lease import Lease

    from .config import Settings
    from .deps import Deps

log = logging.getLogger("paperclub.daily")

POLL_SECONDS = 60  # how often a running scheduler looks for schedules changed elsewhere
SWEEP_EVERY = 10  # every 10th poll retries today's failed or orphaned posts (within the window)


def _grace(settings: Settings | None) -> timedelta:
    """PAPERCLUB_CATCH_UP_HOURS as a timedelta."""
    hours = getattr(settings, "catch_up_hours", None)
    return timedelta(hours=float(hours)) if hours is not None else DEFAULT_GRACE


class DailyService:
    """APScheduler jobs mirroring the schedules table, plus catch-up and exactly-once posting;
    the lease, the feed polls and the club's tick run on the same scheduler."""

    def __init__(self, deps: Deps, *, sleep: Callable[[float], None] = time.sleep, budget: float = POST_BUDGET):
        from apscheduler.schedulers.background import BackgroundScheduler

        if deps.slack is None:
            raise ValueError("the scheduler posts to Slack: build its Deps with a Slack client")
        settings = deps.settings
        self.deps, self.client, self.store, self.clock = deps, deps.slack, deps.store, deps.clock
        self.sleep, self.budget = sleep, budget
        sweep = float(getattr(settings, "sweep_seconds", None) or POLL_SECONDS * SWEEP_EVERY)
        self.poll_seconds = min(POLL_SECONDS, sweep / SWEEP_EVERY)
        self.grace = _grace(settings)
        self.scheduler = BackgroundScheduler(timezone=timezone.utc, job_defaults={
            "coalesce": True, "max_instances": 1,
            "misfire_grace_time": int(self.grace.total_seconds())})
        self._version: int | None = None
        self._polls = 0
        self._lock = threading.RLock()
        self.results: list[PostResult] = []  # recent outcomes, for tests and `health`
        self.sweeps = SweepLease(deps.store, deps.replica, deps.clock,
                                 ttl=float(getattr(settings, "lease_seconds", None) or LEASE_SECONDS),
                                 on_gain=self._lease_gained)
        self.feeds = FeedPolls(deps.sources, deps.searcher.embedder, deps.clock, self.sweeps) \
            if deps.sources is not None else None
        deps.reschedule.listen(self.reload)  # /paper schedule applies its change here at once

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
        # The sweeps' lease: taken now if free (then the catch-up runs at once, on the scheduler's
        # pool: it may retry Slack for minutes), and renewed, or waited for, every ttl/3.
        self.sweeps.start()
        if self.feeds is not None:
            self.feeds.add_jobs(self.scheduler)
        # The reading group's posts: every minute, and once on taking the lease (take_over_now: a step
        # missed by downtime within bot.club.posts.CLUB_GRACE goes out late rather than never).
        self.scheduler.add_job(self.club_tick_now, "interval", seconds=60, id="club:tick", replace_existing=True)

    # -- the sweeps' lease (bot/lease.py) -------------------------------------------------------
    def _lease_gained(self) -> None:
        if self.scheduler.running:  # the catch-up a dead holder may have left half-done
            self.scheduler.add_job(self.take_over_now, id="lease:catch-up", replace_existing=True)

    @property
    def lease(self) -> Lease | None:
        """The sweeps' lease as this replica last took or renewed it (None: another replica's)."""
        return self.sweeps.held

    def release_lease(self) -> bool:
        """Stop renewing and hand the lease over at once (a clean shutdown); True if it was ours."""
        return self.sweeps.release()

    def take_over_now(self) -> None:
        """What the replica that gains the lease does first: the catch-up, the club's tick, then the
        feed polls its dead holder left unfinished (or that no replica was up for)."""
        self.catch_up_now()
        self.club_tick_now()
        self.catch_up_feeds_now()

    # -- the feed polls (bot/feed_polls.py) -----------------------------------------------------
    def poll_feeds_now(self, kinds: tuple[str, ...] = ("arxiv", "openreview"), *, due_only: bool = False) -> dict:
        """The feeds job now (see FeedPolls.poll_now); {} without sources."""
        return self.feeds.poll_now(kinds, due_only=due_only) if self.feeds is not None else {}

    def catch_up_feeds_now(self) -> dict:
        return self.feeds.catch_up_now() if self.feeds is not None else {}

    # -- the club's tick (bot/club/posts.py) ----------------------------------------------------
    def club_tick_now(self) -> list:
        """The clubs' due posts (agenda, winner, reminder, thread, recap), each exactly once."""
        def tick(store):
            return club_tick(replace(self.deps, store=store), self.client, self.clock(), budget=self.budget,
                             sleep=self.sleep)
        return self.sweeps.under("club tick", tick, [])

    # -- the paper of the day -------------------------------------------------------------------
    def catch_up_now(self) -> list[PostResult]:
        return self.catch_up(self.clock())

    def shutdown(self) -> None:
        self.deps.reschedule.forget(self.reload)
        if self.scheduler.running:
            self.scheduler.shutdown(wait=False)
        self.release_lease()

    def rebuild(self) -> None:
        """Make the jobs match the schedules table exactly."""
        with self._lock:
            self._version = self.store.schedules_version()
            rows = {r["channel"]: r for r in self.store.schedules()}
            for job in self.scheduler.get_jobs():
                if job.id.startswith("post:") and job.id[5:] not in rows:
                    job.remove()
            for channel, row in rows.items():
                self._put_job(channel, ScheduleSpec.from_row(row))

    def reload(self, channel: str) -> None:
        """Apply one channel's schedule change now (called by /paper schedule)."""
        with self._lock:
            spec = ScheduleSpec.from_row(self.store.get_schedule(channel))
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
            try:
                self.sweeps.under("tidy-up", lambda store: forget_silent_replicas(store, self.clock().timestamp()), 0)
            except StoreError as e:  # tidying up can wait for the next sweep; the feeds' catch-up cannot
                log.warning("old replicas' rows not dropped: %s", e)
            if self.feeds is not None and self.sweeps.held is not None:  # on its own job: a harvest takes a while
                self.scheduler.add_job(self.catch_up_feeds_now, id="feeds:catch-up", replace_existing=True)

    def _put_job(self, channel: str, spec: ScheduleSpec) -> None:
        self.scheduler.add_job(self.fire, make_trigger(spec), args=[channel], id=self.job_id(channel),
                               name=f"paper of the day for {channel}: {spec.describe()}",
                               replace_existing=True)

    def next_run(self, channel: str) -> datetime | None:
        job = self.scheduler.get_job(self.job_id(channel))
        return getattr(job, "next_run_time", None) if job else None

    def fire(self, channel: str) -> PostResult | None:
        """The cron job: post today's paper for the fire that just passed (if within the window)."""
        now = self.clock()
        spec = ScheduleSpec.from_row(self.store.get_schedule(channel))
        if spec is None:
            return None
        fire = last_fire(spec, now)
        if fire is None or now - fire > self.grace:
            log.info("skipping the %s post: its scheduled time is more than %s past",
                     channel, format_duration(self.grace))
            return None
        return self._post(channel, post_date(spec, fire), now)

    def catch_up(self, now: datetime, *, quiet: bool = False) -> list[PostResult]:
        """On start-up (or taking the lease over) and every sweep, on the lease's holder only: make
        each missed post once if it is less than `grace` late, else log it."""
        return self.sweeps.under("catch-up", lambda store: self._catch_up(store, now, quiet), [])

    def _catch_up(self, store: Store, now: datetime, quiet: bool) -> list[PostResult]:
        results = []
        for row in store.schedules():
            channel, spec = row["channel"], ScheduleSpec.from_row(row)
            since_day = (now - timedelta(days=9)).date().isoformat()
            days = store.post_days(channel, since_day)
            done = {date.fromisoformat(d) for d, s in days.items() if s in DAY_DONE}
            since = datetime.fromtimestamp(row["updated_at"], timezone.utc) if row.get("updated_at") else None
            decision = catch_up(spec, now, done_days=done, since=since, grace=self.grace)
            if decision.action == "post" and refused_lately(store, channel, decision.day.isoformat(), now):
                continue  # the bot is not in the channel: asked again once invited back (or in an hour)
            if decision.action == "post":
                log.info("catching up the %s post for %s (%s late)", decision.day, channel,
                         format_duration(decision.late))
                results.append(self._post(channel, decision.day, now, store))
            elif decision.action == "skip" and not quiet:
                log.info("skipping the missed %s post for %s: %s late, more than the %s catch-up window "
                         "(PAPERCLUB_CATCH_UP_HOURS)", decision.day, channel,
                         format_duration(decision.late), format_duration(self.grace))
        return results

    def _post(self, channel: str, day: date, now: datetime, store: Store | None = None) -> PostResult:
        try:
            result = post_day(self.deps, self.client, channel, day, now, store=store or self.store,
                              budget=self.budget, sleep=self.sleep)
        except LeaseLost:
            raise  # the sweep stops here (SweepLease.under says so once)
        except Exception as exc:  # a scheduler job must never die silently
            log.error("daily post for %s on %s failed: %s", channel, day, exc, exc_info=True)
            result = PostResult("failed", day, detail=str(exc))
        with self._lock:
            self.results = (self.results + [result])[-50:]
        return result
