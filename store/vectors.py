"""The searcher's in-memory vector index: refreshed in place from the store's change counter.

Every write to papers or vectors bumps the store's `papers_version` and stamps the rows it
touched with it (migration m009), so a process that loaded version V asks only for the rows
changed after V (`Store.vector_changes(since=V)`): another replica's ingest costs this one the
new rows, not a reload of every vector.

Up to `exact_limit` vectors (200k by default) a query is one float32 matrix-vector product:
exact, and fast enough there. Beyond it the vectors move into an HNSW graph (usearch) that
holds them as int8 (0.38 GB at a million 384-d vectors instead of 1.54 as float32; float16
is a setting) and whose top candidates are re-ranked by the store's exact vectors: recall@10
>= 0.98 against exact search (tests/test_vectors.py, bench/scale.py). Filtered searches
(a collection, a year) over-fetch from the graph and fall back to an exact scan of the
matching rows when the filter is narrow. The graph can be saved beside its version
(`save`/`load`), so a restarted replica loads it and applies the changes since, instead of
building it again (minutes at a million vectors on two cores).
"""
from __future__ import annotations

import functools
import json
import logging
import math
import os
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np

from .errors import StoreError

log = logging.getLogger(__name__)

EXACT_LIMIT = 200_000  # vectors; more go into the approximate index
# The saved graph is written again once this many vectors changed since it was saved (or this
# share of them, past a million): a restart then replays seconds of changes, not a month's.
RESAVE_AFTER = 20_000
RESAVE_SHARE = 0.02
# HNSW settings. On perturbed MiniLM vectors (tests/test_vectors.py) connectivity 16 / expansion
# 128 gave recall@10 0.99 unfiltered but 0.97 for a filter matching 1/8 of the papers (its deeper
# ranks are worse: recall@330 0.96); 32 / 200 gave 1.00 for both, for ~128 more bytes a vector.
# Search expansion is raised to k when k is larger.
CONNECTIVITY = 32
EXPANSION_ADD = 200
# How the graph holds its vectors: "i8" (1 byte a dimension) or "f16" (2); its hits are re-ranked
# by the store's exact float32 vectors either way (DenseIndex.rescore). bench/scale.py at a
# million (SQLite, 200 real TLDR queries): i8 recall@10 0.991, RSS 1.26-1.30 GB; f16 0.995,
# 1.62-1.67 GB (over the 1.5 GB a replica may take); without re-ranking f16 gave 0.966.
GRAPH_DTYPES = ("i8", "f16")
GRAPH_DTYPE = "i8"
EXPANSION_SEARCH = 128
# A filter matching at most this many rows is scanned exactly (cheaper than over-fetching).
EXACT_SUBSET = 20_000
RESCORE_FETCH = 4  # graph candidates per wanted hit, re-ranked by exact vectors (refresh sets it up)
MAX_FETCH = 4_096  # the most candidates asked of the graph for a filtered query
_GROW = 1.25


def usearch_index():
    """usearch's Index class, with onnxruntime (when installed) imported first: imported after
    usearch's extension in one process, onnxruntime 1.32 segfaults (a bot whose ONNX export
    finishes after its graph loaded would die)."""
    try:
        from .embed_onnx import import_onnxruntime

        import_onnxruntime()
    except ImportError:
        pass
    from usearch.index import Index

    return Index


class _ReadWriteLock:
    """Many readers at once, or one writer: searches run side by side, a refresh alone (its
    arrays may be reallocated and the graph resized under it). A waiting writer goes first:
    back-to-back searches never keep a refresh out. Not re-entrant for readers."""

    def __init__(self):
        self._cond = threading.Condition(threading.Lock())
        self._readers = 0
        self._writers = 0  # waiting or writing

    @contextmanager
    def read(self):
        with self._cond:
            self._cond.wait_for(lambda: not self._writers)
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                if not self._readers:
                    self._cond.notify_all()

    @contextmanager
    def write(self):
        with self._cond:
            self._writers += 1
            self._cond.wait_for(lambda: not self._readers)
            try:
                yield
            finally:
                self._writers -= 1
                self._cond.notify_all()


def _reading(fn):
    def call(self, *args, **kwargs):
        with self._rw.read():
            return fn(self, *args, **kwargs)
    call.__doc__, call.__name__ = fn.__doc__, fn.__name__
    return call


class DenseIndex:
    """Vectors and facets (collection, year, short name) of every paper, updated in place.

    Rows are never removed: a paper whose text changed and has no current vector yet stays
    as an invalid row (skipped by search, `vector()` None) until its new vector arrives.
    Safe to share across threads: searches read side by side, `apply` writes alone.
    """

    def __init__(self, *, exact_limit: int = EXACT_LIMIT, dtype: str = GRAPH_DTYPE,
                 connectivity: int = CONNECTIVITY, expansion_add: int = EXPANSION_ADD,
                 expansion_search: int = EXPANSION_SEARCH, threads: int = 0,
                 exact_subset: int = EXACT_SUBSET):
        self.exact_limit = exact_limit
        self.exact_subset = exact_subset
        self.ann_dtype = dtype
        self.connectivity = connectivity
        self.expansion_add = expansion_add
        self.expansion_search = expansion_search
        self.threads = threads
        self._rw = _ReadWriteLock()
        self._pids: list[str] = []  # row -> paper id (every paper, with or without a vector)
        self.row: dict[str, int] = {}
        self.dim = 0
        self._size = 0
        self._count = 0  # rows with a vector
        self._valid = np.zeros(0, dtype=bool)
        self._coll = np.zeros(0, dtype=np.int32)
        self._years = np.zeros(0, dtype=np.int32)
        self._updated = np.zeros(0, dtype=np.float64)
        self._matrix: np.ndarray | None = None  # (capacity, dim) float32 in exact mode
        self._ann = None  # usearch.index.Index in approximate mode
        self.collection_names: list[str] = []
        self._code: dict[str, int] = {}
        self.names: dict[str, str] = {}  # lower-cased short name -> paper id, latest update wins
        self._name_of: dict[str, str] = {}  # paper id -> its lower-cased short name
        self.rows_loaded = 0  # rows read from the store, for tests and figures
        self.restored_from: int | None = None  # the saved graph's version, when loaded from one
        # ids -> their exact float32 vectors (the store's): set by refresh(), the graph's top
        # RESCORE_FETCH * k are re-ranked by them: the scores and order of what the graph finds are
        # exact (what it misses, recall says: int8 0.991 against float16 0.995 at a million).
        self.rescore: Callable[[Sequence[str]], dict[str, np.ndarray]] | None = None
        self.unsaved = 0  # vectors added, changed or dropped since the graph was last saved (or loaded)
        self.saving: threading.Thread | None = None  # a re-save in the background (maybe_resave)
        self._picks_cache: tuple | None = None
        self._derived: dict = {}  # what derived() computed from the current vectors

    # -- size ------------------------------------------------------------------
    def __len__(self) -> int:
        return self._count

    @property
    def approximate(self) -> bool:
        return self._ann is not None

    @property
    def nbytes(self) -> int:
        """Bytes of the vectors (and the graph) in memory."""
        if self._ann is not None:
            return int(self._ann.memory_usage)
        return 0 if self._matrix is None else int(self._matrix[: self._size].nbytes)

    # -- loading -----------------------------------------------------------------
    def apply(self, rows: Sequence[tuple], *, expected: int = 0) -> None:
        """Add or update rows of Store.vector_changes: (id, collection, year, name, updated_at, vector).

        A vector b"" (vectors=False) leaves the row's vector as it is; None removes it.
        `expected` is how many vectors the caller expects in all, so a large first load goes
        straight into the approximate index."""
        if not rows:
            return
        with self._rw.write():
            self._apply(rows, expected)

    def _apply(self, rows: Sequence[tuple], expected: int) -> None:
        self.rows_loaded += len(rows)
        self._picks_cache = None
        self._derived = {}
        self._reserve(self._size + len(rows))
        new_rows, new_vecs, dropped = [], [], []
        for pid, collection, year, name, updated, blob in rows:
            i = self.row.get(pid)
            if i is None:
                i = self._size
                self._size += 1
                self._pids.append(pid)
                self.row[pid] = i
            self._coll[i] = self._collection_code(collection)
            self._years[i] = year or 0
            self._updated[i] = updated or 0.0
            self._set_name(pid, name, updated or 0.0)
            if blob is None:
                if self._valid[i]:
                    dropped.append(i)
                self._valid[i] = False
            elif blob:
                new_rows.append(i)
                new_vecs.append(blob)
        self._count -= len(dropped)
        self.unsaved += len(dropped) + len(new_vecs)
        if dropped and self._ann is not None:
            self._ann.remove(np.asarray(dropped, dtype=np.uint64))
        if new_vecs:
            vecs = np.frombuffer(b"".join(new_vecs), dtype=np.float32).reshape(len(new_vecs), -1)
            rows_at = np.asarray(new_rows, dtype=np.int64)
            if len(np.unique(rows_at)) < len(rows_at):  # the same paper twice in one batch: the last wins
                _, last = np.unique(rows_at[::-1], return_index=True)
                keep = np.sort(len(rows_at) - 1 - last)
                rows_at, vecs = rows_at[keep], vecs[keep]
            self._put(rows_at, vecs, expected)

    def _put(self, rows: np.ndarray, vecs: np.ndarray, expected: int) -> None:
        if not self.dim:
            self.dim = vecs.shape[1]
            if max(expected, len(rows)) > self.exact_limit:
                self._ann = self._new_ann()
            else:
                self._matrix = np.zeros((len(self._valid), self.dim), dtype=np.float32)
        elif vecs.shape[1] != self.dim:
            raise ValueError(f"vectors of dimension {vecs.shape[1]} in an index of {self.dim}")
        if self._ann is not None:
            keys = rows.astype(np.uint64)
            known = keys[self._valid[rows]]
            if len(known):
                self._ann.remove(known)
            self._ann.add(keys, vecs, threads=self.threads)
        else:
            self._matrix[rows] = vecs
        self._count += int((~self._valid[rows]).sum())
        self._valid[rows] = True
        if self._ann is None and len(self) > self.exact_limit:
            self._to_approximate()

    def _new_ann(self):
        Index = usearch_index()
        return Index(ndim=self.dim, metric="ip", dtype=self.ann_dtype, connectivity=self.connectivity,
                     expansion_add=self.expansion_add, expansion_search=self.expansion_search)

    def _to_approximate(self) -> None:
        """Past exact_limit: the float32 matrix goes into the graph (as ann_dtype) and is freed."""
        self._ann = self._new_ann()
        rows = np.flatnonzero(self._valid[: self._size])
        for start in range(0, len(rows), 50_000):
            chunk = rows[start : start + 50_000]
            self._ann.add(chunk.astype(np.uint64), self._matrix[chunk], threads=self.threads)
        self._matrix = None

    def _reserve(self, n: int) -> None:
        if n <= len(self._valid):
            return
        cap = max(n, int(len(self._valid) * _GROW) + 1024)
        for name in ("_valid", "_coll", "_years", "_updated"):
            old = getattr(self, name)
            new = np.zeros(cap, dtype=old.dtype)
            new[: len(old)] = old
            setattr(self, name, new)
        if self._matrix is not None:
            new = np.zeros((cap, self.dim), dtype=np.float32)
            new[: len(self._matrix)] = self._matrix
            self._matrix = new

    def _collection_code(self, collection: str | None) -> int:
        name = (collection or "").lower()
        code = self._code.get(name)
        if code is None:
            code = self._code[name] = len(self.collection_names)
            self.collection_names.append(name)
        return code

    def _set_name(self, pid: str, name: str | None, updated: float) -> None:
        key = (name or "").strip().lower()
        old = self._name_of.get(pid)
        if old == key:
            holder = self.names.get(key)
            if holder is not None and holder != pid and self._newer(holder, pid):
                return
            if key:
                self.names[key] = pid
            return
        if old:
            del self._name_of[pid]
            if self.names.get(old) == pid:  # the next most recent paper of that name takes it
                del self.names[old]
                others = [p for p, n in self._name_of.items() if n == old]
                if others:
                    self.names[old] = max(others, key=self._order)
        if key:
            self._name_of[pid] = key
            holder = self.names.get(key)
            if holder is None or not self._newer(holder, pid):
                self.names[key] = pid

    def _order(self, pid: str) -> tuple[float, int]:
        i = self.row[pid]
        return float(self._updated[i]), i

    def _newer(self, a: str, b: str) -> bool:
        """True when paper a was updated after paper b (the row order breaks ties)."""
        return self._order(a) > self._order(b)

    # -- reading -------------------------------------------------------------------
    @_reading
    def vector(self, paper_id: str) -> np.ndarray | None:
        i = self.row.get(paper_id)
        if i is None or not self._valid[i]:
            return None
        if self._ann is not None:
            return np.asarray(self._ann.get(i), dtype=np.float32)
        return self._matrix[i]

    @_reading
    def vectors(self, rows: np.ndarray) -> np.ndarray:
        """float32 vectors of these (valid) rows."""
        return self._vectors(rows)

    def _vectors(self, rows: np.ndarray) -> np.ndarray:
        if self._ann is not None:
            if not len(rows):
                return np.zeros((0, self.dim), dtype=np.float32)
            got = self._ann.get(np.asarray(rows, dtype=np.uint64), dtype=np.float32)
            return np.stack(got) if isinstance(got, tuple) else np.asarray(got)
        return self._matrix[rows]

    @property
    def matrix(self) -> np.ndarray:
        """(ids, matrix) of the papers with a vector, for picks; exact mode only."""
        return self._picks()[1]

    @property
    def ids(self) -> list[str]:
        """Ids of the papers with a vector, in `matrix` order."""
        return self._picks()[0]

    def derived(self, key, make: Callable[[], object], of: Sequence[str] | None = None):
        """`make()`, kept under `key` until any paper or vector changes (what a pick derives from the whole
        library: how typical each paper is, an interest's BM25). Two threads may both make it once; either is right.

        of: the `ids` that `make` reads the library's vectors by (from `ids` or the store). When they are
        no longer the index's (a paper arrived between reading them and this call), what `make` builds is
        used once and not kept: kept, it would be the wrong size for every pick of the new library."""
        kept = self._derived  # a change of the vectors replaces it with a new, empty one
        if of is not None and not self._current(of):
            return make()
        if key not in kept:
            value = make()
            if kept is self._derived:
                kept[key] = value
            return value
        return kept[key]

    def _current(self, ids: Sequence[str]) -> bool:
        """Whether `ids` are the papers with a vector now: `ids` itself (exact mode), or as many (the
        approximate index keeps no list of its own; the store's, read apart, has no identity to check)."""
        picks = self._picks_cache
        if self._ann is not None:
            return len(ids) == self._count
        return picks is not None and picks[0] is ids

    @_reading
    def _picks(self):
        if self._ann is not None:
            raise AttributeError("the approximate index keeps no float32 matrix")
        if self._picks_cache is None:
            if self._matrix is None:
                self._picks_cache = ([], np.zeros((0, 0), dtype=np.float32))
            else:
                rows = np.flatnonzero(self._valid[: self._size])
                ids = [self._pids[i] for i in rows]
                mat = self._matrix[: self._size] if len(rows) == self._size else self._matrix[rows]
                self._picks_cache = (ids, mat)
        return self._picks_cache

    def _mask(self, collection: str | None, year: int | None) -> np.ndarray | None:
        mask = None
        if collection:
            c = collection.lower()
            wanted = [k for k, x in enumerate(self.collection_names) if x == c or x.startswith(c + " ")]
            mask = np.isin(self._coll[: self._size], wanted)
        if year:
            m = self._years[: self._size] == int(year)
            mask = m if mask is None else mask & m
        return mask

    @_reading
    def search(self, query: np.ndarray, k: int, *, collection: str | None = None,
               year: int | None = None, exclude: str | None = None) -> list[tuple[str, float]]:
        """(paper id, cosine) of the k nearest papers, best first."""
        if not self._size or k <= 0 or not self.dim:
            return []
        query = np.asarray(query, dtype=np.float32)
        mask = self._mask(collection, year)
        skip = self.row.get(exclude) if exclude is not None else None
        if self._ann is None:
            scores = self._matrix[: self._size] @ query
            keep = self._valid[: self._size] if mask is None else self._valid[: self._size] & mask
            scores = np.where(keep, scores, -np.inf)
            if skip is not None:
                scores[skip] = -np.inf
            return self._top(np.arange(self._size), scores, k)
        if mask is None:
            return self._ann_search(query, k, skip, None)
        mask &= self._valid[: self._size]
        if skip is not None:
            mask[skip] = False
        matching = int(mask.sum())
        if matching <= max(self.exact_subset, k):
            return self._exact_subset(query, np.flatnonzero(mask), k)
        fetch = math.ceil(k * len(self) / matching * 4) + k  # 2x fell short of 0.98 at 1/8 of rows
        if fetch <= MAX_FETCH:
            hits = self._ann_search(query, k, skip, mask, fetch=fetch)
            if len(hits) >= min(k, matching):
                return hits
        return self._exact_subset(query, np.flatnonzero(mask), k)

    def _ann_search(self, query, k: int, skip: int | None, mask: np.ndarray | None, *,
                    fetch: int | None = None) -> list[tuple[str, float]]:
        fetch = fetch or (k + (skip is not None))
        keep = k
        if self.rescore is not None:  # more candidates from the graph, ranked by their exact vectors
            fetch, keep = max(fetch, RESCORE_FETCH * k), RESCORE_FETCH * k
        fetch = min(fetch, len(self))
        ann = self._ann
        if ann.expansion_search < fetch:
            ann.expansion_search = fetch  # an HNSW beam narrower than k cannot return k good hits
        found = ann.search(query, fetch, threads=1)
        out = []
        for key, dist in zip(found.keys, found.distances):
            i = int(key)
            if i == skip or (mask is not None and not mask[i]):
                continue
            out.append((self._pids[i], float(1.0 - dist)))
            if len(out) == keep:
                break
        if self.rescore is None or not out:
            return out
        try:
            exact = self.rescore([pid for pid, _ in out])
        except StoreError as e:  # the database is away: the graph's own (quantised) scores
            log.warning("dense hits not rescored (%s): the graph's scores stand", e)
            return out[:k]
        rescored = [(pid, float(np.dot(exact[pid], query))) for pid, _ in out if pid in exact]
        rescored.sort(key=lambda hit: -hit[1])
        return rescored[:k]

    def _exact_subset(self, query, rows: np.ndarray, k: int) -> list[tuple[str, float]]:
        scores = np.empty(len(rows), dtype=np.float32)
        for start in range(0, len(rows), 50_000):
            chunk = rows[start : start + 50_000]
            scores[start : start + len(chunk)] = self._vectors(chunk) @ query
        return self._top(rows, scores, k)

    def _top(self, rows: np.ndarray, scores: np.ndarray, k: int) -> list[tuple[str, float]]:
        if not len(scores):
            return []
        k = min(k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(self._pids[int(rows[i])], float(scores[i])) for i in top if np.isfinite(scores[i])]

    # -- a saved graph, so a restart does not rebuild it ------------------------------------
    def drop_unseen(self, seen: set[str]) -> int:
        """Forget the vectors of rows whose paper is not in `seen` (a saved graph of papers the
        store no longer holds); how many were dropped."""
        with self._rw.write():
            return self._drop_unseen(seen)

    def _drop_unseen(self, seen: set[str]) -> int:
        gone = [i for i, pid in enumerate(self._pids) if self._valid[i] and pid not in seen]
        if gone:
            self._picks_cache = None
            self._derived = {}
            self._valid[gone] = False
            self._count -= len(gone)
            if self._ann is not None:
                self._ann.remove(np.asarray(gone, dtype=np.uint64))
        return len(gone)

    def save(self, path: str | Path, *, version: int, model: str, store: str = "") -> bool:
        """Write the approximate index and its row ids (atomically); False in exact mode."""
        if self._ann is None:
            return False
        with self._rw.read():
            unsaved = self.unsaved
            saved = self._save(Path(path), version, model, store)
            self.unsaved -= unsaved  # what came in while writing counts towards the next save
            return saved

    def maybe_resave(self, path: str | Path, *, version: int, model: str, store: str = "",
                     after: int | None = None) -> bool:
        """Save the graph again, on a thread of its own, once `after` vectors changed since the
        last save (default: RESAVE_AFTER, or RESAVE_SHARE of them); True when a save started."""
        after = after if after is not None else max(RESAVE_AFTER, int(RESAVE_SHARE * self._count))
        if self._ann is None or self.unsaved < after or (self.saving is not None and self.saving.is_alive()):
            return False
        self.saving = threading.Thread(target=self._resave, args=(path, version, model, store),
                                       name="index-save", daemon=True)
        self.saving.start()
        return True

    def _resave(self, path, version: int, model: str, store: str) -> None:
        try:
            self.save(path, version=version, model=model, store=store)
        except OSError as e:  # a full or read-only disk: the next restart replays more, that is all
            log.warning("could not save the vector graph to %s: %s", path, e)

    def _save(self, path: Path, version: int, model: str, store: str) -> bool:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
        self._ann.save(str(tmp))
        rows = np.flatnonzero(self._valid[: self._size])
        meta = {"version": version, "model": model, "store": store, "dim": self.dim, "dtype": self.ann_dtype,
                "ids": self._pids,
                "valid": rows.tolist()}
        side = path.with_name(path.name + ".json")
        side_tmp = side.with_name(side.name + f".{os.getpid()}.tmp")
        side_tmp.write_text(json.dumps(meta))
        os.replace(tmp, path)  # the graph first: a sidecar never names a graph it does not match
        os.replace(side_tmp, side)
        return True

    @classmethod
    def load(cls, path: str | Path, *, model: str, max_version: int, store: str = "",
             **kwargs) -> tuple[DenseIndex, int] | None:
        """(index, version) from save(); None when there is none, or it is of another model or
        store, or of a later version than the store (a restored backup): then the caller builds anew."""
        Index = usearch_index()
        path = Path(path)
        side = path.with_name(path.name + ".json")
        try:
            meta = json.loads(side.read_text())
            if meta["model"] != model or meta.get("store", "") != store or meta["version"] > max_version:
                return None
            if meta.get("dtype", "f16") != kwargs.get("dtype", GRAPH_DTYPE):  # another setting: build anew
                return None
            ann = Index.restore(str(path))
        except (OSError, ValueError, KeyError, RuntimeError):
            return None
        if ann is None or len(ann) != len(meta["valid"]):
            return None
        index = cls(**kwargs)
        index.dim = int(meta["dim"])
        index._ann = ann
        ann.expansion_search = index.expansion_search
        index._pids = list(meta["ids"])
        index.row = {pid: i for i, pid in enumerate(index._pids)}
        index._size = len(index._pids)
        index._reserve(index._size)
        index._valid[np.asarray(meta["valid"], dtype=np.int64)] = True
        index._count = len(meta["valid"])
        index.restored_from = int(meta["version"])
        return index, int(meta["version"])


def refresh(index: DenseIndex | None, store, model: str, since: int | None, *,
            cache: str | Path | None = None, resave_after: int | None = None,
            version: int | None = None, **kwargs) -> tuple[DenseIndex, int]:
    """The index brought up to the store's current papers_version; (index, that version).

    `version` is that papers_version when the caller has just read it (one round trip saved).

    With no index yet: from the saved graph at `cache` when there is one (then only facets
    and the vectors changed since it was saved are read), else every row. The graph at
    `cache` is saved again in the background once `resave_after` vectors changed since."""
    if version is None:
        version = store.papers_version()  # first: every change up to it is in what follows
    if index is not None and since == version:
        return index, version
    index, version = _refresh(index, store, model, since, version, cache, resave_after, kwargs)
    index.rescore = functools.partial(store.vectors_of, model)
    return index, version


def _refresh(index, store, model: str, since, version: int, cache, resave_after, kwargs):
    if index is None:
        loaded = DenseIndex.load(cache, model=model, max_version=version, store=store.path,
                                 **kwargs) if cache else None
        if loaded is not None:
            index, saved = loaded
            seen: set[str] = set()
            for batch in store.vector_changes(model, vectors=False):  # facets and names
                index.apply(batch)
                seen.update(r[0] for r in batch)
            index.drop_unseen(seen)
            for batch in store.vector_changes(model, since=saved):
                index.apply(batch)
            index.maybe_resave(cache, version=version, model=model, store=store.path, after=resave_after)
            return index, version
        index = DenseIndex(**kwargs)
        expected = store.count_papers()
        for batch in store.vector_changes(model):
            index.apply(batch, expected=expected)
        if cache:
            index.save(cache, version=version, model=model, store=store.path)
        return index, version
    for batch in store.vector_changes(model, since=since):
        index.apply(batch)
    if cache:
        index.maybe_resave(cache, version=version, model=model, store=store.path, after=resave_after)
    return index, version


def recall_at(exact: Iterable[Sequence[str]], approx: Iterable[Sequence[str]], k: int = 10) -> float:
    """Mean share of the exact top k found in the approximate top k."""
    shares = [len(set(a[:k]) & set(e[:k])) / min(k, len(e)) if e else float(not a)
              for e, a in zip(exact, approx)]
    return float(np.mean(shares)) if shares else 1.0
