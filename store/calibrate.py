"""A calibration round: a few papers near a member's interest but spread across it, to rate first.

A new interest, above all a vague one ("machine learning"), tells the pick little: the member's
first weeks of papers are guesses. A calibration round asks instead. It takes the `pool` papers
the pick itself finds closest to the interest (`store.pick.interest_scores`: the cosine after
pseudo-relevance feedback plus a little BM25, and how typical a paper is of the library, as on the
member's turns) and chooses `size` of
them by maximal marginal relevance, so the round covers the interest's corners rather than
eight near-copies of its centre. Papers the member already judged (any reaction, any verdict)
or saved are left out; so is a paper an interest was seeded from.

The member answers with the verdict buttons every paper card carries (store.feedback.record_verdict):
each answer is their 👍 / 👎 on that paper, which their turns of the paper of the day learn from.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Sequence

import numpy as np

from .daily import interest_lexical, interests_for, library_typicality, library_vectors
from .feedback import current_reactions
from .paper import Paper
from .pick import Interest, PickSettings, Relevance, interest_scores, is_broad, turn_relevance

if TYPE_CHECKING:
    from .base import Store
    from .search import Searcher

ROUND_SIZE = 8  # papers in a round (the issue asks for six to eight)
POOL = 40  # the papers closest to the interest that the round is chosen from (a tenth of a small library)
# Relevance against spread in the greedy choice (1: the `size` closest papers, 0: the most spread).
# all-MiniLM-L6-v2, eight topics from "machine learning" to "large language models", means over them
# (ICLR 2024 / NeurIPS 2023 from ../shared/eval, chosen on neither): the eight closest have a mean
# pairwise cosine of 0.565 / 0.570 and a mean cosine to the topic of 0.504 / 0.507; lambda 0.7 gives
# 0.547 / 0.539 and 0.505 / 0.508, 0.5 gives 0.511 / 0.505 and 0.499 / 0.500, 0.3 gives 0.480 / 0.479
# and 0.482 / 0.481. 0.5: most of the spread for a hundredth of relevance. Whether one round teaches
# a vague interest enough is the bench's question (issue 30.1): in a crude simulation (a member's real
# topic one of the labelled topic classes, answering 👍 to its papers and 👎 to the rest) one round of
# eight held a paper of the member's class for 0.09 / 0.17 of them with "machine learning", and wider
# pools (600 papers, lambda 0.3) did not do better on both datasets (0.27 / 0.04): noise at this size.
SPREAD_LAMBDA = 0.5


@dataclass(frozen=True)
class CalibrationRound:
    """The papers of one calibration round and what they were chosen for.

    interests: what the round is near (empty: the member has none here and named no topic).
    judged: how many of the closest papers were left out because the member judged them already.
    broad: every interest is as wide as the library (`is_broad`): the round's papers are
    typical ones from across it, not near the interests' words.
    """

    papers: list[Paper] = field(default_factory=list)
    interests: list[Interest] = field(default_factory=list)
    judged: int = 0
    broad: bool = False

    @property
    def topic(self) -> str:
        return ", ".join(it.text for it in self.interests)


def spread_choice(matrix: np.ndarray, relevance: np.ndarray, rows: Sequence[int], size: int,
                  lam: float = SPREAD_LAMBDA) -> list[int]:
    """`size` of `rows` chosen greedily by maximal marginal relevance, most relevant first:
    each next one maximises lam x relevance - (1 - lam) x its highest cosine to those chosen."""
    rows = list(rows)
    if not rows or size <= 0:
        return []
    cand = np.asarray(rows)
    rel = np.asarray(relevance, dtype=np.float32)[cand]
    closest = np.full(len(cand), -np.inf, dtype=np.float32)
    free = np.ones(len(cand), dtype=bool)
    chosen: list[int] = []
    for _ in range(min(size, len(cand))):
        score = np.where(free, lam * rel - (1 - lam) * np.maximum(closest, 0.0), -np.inf)
        if not chosen:
            score = np.where(free, rel, -np.inf)
        k = int(np.argmax(score))
        chosen.append(int(cand[k]))
        free[k] = False
        closest = np.maximum(closest, matrix[cand] @ matrix[cand[k]])
    return chosen


def round_rows(ids: Sequence[str], matrix: np.ndarray, interests: Sequence[Interest], *,
               exclude: set[str] = frozenset(), lexical=None, settings: PickSettings = PickSettings(),
               size: int = ROUND_SIZE, pool: int = POOL, lam: float = SPREAD_LAMBDA,
               typical: np.ndarray | None = None, scores: Relevance | None = None) -> tuple[list[int], int]:
    """(rows of the round's papers, how many of the `pool` closest were excluded): pure, over vectors.

    Relevance is the pick's own on a member's turn: a paper's best score over `interests`
    (`interest_scores`, or `scores` when the caller has them) plus `typical_weight` x its
    `typical`ity when given; the round is chosen from the `pool` most relevant papers not in `exclude`."""
    if not len(ids) or not interests:
        return [], 0
    matrix = np.asarray(matrix, dtype=np.float32)
    hybrid = (scores if scores is not None else interest_scores(matrix, ids, interests, lexical, settings)).hybrid
    relevance = turn_relevance(hybrid, typical, settings)
    order = np.argsort(-relevance, kind="stable")
    # Near means near: in a small library the `pool` closest would be most of it.
    pool = min(pool, max(2 * size, len(ids) // 10))
    top = order[:pool]
    dropped = sum(1 for i in top if ids[i] in exclude)
    open_rows = [int(i) for i in order if ids[i] not in exclude][:pool]
    return spread_choice(matrix, relevance, open_rows, size, lam), dropped


def judged_by(store: Store, user: str, *, now: float) -> set[str]:
    """Papers the member already told us about: a standing reaction or verdict, or on their list."""
    standing = current_reactions(store.reactions(user=user, before=now))
    return {r["paper_id"] for r in standing} | {r["paper_id"] for r in store.saved_papers(user)}


def calibration_round(store: Store, searcher: Searcher, channel: str, user: str, *, now: float,
                      topic: str | None = None, interest_id: int | None = None,
                      size: int = ROUND_SIZE, pool: int = POOL,
                      settings: PickSettings | None = None) -> CalibrationRound:
    """A calibration round for `user` in `channel`.

    Near one of the channel's interests (`interest_id`), a topic in words (the member's own interest
    of that text if they have one, else the words themselves), or, with neither, every interest the
    member added in this channel. An empty Round (no interests) when there is nothing to be near.
    """
    settings = settings or PickSettings()
    interests = interests_for(store, channel, searcher.embedder)
    if interest_id is not None:
        chosen = [it for it in interests if it.id == interest_id]
    elif topic and topic.strip():
        text = " ".join(topic.split())
        chosen = [it for it in interests if it.added_by == user and it.text.casefold() == text.casefold()][:1]
        if not chosen:
            chosen = [Interest(-1, text, user, searcher.embed_query(text))]
    else:
        chosen = [it for it in interests if it.added_by == user]
    if not chosen:
        return CalibrationRound()
    ids, matrix = library_vectors(store, searcher)
    lexical = interest_lexical(searcher, chosen, settings) if settings.lexical_weight else None
    exclude = judged_by(store, user, now=now) | {it.paper_id for it in chosen if it.paper_id}
    typical = library_typicality(searcher, ids, matrix, settings)
    scores = interest_scores(np.asarray(matrix, dtype=np.float32), ids, chosen, lexical, settings) if len(ids) else None
    rows, dropped = round_rows(ids, matrix, chosen, exclude=exclude, lexical=lexical, settings=settings,
                               size=size, pool=pool, typical=typical, scores=scores)
    papers = {p.id: p for p in store.get_papers([ids[i] for i in rows])}
    # Each interest's weight is told against the library and says how wide it is; typicality ranks
    # in its place exactly where the weights apply (`areas_show`).
    broad = scores is not None and bool(is_broad(scores.weight).all())
    return CalibrationRound([papers[ids[i]] for i in rows if ids[i] in papers], chosen, dropped, broad)
