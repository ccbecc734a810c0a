"""Known-item retrieval on SciTLDR: every abstract is loaded, every TLDR is a query.

    python bench/search_quality.py --data ../shared/eval/scitldr/train.jsonl \
        --data ../shared/eval/scitldr/dev.jsonl [--no-titles] [--tune] [--db CACHE.db]
    python bench/search_quality.py --data ../shared/eval/scitldr/dev.jsonl \
        --backend sqlite --backend postgresql --titles both

--backend (repeatable) runs the same queries on each store backend (PostgreSQL in a
throwaway database on --pg-url's server, dropped at the end) and --titles both with
and without titles; with more than one run a closing table puts their hybrid and
BM25 MRR@10 side by side. Abstracts are embedded once and reused across runs.

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
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from store import Record, SentenceTransformerEmbedder, Store, ingest_records, open_store  # noqa: E402
from store.rerank import FEATURES, RERANK  # noqa: E402
from store.search import COLUMN_WEIGHTS, FUSION, MAX_DF, Searcher, clip_query, fuse  # noqa: E402

DEPTH = 10
OFF = {"top": 0}  # fusion alone: what --tune chooses on (the re-rank's head follows fusion)


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


class ReusingEmbedder:
    """The model, remembering every text it encoded: the same abstracts go into several stores."""

    def __init__(self, inner):
        self.inner, self.name, self._seen = inner, inner.name, {}

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def encode(self, texts, **kw):
        todo = [t for t in dict.fromkeys(texts) if t not in self._seen]
        if todo:
            self._seen.update(zip(todo, self.inner.encode(todo, **kw)))
        return np.stack([self._seen[t] for t in texts]) if texts else self.inner.encode(texts, **kw)


class PostgresDatabase:
    """A throwaway database on a PostgreSQL server; one schema per store, all dropped at close."""

    def __init__(self, server: str):
        import psycopg

        self.server = server.rstrip("/")
        self.name = f"paperclub_quality_{os.getpid()}"
        self.admin = psycopg.connect(f"{self.server}/postgres", autocommit=True)
        self.admin.execute(f'create database "{self.name}"')

    def url(self, schema: str) -> str:
        import psycopg

        with psycopg.connect(f"{self.server}/{self.name}", autocommit=True) as conn:
            conn.execute(f'create schema "{schema}"')
        return f"{self.server}/{self.name}?options=-csearch_path%3D{schema}"

    def close(self) -> None:
        self.admin.execute(f'drop database if exists "{self.name}" with (force)')
        self.admin.close()


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


def query_vectors(embedder, texts: list[str], cache: Path | None, encoder: str = "torch") -> np.ndarray:
    """Encode the queries, reusing a saved copy next to a --db store when the texts match.

    encoder="onnx": through the ONNX Runtime query encoder the bot uses (in chunks of 64)."""
    key = hashlib.sha1(json.dumps([embedder.name, texts] + ([encoder] if encoder != "torch" else []))
                       .encode()).hexdigest()[:16]
    path = cache.with_name(f"queries-{key}.npy") if cache else None
    if path and path.exists():
        return np.load(path)
    if encoder == "onnx":
        onnx = onnx_encoder()
        qv = np.concatenate([onnx.encode(texts[i:i + 64]) for i in range(0, len(texts), 64)]) if texts \
            else np.zeros((0, 384), dtype=np.float32)
    else:
        qv = embedder.encode(texts)
    if path:
        np.save(path, qv)
    return qv


_ONNX = {}


def onnx_encoder():
    """The bundled model's ONNX query encoder, exported once into PAPERCLUB_ONNX_DIR or a temp dir."""
    if "enc" not in _ONNX:
        from store.embed import resolve_model_path
        from store.embed_onnx import OnnxQueryEncoder

        where = os.environ.get("PAPERCLUB_ONNX_DIR") or tempfile.mkdtemp(prefix="pc-onnx-")
        _ONNX["enc"] = OnnxQueryEncoder(resolve_model_path("all-MiniLM-L6-v2"), where)
        _ONNX["enc"].load()
    return _ONNX["enc"]


def paired(base: np.ndarray, new: np.ndarray, *, rounds: int = 2000, seed: int = 0) -> str:
    """Mean per-query gain of new over base, its 95% paired-bootstrap interval, wins and losses."""
    d = np.asarray(new, dtype=float) - np.asarray(base, dtype=float)
    if not len(d):
        return "no queries"
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, len(d), size=(rounds, len(d)))].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return f"{d.mean():+.4f} ({lo:+.4f}..{hi:+.4f}; {int((d > 0).sum())} better, {int((d < 0).sum())} worse)"


class Runs:
    """Per-query candidate lists, computed once per BM25 column weighting and reused by fusion."""

    def __init__(self, searcher: Searcher, queries: list[tuple[str, str]], cache: Path | None = None,
                 encoder: str = "torch"):
        self.searcher = searcher
        self.queries = queries
        texts = [clip_query(q) for q, _ in queries]
        t = time.perf_counter()
        qv = query_vectors(searcher.embedder, texts, cache, encoder)
        index = searcher.index()
        self.embed_s = time.perf_counter() - t
        self.dense = []
        for v in qv:
            self.dense.append(index.search(v, searcher.candidates))
        self.qv = qv
        self._bm25: dict[tuple, list] = {}
        self._heads: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}
        self.papers: dict = {}  # paper id -> Paper, every paper, read once by run_one
        self.aspects: dict[str, np.ndarray] = {}  # paper id -> aspect vectors, read once by run_one

    def bm25(self, weights: tuple) -> list[list[tuple[str, float]]]:
        if weights not in self._bm25:
            self.searcher.column_weights = weights
            self._bm25[weights] = [self.searcher.bm25(clip_query(q)) for q, _ in self.queries]
        return self._bm25[weights]

    def heads(self, weights: tuple, fusion: dict, top: int) -> tuple[np.ndarray, np.ndarray]:
        """Each query's re-rank features over its fused head, (queries, top, len(FEATURES)) with
        NaN rows where a head is short, and the target's place in its head (-1: not there)."""
        key = (weights, tuple(sorted(fusion.items())), top)
        if key not in self._heads:
            lex_all = self.bm25(weights)
            index = self.searcher.index()
            feats = np.full((len(self.queries), top, len(FEATURES)), np.nan)
            where = np.full(len(self.queries), -1)
            for i, (q, target) in enumerate(self.queries):
                fused = fuse(lex_all[i], self.dense[i], index=index, query_vec=self.qv[i], **fusion)
                head = sorted(fused, key=lambda p: -fused[p])[:top]
                missing = [p for p in head if p not in self.papers]  # a reused store may hold more papers
                if missing:
                    self.papers.update((p.id, p) for p in self.searcher.store.get_papers(missing))
                    self.aspects.update(self.searcher.aspect_vectors(missing))
                f = self.searcher.head_features(clip_query(q), head, lexical=lex_all[i], dense=self.dense[i],
                                                qvec=self.qv[i], index=index, papers=self.papers,
                                                aspects=self.aspects)
                for j, pid in enumerate(head):
                    feats[i, j] = f.get(pid, np.nan)
                    if pid == target:
                        where[i] = j
            self._heads[key] = (feats, where)
        return self._heads[key]

    def reranked_rr(self, weights: tuple, fusion: dict, rerank: dict) -> np.ndarray:
        """Each query's reciprocal rank (0 past DEPTH) with the re-rank's settings."""
        top = max(rerank["top"], DEPTH)  # a head shorter than DEPTH leaves the fused order below it
        feats, where = self.heads(weights, fusion, top)
        if rerank["top"] < top:
            feats = feats.copy()
            feats[:, rerank["top"]:] = np.nan
        w = np.array([1.0, rerank["bm25_weight"], rerank["coverage"], rerank["proximity"], rerank["aspect"]])
        scores = feats @ w  # NaN for a short head's missing rows
        rr = np.zeros(len(where))
        for i, j in enumerate(where):
            if j < 0:
                continue
            if j >= rerank["top"]:  # below the re-ranked part: its fused place
                rank = j + 1
            else:
                s = scores[i, : rerank["top"]]
                rank = 1 + int((s[np.isfinite(s)] > s[j]).sum())
            rr[i] = 1.0 / rank if rank <= DEPTH else 0.0
        return rr

    def score(self, weights: tuple, fusion: dict, rerank: dict | None = None) -> dict[str, dict[str, float]]:
        """bm25, dense and hybrid without the re-rank ('hybrid') and with it ('hybrid+': the
        settings given, by default the store's RERANK)."""
        rerank = RERANK if rerank is None else rerank
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
        out = {k: metrics(v) for k, v in ranks.items()}
        self.rr = {"hybrid": np.array([1 / r if r and r <= DEPTH else 0.0 for r in ranks["hybrid"]])}
        if rerank["top"]:
            self.rr["hybrid+"] = self.reranked_rr(weights, fusion, rerank)
            rr = self.rr["hybrid+"]
            out["hybrid+"] = {"MRR@10": float(rr.mean()) if len(rr) else 0.0,
                              "R@1": float((rr == 1).mean()) if len(rr) else 0.0,
                              "R@10": float((rr > 0).mean()) if len(rr) else 0.0}
        else:
            self.rr["hybrid+"] = self.rr["hybrid"]
            out["hybrid+"] = out["hybrid"]
        return out


def table(title: str, res: dict[str, dict[str, float]], n: int, gain: str = "") -> None:
    print(f"\n{title}  ({n} queries)")
    print(f"  {'':8} {'MRR@10':>7} {'R@1':>7} {'R@10':>7}")
    for name in ("bm25", "dense", "hybrid", "hybrid+"):
        m = res[name]
        print(f"  {name:8} {m['MRR@10']:7.3f} {m['R@1']:7.3f} {m['R@10']:7.3f}")
    print(f"  hybrid+ = hybrid, then the re-rank {RERANK}: "
          f"{res['hybrid+']['MRR@10'] - res['hybrid']['MRR@10']:+.4f} MRR@10" + (f"; paired {gain}" if gain else ""))
    best_part = max(res["bm25"]["MRR@10"], res["dense"]["MRR@10"])
    verdict = "beats" if res["hybrid+"]["MRR@10"] > best_part else "DOES NOT beat"
    print(f"  hybrid+ {verdict} both parts on MRR@10 ({res['hybrid+']['MRR@10'] - best_part:+.3f})")


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


def rerank_grid():
    """Re-rank settings tried by --rerank (the window is fixed: the features are computed once)."""
    return [{**RERANK, "top": t, "bm25_weight": b, "coverage": c, "proximity": p, "aspect": a}
            for t in (10, 20) for b in (0.1, 0.15, 0.2, 0.3) for c in (0.0, 0.2, 0.3, 0.4, 0.5, 0.6)
            for p in (0.0, 0.05, 0.1, 0.15, 0.2, 0.3) for a in (0.0, 0.1, 0.2, 0.3)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", action="append", required=True, help="SciTLDR-style JSONL (repeatable)")
    ap.add_argument("--no-titles", action="store_true", help="abstracts only, as in the seed corpus")
    ap.add_argument("--titles", choices=("yes", "no", "both"), default=None,
                    help="search titles (yes), abstracts only (no, as --no-titles) or both in turn")
    ap.add_argument("--backend", action="append", choices=("sqlite", "postgresql"), default=None,
                    help="store backend to run on (repeatable; default sqlite)")
    ap.add_argument("--pg-url", default="postgresql://postgres@127.0.0.1:5432",
                    help="PostgreSQL server for --backend postgresql (a throwaway database is made there)")
    ap.add_argument("--tune", action="store_true", help="grid-search fusion on the first file")
    ap.add_argument("--rerank", action="store_true",
                    help="sweep the re-rank's settings (store.rerank); every file's hybrid+ MRR@10 per setting, "
                         "the ten best on the first file, and the one chosen there with its paired gains")
    ap.add_argument("--query-encoder", choices=("torch", "onnx", "both"), default="torch",
                    help="encode the queries with sentence-transformers, the bot's ONNX Runtime encoder, or both "
                         "(both: the ONNX results after the torch ones, and their MRR@10 side by side)")
    ap.add_argument("--db", default=None, help="keep the SQLite store here and reuse it on the next run")
    ap.add_argument("--limit", type=int, default=None, help="only the first N records per file")
    ap.add_argument("--max-df", type=float, default=MAX_DF,
                    help="drop query words held by more than this share of papers")
    ap.add_argument("--posting-budget", type=int, default=None,
                    help="postings per BM25 query (scale it with the corpus to mimic a larger one)")
    args = ap.parse_args(argv)

    title_modes = {"yes": [True], "no": [False], "both": [True, False], None: [not args.no_titles]}[args.titles]
    backends = args.backend or ["sqlite"]
    embedder = ReusingEmbedder(SentenceTransformerEmbedder())
    pg = PostgresDatabase(args.pg_url) if "postgresql" in backends else None
    summary: dict[tuple[str, bool], dict[str, dict]] = {}  # (file, titles) -> backend -> results
    try:
        for titles in title_modes:
            for backend in backends:
                if backend == "postgresql":
                    db = pg.url("titles" if titles else "no_titles")
                elif args.db and len(title_modes) == 1:
                    db = args.db
                else:
                    db = str(Path(tempfile.mkdtemp(prefix="pc-quality-")) / "quality.db")
                print(f"\n=== backend {backend}, titles {'yes' if titles else 'no'} ===")
                for name, res in run_one(args, db, titles, embedder).items():
                    summary.setdefault((name, titles), {})[backend] = res
    finally:
        if pg:
            pg.close()
    if len(summary) * len(backends) > 1:
        print("\nside by side (MRR@10; search = hybrid then the re-rank, as the bot answers)")
        head = "".join(f" {b + ' search':>18} {b + ' bm25':>16}" for b in backends)
        print(f"  {'file':10} {'titles':6}{head}" + ("   hybrid diff" if len(backends) == 2 else ""))
        for (name, titles), per in summary.items():
            cells = "".join(f" {per[b]['hybrid+']['MRR@10']:18.4f} {per[b]['bm25']['MRR@10']:16.4f}"
                            for b in backends)
            diff = (f" {per[backends[1]]['hybrid+']['MRR@10'] - per[backends[0]]['hybrid+']['MRR@10']:+13.4f}"
                    if len(backends) == 2 else "")
            print(f"  {name:10} {'yes' if titles else 'no':6}{cells}{diff}")
    return 0


def run_one(args, db: str, titles: bool, embedder) -> dict[str, dict[str, dict[str, float]]]:
    """Load the files into the store at db, run every query; file -> the results table."""
    files = {Path(f).stem: load(f, titles)[: args.limit] for f in args.data}
    store, ids = build_store(db, files, embedder)
    searcher = Searcher(store, embedder, max_df=args.max_df, posting_budget=args.posting_budget,
                        doc_terms_cache=1_000_000)
    print(f"titles searched: {'yes' if titles else 'no (--no-titles)'}; corpus {store.count_papers()} "
          f"papers; model {embedder.name}; max_df {args.max_df}; posting budget {searcher.posting_budget}; "
          f"backend {store.backend}")

    # Every paper and its aspect vectors, read once (the bot reads only each search's head).
    papers = {p.id: p for p in store.get_papers(list(ids.values()))}
    aspects = searcher.aspect_vectors(list(ids.values()))
    print(f"aspect vectors: {len(aspects)} of {len(ids)} papers", file=sys.stderr)
    runs = {}
    cache = Path(args.db) if args.db else None
    for name, rows in files.items():
        queries = [(q, ids[r["id"]]) for r in rows if r["id"] in ids for q in r["queries"] if q.strip()]
        runs[name] = Runs(searcher, queries, cache, "onnx" if args.query_encoder == "onnx" else "torch")
        runs[name].papers, runs[name].aspects = papers, aspects
        print(f"{name}: {len(queries)} queries embedded in {runs[name].embed_s:.1f}s", file=sys.stderr)

    weights, fusion = COLUMN_WEIGHTS, dict(FUSION)
    if args.tune:
        first = next(iter(runs))
        columns, fusions = grid()
        best: dict[str, tuple] = {}  # per fusion method: (train MRR@10, columns, fusion)
        for w in columns:
            for f in fusions:
                mrr = runs[first].score(w, f, OFF)["hybrid"]["MRR@10"]
                if f["method"] not in best or mrr > best[f["method"]][0]:
                    best[f["method"]] = (mrr, w, f)
        print(f"\ntuned on {first} (columns = short_name, headline, title, abstract):")
        for method, (_mrr, w, f) in sorted(best.items()):
            held = "  ".join(f"{name} {run.score(w, f, OFF)['hybrid']['MRR@10']:.4f}"
                             for name, run in runs.items())
            print(f"  best {method:5}: columns {w} {f}  hybrid MRR@10: {held}")
        bm25_best = max(columns, key=lambda w: runs[first].score(w, fusion, OFF)["bm25"]["MRR@10"])
        print(f"  BM25 alone is best with columns {bm25_best}")
        _, weights, fusion = max(best.values(), key=lambda b: b[0])

    if args.rerank:
        first = next(iter(runs))
        rows = []
        for setting in rerank_grid():
            rows.append((setting, {name: float(run.reranked_rr(weights, fusion, setting).mean())
                                   for name, run in runs.items()}))
        rows.sort(key=lambda r: -r[1][first])
        base = "  ".join(f"{name} {run.score(weights, fusion, OFF)['hybrid']['MRR@10']:.4f}"
                         for name, run in runs.items())
        print(f"\nre-rank settings, the ten best on {first} of {len(rows)} (hybrid+ MRR@10; hybrid: {base})")
        for setting, per in rows[:10]:
            shown = {k: setting[k] for k in ("top", "bm25_weight", "coverage", "proximity", "aspect")}
            print(f"  {str(shown):78} " + "  ".join(f"{n} {v:.4f}" for n, v in per.items()))
        # The cheapest head within 0.001 of the best on the first file: a head of 10 reads half
        # the papers of one of 20 per search.
        near = [r for r in rows if r[1][first] >= rows[0][1][first] - 0.001]
        chosen = min(near, key=lambda r: (r[0]["top"], -r[1][first]))[0]
        print(f"chosen on {first} (the smallest head within 0.001 of the best): {chosen}")
        for name, run in runs.items():
            run.score(weights, fusion, chosen)
            print(f"  {name}: paired gain over hybrid {paired(run.rr['hybrid'], run.rr['hybrid+'])}")
        for part in ("coverage", "proximity", "aspect"):
            alone = {**chosen, **{k: 0.0 for k in ("coverage", "proximity", "aspect") if k != part}}
            print(f"  {part} the only text/aspect part (cosine + BM25 beside it): " + "  ".join(
                f"{name} {run.reranked_rr(weights, fusion, alone).mean():.4f}" for name, run in runs.items()))

    print(f"\nsettings: columns {weights}, fusion {fusion}")
    out = {}
    encoders = {"torch": ["torch"], "onnx": ["onnx"], "both": ["torch", "onnx"]}[args.query_encoder]
    for encoder in encoders:
        for name, run in runs.items():
            if encoder == "onnx" and args.query_encoder == "both":
                run = Runs(searcher, run.queries, cache, encoder)
            res = run.score(weights, fusion)
            out[name if len(encoders) == 1 else f"{name}/{encoder}"] = res
            table(f"{name} (queries: {encoder})", res, len(run.queries), paired(run.rr["hybrid"], run.rr["hybrid+"]))
    if len(encoders) == 2:
        print("\nquery encoder torch vs onnx (MRR@10)")
        for name in runs:
            t, o = out[f"{name}/torch"], out[f"{name}/onnx"]
            print("  " + name + "  " + "  ".join(f"{k} {t[k]['MRR@10']:.4f} vs {o[k]['MRR@10']:.4f} "
                                                f"({o[k]['MRR@10'] - t[k]['MRR@10']:+.4f})"
                                                for k in ("dense", "hybrid")))
    store.close()
    return out


if __name__ == "__main__":
    sys.exit(main())
