"""forget-me forgets everywhere a member is named (issue 31.8): the feeds they added (`/paper feed`
said "added by @Dan"), the club they set up, the presenter DM's claim, the log, and a backup
restored afterwards, on both backends; and a migration cannot add a member column that
forget-me does not know (store.members is the one list)."""
from __future__ import annotations

import logging
import shutil
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from bot.app import create_app
from bot.club import club_tick
from conftest import Clock, dispatch_command, make_deps, make_settings, text_of
from store import HashingEmbedder, Searcher, open_store
from store.club import ClubSpec, set_club
from store.members import MEMBER_COLUMNS, MEMBERISH, NOT_MEMBERS

pytestmark = pytest.mark.both_backends

CH = "C1"
DAN = "UDAN"
MONDAY = datetime(2026, 11, 30, 8, tzinfo=timezone.utc)
WINNER_AT = datetime(2026, 12, 2, 16, 1, tzinfo=timezone.utc)  # 24 h before Thu 3 Dec 17:00 Berlin


def _tables(store) -> dict[str, list[str]]:
    """Every table of the store and its columns (full-text index tables left out)."""
    if store.backend == "sqlite":
        names = [r[0] for r in store.db.execute(
            "select name from sqlite_master where type = 'table' and name not like 'sqlite_%' "
            "and name not like '%fts%'")]
        return {t: [c[1] for c in store.db.execute(f'pragma table_info("{t}")')] for t in names}
    out: dict[str, list[str]] = {}
    for table, column in store._tuples(
            "select table_name, column_name from information_schema.columns "
            "where table_schema = current_schema() order by table_name, ordinal_position"):
        out.setdefault(table, []).append(column)
    return out


def _rows(store, table: str) -> list[tuple]:
    if store.backend == "sqlite":
        return list(store.db.execute(f'select * from "{table}"'))
    return store._tuples(f'select * from "{table}"')


def traces(store, who: str) -> list[str]:
    """Every cell in the database that still names `who`."""
    return [f"{t}: {row!r}"[:200] for t in _tables(store) for row in _rows(store, t)
            if any(isinstance(v, str) and who in v for v in row)]


def test_every_column_named_like_a_member_is_on_the_one_list(store):
    """A migration that adds `approved_by` (say) fails here until store.members lists it."""
    listed = {(c.table, c.column) for c in MEMBER_COLUMNS}
    tables = _tables(store)
    unknown = [(t, c) for t, cols in tables.items() for c in cols
               if MEMBERISH.search(c) and (t, c) not in listed and (t, c) not in NOT_MEMBERS]
    assert unknown == [], f"columns that look like they hold a member id, missing from store.members: {unknown}"
    missing = [(c.table, c.column) for c in MEMBER_COLUMNS if c.column not in tables.get(c.table, [])]
    assert missing == [], f"store.members lists columns the schema does not have: {missing}"


@pytest.fixture
def world(fake_slack, hashing_store):
    settings = make_settings(slack_api_url=fake_slack.api_url, admins=DAN)
    deps = make_deps(settings, hashing_store, Searcher(hashing_store, HashingEmbedder()), clock=Clock(MONDAY))
    app = create_app(deps, process_before_response=True)
    fake_slack.add_members(DAN, "UANN")
    fake_slack.add_channel(CH)
    return app, fake_slack, hashing_store, deps


def _snapshot(store, tmp_path: Path):
    """A backup as the operator makes it: the file (SQLite), or the rows of every member table."""
    if store.backend == "sqlite":
        target = tmp_path / "before.db"
        store.backup_to(target)
        return target
    return {t: (_tables(store)[t], _rows(store, t)) for t in {c.table for c in MEMBER_COLUMNS}}


def _restore(store, backup, url):
    """Put the backup back over the live database and start paperclub on it again."""
    store.close()
    if isinstance(backup, Path):
        for suffix in ("-wal", "-shm"):
            Path(f"{url}{suffix}").unlink(missing_ok=True)
        shutil.copy(backup, url)
    else:
        import psycopg

        with psycopg.connect(url, autocommit=False) as conn:
            for table, (cols, rows) in backup.items():
                conn.execute(f'delete from "{table}"')
                names = ", ".join(f'"{c}"' for c in cols)
                marks = ", ".join(["%s"] * len(cols))
                for row in rows:
                    conn.execute(f'insert into "{table}"({names}) values ({marks})', list(row))
    return open_store(url)


def test_forget_me_takes_dan_off_his_feed_his_club_his_presenter_dm_the_log_and_a_restore(
        world, tmp_path, caplog):
    app, fake, store, deps = world
    caplog.set_level(logging.INFO)
    url = store.url if store.backend == "postgresql" else store.path
    assert "Now following" in text_of(dispatch_command(app, fake, "feed add arxiv cs.LG", user=DAN, channel=CH))
    assert "added by <@UDAN>" in text_of(dispatch_command(app, fake, "feed", user="UANN", channel=CH))
    set_club(store, CH, ClubSpec(3, 17, 0, "Europe/Berlin", lead_hours=48, cutoff_hours=24), by=DAN, now=MONDAY)
    store.set_club_member(CH, DAN, active=True, now=MONDAY.timestamp())
    for at in (WINNER_AT - timedelta(hours=24), WINNER_AT):  # the agenda, then the winner and Dan's DM
        deps.clock.now = at
        club_tick(deps, deps.slack, at, sleep=lambda s: None, budget=30)
    assert store.get_club_session(CH, "2026-12-03")["presenter"] == DAN
    assert any("You present" in text_of(m) for m in fake.dm_messages(DAN))
    backup = _snapshot(store, tmp_path)
    assert traces(store, DAN)

    answer = text_of(dispatch_command(app, fake, "forget-me confirm", user=DAN, channel=CH))
    assert "Done." in answer and "1 feed" in answer

    listing = text_of(dispatch_command(app, fake, "feed", user="UANN", channel=CH))
    assert "arXiv *cs.LG*" in listing and "UDAN" not in listing and "added by" not in listing
    assert traces(store, DAN) == []
    # A backup from before the request, restored: paperclub's start-up forgets Dan again.
    store = _restore(store, backup, url)
    try:
        assert traces(store, DAN) == []
    finally:
        store.close()
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert DAN not in logged, [line for line in logged.splitlines() if DAN in line][:5]


def test_forget_me_counts_the_papers_a_member_judged_not_the_rows_of_the_log(world):
    """One standing verdict after a swap and a take-back was "I deleted 5 reactions": the log's rows."""
    app, fake, store, deps = world
    first, second = (p.id for p in store.list_papers(limit=2))
    for line in (f"not-for-me {first}", f"for-me {second}", f"take-back {second}", f"for-me {first}"):
        dispatch_command(app, fake, line, user="UANN", channel=CH)
    assert len(store.reactions(user="UANN")) == 5  # what the old answer counted
    answer = text_of(dispatch_command(app, fake, "forget-me confirm", user="UANN", channel=CH))
    assert "Done. I deleted your reactions and verdicts on 2 papers." in answer
    assert store.reactions(user="UANN") == []


def test_an_old_presenter_claim_that_names_the_member_is_rewritten(store):
    """Claims made before the key carried a tag named the member: forget-me and the re-apply find them."""
    key = "presenter:2026-11-26:UOLD"
    assert store.claim_post(CH, key, kind="presenter_dm", claimer="r1", now=1.0)
    store.forget_user("UOLD")
    assert store.get_post(CH, key) is None
    [row] = [r for r in _rows(store, "posts")]
    assert "UOLD" not in repr(row) and "presenter:2026-11-26:member-" in repr(row)
