"""Reactions as feedback, end to end: Slack events over Socket Mode from the fake Slack into the real
Bolt app, the log in a real SQLite file, and what the team reads back (/paper digest, saved, the
App Home, the next day's post).

The real model decides which paper is "close" to a liked one, so the seed store embedded with
all-MiniLM-L6-v2 is used; the daily posts run on an injected clock.
"""
from __future__ import annotations

import json
import sqlite3
import threading
import time
from datetime import datetime, timezone
from types import SimpleNamespace

import pytest
from slack_bolt import BoltRequest
from slack_bolt.adapter.socket_mode import SocketModeHandler

from bot import blocks as bk
from bot.posting import EVENT_TYPE
from bot.scheduler import DailyService
from conftest import dispatch_command, text_of, APP_TOKEN, Clock, make_deps, make_settings
from fake_slack import BOT_USER_ID, stop_socket_mode
from store import pick_for_day

pytestmark = [pytest.mark.slow, pytest.mark.both_backends]  # the real model; each store backend

CH = "C1"
UTC = timezone.utc
DAY1 = datetime(2024, 6, 3, 9, 0, 5, tzinfo=UTC)
# Two days in a row that are not exploration days for C1 (store.pick.is_exploration_day).
WED = datetime(2024, 6, 5, 9, 0, 5, tzinfo=UTC)
THU = datetime(2024, 6, 6, 9, 0, 5, tzinfo=UTC)


# -- helpers ---------------------------------------------------------------------------------
def command(app, fake, text: str, *, user: str = "UALICE", channel: str = CH) -> dict:
    return dispatch_command(app, fake, text, user=user, channel=channel)


def reaction(user: str, emoji: str, ts: str, *, at: datetime, removed: bool = False,
             item_user: str = BOT_USER_ID, channel: str = CH) -> dict:
    return {"type": "reaction_removed" if removed else "reaction_added", "user": user, "reaction": emoji,
            "item_user": item_user, "item": {"type": "message", "channel": channel, "ts": ts},
            "event_ts": f"{at.timestamp():.6f}"}


def deliver(fake, event: dict, event_id: str, **retry) -> None:
    """Send an events_api envelope over Socket Mode and wait for the app's ack."""
    fake.wait_ack(fake.event(event, event_id=event_id, **retry), timeout=10)


@pytest.fixture
def searcher(seed_store, real_embedder):
    from store import Searcher

    return Searcher(seed_store, real_embedder)


@pytest.fixture
def bot(fake_slack, seed_store, searcher):
    """The real app on Socket Mode against the fake Slack (listeners finish before their ack)."""
    from bot.app import create_app

    settings = make_settings(slack_api_url=fake_slack.api_url, timezone="UTC")
    deps = make_deps(settings, seed_store, searcher)
    app = create_app(deps, process_before_response=True)
    service = DailyService(deps)
    service.sleep = lambda seconds: None
    handler = SocketModeHandler(app, APP_TOKEN)
    handler.connect()
    fake_slack.wait_connected()
    yield SimpleNamespace(app=app, deps=deps, service=service, store=seed_store, fake=fake_slack)
    stop_socket_mode(fake_slack, handler)
    service.shutdown()


def post_day(bot, when: datetime) -> dict:
    bot.service.clock.now = when
    result = bot.service.fire(CH)
    assert result.status == "posted", result
    return bot.store.get_post(CH, when.date().isoformat())


def paper_named(store, name: str):
    return next(p for p in store.iter_papers() if p.short_name == name)


# -- the log and the digest ------------------------------------------------------------------
def test_reactions_are_logged_once_and_tallied_exactly_in_the_digest(bot):
    app, fake, store = bot.app, bot.fake, bot.store
    command(app, fake, "interests add machine learning")
    command(app, fake, "schedule 09:00 UTC")
    post = post_day(bot, DAY1)
    ts, abstract_ts = post["ts"], post["abstract_ts"]
    name = store.get_paper(post["paper_id"]).short_name
    chatter = fake.add_message(CH, "lunch anyone?", user="U2")
    notice = next(m for m in fake.messages(CH) if "set the paper of the day" in text_of(m))
    at = DAY1.replace(hour=10)

    deliver(fake, reaction("UALICE", "fire", ts, at=at), "EvA")
    deliver(fake, reaction("UBOB", "+1::skin-tone-3", ts, at=at), "EvB")
    deliver(fake, reaction("UCAROL", "thumbsup", ts, at=at), "EvC")
    deliver(fake, reaction("UCAROL", "thumbsup", ts, at=at), "EvC")  # the same event, delivered again
    deliver(fake, reaction("UALICE", "fire", ts, at=at), "EvA", retry_attempt=1, retry_reason="timeout")
    deliver(fake, reaction("UDAN", "sleeping", ts, at=at), "EvD1")
    deliver(fake, reaction("UDAN", "sleeping", ts, at=at.replace(minute=5), removed=True), "EvD2")
    deliver(fake, reaction("UEVE", "eyes", abstract_ts, at=at), "EvE")  # on the abstract, in the thread
    deliver(fake, reaction("UEVE", "fire", chatter, at=at, item_user="U2"), "EvF")  # someone else's message
    deliver(fake, reaction("UEVE", "heart", notice["ts"], at=at), "EvG")  # the bot's, but no paper in it

    logged = store.reactions(channel=CH)
    assert [(r["event_id"], r["user"], r["base"], r["action"]) for r in logged] == [
        ("EvA", "UALICE", "fire", "added"), ("EvB", "UBOB", "+1", "added"), ("EvC", "UCAROL", "+1", "added"),
        ("EvD1", "UDAN", "sleeping", "added"), ("EvE", "UEVE", "eyes", "added"),
        ("EvD2", "UDAN", "sleeping", "removed")]
    assert {r["paper_id"] for r in logged} == {post["paper_id"]}
    assert [c.params["timestamp"] for c in fake.calls("reactions.get")] == [notice["ts"]]

    # After a restart the in-memory de-duplication is gone; the log's unique event_id still holds.
    from bot.app import create_app

    again = create_app(make_deps(bot.deps.settings, store, bot.deps.searcher), process_before_response=True)
    body = {"type": "event_callback", "team_id": "T1", "api_app_id": "A1", "event_id": "EvA", "event_time": 1,
            "authorizations": [{"user_id": BOT_USER_ID}], "event": reaction("UALICE", "fire", ts, at=at)}
    assert again.dispatch(BoltRequest(body=body, mode="socket_mode")).status == 200
    assert len(store.reactions(channel=CH)) == 6

    bot.service.clock.now = DAY1.replace(hour=18)
    digest = text_of(command(app, fake, "digest"))
    assert f"*{bk.esc(name)}* (Mon 3 Jun, paper of the day): 👍 2 · 🔥 1 · 👀 1" in digest
    assert f":trophy: Most liked: *{bk.esc(name)}*, 👍 2 · 🔥 1 · 👀 1 from 4 people." in digest
    assert "4 people reacted 4 times: <@UALICE> 1 · <@UBOB> 1 · <@UCAROL> 1 · <@UEVE> 1" in digest
    assert "UDAN" not in digest  # took the reaction back: not listed, not counted
    assert "lunch" not in digest

    saved = text_of(command(app, fake, "saved", user="UEVE"))
    assert "Your reading list (1)" in saved and bk.esc(name) in saved
    deliver(fake, {"type": "app_home_opened", "user": "UEVE", "tab": "home", "channel": "D1"}, "EvH")
    home = json.dumps(fake.wait_for(lambda: fake.home_view("UEVE")), ensure_ascii=False)
    assert "Your reading list (1)" in home and "Your recent reactions" in home and "👀 on" in home

    # forget-me removes Bob's rows and says what went; the tallies follow.
    forgot = text_of(command(app, fake, "forget-me confirm", user="UBOB"))
    assert "Done. I deleted your reactions and verdicts on 1 paper." in forgot
    forgot_eve = text_of(command(app, fake, "forget-me confirm", user="UEVE"))
    assert ("Done. I deleted your reactions and verdicts on 1 paper and emptied your reading list (1 paper)."
            in forgot_eve)
    nothing = text_of(command(app, fake, "forget-me confirm", user="UEVE"))
    assert "I had nothing stored about you" in nothing
    assert store.reactions(user="UBOB") == []
    assert store.reactions(user="UEVE") == [] and store.saved_papers("UEVE") == []
    assert len(store.reactions(channel=CH)) == 4
    after = text_of(command(app, fake, "digest 1"))
    assert f"*{bk.esc(name)}* (Mon 3 Jun, paper of the day): 🔥 1 · 👍 1" in after
    assert "UBOB" not in after and "UEVE" not in after


# -- the next day's pick ---------------------------------------------------------------------------
def test_a_liked_share_moves_the_next_days_pick_towards_it(bot, real_embedder):
    app, fake, store = bot.app, bot.fake, bot.store
    command(app, fake, "interests add machine learning")
    command(app, fake, "schedule 09:00 UTC")
    day1 = post_day(bot, WED)
    spike = paper_named(store, "SPIKE")

    # Bob shares SPIKE with the Share button; Carol shares it by command: both posts are known at once.
    fake.wait_ack(fake.block_action(bk.ACTION_SHARE, value=spike.id, user="UBOB", channel=CH), timeout=10)
    shared = [m for m in fake.messages(CH) if f"shared-{spike.id}" in text_of(m)]
    assert len(shared) == 1 and store.paper_for_message(CH, shared[0]["ts"])["kind"] == "share"
    command(app, fake, f"share {spike.id}", user="UCAROL")
    by_command = [m for m in fake.messages(CH) if f"shared-{spike.id}" in text_of(m)][-1]
    known = store.paper_for_message(CH, by_command["ts"])
    assert (known["paper_id"], known["kind"]) == (spike.id, "share")

    at = WED.replace(hour=14)
    deliver(fake, reaction("UALICE", "fire", shared[0]["ts"], at=at), "EvS1")
    deliver(fake, reaction("UBOB", "+1", day1["ts"], at=at), "EvS2")
    deliver(fake, reaction("UDAN", "heart", by_command["ts"], at=at), "EvS3")
    assert [r["paper_id"] for r in store.reactions(channel=CH, user="UDAN")] == [spike.id]

    # The same day without any reactions: what the pick would have been.
    ids, matrix = store.load_vectors(real_embedder.name)
    without = pick_for_day(store, bot.deps.searcher, CH, THU.date(), feedback=None)
    with_feedback = pick_for_day(store, bot.deps.searcher, CH, THU.date(), feedback=bot.deps.feedback)
    assert pick_for_day(store, bot.deps.searcher, CH, THU.date(), feedback=bot.deps.feedback).to_dict() == with_feedback.to_dict()
    assert with_feedback.paper_id != without.paper_id
    vec = {pid: matrix[i] for i, pid in enumerate(ids)}
    closeness = lambda pid: float(vec[pid] @ vec[spike.id])  # noqa: E731
    assert closeness(with_feedback.paper_id) > closeness(without.paper_id) + 0.2
    assert with_feedback.paper_id != spike.id  # shown to the team already: never the pick itself

    day2 = post_day(bot, THU)
    assert day2["paper_id"] == with_feedback.paper_id
    message = next(m for m in fake.messages(CH) if m["ts"] == day2["ts"])
    assert message["metadata"]["event_type"] == EVENT_TYPE
    posted = text_of(message)
    assert "close to *SPIKE*, which got 🔥 · ❤️ from <@UALICE> and <@UDAN>" in posted
    first = bk.esc(store.get_paper(day1["paper_id"]).short_name)
    assert f"How the team took the last pick (Wed 5 Jun), *{first}*: 👍 1 from 1 person." in posted


# -- a busy database -------------------------------------------------------------------------
def test_a_reaction_that_meets_a_locked_database_is_retried_not_lost(tmp_path, monkeypatch):
    """Another process holds the write lock longer than the busy timeout: the write waits it out."""
    import store.backends.sqlite as db_module
    from bot.reactions import handle_reaction_added

    monkeypatch.setattr(db_module, "BUSY_TIMEOUT_MS", 100)
    store = db_module.SQLiteStore(tmp_path / "busy.db")
    store.write_papers([{"id": "p1", "short_name": "P1", "headline": "h", "abstract": "a",
                         "content_hash": "x"}], [], now=time.time())
    store.record_message_paper(CH, "100.000001", "p1", kind="share", now=1.0)
    holder = sqlite3.connect(tmp_path / "busy.db", check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("insert into meta(key, value) values ('held', '1')")
    release = threading.Timer(1.0, holder.commit)
    release.start()
    slept = []
    body = {"event_id": "EvBusy", "event_time": 1,
            "event": reaction("UALICE", "fire", "100.000001", at=DAY1)}
    started = time.monotonic()
    result = handle_reaction_added(SimpleNamespace(store=store, clock=Clock()), body,
                                   sleep=lambda s: (slept.append(s), time.sleep(s)))
    release.join()
    assert result.status == "recorded"
    assert slept, "the first attempt should have met the lock"
    assert [r["event_id"] for r in store.reactions(channel=CH)] == ["EvBusy"]
    assert time.monotonic() - started < 10
    holder.close()
    store.close()
