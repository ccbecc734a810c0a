"""A year of a reading group: 10 members, 52 weekly sessions, random aways, nominations and votes.

Drives the real store (SQLite, 300 ICLR 2024 abstracts, weightless embedder), the real
scheduled-post path (bot.club.club_tick -> bot.posting.Poster.post_once) against the fake Slack with an
injected clock, and injects faults on the scheduled posts: 429s, 500s, and a crash right after
Slack accepted a post (the claim left to a dead process with no ts recorded).

    PYTHONPATH=$PWD python bench/club.py [--weeks 52] [--members 10] [--seed 17] [--mode vote|presenter]

The presenter's DM (one per session, to whoever presents) is counted with the channel's posts; in
--mode presenter the presenter chooses among the nominations (most weeks) instead of a vote.
"""
from __future__ import annotations

import argparse
import json
import random
import socket
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from store import HashingEmbedder, Searcher, ingest_paths, open_store  # noqa: E402
from store.club import ClubError, ClubSpec, cast_vote, choose_paper, nominate, set_club  # noqa: E402
from store.text import member_tag  # noqa: E402

EVAL = Path("/work/shared/eval/iclr2024.jsonl")
DEAD = f"{socket.gethostname()}:{2**22 + 11}:deadbeef"  # a pid no process has: a killed poster


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--weeks", type=int, default=52)
    ap.add_argument("--members", type=int, default=10)
    ap.add_argument("--papers", type=int, default=300)
    ap.add_argument("--away", type=float, default=0.10)
    ap.add_argument("--fault-rate", type=float, default=0.3)
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--mode", choices=["vote", "presenter"], default="vote")
    args = ap.parse_args()
    rng = random.Random(args.seed)

    from bot.club import STEPS, club_tick
    from bot.config import Settings
    from bot.deps.build import build_deps
    from bot.posting import SCHEDULED_EVENT
    from fake_slack import start_fake_slack
    from slack_sdk import WebClient

    tmp = Path(tempfile.mkdtemp(prefix="bench-club-"))
    subset = tmp / "papers.jsonl"
    subset.write_text("".join(EVAL.read_text().splitlines(keepends=True)[: args.papers]))
    store = open_store(tmp / "club.db")
    embedder = HashingEmbedder()
    ingest_paths(store, [subset], embedder, now=time.time())
    ids = [p.id for p in store.iter_papers()]

    ch = "CBENCH"
    members = [f"U{i:02d}" for i in range(args.members)]
    start = datetime(2026, 1, 5, 8, tzinfo=timezone.utc)  # a Monday; sessions on Thursdays 17:00 Berlin
    spec = set_club(store, ch, ClubSpec(3, 17, 0, "Europe/Berlin", lead_hours=48, cutoff_hours=24, mode=args.mode),
                    by=members[0], now=start)
    for m in members:
        store.set_club_member(ch, m, active=True, now=start.timestamp())

    # Aways: each member, each week, away with probability --away (that Thursday).
    from store.club import session_starts

    sessions = session_starts(spec, start, count=args.weeks)
    away_weeks: dict[str, list[int]] = {m: [] for m in members}
    for w, s in enumerate(sessions):
        for m in members:
            if rng.random() < args.away:
                away_weeks[m].append(w)
                day = s.date().isoformat()
                store.add_club_away(ch, m, day, day, now=start.timestamp())

    clock_now = [start]
    deps = build_deps(Settings(_env_file=None, llm_url=None, command="/paper"), store, Searcher(store, embedder),
                      clock=lambda: clock_now[0])
    faults = Counter()
    choices = Counter()
    chose: dict[str, str] = {}  # session date -> the paper its presenter chose last
    repeat_blocked = 0
    with start_fake_slack() as fake:
        client = WebClient(token="xoxb-bench", base_url=fake.api_url)

        def tick(at: datetime) -> None:
            clock_now[0] = at
            club_tick(deps, client, at, budget=20, sleep=lambda s: None)

        from bot.club.posts import _moments

        for s in sessions:
            moments = _moments(spec, s)
            # Nominations during the week (some weeks none: the agenda proposes three).
            nom_at = moments["agenda"] - timedelta(hours=20)
            clock_now[0] = nom_at
            for _ in range(rng.choice([0, 1, 2, 3, 4])):
                who = rng.choice(members)
                pid = rng.choice(ids)
                try:
                    nominate(store, ch, pid, who, nom_at)
                except ClubError:
                    repeat_blocked += 1  # a paper the club read already: refused
            for step in STEPS:
                at = moments[step] + timedelta(minutes=1)
                if step == "winner":  # votes arrive between the agenda and the cutoff
                    vote_at = moments["agenda"] + timedelta(hours=2)
                    cands = [n["paper_id"] for n in store.nominations(ch, s.date().isoformat())]
                    presenter = (store.get_club_session(ch, s.date().isoformat()) or {}).get("presenter")
                    if args.mode == "presenter" and presenter and cands and rng.random() < 0.8:
                        for m in rng.sample(members, 2):  # others' clicks are refused
                            choose_paper(store, ch, s.date(), m, rng.choice(cands), vote_at)
                        pick = rng.choice(cands)
                        answer = choose_paper(store, ch, s.date(), presenter, pick, vote_at)
                        choices[answer] += 1
                        if answer in ("chosen", "already"):
                            chose[s.date().isoformat()] = pick
                    for m in members:
                        for pid in rng.sample(cands, k=min(len(cands), rng.randint(1, 3))):
                            cast_vote(store, ch, s.date(), m, pid, vote_at)
                            cast_vote(store, ch, s.date(), m, pid, vote_at)  # a double click
                fault = rng.random() < args.fault_rate and rng.choice(["429", "500", "crash"])
                if fault == "429":
                    fake.fail("chat.postMessage", retry_after=0, times=1)
                elif fault == "500":
                    fake.fail("chat.postMessage", status=500, times=2)
                if fault:
                    faults[fault] += 1
                tick(at)
                if fault == "crash":  # Slack took it, the process died before recording the ts
                    key = f"{step}:{s.date().isoformat()}"
                    if step == "winner":  # the presenter's DM went out in the same tick: lose its ts too
                        row = store.get_club_session(ch, s.date().isoformat()) or {}
                        key = f"presenter:{s.date().isoformat()}:{member_tag(row.get('presenter'))}"
                    store.db.execute("update posts set status = 'claimed', ts = null, claimed_by = ? "
                                     "where channel = ? and key = ?", [DEAD, ch, key])
                    store.db.conn.commit()
                if step == "thread":
                    row = store.get_club_session(ch, s.date().isoformat()) or {}
                    if row.get("thread_ts"):
                        for _ in range(rng.randint(0, 4)):
                            fake.add_message(ch, rng.choice(["Nice result.", "Does it scale?"]),
                                             user=rng.choice(members), thread_ts=row["thread_ts"])
                tick(at + timedelta(minutes=1))  # the next minute's tick (and a restart) must not re-post
                tick(at + timedelta(minutes=2))
        keys = Counter()
        for m in fake.messages():  # the channel's and the presenters' DMs
            meta = m.get("metadata") or {}
            if meta.get("event_type") == SCHEDULED_EVENT:
                keys[meta["event_payload"]["key"]] += 1

    rows = [r for r in store.club_sessions(ch) if r["state"] != "skipped"]
    presented = Counter(r["presenter"] for r in rows if r["presenter"])
    no_presenter = sum(1 for r in rows if not r["presenter"])
    papers = Counter(r["paper_id"] for r in rows if r["paper_id"])
    repeats = sum(c - 1 for c in papers.values() if c > 1)

    def longest_streak(weeks: list[int]) -> int:
        best = run = 0
        prev = None
        for w in weeks:
            run = run + 1 if prev is not None and w == prev + 1 else 1
            best, prev = max(best, run), w
        return best

    steady = [m for m in members if longest_streak(away_weeks[m]) <= 2]
    expected = [f"{step}:{s.date().isoformat()}" for s in sessions for step in STEPS]
    expected += [f"presenter:{r['date']}:{member_tag(r['presenter'])}"  # the key names no one (forget-me)
                 for r in rows if r["presenter"] and r["paper_id"]]
    dup = sum(1 for k in expected if keys[k] > 1)
    missing = sum(1 for k in expected if keys[k] == 0)
    counts = {m: presented.get(m, 0) for m in members}
    steady_counts = [counts[m] for m in steady]
    print(f"club bench ({args.mode} mode): {args.members} members, {len(sessions)} weekly sessions, "
          f"away {args.away:.0%} per "
          f"member-week, {len(ids)} papers, seed {args.seed}")
    print("presenter counts:", json.dumps(counts))
    print("away weeks:      ", json.dumps({m: len(w) for m, w in away_weeks.items()}))
    print(f"presenter counts min/max (all): {min(counts.values())}/{max(counts.values())}")
    print(f"presenter counts min/max (never away > 2 weeks running, {len(steady)} members): "
          f"{min(steady_counts)}/{max(steady_counts)} (max-min {max(steady_counts) - min(steady_counts)})")
    print(f"sessions with no presenter: {no_presenter}")
    print(f"sessions with no paper: {sum(1 for r in rows if not r['paper_id'])}")
    print(f"repeats of a read paper: {repeats} (nominations of read papers refused: {repeat_blocked})")
    print(f"faults injected on scheduled posts: {dict(faults)}")
    if args.mode == "presenter":
        print(f"presenter choices: {dict(choices)} (a presenter drawn among the others clicks twice: 'already'); "
              f"sessions whose presenter did not choose: {sum(1 for r in rows if r['date'] not in chose)}, "
              f"whose paper is not the presenter's last choice: "
              f"{sum(1 for r in rows if r['date'] in chose and r['paper_id'] != chose[r['date']])}")
    dms = sum(1 for k in expected if k.startswith("presenter:"))
    print(f"scheduled posts expected {len(expected)} (of them presenter DMs {dms}): "
          f"duplicate {dup} / missing {missing}")
    print(f"posts with an unexpected key: {sum(1 for k in keys if k not in set(expected))}")


if __name__ == "__main__":
    main()
