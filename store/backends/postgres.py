"""PostgresStore: the PostgreSQL backend of the Store protocol (psycopg 3 + psycopg_pool).

Every public method means what SQLiteStore's does (tests/test_store.py runs both) and is
one unit of work: reads run on an autocommit connection from the pool, writes in one
transaction. Claims are compare-and-swap statements (INSERT ... ON CONFLICT DO NOTHING,
UPDATE ... WHERE claimed_by = old), which READ COMMITTED re-checks after waiting for a
row lock, so exactly one caller wins across any number of processes. The schema is in
postgres_migrations. psycopg's errors stop here: lock timeouts, deadlocks, serialization
failures and an exhausted pool are StoreBusy, anything else StoreError.
"""
from __future__ import annotations

import functools
import inspect
import json
import logging
import re
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator, Sequence
from urllib.parse import urlsplit, urlunsplit

import numpy as np
import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool, PoolTimeout

from ..base import BackupResult
from ..errors import SchemaError, StoreBusy, StoreError
from ..paper import Paper
from ..text import member_hash
from .postgres_migrations import MIGRATIONS, MIGRATIONS_TABLE
from .forget import FORGET_METHODS, ForgetMember
from .posts import POST_METHODS, PostClaims
from .replicas import REPLICA_METHODS, ReplicaTables
from .rows import (
    CLUB_FIELDS, JSON_FIELDS as _JSON_FIELDS, SESSION_FIELDS, channel_message_rows,
    interest_from_row, paper_from_row, paper_signal,
    source_from_row, utc_day,
)

LOCK_TIMEOUT_MS = 15_000  # as SQLite's busy timeout: a writer waits this long for a row lock
CACHE_BUSY_MS = 100  # a cache write waits at most this long, then is skipped
POOL_MAX = 8
CONNECT_TIMEOUT_S = 10
PAPER_COLUMNS = ("id", "collection", "year", "title", "short_name", "headline", "abstract", "raw",
                 "raw_title", "url", "authors", "keywords", "code_urls", "numbers", "content_hash",
                 "source", "created_at", "updated_at")
_PAPER_SELECT = ", ".join(PAPER_COLUMNS)
# The tsvector weights in LEXICAL_FIELDS order (short_name A ... abstract D), as SQLite's FTS columns.
LEXICAL_FIELDS = ("short_name", "headline", "title", "abstract")
_PHRASE = re.compile(r"[^\W_]+(?: [^\W_]+)*", re.UNICODE)
# FTS5's BM25 constants, so scores (and the search's fusion tuned on them) mean the same.
BM25_K1, BM25_B = 1.2, 0.75
# Papers whose term frequencies are read for BM25: the best of a first score that counts each
# term once (at least this many, and this many times the hits asked for).
LEXICAL_POOL, LEXICAL_POOL_FACTOR = 300, 3
# term_stats counts a word's papers one by one (each is a heap read) up to this many. In a
# store of more papers, a word among ANALYZE's most common lexemes (pg_stats) takes its
# estimate instead of being counted, and a counted word that reaches the cap takes the
# planner's guess for a word just short of those (never less than the cap).
TERM_COUNT_CAP = 5000
# Which words are too common to count comes from ANALYZE's statistics (pg_stats). Past
# TERM_COUNT_CAP papers the store runs ANALYZE itself when it has grown by this share since
# its last one, or has no statistics: autovacuum may be off, or behind, and without them
# every common word would be taken for one of TERM_COUNT_CAP papers. A common word's count is
# its sampled share times today's paper count, so it stays right as the store grows; what a
# stale ANALYZE misses is a word that has become common since. Once per doubling: a 200k
# ingest ran it 13 times at a fifth's growth (9.5 s of its 140 s, about 1 s each at 200k).
ANALYZE_AFTER = 1.0
# meta's rows that BM25 reads: how many papers and tokens there are, kept by write_papers
# (and how many papers there were at the store's last ANALYZE); derived from papers, so a
# copy into the store drops them (they are counted again when read)
CORPUS_KEYS = ("papers_n", "papers_doclen", "papers_analyzed_n")
log = logging.getLogger(__name__)
_BUSY = (pg_errors.LockNotAvailable, pg_errors.SerializationFailure, pg_errors.DeadlockDetected,
         pg_errors.QueryCanceled)


def redact(url: str) -> str:
    """The URL without its password, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    return urlunsplit(parts._replace(netloc=f"{parts.username}:***@{host}"))


# What a server that is still starting (or briefly full) answers: worth waiting for, unlike
# a missing database or role, or a wrong password, which no amount of waiting fixes.
_NOT_YET = ("starting up", "not yet accepting connections", "in recovery mode", "shutting down",
            "too many clients", "connection slots are reserved")
_FAILED_AT = re.compile(r'^(?:connection failed: )?(?:connection to server (?:at|on) .*? failed: )?')


def server_address(url: str) -> str:
    """host:port of the server a postgresql:// URL names (PostgreSQL's defaults filled in)."""
    try:
        params = conninfo_to_dict(url)
    except psycopg.Error as e:
        raise StoreError(f"bad PostgreSQL URL {redact(url)}: {e}") from None
    host, port = params.get("host") or params.get("hostaddr"), params.get("port") or 5432
    return f"{host}:{port}" if host else f"the local socket (port {port})"


def unreachable_reason(url: str, timeout: float = CONNECT_TIMEOUT_S) -> str | None:
    """None when PostgreSQL at url accepts a connection; why not, while it does not answer (yet).

    A server that answers with a refusal waiting cannot fix (no such database or role, a
    wrong password) raises StoreError instead, with the server's reason.
    """
    try:
        psycopg.connect(url, connect_timeout=max(2, round(timeout))).close()
        return None
    except psycopg.Error as e:
        text = str(e).strip()
        first = next((line.strip() for line in text.splitlines() if line.strip()), type(e).__name__)
        reason = _FAILED_AT.sub("", first)
        if "FATAL:" in text and not any(phrase in text for phrase in _NOT_YET):
            refusal = re.sub(r"FATAL:\s*", "", reason)
            raise StoreError(f"PostgreSQL at {server_address(url)} refused the connection: {refusal}") from None
        return reason


def _store_error(error: BaseException, where: str) -> StoreError:
    if isinstance(error, PoolTimeout):
        return StoreBusy(f"database {where} is busy (no free connection): {error}")
    if isinstance(error, _BUSY):
        return StoreBusy(f"database {where} is busy (another writer held a lock too long): {error}")
    if isinstance(error, psycopg.OperationalError):
        return StoreError(f"cannot reach database {where}: {error}")
    return StoreError(f"cannot read database {where}: {error}")


def _translated(fn):
    """Wrap one public method so psycopg errors leave it as StoreBusy or StoreError."""
    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def gen(self, *args, **kwargs):
            try:
                yield from fn(self, *args, **kwargs)
            except (psycopg.Error, PoolTimeout) as e:
                raise _store_error(e, self.path) from e
        return gen

    @functools.wraps(fn)
    def call(self, *args, **kwargs):
        try:
            return fn(self, *args, **kwargs)
        except (psycopg.Error, PoolTimeout) as e:
            raise _store_error(e, self.path) from e
    return call


def _pg_errors_stay_inside(cls):
    for name, value in list(vars(cls).items()):
        if name.startswith("_") or name in ("transaction", "connection") or not inspect.isfunction(value):
            continue
        setattr(cls, name, _translated(value))
    for name in REPLICA_METHODS:  # the shared ones (replicas.py) translate the same way
        setattr(cls, name, _translated(getattr(ReplicaTables, name)))
    for name in FORGET_METHODS:
        setattr(cls, name, _translated(getattr(ForgetMember, name)))
    for name in POST_METHODS:
        setattr(cls, name, _translated(getattr(PostClaims, name)))
    return cls


def _storable(values: Iterable[str]) -> list[str]:
    """The values a text column can hold: PostgreSQL text has no NUL, so one with a NUL is
    nowhere in the store (SQLite would simply find nothing)."""
    return [v for v in values if "\x00" not in v]


def _blob(vector) -> bytes:
    return np.asarray(vector, dtype=np.float32).tobytes()


def _vec(blob) -> np.ndarray | None:
    return np.frombuffer(bytes(blob), dtype=np.float32) if blob is not None else None


@_pg_errors_stay_inside
class PostgresStore(ForgetMember, ReplicaTables, PostClaims):
    """The paperclub database in PostgreSQL; safe to share across threads and processes."""

    backend = "postgresql"
    _PARAM = "%s"
    _FOR_UPDATE = " for update"

    def __init__(self, url: str, *, migrate: bool = True, must_exist: bool = False,
                 max_size: int = POOL_MAX):
        self.url = url
        self.path = redact(url)
        self._mce_cache: tuple[int, dict[str, int]] | None = None  # (papers_version, lexeme -> papers)
        # lock_timeout joins any options the URL has (a test's search_path, say).
        try:
            params = conninfo_to_dict(url)
        except psycopg.Error as e:
            raise StoreError(f"bad PostgreSQL URL {self.path}: {e}") from e
        params["options"] = f"{params.get('options', '')} -c lock_timeout={LOCK_TIMEOUT_MS}".strip()
        conninfo = make_conninfo("", **params)
        try:  # one direct try first: the server's own reason (no such role...) in one line, at once
            psycopg.connect(conninfo, connect_timeout=CONNECT_TIMEOUT_S).close()
        except psycopg.Error as e:
            reason = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
            raise StoreError(f"cannot reach PostgreSQL at {self.path}: {reason}") from None
        self.pool = ConnectionPool(
            conninfo, min_size=1, max_size=max_size, open=False, name="paperclub",
            kwargs={"autocommit": True, "connect_timeout": CONNECT_TIMEOUT_S},
            timeout=LOCK_TIMEOUT_MS / 1000)
        try:
            self.pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)
        except PoolTimeout as e:
            self.pool.close()
            raise StoreError(f"cannot reach PostgreSQL at {self.path} within {CONNECT_TIMEOUT_S} s") from e
        if must_exist and not self._has_schema():
            self.pool.close()
            raise StoreError(f"no database at {self.path} (no paperclub tables there)")
        if migrate:
            self.migrate()
            self.reapply_forgotten()

    # -- connections -------------------------------------------------------
    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection]:
        """A pooled autocommit connection (each statement its own transaction)."""
        with self.pool.connection() as conn:
            yield conn

    @contextmanager
    def transaction(self) -> Iterator[psycopg.Connection]:
        """One write transaction on one pooled connection; rolled back if the block raises."""
        with self.pool.connection() as conn, conn.transaction():
            yield conn

    def _rows(self, sql: str, args: Sequence | dict = ()) -> list[dict]:
        with self.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            return cur.execute(sql, args).fetchall()

    def _tuples(self, sql: str, args: Sequence | dict = ()) -> list[tuple]:
        with self.connection() as conn:
            return conn.execute(sql, args).fetchall()

    def _one(self, sql: str, args: Sequence | dict = ()):
        with self.connection() as conn:
            return conn.execute(sql, args).fetchone()

    _read_one = _one

    def close(self) -> None:
        self.pool.close()

    # -- schema ------------------------------------------------------------
    def _has_schema(self) -> bool:
        return self._one("select to_regclass(%s) is not null", [MIGRATIONS_TABLE])[0]

    def migrate(self) -> None:
        with self.transaction() as conn:
            # A transaction-level advisory lock: replicas starting together migrate one at a
            # time, and the lock goes with the transaction (never held by a pooled session).
            conn.execute("select pg_advisory_xact_lock(hashtext('paperclub-migrate'))")
            conn.execute(f"create table if not exists {MIGRATIONS_TABLE} "
                         "(name text primary key, applied_at timestamptz not null default now())")
            done = {r[0] for r in conn.execute(f"select name from {MIGRATIONS_TABLE}")}
            for name, statements in MIGRATIONS:
                if name in done:
                    continue
                for sql in statements:
                    conn.execute(sql)
                conn.execute(f"insert into {MIGRATIONS_TABLE}(name) values (%s)", [name])

    def schema_version(self) -> tuple[int, int]:
        """(applied, known) migration counts; equal when the database is current."""
        applied = {r[0] for r in self._tuples(f"select name from {MIGRATIONS_TABLE}")}
        known = {name for name, _ in MIGRATIONS}
        if applied - known:
            raise SchemaError(
                f"database {self.path} has migrations this version does not know: "
                f"{', '.join(sorted(applied - known))}")
        return len(applied & known), len(known)

    # -- meta ----------------------------------------------------------------
    def get_meta(self, key: str, default: str | None = None) -> str | None:
        row = self._one("select value from meta where key = %s", [key])
        return row[0] if row else default

    def set_meta(self, key: str, value: str) -> None:
        with self.transaction() as conn:
            conn.execute("insert into meta(key, value) values (%s, %s) "
                         "on conflict(key) do update set value = excluded.value", [key, value])

    @staticmethod
    def _bump(conn, key: str) -> int:
        """The counter's next value; its row stays locked until the caller's transaction ends, so
        rows stamped with papers_version commit in the counter's order (see vector_changes)."""
        return int(conn.execute("insert into meta(key, value) values (%s, '1') "
                                "on conflict(key) do update set value = (meta.value::bigint + 1)::text "
                                "returning value", [key]).fetchone()[0])

    def papers_version(self) -> int:
        """Changes whenever papers or embeddings change; caches compare it."""
        return int(self.get_meta("papers_version", "0"))

    # -- papers --------------------------------------------------------------
    def count_papers(self) -> int:
        return self._one("select count(*) from papers")[0]

    _paper = staticmethod(paper_from_row)

    def get_paper(self, paper_id: str) -> Paper | None:
        if not _storable([paper_id]):
            return None
        rows = self._rows(f"select {_PAPER_SELECT} from papers where id = %s", [paper_id])
        return self._paper(rows[0]) if rows else None

    def get_papers(self, ids: Iterable[str]) -> list[Paper]:
        """Papers in the order of ids (missing ones left out)."""
        ids = list(ids)
        if not ids:
            return []
        found = {r["id"]: self._paper(r) for r in self._rows(
            f"select {_PAPER_SELECT} from papers where id = any(%s)", [_storable(ids)])}
        return [found[i] for i in ids if i in found]

    def list_papers(self, *, limit: int | None = None, offset: int = 0,
                    collection: str | None = None) -> list[Paper]:
        sql, args = f"select {_PAPER_SELECT} from papers", []
        if collection:
            sql += " where lower(collection) = lower(%s)"
            args.append(collection)
        sql += " order by created_at, seq"
        if limit is not None:
            sql += " limit %s offset %s"
            args += [limit, offset]
        return [self._paper(r) for r in self._rows(sql, args)]

    def iter_papers(self, batch: int = 1000) -> Iterator[Paper]:
        last = -1
        while True:
            rows = self._rows(f"select seq, {_PAPER_SELECT} from papers where seq > %s "
                              "order by seq limit %s", [last, batch])
            if not rows:
                return
            for r in rows:
                yield self._paper(r)
            last = rows[-1]["seq"]

    def collections(self) -> list[tuple[str, int | None, int]]:
        """(collection, year, count) for every collection in the store."""
        return [tuple(r) for r in self._tuples(
            "select collection, year, count(*) from papers group by collection, year "
            "order by collection, year")]

    def paper_facets(self) -> list[tuple[str, str, int | None, str]]:
        """(id, collection, year, short name) of every paper, oldest update first."""
        return [tuple(r) for r in self._tuples(
            "select id, coalesce(collection, ''), year, short_name from papers order by updated_at, seq")]

    def paper_signals(self) -> dict[str, float]:
        """Per-paper prior in [0, 1] for picks without feedback: has code (0.5), reports numbers (0.5)."""
        return {pid: paper_signal(code, nums)
                for pid, code, nums in self._tuples("select id, code_urls, numbers from papers")}

    # -- identity keys (ingest) ---------------------------------------------
    def lookup_keys(self, keys: Iterable[str]) -> dict[str, list[str]]:
        """key -> paper ids holding it."""
        out: dict[str, list[str]] = {}
        for key, pid in self._tuples("select key, paper_id from paper_keys where key = any(%s)",
                                     [_storable(dict.fromkeys(keys))]):
            out.setdefault(key, []).append(pid)
        return out

    def paper_keys(self, ids: Iterable[str]) -> dict[str, list[str]]:
        """paper id -> its identity keys (ext:, src:, title: ...), for naming a paper's source ids."""
        ids = list(dict.fromkeys(ids))
        out: dict[str, list[str]] = {pid: [] for pid in ids}
        for key, pid in self._tuples(
                "select key, paper_id from paper_keys where paper_id = any(%s) order by key", [_storable(ids)]):
            out[pid].append(key)
        return out

    def record_keys(self) -> set[str]:
        """Every rec:<hash> seen so far: re-ingesting an unchanged record is a set lookup."""
        return {r[0] for r in self._tuples("select key from paper_keys where key like 'rec:%%'")}

    def id_taken(self, paper_id: str) -> bool:
        return bool(_storable([paper_id])) and \
            self._one("select 1 from papers where id = %s", [paper_id]) is not None

    def paper_rows(self, ids: Iterable[str]) -> dict[str, dict]:
        """Raw rows (all stored columns) by id, for ingest merges."""
        return {r["id"]: r for r in self._rows(
            f"select {_PAPER_SELECT} from papers where id = any(%s)", [_storable(ids)])}

    def write_papers(self, rows: list[dict], keys: list[tuple[str, str]],
                     replace_keys_for: Iterable[str] = (),
                     embeddings: list[dict] = (), *, now: float) -> None:
        """Upsert paper rows, their identity keys and embeddings in one transaction."""
        by_columns: dict[tuple[str, ...], list[list]] = {}
        for row in rows:
            row = dict(row)
            unknown = set(row) - set(PAPER_COLUMNS) - {"changed"}
            if unknown:
                raise StoreError(f"papers has no column {', '.join(sorted(unknown))}")
            for k in _JSON_FIELDS:
                if k in row and not isinstance(row.get(k), str):
                    row[k] = json.dumps(row.get(k) or [], ensure_ascii=False)
            row.setdefault("created_at", now)
            row["updated_at"] = now
            row["changed"] = 0  # set below to this write's papers_version
            cols = tuple(row)
            by_columns.setdefault(cols, []).append([row[c] for c in cols])
        with self.transaction() as conn:
            # The counter first: its row lock orders this write's stamp against every other writer's.
            version = self._bump(conn, "papers_version") if rows or embeddings else 0
            for cols, values in by_columns.items():
                at = cols.index("changed")
                for v in values:
                    v[at] = version
            with conn.cursor() as cur:
                replace = list(replace_keys_for)
                if replace:
                    cur.execute("delete from paper_keys where paper_id = any(%s) "
                                "and (key like 'abs:%%' or key like 'sent:%%')", [replace])
                ids = list({row["id"] for row in rows})
                before = self._count_change(cur, ids) if ids else (0, 0)
                for cols, values in by_columns.items():
                    updates = ", ".join(f"{c} = excluded.{c}" for c in cols if c != "id")
                    cur.executemany(
                        f"insert into papers({', '.join(cols)}) values ({', '.join(['%s'] * len(cols))}) "
                        f"on conflict(id) do update set {updates}", values)
                if ids:  # BM25's corpus counters move by this write's difference (see _stats_row)
                    after = self._count_change(cur, ids)
                    cur.execute("update meta set value = (value::bigint + case key when 'papers_n' then %s "
                                "else %s end)::text where key in ('papers_n', 'papers_doclen')",
                                [after[0] - before[0], after[1] - before[1]])
                if keys:
                    cur.executemany("insert into paper_keys(key, paper_id) values (%s, %s) "
                                    "on conflict do nothing", list(keys))
            if embeddings:
                self._put_embeddings(conn, embeddings, version)
        if rows:
            meta = self._corpus_meta()
            self._analyze_if_stale(int(meta["papers_n"]), analyzed=meta.get("papers_analyzed_n"))

    # -- embeddings ----------------------------------------------------------
    @staticmethod
    def _put_embeddings(conn, embeddings: list[dict], version: int) -> None:
        with conn.cursor() as cur:
            cur.executemany(
                "insert into embeddings(paper_id, model, dim, vector, content_hash, changed) "
                "values (%s, %s, %s, %s, %s, %s) on conflict(paper_id, model) do update set "
                "dim = excluded.dim, vector = excluded.vector, content_hash = excluded.content_hash, "
                "changed = excluded.changed",
                [(e["paper_id"], e["model"], int(len(e["vector"])), _blob(e["vector"]), e["content_hash"],
                  version) for e in embeddings])

    def put_embeddings(self, embeddings: list[dict]) -> None:
        with self.transaction() as conn:
            self._put_embeddings(conn, embeddings, self._bump(conn, "papers_version"))

    def vectors_by_hash(self, model: str, hashes: Iterable[str]) -> dict[str, np.ndarray]:
        """Cached vectors for these content hashes under this model."""
        return {h: _vec(blob) for h, blob in self._tuples(
            "select content_hash, vector from embeddings where model = %s and content_hash = any(%s)",
            [model, _storable(dict.fromkeys(hashes))])}

    def vectors_of(self, model: str, ids: Iterable[str]) -> dict[str, np.ndarray]:
        """paper id -> its current vector under this model (a stale one, of an older text, is left out)."""
        return {pid: _vec(blob) for pid, blob in self._tuples(
            "select e.paper_id, e.vector from embeddings e join papers p on p.id = e.paper_id "
            "where e.model = %s and e.paper_id = any(%s) and e.content_hash = p.content_hash",
            [model, _storable(dict.fromkeys(ids))])}

    def papers_missing_embeddings(self, model: str) -> list[tuple[str, str]]:
        """(paper id, content hash) of papers with no current vector for this model."""
        return [tuple(r) for r in self._tuples(
            "select p.id, p.content_hash from papers p left join embeddings e "
            "on e.paper_id = p.id and e.model = %s "
            "where e.paper_id is null or e.content_hash is distinct from p.content_hash order by p.seq",
            [model])]

    def load_vectors(self, model: str) -> tuple[list[str], np.ndarray]:
        """All current vectors for a model as (ids, float32 matrix)."""
        ids, blobs = [], []
        with self.connection() as conn, conn.cursor(binary=True) as cur:
            cur.execute("select e.paper_id, e.vector from embeddings e join papers p on p.id = e.paper_id "
                        "where e.model = %s and e.content_hash = p.content_hash order by p.seq", [model])
            for pid, blob in cur:
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
        vec = "e.vector" if vectors else "case when e.paper_id is null then null else ''::bytea end"
        sql = (f"select p.id, coalesce(p.collection, ''), p.year, p.short_name, p.updated_at, {vec} "
               "from papers p left join embeddings e on e.paper_id = p.id and e.model = %s "
               "and e.content_hash = p.content_hash")
        args: list = [model]
        if since is not None:
            sql += (" where p.id in (select id from papers where changed > %s union "
                    "select paper_id from embeddings where model = %s and changed > %s)")
            args += [since, model, since]
        # A server-side cursor streams a million rows without holding them all in memory.
        with self.connection() as conn, conn.transaction(), \
                conn.cursor(name="vector_changes", binary=True) as cur:
            cur.itersize = batch
            cur.execute(sql + " order by p.seq", args)
            while rows := cur.fetchmany(batch):
                yield [(*r[:5], None if r[5] is None else bytes(r[5])) for r in rows]

    def get_vector(self, paper_id: str, model: str) -> np.ndarray | None:
        row = self._one("select vector from embeddings where paper_id = %s and model = %s",
                        [paper_id, model])
        return _vec(row[0]) if row else None

    # -- lexical search (used by store/search.py) ----------------------------
    def _corpus_stats(self) -> tuple[int, float]:
        """(papers, mean token count) for BM25: counters in meta that write_papers keeps (one
        row read, never a count over the table); a store from before them counts once."""
        return self._stats_row()[1:]

    def _stats_row(self) -> tuple[int, int, float]:
        """(papers_version, papers, mean token count), read together."""
        got = self._corpus_meta()
        n, total = int(got["papers_n"]), int(got["papers_doclen"])
        return int(got.get("papers_version", 0)), n, (total / n if n else 0.0)

    def _corpus_meta(self) -> dict[str, str]:
        """papers_version and the CORPUS_KEYS rows of meta, in one read (counted first when missing)."""
        got = dict(self._tuples("select key, value from meta where key = any(%s)",
                                [["papers_version", *CORPUS_KEYS]]))
        return got if "papers_n" in got else {**got, **self._count_corpus()}

    def _count_corpus(self) -> dict[str, str]:
        """Start the corpus counters from a count, with writers held off (a share lock on papers
        waits for those in flight and blocks new ones until the counters are in)."""
        with self.transaction() as conn:
            conn.execute("lock table papers in share mode")
            n, total = conn.execute("select count(*), coalesce(sum(doclen), 0) from papers").fetchone()
            conn.execute("insert into meta(key, value) values ('papers_n', %s), ('papers_doclen', %s) "
                         "on conflict(key) do update set value = excluded.value", [str(n), str(total)])
            version = conn.execute("select value from meta where key = 'papers_version'").fetchone()
        return {"papers_version": version[0] if version else "0", "papers_n": str(n), "papers_doclen": str(total)}

    @staticmethod
    def _count_change(cur, ids: list[str]) -> tuple[int, int]:
        """(papers, summed token count) among these ids now: taken before and after an upsert."""
        return tuple(int(x) for x in cur.execute(
            "select count(*), coalesce(sum(doclen), 0) from papers where id = any(%s)", [ids]).fetchone())

    def lexical_search(self, terms: Sequence[str], *, limit: int = 100, collection: str | None = None,
                       year: int | None = None,
                       weights: Sequence[float] | None = None) -> list[tuple[str, float]]:
        """(paper id, score) for papers holding any of the terms, best first (higher is better).

        A term is a word or a space-joined phrase ('g nll'); anything but letters, digits and
        single spaces is dropped. Terms go to PostgreSQL as one text[] parameter: no user
        text is ever part of the SQL. The score is BM25 as SQLite's FTS5 computes it (k1 1.2,
        b 0.75, idf clamped at 1e-6) over the weighted tsvector (weights per field in
        LEXICAL_FIELDS order), so the search's fusion, tuned on FTS5, means the same here.
        A phrase's frequency is its rarest word's.
        """
        phrases = [p for p in dict.fromkeys(terms) if _PHRASE.fullmatch(p)]
        if not phrases:
            return []
        w = [float(x) for x in (weights or (1.0,) * len(LEXICAL_FIELDS))]
        n, avgdl = self._corpus_stats()
        filters, args = "true", {"terms": phrases, "wa": w[0], "wb": w[1], "wc": w[2], "wd": w[3],
                             "n": n, "avgdl": avgdl or 1.0, "k1": BM25_K1, "b": BM25_B, "limit": int(limit),
                             "pool": max(int(limit) * LEXICAL_POOL_FACTOR, LEXICAL_POOL)}
        if collection:
            # 'ICLR' finds 'ICLR 2026': a venue without its year is what people type.
            filters += " and (lower(p.collection) = lower(%(coll)s) or lower(p.collection) like lower(%(coll_like)s))"
            args["coll"], args["coll_like"] = collection, collection + " %"
        if year:
            filters += " and p.year = %(year)s"
            args["year"] = int(year)
        sql = f"""
            with q as materialized (
                select t.ord, phraseto_tsquery('english', t.term) as query,
                       tsvector_to_array(to_tsvector('english', t.term)) as lexemes
                from unnest(%(terms)s::text[]) with ordinality as t(term, ord)
            ), q1 as materialized (select * from q where numnode(query) > 0),
            -- (paper, term) for every paper holding the term: the GIN index, once per term
            m as materialized (
                select p.id, p.doclen, q1.ord, ({filters}) as kept
                from q1 join papers p on p.tsv @@ q1.query
            ), idf as (
                select ord, greatest(ln((%(n)s - count(*) + 0.5) / (count(*) + 0.5)), 1e-6) as w
                from m group by ord
            ),
            -- a first score, as if each paper held each of its terms once: only the best of
            -- these have their tsvectors read, so a common word costs an index scan and no more
            pool as materialized (
                select m.id, m.doclen from m join idf using (ord) where m.kept
                group by m.id, m.doclen
                order by sum(idf.w) / (1 + %(k1)s * (1 - %(b)s + %(b)s * m.doclen / %(avgdl)s)) desc, m.id
                limit %(pool)s
            ),
            -- each pooled paper's tsvector is read once: weighted counts of the query's words
            counts as (
                select p.id, u.lexeme,
                       sum(case w when 'A' then %(wa)s when 'B' then %(wb)s
                                  when 'C' then %(wc)s else %(wd)s end) as c
                from pool join papers p on p.id = pool.id
                cross join lateral unnest(p.tsv) u cross join lateral unnest(u.weights) as w
                where u.lexeme = any(array(select distinct l from q1, unnest(q1.lexemes) l))
                group by p.id, u.lexeme
            ), tf as (
                -- a phrase's frequency is its rarest word's
                select m.id, m.ord, pool.doclen, min(counts.c) as f
                from pool join m on m.id = pool.id join q1 on q1.ord = m.ord
                join counts on counts.id = m.id and counts.lexeme = any(q1.lexemes)
                group by m.id, m.ord, pool.doclen
            )
            select tf.id, sum(
                idf.w * tf.f * (%(k1)s + 1)
                / (tf.f + %(k1)s * (1 - %(b)s + %(b)s * tf.doclen / %(avgdl)s))) as score
            from tf join idf using (ord)
            group by tf.id order by score desc, tf.id limit %(limit)s"""
        return [(pid, float(score)) for pid, score in self._tuples(sql, args)]

    def _common_lexemes(self, version: int, n: int) -> dict[str, int]:
        """lexeme -> papers holding it, estimated by ANALYZE (pg_stats' most common elements of
        papers.tsv), for words too common to count one by one; re-read when papers change."""
        cached = self._mce_cache
        if cached and cached[0] == version:
            return cached[1]
        row = self._one(self._MCE_SQL)
        if not (row and row[0]) and self._analyze_if_stale(n, missing=True):
            row = self._one(self._MCE_SQL)
        common = ({lex: int(round(f * n)) for lex, f in zip(row[0], row[1] or [])}
                  if row and row[0] else {})
        self._mce_cache = (version, common)
        return common

    _MCE_SQL = """select s.most_common_elems::text::text[], s.most_common_elem_freqs
                  from pg_stats s where s.schemaname = current_schema()
                  and s.tablename = 'papers' and s.attname = 'tsv'"""

    def _analyze_if_stale(self, n: int, *, analyzed: str | None = None, missing: bool = False) -> bool:
        """ANALYZE papers when a store past TERM_COUNT_CAP papers has grown by ANALYZE_AFTER since
        the store last ran it (`analyzed`: meta's papers_analyzed_n, None when it never has), or
        its statistics are `missing`; True when it ran. One replica at a time (a transaction's
        advisory lock: the others go on with the statistics there are); a failure is logged,
        never raised: the write it follows is in."""
        try:
            if n <= TERM_COUNT_CAP or not (missing or analyzed is None or n > (1 + ANALYZE_AFTER) * int(analyzed)):
                return False
            with self.transaction() as conn:
                if not conn.execute("select pg_try_advisory_xact_lock(hashtext(current_schema() "
                                    "|| '.papers: analyze'))").fetchone()[0]:
                    return False
                conn.execute("analyze papers")
                conn.execute("insert into meta(key, value) values ('papers_analyzed_n', %s) "
                             "on conflict(key) do update set value = excluded.value", [str(n)])
            return True
        except (psycopg.Error, PoolTimeout) as e:
            log.warning("could not ANALYZE papers (keyword search estimates common words less well): %s", e)
            return False

    def term_stats(self, words: Iterable[str], *, counts: bool = True) -> dict[str, tuple[str, int]]:
        """word -> (the term the index keeps it under, how many papers hold it).

        The term is the english stemmer's lexeme ('Videos' -> 'video'), '' when the
        parser keeps nothing of the word (a stopword, punctuation; its count is then 0).
        counts=False skips the counting (every count 0): one index probe per word saved,
        for callers that only need the terms.
        """
        words = list(dict.fromkeys(words))
        if not words:
            return {}
        out = {w: ("", 0) for w in words}  # a word with a NUL holds nothing the index keeps
        words = _storable(words)
        rows = self._tuples(
            """select t.word, coalesce((select u.lexeme from unnest(to_tsvector('english', t.word)) u
                                        order by u.positions[1], u.lexeme limit 1), '')
               from unnest(%s::text[]) as t(word)""", [words])
        out.update({word: (term, 0) for word, term in rows})
        terms = {term for _, term in rows if term}
        if not counts or not terms:
            return out
        # Past TERM_COUNT_CAP papers a common word takes ANALYZE's estimate, and is not counted.
        version, n, _ = self._stats_row()
        common = self._common_lexemes(version, n) if n > TERM_COUNT_CAP else {}
        todo = sorted(terms - set(common))
        counted = dict(self._tuples(
            """select t.term, (select count(*) from (select from papers p
                                                  where p.tsv @@ quote_literal(t.term)::tsquery limit %s) c)
               from unnest(%s::text[]) as t(term)""", [TERM_COUNT_CAP, todo])) if todo else {}
        # A word counted up to the cap, yet not among the most common, holds as many papers as
        # PostgreSQL's planner guesses for it: half the rarest most-common word's (tsmatchsel).
        floor = min(common.values(), default=0) // 2
        for word, term in rows:
            if term:  # a word is either counted (up to the cap) or a common one, estimated
                df = counted[term] if term in counted else common[term]
                out[word] = (term, int(max(df, floor) if df >= TERM_COUNT_CAP else df))
        return out

    # -- summaries cache -----------------------------------------------------
    def get_summary(self, content_hash: str, backend: str) -> dict | None:
        row = self._one("select data from summaries where content_hash = %s and backend = %s",
                        [content_hash, backend])
        return json.loads(row[0]) if row else None

    def get_summaries(self, content_hashes: Iterable[str], backend: str) -> dict[str, dict]:
        """content hash -> cached summary, for those of these hashes the cache holds (one query)."""
        return {h: json.loads(data) for h, data in self._tuples(
            "select content_hash, data from summaries where backend = %s and content_hash = any(%s)",
            [backend, _storable(dict.fromkeys(content_hashes))])}

    def put_summary(self, content_hash: str, backend: str, data: dict, *, now: float) -> bool:
        """Cache a summary; False (not cached) when another writer holds the row or no
        connection is free, so a reply never waits on the cache."""
        try:
            with self.pool.connection(timeout=CACHE_BUSY_MS / 1000) as conn, conn.transaction():
                conn.execute(f"set local lock_timeout = {CACHE_BUSY_MS}")
                conn.execute(
                    "insert into summaries(content_hash, backend, data, created_at) values (%s, %s, %s, %s) "
                    "on conflict(content_hash, backend) do update set data = excluded.data, "
                    "created_at = excluded.created_at",
                    [content_hash, backend, json.dumps(data, ensure_ascii=False), now])
            return True
        except (PoolTimeout, *_BUSY):
            return False

    # -- maintenance ---------------------------------------------------------
    def integrity_ok(self) -> bool:
        """The server answers and every known migration is applied (PostgreSQL checks its own pages)."""
        applied, known = self.schema_version()
        return applied == known

    def backup_to(self, target: str | Path, *, force: bool = False) -> BackupResult:
        """Not this process's job on PostgreSQL: the server's own tools make consistent copies."""
        raise StoreError(
            f"paperclub backup copies SQLite files; back up PostgreSQL with pg_dump, e.g. "
            f"`pg_dump -Fc -f {target} '{self.path}'` (restore with pg_restore)")

    # -- paper of the day: interests, schedules, posts ------------------------
    _interest = staticmethod(interest_from_row)

    def add_interest(self, channel: str, text: str, added_by: str | None, *, model: str,
                     vector, paper_id: str | None = None, now: float) -> int:
        """Store one channel interest with its embedding; returns its id."""
        with self.transaction() as conn:
            return conn.execute(
                "insert into interests(channel, text, paper_id, added_by, model, vector, created_at) "
                "values (%s, %s, %s, %s, %s, %s, %s) returning id",
                [channel, text, paper_id, added_by, model, _blob(vector), now]).fetchone()[0]

    def interests(self, channel: str) -> list[dict]:
        """A channel's interests, oldest first (the order /paper interests numbers them in)."""
        return [self._interest(r) for r in self._rows(
            "select * from interests where channel = %s order by created_at, id", [channel])]

    def remove_interest(self, channel: str, interest_id: int) -> dict | None:
        """Delete one interest of this channel; returns it, or None if there was none."""
        with self.transaction() as conn, conn.cursor(row_factory=dict_row) as cur:
            row = cur.execute("delete from interests where channel = %s and id = %s returning *",
                              [channel, interest_id]).fetchone()
            return self._interest(row) if row else None

    def set_interest_vectors(self, rows: Iterable[tuple[int, str, np.ndarray]]) -> None:
        """Replace interest embeddings (id, model, vector) after a model change."""
        with self.transaction() as conn, conn.cursor() as cur:
            cur.executemany("update interests set model = %s, vector = %s where id = %s",
                            [(model, _blob(v), iid) for iid, model, v in rows])

    def set_schedule(self, channel: str, *, hour: int, minute: int, tz: str, days: str,
                     set_by: str | None, now: float) -> None:
        """Create or replace a channel's post schedule."""
        with self.transaction() as conn:
            conn.execute(
                "insert into schedules(channel, hour, minute, tz, days, set_by, updated_at) "
                "values (%s, %s, %s, %s, %s, %s, %s) on conflict(channel) do update set "
                "hour = excluded.hour, minute = excluded.minute, tz = excluded.tz, days = excluded.days, "
                "set_by = excluded.set_by, updated_at = excluded.updated_at",
                [channel, hour, minute, tz, days, set_by, now])
            self._bump(conn, "schedules_version")

    def delete_schedule(self, channel: str) -> bool:
        """Turn a channel's daily post off; False when it had none."""
        with self.transaction() as conn:
            gone = conn.execute("delete from schedules where channel = %s", [channel]).rowcount
            if gone:
                self._bump(conn, "schedules_version")
            return bool(gone)

    def get_schedule(self, channel: str) -> dict | None:
        rows = self._rows("select * from schedules where channel = %s", [channel])
        return rows[0] if rows else None

    def schedules(self) -> list[dict]:
        """Every channel's schedule (the scheduler is rebuilt from these)."""
        return self._rows("select * from schedules order by channel")

    def schedules_version(self) -> int:
        """Changes whenever any schedule changes; a running scheduler compares it."""
        return int(self.get_meta("schedules_version", "0"))

    # -- reactions as feedback: the log, the papers behind messages, reading lists --
    def record_message_paper(self, channel: str, ts: str, paper_id: str, *, kind: str,
                             posted_by: str | None = None, now: float) -> bool:
        """Remember which paper one of the bot's messages shows (shares); False if already known."""
        with self.transaction() as conn:
            return conn.execute(
                "insert into message_papers(channel, ts, paper_id, kind, posted_by, posted_at) "
                "values (%s, %s, %s, %s, %s, %s) on conflict(channel, ts) do nothing",
                [channel, ts, paper_id, kind, posted_by, now]).rowcount == 1

    def paper_for_message(self, channel: str, ts: str) -> dict | None:
        """{paper_id, kind, posted_at} for a bot message (daily post, its abstract reply, a share)."""
        row = self._one("select paper_id, posted_at from posts where channel = %s "
                        "and (ts = %s or abstract_ts = %s) and paper_id is not null", [channel, ts, ts])
        if row:
            return {"paper_id": row[0], "kind": "daily", "posted_at": row[1]}
        row = self._one("select paper_id, kind, posted_at from message_papers where channel = %s and ts = %s",
                        [channel, ts])
        return {"paper_id": row[0], "kind": row[1], "posted_at": row[2]} if row else None

    def channel_messages(self, channel: str, *, since: float, until: float) -> list[dict]:
        """The bot's paper messages in a channel from [since, until), in posting order.

        A daily post counts by its date as well as its posted_at, so a post made for a
        date (a catch-up, a test clock) lands in that date's window.
        """
        daily = self._tuples(
            "select ts, paper_id, posted_at, day, abstract_ts from posts where channel = %s "
            "and status = 'posted' and paper_id is not null and ts is not null "
            "and ((posted_at >= %s and posted_at < %s) or (day >= %s and day <= %s))",
            [channel, since, until, utc_day(since), utc_day(until)])
        shares = self._tuples(
            "select ts, paper_id, kind, posted_at, posted_by from message_papers where channel = %s "
            "and posted_at >= %s and posted_at < %s", [channel, since, until])
        return channel_message_rows(list(daily), list(shares))

    _REACTION_COLUMNS = ("event_id", "channel", "message_ts", "paper_id", "user", "emoji", "base", "action",
                         "event_ts", "event_time", "recorded_at")

    def add_reaction(self, row: dict) -> bool:
        """Append one reaction event to the log; False when its event_id is already there."""
        cols = self._REACTION_COLUMNS
        names = ", ".join('"user"' if c == "user" else c for c in cols)
        with self.transaction() as conn:
            return conn.execute(
                f"insert into reactions({names}) values ({', '.join(['%s'] * len(cols))}) "
                "on conflict(event_id) do nothing", [row.get(c) for c in cols]).rowcount == 1

    def reactions(self, *, channel: str | None = None, user: str | None = None,
                  paper_ids: Iterable[str] | None = None, before: float | None = None) -> list[dict]:
        """Reaction log rows (added and removed), in the order they happened."""
        sql, args = "select * from reactions where true", []
        if channel is not None:
            sql += " and channel = %s"
            args.append(channel)
        if user is not None:
            sql += ' and "user" = %s'
            args.append(user)
        if before is not None:
            sql += " and event_ts < %s"
            args.append(before)
        if paper_ids is not None:
            ids = list(dict.fromkeys(paper_ids))
            if not ids:
                return []
            sql += " and paper_id = any(%s)"
            args.append(ids)
        return self._rows(sql + " order by event_ts, id", args)

    def reaction_channels(self) -> list[str]:
        """Channels with at least one logged reaction."""
        return [r[0] for r in self._tuples("select distinct channel from reactions order by channel")]

    def save_paper(self, user: str, paper_id: str, *, source: str = "button", now: float) -> bool:
        """Put a paper on a member's reading list; False when it was already there.

        A Save click makes the entry the member's own choice ("button"), so taking a
        👀 off later does not remove it.
        """
        with self.transaction() as conn:
            if conn.execute('insert into saved_papers("user", paper_id, source, saved_at) '
                            "values (%s, %s, %s, %s) on conflict do nothing",
                            [user, paper_id, source, now]).rowcount == 1:
                return True
            if source == "button":
                conn.execute("update saved_papers set source = 'button' "
                             "where \"user\" = %s and paper_id = %s and source != 'button'", [user, paper_id])
            return False

    def unsave_paper(self, user: str, paper_id: str, *, source: str | None = None) -> bool:
        """Take a paper off a reading list (only if it was saved that way, when `source` is given)."""
        sql, args = 'delete from saved_papers where "user" = %s and paper_id = %s', [user, paper_id]
        if source is not None:
            sql += " and source = %s"
            args.append(source)
        with self.transaction() as conn:
            return conn.execute(sql, args).rowcount > 0

    def saved_papers(self, user: str) -> list[dict]:
        """A member's reading list, newest first: {paper_id, source, saved_at}."""
        return self._rows('select paper_id, source, saved_at from saved_papers where "user" = %s '
                          "order by saved_at desc, seq desc", [user])

    # -- the forgotten-members list (made by m005; see forget_user for its restore limit) ----
    def forgotten_hashes(self) -> set[str]:
        """Hashes (store.text.member_hash) of every member who ran forget-me here."""
        return {r[0] for r in self._tuples("select hash from forgotten_members")}

    def _remember_forgotten(self, conn, user: str) -> None:
        # In the database, in forget-me's own transaction. Unlike SQLite's file beside the
        # database, a pg_dump restore from before the request drops the entry too, unless the
        # operator keeps the list across the restore. forgotten_at is the server's clock.
        conn.execute("insert into forgotten_members(hash) values (%s) on conflict do nothing",
                     [member_hash(user)])

    # -- sources: cursors and health, announcements, channel feeds ---------------------
    def source_state(self, source: str) -> dict | None:
        rows = self._rows("select * from source_state where source = %s", [source])
        return source_from_row(rows[0]) if rows else None

    def source_states(self) -> list[dict]:
        return [source_from_row(r) for r in self._rows("select * from source_state order by source")]

    def update_source(self, source: str, *, now: float, cursor: dict | None = None,
                      ok: bool | None = None, error: str | None = None) -> None:
        """Set a source's cursor and/or record a success (clears the failure) or an error."""
        with self.transaction() as conn:
            conn.execute("insert into source_state(source, cursor, updated_at) values (%s, '{}', %s) "
                         "on conflict do nothing", [source, now])
            if cursor is not None:
                conn.execute("update source_state set cursor = %s, updated_at = %s where source = %s",
                             [json.dumps(cursor, sort_keys=True), now, source])
            if ok:
                conn.execute("update source_state set last_success = %s, failing_since = null, updated_at = %s "
                             "where source = %s", [now, now, source])
            if error is not None:
                conn.execute("update source_state set last_error = %s, last_error_at = %s, "
                             "failing_since = coalesce(failing_since, %s), updated_at = %s where source = %s",
                             [error[:500], now, now, now, source])

    def mark_announced(self, rows: Iterable[tuple[str, str, float]]) -> int:
        """(paper id, source, announced at): the first announcement per source is kept."""
        rows = list(rows)
        if not rows:
            return 0
        ids, sources, times = zip(*rows)
        with self.transaction() as conn:
            # One statement (executemany's rowcount is not a total); DO NOTHING also keeps the
            # first of two rows for one (paper, source) in the same batch, as SQLite's OR IGNORE.
            return conn.execute(
                "insert into paper_announcements(paper_id, source, announced_at) "
                "select paper_id, source, announced_at from unnest(%s::text[], %s::text[], %s::double precision[]) "
                "with ordinality as r(paper_id, source, announced_at, n) order by n "
                "on conflict do nothing", [list(ids), list(sources), [float(t) for t in times]]).rowcount

    def announced_since(self, since: float, sources: Iterable[str] | None = None) -> dict[str, float]:
        """Paper id -> its earliest announcement at or after `since` (by these sources, if given)."""
        sql, args = "select paper_id, min(announced_at) from paper_announcements where announced_at >= %s", [since]
        if sources is not None:
            sources = list(sources)
            if not sources:
                return {}
            sql += " and source = any(%s)"
            args.append(_storable(sources))
        return dict(self._tuples(sql + " group by paper_id", args))

    def add_feed(self, channel: str, kind: str, target: str, added_by: str | None, *, now: float) -> int | None:
        """The new feed's id; None when the channel already follows it."""
        with self.transaction() as conn:
            row = conn.execute("insert into feeds(channel, kind, target, added_by, created_at) "
                               "values (%s, %s, %s, %s, %s) on conflict do nothing returning id",
                               [channel, kind, target, added_by, now]).fetchone()
            return row[0] if row else None

    def feeds(self, channel: str | None = None) -> list[dict]:
        if channel is None:
            return self._rows("select * from feeds order by id")
        return self._rows("select * from feeds where channel = %s order by id", [channel])

    def remove_feed(self, channel: str, feed_id: int) -> dict | None:
        with self.transaction() as conn, conn.cursor(row_factory=dict_row) as cur:
            return cur.execute("delete from feeds where channel = %s and id = %s returning *",
                               [channel, feed_id]).fetchone()

    # -- the reading group (store/club.py holds the logic) -----------------------------

    @staticmethod
    def _lock(conn, *name: str) -> None:
        """A transaction-level advisory lock on a name (released with the transaction, never held
        by a pooled session): writers of the same name queue, as SQLite's one writer does."""
        conn.execute("select pg_advisory_xact_lock(hashtext(%s))", [json.dumps(name)])

    def set_club(self, channel: str, *, set_by: str | None, now: float, **fields) -> None:
        """Create or change a channel's club (fields from CLUB_FIELDS)."""
        unknown = set(fields) - set(CLUB_FIELDS)
        if unknown:
            raise StoreError(f"unknown club fields {sorted(unknown)}")
        # Column names below come only from CLUB_FIELDS (checked above).
        with self.transaction() as conn:
            # Two first set-ups of one channel at once: the second waits, then updates (as SQLite's
            # single writer), instead of failing on the primary key.
            self._lock(conn, "club", channel)
            if conn.execute("select 1 from clubs where channel = %s", [channel]).fetchone():
                sets = "".join(f"{k} = %s, " for k in fields)
                conn.execute(f"update clubs set {sets}set_by = %s, updated_at = %s where channel = %s",
                             [*fields.values(), set_by, now, channel])
            else:
                cols = ["channel", *fields, "set_by", "updated_at"]
                conn.execute(f"insert into clubs({', '.join(cols)}) values ({', '.join(['%s'] * len(cols))})",
                             [channel, *fields.values(), set_by, now])

    def get_club(self, channel: str) -> dict | None:
        rows = self._rows("select * from clubs where channel = %s", [channel])
        return rows[0] if rows else None

    def clubs(self) -> list[dict]:
        return self._rows("select * from clubs where active = 1 order by channel")

    def set_club_member(self, channel: str, user: str, *, active: bool, now: float) -> bool:
        """Join (active) or leave the rotation; False when nothing changed."""
        with self.transaction() as conn:
            return conn.execute(
                'insert into club_members(channel, "user", active, joined_at) values (%s, %s, %s, %s) '
                'on conflict(channel, "user") do update set active = excluded.active '
                "where club_members.active != excluded.active", [channel, user, int(active), now]).rowcount == 1

    def club_members(self, channel: str, *, active_only: bool = True) -> list[dict]:
        sql = "select * from club_members where channel = %s" + (" and active = 1" if active_only else "")
        return self._rows(sql + ' order by joined_at, "user"', [channel])

    def add_club_away(self, channel: str, user: str, start: str, end: str, *, now: float) -> int:
        with self.transaction() as conn:
            return conn.execute('insert into club_aways(channel, "user", start, "end", added_at) '
                                "values (%s, %s, %s, %s, %s) returning id",
                                [channel, user, start, end, now]).fetchone()[0]

    def club_aways(self, channel: str) -> list[dict]:
        return self._rows("select * from club_aways where channel = %s order by start, id", [channel])

    def put_club_session(self, channel: str, date: str, *, now: float, **fields) -> None:
        """Create or update one session row (state, paper_id, presenter, thread_ts, ...)."""
        unknown = set(fields) - set(SESSION_FIELDS)
        if unknown:
            raise StoreError(f"unknown session fields {sorted(unknown)}")
        with self.transaction() as conn:
            conn.execute("insert into club_sessions(channel, date, state, updated_at) "
                         "values (%s, %s, 'planned', %s) on conflict do nothing", [channel, date, now])
            if fields:  # names checked against SESSION_FIELDS above
                sets = ", ".join(f"{k} = %s" for k in fields)
                conn.execute(f"update club_sessions set {sets}, updated_at = %s where channel = %s and date = %s",
                             [*fields.values(), now, channel, date])

    def get_club_session(self, channel: str, date: str) -> dict | None:
        rows = self._rows("select * from club_sessions where channel = %s and date = %s", [channel, date])
        return rows[0] if rows else None

    def club_sessions(self, channel: str) -> list[dict]:
        return self._rows("select * from club_sessions where channel = %s order by date", [channel])

    def add_nomination(self, channel: str, session: str, paper_id: str, user: str, *, now: float) -> bool:
        """Put a paper on a session's list; False when it is already there (the first nominator keeps it)."""
        with self.transaction() as conn:
            return conn.execute('insert into club_nominations(channel, session, paper_id, "user", nominated_at) '
                                "values (%s, %s, %s, %s, %s) on conflict do nothing",
                                [channel, session, paper_id, user, now]).rowcount == 1

    def nominations(self, channel: str, session: str) -> list[dict]:
        return self._rows("select * from club_nominations where channel = %s and session = %s "
                          "order by nominated_at, paper_id", [channel, session])

    def add_vote(self, channel: str, session: str, user: str, paper_id: str, *, limit: int, now: float) -> str:
        """One approval vote: 'added', 'already' (idempotent) or 'full' (the member used `limit`)."""
        with self.transaction() as conn:
            # A member's votes in a session are counted under a transaction-level advisory lock on
            # (channel, session, user), so two clicks at once cannot both slip under the limit.
            self._lock(conn, "club_vote", channel, session, user)
            if conn.execute('select 1 from club_votes where channel = %s and session = %s and "user" = %s '
                            "and paper_id = %s", [channel, session, user, paper_id]).fetchone():
                return "already"
            used = conn.execute('select count(*) from club_votes where channel = %s and session = %s '
                                'and "user" = %s', [channel, session, user]).fetchone()[0]
            if used >= limit:
                return "full"
            conn.execute('insert into club_votes(channel, session, "user", paper_id, voted_at) '
                         "values (%s, %s, %s, %s, %s)", [channel, session, user, paper_id, now])
            return "added"

    def clear_votes(self, channel: str, session: str, user: str) -> int:
        with self.transaction() as conn:
            return conn.execute('delete from club_votes where channel = %s and session = %s and "user" = %s',
                                [channel, session, user]).rowcount

    def club_votes(self, channel: str, session: str) -> list[dict]:
        return self._rows("select * from club_votes where channel = %s and session = %s "
                          'order by voted_at, "user", paper_id', [channel, session])
