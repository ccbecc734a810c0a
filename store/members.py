"""Every place the database keeps a Slack member's id, in one list.

forget-me (forget_user), the forgotten list's re-apply after a restore (reapply_forgotten) and
the schema test (tests/test_forget.py) all read MEMBER_COLUMNS: a migration that adds a column
holding a member id adds it here, or the test names the column. NOT_MEMBERS says why a column
whose name looks like a member's (claimed_by, holder, ...) holds something else.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from .backends.rows import MEMBER_ID, pick_without
from .text import member_tag

# How a column gives a member up:
DELETE = "delete"  # the row is the member's own (a reaction, a vote): it goes
UNLINK = "unlink"  # the row is the channel's (an interest, a feed): the column becomes null
TEXT = "text"  # ids inside text (a stored pick's JSON, a claim key): rewritten by a function of (text, user)


@dataclass(frozen=True)
class MemberColumn:
    table: str
    column: str
    forget: str  # DELETE, UNLINK or TEXT
    counted_as: str | None  # the key of forget_user's counts it adds to (forget-me's answer)
    key: tuple[str, ...] = ()  # TEXT only: the columns that find the row again to rewrite it
    rewrite: Callable[[str, str], str | None] | None = None  # TEXT only: (text, user) -> text, None if not theirs
    # DELETE only: count the distinct values of this column among the rows deleted, not the rows (the
    # reaction log keeps every swap and take-back as a row; a member knows the papers they judged).
    counted_by: str | None = None

    @property
    def name(self) -> str:
        """The column as SQL both engines read ("user" is a reserved word in PostgreSQL)."""
        return f'"{self.column}"' if self.column == "user" else self.column


MEMBER_COLUMNS: tuple[MemberColumn, ...] = (
    MemberColumn("reactions", "user", DELETE, "reacted", counted_by="paper_id"),
    MemberColumn("saved_papers", "user", DELETE, "saved"),
    MemberColumn("interests", "added_by", UNLINK, "interests"),
    MemberColumn("message_papers", "posted_by", UNLINK, "shares"),
    MemberColumn("schedules", "set_by", UNLINK, None),
    MemberColumn("posts", "pick", TEXT, "picks", key=("channel", "key"), rewrite=pick_without),
    MemberColumn("feeds", "added_by", UNLINK, "feeds"),
    MemberColumn("clubs", "set_by", UNLINK, None),
    MemberColumn("club_members", "user", DELETE, "club"),
    MemberColumn("club_votes", "user", DELETE, "club"),
    MemberColumn("club_aways", "user", DELETE, "club"),
    MemberColumn("club_nominations", "user", UNLINK, "club"),
    MemberColumn("club_sessions", "presenter", UNLINK, "club"),
    MemberColumn("club_sessions", "nominator", UNLINK, "club"),
    # The presenter DM's claim key names its member by tag since 31.8; older rows by id.
    MemberColumn("posts", "key", TEXT, None, key=("channel", "key"), rewrite=lambda k, u: tagged_key(k, u)),
)

# Columns named like a member's that hold something else.
NOT_MEMBERS = {
    ("posts", "claimed_by"): "the replica that claimed the post (bot/replica.py)",
    ("processed_events", "replica"): "the replica that handled the event",
    ("leases", "holder"): "the replica holding the lease",
}

# Column names that suggest a member id; the schema test checks every one is classified above.
MEMBERISH = re.compile(r"user|member|_by$|presenter|nominator|voter|owner|holder|chooser|replica")


def tagged_key(key: str, user: str) -> str | None:
    """A claim key with this member's id at its end replaced by their log tag; None if not theirs."""
    suffix = f":{user}"
    return key[: -len(suffix)] + ":" + member_tag(user) if key.endswith(suffix) else None


def member_names(column: MemberColumn, value: str | None) -> set[str]:
    """The member ids a value of this column holds."""
    if not value:
        return set()
    return set(MEMBER_ID.findall(value)) if column.forget == TEXT else {value}
