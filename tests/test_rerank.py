"""The re-rank of a search's best candidates (store/rerank.py): a known-item query that names a
paper's words, in its order, finds that paper first."""
from __future__ import annotations

import time
from dataclasses import replace

from store import HashingEmbedder, Record, Searcher, ingest_records
from store.rerank import QueryTerms, overlap, positions, reorder

# Both hold every word of the query. The first says it in the query's order, in one breath, and
# is the longer abstract (so BM25 alone prefers the second); the second scatters the words.
TOGETHER = ("Sparse attention kernels for long video transformers cut memory by an order of "
            "magnitude. We benchmark the kernels on six datasets, compare them with dense attention "
            "and with several recent baselines, and release code, trained checkpoints and logs.")
SCATTERED = ("Video models are costly to run. Transformers need much memory. Long clips hurt. "
             "Sparse methods can help. Kernels matter here. Attention is the cost.")
OTHERS = [
    "Diffusion models for image generation are slow to sample; we distil a teacher into a student.",
    "A new optimizer for training large language models adapts the learning rate per layer.",
    "Reinforcement learning from human feedback with a reward model trained on preference pairs.",
]
QUERY = "sparse attention kernels for long video transformers"


def _searcher(store, **kw):
    embedder = HashingEmbedder()
    texts = [TOGETHER, SCATTERED, *OTHERS]
    ingest_records(store, [Record(abstract=t, source="test", line=i + 1) for i, t in enumerate(texts)],
                   embedder, now=time.time())
    return Searcher(store, embedder, **kw)


def _first(searcher, query=QUERY):
    return searcher.search(query, limit=5)[0].paper.abstract


def test_the_paper_that_says_the_query_in_one_breath_comes_first(store):
    assert _first(_searcher(store)) == TOGETHER


def test_without_the_rerank_the_scattered_paper_wins_this_query(store):
    # What the re-rank changes: the same store and query without it put the other paper first.
    assert _first(_searcher(store, rerank={"top": 0})) == SCATTERED


def test_the_reranked_search_shows_the_same_papers_and_explains_them(store):
    searcher = _searcher(store)
    on = searcher.search(QUERY, limit=5)
    searcher.rerank_settings = {**searcher.rerank_settings, "top": 0}
    off = searcher.search(QUERY, limit=5)
    assert {h.paper.id for h in on} == {h.paper.id for h in off}
    assert [h.score for h in on] == sorted((h.score for h in on), reverse=True)
    assert "keywords" in on[0].why


def test_a_paper_whose_text_changed_is_judged_on_its_new_words(store):
    searcher = _searcher(store)
    searcher.search(QUERY)  # the head's words are kept from here on
    paper = next(p for p in store.iter_papers() if p.abstract == TOGETHER)
    changed = replace(paper, abstract=TOGETHER.replace("Sparse attention kernels", "Pruned convolution filters"))
    assert "spars" in searcher.doc_terms([paper])[paper.id][1]
    words, terms = searcher.doc_terms([changed])[paper.id]
    assert "spars" not in terms and "prune" in terms and "pruned" in words


def test_coverage_counts_rare_words_for_more_than_common_ones():
    query = QueryTerms.of([("rare", 2), ("common", 900)], papers=1000)
    rare_only, _ = overlap(query, positions(["rare", "x"]), window=4)
    common_only, _ = overlap(query, positions(["common", "x"]), window=4)
    assert rare_only > 0.5 > common_only
    assert overlap(query, positions(["rare", "common"]), window=4)[0] == 1.0


def test_proximity_needs_the_query_neighbours_within_the_window():
    query = QueryTerms.of([("graph", 10), ("kernel", 10)], papers=1000)
    near = ["graph", "a", "b", "kernel"]
    far = ["graph", *["x"] * 10, "kernel"]
    assert overlap(query, positions(near), window=4)[1] == 1.0
    assert overlap(query, positions(far), window=4)[1] == 0.0
    assert overlap(query, positions(far), window=4)[0] == 1.0  # both words are still held


def test_a_query_of_words_no_paper_holds_scores_nothing():
    query = QueryTerms.of([("zzz", 0), ("", 0)], papers=1000)
    assert overlap(query, positions(["zzz"]), window=4) == (0.0, 0.0)


def test_reorder_keeps_everything_past_the_head_below_it_in_its_order():
    fused = {"a": 0.9, "b": 0.8, "c": 0.7, "d": 0.6, "e": 0.1}
    out = reorder(fused, {"b": 0.2, "a": 0.1})
    assert sorted(out, key=lambda p: -out[p]) == ["b", "a", "c", "d", "e"]
