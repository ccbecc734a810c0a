"""What a channel gets each day: its zone and schedule, the pick (steered by reactions), and the
line on how the team took the previous one. Shared by posting, the scheduler and `/paper today`."""
from __future__ import annotations

import logging
from datetime import date, timedelta
from typing import TYPE_CHECKING

from store import feedback as fb
from store.pick import DailyPick, pick_for_channel
from store.schedule import DEFAULT_GRACE, ScheduleError, ScheduleSpec, check_timezone
from store.sources import fresh_label, fresh_papers

from . import blocks as bk

if TYPE_CHECKING:
    from store import Store
    from store.search import Searcher

    from .config import Settings
    from .deps import Feedback

log = logging.getLogger("paperclub.daily")


def spec_of(row: dict | None) -> ScheduleSpec | None:
    """A schedules row as a ScheduleSpec (None for no row)."""
    if not row:
        return None
    return ScheduleSpec(int(row["hour"]), int(row["minute"]), row["tz"], row["days"])


def channel_tz(store: Store, channel: str, settings: Settings | None) -> str:
    """The zone a channel lives in: its schedule's, else PAPERCLUB_TIMEZONE (else UTC)."""
    spec = spec_of(store.get_schedule(channel))
    if spec:
        return spec.tz
    try:
        return check_timezone(getattr(settings, "timezone", None) or "UTC")
    except ScheduleError:
        return "UTC"


def grace_of(settings: Settings | None) -> timedelta:
    """PAPERCLUB_CATCH_UP_HOURS as a timedelta."""
    hours = getattr(settings, "catch_up_hours", None)
    return timedelta(hours=float(hours)) if hours is not None else DEFAULT_GRACE


def _vectors(searcher: Searcher):
    """The searcher's in-memory (ids, matrix), so a pick does not reload every vector."""
    try:
        index = searcher.index()
        return index.ids, index.matrix
    except AttributeError:
        return None


def _adjustments(store: Store, channel: str, day: date, feedback: Feedback) -> dict:
    try:
        return fb.feedback_for_day(store, channel, day, weights=feedback.weights,
                                   half_life_days=feedback.half_life_days)
    except Exception:  # feedback is a refinement: a failure here must not stop the post
        log.warning("reaction feedback for %s failed; picking without it", channel, exc_info=True)
        return {}


def make_pick(store: Store, searcher: Searcher, channel: str, day: date, *,
              feedback: Feedback) -> DailyPick | None:
    """The channel's pick for `day` from the current interests, history and reactions.

    A channel with feeds picks among the papers its feeds announced in the last
    `fresh_days` first (the candidates passed into the pick are only those); the
    library's older stock is the fallback when none of them is left.
    """
    vectors = _vectors(searcher)
    adjust = _adjustments(store, channel, day, feedback) or None
    fresh = fresh_papers(store, channel, day)
    if fresh:
        ids, matrix = vectors if vectors is not None else store.load_vectors(searcher.embedder.name)
        rows = [i for i, pid in enumerate(ids) if pid in fresh]
        if rows:
            pick = pick_for_channel(store, searcher.embedder, channel, day,
                                    vectors=([ids[i] for i in rows], matrix[rows]), feedback=adjust,
                                    searcher=searcher)
            if pick is not None:
                at, kind = fresh[pick.paper_id]
                label = fresh_label(kind, at, day)
                # The explanation carries it (and the stored pick, for /paper today): "…; new on arXiv today".
                why = pick.choice.feedback_why
                pick.choice.feedback_why = f"{why}; {label}" if why else label
                return pick
    return pick_for_channel(store, searcher.embedder, channel, day, vectors=vectors, feedback=adjust,
                            searcher=searcher)


def reaction_line(store: Store, channel: str, day: date, feedback: Feedback) -> str | None:
    """One line on the previous post: how the team reacted to it, else which paper it was."""
    previous = store.previous_post(channel, day.isoformat())
    if not previous or not previous.get("paper_id"):
        return None
    paper = store.get_paper(previous["paper_id"])
    when = date.fromisoformat(previous["day"])
    try:
        counts, people = fb.post_tally(store, channel, previous)
    except Exception:  # as with the pick: the digest goes out without the tally
        log.warning("reaction tally for %s failed", channel, exc_info=True)
        counts, people = {}, set()
    if counts:
        name = bk.esc(paper.short_name if paper else previous["paper_id"])
        n = len(people)
        return (f"How the team took the last pick ({when:%a %-d %b}), *{name}*: "
                f"{fb.format_tally(counts, feedback.weights)} from {n} {'person' if n == 1 else 'people'}.")
    if paper is None:
        return None
    return (f"Previous pick ({when:%a %-d %b}): *{bk.esc(paper.short_name)}*. "
            "React to today's paper to tell me what this team likes.")
