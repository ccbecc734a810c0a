"""The pick's stated relevance alone, part by part, on both datasets: precision of each interest's top papers.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/pick_relevance.py [--data ...] [--k 20] [--set NAME=VALUE]

bench/picks.py measures the pick over days, with turns, novelty and reactions, where a 30-team
cell moves about ±0.02 from noise. This measures only what a member's words rank, before any of
that: for each of bench/picks.py's 54 clear interest texts (18 topics, 3 ways to say each), the
share of its k best papers that are relevant to the topic (bench/picks.py's rule: the label, or
the author keywords), with relevance built up one part at a time, the naive pick's cosine first:
- cosine: the naive pick's ranking;
- + BM25: `lexical_weight` x the interest's BM25 scaled to its best paper (no expansion);
- expansion: the interest plus the mean of its `prf_docs` best papers (no BM25);
- expansion + BM25: both (`interest_scores`);
- + BM25 words: BM25 also searches the `lexical_expansion` words the interest's `prf_docs` nearest
  papers share (`expansion_words`), as the pick's does;
- as shipped: + `typical_weight` x `typicality` (`turn_relevance`, what a member's turn ranks by).
And for the vague interest ("machine learning"), the share of its k best papers relevant to a
member of a topic drawn at random (the mean over topics), beside a random paper's.

The last column, "labels' ceiling", is what no member's words or reactions could be expected to
beat on these vectors: the k best papers of the library by the baseline's linear SVM (arxiv-sanity's
form, class-balanced, C = 1) trained on every label, cross-fitted (each paper scored by a classifier
trained on the four fifths of the library it is not in; `picks.ceiling`). A member who has reacted a
dozen times knows far less than that; a learned taste's end over days sits below it.
Seconds a dataset once bench/picks.py has cached its vectors under the temp dir (minutes to embed
them the first time).
"""
from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

import numpy as np

from picks import DATASETS, TOPICS, VAGUE, ceiling, load_world, setting_overrides
from store import PickSettings
from store.pick import Interest, interest_scores, lexical_for, turn_relevance

PARTS = ("cosine", "+ BM25", "expansion", "expansion + BM25", "+ BM25 words", "as shipped")
CEILING = "labels' ceiling"


def rankings(world, searcher, text: str, settings: PickSettings) -> dict[str, np.ndarray]:
    """Each part's relevance of every paper to `text`."""
    it = Interest(0, text, "U", world.vector(text))
    words = lexical_for(searcher, [it], settings.lexical_candidates)
    expanded = lexical_for(searcher, [it], settings.lexical_candidates, expand_from=settings.prf_docs,
                           expand_words=settings.lexical_expansion)
    variants = {"cosine": (dict(lexical_weight=0, prf_docs=0), words), "+ BM25": (dict(prf_docs=0), words),
                "expansion": (dict(lexical_weight=0), words), "expansion + BM25": ({}, words),
                "+ BM25 words": ({}, expanded)}
    out = {}
    for name, (change, lex) in variants.items():
        s = dataclasses.replace(settings, **change)
        out[name] = interest_scores(world.matrix, world.ids, [it], lex, s)[0]
    # + typicality: what a member's turn ranks by (`World.stated`), from the hybrid just made
    out["as shipped"] = turn_relevance(out["+ BM25 words"], world.typical(settings), settings)
    return {name: (h if h.ndim == 1 else h[:, 0]) for name, h in out.items()}


def run(data, args, settings: PickSettings) -> None:
    started = time.perf_counter()
    world = load_world(data, args.model)
    searcher = world.searcher
    on = {label: world.on_topic(label) for label in TOPICS}
    per: dict[str, dict[str, list[float]]] = {label: {p: [] for p in PARTS} for label in TOPICS}
    for label, (texts, _) in TOPICS.items():
        for text in texts:
            for name, score in rankings(world, searcher, text, settings).items():
                per[label][name].append(float(on[label][np.argsort(-score, kind="stable")[:args.k]].mean()))
    top = {label: ceiling(world.matrix, on[label], args.k) for label in TOPICS}
    print(f"\n{data.name}: {len(world.ids)} papers; precision of each clear interest's {args.k} best papers "
          f"(mean of its 3 texts)")
    print(f"  {'topic':<26}" + "".join(f"{p:>18}" for p in (*PARTS, CEILING)))
    for label in TOPICS:
        print(f"  {label:<26}" + "".join(f"{np.mean(per[label][p]):>18.3f}" for p in PARTS) + f"{top[label]:>18.3f}")
    every = {p: [x for label in TOPICS for x in per[label][p]] for p in PARTS}
    print(f"  {'all 54 texts':<26}" + "".join(f"{np.mean(every[p]):>18.3f}" for p in PARTS)
          + f"{np.mean(list(top.values())):>18.3f}")
    base = np.array(every["cosine"])
    print(f"  {'against cosine, ± paired':<26}" + "".join(
        f"{np.mean(np.array(every[p]) - base):>+11.3f} ±{np.std(np.array(every[p]) - base, ddof=1) / np.sqrt(len(base)):.3f}"
        for p in PARTS))
    vague = rankings(world, searcher, VAGUE, settings)
    chance = np.mean([on[label].mean() for label in TOPICS])
    print(f"  vague (\"{VAGUE}\"), a member of a random topic: random paper {chance:.3f}; "
          + ", ".join(f"{p} {np.mean([on[label][np.argsort(-vague[p], kind='stable')[:args.k]].mean() for label in TOPICS]):.3f}"
                      for p in PARTS))
    print(f"  {time.perf_counter() - started:.0f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, action="append", default=None,
                    help="eval JSONL (repeatable; default: iclr2024 and neurips2023)")
    ap.add_argument("--k", type=int, default=20, help="papers per interest that count (default 20)")
    ap.add_argument("--model", default="all-MiniLM-L6-v2")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="override a PickSettings field, e.g. --set typical_weight=0 (repeatable)")
    args = ap.parse_args()
    overrides = setting_overrides(args.set)
    print(f"the pick's stated relevance, part by part; settings {overrides or 'default'}")
    for data in args.data or DATASETS:
        run(data, args, PickSettings(**overrides))


if __name__ == "__main__":
    main()
