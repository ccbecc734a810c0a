"""The states of a scheduled post's claim row (one per channel and day)."""
from __future__ import annotations

from enum import StrEnum


class PostStatus(StrEnum):
    """Stored as plain text; a StrEnum so rows read back compare equal to these."""

    CLAIMED = "claimed"  # a process has claimed the day and is posting (or died doing so)
    FAILED = "failed"  # the last attempt failed; the claim is retried within the window
    POSTED = "posted"  # in the channel, with its ts recorded
    EMPTY = "empty"  # nothing to post (no papers left), said once
    MISSED = "missed"  # never in the channel, and never will be: its day is over (its paper is free again)


# A day in one of these has had its post (or never will): a fire on it posts nothing.
DAY_DONE = frozenset({PostStatus.POSTED, PostStatus.EMPTY, PostStatus.MISSED})
