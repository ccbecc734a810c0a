"""Daylight saving nights lose and double nothing (issue 31.10): every club and daily time on
both 2026 transition nights in Berlin, New York and Sydney, and a Monday 02:30 Berlin club run
tick by tick through the fall-back night against the fake Slack."""
from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from bot.club import STEPS, club_tick
from bot.club.posts import _moments, due_steps
from bot.posting import SCHEDULED_EVENT
from conftest import Clock, make_deps, make_settings
from store import HashingEmbedder, Searcher
from store.club import ClubSpec, session_starts, set_club
from store.schedule import DAILY, WEEKDAYS, ScheduleSpec, fires_between, make_trigger, next_fire

UTC = timezone.utc
ZONES = ("Europe/Berlin", "America/New_York", "Australia/Sydney")
# Around every zone's transition hours (02:00 and 03:00 local), and ordinary times.
TIMES = [(0, 0), (1, 30), (2, 0), (2, 30), (3, 0), (3, 30), (9, 0), (17, 0), (23, 30)]


def transition_days(zone: str, year: int = 2026) -> list[date]:
    """The local dates on which the zone's clocks change in `year` (spring forward and fall back)."""
    tz = ZoneInfo(zone)
    t, out = datetime(year, 1, 1, tzinfo=UTC), []
    while t.year == year:
        if t.astimezone(tz).utcoffset() != (t + timedelta(hours=1)).astimezone(tz).utcoffset():
            out.append((t + timedelta(hours=1)).astimezone(tz).date())
        t += timedelta(hours=1)
    return out


NIGHTS = [(zone, day) for zone in ZONES for day in transition_days(zone)]


def expected_fire(zone: str, day: date, hour: int, minute: int) -> datetime:
    """The wall-clock time on that date: its first occurrence, or the hour after when skipped."""
    tz = ZoneInfo(zone)
    return datetime(day.year, day.month, day.day, hour, minute, tzinfo=tz).astimezone(UTC)


def test_each_zone_has_two_nights_in_2026():
    assert len(NIGHTS) == 6


@pytest.mark.parametrize("zone,night", NIGHTS, ids=[f"{z}-{d}" for z, d in NIGHTS])
def test_a_daily_post_fires_once_each_day_across_the_night(zone, night):
    for hour, minute in TIMES:
        for days in (DAILY, WEEKDAYS):
            spec = ScheduleSpec(hour, minute, zone, days)
            dates = [night + timedelta(days=k) for k in range(-3, 4)]
            want = [expected_fire(zone, d, hour, minute) for d in dates if days == DAILY or d.weekday() < 5]
            start = datetime(dates[0].year, dates[0].month, dates[0].day, tzinfo=ZoneInfo(zone)) - timedelta(microseconds=1)
            end = want[-1] + timedelta(minutes=1)
            fires = fires_between(spec, start, end)
            assert [f.astimezone(UTC) for f in fires] == want, (hour, minute, days)
            for f in fires:  # each answer strictly after its question, as the scheduler asks
                assert next_fire(spec, f) > f
            # The scheduler's own job loop runs each of them once, and terminates.
            from apscheduler.job import Job
            from apscheduler.schedulers.background import BackgroundScheduler

            job = Job(BackgroundScheduler(timezone=UTC), id="x", func=print, trigger=make_trigger(spec), args=(),
                      kwargs={}, next_run_time=want[0], misfire_grace_time=None, coalesce=False,
                      max_instances=1, name="x", executor="default")
            assert [r.astimezone(UTC) for r in job._get_run_times(end)] == want


@pytest.mark.parametrize("zone,night", NIGHTS, ids=[f"{z}-{d}" for z, d in NIGHTS])
def test_every_club_session_and_step_of_the_fortnight_around_the_night_is_due_once(zone, night):
    for hour, minute in TIMES:
        for weekday in {night.weekday(), (night + timedelta(days=1)).weekday(), (night + timedelta(days=2)).weekday()}:
            spec = ClubSpec(weekday, hour, minute, zone, lead_hours=72, cutoff_hours=24)
            dates = [night + timedelta(days=k) for k in range(-7, 10) if (night + timedelta(days=k)).weekday() == weekday]
            want = [expected_fire(zone, d, hour, minute) for d in dates]
            asked = datetime.combine(dates[0] - timedelta(days=1), datetime.min.time(), ZoneInfo(zone))
            starts = session_starts(spec, asked, count=len(want))
            assert [s.astimezone(UTC) for s in starts] == want, (hour, minute, weekday)
            assert [s.date() for s in starts] == dates
            for start in starts:
                for step, at in _moments(spec, start).items():
                    assert (step, start) in due_steps(spec, at), (step, start, hour, minute)
                    assert (step, start) in due_steps(spec, at + timedelta(minutes=59))
                    if step != "winner":  # the winner stays due until the session
                        assert (step, start) not in due_steps(spec, at - timedelta(minutes=1))


def test_a_monday_0230_berlin_club_posts_each_session_once_through_the_fall_back_night(fake_slack, hashing_store):
    """20 Oct to 11 Nov 2026, a tick every 30 minutes: the 26 Oct, 2 Nov and 9 Nov sessions each
    get their agenda, winner, reminder, thread and recap once."""
    ch = "C1"
    start = datetime(2026, 10, 20, 0, tzinfo=UTC)
    settings = make_settings(slack_api_url=fake_slack.api_url)
    deps = make_deps(settings, hashing_store, Searcher(hashing_store, HashingEmbedder()), clock=Clock(start))
    set_club(hashing_store, ch, ClubSpec(0, 2, 30, "Europe/Berlin", lead_hours=48, cutoff_hours=24),
             by="U0", now=start)
    fake_slack.add_members("UANN", "UBOB")
    fake_slack.add_channel(ch)
    for m in ("UANN", "UBOB"):
        hashing_store.set_club_member(ch, m, active=True, now=start.timestamp())
    at = start
    while at < datetime(2026, 11, 11, tzinfo=UTC):
        deps.clock.now = at
        for step, _day, result in club_tick(deps, deps.slack, at, sleep=lambda s: None, budget=30):
            if step == "thread" and result.ts:  # someone says something, so the recap has a thread
                fake_slack.add_message(ch, "Why does it work?", user="UANN", thread_ts=result.ts)
        at += timedelta(minutes=30)
    posted: dict[str, list[str]] = {}
    for m in fake_slack.messages(ch):  # thread replies (the recap) included
        meta = (m.get("metadata") or {}).get("event_payload") or {}
        if (m.get("metadata") or {}).get("event_type") == SCHEDULED_EVENT:
            posted.setdefault(meta["key"].split(":")[1], []).append(meta["kind"])
    assert {day: sorted(kinds) for day, kinds in posted.items()} == {
        day: sorted(STEPS) for day in ("2026-10-26", "2026-11-02", "2026-11-09")}
