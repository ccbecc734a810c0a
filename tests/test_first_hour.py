"""What a new team meets in its first hour at the slash command (issue 32's smaller items)."""
from __future__ import annotations

import pytest
from test_bot import all_text, app, command, module_store, one, searcher, slack  # noqa: F401 (fixtures)

pytestmark = pytest.mark.slow  # the real model


def test_help_for_one_command_shows_that_command_only(app, slack):
    reply = one(command(app, slack, "help search"))
    text = all_text(reply)
    assert "e.g. `/paper search" in text and "interests" not in text and "schedule" not in text
    everything = one(command(app, slack, "help nosuchthing"))
    assert "no command" in all_text(everything).lower() and "schedule" in all_text(everything)


def test_a_near_miss_id_gets_a_did_you_mean(app, slack, module_store):
    paper = module_store.list_papers(limit=1)[0]
    reply = one(command(app, slack, f"summary {paper.id[:-1]}"))
    assert f"Did you mean {paper.id}" in all_text(reply)


def test_an_interest_longer_than_a_topic_is_refused_and_nothing_is_stored(app, slack, module_store):
    before = module_store.interests("C1")
    reply = one(command(app, slack, "interests add " + "video grounding with language " * 40))
    assert "at most 200 characters" in all_text(reply)
    assert module_store.interests("C1") == before
