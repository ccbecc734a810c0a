"""Destructive commands ask first, the Slack way (forget-me, feed remove, club off, interests remove).

Without a trailing `confirm` word such a command only says what it would do, with a danger button
whose Slack `confirm` dialog asks once more. The click re-runs the same command line plus `confirm`
through `run_command`, as the clicking member in that channel, so every check the command makes
(admins only, the thing still exists) runs again at the moment it acts; where a list numbers what
it removes, the line names it instead (`feed remove arxiv cs.CV`), so a list renumbered meanwhile
cannot turn the click onto another row. The console has no
buttons: typing `/paper forget-me confirm` does the same.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from . import blocks as bk
from .commands import run_command
from .grammar import Call, Reply

if TYPE_CHECKING:
    from slack_bolt import App

    from .deps import Deps

CONFIRM_WORD = "confirm"


def split_confirm(args: str) -> tuple[str, bool]:
    """(the words before a trailing `confirm`, whether it was there)."""
    words = args.split()
    if words and words[-1].lower() == CONFIRM_WORD:
        return " ".join(words[:-1]), True
    return " ".join(words), False


def ask_first(deps: Deps, call: Call, args: str, *, text: str, title: str, button: str) -> Reply:
    """What `call.name args` would do (mrkdwn, escaped) and how to go ahead: button or typed."""
    line = f"{call.name} {args}".strip() + f" {CONFIRM_WORD}"
    return Reply(f"{text} ({deps.command} {line} goes ahead.)",
                 bk.confirm_blocks(text, title=title, button=button, line=line, typed=f"{deps.command} {line}"))


def register(app: App, deps: Deps) -> None:
    """The danger button of every confirmation: the command again, confirmed, as the clicker."""
    @app.action(bk.ACTION_CONFIRM)
    def handle_confirm_button(ack, action, body, respond):
        ack()
        line = (action.get("value") or "").strip()
        user = (body.get("user") or {}).get("id") or ""
        channel = (body.get("channel") or {}).get("id") or (body.get("container") or {}).get("channel_id") or ""
        if not split_confirm(line)[1]:  # only ever a confirmed line: never run a stray value
            respond(text="That button no longer holds a command to confirm; nothing was changed. "
                         "Type the command again to see what it would do.", replace_original=False)
            return
        # The outcome takes the question's place: it cannot be clicked twice.
        deps.later(lambda: respond(**run_command(deps, user, line, channel_id=channel).to_message(),
                                   replace_original=True), respond)
