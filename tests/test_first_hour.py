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


def test_several_topics_added_as_one_interest_get_a_hint_and_remove_finds_one_by_its_words(app, slack,
                                                                                          module_store):
    """`interests add LLM agents, RLHF and diffusion` is one interest (a topic such as "vision, language
    and action" is one, so nothing is split); its closest papers all only loosely related, the reply says
    how to add each on its own. `interests remove diffusion` said "There is no interest diffusion": words
    that only one interest holds now name it, and several candidates are listed."""
    channel = "CTOPICS"
    mixed = all_text(one(command(app, slack, "interests add LLM agents, RLHF and diffusion", channel=channel)))
    assert "Several topics? Add each on its own: `/paper interests add LLM agents`" in mixed, mixed
    one_topic = all_text(one(command(app, slack, "interests add video understanding and grounding",
                                     channel=channel)))
    assert "Several topics?" not in one_topic, one_topic
    assert [r["text"] for r in module_store.interests(channel)] == ["LLM agents, RLHF and diffusion",
                                                                     "video understanding and grounding"]
    asked = all_text(one(command(app, slack, "interests remove diffusion", channel=channel)))
    assert "There is no interest" not in asked and "LLM agents, RLHF and diffusion" in asked
    done = all_text(one(command(app, slack, "interests remove diffusion confirm", channel=channel)))
    assert "Removed 1. *LLM agents, RLHF and diffusion*" in done
    assert [r["text"] for r in module_store.interests(channel)] == ["video understanding and grounding"]
    command(app, slack, "interests add video generation", channel=channel)
    several = all_text(one(command(app, slack, "interests remove video confirm", channel=channel)))
    assert "video understanding and grounding" in several and "video generation" in several
    assert "Removed" not in several and len(module_store.interests(channel)) == 2
