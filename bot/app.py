"""The Bolt app: every Slack listener, wired to the /paper grammar in bot/commands.py.

Listeners run on the Socket Mode thread: they call `ack()` and hand the slow
part (search, summaries, Web API calls) to `deps.later`, a work pool, so
Slack hears back within milliseconds even when every worker is busy. The ack
goes out when the listener returns, so an extension's listener must do the
same: ack, then `deps.later(job, respond)` for anything slower than a few ms.
With `process_before_response=True` (tests) `later` runs the job inline and
`app.dispatch` returns only when the reply has been sent.
"""
from __future__ import annotations

import importlib
import logging
import threading
import time
from collections import OrderedDict
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Callable

from slack_bolt import App, BoltResponse
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_handlers import (
    ConnectionErrorRetryHandler,
    RateLimitErrorRetryHandler,
    ServerErrorRetryHandler,
)
from slack_sdk.models.blocks import Block, DividerBlock

from . import blocks as bk
from .commands import SUBCOMMANDS, Deps, Reply, code, run_command, share_reply, similar_reply, summary_reply

log = logging.getLogger(__name__)

# Modules that add subcommands (via @subcommand at import) or listeners (a `register(app, deps)`
# function). Later features append their module here: "bot.interests", "bot.daily", ...
EXTENSIONS: list[str] = ["bot.daily", "bot.reactions", "bot.overview"]

# App Home hooks: functions (deps, user_id) -> extra blocks (schedules, interests, saved papers).
HomeSection = Callable[[Deps, str], list[Block]]
HOME_SECTIONS: list[HomeSection] = []

SORRY = ("Sorry, something went wrong on my side while answering that. It has been logged; "
         "please try again in a minute.")
WORK_THREADS = 16  # they mostly wait: on the batched encoder, SQLite, Slack
SEEN_EVENTS = 2000  # event ids remembered for de-duplication (Slack delivers at least once)
RESPOND_TRIES = 4  # a reply the response_url refuses (429, 5xx) is sent again, for a few seconds


def home_section(fn: HomeSection) -> HomeSection:
    """Register an App Home hook (decorator)."""
    HOME_SECTIONS.append(fn)
    return fn


def make_client(settings) -> WebClient:
    """A WebClient for SLACK_API_URL that retries rate limits, dropped connections and 5xx."""
    token = settings.slack_bot_token.get_secret_value() if settings.slack_bot_token else None
    return WebClient(
        token=token,
        base_url=settings.slack_api_url,
        timeout=15,
        retry_handlers=[
            ConnectionErrorRetryHandler(max_retry_count=2),
            RateLimitErrorRetryHandler(max_retry_count=3),
            ServerErrorRetryHandler(max_retry_count=2),
        ],
    )


def make_llm(settings):
    """The optional LLM client for TL;DRs (None unless PAPERCLUB_LLM_URL and _MODEL are set)."""
    if not getattr(settings, "llm_url", None):
        return None
    if not getattr(settings, "llm_model", None):
        log.warning("PAPERCLUB_LLM_URL is set but PAPERCLUB_LLM_MODEL is not: using extractive summaries")
        return None
    from store.llm import LLMClient, LLMConfig

    key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else None
    return LLMClient(LLMConfig(url=settings.llm_url, model=settings.llm_model, api_key=key))


def load_extensions(app: App | None, deps: Deps) -> None:
    """Import every extension module; call its `register(app, deps)` when there is an app."""
    for name in EXTENSIONS:
        module = importlib.import_module(name)
        if app is not None and hasattr(module, "register"):
            module.register(app, deps)


# -- App Home ---------------------------------------------------------------------------
def home_blocks(deps: Deps, user_id: str) -> list[Block]:
    """What the bot is, how to use it, then whatever the registered hooks add for this user."""
    cmd = deps.command
    stats = ", ".join(f"{c or 'uncategorised'} ({n})" for c, _, n in deps.store.collections()[:8])
    entries = [(s.usage, s.help, s.example) for s in SUBCOMMANDS.values() if not s.hidden]
    blocks: list[Block] = [
        bk.header("paperclub: the reading group's paper finder"),
        bk.section("Find papers by meaning or keyword, read a short summary, see related work, "
                   "and share the good ones with the channel. Type "
                   f"{code(cmd + ' search <words>')} in any channel; only you see the answer "
                   "until you press *Share to channel*."),
        bk.context(f"{deps.store.count_papers():,} papers", bk.esc(stats)),
        DividerBlock(),
    ]
    blocks += bk.help_blocks(cmd, entries, title="How to use")
    for hook in HOME_SECTIONS:
        try:
            extra = hook(deps, user_id)
        except Exception:  # one broken section must not blank the whole Home tab
            log.warning("home section %s failed", getattr(hook, "__name__", hook), exc_info=True)
            continue
        if extra:
            blocks += [DividerBlock(), *extra]
    return blocks[: bk.MAX_VIEW_BLOCKS]


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
    """Middleware: every listener's respond() retries refused replies (see RetryingRespond)."""
    if context.response_url:
        context["respond"] = RetryingRespond(context.respond)
    return next()


def _drop_token_unused_warning(record: logging.LogRecord) -> bool:
    """Bolt warns that SLACK_BOT_TOKEN is unused when a client is given: it is, by the client."""
    return "`token` will be unused" not in record.getMessage()


class _EventDeduper:
    """Drop events whose event_id was already handled (retries after a slow ack)."""

    def __init__(self, size: int = SEEN_EVENTS):
        self.size = size
        self.seen: OrderedDict[str, None] = OrderedDict()
        self.lock = threading.Lock()

    def __call__(self, body, next, logger):
        event_id = body.get("event_id") if body.get("type") == "event_callback" else None
        if event_id:
            with self.lock:
                if event_id in self.seen:
                    logger.debug("duplicate event %s dropped", event_id)
                    return BoltResponse(status=200, body="")  # acked, not handled twice
                self.seen[event_id] = None
                while len(self.seen) > self.size:
                    self.seen.popitem(last=False)
        return next()


# -- the app ------------------------------------------------------------------------------
def create_app(settings, store, searcher, *, client: WebClient | None = None,
               process_before_response: bool = False, llm=None,
               executor: Executor | None = None) -> App:
    """The Bolt app with every listener registered (auth.test runs here, so Slack must answer).

    process_before_response=True (tests): replies are sent before `dispatch` returns.
    False (production): listeners ack, hand the slow part to `executor`, and return.
    """
    client = client or make_client(settings)
    slack_log = logging.getLogger("paperclub.slack")
    slack_log.addFilter(_drop_token_unused_warning)
    app = App(
        client=client,
        # Always True for Bolt: our listeners only ack and hand the rest to `later`, so Bolt may
        # run them on the socket thread. With False it hops to another thread and polls for the
        # ack every 10 ms: measured ack p50 12 ms -> 1-2 ms, a burst of 40 p99 ~120 -> ~80 ms.
        # The price: a listener's ack goes out when it returns, so extensions must defer slow
        # work with deps.later too; handle_errors below keeps a failing listener acked.
        process_before_response=True,
        logger=slack_log,
    )
    if executor is None and not process_before_response:
        executor = ThreadPoolExecutor(max_workers=WORK_THREADS, thread_name_prefix="work")

    def later(job: Callable[[], None], respond=None) -> None:
        """Run the slow part after the ack; failures get the same apology as @app.error."""
        def run():
            try:
                job()
            except Exception as e:
                report_error(e, respond)
        if process_before_response:
            run()
        else:
            executor.submit(run)

    deps = Deps(settings=settings, store=store, searcher=searcher, llm=llm, later=later)

    def send(respond, reply: Reply) -> None:
        respond(**reply.to_message(), replace_original=False)

    app.middleware(_EventDeduper())
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

    # Bolt runs only the first listener that matches, so extensions register before the
    # fallbacks below: a feature's reaction_added listener wins over the no-op one.
    load_extensions(app, deps)

    # -- events (every subscribed one has a listener, so every envelope is acked) ------------
    @app.event("app_home_opened")
    def handle_app_home_opened(event, client):
        if event.get("tab", "home") != "home":
            return
        user = event.get("user", "")
        later(lambda: client.views_publish(user_id=user, view=bk.home_view(home_blocks(deps, user))),
              None)

    @app.event("reaction_added")
    def handle_reaction_added(body, client, context):
        from .reactions import handle_reaction_added as record  # bot.reactions imports this module

        later(lambda: record(deps, body, client=client, bot_user_id=context.bot_user_id))

    @app.event("reaction_removed")
    def handle_reaction_removed(body, client, context):
        from .reactions import handle_reaction_removed as record

        later(lambda: record(deps, body, client=client, bot_user_id=context.bot_user_id))

    @app.event("member_joined_channel")
    def handle_member_joined_channel(event, logger):
        logger.debug("member joined %s", event.get("channel"))

    @app.error
    def handle_errors(error, context, logger):
        report_error(error, context.respond, logger)
        # Bolt marks a failed listener 500 and the Socket Mode adapter then sends no ack at all:
        # Slack would show a timeout on top of our apology, and redeliver events. Ack anyway.
        return BoltResponse(status=200, body="")

    app.paperclub_deps = deps  # for extensions and tests that need the same wiring
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
                                         now=time.time())
    except SlackApiError as e:
        # Not a member (or a DM between people): the command's response_url can still post here.
        if e.response.get("error") in ("not_in_channel", "channel_not_found") and respond is not None:
            respond(**message, replace_original=False)
            return
        raise
    respond(text=f"Shared *{bk.esc(paper.short_name)}* in <#{channel}>.", response_type="ephemeral",
            replace_original=False)

