"""The paper-of-the-day pick: no repeats, fair to every member, diverse, labelled exploration, explained.

Most tests use a synthetic corpus of topic clusters (vectors we control, so
"relevant" is known exactly); one uses the real model on the bundled abstracts.
The date is always passed in.
"""
import re
import time
from collections import Counter
from dataclasses import replace
from datetime import date, timedelta

import numpy as np
import pytest

from store import Searcher, interests_for, pick_for_day
from store.search import closeness
from store.pick import (
    BREADTH,
    DailyPick,
    EXPLORATION,
    INTEREST,
    Interest,
    PastPost,
    PickSettings,
    is_exploration_day,
    pick_daily,
    typicality,
)

DIM = 64
START = date(2024, 3, 1)


def unit(v):
    v = np.asarray(v, dtype=np.float32)
    return v / np.linalg.norm(v)


def corpus(topics: int = 6, per_topic: int = 20, noise: float = 0.35, seed: int = 7):
    """Papers in `topics` clusters: ids like 't2-p05'; returns ids, matrix, topic centres."""
    rng = np.random.default_rng(seed)
    centres = [unit(rng.normal(size=DIM)) for _ in range(topics)]
    ids, rows = [], []
    for t, c in enumerate(centres):
        for p in range(per_topic):
            ids.append(f"t{t}-p{p:02d}")
            rows.append(unit(c + noise * rng.normal(size=DIM) / np.sqrt(DIM) * 4))
    return ids, np.stack(rows), centres


def topic_of(pid: str) -> int:
    return int(pid.split("-")[0][1:])


def run_days(channel, ids, matrix, interests, days, *, settings=PickSettings(), start=START):
    """Simulate `days` daily picks, feeding each one back as history."""
    history, picks = [], []
    for k in range(days):
        day = start + timedelta(days=k)
        pick = pick_daily(channel, day, ids, matrix, interests, history, settings=settings)
        if pick is None:
            break
        picks.append(pick)
        history.append(PastPost(day, pick.paper_id, pick.choice.member, pick.exploration,
                                tuple(c.paper_id for c in pick.runners_up)))
    return picks


def test_never_repeats_over_the_whole_corpus_then_says_nothing_left():
    ids, matrix, centres = corpus(topics=4, per_topic=15)
    interests = [Interest(1, "topic zero", "UA", centres[0]), Interest(2, "topic two", "UB", centres[2])]
    picks = run_days("C1", ids, matrix, interests, days=200)
    posted = [p.paper_id for p in picks]
    assert len(posted) == len(set(posted)) == len(ids)  # every paper posted once, none twice
    # Runners-up are suggestions (issue 14): never one already posted, and not used up by being shown.
    assert all(c.paper_id not in posted[:k] for k, p in enumerate(picks) for c in p.runners_up)
    history = [PastPost(START + timedelta(days=i), pid) for i, pid in enumerate(ids)]
    assert pick_daily("C1", START + timedelta(days=len(ids)), ids, matrix, interests, history) is None


def test_fair_rotation_one_prolific_member_cannot_own_the_feed():
    ids, matrix, centres = corpus(topics=6, per_topic=40)
    interests = [Interest(i + 1, f"alice topic {i}", "alice", centres[i]) for i in range(4)]
    interests += [Interest(5, "bob topic", "bob", centres[4]), Interest(6, "carol topic", "carol", centres[5])]
    picks = run_days("C1", ids, matrix, interests, days=30)
    served = Counter(p.choice.member for p in picks if p.choice.kind == INTEREST)
    assert set(served) == {"alice", "bob", "carol"}
    assert max(served.values()) - min(served.values()) <= 1, served
    # and each member is served with a paper from their own topics
    for p in picks:
        if p.choice.kind == INTEREST:
            own = [i.vector for i in interests if i.added_by == p.choice.member]
            assert topic_of(p.paper_id) in [next(t for t, c in enumerate(centres) if c is v) for v in own]


def test_a_member_who_joins_later_is_served_next():
    ids, matrix, centres = corpus()
    interests = [Interest(1, "alice topic", "alice", centres[0]), Interest(2, "bob topic", "bob", centres[1])]
    history = [PastPost(START + timedelta(days=k), f"t{k % 2}-p{k:02d}", ["alice", "bob"][k % 2])
               for k in range(10)]
    day = START + timedelta(days=10)
    interests.append(Interest(3, "dave topic", "dave", centres[3]))
    assert not is_exploration_day("C1", day)
    pick = pick_daily("C1", day, ids, matrix, interests, history)
    assert pick.choice.member == "dave" and topic_of(pick.paper_id) == 3


def test_best_interest_not_the_average():
    """A paper squarely on one interest beats one halfway between two (an average would prefer it)."""
    ids, matrix, centres = corpus(topics=2, per_topic=1, noise=0.0)
    middle = unit(centres[0] + centres[1])
    ids = ["on-topic", "in-between"]
    matrix = np.stack([centres[0], middle])
    interests = [Interest(1, "a", "UA", centres[0]), Interest(2, "b", "UA", centres[1])]
    day = next(START + timedelta(days=k) for k in range(30)
               if not is_exploration_day("C1", START + timedelta(days=k)))
    pick = pick_daily("C1", day, ids, matrix, interests, [], settings=PickSettings(runners_up=0))
    assert pick.paper_id == "on-topic"
    assert pick.choice.similarity == pytest.approx(1.0, abs=1e-5)


def test_a_paper_at_the_heart_of_an_area_beats_an_equally_close_outlier():
    """In a library big enough for areas to show, a paper typical of its area wins over a stray one
    a shade closer to the interest; a small library is ranked by closeness alone."""
    ids, matrix, centres = corpus(topics=6, per_topic=200)
    rng = np.random.default_rng(3)
    interest = unit(centres[0] + 0.6 * unit(rng.normal(size=DIM)))
    closest = float((matrix[:200] @ interest).max())  # topic 0's closest paper
    away = rng.normal(size=DIM)
    away = unit(away - (away @ interest) * interest)  # orthogonal to the interest, off every cluster
    c = closest + 0.02
    stray = unit(c * interest + np.sqrt(1 - c * c) * away)
    ids, matrix = ids + ["stray"], np.vstack([matrix, stray]).astype(np.float32)
    interests = [Interest(1, "topic zero", "UANN", interest)]
    settings = PickSettings(prf_docs=0, exploration_rate=0.0)

    def pick(settings, rows=None):
        rows = list(range(len(ids))) if rows is None else rows
        return pick_daily("C1", START, [ids[i] for i in rows], matrix[rows], interests, [],
                          settings=settings, typical=typicality(matrix[rows], settings)).paper_id

    chosen = pick(settings)
    assert chosen != "stray" and topic_of(chosen) == 0
    assert pick(PickSettings(prf_docs=0, exploration_rate=0.0, typical_weight=0.0)) == "stray"
    small = list(range(0, 1200, 2)) + [len(ids) - 1]  # 601 papers, the stray among them
    assert pick(settings, small) == "stray"


def test_an_interest_as_broad_as_the_library_gets_papers_from_the_thick_of_its_areas():
    """"machine learning" in a library of ML papers says nothing of where to look: its closest papers
    are the vaguest ones, halfway between every area. Such an interest is read as "anything here",
    and the day goes to a paper typical of an area; a specific interest is ranked as before."""
    ids, matrix, centres = corpus(topics=6, per_topic=200)
    rng = np.random.default_rng(5)
    middle = unit(np.mean(centres, axis=0))
    vague = [unit(middle + unit(rng.normal(size=DIM))) for _ in range(3)]  # overviews of it all
    ids = ids + [f"overview-{k}" for k in range(3)]
    matrix = np.vstack([matrix, vague]).astype(np.float32)
    settings = PickSettings(exploration_rate=0.0)
    typical = typicality(matrix, settings)

    def day(interest, settings=settings):
        return pick_daily("C1", START, ids, matrix, [Interest(1, "x", "UA", interest)], [],
                          settings=settings, typical=typical)

    def picks(interest, settings=settings):
        pick = day(interest, settings)
        return [c.paper_id for c in [pick.choice, *pick.shown]]

    broad = unit(matrix.mean(axis=0))
    assert not [p for p in picks(broad) if p.startswith("overview")]
    assert picks(broad, replace(settings, specific_margin=0))[0].startswith("overview")  # read word for word
    # The explanation says what chose the paper: not the interest's words, which matched nothing.
    assert day(broad).explain() == ("for *x* (added by @UA), as wide as the library: "
                                    "a paper from the thick of one of its areas")
    assert day(broad, replace(settings, specific_margin=0)).explain().startswith("matches *x*")
    specific = picks(centres[2])
    assert all(topic_of(p) == 2 for p in specific)
    assert specific == picks(centres[2], replace(settings, specific_margin=0))
    assert day(centres[2]).explain().startswith("matches *x* (added by @UA), ")

    # Nothing lies "just outside" an interest that wide: the exploration slot says what it is instead.
    explore = next(d for d in (START + timedelta(days=k) for k in range(100)) if is_exploration_day("C1", d))

    def also(*vectors):
        interests = [Interest(n, t, "UA", v) for n, (t, v) in enumerate(zip(("x", "y"), vectors))]
        return pick_daily("C1", explore, ids, matrix, interests, [], typical=typical).also.explain(main=False)

    assert also(broad) == "exploration: a paper beyond the next ones your turns bring"
    assert also(centres[2]).startswith("exploration: a paper just outside your interests, next to *x*")
    assert also(broad, centres[2]).startswith("exploration: a paper just outside your interests, next to *y*")


def test_diversity_keeps_days_from_piling_onto_one_topic():
    """One interest sitting between two sub-topics: the days alternate instead of exhausting one."""
    rng = np.random.default_rng(3)
    a, b = unit(rng.normal(size=DIM)), unit(rng.normal(size=DIM))
    interest = unit(a + 0.9 * b)  # a little closer to A, so relevance alone would take all of A first
    ids, rows = [], []
    for name, centre in (("A", a), ("B", b)):
        for p in range(10):
            ids.append(f"{name}{p}")
            rows.append(unit(centre + 0.02 * rng.normal(size=DIM)))
    matrix = np.stack(rows)
    settings = PickSettings(runners_up=0, exploration_rate=0)
    picks = run_days("C1", ids, matrix, [Interest(1, "the field", "UA", interest)], 6, settings=settings)
    topics = [p.paper_id[0] for p in picks]
    assert set(topics[:3]) == {"A", "B"}, topics
    no_mmr = run_days("C1", ids, matrix, [Interest(1, "the field", "UA", interest)], 6,
                      settings=PickSettings(runners_up=0, exploration_rate=0, mmr_lambda=1.0))
    assert {p.paper_id[0] for p in no_mmr} == {"A"}  # the contrast: without MMR it piles up


def test_exploration_is_about_one_day_in_ten_deterministic_and_labelled():
    days = [START + timedelta(days=k) for k in range(2000)]
    share = sum(is_exploration_day("C1", d) for d in days) / len(days)
    assert 0.08 < share < 0.12
    assert [is_exploration_day("C1", d) for d in days[:100]] == [is_exploration_day("C1", d) for d in days[:100]]
    assert [is_exploration_day("C1", d) for d in days[:100]] != [is_exploration_day("C2", d) for d in days[:100]]

    ids, matrix, centres = corpus(topics=6, per_topic=20)
    interests = [Interest(1, "video understanding", "alice", centres[0])]
    day = next(d for d in days if is_exploration_day("C1", d))
    pick = pick_daily("C1", day, ids, matrix, interests, [], settings=PickSettings(explore_in_main=True))
    assert pick.exploration and pick.choice.kind == EXPLORATION
    assert topic_of(pick.paper_id) != 0  # outside the interest
    assert pick.explain().startswith("exploration day")
    assert "video understanding" in pick.explain()  # says how far it is from what the team asked for
    # the team still gets its usual matches as runners-up
    assert all(c.kind == INTEREST and topic_of(c.paper_id) == 0 for c in pick.runners_up)


def test_exploration_never_takes_the_main_slot_by_default():
    """The paper of the day belongs to the served member: exploration gets its own labelled slot."""
    ids, matrix, centres = corpus(topics=6, per_topic=70)
    interests = [Interest(1, "video understanding", "alice", centres[0])]
    days = [START + timedelta(days=k) for k in range(60)]
    history, slots = [], []
    for day in days:
        pick = pick_daily("C1", day, ids, matrix, interests, history)
        assert not pick.exploration and pick.choice.kind == INTEREST and topic_of(pick.paper_id) == 0
        assert all(c.kind == INTEREST for c in pick.runners_up)
        if pick.also is not None:
            slots.append(pick.also)
            assert pick.also.paper_id not in [pick.paper_id, *[c.paper_id for c in pick.runners_up]]
        history.append(PastPost(day, pick.paper_id, pick.choice.member, pick.exploration,
                                tuple(c.paper_id for c in pick.shown)))
    assert len(slots) == sum(is_exploration_day("C1", d) for d in days) > 0
    for also in slots:
        assert also.kind == EXPLORATION
        assert also.explain(main=False).startswith("exploration: a paper just outside your interests")
    stored = DailyPick.from_dict(pick_daily("C1", days[[is_exploration_day("C1", d) for d in days].index(True)],
                                            ids, matrix, interests, []).to_dict())
    assert stored.also is not None and stored.also.kind == EXPLORATION


def test_the_also_today_card_never_brings_back_a_paper_the_channel_was_shown():
    """The "Also today" card is shown to the whole team, chosen for nobody: a paper the channel saw in
    a day's message before, on that card or as a runner-up, judged or not, is not brought back."""
    ids, matrix, centres = corpus(topics=6, per_topic=70)
    interests = [Interest(1, "video understanding", "alice", centres[0])]
    first, second = [d for d in (START + timedelta(days=k) for k in range(60)) if is_exploration_day("C1", d)][:2]
    day1 = pick_daily("C1", first, ids, matrix, interests, [])
    shown = [PastPost(first, day1.paper_id, "alice", False, (day1.also.paper_id,))]
    # The next exploration day brings another card; had that one been shown too, another again.
    again = pick_daily("C1", second, ids, matrix, interests, shown).also.paper_id
    assert again != day1.also.paper_id
    shown = [PastPost(first, day1.paper_id, "alice", False, (day1.also.paper_id, again))]
    later = pick_daily("C1", second, ids, matrix, interests, shown).also
    assert later is not None and later.paper_id not in {day1.also.paper_id, again}


def test_same_channel_and_date_give_the_same_pick():
    ids, matrix, centres = corpus()
    interests = [Interest(1, "x", "UA", centres[0]), Interest(2, "y", "UB", centres[3])]
    history = [PastPost(START, "t0-p00", "UA")]
    day = START + timedelta(days=1)
    first = pick_daily("C1", day, ids, matrix, interests, history)
    again = pick_daily("C1", day, ids, matrix, interests, list(reversed(history)))
    assert first.to_dict() == again.to_dict()


def test_history_from_that_day_or_later_is_ignored_so_a_day_can_be_replayed():
    ids, matrix, centres = corpus()
    interests = [Interest(1, "x", "UA", centres[0])]
    day = START + timedelta(days=3)
    before = pick_daily("C1", day, ids, matrix, interests, [])
    future = [PastPost(day, before.paper_id, "UA"), PastPost(day + timedelta(days=1), "t0-p01", "UA")]
    assert pick_daily("C1", day, ids, matrix, interests, future).paper_id == before.paper_id


def test_explanation_names_the_interest_who_added_it_and_how_close_in_words():
    ids, matrix, centres = corpus()
    interests = [Interest(1, "video understanding", "U123", centres[0])]
    day = next(START + timedelta(days=k) for k in range(30)
               if not is_exploration_day("C1", START + timedelta(days=k)))
    pick = pick_daily("C1", day, ids, matrix, interests, [])
    text = pick.explain(lambda u: f"<@{u}>")
    assert text == f"matches *video understanding* (added by <@U123>), {closeness(pick.choice.similarity)}"
    assert not re.search(r"\d\.\d", text)  # no raw cosine: people read words


def test_an_exploration_paper_says_how_far_it_is_in_words():
    ids, matrix, centres = corpus()
    interests = [Interest(1, "video understanding", "U123", centres[0])]
    day = next(START + timedelta(days=k) for k in range(400) if is_exploration_day("C1", START + timedelta(days=k)))
    also = pick_daily("C1", day, ids, matrix, interests, []).also
    text = also.explain(main=False)
    assert f"next to *video understanding* ({closeness(also.similarity)})" in text
    assert not re.search(r"\d\.\d", text)


def test_no_interests_picks_for_breadth():
    ids, matrix, _ = corpus(topics=6, per_topic=20)
    picks = run_days("C1", ids, matrix, [], 6)
    assert all(p.no_interests and p.choice.kind == BREADTH for p in picks)
    assert "no interests yet" in picks[0].explain()
    # breadth: one day's three papers come from three different areas, and days don't repeat an area
    assert len({topic_of(p.paper_id) for p in [picks[0].choice, *picks[0].runners_up]}) == 3
    assert len({topic_of(p.paper_id) for p in picks[:3]}) == 3


def test_feedback_hook_moves_the_pick_and_is_explained():
    ids, matrix, centres = corpus()
    interests = [Interest(1, "x", "UA", centres[0])]
    day = next(START + timedelta(days=k) for k in range(30)
               if not is_exploration_day("C1", START + timedelta(days=k)))
    plain = pick_daily("C1", day, ids, matrix, interests, [])
    other = next(pid for pid in ids if topic_of(pid) == 0 and pid != plain.paper_id)
    boosted = pick_daily("C1", day, ids, matrix, interests, [],
                         feedback={other: (0.5, "close to SPIKE, which got 🔥×2 from @bob")})
    assert boosted.paper_id == other
    assert boosted.explain().endswith("close to SPIKE, which got 🔥×2 from @bob")
    assert boosted.choice.feedback == pytest.approx(0.5)


def test_nothing_left_is_none_not_an_error():
    ids, matrix, centres = corpus(topics=1, per_topic=2)
    history = [PastPost(START, ids[0], runners_up=(ids[1],)), PastPost(START + timedelta(days=1), ids[1])]
    assert pick_daily("C1", START + timedelta(days=2), ids, matrix, [], history) is None
    assert pick_daily("C1", START, [], np.zeros((0, DIM)), [], []) is None


# -- with the store ------------------------------------------------------------------------
def test_interests_are_re_embedded_when_the_model_changes(hashing_store):
    from store import HashingEmbedder

    old, new = HashingEmbedder(64, name="old-model"), HashingEmbedder(256, name="hashing-256")
    hashing_store.add_interest("C1", "video understanding", "UA", model=old.name,
                               vector=old.encode(["video understanding"])[0], now=time.time())
    got = interests_for(hashing_store, "C1", new)
    assert got[0].vector.shape == (256,)
    assert hashing_store.interests("C1")[0]["model"] == "hashing-256"


def test_real_model_picks_a_paper_about_the_interest(seed_store, real_embedder):
    """Quality where it matters: 'video understanding' on the bundled ICLR 2026 abstracts."""
    text = "video understanding with multimodal language models"
    seed_store.add_interest("C1", text, "UA", model=real_embedder.name,
                            vector=real_embedder.encode([text])[0], now=time.time())
    day = next(START + timedelta(days=k) for k in range(30)
               if not is_exploration_day("C1", START + timedelta(days=k)))
    pick = pick_for_day(seed_store, Searcher(seed_store, real_embedder), "C1", day, feedback=None)
    paper = seed_store.get_paper(pick.paper_id)
    assert "video" in (paper.abstract + paper.headline).lower()
    assert pick.choice.similarity > 0.3
