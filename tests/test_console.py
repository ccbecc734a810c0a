"""`paperclub console` is wired like `paperclub run`: its own channel, the configured emoji weights.

Lines are piped into the real console loop (bot/console.py) over a weightless store.
"""
from __future__ import annotations

import io
import time

import pytest

from bot.commands import CONSOLE_CHANNEL
from bot.console import run_console
from conftest import make_settings
from store import feedback as fb
from store.embed import HashingEmbedder


@pytest.fixture(autouse=True)
def wide(monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")  # rich would wrap the replies at 80 columns


def console(store, lines: str, **settings) -> str:
    out = io.StringIO()
    run_console(make_settings(**settings), store, HashingEmbedder(), stdin=io.StringIO(lines), out=out)
    return out.getvalue()


def most_liked_line(text: str) -> str:
    return next(line for line in text.splitlines() if "Most liked" in line)


def test_the_console_weighs_reactions_with_the_configured_weights(hashing_store):
    # Two papers shared in the console's channel an hour ago: one slept through, one on fire.
    store, now = hashing_store, time.time()
    dull, hot = list(store.iter_papers())[:2]
    for n, (paper, user, emoji) in enumerate([(dull, "U1", "sleeping"), (hot, "U2", "fire")]):
        ts = f"{now - 3600 + n:.6f}"
        store.record_message_paper(CONSOLE_CHANNEL, ts, paper.id, kind="share", now=now - 3600 + n)
        fb.record_reaction(store, event_id=f"Ev{n}", channel=CONSOLE_CHANNEL, message_ts=ts, user=user,
                           emoji=emoji, added=True, event_ts=now - 1800, now=now - 1800)

    default = most_liked_line(console(store, "digest\n"))
    assert hot.short_name in default and dull.short_name not in default

    # PAPERCLUB_REACTION_WEIGHTS turns the verdicts round, in the console as in Slack.
    configured = most_liked_line(console(store, "digest\n", reaction_weights="sleeping=3,fire=-1"))
    assert dull.short_name in configured and hot.short_name not in configured


def test_a_newcomer_can_schedule_steer_and_preview_the_paper_of_the_day_in_the_console(hashing_store):
    text = console(hashing_store, "schedule 09:30 UTC weekdays\ninterests add video understanding\ntoday\n")
    assert "Schedules belong to a Slack channel" not in text
    assert "set the paper of the day to 09:30 UTC, on weekdays" in text
    row = hashing_store.get_schedule(CONSOLE_CHANNEL)
    assert (row["hour"], row["minute"], row["tz"], row["days"]) == (9, 30, "UTC", "weekdays")
    assert [r["text"] for r in hashing_store.interests(CONSOLE_CHANNEL)] == ["video understanding"]
    assert "Preview (only you see this): it posts" in text  # today's pick, as a channel would get it
    # The console runs on the wall clock, and about one day in ten is an exploration day.
    assert ("Paper of the day" in text or "Exploration day" in text)
    assert "video understanding" in text.split("Preview")[-1]
