"""Paper cards as a member sees them (issue 32.15-16): the daily post is one compact card (the linked
name, the TL;DR or else the headline, why in words, Save and a menu) with its runners-up under it;
a search result is [Save] [For me] [Not for me] [⋯], never green. The menu's entries answer exactly
as the buttons they replace, in Slack and in the console."""
from __future__ import annotations

import io
import json
import re
import time
from dataclasses import replace
from datetime import datetime, timezone

import pytest
from rich.console import Console
from slack_bolt import BoltRequest

from bot import blocks as bk
from bot.app import create_app
from bot.console import render_block
from bot.posting import EVENT_TYPE, post_daily
from conftest import (Clock, block_action_body, card_choices, dispatch_command, make_deps, make_settings,
                      menu_action_body, text_of)
from store import HashingEmbedder, Searcher, paper_summary

CH = "C1"
MONDAY = datetime(2026, 11, 30, 8, tzinfo=timezone.utc)
INTERACTIVE = ("button", "overflow", "static_select", "users_select", "datepicker")


@pytest.fixture
def world(fake_slack, hashing_store):
    # The papers as `paperclub enrich` leaves them: each with its page.
    rows = hashing_store.paper_rows([p.id for p in hashing_store.iter_papers()])
    for row in rows.values():
        row["url"] = f"https://openreview.net/forum?id={row['id']}"
    hashing_store.write_papers(list(rows.values()), [], now=time.time())
    settings = make_settings(slack_api_url=fake_slack.api_url)
    deps = make_deps(settings, hashing_store, Searcher(hashing_store, HashingEmbedder()), clock=Clock(MONDAY))
    app = create_app(deps, process_before_response=True)
    fake_slack.add_channel(CH)
    return app, fake_slack, hashing_store, deps


def interactive(block: dict) -> list[dict]:
    return [e for e in block.get("elements") or [] if e.get("type") in INTERACTIVE]


def post_the_day(world) -> tuple[dict, list[dict]]:
    """Post today's paper as the scheduler does; (the post, its thread replies)."""
    app, fake, store, deps = world
    dispatch_command(app, fake, "interests add video understanding", user="UALICE", channel=CH)
    result = post_daily(deps.slack, store, deps.searcher, CH, MONDAY, feedback=deps.feedback, sleep=lambda s: None)
    assert result.status == "posted"
    [post] = [m for m in fake.messages(CH) if (m.get("metadata") or {}).get("event_type") == EVENT_TYPE]
    return post, [m for m in fake.messages(CH) if m.get("thread_ts") == post["ts"] and m["ts"] != post["ts"]]


def test_the_daily_post_is_one_compact_card_with_its_runners_up(world):
    app, fake, store, deps = world
    post, thread = post_the_day(world)
    paper = store.get_paper(post["metadata"]["event_payload"]["paper_id"])
    blocks = post["blocks"]
    [main] = [b for b in blocks if b.get("block_id") == f"{bk.DAILY_BLOCK}{paper.id}"]
    [main_actions] = [b for b in blocks if b.get("block_id") == f"{bk.DAILY_ACT_BLOCK}{paper.id}"]
    # At most four things to click on the day's paper: Save (the one green button) and the menu.
    assert len(interactive(main_actions)) <= 4
    assert [(e["type"], e.get("action_id"), e.get("style")) for e in main_actions["elements"]] == [
        ("button", bk.ACTION_SAVE, "primary"), ("overflow", bk.ACTION_MENU, None)]
    assert json.dumps(blocks).count('"primary"') == 1
    # The name links to the paper; the TL;DR follows, and the headline is not said a second time.
    tldr = paper_summary(store, paper, now=time.time()).tldr
    text = main["text"]["text"]
    assert text.startswith(f"*<{paper.url}|{bk.esc(paper.short_name)}>*")
    assert bk.esc(tldr)[:80] in text and "TL;DR" not in json.dumps(blocks)
    # (this TL;DR opens with the headline: before, the card said it twice)
    assert json.dumps(blocks, ensure_ascii=False).count(bk.esc(bk.after_name(paper))) == 1
    # Why, in words: whom it serves and how close, no raw cosine.
    [why] = [b for b in blocks if b["type"] == "context" and "_Why:_" in json.dumps(b)]
    why_text = why["elements"][0]["text"].split("  ·  ")[0]
    assert "matches *video understanding* (added by <@UALICE>), " in why_text
    assert not re.search(r"\d\.\d", why_text), why_text
    # The runners-up: each a real For me / Not for me, its other actions in its menu; the day's paper
    # takes reactions instead.
    assert "*Also today*" in json.dumps(blocks)
    rows = card_choices(blocks)
    assert bk.ACTION_MORE not in rows[0] and len(rows) == 3
    for row in rows[1:]:
        assert row == [bk.ACTION_MORE, bk.ACTION_LESS, bk.ACTION_SAVE, bk.ACTION_SUMMARY, bk.ACTION_SIMILAR]
    runner_buttons = [e for b in blocks if b.get("block_id", "").startswith(bk.RUNNER_BLOCK) for e in interactive(b)]
    assert {(e["action_id"], e["type"]) for e in runner_buttons if e.get("action_id") != bk.ACTION_MENU} == {
        (bk.ACTION_MORE, "button"), (bk.ACTION_LESS, "button")}
    # Everything else is a click away or in the thread: the key points and the abstract.
    assert len(thread) == 1 and "*Abstract*" in text_of(thread[0])
    assert "*Problem*" in json.dumps(thread[0]["blocks"]) and "*Problem*" not in json.dumps(blocks)


def test_the_day_without_a_tldr_shows_the_headline_once(world):
    app, fake, store, deps = world
    post, _ = post_the_day(world)
    from store.pick import DailyPick

    row = store.get_post(CH, "2026-11-30")
    pick = DailyPick.from_dict(row["pick"])
    papers = {p.id: p for p in store.get_papers([pick.paper_id, *[c.paper_id for c in pick.shown]])}
    paper = papers[pick.paper_id]
    blocks = [b.to_dict() for b in bk.digest_blocks(pick, papers, summary=None)]
    text = blocks[1]["text"]["text"]
    assert bk.esc(bk.after_name(paper)) in text and text.count(bk.esc(bk.after_name(paper))) == 1
    assert "TL;DR" not in json.dumps(blocks)


def test_a_runner_up_whose_headline_opens_with_its_name_says_the_name_once(world):
    app, fake, store, deps = world
    post_the_day(world)
    from store.pick import DailyPick

    pick = DailyPick.from_dict(store.get_post(CH, "2026-11-30")["pick"])
    papers = {p.id: p for p in store.get_papers([pick.paper_id, *[c.paper_id for c in pick.shown]])}
    runner = papers[pick.shown[0].paper_id]
    papers[runner.id] = replace(runner, short_name="Motion-centric alignment framework",
                                headline="Motion-centric alignment framework that learns a motion subspace")
    blocks = [b.to_dict() for b in bk.digest_blocks(pick, papers, summary=None)]
    [line] = [b["text"]["text"] for b in blocks if b.get("block_id", "").startswith(f"{bk.RUNNER_BLOCK}1-{runner.id}")]
    assert line.startswith(f"*<{runner.url}|Motion-centric alignment framework>* that learns a motion subspace")
    assert line.count("Motion-centric") == 1


def test_the_menu_summary_on_the_daily_post_answers_like_the_summary_button(world):
    app, fake, store, deps = world
    post, _ = post_the_day(world)
    [menu] = [e for b in post["blocks"] if b.get("block_id", "").startswith(bk.DAILY_ACT_BLOCK)
              for e in b["elements"] if e["type"] == "overflow"]
    summary = next(o["value"] for o in menu["options"] if o["text"]["text"] == "Summary")
    answers = []
    for body in (lambda url: menu_action_body(summary, url, user="UBOB", channel=CH),
                 lambda url: block_action_body(bk.ACTION_SUMMARY, bk.menu_choice(summary)[1], url,
                                               user="UBOB", channel=CH)):
        url = fake.new_response_url(channel=CH, user="UBOB")
        assert app.dispatch(BoltRequest(body=body(url), mode="socket_mode")).status == 200
        [answer] = fake.responses(url)
        answers.append(answer)
    assert answers[0]["response_type"] == "ephemeral" and answers[0]["blocks"][0]["type"] == "header"
    assert answers[0]["blocks"] == answers[1]["blocks"]


def test_search_results_are_compact_cards_linked_and_never_green(world):
    app, fake, store, deps = world
    reply = dispatch_command(app, fake, "search video", user="UANN", channel=CH)
    cards = [b for b in reply["blocks"] if b["type"] == "actions"]
    assert len(cards) == 5 and "primary" not in json.dumps(reply["blocks"])
    assert all(len(interactive(b)) == 4 for b in cards)  # Save, For me, Not for me, the menu
    assert all(row == [bk.ACTION_SAVE, bk.ACTION_MORE, bk.ACTION_LESS, bk.ACTION_SUMMARY, bk.ACTION_SIMILAR,
                       bk.ACTION_SHARE] for row in card_choices(reply["blocks"]))  # no club in C1: no Nominate
    hits = [b for b in reply["blocks"] if b.get("block_id", "").startswith(bk.HIT_BLOCK)]
    assert all(b["text"]["text"].startswith("*1. <https://openreview.net/forum?id=") for b in hits[:1])


def test_a_card_whose_menu_loses_nominate_keeps_the_rest(hashing_store):
    paper = next(hashing_store.iter_papers())
    # A reading-list entry: Summary, then More like this and Nominate in the menu; no club: one left,
    # so it is a plain button again (Slack wants two options in a menu).
    [card] = bk.saved_blocks([(paper, {"source": "button", "saved_at": None})], 1, lambda t: "today")[2:]
    assert card_choices([card.to_dict()]) == [[bk.ACTION_SUMMARY, bk.ACTION_SIMILAR, bk.ACTION_NOMINATE]]
    [card] = bk.without_nominate([card])
    assert [(e["type"], e["action_id"]) for e in card.to_dict()["elements"]] == [
        ("button", bk.ACTION_SUMMARY), ("button", bk.ACTION_SIMILAR)]
    # An id too long for a menu value (75 characters) keeps plain buttons, within Slack's limits.
    long = replace(paper, id="x" * 70)
    block = bk.card_actions(long).to_dict()
    assert all(e["type"] == "button" for e in block["elements"]) and len(block["elements"]) == 7


def test_the_console_turns_menu_entries_into_typed_commands(hashing_store):
    paper = next(hashing_store.iter_papers())
    out = io.StringIO()
    console = Console(file=out, width=400, highlight=False)
    for item in render_block(bk.card_actions(paper).to_dict()):
        console.print(item)
    line = out.getvalue()
    assert "[Save]" in line and "[⋯ Summary · More like this · Share to channel · Nominate]" in line
    # One whole line to type, and the other commands that take the same paper.
    assert f"save {paper.id} (or for-me, not-for-me, summary, similar, share, nominate)" in line
