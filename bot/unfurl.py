"""Links to arxiv.org and openreview.net pasted in Slack: fetch the paper if new, answer with chat.unfurl.

An id arXiv or OpenReview does not know, or a service that is down, gets no
unfurl at all (never an error card). A paper already in the store is not
fetched again, and a lock per paper keeps two deliveries of the same link
from fetching it twice.
"""
from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from slack_sdk.errors import SlackApiError

from store.errors import StoreError
from store.sources import add_paper, parse_ref

from . import blocks as bk
from .commands import paper_summary

if TYPE_CHECKING:
    from slack_bolt import App

    from .deps import Deps

log = logging.getLogger(__name__)
DOMAINS = ("arxiv.org", "openreview.net")
MAX_LINKS = 5  # per message: each may cost a fetch, spaced 3 s apart for arXiv


def unfurls_for(deps: Deps, links: list[dict], locks) -> dict[str, dict]:
    """{url as Slack sent it: {"blocks": [...]}} for the links we could resolve."""
    out = {}
    for link in links[:MAX_LINKS]:
        url = link.get("url") or ""
        ref = parse_ref(url)
        if ref is None or deps.sources is None:
            continue
        try:
            with locks(ref):
                added = add_paper(deps.store, deps.sources, ref, deps.embedder, now=deps.clock().timestamp())
        except StoreError as e:  # unreachable source, busy database: no card rather than a wrong one
            log.warning("no unfurl for %s: %s", url, e)
            continue
        if added is None:
            log.info("no unfurl for %s: %s does not know %s", url, ref[0], ref[1])
            continue
        summary = paper_summary(deps.store, added.paper, deps.llm, now=deps.clock().timestamp())
        out[url] = {"blocks": [b.to_dict() for b in bk.unfurl_blocks(added.paper,
                                                                     tldr=getattr(summary, "tldr", None))]}
    return out


class _Locks:
    """One lock per paper reference."""

    def __init__(self):
        self._guard = threading.Lock()
        self._locks: dict[tuple[str, str], threading.Lock] = {}

    def __call__(self, ref: tuple[str, str]) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(ref, threading.Lock())


def register(app: App, deps: Deps) -> None:
    locks = _Locks()

    @app.event("link_shared")
    def handle_link_shared(event, client, logger):
        # The fetch can wait on arXiv's 3 s spacing and back-off: ack now, fetch after.
        deps.later(lambda: unfurl_links(deps, client, event, locks, logger))


def unfurl_links(deps: Deps, client, event: dict, locks, logger) -> None:
    """Fetch what the links name (once per paper) and answer with chat.unfurl."""
    unfurls = unfurls_for(deps, event.get("links") or [], locks)
    if not unfurls:
        return
    where = ({"unfurl_id": event["unfurl_id"], "source": event["source"]}
             if event.get("source") == "composer" and event.get("unfurl_id")
             else {"channel": event.get("channel"), "ts": event.get("message_ts")})
    try:
        client.chat_unfurl(**where, unfurls=unfurls)
    except SlackApiError as e:
        logger.warning("chat.unfurl failed: %s", e.response.get("error"))
