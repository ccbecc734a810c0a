"""`/paper feed add` stores only what its source has, in the source's own spelling: arXiv
categories checked against the taxonomy shipped with paperclub (case folded, so cs.lg is cs.LG),
OpenReview venue ids checked for shape and then asked of OpenReview once, when first added."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest
from hypothesis import given, strategies as st
from slack_sdk import WebClient

from bot.app import create_app
from conftest import BOT_TOKEN, Clock, dispatch_command, make_deps, make_settings, text_of
from fake_sources import FakeSources, make_papers, on_openreview
from store import HashingEmbedder, Searcher
from store.sources import SourceError, Sources, parse_feed
from store.sources.arxiv import _taxonomy


NOW = datetime(2026, 12, 1, 14, 0, tzinfo=timezone.utc)


@pytest.fixture
def world(hashing_store, fake_slack):
    with FakeSources() as src:
        src.notes = on_openreview(make_papers(2, seed=3))
        sources = Sources.create(arxiv_api=src.api, arxiv_rss=src.rss, openreview_api=src.url, sleep=lambda s: None)
        deps = make_deps(make_settings(), hashing_store, Searcher(hashing_store, HashingEmbedder()), slack=None,
                         clock=Clock(NOW), sources=sources)
        app = create_app(deps, client=WebClient(token=BOT_TOKEN, base_url=fake_slack.api_url),
                         process_before_response=True)
        yield app, deps, src, fake_slack
        sources.close()


def test_feed_add_stores_only_real_categories_and_venues_in_their_own_spelling(world):
    app, deps, src, fake = world

    def add(what, channel="C1"):
        return text_of(dispatch_command(app, fake, f"feed add {what}", user="U1", channel=channel))

    assert "Now following arXiv *cs.LG*" in add("arxiv cs.lg")
    assert "already follows arXiv *cs.LG*" in add("arxiv cs.LG")  # cs.lg beside cs.LG is one feed
    assert "Now following arXiv *cs.LG+cs.CV*" in add("arxiv CS.Lg+cs.cv")
    assert "'cs.XYZ' is not an arXiv category" in add("arxiv cs.XYZ")
    assert "Did you mean cs.LG?" in add("arxiv cs.LGG")
    assert "not an arXiv category" in add("arxiv cs.LG+physics.nope")
    for bad in ("a/b/../../c", "ICLR.cc/../../admin", "./x", "a//b", "ICLR.cc"):
        assert "not an OpenReview venue id" in add(f"openreview {bad}"), bad
    assert src.requests == []  # a malformed id is refused without asking anyone
    assert "OpenReview has no papers under 'NoSuch.cc/2026/Conference'" in add("openreview NoSuch.cc/2026/Conference")
    assert [q["limit"] for q in src.calls("/notes")] == ["1"]  # one note asked for, not the venue
    assert "Now following OpenReview *ICLR.cc/2026/Conference*" in add("openreview ICLR.cc/2026/Conference")
    assert "Now following OpenReview *ICLR.cc/2026/Conference*" in add("openreview ICLR.cc/2026/Conference", "C2")
    assert len(src.calls("/notes")) == 2  # checked once, when first added, not again for C2
    src.fail("/notes", 503, times=5)
    assert "couldn't reach OpenReview just now" in add("openreview NeurIPS.cc/2026/Conference")
    assert [f["target"] for f in deps.store.feeds("C1")] == ["cs.LG", "cs.LG+cs.CV", "ICLR.cc/2026/Conference"]


def test_a_feed_target_in_several_words_is_what_is_refused_not_the_kind(world):
    """`feed add arxiv machine learning` said "Name the kind (arxiv or openreview)": it was named."""
    app, deps, src, fake = world

    def add(what):
        return text_of(dispatch_command(app, fake, f"feed add {what}", user="U1", channel="C1"))

    words = add("arxiv machine learning")
    assert "'machine learning' is not an arXiv category (e.g. cs.LG" in words and "Name the kind" not in words
    venue = add("openreview ICLR 2026")
    assert "'ICLR 2026' is not an OpenReview venue id" in venue and "openreview ICLR.cc/2026/Conference`" in venue
    assert "What should this channel follow on arXiv?" in add("arxiv")
    assert "Name the kind (arxiv or openreview)" in add("")
    assert deps.store.feeds("C1") == [] and src.requests == []


def test_every_arxiv_category_in_any_case_is_its_one_spelling():
    for canonical in _taxonomy().values():
        for typed in (canonical, canonical.lower(), canonical.upper(), canonical.swapcase()):
            assert parse_feed("arxiv", typed) == ("arxiv", canonical)


@given(st.text(max_size=20))
def test_anything_else_typed_as_a_category_is_refused_or_a_real_one(text):
    try:
        kind, target = parse_feed("arxiv", text)
    except SourceError as e:
        assert "not an arXiv category" in str(e)
    else:
        assert all(part in _taxonomy().values() for part in target.split("+"))


@given(st.lists(st.sampled_from(["..", ".", "", "ICLR.cc", "2026", "Conference", "-", "a b", "x%2F", "é"]),
                min_size=1, max_size=5).map("/".join))
def test_a_venue_id_with_a_dot_segment_or_an_empty_one_is_refused(venue):
    segments = venue.split("/")
    try:
        parse_feed("openreview", venue)
    except SourceError:
        return
    assert len(segments) > 1 and all(s not in ("", ".", "..") and " " not in s for s in segments)
    assert segments[0] != "-"


@pytest.mark.parametrize("retry_after", ["³", "²⁰", "１", "٣", "Ⅳ"])
def test_a_source_s_retry_after_in_digits_that_are_not_ascii_gets_a_clear_answer(world, retry_after):
    """Numbers from upstream go through the same reader as typed ones (store.text.parse_number)."""
    from bot.later import SORRY

    app, deps, src, fake = world
    src.fail("/api/query", 503, times=5, retry_after=retry_after)
    reply = text_of(dispatch_command(app, fake, "add 2612.00001", user="U1", channel="C1"))
    assert SORRY not in reply
    assert "couldn't get a usable answer from arXiv" in reply or "arXiv has no paper 2612.00001" in reply


def test_an_arxiv_entry_dated_in_digits_that_are_not_ascii_has_no_year_rather_than_an_error():
    from store.sources.arxiv import record

    r = record("2612.00001", title="T", abstract="A study.", authors=["Ann"], categories=["cs.LG"],
               primary="cs.LG", published="²⁰²⁶-12-01T00:00:00Z")
    assert r.year is None
    assert record("2612.00001", title="T", abstract="A study.", authors=[], categories=[], primary=None,
                  published="2026-12-01T00:00:00Z").year == 2026


def test_a_venue_openreview_has_but_with_no_papers_yet_can_be_followed(world):
    """Next year's conference exists on OpenReview long before its accepted papers do: following it
    was refused as "no papers under" it, so a team could not set up its feed ahead of time."""
    from store.sources import poll_feeds

    app, deps, src, fake = world
    src.venues.add("ICLR.cc/2027/Conference")

    def add(what):
        return text_of(dispatch_command(app, fake, f"feed add {what}", user="U1", channel="C1"))

    reply = add("openreview ICLR.cc/2027/Conference")
    assert "Now following OpenReview *ICLR.cc/2027/Conference*" in reply and "no papers yet" in reply
    assert "Now following OpenReview *ICLR.cc/2027/Conference/-/Submission*" in add(
        "openreview ICLR.cc/2027/Conference/-/Submission")
    assert "OpenReview has no papers under 'NoSuch.cc/2027/Conference'" in add("openreview NoSuch.cc/2027/Conference")
    assert [f["target"] for f in deps.store.feeds("C1")] == ["ICLR.cc/2027/Conference",
                                                             "ICLR.cc/2027/Conference/-/Submission"]
    now = NOW.timestamp()
    polled = poll_feeds(deps.store, deps.sources, deps.embedder, now=now)
    assert set(polled.values()) == {"read"}  # an empty venue is a quiet night, not a failure
    src.notes = on_openreview(make_papers(2, seed=8), venueid="ICLR.cc/2027/Conference")
    for n in src.notes:
        n.pdate = NOW
    poll_feeds(deps.store, deps.sources, deps.embedder, now=now + 86400)
    from store.sources import fresh_papers
    assert len(fresh_papers(deps.store, "C1", NOW.date())) == 2
