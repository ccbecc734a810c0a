"""One paper by reference: `/paper add` and pasted links."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Union

from ..base import Store
from ..embed import Embedder
from ..ingest import Record
from ..paper import Paper
from . import arxiv, openreview
from .clients import Sources
from .feeds import ingest_batch, paper_ids
from .http import MEMBER_WAIT, SourceError


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


def paper_link(text: str) -> tuple[str, str] | None:
    """parse_ref of one word that can only name a paper: an arXiv id or link, or an openreview.net link.
    A bare word that could be an OpenReview forum id ("GFlowNets") is not one: it may be a topic or a name."""
    words = (text or "").split()
    ref = parse_ref(words[0]) if len(words) == 1 else None
    if ref is None or ref[0] == "openreview" and "openreview.net" not in words[0].lower():
        return None
    return ref


def _key(kind: str, ident: str) -> str:
    return f"ext:{kind}:{ident.lower()}"


def known_paper(store: Store, ref: tuple[str, str]) -> Paper | None:
    hit = store.lookup_keys([_key(*ref)]).get(_key(*ref))
    return store.get_paper(hit[0]) if hit else None


Answer = Union[Added, SourceError, None]  # the paper, the source's failure, or "the source does not know it"


def add_papers(store: Store, sources: Sources, refs: Iterable[tuple[str, str]], embedder: Embedder | None, *,
               now: float, within: float | None = MEMBER_WAIT,
               ask_again: bool = False) -> dict[tuple[str, str], Answer]:
    """Each reference's paper: from the store when it has it (nobody is asked), else fetched and
    ingested, unknown arXiv ids many to a request; "not found" is remembered (sources.misses) for
    links pasted again, and asked `ask_again` by a member naming the paper (it may be out since).
    within: seconds the whole call may wait on each source (a member is waiting); a source that
    cannot answer in that time is a SourceError for each of its references, the others' papers
    still come. None: as long as the sources' retries take."""
    a_until = None if within is None else sources.arxiv_fetcher.clock() + within
    o_until = None if within is None else sources.openreview_fetcher.clock() + within
    out: dict[tuple[str, str], Answer] = {}
    wanted = []
    for ref in dict.fromkeys(refs):
        have = known_paper(store, ref)
        if have is not None:
            out[ref] = Added(have, False)
        elif not ask_again and sources.misses(ref, now):
            out[ref] = None
        else:
            wanted.append(ref)
    fetched: dict[tuple[str, str], Record] = {}
    ids = [ident for kind, ident in wanted if kind == "arxiv"]
    if ids:
        try:
            for rec in arxiv.fetch_ids(sources.arxiv_fetcher, ids, base=sources.arxiv_api, until=a_until):
                fetched[("arxiv", arxiv.parse_id(rec.url))] = rec
        except SourceError as e:
            out.update({("arxiv", i): e for i in ids})
    down: SourceError | None = None  # OpenReview failed one forum: the next would fail the same way
    for kind, ident in wanted:
        if kind == "openreview":
            if down is not None:
                out[(kind, ident)] = down
                continue
            try:
                rec = openreview.fetch_forum(sources.openreview_fetcher, ident, base=sources.openreview_api,
                                             until=o_until)
            except SourceError as e:
                out[(kind, ident)] = down = e
                continue
            if rec is not None:
                fetched[(kind, ident)] = rec
    records = list(fetched.values())
    before = set(paper_ids(store, records).values())
    if records:
        ingest_batch(store, records, embedder, now=now)
    for ref in wanted:
        if ref in out:
            continue
        paper = known_paper(store, ref) if ref in fetched else None
        if paper is None:
            sources.misses.add(ref, now)
        out[ref] = Added(paper, paper.id not in before) if paper is not None else None
    return out


def add_paper(store: Store, sources: Sources, ref: tuple[str, str], embedder: Embedder | None, *,
              now: float) -> Added | None:
    """The paper behind ref (`/paper add`), fetched and ingested if the store lacks it, the source asked
    even if it did not know it a moment ago; None if it does not know it."""
    answer = add_papers(store, sources, [ref], embedder, now=now, ask_again=True)[ref]
    if isinstance(answer, SourceError):
        raise answer
    return answer
