"""Reactions as feedback, simulated: does the team's feedback make the paper of the day better?

    .venv/bin/python bench/feedback.py --data ../shared/eval/iclr2024.jsonl [--teams 24] [--days 60]

Teams of 3-5 members; each member has a hidden topic (a topic class of the
data, as in bench/picks.py) but only told the bot something vague ("machine
learning", "deep learning", ...). Every day the one pick function the bot calls,
`store.pick_for_day`, picks a paper (on a private copy of the embedded library
holding each team's interests, posts and reactions as the bot stores them); each
member reacts to that daily message according to their hidden interest, with
noise:

- a like (🔥, 👍 or ❤️, sometimes with a 👀) with a probability that rises with
  the paper's closeness to the member's topic (cosine to the centroid of the
  topic's papers): 3% for a far paper, about 60% for a typical on-topic one;
- 😴/👎 up to 30% for papers far from the topic;
- 5% of reactions are taken back an hour later (reaction_removed).

As in bench/picks.py, the interests are `/paper interests add` through the
command grammar, the post is recorded as bot/posting.py records a delivered one
(claim, then finish with its ts), and each reaction is a `reaction_added` (or
`reaction_removed`) Events API payload on that message through the bot's own
handlers (bot.reactions), so they reach the log as Slack delivers them
(store.feedback: current state, weights, half-life decay, per-member caps) and,
with feedback on, steer the next day's pick. Each team is run twice on identical noise, feedback off and
on. Reported, over non-exploration days:
- precision: the paper is relevant to at least one member (as bench/picks.py),
  overall and per 20-day block (feedback needs a few days to learn);
- fairness: each member's share of days relevant to them (min / max per team),
  and the share picked for them (the pick's turn-taking);
- replay: precision@1 / nDCG of `store.feedback.replay_channel` on the logs
  the feedback-off run produced (ranking with vs without feedback).
`--specific` gives members their topic in their own words instead: feedback
must not cost those teams precision.

Measured (24 teams, seed 7, iclr2024, reactions through the bot's handlers):
vague, off 19.4% / on 29.2% (blocks on 20% / 31% / 36%), replay P@1 0.76 against
0.53 as posted; specific, off 75.8% / on 80.0% (blocks off 79% / 76% / 72%, on
84% / 80% / 76%), replay 0.78 against 0.71. Before relevance counted how typical
a paper is (store.pick.typicality): vague off 15.3% / on 24.0%, replay 0.72
against 0.47; specific off 75.1% / on 81.1%, replay 0.80 against 0.67. Vague with
the likes uncentred (d5febe5): on 21.0%; with the likes also whitened (tried,
dropped): on 20.0%, specific 80.0%.

bench/picks.py is the main measure since issue 14 (the naive pick, Rocchio and
paperclub side by side, clear and vague interests, reactions on runners-up too);
this bench keeps the noisier reaction model and the replay figures.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import time
from collections import Counter
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from picks import BOT, DEFAULT_DATA, TOPICS, Clock, bot_deps, load_world, reaction_payload, relevant  # noqa: E402

from store import feedback as fb  # noqa: E402
from store import PickSettings, pick_for_day  # noqa: E402
from store.feedback import Feedback  # noqa: E402

START = date(2024, 1, 8)
VAGUE = ["machine learning", "deep learning", "ML research", "neural networks", "AI papers"]
DAY = 86400.0


def make_teams(n: int, rng: np.random.Generator, specific: bool = False) -> list[list[tuple[str, str, str]]]:
    """Teams of 3-5 members: (member, hidden topic label, the interest they gave).

    The interest is vague ("machine learning"), or with `specific` their topic in
    their own words (bench/picks.py's phrasings): feedback should not hurt then.
    """
    labels = list(TOPICS)
    teams = []
    for t in range(n):
        size = int(rng.integers(3, 6))
        chosen = rng.choice(labels, size=size, replace=False)
        said = [VAGUE[int(rng.integers(len(VAGUE)))] for _ in chosen]
        if specific:
            said = [TOPICS[label][0][int(rng.integers(len(TOPICS[label][0])))] for label in chosen]
        teams.append([(f"T{t}M{m}", str(label), text) for m, (label, text) in enumerate(zip(chosen, said))])
    return teams


def reactions_for(rng: np.random.Generator, affinity: float) -> list[str]:
    """What one member does with one post, given how close it is to their hidden topic.

    affinity: cosine to the centroid of the topic's papers (on-topic papers: median
    0.66; others: median 0.45, 90th percentile about 0.57 in iclr2024).
    """
    out = []
    like = 0.03 + 0.75 * float(np.clip((affinity - 0.45) / 0.25, 0, 1))
    dislike = 0.30 * float(np.clip((0.55 - affinity) / 0.15, 0, 1))
    u = rng.random()
    if u < like:
        fire = 0.4 if affinity > 0.65 else 0.15
        out.append("fire" if rng.random() < fire else "+1" if rng.random() < 0.7 else "heart")
        if rng.random() < 0.15:
            out.append("eyes")
    elif u < like + dislike:
        out.append("sleeping" if rng.random() < 0.5 else "-1")
    return out


class Sim:
    """One team's 60 days with feedback on or off; reaction noise is fixed by (team, day, member)."""

    def __init__(self, team, t, world, library, args, settings, use_feedback: bool, centroids):
        from bot.commands import run_command

        self.team, self.t, self.ids, self.matrix, self.rec_of = team, t, world.ids, world.matrix, world.rec_of
        self.store, self.searcher, self.deps, self.clock = library
        self.row = {pid: i for i, pid in enumerate(self.ids)}
        self.centroids = centroids
        self.args, self.settings, self.use_feedback = args, settings, use_feedback
        self.channel = f"C{t:03d}"
        self.clock.now = datetime.combine(START - timedelta(days=1), datetime.min.time(), timezone.utc)
        for member, _, text in team:
            run_command(self.deps, member, f"interests add {text}", channel_id=self.channel)
        self.label_of = {member: label for member, label, _ in team}
        self.events = 0  # reaction events sent, for their ids

    def run(self) -> dict:
        counts = Counter()
        picked_for, relevant_to = Counter(), Counter()
        blocks = Counter()
        for d in range(self.args.days):
            day = START + timedelta(days=d)
            midnight = datetime(day.year, day.month, day.day, tzinfo=timezone.utc).timestamp()
            feedback = Feedback(half_life_days=self.args.half_life) if self.use_feedback else None
            pick = pick_for_day(self.store, self.searcher, self.channel, day, feedback=feedback,
                                settings=self.settings)
            if pick is None:
                break
            posted_at = midnight + 9 * 3600
            self.store.claim_post(self.channel, day.isoformat(), claimer="bench", paper_id=pick.paper_id,
                                  pick=pick.to_dict(), now=posted_at)
            ts = f"{posted_at:.6f}"
            self.store.finish_post(self.channel, day.isoformat(), claimer="bench", ts=ts, now=posted_at,
                                   claimed_at=posted_at)
            rec = self.rec_of.get(pick.paper_id, {})
            hits = [m for m, label in self.label_of.items() if relevant(rec, label)]
            self._react(pick.paper_id, d, posted_at, ts)
            if pick.exploration:
                counts["explore_days"] += 1
                continue
            counts["days"] += 1
            counts["hit"] += bool(hits)
            counts["why_feedback"] += bool(pick.choice.feedback_why)
            blocks[(d // 20, "days")] += 1
            blocks[(d // 20, "hit")] += bool(hits)
            if pick.choice.member:
                picked_for[pick.choice.member] += 1
            for m in hits:
                relevant_to[m] += 1
        n = max(1, counts["days"])
        members = list(self.label_of)
        return {
            "counts": counts, "blocks": blocks,
            "rel_min": min(relevant_to[m] / n for m in members), "rel_max": max(relevant_to[m] / n for m in members),
            "pick_min": min(picked_for[m] / n for m in members), "pick_max": max(picked_for[m] / n for m in members),
        }

    def _react(self, paper_id: str, d: int, posted_at: float, ts: str) -> None:
        vector = self.matrix[self.row[paper_id]]
        for member, label in self.label_of.items():
            seed = int(hashlib.sha256(f"{self.args.seed}|{self.t}|{d}|{member}".encode()).hexdigest()[:12], 16)
            rng = np.random.default_rng(seed)
            for emoji in reactions_for(rng, float(vector @ self.centroids[label])):
                at = posted_at + float(rng.uniform(600, 10 * 3600))
                self._send(member, emoji, paper_id, ts, at, True)
                if rng.random() < 0.05:
                    self._send(member, emoji, paper_id, ts, at + 3600, False)

    def _send(self, user, emoji, paper_id, ts, at, added: bool) -> None:
        """One reaction event on the daily message, through the bot's own handler."""
        from bot.reactions import handle_reaction_added, handle_reaction_removed

        self.clock.now = datetime.fromtimestamp(at, timezone.utc)
        body = reaction_payload(self.channel, ts, user, emoji, at, f"Ev{self.channel}-{self.events}")
        self.events += 1
        if not added:
            body["event"]["type"] = "reaction_removed"
        handle = handle_reaction_added if added else handle_reaction_removed
        result = handle(self.deps, body, bot_user_id=BOT)
        assert result.status == "recorded" and result.paper_id == paper_id, result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--teams", type=int, default=24)
    ap.add_argument("--days", type=int, default=60)
    ap.add_argument("--model", default="all-MiniLM-L6-v2")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--half-life", type=float, default=fb.HALF_LIFE_DAYS)
    ap.add_argument("--strength", type=float, default=None, help="PickSettings.feedback_strength")
    ap.add_argument("--contrast", type=float, default=None, help="PickSettings.feedback_contrast")
    ap.add_argument("--cache", type=Path, default=None, help="cached database of the embedded papers")
    ap.add_argument("--specific", action="store_true", help="members state their topic instead of a vague one")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    world = load_world(args.data, args.model, args.cache)
    ids, matrix, rec_of = world.ids, world.matrix, world.rec_of
    teams = make_teams(args.teams, np.random.default_rng(args.seed), args.specific)
    centroids = {}  # each hidden topic as the mean of its papers: what the member truly likes
    for label in TOPICS:
        rows = [i for i, pid in enumerate(ids) if relevant(rec_of.get(pid, {}), label)]
        c = matrix[rows].mean(axis=0)
        centroids[label] = c / np.linalg.norm(c)
    knobs = {k: v for k, v in (("feedback_strength", args.strength), ("feedback_contrast", args.contrast))
             if v is not None}
    settings = PickSettings(**knobs)
    print(f"{len(ids)} papers, {args.teams} teams x {args.days} days, "
          f"{'specific' if args.specific else 'vague'} interests, half-life "
          f"{args.half_life:g} d, {settings}", file=sys.stderr)

    started = time.perf_counter()
    results = {"off": [], "on": []}
    replays = Counter()
    scratch = tempfile.TemporaryDirectory(prefix="paperclub-feedback-")
    clock = Clock()
    libraries = {}
    for mode in ("off", "on"):
        store, searcher = world.library(Path(scratch.name) / f"{mode}.db")
        libraries[mode] = (store, searcher, bot_deps(store, searcher, clock, settings), clock)
    for t, team in enumerate(teams):
        for mode in ("off", "on"):
            sim = Sim(team, t, world, libraries[mode], args, settings, mode == "on", centroids)
            results[mode].append(sim.run())
            if mode == "off":
                scores = fb.replay_channel(sim.store, sim.channel, ids, matrix, [], {
                    "as posted": {"as_posted": True},
                    "feedback": {"half_life_days": args.half_life, "settings": settings}})
                for s in scores:
                    replays[(s.name, "points")] += s.points
                    replays[(s.name, "hits")] += s.hits
                    replays[(s.name, "ndcg")] += s.ndcg_sum
    elapsed = time.perf_counter() - started
    for store, *_ in libraries.values():
        store.close()
    scratch.cleanup()

    def figures(rows: list[dict]) -> dict:
        c = sum((r["counts"] for r in rows), Counter())
        b = sum((r["blocks"] for r in rows), Counter())
        return {
            "precision": c["hit"] / max(1, c["days"]),
            "precision_by_20_days": [b[(k, "hit")] / max(1, b[(k, "days")]) for k in range((args.days + 19) // 20)],
            "relevant_share_min": float(np.mean([r["rel_min"] for r in rows])),
            "relevant_share_max": float(np.mean([r["rel_max"] for r in rows])),
            "picked_share_min": float(np.mean([r["pick_min"] for r in rows])),
            "picked_share_max": float(np.mean([r["pick_max"] for r in rows])),
            "explained_by_feedback": c["why_feedback"] / max(1, c["days"]),
            "days": c["days"], "exploration_days": c["explore_days"],
        }

    out = {"off": figures(results["off"]), "on": figures(results["on"]),
           "replay": {name: {"points": replays[(name, "points")],
                             "precision_at_1": replays[(name, "hits")] / max(1, replays[(name, "points")]),
                             "ndcg": replays[(name, "ndcg")] / max(1, replays[(name, "points")])}
                      for name in ("as posted", "feedback")},
           "seconds": elapsed, "teams": args.teams, "specific": args.specific, "days": args.days, "half_life_days": args.half_life,
           "feedback_strength": settings.feedback_strength, "feedback_contrast": settings.feedback_contrast}
    off, on = out["off"], out["on"]
    print(f"reactions as feedback: {args.teams} teams x {args.days} days, "
          f"{'specific interests' if args.specific else 'vague interests only'}")
    print(f"  precision (relevant to >= 1 member): off {off['precision']:.1%}  on {on['precision']:.1%}")
    print("    by 20-day block: off " + " / ".join(f"{x:.0%}" for x in off["precision_by_20_days"])
          + "   on " + " / ".join(f"{x:.0%}" for x in on["precision_by_20_days"]))
    print(f"  fairness, share of days relevant to each member (min / max): "
          f"off {off['relevant_share_min']:.2f} / {off['relevant_share_max']:.2f}   "
          f"on {on['relevant_share_min']:.2f} / {on['relevant_share_max']:.2f}")
    print(f"  turns, share of days picked for each member (min / max): "
          f"off {off['picked_share_min']:.2f} / {off['picked_share_max']:.2f}   "
          f"on {on['picked_share_min']:.2f} / {on['picked_share_max']:.2f}")
    print(f"  days whose explanation names a reaction (on): {on['explained_by_feedback']:.0%}")
    r = out["replay"]
    print(f"  replay of the feedback-off logs: as posted P@1 {r['as posted']['precision_at_1']:.2f} "
          f"nDCG {r['as posted']['ndcg']:.2f}; ranked with feedback P@1 {r['feedback']['precision_at_1']:.2f} "
          f"nDCG {r['feedback']['ndcg']:.2f} ({r['feedback']['points']} steps)")
    print(f"  {elapsed:.0f} s")
    if args.json:
        print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
