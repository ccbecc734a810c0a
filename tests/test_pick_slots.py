"""What the daily message holds and what a reaction on it means, end to end against the fake Slack.

The post goes out through the real scheduler job; the reaction comes in as a
`reaction_added` payload through the real Bolt app. The message shows the paper
of the day, its runners-up and, on an exploration day, the exploration paper in
its own "Also today" slot; a reaction lands on the message, so it is the day's
paper's, never a runner-up's.
"""
from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import pytest
from slack_bolt import BoltRequest

from bot.posting import EVENT_TYPE
from bot.scheduler import DailyService
from conftest import dispatch_command, make_deps, make_settings, text_of
from store import HashingEmbedder, Searcher, pick_for_day
from store import feedback as fb
from store.pick import EXPLORATION, is_exploration_day

CH = "C1"
UTC = timezone.utc
FIRST = date(2024, 6, 3)


@pytest.fixture
def world(fake_slack, hashing_store):
    settings = make_settings(slack_api_url=fake_slack.api_url, timezone="UTC")
    deps = make_deps(settings, hashing_store, Searcher(hashing_store, HashingEmbedder()))
    service = DailyService(deps)
    service.sleep = lambda seconds: None
    from bot.app import create_app

    app = create_app(deps, process_before_response=True)
    yield app, deps, service
    service.shutdown()


def post_on(deps, service, day: date) -> dict:
    deps.clock.now = datetime(day.year, day.month, day.day, 9, 0, 5, tzinfo=UTC)
    assert service.fire(CH).status == "posted"
    return deps.store.get_post(CH, day.isoformat())


def react(app, user: str, emoji: str, ts: str, at: datetime, event_id: str) -> None:
    body = {"type": "event_callback", "team_id": "T1", "api_app_id": "A1", "event_id": event_id,
            "event_time": int(at.timestamp()),
            "authorizations": [{"team_id": "T1", "user_id": "UBOT", "is_bot": True}],
            "event": {"type": "reaction_added", "user": user, "reaction": emoji, "item_user": "UBOT",
                      "item": {"type": "message", "channel": CH, "ts": ts}, "event_ts": f"{at.timestamp():.6f}"}}
    assert app.dispatch(BoltRequest(body=body, mode="socket_mode")).status == 200


def test_a_reaction_on_the_daily_message_is_the_days_papers(world, fake_slack):
    app, deps, service = world
    dispatch_command(app, fake_slack, "interests add video understanding", user="UALICE", channel=CH)
    dispatch_command(app, fake_slack, "schedule 09:00 UTC", user="UALICE", channel=CH)
    row = post_on(deps, service, FIRST)
    runners = [c["paper_id"] for c in row["pick"]["runners_up"]]
    assert runners and row["paper_id"] not in runners
    post = [m for m in fake_slack.messages(CH) if (m.get("metadata") or {}).get("event_type") == EVENT_TYPE][-1]
    assert post["ts"] == row["ts"]

    react(app, "UBOB", "fire", row["ts"], datetime(2024, 6, 3, 10, tzinfo=UTC), "EvDay1")
    logged = deps.store.reactions(channel=CH)
    assert [(r["paper_id"], r["user"]) for r in logged] == [(row["paper_id"], "UBOB")]
    learned = fb.feedback_for_day(deps.store, CH, FIRST + timedelta(days=1))
    assert set(learned) == {row["paper_id"]}  # not one of the runners-up shown in the same message
    assert not set(learned) & set(runners)


def test_exploration_never_takes_the_main_slot_by_default(world, fake_slack):
    app, deps, service = world
    dispatch_command(app, fake_slack, "interests add video understanding", user="UALICE", channel=CH)
    dispatch_command(app, fake_slack, "schedule 09:00 UTC", user="UALICE", channel=CH)
    day = next(FIRST + timedelta(days=k) for k in range(60) if is_exploration_day(CH, FIRST + timedelta(days=k)))
    pick = pick_for_day(deps.store, deps.searcher, CH, day, feedback=deps.feedback)
    assert not pick.exploration and pick.choice.member == "UALICE"
    assert pick.also is not None and pick.also.kind == EXPLORATION
    row = post_on(deps, service, day)
    assert row["paper_id"] == pick.paper_id and row["pick"]["also"]["paper_id"] == pick.also.paper_id
    post = [m for m in fake_slack.messages(CH) if (m.get("metadata") or {}).get("event_type") == EVENT_TYPE][-1]
    text = text_of(post)
    assert "Paper of the day" in text and "Exploration day" not in text
    also = text[text.index("Also today"):]
    assert ":compass:" in also and "exploration: a paper just outside your interests" in also
    # It is shown, not spent: like a runner-up, it stays available for a later day.
    history = deps.store.post_history(CH)
    assert history[-1]["paper_id"] == pick.paper_id
