"""The feed polls: each channel's arXiv and OpenReview feeds harvested after arXiv's announcement,
on the sweeps' lease holder only (bot/lease.py), and caught up when a poll never finished."""
from __future__ import annotations

import logging
import threading
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from apscheduler.schedulers.base import BaseScheduler

    from store.embed import Embedder
    from store.sources import Sources

    from .deps import Clock
    from .lease import SweepLease

log = logging.getLogger("paperclub.daily")

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


class FeedPolls:
    """The feeds jobs: a poll after each announcement, and the catch-up of a poll that never finished."""

    def __init__(self, sources: Sources, embedder: Embedder, clock: Clock, lease: SweepLease):
        self.sources, self.embedder, self.clock, self.lease = sources, embedder, clock, lease
        self._running = threading.Lock()  # one feed poll at a time in this process (cron, retry or catch-up)

    def add_jobs(self, scheduler: BaseScheduler) -> None:
        for job_id, trigger in feed_triggers():
            scheduler.add_job(self.poll_now, trigger, id=job_id, replace_existing=True,
                              kwargs={"kinds": FEED_JOB_KINDS[job_id]})

    def poll_now(self, kinds: tuple[str, ...] = ("arxiv", "openreview"), *, due_only: bool = False) -> dict:
        """Each distinct feed once (a stale arXiv listing catches up by the API).

        With `due_only`, only the feeds whose poll since the jobs' last fire never finished.
        A poll already running in this process makes this one a no-op (it would fetch the same).
        """
        from store.sources import feeds_due, poll_feeds

        if not self._running.acquire(blocking=False):
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
                return poll_feeds(store, self.sources, self.embedder, now=now.timestamp(), kinds=kinds, only=only)
            return self.lease.under("feed poll", poll, {})
        finally:
            self._running.release()

    def catch_up_now(self) -> dict:
        """The feeds whose last due poll never finished (its replica died mid-harvest, or none was up)."""
        return self.poll_now(due_only=True)
