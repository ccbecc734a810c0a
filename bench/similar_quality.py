""""More like this" on ICLR 2024: does `similar` find a paper's topic-mates?

    HF_HUB_OFFLINE=1 python bench/similar_quality.py [--db CACHE.db] [--tune] [--limit N]

A proxy, since nobody has judged which papers are alike: every ICLR 2024
submission (titles and abstracts, 2,399 of them, author keywords NOT given to
the store) is loaded; each paper with a topic label (berenslab's 45 classes) is
a query, and the other papers with its label are relevant, graded by the author
keywords they share with it: gain 1 + shared keywords (so a same-topic paper
sharing two keywords counts 3, one sharing none counts 1).

Unlabelled papers (38%) stay in the corpus as distractors but are unjudged: they
are dropped from every ranking before scoring ("condensed lists"), so no method
is punished for finding a near paper nobody labelled. Figures: NDCG@10 (graded)
and MAP@100 (binary: same label), for dense alone (the paper's vector), BM25
alone twice (bm25: its abstract as the query, the store's own query plan; bm25-mlt: its
most distinctive words by tf x idf, as Lucene's MoreLikeThis), and `similar`.

Queries are split in two halves by a hash of the paper id: dev and test. --tune
picks `similar`'s settings on dev only; test is held out. Both halves are printed.
"""
from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import math
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from store import Record, SentenceTransformerEmbedder, ingest_records, open_store  # noqa: E402
from store.search import MAX_QUERY_TERMS, SIMILAR, Searcher, _paper_text, clip_query  # noqa: E402

DATA = ROOT.parent / "shared" / "eval" / "iclr2024.jsonl"
DEPTH = 100  # candidates per query (MAP@100); NDCG is cut at 10
UNLABELED = "unlabeled"


def load(path: Path, limit: int | None) -> list[dict]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return rows[:limit] if limit else rows


def half(paper_id: str) -> str:
    return "dev" if int(hashlib.sha1(paper_id.encode()).hexdigest(), 16) % 2 == 0 else "test"


def norm_keywords(words) -> set[str]:
    return {" ".join(w.lower().split()) for w in words or [] if w.strip()}


def ndcg(order: list[str], gains: dict[str, float], k: int = 10) -> float:
    dcg = sum(gains.get(p, 0.0) / math.log2(i + 2) for i, p in enumerate(order[:k]))
    ideal = sorted(gains.values(), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def average_precision(order: list[str], relevant: set[str], depth: int = DEPTH) -> float:
    found, total = 0, 0.0
    for i, p in enumerate(order[:depth], start=1):
        if p in relevant:
            found += 1
            total += found / i
    return total / min(len(relevant), depth) if relevant else 0.0


class Judge:
    """The graded relevance of every labelled paper to every other (computed on demand)."""

    def __init__(self, rows: list[dict], ids: dict[str, str]):
        self.label = {ids[r["id"]]: r["label_berenslab"] for r in rows if r["id"] in ids}
        self.keywords = {ids[r["id"]]: norm_keywords(r.get("keywords")) for r in rows if r["id"] in ids}
        self.by_label: dict[str, list[str]] = {}
        for pid, lab in self.label.items():
            if lab != UNLABELED:
                self.by_label.setdefault(lab, []).append(pid)

    def judged(self, pid: str) -> bool:
        return self.label.get(pid, UNLABELED) != UNLABELED

    def gains(self, query: str) -> dict[str, float]:
        kw = self.keywords[query]
        return {p: 1.0 + len(kw & self.keywords[p]) for p in self.by_label[self.label[query]] if p != query}

    def score(self, query: str, order: list[str]) -> tuple[float, float]:
        order = [p for p in order if p != query and self.judged(p)]  # condensed: unjudged dropped
        gains = self.gains(query)
        return ndcg(order, gains), average_precision(order, set(gains))


def build_store(db: str, rows: list[dict], embedder):
    store = open_store(db)
    records = [Record(abstract=r["abstract"], title=r["title"], id=r["id"], year=r.get("year"),
                      venue=r.get("venue"), source="iclr2024", line=i + 1)  # keywords held back
               for i, r in enumerate(rows)]
    t = time.perf_counter()
    result = ingest_records(store, records, embedder, now=time.time())
    print(f"ingest: {result} in {time.perf_counter() - t:.1f}s, {store.count_papers()} papers",
          file=sys.stderr)
    keys = store.lookup_keys(f"ext:id:{r['id'].lower()}" for r in rows)
    ids = {r["id"]: keys[f"ext:id:{r['id'].lower()}"][0] for r in rows
           if keys.get(f"ext:id:{r['id'].lower()}")}
    return store, ids


def rankers(searcher: Searcher, settings: dict):
    index = searcher.index()

    def dense(pid):
        return [p for p, _ in index.search(index.vector(pid), DEPTH + 1, exclude=pid)]

    def bm25(pid):
        paper = searcher.store.get_paper(pid)
        return [p for p, _ in searcher.bm25(clip_query(_paper_text(paper)), limit=DEPTH + 1) if p != pid]

    def bm25_mlt(pid):
        phrases = searcher.distinctive_words(searcher.store.get_paper(pid), MAX_QUERY_TERMS)
        return [p for p, _ in searcher.bm25("", phrases=phrases, limit=DEPTH + 1) if p != pid]

    def similar(pid):
        searcher.similar_settings = settings
        return [h.paper.id for h in searcher.similar(pid, limit=DEPTH)]

    return {"dense": dense, "bm25": bm25, "bm25-mlt": bm25_mlt, "similar": similar}


def evaluate(judge: Judge, queries: dict[str, list[str]], fn) -> dict[str, tuple[float, float]]:
    out = {}
    for name, qs in queries.items():
        scores = [judge.score(q, fn(q)) for q in qs]
        out[name] = (sum(s[0] for s in scores) / len(scores), sum(s[1] for s in scores) / len(scores))
    return out


def grid():
    """`similar` settings tried by --tune (on dev only): BM25 and aspect weights, aspect match."""
    for bw, aw, match in itertools.product((0.0, 0.3, 0.5, 0.8), (0.0, 0.5, 1.0), ("best", "mean")):
        if aw or match == "best":
            yield {**SIMILAR, "bm25_weight": bw, "aspect_weight": aw, "aspect_match": match}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(DATA), help="ICLR 2024 JSONL (default: the shared eval copy)")
    ap.add_argument("--db", default=None, help="keep the SQLite store here and reuse it on the next run")
    ap.add_argument("--limit", type=int, default=None, help="only the first N papers")
    ap.add_argument("--tune", action="store_true", help="grid-search similar's settings on dev")
    args = ap.parse_args(argv)

    rows = load(Path(args.data), args.limit)
    embedder = SentenceTransformerEmbedder()
    db = args.db or str(Path(tempfile.mkdtemp(prefix="pc-similar-")) / "similar.db")
    store, ids = build_store(db, rows, embedder)
    judge = Judge(rows, ids)
    searcher = Searcher(store, embedder)
    searcher.warm()
    queries: dict[str, list[str]] = {"dev": [], "test": []}
    for r in rows:
        if r["id"] in ids and judge.judged(ids[r["id"]]) and len(judge.gains(ids[r["id"]])):
            queries[half(r["id"])].append(ids[r["id"]])
    print(f"corpus {store.count_papers()} papers ({sum(map(judge.judged, judge.label))} labelled, "
          f"{len(judge.by_label)} topics); queries dev {len(queries['dev'])}, test {len(queries['test'])}; "
          f"model {embedder.name}; backend {store.backend}")

    settings = dict(SIMILAR)
    if args.tune:
        dev = {"dev": queries["dev"]}
        tried = []
        for s in grid():
            nd, ap_ = evaluate(judge, dev, rankers(searcher, s)["similar"])["dev"]
            tried.append((nd, ap_, s))
        tried.sort(key=lambda t: -t[0])
        print("\ntuned on dev (best NDCG@10 first):")
        for nd, ap_, s in tried[:8]:
            print(f"  NDCG@10 {nd:.4f}  MAP {ap_:.4f}  {s}")
        settings = tried[0][2]

    print(f"\nsimilar settings: {settings}")
    fns = rankers(searcher, settings)
    res = {name: evaluate(judge, queries, fn) for name, fn in fns.items()}
    print(f"\n  {'':8} {'dev NDCG@10':>12} {'dev MAP':>8} {'test NDCG@10':>13} {'test MAP':>9}")
    for name in ("dense", "bm25", "bm25-mlt", "similar"):
        (dn, dm), (tn, tm) = res[name]["dev"], res[name]["test"]
        print(f"  {name:8} {dn:12.4f} {dm:8.4f} {tn:13.4f} {tm:9.4f}")
    for part in ("dev", "test"):
        for i, metric in enumerate(("NDCG@10", "MAP")):
            best = max(res[b][part][i] for b in ("dense", "bm25", "bm25-mlt"))
            diff = res["similar"][part][i] - best
            verdict = "beats" if diff > 0 else "DOES NOT beat"
            print(f"  {part} {metric}: similar {verdict} the best baseline ({diff:+.4f})")
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
