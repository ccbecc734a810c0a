"""Every statement both backends share, as one mixin: each concern's tables (shared_*.py,
forget.py, posts.py, replicas.py) over the seam in shared_sql.py. A backend subclasses SharedTables and keeps only
what truly differs (its DIALECT)."""
from __future__ import annotations

import functools
import inspect
from typing import Callable

from .forget import ForgetMember
from .posts import PostClaims
from .replicas import ReplicaTables
from .shared_channels import InterestTables, MessageTables
from .shared_club import ClubTables, SourceTables
from .shared_papers import MetaTables, PaperTables, SummaryTables, VectorTables


class SharedTables(MetaTables, PaperTables, VectorTables, SummaryTables, InterestTables, MessageTables,
                   SourceTables, ClubTables, ForgetMember, PostClaims, ReplicaTables):
    """The Store protocol's standard statements, written once."""


# The public methods the shared tables define: each backend wraps them to translate its driver's errors.
SHARED_METHODS = sorted(name for name, value in inspect.getmembers(SharedTables, inspect.isfunction)
                        if not name.startswith("_"))

# The public methods each backend writes in its own body, because the engines truly differ there:
# connections and transactions, bulk writes, lexical search, the cache write that gives up when
# busy, backups and integrity, migrations, where the forgotten list lives.
# tests/test_dialect.py fails when a method is written in both backends but is not named here.
DIALECT = frozenset({
    "close", "transaction", "migrate", "schema_version", "write_papers", "lexical_search", "term_stats",
    "put_summary", "integrity_ok", "backup_to", "forgotten_hashes", "newer_schema",
})


def errors_stay_inside(errors: tuple[type[BaseException], ...],
                       store_error: Callable[[SharedTables, BaseException], Exception], *,
                       raw: tuple[str, ...] = ("transaction",)):
    """Class decorator for a backend: every public method, its own and the shared ones, turns the
    driver's `errors` into `store_error(store, error)` (a StoreBusy or StoreError), also while a
    generator is read; the `raw` ones (a transaction's body) let them through."""
    def translated(fn):
        if inspect.isgeneratorfunction(fn):
            @functools.wraps(fn)
            def gen(self, *args, **kwargs):
                try:
                    yield from fn(self, *args, **kwargs)
                except errors as e:
                    raise store_error(self, e) from e
            return gen

        @functools.wraps(fn)
        def call(self, *args, **kwargs):
            try:
                return fn(self, *args, **kwargs)
            except errors as e:
                raise store_error(self, e) from e
        return call

    def decorate(cls):
        for name, value in list(vars(cls).items()):
            if name.startswith("_") or name in raw or not inspect.isfunction(value):
                continue
            setattr(cls, name, translated(value))
        for name in SHARED_METHODS:
            if name not in vars(cls):
                setattr(cls, name, translated(getattr(SharedTables, name)))
        return cls
    return decorate
