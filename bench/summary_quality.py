"""Score TL;DRs against human TLDRs the way the SciTLDR paper does.

    python bench/summary_quality.py --data /work/shared/eval/scitldr/dev.jsonl

ROUGE-1/2/L F, each prediction against every gold TLDR, keeping the gold with
the best ROUGE-1, averaged over papers (SciTLDR, Cachola et al., EMNLP Findings
2020). The data is allenai/scitldr (Apache-2.0).

ROUGE is implemented here rather than imported, so the bench runs from a clean
clone with no extra dependency: it reproduces the `rouge-score` package with
`use_stemmer=True` (same tokenizer, NLTK's Porter stemmer in its default
NLTK_EXTENSIONS mode, same F-measure); `--check-rouge-score` compares the two
when that package happens to be installed.
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from collections import Counter
from functools import lru_cache
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# ---------------------------------------------------------------- Porter stemmer
# A port of nltk.stem.porter.PorterStemmer (mode NLTK_EXTENSIONS), which is
# what rouge-score uses; step by step so the two agree token for token.
_VOWELS = frozenset("aeiou")
_IRREGULAR = {"skies": "sky", "sky": "sky", "dying": "die", "lying": "lie", "tying": "tie",
              "news": "news", "innings": "inning", "inning": "inning", "outings": "outing",
              "outing": "outing", "cannings": "canning", "canning": "canning", "howe": "howe",
              "proceed": "proceed", "exceed": "exceed", "succeed": "succeed"}


def _is_cons(w: str, i: int) -> bool:
    if w[i] in _VOWELS:
        return False
    if w[i] == "y":
        negate = False
        while i > 0 and w[i] == "y":
            negate = not negate
            i -= 1
        return (w[i] not in _VOWELS) != negate
    return True


def _flags(w: str) -> list[bool]:
    flags: list[bool] = []
    for i, ch in enumerate(w):
        if ch in _VOWELS:
            flags.append(False)
        elif ch == "y":
            flags.append(True if i == 0 else not flags[i - 1])
        else:
            flags.append(True)
    return flags


def _m(stem: str) -> int:
    return "".join("c" if c else "v" for c in _flags(stem)).count("vc")


def _has_vowel(stem: str) -> bool:
    return not all(_flags(stem))


def _ends_dd(w: str) -> bool:
    return len(w) >= 2 and w[-1] == w[-2] and _is_cons(w, len(w) - 1)


def _ends_cvc(w: str) -> bool:
    n = len(w)
    return (n >= 3 and _is_cons(w, n - 3) and not _is_cons(w, n - 2) and _is_cons(w, n - 1)
            and w[-1] not in "wxy") or (n == 2 and not _is_cons(w, 0) and _is_cons(w, 1))


def _rules(w: str, rules) -> str:
    """Apply the first rule whose suffix matches (and only that one)."""
    for suffix, repl, cond in rules:
        if suffix == "*d" and _ends_dd(w):
            return w[:-2] + repl if cond is None or cond(w[:-2]) else w
        if w.endswith(suffix):
            stem = w[: len(w) - len(suffix)]
            return stem + repl if cond is None or cond(stem) else w
    return w


def _pos(stem: str) -> bool:
    return _m(stem) > 0


def _gt1(stem: str) -> bool:
    return _m(stem) > 1


def _step1a(w):
    if w.endswith("ies") and len(w) == 4:
        return w[:-3] + "ie"
    return _rules(w, [("sses", "ss", None), ("ies", "i", None), ("ss", "ss", None), ("s", "", None)])


def _step1b(w):
    if w.endswith("ied"):
        return w[:-3] + ("ie" if len(w) == 4 else "i")
    if w.endswith("eed"):
        return w[:-3] + "ee" if _m(w[:-3]) > 0 else w
    for suffix in ("ed", "ing"):
        if w.endswith(suffix) and _has_vowel(w[: -len(suffix)]):
            s = w[: -len(suffix)]
            return _rules(s, [("at", "ate", None), ("bl", "ble", None), ("iz", "ize", None),
                              ("*d", s[-1], lambda _: s[-1] not in "lsz"),  # noqa: B023 (called at once)
                              ("", "e", lambda st: _m(st) == 1 and _ends_cvc(st))])
    return w


def _step1c(w):
    return _rules(w, [("y", "i", lambda st: len(st) > 1 and _is_cons(st, len(st) - 1))])


_STEP2 = [("ational", "ate"), ("tional", "tion"), ("enci", "ence"), ("anci", "ance"), ("izer", "ize"),
          ("bli", "ble"), ("alli", "al"), ("entli", "ent"), ("eli", "e"), ("ousli", "ous"),
          ("ization", "ize"), ("ation", "ate"), ("ator", "ate"), ("alism", "al"), ("iveness", "ive"),
          ("fulness", "ful"), ("ousness", "ous"), ("aliti", "al"), ("iviti", "ive"), ("biliti", "ble"),
          ("fulli", "ful")]


def _step2(w):
    if w.endswith("alli") and _pos(w[:-4]):
        return _step2(w[:-4] + "al")
    rules = [(s, r, _pos) for s, r in _STEP2] + [("logi", "log", lambda _: _pos(w[:-3]))]
    return _rules(w, rules)


def _step3(w):
    return _rules(w, [(s, r, _pos) for s, r in [("icate", "ic"), ("ative", ""), ("alize", "al"),
                                                 ("iciti", "ic"), ("ical", "ic"), ("ful", ""), ("ness", "")]])


_STEP4 = ["al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement", "ment", "ent", "ion",
          "ou", "ism", "ate", "iti", "ous", "ive", "ize"]


def _step4(w):
    rules = [(s, "", (lambda st: _gt1(st) and st[-1:] in ("s", "t")) if s == "ion" else _gt1) for s in _STEP4]
    return _rules(w, rules)


def _step5a(w):
    if w.endswith("e"):
        s = w[:-1]
        if _m(s) > 1 or (_m(s) == 1 and not _ends_cvc(s)):
            return s
    return w


def _step5b(w):
    return _rules(w, [("ll", "l", lambda _: _m(w[:-1]) > 1)])


@lru_cache(maxsize=200_000)
def porter_stem(word: str) -> str:
    """Porter stem of a lowercase word, as NLTK computes it."""
    if word in _IRREGULAR:
        return _IRREGULAR[word]
    if len(word) <= 2:
        return word
    for step in (_step1a, _step1b, _step1c, _step2, _step3, _step4, _step5a, _step5b):
        word = step(word)
    return word


# ------------------------------------------------------------------------ ROUGE
def rouge_tokens(text: str) -> list[str]:
    """Tokens as rouge-score makes them: lowercase alphanumerics, stemmed if longer than 3."""
    toks = re.split(r"\s+", re.sub(r"[^a-z0-9]+", " ", text.lower()))
    return [porter_stem(t) if len(t) > 3 else t for t in toks if t]


def _f(overlap: int, n_pred: int, n_gold: int) -> float:
    p, r = overlap / max(n_pred, 1), overlap / max(n_gold, 1)
    return 0.0 if p + r == 0 else 2 * p * r / (p + r)


def _ngram_f(pred: list[str], gold: list[str], n: int) -> float:
    pc = Counter(tuple(pred[i:i + n]) for i in range(len(pred) - n + 1))
    gc = Counter(tuple(gold[i:i + n]) for i in range(len(gold) - n + 1))
    return _f(sum((pc & gc).values()), sum(pc.values()), sum(gc.values()))


def _lcs_f(pred: list[str], gold: list[str]) -> float:
    if not pred or not gold:
        return 0.0
    prev = [0] * (len(pred) + 1)
    for g in gold:
        cur = [0]
        for j, p in enumerate(pred, 1):
            cur.append(prev[j - 1] + 1 if g == p else max(prev[j], cur[j - 1]))
        prev = cur
    return _f(prev[-1], len(pred), len(gold))


def rouge(pred: str, gold: str) -> tuple[float, float, float]:
    """ROUGE-1, ROUGE-2 and ROUGE-L F-measure of one prediction against one gold."""
    p, g = rouge_tokens(pred), rouge_tokens(gold)
    return _ngram_f(p, g, 1), _ngram_f(p, g, 2), _lcs_f(p, g)


def rouge_multi(pred: str, golds: list[str]) -> tuple[float, float, float]:
    """Scores against the gold with the best ROUGE-1 (SciTLDR's multi-target rule)."""
    return max((rouge(pred, g) for g in golds), key=lambda s: s[0])


# ------------------------------------------------------------------------ bench
def _load(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _row(name: str, scores: list[tuple[float, float, float]]) -> str:
    means = [100 * statistics.fmean(s[k] for s in scores) for k in range(3)]
    return f"{name:<38} {means[0]:6.1f} {means[1]:6.1f} {means[2]:6.1f}"


def _check_against_rouge_score(records: list[dict], preds: list[str]) -> None:
    from rouge_score import rouge_scorer  # optional; only for this check

    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
    worst = 0.0
    for rec, pred in zip(records, preds):
        for gold in rec["target"]:
            ref = scorer.score(gold, pred)
            ours = rouge(pred, gold)
            for k, key in enumerate(["rouge1", "rouge2", "rougeL"]):
                worst = max(worst, abs(ref[key].fmeasure - ours[k]))
    print(f"largest difference to rouge-score over {len(records)} papers: {worst:.2e}")


def main(argv: list[str] | None = None) -> None:
    """Print Lead-1, our TL;DR and the oracle sentence side by side."""
    from store.headline import ends_mid_phrase
    from store.summary import figures, is_dangling, load_weights, main_sentence, split_sentences, summarize_paper

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, help="SciTLDR-style JSON Lines file")
    ap.add_argument("--weights", help="weights file (default: the packaged one)")
    ap.add_argument("--limit", type=int, help="only the first N papers")
    ap.add_argument("--check-rouge-score", action="store_true",
                    help="compare this ROUGE with the rouge-score package (must be installed)")
    args = ap.parse_args(argv)

    records = _load(args.data)[: args.limit]
    weights = load_weights(args.weights) if args.weights else load_weights()
    lead, ours, ours_t, oracle, preds, times = [], [], [], [], [], []
    title_rows, ours_whole, oracle_comp, hard_cuts = [], [], [], []
    tldrs, points = [], []
    for rec in records:
        golds, sents = rec["target"], rec["source"]
        text = " ".join(s.strip() for s in sents)
        lead.append(rouge_multi(sents[0], golds))
        oracle.append(max((rouge_multi(s, golds) for s in sents), key=lambda x: x[0]))
        if rec.get("title"):
            title_rows.append(rouge_multi(rec["title"], golds))
        # where the gap to the oracle is: the sentence chosen, or what compression makes of it
        split, comp, main = main_sentence(text, weights=weights)
        ours_whole.append(rouge_multi(split[main], golds))
        if comp[main][1] == 2:
            hard_cuts.append(comp[main][0])
        oracle_comp.append(max((rouge_multi(c, golds) for c, _ in comp), key=lambda x: x[0]))
        t0 = time.perf_counter()
        summary = summarize_paper(text, weights=weights)
        tldr = summary.tldr
        times.append(time.perf_counter() - t0)
        points.append((text, summary.points))
        ours.append(rouge_multi(tldr, golds))
        ours_t.append(rouge_multi(summarize_paper(text, rec.get("title"), weights=weights).tldr, golds))
        preds.append(tldr)
        tldrs.append(tldr)

    n_words = [len(t.split()) for t in tldrs]
    print(f"{Path(args.data).name}: {len(records)} papers, "
          f"{statistics.fmean(len(r['target']) for r in records):.2f} gold TLDRs each\n")
    print(f"{'':<38} {'R1':>6} {'R2':>6} {'RL':>6}")
    print(_row("Lead-1 (first sentence)", lead))
    print(_row("ours, extractive TL;DR", ours))
    print(_row("ours, extractive TL;DR, with title", ours_t))
    print(_row("oracle best single sentence", oracle))
    print("\nwhere the gap is (abstract only):")
    print(_row("  our sentence, not compressed", ours_whole))
    print(_row("  best sentence, as we compress it", oracle_comp))
    if title_rows:
        print(_row(f"  the title itself ({len(title_rows)} papers)", title_rows))
    print(f"\nTL;DR words: mean {statistics.fmean(n_words):.1f}, max {max(n_words)}, "
          f"<= 30 words: {100 * sum(n <= 30 for n in n_words) / len(n_words):.1f}%")
    print(f"cut inside a clause to fit: {len(hard_cuts)}, of which end on a stranded modifier or mid-phrase: "
          f"{sum(ends_mid_phrase(t.rstrip('.')) for t in hard_cuts)}")
    print(f"start without a dangling reference: "
          f"{100 * sum(not is_dangling(t) for t in tldrs) / len(tldrs):.1f}%")
    print(f"one sentence (splitter finds one): "
          f"{100 * sum(len(split_sentences(t)) == 1 for t in tldrs) / len(tldrs):.1f}%")
    print(f"time per abstract (TL;DR and key points): median {1000 * statistics.median(times):.2f} ms")
    for key in ("problem", "approach", "results", "code"):
        print(f"  {key} point given: {100 * sum(bool(p[key]) for _, p in points) / len(points):.1f}%")
    # the Results point should carry the figures: of the abstracts stating a percentage, how many keep one
    with_pct = [p for text, p in points if any("%" in f for f in figures(text))]
    kept = sum(bool(p["results"]) and any("%" in f for f in figures(p["results"])) for p in with_pct)
    print(f"abstracts stating a percentage whose Results point keeps one: {kept}/{len(with_pct)}")
    if args.check_rouge_score:
        _check_against_rouge_score(records, preds)


if __name__ == "__main__":
    main()
