"""The one HTTP helper for every request to a paper source or the LLM: a total deadline, a size cap,
same-host redirects. Slack's Web API calls, built by slack_sdk, go through it too
(bot.outgoing.SafeClient, no redirects).

`fetch` is the single place a request is sent and its body read. The deadline
covers the whole exchange (connect, headers and every byte of the body): a
source that drips one byte a second is cut at the deadline, not kept alive
read by read. The body is streamed and refused past `max_bytes`, so a huge
page costs at most the cap in memory. Redirects are followed only to the
host (scheme and port included; http to https allowed) the request was sent to.

`Fetcher` adds the politeness every paper source needs on top: one request
at a time, spaced (`min_interval`, shared across processes through the store
when a `slot` is given), retried with back-off. A call a member waits on (`/paper
add`, a pasted link, `/paper feed add`) gives an `until`: the waits, the retries and
the spacing all end by then (`MEMBER_WAIT` after it began), or it fails at once, where
a feed's poll may wait out a Retry-After of minutes. Time is injected (`clock`,
`sleep`, `wall`), so the tests check the spacing and back-off without
sleeping. A page that cannot be fetched whole is an error for that page
(SourceError); callers write nothing from it.
"""
from __future__ import annotations

import email.utils
import logging
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

import httpx

from ..errors import StoreError
from ..text import parse_number

log = logging.getLogger("paperclub.sources")

RETRY_STATUS = {429, 500, 502, 503, 504}
MAX_RETRY_AFTER = 300.0  # a Retry-After longer than this is a failure, not a wait
DEADLINE = 60.0  # seconds for one whole request; an arXiv page of 2,000 entries comes in well under it
MAX_BYTES = 32_000_000  # the largest real answer (2,000 arXiv entries, 1,000 OpenReview notes) is ~10 MB
MAX_REDIRECTS = 5
MEMBER_WAIT = 15.0  # seconds a member's own request to a source may take in all (`Fetcher.get`'s `until`)


class SourceError(StoreError):
    """A source could not be read (after retries) or sent something that is not a whole page."""


class DeadlineError(SourceError):
    """The whole request took longer than its deadline. `sent` is False when it ran out before the
    request was through (connecting, or writing it): the server cannot have acted on it."""

    def __init__(self, message: str, *, sent: bool = True):
        super().__init__(message)
        self.sent = sent


class SourceUnavailable(SourceError):
    """The service itself is not answering: retries spent on 5xx/429 or timeouts, a Retry-After
    longer than we wait, or a host that does not resolve or refuses. Its next request would fare
    the same, so a sweep over many feeds of that service stops asking it."""


class TooLargeError(SourceError):
    """The body was larger than the cap."""


def user_agent() -> str:
    try:
        from importlib.metadata import version

        v = version("paperclub")
    except Exception:  # not installed (a source checkout): still name ourselves
        v = "dev"
    return f"paperclub/{v} (+https://github.com/paperclub/paperclub)"


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    return url.scheme, url.host, url.port


def _same_source(origin: tuple[str, str, int | None], url: httpx.URL) -> bool:
    """The same scheme, host and port; or the same host moving from http to https on default ports."""
    there = _origin(url)
    return there == origin or (origin[0] == "http" and origin[2] is None and there == ("https", origin[1], None))


def _cut_at_deadline(response: httpx.Response, seconds: float) -> threading.Timer | None:
    """A timer that shuts the response's socket when the deadline passes, so a read blocked on a
    silent server returns then instead of after its own (per read) timeout."""
    stream = response.extensions.get("network_stream")
    sock = stream.get_extra_info("socket") if stream is not None else None
    if sock is None:
        return None

    def cut():
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # already closed: the read ended on its own
    timer = threading.Timer(max(0.0, seconds), cut)
    timer.daemon = True
    timer.start()
    return timer


def fetch(client: httpx.Client, method: str, url: str, *, deadline: float = DEADLINE,
          max_bytes: int = MAX_BYTES, max_redirects: int = MAX_REDIRECTS,
          clock: Callable[[], float] = time.monotonic, **kw) -> httpx.Response:
    """Send one request and read its whole body within `deadline` seconds and `max_bytes` bytes.

    Redirects are followed (up to `max_redirects`, 0 for none) only to the same scheme, host and
    port (or from http to https on the same host). Raises DeadlineError, TooLargeError, SourceError (a redirect elsewhere), or httpx's own
    errors for a refused connection or a broken exchange; the caller names them for its users.
    """
    end = clock() + deadline
    request = client.build_request(method, url, **kw)
    origin = _origin(request.url)
    for _ in range(max_redirects + 1):
        left = end - clock()
        if left <= 0:
            raise DeadlineError(f"no whole answer within {deadline:g} s", sent=False)
        request.extensions["timeout"] = httpx.Timeout(left).as_dict()
        try:
            response = client.send(request, stream=True)
        except (httpx.ConnectTimeout, httpx.WriteTimeout, httpx.PoolTimeout):
            raise DeadlineError(f"could not send the request within {deadline:g} s", sent=False) from None
        except httpx.TimeoutException:
            raise DeadlineError(f"no whole answer within {deadline:g} s") from None
        try:
            if response.is_redirect:
                target = response.next_request
                if max_redirects == 0:
                    raise SourceError(f"answered with a redirect (HTTP {response.status_code}); "
                                      "redirects are not followed")
                if target is None or not _same_source(origin, target.url):
                    where = target.url.host if target is not None else "nowhere"
                    raise SourceError(f"redirected to another host ({where}); only redirects within "
                                      f"{origin[1]} are followed")
                request = target
                continue
            size = parse_number(response.headers.get("Content-Length"), 0, 10**18)
            if size is not None and size > max_bytes:
                raise TooLargeError(f"answer of {size:,} bytes is over the {max_bytes:,}-byte cap")
            timer = _cut_at_deadline(response, end - clock())
            body = bytearray()
            try:
                for chunk in response.iter_bytes():
                    body += chunk
                    if len(body) > max_bytes:
                        raise TooLargeError(f"answer is over the {max_bytes:,}-byte cap; stopped reading")
                    if clock() > end:
                        raise DeadlineError(f"no whole answer within {deadline:g} s")
                if clock() >= end:  # the timer shut the socket: a body without a length just stops there
                    raise DeadlineError(f"no whole answer within {deadline:g} s")
            except (httpx.TimeoutException, httpx.TransportError):
                if clock() >= end - 0.05:
                    raise DeadlineError(f"no whole answer within {deadline:g} s") from None
                raise
            finally:
                if timer is not None:
                    timer.cancel()
            # as bytes: a header value that is not ASCII ('Retry-After: ³') must not fail the copy
            headers = [(k, v) for k, v in response.headers.raw
                       if k.lower() not in (b"content-encoding", b"content-length", b"transfer-encoding")]
            return httpx.Response(response.status_code, headers=headers, content=bytes(body),
                                  request=response.request)
        finally:
            response.close()
    raise SourceError(f"more than {max_redirects} redirects")


def _unreachable(error: BaseException) -> bool:
    """The host's name does not resolve, or nothing listens there: errors that do not heal in seconds.

    Neither is retried. A failed name lookup means no network or no such host (the resolver has
    already retried); a refused connection means nothing listens at that address: a site as large
    as arXiv or OpenReview restarting behind its load balancer answers 502/503 (retried), while a
    refusal comes from a host that is down or a proxy or firewall in the way, none of which is
    fixed by the next 30 s of back-off. The member is told to try again in a few minutes, and a
    feed poll tries again on its next round anyway. Timeouts, resets and 5xx/429 stay retried.
    """
    seen = 0
    while error is not None and seen < 10:
        if isinstance(error, (socket.gaierror, ConnectionRefusedError)):
            return True
        error, seen = error.__cause__ or error.__context__, seen + 1
    return False


def _retry_after(value: str | None, now: float) -> float | None:
    """Seconds to wait from a Retry-After header (seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    seconds = parse_number(value, 0, 10**9)
    if seconds is not None:
        return float(seconds)
    try:
        return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - now)
    except (TypeError, ValueError):
        return None


Slot = Callable[[float, float], float]  # (interval, now as epoch seconds) -> when our request may go


@dataclass
class Fetcher:
    """GET with politeness: `min_interval` seconds between requests, retries with back-off.

    With `slot` (the store's reserve_slot for this service), the spacing holds across every
    process and replica on the database, not only within this one.
    """

    min_interval: float = 0.0
    retries: int = 4
    backoff: float = 2.0
    timeout: float = 30.0  # the total deadline of one request (connect to last byte)
    max_bytes: int = MAX_BYTES
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    wall: Callable[[], float] = time.time  # for Retry-After dates and the shared slot
    transport: httpx.BaseTransport | None = None
    slot: Slot | None = None
    requests: int = 0
    _last: float | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _client: httpx.Client | None = field(default=None, repr=False)

    @property
    def client(self) -> httpx.Client:
        if self._client is None:
            self._client = httpx.Client(headers={"User-Agent": user_agent()}, timeout=self.timeout,
                                        transport=self.transport, follow_redirects=False, trust_env=False)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def _pause(self, seconds: float, until: float | None, why: str, *, say: str | None = None) -> None:
        """Sleep `seconds` (logging `say` first), or fail at once (DeadlineError, nothing more sent)
        when that would pass `until`."""
        if until is not None and self.clock() + seconds >= until:
            raise DeadlineError(f"{why}: no answer possible within the time a member waits", sent=False)
        if say:
            log.warning("%s", say)
        self.sleep(seconds)

    def _wait_turn(self, until: float | None = None) -> None:
        if self.slot is not None and self.min_interval > 0:
            try:
                at = self.slot(self.min_interval, self.wall())
            except StoreError as e:  # the database is busy: keep our own spacing rather than none
                log.warning("shared request spacing unavailable (%s); spacing this process only", e)
            else:
                gap = at - self.wall()
                if gap > 0:
                    self._pause(gap, until, "waiting for our turn")
                self._last = self.clock()
                return
        if self._last is not None:
            gap = self._last + self.min_interval - self.clock()
            if gap > 0:
                self._pause(gap, until, "waiting for our turn")
        self._last = self.clock()

    def get(self, url: str, params: dict | None = None, *, until: float | None = None) -> httpx.Response:
        """The response to GET url (2xx, or a 4xx other than 429); SourceError once retries are spent,
        at once for an answer over the size cap, one past the deadline, a redirect to another host,
        or a host whose name does not resolve or that refuses the connection (`_unreachable`).

        until: when (on `clock`) a member stops waiting. Waiting for another request, the spacing,
        each request and each retry's wait all end by then; a DeadlineError when one cannot."""
        left = None if until is None else max(0.0, until - self.clock())
        if not self._lock.acquire(timeout=-1 if left is None else left):  # one request at a time
            raise DeadlineError(f"{url}: busy with another request for longer than a member waits", sent=False)
        try:
            attempt = 0
            while True:
                self._wait_turn(until)
                self.requests += 1
                problem, wait = None, None
                deadline = self.timeout if until is None else min(self.timeout, until - self.clock())
                try:
                    if deadline <= 0:
                        raise DeadlineError("no time left for the request", sent=False)
                    resp = fetch(self.client, "GET", url, params=params, deadline=deadline,
                                 max_bytes=self.max_bytes)
                except SourceError as e:  # too large, too slow, redirected elsewhere: retrying will not help
                    raise type(e)(f"{url}: {e}") from None
                except (httpx.TimeoutException, httpx.TransportError) as e:
                    problem = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
                    if _unreachable(e):
                        raise SourceUnavailable(f"{url}: {problem} (not retried: it does not heal in seconds)") from None
                else:
                    if resp.status_code < 300 or (400 <= resp.status_code < 500 and resp.status_code != 429):
                        return resp  # 2xx, or a 4xx the caller reads as "no such thing"
                    if resp.status_code not in RETRY_STATUS:
                        raise SourceError(f"{url} answered HTTP {resp.status_code}")
                    problem = f"HTTP {resp.status_code}"
                    wait = _retry_after(resp.headers.get("Retry-After"), self.wall())
                    if wait is not None and wait > MAX_RETRY_AFTER:
                        raise SourceUnavailable(f"{url} answered {problem} and asks to wait {wait:.0f} s")
                attempt += 1
                if attempt > self.retries:
                    raise SourceUnavailable(f"{url}: {problem} (gave up after {attempt} tries)")
                wait = wait if wait is not None else self.backoff * 2 ** (attempt - 1)
                self._pause(wait, until, f"{url}: {problem}; a retry in {wait:.0f} s",
                            say=f"{url}: {problem}; retrying in {wait:.0f} s")
                # the wait counts as spacing: the next request goes when both are satisfied
        finally:
            self._lock.release()
