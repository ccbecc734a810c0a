"""Meta counters, papers and their identity keys, vectors and the summaries cache: the SQL
both backends share (shared_sql.py says how it runs). Bulk upserts (write_papers, the
embeddings) stay in each backend.
"""
from __future__ import annotations

import json
from typing import Iterable, Iterator

import numpy as np

from ..paper import Paper
from .rows import paper_from_row, paper_signal
from .shared_sql import SQLTables, storable


def as_vector(blob) -> np.ndarray | None:
    """A stored float32 vector (bytes, or a driver's memoryview) as an array; None for none."""
    return np.frombuffer(bytes(blob), dtype=np.float32) if blob is not None else None


class MetaTables(SQLTables):
    """Key -> value settings and the version counters caches compare."""

    def get_meta(self, key: str, default: str | None = None) -> str | None:
        row = self._select_one("select value from meta where key = ?", [key])
        return row[0] if row else default

    def set_meta(self, key: str, value: str) -> None:
        with self.transaction() as db:
            self._run(db, "insert into meta(key, value) values (?, ?) "
                          "on conflict(key) do update set value = excluded.value", [key, value])

    def _bump(self, db, key: str) -> int:
        """The counter's next value, inside the caller's write transaction. On PostgreSQL its row
        stays locked until that transaction ends, so rows stamped with papers_version commit in
        the counter's order (see vector_changes)."""
        return int(self._run(db, "insert into meta(key, value) values (?, '1') on conflict(key) do update "
                                 "set value = cast(cast(meta.value as bigint) + 1 as text) returning value",
                             [key]).fetchone()[0])

    def papers_version(self) -> int:
        """Changes whenever papers or embeddings change; caches compare it."""
        return int(self.get_meta("papers_version", "0"))

    def schedules_version(self) -> int:
        """Changes whenever any schedule changes; a running scheduler compares it."""
        return int(self.get_meta("schedules_version", "0"))


class PaperTables(SQLTables):
    """Papers and the identity keys ingest matches them by."""

    _PAPER_COLUMNS = "*"  # what a paper read selects (PostgreSQL leaves out its search columns)
    _paper = staticmethod(paper_from_row)

    def count_papers(self) -> int:
        return self._select_one("select count(*) from papers")[0]

    def get_paper(self, paper_id: str) -> Paper | None:
        rows = self._select(f"select {self._PAPER_COLUMNS} from papers where id = ?", [paper_id]) \
            if storable([paper_id]) else []
        return self._paper(rows[0]) if rows else None

    def get_papers(self, ids: Iterable[str]) -> list[Paper]:
        """Papers in the order of ids (missing ones left out)."""
        ids = list(ids)
        found = {r["id"]: self._paper(r) for r in self._papers_in(ids)}
        return [found[i] for i in ids if i in found]

    def short_names(self, ids: Iterable[str]) -> dict[str, str]:
        """paper id -> its short name, for the ids that are papers: what an explanation names a paper
        by, without reading (and decoding) whole papers."""
        return {r["id"]: r["short_name"] for test, args in self._chunks(ids)
                for r in self._select(f"select id, short_name from papers where id{test}", args)}

    def _papers_in(self, ids: Iterable[str]) -> Iterator[dict]:
        for test, args in self._chunks(ids):
            yield from self._select(f"select {self._PAPER_COLUMNS} from papers where id{test}", args)

    def list_papers(self, *, limit: int | None = None, offset: int = 0,
                    collection: str | None = None) -> list[Paper]:
        sql, args = f"select {self._PAPER_COLUMNS} from papers", []
        if collection:
            sql += " where lower(collection) = lower(?)"
            args.append(collection)
        sql += f" order by created_at, {self._SEQ}"
        if limit is not None:
            sql += " limit ? offset ?"
            args += [limit, offset]
        return [self._paper(r) for r in self._select(sql, args)]

    def iter_papers(self, batch: int = 1000) -> Iterator[Paper]:
        last = -1
        while True:
            rows = self._select(f"select {self._SEQ} as seq_, {self._PAPER_COLUMNS} from papers "
                                f"where {self._SEQ} > ? order by {self._SEQ} limit ?", [last, batch])
            if not rows:
                return
            for r in rows:
                yield self._paper(r)
            last = rows[-1]["seq_"]

    def collections(self) -> list[tuple[str, int | None, int]]:
        """(collection, year, count) for every collection in the store."""
        return [tuple(r) for r in self._select_tuples(
            "select collection, year, count(*) from papers group by collection, year "
            "order by collection, year")]

    def paper_facets(self) -> list[tuple[str, str, int | None, str]]:
        """(id, collection, year, short name) of every paper, oldest update first.

        Search keeps these in memory: filters and exact-name lookups without a table scan.
        """
        return [tuple(r) for r in self._select_tuples(
            f"select id, coalesce(collection, ''), year, short_name from papers order by updated_at, {self._SEQ}")]

    def paper_signals(self) -> dict[str, float]:
        """Per-paper prior in [0, 1] for picks without feedback: has code (0.5), reports numbers (0.5)."""
        return {pid: paper_signal(code, nums)
                for pid, code, nums in self._select_tuples("select id, code_urls, numbers from papers")}

    def lookup_keys(self, keys: Iterable[str]) -> dict[str, list[str]]:
        """key -> paper ids holding it."""
        out: dict[str, list[str]] = {}
        for test, args in self._chunks(keys):
            for key, pid in self._select_tuples(f"select key, paper_id from paper_keys where key{test}", args):
                out.setdefault(key, []).append(pid)
        return out

    def paper_keys(self, ids: Iterable[str]) -> dict[str, list[str]]:
        """paper id -> its identity keys (ext:, src:, title: ...), for naming a paper's source ids."""
        ids = list(dict.fromkeys(ids))
        out: dict[str, list[str]] = {pid: [] for pid in ids}
        for test, args in self._chunks(ids):
            for key, pid in self._select_tuples(
                    f"select key, paper_id from paper_keys where paper_id{test} order by key", args):
                out[pid].append(key)
        return out

    def record_keys(self) -> set[str]:
        """Every rec:<hash> seen so far: re-ingesting an unchanged record is a set lookup."""
        return {r[0] for r in self._select_tuples("select key from paper_keys where key like 'rec:%'")}

    def id_taken(self, paper_id: str) -> bool:
        return bool(storable([paper_id])) and \
            self._select_one("select 1 from papers where id = ?", [paper_id]) is not None

    def paper_rows(self, ids: Iterable[str]) -> dict[str, dict]:
        """Raw rows (all stored columns) by id, for ingest merges."""
        return {r["id"]: r for r in self._papers_in(ids)}


class VectorTables(SQLTables):
    """Embeddings one at a time, by key and in bulk (load_vectors, vector_changes, read in batches
    by the backend's `_stream`); the backend writes them (_put_embeddings)."""

    def put_embeddings(self, embeddings: list[dict]) -> None:
        with self.transaction() as db:
            self._put_embeddings(db, embeddings, self._bump(db, "papers_version"))

    def vectors_by_hash(self, model: str, hashes: Iterable[str]) -> dict[str, np.ndarray]:
        """Cached vectors for these content hashes under this model."""
        return self._vectors_where(
            "select content_hash, vector from embeddings where model = ? and content_hash{test}", model, hashes)

    def vectors_of(self, model: str, ids: Iterable[str]) -> dict[str, np.ndarray]:
        """paper id -> its current vector under this model (a stale one, of an older text, is left out)."""
        return self._vectors_where(
            "select e.paper_id, e.vector from embeddings e join papers p on p.id = e.paper_id "
            "where e.model = ? and e.paper_id{test} and e.content_hash = p.content_hash", model, ids)

    def _vectors_where(self, sql: str, model: str, keys: Iterable[str]) -> dict[str, np.ndarray]:
        """key -> vector for `sql` (its first column the key, {test} the IN test on the keys)."""
        return {key: as_vector(blob) for test, args in self._chunks(keys)
                for key, blob in self._select_tuples(sql.format(test=test), [model, *args])}

    def papers_missing_embeddings(self, model: str) -> list[tuple[str, str]]:
        """(paper id, content hash) of papers with no current vector for this model."""
        return [tuple(r) for r in self._select_tuples(
            "select p.id, p.content_hash from papers p left join embeddings e "
            "on e.paper_id = p.id and e.model = ? "
            f"where e.paper_id is null or e.content_hash is distinct from p.content_hash order by p.{self._SEQ}",
            [model])]

    def load_vectors(self, model: str) -> tuple[list[str], np.ndarray]:
        """All current vectors for a model as (ids, float32 matrix), in the papers' order."""
        ids, blobs = [], []
        for rows in self._select_batches(
                "select e.paper_id, e.vector from embeddings e join papers p on p.id = e.paper_id "
                f"where e.model = ? and e.content_hash = p.content_hash order by p.{self._SEQ}", [model]):
            for pid, blob in rows:
                ids.append(pid)
                blobs.append(bytes(blob))
        if not blobs:
            return [], np.zeros((0, 0), dtype=np.float32)
        return ids, np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), -1)

    def vector_changes(self, model: str, *, since: int | None = None, vectors: bool = True,
                       batch: int = 10_000) -> Iterator[list[tuple]]:
        """Batches of (id, collection, year, short name, updated_at, vector) for every paper (since
        None) or those whose row or vector for this model changed after papers_version `since`.

        vector is the float32 bytes of the paper's current vector, None when it has none (or its
        text changed since it was embedded); with vectors=False, b"" stands for one. Read
        papers_version() first: every change up to it is in the batches (later ones may be too).
        """
        vec = "e.vector" if vectors else f"case when e.paper_id is null then null else {self._EMPTY_BLOB} end"
        sql = (f"select p.id, coalesce(p.collection, ''), p.year, p.short_name, p.updated_at, {vec} "
               "from papers p left join embeddings e on e.paper_id = p.id and e.model = ? "
               "and e.content_hash = p.content_hash")
        args: list = [model]
        if since is not None:
            sql += (" where p.id in (select id from papers where changed > ? union "
                    "select paper_id from embeddings where model = ? and changed > ?)")
            args += [since, model, since]
        for rows in self._select_batches(sql + f" order by p.{self._SEQ}", args, batch):
            yield [(*r[:5], None if r[5] is None else bytes(r[5])) for r in rows]

    def get_vector(self, paper_id: str, model: str) -> np.ndarray | None:
        row = self._select_one("select vector from embeddings where paper_id = ? and model = ?",
                               [paper_id, model])
        return as_vector(row[0]) if row else None


class SummaryTables(SQLTables):
    """The summaries cache's reads (a write, put_summary, gives up when busy: each backend's own)."""

    def get_summary(self, content_hash: str, backend: str) -> dict | None:
        row = self._select_one("select data from summaries where content_hash = ? and backend = ?",
                               [content_hash, backend])
        return json.loads(row[0]) if row else None

    def get_summaries(self, content_hashes: Iterable[str], backend: str) -> dict[str, dict]:
        """content hash -> cached summary, for those of these hashes the cache holds."""
        return {h: json.loads(data) for test, args in self._chunks(content_hashes)
                for h, data in self._select_tuples(
                    f"select content_hash, data from summaries where backend = ? and content_hash{test}",
                    [backend, *args])}

    _SUMMARY_UPSERT = ("insert into summaries(content_hash, backend, data, created_at) values (?, ?, ?, ?) "
                       "on conflict(content_hash, backend) do update set data = excluded.data, "
                       "created_at = excluded.created_at")
