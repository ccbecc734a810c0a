"""Fit the TL;DR sentence scorer on SciTLDR and write store/data/summary_weights.json.

    python bench/fit_summary.py --data /work/shared/eval/scitldr/train.jsonl \
        --out store/data/summary_weights.json

Data: SciTLDR (allenai/scitldr, Apache-2.0), Cachola, Lo, Cohan and Weld,
"TLDR: Extreme Summarization of Scientific Documents", Findings of EMNLP 2020.
Each abstract comes as a list of sentences with the authors' TLDR.

The model is a conditional logit over the sentences of one abstract: score =
w . features(sentence), probability = softmax over the abstract's sentences.
The training target is soft: each sentence is weighted by how well its
*compressed* form (what summarize_paper would show) matches the gold TLDR in
ROUGE, so the scorer learns what survives compression. Hyperparameters are
chosen on a held-out fifth of the training file; the dev split stays for
bench/summary_quality.py.
"""
from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from summary_quality import rouge_multi  # noqa: E402  (bench/ is on sys.path when run as a script)

from store.summary import (  # noqa: E402
    Weights, _opener, _terms, compress, feature_names, pick_sentence, sentence_features)

ATTRIBUTION = ("Fitted on SciTLDR (allenai/scitldr, Apache-2.0): Cachola, Lo, Cohan and Weld, "
               "'TLDR: Extreme Summarization of Scientific Documents', Findings of EMNLP 2020.")


def load(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def fit_idf(records: list[dict], min_df: int = 3) -> dict:
    """Inverse document frequency over abstracts, for words in at least `min_df` of them."""
    df = Counter()
    for rec in records:
        df.update(set(_terms(" ".join(rec["source"]))))
    n = len(records)
    return {t: math.log((n + 1) / (c + 1)) + 1.0 for t, c in df.items() if c >= min_df}


def fit_openers(records: list[dict], min_count: int = 15, top: int = 40) -> list[str]:
    """The commonest first words and first word pairs of sentences."""
    ones, twos = Counter(), Counter()
    for rec in records:
        for s in rec["source"]:
            one, two = _opener(s)
            ones[one] += 1
            twos[two] += 1
    keep = [o for o, c in ones.most_common(top) if c >= min_count and o]
    keep += [o for o, c in twos.most_common(top) if c >= min_count and " " in o]
    return sorted(set(keep))


def fit_verbs(records: list[dict], min_count: int = 2) -> list[str]:
    """Words that follow "we" more often than "the"/"a": verbs, so theme names can skip them."""
    we, det = Counter(), Counter()
    for rec in records:
        text = " ".join(rec["source"])
        we.update({m.group(1) for m in re.finditer(r"\b[Ww]e (?:[a-z]+ly )?([a-z]+)\b", text)})
        det.update({m.group(1) for m in re.finditer(r"\b(?:[Tt]he|[Aa]n?|[Oo]ur|[Tt]his|[Ee]ach) ([a-z]+)\b", text)})
    return sorted(w for w, c in we.items() if c >= min_count and det[w] < c and not w.endswith("ly")
                  and w not in {"a", "the", "our", "this", "also", "then", "thus", "here", "still", "further",
                                "therefore", "instead"})


def prepare(records: list[dict], idf: dict, openers: list[str], seed: int = 0):
    """Features, ROUGE of every compressed sentence, and the compressed sentences, per abstract."""
    rng = np.random.default_rng(seed)
    out = []
    for rec in records:
        sents = [s.strip() for s in rec["source"] if s.strip()]
        if not sents:
            continue
        comp = [compress(s) for s in sents]
        # half the abstracts without their title: papers in the store often have none
        title = rec.get("title") if rng.random() < 0.5 else None
        x = sentence_features(sents, title, idf, openers, comp)
        r = np.array([rouge_multi(c, rec["target"]) for c, _ in comp])
        out.append((x, r, comp))
    return out


def fit(groups, mean, std, *, tau: float, l2: float, steps: int = 1500, lr: float = 0.05) -> np.ndarray:
    """Softmax over each abstract's sentences, cross-entropy to soft ROUGE targets, L2; full-batch Adam."""
    xs = [(x - mean) / std for x, _, _ in groups]
    targets = []
    for _, r, _ in groups:
        z = r.mean(axis=1) / tau
        t = np.exp(z - z.max())
        targets.append(t / t.sum())
    x_all = np.vstack(xs)
    t_all = np.concatenate(targets)
    bounds = np.cumsum([0] + [len(x) for x in xs])
    seg = np.repeat(np.arange(len(xs)), np.diff(bounds))
    w = np.zeros(x_all.shape[1])
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    for step in range(1, steps + 1):
        s = x_all @ w
        smax = np.maximum.reduceat(s, bounds[:-1])
        e = np.exp(s - smax[seg])
        p = e / np.add.reduceat(e, bounds[:-1])[seg]
        grad = x_all.T @ (p - t_all) / len(xs) + l2 * w
        m = 0.9 * m + 0.1 * grad
        v = 0.999 * v + 0.001 * grad * grad
        w -= lr * (m / (1 - 0.9 ** step)) / (np.sqrt(v / (1 - 0.999 ** step)) + 1e-8)
    return w


def evaluate(groups, weights: Weights) -> tuple[float, float, float]:
    """Mean ROUGE-1/2/L of the sentence the scorer would pick."""
    picked = []
    for x, r, comp in groups:
        scores = ((x - weights.mean) / weights.std) @ weights.w
        picked.append(r[pick_sentence(scores, comp)])
    return tuple(float(np.mean([p[k] for p in picked])) for k in range(3))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, help="SciTLDR train.jsonl")
    ap.add_argument("--out", required=True, help="where to write the weights JSON")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    records = load(args.data)
    idf = fit_idf(records)
    openers = fit_openers(records)
    groups = prepare(records, idf, openers, args.seed)
    x_all = np.vstack([x for x, _, _ in groups])
    mean, std = x_all.mean(axis=0), x_all.std(axis=0)
    std[std == 0] = 1.0

    order = np.random.default_rng(args.seed).permutation(len(groups))
    cut = len(groups) * 4 // 5
    train, held = [groups[i] for i in order[:cut]], [groups[i] for i in order[cut:]]
    lead = [r[0] for _, r, _ in held]
    print(f"{len(groups)} abstracts, {x_all.shape[0]} sentences, {x_all.shape[1]} features")
    print("held-out fifth, Lead-1 (compressed) R1/R2/RL: "
          + " ".join(f"{100 * statistics.fmean(v[k] for v in lead):.1f}" for k in range(3)))
    best = None
    for tau in (0.02, 0.05, 0.1):
        for l2 in (1e-3, 1e-2, 3e-2):
            w = fit(train, mean, std, tau=tau, l2=l2)
            score = evaluate(held, Weights(w, mean, std, openers, idf))
            print(f"  tau={tau:<5} l2={l2:<6} R1/R2/RL {' '.join(f'{100 * s:.1f}' for s in score)}")
            if best is None or score[0] > best[0][0]:
                best = (score, tau, l2)
    (score, tau, l2) = best
    w = fit(groups, mean, std, tau=tau, l2=l2)
    meta = {"attribution": ATTRIBUTION, "verbs": fit_verbs(records), "data": Path(args.data).name, "n_abstracts": len(groups),
            "model": "conditional logit over sentences, soft ROUGE targets",
            "tau": tau, "l2": l2, "heldout_rouge": [round(100 * s, 2) for s in score],
            "refit": "python bench/fit_summary.py --data train.jsonl --out store/data/summary_weights.json"}
    data = Weights(w, mean, std, openers, idf, meta).to_json()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(data, separators=(",", ":")) + "\n", encoding="utf-8")
    top = sorted(zip(feature_names(openers), w), key=lambda p: -abs(p[1]))[:15]
    print(f"chose tau={tau} l2={l2}; wrote {args.out}")
    print("largest weights: " + ", ".join(f"{n} {v:+.2f}" for n, v in top))


if __name__ == "__main__":
    main()
