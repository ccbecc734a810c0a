"""The paper of the day as a team lives with it over weeks: a paper that comes back under a new
id, a schedule changed after the day's post, a bot removed from its channel and invited back.

Each runs the real scheduler's jobs (DailyService.fire and its sweep) with an explicit clock
against the fake Slack, on a SQLite file and on PostgreSQL."""
from __future__ import annotations

import re
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone

import pytest
from slack_bolt import BoltRequest

from bot.scheduler import SWEEP_EVERY
from conftest import text_of
from fake_slack import BOT_USER_ID
from store.ingest import Record, ingest_records
from test_daily_e2e import CH, app, command, daily_posts, deps, joined, searcher, service  # noqa: F401 (fixtures)

pytestmark = pytest.mark.both_backends

UTC = timezone.utc


def posted_ids(fake) -> list[str]:
    return [m["metadata"]["event_payload"]["paper_id"] for m in daily_posts(fake)]


def at(service, day: int, hour: int = 9, minute: int = 0) -> datetime:
    service.clock.now = datetime(2024, 6, day, hour, minute, tzinfo=UTC)
    return service.clock.now


def removed(fake) -> None:
    """The bot is out of the channel: Slack refuses its posts there (and its reads)."""
    for method in ("chat.postMessage", "conversations.history"):
        fake.fail(method, error="not_in_channel", times=None)


def invited_back(app, fake) -> list[dict]:
    """`/invite @paperclub`: Slack takes the bot's posts again and tells it it joined; what it then
    said in the channel (thread replies aside)."""
    fake.reset()
    joined(app, BOT_USER_ID)
    return [m for m in fake.messages(CH) if m.get("thread_ts") in (None, m["ts"])]


def archived(fake) -> None:
    """The channel is archived: Slack refuses the bot's posts there (is_archived)."""
    fake.add_channel(CH, is_archived=True)


def unarchived(app, fake, kind: str = "channel_unarchive") -> list[dict]:
    """Someone unarchives the channel (group_unarchive for a private one): Slack takes the bot's posts
    again and says so; what the bot then said in the channel (thread replies aside)."""
    fake.add_channel(CH)
    fake.reset()
    body = {"type": "event_callback", "team_id": "T1", "api_app_id": "A1", "event_id": f"Ev{kind}{CH}",
            "event_time": 1, "event": {"type": kind, "channel": CH, "user": "U2", "actor_id": "U2",
                                       "event_ts": "1.1"}}
    app.dispatch(BoltRequest(body=body, mode="socket_mode"))
    return [m for m in fake.messages(CH) if m.get("thread_ts") in (None, m["ts"])]


# -- never repeated ------------------------------------------------------------------------------
def test_the_same_paper_ingested_again_under_a_new_id_is_not_the_paper_of_the_day_again(
        app, fake_slack, service, hashing_store):
    """The bundled copy of CaReBench (no title) was posted; the next day its arXiv copy, with a
    title and one sentence of the abstract reworded, came in as a new paper and was posted again."""
    at(service, 2, 12)
    command(app, fake_slack, "interests add video understanding")
    command(app, fake_slack, "schedule 09:00 UTC")
    at(service, 3)
    first = service.fire(CH)
    assert first.status == "posted"
    paper = hashing_store.get_paper(first.paper_id)
    sentences = re.split(r"(?<=[.!?])\s+", paper.abstract)
    arxiv = Record(abstract=" ".join(sentences[:-1] + ["Code and data are released."]),
                   title=f"{paper.short_name}: a benchmark, its arXiv version", id="arXiv:2501.00513",
                   url="https://arxiv.org/abs/2501.00513v2", venue="arXiv cs.CV", year=2025, source="arxiv")
    assert ingest_records(hashing_store, [arxiv], service.deps.searcher.embedder, now=time.time()).added == 1

    for day in (4, 5, 6):
        at(service, day)
        assert service.fire(CH).status == "posted"
    ids = posted_ids(fake_slack)
    assert len(ids) == 4 and len(set(ids)) == 4
    titles = [hashing_store.get_paper(pid).title or "" for pid in ids]
    assert not any("arXiv version" in t for t in titles), "the same paper was posted twice"


# -- a schedule changed on a day whose post went out -----------------------------------------------
def test_a_new_time_after_the_days_post_went_out_names_tomorrow_as_the_next_post(app, fake_slack, service):
    """At 10:00, after the 09:00 post, `/paper schedule 11:00` announced "Next post: Mon 3 Jun at
    11:00 (in 1 h)" to the channel; 11:00 came and nothing was posted (the day had its paper)."""
    at(service, 2, 12)
    command(app, fake_slack, "schedule 09:00 UTC")
    at(service, 3)
    assert service.fire(CH).status == "posted"
    at(service, 3, 10)
    moved = text_of(command(app, fake_slack, "schedule 11:00"))
    assert "Next post: Tue 4 Jun at 11:00 UTC (in 1 day 1 h)" in moved
    assert "Next post: Tue 4 Jun at 11:00 UTC" in text_of(command(app, fake_slack, "schedule"))
    at(service, 3, 11)
    assert service.fire(CH).status == "already"  # one paper a day, as the reply now says
    at(service, 4, 11)
    assert service.fire(CH).status == "posted"
    assert len(daily_posts(fake_slack)) == 2


def test_a_new_zone_whose_today_was_posted_under_the_old_one_names_the_day_after(app, fake_slack, service):
    """Tokyo's 09:00 post of 4 Jun went out at 00:00 UTC; moved to 09:00 New York that evening
    (still 3 Jun there), the reply promised 4 Jun 09:00 New York: that day had its post already."""
    at(service, 2, 12)
    command(app, fake_slack, "schedule 09:00 Asia/Tokyo")
    at(service, 4, 0)
    assert service.fire(CH).status == "posted"  # 09:00 in Tokyo, 4 Jun
    at(service, 4, 1)  # 21:00 on 3 Jun in New York
    moved = text_of(command(app, fake_slack, "schedule 09:00 America/New_York"))
    assert "Next post: Wed 5 Jun at 09:00 America/New_York" in moved
    at(service, 4, 13)  # 09:00 on 4 Jun in New York: that date's paper is the one Tokyo got
    assert service.fire(CH).status == "already"
    at(service, 5, 13)
    assert service.fire(CH).status == "posted"
    assert len(daily_posts(fake_slack)) == 2


# -- removed from the channel, invited back ---------------------------------------------------------
def test_a_paper_picked_while_the_bot_was_out_of_the_channel_is_posted_once_it_is_back(
        app, fake_slack, service, hashing_store):
    """Removed from the channel on 3 Jun, invited back on 4 Jun: 3 Jun's paper (the best match)
    was never seen, yet it was used up for good, and 4 Jun's post said its own paper had been
    "shown under Also today on Mon 3 Jun"."""
    at(service, 2, 12)
    command(app, fake_slack, "interests add video understanding")
    command(app, fake_slack, "schedule 09:00 UTC")
    removed(fake_slack)
    at(service, 3)
    missed = service.fire(CH)
    assert missed.status == "failed" and "not_in_channel" in missed.detail
    at(service, 3, 12, 10)  # the sweep's tries run out with the catch-up window
    for _ in range(SWEEP_EVERY):
        service.poll()
    assert daily_posts(fake_slack) == []

    fake_slack.reset()  # /invite @paperclub
    at(service, 4)
    back = service.fire(CH)
    assert back.status == "posted"
    assert back.paper_id == missed.paper_id  # the team never saw it: it is still theirs to read
    (post,) = daily_posts(fake_slack)
    assert "Also today on Mon 3 Jun" not in text_of(post)
    at(service, 5)
    assert service.fire(CH).status == "posted"
    assert len(set(posted_ids(fake_slack))) == 2


def test_schedule_and_today_tell_an_admin_the_bot_is_not_in_the_channel(app, fake_slack, service):
    """Refused as not_in_channel, `/paper schedule` said only when the next post was due, and
    `/paper today` said "Slack did not take it yet; it will be retried" long after the retries
    had stopped: the reason, and the fix, were only in the bot's log."""
    at(service, 2, 12)
    command(app, fake_slack, "schedule 09:00 UTC")
    removed(fake_slack)
    at(service, 3)
    assert service.fire(CH).status == "failed"
    at(service, 3, 15)
    shown = text_of(command(app, fake_slack, "schedule"))
    assert "Mon 3 Jun's paper could not be posted: I am not in this channel (not_in_channel)" in shown
    assert "invite me back" in shown
    today = text_of(command(app, fake_slack, "today"))
    assert "it will be retried" not in today
    assert "I am not in this channel (not_in_channel)" in today and "invite me back" in today
    fake_slack.reset()
    at(service, 4)
    assert service.fire(CH).status == "posted"
    at(service, 4, 10)
    assert "could not be posted" not in text_of(command(app, fake_slack, "schedule"))


def test_invited_back_the_same_evening_the_refused_paper_comes_at_once_after_one_hello(app, fake_slack, service):
    """Removed from the channel, its 09:00 New York post refused; invited back at 23:00 that evening
    (already 4 Jun in UTC) so the team would get its paper: "Hi again", the paper at once, and no
    second post of it when the sweep comes round."""
    at(service, 2, 12)
    command(app, fake_slack, "interests add video understanding")
    command(app, fake_slack, "schedule 09:00 America/New_York")
    removed(fake_slack)
    at(service, 3, 13)  # 09:00 in New York
    missed = service.fire(CH)
    assert missed.status == "failed"
    at(service, 4, 3)  # 23:00 on Mon 3 Jun in New York
    hello, post = invited_back(app, fake_slack)
    assert "Hi again" in text_of(hello) and "today's paper" in text_of(hello)
    assert post["metadata"]["event_payload"] == {"date": "2024-06-03", "paper_id": missed.paper_id}
    assert "Paper of the day" in text_of(post)
    for _ in range(SWEEP_EVERY):  # the sweep's own retry finds the day done
        service.poll()
    at(service, 4, 13)
    assert service.fire(CH).status == "posted"
    assert [m["metadata"]["event_payload"]["date"] for m in daily_posts(fake_slack)] == ["2024-06-03", "2024-06-04"]


def test_invited_back_the_next_morning_the_refused_day_is_not_posted_late(app, fake_slack, service):
    at(service, 2, 12)
    command(app, fake_slack, "schedule 09:00 America/New_York")
    removed(fake_slack)
    at(service, 3, 13)
    missed = service.fire(CH)
    assert missed.status == "failed"
    at(service, 4, 12)  # 08:00 on Tue 4 Jun in New York: Monday's paper is yesterday's news
    [hello] = invited_back(app, fake_slack)
    assert "Hi again" in text_of(hello) and "today's paper" not in text_of(hello)
    at(service, 4, 13)
    back = service.fire(CH)
    assert back.status == "posted" and back.paper_id == missed.paper_id
    assert [m["metadata"]["event_payload"]["date"] for m in daily_posts(fake_slack)] == ["2024-06-04"]


@pytest.mark.parametrize("kind", ["channel_unarchive", "group_unarchive"])
def test_unarchived_the_same_morning_the_refused_paper_comes_at_once(app, fake_slack, service, kind):
    """The channel was archived by mistake and its 09:00 post refused (is_archived); unarchived at
    09:20, the team waited until about 10:00, the sweep's next try, for the day's paper."""
    at(service, 2, 12)
    command(app, fake_slack, "interests add video understanding")
    command(app, fake_slack, "schedule 09:00 UTC")
    archived(fake_slack)
    at(service, 3)
    missed = service.fire(CH)
    assert missed.status == "failed" and "is_archived" in missed.detail
    at(service, 3, 9, 20)
    note, post = unarchived(app, fake_slack, kind)
    assert "today's paper" in text_of(note) and "archived" in text_of(note)
    assert "Hi!" not in text_of(note)  # not the first hello: the channel had its paper of the day
    assert post["metadata"]["event_payload"] == {"date": "2024-06-03", "paper_id": missed.paper_id}
    for _ in range(SWEEP_EVERY):  # the sweep's own retry finds the day done
        service.poll()
    assert len(daily_posts(fake_slack)) == 1
    at(service, 4)
    assert service.fire(CH).status == "posted"


def test_an_unarchived_channel_with_nothing_refused_hears_nothing(app, fake_slack, service):
    """Unarchiving is no invitation: a channel whose paper went out, or one with no paper of the
    day at all (the bot hears of every public channel's unarchiving), gets no message from it."""
    at(service, 2, 12)
    command(app, fake_slack, "schedule 09:00 UTC")
    at(service, 3)
    assert service.fire(CH).status == "posted"
    archived(fake_slack)
    at(service, 3, 15)
    assert unarchived(app, fake_slack) == []
    command(app, fake_slack, "schedule off")
    archived(fake_slack)
    at(service, 4)
    assert unarchived(app, fake_slack) == []


def test_a_post_refused_for_the_channel_is_not_asked_for_again_every_sweep(app, fake_slack, service):
    """Refused as not_in_channel at 09:00, the sweep asked Slack again every 10 minutes until the
    catch-up window closed at 12:00: 19 refusals, and as many errors in the log."""
    at(service, 2, 12)
    command(app, fake_slack, "schedule 09:00 UTC")
    removed(fake_slack)
    at(service, 3)
    assert service.fire(CH).status == "failed"
    for minutes in range(10, 3 * 60 + 1, 10):
        at(service, 3, 9 + minutes // 60, minutes % 60)
        for _ in range(SWEEP_EVERY):
            service.poll()
    assert len(fake_slack.calls("chat.postMessage")) <= 4  # the refusal, then once an hour at most
    assert daily_posts(fake_slack) == []


def test_invited_back_while_the_sweep_retries_the_paper_is_posted_once(app, fake_slack, service):
    at(service, 2, 12)
    command(app, fake_slack, "schedule 09:00 UTC")
    removed(fake_slack)
    at(service, 3)
    assert service.fire(CH).status == "failed"
    at(service, 3, 9, 30)
    fake_slack.reset()
    fake_slack.delay("conversations.history", 2.0, times=1)  # the invite's post looks in the channel first
    with ThreadPoolExecutor(1) as pool:
        invite = pool.submit(joined, app, BOT_USER_ID)
        fake_slack.wait_for(lambda: fake_slack.calls("conversations.history"), timeout=10)
        swept = service.catch_up(service.clock.now, quiet=True)  # the sweep, at the same moment
        invite.result()
    assert [r.status for r in swept] == ["busy"]
    assert len(daily_posts(fake_slack)) == 1


# -- a schedule on chosen weekdays ------------------------------------------------------------------
def test_a_schedule_on_chosen_weekdays_posts_on_those_days_and_no_other_over_a_week(
        app, fake_slack, service, hashing_store):
    """"/paper schedule every monday and thursday at 9" was refused ("I didn't understand
    “monday”"): only daily and weekdays existed. A week of the real job's trigger and the sweep,
    hour by hour, the bot down over Monday's 09:00: Monday's post is caught up on start-up, Thursday's
    fires, and no other day (a Tuesday is no missed day) gets a paper."""
    at(service, 2, 12)  # Sunday 2 June
    command(app, fake_slack, "interests add video understanding")
    said = text_of(command(app, fake_slack, "schedule every monday and thursday at 9 Europe/Berlin"))
    assert "Mondays and Thursdays at 09:00 Europe/Berlin" in said
    assert "First post: Mon 3 Jun at 09:00 Europe/Berlin" in said
    assert hashing_store.get_schedule(CH)["days"] == "mon,thu"

    at(service, 3, 8, 30)  # back at 10:30 in Berlin, 90 minutes after Monday's post was due
    assert [r.status for r in service.catch_up(service.clock.now)] == ["posted"]
    trigger = service.scheduler.get_job(service.job_id(CH)).trigger
    fired = {}
    for hour in range(9, 24 * 7):  # Monday 09:00 UTC to Sunday 23:00 UTC
        now = at(service, 3 + hour // 24, hour % 24)
        if trigger.get_next_fire_time(None, now) == now:
            fired[now.strftime("%a %H:%M")] = service.fire(CH).status
        assert service.catch_up(now, quiet=True) == []  # the sweep finds nothing missed
        if (hour // 24, hour % 24) == (1, 8):  # Tuesday, 10:00 in Berlin
            assert "it posts Thu 6 Jun at 09:00 Europe/Berlin" in text_of(command(app, fake_slack, "today"))
    assert fired == {"Thu 07:00": "posted"}
    assert hashing_store.post_days(CH, "2024-06-01") == {"2024-06-03": "posted", "2024-06-06": "posted"}
    assert len(daily_posts(fake_slack)) == 2
    assert "Next post: Mon 10 Jun at 09:00 Europe/Berlin" in text_of(command(app, fake_slack, "schedule"))
