"""Slow commands are not silent (issue 32.12): `/paper add` answers its ack at once with what it is
fetching; an arXiv whose name does not resolve, or that refuses the connection, is not retried
for half a minute; and an id arXiv does not know is said once."""
from __future__ import annotations

import json
import socket

import pytest
from slack_bolt import BoltRequest

from bot.app import create_app
from conftest import Clock, make_deps, make_settings, text_of
from fake_sources import FakeSources, make_papers
from store import HashingEmbedder, Searcher
from store.sources import Sources

CH = "C1"


def closed_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def slash(app, fake, text: str) -> tuple[str, list[dict]]:
    """`/paper <text>`: what the ack showed at once, and the replies that followed."""
    url = fake.new_response_url(channel=CH, user="U1")
    body = {"command": "/paper", "text": text, "user_id": "U1", "user_name": "u1", "channel_id": CH,
            "channel_name": "general", "team_id": "T1", "api_app_id": "A1", "response_url": url,
            "trigger_id": "1.2.3"}
    response = app.dispatch(BoltRequest(body=body, mode="socket_mode"))
    assert response.status == 200
    # Bolt sends a text-only ack as that text (Socket Mode wraps it in {"text": ...} for Slack).
    ack = json.loads(response.body).get("text", "") if response.body.startswith("{") else response.body
    return ack, fake.responses(url)


def bot_with(fake_slack, hashing_store, sources):
    deps = make_deps(make_settings(slack_api_url=fake_slack.api_url), hashing_store,
                     Searcher(hashing_store, HashingEmbedder()), clock=Clock(), sources=sources)
    return create_app(deps, process_before_response=True)


@pytest.mark.parametrize("arxiv", ["http://arxiv.invalid/api/query", "http://127.0.0.1:{port}/api/query"],
                         ids=["name does not resolve", "connection refused"])
def test_add_with_arxiv_unreachable_says_so_at_once_and_does_not_back_off(fake_slack, hashing_store, arxiv):
    waits: list[float] = []
    sources = Sources.create(arxiv_api=arxiv.format(port=closed_port()), sleep=waits.append)
    app = bot_with(fake_slack, hashing_store, sources)
    try:
        ack, replies = slash(app, fake_slack, "add 2501.01234")
    finally:
        sources.close()
    assert ack == "Fetching 2501.01234 from arXiv…"
    [reply] = replies
    assert "couldn't get a usable answer from arXiv" in text_of(reply) and "Try again" in text_of(reply)
    assert "help" not in text_of(reply)  # a moment's outage, not a misuse: no pointer to the manual
    assert waits == [] and sources.arxiv_fetcher.requests == 1  # no 2 + 4 + 8 + 16 s of back-off


def test_an_id_arxiv_does_not_know_is_said_once(fake_slack, hashing_store):
    with FakeSources() as fake_src:
        fake_src.papers = make_papers(2)
        sources = Sources.create(arxiv_api=fake_src.api, sleep=lambda s: None)
        app = bot_with(fake_slack, hashing_store, sources)
        ack, replies = slash(app, fake_slack, "add 9912.99999")
        sources.close()
    assert ack == "Fetching 9912.99999 from arXiv…"
    [reply] = replies
    shown = [b for b in reply["blocks"] if "arXiv has no paper 9912.99999." in json.dumps(b)]
    assert len(shown) == 1 and "arXiv has no paper" not in ack


def test_quick_commands_ack_without_a_line(fake_slack, hashing_store):
    app = bot_with(fake_slack, hashing_store, None)
    for text in ("help", "search video", "add", "add not-an-id", "feed", "feed remove 1"):
        ack, _ = slash(app, fake_slack, text)
        assert ack == "", text
    assert slash(app, fake_slack, "feed add arxiv cs.LG")[0] == "Checking arXiv for *cs.LG*…"


def test_a_server_error_is_still_retried_with_back_off(fake_slack, hashing_store):
    with FakeSources() as fake_src:
        fake_src.papers = make_papers(2)
        fake_src.fail("/api/query", status=503, times=2)
        waits: list[float] = []
        sources = Sources.create(arxiv_api=fake_src.api, sleep=waits.append)
        app = bot_with(fake_slack, hashing_store, sources)
        ack, [reply] = slash(app, fake_slack, f"add {fake_src.papers[0].arxiv_id}")
        sources.close()
    assert "New: added from arXiv" in text_of(reply)
    assert len(waits) >= 2  # 503 heals in seconds: waited, asked again


def test_club_files_say_at_once_that_they_are_being_made(fake_slack, hashing_store):
    """`club map` draws a picture and `club export` writes two files, uploaded to Slack before the reply:
    their acks say so at once; the club's other words answer quickly and ack without a line."""
    app = bot_with(fake_slack, hashing_store, None)
    assert slash(app, fake_slack, "club map")[0] == "Drawing the reading group's map…"
    assert slash(app, fake_slack, "club EXPORT")[0] == "Uploading the reading group's reading list…"
    for text in ("club", "club history", "club join", "club away 2026-12-10"):
        assert slash(app, fake_slack, text)[0] == "", text
