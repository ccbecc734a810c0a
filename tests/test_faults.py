"""Faults: Slack answering 429, 500 or dropping the connection on every Web API method the bot
uses; `disconnect` messages and killed sockets; the database locked by another writer.

Nothing may be lost: a reply arrives (or the user is told it failed), a daily
post ends up in the channel exactly once, every reaction ends up in the log.

The first half drives the real Bolt app in-process (process_before_response=True);
the second runs the real `paperclub run` process over Socket Mode. Both use the
weightless HashingEmbedder: these tests are about plumbing, not search quality.
"""
from __future__ import annotations

import json
import sqlite3
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from slack_bolt import BoltRequest
from slack_sdk import WebClient

from bot import blocks as bk
from bot.later import SORRY
from conftest import BOT_TOKEN, Locker, block_action_body, copy_db, make_deps, make_settings, until_retried
from figures import record

ROOT = Path(__file__).resolve().parent.parent
UTC = timezone.utc
CH = "C1"
NOW = datetime(2024, 6, 3, 9, 0, 5, tzinfo=UTC)
KINDS = ("429", "500", "drop")
INJECTED: dict[str, int] = {}  # fault kind -> how many were injected (figures)


def inject(fake, method: str, kind: str, times: int = 1) -> None:
    """Make the next `times` calls of `method` fail with `kind`."""
    if kind == "429":
        fake.fail(method, status=429, retry_after=1, times=times)
    elif kind == "500":
        fake.fail(method, status=500, times=times)
    else:
        fake.fail(method, drop=True, times=times)
    INJECTED[kind] = INJECTED.get(kind, 0) + times


@pytest.fixture(scope="module", autouse=True)
def figures():
    yield
    record("faults", injected=dict(INJECTED), lost=0)


# -- in-process: the real Bolt app against the fake Slack ---------------------------------------
class Env:
    """A store, a searcher and (built on first use, so auth.test can be faulted first) the app."""

    def __init__(self, fake, store, searcher, **settings):
        self.fake, self.store, self.searcher = fake, store, searcher
        self.settings = make_settings(slack_api_url=fake.api_url, timezone="UTC", **settings)
        self._app = None

    @property
    def app(self):
        if self._app is None:
            from bot.app import create_app
            from bot.scheduler import DailyService

            self.deps = make_deps(self.settings, self.store, self.searcher)
            self._service = DailyService(self.deps)
            self._service.sleep = lambda s: None  # our backoff; Retry-After is still honoured
            self._app = create_app(self.deps, process_before_response=True)
        return self._app

    @property
    def service(self):
        """The app's DailyService (building the app first)."""
        assert self.app is not None
        return self._service

    def close(self):
        if self._app is not None:
            self._service.shutdown()

    def dispatch(self, body: dict) -> int:
        return self.app.dispatch(BoltRequest(body=body, mode="socket_mode")).status

    def command(self, text: str, *, user: str = "U1", channel: str = CH) -> dict:
        url = self.fake.new_response_url(channel=channel, user=user)
        body = {"command": "/paper", "text": text, "user_id": user, "user_name": user.lower(),
                "channel_id": channel, "channel_name": "general", "team_id": "T1", "api_app_id": "A1",
                "response_url": url, "trigger_id": "1.2.3"}
        assert self.dispatch(body) == 200
        (reply,) = self.fake.responses(url)
        return reply

    def click(self, action_id: str, value: str, *, user: str = "U1", channel: str = CH) -> list[dict]:
        url = self.fake.new_response_url(channel=channel, user=user)
        body = block_action_body(action_id, value, url, user=user, channel=channel)
        assert self.dispatch(body) == 200
        return self.fake.responses(url)

    def event(self, event: dict, event_id: str) -> int:
        body = {"type": "event_callback", "team_id": "T1", "api_app_id": "A1", "event_id": event_id,
                "event_time": int(time.time()), "event": event,
                "authorizations": [{"team_id": "T1", "user_id": "UBOT", "is_bot": True}]}
        return self.dispatch(body)

    def post_daily(self, now=NOW, **kw):
        from bot.posting import post_daily

        return post_daily(self.app.client, self.store, self.searcher, CH, now, settings=self.settings,
                          feedback=self.deps.feedback, sleep=lambda s: None, **kw)


@pytest.fixture
def env(fake_slack, hashing_store):
    from store import HashingEmbedder
    from store import Searcher

    env = Env(fake_slack, hashing_store, Searcher(hashing_store, HashingEmbedder()))
    yield env
    env.close()


def daily_posts(fake, channel: str = CH) -> list[dict]:
    return [m for m in fake.messages(channel) if (m.get("metadata") or {}).get("event_type") == "paperclub_daily"]


def thread_replies(fake, ts: str, channel: str = CH) -> list[dict]:
    return [m for m in fake.messages(channel) if m.get("thread_ts") == ts and m["ts"] != ts]


def text_of(message: dict) -> str:
    return message.get("text", "") + " " + json.dumps(message.get("blocks") or [], ensure_ascii=False)


def a_paper(store):
    return next(store.iter_papers())


# One scenario per Web API method the bot calls (grep `client\.` in bot/): each makes the
# bot call it once with the fault in place, then checks what a person would see.
def auth_test(env, kind):
    inject(env.fake, "auth.test", kind)
    assert env.app is not None  # create_app's auth.test went through on a retry
    assert len(env.fake.calls("auth.test")) == 2


def share_post(env, kind):
    paper = a_paper(env.store)
    _ = env.app  # built before the fault
    inject(env.fake, "chat.postMessage", kind)
    replies = env.click(bk.ACTION_SHARE, paper.id, channel="C2")
    (posted,) = env.fake.messages("C2")  # once, not twice
    assert f"shared-{paper.id}" in text_of(posted)
    assert "Shared" in replies[-1]["text"]
    assert env.store.paper_for_message("C2", posted["ts"])["paper_id"] == paper.id


def daily_post(env, kind):
    _ = env.app  # built before the fault
    inject(env.fake, "chat.postMessage", kind)
    result = env.post_daily()
    assert result.status == "posted"
    (post,) = daily_posts(env.fake)
    assert len(thread_replies(env.fake, post["ts"])) == 1
    assert env.store.get_post(CH, "2024-06-03")["ts"] == post["ts"]


def history_lookup(env, kind):
    _ = env.app  # built before the fault
    inject(env.fake, "chat.postMessage", "500")  # ambiguous: the bot must look before posting again
    inject(env.fake, "conversations.history", kind)
    result = env.post_daily()
    assert result.status == "posted"
    assert len(daily_posts(env.fake)) == 1
    assert env.fake.calls("conversations.history")


def permalink(env, kind):
    env.post_daily(now=datetime.now(UTC))
    inject(env.fake, "chat.getPermalink", kind)
    reply = env.command("today")
    assert "Today's paper is *" in text_of(reply) and "slack.com/archives/C1/p" in text_of(reply)


def reactions_get(env, kind):
    # A share posted through a response_url: the bot learns its paper from reactions.get.
    paper = a_paper(env.store)
    ts = env.fake.add_message(CH, "U1 shared a paper", user="UBOT", bot_id="B1",
                              blocks=[{"type": "section", "block_id": f"shared-{paper.id}",
                                       "text": {"type": "mrkdwn", "text": paper.short_name}}])
    _ = env.app  # built before the fault
    inject(env.fake, "reactions.get", kind)
    ev = {"type": "reaction_added", "user": "U2", "reaction": "fire", "item_user": "UBOT",
          "item": {"type": "message", "channel": CH, "ts": ts}, "event_ts": f"{time.time():.6f}"}
    assert env.event(ev, "EvFAULT1") == 200
    (row,) = env.store.reactions(channel=CH)
    assert (row["paper_id"], row["user"], row["emoji"]) == (paper.id, "U2", "fire")


def views_publish(env, kind):
    _ = env.app  # built before the fault
    inject(env.fake, "views.publish", kind)
    assert env.event({"type": "app_home_opened", "user": "U9", "tab": "home", "channel": "D9"}, "EvHOME1") == 200
    assert "/paper search" in json.dumps(env.fake.home_view("U9"))


def unfurl(env, kind):
    # A pasted link to a paper already in the library (so nothing is fetched): the card arrives once.
    from store import HashingEmbedder, Record, ingest_records

    ingest_records(env.store, [Record(abstract="We study sparse attention for long videos and show that a "
                                               "learned router halves the cost at equal accuracy on five benchmarks.",
                                      title="Sparse Routers for Long Video", id="arXiv:2501.01234")],
                   HashingEmbedder(), now=time.time())
    url = "https://arxiv.org/abs/2501.01234v2"
    ts = env.fake.add_message(CH, url)
    _ = env.app  # built before the fault
    inject(env.fake, "chat.unfurl", kind)
    ev = {"type": "link_shared", "channel": CH, "user": "U1", "message_ts": ts, "unfurl_id": "x",
          "source": "conversations_history", "links": [{"domain": "arxiv.org", "url": url}]}
    assert env.event(ev, "EvUNFURL1") == 200
    (done,) = env.fake.unfurls()
    assert list(done["unfurls"]) == [url] and "Sparse Routers" in json.dumps(done["unfurls"])


def response_url(env, kind):
    # Not a Web API method, but every reply travels this way.
    _ = env.app  # built before the fault
    inject(env.fake, "response_url", kind)
    reply = env.command("search video grounding")  # exactly one copy arrived
    assert reply["text"].startswith("Papers for")


def _club(env, now):
    from store.club import ClubSpec, set_club

    _ = env.app  # built before the fault
    env.deps.clock.now = now
    set_club(env.store, CH, ClubSpec(3, 17, 0, "UTC", lead_hours=48, cutoff_hours=24), by="U1", now=now)
    env.fake.add_members("U1", "U2")  # the club's members are people of the workspace
    for m in ("U1", "U2"):
        env.store.set_club_member(CH, m, active=True, now=now.timestamp())
    return "2024-06-06"  # Thursday: nominations close Tue 17:00, votes Wed 17:00


def views_open(env, kind):
    _club(env, NOW)
    inject(env.fake, "views.open", kind)
    env.click(bk.ACTION_CLUB_SETUP, CH)
    (modal,) = env.fake.modals()
    assert modal["callback_id"] == bk.CLUB_SETUP_VIEW


def chat_update(env, kind):
    from bot.club import post_agenda
    from datetime import date

    day = _club(env, NOW)
    paper = a_paper(env.store)
    env.store.add_nomination(CH, day, paper.id, "U1", now=NOW.timestamp())
    env.deps.clock.now = NOW + timedelta(days=1, hours=9)  # Tue 18:00: the agenda is out, votes open
    ts = post_agenda(env.deps, env.deps.slack, CH, date.fromisoformat(day))
    inject(env.fake, "chat.update", kind)
    body = block_action_body(bk.ACTION_VOTE, f"{day}|{paper.id}", env.fake.new_response_url(), user="U2", channel=CH)
    body["container"] = {"type": "message", "channel_id": CH, "message_ts": ts, "is_ephemeral": False}
    assert env.dispatch(body) == 200
    (agenda,) = [m for m in env.fake.messages(CH) if m["ts"] == ts]
    assert "*1* vote" in json.dumps(agenda["blocks"])


def conversations_replies(env, kind):
    from bot.club import club_tick

    day = _club(env, NOW)
    paper = a_paper(env.store)
    thread = env.fake.add_message(CH, "Reading group", user="UBOT", bot_id="B1")
    env.fake.add_message(CH, "Does it generalise?", user="U2", thread_ts=thread)
    env.store.put_club_session(CH, day, paper_id=paper.id, presenter="U1", thread_ts=thread, now=NOW.timestamp())
    inject(env.fake, "conversations.replies", kind)
    at = datetime(2024, 6, 6, 20, 1, tzinfo=UTC)  # the recap, 3 h after the session
    env.deps.clock.now = at
    club_tick(env.deps, env.deps.slack, at, sleep=lambda s: None, budget=30)
    recaps = [m for m in env.fake.messages(CH) if m.get("thread_ts") == thread and "Recap" in m.get("text", "")]
    assert len(recaps) == 1 and "generalise?" in json.dumps(recaps[0]["blocks"])


def conversations_open(env, kind):
    """The presenter's DM: a fault opening it neither holds up the announcement nor loses the DM."""
    from bot.club import club_tick

    day = _club(env, NOW)
    env.fake.add_channel(CH)
    paper = a_paper(env.store)
    env.store.add_nomination(CH, day, paper.id, "U2", now=NOW.timestamp())
    inject(env.fake, "conversations.open", kind)
    for minute in (1, 2):  # the cutoff's tick, then the next minute's
        at = datetime(2024, 6, 5, 17, minute, tzinfo=UTC)
        env.deps.clock.now = at
        club_tick(env.deps, env.deps.slack, at, sleep=lambda s: None, budget=30)
    announced = [m for m in env.fake.messages(CH) if "has chosen" in json.dumps(m.get("blocks"))]
    presenter = env.store.get_club_session(CH, day)["presenter"]
    assert len(announced) == 1 and len(env.fake.dm_messages(presenter)) == 1


def files_upload(env, kind):
    day = _club(env, NOW)
    paper = a_paper(env.store)
    env.store.put_club_session(CH, day, state="held", paper_id=paper.id, presenter="U1", now=NOW.timestamp())
    inject(env.fake, "files.getUploadURLExternal", kind)
    reply = env.command("club export")
    assert "Uploaded" in reply["text"]
    done = [u for u in env.fake.uploads().values() if u.get("channel") == CH]
    assert sorted(u["filename"] for u in done) == ["reading-group.bib", "reading-group.csv"]


def post_ephemeral(env, kind):
    """A member joining a channel with a paper of the day: the private welcome arrives once."""
    env.command("interests add video grounding")
    env.command("schedule 09:00 UTC")
    inject(env.fake, "chat.postEphemeral", kind)
    joined = {"type": "member_joined_channel", "user": "U7", "channel": CH, "channel_type": "C", "team": "T1"}
    assert env.event(joined, "EvJOIN1") == 200
    welcomes = [m for m in env.fake.ephemeral_messages(CH) if m.get("user") == "U7"]
    assert len(welcomes) == 1 and "Welcome!" in welcomes[0]["text"]


SCENARIOS = {"response_url": response_url, "auth.test": auth_test, "chat.postMessage (share)": share_post,
             "chat.postMessage (daily)": daily_post, "conversations.history": history_lookup,
             "chat.getPermalink": permalink, "reactions.get": reactions_get, "views.publish": views_publish,
             "chat.unfurl": unfurl,
             "views.open": views_open, "chat.update": chat_update, "conversations.replies": conversations_replies,
             "files.upload_v2": files_upload, "conversations.open": conversations_open,
             "chat.postEphemeral": post_ephemeral}


def test_every_web_api_method_the_bot_uses_is_covered_here():
    import re

    used = set()
    for path in (ROOT / "bot").glob("*.py"):
        used |= set(re.findall(r"client\.([a-z]+_[A-Za-z]+)\(", path.read_text()))
    used.discard("is_connected")  # the Socket Mode client's own state, not a Web API call
    covered = {name.split(" ")[0].replace(".", "_") for name in SCENARIOS}
    # auth.test runs inside Bolt's App(); apps.connections.open inside the Socket Mode client
    # (test_reconnects_when_apps_connections_open_fails below).
    assert used <= covered, f"add a fault scenario for {used - covered}"


# `make check` runs each method under a 429 (Slack's commonest refusal, the retry path); the 500 and
# the dropped connection run in `make test`.
@pytest.mark.parametrize("kind", [k if k == "429" else pytest.param(k, marks=pytest.mark.slow) for k in KINDS])
@pytest.mark.parametrize("method", list(SCENARIOS))
def test_a_fault_on_each_web_api_method_loses_nothing(env, method, kind):
    SCENARIOS[method](env, kind)


# -- faults that last: the user is told, the daily post comes later, exactly once ----------------------
def test_a_share_slack_keeps_refusing_gets_an_apology_and_posts_nothing(env):
    paper = a_paper(env.store)
    _ = env.app  # built before the fault
    inject(env.fake, "chat.postMessage", "500", times=3)  # the first try and both of the SDK's retries
    replies = env.click(bk.ACTION_SHARE, paper.id, channel="C2")
    assert SORRY in replies[-1]["text"] and replies[-1]["response_type"] == "ephemeral"
    assert env.fake.messages("C2") == []


def test_a_reply_slack_keeps_refusing_is_logged_not_silently_dropped(env, caplog):
    import logging

    from bot.outgoing import RESPOND_TRIES

    _ = env.app  # built before the fault
    inject(env.fake, "response_url", "500", times=RESPOND_TRIES)
    url = env.fake.new_response_url()
    body = {"command": "/paper", "text": "search video grounding", "user_id": "U1", "channel_id": CH,
            "team_id": "T1", "api_app_id": "A1", "response_url": url, "trigger_id": "1.2.3"}
    with caplog.at_level(logging.WARNING):
        assert env.dispatch(body) == 200
    assert env.fake.responses(url) == []
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert any("HTTP 500" in m and "reply" in m for m in errors), errors


def test_a_daily_post_slack_keeps_refusing_is_made_once_when_it_is_back(env):
    from bot.scheduler import SWEEP_EVERY

    service = env.service
    service.clock.now = NOW - timedelta(days=1)
    env.command("schedule 09:00 UTC")
    service.budget = 0.5  # give up quickly; the sweep takes it from there
    service.clock.now = NOW
    inject(env.fake, "chat.postMessage", "500")  # with that budget, one failure is the whole try
    assert service.fire(CH).status == "failed"
    assert daily_posts(env.fake) == []
    env.fake.reset()
    service.budget = 60
    for _ in range(SWEEP_EVERY):
        service.poll()
    assert service.results[-1].status == "posted"
    assert len(daily_posts(env.fake)) == 1


def test_a_post_slack_took_but_never_answered_is_not_repeated_even_if_the_lookup_fails(env, fake_slack):
    # Both at once: the answer to chat.postMessage is lost (a timeout after Slack posted it), and
    # the channel lookup that would find it fails once. Posting blind then would post twice.
    from bot.deps import Feedback
    from bot.posting import post_daily

    fake = fake_slack
    fake.delay("chat.postMessage", 2.5, times=1, after=True)
    inject(fake, "conversations.history", "500")
    client = WebClient(token=BOT_TOKEN, base_url=fake.api_url, timeout=1)
    result = post_daily(client, env.store, env.searcher, CH, NOW, feedback=Feedback(), sleep=lambda s: None)
    assert result.status == "posted"
    assert len(daily_posts(fake)) == 1
    assert env.store.get_post(CH, "2024-06-03")["ts"] == daily_posts(fake)[0]["ts"]


# -- the database locked by another writer -------------------------------------------------------
def in_thread(fn, *args):
    out = {}

    def run():
        started = time.monotonic()
        out["value"] = fn(*args)
        out["ended"] = time.monotonic()
        out["seconds"] = out["ended"] - started
    t = threading.Thread(target=run)
    t.start()
    return t, out


@pytest.mark.sqlite_only  # SQLite's file lock; PostgreSQL's row locks: test_store.py
def test_a_database_locked_for_seconds_delays_writes_but_loses_none(env):
    from bot.blocks import ACTION_SAVE

    paper = a_paper(env.store)
    env.post_daily(now=NOW)  # a daily post to react to
    ts = env.store.get_post(CH, "2024-06-03")["ts"]
    service = env.service
    service.clock.now = NOW - timedelta(days=1)
    env.command("schedule 09:00 UTC", user="UADMIN", channel="C2")
    service.clock.now = NOW
    env.fake.reset()
    reaction = {"type": "reaction_added", "user": "U2", "reaction": "+1", "item_user": "UBOT",
                "item": {"type": "message", "channel": CH, "ts": ts}, "event_ts": f"{time.time():.6f}"}

    locker = Locker(env.store)
    jobs = {
        "search": in_thread(env.command, "search video grounding"),
        "interests": in_thread(env.command, "interests add graph neural networks"),
        "schedule": in_thread(env.command, "schedule 10:00 UTC"),
        "save": in_thread(env.click, ACTION_SAVE, paper.id),
        "reaction": in_thread(env.event, reaction, "EvLOCK1"),
        "daily": in_thread(service.fire, "C2"),
    }
    jobs["search"][0].join(10)
    searched_while_locked = not jobs["search"][0].is_alive()
    time.sleep(3)  # the lock is held for seconds: the fault itself
    released = time.monotonic()
    locker.release()
    for t, _ in jobs.values():
        t.join(30)
    out = {name: o for name, (_, o) in jobs.items()}
    waited = {name: o["ended"] >= released for name, o in out.items() if name != "search"}
    assert all(waited.values()), waited  # the writers waited for the lock: none finished under it

    assert searched_while_locked  # readers are not blocked by a writer (WAL)
    assert "Papers for" in out["search"]["value"]["text"] or "Top" in text_of(out["search"]["value"])
    assert "Added *graph neural networks*" in text_of(out["interests"]["value"])
    assert env.store.get_schedule(CH)["hour"] == 10
    assert "Saved" in out["save"]["value"][0]["text"]
    assert [r["emoji"] for r in env.store.reactions(channel=CH)] == ["+1"]
    assert out["daily"]["value"].status == "posted" and len(daily_posts(env.fake, "C2")) == 1
    for o in out.values():
        assert "locked" not in json.dumps(o["value"], default=str)
    record("db_locked", lock_seconds=3, writes_waited=5, lost=0,
           slowest_write_seconds=round(max(o["seconds"] for n, o in out.items() if n != "search"), 2),
           search_seconds=round(out["search"]["seconds"], 2))


def test_a_lock_longer_than_the_busy_timeout_tells_the_user_and_still_logs_the_reaction(fake_slack, quick_busy_store):
    """Another connection holds the write lock past the store's wait (SQLite's busy timeout,
    PostgreSQL's lock_timeout): a command gets the short apology, a reaction is waited out."""
    from store import HashingEmbedder
    from store import Searcher

    s = quick_busy_store
    env = Env(fake_slack, s, Searcher(s, HashingEmbedder()))
    try:
        env.post_daily(now=NOW)
        ts = s.get_post(CH, "2024-06-03")["ts"]
        reaction = {"type": "reaction_added", "user": "U2", "reaction": "fire", "item_user": "UBOT",
                    "item": {"type": "message", "channel": CH, "ts": ts}, "event_ts": f"{time.time():.6f}"}
        with Locker(s).until_retried() as retried:
            reply = env.command("interests add graph neural networks")
            assert env.event(reaction, "EvLOCK2") == 200
        assert SORRY in reply["text"] and reply["response_type"] == "ephemeral"  # told, briefly
        assert "lock" not in text_of(reply) and "Traceback" not in text_of(reply)
        assert s.interests(CH) == []  # not half-written: the member tries again
        assert [r["emoji"] for r in s.reactions(channel=CH)] == ["fire"]  # waited out, not dropped
        assert retried, "the reaction should have met the lock"
    finally:
        env.close()


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True, scope="module")
def test_commands_right_after_the_database_server_restarted_are_answered_not_apologised_for(env):
    """A PostgreSQL restart (or failover) ends every connection the bot's pool holds; the server is
    back, so the next commands must be answered, not each spend one dead pooled connection."""
    import psycopg
    from contextlib import ExitStack

    _ = env.app
    with ExitStack() as held:  # a busy minute: the pool has grown to several connections
        pids = [held.enter_context(env.store.connection()).info.backend_pid for _ in range(4)]
    with psycopg.connect(env.store.url, autocommit=True) as admin:  # what a restart does to them
        for pid in pids:
            admin.execute("select pg_terminate_backend(%s)", [pid])

    replies = [env.command("interests add graph neural networks"), env.command("search video grounding"),
               env.command("interests"), env.command("search graph neural networks")]
    assert not [r for r in replies if SORRY in r.get("text", "")], [r.get("text") for r in replies]
    assert [r["text"] for r in env.store.interests(CH)] == ["graph neural networks"]


# -- the real process over Socket Mode ------------------------------------------------------------------
@pytest.fixture(scope="module")
def bot(hashing_db, tmp_path_factory):
    from botproc import start_bot
    from fake_slack import start_fake_slack
    from store import open_store

    tmp = tmp_path_factory.mktemp("faults")
    db = copy_db(hashing_db, tmp / "bot.db")
    s = open_store(db)  # a daily post in C1 to react to
    s.claim_post(CH, "2024-06-03", claimer="earlier", paper_id=a_paper(s).id, pick=None, now=NOW.timestamp())
    s.finish_post(CH, "2024-06-03", claimer="earlier", ts="1717405205.000100", now=NOW.timestamp(),
                  claimed_at=NOW.timestamp())
    s.close()
    with start_fake_slack() as fake:
        bot = start_bot(fake, db, tmp / "bot.log")
        try:
            yield bot
        finally:
            bot.stop()
        assert "Traceback" not in bot.logs()


def send_command(fake, text: str, user: str = "U1", channel: str = CH) -> tuple[str, str]:
    url = fake.new_response_url(channel=channel, user=user)
    envelope = fake.slash_command(text, user=user, channel=channel, response_url=url)
    return envelope, url


def send_reaction(fake, user: str, emoji: str) -> str:
    return fake.event({"type": "reaction_added", "user": user, "reaction": emoji, "item_user": "UBOT",
                       "item": {"type": "message", "channel": CH, "ts": "1717405205.000100"}})


def logged_reactions(db: Path) -> list[tuple]:
    conn = sqlite3.connect(db, timeout=30)
    try:
        return conn.execute("select user, emoji from reactions order by id").fetchall()
    finally:
        conn.close()


def interests_of(db: Path) -> list[str]:
    conn = sqlite3.connect(db, timeout=30)
    try:
        return [r[0] for r in conn.execute("select text from interests where channel = ?", [CH])]
    finally:
        conn.close()


@pytest.mark.slow
@pytest.mark.parametrize("how", ["disconnect", "killed socket"])
def test_replies_and_reactions_in_flight_survive_the_connection_going_away(bot, how):
    fake = bot.fake
    fake.reset()
    before = fake.connections_total
    reactions_before = len(logged_reactions(bot.db))
    locker = Locker(str(bot.db))  # so the work is still in flight when the socket goes
    try:
        sent = [send_command(fake, f"interests add topic {how} {i}") for i in range(3)]
        sent += [send_command(fake, "search video grounding")]
        events = [send_reaction(fake, f"U{i}", "fire") for i in range(3)]
        for envelope in [e for e, _ in sent] + events:
            fake.wait_ack(envelope, timeout=3)  # acked at once, whatever the database does
        gone = time.monotonic()
        if how == "disconnect":
            fake.send_disconnect("refresh_requested")
        else:
            fake.kill_socket()
        fake.wait_connected(total=before + 1, timeout=30)
        deaf = time.monotonic() - gone  # Slack cannot deliver a command to the bot meanwhile
        time.sleep(1)
    finally:
        locker.release()
    for _, url in sent:  # replies go out over HTTP (response_url), not the socket: none is lost
        (reply,) = fake.wait_for(lambda: fake.responses(url), timeout=30)  # noqa: B023 (waited on here)
        assert SORRY not in reply["text"]
    assert all(f"topic {how} {i}" in interests_of(bot.db) for i in range(3))
    fake.wait_for(lambda: len(logged_reactions(bot.db)) == reactions_before + 3, timeout=30)
    fake.wait_for(lambda: fake.connections_open == 1, timeout=10)
    envelope, url = send_command(fake, "search speculative decoding")  # and the new connection works
    fake.wait_ack(envelope, timeout=3)
    assert fake.wait_for(lambda: fake.responses(url), timeout=10)
    assert bot.alive()
    record(f"socket_{how.replace(' ', '_')}", reconnect_seconds=round(deaf, 2), replies_in_flight=len(sent),
           reactions_in_flight=len(events), lost=0)
    assert deaf < 6, f"no connection for {deaf:.1f} s"  # commands sent meanwhile fail in Slack


@pytest.mark.slow
@pytest.mark.parametrize("kind, times", [("429", 1), ("500", 1), ("drop", 1), ("500", 4)])
def test_reconnects_when_apps_connections_open_fails(bot, kind, times):
    fake = bot.fake
    fake.reset()
    fake.wait_for(lambda: fake.connections_open == 1, timeout=10)
    before = fake.connections_total
    inject(fake, "apps.connections.open", kind, times=times)
    fake.kill_socket()
    fake.wait_connected(total=before + 1, timeout=60)
    assert len(fake.calls("apps.connections.open")) >= times + 1
    envelope, url = send_command(fake, "help")
    fake.wait_ack(envelope, timeout=3)
    assert fake.wait_for(lambda: fake.responses(url), timeout=10)



@pytest.fixture
def read_only_env(fake_slack, own_pg_database):
    """The bot on a PostgreSQL database of its own (conftest.OwnDatabase) that turns read-only while
    the bot runs: env.turn_read_only(), and env.turn_writable() when the failover is over."""
    from store import HashingEmbedder, Searcher, open_store

    store = open_store(own_pg_database.url)
    env = Env(fake_slack, store, Searcher(store, HashingEmbedder()))
    env.turn_read_only, env.turn_writable = own_pg_database.turn_read_only, own_pg_database.turn_writable
    yield env
    env.close()
    store.close()


def test_a_read_only_postgresql_still_answers_reads_and_says_kindly_that_writes_wait(read_only_env, caplog):
    """Reads answer on a server that refuses writes; a write is told, in the member's words, that
    it cannot be saved now (no database address, no apology for a bug), and logged without a
    traceback for whoever runs the bot."""
    env = read_only_env
    papers = list(env.store.iter_papers())
    env.command(f"save {papers[0].id}", user="U2")  # a reading list to read back
    env.turn_read_only()

    found = env.command("search video grounding")
    assert "video" in text_of(found).lower() and "read-only" not in text_of(found)
    assert papers[0].short_name in text_of(env.command("saved", user="U2"))
    summary = env.command(f"summary {papers[1].id}")  # not cached: the cache write is skipped
    assert "TL;DR" in text_of(summary) and "read-only" not in text_of(summary)

    typed = env.command("interests add graph neural networks")
    [clicked] = env.click(bk.ACTION_SAVE, papers[2].id, user="U3")
    for reply in (typed, clicked):
        said = text_of(reply)
        assert "can't be saved right now" in said and SORRY not in said, said
        assert "postgresql://" not in said and "PAPERCLUB_DB" not in said and "INSERT" not in said
    assert env.store.interests(CH) == [] and env.store.saved_papers("U3") == []
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"
    assert any("read-only" in r.getMessage() and "PAPERCLUB_DB" in r.getMessage() for r in caplog.records)


def test_a_reaction_on_a_read_only_postgresql_is_waited_out_and_lands_once_it_is_writable(read_only_env):
    """A failover usually ends within minutes. A reaction has nobody to tell "try again later", so
    it is retried as on a busy database and counts once the database takes writes again; a typed
    verdict is answered at once, as any typed write."""
    env = read_only_env
    env.post_daily(now=NOW)
    ts = env.store.get_post(CH, "2024-06-03")["ts"]
    paper = a_paper(env.store)
    env.turn_read_only()

    typed = env.command(f"for-me {paper.id}", user="U3")
    assert "can't be saved right now" in text_of(typed) and SORRY not in text_of(typed)

    reaction = {"type": "reaction_added", "user": "U2", "reaction": "fire", "item_user": "UBOT",
                "item": {"type": "message", "channel": CH, "ts": ts}, "event_ts": f"{time.time():.6f}"}
    with until_retried("database read-only", env.turn_writable) as retried:
        assert env.event(reaction, "EvRO1") == 200
    assert retried, "the reaction should have met the read-only database"
    assert [(r["user"], r["emoji"]) for r in env.store.reactions(channel=CH)] == [("U2", "fire")]
