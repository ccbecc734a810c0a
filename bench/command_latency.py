"""How long each `/paper` subcommand takes to answer at 10k papers, through the bot's own command path.

    PYTHONPATH=$PWD HF_HUB_OFFLINE=1 .venv/bin/python bench/command_latency.py [--papers 10000] [--days 90]
        [--runs 5] [--arrivals 5] [--db DIR] [--only search,today,...] [--profile NAME] [--build-only]

The library is bench/pick_speed.py's (the eval datasets' records, repeated with a variant mark up to
`--papers`; two records are duplicates, so 9,998 papers), ingested with the real model's paper and
aspect vectors. Each distinct text is encoded once: a variant gets its original's vectors, perturbed
(cosine about 0.97), and texts bench/picks.py already encoded are read from its stores. On a copy of
it a channel is set up as it lives: three members add five interests by `/paper interests add`, it
follows two feeds (arXiv cs.LG, OpenReview ICLR 2024) that announced 38 papers a day, and `--days`
daily posts are made (the bot's pick and runners-up, reactions through the reaction handler, For me
/ Not for me on runners-up, saves); a reading group of five meets weekly over those days
(nominations, votes, its posts made by the club's own tick against the fake Slack). Both are built
once in DIR (default: the temp dir's paperclub-commands) and reused.

The timing runs on a fresh copy of the channel, in one process as the bot is: its deps built as
`paperclub run` builds them (the ONNX query encoder behind the batching embedder, the searcher
warmed, one BLAS thread), Slack the fake, the clock at 11:00 on the day of the last post. Each
command is called through `bot.commands.run_command` (what the Slack listener and the console call
after the ack) `--runs` times in a row, each run with other words or another paper where it takes
one (no cache of an earlier run answers it); the App Home, a calibration round's verdict button and
a runner-up's go through their handlers. Prints median, max and the first run (which pays what the
process had not made yet) in ms, and how many Slack Web API calls each run made: the fake answers
at once, Slack takes a round trip each. `--arrivals N` then times each command again right after N
new papers arrive (a harvest before each run), when the library-wide values the pick keeps per
library version are made again. `--profile NAME` prints the cProfile of that command's runs instead.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from contextlib import closing
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))

import numpy as np  # noqa: E402
from pick_speed import library_file  # noqa: E402

from store import ingest_paths, make_embedder, open_store  # noqa: E402
from store.backends.shared_papers import as_vector  # noqa: E402
from store.embed import DEFAULT_MODEL  # noqa: E402
from store.ingest import embed_text  # noqa: E402

EVAL = ROOT.parent / "shared" / "eval"
SOURCES = [EVAL / "iclr2024.jsonl", EVAL / "neurips2023.jsonl"]
PICKS_CACHE = Path(tempfile.gettempdir()) / "paperclub-bench"  # bench/picks.py's stores, real vectors
_VARIANT = re.compile(r" \(variant \d+\)(?=\. )| This is variant \d+ of the study\.$")


class ReusingEmbedder:
    """The real model, each distinct text encoded once: a variant's text (pick_speed.library_file's
    marks) gets its original's vector, perturbed (cosine about 0.97) so variants are neighbours and
    not copies; texts bench/picks.py already encoded are read from its stores."""

    def __init__(self, model):
        self.model, self.name, self.memo = model, model.name, {}
        for path in sorted(PICKS_CACHE.glob("picks-*.db")):
            with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
                for title, abstract, blob in db.execute(
                        "select p.title, p.abstract, e.vector from papers p join embeddings e "
                        "on e.paper_id = p.id and e.content_hash = p.content_hash where e.model = ?", [self.name]):
                    self.memo[embed_text({"title": title, "abstract": abstract})] = as_vector(blob)

    @property
    def dim(self) -> int:
        return self.model.dim

    def encode(self, texts, *, progress: bool = False) -> np.ndarray:
        bases = [_VARIANT.sub("", t) for t in texts]
        todo = list(dict.fromkeys(b for b in bases if b not in self.memo))
        if todo:
            self.memo.update(zip(todo, self.model.encode(todo)))
        out = np.stack([self.memo[b] for b in bases]).astype(np.float32)
        for i, (t, b) in enumerate(zip(texts, bases)):
            if t != b:
                rng = np.random.default_rng(int(hashlib.sha1(t.encode()).hexdigest()[:8], 16))
                v = out[i] + rng.normal(0, 0.0128, out.shape[1]).astype(np.float32)
                out[i] = v / np.linalg.norm(v)
        return out


def build_library(path: Path, n: int) -> None:
    """`n` papers with the real model's paper and aspect vectors, in a SQLite file at `path`."""
    if path.exists():
        return
    partial = path.with_suffix(".partial.db")
    for old in path.parent.glob(partial.name + "*"):
        old.unlink()
    store = open_store(partial)
    t = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        result = ingest_paths(store, [library_file(SOURCES, n, Path(tmp))],
                              ReusingEmbedder(make_embedder(DEFAULT_MODEL)), now=LIBRARY_AT.timestamp())
    store.close()
    partial.rename(path)
    print(f"library: {result} in {time.perf_counter() - t:.0f} s -> {path}", file=sys.stderr)


CHANNEL, ADMIN = "C0LATENCY", "U0ANN"
MEMBERS = {  # member -> the interests they add, in their own words
    "U0ANN": ["graph neural networks for molecules", "protein structure prediction"],
    "U0BOB": ["diffusion models for video generation"],
    "U0CY": ["reinforcement learning from human feedback", "evaluation of large language models"],
}
FIVE = [t for topics in MEMBERS.values() for t in topics]
CLUB = ("U0ANN", "U0BOB", "U0CY", "U0DEE", "U0EVE")
LEAVERS = [f"U0GONE{k}" for k in range(10)]  # members who react and save a little, then run forget-me
START = date(2027, 1, 4)  # a Monday: the channel's first day
LIBRARY_AT = datetime(2026, 12, 1, tzinfo=timezone.utc)  # when the library's papers came in: before it
REACTIONS = ("fire", "+1", "heart", "-1", "sleeping", "+1", "eyes")


def bench_deps(store, searcher, clock, fake):
    """The bot's deps as `paperclub run` builds them, over `store`, Slack being the fake."""
    from slack_sdk import WebClient

    from bot.config import Settings
    from bot.deps.build import build_deps

    settings = Settings(_env_file=None, db=str(store), command="/paper", llm_url=None, admins="")
    client = WebClient(token="xoxb-bench", base_url=fake.api_url)
    return build_deps(settings, store, searcher, clock=clock, slack=client), client


def make_searcher(store):
    """The searcher `paperclub run` makes: the ONNX query encoder behind the batching embedder, warmed."""
    from bot.config import Settings
    from bot.runner import BatchingEmbedder, limit_threads
    from store.search import Searcher

    s = Settings(_env_file=None)
    embedder = make_embedder(s.model, bf16=s.embed_bf16, query_encoder=s.query_encoder, onnx_dir=s.onnx_cache_dir)
    searcher = Searcher(store, BatchingEmbedder(embedder), exact_limit=s.exact_limit, graph_dtype=s.graph_dtype)
    searcher.warm()
    if hasattr(embedder, "wait_for_queries"):  # the first start exports the ONNX graph: queries wait for it
        embedder.wait_for_queries()
    limit_threads()
    return searcher


def build_channel(library: Path, path: Path, days: int) -> None:
    """A copy of the library with a channel that has lived `days` days (module docstring)."""
    if path.exists():
        return
    from bot.club import club_tick
    from bot.club.posts import _moments
    from bot.commands import run_command
    from bot.reactions import handle_reaction_added, record_verdict
    from fake_slack import start_fake_slack
    from picks import BOT, Clock, reaction_payload
    from store import pick_for_day
    from store.club import ClubError, ClubSpec, cast_vote, nominate, session_starts, set_club

    partial = path.with_suffix(".partial.db")
    shutil.copy(library, partial)
    t = time.perf_counter()
    rng = random.Random(7)
    store = open_store(partial)
    searcher = make_searcher(store)
    clock = Clock()
    begin = datetime.combine(START, datetime.min.time(), timezone.utc)
    clock.now = begin - timedelta(days=1)
    ids = [p.id for p in store.iter_papers()]
    with start_fake_slack() as fake:
        deps, client = bench_deps(store, searcher, clock, fake)

        def say(user: str, text: str) -> None:
            run_command(deps, user, text, channel_id=CHANNEL)

        say(ADMIN, "schedule 09:00 UTC daily")
        for member, topics in MEMBERS.items():
            for topic in topics:
                say(member, f"interests add {topic}")
        for kind, target in (("arxiv", "cs.LG"), ("openreview", "ICLR.cc/2024/Conference")):
            store.add_feed(CHANNEL, kind, target, ADMIN, now=clock.now.timestamp())
        # The feeds announced papers over the days: 30 a day on arXiv, 8 on OpenReview, each at 00:01 UTC.
        order = rng.sample(ids, len(ids))
        announced = []
        for d in range(days + 8):
            at = (begin + timedelta(days=d, minutes=1)).timestamp()
            announced += [(pid, "arxiv", at) for pid in order[38 * d: 38 * d + 30]]
            announced += [(pid, "openreview", at) for pid in order[38 * d + 30: 38 * d + 38]]
        store.mark_announced(announced)
        spec = set_club(store, CHANNEL, ClubSpec(3, 17, 0, "Europe/Berlin", lead_hours=72, cutoff_hours=24),
                        by=ADMIN, now=clock.now)
        for m in CLUB:
            store.set_club_member(CHANNEL, m, active=True, now=clock.now.timestamp())

        events = []  # (when, order, what): the days and the club's sessions, run in time order
        for d in range(days + 1):
            events.append((begin + timedelta(days=d, hours=9), 0, ("post", d)))
        for s in session_starts(spec, clock.now, count=days // 7 + 2):
            moments = _moments(spec, s)
            events.append((moments["agenda"] - timedelta(hours=20), 1, ("nominate", s)))
            events.append((moments["agenda"] + timedelta(hours=2), 1, ("vote", s)))
            events += [(at + timedelta(minutes=1), 2, ("tick", s)) for at in moments.values()]
        end = begin + timedelta(days=days, hours=10)
        posts = reactions = verdicts = 0
        for when, _, (what, arg) in sorted(events, key=lambda e: (e[0], e[1])):
            if when > end:
                break
            clock.now = when
            if what == "tick":
                club_tick(deps, client, when, budget=20, sleep=lambda s: None)
            elif what == "nominate":
                for _ in range(rng.randint(0, 3)):
                    try:
                        nominate(store, CHANNEL, rng.choice(ids), rng.choice(CLUB), when)
                    except ClubError:
                        pass
            elif what == "vote":
                cands = [n["paper_id"] for n in store.nominations(CHANNEL, arg.date().isoformat())]
                for m in CLUB:
                    for pid in rng.sample(cands, k=min(len(cands), rng.randint(1, 3))):
                        cast_vote(store, CHANNEL, arg.date(), m, pid, when)
            else:  # the day's post, then what the members do with it during the day
                day = START + timedelta(days=arg)
                pick = pick_for_day(store, searcher, CHANNEL, day, feedback=deps.feedback, settings=deps.pick)
                at = when.timestamp()
                ts = f"{at:.6f}"
                store.claim_post(CHANNEL, day.isoformat(), claimer="bench", paper_id=pick.paper_id,
                                 pick=pick.to_dict(), now=at)
                store.finish_post(CHANNEL, day.isoformat(), claimer="bench", ts=ts, now=at, claimed_at=at)
                posts += 1
                if arg == days:
                    break  # today's post is out; the timed commands come after it
                for n, member in enumerate([*MEMBERS, rng.choice(LEAVERS)]):
                    if rng.random() < 0.8:
                        emoji = rng.choice(REACTIONS)
                        clock.now = when + timedelta(minutes=10 * (n + 1))
                        handle_reaction_added(deps, reaction_payload(CHANNEL, ts, member, emoji,
                                                                     clock.now.timestamp(), f"Ev{arg:03d}{n}"),
                                              bot_user_id=BOT)
                        reactions += 1
                for c in pick.shown:  # For me / Not for me on the runners-up, mostly by whom each was for
                    who = c.member if c.member and rng.random() < 0.7 else rng.choice(list(MEMBERS))
                    if rng.random() < 0.5:
                        clock.now = when + timedelta(hours=1, minutes=rng.randint(0, 300))
                        record_verdict(deps, who, CHANNEL, c.paper_id, rng.choice(("more", "less")),
                                       message_ts=ts, press=f"{clock.now.timestamp():.6f}")
                        verdicts += 1
                for member in [*MEMBERS, rng.choice(LEAVERS)]:
                    if rng.random() < 0.25:
                        store.save_paper(member, rng.choice([pick.paper_id, *(c.paper_id for c in pick.shown)]),
                                         now=when.timestamp() + 3600)
    sessions = sum(1 for r in store.club_sessions(CHANNEL) if r["state"] == "held")
    store.close()
    partial.rename(path)
    print(f"channel: {posts} daily posts, {reactions} reactions, {verdicts} verdicts on runners-up, "
          f"{sessions} club sessions held, in {time.perf_counter() - t:.0f} s -> {path}", file=sys.stderr)


class Runs:
    """What the timed commands act on: each run its own words and papers, so no earlier run's cache answers."""

    def __init__(self, store, runs: int):
        from ack_latency import queries

        rng = random.Random(11)
        papers = store.get_papers(rng.sample([p.id for p in store.iter_papers()], 12 * runs))
        self.papers = [papers[k::12] for k in range(12)]  # 12 disjoint lists of `runs` papers
        self.queries = queries(4 * runs)
        self.topics = ["sparse attention for long documents", "causal inference with neural networks",
                       "federated learning privacy", "neural radiance fields", "speech recognition in noise",
                       "tabular data deep learning", "time series forecasting", "robot manipulation policies"]


def cases(deps, clock, runs: Runs) -> list[tuple]:
    """(name, one run's call[, what it needs first, what undoes it after]: untimed, None for nothing) for
    every subcommand (the console's typed forms) and the cheap button paths."""
    from bot import blocks as bk
    from bot.calibrate import calibrate_reply
    from bot.commands import run_command
    from bot.home import home_blocks
    from bot.reactions import handle_verdict
    from picks import action_payload, verdict_cards

    def say(text: Callable[[int], str], user: str | Callable[[int], str] = "U0ANN"):
        return lambda r: run_command(deps, user(r) if callable(user) else user, text(r),
                                     channel_id=CHANNEL).to_message()

    p = runs.papers
    words = lambda paper: " ".join(paper.title.split()[:6])  # noqa: E731

    def preview(r: int):  # before the post of a day to come: the pick is made for the preview
        now = clock.now
        clock.now = datetime.combine(now.date() + timedelta(days=1 + r), datetime.min.time(), timezone.utc)
        try:
            return run_command(deps, "U0BOB", "today", channel_id=CHANNEL).to_message()
        finally:
            clock.now = now

    def button(r: int, paper_id: str, block_id: str, verdict: str):
        said = []
        body, action = action_payload(CHANNEL, f"{clock.now.timestamp():.6f}", "U0CY", block_id,
                                      {"action_id": bk.ACTION_MORE if verdict == "more" else bk.ACTION_LESS,
                                       "text": {"type": "plain_text", "text": verdict}, "value": paper_id},
                                      clock.now.timestamp() + r, ephemeral=True)
        handle_verdict(deps, body, action, verdict, respond=lambda **kw: said.append(kw))
        return said

    rounds = {}

    def open_round(r: int):  # untimed: the round the member then answers
        rounds[r] = calibrate_reply(deps, CHANNEL, "U0CY").to_message()

    def round_press(r: int):  # a press on a calibration round's card: the round redrawn
        block_id, buttons = verdict_cards(rounds[r]["blocks"] or [], bk.CALIB_ACT_BLOCK)[0]
        return button(r, buttons[bk.ACTION_MORE]["value"], block_id, "more")

    def drop_added(r: int):  # untimed: the channel keeps its five interests, whatever the runs add
        for row in deps.store.interests(CHANNEL)[len(FIVE):]:
            deps.store.remove_interest(CHANNEL, row["id"])

    today = deps.store.get_post(CHANNEL, clock.now.date().isoformat())["pick"]
    runner = [c["paper_id"] for c in today["runners_up"]]
    return [
        ("help", say(lambda r: "help")),
        ("help club", say(lambda r: "help club")),
        ("search <words>", say(lambda r: f"search {runs.queries[r]}")),
        ("<words> (no command: a search)", say(lambda r: runs.queries[len(runs.queries) // 2 + r])),
        ("summary <id>", say(lambda r: f"summary {p[0][r].id}")),
        ("summary <words> (a best guess)", say(lambda r: f"summary {words(p[1][r])}")),
        ("similar <id>", say(lambda r: f"similar {p[2][r].id}")),
        ("share <id>", say(lambda r: f"share {p[3][r].id}")),
        ("interests", say(lambda r: "interests")),
        ("interests add <topic>", say(lambda r: f"interests add {runs.topics[r % len(runs.topics)]}",
                                      lambda r: list(MEMBERS)[r % len(MEMBERS)]), None, drop_added),
        ("interests add like <id>", say(lambda r: f"interests add like {p[4][r].id}", "U0BOB"), None, drop_added),
        ("interests remove 1 (asks first)", say(lambda r: "interests remove 1")),
        ("calibrate", say(lambda r: "calibrate", lambda r: list(MEMBERS)[r % len(MEMBERS)])),
        ("calibrate <topic>", say(lambda r: f"calibrate {runs.queries[-1 - r]}", "U0BOB")),
        ("for-me <id>", say(lambda r: f"for-me {p[5][r].id}")),
        ("not-for-me <id>", say(lambda r: f"not-for-me {p[6][r].id}")),
        ("take-back <id>", say(lambda r: f"take-back {p[5][r].id}")),
        ("schedule", say(lambda r: "schedule")),
        ("schedule 09:00 UTC daily", say(lambda r: "schedule 09:00 UTC daily")),
        ("today (posted)", say(lambda r: "today")),
        ("today (a preview: the pick made)", preview),
        ("save <id>", say(lambda r: f"save {p[7][r].id}")),
        ("saved", say(lambda r: "saved")),
        ("digest 7", say(lambda r: "digest 7")),
        ("digest 30", say(lambda r: "digest 30")),
        ("forget-me (asks first)", say(lambda r: "forget-me")),
        ("forget-me confirm", say(lambda r: "forget-me confirm", lambda r: LEAVERS[r % len(LEAVERS)])),
        ("overview <topic>", say(lambda r: f"overview {runs.queries[len(runs.queries) // 4 + r]}")),
        ("add <OpenReview link in the library>", say(lambda r: f"add {p[8][r].url}")),
        ("feed", say(lambda r: "feed")),
        ("feed fresh 14", say(lambda r: "feed fresh 14")),
        ("club", say(lambda r: "club")),
        ("club history", say(lambda r: "club history")),
        ("club join", say(lambda r: "club join")),
        ("club away <date>", say(lambda r: f"club away {(clock.now.date() + timedelta(days=30 + r)).isoformat()}")),
        ("club export", say(lambda r: "club export")),
        ("club map", say(lambda r: "club map")),
        ("nominate <id>", say(lambda r: f"nominate {p[9][r].id}", lambda r: CLUB[r % len(CLUB)])),
        ("App Home (app_home_opened)", lambda r: home_blocks(deps, list(MEMBERS)[r % len(MEMBERS)])),
        ("button: Rate a few papers", lambda r: calibrate_reply(deps, CHANNEL, "U0BOB",
                                                                MEMBERS["U0BOB"][0]).to_message()),
        ("button: For me on a runner-up", lambda r: button(r, runner[r % len(runner)], f"{bk.RUNNER_BLOCK}0-act-x",
                                                            "more" if r % 2 else "less")),
        ("button: For me in a calibration round", round_press, open_round),
    ]


def measure(channel: Path, days: int, runs: int, only: list[str] | None, profile: str | None,
            arrivals: int) -> None:
    """Time each case `runs` times on a fresh copy of the channel; print the table (or one case's profile)."""
    from fake_slack import start_fake_slack
    from picks import Clock

    with tempfile.TemporaryDirectory(prefix="paperclub-commands-") as tmp:
        work = Path(tmp) / "channel.db"
        shutil.copy(channel, work)
        store = open_store(work)
        t = time.perf_counter()
        searcher = make_searcher(store)
        backend = getattr(searcher.embedder.inner, "query_backend", "torch")
        print(f"searcher warmed in {time.perf_counter() - t:.1f} s ({store.count_papers()} papers), queries "
              f"encoded by {backend}", file=sys.stderr)
        clock = Clock()
        clock.now = datetime.combine(START + timedelta(days=days), datetime.min.time(), timezone.utc).replace(hour=11)
        with start_fake_slack() as fake:
            deps, _ = bench_deps(store, searcher, clock, fake)
            table = [(*c, None, None)[:4] for c in cases(deps, clock, Runs(store, 2 * runs))]  # name, call, prepare, undo
            if only:
                table = [c for c in table if any(c[0].startswith(o) for o in only)]
            if profile:
                import cProfile
                import pstats

                name, call, prepare, undo = next(c for c in table if c[0].startswith(profile))
                prof = cProfile.Profile()
                fresh = iter(new_papers())
                for r in range(runs):
                    if arrivals:  # each run right after a harvest, which is not profiled
                        harvest(store, searcher, [next(fresh) for _ in range(arrivals)], clock)
                    timed(lambda r: prof.runcall(call, r), r, prepare, undo)
                print(f"cProfile of {name!r}, {runs} runs" + (f", each after {arrivals} new papers:" if arrivals else ":"))
                pstats.Stats(prof).sort_stats("cumulative").print_stats(45)
                return
            print(f"/paper at {store.count_papers():,} papers, {runs} runs each (ms; first: the first run, "
                  "before any cache of this command is warm):")
            print(f"  {'command':<42} {'median':>8} {'max':>8} {'first':>8}  Slack Web API calls per run (the fake's "
                  "answer is local; Slack's takes a round trip)")
            for name, call, prepare, undo in table:
                calls = len(fake.calls())
                ms = [timed(call, r, prepare, undo) for r in range(runs)]
                slow = " *" if statistics.median(ms) > 300 else "  "
                api = (len(fake.calls()) - calls) / runs
                print(f"  {name:<42} {statistics.median(ms):8.0f} {max(ms):8.0f} {ms[0]:8.0f}{slow}"
                      + (f" {api:g}" if api else ""), flush=True)
            if arrivals:
                print(f"Right after {arrivals} new papers arrive (a feed's harvest; what the library's caches hold is "
                      f"made again), {runs} runs each, a harvest before each (ms):")
                print(f"  {'command':<42} {'median':>8} {'max':>8}")
                fresh = iter(new_papers())
                for name, call, prepare, undo in table:
                    ms = []
                    for r in range(runs, 2 * runs):  # the runs' second half of words and papers
                        harvest(store, searcher, [next(fresh) for _ in range(arrivals)], clock)
                        ms.append(timed(call, r, prepare, undo))
                    slow = " *" if statistics.median(ms) > 300 else ""
                    print(f"  {name:<42} {statistics.median(ms):8.0f} {max(ms):8.0f}{slow}", flush=True)
        store.close()


def timed(call, r: int, prepare=None, undo=None) -> float:
    """Milliseconds `call(r)` took, `prepare(r)` before it and `undo(r)` after it untimed."""
    if prepare:
        prepare(r)
    t = time.perf_counter()
    call(r)
    took = 1000 * (time.perf_counter() - t)
    if undo:
        undo(r)
    return took


def new_papers():
    """SciTLDR's abstracts (ICLR 2018-2020, none in the library), as a feed would bring them."""
    from store import Record

    for split in ("dev", "train"):
        for line in (EVAL / "scitldr" / f"{split}.jsonl").open():
            r = json.loads(line)
            yield Record(" ".join(r["source"]), title=r.get("title") or None, id=f"scitldr-{r['paper_id']}",
                         venue="ICLR", year=2020)


def harvest(store, searcher, records: list, clock) -> None:
    """Ingest `records` with the bot's embedder and announce them on arXiv now, as a feed's poll does."""
    from store import ingest_records

    before = set(searcher.index().ids)
    ingest_records(store, records, searcher.embedder, now=clock.now.timestamp())
    store.mark_announced([(pid, "arxiv", clock.now.timestamp()) for pid in searcher.index().ids if pid not in before])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--papers", type=int, default=10_000)
    ap.add_argument("--days", type=int, default=90, help="days the channel lived before the timing")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--db", type=Path, default=Path(tempfile.gettempdir()) / "paperclub-commands",
                    help="where the library and the channel are kept between runs")
    ap.add_argument("--only", default="", help="commas: time only the commands starting with these")
    ap.add_argument("--profile", default=None, help="the cProfile of this command's runs instead of the table")
    ap.add_argument("--arrivals", type=int, default=5,
                    help="then time each command again right after this many new papers arrive (0: not)")
    ap.add_argument("--build-only", action="store_true", help="make the library and the channel, time nothing")
    args = ap.parse_args()
    args.db.mkdir(parents=True, exist_ok=True)
    library = args.db / f"library-{args.papers}.db"
    channel = args.db / f"channel-{args.papers}-{args.days}.db"
    build_library(library, args.papers)
    build_channel(library, channel, args.days)
    if not args.build_only:
        measure(channel, args.days, args.runs, [o.strip() for o in args.only.split(",") if o.strip()], args.profile,
                args.arrivals)


if __name__ == "__main__":
    main()
