"""Every statement both backends share, as one mixin: each concern's tables (shared_*.py,
forget.py, posts.py, replicas.py) over the seam in shared_sql.py. A backend subclasses SharedTables and keeps only
what truly differs (its DIALECT)."""
from __future__ import annotations

import inspect

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
# connections and transactions, bulk writes and vector reads, lexical search, the cache write
# that gives up when busy, backups and integrity, migrations, where the forgotten list lives.
# tests/test_dialect.py fails when a method is written in both backends but is not named here.
DIALECT = frozenset({
    "close", "transaction", "migrate", "schema_version", "write_papers", "load_vectors",
    "vector_changes", "lexical_search", "term_stats", "put_summary", "integrity_ok", "backup_to",
    "forgotten_hashes", "newer_schema",
})
