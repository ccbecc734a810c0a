"""Search: what a researcher typing into /paper search would notice.

Quality tests use the real model on the bundled ICLR 2026 abstracts (ingested
once per module); fast tests use HashingEmbedder on a handful of made-up papers.
Papers are found by distinctive abstract text, not by short names (the parser
that makes those is still changing).
"""
from __future__ import annotations

import time
import unicodedata

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from store import (
    EmptyQuery, HashingEmbedder, PaperNotFound, Record, Searcher, Store,
    bundled_sample_paths, ingest_paths, ingest_records, open_store,
)
from store.backends.sqlite import match_expression
from store.search import safe_terms


def paper_with(store: Store, text: str) -> str:
    """The id of the one paper whose abstract contains text."""
    ids = [p.id for p in store.iter_papers() if text.lower() in p.abstract.lower()]
    assert len(ids) == 1, f"{text!r} is in {len(ids)} abstracts"
    return ids[0]


# -- real model, seed corpus ---------------------------------------------------------
@pytest.fixture(scope="module")
def seed(tmp_path_factory, real_embedder):
    store = open_store(tmp_path_factory.mktemp("search") / "seed.db")
    ingest_paths(store, bundled_sample_paths(), real_embedder, now=time.time())
    searcher = Searcher(store, real_embedder)
    searcher.warm()
    return searcher


PARAPHRASES = [
    ("noticing the unexpected moments in a clip by how much new frames change the model's beliefs",
     "Bayesian Surprise"),
    ("a replacement for softmax when scoring experts in MoE layers", "Kernel Inspired Router"),
    ("how confident is an LLM: likelihood of its single greedy answer as the uncertainty score",
     "greedy decoding"),
    ("does it matter whether you prune before you quantize", "compression order"),
    ("predicting how strongly genes are expressed from DNA", "Gene expression prediction"),
    ("inventing new words so we can better steer and understand a language model", "neologism learning"),
    ("why models mixing Mamba layers with attention collapse on contexts longer than they were trained on",
     "Hybrid Mamba-Transformer"),
    ("picking which samples to train the draft model on so more guessed tokens get accepted",
     "Speculative Decoding (SD)"),
    ("making a language model forget copyrighted or harmful knowledge without wrecking it",
     "LLM unlearning"),
    ("formal safety checks for robot plans written by language models", "planners for embodied AI"),
    ("when in pretraining should the best data be shown to the model", "training re-evaluation curve"),
    ("a teacher network passes its preferences to the student through unrelated number lists",
     "likes owls"),
    ("route simple queries to a small LLM and hard ones to a large LLM to trade latency for quality",
     "model cascades"),
    ("benchmark of how cities change over time for multimodal models", "Urban development"),
    ("recognising feelings in spoken audio with a speech LLM that explains itself",
     "Emotional information in speech"),
]


@pytest.mark.slow
@pytest.mark.parametrize("query,text", PARAPHRASES, ids=[t for _, t in PARAPHRASES])
def test_paraphrased_query_finds_its_paper_first(seed, query, text):
    hits = seed.search(query, limit=5)
    assert hits[0].paper.id == paper_with(seed.store, text), [h.paper.headline for h in hits]


ACRONYMS = [("SPIKE", "Bayesian Surprise"), ("KERN", "Kernel Inspired Router"),
            ("G-NLL", "greedy decoding"), ("TTOM", "Test-Time Optimization and Memorization"),
            ("TREC", "training re-evaluation curve"), ("ChainMPQ", "relation hallucinations"),
            ("CaReBench", "Captioning and Retrieval"), ("kern router", "Kernel Inspired Router")]


@pytest.mark.slow
@pytest.mark.parametrize("query,text", ACRONYMS, ids=[q for q, _ in ACRONYMS])
def test_acronym_finds_its_paper_first(seed, query, text):
    hits = seed.search(query, limit=3)
    assert hits[0].paper.id == paper_with(seed.store, text)
    assert "keywords:" in hits[0].why or hits[0].exact


@pytest.mark.slow
@pytest.mark.parametrize("query", [
    'surprise "videos', 'surprise AND videos', 'NEAR(surprise videos', 'surpris* videos',
    '^surprise videos', 'abstract:surprise videos', '-surprise videos', '(surprise videos',
    'surprise) videos"', 'surprise OR NOT videos', '"surprise" "videos"', 'surprise + videos {}[]',
])
def test_fts_syntax_is_plain_text(seed, query):
    hits = seed.search(query, limit=3)
    assert hits[0].paper.id == paper_with(seed.store, "Bayesian Surprise")


@pytest.mark.slow
@pytest.mark.parametrize("query", ['"', "*", "(", "^", "-", ":", '""', "()", "   ", "", "\n\t"])
def test_nothing_to_search_for_is_a_clear_message(seed, query):
    with pytest.raises(EmptyQuery):
        seed.search(query)


@pytest.mark.slow
@pytest.mark.parametrize("query", [
    "AND", "OR NOT", "NEAR", "🙂🎥", "🎥 surprise in videos 🙂", "视频中的惊喜时刻", "動画の驚き",
    "видео с неожиданными событиями", "x" * 10_000, "video " * 2_000, "a",
])
def test_odd_queries_return_without_error(seed, query):
    hits = seed.search(query, limit=5)
    assert 0 < len(hits) <= 5
    assert len({h.paper.id for h in hits}) == len(hits)


@pytest.mark.slow
def test_long_query_still_finds_its_paper(seed):
    paper = seed.store.get_paper(paper_with(seed.store, "Bayesian Surprise"))
    query = (paper.abstract + " ") * 8  # ~10k characters
    assert len(query) > 8_000
    assert seed.search(query, limit=1)[0].paper.id == paper.id


VIDEO_LLM_PAPERS = ["Bayesian Surprise", "ST-GridPool", "hour-long videos", "fine-grained video motion"]


@pytest.mark.slow
@pytest.mark.parametrize("text", VIDEO_LLM_PAPERS)
def test_similar_to_a_video_llm_paper_is_video_papers(seed, text):
    pid = paper_with(seed.store, text)
    hits = seed.similar(pid, limit=5)
    assert pid not in [h.paper.id for h in hits]
    videos = ["video" in h.paper.abstract.lower() for h in hits]
    assert videos[0] and sum(videos[:3]) >= 2, [h.paper.headline for h in hits]
    assert all(h.why for h in hits)


@pytest.mark.slow
def test_similar_to_an_moe_paper_is_the_other_moe_paper(seed):
    pid = paper_with(seed.store, "Kernel Inspired Router")
    hits = seed.similar(pid, limit=3)
    assert hits[0].paper.id == paper_with(seed.store, "expert homogenization")


# Topic-mates written for this test: each pair is one research problem told in different
# words; the singles share generic words ("graph", "diffusion", "language model") with them.
MATES = [
    ("We predict the three-dimensional structure of proteins from their amino acid sequence with an "
     "equivariant graph network, and report higher accuracy on CASP targets than prior folding models.",
     "Generating protein backbones: a denoising model places residues in 3D conditioned on the chain's "
     "sequence; designed folds agree with AlphaFold predictions."),
    ("Speech recognition for low-resource languages: self-supervised pretraining on untranscribed audio, "
     "then fine-tuning with CTC on a few hours of labelled speech, lowers word error rates.",
     "Transcribing spoken recordings made in noisy rooms is hard for ASR systems; we add a denoising "
     "front end and report lower word error rate on far-field benchmarks."),
    ("A quadruped robot learns to walk in simulation with reinforcement learning; domain randomization "
     "of friction and mass lets the policy transfer to the real robot without fine-tuning.",
     "Sim-to-real transfer for legged locomotion: we train gait controllers in a physics simulator "
     "and deploy them on hardware over rough terrain."),
    ("Clients train a shared model without sending their data to a server; we add differential privacy "
     "to the aggregated updates and bound the privacy loss per round of federated learning.",
     "Federated learning across devices with non-IID data: compressing the client updates cuts "
     "communication while the global model still converges."),
    ("Large language models write programs from docstrings; feeding back failing unit tests lets the "
     "model repair its code, raising pass@1 on HumanEval.",
     "A benchmark for program synthesis: coding tasks with hidden tests that measure whether code "
     "models generate functionally correct solutions."),
]
SINGLES = [
    "Graph neural networks predict molecular properties such as solubility from atoms and bonds.",
    "A diffusion model for text-to-image generation that samples high-resolution pictures in four steps.",
    "We translate between English and German with a large language model prompted with a few examples.",
]


@pytest.fixture(scope="module")
def mates(tmp_path_factory, real_embedder):
    store = open_store(tmp_path_factory.mktemp("mates") / "mates.db")
    texts = [t for pair in MATES for t in pair] + SINGLES
    ingest_records(store, [Record(abstract=t, source="test", line=i + 1) for i, t in enumerate(texts)],
                   real_embedder, now=time.time())
    return Searcher(store, real_embedder)


@pytest.mark.slow
@pytest.mark.parametrize("pair", range(len(MATES)))
def test_more_like_this_puts_the_topic_mate_first(mates, pair):
    a, b = (paper_with(mates.store, text[:60]) for text in MATES[pair])
    for paper, mate in ((a, b), (b, a)):
        hits = mates.similar(paper, limit=3)
        assert [h.paper.id for h in hits][0] == mate, [h.paper.abstract[:50] for h in hits]


@pytest.mark.slow
def test_more_like_this_never_returns_the_paper_and_keeps_the_limit(mates):
    n = mates.store.count_papers()
    for paper in mates.store.iter_papers():
        for limit in (0, 1, 3, n - 1, n + 5):
            ids = [h.paper.id for h in mates.similar(paper.id, limit=limit)]
            assert paper.id not in ids and len(ids) == len(set(ids)) == min(limit, n - 1)


@pytest.mark.slow
def test_resolve_words_to_best_paper(seed):
    paper, exact = seed.resolve("surprise in videos")
    assert (paper.id, exact) == (paper_with(seed.store, "Bayesian Surprise"), False)
    paper, exact = seed.resolve(paper.id.upper())
    assert exact


@pytest.mark.slow
@pytest.mark.parametrize("ref", ["nonexistent-thing-zzz", "quantum chromodynamics lattice", "🙂"])
def test_resolve_does_not_guess_from_noise(seed, ref):
    with pytest.raises(PaperNotFound):
        seed.resolve(ref)


# -- fast: HashingEmbedder ---------------------------------------------------------------
ABSTRACTS = [
    ("ICLR 2026", 2026, "We study graph neural networks for molecule property prediction and show "
     "that message passing with attention improves accuracy on chemistry benchmarks."),
    ("ICLR 2026", 2026, "Diffusion models for image generation are slow to sample; we distil a "
     "diffusion teacher into a one-step student that keeps image quality."),
    ("NeurIPS 2025", 2025, "We propose a new optimizer for training large language models that adapts "
     "the learning rate per layer and trains faster than Adam on language benchmarks."),
    ("NeurIPS 2025", 2025, "Graph transformers for molecule generation: we generate molecules atom by "
     "atom with a graph transformer and report validity on chemistry datasets."),
    ("ICML 2025", 2025, "Reinforcement learning from human feedback for language models, with a reward "
     "model trained on preference pairs and a policy optimized by PPO."),
]


def _records(rows, start=0):
    return [Record(abstract=a, venue=v, year=y, source="test", line=start + i + 1)
            for i, (v, y, a) in enumerate(rows)]


@pytest.fixture
def small(store):
    embedder = HashingEmbedder()
    ingest_records(store, _records(ABSTRACTS), embedder, now=time.time())
    return Searcher(store, embedder)


def test_empty_query_raises(small):
    for q in ("", "   ", "\t\n", None):
        with pytest.raises(EmptyQuery):
            small.search(q)


def test_collection_filter(small):
    hits = small.search("molecule graph chemistry", limit=10, collection="NeurIPS 2025")
    assert hits and {h.paper.collection for h in hits} == {"NeurIPS 2025"}
    hits = small.search("molecule graph chemistry", limit=10, collection="iclr")
    assert hits and {h.paper.collection for h in hits} == {"ICLR 2026"}
    assert small.search("molecule", collection="CVPR") == []


def test_year_filter(small):
    hits = small.search("language models", limit=10, year=2025)
    assert hits and {h.paper.year for h in hits} == {2025}
    assert small.search("language models", year=1999) == []


def test_limit_and_no_duplicates(small):
    hits = small.search("models", limit=50)
    ids = [h.paper.id for h in hits]
    assert len(ids) == len(set(ids)) == len(ABSTRACTS)
    assert len(small.search("models", limit=2)) == 2
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)


def test_exact_id_goes_first(small):
    target = small.store.list_papers()[4]
    hits = small.search(target.id, limit=3)
    assert hits[0].paper.id == target.id and hits[0].exact and hits[0].why == "id match"


def test_new_papers_are_found_after_ingest(small):
    assert small.search("quantum annealing", limit=1)[0].paper.abstract.find("quantum") < 0
    n = len(small.index())
    ingest_records(small.store, _records([("QIP 2026", 2026, "Quantum annealing hardware solves "
                                           "combinatorial optimisation; we benchmark annealing schedules "
                                           "on spin glass instances.")], start=10), small.embedder, now=time.time())
    assert len(small.index()) == n + 1
    hit = small.search("quantum annealing", limit=1)[0]
    assert "Quantum annealing" in hit.paper.abstract
    assert hit.bm25_rank == 1 and hit.dense_rank == 1


def test_similar_excludes_itself_and_unknown_raises(small):
    pid = paper_with(small.store, "message passing with attention")
    hits = small.similar(pid, limit=10)
    assert pid not in [h.paper.id for h in hits] and len(hits) == len(ABSTRACTS) - 1
    assert hits[0].paper.id == paper_with(small.store, "graph transformer")
    with pytest.raises(PaperNotFound):
        small.similar("nosuchid")


def test_similar_limit_on_every_backend(small):
    n = len(ABSTRACTS)
    for paper in small.store.iter_papers():
        for limit in (0, 1, 2, n - 1, n + 3):
            ids = [h.paper.id for h in small.similar(paper.id, limit=limit)]
            assert paper.id not in ids and len(ids) == len(set(ids)) == min(limit, n - 1)


def test_resolve_on_empty_store_raises(store):
    searcher = Searcher(store, HashingEmbedder())
    with pytest.raises(PaperNotFound):
        searcher.resolve("anything at all")
    assert searcher.search("anything") == []


def test_hit_json_shape(small):
    d = small.search("diffusion image", limit=1)[0].to_dict()
    assert {"id", "name", "headline", "score", "why"} <= d.keys()
    assert "diffusion" in d["why"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=60) | st.lists(st.sampled_from(
    ['"', "AND", "OR", "NOT", "NEAR(", ")", "*", "^", ":", "-", "(", "{", "}", "col:", "+", "'",
     "graph", "x", "\x00", "🙂", "NEAR/2"]), max_size=8).map(" ".join))
def test_any_text_gets_hits_or_is_asked_for_words(small, text):
    for terms in (safe_terms(text), text.split(), [text]):
        small.store.lexical_search(terms, limit=10)  # the backend quotes whatever it is given
        match_expression(terms)
    # Text with a letter, a digit or an emoji is searched (a list, maybe empty); text with none
    # ('', '"', '^', '()') is EmptyQuery, which the bot answers with "Type some words". Nothing else.
    if any(unicodedata.category(ch)[0] in "LN" or unicodedata.category(ch) == "So" for ch in text):
        assert isinstance(small.search(text), list)
    else:
        with pytest.raises(EmptyQuery):
            small.search(text)


def test_a_common_phrase_waits_its_turn_for_the_posting_budget(store):
    # 'state-of-the-art' in every paper used to be searched first, whatever it cost; it now
    # counts as its rarest word does, so a rare word goes first and the common phrase is
    # dropped once the budget is spent. A rare name ('G-NLL') still comes first.
    embedder = HashingEmbedder()
    topics = ["protein folding", "speech recognition", "image segmentation", "code generation",
              "weather forecasting", "machine translation", "robot grasping", "music generation"]
    texts = [f"A state-of-the-art method for {t}, trained with a new loss on {t} benchmarks." for t in topics]
    texts.append("G-NLL: state-of-the-art uncertainty for zebrafish tracking from one greedy decode.")
    ingest_records(store, _records([("ICLR 2026", 2026, t) for t in texts]), embedder, now=time.time())
    searcher = Searcher(store, embedder, posting_budget=4)
    assert searcher.query_phrases("state-of-the-art zebrafish") == ["zebrafish"]
    assert searcher.query_phrases("G-NLL state-of-the-art")[0] == "g nll"
    # No paper holds 'platypus'; the phrase alone is past the budget: left to the embedding.
    assert searcher.query_phrases("state-of-the-art platypus-like") == []
    assert searcher.search("state-of-the-art platypus-like", limit=3)  # found by meaning still
    assert Searcher(store, embedder, posting_budget=9).query_phrases("state-of-the-art platypus-like") == \
        ["state of the art"]
    assert searcher.search("state-of-the-art zebrafish", limit=1)[0].paper.short_name == "G-NLL"
