"""Fresh papers: harvest throughput against the raw encode rate, and the seed enrichment's match rate.

    .venv/bin/python bench/sources.py [--n 5000] [--model all-MiniLM-L6-v2] [--encoder onnx|torch] [--skip-speed] [--skip-match]

Speed: harvest n records from the local fake arXiv API (pages of 1,000, no
politeness wait: it is loopback), parse, ingest and embed into a fresh
database. Prints records/s end to end, the model's raw encode rate on the same
texts in the same run (each paper's text and its three aspects, as ingest
encodes them; papers/s), their ratio (aim >= 0.9), and the peak RSS.

Match: a fake OpenReview venue holding the 38 bundled seed abstracts, lightly
edited (whitespace, LaTeX, one sentence changed), among n others (real ICLR
2024 abstracts, then generated ones). Prints matched/38 and false matches
(aim 38/38, 0 false).
"""
from __future__ import annotations

import argparse
import random
import resource
import sys
import tempfile
import time
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from fake_sources import FakePaper, FakeSources, lightly_edited, make_papers  # noqa: E402
from store import bundled_sample_paths, ingest_paths, make_embedder, open_store, read_file  # noqa: E402
from store.ingest import Record, _row_from, embed_text  # noqa: E402
from store.text import aspect_texts  # noqa: E402
from store.sources import Fetcher, Sources, harvest_arxiv  # noqa: E402
from store.sources.enrich import enrich_openreview  # noqa: E402

ICLR2024 = ROOT.parent / "shared" / "eval" / "iclr2024.jsonl"
VENUE = "ICLR.cc/2026/Conference"


def _sources(fake: FakeSources) -> Sources:
    # Loopback: no 3 s spacing (that is for arxiv.org), so the figure is ours, not the wait's.
    return Sources(fake.api, fake.rss, fake.url, Fetcher(), Fetcher())


def speed(n: int, model: str, encoder: str = "onnx") -> None:
    # The bot's embedder: ONNX Runtime once its graph is exported (here, before timing), else torch.
    embedder = make_embedder(model, query_encoder=encoder, onnx_dir=Path.home() / ".cache" / "paperclub" / "onnx")
    if hasattr(embedder, "load"):
        embedder.load(**({"background": False} if encoder == "onnx" else {}))
    embedder.encode(["warm up"])
    print(f"encoder: {getattr(embedder, 'query_backend', 'torch')}")
    with FakeSources() as fake, tempfile.TemporaryDirectory() as tmp:
        fake.papers = make_papers(n, start=datetime(2026, 10, 1, tzinfo=timezone.utc))
        for i, p in enumerate(fake.papers):
            p.published = datetime(2026, 10, 1, tzinfo=timezone.utc) + timedelta(seconds=60 * i)
        store = open_store(Path(tmp) / "b.db")
        started = time.perf_counter()
        result = harvest_arxiv(store, _sources(fake), "cs.LG", embedder, now=time.time(),
                               since=date(2026, 10, 1), until=date(2026, 12, 31), page_size=1000)
        end_to_end = n / (time.perf_counter() - started)
        # The same texts ingest encodes: each paper's text, then its aspects ("more like this").
        texts = [embed_text(_row_from(Record(abstract=p.abstract, title=p.title), None)) for p in fake.papers]
        aspects = list(dict.fromkeys(t for p in fake.papers for t in aspect_texts(p.abstract) if t))
        started = time.perf_counter()
        embedder.encode(texts)
        embedder.encode(aspects)
        raw = n / (time.perf_counter() - started)
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"harvest {n} records: {result}")
    print(f"end to end {end_to_end:,.0f} records/s; raw encode {raw:,.0f} papers/s (text + aspects); ratio {end_to_end / raw:.2f} "
          f"(aim >= 0.9); peak RSS {rss_mb:,.0f} MB")


def match(n: int) -> None:
    rng = random.Random(15)
    with FakeSources() as fake, tempfile.TemporaryDirectory() as tmp:
        store = open_store(Path(tmp) / "m.db")
        ingest_paths(store, bundled_sample_paths(), None, now=time.time())
        seeds = {p.id: p for p in store.iter_papers()}
        notes, truth = [], {}
        for k, p in enumerate(seeds.values()):
            forum = f"Seed{k:04d}x7"
            truth[p.id] = forum
            notes.append(FakePaper(None, f"Seed paper {k}: {p.short_name}", lightly_edited(p.raw, rng),
                                   [f"Author {k}", "Second Author"], forum=forum, venueid=VENUE,
                                   venue="ICLR 2026 Poster", keywords=["seed", p.short_name.lower()]))
        others = [r for r in read_file(ICLR2024)][:n]
        for k, r in enumerate(others):
            notes.append(FakePaper(None, r.title or f"Other {k}", r.abstract, r.authors or ["A. N. Other"],
                                   forum=f"Oth{k:06d}z9", venueid=VENUE, venue="ICLR 2026 Poster"))
        for k, p in enumerate(make_papers(max(0, n - len(others)), seed=9)):
            notes.append(FakePaper(None, p.title, p.abstract, p.authors, forum=f"Gen{k:06d}q3", venueid=VENUE,
                                   venue="ICLR 2026 Poster"))
        rng.shuffle(notes)
        fake.notes = notes
        before = store.count_papers()
        result = enrich_openreview(store, _sources(fake), VENUE, None, now=time.time())
        right = sum(1 for pid, forum in result.matches.items() if truth.get(pid) == forum)
        wrong = len(result.matches) - right
        titled = sum(1 for p in store.iter_papers() if p.title)
        print(f"seed enrichment on a fake venue of {len(notes):,} notes ({len(seeds)} edited seeds among "
              f"{len(notes) - len(seeds):,} others): {right}/{len(seeds)} matched, {wrong} false "
              f"({result.exact} exact, {result.fuzzy} fuzzy); papers {before} -> {store.count_papers()}, "
              f"{titled} with titles")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=5000)
    ap.add_argument("--model", default="all-MiniLM-L6-v2")
    ap.add_argument("--encoder", default="onnx", choices=("onnx", "torch"),
                    help="PAPERCLUB_QUERY_ENCODER: onnx (the bot's default: papers through ONNX Runtime too) or torch")
    ap.add_argument("--skip-speed", action="store_true")
    ap.add_argument("--skip-match", action="store_true")
    args = ap.parse_args()
    if not args.skip_match:
        match(args.n)
    if not args.skip_speed:
        speed(args.n, args.model, args.encoder)


if __name__ == "__main__":
    main()
