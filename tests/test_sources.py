"""Fresh papers from arXiv and OpenReview, against local fake servers of the real shapes."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from datetime import date, datetime, timedelta, timezone

import pytest

from fake_sources import FakeSources, make_papers, on_openreview
from store import HashingEmbedder, open_store
from store.sources import (Sources, SourceError, add_paper, harvest_arxiv, harvest_openreview, parse_ref,
                           poll_arxiv)
from store.sources import arxiv
from store.sources.http import MEMBER_WAIT

NOW = datetime(2026, 12, 1, 2, 0, tzinfo=timezone.utc).timestamp()


class FakeClock:
    """Monotonic time that moves only when the code under test sleeps."""

    def __init__(self):
        self.t = 1000.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.sleeps.append(s)
        self.t += s


@pytest.fixture
def fake():
    with FakeSources() as f:
        yield f


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def sources(fake, clock):
    s = Sources.create(arxiv_api=fake.api, arxiv_rss=fake.rss, openreview_api=fake.url, clock=clock,
                       sleep=clock.sleep, wall=lambda: NOW)
    yield s
    s.close()


@pytest.fixture
def db(tmp_path):
    s = open_store(tmp_path / "p.db")
    yield s
    s.close()


EMB = HashingEmbedder()


def arxiv_ids(store) -> list[str]:
    keys = store.paper_keys([p.id for p in store.iter_papers()])
    return sorted(k.split(":", 2)[2] for ks in keys.values() for k in ks if k.startswith("ext:arxiv:"))


def test_api_harvest_pages_through_a_date_range_and_keeps_the_spacing(fake, sources, clock, db):
    fake.papers = make_papers(23)
    r = harvest_arxiv(db, sources, "cs.LG", EMB, now=NOW, since=date(2026, 11, 1), until=date(2026, 11, 2),
                      page_size=10)
    starts = [int(q["start"]) for q in fake.calls("/api/query")]
    assert starts == [0, 10, 20]
    assert r.added == 23 and db.count_papers() == 23
    assert arxiv_ids(db) == sorted(p.arxiv_id for p in fake.papers)
    # 3 s apart by the injected clock; the first request does not wait
    assert clock.sleeps == [3.0, 3.0]
    ua = {h.get("User-Agent") for _, _, h in fake.requests}
    assert len(ua) == 1 and ua.pop().startswith("paperclub/")
    state = db.source_state("arxiv-api:cs.LG")
    assert state["cursor"]["done"] and state["last_success"] == NOW and state["last_error"] is None
    p = db.get_paper(db.lookup_keys([f"ext:arxiv:{fake.papers[0].arxiv_id}"])[f"ext:arxiv:{fake.papers[0].arxiv_id}"][0])
    assert p.title == fake.papers[0].title and p.authors == fake.papers[0].authors
    assert "\\log n" in p.abstract or "log n" in p.abstract


def test_429_with_retry_after_is_honoured_and_503_is_retried_with_backoff(fake, sources, clock, db):
    fake.papers = make_papers(3)
    fake.fail("/api/query", 429, retry_after="17")
    fake.fail("/api/query", 503)
    r = harvest_arxiv(db, sources, "cs.LG", EMB, now=NOW, since=date(2026, 11, 1), until=date(2026, 11, 2))
    assert r.added == 3
    # Retry-After, not our own back-off; then the 503 without a header: the second try's back-off.
    # Each wait is longer than arXiv's 3 s, so no extra spacing is added on top.
    assert clock.sleeps == [17.0, 4.0]
    assert len(fake.calls("/api/query")) == 3


def test_paper_add_does_not_wait_out_a_retry_after_of_minutes_that_a_feed_poll_would(fake, sources, clock, db):
    """A member waiting on `/paper add` is answered within MEMBER_WAIT: arXiv asking for 290 s (which a
    feed's poll waits out) fails the add at once, and plain 503s are retried only while time is left."""
    fake.papers = make_papers(3)
    fake.fail("/api/query", 429, times=10, retry_after="290")
    with pytest.raises(SourceError, match="429"):
        add_paper(db, sources, ("arxiv", fake.papers[0].arxiv_id), EMB, now=NOW)
    assert clock.sleeps == [] and len(fake.calls("/api/query")) == 1
    fake.faults.clear()
    fake.fail("/api/query", 503, times=10)
    with pytest.raises(SourceError, match="503"):
        add_paper(db, sources, ("arxiv", fake.papers[1].arxiv_id), EMB, now=NOW)
    assert 0 < sum(clock.sleeps) < MEMBER_WAIT  # it retried, within the member's wait (before: 30 s and more)
    assert 2 <= len(fake.calls("/api/query")) - 1 < 5
    fake.faults.clear()
    fake.fail("/api/query", 429, retry_after="290")
    r = harvest_arxiv(db, sources, "cs.LG", EMB, now=NOW, since=date(2026, 11, 1), until=date(2026, 11, 2))
    assert r.added == 3 and 290.0 in clock.sleeps  # nobody waits on a poll: it honours the Retry-After


def test_a_source_down_for_good_fails_clearly_and_is_recorded(fake, sources, clock, db):
    fake.papers = make_papers(3)
    fake.fail("/api/query", 503, times=10)
    with pytest.raises(SourceError, match="503"):
        harvest_arxiv(db, sources, "cs.LG", EMB, now=NOW, since=date(2026, 11, 1), until=date(2026, 11, 2))
    assert db.count_papers() == 0
    assert "503" in db.source_state("arxiv-api:cs.LG")["last_error"]
    assert sum(clock.sleeps) >= 2 + 4 + 8 + 16


def test_a_truncated_page_is_an_error_for_that_page_never_half_a_paper(fake, sources, db):
    fake.papers = make_papers(25)
    fake.fail("/api/query", truncate=True, when=lambda q: q.get("start") == "10")
    with pytest.raises(SourceError, match="not a whole XML page"):
        harvest_arxiv(db, sources, "cs.LG", EMB, now=NOW, since=date(2026, 11, 1), until=date(2026, 11, 2),
                      page_size=10)
    assert db.count_papers() == 10  # the first page, whole; nothing of the cut one
    assert db.source_state("arxiv-api:cs.LG")["cursor"]["start"] == 10
    r = harvest_arxiv(db, sources, "cs.LG", EMB, now=NOW, since=date(2026, 11, 1), until=date(2026, 11, 2),
                      page_size=10)
    assert r.added == 15 and db.count_papers() == 25
    assert [int(q["start"]) for q in fake.calls("/api/query")][-2:] == [10, 20]


def _listing(fake, papers, kinds, when):
    fake.listings["cs.LG"] = (list(zip(kinds, papers)), when)


def test_rss_keeps_new_and_cross_and_a_replace_updates_only_a_paper_we_have(fake, sources, db):
    ps = make_papers(5)
    _listing(fake, ps, ["new", "new", "cross", "replace", "replace-cross"], datetime(2026, 11, 30, 1, tzinfo=timezone.utc))
    # paper 3 we already have (an older version); paper 4 we never had
    fake.papers = [ps[3]]
    old_abstract = ps[3].abstract
    add_paper(db, sources, ("arxiv", ps[3].arxiv_id), EMB, now=NOW - 86400)
    ps[3].abstract = old_abstract.replace("We study", "We revisit")
    ps[3].version += 1
    vec_before = db.get_vector(db.lookup_keys([f"ext:arxiv:{ps[3].arxiv_id}"])[f"ext:arxiv:{ps[3].arxiv_id}"][0], EMB.name)
    status, r = poll_arxiv(db, sources, "cs.LG", EMB, now=NOW)
    assert status == "new"
    assert sorted(arxiv_ids(db)) == sorted(p.arxiv_id for p in ps[:4])
    pid = db.lookup_keys([f"ext:arxiv:{ps[3].arxiv_id}"])[f"ext:arxiv:{ps[3].arxiv_id}"][0]
    assert db.get_paper(pid).abstract.startswith("We revisit")
    assert (db.get_vector(pid, EMB.name) != vec_before).any()  # changed text re-embedded
    fresh = db.announced_since(NOW - 7 * 86400)
    assert len(fresh) == 3 and pid not in fresh  # new + cross are the day's news; a replace is not


def test_an_empty_weekend_listing_is_normal(fake, sources, db):
    fake.listings["cs.LG"] = ([], None)
    status, r = poll_arxiv(db, sources, "cs.LG", EMB, now=NOW)
    assert status == "empty" and r.added == 0
    st = db.source_state("arxiv-rss:cs.LG")
    assert st["last_success"] == NOW and st["last_error"] is None


def test_a_stale_listing_is_logged_and_caught_up_through_the_api(fake, sources, db, caplog):
    day1 = make_papers(4, start=datetime(2026, 11, 27, 12, tzinfo=timezone.utc))
    _listing(fake, day1, ["new"] * 4, datetime(2026, 11, 28, 1, tzinfo=timezone.utc))
    assert poll_arxiv(db, sources, "cs.LG", EMB, now=NOW - 86400)[0] == "new"
    # the next day the listing was not rebuilt, but the API has the day's papers
    day2 = make_papers(3, seed=1, start=datetime(2026, 11, 29, 12, tzinfo=timezone.utc))
    fake.papers = day1 + day2
    status, _ = poll_arxiv(db, sources, "cs.LG", EMB, now=NOW)
    assert status == "stale"
    assert "stale" in caplog.text
    assert db.count_papers() == 7  # caught up, and day 1 not duplicated
    assert "stale" in db.source_state("arxiv-rss:cs.LG")["last_error"]
    q = fake.calls("/api/query")[-1]["search_query"]
    assert "cat:cs.LG" in q and "submittedDate:[20261125" in q


def test_a_new_version_with_the_same_text_is_not_re_embedded(fake, sources, db):
    ps = make_papers(2)
    fake.papers = ps
    harvest_arxiv(db, sources, "cs.LG", EMB, now=NOW, since=date(2026, 11, 1), until=date(2026, 11, 2))
    ps[0].version += 1
    r = harvest_arxiv(db, sources, "cs.LG", EMB, now=NOW + 60, since=date(2026, 11, 1), until=date(2026, 11, 3))
    assert r.added == 0 and r.embedded == 0 and db.count_papers() == 2


def test_openreview_pages_with_limit_and_offset(fake, sources, db):
    fake.notes = on_openreview(make_papers(7))
    r = harvest_openreview(db, sources, "ICLR.cc/2026/Conference", EMB, now=NOW, page_size=3)
    assert [int(q["offset"]) for q in fake.calls("/notes")] == [0, 3, 6]
    assert all(q["content.venueid"] == "ICLR.cc/2026/Conference" for q in fake.calls("/notes"))
    assert r.added == 7
    n = fake.notes[0]
    pid = db.lookup_keys([f"ext:openreview:{n.forum.lower()}"])[f"ext:openreview:{n.forum.lower()}"][0]
    p = db.get_paper(pid)
    assert p.title == n.title and p.keywords == n.keywords and p.collection == "ICLR 2026 Poster"
    assert p.url == f"https://openreview.net/forum?id={n.forum}"
    fake.requests.clear()
    harvest_openreview(db, sources, "ICLR.cc/2026/Conference/-/Submission", EMB, now=NOW, page_size=10)
    assert fake.calls("/notes")[0]["invitation"] == "ICLR.cc/2026/Conference/-/Submission"
    assert db.count_papers() == 7


def test_a_venue_read_again_asks_only_for_the_notes_changed_since_its_last_read(fake, sources, db):
    """The nightly poll of a venue of thousands of notes reads the pages changed since the last whole
    read (newest change first), not the venue again; a note accepted since then comes, though OpenReview
    created it months ago (its decision is a change)."""
    venue = "ICLR.cc/2026/Conference"
    fake.notes = on_openreview(make_papers(9, seed=4), venueid=venue)
    for i, n in enumerate(fake.notes):  # decided one a day
        n.tmdate = datetime(2026, 11, 20, tzinfo=timezone.utc) + timedelta(days=i)
    harvest_openreview(db, sources, venue, EMB, now=NOW, page_size=3, restart=True, only_new=True)
    first = fake.calls("/notes")
    assert [int(q["offset"]) for q in first] == [0, 3, 6] and db.count_papers() == 9
    accepted = on_openreview(make_papers(1, seed=11, prefix="2609"), venueid=venue)[0]
    accepted.forum, accepted.tmdate = "Acc3ptedX9", datetime(2026, 12, 1, 20, tzinfo=timezone.utc)  # made in September
    fake.notes.append(accepted)
    fake.requests.clear()
    r = harvest_openreview(db, sources, venue, EMB, now=NOW + 86400, page_size=3, restart=True, only_new=True)
    assert len(fake.calls("/notes")) == 1 < len(first)
    assert r.added == 1 and db.count_papers() == 10
    key = f"ext:openreview:{accepted.forum.lower()}"
    assert db.lookup_keys([key])[key][0] in db.announced_since(0, [f"openreview:{venue}"])
    fake.requests.clear()  # the CLI's --restart still reads the whole venue
    harvest_openreview(db, sources, venue, EMB, now=NOW + 86400, page_size=3, restart=True)
    assert len(fake.calls("/notes")) == 4


def test_the_same_paper_from_rss_api_openreview_and_a_link_is_one_row(fake, sources, db):
    ps = make_papers(3)
    fake.papers = ps
    _listing(fake, ps[:1], ["new"], datetime(2026, 11, 30, 1, tzinfo=timezone.utc))
    poll_arxiv(db, sources, "cs.LG", EMB, now=NOW)
    harvest_arxiv(db, sources, "cs.LG", EMB, now=NOW, since=date(2026, 11, 1), until=date(2026, 11, 2))
    notes = on_openreview(ps[:1])
    notes[0].abstract = notes[0].abstract.replace("  ", " ") + " "  # OpenReview's copy differs in spacing
    fake.notes = notes
    harvest_openreview(db, sources, "ICLR.cc/2026/Conference", EMB, now=NOW)
    added = add_paper(db, sources, parse_ref(f"https://arxiv.org/pdf/{ps[0].arxiv_id}v2"), EMB, now=NOW)
    assert added is not None and not added.new
    by_forum = add_paper(db, sources, parse_ref(f"https://openreview.net/forum?id={notes[0].forum}"), EMB, now=NOW)
    assert by_forum.paper.id == added.paper.id and not by_forum.new
    assert db.count_papers() == 3
    keys = db.paper_keys([added.paper.id])[added.paper.id]
    assert f"ext:arxiv:{ps[0].arxiv_id}" in keys and f"ext:openreview:{notes[0].forum.lower()}" in keys


def test_add_paper_fetches_once_and_unknown_ids_are_none(fake, sources, db):
    fake.papers = make_papers(2)
    a = add_paper(db, sources, ("arxiv", fake.papers[1].arxiv_id), EMB, now=NOW)
    assert a.new and a.paper.title == fake.papers[1].title
    b = add_paper(db, sources, ("arxiv", fake.papers[1].arxiv_id), EMB, now=NOW)
    assert not b.new and b.paper.id == a.paper.id
    assert len(fake.calls("/api/query")) == 1
    assert add_paper(db, sources, ("arxiv", "2612.99999"), EMB, now=NOW) is None
    assert add_paper(db, sources, ("openreview", "Nope12345X"), EMB, now=NOW) is None
    assert db.count_papers() == 1


@pytest.mark.parametrize("text,want", [
    ("2501.01234", ("arxiv", "2501.01234")), ("arXiv:2501.01234v3", ("arxiv", "2501.01234")),
    ("https://arxiv.org/abs/2501.01234", ("arxiv", "2501.01234")),
    ("<https://arxiv.org/pdf/2501.01234v2>", ("arxiv", "2501.01234")),
    ("https://openreview.net/forum?id=rJ4km2R5t7", ("openreview", "rJ4km2R5t7")),
    ("https://openreview.net/pdf?id=HkxLXnAcFQ", ("openreview", "HkxLXnAcFQ")),
    ("HkxLXnAcFQ", ("openreview", "HkxLXnAcFQ")),
    ("attention", None), ("hello world", None), ("https://example.com/2501.01234", None), ("", None),
    ("Attention", None), ("Transformers", None),  # a capitalised word is not a forum id
    ("rJxbJeHFPS", ("openreview", "rJxbJeHFPS")),  # a real id without digits
    ("２５０１.０１２３４", None),  # full-width digits: arXiv would not know it
])
def test_parse_ref(text, want):
    assert parse_ref(text) == want


def test_last_announcement_is_20_eastern_sunday_to_thursday():
    fri_night = datetime(2026, 12, 5, 3, 0, tzinfo=timezone.utc)  # Friday 22:00 ET
    assert arxiv.last_announcement(fri_night) == datetime(2026, 12, 4, 1, 0, tzinfo=timezone.utc)  # Thu 20:00 ET
    sun_late = datetime(2026, 12, 7, 2, 0, tzinfo=timezone.utc)  # Sunday 21:00 ET
    assert arxiv.last_announcement(sun_late) == datetime(2026, 12, 7, 1, 0, tzinfo=timezone.utc)


KILL_SCRIPT = r"""
import sys
from datetime import date
sys.path.insert(0, sys.argv[4])
from store import open_store, HashingEmbedder
from store.sources import Sources, harvest_arxiv
s = Sources.create(arxiv_api=sys.argv[2], sleep=lambda s: None)
harvest_arxiv(open_store(sys.argv[1]), s, "cs.LG", HashingEmbedder(), now=float(sys.argv[3]),
              since=date(2026, 11, 1), until=date(2026, 11, 3), page_size=10)
"""


@pytest.mark.slow  # starts a process
def test_kill_9_mid_harvest_then_resume_loses_nothing_and_duplicates_nothing(fake, sources, tmp_path):
    fake.papers = make_papers(45)
    gate = threading.Event()
    fake.faults.append(__import__("fake_sources").Fault("/api/query", gate=gate,
                                                         when=lambda q: q.get("start") == "30"))
    fake.reached.clear()
    path = tmp_path / "k.db"
    open_store(path).close()
    proc = subprocess.Popen([sys.executable, "-c", KILL_SCRIPT, str(path), fake.api, str(NOW),
                             os.path.dirname(__file__)], env={**os.environ})
    try:
        for _ in range(300):
            if any(q.get("start") == "30" for q in fake.calls("/api/query")):
                break
            proc.poll()
            assert proc.returncode is None, "the harvest ended before the page it should be killed on"
            threading.Event().wait(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        gate.set()
    db = open_store(path)
    assert db.count_papers() == 30
    assert db.source_state("arxiv-api:cs.LG")["cursor"]["start"] == 30
    r = harvest_arxiv(db, sources, "cs.LG", EMB, now=NOW, since=date(2026, 11, 1), until=date(2026, 11, 3),
                      page_size=10)
    assert r.added == 15
    assert arxiv_ids(db) == sorted(p.arxiv_id for p in fake.papers)
    assert db.count_papers() == 45
    db.close()


def test_cli_fetch_and_feeds(fake, tmp_path, monkeypatch):
    from click.testing import CliRunner

    from bot.cli import cli

    fake.papers = make_papers(4, start=datetime(2026, 11, 20, tzinfo=timezone.utc))
    fake.notes = on_openreview(make_papers(3, seed=2))
    for k, v in {"PAPERCLUB_ARXIV_API": fake.api, "PAPERCLUB_ARXIV_RSS": fake.rss,
                 "PAPERCLUB_OPENREVIEW_API": fake.url, "PAPERCLUB_MODEL": "hashing"}.items():
        monkeypatch.setenv(k, v)
    db = str(tmp_path / "cli.db")
    run = CliRunner().invoke
    r = run(cli, ["--db", db, "fetch", "arxiv", "cs.LG", "--since", "2026-11-19", "--until", "2026-11-21",
                  "--no-embed"])
    assert r.exit_code == 0, r.output
    assert "arXiv cs.LG since 2026-11-19: 4 added" in r.output
    r = run(cli, ["--db", db, "fetch", "openreview", "ICLR.cc/2026/Conference", "--no-embed"])
    assert r.exit_code == 0 and "3 added" in r.output, r.output
    r = run(cli, ["--db", db, "feeds"])
    assert r.exit_code == 0
    assert "arxiv-api:cs.LG" in r.output and "openreview:ICLR.cc/2026/Conference" in r.output
    assert "last success: " in r.output and "never" not in r.output
    r = run(cli, ["--db", db, "fetch", "arxiv", "not a category"])
    assert r.exit_code != 0


def test_cli_feeds_says_how_many_new_papers_each_feeds_last_read_brought(tmp_path):
    """`paperclub feeds` tells what `/paper feed` tells: a feed's last read and how many new papers it
    brought (none said before the feed's first read since the count was kept)."""
    from click.testing import CliRunner

    from bot.cli import cli

    db = open_store(tmp_path / "feeds.db")
    for category, papers in (("cs.LG", 3), ("cs.CV", 0), ("cs.CL", 1), ("stat.ML", None)):
        db.add_feed("C1", "arxiv", category, "UANN", now=NOW)
        db.update_source(f"arxiv-rss:{category}", now=NOW, ok=True, papers=papers)
    db.close()
    r = CliRunner().invoke(cli, ["--db", str(tmp_path / "feeds.db"), "feeds"])
    assert r.exit_code == 0, r.output
    last = {src: line for src, line in zip(r.output.splitlines(), r.output.splitlines()[2:])
            if src.startswith("arxiv-rss:")}  # each source's "last success" line, two below its name
    assert last["arxiv-rss:cs.LG"].endswith(" ago (3 new papers)")
    assert last["arxiv-rss:cs.CV"].endswith(" ago (no new papers)")
    assert last["arxiv-rss:cs.CL"].endswith(" ago (1 new paper)")
    assert last["arxiv-rss:stat.ML"].endswith(" ago")


def test_the_same_listing_before_the_next_announcement_is_unchanged_not_stale(fake, sources, db):
    _listing(fake, make_papers(2), ["new", "new"], datetime(2026, 12, 1, 1, tzinfo=timezone.utc))
    assert poll_arxiv(db, sources, "cs.LG", EMB, now=NOW)[0] == "new"
    assert poll_arxiv(db, sources, "cs.LG", EMB, now=NOW + 3 * 3600)[0] == "unchanged"
    assert db.source_state("arxiv-rss:cs.LG")["last_error"] is None
    assert fake.calls("/api/query") == []


def test_health_reports_a_feed_failing_for_more_than_a_day(tmp_path):
    from bot.health import check_health, write_heartbeat

    path = tmp_path / "h.db"
    store = open_store(path)
    store.update_source("arxiv-rss:cs.LG", now=NOW - 90000, error="HTTP 503 (gave up after 5 tries)")
    store.update_source("arxiv-rss:cs.LG", now=NOW - 10, error="HTTP 503 (gave up after 5 tries)")
    store.update_source("openreview:ICLR.cc/2026/Conference", now=NOW - 3600, error="HTTP 500")
    write_heartbeat(store, NOW)
    store.close()
    result = check_health(path, now=NOW)
    assert result.ok
    assert "feed arxiv-rss:cs.LG failing for 1.0 days (HTTP 503" in result.message
    assert "openreview" not in result.message  # an hour is not a day
    store = open_store(path)
    store.update_source("arxiv-rss:cs.LG", now=NOW, ok=True)
    store.close()
    assert "warning" not in check_health(path, now=NOW + 1).message


def test_enrich_openreview_fills_the_seeds_without_duplicating_or_emptying(fake, sources, tmp_path):
    import random

    from fake_sources import FakePaper, lightly_edited
    from store import bundled_sample_paths, ingest_paths, read_file
    from store.sources.enrich import enrich_openreview

    store = open_store(tmp_path / "e.db")
    ingest_paths(store, bundled_sample_paths(), EMB, now=NOW)
    seeds = list(store.iter_papers())
    rng = random.Random(1)
    venue = "ICLR.cc/2026/Conference"
    notes, truth = [], {}
    for k, p in enumerate(seeds):
        forum = f"Seed{k:04d}x7"
        truth[p.id] = forum
        text = p.raw if k < 5 else lightly_edited(p.raw, rng)  # five verbatim, the rest edited
        notes.append(FakePaper(None, f"Title of seed {k}", text, [f"Author {k}"], forum=forum, venueid=venue,
                               venue="ICLR 2026 Poster", keywords=[] if k == 0 else ["kw"]))
    for k, r in enumerate(read_file("/work/shared/eval/iclr2024.jsonl")[:400]):
        notes.append(FakePaper(None, r.title or "x", r.abstract, ["A"], forum=f"Oth{k:06d}z9", venueid=venue,
                               venue="ICLR 2026 Poster"))
    rng.shuffle(notes)
    fake.notes = notes
    result = enrich_openreview(store, sources, venue, EMB, now=NOW, page_size=150)
    assert result.matches == truth  # 38/38, none false
    assert result.exact == 5 and result.fuzzy == 33
    assert store.count_papers() == 38
    by_id = {p.id: p for p in store.iter_papers()}
    for pid, forum in truth.items():
        p = by_id[pid]
        k = int(forum[4:8])
        assert p.title == f"Title of seed {k}" and p.authors == [f"Author {k}"]
        assert p.url == f"https://openreview.net/forum?id={forum}" and p.collection == "ICLR 2026"
        assert p.abstract == next(s for s in seeds if s.id == pid).abstract  # the seed's own text stays
    again = enrich_openreview(store, sources, venue, EMB, now=NOW, page_size=150)
    assert again.matches == {} and store.count_papers() == 38  # already enriched: nothing to do
    store.close()


def test_a_backfill_counts_papers_as_new_from_their_submission_not_from_today(fake, sources, db):
    old = make_papers(2, start=datetime(2026, 10, 1, tzinfo=timezone.utc))
    recent = make_papers(2, seed=4, start=datetime(2026, 11, 29, tzinfo=timezone.utc))
    fake.papers = old + recent
    harvest_arxiv(db, sources, "cs.LG", EMB, now=NOW, since=date(2026, 9, 30), until=date(2026, 11, 30))
    fresh = db.announced_since(NOW - 7 * 86400)
    want = {db.lookup_keys([f"ext:arxiv:{p.arxiv_id}"])[f"ext:arxiv:{p.arxiv_id}"][0] for p in recent}
    assert set(fresh) == want


class Killed(BaseException):
    """What kill -9 does to a harvest: it stops between two writes and records nothing more."""


class DiesBeforeAnnouncing:
    """The store as a process sees it that is killed once its page's papers are committed, before
    they are marked as announced (ingesting a page of 1000 notes takes a while: the window is wide)."""

    def __init__(self, store):
        self._store = store

    def __getattr__(self, name):
        return getattr(self._store, name)

    def mark_announced(self, rows):
        raise Killed


def test_a_venue_harvest_killed_before_announcing_its_new_papers_announces_them_when_run_again(
        fake, sources, db):
    venue = "ICLR.cc/2026/Conference"
    fake.notes = on_openreview(make_papers(5, seed=3), venueid=venue)
    for n in fake.notes[:2]:  # in the library already (a /paper add): not news when the venue is read
        assert add_paper(db, sources, ("openreview", n.forum), EMB, now=NOW).new
    with pytest.raises(Killed):
        harvest_openreview(DiesBeforeAnnouncing(db), sources, venue, EMB, now=NOW, restart=True)
    assert db.count_papers() == 5 and db.announced_since(0, [f"openreview:{venue}"]) == {}
    harvest_openreview(db, sources, venue, EMB, now=NOW, restart=True)  # the next poll, another replica
    ids = {n.forum: db.lookup_keys([f"ext:openreview:{n.forum.lower()}"])[f"ext:openreview:{n.forum.lower()}"][0]
           for n in fake.notes}
    announced = db.announced_since(0, [f"openreview:{venue}"])
    assert set(announced) == {ids[n.forum] for n in fake.notes[2:]}  # the new ones, not the library's
    assert db.count_papers() == 5
    assert "pending" not in db.source_state(f"openreview:{venue}")["cursor"] or \
        not db.source_state(f"openreview:{venue}")["cursor"]["pending"]


FIRST_START_SCRIPT = """
import importlib.abc, sys, threading
sys.path.insert(0, sys.argv[3])
off_main = []

class Spy(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if threading.current_thread() is not threading.main_thread():
            off_main.append(name)
        return None

sys.meta_path.insert(0, Spy())
from bot.cli import Ctx, load_samples_if_empty
from conftest import make_settings

c = Ctx()
c.settings = make_settings(db=sys.argv[1], model="hashing-256", openreview_api=sys.argv[2])
load_samples_if_empty(c)
for t in [t for t in threading.enumerate() if t.name == "enrich-samples"]:
    t.join(timeout=120)
print(" ".join(sorted(set(off_main))))
"""


@pytest.mark.slow  # starts a process
def test_a_first_start_imports_nothing_of_the_bots_off_its_main_thread(fake, tmp_path):
    """The bundled papers' titles are fetched on a thread while the bot imports Slack's modules:
    that thread must import none of them, or the two can meet a half-imported package and the
    bot dies at start (seen: ImportError on `BoltContext` in the container)."""
    out = subprocess.run([sys.executable, "-c", FIRST_START_SCRIPT, str(tmp_path / "p.db"),
                          fake.url + "/gone", os.path.dirname(__file__)],
                         capture_output=True, text=True, timeout=300, env={**os.environ})
    assert out.returncode == 0, out.stderr[-2000:]
    shared = [m for m in out.stdout.split() if m.split(".")[0] in {"bot", "store", "slack_bolt", "slack_sdk"}]
    assert shared == []


def test_a_first_start_fills_the_bundled_papers_from_openreview_or_says_how(fake, tmp_path, caplog):
    """The bundled abstracts have no title or link: the first start fetches them, and says so."""
    import logging
    import threading

    from bot.cli import Ctx, load_samples_if_empty
    from conftest import make_settings
    from fake_sources import FakePaper
    from store import bundled_sample_paths, read_file

    raws = [r.abstract for path in bundled_sample_paths() for r in read_file(path)]
    fake.notes = [FakePaper(None, f"Title of seed {k}", raw, [f"Author {k}"], forum=f"Seed{k:04d}x7",
                            venueid="ICLR.cc/2026/Conference", venue="ICLR 2026 Poster")
                  for k, raw in enumerate(raws)]
    c = Ctx()
    c.settings = make_settings(db=str(tmp_path / "p.db"), model="hashing-256", openreview_api=fake.url)
    with caplog.at_level(logging.INFO, logger="paperclub"):
        load_samples_if_empty(c)
        for t in [t for t in threading.enumerate() if t.name == "enrich-samples"]:
            t.join(timeout=120)
    assert "filled in titles, authors and links of the bundled papers" in caplog.text
    assert all(p.title and p.url for p in c.store.iter_papers())

    offline = Ctx()
    offline.settings = make_settings(db=str(tmp_path / "q.db"), model="hashing-256",
                                     openreview_api=fake.url + "/gone")  # answers 404
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="paperclub"):
        load_samples_if_empty(offline)
        for t in [t for t in threading.enumerate() if t.name == "enrich-samples"]:
            t.join(timeout=120)
    assert "when online, run: paperclub enrich openreview --venue ICLR.cc/2026/Conference" in caplog.text


def _pid(store, arxiv_id: str) -> str:
    return store.lookup_keys([f"ext:arxiv:{arxiv_id}"])[f"ext:arxiv:{arxiv_id}"][0]


def test_a_channel_gets_as_new_only_the_papers_of_the_feeds_it_follows(fake, sources, db):
    """Two channels, two categories: cs.CV's channel is not handed cs.LG's night as its news (before,
    every arXiv feed's papers were every arXiv-following channel's "new on arXiv today")."""
    from store import Searcher
    from store.daily import pick_for_day
    from store.feedback import Feedback
    from store.sources import fresh_papers, poll_feeds

    lg = make_papers(3, seed=1, categories=("cs.LG",))
    cv = make_papers(2, seed=2, categories=("cs.CV",))
    both = make_papers(1, seed=3, categories=("cs.LG", "cs.CV"))
    night = datetime(2026, 12, 1, 1, tzinfo=timezone.utc)  # Monday 20:00 US Eastern
    fake.listings["cs.LG"] = ([("new", p) for p in lg + both], night)
    fake.listings["cs.CV"] = ([("new", p) for p in cv] + [("cross", p) for p in both], night)
    db.add_feed("CLG", "arxiv", "cs.LG", "U1", now=NOW - 86400)
    db.add_feed("CCV", "arxiv", "cs.CV", "U1", now=NOW - 86400)
    assert poll_feeds(db, sources, EMB, now=NOW) == {("arxiv", "cs.CV"): "new", ("arxiv", "cs.LG"): "new"}
    day = date(2026, 12, 1)
    assert set(fresh_papers(db, "CLG", day)) == {_pid(db, p.arxiv_id) for p in lg + both}
    assert set(fresh_papers(db, "CCV", day)) == {_pid(db, p.arxiv_id) for p in cv + both}
    # The cs.CV channel's member reads what the cs.LG night is about: still its own feed's papers first.
    db.add_interest("CCV", lg[0].abstract, "U1", model=EMB.name, vector=EMB.encode([lg[0].abstract])[0],
                    now=NOW - 86400)
    pick = pick_for_day(db, Searcher(db, EMB), "CCV", day, feedback=Feedback())
    assert pick.paper_id in {_pid(db, p.arxiv_id) for p in cv + both}
    assert "new on arXiv today" in pick.explain()


def test_a_night_arxiv_was_down_is_fetched_once_when_it_is_back(fake, sources, db):
    """arXiv's listing holds only its own night: a poll that failed on Tuesday night, then read
    Wednesday's listing, used to lose Tuesday's papers for good. They now come in through the API,
    once, as news of the feed; Wednesday's own papers stay news of today."""
    from store.sources import announce_source, fresh_papers

    def night(d: int) -> datetime:  # 20:00 US Eastern on the evening before 2026-12-d
        return datetime(2026, 12, d, 1, tzinfo=timezone.utc)

    mon = make_papers(3, seed=1, start=datetime(2026, 11, 30, 12, tzinfo=timezone.utc))
    tue = make_papers(4, seed=2, start=datetime(2026, 12, 1, 12, tzinfo=timezone.utc))
    wed = make_papers(2, seed=3, start=datetime(2026, 12, 2, 12, tzinfo=timezone.utc))
    fake.papers = mon + tue + wed  # what the API knows by Wednesday night
    _listing(fake, mon, ["new"] * 3, night(1))
    assert poll_arxiv(db, sources, "cs.LG", EMB, now=night(1).timestamp() + 1800)[0] == "new"
    fake.fail("/rss/", 503, times=10)  # Tuesday night: arXiv is down through the poll and its retry
    for at in (night(2).timestamp() + 1800, night(2).timestamp() + 3 * 3600 + 1800):
        with pytest.raises(SourceError):
            poll_arxiv(db, sources, "cs.LG", EMB, now=at)
    fake.faults.clear()
    _listing(fake, wed, ["new"] * 2, night(3))
    wed_poll = night(3).timestamp() + 1800
    assert poll_arxiv(db, sources, "cs.LG", EMB, now=wed_poll)[0] == "new"
    assert arxiv_ids(db) == sorted(p.arxiv_id for p in mon + tue + wed)  # Tuesday's too, each once
    assert db.count_papers() == 9
    news = db.announced_since(0, [announce_source("arxiv", "cs.LG")])
    assert {_pid(db, p.arxiv_id) for p in tue} <= set(news)
    assert all(news[_pid(db, p.arxiv_id)] == night(3).timestamp() for p in wed)  # still "today"
    db.add_feed("C1", "arxiv", "cs.LG", None, now=night(1).timestamp())
    assert {_pid(db, p.arxiv_id) for p in tue + wed} <= set(fresh_papers(db, "C1", date(2026, 12, 3)))
    asked = len(fake.calls("/api/query"))
    assert asked >= 1
    # Caught up: the retry three hours later, and Thursday's night, ask the API for nothing more.
    assert poll_arxiv(db, sources, "cs.LG", EMB, now=wed_poll + 3 * 3600)[0] == "unchanged"
    thu = make_papers(1, seed=4, start=datetime(2026, 12, 3, 12, tzinfo=timezone.utc))
    _listing(fake, thu, ["new"], night(4))
    assert poll_arxiv(db, sources, "cs.LG", EMB, now=night(4).timestamp() + 1800)[0] == "new"
    assert len(fake.calls("/api/query")) == asked and db.count_papers() == 10


def test_a_weekend_is_no_missed_night_and_a_catch_up_that_fails_is_tried_again(fake, sources, db):
    def night(d: int) -> datetime:  # 20:00 US Eastern on the evening before 2026-12-d
        return datetime(2026, 12, d, 1, tzinfo=timezone.utc)

    thu = make_papers(2, seed=1, start=datetime(2026, 12, 3, 12, tzinfo=timezone.utc))
    sun = make_papers(2, seed=2, start=datetime(2026, 12, 5, 12, tzinfo=timezone.utc))
    fake.papers = thu + sun
    _listing(fake, thu, ["new"] * 2, night(4))
    poll_arxiv(db, sources, "cs.LG", EMB, now=night(4).timestamp() + 1800)
    _listing(fake, sun, ["new"] * 2, night(7))  # Sunday: nothing was announced Friday or Saturday
    assert poll_arxiv(db, sources, "cs.LG", EMB, now=night(7).timestamp() + 1800)[0] == "new"
    assert fake.calls("/api/query") == []
    # Monday night is missed (down); Tuesday's listing comes, but the API is down for its catch-up.
    mon = make_papers(3, seed=3, start=datetime(2026, 12, 7, 12, tzinfo=timezone.utc))
    tue = make_papers(1, seed=4, start=datetime(2026, 12, 8, 12, tzinfo=timezone.utc))
    fake.papers += mon + tue
    _listing(fake, tue, ["new"], night(9))
    fake.fail("/api/query", 503, times=5)
    assert poll_arxiv(db, sources, "cs.LG", EMB, now=night(9).timestamp() + 1800)[0] == "new"
    state = db.source_state("arxiv-rss:cs.LG")
    assert "not caught up" in state["last_error"] and db.count_papers() == 5
    # The retry job three hours later: the listing is unchanged, and the missed night comes in.
    assert poll_arxiv(db, sources, "cs.LG", EMB, now=night(9).timestamp() + 3 * 3600 + 1800)[0] == "unchanged"
    assert db.count_papers() == 8 and arxiv_ids(db) == sorted(p.arxiv_id for p in fake.papers)
    state = db.source_state("arxiv-rss:cs.LG")
    assert state["failing_since"] is None and "gap" not in state["cursor"]


def test_an_empty_listing_read_the_day_after_does_not_hide_a_missed_night(fake, sources, db):
    """An empty listing counts as its night read only on that night: the one read on Friday evening,
    after Thursday's poll failed, says nothing of Thursday, which Sunday's listing still catches up."""
    def night(d: int) -> datetime:  # 20:00 US Eastern on the evening before 2026-12-d
        return datetime(2026, 12, d, 1, tzinfo=timezone.utc)

    wed = make_papers(2, seed=1, start=datetime(2026, 12, 2, 12, tzinfo=timezone.utc))
    thu = make_papers(2, seed=2, start=datetime(2026, 12, 3, 12, tzinfo=timezone.utc))
    sun = make_papers(1, seed=3, start=datetime(2026, 12, 5, 12, tzinfo=timezone.utc))
    fake.papers = wed + thu + sun
    _listing(fake, wed, ["new"] * 2, night(3))
    assert poll_arxiv(db, sources, "cs.LG", EMB, now=night(3).timestamp() + 1800)[0] == "new"
    fake.fail("/rss/", 503, times=10)  # Thursday night: arXiv down
    with pytest.raises(SourceError):
        poll_arxiv(db, sources, "cs.LG", EMB, now=night(4).timestamp() + 1800)
    fake.faults.clear()
    fake.listings["cs.LG"] = ([], None)  # Friday evening: nothing
    assert poll_arxiv(db, sources, "cs.LG", EMB, now=night(5).timestamp() + 1800)[0] == "empty"
    _listing(fake, sun, ["new"], night(7))
    assert poll_arxiv(db, sources, "cs.LG", EMB, now=night(7).timestamp() + 1800)[0] == "new"
    assert arxiv_ids(db) == sorted(p.arxiv_id for p in wed + thu + sun)  # Thursday's by the API
