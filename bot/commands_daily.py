"""/paper interests, /paper schedule and /paper today: a channel's paper of the day, from Slack."""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from store.errors import PaperNotFound
from store.pick import DailyPick, like_text
from store.posts import PostStatus
from store.schedule import (
    ScheduleError,
    check_timezone,
    describe_next,
    is_off,
    local_today,
    next_fire,
    parse_schedule,
    post_date,
)
from store.text import member_tag, parse_number

from . import blocks as bk
from .blocks import code, explanation, mention
from .commands import (
    Call,
    Reply,
    Subcommand,
    channel_of,
    has_words,
    paper_summary,
    problem_reply,
    resolve,
)
from .picks import channel_tz, make_pick, spec_of

if TYPE_CHECKING:
    from .deps import Deps

log = logging.getLogger(__name__)

MAX_INTERESTS = 50
MAX_INTEREST_CHARS = 200


# -- who may change what -------------------------------------------------------------------
def is_admin(deps: Deps, user: str) -> bool:
    """PAPERCLUB_ADMINS lists who may change schedules and remove others' interests; empty: everyone."""
    admins = deps.settings.admin_ids
    return not admins or user in admins


def _admins_only(deps: Deps, what: str) -> Reply:
    admins = sorted(deps.settings.admin_ids)
    who = ", ".join(mention(a) for a in admins[:5])
    return problem_reply(deps, f"Only the reading group's admins can {what} here.",
                         hint=f"Ask {who}." if who else None)


# -- /paper interests -------------------------------------------------------------------------
def _interest_lines(rows: list[dict]) -> list[str]:
    """One line per topic: members who hold the same text share it, each keeping their own number
    (`interests remove <n>` takes yours off and leaves theirs)."""
    topics: dict[str, list[tuple[int, dict]]] = {}
    for n, row in enumerate(rows, start=1):
        topics.setdefault(row["text"].casefold(), []).append((n, row))
    lines = []
    for held in topics.values():
        numbers = ", ".join(str(n) for n, _ in held)
        people = [mention(row["added_by"]) for _, row in held if row.get("added_by")]
        who = f" (added by {', '.join(people)})" if people else ""
        lines.append(f"{numbers}. *{bk.esc(held[0][1]['text'])}*{who}")
    return lines


def _interests_reply(deps: Deps, channel: str, *, note: str | None = None) -> Reply:
    rows = deps.store.interests(channel)
    cmd = deps.command
    footer = (f"{code(cmd + ' interests add <topic>')} · {code(cmd + ' interests add like <paper>')} · "
              f"{code(cmd + ' interests remove <number>')}")
    if not rows:
        text = ("This channel has no interests yet, so the paper of the day is picked for breadth. "
                "Add the topics your team reads, in your own words, or name a paper you liked.")
        if note:
            text = f"{note}\n{text}"
        return Reply("No interests yet.", bk.message_blocks(text, title="Interests", footer=footer))
    blocks = [bk.header(f"Interests of this channel ({len(rows)})")]
    if note:
        blocks.append(bk.section(note))
    blocks += bk.line_sections(_interest_lines(rows))  # fifty long ones take a few sections, each item whole
    blocks.append(bk.context("Each day I pick the paper that best matches one member's interests, "
                             "taking turns so everyone is served.", footer))
    return Reply(bk.esc(f"{len(rows)} interests: " + "; ".join(r["text"] for r in rows)), blocks)


def _closest(deps: Deps, vector, exclude: str | None = None) -> str:
    try:
        hits = deps.searcher.index().search(vector, 4, exclude=exclude)
    except Exception:
        return ""
    papers = {p.id: p for p in deps.store.get_papers([pid for pid, _ in hits])}
    names = [f"*{bk.esc(papers[pid].short_name)}* ({score:.2f})" for pid, score in hits[:3] if pid in papers]
    return f"Closest papers right now: {', '.join(names)}." if names else ""


def _add_interest(deps: Deps, call: Call, text: str) -> Reply:
    channel = channel_of(call)
    rows = deps.store.interests(channel)
    if len(rows) >= MAX_INTERESTS:
        return problem_reply(deps, f"This channel already has {MAX_INTERESTS} interests; remove one first.",
                             hint=code(deps.command + " interests remove <number>"))
    embedder = deps.embedder
    like = text.lower().startswith("like ") or text.lower() == "like"
    if like:
        ref = text[5:].strip() if len(text) > 4 else ""
        if not has_words(ref):
            return problem_reply(deps, "Which paper? Give its id, short name or some words from it.",
                                 hint=code(deps.command + " interests add like temporal video grounding"))
        paper, note = resolve(deps, ref)
        label = like_text(paper)
        vector = deps.store.get_vector(paper.id, embedder.name)
        if vector is None:
            vector = embedder.encode([f"{paper.headline}. {paper.abstract}"])[0]
        paper_id = paper.id
    else:
        if len(text) > MAX_INTEREST_CHARS:  # a pasted abstract is not a topic: say so, keep nothing
            return problem_reply(deps, f"An interest is a topic in a few words: at most "
                                       f"{MAX_INTEREST_CHARS} characters, and this one has {len(text):,}.",
                                 hint=f"Give its gist, or a paper that shows it: "
                                      f"{code(deps.command + ' interests add like <paper>')}")
        label = text
        if not has_words(label):
            return problem_reply(deps, "What topic? Describe it in a few words.",
                                 hint=code(deps.command + " interests add video understanding"))
        vector, paper_id, note = deps.searcher.embed_query(label), None, None
    # Members may share a topic (each is served on their own turns); only a member's own repeat is refused.
    if any(r["text"].lower() == label.lower() and r.get("added_by") == (call.user_id or None) for r in rows):
        return _interests_reply(deps, channel, note=f"You already have *{bk.esc(label)}* on the list.")
    deps.store.add_interest(channel, label, call.user_id or None, model=embedder.name, vector=vector,
                            paper_id=paper_id, now=deps.clock().timestamp())
    said = f"Added *{bk.esc(label)}*." + (f" {note}" if note else "")
    closest = _closest(deps, vector, exclude=paper_id)
    return _interests_reply(deps, channel, note=f"{said} {closest}".strip())


def _remove_interest(deps: Deps, call: Call, arg: str) -> Reply:
    channel = channel_of(call)
    rows = deps.store.interests(channel)
    number = parse_number(arg.strip().lstrip("#"), 1, len(rows))
    if number is None:
        have = f"this channel has {len(rows)}" if rows else "this channel has none"
        return problem_reply(deps, f"There is no interest {bk.esc(arg) or '(no number)'}; {have}.",
                             hint=f"{code(deps.command + ' interests')} lists them with their numbers.")
    row = rows[number - 1]
    if row.get("added_by") != call.user_id and not is_admin(deps, call.user_id):
        return _admins_only(deps, "remove an interest someone else added")
    deps.store.remove_interest(channel, row["id"])
    who = f" (added by {mention(row['added_by'])})" if row.get("added_by") else ""
    return _interests_reply(deps, channel, note=f"Removed {number}. *{bk.esc(row['text'])}*{who}.")


def handle_interests(deps: Deps, call: Call) -> Reply:
    verb, _, rest = call.args.partition(" ")
    verb = verb.lower()
    if not verb or verb in ("list", "show", "ls"):
        return _interests_reply(deps, channel_of(call))
    if verb in ("add", "+"):
        return _add_interest(deps, call, rest.strip())
    if verb in ("remove", "rm", "delete", "del", "-"):
        return _remove_interest(deps, call, rest)
    return _add_interest(deps, call, call.args.strip())  # "/paper interests diffusion" adds it


# -- /paper schedule --------------------------------------------------------------------------
def _schedule_usage(deps: Deps) -> str:
    return f"{code(deps.command + ' schedule 09:30 Europe/Berlin weekdays')} or {code(deps.command + ' schedule off')}"


def _member_zone(deps: Deps, user: str | None) -> str | None:
    """The member's time zone as their Slack profile has it (users.info), or None."""
    if deps.slack is None or not user:
        return None
    try:
        zone = (deps.slack.users_info(user=user).get("user") or {}).get("tz")
        return check_timezone(zone) if zone else None
    except Exception:  # no scope, an API error, a zone we do not know: the configured default
        log.info("no time zone for %s from users.info; using the default", member_tag(user))
        return None


def handle_schedule(deps: Deps, call: Call) -> Reply:
    channel = channel_of(call)
    now = deps.clock()
    if not call.args.strip():
        spec = spec_of(deps.store.get_schedule(channel))
        if spec is None:
            return Reply("No daily paper here yet.", bk.message_blocks(
                "This channel has no paper of the day yet.", footer=f"Set one: {_schedule_usage(deps)}"))
        text = (f"The paper of the day comes at *{spec.describe()}*.\n"
                f"Next post: {bk.esc(describe_next(spec, now))}.")
        return Reply(f"Daily paper: {spec.describe()}", bk.message_blocks(text, footer=_schedule_usage(deps)))
    if not call.channel_id:
        return problem_reply(deps, "Schedules belong to a Slack channel: set one from the channel "
                             "that should get the paper of the day.", hint=_schedule_usage(deps))
    if not is_admin(deps, call.user_id):
        return _admins_only(deps, "change the paper of the day's schedule")
    if is_off(call.args):
        had = deps.store.delete_schedule(channel)
        deps.reschedule(channel)
        if not had:
            return Reply("There was no daily paper to turn off.", bk.message_blocks(
                "This channel had no paper of the day, so there was nothing to turn off."))
        text = f"{mention(call.user_id)} turned the paper of the day off for this channel."
        return Reply(text, bk.message_blocks(text, footer=f"Turn it back on with {_schedule_usage(deps).split(' or ')[0]}."),
                     in_channel=True)
    current = spec_of(deps.store.get_schedule(channel))
    # A channel's first schedule is in the caller's own Slack time zone unless they name one.
    member_tz = None if current else _member_zone(deps, call.user_id)
    try:
        spec = parse_schedule(call.args, member_tz or deps.settings.timezone or "UTC", keep=current)
    except ScheduleError as e:
        return problem_reply(deps, str(e), hint=_schedule_usage(deps))
    deps.store.set_schedule(channel, hour=spec.hour, minute=spec.minute, tz=spec.tz, days=spec.days,
                            set_by=call.user_id or None, now=now.timestamp())
    deps.reschedule(channel)
    zone_note = (f" ({bk.esc(spec.tz)} is your Slack time zone; name another to change it)"
                 if member_tz and spec.tz == member_tz else "")
    text = (f"{mention(call.user_id)} set the paper of the day to *{spec.describe()}*{zone_note}.\n"
            f"First post: {bk.esc(describe_next(spec, now))}.")
    footer = f"{code(deps.command + ' today')} previews it; {code(deps.command + ' interests')} steers it."
    return Reply(f"Paper of the day: {spec.describe()}", bk.message_blocks(text, footer=footer), in_channel=True)


# -- /paper today ------------------------------------------------------------------------------
def _permalink(deps: Deps, channel: str, ts: str) -> str | None:
    if deps.slack is None:
        return None
    try:
        return deps.slack.chat_getPermalink(channel=channel, message_ts=ts).get("permalink")
    except Exception:
        return None


def handle_today(deps: Deps, call: Call) -> Reply:
    channel = channel_of(call)
    now = deps.clock()
    tz = channel_tz(deps.store, channel, deps.settings)
    day = local_today(tz, now)
    row = deps.store.get_post(channel, day.isoformat())
    spec = spec_of(deps.store.get_schedule(channel))
    if row is None and spec is not None:
        day = post_date(spec, next_fire(spec, now))  # today's post is done or not a posting day
        row = deps.store.get_post(channel, day.isoformat())
    if row and row["status"] == PostStatus.POSTED and row.get("pick"):
        pick = DailyPick.from_dict(row["pick"], channel, day)
        paper = deps.store.get_paper(pick.paper_id)
        link = _permalink(deps, channel, row["ts"])
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
                  "Slack did not take it yet; it will be retried.")
    else:
        pick = make_pick(deps.store, deps.searcher, channel, day, feedback=deps.feedback)
        if pick is None:
            return Reply("Nothing left to pick.", bk.empty_blocks(deps.command))
        status = (f"it posts {bk.esc(describe_next(spec, now))}." if spec else
                  f"this channel has no schedule yet: {_schedule_usage(deps)}")
    ids = [pick.paper_id, *[c.paper_id for c in pick.runners_up]]
    papers = {p.id: p for p in deps.store.get_papers(ids)}
    if pick.paper_id not in papers:
        raise PaperNotFound("Today's paper is no longer in the library.")
    summary = paper_summary(deps.store, papers[pick.paper_id], deps.llm, now=now.timestamp())
    blocks = bk.digest_blocks(pick, papers, summary=summary, command=deps.command,
                              preview=f"Preview (only you see this): {status}")
    return Reply(bk.esc(f"Today's pick: {papers[pick.paper_id].short_name}"), blocks)


SUBCOMMANDS = (
    Subcommand("interests", handle_interests, usage="interests [add <topic> | add like <paper> | remove <n>]",
               example="interests add video understanding",
               help="The topics this channel reads; the paper of the day serves each member's in turn.",
               aliases=("interest", "topics")),
    Subcommand("schedule", handle_schedule, usage="schedule [HH:MM [time zone] [daily|weekdays] | off]",
               example="schedule 09:30 Europe/Berlin weekdays",
               help="When this channel gets its paper of the day (or turn it off).", aliases=("daily", "when")),
    Subcommand("today", handle_today, usage="today", example="today",
               help="This channel's paper of the day, and why it was picked.", aliases=("pick", "potd")),
)
