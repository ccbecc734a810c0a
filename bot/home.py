"""App Home: the member's own sections first (reading list, reactions, reading groups), how to use it last."""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from slack_sdk.models.blocks import Block, DividerBlock

from store import feedback as fb

from . import blocks as bk
from .blocks import code
from .reading import day_label, how_to_save, zone_of

if TYPE_CHECKING:
    from slack_bolt import App

    from .deps import Deps

log = logging.getLogger(__name__)

HOME_SAVED, HOME_REACTIONS = 8, 5


def register(app: App, deps: Deps) -> None:
    """Publish the Home tab whenever a member opens it."""
    @app.event("app_home_opened")
    def handle_app_home_opened(event, client):
        if event.get("tab", "home") != "home":
            return
        user = event.get("user", "")
        deps.later(lambda: client.views_publish(user_id=user, view=bk.home_view(home_blocks(deps, user))))


def home_blocks(deps: Deps, user_id: str) -> list[Block]:
    """A line on what the bot is, then what is the member's own (`deps.home_sections`: their
    reading list, reactions, reading groups), and how to use it last."""
    cmd = deps.command
    stats = ", ".join(f"{c or 'uncategorised'} ({n})" for c, _, n in deps.store.collections()[:8])
    entries = [(s.usage, s.help, s.example) for s in deps.commands.visible()]
    blocks: list[Block] = [
        bk.header("paperclub: the reading group's paper finder"),
        bk.context(f"{deps.store.count_papers():,} papers", bk.esc(stats)),
    ]
    for section in deps.home_sections:
        try:
            extra = section(deps, user_id)
        except Exception:  # one broken section must not blank the whole Home tab
            log.warning("home section %s failed", getattr(section, "__name__", section), exc_info=True)
            continue
        if extra:
            blocks += [*extra, DividerBlock()]
    blocks.append(bk.section("Find papers by meaning or keyword, read a short summary, see related work, "
                             "and share the good ones with the channel. Type "
                             f"{code(cmd + ' search <words>')} in any channel; only you see the answer "
                             "until you press *Share to channel*."))
    blocks += bk.help_blocks(cmd, entries, title="How to use")
    return blocks[: bk.MAX_VIEW_BLOCKS]


def home_reading(deps: Deps, user_id: str) -> list[Block]:
    """The member's reading list and their latest reactions (their days, in their own zone)."""
    zone = zone_of(deps, user=user_id)
    items = fb.reading_list(deps.store, user_id)
    blocks: list[Block] = [bk.header(f"Your reading list ({len(items)})" if items else "Your reading list")]
    if items:
        for paper, _row in items[:HOME_SAVED]:
            blocks.append(bk.home_saved_block(paper))
        more = f"{len(items) - HOME_SAVED} more: " if len(items) > HOME_SAVED else ""
        blocks.append(bk.context(f"{more}{code(deps.command + ' saved')} lists them all with summaries."))
    else:
        blocks.append(bk.section(f"Nothing saved yet. {how_to_save(deps)}"))
    recent = fb.recent_reactions(deps.store, user_id, HOME_REACTIONS)
    if recent:
        papers = {p.id: p for p in deps.store.get_papers([r["paper_id"] for r in recent])}
        lines = []
        for r in recent:
            paper = papers.get(r["paper_id"])
            name = bk.esc(paper.short_name if paper else r["paper_id"])
            # A public or private channel links there; a DM, the console or no channel at all (a press
            # Slack named none for) has nowhere to link: `"" in "CG"` once gave "in <#>".
            where = f" in <#{r['channel']}>" if (r["channel"] or "").startswith(("C", "G")) else ""
            lines.append(f"{fb.emoji_text(r['base'])} on *{name}*{where}, {day_label(r['event_ts'], zone)}")
        blocks += [DividerBlock(), bk.header("Your recent reactions"), bk.section("\n".join(lines)),
                   bk.context(f"They steer the paper of the day. {code(deps.command + ' forget-me')} deletes them.")]
    return blocks


def home_club(deps: Deps, user_id: str) -> list[Block]:
    """Each reading group the member is in (or voted in): the next session, its presenter, their votes,
    when they next present."""
    from store import club as cl

    blocks: list[Block] = []
    now = deps.clock()
    for row in deps.store.clubs():
        channel = row["channel"]
        out = cl.member_outlook(deps.store, channel, user_id, now)
        if out is None or not (out["member"] or out["votes"]):
            continue
        start = out["start"]
        papers = {p.id: p for p in deps.store.get_papers([*out["votes"], *([out["paper_id"]] if out["paper_id"] else [])])}
        name = lambda pid: bk.esc(papers[pid].short_name) if pid in papers else bk.esc(pid)  # noqa: E731, B023
        lines = [f"*Next session:* {start:%a %-d %b} at {start:%H:%M} {bk.esc(str(start.tzinfo))}",
                 f"*Paper:* {name(out['paper_id']) if out['paper_id'] else '_not chosen yet_'}",
                 f"*Presenter:* {bk.mention(out['presenter']) if out['presenter'] else '_not chosen yet_'}",
                 f"*Your votes:* {', '.join(name(p) for p in out['votes']) or '_none yet_'}"]
        if not out["member"]:
            lines.append(f"*You next present:* _you are not in the rotation_ "
                         f"({code(deps.command + ' club join')} in <#{bk.esc(channel)}>)")
        elif out["next_turn"] == start.date():
            lines.append("*You next present:* _this session_")
        elif out["next_turn"]:
            lines.append(f"*You next present:* {out['next_turn']:%a %-d %b}")
        else:
            lines.append("*You next present:* _not in the next few sessions_")
        blocks += bk.home_club_blocks(channel, lines)
    return blocks


SECTIONS = (home_reading, home_club)  # the sections every Home tab shows, in order
