"""What every handler, listener and job needs, in one typed bundle built once (bot/deps/build.py).

Every feature module imports this bundle, so it imports none of them: the recipe that builds
it, and lists the features' subcommands, is bot/deps/build.py, one floor up."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable, Protocol

from store.feedback import Feedback  # how reactions count; built once from Settings
from store.pick import PickSettings  # the pick's knobs: every pick and calibration round of this process

if TYPE_CHECKING:
    from slack_bolt import App
    from slack_sdk import WebClient
    from slack_sdk.models.blocks import Block

    from store import Store  # the Store protocol (store/__init__.py)
    from store.llm import LLMClient
    from store.search import Searcher
    from store.sources import Sources

    from ..batches import BatchQueue
    from ..claims import EventClaims
    from ..config import Settings
    from ..grammar import Commands

Clock = Callable[[], datetime]  # an aware UTC datetime; only the composition root reads the wall clock
Later = Callable[..., None]  # later(job, respond=None): run slow work after the ack
HomeSection = Callable[["Deps", str], "list[Block]"]  # (deps, user id) -> blocks for App Home
Register = Callable[["App", "Deps"], None]  # a listener module's register(app, deps)


class Rescheduler:
    """How `/paper schedule` tells the scheduler a channel's schedule changed: `reschedule(channel)`.

    The scheduler (bot/scheduler.py), built from Deps, listens; with none listening (the console,
    `paperclub pick`) the change is read from the table when a scheduler starts."""

    def __init__(self):
        self._listeners: list[Callable[[str], None]] = []
        self._lock = threading.Lock()

    def listen(self, on_change: Callable[[str], None]) -> None:
        with self._lock:
            self._listeners.append(on_change)

    def forget(self, on_change: Callable[[str], None]) -> None:
        with self._lock:
            if on_change in self._listeners:
                self._listeners.remove(on_change)

    def __call__(self, channel: str) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for on_change in listeners:
            on_change(channel)


class MemberZones:
    """Each member's time zone as Slack's users.info last said it (None: it said none), kept `ttl`
    seconds, at most `size` members: Slack asks apps to cache users.info, and a reading list or Home
    tab shown again should not ask again. What to ask is the caller's (`bot.commands.member_zone`)."""

    def __init__(self, ttl: float = 3600.0, size: int = 5000):
        self.ttl, self.size = ttl, size
        self._zones: dict[str, tuple[str | None, float]] = {}
        self._lock = threading.Lock()

    def get(self, user: str, now: float, ask: Callable[[str], str | None]) -> str | None:
        """`user`'s zone: the one kept when younger than `ttl`, else `ask(user)`'s answer, kept (an
        exception from `ask` is not: the next call asks again)."""
        with self._lock:
            kept = self._zones.get(user)
        if kept is not None and now - kept[1] < self.ttl:
            return kept[0]
        zone = ask(user)
        with self._lock:
            self._zones.pop(user, None)
            self._zones[user] = (zone, now)
            while len(self._zones) > self.size:
                del self._zones[next(iter(self._zones))]
        return zone


class PostMachine(Protocol):
    """bot.posting.Poster as the bundle sees it (this module imports no feature): who posts, and how."""

    replica: str

    def post_once(self, client: Any, store: Any, post: Any, now: datetime, **kw) -> Any: ...


@dataclass(frozen=True)
class Deps:
    """Built once by `bot.deps.build.build_deps` and passed down; nothing is patched on later."""

    settings: Settings
    store: Store
    searcher: Searcher
    clock: Clock
    commands: Commands
    later: Later
    feedback: Feedback = field(default_factory=Feedback)
    pick: PickSettings = field(default_factory=PickSettings)  # the daily pick's, the preview's and the round's
    llm: LLMClient | None = None
    slack: WebClient | None = None  # None in the console: nothing there talks to Slack
    reschedule: Rescheduler = field(default_factory=lambda: Rescheduler())  # /paper schedule -> the scheduler
    home_sections: tuple[HomeSection, ...] = ()  # App Home, after the "what is this" part
    sources: Sources | None = None  # arXiv and OpenReview clients (/paper add, link unfurls, feeds)
    replica: str = "local"  # this process among the replicas on one database (bot/replica.py)
    claims: EventClaims | None = None  # which Slack deliveries this replica handles (bot/claims.py)
    unfurls: BatchQueue | None = None  # pasted links' own queue, apart from `later` (bot/unfurl.py)
    poster: PostMachine | None = None  # makes every post exactly once (bot.posting.Poster, one per process)
    member_zones: MemberZones = field(default_factory=MemberZones)  # users.info's tz, cached (bot.commands.member_zone)

    @property
    def command(self) -> str:
        return getattr(self.settings, "command", None) or "/paper"

    @property
    def embedder(self):
        return self.searcher.embedder
