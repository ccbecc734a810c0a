"""Reactions as feedback: what each emoji means, the log's current state, tallies, learning, replay.

Pure-ish functions over a Store; time always comes in as an argument.

The reaction log is append-only: every reaction_added and reaction_removed is
a row, stored once per Slack event_id. The current state of one person's
emoji on one message is its latest event, so a removal cancels the add before
it whatever order retries arrive in. Skin-tone variants count as their base
emoji; unknown emoji are logged with weight 0.

Learning turns the log into `store.taste.Reacted` entries: each member's signed
weight for each paper the channel was shown, halved every `half_life_days`,
capped per member and paper. The pick spreads them to similar papers.
"""
from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import date, datetime, time as dtime, timedelta, timezone
from typing import Iterable, Mapping, NamedTuple, Sequence
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import numpy as np

from .base import Store
from .pick import Interest, PastPost, PickSettings
from .taste import FeedbackModel, Library, Reacted

DEFAULT_WEIGHTS: dict[str, float] = {
    "fire": 2.0,
    "+1": 1.0, "heart": 1.0, "star": 1.0, "tada": 1.0, "100": 1.0,
    "eyes": 0.0,  # "want to read": no verdict yet, but it saves the paper
    "-1": -1.0, "sleeping": -1.0,
}
# Slack sends either name for some emoji.
ALIASES = {"thumbsup": "+1", "thumbsdown": "-1", "heavy_heart": "heart", "red_heart": "heart",
           "hundred": "100", "sleepy": "sleeping"}
SAVE_EMOJI = "eyes"
EMOJI_CHARS = {"fire": "🔥", "+1": "👍", "-1": "👎", "heart": "❤️", "star": "⭐", "tada": "🎉",
               "100": "💯", "eyes": "👀", "sleeping": "😴"}
# A product choice, not a tuned one: an interest that drifted fades within a season. bench/picks.py
# (members who never change topic) cannot tell it from none: iclr2024, 30 teams, clear, days 21-60 at
# engagement 0.6 / 0.3: 30 days 0.812 / 0.772, 90 days 0.816 / 0.764, no decay 0.817 / 0.763.
HALF_LIFE_DAYS = 30.0
MAX_PER_PAPER = 3.0  # one member's reactions to one paper count at most this much, either way
DAY = 86400.0


@dataclass(frozen=True)
class Feedback:
    """How reactions count: emoji weights (PAPERCLUB_REACTION_WEIGHTS over the defaults) and decay."""

    weights: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    half_life_days: float = HALF_LIFE_DAYS

    @classmethod
    def from_settings(cls, settings) -> "Feedback":
        """From the bot's settings (`reaction_weights`, `feedback_half_life_days`); defaults for the rest."""
        return cls(parse_weights(getattr(settings, "reaction_weights", None) or ""),
                   float(getattr(settings, "feedback_half_life_days", None) or HALF_LIFE_DAYS))


# -- what an emoji means ------------------------------------------------------------------------
def base_emoji(name: str) -> str:
    """`+1::skin-tone-3` -> `+1`, `:thumbsup:` -> `+1`: the emoji a weight is looked up by."""
    name = (name or "").strip().strip(":").lower().split("::", 1)[0]
    return ALIASES.get(name, name)


def parse_weights(text: str | None, base: Mapping[str, float] = DEFAULT_WEIGHTS) -> dict[str, float]:
    """`"fire=2,+1=1,rocket=1"` on top of the defaults (set one to 0 to drop it); ValueError if malformed."""
    weights = dict(base)
    for part in re.split(r"[,;\s]+", text or ""):
        if not part:
            continue
        name, sep, value = part.rpartition("=")
        if not sep or not name.strip(": "):
            raise ValueError(f"reaction weight {part!r} should look like fire=2")
        try:
            number = float(value)
        except ValueError:
            raise ValueError(f"reaction weight {part!r}: {value!r} is not a number") from None
        if not math.isfinite(number):
            raise ValueError(f"reaction weight {part!r} must be a finite number")
        weights[base_emoji(name)] = number
    return weights


def weight_of(emoji: str, weights: Mapping[str, float] = DEFAULT_WEIGHTS) -> float:
    return float(weights.get(base_emoji(emoji), 0.0))


def emoji_text(base: str) -> str:
    """🔥 for the emoji we know; Slack's `:name:` (which it renders) for the rest."""
    return EMOJI_CHARS.get(base, f":{base}:")


# -- the log and its current state ----------------------------------------------------------------
@dataclass
class Recorded:
    """What record_reaction did: recorded, duplicate (event already logged) or ignored (not our message)."""

    status: str
    paper_id: str | None = None
    saved: bool | None = None  # 👀: whether the paper is now on the member's reading list


def record_reaction(store: Store, *, event_id: str, channel: str, message_ts: str, user: str, emoji: str,
                    added: bool, event_ts: float, event_time: float | None = None,
                    now: float) -> Recorded:
    """Append one reaction event for a bot message to the log (once per event_id); 👀 saves the paper."""
    message = store.paper_for_message(channel, message_ts)
    if message is None:
        return Recorded("ignored")
    paper_id = message["paper_id"]
    base = base_emoji(emoji)
    inserted = store.add_reaction({
        "event_id": event_id, "channel": channel, "message_ts": message_ts, "paper_id": paper_id,
        "user": user, "emoji": emoji, "base": base, "action": "added" if added else "removed",
        "event_ts": float(event_ts), "event_time": event_time, "recorded_at": now})
    if not inserted:
        return Recorded("duplicate", paper_id)
    saved = sync_saved(store, user, paper_id, now=now) if base == SAVE_EMOJI else None
    return Recorded("recorded", paper_id, saved)


# -- verdict buttons: "for me" / "not for me" on any paper card ------------------------------------
# A press is logged as the reaction it stands for (👍 / 👎, so the team's weights, the decay and the
# learner read it like one), for the paper on the card: on a runner-up inside the daily message it
# is that runner-up's, while a reaction on the message itself stays the day's paper's.
VERDICTS = {"more": "+1", "less": "-1"}
VERDICT_PREFIX = "verdict_"  # the logged emoji name: verdict_more / verdict_less (no real emoji has it)


def standing_verdicts(store: Store, user: str, paper_id: str) -> list[dict]:
    """The member's verdict rows on a paper that still stand (at most one, the latest)."""
    rows = store.reactions(user=user, paper_ids=[paper_id])
    return [r for r in current_reactions(rows) if r["emoji"].startswith(VERDICT_PREFIX)]


def verdicts_of(store: Store, user: str, paper_ids: Sequence[str]) -> dict[str, str]:
    """paper id -> the member's standing verdict on it ("more" / "less"), for papers they judged."""
    rows = store.reactions(user=user, paper_ids=list(paper_ids))
    return {r["paper_id"]: r["emoji"][len(VERDICT_PREFIX):] for r in current_reactions(rows)
            if r["emoji"].startswith(VERDICT_PREFIX)}


def record_verdict(store: Store, *, user: str, paper_id: str, verdict: str | None, channel: str,
                   message_ts: str, event_id: str, now: float) -> Recorded:
    """Set a member's verdict on a paper ("more", "less"; None takes it back), through the reaction log.

    Idempotent: the verdict already standing is "duplicate"; the other one is taken back first, so a
    member has at most one verdict per paper. `event_id` names the press (a redelivery is "duplicate").
    """
    if verdict is not None and verdict not in VERDICTS:
        raise ValueError(f"unknown verdict {verdict!r}")
    standing = standing_verdicts(store, user, paper_id)
    if verdict is not None and any(r["emoji"] == VERDICT_PREFIX + verdict for r in standing):
        return Recorded("duplicate", paper_id)
    changed = False
    for n, r in enumerate(standing):  # the earlier verdict, taken back where it was given
        changed |= store.add_reaction({
            "event_id": f"{event_id}:undo{n}", "channel": r["channel"], "message_ts": r["message_ts"],
            "paper_id": paper_id, "user": user, "emoji": r["emoji"], "base": r["base"], "action": "removed",
            "event_ts": float(now), "event_time": None, "recorded_at": now})
    if verdict is not None:
        changed |= store.add_reaction({
            "event_id": event_id, "channel": channel, "message_ts": message_ts, "paper_id": paper_id,
            "user": user, "emoji": VERDICT_PREFIX + verdict, "base": VERDICTS[verdict], "action": "added",
            "event_ts": float(now), "event_time": None, "recorded_at": now})
    return Recorded("recorded" if changed else "duplicate", paper_id)


def misses_in_a_row(store: Store, user: str, channel: str, weights: Mapping[str, float] = DEFAULT_WEIGHTS,
                    *, judged: str | None = None) -> int:
    """How many papers picked for the member in `channel` (the paper of the day on their turns and its
    runners-up) they judged against in a row, the latest first (their standing reactions and verdicts
    on a paper summed, by the latest of them), since their last one for a paper. What they said of a
    paper picked for someone else, a search result or a calibration round's paper says nothing of how
    the pick reads their words: it neither counts nor ends the run; nor does a 👀 or any emoji that
    weighs nothing. `judged`: the paper just judged; 0 unless it is one picked for them that this was
    their only standing judgment of (otherwise the run did not grow: a 😴 beside a 👎 on one post)."""
    mine = {pid for past in map(PastPost.of_row, store.post_history(channel))
            if past.served == user and not past.exploration
            for pid in (past.paper_id, *past.runners_up) if pid != past.also}
    net: dict[str, _Judged] = {}
    for n, r in enumerate(current_reactions(store.reactions(channel=channel, user=user))):
        w = float(weights.get(r["base"], 0.0))
        if w and r["paper_id"] in mine:
            had = net.get(r["paper_id"], _NOT_JUDGED)
            net[r["paper_id"]] = _Judged(had.weight + w, n, had.count + 1)
    if judged is not None and net.get(judged, _NOT_JUDGED).count != 1:
        return 0  # not one picked for them, or judged before: the run did not grow
    run = 0
    for paper in sorted(net.values(), key=lambda j: -j.latest):
        if paper.weight > 0:
            break
        run += paper.weight < 0
    return run


class _Judged(NamedTuple):
    """A member's standing judgments of one paper: their net weight, where the latest stands in the
    log, how many."""

    weight: float
    latest: int
    count: int


_NOT_JUDGED = _Judged(0.0, -1, 0)


def sync_saved(store: Store, user: str, paper_id: str, *, now: float) -> bool:
    """Make the reading list match the log: saved while any of the member's 👀 on the paper stands."""
    rows = store.reactions(user=user, paper_ids=[paper_id])
    eyes = [r for r in current_reactions(rows) if r["base"] == SAVE_EMOJI]
    if eyes:
        store.save_paper(user, paper_id, source="eyes", now=now)
        return True
    store.unsave_paper(user, paper_id, source="eyes")
    return any(r["paper_id"] == paper_id for r in store.saved_papers(user))


def current_reactions(rows: Iterable[dict]) -> list[dict]:
    """The reactions still standing: the latest event per (message, person, emoji), if it is an add.

    Rows must come in log order (event_ts, then id). Skin-tone variants of one
    emoji by one person on one message count once.
    """
    latest: dict[tuple, dict] = {}
    for r in rows:  # the paper too: a verdict button on a runner-up shares the daily message's ts
        latest[(r["channel"], r["message_ts"], r["paper_id"], r["user"], r["emoji"])] = r
    standing: dict[tuple, dict] = {}
    for r in latest.values():
        if r["action"] == "added":
            standing.setdefault((r["channel"], r["message_ts"], r["paper_id"], r["user"], r["base"]), r)
    return sorted(standing.values(), key=lambda r: (r["event_ts"], r["id"] if "id" in r else 0))


def tally(reactions: Iterable[dict]) -> Counter:
    """Standing reactions per base emoji."""
    return Counter(r["base"] for r in reactions)


def format_tally(counts: Mapping[str, int], weights: Mapping[str, float] = DEFAULT_WEIGHTS) -> str:
    """`👍 2 · 🔥 1`: most frequent first, then the stronger emoji."""
    order = sorted(counts.items(), key=lambda kv: (-kv[1], -abs(weights.get(kv[0], 0.0)), kv[0]))
    return " · ".join(f"{emoji_text(e)} {n}" for e, n in order if n)


def _times(counts: Mapping[str, int], weights: Mapping[str, float] = DEFAULT_WEIGHTS) -> str:
    """`🔥×2 · 👍`: the compact form used inside an explanation (stronger emoji first)."""
    order = sorted(counts.items(), key=lambda kv: (-abs(weights.get(kv[0], 0.0)), -kv[1], kv[0]))
    return " · ".join(emoji_text(e) + (f"×{n}" if n > 1 else "") for e, n in order if n)


# -- learning ---------------------------------------------------------------------------------
def reacted_from_rows(rows: Iterable[dict], *, cutoff: float, weights: Mapping[str, float] = DEFAULT_WEIGHTS,
                      half_life_days: float = HALF_LIFE_DAYS,
                      names: Mapping[str, str] | None = None) -> dict[str, Reacted]:
    """paper id -> Reacted from log rows that happened before `cutoff` (seconds), decayed to it."""
    standing = current_reactions(r for r in rows if r["event_ts"] < cutoff)
    per: dict[str, dict[str, float]] = {}
    plus: dict[str, Counter] = {}
    minus: dict[str, Counter] = {}
    for r in standing:
        w = weights.get(r["base"], 0.0)
        if not w:
            continue
        age = max(0.0, cutoff - r["event_ts"]) / DAY
        decay = 0.5 ** (age / half_life_days) if half_life_days > 0 else 1.0
        pid = r["paper_id"]
        by = per.setdefault(pid, {})
        by[r["user"]] = by.get(r["user"], 0.0) + w * decay
        (plus if w > 0 else minus).setdefault(pid, Counter())[r["base"]] += 1
    out = {}
    for pid, by in per.items():
        by = {u: float(min(max(w, -MAX_PER_PAPER), MAX_PER_PAPER)) for u, w in by.items() if w}
        if not by:
            continue
        fans = tuple(u for u, w in sorted(by.items(), key=lambda kv: (-kv[1], kv[0])) if w > 0)
        critics = tuple(u for u, w in sorted(by.items(), key=lambda kv: (kv[1], kv[0])) if w < 0)
        out[pid] = Reacted(by, (names or {}).get(pid, pid), _times(plus.get(pid, {}), weights), fans,
                           _times(minus.get(pid, {}), weights), critics)
    return out


def local_midnight(day: date, tz: str | None) -> float:
    """The start of `day` in a time zone (UTC if unknown), as seconds."""
    try:
        zone = ZoneInfo(tz) if tz else timezone.utc
    except (ZoneInfoNotFoundError, ValueError):
        zone = timezone.utc
    return datetime.combine(day, dtime(0, 0), zone).timestamp()


def reacted_papers(store: Store, channel: str, cutoff: float, *, weights: Mapping[str, float] = DEFAULT_WEIGHTS,
                   half_life_days: float = HALF_LIFE_DAYS,
                   reactions: Sequence[dict] | None = None) -> dict[str, Reacted]:
    """How this channel reacted to what it was shown, up to `cutoff` (the pick's feedback).

    reactions: the channel's reaction log rows, when the caller has read them (those past `cutoff`
    are left out here)."""
    rows = store.reactions(channel=channel, before=cutoff) if reactions is None else [
        r for r in reactions if r["event_ts"] < cutoff]
    if not rows:
        return {}
    ids = list(dict.fromkeys(r["paper_id"] for r in rows))
    names = store.short_names(ids)
    return reacted_from_rows(rows, cutoff=cutoff, weights=weights, half_life_days=half_life_days, names=names)


def feedback_for_day(store: Store, channel: str, day: date, *, weights: Mapping[str, float] = DEFAULT_WEIGHTS,
                     half_life_days: float = HALF_LIFE_DAYS,
                     reactions: Sequence[dict] | None = None) -> dict[str, Reacted]:
    """The feedback for a channel's pick on `day`: reactions before that day began in the channel's zone.

    A fixed cutoff keeps the pick for a date the same however often it is
    recomputed (`/paper today`, a retry, `paperclub pick`).
    """
    schedule = store.get_schedule(channel)
    cutoff = local_midnight(day, schedule["tz"] if schedule else None)
    return reacted_papers(store, channel, cutoff, weights=weights, half_life_days=half_life_days,
                          reactions=reactions)


# -- what the team read: tallies and the digest ---------------------------------------------------
@dataclass
class PaperTally:
    """One paper posted in the window and how the channel reacted to it."""

    paper_id: str
    name: str
    kind: str  # daily, share
    posted_at: float
    day: str | None = None  # a daily post's date
    counts: Counter = field(default_factory=Counter)
    score: float = 0.0  # the weighted sum of the standing reactions
    people: set = field(default_factory=set)


@dataclass
class Digest:
    """A channel's last `days`: its posts with tallies, the most liked, who engaged."""

    channel: str
    days: int
    since: float
    until: float
    papers: list[PaperTally]
    engaged: Counter  # person -> standing reactions in the window

    @property
    def most_liked(self) -> PaperTally | None:
        liked = [p for p in self.papers if p.score > 0]
        return max(liked, key=lambda p: (p.score, len(p.people), -p.posted_at)) if liked else None

    @property
    def reactions(self) -> int:
        return sum(self.engaged.values())


def message_reactions(store: Store, channel: str, messages: Sequence[dict]) -> dict[str, list[dict]]:
    """paper id -> standing reactions on these bot messages (a daily post's abstract reply included)."""
    ts = {m["ts"] for m in messages} | {m["abstract_ts"] for m in messages if m.get("abstract_ts")}
    rows = [r for r in store.reactions(channel=channel, paper_ids=[m["paper_id"] for m in messages])
            if r["message_ts"] in ts]
    out: dict[str, list[dict]] = {}
    for r in current_reactions(rows):
        out.setdefault(r["paper_id"], []).append(r)
    return out


def channel_digest(store: Store, channel: str, *, now: float, days: int = 7,
                   weights: Mapping[str, float] = DEFAULT_WEIGHTS, tz: str = "UTC") -> Digest:
    """This channel's posts of its last `days` dates in its zone `tz` (today and the days before,
    from midnight: daily posts by their date, shares by when they were posted) with each paper's
    tally, for `/paper digest`."""
    zone = ZoneInfo(tz)
    first = datetime.fromtimestamp(now, zone).date() - timedelta(days=days - 1)
    since = datetime.combine(first, dtime(), zone).timestamp()
    messages = store.channel_messages(channel, since=since, until=now + 1, tz=tz)
    standing = message_reactions(store, channel, messages)
    names = {p.id: p.short_name for p in store.get_papers([m["paper_id"] for m in messages])}
    papers: dict[str, PaperTally] = {}
    engaged: Counter = Counter()
    for m in messages:
        pid = m["paper_id"]
        if pid in papers:
            continue
        t = PaperTally(pid, names.get(pid, pid), m["kind"], m["posted_at"] or 0.0, m.get("day"))
        for r in standing.get(pid, []):
            t.counts[r["base"]] += 1
            t.score += weights.get(r["base"], 0.0)
            t.people.add(r["user"])
            engaged[r["user"]] += 1
        papers[pid] = t
    return Digest(channel, days, since, now, list(papers.values()), engaged)


def post_tally(store: Store, channel: str, post: dict) -> tuple[Counter, set]:
    """(counts per emoji, people) standing on one daily post row."""
    message = {"ts": post.get("ts"), "abstract_ts": post.get("abstract_ts"), "paper_id": post["paper_id"]}
    rows = message_reactions(store, channel, [message]).get(post["paper_id"], [])
    return tally(rows), {r["user"] for r in rows}


# -- reading lists and privacy --------------------------------------------------------------------
def reading_list(store: Store, user: str) -> list[tuple]:
    """(Paper, saved row) for a member's saved papers, newest first (papers gone from the library left out)."""
    rows = store.saved_papers(user)
    papers = {p.id: p for p in store.get_papers([r["paper_id"] for r in rows])}
    return [(papers[r["paper_id"]], r) for r in rows if r["paper_id"] in papers]


def recent_reactions(store: Store, user: str, limit: int = 5) -> list[dict]:
    """A member's latest standing reactions, newest first."""
    return list(reversed(current_reactions(store.reactions(user=user))))[:limit]


def forget_member(store: Store, user: str) -> dict[str, int]:
    """Delete a member's reactions and reading list; their interests stay, unattributed."""
    return store.forget_user(user)


# -- replay: how would a ranking have done on this team's history? -------------------------------
@dataclass
class ReplayScore:
    """precision@1 and nDCG of a ranking over past posts, judged by the reactions they got."""

    name: str
    points: int = 0
    hits: int = 0
    ndcg_sum: float = 0.0

    @property
    def precision_at_1(self) -> float:
        return self.hits / self.points if self.points else 0.0

    @property
    def ndcg(self) -> float:
        return self.ndcg_sum / self.points if self.points else 0.0


def _ndcg(gains_in_rank_order: Sequence[float]) -> float:
    g = np.maximum(np.asarray(gains_in_rank_order, dtype=np.float64), 0.0)
    discounts = 1.0 / np.log2(np.arange(2, len(g) + 2))
    ideal = float((np.sort(g)[::-1] * discounts).sum())
    return float((g * discounts).sum()) / ideal if ideal > 0 else 0.0


def replay_channel(store: Store, channel: str, ids: Sequence[str], matrix: np.ndarray,
                   interests: Sequence[tuple[Interest, float]], pickers: Mapping[str, dict], *,
                   weights: Mapping[str, float] = DEFAULT_WEIGHTS, horizon: int = 7) -> list[ReplayScore]:
    """Score rankings on a channel's logged reactions.

    At each past post, the next `horizon` posts (their papers) are ranked using
    only what was known just before it (interests added earlier, reactions
    logged earlier), and the ranking is judged by the reactions those posts got
    later: precision@1 (the top paper was liked) and nDCG (gains: net weights).
    `interests`: (Interest, created_at). `pickers`: name -> {"feedback": bool,
    "half_life_days": float, "settings": PickSettings} or {"as_posted": True}.
    """
    messages = store.channel_messages(channel, since=0.0, until=float("inf"))
    standing = message_reactions(store, channel, messages)
    gain = {pid: sum(weights.get(r["base"], 0.0) for r in rows) for pid, rows in standing.items()}
    order: list[tuple[str, float]] = []
    for m in messages:  # one entry per paper: its first post
        if m["paper_id"] not in {p for p, _ in order}:
            order.append((m["paper_id"], m["posted_at"] or 0.0))
    library = Library(ids, matrix)
    row = library.row
    order = [(p, t) for p, t in order if p in row]
    log_rows = store.reactions(channel=channel)
    scores = [ReplayScore(name) for name in pickers]
    for k, (_, at) in enumerate(order):
        window = [p for p, _ in order[k:k + horizon]]
        gains = np.array([gain.get(p, 0.0) for p in window])
        if len(window) < 2 or not (gains > 0).any():
            continue
        known = [it for it, created in interests if created < at]
        imat = (np.stack([np.asarray(it.vector, dtype=np.float32) for it in known]) if known
                else np.zeros((0, matrix.shape[1]), dtype=np.float32))

        def relevance_of(papers: list[str]) -> np.ndarray:  # called in this iteration only
            """The team's best stated-interest match for each paper (0 with no interests yet)."""
            if not len(imat):  # noqa: B023
                return np.zeros(len(papers), dtype=np.float32)
            return (matrix[[row[p] for p in papers]] @ imat.T).max(axis=1)  # noqa: B023

        relevance = relevance_of(window)
        for score, (_name, spec) in zip(scores, pickers.items()):
            # "as_posted": the order the channel actually saw (the baseline every ranking must beat).
            total = np.zeros(len(window), dtype=np.float32) if spec.get("as_posted") else relevance.copy()
            if spec.get("feedback", True) and not spec.get("as_posted"):
                fb = reacted_from_rows(log_rows, cutoff=at, weights=weights,
                                       half_life_days=spec.get("half_life_days", HALF_LIFE_DAYS))
                if fb:  # the window's papers, the taste learned from the reacted ones in the library
                    model = FeedbackModel(window, matrix[[row[p] for p in window]], fb,
                                          spec.get("settings", PickSettings()), library=library)
                    total = total + model.for_member(None)
            # A stable sort: ties keep posting order, so equal scores do not flatter a ranking.
            ranked = gains[np.argsort(-total, kind="stable")]
            score.points += 1
            score.hits += int(ranked[0] > 0)
            score.ndcg_sum += _ndcg(ranked)
    return scores
