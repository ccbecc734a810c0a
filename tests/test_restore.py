"""A restore done as docs/deploy.md says keeps every forget-me request (the forgotten list travels
inside each backup and beside it), and `paperclub backup` that cannot write says so in one line
and leaves nothing that looks like a finished backup."""
from __future__ import annotations

import errno
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from bot.cli import main
from conftest import copy_db
from store import open_store
from test_forget import traces

pytestmark = pytest.mark.sqlite_only  # paperclub backup copies SQLite files (pg_dump backs up PostgreSQL)

DAN = "UDAN"
DOCS = Path(__file__).resolve().parent.parent / "docs" / "deploy.md"
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
    subprocess.run(["bash", "-euc", documented_restore()], cwd=fresh, check=True, timeout=60)
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
