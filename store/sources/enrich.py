"""Fill in untitled papers (the bundled seed abstracts) from their OpenReview records.

A seed matches a note by its normalised abstract (LaTeX cleaned, case and
punctuation folded); failing that, by word-trigram overlap, taken only when it
is clearly the best (an edited sentence or a changed macro still match, a
neighbour on the same topic does not). The match is written through ingest
with the seed's own abstract, so it lands on the seed's row (its abstract key)
and never makes a new paper; ingest keeps every field the note lacks.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ..base import Store
from ..clean import clean_text
from ..embed import Embedder
from ..ingest import Record, ingest_records, normalize
from . import openreview
from .clients import Sources

MIN_OVERLAP = 0.5  # Jaccard of word trigrams: an edited copy scores ~0.7-0.95, a topical neighbour < 0.2
MARGIN = 1.5  # and the best must beat the second best by this factor


@dataclass
class EnrichResult:
    candidates: int = 0
    notes: int = 0
    exact: int = 0
    fuzzy: int = 0
    matches: dict[str, str] = field(default_factory=dict)  # paper id -> forum id
    unmatched: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return (f"{self.exact + self.fuzzy} of {self.candidates} untitled papers matched "
                f"({self.exact} exact, {self.fuzzy} fuzzy) among {self.notes} notes")


def _norm(text: str) -> str:
    return normalize(clean_text(text))


def _shingles(norm: str) -> set[int]:
    words = norm.split()
    return {hash(" ".join(words[i:i + 3])) for i in range(max(1, len(words) - 2))}


def match_abstracts(papers: dict[str, str], records: list[Record]) -> tuple[dict[str, int], dict[str, int]]:
    """({paper id: record index} by exact normalised abstract, {paper id: record index} by overlap)."""
    exact_index: dict[str, list[int]] = {}
    shingles: list[set[int]] = []
    inverted: dict[int, list[int]] = {}
    for i, rec in enumerate(records):
        n = _norm(rec.abstract)
        exact_index.setdefault(n, []).append(i)
        sh = _shingles(n)
        shingles.append(sh)
        for s in sh:
            inverted.setdefault(s, []).append(i)
    exact, fuzzy = {}, {}
    for pid, abstract in papers.items():
        n = _norm(abstract)
        hits = exact_index.get(n, [])
        if len(hits) == 1:
            exact[pid] = hits[0]
            continue
        mine = _shingles(n)
        overlap: dict[int, int] = {}
        for s in mine:
            for i in inverted.get(s, ()):
                overlap[i] = overlap.get(i, 0) + 1
        scored = sorted(((c / len(mine | shingles[i]), i) for i, c in overlap.items()), reverse=True)
        if not scored:
            continue
        best, i = scored[0]
        second = scored[1][0] if len(scored) > 1 else 0.0
        if best >= MIN_OVERLAP and best >= MARGIN * second:
            fuzzy[pid] = i
    return exact, fuzzy


def enrich_openreview(store: Store, sources: Sources, venue: str, embedder: Embedder | None, *, now: float,
                      page_size: int = openreview.PAGE_SIZE,
                      progress: Callable[[int, int], None] | None = None) -> EnrichResult:
    """Match the store's untitled papers to a venue's notes and fill titles, authors, keywords and links."""
    result = EnrichResult()
    papers = {}
    keys = None
    for p in store.iter_papers():
        if not p.title:
            papers[p.id] = p.raw or p.abstract
    result.candidates = len(papers)
    if not papers:
        return result
    keys = store.paper_keys(list(papers))
    papers = {pid: a for pid, a in papers.items()
              if not any(k.startswith("ext:openreview:") for k in keys.get(pid, []))}
    records: list[Record] = []
    for _, page in openreview.note_pages(sources.openreview_fetcher, venue, page_size=page_size,
                                         base=sources.openreview_api):
        records += page.records
        if progress:
            progress(page.notes, page.count)
    result.notes = len(records)
    exact, fuzzy = match_abstracts(papers, records)
    # One note fills one paper: a note two seeds both claim fills neither.
    claimed: dict[int, list[str]] = {}
    for pid, i in {**exact, **fuzzy}.items():
        claimed.setdefault(i, []).append(pid)
    updates = []
    for i, pids in claimed.items():
        if len(pids) != 1:
            continue
        pid, note = pids[0], records[i]
        # The seed's own text, so ingest finds the seed by its abstract key; venue and year stay the seed's.
        updates.append(Record(abstract=papers[pid], title=note.title, id=note.id, url=note.url,
                              authors=note.authors, keywords=note.keywords, source=f"openreview:{venue}"))
        result.matches[pid] = note.url.rsplit("=", 1)[-1]
        if pid in exact:
            result.exact += 1
        else:
            result.fuzzy += 1
    result.unmatched = sorted(set(papers) - set(result.matches))
    before = store.count_papers()
    ingest_records(store, updates, embedder, now=now)
    if store.count_papers() != before:  # pragma: no cover - the abstract key makes this impossible
        raise AssertionError("enrichment created papers")
    return result
