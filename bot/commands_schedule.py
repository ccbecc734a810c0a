"""/paper schedule and /paper today: when a channel's paper of the day posts, and today's pick."""
from __future__ import annotations

from datetime import date, timedelta
from typing import TYPE_CHECKING

from store.daily import pick_for_day
from store.errors import PaperNotFound
from store.pick import DailyPick
from store.posts import DAY_DONE, PostStatus
from store.schedule import (
    ScheduleError,
    ScheduleSpec,
    channel_tz,
    describe_next,
    is_off,
    local_today,
    next_fire,
    parse_schedule,
    post_date,
)

from . import blocks as bk
from .posting import channel_gone, refused
from .blocks import code, explanation, mention
from .commands import (
    Call,
    Reply,
    Subcommand,
    admins_only,
    channel_of,
    is_admin,
    member_zone,
    paper_summary,
    problem_reply,
)

if TYPE_CHECKING:
    from .deps import Deps

# -- /paper schedule --------------------------------------------------------------------------
def _schedule_usage(deps: Deps, current: ScheduleSpec | None = None) -> str:
    """How to set a time, and how to turn the post off when there is one (`current`) to turn off."""
    usage = code(deps.command + " schedule 09:30 Europe/Berlin weekdays")
    return f"{usage} or {code(deps.command + ' schedule off')}" if current else usage


def _recent_days(deps: Deps, channel: str, now) -> dict[str, str]:
    """Day -> status of the channel's daily posts from two days back (today in any zone among them)."""
    return deps.store.post_days(channel, (now - timedelta(days=2)).date().isoformat())


def _next_post(deps: Deps, channel: str, spec: ScheduleSpec, now, days: dict[str, str] | None = None) -> str:
    """When the next post goes out: a fire on a day whose paper is out or said to be none (`days`, as
    `_recent_days` reads them) posts nothing."""
    days = _recent_days(deps, channel, now) if days is None else days
    done = {date.fromisoformat(d) for d, status in days.items() if status in DAY_DONE}
    return bk.esc(describe_next(spec, now, done))


def _refused(error: str | None) -> str:
    """Why Slack refused a post to this channel, and the fix (`error` as the post row keeps it)."""
    return (f"I am not in this channel ({bk.esc(error.split()[-1])}): "
            "invite me back (`/invite @` and my name, as this app is called here) or unarchive the channel, "
            "and I post again")


def _last_refused(deps: Deps, channel: str, days: dict[str, str]) -> str | None:
    """A line on the channel's latest daily post (of `days`) when Slack refused it for this channel, else None."""
    row = deps.store.get_post(channel, max(days)) if days else None
    if not refused(row):
        return None
    return f"{date.fromisoformat(row['day']):%a %-d %b}'s paper could not be posted: {_refused(row['error'])}."


def _schedule_shown(deps: Deps, channel: str, spec: ScheduleSpec, now, said: str) -> Reply:
    """A channel's schedule, privately: `said` (mrkdwn, escaped), then when the next post goes out
    (and why the last one is missing, when Slack refused it for this channel)."""
    days = _recent_days(deps, channel, now)  # read once, for both lines
    text = f"{said}\nNext post: {_next_post(deps, channel, spec, now, days)}."
    refused = _last_refused(deps, channel, days)
    if refused:
        text += f"\n:warning: {refused}"
    return Reply(f"Paper of the day: {spec.describe()}", bk.message_blocks(text, footer=_schedule_usage(deps, spec)))


def handle_schedule(deps: Deps, call: Call) -> Reply:
    channel = channel_of(call)
    now = deps.clock()
    if not call.args.strip():
        spec = ScheduleSpec.from_row(deps.store.get_schedule(channel))
        if spec is None:
            # Never set, or turned off: the same answer fits both (no "yet" for a channel that had one).
            return Reply("No daily paper here.", bk.message_blocks(
                "This channel has no paper of the day scheduled.", footer=f"Set one: {_schedule_usage(deps)}"))
        return _schedule_shown(deps, channel, spec, now, f"The paper of the day comes *{spec.describe()}*.")
    if not call.channel_id:
        return problem_reply(deps, "Schedules belong to a Slack channel: set one from the channel "
                             "that should get the paper of the day.", hint=_schedule_usage(deps))
    if not is_admin(deps, call.user_id):
        return admins_only(deps, "change the paper of the day's schedule")
    if is_off(call.args):
        had = deps.store.delete_schedule(channel)
        deps.reschedule(channel)
        if not had:
            return Reply("There was no daily paper to turn off.", bk.message_blocks(
                "This channel had no paper of the day, so there was nothing to turn off."))
        text = f"{mention(call.user_id)} turned the paper of the day off for this channel."
        return Reply(text, bk.message_blocks(text, footer=f"Turn it back on with {_schedule_usage(deps)}."),
                     in_channel=True)
    current = ScheduleSpec.from_row(deps.store.get_schedule(channel))
    # A channel's first schedule is in the caller's own Slack time zone unless they name one.
    member_tz = None if current else member_zone(deps, call.user_id)
    try:
        spec = parse_schedule(call.args, member_tz or deps.settings.timezone or "UTC", keep=current)
    except ScheduleError as e:
        return problem_reply(deps, str(e), hint=_schedule_usage(deps, current))
    if spec == current:  # nothing changes: say so privately, not to the whole channel again
        return _schedule_shown(deps, channel, spec, now,
                               f"The paper of the day is already set to *{spec.describe()}*: nothing changed.")
    deps.store.set_schedule(channel, hour=spec.hour, minute=spec.minute, tz=spec.tz, days=spec.days,
                            set_by=call.user_id or None, now=now.timestamp())
    deps.reschedule(channel)
    zone_note = (f" ({bk.esc(spec.tz)} is your Slack time zone; name another to change it)"
                 if member_tz and spec.tz == member_tz else "")
    text = (f"{mention(call.user_id)} set the paper of the day to *{spec.describe()}*{zone_note}.\n"
            f"{'Next' if current else 'First'} post: {_next_post(deps, channel, spec, now)}.")
    footer = f"{code(deps.command + ' today')} previews it; {code(deps.command + ' interests')} steers it."
    return Reply(f"Paper of the day: {spec.describe()}", bk.message_blocks(text, footer=footer), in_channel=True)


# -- /paper today ------------------------------------------------------------------------------
def _permalink(deps: Deps, channel: str, row: dict) -> str | None:
    """The post's link: kept with its row once Slack gave it, so asking again costs no round trip.
    None while Slack cannot give it (the reply names the channel instead; the next ask tries again)."""
    if row.get("permalink"):
        return row["permalink"]
    if deps.slack is None:
        return None
    try:
        link = deps.slack.chat_getPermalink(channel=channel, message_ts=row["ts"]).get("permalink")
    except Exception:  # a link is a nicety: Slack refusing it (or not answering) loses the reply nothing
        return None
    if link:
        deps.store.set_post_permalink(channel, row["key"], row["ts"], link)
    return link


def handle_today(deps: Deps, call: Call) -> Reply:
    channel = channel_of(call)
    now = deps.clock()
    tz = channel_tz(deps.store, channel, deps.settings.timezone)
    day = local_today(tz, now)
    row = deps.store.get_post(channel, day.isoformat())
    spec = ScheduleSpec.from_row(deps.store.get_schedule(channel))
    if row is None and spec is not None:
        day = post_date(spec, next_fire(spec, now))  # today's post is done or not a posting day
        row = deps.store.get_post(channel, day.isoformat())
    if row and row["status"] == PostStatus.POSTED and row.get("pick"):
        pick = DailyPick.from_dict(row["pick"], channel, day)
        paper = deps.store.get_paper(pick.paper_id)
        link = _permalink(deps, channel, row)
        where = f"<{link}|posted here>" if link else f"posted in <#{channel}>" if channel[0] in "CG" else "posted"
        name = bk.esc(paper.short_name if paper else pick.paper_id)
        text = f"Today's paper is *{name}*, {where}.\n_Why:_ {explanation(pick)}"
        return Reply(bk.esc(f"Today's paper: {paper.short_name if paper else pick.paper_id}"),
                     bk.message_blocks(text))
    if row and row["status"] == PostStatus.EMPTY:
        return Reply("Nothing left to pick.", bk.empty_blocks(deps.command))
    if row and row.get("pick"):
        pick = DailyPick.from_dict(row["pick"], channel, day)
        status = ("it is being posted right now." if row["status"] == PostStatus.CLAIMED else
                  f"Slack refused it: {_refused(row['error'])}." if channel_gone(row.get("error")) else
                  "Slack did not take it yet; it will be retried.")
    else:
        pick = pick_for_day(deps.store, deps.searcher, channel, day, feedback=deps.feedback, settings=deps.pick)
        if pick is None:
            return Reply("Nothing left to pick.", bk.empty_blocks(deps.command))
        status = (f"it posts {_next_post(deps, channel, spec, now)}." if spec else
                  f"this channel has no paper of the day scheduled: {_schedule_usage(deps)}")
    ids = [pick.paper_id, *[c.paper_id for c in pick.shown]]
    papers = {p.id: p for p in deps.store.get_papers(ids)}
    if pick.paper_id not in papers:
        raise PaperNotFound("Today's paper is no longer in the library.")
    summary = paper_summary(deps.store, papers[pick.paper_id], deps.llm, now=now.timestamp())
    blocks = bk.digest_blocks(pick, papers, summary=summary, command=deps.command,
                              preview=f"Preview (only you see this): {status}")
    return Reply(bk.esc(f"Today's pick: {papers[pick.paper_id].short_name}"), blocks)


SUBCOMMANDS = (
    Subcommand("schedule", handle_schedule, usage="schedule [HH:MM [time zone] [daily|weekdays|days] | off]",
               example="schedule 09:30 Europe/Berlin weekdays",
               help="When this channel gets its paper of the day: every day, on weekdays, or on the days you "
                    "name (\"mon and thu\", \"every tuesday\", \"mon wed fri\"); `off` stops it, and no "
                    "arguments shows the next post.", aliases=("daily", "when")),
    Subcommand("today", handle_today, usage="today", example="today",
               help="This channel's paper of the day, and why it was picked.", aliases=("pick", "potd")),
)
