"""The reading group's logic (store/club.py) with an injected clock: sessions across DST,
skips, aways, presenter fairness, votes and ties."""
from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings, strategies as st

from store import StoreError, open_store
from store.club import (
    FORTNIGHTLY, MAX_VOTES, Away, ClubError, ClubSpec, Nomination, PastSession, cast_vote, choose_presenter,
    FORM_DEFAULTS, club_for, club_from_form, decide, form_from_words, next_session, nominate, parse_away, propose,
    session_day, session_starts, set_club, skip_session, skipped_for, tally, timeline, unskip_session,
)
from store.dates import DateError, parse_dates
from store.club_export import csv_cell, to_bibtex
from store.schedule import ScheduleError

BERLIN = ZoneInfo("Europe/Berlin")
THU = 3


def utc(*a) -> datetime:
    return datetime(*a, tzinfo=timezone.utc)


def test_sessions_keep_wall_clock_across_dst():
    spec = ClubSpec(THU, 17, 0, "Europe/Berlin")
    # Berlin falls back on Sun 25 Oct 2026: Thu 22 Oct 17:00 is 15:00 UTC, Thu 29 Oct 17:00 is 16:00 UTC.
    starts = session_starts(spec, utc(2026, 10, 20), count=2)
    assert [s.astimezone(BERLIN).strftime("%a %d %H:%M") for s in starts] == ["Thu 22 17:00", "Thu 29 17:00"]
    assert [s.astimezone(timezone.utc).hour for s in starts] == [15, 16]


def test_timeline_offsets_are_real_hours_over_a_dst_night():
    spec = ClubSpec(0, 9, 0, "Europe/Berlin", lead_hours=72, cutoff_hours=24)  # Monday 09:00
    start = next_session(spec, utc(2026, 10, 20))
    assert start.date() == date(2026, 10, 26)  # the Monday after the fall-back Sunday
    t = timeline(spec, start)
    u = lambda x: x.astimezone(timezone.utc)  # noqa: E731  (same-zone subtraction is wall-clock in Python)
    assert u(start) - u(t.nominations_close) == timedelta(hours=72)
    assert t.nominations_close.astimezone(BERLIN).hour == 10  # 72 real hours back crosses the extra hour
    assert u(start) - u(t.reminder) == timedelta(hours=1) and u(t.recap) - u(start) == timedelta(hours=3)


def test_skip_and_off_and_fortnightly():
    spec = ClubSpec(THU, 17, 0, "Europe/Berlin")
    now = utc(2026, 12, 1)
    assert next_session(spec, now).date() == date(2026, 12, 3)
    assert next_session(spec, now, skipped={date(2026, 12, 3)}).date() == date(2026, 12, 10)
    off = ClubSpec(THU, 17, 0, "Europe/Berlin", active=False)
    assert next_session(off, now) is None
    fort = ClubSpec(THU, 17, 0, "Europe/Berlin", cadence=FORTNIGHTLY, anchor=date(2026, 12, 3))
    assert [s.date() for s in session_starts(fort, now, count=3)] == [
        date(2026, 12, 3), date(2026, 12, 17), date(2026, 12, 31)]


def test_bad_setups_are_refused():
    with pytest.raises(ClubError):
        ClubSpec(THU, 25, 0, "UTC")
    with pytest.raises(ClubError):
        ClubSpec(THU, 17, 0, "UTC", lead_hours=10, cutoff_hours=24)
    with pytest.raises(ScheduleError):  # an unknown time zone
        ClubSpec(THU, 17, 0, "Mars/Olympus")


def test_parse_away():
    today = date(2026, 12, 1)
    assert parse_away("2026-12-10", today) == (date(2026, 12, 10), date(2026, 12, 10))
    assert parse_away("2026-12-10..2026-12-24", today) == (date(2026, 12, 10), date(2026, 12, 24))
    assert parse_away("2026-12-10 to 2026-12-24", today) == (date(2026, 12, 10), date(2026, 12, 24))
    assert parse_away("next week", today) == (date(2026, 12, 7), date(2026, 12, 13))
    for bad in ("soon", "2026-12-24..2026-12-10", "2025-01-01"):
        with pytest.raises(ClubError):
            parse_away(bad, today)


MON = date(2026, 11, 30)  # a Monday
D = lambda m, d, y=2026: date(y, m, d)  # noqa: E731


@pytest.mark.parametrize("text, start, end", [
    ("2026-12-10", D(12, 10), D(12, 10)),
    ("10 Dec", D(12, 10), D(12, 10)), ("Dec 10", D(12, 10), D(12, 10)), ("10 December", D(12, 10), D(12, 10)),
    ("december 10th", D(12, 10), D(12, 10)), ("Thu 10 Dec", D(12, 10), D(12, 10)),
    ("10 Nov", D(11, 10, 2027), D(11, 10, 2027)),  # the next such date: next year's
    ("30 nov", MON, MON), ("today", MON, MON), ("tomorrow", D(12, 1), D(12, 1)),
    ("thursday", D(12, 3), D(12, 3)), ("this Thursday", D(12, 3), D(12, 3)), ("thu", D(12, 3), D(12, 3)),
    ("monday", MON, MON), ("next thursday", D(12, 10), D(12, 10)), ("next monday", D(12, 7), D(12, 7)),
    ("next week", D(12, 7), D(12, 13)), ("this week", MON, D(12, 6)),
    ("10 dec - 24 dec", D(12, 10), D(12, 24)), ("10 Dec to 24 Dec", D(12, 10), D(12, 24)),
    ("10-24 Dec", D(12, 10), D(12, 24)), ("Dec 10..24", D(12, 10), D(12, 24)),
    ("10 dec – 24 dec", D(12, 10), D(12, 24)), ("2026-12-10 through 2026-12-24", D(12, 10), D(12, 24)),
    ("2026-12-10..2026-12-24", D(12, 10), D(12, 24)),
    ("until friday", MON, D(12, 4)), ("through Friday", MON, D(12, 4)),
    ("thursday to tuesday", D(12, 3), D(12, 8)), ("mon-wed", MON, D(12, 2)),
    ("28 dec - 3 jan", D(12, 28), D(1, 3, 2027)),
])
def test_dates_as_people_type_them(text, start, end):
    days = parse_dates(text, MON)
    assert (days.start, days.end) == (start, end)


def test_a_holiday_across_new_year_typed_during_it_is_the_one_under_way():
    assert parse_away("28 dec - 3 jan", D(12, 30)) == (D(12, 28), D(1, 3, 2027))


def test_numbers_only_dates_are_refused_with_both_readings():
    with pytest.raises(DateError) as refused:
        parse_dates("10/12", MON)
    assert "10 Dec or 12 Oct" in str(refused.value) and "2026-12-10" in str(refused.value)
    with pytest.raises(DateError) as refused:
        parse_dates("13/12", MON)
    assert "13 Dec" in str(refused.value) and "2026-12-13" in str(refused.value)


@pytest.mark.parametrize("bad", ["soon", "31 nov", "10", "dec", "10 dec -", "Fri 10 Dec", "24 dec 2026 - 10 dec 2026",
                                 "2026-02-30"])
def test_what_is_no_date_is_refused(bad):
    with pytest.raises(DateError):
        parse_dates(bad, MON)


def test_skip_reads_a_weekday_as_the_clubs_next_session_on_that_day():
    fort = ClubSpec(THU, 17, 0, "Europe/Berlin", cadence=FORTNIGHTLY, anchor=date(2026, 12, 10))
    now = utc(2026, 11, 30, 8)
    assert session_day(fort, "thursday", now) == D(12, 10)  # not 3 Dec: the club does not meet then
    assert session_day(fort, "next week", now) == D(12, 10)
    assert session_day(fort, "10 Dec", now) == D(12, 10)
    assert session_day(ClubSpec(THU, 17, 0, "Europe/Berlin"), "next thursday", now) == D(12, 10)
    for text, says in (("friday", "meets on Thursdays"), ("3 Dec", "does not meet on Thu 3 Dec 2026"),
                       ("10/12", "10 Dec or 12 Oct"), ("next 3 weeks", "could not read"),
                       ("2026-11-26", "is over")):
        with pytest.raises(ClubError, match=says):
            session_day(fort, text, now)
    weekly = ClubSpec(THU, 17, 0, "Europe/Berlin")
    with pytest.raises(ClubError, match="holds 2 sessions"):
        session_day(weekly, "1 dec - 14 dec", now)


def test_today_is_the_clubs_today():
    """23:30 UTC on Wednesday is already Thursday in Tokyo: there, 'today' is the session day."""
    tokyo = ClubSpec(THU, 19, 0, "Asia/Tokyo")
    assert session_day(tokyo, "today", utc(2026, 12, 2, 23, 30)) == D(12, 3)
    with pytest.raises(ClubError, match="does not meet"):
        session_day(ClubSpec(THU, 19, 0, "UTC"), "today", utc(2026, 12, 2, 23, 30))


@pytest.mark.parametrize("words", ["every other friday 16:00 London", "biweekly friday 16:00 Europe/London",
                                   "every two weeks on friday 16:00 london", "friday 4pm london every 2 weeks"])
def test_setup_reads_every_other_friday_as_fortnightly(words):
    spec = club_from_form(form_from_words(words.replace(" on ", " "), {**FORM_DEFAULTS, "tz": "UTC"}))
    assert (spec.weekday, spec.hour, spec.cadence, spec.tz) == (4, 16, FORTNIGHTLY, "Europe/London")


def test_presenter_fewest_then_longest_since_then_nominator_never_away():
    d = lambda n: date(2026, 1, 1) + timedelta(weeks=n)  # noqa: E731
    history = [PastSession(d(0), "p0", "ann"), PastSession(d(1), "p1", "bob"), PastSession(d(2), "p2", "cy")]
    members = ["ann", "bob", "cy", "dee"]
    assert choose_presenter(members, d(3), history, []) == "dee"  # never presented
    history.append(PastSession(d(3), "p3", "dee"))
    assert choose_presenter(members, d(4), history, []) == "ann"  # longest since
    away = [Away("ann", d(4), d(4))]
    assert choose_presenter(members, d(4), history, away) == "bob"  # never someone away
    # Away sessions count as neither: ann comes back with fewer and is first again.
    history.append(PastSession(d(4), "p4", "bob"))
    assert choose_presenter(members, d(5), history, away) == "ann"
    # A full tie (nobody presented) goes to the winning paper's nominator.
    assert choose_presenter(members, d(0), [], [], nominator="cy") == "cy"
    assert choose_presenter(["ann"], d(4), [], away) is None


def test_tally_ties_by_nominator_sessions_then_earlier_nomination():
    noms = [Nomination("a", "ann", 1.0), Nomination("b", "bob", 2.0), Nomination("c", "cy", 3.0)]
    votes = [("u1", "a"), ("u2", "b"), ("u1", "a")]  # a double vote counts once
    history = [PastSession(date(2026, 1, 1), "old", "x", nominator="ann")]
    t = tally(noms, votes, history)
    assert t.votes == {"a": 1, "b": 1, "c": 0}
    assert t.winner.paper_id == "b" and "fewer earlier sessions" in t.tiebreak
    t = tally(noms, votes, [])
    assert t.winner.paper_id == "a" and "earlier nomination" in t.tiebreak
    t = tally(noms, [("u1", "c"), ("u2", "c")], [])
    assert t.winner.paper_id == "c" and t.tiebreak is None


@pytest.fixture
def club(tmp_path):
    s = open_store(tmp_path / "club.db")
    now = utc(2026, 11, 30, 8)  # Monday; the session is Thu 3 Dec 17:00 Berlin
    set_club(s, "C1", ClubSpec(THU, 17, 0, "Europe/Berlin", lead_hours=48, cutoff_hours=24), by="U0", now=now)
    for u in ("ann", "bob", "cy"):
        s.set_club_member("C1", u, active=True, now=now.timestamp())
    yield s, now
    s.close()


def test_full_cycle_nominate_vote_cutoff_decide(club):
    s, now = club
    day, added = nominate(s, "C1", "p-a", "ann", now)
    assert day == date(2026, 12, 3) and added
    assert nominate(s, "C1", "p-a", "bob", now) == (day, False)  # the first nominator keeps it
    nominate(s, "C1", "p-b", "bob", now + timedelta(minutes=1))
    for p in ("p-c", "p-d"):
        nominate(s, "C1", p, "cy", now + timedelta(minutes=2))
    at = utc(2026, 12, 2, 9)  # after nominations close, before the cutoff (Wed 16:00 UTC)
    assert cast_vote(s, "C1", day, "bob", "p-a", at) == "added"
    assert cast_vote(s, "C1", day, "bob", "p-a", at) == "already"
    assert cast_vote(s, "C1", day, "cy", "p-a", at) == "added"
    for p in ("p-b", "p-c"):
        assert cast_vote(s, "C1", day, "ann", p, at) == "added"
    assert cast_vote(s, "C1", day, "ann", "p-d", at) == "added"
    assert cast_vote(s, "C1", day, "ann", "p-a", at) == "full"  # MAX_VOTES
    assert MAX_VOTES == 3
    assert cast_vote(s, "C1", day, "ann", "nope", at) == "unknown"
    s.clear_votes("C1", day.isoformat(), "ann")  # votes are changeable until the cutoff
    assert cast_vote(s, "C1", day, "ann", "p-b", at) == "added"
    late = utc(2026, 12, 2, 16, 0, 1)
    assert cast_vote(s, "C1", day, "dee", "p-b", late) == "closed"
    row = decide(s, "C1", day, late)
    assert row["paper_id"] == "p-a" and row["votes"] == 2 and row["nominator"] == "ann"
    assert row["presenter"] == "ann"  # everyone tied on presentations: the nominator
    assert decide(s, "C1", day, late + timedelta(minutes=5))["presenter"] == "ann"  # a retry changes nothing
    s.put_club_session("C1", day.isoformat(), state="held", now=late.timestamp())
    with pytest.raises(ClubError):
        nominate(s, "C1", "p-a", "bob", late)  # read already


def test_a_cancelled_sessions_agenda_takes_no_votes(club):
    """Its agenda is still in the channel with its vote buttons after an admin skips the session."""
    s, now = club
    day, _ = nominate(s, "C1", "p-a", "ann", now)
    s.put_club_session("C1", day.isoformat(), state="skipped", now=now.timestamp())
    assert cast_vote(s, "C1", day, "bob", "p-a", now) == "cancelled"
    assert s.club_votes("C1", day.isoformat()) == []


def test_skipped_session_moves_nominations_on(club):
    s, now = club
    s.put_club_session("C1", "2026-12-03", state="skipped", now=now.timestamp())
    day, _ = nominate(s, "C1", "p-a", "ann", now)
    assert day == date(2026, 12, 10)


def _nominations_cannot_move(store, *, on: bool = True) -> None:
    """A fault in the database itself: every change to a nomination fails, as a full disk would."""
    with store.transaction() as db:
        if store.backend == "sqlite":
            db.execute("drop trigger if exists no_move")
            if on:
                db.execute("create trigger no_move before update on club_nominations "
                           "begin select raise(abort, 'disk full'); end")
            return
        db.execute("drop trigger if exists no_move on club_nominations")
        if on:
            db.execute("create or replace function no_move() returns trigger language plpgsql as "
                       "$$ begin raise exception 'disk full'; end $$")
            db.execute("create trigger no_move before update on club_nominations "
                       "for each row execute function no_move()")


def test_a_skip_that_fails_halfway_leaves_the_session_on_and_its_ballot_whole(store):
    """Cancelling the session and carrying its ballot over are one write: a failure between the two
    leaves neither done, so the retry carries the nominations instead of saying it was cancelled."""
    now = utc(2026, 11, 30, 8)
    spec = set_club(store, "C1", ClubSpec(THU, 17, 0, "Europe/Berlin"), by="U0", now=now)
    store.add_nomination("C1", "2026-12-03", "p-a", "ann", now=now.timestamp())
    store.add_nomination("C1", "2026-12-03", "p-b", "bob", now=now.timestamp() + 1)
    _nominations_cannot_move(store)
    with pytest.raises(StoreError):
        skip_session(store, spec, "C1", date(2026, 12, 3), now)
    assert next_session(spec, now, skipped=skipped_for(store, "C1")).date() == date(2026, 12, 3)
    assert [n["paper_id"] for n in store.nominations("C1", "2026-12-03")] == ["p-a", "p-b"]

    _nominations_cannot_move(store, on=False)
    skip = skip_session(store, spec, "C1", date(2026, 12, 3), now)
    assert (skip.outcome, skip.next.date(), skip.carried) == ("skipped", date(2026, 12, 10), 2)
    assert [n["paper_id"] for n in store.nominations("C1", "2026-12-10")] == ["p-a", "p-b"]
    assert next_session(spec, now, skipped=skipped_for(store, "C1")).date() == date(2026, 12, 10)


def test_a_setup_change_that_fails_halfway_keeps_the_old_setup_and_its_ballot(store):
    """Moving the club to Fridays and carrying Thursday's ballot there are one write: a failure
    between the two leaves neither done, so the retry, which reads the old setup again, still moves
    the nominations instead of leaving them on a session the club no longer holds."""
    now = utc(2026, 11, 30, 8)
    set_club(store, "C1", ClubSpec(THU, 17, 0, "Europe/Berlin"), by="U0", now=now)
    store.add_nomination("C1", "2026-12-03", "p-a", "ann", now=now.timestamp())
    friday = ClubSpec(THU + 1, 17, 0, "Europe/Berlin")
    _nominations_cannot_move(store)
    with pytest.raises(StoreError):
        set_club(store, "C1", friday, by="U0", now=now)
    assert club_for(store, "C1").weekday == THU
    assert [n["paper_id"] for n in store.nominations("C1", "2026-12-03")] == ["p-a"]

    _nominations_cannot_move(store, on=False)
    set_club(store, "C1", friday, by="U0", now=now)
    assert club_for(store, "C1").weekday == THU + 1
    assert store.nominations("C1", "2026-12-03") == []
    assert [n["paper_id"] for n in store.nominations("C1", "2026-12-04")] == ["p-a"]


@pytest.mark.parametrize("order", [("2026-12-10", "2026-12-03"), ("2026-12-03", "2026-12-10")])
def test_two_skips_undone_in_either_order_put_each_nomination_on_the_next_session_held(store, order):
    now = utc(2026, 11, 30, 8)
    spec = set_club(store, "C1", ClubSpec(THU, 17, 0, "Europe/Berlin"), by="U0", now=now)
    store.add_nomination("C1", "2026-12-03", "p-a", "ann", now=now.timestamp())
    store.add_nomination("C1", "2026-12-10", "p-b", "bob", now=now.timestamp())
    for day in ("2026-12-03", "2026-12-10"):
        assert skip_session(store, spec, "C1", date.fromisoformat(day), now).outcome == "skipped"

    def ballots():
        return {d: sorted(n["paper_id"] for n in store.nominations("C1", d)) for d in ("2026-12-03", "2026-12-10",
                                                                                        "2026-12-17")}

    assert ballots() == {"2026-12-03": [], "2026-12-10": [], "2026-12-17": ["p-a", "p-b"]}
    first = unskip_session(store, spec, "C1", date.fromisoformat(order[0]), now)
    assert [t.date().isoformat() for t in first.came_from] == ["2026-12-17"]
    if order[0] == "2026-12-10":  # 3 Dec is still cancelled: its paper goes to the next session held
        assert first.back == 2 and ballots() == {"2026-12-03": [], "2026-12-10": ["p-a", "p-b"], "2026-12-17": []}
    else:
        assert first.back == 1 and ballots() == {"2026-12-03": ["p-a"], "2026-12-10": [], "2026-12-17": ["p-b"]}
    assert unskip_session(store, spec, "C1", date.fromisoformat(order[1]), now).back == 1
    assert ballots() == {"2026-12-03": ["p-a"], "2026-12-10": ["p-b"], "2026-12-17": []}
    assert unskip_session(store, spec, "C1", date.fromisoformat(order[1]), now).outcome == "not_skipped"


def _proposing(store):
    from store import HashingEmbedder, Searcher

    emb = HashingEmbedder()
    now = utc(2026, 11, 30, 8)
    set_club(store, "C1", ClubSpec(THU, 17, 0, "UTC"), by="U0", now=now)
    store.add_interest("C1", "video understanding", "ann", model=emb.name, vector=emb.encode(["video understanding"])[0],
                       now=now.timestamp())
    return Searcher(store, emb), now


def test_no_nominations_proposes_three_unread_from_interests(hashing_store):
    from store.feedback import Feedback

    searcher, now = _proposing(hashing_store)
    first = propose(hashing_store, searcher, "C1", date(2026, 12, 3), feedback=Feedback())
    assert len(first) == 3 and len(set(first)) == 3
    hashing_store.put_club_session("C1", "2026-11-26", state="held", paper_id=first[0], now=now.timestamp())
    again = propose(hashing_store, searcher, "C1", date(2026, 12, 3), feedback=Feedback())
    assert first[0] not in again and len(again) == 3


def test_a_paper_a_member_said_not_for_me_is_not_proposed_to_the_club(hashing_store):
    """The proposals are ranked as the paper of the day is: a member's verdicts count there too."""
    from store.feedback import Feedback, record_verdict

    searcher, now = _proposing(hashing_store)
    first = propose(hashing_store, searcher, "C1", date(2026, 12, 3), feedback=Feedback())
    record_verdict(hashing_store, user="ann", paper_id=first[0], verdict="less", channel="C1",
                   message_ts="1764500000.000100", event_id="Ev1", now=now.timestamp() + 60)
    again = propose(hashing_store, searcher, "C1", date(2026, 12, 3), feedback=Feedback())
    assert first[0] not in again and len(again) == 3
    assert propose(hashing_store, searcher, "C1", date(2026, 12, 3), feedback=None)[0] == first[0]  # unheeded


def test_forget_me_takes_a_member_out_of_the_club(club):
    s, now = club
    day, _ = nominate(s, "C1", "p-a", "ann", now)
    at = utc(2026, 12, 2, 9)
    cast_vote(s, "C1", day, "ann", "p-a", at)
    s.add_club_away("C1", "ann", "2026-12-10", "2026-12-10", now=now.timestamp())
    s.put_club_session("C1", "2026-11-26", state="held", paper_id="p-old", presenter="ann", nominator="ann",
                       now=now.timestamp())
    counts = s.forget_user("ann")
    assert counts["club"] >= 5
    assert "ann" not in [m["user"] for m in s.club_members("C1", active_only=False)]
    assert s.club_votes("C1", day.isoformat()) == [] and s.club_aways("C1") == []
    held = s.get_club_session("C1", "2026-11-26")
    assert (held["paper_id"], held["presenter"], held["nominator"]) == ("p-old", None, None)
    assert [n["user"] for n in s.nominations("C1", day.isoformat())] == [None]
    assert "club" not in s.forget_user("ann")


def test_the_daily_pick_never_proposes_a_paper_the_club_read(hashing_store):
    from store import HashingEmbedder, Searcher, pick_for_day

    emb = HashingEmbedder()
    now = utc(2026, 11, 30, 8)
    vec = emb.encode(["video understanding"])[0]
    hashing_store.add_interest("C1", "video understanding", "ann", model=emb.name, vector=vec, now=now.timestamp())
    searcher = Searcher(hashing_store, emb)
    first = pick_for_day(hashing_store, searcher, "C1", date(2026, 12, 1), feedback=None)
    hashing_store.put_club_session("C1", "2026-11-26", state="held", paper_id=first.paper_id, now=now.timestamp())
    again = pick_for_day(hashing_store, searcher, "C1", date(2026, 12, 1), feedback=None)
    assert again.paper_id != first.paper_id
    assert first.paper_id not in [c.paper_id for c in again.runners_up]


def test_the_proposals_the_club_voted_down_are_not_posted_again_as_the_paper_of_the_day(hashing_store):
    """The bot proposes three papers, the club reads one: the other two were on the ballot in front
    of everyone, so tomorrow's paper of the day (and its runners-up) is none of the three."""
    from store import pick_for_day
    from store.feedback import Feedback

    searcher, now = _proposing(hashing_store)
    day = date(2026, 12, 3)
    before = pick_for_day(hashing_store, searcher, "C1", date(2026, 12, 4), feedback=Feedback())
    proposed = propose(hashing_store, searcher, "C1", day, feedback=Feedback())
    assert before.paper_id in proposed  # ranked alike: without the ballot it would be posted again
    for pid in proposed:  # as the agenda step puts them on the ballot
        hashing_store.add_nomination("C1", day.isoformat(), pid, None, now=now.timestamp())
    hashing_store.put_club_session("C1", day.isoformat(), state="held", paper_id=proposed[0], now=now.timestamp())
    after = pick_for_day(hashing_store, searcher, "C1", date(2026, 12, 4), feedback=Feedback())
    assert not {after.paper_id, *(c.paper_id for c in after.runners_up)} & set(proposed)
    # The ballot stays open to the members: a lost paper can be nominated again.
    assert nominate(hashing_store, "C1", proposed[1], "ann", utc(2026, 12, 4, 9))[1]


# -- the reading list as files: every text, however hostile, stays where it was put -------------
_INVISIBLE = st.sampled_from([" ", "\u00a0", "\u2007", "\u202f", "\u3000", "\u200b", "\u200c", "\u200d", "\u2060",
                              "\ufeff", "\u200e", "\u202e", "\u00ad", "\n", "\x0b"])


@given(st.lists(_INVISIBLE, max_size=4).map("".join), st.sampled_from("=+-@＝＋－＠﹦﹢"), st.text(max_size=20))
def test_a_cell_whose_first_visible_character_starts_a_formula_is_text_in_a_spreadsheet(lead, trigger, rest):
    assert csv_cell(lead + trigger + rest) == "'" + lead + trigger + rest


@given(st.lists(_INVISIBLE, max_size=3).map("".join), st.text(alphabet=st.characters(categories=["L", "N"]), min_size=1))
def test_an_ordinary_cell_is_left_as_it_is(lead, text):
    assert csv_cell(lead + text) == lead + text


def _bib_fields(entry: str) -> dict[str, str]:
    """An entry's fields as BibTeX reads them: a braced value ends at the brace balancing its
    opening one, whatever precedes it (a backslash does not escape a brace)."""
    import re

    fields, i = {}, entry.index(",") + 1
    while m := re.compile(r"\s*(\w+)\s*=\s*\{").match(entry, i):
        depth, j = 1, m.end()
        while depth:
            assert j < len(entry), f"a field never closes: {entry!r}"
            depth += {"{": 1, "}": -1}.get(entry[j], 0)
            j += 1
        fields[m.group(1)] = entry[m.end():j - 1]
        i = j + 1 if entry[j:j + 1] == "," else j
    assert entry[i:].strip() == "}", f"text after the last field: {entry[i:]!r}"
    return fields


def _printed(value: str) -> str:
    """The text LaTeX prints for an exported value (its escapes read back)."""
    out, i = [], 0
    escapes = {r"\textbraceleft{}": "{", r"\textbraceright{}": "}", r"\textbackslash{}": "\\"}
    while i < len(value):
        for esc, ch in escapes.items():
            if value.startswith(esc, i):
                out.append(ch)
                i += len(esc)
                break
        else:
            out.append(value[i])
            i += 1
    return "".join(out)


_BIB_TEXT = st.text(alphabet=st.sampled_from("{}\\@,=\"%# aZ\n"), max_size=30) | st.text(max_size=30)


@settings(max_examples=300)
@given(_BIB_TEXT, _BIB_TEXT)
def test_a_bibtex_entry_holds_exactly_its_fields_whatever_the_title_and_authors_say(title, author):
    row = {"id": "2101.00001", "title": title, "authors": author, "year": 2021, "venue": "arXiv", "url": "",
           "date": "2026-01-07", "presenter": "UANN", "votes": 1}
    (entry,) = to_bibtex([row]).strip().split("\n\n")
    assert entry.startswith("@misc{210100001,\n")
    fields = _bib_fields(entry)
    assert set(fields) - {"title", "author"} == {"year", "howpublished", "note"}
    assert fields["note"] == "Reading group, 2026-01-07"
    assert _printed(fields.get("title", "")) == " ".join(title.split())
