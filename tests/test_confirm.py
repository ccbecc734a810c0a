"""Destructive commands ask first, the Slack way (issue 32.9): `/paper forget-me`, `feed remove <n>`,
`club off` and `interests remove <n>` answer with what they would do and a danger button whose
confirm dialog asks once more; the click does it, as the clicker, with every check run again;
`confirm` typed after the command does it too (the console has no buttons); extra words are refused."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest
from slack_bolt import BoltRequest

from bot import blocks as bk
from bot.app import create_app
from conftest import Clock, block_action_body, dispatch_command, make_deps, make_settings, text_of
from store import HashingEmbedder, Searcher
from store.club import ClubSpec, set_club

CH = "C1"
ADMIN = "UADMIN"
MONDAY = datetime(2026, 11, 30, 8, tzinfo=timezone.utc)


@pytest.fixture
def world(fake_slack, hashing_store):
    settings = make_settings(slack_api_url=fake_slack.api_url, admins=ADMIN)
    deps = make_deps(settings, hashing_store, Searcher(hashing_store, HashingEmbedder()), clock=Clock(MONDAY))
    app = create_app(deps, process_before_response=True)
    fake_slack.add_members(ADMIN, "UANN", "UBOB")
    fake_slack.add_channel(CH)
    return app, fake_slack, hashing_store


def ask(app, fake, text, user):
    return dispatch_command(app, fake, text, user=user, channel=CH)


def danger_button(reply: dict) -> dict:
    """The one button of a confirmation, as Slack receives it."""
    [button] = [e for b in reply["blocks"] if b["type"] == "actions" for e in b["elements"]]
    assert button["action_id"] == bk.ACTION_CONFIRM and button["style"] == "danger"
    dialog = button["confirm"]
    assert dialog["title"]["text"] and dialog["text"]["text"] and dialog["deny"]["text"] == "Cancel"
    assert dialog["style"] == "danger"
    return button


def click(app, fake, button: dict, user: str) -> dict:
    url = fake.new_response_url(channel=CH, user=user)
    body = block_action_body(button["action_id"], button["value"], url, user=user, channel=CH)
    assert app.dispatch(BoltRequest(body=body, mode="socket_mode")).status == 200
    [answer] = fake.responses(url)
    assert answer["replace_original"] is True  # the outcome takes the question's place
    return answer


def test_forget_me_asks_first_and_the_button_or_the_typed_word_does_it(world):
    app, fake, store = world
    store.save_paper("UANN", store.list_papers(limit=1)[0].id, now=MONDAY.timestamp())
    question = ask(app, fake, "forget-me", "UANN")
    shown = text_of(question)
    assert "cannot be undone" in shown and "/paper forget-me confirm" in shown
    assert len(store.saved_papers("UANN")) == 1  # asking changed nothing
    done = click(app, fake, danger_button(question), "UANN")
    assert "Done." in text_of(done) and "reading list" in text_of(done)
    assert store.saved_papers("UANN") == []
    assert "nothing stored about you" in text_of(ask(app, fake, "forget confirm", "UANN"))


def test_forget_with_a_word_after_it_is_refused_and_erases_nothing(world):
    app, fake, store = world
    store.save_paper("UANN", store.list_papers(limit=1)[0].id, now=MONDAY.timestamp())
    for text in ("forget SPIKE", "forget-me SPIKE confirm", "forgetme please"):
        reply = text_of(ask(app, fake, text, "UANN"))
        assert "takes nothing after it: it deletes everything about you" in reply, text
        assert "actions" not in reply
    assert len(store.saved_papers("UANN")) == 1


def test_feed_remove_asks_names_the_feed_and_rechecks_the_clicker(world):
    app, fake, store = world
    store.add_feed(CH, "arxiv", "cs.LG", ADMIN, now=MONDAY.timestamp())
    question = ask(app, fake, "feed remove 1", ADMIN)
    assert "stop following arXiv *cs.LG*" in text_of(question)
    assert len(store.feeds(CH)) == 1
    button = danger_button(question)
    # The click runs the command as the clicker: someone who is not an admin is refused.
    assert "admins" in text_of(click(app, fake, button, "UANN")) and len(store.feeds(CH)) == 1
    assert "Stopped following arXiv *cs.LG*" in text_of(click(app, fake, button, ADMIN))
    assert store.feeds(CH) == []
    # Clicked again (an old copy of the question): the feed is looked for again, nothing else goes.
    assert "does not follow arxiv cs.LG (any more)" in text_of(click(app, fake, button, ADMIN))


def test_the_stop_following_button_removes_the_feed_it_named_after_the_list_changed(world):
    app, fake, store = world
    for target in ("cs.CL", "cs.CV", "cs.LG"):
        store.add_feed(CH, "arxiv", target, ADMIN, now=MONDAY.timestamp())
    question = ask(app, fake, "feed remove 2", ADMIN)
    assert "stop following arXiv *cs.CV*" in text_of(question)
    ask(app, fake, "feed remove 1 confirm", ADMIN)  # cs.CL goes first: cs.CV is now number 1, cs.LG number 2
    assert "Stopped following arXiv *cs.CV*" in text_of(click(app, fake, danger_button(question), ADMIN))
    assert [f["target"] for f in store.feeds(CH)] == ["cs.LG"]


def test_interests_remove_asks_and_only_then_removes(world):
    app, fake, store = world
    ask(app, fake, "interests add graph neural networks", "UANN")
    question = ask(app, fake, "interests remove 1", "UANN")
    assert "*graph neural networks*" in text_of(question)
    assert "/paper interests remove 1 graph neural networks confirm" in text_of(question)
    assert len(store.interests(CH)) == 1
    assert "Removed 1." in text_of(click(app, fake, danger_button(question), "UANN"))
    assert store.interests(CH) == []
    # Someone else's interest: refused before anything is asked.
    ask(app, fake, "interests add diffusion models", "UANN")
    assert "admins" in text_of(ask(app, fake, "interests remove 1", "UBOB"))


def test_interests_remove_takes_the_interest_by_its_text_as_by_its_number(world):
    """`interests remove diffusion models` said "There is no interest diffusion models" while the
    list showed it as number 1; with nothing after remove, "There is no interest (no number)"."""
    app, fake, store = world
    ask(app, fake, "interests add video understanding", "UANN")
    ask(app, fake, "interests add Diffusion Models", "UANN")
    question = ask(app, fake, "interests remove diffusion models", "UANN")
    assert "This would take 2. *Diffusion Models*" in text_of(question)
    assert "/paper interests remove 2 Diffusion Models confirm" in text_of(question)
    assert len(store.interests(CH)) == 2  # asking changed nothing
    assert "Removed 2. *Diffusion Models*" in text_of(click(app, fake, danger_button(question), "UANN"))
    assert [r["text"] for r in store.interests(CH)] == ["video understanding"]
    assert "Removed 1. *video understanding*" in text_of(ask(app, fake, "interests remove VIDEO understanding confirm",
                                                             "UANN"))
    assert "There is no interest diffusion models; this channel has none" in text_of(
        ask(app, fake, "interests remove diffusion models", "UANN"))
    ask(app, fake, "interests add graph neural networks", "UANN")
    empty = text_of(ask(app, fake, "interests remove", "UANN"))
    assert "Which one?" in empty and "`/paper interests remove &lt;number&gt;`" in empty
    assert "(no number)" not in empty and len(store.interests(CH)) == 1


def test_the_remove_button_removes_the_interest_it_asked_about_or_nothing_after_the_list_changed(world):
    app, fake, store = world
    for text in ("graphs", "diffusion models", "robotics"):
        ask(app, fake, f"interests add {text}", "UANN")
    question = ask(app, fake, "interests remove 2", "UANN")
    ask(app, fake, "interests remove 1 confirm", "UANN")  # graphs goes first: robotics is now number 2
    answer = text_of(click(app, fake, danger_button(question), "UANN"))
    assert "Removed 1. *diffusion models*" in answer  # found by its words, not the number it had
    assert [r["text"] for r in store.interests(CH)] == ["robotics"]
    stale = ask(app, fake, "interests remove 1", "UANN")
    ask(app, fake, "interests add graphs", "UANN")
    ask(app, fake, "interests remove 1 confirm", "UANN")  # robotics goes: graphs is now number 1
    assert "nothing was removed" in text_of(click(app, fake, danger_button(stale), "UANN"))
    assert [r["text"] for r in store.interests(CH)] == ["graphs"]


def test_club_off_asks_and_refuses_extra_words(world):
    app, fake, store = world
    set_club(store, CH, ClubSpec(3, 17, 0, "Europe/Berlin"), by=ADMIN, now=MONDAY)
    question = ask(app, fake, "club off", ADMIN)
    assert "Its history stays" in text_of(question) and store.get_club(CH)["active"]
    assert "takes nothing after it" in text_of(ask(app, fake, "club off now", ADMIN))
    assert "is off" in text_of(click(app, fake, danger_button(question), ADMIN))
    assert not store.get_club(CH)["active"]


def test_a_confirm_button_without_a_confirmed_command_says_so_and_changes_nothing(world):
    app, fake, store = world
    paper = store.list_papers(limit=1)[0]
    store.save_paper("UANN", paper.id, now=MONDAY.timestamp())
    url = fake.new_response_url(channel=CH, user="UANN")
    body = block_action_body(bk.ACTION_CONFIRM, "forget-me", url, user="UANN", channel=CH)
    assert app.dispatch(BoltRequest(body=body, mode="socket_mode")).status == 200
    [answer] = fake.responses(url)
    assert "nothing was changed" in text_of(answer)
    assert len(store.saved_papers("UANN")) == 1
