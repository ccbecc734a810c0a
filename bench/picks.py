"""Paper of the day, simulated: precision, fairness, repeats and exploration over 60 days.

    .venv/bin/python bench/picks.py --data ../shared/eval/iclr2024.jsonl [--teams 24] [--days 60]

Each simulated team has 3-5 members; each member cares about one topic class
of the data (`label_berenslab`) and describes it in their own words (no label
names), and one member per team is prolific (three phrasings of their topic).
Every day runs the real `store.pick.pick_daily` with the team's history.

A pick is relevant to a member when its label is the member's topic or its
author keywords name it (38% of the papers are "unlabeled", so keywords
matter). Reported:
- precision: days whose paper is relevant to at least one member (exploration
  days counted apart: they are meant to be outside the interests);
- fairness: each member's share of the non-exploration days that were picked
  for them (the pick's own attribution) and that were relevant to them;
  min/max per team, averaged over teams, plus the worst team;
- repeats (must be 0) and exploration days;
- baselines: a random paper, and a greedy pick (best max-similarity over all
  interests, no rotation, no MMR) to show what rotation buys.

The papers are ingested once with the real model into a cached database
(--cache, default under the system temp dir); the eval data is never copied
into the repository.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import tempfile
import time
from collections import Counter
from datetime import date, timedelta
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from store import (  # noqa: E402
    Interest, PastPost, PickSettings, Store, ingest_paths, make_embedder, open_store, pick_daily,
)

DEFAULT_DATA = ROOT.parent / "shared" / "eval" / "iclr2024.jsonl"
START = date(2024, 1, 8)

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
    """The eval papers embedded with the real model, ingested once and reused."""
    store = open_store(cache)
    if store.count_papers() == 0:
        t = time.perf_counter()
        embedder = make_embedder(model)
        result = ingest_paths(store, [data], embedder, now=time.time())
        print(f"ingested {data.name}: {result} in {time.perf_counter() - t:.0f} s -> {cache}", file=sys.stderr)
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


def make_teams(n: int, rng: np.random.Generator) -> list[list[tuple[str, str, list[str]]]]:
    """Teams of 3-5 members: (member, label, interest texts); the first member is prolific."""
    labels = list(TOPICS)
    teams = []
    for t in range(n):
        size = int(rng.integers(3, 6))
        chosen = rng.choice(labels, size=size, replace=False)
        members = []
        for m, label in enumerate(chosen):
            phrasings = TOPICS[label][0]
            texts = list(phrasings) if m == 0 else [phrasings[int(rng.integers(len(phrasings)))]]
            members.append((f"T{t}M{m}", str(label), texts))
        teams.append(members)
    return teams


def greedy_day(ids, matrix, imat, shown: set[str]) -> str | None:
    """Baseline: the unshown paper with the best max-similarity to any interest."""
    scores = (matrix @ imat.T).max(axis=1)
    for i in np.argsort(-scores):
        if ids[i] not in shown:
            return ids[i]
    return None


def load_world(data: Path, model: str, cache: Path | None = None):
    """The eval papers embedded once (cached under the temp dir), their vectors and records."""
    digest = hashlib.sha1(f"{data.resolve()}|{data.stat().st_size}|{model}".encode()).hexdigest()[:10]
    cache = cache or Path(tempfile.gettempdir()) / "paperclub-bench" / f"picks-{digest}.db"
    records = [json.loads(line) for line in data.open() if line.strip()]
    store = build_store(data, cache, model)
    embedder = make_embedder(model)
    ids, matrix = store.load_vectors(embedder.name)
    return store, embedder, ids, matrix, map_records(store, records)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--teams", type=int, default=24)
    ap.add_argument("--days", type=int, default=60)
    ap.add_argument("--model", default="all-MiniLM-L6-v2")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cache", type=Path, default=None, help="cached database of the embedded papers")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON too")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="override a PickSettings field, e.g. --set mmr_lambda=0.85 (repeatable)")
    args = ap.parse_args()

    store, embedder, ids, matrix, rec_of = load_world(args.data, args.model, args.cache)
    signals = store.paper_signals()
    print(f"{len(ids)} papers with vectors, {len(rec_of)} matched to eval records; "
          f"{args.teams} teams x {args.days} days", file=sys.stderr)

    rng = np.random.default_rng(args.seed)
    teams = make_teams(args.teams, rng)
    texts = sorted({t for team in teams for _, _, ts in team for t in ts})
    vec = dict(zip(texts, embedder.encode(texts)))
    overrides = {}
    for item in args.set:
        name, _, value = item.partition("=")
        overrides[name] = type(getattr(PickSettings(), name))(value)
    settings = PickSettings(**overrides)
    if overrides:
        print(f"settings: {overrides}", file=sys.stderr)

    totals = Counter()
    redundancy: list[float] = []
    row = {pid: i for i, pid in enumerate(ids)}
    topic_days, topic_hits = Counter(), Counter()
    fair_rows = []
    started = time.perf_counter()
    for t, team in enumerate(teams):
        channel = f"C{t:03d}"
        interests = [Interest(k + 1, text, member, vec[text])
                     for k, (member, label, ts) in enumerate(team) for text in ts]
        label_of = {member: label for member, label, _ in team}
        history: list[PastPost] = []
        picked_for = Counter()
        relevant_to = Counter()
        seen: list[str] = []
        for d in range(args.days):
            day = START + timedelta(days=d)
            pick = pick_daily(channel, day, ids, matrix, interests, history, signals=signals, settings=settings)
            if pick is None:
                totals["ran_out"] += 1
                break
            seen.append(pick.paper_id)
            recent = [row[p.paper_id] for p in history[-7:]]
            if recent:
                # how close today's paper is to the closest of the last week's: topic pile-up
                redundancy.append(float((matrix[recent] @ matrix[row[pick.paper_id]]).max()))
            seen.extend(c.paper_id for c in pick.runners_up)
            history.append(PastPost(day, pick.paper_id, pick.choice.member, pick.exploration,
                                    tuple(c.paper_id for c in pick.runners_up)))
            rec = rec_of.get(pick.paper_id, {})
            hits = [m for m, label in label_of.items() if relevant(rec, label)]
            if pick.exploration:
                totals["explore_days"] += 1
                totals["explore_hit"] += bool(hits)
                continue
            totals["days"] += 1
            totals["hit"] += bool(hits)
            totals["hit_attributed"] += pick.choice.member in hits
            if pick.choice.member in label_of:
                topic_days[label_of[pick.choice.member]] += 1
                topic_hits[label_of[pick.choice.member]] += pick.choice.member in hits
            picked_for[pick.choice.member] += 1
            for m in hits:
                relevant_to[m] += 1
        totals["repeats"] += len(seen) - len(set(seen))
        totals["pick_repeats"] += len([p.paper_id for p in history]) - len({p.paper_id for p in history})
        n = sum(picked_for.values()) or 1
        shares = [picked_for[m] / n for m in label_of]
        rel_shares = [relevant_to[m] / n for m in label_of]
        fair_row = (min(shares), max(shares), min(rel_shares), max(rel_shares))

        # greedy baseline on the same team
        imat = np.stack([i.vector for i in interests])
        shown: set[str] = set()
        g_counts, g_days = Counter(), 0
        for d in range(args.days):
            pid = greedy_day(ids, matrix, imat, shown)
            if pid is None:
                break
            shown.add(pid)
            hits = [m for m, label in label_of.items() if relevant(rec_of.get(pid, {}), label)]
            g_days += 1
            totals["g_hit"] += bool(hits)
            for m in hits:
                g_counts[m] += 1
        totals["g_days"] += g_days
        g_shares = [g_counts[m] / max(1, g_days) for m in label_of]
        fair_rows.append(fair_row + (min(g_shares), max(g_shares)))
    elapsed = time.perf_counter() - started

    # random baseline: chance that a random paper is relevant to >= 1 member, averaged over teams
    rand = np.mean([np.mean([any(relevant(r, label) for _, label, _ in team) for r in rec_of.values()])
                    for team in teams])
    fr = np.array(fair_rows)
    days, edays = totals["days"], totals["explore_days"]
    figures = {
        "teams": args.teams, "days_per_team": args.days, "papers": len(ids),
        "precision": totals["hit"] / max(1, days),
        "precision_attributed_member": totals["hit_attributed"] / max(1, days),
        "precision_random": float(rand),
        "precision_greedy": totals["g_hit"] / max(1, totals["g_days"]),
        "share_picked_min_mean": float(fr[:, 0].mean()), "share_picked_max_mean": float(fr[:, 1].mean()),
        "share_picked_min_worst": float(fr[:, 0].min()), "share_picked_max_worst": float(fr[:, 1].max()),
        "share_relevant_min_mean": float(fr[:, 2].mean()), "share_relevant_max_mean": float(fr[:, 3].mean()),
        "greedy_share_relevant_min_mean": float(fr[:, 4].mean()),
        "greedy_share_relevant_max_mean": float(fr[:, 5].mean()),
        "repeats": totals["repeats"], "pick_repeats": totals["pick_repeats"],
        "exploration_days": edays, "exploration_share": edays / max(1, edays + days),
        "exploration_relevant": totals["explore_hit"] / max(1, edays),
        "ran_out": totals["ran_out"], "redundancy_vs_last_week": float(np.mean(redundancy)), "seconds_per_pick": elapsed / max(1, days + edays),
    }
    f = figures
    print(f"paper of the day, {f['teams']} teams x {f['days_per_team']} days over {f['papers']} papers")
    print(f"  precision (relevant to >= 1 member): {f['precision']:.1%}   "
          f"(to the member it was picked for: {f['precision_attributed_member']:.1%})")
    print(f"    baselines: random paper {f['precision_random']:.1%}, greedy max-similarity {f['precision_greedy']:.1%}")
    print(f"  fairness, share of days picked for each member (min / max, equal share = 1/size):")
    print(f"    mean over teams {f['share_picked_min_mean']:.2f} / {f['share_picked_max_mean']:.2f}; "
          f"worst team {f['share_picked_min_worst']:.2f} / {f['share_picked_max_worst']:.2f}")
    print(f"    share of days relevant to each member: {f['share_relevant_min_mean']:.2f} / "
          f"{f['share_relevant_max_mean']:.2f} (greedy: {f['greedy_share_relevant_min_mean']:.2f} / "
          f"{f['greedy_share_relevant_max_mean']:.2f})")
    print(f"  repeats: {f['repeats']} (paper of the day: {f['pick_repeats']}); similarity to the closest "
          f"of the last 7 days' papers: {f['redundancy_vs_last_week']:.3f} (lower = more varied)")
    print(f"  exploration days: {f['exploration_days']} ({f['exploration_share']:.1%}; "
          f"{f['exploration_relevant']:.0%} of them still relevant to someone)")
    print(f"  {f['seconds_per_pick'] * 1000:.0f} ms per pick; ran out of papers: {f['ran_out']}")
    worst = sorted(topic_days, key=lambda t: topic_hits[t] / topic_days[t])[:5]
    print("  hardest topics (days relevant to the member they were picked for): " + ", ".join(
        f"{t} {topic_hits[t] / topic_days[t]:.0%}" for t in worst))
    if args.json:
        print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
