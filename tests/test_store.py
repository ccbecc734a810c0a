"""The Store's public face: open_store URLs, the protocol, named errors instead of sqlite3's, one clock."""
from __future__ import annotations

import sqlite3

import pytest

import store.backends.sqlite as sqlite_backend
from store import PostStatus, SchemaError, Store, StoreBusy, StoreError, open_store


def test_the_backend_satisfies_the_store_protocol(store):
    assert isinstance(store, Store)
    missing = [name for name in dir(Store) if not name.startswith("_") and not hasattr(store, name)]
    assert missing == []


def test_open_store_takes_a_path_or_a_sqlite_url(tmp_path):
    by_url = open_store(f"sqlite:///{tmp_path / 'a.db'}")
    by_url.set_meta("k", "v")
    by_url.close()
    again = open_store(tmp_path / "a.db", must_exist=True)
    assert again.get_meta("k") == "v"
    again.close()
    memory = open_store(":memory:")
    assert memory.count_papers() == 0
    memory.close()


def test_an_unreachable_postgresql_is_one_clear_store_error_without_the_password():
    with pytest.raises(StoreError, match="cannot reach PostgreSQL at postgresql://bot:\\*\\*\\*@127.0.0.1:1/db") as e:
        open_store("postgresql://bot:hunter2@127.0.0.1:1/db")
    assert "hunter2" not in str(e.value)


def test_must_exist_never_creates_a_database(tmp_path):
    with pytest.raises(StoreError, match="no database at"):
        open_store(tmp_path / "missing.db", must_exist=True, migrate=False)
    assert not (tmp_path / "missing.db").exists()


def test_a_file_that_is_not_a_database_is_a_store_error_not_sqlite3s(tmp_path):
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite" * 100)
    s = open_store(junk, must_exist=True, migrate=False)
    with pytest.raises(StoreError, match="cannot read database") as e:
        s.get_meta("heartbeat")
    assert not isinstance(e.value, sqlite3.Error)


def test_a_database_held_by_another_writer_is_store_busy(tmp_path, monkeypatch):
    monkeypatch.setattr(sqlite_backend, "BUSY_TIMEOUT_MS", 100)
    s = open_store(tmp_path / "busy.db")
    holder = sqlite3.connect(tmp_path / "busy.db")
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StoreBusy):
            s.set_meta("k", "v")
    finally:
        holder.rollback()
        holder.close()
    s.set_meta("k", "v")  # free again: the same call goes through
    assert s.get_meta("k") == "v"
    s.close()


def test_a_newer_schema_is_a_schema_error(store):
    if store.backend == "sqlite":
        store.db.execute("insert into _sqlite_migrations(migration_set, name, applied_at) "
                         "values ('paperclub', 'm999_from_the_future', '2030-01-01')")
    else:
        with store.transaction() as conn:
            conn.execute("insert into _paperclub_migrations(name) values ('m999_from_the_future')")
    with pytest.raises(SchemaError, match="m999_from_the_future"):
        store.schema_version()


def test_post_times_come_from_the_callers_clock(store):
    store.write_papers([{"id": "p1", "short_name": "P1", "headline": "h", "abstract": "a",
                         "content_hash": "x"}], [], now=100.0)
    assert store.claim_post("C1", "2024-06-03", claimer="me", paper_id="p1", pick=None, now=1_000.0)
    assert store.finish_post("C1", "2024-06-03", claimer="me", ts="1717405205.000100", now=1_005.0)
    row = store.get_post("C1", "2024-06-03")
    assert (row["claimed_at"], row["posted_at"], row["status"]) == (1_000.0, 1_005.0, PostStatus.POSTED)
    assert store.paper_rows(["p1"])["p1"]["created_at"] == 100.0


def test_lexical_search_takes_terms_and_ranks_higher_is_better(store):
    rows = [{"id": f"p{i}", "short_name": f"P{i}", "headline": text, "abstract": text, "content_hash": str(i)}
            for i, text in enumerate(["graph neural networks for molecules",
                                      "graph transformers for graph classification",
                                      "diffusion models for images"])]
    store.write_papers(rows, [], now=1.0)
    hits = store.lexical_search(["graph"], limit=10)
    assert [pid for pid, _ in hits] == ["p1", "p0"]  # 'graph' twice ranks first
    assert hits[0][1] > hits[1][1] > 0
    assert store.lexical_search(["neural networks"], limit=10)[0][0] == "p0"  # a phrase
    assert store.lexical_search(['"', "AND", "NEAR("], limit=10) == []  # nothing searchable, no error
    stats = store.term_stats(["Graphs", "diffusion", "zebra", "!!"])
    assert stats == {"Graphs": ("graph", 2), "diffusion": ("diffus", 1), "zebra": ("zebra", 0), "!!": ("", 0)}
