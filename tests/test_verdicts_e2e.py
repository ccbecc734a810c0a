"""Verdict buttons ("For me" / "Not for me") on every paper card, end to end: clicks as Slack sends
them over Socket Mode from the fake Slack into the real Bolt app, the reaction log in a real store,
and the next day's pick as the member will get it.

The real model decides what is near a disliked paper, so the seed store embedded with
all-MiniLM-L6-v2 is used (the fixtures of tests/test_reactions_e2e.py).
"""
from __future__ import annotations

import numpy as np
import pytest

from bot import blocks as bk
from bot.later import SORRY
from conftest import Locker, make_deps, make_settings, text_of
from store import HashingEmbedder, Searcher, pick_for_day
from store import feedback as fb
from store.pick import PickSettings
from store.taste import FeedbackModel
from test_reactions_e2e import CH, THU, WED, bot, command, post_day, searcher  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.slow]


def press(bot, action_id: str, paper_id: str, *, user: str, message_ts: str | None = None,
          ephemeral: bool = False) -> list[dict]:
    """Click a button carrying `paper_id`; the private answers it got."""
    url = bot.fake.new_response_url(channel=CH, user=user)
    bot.fake.wait_ack(bot.fake.block_action(action_id, value=paper_id, user=user, channel=CH, response_url=url,
                                            message_ts=message_ts, is_ephemeral=ephemeral), timeout=10)
    return bot.fake.responses(url)


def actions_of(message: dict) -> list[list[tuple[str, str]]]:
    return [[(e["action_id"], e.get("value")) for e in b["elements"]] for b in message["blocks"]
            if b["type"] == "actions"]


def next_pick(bot):
    return pick_for_day(bot.store, bot.deps.searcher, CH, THU.date(), feedback=bot.deps.feedback)


def test_not_for_me_on_a_runner_up_lowers_it_for_that_member_only_once_and_undoably(bot):
    app, fake, store = bot.app, bot.fake, bot.store
    command(app, fake, "interests add machine learning", user="UALICE")
    command(app, fake, "schedule 09:00 UTC")
    day1 = post_day(bot, WED)
    pick = day1["pick"]
    runners = [c["paper_id"] for c in pick["runners_up"]]
    message = next(m for m in fake.messages(CH) if m["ts"] == day1["ts"])
    rows = actions_of(message)
    # The day's paper takes reactions; each runner-up card carries For me / Not for me with its own id.
    assert all(a not in (bk.ACTION_MORE, bk.ACTION_LESS) for a, _ in rows[0])
    for row, pid in zip(rows[1:], runners, strict=True):
        assert (bk.ACTION_MORE, pid) in row and (bk.ACTION_LESS, pid) in row

    bot.service.clock.now = WED.replace(hour=14)
    before = next_pick(bot)
    assert before.paper_id in runners  # the runner-up is still Alice's best open paper tomorrow
    target = before.paper_id

    first = press(bot, bk.ACTION_LESS, target, user="UALICE", message_ts=day1["ts"])
    again = press(bot, bk.ACTION_LESS, target, user="UALICE", message_ts=day1["ts"])
    name = bk.esc(store.get_paper(target).short_name)
    assert f"fewer papers like *{name}* for you from tomorrow's pick" in text_of(first[0])
    # ... and so it is: today's pick stays as it was, tomorrow's leaves the paper out (below).
    today = pick_for_day(store, bot.deps.searcher, CH, WED.date(), feedback=bot.deps.feedback)
    assert today.paper_id == day1["paper_id"]
    assert "it counts once" in text_of(again[0])
    assert [a for row in actions_of(first[0]) for a, _ in row] == [bk.ACTION_UNDO_VERDICT]
    assert all(r["response_type"] == "ephemeral" for r in first + again)

    # Logged once, as Alice's 👎 on that runner-up: not on the day's paper, not for anyone else.
    standing = fb.current_reactions(store.reactions(channel=CH))
    assert [(r["user"], r["paper_id"], r["base"]) for r in standing] == [("UALICE", target, "-1")]
    feedback = fb.feedback_for_day(store, CH, THU.date())
    assert list(feedback) == [target] and list(feedback[target].by_member) == ["UALICE"]
    assert -1.0 <= feedback[target].by_member["UALICE"] < -0.95  # a 👎, decayed by its hours
    ids, matrix = store.load_vectors(bot.deps.searcher.embedder.name)
    model = FeedbackModel(ids, matrix, feedback, PickSettings())
    row = ids.index(target)
    assert model.for_member("UALICE")[row] < 0  # Alice's turn scores it lower ...
    assert not np.any(model.for_member("UBOB"))  # ... Bob's turns do not change

    after = next_pick(bot)
    assert after.paper_id != target and after.choice.member == "UALICE"

    # Undo in the private answer takes it back: tomorrow is as it was.
    undone = press(bot, bk.ACTION_UNDO_VERDICT, target, user="UALICE", ephemeral=True)
    assert f"Taken back: your verdict on *{name}* no longer counts from tomorrow's pick" in text_of(undone[0])
    assert fb.current_reactions(store.reactions(channel=CH)) == []
    assert next_pick(bot).paper_id == target


def test_for_me_then_not_for_me_keeps_one_verdict_and_every_card_carries_the_buttons(bot):
    app, fake, store = bot.app, bot.fake, bot.store
    command(app, fake, "interests add machine learning", user="UALICE")
    found = command(app, fake, "search spiking neural networks", user="UBOB")
    hits = [row for row in actions_of(found) if any(a == bk.ACTION_MORE for a, _ in row)]
    assert len(hits) >= 3
    pid = dict(hits[0])[bk.ACTION_MORE]
    assert dict(hits[0])[bk.ACTION_LESS] == pid
    summary = command(app, fake, f"summary {pid}", user="UBOB")
    assert (bk.ACTION_MORE, pid) in [x for row in actions_of(summary) for x in row]

    press(bot, bk.ACTION_MORE, pid, user="UBOB", ephemeral=True)
    changed = press(bot, bk.ACTION_LESS, pid, user="UBOB", ephemeral=True)
    assert "fewer papers like" in text_of(changed[0])
    standing = fb.current_reactions(store.reactions(user="UBOB"))
    assert [(r["paper_id"], r["base"], r["channel"]) for r in standing] == [(pid, "-1", CH)]


def test_a_typed_verdict_that_meets_a_locked_database_is_kept_once_as_the_button_keeps_it(
        fake_slack, quick_busy_store):
    """`/paper not-for-me` while another connection holds the write lock: the write waits it out (as a
    press of the button does) and the reply says it is noted, rather than asking the member to type it
    again."""
    from bot.app import create_app

    store = quick_busy_store
    deps = make_deps(make_settings(slack_api_url=fake_slack.api_url), store, Searcher(store, HashingEmbedder()))
    app = create_app(deps, process_before_response=True)
    paper = next(iter(store.iter_papers()))
    with Locker(store).until_retried() as retried:
        reply = command(app, fake_slack, f"not-for-me {paper.id}", user="UALICE")
    assert SORRY not in reply["text"] and "try again" not in text_of(reply)
    assert f"fewer papers like *{bk.esc(paper.short_name)}* for you" in text_of(reply)
    logged = store.reactions(user="UALICE")
    assert [(r["paper_id"], r["base"], r["action"], r["channel"]) for r in logged] == [(paper.id, "-1", "added", CH)]
    assert retried, "the first attempt should have met the lock"
