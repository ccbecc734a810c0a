"""The daily posts' scheduler: APScheduler jobs that mirror the schedules table.

`DailyService` keeps one cron job per channel in an APScheduler 3
BackgroundScheduler: it rebuilds them at start, applies changes from
`/paper schedule` at once (and notices changes made by other processes within
a minute), and on start-up makes a post that was missed by less than the
catch-up window. Each job calls `bot.posting.post_daily`.

With several replicas on one database, each replica runs the cron jobs (the post's
claim row decides who makes it), but the sweeps (the retry of failed and orphaned
posts, the catch-up, the feed polls, the club's tick) run only on the replica that
holds the `sweeps` lease, renewed every ttl/3 by a thread of its own. A replica that
takes the lease over runs the catch-up at once, which picks up a post its dead
holder left half-made; every write of a sweep goes through a `FencedStore` that
refuses it once the lease's epoch has passed to someone else.
"""
from __future__ import annotations

import logging
import threading
import time
from datetime import date, datetime, timedelta, timezone
from typing import TYPE_CHECKING, Callable

from slack_sdk import WebClient

from store.errors import LeaseLost, StoreError
from store.lease import FencedStore, Lease
from store.posts import PostStatus
from store.schedule import ScheduleSpec, catch_up, format_duration, last_fire, make_trigger, post_date

from .health import forget_silent_replicas
from .picks import grace_of, spec_of
from .posting import POST_BUDGET, PostResult, post_daily

if TYPE_CHECKING:
    from store import Store
    from store.llm import LLMClient
    from store.search import Searcher
    from store.sources import Sources

    from .config import Settings
    from .deps import Clock, Feedback

log = logging.getLogger("paperclub.daily")

POLL_SECONDS = 60  # how often a running scheduler looks for schedules changed elsewhere
SWEEP_EVERY = 10  # every 10th poll retries today's failed or orphaned posts (within the window)
SWEEP_LEASE = "sweeps"  # the lease row the sweeps run under, one holder across replicas
LEASE_SECONDS = 15.0  # a dead holder's sweeps pass on after at most this


FEEDS_JOB, FEEDS_RETRY_JOB = "feeds:poll", "feeds:retry"
FEED_JOB_KINDS = {FEEDS_JOB: ("arxiv", "openreview"), FEEDS_RETRY_JOB: ("arxiv",)}


def feed_triggers():
    """After arXiv's announcement (20:00 US Eastern, Sunday to Thursday), and again three hours later
    for a category whose listing was not rebuilt in time (arXiv only: a venue changes slowly)."""
    from apscheduler.triggers.cron import CronTrigger

    eastern = "America/New_York"
    return [(FEEDS_JOB, CronTrigger(day_of_week="sun,mon,tue,wed,thu", hour=20, minute=30, timezone=eastern)),
            (FEEDS_RETRY_JOB, CronTrigger(day_of_week="sun,mon,tue,wed,thu", hour=23, minute=30,
                                          timezone=eastern))]


def last_feed_polls(now: datetime) -> dict[str, float]:
    """Feed kind -> when the feeds jobs last fell due for it (epoch seconds): what a feed's last
    finished poll must be later than, or it is due again."""
    out: dict[str, float] = {}
    for job_id, trigger in feed_triggers():
        fire, last = trigger.get_next_fire_time(None, now - timedelta(days=7)), None
        while fire is not None and fire <= now:
            last, fire = fire, trigger.get_next_fire_time(fire, fire + timedelta(seconds=1))
        for kind in FEED_JOB_KINDS[job_id]:
            if last is not None:
                out[kind] = max(out.get(kind, 0.0), last.timestamp())
    return out


class DailyService:
    """APScheduler jobs mirroring the schedules table, plus catch-up and exactly-once posting."""

    def __init__(self, client: WebClient, store: Store, searcher: Searcher, settings: Settings, *,
                 clock: Clock, feedback: Feedback, llm: LLMClient | None = None,
                 sleep: Callable[[float], None] = time.sleep, budget: float = POST_BUDGET,
                 poll_seconds: float = POLL_SECONDS, sources: Sources | None = None,
                 replica: str = "local", lease_seconds: float = LEASE_SECONDS):
        from apscheduler.schedulers.background import BackgroundScheduler

        self.client, self.store, self.searcher, self.settings, self.llm = client, store, searcher, settings, llm
        self.clock, self.feedback = clock, feedback
        self.sleep, self.budget, self.poll_seconds = sleep, budget, poll_seconds
        self.grace = grace_of(settings)
        self.scheduler = BackgroundScheduler(timezone=timezone.utc, job_defaults={
            "coalesce": True, "max_instances": 1,
            "misfire_grace_time": int(self.grace.total_seconds())})
        self._version: int | None = None
        self._polls = 0
        self._lock = threading.RLock()
        self._feeds = threading.Lock()  # one feed poll at a time in this process (cron, retry or catch-up)
        self.results: list[PostResult] = []  # recent outcomes, for tests and `health`
        self.sources = sources
        self.replica, self.lease_seconds = replica, lease_seconds
        self._lease: Lease | None = None
        self._keeper: threading.Thread | None = None
        self._stop = threading.Event()
        self.handovers: list[tuple[int, float]] = []  # (epoch, when) each time this replica took the lease

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
        self.renew_lease()
        self._keeper = threading.Thread(target=self._keep_lease, name="lease", daemon=True)
        self._keeper.start()
        if self.sources is not None:
            for job_id, trigger in feed_triggers():
                self.scheduler.add_job(self.poll_feeds_now, trigger, id=job_id, replace_existing=True,
                                       kwargs={"kinds": FEED_JOB_KINDS[job_id]})
        # The reading group's posts: every minute, and once on taking the lease (take_over_now: a step
        # missed by downtime within bot.club.posts.CLUB_GRACE goes out late rather than never).
        self.scheduler.add_job(self.club_tick_now, "interval", seconds=60, id="club:tick", replace_existing=True)

    # -- the sweeps' lease -----------------------------------------------------------------
    def _keep_lease(self) -> None:
        while not self._stop.wait(self.lease_seconds / 3):
            self.renew_lease()

    def renew_lease(self) -> Lease | None:
        """Take or renew the sweeps' lease; on taking it over, run the catch-up (and the club's tick)."""
        now = self.clock().timestamp()
        try:
            epoch = self.store.acquire_lease(SWEEP_LEASE, holder=self.replica, ttl=self.lease_seconds, now=now)
        except StoreError as e:  # the database is away: sweep nothing until it is back
            log.warning("could not renew the %s lease: %s", SWEEP_LEASE, e)
            epoch = None
        with self._lock:
            previous = self._lease
            self._lease = Lease(SWEEP_LEASE, self.replica, epoch, self.lease_seconds) if epoch else None
            lease = self._lease
        if lease is not None and (previous is None or previous.epoch != lease.epoch):
            self.handovers.append((lease.epoch, now))
            log.info("replica %s holds the %s lease (epoch %d): the sweeps run here", self.replica,
                     SWEEP_LEASE, lease.epoch)
            if self.scheduler.running:  # the catch-up a dead holder may have left half-done
                self.scheduler.add_job(self.take_over_now, id="lease:catch-up", replace_existing=True)
        elif previous is not None and lease is None:
            log.warning("replica %s no longer holds the %s lease", self.replica, SWEEP_LEASE)
        return lease

    @property
    def lease(self) -> Lease | None:
        """The sweeps' lease as this replica last took or renewed it (None: another replica's)."""
        return self._lease

    def release_lease(self) -> bool:
        """Stop renewing and hand the lease over at once (a clean shutdown); True if it was ours."""
        self._stop.set()
        if self._keeper is not None:
            self._keeper.join(5)
        with self._lock:
            lease, self._lease = self._lease, None
        if lease is None:
            return False
        try:
            released = self.store.release_lease(lease.name, holder=lease.holder, epoch=lease.epoch)
        except StoreError as e:
            log.warning("could not release the %s lease (it expires by itself): %s", lease.name, e)
            return False
        if released:
            log.info("released the %s lease (epoch %d)", lease.name, lease.epoch)
        return released

    def _under_lease(self, what: str, sweep: Callable[[Store], object], empty):
        """Run `sweep` with a store fenced by the lease, if this replica holds it; else `empty`."""
        lease = self.renew_lease() if self._keeper is None else self._lease  # not started: tests, `pick`
        if lease is None:
            log.debug("%s: the %s lease is another replica's", what, SWEEP_LEASE)
            return empty
        fenced = FencedStore(self.store, lease, lambda: self.clock().timestamp())
        try:
            return sweep(fenced)
        except LeaseLost as e:
            log.warning("%s stopped: %s; the new holder carries on", what, e)
            return empty

    def take_over_now(self) -> None:
        """What the replica that gains the lease does first: the catch-up, the club's tick, then the
        feed polls its dead holder left unfinished (or that no replica was up for)."""
        self.catch_up_now()
        self.club_tick_now()
        self.catch_up_feeds_now()

    def poll_feeds_now(self, kinds: tuple[str, ...] = ("arxiv", "openreview"), *, due_only: bool = False) -> dict:
        """The feeds job: each distinct feed once (a stale arXiv listing catches up by the API).

        With `due_only`, only the feeds whose poll since the jobs' last fire never finished.
        A poll already running in this process makes this one a no-op (it would fetch the same).
        """
        from store.sources import feeds_due, poll_feeds

        if self.sources is None or not self._feeds.acquire(blocking=False):
            return {}
        try:
            def poll(store):
                now = self.clock()
                only = feeds_due(store, {k: at for k, at in last_feed_polls(now).items() if k in kinds}) \
                    if due_only else None
                if only == []:
                    return {}
                if only:
                    log.info("catching up the feed poll of %s", ", ".join(f"{k} {t}" for k, t in only))
                return poll_feeds(store, self.sources, self.searcher.embedder, now=now.timestamp(), kinds=kinds,
                                  only=only)
            return self._under_lease("feed poll", poll, {})
        finally:
            self._feeds.release()

    def catch_up_feeds_now(self) -> dict:
        """The feeds whose last due poll never finished (its replica died mid-harvest, or none was up)."""
        return self.poll_feeds_now(due_only=True)

    def club_tick_now(self) -> list:
        """The clubs' due posts (agenda, winner, reminder, thread, recap), each exactly once."""
        from .club import ClubContext, club_tick

        def tick(store):
            ctx = ClubContext(store, self.searcher, self.llm, self.clock,
                              getattr(self.settings, "command", None) or "/paper")
            return club_tick(ctx, self.client, self.clock(), budget=self.budget, sleep=self.sleep)
        return self._under_lease("club tick", tick, [])

    def catch_up_now(self) -> list[PostResult]:
        return self.catch_up(self.clock())

    def shutdown(self) -> None:
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
            try:
                self._under_lease("tidy-up", lambda store: forget_silent_replicas(store, self.clock().timestamp()), 0)
            except StoreError as e:  # tidying up can wait for the next sweep; the feeds' catch-up cannot
                log.warning("old replicas' rows not dropped: %s", e)
            if self.sources is not None and self._lease is not None:  # on its own job: a harvest takes a while
                self.scheduler.add_job(self.catch_up_feeds_now, id="feeds:catch-up", replace_existing=True)

    def _put_job(self, channel: str, spec: ScheduleSpec) -> None:
        self.scheduler.add_job(self.fire, make_trigger(spec), args=[channel], id=self.job_id(channel),
                               name=f"paper of the day for {channel} at {spec.describe()}",
                               replace_existing=True)

    def next_run(self, channel: str) -> datetime | None:
        job = self.scheduler.get_job(self.job_id(channel))
        return getattr(job, "next_run_time", None) if job else None

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
        """On start-up (or taking the lease over) and every sweep, on the lease's holder only: make
        each missed post once if it is less than `grace` late, else log it."""
        return self._under_lease("catch-up", lambda store: self._catch_up(store, now, quiet), [])

    def _catch_up(self, store: Store, now: datetime, quiet: bool) -> list[PostResult]:
        results = []
        for row in store.schedules():
            channel, spec = row["channel"], spec_of(row)
            since_day = (now - timedelta(days=9)).date().isoformat()
            days = store.post_days(channel, since_day)
            done = {date.fromisoformat(d) for d, s in days.items() if s in (PostStatus.POSTED, PostStatus.EMPTY)}
            since = datetime.fromtimestamp(row["updated_at"], timezone.utc) if row.get("updated_at") else None
            decision = catch_up(spec, now, done_days=done, since=since, grace=self.grace)
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
            result = post_daily(self.client, store or self.store, self.searcher, channel, now, day=day,
                                feedback=self.feedback, settings=self.settings, llm=self.llm,
                                budget=self.budget, sleep=self.sleep)
        except LeaseLost:
            raise  # the sweep stops here (_under_lease says so once)
        except Exception as exc:  # a scheduler job must never die silently
            log.error("daily post for %s on %s failed: %s", channel, day, exc, exc_info=True)
            result = PostResult("failed", day, detail=str(exc))
        with self._lock:
            self.results = (self.results + [result])[-50:]
        return result
