"""Pure Block Kit builders: papers, hits, summaries, digests, reading lists -> slack_sdk blocks.

Everything here is built with `slack_sdk.models.blocks`, so the SDK checks
Slack's limits when a message is serialised; the helpers below cut text to
fit first (at sentence boundaries) so those checks never fire.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Callable, Iterable, Sequence

from slack_sdk.models.blocks import (
    ActionsBlock,
    Block,
    ButtonElement,
    ConfirmObject,
    ContextBlock,
    DividerBlock,
    HeaderBlock,
    MarkdownTextObject,
    Option,
    OverflowMenuElement,
    PlainTextObject,
    SectionBlock,
    StaticSelectElement,
)
from slack_sdk.models.views import View

from store.text import split_sentences

if TYPE_CHECKING:
    from store.pick import DailyPick

# Action ids of the paper buttons; the app routes clicks on these.
ACTION_SUMMARY = "paper_summary"
ACTION_SIMILAR = "paper_similar"
ACTION_SHARE = "paper_share"
ACTION_SAVE = "paper_save"  # on every paper card: puts the paper on the clicker's reading list
ACTION_CONFIRM = "paper_confirm"  # a destructive command's button: its value is the command line to re-run
# The verdict buttons on every paper card but the day's own (a reaction there is its verdict):
# the same action id on every card, the paper id as value; bot/reactions.py logs a press as the
# 👍 / 👎 it stands for, for the clicker and that paper only (store.feedback.record_verdict).
ACTION_MORE = "paper_more"  # "For me": more papers like this one
ACTION_LESS = "paper_less"  # "Not for me": fewer like it
ACTION_UNDO_VERDICT = "paper_verdict_undo"  # in the private confirmation: takes the verdict back
# The overflow menu (⋯) on every paper card. Each option's value is "<a button's action id>|<paper id>"
# (menu_value), and bot/app.py answers it with that button's own handler; the buttons' action ids
# stay registered for messages already in Slack.
ACTION_MENU = "paper_menu"
MENU_TEXT = 75  # Slack's limit on an option's text and (for overflow menus) its value
MENU_OPTIONS = (2, 5)  # an overflow menu holds 2 to 5 options
ACTION_CALIBRATE = "paper_calibrate"  # "Rate a few papers": a calibration round (value: the interest's text)

# Block-id prefixes. A block id carries the paper id after its prefix: bot/reactions.py reads
# SHARED_BLOCK and DAILY_BLOCK back to learn which paper a message shows.
HIT_BLOCK = "hit-"  # hit-<n>-<id>: one search result
ACT_BLOCK = "act-"  # act-[<n>-]<id>: the buttons under a result, a summary or a share
SHARED_BLOCK = "shared-"  # shared-<id>: a paper shared in the channel
DAILY_BLOCK = "daily-"  # daily-<id>: the paper of the day in its digest
DAILY_ACT_BLOCK = "daily-act-"  # daily-act-<id>: its buttons
RUNNER_BLOCK = "daily-ru"  # daily-ru<n>-<id> and daily-ru<n>-act-<id>: a runner-up and its buttons
# calib-<n>-<id>: a paper of a calibration round; calib-act-<n>:<id>,<id>,...: its buttons, naming every
# paper of the round, so a press can redraw the round in place (an ephemeral message's payload has no blocks)
CALIB_BLOCK = "calib-"
CALIB_ACT_BLOCK = "calib-act-"
SAVED_BLOCK = "saved-"  # saved-<n>-<id> and saved-act-<n>-<id>: a reading-list entry
HOME_SAVED_BLOCK = "home-saved-"  # home-saved-<id>: a reading-list entry in App Home

# Slack's limits (see shared/slack-protocol.md section 5).
MAX_MESSAGE_BLOCKS = 50
MAX_ACTION_ELEMENTS = 25  # an actions block holds at most this many elements
MAX_SELECT_OPTIONS = 100  # a static_select holds at most this many options
MAX_VIEW_BLOCKS = 100
SECTION_TEXT = 3000
FIELD_TEXT = 2000
HEADER_TEXT = 150
CONTEXT_TEXT = 2000  # a context element may hold more; a long footnote reads badly
FALLBACK_TEXT = 3000  # the top-level `text` (notifications, screen readers)
ABSTRACT_TEXT = 2400  # leaves room in the section for a label



def esc(text: str | None) -> str:
    """Escape the three characters Slack treats as markup in mrkdwn text."""
    return (text or "").replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# -- the one gate every outgoing message passes --------------------------------------------------
# Markup the bot builds itself: a member (<@U1>), a channel (<#C1>), a link (<https://x|label>).
# Anything else between angle brackets (<!channel>, <!here>, <@U1 from an abstract>...) is text
# that escaped its esc() and is neutralised here; the bot never sends a broadcast.
_OWN_MARKUP = re.compile(r"@[UW][A-Z0-9]{1,20}|#[CGD][A-Z0-9]{1,20}(?:\|[\w.-]{0,80})?"
                         r"|https?://[^\s<>|]{1,1500}(?:\|[^<>|]{0,400})?")
_ANGLE = re.compile(r"<([^<>]*)>|[<>]")


def safe_mrkdwn(text: str) -> str:
    """`text` with every <, > that is not the bot's own markup escaped (see _OWN_MARKUP)."""
    def one(m: re.Match) -> str:
        inner = m.group(1)
        if inner is not None and _OWN_MARKUP.fullmatch(inner):
            return m.group(0)
        return m.group(0).replace("<", "&lt;").replace(">", "&gt;")
    return _ANGLE.sub(one, text)


def outgoing(payload):
    """A message, view or block list as it may leave for Slack: every mrkdwn string through safe_mrkdwn.

    every Web API call, respond() and ack() (bot.outgoing: SafeClient, RetryingRespond, GatedAck)
    pass through here, so text from abstracts, interests or commands cannot ping a channel.
    """
    if isinstance(payload, str):
        return safe_mrkdwn(payload)
    if isinstance(payload, list):
        return [outgoing(v) for v in payload]
    if not isinstance(payload, dict):
        return payload
    plain = payload.get("type") == "plain_text"  # shown as typed: Slack parses no markup there
    out = {}
    for key, value in payload.items():
        if key == "text" and isinstance(value, str):
            out[key] = value if plain else safe_mrkdwn(value)
        elif key in ("text", "blocks", "elements", "fields", "view", "accessory", "attachments") or isinstance(value, (dict, list)):
            out[key] = outgoing(value)
        else:
            out[key] = value
    return out


def cut_chars(text: str, limit: int) -> str:
    """Cut plain text to at most `limit` characters at a word boundary, with an ellipsis."""
    text = " ".join((text or "").split())
    if len(text) <= limit:
        return text
    cut = text[: max(1, limit - 1)]
    if " " in cut[limit // 2 :]:
        cut = cut.rsplit(" ", 1)[0]
    return cut.rstrip(" ,;:-") + "…"


def cut_sentences(text: str, limit: int) -> str:
    """Whole sentences of `text` whose escaped form fits in `limit` characters.

    When even the first sentence is too long, it is cut at a word boundary.
    The limit counts escaped characters because Slack counts what it receives.
    """
    text = " ".join((text or "").split())
    if len(esc(text)) <= limit:
        return text
    out = ""
    for sentence in split_sentences(text):
        candidate = f"{out} {sentence}".strip()
        if len(esc(candidate)) > limit - 1:
            break
        out = candidate
    if out:
        return out + " …" if len(esc(out)) + 2 <= limit else out
    # One huge sentence: cut on words, leaving room for the escapes.
    budget = limit
    while budget > 1:
        cut = cut_chars(text, budget)
        if len(esc(cut)) <= limit:
            return cut
        budget -= max(1, len(esc(cut)) - limit)
    return "…"


def code(text: str) -> str:
    """Inline code for a command example (backticks inside would break the span)."""
    return f"`{esc(text.replace('`', chr(39)))}`"


def mention(user: str) -> str:
    """A member as a Slack mention (ids start U or W); anything else as plain @text."""
    return f"<@{user}>" if user and user[0] in "UW" else f"@{user}"


def venue(paper) -> str:
    """'ICLR 2026' from the collection, adding the year when the collection lacks it."""
    name = (paper.collection or "").strip()
    if paper.year and str(paper.year) not in name:
        name = f"{name} {paper.year}".strip()
    return name


# An http(s) URL with a host and nothing that ends the link or starts its label early.
_SAFE_URL = re.compile(r"https?://[^\s<>|\"'`/?#\\]+[^\s<>|\"'`\\]{0,1500}", re.I)


def safe_url(url: str | None) -> str | None:
    """`url` when it may go inside <url|label>: http(s) only, no |, <, >, quotes or whitespace."""
    url = (url or "").strip()
    return url if _SAFE_URL.fullmatch(url) and len(url) <= 1500 else None


def link(url: str | None, label: str) -> str:
    """A mrkdwn link, or just the label when there is no usable URL (a '|' would set its own label)."""
    url = safe_url(url)
    if url is None:
        return esc(label)
    return f"<{esc(url)}|{esc(label).replace('|', '¦')}>"


def cut_mrkdwn(text: str, limit: int) -> str:
    """Cut mrkdwn to `limit` characters with an ellipsis, never inside <...> markup or an &entity;."""
    if len(text) <= limit:
        return text

    def open_at(cut: str) -> int:  # where an unfinished <markup> or &entity; starts, else -1
        opened, amp = cut.rfind("<"), cut.rfind("&")
        if opened > cut.rfind(">"):
            return opened
        return amp if amp > cut.rfind(";") and len(cut) - amp <= 5 else -1

    cut = text[: limit - 1]
    if " " in cut[len(cut) // 2:]:
        words = cut.rsplit(" ", 1)[0]
        if open_at(words) < 0:
            cut = words
    while (at := open_at(cut)) >= 0:
        cut = cut[:at]
    return cut.rstrip() + "…"


def section(text: str, *, block_id: str | None = None, limit: int = SECTION_TEXT) -> SectionBlock:
    """A mrkdwn section; `text` is already mrkdwn (escaped) and is cut to fit."""
    text = cut_mrkdwn(text, limit)
    return SectionBlock(text=MarkdownTextObject(text=text or " "), block_id=block_id)


def fit_items(items: Sequence[str], limit: int, *, sep: str = ", ", more: str = " and {n} more") -> str:
    """As many whole items (mrkdwn, never cut inside) as fit in `limit` characters, then how many
    were left out, so a long list says what it does not show."""
    shown: list[str] = []
    size = 0
    for i, item in enumerate(items):
        left = len(items) - i - 1
        grown = size + len(item) + (len(sep) if shown else 0)
        if grown + (len(more.format(n=left)) if left else 0) > limit:
            break
        shown.append(item)
        size = grown
    left = len(items) - len(shown)
    return sep.join(shown) + (more.format(n=left) if left else "")


def line_sections(lines: Sequence[str], *, sep: str = "\n", limit: int = SECTION_TEXT) -> list[SectionBlock]:
    """Lines of mrkdwn in as few sections as fit, each line whole in one of them (long lists split)."""
    out: list[SectionBlock] = []
    chunk: list[str] = []
    for line in lines:
        if chunk and len(sep.join([*chunk, line])) > limit:
            out.append(section(sep.join(chunk), limit=limit))
            chunk = []
        chunk.append(line)
    if chunk:
        out.append(section(sep.join(chunk), limit=limit))
    return out


def context(*parts: str) -> ContextBlock:
    """A small grey line (mrkdwn parts joined with a middle dot)."""
    text = cut_mrkdwn("  ·  ".join(p for p in parts if p) or " ", CONTEXT_TEXT)
    return ContextBlock(elements=[MarkdownTextObject(text=text)])


def header(text: str) -> HeaderBlock:
    """A header; plain text, so nothing needs escaping, only cutting to 150 characters.

    Slack shows plain text as typed, but a title's '<!channel>' would still read like a ping
    (and be one if ever copied into mrkdwn): its bracket becomes a look-alike.
    """
    text = re.sub(r"<(?=[!@#])", "‹", cut_chars(text, HEADER_TEXT))
    return HeaderBlock(text=PlainTextObject(text=text or " ", emoji=True))


def verdict_buttons(paper) -> list[ButtonElement]:
    """👍 For me / 👎 Not for me: the member's verdict on this paper (value: its id)."""
    return [ButtonElement(text="👍 For me", action_id=ACTION_MORE, value=paper.id),
            ButtonElement(text="👎 Not for me", action_id=ACTION_LESS, value=paper.id)]


def menu_value(action_id: str, paper_id: str) -> str:
    """An overflow option's value: the button it stands for and the paper ("paper_summary|abc123")."""
    return f"{action_id}|{paper_id}"


def menu_choice(value: str | None) -> tuple[str | None, str]:
    """(action id, paper id) from an overflow option's value; (None, value) when it names no action."""
    action, sep, paper_id = (value or "").strip().partition("|")
    return (action, paper_id.strip()) if sep else (None, action)


def _labels() -> dict[str, str]:
    """What each paper action says, on a button or in the menu."""
    return {ACTION_SAVE: "Save", ACTION_SUMMARY: "Summary", ACTION_SIMILAR: "More like this",
            ACTION_SHARE: "Share to channel", ACTION_NOMINATE: "Nominate"}


def _menu(actions: Sequence[str], paper_id: str) -> list:
    """Paper actions behind one overflow menu; a single one (or an id too long for a menu value)
    stays a plain button, as Slack wants at least two options of at most 75 characters."""
    labels = _labels()
    too_long = any(len(menu_value(a, paper_id)) > MENU_TEXT for a in actions)
    if len(actions) < MENU_OPTIONS[0] or too_long or len(actions) > MENU_OPTIONS[1]:
        return [ButtonElement(text=labels[a], action_id=a, value=paper_id) for a in actions]
    return [OverflowMenuElement(action_id=ACTION_MENU, options=[
        Option(text=PlainTextObject(text=labels[a]), value=menu_value(a, paper_id)) for a in actions])]


def card_actions(paper, *, block_id: str | None = None, main: bool = False, save: bool = True,
                 save_in_menu: bool = False, verdict: bool = True, summary: bool = True,
                 share: bool = True, nominate: bool = True) -> ActionsBlock:
    """A paper card's actions, the same on every card: [Save] [👍 For me] [👎 Not for me] [⋯ Summary,
    More like this, Share to channel, Nominate]; each carries the paper id.

    main: the one paper a message is about (the day's paper): its Save is `primary`, the single
    green button; repeated cards (search results, runners-up) have none. save_in_menu: Save goes
    into the menu (a runner-up, whose buttons are its verdicts). A card without buttons shows its
    first menu entry as one. Nominate is dropped again where no club meets (without_nominate).
    """
    buttons: list = []
    menu = [a for a, on in ((ACTION_SUMMARY, summary), (ACTION_SIMILAR, True), (ACTION_SHARE, share),
                            (ACTION_NOMINATE, nominate)) if on]
    if save and save_in_menu:
        menu.insert(0, ACTION_SAVE)
    elif save:
        buttons.append(ButtonElement(text="Save", action_id=ACTION_SAVE, value=paper.id,
                                     style="primary" if main else None))
    if verdict:
        buttons.extend(verdict_buttons(paper))
    if not buttons and menu:
        first = menu.pop(0)
        buttons.append(ButtonElement(text=_labels()[first], action_id=first, value=paper.id))
    return ActionsBlock(elements=[*buttons, *_menu(menu, paper.id)][:MAX_ACTION_ELEMENTS], block_id=block_id)


def after_name(paper) -> str:
    """The headline without a leading "Name: " when the card already shows the short name.

    Derived headlines start with the name ("CoVoGAN: controllable video GANs"); a card that prints
    "CoVoGAN: " itself would otherwise read "CoVoGAN: CoVoGAN: ...".
    """
    name, headline = paper.short_name or "", paper.headline or ""
    if name and headline.lower().startswith(name.lower() + ":"):
        return headline[len(name) + 1:].strip() or headline
    return headline


def _runner_line(paper) -> str:
    """*Name*: headline, or *Name* and the rest when the headline opens with the name itself
    ("*Motion-centric alignment framework* that learns ...", not the name twice)."""
    name, rest = cut_chars(paper.short_name, 80), after_name(paper)
    if name and rest.lower().startswith(name.lower() + " "):
        return f"*{link(paper.url, name)}* {esc(cut_chars(rest[len(name):].strip(), 160))}"
    return f"*{link(paper.url, name)}*: {esc(cut_chars(rest, 160))}"


def _name_line(paper, *, number: int | None = None) -> str:
    """'*1. <url|Name>*  ·  ICLR 2026': the name links to the paper when it has a URL."""
    prefix = f"{number}. " if number else ""
    line = f"*{prefix}{link(paper.url, cut_chars(paper.short_name, 120))}*"
    where = venue(paper)
    if where:
        line += f"  ·  {esc(where)}"
    return line


def hit_blocks(hit, number: int, *, tldr: str | None = None) -> list[Block]:
    """One search result: linked name and venue, the TL;DR (else the headline), why it matched, its card's
    actions."""
    paper = hit.paper
    lines = [_name_line(paper, number=number), esc(cut_sentences(tldr or after_name(paper), 600))]
    why = f"_why:_ {esc(cut_chars(hit.why, 200))}" if getattr(hit, "why", "") else ""
    return [
        section("\n".join(lines), block_id=f"{HIT_BLOCK}{number}-{paper.id}"[:255]),
        context(why, f"id `{esc(paper.id)}`"),
        card_actions(paper, block_id=f"{ACT_BLOCK}{number}-{paper.id}"[:255]),
    ]


def results_blocks(title: str, hits: Sequence, *, note: str | None = None,
                   empty: str = "No papers matched.", footer: str | None = None,
                   tldrs: dict | None = None) -> list[Block]:
    """A header, an optional note, then each hit; never more blocks than a message may hold."""
    blocks: list[Block] = [header(title)]
    if note:
        blocks.append(context(note))
    if not hits:
        blocks.append(section(empty))
    for i, hit in enumerate(hits, start=1):
        part = hit_blocks(hit, i, tldr=(tldrs or {}).get(hit.paper.id))
        if len(blocks) + len(part) + (2 if footer else 0) > MAX_MESSAGE_BLOCKS:
            break
        blocks.extend(part)
    if footer:
        blocks += [DividerBlock(), context(footer)]
    return blocks


def _points_fields(points: dict | None) -> list[MarkdownTextObject]:
    labels = (("problem", "Problem"), ("approach", "Approach"), ("results", "Results"), ("code", "Code"))
    fields = []
    for key, label in labels:
        value = (points or {}).get(key)
        if not value:
            continue
        if isinstance(value, (list, tuple)):
            value = " ".join(str(v) for v in value)
        value = str(value)
        if key == "code" and safe_url(value):
            body = link(value.strip(), cut_chars(re.sub(r"^https?://(www\.)?", "", value.strip()), 60))
        else:
            body = esc(cut_sentences(value, FIELD_TEXT - len(label) - 8))
        fields.append(MarkdownTextObject(text=f"*{label}*\n{body}"))
    return fields


def paper_links(paper, *, own: bool = True) -> str:
    """'paper · code' links for the context line ('' when the paper has none); own=False leaves out
    the paper's own link (a card whose name is the link already)."""
    parts = []
    if paper.url and own:
        parts.append(link(paper.url, "paper"))
    for i, url in enumerate(paper.code_urls[:2]):
        parts.append(link(url, "code" if i == 0 else f"code {i + 1}"))
    return "  ·  ".join(p for p in parts if p)


def summary_blocks(paper, *, tldr: str | None = None, points: dict | None = None,
                   note: str | None = None, show_abstract: bool = True) -> list[Block]:
    """One paper in full: name and headline, TL;DR and key points when known, the abstract."""
    blocks: list[Block] = [header(f"{paper.short_name}: {after_name(paper)}")]
    if note:
        blocks.append(context(note))
    if tldr:
        blocks.append(section(f"*TL;DR* {esc(cut_sentences(tldr, SECTION_TEXT - 20))}"))
    fields = _points_fields(points)
    if fields:
        blocks.append(SectionBlock(fields=fields))
    if show_abstract and paper.abstract:
        label = "*Abstract*\n" if tldr or fields else ""
        blocks.append(section(label + esc(cut_sentences(paper.abstract, ABSTRACT_TEXT))))
    if paper.title and paper.title != paper.headline:
        blocks.append(context(f"_{esc(cut_chars(paper.title, 300))}_"))
    blocks.append(context(esc(venue(paper)), f"id `{esc(paper.id)}`", paper_links(paper)))
    blocks.append(card_actions(paper, summary=False, block_id=f"{ACT_BLOCK}{paper.id}"[:255]))
    return blocks


def shared_blocks(paper, user_id: str, *, tldr: str | None = None) -> list[Block]:
    """The in-channel post of a shared paper, crediting who shared it."""
    text = "\n".join([_name_line(paper), esc(cut_sentences(tldr or after_name(paper), 1200))])
    return [
        context(f":pushpin: shared by <@{esc(user_id)}>"),
        section(text, block_id=f"{SHARED_BLOCK}{paper.id}"[:255]),
        context(f"id `{esc(paper.id)}`", paper_links(paper)),
        card_actions(paper, share=False, block_id=f"{ACT_BLOCK}{paper.id}"[:255]),
    ]


def verdict_blocks(text: str, paper, *, undo: bool) -> list[Block]:
    """The private answer to a verdict button: what was noted, and Undo while there is one."""
    blocks: list[Block] = [section(text)]
    if undo:
        blocks.append(ActionsBlock(elements=[ButtonElement(text="Undo", action_id=ACTION_UNDO_VERDICT,
                                                           value=paper.id)]))
    return blocks


# -- the calibration round (bot/calibrate.py) ------------------------------------------------------
def calibrate_offer(text: str, topic: str, *, typed: str) -> list[Block]:
    """The offer after an interest is added: a line (mrkdwn, escaped) with a button that opens the round
    for `topic`, and how to type it (the console has no buttons)."""
    button = ButtonElement(text="Rate a few papers", action_id=ACTION_CALIBRATE, value=topic[:2000])
    return [SectionBlock(text=MarkdownTextObject(text=cut_mrkdwn(text, SECTION_TEXT)), accessory=button),
            context(f"Or type {code(typed)}.")]


_VERDICT_SAID = {"more": "👍 _For me: noted_", "less": "👎 _Not for me: noted_"}


def calibration_blocks(papers: Sequence, *, title: str, note: str, footer: str,
                       tldrs: dict | None = None, verdicts: dict | None = None) -> list[Block]:
    """A calibration round: a header, what it is for (mrkdwn, escaped), then each paper as a compact
    card (name, venue, TL;DR or headline) with the verdict buttons every card carries; a card the
    member answered (`verdicts`: paper id -> "more" / "less") says so and offers Undo instead."""
    blocks: list[Block] = [header(title), context(note)]
    papers = list(papers)[:(MAX_MESSAGE_BLOCKS - 3) // 2]
    ids = ",".join(p.id for p in papers)
    for n, paper in enumerate(papers, start=1):
        gist = (tldrs or {}).get(paper.id) or after_name(paper)
        said = _VERDICT_SAID.get((verdicts or {}).get(paper.id, ""), "")
        blocks.append(section(f"{_name_line(paper, number=n)}\n{esc(cut_sentences(gist, 300))}"
                              + (f"\n{said}" if said else ""), block_id=f"{CALIB_BLOCK}{n}-{paper.id}"[:255]))
        # Too many long ids for a block id: the card still works, its press answers on its own.
        act = f"{CALIB_ACT_BLOCK}{n}:{ids}" if len(ids) < 240 else f"{CALIB_ACT_BLOCK}{n}-{paper.id}"[:255]
        buttons = ([ButtonElement(text="Undo", action_id=ACTION_UNDO_VERDICT, value=paper.id)] if said
                   else verdict_buttons(paper))
        blocks.append(ActionsBlock(elements=buttons, block_id=act))
    blocks.append(context(footer))
    return blocks


def calibration_ids(block_id: str | None) -> list[str]:
    """The papers of the round a calibration card's buttons belong to ([] for any other block)."""
    block_id = block_id or ""
    if not block_id.startswith(CALIB_ACT_BLOCK) or ":" not in block_id:
        return []
    return [pid for pid in block_id.split(":", 1)[1].split(",") if pid]


def message_blocks(text: str, *, title: str | None = None, footer: str | None = None) -> list[Block]:
    """A short mrkdwn note (already escaped), with an optional header and footer."""
    blocks: list[Block] = [header(title)] if title else []
    blocks.append(section(text))
    if footer:
        blocks.append(context(footer))
    return blocks


def confirm_blocks(text: str, *, title: str, button: str, line: str, typed: str) -> list[Block]:
    """The question a destructive command asks first: what it would do (mrkdwn, escaped), a danger
    button whose Slack confirm dialog asks once more, and how to type it (the console has no buttons).

    `line` is the command to re-run on the click, `typed` its /paper form for people to type.
    """
    dialog = ConfirmObject(title=cut_chars(title, 100), text=cut_mrkdwn(text, 300),
                           confirm=cut_chars(button, 30), deny="Cancel", style="danger")
    return [section(text),
            ActionsBlock(elements=[ButtonElement(text=cut_chars(button, 75), action_id=ACTION_CONFIRM,
                                                 value=line[:2000], style="danger", confirm=dialog)]),
            context(f"Or type {code(typed)}. Nothing changes until you do.")]


def help_blocks(command: str, entries: Iterable[tuple[str, str, str]], *, intro: str | None = None,
                title: str = "paperclub: your reading group's paper finder") -> list[Block]:
    """Help: what the bot does, then each subcommand (usage, help line, example)."""
    blocks: list[Block] = [header(title)]
    if intro:
        blocks.append(section(intro))
    lines = []
    for usage, help_line, example in entries:
        lines.append(f"*`{esc(command)} {esc(usage)}`*\n{esc(help_line)}  e.g. `{esc(command)} {esc(example)}`")
    # Several commands per section keeps long tables well under the block limit.
    blocks += line_sections(lines, sep="\n\n", limit=SECTION_TEXT - 10)
    return blocks[:MAX_MESSAGE_BLOCKS]


def home_view(blocks: list[Block]) -> View:
    """The App Home tab, trimmed to the 100 blocks a view may hold."""
    return View(type="home", blocks=list(blocks)[:MAX_VIEW_BLOCKS])


def fallback_text(text: str) -> str:
    """The top-level `text` of a message (mrkdwn, already escaped), cut to a safe length."""
    return cut_mrkdwn(" ".join((text or "").split()), FALLBACK_TEXT)


# -- the paper of the day ----------------------------------------------------------------------
def explanation(pick_or_choice, *, main: bool = True) -> str:
    """The team-terms reason in mrkdwn (interest text escaped, members as mentions)."""
    choice = getattr(pick_or_choice, "choice", pick_or_choice)
    text = choice.explain(lambda u: "\x00" + u + "\x01", main=main)
    # Escape everything the pick wrote, then turn the placeholders into real mentions.
    text = esc(text)
    while "\x00" in text:
        start = text.index("\x00")
        end = text.index("\x01", start)
        text = text[:start] + mention(text[start + 1:end]) + text[end + 1:]
    return text


def digest_blocks(pick: DailyPick, papers: dict, *, summary=None, command: str = "/paper",
                  previous: str | None = None, preview: str | None = None) -> list[Block]:
    """The channel's daily post, a compact card: the linked name, the TL;DR (else the headline: never
    both), why in words, [Save] and a menu; then the runners-up, each with its verdict buttons, and
    how the last pick went. The key points and the abstract go in the thread (abstract_blocks)."""
    paper = papers[pick.paper_id]
    title = "Exploration day" if pick.exploration else "Paper of the day"
    blocks: list[Block] = [header(f"{title} · {pick.day:%a %-d %b}")]
    if preview:
        blocks.append(context(preview))
    tldr = getattr(summary, "tldr", None)
    blocks.append(section(
        f"*{link(paper.url, cut_chars(paper.short_name, 120))}*  ·  {esc(venue(paper)) or 'paper'}\n"
        f"{esc(cut_sentences(tldr or after_name(paper), 600))}", block_id=f"{DAILY_BLOCK}{paper.id}"[:255]))
    icon = ":compass:" if pick.exploration else ":dart:"
    blocks.append(context(f"{icon} _Why:_ {explanation(pick)}", f"id `{esc(paper.id)}`",
                          paper_links(paper, own=False)))
    blocks.append(card_actions(paper, main=True, share=False, verdict=False,  # its reactions are its verdict
                               block_id=f"{DAILY_ACT_BLOCK}{paper.id}"[:255]))
    if pick.no_interests:
        blocks.append(context(
            f"No interests yet, so I picked for breadth. Tell me what this team reads: "
            f"{code(command + ' interests add <topic>')} or {code(command + ' interests add like <paper>')}."))
    # The runners-up, then an exploration day's paper in its own labelled slot (never the main one).
    runners = [(c, papers[c.paper_id]) for c in pick.shown if c.paper_id in papers]
    if runners:
        blocks.append(DividerBlock())
        blocks.append(context("*Also today*"))
        for i, (choice, p) in enumerate(runners, start=1):
            icon = ":compass: " if choice is pick.also else ""
            blocks.append(section(
                f"{icon}{_runner_line(p)}  "
                f"_({explanation(choice, main=False)})_", block_id=f"{RUNNER_BLOCK}{i}-{p.id}"[:255]))
            blocks.append(card_actions(p, save_in_menu=True, share=False,
                                       block_id=f"{RUNNER_BLOCK}{i}-act-{p.id}"[:255]))
    if previous:
        blocks.append(DividerBlock())
        blocks.append(context(previous))
    return blocks[:MAX_MESSAGE_BLOCKS]


def digest_text(pick: DailyPick, paper) -> str:
    """The notification text of the digest (mrkdwn: the paper's text escaped)."""
    kind = "Exploration day" if pick.exploration else "Paper of the day"
    return esc(f"{kind}: {paper.short_name}: {after_name(paper)}")


def abstract_blocks(paper, *, points: dict | None = None) -> list[Block]:
    """The thread reply under the daily post: the key points when known, the abstract, the full
    title, links."""
    blocks: list[Block] = []
    fields = _points_fields(points)
    if fields:
        blocks.append(SectionBlock(fields=fields))
    blocks.append(section("*Abstract*\n" + esc(cut_sentences(paper.abstract, ABSTRACT_TEXT))))
    extra = []
    if paper.title and paper.title != paper.headline:
        extra.append(f"_{esc(cut_chars(paper.title, 300))}_")
    links = paper_links(paper)
    if links:
        extra.append(links)
    if extra:
        blocks.append(context(*extra))
    return blocks


def empty_blocks(command: str) -> list[Block]:
    """The one notice a channel gets when every paper has been shown there."""
    return message_blocks(
        "I have shown this channel every paper in the library, so there is no paper of the day. "
        "Add more abstracts with `paperclub ingest FILE`, and the next post picks up from there.",
        footer=f"{code(command + ' schedule off')} pauses the daily post.")


# -- reading lists -------------------------------------------------------------------------------
def saved_blocks(items: list[tuple], limit: int, day: Callable[[float | None], str], *,
                 first: int = 1) -> list[Block]:
    """Numbered reading-list entries (paper, saved row), from number `first`: name, headline, when
    and how, buttons."""
    blocks: list[Block] = []
    for n, (paper, row) in enumerate(items[:limit], start=first):
        how = "👀" if row["source"] == "eyes" else "Save"
        blocks.append(section(
            f"{n}. *{esc(cut_chars(paper.short_name, 80))}*  ·  {esc(venue(paper)) or 'paper'}\n"
            f"{esc(cut_chars(after_name(paper), 240))}", block_id=f"{SAVED_BLOCK}{n}-{paper.id}"[:255]))
        blocks.append(context(f"saved {day(row['saved_at'])} ({how})", f"id `{esc(paper.id)}`",
                              paper_links(paper)))
        blocks.append(card_actions(paper, share=False, block_id=f"{SAVED_BLOCK}act-{n}-{paper.id}"[:255],
                                   save=False, verdict=False))  # on the list already
    return blocks


def home_saved_block(paper) -> SectionBlock:
    """One reading-list entry in App Home: name and headline."""
    return section(f"*{esc(cut_chars(paper.short_name, 80))}*: {esc(cut_chars(after_name(paper), 200))}",
                   block_id=f"{HOME_SAVED_BLOCK}{paper.id}"[:255])


# -- topic overviews --------------------------------------------------------------------------------
def overview_blocks(ov) -> list[Block]:
    """Header, what the group shares, then each theme with its papers' TL;DRs."""
    out: list[Block] = [header(f"Overview: {ov.topic}")]
    if ov.common:
        out.append(context(esc(ov.common)))
    for theme in ov.themes:
        out.append(DividerBlock())
        out.append(section(f"*{esc(theme.name)}*"))
        for paper, summary in theme.papers:
            tldr = getattr(summary, "tldr", None) or paper.headline
            where = venue(paper)
            line = f"• *{esc(paper.short_name)}*" + (f" ({esc(where)})" if where else "")
            out.append(section(f"{line}: {esc(cut_sentences(tldr, 500))}\n_id_ `{esc(paper.id)}`"))
    return out[:MAX_MESSAGE_BLOCKS]


# -- link unfurls (bot/unfurl.py) ------------------------------------------------------------------
def unfurl_blocks(paper, *, tldr: str | None = None) -> list[Block]:
    """The compact card under a pasted arXiv/OpenReview link: name, TL;DR, the card's actions (no Share:
    the link is in the channel already)."""
    text = "\n".join([_name_line(paper), esc(cut_sentences(tldr or paper.headline, 600))])
    return [section(text), context(f"id `{esc(paper.id)}`", paper_links(paper)),
            card_actions(paper, share=False, block_id=f"{ACT_BLOCK}{paper.id}"[:255])]


# -- the reading group (bot/club/) ------------------------------------------------------------
ACTION_NOMINATE = "club_nominate"  # value: paper id; puts it on the next session's list
ACTION_CLUB_SETUP = "club_setup"  # opens the setup modal (value: channel)
ACTION_VOTE = "club_vote"  # value: "<session date>|<paper id>"
ACTION_CLEAR_VOTES = "club_clear_votes"  # value: session date
ACTION_SWAP_ACCEPT = "club_swap_accept"  # value: "<session date>|<from>|<to>"
ACTION_SWAP_DECLINE = "club_swap_decline"
ACTION_CLUB_CHOOSE = "club_choose"  # value: "<session date>|<paper id>"; only the session's presenter may press it
CLUB_SETUP_VIEW = "club_setup_view"  # callback id of the setup modal (private_metadata: sealed channel)
CLUB_SETUP_FIELDS = ("weekday", "time", "tz", "cadence", "lead", "cutoff", "mode")  # block ids = form fields
AGENDA_BLOCK = "club-agenda-"  # club-agenda-<n>-<paper id>: a candidate on the agenda


def without_nominate(blocks: list[Block]) -> list[Block]:
    """The same blocks minus Nominate (a button or a menu option): a card in a channel without a
    reading group. A menu left with one option becomes that option's button."""
    for block in blocks:
        if not isinstance(block, ActionsBlock):
            continue
        elements = []
        for e in block.elements:
            if isinstance(e, OverflowMenuElement) and e.action_id == ACTION_MENU:
                chosen = [menu_choice(o.value) for o in e.options]
                kept = [a for a, _ in chosen if a and a != ACTION_NOMINATE]
                if len(kept) == len(chosen) or not chosen:
                    elements.append(e)
                elif kept:
                    elements.extend(_menu(kept, chosen[0][1]))
            elif getattr(e, "action_id", None) != ACTION_NOMINATE:
                elements.append(e)
        block.elements = elements
    return [b for b in blocks if not (isinstance(b, ActionsBlock) and not b.elements)]


def club_status_blocks(lines: Sequence[str], *, setup_channel: str | None, footer: str) -> list[Block]:
    """/paper club: the next session's facts (already escaped) and, for admins, the Set up button."""
    blocks: list[Block] = [header("Reading group"), section("\n".join(lines))]
    if setup_channel:
        blocks.append(ActionsBlock(elements=[ButtonElement(text="Set up the club", action_id=ACTION_CLUB_SETUP,
                                                           value=setup_channel, style="primary")]))
    blocks.append(context(footer))
    return blocks


def _option(text: str, value: str) -> dict:
    return {"text": {"type": "plain_text", "text": text}, "value": value}


def club_setup_view(metadata: str, vals: dict[str, str]) -> dict:
    """The setup modal (views.open): weekday, time, zone, cadence, lead times, vote or presenter;
    `metadata` is its private_metadata (the sealed channel and opener, bot.club.commands._seal),
    `vals` its fields as `club setup` starts from them too (store.club.setup_form)."""
    days = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]

    def select(block_id: str, label: str, options: list[dict], initial: str) -> dict:
        chosen = next((o for o in options if o["value"] == initial), options[0])
        return {"type": "input", "block_id": block_id, "label": {"type": "plain_text", "text": label},
                "element": {"type": "static_select", "action_id": "value", "options": options,
                            "initial_option": chosen}}

    def number(block_id: str, label: str, initial: int) -> dict:
        return {"type": "input", "block_id": block_id, "label": {"type": "plain_text", "text": label},
                "element": {"type": "number_input", "action_id": "value", "is_decimal_allowed": False,
                            "min_value": "1", "max_value": "312", "initial_value": str(initial)}}

    return {
        "type": "modal", "callback_id": CLUB_SETUP_VIEW, "private_metadata": metadata[:3000],
        "title": {"type": "plain_text", "text": "Reading group"},
        "submit": {"type": "plain_text", "text": "Save"}, "close": {"type": "plain_text", "text": "Cancel"},
        "blocks": [
            select("weekday", "Weekday", [_option(d, str(i)) for i, d in enumerate(days)],
                   vals["weekday"]),
            {"type": "input", "block_id": "time", "label": {"type": "plain_text", "text": "Time"},
             "element": {"type": "timepicker", "action_id": "value",
                         "initial_time": vals["time"]}},
            {"type": "input", "block_id": "tz", "label": {"type": "plain_text", "text": "Time zone (IANA)"},
             "element": {"type": "plain_text_input", "action_id": "value",
                         "initial_value": vals["tz"]}},
            select("cadence", "Cadence", [_option("Weekly", "weekly"), _option("Fortnightly", "fortnightly")],
                   vals["cadence"]),
            number("lead", "Nominations close (hours before)", int(vals["lead"])),
            number("cutoff", "Votes close (hours before)", int(vals["cutoff"])),
            select("mode", "Who chooses the paper",
                   [_option("Members vote", "vote"), _option("The presenter chooses", "presenter")],
                   vals["mode"]),
        ],
    }


def notice_view(title: str, text: str) -> dict:
    """A modal that only says something (a view_submission answered with response_action=update)."""
    return {"type": "modal", "title": {"type": "plain_text", "text": title[:24]},
            "close": {"type": "plain_text", "text": "Close"},
            "blocks": [section(esc(text)).to_dict()]}


def agenda_blocks(day_label: str, candidates: Sequence[tuple], *, session: str, note: str | None,
                  cutoff_label: str, closed: bool = False, chooser: str | None = None,
                  chosen: str | None = None, read: str | None = None) -> list[Block]:
    """The agenda: each candidate (paper, nominator, votes) with a Vote button; counts update in place.

    In a club where the presenter chooses, `chooser` is that presenter: each candidate has a Choose
    button instead (only they may press it) and `chosen` marks their choice so far; `read` marks the
    paper the session reads though nobody chose it (closed: the only nomination, or a tie-break); in a
    voting club, `read` marks the vote's winner once closed."""
    blocks: list[Block] = [header(f"Reading group, {day_label}: what shall we read?")]
    if chooser:
        blocks.append(section(f"{mention(chooser)} presents this session." if closed else
                              f"{mention(chooser)} presents this session and chooses the paper by "
                              f"{esc(cutoff_label)}."))
    if note:
        blocks.append(context(note))
    # Every candidate gets a section while the message has room; the rest are named after them
    # (open: in menus that vote or choose the same way), and the closing blocks always stay.
    closing = 1 if chooser or closed else 2
    room = MAX_MESSAGE_BLOCKS - len(blocks) - closing
    rest: Sequence[tuple] = ()
    if len(candidates) > room:
        menus = 0 if closed else 1  # blocks of menus after the "more" line, 100 options each
        while not closed and len(candidates) - (room - 1 - menus) > menus * MAX_SELECT_OPTIONS:
            menus += 1
        cut = room - 1 - menus
        candidates, rest = candidates[:cut], candidates[cut:]
    for n, (paper, nominator, votes) in enumerate(candidates, start=1):
        by = f"nominated by {mention(nominator)}" if nominator else ""
        count = "" if chooser else f"*{votes}* vote{'s' if votes != 1 else ''}"
        tail = " · ".join(x for x in (count, _choice_mark(paper.id, chosen, read), by) if x)
        text = f"{_name_line(paper, number=n)}\n{esc(cut_sentences(paper.headline, 300))}"
        if tail:
            text += f"\n{tail}"
        sec = section(text, block_id=f"{AGENDA_BLOCK}{n}-{paper.id}"[:255])
        if not closed:
            sec.accessory = (ButtonElement(text="Choose", action_id=ACTION_CLUB_CHOOSE,
                                           value=f"{session}|{paper.id}"[:2000]) if chooser else
                             ButtonElement(text="Vote", action_id=ACTION_VOTE, value=f"{session}|{paper.id}"[:2000]))
        blocks.append(sec)
    if rest:
        first = len(candidates) + 1
        how = "" if closed else (" in the menu below" if len(rest) <= MAX_SELECT_OPTIONS else " in the menus below")
        marked: list[str] = []  # the session's paper leads the line, so a long one never hides it
        names: list[str] = []
        for i, (p, _, v) in enumerate(rest):
            mark = _choice_mark(p.id, chosen, read)
            inside = " · ".join(x for x in ("" if chooser else str(v), mark) if x)
            tail = f" ({inside})" if inside else ""
            (marked if mark else names).append(f"{first + i}. {esc(cut_chars(p.short_name, 60))}{tail}")
        names = marked + names
        blocks.append(context(f"*{len(rest)} more nomination{'s' if len(rest) != 1 else ''}*{how}: "
                              + fit_items(names, CONTEXT_TEXT - 80)))
        if not closed:
            action = ACTION_CLUB_CHOOSE if chooser else ACTION_VOTE
            for at in range(0, len(rest), MAX_SELECT_OPTIONS):
                options = [Option(text=cut_chars(f"{first + at + i}. {p.short_name}", 75),
                                  value=f"{session}|{p.id}"[:150])
                           for i, (p, _, _) in enumerate(rest[at:at + MAX_SELECT_OPTIONS])]
                blocks.append(ActionsBlock(block_id=f"{AGENDA_BLOCK}more-{at}", elements=[StaticSelectElement(
                    placeholder="Choose another nomination" if chooser else "Vote for another nomination",
                    action_id=action, options=options)]))
    if chooser:
        blocks.append(context("The choice is closed." if closed else
                              "Only the presenter's click counts; everyone else can still nominate until then."))
    elif not closed:
        blocks.append(ActionsBlock(elements=[ButtonElement(text="Clear my votes", action_id=ACTION_CLEAR_VOTES,
                                                           value=session)]))
        blocks.append(context(f"Approval voting: up to 3 papers each, changeable until {esc(cutoff_label)}."))
    else:
        blocks.append(context("Voting has closed."))
    return blocks[:MAX_MESSAGE_BLOCKS]


def _choice_mark(paper_id: str, chosen: str | None, read: str | None) -> str:
    """How the agenda marks the paper the session reads: its presenter's choice, or read though nobody chose it."""
    return (":white_check_mark: *chosen*" if paper_id == chosen else
            ":white_check_mark: *we read this*" if paper_id == read else "")


def cancelled_agenda_blocks(day_label: str, next_label: str | None) -> list[Block]:
    """The agenda of a session that was skipped: no buttons, and where its nominations went."""
    where = f"the session on {esc(next_label)}" if next_label else "the next session"
    return [header(f"Reading group, {day_label}: cancelled"),
            section(f"This session is cancelled. Its nominations carried over to {where}: nominate and vote "
                    "there.")]


def swap_blocks(text: str, value: str) -> list[Block]:
    """A swap offer (already escaped text) with Accept and Decline for the member it names."""
    return [section(text), ActionsBlock(elements=[
        ButtonElement(text="Accept", action_id=ACTION_SWAP_ACCEPT, value=value, style="primary"),
        ButtonElement(text="Decline", action_id=ACTION_SWAP_DECLINE, value=value)])]


def club_note_blocks(title: str, text: str, *, footer: str | None = None) -> list[Block]:
    """A club announcement (winner, reminder): a header, escaped mrkdwn, an optional footer."""
    return message_blocks(text, title=cut_chars(title, HEADER_TEXT - 5), footer=footer)


def session_thread_blocks(paper, *, presenter: str | None, tldr: str | None, points: dict | None,
                          questions: Sequence[str]) -> list[Block]:
    """The session's opening post: the card with TL;DR and key points, the presenter, three questions."""
    blocks: list[Block] = [header(f"Reading group: {paper.short_name}")]
    blocks.append(section(f"{_name_line(paper)}\n{esc(cut_sentences(paper.headline, 300))}"))
    if tldr:
        blocks.append(section(f"*TL;DR* {esc(cut_sentences(tldr, SECTION_TEXT - 20))}"))
    fields = _points_fields(points)
    if fields:
        blocks.append(SectionBlock(fields=fields))
    blocks.append(section(f"*Presenter:* {mention(presenter) if presenter else '_nobody this time_'}"))
    if questions:
        blocks.append(section("*To discuss*\n" + "\n".join(f"{i}. {esc(q)}" for i, q in enumerate(questions, 1))))
    blocks.append(context("Reply in this thread; a recap follows after the session."))
    return blocks


OUTLINE = (("problem", "Problem", "What gap or question does the paper take on, and why does it matter?"),
           ("approach", "Approach", "What do the authors do, and what is new about it?"),
           ("results", "Results", "What do the experiments show, against which baselines?"))


def presenter_dm_blocks(paper, *, channel: str, when: str, tldr: str | None, points: dict | None,
                        questions: Sequence[str]) -> list[Block]:
    """The presenter's DM: the session, the paper's summary, and a suggested outline
    (problem, approach, results from the key points; questions for the group)."""
    pts = points or {}
    blocks: list[Block] = [header(f"You present {paper.short_name}"),
                           section(f"You present at the reading group in <#{esc(channel)}> on {esc(when)}.\n"
                                   f"{_name_line(paper)}\n{esc(cut_sentences(after_name(paper), 300))}"),
                           context(f"id `{esc(paper.id)}`", paper_links(paper))]
    if tldr:
        blocks.append(section(f"*TL;DR* {esc(cut_sentences(tldr, SECTION_TEXT - 20))}"))
    lines = ["*A suggested outline*"]
    for n, (key, label, prompt) in enumerate(OUTLINE, 1):
        lines.append(f"{n}. *{label}*: {esc(cut_chars(pts[key], 400)) if pts.get(key) else '_' + prompt + '_'}")
    lines.append(f"{len(OUTLINE) + 1}. *Questions* for the group:")
    lines += [f"   • {esc(q)}" for q in questions] or ["   • _What would you ask the authors?_"]
    blocks.append(section("\n".join(lines)))
    blocks.append(context("The group sees the TL;DR, key points and these questions in the session thread."))
    return blocks


def recap_blocks(recap, *, paper_name: str) -> list[Block]:
    """The recap in the thread: who took part, the points most reacted to, open questions."""
    people = ", ".join(mention(u) for u in recap.participants) or "_nobody replied_"
    lines = [f"*Recap of {esc(paper_name)}*", f"*Took part:* {people}"]
    if recap.points:
        lines.append("*Points most reacted to:*")
        lines += [f"• {mention(u)}: {esc(cut_chars(t, 200))} ({n})" for u, t, n in recap.points]
    if recap.open_questions:
        lines.append("*Open questions:*")
        lines += [f"• {mention(u)}: {esc(cut_chars(t, 200))}" for u, t in recap.open_questions]
    return line_sections(lines)


def home_club_blocks(channel: str, lines: Sequence[str]) -> list[Block]:
    """A club in App Home: the next session, your votes, your next turn (lines already escaped)."""
    return [header("Reading group"), section(f"<#{esc(channel)}>\n" + "\n".join(lines))]
