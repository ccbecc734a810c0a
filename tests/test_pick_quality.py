"""The paper of the day against the naive pick (issue 14), in small synthetic worlds.

Vectors we control, so "on topic" is known exactly: runners-up stay available,
members sharing an interest take turns, likes teach a member's taste (and the
explanation says so), a dislike lowers only its region, exploration lands next
to the interests. Real parts where there is no geometry to control: the FTS
index of the weightless seed store for the lexical half of relevance.
"""
from __future__ import annotations

from collections import Counter
from datetime import date, timedelta

import numpy as np
import pytest

from store import pick_for_day
from store.daily import history_for
from store.sources import announce_source
from store.pick import (
    DailyPick,
    EXPLORATION,
    INTEREST,
    Interest,
    PastPost,
    PickSettings,
    is_exploration_day,
    lexical_for,
    pick_daily,
    shown_ids,
)
from store.taste import FeedbackModel, Library, Reacted

DIM = 32
START = date(2024, 3, 1)
CH = "C1"
NO_EXPLORE = PickSettings(exploration_rate=0)


def unit(v):
    v = np.asarray(v, dtype=np.float32)
    return v / np.linalg.norm(v)


def world(centres: dict[str, np.ndarray], per: int = 8, noise: float = 0.15, seed: int = 3):
    """`per` papers around each named centre: ids like 'a3'; returns ids, matrix."""
    rng = np.random.default_rng(seed)
    ids, rows = [], []
    for name, c in centres.items():
        for k in range(per):
            ids.append(f"{name}{k}")
            rows.append(unit(c + noise * rng.normal(size=DIM)))
    return ids, np.stack(rows)


def axes(n: int) -> list[np.ndarray]:
    return [np.eye(DIM, dtype=np.float32)[k] for k in range(n)]


def working_days(channel: str = CH, n: int = 10, rate: float = 0.1) -> list[date]:
    return [START + timedelta(days=k) for k in range(200)
            if not is_exploration_day(channel, START + timedelta(days=k), rate)][:n]


def vague(member: str, iid: int) -> Interest:
    """'machine learning': a little of everything, so every paper scores about the same."""
    return Interest(iid, "machine learning", member, unit(np.ones(DIM)))


def test_a_runner_up_stays_available_and_is_posted_on_its_members_turn():
    a, b = axes(2)
    ids, m = world({"a": a, "b": b})
    interests = [Interest(1, "topic a", "UA", a), Interest(2, "topic b", "UB", b)]
    day1, day2 = working_days(n=2)
    first = pick_daily(CH, day1, ids, m, interests, [], settings=NO_EXPLORE)
    runner = first.runners_up[0]
    assert runner.kind == INTEREST and runner.member != first.choice.member
    history = [PastPost(day1, first.paper_id, first.choice.member, False,
                        tuple(c.paper_id for c in first.runners_up))]
    second = pick_daily(CH, day2, ids, m, interests, history, settings=NO_EXPLORE)
    # The runner-up was only a suggestion: on its member's turn it is still their best paper.
    assert second.choice.member == runner.member and second.paper_id == runner.paper_id
    # A 👍 on it teaches the taste and leaves it available; a Save (engaged) or a setting uses it up.
    liked = {runner.paper_id: Reacted({runner.member: 1.0}, "R", "👍", (runner.member,))}
    assert pick_daily(CH, day2, ids, m, interests, history, feedback=liked,
                      settings=NO_EXPLORE).paper_id == runner.paper_id
    saved = [PastPost(day1, first.paper_id, first.choice.member, False, (runner.paper_id,),
                      engaged=(runner.paper_id,))]
    assert pick_daily(CH, day2, ids, m, interests, saved, settings=NO_EXPLORE).paper_id != runner.paper_id
    for spent in (PickSettings(exploration_rate=0, spend_runners_up=True),
                  PickSettings(exploration_rate=0, spend_reacted_runners_up=True)):
        assert pick_daily(CH, day2, ids, m, interests, history, feedback=liked,
                          settings=spent).paper_id != runner.paper_id


def test_a_paper_a_member_turned_down_is_never_theirs_again_but_stays_open_to_the_others():
    """A runner-up stays available (above), but one its member judged against (a Not for me) is not
    theirs again, in any slot, however close it stays to their words (in a tight cluster its dislike
    lowers its neighbours nearly as much); a colleague on the same topic can still get it."""
    a, b = axes(2)
    ids, m = world({"a": a, "b": b}, per=6, noise=0.05)
    mine = [Interest(1, "topic a", "UB", a)]
    day0, *days = working_days(n=7)
    first = pick_daily(CH, day0, ids, m, mine, [], settings=NO_EXPLORE)
    runner = first.runners_up[0].paper_id  # UB's second best: tomorrow's pick without a verdict

    def served(interests, feedback) -> list[tuple[str, str | None]]:
        history, out = [PastPost(day0, first.paper_id, "UB", False, (runner,))], []
        for day in days:
            pick = pick_daily(CH, day, ids, m, interests, history, feedback=feedback, settings=NO_EXPLORE)
            out += [(c.paper_id, c.member) for c in (pick.choice, *pick.runners_up)]
            history.append(PastPost(day, pick.paper_id, pick.choice.member, False,
                                    tuple(c.paper_id for c in pick.runners_up)))
        return out

    assert served(mine, None)[0] == (runner, "UB")
    no = {runner: Reacted({"UB": -1.0}, runner.upper(), complaints="👎", critics=("UB",))}
    assert runner not in [pid for pid, _ in served(mine, no)]  # six days, three papers a day: 18 of 11
    assert (runner, "UA") in served([*mine, Interest(2, "topic a", "UA", a)], no)


def test_no_paper_is_shown_under_also_today_twice_but_it_can_be_the_paper_of_the_day():
    """Each member's best papers come up as runners-up before their turn: shown once, a runner-up is
    not shown under "Also today" again (before, each came back there day after day until its
    member's turn, liked or not), and it may still be its member's paper of the day: then its post says
    when the team was shown it."""
    a, b, c = axes(3)
    ids, m = world({"a": a, "b": b, "c": c}, per=8, noise=0.05)
    interests = [Interest(1, "topic a", "UA", a), Interest(2, "topic b", "UB", b), Interest(3, "topic c", "UC", c)]
    days = working_days(n=9)
    history, runners, mains = [], [], []
    for day in days:
        pick = pick_daily(CH, day, ids, m, interests, history, settings=NO_EXPLORE)
        assert len(pick.runners_up) == 2 and all(r.member != pick.choice.member for r in pick.runners_up)
        first = next((p.day for p in history if pick.paper_id in p.runners_up), None)
        said = first and f"shown under Also today on {first:%a} {first.day} {first:%b}"
        assert (said in pick.explain()) if first else ("Also today" not in pick.explain())
        assert DailyPick.from_dict(pick.to_dict()).explain() == pick.explain()  # as /paper today shows it
        assert "Also today" not in " ".join(r.explain(main=False) for r in pick.runners_up)
        mains.append(pick.paper_id)
        runners += [r.paper_id for r in pick.runners_up]
        history.append(PastPost(day, pick.paper_id, pick.choice.member, False,
                                tuple(r.paper_id for r in pick.runners_up)))
    assert len(runners) == len(set(runners)) == 18
    assert len(set(mains)) == 9 and set(mains) & set(runners)  # suggested first, then posted on a turn


def test_members_sharing_an_interest_text_are_each_served_on_their_own_turns():
    a, b = axes(2)
    ids, m = world({"a": a, "b": b}, per=12)
    interests = [vague("UALICE", 1), vague("UBOB", 2), vague("UCAROL", 3)]
    history, served = [], []
    for day in working_days(n=9):
        pick = pick_daily(CH, day, ids, m, interests, history, settings=NO_EXPLORE)
        served.append(pick.choice.member)
        assert pick.choice.interest.text == "machine learning"
        assert pick.choice.interest.added_by == pick.choice.member  # their own row of the shared text
        history.append(PastPost(day, pick.paper_id, pick.choice.member))
    assert Counter(served) == {"UALICE": 3, "UBOB": 3, "UCAROL": 3}
    assert len(set(served[:3])) == 3  # a full round before anyone's second turn


def test_a_members_likes_change_their_next_pick_and_the_explanation_names_them():
    centres = dict(zip("abcd", axes(4)))
    ids, m = world(centres)
    interests = [vague("UALICE", 1), vague("UBOB", 2)]
    day = working_days(n=1)[0]
    history = [PastPost(day - timedelta(days=1), "a0", "UBOB")]
    plain = pick_daily(CH, day, ids, m, interests, history, settings=NO_EXPLORE)
    assert plain.choice.member == "UALICE"
    liked = {"c1": Reacted({"UALICE": 2.0}, "SPIKE", "🔥", ("UALICE",)),
             "c2": Reacted({"UALICE": 1.0}, "VIB", "👍", ("UALICE",))}
    moved = pick_daily(CH, day, ids, m, interests, history, feedback=liked, settings=NO_EXPLORE)
    assert moved.choice.member == "UALICE" and moved.paper_id.startswith("c")
    assert moved.paper_id != plain.paper_id
    text = moved.explain()
    assert "close to *SPIKE* and *VIB*, which got 🔥 from @UALICE" in text, text
    assert moved.choice.feedback > 0
    # Bob's turn is Bob's: Alice's likes do not pull his paper to her topic.
    bob_day = PastPost(day, moved.paper_id, "UALICE")
    bob = pick_daily(CH, day + timedelta(days=1), ids, m, interests, history + [bob_day], feedback=liked,
                     settings=NO_EXPLORE)
    assert bob.choice.member == "UBOB" and not bob.choice.feedback_why


def test_one_dislike_near_an_interest_lowers_that_region_not_the_whole_interest():
    """The interest sits between two sub-areas of one topic; a dislike in one leaves the other first."""
    x, y, z = axes(3)
    near, far = unit(x + 0.8 * y), unit(x - 0.8 * y)  # two regions of one topic
    ids, m = world({"n": near, "f": far, "z": z}, noise=0.05)
    interest = [Interest(1, "topic x", "UALICE", unit(x + 0.05 * y))]  # a shade closer to `near`
    day = working_days(n=1)[0]
    plain = pick_daily(CH, day, ids, m, interest, [], settings=NO_EXPLORE)
    assert plain.paper_id.startswith("n")
    disliked = {"n0": Reacted({"UALICE": -1.0}, "TREC", complaints="👎", critics=("UALICE",))}
    after = pick_daily(CH, day, ids, m, interest, [], feedback=disliked, settings=NO_EXPLORE)
    # Still the same interest, served from its other region, which lost less than the disliked one.
    assert after.paper_id.startswith("f"), after.paper_id
    assert after.choice.interest.text == "topic x"
    lost = -FeedbackModel(ids, m, disliked, NO_EXPLORE).for_member("UALICE")
    assert lost[ids.index(after.paper_id)] < min(lost[i] for i, pid in enumerate(ids) if pid.startswith("n"))
    assert "steering away from *TREC*" in after.explain()
    # Every paper of the day comes from the region nobody disliked.
    shown = [after.paper_id]
    rest = pick_daily(CH, day, ids, m, interest, [PastPost(day - timedelta(days=1), p) for p in shown],
                      feedback=disliked, settings=PickSettings(exploration_rate=0, runners_up=6))
    assert all(c.paper_id.startswith("f") for c in [rest.choice, *rest.runners_up])


def test_after_likes_on_one_topic_and_dislikes_on_another_the_next_picks_move_to_the_liked_one():
    """A member interested in two topics 👍s papers of one and 👎s papers of the other: the days after
    serve the liked topic, and the first of them says which reaction moved it."""
    a, b, c = axes(3)
    ids, m = world({"a": a, "b": b, "c": c}, per=12, noise=0.05)
    interests = [Interest(1, "topics a and b", "UALICE", unit(a + b))]
    days = working_days(n=5)

    def run(feedback):
        history, picks = [], []
        for day in days:
            pick = pick_daily(CH, day, ids, m, interests, history, feedback=feedback, settings=NO_EXPLORE)
            picks.append(pick)
            history.append(PastPost(day, pick.paper_id, pick.choice.member))
        return picks

    plain = run(None)
    assert {p.paper_id[0] for p in plain} == {"a", "b"}  # both halves of the interest, without reactions
    reacted = {f"b{k}": Reacted({"UALICE": 1.0}, f"B{k}", "👍", ("UALICE",)) for k in range(3)}
    reacted |= {f"a{k}": Reacted({"UALICE": -1.0}, f"A{k}", complaints="👎", critics=("UALICE",))
                for k in range(3)}
    moved = run(reacted)
    assert all(p.paper_id.startswith("b") for p in moved), [p.paper_id for p in moved]
    assert moved[0].choice.feedback_why and "UALICE" in moved[0].explain()


def test_a_long_record_of_likes_moves_the_picks_without_drowning_the_stated_interest():
    """Many 🔥 on a neighbouring topic pull the member's picks towards it, to the papers that are
    mostly about it but still touch their interest; the interest keeps its say however long the
    record grows (a pure neighbour-topic paper, which the interest does not touch, comes after)."""
    a, b = axes(2)
    ids, m = world({"a": a, "b": b, "ab": unit(a + 2 * b)}, per=16, noise=0.05)
    interests = [Interest(1, "topic a", "UALICE", a)]
    day = working_days(n=1)[0]
    assert pick_daily(CH, day, ids, m, interests, [], settings=NO_EXPLORE).paper_id.startswith("a")
    for n in (6, 12):
        liked = {f"b{k}": Reacted({"UALICE": 2.0}, f"B{k}", "🔥", ("UALICE",)) for k in range(n)}
        pick = pick_daily(CH, day, ids, m, interests, [], feedback=liked,
                          settings=PickSettings(exploration_rate=0, runners_up=2))
        assert all(c.paper_id.startswith("ab") for c in [pick.choice, *pick.runners_up]), (
            n, [c.paper_id for c in [pick.choice, *pick.runners_up]])
        assert pick.choice.interest.text == "topic a" and "which got 🔥 from @UALICE" in pick.explain()


def test_exploration_is_labelled_and_comes_from_next_to_the_interests():
    a, b, c, d, e = axes(5)
    neighbour = unit(a + 0.8 * b)  # an area next to the interest that no interest covers
    ids, m = world({"a": a, "nb": neighbour, "c": c, "d": d, "e": e}, per=10)
    interests = [Interest(1, "topic a", "UA", a)]
    settings = PickSettings(explore_skip=10, explore_in_main=True)
    day = next(START + timedelta(days=k) for k in range(200)
               if is_exploration_day(CH, START + timedelta(days=k)))
    pick = pick_daily(CH, day, ids, m, interests, [], settings=settings)
    assert pick.exploration and pick.choice.kind == EXPLORATION
    assert pick.paper_id.startswith("nb"), pick.paper_id  # the neighbour, not the farthest corner
    assert pick.explain().startswith("exploration day") and "*topic a*" in pick.explain()
    assert all(r.kind == INTEREST and r.paper_id.startswith("a") for r in pick.runners_up)


def test_exploration_follows_what_the_team_liked():
    a, b, c, d = axes(4)
    ids, m = world({"a": a, "b": b, "c": c, "d": d}, per=10)
    interests = [Interest(1, "topic a", "UA", a)]
    settings = PickSettings(explore_skip=10)
    day = next(START + timedelta(days=k) for k in range(200)
               if is_exploration_day(CH, START + timedelta(days=k)))
    liked = {"d0": Reacted({"UB": 2.0}, "D0", "🔥", ("UB",)), "d1": Reacted({"UC": 1.0}, "D1", "👍", ("UC",))}
    pick = pick_daily(CH, day, ids, m, interests, [], feedback=liked, settings=settings)
    assert pick.also is not None and pick.also.paper_id.startswith("d")
    assert pick.choice.kind == INTEREST and pick.paper_id.startswith("a")  # the day's paper stays the member's


def test_an_interest_from_a_paper_searches_its_distinctive_words(hashing_store):
    """`add like X`: X's vector and X's own words; X itself is never a result."""
    from store import HashingEmbedder, Searcher

    embedder = HashingEmbedder(256, name="hashing-256")
    searcher = Searcher(hashing_store, embedder)
    paper = next(p for p in hashing_store.list_papers(limit=50) if "video" in p.abstract.lower())
    vec = hashing_store.get_vector(paper.id, embedder.name)
    interests = [Interest(1, f"papers like {paper.short_name}", "UA", vec, paper.id),
                 Interest(2, "video understanding", "UB", embedder.encode(["video understanding"])[0])]
    lexical = lexical_for(searcher, interests)
    assert paper.id not in lexical[1] and lexical[1]
    assert max(lexical[1].values()) == pytest.approx(1.0) and min(lexical[1].values()) > 0
    video = [p.id for p in hashing_store.list_papers(limit=100) if "video" in (p.abstract + (p.title or "")).lower()]
    assert max(lexical[2], key=lexical[2].get) in video
    # The store-side loader passes the same evidence on: a pick for the channel still works end to end.
    hashing_store.add_interest(CH, "video understanding", "UB", model=embedder.name,
                               vector=interests[1].vector, now=0.0)
    pick = pick_for_day(hashing_store, searcher, CH, working_days(n=1)[0], feedback=None)
    assert pick.choice.kind == INTEREST and pick.paper_id in video


def test_a_saved_runner_up_is_used_up_and_an_unsaved_one_is_not(hashing_store):
    store = hashing_store
    pid, saved, kept = [p.id for p in store.list_papers(limit=3)]
    pick = {"choice": {"paper_id": pid, "kind": "interest", "member": "UA"},
            "runners_up": [{"paper_id": saved, "kind": "interest"}, {"paper_id": kept, "kind": "interest"}]}
    store.add_interest(CH, "video understanding", "UB", model="m", vector=np.ones(4, dtype=np.float32), now=0.0)
    assert store.claim_post(CH, "2024-03-01", claimer="me", paper_id=pid, pick=pick, now=0.0)
    store.save_paper("UB", saved, now=0.0)  # the Save button under the runner-up
    (past,) = history_for(store, CH)
    assert past.runners_up == (saved, kept) and past.engaged == (saved,)
    assert shown_ids([past]) == {pid, saved}


def test_the_learned_taste_tells_the_liked_half_of_a_topic_from_the_disliked_half():
    """A member's words name a topic; their 👍 fall in one half of it and their 👎 in the other. Their
    classifier (their interest and likes against the library and their dislikes) ranks every paper of
    the liked half above every paper of the disliked half, and the unrelated papers below both halves'
    best; on their next turn the day's three papers all come from the liked half."""
    from store.taste import library_moments, taste_classifier

    x, y, z, w = axes(4)
    ids, m = world({"l": unit(x + 0.6 * y), "d": unit(x - 0.6 * y), "z": z, "w": w}, per=12, noise=0.1)
    interest = Interest(1, "topic x", "UALICE", x)
    likes, dislikes = ["l0", "l1", "l2"], ["d0", "d1"]
    coef = taste_classifier(np.vstack([x, m[[ids.index(p) for p in likes]]]), m[[ids.index(p) for p in dislikes]],
                            library_moments(m), background=800, ridge=0.024)
    score = dict(zip(ids, m @ coef[:-1] + coef[-1]))
    liked_half = [s for p, s in score.items() if p.startswith("l")]
    disliked_half = [s for p, s in score.items() if p.startswith("d")]
    others = [s for p, s in score.items() if p[0] in "zw"]
    assert min(liked_half) > max(disliked_half)
    assert max(others) < max(disliked_half) < max(liked_half)
    feedback = {p: Reacted({"UALICE": 1.0}, p.upper(), "👍", ("UALICE",)) for p in likes}
    feedback |= {p: Reacted({"UALICE": -1.0}, p.upper(), complaints="👎", critics=("UALICE",)) for p in dislikes}
    pick = pick_daily(CH, working_days(n=1)[0], ids, m, [interest], [], feedback=feedback,
                      settings=PickSettings(exploration_rate=0, runners_up=2))
    assert all(c.paper_id.startswith("l") for c in [pick.choice, *pick.runners_up])
    assert "which got 👎 from @UALICE" in pick.explain() or "which got 👍 from @UALICE" in pick.explain()


def test_on_a_day_of_fresh_papers_the_pick_among_them_still_follows_what_the_member_liked():
    """A channel that follows arXiv is picked from the new papers first, and the team's reactions are
    all on older ones: those still teach. The member's words sit between two topics, a shade closer
    to `a`; they liked three older `b` papers, so today's new `b` paper goes before the new `a` one."""
    a, b = axes(2)
    ids, m = world({"a": a, "b": b}, per=8, noise=0.05)
    interests = [Interest(1, "topics a and b", "UALICE", unit(a + 0.9 * b))]
    liked = {f"b{k}": Reacted({"UALICE": 1.0}, f"B{k}", "👍", ("UALICE",)) for k in range(3)}
    fresh = ["a6", "a7", "b6", "b7"]
    rows = [ids.index(p) for p in fresh]
    day = working_days(n=1)[0]

    def today(**kw):
        return pick_daily(CH, day, fresh, m[rows], interests, [], feedback=liked, settings=NO_EXPLORE, **kw)

    assert today().paper_id.startswith("a")  # the reacted papers are not among today's candidates
    moved = today(library=Library(ids, m))
    assert moved.paper_id.startswith("b") and "which got 👍 from @UALICE" in moved.explain()


def test_the_fresh_papers_pick_carries_the_members_reactions(hashing_store):
    """Through pick_for_day: a channel following cs.LG, one member's 👍 on an older paper, and the
    morning's pick among the night's announcements is adjusted by it (before: by nothing)."""
    from datetime import datetime, timezone

    from store import HashingEmbedder, Searcher, pick_for_day
    from store.feedback import Feedback, record_verdict

    emb = HashingEmbedder()
    searcher = Searcher(hashing_store, emb)
    day = working_days(n=1)[0]
    midnight = datetime(day.year, day.month, day.day, tzinfo=timezone.utc).timestamp()
    hashing_store.add_interest(CH, "video understanding", "UALICE", model=emb.name,
                               vector=emb.encode(["video understanding"])[0], now=midnight - 86400)
    plain = pick_for_day(hashing_store, searcher, CH, day, feedback=Feedback())
    older = plain.paper_id
    fresh = [c.paper_id for c in plain.runners_up]
    hashing_store.add_feed(CH, "arxiv", "cs.LG", "UADMIN", now=midnight - 86400)
    hashing_store.mark_announced([(pid, announce_source("arxiv", "cs.LG"), midnight - 3600) for pid in fresh])
    record_verdict(hashing_store, user="UALICE", paper_id=older, verdict="more", channel=CH,
                   message_ts="1.000100", event_id="Ev1", now=midnight - 7200)
    pick = pick_for_day(hashing_store, searcher, CH, day, feedback=Feedback())
    assert pick.paper_id in fresh and "new on arXiv" in pick.explain()
    assert pick.choice.feedback > 0  # the 👍 on the older paper reached the pick among the new ones


def test_an_interest_in_its_own_words_also_finds_its_fields_terms(tmp_path):
    """A paraphrase ("explaining model predictions") rarely names its field's terms; its nearest papers
    do, so the pick's BM25 also finds the field's papers that share none of the member's words."""
    from store import HashingEmbedder, Record, Searcher, bundled_sample_paths, ingest_paths, ingest_records, open_store

    near = ["We study explaining model predictions of deep classifiers with saliency maps; attribution "
            "heatmaps show which pixels matter, and our saliency attribution is faithful.",
            "Explaining model predictions for text: token saliency and attribution scores, checked against "
            "human rationales; saliency beats attention weights.",
            "Model predictions explained by counterfactual attribution: saliency heatmaps for tabular data "
            "and a sanity check of attribution methods.",
            "Do explanations of model predictions help users? A study of saliency maps and attribution "
            "heatmaps shown to doctors reading scans."]
    field = ["Saliency maps and attribution heatmaps for vision transformers, computed in one pass over the patches.",
             "Attribution by layer-wise relevance: sharper saliency heatmaps for speech recognisers.",
             "Integrated gradients revisited: attribution baselines decide what saliency maps show."]
    embedder = HashingEmbedder(256, name="hashing-256")
    store = open_store(tmp_path / "lib.db")
    # The rest of the library: the bundled abstracts and enough others that an interest's few nearest
    # papers are a small part of it (in a small library they span topics and nothing is expanded).
    ingest_paths(store, bundled_sample_paths(), embedder, now=0.0)
    rng = np.random.default_rng(5)
    vocabulary = [f"{a}{b}" for a in ("graph", "kernel", "bandit", "spline", "quant", "tensor", "sparse", "robot")
                  for b in ("net", "flow", "wise", "form", "mix", "fit", "rank", "path", "cast", "scope")]
    ingest_records(store, [Record(abstract="We propose " + " and ".join(rng.choice(vocabulary, 12, replace=False))
                                  + f" for task {n}.", title=f"OTHER{n}") for n in range(420)], embedder, now=0.0)
    others = {p.id for p in store.list_papers(limit=1000)}
    assert len(others) >= 400
    ingest_records(store, [Record(abstract=a, title=f"PAPER{n}") for n, a in enumerate(near + field)], embedder, now=0.0)
    searcher = Searcher(store, embedder)
    field_ids = {p.id for p in store.list_papers(limit=1000) if p.abstract in field}
    assert len(field_ids) == len(field)
    text = "explaining model predictions"
    interest = Interest(1, text, "UA", embedder.encode([text])[0])
    settings = PickSettings()

    own_words = lexical_for(searcher, [interest], settings.lexical_candidates)
    assert not field_ids & set(own_words.get(1, {}))  # the member's own words never reach them
    expanded = lexical_for(searcher, [interest], settings.lexical_candidates, expand_from=4,
                           expand_words=settings.lexical_expansion)
    assert field_ids <= set(expanded[1])
    assert min(expanded[1][pid] for pid in field_ids) > max(s for pid, s in expanded[1].items() if pid in others)
    # What the pick reads (`interest_lexical`, the defaults: its prf_docs nearest papers) finds them too.
    from store.daily import interest_lexical

    assert field_ids <= set(interest_lexical(searcher, [interest], settings)[1])
    store.close()
