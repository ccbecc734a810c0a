"""`paperclub restore` (and the restore docs/deploy.md gives) keeps every forget-me request (the
forgotten list travels inside each backup and beside it), refuses while the bot looks to be running,
and `paperclub backup` that cannot write says so in one line and leaves nothing that looks like a
finished backup."""
from __future__ import annotations

import errno
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bot.cli import main
from bot.health import write_heartbeat
from bot.lease import SWEEP_LEASE
from conftest import copy_db
from store import open_store
from test_forget import traces

pytestmark = pytest.mark.sqlite_only  # paperclub backup copies SQLite files (pg_dump backs up PostgreSQL)

DAN = "UDAN"
ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "deploy.md"
# The names docs/deploy.md's restore steps use: the backup restored, and the newest one.
OLDER, NEWEST = "backup-2025-01-31.db", "backup-2025-02-28.db"
ENV = {"PAPERCLUB_MODEL": "hashing-256", "SLACK_BOT_TOKEN": "", "SLACK_APP_TOKEN": "", "PAPERCLUB_DB": ""}


def paperclub(monkeypatch, capsys, *args: str) -> tuple[int, str, str]:
    """`paperclub ARGS` through the real entry point (bot.cli.main): exit code, stdout, stderr."""
    for key, value in ENV.items():
        monkeypatch.setenv(key, value)
    try:
        main(list(args))
        code = 0
    except SystemExit as e:
        code = e.code or 0
    out = capsys.readouterr()
    return code, out.out, out.err


def documented_restore() -> str:
    """The shell lines docs/deploy.md gives for a restore outside Docker."""
    text = DOCS.read_text()
    section = text[text.index("## Backup and restore"):]
    section = section[section.index("Outside Docker"):]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, "docs/deploy.md gives no ```sh block for the restore outside Docker"
    return block.group(1)


@pytest.fixture
def two_backups(hashing_db, tmp_path, monkeypatch, capsys):
    """Dan is a club member and presenter; a backup is taken (OLDER), Dan runs forget-me, another is
    taken (NEWEST). Both through `paperclub backup`, into a folder of backups."""
    (tmp_path / "live").mkdir()
    live = copy_db(hashing_db, tmp_path / "live" / "paperclub.db")
    store = open_store(live)
    store.set_club_member("C1", DAN, active=True, now=1.0)
    store.set_club_member("C1", "UANN", active=True, now=2.0)
    store.put_club_session("C1", "2026-12-03", now=3.0, presenter=DAN)
    backups = tmp_path / "backups"
    backups.mkdir()
    code, _, err = paperclub(monkeypatch, capsys, "--db", str(live), "backup", str(backups / OLDER))
    assert code == 0, err
    store.forget_user(DAN)  # what /paper forget-me runs
    assert traces(store, DAN) == []
    store.close()
    code, _, err = paperclub(monkeypatch, capsys, "--db", str(live), "backup", str(backups / NEWEST))
    assert code == 0, err
    older = open_store(backups / OLDER, migrate=False)
    assert traces(older, DAN), "the older backup should still hold Dan's rows"
    older.close()
    return backups


def test_the_documented_restore_of_an_older_backup_onto_a_fresh_volume_keeps_dan_forgotten(two_backups, tmp_path):
    fresh = tmp_path / "fresh"  # a new volume: no database, no forgotten list
    fresh.mkdir()
    for backup in two_backups.iterdir():  # the operator's backups, copied back from off the host
        shutil.copy(backup, fresh / backup.name)
    # The lines as written, `paperclub` being this checkout's CLI.
    script = 'paperclub() { "$PAPERCLUB_PYTHON" -m bot "$@"; }\n' + documented_restore()
    env = {**os.environ, **ENV, "PAPERCLUB_PYTHON": sys.executable, "PYTHONPATH": str(ROOT)}
    subprocess.run(["bash", "-euc", script], cwd=fresh, env=env, check=True, timeout=120)
    restored = open_store(fresh / "paperclub.db")  # the bot's start
    try:
        assert traces(restored, DAN) == []
        assert [m["user"] for m in restored.club_members("C1")] == ["UANN"]
    finally:
        restored.close()


def test_a_backup_file_alone_carries_the_list_so_an_older_restore_after_it_still_forgets(two_backups, tmp_path):
    """The newest backup copied alone (no .forgotten beside it) onto a fresh volume and started; later the
    older backup is restored over it: Dan stays forgotten, because the file brought its list along."""
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    shutil.copy(two_backups / NEWEST, fresh / "paperclub.db")
    open_store(fresh / "paperclub.db").close()
    shutil.copy(two_backups / OLDER, fresh / "paperclub.db")  # the restore leaves the list beside it alone
    restored = open_store(fresh / "paperclub.db")
    try:
        assert traces(restored, DAN) == []
    finally:
        restored.close()


def club(db: Path) -> list[str]:
    store = open_store(db, migrate=False)
    try:
        return [m["user"] for m in store.club_members("C1")]
    finally:
        store.close()


@pytest.fixture
def live(two_backups, tmp_path) -> Path:
    """The live database after both backups: Eve joined the club since, and the bot, stopped an
    hour ago, left its heartbeat and a lapsed lease behind."""
    db = tmp_path / "live" / "paperclub.db"
    store = open_store(db)
    store.set_club_member("C1", "UEVE", active=True, now=4.0)
    write_heartbeat(store, time.time() - 3600, replica="host-a:7")
    store.acquire_lease(SWEEP_LEASE, holder="host-a:7", ttl=15, now=time.time() - 3600)
    store.close()
    return db


def test_restore_of_an_older_backup_on_the_live_volume_keeps_dan_forgotten(two_backups, live, monkeypatch, capsys):
    code, out, err = paperclub(monkeypatch, capsys, "--db", str(live), "restore", str(two_backups / OLDER))
    assert code == 0, err
    assert "1 of them forgotten again" in out and str(live) in out, out
    restored = open_store(live)  # the bot's start
    try:
        assert traces(restored, DAN) == []
        assert [m["user"] for m in restored.club_members("C1")] == ["UANN"]  # Eve joined after the backup
        assert restored.integrity_ok()
    finally:
        restored.close()
    assert not Path(f"{live}-wal").exists() or Path(f"{live}-wal").stat().st_size == 0


def test_restore_onto_a_fresh_volume_takes_the_newest_list_beside_the_backup_or_named(
        two_backups, tmp_path, monkeypatch, capsys):
    fresh = tmp_path / "fresh" / "paperclub.db"  # no database, no list: only the backups folder
    fresh.parent.mkdir()
    code, out, err = paperclub(monkeypatch, capsys, "--db", str(fresh), "restore", str(two_backups / OLDER))
    assert code == 0, err
    assert NEWEST + ".forgotten" in out, out
    assert club(fresh) == ["UANN"]

    alone, kept = tmp_path / "alone", tmp_path / "kept"  # the older backup alone; the newest list elsewhere
    alone.mkdir(), kept.mkdir()
    shutil.copy(two_backups / OLDER, alone / OLDER)
    shutil.copy(two_backups / (NEWEST + ".forgotten"), kept / "newest.forgotten")
    other = tmp_path / "other" / "paperclub.db"
    other.parent.mkdir()
    code, out, err = paperclub(monkeypatch, capsys, "--db", str(other), "restore", str(alone / OLDER),
                               "--forgotten", str(kept / "newest.forgotten"))
    assert code == 0, err
    assert club(other) == ["UANN"]


def test_restore_refuses_a_list_that_is_not_one_and_changes_nothing(two_backups, live, monkeypatch, capsys):
    before = live.read_bytes()
    code, _, err = paperclub(monkeypatch, capsys, "--db", str(live), "restore", str(two_backups / OLDER),
                             "--forgotten", str(two_backups / NEWEST))  # the database, not its list
    assert code == 1 and len(err.strip().splitlines()) == 1 and "not a forget-me list" in err, err
    assert live.read_bytes() == before


@pytest.mark.parametrize("running", ["heartbeat", "lease"])
def test_restore_refuses_while_the_bot_looks_to_be_running_unless_forced(
        two_backups, live, running, monkeypatch, capsys):
    store = open_store(live)
    if running == "heartbeat":  # this test process stands in for the running bot
        write_heartbeat(store, time.time(), replica="host-b:8")
    else:  # another host's replica holds the sweeps lease
        store.acquire_lease(SWEEP_LEASE, holder="host-c:9", ttl=600, now=time.time())
    store.close()
    code, out, err = paperclub(monkeypatch, capsys, "--db", str(live), "restore", str(two_backups / OLDER))
    assert code == 1 and not out, out
    [line] = err.strip().splitlines()
    assert "looks to be running" in line and "--force" in line, line
    assert ("host-b:8" if running == "heartbeat" else "host-c:9 holds the sweeps lease") in line, line
    assert club(live) == ["UANN", "UEVE"]  # nothing restored

    code, out, err = paperclub(monkeypatch, capsys, "--db", str(live), "restore", "--force",
                               str(two_backups / OLDER))
    assert code == 0, err
    assert club(live) == ["UANN"]


def test_a_backup_from_a_newer_paperclub_is_refused_and_changes_nothing(two_backups, live, monkeypatch, capsys):
    con = sqlite3.connect(two_backups / OLDER)  # test setup only: what a newer version's backup holds
    con.execute("insert into _sqlite_migrations(migration_set, name, applied_at) "
                "values ('paperclub', 'm999_from_the_future', 'now')")
    con.commit()
    con.close()
    before = live.read_bytes(), Path(f"{live}.forgotten").read_bytes()
    code, _, err = paperclub(monkeypatch, capsys, "--db", str(live), "restore", str(two_backups / OLDER))
    assert code == 1 and len(err.strip().splitlines()) == 1, err
    assert "newer paperclub" in err and "m999_from_the_future" in err, err
    assert (live.read_bytes(), Path(f"{live}.forgotten").read_bytes()) == before
    assert sorted(p.name for p in live.parent.iterdir()) == ["paperclub.db", "paperclub.db.forgotten"]


def test_restore_on_postgresql_refuses_and_points_to_pg_restore(two_backups, pg_url, monkeypatch, capsys):
    code, _, err = paperclub(monkeypatch, capsys, "--db", pg_url, "restore", str(two_backups / OLDER))
    assert code == 1 and len(err.strip().splitlines()) == 1, err
    assert "pg_restore" in err and "paperclub backup" in err, err


def test_backup_that_cannot_write_the_list_says_so_in_one_line_and_leaves_no_backup(
        hashing_db, tmp_path, monkeypatch, capsys):
    """Disk full while writing the forgotten list: injected at the one write of the list's file (no
    small real filesystem is at hand here, and as root a read-only folder does not refuse a write)."""
    live = copy_db(hashing_db, tmp_path / "paperclub.db")
    store = open_store(live)
    store.forget_user(DAN)
    store.close()

    write_text = Path.write_text

    def full(path, text, *args, **kwargs):
        if path.name.endswith(".forgotten") or ".forgotten." in path.name:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return write_text(path, text, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", full)
    target = tmp_path / "backup.db"
    code, out, err = paperclub(monkeypatch, capsys, "--db", str(live), "backup", str(target))
    assert code == 1 and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1 and "No space left on device" in err and str(target) in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["paperclub.db", "paperclub.db.forgotten"]
