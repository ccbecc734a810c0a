"""Fresh papers: harvest throughput against the raw encode rate, and the seed enrichment's match rate.

    .venv/bin/python bench/sources.py [--n 5000] [--model all-MiniLM-L6-v2] [--encoder onnx|torch] [--skip-speed] [--skip-match]
    .venv/bin/python bench/sources.py --flood [--searches 100]
    .venv/bin/python bench/sources.py --limits

Speed: harvest n records from the local fake arXiv API (pages of 1,000, no
politeness wait: it is loopback), parse, ingest and embed into a fresh
database. Prints records/s end to end, the model's raw encode rate on the same
texts in the same run (each paper's text and its three aspects, as ingest
encodes them; papers/s), their ratio (aim >= 0.9), and the peak RSS.

Match: a fake OpenReview venue holding the 38 bundled seed abstracts, lightly
edited (whitespace, LaTeX, one sentence changed), among n others (real ICLR
2024 abstracts, then generated ones). Prints matched/38 and false matches
(aim 38/38, 0 false).

Flood (--flood): the bot as `paperclub run` builds it (its work pool, the real
Bolt app against the local fake Slack, arXiv's real 3 s spacing kept in the
store) receives 18 link_shared events of 5 arXiv links each, then a member
runs `/paper search` --searches times in a row. Prints the search reply time
(dispatch to the reply reaching Slack) p50/p95/max quiet (the max is the
first search, the one that meets the flood head on), during the flood with
unfurls on their own queue (the bot), and during the flood with each
message's unfurl on the commands' work pool (the routing before issue 31);
plus the arXiv requests the flood cost and when its last unfurl went out.
Aim: p95 during the flood <= 2x quiet.

Limits (--limits): a 100 MB arXiv page (chunked, no Content-Length) read
through the Fetcher with its default cap, then read whole by a plain httpx
GET (what the Fetcher did before): the growth of the peak RSS of each. And
a source sending its page 1 byte a second: how long the Fetcher (30 s
deadline set to 3 s) holds on, beside a plain httpx GET with a 3 s timeout
(per read, as before).
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


def flood(searches: int) -> None:
    from dataclasses import replace

    from slack_bolt import BoltRequest
    from slack_sdk import WebClient

    from bot.app import create_app
    from bot.config import Settings
    from bot.deps.build import build_deps
    from bot.later import make_later, work_pool
    from bot.unfurl import unfurl_queue
    from fake_slack import start_fake_slack
    from store import HashingEmbedder, Searcher
    from figures import percentile

    class OnWorkPool:
        """The routing before: each message's unfurl a job on the commands' work pool."""

        bound = 0  # never full: the pool's own queue takes everything

        def __init__(self):
            self.handled: list[int] = []  # one per message: unfurled, or given up on (arXiv can't answer in time)

        def offer(self, item) -> bool:
            deps = item[0]

            def job():
                try:
                    unfurl_queue(threaded=False).offer(item)
                finally:
                    self.handled.append(1)
            deps.later(job)
            return True

    class Counted:
        """Counts the messages handed over, so the searches start once the whole flood is in."""

        def __init__(self, inner):
            self.inner, self.n = inner, 0

        @property
        def bound(self) -> int:
            return self.inner.bound

        def offer(self, item) -> bool:
            taken = self.inner.offer(item)
            self.n += 1
            return taken

    def run(mode: str) -> dict:
        with FakeSources() as src, start_fake_slack() as slack, tempfile.TemporaryDirectory() as tmp:
            src.papers = make_papers(90, seed=4)
            store = open_store(Path(tmp) / "flood.db")
            embedder = HashingEmbedder()
            ingest_paths(store, bundled_sample_paths(), embedder, now=time.time())
            sources = Sources.create(arxiv_api=src.api, arxiv_rss=src.rss, openreview_api=src.url, store=store)
            pool = work_pool()
            settings = Settings(_env_file=None, slack_bot_token="xoxb-bench", slack_app_token="xapp-bench",
                                command="/paper", llm_url=None, db=":memory:", slack_api_url=slack.api_url)
            deps = build_deps(settings, store, Searcher(store, embedder), clock=lambda: datetime.now(timezone.utc),
                              later=make_later(pool), sources=sources)
            on_pool = OnWorkPool() if mode == "work pool" else None
            unfurls = Counted(on_pool or deps.unfurls)
            deps = replace(deps, unfurls=unfurls)
            app = create_app(deps, client=WebClient(token="xoxb-bench", base_url=slack.api_url))
            started = time.monotonic()
            if mode != "quiet":
                for n in range(18):
                    ts = slack.add_message("C1", "listing")
                    links = [{"domain": "arxiv.org", "url": f"https://arxiv.org/abs/{p.arxiv_id}"}
                             for p in src.papers[5 * n : 5 * n + 5]]
                    body = {"type": "event_callback", "token": "t", "team_id": "T1", "api_app_id": "A1",
                            "event_id": f"EvFlood{n}", "event_time": 1,
                            "event": {"type": "link_shared", "channel": "C1", "user": "UFEED", "message_ts": ts,
                                      "unfurl_id": f"C1.{ts}", "source": "conversations_history", "links": links,
                                      "event_ts": ts},
                            "authorizations": [{"team_id": "T1", "user_id": "UBOT", "is_bot": True}]}
                    app.dispatch(BoltRequest(body=body, mode="socket_mode"))
                slack.wait_for(lambda: unfurls.n >= 18, timeout=60)  # every event claimed and handed over
            times = []
            for i in range(searches):
                url = slack.new_response_url(channel="C1", user="U1")
                body = {"command": "/paper", "text": "search video", "user_id": "U1", "user_name": "u1",
                        "channel_id": "C1", "channel_name": "general", "team_id": "T1", "api_app_id": "A1",
                        "response_url": url, "trigger_id": f"1.2.{i}"}
                t0 = time.perf_counter()
                app.dispatch(BoltRequest(body=body, mode="socket_mode"))
                slack.wait_for(lambda url=url: slack.responses(url), timeout=600)
                times.append(time.perf_counter() - t0)
            if on_pool is not None:  # each message's job ends unfurled or given up on
                slack.wait_for(lambda: len(on_pool.handled) >= 18, timeout=600)
            elif mode != "quiet":
                slack.wait_for(lambda: len(slack.unfurls()) >= 18, timeout=600)
            done = time.monotonic() - started
            pool.shutdown(wait=True)
            sources.close()
            store.close()
            return {"p50": percentile(times, 50), "p95": percentile(times, 95), "max": max(times), "requests": len(src.calls("/api/query")),
                    "unfurls": len(slack.unfurls()), "done": done}

    quiet = run("quiet")
    print(f"flood: 18 messages x 5 arXiv links, arXiv spacing 3 s; /paper search x{searches} in a row")
    print(f"  quiet:                          reply p50 {quiet['p50'] * 1000:7.0f} ms  p95 {quiet['p95'] * 1000:7.0f} ms  "
          f"max {quiet['max'] * 1000:7.0f} ms")
    for mode in ("unfurl queue", "work pool"):
        r = run(mode)
        label = "flood, unfurls on their queue:" if mode == "unfurl queue" else "flood, unfurls on work pool:"
        print(f"  {label:31s} reply p50 {r['p50'] * 1000:7.0f} ms  p95 {r['p95'] * 1000:7.0f} ms  "
              f"max {r['max'] * 1000:7.0f} ms (p95 {r['p95'] / quiet['p95']:.1f}x, max {r['max'] / quiet['max']:.1f}x "
              f"quiet); {r['requests']} arXiv requests, "
              f"{r['unfurls']} of 18 messages unfurled, all handled after {r['done']:.1f} s")


def limits() -> None:
    import httpx

    from store.sources.http import SourceError

    def peak_mb() -> float:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    with FakeSources() as fake:
        fetcher = Fetcher(retries=0)
        fake.fail("/api/query", size=100_000_000)
        start = peak_mb()
        try:
            fetcher.get(fake.api)
            ours = "read"
        except SourceError as e:
            ours = str(e).split(": ", 1)[-1]
        capped = peak_mb() - start
        fake.fail("/api/query", size=100_000_000)
        start = peak_mb()
        whole = len(httpx.get(fake.api, timeout=30).content)
        plain = peak_mb() - start
        print(f"100 MB page: Fetcher (cap {fetcher.max_bytes / 1e6:.0f} MB): peak RSS +{capped:.0f} MB, {ours}; "
              f"plain httpx GET: +{plain:.0f} MB, read {whole / 1e6:.0f} MB")
        fake.papers = make_papers(1)
        body = len(fake._api({"id_list": fake.papers[0].arxiv_id}))
        drip = 20.0 / body  # the whole page in 20 s, each byte well within any per-read timeout
        fake.fail("/api/query", drip=drip)
        fetcher = Fetcher(retries=0, timeout=3.0)
        t0 = time.monotonic()
        try:
            fetcher.get(fake.api, {"id_list": fake.papers[0].arxiv_id})
        except SourceError:
            pass
        ours_s = time.monotonic() - t0
        fake.fail("/api/query", drip=drip)
        t0 = time.monotonic()
        httpx.get(fake.api, params={"id_list": fake.papers[0].arxiv_id}, timeout=3.0)
        plain_s = time.monotonic() - t0
        print(f"a page dripped over 20 s: Fetcher (3 s deadline) gave up after {ours_s:.1f} s; "
              f"plain httpx GET (3 s timeout per read) held on {plain_s:.1f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=5000)
    ap.add_argument("--model", default="all-MiniLM-L6-v2")
    ap.add_argument("--encoder", default="onnx", choices=("onnx", "torch"),
                    help="PAPERCLUB_QUERY_ENCODER: onnx (the bot's default: papers through ONNX Runtime too) or torch")
    ap.add_argument("--skip-speed", action="store_true")
    ap.add_argument("--skip-match", action="store_true")
    ap.add_argument("--flood", action="store_true", help="only the unfurl flood (search replies during it)")
    ap.add_argument("--searches", type=int, default=100)
    ap.add_argument("--limits", action="store_true", help="only the size cap and deadline figures")
    args = ap.parse_args()
    if args.flood:
        return flood(args.searches)
    if args.limits:
        return limits()
    if not args.skip_match:
        match(args.n)
    if not args.skip_speed:
        speed(args.n, args.model, args.encoder)


if __name__ == "__main__":
    main()
