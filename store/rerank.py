"""A second look at a search's best fused candidates: what the query shares with each (issue 19).

A known-item query (a TLDR, a half-remembered description) tends to name most of what its
paper is about, often in the same order. Fusion sees each query word on its own (BM25) or the
whole query as one vector (cosine); it does not see how much of the query a paper holds, nor
whether the query's words stand together in it. For the `top` best fused candidates the score
becomes

    cosine + bm25_weight x BM25 / best BM25
           + coverage  x the share of the query's idf mass the paper holds
           + proximity x the share (idf-weighted) of the query's near word pairs (neighbours,
                         and at SKIP_PAIR words one apart) that stand within `window` words
                         of each other in the paper
           + aspect    x how far the best of the paper's aspect vectors (background / method /
                         result) beats its own cosine to the query

and those candidates go first, in that order; the rest keep their fused order after them.
Everything here is computed from text and vectors the search has already read: the head's
papers (read once, and shown from the same read) and its aspect vectors (one read).
"""
from __future__ import annotations

import math
from bisect import bisect_left
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

# Chosen with `bench/search_quality.py --rerank` on SciTLDR train (abstracts only; train and dev
# abstracts in one store, 2.6k papers; 1,152 settings), checked on dev. MRR@10, train / dev:
#   fusion alone (today's search before the re-rank)      0.9246 / 0.8680
#   these settings, head of 10                            0.9345 / 0.8811
#   the best on train, head of 20                         0.9350 / 0.8812
#   coverage only (cosine + 0.1 BM25 + 0.4 coverage)      0.9293 / 0.8748
# A head of 10 is as good as 20 and reads half the papers. The window (2-8 words) and
# ordered pairs changed dev by -0.002..+0.001; squared idf in the coverage lost 0.003.
# top=0 turns the re-rank off.
RERANK = {"top": 10, "bm25_weight": 0.1, "coverage": 0.4, "proximity": 0.2, "window": 4, "aspect": 0.3}
# Query words one apart count as a pair at this weight beside the neighbours ('graph ... for
# molecules' and 'neural ... molecules' both say something). Each with its best weights on
# train (head of 20): neighbours only 0.9339 / 0.8792, with these pairs 0.9350 / 0.8812.
SKIP_PAIR = 0.5
FEATURES = ("cosine", "bm25", "coverage", "proximity", "aspect")


@dataclass(frozen=True)
class QueryTerms:
    """A query's content terms (index terms, stopwords gone) with their idf, and its word pairs."""

    idf: dict[str, float]
    pairs: tuple[tuple[str, str, float], ...]  # near terms in the query (neighbours, one apart), weight
    mass: float  # the idf of every distinct term, summed

    @classmethod
    def of(cls, terms: Sequence[tuple[str, int]], papers: int) -> "QueryTerms":
        """From the query's (term, papers holding it) in query order; a term no paper holds is left out."""
        n = max(papers, 1)
        idf: dict[str, float] = {}
        order = []
        for term, df in terms:
            if not term or df <= 0:
                continue
            idf.setdefault(term, math.log(1 + (n - df + 0.5) / (df + 0.5)))
            order.append(term)
        pairs = tuple((a, b, weight * (idf[a] + idf[b]) / 2)
                      for gap, weight in ((1, 1.0), (2, SKIP_PAIR))
                      for a, b in zip(order, order[gap:]) if a != b)
        return cls(idf=idf, pairs=pairs, mass=sum(idf.values()))


def _near(a: Sequence[int], b: Sequence[int], window: int) -> bool:
    """True when some position in a and some in b (both sorted) are at most window apart."""
    for i in a:
        k = bisect_left(b, i - window)
        if k < len(b) and b[k] <= i + window:
            return True
    return False


def positions(doc: Sequence[str]) -> dict[str, list[int]]:
    """term -> where it stands in a paper given as its index terms in order (kept with the paper)."""
    where: dict[str, list[int]] = {}
    for i, term in enumerate(doc):
        where.setdefault(term, []).append(i)
    return where


def overlap(query: QueryTerms, where: Mapping[str, Sequence[int]], window: int) -> tuple[float, float]:
    """(coverage, proximity) of a paper, given as its terms' positions (`positions`)."""
    if not query.mass:
        return 0.0, 0.0
    idf = query.idf
    coverage = sum(v for t, v in idf.items() if t in where) / query.mass
    total = sum(w for _, _, w in query.pairs)
    if not total:
        return coverage, 0.0
    found = sum(w for a, b, w in query.pairs
                if a in where and b in where and _near(where[a], where[b], window))
    return coverage, found / total


def aspect_gains(query_vec: np.ndarray, aspects: Sequence[np.ndarray | None],
                 cosines: Sequence[float]) -> list[float]:
    """For each paper, how far the best of its aspect vectors (3, d) beats its own cosine: one
    product for all of them; 0 for a paper without aspect vectors (None, or all zero rows)."""
    held = [i for i, a in enumerate(aspects) if a is not None]
    out = [0.0] * len(aspects)
    if not held:
        return out
    stack = np.stack([aspects[i] for i in held])  # (papers, 3, d)
    sims = stack @ np.asarray(query_vec, dtype=stack.dtype)
    sims[np.abs(stack).sum(axis=2) == 0] = -np.inf  # an absent aspect is a zero row
    best = sims.max(axis=1)
    for k, i in enumerate(held):
        if np.isfinite(best[k]):
            out[i] = max(0.0, float(best[k]) - cosines[i])
    return out


def combine(features: Mapping[str, Sequence[float]], settings: Mapping[str, float]) -> dict[str, float]:
    """Each candidate's re-rank score from its FEATURES."""
    w = (1.0, settings["bm25_weight"], settings["coverage"], settings["proximity"], settings["aspect"])
    return {pid: sum(a * b for a, b in zip(w, f)) for pid, f in features.items()}


def reorder(fused: Mapping[str, float], head: Mapping[str, float]) -> dict[str, float]:
    """fused with the head's scores replaced by theirs, every other candidate kept below them in
    its fused order (shifted down by one amount, so the gaps between them stay as they were)."""
    out = dict(head)
    rest = {pid: s for pid, s in fused.items() if pid not in head}
    if head and rest:
        shift = max(0.0, max(rest.values()) - min(head.values()) + 1e-6)
        out.update((pid, s - shift) for pid, s in rest.items())
    else:
        out.update(rest)
    return out
