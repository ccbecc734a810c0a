"""The Store's public face: open_store URLs, the protocol, named errors instead of sqlite3's, one clock."""
from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import store.backends.sqlite as sqlite_backend
from store import PostStatus, ReadOnlyStorage, SchemaError, Store, StoreBusy, StoreError, open_store


def test_the_backend_satisfies_the_store_protocol(store):
    assert isinstance(store, Store)
    missing = [name for name in dir(Store) if not name.startswith("_") and not hasattr(store, name)]
    assert missing == []


def test_every_store_method_takes_the_protocols_arguments(store):
    # Names alone are not enough: a keyword the bot passes (claimed_at=...) that one backend
    # lacks fails only on that backend, only when that code path runs.
    import inspect

    differ = []
    for name in (n for n in dir(Store) if not n.startswith("_") and callable(getattr(Store, n))):
        want = inspect.signature(getattr(Store, name)).parameters
        have = inspect.signature(inspect.unwrap(getattr(type(store), name))).parameters
        for param in want.values():
            if param.name == "self":
                continue
            got = have.get(param.name)
            if got is None or got.kind != param.kind or got.default != param.default:
                differ.append(f"{name}({param})")
    assert differ == []


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


def test_a_read_only_postgresql_is_named_so_with_what_to_do(pg_url):
    """A standby, or a role that may only read: every write is refused. Whoever starts paperclub
    is told the database is read-only and where to point it, not "cannot read database"."""
    open_store(pg_url).close()  # its tables, made while it could still be written
    read_only = pg_url + "%20-cdefault_transaction_read_only%3Don"  # as a hot standby answers
    with pytest.raises(ReadOnlyStorage, match="is read-only: paperclub writes.*PAPERCLUB_DB at the primary") as e:
        open_store(read_only)  # the error a read-only SQLite file raises, so callers handle both alike
    assert "cannot read" not in str(e.value)


def test_a_postgresql_url_mangled_into_a_path_is_refused_not_made_a_sqlite_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    mangled = Path("postgresql://bot:hunter2@127.0.0.1:5432/db")  # Path() folds the '//' to '/'
    with pytest.raises(StoreError, match="lost a slash") as e:
        open_store(mangled)
    assert "hunter2" not in str(e.value)
    assert list(tmp_path.iterdir()) == []


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
    assert store.finish_post("C1", "2024-06-03", claimer="me", ts="1717405205.000100", now=1_005.0,
                             claimed_at=1_000.0)
    row = store.get_post("C1", "2024-06-03")
    assert (row["claimed_at"], row["posted_at"], row["status"]) == (1_000.0, 1_005.0, PostStatus.POSTED)
    assert store.paper_rows(["p1"])["p1"]["created_at"] == 100.0


def test_a_daily_post_is_retaken_by_one_caller_and_finished_only_by_the_claim_held(store):
    from concurrent.futures import ThreadPoolExecutor

    day = "2024-06-03"
    assert store.claim_post("C1", day, claimer="a", paper_id=None, pick=None, now=100.0)
    store.fail_post("C1", day, claimer="a", error="slack down", claimed_at=99.0)  # not the claim held
    assert store.get_post("C1", day)["status"] == PostStatus.CLAIMED
    store.fail_post("C1", day, claimer="a", error="slack down", claimed_at=100.0)
    row = store.get_post("C1", day)
    assert (row["status"], row["error"]) == (PostStatus.FAILED, "slack down")

    def take(i):  # every caller read the same row; one re-claims it
        return store.take_over_post("C1", day, status=row["status"], old_claimer=row["claimed_by"],
                                    claimed_at=row["claimed_at"], claimer=f"r{i}", now=100.0)

    with ThreadPoolExecutor(6) as pool:
        taken = list(pool.map(take, range(12)))
    won = [at for at in taken if at is not None]
    assert len(won) == 1 and won[0] > 100.0  # a new claimed_at, even on the same clock reading
    winner = f"r{taken.index(won[0])}"
    after = store.get_post("C1", day)
    assert (after["status"], after["claimed_by"], after["claimed_at"]) == (PostStatus.CLAIMED, winner, won[0])
    assert after["attempts"] == 1
    assert not store.finish_post("C1", day, claimer="a", ts="1.1", now=101.0, claimed_at=100.0)  # fenced off
    assert not store.finish_post("C1", day, claimer=winner, ts="1.1", now=101.0, claimed_at=100.0)
    assert store.finish_post("C1", day, claimer=winner, ts="1.1", now=101.0, claimed_at=won[0])
    assert store.take_over_post("C1", day, status=PostStatus.POSTED, old_claimer=winner, claimed_at=won[0],
                                claimer="late", now=200.0) is None  # a posted day stays posted
    assert store.get_post("C1", day)["ts"] == "1.1"


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
    # Only the terms (what explaining a hit needs): the same terms, no counting.
    assert store.term_stats(["Graphs", "diffusion", "!!"], counts=False) == {
        "Graphs": ("graph", 0), "diffusion": ("diffus", 0), "!!": ("", 0)}


def test_a_common_word_does_not_crowd_out_the_paper_holding_every_query_word(store, monkeypatch):
    # PostgreSQL reads term frequencies for the best few of a first, frequency-blind score
    # only; shrunk here to two papers, as a common word at a million papers would have it.
    import store.backends.postgres as pg
    monkeypatch.setattr(pg, "LEXICAL_POOL", 2)
    monkeypatch.setattr(pg, "LEXICAL_POOL_FACTOR", 1)
    monkeypatch.setattr(pg, "TERM_COUNT_CAP", 3)
    texts = [f"graph methods for task number {i} in short" for i in range(12)]
    texts.append("a long study of graph learning that follows zebrafish embryos through many stages "
                 "of growth and records every cell division under the microscope for weeks")
    rows = [{"id": f"p{i}", "short_name": f"P{i}", "headline": "", "abstract": t, "content_hash": str(i)}
            for i, t in enumerate(texts)]
    store.write_papers(rows, [], now=1.0)
    hits = store.lexical_search(["graph", "zebrafish"], limit=2)
    assert len(hits) == 2 and hits[0][0] == "p12" and hits[0][1] > hits[1][1] > 0
    assert len(store.lexical_search(["graph"], limit=5)) == 5  # the pool is never smaller than the limit
    term, count = store.term_stats(["graph"])["graph"]
    assert term == "graph" and 3 <= count <= 13  # counted up to the cap, never said to be rarer


def test_keyword_scores_follow_new_and_longer_papers_without_recounting_the_store(store):
    if store.backend != "postgresql":
        pytest.skip("SQLite's FTS5 keeps its own BM25 statistics")
    def rows(texts, start=0):
        return [{"id": f"p{i}", "short_name": f"P{i}", "headline": "", "abstract": t, "content_hash": t}
                for i, t in enumerate(texts, start)]
    others = [f"images from diffusion number {i}" for i in range(8)]
    store.write_papers(rows(["graph learning on molecules", *others]), [], now=1.0)
    first = store.lexical_search(["graph"], limit=5)
    store.write_papers(rows(["graph learning on molecules " + "and proteins " * 30]), [], now=2.0)  # longer
    store.write_papers(rows(["sparse graph kernels", "graph graph"], start=20), [], now=3.0)
    store.write_papers(rows(["graph learning on molecules " + "and proteins " * 30]), [], now=4.0)  # again
    kept = store.lexical_search(["graph"], limit=5)
    assert [pid for pid, _ in kept] == ["p21", "p20", "p0"] and kept != first  # the long p0 is last
    # The same scores as from counting every paper afresh (what the counters stand for).
    with store.transaction() as conn:
        conn.execute("delete from meta where key in ('papers_n', 'papers_doclen')")
    afresh = store.lexical_search(["graph"], limit=5)
    assert [pid for pid, _ in afresh] == [pid for pid, _ in kept]
    assert [score for _, score in afresh] == pytest.approx([score for _, score in kept], rel=1e-9)


def test_a_common_word_is_known_for_common_once_the_store_outgrows_its_statistics(store, monkeypatch):
    if store.backend != "postgresql":
        pytest.skip("SQLite's FTS5 counts every word exactly")
    # Past TERM_COUNT_CAP papers a common word's count is ANALYZE's estimate; the store must
    # take those statistics itself (autovacuum may be off), or 'graph' would pass for rare.
    import store.backends.postgres as pg
    monkeypatch.setattr(pg, "TERM_COUNT_CAP", 5)
    rows = [{"id": f"p{i}", "short_name": f"P{i}", "headline": "", "content_hash": str(i),
             "abstract": f"graph methods for task {'zebrafish' if i == 7 else i}"} for i in range(40)]
    store.write_papers(rows[:4], [], now=1.0)  # under the cap: counted, nothing to analyze
    assert store.term_stats(["graph"])["graph"] == ("graph", 4)
    store.write_papers(rows[4:], [], now=2.0)
    stats = store.term_stats(["graph", "zebrafish"])
    assert stats["zebrafish"] == ("zebrafish", 1)
    assert stats["graph"][1] > 20  # ANALYZE's estimate of 40, not the cap of 5


def test_a_search_reads_its_cached_summaries_at_once_and_only_its_own_backends(store):
    store.put_summary("h1", "extractive", {"tldr": "One."}, now=1.0)
    store.put_summary("h2", "extractive", {"tldr": "Two."}, now=1.0)
    store.put_summary("h2", "some-llm", {"tldr": "Two, by a model."}, now=1.0)
    assert store.get_summaries(["h1", "h2", "h3", "h1"], "extractive") == {"h1": {"tldr": "One."},
                                                                          "h2": {"tldr": "Two."}}
    assert store.get_summaries(["h1", "h2"], "some-llm") == {"h2": {"tldr": "Two, by a model."}}
    assert store.get_summaries([], "extractive") == {}


def test_a_channel_follows_a_feed_once_and_can_unfollow_it(store):
    first = store.add_feed("C1", "arxiv", "cs.LG", "UANN", now=10.0)
    assert first is not None
    assert store.add_feed("C1", "arxiv", "cs.LG", "UBOB", now=11.0) is None  # already followed
    other = store.add_feed("C2", "arxiv", "cs.LG", None, now=12.0)
    assert [(f["channel"], f["target"], f["added_by"], f["created_at"]) for f in store.feeds("C1")] == \
        [("C1", "cs.LG", "UANN", 10.0)]
    assert [f["id"] for f in store.feeds()] == [first, other]
    assert store.remove_feed("C2", first) is None  # another channel's feed is not this one's to remove
    assert store.remove_feed("C1", first)["target"] == "cs.LG"
    assert store.feeds("C1") == [] and [f["id"] for f in store.feeds()] == [other]


def test_a_source_cursor_and_its_health_survive_a_round_trip(store_url, store):
    store.update_source("arxiv-api:cs.LG", now=100.0, cursor={"start": 200, "query": "cat:cs.LG"}, ok=True)
    store.update_source("arxiv-api:cs.LG", now=160.0, error="HTTP 503")
    store.update_source("arxiv-api:cs.LG", now=220.0, error="HTTP 503 again")
    store.close()
    reopened = open_store(store_url)
    try:
        state = reopened.source_state("arxiv-api:cs.LG")
        assert state["cursor"] == {"start": 200, "query": "cat:cs.LG"}
        assert (state["last_success"], state["last_error"], state["failing_since"]) == (100.0, "HTTP 503 again", 160.0)
        reopened.update_source("arxiv-api:cs.LG", now=300.0, ok=True)
        assert reopened.source_state("arxiv-api:cs.LG")["failing_since"] is None
        assert reopened.source_state("openreview:ICLR") is None
        assert [s["source"] for s in reopened.source_states()] == ["arxiv-api:cs.LG"]
    finally:
        reopened.close()


def test_a_papers_first_announcement_per_source_is_kept(store):
    store.write_papers([{"id": p, "short_name": p, "headline": "h", "abstract": "a", "content_hash": p}
                        for p in ("p1", "p2")], [], now=1.0)
    assert store.mark_announced([("p1", "rss", 50.0), ("p1", "rss", 70.0), ("p2", "api", 60.0)]) == 2
    assert store.mark_announced([("p1", "rss", 40.0), ("p1", "api", 45.0)]) == 1
    assert store.announced_since(46.0) == {"p1": 50.0, "p2": 60.0}
    assert store.announced_since(0.0, ["api"]) == {"p1": 45.0, "p2": 60.0}
    assert store.announced_since(0.0, []) == {}


def test_a_club_vote_counts_once_and_a_member_has_only_their_limit(store):
    store.set_club("C1", set_by="UANN", now=1.0, weekday=3, hour=16, minute=0, tz="UTC", cadence="weekly",
                   mode="vote", active=1)
    store.set_club("C1", set_by="UBOB", now=2.0, hour=17)
    club = store.get_club("C1")
    assert (club["hour"], club["weekday"], club["set_by"]) == (17, 3, "UBOB")
    assert [c["channel"] for c in store.clubs()] == ["C1"]
    for paper in ("p1", "p2", "p3"):
        assert store.add_nomination("C1", "2026-12-03", paper, "UANN", now=3.0)
    assert not store.add_nomination("C1", "2026-12-03", "p1", "UBOB", now=4.0)  # the first nominator keeps it
    assert store.add_vote("C1", "2026-12-03", "UBOB", "p1", limit=2, now=5.0) == "added"
    assert store.add_vote("C1", "2026-12-03", "UBOB", "p1", limit=2, now=6.0) == "already"  # a double click
    assert store.add_vote("C1", "2026-12-03", "UBOB", "p2", limit=2, now=7.0) == "added"
    assert store.add_vote("C1", "2026-12-03", "UBOB", "p3", limit=2, now=8.0) == "full"
    assert [(v["user"], v["paper_id"]) for v in store.club_votes("C1", "2026-12-03")] == \
        [("UBOB", "p1"), ("UBOB", "p2")]
    assert store.clear_votes("C1", "2026-12-03", "UBOB") == 2
    assert store.add_vote("C1", "2026-12-03", "UBOB", "p3", limit=2, now=9.0) == "added"


def test_a_scheduled_club_post_is_claimed_exactly_once(store):
    from concurrent.futures import ThreadPoolExecutor

    def claim(i):
        return store.claim_post("C1", "agenda:2026-12-03", kind="agenda", claimer=f"r{i}", now=10.0 + i)

    with ThreadPoolExecutor(6) as pool:
        wins = list(pool.map(claim, range(12)))
    assert wins.count(True) == 1
    row = store.get_post("C1", "agenda:2026-12-03")
    winner, at = row["claimed_by"], row["claimed_at"]
    assert winner == f"r{wins.index(True)}"
    assert store.take_over_post("C1", "agenda:2026-12-03", status="claimed", old_claimer="nobody", claimed_at=at,
                                claimer="r99", now=50.0) is None
    store.fail_post("C1", "agenda:2026-12-03", claimer=winner, error="slack down", claimed_at=at)
    took = store.take_over_post("C1", "agenda:2026-12-03", status="failed", old_claimer=winner, claimed_at=at,
                                claimer="r99", now=60.0)
    assert took == 60.0
    assert not store.finish_post("C1", "agenda:2026-12-03", claimer=winner, ts="1.2", now=61.0, claimed_at=at)  # fenced
    assert store.finish_post("C1", "agenda:2026-12-03", claimer="r99", ts="1.2", now=62.0, claimed_at=took)
    row = store.get_post("C1", "agenda:2026-12-03")
    assert (row["status"], row["ts"], row["posted_at"], row["error"]) == ("posted", "1.2", 62.0, None)


def test_forget_me_takes_a_member_out_of_the_club_and_a_restore_does_not_bring_them_back(store_url, store):
    store.set_club_member("C1", "UANN", active=True, now=1.0)
    store.set_club_member("C1", "UBOB", active=True, now=2.0)
    store.add_club_away("C1", "UANN", "2026-12-01", "2026-12-20", now=3.0)
    store.add_vote("C1", "2026-12-03", "UANN", "p1", limit=3, now=4.0)
    store.put_club_session("C1", "2026-12-03", now=5.0, presenter="UANN")
    counts = store.forget_user("UANN")
    assert counts["club"] == 4
    assert [m["user"] for m in store.club_members("C1")] == ["UBOB"]
    assert store.club_aways("C1") == [] and store.club_votes("C1", "2026-12-03") == []
    assert store.get_club_session("C1", "2026-12-03")["presenter"] is None
    store.set_club_member("C1", "UANN", active=True, now=6.0)  # as a backup from before the request would
    store.close()
    reopened = open_store(store_url)  # start-up re-applies the forgotten list
    try:
        assert [m["user"] for m in reopened.club_members("C1")] == ["UBOB"]
    finally:
        reopened.close()


def _schema_before(url: str, migration: str) -> None:
    """A database migrated up to (not including) `migration`, as an older paperclub left it."""
    if url.startswith("postgresql://"):
        import psycopg

        from store.backends.postgres_migrations import MIGRATIONS, MIGRATIONS_TABLE

        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"create table {MIGRATIONS_TABLE} (name text primary key, "
                         "applied_at timestamptz not null default now())")
            for name, statements in MIGRATIONS[:[n for n, _ in MIGRATIONS].index(migration)]:
                for sql in statements:
                    conn.execute(sql)
                conn.execute(f"insert into {MIGRATIONS_TABLE}(name) values (%s)", [name])
        return
    import sqlite_utils

    from store.backends.sqlite_migrations import migrations

    migrations.apply(sqlite_utils.Database(url), stop_before=migration)


def test_the_claims_migration_keeps_every_daily_and_club_post_in_one_table(store_url):
    _schema_before(store_url, "m010_one_claims_table")
    old = open_store(store_url, migrate=False)
    with old.transaction() as db:
        for sql, args in [
            ("insert into posts(channel, day, status, paper_id, pick, claimed_by, claimed_at, attempts, ts, "
             "posted_at) values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
             ["C1", "2026-12-01", "posted", "p1", '{"paper_id": "p1"}', "r1", 5.0, 1, "1.1", 6.0]),
            ("insert into posts(channel, day, status, claimed_by, claimed_at, error) values (?, ?, ?, ?, ?, ?)",
             ["C1", "2026-12-02", "failed", "r1", 7.0, "slack down"]),
            ("insert into scheduled_posts(channel, key, kind, status, claimed_by, claimed_at, ts, posted_at) "
             "values (?, ?, ?, ?, ?, ?, ?, ?)", ["C1", "agenda:2026-12-03", "agenda", "posted", "r2", 8.0, "1.5", 9.0])]:
            db.execute(sql if old.backend == "sqlite" else sql.replace("?", "%s"), args)
    old.close()
    s = open_store(store_url)
    try:
        daily = s.get_post("C1", "2026-12-01")
        assert (daily["status"], daily["paper_id"], daily["pick"], daily["ts"]) == ("posted", "p1", {"paper_id": "p1"}, "1.1")
        assert s.get_post("C1", "2026-12-02")["error"] == "slack down"
        club = s.get_post("C1", "agenda:2026-12-03")
        assert (club["kind"], club["status"], club["claimed_by"], club["ts"]) == ("agenda", "posted", "r2", "1.5")
        assert s.post_days("C1", "2026-11-01") == {"2026-12-01": "posted", "2026-12-02": "failed"}
        assert [r["day"] for r in s.post_history("C1")] == ["2026-12-01"]
        assert s.post_for_message("C1", "1.5") is None  # a club post is no paper of the day
        # Still one paper of the day per channel and day, and the club's key is its own.
        assert not s.claim_post("C1", "2026-12-01", claimer="r3", now=10.0)
        assert not s.claim_post("C1", "agenda:2026-12-03", kind="agenda", claimer="r3", now=10.0)
        assert s.claim_post("C1", "reminder:2026-12-03", kind="reminder", claimer="r3", now=10.0)
    finally:
        s.close()


def test_the_carried_nominations_migration_keeps_every_ballot_and_later_skips_record_their_origin(store_url):
    _schema_before(store_url, "m011_carried_nominations")
    old = open_store(store_url, migrate=False)
    old.add_nomination("C1", "2026-12-03", "p1", "UANN", now=1.0)
    old.add_nomination("C1", "2026-12-10", "p2", "UBOB", now=2.0)  # carried by an older skip: nothing says so
    old.close()
    s = open_store(store_url)
    try:
        assert [(n["session"], n["paper_id"], n["user"], n["carried_from"]) for n in s.nominations("C1")] == [
            ("2026-12-03", "p1", "UANN", None), ("2026-12-10", "p2", "UBOB", None)]
        assert s.skip_club_session("C1", "2026-12-03", "2026-12-10", now=3.0) == {"carried": 1, "votes": 0}
        assert [(n["paper_id"], n["user"], n["carried_from"]) for n in s.nominations("C1", "2026-12-10")] == [
            ("p1", "UANN", "2026-12-03"), ("p2", "UBOB", None)]
    finally:
        s.close()


def test_the_presenter_choice_migration_reads_a_decided_session_as_its_announcement_said(store_url):
    _schema_before(store_url, "m014_presenter_choice")
    old = open_store(store_url, migrate=False)
    club = dict(weekday=3, hour=17, minute=0, tz="Europe/Berlin", cadence="weekly", active=1)
    old.set_club("C1", set_by="UADMIN", now=1.0, mode="presenter", **club)
    old.set_club("C2", set_by="UADMIN", now=1.0, mode="vote", **club)
    old.put_club_session("C1", "2026-12-03", paper_id="p1", presenter="UANN", now=2.0)  # announced "who chose it"
    old.put_club_session("C1", "2026-12-10", paper_id="p2", presenter="UBOB", tiebreak="tied", now=2.0)
    old.put_club_session("C1", "2026-12-17", presenter="UCY", now=2.0)  # not decided yet
    old.put_club_session("C2", "2026-12-03", paper_id="p3", presenter="UANN", now=2.0)  # a vote
    old.close()
    s = open_store(store_url)
    try:
        assert [(r["channel"], r["date"], r["chosen"]) for r in s.club_sessions("C1") + s.club_sessions("C2")] == [
            ("C1", "2026-12-03", 1), ("C1", "2026-12-10", 0), ("C1", "2026-12-17", 0), ("C2", "2026-12-03", 0)]
        s.put_club_session("C1", "2026-12-17", paper_id="p4", chosen=1, now=3.0)
        assert s.get_club_session("C1", "2026-12-17")["chosen"] == 1
    finally:
        s.close()
