"""The /paper grammar: a table of subcommands, each a plain function (deps, call) -> Reply.

Slack (bot/app.py) and the local console (bot/console.py) both go through
`run_command`, so they answer the same way. Each command module ends with a
`SUBCOMMANDS` tuple of `Subcommand`s (bot/grammar.py); `bot.deps.build.command_table` puts them in one `Commands`
table, which reaches `run_command` through `deps.commands`. This module holds
the paper commands: help, search, summary, similar, share.
"""
from __future__ import annotations

import difflib
import logging
import re
import time
import unicodedata
from typing import TYPE_CHECKING


from store.errors import EmptyQuery, PaperNotFound, PaperNotInLibrary, ReadOnlyStorage, StoreBusy, StoreError
from store.schedule import check_timezone
from store.text import member_tag

from . import blocks as bk
from .blocks import code
from .grammar import Call, Reply, Subcommand

if TYPE_CHECKING:
    from store import Store
    from store.paper import Paper

    from .deps import Deps

log = logging.getLogger(__name__)

CONSOLE_CHANNEL = "console"  # the channel `paperclub console` acts in: its own schedule, interests, posts
MAX_INPUT_CHARS = 1000  # longer text is cut (a pasted abstract still finds its neighbours)
ECHO_CHARS = 80  # what a reply repeats of a query or topic: enough to recognise it
RESULTS = 5
CLOSEST = 2  # offered, as the closest, when nothing is a good match


def member_zone(deps: Deps, user: str | None) -> str | None:
    """The member's time zone as their Slack profile has it (users.info, cached in
    `deps.member_zones`), or None: no Slack here (the console), no zone, or Slack would not say."""
    if deps.slack is None or not user:
        return None
    def ask(member: str) -> str | None:
        zone = (deps.slack.users_info(user=member).get("user") or {}).get("tz")
        return check_timezone(zone) if zone else None

    try:
        return deps.member_zones.get(user, deps.clock().timestamp(), ask)
    except Exception:  # no scope, an API error, a zone we do not know: the caller's default
        log.info("no time zone for %s from users.info; using the default", member_tag(user))
        return None


def channel_of(call: Call) -> str:
    """The channel a command acts on (the console's own when none was given)."""
    return call.channel_id or CONSOLE_CHANNEL


# -- input cleaning ---------------------------------------------------------------
# Slack markup in command text: <@U123>, <@U123|name>, <#C1|general>, <!here>, <!subteam^S1|@team>,
# and links <https://x|label>. Mentions are noise for a search, links keep their text.
_LINK = re.compile(r"<((?:https?|mailto):[^<>|\s]+)(?:\|([^<>]*))?>")
_MARKUP = re.compile(r"<[@#!][^<>]*>")
_SHORTCODE = re.compile(r"(?<![\w:]):[a-z0-9][a-z0-9_+'-]*:(?:skin-tone-\d:)?(?![\w])", re.I)
_WORDLIKE = re.compile(r"[^\W_]", re.UNICODE)
# *bold*, _italic_, ~strike~, `code` as Slack reads them: the marks stand at the edges of words (so
# "snake_case", a forum id "rJx_bJ" or a link's path keep theirs). The words stay; the marks would
# pair with the bot's own bold wherever the text is shown back (an interest, a search's title).
# The span is bounded (EMPHASIS_CHARS): unbounded, a pasted "*a *a *a ..." was a scan to the end from
# every mark, a second at 9,000 characters.
EMPHASIS_CHARS = 300
_EMPHASIS = re.compile(r"(?:(?<=[\s(])|^)(```|`|\*|_|~)(?=\S)(.{1,%d}?)(?<=\S)\1(?=[\s.,;:!?)]|$)" % EMPHASIS_CHARS)


def _keep_char(ch: str) -> bool:
    if ch in "\t\n\r":
        return True
    cat = unicodedata.category(ch)
    if cat in ("Cc", "Cf", "Cs", "Co", "Cn", "So"):  # control, format (ZWJ), emoji and symbols
        return False
    return not ("\U0001F3FB" <= ch <= "\U0001F3FF" or "\ufe00" <= ch <= "\ufe0f")  # skin tones, VS


def clean_input(text: str | None) -> str:
    """Slack's escaped command text -> plain words: links kept, mentions/emoji/control chars and
    *bold*/_italic_/~strike~/`code` marks dropped."""
    text = text or ""
    text = _LINK.sub(lambda m: m.group(2) or m.group(1), text)
    text = _MARKUP.sub(" ", text)
    text = text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    text = _SHORTCODE.sub(" ", text)
    for _ in range(3):  # *_nested_* marks, outermost first
        text = _EMPHASIS.sub(r"\2", text)
    text = "".join(ch if _keep_char(ch) else " " for ch in text)
    return " ".join(text.split())


def has_words(text: str) -> bool:
    return bool(_WORDLIKE.search(text or ""))


def quoted(text: str, limit: int = 60) -> str:
    """User text for a message: cut, escaped, in curly quotes."""
    return f"“{bk.esc(bk.cut_chars(text, limit))}”"


# -- the dispatcher -------------------------------------------------------------------
def working_line(deps: Deps, text: str | None) -> str | None:
    """What the ack of a slow command says at once ("Fetching 2501.01234 from arXiv…"); None for a
    quick one. Reads nothing: it runs before Slack hears back."""
    word, _, rest = clean_input((text or "")[:MAX_INPUT_CHARS * 2]).partition(" ")
    sub = deps.commands.lookup(word) if word else None
    if sub is None or sub.working is None:
        return None
    return sub.working(rest.strip())


def run_command(deps: Deps, user_id: str, text: str | None, *, channel_id: str = "") -> Reply:
    """Answer one `/paper ...` line; store errors become a friendly reply (StoreBusy: the apology,
    ReadOnlyStorage: that the change must wait; both from the listener's report_error)."""
    started = time.perf_counter()
    line = clean_input(text)
    notes = []
    if len(line) > MAX_INPUT_CHARS:
        line = bk.cut_chars(line, MAX_INPUT_CHARS).rstrip("…")
        notes.append(f"That was long, so I used the first {MAX_INPUT_CHARS:,} characters.")
    word, _, rest = line.partition(" ")
    sub = deps.commands.lookup(word) if word else deps.commands.get("help")
    call = Call(user_id=user_id, args=rest.strip(), channel_id=channel_id,
                name=sub.name if sub else "", notes=notes, raw=text or "")
    try:
        if sub is None:
            reply = handle_unknown(deps, call, word, rest.strip())
        else:
            reply = sub.handler(deps, call)
    except (StoreBusy, ReadOnlyStorage):
        raise  # our side, not the user's: the listener's answer (report_error) says so
    except StoreError as e:
        reply = problem_reply(deps, str(e))
    _add_notes(reply, notes)
    for_channel(deps, reply, channel_of(call))
    log.info("%s %s by %s in %.0f ms", deps.command, call.name or "?", member_tag(user_id),
             (time.perf_counter() - started) * 1000)
    return reply


def club_meets(store: Store, channel: str | None) -> bool:
    """Whether a reading group meets in the channel (its cards offer Nominate)."""
    club = store.get_club(channel) if channel else None
    return bool(club and club.get("active"))


def for_channel(deps: Deps, reply: Reply, channel: str | None) -> Reply:
    """A reply as this channel shows it: Nominate only where a reading group meets."""
    if not club_meets(deps.store, channel):
        reply.blocks = bk.without_nominate(reply.blocks)
    return reply


def _add_notes(reply: Reply, notes: list[str]) -> None:
    if not notes:
        return
    at = 1 if reply.blocks and reply.blocks[0].type == "header" else 0
    if len(reply.blocks) < bk.MAX_MESSAGE_BLOCKS:
        reply.blocks.insert(at, bk.context(*(bk.esc(n) for n in notes)))


# -- who may change what -------------------------------------------------------------------
def is_admin(deps: Deps, user: str) -> bool:
    """PAPERCLUB_ADMINS lists who may change schedules and remove others' interests; empty: everyone."""
    admins = deps.settings.admin_ids
    return not admins or user in admins


def admins_only(deps: Deps, what: str) -> Reply:
    """The polite refusal, naming up to five admins to ask."""
    admins = sorted(deps.settings.admin_ids)
    who = ", ".join(bk.mention(a) for a in admins[:5])
    return problem_reply(deps, f"Only the reading group's admins can {what} here.",
                         hint=f"Ask {who}." if who else None)


def problem_reply(deps: Deps, message: str, *, hint: str | None = None) -> Reply:
    """A short friendly answer to something we could not do."""
    hint = hint or f"Try {code(deps.command + ' help')} to see what I can do."
    return Reply(bk.esc(message), bk.message_blocks(bk.esc(message), footer=hint))


def handle_unknown(deps: Deps, call: Call, word: str, rest: str) -> Reply:
    """Not a subcommand: a close name gets 'did you mean', anything else is searched for."""
    names = [n for s in deps.commands.visible() for n in (s.name, *s.aliases)]
    close = difflib.get_close_matches(word.lower(), names, n=1, cutoff=0.7)
    if close:
        sub = deps.commands.lookup(close[0])
        suggestion = f"{deps.command} {sub.name} {rest}".strip()
        text = (f"I don't know {code(word)}. Did you mean {code(suggestion)}?\n"
                f"_{bk.esc(sub.help)}_")
        return Reply(f"Did you mean {bk.esc(suggestion)}?",
                     bk.message_blocks(text, footer=_short_help(deps)))
    whole = f"{word} {rest}".strip()
    paper = deps.searcher.find_exact(whole)
    if paper is not None:
        return summary_reply(deps, paper)
    if not has_words(whole):
        return help_reply(deps)
    note = (f"{code(word)} isn't one of my commands, so I searched for it. "
            f"See {code(deps.command + ' help')}.")
    return search_reply(deps, whole, note=note)


def _short_help(deps: Deps) -> str:
    names = ", ".join(code(s.name) for s in deps.commands.visible())
    return f"Commands: {names}. {code(deps.command + ' help')} explains each."


# -- replies shared by commands and buttons ----------------------------------------------
def paper_summary(store: Store, paper: Paper, llm=None, *, now: float):
    """The paper's Summary (tldr, points); None when the summariser fails (the abstract shows instead).

    Store errors (a busy database) propagate, so a command answers with them.
    """
    from store.summary import paper_summary as cached_summary

    try:
        return cached_summary(store, paper, llm=llm, now=now)
    except StoreError:
        raise
    except Exception:  # a broken summariser must not hide the paper
        log.warning("summary failed for %s; showing the abstract", paper.id, exc_info=True)
        return None


def paper_summaries(store: Store, papers, llm=None, *, now: float) -> dict:
    """paper id -> Summary for several papers, the cache read once for all; a paper whose
    summariser fails is asked alone, and gets None (its abstract shows instead)."""
    from store.summary import paper_summaries as cached_summaries

    try:
        return cached_summaries(store, papers, llm=llm, now=now)
    except StoreError:
        raise
    except Exception:  # find the paper that broke it: the others keep their summaries
        return {p.id: paper_summary(store, p, llm, now=now) for p in papers}


def search_reply(deps: Deps, query: str, *, note: str | None = None) -> Reply:
    """Top papers for free text as result blocks with buttons."""
    if not has_words(query):
        raise EmptyQuery("I need some words to search for.")
    try:  # a paper's link or arXiv id names that paper: its words ("https", "abs") are no topic
        paper = deps.searcher.linked(query)
    except PaperNotInLibrary as e:
        raise not_in_library(deps, e) from None
    if paper is not None:
        return summary_reply(deps, paper)
    hits = deps.searcher.search(query, limit=RESULTS)
    shown = bk.cut_chars(query, ECHO_CHARS)
    good = any(h.relevant for h in hits)
    if good:
        title = f"Top {len(hits)} for “{shown}”"  # each one's why says how close it is, in words
    elif hits:  # nothing is about it: say so, and offer the closest as no more than that
        hits = hits[:CLOSEST]
        title = f"No good match for “{shown}”"
        note = " ".join(x for x in (note, "Nothing here is really about that. The closest, for what it "
                                          "is worth:") if x)
    else:
        title = f"Search: “{shown}”"
    empty = (f"No papers match {quoted(query)}. Try other words, or "
             f"{code(deps.command + ' help')}.")
    names = bk.esc(", ".join(h.paper.short_name for h in hits))
    text = (f"Papers for {quoted(query)}: {names}" if good else
            f"No good match for {quoted(query)}; closest: {names}" if hits else
            f"No papers match {quoted(query)}.")
    # A TL;DR reads better than the derived headline; summaries are cached after the first time.
    now = deps.clock().timestamp()
    summaries = paper_summaries(deps.store, [h.paper for h in hits], deps.llm, now=now)
    tldrs = {pid: getattr(s, "tldr", None) for pid, s in summaries.items()}
    return Reply(text, bk.results_blocks(title, hits, note=note, empty=empty, tldrs=tldrs))


def _guess_note(deps: Deps, ref: str, paper) -> str:
    """Say a paper was a best guess, and name the runners-up."""
    note = f"Best match for {quoted(ref)}."
    try:
        others = [h.paper for h in deps.searcher.search(ref, limit=3) if h.paper.id != paper.id][:2]
    except StoreError:
        others = []
    if others:
        alts = ", ".join(f"*{bk.esc(p.short_name)}* ({code(p.id)})" for p in others)
        note += f" Not it? Also close: {alts}."
    return note


def not_in_library(deps: Deps, e: PaperNotInLibrary) -> PaperNotFound:
    """The answer to a link or arXiv id of a paper the library lacks: how to bring it in."""
    return PaperNotFound(f"{e} {deps.command} add {e.ident} brings it in from {e.where}; then ask again.")


def resolve(deps: Deps, ref: str) -> tuple[Paper, str | None]:
    """(paper, note): the note says which paper was picked when it was a best guess."""
    if not has_words(ref):
        raise PaperNotFound("Which paper? Give its id, short name, or a few words from it.")
    try:
        paper, exact = deps.searcher.resolve(ref)
    except PaperNotInLibrary as e:
        raise not_in_library(deps, e) from None
    return paper, None if exact else _guess_note(deps, ref, paper)


def summary_reply(deps: Deps, paper, *, note: str | None = None) -> Reply:
    """One paper: TL;DR and key points when a summariser exists, else headline and abstract."""
    summary = paper_summary(deps.store, paper, deps.llm, now=deps.clock().timestamp())
    tldr = getattr(summary, "tldr", None)
    points = getattr(summary, "points", None)
    return Reply(bk.esc(f"{paper.short_name}: {tldr or paper.headline}"),
                 bk.summary_blocks(paper, tldr=tldr, points=points, note=note))


def similar_reply(deps: Deps, paper, *, note: str | None = None) -> Reply:
    """Papers closest to this one."""
    hits = deps.searcher.similar(paper.id, limit=RESULTS)
    names = ", ".join(h.paper.short_name for h in hits)
    return Reply(bk.esc(f"More like {paper.short_name}: {names}"),
                 bk.results_blocks(f"More like {paper.short_name}", hits, note=note,
                                   empty="No other papers yet."))


def share_reply(deps: Deps, paper, user_id: str) -> Reply:
    """The in-channel post of a paper, crediting who shared it."""
    summary = paper_summary(deps.store, paper, deps.llm, now=deps.clock().timestamp())
    tldr = getattr(summary, "tldr", None)
    return Reply(f"<@{bk.esc(user_id)}> shared " + bk.esc(f"{paper.short_name}: {tldr or paper.headline}"),
                 bk.shared_blocks(paper, user_id, tldr=tldr), in_channel=True)


def help_reply(deps: Deps, *, unknown: str | None = None) -> Reply:
    """What the bot does and every subcommand with an example."""
    entries = [(s.usage, s.help, s.example) for s in deps.commands.visible()]
    intro = (f"I search the reading group's {deps.store.count_papers():,} paper abstracts by meaning "
             "and by keyword, summarise them, and find related work. Replies are only visible "
             "to you until you share them. `<paper>` is an id, a short name, or a few words. "
             f"`{deps.command} help <command>` shows one command.")
    if unknown:
        intro = f"There is no command {quoted(unknown)}; here are all of them. " + intro
    return Reply(bk.esc(f"{deps.command} help"), bk.help_blocks(deps.command, entries, intro=intro))


# -- the built-in subcommands -----------------------------------------------------------
def handle_help(deps: Deps, call: Call) -> Reply:
    word = call.args.split()[0] if call.args.split() else ""
    sub = deps.commands.lookup(word.removeprefix(deps.command).strip() or word) if word else None
    if sub is None:
        return help_reply(deps, unknown=word or None)
    also = f" Also: {', '.join(sub.aliases)}." if sub.aliases else ""
    return Reply(bk.esc(f"{deps.command} help {sub.name}"),
                 bk.help_blocks(deps.command, [(sub.usage, sub.help + also, sub.example)],
                                title=f"{deps.command} {sub.name}"))


def handle_search(deps: Deps, call: Call) -> Reply:
    if not has_words(call.args):
        return problem_reply(deps, "What should I search for?",
                             hint=f"For example {code(deps.command + ' search diffusion for video')}.")
    return search_reply(deps, call.args)


def handle_summary(deps: Deps, call: Call) -> Reply:
    paper, note = resolve(deps, call.args)
    return summary_reply(deps, paper, note=note)


def handle_similar(deps: Deps, call: Call) -> Reply:
    paper, note = resolve(deps, call.args)
    return similar_reply(deps, paper, note=note)


SUBCOMMANDS = (
    Subcommand("help", handle_help, usage="help", example="help", help="This list.", aliases=("?", "h")),
    Subcommand("search", handle_search, usage="search <words>", example="search video grounding with actions",
               help="The 5 papers that best match, by meaning and keywords.", aliases=("find", "s")),
    Subcommand("summary", handle_summary, usage="summary <paper>", example="summary temporal video grounding",
               help="A paper's TL;DR, key points and abstract.", aliases=("show", "tldr", "sum")),
    Subcommand("similar", handle_similar, usage="similar <paper>", example="similar temporal video grounding",
               help="Papers closest to that one.", aliases=("like", "related", "more")),
)
