"""A short hello when the bot is invited into a channel (member_joined_channel for the bot itself):
what it does there and the two commands that start the paper of the day. Invited back on a day whose
paper Slack refused because the bot was out of the channel, it says the paper comes, and posts it
(bot/posting.py); a channel unarchived (channel_unarchive, group_unarchive) on such a day gets the same,
and nothing otherwise. A person joining a channel with a paper of the day gets a private welcome instead
(bot/calibrate.py: add a topic, rate a few papers)."""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from . import blocks as bk
from . import posting
from .blocks import code
from .calibrate import welcome_member

if TYPE_CHECKING:
    from slack_bolt import App

    from .deps import Deps

log = logging.getLogger(__name__)


def hello_text(deps: Deps, channel: str, *, paper_coming: bool = False, unarchived: bool = False) -> str:
    """The hello, already escaped: the next steps, or the schedule when the channel has one (and,
    `paper_coming`, that today's refused paper follows, refused as the bot was out of the channel or,
    `unarchived`, as the channel was archived)."""
    cmd = deps.command
    if paper_coming:
        while_ = "this channel was archived" if unarchived else "I was out of this channel"
        return (f"Hi again. Here is today's paper, which I could not post while {while_}; "
                f"{code(cmd + ' schedule')} says when the next one comes.")
    if deps.store.get_schedule(channel):
        return (f"Hi again. The paper of the day is still on here: {code(cmd + ' schedule')} says when, "
                f"{code(cmd + ' help')} lists everything.")
    return ("Hi! I'm paperclub. I can post a *paper of the day* here, picked for this channel's "
            "interests and steered by your reactions, and I answer "
            f"{code(cmd)} commands (replies only you see until you share them). To start:\n"
            f"1. {code(cmd + ' interests add <a topic you read about>')}\n"
            f"2. {code(cmd + ' schedule 09:00 weekdays')} (in your time zone)\n"
            f"{code(cmd + ' help')} lists everything.")


def back_in_channel(deps: Deps, client, channel: str, *, unarchived: bool = False) -> None:
    """Slack takes the bot's posts in `channel` again (the bot invited back, or the channel `unarchived`):
    the refusals before now no longer stand, and a paper of the day Slack refused today comes at once,
    after a hello. An unarchived channel with no such paper hears nothing: that is no invitation (and the
    bot hears of every public channel's unarchiving)."""
    now = deps.clock()
    scheduled = deps.store.get_schedule(channel)
    if unarchived and not scheduled and not deps.store.get_club(channel):
        return  # a channel the bot posts nothing in: no record of it
    posting.invited(deps.store, channel, now)  # the sweeps (the club's too) stop waiting out a refusal here
    day = posting.refused_today(deps.store, channel, now, deps.settings) if scheduled else None
    if unarchived and day is None:
        return
    text = hello_text(deps, channel, paper_coming=day is not None, unarchived=unarchived)
    client.chat_postMessage(channel=channel, text=text, blocks=bk.message_blocks(text),
                            unfurl_links=False, unfurl_media=False)
    log.info("said hello in %s%s", channel, " (unarchived)" if unarchived else "")
    if day is not None:  # the one machine: a sweep retrying it meanwhile does not post it twice
        result = posting.post_day(deps, client, channel, day, now)
        log.info("back in %s: the %s post %s", channel, day, result.status)


def register(app: App, deps: Deps) -> None:
    @app.event("member_joined_channel")
    def handle_member_joined_channel(event, context, client):
        channel, user = event.get("channel"), event.get("user")
        if not channel or not user:
            return
        if user != context.get("bot_user_id"):  # a person joined: a private welcome, where it is worth one
            deps.later(lambda: welcome_member(deps, client, channel, user), None)
            return
        deps.later(lambda: back_in_channel(deps, client, channel), None)

    def handle_unarchive(event, client):
        if channel := event.get("channel"):
            deps.later(lambda: back_in_channel(deps, client, channel, unarchived=True), None)

    app.event("channel_unarchive")(handle_unarchive)  # a public channel
    app.event("group_unarchive")(handle_unarchive)  # a private one
