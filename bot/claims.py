"""Which Slack deliveries this replica handles, across replicas on one database: one claim row per
event or envelope (store.claim_event), so a retry that reaches another replica is dropped there.

`EventClaims` is built once per process (bot/deps) and used twice: by the Socket Mode handler
(bot/runner.py, each envelope by `delivery_key`) and by the app's middleware (`middleware(app)`,
built by create_app with its app: events that reach the app other ways, keyed by event_id).
"""
from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Callable

from slack_bolt import BoltRequest, BoltResponse

from store.errors import StoreError

from .blocks import ACTION_CLUB_SETUP

if TYPE_CHECKING:
    from slack_bolt import App

log = logging.getLogger(__name__)

CLAIM_WAIT = 0.5  # seconds the ack waits for the database to record an envelope as handled


class EventClaims:
    """Which Slack deliveries this replica handles: a claim row per event or envelope in the shared
    database (store.claim_event), so a retry that reaches another replica is dropped there too.

    Most deliveries are acked at once and claimed after (`after_ack`). One whose ack carries the
    answer (a modal submission) is claimed first (`__call__`), and so are events reaching the app
    other than through the Socket Mode handler: the ack waits for the claim at most `wait`
    seconds (a busy SQLite file, a slow server). Past that, an event is acked at once and
    handled later, by `later()`, once the database has said it is ours; a submission, given no
    `later`, is handled now, its answer in its ack, and its claim recorded when it comes in (if the
    database fails outright, either is handled anyway: answering twice is better than never; a
    form's errors unsaid is worse). After one such wait,
    the next `SLOW_SECONDS` of deliveries do not wait at all: a burst into a locked database is
    acked at once rather than half a second apart.
    """

    SLOW_SECONDS = 5.0
    LATE_WAIT = 60.0  # how long a deferred delivery waits for its claim before it is handled anyway

    def __init__(self, store, replica: str, clock, *, wait: float = CLAIM_WAIT, remember: int = 2000,
                 monotonic: Callable[[], float] = time.monotonic):
        self.store, self.replica, self.clock, self.wait = store, replica, clock, wait
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="claim")
        self._local: dict[str, None] = {}
        self._granted: set[str] = set()  # deferred deliveries whose claim came through, on their way in
        self._remember = remember
        self._monotonic = monotonic
        self._slow_until = 0.0
        self._lock = threading.Lock()

    def __call__(self, key: str, later: Callable[[], None] | None = None, *, block: bool = False) -> bool:
        """True: handle this delivery of `key` now. False: drop it (another delivery has it), or, when
        the database is slow and `later` is given, it runs `later()` once the claim is ours.
        block=True waits for the database however long it takes (tests dispatching inline)."""
        with self._lock:
            if key in self._granted:
                self._granted.discard(key)
                return True
        future = self._pool.submit(self.store.claim_event, key, replica=self.replica,
                                   now=self.clock().timestamp())
        slow = not block and self._monotonic() < self._slow_until
        try:
            return future.result(timeout=None if block else 0.0 if slow else self.wait)
        except StoreError as e:
            log.warning("could not record %s as handled (handling it anyway): %s", key, e)
            return self._first_here(key)
        except TimeoutError:
            if not slow:
                log.warning("the database took over %.1f s to record %s as handled: acking it, and for %.0f s "
                            "every delivery, at once, and handling each once its claim is in", self.wait, key,
                            self.SLOW_SECONDS)
                self._slow_until = self._monotonic() + self.SLOW_SECONDS
            if later is None:
                return self._first_here(key)
        threading.Thread(target=self._when_claimed, args=(key, future, later), name="claim-late",
                         daemon=True).start()
        return False

    def middleware(self, app: App, *, inline: bool = False):
        """Bolt middleware for `app`: drop an event whose event_id another delivery (on any replica)
        already claimed. A deferred one is dispatched through `app` again once the claim is ours.
        inline=True (tests dispatching inline): wait for the claim however long it takes."""
        def drop_claimed_events(body, next, logger):
            event_id = body.get("event_id") if body.get("type") == "event_callback" else None
            if event_id and not self(f"event:{event_id}", block=inline,
                                     later=lambda: app.dispatch(BoltRequest(body=body, mode="socket_mode"))):
                logger.debug("duplicate event %s dropped", event_id)
                return BoltResponse(status=200, body="")  # acked, not handled twice
            return next()
        return drop_claimed_events

    def after_ack(self, key: str, run: Callable[[], None]) -> None:
        """A delivery Slack has had its ack for: claim `key` off the ack path, then run() if it is
        ours (or if the database cannot say: answering twice is better than never)."""
        self._pool.submit(self._claim_then, key, run)

    def close(self) -> None:
        """Wait for the claims in flight (and what they run) to finish; no new ones after this."""
        self._pool.shutdown(wait=True)

    def _claim_then(self, key: str, run: Callable[[], None]) -> None:
        try:
            ours = self.store.claim_event(key, replica=self.replica, now=self.clock().timestamp())
        except StoreError as e:
            log.warning("could not record %s as handled (handling it anyway): %s", key, e)
            ours = self._first_here(key)
        self._run_ours(key, ours, run)

    def _when_claimed(self, key: str, future, later: Callable[[], None]) -> None:
        try:
            ours = future.result(timeout=self.LATE_WAIT)
        except (StoreError, TimeoutError) as e:
            log.warning("could not record %s as handled (handling it anyway): %s", key, e or "timed out")
            ours = self._first_here(key)
        self._run_ours(key, ours, later)

    def _run_ours(self, key: str, ours: bool, later: Callable[[], None]) -> None:
        if not ours:
            log.info("%s was handled by another delivery: dropped", key)
            return
        with self._lock:
            self._granted.add(key)
        try:
            later()
        except Exception as e:
            log.error("handling %s failed: %s", key, e, exc_info=True)
        finally:
            with self._lock:
                self._granted.discard(key)

    def _first_here(self, key: str) -> bool:
        """The database cannot tell: handle a delivery unless this process already had it."""
        with self._lock:
            if key in self._local:
                return False
            self._local[key] = None
            while len(self._local) > self._remember:
                self._local.pop(next(iter(self._local)))
            return True


def envelope_key(type_: str | None, envelope_id: str | None) -> str | None:
    """The claim key of a Socket Mode envelope Slack may deliver again (a slash command, a click, a
    modal): its envelope id. Events are claimed by their event_id instead (EventClaims.middleware),
    which every retry of the event carries."""
    if not envelope_id or type_ in (None, "events_api", "hello", "disconnect"):
        return None
    return f"envelope:{envelope_id}"


# Interactive payloads whose ack carries the answer (a modal's field errors, a menu's options):
# those are claimed before the ack. Every other delivery is acked first and claimed after.
ANSWERED_IN_ACK = frozenset({"view_submission", "block_suggestion"})
# Buttons answered with a modal (views.open): its trigger_id lasts about 3 s from the click, and a
# claim into a busy database can take longer, so the form opens first and the claim only records it.
# Opening a form changes nothing; its submission is claimed before it acts (ANSWERED_IN_ACK).
OPENS_A_MODAL = frozenset({ACTION_CLUB_SETUP})


def opens_a_modal(payload: dict | None) -> bool:
    """Whether this interactive payload is a click on a button whose answer is a modal (OPENS_A_MODAL)."""
    payload = payload or {}
    return payload.get("type") == "block_actions" and any(
        (a or {}).get("action_id") in OPENS_A_MODAL for a in payload.get("actions") or [])


def delivery_key(type_: str | None, envelope_id: str | None, payload: dict | None) -> tuple[str | None, bool]:
    """(claim key, whether the ack may go out before the claim) for one Socket Mode envelope.

    An event is keyed by its event_id (every retry carries it), anything else by its envelope
    id; hello and disconnect have none. Acking first keeps the database off the ack path: a
    retry that reaches another replica still finds the claim, and a crash between ack and
    claim loses no more than one between claim and reply would."""
    payload = payload or {}
    if type_ == "events_api":
        event_id = payload.get("event_id")
        return (f"event:{event_id}" if event_id else None), True
    key = envelope_key(type_, envelope_id)
    return key, payload.get("type") not in ANSWERED_IN_ACK
