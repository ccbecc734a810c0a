"""The Slack layer through `app.dispatch` (process_before_response=True), against the fake Slack.

Each test sends what Slack would send (a slash command, a button click, an
event) and checks what reached the fake: the reply a person would read.
"""
from __future__ import annotations

import io
import json
import uuid
import logging
from dataclasses import replace

import pytest
from hypothesis import given, settings as hsettings, strategies as st
from slack_bolt import BoltRequest

from bot import blocks as bk
from bot import home
from bot.app import FEATURES, create_app
from bot.commands import Reply, Subcommand, clean_input
from bot.console import run_console
from bot.deps.build import command_table
from conftest import BOT_TOKEN, TOKEN_SECRETS, Locker, block_action_body, make_deps, make_settings, menu_action_body
from store import HashingEmbedder, Paper, Searcher

# The real model decides which paper a query finds; the store is a SQLite file, then PostgreSQL.
pytestmark = [pytest.mark.slow, pytest.mark.both_backends]

GENE = "Gene expression prediction"
WORDS = "Humans invent new words"
SPEC = "Speculative Decoding (SD)"
TVG = "Temporal Video Grounding (TVG)"


@pytest.fixture(scope="module")
def module_store(request, seed_db, backend, tmp_path_factory):
    from conftest import seeded_location
    from store import open_store

    store = open_store(seeded_location(request, seed_db, backend, tmp_path_factory.mktemp("bot") / "bot.db"))
    yield store
    store.close()


@pytest.fixture(scope="module")
def searcher(module_store, real_embedder):
    from store import Searcher

    s = Searcher(module_store, real_embedder)
    s.warm()
    return s


@pytest.fixture
def slack(module_fake_slack):
    module_fake_slack.reset()
    return module_fake_slack


def make_app(slack, store, searcher, *, features=FEATURES, **changes):
    """The app as `paperclub run` wires it, with `changes` made to its Deps (an extra command...)."""
    settings = make_settings(slack_api_url=slack.api_url)
    # no client: create_app builds the production one, retry handlers included
    deps = make_deps(settings, store, searcher, slack=None)
    return create_app(replace(deps, **changes), process_before_response=True, features=features)


@pytest.fixture
def app(slack, module_store, searcher):
    return make_app(slack, module_store, searcher)


def paper_with(store, start: str) -> Paper:
    return next(p for p in store.iter_papers() if p.abstract.startswith(start))


def dispatch(app, body: dict):
    return app.dispatch(BoltRequest(body=body, mode="socket_mode"))


def command(app, slack, text: str, *, user: str = "U1", channel: str = "C1") -> list[dict]:
    """Run `/paper <text>`; return what was posted to its response_url."""
    url = slack.new_response_url(channel=channel, user=user)
    body = {"command": "/paper", "text": text, "user_id": user, "user_name": user.lower(),
            "channel_id": channel, "channel_name": "general", "team_id": "T1", "api_app_id": "A1",
            "response_url": url, "trigger_id": "1.2.3"}
    resp = dispatch(app, body)
    assert resp.status == 200
    return slack.responses(url)


def click(app, slack, action_id: str, value: str, *, user: str = "U1", channel: str = "C1") -> list[dict]:
    """Click a paper button on an ephemeral message; return what went to its response_url."""
    url = slack.new_response_url(channel=channel, user=user)
    body = block_action_body(action_id, value, url, user=user, channel=channel)
    assert dispatch(app, body).status == 200
    return slack.responses(url)


def event(app, ev: dict, event_id: str | None = None):
    # Every event Slack sends has its own id (the app drops a repeated one, whichever app instance
    # on this module's database saw it first); a test repeats one on purpose only.
    event_id = event_id or f"Ev{uuid.uuid4().hex[:12].upper()}"
    body = {"type": "event_callback", "team_id": "T1", "api_app_id": "A1", "event_id": event_id,
            "event_time": 1, "event": ev}
    return dispatch(app, body)


def all_text(message: dict) -> str:
    """Every piece of text in a message, as one string (mrkdwn as Slack receives it)."""
    return message.get("text", "") + " " + json.dumps(message.get("blocks") or [], ensure_ascii=False)


def buttons(message: dict) -> list[tuple[str, str]]:
    """(action id, paper id) of everything a member can click on the message's cards, in the order
    Slack shows them: each button, then each entry of a card's overflow menu (⋯)."""
    out = []
    for b in message.get("blocks") or []:
        for e in b["elements"] if b["type"] == "actions" else []:
            if e["type"] == "overflow":
                out += [bk.menu_choice(o["value"]) for o in e["options"]]
            else:
                out.append((e["action_id"], e.get("value")))
    return out


def choose(app, slack, option_value: str, *, user: str = "U1", channel: str = "C1") -> list[dict]:
    """Pick an entry of a paper card's overflow menu; return what went to its response_url."""
    url = slack.new_response_url(channel=channel, user=user)
    assert dispatch(app, menu_action_body(option_value, url, user=user, channel=channel)).status == 200
    return slack.responses(url)


def one(responses: list[dict]) -> dict:
    assert len(responses) == 1, responses
    return responses[0]


# -- /paper search ---------------------------------------------------------------------------
def test_search_names_the_right_paper_first_with_buttons(app, slack, module_store):
    reply = one(command(app, slack, "search predicting mRNA levels from DNA sequence"))
    gene = paper_with(module_store, GENE)
    assert reply["response_type"] == "ephemeral"
    first_hit = next(b for b in reply["blocks"] if b.get("block_id", "").startswith("hit-1-"))
    assert first_hit["block_id"] == f"hit-1-{gene.id}"
    assert f"*1. {bk.esc(gene.short_name)}" in first_hit["text"]["text"]
    hits = [b for b in reply["blocks"] if b.get("block_id", "").startswith("hit-")]
    assert len(hits) == 5
    # every result says why it matched and carries the actions for its own paper: Save, For me,
    # Not for me, and a menu with Summary, More like this, Share (C1 has no club: no Nominate)
    assert sum("_why:_" in json.dumps(b) for b in reply["blocks"] if b["type"] == "context") == 5
    assert buttons(reply)[:6] == [(bk.ACTION_SAVE, gene.id), (bk.ACTION_MORE, gene.id), (bk.ACTION_LESS, gene.id),
                                  (bk.ACTION_SUMMARY, gene.id), (bk.ACTION_SIMILAR, gene.id),
                                  (bk.ACTION_SHARE, gene.id)]


def test_search_results_are_compact_cards_without_a_green_button(app, slack):
    reply = one(command(app, slack, "search video grounding"))
    cards = [b for b in reply["blocks"] if b["type"] == "actions"]
    assert len(cards) == 5
    # four things to click per result (Save, For me, Not for me, the menu), none of them `primary`:
    # Slack keeps green for a message's one main action, and five results have none
    assert all(len(b["elements"]) == 4 and b["elements"][-1]["type"] == "overflow" for b in cards)
    assert "primary" not in json.dumps(reply["blocks"])


def test_search_understands_meaning_not_just_words(app, slack, module_store):
    reply = one(command(app, slack, "search people coining fresh vocabulary like doomscrolling"))
    assert reply["blocks"][1]["block_id"].endswith(paper_with(module_store, WORDS).id)


def test_slack_markup_in_the_query_is_cleaned_before_searching(app, slack, module_store):
    reply = one(command(app, slack, "search <@U123> speculative decoding &amp; draft models <#C9|ml> :rocket:"))
    assert f"hit-1-{paper_with(module_store, SPEC).id}" == reply["blocks"][1]["block_id"]
    header = reply["blocks"][0]["text"]["text"]
    assert "speculative decoding & draft models" in header
    assert "U123" not in header and "rocket" not in header


def test_free_text_without_a_subcommand_is_searched_with_a_note(app, slack, module_store):
    reply = one(command(app, slack, "temporal video grounding"))
    assert f"hit-1-{paper_with(module_store, TVG).id}" in json.dumps(reply["blocks"])
    assert "isn't one of my commands" in all_text(reply)


# -- help and unknown subcommands -------------------------------------------------------------
@pytest.mark.parametrize("text", ["", "help", "  HELP  "])
def test_help_lists_every_subcommand_with_an_example(app, slack, text):
    reply = one(command(app, slack, text))
    body = all_text(reply)
    for sub in command_table().values():
        if not sub.hidden:
            assert f"/paper {bk.esc(sub.usage)}" in body
            assert f"/paper {bk.esc(sub.example)}" in body


def test_a_typo_gets_did_you_mean_not_an_error(app, slack):
    reply = one(command(app, slack, "serch diffusion models"))
    assert "Did you mean" in all_text(reply)
    assert "/paper search diffusion models" in all_text(reply)
    assert reply["response_type"] == "ephemeral"


# -- summary / similar ------------------------------------------------------------------------
def test_summary_by_id_shows_that_paper_without_a_guess_note(app, slack, module_store):
    gene = paper_with(module_store, GENE)
    reply = one(command(app, slack, f"summary {gene.id}"))
    body = all_text(reply)
    assert reply["blocks"][0]["type"] == "header" and gene.short_name[:40] in reply["blocks"][0]["text"]["text"]
    assert "Best match" not in body
    assert (bk.ACTION_SIMILAR, gene.id) in buttons(reply) and (bk.ACTION_SHARE, gene.id) in buttons(reply)
    assert (bk.ACTION_SAVE, gene.id) in buttons(reply) and (bk.ACTION_SUMMARY, gene.id) not in buttons(reply)


def test_summary_by_words_says_which_paper_it_picked(app, slack, module_store):
    reply = one(command(app, slack, "summary the paper about draft models accelerating LLM inference"))
    spec = paper_with(module_store, SPEC)
    body = all_text(reply)
    assert "Best match for" in body
    assert (bk.ACTION_SIMILAR, spec.id) in buttons(reply)


def test_summary_by_short_name_is_exact(app, slack, module_store):
    spec = paper_with(module_store, SPEC)
    reply = one(command(app, slack, f"summary {spec.short_name}"))
    assert "Best match" not in all_text(reply)
    assert (bk.ACTION_SIMILAR, spec.id) in buttons(reply)


def test_similar_lists_five_other_papers(app, slack, module_store):
    tvg = paper_with(module_store, TVG)
    reply = one(command(app, slack, f"similar {tvg.id}"))
    ids = [b["block_id"].split("-", 2)[2] for b in reply["blocks"] if b.get("block_id", "").startswith("hit-")]
    assert len(ids) == 5 and tvg.id not in ids
    # the neighbours of a video-grounding paper are video papers
    videos = [p for p in module_store.get_papers(ids) if "video" in p.abstract.lower()]
    assert len(videos) >= 3


# -- bad input never reaches the user as an exception ----------------------------------------------
BAD_INPUTS = [
    "search",
    "search    ",
    "search " + "attention " * 1250,  # 10,000 characters
    "x" * 10_000,
    'search "unbalanced NEAR( title: * ^ -',
    "search '); DROP TABLE papers; --",
    "search \x00\x01\x02\x1b[31m",
    "search 🎉🔥 :tada: :skin-tone-2:",
    "search <@U123> <#C1|general> <!here>",
    "summary",
    "summary 🙂",
    "similar <@U123>",
    "share",
    "&lt;script&gt;alert(1)&lt;/script&gt;",
]


@pytest.mark.parametrize("text", BAD_INPUTS, ids=lambda t: repr(t[:30]))
def test_bad_input_gets_one_friendly_ephemeral_reply(app, slack, module_store, text):
    before = module_store.count_papers()
    reply = one(command(app, slack, text))
    body = all_text(reply)
    assert reply["response_type"] == "ephemeral"
    assert "Traceback" not in body and "Error" not in body and "Sorry, something went wrong" not in body
    assert len(reply["text"]) < 4000
    assert module_store.count_papers() == before


def test_an_unexpected_failure_gets_a_short_apology_and_is_logged(slack, module_store, searcher, caplog):
    def handle_explode(deps, call):
        raise RuntimeError("boom " + BOT_TOKEN)

    explode = Subcommand("explode", handle_explode, usage="explode", example="explode", help="test only",
                         hidden=True)
    app = make_app(slack, module_store, searcher, commands=command_table().with_(explode))
    with caplog.at_level(logging.ERROR):
        reply = one(command(app, slack, "explode"))
    assert "Sorry, something went wrong" in reply["text"]
    assert "boom" not in all_text(reply) and "Traceback" not in all_text(reply)
    assert reply["response_type"] == "ephemeral"
    assert any("boom" in r.getMessage() for r in caplog.records)


def test_an_extension_listener_that_fails_after_ack_still_acks_and_apologises(app, slack):
    @app.action("explode_button")
    def handle_explode_button(ack):
        ack()
        raise RuntimeError("extension bug")

    resp_url = slack.new_response_url()
    body = {"type": "block_actions", "user": {"id": "U1"}, "api_app_id": "A1", "team": {"id": "T1"},
            "channel": {"id": "C1"}, "container": {"type": "message", "channel_id": "C1", "is_ephemeral": True},
            "response_url": resp_url,
            "actions": [{"action_id": "explode_button", "block_id": "b", "value": "v", "type": "button"}]}
    resp = dispatch(app, body)
    assert resp.status == 200  # the Socket Mode adapter only acks a 200
    assert "Sorry, something went wrong" in one(slack.responses(resp_url))["text"]


# -- buttons ------------------------------------------------------------------------------------
def test_summary_and_more_like_this_buttons_answer_like_the_commands(app, slack, module_store):
    gene = paper_with(module_store, GENE)
    summary = one(click(app, slack, bk.ACTION_SUMMARY, gene.id))
    assert summary["replace_original"] is False and summary["response_type"] == "ephemeral"
    assert summary["blocks"] == one(command(app, slack, f"summary {gene.id}"))["blocks"]
    similar = one(click(app, slack, bk.ACTION_SIMILAR, gene.id))
    assert similar["blocks"] == one(command(app, slack, f"similar {gene.id}"))["blocks"]


def test_share_posts_in_the_channel_crediting_the_sharer(app, slack, module_store):
    gene = paper_with(module_store, GENE)
    confirm = one(click(app, slack, bk.ACTION_SHARE, gene.id, user="U7", channel="C5"))
    posted = slack.messages("C5")
    assert len(posted) == 1
    assert "shared by <@U7>" in all_text(posted[0])
    assert bk.esc(gene.short_name) in all_text(posted[0])
    # teammates can save it, give their verdict or open the summary from the shared post; sharing
    # again is not offered, nor nominating (C5 has no reading group)
    assert [a for a, _ in buttons(posted[0])] == [bk.ACTION_SAVE, bk.ACTION_MORE, bk.ACTION_LESS,
                                                  bk.ACTION_SUMMARY, bk.ACTION_SIMILAR]
    assert confirm["response_type"] == "ephemeral" and "Shared" in confirm["text"]


def test_the_menus_entries_answer_exactly_as_their_buttons(app, slack, module_store):
    gene = paper_with(module_store, GENE)
    search = one(command(app, slack, "search predicting mRNA levels from DNA sequence"))
    menu = next(e for b in search["blocks"] if b["type"] == "actions" for e in b["elements"] if e["type"] == "overflow")
    summary = next(o["value"] for o in menu["options"] if o["text"]["text"] == "Summary")
    assert bk.menu_choice(summary) == (bk.ACTION_SUMMARY, gene.id)
    chosen = one(choose(app, slack, summary))
    assert chosen["response_type"] == "ephemeral" and chosen["replace_original"] is False
    assert chosen["blocks"] == one(click(app, slack, bk.ACTION_SUMMARY, gene.id))["blocks"]
    similar = one(choose(app, slack, bk.menu_value(bk.ACTION_SIMILAR, gene.id)))
    assert similar["blocks"] == one(command(app, slack, f"similar {gene.id}"))["blocks"]
    saved = one(choose(app, slack, bk.menu_value(bk.ACTION_SAVE, gene.id), user="UMENU"))
    assert "Saved" in saved["text"] and [r["paper_id"] for r in module_store.saved_papers("UMENU")] == [gene.id]
    shared = one(choose(app, slack, bk.menu_value(bk.ACTION_SHARE, gene.id), user="U7", channel="C9"))
    assert "Shared" in shared["text"] and len(slack.messages("C9")) == 1


def test_a_menu_entry_that_names_nothing_gets_a_friendly_answer(app, slack, module_store):
    gene = paper_with(module_store, GENE)
    for value in (gene.id, "paper_explode|" + gene.id, ""):  # no action; an unknown one; nothing
        reply = one(choose(app, slack, value))
        assert reply["response_type"] == "ephemeral" and "out of date" in reply["text"]
    gone = one(choose(app, slack, bk.menu_value(bk.ACTION_SUMMARY, "nosuchid")))
    assert "no longer in the library" in gone["text"]


def test_share_is_retried_after_a_rate_limit(app, slack, module_store):
    slack.fail("chat.postMessage", status=429, retry_after=1)
    click(app, slack, bk.ACTION_SHARE, paper_with(module_store, SPEC).id, channel="C6")
    assert len(slack.calls("chat.postMessage")) == 2
    assert len(slack.messages("C6")) == 1


def test_share_falls_back_to_the_response_url_when_the_bot_is_not_in_the_channel(app, slack, module_store):
    slack.fail("chat.postMessage", error="not_in_channel")
    spec = paper_with(module_store, SPEC)
    reply = one(click(app, slack, bk.ACTION_SHARE, spec.id, user="U8", channel="C7"))
    assert reply["response_type"] == "in_channel" and "shared by <@U8>" in all_text(reply)
    assert len(slack.messages("C7")) == 1  # Slack posts it through the response_url


def test_a_share_that_meets_a_locked_database_says_it_is_shared_and_is_posted_once(slack, quick_busy_store):
    """The post is out before the store records which paper it holds; a lock held meanwhile by another
    connection is waited out, so the sharer reads "Shared" (not "try again", which would post it twice)
    and reactions on the post count for its paper."""
    store = quick_busy_store
    app = make_app(slack, store, Searcher(store, HashingEmbedder()))
    paper = next(iter(store.iter_papers()))
    with Locker(store).until_retried() as retried:
        replies = click(app, slack, bk.ACTION_SHARE, paper.id, user="U7", channel="C5")
    [posted] = slack.messages("C5")
    assert [r["text"] for r in replies] == [f"Shared *{bk.esc(paper.short_name)}* in <#C5>."]
    assert store.paper_for_message("C5", posted["ts"])["paper_id"] == paper.id
    assert retried, "the record should have met the lock"


def test_a_button_for_a_deleted_paper_says_so(app, slack):
    reply = one(click(app, slack, bk.ACTION_SUMMARY, "nosuchid"))
    assert "no longer in the library" in reply["text"]


# -- events -------------------------------------------------------------------------------------
def test_app_home_explains_the_bot_and_shows_hooks(slack, module_store, searcher):
    def saved_papers(deps, user_id):
        return [bk.section(f"Saved papers of <@{user_id}>: none yet")]

    app = make_app(slack, module_store, searcher, home_sections=(*home.SECTIONS, saved_papers))
    assert event(app, {"type": "app_home_opened", "user": "U3", "tab": "home", "channel": "D1"}).status == 200
    view = slack.home_view("U3")
    text = json.dumps(view)
    assert view["type"] == "home"
    assert "/paper search" in text and f"{module_store.count_papers()} papers" in text
    assert "Saved papers of <@U3>" in text
    # What is the member's comes first; help (2,000+ characters) comes after it, not before.
    assert text.index("Your reading list") < text.index("How to use")
    assert text.index("Saved papers of <@U3>") < text.index("How to use")


def test_a_broken_home_hook_does_not_blank_the_home_tab(slack, module_store, searcher):
    def broken(deps, user_id):
        raise ValueError("no table yet")

    app = make_app(slack, module_store, searcher, home_sections=(*home.SECTIONS, broken))
    event(app, {"type": "app_home_opened", "user": "U4", "tab": "home", "channel": "D1"})
    assert "/paper search" in json.dumps(slack.home_view("U4"))


def test_a_redelivered_event_is_handled_once(app, slack):
    ev = {"type": "app_home_opened", "user": "U5", "tab": "home", "channel": "D1"}
    assert event(app, ev, event_id="EvDUP").status == 200
    assert event(app, ev, event_id="EvDUP").status == 200
    assert len(slack.calls("views.publish")) == 1


def test_an_extension_listener_for_a_subscribed_event_is_not_shadowed(slack, module_store, searcher):
    seen = []

    def register(app, deps):
        @app.event("reaction_added")
        def handle_reaction_added(event):
            seen.append(event["reaction"])

    app = make_app(slack, module_store, searcher, features=(register, *FEATURES))
    event(app, {"type": "reaction_added", "user": "U1", "reaction": "eyes",
                "item": {"type": "message", "channel": "C1", "ts": "1.1"}}, event_id="EvEXT")
    assert seen == ["eyes"]


@pytest.mark.parametrize("ev", [
    {"type": "reaction_added", "user": "U1", "reaction": "thumbsup", "item_user": "U2",
     "item": {"type": "message", "channel": "C1", "ts": "1.1"}},
    {"type": "reaction_removed", "user": "U1", "reaction": "thumbsup",
     "item": {"type": "message", "channel": "C1", "ts": "1.1"}},
    {"type": "member_joined_channel", "user": "W1", "channel": "C1", "channel_type": "C", "team": "T1"},
], ids=lambda e: e["type"])
def test_every_subscribed_event_has_a_listener(app, ev):
    assert event(app, ev, event_id="Ev" + ev["type"]).status == 200


# -- input cleaning and Block Kit limits (pure) -------------------------------------------------------
@pytest.mark.parametrize("raw, clean", [
    ("video &amp; audio &lt;b&gt;", "video & audio <b>"),
    ("<@U123> diffusion <@U9|ann>", "diffusion"),
    ("graphs <#C1|general> <!here> <!subteam^S1|@ml>", "graphs"),
    ("see <https://arxiv.org/abs/1|arxiv> now", "see arxiv now"),
    ("<https://x.org/a?b=1&amp;c=2>", "https://x.org/a?b=1&c=2"),
    ("fast :rocket: models 🚀👍🏽", "fast models"),
    ("tab\tand\x00null\x1b", "tab and null"),
    ("time 10:30:00", "time 10:30:00"),
    ("*diffusion* `models` (_video_) ~x~", "diffusion models (video) x"),
    ("snake_case rJx_bJeHFPS https://x.org/_a_/b 2*3*4", "snake_case rJx_bJeHFPS https://x.org/_a_/b 2*3*4"),
])
def test_clean_input(raw, clean):
    assert clean_input(raw) == clean


def test_paper_text_is_escaped_in_every_block():
    paper = Paper(id="abc123", short_name="A&B <Net>", headline="Beats <SOTA> & more",
                  abstract="We show x < y & y > z. " * 3, collection="ICLR 2026", year=2026,
                  url="https://x.org/?a=1&b=2", code_urls=["https://github.com/a/<b>"])
    text = json.dumps([b.to_dict() for b in bk.summary_blocks(paper) + bk.shared_blocks(paper, "U1")])
    assert "A&amp;B &lt;Net&gt;" in text and "x &lt; y &amp; y &gt; z" in text
    mrkdwn = [t["text"] for b in bk.summary_blocks(paper) for t in _texts(b.to_dict()) if t["type"] == "mrkdwn"]
    assert all("<Net>" not in t and "<SOTA>" not in t for t in mrkdwn)


def _texts(block: dict):
    for key in ("text",):
        if isinstance(block.get(key), dict):
            yield block[key]
    for f in block.get("fields") or []:
        yield f
    for e in block.get("elements") or []:
        if e.get("type") in ("mrkdwn", "plain_text"):
            yield e


def test_summary_points_render_as_labelled_fields_with_the_code_link_clickable():
    paper = Paper(id="p9", short_name="Net", headline="h", abstract="A. B.")
    points = {"problem": "Slow <inference>.", "approach": None, "results": "2x faster.",
              "code": "https://github.com/a/b?x=1&y=2"}
    fields = next(b.to_dict()["fields"] for b in bk.summary_blocks(paper, tldr="t", points=points)
                  if b.type == "section" and b.fields)
    assert [f["text"].split("\n")[0] for f in fields] == ["*Problem*", "*Results*", "*Code*"]
    assert "Slow &lt;inference&gt;." in fields[0]["text"]
    assert "<https://github.com/a/b?x=1&amp;y=2|github.com/a/b?x=1&amp;y=2>" in fields[2]["text"]


def test_long_abstracts_are_cut_at_a_sentence_boundary():
    sentences = [f"Sentence number {i} says something about models & data." for i in range(200)]
    paper = Paper(id="long1", short_name="Long", headline="h", abstract=" ".join(sentences))
    section = next(b.to_dict() for b in bk.summary_blocks(paper) if b.type == "section")
    text = section["text"]["text"]
    assert len(text) <= bk.SECTION_TEXT
    assert text.endswith("data. …")


_weird = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=6000)


@hsettings(max_examples=60, deadline=None)
@given(name=_weird, headline=_weird, abstract=_weird, why=_weird)
def test_blocks_always_fit_slack_limits(name, headline, abstract, why):
    paper = Paper(id="p1", short_name=name or "x", headline=headline, abstract=abstract,
                  collection=name[:300], url="https://e.org/" + name[:50], code_urls=[abstract[:3000]])

    class Hit:
        pass

    hit = Hit()
    hit.paper, hit.why = paper, why
    for blocks in (bk.summary_blocks(paper, tldr=headline, points={"problem": abstract, "code": why}),
                   bk.results_blocks(headline, [hit] * 20, note=why), bk.shared_blocks(paper, "U1", tldr=abstract)):
        assert len(blocks) <= bk.MAX_MESSAGE_BLOCKS
        for b in blocks:
            b.to_dict()  # raises SlackObjectFormationError on any limit
    Reply(text=bk.esc(abstract), blocks=bk.results_blocks(name, [hit])).to_message()


# -- the console runs the same handlers -----------------------------------------------------------
def test_console_answers_piped_lines_like_slack(module_store, real_embedder, capsys):
    out = io.StringIO()
    lines = io.StringIO("/paper search predicting mRNA levels from DNA sequence\nhelp\nserch x\n"
                        "summary " + paper_with(module_store, GENE).id + "\n")
    run_console(make_settings(), module_store, real_embedder, stdin=lines, out=out)
    text = out.getvalue()
    gene = paper_with(module_store, GENE)
    assert f"1. {gene.short_name}" in text
    assert f"save {gene.id} (or for-me, not-for-me, summary, similar, share)" in " ".join(text.split())
    assert "/paper search <words>" in text
    assert "Did you mean" in text
    assert "&amp;" not in text and "&lt;" not in text
    assert not any(s in text for s in TOKEN_SECRETS)


# -- concurrent query encodes share a forward pass ------------------------------------------------
class SlowEmbedder:
    """Weightless, slow enough that concurrent callers overlap; counts forward passes."""

    name, dim = "slow-hashing", 256

    def __init__(self, fail: bool = False):
        from store import HashingEmbedder

        self.inner, self.fail, self.passes = HashingEmbedder(), fail, 0

    def encode(self, texts, *, progress=False):
        import time

        self.passes += 1
        time.sleep(0.1)
        if self.fail:
            raise RuntimeError("model exploded")
        return self.inner.encode(texts)


def _encode_concurrently(embedder, texts):
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(len(texts)) as pool:
        return list(pool.map(lambda t: embedder.encode([t]), texts))


def test_concurrent_queries_are_encoded_together_and_each_gets_its_own_vector():
    import numpy as np

    from bot.runner import BatchingEmbedder
    from store import HashingEmbedder

    slow = SlowEmbedder()
    texts = [f"query number {i} about topic {i * 7}" for i in range(20)]
    vectors = _encode_concurrently(BatchingEmbedder(slow), texts)
    expected = HashingEmbedder().encode(texts)
    for got, want in zip(vectors, expected):
        assert got.shape == (1, 256) and np.allclose(got[0], want)
    assert slow.passes <= 3  # one pass for the first caller, then the rest together


def test_a_failed_batch_fails_every_caller_in_it():
    from bot.runner import BatchingEmbedder

    embedder = BatchingEmbedder(SlowEmbedder(fail=True))
    with pytest.raises(RuntimeError, match="model exploded"):
        _encode_concurrently(embedder, ["a", "b", "c"])
    with pytest.raises(RuntimeError):  # and it is not left stuck for the next caller
        embedder.encode(["d"])


def test_cards_never_repeat_the_short_name():
    from store.parse import parse_abstract
    parsed = parse_abstract("We propose CoVoGAN, a controllable video generative adversarial network that "
                            "disentangles motion from appearance. CoVoGAN beats prior video GANs on two benchmarks.")
    assert parsed.headline.startswith("CoVoGAN: ")
    paper = Paper(id="cv1", short_name=parsed.short_name, headline=parsed.headline, abstract=parsed.text)
    blocks = (bk.summary_blocks(paper) + bk.shared_blocks(paper, "U1") + [bk.home_saved_block(paper)])
    text = json.dumps([b.to_dict() for b in blocks])
    assert "CoVoGAN" in text and "CoVoGAN: CoVoGAN" not in text and "CoVoGAN*: CoVoGAN" not in text
    assert "CoVoGAN: CoVoGAN" not in bk.digest_text(type("Pick", (), {"exploration": False})(), paper)
