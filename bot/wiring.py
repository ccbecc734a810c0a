"""The composition root's one recipe: settings, store and searcher in, a complete `Deps` out.

`paperclub run` (bot/runner.py), `paperclub console` (bot/console.py),
`paperclub pick` (bot/cli.py) and the tests all build their parts here, so
each gets the same command table, feedback weights and scheduler.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Callable

from . import club, commands, commands_daily, commands_feeds, home, overview, reading
from .app import EventClaims, make_later, make_llm
from .commands import Commands
from .deps import Clock, Deps, Feedback, Later
from .scheduler import LEASE_SECONDS, POLL_SECONDS, SWEEP_EVERY, DailyService
from .unfurl import UnfurlQueue

if TYPE_CHECKING:
    from slack_sdk import WebClient

    from store import Store
    from store.search import Searcher
    from store.sources import Sources

    from .config import Settings


def command_table() -> Commands:
    """Every /paper subcommand, in the order help lists them."""
    return Commands([*commands.SUBCOMMANDS, *commands_daily.SUBCOMMANDS, *reading.SUBCOMMANDS,
                     *overview.SUBCOMMANDS, *commands_feeds.SUBCOMMANDS, *club.SUBCOMMANDS])


def build_deps(settings: Settings, store: Store, searcher: Searcher, *, clock: Clock,
               slack: WebClient | None = None, later: Later | None = None,
               sleep: Callable[[float], None] = time.sleep, sources: Sources | None = None,
               replica: str = "local") -> Deps:
    """Everything handlers, listeners and jobs use; the daily scheduler only when there is a Slack client.

    `later` defaults to running work inline (the console, tests); `paperclub run` passes a pool.
    The scheduler is built, not started: the runner starts it once connected. `replica` names this
    process among several on one database (its event claims, the sweeps' lease, `health`).
    """
    from .config import make_sources

    feedback = Feedback.from_settings(settings)
    sources = sources or make_sources(settings, store=store)
    llm = make_llm(settings)
    scheduler = None
    if slack is not None:
        sweep = float(getattr(settings, "sweep_seconds", None) or POLL_SECONDS * SWEEP_EVERY)
        scheduler = DailyService(slack, store, searcher, settings, clock=clock, feedback=feedback, llm=llm,
                                 sleep=sleep, sources=sources, replica=replica,
                                 poll_seconds=min(POLL_SECONDS, sweep / SWEEP_EVERY),
                                 lease_seconds=float(getattr(settings, "lease_seconds", None) or LEASE_SECONDS))
    return Deps(settings=settings, store=store, searcher=searcher, clock=clock, commands=command_table(),
                later=later or make_later(None), feedback=feedback, llm=llm, slack=slack, scheduler=scheduler,
                home_sections=home.SECTIONS, sources=sources, replica=replica,
                claims=EventClaims(store, replica, clock), unfurls=UnfurlQueue(threaded=later is not None))
