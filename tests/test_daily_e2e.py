"""Paper of the day end to end, against the fake Slack.

In-process tests dispatch slash commands into the real Bolt app and drive its
real BackgroundScheduler with an injected clock (nothing sleeps waiting for a
minute to come round). Process tests run the real `paperclub` command: two
posters racing on one database, and a `paperclub run` killed with SIGKILL
after Slack accepted the post but before it answered.

The weightless HashingEmbedder keeps these fast; pick quality is measured in
tests/test_pick.py and bench/picks.py with the real model.
"""
from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from click.testing import CliRunner
from slack_bolt import BoltRequest
from slack_sdk import WebClient

from bot.blocks import ACTION_SAVE
from bot.deps import Feedback
from bot.posting import EVENT_TYPE, Poster, post_daily
from bot.scheduler import DailyService
from conftest import card_choices, dispatch_command, text_of, APP_TOKEN, BOT_TOKEN, Locker, make_deps, make_settings
from store import HashingEmbedder, ScheduleSpec, Searcher, next_fire

# Every test on a seeded store runs on each backend: a SQLite file, then PostgreSQL.
pytestmark = pytest.mark.both_backends

CH = "C1"
NY = ZoneInfo("America/New_York")
UTC = timezone.utc
ROOT = Path(__file__).resolve().parent.parent


# -- helpers ---------------------------------------------------------------------------------
def daily_posts(fake, channel: str = CH) -> list[dict]:
    """Digest messages in the channel (recognised by their metadata, as recovery does)."""
    return [m for m in fake.messages(channel) if (m.get("metadata") or {}).get("event_type") == EVENT_TYPE]


def thread_replies(fake, ts: str, channel: str = CH) -> list[dict]:
    return [m for m in fake.messages(channel) if m.get("thread_ts") == ts and m["ts"] != ts]


def command(app, fake, text: str, *, user: str = "U1", channel: str = CH) -> dict:
    return dispatch_command(app, fake, text, user=user, channel=channel)


@pytest.fixture
def searcher(hashing_store):
    from store import HashingEmbedder
    from store import Searcher

    return Searcher(hashing_store, HashingEmbedder())


def run_now(service, channel: str) -> None:
    """Have the real scheduler run this channel's job at once (its clock stays the injected one)."""
    service.scheduler.modify_job(service.job_id(channel), next_run_time=datetime.now(UTC))


@pytest.fixture
def deps(fake_slack, hashing_store, searcher):
    settings = make_settings(slack_api_url=fake_slack.api_url, timezone="UTC")
    return make_deps(settings, hashing_store, searcher)


@pytest.fixture
def app(deps):
    from bot.app import create_app

    return create_app(deps, process_before_response=True)


@pytest.fixture
def service(deps):
    daily = DailyService(deps)
    daily.sleep = lambda seconds: None  # our own backoff; the SDK's 429 handler still honours Retry-After
    yield daily
    daily.shutdown()


# -- the schedule, set in Slack, fires once --------------------------------------------------
def test_a_schedule_set_by_slash_command_fires_at_that_minute_and_posts_once(app, fake_slack, service):
    fake = fake_slack
    command(app, fake, "interests add video understanding", user="UALICE")
    service.start()  # the real BackgroundScheduler, rebuilt from the (empty) table
    reply = command(app, fake, "schedule 9:30 america/new_york weekdays")
    assert reply["response_type"] == "in_channel"
    assert "weekdays (Mon-Fri) at 09:30 America/New_York" in text_of(reply)

    # The job exists at once and is due at 09:30 New York time on the next weekday.
    run_at = service.next_run(CH)
    expected = next_fire(ScheduleSpec(9, 30, "America/New_York", "weekdays"), datetime.now(UTC))
    assert run_at == expected
    local = run_at.astimezone(NY)
    assert (local.hour, local.minute, local.second) == (9, 30, 0) and local.weekday() < 5

    # It is now that minute: the scheduler runs the job on its own thread.
    from apscheduler.events import EVENT_JOB_ERROR, EVENT_JOB_EXECUTED

    finished = []
    service.scheduler.add_listener(lambda e: finished.append(e.job_id), EVENT_JOB_EXECUTED | EVENT_JOB_ERROR)
    service.clock.now = run_at
    run_now(service, CH)
    fake.wait_for(lambda: finished.count(service.job_id(CH)) == 1, timeout=30)
    run_now(service, CH)  # fires again the same day (a DST repeat, a second scheduler): no second post
    fake.wait_for(lambda: finished.count(service.job_id(CH)) == 2, timeout=30)
    assert [r.status for r in service.results] == ["posted", "already"]

    posts = daily_posts(fake)
    assert len(posts) == 1
    post = posts[0]
    assert post["metadata"]["event_payload"]["date"] == local.date().isoformat()
    assert "Paper of the day" in text_of(post) and "video understanding" in text_of(post)
    assert "(added by <@UALICE>)" in text_of(post)
    # The paper of the day: Save, then Summary and More like this in its menu (no club here: no
    # Nominate). The two runners-up: For me / Not for me (the day's paper takes reactions), the rest
    # in the menu.
    assert card_choices(post["blocks"]) == [[ACTION_SAVE, "paper_summary", "paper_similar"]] + [
        ["paper_more", "paper_less", ACTION_SAVE, "paper_summary", "paper_similar"]] * 2
    replies = thread_replies(fake, post["ts"])
    assert len(replies) == 1 and "Abstract" in text_of(replies[0])

    # Changes apply at once: a new time moves the job, "off" removes it.
    command(app, fake, "schedule 07:00 Europe/Berlin")
    assert service.next_run(CH).astimezone(ZoneInfo("Europe/Berlin")).hour == 7
    off = command(app, fake, "schedule off")
    assert "turned the paper of the day off" in text_of(off)
    assert service.next_run(CH) is None


def test_rate_limit_then_server_error_still_ends_in_exactly_one_post(app, fake_slack, service):
    fake = fake_slack
    command(app, fake, "schedule 08:00 UTC")
    service.clock.now = datetime(2024, 6, 3, 8, 0, 5, tzinfo=UTC)
    fake.fail("chat.postMessage")  # 429 with Retry-After: 1
    fake.fail("chat.postMessage", status=500)
    result = service.fire(CH)
    assert result.status == "posted"
    posts = daily_posts(fake)
    assert len(posts) == 1 and posts[0]["metadata"]["event_payload"]["date"] == "2024-06-03"
    methods = [c.method for c in fake.calls() if c.method in ("chat.postMessage", "conversations.history")]
    # look (a restored database may not know of a post), 429, 500, look before posting again
    # (the 500 might have been a post that went through), post, abstract
    assert methods == ["conversations.history", "chat.postMessage", "chat.postMessage", "conversations.history",
                       "chat.postMessage", "chat.postMessage"]
    assert service.store.get_post(CH, "2024-06-03")["ts"] == posts[0]["ts"]


def test_a_timeout_after_slack_accepted_the_post_is_not_posted_twice(fake_slack, hashing_store, searcher):
    fake = fake_slack
    fake.delay("chat.postMessage", 2.5, times=1, after=True)  # Slack posts it; the answer comes late
    client = WebClient(token=BOT_TOKEN, base_url=fake.api_url, timeout=1)
    now = datetime(2024, 6, 3, 9, 0, tzinfo=UTC)
    result = post_daily(client, hashing_store, searcher, CH, now, feedback=Feedback(), sleep=lambda s: None)
    assert result.status == "posted"
    posts = daily_posts(fake)
    assert len(posts) == 1 and result.ts == posts[0]["ts"]
    assert any(c.method == "conversations.history" for c in fake.calls())


def test_a_permanent_error_is_recorded_and_retried_later(fake_slack, hashing_store, searcher):
    fake = fake_slack
    fake.fail("chat.postMessage", error="not_in_channel")
    client = WebClient(token=BOT_TOKEN, base_url=fake.api_url)
    now = datetime(2024, 6, 3, 9, 0, tzinfo=UTC)
    failed = post_daily(client, hashing_store, searcher, CH, now, feedback=Feedback(), sleep=lambda s: None)
    assert failed.status == "failed" and "not_in_channel" in failed.detail
    assert hashing_store.get_post(CH, "2024-06-03")["status"] == "failed"
    assert len([c for c in fake.calls() if c.method == "chat.postMessage"]) == 1  # no retry storm
    again = post_daily(client, hashing_store, searcher, CH, now, feedback=Feedback(), sleep=lambda s: None)
    assert again.status == "posted" and again.paper_id == failed.paper_id
    assert len(daily_posts(fake)) == 1


def test_a_failed_post_is_retried_by_the_periodic_sweep_within_the_window(app, fake_slack, service):
    from bot.scheduler import SWEEP_EVERY

    fake = fake_slack
    service.clock.now = datetime(2024, 6, 2, 12, 0, tzinfo=UTC)
    command(app, fake, "schedule 09:00 UTC")
    fake.fail("chat.postMessage", status=500)  # Slack down for longer than the post's retry budget
    service.budget = 0.0
    service.clock.now = datetime(2024, 6, 3, 9, 0, tzinfo=UTC)
    assert service.fire(CH).status == "failed"
    service.clock.now = datetime(2024, 6, 3, 9, 10, tzinfo=UTC)
    for _ in range(SWEEP_EVERY):
        service.poll()
    assert service.results[-1].status == "posted"
    assert len(daily_posts(fake)) == 1


# -- catch-up after downtime ------------------------------------------------------------------
def test_catch_up_posts_a_missed_post_once_and_skips_one_missed_by_hours(app, fake_slack, service, caplog):
    fake = fake_slack
    service.clock.now = datetime(2024, 6, 2, 12, 0, tzinfo=UTC)
    command(app, fake, "schedule 09:00 UTC")
    # down at 09:00 on 3 June, back at 09:40: posted once
    results = service.catch_up(datetime(2024, 6, 3, 9, 40, tzinfo=UTC))
    assert [r.status for r in results] == ["posted"]
    assert service.catch_up(datetime(2024, 6, 3, 9, 45, tzinfo=UTC)) == []
    # down at 09:00 on 4 June, back at 13:30 (4.5 h late, the window is 3 h): skipped, and said so
    with caplog.at_level(logging.INFO, logger="paperclub.daily"):
        assert service.catch_up(datetime(2024, 6, 4, 13, 30, tzinfo=UTC)) == []
    assert "skipping the missed 2024-06-04 post for C1: 4 h 30 min late" in caplog.text
    assert [p["metadata"]["event_payload"]["date"] for p in daily_posts(fake)] == ["2024-06-03"]


def test_nothing_left_is_said_in_the_channel_once(fake_slack, hashing_store, searcher):
    fake = fake_slack
    client = WebClient(token=BOT_TOKEN, base_url=fake.api_url)
    for i, paper in enumerate(hashing_store.iter_papers()):
        day = (date(2020, 1, 1) + timedelta(days=i)).isoformat()
        hashing_store.claim_post(CH, day, claimer="old", paper_id=paper.id, pick=None, status="posted", now=time.time())
    day1 = post_daily(client, hashing_store, searcher, CH, datetime(2024, 6, 3, 9, tzinfo=UTC), feedback=Feedback())
    day2 = post_daily(client, hashing_store, searcher, CH, datetime(2024, 6, 4, 9, tzinfo=UTC), feedback=Feedback())
    assert (day1.status, day2.status) == ("empty", "empty")
    notices = fake.messages(CH)
    assert len(notices) == 1 and "every paper in the library" in text_of(notices[0])


# -- /paper interests and /paper today -----------------------------------------------------------
def test_interests_are_listed_numbered_with_who_added_them(app, fake_slack, hashing_store):
    fake = fake_slack
    command(app, fake, "interests add video understanding", user="UALICE")
    seed = Searcher(hashing_store, HashingEmbedder()).find_exact("G-NLL")
    reply = command(app, fake, "interests add like G-NLL", user="UBOB")
    assert "Added *papers like G-NLL*" in text_of(reply)
    listing = text_of(command(app, fake, "interests"))
    assert "1. *video understanding* (added by <@UALICE>)" in listing
    assert "2. *papers like G-NLL* (added by <@UBOB>)" in listing
    stored = hashing_store.interests(CH)
    assert stored[1]["paper_id"] == seed.id
    assert (stored[1]["vector"] == hashing_store.get_vector(seed.id, "hashing-256")).all()

    bad = text_of(command(app, fake, "interests remove 7"))
    assert "There is no interest 7; this channel has 2" in bad
    removed = text_of(command(app, fake, "interests remove 1 confirm"))
    assert "Removed 1. *video understanding* (added by <@UALICE>)" in removed
    assert [r["text"] for r in hashing_store.interests(CH)] == ["papers like G-NLL"]
    assert [r["text"] for r in hashing_store.interests("C2")] == []  # per channel


def test_members_who_share_a_topic_share_its_line_and_each_keep_their_own_number(app, fake_slack, hashing_store):
    fake = fake_slack
    command(app, fake, "interests add machine learning", user="UALICE")
    command(app, fake, "interests add video understanding", user="UCAROL")
    again = text_of(command(app, fake, "interests add Machine Learning", user="UBOB"))
    assert "already" not in again  # another member may hold the same topic
    assert "You already have" in text_of(command(app, fake, "interests add machine learning", user="UALICE"))
    listing = text_of(command(app, fake, "interests"))
    assert "1, 3. *machine learning* (added by <@UALICE>, <@UBOB>)" in listing
    assert "2. *video understanding* (added by <@UCAROL>)" in listing
    assert listing.count("machine learning*") == 1
    removed = text_of(command(app, fake, "interests remove 3 confirm", user="UBOB"))
    assert "Removed 3. *Machine Learning* (added by <@UBOB>)" in removed
    assert [(r["text"], r["added_by"]) for r in hashing_store.interests(CH)] == [
        ("machine learning", "UALICE"), ("video understanding", "UCAROL")]


def test_a_lone_command_word_after_interests_is_not_added_as_a_topic(app, fake_slack, hashing_store):
    """`interests help` once added "help" as a topic that then steered the paper of the day."""
    fake = fake_slack
    usage = text_of(command(app, fake, "interests help"))
    assert "interests [add &lt;topic&gt; | add like &lt;paper&gt; | remove &lt;n&gt;]" in usage
    assert "Added" not in usage
    clear = text_of(command(app, fake, "interests clear"))
    assert "added nothing" in clear and "`/paper interests remove &lt;number&gt;` takes one off" in clear
    assert "Did you mean `/paper today`?" in text_of(command(app, fake, "interests today"))
    assert "Did you mean `/paper interests remove`?" in text_of(command(app, fake, "interests remvoe"))
    assert hashing_store.interests(CH) == []
    for topic in ("diffusion", "RLHF", "transformers"):  # a one-word topic is still a topic
        assert f"Added *{topic}*" in text_of(command(app, fake, f"interests {topic}"))
    assert "Added *clear*" in text_of(command(app, fake, "interests add clear"))  # asked for by name
    assert [r["text"] for r in hashing_store.interests(CH)] == ["diffusion", "RLHF", "transformers", "clear"]


def test_bad_schedule_gets_a_clear_reply_and_changes_nothing(app, fake_slack, hashing_store):
    reply = command(app, fake_slack, "schedule 25:99 Mars/Olympus")
    assert reply["response_type"] == "ephemeral"
    assert "isn't a time of day" in text_of(reply)
    zone = command(app, fake_slack, "schedule 09:00 Europe/Berln")
    assert "Did you mean Europe/Berlin?" in text_of(zone)
    assert hashing_store.get_schedule(CH) is None


def test_a_time_in_a_researchers_own_words_is_set_and_tomorrow_gets_a_hint(app, fake_slack, hashing_store):
    """"/paper schedule every evening at 6" and "at noon" were refused ("I didn't understand
    “evening”"), and "tomorrow at 9" got the same bare refusal."""
    evening = command(app, fake_slack, "schedule every evening at 6 Europe/Berlin")
    assert "every day at 18:00 Europe/Berlin" in text_of(evening) and evening["response_type"] == "in_channel"
    assert "every day at 12:00 Europe/Berlin" in text_of(command(app, fake_slack, "schedule at noon"))
    tomorrow = command(app, fake_slack, "schedule tomorrow at 9")
    assert tomorrow["response_type"] == "ephemeral" and "didn't understand" not in text_of(tomorrow)
    assert "every day" in text_of(tomorrow) and "09:00" in text_of(tomorrow)
    assert hashing_store.get_schedule(CH)["hour"] == 12  # the hint changed nothing


def test_a_zone_typed_with_a_space_for_its_underscore_is_the_zone_meant(app, fake_slack, hashing_store):
    """"America/New York" was answered with "Did you mean America/Nome?"."""
    reply = command(app, fake_slack, "schedule 9:00 America/New York weekdays")
    assert "Nome" not in text_of(reply) and "09:00 America/New_York" in text_of(reply)
    assert hashing_store.get_schedule(CH)["tz"] == "America/New_York"


def test_schedule_offers_off_only_when_there_is_a_post_to_turn_off(app, fake_slack, hashing_store):
    """With no schedule, `/paper schedule` and `/paper today` suggested `/paper schedule off`; after
    `off`, `/paper schedule` said "no paper of the day yet"."""
    fake = fake_slack
    command(app, fake, "interests add video understanding")
    never = text_of(command(app, fake, "schedule"))
    assert "This channel has no paper of the day scheduled." in never and "`/paper schedule 09:30" in never
    assert "schedule off" not in never
    preview = text_of(command(app, fake, "today"))
    assert "no paper of the day scheduled: `/paper schedule 09:30" in preview and "schedule off" not in preview
    command(app, fake, "schedule 09:00 UTC")
    assert "`/paper schedule off`" in text_of(command(app, fake, "schedule"))
    assert "Turn it back on with `/paper schedule 09:30" in text_of(command(app, fake, "schedule off"))
    after = text_of(command(app, fake, "schedule"))
    assert "no paper of the day scheduled" in after and "yet" not in after and "schedule off" not in after


def test_setting_the_same_schedule_again_is_private_and_a_change_names_the_next_post(app, fake_slack, hashing_store):
    """A repeated `/paper schedule 09:00` was announced to the channel again, as a "First post"; so
    was a change of an existing schedule."""
    fake = fake_slack
    first = command(app, fake, "schedule 09:00 UTC")
    assert first["response_type"] == "in_channel" and "First post:" in text_of(first)
    again = command(app, fake, "schedule 09:00", user="U2")
    assert again["response_type"] == "ephemeral"  # nothing new for the channel to hear
    assert "already set to *every day at 09:00 UTC*: nothing changed" in text_of(again)
    assert "Next post:" in text_of(again) and "<@U2> set" not in text_of(again)
    assert hashing_store.get_schedule(CH)["set_by"] == "U1"
    moved = command(app, fake, "schedule 10:00")
    assert moved["response_type"] == "in_channel"
    said = text_of(moved)
    assert "set the paper of the day to *every day at 10:00 UTC*" in said
    assert "Next post:" in said and "First post" not in said


def test_the_local_console_cannot_schedule_posts_to_a_channel_that_does_not_exist(deps, hashing_store):
    from bot.commands import run_command

    reply = run_command(deps, "you", "schedule 09:00 UTC", channel_id="")
    assert "Schedules belong to a Slack channel" in reply.text
    assert hashing_store.schedules() == []


def test_with_admins_set_only_they_change_schedules_or_others_interests(fake_slack, hashing_store, searcher):
    from bot.app import create_app

    settings = make_settings(slack_api_url=fake_slack.api_url, admins="UADMIN")
    fake_slack.add_members("UADMIN")  # "Ask <@UADMIN>": the bot means to name them
    app = create_app(make_deps(settings, hashing_store, searcher), process_before_response=True)
    fake = fake_slack
    refused = command(app, fake, "schedule 09:00 UTC", user="U1")
    assert "Only the reading group's admins can change" in text_of(refused) and "<@UADMIN>" in text_of(refused)
    assert hashing_store.get_schedule(CH) is None
    assert command(app, fake, "schedule 09:00 UTC", user="UADMIN")["response_type"] == "in_channel"
    command(app, fake, "interests add graph neural networks", user="UBOB")
    command(app, fake, "interests add video understanding", user="U1")
    assert "Only the reading group's admins" in text_of(command(app, fake, "interests remove 1 confirm", user="U1"))
    assert "Removed 2." in text_of(command(app, fake, "interests remove 2 confirm", user="U1"))  # their own
    assert "Removed 1." in text_of(command(app, fake, "interests remove 1 confirm", user="UADMIN"))


def test_today_previews_privately_then_links_to_the_post(app, fake_slack, service):
    fake = fake_slack
    clock = datetime(2024, 6, 3, 7, 0, tzinfo=UTC)
    service.clock.now = clock
    command(app, fake, "interests add video understanding", user="UALICE")
    command(app, fake, "schedule 09:00 UTC")
    preview = command(app, fake, "today")
    assert preview["response_type"] == "ephemeral"
    assert "Preview (only you see this): it posts Mon 3 Jun at 09:00 UTC" in text_of(preview)
    assert "(added by <@UALICE>)" in text_of(preview)
    assert daily_posts(fake) == []
    service.clock.now = datetime(2024, 6, 3, 9, 0, tzinfo=UTC)
    posted = service.fire(CH)
    picked = preview["blocks"][2]["block_id"]
    assert picked == f"daily-{posted.paper_id}"  # the preview was the real pick
    service.clock.now = datetime(2024, 6, 3, 10, 0, tzinfo=UTC)
    after = text_of(command(app, fake, "today"))
    assert "Today's paper is *" in after and "slack.com/archives/C1/p" in after and "_Why:_ matches" in after


def test_today_asks_slack_for_the_posts_link_once_and_answers_without_it_when_slack_fails(
        app, fake_slack, service):
    """Each `/paper today` asked Slack for the post's permalink again: one more round trip on every
    ask. The link is kept with the post once Slack gave it; while Slack cannot give it, the answer
    names the channel instead, and the next ask tries again."""
    fake = fake_slack
    command(app, fake, "interests add video understanding", user="UALICE")
    command(app, fake, "schedule 09:00 UTC")
    service.clock.now = datetime(2024, 6, 3, 9, 0, tzinfo=UTC)
    service.fire(CH)
    service.clock.now = datetime(2024, 6, 3, 10, 0, tzinfo=UTC)
    fake.fail("chat.getPermalink", error="internal_error", times=1)
    failed = text_of(command(app, fake, "today"))
    assert "Today's paper is *" in failed and f"posted in <#{CH}>" in failed and "slack.com/archives" not in failed
    answers = [text_of(command(app, fake, "today")) for _ in range(3)]
    assert all("slack.com/archives/C1/p" in a for a in answers)
    assert len(fake.calls("chat.getPermalink")) == 2  # the failed ask, then once


def test_today_answers_with_the_link_while_another_writer_holds_the_database(fake_slack, quick_busy_store):
    """Keeping the post's link is a cache: with another connection holding the database, `/paper
    today` still answers, link and all, and keeps it on a later ask."""
    from bot.app import create_app

    fake, store = fake_slack, quick_busy_store
    deps = make_deps(make_settings(slack_api_url=fake.api_url, timezone="UTC"), store,
                     Searcher(store, HashingEmbedder()))
    app = create_app(deps, process_before_response=True)
    service = DailyService(deps)
    service.sleep = lambda seconds: None
    try:
        command(app, fake, "interests add video understanding", user="UALICE")
        command(app, fake, "schedule 09:00 UTC")
        service.clock.now = datetime(2024, 6, 3, 9, 0, tzinfo=UTC)
        service.fire(CH)
        service.clock.now = datetime(2024, 6, 3, 10, 0, tzinfo=UTC)
        locker = Locker(store)
        try:
            busy = text_of(command(app, fake, "today"))
        finally:
            locker.release()
        assert "Today's paper is *" in busy and "slack.com/archives/C1/p" in busy
        assert all("slack.com/archives/C1/p" in text_of(command(app, fake, "today")) for _ in range(2))
        assert len(fake.calls("chat.getPermalink")) == 2  # not kept while locked, then kept
    finally:
        service.shutdown()


def save_click(url: str, paper_id: str, *, user: str = "U1") -> dict:
    """A member pressing Save on the digest, as Slack sends it."""
    return {"type": "block_actions", "user": {"id": user}, "api_app_id": "A1", "team": {"id": "T1"},
            "channel": {"id": CH}, "container": {"type": "message", "channel_id": CH, "message_ts": "1.1"},
            "response_url": url, "trigger_id": "1.2.3",
            "actions": [{"action_id": ACTION_SAVE, "block_id": "b", "value": paper_id, "type": "button"}]}


def test_save_button_answers_privately(app, fake_slack, hashing_store):
    paper = next(hashing_store.iter_papers())
    url = fake_slack.new_response_url()
    body = save_click(url, paper.id)
    assert app.dispatch(BoltRequest(body=body, mode="socket_mode")).status == 200
    (reply,) = fake_slack.responses(url)
    assert reply["response_type"] == "ephemeral" and paper.short_name in reply["text"]


def test_save_button_acks_before_it_reads_or_writes(deps, fake_slack, hashing_store):
    # In Socket Mode the ack goes out when the listener returns: by then nothing may have been
    # done yet, or a locked database would hold the ack past Slack's 3 s.
    from dataclasses import replace

    from bot.app import create_app

    queued = []
    app = create_app(replace(deps, later=lambda job, respond=None: queued.append(job)))
    paper = next(hashing_store.iter_papers())
    url = fake_slack.new_response_url()
    body = save_click(url, paper.id, user="U7")
    assert app.dispatch(BoltRequest(body=body, mode="socket_mode")).status == 200  # the ack
    assert fake_slack.responses(url) == [] and hashing_store.saved_papers("U7") == []
    for job in queued:
        job()
    (reply,) = fake_slack.responses(url)
    assert reply["response_type"] == "ephemeral" and paper.short_name in reply["text"]


def test_paperclub_pick_is_a_dry_run_with_reasons(seeded_hashing_db, fake_slack):
    from bot.cli import cli
    from store import open_store
    from store import HashingEmbedder

    db = seeded_hashing_db
    store = open_store(db)
    vec = HashingEmbedder().encode(["video understanding"])[0]
    store.add_interest(CH, "video understanding", "UALICE", model="hashing-256", vector=vec, now=time.time())
    env = {"PAPERCLUB_MODEL": "hashing-256", "SLACK_API_URL": fake_slack.api_url,
           "SLACK_BOT_TOKEN": "", "SLACK_APP_TOKEN": ""}
    out = CliRunner().invoke(cli, ["--db", str(db), "pick", "--channel", CH, "--date", "2024-06-03"], env=env)
    assert out.exit_code == 0, out.output
    assert "2024-06-03 C1 (no schedule (UTC)): dry run, nothing posted" in out.output
    assert "why: matches *video understanding* (added by @UALICE)" in out.output
    assert out.output.count("runner-up") == 2
    assert store.get_post(CH, "2024-06-03") is None and fake_slack.calls() == []
    bad = CliRunner().invoke(cli, ["--db", str(db), "pick", "--channel", CH, "--date", "3 June"], env=env)
    assert bad.exit_code != 0 and "not a date like 2024-03-12" in bad.output


# -- real processes -----------------------------------------------------------------------------
def _env(fake, db: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "PAPERCLUB_"))}
    env.update(SLACK_BOT_TOKEN=BOT_TOKEN, SLACK_APP_TOKEN=APP_TOKEN, SLACK_API_URL=fake.api_url,
               PAPERCLUB_DB=str(db), PAPERCLUB_MODEL="hashing-256", LOG_LEVEL="INFO",
               PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    return env


@pytest.mark.slow  # starts a process
def test_two_processes_on_one_database_post_once(seeded_hashing_db, tmp_path, fake_slack):
    fake = fake_slack
    db = seeded_hashing_db
    fake.delay("chat.postMessage", 1.5, times=1)  # the winner is still posting when the other looks
    args = [sys.executable, "-m", "bot", "pick", "--channel", CH, "--date", "2024-06-03", "--post"]
    procs = [subprocess.Popen(args, cwd=tmp_path, env=_env(fake, db), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for _ in range(2)]
    outputs = [p.communicate(timeout=120)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outputs
    statuses = sorted(next(line for line in o.splitlines() if line.startswith("2024-06-03 C1:")).split()[2]
                      for o in outputs)
    assert statuses in (["already", "posted"], ["busy", "posted"]), outputs
    assert len(daily_posts(fake)) == 1


def _start_bot(fake, db: Path, log: Path) -> subprocess.Popen:
    with open(log, "a") as out:
        return subprocess.Popen([sys.executable, "-m", "bot", "run"], cwd=log.parent, env=_env(fake, db),
                                stdout=out, stderr=subprocess.STDOUT)


@pytest.mark.slow  # starts a process
def test_kill_9_after_slack_accepted_the_post_then_restart_does_not_post_again(seeded_hashing_db, tmp_path,
                                                                               fake_slack):
    from store import open_store

    fake = fake_slack
    db = seeded_hashing_db
    store = open_store(db)
    now = datetime.now(UTC)
    due = now - timedelta(minutes=2)  # the post was due two minutes ago: start-up catches it up
    store.set_schedule(CH, hour=due.hour, minute=due.minute, tz="UTC", days="daily", set_by="U1",
                       now=(now - timedelta(hours=1)).timestamp())
    day = due.date().isoformat()
    fake.delay("chat.postMessage", 60, times=1, after=True)  # Slack takes the post, then goes quiet
    log = tmp_path / "bot.log"

    first = _start_bot(fake, db, log)
    try:
        fake.wait_for(lambda: daily_posts(fake) or first.poll() is not None, timeout=120)
        assert first.poll() is None, log.read_text()[-3000:]
        os.kill(first.pid, signal.SIGKILL)  # in the window: posted in Slack, not recorded here
    finally:
        if first.poll() is None:
            first.kill()
        first.wait(10)
    row = store.get_post(CH, day)
    assert row["status"] == "claimed" and row["ts"] is None  # the crash really was in the window

    second = _start_bot(fake, db, log)
    try:
        fake.wait_for(lambda: (store.get_post(CH, day) or {}).get("status") == "posted"
                      or second.poll() is not None, timeout=120)
        assert second.poll() is None, log.read_text()[-3000:]
        posts = daily_posts(fake)
        assert len(posts) == 1
        assert store.get_post(CH, day)["ts"] == posts[0]["ts"]
        fake.wait_for(lambda: thread_replies(fake, posts[0]["ts"]), timeout=20)
        assert len(thread_replies(fake, posts[0]["ts"])) == 1  # the abstract, added on recovery
        assert "already in the channel" in log.read_text()
    finally:
        second.terminate()
        try:
            second.wait(20)
        except subprocess.TimeoutExpired:
            second.kill()
            second.wait()
        store.close()
    assert len(daily_posts(fake)) == 1  # nothing arrived late: both bots that could post have exited


def test_a_post_already_out_is_found_after_a_restore_even_in_a_channel_of_1500_newer_messages(
        hashing_db, tmp_path, fake_slack):
    # The day's paper went out, the team then wrote 1,500 messages, and the database was restored
    # from last night's backup (no row for the post): the bot must find it, not post it again.
    from conftest import copy_db
    from store import open_store

    client = WebClient(token=BOT_TOKEN, base_url=fake_slack.api_url)
    backup = copy_db(hashing_db, tmp_path / "backup.db")
    live = open_store(copy_db(hashing_db, tmp_path / "live.db"))
    first = post_daily(client, live, Searcher(live, HashingEmbedder()), CH, datetime(2024, 6, 3, 9, 0, tzinfo=UTC),
                       feedback=Feedback(), poster=Poster("before-the-restore"))
    live.close()
    assert first.status == "posted"
    for i in range(1500):
        fake_slack.add_message(CH, f"chatter {i}", user=f"U{i % 9}")
    restored = open_store(backup)
    again = post_daily(client, restored, Searcher(restored, HashingEmbedder()), CH,
                       datetime(2024, 6, 3, 15, 0, tzinfo=UTC), feedback=Feedback(), poster=Poster("after-the-restore"))
    assert len(daily_posts(fake_slack)) == 1, "the paper of the day was posted twice"
    assert again.status == "recovered" and again.ts == first.ts
    assert restored.get_post(CH, "2024-06-03")["ts"] == first.ts
    restored.close()


def test_a_new_time_keeps_the_channels_zone_and_days(app, fake_slack, hashing_store):
    """'schedule 9am' after '09:30 Europe/Berlin weekdays' used to announce 09:00 UTC, every day."""
    command(app, fake_slack, "schedule 09:30 Europe/Berlin weekdays")
    moved = text_of(command(app, fake_slack, "schedule 9am"))
    assert "weekdays (Mon-Fri) at 09:00 Europe/Berlin" in moved
    row = hashing_store.get_schedule(CH)
    assert (row["hour"], row["minute"], row["tz"], row["days"]) == (9, 0, "Europe/Berlin", "weekdays")


def test_a_channels_first_schedule_is_in_the_callers_slack_time_zone(app, fake_slack, hashing_store):
    fake_slack.add_user("UTOKYO", tz="Asia/Tokyo")
    reply = text_of(command(app, fake_slack, "schedule 08:00", user="UTOKYO"))
    assert "08:00 Asia/Tokyo" in reply and "your Slack time zone" in reply
    assert hashing_store.get_schedule(CH)["tz"] == "Asia/Tokyo"
    named = text_of(command(app, fake_slack, "schedule 08:00 America/New_York", user="UTOKYO"))
    assert "America/New_York" in named and "your Slack time zone" not in named


def joined(app, user: str, channel: str = CH) -> None:
    """`user` (the bot: fake_slack.BOT_USER_ID) joined `channel`: member_joined_channel through the app."""
    body = {"type": "event_callback", "team_id": "T1", "api_app_id": "A1", "event_id": f"EvJoin{user}{channel}",
            "event_time": 1, "event": {"type": "member_joined_channel", "user": user, "channel": channel,
                                       "channel_type": "C", "team": "T1"}}
    assert app.dispatch(BoltRequest(body=body, mode="socket_mode")).status == 200


def test_invited_into_a_channel_the_bot_says_how_to_start_once(app, fake_slack, hashing_store):
    from fake_slack import BOT_USER_ID

    joined(app, "UPERSON")  # a person joining is not the bot's business
    assert fake_slack.messages(CH) == []
    joined(app, BOT_USER_ID)
    [hello] = fake_slack.messages(CH)
    assert "interests add" in hello["text"] and "schedule 09:00" in hello["text"]
