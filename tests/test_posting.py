"""The one posting machine (bot/posting.py) in one process: a post in flight is not started twice.

Two threads of one process share its identity, so the database's claim cannot tell them apart
(each would re-claim "its own" row and post): the Poster's set of posts in flight does."""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone

from slack_sdk import WebClient

from bot.posting import SCHEDULED_EVENT, Post, Poster
from conftest import BOT_TOKEN

CH, KEY = "C1", "reminder:2026-12-03"
NOW = datetime(2026, 12, 3, 15, 0, tzinfo=timezone.utc)


def reminders(fake) -> list[dict]:
    return [m for m in fake.messages(CH) if (m.get("metadata") or {}).get("event_type") == SCHEDULED_EVENT
            and m["metadata"]["event_payload"].get("key") == KEY]


def test_a_post_in_flight_in_this_process_is_not_started_again(store, fake_slack):
    client = WebClient(token=BOT_TOKEN, base_url=fake_slack.api_url)
    poster = Poster("r1")
    building, release = threading.Event(), threading.Event()

    def build(claim):
        building.set()
        assert release.wait(30)
        return {"text": "Reading group at 16:00"}

    post = Post(CH, KEY, "reminder", NOW.date(), build)
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(poster.post_once, client, store, post, NOW, sleep=lambda s: None)
        assert building.wait(30)
        second = poster.post_once(client, store, post, NOW, sleep=lambda s: None)  # the same process, meanwhile
        release.set()
        assert first.result().status == "posted"
    assert second.status == "busy"
    assert len(reminders(fake_slack)) == 1
    # Done, it leaves the machine's hands: asked again, the row answers.
    assert poster.post_once(client, store, post, NOW).status == "already"

