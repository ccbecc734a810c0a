"""The reading surfaces as a team lives with them over weeks: shares typed or pressed, long reading
lists, and numbers on a list that changed since it was shown (the real Bolt app against the fake
Slack, a real store; the fixtures of tests/test_save.py)."""
from __future__ import annotations

from slack_bolt import BoltRequest

from bot import blocks as bk
from conftest import block_action_body, dispatch_command, text_of
from test_save import CH, world  # noqa: F401 (fixture)


def test_a_typed_share_is_in_the_digest_like_a_pressed_one(world):  # noqa: F811
    app, fake, store = world
    typed, pressed = store.list_papers(limit=2)
    confirm = dispatch_command(app, fake, f"share {typed.id}", user="UANN", channel=CH)
    url = fake.new_response_url(channel=CH, user="UBOB")
    body = block_action_body(bk.ACTION_SHARE, pressed.id, url, user="UBOB", channel=CH)
    assert app.dispatch(BoltRequest(body=body, mode="socket_mode")).status == 200
    posted = fake.messages(CH)
    assert len(posted) == 2 and "shared by <@UANN>" in text_of(posted[0])
    digest = text_of(dispatch_command(app, fake, "digest", user="UCAT", channel=CH))
    assert "2 papers posted" in digest
    assert bk.esc(typed.short_name) in digest and bk.esc(pressed.short_name) in digest
    # and the sharer hears, privately, that it went out, as after pressing Share
    assert confirm["response_type"] == "ephemeral" and "Shared" in confirm["text"]


def test_a_typed_share_where_the_bot_is_not_a_member_still_reaches_the_channel(world):  # noqa: F811
    app, fake, store = world
    paper = store.list_papers(limit=1)[0]
    fake.fail("chat.postMessage", error="not_in_channel")
    reply = dispatch_command(app, fake, f"share {paper.id}", user="UANN", channel=CH)
    assert reply["response_type"] == "in_channel" and "shared by <@UANN>" in text_of(reply)
