"""Dates as people type them, for the club's away, skip and unskip: "2026-12-10", "10 Dec",
"Dec 10th", "thursday", "next thursday", "today", "tomorrow", "next week", and ranges of them
("10 dec - 24 dec", "10-24 Dec", "until friday", "monday to wednesday").

Pure: each is read relative to `today`, which the caller takes in the club's zone. Numbers-only
dates (10/12) are refused: whether that is 10 December or 12 October depends on who typed it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, timedelta

from .errors import StoreError
from .schedule import weekday_number

EXAMPLES = "2026-12-10, 10 Dec, thursday, next week, or a range: 10 Dec - 24 Dec, until friday"

_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september",
           "october", "november", "december")
_SEPARATOR = re.compile(r"\s*(?:\.\.|[–—]|\s-\s|\s(?:to|until|till|til|through|thru)\s)\s*", re.I)
_UNTIL = re.compile(r"^(?:until|till|til|through|thru|to)\s+", re.I)
# A hyphen that is not inside an ISO date (2026-12-10): "10-24 dec", "mon-wed".
_HYPHEN = re.compile(r"(?<!\d{4})(?<!\d{4}-\d{2})-")
_ISO = re.compile(r"(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})")
_NUMERIC = re.compile(r"(\d{1,2})[/.](\d{1,2})(?:[/.](\d{2}|\d{4}))?\.?")
_DAY = re.compile(r"(\d{1,2})(?:st|nd|rd|th)?\.?")
_YEAR = re.compile(r"\d{4}")
_FILLER = {"the", "of", "on", "from"}


class DateError(StoreError):
    """A date the member typed that cannot be read; the message says how to write it."""


@dataclass(frozen=True)
class Dates:
    """The days a typed date covers, first and last (one day: the same). `weekday` is set when the
    text was a weekday alone ("thursday", "this thursday"): then any such coming day would do, and
    a club's skip takes its next session on that day."""

    start: date
    end: date
    weekday: int | None = None


@dataclass(frozen=True)
class _When:
    """One side of a range as typed, before it is placed in time."""

    kind: str  # "date", "monthday", "day" (a number alone: "10" of "10-24 dec"), "weekday", "week"
    day: date | None = None
    month: int = 0
    mday: int = 0
    year: int | None = None
    weekday: int | None = None  # "weekday"; also "Thu 10 Dec", checked once placed
    next_week: bool = False


def days_label(start: date, end: date | None = None) -> str:
    """The days as the club's posts write them, for the member to check how their words were read:
    'Thu 10 Dec', 'Thu 10 Dec to Thu 24 Dec'; a span into another year names both years."""
    if end is None or end == start:
        return f"{start:%a %-d %b}"
    if end.year != start.year:
        return f"{start:%a %-d %b %Y} to {end:%a %-d %b %Y}"
    return f"{start:%a %-d %b} to {end:%a %-d %b}"


def month_number(word: str) -> int | None:
    """'dec', 'Dec.', 'december', 'sept' -> 12, 12, 12, 9; else None."""
    w = word.lower().rstrip(".")
    if len(w) < 3:
        return None
    return next((n for n, m in enumerate(_MONTHS, 1) if m.startswith(w) or (w == "sept" and n == 9)), None)


def _day_month(day: int, month: int) -> str:
    return f"{day} {_MONTHS[month - 1][:3].title()}"


def _numeric(m: re.Match, text: str, today: date) -> DateError:
    """The answer to 10/12: which dates it could be, and how to write them."""
    a, b = int(m.group(1)), int(m.group(2))
    readings = list(dict.fromkeys((d, mo) for d, mo in ((a, b), (b, a)) if _exists(mo, d)))
    if not readings:
        return DateError(f"I could not read “{text}” as a date. Write it as {EXAMPLES}.")
    named = " or ".join(_day_month(d, mo) for d, mo in readings)
    iso = " or ".join(_next_monthday(mo, d, None, today).isoformat() for d, mo in readings)
    if len(readings) == 1:
        return DateError(f"Write “{text}” with the month's name or as year-month-day: {named} or {iso}. "
                         "I don't read dates of numbers alone: 10/12 is 10 Dec to some and 12 Oct to others.")
    return DateError(f"“{text}” could be {named}: write it with the month's name ({named}) "
                     f"or as year-month-day ({iso}).")


def _side(text: str, today: date) -> _When:
    """One date as typed (no range) -> _When; DateError when it is none."""
    s = " ".join(w for w in text.lower().replace(",", " ").split() if w not in _FILLER)
    if not s:
        raise DateError(f"Write a date or a range: {EXAMPLES}.")
    if s in ("today", "tomorrow"):
        return _When("date", today + timedelta(days=s == "tomorrow"))
    words = s.split()
    if len(words) == 2 and words[1] == "week" and words[0] in ("this", "next"):
        return _When("week", next_week=words[0] == "next")
    if 1 <= len(words) <= 2 and (len(words) == 1 or words[0] in ("this", "next")):
        day = weekday_number(words[-1])
        if day is not None:
            return _When("weekday", weekday=day, next_week=words[0] == "next")
    m = _ISO.fullmatch(s)
    if m:
        try:
            return _When("date", date(int(m.group(1)), int(m.group(2)), int(m.group(3))))
        except ValueError:
            raise DateError(f"There is no {text.strip()}: write the date as year-month-day, 2026-12-10.") from None
    m = _NUMERIC.fullmatch(s)
    if m:
        raise _numeric(m, text.strip(), today)
    month = mday = year = weekday = None
    for word in words:
        if month is None and month_number(word):
            month = month_number(word)
        elif mday is None and _DAY.fullmatch(word) and 1 <= int(_DAY.fullmatch(word).group(1)) <= 31:
            mday = int(_DAY.fullmatch(word).group(1))
        elif year is None and _YEAR.fullmatch(word):
            year = int(word)
        elif weekday is None and weekday_number(word) is not None:
            weekday = weekday_number(word)  # "Thu 10 Dec"
        else:
            raise DateError(f"I could not read “{text.strip()}” as a date. Write it as {EXAMPLES}.")
    if mday is not None and month is None and year is None and weekday is None:
        return _When("day", mday=mday)
    if mday is None or month is None:
        raise DateError(f"Which day of “{text.strip()}”? Write it as {EXAMPLES}.")
    return _When("monthday", month=month, mday=mday, year=year, weekday=weekday)


def _exists(month: int, mday: int) -> bool:
    return 1 <= month <= 12 and 1 <= mday <= (29 if month == 2 else 30 if month in (4, 6, 9, 11) else 31)


def _next_monthday(month: int, mday: int, year: int | None, base: date) -> date:
    """That day of that month: in `year`, else the first on or after `base` (this year or a later one)."""
    for y in ([year] if year else range(base.year, base.year + 9)):
        try:
            day = date(y, month, mday)
        except ValueError:
            continue
        if year or day >= base:
            return day
    raise DateError(f"There is no {_day_month(mday, month)}{f' {year}' if year else ''}.")


def _last_monthday(month: int, mday: int, base: date) -> date:
    """That day of that month on or before `base`."""
    for y in range(base.year, base.year - 9, -1):
        try:
            day = date(y, month, mday)
        except ValueError:
            continue
        if day <= base:
            return day
    raise DateError(f"There is no {_day_month(mday, month)}.")


def _monday(today: date, next_week: bool) -> date:
    return today - timedelta(days=today.weekday()) + timedelta(weeks=next_week)


def _place(w: _When, base: date, today: date, *, last: bool = False) -> date:
    """The day `w` names, the first on or after `base` (a week: its Monday, or its Sunday when `last`).

    "next thursday" is the Thursday of next week (Monday to Sunday), as "next week" is; "thursday"
    and "this thursday" the coming one, today included."""
    if w.kind == "date":
        return w.day
    if w.kind == "week":
        return _monday(today, w.next_week) + timedelta(days=6 if last else 0)
    if w.kind == "weekday":
        if w.next_week:
            return _monday(today, True) + timedelta(days=w.weekday)
        return base + timedelta(days=(w.weekday - base.weekday()) % 7)
    return _checked(w, _next_monthday(w.month, w.mday, w.year, base))


def _checked(w: _When, day: date) -> date:
    """`day`, when the weekday typed with it (if any) is its own: "Thu 10 Dec"."""
    if w.weekday is not None and day.weekday() != w.weekday:
        raise DateError(f"{day:%-d %b %Y} is a {day:%A}, not a {date(2024, 1, 1 + w.weekday):%A}.")
    return day


def parse_dates(text: str, today: date) -> Dates:
    """A date or a range as people type it -> the days it covers, relative to `today` (the club's).

    A day and month without a year is the next such date, this year or next; in a range the end is,
    and the start the latest such date before it ("28 dec - 3 jan" typed on 30 December is the
    holiday under way). DateError says how to write what it cannot read."""
    raw = " ".join((text or "").split())
    until = _UNTIL.match(raw)
    parts = ["today", raw[until.end():]] if until else _SEPARATOR.split(raw, maxsplit=2)
    if len(parts) == 1:
        parts = _HYPHEN.split(raw)
    if not 1 <= len(parts) <= 2 or not all(p.strip() for p in parts):
        raise DateError(f"Write a date or a range: {EXAMPLES}.")
    if len(parts) == 1:
        w = _side(parts[0], today)
        if w.kind == "day":
            raise DateError(f"Day {w.mday} of which month? Write it as {EXAMPLES}.")
        start = _place(w, today, today)
        end = _place(w, today, today, last=True)
        return Dates(start, end, w.weekday if w.kind == "weekday" and not w.next_week else None)
    first, second = _side(parts[0], today), _side(parts[1], today)
    # "10-24 dec", "dec 10-24": the bare number borrows the other side's month and year.
    if first.kind == "day" and second.kind == "monthday":
        first = _When("monthday", month=second.month, mday=first.mday, year=second.year)
    elif second.kind == "day" and first.kind == "monthday":
        second = _When("monthday", month=first.month, mday=second.mday, year=first.year)
    if "day" in (first.kind, second.kind):
        raise DateError(f"Name the month in “{raw}”, for example 10 Dec - 24 Dec.")
    if first.kind == second.kind == "monthday" and first.year is None:
        end = _place(second, today, today)
        start = _checked(first, _last_monthday(first.month, first.mday, end))
    else:
        start = _place(first, today, today)
        end = _place(second, start, today, last=True)
    if end < start:
        raise DateError(f"“{raw}” ends ({end:%a %-d %b %Y}) before it starts ({start:%a %-d %b %Y}).")
    return Dates(start, end)
