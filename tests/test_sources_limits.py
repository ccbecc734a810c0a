"""Untrusted upstreams: every request has a total deadline and a size cap, redirects stay on the
source's host, arXiv's spacing holds across processes, and a bad answer is a SourceError for its
feed alone. Against the local fakes of the real shapes (tests/fake_sources.py)."""
from __future__ import annotations

import json
import resource
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone

import pytest

from fake_llm import FakeLLM
from fake_sources import FakeSources, make_papers, on_openreview
from store import HashingEmbedder, open_store
from store.llm import LLMClient, LLMConfig, LLMError
from store.sources import Sources, SourceError, add_paper, add_papers, harvest_openreview, poll_feeds
from store.sources.http import Fetcher

NOW = datetime(2026, 12, 1, 2, 0, tzinfo=timezone.utc).timestamp()
EMB = HashingEmbedder()
VENUE = "ICLR.cc/2026/Conference"


@pytest.fixture
def fake():
    with FakeSources() as f:
        f.papers = make_papers(5)
        f.notes = on_openreview(make_papers(3, seed=3))
        yield f


def sources_for(fake, **kw) -> Sources:
    return Sources.create(arxiv_api=fake.api, arxiv_rss=fake.rss, openreview_api=fake.url,
                          sleep=lambda s: None, **kw)


@pytest.fixture
def db(tmp_path):
    s = open_store(tmp_path / "p.db")
    yield s
    s.close()


# -- 2. a total deadline --------------------------------------------------------------------------
def test_a_source_dripping_one_byte_at_a_time_is_cut_at_the_deadline_not_per_read(fake, db):
    """Each byte comes well within the per-read timeout; the whole page would take ~100 s."""
    fake.fail("/api/query", drip=0.05, times=5)
    src = sources_for(fake, timeout=1.0, retries=0)
    started = time.monotonic()
    with pytest.raises(SourceError, match="within 1 s"):
        add_paper(db, src, ("arxiv", fake.papers[0].arxiv_id), EMB, now=NOW)
    took = time.monotonic() - started
    src.close()
    assert took < 3.0, f"held {took:.1f} s by a 1 s deadline"
    assert len(fake.calls("/api/query")) == 1  # too slow is not retried: it would be as slow again
    assert db.count_papers() == 0


def test_pasted_links_wait_out_one_openreview_timeout_not_one_per_link(fake, db):
    """Three OpenReview links and an arXiv one pasted while OpenReview drips: the arXiv paper comes,
    the first OpenReview link runs out its deadline, and the others are not asked (each would wait as
    long: before, a batch of such links held every card in it for a deadline per link)."""
    fake.fail("/notes", drip=0.5, times=3)
    src = sources_for(fake, timeout=1.0, retries=0)
    refs = [("openreview", n.forum) for n in fake.notes] + [("arxiv", fake.papers[0].arxiv_id)]
    started = time.monotonic()
    out = add_papers(db, src, refs, EMB, now=NOW)
    took = time.monotonic() - started
    src.close()
    assert out[refs[-1]].new and all(isinstance(out[r], SourceError) for r in refs[:-1])
    assert len(fake.calls("/notes")) == 1 and took < 2.5, f"{len(fake.calls('/notes'))} asked in {took:.1f} s"


def test_the_llm_call_has_the_same_total_deadline():
    """The model server answers in drips: the summary falls back instead of waiting on."""
    with FakeLLM() as server:
        server.drip = 0.05
        llm = LLMClient(LLMConfig(url=server.url, model="m", timeout=1.0))
        started = time.monotonic()
        with pytest.raises(LLMError, match="no answer within 1 s"):
            llm.chat([{"role": "user", "content": "hi"}])
        assert time.monotonic() - started < 3.0


# -- 4. a size cap ---------------------------------------------------------------------------------
def test_a_100_mb_page_is_refused_at_the_cap_without_reading_it_whole(fake, db):
    fake.fail("/api/query", size=100_000_000)
    src = sources_for(fake, retries=0)
    src.arxiv_fetcher.max_bytes = 2_000_000
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(SourceError, match="cap"):
        add_paper(db, src, ("arxiv", fake.papers[0].arxiv_id), EMB, now=NOW)
    grew_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024
    src.close()
    assert fake.sent < 20_000_000  # we stopped reading; the server did not get to send it all
    assert grew_mb < 50
    assert db.count_papers() == 0


def test_a_page_announcing_more_than_the_cap_is_refused_before_its_body(fake, db):
    src = sources_for(fake, retries=0)
    src.openreview_fetcher.max_bytes = 100  # the real notes page is larger: its Content-Length says so
    with pytest.raises(SourceError, match="cap"):
        harvest_openreview(db, src, VENUE, EMB, now=NOW)
    src.close()
    assert "cap" in db.source_state(f"openreview:{VENUE}")["last_error"]


# -- 5. redirects ------------------------------------------------------------------------------------
def test_a_redirect_to_another_host_is_not_followed(fake, db):
    with FakeSources() as elsewhere:
        elsewhere.papers = fake.papers
        fake.fail("/api/query", location=elsewhere.api + "?id_list=" + fake.papers[0].arxiv_id)
        src = sources_for(fake, retries=0)
        with pytest.raises(SourceError, match="another host"):
            add_paper(db, src, ("arxiv", fake.papers[0].arxiv_id), EMB, now=NOW)
        src.close()
        assert elsewhere.requests == []


def test_a_redirect_within_the_sources_host_is_followed(fake, db):
    fake.fail("/api/query", location=fake.api + "?id_list=" + fake.papers[0].arxiv_id)
    src = sources_for(fake, retries=0)
    added = add_paper(db, src, ("arxiv", fake.papers[0].arxiv_id), EMB, now=NOW)
    src.close()
    assert added is not None and added.new and len(fake.calls("/api/query")) == 2


def test_a_move_from_http_to_https_on_the_same_host_is_followed_and_nothing_else():
    """A source configured as http:// that moved to https:// (a common 301) is still read."""
    import httpx

    def serve(request: httpx.Request) -> httpx.Response:
        if request.url.scheme == "http":
            return httpx.Response(301, headers={"Location": str(request.url.copy_with(scheme="https"))})
        if request.url.host == "export.arxiv.org":
            return httpx.Response(200, text="ok")
        raise AssertionError(f"followed to {request.url}")

    f = Fetcher(transport=httpx.MockTransport(serve), retries=0)
    assert f.get("http://export.arxiv.org/api/query").text == "ok"
    g = Fetcher(transport=httpx.MockTransport(lambda r: httpx.Response(
        302, headers={"Location": "https://export.arxiv.org.evil.test/api/query"})), retries=0)
    with pytest.raises(SourceError, match="another host"):
        g.get("https://export.arxiv.org/api/query")


# -- 6. arXiv's spacing across processes ---------------------------------------------------------------
class Wall:
    """The epoch clock every process reads (one machine): moves only when someone sleeps."""

    def __init__(self):
        self.t = NOW
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.sleeps.append(round(s, 6))
        self.t += s


def test_two_processes_on_one_database_keep_arxivs_3_seconds_between_them(fake, store_url):
    """Two `paperclub` processes (two stores on one database, two clients) asking arXiv in turn: each
    request waits for the other's, where each used to keep only its own clock."""
    wall = Wall()
    stores = [open_store(store_url), open_store(store_url)]
    clients = [Sources.create(arxiv_api=fake.api, arxiv_rss=fake.rss, openreview_api=fake.url, store=s,
                              clock=wall, sleep=wall.sleep, wall=wall) for s in stores]
    for turn in range(6):
        clients[turn % 2].arxiv_fetcher.get(fake.api, {"id_list": fake.papers[0].arxiv_id})
    for c in clients:
        c.close()
    for s in stores:
        s.close()
    assert len(fake.calls("/api/query")) == 6
    assert wall.sleeps == [3.0] * 5  # every request after the first waited arXiv's 3 s, whoever sent it


def test_slots_reserved_at_once_from_two_stores_are_all_3_seconds_apart(store_url):
    stores = [open_store(store_url), open_store(store_url)]
    with ThreadPoolExecutor(8) as pool:
        slots = sorted(pool.map(lambda i: stores[i % 2].reserve_slot("arxiv", interval=3.0, now=NOW),
                                range(16)))
    for s in stores:
        s.close()
    assert slots[0] == NOW
    assert [round(b - a, 6) for a, b in zip(slots, slots[1:], strict=False)] == [3.0] * 15


def test_a_slot_long_past_does_not_delay_the_next_request(store):
    assert store.reserve_slot("arxiv", interval=3.0, now=NOW) == NOW
    assert store.reserve_slot("arxiv", interval=3.0, now=NOW + 60) == NOW + 60
    assert store.reserve_slot("openreview", interval=1.0, now=NOW + 60) == NOW + 60  # per service


def test_a_slot_a_fast_clock_left_far_ahead_does_not_stall_every_process(store):
    """A host whose clock ran a day fast asked once: the others do not wait a day for arXiv."""
    assert store.reserve_slot("arxiv", interval=3.0, now=NOW + 86_400) == NOW + 86_400
    assert store.reserve_slot("arxiv", interval=3.0, now=NOW) == NOW
    assert store.reserve_slot("arxiv", interval=3.0, now=NOW) == NOW + 3.0


# -- 7. a bad answer is that feed's error ----------------------------------------------------------------
BAD_NOTES = {
    "nested too deep": "[" * 100_000 + "]" * 100_000,
    "a list for the page": json.dumps([{"notes": []}]),
    "a list for a note's content": json.dumps({"notes": [{"id": "abcdEFGH12", "content": ["x"]}], "count": 1}),
    "a list for a field": json.dumps({"notes": [{"id": "abcdEFGH12", "forum": "abcdEFGH12",
                                                 "content": {"abstract": {"value": ["x"]},
                                                             "authors": {"value": {"a": 1}}}}], "count": 1}),
    "a forum that is not an id": json.dumps({"notes": [{"forum": {"x": 1}, "content": {
        "abstract": {"value": "A real abstract."}}}], "count": 1}),
}


@pytest.mark.parametrize("shape", sorted(BAD_NOTES))
def test_an_openreview_answer_of_the_wrong_shape_is_a_clear_source_error(fake, db, shape):
    fake.fail("/notes", body=BAD_NOTES[shape])
    src = sources_for(fake)
    try:
        harvest_openreview(db, src, VENUE, EMB, now=NOW)
    except SourceError:
        assert db.source_state(f"openreview:{VENUE}")["last_error"]
    else:  # an unreadable note is skipped, never half-stored
        assert all(p.abstract != "x" for p in db.iter_papers())
    src.close()


def test_paper_add_with_a_deeply_nested_answer_is_a_source_error(fake, db):
    fake.fail("/notes", body=BAD_NOTES["nested too deep"])
    src = sources_for(fake)
    with pytest.raises(SourceError, match="nested too deep"):
        add_paper(db, src, ("openreview", fake.notes[0].forum), EMB, now=NOW)
    src.close()


def test_one_bad_feed_does_not_stop_the_next_and_both_are_recorded(fake, db):
    fake.notes += on_openreview(make_papers(2, seed=5), venueid="NeurIPS.cc/2026/Conference")
    db.add_feed("C1", "openreview", VENUE, "U1", now=NOW)
    db.add_feed("C1", "openreview", "NeurIPS.cc/2026/Conference", "U1", now=NOW)
    # ICLR sorts first; its page is a list where an object belongs, inside a note's content
    fake.fail("/notes", body=BAD_NOTES["a list for a note's content"], when=lambda q: "ICLR" in str(q))
    src = sources_for(fake)
    out = poll_feeds(db, src, EMB, now=NOW)
    src.close()
    assert out == {("openreview", VENUE): "failed", ("openreview", "NeurIPS.cc/2026/Conference"): "read"}
    assert any("NeurIPS" in str(q) for q in fake.calls("/notes"))
    assert db.source_state(f"openreview:{VENUE}")["last_error"]
    assert db.source_state("openreview:NeurIPS.cc/2026/Conference")["last_success"] == NOW
    assert db.count_papers() == 2


def test_a_feed_failing_on_our_side_is_recorded_and_the_sweep_goes_on(fake, db, monkeypatch):
    """Not an upstream fault: whatever escapes one feed's poll is that feed's error."""
    db.add_feed("C1", "arxiv", "cs.LG", "U1", now=NOW)
    db.add_feed("C1", "openreview", VENUE, "U1", now=NOW)
    fake.listings["cs.LG"] = ([("new", fake.papers[0])], datetime(2026, 11, 30, 1, 0, tzinfo=timezone.utc))
    import store.sources.arxiv as arxiv

    def broken(*a, **kw):
        raise ZeroDivisionError("a bug")
    monkeypatch.setattr(arxiv, "parse_rss", broken)
    src = sources_for(fake)
    out = poll_feeds(db, src, EMB, now=NOW)
    src.close()
    assert out[("arxiv", "cs.LG")] == "failed" and out[("openreview", VENUE)] == "read"
    assert "ZeroDivisionError" in db.source_state("arxiv-rss:cs.LG")["last_error"]


def test_fetcher_alone_refuses_a_redirect_elsewhere_without_retrying(fake):
    f = Fetcher(retries=3, sleep=lambda s: None)
    fake.fail("/api/query", location="http://127.0.0.2:9/api/query", times=4)
    with pytest.raises(SourceError, match="another host"):
        f.get(fake.api)
    f.close()
    assert len(fake.calls("/api/query")) == 1


# -- 1. "not found" remembered, for a while -------------------------------------------------------------
def test_an_unknown_id_pasted_again_is_asked_again_only_once_its_answer_is_stale(fake, db):
    src = sources_for(fake)
    src.misses.ttl = 3600.0
    ref = ("arxiv", "2612.99999")
    for at in (NOW, NOW + 60, NOW + 3599):
        assert add_papers(db, src, [ref], EMB, now=at)[ref] is None
    assert len(fake.calls("/api/query")) == 1
    fake.papers.append(make_papers(1, prefix="2612", seed=8)[0])  # arXiv has it now
    fake.papers[-1].arxiv_id = "2612.99999"
    added = add_papers(db, src, [ref], EMB, now=NOW + 3600)[ref]
    src.close()
    assert added is not None and added.new and len(fake.calls("/api/query")) == 2


def test_paper_add_asks_again_for_a_paper_arxiv_did_not_have_a_moment_ago(fake, db):
    """Added before its announcement, then again once it is out: `/paper add` asks each time (a pasted
    link would have been answered "no such paper" from memory for hours)."""
    src = sources_for(fake)
    assert add_paper(db, src, ("arxiv", "2612.99998"), EMB, now=NOW) is None
    fake.papers.append(make_papers(1, prefix="2612", seed=9)[0])
    fake.papers[-1].arxiv_id = "2612.99998"
    added = add_paper(db, src, ("arxiv", "2612.99998"), EMB, now=NOW + 60)
    src.close()
    assert added is not None and added.new and len(fake.calls("/api/query")) == 2


def test_the_not_found_memory_is_bounded(fake, db):
    src = sources_for(fake)
    src.misses.size = 2
    for ident in ("2612.90001", "2612.90002", "2612.90003", "2612.90003", "2612.90001"):  # pasted links
        add_papers(db, src, [("arxiv", ident)], EMB, now=NOW)  # the first is pushed out by the third
    src.close()
    assert [q["id_list"] for q in fake.calls("/api/query")] == ["2612.90001", "2612.90002", "2612.90003",
                                                                "2612.90001"]


def test_arxiv_down_costs_a_poll_one_feeds_retries_not_every_feeds(fake, db):
    """arXiv answering 503 to everything: each of a workspace's categories used to go through its own
    five tries and 30 s of back-off (40 categories: 200 requests to a service that is down and 20
    minutes, the retry job's poll meeting this one still running). Once arXiv has failed one feed
    after its retries, the poll records the same for its other feeds at once; OpenReview's still run,
    and each arXiv feed is caught up by its next poll."""
    cats = ["cs.AI", "cs.CL", "cs.CV", "cs.LG", "cs.RO", "stat.ML"]
    for c in cats:
        db.add_feed("C1", "arxiv", c, "U1", now=NOW)
    db.add_feed("C1", "openreview", VENUE, "U1", now=NOW)
    fake.fail("/rss/", 503, times=100)
    sleeps = []
    src = Sources.create(arxiv_api=fake.api, arxiv_rss=fake.rss, openreview_api=fake.url, sleep=sleeps.append)
    out = poll_feeds(db, src, EMB, now=NOW)
    src.close()
    assert out == {**{("arxiv", c): "failed" for c in cats}, ("openreview", VENUE): "read"}
    assert len(fake.calls("/rss/")) == 5  # one feed's tries
    assert sum(sleeps) < 60
    for c in cats:
        assert "503" in db.source_state(f"arxiv-rss:{c}")["last_error"], c
