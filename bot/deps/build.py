"""The composition root's one recipe: settings, store and searcher in, a complete `Deps` out,
and the factories of the parts that talk out (Slack, the LLM, arXiv and OpenReview).

`paperclub run` (bot/runner.py), `paperclub console` (bot/console.py),
`paperclub pick` (bot/cli.py) and the tests all build their parts here, so
each gets the same command table, feedback weights and clients. This module
sits above the features (it lists their subcommands); `bot.deps` itself, the
bundle they all import, imports none of them.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from slack_sdk import WebClient
from slack_sdk.http_retry.builtin_handlers import (
    ConnectionErrorRetryHandler,
    RateLimitErrorRetryHandler,
    ServerErrorRetryHandler,
)

from .. import (
    calibrate,
    club,
    commands,
    commands_feeds,
    commands_interests,
    commands_schedule,
    home,
    overview,
    reactions,
    reading,
    sharing,
)
from ..claims import EventClaims
from ..grammar import Commands
from ..later import make_later
from ..outgoing import SafeClient, gated
from ..posting import Poster
from ..unfurl import unfurl_queue
from . import Clock, Deps, Feedback, Later, PickSettings

if TYPE_CHECKING:
    from store import Store
    from store.search import Searcher
    from store.sources import Sources

    from ..config import Settings

log = logging.getLogger(__name__)


def command_table() -> Commands:
    """Every /paper subcommand, in the order help lists them."""
    return Commands([*commands.SUBCOMMANDS, *sharing.SUBCOMMANDS, *commands_interests.SUBCOMMANDS, *calibrate.SUBCOMMANDS,
                     *reactions.SUBCOMMANDS, *commands_schedule.SUBCOMMANDS,
                     *reading.SUBCOMMANDS, *overview.SUBCOMMANDS, *commands_feeds.SUBCOMMANDS, *club.SUBCOMMANDS])


def build_deps(settings: Settings, store: Store, searcher: Searcher, *, clock: Clock,
               slack: WebClient | None = None, later: Later | None = None, sources: Sources | None = None,
               replica: str = "local", pick: PickSettings | None = None) -> Deps:
    """Everything handlers, listeners and jobs use.

    `later` defaults to running work inline (the console, tests); `paperclub run` passes a pool.
    The scheduler is not in here: it is built from the Deps (bot.scheduler.DailyService(deps)),
    and `/paper schedule` reaches it through `deps.reschedule`. `replica` names this process among
    several on one database (its event claims, the sweeps' lease, `health`). `pick`: the pick's
    settings for every daily pick, preview and calibration round (default: PickSettings()'s).
    """
    return Deps(settings=settings, store=store, searcher=searcher, clock=clock, commands=command_table(),
                later=later or make_later(None), feedback=Feedback.from_settings(settings),
                pick=pick or PickSettings(),
                llm=make_llm(settings), slack=gated(slack), home_sections=home.SECTIONS,
                sources=sources or make_sources(settings, store=store), replica=replica,
                claims=EventClaims(store, replica, clock), unfurls=unfurl_queue(threaded=later is not None),
                poster=Poster(replica))


def make_client(settings: Settings) -> WebClient:
    """A SafeClient for SLACK_API_URL that retries rate limits, dropped connections and 5xx."""
    token = settings.slack_bot_token.get_secret_value() if settings.slack_bot_token else None
    return SafeClient(
        token=token,
        base_url=settings.slack_api_url,
        timeout=15,
        retry_handlers=[
            ConnectionErrorRetryHandler(max_retry_count=2),
            RateLimitErrorRetryHandler(max_retry_count=3),
            ServerErrorRetryHandler(max_retry_count=2),
        ],
    )


def make_llm(settings: Settings):
    """The optional LLM client for TL;DRs (None unless PAPERCLUB_LLM_URL and _MODEL are set)."""
    if not getattr(settings, "llm_url", None):
        return None
    if not getattr(settings, "llm_model", None):
        log.warning("PAPERCLUB_LLM_URL is set but PAPERCLUB_LLM_MODEL is not: using extractive summaries")
        return None
    from store.llm import LLMClient, LLMConfig

    key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else None
    return LLMClient(LLMConfig(url=settings.llm_url, model=settings.llm_model, api_key=key))


def make_sources(settings: Settings, **kw):
    """The polite HTTP clients for arXiv and OpenReview at the configured base URLs."""
    from store.sources import Sources

    return Sources.create(arxiv_api=getattr(settings, "arxiv_api", None),
                          arxiv_rss=getattr(settings, "arxiv_rss", None),
                          openreview_api=getattr(settings, "openreview_api", None), **kw)
