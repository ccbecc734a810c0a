"""The clients of each paper source, built once (bot/config.py) and passed down."""
from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from . import arxiv, openreview
from .http import Fetcher

if TYPE_CHECKING:
    from ..base import Store


class Misses:
    """References a source said it does not know, remembered for `ttl` seconds (the `size` most
    recent), so a link pasted again asks nobody. A paper it does know is in the store: that is
    its cache."""

    def __init__(self, size: int = 10_000, ttl: float = 6 * 3600.0):
        self.size, self.ttl = size, ttl
        self._at: OrderedDict[tuple[str, str], float] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, ref: tuple[str, str], now: float) -> bool:
        """True while `ref` is known to be missing."""
        with self._lock:
            at = self._at.get(ref)
            if at is not None and now - at >= self.ttl:
                del self._at[ref]
                at = None
            return at is not None

    def add(self, ref: tuple[str, str], now: float) -> None:
        with self._lock:
            self._at[ref] = now
            self._at.move_to_end(ref)
            while len(self._at) > self.size:
                self._at.popitem(last=False)


@dataclass
class Sources:
    """Where each service lives and the polite client for each (arXiv: 3 s apart)."""

    arxiv_api: str = arxiv.DEFAULT_API
    arxiv_rss: str = arxiv.DEFAULT_RSS
    openreview_api: str = openreview.DEFAULT_API
    arxiv_fetcher: Fetcher = field(default_factory=lambda: Fetcher(min_interval=arxiv.MIN_INTERVAL))
    openreview_fetcher: Fetcher = field(default_factory=lambda: Fetcher(min_interval=openreview.MIN_INTERVAL))
    misses: Misses = field(default_factory=Misses)  # what each source said it does not know, for a while

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
