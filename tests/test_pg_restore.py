"""The PostgreSQL backup and restore docs/scaling.md gives (pg_dump -Fc, then pg_restore) keeps
every forget-me request: a member forgotten after the dump was taken is forgotten again once the
bot starts on the restored database, whether it is restored over the live server's database or
onto a fresh server, a dump from before an upgrade too, and with Docker Compose. The docs' shell
lines run as written, with the test server's URL."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import PG_SERVER
from store import open_store
from store.backends.postgres_migrations import MIGRATIONS
from test_forget import traces

DAN, ANN = "UDAN", "UANN"
DOCS = Path(__file__).resolve().parent.parent / "docs" / "scaling.md"
CLIENTS = ("pg_dump", "pg_restore", "psql")


def backup_section() -> str:
    text = DOCS.read_text()
    return text[text.index("**Back up**"):text.index("**What the replicas share:**")]


def documented_backup(url: str) -> list[str]:
    """docs/scaling.md's pg_dump line for a backup, with this URL."""
    line = re.search(r"`(pg_dump -Fc -f paperclub\.dump)\s+postgresql://\S+`", backup_section())
    assert line, "docs/scaling.md gives no `pg_dump -Fc -f paperclub.dump URL` line"
    return [*line.group(1).split(), url]


def documented_restores() -> list[str]:
    """The ```sh blocks of docs/scaling.md's restore: over the live database, then on a fresh server."""
    return re.findall(r"```sh\n(.*?)```", backup_section(), re.S)


def run_documented(block: str, url: str, cwd: Path) -> None:
    """The block's lines as written, its URL= line pointing at the test database."""
    script, n = re.subn(r"^\s*URL=\S+$", f"URL='{url}'", block, flags=re.M)
    assert n == 1, f"the docs' block sets no URL= line:\n{block}"
    subprocess.run(["bash", "-euc", script], cwd=cwd, check=True, timeout=120)


@pytest.fixture
def pg_clients():
    missing = [name for name in CLIENTS if shutil.which(name) is None]
    if missing:
        pytest.skip(f"PostgreSQL's client programs are not installed ({', '.join(missing)}): "
                    "the documented pg_dump / pg_restore backup cannot run here")


@pytest.fixture
def make_database(pg_clients):
    """A function making a fresh, empty PostgreSQL database (a whole one: pg_dump takes a database);
    each is dropped after the test."""
    psycopg = pytest.importorskip("psycopg")
    try:
        admin = psycopg.connect(f"{PG_SERVER}/postgres", autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as e:
        pytest.skip(f"no PostgreSQL server answers at {PG_SERVER} ({str(e).strip().splitlines()[0]})")
    names: list[str] = []

    def make() -> str:
        name = f"paperclub_pgr_{os.getpid()}_{int(time.time())}_{len(names)}"
        admin.execute(f'create database "{name}"')
        names.append(name)
        return f"{PG_SERVER}/{name}"

    yield make
    for name in names:
        admin.execute(f'drop database if exists "{name}" with (force)')
    admin.close()


@pytest.fixture
def live(make_database, tmp_path):
    """The live database: Dan and Ann in the club, Dan presenting; the documented pg_dump taken
    (paperclub.dump), then Dan runs forget-me, then a newest dump (newest.dump) is taken."""
    url = make_database()
    store = open_store(url)
    store.set_club_member("C1", DAN, active=True, now=1.0)
    store.set_club_member("C1", ANN, active=True, now=2.0)
    store.put_club_session("C1", "2026-12-03", now=3.0, presenter=DAN)
    subprocess.run(documented_backup(url), cwd=tmp_path, check=True, timeout=120)
    store.forget_user(DAN)  # what /paper forget-me runs
    assert traces(store, DAN) == []
    store.close()
    subprocess.run(["pg_dump", "-Fc", "-f", "newest.dump", url], cwd=tmp_path, check=True, timeout=120)
    older = subprocess.run(["pg_restore", "--data-only", "--table", "club_members", "-f", "-", "paperclub.dump"],
                           cwd=tmp_path, check=True, capture_output=True, text=True, timeout=60).stdout
    assert DAN in older, "the older dump should still hold Dan's rows"
    return url


def started(url: str):
    """The store as the bot's start opens it (migrations, then the forget-me list re-applied)."""
    return open_store(url)


def test_the_documented_restore_over_the_live_database_keeps_dan_forgotten(live, tmp_path):
    blocks = documented_restores()
    assert blocks, "docs/scaling.md gives no ```sh block for a PostgreSQL restore"
    run_documented(blocks[0], live, tmp_path)
    store = started(live)
    try:
        assert traces(store, DAN) == []
        assert [m["user"] for m in store.club_members("C1")] == [ANN]  # the dump is back, Ann in it
    finally:
        store.close()


def test_the_documented_restore_onto_a_fresh_server_takes_the_newest_dumps_list(live, make_database, tmp_path):
    """The old server is gone (and its live list with it): the older dump restored into a fresh
    database, the list taken from the newest dump, as the docs' second block does."""
    blocks = documented_restores()
    assert len(blocks) >= 2, "docs/scaling.md gives no ```sh block for a restore onto a fresh server"
    fresh = make_database()
    run_documented(blocks[1], fresh, tmp_path)
    store = started(fresh)
    try:
        assert traces(store, DAN) == []
        assert [m["user"] for m in store.club_members("C1")] == [ANN]
    finally:
        store.close()


@pytest.fixture
def upgraded(make_database, tmp_path, monkeypatch):
    """A database an older paperclub made (before m006_replicas: no replica tables, no club yet) with
    Dan's and Ann's interests, dumped by the documented pg_dump; then this paperclub starts on it
    (every newer migration applied, the club used) and Dan runs forget-me."""
    import store.backends.postgres as postgres

    url = make_database()
    older = MIGRATIONS[:[name for name, _ in MIGRATIONS].index("m006_replicas")]
    with monkeypatch.context() as m:
        m.setattr(postgres, "MIGRATIONS", older)
        store = open_store(url)
        store.add_interest("C1", "video grounding", DAN, model="m", vector=[1.0, 0.0], now=1.0)
        store.add_interest("C1", "mixture of experts routing", ANN, model="m", vector=[0.0, 1.0], now=2.0)
        store.close()
    subprocess.run(documented_backup(url), cwd=tmp_path, check=True, timeout=120)
    store = open_store(url)  # the upgrade
    store.set_club_member("C1", ANN, active=True, now=3.0)
    store.add_interest("C1", "sparse attention", ANN, model="m", vector=[1.0, 1.0], now=4.0)
    store.forget_user(DAN)
    store.close()
    return url


def test_the_documented_restore_of_a_dump_from_before_an_upgrade_starts(upgraded, tmp_path):
    """pg_restore --clean drops only what the dump holds: the tables newer migrations made stayed
    behind while the restored migrations table no longer listed them, and the bot's start failed
    on `relation "processed_events" already exists`. Restored as the docs say, the database is the
    dump's, the bot starts and migrates it as an upgrade from that version, Dan stays forgotten."""
    run_documented(documented_restores()[0], upgraded, tmp_path)
    store = started(upgraded)
    try:
        assert store.schema_version() == (len(MIGRATIONS), len(MIGRATIONS))
        assert [i["text"] for i in store.interests("C1")] == ["video grounding", "mixture of experts routing"]
        assert store.club_members("C1") == []  # the club came after the dump: the dump's state, not a mix
        assert traces(store, DAN) == []
    finally:
        store.close()


COMPOSE = "docker compose -f deploy/compose.yaml --profile postgres"
# No Docker daemon runs the tests: this `docker` stands in for Compose. `exec -T postgres CMD ...`
# runs CMD here against the test database (the service's `-U paperclub` dropped, its database
# `paperclub` named by the test's URL), stdin and stdout passed through as Compose's -T does;
# anything else (stop, up) is written to the log. An exec without -T fails, as its terminal
# would mangle a binary dump.
FAKE_DOCKER = """#!{python}
import os, subprocess, sys
args = sys.argv[1:]
assert args[:5] == ["compose", "-f", "deploy/compose.yaml", "--profile", "postgres"], args
verb, rest = args[5], args[6:]
with open(os.environ["FAKE_DOCKER_LOG"], "a") as log:
    log.write(" ".join([verb, *rest]) + "\\n")
if verb == "exec":
    if rest[:2] != ["-T", "postgres"]:
        sys.exit("exec without -T postgres: " + " ".join(rest))
    cmd, out = rest[2:], []
    while cmd:
        arg = cmd.pop(0)
        if arg == "-U":
            assert cmd.pop(0) == "paperclub"
        else:
            out.append(os.environ["FAKE_DOCKER_DB"] if arg == "paperclub" else arg)
    sys.exit(subprocess.run(out).returncode)
"""


@pytest.fixture
def compose(tmp_path, monkeypatch):
    """Runs a docs line or block as written, its `docker compose` reaching the given database;
    returns the log of what Compose was asked."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    docker = bin_dir / "docker"
    docker.write_text(FAKE_DOCKER.format(python=sys.executable))
    docker.chmod(0o755)
    log = tmp_path / "docker.log"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_DOCKER_LOG", str(log))

    def run(script: str, url: str) -> list[str]:
        log.write_text("")
        subprocess.run(["bash", "-euc", script], cwd=tmp_path, check=True, timeout=120,
                       env={**os.environ, "FAKE_DOCKER_DB": url})
        return log.read_text().splitlines()
    return run


def documented_compose_backup() -> str:
    line = re.search(rf"`({re.escape(COMPOSE)} exec -T postgres pg_dump [^`]*> paperclub\.dump)`", backup_section())
    assert line, "docs/scaling.md gives no Compose pg_dump line"
    return line.group(1)


def documented_compose_restore() -> str:
    blocks = [b for b in documented_restores() if "docker compose" in b]
    assert blocks, "docs/scaling.md gives no ```sh block for a restore with Docker Compose"
    return blocks[0]


def test_the_documented_compose_backup_and_restore_keep_dan_forgotten(make_database, compose):
    """The Compose pg_dump line taken, Dan forgotten after it; the Compose restore block run as
    written stops the bots, brings the dump back with Dan forgotten again on start, then starts them."""
    url = make_database()
    store = open_store(url)
    store.set_club_member("C1", DAN, active=True, now=1.0)
    store.set_club_member("C1", ANN, active=True, now=2.0)
    compose(documented_compose_backup(), url)
    store.forget_user(DAN)
    store.set_club_member("C1", "UCAT", active=True, now=3.0)  # after the dump: gone with the restore
    store.close()
    asked = compose(documented_compose_restore(), url)
    assert asked[0] == "stop bot-pg" and asked[-1] == "up -d bot-pg"
    assert all(line.startswith("exec -T postgres ") for line in asked[1:-1])
    store = started(url)
    try:
        assert traces(store, DAN) == []
        assert [m["user"] for m in store.club_members("C1")] == [ANN]
    finally:
        store.close()
