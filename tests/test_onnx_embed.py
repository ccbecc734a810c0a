"""Search queries through ONNX Runtime: the same vectors and the same results as sentence-transformers,
an export made once and reused, and the torch encoder whenever ONNX cannot be had."""
from __future__ import annotations

import logging
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import make_settings

pytest.importorskip("onnxruntime")

QUERIES = [
    "video surprise", "speculative decoding", "diffusion models for protein design",
    "How do large language models reason about arithmetic?", "a", "graph neural networks",
    "reinforcement learning from human feedback with reward models and preference data " * 12,
    "  leading and trailing spaces  ", "Ünïcödé tokens — and punctuation!?",
]


@pytest.fixture(scope="module")
def onnx_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("onnx")


@pytest.fixture(scope="module")
def onnx_embedder(real_embedder, onnx_dir):
    """The bot's embedder with queries through ONNX Runtime (the export runs here, once)."""
    from store.embed import OnnxQueryEmbedder, make_embedder

    embedder = make_embedder(query_encoder="onnx", onnx_dir=onnx_dir)
    assert isinstance(embedder, OnnxQueryEmbedder)
    embedder.documents = real_embedder  # the session's loaded model: documents are encoded as before
    embedder.load()  # as the bot's warm-up: no cached graph yet, so it is exported in the background
    assert embedder.wait_for_queries(timeout=900)
    assert embedder.query_backend == "onnx"
    assert len(list(onnx_dir.glob("*.onnx"))) == 1 and not list(onnx_dir.glob("*.tmp"))
    return embedder


def _seed_texts() -> list[str]:
    from store import open_store
    from store import bundled_sample_paths, ingest_paths

    store = open_store(":memory:")
    ingest_paths(store, bundled_sample_paths(), None, now=time.time())
    texts = [f"{p.headline}. {p.abstract}" for p in store.list_papers(limit=100)]
    store.close()
    assert len(texts) == 38
    return texts


@pytest.mark.slow
def test_onnx_vectors_match_sentence_transformers_on_the_seed_abstracts_and_queries(onnx_embedder, real_embedder):
    for texts in (_seed_texts(), QUERIES):
        got = onnx_embedder.encode_queries(texts)
        want = real_embedder.encode(texts)
        assert got.shape == want.shape == (len(texts), 384)
        assert got.dtype == np.float32
        assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
        cos = np.sum(got * want, axis=1)
        assert cos.min() >= 0.9999, (cos.min(), texts[int(cos.argmin())][:80])
    # one at a time, as the bot asks, too
    for q in QUERIES:
        assert float(onnx_embedder.encode_queries([q])[0] @ real_embedder.encode([q])[0]) >= 0.9999


@pytest.mark.slow
def test_papers_go_through_onnx_too_in_batches_and_come_back_in_their_order(onnx_embedder, real_embedder):
    texts = (_seed_texts() + QUERIES) * 2  # 92 texts of mixed lengths: three batches, sorted by length
    got, want = onnx_embedder.encode(texts), real_embedder.encode(texts)
    assert got.shape == want.shape == (len(texts), 384) and got.dtype == np.float32
    cos = np.sum(got * want, axis=1)
    assert cos.min() >= 0.9999, (cos.min(), texts[int(cos.argmin())][:80])
    assert onnx_embedder.name == real_embedder.name and onnx_embedder.dim == 384


@pytest.mark.slow
def test_with_the_graph_exported_a_start_never_imports_torch(onnx_embedder, onnx_dir):
    """A replica's start and memory are the ONNX session's: torch is not imported at all."""
    import subprocess
    import sys

    code = (
        "import sys, numpy as np\n"
        "from store.embed import make_embedder\n"
        f"e = make_embedder(query_encoder='onnx', onnx_dir={str(onnx_dir)!r})\n"
        "e.load()\n"
        "q = e.encode_queries(['video surprise']); d = e.encode(['a paper', 'another paper'])\n"
        "assert q.shape == (1, 384) and d.shape == (2, 384) and e.dim == 384\n"
        "print('torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         cwd=Path(__file__).resolve().parent.parent)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "False"


@pytest.mark.slow
def test_search_top_ten_is_the_same_with_either_query_encoder(seed_store, onnx_embedder, real_embedder):
    from store import Searcher

    torch_search = Searcher(seed_store, real_embedder)
    onnx_search = Searcher(seed_store, onnx_embedder)
    for q in QUERIES:
        want = [h.paper.id for h in torch_search.search(q, limit=10)]
        got = [h.paper.id for h in onnx_search.search(q, limit=10)]
        assert got == want, q
        assert len(want) == 10 or q == "a"


@pytest.mark.slow
def test_the_export_is_made_once_and_reused_by_the_next_start(onnx_embedder, onnx_dir, caplog):
    """A later process (a one-shot `paperclub search` here) opens the cached graph: no export, no torch."""
    from store.embed import make_embedder

    [exported] = list(onnx_dir.glob("*.onnx"))
    stat = exported.stat()
    again = make_embedder(query_encoder="onnx", onnx_dir=onnx_dir)
    with caplog.at_level(logging.INFO, logger="store.embed_onnx"):
        vec = again.encode_queries(["video surprise"])  # no torch model loaded for a query
    assert again.documents._model is None
    assert not [r for r in caplog.records if "exporting" in r.getMessage()]
    assert exported.stat().st_mtime_ns == stat.st_mtime_ns and list(onnx_dir.glob("*")) == [exported]
    assert float(vec[0] @ onnx_embedder.encode_queries(["video surprise"])[0]) >= 0.9999


@pytest.mark.slow
def test_a_cache_that_cannot_be_written_falls_back_to_torch_with_a_warning(tmp_path, real_embedder, caplog):
    from store.embed import make_embedder

    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache directory should be")
    embedder = make_embedder(query_encoder="onnx", onnx_dir=blocker / "onnx")
    embedder.documents = real_embedder
    with caplog.at_level(logging.WARNING, logger="store.embed"):
        embedder.load()
        assert embedder.wait_for_queries(timeout=600)  # the child loads torch before it finds the cache unwritable
        vec = embedder.encode_queries(["video surprise"])
        embedder.encode_queries(["speculative decoding"])
    assert embedder.query_backend == "torch"
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "queries use sentence-transformers" in warnings[0], warnings
    assert np.array_equal(vec, real_embedder.encode(["video surprise"]))


@pytest.mark.slow
def test_a_model_onnx_cannot_reproduce_falls_back_to_torch(tmp_path, real_embedder, caplog):
    """A model with CLS pooling (not mean) is not exported: the torch encoder answers queries."""
    import json

    from store.embed import OnnxQueryEmbedder
    from store.embed_onnx import OnnxQueryEncoder

    model = tmp_path / "cls-model"
    shutil.copytree(_bundled(), model)
    pooling = json.loads((model / "1_Pooling" / "config.json").read_text())
    pooling.update(pooling_mode_mean_tokens=False, pooling_mode_cls_token=True)
    (model / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    embedder = OnnxQueryEmbedder(real_embedder, OnnxQueryEncoder(str(model), tmp_path / "onnx"))
    with caplog.at_level(logging.WARNING, logger="store.embed"):
        embedder.prepare_queries(background=False)
        vec = embedder.encode_queries(["video surprise"])
    assert embedder.query_backend == "torch"
    assert np.array_equal(vec, real_embedder.encode(["video surprise"]))
    assert "unsupported pooling" in caplog.text
    assert not (tmp_path / "onnx").exists() or not list((tmp_path / "onnx").glob("*.onnx"))


def _bundled() -> str:
    from store.embed import resolve_model_path

    return resolve_model_path("all-MiniLM-L6-v2")


@pytest.mark.slow
def test_a_one_shot_query_without_a_cached_graph_exports_it_once_and_takes_the_fast_path(
        tmp_path, real_embedder, caplog):
    """A short session (a console closed at once, a one-shot `paperclub search`) used to answer
    on torch and leave the export undone, so every later command paid for torch again."""
    from store.embed import make_embedder

    embedder = make_embedder(query_encoder="onnx", onnx_dir=tmp_path / "onnx")
    embedder.documents = real_embedder
    with caplog.at_level(logging.INFO, logger="store.embed"):
        vec = embedder.encode_queries(["video surprise"])
    assert "preparing the fast query encoder, once" in caplog.text
    assert embedder.query_backend == "onnx"
    assert float(vec[0] @ real_embedder.encode(["video surprise"])[0]) > 0.9999
    assert len(list((tmp_path / "onnx").glob("*.onnx"))) == 1 and not list((tmp_path / "onnx").glob("*.tmp"))

    caplog.clear()
    again = make_embedder(query_encoder="onnx", onnx_dir=tmp_path / "onnx")  # the next command
    with caplog.at_level(logging.INFO, logger="store.embed"):
        again.encode_queries(["video surprise"])
    assert again.query_backend == "onnx" and "preparing" not in caplog.text


def test_the_torch_setting_uses_sentence_transformers_for_queries_and_exports_nothing(tmp_path):
    from bot.cli import Ctx
    from store.embed import SentenceTransformerEmbedder

    ctx = Ctx()
    ctx.settings = make_settings(query_encoder="torch", onnx_dir=str(tmp_path / "onnx"))
    assert type(ctx.embedder) is SentenceTransformerEmbedder
    assert not (tmp_path / "onnx").exists()


def test_the_onnx_setting_builds_the_onnx_query_embedder_lazily_in_its_cache_dir(tmp_path):
    from bot.cli import Ctx
    from store.embed import OnnxQueryEmbedder

    ctx = Ctx()
    ctx.settings = make_settings(onnx_dir=str(tmp_path / "onnx"))
    assert ctx.settings.query_encoder == "onnx"  # the default
    embedder = ctx.embedder
    assert isinstance(embedder, OnnxQueryEmbedder) and embedder.queries.cache_dir == tmp_path / "onnx"
    assert not (tmp_path / "onnx").exists()  # nothing is exported until a query needs it


def test_the_onnx_cache_defaults_to_the_xdg_cache_and_a_bad_encoder_name_is_refused(tmp_path):
    from pydantic import ValidationError

    assert make_settings(xdg_cache_home=str(tmp_path)).onnx_cache_dir == os.path.join(tmp_path, "paperclub", "onnx")
    assert make_settings(query_encoder=" ONNX ").query_encoder == "onnx"
    with pytest.raises(ValidationError, match="PAPERCLUB_QUERY_ENCODER must be one of onnx, torch"):
        make_settings(query_encoder="tensorrt")


def test_the_weightless_model_ignores_the_query_encoder(tmp_path):
    from store import HashingEmbedder
    from store.embed import make_embedder

    assert isinstance(make_embedder("hashing-64", query_encoder="onnx", onnx_dir=tmp_path), HashingEmbedder)


class _SplitFake:
    """Records which path each text took: documents (encode) or queries (encode_queries)."""

    name = "hashing-256"
    dim = 256

    def __init__(self):
        from store import HashingEmbedder

        self.inner = HashingEmbedder()
        self.documents: list[str] = []
        self.queries: list[str] = []

    def encode(self, texts, *, progress=False):
        self.documents += texts
        return self.inner.encode(texts)

    def encode_queries(self, texts):
        self.queries += texts
        return self.inner.encode(texts)


def test_the_bot_encodes_queries_on_the_query_path_and_papers_on_the_document_path(hashing_store):
    from bot.runner import BatchingEmbedder
    from store import Searcher

    fake = _SplitFake()
    searcher = Searcher(hashing_store, BatchingEmbedder(fake))
    hits = searcher.search("speculative decoding", limit=3)
    assert hits and fake.queries == ["speculative decoding"] and fake.documents == []
    searcher.embedder.encode(["A paper's headline. Its abstract."])
    assert fake.documents == ["A paper's headline. Its abstract."] and fake.queries == ["speculative decoding"]


@pytest.mark.slow
def test_the_onnx_session_opens_after_the_vector_graph_is_loaded(onnx_embedder, onnx_dir):
    """A bot past the exact threshold whose ONNX export finishes after its graph loaded: onnxruntime
    is imported after usearch there (imported the other way round it segfaulted the process)."""
    import subprocess
    import sys

    code = (
        "import numpy as np\n"
        "from store.vectors import DenseIndex\n"
        "idx = DenseIndex(exact_limit=10)\n"
        "v = np.random.default_rng(0).standard_normal((20, 384)).astype(np.float32)\n"
        "v /= np.linalg.norm(v, axis=1, keepdims=True)\n"
        "idx.apply([(f'p{i}', 'ICLR 2026', 2026, f'P{i}', 0.0, v[i].tobytes()) for i in range(20)])\n"
        "assert idx.approximate\n"
        "from store.embed import make_embedder\n"
        f"e = make_embedder(query_encoder='onnx', onnx_dir={str(onnx_dir)!r})\n"
        "e.load()\n"
        "q = e.encode_queries(['video surprise'])\n"
        "print(e.query_backend, idx.search(q[0], 3)[0][0][:1])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         cwd=Path(__file__).resolve().parent.parent)
    assert out.returncode == 0, (out.returncode, out.stderr[-2000:])
    assert out.stdout.split() == ["onnx", "p"]
