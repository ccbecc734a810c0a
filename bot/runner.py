"""`paperclub run`: warm the model, connect over Socket Mode, heartbeat, stop cleanly on a signal."""
from __future__ import annotations

import json
import logging
import os
import signal
import socket
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from typing import TYPE_CHECKING

import click

from .logs import redact
from .replica import BEAT_SECONDS

if TYPE_CHECKING:
    from store import Store
    from store.embed import Embedder

    from .config import Settings

log = logging.getLogger("paperclub.runner")

HEARTBEAT_SECONDS = BEAT_SECONDS  # `paperclub health` calls the bot disconnected after 45 s without one
DRAIN_SECONDS = 10.0  # how long replies in flight get to finish on shutdown
# How long closing the Socket Mode connection may take on shutdown, before the drain. The
# builtin client's close waits for its reader's lock, held through each 3 s receive timeout
# (and the reader may take it back first); in CI one exit took 21.9 s where ~13 s is usual
# (3 s close, 10 s drain), so the close gets a bound of its own.
CLOSE_SECONDS = 5.0
# The Socket Mode client notices a dropped connection only on its monitor tick, once per
# ping interval (Bolt's default 10 s): commands sent meanwhile fail in Slack. 3 s measured
# ~3 s instead of ~10 s of deafness after a reset; a link counts as dead after 4 missed pongs.
PING_SECONDS = 3.0
# On a `disconnect` refresh, how long the old socket still gets, once the new one is up, for frames
# already on their way to it (shut at once, 3 of 400 probes sent across refreshes were lost).
REFRESH_GRACE_SECONDS = 0.1


class StartupError(click.ClickException):
    """Slack refused us at start (bad token, unreachable API): one line, no traceback."""


def utc_now() -> datetime:
    """The wall clock, read here at the composition root and passed down as `deps.clock`."""
    return datetime.now(timezone.utc)


DB_WAIT_NOTE_SECONDS = 5.0  # how often the wait for the database says it is still waiting
DB_RETRY_SECONDS = 1.0


def wait_for_database(url: str, timeout: float) -> None:
    """Return once the database server at url answers (at once for SQLite), logging while it
    does not; StartupError when it has not answered within timeout seconds."""
    from store import database_address, database_unreachable

    address = database_address(url)  # (imports the driver: not part of the wait)
    started, next_note = time.monotonic(), 0.0
    reason = database_unreachable(url)  # a refusal waiting cannot fix raises StoreError here
    while reason is not None:
        waited = time.monotonic() - started
        if waited >= timeout:
            raise StartupError(f"PostgreSQL at {address} did not answer within {timeout:.0f} s "
                               f"({reason}): is the server running, and is PAPERCLUB_DB right? "
                               "PAPERCLUB_DB_WAIT_SECONDS sets how long to wait.")
        if waited >= next_note:
            log.info("waiting for PostgreSQL at %s ... (%.0f s): %s", address, waited, reason)
            next_note = waited + DB_WAIT_NOTE_SECONDS
        time.sleep(min(DB_RETRY_SECONDS, timeout - waited))
        reason = database_unreachable(url)
    if next_note:  # it had to wait
        log.info("PostgreSQL at %s answered after %.0f s", address, time.monotonic() - started)


def _claiming(base, deps):
    """Bolt's Socket Mode handler class `base`, except that each delivery is claimed in the
    database (deps.claims) and one another replica (or this one) already took is dropped.

    Events, slash commands and clicks are acked at once and claimed after (bot.claims.delivery_key),
    so the ack never waits for the database; a modal submission or a menu, whose ack carries
    the answer, is claimed first (waiting at most bot.claims.CLAIM_WAIT, then handled anyway); a
    click that opens a modal opens it before its claim (bot.claims.opens_a_modal: its trigger_id
    expires in about 3 s)."""
    from slack_bolt.adapter.socket_mode.internals import run_bolt_app
    from slack_sdk.socket_mode.response import SocketModeResponse

    from .claims import delivery_key, opens_a_modal

    class ClaimingSocketModeHandler(base):
        def handle(self, client, req) -> None:
            key, ack_first = delivery_key(req.type, req.envelope_id, req.payload)
            if key is not None and ack_first:
                client.send_socket_mode_response(SocketModeResponse(envelope_id=req.envelope_id))
                if opens_a_modal(req.payload):
                    run_bolt_app(self.app, req)
                    deps.claims.after_ack(key, lambda: None)  # recorded, so a redelivery is dropped
                    return
                # Bolt's own ack of this envelope, once it runs, is not sent again.
                deps.claims.after_ack(key, lambda: run_bolt_app(self.app, req))
                return
            # A form's Submit (ANSWERED_IN_ACK): its ack carries the answer, so a database too slow to
            # say whether another delivery has it does not defer it (a bare ack would close the form
            # with its errors unsaid): it is handled now, and its claim recorded when it comes in.
            if key is not None and not deps.claims(key):
                log.info("envelope %s (%s) acked; another delivery has it", req.envelope_id, req.type)
                client.send_socket_mode_response(SocketModeResponse(envelope_id=req.envelope_id))
                return
            super().handle(client, req)

    return ClaimingSocketModeHandler


def _install_signal_handlers(stop: threading.Event) -> None:
    def on_signal(signum, _frame):
        log.info("received %s, shutting down", signal.Signals(signum).name)
        stop.set()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)


def limit_threads() -> None:
    """One thread per query encode and per numpy product (unless OMP_NUM_THREADS says otherwise).

    Queries are short, so a second thread buys little, while on a shared 2-core
    box spinning OpenMP threads turned a 25 ms encode into 1-1.5 s (measured).
    numpy's BLAS spins the same way: with the other core busy, the paper of
    the day at 2,000 papers took 190 ms with BLAS's two threads and 24 ms with
    one (bench/pick_speed.py). Concurrency comes from the work pool instead.
    """
    if os.environ.get("OMP_NUM_THREADS"):
        return
    from threadpoolctl import threadpool_limits

    threadpool_limits(1, user_api="blas")
    if "torch" in sys.modules:  # the model runs on torch (no ONNX graph yet, or none to be had)
        import torch

        torch.set_num_threads(1)


class _Coalescer:
    """Concurrent one-text calls of `fn` share one batched call.

    Whoever finds `fn` idle encodes every text waiting at that moment (its own
    included); the others wait for their vectors. A lone text goes straight
    through, so there is no timer and no added latency.
    """

    def __init__(self, fn, max_batch: int):
        self.fn = fn
        self.max_batch = max_batch
        self._cond = threading.Condition()
        self._pending: list[dict] = []
        self._busy = False

    def one(self, text: str):
        slot = {"text": text, "done": False, "vector": None, "error": None}
        with self._cond:
            self._pending.append(slot)
            while not slot["done"]:
                if self._busy:
                    self._cond.wait()
                    continue
                batch = self._pending[: self.max_batch]
                del self._pending[: len(batch)]
                self._busy = True
                self._cond.release()
                try:
                    self._encode_batch(batch)
                finally:
                    self._cond.acquire()
                    self._busy = False
                    self._cond.notify_all()
        if slot["error"] is not None:
            raise slot["error"]
        return slot["vector"][None, :]

    def _encode_batch(self, batch: list[dict]) -> None:
        try:
            vectors = self.fn([s["text"] for s in batch])
            for s, v in zip(batch, vectors):
                s["vector"] = v
        except Exception as e:  # every waiter gets the failure, not just the one who ran it
            for s in batch:
                s["error"] = e
        for s in batch:
            s["done"] = True


class BatchingEmbedder:
    """Wraps an embedder so concurrent one-query encodes share one forward pass.

    Measured on 2 cores: one query 13-40 ms, ten together 50 ms. An embedder with
    its own query path (`encode_queries`, ONNX Runtime) is batched there, apart
    from the document encodes.
    """

    def __init__(self, inner, max_batch: int = 64):
        self.inner = inner
        self.name = inner.name
        self.max_batch = max_batch
        self._documents = _Coalescer(inner.encode, max_batch)
        queries = getattr(inner, "encode_queries", None)
        self._queries = _Coalescer(queries, max_batch) if queries is not None else self._documents

    @property
    def dim(self) -> int:
        return self.inner.dim

    def load(self):
        return self.inner.load() if hasattr(self.inner, "load") else None

    def encode(self, texts, *, progress: bool = False):
        if len(texts) != 1:  # batches (ingest, warm-up) need no help
            return self.inner.encode(texts, progress=progress)
        return self._documents.one(texts[0])

    def encode_queries(self, texts):
        if len(texts) != 1:
            return (getattr(self.inner, "encode_queries", None) or self.inner.encode)(texts)
        return self._queries.one(texts[0])


def socket_mode_handler(app, app_token: str, adapter: str = "builtin", *, deps=None):
    """Bolt's Socket Mode handler over slack_sdk's `builtin` client or the `websocket_client` one.

    Both drive the same sync App. The builtin client swaps to a new socket on a `disconnect`
    refresh only once the old one is closed, which waits out its 3 s receive timeout unless
    `_ending_replaced_sockets` ends it; bench/ack_latency.py --refreshes measures the ack delay
    across a refresh per adapter.
    With deps, envelopes are claimed in the database first (several replicas: `_claiming`).
    """
    from .config import SOCKET_MODES

    if adapter == "websocket_client":
        from slack_bolt.adapter.socket_mode.websocket_client import SocketModeHandler
    elif adapter == "builtin":
        from slack_bolt.adapter.socket_mode import SocketModeHandler
    else:
        raise ValueError(f"Socket Mode adapter must be one of {', '.join(SOCKET_MODES)}, not {adapter!r}")
    cls = SocketModeHandler if deps is None else _claiming(SocketModeHandler, deps)
    handler = cls(app, app_token, ping_interval=PING_SECONDS)
    if adapter == "builtin":
        handler.client.on_message_listeners.append(_ending_replaced_sockets(handler.client))
    return handler


def _ending_replaced_sockets(client):
    """An on_message listener for slack_sdk's builtin client: on a `disconnect` refresh, the old
    socket's reader is woken once the new connection is up, so the switch is not a 3 s stall.

    The builtin SocketModeClient.connect() opens the new connection, marks the old one's state
    terminated, closes it, and only then makes the new one current. The close waits for the old
    socket's receive lock, which its reader holds through a blocking recv with a 3 s timeout, and
    the reader returns only when a frame comes or the timeout ends; meanwhile nothing on the new
    socket is read (one thread reads the current connection), nothing already read is dispatched
    (connect() runs on the message-processing thread) and acks wait on the old socket. Slack sends
    on the new connection once it is open, so the old one stays quiet and commands acked ~3 s late.
    Shutting the old socket down ends the recv at once; close() follows as before.
    """
    def on_message(message: str) -> None:
        if '"disconnect"' not in message:  # every frame comes through here, on the reader thread
            return
        try:  # (an exception here would cost the frames read with this one)
            body = json.loads(message)
            session, state = client.current_session, client.current_session_state
            if isinstance(body, dict) and body.get("type") == "disconnect" and session is not None:
                threading.Thread(target=_end_when_replaced, args=(client, session, state),
                                 name="socket-refresh", daemon=True).start()
        except Exception as e:
            log.warning("could not watch the Socket Mode refresh: %s", e)

    return on_message


def _end_when_replaced(client, session, state, timeout: float = 60.0) -> None:
    """Once `state` is terminated (connect() opened the new connection), give frames still on their
    way REFRESH_GRACE_SECONDS, then shut `session`'s socket down so its reader's recv returns."""
    deadline = time.monotonic() + timeout
    while not state.terminated:
        if client.closed or time.monotonic() > deadline:  # no new connection (connect() failed)
            return
        time.sleep(0.005)
    time.sleep(REFRESH_GRACE_SECONDS)
    sock = session.sock
    if sock is None:  # closed already: a frame came and its reader let go
        return
    try:  # the TCP socket's shutdown (SSLSocket.shutdown would also drop its TLS state under the reader)
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:
        pass  # closed meanwhile


# auth.test errors that mean the token itself is wrong (https://api.slack.com/methods/auth.test)
TOKEN_REFUSED = ("invalid_auth", "not_authed", "account_inactive", "token_revoked", "token_expired",
                 "not_allowed_token_type")


def slack_start_failure(url: str, e: Exception) -> str:
    """Why the first call to Slack failed, as one line saying what to fix: a refused token, an
    answer that is not Slack's (a wrong SLACK_API_URL, a proxy's page) or no answer at all."""
    cause = e.__context__ if e.__context__ is not None else e  # Bolt wraps the SlackApiError
    response = getattr(cause, "response", None) or getattr(e, "response", None)
    error = response.get("error") if response is not None else None
    if error in TOKEN_REFUSED:
        return (f"Slack at {url} refused the bot token ({error}): copy SLACK_BOT_TOKEN again from "
                "Install App → Bot User OAuth Token.")
    check = "SLACK_API_URL (https://slack.com/api/; GovSlack https://slack-gov.com/api/)"
    if response is not None:
        return f"{url} did not answer as Slack does ({error or e}): check {check} and any proxy."
    reason = getattr(cause, "reason", None) or cause
    return f"could not reach Slack at {url} ({reason}): check the network, any proxy, and {check}."


def run_bot(settings: Settings, store: Store, embedder: Embedder, *,
            stop: threading.Event | None = None) -> bool:
    """Warm up, connect, answer until SIGTERM/SIGINT (or `stop` is set), then close.

    True when all work in flight finished; False when the drain gave up on some.
    """
    from slack_bolt.error import BoltError
    from slack_sdk.errors import SlackClientError

    from store.search import Searcher

    from .app import create_app
    from .deps.build import build_deps, make_client
    from .later import make_later, work_pool
    from .replica import replica_id, write_heartbeat
    from .scheduler import DailyService

    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        _install_signal_handlers(stop)

    searcher = Searcher(store, BatchingEmbedder(embedder), exact_limit=settings.exact_limit,
                        index_cache=settings.index_cache, graph_dtype=settings.graph_dtype)
    work = work_pool()
    replica = replica_id(settings)
    deps = build_deps(settings, store, searcher, clock=utc_now, slack=make_client(settings),
                      later=make_later(work), replica=replica)
    daily = DailyService(deps)  # started once connected
    try:  # auth.test runs here: a wrong token fails in a second, before the model loads
        app = create_app(deps)
    except (BoltError, SlackClientError, OSError) as e:
        work.shutdown(wait=False)
        raise StartupError(redact(slack_start_failure(settings.slack_api_url, e))) from None

    started = time.perf_counter()
    searcher.warm()  # before connecting, so the first command is as fast as the rest
    limit_threads()
    log.info("model and %d papers ready in %.1f s", store.count_papers(), time.perf_counter() - started)

    handler = socket_mode_handler(app, settings.slack_app_token.get_secret_value(),
                                  getattr(settings, "socket_mode", None) or "builtin", deps=deps)
    try:
        try:
            handler.connect()
        except (SlackClientError, OSError) as e:
            raise StartupError(redact(f"could not open the Socket Mode connection "
                                      f"(check SLACK_APP_TOKEN): {e}")) from None
        log.info("connected to Slack (Socket Mode) as replica %s; answering %s", replica, settings.command)
        daily.start()  # jobs from the schedules table, then any post missed while we were down
        connected_at = time.time()
        while not stop.is_set():
            now = time.time()
            if handler.client.is_connected():
                connected_at = now
            try:  # every beat, connected or not: another host's replica must not take our posts over
                write_heartbeat(store, now, replica=replica, connected_at=None if connected_at == now else connected_at)
            except Exception as e:  # a locked or full disk must not stop the bot answering
                log.warning("heartbeat not written: %s", e)
            stop.wait(HEARTBEAT_SECONDS)
    finally:
        scheduler = daily.scheduler
        if scheduler.running:
            scheduler.pause()  # no new daily posts from here on; one in flight goes on
        log.info("closing the Slack connection")
        closed = _within(CLOSE_SECONDS, handler.close, "closing the Slack connection")
        drained = _drain(work, scheduler, deps.claims) and closed
        daily.release_lease()  # after the drain: a post in flight under the lease finishes under it
        log.info("stopped")
    return drained


def _drain(work: ThreadPoolExecutor, scheduler=None, claims=None) -> bool:
    """Let replies and a daily post in flight finish, for at most DRAIN_SECONDS; False if some did not.

    On False the caller exits without them: a daily post abandoned mid-way stays claimed
    and the next start makes it exactly once; a reply is simply not sent.
    """
    def finish():
        if scheduler is not None and scheduler.running:
            scheduler.shutdown(wait=True)  # waits for the post being made (e.g. in a 429 retry)
        if claims is not None:
            claims.close()  # deliveries acked but not yet claimed: claimed, and handed to `work`
        work.shutdown()

    return _within(DRAIN_SECONDS, finish, "work in flight")


def _within(seconds: float, step, what: str) -> bool:
    """Run `step` on a daemon thread for at most `seconds`; False (and a warning) if it is still going."""
    waiter = threading.Thread(target=step, daemon=True)
    waiter.start()
    waiter.join(seconds)
    if waiter.is_alive():
        log.warning("gave up waiting for %s after %.0f s", what, seconds)
        return False
    return True
