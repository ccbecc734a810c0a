"""`paperclub console`: type `/paper ...` lines locally and read the replies in the terminal.

It is wired exactly as `paperclub run` (bot/deps/build.py: the same command
table, feedback weights and clock), runs the same `run_command` as Slack in a
channel of its own (CONSOLE_CHANNEL, so schedule, interests and today work as
they do in a Slack channel), and renders the same Block Kit, so what you see
here is what the channel would see. Works with piped stdin too.
"""
from __future__ import annotations

import logging
import re
import sys
from contextlib import nullcontext
from typing import TYPE_CHECKING, Iterable, Iterator, TextIO

from rich.console import Console
from rich.emoji import Emoji
from rich.rule import Rule
from rich.text import Text

from . import blocks as bk
from .club.posts import SETUP_USAGE
from .commands import CONSOLE_CHANNEL, Reply, run_command

if TYPE_CHECKING:
    from store import Store
    from store.embed import Embedder

    from .config import Settings
    from .deps import Deps

log = logging.getLogger(__name__)

CONSOLE_USER = "you"  # never a Slack member id (those start with U or W)
# Buttons become the command a person types here instead of clicking.
BUTTON_COMMANDS = {bk.ACTION_SUMMARY: "summary", bk.ACTION_SIMILAR: "similar", bk.ACTION_SHARE: "share",
                   bk.ACTION_SAVE: "save", bk.ACTION_NOMINATE: "nominate", bk.ACTION_CALIBRATE: "calibrate",
                   bk.ACTION_MORE: "for-me", bk.ACTION_LESS: "not-for-me", bk.ACTION_UNDO_VERDICT: "take-back",
                   bk.ACTION_CONFIRM: ""}  # a confirmation's value is the whole command line
BUTTON_LINES = {bk.ACTION_CLUB_SETUP: SETUP_USAGE}  # buttons that open a form: its typed twin, whatever their value
QUIT = {"quit", "exit", ":q", "q"}

_MRKDWN = re.compile(
    r"<(?P<target>[^<>|]+)(?:\|(?P<label>[^<>]*))?>"  # links, <@U1>, <#C1|name>
    r"|`(?P<code>[^`\n]+)`"
    r"|(?<![\w*])\*(?P<bold>[^*\n]+)\*(?![\w*])"
    r"|(?<![\w_])_(?P<italic>[^_\n]+)_(?![\w_])"
)


def unescape(text: str) -> str:
    """Slack entities back to characters, and :shortcodes: to emoji where rich knows them."""
    return Emoji.replace(text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&"))


def _target(target: str, label: str | None) -> Text:
    if target.startswith("@"):
        who = target[1:]
        return Text("@" + (label or ("you" if who == CONSOLE_USER else who)), style="bold cyan")
    if target.startswith("#"):
        return Text("#" + (label or target[1:]), style="cyan")
    if target.startswith("!"):
        return Text("@" + (label or target[1:].split("^")[0]), style="bold")
    url = unescape(target)
    if label and unescape(label) != url:
        return Text(f"{unescape(label)} ({url})", style="blue")
    return Text(url, style="blue underline")


def mrkdwn(text: str, style: str = "") -> Text:
    """Slack mrkdwn -> rich Text (bold, italic, code, links, mentions; entities unescaped)."""
    out = Text(style=style)
    pos = 0
    for m in _MRKDWN.finditer(text):
        out.append(unescape(text[pos : m.start()]))
        if m.group("target") is not None:
            out.append_text(_target(m.group("target"), m.group("label")))
        elif m.group("code") is not None:
            out.append(unescape(m.group("code")), style="bold magenta")
        elif m.group("bold") is not None:
            out.append_text(mrkdwn(m.group("bold"), "bold"))
        else:
            out.append_text(mrkdwn(m.group("italic"), "italic"))
        pos = m.end()
    out.append(unescape(text[pos:]))
    return out


def _text_of(obj: dict | None) -> str:
    return (obj or {}).get("text") or ""


def render_block(block: dict) -> Iterator:
    """One Block Kit dict -> rich renderables."""
    kind = block.get("type")
    if kind == "header":
        yield Text(_text_of(block.get("text")), style="bold underline")
    elif kind == "section":
        if str(block.get("block_id", "")).startswith((bk.HIT_BLOCK, bk.SHARED_BLOCK)):
            yield Text()  # a gap between results, as Slack leaves one
        if block.get("text"):
            yield mrkdwn(_text_of(block["text"]))
        for f in block.get("fields") or []:
            yield mrkdwn(_text_of(f))
    elif kind == "context":
        line = Text(style="dim")
        for i, el in enumerate(block.get("elements") or []):
            if i:
                line.append("  ")
            line.append_text(mrkdwn(_text_of(el)))
        yield line
    elif kind == "divider":
        yield Rule(style="dim")
    elif kind == "actions":
        line = Text()
        hints = []
        for el in block.get("elements") or []:
            if el.get("type") == "overflow":  # a card's menu (⋯): its entries, each a typed command here
                options = el.get("options") or []
                line.append(f"[⋯ {' · '.join(_text_of(o.get('text')) for o in options)}] ", style="green")
                clicks = [bk.menu_choice(o.get("value")) for o in options]
            else:
                line.append(f"[{_text_of(el.get('text'))}] ", style="bold green")
                clicks = [(el.get("action_id"), el.get("value"))]
            for action_id, value in clicks:
                cmd = BUTTON_COMMANDS.get(action_id)
                if cmd is not None and value:
                    hints.append((cmd, value))
                elif action_id in BUTTON_LINES:
                    hints.append((BUTTON_LINES[action_id], ""))
        if hints:
            line.append("→ type: " + typed_hint(hints), style="dim")
        yield line
    else:
        yield Text(_text_of(block.get("text")) or f"({kind} block)")


def typed_hint(hints: list[tuple[str, str]]) -> str:
    """What to type for a row of buttons ((command, value) each): one whole line and the other commands
    when they all take the same paper ("save 6dwp7x (or for-me, summary, similar)": short enough not to
    split a command from its paper at 80 columns), else each whole line."""
    (first, value), *rest = hints
    if first and rest and all(cmd and v == value for cmd, v in rest):
        return f"{first} {value} (or {', '.join(cmd for cmd, _ in rest)})"
    return " | ".join(f"{cmd} {v}".strip() for cmd, v in hints)


def render_reply(console: Console, reply: Reply) -> None:
    """Print a reply as Slack would show it, one block after another."""
    message = reply.to_message()
    if reply.in_channel:
        console.print(Text("(posted to the channel for everyone)", style="bold yellow"))
    for block in message["blocks"] or []:
        for item in render_block(block):
            console.print(item)
    if not message["blocks"]:
        console.print(mrkdwn(message["text"]))
    console.print()


def strip_command(line: str, command: str) -> str:
    """'/paper search x' and 'search x' mean the same here."""
    line = line.strip()
    for prefix in (command, "/" + command.lstrip("/"), command.lstrip("/")):
        if prefix and (line == prefix or line.startswith(prefix + " ")):
            return line[len(prefix) :].strip()
    return line


def answer(deps: Deps, console: Console, line: str) -> None:
    """Run one line through the same handlers as Slack and print the reply."""
    try:
        reply = run_command(deps, CONSOLE_USER, strip_command(line, deps.command), channel_id=CONSOLE_CHANNEL)
    except Exception as e:  # as in Slack: log it, apologise, keep the prompt alive
        log.error("command failed: %s: %s", type(e).__name__, e, exc_info=True)
        console.print(Text("Sorry, something went wrong answering that (see the log).", style="red"))
        return
    render_reply(console, reply)


def _lines(stdin: TextIO, console: Console, prompt: str, interactive: bool) -> Iterable[str]:
    if not interactive:
        yield from stdin
        return
    try:
        import readline  # noqa: F401  (line editing and history for input())
    except ImportError:
        pass
    while True:
        try:
            yield console.input(prompt)
        except EOFError:
            console.print()
            return


def as_operator(settings: Settings) -> Settings:
    """The console's settings: its one user is whoever runs it on this machine, who holds the
    database and .env already, so PAPERCLUB_ADMINS (which keeps Slack members from changing what
    only admins may) counts them among the admins. Only this process's settings change."""
    if not settings.admin_ids or CONSOLE_USER in settings.admin_ids:
        return settings
    return settings.model_copy(update={"admins": f"{settings.admins} {CONSOLE_USER}"})


def in_local_zone(settings: Settings, zone: str | None) -> Settings:
    """The console's settings in this machine's `zone` (config.local_timezone) unless PAPERCLUB_TIMEZONE
    is set: "9am" typed on a laptop is its own 9am. The bot's default stays the setting (UTC)."""
    if "timezone" in settings.model_fields_set or not zone:
        return settings
    return settings.model_copy(update={"timezone": zone})


def _quiet_info_lines() -> list[tuple[logging.Handler, int]]:
    """A person reads the replies here: the INFO line a server logs for each command and verdict would
    come between them, so the terminal's log handlers show warnings only while the console runs
    (LOG_LEVEL=DEBUG keeps everything). Each quieted handler with its level, to put back."""
    if logging.getLogger().level <= logging.DEBUG:
        return []
    quieted = [(h, h.level) for h in logging.getLogger().handlers
               if type(h) is logging.StreamHandler and h.level < logging.WARNING]  # not a test's capture
    for handler, _ in quieted:
        handler.setLevel(logging.WARNING)
    return quieted


def run_console(settings: Settings, store: Store, embedder: Embedder, *, stdin: TextIO | None = None,
                out: TextIO | None = None) -> None:
    """The local prompt: the same /paper commands as Slack, rendered with rich."""
    from store.search import Searcher

    from .config import local_timezone
    from .deps.build import build_deps
    from .runner import utc_now

    stdin = stdin or sys.stdin
    console = Console(file=out, highlight=False, soft_wrap=False)
    interactive = stdin.isatty()
    searcher = Searcher(store, embedder)
    settings = in_local_zone(as_operator(settings), local_timezone())
    deps = build_deps(settings, store, searcher, clock=utc_now)  # no Slack client: no scheduler
    prepare = getattr(embedder, "prepare_queries", None)
    if prepare is not None:  # a short session must not leave the export half done: finish it first
        exports = interactive and embedder.will_export_queries()  # a cached graph just opens: say nothing
        with console.status("Preparing the fast query encoder (once, about a minute)…") if exports else nullcontext():
            prepare(background=False)
    if interactive:
        with console.status("Loading the model and the papers…"):
            searcher.warm()
        console.print(Text.assemble(
            ("paperclub console", "bold"),
            f"  {store.count_papers():,} papers. Type what you would after {deps.command} "
            f"(try 'help' or 'search video grounding'); Ctrl-D quits. Nothing is posted on a schedule "
            f"here: the paper of the day and the reading group's posts go out once the bot runs in Slack "
            f"('today' shows what would be posted)."))
    else:
        searcher.warm()
    prompt = f"[bold cyan]{deps.command}[/] "
    quieted = _quiet_info_lines()
    try:
        for line in _lines(stdin, console, prompt, interactive):
            if line.strip().lower() in QUIT:
                break
            if line.strip():
                answer(deps, console, line)
    except KeyboardInterrupt:
        console.print()
    finally:
        for handler, level in quieted:
            handler.setLevel(level)
