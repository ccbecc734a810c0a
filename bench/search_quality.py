"""Known-item retrieval on SciTLDR: every abstract is loaded, every TLDR is a query.

    python bench/search_quality.py --data ../shared/eval/scitldr/train.jsonl \
        --data ../shared/eval/scitldr/dev.jsonl [--no-titles] [--tune] [--db CACHE.db]

All files' abstracts go into one store (more distractors than one file alone);
queries are scored per file. Prints MRR@10, recall@1 and recall@10 for BM25
alone, dense alone and the hybrid side by side. --tune grid-searches the fusion
settings and BM25 column weights on the FIRST file's queries (train) and then
reports every file with the best setting, so dev figures are held out.
"""
from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from store import Record, SentenceTransformerEmbedder, Store, ingest_records, open_store  # noqa: E402
from store.search import (  # noqa: E402
    COLUMN_WEIGHTS, FUSION, MAX_DF, POSTING_BUDGET, Searcher, clip_query, fuse,
)

DEPTH = 10


def load(path: str, titles: bool) -> list[dict]:
    out = []
    for line in Path(path).read_text().splitlines():
        if line.strip():
            r = json.loads(line)
            out.append({"id": r["paper_id"], "abstract": " ".join(r["source"]),
                        "title": r.get("title") if titles else None, "queries": r["target"]})
    return out


def build_store(path: str, files: dict[str, list[dict]], embedder) -> tuple[Store, dict[str, str]]:
    """Ingest every abstract (skipped when the cached store already has them); eval id -> store id."""
    store = open_store(path)
    records = [Record(abstract=r["abstract"], title=r["title"], id=r["id"], source=name, line=i + 1)
               for name, rows in files.items() for i, r in enumerate(rows)]
    t = time.perf_counter()
    result = ingest_records(store, records, embedder, now=time.time())
    print(f"ingest: {result} ({result.embedded} embedded) in {time.perf_counter() - t:.1f}s, "
          f"{store.count_papers()} papers", file=sys.stderr)
    keys = store.lookup_keys(f"ext:id:{r['id'].lower()}" for rows in files.values() for r in rows)
    ids = {}
    for rows in files.values():
        for r in rows:
            hit = keys.get(f"ext:id:{r['id'].lower()}")
            if hit:
                ids[r["id"]] = hit[0]
    return store, ids


def rank_of(order: list[str], target: str) -> int | None:
    try:
        return order.index(target) + 1
    except ValueError:
        return None


def metrics(ranks: list[int | None]) -> dict[str, float]:
    n = len(ranks) or 1
    return {
        "MRR@10": sum(1 / r for r in ranks if r and r <= DEPTH) / n,
        "R@1": sum(1 for r in ranks if r == 1) / n,
        "R@10": sum(1 for r in ranks if r and r <= DEPTH) / n,
    }


def query_vectors(embedder, texts: list[str], cache: Path | None) -> np.ndarray:
    """Encode the queries, reusing a saved copy next to a --db store when the texts match."""
    key = hashlib.sha1(json.dumps([embedder.name, texts]).encode()).hexdigest()[:16]
    path = cache.with_name(f"queries-{key}.npy") if cache else None
    if path and path.exists():
        return np.load(path)
    qv = embedder.encode(texts)
    if path:
        np.save(path, qv)
    return qv


class Runs:
    """Per-query candidate lists, computed once per BM25 column weighting and reused by fusion."""

    def __init__(self, searcher: Searcher, queries: list[tuple[str, str]], cache: Path | None = None):
        self.searcher = searcher
        self.queries = queries
        texts = [clip_query(q) for q, _ in queries]
        t = time.perf_counter()
        qv = query_vectors(searcher.embedder, texts, cache)
        index = searcher.index()
        self.embed_s = time.perf_counter() - t
        self.dense = []
        for v in qv:
            self.dense.append(index.search(v, searcher.candidates))
        self.qv = qv
        self._bm25: dict[tuple, list] = {}

    def bm25(self, weights: tuple) -> list[list[tuple[str, float]]]:
        if weights not in self._bm25:
            self.searcher.column_weights = weights
            self._bm25[weights] = [self.searcher.bm25(clip_query(q)) for q, _ in self.queries]
        return self._bm25[weights]

    def score(self, weights: tuple, fusion: dict) -> dict[str, dict[str, float]]:
        lex_all = self.bm25(weights)
        index = self.searcher.index()
        ranks = {"bm25": [], "dense": [], "hybrid": []}
        for i, (_, target) in enumerate(self.queries):
            lex, den = lex_all[i], self.dense[i]
            ranks["bm25"].append(rank_of([p for p, _ in lex], target))
            ranks["dense"].append(rank_of([p for p, _ in den], target))
            fused = fuse(lex, den, index=index, query_vec=self.qv[i], **fusion)
            order = sorted(fused, key=lambda p: -fused[p])[:DEPTH]
            ranks["hybrid"].append(rank_of(order, target))
        return {k: metrics(v) for k, v in ranks.items()}


def table(title: str, res: dict[str, dict[str, float]], n: int) -> None:
    print(f"\n{title}  ({n} queries)")
    print(f"  {'':8} {'MRR@10':>7} {'R@1':>7} {'R@10':>7}")
    for name in ("bm25", "dense", "hybrid"):
        m = res[name]
        print(f"  {name:8} {m['MRR@10']:7.3f} {m['R@1']:7.3f} {m['R@10']:7.3f}")
    best_part = max(res["bm25"]["MRR@10"], res["dense"]["MRR@10"])
    verdict = "beats" if res["hybrid"]["MRR@10"] > best_part else "DOES NOT beat"
    print(f"  hybrid {verdict} both parts on MRR@10 ({res['hybrid']['MRR@10'] - best_part:+.3f})")


def grid():
    """Fusion settings and column weights tried by --tune."""
    columns = [(1.0, 1.0, 1.0, 1.0), (4.0, 2.0, 2.0, 1.0), (2.0, 1.0, 1.0, 1.0),
               (4.0, 4.0, 4.0, 1.0), (2.0, 2.0, 3.0, 1.0), (4.0, 2.0, 5.0, 1.0), (1.0, 1.0, 2.0, 1.0)]
    fusions = []
    for k, wb in itertools.product((2, 5, 10, 20, 40, 60, 100), (0.3, 0.5, 0.7, 1.0, 1.5, 2.0)):
        fusions.append({"method": "rrf", "k": k, "bm25_weight": wb, "dense_weight": 1.0})
    for wb in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.2, 1.5, 2.0):
        fusions.append({"method": "score", "k": 60, "bm25_weight": wb, "dense_weight": 1.0})
    return columns, fusions


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", action="append", required=True, help="SciTLDR-style JSONL (repeatable)")
    ap.add_argument("--no-titles", action="store_true", help="abstracts only, as in the seed corpus")
    ap.add_argument("--tune", action="store_true", help="grid-search fusion on the first file")
    ap.add_argument("--db", default=None, help="keep the store here and reuse it on the next run")
    ap.add_argument("--limit", type=int, default=None, help="only the first N records per file")
    ap.add_argument("--max-df", type=float, default=MAX_DF,
                    help="drop query words held by more than this share of papers")
    ap.add_argument("--posting-budget", type=int, default=POSTING_BUDGET,
                    help="postings per BM25 query (scale it with the corpus to mimic a larger one)")
    args = ap.parse_args(argv)

    titles = not args.no_titles
    files = {Path(f).stem: load(f, titles)[: args.limit] for f in args.data}
    db = args.db or str(Path(tempfile.mkdtemp(prefix="pc-quality-")) / "quality.db")
    embedder = SentenceTransformerEmbedder()
    store, ids = build_store(db, files, embedder)
    searcher = Searcher(store, embedder, max_df=args.max_df, posting_budget=args.posting_budget)
    print(f"titles searched: {'yes' if titles else 'no (--no-titles)'}; corpus {store.count_papers()} "
          f"papers; model {embedder.name}; max_df {args.max_df}; posting budget {args.posting_budget}")

    runs = {}
    for name, rows in files.items():
        queries = [(q, ids[r["id"]]) for r in rows if r["id"] in ids for q in r["queries"] if q.strip()]
        runs[name] = Runs(searcher, queries, Path(args.db) if args.db else None)
        print(f"{name}: {len(queries)} queries embedded in {runs[name].embed_s:.1f}s", file=sys.stderr)

    weights, fusion = COLUMN_WEIGHTS, dict(FUSION)
    if args.tune:
        first = next(iter(runs))
        columns, fusions = grid()
        best: dict[str, tuple] = {}  # per fusion method: (train MRR@10, columns, fusion)
        for w in columns:
            for f in fusions:
                mrr = runs[first].score(w, f)["hybrid"]["MRR@10"]
                if f["method"] not in best or mrr > best[f["method"]][0]:
                    best[f["method"]] = (mrr, w, f)
        print(f"\ntuned on {first} (columns = short_name, headline, title, abstract):")
        for method, (mrr, w, f) in sorted(best.items()):
            held = "  ".join(f"{name} {run.score(w, f)['hybrid']['MRR@10']:.4f}"
                             for name, run in runs.items())
            print(f"  best {method:5}: columns {w} {f}  hybrid MRR@10: {held}")
        bm25_best = max(columns, key=lambda w: runs[first].score(w, fusion)["bm25"]["MRR@10"])
        print(f"  BM25 alone is best with columns {bm25_best}")
        _, weights, fusion = max(best.values(), key=lambda b: b[0])

    print(f"\nsettings: columns {weights}, fusion {fusion}")
    for name, run in runs.items():
        table(name, run.score(weights, fusion), len(run.queries))
    return 0


if __name__ == "__main__":
    sys.exit(main())
