"""The reading surfaces as a team lives with them over weeks: shares typed or pressed, long reading
lists, and numbers on a list that changed since it was shown (the real Bolt app against the fake
Slack, a real store; the fixtures of tests/test_save.py)."""
from __future__ import annotations

import json

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


def test_a_weeks_digest_is_the_channels_last_seven_dates_in_its_own_zone(fake_slack, hashing_store):
    """`/paper digest 7` counted from 7 × 24 hours ago, and daily posts by their UTC date from there: it
    listed a paper of the day from 8 dates back. The window is now the channel's last 7 dates in its
    schedule's zone, from midnight, for daily posts and shares alike."""
    from datetime import datetime, timezone

    from bot.app import create_app
    from conftest import Clock, make_deps, make_settings
    from store import HashingEmbedder, Searcher

    def at(day: int, hour: int) -> float:
        return datetime(2024, 6, day, hour, tzinfo=timezone.utc).timestamp()

    clock = Clock(datetime(2024, 6, 10, 12, tzinfo=timezone.utc))  # Mon 10 Jun, 08:00 in New York
    deps = make_deps(make_settings(slack_api_url=fake_slack.api_url), hashing_store,
                     Searcher(hashing_store, HashingEmbedder()), clock=clock)
    app = create_app(deps, process_before_response=True)
    fake_slack.add_channel(CH)
    dispatch_command(app, fake_slack, "schedule 9:00 America/New_York", user="UANN", channel=CH)
    eighth, seventh, late_share, early_share = hashing_store.list_papers(limit=4)
    for day, paper in ((3, eighth), (4, seventh)):  # 09:00 in New York on Mon 3 and Tue 4 Jun
        assert hashing_store.claim_post(CH, f"2024-06-0{day}", claimer="me", paper_id=paper.id, pick=None,
                                        now=at(day, 13))
        assert hashing_store.finish_post(CH, f"2024-06-0{day}", claimer="me", ts=f"{at(day, 13):.6f}",
                                         now=at(day, 13), claimed_at=at(day, 13))
    for paper, when in ((late_share, at(4, 2)), (early_share, at(4, 5))):  # Mon 22:00, Tue 01:00 there
        hashing_store.record_message_paper(CH, f"{when:.6f}", paper.id, kind="share", posted_by="UBOB", now=when)
    digest = text_of(dispatch_command(app, fake_slack, "digest 7", user="UCAT", channel=CH))
    assert "2 papers posted" in digest, digest
    assert bk.esc(seventh.short_name) in digest and bk.esc(early_share.short_name) in digest
    assert bk.esc(eighth.short_name) not in digest and bk.esc(late_share.short_name) not in digest


def test_home_lists_a_verdict_given_outside_a_channel_without_a_broken_channel_link(world):  # noqa: F811
    """A For me pressed where Slack names no channel (a card in a DM with the app, a view) was listed
    in App Home as "on *X* in <#>", a link to nowhere; now it names the paper and the day, and a
    verdict given in a channel still links there."""
    app, fake, store = world
    nowhere, in_dm, in_channel = store.list_papers(limit=3)
    for paper, channel in ((nowhere, None), (in_dm, "D0DM"), (in_channel, CH)):
        url = fake.new_response_url(channel=channel or CH, user="UANN")
        body = block_action_body(bk.ACTION_MORE, paper.id, url, user="UANN", channel=channel or "")
        if channel is None:
            del body["channel"], body["container"]["channel_id"]
        assert app.dispatch(BoltRequest(body=body, mode="socket_mode")).status == 200
        assert "Noted" in text_of(fake.responses(url)[0])
    event = {"type": "event_callback", "team_id": "T1", "api_app_id": "A1", "event_id": "EvHome", "event_time": 1,
             "event": {"type": "app_home_opened", "user": "UANN", "tab": "home", "channel": "D0DM"}}
    assert app.dispatch(BoltRequest(body=event, mode="socket_mode")).status == 200
    lines = [ln for b in fake.wait_for(lambda: fake.home_view("UANN"))["blocks"] if b["type"] == "section"
             for ln in b["text"]["text"].splitlines() if " on *" in ln]
    assert len(lines) == 3, lines
    line = {p.id: next(ln for ln in lines if f"*{bk.esc(p.short_name)}*" in ln) for p in (nowhere, in_dm, in_channel)}
    assert "<#" not in line[nowhere.id] and "&lt;#" not in line[nowhere.id]
    assert "<#" not in line[in_dm.id]
    assert f"in <#{CH}>" in line[in_channel.id]


def test_a_reading_list_dates_each_save_in_the_members_own_zone(world):  # noqa: F811
    """The team's zone is UTC; a paper saved at 03:00 UTC on Tuesday 1 Dec was saved on Monday evening
    for a member in Los Angeles, and their list (and Home) said Tue 1 Dec. It now reads their zone from
    Slack (users.info, asked once for both), and a member Slack says nothing of gets the team's."""
    app, fake, store = world
    fake.add_user("UANN", tz="America/Los_Angeles")
    paper = store.list_papers(limit=1)[0]
    tuesday_3am_utc = 1_796_094_000  # 2026-12-01 03:00 UTC
    for user in ("UANN", "UCAT"):
        store.save_paper(user, paper.id, now=tuesday_3am_utc)
    listed = text_of(dispatch_command(app, fake, "saved", user="UANN", channel=CH))
    assert "saved Mon 30 Nov" in listed
    event = {"type": "event_callback", "team_id": "T1", "api_app_id": "A1", "event_id": "EvHomeTz",
             "event_time": 1, "event": {"type": "app_home_opened", "user": "UANN", "tab": "home"}}
    store.add_reaction({"event_id": "EvR", "channel": CH, "message_ts": "1.1", "paper_id": paper.id, "user": "UANN",
                        "emoji": "fire", "base": "fire", "action": "added", "event_ts": float(tuesday_3am_utc),
                        "event_time": None, "recorded_at": tuesday_3am_utc})
    assert app.dispatch(BoltRequest(body=event, mode="socket_mode")).status == 200
    home = str(fake.wait_for(lambda: fake.home_view("UANN")))
    assert f"in <#{CH}>, Mon 30 Nov" in home
    assert len([c for c in fake.calls("users.info") if c.params.get("user") == "UANN"]) == 1
    fake.fail("users.info", error="user_not_found")
    assert "saved Tue 1 Dec" in text_of(dispatch_command(app, fake, "saved", user="UCAT", channel=CH))


def test_a_page_past_the_end_of_the_reading_list_suggests_only_pages_that_exist(world):  # noqa: F811
    """`saved 2` on a one-page list said there is no page 2, then that `/paper saved 2` shows the second
    page: the command that had just failed."""
    app, fake, store = world
    papers = store.list_papers(limit=20)
    empty = text_of(dispatch_command(app, fake, "saved 2", user="UANN", channel=CH))
    assert "There is no page 2" in empty and "saved 2" not in empty.split("There is no page 2")[1]
    assert "Press *Save*" in empty  # how a list starts, not a page it lacks
    store.save_paper("UANN", papers[0].id, now=1_764_000_000)
    one = text_of(dispatch_command(app, fake, "saved 2", user="UANN", channel=CH))
    assert "There is no page 2" in one and "saved 2" not in one.split("There is no page 2")[1]
    assert "`/paper saved` shows it" in one
    for n, paper in enumerate(papers[1:], start=1):
        store.save_paper("UANN", paper.id, now=1_764_000_000 + n)
    two = text_of(dispatch_command(app, fake, "saved 3", user="UANN", channel=CH))
    assert "There is no page 3" in two and "`/paper saved 2` shows the last" in two


def test_share_pressed_twice_or_typed_after_posts_the_paper_once(world):  # noqa: F811
    """Share pressed twice on the same card (a double click on a slow button, or the same card pressed
    again later that day), then `/paper share` of that paper, posted it three times in the channel.
    A paper is now shared once a day in a channel: the second press says where it is already."""
    app, fake, store = world
    paper = store.list_papers(limit=1)[0]
    answers = []
    for user in ("UANN", "UANN", "UBOB"):
        url = fake.new_response_url(channel=CH, user=user)
        body = block_action_body(bk.ACTION_SHARE, paper.id, url, user=user, channel=CH)
        assert app.dispatch(BoltRequest(body=body, mode="socket_mode")).status == 200
        [answer] = fake.responses(url)
        answers.append(text_of(answer))
    typed = dispatch_command(app, fake, f"share {paper.id}", user="UANN", channel=CH)
    shared = [m for m in fake.messages(CH) if f"shared-{paper.id}" in json.dumps(m.get("blocks") or [])]
    assert len(shared) == 1
    assert "Shared" in answers[0]
    for again in (*answers[1:], text_of(typed)):
        assert f"*{bk.esc(paper.short_name)}* was shared in <#{CH}> already today" in again
    assert typed["response_type"] == "ephemeral"
    digest = text_of(dispatch_command(app, fake, "digest", user="UCAT", channel=CH))
    assert "1 paper posted" in digest
