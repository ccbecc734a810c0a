"""Several bot replicas on one database: each Slack event handled once, sweeps under a lease
with an epoch fence. Runs on every backend (the store fixture); races use one Store per replica."""
from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

from store import open_store


def join_late_claims(since: set[threading.Thread]) -> None:
    """Wait for the deferred deliveries started after `since` (EventClaims' "claim-late" threads)
    to be claimed and, where the claim is theirs, handled."""
    for thread in set(threading.enumerate()) - since:
        if thread.name == "claim-late":
            thread.join(30)


def test_a_redelivered_event_is_handled_by_one_replica_only(store):
    assert store.claim_event("Ev1", replica="r1", now=100.0)
    assert not store.claim_event("Ev1", replica="r2", now=101.0)  # Slack's retry, on another replica
    assert not store.claim_event("Ev1", replica="r1", now=102.0)
    assert store.claim_event("Ev2", replica="r2", now=103.0)


def test_old_event_records_are_dropped_but_recent_ones_kept(store):
    assert store.claim_event("Ev1", replica="r1", now=0.0)
    assert not store.claim_event("Ev1", replica="r1", now=3_000.0, keep=3_600.0)
    assert store.claim_event("Ev2", replica="r1", now=10_000.0, keep=3_600.0)  # prunes Ev1 on the way
    assert store.claim_event("Ev1", replica="r1", now=10_001.0, keep=3_600.0)


def test_the_lease_has_one_holder_and_a_new_epoch_whenever_it_changes_hands(store):
    first = store.acquire_lease("sweep", holder="r1", ttl=10.0, now=100.0)
    assert first == 1
    assert store.acquire_lease("sweep", holder="r2", ttl=10.0, now=105.0) is None  # r1 is alive
    assert store.acquire_lease("sweep", holder="r1", ttl=10.0, now=108.0) == first  # renewed, same epoch
    assert store.lease_holder("sweep", now=110.0) == {"holder": "r1", "epoch": 1, "expires_at": 118.0}
    # r1 dies: no renewal. Once the lease expires, r2 takes it with a higher epoch...
    assert store.acquire_lease("sweep", holder="r2", ttl=10.0, now=117.9) is None
    second = store.acquire_lease("sweep", holder="r2", ttl=10.0, now=118.0)
    assert second == 2
    # ...and r1's writes, still carrying epoch 1, are fenced off even if r1 wakes up.
    assert not store.holds_lease("sweep", holder="r1", epoch=first, now=119.0)
    assert store.holds_lease("sweep", holder="r2", epoch=second, now=119.0)
    assert not store.holds_lease("sweep", holder="r2", epoch=second, now=128.0)  # expired itself
    assert store.acquire_lease("sweep", holder="r1", ttl=10.0, now=119.0) is None
    # A clean shutdown hands over at once; a stale epoch cannot release it.
    assert not store.release_lease("sweep", holder="r2", epoch=first)
    assert store.release_lease("sweep", holder="r2", epoch=second)
    assert store.lease_holder("sweep", now=120.0) is None
    assert store.acquire_lease("sweep", holder="r3", ttl=10.0, now=120.0) == 3
    assert store.acquire_lease("other", holder="r1", ttl=10.0, now=120.0) == 1  # leases are per name


def test_racing_replicas_get_one_event_and_one_lease(store_url):
    replicas = [open_store(store_url) for _ in range(6)]
    try:
        def race(i):
            s = replicas[i]
            return (s.claim_event("EvRace", replica=f"r{i}", now=50.0),
                    s.acquire_lease("sweep", holder=f"r{i}", ttl=5.0, now=50.0))

        with ThreadPoolExecutor(len(replicas)) as pool:
            results = list(pool.map(race, range(len(replicas))))
        assert sum(handled for handled, _ in results) == 1
        holders = [i for i, (_, epoch) in enumerate(results) if epoch is not None]
        assert len(holders) == 1
        assert replicas[0].lease_holder("sweep", now=51.0)["holder"] == f"r{holders[0]}"
    finally:
        for s in replicas:
            s.close()


def test_an_orphaned_post_is_taken_over_by_one_replica_and_only_its_claim_can_finish_it(store):
    assert store.claim_post("C1", "2026-12-01", claimer="dead", paper_id=None, pick=None, now=100.0)
    row = store.get_post("C1", "2026-12-01")
    took = store.take_over_post("C1", "2026-12-01", status=row["status"], old_claimer="dead",
                                claimed_at=row["claimed_at"], claimer="r2", now=200.0)
    assert took == 200.0
    # A second replica that read the same row loses the compare-and-swap.
    assert store.take_over_post("C1", "2026-12-01", status=row["status"], old_claimer="dead",
                                claimed_at=row["claimed_at"], claimer="r3", now=201.0) is None
    assert not store.finish_post("C1", "2026-12-01", claimer="dead", ts="1.1", now=202.0, claimed_at=100.0)
    assert not store.finish_post("C1", "2026-12-01", claimer="r2", ts="1.1", now=202.0, claimed_at=150.0)
    store.fail_post("C1", "2026-12-01", claimer="r2", error="slack down", claimed_at=took)
    failed = store.get_post("C1", "2026-12-01")
    assert failed["status"] == "failed"
    # r2 retries its own failed claim the same way, and finishes it.
    again = store.take_over_post("C1", "2026-12-01", status="failed", old_claimer="r2",
                                 claimed_at=failed["claimed_at"], claimer="r2", now=200.0)
    assert again is not None and again != took
    assert store.finish_post("C1", "2026-12-01", claimer="r2", ts="1.2", now=203.0, claimed_at=again)
    assert store.get_post("C1", "2026-12-01")["status"] == "posted"


def test_writes_under_a_lease_are_refused_once_another_replica_holds_it(store):
    import pytest

    from store import FencedStore, Lease, LeaseLost

    clock = {"now": 100.0}
    epoch = store.acquire_lease("sweeps", holder="r1", ttl=12.0, now=100.0)
    fenced = FencedStore(store, Lease("sweeps", "r1", epoch, 12.0), lambda: clock["now"])
    fenced.update_source("arxiv", now=100.0, ok=True, cursor={"page": 1})
    assert fenced.source_state("arxiv")["cursor"] == {"page": 1}  # reads pass straight through
    clock["now"] = 110.5  # 1.5 s left on the lease: less than the margin (ttl/6), so no new write starts
    with pytest.raises(LeaseLost):
        fenced.update_source("arxiv", now=110.5, cursor={"page": 2})
    # r1 stalled past its lease; r2 took it. r1's late write is fenced off, whatever r1 believes.
    clock["now"] = 113.0
    assert store.acquire_lease("sweeps", holder="r2", ttl=12.0, now=113.0) == epoch + 1
    with pytest.raises(LeaseLost):
        fenced.update_source("arxiv", now=113.0, cursor={"page": 0})
    assert store.source_state("arxiv")["cursor"] == {"page": 1}
    fenced.set_meta("heartbeat:r1", "113")  # a replica's own records are not the lease's
    assert store.get_meta("heartbeat:r1") == "113"


def test_the_catch_up_runs_on_the_lease_holder_only_and_passes_on_when_it_is_released(
        hashing_store, fake_slack):
    from datetime import datetime, timedelta, timezone

    from conftest import Clock, make_deps, make_settings
    from store import HashingEmbedder, Searcher

    now = datetime(2026, 12, 1, 9, 5, tzinfo=timezone.utc)
    settings = make_settings(slack_api_url=fake_slack.api_url)
    searcher = Searcher(hashing_store, HashingEmbedder())
    from bot.scheduler import DailyService

    r1, r2 = (DailyService(make_deps(settings, hashing_store, searcher, clock=Clock(now), replica=r))
              for r in ("r1", "r2"))
    for channel in ("C1", "C2"):
        hashing_store.set_schedule(channel, hour=9, minute=0, tz="UTC", days="daily", set_by="U1",
                                   now=(now - timedelta(days=1)).timestamp())
    assert [r.status for r in r1.catch_up(now)] == ["posted", "posted"]
    hashing_store.set_schedule("C3", hour=9, minute=0, tz="UTC", days="daily", set_by="U1",
                               now=(now - timedelta(days=1)).timestamp())
    assert r2.catch_up(now) == []  # r1 holds the lease: r2's sweep does nothing
    assert hashing_store.get_post("C3", "2026-12-01") is None
    assert r1.release_lease()  # SIGTERM: handed over at once, not left to expire
    assert [r.status for r in r2.catch_up(now)] == ["posted"]
    assert hashing_store.lease_holder("sweeps", now=now.timestamp())["holder"] == "r2"
    posts = [m for ch in ("C1", "C2", "C3") for m in fake_slack.messages(ch)
             if (m.get("metadata") or {}).get("event_type") == "paperclub_daily"]
    assert len(posts) == 3


def test_health_names_the_replica_says_whether_it_holds_the_lease_and_whether_the_database_answers(tmp_path):
    from bot.health import check_health, write_heartbeat

    path = tmp_path / "paperclub.db"
    store = open_store(path)
    write_heartbeat(store, 1000.0, replica="r1")
    write_heartbeat(store, 1001.0, replica="r2")
    store.acquire_lease("sweeps", holder="r1", ttl=15.0, now=1000.0)
    store.close()
    r1 = check_health(path, now=1005.0, replica="r1")
    assert r1.ok and "replica r1, holds the sweeps lease (epoch 1), database reachable" in r1.message
    r2 = check_health(path, now=1005.0, replica="r2")
    assert r2.ok and "replica r2, standby (the sweeps lease is r1's)" in r2.message
    r3 = check_health(path, now=1005.0, replica="r3")
    assert not r3.ok and "replica r3" in r3.message and "never connected" in r3.message
    assert "nobody holds the sweeps lease" in check_health(path, now=1100.0, replica="r1").message
    gone = check_health("postgresql://paperclub@127.0.0.1:1/nothing", now=1005.0, replica="r1")
    assert not gone.ok and gone.message.startswith("replica r1: database not reachable")


def test_a_post_claimed_by_a_replica_on_another_host_is_taken_over_once_its_beat_stops(hashing_store, fake_slack):
    from datetime import date, datetime, timezone

    from slack_sdk import WebClient

    from bot.deps import Feedback
    from bot.posting import post_daily
    from bot.replica import write_heartbeat
    from conftest import BOT_TOKEN
    from store import HashingEmbedder, Searcher, pick_for_day

    now = datetime(2026, 12, 1, 9, 0, tzinfo=timezone.utc)
    searcher = Searcher(hashing_store, HashingEmbedder())
    pick = pick_for_day(hashing_store, searcher, "C1", date(2026, 12, 1), feedback=Feedback())
    other = "another-container:1:0badc0de"  # pid 1 of another host: its pid cannot be asked from here
    assert hashing_store.claim_post("C1", "2026-12-01", claimer=other, paper_id=pick.paper_id,
                                    pick=pick.to_dict(), now=now.timestamp() - 60)
    write_heartbeat(hashing_store, now.timestamp() - 5, replica=other)
    client = WebClient(token=BOT_TOKEN, base_url=fake_slack.api_url)
    busy = post_daily(client, hashing_store, searcher, "C1", now, feedback=Feedback(), sleep=lambda s: None)
    assert busy.status == "busy" and other in busy.detail  # it beats: it is still posting
    assert fake_slack.messages("C1") == []
    # A minute on with no beat since, that replica is gone: its claim is taken over long before
    # the 30 minutes a claimer that never beats is given.
    later = datetime(2026, 12, 1, 9, 1, tzinfo=timezone.utc)
    took = post_daily(client, hashing_store, searcher, "C1", later, feedback=Feedback(), sleep=lambda s: None)
    assert took.status == "posted" and took.paper_id == pick.paper_id
    daily = [m for m in fake_slack.messages("C1") if (m.get("metadata") or {}).get("event_type") == "paperclub_daily"]
    assert len(daily) == 1 and hashing_store.get_post("C1", "2026-12-01")["ts"] == daily[0]["ts"]


def test_a_delivery_the_database_is_too_slow_to_claim_is_acked_now_and_handled_once_later(tmp_path):
    import sqlite3
    import threading
    from datetime import datetime, timezone

    from bot.claims import EventClaims

    path = tmp_path / "paperclub.db"
    store = open_store(path)
    claims = EventClaims(store, "r1", lambda: datetime(2026, 12, 1, tzinfo=timezone.utc), wait=0.2)
    other = EventClaims(store, "r2", lambda: datetime(2026, 12, 1, tzinfo=timezone.utc), wait=0.2)
    handled = []
    done = threading.Event()
    before = set(threading.enumerate())
    locker = sqlite3.connect(path, isolation_level=None, timeout=30)
    locker.execute("BEGIN IMMEDIATE")  # another writer holds the file
    try:
        def later(who):
            handled.append(who)
            done.set()
        assert claims("envelope:E1", later=lambda: later("r1")) is False  # acked, not handled yet
        assert other("envelope:E1", later=lambda: later("r2")) is False  # Slack's duplicate, on r2
        assert handled == []
    finally:
        locker.execute("COMMIT")
        locker.close()
    assert done.wait(20)
    join_late_claims(before)  # the other claim has come back too
    assert len(handled) == 1  # once the database answers, exactly one replica handles it
    # A redelivery afterwards, to either, is dropped (it waits for the database, which now knows).
    assert claims("envelope:E1", later=lambda: later("again")) is False
    assert other("envelope:E1", later=lambda: later("again")) is False
    join_late_claims(before)
    assert len(handled) == 1, handled
    store.close()


def test_a_delivery_acked_first_is_claimed_after_and_handled_by_one_replica_even_while_the_file_is_locked(
        tmp_path):
    import sqlite3
    import threading
    from datetime import datetime, timezone

    from bot.claims import EventClaims, delivery_key

    # A slash command, a click and an event are acked before their claim; a modal submission,
    # whose ack carries its answer, is not.
    assert delivery_key("slash_commands", "E1", {"command": "/paper"}) == ("envelope:E1", True)
    assert delivery_key("interactive", "E2", {"type": "block_actions"}) == ("envelope:E2", True)
    assert delivery_key("events_api", "E3", {"event_id": "Ev3"}) == ("event:Ev3", True)
    assert delivery_key("interactive", "E4", {"type": "view_submission"}) == ("envelope:E4", False)
    assert delivery_key("hello", None, {})[0] is None

    path = tmp_path / "paperclub.db"
    store = open_store(path)
    clock = lambda: datetime(2026, 12, 1, tzinfo=timezone.utc)  # noqa: E731
    r1, r2 = EventClaims(store, "r1", clock), EventClaims(store, "r2", clock)
    handled, lock = [], threading.Lock()
    unlocked = threading.Event()

    def run(who):
        with lock:
            handled.append((who, unlocked.is_set()))
    locker = sqlite3.connect(path, isolation_level=None, timeout=30)
    locker.execute("BEGIN IMMEDIATE")  # another writer holds the file: the claims wait, the acks did not
    r1.after_ack("envelope:E1", lambda: run("r1"))
    r2.after_ack("envelope:E1", lambda: run("r2"))  # Slack's redelivery, to the other replica
    assert handled == []
    unlocked.set()
    locker.execute("COMMIT")
    locker.close()
    r1.close()  # waits for the claims in flight and what they ran
    r2.close()
    assert len(handled) == 1, handled
    assert handled[0][1], "handled while another writer held the file, so before its claim"
    store.close()


def test_the_rows_of_replicas_silent_for_a_day_are_dropped_and_live_ones_kept(store_url):
    from bot.health import check_health
    from bot.replica import forget_silent_replicas, write_heartbeat

    store = open_store(store_url)
    now = time.time()
    write_heartbeat(store, now - 2 * 86_400, replica="host-a:101")  # a start two days ago, long gone
    write_heartbeat(store, now, replica="host-b:202")  # the replica running now
    store.set_meta("alive:host-a:101:x", str(now))  # the second beat an older version wrote
    assert forget_silent_replicas(store, now) == 3  # the old one's heartbeat, its writer, and the old beat
    assert store.meta_items("heartbeat:") == {"heartbeat:host-b:202": str(now)}
    assert list(store.meta_items("alive:")) == []
    assert store.get_meta("heartbeat_by:host-a:101") is None
    assert store.get_meta("heartbeat_by:host-b:202") is not None
    assert forget_silent_replicas(store, now) == 0  # nothing more to drop
    store.close()
    assert check_health(store_url, now=now, replica="host-b:202").ok
