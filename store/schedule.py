"""Per-channel post schedules: parse what people type, and when the next post is due.

Pure functions: time always comes in as an argument. Fire times come from the
same APScheduler CronTrigger the bot runs, so "next post" in a reply and the
moment the scheduler fires can never disagree (daylight saving included).
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from functools import lru_cache
from typing import TYPE_CHECKING, Collection
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from .errors import StoreError

if TYPE_CHECKING:
    from .base import Store

# A schedule's days as stored (schedules.days, text in both backends): "daily", "weekdays", or the
# chosen days in week order, "mon,thu". One set of days has one spelling (days_text), so a schedule
# typed again in other words is the same schedule.
DAILY = "daily"
WEEKDAYS = "weekdays"
DAY_NAMES = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")  # weekday() order
_GROUPS = {DAILY: frozenset(range(7)), WEEKDAYS: frozenset(range(5))}
DEFAULT_GRACE = timedelta(hours=3)  # a post missed by less than this is made on start-up

# Words for a whole group of days; a day's own name is read by weekday_number.
_DAY_WORDS = {
    "daily": DAILY, "everyday": DAILY, "every-day": DAILY, "all": DAILY,
    "weekdays": WEEKDAYS, "weekday": WEEKDAYS, "workdays": WEEKDAYS, "mon-fri": WEEKDAYS,
    "monday-friday": WEEKDAYS, "weekends": "sat,sun", "weekend": "sat,sun",
}
_OFF_WORDS = {"off", "stop", "none", "disable", "disabled", "pause", "cancel"}
_TIME = re.compile(r"^([0-9]{1,2})(?:[:.h]([0-9]{2}))?\s*(am|pm)?$", re.I)  # ASCII digits, as parse_number
# Abbreviations people type; zoneinfo knows some as fixed offsets without daylight saving,
# which would silently shift the post by an hour in summer, so point to a city zone instead.
_ABBREVIATIONS = {
    "est": "America/New_York", "edt": "America/New_York", "et": "America/New_York",
    "cst": "America/Chicago", "cdt": "America/Chicago", "ct": "America/Chicago",
    "mst": "America/Denver", "mdt": "America/Denver", "mt": "America/Denver",
    "pst": "America/Los_Angeles", "pdt": "America/Los_Angeles", "pt": "America/Los_Angeles",
    "cet": "Europe/Berlin", "cest": "Europe/Berlin", "met": "Europe/Berlin",
    "bst": "Europe/London", "wet": "Europe/Lisbon", "eet": "Europe/Helsinki",
    "ist": "Asia/Kolkata", "jst": "Asia/Tokyo", "kst": "Asia/Seoul", "aest": "Australia/Sydney",
}
_UTC_NAMES = {"utc": "UTC", "gmt": "UTC", "z": "UTC", "zulu": "UTC", "etc/utc": "UTC"}
USAGE = "HH:MM [time zone] [daily|weekdays|days], e.g. 09:30 Europe/Berlin weekdays or 9:00 mon thu"


class ScheduleError(StoreError):
    """A schedule that cannot be read; the message says how to write it."""


def weekday_number(word: str) -> int | None:
    """A day's name as people type it ("mon", "Tues", "thursdays", "weds") -> its weekday() (Monday
    = 0), else None."""
    w = (word or "").lower().rstrip(".")
    for name in (w, w[:-1] if w.endswith("s") else None):  # "mondays", "weds", "thurs"
        if name and len(name) >= 3:
            day = next((n for n, d in enumerate(DAY_NAMES) if d.startswith(name)), None)
            if day is not None:
                return day
    return None


@lru_cache(maxsize=64)
def weekdays_of(days: str) -> frozenset[int]:
    """The weekdays (Monday = 0) a stored days value posts on: 'daily', 'weekdays' or 'mon,thu'."""
    if days in _GROUPS:
        return _GROUPS[days]
    chosen = frozenset(weekday_number(part) for part in days.split(","))
    if None in chosen or not chosen:
        raise ScheduleError(f"“{days}” names no days I know. Write them as {USAGE}.")
    return chosen


def days_text(weekdays: Collection[int]) -> str:
    """The one stored spelling of a set of weekdays: 'daily', 'weekdays' or 'mon,thu'."""
    chosen = frozenset(weekdays)
    group = next((g for g, members in _GROUPS.items() if members == chosen), None)
    return group or ",".join(DAY_NAMES[d][:3] for d in sorted(chosen))


def describe_days(days: str) -> str:
    """'every day', 'weekdays (Mon-Fri)', 'Mondays', 'Mondays and Thursdays', 'Mondays, Wednesdays and Fridays'."""
    if days == DAILY:
        return "every day"
    if days == WEEKDAYS:
        return "weekdays (Mon-Fri)"
    names = [DAY_NAMES[d].title() + "s" for d in sorted(weekdays_of(days))]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


@dataclass(frozen=True)
class ScheduleSpec:
    """When a channel gets its paper: local wall-clock time, IANA zone, and its days (days_text)."""

    hour: int
    minute: int
    tz: str
    days: str = DAILY

    @property
    def time_text(self) -> str:
        return f"{self.hour:02d}:{self.minute:02d}"

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.tz)

    @property
    def weekdays(self) -> frozenset[int]:
        """The weekdays it posts on (Monday = 0)."""
        return weekdays_of(self.days)

    def describe(self) -> str:
        """'Mondays and Thursdays at 09:00 Europe/Berlin', 'every day at 09:30 UTC'."""
        return f"{describe_days(self.days)} at {self.time_text} {self.tz}"

    @classmethod
    def from_row(cls, row: dict | None) -> ScheduleSpec | None:
        """A schedules row as a ScheduleSpec (None for no row)."""
        if not row:
            return None
        return cls(int(row["hour"]), int(row["minute"]), row["tz"], row["days"])


@lru_cache(maxsize=1)
def _zones() -> dict[str, str]:
    """Lower-case IANA name -> canonical spelling."""
    return {z.lower(): z for z in available_timezones()}


# Words around a schedule in a member's own words that the grammar needs nothing from: "every weekday
# at 9am", "6 o'clock". ("every day" and "each day" are read as daily first.)
_FILLER = frozenset({"at", "on", "in", "every", "each", "the", "and", "&", "o'clock", "o’clock", "oclock"})
# The part of the day a time is said in, and the hours it covers: "6 in the evening" is 18:00, "9 in
# the morning" 09:00, "10 at night" 22:00 and "2 at night" 02:00; a part that is one moment ("noon")
# is also a time on its own (_MOMENTS). Midnight is 00:00, as 12am and 00:00 are.
_PARTS = {
    "morning": frozenset(range(0, 12)), "afternoon": frozenset(range(12, 19)),
    "evening": frozenset(range(16, 24)), "night": frozenset((*range(18, 24), *range(0, 5))),
    "noon": frozenset({12}), "midday": frozenset({12}), "midnight": frozenset({0}),
}
_PART_WORDS = {**{p: p for p in _PARTS}, "mornings": "morning", "afternoons": "afternoon",
               "evenings": "evening", "nights": "night"}
_MOMENTS = {"noon": (12, 0), "midday": (12, 0), "midnight": (0, 0)}
# One day rather than a time every day: answered with what to type instead (and "tonight" is at night).
_ONE_DAY = {"tomorrow": None, "today": None, "tonight": "night"}


@lru_cache(maxsize=1)
def _cities() -> dict[str, str]:
    """A zone's city, lower-case with _ for a space ("new_york") -> its zone, where only one zone ends
    with that city: "9:00 Berlin" is Europe/Berlin."""
    zones: dict[str, set[str]] = {}
    for z in available_timezones():
        if "/" in z and not z.startswith(("Etc/", "SystemV/", "posix/", "right/")):
            zones.setdefault(z.rsplit("/", 1)[1].lower(), set()).add(z)
    return {city: next(iter(named)) for city, named in zones.items() if len(named) == 1}


def city_zone(name: str) -> str | None:
    """The zone of a city as people type it ("London", "new york", "New_York"), else None."""
    return _cities().get(re.sub(r"[\s_]+", "_", (name or "").strip().lower()))


def check_timezone(name: str) -> str:
    """The canonical IANA name for `name` (case-insensitive), or a ScheduleError that helps."""
    raw = (name or "").strip()
    key = raw.lower()
    if key in _UTC_NAMES:
        return "UTC"
    if key in _ABBREVIATIONS:
        city = _ABBREVIATIONS[key]
        raise ScheduleError(
            f"“{raw}” is an abbreviation, and those don't follow daylight saving. "
            f"Use a city zone instead, for example {city}.")
    key = re.sub(r"\s+", "_", key)  # "America/New York" as the zone's own name has it
    zone = _zones().get(key)
    if zone:
        try:
            ZoneInfo(zone)
            return zone
        except (ZoneInfoNotFoundError, ValueError):
            pass
    close = difflib.get_close_matches(key, [z for z in _zones() if "/" in z], n=1, cutoff=0.75)
    hint = f" Did you mean {_zones()[close[0]]}?" if close else ""
    raise ScheduleError(
        f"I don't know the time zone “{raw}”.{hint} Use an IANA name such as Europe/Berlin, "
        "America/New_York or UTC.")


def parse_time(text: str) -> tuple[int, int]:
    """'09:30', '9:30', '0930'-free forms like '9', '9am', '5:30pm', '17h30' -> (hour, minute)."""
    m = _TIME.match((text or "").strip())
    bad = ScheduleError(f"“{text}” isn't a time of day I can read. Use 24-hour HH:MM, "
                        "for example 09:30 or 17:00.")
    if not m:
        raise bad
    hour, minute, ampm = int(m.group(1)), int(m.group(2) or 0), (m.group(3) or "").lower()
    if ampm:
        if not 1 <= hour <= 12:
            raise bad
        hour = hour % 12 + (12 if ampm == "pm" else 0)
    if not (0 <= hour <= 23 and 0 <= minute <= 59):
        raise bad
    return hour, minute


def _in_part(when: tuple[int, int] | None, word: str | None, part: str) -> tuple[int, int] | None:
    """The time `word` (read as `when`) names in that part of the day: "6" in the evening is 18:00,
    a 24-hour or am/pm time stays as it is when it falls in the part; a moment alone ("noon") is its
    own time. ScheduleError when they don't fit together ("3 in the evening")."""
    if when is None:
        return _MOMENTS.get(part)
    hour, minute = when
    said_as = f"at {part}" if part in _MOMENTS else f"in the {part}"
    twelve = 1 <= hour <= 12 and not re.search(r"[ap]m$", word or "", re.I)  # "6": 06:00 or 18:00
    for h in ((hour % 12, hour % 12 + 12) if twelve else (hour,)):
        if h in _PARTS[part]:
            return h, minute
    raise ScheduleError(f"“{word}” isn't a time {said_as}. Write it as {USAGE}.")


def _one_day(word: str, when: tuple[int, int] | None) -> ScheduleError:
    """The answer to "tomorrow" (or "today", "tonight"): the paper of the day is no one-off post."""
    repeats = ("The paper of the day comes every day, on weekdays or on the days you choose (mon and thu), "
               "not on one day")
    if when is None:
        at = "9pm" if word.lower() == "tonight" else "9am"
        return ScheduleError(f"{repeats}: leave out “{word}” and give the time it comes, for example {at}, "
                             f"{at} weekdays or {at} mon and thu.")
    at = f"{when[0]:02d}:{when[1]:02d}"
    return ScheduleError(f"{repeats}: leave out “{word}” and give just the time, {at}: the first post then "
                         f"comes at the next {at}. Write it as {USAGE}.")


def _looks_like_time(word: str) -> bool:
    return bool(re.match(r"^\d", word))  # any digit: "０９:００" is a time parse_time can name


def is_off(text: str) -> bool:
    """True for 'off', 'stop', ... (turning the daily post off)."""
    return (text or "").strip().lower() in _OFF_WORDS


# Two days with a sign between them, the sign's spaces optional: "mon - thu" is a range, "mon/thu" and
# "mon & thu" two days.
_DAY_PAIR = re.compile(r"\b([a-z]{3,})\s*([-/&+])\s*(?=([a-z]{3,})\b)")


def _join_days(m: re.Match) -> str:
    first, sign, second = m.groups()
    if weekday_number(first) is None or weekday_number(second) is None:
        return m.group(0)
    return f"{first}-" if sign == "-" else f"{first} "


def _days_named(word: str) -> frozenset[int] | None:
    """The days one word names: a day ("mondays") or a range of them ("mon-thu", "fri-mon"), else None."""
    first, _, last = word.partition("-")
    start, end = weekday_number(first), weekday_number(last) if last else weekday_number(first)
    if start is None or end is None:
        return None
    return frozenset((start + k) % 7 for k in range((end - start) % 7 + 1))


def parse_schedule(text: str, default_tz: str = "UTC", *, keep: ScheduleSpec | None = None) -> ScheduleSpec:
    """'HH:MM [zone] [daily|weekdays|days]' in any order -> ScheduleSpec; ScheduleError says what's wrong.

    Days are 'daily', 'weekdays', or days by name ("mondays", "mon and thu", "mon wed fri",
    "mon-thu"), stored as days_text spells them.

    What the text leaves out comes from `keep` (the channel's schedule now: '9am' moves the time
    and keeps its zone and days, 'mondays' moves the days and keeps its time and zone), else
    `default_tz` and every day; with no `keep`, a time is needed."""
    words = (text or "").replace(",", " ").split()
    # "every day" / "mon - fri" are two or three words for one idea.
    joined = " ".join(words).lower()
    joined = re.sub(r"\b(every|each)\s+day\b", "everyday", joined)
    joined = _DAY_PAIR.sub(_join_days, joined)
    words = [w for w in re.split(r"\s+", joined) if w] if joined else []
    original = {w.lower(): w for w in (text or "").replace(",", " ").split()}
    when = tz = days = part = one_day = time_word = None
    grouped = False  # days came from a word for a group of them ("weekdays"), which takes no others
    i = 0
    while i < len(words):
        word, i = words[i], i + 1
        if i < len(words) and words[i] in ("am", "pm") and _looks_like_time(word):
            word = word + words[i]  # '9 am'
        if word in ("am", "pm") and when is not None or word in _FILLER:
            continue
        if word in _ONE_DAY:
            one_day, word = original.get(word, word), _ONE_DAY[word] or word
            if word not in _PARTS:
                continue
        if word in _PART_WORDS:
            if part not in (None, _PART_WORDS[word]):
                raise ScheduleError(f"Give one time, not two. Write it as {USAGE}.")
            part = _PART_WORDS[word]
            continue
        city = _cities().get(f"{word}_{words[i]}") if i < len(words) else None  # "new york"
        if city:
            i += 1
        elif "/" in word and word not in _zones():  # "America/New York": a zone typed with spaces
            for n in (2, 1):
                if i + n <= len(words) and "_".join(words[i - 1:i + n]) in _zones():
                    word, i = "_".join(words[i - 1:i + n]), i + n
                    break
        else:
            city = _cities().get(word)
        chosen = weekdays_of(_DAY_WORDS[word]) if word in _DAY_WORDS else _days_named(word)
        if chosen and (word in _DAY_WORDS or grouped):
            if days is not None and days != chosen:
                raise ScheduleError("Choose one: daily, weekdays, or the days themselves (mon and thu). "
                                    f"Write it as {USAGE}.")
            days, grouped = chosen, True
        elif chosen:
            days = (days or frozenset()) | chosen  # "mon wed fri": each day adds itself
        elif _looks_like_time(word) and when is None:
            when, time_word = parse_time(word), original.get(word, word)
        elif _looks_like_time(word):
            raise ScheduleError(f"Give one time, not two. Write it as {USAGE}.")
        elif city or "/" in word or word in _UTC_NAMES or word in _ABBREVIATIONS or word in _zones():
            if tz is not None:
                raise ScheduleError(f"Give one time zone, not two. Write it as {USAGE}.")
            tz = city or check_timezone(original.get(word, word))
        else:
            day = difflib.get_close_matches(word, DAY_NAMES, n=1, cutoff=0.75) if len(word) > 3 else []
            close = difflib.get_close_matches(word, _cities(), n=1, cutoff=0.8) if len(word) > 3 else []
            meant = (f" Did you mean {day[0].title()}?" if day else  # a day, misspelt ("thrusday")
                     f" Did you mean {_cities()[close[0]]}?" if close else "")  # a city, misspelt
            raise ScheduleError(f"I didn't understand “{original.get(word, word)}”.{meant} Write it as {USAGE}.")
    if part is not None:
        when = _in_part(when, time_word, part)
    if one_day:
        raise _one_day(one_day, when)
    if when is None and keep is not None and days is not None and tz is None and part is None:
        when = keep.hour, keep.minute  # "mondays": new days at the time it has, as a time alone keeps the days
    if when is None:
        in_part = f" in the {part}" if part else ""
        raise ScheduleError(f"What time{in_part} should I post? Write it as {USAGE}.")
    if keep is not None:
        tz = tz or keep.tz
        days = days if days is not None else keep.weekdays
    return ScheduleSpec(when[0], when[1], tz or check_timezone(default_tz), days_text(days or _GROUPS[DAILY]))


# -- fire times -----------------------------------------------------------------------
def fire_on(spec: ScheduleSpec, day: date) -> datetime:
    """The one fire on a local date: its first HH:MM when a fall-back night repeats it, the hour
    after when a spring-forward night skips it (a real instant, in the schedule's zone)."""
    wall = datetime(day.year, day.month, day.day, spec.hour, spec.minute, tzinfo=spec.zone, fold=0)
    return _normal(wall, spec.zone)


def next_fire(spec: ScheduleSpec, after: datetime) -> datetime:
    """The first fire time strictly after `after` (aware), in the schedule's zone.

    Counted in local dates, one fire per posting day, so neither DST night loses or repeats one
    (APScheduler's CronTrigger answered the repeated 02:30 with an instant not after it).
    """
    day = after.astimezone(spec.zone).date() - timedelta(days=1)
    while True:
        if day.weekday() in spec.weekdays:
            fire = fire_on(spec, day)
            if fire > after:
                return fire
        day += timedelta(days=1)


@lru_cache(maxsize=1)
def _trigger_class():
    from apscheduler.triggers.base import BaseTrigger

    class WallClockTrigger(BaseTrigger):
        """APScheduler's trigger for a schedule: the fires next_fire counts, once per posting day."""

        def __init__(self, spec: ScheduleSpec):
            self.spec = spec
            self.timezone = spec.zone

        def get_next_fire_time(self, previous_fire_time, now):
            # As CronTrigger: the first fire at or after now, or after the previous fire if earlier.
            start = now - timedelta(microseconds=1)
            if previous_fire_time is not None:
                start = min(start, previous_fire_time)
            return next_fire(self.spec, start)

        def __str__(self):
            return f"wall clock {self.spec.describe()}"

    return WallClockTrigger


def make_trigger(spec: ScheduleSpec):
    """The APScheduler 3 trigger that fires this schedule (see next_fire)."""
    return _trigger_class()(spec)


def _normal(dt: datetime, zone: ZoneInfo) -> datetime:
    """A real wall-clock reading of an instant (a time skipped by DST reads as the hour after)."""
    return dt.astimezone(timezone.utc).astimezone(zone)


def fires_between(spec: ScheduleSpec, start: datetime, end: datetime) -> list[datetime]:
    """Every fire time in (start, end], oldest first."""
    out: list[datetime] = []
    t = next_fire(spec, start)
    while t <= end:
        out.append(t)
        t = next_fire(spec, t)
    return out


def last_fire(spec: ScheduleSpec, now: datetime) -> datetime | None:
    """The latest fire time at or before `now` within the past 8 days (None if none)."""
    fires = fires_between(spec, now - timedelta(days=8), now)
    return fires[-1] if fires else None


def post_date(spec: ScheduleSpec, fire: datetime) -> date:
    """The channel-local date a fire belongs to (the key of the day's post)."""
    return fire.astimezone(spec.zone).date()


def local_today(tz: str, now: datetime) -> date:
    """Today's date in a zone."""
    return now.astimezone(ZoneInfo(tz)).date()


def channel_tz(store: Store, channel: str, default_tz: str | None) -> str:
    """The zone a channel lives in: its schedule's, else `default_tz` (PAPERCLUB_TIMEZONE), else UTC."""
    spec = ScheduleSpec.from_row(store.get_schedule(channel))
    if spec:
        return spec.tz
    try:
        return check_timezone(default_tz or "UTC")
    except ScheduleError:
        return "UTC"


@dataclass(frozen=True)
class CatchUp:
    """What to do about the latest fire on start-up: 'post', 'skip' (too late) or 'none'."""

    action: str
    fire: datetime | None = None
    day: date | None = None
    late: timedelta | None = None


def catch_up(spec: ScheduleSpec, now: datetime, *, done_days: set[date], since: datetime | None = None,
             grace: timedelta = DEFAULT_GRACE) -> CatchUp:
    """Whether the latest scheduled post (at or before now) was missed, and if it still should go out.

    `done_days` are the local dates already posted (or claimed); fires before
    `since` (when the schedule was set) were never due.
    """
    fire = last_fire(spec, now)
    if fire is None or (since is not None and fire < since):
        return CatchUp("none")
    day = post_date(spec, fire)
    if day in done_days:
        return CatchUp("none", fire, day)
    late = now - fire
    return CatchUp("post" if late <= grace else "skip", fire, day, late)


def format_duration(delta: timedelta) -> str:
    """'3 h 20 min', '45 min', '2 days 4 h'."""
    minutes = max(0, int(delta.total_seconds() // 60))
    days, rest = divmod(minutes, 24 * 60)
    hours, minutes = divmod(rest, 60)
    parts = []
    if days:
        parts.append(f"{days} day{'s' if days != 1 else ''}")
    if hours:
        parts.append(f"{hours} h")
    if minutes and not days:
        parts.append(f"{minutes} min")
    return " ".join(parts) or "less than a minute"


def next_post(spec: ScheduleSpec, after: datetime, done_days: Collection[date] = ()) -> datetime:
    """The first fire after `after` whose local date has no post yet (`done_days`): a channel gets
    one paper a day, so a fire on a date already posted (the time moved later, or a zone whose
    today was posted under the old zone) posts nothing."""
    fire = next_fire(spec, after)
    while post_date(spec, fire) in done_days:
        fire = next_fire(spec, fire)
    return fire


def describe_next(spec: ScheduleSpec, now: datetime, done_days: Collection[date] = ()) -> str:
    """'Tue 12 Mar at 09:00 America/New_York (in 3 h 20 min)'; days in `done_days` are passed over."""
    fire = next_post(spec, now, done_days)
    return f"{fire:%a %-d %b} at {fire:%H:%M} {spec.tz} (in {format_duration(fire - now)})"
