"""Query latency of Searcher.search at 1k, 10k and 100k papers, plus memory.

    python bench/search_latency.py [--sizes 1000,10000,100000] [--queries 200] [--db DIR]
        [--query-encoder onnx,torch]

Corpora are synthesised by recombining real abstract sentences from the SciTLDR
files; their embeddings are random unit vectors written straight into the store
(no model encoding), so a 100k build takes well under a minute. Queries are real
TLDRs embedded by the real model each time (the query cache is cleared), so the
figures include query embedding. One store grows from the smallest size to the
largest. Prints p50/p95 per stage, index load time, matrix bytes and RSS growth, once per
query encoder (onnx, as `paperclub run` uses by default, beside torch), each row beside the other.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from store import Searcher, Store, open_store  # noqa: E402
from store.embed import DEFAULT_MODEL, make_embedder  # noqa: E402
from store.search import clip_query  # noqa: E402
from store.text import content_hash  # noqa: E402

EVAL = ROOT.parent / "shared" / "eval" / "scitldr"
DIM = 384  # all-MiniLM-L6-v2
VENUES = [("ICLR 2026", 2026), ("ICLR 2025", 2025), ("NeurIPS 2025", 2025), ("ICML 2025", 2025)]


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def load_eval(data: list[str]) -> tuple[list[str], list[str]]:
    """(abstract sentences, TLDR queries) from SciTLDR-style files."""
    sentences, queries = [], []
    for f in data:
        for line in Path(f).read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                sentences += [s for s in r["source"] if len(s) > 30]
                queries += r["target"]
    return sentences, queries


def synth_rows(start: int, n: int, sentences: list[str], rng: random.Random, model: str):
    """n synthetic papers: 4-9 real sentences recombined, a random unit vector each."""
    rows, vecs = [], []
    mat = np.random.default_rng(start).standard_normal((n, DIM)).astype(np.float32)
    mat /= np.linalg.norm(mat, axis=1, keepdims=True)
    for i in range(n):
        text = " ".join(rng.sample(sentences, rng.randint(4, 9)))
        venue, year = VENUES[(start + i) % len(VENUES)]
        pid = f"s{start + i:07d}"
        h = content_hash(text)
        words = text.split()
        rows.append({"id": pid, "collection": venue, "year": year, "short_name": " ".join(words[:3]),
                     "headline": " ".join(words[:14]), "abstract": text, "raw": text,
                     "content_hash": h, "source": "synthetic"})
        vecs.append({"paper_id": pid, "model": model, "vector": mat[i], "content_hash": h})
    return rows, vecs


def grow(store: Store, target: int, sentences, rng, model: str) -> float:
    """Add synthetic papers until the store holds target; seconds taken."""
    t = time.perf_counter()
    have = store.count_papers()
    while have < target:
        n = min(5000, target - have)
        rows, vecs = synth_rows(have, n, sentences, rng, model)
        store.write_papers(rows, [], embeddings=vecs, now=time.time())
        have += n
    return time.perf_counter() - t


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def measure(searcher: Searcher, queries: list[str]) -> dict[str, list[float]]:
    """Per query: total search() time (embedding included), and each stage alone."""
    out = {"search": [], "embed": [], "bm25": [], "dense": [], "cpu": []}
    index = searcher.index()
    for q in queries:
        searcher._cache.clear()  # every query pays for its embedding
        c0 = time.process_time()
        t0 = time.perf_counter()
        searcher.search(q, limit=10)
        t1 = time.perf_counter()
        out["cpu"].append((time.process_time() - c0) * 1000)
        searcher._cache.clear()
        vec = searcher.embed_query(clip_query(q))
        t2 = time.perf_counter()
        searcher.bm25(clip_query(q))
        t3 = time.perf_counter()
        index.search(vec, searcher.candidates)
        t4 = time.perf_counter()
        for k, dt in zip(out, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
            out[k].append(dt * 1000)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--torch-threads", type=int, default=None,
                    help="torch intra-op threads for query encoding (default: torch's choice)")
    ap.add_argument("--bf16", default="auto", choices=("auto", "0", "1"),
                    help="bf16 autocast for the query model, as PAPERCLUB_EMBED_BF16")
    ap.add_argument("--posting-budget", type=int, default=None,
                    help="postings per BM25 query (see store/search.py)")
    ap.add_argument("--data", action="append", default=None,
                    help=f"SciTLDR-style JSONL (default: {EVAL}/train.jsonl and dev.jsonl)")
    ap.add_argument("--db", default=None, help="directory to keep the store in and reuse (default: a temp dir)")
    ap.add_argument("--query-encoder", default="onnx,torch",
                    help="comma-separated PAPERCLUB_QUERY_ENCODER values, each measured at every size")
    ap.add_argument("--onnx-dir", default=os.environ.get("PAPERCLUB_ONNX_DIR")
                    or os.path.join(os.path.expanduser("~"), ".cache", "paperclub", "onnx"),
                    help="where the exported ONNX model is cached (the bot's default)")
    args = ap.parse_args(argv)

    data = args.data or [str(EVAL / "train.jsonl"), str(EVAL / "dev.jsonl")]
    sentences, queries = load_eval(data)
    rng = random.Random(7)
    queries = rng.sample(queries, min(args.queries, len(queries)))
    sizes = sorted(int(s) for s in args.sizes.split(","))
    folder = Path(args.db or tempfile.mkdtemp(prefix="pc-latency-"))
    db = folder / "latency.db"  # with --db an existing store is reused and topped up

    encoders = [e.strip() for e in args.query_encoder.split(",") if e.strip()]
    searchers = {}
    for enc in encoders:
        embedder = make_embedder(DEFAULT_MODEL, bf16=args.bf16, query_encoder=enc, onnx_dir=args.onnx_dir)
        embedder.load(**({"background": False} if enc == "onnx" else {}))  # the export, if any, first
        used = getattr(embedder, "query_backend", "torch")
        if used != enc:
            sys.exit(f"query encoder {enc} asked for, {used} in use (see the warning above)")
        searchers[enc] = embedder
    if args.torch_threads:
        import torch

        torch.set_num_threads(args.torch_threads)
    store = open_store(db)
    for enc, embedder in list(searchers.items()):
        searchers[enc] = Searcher(store, embedder, posting_budget=args.posting_budget)
        searchers[enc].embed_query("warm up the model")
    print(f"cpus: {os.cpu_count()}  load average: {os.getloadavg()[0]:.1f}  model: {DEFAULT_MODEL}  "
          f"posting budget: {searchers[enc].posting_budget}  bf16: {args.bf16}  "
          f"torch threads: {__import__('torch').get_num_threads()}  "
          f"queries: {len(queries)} real TLDRs; {len(sentences)} source sentences")
    print(f"{'papers':>8} {'encoder':>7} {'build s':>8} {'load s':>7} {'matrix MB':>9} {'RSS +MB':>8} "
          f"{'p50 ms':>7} {'p95 ms':>7} {'cpu p50':>7} | p50/p95 ms: {'embed':>11} {'bm25':>11} {'dense':>11}")
    model = next(iter(searchers.values())).embedder.name
    for size in sizes:
        if store.count_papers() > size:
            print(f"{size:>8} skipped: the reused store already holds {store.count_papers()} papers")
            continue
        build = grow(store, size, sentences, rng, model)
        for enc, searcher in searchers.items():
            searcher._index = None
            before = rss_mb()
            t = time.perf_counter()
            index = searcher.index()
            load = time.perf_counter() - t
            grown = rss_mb() - before
            measure(searcher, queries[:10])  # warm SQLite's page cache
            res = measure(searcher, queries)
            parts = "  ".join(f"{pct(res[k], 50):5.1f}/{pct(res[k], 95):5.1f}" for k in ("embed", "bm25", "dense"))
            print(f"{size:>8} {enc:>7} {build:8.1f} {load:7.2f} {index.nbytes / 2**20:9.1f} {grown:8.1f} "
                  f"{pct(res['search'], 50):7.1f} {pct(res['search'], 95):7.1f} {pct(res['cpu'], 50):7.1f} "
                  f"|             {parts}", flush=True)
            print(f"          mean search {statistics.mean(res['search']):.1f} ms, "
                  f"max {max(res['search']):.1f} ms", file=sys.stderr)
            searcher._index = None  # one index in memory at a time
    print(f"load average at the end: {os.getloadavg()[0]:.1f} (figures are wall-clock; a busy "
          f"machine inflates them)")
    store.close()
    if not args.db:
        for f in folder.iterdir():
            f.unlink()
        folder.rmdir()
    return 0


if __name__ == "__main__":
    sys.exit(main())
