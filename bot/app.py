"""The Bolt app: the /paper command and paper buttons here, each feature's listeners by its register().

`create_app(deps)` registers, in order: the paper command and buttons, then
each feature module's `register(app, deps)` (bot/reading.py: the Save button,
bot/reactions.py: reaction events, bot/home.py: App Home), then a no-op
listener for the one other subscribed event. Listeners run on the Socket Mode thread: they call `ack()` and
hand the slow part (search, summaries, Web API calls) to `deps.later`, a
work pool (`make_later`), so Slack hears back within milliseconds even when
every worker is busy. The ack goes out when the listener returns, so every
listener does the same: ack, then `deps.later(job, respond)` for anything
slower than a few ms. In tests `later` runs the job inline and
`app.dispatch` returns only when the reply has been sent.
"""
from __future__ import annotations

import json
import logging
import threading
import time
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import replace
from typing import TYPE_CHECKING, Callable, Sequence

from slack_bolt import App, BoltRequest, BoltResponse
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_handlers import (
    ConnectionErrorRetryHandler,
    RateLimitErrorRetryHandler,
    ServerErrorRetryHandler,
)

from store.errors import StoreError

from . import blocks as bk
from . import club, home, reactions, reading, unfurl
from .commands import Reply, run_command, share_reply, similar_reply, summary_reply

if TYPE_CHECKING:
    from .config import Settings
    from .deps import Deps, Later, Register

log = logging.getLogger(__name__)

# The feature modules' listeners, registered before the fallbacks below (Bolt runs only the
# first listener that matches). A new feature adds its register function here.
FEATURES: tuple[Register, ...] = (reading.register, reactions.register, home.register, unfurl.register,
                                  club.register)

SORRY = ("Sorry, something went wrong on my side while answering that. It has been logged; "
         "please try again in a minute.")
WORK_THREADS = 16  # they mostly wait: on the batched encoder, SQLite, Slack
RESPOND_TRIES = 4  # a reply the response_url refuses (429, 5xx) is sent again, for a few seconds


# Web API methods that carry text members see; SafeClient sends their payloads through bk.outgoing.
_SPEAKING = ("chat.", "views.")


class SafeClient(WebClient):
    """A WebClient whose messages and views pass bk.outgoing first: no injected <!channel> or <@U>."""

    def api_call(self, api_method: str, **kwargs):
        if api_method.startswith(_SPEAKING):
            for part in ("json", "params", "data"):
                if isinstance(kwargs.get(part), dict):
                    kwargs[part] = _outgoing_fields(kwargs[part])
        return super().api_call(api_method, **kwargs)


def _outgoing_fields(fields: dict) -> dict:
    out = dict(fields)
    for key in ("text", "blocks", "view", "attachments"):
        value = out.get(key)
        if isinstance(value, str) and key != "text":  # sent form-encoded: JSON in a string
            try:
                out[key] = json.dumps(bk.outgoing(json.loads(value)))
            except ValueError:
                pass
        elif value is not None:
            out[key] = bk.outgoing(value)
    return out


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


# -- helpers ----------------------------------------------------------------------------
def _channel_of(body: dict) -> str | None:
    """The conversation a button was clicked in (None in App Home)."""
    channel = body.get("channel") or {}
    return channel.get("id") or (body.get("container") or {}).get("channel_id")


def _user_of(body: dict) -> str:
    return (body.get("user") or {}).get("id") or body.get("user_id") or ""


def _gone(respond) -> None:
    respond(text="That paper is no longer in the library.", response_type="ephemeral",
            replace_original=False)


def report_error(error: BaseException, respond, logger: logging.Logger | None = None) -> None:
    """Log the failure (tokens are scrubbed by the log formatter) and say sorry, briefly."""
    (logger or log).error("listener failed: %s: %s", type(error).__name__, error,
                          exc_info=(type(error), error, error.__traceback__))
    if respond is None or isinstance(error, ReplyNotDelivered):  # the same way would fail again
        return
    try:
        respond(text=SORRY, response_type="ephemeral", replace_original=False)
    except Exception as e:  # the apology itself failed (response_url expired): logging is all we can do
        log.warning("could not tell the user about the error: %s", e)


class ReplyNotDelivered(Exception):
    """The response_url kept refusing a reply: logged, since the user cannot be told that way."""


class RetryingRespond:
    """Bolt's respond(), except that a reply refused with 429 or 5xx is retried (Retry-After is
    honoured) and one that never gets through raises, instead of vanishing without a trace."""

    def __init__(self, respond, sleep: Callable[[float], None] = time.sleep):
        self.respond, self.sleep = respond, sleep
        self.response_url = respond.response_url

    def __call__(self, *args, **kwargs):
        kwargs = _outgoing_fields(kwargs)
        if args and isinstance(args[0], str):
            args = (bk.outgoing(args[0]), *args[1:])
        for attempt in range(1, RESPOND_TRIES + 1):
            response = self.respond(*args, **kwargs)
            status = response.status_code
            if status < 400:
                return response
            if status != 429 and status < 500:
                break  # e.g. 404: the response_url expired; sending again will not help
            if attempt < RESPOND_TRIES:
                try:
                    wait = float((response.headers or {}).get("Retry-After"))
                except (TypeError, ValueError):
                    wait = 0.5 * 2 ** (attempt - 1)
                self.sleep(min(wait, 10.0))
        raise ReplyNotDelivered(f"Slack refused the reply (HTTP {status}: {str(response.body)[:100]})")


def _retrying_respond(context, next):
    """Middleware: every listener's respond() retries refused replies (see RetryingRespond), and
    its client is a SafeClient: both send what they say through bk.outgoing."""
    if context.response_url:
        context["respond"] = RetryingRespond(context.respond)
    client = context.client
    if client is not None and not isinstance(client, SafeClient):
        context["client"] = SafeClient(token=client.token, base_url=client.base_url, timeout=client.timeout,
                                       retry_handlers=client.retry_handlers, logger=client.logger,
                                       headers=client.headers)
    return next()


def _drop_token_unused_warning(record: logging.LogRecord) -> bool:
    """Bolt warns that SLACK_BOT_TOKEN is unused when a client is given: it is, by the client."""
    return "`token` will be unused" not in record.getMessage()


CLAIM_WAIT = 0.5  # seconds the ack waits for the database to record an envelope as handled


class EventClaims:
    """Which Slack deliveries this replica handles: a claim row per event or envelope in the shared
    database (store.claim_event), so a retry that reaches another replica is dropped there too.

    Most deliveries are acked at once and claimed after (`after_ack`). One whose ack carries the
    answer (a modal submission) is claimed first (`__call__`), and so are events reaching the app
    other than through the Socket Mode handler: the ack waits for the claim at most `wait`
    seconds (a busy SQLite file, a slow server). Past that, the delivery is acked at once and
    handled later, by `later()`, once the database has said it is ours (or, if the database
    fails outright, handled anyway: answering twice is better than never). After one such wait,
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
    modal): its envelope id. Events are claimed by their event_id instead (_EventClaims), which
    every retry of the event carries."""
    if not envelope_id or type_ in (None, "events_api", "hello", "disconnect"):
        return None
    return f"envelope:{envelope_id}"


# Interactive payloads whose ack carries the answer (a modal's field errors, a menu's options):
# those are claimed before the ack. Every other delivery is acked first and claimed after.
ANSWERED_IN_ACK = frozenset({"view_submission", "block_suggestion"})


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


class _EventClaims:
    """Middleware: drop events whose event_id another delivery (on any replica) already claimed."""

    def __init__(self, claims: EventClaims, *, inline: bool = False):
        self.claims, self.inline = claims, inline
        self.app: App | None = None  # set once built: a deferred event is dispatched through it again

    def __call__(self, body, next, logger):
        event_id = body.get("event_id") if body.get("type") == "event_callback" else None
        if event_id and not self.claims(f"event:{event_id}", later=self._dispatch_later(body), block=self.inline):
            logger.debug("duplicate event %s dropped", event_id)
            return BoltResponse(status=200, body="")  # acked, not handled twice
        return next()

    def _dispatch_later(self, body: dict):
        if self.app is None:
            return None
        app = self.app
        return lambda: app.dispatch(BoltRequest(body=body, mode="socket_mode"))


def make_later(executor: Executor | None) -> Later:
    """later(job, respond=None): run `job` on `executor` (inline when None); a failure gets the apology."""
    def later(job: Callable[[], None], respond=None) -> None:
        def run():
            try:
                job()
            except Exception as e:
                report_error(e, respond)
        if executor is None:
            run()
        else:
            executor.submit(run)
    return later


def work_pool() -> ThreadPoolExecutor:
    """The pool `later` hands slow work to in production."""
    return ThreadPoolExecutor(max_workers=WORK_THREADS, thread_name_prefix="work")


# -- the app ------------------------------------------------------------------------------
def create_app(deps: Deps, *, client: WebClient | None = None, process_before_response: bool = False,
               features: Sequence[Register] = FEATURES) -> App:
    """The Bolt app with every listener registered (auth.test runs here, so Slack must answer).

    `client` defaults to deps.slack (else a new one for SLACK_API_URL).
    process_before_response=True (tests): slow work runs inline, so replies are sent before
    `dispatch` returns. False (production): listeners ack and hand it to `deps.later`.
    """
    if process_before_response:
        deps = replace(deps, later=make_later(None))
    client = client or deps.slack or make_client(deps.settings)
    slack_log = logging.getLogger("paperclub.slack")
    slack_log.addFilter(_drop_token_unused_warning)
    app = App(
        client=client,
        # Always True for Bolt: our listeners only ack and hand the rest to `later`, so Bolt may
        # run them on the socket thread. With False it hops to another thread and polls for the
        # ack every 10 ms: measured ack p50 12 ms -> 1-2 ms, a burst of 40 p99 ~120 -> ~80 ms.
        # The price: a listener's ack goes out when it returns, so every listener must defer
        # slow work with deps.later; handle_errors below keeps a failing listener acked.
        process_before_response=True,
        logger=slack_log,
    )
    later = deps.later
    store = deps.store

    def send(respond, reply: Reply) -> None:
        respond(**reply.to_message(), replace_original=False)

    # Inline (tests): dispatch returns once the event is handled, so the claim is waited for.
    event_claims = _EventClaims(deps.claims or EventClaims(store, deps.replica, deps.clock),
                                inline=process_before_response)
    app.middleware(event_claims)
    event_claims.app = app
    app.middleware(_retrying_respond)

    # -- /paper ---------------------------------------------------------------------------
    @app.command(deps.command)
    def handle_paper_command(ack, command, respond):
        ack()
        later(lambda: send(respond, run_command(deps, command.get("user_id", ""), command.get("text"),
                                                channel_id=command.get("channel_id", ""))), respond)

    # -- buttons ----------------------------------------------------------------------------
    def paper_from(action: dict):
        return store.get_paper((action.get("value") or "").strip())

    def paper_button(action_id: str, make_reply) -> None:
        """A button that answers exactly as its command does (Summary, More like this)."""
        @app.action(action_id)
        def handle_paper_button(ack, action, respond):
            ack()

            def job():
                paper = paper_from(action)
                if paper is None:
                    return _gone(respond)
                send(respond, make_reply(deps, paper))
            later(job, respond)

    paper_button(bk.ACTION_SUMMARY, summary_reply)
    paper_button(bk.ACTION_SIMILAR, similar_reply)

    @app.action(bk.ACTION_SHARE)
    def handle_share_button(ack, action, body, respond, client):
        ack()
        later(lambda: share_paper(deps, client, respond, paper_from(action), _user_of(body),
                                  _channel_of(body)), respond)

    for register in features:
        register(app, deps)

    # -- every other subscribed event has a listener too, so every envelope is acked ----------
    @app.event("member_joined_channel")
    def handle_member_joined_channel(event, logger):
        logger.debug("member joined %s", event.get("channel"))

    @app.error
    def handle_errors(error, context, logger):
        report_error(error, context.respond, logger)
        # Bolt marks a failed listener 500 and the Socket Mode adapter then sends no ack at all:
        # Slack would show a timeout on top of our apology, and redeliver events. Ack anyway.
        return BoltResponse(status=200, body="")

    return app


def share_paper(deps: Deps, client: WebClient, respond, paper, user_id: str, channel: str | None) -> None:
    """Post a paper in the channel (crediting the sharer), then confirm privately."""
    if paper is None:
        return _gone(respond)
    reply = share_reply(deps, paper, user_id)
    message = reply.to_message()
    if not channel:
        respond(text="I can only share into a channel.", response_type="ephemeral", replace_original=False)
        return
    try:
        posted = client.chat_postMessage(channel=channel, text=message["text"], blocks=message["blocks"],
                                         unfurl_links=False, unfurl_media=False)
        # Reactions on the shared post are feedback on this paper (bot/reactions.py).
        deps.store.record_message_paper(channel, posted["ts"], paper.id, kind="share", posted_by=user_id or None,
                                        now=deps.clock().timestamp())
    except SlackApiError as e:
        # Not a member (or a DM between people): the command's response_url can still post here.
        if e.response.get("error") in ("not_in_channel", "channel_not_found") and respond is not None:
            respond(**message, replace_original=False)
            return
        raise
    respond(text=f"Shared *{bk.esc(paper.short_name)}* in <#{channel}>.", response_type="ephemeral",
            replace_original=False)

