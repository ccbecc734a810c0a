"""/paper interests: the topics a channel reads, which steer its paper of the day."""
from __future__ import annotations

import difflib
import logging
import re
from dataclasses import replace
from typing import TYPE_CHECKING

from store import closeness, loosely_related
from store.pick import areas_show, like_text
from store.sources import SourceError, add_paper, known_paper, paper_link
from store.text import parse_number

from . import blocks as bk
from .blocks import code, mention
from .calibrate import interests_broad, offer_blocks
from .commands import (
    Call,
    Reply,
    Subcommand,
    admins_only,
    channel_of,
    handle_help,
    has_words,
    is_admin,
    problem_reply,
    resolve,
)
from .confirm import ask_first, split_confirm

if TYPE_CHECKING:
    from store import Paper

    from .deps import Deps

log = logging.getLogger(__name__)

MAX_INTERESTS = 50
MAX_INTEREST_CHARS = 200
VERBS = ("add", "remove", "list")
# Lone words people try on a list that name no topic: `interests clear` must not follow "clear".
LIST_WORDS = frozenset({"clear", "reset", "edit", "rename", "undo", "all", "none", "mine", "off", "on", "stop",
                        "confirm"})


# -- /paper interests -------------------------------------------------------------------------
def _interest_lines(rows: list[dict], broad: list[bool]) -> list[str]:
    """One line per topic: members who hold the same text share it, each keeping their own number
    (`interests remove <n>` takes yours off and leaves theirs). A topic as wide as the library says so:
    its words don't steer the pick, its members' ratings do."""
    topics: dict[str, list[tuple[int, dict, bool]]] = {}
    for n, (row, wide) in enumerate(zip(rows, broad), start=1):
        topics.setdefault(row["text"].casefold(), []).append((n, row, wide))
    lines = []
    for held in topics.values():
        numbers = ", ".join(str(n) for n, _, _ in held)
        people = [mention(row["added_by"]) for _, row, _ in held if row.get("added_by")]
        who = f" (added by {', '.join(people)})" if people else ""
        wide = " · _as wide as this library: ratings and reactions steer it_" if held[0][2] else ""
        lines.append(f"{numbers}. *{bk.esc(held[0][1]['text'])}*{who}{wide}")
    return lines


def _interests_reply(deps: Deps, channel: str, *, note: str | None = None, rows: list[dict] | None = None,
                     broad: list[bool] | None = None) -> Reply:
    """The channel's interests (`rows`, `broad`: as the caller already read them), under `note`."""
    rows = deps.store.interests(channel) if rows is None else rows
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
    lines = _interest_lines(rows, interests_broad(deps, rows) if broad is None else broad)
    blocks += bk.line_sections(lines)  # fifty long ones take a few sections, each item whole
    blocks.append(bk.context("Each day I pick the paper that best matches one member's interests, "
                             "taking turns so everyone is served.", footer))
    return Reply(bk.esc(f"{len(rows)} interests: " + "; ".join(r["text"] for r in rows)), blocks)


def _closest_hits(deps: Deps, vector, exclude: str | None = None) -> list[tuple[Paper, float]]:
    """The three papers closest to an interest's vector, with their cosines; none if the index can't say."""
    try:
        hits = deps.searcher.index().search(vector, 4, exclude=exclude)
    except Exception:
        return []
    papers = {p.id: p for p in deps.store.get_papers([pid for pid, _ in hits])}
    return [(papers[pid], score) for pid, score in hits[:3] if pid in papers]


def _closest(hits: list[tuple[Paper, float]]) -> str:
    names = [f"*{bk.esc(paper.short_name)}* ({closeness(score)})" for paper, score in hits]
    return f"Closest papers right now: {', '.join(names)}." if names else ""


# Commas, semicolons or "and" between what may be separate topics ("LLM agents, RLHF and diffusion").
_JOINED = re.compile(r"\s*[,;]\s*|\s+(?:and|&)\s+", re.I)


def _several_topics(deps: Deps, text: str, hits: list[tuple[Paper, float]]) -> str:
    """A hint to add each topic on its own, for words joined by commas or "and" whose closest papers are
    all only loosely related; "" otherwise. Never split for the member: "vision, language and action" is
    one topic, and its papers are close."""
    parts = [p.strip() for p in _JOINED.split(text) if has_words(p)]
    if len(parts) < 2 or not hits or not all(loosely_related(score) for _, score in hits):
        return ""
    return f"Several topics? Add each on its own: {code(f'{deps.command} interests add {parts[0]}')}."


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
    else:
        paper = _paper_given(deps, text)
        if isinstance(paper, Reply):
            return paper
        if paper is not None:  # a link or an id is no topic: its words would steer nowhere, its paper does
            like, note = True, "It names a paper rather than a topic, so the pick steers towards papers like it."
    if like:
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
    added = deps.store.add_interest(channel, label, call.user_id or None, model=embedder.name, vector=vector,
                                    paper_id=paper_id, now=deps.clock().timestamp())
    said = f"Added *{bk.esc(label)}*." + (f" {note}" if note else "")
    rows = deps.store.interests(channel)
    flags = interests_broad(deps, rows)  # told once, for the note and the list under it
    broad = any(wide for row, wide in zip(rows, flags) if row["id"] == added)
    if broad:  # its closest papers are the vaguest ones, which the pick will not bring: say what it will
        # A library too small for areas to show has no thick of them: there its words still rank.
        brings = ("your turns bring papers from the thick of the library's areas"
                  if areas_show(deps.store.count_papers(), deps.pick) else "your turns are guesses")
        closest = (f"It is as wide as this library, so its words can't say where to look: {brings} until "
                   "your ratings and reactions show what you read. A narrower topic, in a few words, gets "
                   "closer picks at once.")
    hits = _closest_hits(deps, vector, exclude=paper_id)
    if not broad:
        closest = _closest(hits)
    several = "" if like else _several_topics(deps, label, hits)
    reply = _interests_reply(deps, channel, note=f"{said} {closest} {several}".strip(), rows=rows, broad=flags)
    # A new interest tells the pick little yet: offer a calibration round, right under the note.
    reply.blocks[2:2] = offer_blocks(deps, label, broad=broad)
    return reply


def _paper_given(deps: Deps, text: str) -> Paper | Reply | None:
    """The paper an interest names instead of a topic: an arXiv or OpenReview link or an arXiv id (fetched
    when the library lacks it), or a library id; a Reply, adding nothing, when its source can't give it;
    None for a topic. A bare word that could be an OpenReview forum id ("GFlowNets") stays a topic."""
    ref = paper_link(text)
    if ref is None:
        words = text.split()
        return deps.store.get_paper(words[0].lower()) if len(words) == 1 else None
    kind, ident = ref
    where = {"arxiv": "arXiv", "openreview": "OpenReview"}[kind]
    hint = (f"Try again in a few minutes, or describe its topic in a few words: "
            f"{code(deps.command + ' interests add <topic>')}")
    if deps.sources is None:
        paper = known_paper(deps.store, ref)
        return paper or problem_reply(deps, "That is a paper, and fetching papers is not set up here, so "
                                            "nothing was added.", hint=hint)
    try:
        added = add_paper(deps.store, deps.sources, ref, deps.embedder, now=deps.clock().timestamp())
    except SourceError:  # unreachable, too slow, or an answer of the wrong shape
        return problem_reply(deps, f"That is a paper, and I couldn't reach {where} just now to read {ident}, "
                                   "so nothing was added.", hint=hint)
    if added is None:
        return problem_reply(deps, f"{where} has no paper {ident}, so nothing was added.", hint=hint)
    return added.paper


def _number_of(rows: list[dict], text: str, user: str) -> int | None:
    """The number of the interest worded `text` (case aside): the member's own where several members
    hold it, else the first; None when none is."""
    same = [n for n, row in enumerate(rows, start=1) if row["text"].casefold() == text.casefold()]
    own = [n for n in same if rows[n - 1].get("added_by") == user]
    return (own or same or [None])[0]


def _holding(rows: list[dict], words: str) -> dict[str, list[int]]:
    """Each distinct interest (its wording) holding all of `words` as words, with its numbers."""
    wanted = set(re.findall(r"\w+", words.casefold()))
    out: dict[str, list[int]] = {}
    for n, row in enumerate(rows, start=1):
        if wanted and wanted <= set(re.findall(r"\w+", row["text"].casefold())):
            same = next((t for t in out if t.casefold() == row["text"].casefold()), row["text"])
            out.setdefault(same, []).append(n)
    return out


def _remove_interest(deps: Deps, call: Call, arg: str) -> Reply:
    channel = channel_of(call)
    arg, confirmed = split_confirm(arg)
    rows = deps.store.interests(channel)
    listed = f"{code(deps.command + ' interests')} lists them with their numbers."
    if not arg:
        return problem_reply(deps, "Which one? Give its number from the list." if rows
                             else "This channel has no interests to remove.",
                             hint=f"{code(deps.command + ' interests remove <number>')} · {listed}")
    number = parse_number(arg.lstrip("#"), 1, len(rows)) or _number_of(rows, arg, call.user_id)
    first, _, worded = arg.partition(" ")
    numbered = parse_number(first.lstrip("#"), 1, len(rows)) if number is None and worded else None
    if numbered is not None:  # `remove 2 graph neural networks`: what the Remove button sends
        number = (numbered if rows[numbered - 1]["text"].casefold() == worded.strip().casefold()
                  else _number_of(rows, worded.strip(), call.user_id))  # renumbered since: found by its words
        if number is None:
            return problem_reply(deps, f"The list changed since: {worded} is not on it any more, so nothing was "
                                 "removed.", hint=listed)
    if number is None:  # words of one interest ("diffusion" of "LLM agents, RLHF and diffusion") name it
        holding = {} if arg.lstrip("#").isdigit() else _holding(rows, arg)  # a number is a place in the list
        if len(holding) > 1:
            named = "; ".join(f"{', '.join(str(n) for n in ns)}. {text}" for text, ns in holding.items())
            return problem_reply(deps, f"Several interests say {arg}: {named}. Which one? Nothing was removed.",
                                 hint=f"{code(deps.command + ' interests remove <number>')} · {listed}")
        if holding:
            number = _number_of(rows, next(iter(holding)), call.user_id)
    if number is None:
        have = f"this channel has {len(rows)}" if rows else "this channel has none"
        return problem_reply(deps, f"There is no interest {arg}; {have}.", hint=listed)
    row = rows[number - 1]
    if row.get("added_by") != call.user_id and not is_admin(deps, call.user_id):
        return admins_only(deps, "remove an interest someone else added")
    if not confirmed:
        who = f", added by {mention(row['added_by'])}" if row.get("added_by") else ""
        # The number and the words, so a list renumbered before the click can't turn it onto another row.
        return ask_first(deps, call, f"remove {number} {row['text']}", title="Remove this interest?", button="Remove it",
                         text=f"This would take {number}. *{bk.esc(row['text'])}*{who} off this channel's "
                              "interests: the paper of the day stops steering towards it.")
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
    refused = _not_a_topic(deps, call, call.args.strip())
    if refused is not None:
        return refused
    return _add_interest(deps, call, call.args.strip())  # "/paper interests diffusion" adds it


def _not_a_topic(deps: Deps, call: Call, text: str) -> Reply | None:
    """A lone word that is a command rather than a topic (`help`, `clear`, another subcommand's name, a
    misspelt `remove`): interests' usage, or what was probably meant, and nothing added. None for a
    topic: a one-word one ("diffusion", "RLHF") is added as before."""
    word = text.lower()
    if " " in word or word == "like":  # "like" alone is a paper left out: _add_interest asks which
        return None
    sub = deps.commands.lookup(word)
    if word == "usage" or sub is not None and sub.name == "help":
        return handle_help(deps, replace(call, args="interests"))
    close = difflib.get_close_matches(word, VERBS, n=1, cutoff=0.8)
    if sub is None and not close and word not in LIST_WORDS:
        return None
    cmd = deps.command
    meant = (f"{cmd} interests {close[0]}" if close
             else f"{cmd} {sub.name}" if sub is not None and sub.name != "interests" else None)
    hint = (f"Did you mean {code(meant)}? " if meant else
            f"{code(cmd + ' interests remove <number>')} takes one off. ")
    hint += f"To follow it as a topic: {code(f'{cmd} interests add {text}')}."
    return problem_reply(deps, f"“{text}” looks like a command, not a topic, so I added nothing.", hint=hint)


SUBCOMMANDS = (
    Subcommand("interests", handle_interests, usage="interests [add <topic> | add like <paper> | remove <n>]",
               example="interests add video understanding",
               help="The topics this channel reads; the paper of the day serves each member's in turn.",
               aliases=("interest", "topics")),
)
