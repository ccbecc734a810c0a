"""Hybrid search: FTS5 BM25 and embedding cosine, fused by reciprocal rank.

Exact matches on a paper id or short name go first. The vectors live in one
in-memory float32 matrix (a single matrix-vector product per query is fast
enough well past 100k papers); `VectorIndex` is the seam where sqlite-vec or
another ANN index can replace it.
"""
from __future__ import annotations

import re
import threading
import unicodedata
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Protocol, Sequence

import numpy as np

from .db import Store
from .embed import Embedder
from .errors import EmptyQuery, PaperNotFound
from .paper import Paper

# Fusion and BM25 settings, tuned with bench/search_quality.py on SciTLDR train.
FUSION = {"method": "rrf", "k": 60, "bm25_weight": 1.0, "dense_weight": 1.0}
# Column weights: short_name, headline, title, abstract.
COLUMN_WEIGHTS = (4.0, 2.0, 2.0, 1.0)
CANDIDATES = 100  # per ranker, before fusion

# The model reads at most 256 word pieces; beyond ~2k characters is wasted tokenising.
MAX_EMBED_CHARS = 2000
MAX_QUERY_TERMS = 48
QUERY_CACHE_SIZE = 256

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_SEPARATOR = re.compile(r"[^\w\s\-.'\u2019/]+", re.UNICODE)
STOPWORDS = frozenset("""
a about above after again against all also am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further had
has have having he her here hers him his how i if in into is it its itself just me more most my
no nor not of off on once only or other our ours out over own same she should so some such than
that the their theirs them then there these they this those through to too under until up very
was we were what when where which while who whom why will with would you your yours paper papers
that's about show shows propose proposed method methods approach using use based new via
""".split())


@dataclass
class Hit:
    """One search result with the parts of its score, so the bot can say why it matched."""

    paper: Paper
    score: float
    why: str
    bm25_rank: int | None = None
    dense_rank: int | None = None
    dense_score: float | None = None
    bm25_score: float | None = None
    exact: bool = False
    terms: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        """The JSON shape of the CLI: id, name, headline, score, why and the score parts."""
        p = self.paper
        return {
            "id": p.id, "name": p.short_name, "headline": p.headline, "score": round(self.score, 5),
            "why": self.why, "collection": p.collection, "year": p.year, "exact": self.exact,
            "bm25_rank": self.bm25_rank, "dense_rank": self.dense_rank,
            "dense_score": None if self.dense_score is None else round(self.dense_score, 4),
        }


# -- query text -------------------------------------------------------------------
def query_words(text: str) -> list[list[str]]:
    """Words as lists of their letter/digit pieces: 'G-NLL' -> ['g', 'nll'], 'col:x' -> two words.

    Hyphens, dots, apostrophes, slashes and underscores join the pieces of one name
    (searched as a phrase); any other punctuation separates words.
    """
    out = []
    for word in _SEPARATOR.sub(" ", text).split():
        pieces = [p.lower() for p in _WORD.findall(word)]
        if pieces:
            out.append(pieces)
    return out


def match_expression(text: str, *, max_terms: int = MAX_QUERY_TERMS) -> str | None:
    """A safe FTS5 MATCH string: each word a quoted phrase, OR-joined; None if nothing to match.

    Quoting every word makes AND/OR/NEAR, *, ^, :, -, brackets and stray quotes plain
    text; only letters and digits reach FTS5, so no user input can make it raise.
    """
    phrases: list[str] = []
    for pieces in query_words(text):
        if len(pieces) == 1 and pieces[0] in STOPWORDS:
            continue
        phrase = " ".join(pieces)
        if phrase not in phrases:
            phrases.append(phrase)
        if len(phrases) >= max_terms:
            break
    if not phrases:
        # Only stopwords ("what is this"): search them rather than nothing.
        phrases = list(dict.fromkeys(" ".join(p) for p in query_words(text)))[:max_terms]
    if not phrases:
        return None
    return " OR ".join(f'"{p}"' for p in phrases)


def has_content(text: str) -> bool:
    """False for text that is only spaces and punctuation ('', '  ', '"', '?!'): nothing to search."""
    return any(not unicodedata.category(ch).startswith(("P", "Z", "C")) for ch in text)


def clip_query(text: str) -> str:
    """Collapse whitespace and cut very long text at a word boundary."""
    text = " ".join(text.split())
    if len(text) > MAX_EMBED_CHARS:
        text = text[:MAX_EMBED_CHARS].rsplit(" ", 1)[0]
    return text


# -- the vector index ---------------------------------------------------------------
class VectorIndex(Protocol):
    """Nearest papers by cosine; a sqlite-vec or ANN index can stand in for MatrixIndex."""

    def __len__(self) -> int: ...

    def vector(self, paper_id: str) -> np.ndarray | None: ...

    def search(self, query: np.ndarray, k: int, *, collection: str | None = None,
               year: int | None = None, exclude: str | None = None) -> list[tuple[str, float]]: ...


class MatrixIndex:
    """All vectors as one (n, d) float32 matrix; a query is one matrix-vector product."""

    def __init__(self, ids: Sequence[str], matrix: np.ndarray,
                 facets: dict[str, tuple[str, int | None]] | None = None):
        self.ids = list(ids)
        self.matrix = np.ascontiguousarray(matrix, dtype=np.float32)
        self.row = {pid: i for i, pid in enumerate(self.ids)}
        facets = facets or {}
        self.collections = np.array([(facets.get(i, ("", None))[0] or "").lower() for i in self.ids],
                                    dtype=object)
        self.years = np.array([facets.get(i, ("", None))[1] or 0 for i in self.ids], dtype=np.int32)

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def nbytes(self) -> int:
        return int(self.matrix.nbytes)

    def vector(self, paper_id: str) -> np.ndarray | None:
        i = self.row.get(paper_id)
        return None if i is None else self.matrix[i]

    def _mask(self, collection: str | None, year: int | None) -> np.ndarray | None:
        mask = None
        if collection:
            c = collection.lower()
            mask = np.fromiter((x == c or x.startswith(c + " ") for x in self.collections),
                               dtype=bool, count=len(self.ids))
        if year:
            m = self.years == int(year)
            mask = m if mask is None else mask & m
        return mask

    def search(self, query: np.ndarray, k: int, *, collection: str | None = None,
               year: int | None = None, exclude: str | None = None) -> list[tuple[str, float]]:
        if not self.ids or k <= 0:
            return []
        scores = self.matrix @ np.asarray(query, dtype=np.float32)
        mask = self._mask(collection, year)
        if mask is not None:
            scores = np.where(mask, scores, -np.inf)
        if exclude is not None and exclude in self.row:
            scores[self.row[exclude]] = -np.inf
        k = min(k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(self.ids[i], float(scores[i])) for i in top if np.isfinite(scores[i])]


def rrf(rankings: Sequence[tuple[Sequence[str], float]], k: float = 60) -> dict[str, float]:
    """Weighted reciprocal rank fusion: sum of weight / (k + rank) over the rankings."""
    fused: dict[str, float] = {}
    for ids, weight in rankings:
        for rank, pid in enumerate(ids, start=1):
            fused[pid] = fused.get(pid, 0.0) + weight / (k + rank)
    return fused


def fuse(lexical: Sequence[tuple[str, float]], dense: Sequence[tuple[str, float]], *,
         method: str = "rrf", k: float = 60, bm25_weight: float = 1.0, dense_weight: float = 1.0,
         index: VectorIndex | None = None, query_vec: np.ndarray | None = None) -> dict[str, float]:
    """Fused score per candidate id, higher is better.

    'rrf' fuses ranks; 'score' adds the cosine (computed for every candidate, so a
    lexical-only hit is not penalised for missing the dense top list) to the BM25
    score scaled so the query's best lexical hit is 1.
    """
    if method == "rrf":
        return rrf([([p for p, _ in lexical], bm25_weight), ([p for p, _ in dense], dense_weight)], k)
    cos = dict(dense)
    if index is not None and query_vec is not None:
        for pid, _ in lexical:
            if pid not in cos:
                vec = index.vector(pid)
                cos[pid] = float(vec @ query_vec) if vec is not None else 0.0
    best = min((s for _, s in lexical), default=-1.0) or -1.0
    lex = {pid: s / best for pid, s in lexical}
    return {pid: dense_weight * cos.get(pid, 0.0) + bm25_weight * lex.get(pid, 0.0)
            for pid in cos.keys() | lex.keys()}


# -- the searcher --------------------------------------------------------------------
class Searcher:
    """Search over one Store with one embedder; safe to share across threads."""

    def __init__(self, store: Store, embedder: Embedder, *, fusion: dict | None = None,
                 column_weights: tuple[float, ...] = COLUMN_WEIGHTS, candidates: int = CANDIDATES):
        self.store = store
        self.embedder = embedder
        self.fusion = dict(FUSION if fusion is None else fusion)
        self.column_weights = tuple(column_weights)
        self.candidates = candidates
        self._index: VectorIndex | None = None
        self._version: int | None = None
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()

    # -- state ----------------------------------------------------------------
    def warm(self) -> None:
        """Load the model and the vectors now (the bot does this before connecting)."""
        self.embed_query("warm up")
        self.index()

    def index(self) -> VectorIndex:
        """The vector index, reloaded when the store's papers changed since the last load."""
        version = self.store.papers_version()
        with self._lock:
            if self._index is None or version != self._version:
                ids, matrix = self.store.load_vectors(self.embedder.name)
                facets = {pid: (c, y) for pid, c, y in self.store.paper_facets()}
                self._index = MatrixIndex(ids, matrix, facets)
                self._version = version
            return self._index

    def embed_query(self, text: str) -> np.ndarray:
        """The query's embedding, from a small LRU cache when the same text was asked before."""
        with self._lock:
            vec = self._cache.get(text)
            if vec is not None:
                self._cache.move_to_end(text)
                return vec
        vec = self.embedder.encode([text])[0]
        with self._lock:
            self._cache[text] = vec
            while len(self._cache) > QUERY_CACHE_SIZE:
                self._cache.popitem(last=False)
        return vec

    # -- rankers --------------------------------------------------------------
    def bm25(self, text: str, *, limit: int | None = None, collection: str | None = None,
             year: int | None = None) -> list[tuple[str, float]]:
        """(id, bm25) best first; empty when the text has no searchable words."""
        match = match_expression(text)
        if match is None:
            return []
        return self.store.fts_search(match, weights=self.column_weights,
                                     limit=limit or self.candidates,
                                     collection=collection, year=year)

    def dense(self, text: str, *, limit: int | None = None, collection: str | None = None,
              year: int | None = None) -> list[tuple[str, float]]:
        """(id, cosine) best first."""
        index = self.index()
        if not len(index):
            return []
        return index.search(self.embed_query(text), limit or self.candidates,
                            collection=collection, year=year)

    # -- public -----------------------------------------------------------------
    def search(self, query: str, *, limit: int = 5, collection: str | None = None,
               year: int | None = None) -> list[Hit]:
        """Papers for free text, best first; EmptyQuery when there is nothing to search for."""
        text = clip_query(query or "")
        if not has_content(text):
            raise EmptyQuery("Type some words to search for.")
        if limit <= 0:
            return []
        exact = self._exact(text, collection, year)
        lexical = self.bm25(text, collection=collection, year=year)
        index = self.index()
        qvec = self.embed_query(text)
        dense = index.search(qvec, self.candidates, collection=collection, year=year) if len(index) else []
        return self._fuse(lexical, dense, exact=exact, limit=limit, query=text, index=index, qvec=qvec)

    def similar(self, paper_id: str, *, limit: int = 5) -> list[Hit]:
        """Other papers closest to this one by its embedding and its distinctive words."""
        paper = self.store.get_paper(paper_id)
        if paper is None:
            raise PaperNotFound(f"No paper with id '{paper_id}'.")
        index = self.index()
        vec = index.vector(paper.id)
        if vec is None:
            vec = self.embed_query(clip_query(_paper_text(paper)))
        dense = index.search(vec, self.candidates + 1, exclude=paper.id) if len(index) else []
        lexical = [(pid, s) for pid, s in self.bm25(_paper_text(paper), limit=self.candidates + 1)
                   if pid != paper.id]
        return self._fuse(lexical, dense, exact=None, limit=limit, query=_paper_text(paper),
                          index=index, qvec=vec)

    def resolve(self, ref: str) -> tuple[Paper, bool]:
        """A paper by id or short name (exact: True), else the best search hit (False)."""
        ref = (ref or "").strip()
        if not ref:
            raise PaperNotFound("Name a paper: its id, short name or some words from it.")
        paper = self.store.find_exact(ref)
        if paper:
            return paper, True
        hits = self.search(ref, limit=1)
        if not hits:
            raise PaperNotFound(f"No paper matches '{ref[:80]}'.")
        return hits[0].paper, False

    # -- internals ----------------------------------------------------------------
    def _exact(self, text: str, collection: str | None, year: int | None) -> Paper | None:
        paper = self.store.find_exact(text)
        if paper is None:
            return None
        if collection:
            c = collection.lower()
            pc = (paper.collection or "").lower()
            if not (pc == c or pc.startswith(c + " ")):
                return None
        if year and paper.year != int(year):
            return None
        return paper

    def _fuse(self, lexical, dense, *, exact: Paper | None, limit: int, query: str,
              index: VectorIndex, qvec: np.ndarray) -> list[Hit]:
        lex_ids = [pid for pid, _ in lexical]
        dense_ids = [pid for pid, _ in dense]
        fused = fuse(lexical, dense, index=index, query_vec=qvec, **self.fusion)
        order = sorted(fused, key=lambda pid: -fused[pid])
        if exact is not None:
            order = [exact.id] + [pid for pid in order if pid != exact.id]
        order = order[:limit]
        papers = {p.id: p for p in self.store.get_papers(order)}
        lex_rank = {pid: i for i, pid in enumerate(lex_ids, start=1)}
        lex_score = dict(lexical)
        dense_rank = {pid: i for i, pid in enumerate(dense_ids, start=1)}
        dense_score = dict(dense)
        words = {w for pieces in query_words(query) for w in pieces if w not in STOPWORDS}
        hits = []
        for pid in order:
            paper = papers.get(pid)
            if paper is None:
                continue
            is_exact = exact is not None and pid == exact.id
            top = max(fused.values(), default=1.0) or 1.0
            score = 1.0 + fused.get(pid, 0.0) if is_exact else fused[pid] / top
            terms = _matched_terms(words, paper) if pid in lex_rank else []
            hit = Hit(paper=paper, score=score, why="", bm25_rank=lex_rank.get(pid),
                      dense_rank=dense_rank.get(pid), dense_score=dense_score.get(pid),
                      bm25_score=lex_score.get(pid), exact=is_exact, terms=terms)
            hit.why = explain(hit, query)
            hits.append(hit)
        return hits


def _paper_text(paper: Paper) -> str:
    return " ".join(x for x in (paper.short_name, paper.headline, paper.title, paper.abstract) if x)


def _matched_terms(words: set[str], paper: Paper, most: int = 4) -> list[str]:
    """Query words found in the paper (a crude prefix match stands in for the stemmer)."""
    if not words:
        return []
    paper_words = set(w.lower() for w in _WORD.findall(_paper_text(paper)))
    found = []
    for w in sorted(words, key=lambda w: (-len(w), w)):
        stem = w[: max(4, len(w) - 3)] if len(w) > 4 else w
        if w in paper_words or any(pw.startswith(stem) for pw in paper_words):
            found.append(w)
    return found[:most]


def explain(hit: Hit, query: str) -> str:
    """One line for the user: why this paper came up."""
    if hit.exact:
        p = hit.paper
        return "id match" if query.strip().lower() == p.id else "name match"
    parts = []
    if hit.terms:
        parts.append("keywords: " + ", ".join(hit.terms))
    if hit.dense_score is not None and hit.dense_rank is not None and hit.dense_rank <= 10:
        parts.append(f"meaning close ({hit.dense_score:.2f})")
    if not parts:
        parts.append("related words" if hit.bm25_rank else f"meaning ({(hit.dense_score or 0):.2f})")
    return "; ".join(parts)
