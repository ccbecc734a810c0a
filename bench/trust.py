"""Issue 31's trust figures, printed after (and compared with the issue's "before"):

    .venv/bin/python bench/robustness.py --trust      # all four; both backends for forget-me
    .venv/bin/python bench/robustness.py --trust --trust-only hostile,forget,dst,feeds,votes

- hostile: Slack commands that once ended in the generic apology or stored nonsense (Unicode
  digits in every numbered command, math-like interests on the club map, hostile titles in the
  club export, malformed feeds, case-twins of a category), through the real Bolt app and the fake
  Slack: answered without the apology, and feeds stored that should not have been.
- forget: a member who added a feed, set up a club and was chosen presenter (so was DMed) runs
  forget-me; cells of every table, log lines and a restored backup that still name them.
- dst: a Monday 02:30 club in Berlin, New York and Sydney, ticked every 30 minutes through the
  three weeks around each 2026 transition night: club posts lost or doubled.
- feeds: a sweep of three feeds whose first answers JSON nested too deep and the second a list
  where an object belongs: how many feeds after a bad one still asked their source and kept state.

- votes: /paper search replies quiet and right after 12 Vote clicks while chat.update takes 3 s,
  on the bot's work pool: p50/p95, and how many chat.update calls the burst cost. (Timed.)

The search-reply figures under an unfurl flood and the 100 MB page's peak RSS are bench/sources.py
--flood and --limits.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import tempfile
import time
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

UTC = timezone.utc
BEFORE = {  # what issue 31 reported, measured on the code before its fixes
    "hostile inputs answered with the generic apology": "feed fresh ³, feed remove ², club map with $…$ (3 of 3)",
    "invalid feeds stored": "openreview a/b/../../c, cs.XYZ, cs.lg beside cs.LG (3 of 3)",
    "forget-me traces": "feeds.added_by, clubs.set_by, the presenter claim key, its INFO log line; all kept by a restore",
    "club posts lost across DST": "the 2 Nov session's posts (Monday 02:30 Berlin, 30 Oct - 10 Nov)",
    "feeds after a bad one that ran": "0 (the good feed after it got 0 requests, no state recorded)",
    "search reply during 12 votes with a 3 s chat.update": "9.1 s (0.2 s quiet); 12 chat.update calls",
}


class _Lines(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def _seeded(tmp: Path) -> Path:
    from conftest import _seed
    from store import HashingEmbedder

    return _seed(tmp / "seed.db", HashingEmbedder())


def _world(store, fake, **settings):
    from bot.app import create_app
    from conftest import Clock, make_deps, make_settings
    from store import HashingEmbedder, Searcher

    deps = make_deps(make_settings(slack_api_url=fake.api_url, **settings), store,
                     Searcher(store, HashingEmbedder()), clock=Clock(datetime(2026, 11, 30, 8, tzinfo=UTC)))
    return create_app(deps, process_before_response=True), deps


# -- hostile inputs ---------------------------------------------------------------------------------
NOT_ASCII_DIGITS = ["²", "³", "①", "⑩", "１", "２３", "٣", "۷", "१", "௫", "๓", "𝟐", "Ⅳ", "½", "2²", "#²", "\u00a0²"]


def hostile(tmp: Path) -> dict:
    from bot.later import SORRY
    from bot.deps.build import command_table
    from conftest import dispatch_command, text_of
    from fake_slack import start_fake_slack
    from store import HashingEmbedder, Record, ingest_records, open_store
    from store.club import ClubSpec, set_club

    import re

    numbered = []
    for sub in command_table().values():
        for m in re.finditer(r"(\w+ )?[<\[](?:n|days)[>\]]", sub.usage):
            verb = (m.group(1) or "").strip()
            numbered.append(f"{sub.name} {verb} " if verb and verb != sub.name else f"{sub.name} ")
    store = open_store(shutil.copy(_seeded(tmp), tmp / "hostile.db"))
    with start_fake_slack() as fake:
        app, deps = _world(store, fake)
        fake.add_members("UANN")
        fake.add_channel("C1")
        lines = [n + d for n in numbered for d in NOT_ASCII_DIGITS] + ["schedule ０９:００", "schedule ³:00"]
        lines += ["feed add openreview a/b/../../c", "feed add arxiv cs.XYZ", "feed add arxiv cs.LG",
                  "feed add arxiv cs.lg", "feed add openreview ICLR.cc/../../admin"]
        set_club(store, "C1", ClubSpec(3, 17, 0, "Europe/Berlin", lead_hours=48, cutoff_hours=24), by="UANN",
                 now=datetime(2026, 11, 30, tzinfo=UTC))
        store.set_club_member("C1", "UANN", active=True, now=0)
        titles = ["Bib}, author = {Mallory}, note = {x", "\u00a0=HYPERLINK(\"http://evil\")", "\u200b+1+1"]
        ingest_records(store, [Record(abstract=f"We study hostile reading lists, case {i}. A spreadsheet and a "
                                               "bibliography manager must show them as the text they are.",
                                      title=t, authors=["\ufeff-2", "Ann"], source="bench", line=i + 1)
                               for i, t in enumerate(titles)], HashingEmbedder(), now=0)
        for i, p in enumerate(p for p in store.iter_papers() if "hostile reading" in p.abstract):
            store.put_club_session("C1", f"2026-11-{2 + 7 * i:02d}", state="held", paper_id=p.id, presenter="UANN",
                                   now=0)
        lines += ["interests add $\\frac{1}{$ bounds", "interests add costs $5 or $", "club map", "club export"]
        apologies = []
        for line in lines:
            if SORRY in text_of(dispatch_command(app, fake, line, user="UANN", channel="C1")):
                apologies.append(line)
        feeds = [f["target"] for f in store.feeds("C1")]
        exported = {u["filename"]: u["content"].decode() for u in fake.uploads().values()
                    if u["filename"].startswith("reading-group.")}
    store.close()
    bib = exported.get("reading-group.bib", "")
    import csv
    import io
    import unicodedata

    def visible(cell: str) -> str:  # what a spreadsheet starts reading at
        return cell.lstrip("".join(c for c in cell[:8] if c.isspace() or unicodedata.category(c)[0] in "CZ"))

    runnable = sum(1 for row in csv.reader(io.StringIO(exported.get("reading-group.csv", "")))
                   for cell in row if visible(cell)[:1] and visible(cell)[:1] in "=+-@")
    return {"hostile inputs": len(lines), "answered with the generic apology": len(apologies),
            "apologised for": apologies[:5],
            "invalid feeds stored": [t for t in feeds if t != "cs.LG"],
            "feeds stored for cs.LG typed twice": feeds.count("cs.LG"),
            "BibTeX fields injected (author = Mallory)": bib.count("author = {Mallory}"),
            "CSV cells a spreadsheet would run": runnable}


# -- forget-me ------------------------------------------------------------------------------------
def forget(tmp: Path, backend: str) -> dict:
    from bot.club import club_tick
    from conftest import PG_SERVER, dispatch_command, text_of
    from fake_slack import start_fake_slack
    from store import migrate_store, open_store
    from store.club import ClubSpec, set_club
    from test_forget import _restore, _snapshot, traces

    dan, ch = "UDAN", "C1"
    admin = None
    if backend == "sqlite":
        url = str(shutil.copy(_seeded(tmp), tmp / "forget.db"))
    else:
        import psycopg

        name = f"paperclub_bench_{os.getpid()}"
        admin = psycopg.connect(f"{PG_SERVER}/postgres", autocommit=True, connect_timeout=3)
        admin.execute(f'drop database if exists "{name}" with (force)')
        admin.execute(f'create database "{name}"')
        url = f"{PG_SERVER}/{name}"
        migrate_store(str(_seeded(tmp)), url)
    logs = _Lines()
    root = logging.getLogger()
    root.addHandler(logs)
    old_level = root.level
    root.setLevel(logging.INFO)
    store = open_store(url)
    try:
        with start_fake_slack() as fake:
            app, deps = _world(store, fake, admins=dan)
            fake.add_members(dan, "UANN")
            fake.add_channel(ch)
            monday = datetime(2026, 11, 30, 8, tzinfo=UTC)
            dispatch_command(app, fake, "feed add arxiv cs.LG", user=dan, channel=ch)
            set_club(store, ch, ClubSpec(3, 17, 0, "Europe/Berlin", lead_hours=48, cutoff_hours=24), by=dan,
                     now=monday)
            store.set_club_member(ch, dan, active=True, now=monday.timestamp())
            winner_at = datetime(2026, 12, 2, 16, 1, tzinfo=UTC)
            for at in (winner_at - timedelta(hours=24), winner_at):
                deps.clock.now = at
                club_tick(deps, deps.slack, at, sleep=lambda s: None, budget=30)
            backup = _snapshot(store, tmp)
            before = len(traces(store, dan))
            # It asks first (bot/confirm.py) and deletes nothing until confirmed.
            asked = text_of(dispatch_command(app, fake, "forget-me", user=dan, channel=ch))
            asked_first = len(traces(store, dan)) == before and "Done." not in asked
            answer = text_of(dispatch_command(app, fake, "forget-me confirm", user=dan, channel=ch))
            after = traces(store, dan)
            store = _restore(store, backup, url)
            restored = traces(store, dan)
    finally:
        store.close()
        root.removeHandler(logs)
        root.setLevel(old_level)
        if admin is not None:
            admin.execute(f'drop database if exists "{name}" with (force)')
            admin.close()
    return {"cells naming the member before": before, "asked first, nothing deleted": asked_first,
            "forget-me confirm answered": "Done." in answer,
            "cells after": len(after), "log lines read": len(logs.lines),
            "log lines naming the member": sum(dan in line for line in logs.lines),
            "cells after restoring an earlier backup": len(restored),
            "where": (after + restored)[:3]}


# -- daylight saving --------------------------------------------------------------------------------
def dst(tmp: Path) -> dict:
    from bot.club import STEPS, club_tick
    from bot.posting import SCHEDULED_EVENT
    from fake_slack import start_fake_slack
    from store import open_store
    from store.club import ClubSpec, session_starts, set_club
    from test_dst import ZONES, transition_days

    seed = _seeded(tmp)
    out = {}
    for zone in ZONES:
        for night in transition_days(zone):
            store = open_store(shutil.copy(seed, tmp / "dst.db"))
            with start_fake_slack() as fake:
                start = datetime.combine(night - timedelta(days=8), datetime.min.time(), UTC)
                end = start + timedelta(days=21)
                app, deps = _world(store, fake)
                set_club(store, "C1", ClubSpec(0, 2, 30, zone, lead_hours=48, cutoff_hours=24), by="U0", now=start)
                fake.add_members("UANN", "UBOB")
                fake.add_channel("C1")
                for m in ("UANN", "UBOB"):
                    store.set_club_member("C1", m, active=True, now=start.timestamp())
                at = start
                while at < end:
                    deps.clock.now = at
                    for step, _day, result in club_tick(deps, deps.slack, at, sleep=lambda s: None, budget=30):
                        if step == "thread" and result.ts:
                            fake.add_message("C1", "Why does it work?", user="UANN", thread_ts=result.ts)
                    at += timedelta(minutes=30)
                posted: dict[str, list[str]] = {}
                for m in fake.messages("C1"):
                    meta = m.get("metadata") or {}
                    if meta.get("event_type") == SCHEDULED_EVENT:
                        key = meta["event_payload"]["key"]
                        posted.setdefault(key.split(":")[1], []).append(meta["event_payload"]["kind"])
            store.close()
            spec = ClubSpec(0, 2, 30, zone, lead_hours=48, cutoff_hours=24)
            # sessions whose whole cycle (agenda 48 h before, recap the day after) lies in the window
            whole = [s.date().isoformat() for s in session_starts(spec, start + timedelta(days=2), count=4)
                     if s + timedelta(days=1) < end]
            lost = sum(len(set(STEPS) - set(posted.get(day, []))) for day in whole)
            doubled = sum(len(kinds) - len(set(kinds)) for kinds in posted.values())
            out[f"{zone} {night}"] = {"sessions": len(whole), "posts lost": lost, "posts doubled": doubled}
    return {"nights": out, "posts lost": sum(v["posts lost"] for v in out.values()),
            "posts doubled": sum(v["posts doubled"] for v in out.values())}


# -- one bad feed -----------------------------------------------------------------------------------
def feeds(tmp: Path) -> dict:
    from fake_sources import FakeSources, make_papers, on_openreview
    from store import HashingEmbedder, open_store
    from store.sources import Sources, poll_feeds

    store = open_store(shutil.copy(_seeded(tmp), tmp / "feeds.db"))
    with FakeSources() as src:
        src.notes = on_openreview(make_papers(3, seed=4), venueid="Good.cc/2026/Conference")
        sources = Sources.create(arxiv_api=src.api, arxiv_rss=src.rss, openreview_api=src.url, sleep=lambda s: None)
        deep = "[" * 100_000 + "]" * 100_000
        targets = ["A-deep.cc/2026/Conference", "B-list.cc/2026/Conference", "Good.cc/2026/Conference"]
        for t in targets:
            store.add_feed("C1", "openreview", t, "U1", now=0)
        src.fail("/notes", 200, times=1, body=deep)
        src.fail("/notes", 200, times=1, body=json.dumps({"notes": [[1, 2]], "count": "x"}))
        try:
            result = poll_feeds(store, sources, HashingEmbedder(), now=time.time())
            escaped = None
        except BaseException as e:  # noqa: BLE001 - the figure is whether anything escapes
            result, escaped = {}, f"{type(e).__name__}"
        asked = {t: sum(1 for q in src.calls("/notes") if q.get("content.venueid") == t) for t in targets}
        states = {t: bool(store.source_state(f"openreview:{t}")) for t in targets}
        sources.close()
    store.close()
    return {"feeds": len(targets), "escaped the sweep": escaped,
            "results": {t: result.get(("openreview", t)) for t in targets},
            "feeds after a bad one that asked their source": sum(1 for t in targets[1:] if asked[t]),
            "feeds with state recorded": sum(states.values())}


# -- a vote burst with a slow chat.update --------------------------------------------------------------
def votes(tmp: Path, rounds: int = 3, voters: int = 12, update_seconds: float = 3.0) -> dict:
    """/paper search sent right behind `voters` Vote clicks, while Slack takes `update_seconds` per
    chat.update: every event handled on a 4-thread claim pool as Socket Mode delivers them, and slow
    work on the bot's work pool (as `paperclub run` builds it). Reply time from the search's arrival
    to its answer. (The Vote path before issue 31's item 3, chat.update inline on the claim thread,
    is gone from the code, so its figure is the issue's: 9.1 s.)"""
    from concurrent.futures import ThreadPoolExecutor

    from slack_bolt import BoltRequest
    from slack_sdk import WebClient

    from bot import blocks as bk
    from bot.app import create_app
    from bot.club import post_agenda
    from bot.later import make_later, work_pool
    from conftest import BOT_TOKEN, dispatch_command, make_deps
    from fake_slack import start_fake_slack
    from figures import percentile
    from store import open_store
    from store.club import ClubSpec, set_club

    store = open_store(shutil.copy(_seeded(tmp), tmp / "votes.db"))
    day = date(2026, 12, 3)
    out: dict = {"votes per burst": voters, "chat.update seconds": update_seconds, "bursts": rounds}
    with start_fake_slack() as fake:
        app, deps = _world(store, fake)
        fake.add_channel("C1")
        set_club(store, "C1", ClubSpec(3, 17, 0, "Europe/Berlin", lead_hours=48, cutoff_hours=24), by="UANN",
                 now=deps.clock())
        store.set_club_member("C1", "UANN", active=True, now=0)
        fake.add_members("UANN", "UBOB")
        papers = list(store.iter_papers())[:2]
        for p in papers:
            dispatch_command(app, fake, f"nominate {p.id}", user="UANN", channel="C1")
        deps.clock.now = datetime(2026, 12, 1, 16, 30, tzinfo=UTC)
        ts = post_agenda(deps, deps.slack, "C1", day)

        def click(app, user, paper_id):
            app.dispatch(BoltRequest(body={
                "type": "block_actions", "user": {"id": user}, "api_app_id": "A1", "team": {"id": "T1"},
                "channel": {"id": "C1"}, "trigger_id": "1.2.3",
                "response_url": fake.new_response_url(channel="C1", user=user),
                "container": {"type": "message", "channel_id": "C1", "message_ts": ts, "is_ephemeral": False},
                "actions": [{"action_id": bk.ACTION_VOTE, "block_id": "b", "value": f"{day.isoformat()}|{paper_id}",
                             "type": "button"}]}, mode="socket_mode"))

        def search(app, claims, i) -> float:
            url = fake.new_response_url(channel="C1", user="UBOB")
            body = {"command": "/paper", "text": "search video", "user_id": "UBOB", "user_name": "ubob",
                    "channel_id": "C1", "channel_name": "general", "team_id": "T1", "api_app_id": "A1",
                    "response_url": url, "trigger_id": f"1.2.{i}"}
            t0 = time.perf_counter()
            claims.submit(app.dispatch, BoltRequest(body=body, mode="socket_mode"))
            fake.wait_for(lambda: fake.responses(url), timeout=300)
            return time.perf_counter() - t0

        for m, mode in enumerate(("work pool",)):
            pool = work_pool()
            claims = ThreadPoolExecutor(max_workers=4, thread_name_prefix="claim")
            live = make_deps(deps.settings, store, deps.searcher, clock=deps.clock,
                             later=make_later(pool))
            busy = create_app(live, client=WebClient(token=BOT_TOKEN, base_url=fake.api_url))
            search(busy, claims, 0)  # warm up
            quiet = [search(busy, claims, i) for i in range(1, 6)]
            fake.delay("chat.update", update_seconds, times=None)
            updates, burst = len(fake.calls("chat.update")), []
            for r in range(rounds):
                people = [f"UV{m}{r}{i:02d}" for i in range(voters)]
                fake.add_members(*people)
                for n, user in enumerate(people):
                    claims.submit(click, busy, user, papers[(n + r) % 2].id)
                burst.append(search(busy, claims, 100 + r))
                claims.shutdown(wait=True)
                pool.shutdown(wait=True)
                pool, claims = work_pool(), ThreadPoolExecutor(max_workers=4, thread_name_prefix="claim")
                live = make_deps(deps.settings, store, deps.searcher, clock=deps.clock,
                                 later=make_later(pool))
                busy = create_app(live, client=WebClient(token=BOT_TOKEN, base_url=fake.api_url))
            claims.shutdown(wait=True)
            pool.shutdown(wait=True)
            out[mode] = {"quiet reply p50 ms": round(percentile(quiet, 50) * 1000),
                         "reply behind a burst, median/max ms": [round(percentile(burst, 50) * 1000),
                                                                 round(max(burst) * 1000)],
                         "chat.update calls per burst": round((len(fake.calls("chat.update")) - updates) / rounds, 1)}
    store.close()
    return out


SCENARIOS = {"hostile": hostile, "forget": forget, "dst": dst, "feeds": feeds, "votes": votes}


def run(only: list[str]) -> dict:
    os.environ.setdefault("PAPERCLUB_MODEL", "hashing-256")
    logging.getLogger().setLevel(logging.WARNING)
    out: dict = {}
    for name in only:
        started = time.monotonic()
        with tempfile.TemporaryDirectory() as tmp:
            if name == "forget":
                figures = {b: SCENARIOS[name](Path(tmp), b) for b in ("sqlite", "postgresql")}
            else:
                figures = SCENARIOS[name](Path(tmp))
        out[name] = {**figures, "seconds": round(time.monotonic() - started, 1)}
    return out


def report(figures: dict) -> None:
    print("issue 31, before (as the issue reported it):")
    for key, value in BEFORE.items():
        print(f"  {key}: {value}")
    print("after (this run):")
    for name, value in figures.items():
        print(f"  {name}: {json.dumps(value, ensure_ascii=False)}")
