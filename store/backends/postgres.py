"""PostgresStore: the PostgreSQL backend of the Store protocol (psycopg 3 + psycopg_pool).

Every public method means what SQLiteStore's does (tests/test_store.py runs both) and is
one unit of work: reads run on an autocommit connection from the pool, writes in one
transaction. Claims are compare-and-swap statements (INSERT ... ON CONFLICT DO NOTHING,
UPDATE ... WHERE claimed_by = old), which READ COMMITTED re-checks after waiting for a
row lock, so exactly one caller wins across any number of processes. The schema is in
postgres_migrations. psycopg's errors stop here: lock timeouts, deadlocks, serialization
failures and an exhausted pool are StoreBusy, a write the server refuses as read-only (a
standby) ReadOnlyStorage, anything else StoreError.
"""
from __future__ import annotations

import json
import logging
import re
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import numpy as np
import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool, PoolTimeout

from ..base import BackupResult
from ..errors import NewerSchema, ReadOnlyStorage, StoreBusy, StoreError
from ..text import member_hash
from .postgres_migrations import MIGRATIONS, MIGRATIONS_TABLE
from .conninfo import redact
from .rows import JSON_FIELDS as _JSON_FIELDS, newer_schema_line
from .shared import DIALECT, SharedTables, errors_stay_inside
from .shared_sql import storable as _storable

LOCK_TIMEOUT_MS = 15_000  # as SQLite's busy timeout: a writer waits this long for a row lock
MIGRATE_LOCK = "hashtext('paperclub-migrate')"  # the advisory lock migrate() holds
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


# What a server that is still starting (or briefly full) answers: worth waiting for, unlike
# a missing database or role, or a wrong password, which no amount of waiting fixes.
_NOT_YET = ("starting up", "not yet accepting connections", "in recovery mode", "shutting down",
            "too many clients", "connection slots are reserved")
_FAILED_AT = re.compile(r'^(?:connection failed: )?(?:connection to server (?:at|on) .*? failed: )?')


def parse_conninfo(url: str) -> dict[str, str]:
    """The connection string's parameters as libpq reads them; StoreError (no password in it)
    for a string libpq cannot read."""
    try:
        return conninfo_to_dict(url)
    except psycopg.Error as e:
        raise StoreError(redact(url, f"bad PostgreSQL connection string {url}: {str(e).strip()}. Use "
                                     "postgresql://USER:PASSWORD@HOST:PORT/DB or host=... dbname=...")) from None


def server_address(url: str) -> str:
    """host:port of the server(s) a connection string names (PostgreSQL's defaults filled in)."""
    params = parse_conninfo(url)
    hosts = (params.get("host") or params.get("hostaddr") or "").split(",")
    ports = str(params.get("port") or 5432).split(",")
    ports += ports[-1:] * (len(hosts) - len(ports))  # one port serves every host
    if hosts == [""]:
        return f"the local socket (port {ports[0]})"
    return ", ".join(f"{h}:{p}" for h, p in zip(hosts, ports))


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
            raise StoreError(redact(url, f"PostgreSQL at {server_address(url)} refused the connection: "
                                         f"{refusal}")) from None
        return redact(url, reason)


def _store_error(error: BaseException, where: str, opened_read_only: bool = False) -> StoreError:
    if isinstance(error, pg_errors.ReadOnlySqlTransaction):
        # A standby, a read-only role, or default_transaction_read_only: "cannot read" would mislead.
        # ReadOnlyStorage, as SQLite's read-only file: the bot tells the member their write must wait.
        if opened_read_only:
            return ReadOnlyStorage(f"cannot write the database {where}: it was opened read-only "
                                   "(written by a newer paperclub?)")
        return ReadOnlyStorage(f"database {where} is read-only: paperclub writes to its database (posts, "
                               "reactions, new papers). Point PAPERCLUB_DB at the primary server, or at a "
                               f"role that may write. The server said: {error}")
    if isinstance(error, PoolTimeout):
        return StoreBusy(f"database {where} is busy (no free connection): {error}")
    if isinstance(error, _BUSY):
        return StoreBusy(f"database {where} is busy (another writer held a lock too long): {error}")
    if isinstance(error, psycopg.OperationalError):
        return StoreError(f"cannot reach database {where}: {error}")
    return StoreError(f"cannot read database {where}: {error}")


def _blob(vector) -> bytes:
    return np.asarray(vector, dtype=np.float32).tobytes()


def _vec(blob) -> np.ndarray | None:
    return np.frombuffer(bytes(blob), dtype=np.float32) if blob is not None else None


@errors_stay_inside((psycopg.Error, PoolTimeout), lambda store, e: _store_error(e, store.path, store.read_only),
                    raw=("transaction", "connection"))
class PostgresStore(SharedTables):
    """The paperclub database in PostgreSQL; safe to share across threads and processes."""

    backend = "postgresql"
    DIALECT = DIALECT  # what this backend writes its own way; the rest is SharedTables
    _PARAM = "%s"
    _SEQ = "seq"  # an identity column where SQLite orders by rowid
    _CHUNK = None  # a list of values goes as one array
    _EMPTY_BLOB = "''::bytea"
    _PAPER_COLUMNS = _PAPER_SELECT
    _FOR_UPDATE = " for update"

    def _in(self, values: list) -> tuple[str, list]:
        return " = any(?)", [_storable(values)]

    def _lock(self, conn, *name: str) -> None:
        """A transaction-level advisory lock on a name (released with the transaction, never held
        by a pooled session): writers of the same name queue, as SQLite's one writer does."""
        conn.execute("select pg_advisory_xact_lock(hashtext(%s))", [json.dumps(name)])

    def __init__(self, url: str, *, migrate: bool = True, must_exist: bool = False,
                 read_only: bool = False, max_size: int = POOL_MAX,
                 migrate_wait: float = LOCK_TIMEOUT_MS / 1000):
        self.url = url
        self.path = redact(url)
        # How long migrate() waits for another process's migration (a replica starting first).
        self.migrate_wait = migrate_wait
        # read_only: every session is read-only at the server (a database from a newer
        # paperclub is read, never written); nothing is migrated and cache writes are skipped.
        self.read_only = read_only
        if read_only:
            migrate, must_exist = False, True
        self._mce_cache: tuple[int, dict[str, int]] | None = None  # (papers_version, lexeme -> papers)
        # lock_timeout joins any options the URL has (a test's search_path, say).
        params = parse_conninfo(url)
        params["options"] = f"{params.get('options', '')} -c lock_timeout={LOCK_TIMEOUT_MS}".strip()
        if read_only:
            params["options"] += " -c default_transaction_read_only=on"
        conninfo = make_conninfo("", **params)
        try:  # one direct try first: the server's own reason (no such role...) in one line, at once
            psycopg.connect(conninfo, connect_timeout=CONNECT_TIMEOUT_S).close()
        except psycopg.Error as e:
            reason = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
            raise StoreError(redact(url, f"cannot reach PostgreSQL at {self.path}: {reason}")) from None
        self.pool = ConnectionPool(
            conninfo, min_size=1, max_size=max_size, open=False, name="paperclub",
            kwargs={"autocommit": True, "connect_timeout": CONNECT_TIMEOUT_S},
            timeout=LOCK_TIMEOUT_MS / 1000, check=self._check_connection)
        try:
            self.pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)
        except PoolTimeout as e:
            self.pool.close()
            raise StoreError(f"cannot reach PostgreSQL at {self.path} within {CONNECT_TIMEOUT_S} s") from e
        if must_exist and not self._has_schema():
            self.pool.close()
            raise StoreError(f"no database at {self.path} (no paperclub tables there)")
        if migrate:
            try:
                self.migrate()
                self.reapply_forgotten()
            except BaseException:  # a standby refuses the migration: its pool is no one's to close
                self.pool.close()
                raise

    # -- connections -------------------------------------------------------
    def _check_connection(self, conn: psycopg.Connection) -> None:
        """Try a pooled connection before lending it (one empty round trip). A server restart or
        failover ends every connection the pool holds: unchecked, each would fail one command
        after the server is back. On the first dead one the pool's idle ones are all checked
        and replaced, so the caller waits for one new connection, not the pool's backoff per
        dead connection (1, 2, 4 ... s: 15 s for eight)."""
        try:
            ConnectionPool.check_connection(conn)
        except psycopg.Error:
            self.pool.check()
            raise

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

    def _stream(self, sql: str, args: Sequence, batch: int) -> Iterator[list[tuple]]:
        # A server-side cursor streams a million rows without holding them all in memory.
        with self.connection() as conn, conn.transaction(), conn.cursor(name="stream", binary=True) as cur:
            cur.itersize = batch
            cur.execute(sql, args)
            while rows := cur.fetchmany(batch):
                yield rows

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
        """Apply this version's migrations; a database from a newer paperclub is refused, untouched."""
        with self.transaction() as conn:
            self._take_migration_lock(conn)
            conn.execute(f"create table if not exists {MIGRATIONS_TABLE} "
                         "(name text primary key, applied_at timestamptz not null default now())")
            done = {r[0] for r in conn.execute(f"select name from {MIGRATIONS_TABLE}")}
            newer = newer_schema_line(self.path, done, [name for name, _ in MIGRATIONS])
            if newer:  # raised inside the transaction: even the create above is rolled back
                raise NewerSchema(newer)
            for name, statements in MIGRATIONS:
                if name in done:
                    continue
                for sql in statements:
                    conn.execute(sql)
                conn.execute(f"insert into {MIGRATIONS_TABLE}(name) values (%s)", [name])

    def _take_migration_lock(self, conn) -> None:
        """The schema's migration lock, waited for up to migrate_wait seconds when another process
        holds it; StoreBusy, saying so, when that process is still migrating after the wait."""
        # A transaction-level advisory lock: replicas starting together migrate one at a
        # time, and the lock goes with the transaction (never held by a pooled session).
        if conn.execute(f"select pg_try_advisory_xact_lock({MIGRATE_LOCK})").fetchone()[0]:
            return
        # Another replica is migrating: a big migration (an index over a million papers) takes
        # minutes, far past the lock_timeout a row lock gets.
        log.info("another paperclub process is migrating the schema of %s: waiting for it to "
                 "finish (up to %.0f s, PAPERCLUB_DB_WAIT_SECONDS)", self.path, self.migrate_wait)
        wait_ms, got = round(self.migrate_wait * 1000), False
        if wait_ms >= 1:  # (lock_timeout 0 would wait for ever)
            conn.execute("select set_config('lock_timeout', %s, true)", [f"{wait_ms}ms"])
            try:
                conn.execute(f"select pg_advisory_xact_lock({MIGRATE_LOCK})")
                got = True
            except pg_errors.LockNotAvailable:
                pass
        if not got:
            raise StoreBusy(f"another paperclub process has been migrating the schema of {self.path} "
                            f"for all of the {self.migrate_wait:.0f} s this one waited: it gives up. "
                            "Start it again once that migration is done (Docker Compose's restart "
                            "policy does); PAPERCLUB_DB_WAIT_SECONDS sets how long to wait.")
        conn.execute("select set_config('lock_timeout', %s, true)", [f"{LOCK_TIMEOUT_MS}ms"])
        log.info("the other process's migration of %s is done: going on", self.path)

    def newer_schema(self) -> str | None:
        """One line naming both versions when a newer paperclub migrated this database; else None."""
        if not self._has_schema():
            return None
        return newer_schema_line(self.path, {r[0] for r in self._tuples(f"select name from {MIGRATIONS_TABLE}")},
                                 [name for name, _ in MIGRATIONS])

    def schema_version(self) -> tuple[int, int]:
        """(applied, known) migration counts; equal when the database is current."""
        applied = {r[0] for r in self._tuples(f"select name from {MIGRATIONS_TABLE}")}
        known = {name for name, _ in MIGRATIONS}
        if applied - known:
            raise NewerSchema(self.newer_schema())
        return len(applied & known), len(known)

    # -- meta ----------------------------------------------------------------




    # -- papers --------------------------------------------------------------









    # -- identity keys (ingest) ---------------------------------------------





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
            # Read-only (opened so, or the server is: a standby): counted for this read, kept by the next writer.
            writable = not self.read_only and conn.execute("show transaction_read_only").fetchone()[0] == "off"
            if writable:
                conn.execute("lock table papers in share mode")
            n, total = conn.execute("select count(*), coalesce(sum(doclen), 0) from papers").fetchone()
            if writable:
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
            if self.read_only or n <= TERM_COUNT_CAP or not (missing or analyzed is None or n > (1 + ANALYZE_AFTER) * int(analyzed)):
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


    def put_summary(self, content_hash: str, backend: str, data: dict, *, now: float) -> bool:
        """Cache a summary; False (not cached) when another writer holds the row, no connection
        is free or the server is read-only (a standby), so a reply never waits on the cache."""
        return self._cache_write(self._SUMMARY_UPSERT,
                                [content_hash, backend, json.dumps(data, ensure_ascii=False), now])

    def _cache_write(self, sql: str, params: Sequence) -> bool:
        """Run one write a reply may skip (a cache); False, not an error, when a newer paperclub's
        database is open read-only, the server is read-only, no connection is free or a lock is held
        past CACHE_BUSY_MS: the reply goes on without it."""
        if self.read_only:
            return False
        try:
            with self.pool.connection(timeout=CACHE_BUSY_MS / 1000) as conn, conn.transaction():
                conn.execute(f"set local lock_timeout = {CACHE_BUSY_MS}")
                conn.execute(self._q(sql), params)
            return True
        except (PoolTimeout, pg_errors.ReadOnlySqlTransaction, *_BUSY):
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










    # -- reactions as feedback: the log, the papers behind messages, reading lists --











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








    # -- the reading group (store/club.py holds the logic) -----------------------------
















