"""Reactions as feedback, Slack side: reaction events -> the log, and what the team sees of it.

- `handle_reaction_added/removed`: a reaction on one of the bot's paper
  messages (a daily post, its abstract reply, a shared paper) is logged once
  per Slack event_id; reactions on anything else are acked and ignored. A
  write that meets a busy database is retried for minutes, so it is not lost.
- `/paper saved`, `/paper digest [days]`, `/paper forget-me`, and the App
  Home's reading list and recent reactions.
- The feedback hooks of bot/daily.py: the reactions steer the next pick,
  and the digest gets a line on how the team took the previous one.

Emoji weights come from PAPERCLUB_REACTION_WEIGHTS (see store/feedback.py for
the defaults); `configure(settings)` applies them, `register` calls it.
"""
from __future__ import annotations

import logging
import re
import threading
import time
from collections import OrderedDict
from datetime import date, datetime, timezone
from typing import Callable
from zoneinfo import ZoneInfo

from slack_sdk.models.blocks import Block, DividerBlock

from store import feedback as fb
from store.errors import StoreBusy

from . import blocks as bk
from .app import home_section
from .commands import Call, Deps, Reply, code, problem_reply, subcommand
from .daily import CONSOLE_CHANNEL, FEEDBACK_SOURCES, REACTION_LINES, channel_of, channel_tz, mention

log = logging.getLogger("paperclub.reactions")

RETRY_DELAYS = (0.5, 1, 2, 4, 8, 15, 30, 60, 60, 60, 60)  # about 5 minutes of a locked database
DIGEST_DAYS, MAX_DIGEST_DAYS = 7, 90
MAX_LISTED = 15  # papers per reply (3 blocks each, under Slack's 50)
HOME_SAVED, HOME_REACTIONS = 8, 5
UNKNOWN_MESSAGES = 5000  # bot messages we looked up and found no paper in (not asked about again)

_config = {"weights": dict(fb.DEFAULT_WEIGHTS), "half_life_days": fb.HALF_LIFE_DAYS}
_no_paper: OrderedDict[tuple[str, str], None] = OrderedDict()
_no_paper_lock = threading.Lock()


def configure(settings) -> None:
    """Use the emoji weights and half-life from settings (PAPERCLUB_REACTION_WEIGHTS, ..._HALF_LIFE_DAYS)."""
    _config["weights"] = weights_of(settings)
    _config["half_life_days"] = float(getattr(settings, "feedback_half_life_days", None) or fb.HALF_LIFE_DAYS)


def weights_of(settings) -> dict[str, float]:
    return fb.parse_weights(getattr(settings, "reaction_weights", None) or "")


def weights() -> dict[str, float]:
    return _config["weights"]


# -- reaction events -> the log -----------------------------------------------------------------
def handle_reaction_added(deps: Deps, body: dict, *, client=None, bot_user_id: str | None = None,
                          sleep: Callable[[float], None] = time.sleep) -> fb.Recorded:
    return _handle(deps, body, True, client, bot_user_id, sleep)


def handle_reaction_removed(deps: Deps, body: dict, *, client=None, bot_user_id: str | None = None,
                            sleep: Callable[[float], None] = time.sleep) -> fb.Recorded:
    return _handle(deps, body, False, client, bot_user_id, sleep)


def _handle(deps: Deps, body: dict, added: bool, client, bot_user_id, sleep) -> fb.Recorded:
    event = body.get("event") or {}
    item = event.get("item") or {}
    channel, ts, user = item.get("channel"), item.get("ts"), event.get("user")
    emoji = event.get("reaction")
    if item.get("type") != "message" or not (channel and ts and user and emoji):
        return fb.Recorded("ignored")  # files and file comments carry no paper
    event_ts = _float(event.get("event_ts")) or _float(body.get("event_time")) or time.time()
    # Slack always sends an event_id; the fallback still makes a re-sent copy collide with the first.
    event_id = body.get("event_id") or f"{'add' if added else 'rm'}:{channel}:{ts}:{user}:{emoji}:{event_ts}"
    store = deps.store

    def record():
        if store.paper_for_message(channel, ts) is None:
            bot = bot_user_id or _authorized_user(body)
            if not (client and bot and event.get("item_user") == bot and learn_message(store, client, channel, ts)):
                return fb.Recorded("ignored")
        return fb.record_reaction(store, event_id=event_id, channel=channel, message_ts=ts, user=user,
                                  emoji=emoji, added=added, event_ts=event_ts,
                                  event_time=_float(body.get("event_time")), now=time.time())

    result = _with_retries(record, sleep, what=f"{event_id} ({emoji} by {user} on {channel}/{ts})")
    if result.status != "ignored":
        log.info("reaction %s %s by %s on %s: %s", emoji, "added" if added else "removed", user,
                 result.paper_id, result.status)
    return result


def _with_retries(job: Callable[[], fb.Recorded], sleep, *, what: str) -> fb.Recorded:
    """Run a log write; a locked database (a long backup, a big ingest) is waited out, not dropped."""
    for attempt, delay in enumerate((*RETRY_DELAYS, None), start=1):
        try:
            return job()
        except StoreBusy as e:
            if delay is None:
                log.error("could not log reaction %s after %d attempts: %s", what, attempt, e)
                raise
            log.warning("database busy while logging reaction %s (attempt %d); retrying in %s s",
                        what, attempt, delay)
            sleep(delay)
    raise AssertionError("unreachable")


def _float(value) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _authorized_user(body: dict) -> str | None:
    auths = body.get("authorizations") or []
    return auths[0].get("user_id") if auths else None


_SHARED_BY = re.compile(r"<@([UW][A-Z0-9]+)>")


def learn_message(store, client, channel: str, ts: str) -> bool:
    """A bot message we have no record of (a share posted through a response_url): find its paper.

    The message is read once with reactions.get; its blocks carry the paper id.
    Messages without one are remembered so they cost no further calls.
    """
    key = (channel, ts)
    with _no_paper_lock:
        if key in _no_paper:
            return False
    try:
        message = client.reactions_get(channel=channel, timestamp=ts).get("message") or {}
    except Exception as e:  # no scope, message gone, Slack down: the reaction is simply not ours to log
        log.info("could not read message %s/%s to find its paper: %s", channel, ts, e)
        return False
    paper_id, kind = _paper_in(store, message)
    if paper_id is None:
        with _no_paper_lock:
            _no_paper[key] = None
            while len(_no_paper) > UNKNOWN_MESSAGES:
                _no_paper.popitem(last=False)
        return False
    shared_by = None
    for b in message.get("blocks") or []:
        if b.get("type") == "context":
            found = _SHARED_BY.search(" ".join(e.get("text", "") for e in b.get("elements") or []))
            if found:
                shared_by = found.group(1)
                break
    store.record_message_paper(channel, ts, paper_id, kind=kind, posted_by=shared_by,
                               now=_float(ts) or time.time())
    return True


def _paper_in(store, message: dict) -> tuple[str | None, str]:
    """(paper id, kind) from a bot message's block ids ("shared-<id>", "daily-<id>") or button values."""
    candidates = []
    for b in message.get("blocks") or []:
        block_id = b.get("block_id") or ""
        for prefix, kind in (("shared-", "share"), ("daily-", "daily")):
            if block_id.startswith(prefix) and not block_id.startswith(("daily-ru", "daily-act")):
                candidates.append((block_id[len(prefix):], kind))
        for e in b.get("elements") or []:
            if isinstance(e, dict) and e.get("type") == "button" and e.get("value"):
                candidates.append((e["value"], "share"))
    for paper_id, kind in candidates:
        if store.get_paper(paper_id) is not None:
            return paper_id, kind
    return None, "share"


# -- hooks for the pick and the daily post ------------------------------------------------------------
def feedback_source(store, channel: str, day: date) -> dict:
    """bot.daily feedback hook: how this channel reacted to what it was shown, as pick input."""
    return fb.feedback_for_day(store, channel, day, weights=weights(), half_life_days=_config["half_life_days"])


def previous_post_line(store, channel: str, previous: dict) -> str | None:
    """bot.daily reaction line: 'How the team took the last pick (Mon 3 Jun), *SPIKE*: 👍 2 · 🔥 1 from 3 people.'"""
    counts, people = fb.post_tally(store, channel, previous)
    if not counts:
        return None
    paper = store.get_paper(previous["paper_id"])
    name = bk.esc(paper.short_name if paper else previous["paper_id"])
    when = date.fromisoformat(previous["day"])
    n = len(people)
    return (f"How the team took the last pick ({when:%a %-d %b}), *{name}*: "
            f"{fb.format_tally(counts, weights())} from {n} {'person' if n == 1 else 'people'}.")


if feedback_source not in FEEDBACK_SOURCES:
    FEEDBACK_SOURCES.append(feedback_source)
if previous_post_line not in REACTION_LINES:
    REACTION_LINES.append(previous_post_line)


def register(app, deps: Deps) -> None:
    """bot.app extension hook: apply the configured emoji weights (listeners live in bot/app.py)."""
    configure(deps.settings)


# -- /paper saved ---------------------------------------------------------------------------------------
def _now(deps: Deps) -> datetime:
    service = getattr(deps, "daily", None)
    return service.clock() if service is not None else datetime.now(timezone.utc)


def _zone(deps: Deps, channel: str | None = None) -> ZoneInfo:
    tz = channel_tz(deps.store, channel, deps.settings) if channel else getattr(deps.settings, "timezone", None)
    try:
        return ZoneInfo(tz or "UTC")
    except Exception:
        return ZoneInfo("UTC")


def _day(at: float | None, zone) -> str:
    return f"{datetime.fromtimestamp(at or 0, zone):%a %-d %b}"


def _saved_blocks(deps: Deps, items: list[tuple], zone, limit: int) -> list[Block]:
    blocks: list[Block] = []
    for n, (paper, row) in enumerate(items[:limit], start=1):
        how = "👀" if row["source"] == "eyes" else "Save"
        blocks.append(bk.section(
            f"{n}. *{bk.esc(bk.cut_words(paper.short_name, 80))}*  ·  {bk.esc(bk.venue(paper)) or 'paper'}\n"
            f"{bk.esc(bk.cut_words(paper.headline, 240))}", block_id=f"saved-{n}-{paper.id}"[:255]))
        blocks.append(bk.context(f"saved {_day(row['saved_at'], zone)} ({how})", f"id `{bk.esc(paper.id)}`",
                                 bk.paper_links(paper)))
        blocks.append(bk.paper_buttons(paper, share=False, block_id=f"saved-act-{n}-{paper.id}"[:255]))
    return blocks


@subcommand("saved", usage="saved [remove <n>]", example="saved",
            help="Your reading list: papers you saved with the Save button or a 👀 reaction.",
            aliases=("reading", "reading-list", "bookmarks"))
def handle_saved(deps: Deps, call: Call) -> Reply:
    verb, _, rest = call.args.partition(" ")
    items = fb.reading_list(deps.store, call.user_id)
    note = None
    if verb.lower() in ("remove", "rm", "delete", "del", "-"):
        number = rest.strip().lstrip("#")
        if not number.isdigit() or not 1 <= int(number) <= len(items):
            have = f"your list has {len(items)}" if items else "your list is empty"
            return problem_reply(deps, f"There is no saved paper {rest.strip() or '(no number)'}; {have}.",
                                 hint=f"{code(deps.command + ' saved')} lists them with their numbers.")
        paper, _ = items.pop(int(number) - 1)
        deps.store.unsave_paper(call.user_id, paper.id)
        note = f"Removed *{bk.esc(paper.short_name)}* from your reading list."
    elif verb:
        return problem_reply(deps, f"I don't know {code('saved ' + verb)}.",
                             hint=f"{code(deps.command + ' saved')} or {code(deps.command + ' saved remove 2')}")
    if not items:
        text = ((note + "\n") if note else "") + (
            "Your reading list is empty. Press *Save* on a paper of the day, or react :eyes: to it.")
        return Reply("Your reading list is empty.", bk.message_blocks(text, title="Your reading list"))
    blocks: list[Block] = [bk.header(f"Your reading list ({len(items)})")]
    if note:
        blocks.append(bk.section(note))
    blocks += _saved_blocks(deps, items, _zone(deps), MAX_LISTED)
    more = f"Showing the newest {MAX_LISTED}. " if len(items) > MAX_LISTED else ""
    blocks.append(bk.context(f"{more}{code(deps.command + ' saved remove <n>')} takes one off."))
    names = "; ".join(p.short_name for p, _ in items[:MAX_LISTED])
    return Reply(bk.esc(f"Your reading list ({len(items)}): {names}"), blocks)


# -- /paper digest --------------------------------------------------------------------------------------
def _people_line(engaged) -> str:
    """'3 people reacted 7 times: @a 4 · @b 2 · @c 1' (counts of those who did; nobody is listed for not)."""
    n = len(engaged)
    top = " · ".join(f"{mention(u)} {c}" for u, c in sorted(engaged.items(), key=lambda kv: (-kv[1], kv[0]))[:12])
    more = f" and {n - 12} more" if n > 12 else ""
    total = sum(engaged.values())
    return (f"{n} {'person' if n == 1 else 'people'} reacted {total} {'time' if total == 1 else 'times'}: "
            f"{top}{more}")


@subcommand("digest", usage="digest [days]", example="digest 7",
            help="This channel's papers of the last days (7 unless you say), how each was received, "
                 "and who joined in.", aliases=("recap", "week"))
def handle_digest(deps: Deps, call: Call) -> Reply:
    arg = call.args.strip().lower().removesuffix("days").removesuffix("d").strip()
    if arg and not (arg.isdigit() and 1 <= int(arg) <= MAX_DIGEST_DAYS):
        return problem_reply(deps, f"How many days? Give a number from 1 to {MAX_DIGEST_DAYS}.",
                             hint=code(deps.command + " digest 14"))
    days = int(arg) if arg else DIGEST_DAYS
    channel = channel_of(call)
    digest = fb.channel_digest(deps.store, channel, now=_now(deps).timestamp(), days=days, weights=weights())
    zone = _zone(deps, channel)
    span = "day" if days == 1 else f"{days} days"
    where = "this channel" if channel == CONSOLE_CHANNEL else f"<#{channel}>"
    title = f"The last {span} in this channel"
    if not digest.papers:
        text = f"No papers were posted in {where} in the last {span}."
        return Reply(text, bk.message_blocks(
            text, title=title, footer=f"{code(deps.command + ' schedule 09:30')} sets up a paper of the day."))
    lines, plain = [], []
    for t in digest.papers[:40]:
        kind = "paper of the day" if t.kind == "daily" else "shared"
        tally = fb.format_tally(t.counts, weights()) or "no reactions"
        when = f"{date.fromisoformat(t.day):%a %-d %b}" if t.day else _day(t.posted_at, zone)
        lines.append(f"• *{bk.esc(t.name)}* ({when}, {kind}): {tally}")
        plain.append(f"{t.name}: {tally}")
    blocks: list[Block] = [bk.header(title)]
    posts = len(digest.papers)
    blocks.append(bk.context(f"{posts} {'paper' if posts == 1 else 'papers'} posted"))
    chunk: list[str] = []
    for line in lines:  # a few sections rather than one, so a long window stays under 3000 characters each
        if sum(len(x) + 1 for x in chunk) + len(line) > bk.SECTION_TEXT - 50:
            blocks.append(bk.section("\n".join(chunk)))
            chunk = []
        chunk.append(line)
    blocks.append(bk.section("\n".join(chunk)))
    best = digest.most_liked
    if best:
        who = len(best.people)
        blocks.append(bk.section(f":trophy: Most liked: *{bk.esc(best.name)}*, "
                                 f"{fb.format_tally(best.counts, weights())} from {who} "
                                 f"{'person' if who == 1 else 'people'}."))
    if digest.engaged:
        blocks.append(bk.context(_people_line(digest.engaged)))
    else:
        blocks.append(bk.context("No reactions yet. React to the posts (:fire: :+1: :-1: :eyes:) and the "
                                 "next picks follow what this team likes."))
    text = f"{title}: " + "; ".join(plain)
    if best:
        text += f". Most liked: {best.name}"
    return Reply(bk.esc(text), blocks[: bk.MAX_MESSAGE_BLOCKS])


# -- /paper forget-me -------------------------------------------------------------------------------
def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


@subcommand("forget-me", usage="forget-me", example="forget-me",
            help="Delete your reactions and reading list, and take your name off the interests you added.",
            aliases=("forgetme", "forget"))
def handle_forget_me(deps: Deps, call: Call) -> Reply:
    counts = fb.forget_member(deps.store, call.user_id)
    if not any(counts.values()):
        text = "I had nothing stored about you: no reactions, no saved papers, no interests with your name."
        return Reply(text, bk.message_blocks(text))
    done = []
    if counts["reactions"]:
        done.append(f"deleted {_count(counts['reactions'], 'reaction')}")
    if counts["saved"]:
        done.append(f"emptied your reading list ({_count(counts['saved'], 'paper')})")
    if counts["interests"]:
        done.append(f"took your name off {_count(counts['interests'], 'interest')} "
                    "(the topics stay for the channel, unattributed)")
    if counts["shares"]:
        done.append(f"took your name off {_count(counts['shares'], 'shared paper')}")
    if counts["picks"]:
        done.append(f"took your name off {_count(counts['picks'], 'past pick')}")
    text = "Done. I " + (", ".join(done[:-1]) + " and " if len(done) > 1 else "") + done[-1] + "."
    footer = ("Messages already in Slack, and the reactions on them, are Slack's: "
              "remove a reaction there if you want it gone from the channel too.")
    return Reply(bk.esc(text), bk.message_blocks(bk.esc(text), title="Forgotten", footer=footer))


# -- App Home ---------------------------------------------------------------------------------------
@home_section
def home_reading(deps: Deps, user_id: str) -> list[Block]:
    """The member's reading list and their latest reactions."""
    zone = _zone(deps)
    items = fb.reading_list(deps.store, user_id)
    blocks: list[Block] = [bk.header(f"Your reading list ({len(items)})" if items else "Your reading list")]
    if items:
        for paper, row in items[:HOME_SAVED]:
            blocks.append(bk.section(
                f"*{bk.esc(bk.cut_words(paper.short_name, 80))}*: {bk.esc(bk.cut_words(paper.headline, 200))}",
                block_id=f"home-saved-{paper.id}"[:255]))
        more = f"{len(items) - HOME_SAVED} more: " if len(items) > HOME_SAVED else ""
        blocks.append(bk.context(f"{more}{code(deps.command + ' saved')} lists them all with summaries."))
    else:
        blocks.append(bk.section("Nothing saved yet. Press *Save* on a paper of the day, or react :eyes: to it."))
    recent = fb.recent_reactions(deps.store, user_id, HOME_REACTIONS)
    if recent:
        papers = {p.id: p for p in deps.store.get_papers([r["paper_id"] for r in recent])}
        lines = []
        for r in recent:
            paper = papers.get(r["paper_id"])
            name = bk.esc(paper.short_name if paper else r["paper_id"])
            where = f" in <#{r['channel']}>" if r["channel"][:1] in "CG" else ""
            lines.append(f"{fb.emoji_text(r['base'])} on *{name}*{where}, {_day(r['event_ts'], zone)}")
        blocks += [DividerBlock(), bk.header("Your recent reactions"), bk.section("\n".join(lines)),
                   bk.context(f"They steer the paper of the day. {code(deps.command + ' forget-me')} deletes them.")]
    return blocks


__all__ = ["handle_reaction_added", "handle_reaction_removed", "learn_message", "configure", "register",
           "feedback_source", "previous_post_line"]
