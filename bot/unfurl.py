"""Links to arxiv.org and openreview.net pasted in Slack: fetch the paper if new, answer with chat.unfurl.

Unfurls never wait in line with commands: they have their own small queue and
one worker (`unfurl_queue`, a bot/batches.py BatchQueue), and past its bound a message's links are simply
not unfurled (logged), as Slack shows a link it got no unfurl for. The worker
takes every message waiting at once and resolves their links together
(store.sources.add_papers): a paper already in the store is unfurled without
asking anyone, unknown arXiv ids go to arXiv many to a request, and "not
found" is remembered for a while. An id the source does not know, or a
service that is down, gets no unfurl at all (never an error card).
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from slack_sdk.errors import SlackApiError

from store.errors import StoreError
from store.sources import Added, add_papers, parse_ref

from . import blocks as bk
from .batches import BatchQueue
from .commands import club_meets, paper_summary

if TYPE_CHECKING:
    from slack_bolt import App

    from .deps import Deps

log = logging.getLogger(__name__)
DOMAINS = ("arxiv.org", "openreview.net")
MAX_LINKS = 5  # per message (Slack sends at most 5 links per link_shared event)
MAX_WAITING = 40  # messages queued for unfurling; more are not unfurled (a listing flood, a bot gone wild)
BATCH = 20  # messages resolved together: their unknown arXiv ids in one request


def _refs(event: dict) -> list[tuple[str, tuple[str, str]]]:
    """(url as Slack sent it, reference) for the links of one link_shared event we may unfurl."""
    out = []
    for link in (event.get("links") or [])[:MAX_LINKS]:
        url = link.get("url") or ""
        ref = parse_ref(url)
        if ref is not None:
            out.append((url, ref))
    return out


def unfurls_for(deps: Deps, events: list[dict]) -> list[dict[str, dict]]:
    """For each event, {url as Slack sent it: {"blocks": [...]}} for the links we could resolve."""
    links = [_refs(e) for e in events]
    try:
        answers = add_papers(deps.store, deps.sources, [ref for ls in links for _, ref in ls], deps.embedder,
                             now=deps.clock().timestamp())
    except StoreError as e:  # a busy database: no card rather than a wrong one
        log.warning("no unfurls for %d messages: %s", len(events), e)
        return [{} for _ in events]
    out = []
    for event, ls in zip(events, links, strict=True):
        unfurls = {}
        try:  # Nominate only where a club meets
            nominate = bool(ls) and club_meets(deps.store, event.get("channel"))
        except StoreError:
            nominate = False
        shown = set()  # a paper linked twice in one message (abs and pdf, v1 and v2): one card, the first link's
        for url, ref in ls:
            answer = answers.get(ref)
            if not isinstance(answer, Added):
                log.info("no unfurl for %s: %s", url, answer or f"{ref[0]} does not know {ref[1]}")
                continue
            if answer.paper.id in shown:
                continue
            shown.add(answer.paper.id)
            summary = paper_summary(deps.store, answer.paper, deps.llm, now=deps.clock().timestamp())
            blocks = bk.unfurl_blocks(answer.paper, tldr=getattr(summary, "tldr", None))
            unfurls[url] = {"blocks": [b.to_dict() for b in (blocks if nominate else bk.without_nominate(blocks))]}
        out.append(unfurls)
    return out


def _send(client, event: dict, unfurls: dict[str, dict]) -> None:
    if not unfurls:
        return
    where = ({"unfurl_id": event["unfurl_id"], "source": event["source"]}
             if event.get("source") == "composer" and event.get("unfurl_id")
             else {"channel": event.get("channel"), "ts": event.get("message_ts")})
    try:
        client.chat_unfurl(**where, unfurls=unfurls)
    except SlackApiError as e:
        log.warning("chat.unfurl failed: %s", e.response.get("error"))


def unfurl_queue(*, threaded: bool = True) -> BatchQueue:
    """Link unfurls' own bounded queue and worker thread, apart from the commands' work pool.

    `threaded=False` (tests, the console) unfurls in the caller, as `later` runs work there.
    """
    return BatchQueue(_unfurl, name="unfurl", threaded=threaded, bound=MAX_WAITING, batch=BATCH)


def _unfurl(batch: list[tuple[Deps, object, dict]]) -> None:
    deps = batch[0][0]  # one app's deps: every offer comes from its one listener
    for (_, client, event), unfurls in zip(batch, unfurls_for(deps, [e for _, _, e in batch]), strict=True):
        _send(client, event, unfurls)


def register(app: App, deps: Deps) -> None:
    unfurls = deps.unfurls or unfurl_queue(threaded=False)

    @app.event("link_shared")
    def handle_link_shared(event, client):
        # Acked when this returns; the fetch waits on arXiv's spacing, on the unfurls' own worker.
        if not _refs(event) or deps.sources is None:
            return
        if not unfurls.offer((deps, client, event)):
            log.warning("unfurl queue full (%d messages waiting): links in %s/%s not unfurled",
                        unfurls.bound, event.get("channel"), event.get("message_ts"))
