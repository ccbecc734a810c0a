"""The one HTTP client every source uses: one request at a time, spaced, retried, named.

Time is injected (`clock`, `sleep`), so the tests check the spacing and the
back-off without sleeping. A page that cannot be fetched whole is an error for
that page (SourceError); callers write nothing from it.
"""
from __future__ import annotations

import email.utils
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

import httpx

from ..errors import StoreError

log = logging.getLogger("paperclub.sources")

RETRY_STATUS = {429, 500, 502, 503, 504}
MAX_RETRY_AFTER = 300.0  # a Retry-After longer than this is a failure, not a wait


class SourceError(StoreError):
    """A source could not be read (after retries) or sent something that is not a whole page."""


def user_agent() -> str:
    try:
        from importlib.metadata import version

        v = version("paperclub")
    except Exception:  # not installed (a source checkout): still name ourselves
        v = "dev"
    return f"paperclub/{v} (+https://github.com/paperclub/paperclub)"


def _retry_after(value: str | None, now: float) -> float | None:
    """Seconds to wait from a Retry-After header (seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - now)
    except (TypeError, ValueError):
        return None


@dataclass
class Fetcher:
    """GET with politeness: `min_interval` seconds between requests, retries with back-off."""

    min_interval: float = 0.0
    retries: int = 4
    backoff: float = 2.0
    timeout: float = 30.0
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    wall: Callable[[], float] = time.time  # for Retry-After dates
    transport: httpx.BaseTransport | None = None
    requests: int = 0
    _last: float | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _client: httpx.Client | None = field(default=None, repr=False)

    @property
    def client(self) -> httpx.Client:
        if self._client is None:
            self._client = httpx.Client(headers={"User-Agent": user_agent()}, timeout=self.timeout,
                                        transport=self.transport, follow_redirects=True, trust_env=False)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def _wait_turn(self) -> None:
        if self._last is not None:
            gap = self._last + self.min_interval - self.clock()
            if gap > 0:
                self.sleep(gap)
        self._last = self.clock()

    def get(self, url: str, params: dict | None = None) -> httpx.Response:
        """The response to GET url (2xx, or a 4xx other than 429); SourceError once retries are spent."""
        with self._lock:  # one request at a time, whoever asks
            attempt = 0
            while True:
                self._wait_turn()
                self.requests += 1
                problem, wait = None, None
                try:
                    resp = self.client.get(url, params=params)
                    resp.read()
                except (httpx.TimeoutException, httpx.TransportError) as e:
                    problem = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
                else:
                    if resp.status_code < 300 or (400 <= resp.status_code < 500 and resp.status_code != 429):
                        return resp  # 2xx, or a 4xx the caller reads as "no such thing"
                    if resp.status_code not in RETRY_STATUS:
                        raise SourceError(f"{url} answered HTTP {resp.status_code}")
                    problem = f"HTTP {resp.status_code}"
                    wait = _retry_after(resp.headers.get("Retry-After"), self.wall())
                    if wait is not None and wait > MAX_RETRY_AFTER:
                        raise SourceError(f"{url} answered {problem} and asks to wait {wait:.0f} s")
                attempt += 1
                if attempt > self.retries:
                    raise SourceError(f"{url}: {problem} (gave up after {attempt} tries)")
                wait = wait if wait is not None else self.backoff * 2 ** (attempt - 1)
                log.warning("%s: %s; retrying in %.0f s", url, problem, wait)
                self.sleep(wait)
                # the wait counts as spacing: the next request goes when both are satisfied
