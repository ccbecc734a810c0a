"""SQL once: a statement both backends run lives in the shared tables (store/backends/shared*.py);
a backend's own body holds only what truly differs, and says so in its DIALECT."""
from __future__ import annotations

import ast
from pathlib import Path

from store.backends.postgres import PostgresStore
from store.backends.shared import SharedTables
from store.backends.sqlite import SQLiteStore

BACKENDS = Path(__file__).resolve().parent.parent / "store" / "backends"


def own_public_methods(module: str, cls: str) -> set[str]:
    """Public methods written in the class's own body (the source, not what decorators add)."""
    tree = ast.parse((BACKENDS / module).read_text())
    body = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls).body
    return {n.name for n in body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")}


SQLITE = own_public_methods("sqlite.py", "SQLiteStore")
POSTGRES = own_public_methods("postgres.py", "PostgresStore")


def test_a_method_written_in_both_backends_is_declared_dialect():
    both = SQLITE & POSTGRES
    assert sorted(both - SQLiteStore.DIALECT) == []
    assert sorted(both - PostgresStore.DIALECT) == []


def test_the_dialect_is_small_and_names_only_what_each_backend_writes_itself():
    for store, own in ((SQLiteStore, SQLITE), (PostgresStore, POSTGRES)):
        assert len(store.DIALECT) <= 25
        assert sorted(store.DIALECT - own) == []  # a stale name: the method moved to the shared tables


def test_the_shared_tables_and_a_backend_do_not_both_write_a_method():
    shared = {n for n in dir(SharedTables) if not n.startswith("_")}
    assert sorted(shared & SQLITE) == []
    assert sorted(shared & POSTGRES) == []
