"""Several `paperclub run` replicas on one PostgreSQL, the fake Slack spreading envelopes over them.

The fake Slack (spread mode) delivers each Socket Mode envelope to one connection
chosen at random, delivers it again elsewhere when it is not acked within a second,
and delivers a fifth of them twice anyway (Slack delivers at least once). While
commands and reactions keep coming:

- kill -9: the lease holder in the middle of the daily post (Slack took the digest
  and has not answered), then the replica that took the lease over, while it holds it,
  then the holder in the middle of a feed harvest (an arXiv category's listing stored,
  the OpenReview venue's notes on their way);
- a rolling restart: each replica in turn is replaced (the new one starts, then the
  old one gets SIGTERM).

What is counted comes from the fake Slack and the database: each channel's daily
post is in Slack exactly once and its row records that message; every command got
exactly one reply; every reaction is logged once; every paper the feeds brought is
stored once, whole (its vector, its announcement), and each feed channel's paper of the
day is one of its feed's new papers, in Slack exactly once; after each kill the lease moved to
a live replica within one more lease period of its expiry (measured: about one renewal
period), and each SIGTERM released it on the way out. Commands are paused around the instant of a kill -9 (an envelope acked by a
process that dies before replying is lost: Slack does not deliver an acked one
again); they flow right through the rolling restart.
"""
from __future__ import annotations

import json
import random
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from bot.commands_interests import MAX_INTERESTS
from botproc import start_bot
from fake_sources import FakeSources, make_papers, on_openreview
from figures import record, scale

pytestmark = pytest.mark.slow

TRIALS = scale("CHAOS_TRIALS", 1)  # bench/robustness.py --only replicas_chaos --chaos-trials N runs more
LEASE_SECONDS = 3.0
RENEW = LEASE_SECONDS / 3
CHANNELS = ("C1", "C2")
EVENT_TYPE = "paperclub_daily"
VENUE = "ICLR.cc/2026/Conference"
FEED_CHANNELS = {"C3": ("arxiv", "cs.LG"), "C4": ("openreview", VENUE)}  # followed by these channels only
N_FEED_PAPERS = 6  # per feed


@pytest.fixture
def seeded_pg(pg_url):
    """A PostgreSQL schema holding the bundled abstracts (hashing model) and two daily schedules."""
    from store import HashingEmbedder, bundled_sample_paths, ingest_paths, open_store

    store = open_store(pg_url)
    ingest_paths(store, bundled_sample_paths(), HashingEmbedder(), now=time.time())
    store.close()
    return pg_url


class Replicas:
    """The running replicas, by id, and every one ever started."""

    def __init__(self, fake, url: str, tmp: Path, src: FakeSources):
        self.fake, self.url, self.tmp, self.src = fake, url, tmp, src
        self.live: dict[str, object] = {}
        self.n = 0

    def start(self) -> str:
        self.n += 1
        rid = f"r{self.n}"
        bot = start_bot(self.fake, self.url, self.tmp / f"{rid}.log", PAPERCLUB_REPLICA_ID=rid,
                        PAPERCLUB_LEASE_SECONDS=str(LEASE_SECONDS), PAPERCLUB_SWEEP_SECONDS="2",
                        PAPERCLUB_ARXIV_API=self.src.api, PAPERCLUB_ARXIV_RSS=self.src.rss,
                        PAPERCLUB_OPENREVIEW_API=self.src.url)
        self.live[rid] = bot
        return rid

    def kill(self, rid: str) -> None:
        bot = self.live.pop(rid)
        bot.proc.kill()
        bot.proc.wait(10)

    def stop(self, rid: str) -> int:
        return self.live.pop(rid).stop()

    def stop_all(self) -> None:
        for rid in list(self.live):
            self.stop(rid)

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-1500:]}" for p in sorted(self.tmp.glob("r*.log")))


class Traffic:
    """Slash commands (and their replies) and reactions, sent from a thread until paused or stopped."""

    def __init__(self, fake, rng: random.Random):
        self.fake, self.rng = fake, rng
        self.urls: list[str] = []
        self.interests: list[str] = []
        self.reactions = 0
        self.react_on: tuple[str, str] | None = None  # (channel, ts) of a daily post, once it is out
        self.flowing = threading.Event()
        self.done = threading.Event()
        self.idle = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        n = 0
        while not self.done.is_set():
            if not self.flowing.wait(0.05):
                self.idle.set()
                continue
            self.idle.clear()
            n += 1
            channel = self.rng.choice(CHANNELS)
            url = self.fake.new_response_url(channel=channel, user=f"U{n % 7}")
            # interests add, while the channel is below the bot's per-channel cap (a refusal is no loss)
            if n % 4 == 0 and sum(t.endswith(f" in {channel}") for t in self.interests) < MAX_INTERESTS:
                topic = f"chaos topic {n} in {channel}"
                self.interests.append(topic)
                text = f"interests add {topic}"
            else:
                text = self.rng.choice(["search video grounding", "search speculative decoding", "help"])
            self.fake.slash_command(text, user=f"U{n % 7}", channel=channel, response_url=url)
            self.urls.append(url)
            if self.react_on and n % 3 == 0:
                ch, ts = self.react_on
                self.fake.event({"type": "reaction_added", "user": f"UR{n}", "reaction": "fire", "item_user": "UBOT",
                                 "item": {"type": "message", "channel": ch, "ts": ts}})
                self.reactions += 1
            time.sleep(self.rng.uniform(0.05, 0.15))

    def pause(self) -> None:
        """Stop sending, and wait until every command sent so far has its reply."""
        self.flowing.clear()
        self.idle.wait(5)
        self.idle.clear()
        self.idle.wait(5)
        try:
            self.fake.wait_for(lambda: all(self.fake.responses(u) for u in self.urls), timeout=30)
        except TimeoutError:
            pass  # counted at the end

    def resume(self) -> None:
        self.flowing.set()

    def stop(self) -> None:
        self.pause()
        self.done.set()
        self.thread.join(5)


def daily_posts(fake, channel: str, day: str) -> list[dict]:
    return [m for m in fake.messages(channel) if (m.get("metadata") or {}).get("event_type") == EVENT_TYPE
            and m["metadata"]["event_payload"].get("date") == day]


def wait_lease(fake, store, live, *, not_holder: str | None = None, timeout: float = 30.0) -> tuple[str, float]:
    """(holder, when) once a live replica other than `not_holder` holds the sweeps lease."""
    def held():
        row = store.lease_holder("sweeps", now=time.time())
        if row and row["holder"] in live and row["holder"] != not_holder:
            return row["holder"], time.time()
        return None
    return fake.wait_for(held, timeout=timeout, interval=0.02)


def feed_sources(src: FakeSources, now: datetime) -> dict[str, list[str]]:
    """Tonight's cs.LG listing and the venue's notes, all new; feed channel -> its papers' external keys."""
    listed = make_papers(N_FEED_PAPERS, seed=4, start=now - timedelta(days=1))
    src.listings["cs.LG"] = ([("new", p) for p in listed], now - timedelta(hours=1))
    # OpenReview dates a note by its pdate (published + 20 days here): within the last day.
    src.notes = on_openreview(make_papers(N_FEED_PAPERS, seed=6, start=now - timedelta(days=21)), venueid=VENUE)
    return {"C3": [f"ext:arxiv:{p.arxiv_id}" for p in listed],
            "C4": [f"ext:openreview:{n.forum.lower()}" for n in src.notes]}


def kill_mid_harvest(fake, src: FakeSources, store, replicas: Replicas, traffic: Traffic,
                     keys: dict[str, list[str]], out: dict) -> str:
    """Kill 3: the lease holder in the middle of a feed harvest; then each feed channel's post. Its day."""
    from store.sources import feed_source

    gate = threading.Event()
    src.fail("/notes", gate=gate)  # the venue's first page is held until the holder is dead
    for ch, (kind, target) in FEED_CHANNELS.items():
        store.add_feed(ch, kind, target, "U1", now=time.time())
    fake.wait_for(lambda: src.calls("/notes"), timeout=30)  # the holder's sweep polls the new feeds
    holder, _ = wait_lease(fake, store, replicas.live)
    assert "catching up the feed poll" in replicas.live[holder].log.read_text(), replicas.logs()
    found = store.lookup_keys(keys["C3"] + keys["C4"])
    # Mid-harvest: cs.LG's papers are stored, the venue's are not.
    assert all(found.get(k) for k in keys["C3"]) and not any(found.get(k) for k in keys["C4"]), found

    traffic.pause()
    row = store.lease_holder("sweeps", now=time.time())
    assert row["holder"] == holder, row
    replicas.kill(holder)
    killed_at = time.time()
    gate.set()  # its answer goes to a dead socket
    traffic.resume()
    _, at = wait_lease(fake, store, replicas.live, not_holder=holder)
    out["handover_after_expiry"].append(round(at - row["expires_at"], 2))
    fake.wait_for(lambda: ((store.source_state(feed_source("openreview", VENUE)) or {}).get("last_success") or 0)
                  > killed_at, timeout=30)
    out["harvest_finished_after_kill"] = round(time.time() - killed_at, 2)
    out["feed_polls_by_rss"] = len(src.calls("/rss/"))  # cs.LG had finished: read once

    # Each feed channel's paper of the day fell due two minutes ago: the holder's catch-up makes it.
    now = datetime.now(timezone.utc)
    due = now - timedelta(minutes=2)
    for ch in FEED_CHANNELS:
        store.set_schedule(ch, hour=due.hour, minute=due.minute, tz="UTC", days="daily", set_by="U1",
                           now=(now - timedelta(hours=1)).timestamp())
    day = due.date().isoformat()
    fake.wait_for(lambda: all((store.get_post(ch, day) or {}).get("status") == "posted" for ch in FEED_CHANNELS),
                  timeout=60)
    return day


def feed_figures(fake, store, keys: dict[str, list[str]], day: str, library: int) -> dict:
    """What the feeds left in the database and in Slack, counted."""
    from store import HashingEmbedder
    from store.sources import announce_source

    everything = [k for ks in keys.values() for k in ks]
    found = store.lookup_keys(everything)
    ids = {k: found.get(k, []) for k in everything}
    stored = {pid for v in ids.values() for pid in v}
    vectors = set(store.load_vectors(HashingEmbedder().name)[0])
    announced = {ch: set(store.announced_since(0, [announce_source(*feed)])) for ch, feed in FEED_CHANNELS.items()}
    whole = sum(bool(v) and all(pid in vectors and pid in announced[ch]
                                and (store.get_paper(pid).abstract or "").strip() for pid in v)
                for ch, ks in keys.items() for k in ks for v in [ids[k]])
    posts = {ch: daily_posts(fake, ch, day) for ch in FEED_CHANNELS}
    rows = {ch: store.get_post(ch, day) for ch in FEED_CHANNELS}
    where = {"arxiv": "new on arXiv", "openreview": "new on OpenReview"}
    fresh = sum(bool(p) and rows[ch]["ts"] == p[0]["ts"]
                and rows[ch]["paper_id"] in {pid for k in keys[ch] for pid in ids[k]}
                and where[FEED_CHANNELS[ch][0]] in json.dumps(p[0])
                for ch, p in posts.items())
    return dict(
        papers_expected=len(everything), papers_stored=sum(len(v) == 1 for v in ids.values()),
        papers_missing=sum(not v for v in ids.values()),
        # two rows for one paper: a key naming two, or rows beyond one per paper
        papers_duplicated=sum(len(v) > 1 for v in ids.values()) + (store.count_papers() - library - len(stored)),
        papers_whole=whole,
        feed_posts_landed=sum(len(p) == 1 for p in posts.values()),
        feed_posts_duplicated=sum(len(p) > 1 for p in posts.values()),
        feed_posts_missing=sum(not p for p in posts.values()),
        feed_posts_fresh=fresh,
    )


def run_trial(fake, url: str, tmp: Path, rng: random.Random, src: FakeSources) -> dict:
    from store import open_store

    store = open_store(url)
    library = store.count_papers()
    keys = feed_sources(src, datetime.now(timezone.utc))
    replicas = Replicas(fake, url, tmp, src)
    traffic = Traffic(fake, rng)
    out: dict = {"handover_after_expiry": [], "handover_after_sigterm": [], "sigterm_holders": 0,
                 "released_on_sigterm": 0}
    try:
        for _ in range(3):
            replicas.start()
        traffic.resume()
        # Both channels' posts fell due two minutes ago: the lease holder's sweep catches them up.
        # Slack takes the first digest, then does not answer for 30 s: its poster dies in that window.
        now = datetime.now(timezone.utc)
        due = now - timedelta(minutes=2)
        day = due.date().isoformat()
        fake.delay("chat.postMessage", 30, times=1, after=True)
        for ch in CHANNELS:
            store.set_schedule(ch, hour=due.hour, minute=due.minute, tz="UTC", days="daily", set_by="U1",
                               now=(now - timedelta(hours=1)).timestamp())
        posting = fake.wait_for(lambda: next((ch for ch in CHANNELS if daily_posts(fake, ch, day)), None), timeout=60)
        holder, _ = wait_lease(fake, store, replicas.live)
        row = store.get_post(posting, day)
        assert row["status"] == "claimed" and row["ts"] is None, row  # in Slack, not recorded: mid-post
        assert row["claimed_by"] == holder, (row, holder)  # the claimer is the replica's one identity

        # Kill 1: the lease holder, in the middle of the daily post.
        traffic.pause()
        expiry = store.lease_holder("sweeps", now=time.time())["expires_at"]
        replicas.kill(holder)
        traffic.resume()
        second, at = wait_lease(fake, store, replicas.live, not_holder=holder)
        out["handover_after_expiry"].append(round(at - expiry, 2))
        fake.wait_for(lambda: all((store.get_post(ch, day) or {}).get("status") == "posted" for ch in CHANNELS),
                      timeout=60)
        post = store.get_post(posting, day)
        traffic.react_on = (posting, post["ts"])
        replicas.start()  # the orchestrator replaces the dead one

        # Kill 2: the replica that took the lease over, while it holds it.
        time.sleep(rng.uniform(0.0, RENEW))
        traffic.pause()
        row = store.lease_holder("sweeps", now=time.time())
        assert row["holder"] == second, row
        replicas.kill(second)
        traffic.resume()
        third, at = wait_lease(fake, store, replicas.live, not_holder=second)
        out["handover_after_expiry"].append(round(at - row["expires_at"], 2))
        replicas.start()

        # Kill 3: the lease holder in the middle of a feed harvest.
        feed_day = kill_mid_harvest(fake, src, store, replicas, traffic, keys, out)

        # Rolling restart: a new replica first, then SIGTERM to an old one; traffic never pauses.
        for old in list(replicas.live):
            replicas.start()
            held = store.lease_holder("sweeps", now=time.time())
            log = replicas.live[old].log
            assert replicas.stop(old) == 0, replicas.logs()
            stopped_at = time.time()
            if held and held["holder"] == old:  # released on the way out: the next renewal takes it
                out["sigterm_holders"] += 1
                out["released_on_sigterm"] += "released the sweeps lease" in log.read_text()
                _, at = wait_lease(fake, store, replicas.live, not_holder=old)
                out["handover_after_sigterm"].append(round(max(0.0, at - stopped_at), 2))
        time.sleep(1.0)
        traffic.stop()
        fake.wait_for(lambda: not fake.pending(), timeout=20)
        time.sleep(1.0)  # a duplicate delivery, if one is still on its way, has landed

        posts = {ch: daily_posts(fake, ch, day) for ch in CHANNELS}
        rows = {ch: store.get_post(ch, day) for ch in CHANNELS}
        replies = [len(fake.responses(u)) for u in traffic.urls]
        interests = [i["text"] for ch in CHANNELS for i in store.interests(ch)]
        logged = [r for r in store.reactions(channel=traffic.react_on[0]) if r["emoji"] == "fire"]
        deliveries = fake.deliveries()
        envelopes = {d[0] for d in deliveries}
        out.update(
            posts_landed=sum(len(p) == 1 for p in posts.values()),
            posts_duplicated=sum(len(p) > 1 for p in posts.values()),
            posts_missing=sum(not p for p in posts.values()),
            rows_match=sum(bool(p) and rows[ch]["status"] == "posted" and rows[ch]["ts"] == p[0]["ts"]
                           for ch, p in posts.items()),
            commands=len(replies), replied_once=replies.count(1), unanswered=replies.count(0),
            answered_twice=sum(n > 1 for n in replies),
            interests_added=len(traffic.interests), interests_stored=len(interests),
            interests_twice=len(interests) - len(set(interests)),
            reactions_sent=traffic.reactions, reactions_logged=len(logged),
            deliveries=len(deliveries), redelivered=len(deliveries) - len(envelopes),
            replicas_started=replicas.n, kills=3, sigterms=replicas.n - 3 - len(replicas.live),
            **feed_figures(fake, store, keys, feed_day, library),
        )
        out["logs"] = replicas.logs()
        return out
    finally:
        traffic.done.set()
        replicas.stop_all()
        store.close()


@pytest.mark.parametrize("trial", range(TRIALS))
def test_replicas_survive_kill_9_and_a_rolling_restart_with_every_post_reply_and_reaction_once(
        seeded_pg, fake_slack, tmp_path, trial):
    fake = fake_slack
    for ch in (*CHANNELS, *FEED_CHANNELS):
        fake.add_channel(ch, name=f"chan-{ch.lower()}")
    fake.spread(redeliver_after=1.0, duplicate=0.2)
    with FakeSources() as src:
        t = run_trial(fake, seeded_pg, tmp_path, random.Random(), src)
    logs = t.pop("logs")
    record("replicas_chaos", trial=trial, **t)
    assert t["posts_landed"] == len(CHANNELS) and t["posts_duplicated"] == 0 and t["posts_missing"] == 0, (t, logs)
    assert t["rows_match"] == len(CHANNELS), t
    assert t["answered_twice"] == 0 and t["unanswered"] == 0 and t["replied_once"] == t["commands"], (t, logs)
    assert t["interests_stored"] == t["interests_added"] and t["interests_twice"] == 0, t
    assert t["reactions_sent"] > 0 and t["reactions_logged"] == t["reactions_sent"], (t, logs)
    assert t["redelivered"] > 0, t  # duplicates and retries really reached the replicas
    # After a kill -9 the lease passed on within one more lease period of its expiry; after a
    # SIGTERM it was released on the way out (not left to expire).
    assert all(d <= LEASE_SECONDS for d in t["handover_after_expiry"]), t
    assert t["released_on_sigterm"] == t["sigterm_holders"], (t, logs)
    # The harvest killed half-way was finished by the next holder: each paper once and whole, each
    # feed channel's post once, with one of its feed's new papers; cs.LG, finished before the kill,
    # was not read again.
    assert t["papers_stored"] == t["papers_expected"] and t["papers_missing"] == 0, (t, logs)
    assert t["papers_duplicated"] == 0 and t["papers_whole"] == t["papers_expected"], (t, logs)
    assert t["feed_posts_landed"] == len(FEED_CHANNELS) and t["feed_posts_duplicated"] == 0, (t, logs)
    assert t["feed_posts_missing"] == 0 and t["feed_posts_fresh"] == len(FEED_CHANNELS), (t, logs)
    assert t["feed_polls_by_rss"] == 1, t
