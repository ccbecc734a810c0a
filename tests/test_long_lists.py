"""Long lists are never cut without a word (issue 31.21): an agenda of 60 nominations keeps a way
to vote for each, "Clear my votes" and the rules; `/paper club` with 500 members says how many it
does not show; a recap of 25 open questions keeps all of them and never cuts inside a mention."""
from __future__ import annotations

import re
from datetime import date, datetime, timedelta, timezone

import pytest
from slack_bolt import BoltRequest

from bot import blocks as bk
from bot.app import create_app
from bot.club import club_tick, post_agenda
from conftest import Clock, dispatch_command, make_deps, make_settings, text_of
from store import HashingEmbedder, Searcher
from store.club import ClubSpec, set_club
from store.ingest import Record, ingest_records

CH = "C1"
MONDAY = datetime(2026, 11, 30, 8, tzinfo=timezone.utc)
DAY = date(2026, 12, 3)  # Thu 17:00 Berlin
# Markup the bot writes: a mention, a channel, a link; a cut inside one leaves a "<" without its ">".
_OPEN_MARKUP = re.compile(r"<[^<>]*$")


@pytest.fixture
def world(fake_slack, hashing_store):
    clock = Clock(MONDAY)
    deps = make_deps(make_settings(slack_api_url=fake_slack.api_url), hashing_store,
                     Searcher(hashing_store, HashingEmbedder()), clock=clock)
    app = create_app(deps, process_before_response=True)
    fake_slack.add_channel(CH)
    set_club(hashing_store, CH, ClubSpec(3, 17, 0, "Europe/Berlin", lead_hours=48, cutoff_hours=24), by="U0",
             now=MONDAY)
    return app, fake_slack, hashing_store, clock, deps


def _papers(store, n: int) -> list[str]:
    records = [Record(abstract=f"We study long agendas number {i} with care and report results on {i} tasks. "
                               "More text here makes it an abstract of a decent length for the parser.",
                      title=f"Agenda paper {i}", id=f"long-{i}", source="test") for i in range(n)]
    ingest_records(store, records, HashingEmbedder(), now=MONDAY.timestamp())
    found = [p.id for p in store.iter_papers() if p.title and p.title.startswith("Agenda paper")]
    assert len(found) == n
    return found


def _click(app, fake, action: dict, *, user: str, ts: str):
    url = fake.new_response_url(channel=CH, user=user)
    body = {"type": "block_actions", "user": {"id": user}, "api_app_id": "A1", "team": {"id": "T1"},
            "channel": {"id": CH}, "trigger_id": "1.2.3", "response_url": url,
            "container": {"type": "message", "channel_id": CH, "message_ts": ts}, "actions": [action]}
    assert app.dispatch(BoltRequest(body=body, mode="socket_mode")).status == 200
    return fake.responses(url)


def test_an_agenda_of_60_nominations_keeps_every_vote_clear_my_votes_and_the_rules(world):
    app, fake, store, clock, deps = world
    ids = _papers(store, 60)
    members = [f"UM{i:02d}" for i in range(60)]
    fake.add_members(*members)
    for user, pid in zip(members, ids):
        store.add_nomination(CH, DAY.isoformat(), pid, user, now=MONDAY.timestamp())
    clock.now = datetime(2026, 12, 1, 16, 30, tzinfo=timezone.utc)
    ts = post_agenda(deps, deps.slack, CH, DAY)
    [agenda] = [m for m in fake.messages(CH) if m["ts"] == ts]
    blocks = agenda["blocks"]
    assert len(blocks) <= bk.MAX_MESSAGE_BLOCKS
    buttons = {e["value"].split("|")[1] for b in blocks if b.get("accessory") for e in [b["accessory"]]
               if e["action_id"] == bk.ACTION_VOTE}
    menus = [e for b in blocks if b["type"] == "actions" for e in b["elements"] if e["type"] == "static_select"]
    in_menus = {o["value"].split("|")[1] for m in menus for o in m["options"]}
    assert buttons | in_menus == set(ids) and not buttons & in_menus  # a way to vote for each, once
    assert all(len(m["options"]) <= 100 for m in menus)
    text = text_of(agenda)
    assert "Clear my votes" in text and "Approval voting" in text
    assert f"{len(in_menus)} more nominations" in text  # said, not silently dropped
    # A vote from the menu counts like a button's.
    last = sorted(in_menus)[0]
    option = next(o for m in menus for o in m["options"] if o["value"].endswith(f"|{last}"))
    _click(app, fake, {"action_id": bk.ACTION_VOTE, "block_id": "m", "type": "static_select",
                       "selected_option": option}, user="UM00", ts=ts)
    assert [(v["user"], v["paper_id"]) for v in store.club_votes(CH, DAY.isoformat())] == [("UM00", last)]
    updated = next(m for m in fake.messages(CH) if m["ts"] == ts)
    assert len(updated["blocks"]) <= bk.MAX_MESSAGE_BLOCKS and "Clear my votes" in text_of(updated)
    # Closed, it still names how many more there were.
    clock.now = datetime(2026, 12, 2, 16, 1, tzinfo=timezone.utc)
    club_tick(deps, deps.slack, clock.now, sleep=lambda s: None, budget=30)
    closed = next(m for m in fake.messages(CH) if m["ts"] == ts)
    assert "Voting has closed" in text_of(closed) and "more nominations" in text_of(closed)
    assert len(closed["blocks"]) <= bk.MAX_MESSAGE_BLOCKS


def test_club_with_500_members_says_how_many_it_does_not_show(world):
    app, fake, store, clock, deps = world
    members = [f"UMEMBER{i:04d}" for i in range(500)]
    fake.add_members(*members)
    for i, m in enumerate(members):
        store.set_club_member(CH, m, active=True, now=MONDAY.timestamp() + i)
    reply = dispatch_command(app, fake, "club", user="UMEMBER0000", channel=CH)
    text = text_of(reply)
    shown = len(set(re.findall(r"<@(UMEMBER\d{4})>", " ".join(b["text"]["text"] for b in reply["blocks"]
                                                                  if b.get("text", {}).get("type") == "mrkdwn"))))
    assert "Members (500)" in text
    assert 100 < shown < 500 and f"and {500 - shown} more" in text
    assert all(not _OPEN_MARKUP.search(b["text"]["text"]) for b in reply["blocks"] if b.get("text"))


def test_a_recap_of_25_open_questions_keeps_all_and_cuts_no_mention(world):
    app, fake, store, clock, deps = world
    people = [f"UASKER{i:02d}" for i in range(25)]
    fake.add_members(*people)
    for m in people[:3]:
        store.set_club_member(CH, m, active=True, now=MONDAY.timestamp())
    session = datetime(2026, 12, 3, 16, tzinfo=timezone.utc)
    for at in (session - timedelta(hours=48), session - timedelta(hours=24), session):
        clock.now = at + timedelta(minutes=1)
        club_tick(deps, deps.slack, clock.now, sleep=lambda s: None, budget=30)
    [thread] = [m for m in fake.messages(CH) if "To discuss" in text_of(m)]
    for i, user in enumerate(people):  # 25 long questions nobody answers
        fake.add_message(CH, f"Question {i:02d}: " + "does the ablation really hold when " * 5 + "the data shift?",
                         user=user, thread_ts=thread["ts"])
    clock.now = session + timedelta(hours=3, minutes=1)
    club_tick(deps, deps.slack, clock.now, sleep=lambda s: None, budget=30)
    [recap] = [m for m in fake.messages(CH) if m.get("thread_ts") == thread["ts"] and "Recap of" in text_of(m)]
    sections = [b["text"]["text"] for b in recap["blocks"] if b["type"] == "section"]
    assert all(len(t) <= bk.SECTION_TEXT for t in sections)
    body = "\n".join(sections)
    assert sorted(set(re.findall(r"Question (\d\d)", body))) == [f"{i:02d}" for i in range(25)]
    assert all(f"<@{u}>" in body for u in people)
    for text in sections:  # every mention whole: no "<@UASK" left open at a cut
        assert not _OPEN_MARKUP.search(text) and text.count("<") == text.count(">")


def test_club_history_lists_recent_sessions_whole_and_says_how_many_older_ones_it_leaves_out(world):
    app, fake, store, clock, deps = world
    ids = _papers(store, 40)
    fake.add_members("UPRESENTER")
    start = date(2026, 1, 1)
    for i, pid in enumerate(ids):
        store.put_club_session(CH, (start + timedelta(days=7 * i)).isoformat(), state="held", paper_id=pid,
                               presenter="UPRESENTER", thread_ts=f"17{i:08d}.000100", now=MONDAY.timestamp())
    reply = dispatch_command(app, fake, "club history", user="UPRESENTER", channel=CH)
    sections = [b["text"]["text"] for b in reply["blocks"] if b["type"] == "section"]
    listed = re.findall(r"\*(\d{4}-\d\d-\d\d)\*", "\n".join(sections))
    assert len(listed) == len(set(listed)) and 0 < len(listed) < 40
    assert f"The last {len(listed)} of 40 sessions; {40 - len(listed)} older ones are not listed" in text_of(reply)
    assert all(len(t) <= bk.SECTION_TEXT and not _OPEN_MARKUP.search(t) and "…" not in t for t in sections)


@pytest.mark.parametrize("chose", [True, False])
def test_a_session_paper_among_the_more_nominations_is_marked_there(world, chose):
    """A club where the presenter chooses, with 60 nominations: the paper the session reads is one the
    agenda names only in its "more nominations" line. That line marks it, as a section would: chosen
    (Ann chose it from the menu), or we read this (she did not: the tie-break gave it to the one
    nominator without an earlier session)."""
    from store.club import PRESENTER_CHOOSES

    app, fake, store, clock, deps = world
    set_club(store, CH, ClubSpec(3, 17, 0, "Europe/Berlin", lead_hours=48, cutoff_hours=24, mode=PRESENTER_CHOOSES),
             by="U0", now=MONDAY)
    store.set_club_member(CH, "UANN", active=True, now=MONDAY.timestamp())
    ids = _papers(store, 60)
    late = ids[55]
    for n, pid in enumerate(ids):  # all but one nominated by UOLD, whose nomination was read last week
        store.add_nomination(CH, DAY.isoformat(), pid, "UNEW" if pid == late else "UOLD", now=MONDAY.timestamp() + n)
    store.put_club_session(CH, "2026-11-26", presenter="UANN", paper_id=ids[0], nominator="UOLD", state="held",
                           now=MONDAY.timestamp())
    fake.add_members("UANN", "UOLD", "UNEW")
    clock.now = datetime(2026, 12, 1, 16, 30, tzinfo=timezone.utc)
    club_tick(deps, deps.slack, clock.now, sleep=lambda s: None, budget=30)
    [agenda] = [m for m in fake.messages(CH) if "what shall we read" in text_of(m)]
    ts = agenda["ts"]
    sections = [b["block_id"] for b in agenda["blocks"] if b["type"] == "section" and b.get("block_id")]
    assert not any(b.endswith(late) for b in sections)  # named only in the line of more nominations
    name = bk.esc(store.get_paper(late).short_name)
    mark = ":white_check_mark: *chosen*" if chose else ":white_check_mark: *we read this*"

    def more_line() -> str:
        message = next(m for m in fake.messages(CH) if m["ts"] == ts)
        [line] = [e["text"] for b in message["blocks"] if b["type"] == "context" for e in b["elements"]
                  if "more nominations" in e.get("text", "")]
        return line

    if chose:
        option = next(o for b in agenda["blocks"] if b["type"] == "actions" for e in b["elements"]
                      if e["type"] == "static_select" for o in e["options"] if o["value"].endswith(f"|{late}"))
        _click(app, fake, {"action_id": bk.ACTION_CLUB_CHOOSE, "block_id": "m", "type": "static_select",
                           "selected_option": option}, user="UANN", ts=ts)
        assert f"{name} ({mark})" in more_line()  # so far: open, the menu still there
    clock.now = datetime(2026, 12, 2, 16, 1, tzinfo=timezone.utc)
    club_tick(deps, deps.slack, clock.now, sleep=lambda s: None, budget=30)
    assert store.get_club_session(CH, DAY.isoformat())["paper_id"] == late
    line = more_line()
    assert f"{name} ({mark})" in line and line.count(":white_check_mark:") == 1
    assert line.split(": ", 1)[1].startswith(f"56. {name} ({mark}), 47. ")  # it leads: a long line never hides it


def test_a_vote_winner_among_the_more_nominations_is_marked_there(world):
    """A voting club with 60 nominations: the winner is one the agenda names only in its "more
    nominations" line. Closed, that line marks it as the announcement has it (we read this), first."""
    app, fake, store, clock, deps = world
    ids = _papers(store, 60)
    late = ids[55]
    fake.add_members("UANN", "UBOB")
    for n, pid in enumerate(ids):
        store.add_nomination(CH, DAY.isoformat(), pid, "UANN", now=MONDAY.timestamp() + n)
    for user in ("UANN", "UBOB"):
        store.add_vote(CH, DAY.isoformat(), user, late, limit=3, now=MONDAY.timestamp())
    store.add_vote(CH, DAY.isoformat(), "UBOB", ids[0], limit=3, now=MONDAY.timestamp())
    clock.now = datetime(2026, 12, 1, 16, 30, tzinfo=timezone.utc)
    ts = post_agenda(deps, deps.slack, CH, DAY)
    clock.now = datetime(2026, 12, 2, 16, 1, tzinfo=timezone.utc)
    club_tick(deps, deps.slack, clock.now, sleep=lambda s: None, budget=30)
    assert store.get_club_session(CH, DAY.isoformat())["paper_id"] == late
    closed = next(m for m in fake.messages(CH) if m["ts"] == ts)
    [line] = [e["text"] for b in closed["blocks"] if b["type"] == "context" for e in b["elements"]
              if "more nominations" in e.get("text", "")]
    name = bk.esc(store.get_paper(late).short_name)
    assert line.count(":white_check_mark:") == 1
    assert line.split(": ", 1)[1].startswith(f"56. {name} (2 · :white_check_mark: *we read this*), ")
    assert ":white_check_mark:" not in str([b for b in closed["blocks"] if b["type"] == "section"])
