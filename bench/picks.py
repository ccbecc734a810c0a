"""Paper of the day, simulated: paperclub's pick beside the naive pick, with and without reactions.

    .venv/bin/python bench/picks.py --data ../shared/eval/iclr2024.jsonl [--teams 30] [--days 60]

Each simulated team has 3 members; each member cares about one topic class of
the data (`label_berenslab`). With *clear* interests a member describes it in
their own words (one line, no label names); with *vague* ones everybody says
"machine learning". A paper is relevant to a member when its label is their
topic or its author keywords name it (38% of the papers are "unlabeled").

Simulated reactions: every member 👍s a post or runner-up in their topic (🔥
when both the label and the keywords say so), and the served member 👎s a
post that is off their topic. They go through the real log logic
(store.feedback.reacted_from_rows: current state, weights, decay).

Pickers, each run on the same teams and days:
- naive: members in turn, the best unposted paper by cosine to that member's
  interest (runners-up: the next two members' best, never used up);
- Rocchio (with reactions): the naive pick with the served member's interest
  moved to interest + mean(liked) - 0.5 mean(disliked);
- paperclub: the one pick function the bot calls, `store.pick_for_day`, on a
  private copy of the embedded library where each team's interests, posts and
  reactions are stored as the bot stores them; without and with reactions.

Reported per picker: precision per served member over all days (an
exploration day counts as a hit when it is relevant to any member),
days 21-60 precision, turns (each member's share of served days, min/max per
team), relevant picks per member (min/max per team), repeats of a posted
paper, and exploration days with their hit rate. The same defaults serve
every dataset; `--set NAME=VALUE` overrides a PickSettings field to measure it.

Measured (30 teams of 3 x 60 days, iclr2024, all-MiniLM-L6-v2, default PickSettings, seed 1;
precision / days 21-60):
- clear interests: naive 0.658 / 0.624, Rocchio 0.783 / 0.792, paperclub without
  reactions 0.707 / 0.691, with them 0.834 / 0.845 (gain +0.154; Rocchio +0.167);
- vague interests: naive 0.041 / 0.036, Rocchio 0.294 / 0.360, paperclub 0.057 / 0.061
  without reactions, 0.357 / 0.453 with them (gain +0.392; Rocchio +0.324);
- turns 0.97 mean / 0.94 worst team, 0 repeats, exploration 186 days hitting 0.59
  (clear, no reactions) to 0.77 (clear, reactions); vague 0.16 / 0.68.
Seed 2, clear: naive 0.623 / 0.596, Rocchio 0.773 / 0.775 (gain +0.179), paperclub
0.647 / 0.620 without reactions, 0.817 / 0.831 with them (gain +0.211).
The learned taste's share is capped (feedback_max_share 0.7); uncapped (--set
feedback_max_share=1), days 21-60 with reactions were 0.832 clear / 0.448 vague on
seed 1 and 0.827 clear on seed 2; 0.5 gave 0.812 / 0.362, 0.8 gave 0.831 (seed 1,
clear). The "gain" compares against each method's own start: paperclub starts
0.07 (seed 1) or 0.02 (seed 2) above the naive pick, so its gain is smaller where
that head start is larger, while its precision with reactions is the higher one
on both seeds.
With --set spend_reacted_runners_up=1 the clear-interest precision with reactions
falls to 0.548 (days 21-60 0.479; measured before the cap).

The papers are ingested once with the real model into a cached database
(--cache, default under the system temp dir); the eval data is never copied
into the repository.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import re
import sqlite3
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from store import (  # noqa: E402
    Interest, PastPost, PickSettings, Searcher, Store, ingest_paths, make_embedder, open_store, pick_for_day,
)
from store import feedback as fb  # noqa: E402
from store.ingest import embed_text  # noqa: E402
from store.feedback import Feedback  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "eval" / "iclr2024.jsonl"
START = date(2024, 1, 8)
VAGUE = "machine learning"
DAY = 86400.0

# label -> (ways a member might describe it, keyword fragments that mark a paper as on-topic)
TOPICS: dict[str, tuple[list[str], list[str]]] = {
    "LLMs": (["prompting and aligning big chatbots", "what large pretrained text generators can do",
              "reasoning and instruction following in GPT-style models"],
             ["large language model", "llm", "instruction tuning", "alignment", "rlhf", "chain-of-thought"]),
    "RL": (["agents that learn from rewards by trial and error", "policy learning for sequential decisions",
            "exploration and value functions for control"],
           ["reinforcement learning", "policy", "reward", "markov decision"]),
    "graphs": (["neural networks on networks of nodes and edges", "message passing over molecules and graphs",
                "learning from relational graph data"],
               ["graph", "gnn", "message passing"]),
    "diffusion models": (["image generators that remove noise step by step", "score-based generative modelling",
                          "denoising generative models for images and audio"],
                         ["diffusion", "score-based", "denoising", "score matching"]),
    "optimization": (["how training converges: SGD, Adam and learning rates", "theory of gradient methods",
                      "faster optimizers for deep networks"],
                     ["optimization", "optimizer", "sgd", "gradient descent", "convergence"]),
    "adversarial": (["inputs crafted to fool neural networks, and defences", "attacks on deep models",
                     "certified defences against perturbations"],
                    ["adversarial", "attack", "jailbreak"]),
    "causality": (["cause and effect from observational data", "causal discovery and inference",
                   "interventions and counterfactuals"],
                  ["causal", "causality", "counterfactual"]),
    "federated learning": (["training across many phones without sharing their data",
                            "decentralised collaborative training", "learning on clients' private devices"],
                           ["federated"]),
    "offline RL": (["learning control policies from logged data only", "batch reinforcement learning",
                    "policies from fixed datasets without interaction"],
                   ["offline reinforcement", "offline rl", "batch rl"]),
    "privacy": (["keeping individuals' training data private", "differential privacy guarantees",
                 "membership inference and data leakage"],
                ["privacy", "differential privacy", "private"]),
    "time series": (["forecasting measurements over time", "models for sequential sensor data",
                     "temporal forecasting and anomaly detection"],
                    ["time series", "forecasting", "temporal"]),
    "interpretability": (["understanding what happens inside a neural network", "explaining model predictions",
                          "mechanistic analysis of learned circuits"],
                         ["interpretab", "explainab", "mechanistic", "attribution", "explanation"]),
    "continual learning": (["learning new tasks without forgetting old ones", "lifelong learning",
                            "avoiding catastrophic forgetting"],
                           ["continual", "lifelong", "catastrophic forgetting", "incremental"]),
    "vision-language models": (["models that connect pictures and text", "image captioning and visual QA",
                                "CLIP-style multimodal models"],
                               ["vision-language", "multimodal", "clip", "visual question"]),
    "out-of-distribution": (["spotting inputs unlike the training data", "robustness to distribution shift",
                             "generalising to new domains"],
                            ["out-of-distribution", "ood", "distribution shift", "domain generalization"]),
    "self-supervised learning": (["learning representations without labels", "contrastive pretraining",
                                  "self-supervised visual features"],
                                 ["self-supervised", "contrastive", "representation learning"]),
    "fairness": (["making model decisions fair across groups", "bias in machine learning systems",
                  "algorithmic fairness"],
                 ["fairness", "fair", "bias"]),
    "pruning": (["making networks smaller and faster", "model compression and sparsity",
                 "pruning and quantising weights"],
                ["pruning", "sparsity", "compression", "quantization", "distillation"]),
}


def norm_title(text: str | None) -> str:
    return re.sub(r"\W+", " ", (text or "").lower()).strip()


def relevant(record: dict, label: str) -> bool:
    """On topic for a member who cares about `label`: the label, or the author keywords."""
    if record.get("label_berenslab") == label:
        return True
    words = " ".join(record.get("keywords") or []).lower()
    return any(k in words for k in TOPICS[label][1])


def build_store(data: Path, cache: Path, model: str) -> Store:
    """The eval papers embedded with the real model, ingested once and reused.

    Only the paper vectors the pick reads are encoded (not search's aspect vectors,
    three more texts per paper): on 2 shared cores that is minutes instead of an hour.
    """
    store = open_store(cache)
    if store.count_papers() == 0:
        t = time.perf_counter()
        result = ingest_paths(store, [data], None, now=time.time())
        embedder = make_embedder(model)
        missing = [pid for pid, _ in store.papers_missing_embeddings(embedder.name)]
        for start in range(0, len(missing), 256):
            rows = list(store.paper_rows(missing[start : start + 256]).values())
            vectors = embedder.encode([embed_text(r) for r in rows])
            store.put_embeddings([{"paper_id": r["id"], "model": embedder.name, "vector": v,
                                   "content_hash": r["content_hash"]} for r, v in zip(rows, vectors)])
        print(f"ingested {data.name}: {result}, {len(missing)} vectors in {time.perf_counter() - t:.0f} s "
              f"-> {cache}", file=sys.stderr)
    return store


def map_records(store: Store, records: list[dict]) -> dict[str, dict]:
    """store paper id -> eval record (by URL, else by title)."""
    by_url = {r.get("url"): r for r in records if r.get("url")}
    by_title = {norm_title(r.get("title")): r for r in records}
    out = {}
    for p in store.iter_papers():
        rec = by_url.get(p.url) or by_title.get(norm_title(p.title)) or by_title.get(norm_title(p.headline))
        if rec is not None:
            out[p.id] = rec
    return out


def make_teams(n: int, rng: np.random.Generator) -> list[list[tuple[str, str, str]]]:
    """Teams of 3 members: (member, topic label, that member's clear one-line interest)."""
    labels = list(TOPICS)
    teams = []
    for t in range(n):
        chosen = rng.choice(labels, size=3, replace=False)
        teams.append([(f"T{t}M{m}", str(label), TOPICS[label][0][int(rng.integers(3))])
                      for m, label in enumerate(chosen)])
    return teams


def reaction(record: dict, label: str) -> str | None:
    """A member's reaction to a paper they see: 🔥 when label and keywords agree, 👍 when one does."""
    on_label = record.get("label_berenslab") == label
    words = " ".join(record.get("keywords") or []).lower()
    on_words = any(k in words for k in TOPICS[label][1])
    return "fire" if on_label and on_words else "+1" if on_label or on_words else None


@dataclass
class Shown:
    paper_id: str
    served: str | None
    exploration: bool = False
    runners_up: tuple[str, ...] = ()


@dataclass
class Run:
    """One picker's days over every team: per-day (team, day, hit, served, exploration) and counts."""

    days: list = field(default_factory=list)
    teams: list = field(default_factory=list)  # per team: (served Counter, relevant Counter, members)
    repeats: int = 0
    after_reaction: int = 0  # posts of a paper someone had already reacted to as a runner-up


class World:
    """The embedded eval papers, their records and the interests' vectors (cached)."""

    def __init__(self, store, embedder, ids, matrix, rec_of, path: Path | None = None):
        self.store, self.embedder, self.ids, self.matrix, self.rec_of = store, embedder, ids, matrix, rec_of
        self.path = path  # the cached database, copied for each run that writes channels into it
        self.row = {pid: i for i, pid in enumerate(ids)}
        self._vec: dict[str, np.ndarray] = {}

    def vector(self, text: str) -> np.ndarray:
        if text not in self._vec:
            self._vec[text] = self.embedder.encode([text])[0]
        return self._vec[text]

    def library(self, into: Path) -> tuple[Store, Searcher]:
        """A private copy of the embedded papers (a run writes its teams' channels into it) and its searcher."""
        src = sqlite3.connect(self.path)
        dst = sqlite3.connect(into)
        src.backup(dst)
        src.close()
        dst.close()
        store = open_store(into)
        return store, Searcher(store, self.embedder)


def naive_pick(world: World, team, interests, history, log, cutoff, rocchio: bool) -> Shown | None:
    """Members in turn, the best unposted paper by cosine to the member's (Rocchio-moved) interest."""
    posted = {p.paper_id for p in history}
    member_index = len(history) % len(team)
    member = team[member_index][0]
    q = np.asarray(interests[member_index].vector, dtype=np.float32)
    if rocchio and log:
        learned = fb.reacted_from_rows(log, cutoff=cutoff)
        likes = [world.matrix[world.row[p]] for p, r in learned.items() if r.by_member.get(member, 0) > 0]
        dislikes = [world.matrix[world.row[p]] for p, r in learned.items() if r.by_member.get(member, 0) < 0]
        if likes:
            q = q + np.mean(likes, axis=0)
        if dislikes:
            q = q - 0.5 * np.mean(dislikes, axis=0)
    scores = world.matrix @ q
    for i in np.argsort(-scores, kind="stable"):
        if world.ids[i] not in posted:
            return Shown(world.ids[i], member)
    return None


def run_team(world: World, team, t: int, texts: list[str], picker: str, use_feedback: bool,
             days: int, settings: PickSettings, run: Run, library: tuple[Store, Searcher] | None = None) -> None:
    """One team's days. paperclub picks through `pick_for_day` on `library`, where the team's
    interests, posts and reactions are written as the bot writes them."""
    channel = f"C{t:03d}"
    interests = [Interest(k + 1, text, member, world.vector(text))
                 for k, ((member, _, _), text) in enumerate(zip(team, texts))]
    label_of = {member: label for member, label, _ in team}
    if picker == "paperclub":
        store, searcher = library
        for it in interests:
            store.add_interest(channel, it.text, it.added_by, model=world.embedder.name, vector=it.vector,
                               now=0.0)
    history: list[PastPost] = []
    log: list[dict] = []
    served, relevant_to = Counter(), Counter()
    for d in range(days):
        day = START + timedelta(days=d)
        cutoff = datetime(day.year, day.month, day.day, tzinfo=timezone.utc).timestamp()
        if picker == "naive":
            shown = naive_pick(world, team, interests, history, log, cutoff, use_feedback)
        else:
            pick = pick_for_day(store, searcher, channel, day, feedback=Feedback() if use_feedback else None,
                                settings=settings)
            shown = pick and Shown(pick.paper_id, pick.choice.member, pick.exploration,
                                   tuple(c.paper_id for c in pick.runners_up))
            if pick is not None:
                store.claim_post(channel, day.isoformat(), claimer="bench", paper_id=pick.paper_id,
                                 pick=pick.to_dict(), now=cutoff)
        if shown is None:
            break
        history.append(PastPost(day, shown.paper_id, shown.served, shown.exploration, shown.runners_up))
        run.after_reaction += any(r["paper_id"] == shown.paper_id for r in log)  # liked as a runner-up
        rec = world.rec_of.get(shown.paper_id, {})
        hits = {m for m, label in label_of.items() if relevant(rec, label)}
        hit = bool(hits) if shown.exploration else shown.served in hits
        run.days.append((t, d, hit, shown.served, shown.exploration))
        if not shown.exploration:
            served[shown.served] += 1
            relevant_to[shown.served] += hit
        at = cutoff + 9 * 3600
        for n, pid in enumerate((shown.paper_id, *shown.runners_up)):
            rec = world.rec_of.get(pid, {})
            for member, label in label_of.items():
                emoji = reaction(rec, label)
                if emoji is None and n == 0 and member == shown.served:
                    emoji = "-1"  # the served member finds their post off-topic
                if emoji:
                    row = {"id": len(log), "channel": channel, "message_ts": pid, "paper_id": pid,
                           "user": member, "emoji": emoji, "base": emoji, "action": "added",
                           "event_ts": at + 600 * (len(log) + 1) % 36000}
                    log.append(row)
                    if picker == "paperclub":
                        store.add_reaction({**{k: v for k, v in row.items() if k != "id"},
                                            "event_id": f"{channel}-{row['id']}", "event_time": None,
                                            "recorded_at": row["event_ts"]})
    posted = [p.paper_id for p in history]
    run.repeats += len(posted) - len(set(posted))
    run.teams.append((served, relevant_to, list(label_of)))


def figures(run: Run, days: int) -> dict:
    hits = [h for _, _, h, _, _ in run.days]
    late = [h for _, d, h, _, _ in run.days if d >= 20]
    explore = [h for _, _, h, _, e in run.days if e]
    turns, rel_min, rel_max = [], [], []
    for served, relevant_to, members in run.teams:
        counts = [served[m] for m in members]
        turns.append(min(counts) / max(1, max(counts)))
        rel = [relevant_to[m] for m in members]
        rel_min.append(min(rel))
        rel_max.append(max(rel))
    return {"precision": float(np.mean(hits)), "precision_21_60": float(np.mean(late)) if late else 0.0,
            "turns_min_max_mean": float(np.mean(turns)), "turns_min_max_worst": float(np.min(turns)),
            "relevant_per_member_min": float(np.mean(rel_min)), "relevant_per_member_max": float(np.mean(rel_max)),
            "repeats": run.repeats, "posted_after_reaction": run.after_reaction, "exploration_days": len(explore),
            "exploration_hit_rate": float(np.mean(explore)) if explore else None, "days": len(hits)}


def load_world(data: Path, model: str, cache: Path | None = None) -> World:
    """The eval papers embedded once (cached under the temp dir), their vectors and records."""
    digest = hashlib.sha1(f"{data.resolve()}|{data.stat().st_size}|{model}".encode()).hexdigest()[:10]
    cache = cache or Path(tempfile.gettempdir()) / "paperclub-bench" / f"picks-{digest}.db"
    records = [json.loads(line) for line in data.open() if line.strip()]
    store = build_store(data, cache, model)
    embedder = make_embedder(model)
    ids, matrix = store.load_vectors(embedder.name)
    return World(store, embedder, ids, matrix, map_records(store, records), cache)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--teams", type=int, default=30)
    ap.add_argument("--days", type=int, default=60)
    ap.add_argument("--model", default="all-MiniLM-L6-v2")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cache", type=Path, default=None, help="cached database of the embedded papers")
    ap.add_argument("--modes", default="clear,vague", help="clear, vague or both")
    ap.add_argument("--pickers", default="naive,rocchio,off,on",
                    help="which to run: naive, rocchio, off (paperclub without reactions), on (with)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON too")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="override a PickSettings field, e.g. --set mmr_lambda=0.85 (repeatable)")
    args = ap.parse_args()

    world = load_world(args.data, args.model, args.cache)
    ids, rec_of = world.ids, world.rec_of
    overrides = {}
    for item in args.set:
        name, _, value = item.partition("=")
        kind = type(getattr(PickSettings(), name))
        overrides[name] = (value.lower() in ("1", "true", "yes")) if kind is bool else kind(value)
    settings = PickSettings(**overrides)
    teams = make_teams(args.teams, np.random.default_rng(args.seed))
    print(f"{len(ids)} papers with vectors, {len(rec_of)} matched to eval records; {args.teams} teams "
          f"of 3 x {args.days} days; settings {overrides or 'default'}", file=sys.stderr)
    pickers = [(name, picker, on) for key, (name, picker, on) in {
        "naive": ("naive (greedy)", "naive", False), "rocchio": ("naive + Rocchio", "naive", True),
        "off": ("paperclub, no reactions", "paperclub", False),
        "on": ("paperclub, reactions", "paperclub", True)}.items() if key in args.pickers.split(",")]
    out: dict = {}
    started = time.perf_counter()
    scratch = tempfile.TemporaryDirectory(prefix="paperclub-picks-")
    for mode in args.modes.split(","):
        for name, picker, use_feedback in pickers:
            run = Run()
            library = world.library(Path(scratch.name) / f"{mode}-{len(out)}.db") if picker == "paperclub" else None
            for t, team in enumerate(teams):
                texts = [text if mode == "clear" else VAGUE for _, _, text in team]
                run_team(world, team, t, texts, picker, use_feedback, args.days, settings, run, library)
            if library is not None:
                library[0].close()
            out[(mode, name)] = figures(run, args.days)
    scratch.cleanup()
    elapsed = time.perf_counter() - started

    print(f"paper of the day, {args.teams} teams of 3 x {args.days} days over {len(ids)} papers "
          f"({args.data.name})")
    print(f"{'':<34}{'precision':>10}{'d21-60':>8}{'turns':>12}{'relevant/member':>17}"
          f"{'repeats':>9}{'explore hit':>13}")
    for mode in args.modes.split(","):
        print(f"{mode} interests" + (f' ("{VAGUE}" for everyone)' if mode == "vague" else ""))
        for name, _, _ in pickers:
            f = out[(mode, name)]
            ex = (f"{f['exploration_hit_rate']:.2f} ({f['exploration_days']})"
                  if f["exploration_hit_rate"] is not None else "-")
            print(f"  {name:<32}{f['precision']:>10.3f}{f['precision_21_60']:>8.3f}"
                  f"{f['turns_min_max_mean']:>7.2f}/{f['turns_min_max_worst']:.2f}"
                  f"{f['relevant_per_member_min']:>9.1f}/{f['relevant_per_member_max']:<7.1f}"
                  f"{f['repeats']:>9}{ex:>13}")
        gains = [(label, out[(mode, on)]["precision_21_60"] - out[(mode, off)]["precision_21_60"])
                 for label, off, on in (("paperclub", "paperclub, no reactions", "paperclub, reactions"),
                                        ("Rocchio", "naive (greedy)", "naive + Rocchio"))
                 if (mode, on) in out and (mode, off) in out]
        if gains:
            print("  feedback gain, days 21-60: " + ", ".join(f"{label} {g:+.3f}" for label, g in gains))
    print("posts of a paper reacted to earlier as a runner-up: " + ", ".join(
        f"{m} {n} {out[(m, n)]['posted_after_reaction']}" for m, n in out if out[(m, n)]["posted_after_reaction"]))
    print("turns: each member's share of served days, min/max per team (mean / worst team); "
          "relevant/member: relevant picks per member, min/max per team (mean over teams)")
    print(f"{elapsed:.0f} s")
    if args.json:
        print(json.dumps({f"{m}/{n}": f for (m, n), f in out.items()}, indent=2))


if __name__ == "__main__":
    main()
