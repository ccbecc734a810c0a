"""The Bolt app: the /paper command and paper buttons here, each feature's listeners by its register().

`create_app(deps)` registers, in order: the paper command, a paper card's
buttons and its overflow menu (Summary, More like this, Share, Save, Nominate:
each one handler, whichever way it is clicked), then each feature module's
`register(app, deps)` (bot/reactions.py: reaction events and the verdict
buttons, bot/home.py: App Home), then a no-op
listener for the one other subscribed event. Listeners run on the Socket Mode thread: they call `ack()` and
hand the slow part (search, summaries, Web API calls) to `deps.later`, a
work pool (bot/later.py), so Slack hears back within milliseconds even when
every worker is busy. The ack goes out when the listener returns, so every
listener does the same: ack, then `deps.later(job, respond)` for anything
slower than a few ms. In tests `later` runs the job inline and
`app.dispatch` returns only when the reply has been sent.
"""
from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Sequence

from slack_bolt import App, BoltResponse
from slack_sdk import WebClient

from . import blocks as bk
from . import calibrate, club, confirm, hello, home, reactions, reading, unfurl
from .claims import EventClaims
from .commands import (
    Reply,
    for_channel,
    run_command,
    similar_reply,
    summary_reply,
    working_line,
)
from .deps.build import make_client
from .later import make_later, report_error
from .sharing import share_in_channel
from .outgoing import gate_middleware, gated

if TYPE_CHECKING:
    from .deps import Deps, Register

log = logging.getLogger(__name__)

# The feature modules' listeners, registered before the fallbacks below (Bolt runs only the
# first listener that matches). A new feature adds its register function here.
FEATURES: tuple[Register, ...] = (reactions.register, home.register, unfurl.register,
                                  club.register, hello.register, confirm.register, calibrate.register)


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


def _drop_token_unused_warning(record: logging.LogRecord) -> bool:
    """Bolt warns that SLACK_BOT_TOKEN is unused when a client is given: it is, by the client."""
    return "`token` will be unused" not in record.getMessage()


# -- the app ------------------------------------------------------------------------------
def create_app(deps: Deps, *, client: WebClient | None = None, process_before_response: bool = False,
               features: Sequence[Register] = FEATURES) -> App:
    """The Bolt app with every listener registered (auth.test runs here, so Slack must answer).

    `client` defaults to deps.slack (else a new one for SLACK_API_URL, bot.deps.build.make_client).
    process_before_response=True (tests): slow work runs inline, so replies are sent before
    `dispatch` returns. False (production): listeners ack and hand it to `deps.later`.
    """
    if process_before_response:
        deps = replace(deps, later=make_later(None))
    client = gated(client or deps.slack) or make_client(deps.settings)
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
    claims = deps.claims or EventClaims(deps.store, deps.replica, deps.clock)
    app.middleware(claims.middleware(app, inline=process_before_response))
    app.middleware(gate_middleware)

    # -- /paper ---------------------------------------------------------------------------
    @app.command(deps.command)
    def handle_paper_command(ack, command, respond):
        working = working_line(deps, command.get("text"))  # slow work is not silent: say what is under way
        ack(text=working) if working else ack()
        later(lambda: send(respond, run_command(deps, command.get("user_id", ""), command.get("text"),
                                                channel_id=command.get("channel_id", ""))), respond)

    # -- a paper card's buttons and menu ---------------------------------------------------------
    def answer_with(make_reply):
        """Summary, More like this: the reply its command gives."""
        def answer(paper_id: str, body: dict, respond, client) -> None:
            paper = store.get_paper(paper_id)
            if paper is None:
                return _gone(respond)
            send(respond, for_channel(deps, make_reply(deps, paper), _channel_of(body)))
        return answer

    # What each paper action does with (paper id, body, respond, client): a button and its menu
    # entry (bk.menu_value) run the same one.
    paper_actions = {
        bk.ACTION_SUMMARY: answer_with(summary_reply),
        bk.ACTION_SIMILAR: answer_with(similar_reply),
        bk.ACTION_SHARE: lambda paper_id, body, respond, client: share_paper(
            deps, client, respond, store.get_paper(paper_id), _user_of(body), _channel_of(body)),
        bk.ACTION_SAVE: lambda paper_id, body, respond, client: reading.save_paper(
            deps, respond, paper_id, _user_of(body)),
        bk.ACTION_NOMINATE: lambda paper_id, body, respond, client: club.nominate_paper(
            deps, respond, paper_id, body),
    }

    def paper_button(action_id: str) -> None:
        @app.action(action_id)
        def handle_paper_button(ack, action, body, respond, client):
            ack()  # the ack goes out when this returns: reads and writes wait for the work pool
            answer = paper_actions[action_id]
            later(lambda: answer((action.get("value") or "").strip(), body, respond, client), respond)

    for action_id in paper_actions:
        paper_button(action_id)

    @app.action(bk.ACTION_MENU)
    def handle_paper_menu(ack, action, body, respond, client):
        ack()
        # The chosen option's value names the button it stands for: "paper_summary|<paper id>".
        value = (action.get("selected_option") or {}).get("value") or action.get("value")
        chosen, paper_id = bk.menu_choice(value)
        answer = paper_actions.get(chosen or "")
        if answer is None:
            log.info("paper menu: unknown option %r", (value or "")[:80])
            later(lambda: respond(text="That menu entry is out of date: use the buttons on a newer card, "
                                       f"or type {bk.code(deps.command + ' help')}.",
                                  response_type="ephemeral", replace_original=False), respond)
            return
        later(lambda: answer(paper_id, body, respond, client), respond)

    for register in features:
        register(app, deps)

    @app.error
    def handle_errors(error, context, logger):
        report_error(error, context.respond, logger)
        # Bolt marks a failed listener 500 and the Socket Mode adapter then sends no ack at all:
        # Slack would show a timeout on top of our apology, and redeliver events. Ack anyway.
        return BoltResponse(status=200, body="")

    return app


def share_paper(deps: Deps, client: WebClient, respond, paper, user_id: str, channel: str | None) -> None:
    """Share on a paper card: post it in the channel (crediting the sharer), then confirm privately."""
    if paper is None:
        return _gone(respond)
    if not channel:
        respond(text="I can only share into a channel.", response_type="ephemeral", replace_original=False)
        return
    respond(**share_in_channel(deps, client, paper, user_id, channel).to_message(), replace_original=False)
