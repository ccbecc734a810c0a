"""The /paper grammar's types: one invocation (`Call`), an answer (`Reply`), a subcommand and the
table of them (`Commands`). The handlers live in the command modules (bot/commands.py and its
siblings); `bot.deps` holds the table, so this module imports neither."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable

from slack_sdk.models.blocks import Block

from . import blocks as bk


@dataclass
class Call:
    """One invocation: who asked, where, and the (cleaned) words after the subcommand."""

    user_id: str
    args: str = ""
    channel_id: str = ""
    name: str = ""
    notes: list[str] = field(default_factory=list)
    raw: str = ""  # the text as Slack sent it, mentions included (`club swap @member`)


@dataclass
class Reply:
    """What a handler answers: fallback text (mrkdwn, escaped) plus blocks; ephemeral unless in_channel."""

    text: str
    blocks: list[Block] = field(default_factory=list)
    in_channel: bool = False

    def to_message(self) -> dict:
        """Keyword arguments for `respond()` (and, minus response_type, chat.postMessage)."""
        return {
            "text": bk.fallback_text(self.text),
            "blocks": [b.to_dict() for b in self.blocks] or None,
            "response_type": "in_channel" if self.in_channel else "ephemeral",
        }


@dataclass(frozen=True)
class Subcommand:
    """One /paper subcommand: its handler and what help says about it."""

    name: str
    handler: Callable[..., Reply]  # (deps, call) -> Reply
    usage: str
    example: str
    help: str
    aliases: tuple[str, ...] = ()
    hidden: bool = False
    # A slow subcommand (it waits on arXiv, OpenReview...): the line the command's ack shows at once,
    # from its words after the name (mrkdwn, escaped), or None when these words make it quick.
    # Pure and fast: it runs before the ack goes out, so it reads nothing.
    working: Callable[[str], str | None] | None = None


class Commands(dict):
    """The subcommand table: name -> Subcommand, in the order help lists them."""

    def __init__(self, subs: Iterable[Subcommand] = ()):
        super().__init__((s.name, s) for s in subs)

    def lookup(self, word: str) -> Subcommand | None:
        """The subcommand for a name or alias (case-insensitive)."""
        word = word.lower()
        if word in self:
            return self[word]
        return next((s for s in self.values() if word in s.aliases), None)

    def visible(self) -> list[Subcommand]:
        """What help lists (hidden ones still answer)."""
        return [s for s in self.values() if not s.hidden]

    def with_(self, *subs: Subcommand) -> Commands:
        """A copy with these added (or replaced)."""
        return Commands([*self.values(), *subs])
