"""The day's pick for a channel: what `paperclub pick`, the scheduled post, `/paper today` and the benches all call.

`pick_for_day` loads the channel's inputs from the store (interests, what it was
shown, what its reading group read, how it reacted: the loaders at the end of
this module) and hands them to the pure `store.pick.pick_daily`. A channel with
feeds picks among the papers its feeds announced in the last `fresh_days` first;
the library's older stock is the fallback when none of them is left. The searcher
comes in as an argument: its in-memory vectors and its BM25 serve every pick.
"""
from __future__ import annotations

import logging
from datetime import date, timedelta
from typing import TYPE_CHECKING, Sequence

import numpy as np

from .base import Store
from .feedback import Feedback, feedback_for_day
from .ingest import most_sentences
from .pick import (
    WHOLE_FIELD, WHOLE_FIELD_COS, DailyPick, Interest, PastPost, PickSettings, Relevance, areas_show,
    interest_scores, interest_weights, is_broad, lexical_for, pick_daily, typicality,
)
from .sources import fresh_label, fresh_papers
from .taste import Library

if TYPE_CHECKING:
    from .embed import Embedder
    from .search import Searcher

log = logging.getLogger("paperclub.daily")


def pick_for_day(store: Store, searcher: Searcher, channel: str, day: date, *,
                 feedback: Feedback | None, settings: PickSettings | None = None,
                 fresh_first: bool = True) -> DailyPick | None:
    """The channel's paper of the day for `day`, with its runners-up and why; None when nothing is left.

    feedback: how reactions count (None: pick as if nobody had reacted). fresh_first: False ranks
    the whole library at once (the reading group's proposals, `store.club.propose`).
    """
    settings = settings or PickSettings()
    ids, matrix = library_vectors(store, searcher)
    if len(ids) == 0:
        return None
    reactions = store.reactions(channel=channel)  # read once: for the feedback, and for history_for (who reacted)
    adjust = _reactions(store, channel, day, feedback, reactions) if feedback is not None else None
    interests = interests_for(store, channel, searcher.embedder)
    lexical = interest_lexical(searcher, interests, settings) if interests and settings.lexical_weight else None
    # A paper the channel's reading group read, chose or voted on counts as shown: never the paper of the day.
    read = [PastPost(date.min, pid) for pid in sorted(club_papers(store, channel))]
    history = history_for(store, channel, reactions) + read
    # The library (its rows, mean and moments) is kept by the index: made once a library version, as
    # are the copies of each paper shown (a key scan of each, 20 ms a pick at 60 days' posts).
    index = searcher.index()
    copies = index.derived(("copies",), dict, of=ids)
    history += copies_of_shown(store, history, since=day - COPY_DAYS, known=copies)  # the same paper, another id
    signals = None if interests else store.paper_signals()  # only a day without interests reads them

    library = index.derived(("library",), lambda: Library(ids, matrix), of=ids)
    typical = library_typicality(searcher, ids, matrix, settings) if interests else None

    def pick(rows=None, labels=None) -> DailyPick | None:
        cand_ids, cand = (ids, matrix) if rows is None else ([ids[i] for i in rows], matrix[rows])
        relevance = library_relevance(searcher, ids, matrix, interests, lexical, settings) if interests else None
        if relevance is not None and rows is not None:
            # Fresh candidates expand each interest by their own top papers (only the library's is kept),
            # but how wide an interest is, is told against the library: a night's papers can't say.
            relevance = interest_scores(cand, cand_ids, interests, lexical, settings, weight=relevance.weight)
        return pick_daily(channel, day, cand_ids, cand, interests, history, signals=signals,
                          feedback=adjust or None, settings=settings, lexical=lexical, labels=labels,
                          typical=typical if typical is None or rows is None else typical[rows],
                          relevance=relevance, library=library)

    fresh = fresh_papers(store, channel, day) if fresh_first else {}
    rows = [i for i, pid in enumerate(ids) if pid in fresh] if fresh else []
    if rows:
        # The explanation says so (and the stored pick, for /paper today): "…; new on arXiv today".
        chosen = pick(rows, {pid: fresh_label(kind, at, day) for pid, (at, kind) in fresh.items()})
        if chosen is not None:
            return chosen
    return pick()


def library_vectors(store: Store, searcher: Searcher) -> tuple[list[str], np.ndarray]:
    """Every paper's id and L2-normalised vector (rows align), as the pick and the calibration round read them."""
    index = searcher.index()
    # The index's own float32 matrix; above its exact limit it keeps a graph instead, so read the store's.
    if not index.approximate:
        return index.ids, index.matrix
    return store.load_vectors(searcher.embedder.name)


def broad_interests(store: Store, searcher: Searcher, rows: list[dict], settings: PickSettings) -> list[bool]:
    """Whether each interest (`rows`, as `store.interests` lists them) is as wide as the library
    ("machine learning" among ML papers): its weight (`interest_weights`) under BROAD, so typicality,
    not its words, ranks its member's turns; in a library too small for that (`areas_show`), when it
    names the whole field (WHOLE_FIELD), though its words still rank there. False where that can't be
    told yet: a vector of another
    model, not re-embedded until the next pick (`interests_for`). What the reply to an added interest,
    the list of them and the note after misses say of it."""
    current = [i for i, r in enumerate(rows)
               if r.get("vector") is not None and r.get("model") == searcher.embedder.name]
    out = [False] * len(rows)
    ids, matrix = library_vectors(store, searcher) if current else ([], None)
    if len(ids) == 0:
        return out
    vectors = np.stack([np.asarray(rows[i]["vector"], dtype=np.float32) for i in current])
    if areas_show(len(ids), settings):
        wide = is_broad(interest_weights(matrix, matrix @ vectors.T, settings))
    else:  # too few papers to tell against: an interest naming the whole field is as wide as any library
        fields = searcher.index().derived(("whole field", WHOLE_FIELD),
                                          lambda: np.stack([searcher.embed_query(t) for t in WHOLE_FIELD]))
        wide = (vectors @ np.asarray(fields, dtype=np.float32).T).max(axis=1) >= WHOLE_FIELD_COS
    for i, w in zip(current, wide):
        out[i] = bool(w)
    return out


def interest_lexical(searcher: Searcher, interests, settings: PickSettings) -> dict[int, dict[str, float]]:
    """`lexical_for` each interest as `settings` say, kept by the searcher's index until the library
    changes: an interest's BM25 over an unchanged library is the same every day (a third of a pick at
    10k papers), and so are the words its nearest papers add to it."""
    index = searcher.index()
    limit, expand = settings.lexical_candidates, (settings.prf_docs, settings.lexical_expansion)
    out: dict[int, dict[str, float]] = {}
    for it in interests:
        key = ("lexical", it.id, it.text, it.paper_id, limit, expand)
        out.update(index.derived(key, lambda it=it: lexical_for(searcher, [it], limit, expand_from=expand[0],
                                                                 expand_words=expand[1])))
    return out


def library_typicality(searcher: Searcher, ids, matrix: np.ndarray, settings: PickSettings) -> np.ndarray | None:
    """`typicality` of every paper (`ids`, `matrix`: the library's), kept by the searcher's index until
    the library changes (its density is a whole-library scan: about 0.2 s at 10k papers, once a library
    version)."""
    key = ("typical", settings.typical_weight, settings.typical_min_papers, settings.density_sample)
    return searcher.index().derived(key, lambda: typicality(matrix, settings), of=ids)


def library_relevance(searcher: Searcher, ids, matrix: np.ndarray, interests, lexical,
                      settings: PickSettings) -> Relevance:
    """`interest_scores` of the whole library for these interests, kept by the searcher's index until
    the library changes: the same every day until a paper or an interest changes (a sixth of a pick
    at 10k papers). Read-only: a pick must not write into what the next one reads."""
    # Keyed on the whole (frozen) settings: interest_scores reads several of them, and a list by hand
    # goes stale when it reads one more.
    key = ("relevance", tuple((it.id, it.text, it.paper_id) for it in interests), settings)

    def make():
        scores = interest_scores(matrix, ids, interests, lexical, settings)
        for a in scores:
            a.setflags(write=False)
        return scores

    return searcher.index().derived(key, make, of=ids)


def _reactions(store: Store, channel: str, day: date, feedback: Feedback, rows: list[dict]) -> dict:
    try:
        return feedback_for_day(store, channel, day, weights=feedback.weights,
                                half_life_days=feedback.half_life_days, reactions=rows)
    except Exception:  # feedback is a refinement: a failure here must not stop the post
        log.warning("reaction feedback for %s failed; picking without it", channel, exc_info=True)
        return {}


# -- loading a channel's inputs from the store ---------------------------------------------
def interests_for(store: Store, channel: str, embedder: Embedder) -> list[Interest]:
    """The channel's interests as vectors of the current model (re-embedding any left from another)."""
    rows = store.interests(channel)
    stale = [r for r in rows if r["model"] != embedder.name or r["vector"] is None]
    if stale:
        fresh = []
        for r in stale:
            vec = store.get_vector(r["paper_id"], embedder.name) if r["paper_id"] else None
            if vec is None:
                vec = embedder.encode([r["text"]])[0]
            fresh.append((r["id"], embedder.name, vec))
            r["vector"] = vec
        store.set_interest_vectors(fresh)
    return [Interest(r["id"], r["text"], r["added_by"], np.asarray(r["vector"], dtype=np.float32),
                     r["paper_id"]) for r in rows]


def read_papers(store: Store, channel: str) -> set[str]:
    """Papers the channel's reading group read or chose: never proposed, nominated or picked again."""
    return {r["paper_id"] for r in store.club_sessions(channel) if r["paper_id"] and r["state"] != "skipped"}


def club_papers(store: Store, channel: str) -> set[str]:
    """Papers the channel's reading group read, chose or had on a ballot (a member's nomination, the
    bot's proposal, won or lost): the team has seen them there, so never the paper of the day."""
    return read_papers(store, channel) | {r["paper_id"] for r in store.nominations(channel)}


def same_papers(store: Store, ids: Sequence[str], known: dict | None = None) -> dict[str, str]:
    """Papers that are one of `ids` under another id (copy -> the one of `ids`): the same title or
    abstract, or most of the same sentences. Ingest merges a record that shares an id, a title or
    the whole abstract with a paper it knows; an arXiv copy of a bundled abstract (a title now, one
    sentence reworded) or a camera-ready OpenReview note of an arXiv paper (a new title, an edited
    abstract) comes in as a new paper, and is the same one to a team that has read it.

    known: each paper's copies (`_copies`) as read before from this library, filled in here for
    `ids` not in it yet: a pick reads the copies of every paper shown, which change only as the
    library does (pick_for_day keeps it by the searcher's index)."""
    ids = list(dict.fromkeys(i for i in ids if i))
    known = {} if known is None else known
    missing = [i for i in ids if i not in known]
    if missing:
        known.update(_copies(store, missing))
    asked, out = set(ids), {}
    for pid in ids:  # the same title or abstract first, the first of `ids` holding it
        for other in known[pid][0]:
            if other not in asked:
                out.setdefault(other, pid)
    for pid, other in sorted((p, o) for p in ids for o in known[p][1]):
        if other not in asked and other not in out:
            out[other] = pid
    return out


def _copies(store: Store, ids: Sequence[str]) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    """Each of `ids` -> (the papers with its title or abstract, those with most of its sentences),
    other than itself."""
    mine = store.paper_keys(ids)
    wanted = sorted({k for keys in mine.values() for k in keys if k.startswith(("sent:", "title:", "abs:"))})
    holders = store.lookup_keys(wanted)
    whole: dict[str, list[str]] = {pid: [] for pid in ids}
    shared: dict[tuple[str, str], int] = {}
    for pid, keys in mine.items():
        for key in keys:
            for other in holders.get(key, ()):
                if other == pid:
                    continue
                if key.startswith("sent:"):
                    shared[(pid, other)] = shared.get((pid, other), 0) + 1
                elif other not in whole[pid]:
                    whole[pid].append(other)
    # Sentences (over 40 characters) in common: most of the shorter abstract's, by ingest's own rule
    # for an untitled record (`most_sentences`); fewer than two can't be, so those keys are not read.
    candidates = {other for (_, other), n in shared.items() if most_sentences(n, n)}
    theirs = store.paper_keys(sorted(candidates)) if candidates else {}

    def sentences(keys) -> int:
        return sum(k.startswith("sent:") for k in keys)

    most: dict[str, list[str]] = {pid: [] for pid in ids}
    for (pid, other), n in sorted(shared.items()):
        if other in candidates and most_sentences(n, min(sentences(mine[pid]), sentences(theirs.get(other, ())))):
            most[pid].append(other)
    return {pid: (tuple(whole[pid]), tuple(most[pid])) for pid in ids}


# How far back a shown paper's copies are looked for: a new version or a camera-ready comes within
# months, and the look is a key scan per shown paper (about 25 ms for 100 days' posts, 0.2 s for a
# year's, in a 3,000-paper library: `/paper today` waits on it).
COPY_DAYS = timedelta(days=120)


def copies_of_shown(store: Store, history: Sequence[PastPost], *, since: date = date.min,
                    known: dict | None = None) -> list[PastPost]:
    """Past posts for the copies (`same_papers`) of what `history` shows from `since` on (and of the
    reading group's papers, dated date.min): a copy of a paper the channel used up is used up; a copy
    of one shown under "Also today" was shown there that day."""
    history = [p for p in history if p.day >= since or p.day == date.min]
    used = {pid for p in history for pid in (p.paper_id, *p.engaged) if pid}
    previewed: dict[str, date] = {}
    for p in sorted(history, key=lambda p: p.day):
        for r in p.runners_up:
            previewed.setdefault(r, p.day)
    out = []
    for copy, original in sorted(same_papers(store, [*used, *previewed], known).items()):
        if original in used:
            out.append(PastPost(date.min, copy))
        else:
            out.append(PastPost(previewed[original], None, runners_up=(copy,)))
    return out


def history_for(store: Store, channel: str, reactions: Sequence[dict] | None = None) -> list[PastPost]:
    """What the channel was shown before, from its post rows; runners-up a member saved are engaged.

    reactions: the channel's reaction log, when the caller has read it (who reacted is a member)."""
    rows = store.post_history(channel)
    members = {r["added_by"] for r in store.interests(channel) if r["added_by"]}
    members |= {r["user"] for r in (store.reactions(channel=channel) if reactions is None else reactions)}
    saved = {s["paper_id"] for user in sorted(members) for s in store.saved_papers(user)}
    return [PastPost.of_row(r, saved) for r in rows]
