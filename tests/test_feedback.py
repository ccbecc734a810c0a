"""Reactions as feedback, store side: the log, what emoji mean, tallies, learning, reading lists, replay.

A real SQLite file (the weightless seed store) for everything the log does;
small hand-made vectors where the geometry of "close to a liked paper" must
be exact.
"""
from __future__ import annotations

import time

import json
from datetime import date, datetime, timezone

import numpy as np
import pytest

from store import feedback as fb
from store import Interest, PastPost, PickSettings, Reacted, pick_daily
from store.pick import member_order
from store.taste import FeedbackModel

CH = "C1"
DAY = 86400.0
T0 = datetime(2024, 6, 3, 9, 0, tzinfo=timezone.utc).timestamp()  # Mon 3 Jun 2024, 09:00 UTC


def paper_ids(store, n: int) -> list[str]:
    return [p.id for p in store.list_papers(limit=n)]


def post(store, day: str, paper_id: str, ts: str, at: float, channel: str = CH) -> None:
    """A daily post Slack accepted (as bot/posting.py records it)."""
    assert store.claim_post(channel, day, claimer="me", paper_id=paper_id, pick=None, now=at)
    assert store.finish_post(channel, day, claimer="me", ts=ts, now=at, claimed_at=at)


class Log:
    """Feeds reaction events to record_reaction with fresh event ids and rising times."""

    def __init__(self, store, channel: str = CH):
        self.store, self.channel, self.n = store, channel, 0

    def __call__(self, user: str, emoji: str, ts: str, *, added: bool = True, at: float | None = None,
                 event_id: str | None = None):
        self.n += 1
        at = T0 + 60 * self.n if at is None else at
        return fb.record_reaction(self.store, event_id=event_id or f"Ev{self.n}", channel=self.channel,
                                  message_ts=ts, user=user, emoji=emoji, added=added, event_ts=at,
                                  event_time=int(at), now=at)


# -- what an emoji means --------------------------------------------------------------------------
@pytest.mark.parametrize("name, base", [
    ("+1", "+1"), ("thumbsup", "+1"), ("+1::skin-tone-3", "+1"), (":thumbsup::skin-tone-6:", "+1"),
    ("thumbsdown", "-1"), ("FIRE", "fire"), ("party_parrot", "party_parrot"),
])
def test_skin_tones_and_aliases_count_as_their_base_emoji(name, base):
    assert fb.base_emoji(name) == base


def test_default_weights_and_unknown_emoji():
    w = fb.DEFAULT_WEIGHTS
    assert fb.weight_of("fire", w) == 2
    assert [fb.weight_of(e, w) for e in ("+1", "heart", "star", "tada", "100")] == [1] * 5
    assert fb.weight_of("eyes", w) == 0
    assert fb.weight_of("-1::skin-tone-2", w) == -1 and fb.weight_of("sleeping", w) == -1
    assert fb.weight_of("party_parrot", w) == 0


def test_configured_weights_extend_and_override_the_defaults():
    w = fb.parse_weights("fire=3, rocket=1.5;thumbsdown=-2 :sleeping:=0")
    assert w["fire"] == 3 and w["rocket"] == 1.5 and w["-1"] == -2 and w["sleeping"] == 0
    assert w["heart"] == 1  # untouched defaults stay
    for bad in ("fire", "fire=hot", "=2", "fire=inf"):
        with pytest.raises(ValueError, match="reaction weight"):
            fb.parse_weights(bad)


# -- the log ------------------------------------------------------------------------------------------
def test_each_event_is_logged_once_and_other_messages_are_ignored(hashing_store):
    store = hashing_store
    (p1,) = paper_ids(store, 1)
    post(store, "2024-06-03", p1, "100.000001", T0)
    react = Log(store)
    first = react("UALICE", "fire", "100.000001", event_id="EvA")
    again = react("UALICE", "fire", "100.000001", event_id="EvA")  # Slack's redelivery of the same event
    other = react("UALICE", "fire", "999.000001", event_id="EvB")  # someone else's message
    assert (first.status, first.paper_id) == ("recorded", p1)
    assert again.status == "duplicate"
    assert other.status == "ignored"
    rows = store.reactions(channel=CH)
    assert [(r["event_id"], r["user"], r["emoji"], r["action"], r["paper_id"]) for r in rows] == [
        ("EvA", "UALICE", "fire", "added", p1)]


def test_a_removal_cancels_its_reaction_whatever_order_it_arrives_in(hashing_store):
    store = hashing_store
    (p1,) = paper_ids(store, 1)
    post(store, "2024-06-03", p1, "100.000001", T0)
    react = Log(store)
    react("UBOB", "+1", "100.000001", at=T0 + 10)
    react("UBOB", "+1", "100.000001", added=False, at=T0 + 20)
    # The removal of a sleeping face was delivered before its add (a retry arrived late).
    react("UCAROL", "sleeping", "100.000001", added=False, at=T0 + 40)
    react("UCAROL", "sleeping", "100.000001", at=T0 + 30)
    react("UDAN", "+1::skin-tone-3", "100.000001", at=T0 + 50)
    react("UDAN", "+1", "100.000001", at=T0 + 60)  # the same 👍 twice, in two skin tones
    standing = fb.current_reactions(store.reactions(channel=CH))
    assert [(r["user"], r["base"]) for r in standing] == [("UDAN", "+1")]
    assert len(store.reactions(channel=CH)) == 6  # append-only: every event stays in the log


def test_eyes_put_a_paper_on_the_reading_list_and_taking_them_off_removes_it(hashing_store):
    store = hashing_store
    p1, p2 = paper_ids(store, 2)
    post(store, "2024-06-03", p1, "100.000001", T0)
    post(store, "2024-06-04", p2, "200.000001", T0 + DAY)
    react = Log(store)
    assert react("UALICE", "eyes", "100.000001").saved is True
    assert react("UALICE", "eyes", "200.000001").saved is True
    assert [p.id for p, _ in fb.reading_list(store, "UALICE")] == [p2, p1]
    assert react("UALICE", "eyes", "100.000001", added=False).saved is False
    # Saved with the button too: taking the 👀 off no longer removes it.
    store.save_paper("UALICE", p2, now=time.time())
    assert react("UALICE", "eyes", "200.000001", added=False).saved is True
    assert [(p.id, row["source"]) for p, row in fb.reading_list(store, "UALICE")] == [(p2, "button")]


# -- tallies and the digest ---------------------------------------------------------------------------
def test_digest_counts_the_window_exactly(hashing_store):
    store = hashing_store
    p_old, p1, p2, p3 = paper_ids(store, 4)
    post(store, "2024-05-20", p_old, "50.000001", T0 - 14 * DAY)  # outside a 7-day window
    post(store, "2024-06-03", p1, "100.000001", T0)
    post(store, "2024-06-04", p2, "200.000001", T0 + DAY)
    store.record_message_paper(CH, "250.000001", p3, kind="share", posted_by="UBOB", now=T0 + DAY + 60)
    react = Log(store)
    react("UALICE", "+1", "50.000001")
    for user, emoji in [("UALICE", "+1"), ("UBOB", "+1::skin-tone-2"), ("UCAROL", "fire"), ("UDAN", "sleeping")]:
        react(user, emoji, "100.000001")
    react("UDAN", "sleeping", "100.000001", added=False)
    react("UALICE", "-1", "200.000001")
    react("UBOB", "fire", "250.000001")
    react("UCAROL", "tada", "250.000001")
    digest = fb.channel_digest(store, CH, now=T0 + 3 * DAY, days=7)
    by = {t.paper_id: t for t in digest.papers}
    assert list(by) == [p1, p2, p3]
    assert fb.format_tally(by[p1].counts) == "👍 2 · 🔥 1"
    assert fb.format_tally(by[p2].counts) == "👎 1"
    assert fb.format_tally(by[p3].counts) == "🔥 1 · 🎉 1"
    assert by[p3].kind == "share"
    assert digest.most_liked.paper_id == p1  # 👍👍🔥 = 4 beats 🔥🎉 = 3
    assert dict(digest.engaged) == {"UALICE": 2, "UBOB": 2, "UCAROL": 2}
    longer = fb.channel_digest(store, CH, now=T0 + 3 * DAY, days=30)
    assert [t.paper_id for t in longer.papers][0] == p_old


# -- learning -----------------------------------------------------------------------------------------
def rows(*events):
    """Log rows for reacted_from_rows: (user, emoji, paper, when, action)."""
    out = []
    for i, (user, emoji, paper, when, *action) in enumerate(events):
        out.append({"id": i, "channel": CH, "message_ts": f"ts-{paper}", "paper_id": paper, "user": user,
                    "emoji": emoji, "base": fb.base_emoji(emoji), "action": (action or ["added"])[0],
                    "event_ts": when})
    return out


def test_reactions_decay_with_the_half_life_and_a_member_counts_at_most_three_per_paper():
    cutoff = T0 + 60 * DAY
    learned = fb.reacted_from_rows(rows(
        ("UA", "fire", "p1", cutoff - 30 * DAY),  # one half-life ago
        ("UB", "+1", "p1", cutoff - 1),
        ("UA", "-1", "p2", cutoff - 60 * DAY),  # two half-lives ago
        ("UC", "fire", "p3", cutoff - 1), ("UC", "heart", "p3", cutoff - 1), ("UC", "tada", "p3", cutoff - 1),
        ("UC", "eyes", "p4", cutoff - 1),  # want to read: no verdict
        ("UA", "fire", "p5", cutoff + 1),  # after the cutoff: not known yet
    ), cutoff=cutoff, half_life_days=30, names={"p1": "SPIKE"})
    assert set(learned) == {"p1", "p2", "p3"}
    assert learned["p1"].by_member == pytest.approx({"UA": 1.0, "UB": 1.0})
    assert learned["p2"].by_member == pytest.approx({"UA": -0.25})
    assert learned["p3"].by_member == pytest.approx({"UC": 3.0})  # 2 + 1 + 1, capped
    assert (learned["p1"].name, learned["p1"].praise, learned["p1"].fans) == ("SPIKE", "🔥 · 👍", ("UA", "UB"))
    assert (learned["p2"].complaints, learned["p2"].critics) == ("👎", ("UA",))


def _vectors():
    """Unit vectors for two topics (a0-a2, b0-b3; the a papers a shade closer to the channel's
    vague interest) and a broad paper g that matches the interest best of all."""
    raw = {
        "a0": [1, 0, 0.0, 0.1], "a1": [0.95, 0.1, 0, 0.3], "a2": [0.9, -0.1, 0, 0.35],
        "b0": [0, 1, 0.0, 0.1], "b1": [0.1, 0.95, 0, 0.3], "b2": [-0.1, 0.9, 0, 0.35],
        "b3": [0.05, 0.92, 0, 0.32], "g": [0.35, 0.35, 0.6, 0.6],
    }
    ids = list(raw)
    m = np.array([raw[k] for k in ids], dtype=np.float32)
    return ids, m / np.linalg.norm(m, axis=1, keepdims=True)


def _vague(member: str, iid: int = 1) -> Interest:
    v = np.array([0.25, 0.2, 0.0, 1.0], dtype=np.float32)
    return Interest(iid, "machine learning", member, v / np.linalg.norm(v))


def test_liked_papers_lift_their_neighbours_and_the_explanation_says_so():
    ids, m = _vectors()
    day = date(2024, 6, 6)
    # The channel was shown a0 and a1; Alice 🔥'd three b papers others shared, not the a ones.
    history = [PastPost(date(2024, 6, 4), "a0", "UALICE"), PastPost(date(2024, 6, 5), "a1", "UALICE")]
    interests = [_vague("UALICE")]
    settings = PickSettings(exploration_rate=0, runners_up=0, mmr_lambda=0.75)  # the toy is sized for this
    plain = pick_daily(CH, day, ids, m, interests, history, settings=settings)
    assert plain.paper_id == "g" and plain.choice.feedback_why is None
    liked = {pid: Reacted({"UALICE": 2.0}, name, "🔥", ("UALICE",))
             for pid, name in (("b0", "SPIKE"), ("b1", "VIB"), ("b2", "CARE"))}
    moved = pick_daily(CH, day, ids, m, interests, history, feedback=liked, settings=settings)
    assert moved.paper_id == "b3"
    assert moved.choice.feedback > 0.1
    assert moved.explain().endswith("which got 🔥 from @UALICE")
    assert "; close to *" in moved.explain()
    # The same input gives the same pick: feedback keeps the pick deterministic.
    again = pick_daily(CH, day, ids, m, interests, history, feedback=liked, settings=settings)
    assert again.to_dict() == moved.to_dict()
    # Someone else's likes count on Alice's turn too, but only as the team's voice: weaker.
    theirs = {pid: Reacted({"UBOB": 2.0}, r.name, "🔥", ("UBOB",)) for pid, r in liked.items()}
    weaker = pick_daily(CH, day, ids, m, interests, history, feedback=theirs, settings=settings)
    assert weaker.paper_id == "g"


def test_a_disliked_paper_sinks_its_neighbours_and_the_explanation_says_so():
    ids, m = _vectors()
    day = date(2024, 6, 5)
    history = [PastPost(date(2024, 6, 4), "g", "UALICE")]
    settings = PickSettings(exploration_rate=0, runners_up=0, mmr_lambda=0.75)  # the toy is sized for this
    plain = pick_daily(CH, day, ids, m, [_vague("UALICE")], history, settings=settings)
    assert plain.paper_id.startswith("a")
    disliked = {"a0": Reacted({"UALICE": -1.0, "UCAROL": -1.0}, "TREC", complaints="😴×2",
                              critics=("UALICE", "UCAROL"))}
    away = pick_daily(CH, day, ids, m, [_vague("UALICE")], history, feedback=disliked, settings=settings)
    assert away.paper_id.startswith("b")
    # The a papers sank below b: each lost more than b's score moved.
    adjust = FeedbackModel(ids, m, disliked, settings).for_member("UALICE")
    assert max(adjust[i] for i, pid in enumerate(ids) if pid.startswith("a")) < adjust[ids.index(away.paper_id)] - 0.1
    assert away.explain().endswith("steering away from *TREC*, which got 😴×2 from @UALICE and @UCAROL")


def test_on_each_members_turn_their_own_reactions_count_most_and_turns_stay_fair():
    """Alice likes topic a, Bob topic b; both only said "machine learning". Feedback decides what
    each is served, never whose turn it is."""
    ids, m = _vectors()
    interests = [_vague("UALICE", 1), _vague("UBOB", 2)]
    liked = {"a0": Reacted({"UALICE": 2.0}, "A0", "🔥", ("UALICE",)),
             "b0": Reacted({"UBOB": 2.0}, "B0", "🔥", ("UBOB",))}
    settings = PickSettings(exploration_rate=0, runners_up=0, mmr_lambda=0.75)  # the toy is sized for this
    history: list[PastPost] = []
    served = []
    for d in range(3, 7):
        day = date(2024, 6, d)
        turn = member_order(["UALICE", "UBOB"], history, CH, day)[0]
        pick = pick_daily(CH, day, ids, m, interests, history, feedback=liked, settings=settings)
        assert pick.choice.member == turn  # fairness decides the turn, as without feedback
        served.append((pick.choice.member, pick.paper_id))
        history.append(PastPost(day, pick.paper_id, pick.choice.member))
    topic = {"UALICE": "a", "UBOB": "b"}
    assert all(pid.startswith(topic[who]) for who, pid in served if pid != "g"), served
    assert sorted(who for who, _ in served) == ["UALICE", "UALICE", "UBOB", "UBOB"]


def test_a_reacted_paper_is_never_picked_itself():
    ids, m = _vectors()
    liked = {"g": Reacted({"UBOB": 3.0}, "G", "🔥", ("UBOB",))}
    pick = pick_daily(CH, date(2024, 6, 5), ids, m, [_vague("UALICE")], [], feedback=liked,
                      settings=PickSettings(exploration_rate=0, runners_up=6))
    assert "g" not in [pick.paper_id, *[c.paper_id for c in pick.runners_up]]


def test_feedback_for_a_day_only_sees_reactions_from_before_that_day(hashing_store):
    store = hashing_store
    p1, p2 = paper_ids(store, 2)
    store.set_schedule(CH, hour=9, minute=0, tz="Asia/Tokyo", days="daily", set_by="UALICE", now=time.time())
    post(store, "2024-06-03", p1, "100.000001", T0)
    react = Log(store)
    midnight_tokyo = datetime(2024, 6, 4, tzinfo=timezone.utc).timestamp() - 9 * 3600
    react("UALICE", "fire", "100.000001", at=midnight_tokyo - 1)
    react("UBOB", "+1", "100.000001", at=midnight_tokyo + 1)
    learned = fb.feedback_for_day(store, CH, date(2024, 6, 4))
    assert learned[p1].by_member == pytest.approx({"UALICE": 2.0}, rel=1e-4)
    assert learned[p1].name == store.get_paper(p1).short_name


# -- privacy --------------------------------------------------------------------------------------------
def test_forget_member_removes_their_rows_and_unlinks_their_name(hashing_store):
    store = hashing_store
    p1, p2 = paper_ids(store, 2)
    vec = np.ones(4, dtype=np.float32)
    store.add_interest(CH, "video understanding", "UBOB", model="m", vector=vec, now=time.time())
    store.add_interest(CH, "graphs", "UALICE", model="m", vector=vec, now=time.time())
    pick = {"choice": {"paper_id": p1, "kind": "interest", "added_by": "UBOB", "member": "UBOB"}, "runners_up": []}
    store.claim_post(CH, "2024-06-03", claimer="me", paper_id=p1, pick=pick, now=T0)
    store.finish_post(CH, "2024-06-03", claimer="me", ts="100.000001", now=T0, claimed_at=T0)
    store.record_message_paper(CH, "150.000001", p2, kind="share", posted_by="UBOB", now=T0)
    react = Log(store)
    react("UBOB", "fire", "100.000001")
    react("UBOB", "eyes", "150.000001")
    react("UALICE", "+1", "100.000001")
    store.save_paper("UBOB", p1, now=time.time())
    counts = fb.forget_member(store, "UBOB")
    assert counts == {"reacted": 2, "saved": 2, "interests": 1, "shares": 1, "picks": 1}
    assert store.reactions(user="UBOB") == [] and store.saved_papers("UBOB") == []
    assert [(r["text"], r["added_by"]) for r in store.interests(CH)] == [
        ("video understanding", None), ("graphs", "UALICE")]
    assert "UBOB" not in str(store.get_post(CH, "2024-06-03")["pick"])
    assert [r["user"] for r in store.reactions(channel=CH)] == ["UALICE"]
    assert fb.forget_member(store, "UBOB") == {"reacted": 0, "saved": 0, "interests": 0, "shares": 0,
                                               "picks": 0}


# -- replay -----------------------------------------------------------------------------------------
def test_replay_scores_feedback_above_the_order_the_channel_saw(hashing_store):
    """A team that likes topic b and not topic a: ranking the next posts with what it said before
    puts b papers first; the order the posts came in does not."""
    store = hashing_store
    papers = paper_ids(store, 12)
    rng = np.random.default_rng(0)
    centers = {"a": np.eye(8)[0], "b": np.eye(8)[1]}
    topic, vecs = {}, []
    for i, pid in enumerate(papers):
        t = "ab"[i % 2] if i < 10 else "b"
        topic[pid] = t
        vecs.append(centers[t] + 0.15 * rng.normal(size=8))
    matrix = np.array(vecs, dtype=np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    react = Log(store)
    for i, pid in enumerate(papers):
        at = T0 + i * DAY
        post(store, f"2024-06-{3 + i:02d}", pid, f"{1000 + i}.000001", at)
        for user in ("UALICE", "UBOB"):
            react(user, "+1" if topic[pid] == "b" else "sleeping", f"{1000 + i}.000001", at=at + 3600)
    scores = fb.replay_channel(store, CH, papers, matrix, [], {
        "as posted": {"as_posted": True}, "no feedback": {"feedback": False}, "feedback": {}}, horizon=4)
    by = {s.name: s for s in scores}
    assert by["feedback"].points == by["as posted"].points >= 8
    assert by["feedback"].hits == by["feedback"].points - 1  # only the first step, before any reaction, misses
    assert by["as posted"].precision_at_1 < 0.7
    assert by["feedback"].ndcg > by["as posted"].ndcg


def test_paperclub_replay_compares_rankings_on_the_logged_reactions(hashing_db, tmp_path):
    from click.testing import CliRunner

    from bot.cli import cli
    from conftest import copy_db
    from store import open_store

    db = copy_db(hashing_db, tmp_path / "replay.db")
    env = {"PAPERCLUB_MODEL": "hashing-256", "SLACK_BOT_TOKEN": "", "SLACK_APP_TOKEN": "",
           "PAPERCLUB_REACTION_WEIGHTS": "", "PAPERCLUB_FEEDBACK_HALF_LIFE_DAYS": "30"}
    empty = CliRunner().invoke(cli, ["--db", str(db), "replay"], env=env)
    assert empty.exit_code == 0 and "No reactions logged yet" in empty.output

    store = open_store(db)
    react = Log(store)
    for i, pid in enumerate(paper_ids(store, 10)):
        at = T0 + i * DAY
        post(store, f"2024-06-{3 + i:02d}", pid, f"{1000 + i}.000001", at)
        react("UALICE", "+1" if i % 3 else "sleeping", f"{1000 + i}.000001", at=at + 3600)
    store.close()
    out = CliRunner().invoke(cli, ["--db", str(db), "replay", "--half-life", "7", "--horizon", "4"], env=env)
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert lines[0].startswith("C1: ") and "ranking steps with a liked paper among the next 4 posts" in lines[0]
    names = [line.split("P@1")[0].strip() for line in lines[1:]]
    assert names == ["as posted", "no feedback", "feedback, half-life 30 d",
                     f"candidate: half-life 7 d, strength {PickSettings().feedback_strength:g}"]
    as_json = CliRunner().invoke(cli, ["--db", str(db), "replay", "--json"], env=env)
    data = json.loads(as_json.output)
    assert [s["picker"] for s in data["C1"]][:2] == ["as posted", "no feedback"]
    assert all(0 <= s["precision_at_1"] <= 1 and 0 <= s["ndcg"] <= 1 for s in data["C1"])
    assert len({s["points"] for s in data["C1"]}) == 1 and data["C1"][0]["points"] >= 6
