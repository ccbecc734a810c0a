"""/paper add (one paper by arXiv id or link, or OpenReview link) and /paper feed (a channel's feeds)."""
from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from store.schedule import channel_tz
from store.sources import (
    FEED_KINDS,
    SourceError,
    add_paper,
    check_feed,
    feed_source,
    fresh_days,
    parse_feed,
    parse_ref,
)
from store.text import parse_number

from . import blocks as bk
from .blocks import code
from .commands import (
    Call,
    Reply,
    Subcommand,
    admins_only,
    channel_of,
    is_admin,
    problem_reply,
    summary_reply,
)
from .confirm import ask_first, split_confirm

if TYPE_CHECKING:
    from .deps import Deps

MAX_FEEDS = 20
MAX_FRESH_DAYS = 60
_WHERE = {"arxiv": "arXiv", "openreview": "OpenReview"}
_EXAMPLES = {"arxiv": "arxiv cs.LG", "openreview": "openreview ICLR.cc/2026/Conference"}


def _add_hint(deps: Deps) -> str:
    return (f"For example {code(deps.command + ' add 2501.01234')}, "
            f"{code(deps.command + ' add https://arxiv.org/abs/2501.01234')} or "
            f"{code(deps.command + ' add https://openreview.net/forum?id=…')}.")


def fetching_line(args: str) -> str | None:
    """The ack of `/paper add <ref>`: arXiv or OpenReview may take a while (or not answer)."""
    ref = parse_ref(args.split()[0]) if args.split() else None
    return f"Fetching {bk.esc(ref[1])} from {_WHERE[ref[0]]}…" if ref else None


def checking_line(args: str) -> str | None:
    """The ack of `/paper feed add <kind> <target>`: the feed is asked before it is added."""
    words = args.split()
    if len(words) == 3 and words[0].lower() == "add" and words[1].lower() in _WHERE:
        return f"Checking {_WHERE[words[1].lower()]} for *{bk.esc(words[2])}*…"
    return None


def handle_add(deps: Deps, call: Call) -> Reply:
    """Fetch a paper by arXiv id/URL or OpenReview URL/id into the store, and show its card."""
    ref = parse_ref(call.args.split()[0]) if call.args.split() else None
    if ref is None:
        message = ("That is not an arXiv id or link, or an OpenReview link or forum id." if call.args.strip()
                   else "Which paper? Give an arXiv id or link, or an OpenReview link.")
        return problem_reply(deps, message, hint=_add_hint(deps))
    kind, ident = ref
    if deps.sources is None:
        return problem_reply(deps, "Fetching papers is not set up here.")
    try:
        added = add_paper(deps.store, deps.sources, ref, deps.embedder, now=deps.clock().timestamp())
    except SourceError:  # unreachable, too slow, too large, or an answer of the wrong shape
        return problem_reply(deps, f"I couldn't get a usable answer from {_WHERE[kind]} just now, so {ident} "
                             "is not added.", hint="Try again in a few minutes.")
    if added is None:
        return problem_reply(deps, f"{_WHERE[kind]} has no paper {ident}.", hint=_add_hint(deps))
    note = (f"New: added from {_WHERE[kind]}." if added.new
            else "Already in the library, so nothing was fetched.")
    if len(call.args.split()) > 1:
        note += f" One paper at a time: {deps.command} add each of the others."
    return summary_reply(deps, added.paper, note=note)


def new_papers(n: int) -> str:
    """How many new papers a feed's last read brought, as `/paper feed` and `paperclub feeds` say it."""
    return "no new papers" if not n else "1 new paper" if n == 1 else f"{n} new papers"


def _feed_lines(deps: Deps, channel: str, rows: list[dict]) -> str:
    """One line per feed, saying when it was never read yet or when its source can't be reached: a feed
    that fails says so here, or the team hears "Now following" and then nothing. A working one says
    when it was last read and how many papers that night brought, so the team sees it is alive."""
    tz = ZoneInfo(channel_tz(deps.store, channel, deps.settings.timezone))
    lines = []
    for n, r in enumerate(rows, start=1):
        where = _WHERE.get(r["kind"], r["kind"])
        line = f"{n}. {where} *{bk.esc(r['target'])}*"
        if r.get("added_by"):
            line += f" (added by {bk.mention(r['added_by'])})"
        state = deps.store.source_state(feed_source(r["kind"], r["target"])) or {}
        if state.get("failing_since"):
            since = datetime.fromtimestamp(state["failing_since"], tz)
            line += f" · :warning: _couldn't reach {where} since {since:%a %-d %b}: no new papers from it until it answers_"
        elif not state.get("last_success"):
            line += " · _not read yet: feeds are read after each arXiv announcement (Sunday to Thursday evenings, US Eastern)_"
        else:
            read = datetime.fromtimestamp(state["last_success"], tz)
            papers = f" ({new_papers(state['last_papers'])})" if state.get("last_papers") is not None else ""
            line += f" · read {read:%a %-d %b %H:%M}{papers}"
        lines.append(line)
    return "\n".join(lines)


def _feeds_reply(deps: Deps, channel: str, note: str | None = None) -> Reply:
    rows = deps.store.feeds(channel)
    cmd = deps.command
    footer = " · ".join([*(code(f"{cmd} feed add {e}") for e in _EXAMPLES.values()), code(cmd + " feed remove <number>")])
    if not rows:
        text = ("This channel follows no feeds, so the paper of the day comes from the library. "
                "Follow an arXiv category or an OpenReview venue and new papers come in every day.")
        return Reply("No feeds yet.", bk.message_blocks(f"{note}\n{text}" if note else text, title="Feeds",
                                                        footer=footer))
    blocks = [bk.header(f"Feeds of this channel ({len(rows)})")]
    if note:
        blocks.append(bk.section(note))
    blocks += [bk.section(_feed_lines(deps, channel, rows)),
               bk.context(f"Papers these feeds announced in the last {fresh_days(deps.store, channel)} days come "
                          f"first in the paper of the day ({code(cmd + ' feed fresh <days>')}).", footer)]
    return Reply(f"{len(rows)} feeds: " + "; ".join(f"{r['kind']} {bk.esc(r['target'])}" for r in rows), blocks)


def handle_feed(deps: Deps, call: Call) -> Reply:
    channel = channel_of(call)
    words = call.args.split()
    verb = words[0].lower() if words else ""
    if not verb or verb in ("list", "ls"):
        return _feeds_reply(deps, channel)
    if verb not in ("add", "remove", "rm", "delete", "fresh"):
        return problem_reply(deps, f"I don't know {call.args.split()[0]!r} for feeds.",
                             hint=f"{code(deps.command + ' feed add arxiv cs.LG')} or "
                                  f"{code(deps.command + ' feed remove 1')}.")
    if not is_admin(deps, call.user_id):
        return admins_only(deps, "change this channel's feeds")
    if verb == "fresh":
        days = parse_number(words[1], 1, MAX_FRESH_DAYS) if len(words) == 2 else None
        if days is None:
            return problem_reply(deps, f"Give a number of days from 1 to {MAX_FRESH_DAYS}.",
                                 hint=f"For example {code(deps.command + ' feed fresh 14')}.")
        deps.store.set_meta(f"fresh_days:{channel}", str(days))
        return _feeds_reply(deps, channel, f"Papers from these feeds now count as new for {days} days.")
    if verb == "add":
        kind = words[1].lower() if len(words) > 1 else ""
        example = f"For example {code(deps.command + ' feed add ' + _EXAMPLES.get(kind, _EXAMPLES['arxiv']))}."
        if len(words) < 3:  # several words after the kind are a target parse_feed can say is wrong
            named = _WHERE.get(kind) if len(words) == 2 else None
            return problem_reply(deps, f"What should this channel follow on {named}?" if named else
                                 f"Name the kind ({' or '.join(FEED_KINDS)}) and what to follow.", hint=example)
        try:
            kind, target = parse_feed(words[1], " ".join(words[2:]))
        except SourceError as e:
            return problem_reply(deps, str(e), hint=example)
        if len(deps.store.feeds(channel)) >= MAX_FEEDS:
            return problem_reply(deps, f"A channel can follow at most {MAX_FEEDS} feeds.")
        try:
            problem, about = check_feed(deps.store, deps.sources, kind, target) if deps.sources else (None, None)
        except SourceError:  # unreachable, too slow, or an answer of the wrong shape
            return problem_reply(deps, f"I couldn't reach {_WHERE[kind]} just now to check *{target}*, "
                                 "so it is not added. Try again in a few minutes.")
        if problem:
            return problem_reply(deps, problem)
        new = deps.store.add_feed(channel, kind, target, call.user_id, now=deps.clock().timestamp())
        note = (f"Now following {_WHERE[kind]} *{bk.esc(target)}*." if new
                else f"This channel already follows {_WHERE[kind]} *{bk.esc(target)}*.")
        if about:
            note += f" {about}"
        return _feeds_reply(deps, channel, note)
    rest, confirmed = split_confirm(" ".join(words[1:]))
    rows = deps.store.feeds(channel)
    named = rest.split()
    number = parse_number(rest, 1, len(rows)) if len(named) == 1 else None
    row = rows[number - 1] if number is not None else None
    if len(named) == 2:  # `remove arxiv cs.CV`: what the confirm button sends, so a renumbered list can't mislead it
        try:
            kind, target = parse_feed(*named)
        except SourceError:
            kind, target = "", ""
        row = next((r for r in rows if (r["kind"], r["target"]) == (kind, target)), None)
        if row is None:
            return problem_reply(deps, f"This channel does not follow {' '.join(named)} (any more): "
                                 "nothing was removed.", hint=f"{code(deps.command + ' feed')} lists what it follows.")
    if row is None:
        return problem_reply(deps, f"Give the number of a feed to remove (1 to {len(rows)})." if rows
                             else "This channel follows no feeds.", hint=f"{code(deps.command + ' feed')} lists them.")
    if not confirmed:
        what = f"{_WHERE.get(row['kind'], row['kind'])} *{bk.esc(row['target'])}*"
        return ask_first(deps, call, f"remove {row['kind']} {row['target']}", title="Stop following this feed?",
                         button="Stop following",
                         text=f"This channel would stop following {what}: its new papers no longer come "
                              "first in the paper of the day.")
    row = deps.store.remove_feed(channel, row["id"])
    return _feeds_reply(deps, channel, f"Stopped following {_WHERE.get(row['kind'], row['kind'])} "
                                       f"*{bk.esc(row['target'])}*.")


SUBCOMMANDS = (
    Subcommand("add", handle_add, usage="add <arXiv id or link | OpenReview link>", example="add 2501.01234",
               help="Bring a paper in from arXiv or OpenReview and show it.", aliases=("fetch",),
               working=fetching_line),
    Subcommand("feed", handle_feed, usage="feed [add arxiv <category> | add openreview <venue> | remove <n> | fresh <days>]",
               example="feed add arxiv cs.LG", help="The arXiv categories and venues this channel follows.",
               aliases=("feeds",), working=checking_line),
)
