"""The in-memory vector index: incremental refresh across replicas, exact search below the
threshold, the approximate (HNSW, float16) index above it, and its saved graph."""
from __future__ import annotations

import time

import numpy as np
import pytest

from store import HashingEmbedder, PickSettings, Searcher, bundled_sample_paths, ingest_paths, ingest_records, open_store
from store.ingest import Record
from store.search import MatrixIndex
from store.vectors import DenseIndex, recall_at

QUANTUM = ("Quantum annealing hardware solves combinatorial optimisation; we benchmark annealing "
           "schedules on spin glass instances.")
VENUES = ["ICLR 2026", "ICLR 2025", "NeurIPS 2025", "ICML 2025", "CVPR 2025", "ACL 2025", "COLT 2025",
          "UAI 2025"]


def test_a_replica_finds_another_replicas_new_paper_loading_only_the_change(store_url):
    """Ingest through one Store object, search through another (a second replica)."""
    embedder = HashingEmbedder()
    writer = open_store(store_url)
    reader = open_store(store_url)
    try:
        ingest_paths(writer, bundled_sample_paths(), embedder, now=time.time())
        searcher = Searcher(reader, embedder)
        papers = writer.count_papers()
        assert "Quantum annealing" not in searcher.search("quantum annealing", limit=1)[0].paper.abstract
        index = searcher.index()
        assert index.rows_loaded == papers and len(index) == papers

        ingest_records(writer, [Record(abstract=QUANTUM, venue="QIP 2026", year=2026, source="test",
                                       line=1)], embedder, now=time.time())
        hit = searcher.search("quantum annealing", limit=1)[0]
        assert "Quantum annealing" in hit.paper.abstract and hit.dense_rank == 1
        assert searcher.search("quantum annealing", limit=1, collection="QIP")[0].paper.id == hit.paper.id
        assert searcher.index() is index  # updated in place, not rebuilt
        assert index.rows_loaded == papers + 1 and len(index) == papers + 1  # one row read, not all
        assert searcher.find_exact(hit.paper.short_name).id == hit.paper.id

        # A paper edited elsewhere: its row (new collection) is all that is read again.
        moved = writer.list_papers()[3]
        row = {k: v for k, v in writer.paper_rows([moved.id])[moved.id].items() if k != "changed"}
        writer.write_papers([{**row, "collection": "Moved 2030"}], [], now=time.time())
        assert searcher.search(moved.title or moved.abstract[:80], limit=3, collection="Moved 2030")[0].paper.id \
            == moved.id
        assert index.rows_loaded == papers + 2
    finally:
        writer.close()
        reader.close()


def test_an_interests_bm25_is_kept_until_a_new_paper_arrives(store):
    """Each interest's BM25 is computed once per library, not per pick, and a new paper counts in it
    at the next pick."""
    from store.daily import interest_lexical
    from store.pick import Interest

    embedder = HashingEmbedder()
    ingest_paths(store, bundled_sample_paths(), embedder, now=time.time())
    searcher = Searcher(store, embedder)
    old_ids = {p.id for p in store.list_papers()}
    topic = [Interest(7, "quantum annealing", "UANN", embedder.encode(["quantum annealing"])[0])]
    before = interest_lexical(searcher, topic, PickSettings())
    calls = []
    searcher_bm25 = searcher.bm25
    searcher.bm25 = lambda *a, **k: calls.append(a) or searcher_bm25(*a, **k)
    assert interest_lexical(searcher, topic, PickSettings()) == before and not calls  # kept: no second BM25

    ingest_records(store, [Record(abstract=QUANTUM, venue="QIP 2026", year=2026, source="test", line=1)],
                   embedder, now=time.time())
    after = interest_lexical(searcher, topic, PickSettings())
    new = ({p.id for p in store.list_papers()} - old_ids).pop()
    assert calls  # the library changed: computed again
    assert new not in before.get(7, {}) and after[7][new] == 1.0  # the new paper is the best match now


def test_the_days_pick_follows_a_new_paper_and_a_changed_interest_at_once(store):
    """The pick keeps each interest's relevance over the library between picks; a paper that
    arrives, or an interest that changes, counts in the very next pick."""
    from datetime import date

    from store import pick_for_day

    embedder = HashingEmbedder()
    ingest_paths(store, bundled_sample_paths(), embedder, now=time.time())
    searcher = Searcher(store, embedder)
    day = date(2026, 12, 3)

    def add(text):
        return store.add_interest("C1", text, "UANN", model=embedder.name, vector=embedder.encode([text])[0],
                                  now=time.time())

    first = add("quantum annealing")
    before = pick_for_day(store, searcher, "C1", day, feedback=None)
    assert "Quantum annealing" not in store.get_paper(before.paper_id).abstract
    assert pick_for_day(store, searcher, "C1", day, feedback=None).paper_id == before.paper_id

    ingest_records(store, [Record(abstract=QUANTUM, venue="QIP 2026", year=2026, source="test", line=1)],
                   embedder, now=time.time())
    assert "Quantum annealing" in store.get_paper(pick_for_day(store, searcher, "C1", day,
                                                               feedback=None).paper_id).abstract

    target = store.list_papers()[5]
    store.remove_interest("C1", first)
    add(target.abstract[:300])
    assert pick_for_day(store, searcher, "C1", day, feedback=None).paper_id == target.id


def test_a_paper_that_arrives_during_a_pick_is_in_the_next_one(store, monkeypatch):
    """A feed (or another replica) adds a paper while a pick is under way: that pick goes on with
    the library it read, and what it derived from it is not kept for the new library, whose first
    pick would otherwise read one relevance too few and fail (every pick, until the next paper)."""
    from datetime import date

    import store.daily as daily
    from store import pick_for_day

    embedder = HashingEmbedder()
    ingest_paths(store, bundled_sample_paths(), embedder, now=time.time())
    searcher = Searcher(store, embedder)
    store.add_interest("C1", "quantum annealing", "UANN", model=embedder.name,
                       vector=embedder.encode(["quantum annealing"])[0], now=time.time())
    read = daily.library_vectors

    def read_then_a_paper_arrives(store_, searcher_):
        library = read(store_, searcher_)
        ingest_records(store, [Record(abstract=QUANTUM, venue="QIP 2026", year=2026, source="test", line=1)],
                       embedder, now=time.time())
        return library

    monkeypatch.setattr(daily, "library_vectors", read_then_a_paper_arrives)
    during = pick_for_day(store, searcher, "C1", date(2026, 12, 3), feedback=None)
    assert "Quantum annealing" not in store.get_paper(during.paper_id).abstract  # it read the library before
    monkeypatch.setattr(daily, "library_vectors", read)
    after = pick_for_day(store, searcher, "C1", date(2026, 12, 3), feedback=None)
    assert "Quantum annealing" in store.get_paper(after.paper_id).abstract


def test_a_pick_whose_reactions_cannot_be_learned_still_picks_and_says_why(store, monkeypatch, caplog):
    """The reactions are a refinement: when learning from them fails, the day's paper is still
    picked (without them), and the log says so."""
    from datetime import date

    import store.daily as daily
    from store import Feedback, pick_for_day

    embedder = HashingEmbedder()
    ingest_paths(store, bundled_sample_paths(), embedder, now=time.time())
    searcher = Searcher(store, embedder)
    store.add_interest("C1", "graph neural networks", "UANN", model=embedder.name,
                       vector=embedder.encode(["graph neural networks"])[0], now=time.time())

    def broken(*args, **kwargs):
        raise RuntimeError("a reaction row the learner cannot read")

    monkeypatch.setattr(daily, "feedback_for_day", broken)
    with caplog.at_level("WARNING", logger="paperclub.daily"):
        pick = pick_for_day(store, searcher, "C1", date(2026, 12, 3), feedback=Feedback())
    assert pick is not None
    assert "reaction feedback for C1 failed; picking without it" in caplog.text


def test_a_paper_whose_text_changed_leaves_dense_search_until_re_embedded(store):
    embedder = HashingEmbedder()
    ingest_paths(store, bundled_sample_paths(), embedder, now=time.time())
    searcher = Searcher(store, embedder)
    paper = store.list_papers()[0]
    vec = searcher.index().vector(paper.id)
    assert vec is not None and searcher.index().search(vec, 1)[0][0] == paper.id
    row = {k: v for k, v in store.paper_rows([paper.id])[paper.id].items() if k != "changed"}
    store.write_papers([{**row, "content_hash": "edited-not-embedded"}], [], now=time.time())
    assert searcher.index().vector(paper.id) is None
    assert paper.id not in [pid for pid, _ in searcher.index().search(vec, 100)]


# -- realistic vectors: the bundled abstracts' real embeddings, perturbed ------------------------
@pytest.fixture(scope="module")
def real_vectors(seed_db):
    store = open_store(seed_db, migrate=False)
    try:
        from store import SentenceTransformerEmbedder

        _, mat = store.load_vectors(SentenceTransformerEmbedder().name)
    finally:
        store.close()
    assert len(mat) >= 30
    return mat


def perturbed(base: np.ndarray, n: int, seed: int) -> np.ndarray:
    """n unit vectors near mixtures of two real ones: clusters as dense as real abstracts'."""
    rng = np.random.default_rng(seed)
    a, b = rng.integers(0, len(base), n), rng.integers(0, len(base), n)
    mix = base[a] + rng.uniform(0.0, 0.6, (n, 1)) * base[b]
    mix += rng.standard_normal(mix.shape).astype(np.float32) * (0.7 / np.sqrt(base.shape[1]))
    return (mix / np.linalg.norm(mix, axis=1, keepdims=True)).astype(np.float32)


def build(vectors: np.ndarray, **kwargs) -> DenseIndex:
    index = DenseIndex(threads=1, **kwargs)
    rows = [(f"p{i:05d}", VENUES[i % len(VENUES)], 2025 + i % 2, f"name {i}", float(i), v.tobytes())
            for i, v in enumerate(vectors)]
    for start in range(0, len(rows), 1000):
        index.apply(rows[start : start + 1000])
    return index


def test_exact_below_the_threshold_matches_a_plain_matrix_product(real_vectors):
    vectors = perturbed(real_vectors, 3000, seed=1)
    index = build(vectors)
    assert not index.approximate
    plain = MatrixIndex([f"p{i:05d}" for i in range(len(vectors))], vectors,
                        {f"p{i:05d}": (VENUES[i % len(VENUES)], 2025 + i % 2) for i in range(len(vectors))})
    for q in perturbed(real_vectors, 20, seed=2):
        assert index.search(q, 10) == plain.search(q, 10)
        assert index.search(q, 10, collection="ICLR", year=2026, exclude="p00002") == \
            plain.search(q, 10, collection="ICLR", year=2026, exclude="p00002")


@pytest.mark.parametrize("dtype,rescored", [("i8", True), ("f16", False)])
def test_approximate_index_recall_at_10_against_exact(real_vectors, tmp_path, dtype, rescored):
    # int8 in the graph, its hits re-ranked by the exact vectors (as refresh() sets it up from the
    # store; without the re-ranking int8 fell below 0.98 on these vectors), or float16 alone.
    vectors = perturbed(real_vectors, 6000, seed=3)
    queries = perturbed(real_vectors, 200, seed=4)
    exact = build(vectors)
    # The thresholds lowered: the graph from 1000 vectors on, filters over 300 rows over-fetched from it.
    approx = build(vectors, exact_limit=1000, dtype=dtype, exact_subset=300)
    if rescored:
        approx.rescore = lambda ids: {p: vectors[int(p[1:])] for p in ids}
    assert approx.approximate and not exact.approximate and len(approx) == len(exact) == 6000
    truth = [[p for p, _ in exact.search(q, 10)] for q in queries]
    found = [[p for p, _ in approx.search(q, 10)] for q in queries]
    recall = recall_at(truth, found, 10)
    print(f"recall@10 {dtype}: {recall:.4f}")
    assert recall >= 0.98, recall
    # The cosines it reports are the vectors' own (float16 rounding aside).
    top = approx.search(queries[0], 1)[0]
    assert abs(top[1] - float(vectors[int(top[0][1:])] @ queries[0])) < (2e-3 if dtype == "f16" else 2e-2)

    # Filtered searches, broad (over-fetched from the graph) and narrow (scanned exactly).
    for coll, year in (("ICLR", None), ("COLT 2025", 2025), ("UAI", 2026), (None, 2025), ("COLT", 2026)):
        t = [[p for p, _ in exact.search(q, 10, collection=coll, year=year)] for q in queries[:50]]
        f = [[p for p, _ in approx.search(q, 10, collection=coll, year=year)] for q in queries[:50]]
        assert recall_at(t, f, 10) >= 0.98, (coll, year)
        assert all(int(p[1:]) % 2 == 1 for ids in f for p in ids) if year == 2026 else True
        assert all(len(ids) == 10 for ids in f) if coll != "COLT" else not any(f)

    # Saved and loaded again (a restart): the same answers, no rebuild.
    path = tmp_path / "graph.usearch"
    assert approx.save(path, version=7, model="m")
    loaded, version = DenseIndex.load(path, model="m", max_version=7, dtype=dtype)
    assert version == 7 and len(loaded) == len(approx) and loaded.approximate
    assert DenseIndex.load(path, model="other", max_version=7) is None
    assert DenseIndex.load(path, model="m", max_version=6) is None  # a store older than the graph
    other = "f16" if dtype == "i8" else "i8"
    assert DenseIndex.load(path, model="m", max_version=7, dtype=other) is None  # another setting: built anew


def test_searcher_past_the_threshold_refreshes_the_graph_and_restarts_from_it(real_vectors, store_url, tmp_path):
    """The whole path on a store: approximate index, a replica's change, a restart from the saved graph."""
    dim = real_vectors.shape[1]
    embedder = HashingEmbedder(dim=dim, name=f"hashing-{dim}")
    store = open_store(store_url)
    try:
        vectors = perturbed(real_vectors, 1500, seed=5)
        rows = [{"id": f"p{i:05d}", "collection": VENUES[i % len(VENUES)], "year": 2025, "title": f"Paper {i}",
                 "short_name": f"P{i}", "headline": f"paper {i}", "abstract": f"abstract number {i}",
                 "content_hash": f"h{i}"} for i in range(len(vectors))]
        embs = [{"paper_id": r["id"], "model": embedder.name, "vector": v, "content_hash": r["content_hash"]}
                for r, v in zip(rows, vectors)]
        store.write_papers(rows, [], embeddings=embs, now=time.time())
        cache = tmp_path / "index" / "graph.usearch"
        searcher = Searcher(store, embedder, exact_limit=500, index_cache=str(cache))
        index = searcher.index()
        assert index.approximate and cache.exists() and len(index) == 1500
        q = vectors[42]
        assert index.search(q, 1)[0][0] == "p00042"

        new = perturbed(real_vectors, 1, seed=6)[0]
        store.write_papers([{**rows[0], "id": "fresh", "short_name": "FRESH", "content_hash": "hf"}], [],
                           embeddings=[{"paper_id": "fresh", "model": embedder.name, "vector": new,
                                        "content_hash": "hf"}], now=time.time())
        assert searcher.index().search(new, 1)[0][0] == "fresh"
        assert index.rows_loaded == 1501

        # A restarted replica: the saved graph, every paper's facets (no vectors) and the one new vector.
        again = Searcher(store, embedder, exact_limit=500, index_cache=str(cache))
        restarted = again.index()
        assert restarted.approximate and len(restarted) == 1501
        assert restarted.rows_loaded == 1501 + 1  # facets of all, then the change since the save
        assert restarted.search(new, 1)[0][0] == "fresh" and restarted.search(q, 1)[0][0] == "p00042"
        assert again.find_exact("p42").id == "p00042"  # names come back with the facets
    finally:
        store.close()


def test_the_saved_graph_is_saved_again_after_many_changes_so_a_restart_replays_few(real_vectors, tmp_path):
    """A month of feeds must not all be replayed into the graph at the next start."""
    from store.vectors import refresh

    dim = real_vectors.shape[1]
    name = f"hashing-{dim}"
    store = open_store(tmp_path / "paperclub.db")
    vectors = perturbed(real_vectors, 1800, seed=8)

    def write(lo: int, hi: int) -> None:
        rows = [{"id": f"p{i:05d}", "collection": VENUES[i % len(VENUES)], "year": 2025, "short_name": f"P{i}",
                 "headline": f"paper {i}", "abstract": f"abstract {i}", "content_hash": f"h{i}"}
                for i in range(lo, hi)]
        store.write_papers(rows, [], embeddings=[{"paper_id": r["id"], "model": name, "vector": vectors[i],
                                                  "content_hash": r["content_hash"]}
                                                 for i, r in zip(range(lo, hi), rows)], now=time.time())
    try:
        write(0, 1500)
        cache = tmp_path / "graph.usearch"
        index, version = refresh(None, store, name, None, cache=cache, exact_limit=500)
        assert index.approximate and cache.exists()
        first = version
        for k in range(3):  # three feed harvests of 100 papers; the third takes it past 250 changes
            write(1500 + 100 * k, 1600 + 100 * k)
            index, version = refresh(index, store, name, version, cache=cache, exact_limit=500, resave_after=250)
            assert (index.saving is not None) == (k == 2)
        index.saving.join(60)
        restarted, _ = refresh(None, store, name, None, cache=cache, exact_limit=500)
        assert restarted.restored_from == version > first
        assert restarted.rows_loaded == 1800  # every paper's facets, and no vector to replay
        assert len(restarted) == 1800 and restarted.search(vectors[1750], 1)[0][0] == "p01750"
    finally:
        store.close()


def test_graph_hits_are_ranked_by_the_stores_exact_vectors(real_vectors, store_url, tmp_path):
    """Past the threshold the graph holds quantised vectors; the hits it returns are re-ranked by
    the stored float32 ones, so scores (and ties) are what exact search would say."""
    from store.vectors import refresh

    dim = real_vectors.shape[1]
    name = f"hashing-{dim}"
    store = open_store(store_url)
    vectors = perturbed(real_vectors, 1200, seed=9)
    rows = [{"id": f"p{i:05d}", "collection": VENUES[i % len(VENUES)], "year": 2025, "short_name": f"P{i}",
             "headline": f"paper {i}", "abstract": f"abstract {i}", "content_hash": f"h{i}"} for i in range(1200)]
    store.write_papers(rows, [], embeddings=[{"paper_id": r["id"], "model": name, "vector": v,
                                              "content_hash": r["content_hash"]} for r, v in zip(rows, vectors)],
                       now=time.time())
    try:
        index, _ = refresh(None, store, name, None, exact_limit=500, dtype="i8")
        assert index.approximate
        exact = MatrixIndex([r["id"] for r in rows], vectors)
        truth, found = [], []
        for q in perturbed(real_vectors, 20, seed=10):
            got = index.search(q, 10)
            # each score is the paper's exact cosine (int8's own are off by ~1e-2), best first
            assert all(abs(s - float(vectors[int(p[1:])] @ q)) < 1e-5 for p, s in got), got
            assert [s for _, s in got] == sorted((s for _, s in got), reverse=True)
            truth.append([p for p, _ in exact.search(q, 10)])
            found.append([p for p, _ in got])
        assert recall_at(truth, found, 10) >= 0.98  # the graph may miss one now and then
    finally:
        store.close()


def test_searches_on_other_threads_are_answered_while_the_index_grows_into_the_graph(real_vectors):
    """The bot searches on worker threads while a refresh applies another replica's rows,
    crossing the threshold (the matrix becomes a graph) and resizing the graph."""
    import threading

    vectors = perturbed(real_vectors, 4000, seed=7)
    index = DenseIndex(threads=1, exact_limit=1500)
    rows = [(f"p{i:05d}", VENUES[i % len(VENUES)], 2025, f"n{i}", float(i), v.tobytes())
            for i, v in enumerate(vectors)]
    index.apply(rows[:200])
    stop, errors, answered = threading.Event(), [], [0]

    def searching(seed: int):
        q = perturbed(real_vectors, 50, seed=seed)
        while not stop.is_set():
            try:
                for v in q:
                    hits = index.search(v, 10, collection="ICLR" if seed % 2 else None)
                    assert hits and all(index.vector(pid) is not None for pid, _ in hits)
                    answered[0] += 1
            except Exception as e:  # noqa: BLE001 - any failure is the finding
                errors.append(e)
                return

    workers = [threading.Thread(target=searching, args=(s,)) for s in (11, 12)]
    for w in workers:
        w.start()
    for start in range(200, len(rows), 300):
        index.apply(rows[start : start + 300])
    stop.set()
    for w in workers:
        w.join()
    assert not errors, errors[0]
    assert index.approximate and len(index) == 4000 and answered[0] > 0
    assert index.search(vectors[3999], 1)[0][0] == "p03999"
