"""Reading and recaps: Save on a paper card and /paper save, /paper saved, /paper digest and /paper forget-me.

A member's reading list fills from the digest's Save button and from 👀
reactions (bot/reactions.py); `digest` tallies a channel's recent posts with
the configured emoji weights (`deps.feedback`).
"""
from __future__ import annotations

from datetime import date, datetime
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from slack_sdk.models.blocks import Block

from store import club as cl
from store import feedback as fb
from store.schedule import channel_tz
from store.text import parse_number

from . import blocks as bk
from .blocks import code, mention
from .club.posts import stepped_down
from .commands import CONSOLE_CHANNEL, Call, Reply, Subcommand, channel_of, member_zone, problem_reply, resolve
from .confirm import ask_first, split_confirm

if TYPE_CHECKING:
    from .deps import Deps

DIGEST_DAYS, MAX_DIGEST_DAYS = 7, 90
MAX_LISTED = 15  # papers per reply (3 blocks each, under Slack's 50)


def save_paper(deps: Deps, respond, paper_id: str, user: str) -> None:
    """Save on a paper card (bot/app.py routes the button and the menu entry here): put the paper on
    the member's reading list and say so privately."""
    paper = deps.store.get_paper(paper_id)
    if paper is None:
        respond(text="That paper is no longer in the library.", response_type="ephemeral",
                replace_original=False)
        return
    respond(**save_reply(deps, paper, user).to_message(), replace_original=False)


def save_reply(deps: Deps, paper, user: str, *, note: str | None = None) -> Reply:
    """Save a paper for a member (a second time changes nothing) and say which it was."""
    name = f"*{bk.esc(paper.short_name)}*"
    if deps.store.save_paper(user, paper.id, now=deps.clock().timestamp()):
        text = f"Saved {name} to your reading list."
    else:
        text = f"{name} was already on your reading list."
    footer = " ".join(x for x in (note, f"{code(deps.command + ' saved')} shows the list.") if x)
    return Reply(text, bk.message_blocks(text, footer=footer))


def handle_save(deps: Deps, call: Call) -> Reply:
    paper, note = resolve(deps, call.args)
    return save_reply(deps, paper, call.user_id, note=note)


# -- /paper saved ---------------------------------------------------------------------------------------
def zone_of(deps: Deps, channel: str | None = None, *, user: str | None = None) -> ZoneInfo:
    """The zone to show dates in: the member's own (`user`: Slack's users.info, `member_zone`) for what
    is theirs, such as their reading list; else the channel's (or PAPERCLUB_TIMEZONE)."""
    tz = member_zone(deps, user) if user else None
    if not tz:
        tz = channel_tz(deps.store, channel, deps.settings.timezone) if channel else deps.settings.timezone
    try:
        return ZoneInfo(tz or "UTC")
    except Exception:
        return ZoneInfo("UTC")


def day_label(at: float | None, zone) -> str:
    """'Mon 3 Jun' for a timestamp."""
    return f"{datetime.fromtimestamp(at or 0, zone):%a %-d %b}"


def how_to_save(deps: Deps) -> str:
    """How a paper gets on a reading list, true for a team that has had no paper of the day yet."""
    return (f"Press *Save* on any paper ({code(deps.command + ' search <words>')} finds some), "
            "or react :eyes: to a paper posted in a channel.")


def _pages_hint(deps: Deps, count: int, pages: int) -> str:
    """What to type instead of a page the reading list lacks: only pages it has."""
    saved = deps.command + " saved"
    if not count:
        return how_to_save(deps)
    if pages == 1:
        return f"{code(saved)} shows it."
    return f"{code(saved)} shows the first page, {code(f'{saved} {pages}')} shows the last."


def handle_saved(deps: Deps, call: Call) -> Reply:
    verb, _, rest = call.args.partition(" ")
    items = fb.reading_list(deps.store, call.user_id)
    pages = max(1, -(-len(items) // MAX_LISTED))
    page, note = 1, None
    if any(ch.isnumeric() for ch in verb):  # `saved 2`: the next page of a long list
        page = parse_number(verb, 1, pages)
        if page is None or rest.strip():
            return problem_reply(deps, f"There is no page {verb}: your reading list has "
                                       f"{_count(len(items), 'paper')}, {_count(pages, 'page')} of {MAX_LISTED}.",
                                 hint=_pages_hint(deps, len(items), pages))
    elif verb.lower() in ("remove", "rm", "delete", "del", "-"):
        which = " ".join(rest.split()).lstrip("#")
        number = parse_number(which, 1, len(items))
        if number is None:  # a paper's id or name: unlike a number, no save since the list was shown moves it
            number = next((n for n, (p, _) in enumerate(items, start=1)
                           if which.lower() in (p.id.lower(), " ".join(p.short_name.split()).lower())), None)
        if number is None:
            have = f"your list has {len(items)}" if items else "your list is empty"
            return problem_reply(deps, f"There is no saved paper {which or '(no number)'}; {have}.",
                                 hint=f"{code(deps.command + ' saved')} lists them with their numbers and ids.")
        paper, _ = items.pop(number - 1)
        deps.store.unsave_paper(call.user_id, paper.id)
        note = f"Removed *{bk.esc(paper.short_name)}* from your reading list."
    elif verb:
        return problem_reply(deps, f"I don't know “saved {verb}”.",  # problem_reply escapes it
                             hint=f"{code(deps.command + ' saved')} or {code(deps.command + ' saved remove 2')}")
    if not items:
        text = ((note + "\n") if note else "") + (
            f"Your reading list is empty. {how_to_save(deps)}")
        return Reply("Your reading list is empty.", bk.message_blocks(text, title="Your reading list"))
    blocks: list[Block] = [bk.header(f"Your reading list ({len(items)})")]
    if note:
        blocks.append(bk.section(note))
    zone = zone_of(deps, user=call.user_id)
    page = min(page, pages)  # a removal may have emptied the last page
    first = (page - 1) * MAX_LISTED + 1
    shown = items[first - 1 : first - 1 + MAX_LISTED]
    blocks += bk.saved_blocks(shown, MAX_LISTED, lambda at: day_label(at, zone), first=first)
    more = ""
    if pages > 1:  # newest first: say where this page is and how to reach the others
        more = f"Showing {first}–{first + len(shown) - 1} of {len(items)}, newest first. "
        if page < pages:
            more += f"{code(f'{deps.command} saved {page + 1}')} shows the next {MAX_LISTED}. "
    blocks.append(bk.context(f"{more}{code(deps.command + ' saved remove <n>')} (or its id) takes one off."))
    names = "; ".join(p.short_name for p, _ in shown)
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


def handle_digest(deps: Deps, call: Call) -> Reply:
    arg = call.args.strip().lower().removesuffix("days").removesuffix("d").strip()
    days = parse_number(arg, 1, MAX_DIGEST_DAYS) if arg else DIGEST_DAYS
    if days is None:
        return problem_reply(deps, f"How many days? Give a number from 1 to {MAX_DIGEST_DAYS}.",
                             hint=code(deps.command + " digest 14"))
    channel = channel_of(call)
    weights = deps.feedback.weights
    zone = zone_of(deps, channel)
    digest = fb.channel_digest(deps.store, channel, now=deps.clock().timestamp(), days=days, weights=weights,
                               tz=zone.key)
    span = "day" if days == 1 else f"{days} days"
    where = "this channel" if channel == CONSOLE_CHANNEL else f"<#{channel}>"
    title = f"The last {span} in this channel"
    if not digest.papers:
        text = f"No papers were posted in {where} in the last {span}."
        return Reply(text, bk.message_blocks(
            text, title=title, footer=f"{code(deps.command + ' schedule 09:30')} sets up a paper of the day."))
    lines, plain = [], []
    for t in digest.papers[:40]:
        kind = {"daily": "paper of the day", "club": "reading group"}.get(t.kind, "shared")
        tally = fb.format_tally(t.counts, weights) or "no reactions"
        when = f"{date.fromisoformat(t.day):%a %-d %b}" if t.day else day_label(t.posted_at, zone)
        lines.append(f"• *{bk.esc(t.name)}* ({when}, {kind}): {tally}")
        plain.append(f"{t.name}: {tally}")
    blocks: list[Block] = [bk.header(title)]
    posts = len(digest.papers)
    blocks.append(bk.context(f"{posts} {'paper' if posts == 1 else 'papers'} posted"))
    blocks += bk.line_sections(lines, limit=bk.SECTION_TEXT - 50)  # a long window: a few sections
    best = digest.most_liked
    if best:
        who = len(best.people)
        blocks.append(bk.section(f":trophy: Most liked: *{bk.esc(best.name)}*, "
                                 f"{fb.format_tally(best.counts, weights)} from {who} "
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


def handle_forget_me(deps: Deps, call: Call) -> Reply:
    extra, confirmed = split_confirm(call.args)
    if extra:  # `/paper forget SPIKE` once erased everything while ignoring SPIKE
        return problem_reply(deps, f"{call.name} takes nothing after it: it deletes everything about you.",
                             hint=f"{code(deps.command + ' saved remove <n>')} takes one paper off your "
                                  f"reading list; {code(deps.command + ' ' + call.name)} deletes everything.")
    if not confirmed:
        return ask_first(deps, call, "", title="Forget everything about you?", button="Forget me",
                         text="This deletes your reactions and your reading list, takes your name off the "
                              "interests, feeds and shared papers you added, and takes you out of the reading "
                              "group's rotation and votes. It cannot be undone.")
    # Off the sessions they were to present first, as `club leave` takes them off (while the store
    # still names them), so the announcement and reminder in each channel say so now.
    freed = cl.step_down_everywhere(deps.store, call.user_id, deps.clock())
    counts = fb.forget_member(deps.store, call.user_id)
    for channel, days in freed.items():
        stepped_down(deps, deps.slack, channel, days)
    if not any(counts.values()):
        text = "I had nothing stored about you: no reactions, no saved papers, no interests with your name."
        return Reply(text, bk.message_blocks(text))
    done = []
    if counts["reacted"]:  # papers, not log rows: a swap or a take-back is no extra reaction to the member
        done.append(f"deleted your reactions and verdicts on {_count(counts['reacted'], 'paper')}")
    if counts["saved"]:
        done.append(f"emptied your reading list ({_count(counts['saved'], 'paper')})")
    if counts["interests"]:
        done.append(f"took your name off {_count(counts['interests'], 'interest')} "
                    "(the topics stay for the channel, unattributed)")
    if counts["shares"]:
        done.append(f"took your name off {_count(counts['shares'], 'shared paper')}")
    if counts["picks"]:
        done.append(f"took your name off {_count(counts['picks'], 'past pick')}")
    if counts.get("feeds"):
        done.append(f"took your name off {_count(counts['feeds'], 'feed')} you added (the feeds stay)")
    if counts.get("club"):
        done.append("took you out of the reading group's rotation and votes, and your name off its history")
    text = "Done. I " + (", ".join(done[:-1]) + " and " if len(done) > 1 else "") + done[-1] + "."
    footer = ("Messages already in Slack, and the reactions on them, are Slack's: "
              "remove a reaction there if you want it gone from the channel too.")
    return Reply(bk.esc(text), bk.message_blocks(bk.esc(text), title="Forgotten", footer=footer))


SUBCOMMANDS = (
    Subcommand("save", handle_save, usage="save <paper>", example="save SPIKE",
               help="Put a paper on your reading list (as its Save button does).", aliases=("bookmark",)),
    Subcommand("saved", handle_saved, usage="saved [page] [remove <n>]", example="saved",
               help="Your reading list: papers you saved with the Save button or a 👀 reaction, "
                    f"newest first, {MAX_LISTED} to a page (`saved 2` the next); `saved remove` takes a number "
                    "or a paper's id.",
               aliases=("reading", "reading-list", "bookmarks")),
    Subcommand("digest", handle_digest, usage="digest [days]", example="digest 7",
               help="This channel's papers of the last days (7 unless you say), how each was received, "
                    "and who joined in.", aliases=("recap", "week")),
    Subcommand("forget-me", handle_forget_me, usage="forget-me [confirm]", example="forget-me",
               help="Delete your reactions, reading list and club votes, and take your name off everything "
                    "else that names you (interests, feeds, schedules, the reading group's history). "
                    "Asks first; `confirm` after it goes ahead.",
               aliases=("forgetme", "forget")),
)
