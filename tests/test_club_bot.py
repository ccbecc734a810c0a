"""The reading group through the real Bolt app and the fake Slack: the setup modal, nominations,
votes from several members (a double click, a click after the cutoff), the agenda updated in place,
and a swap offered, accepted and declined."""
from __future__ import annotations

import json
from datetime import date, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings, strategies as st
from slack_bolt import BoltRequest

from bot import blocks as bk
from bot.app import create_app
from bot.club import post_agenda
from conftest import Clock, Locker, dispatch_command, make_deps, make_settings, text_of
from store import HashingEmbedder, Searcher
from store.club import ClubSpec, set_club, skipped_for

# Each test runs on both store backends: a SQLite file, then PostgreSQL.
pytestmark = pytest.mark.both_backends

CH = "C1"
ADMIN = "UADMIN"
THU = 3
MONDAY = datetime(2026, 11, 30, 8, tzinfo=timezone.utc)  # the session is Thu 3 Dec 17:00 Berlin
DAY = date(2026, 12, 3)


@pytest.fixture
def world(fake_slack, hashing_store):
    clock = Clock(MONDAY)
    settings = make_settings(slack_api_url=fake_slack.api_url, admins=ADMIN)
    deps = make_deps(settings, hashing_store, Searcher(hashing_store, HashingEmbedder()), clock=clock)
    app = create_app(deps, process_before_response=True)
    fake_slack.add_members(ADMIN, "UANN", "UBOB", "UCY")  # the admin and _club's members are people of the workspace
    fake_slack.add_channel(CH)  # and its channel a channel of the workspace (App Home names it)
    return app, fake_slack, hashing_store, clock, deps


def dispatch(app, body):
    assert app.dispatch(BoltRequest(body=body, mode="socket_mode")).status == 200


def click(app, fake, action_id, value, *, user, message_ts=None, ephemeral=False, menu=False):
    """A click as Slack sends it, on the channel message message_ts (or an ephemeral reply); menu=True:
    `value` is the entry chosen in a paper card's overflow menu."""
    url = fake.new_response_url(channel=CH, user=user)
    action = ({"action_id": action_id, "block_id": "b", "type": "overflow",
               "selected_option": {"text": {"type": "plain_text", "text": "x"}, "value": value}} if menu else
              {"action_id": action_id, "block_id": "b", "value": value, "type": "button"})
    body = {"type": "block_actions", "user": {"id": user}, "api_app_id": "A1", "team": {"id": "T1"},
            "channel": {"id": CH}, "trigger_id": "13345224609.738474920.8088930838d88f008e0",
            "container": {"type": "message", "channel_id": CH, "message_ts": message_ts or "1.000001",
                          "is_ephemeral": ephemeral},
            "response_url": url, "actions": [action]}
    dispatch(app, body)
    return fake.responses(url)


def nominate_entries(blocks) -> list[str]:
    """The Nominate entries of a message's card menus (their option values), in order."""
    return [o["value"] for b in blocks if b["type"] == "actions" for e in b["elements"]
            if e["type"] == "overflow" for o in e["options"] if bk.menu_choice(o["value"])[0] == bk.ACTION_NOMINATE]


def submit_setup(app, view, *, user, **values):
    state = {
        "weekday": {"value": {"type": "static_select", "selected_option": {"value": str(values.get("weekday", THU))}}},
        "time": {"value": {"type": "timepicker", "selected_time": values.get("time", "17:00")}},
        "tz": {"value": {"type": "plain_text_input", "value": values.get("tz", "Europe/Berlin")}},
        "cadence": {"value": {"type": "static_select", "selected_option": {"value": "weekly"}}},
        "lead": {"value": {"type": "number_input", "value": str(values.get("lead", 48))}},
        "cutoff": {"value": {"type": "number_input", "value": str(values.get("cutoff", 24))}},
        "mode": {"value": {"type": "static_select", "selected_option": {"value": "vote"}}},
    }
    body = {"type": "view_submission", "user": {"id": user}, "api_app_id": "A1", "team": {"id": "T1"},
            "trigger_id": "1.2.3", "view": {**view, "state": {"values": state}}}
    return app.dispatch(BoltRequest(body=body, mode="socket_mode"))


def test_admin_opens_the_setup_modal_and_its_submission_is_stored(world):
    app, fake, store, clock, deps = world
    reply = dispatch_command(app, fake, "club", user=ADMIN, channel=CH)
    assert "no reading group yet" in text_of(reply)
    setup = [e for b in reply["blocks"] if b["type"] == "actions" for e in b["elements"]
             if e["action_id"] == bk.ACTION_CLUB_SETUP]
    assert setup, "an admin gets the Set up button"
    member_reply = dispatch_command(app, fake, "club", user="UBOB", channel=CH)
    assert bk.ACTION_CLUB_SETUP not in text_of(member_reply)
    click(app, fake, bk.ACTION_CLUB_SETUP, CH, user=ADMIN, ephemeral=True)
    modals = fake.modals()
    assert len(modals) == 1 and modals[0]["callback_id"] == bk.CLUB_SETUP_VIEW
    assert fake.calls("views.open")[0].params["trigger_id"].startswith("13345224609")
    bad = submit_setup(app, modals[0], user=ADMIN, tz="Mars/Olympus")
    assert bad.status == 200 and '"errors"' in bad.body and "tz" in bad.body
    assert store.get_club(CH) is None  # nothing half-written
    before = len(fake.ephemeral_messages(CH))
    assert submit_setup(app, modals[0], user=ADMIN).status == 200
    club = store.get_club(CH)
    assert (club["weekday"], club["hour"], club["tz"], club["lead_hours"]) == (THU, 17, "Europe/Berlin", 48)
    # The form closes on its ack; the admin is told privately, in the channel, that it took.
    [said] = fake.ephemeral_messages(CH)[before:]
    assert said["user"] == ADMIN and "set up" in text_of(said) and "Thu 3 Dec at 17:00 Europe/Berlin" in text_of(said)
    reply = dispatch_command(app, fake, "club", user="UBOB", channel=CH)
    assert "Thu 3 Dec at 17:00 Europe/Berlin" in text_of(reply)


def _setup_form_open(fake, store):
    """The app on `store` (the world's, but another store) and the setup form the admin opened."""
    settings = make_settings(slack_api_url=fake.api_url, admins=ADMIN)
    app = create_app(make_deps(settings, store, Searcher(store, HashingEmbedder()), clock=Clock(MONDAY)),
                     process_before_response=True)
    fake.add_members(ADMIN)
    fake.add_channel(CH)
    click(app, fake, bk.ACTION_CLUB_SETUP, CH, user=ADMIN, ephemeral=True)
    [modal] = fake.modals()
    return app, modal


def test_a_setup_form_submitted_while_the_database_is_locked_is_saved_once_it_is_free(fake_slack,
                                                                                     quick_busy_store):
    """The form closes on its ack, before the write: a lock another connection holds is waited out,
    so the setup is not lost and the admin is told it took."""
    store = quick_busy_store
    app, modal = _setup_form_open(fake_slack, store)
    with Locker(store).until_retried() as retried:
        assert submit_setup(app, modal, user=ADMIN).status == 200
    club = store.get_club(CH)
    assert club is not None and (club["weekday"], club["hour"], club["tz"]) == (THU, 17, "Europe/Berlin")
    [said] = fake_slack.ephemeral_messages(CH)
    assert said["user"] == ADMIN and "Thu 3 Dec at 17:00 Europe/Berlin" in text_of(said)
    assert retried, "the write should have met the lock"


def test_a_setup_form_the_database_stays_locked_for_tells_the_admin_it_was_not_saved(fake_slack, quick_busy_store,
                                                                                    monkeypatch):
    import bot.later

    monkeypatch.setattr(bot.later, "RETRY_DELAYS", (0.01,))  # minutes of retries, cut to one
    store = quick_busy_store
    app, modal = _setup_form_open(fake_slack, store)
    locker = Locker(store)
    try:
        assert submit_setup(app, modal, user=ADMIN).status == 200
    finally:
        locker.release()
    assert store.get_club(CH) is None
    [said] = fake_slack.ephemeral_messages(CH)
    assert said["user"] == ADMIN and "was not set up" in text_of(said) and "/paper club" in text_of(said)


def test_a_member_who_leaves_the_channel_while_the_database_is_locked_is_out_of_the_rotation(fake_slack,
                                                                                            quick_busy_store):
    """Leaving the channel is an event nobody can repeat: a lock another connection holds is waited
    out, so the member is not left in the presenter rotation."""
    store = quick_busy_store
    app, _ = _setup_form_open(fake_slack, store)
    set_club(store, CH, ClubSpec(weekday=THU, hour=17, minute=0, tz="Europe/Berlin"), by=ADMIN, now=MONDAY)
    store.set_club_member(CH, "UANN", active=True, now=MONDAY.timestamp())
    body = {"type": "event_callback", "team_id": "T1", "api_app_id": "A1", "event_id": "EvLeftLocked",
            "event_time": 1, "authorizations": [{"team_id": "T1", "user_id": "UBOT", "is_bot": True}],
            "event": {"type": "member_left_channel", "user": "UANN", "channel": CH, "channel_type": "C",
                      "team": "T1", "event_ts": f"{MONDAY.timestamp():.6f}"}}
    with Locker(store).until_retried() as retried:
        dispatch(app, body)
    assert "UANN" not in {m["user"] for m in store.club_members(CH)}
    assert retried, "the write should have met the lock"


def test_a_setup_form_that_slack_says_came_too_late_asks_the_admin_to_press_again(world):
    app, fake, store, clock, deps = world
    fake.fail("views.open", error="expired_trigger_id")  # the click's trigger_id lasts about 3 s
    replies = click(app, fake, bk.ACTION_CLUB_SETUP, CH, user=ADMIN, ephemeral=True)
    assert not fake.modals()
    assert len(replies) == 1 and "did not open in time" in text_of(replies[0])
    assert "Set up the club" in text_of(replies[0]) and replies[0].get("response_type") == "ephemeral"
    click(app, fake, bk.ACTION_CLUB_SETUP, CH, user=ADMIN, ephemeral=True)
    assert [m["callback_id"] for m in fake.modals()] == [bk.CLUB_SETUP_VIEW]


def _club(store, members=("UANN", "UBOB", "UCY")):
    set_club(store, CH, ClubSpec(THU, 17, 0, "Europe/Berlin", lead_hours=48, cutoff_hours=24), by=ADMIN, now=MONDAY)
    for m in members:
        store.set_club_member(CH, m, active=True, now=MONDAY.timestamp())


def test_join_away_nominate_and_votes_update_the_agenda_in_place(world):
    app, fake, store, clock, deps = world
    _club(store, members=())
    assert "You are in the presenter rotation" in text_of(dispatch_command(app, fake, "club join", user="UANN",
                                                                          channel=CH))
    assert "already" in text_of(dispatch_command(app, fake, "club join", user="UANN", channel=CH))
    assert "away Thu 10 Dec to Thu 17 Dec" in text_of(
        dispatch_command(app, fake, "club away 2026-12-10..2026-12-17", user="UANN", channel=CH))
    assert "away Mon 7 Dec to Sun 13 Dec" in text_of(
        dispatch_command(app, fake, "club away next week", user="UANN", channel=CH))
    papers = list(store.iter_papers())[:3]
    first = dispatch_command(app, fake, f"nominate {papers[0].id}", user="UANN", channel=CH)
    assert "Nominated" in text_of(first) and "2026-12-03" in text_of(first)
    # Nominate in a search result's menu does the same.
    hit = dispatch_command(app, fake, "search video", user="UBOB", channel=CH)
    nominate = nominate_entries(hit["blocks"])[0]
    answer = click(app, fake, bk.ACTION_MENU, nominate, user="UBOB", ephemeral=True, menu=True)
    assert "Nominated" in text_of(answer[0]) or "already nominated" in text_of(answer[0])
    dispatch_command(app, fake, f"nominate {papers[1].id}", user="UCY", channel=CH)

    clock.now = datetime(2026, 12, 1, 16, 30, tzinfo=timezone.utc)  # nominations closed: the agenda
    ts = post_agenda(deps, deps.slack, CH, DAY)
    agenda = fake.messages(CH)[-1]
    assert agenda["ts"] == ts and agenda["metadata"]["event_payload"] == {"kind": "agenda", "key": "agenda:2026-12-03"}
    target = f"{DAY.isoformat()}|{papers[0].id}"
    for user in ("UANN", "UBOB"):
        assert click(app, fake, bk.ACTION_VOTE, target, user=user, message_ts=ts) == []
    double = click(app, fake, bk.ACTION_VOTE, target, user="UBOB", message_ts=ts)  # a double click
    assert "counts once" in text_of(double[0])
    updated = next(m for m in fake.messages(CH) if m["ts"] == ts)
    section = next(b for b in updated["blocks"] if b.get("block_id", "").endswith(papers[0].id))
    assert "*2* votes" in section["text"]["text"]
    assert len(fake.messages(CH)) == 1  # updated in place, nothing new posted
    assert len(fake.calls("chat.update")) == 2  # one per counted vote, none for the double click

    clock.now = datetime(2026, 12, 2, 16, 0, 1, tzinfo=timezone.utc)  # one second after the cutoff
    late = click(app, fake, bk.ACTION_VOTE, target, user="UCY", message_ts=ts)
    assert "closed" in text_of(late[0]) and "sorry" in text_of(late[0])
    assert len(store.club_votes(CH, DAY.isoformat())) == 2


def test_swap_offered_declined_and_accepted(world):
    app, fake, store, clock, deps = world
    _club(store)
    paper = next(iter(store.iter_papers()))
    store.put_club_session(CH, DAY.isoformat(), presenter="UANN", paper_id=paper.id, now=MONDAY.timestamp())
    fake.add_members("UBOB")  # a member of the workspace: the offer means to name them
    offer = dispatch_command(app, fake, "club swap <@UBOB>", user="UANN", channel=CH)
    assert offer["response_type"] == "in_channel" and "<@UBOB>" in text_of(offer)
    value = next(e["value"] for b in offer["blocks"] if b["type"] == "actions" for e in b["elements"]
                 if e["action_id"] == bk.ACTION_SWAP_ACCEPT)
    assert "Only <@UBOB>" in text_of(click(app, fake, bk.ACTION_SWAP_ACCEPT, value, user="UCY", ephemeral=True)[0])
    assert store.get_club_session(CH, DAY.isoformat())["presenter"] == "UANN"
    click(app, fake, bk.ACTION_SWAP_DECLINE, value, user="UBOB", ephemeral=True)
    assert store.get_club_session(CH, DAY.isoformat())["presenter"] == "UANN"  # nothing changes on a no
    assert fake.dm_messages("UBOB") == []
    click(app, fake, bk.ACTION_SWAP_ACCEPT, value, user="UBOB", ephemeral=True)
    assert store.get_club_session(CH, DAY.isoformat())["presenter"] == "UBOB"
    [dm] = fake.dm_messages("UBOB")  # the new presenter gets the paper and the outline
    assert "A suggested outline" in text_of(dm) and bk.esc(paper.short_name) in text_of(dm)
    stale = click(app, fake, bk.ACTION_SWAP_ACCEPT, value, user="UBOB", ephemeral=True)
    assert "expired" in text_of(stale[0])


def test_skip_and_off_are_for_admins(world):
    app, fake, store, clock, deps = world
    _club(store)
    assert "admins" in text_of(dispatch_command(app, fake, "club skip 2026-12-03", user="UANN", channel=CH))
    assert "does not meet" in text_of(dispatch_command(app, fake, "club skip 2026-12-04", user=ADMIN, channel=CH))
    assert "cancelled" in text_of(dispatch_command(app, fake, "club skip 2026-12-03", user=ADMIN, channel=CH))
    assert "Thu 10 Dec" in text_of(dispatch_command(app, fake, "club", user="UANN", channel=CH))
    assert "is off" in text_of(dispatch_command(app, fake, "club off confirm", user=ADMIN, channel=CH))
    assert "reading group here is off" in text_of(dispatch_command(app, fake, "nominate 1", user="UANN", channel=CH))


def test_dates_typed_in_words_for_away_skip_and_unskip(world):
    """Monday 30 November: the club meets on Thursdays. Dates come as people type them, read in the
    club's zone; a numbers-only date and a day the club does not meet are refused with an example."""
    app, fake, store, clock, deps = world
    _club(store)
    # The reply says the days as the club's posts do, so the member sees how their words were read.
    said = text_of(dispatch_command(app, fake, "club away 10 dec - 24 dec", user="UANN", channel=CH))
    assert "Noted: you are away Thu 10 Dec to Thu 24 Dec;" in said
    said = text_of(dispatch_command(app, fake, "club away until friday", user="UBOB", channel=CH))
    assert "Noted: you are away Mon 30 Nov to Fri 4 Dec;" in said
    said = text_of(dispatch_command(app, fake, "club away 28 dec - 3 jan", user="UANN", channel=CH))
    assert "Noted: you are away Mon 28 Dec 2026 to Sun 3 Jan 2027;" in said  # the year, as it changes
    said = text_of(dispatch_command(app, fake, "club away 2026-12-03", user="UCY", channel=CH))
    assert "Noted: you are away Thu 3 Dec;" in said
    status = text_of(dispatch_command(app, fake, "club", user="UANN", channel=CH))
    assert "*You are away:* Thu 10 Dec to Thu 24 Dec, Mon 28 Dec 2026 to Sun 3 Jan 2027" in status
    assert "You are away" not in text_of(dispatch_command(app, fake, "club", user=ADMIN, channel=CH))
    refused = text_of(dispatch_command(app, fake, "club away 10/12", user="UCY", channel=CH))
    assert "could be 10 Dec or 12 Oct" in refused and "club away next week" in refused
    assert sorted((a["user"], a["start"], a["end"]) for a in store.club_aways(CH)) == [
        ("UANN", "2026-12-10", "2026-12-24"), ("UANN", "2026-12-28", "2027-01-03"),
        ("UBOB", "2026-11-30", "2026-12-04"), ("UCY", "2026-12-03", "2026-12-03")]

    skipped = text_of(dispatch_command(app, fake, "club skip next thursday", user=ADMIN, channel=CH))
    assert "The session on Thu 10 Dec is cancelled" in skipped and "*Next session:* Thu 3 Dec" in skipped
    refused = text_of(dispatch_command(app, fake, "club skip friday", user=ADMIN, channel=CH))
    assert "The club meets on Thursdays, not on Fridays" in refused and "club skip 2026-12-03" in refused
    refused = text_of(dispatch_command(app, fake, "club skip 9 Dec", user=ADMIN, channel=CH))
    assert "does not meet on Wed 9 Dec 2026" in refused and "club skip 2026-12-03" in refused
    refused = text_of(dispatch_command(app, fake, "club unskip 2026-12-04", user=ADMIN, channel=CH))
    assert "does not meet" in refused and "club unskip 2026-12-10" in refused  # the skipped one
    assert "The session on Thu 10 Dec is on again" in text_of(
        dispatch_command(app, fake, "club unskip 10 Dec", user=ADMIN, channel=CH))
    assert "The session on Thu 3 Dec is cancelled" in text_of(
        dispatch_command(app, fake, "club skip thursday", user=ADMIN, channel=CH))
    assert skipped_for(store, CH) == {date(2026, 12, 3)}


def test_a_skipped_sessions_nominations_carry_over_and_the_skip_can_be_undone(world):
    app, fake, store, clock, deps = world
    _club(store)
    paper, other = store.list_papers(limit=2)
    assert "Nominated" in text_of(dispatch_command(app, fake, f"nominate {paper.id}", user="UANN", channel=CH))
    store.add_vote(CH, DAY.isoformat(), "UBOB", paper.id, limit=3, now=MONDAY.timestamp())
    store.add_nomination(CH, "2026-12-10", paper.id, "UCY", now=MONDAY.timestamp())  # on both ballots
    store.add_nomination(CH, DAY.isoformat(), other.id, "UBOB", now=MONDAY.timestamp() + 1)

    reply = text_of(dispatch_command(app, fake, "club skip 2026-12-03", user=ADMIN, channel=CH))
    assert "The session on Thu 3 Dec is cancelled" in reply
    assert "Its 2 nominations carried over to Thu 10 Dec at 17:00 Europe/Berlin; the 1 vote cast for it does not" in reply
    assert "*Next session:* Thu 10 Dec" in reply and "*Nominations:* 2" in reply
    assert sorted((n["paper_id"], n["user"]) for n in store.nominations(CH, "2026-12-10")) == sorted(
        [(paper.id, "UCY"), (other.id, "UBOB")])
    assert "unskip 2026-12-03" in reply  # how to undo it

    again = text_of(dispatch_command(app, fake, "club skip 2026-12-03", user=ADMIN, channel=CH))
    assert "was already cancelled" in again and "is cancelled" not in again

    back = text_of(dispatch_command(app, fake, "club unskip 2026-12-03", user=ADMIN, channel=CH))
    assert "The session on Thu 3 Dec is on again. Its 2 nominations came back from Thu 10 Dec" in back
    assert "*Next session:* Thu 3 Dec" in back and "*Nominations:* 2 · *votes so far:* 1" in back
    assert "nothing to undo" in text_of(dispatch_command(app, fake, "club unskip 2026-12-03", user=ADMIN, channel=CH))
    assert "admins" in text_of(dispatch_command(app, fake, "club unskip 2026-12-03", user="UANN", channel=CH))
    assert "unskip &lt;date&gt;" in text_of(dispatch_command(app, fake, "help club", user="UANN", channel=CH))


def test_an_unskipped_session_gets_its_ballot_back_and_the_next_keeps_its_own(world):
    app, fake, store, clock, deps = world
    _club(store)
    paper, other, third = store.list_papers(limit=3)
    for pid, user in ((paper.id, "UANN"), (other.id, "UBOB")):
        assert "2026-12-03" in text_of(dispatch_command(app, fake, f"nominate {pid}", user=user, channel=CH))
    store.add_nomination(CH, "2026-12-10", paper.id, "UCY", now=MONDAY.timestamp())  # on both ballots
    store.add_vote(CH, DAY.isoformat(), "UCY", other.id, limit=3, now=MONDAY.timestamp())
    skipped = text_of(dispatch_command(app, fake, "club skip 2026-12-03", user=ADMIN, channel=CH))
    assert "Its 2 nominations carried over to Thu 10 Dec" in skipped
    # While it is cancelled the next session's ballot grows on its own, and votes are cast there,
    # one for a paper that was carried.
    assert "2026-12-10" in text_of(dispatch_command(app, fake, f"nominate {third.id}", user="UCY", channel=CH))
    for pid in (other.id, third.id):
        store.add_vote(CH, "2026-12-10", "UBOB", pid, limit=3, now=MONDAY.timestamp())

    back = text_of(dispatch_command(app, fake, "club unskip 2026-12-03", user=ADMIN, channel=CH))
    assert ("The session on Thu 3 Dec is on again. Its 2 nominations came back from Thu 10 Dec at 17:00 "
            "Europe/Berlin; the 1 vote cast for them there is withdrawn.") in back
    assert "*Next session:* Thu 3 Dec" in back and "*Nominations:* 2 · *votes so far:* 1" in back  # UCY's, again
    # The next session keeps what was nominated for it (the paper on both ballots too) and UBOB's other vote.
    assert sorted((n["paper_id"], n["user"]) for n in store.nominations(CH, "2026-12-10")) == sorted(
        [(paper.id, "UCY"), (third.id, "UCY")])
    assert [v["paper_id"] for v in store.club_votes(CH, "2026-12-10")] == [third.id]

    clock.now = datetime(2026, 12, 1, 16, 30, tzinfo=timezone.utc)  # nominations closed: the agenda
    ts = post_agenda(deps, deps.slack, CH, DAY)
    on_agenda = [b["block_id"] for b in fake.messages(CH)[-1]["blocks"] if b.get("block_id", "").startswith(bk.AGENDA_BLOCK)]
    assert sorted(i.removeprefix(bk.AGENDA_BLOCK).split("-", 1)[1] for i in on_agenda) == sorted([paper.id, other.id])  # not the next one's
    assert click(app, fake, bk.ACTION_VOTE, f"{DAY.isoformat()}|{other.id}", user="UBOB", message_ts=ts) == []
    assert sorted(v["user"] for v in store.club_votes(CH, DAY.isoformat())) == ["UBOB", "UCY"]


def test_app_home_shows_the_next_session_your_votes_and_your_turn(world):
    app, fake, store, clock, deps = world
    _club(store)
    paper = next(iter(store.iter_papers()))
    store.add_nomination(CH, DAY.isoformat(), paper.id, "UANN", now=MONDAY.timestamp())
    clock.now = datetime(2026, 12, 1, 17, tzinfo=timezone.utc)
    store.add_vote(CH, DAY.isoformat(), "UBOB", paper.id, limit=3, now=clock.now.timestamp())
    body = {"type": "event_callback", "team_id": "T1", "api_app_id": "A1", "event_id": "EvHOME9", "event_time": 1,
            "event": {"type": "app_home_opened", "user": "UBOB", "tab": "home", "channel": "D1"}}
    dispatch(app, body)
    home = text_of(fake.home_view("UBOB"))
    assert "Reading group" in home and "Thu 3 Dec at 17:00" in home
    assert f"*Your votes:* {paper.short_name}" in home or "Your votes:* " + paper.short_name.replace("&", "&amp;") in home
    # Three members, nobody has presented: UANN (first by id) on 3 Dec, UBOB on 10 Dec.
    assert "*You next present:* Thu 10 Dec" in home and "*Presenter:* _not chosen yet_" in home

    def home_of(user, n):
        fake.add_members(user)
        dispatch(app, {**body, "event_id": f"EvHOME{n}", "event": {**body["event"], "user": user}})
        return text_of(fake.home_view(user))

    # A member who votes but is not in the rotation sees the session and their votes, and how to join.
    store.add_vote(CH, DAY.isoformat(), "UDAN", paper.id, limit=3, now=clock.now.timestamp())
    dan = home_of("UDAN", 10)
    assert "Thu 3 Dec at 17:00" in dan and "not in the rotation" in dan and "club join" in dan
    assert "Reading group" not in home_of("UEVE", 11)  # neither member nor voter: no club section
    # Once the presenter is chosen, Home names them, and tells them it is their turn.
    store.put_club_session(CH, DAY.isoformat(), presenter="UANN", paper_id=paper.id, now=clock.now.timestamp())
    ann = home_of("UANN", 12)
    assert "*Presenter:* <@UANN>" in ann and "*You next present:* _this session_" in ann
    assert "*You next present:* Thu 10 Dec" in home_of("UBOB", 13)


def test_export_uploads_the_reading_list_as_bibtex_and_csv(world):
    import csv
    import io

    app, fake, store, clock, deps = world
    _club(store)
    assert "nothing to export" in text_of(dispatch_command(app, fake, "club export", user="UANN", channel=CH))
    papers = list(store.iter_papers())[:2]
    for i, p in enumerate(papers):
        store.put_club_session(CH, f"2026-11-{12 + 7 * i}", state="held", paper_id=p.id, presenter="UANN",
                               votes=i + 1, now=MONDAY.timestamp())
    reply = dispatch_command(app, fake, "club export", user="UANN", channel=CH)
    assert "2 papers" in text_of(reply)
    files = {u["filename"]: u for u in fake.uploads().values()}
    bib = files["reading-group.bib"]["content"].decode()
    assert bib.count("@misc{") == 2 and all(f"@misc{{{p.id}," in bib for p in papers)
    assert bib.count("{") == bib.count("}")
    rows = list(csv.DictReader(io.StringIO(files["reading-group.csv"]["content"].decode())))
    assert [r["id"] for r in rows] == [p.id for p in papers] and rows[1]["votes"] == "2"
    assert files["reading-group.csv"]["channel"] == CH


HOSTILE_TITLES = ["Bib}, author = {Mallory}, note = {x", "Bob}, editor = Mallory, note = x}", "}}}}", "{{{",
                  "a \\} b", "@misc{evil, title={x}}", "{BERT} is {balanced}", "\\input{/etc/passwd}"]
FORMULAS = ["\u00a0=HYPERLINK(\"http://evil\")", "\u200b+1+1", "\ufeff-2", "\u2060@SUM(A1)", "\t=1", "\uff1d1+1",
            " \u202f\u200d=cmd|' /C calc'!A0"]


def test_an_exported_reading_list_keeps_hostile_titles_inside_their_fields_and_cells(world):
    import csv
    import io

    from store import Record, ingest_records
    from test_club import _bib_fields, _printed

    app, fake, store, clock, deps = world
    _club(store)
    titles = HOSTILE_TITLES + FORMULAS
    records = [Record(abstract=f"We study exports of reading lists whose titles and authors are hostile, case {i}. "
                             "A spreadsheet or a bibliography manager must show them as the text they are.",
                      title=t, authors=[FORMULAS[i % len(FORMULAS)], "Ann"], source="test",
                      line=i + 1) for i, t in enumerate(titles)]
    assert ingest_records(store, records, HashingEmbedder(), now=MONDAY.timestamp()).added == len(records)
    by_case = {p.abstract.split("case ")[1].split(".")[0]: p for p in store.iter_papers() if "hostile, case" in p.abstract}
    papers = [by_case[str(i)] for i in range(len(titles))]
    for i, p in enumerate(papers):
        store.put_club_session(CH, (date(2026, 1, 1) + timedelta(days=7 * i)).isoformat(), state="held",
                               paper_id=p.id, presenter="UANN", now=MONDAY.timestamp())
    assert f"{len(records)} papers" in text_of(dispatch_command(app, fake, "club export", user="UANN", channel=CH))
    files = {u["filename"]: u for u in fake.uploads().values()}
    entries = files["reading-group.bib"]["content"].decode().strip().split("\n\n")
    assert len(entries) == len(records)
    for entry, p in zip(entries, papers):
        fields = _bib_fields(entry)
        # Each entry holds exactly its own fields, and its title says what the paper's title says.
        assert sorted(fields) == ["author", "note", "title"], entry
        assert _printed(fields["title"]) == " ".join(p.display_title.split())
        assert fields["note"].startswith("Reading group, 2026-")
    rows = {r["id"]: r for r in csv.DictReader(io.StringIO(files["reading-group.csv"]["content"].decode()))}
    # A cell a spreadsheet would run is quoted as text; the others are as they were.
    assert all(r["authors"].startswith("'") for r in rows.values())
    for p in papers:
        title = p.display_title
        runs = title.lstrip("\t \u00a0\u200b\ufeff\u2060\u202f\u200d")[:1] in "=+-@\uff1d"
        assert rows[p.id]["title"] == ("'" + title if runs else title)


def test_map_is_a_real_png_of_the_stated_size_labelled_from_the_store(world):
    import struct

    from bot.club import MAP_SIZE
    from store.club_export import map_points

    app, fake, store, clock, deps = world
    _club(store)
    emb = HashingEmbedder()
    papers = list(store.iter_papers())[:4]
    for i, p in enumerate(papers[:3]):
        store.put_club_session(CH, f"2026-11-{5 + 7 * i:02d}", state="held", paper_id=p.id, presenter="UANN",
                               now=MONDAY.timestamp())
    store.claim_post(CH, "2026-11-02", claimer="x", paper_id=papers[3].id, pick=None, now=MONDAY.timestamp())
    store.add_interest(CH, "video understanding", "UANN", model=emb.name, vector=emb.encode(["video"])[0],
                       now=MONDAY.timestamp())
    points = map_points(store, CH, emb.name)
    assert sorted(label for label, _, _ in points.sessions) == sorted(p.short_name for p in papers[:3])
    assert len(points.daily) == 1 and points.interests[0][0] == "video understanding"  # no Slack ids
    assert points.dates == sorted(points.dates) == ["2026-11-05", "2026-11-12", "2026-11-19"]  # read in order
    reply = dispatch_command(app, fake, "club map", user="UANN", channel=CH)
    assert "3 sessions" in text_of(reply)
    (upload,) = [u for u in fake.uploads().values() if u["filename"] == "reading-group-map.png"]
    png = upload["content"]
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and png[12:16] == b"IHDR"
    assert struct.unpack(">II", png[16:24]) == MAP_SIZE
    assert upload["channel"] == CH


MATH_INTERESTS = ["$\\alpha$-divergence bounds", "costs $5 or $", "$\\frac{1}{$", "x^2_{i} \\sqrt", "$$", "100% $\\mathbb{R"]


def test_the_club_map_draws_interests_written_like_math_as_the_text_they_are(world):
    app, fake, store, clock, deps = world
    _club(store)
    for i, p in enumerate(list(store.iter_papers())[:2]):
        store.put_club_session(CH, f"2026-11-{5 + 7 * i:02d}", state="held", paper_id=p.id, presenter="UANN",
                               now=MONDAY.timestamp())
    for topic in MATH_INTERESTS:
        assert "Sorry" not in text_of(dispatch_command(app, fake, f"interests add {topic}", user="UBOB", channel=CH))
    reply = text_of(dispatch_command(app, fake, "club map", user="UBOB", channel=CH))
    assert "Posted a map of the club's 2 sessions" in reply
    (upload,) = [u for u in fake.uploads().values() if u["filename"] == "reading-group-map.png"]
    assert upload["content"][:8] == b"\x89PNG\r\n\x1a\n"


@settings(max_examples=12, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from("$\\^_{}%#&~ax1"), min_size=1, max_size=12), min_size=1, max_size=3))
def test_any_text_on_the_map_is_drawn_without_error(labels):
    from bot.club.reports import render_map
    from store.club_export import MapPoints

    png = render_map(MapPoints(sessions=[(t, i, -i) for i, t in enumerate(labels)], daily=[(0.5, 0.5)],
                               interests=[(f"UANN: {t}", -i, i) for i, t in enumerate(labels)]), size=(300, 200))
    assert png[:8] == b"\x89PNG\r\n\x1a\n"


def test_nominate_on_the_paper_of_the_day_and_an_unfurl_card(world):
    from bot.posting import post_daily

    app, fake, store, clock, deps = world

    def daily_post():
        return [m for m in fake.messages(CH) if m.get("blocks") and not m.get("thread_ts")][-1]
    # No reading group meets here yet: the paper of the day offers no Nominate.
    post_daily(deps.slack, store, deps.searcher, CH, MONDAY, feedback=deps.feedback, sleep=lambda s: None)
    assert nominate_entries(daily_post()["blocks"]) == []
    # An older card's Nominate (the club since switched off) says so, and how to get one.
    paper_id = daily_post()["metadata"]["event_payload"]["paper_id"]
    nope = click(app, fake, bk.ACTION_MENU, bk.menu_value(bk.ACTION_NOMINATE, paper_id), user="UANN", menu=True)
    assert "no reading group" in text_of(nope[0]) and nope[0]["response_type"] == "ephemeral"
    assert "set one up" in text_of(nope[0])
    _club(store)
    post_daily(deps.slack, store, deps.searcher, CH, MONDAY + timedelta(days=1), feedback=deps.feedback,
               sleep=lambda s: None)
    daily = daily_post()
    entries = nominate_entries(daily["blocks"])
    assert len(entries) == 3  # in the menus of the paper of the day and both runners-up
    first = click(app, fake, bk.ACTION_MENU, entries[0], user="UANN", message_ts=daily["ts"], menu=True)
    assert "Nominated" in text_of(first[0]) and "2026-12-03" in text_of(first[0])
    assert first[0]["response_type"] == "ephemeral" and first[0].get("replace_original") is False
    again = click(app, fake, bk.ACTION_MENU, entries[0], user="UBOB", message_ts=daily["ts"], menu=True)
    assert "already nominated" in text_of(again[0])
    noms = store.nominations(CH, DAY.isoformat())
    nominated = bk.menu_choice(entries[0])[1]
    assert [(n["paper_id"], n["user"]) for n in noms] == [(nominated, "UANN")]  # the first nominator
    # The card under a pasted link carries it too, and the old Nominate button still works.
    paper = store.get_paper(bk.menu_choice(entries[1])[1])
    [value] = nominate_entries([b.to_dict() for b in bk.unfurl_blocks(paper)])
    assert "Nominated" in text_of(click(app, fake, bk.ACTION_NOMINATE, bk.menu_choice(value)[1], user="UCY")[0])
    assert len(store.nominations(CH, DAY.isoformat())) == 2
    assert all(len(b["elements"]) <= bk.MAX_ACTION_ELEMENTS
               for m in fake.messages(CH) for b in m.get("blocks") or [] if b["type"] == "actions")


def _presenter_club(store, fake):
    from store.club import PRESENTER_CHOOSES

    set_club(store, CH, ClubSpec(THU, 17, 0, "Europe/Berlin", lead_hours=48, cutoff_hours=24,
                                 mode=PRESENTER_CHOOSES), by=ADMIN, now=MONDAY)
    for m in ("UANN", "UBOB", "UCY"):
        store.set_club_member(CH, m, active=True, now=MONDAY.timestamp())


def _tick(deps, at):
    from bot.club import club_tick

    deps.clock.now = at
    return club_tick(deps, deps.slack, at, sleep=lambda s: None, budget=30)


AGENDA_AT = datetime(2026, 12, 1, 16, 1, tzinfo=timezone.utc)  # nominations closed 48 h before
CUTOFF_AT = datetime(2026, 12, 2, 16, 1, tzinfo=timezone.utc)


def test_the_presenter_chooses_among_the_nominations_and_only_they_may(world):
    app, fake, store, clock, deps = world
    _presenter_club(store, fake)
    papers = list(store.iter_papers())[:2]
    for user, paper in zip(("UBOB", "UCY"), papers):
        assert "Nominated" in text_of(dispatch_command(app, fake, f"nominate {paper.id}", user=user, channel=CH))
    assert "the presenter chooses among them" in text_of(dispatch_command(app, fake, "club", user="UBOB", channel=CH))
    _tick(deps, AGENDA_AT)
    [agenda] = [m for m in fake.messages(CH) if "what shall we read" in text_of(m)]
    presenter = store.get_club_session(CH, DAY.isoformat())["presenter"]
    assert presenter == "UANN"  # fewest turns, then the member id: the presenter is known when nominations close
    assert f"<@{presenter}> presents this session and chooses the paper" in text_of(agenda)
    actions = [b["accessory"]["action_id"] for b in agenda["blocks"] if b.get("accessory")]
    assert actions == [bk.ACTION_CLUB_CHOOSE] * 2 and bk.ACTION_VOTE not in text_of(agenda)
    value = lambda p: f"{DAY.isoformat()}|{p.id}"  # noqa: E731
    # Someone else presses Choose: a polite no, and nothing changes.
    refused = click(app, fake, bk.ACTION_CLUB_CHOOSE, value(papers[0]), user="UBOB", message_ts=agenda["ts"])
    assert "<@UANN> chooses the paper" in text_of(refused[0]) and refused[0]["response_type"] == "ephemeral"
    assert store.get_club_session(CH, DAY.isoformat())["paper_id"] is None
    assert "no vote" in text_of(click(app, fake, bk.ACTION_VOTE, value(papers[0]), user="UBOB",
                                      message_ts=agenda["ts"])[0])
    # The presenter chooses, then changes their mind before the cutoff; the agenda shows it in place.
    assert "You chose" in text_of(click(app, fake, bk.ACTION_CLUB_CHOOSE, value(papers[1]), user="UANN",
                                        message_ts=agenda["ts"])[0])
    assert "You chose" in text_of(click(app, fake, bk.ACTION_CLUB_CHOOSE, value(papers[0]), user="UANN",
                                        message_ts=agenda["ts"])[0])
    updated = next(m for m in fake.messages(CH) if m["ts"] == agenda["ts"])
    chosen = [b for b in updated["blocks"] if "*chosen*" in json.dumps(b)]
    assert len(chosen) == 1 and chosen[0]["block_id"].endswith(papers[0].id)
    # After the cutoff the choice is closed and announced, and the presenter gets their DM about it.
    clock.now = CUTOFF_AT
    late = click(app, fake, bk.ACTION_CLUB_CHOOSE, value(papers[1]), user="UANN", message_ts=agenda["ts"])
    assert "closed" in text_of(late[0])
    _tick(deps, CUTOFF_AT)
    [winner] = [m for m in fake.messages(CH) if "has chosen" in text_of(m)]
    assert bk.esc(papers[0].short_name) in text_of(winner) and "who chose it" in text_of(winner)
    [dm] = fake.dm_messages("UANN")
    assert bk.esc(papers[0].short_name) in text_of(dm) and "A suggested outline" in text_of(dm)
    closed = next(m for m in fake.messages(CH) if m["ts"] == agenda["ts"])
    assert "The choice is closed" in text_of(closed) and bk.ACTION_CLUB_CHOOSE not in text_of(closed)


def _presenter_club_with_two_nominations(app, fake, store, clock) -> list:
    """A club where the presenter chooses, and two papers nominated (Bob's, then Cy's): the papers."""
    _presenter_club(store, fake)
    papers = list(store.iter_papers())[:2]
    for n, (user, paper) in enumerate(zip(("UBOB", "UCY"), papers)):
        clock.now = MONDAY + timedelta(minutes=n)
        dispatch_command(app, fake, f"nominate {paper.id}", user=user, channel=CH)
    return papers


def test_a_presenter_who_does_not_choose_gets_the_earliest_nomination_and_the_post_says_so(world):
    app, fake, store, clock, deps = world
    papers = _presenter_club_with_two_nominations(app, fake, store, clock)
    _tick(deps, AGENDA_AT)
    _tick(deps, CUTOFF_AT)
    [winner] = [m for m in fake.messages(CH) if "has chosen" in text_of(m)]
    assert bk.esc(papers[0].short_name) in text_of(winner)
    assert "did not choose by the cutoff" in text_of(winner) and "<@UANN>" in text_of(winner)


def test_a_presenter_who_never_chose_the_only_nomination_is_not_said_to_have_chosen_it(world):
    app, fake, store, clock, deps = world
    _presenter_club(store, fake)
    paper = next(iter(store.iter_papers()))
    dispatch_command(app, fake, f"nominate {paper.id}", user="UBOB", channel=CH)
    _tick(deps, AGENDA_AT)
    _tick(deps, CUTOFF_AT)  # Ann never pressed Choose
    [winner] = _scheduled(fake, "winner")
    said = text_of(winner)
    assert bk.esc(paper.short_name) in said and "<@UANN>" in said
    assert "who chose it" not in said and "the only nomination" in said


def test_a_stale_swap_offer_expires_with_its_session_and_only_a_current_member_may_accept(world):
    """Ann offers Bob her 3 December slot; Bob clicks Accept on 10 December: 3 December's presenter
    stays Ann. And a member who left the rotation cannot take a live offer."""
    app, fake, store, clock, deps = world
    _club(store)
    paper = next(iter(store.iter_papers()))
    store.put_club_session(CH, DAY.isoformat(), presenter="UANN", paper_id=paper.id, now=MONDAY.timestamp())
    offer = dispatch_command(app, fake, "club swap <@UBOB>", user="UANN", channel=CH)
    value = next(e["value"] for b in offer["blocks"] if b["type"] == "actions" for e in b["elements"]
                 if e["action_id"] == bk.ACTION_SWAP_ACCEPT)
    clock.now = datetime(2026, 12, 3, 16, 0, tzinfo=timezone.utc)  # 17:00 Berlin: the session begins
    late = click(app, fake, bk.ACTION_SWAP_ACCEPT, value, user="UBOB", ephemeral=True)
    assert "expired" in text_of(late[0]) and "has begun or is over" in text_of(late[0])
    clock.now = datetime(2026, 12, 10, 9, tzinfo=timezone.utc)  # a week later
    stale = click(app, fake, bk.ACTION_SWAP_ACCEPT, value, user="UBOB", ephemeral=True)
    assert "expired" in text_of(stale[0])
    assert store.get_club_session(CH, DAY.isoformat())["presenter"] == "UANN"  # history stands
    assert fake.dm_messages("UBOB") == []
    # A live offer to a member who has since left the rotation.
    clock.now = MONDAY
    offer = dispatch_command(app, fake, "club swap <@UCY>", user="UANN", channel=CH)
    value = next(e["value"] for b in offer["blocks"] if b["type"] == "actions" for e in b["elements"]
                 if e["action_id"] == bk.ACTION_SWAP_ACCEPT)
    assert "You left the presenter rotation" in text_of(dispatch_command(app, fake, "club leave", user="UCY",
                                                                         channel=CH))
    gone = click(app, fake, bk.ACTION_SWAP_ACCEPT, value, user="UCY", ephemeral=True)
    assert "not in the presenter rotation" in text_of(gone[0])
    assert store.get_club_session(CH, DAY.isoformat())["presenter"] == "UANN"


@pytest.mark.slow  # Slack takes 3 s per chat.update
def test_a_burst_of_votes_with_a_slow_chat_update_never_holds_up_a_command(world):
    """12 members vote within a second while Slack takes 3 s per chat.update: each click is acked at
    once, `/paper search` answers while the first redraw is still on its way, and the burst costs
    one or two redraws of the agenda, not twelve, the last one counting every vote."""
    from bot.later import make_later, work_pool
    from conftest import BOT_TOKEN

    app, fake, store, clock, deps = world
    _club(store)
    paper = next(iter(store.iter_papers()))
    dispatch_command(app, fake, f"nominate {paper.id}", user="UANN", channel=CH)
    clock.now = datetime(2026, 12, 1, 16, 30, tzinfo=timezone.utc)
    ts = post_agenda(deps, deps.slack, CH, DAY)

    from slack_sdk import WebClient

    pool = work_pool()
    live = make_deps(deps.settings, store, deps.searcher, clock=clock, later=make_later(pool))
    busy = create_app(live, client=WebClient(token=BOT_TOKEN, base_url=fake.api_url))
    fake.delay("chat.update", 3.0, times=None)
    voters = [f"UV{i:02d}" for i in range(12)]
    fake.add_members(*voters)
    try:
        for user in voters:
            click(busy, fake, bk.ACTION_VOTE, f"{DAY.isoformat()}|{paper.id}", user=user, message_ts=ts)
        url = fake.new_response_url(channel=CH, user="UBOB")
        body = {"command": "/paper", "text": "search video", "user_id": "UBOB", "user_name": "ubob",
                "channel_id": CH, "channel_name": "general", "team_id": "T1", "api_app_id": "A1",
                "response_url": url, "trigger_id": "1.2.3"}
        assert busy.dispatch(BoltRequest(body=body, mode="socket_mode")).status == 200
        [reply] = fake.wait_for(lambda: fake.responses(url), timeout=10)
        assert reply.get("blocks") and len(fake.calls("chat.update")) <= 1  # the first redraw still on its way

        def agenda_votes() -> str:
            updated = next(m for m in fake.messages(CH) if m["ts"] == ts)
            return next(b for b in updated["blocks"] if b.get("block_id", "").endswith(paper.id))["text"]["text"]
        fake.wait_for(lambda: "*12* votes" in agenda_votes(), timeout=30)
    finally:
        pool.shutdown(wait=True)
    assert len(store.club_votes(CH, DAY.isoformat())) == 12
    assert 1 <= len(fake.calls("chat.update")) <= 2


def _open_setup(app, fake):
    click(app, fake, bk.ACTION_CLUB_SETUP, CH, user=ADMIN, ephemeral=True)
    return fake.modals()[-1]


def _errors(response) -> dict:
    assert response.status == 200
    answer = json.loads(response.body)
    assert answer["response_action"] == "errors", answer
    return answer["errors"]


@pytest.mark.parametrize("field,values", [
    ("weekday", {"weekday": "abc"}),
    ("weekday", {"weekday": "9"}),
    ("time", {"time": "０９:００"}),  # full-width digits
    ("time", {"time": "25:00"}),
    ("tz", {"tz": "Mars/Olympus"}),
    ("lead", {"lead": "１２"}),
    ("lead", {"lead": "1000"}),
    ("cutoff", {"cutoff": "0"}),
    ("cutoff", {"lead": 24, "cutoff": 48}),
])
def test_each_setup_error_is_under_its_own_field_and_nothing_is_stored(world, field, values):
    app, fake, store, clock, deps = world
    modal = _open_setup(app, fake)
    errors = _errors(submit_setup(app, modal, user=ADMIN, **values))
    assert list(errors) == [field], errors
    assert errors[field].strip()
    assert store.get_club(CH) is None


def test_two_wrong_fields_get_two_errors(world):
    app, fake, store, clock, deps = world
    errors = _errors(submit_setup(app, _open_setup(app, fake), user=ADMIN, weekday="abc", tz="Nowhere/Land"))
    assert set(errors) == {"weekday", "tz"} and "Nowhere/Land" in errors["tz"]


@pytest.mark.parametrize("metadata", ["C2'; drop table clubs;--", "C2", "C1|UADMIN|00000000000000000000000000000000",
                                      ""])
def test_a_forged_setup_submission_stores_nothing_and_says_so(world, metadata):
    app, fake, store, clock, deps = world
    modal = _open_setup(app, fake)
    response = submit_setup(app, {**modal, "private_metadata": metadata}, user=ADMIN)
    assert response.status == 200
    answer = json.loads(response.body)
    assert answer["response_action"] == "update" and "nothing was saved" in json.dumps(answer["view"])
    assert store.clubs() == []


def test_a_setup_form_is_good_only_for_the_admin_and_channel_it_was_opened_for(world):
    app, fake, store, clock, deps = world
    fake.add_members("UADMIN2")
    modal = _open_setup(app, fake)
    other = make_settings(slack_api_url=fake.api_url, admins="UADMIN,UADMIN2")
    deps2 = make_deps(other, store, deps.searcher, clock=clock)
    app2 = create_app(deps2, process_before_response=True)
    answer = json.loads(submit_setup(app2, modal, user="UADMIN2").body)  # another admin submits Ann's form
    assert answer["response_action"] == "update"
    assert store.clubs() == []
    # A Set up button whose value names another channel opens the form for the channel it sits in.
    before = len(fake.modals())
    url = fake.new_response_url(channel=CH, user=ADMIN)
    dispatch(app, {"type": "block_actions", "user": {"id": ADMIN}, "api_app_id": "A1", "team": {"id": "T1"},
                   "channel": {"id": CH}, "trigger_id": "1.2.3", "response_url": url,
                   "container": {"type": "message", "channel_id": CH, "message_ts": "1.000001", "is_ephemeral": True},
                   "actions": [{"action_id": bk.ACTION_CLUB_SETUP, "block_id": "b", "value": "C2", "type": "button"}]})
    assert len(fake.modals()) == before + 1 and fake.modals()[-1]["private_metadata"].startswith(f"{CH}|")
    assert submit_setup(app, fake.modals()[-1], user=ADMIN).status == 200
    assert [c["channel"] for c in store.clubs()] == [CH]


def test_map_labels_are_whole_names_broken_between_words():
    from bot.club.reports import _wrapped

    name = "ProtoReasoning: a prototype view of reasoning in large language models"
    label = _wrapped(name, 28, 4)
    assert label.replace("\n", " ") == name and "…" not in label  # not 'ProtoReasoning: a prot'
    assert all(len(line) <= 28 for line in label.splitlines())


def _presenter_dms(fake, user) -> list[dict]:
    return [m for m in fake.dm_messages(user)
            if (m.get("metadata") or {}).get("event_payload", {}).get("kind") == "presenter_dm"]


def _scheduled(fake, kind) -> list[dict]:
    return [m for m in fake.messages(CH) if ((m.get("metadata") or {}).get("event_payload") or {}).get("kind") == kind]


REMINDER_AT = datetime(2026, 12, 3, 15, 1, tzinfo=timezone.utc)  # an hour before Thu 17:00 Berlin


def test_a_presenter_who_leaves_the_rotation_is_replaced_and_told_so(world):
    """Ann presents on 3 December, the paper announced; she types `club leave`. The reply says she is
    off that session, the next tick asks someone else (their DM), and the reminder names them."""
    app, fake, store, clock, deps = world
    _club(store)
    paper = next(iter(store.iter_papers()))
    dispatch_command(app, fake, f"nominate {paper.id}", user="UBOB", channel=CH)
    _tick(deps, AGENDA_AT)
    _tick(deps, CUTOFF_AT)
    gone = store.get_club_session(CH, DAY.isoformat())["presenter"]
    assert gone and len(_presenter_dms(fake, gone)) == 1
    # A member who presents nothing leaves: nothing else changes.
    bystander = next(m for m in ("UANN", "UBOB", "UCY") if m != gone)
    clock.now = CUTOFF_AT + timedelta(hours=2)
    said = text_of(dispatch_command(app, fake, "club leave", user=bystander, channel=CH))
    assert "You left the presenter rotation." in said and "present on" not in said
    assert store.get_club_session(CH, DAY.isoformat())["presenter"] == gone

    said = text_of(dispatch_command(app, fake, "club leave", user=gone, channel=CH))
    assert ("You left the presenter rotation. You were to present on Thu 3 Dec; someone else will be asked."
            in said)
    assert "*Presenter:* _not chosen yet_" in said
    _tick(deps, CUTOFF_AT + timedelta(hours=2, minutes=1))
    now_presenting = store.get_club_session(CH, DAY.isoformat())["presenter"]
    assert now_presenting not in (None, gone, bystander)  # the one member still in the rotation
    assert store.get_club_session(CH, DAY.isoformat())["paper_id"] == paper.id  # the paper announced stays
    [dm] = _presenter_dms(fake, now_presenting)
    assert bk.esc(paper.short_name) in text_of(dm)
    _tick(deps, REMINDER_AT)
    [reminder] = _scheduled(fake, "reminder")
    assert f"<@{now_presenting}>" in text_of(reminder) and f"<@{gone}>" not in text_of(reminder)
    assert len(_presenter_dms(fake, gone)) == 1  # nothing more for the member who left
    again = text_of(dispatch_command(app, fake, "club leave", user=gone, channel=CH))
    assert "You were not in the rotation." in again and "present on" not in again


def test_a_presenter_who_steps_down_after_the_reminder_is_off_the_reminder_too(world):
    """Ann is named in the reminder, then types `club leave`: the reminder in the channel says
    someone else will be asked, then names whoever the next tick asks. The paper stays."""
    app, fake, store, clock, deps = world
    _club(store)
    paper = next(iter(store.iter_papers()))
    dispatch_command(app, fake, f"nominate {paper.id}", user="UBOB", channel=CH)
    for at in (AGENDA_AT, CUTOFF_AT, REMINDER_AT):
        _tick(deps, at)
    gone = store.get_club_session(CH, DAY.isoformat())["presenter"]
    [reminder] = _scheduled(fake, "reminder")
    assert f"<@{gone}>" in text_of(reminder)

    clock.now = REMINDER_AT + timedelta(minutes=10)
    dispatch_command(app, fake, "club leave", user=gone, channel=CH)
    [reminder] = _scheduled(fake, "reminder")
    assert f"<@{gone}>" not in text_of(reminder) and "someone else will be asked" in text_of(reminder)
    assert bk.esc(paper.short_name) in text_of(reminder)

    _tick(deps, REMINDER_AT + timedelta(minutes=11))
    now_presenting = store.get_club_session(CH, DAY.isoformat())["presenter"]
    [reminder] = _scheduled(fake, "reminder")
    assert now_presenting not in (None, gone) and f"<@{now_presenting}>" in text_of(reminder)
    assert f"<@{gone}>" not in text_of(reminder) and bk.esc(paper.short_name) in text_of(reminder)


def test_an_away_covering_your_session_takes_you_off_it_and_an_offered_swap_expires(world):
    """Ann presents on 3 December and has offered Bob her slot; then she says she is away that week.
    She is off the session, the reply says which, and Bob's Accept finds the slot changed hands."""
    app, fake, store, clock, deps = world
    _club(store)
    paper = next(iter(store.iter_papers()))
    store.put_club_session(CH, DAY.isoformat(), presenter="UANN", now=MONDAY.timestamp())
    store.put_club_session(CH, "2026-12-10", presenter="UANN", now=MONDAY.timestamp())
    offer = dispatch_command(app, fake, "club swap <@UBOB>", user="UANN", channel=CH)
    value = next(e["value"] for b in offer["blocks"] if b["type"] == "actions" for e in b["elements"]
                 if e["action_id"] == bk.ACTION_SWAP_ACCEPT)
    # An away that misses her sessions changes nothing but the away.
    said = text_of(dispatch_command(app, fake, "club away 2026-12-04..2026-12-08", user="UANN", channel=CH))
    assert "you will not be asked to present then." in said and "You were to present" not in said
    assert store.get_club_session(CH, DAY.isoformat())["presenter"] == "UANN"

    said = text_of(dispatch_command(app, fake, "club away 2026-12-01..2026-12-12", user="UANN", channel=CH))
    assert "Noted: you are away Tue 1 Dec to Sat 12 Dec" in said
    assert "You were to present on Thu 3 Dec and Thu 10 Dec; someone else will be asked." in said
    assert [store.get_club_session(CH, d)["presenter"] for d in (DAY.isoformat(), "2026-12-10")] == [None, None]
    late = click(app, fake, bk.ACTION_SWAP_ACCEPT, value, user="UBOB", ephemeral=True)
    assert "changed hands" in text_of(late[0])
    assert store.get_club_session(CH, DAY.isoformat())["presenter"] is None
    assert fake.dm_messages("UBOB") == []
    # Still in the rotation, just not that week: the tick chooses someone else for 3 December.
    assert "UANN" in {m["user"] for m in store.club_members(CH)}
    dispatch_command(app, fake, f"nominate {paper.id}", user="UBOB", channel=CH)
    _tick(deps, AGENDA_AT)
    _tick(deps, CUTOFF_AT)
    now_presenting = store.get_club_session(CH, DAY.isoformat())["presenter"]
    assert now_presenting in ("UBOB", "UCY") and _presenter_dms(fake, now_presenting)
    assert _presenter_dms(fake, "UANN") == []


def test_a_session_that_has_begun_keeps_its_presenter(world):
    app, fake, store, clock, deps = world
    _club(store)
    paper = next(iter(store.iter_papers()))
    store.put_club_session(CH, DAY.isoformat(), presenter="UANN", paper_id=paper.id, now=MONDAY.timestamp())
    clock.now = datetime(2026, 12, 3, 16, 10, tzinfo=timezone.utc)  # ten minutes into the session
    said = text_of(dispatch_command(app, fake, "club away 2026-12-03", user="UANN", channel=CH))
    assert "You were to present" not in said
    said = text_of(dispatch_command(app, fake, "club leave", user="UANN", channel=CH))
    assert "You left the presenter rotation." in said and "You were to present" not in said
    assert store.get_club_session(CH, DAY.isoformat())["presenter"] == "UANN"


def test_a_choosing_presenter_who_leaves_hands_the_choice_to_the_next_one_and_the_agenda_says_so(world):
    """In a club where the presenter chooses, Ann chose a paper, then leaves the rotation before the
    cutoff. Her choice goes with her: the next tick makes Bob the presenter, the agenda in the channel
    names him, and as he does not choose, the earliest nomination wins, announced as such."""
    app, fake, store, clock, deps = world
    papers = _presenter_club_with_two_nominations(app, fake, store, clock)
    _tick(deps, AGENDA_AT)
    [agenda] = _scheduled(fake, "agenda")
    assert "<@UANN> presents this session" in text_of(agenda)
    value = lambda p: f"{DAY.isoformat()}|{p.id}"  # noqa: E731
    assert "You chose" in text_of(click(app, fake, bk.ACTION_CLUB_CHOOSE, value(papers[1]), user="UANN",
                                        message_ts=agenda["ts"])[0])
    clock.now = AGENDA_AT + timedelta(hours=1)
    said = text_of(dispatch_command(app, fake, "club leave", user="UANN", channel=CH))
    assert "You were to present on Thu 3 Dec; someone else will be asked." in said
    _tick(deps, AGENDA_AT + timedelta(hours=1, minutes=1))
    assert store.get_club_session(CH, DAY.isoformat())["presenter"] == "UBOB"
    redrawn = text_of(next(m for m in fake.messages(CH) if m["ts"] == agenda["ts"]))
    assert "<@UBOB> presents this session and chooses" in redrawn and "<@UANN>" not in redrawn
    assert "*chosen*" not in redrawn  # Ann's choice is not Bob's
    refused = click(app, fake, bk.ACTION_CLUB_CHOOSE, value(papers[1]), user="UANN", message_ts=agenda["ts"])
    assert "<@UBOB> chooses the paper" in text_of(refused[0])
    _tick(deps, AGENDA_AT + timedelta(hours=1, minutes=2))  # nothing more to redraw
    assert len([c for c in fake.calls("chat.update") if c.params.get("ts") == agenda["ts"]]) == 2  # Ann's click, the tick
    _tick(deps, CUTOFF_AT)
    [winner] = _scheduled(fake, "winner")
    assert bk.esc(papers[0].short_name) in text_of(winner) and "did not choose by the cutoff" in text_of(winner)
    assert "<@UBOB>" in text_of(winner)
    assert _presenter_dms(fake, "UBOB") and _presenter_dms(fake, "UANN") == []


def test_a_posted_agenda_says_its_session_is_cancelled_and_takes_votes_again_once_it_is_back(world):
    """The agenda is out and Ann has voted when an admin skips the session: the agenda says it is
    cancelled, without buttons, and a Clear my votes pressed on it changes nothing. Unskipped, the
    agenda is the ballot again, with Ann's vote, and Bob's vote on it counts."""
    app, fake, store, clock, deps = world
    _club(store)
    paper, other = store.list_papers(limit=2)
    dispatch_command(app, fake, f"nominate {paper.id}", user="UANN", channel=CH)
    dispatch_command(app, fake, f"nominate {other.id}", user="UBOB", channel=CH)
    clock.now = datetime(2026, 12, 1, 16, 30, tzinfo=timezone.utc)
    ts = post_agenda(deps, deps.slack, CH, DAY)
    assert click(app, fake, bk.ACTION_VOTE, f"{DAY.isoformat()}|{paper.id}", user="UANN", message_ts=ts) == []

    def agenda():
        return next(m for m in fake.messages(CH) if m["ts"] == ts)

    def buttons(message) -> list[str]:
        return [e["action_id"] for b in message["blocks"] for e in
                ([b["accessory"]] if b.get("accessory") else b.get("elements") or []) if e.get("type") == "button"]

    dispatch_command(app, fake, "club skip 2026-12-03", user=ADMIN, channel=CH)
    cancelled = agenda()
    assert "cancelled" in text_of(cancelled) and "Thu 10 Dec" in text_of(cancelled)  # where its nominations went
    assert buttons(cancelled) == []
    cleared = click(app, fake, bk.ACTION_CLEAR_VOTES, DAY.isoformat(), user="UANN", message_ts=ts)
    assert "cancelled" in text_of(cleared[0])
    assert "cancelled" in text_of(agenda()) and len(store.club_votes(CH, DAY.isoformat())) == 1

    dispatch_command(app, fake, "club unskip 2026-12-03", user=ADMIN, channel=CH)
    back = agenda()
    assert "cancelled" not in text_of(back)
    assert buttons(back) == [bk.ACTION_VOTE, bk.ACTION_VOTE, bk.ACTION_CLEAR_VOTES]
    assert "*1* vote · nominated by <@UANN>" in text_of(back)  # Ann's vote counts again
    assert click(app, fake, bk.ACTION_VOTE, f"{DAY.isoformat()}|{other.id}", user="UBOB", message_ts=ts) == []
    assert "*1* vote · nominated by <@UBOB>" in text_of(agenda())


def test_leave_by_someone_never_in_the_rotation_says_so_and_changes_nothing(world):
    app, fake, store, clock, deps = world
    _club(store)
    before = store.club_members(CH, active_only=False)
    said = text_of(dispatch_command(app, fake, "club leave", user="UDAN", channel=CH))
    assert "You were not in the rotation." in said and "You left" not in said
    assert store.club_members(CH, active_only=False) == before


def test_choose_on_a_cancelled_agenda_says_so_and_changes_nothing(world):
    """The presenter's agenda is out when an admin skips the session: Choose pressed on it, by the
    presenter or anyone, is answered as a vote there is: the session was cancelled. Nothing is chosen."""
    app, fake, store, clock, deps = world
    papers = _presenter_club_with_two_nominations(app, fake, store, clock)
    _tick(deps, AGENDA_AT)
    [agenda] = _scheduled(fake, "agenda")
    clock.now = AGENDA_AT + timedelta(minutes=5)
    dispatch_command(app, fake, "club skip 2026-12-03", user=ADMIN, channel=CH)
    updates = len(fake.calls("chat.update"))
    for user in ("UANN", "UBOB"):
        [said] = click(app, fake, bk.ACTION_CLUB_CHOOSE, f"{DAY.isoformat()}|{papers[0].id}", user=user,
                       message_ts=agenda["ts"])
        assert "cancelled" in text_of(said) and said["response_type"] == "ephemeral"
    assert store.get_club_session(CH, DAY.isoformat())["paper_id"] is None
    assert len(fake.calls("chat.update")) == updates
    assert "cancelled" in text_of(next(m for m in fake.messages(CH) if m["ts"] == agenda["ts"]))


def _member_left_channel(app, user, event_id):
    dispatch(app, {"type": "event_callback", "team_id": "T1", "api_app_id": "A1", "event_id": event_id,
                   "event_time": 1, "authorizations": [{"team_id": "T1", "user_id": "UBOT", "is_bot": True}],
                   "event": {"type": "member_left_channel", "user": user, "channel": CH, "channel_type": "C",
                             "team": "T1", "event_ts": "1.000001"}})


def test_the_announcement_names_the_presenter_of_now_after_the_one_who_chose_leaves_the_channel(world):
    """Ann chose the paper and was announced as its presenter; then she leaves the channel. The
    announcement in the channel says someone else will be asked, then names Cy (the paper's nominator)
    once the tick asks him, and never says he chose it. The paper announced stays."""
    app, fake, store, clock, deps = world
    papers = _presenter_club_with_two_nominations(app, fake, store, clock)
    _tick(deps, AGENDA_AT)
    [agenda] = _scheduled(fake, "agenda")
    click(app, fake, bk.ACTION_CLUB_CHOOSE, f"{DAY.isoformat()}|{papers[1].id}", user="UANN", message_ts=agenda["ts"])
    _tick(deps, CUTOFF_AT)
    [winner] = _scheduled(fake, "winner")
    assert "<@UANN>, who chose it" in text_of(winner)

    clock.now = CUTOFF_AT + timedelta(hours=1)
    _member_left_channel(app, "UANN", "EvAnnLeaves")
    [winner] = _scheduled(fake, "winner")
    assert "<@UANN>" not in text_of(winner) and "someone else will be asked" in text_of(winner)
    assert bk.esc(papers[1].short_name) in text_of(winner)

    _tick(deps, CUTOFF_AT + timedelta(hours=1, minutes=1))
    assert store.get_club_session(CH, DAY.isoformat())["presenter"] == "UCY"
    [winner] = _scheduled(fake, "winner")
    said = text_of(winner)
    assert "<@UCY>" in said and "<@UANN>" not in said and "who chose it" not in said
    assert bk.esc(papers[1].short_name) in said
    _tick(deps, CUTOFF_AT + timedelta(hours=1, minutes=2))  # nothing more to redraw
    assert len([c for c in fake.calls("chat.update") if c.params.get("ts") == winner["ts"]]) == 2


def _accept_swap(app, fake, *, offered_by, to):
    offer = dispatch_command(app, fake, f"club swap <@{to}>", user=offered_by, channel=CH)
    value = next(e["value"] for b in offer["blocks"] if b["type"] == "actions" for e in b["elements"]
                 if e["action_id"] == bk.ACTION_SWAP_ACCEPT)
    click(app, fake, bk.ACTION_SWAP_ACCEPT, value, user=to, ephemeral=True)


def test_a_presenter_who_takes_over_a_chosen_paper_is_not_announced_as_having_chosen_it(world):
    """Ann chose Cy's paper, then swapped her slot to Bob, who accepted: the announcement names Bob
    as the one who took over, not as the one who chose it (Ann, who is no longer named)."""
    app, fake, store, clock, deps = world
    papers = _presenter_club_with_two_nominations(app, fake, store, clock)
    _tick(deps, AGENDA_AT)
    [agenda] = _scheduled(fake, "agenda")
    value = lambda p: f"{DAY.isoformat()}|{p.id}"  # noqa: E731
    click(app, fake, bk.ACTION_CLUB_CHOOSE, value(papers[1]), user="UANN", message_ts=agenda["ts"])
    clock.now = AGENDA_AT + timedelta(hours=1)
    _accept_swap(app, fake, offered_by="UANN", to="UBOB")
    assert store.get_club_session(CH, DAY.isoformat())["presenter"] == "UBOB"
    _tick(deps, CUTOFF_AT)
    [winner] = _scheduled(fake, "winner")
    said = text_of(winner)
    assert bk.esc(papers[1].short_name) in said and "<@UBOB>, who took over after it was chosen." in said
    assert "who chose it" not in said and "did not choose" not in said and "<@UANN>" not in said


def test_bob_choosing_the_paper_ann_chose_before_the_swap_makes_it_his_choice(world):
    app, fake, store, clock, deps = world
    papers = _presenter_club_with_two_nominations(app, fake, store, clock)
    _tick(deps, AGENDA_AT)
    [agenda] = _scheduled(fake, "agenda")
    value = lambda p: f"{DAY.isoformat()}|{p.id}"  # noqa: E731
    click(app, fake, bk.ACTION_CLUB_CHOOSE, value(papers[1]), user="UANN", message_ts=agenda["ts"])
    clock.now = AGENDA_AT + timedelta(hours=1)
    _accept_swap(app, fake, offered_by="UANN", to="UBOB")
    assert "You chose" in text_of(click(app, fake, bk.ACTION_CLUB_CHOOSE, value(papers[1]), user="UBOB",
                                        message_ts=agenda["ts"])[0])
    _tick(deps, CUTOFF_AT)
    [winner] = _scheduled(fake, "winner")
    assert "<@UBOB>, who chose it." in text_of(winner) and "took over" not in text_of(winner)


@pytest.mark.parametrize("nominations", [1, 2])
def test_the_closed_agenda_marks_a_paper_nobody_chose_as_read_not_chosen(world, nominations):
    """A presenter who never pressed Choose: the only nomination, or the tie-break's pick of two,
    is the paper read. The closed agenda says so, as the announcement does, and not that it was chosen."""
    app, fake, store, clock, deps = world
    if nominations == 2:
        papers = _presenter_club_with_two_nominations(app, fake, store, clock)
    else:
        _presenter_club(store, fake)
        papers = [next(iter(store.iter_papers()))]
        dispatch_command(app, fake, f"nominate {papers[0].id}", user="UBOB", channel=CH)
    _tick(deps, AGENDA_AT)
    [agenda] = _scheduled(fake, "agenda")
    _tick(deps, CUTOFF_AT)
    closed = next(m for m in fake.messages(CH) if m["ts"] == agenda["ts"])
    assert "*chosen*" not in text_of(closed) and "presents this session and chooses" not in text_of(closed)
    [read] = [b for b in closed["blocks"] if "we read this" in json.dumps(b)]
    assert read["block_id"].endswith(papers[0].id)
    assert "<@UANN> presents this session." in text_of(closed) and "The choice is closed" in text_of(closed)


def _now(fake, message) -> dict:
    """The message as it stands in the channel now (after any chat.update)."""
    return next(m for m in fake.messages(CH) if m["ts"] == message["ts"])


def test_a_swap_after_the_reminder_redraws_every_post_that_names_the_presenter(world):
    """Ann chose Cy's paper and is named in the announcement ("who chose it"), the reminder and the
    closed agenda; an hour before the session she swaps her slot to Bob, who accepts. At once each of
    those posts names Bob, as the one who took over, and none names Ann. A later tick redraws nothing."""
    app, fake, store, clock, deps = world
    papers = _presenter_club_with_two_nominations(app, fake, store, clock)
    _tick(deps, AGENDA_AT)
    [agenda] = _scheduled(fake, "agenda")
    click(app, fake, bk.ACTION_CLUB_CHOOSE, f"{DAY.isoformat()}|{papers[1].id}", user="UANN", message_ts=agenda["ts"])
    for at in (CUTOFF_AT, REMINDER_AT):
        _tick(deps, at)
    [winner], [reminder] = _scheduled(fake, "winner"), _scheduled(fake, "reminder")
    assert "<@UANN>, who chose it." in text_of(winner) and "<@UANN>" in text_of(reminder)

    clock.now = REMINDER_AT + timedelta(minutes=5)
    _accept_swap(app, fake, offered_by="UANN", to="UBOB")
    assert store.get_club_session(CH, DAY.isoformat())["presenter"] == "UBOB"
    said = text_of(_now(fake, winner))
    assert "<@UBOB>, who took over after it was chosen." in said and bk.esc(papers[1].short_name) in said
    assert "<@UANN>" not in said and "who chose it" not in said
    said = text_of(_now(fake, reminder))
    assert "presented by <@UBOB>." in said and "<@UANN>" not in said
    said = text_of(_now(fake, agenda))
    assert "<@UBOB> presents this session." in said and "<@UANN>" not in said
    assert "The choice is closed" in said and bk.ACTION_CLUB_CHOOSE not in said
    [chosen] = [b for b in _now(fake, agenda)["blocks"] if "*chosen*" in json.dumps(b)]
    assert chosen["block_id"].endswith(papers[1].id)  # the choice stands: it was made, by whoever
    updates = len(fake.calls("chat.update"))
    _tick(deps, REMINDER_AT + timedelta(minutes=6))  # nothing left to redraw
    assert len(fake.calls("chat.update")) == updates


def test_a_swap_before_the_cutoff_hands_the_choice_and_the_agenda_names_the_new_presenter(world):
    """In a club where the presenter chooses, Ann swaps her slot to Bob before choosing: the agenda in
    the channel says at once that Bob presents and chooses, and his Choose counts."""
    app, fake, store, clock, deps = world
    papers = _presenter_club_with_two_nominations(app, fake, store, clock)
    _tick(deps, AGENDA_AT)
    [agenda] = _scheduled(fake, "agenda")
    assert "<@UANN> presents this session and chooses" in text_of(agenda)
    clock.now = AGENDA_AT + timedelta(hours=1)
    _accept_swap(app, fake, offered_by="UANN", to="UBOB")
    said = text_of(_now(fake, agenda))
    assert "<@UBOB> presents this session and chooses" in said and "<@UANN>" not in said
    assert "You chose" in text_of(click(app, fake, bk.ACTION_CLUB_CHOOSE, f"{DAY.isoformat()}|{papers[1].id}",
                                        user="UBOB", message_ts=agenda["ts"])[0])
    _tick(deps, CUTOFF_AT)
    [winner] = _scheduled(fake, "winner")
    assert "<@UBOB>, who chose it." in text_of(winner)


def test_a_swap_in_a_voting_club_after_the_announcement_names_the_new_presenter(world):
    app, fake, store, clock, deps = world
    _club(store)
    paper = next(iter(store.iter_papers()))
    dispatch_command(app, fake, f"nominate {paper.id}", user="UBOB", channel=CH)
    _tick(deps, AGENDA_AT)
    _tick(deps, CUTOFF_AT)
    [winner] = _scheduled(fake, "winner")
    gone = store.get_club_session(CH, DAY.isoformat())["presenter"]
    taker = next(m for m in ("UANN", "UBOB", "UCY") if m != gone)
    clock.now = CUTOFF_AT + timedelta(hours=1)
    _accept_swap(app, fake, offered_by=gone, to=taker)
    said = text_of(_now(fake, winner))
    assert f"Presenter: <@{taker}>." in said and f"<@{gone}>" not in said and "stepped" not in said


@pytest.mark.parametrize("mode", ["vote", "presenter"])
def test_the_closed_agendas_notification_text_says_it_is_closed_as_its_blocks_do(world, mode):
    """Slack shows an agenda's `text` in notifications: once closed it must not invite a choice or votes."""
    app, fake, store, clock, deps = world
    if mode == "presenter":
        _presenter_club_with_two_nominations(app, fake, store, clock)
    else:
        _club(store)
        dispatch_command(app, fake, f"nominate {next(iter(store.iter_papers())).id}", user="UBOB", channel=CH)
    _tick(deps, AGENDA_AT)
    [agenda] = _scheduled(fake, "agenda")
    assert ("the presenter chooses" if mode == "presenter" else "vote on the agenda") in agenda["text"]
    _tick(deps, CUTOFF_AT)
    closed = _now(fake, agenda)
    said = "The choice is closed" if mode == "presenter" else "Voting has closed"
    assert said in text_of({"blocks": closed["blocks"]})
    assert said.lower() in closed["text"].lower()
    assert "chooses" not in closed["text"] and "vote on" not in closed["text"]
