"""`/paper share` and the Share button: a paper posted in the channel with the sharer's name, once a day
per channel and paper (the one exactly-once machine, bot/posting.py), recorded for the digest and the
reactions."""
from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from store.schedule import channel_tz, local_today

from . import blocks as bk
from .commands import for_channel, resolve, share_reply, summary_reply
from .grammar import Call, Reply, Subcommand
from .later import wait_out_busy
from .posting import SHARE_BUDGET, Post, PostFailed, channel_gone

if TYPE_CHECKING:
    from .deps import Deps


def share_in_channel(deps: Deps, client, paper, user_id: str, channel: str) -> Reply:
    """Post a paper in the channel crediting the sharer, once a day per channel and paper (the one
    exactly-once machine, posting.Poster: Share pressed twice, or the paper shared again that day,
    says where it is already), and remember the message (its reactions are feedback, the digest
    lists it); the private "Shared" to answer with. Where the bot may not post (not a member, a DM
    between people), the post itself, for the command's response_url to carry."""
    reply = for_channel(deps, share_reply(deps, paper, user_id), channel)
    now = deps.clock()
    day = local_today(channel_tz(deps.store, channel, deps.settings.timezone), now)
    message = {**reply.to_message(), "unfurl_links": False, "unfurl_media": False}
    message.pop("response_type", None)
    post = Post(channel, f"share:{paper.id}:{day.isoformat()}", "share", day, lambda _claim: message,
                look_back=timedelta(0))
    # A busy database is waited out, before the post (the claim) and after it (the record): once the
    # claim is there, a retry looks for the post before sending it again.
    result = wait_out_busy(lambda: deps.poster.post_once(client, deps.store, post, now, budget=SHARE_BUDGET),
                           what=f"the share of {paper.id} in {channel}")
    name = f"*{bk.esc(paper.short_name)}*"
    if result.status in ("already", "busy"):
        text = (f"{name} was shared in <#{channel}> already today." if result.status == "already"
                else f"{name} is being shared in <#{channel}> right now.")
        return Reply(text, bk.message_blocks(text))
    if result.status == "failed":
        if channel_gone(result.detail):
            return reply
        raise PostFailed(f"the share of {paper.id} in {channel}: {result.detail}")
    # It is out already, so a busy or read-only database is waited out: "try again" would post it twice.
    wait_out_busy(lambda: deps.store.record_message_paper(channel, result.ts, paper.id, kind="share",
                                                          posted_by=user_id or None, now=now.timestamp()),
                  what=f"the share of {paper.id} in {channel}", no_reply=True)
    text = f"Shared {name} in <#{channel}>."
    return Reply(text, bk.message_blocks(text))


def handle_share(deps: Deps, call: Call) -> Reply:
    paper, note = resolve(deps, call.args)
    if note:  # never post a guess for everyone to see: show it privately first
        reply = summary_reply(deps, paper, note=note + " Press *Share to channel* if it's the one.")
        return reply
    if deps.slack is None or not call.channel_id:  # the console: the reply is the post
        return share_reply(deps, paper, call.user_id)
    # Posted as the Share button posts it, so the digest and the reactions know the message.
    return share_in_channel(deps, deps.slack, paper, call.user_id, call.channel_id)


SUBCOMMANDS = (
    Subcommand("share", handle_share, usage="share <paper>", example="share temporal video grounding",
               help="Post a paper in this channel for everyone, with your name on it."),
)
