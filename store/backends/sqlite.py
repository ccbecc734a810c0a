"""SQLiteStore: the SQLite backend of the Store protocol, and the one place that runs SQL.

Wraps sqlite_utils.Database; the schema is in sqlite_migrations. Every public
method is a complete unit of work: multi-row writes run in one transaction, so
a killed process leaves the file consistent. Each thread gets its own
connection (the bot answers commands on worker threads). SQLite's own errors
stop at this module: a locked database is StoreBusy, anything else StoreError.
"""
from __future__ import annotations

import functools
import inspect
import itertools
import json
import os
import re
import sqlite3
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import numpy as np
import sqlite_utils

from ..base import BackupResult
from ..errors import NewerSchema, ReadOnlyStorage, SchemaError, StoreBusy, StoreError
from ..paper import Paper
from ..text import member_hash
from .forget import FORGET_METHODS, ForgetMember
from .posts import POST_METHODS, PostClaims
from .replicas import REPLICA_METHODS, ReplicaTables
from .rows import (
    CLUB_FIELDS, JSON_FIELDS as _JSON_FIELDS, SESSION_FIELDS, channel_message_rows,
    interest_from_row, paper_from_row, paper_signal,
    source_from_row, utc_day,
)
from .sqlite_migrations import migrations


BUSY_TIMEOUT_MS = 15_000
CACHE_BUSY_MS = 100  # a cache write waits at most this long for another writer, then is skipped
# The FTS columns in m001's order; lexical_search weights are given in this order.
LEXICAL_FIELDS = ("short_name", "headline", "title", "abstract")
_PHRASE = re.compile(r"[^\W_]+(?: [^\W_]+)*", re.UNICODE)


def match_expression(phrases: Sequence[str]) -> str | None:
    """A safe FTS5 MATCH string: each phrase double-quoted, OR-joined; None for no phrases.

    Quoting makes AND/OR/NEAR, *, ^, :, -, brackets and stray quotes plain text, and
    phrases hold only letters, digits and spaces, so no user input can make FTS5 raise.
    """
    quoted = [f'"{p}"' for p in dict.fromkeys(phrases) if _PHRASE.fullmatch(p)]
    return " OR ".join(quoted) if quoted else None


def is_busy(error: BaseException) -> bool:
    """True for SQLite's 'database is locked' / 'busy' errors (another writer held on too long)."""
    text = str(error)
    return isinstance(error, sqlite3.OperationalError) and ("locked" in text or "busy" in text)


def _store_error(error: sqlite3.Error, path: str) -> StoreError:
    if is_busy(error):
        return StoreBusy(f"database {path} is busy (another writer held it too long): {error}")
    return StoreError(f"cannot read database {path}: {error}")


def _translated(fn):
    """Wrap one public method so sqlite3 errors leave it as StoreBusy or StoreError."""
    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def gen(self, *args, **kwargs):
            try:
                yield from fn(self, *args, **kwargs)
            except sqlite3.Error as e:
                raise _store_error(e, self.path) from e
        return gen

    @functools.wraps(fn)
    def call(self, *args, **kwargs):
        try:
            return fn(self, *args, **kwargs)
        except sqlite3.Error as e:
            raise _store_error(e, self.path) from e
    return call


def _sqlite_errors_stay_inside(cls):
    """Class decorator: every public method translates sqlite3 errors (transaction stays raw)."""
    for name, value in list(vars(cls).items()):
        if name.startswith("_") or name in ("transaction",) or not inspect.isfunction(value):
            continue
        setattr(cls, name, _translated(value))
    for name in REPLICA_METHODS:  # the shared ones (replicas.py) translate the same way
        setattr(cls, name, _translated(getattr(ReplicaTables, name)))
    for name in FORGET_METHODS:
        setattr(cls, name, _translated(getattr(ForgetMember, name)))
    for name in POST_METHODS:
        setattr(cls, name, _translated(getattr(PostClaims, name)))
    return cls


def _remove_db_files(path: Path) -> None:
    """Remove a database file and its WAL side files (stale ones would be replayed into a new copy)."""
    for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        p.unlink(missing_ok=True)


@_sqlite_errors_stay_inside
class SQLiteStore(ForgetMember, ReplicaTables, PostClaims):
    """The paperclub database in one SQLite file; safe to share across threads."""

    backend = "sqlite"

    def __init__(self, path: str | Path, *, migrate: bool = True, must_exist: bool = False,
                 read_only: bool = False):
        self.path = str(path)
        # read_only: opened with mode=ro (immutable=1 on a read-only volume, where SQLite cannot
        # even make the -shm file); nothing is migrated and cache writes are skipped.
        self.read_only = read_only
        if read_only:
            migrate = False
            must_exist = True
        if must_exist and (self.path == ":memory:" or not Path(self.path).is_file()):
            raise StoreError(f"no database at {self.path}")
        if migrate:
            problem = _unwritable(self.path)
            if problem:
                raise ReadOnlyStorage(problem)
        self._local = threading.local()
        self._memory_forgotten: set[str] = set()  # the forgotten list of a :memory: database
        self._write_lock = threading.RLock()
        if migrate:
            self.migrate()
            self.reapply_forgotten()

    # -- connections -------------------------------------------------------
    @property
    def db(self) -> sqlite_utils.Database:
        db = getattr(self._local, "db", None)
        if db is None:
            if self.read_only:
                path = Path(self.path).absolute()
                flag = "mode=ro" if os.access(path.parent, os.W_OK) else "immutable=1"
                conn = sqlite3.connect(f"{path.as_uri()}?{flag}", uri=True, timeout=BUSY_TIMEOUT_MS / 1000,
                                       check_same_thread=False)
                db = sqlite_utils.Database(conn)
                db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
                self._local.db = db
                return db
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False)
            db = sqlite_utils.Database(conn)
            db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            db.execute("PRAGMA foreign_keys = ON")
            db.execute("PRAGMA synchronous = NORMAL")
            self._local.db = db
        return db

    def close(self) -> None:
        db = getattr(self._local, "db", None)
        if db is not None:
            db.close()
            self._local.db = None

    @contextmanager
    def transaction(self) -> Iterator[sqlite_utils.Database]:
        """One write transaction (BEGIN IMMEDIATE, so writers queue instead of failing)."""
        db = self.db
        with self._write_lock:
            if db.conn.in_transaction:
                with db.atomic():
                    yield db
                return
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.rollback()
                raise
            else:
                db.conn.execute("COMMIT")

    def migrate(self) -> None:
        """Apply this version's migrations; a database from a newer paperclub is refused, untouched."""
        newer = self.newer_schema()
        if newer:
            raise NewerSchema(newer)
        db = self.db
        if self.path != ":memory:" and db.journal_mode != "wal":
            db.enable_wal()
        with self._write_lock:
            migrations.apply(db)

    def newer_schema(self) -> str | None:
        """One line naming both versions when a newer paperclub migrated this database; else None."""
        applied = {m.name for m in migrations.applied(self.db)}
        known = [m.name for m in migrations._migrations]
        unknown = sorted(applied - set(known))
        if not unknown:
            return None
        return (f"database {self.path} is at schema {len(applied)} ({unknown[-1]}), from a newer paperclub; "
                f"this one knows schema {len(known)} ({known[-1]}). Upgrade paperclub, or use a backup "
                "made by this version.")

    def schema_version(self) -> tuple[int, int]:
        """(applied, known) migration counts; equal when the file is current."""
        applied = {m.name for m in migrations.applied(self.db)}
        known = {m.name for m in migrations._migrations}
        if applied - known:
            raise NewerSchema(self.newer_schema())
        return len(applied & known), len(known)

    # -- meta ----------------------------------------------------------------
    def _read_one(self, sql: str, args: list):
        return self.db.execute(sql, args).fetchone()

    def _rows(self, sql: str, args: list) -> list[dict]:
        return list(self.db.query(sql, args))

    def get_meta(self, key: str, default: str | None = None) -> str | None:
        row = self.db.execute("select value from meta where key = ?", [key]).fetchone()
        return row[0] if row else default

    def set_meta(self, key: str, value: str) -> None:
        with self.transaction() as db:
            db.execute(
                "insert into meta(key, value) values (?, ?) "
                "on conflict(key) do update set value = excluded.value",
                [key, value],
            )

    def _bump_version(self, db) -> int:
        """The next papers_version, inside the caller's write transaction: its rows are stamped with it."""
        return int(db.execute(
            "insert into meta(key, value) values ('papers_version', '1') "
            "on conflict(key) do update set value = cast(value as integer) + 1 returning value"
        ).fetchone()[0])

    def papers_version(self) -> int:
        """Changes whenever papers or embeddings change; caches compare it."""
        return int(self.get_meta("papers_version", "0"))

    # -- papers --------------------------------------------------------------
    def count_papers(self) -> int:
        return self.db.execute("select count(*) from papers").fetchone()[0]

    _paper = staticmethod(paper_from_row)

    def get_paper(self, paper_id: str) -> Paper | None:
        rows = list(self.db.query("select * from papers where id = ?", [paper_id]))
        return self._paper(rows[0]) if rows else None

    def get_papers(self, ids: Iterable[str]) -> list[Paper]:
        """Papers in the order of ids (missing ones left out)."""
        ids = list(ids)
        if not ids:
            return []
        found: dict[str, Paper] = {}
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            marks = ",".join("?" * len(chunk))
            for row in self.db.query(f"select * from papers where id in ({marks})", chunk):
                found[row["id"]] = self._paper(row)
        return [found[i] for i in ids if i in found]

    def list_papers(self, *, limit: int | None = None, offset: int = 0,
                    collection: str | None = None) -> list[Paper]:
        sql, args = "select * from papers", []
        if collection:
            sql += " where collection = ? collate nocase"
            args.append(collection)
        sql += " order by created_at, rowid"
        if limit is not None:
            sql += " limit ? offset ?"
            args += [limit, offset]
        return [self._paper(r) for r in self.db.query(sql, args)]

    def iter_papers(self, batch: int = 1000) -> Iterator[Paper]:
        last = -1
        while True:
            rows = list(self.db.query(
                "select rowid as _rid, * from papers where rowid > ? order by rowid limit ?",
                [last, batch]))
            if not rows:
                return
            for r in rows:
                yield self._paper(r)
            last = rows[-1]["_rid"]

    def collections(self) -> list[tuple[str, int | None, int]]:
        """(collection, year, count) for every collection in the store."""
        return [tuple(r) for r in self.db.execute(
            "select collection, year, count(*) from papers group by collection, year order by collection")]

    # -- identity keys (ingest) ---------------------------------------------
    def lookup_keys(self, keys: Iterable[str]) -> dict[str, list[str]]:
        """key -> paper ids holding it."""
        keys = list(dict.fromkeys(keys))
        out: dict[str, list[str]] = {}
        for i in range(0, len(keys), 500):
            chunk = keys[i : i + 500]
            marks = ",".join("?" * len(chunk))
            for key, pid in self.db.execute(
                f"select key, paper_id from paper_keys where key in ({marks})", chunk
            ):
                out.setdefault(key, []).append(pid)
        return out

    def paper_keys(self, ids: Iterable[str]) -> dict[str, list[str]]:
        """paper id -> its identity keys (ext:, src:, title: ...), for naming a paper's source ids."""
        ids = list(dict.fromkeys(ids))
        out: dict[str, list[str]] = {pid: [] for pid in ids}
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            marks = ",".join("?" * len(chunk))
            for key, pid in self.db.execute(
                f"select key, paper_id from paper_keys where paper_id in ({marks}) order by key", chunk
            ):
                out[pid].append(key)
        return out

    def record_keys(self) -> set[str]:
        """Every rec:<hash> seen so far: re-ingesting an unchanged record is a set lookup."""
        return {r[0] for r in self.db.execute("select key from paper_keys where key like 'rec:%'")}

    def id_taken(self, paper_id: str) -> bool:
        return self.db.execute("select 1 from papers where id = ?", [paper_id]).fetchone() is not None

    def paper_rows(self, ids: Iterable[str]) -> dict[str, dict]:
        """Raw rows (all columns) by id, for ingest merges."""
        ids = list(ids)
        out = {}
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            marks = ",".join("?" * len(chunk))
            for row in self.db.query(f"select * from papers where id in ({marks})", chunk):
                out[row["id"]] = row
        return out

    def write_papers(self, rows: list[dict], keys: list[tuple[str, str]],
                     replace_keys_for: Iterable[str] = (),
                     embeddings: list[dict] = (), *, now: float) -> None:
        """Upsert paper rows, their identity keys and embeddings in one transaction."""
        with self.transaction() as db:
            version = self._bump_version(db) if rows or embeddings else 0
            for pid in replace_keys_for:
                db.execute(
                    "delete from paper_keys where paper_id = ? and (key like 'abs:%' or key like 'sent:%')",
                    [pid])
            prepared = []
            for row in rows:
                row = dict(row)
                for k in _JSON_FIELDS:
                    if not isinstance(row.get(k), str):
                        row[k] = json.dumps(row.get(k) or [], ensure_ascii=False)
                row.setdefault("created_at", now)
                row["updated_at"] = now
                row["changed"] = version
                prepared.append(row)
            # One upsert per run of rows with the same columns (a column a row lacks is kept as
            # it is, never set to null), in order: a bulk ingest is one statement per 100 rows.
            for _, run in itertools.groupby(prepared, key=lambda r: tuple(r)):
                db["papers"].upsert_all(list(run), pk="id", alter=False)
            if keys:
                db.conn.executemany(
                    "insert or ignore into paper_keys(key, paper_id) values (?, ?)", keys)
            if embeddings:
                self._put_embeddings(db, embeddings, version)

    # -- embeddings ----------------------------------------------------------
    @staticmethod
    def _put_embeddings(db, embeddings: list[dict], version: int) -> None:
        db.conn.executemany(
            "insert into embeddings(paper_id, model, dim, vector, content_hash, changed) "
            "values (?,?,?,?,?,?) on conflict(paper_id, model) do update set dim = excluded.dim, "
            "vector = excluded.vector, content_hash = excluded.content_hash, changed = excluded.changed",
            [(e["paper_id"], e["model"], int(len(e["vector"])),
              np.asarray(e["vector"], dtype=np.float32).tobytes(), e["content_hash"], version)
             for e in embeddings],
        )

    def put_embeddings(self, embeddings: list[dict]) -> None:
        with self.transaction() as db:
            self._put_embeddings(db, embeddings, self._bump_version(db))

    def vectors_by_hash(self, model: str, hashes: Iterable[str]) -> dict[str, np.ndarray]:
        """Cached vectors for these content hashes under this model."""
        return self._vectors_where(
            "select content_hash, vector from embeddings where model = ? and content_hash in ({marks})",
            model, hashes)

    def vectors_of(self, model: str, ids: Iterable[str]) -> dict[str, np.ndarray]:
        """paper id -> its current vector under this model (a stale one, of an older text, is left out)."""
        return self._vectors_where(
            "select e.paper_id, e.vector from embeddings e join papers p on p.id = e.paper_id "
            "where e.model = ? and e.paper_id in ({marks}) and e.content_hash = p.content_hash", model, ids)

    def _vectors_where(self, sql: str, model: str, keys: Iterable[str]) -> dict[str, np.ndarray]:
        """key -> vector for `sql` (its first column the key), asked 500 keys at a time."""
        keys = list(dict.fromkeys(keys))
        out = {}
        for i in range(0, len(keys), 500):
            chunk = keys[i : i + 500]
            for key, blob in self.db.execute(sql.format(marks=",".join("?" * len(chunk))), [model, *chunk]):
                out[key] = np.frombuffer(blob, dtype=np.float32)
        return out

    def papers_missing_embeddings(self, model: str) -> list[tuple[str, str]]:
        """(paper id, content hash) of papers with no current vector for this model."""
        return [tuple(r) for r in self.db.execute(
            "select p.id, p.content_hash from papers p left join embeddings e "
            "on e.paper_id = p.id and e.model = ? "
            "where e.paper_id is null or e.content_hash != p.content_hash order by p.rowid",
            [model])]

    def load_vectors(self, model: str) -> tuple[list[str], np.ndarray]:
        """All current vectors for a model as (ids, float32 matrix)."""
        ids, blobs = [], []
        for pid, blob in self.db.execute(
            "select e.paper_id, e.vector from embeddings e join papers p on p.id = e.paper_id "
            "where e.model = ? and e.content_hash = p.content_hash order by p.rowid", [model]
        ):
            ids.append(pid)
            blobs.append(blob)
        if not blobs:
            return [], np.zeros((0, 0), dtype=np.float32)
        mat = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), -1)
        return ids, mat

    def vector_changes(self, model: str, *, since: int | None = None, vectors: bool = True,
                       batch: int = 10_000) -> Iterator[list[tuple]]:
        """Batches of (id, collection, year, short name, updated_at, vector) for every paper (since
        None) or those whose row or vector for this model changed after papers_version `since`.

        vector is the float32 bytes of the paper's current vector, None when it has none (or its
        text changed since it was embedded); with vectors=False, b"" stands for one. Read
        papers_version() first: every change up to it is in the batches (later ones may be too).
        """
        vec = "e.vector" if vectors else "case when e.paper_id is null then null else x'' end"
        sql = (f"select p.id, coalesce(p.collection, ''), p.year, p.short_name, p.updated_at, {vec} "
               "from papers p left join embeddings e on e.paper_id = p.id and e.model = ? "
               "and e.content_hash = p.content_hash")
        args: list = [model]
        if since is not None:
            sql += (" where p.id in (select id from papers where changed > ? union "
                    "select paper_id from embeddings where model = ? and changed > ?)")
            args += [since, model, since]
        cursor = self.db.execute(sql + " order by p.rowid", args)
        while rows := cursor.fetchmany(batch):
            yield rows

    def get_vector(self, paper_id: str, model: str) -> np.ndarray | None:
        row = self.db.execute(
            "select vector from embeddings where paper_id = ? and model = ?", [paper_id, model]
        ).fetchone()
        return np.frombuffer(row[0], dtype=np.float32) if row else None

    # -- lexical search (used by store/search.py) ----------------------------
    def lexical_search(self, terms: Sequence[str], *, limit: int = 100, collection: str | None = None,
                       year: int | None = None,
                       weights: Sequence[float] | None = None) -> list[tuple[str, float]]:
        """(paper id, score) for papers holding any of the terms, best first (higher is better).

        A term is a word or a space-joined phrase ('g nll'); anything but letters, digits
        and single spaces is dropped, so no text can make the search raise. weights are per
        field, in LEXICAL_FIELDS order. The score is FTS5's BM25, negated.
        """
        match = match_expression(terms)
        if match is None:
            return []
        weights = tuple(weights or (1.0,) * len(LEXICAL_FIELDS))
        return [(pid, -score) for pid, score in self._fts(match, weights, limit, collection, year)]

    def _fts(self, match: str, weights: tuple[float, ...], limit: int, collection: str | None,
             year: int | None) -> list[tuple[str, float]]:
        """(paper id, bm25) for an FTS5 MATCH expression (bm25 is negative; lower is better)."""
        if not collection and not year:
            # Rank inside FTS first and join only the top rows: half the time at 100k papers.
            sql = ("select p.id, f.score from (select rowid, bm25(papers_fts, ?, ?, ?, ?) as score "
                   "from papers_fts where papers_fts match ? order by score limit ?) f "
                   "join papers p on p.rowid = f.rowid order by f.score")
            rows = self.db.execute(sql, [*weights, match, int(limit)])
            return [(pid, float(score)) for pid, score in rows]
        sql = ("select p.id, bm25(papers_fts, ?, ?, ?, ?) as score from papers_fts "
               "join papers p on p.rowid = papers_fts.rowid where papers_fts match ?")
        args: list = [*weights, match]
        if collection:
            # 'ICLR' finds 'ICLR 2026': a venue without its year is what people type.
            sql += " and (p.collection = ? collate nocase or p.collection like ?)"
            args += [collection, collection + " %"]
        if year:
            sql += " and p.year = ?"
            args.append(int(year))
        sql += " order by score limit ?"
        args.append(int(limit))
        return [(pid, float(score)) for pid, score in self.db.execute(sql, args)]

    def paper_facets(self) -> list[tuple[str, str, int | None, str]]:
        """(id, collection, year, short name) of every paper, oldest update first.

        Search keeps these in memory: filters and exact-name lookups without a table scan.
        """
        return [tuple(r) for r in self.db.execute(
            "select id, coalesce(collection, ''), year, short_name from papers order by updated_at, rowid")]

    def term_stats(self, words: Iterable[str], *, counts: bool = True) -> dict[str, tuple[str, int]]:
        """word -> (the term the index keeps it under, how many papers hold it).

        The term is lower-cased and Porter-stemmed ('Videos' -> 'video'), '' when the
        tokenizer keeps nothing of the word (its count is then 0). counts=False skips
        the counting (every count 0): for callers that only need the terms.
        """
        words = list(dict.fromkeys(words))
        stems = self._stems(words)
        counts = self._doc_counts(t for t in stems.values() if t) if counts else {}
        return {w: (stems.get(w, ""), counts.get(stems.get(w, ""), 0)) for w in words}

    def _stems(self, words: Iterable[str]) -> dict[str, str]:
        """word -> its FTS term, from FTS5's own tokenizer in a private in-memory table."""
        words = [w for w in dict.fromkeys(words) if w]
        if not words:
            return {}
        probe = getattr(self._local, "stem_probe", None)
        if probe is None:
            probe = sqlite3.connect(":memory:", check_same_thread=False)
            # The tokenizer papers_fts was created with in m001.
            probe.execute("create virtual table probe using fts5(w, "
                          "tokenize='porter unicode61 remove_diacritics 2')")
            probe.execute("create virtual table probe_terms using fts5vocab(probe, instance)")
            self._local.stem_probe = probe
        with probe:
            probe.executemany("insert into probe(rowid, w) values (?, ?)", enumerate(words))
            terms = {words[doc]: term for doc, term in probe.execute("select doc, term from probe_terms")}
            probe.execute("delete from probe")
        return terms

    def _doc_counts(self, terms: Iterable[str]) -> dict[str, int]:
        """FTS term -> how many papers hold it (0 for unknown terms)."""
        terms = sorted(set(terms))
        if not getattr(self._local, "fts_vocab", False):
            self.db.execute("create virtual table if not exists temp.papers_fts_terms "
                            "using fts5vocab(main, papers_fts, row)")
            self._local.fts_vocab = True
        counts = dict.fromkeys(terms, 0)
        for i in range(0, len(terms), 500):
            chunk = terms[i : i + 500]
            marks = ",".join("?" * len(chunk))
            counts.update(self.db.execute(
                f"select term, doc from temp.papers_fts_terms where term in ({marks})", chunk).fetchall())
        return counts

    # -- summaries cache -----------------------------------------------------
    def get_summary(self, content_hash: str, backend: str) -> dict | None:
        row = self.db.execute(
            "select data from summaries where content_hash = ? and backend = ?",
            [content_hash, backend]).fetchone()
        return json.loads(row[0]) if row else None

    def get_summaries(self, content_hashes: Iterable[str], backend: str) -> dict[str, dict]:
        """content hash -> cached summary, for those of these hashes the cache holds."""
        hashes = list(dict.fromkeys(content_hashes))
        out: dict[str, dict] = {}
        for i in range(0, len(hashes), 500):
            chunk = hashes[i : i + 500]
            out.update((h, json.loads(data)) for h, data in self.db.execute(
                f"select content_hash, data from summaries where backend = ? "
                f"and content_hash in ({','.join('?' * len(chunk))})", [backend, *chunk]))
        return out

    def put_summary(self, content_hash: str, backend: str, data: dict, *, now: float) -> bool:
        """Cache a summary; False (not cached) when another writer holds the database.

        Replies compute summaries on the way (search results show TL;DRs), so a cache
        write must not make a reply wait out someone else's long write, or fail after it.
        """
        if self.read_only:  # a read-only volume: the summary is shown, just not cached
            return False
        if not self._write_lock.acquire(timeout=CACHE_BUSY_MS / 1000):
            return False  # a thread of ours is queued for the write lock already
        conn = self.db.conn
        conn.execute(f"PRAGMA busy_timeout = {CACHE_BUSY_MS}")
        try:
            with self.transaction() as db:
                db.execute(
                    "insert into summaries(content_hash, backend, data, created_at) values (?,?,?,?) "
                    "on conflict(content_hash, backend) do update set data = excluded.data, "
                    "created_at = excluded.created_at",
                    [content_hash, backend, json.dumps(data, ensure_ascii=False), now])
            return True
        except sqlite3.OperationalError as e:
            if not is_busy(e):
                raise
            return False
        finally:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            self._write_lock.release()

    # -- maintenance ---------------------------------------------------------
    def integrity_ok(self) -> bool:
        return self.db.execute("pragma integrity_check").fetchone()[0] == "ok"

    def backup_to(self, target: str | Path, *, force: bool = False) -> BackupResult:
        """A consistent, verified copy of the live database; atomic, so target is never half-written."""
        target = Path(target)
        if target.exists() and not force:
            raise StoreError(f"{target} exists; pass --force to overwrite it")
        if target.exists() and target.resolve() == Path(self.path).resolve():
            raise StoreError("the backup cannot overwrite the live database itself")
        target.parent.mkdir(parents=True, exist_ok=True)
        # Copy to a temporary name beside the target, verify, then rename: a crash or
        # a failed check leaves any previous backup at target untouched.
        tmp = target.with_name(f".{target.name}.partial-{os.getpid()}")
        try:
            _remove_db_files(tmp)
            dest = sqlite3.connect(str(tmp))
            try:
                self.db.conn.backup(dest)  # SQLite's online backup: consistent while others write
            finally:
                dest.close()
            result = self._verify(tmp, target)
            _remove_db_files(target)
            os.replace(tmp, target)
            forgotten = self.forgotten_hashes()
            if forgotten:  # the list travels with the copy: restored elsewhere, it still forgets
                Path(f"{target}.forgotten").write_text("".join(h + "\n" for h in sorted(forgotten)))
            return result
        finally:
            _remove_db_files(tmp)

    @staticmethod
    def _verify(copy: Path, final: Path) -> BackupResult:
        store = SQLiteStore(copy, migrate=False)
        try:
            if not store.integrity_ok():
                raise StoreError(f"the copy failed SQLite's integrity check; {final} not written")
            return BackupResult(final, store.count_papers(), store.schema_version(), copy.stat().st_size)
        finally:
            store.close()

    # -- paper of the day: interests, schedules, posts (store/pick.py, bot/daily.py) --------
    _interest = staticmethod(interest_from_row)

    def add_interest(self, channel: str, text: str, added_by: str | None, *, model: str,
                     vector, paper_id: str | None = None, now: float) -> int:
        """Store one channel interest with its embedding; returns its id."""
        with self.transaction() as db:
            cur = db.execute(
                "insert into interests(channel, text, paper_id, added_by, model, vector, created_at) "
                "values (?, ?, ?, ?, ?, ?, ?)",
                [channel, text, paper_id, added_by, model,
                 np.asarray(vector, dtype=np.float32).tobytes(), now])
            return cur.lastrowid

    def interests(self, channel: str) -> list[dict]:
        """A channel's interests, oldest first (the order /paper interests numbers them in)."""
        return [self._interest(r) for r in self.db.query(
            "select * from interests where channel = ? order by created_at, id", [channel])]

    def remove_interest(self, channel: str, interest_id: int) -> dict | None:
        """Delete one interest of this channel; returns it, or None if there was none."""
        with self.transaction() as db:
            rows = list(db.query("select * from interests where channel = ? and id = ?",
                                 [channel, interest_id]))
            if not rows:
                return None
            db.execute("delete from interests where id = ?", [interest_id])
            return self._interest(rows[0])

    def set_interest_vectors(self, rows: Iterable[tuple[int, str, np.ndarray]]) -> None:
        """Replace interest embeddings (id, model, vector) after a model change."""
        with self.transaction() as db:
            db.conn.executemany(
                "update interests set model = ?, vector = ? where id = ?",
                [(model, np.asarray(v, dtype=np.float32).tobytes(), iid) for iid, model, v in rows])

    def set_schedule(self, channel: str, *, hour: int, minute: int, tz: str, days: str,
                     set_by: str | None, now: float) -> None:
        """Create or replace a channel's post schedule."""
        with self.transaction() as db:
            db.execute(
                "insert into schedules(channel, hour, minute, tz, days, set_by, updated_at) "
                "values (?, ?, ?, ?, ?, ?, ?) on conflict(channel) do update set hour = excluded.hour, "
                "minute = excluded.minute, tz = excluded.tz, days = excluded.days, "
                "set_by = excluded.set_by, updated_at = excluded.updated_at",
                [channel, hour, minute, tz, days, set_by, now])
            self._bump_schedules(db)

    def delete_schedule(self, channel: str) -> bool:
        """Turn a channel's daily post off; False when it had none."""
        with self.transaction() as db:
            gone = db.execute("delete from schedules where channel = ?", [channel]).rowcount
            if gone:
                self._bump_schedules(db)
            return bool(gone)

    def get_schedule(self, channel: str) -> dict | None:
        rows = list(self.db.query("select * from schedules where channel = ?", [channel]))
        return rows[0] if rows else None

    def schedules(self) -> list[dict]:
        """Every channel's schedule (the scheduler is rebuilt from these)."""
        return list(self.db.query("select * from schedules order by channel"))

    @staticmethod
    def _bump_schedules(db) -> None:
        db.execute(
            "insert into meta(key, value) values ('schedules_version', '1') "
            "on conflict(key) do update set value = cast(value as integer) + 1")

    def schedules_version(self) -> int:
        """Changes whenever any schedule changes; a running scheduler compares it."""
        return int(self.get_meta("schedules_version", "0"))

    def paper_signals(self) -> dict[str, float]:
        """Per-paper prior in [0, 1] for picks without feedback: has code (0.5), reports numbers (0.5)."""
        return {pid: paper_signal(code, nums)
                for pid, code, nums in self.db.execute("select id, code_urls, numbers from papers")}

    # -- reactions as feedback: the log, the papers behind messages, reading lists (store/feedback.py) --
    def record_message_paper(self, channel: str, ts: str, paper_id: str, *, kind: str,
                             posted_by: str | None = None, now: float) -> bool:
        """Remember which paper one of the bot's messages shows (shares); False if already known."""
        with self.transaction() as db:
            cur = db.execute(
                "insert into message_papers(channel, ts, paper_id, kind, posted_by, posted_at) "
                "values (?, ?, ?, ?, ?, ?) on conflict(channel, ts) do nothing",
                [channel, ts, paper_id, kind, posted_by, now])
            return cur.rowcount == 1

    def paper_for_message(self, channel: str, ts: str) -> dict | None:
        """{paper_id, kind, posted_at} for a bot message (daily post, its abstract reply, a share)."""
        row = self.db.execute(
            "select paper_id, posted_at from posts where channel = ? and (ts = ? or abstract_ts = ?) "
            "and paper_id is not null", [channel, ts, ts]).fetchone()
        if row:
            return {"paper_id": row[0], "kind": "daily", "posted_at": row[1]}
        row = self.db.execute("select paper_id, kind, posted_at from message_papers where channel = ? and ts = ?",
                              [channel, ts]).fetchone()
        return {"paper_id": row[0], "kind": row[1], "posted_at": row[2]} if row else None

    def channel_messages(self, channel: str, *, since: float, until: float) -> list[dict]:
        """The bot's paper messages in a channel from [since, until), in posting order.

        A daily post counts by its date as well as its posted_at, so a post made for
        a date (a catch-up, a test clock) lands in that date's window.
        """
        daily = self.db.execute(
            "select ts, paper_id, posted_at, day, abstract_ts from posts where channel = ? "
            "and status = 'posted' and paper_id is not null and ts is not null "
            "and ((posted_at >= ? and posted_at < ?) or (day >= ? and day <= ?))",
            [channel, since, until, utc_day(since), utc_day(until)])
        shares = self.db.execute(
            "select ts, paper_id, kind, posted_at, posted_by from message_papers where channel = ? "
            "and posted_at >= ? and posted_at < ?", [channel, since, until])
        return channel_message_rows(list(daily), list(shares))

    def add_reaction(self, row: dict) -> bool:
        """Append one reaction event to the log; False when its event_id is already there."""
        cols = ("event_id", "channel", "message_ts", "paper_id", "user", "emoji", "base", "action",
                "event_ts", "event_time", "recorded_at")
        with self.transaction() as db:
            cur = db.execute(
                f"insert into reactions({', '.join(cols)}) values ({', '.join('?' * len(cols))}) "
                "on conflict(event_id) do nothing", [row.get(c) for c in cols])
            return cur.rowcount == 1

    def reactions(self, *, channel: str | None = None, user: str | None = None,
                  paper_ids: Iterable[str] | None = None, before: float | None = None) -> list[dict]:
        """Reaction log rows (added and removed), in the order they happened."""
        sql, args = "select * from reactions where 1", []
        if channel is not None:
            sql += " and channel = ?"
            args.append(channel)
        if user is not None:
            sql += " and user = ?"
            args.append(user)
        if before is not None:
            sql += " and event_ts < ?"
            args.append(before)
        if paper_ids is not None:
            ids = list(dict.fromkeys(paper_ids))
            if not ids:
                return []
            sql += f" and paper_id in ({','.join('?' * len(ids))})"
            args += ids
        return list(self.db.query(sql + " order by event_ts, id", args))

    def reaction_channels(self) -> list[str]:
        """Channels with at least one logged reaction."""
        return [r[0] for r in self.db.execute("select distinct channel from reactions order by channel")]

    def save_paper(self, user: str, paper_id: str, *, source: str = "button",
                   now: float) -> bool:
        """Put a paper on a member's reading list; False when it was already there.

        A Save click makes the entry the member's own choice ("button"), so taking a
        👀 off later does not remove it.
        """
        with self.transaction() as db:
            had = db.execute("select source from saved_papers where user = ? and paper_id = ?",
                             [user, paper_id]).fetchone()
            if had is None:
                db.execute("insert into saved_papers(user, paper_id, source, saved_at) values (?, ?, ?, ?)",
                           [user, paper_id, source, now])
                return True
            if source == "button" and had[0] != "button":
                db.execute("update saved_papers set source = 'button' where user = ? and paper_id = ?",
                           [user, paper_id])
            return False

    def unsave_paper(self, user: str, paper_id: str, *, source: str | None = None) -> bool:
        """Take a paper off a reading list (only if it was saved that way, when `source` is given)."""
        sql, args = "delete from saved_papers where user = ? and paper_id = ?", [user, paper_id]
        if source is not None:
            sql += " and source = ?"
            args.append(source)
        with self.transaction() as db:
            return db.execute(sql, args).rowcount > 0

    def saved_papers(self, user: str) -> list[dict]:
        """A member's reading list, newest first: {paper_id, source, saved_at}."""
        return list(self.db.query(
            "select paper_id, source, saved_at from saved_papers where user = ? "
            "order by saved_at desc, rowid desc", [user]))

    # -- the forgotten-members list ----------------------------------------------------
    # A file beside the database (not in it), so restoring an old backup cannot bring it back.
    def _forgotten_path(self) -> Path | None:
        return None if self.path == ":memory:" else Path(self.path + ".forgotten")

    def forgotten_hashes(self) -> set[str]:
        """Hashes (store.text.member_hash) of every member who ran forget-me here."""
        path = self._forgotten_path()
        if path is None or not path.exists():
            return set(self._memory_forgotten)
        return {line.strip() for line in path.read_text().splitlines() if line.strip()}

    def _remember_forgotten(self, db, user: str) -> None:
        # Written (and fsynced) before the transaction commits: a crash between leaves the member
        # listed, and the next start-up forgets them.
        digest = member_hash(user)
        path = self._forgotten_path()
        if path is None:
            self._memory_forgotten.add(digest)
            return
        if digest in self.forgotten_hashes():
            return
        with open(path, "a", encoding="ascii") as f:
            f.write(digest + "\n")
            f.flush()
            os.fsync(f.fileno())

    # -- sources: cursors and health, announcements, channel feeds ---------------------
    def source_state(self, source: str) -> dict | None:
        row = next(self.db.query("select * from source_state where source = ?", [source]), None)
        return source_from_row(row) if row else None

    def source_states(self) -> list[dict]:
        return [source_from_row(r) for r in self.db.query("select * from source_state order by source")]

    def update_source(self, source: str, *, now: float, cursor: dict | None = None,
                      ok: bool | None = None, error: str | None = None) -> None:
        """Set a source's cursor and/or record a success (clears the failure) or an error."""
        with self.transaction() as db:
            db.execute("insert or ignore into source_state(source, cursor, updated_at) values (?, '{}', ?)",
                       [source, now])
            if cursor is not None:
                db.execute("update source_state set cursor = ?, updated_at = ? where source = ?",
                           [json.dumps(cursor, sort_keys=True), now, source])
            if ok:
                db.execute("update source_state set last_success = ?, failing_since = null, updated_at = ? "
                           "where source = ?", [now, now, source])
            if error is not None:
                db.execute("update source_state set last_error = ?, last_error_at = ?, "
                           "failing_since = coalesce(failing_since, ?), updated_at = ? where source = ?",
                           [error[:500], now, now, now, source])

    def mark_announced(self, rows: Iterable[tuple[str, str, float]]) -> int:
        """(paper id, source, announced at): the first announcement per source is kept."""
        rows = list(rows)
        if not rows:
            return 0
        with self.transaction() as db:
            before = db.conn.total_changes
            db.conn.executemany("insert or ignore into paper_announcements(paper_id, source, announced_at) "
                                "values (?, ?, ?)", rows)
            return db.conn.total_changes - before

    def announced_since(self, since: float, sources: Iterable[str] | None = None) -> dict[str, float]:
        """Paper id -> its earliest announcement at or after `since` (by these sources, if given)."""
        sql, args = "select paper_id, min(announced_at) from paper_announcements where announced_at >= ?", [since]
        if sources is not None:
            sources = list(sources)
            if not sources:
                return {}
            sql += f" and source in ({','.join('?' * len(sources))})"
            args += sources
        return dict(self.db.execute(sql + " group by paper_id", args).fetchall())

    def add_feed(self, channel: str, kind: str, target: str, added_by: str | None, *, now: float) -> int | None:
        """The new feed's id; None when the channel already follows it."""
        with self.transaction() as db:
            cur = db.execute("insert or ignore into feeds(channel, kind, target, added_by, created_at) "
                             "values (?, ?, ?, ?, ?)", [channel, kind, target, added_by, now])
            return cur.lastrowid if cur.rowcount else None

    def feeds(self, channel: str | None = None) -> list[dict]:
        if channel is None:
            return list(self.db.query("select * from feeds order by id"))
        return list(self.db.query("select * from feeds where channel = ? order by id", [channel]))

    def remove_feed(self, channel: str, feed_id: int) -> dict | None:
        with self.transaction() as db:
            row = next(db.query("select * from feeds where channel = ? and id = ?", [channel, feed_id]), None)
            if row:
                db.execute("delete from feeds where id = ?", [feed_id])
            return row

    # -- the reading group (store/club.py holds the logic) -----------------------------

    def set_club(self, channel: str, *, set_by: str | None, now: float, **fields) -> None:
        """Create or change a channel's club (fields from CLUB_FIELDS)."""
        unknown = set(fields) - set(CLUB_FIELDS)
        if unknown:
            raise StoreError(f"unknown club fields {sorted(unknown)}")
        with self.transaction() as db:
            if list(db.query("select 1 from clubs where channel = ?", [channel])):
                sets = ", ".join(f"{k} = ?" for k in fields)  # names checked against CLUB_FIELDS above
                db.execute(f"update clubs set {sets}{', ' if sets else ''}set_by = ?, updated_at = ? "
                           "where channel = ?", [*fields.values(), set_by, now, channel])
            else:
                db["clubs"].insert({"channel": channel, **fields, "set_by": set_by, "updated_at": now})

    def get_club(self, channel: str) -> dict | None:
        rows = list(self.db.query("select * from clubs where channel = ?", [channel]))
        return rows[0] if rows else None

    def clubs(self) -> list[dict]:
        return list(self.db.query("select * from clubs where active = 1 order by channel"))

    def set_club_member(self, channel: str, user: str, *, active: bool, now: float) -> bool:
        """Join (active) or leave the rotation; False when nothing changed."""
        with self.transaction() as db:
            cur = db.execute(
                "insert into club_members(channel, user, active, joined_at) values (?, ?, ?, ?) "
                "on conflict(channel, user) do update set active = excluded.active "
                "where club_members.active != excluded.active", [channel, user, int(active), now])
            return cur.rowcount == 1

    def club_members(self, channel: str, *, active_only: bool = True) -> list[dict]:
        sql = "select * from club_members where channel = ?" + (" and active = 1" if active_only else "")
        return list(self.db.query(sql + " order by joined_at, user", [channel]))

    def add_club_away(self, channel: str, user: str, start: str, end: str, *, now: float) -> int:
        with self.transaction() as db:
            return db["club_aways"].insert({"channel": channel, "user": user, "start": start, "end": end,
                                            "added_at": now}).last_pk

    def club_aways(self, channel: str) -> list[dict]:
        return list(self.db.query("select * from club_aways where channel = ? order by start", [channel]))

    def put_club_session(self, channel: str, date: str, *, now: float, **fields) -> None:
        """Create or update one session row (state, paper_id, presenter, thread_ts, ...)."""
        with self.transaction() as db:
            db.execute("insert into club_sessions(channel, date, state, updated_at) values (?, ?, 'planned', ?) "
                       "on conflict do nothing", [channel, date, now])
            unknown = set(fields) - set(SESSION_FIELDS)
            if unknown:
                raise StoreError(f"unknown session fields {sorted(unknown)}")
            if fields:
                sets = ", ".join(f"{k} = ?" for k in fields)
                db.execute(f"update club_sessions set {sets}, updated_at = ? where channel = ? and date = ?",
                           [*fields.values(), now, channel, date])

    def get_club_session(self, channel: str, date: str) -> dict | None:
        rows = list(self.db.query("select * from club_sessions where channel = ? and date = ?", [channel, date]))
        return rows[0] if rows else None

    def club_sessions(self, channel: str) -> list[dict]:
        return list(self.db.query("select * from club_sessions where channel = ? order by date", [channel]))

    def add_nomination(self, channel: str, session: str, paper_id: str, user: str, *, now: float) -> bool:
        """Put a paper on a session's list; False when it is already there (the first nominator keeps it)."""
        with self.transaction() as db:
            cur = db.execute("insert into club_nominations(channel, session, paper_id, user, nominated_at) "
                             "values (?, ?, ?, ?, ?) on conflict do nothing", [channel, session, paper_id, user, now])
            return cur.rowcount == 1

    def nominations(self, channel: str, session: str) -> list[dict]:
        return list(self.db.query("select * from club_nominations where channel = ? and session = ? "
                                  "order by nominated_at, paper_id", [channel, session]))

    def add_vote(self, channel: str, session: str, user: str, paper_id: str, *, limit: int, now: float) -> str:
        """One approval vote: 'added', 'already' (idempotent) or 'full' (the member used `limit`)."""
        with self.transaction() as db:
            if list(db.query("select 1 from club_votes where channel = ? and session = ? and user = ? "
                             "and paper_id = ?", [channel, session, user, paper_id])):
                return "already"
            used = db.execute("select count(*) from club_votes where channel = ? and session = ? and user = ?",
                              [channel, session, user]).fetchone()[0]
            if used >= limit:
                return "full"
            db.execute("insert into club_votes(channel, session, user, paper_id, voted_at) values (?, ?, ?, ?, ?)",
                       [channel, session, user, paper_id, now])
            return "added"

    def clear_votes(self, channel: str, session: str, user: str) -> int:
        with self.transaction() as db:
            return db.execute("delete from club_votes where channel = ? and session = ? and user = ?",
                              [channel, session, user]).rowcount

    def club_votes(self, channel: str, session: str) -> list[dict]:
        return list(self.db.query("select * from club_votes where channel = ? and session = ? "
                                  "order by voted_at", [channel, session]))




def _unwritable(db: str) -> str | None:
    """Why this process cannot create or write the database at db (SQLite's own error names
    neither the path nor the cause); None when it can."""
    if db == ":memory:":
        return None
    path = Path(db).absolute()
    folder = next((p for p in path.parents if p.exists()), None)  # Store creates the rest
    for target in ([path] if path.exists() else []) + ([folder] if folder else []):
        if not os.access(target, os.W_OK):
            if os.statvfs(target).f_flag & os.ST_RDONLY:
                return (f"cannot write the database {path}: {target} is on a read-only file system. "
                        "Mount a writable volume there, or point PAPERCLUB_DB at a writable path.")
            st = target.stat()
            return (f"cannot write the database {path}: permission denied on {target} "
                    f"(owned by uid {st.st_uid}, mode {st.st_mode & 0o777:o}; paperclub runs as uid "
                    f"{os.getuid()}). Make it writable by that uid (for a Docker volume: "
                    f"chown -R {os.getuid()} on it), or point PAPERCLUB_DB at a writable path.")
    return None
