"""The club's scheduled posts with an injected clock against the fake Slack: a full cycle
(agenda, winner, reminder, thread, recap) and each post exactly once under 429, 500 and a
crash right after Slack accepted it."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from bot.club import club_tick
from bot.posting import SCHEDULED_EVENT
from conftest import Clock, make_deps, make_settings, text_of
from store import HashingEmbedder, Searcher
from store.club import ClubSpec, set_club
from store.text import member_tag

CH = "C1"
MONDAY = datetime(2026, 11, 30, 8, tzinfo=timezone.utc)
SESSION = datetime(2026, 12, 3, 16, tzinfo=timezone.utc)  # Thu 17:00 Berlin
MOMENTS = {"agenda": SESSION - timedelta(hours=48), "winner": SESSION - timedelta(hours=24),
           "reminder": SESSION - timedelta(hours=1), "thread": SESSION, "recap": SESSION + timedelta(hours=3)}


@pytest.fixture
def world(fake_slack, hashing_store):
    clock = Clock(MONDAY)
    settings = make_settings(slack_api_url=fake_slack.api_url)
    deps = make_deps(settings, hashing_store, Searcher(hashing_store, HashingEmbedder()), clock=clock)
    set_club(hashing_store, CH, ClubSpec(3, 17, 0, "Europe/Berlin", lead_hours=48, cutoff_hours=24),
             by="U0", now=MONDAY)
    fake_slack.add_members("UANN", "UBOB", "UCY")  # the club's members are people of the workspace
    fake_slack.add_channel(CH)  # and its channel a channel of it (the presenter's DM links it)
    for m in ("UANN", "UBOB", "UCY"):
        hashing_store.set_club_member(CH, m, active=True, now=MONDAY.timestamp())
    return fake_slack, hashing_store, clock, deps


def scheduled(fake) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for m in fake.messages(CH):
        meta = m.get("metadata") or {}
        if meta.get("event_type") == SCHEDULED_EVENT:
            out.setdefault(meta["event_payload"]["kind"], []).append(m)
    return out


def tick(deps, at):
    deps.clock.now = at
    return club_tick(deps, deps.slack, at, sleep=lambda s: None, budget=30)


def test_full_cycle_with_proposals_votes_thread_and_recap(world):
    fake, store, clock, deps = world
    tick(deps, MONDAY)
    assert scheduled(fake) == {}  # nothing due yet
    tick(deps, MOMENTS["agenda"] + timedelta(minutes=1))
    agenda = scheduled(fake)["agenda"][0]
    assert "three from the team's interests" in text_of(agenda)
    noms = store.nominations(CH, "2026-12-03")
    assert len(noms) == 3
    store.add_vote(CH, "2026-12-03", "UBOB", noms[2]["paper_id"], limit=3, now=0)
    tick(deps, MOMENTS["winner"] + timedelta(minutes=1))
    winner = scheduled(fake)["winner"][0]
    paper = store.get_paper(noms[2]["paper_id"])
    assert paper.short_name in text_of(winner) or paper.short_name.replace("&", "&amp;") in text_of(winner)
    assert "(1 votes)" in text_of(winner)
    closed = next(m for m in fake.messages(CH) if m["ts"] == agenda["ts"])
    assert "Voting has closed" in text_of(closed)  # the agenda was updated in place
    # It marks the paper we read, as the announcement names it, and only that one.
    marked = [b for b in closed["blocks"] if ":white_check_mark: *we read this*" in str(b)]
    assert [b["block_id"].endswith(paper.id) for b in marked] == [True]
    tick(deps, MOMENTS["reminder"] + timedelta(minutes=1))
    tick(deps, MOMENTS["thread"] + timedelta(minutes=1))
    thread = scheduled(fake)["thread"][0]
    assert "To discuss" in text_of(thread) and "Presenter:" in text_of(thread)
    assert text_of(thread).count("?") >= 3
    # People discuss in the thread; the fake holds the replies.
    a = fake.add_message(CH, "The ablation in table 2 is the key result.", user="UANN", thread_ts=thread["ts"])
    fake.add_reaction(CH, a, "fire", user="UBOB")
    fake.add_message(CH, "Does it hold for longer videos?", user="UBOB", thread_ts=thread["ts"])
    fake.add_message(CH, "Why not compare with the baseline?", user="UCY", thread_ts=thread["ts"])
    fake.add_message(CH, "Because the baseline needs labels.", user="UANN", thread_ts=thread["ts"])
    tick(deps, MOMENTS["recap"] + timedelta(minutes=1))
    recap = [m for m in fake.messages(CH) if m.get("thread_ts") == thread["ts"]
             and (m.get("metadata") or {}).get("event_payload", {}).get("kind") == "recap"]
    assert len(recap) == 1
    body = text_of(recap[0])
    assert all(f"<@{u}>" in body for u in ("UANN", "UBOB", "UCY"))
    assert "ablation" in body  # the point most reacted to
    assert "longer videos?" in body and "compare with the baseline" not in body  # only the unanswered one
    assert store.get_club_session(CH, "2026-12-03")["state"] == "held"
    # Every later tick (a restart, the sweep) changes nothing.
    before = len(fake.messages(CH))
    for at in MOMENTS.values():
        tick(deps, at + timedelta(minutes=5))
    assert len(fake.messages(CH)) == before


@pytest.mark.parametrize("fault", ["429", "500"])
def test_each_post_lands_once_under_faults(world, fault):
    fake, store, clock, deps = world
    for step, at in MOMENTS.items():
        if step == "recap":
            break
        if fault == "429":
            fake.fail("chat.postMessage", retry_after=0, times=1)
        else:
            fake.fail("chat.postMessage", status=500, times=2)
        tick(deps, at + timedelta(minutes=1))
        tick(deps, at + timedelta(minutes=2))  # the next tick must not post again
    posts = scheduled(fake)
    assert {k: len(v) for k, v in posts.items()} == {"agenda": 1, "winner": 1, "reminder": 1, "thread": 1}


def test_a_crash_after_slack_accepted_is_recovered_not_reposted(world):
    fake, store, clock, deps = world
    at = MOMENTS["reminder"] + timedelta(minutes=1)
    tick(deps, MOMENTS["agenda"] + timedelta(minutes=1))
    tick(deps, MOMENTS["winner"] + timedelta(minutes=1))
    # A process claimed the reminder, Slack accepted it, and the process died (kill -9) before
    # recording the ts: a dead pid on this host holds the claim, the message is in the channel.
    import os
    import socket

    dead = f"{socket.gethostname()}:{2**22 + 7}:deadbeef"
    assert not os.path.exists(f"/proc/{2**22 + 7}")
    assert store.claim_post(CH, "reminder:2026-12-03", kind="reminder", claimer=dead, now=at.timestamp())
    fake.add_message(CH, "Reading group soon", user="UBOT", bot_id="B1",
                     metadata={"event_type": SCHEDULED_EVENT,
                               "event_payload": {"kind": "reminder", "key": "reminder:2026-12-03"}})
    results = tick(deps, at + timedelta(minutes=1))
    assert [r.status for step, _, r in results if step == "reminder"] == ["recovered"]
    assert len(scheduled(fake)["reminder"]) == 1
    assert store.get_post(CH, "reminder:2026-12-03")["status"] == "posted"


def test_the_scheduler_runs_the_club_tick(world):
    fake, store, clock, deps = world
    clock.now = MOMENTS["agenda"] + timedelta(minutes=1)
    from bot.scheduler import DailyService

    scheduler = DailyService(deps)
    results = scheduler.club_tick_now()
    assert [(step, r.status) for step, _, r in results] == [("agenda", "posted")]
    again = scheduler.club_tick_now()
    assert [(step, r.status) for step, _, r in again] == [("agenda", "already")]
    assert len(scheduled(fake)["agenda"]) == 1


def presenter_dms(fake, user):
    return [m for m in fake.dm_messages(user)
            if (m.get("metadata") or {}).get("event_payload", {}).get("kind") == "presenter_dm"]


def test_the_presenter_gets_one_dm_with_the_summary_and_an_outline(world):
    fake, store, clock, deps = world
    tick(deps, MOMENTS["agenda"] + timedelta(minutes=1))
    tick(deps, MOMENTS["winner"] + timedelta(minutes=1))
    session = store.get_club_session(CH, "2026-12-03")
    presenter, paper = session["presenter"], store.get_paper(session["paper_id"])
    [dm] = presenter_dms(fake, presenter)
    body = text_of(dm)
    assert "You present" in body and f"<#{CH}>" in body
    name = paper.short_name.replace("&", "&amp;")
    assert name in body
    for part in ("A suggested outline", "Problem", "Approach", "Results", "Questions"):
        assert part in body
    assert body.count("?") >= 3  # the discussion questions
    assert all(presenter_dms(fake, u) == [] for u in ("UANN", "UBOB", "UCY") if u != presenter)
    # Later ticks until the session (the winner step stays due) and the rest of the cycle send no second DM,
    # and do not open the DM again.
    opened = len(fake.calls("conversations.open"))
    for at in (MOMENTS["winner"] + timedelta(minutes=2), MOMENTS["reminder"] + timedelta(minutes=1),
               MOMENTS["thread"] + timedelta(minutes=1)):
        tick(deps, at)
    assert len(presenter_dms(fake, presenter)) == 1
    assert len(fake.calls("conversations.open")) == opened


@pytest.mark.parametrize("fault", ["open", "post"])
def test_a_failing_dm_does_not_hold_up_the_announcement_and_is_sent_later_once(world, fault):
    from fake_slack import _chat_post_message

    fake, store, clock, deps = world
    tick(deps, MOMENTS["agenda"] + timedelta(minutes=1))
    if fault == "open":
        fake.fail("conversations.open", error="internal_error", times=1)
    else:  # posts to the channel go through; the post to the DM fails
        fake.respond_with("chat.postMessage", lambda p: {"ok": False, "error": "channel_not_found"}
                          if str(p.get("channel", "")).startswith("D") else {"ok": True, **_chat_post_message(fake, p)})
    results = tick(deps, MOMENTS["winner"] + timedelta(minutes=1))
    assert [r.status for step, _, r in results if step == "winner"] == ["posted"]
    presenter = store.get_club_session(CH, "2026-12-03")["presenter"]
    assert presenter_dms(fake, presenter) == []
    fake._overrides.clear()
    results = tick(deps, MOMENTS["winner"] + timedelta(minutes=2))  # the next tick: the DM, not the announcement
    assert [r.status for step, _, r in results if step == "winner"] == ["already"]
    assert len(presenter_dms(fake, presenter)) == 1 and len(scheduled(fake)["winner"]) == 1
    tick(deps, MOMENTS["winner"] + timedelta(minutes=3))
    assert len(presenter_dms(fake, presenter)) == 1


def test_a_crash_after_slack_accepted_the_dm_is_recovered_not_resent(world):
    fake, store, clock, deps = world
    import os
    import socket

    tick(deps, MOMENTS["agenda"] + timedelta(minutes=1))
    at = MOMENTS["winner"] + timedelta(minutes=1)
    from store.club import decide

    presenter = decide(store, CH, SESSION.date(), at)["presenter"]
    dead = f"{socket.gethostname()}:{2**22 + 9}:deadbeef"
    assert not os.path.exists(f"/proc/{2**22 + 9}")
    key = f"presenter:2026-12-03:{member_tag(presenter)}"
    assert store.claim_post(CH, key, kind="presenter_dm", claimer=dead, now=at.timestamp())
    dm = deps.slack.conversations_open(users=presenter)["channel"]["id"]
    fake.add_message(dm, "You present", user="UBOT", bot_id="B1",
                     metadata={"event_type": SCHEDULED_EVENT, "event_payload": {"kind": "presenter_dm", "key": key}})
    tick(deps, at)
    assert len(presenter_dms(fake, presenter)) == 1
    assert store.get_post(CH, key)["status"] == "posted"


def test_reactions_on_session_posts_are_logged_once_and_steer_the_pick(world):
    from slack_bolt import BoltRequest

    from bot.app import create_app
    from store import feedback as fb
    from store import pick_for_day

    fake, store, clock, deps = world
    for step in ("agenda", "winner", "reminder", "thread"):
        tick(deps, MOMENTS[step] + timedelta(minutes=1))
    posts = scheduled(fake)
    paper_id = store.get_club_session(CH, "2026-12-03")["paper_id"]
    day_after = (SESSION + timedelta(days=1)).date()
    before = pick_for_day(store, deps.searcher, CH, day_after, feedback=deps.feedback)
    app = create_app(deps, process_before_response=True)

    def react(user, emoji, ts, event_id):
        at = SESSION + timedelta(minutes=30)
        body = {"type": "event_callback", "team_id": "T1", "api_app_id": "A1", "event_id": event_id,
                "event_time": int(at.timestamp()),
                "authorizations": [{"team_id": "T1", "user_id": "UBOT", "is_bot": True}],
                "event": {"type": "reaction_added", "user": user, "reaction": emoji, "item_user": "UBOT",
                          "item": {"type": "message", "channel": CH, "ts": ts}, "event_ts": f"{at.timestamp():.6f}"}}
        assert app.dispatch(BoltRequest(body=body, mode="socket_mode")).status == 200

    react("UANN", "fire", posts["thread"][0]["ts"], "EvClub1")
    react("UANN", "fire", posts["thread"][0]["ts"], "EvClub1")  # Slack delivers an event again
    react("UBOB", "heart", posts["reminder"][0]["ts"], "EvClub2")
    react("UCY", "+1", posts["agenda"][0]["ts"], "EvClub3")  # the agenda is about the winner once it is known
    rows = store.reactions(channel=CH)
    assert sorted((r["user"], r["base"], r["paper_id"]) for r in rows) == [
        ("UANN", "fire", paper_id), ("UBOB", "heart", paper_id), ("UCY", "+1", paper_id)]
    reacted = fb.feedback_for_day(store, CH, day_after, weights=deps.feedback.weights)
    assert set(reacted[paper_id].by_member) == {"UANN", "UBOB", "UCY"}
    assert all(w > 0 for w in reacted[paper_id].by_member.values())
    # The same reaction at the same time on a paper of the day (another channel's) weighs the same.
    from bot.posting import post_daily

    fake.add_channel("C2")
    daily = post_daily(deps.slack, store, deps.searcher, "C2", SESSION, feedback=deps.feedback, sleep=lambda s: None)
    assert daily.status == "posted"
    body = {"type": "event_callback", "team_id": "T1", "api_app_id": "A1", "event_id": "EvDaily1",
            "event_time": int((SESSION + timedelta(minutes=30)).timestamp()),
            "event": {"type": "reaction_added", "user": "UANN", "reaction": "fire", "item_user": "UBOT",
                      "item": {"type": "message", "channel": "C2", "ts": daily.ts},
                      "event_ts": f"{(SESSION + timedelta(minutes=30)).timestamp():.6f}"}}
    assert app.dispatch(BoltRequest(body=body, mode="socket_mode")).status == 200
    control = fb.feedback_for_day(store, "C2", day_after, weights=deps.feedback.weights)
    assert control[daily.paper_id].by_member["UANN"] == reacted[paper_id].by_member["UANN"]
    # And it moves the next pick, which says why.
    after = pick_for_day(store, deps.searcher, CH, day_after, feedback=deps.feedback)
    assert after.paper_id != before.paper_id and after.paper_id != paper_id  # never a paper read already
    name = store.get_paper(paper_id).short_name
    assert f"close to *{name}*" in (after.choice.feedback_why or "")


def _questions_from(body: dict, *, bad: bool = False) -> str:
    """The fake model's answer to the questions prompt: three questions in the abstract's own words
    (bad: the second states a figure the abstract does not have); a TL;DR prompt gets its default."""
    import re

    from fake_llm import restate

    if "discussion questions" not in body["messages"][0]["content"]:
        return restate(body)
    abstract = re.search(r"<abstract>(.*?)</abstract>", body["messages"][-1]["content"], re.S).group(1)
    words = re.findall(r"[A-Za-z]{4,}", abstract)
    qs = [f"Why does the paper claim {' '.join(words[i:i + 6])}?" for i in (0, 8, 16)]
    if bad:
        qs[1] = "Does the method really gain 93.7 points on every benchmark?"
    return "\n".join(f"{n}. {q}" for n, q in enumerate(qs, 1))


@pytest.mark.parametrize("grounded", [True, False])
def test_discussion_questions_come_from_the_llm_when_grounded_else_extractive(world, grounded):
    from fake_llm import FakeLLM

    from store.club import discussion_questions

    fake, store, clock, _ = world
    with FakeLLM() as llm:
        llm.reply = lambda body: _questions_from(body, bad=not grounded)
        settings = make_settings(slack_api_url=fake.api_url, llm_url=llm.url, llm_model="fake-model")
        deps = make_deps(settings, store, Searcher(store, HashingEmbedder()), clock=clock)
        for step in ("agenda", "winner", "reminder", "thread"):
            tick(deps, MOMENTS[step] + timedelta(minutes=1))
        asked = [r for r in llm.requests if "discussion questions" in r["body"]["messages"][0]["content"]]
    assert asked, "the model was asked for the questions"
    thread = text_of(scheduled(fake)["thread"][0])
    paper = store.get_paper(store.get_club_session(CH, "2026-12-03")["paper_id"])
    extractive = discussion_questions(paper.abstract)
    if grounded:
        assert "Why does the paper claim" in thread and "Assumptions: the paper says" not in thread
        assert thread.count("Why does the paper claim") == 3
    else:  # one ungrounded question: all three fall back to the extractive ones
        assert "93.7" not in thread and "Why does the paper claim" not in thread
        assert "Assumptions: the paper says" in thread and len(extractive) == 3


def test_a_presenter_who_cannot_be_dmed_is_recorded_once_and_not_asked_about_every_minute(world):
    fake, store, clock, deps = world
    tick(deps, MOMENTS["agenda"] + timedelta(minutes=1))
    fake.fail("conversations.open", error="user_disabled", times=None)  # a deactivated member
    results = tick(deps, MOMENTS["winner"] + timedelta(minutes=1))
    assert [r.status for step, _, r in results if step == "winner"] == ["posted"]
    session = store.get_club_session(CH, "2026-12-03")
    row = store.get_post(CH, f"presenter:2026-12-03:{member_tag(session['presenter'])}")
    assert row["status"] == "failed" and "user_disabled" in row["error"]
    for minute in range(2, 6):  # the winner step stays due until the session: no new attempts
        tick(deps, MOMENTS["winner"] + timedelta(minutes=minute))
    assert len(fake.calls("conversations.open")) == 1
    assert len(scheduled(fake)["winner"]) == 1


def test_an_agenda_redrawn_by_a_vote_is_still_found_after_a_crash(world):
    import socket

    from bot.club.posts import agenda_message

    fake, store, clock, deps = world
    at = MOMENTS["agenda"] + timedelta(minutes=1)
    tick(deps, at)
    [agenda] = scheduled(fake)["agenda"]
    # A vote redraws the agenda in place (the listener's chat.update, counts included) ...
    redrawn = agenda_message(deps, CH, SESSION.date())
    redrawn.pop("unfurl_links"), redrawn.pop("unfurl_media")
    deps.slack.chat_update(ts=agenda["ts"], **redrawn)
    # ... and the process that posted it had died before recording the ts (a dead pid on this host).
    sql = "update posts set status = 'claimed', ts = null, claimed_by = ? where channel = ? and key = ?"
    with store.transaction() as db:
        db.execute(sql if store.backend == "sqlite" else sql.replace("?", "%s"),
                   [f"{socket.gethostname()}:{2**22 + 13}", CH, "agenda:2026-12-03"])
    results = tick(deps, at + timedelta(minutes=1))
    assert [r.status for step, _, r in results if step == "agenda"] == ["recovered"]
    assert len(scheduled(fake)["agenda"]) == 1
    assert store.get_post(CH, "agenda:2026-12-03")["ts"] == agenda["ts"]
