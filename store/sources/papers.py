"""One paper by reference: `/paper add` and pasted links."""
from __future__ import annotations

from dataclasses import dataclass

from ..base import Store
from ..embed import Embedder
from ..paper import Paper
from . import arxiv, openreview
from .clients import Sources
from .feeds import ingest_batch


@dataclass
class Added:
    paper: Paper
    new: bool


def parse_ref(text: str) -> tuple[str, str] | None:
    """('arxiv', '2501.01234') or ('openreview', forum id) from an id or URL; None if neither."""
    text = (text or "").strip().strip("<>").split("|", 1)[0]
    if "openreview.net" in text.lower():
        forum = openreview.parse_forum(text)
        return ("openreview", forum) if forum else None
    aid = arxiv.parse_id(text)
    if aid:
        return "arxiv", aid
    forum = openreview.parse_forum(text)
    return ("openreview", forum) if forum else None


def _key(kind: str, ident: str) -> str:
    return f"ext:{kind}:{ident.lower()}"


def known_paper(store: Store, ref: tuple[str, str]) -> Paper | None:
    hit = store.lookup_keys([_key(*ref)]).get(_key(*ref))
    return store.get_paper(hit[0]) if hit else None


def add_paper(store: Store, sources: Sources, ref: tuple[str, str], embedder: Embedder | None, *,
              now: float) -> Added | None:
    """The paper behind ref, fetched and ingested if the store lacks it; None if the source does not know it."""
    have = known_paper(store, ref)
    if have:
        return Added(have, False)
    kind, ident = ref
    if kind == "arxiv":
        records = arxiv.fetch_ids(sources.arxiv_fetcher, [ident], base=sources.arxiv_api)
    else:
        rec = openreview.fetch_forum(sources.openreview_fetcher, ident, base=sources.openreview_api)
        records = [rec] if rec else []
    if not records:
        return None
    before = store.count_papers()
    ingest_batch(store, records[:1], embedder, now=now)
    paper = known_paper(store, ref)
    return Added(paper, store.count_papers() > before) if paper else None
