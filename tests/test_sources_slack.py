"""Fresh papers through the Slack layer: /paper add, pasted links (link_shared -> chat.unfurl), /paper feed."""
from __future__ import annotations

import json
import threading
from datetime import datetime, timezone

import pytest
from slack_bolt import BoltRequest
from slack_sdk import WebClient

from bot.app import create_app
from bot.scheduler import DailyService
from conftest import BOT_TOKEN, Clock, dispatch_command, make_deps, make_settings, text_of
from fake_sources import FakeSources, make_papers, on_openreview
from store import HashingEmbedder, Searcher
from store.sources import Sources

NOW = datetime(2026, 12, 1, 14, 0, tzinfo=timezone.utc)


@pytest.fixture
def fake_src():
    with FakeSources() as f:
        f.papers = make_papers(5)
        f.notes = on_openreview(make_papers(2, seed=3))
        yield f


@pytest.fixture
def parts(hashing_store, fake_slack, fake_src):
    sleeps = []
    sources = Sources.create(arxiv_api=fake_src.api, arxiv_rss=fake_src.rss, openreview_api=fake_src.url,
                             sleep=sleeps.append)
    settings = make_settings(admins="UADMIN")
    fake_slack.add_members(*settings.admin_ids)  # "Ask <@UADMIN>": the bot means to name them
    deps = make_deps(settings, hashing_store, Searcher(hashing_store, HashingEmbedder()), slack=None,
                     clock=Clock(NOW), sources=sources)
    app = create_app(deps, client=WebClient(token=BOT_TOKEN, base_url=fake_slack.api_url),
                     process_before_response=True)
    yield app, deps
    sources.close()


def paste(app, fake_slack, urls: list[str], channel: str = "C1", n: int = 0) -> str:
    ts = fake_slack.add_message(channel, " ".join(urls))
    body = {"type": "event_callback", "token": "t", "team_id": "T1", "api_app_id": "A1",
            "event_id": f"EvL{n}{ts}", "event_time": 1,
            "event": {"type": "link_shared", "channel": channel, "user": "U1", "message_ts": ts,
                      "unfurl_id": f"{channel}.{ts}.x", "source": "conversations_history",
                      "links": [{"domain": "arxiv.org" if "arxiv" in u else "openreview.net", "url": u}
                                for u in urls], "event_ts": ts},
            "authorizations": [{"team_id": "T1", "user_id": "UBOT", "is_bot": True}]}
    assert app.dispatch(BoltRequest(body=body, mode="socket_mode")).status == 200
    return ts


def test_a_pasted_arxiv_link_gets_one_unfurl_with_the_card(parts, fake_slack, fake_src):
    app, deps = parts
    p = fake_src.papers[2]
    url = f"https://arxiv.org/abs/{p.arxiv_id}v{p.version}"
    ts = paste(app, fake_slack, [url])
    [unfurl] = fake_slack.unfurls()
    assert unfurl["channel"] == "C1" and unfurl["ts"] == ts
    assert list(unfurl["unfurls"]) == [url]  # keyed by the URL exactly as it came in
    blocks = unfurl["unfurls"][url]["blocks"]
    text = json.dumps(blocks)
    shown = [e["text"]["text"] if e["type"] == "button" else "⋯ " + ", ".join(o["text"]["text"] for o in e["options"])
             for b in blocks if b["type"] == "actions" for e in b["elements"]]
    # Save; For me / Not for me: the member's verdict on this paper; the rest in the menu (no Share:
    # the link is in the channel already; no Nominate: no reading group meets in C1)
    assert shown == ["Save", "👍 For me", "👎 Not for me", "⋯ Summary, More like this"]
    paper = deps.store.get_paper(blocks[-1]["elements"][0]["value"])
    assert paper.title == p.title and paper.short_name in text


def test_the_same_link_pasted_twice_fetches_once(parts, fake_slack, fake_src):
    app, _ = parts
    url = f"https://arxiv.org/pdf/{fake_src.papers[0].arxiv_id}"
    paste(app, fake_slack, [url], n=1)
    paste(app, fake_slack, [url], n=2)
    assert len(fake_slack.unfurls()) == 2
    assert len(fake_src.calls("/api/query")) == 1


def test_an_id_arxiv_does_not_know_is_asked_once_and_a_stored_paper_asks_nobody(parts, fake_slack, fake_src):
    app, deps = parts
    paste(app, fake_slack, ["https://arxiv.org/abs/2612.99999"], n=5)
    paste(app, fake_slack, ["https://arxiv.org/abs/2612.99999"], n=6)  # "not found" is remembered
    assert len(fake_src.calls("/api/query")) == 1
    stored = fake_src.papers[1]
    paste(app, fake_slack, [f"https://arxiv.org/abs/{stored.arxiv_id}"], n=7)
    fake_src.requests.clear()
    paste(app, fake_slack, [f"https://arxiv.org/abs/{stored.arxiv_id}v9"], n=8)  # in the store now
    assert fake_src.requests == [] and len(fake_slack.unfurls()) == 2


def test_one_id_arxiv_cannot_read_does_not_cost_the_other_links_their_cards(parts, fake_slack, fake_src):
    app, _ = parts
    good = [f"https://arxiv.org/abs/{p.arxiv_id}" for p in fake_src.papers[:4]]
    paste(app, fake_slack, [*good, "https://arxiv.org/abs/hep-th/9901001"], n=9)  # the fake reads new-style only
    [unfurl] = fake_slack.unfurls()
    assert sorted(unfurl["unfurls"]) == sorted(good)
    assert len(fake_src.calls("/api/query")) <= 7  # halved around the bad id: at most 2 log2(n) + 1


@pytest.mark.slow  # waits out arXiv's real 3 s spacing
def test_a_flood_of_pasted_links_never_holds_up_a_command(hashing_store, fake_slack):
    """A feed bot posts a day's listing: 18 messages of 5 arXiv links, with arXiv's real 3 s spacing.
    While arXiv still holds the first lookup, `/paper search` answers; then every link is unfurled,
    with the unknown ids asked many to a request rather than one request per link."""
    from bot.later import make_later, work_pool

    with FakeSources() as src:
        src.papers = make_papers(90, seed=2)
        held = threading.Event()
        src.fail("/api/query", gate=held)  # the first lookup waits until the search has answered
        sources = Sources.create(arxiv_api=src.api, arxiv_rss=src.rss, openreview_api=src.url,
                                 store=hashing_store)  # real spacing, kept in the store
        pool = work_pool()
        deps = make_deps(make_settings(), hashing_store, Searcher(hashing_store, HashingEmbedder()), slack=None,
                         sources=sources, later=make_later(pool))
        app = create_app(deps, client=WebClient(token=BOT_TOKEN, base_url=fake_slack.api_url))
        try:
            for n in range(18):
                paste(app, fake_slack, [f"https://arxiv.org/abs/{p.arxiv_id}"
                                        for p in src.papers[5 * n : 5 * n + 5]], n=100 + n)
            src.reached.wait(10)
            url = fake_slack.new_response_url(channel="C1", user="U1")
            body = {"command": "/paper", "text": "search video", "user_id": "U1", "user_name": "u1",
                    "channel_id": "C1", "channel_name": "general", "team_id": "T1", "api_app_id": "A1",
                    "response_url": url, "trigger_id": "1.2.3"}
            assert app.dispatch(BoltRequest(body=body, mode="socket_mode")).status == 200
            [reply] = fake_slack.wait_for(lambda: fake_slack.responses(url), timeout=20)
            assert not held.is_set() and fake_slack.unfurls() == []  # answered while arXiv still held
            assert reply.get("blocks") or reply.get("text")
            held.set()
            deps.unfurls.join()
        finally:
            held.set()
            pool.shutdown(wait=True)
            sources.close()
        unfurled = {u for f in fake_slack.unfurls() for u in f["unfurls"]}
        assert len(fake_slack.unfurls()) == 18 and len(unfurled) == 90
        assert len(src.calls("/api/query")) <= 3  # was one per link (90), 3 s apart


def test_an_unknown_or_unreachable_paper_gets_no_unfurl_never_an_error_card(parts, fake_slack, fake_src):
    app, deps = parts
    paste(app, fake_slack, ["https://arxiv.org/abs/2612.99999"], n=3)
    fake_src.fail("/notes", 503, times=10)
    paste(app, fake_slack, [f"https://openreview.net/forum?id={fake_src.notes[0].forum}"], n=4)
    assert fake_slack.unfurls() == []
    assert [m["user"] for m in fake_slack.messages("C1")] == ["U1", "U1"]  # only the pasted messages
    assert not fake_slack.calls("chat.postMessage") and not fake_slack.calls("chat.postEphemeral")


def test_paper_add_fetches_says_new_then_says_it_was_there(parts, fake_slack, fake_src):
    app, deps = parts
    n = fake_src.notes[1]
    before = deps.store.count_papers()
    first = dispatch_command(app, fake_slack, f"add https://openreview.net/forum?id={n.forum}", user="U1", channel="C1")
    assert "New: added from OpenReview" in text_of(first) and deps.store.count_papers() == before + 1
    again = dispatch_command(app, fake_slack, f"add {n.forum}", user="U1", channel="C1")
    assert "Already in the library" in text_of(again) and deps.store.count_papers() == before + 1
    assert n.title.split(":")[0] in text_of(again) or n.title in text_of(again)


@pytest.mark.parametrize("garbage", ["add", "add hello world", "add https://example.com/paper.pdf", "add 12345"])
def test_paper_add_with_garbage_gets_a_clear_reply(parts, fake_slack, fake_src, garbage):
    app, deps = parts
    before = deps.store.count_papers()
    reply = dispatch_command(app, fake_slack, garbage, user="U1", channel="C1")
    assert "arXiv id or link" in text_of(reply) and "Traceback" not in text_of(reply)
    assert deps.store.count_papers() == before and fake_src.requests == []


@pytest.mark.parametrize("answer", ["[" * 100_000 + "]" * 100_000, '[{"notes": []}]',
                                    '{"notes": [{"id": "abcdEFGH12", "content": ["x"]}], "count": 1}'])
def test_paper_add_with_an_openreview_answer_of_the_wrong_shape_says_so(parts, fake_slack, fake_src, answer):
    from bot.later import SORRY

    app, deps = parts
    before = deps.store.count_papers()
    fake_src.fail("/notes", body=answer)
    reply = dispatch_command(app, fake_slack, f"add {fake_src.notes[0].forum}", user="U1", channel="C1")
    assert "usable answer from OpenReview" in text_of(reply) and SORRY not in text_of(reply)
    assert deps.store.count_papers() == before


def test_paper_add_of_two_papers_adds_the_first_and_says_to_add_the_other(parts, fake_slack, fake_src):
    app, deps = parts
    first, second = fake_src.papers[:2]
    reply = dispatch_command(app, fake_slack, f"add {first.arxiv_id} {second.arxiv_id}", user="U1", channel="C1")
    assert "New: added from arXiv" in text_of(reply) and "One paper at a time: /paper add each" in text_of(reply)


def test_paper_add_of_an_id_arxiv_does_not_know(parts, fake_slack):
    app, _ = parts
    reply = dispatch_command(app, fake_slack, "add 2612.99999", user="U1", channel="C1")
    assert "arXiv has no paper 2612.99999" in text_of(reply)


def test_feed_add_list_remove_with_admin_rules(parts, fake_slack):
    app, deps = parts
    r = dispatch_command(app, fake_slack, "feed add arxiv cs.LG", user="U1", channel="C1")
    assert "admins" in text_of(r) and deps.store.feeds("C1") == []
    r = dispatch_command(app, fake_slack, "feed add arxiv cs.LG", user="UADMIN", channel="C1")
    assert "Now following arXiv *cs.LG*" in text_of(r)
    r = dispatch_command(app, fake_slack, "feed add openreview ICLR.cc/2026/Conference", user="UADMIN", channel="C1")
    r = dispatch_command(app, fake_slack, "feed", user="U1", channel="C1")
    assert "1. arXiv *cs.LG*" in text_of(r) and "2. OpenReview *ICLR.cc/2026/Conference*" in text_of(r)
    r = dispatch_command(app, fake_slack, "feed add arxiv not/acat", user="UADMIN", channel="C1")
    assert "not an arXiv category" in text_of(r)
    r = dispatch_command(app, fake_slack, "feed remove 1 confirm", user="UADMIN", channel="C1")
    assert "Stopped following arXiv *cs.LG*" in text_of(r)
    assert [f["target"] for f in deps.store.feeds("C1")] == ["ICLR.cc/2026/Conference"]
    r = dispatch_command(app, fake_slack, "feed remove 7", user="UADMIN", channel="C1")
    assert "number of a feed" in text_of(r)


def test_a_channel_following_cs_lg_gets_a_paper_of_the_day_from_that_announcement(
        hashing_store, fake_slack, fake_src):
    from bot.posting import post_daily

    announced = make_papers(4, seed=5)
    fake_src.listings["cs.LG"] = ([("new", p) for p in announced], datetime(2026, 12, 1, 1, tzinfo=timezone.utc))
    sources = Sources.create(arxiv_api=fake_src.api, arxiv_rss=fake_src.rss, openreview_api=fake_src.url,
                             sleep=lambda s: None)
    # Monday 2026-11-30, 20:30 US Eastern: the feeds job runs after the announcement
    clock = Clock(datetime(2026, 12, 1, 1, 30, tzinfo=timezone.utc))
    settings = make_settings(slack_api_url=fake_slack.api_url)
    deps = make_deps(settings, hashing_store, Searcher(hashing_store, HashingEmbedder()), clock=clock,
                     sources=sources)
    app = create_app(deps, client=WebClient(token=BOT_TOKEN, base_url=fake_slack.api_url),
                     process_before_response=True)
    dispatch_command(app, fake_slack, "feed add arxiv cs.LG", user="U1", channel="C1")
    dispatch_command(app, fake_slack, "interests add diffusion transformer", user="U1", channel="C1")
    dispatch_command(app, fake_slack, "interests add diffusion transformer", user="U1", channel="C2")
    assert DailyService(deps).poll_feeds_now() == {("arxiv", "cs.LG"): "new"}
    ids = {hashing_store.lookup_keys([f"ext:arxiv:{p.arxiv_id}"])[f"ext:arxiv:{p.arxiv_id}"][0] for p in announced}
    # Tuesday morning's post (a weekday after the announcement)
    morning = datetime(2026, 12, 1, 9, 0, tzinfo=timezone.utc)
    for channel in ("C1", "C2"):
        result = post_daily(deps.slack, hashing_store, deps.searcher, channel, morning, feedback=deps.feedback,
                            settings=settings, sleep=lambda s: None)
        assert result.status == "posted", result
    c1 = hashing_store.get_post("C1", "2026-12-01")
    assert c1["paper_id"] in ids
    [msg] = [m for m in fake_slack.messages("C1") if m.get("user") != "U1" and "new on arXiv today" in text_of(m)]
    c2 = hashing_store.get_post("C2", "2026-12-01")
    assert "new on arXiv" not in json.dumps(c2["pick"])  # no feeds: the library, as before
    sources.close()


def test_the_feeds_job_runs_after_each_announcement_and_again_later_never_friday_or_saturday():
    from zoneinfo import ZoneInfo

    from bot.feed_polls import FEEDS_JOB, FEEDS_RETRY_JOB, feed_triggers

    et = ZoneInfo("America/New_York")
    triggers = dict(feed_triggers())
    thu_night = datetime(2026, 12, 3, 21, 0, tzinfo=et)  # Thursday, after that day's 20:30 poll
    assert triggers[FEEDS_RETRY_JOB].get_next_fire_time(None, thu_night) == datetime(2026, 12, 3, 23, 30, tzinfo=et)
    # no announcement Friday or Saturday: the next poll is Sunday's
    assert triggers[FEEDS_JOB].get_next_fire_time(None, thu_night) == datetime(2026, 12, 6, 20, 30, tzinfo=et)


def test_the_feeds_last_due_poll_is_per_kind_arxiv_counting_its_retry():
    from zoneinfo import ZoneInfo

    from bot.feed_polls import last_feed_polls

    et = ZoneInfo("America/New_York")
    saturday = datetime(2026, 12, 5, 12, 0, tzinfo=et)  # no poll Friday or Saturday: Thursday's count
    assert last_feed_polls(saturday) == {"arxiv": datetime(2026, 12, 3, 23, 30, tzinfo=et).timestamp(),
                                         "openreview": datetime(2026, 12, 3, 20, 30, tzinfo=et).timestamp()}


class Killed(BaseException):
    """What kill -9 does to a harvest: it stops between two steps and records nothing more."""


def test_a_feed_poll_killed_mid_harvest_is_finished_by_the_next_lease_holder(hashing_store, fake_slack, fake_src):
    from store.sources import feed_source, harvest_openreview, poll_feed

    venue = "ICLR.cc/2026/Conference"
    announced = make_papers(3, seed=5)
    fake_src.listings["cs.LG"] = ([("new", p) for p in announced], datetime(2026, 12, 1, 1, tzinfo=timezone.utc))
    fake_src.notes = on_openreview(make_papers(4, seed=6), venueid=venue)
    sources = Sources.create(arxiv_api=fake_src.api, arxiv_rss=fake_src.rss, openreview_api=fake_src.url,
                             sleep=lambda s: None)
    deps = make_deps(make_settings(slack_api_url=fake_slack.api_url), hashing_store,
                     Searcher(hashing_store, HashingEmbedder()), clock=Clock(NOW), sources=sources)
    now = NOW.timestamp()
    hashing_store.add_feed("C1", "arxiv", "cs.LG", "UADMIN", now=now)
    hashing_store.add_feed("C2", "openreview", venue, "UADMIN", now=now)
    library = hashing_store.count_papers()

    # The dead holder's poll, after last night's feeds job: cs.LG read to the end, then the venue's
    # first page stored, and the process killed before the second.
    poll_feed(hashing_store, sources, "arxiv", "cs.LG", deps.embedder, now=now)

    def killed(done, total):
        raise Killed

    with pytest.raises(Killed):
        harvest_openreview(hashing_store, sources, venue, deps.embedder, now=now, page_size=2, restart=True,
                           progress=killed)
    assert hashing_store.count_papers() == library + 3 + 2
    assert not hashing_store.source_state(feed_source("openreview", venue)).get("last_success")
    seen = len(fake_src.requests)

    scheduler = DailyService(deps)
    scheduler.take_over_now()  # the replica that takes the sweeps' lease over
    fetched = [path for path, _, _ in fake_src.requests[seen:]]
    assert fetched and set(fetched) == {"/notes"}, fetched  # cs.LG had finished: not read again
    assert hashing_store.count_papers() == library + 3 + 4  # each paper once
    keys = [f"ext:openreview:{n.forum.lower()}" for n in fake_src.notes]
    found = hashing_store.lookup_keys(keys)
    assert all(len(found.get(k, [])) == 1 for k in keys), found
    assert {found[k][0] for k in keys} <= set(hashing_store.announced_since(0, [f"openreview:{venue}"]))
    state = hashing_store.source_state(feed_source("openreview", venue))
    assert state["last_success"] and state["cursor"]["done"]

    scheduler.take_over_now()  # nothing is due any more
    assert len(fake_src.requests) == seen + len(fetched)
    sources.close()


# -- an interest given as a paper ---------------------------------------------------------------
def test_an_interest_given_as_an_arxiv_link_steers_by_that_paper(parts, fake_slack, fake_src):
    app, deps = parts
    p = fake_src.papers[1]
    reply = dispatch_command(app, fake_slack, f"interests add <https://arxiv.org/abs/{p.arxiv_id}>",
                             user="U1", channel="C1")
    [row] = deps.store.interests("C1")
    paper = deps.store.get_paper(row["paper_id"]) if row.get("paper_id") else None
    # a link is no topic: its words would steer the pick nowhere; the paper behind it does
    assert paper is not None and p.title.split(":")[0] in paper.title
    assert "arxiv.org" not in row["text"] and "arxiv.org" not in text_of(reply).split("Added")[1]


def test_an_interest_given_as_a_library_id_steers_by_that_paper(parts, fake_slack):
    app, deps = parts
    paper = deps.store.list_papers(limit=1)[0]
    dispatch_command(app, fake_slack, f"interests add {paper.id}", user="U1", channel="C1")
    [row] = deps.store.interests("C1")
    assert row.get("paper_id") == paper.id and paper.id not in row["text"]


def test_an_interest_given_as_a_link_arxiv_cannot_answer_for_adds_nothing_and_says_why(parts, fake_slack,
                                                                                        fake_src):
    app, deps = parts
    fake_src.fail("/api/query", 503, times=20)
    reply = dispatch_command(app, fake_slack, "interests add https://arxiv.org/abs/2611.00001",
                             user="U1", channel="C1")
    assert deps.store.interests("C1") == []
    assert "couldn't" in text_of(reply) and "arXiv" in text_of(reply) and "nothing was added" in text_of(reply)


def test_a_feed_its_source_cannot_be_reached_for_says_so_in_the_feed_list(parts, fake_slack, fake_src):
    """A team following arXiv from a network that can't reach it heard "Now following" and then nothing,
    ever: the list now says the feed is failing, since when, and that nothing comes from it meanwhile."""
    app, deps = parts
    dispatch_command(app, fake_slack, "feed add arxiv cs.LG", user="UADMIN", channel="C1")
    before = text_of(dispatch_command(app, fake_slack, "feed", user="U1", channel="C1"))
    assert "couldn't reach" not in before and "not read yet" in before
    fake_src.fail("/rss/", 503, times=50)
    fake_src.fail("/api/query", 503, times=50)
    from store.sources import poll_feeds

    polled = poll_feeds(deps.store, deps.sources, deps.embedder, now=NOW.timestamp())  # what the feeds job runs
    assert polled and "new" not in polled.values()
    listed = text_of(dispatch_command(app, fake_slack, "feed", user="U1", channel="C1"))
    assert "couldn't reach arXiv since Tue 1 Dec" in listed and "no new papers from it until it answers" in listed


def test_a_healthy_feed_says_when_it_was_last_read_and_how_many_papers_it_brought(parts, fake_slack, fake_src):
    """A feed that worked said nothing at all in the list, so a team could not tell it was alive: it now
    says when it was last read, in the channel's time zone, and how many new papers that night brought
    (the later read of the same listing keeps its count; a night with nothing says so)."""
    from store.sources import poll_feeds

    app, deps = parts
    dispatch_command(app, fake_slack, "schedule 9:00 America/New_York", user="UADMIN", channel="C1")
    dispatch_command(app, fake_slack, "feed add arxiv cs.LG", user="UADMIN", channel="C1")
    night = make_papers(3, seed=6)
    fake_src.listings["cs.LG"] = ([*(("new", p) for p in night), ("replace", make_papers(1, seed=4)[0])],
                                  datetime(2026, 12, 2, 1, tzinfo=timezone.utc))  # Tuesday's announcement
    poll = lambda at: poll_feeds(deps.store, deps.sources, deps.embedder, now=at)  # what the feeds job runs
    assert poll(_evening(2, 12)) == {("arxiv", "cs.LG"): "new"}  # 20:30 US Eastern
    assert poll(_evening(2, 12) + 3 * 3600 + 600) == {("arxiv", "cs.LG"): "unchanged"}  # the retry, 23:40
    listed = text_of(dispatch_command(app, fake_slack, "feed", user="U1", channel="C1"))
    assert "1. arXiv *cs.LG*" in listed and "read Tue 1 Dec 23:40 (3 new papers)" in listed
    fake_src.listings["cs.LG"] = ([], datetime(2026, 12, 3, 1, tzinfo=timezone.utc))  # nothing on Wednesday
    assert poll(_evening(3, 12)) == {("arxiv", "cs.LG"): "empty"}
    listed = text_of(dispatch_command(app, fake_slack, "feed", user="U1", channel="C1"))
    assert "read Wed 2 Dec 20:30 (no new papers)" in listed


def _evening(day: int, month: int = 11) -> float:
    """The feeds job's poll at 20:30 US Eastern on the evening before 2026-<month>-<day> (EST = UTC-5)."""
    return datetime(2026, month, day, 1, 30, tzinfo=timezone.utc).timestamp()


def test_a_holiday_with_an_empty_listing_is_read_not_missed_in_the_feed_list(parts, fake_slack, fake_src):
    """arXiv announces nothing on US Thanksgiving (Thursday 26 Nov 2026): its listing that night is empty.
    The next announcement took that night for a missed one, asked the API for it and, with the API
    busy, the feed list said arXiv could not be reached. An empty listing read is a night read."""
    from store.sources import poll_feeds

    app, deps = parts
    dispatch_command(app, fake_slack, "feed add arxiv cs.LG", user="UADMIN", channel="C1")
    wed, sun = make_papers(2, seed=7), make_papers(2, seed=8)
    poll = lambda at: poll_feeds(deps.store, deps.sources, deps.embedder, now=at)  # what the feeds job runs
    fake_src.listings["cs.LG"] = ([("new", p) for p in wed], datetime(2026, 11, 26, 1, tzinfo=timezone.utc))
    assert poll(_evening(26)) == {("arxiv", "cs.LG"): "new"}
    fake_src.listings["cs.LG"] = ([], datetime(2026, 11, 27, 1, tzinfo=timezone.utc))  # Thanksgiving
    assert poll(_evening(27)) == poll(_evening(27) + 3 * 3600) == {("arxiv", "cs.LG"): "empty"}
    fake_src.listings["cs.LG"] = ([("new", p) for p in sun], datetime(2026, 11, 30, 1, tzinfo=timezone.utc))
    fake_src.fail("/api/query", 503, times=50)  # the API busy: a catch-up would fail
    assert poll(_evening(30)) == {("arxiv", "cs.LG"): "new"}
    assert fake_src.calls("/api/query") == []  # nothing was missed, so nothing to catch up
    listed = text_of(dispatch_command(app, fake_slack, "feed", user="U1", channel="C1"))
    assert "1. arXiv *cs.LG*" in listed and "couldn't reach" not in listed and "not read yet" not in listed


def test_a_listing_left_as_it_was_on_a_holiday_and_caught_up_is_no_fault_in_the_feed_list(
        parts, fake_slack, fake_src):
    """Where a holiday's listing is left as the night before's, the bot takes it for stale and asks
    the API, which answers (with nothing new). The feed was read: the list said arXiv could not be reached."""
    from store.sources import poll_feeds

    app, deps = parts
    dispatch_command(app, fake_slack, "feed add arxiv cs.LG", user="UADMIN", channel="C1")
    wed = make_papers(2, seed=7, start=datetime(2026, 11, 25, 12, tzinfo=timezone.utc))
    fake_src.papers = wed
    fake_src.listings["cs.LG"] = ([("new", p) for p in wed], datetime(2026, 11, 26, 1, tzinfo=timezone.utc))
    poll = lambda at: poll_feeds(deps.store, deps.sources, deps.embedder, now=at)
    assert poll(_evening(26)) == {("arxiv", "cs.LG"): "new"}
    assert poll(_evening(27)) == {("arxiv", "cs.LG"): "stale"}  # Thanksgiving: the same listing
    assert fake_src.calls("/api/query")  # asked, and answered
    listed = text_of(dispatch_command(app, fake_slack, "feed", user="U1", channel="C1"))
    assert "1. arXiv *cs.LG*" in listed and "couldn't reach" not in listed
    assert "stale" in deps.store.source_state("arxiv-rss:cs.LG")["last_error"]  # for `paperclub feeds`


# -- a paper named by its link -------------------------------------------------------------------
def test_a_paper_named_by_its_link_is_that_paper_and_one_the_library_lacks_is_never_a_guess(parts, fake_slack,
                                                                                           fake_src):
    """`/paper summary https://openreview.net/forum?id=…` showed an unrelated library paper as the
    "Best match" for the link's words ("https", "forum"); `save 2501.01234` said "No paper matches"."""
    app, deps = parts
    p = fake_src.papers[1]
    dispatch_command(app, fake_slack, f"add {p.arxiv_id}", user="U1", channel="C1")
    known = text_of(dispatch_command(app, fake_slack, f"summary <https://arxiv.org/abs/{p.arxiv_id}v2>",
                                     user="U1", channel="C1"))
    assert p.title.split(":")[0] in known and "Best match" not in known
    asked = len(fake_src.requests)
    for line in ("summary https://openreview.net/forum?id=abc123XYZ",
                 "similar <https://arxiv.org/abs/2612.99999>",
                 "save 2612.99999",
                 "for-me arXiv:2612.99999"):
        reply = text_of(dispatch_command(app, fake_slack, line, user="U1", channel="C1"))
        assert "Best match" not in reply and "More like" not in reply and "Saved" not in reply, line
        assert "not in the library" in reply and "/paper add" in reply, line
    assert deps.store.saved_papers("U1") == [] and len(fake_src.requests) == asked


def test_a_search_for_a_paper_link_or_arxiv_id_is_that_paper_or_says_the_library_lacks_it(parts, fake_slack,
                                                                                         fake_src):
    """`/paper search https://arxiv.org/abs/…` searched for papers saying "https"; a search for a link
    or an arXiv id now shows that paper, or says it is not in the library yet, as `summary` does."""
    app, deps = parts
    p = fake_src.papers[1]
    dispatch_command(app, fake_slack, f"add {p.arxiv_id}", user="U1", channel="C1")
    for line in (f"search <https://arxiv.org/abs/{p.arxiv_id}v2>", f"search {p.arxiv_id}",
                 f"https://arxiv.org/abs/{p.arxiv_id}"):
        known = text_of(dispatch_command(app, fake_slack, line, user="U1", channel="C1"))
        assert p.title.split(":")[0] in known and "Top " not in known and "No good match" not in known, line
    asked = len(fake_src.requests)
    for line in ("search https://openreview.net/forum?id=abc123XYZ", "search <https://arxiv.org/abs/2612.99999>",
                 "search 2612.99999", "find arXiv:2612.99999", "https://arxiv.org/abs/2612.99999"):
        reply = text_of(dispatch_command(app, fake_slack, line, user="U1", channel="C1"))
        assert "Top " not in reply and "No good match" not in reply and "closest" not in reply, line
        assert "is not in the library yet" in reply and "/paper add" in reply, line
    assert len(fake_src.requests) == asked


def test_one_paper_linked_twice_in_a_message_gets_one_card(parts, fake_slack, fake_src):
    """"https://arxiv.org/abs/X v2 (pdf: https://arxiv.org/pdf/Xv2)" got two identical cards under the
    message, Save and For me twice over; the paper's first link now gets the card, another paper its own."""
    app, _ = parts
    p, other = fake_src.papers[0], fake_src.papers[1]
    urls = [f"https://arxiv.org/abs/{p.arxiv_id}v2", f"https://arxiv.org/pdf/{p.arxiv_id}v2.pdf",
            f"https://arxiv.org/abs/{other.arxiv_id}"]
    paste(app, fake_slack, urls, n=20)
    [unfurl] = fake_slack.unfurls()
    assert list(unfurl["unfurls"]) == [urls[0], urls[2]]
