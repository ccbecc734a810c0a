"""Copy a SQLite store into PostgreSQL (`paperclub migrate --to postgresql://...`).

Table-driven, so tables added to both backends later (feeds, clubs) are copied too:
every table of the SQLite file but its migration log and FTS shadow tables, with the
columns both schemas have. All rows go in one PostgreSQL transaction, and a row whose
primary key is already there is left alone: an interrupted copy leaves the target as it
was, a re-run adds only what is missing, and nothing the bot already wrote on PostgreSQL
is ever overwritten. Then each table is verified: row counts and an order-independent checksum of
every row (the two engines sort text differently) must match on both sides.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Iterable

from psycopg import sql

from ..errors import StoreError
from .conninfo import is_server_database, redact
from .postgres import CORPUS_KEYS, PostgresStore
from .sqlite import SQLiteStore

BATCH = 2000
# Parents first (foreign keys); every other table follows in name order.
FIRST = ("papers",)


@dataclass(frozen=True)
class TableCopy:
    """One table's copy: rows on each side and whether their checksums agree."""

    table: str
    source_rows: int
    target_rows: int
    checksum_ok: bool

    @property
    def ok(self) -> bool:
        return self.source_rows == self.target_rows and self.checksum_ok

    def __str__(self) -> str:
        verdict = "ok" if self.ok else "MISMATCH"
        return f"{self.table:<16} {self.source_rows:>8} rows -> {self.target_rows:>8}, checksum {verdict}"


def _canonical(value) -> object:
    """One value as both engines give it back: numbers as floats, bytes as hex."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    return value


class _Checksum:
    """An order-independent digest of rows: the sum of each row's hash, mod 2**128."""

    def __init__(self):
        self.total = 0
        self.rows = 0

    def add(self, row: Iterable) -> None:
        data = json.dumps([_canonical(v) for v in row], ensure_ascii=False, default=str).encode()
        self.total = (self.total + int.from_bytes(hashlib.sha256(data).digest()[:16], "big")) % (1 << 128)
        self.rows += 1


def _sqlite_tables(source: SQLiteStore) -> list[tuple[str, list[str], list[str]]]:
    """(table, columns, primary key columns) of every data table in the SQLite store."""
    names = [r[0] for r in source.db.execute(
        "select name from sqlite_master where type = 'table' and name not like 'sqlite_%' "
        "and name not like '\\_%' escape '\\' and name not like '%_fts%' and name <> 'forgotten_members' "
        "order by name")]
    out = []
    for name in names:
        info = list(source.db.execute(f"pragma table_info([{name}])"))
        cols = [r[1] for r in info]
        pk = [r[1] for r in sorted(info, key=lambda r: r[5]) if r[5]]
        out.append((name, cols, pk or cols))
    order = {name: i for i, name in enumerate(FIRST)}
    return sorted(out, key=lambda t: (order.get(t[0], len(order)), t[0]))


def _pg_columns(conn, table: str) -> dict[str, str]:
    """column -> 'ALWAYS' / 'BY DEFAULT' / '' (identity) for a table in the target's schema."""
    rows = conn.execute(
        "select column_name, coalesce(identity_generation, ''), is_generated from information_schema.columns "
        "where table_schema = current_schema() and table_name = %s", [table]).fetchall()
    return {name: ident for name, ident, generated in rows if generated != "ALWAYS"}


def copy_sqlite_to_postgres(source: SQLiteStore, target: PostgresStore) -> list[TableCopy]:
    """Copy every row of source missing from target (by primary key), then verify each table."""
    if source.schema_version() != target.schema_version():
        raise StoreError(f"schemas differ: SQLite {source.schema_version()}, "
                         f"PostgreSQL {target.schema_version()}; run both at this version first")
    tables = _sqlite_tables(source)
    plans = []
    with target.transaction() as conn:
        for table, cols, pk in tables:
            pg_cols = _pg_columns(conn, table)
            if not pg_cols:
                raise StoreError(f"the PostgreSQL schema has no table {table}; nothing was copied")
            shared = [c for c in cols if c in pg_cols]
            if not set(pk) <= set(shared):
                raise StoreError(f"table {table}: its key {pk} is not in the PostgreSQL schema")
            plans.append((table, shared))
            _copy_table(source, conn, table, shared, pk, identity=[c for c in shared if pg_cols[c]])
        # The forgotten list: SQLite's file and table (forgotten_hashes has both), carried over so
        # a backup restored later is still forgotten again at start-up; not verified as a table, as
        # PostgreSQL's may hold more (a re-run, a list the file had and the table not yet).
        for digest in sorted(source.forgotten_hashes()):
            conn.execute("insert into forgotten_members(hash) values (%s) on conflict do nothing", [digest])
        # BM25's corpus counters in meta are PostgreSQL's own, derived from papers: the copy may
        # have added papers, so they go, and the next search counts them again.
        conn.execute("delete from meta where key = any(%s)", [list(CORPUS_KEYS)])
    return [_verify(source, target, table, shared) for table, shared in plans]


def migrate_store(source_url: str, target_url: str) -> list[TableCopy]:
    """`paperclub migrate`: copy the SQLite store at source_url into the PostgreSQL at target_url."""
    from . import open_store

    if not is_server_database(target_url):
        raise StoreError(f"--to must be a postgresql:// URL (or a key=value connection string), "
                         f"not {redact(str(target_url))!r}")
    source = open_store(source_url, must_exist=True, migrate=False)
    if not isinstance(source, SQLiteStore):
        raise StoreError("the store to copy from must be a SQLite file (--db / PAPERCLUB_DB)")
    target = open_store(target_url)
    try:
        return copy_sqlite_to_postgres(source, target)
    finally:
        source.close()
        target.close()


def _copy_table(source: SQLiteStore, conn, table: str, cols: list[str], pk: list[str],
                identity: list[str]) -> None:
    ident = sql.Identifier
    conflict = sql.SQL("do nothing")
    always = _generated_always(conn, table, identity)
    statement = sql.SQL("insert into {} ({}) {} values ({}) on conflict ({}) {}").format(
        ident(table), sql.SQL(", ").join(map(ident, cols)),
        sql.SQL("overriding system value") if always else sql.SQL(""),
        sql.SQL(", ").join([sql.Placeholder()] * len(cols)),
        sql.SQL(", ").join(map(ident, pk)), conflict)
    select = f"select {', '.join(f'[{c}]' for c in cols)} from [{table}] order by rowid"
    cursor = source.db.execute(select)
    with conn.cursor() as cur:
        while True:
            batch = cursor.fetchmany(BATCH)
            if not batch:
                break
            cur.executemany(statement, batch)
        for column in identity:  # the next id the bot hands out follows the copied ones
            cur.execute(sql.SQL("select setval(pg_get_serial_sequence(%s, %s), "
                                "coalesce((select max({}) from {}), 0) + 1, false)").format(
                ident(column), ident(table)), [table, column])


def _generated_always(conn, table: str, identity: list[str]) -> bool:
    return any(_pg_columns(conn, table).get(c) == "ALWAYS" for c in identity)


def _verify(source: SQLiteStore, target: PostgresStore, table: str, cols: list[str]) -> TableCopy:
    ours, theirs = _Checksum(), _Checksum()
    for row in source.db.execute(f"select {', '.join(f'[{c}]' for c in cols)} from [{table}]"):
        ours.add(row)
    query = sql.SQL("select {} from {}").format(sql.SQL(", ").join(map(sql.Identifier, cols)),
                                                sql.Identifier(table))
    if table == "meta":  # but PostgreSQL's own counters (CORPUS_KEYS), which SQLite has no need of
        query += sql.SQL(" where key <> all({})").format(sql.Literal(list(CORPUS_KEYS)))
    with target.connection() as conn, conn.cursor(name=f"verify_{table}") as cur:
        # A named (server-side) cursor needs a transaction: stream the table without holding it all.
        with conn.transaction():
            cur.execute(query)
            for row in cur:
                theirs.add(row)
    return TableCopy(table, ours.rows, theirs.rows, ours.total == theirs.total)
