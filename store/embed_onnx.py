"""The query encoder through ONNX Runtime: the same model, tokenizer and pooling as
sentence-transformers, at a fraction of torch's per-call overhead for one short query
(12 ms -> 3.3 ms measured on this machine, cosine 1.0000 against sentence-transformers).

The ONNX graph is exported once from the model's own weights on disk (torch.onnx, offline)
into a cache directory and reused by every later start; the image builds it at build time.
Mean pooling and L2 normalisation are part of the graph, so one `run` gives the vectors.
Anything this cannot reproduce exactly (another pooling, no tokenizer.json) raises
`OnnxUnavailable` and the caller keeps the torch encoder.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Sequence

import numpy as np

log = logging.getLogger(__name__)

# Bump when the exported graph changes (inputs, pooling, opset): old cache files are then ignored.
EXPORT_VERSION = 1
OPSET = 17
# The exported graph must reproduce sentence-transformers on these before it is kept.
PROBES = ("video surprise", "a", "Diffusion models for protein structure generation. " * 40)
MIN_COSINE = 0.9999
EXPORT_TIMEOUT = 1800  # seconds for the child process (about 10 s of CPU; minutes on a loaded box)
STALE_TMP_SECONDS = 600  # an export takes seconds; a temp file this old is an abandoned one
_WEIGHTS = ("model.safetensors", "pytorch_model.bin")
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def offline_quiet() -> None:
    """Nothing may be fetched from a hub at run time, and loading prints no progress bars."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def import_onnxruntime():
    """onnxruntime, imported with its telemetry off.

    Its telemetry tries to persist a device id under $HOME at import and, on a read-only home
    (the image), writes a warning straight to stderr, past the bot's JSON logging: off before
    the import (an operator's own setting wins). store.vectors calls this before it imports
    usearch: onnxruntime 1.32 segfaults when it is imported after usearch's extension."""
    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
    import onnxruntime

    return onnxruntime


class OnnxUnavailable(Exception):
    """ONNX Runtime, the exporter or this model's layout is not there: use the torch encoder."""


class ExportStopped(OnnxUnavailable):
    """The process is exiting and ended the export child: nothing is wrong."""


def _read_json(path: Path) -> dict | list:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise OnnxUnavailable(f"cannot read {path.name}: {e}") from None


def model_layout(model_dir: Path) -> dict:
    """What the exported graph must reproduce: max length, lower-casing. Only Transformer ->
    mean Pooling (-> Normalize) is supported; anything else raises OnnxUnavailable."""
    if not (model_dir / "tokenizer.json").is_file():
        raise OnnxUnavailable(f"{model_dir} has no tokenizer.json")
    modules = _read_json(model_dir / "modules.json")
    kinds = [m.get("type", "").rsplit(".", 1)[-1] for m in modules]
    if kinds[:2] != ["Transformer", "Pooling"] or kinds[2:] not in ([], ["Normalize"]):
        raise OnnxUnavailable(f"unsupported module stack {kinds}")
    pooling = _read_json(model_dir / modules[1].get("path", "1_Pooling") / "config.json")
    modes = [k for k, v in pooling.items() if k.startswith("pooling_mode") and v]
    if modes != ["pooling_mode_mean_tokens"]:
        raise OnnxUnavailable(f"unsupported pooling {modes}")
    st = _read_json(model_dir / "sentence_bert_config.json") if (model_dir / "sentence_bert_config.json").is_file() else {}
    return {"max_seq_length": int(st.get("max_seq_length") or 256), "lower": bool(st.get("do_lower_case"))}


def fingerprint(model_dir: Path) -> str:
    """Changes when the weights, config or tokenizer change (or the export recipe does)."""
    h = hashlib.sha256(f"v{EXPORT_VERSION} opset{OPSET}".encode())
    names = [*_WEIGHTS, "config.json", "tokenizer.json", "modules.json", "sentence_bert_config.json"]
    for name in names:
        path = model_dir / name
        if path.is_file():
            h.update(name.encode())
            with path.open("rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
    return h.hexdigest()[:16]


def cache_path(model_dir: Path, cache_dir: Path) -> Path:
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", model_dir.name if model_dir.name != "model" else model_dir.parent.name)
    return Path(cache_dir) / f"{slug}-{fingerprint(model_dir)}.onnx"


def export_onnx(model_dir: Path, out: Path) -> None:
    """Export the model (transformer + mean pooling + normalisation) to `out` with torch.onnx,
    check it against sentence-transformers on PROBES, and only then move it into place."""
    offline_quiet()
    try:
        import onnx  # noqa: F401  torch.onnx needs it to write the file
        import torch
        from sentence_transformers import SentenceTransformer
    except ImportError as e:
        raise OnnxUnavailable(f"cannot export: {e}") from None
    st = SentenceTransformer(str(model_dir), device="cpu")
    transformer = st[0].auto_model.eval()

    class Pooled(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):
            hidden = self.model(input_ids=input_ids, attention_mask=attention_mask,
                                token_type_ids=token_type_ids).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            mean = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(mean, p=2, dim=1)

    ids = torch.ones((2, 8), dtype=torch.long)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        for stale in out.parent.glob(f"{out.stem}*.tmp"):  # left by a process killed mid-export
            if time.time() - stale.stat().st_mtime > STALE_TMP_SECONDS:
                stale.unlink(missing_ok=True)
        fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=out.stem, suffix=".tmp")
        os.close(fd)
        os.chmod(tmp, 0o644)  # an image built as root is read by the bot's own user
    except OSError as e:
        raise OnnxUnavailable(f"cannot write to {out.parent}: {e}") from None
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")  # the tracer's notes on shape-dependent branches
            torch.onnx.export(Pooled(transformer), (ids, torch.ones_like(ids), torch.zeros_like(ids)), tmp,
                              input_names=list(_INPUTS), output_names=["embedding"],
                              dynamic_axes={**{k: {0: "batch", 1: "seq"} for k in _INPUTS},
                                            "embedding": {0: "batch"}},
                              opset_version=OPSET, dynamo=False)
        probe = OnnxQueryEncoder(str(model_dir), out.parent, threads=1)._open(Path(tmp), 1)
        want = st.encode(list(PROBES), normalize_embeddings=True, convert_to_numpy=True)
        cos = float(np.min(np.sum(probe(PROBES) * want, axis=1)))
        if cos < MIN_COSINE:
            raise OnnxUnavailable(f"exported graph differs from sentence-transformers (cosine {cos:.4f})")
        os.replace(tmp, out)  # atomic: replicas starting together never read half a file
    except OnnxUnavailable:
        raise
    except Exception as e:  # the exporter's failures are many and version-specific
        raise OnnxUnavailable(f"export failed: {type(e).__name__}: {e}") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


class OnnxQueryEncoder:
    """A sentence-transformers model's vectors through ONNX Runtime, for short queries.

    `load()` exports the graph into `cache_dir` when it is not there yet (seconds, once)
    and opens the session; it raises OnnxUnavailable when that cannot be done.
    One intra-op thread, like torch's: concurrency comes from the work pool.
    """

    def __init__(self, model_dir: str, cache_dir: str | Path, *, threads: int = 1,
                 batch_threads: int | None = None):
        self.model_dir = Path(model_dir)
        self.cache_dir = Path(cache_dir)
        self.threads = threads
        self.batch_threads = batch_threads or min(4, os.cpu_count() or 1)
        self._run = None
        self._batch_run = None
        self._path: Path | None = None
        self._lock = threading.Lock()

    def path(self) -> Path:
        if self._path is None:  # hashing the weights takes a moment: once
            self._path = cache_path(self.model_dir, self.cache_dir)
        return self._path

    def is_cached(self) -> bool:
        """The exported graph is there (opening it is fast; making it takes seconds)."""
        return self.model_dir.is_dir() and self.path().is_file()

    def load(self, *, in_subprocess: bool = False):
        """Open the session, exporting the graph first when it is not cached.

        in_subprocess: export in a child process at low priority (the bot does, while it
        answers): tracing holds the GIL for seconds, and a process must not exit while torch
        runs in one of its threads."""
        with self._lock:
            if self._run is None:
                if not self.model_dir.is_dir():
                    raise OnnxUnavailable(f"{self.model_dir} is not a model directory on disk")
                model_layout(self.model_dir)
                path = self.path()
                if not path.is_file():
                    log.info("exporting %s to ONNX at %s (once)", self.model_dir, path)
                    if in_subprocess:
                        self._export_in_child(path)
                    else:
                        export_onnx(self.model_dir, path)
                self._run = self._open(path, self.threads)
                log.debug("query encoder: ONNX Runtime (%s)", path)
        return self._run

    def batch_runner(self):
        """A second session for batches (papers at ingest) with `batch_threads` intra-op threads,
        opened on first use: a lone query stays on its one-thread session."""
        run = self.load()
        if self.batch_threads <= self.threads:
            return run
        with self._lock:
            if self._batch_run is None:
                self._batch_run = self._open(self.path(), self.batch_threads)
        return self._batch_run

    def _export_in_child(self, path: Path) -> None:
        import atexit
        import subprocess
        import sys

        env = dict(os.environ)
        here = str(Path(__file__).resolve().parent.parent)  # where `store` is importable from
        env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
        child = subprocess.Popen([sys.executable, "-m", "store.embed_onnx", str(self.model_dir), str(path)],
                                 env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True)
        atexit.register(_stop_child, child)  # the bot stopping mid-export ends the export too
        try:
            _, err = child.communicate(timeout=EXPORT_TIMEOUT)
        except subprocess.TimeoutExpired:
            child.kill()
            child.communicate()
            raise OnnxUnavailable(f"export took longer than {EXPORT_TIMEOUT} s") from None
        finally:
            atexit.unregister(_stop_child)
        if getattr(child, "stopped_at_exit", False):
            raise ExportStopped("the export was stopped with the process")
        if child.returncode != 0:
            last = (err or "").strip().splitlines()[-1:] or [f"exit code {child.returncode}"]
            raise OnnxUnavailable(last[0])

    def _open(self, path: Path, threads: int):
        try:
            ort = import_onnxruntime()
            from tokenizers import Tokenizer
        except ImportError as e:
            raise OnnxUnavailable(f"cannot run ONNX: {e}") from None
        layout = model_layout(self.model_dir)
        tok = Tokenizer.from_file(str(self.model_dir / "tokenizer.json"))
        # tokenizer.json's own truncation (128) and fixed padding are not what sentence-transformers
        # uses: it truncates at max_seq_length and pads to the batch's longest text.
        tok.enable_truncation(layout["max_seq_length"])
        pad = tok.padding or {}
        tok.enable_padding(pad_id=pad.get("pad_id", 0), pad_token=pad.get("pad_token", "[PAD]"),
                           pad_type_id=pad.get("pad_type_id", 0))
        ort.set_default_logger_severity(3)  # its own logger writes straight to stderr too: errors only
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        # Idle worker threads must not spin between calls (torch's OpenMP spinning once turned a
        # 25 ms encode into a second on this 2-core box).
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        opts.log_severity_level = 3
        try:
            session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        except Exception as e:  # a truncated or foreign file: export again next start
            raise OnnxUnavailable(f"cannot open {path}: {e}") from None
        wanted = {i.name for i in session.get_inputs()}
        lower = layout["lower"]

        def run(texts: Sequence[str]) -> np.ndarray:
            texts = [str(t).strip() for t in texts]  # as sentence-transformers' tokenize does
            encs = tok.encode_batch([t.lower() for t in texts] if lower else texts)
            feed = {"input_ids": np.array([e.ids for e in encs], dtype=np.int64),
                    "attention_mask": np.array([e.attention_mask for e in encs], dtype=np.int64),
                    "token_type_ids": np.array([e.type_ids for e in encs], dtype=np.int64)}
            out = session.run(None, {k: v for k, v in feed.items() if k in wanted})[0]
            return np.asarray(out, dtype=np.float32)

        return run

    def encode(self, texts: Sequence[str], *, progress: bool = False) -> np.ndarray:
        run = self.load()
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return run(texts)

    def encode_batches(self, texts: Sequence[str], *, batch_size: int = 32,
                       progress: bool = False) -> np.ndarray:
        """Many texts, as sentence-transformers batches them: longest first, so each batch pads
        to texts of about its own length; rows come back in the given order."""
        run = self.batch_runner()
        order = sorted(range(len(texts)), key=lambda i: -len(str(texts[i])))
        out: list[np.ndarray] = [None] * len(texts)  # type: ignore[list-item]
        starts = range(0, len(order), batch_size)
        if progress:
            from tqdm.auto import tqdm

            starts = tqdm(starts, desc="Batches", unit="batch")
        for start in starts:
            rows = order[start : start + batch_size]
            for i, vec in zip(rows, run([texts[i] for i in rows])):
                out[i] = vec
        return np.stack(out).astype(np.float32, copy=False)


def _stop_child(child) -> None:
    if child.poll() is None:
        child.stopped_at_exit = True
        child.terminate()
        try:
            child.wait(10)
        except Exception:
            child.kill()


def _main(argv: list[str]) -> int:
    """`python -m store.embed_onnx MODEL_DIR OUT.onnx`: the export, run by OnnxQueryEncoder in a child."""
    import signal
    import sys

    try:
        os.nice(19)  # the bot's replies come first
    except (AttributeError, OSError):
        pass
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # unwinds, so the temp file is removed
    try:
        import torch

        torch.set_num_threads(1)
        export_onnx(Path(argv[0]), Path(argv[1]))
    except OnnxUnavailable as e:
        print(e, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(_main(sys.argv[1:]))
