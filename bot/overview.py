"""/paper overview <topic>: the most relevant papers grouped into named themes."""
from __future__ import annotations

import time

from slack_sdk.models.blocks import DividerBlock

from store.overview import topic_overview

from . import blocks as bk
from .commands import Call, Deps, Reply, code, has_words, problem_reply, subcommand


def overview_blocks(ov) -> list:
    """Header, what the group shares, then each theme with its papers' TL;DRs."""
    out = [bk.header(f"Overview: {ov.topic}")]
    if ov.common:
        out.append(bk.context(bk.esc(ov.common)))
    for theme in ov.themes:
        out.append(DividerBlock())
        out.append(bk.section(f"*{bk.esc(theme.name)}*"))
        for paper, summary in theme.papers:
            tldr = getattr(summary, "tldr", None) or paper.headline
            where = bk.venue(paper)
            line = f"• *{bk.esc(paper.short_name)}*" + (f" ({bk.esc(where)})" if where else "")
            out.append(bk.section(f"{line}: {bk.esc(bk.cut_sentences(tldr, 500))}\n"
                                  f"_id_ `{bk.esc(paper.id)}`"))
    return out[: bk.MAX_MESSAGE_BLOCKS]


def overview_text(ov) -> str:
    names = "; ".join(f"{t.name}: " + ", ".join(p.short_name for p, _ in t.papers) for t in ov.themes)
    return bk.esc(f"Overview of {ov.topic}: {names}")


@subcommand("overview", usage="overview <topic>", example="overview video LLMs",
            help="The most relevant papers on a topic, grouped into named themes with TL;DRs.",
            aliases=("topic", "survey"))
def handle_overview(deps: Deps, call: Call) -> Reply:
    if not has_words(call.args):
        return problem_reply(deps, "Which topic should I give an overview of?",
                             hint=f"For example {code(deps.command + ' overview video LLMs')}.")
    ov = topic_overview(deps.store, deps.searcher, call.args, llm=deps.llm, now=time.time())
    if not ov.themes:
        return problem_reply(deps, f"I found no papers about {call.args}.")
    return Reply(overview_text(ov), overview_blocks(ov))
