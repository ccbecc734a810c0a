"""A paper found anywhere can be saved (issue 32.10): `/paper save <paper>` resolves as summary does,
says when the paper was already saved, and every paper card (search results, a summary, similar
papers, a shared paper) carries Save; no card shouts with a green button (issue 32.16)."""
from __future__ import annotations

import pytest
from slack_bolt import BoltRequest

from bot import blocks as bk
from bot.app import create_app
from conftest import Clock, block_action_body, dispatch_command, make_deps, make_settings, text_of
from store import HashingEmbedder, Searcher

CH = "C1"


@pytest.fixture
def world(fake_slack, hashing_store):
    settings = make_settings(slack_api_url=fake_slack.api_url)
    deps = make_deps(settings, hashing_store, Searcher(hashing_store, HashingEmbedder()), clock=Clock())
    app = create_app(deps, process_before_response=True)
    fake_slack.add_channel(CH)
    return app, fake_slack, hashing_store


def buttons(message: dict) -> list[dict]:
    return [e for b in message.get("blocks") or [] if b["type"] == "actions" for e in b["elements"]]


def within_slack_limits(message: dict) -> None:
    assert len(message["blocks"]) <= bk.MAX_MESSAGE_BLOCKS
    assert all(len(b["elements"]) <= bk.MAX_ACTION_ELEMENTS for b in message["blocks"] if b["type"] == "actions")


def test_save_by_name_then_again_then_it_is_on_the_list(world):
    app, fake, store = world
    paper = store.list_papers(limit=1)[0]
    first = text_of(dispatch_command(app, fake, f"save {paper.id}", user="UANN", channel=CH))
    assert f"Saved *{bk.esc(paper.short_name)}* to your reading list" in first
    again = text_of(dispatch_command(app, fake, f"save {paper.id}", user="UANN", channel=CH))
    assert "was already on your reading list" in again
    assert [r["paper_id"] for r in store.saved_papers("UANN")] == [paper.id]
    assert bk.esc(paper.short_name) in text_of(dispatch_command(app, fake, "saved", user="UANN", channel=CH))
    assert "Which paper?" in text_of(dispatch_command(app, fake, "save", user="UANN", channel=CH))


@pytest.mark.parametrize("command", ["search video", "summary {id}", "similar {id}", "share {id}"])
def test_every_paper_card_has_save_and_no_green_button(world, command):
    app, fake, store = world
    paper = store.list_papers(limit=1)[0]
    reply = dispatch_command(app, fake, command.format(id=paper.id), user="UANN", channel=CH)
    if command.startswith("share"):  # the card is the post in the channel; the reply says it went out
        [reply] = fake.messages(CH)
    within_slack_limits(reply)
    cards = [b for b in reply["blocks"] if b["type"] == "actions"]
    assert cards and all(any(e["action_id"] == bk.ACTION_SAVE for e in b["elements"]) for b in cards)
    assert not [e for e in buttons(reply) if e.get("style") == "primary"]


def test_the_save_button_on_a_search_result_saves_that_result(world):
    app, fake, store = world
    reply = dispatch_command(app, fake, "search video", user="UBOB", channel=CH)
    third = [e for e in buttons(reply) if e["action_id"] == bk.ACTION_SAVE][2]
    url = fake.new_response_url(channel=CH, user="UBOB")
    body = block_action_body(bk.ACTION_SAVE, third["value"], url, user="UBOB", channel=CH)
    assert app.dispatch(BoltRequest(body=body, mode="socket_mode")).status == 200
    [answer] = fake.responses(url)
    assert "Saved *" in text_of(answer) and answer["response_type"] == "ephemeral"
    assert [r["paper_id"] for r in store.saved_papers("UBOB")] == [third["value"]]


def test_an_empty_reading_list_says_how_to_fill_it_in_a_team_with_no_paper_of_the_day(world):
    """App Home and `/paper saved` said "Press Save on a paper of the day" to a team that had never had
    one; the hint now names a way that works on the first day, and following it fills the list."""
    import json

    app, fake, store = world
    body = {"type": "event_callback", "team_id": "T1", "api_app_id": "A1", "event_id": "EvHOME1",
            "event_time": 1, "event": {"type": "app_home_opened", "user": "UNEW", "tab": "home", "channel": "D1"}}
    assert app.dispatch(BoltRequest(body=body, mode="socket_mode")).status == 200
    home = json.dumps(fake.home_view("UNEW"), ensure_ascii=False)
    saved = text_of(dispatch_command(app, fake, "saved", user="UNEW", channel=CH))
    for said in (home, saved):
        assert "paper of the day" not in said.split("How to use")[0], said
        assert "Press *Save* on any paper (`/paper search &lt;words&gt;` finds some)" in said, said
    reply = dispatch_command(app, fake, "search video", user="UNEW", channel=CH)
    first = next(e for e in buttons(reply) if e["action_id"] == bk.ACTION_SAVE)
    url = fake.new_response_url(channel=CH, user="UNEW")
    app.dispatch(BoltRequest(body=block_action_body(bk.ACTION_SAVE, first["value"], url, user="UNEW", channel=CH),
                             mode="socket_mode"))
    assert [r["paper_id"] for r in store.saved_papers("UNEW")] == [first["value"]]
