"""Hybrid search: the store's lexical (BM25) ranking and embedding cosine, fused; "more like this".

Exact matches on a paper id or short name go first. The vectors live in memory in a
`store.vectors.DenseIndex`, refreshed from the rows changed since it was loaded: a float32
matrix (exact search) up to `exact_limit` vectors, an HNSW graph of int8 vectors beyond.
`VectorIndex` is the seam any other index fits.
"""
from __future__ import annotations

import re
import threading
import unicodedata
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Container, Protocol, Sequence

import numpy as np

from .base import Store
from .embed import Embedder, aspect_model
from .errors import EmptyQuery, PaperNotFound, PaperNotInLibrary
from .ingest import source_ids
from .paper import Paper
from .sources.papers import known_paper, paper_link
from .rerank import RERANK, QueryTerms, aspect_gains, combine, overlap, positions, reorder
from .text import ASPECTS, BOILERPLATE, aspect_texts
from .text import STOPWORDS as BASE_STOPWORDS
from .vectors import EXACT_LIMIT, GRAPH_DTYPE, DenseIndex, refresh

# Fusion and BM25 settings, tuned with bench/search_quality.py on SciTLDR train
# (2.6k OpenReview abstracts, 1992 TLDR queries) and checked on dev (1453 queries).
# Adding the cosine to 0.4 x the query-normalised BM25 beat every weighted RRF
# setting tried (k 2..100): without titles, dev MRR@10 0.870 vs 0.839 for the best RRF
# (k=2, BM25 weight 2), train 0.926 vs 0.913.
# The optimum is flat for 0.3-0.5 with or without titles.
FUSION = {"method": "score", "k": 60, "bm25_weight": 0.4, "dense_weight": 1.0}
# Column weights: short_name, headline, title, abstract. On SciTLDR they barely
# matter (+-0.001 MRR); short_name counts double so an acronym ('SPIKE') ranks
# the paper it names above papers that merely cite it.
COLUMN_WEIGHTS = (2.0, 1.0, 1.0, 1.0)
CANDIDATES = 100  # per ranker, before fusion
# A word in more than this share of papers is dropped from the BM25 query: FTS5's
# BM25 gives it ~zero weight anyway, and its posting list is the slow part at 100k.
MAX_DF = 0.5
# At most this many (word, paper) postings per BM25 query: keeps p95 latency flat
# as the corpus grows, and only ever drops a query's most common words (a query of only
# such words is left to the embedding, as one of only stopwords is). Per backend: a
# posting costs PostgreSQL a heap read (about 3.7 us at 200k papers, against FTS5's
# fraction of that), so it reads a third as many for the same latency.
POSTING_BUDGET = {"sqlite": 30_000, "postgresql": 10_000}
# Words' document counts are kept until the number of papers moves by more than this share:
# counting is an index read per word (PostgreSQL: a heap read per paper), and a count a
# fraction of a percent off changes no ranking. Only common words' counts (DF_KEEP papers
# or more) are kept: a rare one is cheap to count again, and a new paper may hold a word
# that no paper held before.
DF_DRIFT, DF_KEEP = 0.01, 1000
# "More like this": a paper's own vector, BM25 over its most distinctive words
# (tf x idf, words used at least twice, as Lucene's MoreLikeThis does), and its
# aspects (background / method / result, store.text.aspect_texts), each embedded at
# ingest under embed.aspect_model(model name): a candidate's aspect score is the best
# cosine between any aspect of the paper and any of the candidate's.
# bench/similar_quality.py (ICLR 2024, 2.4k papers, topic-mates as relevant; NDCG@10 /
# MAP@100; dev half of the queries for choosing, test half held out):
#   paper vector alone                 dev 0.317 / 0.176   test 0.316 / 0.177
#   BM25, 48 distinctive words alone   dev 0.289 / 0.152   test 0.287 / 0.153
#   similar (these settings)           dev 0.334 / 0.189   test 0.332 / 0.191
# The weights come from a sweep on dev scoring every paper rather than the two candidate
# lists (so its figures run higher): vector + 0.5 BM25 0.332, vector + 1.0 best aspect
# 0.336, both (0.8 BM25) 0.346; flat within 0.003 for BM25 0.3-0.8 and aspects 0.5-1.5.
# Matching aspect to aspect (method to method) alone did worse than the vector (0.294),
# and the mean of each aspect's best match gained less than the best one (0.328 vs 0.336).
SIMILAR_MIN_TF = 2
SIMILAR = {"terms": 48, "bm25_weight": 0.8, "aspect_weight": 1.0, "aspect_match": "best",
           "dense_weight": 1.0}
# Fusion by the query's character (issue 19) was tried and is noise: the BM25 weight times
# 1 + n x (share of name-like words: 'SPIKE', 'G-NLL', 'ResNet-50') and x (words/12)^-g, for
# n 0..4 and g -0.5..0.5, moved SciTLDR dev (no titles) MRR@10 by -0.005..+0.001; the best on
# train (n 4, g -0.5, +0.001) lost 0.005 on dev. SciTLDR's queries are descriptions, not names.

# resolve() answers with a best guess only when it shares a word with the reference
# or its cosine clears this (the test paraphrases of seed abstracts score 0.26-0.60 and
# all share words; unrelated text like 'blah' or 'quantum chromodynamics' scores < 0.2).
RESOLVE_MIN_COSINE = 0.3
# The model reads at most 256 word pieces; beyond ~2k characters is wasted tokenising.
MAX_EMBED_CHARS = 2000
MAX_QUERY_TERMS = 48
QUERY_CACHE_SIZE = 256
# Papers whose words, index terms and term positions the re-rank keeps (about 25 MB for 1,024):
# a popular paper is not tokenised again for every search.
DOC_TERMS_CACHE = 1024

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_SEPARATOR = re.compile(r"[^\w\s\-.'\u2019/]+", re.UNICODE)
# A single query word in these is left to the embedding (it matches nearly every abstract).
STOPWORDS = BASE_STOPWORDS | BOILERPLATE


# What "relevant" means for a hit's cosine to the query (all-MiniLM-L6-v2). Calibrated on 300
# SciTLDR dev abstracts: the best cosine of 20 off-topic or keyboard-mash queries ("qwertyuiop",
# "cheap flights to rome") was 0.13-0.30, of 20 short real topics ("resnet", "video grounding")
# 0.31-0.72, of their TL;DRs (which share words with the paper) 0.21-0.90 (p5 0.50).
RELEVANT_COSINE = 0.35  # close in meaning with no shared words
LOOSE_COSINE = 0.20  # enough with the query's words in the paper


def loosely_related(cos: float | None) -> bool:
    """Whether a cosine is below related in meaning: what `closeness` calls "loosely related"."""
    return (cos or 0.0) < RELEVANT_COSINE


def closeness(cos: float | None) -> str:
    """A cosine in words, for people."""
    cos = cos or 0.0
    if cos >= 0.6:
        return "very close in meaning"
    if cos >= 0.45:
        return "close in meaning"
    if not loosely_related(cos):
        return "related in meaning"
    return "loosely related"


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

    @property
    def relevant(self) -> bool:
        """A good match, not merely the closest there is: its meaning is close enough alone, or
        it holds the query's words and is at least loosely related (RELEVANT_COSINE)."""
        cos = self.dense_score or 0.0
        return self.exact or cos >= RELEVANT_COSINE or (bool(self.terms) and cos >= LOOSE_COSINE)

    def to_dict(self) -> dict:
        """The JSON shape of the CLI: id, name, headline, score, why and the score parts."""
        p = self.paper
        return {
            "id": p.id, "name": p.short_name, "title": p.title, "headline": p.headline,
            "score": round(self.score, 5), "relevant": self.relevant,
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


def safe_terms(text: str, *, max_terms: int = MAX_QUERY_TERMS) -> list[str]:
    """Lexical terms for raw text without document frequencies: non-stopwords, first come."""
    words = query_words(text)
    phrases = [" ".join(p) for p in words if not (len(p) == 1 and p[0] in STOPWORDS)]
    return list(dict.fromkeys(phrases or [" ".join(p) for p in words]))[:max_terms]


def has_content(text: str) -> bool:
    """True when text has a letter, digit or emoji; '', '  ', '"', '^', '()' have nothing to search."""
    return any(unicodedata.category(ch)[0] in "LN" or unicodedata.category(ch) == "So" for ch in text)


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
        # Collections as small integer codes: a filter is one vectorised comparison.
        names = [(facets.get(i, ("", None))[0] or "").lower() for i in self.ids]
        self.collection_names = sorted(set(names))
        code = {c: k for k, c in enumerate(self.collection_names)}
        self.collections = np.array([code[c] for c in names], dtype=np.int32)
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
            wanted = [k for k, x in enumerate(self.collection_names) if x == c or x.startswith(c + " ")]
            mask = np.isin(self.collections, wanted)
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
    lexical-only hit is not penalised for missing the dense top list) to the lexical
    score (higher is better) scaled so the query's best lexical hit is 1.
    """
    if method == "rrf":
        return rrf([([p for p, _ in lexical], bm25_weight), ([p for p, _ in dense], dense_weight)], k)
    cos = dict(dense)
    if index is not None and query_vec is not None:
        for pid, _ in lexical:
            if pid not in cos:
                vec = index.vector(pid)
                cos[pid] = float(vec @ query_vec) if vec is not None else 0.0
    best = max((s for _, s in lexical), default=1.0) or 1.0
    lex = {pid: s / best for pid, s in lexical}
    return {pid: dense_weight * cos.get(pid, 0.0) + bm25_weight * lex.get(pid, 0.0)
            for pid in cos.keys() | lex.keys()}


# -- the searcher --------------------------------------------------------------------


_QUOTES = {'"': '"', "'": "'", "“": "”", "‘": "’", "«": "»", "„": "“", "`": "`"}


def unquoted(text: str) -> str:
    """The text inside one pair of quotes around all of it (straight, curly or guillemets); else the text."""
    text = text.strip()
    if len(text) > 2 and _QUOTES.get(text[0]) == text[-1]:
        return text[1:-1].strip()
    return text


class Searcher:
    """Search over one Store with one embedder; safe to share across threads."""

    def __init__(self, store: Store, embedder: Embedder, *, fusion: dict | None = None,
                 column_weights: tuple[float, ...] = COLUMN_WEIGHTS, candidates: int = CANDIDATES,
                 max_df: float = MAX_DF, posting_budget: int | None = None,
                 exact_limit: int = EXACT_LIMIT, index_cache: str | None = None,
                 graph_dtype: str = GRAPH_DTYPE, similar: dict | None = None,
                 rerank: dict | None = None, doc_terms_cache: int = DOC_TERMS_CACHE):
        self.store = store
        self.similar_settings = {**SIMILAR, **(similar or {})}
        self.rerank_settings = {**RERANK, **(rerank or {})}
        self.embedder = embedder
        self.fusion = dict(FUSION if fusion is None else fusion)
        self.column_weights = tuple(column_weights)
        self.candidates = candidates
        self.max_df = max_df
        self.posting_budget = posting_budget or POSTING_BUDGET.get(store.backend, POSTING_BUDGET["sqlite"])
        # Past exact_limit vectors, search is approximate; index_cache is where the graph is
        # saved so a restart loads it instead of building it again (None: never saved).
        self.exact_limit = exact_limit
        self.index_cache = index_cache
        self.graph_dtype = graph_dtype
        self._index: DenseIndex | None = None
        self._version: int | None = None
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._word_term: dict[str, str] = {}  # the tokenizer never changes: kept across versions
        self._term_df: dict[str, int] = {}  # reset when the paper count drifts (DF_DRIFT)
        self._df_papers = 0  # how many papers there were when _term_df was started
        self._executor: ThreadPoolExecutor | None = None
        # paper id -> (the text it was split from, (its words, where each index term stands))
        self._doc_terms: OrderedDict[str, tuple[str, tuple[list[str], dict]]] = OrderedDict()
        self._doc_terms_size = doc_terms_cache

    # -- state ----------------------------------------------------------------
    def warm(self) -> None:
        """Load the model(s) and the vectors now (the bot does this before connecting)."""
        load = getattr(self.embedder, "load", None)
        if load is not None:  # the document encoder too, when queries have their own
            load()
        self.embed_query("warm up")
        self.index()

    def index(self) -> DenseIndex:
        """The vector index, brought up to date with the rows changed since it was last loaded.

        One search reads it once and hands that snapshot to every step (their `index=`
        argument): the store is asked for its papers_version once per search, not once per step."""
        version = self.store.papers_version()
        with self._lock:
            if self._index is None or version != self._version:
                self._index, self._version = refresh(
                    self._index, self.store, self.embedder.name, self._version, version=version,
                    cache=self.index_cache, exact_limit=self.exact_limit, dtype=self.graph_dtype)
                n = len(self._index)
                if abs(n - self._df_papers) > DF_DRIFT * self._df_papers:
                    self._term_df, self._df_papers = {}, n
                else:  # a rare word's count is cheap to take again, and may have just changed from 0
                    self._term_df = {t: df for t, df in self._term_df.items() if df >= DF_KEEP}
            return self._index

    def _current(self, index: DenseIndex | None) -> DenseIndex:
        """The snapshot a search passed down, else the index as it is now (which also resets
        the document counts when papers changed)."""
        return self.index() if index is None else index

    def embed_query(self, text: str) -> np.ndarray:
        """The query's embedding, from a small LRU cache when the same text was asked before."""
        with self._lock:
            vec = self._cache.get(text)
            if vec is not None:
                self._cache.move_to_end(text)
                return vec
        # An embedder with a query path of its own (ONNX Runtime) is used through it.
        encode = getattr(self.embedder, "encode_queries", None) or self.embedder.encode
        vec = encode([text])[0]
        with self._lock:
            self._cache[text] = vec
            while len(self._cache) > QUERY_CACHE_SIZE:
                self._cache.popitem(last=False)
        return vec

    def _stats(self, words: Sequence[str], *, counts: bool = True) -> None:
        """Fill the caches for these words: their index terms and (counts) the terms' document counts."""
        with self._lock:
            todo = [w for w in dict.fromkeys(words)
                    if w not in self._word_term
                    or (counts and self._word_term[w] and self._word_term[w] not in self._term_df)]
        if not todo:
            return
        found = self.store.term_stats(todo, counts=counts)
        with self._lock:
            if len(self._word_term) > 200_000:
                self._word_term.clear()
            for w in todo:
                term, df = found.get(w, ("", 0))
                self._word_term[w] = term
                if term and counts:
                    self._term_df[term] = df

    def word_terms(self, words: Sequence[str]) -> dict[str, str]:
        """word -> its index term ('' when the tokenizer keeps nothing of it); cached."""
        self._stats(words, counts=False)  # terms never change with the papers: no version check needed
        with self._lock:
            return {w: self._word_term.get(w, "") for w in words}

    def terms(self, words: Sequence[str], *, index: DenseIndex | None = None) -> dict[str, tuple[str, int]]:
        """word -> (index term, papers holding it), cached until papers change."""
        self._current(index)  # resets the document counts when papers changed
        self._stats(words)
        with self._lock:
            return {w: (self._word_term.get(w, ""), self._term_df.get(self._word_term.get(w, ""), 0))
                    for w in words}

    def _papers_total(self, index: VectorIndex | None = None) -> int:
        return max(len(self.index() if index is None else index), 1)

    # -- lexical query planning -------------------------------------------------
    def query_phrases(self, text: str, *, max_terms: int = MAX_QUERY_TERMS,
                      index: DenseIndex | None = None) -> list[str]:
        """The phrases BM25 searches for: stopwords, repeats and near-universal words dropped.

        Long text keeps its rarest words. Hyphenated names ('G-NLL') stay phrases.
        """
        words = query_words(text)[:400]
        index = self._current(index)
        info = self.terms(list(dict.fromkeys(w for pieces in words for w in pieces)), index=index)
        n = self._papers_total(index)
        rare, common, seen = [], [], set()
        for pieces in words:
            if len(pieces) > 1:
                phrase = " ".join(pieces)
                if phrase in seen:
                    continue
                seen.add(phrase)
                # A phrase costs (and is as common as) its rarest word: 'state of the art'
                # reads every paper holding 'art', 'g nll' only the few holding 'nll'.
                dfs = [info[w][1] for w in pieces if info[w][0]]
                df = min(dfs, default=0)
                if dfs and df == 0:
                    continue  # one of its words is in no paper: it matches nothing
                (common if df > self.max_df * n else rare).append((df, phrase))
                continue
            word = pieces[0]
            term, df = info[word]
            if not term or term in seen or df == 0:
                continue  # a word no paper holds matches nothing: leave it to the embedding
            seen.add(term)
            if word in STOPWORDS:
                continue  # 'what is this' alone is left to the embedding
            (common if df > self.max_df * n else rare).append((df, word))
        chosen = sorted(rare or common, key=lambda x: x[0])[:max_terms]
        # FTS5 scores every paper holding any query word, so the rows to score are
        # bounded: rarest words first, common ones only while the budget lasts.
        kept, rows = [], 0
        for df, phrase in chosen:
            if rows + df > self.posting_budget:  # a word past the budget alone is left to the embedding
                break
            kept.append(phrase)
            rows += df
        return kept

    def distinctive_words(self, paper: Paper, most: int = SIMILAR["terms"], *,
                          index: DenseIndex | None = None) -> list[str]:
        """The paper's words that best tell it apart: frequent in it, rare elsewhere (tf x idf)."""
        words = [w for w in (x.lower() for x in _WORD.findall(_paper_text(paper)))
                 if w not in STOPWORDS and len(w) > 1 and not w.isdigit()]
        index = self._current(index)
        info = self.terms(list(dict.fromkeys(words)), index=index)
        n = self._papers_total(index)
        tf: dict[str, int] = {}
        surface: dict[str, str] = {}
        for w in words:
            term, df = info[w]
            if term and 2 <= df <= self.max_df * n:  # shared with another paper, yet not generic
                tf[term] = tf.get(term, 0) + 1
                surface.setdefault(term, w)
        repeated = {t: c for t, c in tf.items() if c >= SIMILAR_MIN_TF}
        tf = repeated if len(repeated) >= 5 else tf  # a short abstract repeats little
        score = {t: c * np.log(n / info[surface[t]][1]) for t, c in tf.items()}
        return [surface[t] for t in sorted(score, key=lambda t: (-score[t], t))[:most]]

    # -- rankers --------------------------------------------------------------
    def bm25(self, text: str, *, limit: int | None = None, collection: str | None = None,
             year: int | None = None, phrases: Sequence[str] | None = None,
             index: DenseIndex | None = None) -> list[tuple[str, float]]:
        """(id, lexical score) best first; empty when the text has no searchable words."""
        terms = self.query_phrases(text, index=index) if phrases is None else list(phrases)
        if not terms:
            return []
        return self.store.lexical_search(terms, weights=self.column_weights,
                                         limit=limit or self.candidates,
                                         collection=collection, year=year)

    def dense(self, text: str, *, limit: int | None = None, collection: str | None = None,
              year: int | None = None, index: DenseIndex | None = None) -> list[tuple[str, float]]:
        """(id, cosine) best first."""
        index = self._current(index)
        if not len(index):
            return []
        return index.search(self.embed_query(text), limit or self.candidates,
                            collection=collection, year=year)

    # -- public -----------------------------------------------------------------
    def search(self, query: str, *, limit: int = 5, collection: str | None = None,
               year: int | None = None, index: DenseIndex | None = None) -> list[Hit]:
        """Papers for free text, best first; EmptyQuery when there is nothing to search for.

        `index`: the snapshot of a search this one runs within (resolve's); else read once here."""
        text = clip_query(query or "")
        if not has_content(text):
            raise EmptyQuery("Type some words to search for.")
        if limit <= 0:
            return []
        return self._search(text, limit, collection, year, self._current(index))

    def _search(self, text: str, limit: int, collection: str | None, year: int | None,
                index: DenseIndex) -> list[Hit]:
        pool = max(self.candidates, limit)  # a script asking for 1000 hits gets 1000 candidates
        # SQLite and torch/numpy release the GIL: the lexical search runs while the query is embedded.
        lexical_job = self._pool().submit(self._lexical, text, collection, year, pool, index)
        qvec = self.embed_query(text)
        dense = index.search(qvec, pool, collection=collection, year=year) if len(index) else []
        exact, phrases, lexical = lexical_job.result()
        fused = fuse(lexical, dense, index=index, query_vec=qvec, **self.fusion)
        papers: dict[str, Paper] = {}
        cfg = self.rerank_settings
        if cfg["top"] and fused:
            head = sorted(fused, key=lambda pid: -fused[pid])[:cfg["top"]]
            papers = {p.id: p for p in self.store.get_papers(head)}  # _hits shows them from this read
            features = self.head_features(text, head, lexical=lexical, dense=dense, qvec=qvec,
                                          index=index, papers=papers)
            fused = reorder(fused, combine(features, cfg))
        return self._hits(lexical, dense, exact=exact, limit=limit, phrases=phrases, query=text,
                          index=index, qvec=qvec, fused=fused, papers=papers)

    def head_features(self, text: str, head: Sequence[str], *, lexical, dense, qvec: np.ndarray,
                      index: VectorIndex, papers: dict[str, Paper],
                      aspects: dict[str, np.ndarray] | None = None) -> dict[str, tuple[float, ...]]:
        """store.rerank.FEATURES of each head candidate: its cosine, its BM25 over the query's
        best, the query's coverage and proximity in its text, its aspects' gain over its cosine.

        aspects: the candidates' aspect vectors when the caller has them (else read here)."""
        cfg = self.rerank_settings
        words = [w for pieces in query_words(text)[:400] for w in pieces if w not in STOPWORDS]
        info = self.terms(list(dict.fromkeys(words)), index=index)  # cached by the query plan
        query = QueryTerms.of([info[w] for w in words], self._papers_total(index))
        if aspects is None:
            aspects = self.aspect_vectors(head) if cfg["aspect"] else {}
        cos, lex = dict(dense), dict(lexical)
        best = max(lex.values(), default=0.0) or 1.0
        texts = self.doc_terms([papers[pid] for pid in head if pid in papers])
        held = [pid for pid in head if pid in texts]
        cosines = []
        for pid in held:
            c = cos.get(pid)
            if c is None:
                vec = index.vector(pid)
                c = float(vec @ qvec) if vec is not None else 0.0
            cosines.append(c)
        gains = aspect_gains(qvec, [aspects.get(pid) for pid in held], cosines)
        out = {}
        for pid, c, gain in zip(held, cosines, gains):
            coverage, proximity = overlap(query, texts[pid][1], cfg["window"])
            out[pid] = (c, lex.get(pid, 0.0) / best, coverage, proximity, gain)
        return out

    def doc_terms(self, papers: Sequence[Paper]) -> dict[str, tuple[list[str], dict[str, list[int]]]]:
        """paper id -> (its lower-cased words in text order, where each of its index terms stands:
        store.rerank.positions). The last DOC_TERMS_CACHE papers' are kept, and words not seen
        before are looked up in one ask for all the papers."""
        out, todo = {}, []
        with self._lock:
            for paper in papers:
                text = _paper_text(paper)
                kept = self._doc_terms.get(paper.id)
                if kept is not None and kept[0] == text:
                    self._doc_terms.move_to_end(paper.id)
                    out[paper.id] = kept[1]
                else:
                    todo.append((paper.id, text))
        if not todo:
            return out
        todo = [(pid, text, _WORD.findall(text.lower())) for pid, text in todo]  # outside the lock
        known = self._word_term  # read without the lock: a dict lookup is atomic; misses are asked
        missing = [w for _, _, words in todo for w in words if w not in known]
        found = self.word_terms(list(dict.fromkeys(missing))) if missing else {}
        for pid, _text, words in todo:
            terms = list(map(known.get, words))
            if None in terms:  # asked just now (or the cache was cleared meanwhile)
                terms = [found.get(w, "") if t is None else t for w, t in zip(words, terms)]
            out[pid] = (words, positions(terms))
        with self._lock:
            for pid, text, _ in todo:
                self._doc_terms[pid] = (text, out[pid])
                self._doc_terms.move_to_end(pid)
            while len(self._doc_terms) > self._doc_terms_size:
                self._doc_terms.popitem(last=False)
        return out

    def _lexical(self, text: str, collection: str | None, year: int | None, limit: int, index: DenseIndex):
        exact = self._exact(text, collection, year, index)
        phrases = self.query_phrases(text, index=index)
        return exact, phrases, self.bm25(text, phrases=phrases, collection=collection, year=year,
                                         limit=limit)

    def _pool(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="search")
            return self._executor

    def similar(self, paper_id: str, *, limit: int = 5) -> list[Hit]:
        """Other papers closest to this one: its vector, its distinctive words and its aspects."""
        paper = self.store.get_paper(paper_id)
        if paper is None:
            raise PaperNotFound(f"No paper with id '{paper_id}'.")
        if limit <= 0:
            return []
        return self._similar(paper, limit, self.index())

    def _similar(self, paper: Paper, limit: int, index: DenseIndex) -> list[Hit]:
        cfg = self.similar_settings
        vec = index.vector(paper.id)
        if vec is None:  # not embedded yet (ingested with --no-embed)
            vec = self.embed_query(clip_query(_paper_text(paper)))
        pool = max(self.candidates, limit)
        dense = index.search(vec, pool + 1, exclude=paper.id) if len(index) else []
        phrases = self.distinctive_words(paper, cfg["terms"], index=index)
        lexical = [(pid, s) for pid, s in self.bm25("", phrases=phrases, limit=pool + 1)
                   if pid != paper.id] if cfg["bm25_weight"] else []
        fusion = {**FUSION, "method": "score", "bm25_weight": cfg["bm25_weight"],
                  "dense_weight": cfg["dense_weight"]}
        extra = None
        if cfg["aspect_weight"]:
            cands = list(dict.fromkeys([p for p, _ in dense] + [p for p, _ in lexical]))
            extra = {pid: cfg["aspect_weight"] * s
                     for pid, s in self.aspect_scores(paper, cands, dense, lexical, index, vec).items()}
        return self._hits(lexical, dense, exact=None, limit=limit, phrases=phrases, query="",
                          index=index, qvec=vec, fusion=fusion, extra=extra)

    def aspect_vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """paper id -> its current aspect vectors (3, d) (zero rows for an absent aspect); one read."""
        flat = self.store.vectors_of(aspect_model(self.embedder.name), ids)
        return {pid: v.reshape(len(ASPECTS), -1) for pid, v in flat.items() if len(v) % len(ASPECTS) == 0}

    def aspect_scores(self, paper: Paper, cands: Sequence[str], dense, lexical, index: VectorIndex,
                      vec: np.ndarray) -> dict[str, float]:
        """Candidate -> the best cosine between one of the paper's aspects and one of the
        candidate's ('best'), or the mean over the paper's aspects of each one's best match
        ('mean'), as SIMILAR's aspect_match says. A candidate without aspect vectors gets its
        whole-paper cosine."""
        stored = self.aspect_vectors([paper.id, *cands])  # one round trip for all
        mine = stored.get(paper.id)
        if mine is None:  # ingested before aspects existed: encode this one paper's now
            texts = aspect_texts(paper.abstract)
            mine = np.zeros((len(ASPECTS), len(vec)), dtype=np.float32)
            present = [i for i, t in enumerate(texts) if t]
            if present:
                mine[present] = self.embedder.encode([clip_query(texts[i]) for i in present])
        held = np.linalg.norm(mine, axis=1) > 0
        if not held.any():
            return {}
        cos = dict(dense)
        out = {}
        for pid in cands:
            other = stored.get(pid)
            if other is None or not (np.linalg.norm(other, axis=1) > 0).any():
                c = cos.get(pid)
                if c is None:
                    v = index.vector(pid)
                    c = float(v @ vec) if v is not None else 0.0
                out[pid] = c
                continue
            sims = mine[held] @ other.T  # (my aspects, theirs); absent aspects are zero rows
            sims[:, ~(np.linalg.norm(other, axis=1) > 0)] = -1.0
            best = sims.max(axis=1)  # each of my aspects' best match among theirs
            out[pid] = float(best.max() if self.similar_settings["aspect_match"] == "best" else best.mean())
        return out

    def resolve(self, ref: str) -> tuple[Paper, bool]:
        """The one way to turn a reference into a paper: id, short name, arXiv id or paper link (exact:
        True; PaperNotInLibrary for a link to a paper the library lacks), else the best search hit (False) when it shares a word or its cosine clears RESOLVE_MIN_COSINE.

        PaperNotFound when nothing qualifies (or the reference has nothing to search for)."""
        ref = (ref or "").strip()
        if not ref:
            raise PaperNotFound("Name a paper: its id, short name or some words from it.")
        return self._resolve(ref, self.index())

    def _resolve(self, ref: str, index: DenseIndex) -> tuple[Paper, bool]:
        paper = self.find_exact(ref, index=index)
        if paper:
            return paper, True
        paper = self.linked(ref)
        if paper is not None:
            return paper, True
        if ref.lstrip("#").isdigit():  # a card's place in a list: searched, it would match any paper saying "1"
            raise PaperNotFound(f"{ref} is a number in a list, not a paper: give the paper's id (as its card "
                                "shows it), its short name, or a few words from it.")
        try:
            hits = self.search(ref, limit=1, index=index)
        except EmptyQuery:
            raise PaperNotFound("Name a paper: its id, short name or some words from it.") from None
        # A best guess needs some evidence: a shared word, or a clearly close meaning.
        if not hits or (hits[0].bm25_rank is None and (hits[0].dense_score or 0) < RESOLVE_MIN_COSINE):
            near = self._near_miss(ref, index)
            raise PaperNotFound(f"No paper matches '{ref[:80]}'." +
                                (f" Did you mean {near.id} ({near.short_name})?" if near else ""))
        return hits[0].paper, False

    def linked(self, ref: str) -> Paper | None:
        """The paper a reference that can only name a paper (an arXiv id or link, an openreview.net link)
        names; PaperNotInLibrary when the library lacks it; None when `ref` is no such reference.
        Its words ("https", "abs") would find some other paper: searched or resolved, never a guess."""
        link = paper_link(ref)
        if link is None:
            return None
        paper = known_paper(self.store, link)
        if paper is None:
            raise PaperNotInLibrary(*link)
        return paper

    def _near_miss(self, ref: str, index: DenseIndex) -> Paper | None:
        """The paper whose id or short name is one slip away from a one-word reference
        ('6dwp7' for '6dwp7x'), or None."""
        import difflib

        ref = ref.strip().lower()
        if not ref or len(ref) > 40 or " " in ref:
            return None
        current = self._current(index)
        # Same first character and about the same length: a typo, without a pass over everything.
        ids = [i for i in current.row if i[:1] == ref[:1] and abs(len(i) - len(ref)) <= 1]
        names = [n for n in current.names if n[:1] == ref[:1] and abs(len(n) - len(ref)) <= 2]
        close = difflib.get_close_matches(ref, ids + names, n=1, cutoff=0.8)
        if not close:
            return None
        return self.store.get_paper(current.names.get(close[0], close[0]))

    def find_exact(self, ref: str, *, index: DenseIndex | None = None) -> Paper | None:
        """A paper by id or short name, case-insensitive, latest update winning; None otherwise.

        Names are kept in memory (no table scan); resolve() starts here. A name in quotes ("SPIKE",
        “SPIKE”, as phones and Macs type them) is that name."""
        ref = " ".join(unquoted(ref or "").split()).lower()
        if not ref or len(ref) > 200:
            return None
        paper = self.store.get_paper(ref)
        if paper is None:
            pid = self._current(index).names.get(ref)
            paper = self.store.get_paper(pid) if pid else None
        return paper

    def _exact(self, text: str, collection: str | None, year: int | None, index: DenseIndex) -> Paper | None:
        paper = self.find_exact(text, index=index)
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

    def _hits(self, lexical, dense, *, exact: Paper | None, limit: int, phrases: Sequence[str],
              query: str, index: VectorIndex, qvec: np.ndarray, fusion: dict | None = None,
              extra: dict[str, float] | None = None, fused: dict[str, float] | None = None,
              papers: dict[str, Paper] | None = None) -> list[Hit]:
        if fused is None:
            fused = fuse(lexical, dense, index=index, query_vec=qvec, **(fusion or self.fusion))
        if extra:  # further score parts (similar's aspects), added to the fused score
            fused = {pid: fused.get(pid, 0.0) + extra.get(pid, 0.0) for pid in fused.keys() | extra.keys()}
        order = sorted(fused, key=lambda pid: -fused[pid])
        if exact is not None:
            order = [exact.id] + [pid for pid in order if pid != exact.id]
        order = order[:limit]
        known = papers or {}
        papers = {pid: known[pid] for pid in order if pid in known}  # read by the re-rank already
        papers.update((p.id, p) for p in self.store.get_papers([pid for pid in order if pid not in known]))
        lex_rank = {pid: i for i, (pid, _) in enumerate(lexical, start=1)}
        # Each keyword hit's words and their index terms: kept from the re-rank, or looked up
        # for all of them at once (one round trip, not one per hit).
        words = self.doc_terms([papers[pid] for pid in order if pid in lex_rank and pid in papers])
        dense_rank = {pid: i for i, (pid, _) in enumerate(dense, start=1)}
        lex_score, dense_score = dict(lexical), dict(dense)
        top = max(fused.values(), default=1.0) or 1.0
        hits = []
        for pid in order:
            paper = papers.get(pid)
            if paper is None:
                continue
            is_exact = exact is not None and pid == exact.id
            cos = dense_score.get(pid)
            if cos is None and (vec := index.vector(pid)) is not None:
                cos = float(vec @ qvec)
            hit = Hit(paper=paper, score=(1.0 if is_exact else fused.get(pid, 0.0) / top),
                      why="", bm25_rank=lex_rank.get(pid), dense_rank=dense_rank.get(pid),
                      dense_score=cos, bm25_score=lex_score.get(pid), exact=is_exact,
                      terms=self._matched(phrases, *words[pid]) if pid in lex_rank else [])
            hit.why = explain(hit, query)
            hits.append(hit)
        return hits

    def _matched(self, phrases: Sequence[str], words: Sequence[str], held: Container[str],
                 most: int = 4) -> list[str]:
        """The query's words and phrases a paper holds (its lower-cased words and the index
        terms it holds), rarest first."""
        flat = " " + " ".join(words) + " "
        singles = [p for p in phrases if " " not in p]
        info = self.terms(singles)  # cached by the query plan
        found = [(0, p.replace(" ", "-")) for p in phrases if " " in p and f" {p} " in flat]
        found += [(info[w][1], w) for w in singles if info[w][0] in held]
        return [w for _, w in sorted(found)[:most]]


def _paper_text(paper: Paper) -> str:
    return " ".join(x for x in (paper.short_name, paper.headline, paper.title, paper.abstract) if x)


def explain(hit: Hit, query: str) -> str:
    """One line for the user: why this paper came up."""
    if hit.exact:
        return "id match" if query.strip().lower() == hit.paper.id else "name match"
    parts = []
    if hit.terms:
        parts.append("keywords: " + ", ".join(hit.terms))
    if hit.dense_score is not None and ((hit.dense_rank or 99) <= 10 or not parts):
        parts.append(closeness(hit.dense_score))
    return "; ".join(parts) or "loosely related"


def hits_json(store: Store, hits: Sequence[Hit]) -> list[dict]:
    """The JSON of `search`/`similar --json`: each hit with its title and the paper's source ids.

    `source_ids` holds the `id` the input file gave and the arXiv id, DOI and OpenReview id
    where known, so a script can join results back to its own data."""
    keys = store.paper_keys(h.paper.id for h in hits)
    return [{**h.to_dict(), "source_ids": source_ids(keys.get(h.paper.id, []))} for h in hits]
