"""The paper of the day as a team lives with it over weeks: a paper that comes back under a new
id, a schedule changed after the day's post, a bot removed from its channel and invited back.

Each runs the real scheduler's jobs (DailyService.fire and its sweep) with an explicit clock
against the fake Slack, on a SQLite file and on PostgreSQL."""
from __future__ import annotations

import re
import time
from datetime import datetime, timezone

import pytest

from bot.posting import EVENT_TYPE
from bot.scheduler import DailyService
from conftest import dispatch_command, make_deps, make_settings
from store import HashingEmbedder, Searcher
from store.ingest import Record, ingest_records

pytestmark = pytest.mark.both_backends

CH = "C1"
UTC = timezone.utc


def daily_posts(fake, channel: str = CH) -> list[dict]:
    return [m for m in fake.messages(channel) if (m.get("metadata") or {}).get("event_type") == EVENT_TYPE]


def posted_ids(fake) -> list[str]:
    return [m["metadata"]["event_payload"]["paper_id"] for m in daily_posts(fake)]


@pytest.fixture
def deps(fake_slack, hashing_store):
    settings = make_settings(slack_api_url=fake_slack.api_url, timezone="UTC")
    return make_deps(settings, hashing_store, Searcher(hashing_store, HashingEmbedder()))


@pytest.fixture
def app(deps):
    from bot.app import create_app

    return create_app(deps, process_before_response=True)


@pytest.fixture
def service(deps):
    daily = DailyService(deps)
    daily.sleep = lambda seconds: None
    yield daily
    daily.shutdown()


def command(app, fake, text: str, *, user: str = "U1") -> dict:
    return dispatch_command(app, fake, text, user=user, channel=CH)


def at(service, day: int, hour: int = 9, minute: int = 0) -> datetime:
    service.clock.now = datetime(2024, 6, day, hour, minute, tzinfo=UTC)
    return service.clock.now


# -- never repeated ------------------------------------------------------------------------------
def test_the_same_paper_ingested_again_under_a_new_id_is_not_the_paper_of_the_day_again(
        app, fake_slack, service, hashing_store):
    """The bundled copy of CaReBench (no title) was posted; the next day its arXiv copy, with a
    title and one sentence of the abstract reworded, came in as a new paper and was posted again."""
    at(service, 2, 12)
    command(app, fake_slack, "interests add video understanding")
    command(app, fake_slack, "schedule 09:00 UTC")
    at(service, 3)
    first = service.fire(CH)
    assert first.status == "posted"
    paper = hashing_store.get_paper(first.paper_id)
    sentences = re.split(r"(?<=[.!?])\s+", paper.abstract)
    arxiv = Record(abstract=" ".join(sentences[:-1] + ["Code and data are released."]),
                   title=f"{paper.short_name}: a benchmark, its arXiv version", id="arXiv:2501.00513",
                   url="https://arxiv.org/abs/2501.00513v2", venue="arXiv cs.CV", year=2025, source="arxiv")
    assert ingest_records(hashing_store, [arxiv], service.deps.searcher.embedder, now=time.time()).added == 1

    for day in (4, 5, 6):
        at(service, day)
        assert service.fire(CH).status == "posted"
    ids = posted_ids(fake_slack)
    assert len(ids) == 4 and len(set(ids)) == 4
    titles = [hashing_store.get_paper(pid).title or "" for pid in ids]
    assert not any("arXiv version" in t for t in titles), "the same paper was posted twice"
