"""A short hello when the bot is invited into a channel (member_joined_channel for the bot itself):
what it does there and the two commands that start the paper of the day. A person joining a channel
with a paper of the day gets a private welcome instead (bot/calibrate.py: add a topic, rate a few papers)."""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from . import blocks as bk
from .blocks import code
from .calibrate import welcome_member

if TYPE_CHECKING:
    from slack_bolt import App

    from .deps import Deps

log = logging.getLogger(__name__)


def hello_text(deps: Deps, channel: str) -> str:
    """The hello, already escaped: the next steps, or the schedule when the channel has one."""
    cmd = deps.command
    if deps.store.get_schedule(channel):
        return (f"Hi again. The paper of the day is still on here: {code(cmd + ' schedule')} says when, "
                f"{code(cmd + ' help')} lists everything.")
    return ("Hi! I'm paperclub. I can post a *paper of the day* here, picked for this channel's "
            "interests and steered by your reactions, and I answer "
            f"{code(cmd)} commands (replies only you see until you share them). To start:\n"
            f"1. {code(cmd + ' interests add <a topic you read about>')}\n"
            f"2. {code(cmd + ' schedule 09:00 weekdays')} (in your time zone)\n"
            f"{code(cmd + ' help')} lists everything.")


def register(app: App, deps: Deps) -> None:
    @app.event("member_joined_channel")
    def handle_member_joined_channel(event, context, client):
        channel, user = event.get("channel"), event.get("user")
        if not channel or not user:
            return
        if user != context.get("bot_user_id"):  # a person joined: a private welcome, where it is worth one
            deps.later(lambda: welcome_member(deps, client, channel, user), None)
            return

        def job():
            text = hello_text(deps, channel)
            client.chat_postMessage(channel=channel, text=text, blocks=bk.message_blocks(text),
                                    unfurl_links=False, unfurl_media=False)
            log.info("said hello in %s", channel)
        deps.later(job, None)
