"""A member's learned taste: how the team's reactions move each member's turns (`FeedbackModel`),
the library they are measured against (`Library`), arxiv-sanity's per-member classifier in closed
form (`taste_classifier`) and the rank fusion that gives it its say (`rank_fusion`). store/pick.py
uses them on every member's turn; the recipe and the runs behind it: docs/pick-tuning.md.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Protocol, Sequence

import numpy as np


class TasteSettings(Protocol):
    """What the taste reads of the pick's settings (store.pick.PickSettings has them all)."""

    feedback_strength: float
    feedback_contrast: float
    fusion_k: float
    taste_min_likes: int
    taste_ridge: float
    taste_background: int


@dataclass(frozen=True)
class Reacted:
    """How a channel reacted to a paper it was shown (built by store/feedback.py).

    by_member: each member's signed weight for it, already decayed by age.
    The rest is for the explanation: "close to *SPIKE*, which got 🔥×2 from @bob".
    """

    by_member: Mapping[str, float]
    name: str = ""
    praise: str = ""  # the positive reactions as they read, "🔥×2 · 👍"
    fans: tuple[str, ...] = ()
    complaints: str = ""  # the negative ones, "😴"
    critics: tuple[str, ...] = ()


def _people(members: Sequence[str], limit: int = 3) -> str:
    """'@a', '@a and @b', '@a, @b and 2 others' (ids as @U..., turned into mentions by explain)."""
    names = [f"@{m}" for m in members]
    if len(names) > limit:
        names = names[:limit - 1] + [f"{len(names) - limit + 1} others"]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]



class Library:
    """The whole library a pick's candidates come from: every paper's id and L2-normalised vector (rows
    align), its `row_map`, and what a member's learned taste is measured against, its mean vector and
    `library_moments`, each made when first needed. store/daily.py keeps one per library version, so
    the moments (about 20 ms at 10k papers) are made once, not once a pick."""

    def __init__(self, ids: Sequence[str], matrix: np.ndarray, row: Mapping[str, int] | None = None):
        self.ids = ids
        self.matrix = np.asarray(matrix, dtype=np.float32)
        self.row = row_map(ids) if row is None else row
        self._mean: np.ndarray | None = None
        self._moments: np.ndarray | None = None

    @property
    def mean(self) -> np.ndarray:
        if self._mean is None:
            self._mean = self.matrix.mean(axis=0) if len(self.matrix) else np.zeros(self.matrix.shape[1],
                                                                                   dtype=np.float32)
        return self._mean

    @property
    def moments(self) -> np.ndarray:
        if self._moments is None:
            self._moments = library_moments(self.matrix)
        return self._moments

    def row_of(self, ids: Sequence[str]) -> Mapping[str, int]:
        """`row_map(ids)`: the library's own when `ids` are its papers in its order."""
        return self.row if ids is self.ids or list(ids) == list(self.ids) else row_map(ids)


class FeedbackModel:
    """What `feedback` does to each paper's relevance on a member's turn (None: the team's day).

    Direct adjustments (number or (number, reason) values) are added as given.
    Reactions (`Reacted` values) are learned per member as Rocchio moves a
    query: a paper's relevance to the member's stated interest gains
    `feedback_strength` x how far it lies along what sets the papers they
    liked apart from the library (the weighted mean of their likes, 🔥
    counting double through its weight, less the library's mean (`Library.mean`):
    every abstract shares a direction, "this is ML", which would otherwise
    make the lift mostly how ML-like a paper is)
    and loses `feedback_strength` x `feedback_contrast` x its cosine
    to the mean of those they disliked. The stated interest keeps its whole
    say however long the record (Rocchio keeps the query), and a member's
    dislikes teach on their own: for a vague interest ("machine learning") a
    few 👎 are most of what there is to learn. A member's reactions shape their
    own turns; exploration and breadth days (member None) use the whole team's,
    its likes' mean as it is (it mixes the members' topics).
    """

    def __init__(self, ids: Sequence[str], matrix: np.ndarray, feedback, settings: TasteSettings,
                 row: Mapping[str, int] | None = None, library: Library | None = None):
        n = len(ids)
        self.settings = settings
        self.matrix = matrix
        # The whole library the candidates come from: a taste is measured against it, and a reacted
        # paper that is not a candidate (on a day of fresh papers the team's reactions are all on
        # older ones) is read from it. None: the candidates are the library.
        self.library = library if library is not None else Library(ids, matrix, row)
        self._learned: dict[str, np.ndarray] = {}
        self.direct = np.zeros(n, dtype=np.float32)
        self.notes: dict[int, str] = {}
        lib = self.library
        row = lib.row_of(ids) if row is None else row
        sources: list[tuple[int, Reacted, int | None]] = []  # library row, reactions, candidate row
        for pid, value in (feedback or {}).items():
            if isinstance(value, Reacted):
                if value.by_member and pid in lib.row:
                    sources.append((lib.row[pid], value, row.get(pid)))
                continue
            i = row.get(pid)
            if i is None:
                continue
            if isinstance(value, tuple):
                value, note = value
                if note:
                    self.notes[i] = note
            self.direct[i] = float(value)
        sources.sort(key=lambda s: s[0])  # the same pick whatever order the mapping came in
        self.sources = [r for _, r, _ in sources]
        self.src = lib.matrix[[j for j, _, _ in sources]].astype(matrix.dtype, copy=False)  # their vectors
        self._rows = [i for _, _, i in sources]
        self.active = bool(sources) or bool(self.direct.any())
        names = sorted({m for _, r, _ in sources for m in r.by_member})
        self.weights = {m: np.array([r.by_member.get(m, 0.0) for _, r, _ in sources], dtype=np.float32)
                        for m in names}
        self._cache: dict[str | None, tuple] = {}

    def _voice(self, member: str | None) -> np.ndarray | None:
        """Signed weights per reacted paper for this member (None: every member's, summed)."""
        if member is None:
            return sum(self.weights.values()) if self.weights else None
        return self.weights.get(member)

    def _parts(self, member: str | None) -> tuple[np.ndarray | None, np.ndarray | None]:
        """(what the likes add to each paper or None, what the dislikes take off or None)."""
        if member in self._cache:
            return self._cache[member]
        w = self._voice(member)
        lift, sink = None, None
        if w is not None:
            st = self.settings
            pos, neg = np.maximum(w, 0), np.minimum(np.maximum(-w, 0), 1.0)
            src = self.src
            if pos.sum() > 0:
                liked = pos @ src / pos.sum()
                # One member's likes are one taste: what sets it apart from the library is the signal.
                # The team's (None) mix its members' topics, which centring would cancel against each
                # other: what they share is the signal there (bench/feedback.py's replay, P@1: 0.72
                # uncentred, 0.47 as posted, 0.40 when the team's likes were centred and whitened).
                lift = st.feedback_strength * (self.matrix @ liked if member is None
                                               else self.matrix @ (liked - self.library.mean))
            if neg.sum() > 0:
                sink = st.feedback_strength * st.feedback_contrast * (self.matrix @ (neg @ src / neg.sum()))
        self._cache[member] = (lift, sink)
        return self._cache[member]

    def judged(self, member: str) -> list[int]:
        """The candidates `member` judged against (a 👎, a Not for me, standing): never theirs again."""
        w = self.weights.get(member, ())
        return [i for i, v in zip(self._rows, w) if i is not None and v < 0]

    def classifies(self, member: str | None) -> bool:
        """Whether the member's turns are fused with their `taste_classifier`: `fusion_k` on and at
        least `taste_min_likes` papers they liked."""
        if member is None or not self.settings.fusion_k:
            return False
        w = self.weights.get(member)
        return w is not None and int((w > 0).sum()) >= max(1, self.settings.taste_min_likes)

    def learned(self, member: str | None, anchors: np.ndarray) -> np.ndarray | None:
        """Every paper's score by the member's `taste_classifier` (`anchors`: their interests' vectors,
        the same on every call for a member), None unless `classifies(member)`."""
        if not self.classifies(member):
            return None
        if member not in self._learned:
            w, src = self.weights[member], self.src
            coef = taste_classifier(np.vstack([anchors, src[w > 0]]), src[w < 0], self.library.moments,
                                    self.settings.taste_background, self.settings.taste_ridge)
            self._learned[member] = self.matrix @ coef[:-1].astype(np.float32) + np.float32(coef[-1])
        return self._learned[member]

    def for_member(self, member: str | None) -> np.ndarray:
        """What to add to each paper's stated-interest relevance on the member's turn (None: the team's)."""
        adjust = self.direct.copy()
        if not self.sources:
            return adjust
        lift, sink = self._parts(member)
        if lift is not None:
            adjust += lift
        if sink is not None:
            adjust -= sink
        return adjust.astype(np.float32)

    def taste_vectors(self, member: str | None = None) -> list[np.ndarray]:
        """The learned taste as a unit vector per member (None: every member with likes)."""
        out = []
        for m in ([member] if member is not None else list(self.weights)):
            w = self.weights.get(m)
            if w is not None and (w > 0).any():
                centre = np.maximum(w, 0) @ self.src
                out.append(centre / np.linalg.norm(centre))
        return out

    def why(self, chosen: int, instead: int | None, member: str | None) -> str | None:
        """Which reactions made `chosen` beat `instead` (the pick without feedback), in team terms."""
        if not self.sources or instead is None or instead == chosen:
            return self.notes.get(chosen)
        likes, dislikes = self._parts(member)
        lift = float(likes[chosen] - likes[instead]) if likes is not None else 0.0
        sink = float(dislikes[instead] - dislikes[chosen]) if dislikes is not None else 0.0
        if lift <= 0 and sink <= 0:
            if not self.classifies(member):
                return self.notes.get(chosen)
            lift = 1.0  # the member's classifier (`learned`) moved it: their likes, trained on, did
        w = self._voice(member)
        liked = lift >= sink
        target = chosen if liked else instead
        sims = self.src @ self.matrix[target]
        score = (np.maximum(w, 0) if liked else np.maximum(-w, 0)) * sims
        top = [j for j in np.argsort(-score, kind="stable")[:2] if score[j] > 0]
        if len(top) == 2 and (not liked or sims[top[1]] < 0.8 * sims[top[0]]):
            top = top[:1]  # name a second liked paper only when it is about as close
        if not top:
            return self.notes.get(chosen)
        r = self.sources[top[0]]
        names = " and ".join(f"*{self.sources[j].name}*" for j in top)
        if liked and r.fans:
            fans = list(dict.fromkeys(f for j in top for f in self.sources[j].fans))
            return f"close to {names}, which got {r.praise} from {_people(fans)}"
        if not liked and r.critics:
            return f"steering away from *{r.name}*, which got {r.complaints} from {_people(r.critics)}"
        return self.notes.get(chosen)


def library_moments(matrix: np.ndarray) -> np.ndarray:
    """The library's second moments with a constant feature: E[x x^T] for x = (vector, 1), (d+1, d+1)
    (its last column is the mean vector, then 1). What `taste_classifier` measures a taste against."""
    m = np.asarray(matrix, dtype=np.float64)
    d = m.shape[1]
    out = np.empty((d + 1, d + 1))
    n = max(1, len(m))
    out[:d, :d] = m.T @ m / n
    out[:d, d] = out[d, :d] = m.sum(axis=0) / n
    out[d, d] = 1.0
    return out


def taste_classifier(pos: np.ndarray, neg: np.ndarray, moments: np.ndarray, background: int,
                     ridge: float) -> np.ndarray:
    """A member's taste as arxiv-sanity learns it: a linear classifier of `pos` (their interests and
    likes) against the library and `neg` (their dislikes), each class weighing the same, in closed form
    (class-balanced ridge least squares: no solver, the same answer every time). The library enters
    through its `library_moments`, counted as `background` papers. Returns (d+1,): weights, then bias."""
    d = pos.shape[1]

    def aug(x: np.ndarray) -> np.ndarray:
        return np.hstack([np.asarray(x, dtype=np.float64), np.ones((len(x), 1))])

    p, n = aug(pos), aug(neg)
    negatives = background + len(n)
    a = p.T @ p / len(p) + (background / negatives) * moments + n.T @ n / negatives
    b = p.mean(axis=0) - (background / negatives) * moments[:, d] - n.sum(axis=0) / negatives
    a[np.arange(d), np.arange(d)] += ridge  # the bias is not shrunk
    return np.linalg.solve(a, b)


def rank_fusion(*scores: np.ndarray, k: float) -> np.ndarray:
    """Reciprocal rank fusion (Cormack, Clarke and Buettcher, SIGIR 2009): each item scores the sum over
    the rankings of 1 / (k + its rank), 1 the best. Ranked by the first, its -inf (closed) stay -inf."""
    open_ = np.isfinite(scores[0])
    total = np.zeros(len(scores[0]))
    for s in scores:
        order = np.argsort(-np.where(open_, s, -np.inf), kind="stable")
        rank = np.empty(len(s))
        rank[order] = np.arange(1, len(s) + 1)
        total += 1.0 / (k + rank)
    return np.where(open_, total, -np.inf)


def row_map(ids: Sequence[str]) -> dict[str, int]:
    """paper id -> its row in `ids` (about 1 ms at 10k papers: made once per pick and passed down)."""
    return {pid: i for i, pid in enumerate(ids)}
