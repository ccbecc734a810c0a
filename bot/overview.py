"""/paper overview <topic>: the most relevant papers grouped into named themes."""
from __future__ import annotations

from typing import TYPE_CHECKING

from store.overview import topic_overview

from . import blocks as bk
from .blocks import code
from .commands import ECHO_CHARS, Call, Reply, Subcommand, has_words, problem_reply

if TYPE_CHECKING:
    from .deps import Deps


def overview_text(ov) -> str:
    """The notification text: each theme and its papers' names."""
    names = "; ".join(f"{t.name}: " + ", ".join(p.short_name for p, _ in t.papers) for t in ov.themes)
    return bk.esc(f"Overview of {ov.topic}: {names}")


def handle_overview(deps: Deps, call: Call) -> Reply:
    if not has_words(call.args):
        return problem_reply(deps, "Which topic should I give an overview of?",
                             hint=f"For example {code(deps.command + ' overview video LLMs')}.")
    ov = topic_overview(deps.store, deps.searcher, call.args, llm=deps.llm, now=deps.clock().timestamp())
    if not ov.themes:
        return problem_reply(deps, f"I found no papers about {bk.cut_chars(call.args, ECHO_CHARS)}.")
    return Reply(overview_text(ov), bk.overview_blocks(ov))


SUBCOMMANDS = (
    Subcommand("overview", handle_overview, usage="overview <topic>", example="overview video LLMs",
               help="The most relevant papers on a topic, grouped into named themes with TL;DRs.",
               aliases=("topic", "survey")),
)
