"""Access: PAPERCLUB_ADMINS (optional) limits schedule changes and removing others' interests.

Without it everyone may do everything (a small reading group needs no roles).
With it, anyone may still look, add interests and remove their own; the rest
get a polite, private explanation naming whom to ask, and nothing changes.
"""
from __future__ import annotations

import json

import pytest
from slack_bolt import BoltRequest

from conftest import make_deps, make_settings

CH = "C1"


@pytest.fixture
def make_app(fake_slack, hashing_store):
    from bot.app import create_app
    from store import HashingEmbedder
    from store import Searcher

    made = []

    def make(admins: str):
        settings = make_settings(slack_api_url=fake_slack.api_url, admins=admins, timezone="UTC")
        fake_slack.add_members(*settings.admin_ids)  # "Ask <@UADMIN>": the bot means to name them
        deps = make_deps(settings, hashing_store, Searcher(hashing_store, HashingEmbedder()))
        made.append(deps)
        return create_app(deps, process_before_response=True)
    yield make


def command(app, fake, text: str, user: str, channel: str = CH) -> dict:
    url = fake.new_response_url(channel=channel, user=user)
    body = {"command": "/paper", "text": text, "user_id": user, "user_name": user.lower(), "channel_id": channel,
            "channel_name": "general", "team_id": "T1", "api_app_id": "A1", "response_url": url,
            "trigger_id": "1.2.3"}
    assert app.dispatch(BoltRequest(body=body, mode="socket_mode")).status == 200
    (reply,) = fake.responses(url)
    return reply


def text_of(reply: dict) -> str:
    return reply["text"] + " " + json.dumps(reply.get("blocks") or [], ensure_ascii=False)


def assert_refused(reply: dict, *, admins: list[str]) -> None:
    """Polite, private, says who may, and is not an error."""
    body = text_of(reply)
    assert reply["response_type"] == "ephemeral"  # the channel does not see someone being refused
    assert "Only the reading group's admins can" in body
    assert all(f"<@{a}>" in body for a in admins)
    assert "Sorry, something went wrong" not in body and "Traceback" not in body


def test_without_admins_everyone_may_schedule_and_remove(make_app, fake_slack, hashing_store):
    app = make_app("")
    assert command(app, fake_slack, "schedule 09:00 UTC", "U1")["response_type"] == "in_channel"
    command(app, fake_slack, "interests add graph neural networks", "U1")
    assert "Removed 1." in text_of(command(app, fake_slack, "interests remove 1 confirm", "U2"))
    assert "turned the paper of the day off" in text_of(command(app, fake_slack, "schedule off", "U3"))
    assert hashing_store.get_schedule(CH) is None


def test_with_admins_others_are_refused_politely_and_nothing_changes(make_app, fake_slack, hashing_store):
    app = make_app("UADMIN, UBOSS")
    fake = fake_slack
    command(app, fake, "schedule 09:00 Europe/Berlin weekdays", "UADMIN")
    command(app, fake, "interests add graph neural networks", "UBOSS")
    schedule_before = hashing_store.get_schedule(CH)
    interests_before = [r["text"] for r in hashing_store.interests(CH)]
    announced = len(fake.messages(CH))

    for text in ("schedule 10:00 UTC", "schedule off", "schedule OFF", "daily 07:30", "when off",
                 "interests remove 1 confirm", "interests rm #1 confirm", "topics - 1 confirm"):
        assert_refused(command(app, fake, text, "U1"), admins=["UADMIN", "UBOSS"])
    assert hashing_store.get_schedule(CH) == schedule_before
    assert [r["text"] for r in hashing_store.interests(CH)] == interests_before
    assert len(fake.messages(CH)) == announced  # nothing was announced in the channel

    # Looking, adding interests and removing your own stay open to everyone.
    assert "09:00 Europe/Berlin" in text_of(command(app, fake, "schedule", "U1"))
    assert "Added *video understanding*" in text_of(command(app, fake, "interests add video understanding", "U1"))
    assert "Removed 2." in text_of(command(app, fake, "interests remove 2 confirm", "U1"))
    # Admins may do all of it.
    assert "Removed 1." in text_of(command(app, fake, "interests remove 1 confirm", "UADMIN"))
    assert "turned the paper of the day off" in text_of(command(app, fake, "schedule off", "UBOSS"))
    assert hashing_store.get_schedule(CH) is None


def test_a_refusal_does_not_depend_on_the_channel(make_app, fake_slack, hashing_store):
    app = make_app("UADMIN")
    for channel in ("C2", "G1", "D1"):
        assert_refused(command(app, fake_slack, "schedule 09:00 UTC", "U1", channel=channel), admins=["UADMIN"])
        assert hashing_store.get_schedule(channel) is None


@pytest.mark.parametrize("value", [
    "UADMIN,UBOSS", "UADMIN, UBOSS", "UADMIN;UBOSS", "UADMIN UBOSS", " UADMIN\tUBOSS ", "UADMIN,\nUBOSS",
    "<@UADMIN>, <@UBOSS>", "<@UADMIN|ann> <@UBOSS|bo>",
])
def test_admin_lists_are_read_the_ways_people_write_them(value, monkeypatch):
    from bot.config import Settings

    monkeypatch.setenv("PAPERCLUB_ADMINS", value)
    assert Settings(_env_file=None).admin_ids == {"UADMIN", "UBOSS"}


def test_an_empty_admin_list_means_no_restriction(monkeypatch):
    from bot.config import Settings

    for value in ("", " ", ",", " ; "):
        monkeypatch.setenv("PAPERCLUB_ADMINS", value)
        assert Settings(_env_file=None).admin_ids == set()
