"""The paper of the day: a fair, explainable pick for one channel and one date.

Pure functions over vectors: the channel's interests, what it was shown
before, and the date come in as arguments, so a pick can be replayed and
tested without a clock. The recipe:

- relevance of a paper = its similarity to the *best* matching interest (an
  average would blur "video" and "graphs" into a topic nobody asked for);
- fairness: the member furthest below their equal share of recent days is
  served first (one prolific member cannot own the feed);
- diversity: MMR against the last week's posts, so days don't pile up on one topic;
- exploration: about one day in ten (fixed by a hash of channel and date), a
  strong paper from outside the interests, labelled as such;
- never a paper this channel has already been shown.

`feedback` adjusts relevance. It maps paper ids either to a direct score
adjustment (with an optional reason), or to a `Reacted`: how the team reacted
to a paper it was shown (store/feedback.py builds these from the reaction log,
decayed by age). What members liked becomes a learned interest of theirs
("papers like the ones I liked"), so papers close to liked ones rise; papers
close to disliked ones fall (see FeedbackModel). Feedback changes what a
member is served on their turn, never whose turn it is, and a member's own
reactions count most on their turn. When feedback changed a choice, the
explanation names the reaction that did it.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from datetime import date
from typing import Callable, Mapping, Sequence

import numpy as np

from .base import Store
from .embed import Embedder

INTEREST = "interest"
TRUST_PRIOR, TRUST_EVIDENCE = 0.5, 2  # learned taste vs stated interests before there is evidence
EXPLORATION = "exploration"
BREADTH = "breadth"


@dataclass(frozen=True)
class PickSettings:
    """The knobs of the pick; the defaults are what bench/picks.py measured."""

    exploration_rate: float = 0.1  # share of days that show a paper outside the interests
    # Relevance vs. novelty against recent posts. bench/picks.py, 24 teams x 60 days: 0.75 gave
    # 62.6% precision, 0.85 64.7%, 1.0 (no MMR) 62.4% with the most topic pile-up.
    mmr_lambda: float = 0.85
    recent_days: int = 7  # posts that count as "recent" for diversity
    fairness_window: int = 30  # posts over which members' shares are counted
    min_similarity: float = 0.25  # below this a member's best paper is not a match for them
    outside_quantile: float = 0.35  # exploration draws from the papers least like any interest
    density_sample: int = 1500  # corpus sample for "strength" (how central a paper is to its area)
    candidate_sample: int = 3000  # exploration / breadth candidates considered per day
    runners_up: int = 2
    feedback_strength: float = 1.0  # how much "like the papers I liked" counts against a stated interest
    feedback_dislike: float = 0.3  # the most a dislike can take off a paper's relevance
    feedback_floor: float = 0.3  # papers less similar than this to what was disliked lose nothing
    feedback_own_share: float = 0.7  # on a member's turn, the share of their own reactions (rest: the team's)
    feedback_shrink: float = 1.0  # a member's first reactions count less than a consistent record


@dataclass(frozen=True)
class Interest:
    """One topic a channel member added; `paper_id` when it was seeded from a paper."""

    id: int
    text: str
    added_by: str | None
    vector: np.ndarray
    paper_id: str | None = None

    @property
    def label(self) -> str:
        return self.text


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


@dataclass(frozen=True)
class PastPost:
    """A day this channel was shown papers: the pick and its runners-up."""

    day: date
    paper_id: str | None
    served: str | None = None  # the member whose interest it matched
    exploration: bool = False
    runners_up: tuple[str, ...] = ()


def _mention_at(user: str) -> str:
    return f"@{user}"


_MEMBER_REF = re.compile(r"@([UW][A-Z0-9]+)\b")


def _people(members: Sequence[str], limit: int = 3) -> str:
    """'@a', '@a and @b', '@a, @b and 2 others' (ids as @U..., turned into mentions by explain)."""
    names = [f"@{m}" for m in members]
    if len(names) > limit:
        names = names[:limit - 1] + [f"{len(names) - limit + 1} others"]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


@dataclass
class Choice:
    """One chosen paper and why: the matched interest, its similarity, whom it serves."""

    paper_id: str
    kind: str
    score: float
    similarity: float = 0.0
    interest: Interest | None = None
    member: str | None = None
    feedback: float = 0.0
    feedback_why: str | None = None

    def explain(self, mention: Callable[[str], str] = _mention_at, *, emphasis: str = "*") -> str:
        """Why this paper, in team terms: 'matches *video understanding* (added by @alice), 0.71'."""
        e = emphasis
        if self.kind == INTEREST and self.interest is not None:
            who = f" (added by {mention(self.interest.added_by)})" if self.interest.added_by else ""
            why = f"matches {e}{self.interest.text}{e}{who}, {self.similarity:.2f}"
        elif self.kind == EXPLORATION:
            near = (f"; nearest interest {e}{self.interest.text}{e} only {self.similarity:.2f}"
                    if self.interest is not None else "")
            why = f"exploration day: a strong paper from outside your interests{near}"
        else:
            why = "picked for breadth: no interests yet"
        if self.feedback_why:
            # Members named by a reaction reason are rendered like interest authors.
            why += "; " + _MEMBER_REF.sub(lambda m: mention(m.group(1)), self.feedback_why)
        return why

    def to_dict(self) -> dict:
        return {
            "paper_id": self.paper_id, "kind": self.kind, "score": round(float(self.score), 4),
            "similarity": round(float(self.similarity), 4),
            "interest_id": self.interest.id if self.interest else None,
            "interest_text": self.interest.text if self.interest else None,
            "added_by": self.interest.added_by if self.interest else None,
            "member": self.member, "feedback": round(float(self.feedback), 4),
            "feedback_why": self.feedback_why,
        }


@dataclass
class DailyPick:
    """A channel's paper of the day and its runners-up."""

    channel: str
    day: date
    choice: Choice
    runners_up: list[Choice] = field(default_factory=list)
    no_interests: bool = False

    @property
    def paper_id(self) -> str:
        return self.choice.paper_id

    @property
    def exploration(self) -> bool:
        return self.choice.kind == EXPLORATION

    def explain(self, mention: Callable[[str], str] = _mention_at) -> str:
        return self.choice.explain(mention)

    def to_dict(self) -> dict:
        return {"channel": self.channel, "day": self.day.isoformat(), "choice": self.choice.to_dict(),
                "runners_up": [c.to_dict() for c in self.runners_up], "no_interests": self.no_interests}

    @classmethod
    def from_dict(cls, data: dict, channel: str | None = None, day: date | None = None) -> "DailyPick":
        """Rebuild a stored pick (for recovery and /paper today) without re-running it."""
        def choice(d: dict) -> Choice:
            interest = None
            if d.get("interest_text") is not None:
                interest = Interest(d.get("interest_id") or 0, d["interest_text"], d.get("added_by"), None)
            return Choice(d["paper_id"], d["kind"], d.get("score", 0.0), d.get("similarity", 0.0), interest,
                          d.get("member"), d.get("feedback", 0.0), d.get("feedback_why"))

        return cls(channel if channel is not None else data["channel"],
                   day if day is not None else date.fromisoformat(data["day"]),
                   choice(data["choice"]), [choice(c) for c in data.get("runners_up") or []],
                   bool(data.get("no_interests")))


# -- determinism --------------------------------------------------------------------------
def day_hash(channel: str, day: date, salt: str = "") -> int:
    """A stable 64-bit number for (channel, date[, salt]): Python's hash() changes per process."""
    digest = hashlib.sha256(f"{channel}|{day.isoformat()}|{salt}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def is_exploration_day(channel: str, day: date, rate: float = 0.1) -> bool:
    """About `rate` of days, fixed per channel and date."""
    return rate > 0 and (day_hash(channel, day, "explore") % 10_000) < rate * 10_000


# -- pieces -------------------------------------------------------------------------------
def shown_ids(history: Sequence[PastPost]) -> set[str]:
    """Every paper this channel was already shown (picks and runners-up)."""
    out: set[str] = set()
    for post in history:
        if post.paper_id:
            out.add(post.paper_id)
        out.update(post.runners_up)
    return out


def member_order(members: Sequence[str], history: Sequence[PastPost], channel: str, day: date,
                 window: int = 30) -> list[str]:
    """Members furthest below their equal share of the last `window` posts first.

    Ties go to whoever was served longest ago (never counts as longest), then
    to a per-day hash so no name is favoured by sorting.
    """
    recent = sorted((p for p in history if p.paper_id), key=lambda p: p.day)[-window:]
    counts = {m: 0 for m in members}
    last: dict[str, date] = {}
    for post in recent:
        if post.served in counts and not post.exploration:
            counts[post.served] += 1
            last[post.served] = max(last.get(post.served, post.day), post.day)
    return sorted(members, key=lambda m: (counts[m], last.get(m, date.min),
                                          day_hash(channel, day, m)))


class FeedbackModel:
    """What `feedback` does to each paper's relevance on a member's turn.

    Direct adjustments (number or (number, reason) values) are added as given.
    Reactions (`Reacted` values) are learned per member:
    - likes: the weighted centroid of the papers a member liked acts like one
      more interest of theirs, "papers like the ones I liked": relevance
      becomes the better of the stated interests and trust × strength ×
      confidence × cosine to that centroid;
    - trust (`_trust`): how badly the stated interests ranked the liked papers
      against the rest of what was shown. A vague interest ("machine learning")
      gives way to what the member actually liked; a precise one that already
      put the liked papers first keeps the say (bench/feedback.py: without
      this, feedback cost teams with precise interests 16 points of precision);
    - dislikes: papers close to the centroid of what the member disliked
      lose up to `feedback_dislike` (only above `feedback_floor` similarity);
    - confidence grows with the evidence, W / (W + shrink), W the member's
      summed (decayed) weights, so one stray 👍 is a hint, not a command;
    - per-member weighting: each member's likes are one voice (a centroid, not
      a sum over reactions), the team's voice is the mean of its members', and
      on a member's turn their own voice gets `feedback_own_share`.
    """

    def __init__(self, ids: Sequence[str], matrix: np.ndarray, feedback, settings: PickSettings,
                 shown: Sequence[str] = ()):
        n = len(ids)
        self.settings = settings
        self.matrix = matrix
        self.direct = np.zeros(n, dtype=np.float32)
        self.notes: dict[int, str] = {}
        row = {pid: i for i, pid in enumerate(ids)}
        self.shown_rows = np.array([row[p] for p in dict.fromkeys(shown) if p in row], dtype=int)
        sources: list[tuple[int, Reacted]] = []
        for pid, value in (feedback or {}).items():
            i = row.get(pid)
            if i is None:
                continue
            if isinstance(value, Reacted):
                if value.by_member:
                    sources.append((i, value))
                continue
            if isinstance(value, tuple):
                value, note = value
                if note:
                    self.notes[i] = note
            self.direct[i] = float(value)
        self.sources = [r for _, r in sources]
        self.like: dict[str, np.ndarray] = {}
        self.dislike: dict[str, np.ndarray] = {}
        zero = np.zeros(n, dtype=np.float32)
        self.team_like, self.team_dislike = zero, zero
        self.active = bool(sources) or bool(self.direct.any())
        if not sources:
            return
        self.src_rows = np.array([i for i, _ in sources])
        self.src = matrix[self.src_rows]  # (reacted papers, dim)
        names = sorted({m for _, r in sources for m in r.by_member})
        self.weights = {m: np.array([r.by_member.get(m, 0.0) for _, r in sources], dtype=np.float32)
                        for m in names}
        shrink = settings.feedback_shrink
        floor = settings.feedback_floor
        for m, w in self.weights.items():
            pos, neg = np.maximum(w, 0), np.maximum(-w, 0)
            if pos.sum() > 0:
                centre = pos @ self.src
                conf = pos.sum() / (pos.sum() + shrink)
                self.like[m] = settings.feedback_strength * conf * (matrix @ (centre / np.linalg.norm(centre)))
            if neg.sum() > 0:
                centre = neg @ self.src
                conf = neg.sum() / (neg.sum() + shrink)
                near = matrix @ (centre / np.linalg.norm(centre))
                self.dislike[m] = conf * np.clip((near - floor) / (1.0 - floor), 0.0, 1.0)
        if self.like:
            self.team_like = np.mean(list(self.like.values()), axis=0)
        if self.dislike:
            self.team_dislike = np.mean(list(self.dislike.values()), axis=0)

    def _trust(self, member: str | None, relevance: np.ndarray | None) -> float:
        """How much the learned taste counts against the stated interests, in [0, 1].

        As much as the stated interests failed to tell apart what the member liked
        from the rest of what the channel was shown (AUC of their relevance): a
        precise interest that already ranked the liked papers first keeps the say,
        a vague one ("machine learning") that ranked them anywhere gives way.
        """
        if relevance is None or not len(relevance) or not len(self.shown_rows):
            return 1.0
        w = self.weights.get(member) if member in self.like else None
        if w is None:
            w = sum(np.maximum(v, 0) for v in self.weights.values())
        liked = set(self.src_rows[np.asarray(w) > 0].tolist())
        rest = [r for r in self.shown_rows.tolist() if r not in liked]
        if not liked or not rest:
            return TRUST_PRIOR
        a = relevance[list(liked)][:, None]
        b = relevance[rest][None, :]
        auc = float((a > b).mean() + 0.5 * (a == b).mean())
        trust = float(np.clip(1.0 - 3.0 * (auc - 0.5), 0.0, 1.0))
        # A few papers prove little either way: lean on the prior until there are more.
        n = min(len(liked), len(rest))
        return (n * trust + TRUST_EVIDENCE * TRUST_PRIOR) / (n + TRUST_EVIDENCE)

    def _parts(self, member: str | None, relevance: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(learned interest, dislike) of every paper on `member`'s turn (None: the team's)."""
        if member is None:
            like, dislike = self.team_like, self.team_dislike
        else:
            own = self.settings.feedback_own_share
            like = (1 - own) * self.team_like
            dislike = (1 - own) * self.team_dislike
            if member in self.like:
                like = like + own * self.like[member]
            if member in self.dislike:
                dislike = dislike + own * self.dislike[member]
        return like * self._trust(member, relevance), dislike

    def for_member(self, member: str | None, relevance: np.ndarray | None = None) -> np.ndarray:
        """The adjustment to `relevance` (the member's stated-interest match; none: 0) on their turn."""
        if not self.sources:
            return self.direct
        like, dislike = self._parts(member, relevance)
        base = relevance if relevance is not None else np.zeros_like(like)
        return (self.direct + np.maximum(like - base, 0.0)
                - self.settings.feedback_dislike * dislike).astype(np.float32)

    def why(self, chosen: int, instead: int | None, member: str | None,
            relevance: np.ndarray | None = None) -> str | None:
        """Which reaction made `chosen` beat `instead` (the pick without feedback), in team terms."""
        if not self.sources:
            return self.notes.get(chosen)
        like, dislike = self._parts(member, relevance)
        base = relevance if relevance is not None else np.zeros_like(like)
        lift = float(max(like[chosen] - base[chosen], 0.0))
        if instead is not None:
            lift -= float(max(like[instead] - base[instead], 0.0))
            sink = self.settings.feedback_dislike * float(dislike[instead] - dislike[chosen])
        else:
            sink = 0.0
        if lift <= 0 and sink <= 0:
            return self.notes.get(chosen)
        liked = lift >= sink
        target = chosen if liked else instead
        sims = self.src @ self.matrix[target]
        voices = [member] if member in (self.like if liked else self.dislike) else list(self.weights)
        score = np.zeros(len(self.sources), dtype=np.float32)
        for m in voices:
            w = self.weights[m]
            score = np.maximum(score, (np.maximum(w, 0) if liked else np.maximum(-w, 0)) * sims)
        j = int(np.argmax(score))
        if score[j] <= 0:
            return self.notes.get(chosen)
        r = self.sources[j]
        if liked and r.fans:
            return f"close to *{r.name}*, which got {r.praise} from {_people(r.fans)}"
        if not liked and r.critics:
            return f"steering away from *{r.name}*, which got {r.complaints} from {_people(r.critics)}"
        return self.notes.get(chosen)


def _redundancy(matrix: np.ndarray, ids: Sequence[str], recent: Sequence[str]) -> np.ndarray:
    """Each paper's highest similarity to a recent post (0 when there are none)."""
    row = {pid: i for i, pid in enumerate(ids)}
    idx = [row[p] for p in recent if p in row]
    if not idx:
        return np.zeros(len(ids), dtype=np.float32)
    return (matrix @ matrix[idx].T).max(axis=1)


def strength(matrix: np.ndarray, rows: np.ndarray, *, signals: np.ndarray | None = None,
             sample: int = 1500, seed: int = 0) -> np.ndarray:
    """How strong a paper looks without feedback: central to an active area, with code and results.

    Density is the mean similarity to the paper's 10 nearest neighbours in a
    fixed sample of the corpus (an outlier or a garbled abstract scores low).
    """
    n = len(matrix)
    if not len(rows):
        return np.zeros(0, dtype=np.float32)
    rng = np.random.default_rng(seed)
    ref = rng.choice(n, size=min(sample, n), replace=False) if n > sample else np.arange(n)
    refm = matrix[ref]
    dens = np.empty(len(rows), dtype=np.float32)
    k = min(11, len(ref))
    for start in range(0, len(rows), 2048):
        sims = matrix[rows[start:start + 2048]] @ refm.T
        top = -np.partition(-sims, k - 1, axis=1)[:, :k]
        # Drop the single best: it is the paper itself whenever the paper is in the sample.
        dens[start:start + 2048] = (top.sum(axis=1) - top.max(axis=1)) / max(1, k - 1)
    # Rank-normalise so the three parts are on one scale.
    score = np.argsort(np.argsort(dens)).astype(np.float32) / max(1, len(rows) - 1)
    if signals is not None:
        score = 0.7 * score + 0.3 * signals[rows]
    return score


def _sample_rows(rows: np.ndarray, limit: int, seed: int) -> np.ndarray:
    if len(rows) <= limit:
        return rows
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(rows, size=limit, replace=False))


# -- the pick -----------------------------------------------------------------------------
def pick_daily(channel: str, day: date, ids: Sequence[str], matrix: np.ndarray,
               interests: Sequence[Interest], history: Sequence[PastPost], *,
               signals: Mapping[str, float] | None = None,
               feedback: Mapping[str, float | tuple[float, str | None] | Reacted] | None = None,
               settings: PickSettings = PickSettings()) -> DailyPick | None:
    """The paper of the day for `channel` on `day`, or None when every paper was already shown.

    ids/matrix: every candidate paper and its L2-normalised vector (rows align).
    history: the channel's earlier posts (any order). signals: optional per-paper
    prior in [0, 1] (code, results). feedback: per paper, a score adjustment, an
    (adjustment, reason) pair, or a `Reacted` (see the module docstring).
    """
    if len(ids) == 0:
        return None
    matrix = np.asarray(matrix, dtype=np.float32)
    history = [p for p in history if p.day < day]  # a replay of day D never sees D or later
    # A paper an interest was seeded from ("like X") has been read already: never pick X itself.
    shown = shown_ids(history) | {it.paper_id for it in interests if it.paper_id}
    # A paper the team reacted to was in front of it (a share, say): never pick it again either.
    shown |= {pid for pid, value in (feedback or {}).items() if isinstance(value, Reacted)}
    open_mask = np.fromiter((pid not in shown for pid in ids), dtype=bool, count=len(ids))
    if not open_mask.any():
        return None
    seed = day_hash(channel, day) % (2**32)
    row = {pid: i for i, pid in enumerate(ids)}
    shown_papers = [p.paper_id for p in history if p.paper_id]
    shown_papers += [pid for pid, value in (feedback or {}).items() if isinstance(value, Reacted)]
    fb = FeedbackModel(ids, matrix, feedback, settings, shown=shown_papers)
    team_fb = fb.for_member(None)  # exploration and breadth days: the whole team's taste
    sig = None
    if signals:
        sig = np.fromiter((float(signals.get(pid, 0.0)) for pid in ids), dtype=np.float32, count=len(ids))
    ordered = sorted((p for p in history if p.paper_id), key=lambda p: p.day)
    recent = [p.paper_id for p in ordered[-settings.recent_days:]]
    redundancy = _redundancy(matrix, ids, recent)
    lam = settings.mmr_lambda

    def choice(i: int, kind: str, score: float, sim: float = 0.0, interest=None, member=None,
               instead: int | None = None, adjust: np.ndarray = team_fb,
               rel: np.ndarray | None = None) -> Choice:
        """A Choice; `instead`: the pick without feedback; `adjust`/`rel`: feedback and relevance used."""
        why = fb.notes.get(i) if fb.direct[i] else None
        if instead is not None and instead != i:
            why = fb.why(i, instead, member, rel) or why
        return Choice(ids[i], kind, float(score), float(sim), interest, member, float(adjust[i]), why)

    open_rows = np.flatnonzero(open_mask)
    if not interests:
        return _breadth_pick(matrix, open_rows, team_fb, sig, redundancy, seed, settings, choice,
                             channel, day)

    imat = np.stack([np.asarray(it.vector, dtype=np.float32) for it in interests])
    sims = matrix @ imat.T  # (papers, interests)
    best_interest = sims.argmax(axis=1)
    relevance = sims.max(axis=1)
    members = list(dict.fromkeys(it.added_by or "" for it in interests))
    cols_of = {m: [j for j, it in enumerate(interests) if (it.added_by or "") == m] for m in members}
    order = member_order(members, history, channel, day, settings.fairness_window)

    def best_for(member: str, taken: set[int], extra_penalty: np.ndarray | None = None):
        """The member's best open paper: (row, score, match, interest, row without feedback, extras).

        match is how well it fits the member: the stated interest's similarity, or
        their learned taste ("like the papers I liked") when that fits better.
        """
        cols = cols_of[member]
        rel = sims[:, cols].max(axis=1)
        base = lam * rel - (1 - lam) * redundancy
        if extra_penalty is not None:
            base = base - (1 - lam) * extra_penalty
        base = np.where(open_mask, base, -np.inf)
        for i in taken:
            base[i] = -np.inf
        adjust = fb.for_member(member or None, rel) if fb.active else np.zeros_like(rel)
        score = base + lam * adjust
        i = int(np.argmax(score))
        if not np.isfinite(score[i]):
            return None
        j = cols[int(sims[i, cols].argmax())]
        match = float(sims[i, j])
        if fb.sources:  # a paper the member's learned taste picked is a match too
            match = max(match, float(fb._parts(member or None, rel)[0][i]))
        return i, float(score[i]), match, interests[j], int(np.argmax(base)), (adjust, rel, float(sims[i, j]))

    picked: list[Choice] = []
    taken: set[int] = set()
    if is_exploration_day(channel, day, settings.exploration_rate):
        explore = _exploration(matrix, open_rows, relevance, team_fb, sig, redundancy, seed, settings)
        if explore is not None:
            i, score, instead = explore
            picked.append(choice(i, EXPLORATION, score, relevance[i], interests[int(best_interest[i])],
                                 instead=instead))
            taken.add(i)

    def serve(queue: list[str], penalty_rows: list[int]):
        """The member furthest behind with a real match gets their best paper.

        When nobody has a paper above min_similarity, the one furthest behind
        is served anyway: fairness first, since every paper is then a stretch.
        """
        penalty = (matrix @ matrix[penalty_rows].T).max(axis=1) if penalty_rows else None
        first = None
        for member in queue:
            found = best_for(member, taken, penalty)
            if found is None:
                continue
            first = first or (found, member)
            if found[2] >= settings.min_similarity:
                first = (found, member)
                break
        if first is None:
            return None, None
        (i, score, _, interest, instead, (adjust, rel, sim)), member = first
        return choice(i, INTEREST, score, sim, interest, member or None, instead=instead, adjust=adjust,
                      rel=rel), member

    queue = list(order)
    want = 1 + settings.runners_up
    while len(picked) < want:
        if not queue:
            queue = list(order)  # fewer members than slots: go round again
        c, member = serve(queue, sorted(taken))
        if c is None:
            break
        picked.append(c)
        taken.add(row[c.paper_id])
        if member in queue:
            queue.remove(member)
    if not picked:
        return None
    return DailyPick(channel, day, picked[0], picked[1:want])


def _exploration(matrix, open_rows, relevance, fb, sig, redundancy, seed, settings):
    """A strong open paper among those least like any interest: (row, score, row without feedback)."""
    if not len(open_rows):
        return None
    cut = np.quantile(relevance[open_rows], settings.outside_quantile)
    outside = open_rows[relevance[open_rows] <= cut]
    outside = _sample_rows(outside, settings.candidate_sample, seed)
    if not len(outside):
        return None
    lam = settings.mmr_lambda
    strong = strength(matrix, outside, signals=sig, sample=settings.density_sample, seed=seed)
    base = lam * strong - (1 - lam) * redundancy[outside]
    score = base + lam * fb[outside]
    k = int(np.argmax(score))
    return int(outside[k]), float(score[k]), int(outside[int(np.argmax(base))])


def _breadth_pick(matrix, open_rows, fb, sig, redundancy, seed, settings, choice,
                  channel, day) -> DailyPick:
    """No interests yet: strong papers far from what was recently shown, spread across areas."""
    rows = _sample_rows(open_rows, settings.candidate_sample, seed)
    strong = strength(matrix, rows, signals=sig, sample=settings.density_sample, seed=seed)
    lam = settings.mmr_lambda
    plain = lam * strong - (1 - lam) * redundancy[rows]
    base = plain + lam * fb[rows]
    picked: list[Choice] = []
    used: list[int] = []
    penalty = np.zeros(len(rows), dtype=np.float32)
    for _ in range(1 + settings.runners_up):
        score = base - (1 - lam) * penalty
        score[used] = -np.inf
        k = int(np.argmax(score))
        if not np.isfinite(score[k]):
            break
        without = plain - (1 - lam) * penalty
        without[used] = -np.inf
        picked.append(choice(int(rows[k]), BREADTH, score[k], instead=int(rows[int(np.argmax(without))])))
        used.append(k)
        penalty = np.maximum(penalty, matrix[rows] @ matrix[rows[k]])
    return DailyPick(channel, day, picked[0], picked[1:], no_interests=True)


# -- loading a channel's inputs from the store ---------------------------------------------
def like_text(paper) -> str:
    """How an interest seeded from a paper reads in lists and explanations."""
    return f"papers like {paper.short_name}"


def interests_for(store: Store, channel: str, embedder: Embedder) -> list[Interest]:
    """The channel's interests as vectors of the current model (re-embedding any left from another)."""
    rows = store.interests(channel)
    stale = [r for r in rows if r["model"] != embedder.name or r["vector"] is None]
    if stale:
        fresh = []
        for r in stale:
            vec = store.get_vector(r["paper_id"], embedder.name) if r["paper_id"] else None
            if vec is None:
                vec = embedder.encode([r["text"]])[0]
            fresh.append((r["id"], embedder.name, vec))
            r["vector"] = vec
        store.set_interest_vectors(fresh)
    return [Interest(r["id"], r["text"], r["added_by"], np.asarray(r["vector"], dtype=np.float32),
                     r["paper_id"]) for r in rows]


def history_for(store: Store, channel: str) -> list[PastPost]:
    """What the channel was shown before, from its post rows."""
    out = []
    for r in store.post_history(channel):
        pick = r.get("pick") or {}
        choice = pick.get("choice") or {}
        out.append(PastPost(
            day=date.fromisoformat(r["day"]), paper_id=r["paper_id"], served=choice.get("member"),
            exploration=choice.get("kind") == EXPLORATION,
            runners_up=tuple(c["paper_id"] for c in pick.get("runners_up") or ())))
    return out


def pick_for_channel(store: Store, embedder: Embedder, channel: str, day: date, *,
                     vectors: tuple[Sequence[str], np.ndarray] | None = None,
                     feedback=None, settings: PickSettings = PickSettings()) -> DailyPick | None:
    """pick_daily with the channel's interests, history and the corpus loaded from the store.

    `vectors` (ids, matrix) lets a caller pass the matrix it already holds in memory.
    """
    ids, matrix = vectors if vectors is not None else store.load_vectors(embedder.name)
    if len(ids) == 0:
        return None
    # A paper the channel's reading group read (or chose) counts as shown: never the paper of the day.
    read = [PastPost(date.min, r["paper_id"]) for r in store.club_sessions(channel)
            if r["paper_id"] and r["state"] != "skipped"]
    return pick_daily(channel, day, ids, matrix, interests_for(store, channel, embedder),
                      history_for(store, channel) + read, signals=store.paper_signals(),
                      feedback=feedback, settings=settings)
