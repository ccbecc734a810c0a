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


def test_a_long_reading_list_can_be_read_to_its_oldest_paper_page_by_page(world):  # noqa: F811
    app, fake, store = world
    papers = store.list_papers(limit=20)
    for n, paper in enumerate(papers):  # saved over weeks, oldest first
        store.save_paper("UANN", paper.id, now=1_764_000_000 + n * 86_400)
    first = text_of(dispatch_command(app, fake, "saved", user="UANN", channel=CH))
    assert "Your reading list (20)" in first and "Showing 1–15 of 20" in first and "`/paper saved 2`" in first
    assert bk.esc(papers[0].short_name) not in first  # the oldest is on the next page
    second = dispatch_command(app, fake, "saved 2", user="UANN", channel=CH)
    entries = [b["block_id"] for b in second["blocks"]
               if b.get("block_id", "").removeprefix(bk.SAVED_BLOCK).split("-")[0].isdigit()]
    assert entries == [f"{bk.SAVED_BLOCK}{16 + n}-{p.id}" for n, p in enumerate(reversed(papers[:5]))]
    assert "Showing 16–20 of 20" in text_of(second) and "saved 3" not in text_of(second)
    # the numbers on the second page are the ones `saved remove` takes
    removed = text_of(dispatch_command(app, fake, "saved remove 20", user="UANN", channel=CH))
    assert f"Removed *{bk.esc(papers[0].short_name)}*" in removed
    nothing = dispatch_command(app, fake, "saved 3", user="UANN", channel=CH)
    assert "There is no page 3" in nothing["text"] and nothing["response_type"] == "ephemeral"


def test_saved_remove_by_id_takes_off_that_paper_whatever_was_saved_since_the_list_was_shown(world):  # noqa: F811
    app, fake, store = world
    kept, unwanted, newer = store.list_papers(limit=3)
    for n, paper in enumerate((kept, unwanted)):
        store.save_paper("UANN", paper.id, now=1_764_000_000 + n)
    shown = text_of(dispatch_command(app, fake, "saved", user="UANN", channel=CH))
    assert f"1. *{bk.esc(unwanted.short_name)}*" in shown and f"id `{unwanted.id}`" in shown
    # Before Ann types what she read there, a 👀 on today's paper puts another one on top
    store.save_paper("UANN", newer.id, now=1_764_000_100)
    removed = text_of(dispatch_command(app, fake, f"saved remove {unwanted.id.upper()}", user="UANN",
                                       channel=CH))
    assert f"Removed *{bk.esc(unwanted.short_name)}*" in removed
    assert [r["paper_id"] for r in store.saved_papers("UANN")] == [newer.id, kept.id]
    gone = dispatch_command(app, fake, f"saved remove {unwanted.id}", user="UANN", channel=CH)
    assert f"There is no saved paper {unwanted.id}" in gone["text"]
    assert len(store.saved_papers("UANN")) == 2  # nothing else went
