"""The reading group without the Slack app (issue 32.13): `club setup ...` is the setup modal typed,
checked field by field by the modal's own validation, in Slack and the console; `club map` in the
console writes its PNG to a file and prints the path; Nominate shows only where a club meets."""
from __future__ import annotations

import io
from datetime import datetime, timezone

import pytest
from slack_bolt import BoltRequest

from bot import blocks as bk
from bot.app import create_app
from bot.commands import run_command
from bot.console import run_console
from conftest import Clock, card_choices, dispatch_command, make_deps, make_settings, text_of
from store import HashingEmbedder, Searcher

CH = "C1"
ADMIN = "UADMIN"
MONDAY = datetime(2026, 11, 30, 8, tzinfo=timezone.utc)


@pytest.fixture
def world(fake_slack, hashing_store):
    settings = make_settings(slack_api_url=fake_slack.api_url, admins=ADMIN)
    deps = make_deps(settings, hashing_store, Searcher(hashing_store, HashingEmbedder()), clock=Clock(MONDAY))
    app = create_app(deps, process_before_response=True)
    fake_slack.add_members(ADMIN, "UANN")
    fake_slack.add_channel(CH)
    return app, fake_slack, hashing_store


def test_club_setup_typed_in_slack_sets_the_club_as_the_modal_would(world):
    app, fake, store = world
    reply = text_of(dispatch_command(app, fake, "club setup thursday 17:30 Europe/Berlin fortnightly presenter "
                                     "nominations 48 votes 12h", user=ADMIN, channel=CH))
    assert "The reading group is set up" in reply
    assert "Meets fortnightly on Thursday at 17:30 Europe/Berlin" in reply
    club = store.get_club(CH)
    assert (club["weekday"], club["hour"], club["minute"], club["tz"], club["cadence"], club["mode"],
            club["lead_hours"], club["cutoff_hours"]) == (3, 17, 30, "Europe/Berlin", "fortnightly", "presenter", 48, 12)
    # Left out: kept. Only the time changes.
    dispatch_command(app, fake, "club setup 18:00", user=ADMIN, channel=CH)
    club = store.get_club(CH)
    assert (club["hour"], club["tz"], club["cadence"], club["lead_hours"]) == (18, "Europe/Berlin", "fortnightly", 48)


def test_club_setup_reads_every_other_friday_and_a_city(world):
    app, fake, store = world
    reply = text_of(dispatch_command(app, fake, "club setup every other friday 16:00 London", user=ADMIN,
                                     channel=CH))
    assert "Meets fortnightly on Friday at 16:00 Europe/London" in reply
    assert (store.get_club(CH)["cadence"], store.get_club(CH)["anchor"]) == ("fortnightly", "2026-12-04")


def test_club_setup_names_every_wrong_field_and_changes_nothing(world):
    app, fake, store = world
    reply = text_of(dispatch_command(app, fake, "club setup thursday 25:99 Mars/Olympus nominations 10 votes 20",
                                     user=ADMIN, channel=CH))
    assert "time:" in reply and "zone:" in reply and "Votes close after nominations do" in reply
    assert store.get_club(CH) is None
    assert "can't place “soon”" in text_of(dispatch_command(app, fake, "club setup soon", user=ADMIN, channel=CH))
    assert "admins" in text_of(dispatch_command(app, fake, "club setup friday 10:00", user="UANN", channel=CH))
    assert store.get_club(CH) is None


def test_the_console_sets_up_a_club_and_writes_its_map_to_a_file(hashing_store, tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", None)
    deps = make_deps(make_settings(), hashing_store, Searcher(hashing_store, HashingEmbedder()), slack=None,
                     clock=Clock(MONDAY))
    reply = run_command(deps, "UCONSOLE", "club setup wed 16:00 UTC", channel_id="console")
    assert "Meets weekly on Wednesday at 16:00 UTC" in reply.text
    assert reply.text.lower().count("weekly on wednesday at 16:00") == 1  # said once, by the card
    # A session the club read, so the map has something to draw.
    for day, paper in zip(("2026-11-18", "2026-11-25"), hashing_store.list_papers(limit=2)):
        hashing_store.put_club_session("console", day, state="held", paper_id=paper.id, presenter="UCONSOLE",
                                       now=MONDAY.timestamp())
    out = io.StringIO()
    run_console(deps.settings, hashing_store, HashingEmbedder(), stdin=io.StringIO("club map\n"), out=out)
    printed = out.getvalue()
    assert "Wrote a map of the club's 2 sessions to" in printed
    [path] = tmp_path.glob("paperclub-map-*.png")
    assert str(path) in "".join(printed.split())  # the path as printed (rich wraps long lines)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_nominate_shows_only_in_a_channel_with_a_club(world):
    app, fake, store = world

    def nominate_buttons(text):
        reply = dispatch_command(app, fake, text, user="UANN", channel=CH)
        return [a for row in card_choices(reply["blocks"]) for a in row if a == bk.ACTION_NOMINATE]
    paper = store.list_papers(limit=1)[0]
    assert nominate_buttons("search video") == [] and nominate_buttons(f"summary {paper.id}") == []
    dispatch_command(app, fake, "club setup thursday 17:00 UTC", user=ADMIN, channel=CH)
    assert len(nominate_buttons("search video")) == 5 and len(nominate_buttons(f"summary {paper.id}")) == 1


def test_club_replies_show_angle_brackets_and_mentions_as_written_not_escaped_twice(world):
    """Slack shows &lt;hours&gt; as <hours>; escaped twice (&amp;lt;) it shows the entity itself, and a
    member's mention escaped becomes the text <@U…> instead of their name."""
    app, fake, store = world
    reply = text_of(dispatch_command(app, fake, "club setup monday 9:00 CET", user=ADMIN, channel=CH))
    assert "nominations &lt;hours&gt;, votes &lt;hours&gt;" in reply and "&amp;" not in reply
    assert "&amp;" not in text_of(dispatch_command(app, fake, "club a<b", user=ADMIN, channel=CH))

    dispatch_command(app, fake, "club setup thursday 17:00 UTC", user=ADMIN, channel=CH)
    store.set_club_member(CH, "UANN", active=True, now=MONDAY.timestamp())
    store.put_club_session(CH, "2026-12-03", presenter="UANN", now=MONDAY.timestamp())
    fake.add_members("UBOB")
    reply = text_of(dispatch_command(app, fake, "club swap <@UBOB>", user="UANN", channel=CH))
    assert "<@UBOB> is not in it" in reply and "&lt;@UBOB" not in reply
    store.set_club_member(CH, "UBOB", active=True, now=MONDAY.timestamp())
    store.add_club_away(CH, "UBOB", "2026-12-03", "2026-12-03", now=MONDAY.timestamp())
    reply = text_of(dispatch_command(app, fake, "club swap <@UBOB>", user="UANN", channel=CH))
    assert "away on 2026-12-03" in reply and "<@UBOB> can't take it" in reply and "&lt;@UBOB" not in reply


def test_a_member_refused_club_setup_skip_or_off_is_told_which_admins_to_ask(world):
    app, fake, store = world
    for line in ("club setup friday 10:00", "club skip 2026-12-03", "club off"):
        if line != "club setup friday 10:00":
            dispatch_command(app, fake, "club setup thursday 17:00 UTC", user=ADMIN, channel=CH)
        reply = text_of(dispatch_command(app, fake, line, user="UANN", channel=CH))
        assert "Only the reading group's admins can" in reply and f"Ask <@{ADMIN}>" in reply, line
    assert store.get_club_session(CH, "2026-12-03") is None and store.get_club(CH)["active"]


def test_the_console_user_runs_the_club_with_admins_configured(hashing_store):
    """With PAPERCLUB_ADMINS set (the README's setup step), the person at the console, who holds the
    database and .env, may still set up and run the console's reading group."""
    out = io.StringIO()
    run_console(make_settings(admins="U0123ABCD"), hashing_store, HashingEmbedder(),
                stdin=io.StringIO("club setup thursday 17:00 UTC\nschedule 09:00 UTC\n"), out=out)
    printed = out.getvalue()
    assert "The reading group is set up" in printed and "Only the reading group's admins" not in printed
    assert hashing_store.get_club("console")["hour"] == 17 and hashing_store.get_schedule("console")["hour"] == 9


def test_club_setup_without_a_zone_takes_the_zone_schedule_uses(world, hashing_store):
    """No zone typed: the channel's paper-of-the-day zone, else PAPERCLUB_TIMEZONE, as `/paper schedule`
    has it; the Set up form opens on it too."""
    app, fake, store = world
    dispatch_command(app, fake, "schedule 09:00 Europe/Berlin", user=ADMIN, channel=CH)
    reply = text_of(dispatch_command(app, fake, "club setup thursday 17:00", user=ADMIN, channel=CH))
    assert "Meets weekly on Thursday at 17:00 Europe/Berlin" in reply and store.get_club(CH)["tz"] == "Europe/Berlin"

    deps = make_deps(make_settings(timezone="America/Chicago"), hashing_store,
                     Searcher(hashing_store, HashingEmbedder()), slack=None, clock=Clock(MONDAY))
    assert "America/Chicago" in run_command(deps, "you", "schedule 09:00", channel_id="C2").text
    reply = run_command(deps, "you", "club setup thursday 17:00", channel_id="C3")
    assert "Meets weekly on Thursday at 17:00 America/Chicago" in reply.text


def test_the_set_up_form_opens_in_the_channels_zone(fake_slack, hashing_store):
    settings = make_settings(slack_api_url=fake_slack.api_url, admins=ADMIN, timezone="America/Chicago")
    deps = make_deps(settings, hashing_store, Searcher(hashing_store, HashingEmbedder()), clock=Clock(MONDAY))
    app = create_app(deps, process_before_response=True)
    fake_slack.add_members(ADMIN)
    fake_slack.add_channel(CH)
    click = {"type": "block_actions", "user": {"id": ADMIN}, "api_app_id": "A1", "team": {"id": "T1"},
             "channel": {"id": CH}, "trigger_id": "13345224609.738474920.8088930838d88f008e0",
             "container": {"type": "message", "channel_id": CH, "message_ts": "1.000001", "is_ephemeral": True},
             "response_url": fake_slack.new_response_url(channel=CH, user=ADMIN),
             "actions": [{"action_id": bk.ACTION_CLUB_SETUP, "block_id": "b", "value": CH, "type": "button"}]}
    assert app.dispatch(BoltRequest(body=click, mode="socket_mode")).status == 200
    [modal] = fake_slack.modals()
    [tz] = [b for b in modal["blocks"] if b["block_id"] == "tz"]
    assert tz["element"]["initial_value"] == "America/Chicago"
