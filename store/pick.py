"""The paper of the day: a fair, explainable pick for one channel and one date.

Pure functions over vectors: the channel's interests, what it was shown
before, and the date come in as arguments, so a pick can be replayed and
tested without a clock. The recipe (bench/picks.py measures each part against
the naive pick: members in turn, best unposted paper by cosine):

- relevance of a paper to a member = its hybrid score for the member's *best*
  matching interest: cosine plus `lexical_weight` x the interest's BM25 scaled
  so its best paper is 1, the fusion that wins in search (an average over
  interests would blur "video" and "graphs" into a topic nobody asked for),
  plus `typical_weight` x how typical the paper is of the library (a paper in
  the thick of an area over a stray at its edge; `typicality`); an interest as
  wide as the library ("machine learning" among ML papers, `specificity`) counts
  less, so typicality ranks its member's turns, and the explanation says so;
- turns: the member furthest below their equal share of recent days is served,
  whatever their best score (a vague interest is still a member's turn);
  members holding the same interest text are each served on their own turns;
- only the paper of the day is spent: runners-up are suggestions and stay
  available (a Save uses one up) as a paper of the day, but are not shown
  under "Also today" again, and never again to a member who judged one against;
- exploration: about one day in ten (fixed by a hash of channel and date), the
  best paper just *outside* what the interests and learned tastes cover (next
  to them, so it can land), labelled as such;
- never a paper this channel was already given as the paper of the day.

`feedback` adjusts relevance. It maps paper ids either to a direct score
adjustment (with an optional reason), or to a `Reacted`: how the team reacted
to a paper (store/feedback.py builds these from the reaction log, decayed by
age). See FeedbackModel (store/taste.py): each member's reactions move their query as Rocchio
does (plus what sets the mean of their likes apart from the library's mean
vector, minus half the mean of their dislikes). Once a member has liked a few
papers, their turn's ranking is also fused by rank with their own linear
classifier (arxiv-sanity's, in closed form: `taste_classifier`), which reads a
topic their words describe badly better than the stated interest can. A
member's reactions shape their own turns; the whole team's shape exploration
and breadth days. When feedback changed a choice, the explanation names the
reactions that did it.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from datetime import date
from typing import Callable, Container, Mapping, NamedTuple, Sequence

import numpy as np

from .search import closeness
from .taste import FeedbackModel, Library, Reacted, rank_fusion, row_map

INTEREST = "interest"
EXPLORATION = "exploration"
BREADTH = "breadth"


@dataclass(frozen=True)
class PickSettings:
    """The knobs of the pick; the defaults are what bench/picks.py measured (the same for every dataset).

    The runs behind each default, the variants dropped and what each choice looked at: docs/pick-tuning.md
    (its figures predate the bench's word-start keyword match, which moved them by 0.012 at most)."""

    exploration_rate: float = 0.1  # share of days that show a paper next to, not inside, the interests
    # The exploration paper gets an extra, labelled slot after the runners-up, as the paper of the day is
    # the served member's: in the main slot (True) their precision fell near zero on those days, -0.06 over
    # all days (docs/pick-tuning.md#explore_in_main).
    explore_in_main: bool = False
    # Relevance vs. novelty against recent posts (MMR): novelty keeps days from piling onto one sub-topic
    # and costs no precision (0.628 against 0.627 without) (docs/pick-tuning.md#mmr_lambda).
    mmr_lambda: float = 0.85
    recent_days: int = 7  # posts that count as "recent" for diversity
    fairness_window: int = 30  # posts over which members' shares are counted
    # Relevance = cosine + lexical_weight x BM25 scaled to the interest's best paper, after adding the mean
    # of the prf_docs best papers to the interest (pseudo-relevance feedback: precision 0.650 -> 0.707).
    # BM25 searches the interest's words and the lexical_expansion words its prf_docs nearest papers
    # share most (`expansion_words`): a paraphrase rarely names its field's terms (precision of the 20
    # best papers 0.720 -> 0.761 and 0.694 -> 0.735 on the two datasets; docs/pick-tuning.md#lexical_expansion-stop-48).
    lexical_weight: float = 0.15
    lexical_candidates: int = 300  # papers scored by BM25 per interest
    prf_docs: int = 10
    lexical_expansion: int = 10
    # Exploration skips each member's next this many papers (their own turns bring those) and
    # shows the best one after them: next to the interests, so it can land.
    explore_skip: int = 30
    breadth_lambda: float = 0.85  # no interests yet: MMR spreads the days across areas
    density_sample: int = 1500  # corpus sample for "strength" (how central a paper is to its area)
    # Relevance gains typical_weight x how typical a paper is of a library of typical_min_papers or more: a
    # paper in the thick of an area is likelier on a reader's topic than a stray at its edge (vague interests
    # gain, clear ones stay level) (docs/pick-tuning.md#typical_weight-and-typical_min_papers).
    typical_weight: float = 0.2
    typical_min_papers: int = 1000
    # An interest whose best papers stand no further above its average one than the library centre's
    # do ("machine learning" among ML papers) says nothing of where to look: its relevance is scaled
    # down (`specificity`, to SPECIFIC_FLOOR below this margin) and typicality ranks its member's turns.
    # The margin is the gap of iclr2024's least specific clear text: every clear text counts 1 but that
    # one (0.99; on neurips2023 0.94), and vague interests rose on both datasets in every cell but one
    # (iclr2024 cards & calibration, days 21-60); 0 turns it off (docs/pick-tuning.md#specific_margin-stop-51).
    specific_margin: float = 0.02
    candidate_sample: int = 3000  # breadth candidates considered per day
    runners_up: int = 2
    spend_runners_up: bool = False  # True: a runner-up is used up when shown, as if posted
    # A reaction to a runner-up teaches the taste but leaves it available (a Save uses it up): using it
    # up cost 0.22 of precision (docs/pick-tuning.md#spend_reacted_runners_up). Not to the member who
    # judged it against (`FeedbackModel.judged`); no runner-up is a runner-up twice (`previewed`).
    spend_reacted_runners_up: bool = False
    # Reactions move a member's query as Rocchio does: relevance + strength x (cosine to their likes' mean
    # - contrast x cosine to their dislikes'); contrast 0.5 is Rocchio's gamma/beta, strength 1.5 the
    # furthest from losing anywhere (docs/pick-tuning.md#feedback_strength-and-feedback_contrast).
    feedback_strength: float = 1.5
    feedback_contrast: float = 0.5
    # From taste_min_likes likes on, a member's turn is fused by rank (1 / (fusion_k + rank)) with their own
    # linear classifier (`taste_classifier`), which reads topics their words describe badly; k = 60 as
    # Cormack et al. give it, not tuned here; 0 turns it off (docs/pick-tuning.md#fusion_k).
    fusion_k: float = 60.0
    # Trained on one or two likes the classifier is mostly the member's words and those papers, and follows
    # a lone like too far; from the third, iclr2024 rose and neurips2023 held level
    # (docs/pick-tuning.md#taste_min_likes).
    taste_min_likes: int = 3
    taste_ridge: float = 0.024  # the classifier's ridge: the SVM's C = 0.1 over ~830 papers, as 1 / (C n / 2)
    taste_background: int = 800  # the library counts as this many negatives (the bench SVM's sample)
    # FeedbackModel measures a member's likes from the library's mean (Library.mean): every abstract shares
    # a direction ("this is ML") that made the lift mostly how ML-like a paper was. That run, and the taste
    # variants tried since and dropped: docs/pick-tuning.md#centring-the-likes.


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
class PastPost:
    """A day this channel was shown papers: the pick and its runners-up."""

    day: date
    paper_id: str | None
    served: str | None = None  # the member whose interest it matched
    exploration: bool = False
    runners_up: tuple[str, ...] = ()
    engaged: tuple[str, ...] = ()  # runners-up someone engaged with (saved): used up like the pick
    also: str | None = None  # the exploration slot's paper ("Also today"), among the runners-up

    @classmethod
    def of_row(cls, row: Mapping, saved: Container[str] = ()) -> PastPost:
        """The day a daily post row (`store.post_history`) records; runners-up in `saved` are engaged.
        The exploration slot ("Also today") is shown like a runner-up."""
        pick = row.get("pick") or {}
        choice = pick.get("choice") or {}
        shown = [*(pick.get("runners_up") or ()), *([pick["also"]] if pick.get("also") else [])]
        runners = tuple(c["paper_id"] for c in shown)
        return cls(day=date.fromisoformat(row["day"]), paper_id=row["paper_id"], served=choice.get("member"),
                   exploration=choice.get("kind") == EXPLORATION, runners_up=runners,
                   engaged=tuple(p for p in runners if p in saved),
                   also=pick["also"]["paper_id"] if pick.get("also") else None)


def _mention_at(user: str) -> str:
    return f"@{user}"


_MEMBER_REF = re.compile(r"@([UW][A-Z0-9]+)\b")


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
    # The interest spans the library (`BROAD`): typicality, not its words, chose the paper. On an
    # exploration paper: every interest of the team does, so nothing lies outside them.
    broad: bool = False
    shown_on: date | None = None  # the paper of the day was shown under "Also today" first on that day

    def explain(self, mention: Callable[[str], str] = _mention_at, *, emphasis: str = "*",
                main: bool = True) -> str:
        """Why this paper, in team terms: 'matches *video understanding* (added by @alice), very close
        in meaning'. The similarity is said in words (store.search.closeness), never as a number.

        main: it is the paper of the day (an exploration paper in the extra slot says less)."""
        e = emphasis
        if self.kind == INTEREST and self.interest is not None:
            who = f" (added by {mention(self.interest.added_by)})" if self.interest.added_by else ""
            if self.broad:  # its words ranked nothing: typicality did (and reactions, said after it)
                why = (f"for {e}{self.interest.text}{e}{who}, as wide as the library: "
                       "a paper from the thick of one of its areas")
            else:
                why = f"matches {e}{self.interest.text}{e}{who}, {closeness(self.similarity)}"
        elif self.kind == EXPLORATION and self.broad:  # the team's interests are all as wide as the library
            why = f"{'exploration day' if main else 'exploration'}: a paper beyond the next ones your turns bring"
        elif self.kind == EXPLORATION:
            near = (f", next to {e}{self.interest.text}{e} ({closeness(self.similarity)})"
                    if self.interest is not None else "")
            why = f"{'exploration day' if main else 'exploration'}: a paper just outside your interests{near}"
        else:
            why = "picked for breadth: no interests yet"
        if self.feedback_why:
            # Members named by a reaction reason are rendered like interest authors.
            why += "; " + _MEMBER_REF.sub(lambda m: mention(m.group(1)), self.feedback_why)
        if self.shown_on is not None:
            why += f"; shown under Also today on {self.shown_on:%a} {self.shown_on.day} {self.shown_on:%b}"
        return why

    def to_dict(self) -> dict:
        return {
            "paper_id": self.paper_id, "kind": self.kind, "score": round(float(self.score), 4),
            "similarity": round(float(self.similarity), 4),
            "interest_id": self.interest.id if self.interest else None,
            "interest_text": self.interest.text if self.interest else None,
            "added_by": self.interest.added_by if self.interest else None,
            "member": self.member, "feedback": round(float(self.feedback), 4),
            "feedback_why": self.feedback_why, "broad": self.broad,
            "shown_on": self.shown_on.isoformat() if self.shown_on else None,
        }


@dataclass
class DailyPick:
    """A channel's paper of the day and its runners-up."""

    channel: str
    day: date
    choice: Choice
    runners_up: list[Choice] = field(default_factory=list)
    no_interests: bool = False
    also: Choice | None = None  # an exploration day's paper, in its own slot beside the runners-up

    @property
    def paper_id(self) -> str:
        return self.choice.paper_id

    @property
    def exploration(self) -> bool:
        return self.choice.kind == EXPLORATION

    def explain(self, mention: Callable[[str], str] = _mention_at) -> str:
        return self.choice.explain(mention)

    @property
    def shown(self) -> list[Choice]:
        """Every paper the day's message shows after the pick: the runners-up, then the exploration slot."""
        return [*self.runners_up, *([self.also] if self.also else [])]

    def to_dict(self) -> dict:
        return {"channel": self.channel, "day": self.day.isoformat(), "choice": self.choice.to_dict(),
                "runners_up": [c.to_dict() for c in self.runners_up], "no_interests": self.no_interests,
                "also": self.also.to_dict() if self.also else None}

    @classmethod
    def from_dict(cls, data: dict, channel: str | None = None, day: date | None = None) -> "DailyPick":
        """Rebuild a stored pick (for recovery and /paper today) without re-running it."""
        def choice(d: dict) -> Choice:
            interest = None
            if d.get("interest_text") is not None:
                interest = Interest(d.get("interest_id") or 0, d["interest_text"], d.get("added_by"), None)
            return Choice(d["paper_id"], d["kind"], d.get("score", 0.0), d.get("similarity", 0.0), interest,
                          d.get("member"), d.get("feedback", 0.0), d.get("feedback_why"), bool(d.get("broad")),
                          date.fromisoformat(d["shown_on"]) if d.get("shown_on") else None)

        return cls(channel if channel is not None else data["channel"],
                   day if day is not None else date.fromisoformat(data["day"]),
                   choice(data["choice"]), [choice(c) for c in data.get("runners_up") or []],
                   bool(data.get("no_interests")), choice(data["also"]) if data.get("also") else None)


# -- determinism --------------------------------------------------------------------------
def day_hash(channel: str, day: date, salt: str = "") -> int:
    """A stable 64-bit number for (channel, date[, salt]): Python's hash() changes per process."""
    digest = hashlib.sha256(f"{channel}|{day.isoformat()}|{salt}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def is_exploration_day(channel: str, day: date, rate: float = 0.1) -> bool:
    """About `rate` of days, fixed per channel and date."""
    return rate > 0 and (day_hash(channel, day, "explore") % 10_000) < rate * 10_000


# -- pieces -------------------------------------------------------------------------------
def shown_ids(history: Sequence[PastPost], *, spend_runners_up: bool = False) -> set[str]:
    """Every paper this channel has used up: picks, engaged runners-up (all runners-up if spent)."""
    out: set[str] = set()
    for post in history:
        if post.paper_id:
            out.add(post.paper_id)
        out.update(post.engaged)
        if spend_runners_up:
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


def _redundancy(matrix: np.ndarray, row: Mapping[str, int], recent: Sequence[str]) -> np.ndarray:
    """Each paper's highest similarity to a recent post (0 when there are none)."""
    idx = [row[p] for p in recent if p in row]
    if not idx:
        return np.zeros(len(matrix), dtype=np.float32)
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


def areas_show(papers: int, settings: PickSettings) -> bool:
    """Whether a library of `papers` ranks by how typical a paper is: `typical_weight` on and at least
    `typical_min_papers` papers."""
    return bool(settings.typical_weight) and papers >= settings.typical_min_papers


def typicality(matrix: np.ndarray, settings: PickSettings) -> np.ndarray | None:
    """How typical each paper is of the library, 0 to 1: the rank of its density (`strength` over
    every paper: how crowded its neighbourhood is). None below `typical_min_papers` (too few papers
    for areas to show) or with the weight off."""
    if not areas_show(len(matrix), settings):
        return None
    return strength(matrix, np.arange(len(matrix)), sample=settings.density_sample, seed=0)


def _sample_rows(rows: np.ndarray, limit: int, seed: int) -> np.ndarray:
    if len(rows) <= limit:
        return rows
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(rows, size=limit, replace=False))


# -- relevance ----------------------------------------------------------------------------
class Relevance(NamedTuple):
    """`interest_scores`: every paper's relevance to every interest."""

    hybrid: np.ndarray  # (papers, interests): what a member's turn ranks by
    cos: np.ndarray  # (papers, interests): the plain cosine, said in words by an explanation
    weight: np.ndarray  # (interests,): how much each counts (`specificity`; 1 where it is not applied)


BROAD = 0.5  # an interest counting less than this is as wide as the library: typicality ranks its turns


# A library too small for areas to show (`areas_show`: the bundled 38 papers of a new team) can't tell how
# wide an interest is: against it, all-MiniLM-L6-v2 gives "machine learning", "speech recognition" and
# "graph neural networks" the same spread (specificity's top-20 minus mean, -0.022 / -0.030 / -0.020 past
# the centre's). There an interest is as wide as the library when it names the whole field the library
# is drawn from: its cosine to one of these names at least WHOLE_FIELD_COS. On that model "deep neural
# networks" 0.89, "machine learning and AI" 0.82; the clear topics tried stay under it, the closest
# "machine learning theory" 0.78, "convolutional neural networks" 0.68, "graph neural networks" 0.67.
WHOLE_FIELD = ("machine learning", "artificial intelligence", "deep learning", "neural networks")
WHOLE_FIELD_COS = 0.8


def is_broad(weight: np.ndarray) -> np.ndarray:
    """Which interests are as wide as the library, by their weights (`Relevance.weight`): under BROAD."""
    return np.asarray(weight) < BROAD


def interest_scores(matrix: np.ndarray, ids: Sequence[str], interests: Sequence[Interest],
                    lexical: Mapping[int, Mapping[str, float]] | None,
                    settings: PickSettings, row: Mapping[str, int] | None = None,
                    weight: np.ndarray | None = None) -> Relevance:
    """The hybrid score and cosine of every paper for every interest, and each interest's weight.

    hybrid = weight x (cosine (to the interest, expanded by its top papers when `prf_docs`)
    + `lexical_weight` x BM25 scaled so the interest's best paper is 1 (`lexical`:
    interest id -> {paper id: scaled BM25}, from `lexical_for`)). weight: each interest's
    (`interest_weights`) when the caller has it from the whole library, as a day among a few
    fresh papers does: how wide an interest is, is told against the library, not those papers.
    """
    imat = np.stack([np.asarray(it.vector, dtype=np.float32) for it in interests])
    cos = matrix @ imat.T
    lex = np.zeros_like(cos)
    if lexical and settings.lexical_weight:
        row = row_map(ids) if row is None else row
        for j, it in enumerate(interests):
            for pid, s in (lexical.get(it.id) or {}).items():
                i = row.get(pid)
                if i is not None:
                    lex[i, j] = s
    hybrid = cos + settings.lexical_weight * lex
    k = expansion_size(settings.prf_docs, len(ids))
    if k > 0:
        top = np.argpartition(-hybrid, k - 1, axis=0)[:k]  # (k, interests)
        expanded = imat + matrix[top].mean(axis=0)
        expanded /= np.linalg.norm(expanded, axis=1, keepdims=True)
        hybrid = matrix @ expanded.T + settings.lexical_weight * lex
    weight = interest_weights(matrix, cos, settings) if weight is None else weight
    return Relevance((hybrid * weight).astype(np.float32), cos, weight)


def interest_weights(matrix: np.ndarray, cos: np.ndarray, settings: PickSettings) -> np.ndarray:
    """How much each interest (`cos`: its cosine to every paper, a column each) counts in its relevance:
    its `specificity` where `specific_margin` is on and areas show (`areas_show`: else nothing would
    rank in its place), 1 otherwise. Under BROAD it is as wide as the library."""
    if settings.specific_margin and areas_show(len(matrix), settings):
        return specificity(matrix, cos, settings.specific_margin)
    return np.ones(cos.shape[1], dtype=np.float32)


SPECIFIC_TOP = 20  # an interest's best papers, against its average one
SPECIFIC_FLOOR = 0.1  # the least an interest counts: it still orders papers equally typical


def specificity(matrix: np.ndarray, cos: np.ndarray, margin: float) -> np.ndarray:
    """How much each interest (`cos`'s columns) says, SPECIFIC_FLOOR to 1: how far its best papers
    stand above its average paper beyond how far the library centre's do, over `margin`. "machine
    learning" in a library of ML papers stands no further out than the centre: "anything here"."""
    n = len(matrix)
    if n <= SPECIFIC_TOP:
        return np.ones(cos.shape[1], dtype=np.float32)

    def spread(c: np.ndarray) -> np.ndarray:
        return np.partition(c, n - SPECIFIC_TOP, axis=0)[n - SPECIFIC_TOP:].mean(axis=0) - c.mean(axis=0)

    centre = matrix.mean(axis=0)
    norm = float(np.linalg.norm(centre))
    if norm == 0:
        return np.ones(cos.shape[1], dtype=np.float32)
    base = spread(matrix @ (centre / norm))
    return np.clip((spread(cos) - base) / margin, SPECIFIC_FLOOR, 1.0).astype(np.float32)


def expansion_size(prf_docs: int, papers: int) -> int:
    """How many of an interest's best papers expand it, in a library of `papers`: `prf_docs`, while
    they are at most 1% of the library (in a small one they span topics)."""
    return min(prf_docs, papers // 100)


def turn_relevance(hybrid: np.ndarray, typical: np.ndarray | None, settings: PickSettings) -> np.ndarray:
    """A paper's stated relevance on a member's turn: its best `interest_scores` hybrid over the
    member's interests (`hybrid`'s columns) plus `typical_weight` x its `typicality` when given.
    The pick and the calibration round both rank by it."""
    rel = hybrid.max(axis=1)
    return rel + settings.typical_weight * typical if typical is not None else rel


def lexical_for(searcher, interests: Sequence[Interest], limit: int = 300, *, expand_from: int = 0,
                expand_words: int = 0) -> dict[int, dict[str, float]]:
    """interest id -> {paper id: BM25 / the best BM25} for the interest's words.

    A text interest searches its own words (as /paper search plans them) and, with
    `expand_words`, the words its `expand_from` nearest papers share (`expansion_words`:
    relevance feedback in words, RM3's idea; as many papers as `expansion_size` allows);
    one seeded from a paper (`add like`) searches that paper's distinctive words.
    """
    out: dict[int, dict[str, float]] = {}
    for it in interests:
        if it.paper_id:
            paper = searcher.store.get_paper(it.paper_id)
            if paper is None:
                continue
            hits = searcher.bm25("", phrases=searcher.distinctive_words(paper), limit=limit + 1)
            hits = [(pid, s) for pid, s in hits if pid != it.paper_id]
        else:
            papers = expansion_size(expand_from, len(searcher.index())) if expand_words else 0
            words = expansion_words(searcher, it.vector, papers, expand_words) if papers else []
            phrases = list(dict.fromkeys([*searcher.query_phrases(it.text), *words])) if words else None
            hits = searcher.bm25(it.text, phrases=phrases, limit=limit)
        best = hits[0][1] if hits else 0.0  # best first, whichever sign the backend's BM25 has
        if best:
            out[it.id] = {pid: s / best for pid, s in hits}
    return out


def expansion_words(searcher, vector: np.ndarray, papers: int, most: int) -> list[str]:
    """The `most` words that the distinctive words (`Searcher.distinctive_words`) of the `papers`
    papers nearest `vector` share most: each in two of them at least, the most shared first. An
    interest's paraphrase ("explaining model predictions") rarely names its field's own terms
    ("interpretability", "attribution"); its nearest papers do."""
    counts: dict[str, int] = {}
    for paper in searcher.store.get_papers([pid for pid, _ in searcher.index().search(vector, papers)]):
        for word in set(searcher.distinctive_words(paper)):
            counts[word] = counts.get(word, 0) + 1
    shared = sorted((w for w, c in counts.items() if c >= 2), key=lambda w: (-counts[w], w))
    return shared[:most]


# -- the pick -----------------------------------------------------------------------------
def pick_daily(channel: str, day: date, ids: Sequence[str], matrix: np.ndarray,
               interests: Sequence[Interest], history: Sequence[PastPost], *,
               signals: Mapping[str, float] | None = None,
               feedback: Mapping[str, float | tuple[float, str | None] | Reacted] | None = None,
               settings: PickSettings = PickSettings(),
               lexical: Mapping[int, Mapping[str, float]] | None = None,
               labels: Mapping[str, str] | None = None,
               typical: np.ndarray | None = None,
               relevance: Relevance | None = None,
               library: Library | None = None) -> DailyPick | None:
    """The paper of the day for `channel` on `day`, or None when every paper was already used up.

    ids/matrix: every candidate paper and its L2-normalised vector (rows align).
    history: the channel's earlier posts (any order). signals: optional per-paper
    prior in [0, 1] (code, results) for breadth days. feedback: per paper, a score
    adjustment, an (adjustment, reason) pair, or a `Reacted` (see FeedbackModel).
    lexical: each interest's scaled BM25 per paper (`lexical_for`); without it
    relevance is the cosine alone. labels: per paper, a note its explanation ends
    with ("new on arXiv today"). typical: each candidate's `typicality` in the
    whole library (None: relevance without it). relevance: `interest_scores` of
    these ids and interests, when the caller keeps it (computed here otherwise).
    library: the whole `Library` the candidates come from (`ids` are its papers or
    some of them), when the caller keeps one: a member's likes are measured from
    its mean, their learned taste against its moments, and the papers the team
    reacted to are read from it when they are not candidates (None: the
    candidates are the library).
    """
    if len(ids) == 0:
        return None
    matrix = np.asarray(matrix, dtype=np.float32)
    history = [p for p in history if p.day < day]  # a replay of day D never sees D or later
    # A paper an interest was seeded from ("like X") has been read already: never pick X itself.
    used = shown_ids(history, spend_runners_up=settings.spend_runners_up)
    used |= {it.paper_id for it in interests if it.paper_id}
    # A paper the team reacted to was in front of it (a share, a calibration card): never pick it again
    # either. A reacted runner-up stays open, but not to the member who judged it (best_for).
    reacted = {pid for pid, value in (feedback or {}).items() if isinstance(value, Reacted)}
    # Every paper the channel was shown under "Also today" (runners-up and exploration cards): the day first.
    previewed_on: dict[str, date] = {}
    for past in sorted(history, key=lambda p: p.day):
        for r in past.runners_up:
            previewed_on.setdefault(r, past.day)
    if not settings.spend_reacted_runners_up:
        reacted -= previewed_on.keys() - {p.paper_id for p in history}
    used |= reacted
    row = library.row_of(ids) if library is not None else row_map(ids)
    open_mask = np.ones(len(ids), dtype=bool)
    open_mask[[row[pid] for pid in used if pid in row]] = False
    if not open_mask.any():
        return None
    seed = day_hash(channel, day) % (2**32)
    fb = FeedbackModel(ids, matrix, feedback, settings, row, library)
    ordered = sorted((p for p in history if p.paper_id), key=lambda p: p.day)
    recent = [p.paper_id for p in ordered[-settings.recent_days:]]
    # Novelty against the last week only matters with MMR on, or on breadth days (no interests).
    if settings.mmr_lambda < 1 or not interests:
        redundancy = _redundancy(matrix, row, recent)
    else:
        redundancy = np.zeros(len(ids), dtype=np.float32)
    lam = settings.mmr_lambda

    def choice(i: int, kind: str, score: float, sim: float = 0.0, interest=None, member=None,
               instead: int | None = None, adjust: np.ndarray | None = None) -> Choice:
        """A Choice; `instead`: the pick without feedback; `adjust`: the feedback used (None: the
        whole team's, as breadth days and the exploration slot use it: made only on those days)."""
        adjust = fb.for_member(None) if adjust is None else adjust
        why = fb.notes.get(i) if fb.direct[i] else None
        if instead is not None and instead != i:
            why = fb.why(i, instead, member) or why
        return Choice(ids[i], kind, float(score), float(sim), interest, member, float(adjust[i]),
                      _with_label(why, ids[i]))

    def _with_label(why: str | None, pid: str) -> str | None:
        label = (labels or {}).get(pid)
        return (f"{why}; {label}" if why else label) if label else why

    open_rows = np.flatnonzero(open_mask)
    if not interests:
        sig = None  # the per-paper prior only breadth days read
        if signals:
            sig = np.fromiter((float(signals.get(pid, 0.0)) for pid in ids), dtype=np.float32, count=len(ids))
        return _breadth_pick(matrix, open_rows, fb.for_member(None), sig, redundancy, seed, settings, choice,
                             channel, day)

    hybrid, cos, weight = relevance if relevance is not None else interest_scores(matrix, ids, interests,
                                                                                  lexical, settings, row)
    # An interest that spans the library had typicality rank its papers in its place; without
    # typicality its (scaled) words still did, and the explanation says they match.
    wide = is_broad(weight) if typical is not None else np.zeros(len(interests), dtype=bool)
    members = list(dict.fromkeys(it.added_by or "" for it in interests))
    cols_of = {m: [j for j, it in enumerate(interests) if (it.added_by or "") == m] for m in members}
    anchors = {m: np.stack([np.asarray(interests[j].vector, dtype=np.float32) for j in cols])
               for m, cols in cols_of.items()}
    order = member_order(members, history, channel, day, settings.fairness_window)
    scored: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def scores_of(member: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(stated relevance, feedback adjustment, score) of every paper on the member's turn."""
        if member not in scored:
            rel = turn_relevance(hybrid[:, cols_of[member]], typical, settings)
            adjust = fb.for_member(member or None) if fb.active else np.zeros_like(rel)
            scored[member] = (rel, adjust, rel + adjust)
        return scored[member]

    taken: set[int] = set()
    # A paper the channel was shown under "Also today" is not shown there again: it may still be a
    # member's paper of the day.
    previewed = [row[pid] for pid in previewed_on if pid in row]

    def best_for(member: str, penalty_rows: list[int], *, runner_up: bool = False) -> Choice | None:
        """The member's best open paper, with novelty against recent posts and today's other papers;
        never one they judged against, nor as a `runner_up` one the channel was shown there before."""
        rel, adjust, total = scores_of(member)
        novelty = redundancy
        if penalty_rows and lam < 1:
            novelty = np.maximum(novelty, (matrix @ matrix[penalty_rows].T).max(axis=1))
        base = np.where(open_mask, lam * rel - (1 - lam) * novelty, -np.inf)
        score = np.where(open_mask, lam * total - (1 - lam) * novelty, -np.inf)
        for i in (*taken, *fb.judged(member), *(previewed if runner_up else ())):
            base[i] = score[i] = -np.inf
        learned = fb.learned(member or None, anchors[member]) if fb.active else None
        if learned is not None:  # fused by rank with the member's classifier, once it has likes to learn from
            score = rank_fusion(score, learned, k=settings.fusion_k)
        i = int(np.argmax(score))
        if not np.isfinite(score[i]):
            return None
        cols = cols_of[member]
        j = cols[int(hybrid[i, cols].argmax())]
        made = choice(i, INTEREST, float(score[i]), float(cos[i, j]), interests[j], member or None,
                      instead=int(np.argmax(base)), adjust=adjust)
        made.broad = bool(wide[j])  # said as it was chosen
        return made

    picked: list[Choice] = []
    also = None
    if is_exploration_day(channel, day, settings.exploration_rate):
        unshown = open_mask.copy()
        unshown[previewed] = False  # shown to the whole team before
        found = _exploration(unshown, [scores_of(m)[2] for m in members], fb, matrix, settings)
        if found is not None:
            i = found
            # Named after the nearest interest that says where to look; one as wide as the library is
            # near everything, and with only such interests nothing lies "outside" them.
            said = [c for c in range(len(interests)) if not wide[c]]
            j = said[int(cos[i, said].argmax())] if said else int(cos[i].argmax())
            also = Choice(ids[i], EXPLORATION, float(max(scores_of(m)[2][i] for m in members)),
                          float(cos[i, j]), interests[j], None, float(fb.for_member(None)[i]),
                          _with_label(None, ids[i]), broad=not said)
            taken.add(i)
            if settings.explore_in_main:
                picked.append(also)
                also = None

    want = 1 + settings.runners_up
    queue = list(order)
    while len(picked) < want:
        if not queue:
            queue = list(order)  # fewer members than slots: go round again
        member = queue.pop(0)
        c = best_for(member, sorted(taken), runner_up=bool(picked))
        if c is None:
            break
        picked.append(c)
        taken.add(row[c.paper_id])
    if not picked:
        return None
    picked[0].shown_on = previewed_on.get(picked[0].paper_id)  # the team saw it then: its post says so
    return DailyPick(channel, day, picked[0], picked[1:want], also=also)


def _exploration(open_mask: np.ndarray, member_scores: list[np.ndarray], fb: FeedbackModel,
                 matrix: np.ndarray, settings: PickSettings) -> int | None:
    """The best open paper just outside what the team's interests and tastes cover (row), or None.

    Each member's score (stated interest blended with their taste) covers their
    `explore_skip` best open papers: those are what their own turns will bring.
    The exploration paper is the open paper no member covers that scores best
    for a member or for what anyone in the team liked: a neighbouring area, not
    the least similar corner of the library.
    """
    open_rows = np.flatnonzero(open_mask)
    k = settings.explore_skip
    if len(open_rows) <= k:
        return None
    covered = np.zeros(len(open_mask), dtype=bool)
    for s in member_scores:
        covered[open_rows[np.argpartition(-s[open_rows], k - 1)[:k]]] = True
    candidates = open_mask & ~covered
    if not candidates.any():
        return None
    team = np.max(np.stack(list(member_scores) + [matrix @ v for v in fb.taste_vectors()]), axis=0)
    return int(np.argmax(np.where(candidates, team, -np.inf)))


def _breadth_pick(matrix, open_rows, fb, sig, redundancy, seed, settings, choice,
                  channel, day) -> DailyPick:
    """No interests yet: strong papers far from what was recently shown, spread across areas."""
    rows = _sample_rows(open_rows, settings.candidate_sample, seed)
    strong = strength(matrix, rows, signals=sig, sample=settings.density_sample, seed=seed)
    lam = min(settings.mmr_lambda, settings.breadth_lambda)
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


def like_text(paper) -> str:
    """How an interest seeded from a paper reads in lists and explanations."""
    return f"papers like {paper.short_name}"
