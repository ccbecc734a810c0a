"""Schedules: what people type, when posts fire (DST, weekdays), and catch-up after downtime.

Every time is an explicit aware datetime: nothing here reads the clock or sleeps.
"""
from datetime import date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from store.schedule import (
    DAILY,
    WEEKDAYS,
    ScheduleError,
    ScheduleSpec,
    catch_up,
    describe_next,
    fires_between,
    is_off,
    last_fire,
    make_trigger,
    next_fire,
    parse_schedule,
    post_date,
)

NY = ZoneInfo("America/New_York")
UTC = timezone.utc


# -- parsing ----------------------------------------------------------------------------
@pytest.mark.parametrize("text, expected", [
    ("09:30", ScheduleSpec(9, 30, "UTC", DAILY)),
    ("9:05 Europe/Berlin", ScheduleSpec(9, 5, "Europe/Berlin", DAILY)),
    ("17:00 america/new_york weekdays", ScheduleSpec(17, 0, "America/New_York", WEEKDAYS)),
    ("weekdays 08:00 UTC", ScheduleSpec(8, 0, "UTC", WEEKDAYS)),
    ("9am Asia/Tokyo", ScheduleSpec(9, 0, "Asia/Tokyo", DAILY)),
    ("5:30pm", ScheduleSpec(17, 30, "UTC", DAILY)),
    ("12am", ScheduleSpec(0, 0, "UTC", DAILY)),
    ("00:00 every day", ScheduleSpec(0, 0, "UTC", DAILY)),
    ("10:15 Mon-Fri", ScheduleSpec(10, 15, "UTC", WEEKDAYS)),
    # in a researcher's own words: filler words, and a city for its zone
    ("every weekday at 9am", ScheduleSpec(9, 0, "UTC", WEEKDAYS)),
    ("9 am on weekdays", ScheduleSpec(9, 0, "UTC", WEEKDAYS)),
    ("at 9:30 each day", ScheduleSpec(9, 30, "UTC", DAILY)),
    ("9:00 Berlin", ScheduleSpec(9, 0, "Europe/Berlin", DAILY)),
    ("weekdays at 8:30 in tokyo", ScheduleSpec(8, 30, "Asia/Tokyo", WEEKDAYS)),
    ("9am New York weekdays", ScheduleSpec(9, 0, "America/New_York", WEEKDAYS)),
    ("9:00 America/New York", ScheduleSpec(9, 0, "America/New_York", DAILY)),  # a space for the _
    ("9:00 america/argentina/buenos aires weekdays", ScheduleSpec(9, 0, "America/Argentina/Buenos_Aires", WEEKDAYS)),
    # the part of the day says am or pm ("every evening at 6" was "I didn't understand “evening”")
    ("every evening at 6", ScheduleSpec(18, 0, "UTC", DAILY)),
    ("6 in the evening", ScheduleSpec(18, 0, "UTC", DAILY)),
    ("9 in the morning", ScheduleSpec(9, 0, "UTC", DAILY)),
    ("every morning at 8:30 Berlin", ScheduleSpec(8, 30, "Europe/Berlin", DAILY)),
    ("weekday afternoons at 2", ScheduleSpec(14, 0, "UTC", WEEKDAYS)),
    ("12 in the afternoon", ScheduleSpec(12, 0, "UTC", DAILY)),
    ("10 at night", ScheduleSpec(22, 0, "UTC", DAILY)),
    ("18:00 in the evening", ScheduleSpec(18, 0, "UTC", DAILY)),  # already 24-hour: kept
    ("6pm in the evening", ScheduleSpec(18, 0, "UTC", DAILY)),
    ("every evening at 6 o'clock", ScheduleSpec(18, 0, "UTC", DAILY)),
    ("noon", ScheduleSpec(12, 0, "UTC", DAILY)),
    ("at noon", ScheduleSpec(12, 0, "UTC", DAILY)),
    ("weekdays at noon Tokyo", ScheduleSpec(12, 0, "Asia/Tokyo", WEEKDAYS)),
    ("12 noon", ScheduleSpec(12, 0, "UTC", DAILY)),
    ("midday", ScheduleSpec(12, 0, "UTC", DAILY)),
    ("midnight", ScheduleSpec(0, 0, "UTC", DAILY)),  # as 12am and 00:00 are: the start of each day
])
def test_parse_accepts_what_people_type(text, expected):
    assert parse_schedule(text, "UTC") == expected


@pytest.mark.parametrize("text, days, said", [
    # chosen days were "I didn't understand “mondays”": only daily and weekdays existed
    ("9:00 mondays", "mon", "Mondays at 09:00 UTC"),
    ("every monday and thursday at 9", "mon,thu", "Mondays and Thursdays at 09:00 UTC"),
    ("9am mon wed fri", "mon,wed,fri", "Mondays, Wednesdays and Fridays at 09:00 UTC"),
    ("every tuesday at 17:30 Europe/Berlin", "tue", "Tuesdays at 17:30 Europe/Berlin"),
    ("mon and thu 09:00", "mon,thu", "Mondays and Thursdays at 09:00 UTC"),
    ("Thursdays, Mondays at 9", "mon,thu", "Mondays and Thursdays at 09:00 UTC"),  # week order
    ("9:00 Tues & Thurs", "tue,thu", "Tuesdays and Thursdays at 09:00 UTC"),
    ("9:00 mon/thu", "mon,thu", "Mondays and Thursdays at 09:00 UTC"),
    ("9:00 mon - thu", "mon,tue,wed,thu", "Mondays, Tuesdays, Wednesdays and Thursdays at 09:00 UTC"),
    ("9:00 weekends", "sat,sun", "Saturdays and Sundays at 09:00 UTC"),
    ("9:00 mon tue wed thu fri", WEEKDAYS, "weekdays (Mon-Fri) at 09:00 UTC"),  # one spelling per set
    ("9:00 every day", DAILY, "every day at 09:00 UTC"),
])
def test_chosen_weekdays_are_read_stored_in_one_spelling_and_said_in_words(text, days, said):
    spec = parse_schedule(text, "UTC")
    assert spec.days == days and spec.describe() == said
    assert ScheduleSpec.from_row({"hour": spec.hour, "minute": spec.minute, "tz": spec.tz, "days": days}) == spec


def test_new_days_keep_the_time_zone_of_the_schedule_they_change():
    keep = ScheduleSpec(9, 0, "Europe/Berlin", WEEKDAYS)
    assert parse_schedule("9:00 mon thu", "UTC", keep=keep) == ScheduleSpec(9, 0, "Europe/Berlin", "mon,thu")
    assert parse_schedule("10:00", "UTC", keep=ScheduleSpec(9, 0, "UTC", "mon,thu")).days == "mon,thu"


@pytest.mark.parametrize("text, days", [("mondays", "mon"), ("weekdays", WEEKDAYS), ("mon and thu", "mon,thu"),
                                        ("every day", DAILY)])
def test_new_days_alone_keep_the_time_and_zone_of_the_schedule_they_change(text, days):
    """"/paper schedule mondays" on a channel posting at 09:30 asked "What time should I post?": only
    the days change, as a time alone changes only the time."""
    keep = ScheduleSpec(9, 30, "Europe/Berlin", "mon,wed,fri")
    assert parse_schedule(text, "UTC", keep=keep) == ScheduleSpec(9, 30, "Europe/Berlin", days)


def test_new_days_without_a_schedule_to_change_still_ask_for_a_time():
    with pytest.raises(ScheduleError, match="What time should I post"):
        parse_schedule("mon and thu", "UTC", keep=None)


def test_chosen_days_fire_on_those_days_only():
    spec = parse_schedule("every monday and thursday at 9 Europe/Berlin", "UTC")
    fires = fires_between(spec, datetime(2024, 6, 2, tzinfo=UTC), datetime(2024, 6, 16, tzinfo=UTC))
    assert [f.strftime("%a %d %H:%M") for f in fires] == ["Mon 03 09:00", "Thu 06 09:00", "Mon 10 09:00",
                                                           "Thu 13 09:00"]
    tuesday = datetime(2024, 6, 4, 7, 0, tzinfo=UTC)  # 09:00 in Berlin
    assert describe_next(spec, tuesday) == "Thu 6 Jun at 09:00 Europe/Berlin (in 2 days)"


def test_catch_up_after_downtime_makes_a_missed_chosen_day_and_no_other():
    spec = ScheduleSpec(9, 0, "UTC", "mon,thu")
    monday = catch_up(spec, datetime(2024, 6, 3, 10, 0, tzinfo=UTC), done_days=set())
    assert (monday.action, monday.day) == ("post", date(2024, 6, 3))
    # Tuesday 09:00 is no posting day: the latest fire is Monday's, posted, so nothing is missed
    tuesday = catch_up(spec, datetime(2024, 6, 4, 10, 0, tzinfo=UTC), done_days={date(2024, 6, 3)})
    assert tuesday.action == "none" and tuesday.day == date(2024, 6, 3)


def test_zone_defaults_to_the_configured_one():
    assert parse_schedule("08:00", "Europe/Paris").tz == "Europe/Paris"


@pytest.mark.parametrize("text, says", [
    ("25:00", "isn't a time of day"),
    ("9:60", "isn't a time of day"),
    ("13pm", "isn't a time of day"),
    ("-1:00", "didn't understand"),
    ("09:30 Mars/Olympus", "don't know the time zone “Mars/Olympus”"),
    ("09:30 Europe/Berln", "Did you mean Europe/Berlin?"),
    ("09:30 EST", "America/New_York"),
    ("Europe/Berlin", "What time"),
    ("09:00 10:00", "one time"),
    ("09:00 daily weekdays", "Choose one: daily, weekdays, or the days"),
    ("09:00 weekdays saturday", "Choose one: daily, weekdays, or the days"),
    ("9:00 thrusday", "Did you mean Thursday?"),
    ("mondays", "What time"),
    ("09:00 UTC Europe/Berlin", "one time zone"),
    ("every morning", "What time"),  # no time in it: ask for one, not "I didn't understand every"
    ("9:00 Berlin London", "one time zone"),
    ("9:00 Berln", "Did you mean Europe/Berlin?"),
    ("3 in the evening", "“3” isn't a time in the evening"),
    ("9am in the evening", "“9am” isn't a time in the evening"),
    ("21:00 in the morning", "“21:00” isn't a time in the morning"),
    ("3 at noon", "“3” isn't a time at noon"),
    ("noon midnight", "one time"),
    ("9 in the morning and evening", "one time"),
    ("every evening", "What time in the evening"),
])
def test_bad_schedules_get_a_clear_reply(text, says):
    with pytest.raises(ScheduleError) as err:
        parse_schedule(text, "UTC")
    assert says in str(err.value)
    assert "HH:MM" in str(err.value) or "zone" in str(err.value)


@pytest.mark.parametrize("text, says", [
    ("tomorrow", "for example 9am, 9am weekdays or 9am mon and thu"),
    ("tomorrow at 9", "just the time, 09:00: the first post then comes at the next 09:00"),
    ("6 tonight", "just the time, 18:00"),
])
def test_a_day_rather_than_a_daily_time_gets_a_hint_not_a_bare_refusal(text, says):
    """"tomorrow" was answered "I didn't understand “tomorrow”": the schedule repeats, so say that,
    and what to type instead."""
    with pytest.raises(ScheduleError) as err:
        parse_schedule(text, "UTC")
    assert "every day" in str(err.value) and says in str(err.value)
    assert "mon and thu" in str(err.value)  # the days a channel can choose, not only daily or weekdays
    assert "didn't understand" not in str(err.value)


def test_a_bad_default_zone_is_reported_not_used():
    with pytest.raises(ScheduleError, match="Nowhere/Land"):
        parse_schedule("09:00", "Nowhere/Land")


def test_off_words():
    assert is_off("off") and is_off(" Stop ") and not is_off("09:00")


# -- fire times (APScheduler's own trigger, asserted the way its tests do) -------------------
def test_weekdays_use_monday_to_friday_not_crontab_numbers():
    spec = ScheduleSpec(9, 0, "UTC", WEEKDAYS)
    trigger = make_trigger(spec)
    start = datetime(2024, 6, 7, 10, 0, tzinfo=UTC)  # a Friday, after 09:00
    fires = []
    t = trigger.get_next_fire_time(None, start)
    for _ in range(5):
        fires.append(t)
        t = trigger.get_next_fire_time(t, t + timedelta(seconds=1))
    assert [f.strftime("%a %d") for f in fires] == ["Mon 10", "Tue 11", "Wed 12", "Thu 13", "Fri 14"]
    assert all(f.hour == 9 and f.minute == 0 for f in fires)


def test_daily_includes_weekends():
    spec = ScheduleSpec(9, 0, "UTC", DAILY)
    fires = fires_between(spec, datetime(2024, 6, 7, 10, tzinfo=UTC), datetime(2024, 6, 10, 10, tzinfo=UTC))
    assert [f.strftime("%a") for f in fires] == ["Sat", "Sun", "Mon"]


def test_spring_forward_keeps_local_wall_clock():
    spec = ScheduleSpec(9, 0, "America/New_York", DAILY)
    trigger = make_trigger(spec)
    before = trigger.get_next_fire_time(None, datetime(2024, 3, 9, 0, 0, tzinfo=NY))
    after = trigger.get_next_fire_time(None, datetime(2024, 3, 10, 0, 0, tzinfo=NY))
    assert before.astimezone(UTC) == datetime(2024, 3, 9, 14, 0, tzinfo=UTC)  # EST, UTC-5
    assert after.astimezone(UTC) == datetime(2024, 3, 10, 13, 0, tzinfo=UTC)  # EDT, UTC-4
    assert before.astimezone(NY).hour == after.astimezone(NY).hour == 9


def test_fall_back_keeps_local_wall_clock():
    spec = ScheduleSpec(9, 0, "America/New_York", DAILY)
    fires = fires_between(spec, datetime(2024, 11, 2, 0, tzinfo=UTC), datetime(2024, 11, 4, 0, tzinfo=UTC))
    assert [f.astimezone(UTC).hour for f in fires] == [13, 14]  # 09:00 EDT, then 09:00 EST
    assert [(f.hour, f.minute) for f in fires] == [(9, 0), (9, 0)]


def test_a_time_skipped_by_dst_posts_once_that_day_an_hour_later():
    spec = ScheduleSpec(2, 30, "America/New_York", DAILY)  # 02:30 does not exist on 10 March 2024
    fires = fires_between(spec, datetime(2024, 3, 9, 12, tzinfo=NY), datetime(2024, 3, 11, 12, tzinfo=NY))
    assert [post_date(spec, f) for f in fires] == [date(2024, 3, 10), date(2024, 3, 11)]
    assert (fires[0].hour, fires[0].minute) == (3, 30)
    assert (fires[1].hour, fires[1].minute) == (2, 30)


def test_a_time_repeated_by_dst_fires_once_and_never_hangs():
    """01:30 happens twice on 3 November 2024 in New York: one fire, and the trigger moves on.

    The stock APScheduler 3.11 CronTrigger answers the second 01:30 with itself,
    which makes Job._get_run_times loop forever inside the scheduler thread.
    """
    spec = ScheduleSpec(1, 30, "America/New_York", DAILY)
    fires = fires_between(spec, datetime(2024, 11, 2, 12, tzinfo=NY), datetime(2024, 11, 4, 12, tzinfo=NY))
    assert [post_date(spec, f) for f in fires] == [date(2024, 11, 3), date(2024, 11, 4)]
    second = datetime(2024, 11, 3, 6, 30, tzinfo=UTC).astimezone(NY)  # 01:30 EST, the repeat
    after = make_trigger(spec).get_next_fire_time(second, second + timedelta(seconds=1))
    assert after.astimezone(UTC) == datetime(2024, 11, 4, 6, 30, tzinfo=UTC)


def test_the_scheduler_job_loop_terminates_across_fall_back():
    from apscheduler.job import Job
    from apscheduler.schedulers.background import BackgroundScheduler

    spec = ScheduleSpec(1, 30, "America/New_York", DAILY)
    scheduler = BackgroundScheduler(timezone=UTC)
    job = Job(scheduler, id="x", func=print, trigger=make_trigger(spec), args=(), kwargs={},
              next_run_time=datetime(2024, 11, 3, 5, 30, tzinfo=UTC), misfire_grace_time=None,
              coalesce=True, max_instances=1, name="x", executor="default")
    runs = job._get_run_times(datetime(2024, 11, 3, 7, 0, tzinfo=UTC))
    assert runs == [datetime(2024, 11, 3, 5, 30, tzinfo=UTC)]


def test_next_fire_is_strictly_after_and_in_the_channel_zone():
    spec = ScheduleSpec(9, 0, "Europe/Berlin", DAILY)
    at_nine = datetime(2024, 6, 3, 9, 0, tzinfo=ZoneInfo("Europe/Berlin"))
    assert next_fire(spec, at_nine) == at_nine + timedelta(days=1)
    assert next_fire(spec, at_nine - timedelta(seconds=1)) == at_nine
    assert next_fire(spec, at_nine).tzinfo.key == "Europe/Berlin"


def test_describe_next_says_the_local_time_and_how_long():
    spec = ScheduleSpec(9, 0, "America/New_York", WEEKDAYS)
    now = datetime(2024, 3, 8, 15, 0, tzinfo=UTC)  # Friday 10:00 in New York
    assert describe_next(spec, now) == "Mon 11 Mar at 09:00 America/New_York (in 2 days 22 h)"


# -- catch-up after downtime --------------------------------------------------------------
def test_catch_up_posts_a_missed_post_that_is_only_a_little_late():
    spec = ScheduleSpec(9, 0, "UTC", DAILY)
    now = datetime(2024, 6, 3, 11, 0, tzinfo=UTC)
    decision = catch_up(spec, now, done_days=set())
    assert decision.action == "post"
    assert decision.day == date(2024, 6, 3)
    assert decision.late == timedelta(hours=2)


def test_catch_up_skips_a_post_missed_by_more_than_the_grace():
    spec = ScheduleSpec(9, 0, "UTC", DAILY)
    now = datetime(2024, 6, 3, 13, 0, tzinfo=UTC)
    assert catch_up(spec, now, done_days=set()).action == "skip"
    assert catch_up(spec, now, done_days=set(), grace=timedelta(hours=5)).action == "post"


def test_catch_up_does_nothing_when_the_day_was_posted():
    spec = ScheduleSpec(9, 0, "UTC", DAILY)
    now = datetime(2024, 6, 3, 10, 0, tzinfo=UTC)
    assert catch_up(spec, now, done_days={date(2024, 6, 3)}).action == "none"


def test_catch_up_ignores_fires_before_the_schedule_existed():
    spec = ScheduleSpec(9, 0, "UTC", DAILY)
    now = datetime(2024, 6, 3, 10, 0, tzinfo=UTC)
    since = datetime(2024, 6, 3, 9, 30, tzinfo=UTC)
    assert catch_up(spec, now, done_days=set(), since=since).action == "none"


def test_catch_up_over_a_weekend_looks_at_the_last_weekday_fire():
    spec = ScheduleSpec(9, 0, "UTC", WEEKDAYS)
    sunday = datetime(2024, 6, 9, 10, 0, tzinfo=UTC)
    decision = catch_up(spec, sunday, done_days=set())
    assert decision.day == date(2024, 6, 7)  # Friday's post, two days late: skipped
    assert decision.action == "skip"


def test_last_fire_uses_the_local_date_across_midnight_utc():
    spec = ScheduleSpec(23, 30, "America/New_York", DAILY)
    now = datetime(2024, 6, 4, 4, 0, tzinfo=UTC)  # 00:00 in New York on 4 June
    fire = last_fire(spec, now)
    assert post_date(spec, fire) == date(2024, 6, 3)
