"""The clients of each paper source, built once (bot/config.py) and passed down."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from . import arxiv, openreview
from .http import Fetcher

if TYPE_CHECKING:
    from ..base import Store


@dataclass
class Sources:
    """Where each service lives and the polite client for each (arXiv: 3 s apart)."""

    arxiv_api: str = arxiv.DEFAULT_API
    arxiv_rss: str = arxiv.DEFAULT_RSS
    openreview_api: str = openreview.DEFAULT_API
    arxiv_fetcher: Fetcher = field(default_factory=lambda: Fetcher(min_interval=arxiv.MIN_INTERVAL))
    openreview_fetcher: Fetcher = field(default_factory=lambda: Fetcher(min_interval=openreview.MIN_INTERVAL))

    @classmethod
    def create(cls, *, arxiv_api: str | None = None, arxiv_rss: str | None = None,
               openreview_api: str | None = None, clock: Callable[[], float] = time.monotonic,
               sleep: Callable[[float], None] = time.sleep, store: Store | None = None,
               **fetcher_kw) -> Sources:
        """With `store`, each service's spacing is kept in the database (store.reserve_slot), so it
        holds across every process and replica on it: arXiv asks for one request every 3 s per
        client, not per process."""
        def slot(name: str):
            if store is None:
                return None
            return lambda interval, now: store.reserve_slot(name, interval=interval, now=now)

        return cls(arxiv_api or arxiv.DEFAULT_API, arxiv_rss or arxiv.DEFAULT_RSS,
                   openreview_api or openreview.DEFAULT_API,
                   Fetcher(min_interval=arxiv.MIN_INTERVAL, clock=clock, sleep=sleep, slot=slot("arxiv"),
                           **fetcher_kw),
                   Fetcher(min_interval=openreview.MIN_INTERVAL, clock=clock, sleep=sleep,
                           slot=slot("openreview"), **fetcher_kw))

    def close(self) -> None:
        self.arxiv_fetcher.close()
        self.openreview_fetcher.close()
