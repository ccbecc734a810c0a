"""The seam the shared SQL stands on: statements are written once, with `?`, in standard SQL
that SQLite (3.35+: RETURNING, ON CONFLICT ... DO, IS [NOT] DISTINCT FROM) and PostgreSQL both
run, and turned into the driver's placeholders here. A backend mixes in the shared tables
(shared_papers, shared_channels, shared_club, forget, replicas) and supplies only the
primitives below: transaction(), _rows/_tuples/_read_one (a read in the driver's own SQL),
_stream (a big read in batches), _in (a list of values as an IN test) and a few names (_PARAM,
_SEQ, _EMPTY_BLOB).
"""
from __future__ import annotations

from typing import Iterable, Iterator, Sequence


def storable(values: Iterable[str]) -> list[str]:
    """The values a text column can hold: PostgreSQL text has no NUL, so one with a NUL is
    nowhere in the store (SQLite would simply find nothing)."""
    return [v for v in values if "\x00" not in v]


def cursor_dicts(cur) -> list[dict]:
    """Every row left in a DB-API cursor, as column -> value (for RETURNING * in a transaction)."""
    names = [d[0] for d in cur.description or ()]
    return [dict(zip(names, row)) for row in cur.fetchall()]


class SQLTables:
    """Base of every shared-SQL mixin: `?` statements, run by the backend's driver."""

    _PARAM = "?"  # the driver's placeholder; PostgresStore says %s
    _SEQ = "rowid"  # the column that keeps insertion order (PostgreSQL: an identity column, seq)
    _CHUNK: int | None = 500  # how many values one IN test holds (None: all, as one array)
    _EMPTY_BLOB = "x''"  # a zero-length blob literal (PostgreSQL: ''::bytea)

    def _q(self, sql: str) -> str:
        """sql in the driver's placeholder style (psycopg reads % as its own: doubled)."""
        return sql if self._PARAM == "?" else sql.replace("%", "%%").replace("?", self._PARAM)

    # -- reads outside a transaction, and statements inside one -----------------------
    def _select(self, sql: str, args: Sequence = ()) -> list[dict]:
        return self._rows(self._q(sql), list(args))

    def _select_tuples(self, sql: str, args: Sequence = ()) -> list[tuple]:
        return self._tuples(self._q(sql), list(args))

    def _select_one(self, sql: str, args: Sequence = ()):
        return self._read_one(self._q(sql), list(args))

    def _select_batches(self, sql: str, args: Sequence = (), batch: int = 10_000) -> Iterator[list[tuple]]:
        """A read too big to hold twice, as lists of up to `batch` rows (the backend's `_stream`)."""
        return self._stream(self._q(sql), list(args), batch)

    def _run(self, db, sql: str, args: Sequence = ()):
        """Execute one statement on the transaction's connection; the driver's cursor."""
        return db.execute(self._q(sql), list(args))

    def _chunks(self, values: Iterable[str]) -> Iterator[tuple[str, list]]:
        """(' in (?, ?)' or ' = any(?)', its args) for the distinct values, as many at a time as
        the backend takes in one statement; nothing for no values."""
        values = list(dict.fromkeys(values))
        step = self._CHUNK or max(len(values), 1)
        for i in range(0, len(values), step):
            yield self._in(values[i : i + step])

    def _in(self, values: list) -> tuple[str, list]:
        """SQLite: ' in (?, ?, ...)'; PostgreSQL overrides with one array (' = any(?)')."""
        return f" in ({','.join('?' * len(values))})", list(values)
