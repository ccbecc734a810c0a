"""Shared fixtures: seed-corpus stores (real model and weightless), settings, and the fake Slack.

The real-model store is built once per session (model load plus 38 abstracts,
about 10 s) and copied per test, so tests may write to their copy freely.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import sqlite3
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

# slack_sdk honours HTTP(S)_PROXY but ignores NO_PROXY, and its Socket Mode client
# then forces TLS through the proxy: a proxy in the environment breaks the fake Slack.
for _var in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"):
    os.environ.pop(_var, None)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parent.parent

# Recognisable fake tokens: a test can search logs for the secret parts.
BOT_TOKEN = "xoxb-1111-2222-SECRETBOTTOKEN"
APP_TOKEN = "xapp-1-A1-3333-SECRETAPPTOKEN"
TOKEN_SECRETS = ("SECRETBOTTOKEN", "SECRETAPPTOKEN", BOT_TOKEN, APP_TOKEN)


def _seed(path: Path, embedder) -> Path:
    from store import open_store
    from store import bundled_sample_paths, ingest_paths

    store = open_store(path)
    ingest_paths(store, bundled_sample_paths(), embedder, now=time.time())
    store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()
    return path


# The first lines of a child process that must meet a read-only volume. Root writes through any
# file mode, so as root the child drops only the capabilities that let it (CAP_DAC_OVERRIDE,
# CAP_FOWNER) and stays root otherwise: it still reads the checkout and the interpreter wherever
# they are and whatever their mode (a clone in a mode-700 folder), which switching to nobody did not.
OBEY_FILE_MODES = """import ctypes, os, sys
if os.geteuid() == 0:
    class _Head(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]
    class _Caps(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]
    _libc, _head, _caps = ctypes.CDLL(None, use_errno=True), _Head(0x20080522, 0), (_Caps * 2)()
    assert _libc.capget(ctypes.byref(_head), _caps) == 0, ctypes.get_errno()
    _caps[0].effective &= ~0b1010
    _caps[0].permitted &= ~0b1010
    assert _libc.capset(ctypes.byref(_head), _caps) == 0, ctypes.get_errno()
"""


def copy_db(source: Path, target: Path) -> Path:
    """A private copy of a seeded database file (checkpointed, so the .db file is complete)."""
    shutil.copyfile(source, target)
    return target


@pytest.fixture(scope="session")
def real_embedder():
    """all-MiniLM-L6-v2, loaded once for the session."""
    from store import SentenceTransformerEmbedder

    embedder = SentenceTransformerEmbedder()
    embedder.load()
    # As in the bot (bot/runner.py): on a shared 2-core box a second torch thread made
    # each query encode 50x slower. Tests run beside other developers' work.
    import torch

    torch.set_num_threads(1)
    return embedder


@pytest.fixture(scope="session")
def seed_db(tmp_path_factory, real_embedder) -> Path:
    """A database file holding the bundled ICLR 2026 abstracts embedded with the real model."""
    return _seed(tmp_path_factory.mktemp("seed") / "seed.db", real_embedder)


@pytest.fixture(scope="session")
def hashing_db(tmp_path_factory) -> Path:
    """The same abstracts embedded with the weightless HashingEmbedder (fast, no model)."""
    from store import HashingEmbedder

    return _seed(tmp_path_factory.mktemp("hashing") / "hashing.db", HashingEmbedder())


# The backends the every-backend tests run on: both, unless PAPERCLUB_TEST_BACKENDS names fewer
# (`make check` keeps them to sqlite; `make test` and CI run both).
STORE_BACKENDS = [b for b in os.environ.get("PAPERCLUB_TEST_BACKENDS", "sqlite,postgresql").split(",") if b]
# The test server (CI starts it: .ci/run); PAPERCLUB_TEST_PG points elsewhere.
PG_SERVER = os.environ.get("PAPERCLUB_TEST_PG", "postgresql://postgres@127.0.0.1:5432")


@pytest.fixture(scope="session")
def pg_database():
    """A throwaway PostgreSQL database for this test run, dropped at its end (skips only when
    no server answers)."""
    psycopg = pytest.importorskip("psycopg")
    name = f"paperclub_test_{os.getpid()}_{int(time.time())}"
    try:
        admin = psycopg.connect(f"{PG_SERVER}/postgres", autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as e:
        pytest.skip(f"no PostgreSQL server answers at {PG_SERVER} ({str(e).strip().splitlines()[0]})")
    admin.execute(f'create database "{name}"')
    try:
        yield f"{PG_SERVER}/{name}"
    finally:
        admin.execute(f'drop database if exists "{name}" with (force)')
        admin.close()


class OwnDatabase:
    """A PostgreSQL database of one test's own (the hashing seed in it), which the test can make
    read-only, as a hot standby during a failover answers (or an operator's
    default_transaction_read_only in a full-disk emergency), and writable again. Each switch ends
    the database's sessions, so a pool reconnects under the new setting."""

    def __init__(self, server: str, name: str):
        self.server, self.name, self.url = server, name, f"{server}/{name}"

    def admin(self, *statements) -> None:
        import psycopg

        with psycopg.connect(f"{self.server}/postgres", autocommit=True) as conn:
            for sql, *args in statements:
                conn.execute(sql, *args)

    def _set(self, setting: str) -> None:
        self.admin((f'alter database "{self.name}" {setting}',),
                   ("select pg_terminate_backend(pid) from pg_stat_activity where datname = %s", [self.name]))

    def turn_read_only(self) -> None:
        self._set("set default_transaction_read_only = on")

    def turn_writable(self) -> None:
        self._set("reset default_transaction_read_only")


@pytest.fixture
def own_pg_database(pg_database, hashing_db):
    """An OwnDatabase, writable to begin with; reset and dropped afterwards, so no other test meets it."""
    from store import migrate_store

    server, run_db = pg_database.rsplit("/", 1)
    db = OwnDatabase(server, f"{run_db}_own")
    db.admin((f'create database "{db.name}"',))
    try:
        assert all(copy.ok for copy in migrate_store(str(hashing_db), db.url))
        yield db
    finally:
        db.admin((f'alter database "{db.name}" reset default_transaction_read_only',),
                 (f'drop database if exists "{db.name}" with (force)',))


def pg_schema_url(database_url: str, schema: str) -> str:
    """The URL of one schema in the test database (its search_path)."""
    import psycopg

    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(f'drop schema if exists "{schema}" cascade')
        conn.execute(f'create schema "{schema}"')
    return f"{database_url}?options=-csearch_path%3D{schema}"


def drop_pg_schema(database_url: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(f'drop schema if exists "{schema}" cascade')


@pytest.fixture(params=STORE_BACKENDS)
def store_url(request, tmp_path) -> str:
    """Where a fresh, empty test database lives, for each backend the store tests run on
    (a file for SQLite; a schema of this run's database, dropped after the test, for PostgreSQL)."""
    if request.param == "sqlite":
        yield str(tmp_path / "paperclub.db")
        return
    yield request.getfixturevalue("pg_url")


@pytest.fixture
def pg_url(request, pg_database) -> str:
    """A fresh schema of this run's PostgreSQL test database (dropped after the test)."""
    schema = f"t{os.getpid()}_{abs(hash(request.node.nodeid)) % 10**10}"
    yield pg_schema_url(pg_database, schema)
    drop_pg_schema(pg_database, schema)


def pytest_configure(config):
    config.addinivalue_line("markers", "both_backends: run the test's seeded database (the `backend` "
                                       "fixture: hashing_store, seed_store, seeded_hashing_db) on SQLite and "
                                       "on PostgreSQL")
    config.addinivalue_line("markers", "sqlite_only: the test is about SQLite's file itself (locks, "
                                       "backups): its seeded database stays SQLite whatever the backend")


# A test that reaches the real embedding model through any of these fixtures is `slow` (`make check`
# leaves it out): loading the model and embedding the seed corpus cost seconds on their own.
REAL_MODEL_FIXTURES = frozenset({"real_embedder", "seed_db"})


def pytest_collection_modifyitems(config, items):
    for item in items:
        if REAL_MODEL_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


def pytest_generate_tests(metafunc):
    """A test (or module) marked both_backends that uses `backend` runs once per backend."""
    if "backend" not in metafunc.fixturenames:
        return
    if metafunc.definition.get_closest_marker("sqlite_only"):
        metafunc.parametrize("backend", ["sqlite"], indirect=True, scope="module")
    elif metafunc.definition.get_closest_marker("both_backends"):
        metafunc.parametrize("backend", STORE_BACKENDS, indirect=True, scope="module")


@pytest.fixture(scope="module")
def backend(request) -> str:
    """The backend a test's seeded database is on: SQLite (PAPERCLUB_TEST_BACKEND=postgresql
    moves every unmarked test to PostgreSQL), or each of them under both_backends."""
    return getattr(request, "param", os.environ.get("PAPERCLUB_TEST_BACKEND", "sqlite"))


def seeded_location(request, source: Path, backend: str, target: Path) -> str | Path:
    """A private, writable copy of a seeded SQLite database on `backend`, dropped after the
    requesting test (or module): a file copy for SQLite; for PostgreSQL, a fresh schema of this
    run's test database filled by `paperclub migrate`'s verified copy (store.migrate_store)."""
    if backend == "sqlite":
        return copy_db(source, target)
    from store import migrate_store

    database = request.getfixturevalue("pg_database")
    schema = f"s{os.getpid()}_{abs(hash((request.node.nodeid, str(target)))) % 10**10}"
    url = pg_schema_url(database, schema)
    request.addfinalizer(lambda: drop_pg_schema(database, schema))
    bad = [copy.table for copy in migrate_store(str(source), url) if not copy.ok]
    assert not bad, f"the seed did not copy into PostgreSQL: {bad}"
    return url


@pytest.fixture
def seeded_hashing_db(request, hashing_db, backend, tmp_path) -> str | Path:
    """Where a private copy of the hashing seed lives (a path or a postgresql:// URL), for a
    bot process (tests/botproc.py) or a test that opens the store itself."""
    return seeded_location(request, hashing_db, backend, tmp_path / "hashing.db")


@pytest.fixture
def store(store_url):
    """A fresh, migrated, empty Store (open_store, so every backend runs the same tests)."""
    from store import open_store

    s = open_store(store_url)
    yield s
    s.close()


@pytest.fixture
def seed_store(request, seed_db, backend, tmp_path):
    """A private, writable copy of the real-model seed store (on each backend under both_backends)."""
    from store import open_store

    store = open_store(seeded_location(request, seed_db, backend, tmp_path / "seed.db"))
    yield store
    store.close()


@pytest.fixture
def hashing_store(request, hashing_db, backend, tmp_path):
    """A private, writable copy of the HashingEmbedder seed store (on each backend under both_backends)."""
    from store import open_store

    store = open_store(seeded_location(request, hashing_db, backend, tmp_path / "hashing.db"))
    yield store
    store.close()


@pytest.fixture(params=STORE_BACKENDS)
def quick_busy_store(request, hashing_db, tmp_path, monkeypatch):
    """A private copy of the HashingEmbedder seed, on each backend, whose writers give up on a lock
    another connection holds (StoreBusy) after 0.1 s rather than 15 (SQLite's busy timeout,
    PostgreSQL's lock_timeout), so a test holds a Locker only briefly."""
    import store.backends.postgres as postgres_backend
    import store.backends.sqlite as sqlite_backend
    from store import open_store

    monkeypatch.setattr(sqlite_backend, "BUSY_TIMEOUT_MS", 100)
    monkeypatch.setattr(postgres_backend, "LOCK_TIMEOUT_MS", 100)
    store = open_store(seeded_location(request, hashing_db, request.param, tmp_path / "busy.db"))
    yield store
    store.close()


def make_settings(**overrides):
    """Settings that never read the developer's .env or environment tokens."""
    from bot.config import Settings

    values = dict(slack_bot_token=BOT_TOKEN, slack_app_token=APP_TOKEN, command="/paper",
                  llm_url=None, db=":memory:")
    values.update(overrides)
    return Settings(_env_file=None, **values)


@pytest.fixture(scope="module")
def fork_ctx():
    """The fork server for cheap real `paperclub` processes (tests/forkrun.py), warmed up first."""
    import forkrun

    ctx = forkrun.context()
    # Start the fork server (its imports take seconds) before anything is timed.
    proc = forkrun.start(ctx, ["--version"], env={}, cwd=Path(__file__).parent, log="/dev/null")
    proc.join(120)
    yield ctx
    forkrun.stop_server()


@pytest.fixture
def fake_slack():
    """A fresh fake Slack (Web API, response_url, Socket Mode) on 127.0.0.1."""
    from fake_slack import start_fake_slack

    with start_fake_slack() as fake:
        yield fake
        assert not fake.injections, "markup the bot did not mean reached Slack:\n" + "\n".join(fake.injections[:10])


@pytest.fixture(scope="module")
def module_fake_slack():
    """One fake Slack shared by a module's tests (call .reset() between tests if needed)."""
    from fake_slack import start_fake_slack

    with start_fake_slack() as fake:
        yield fake
        assert not fake.injections, "markup the bot did not mean reached Slack:\n" + "\n".join(fake.injections[:10])


def text_of(message: dict) -> str:
    """Every piece of text in a message, as one string (mrkdwn as Slack receives it)."""
    return message.get("text", "") + " " + json.dumps(message.get("blocks") or [], ensure_ascii=False)


def dispatch_command(app, fake, text: str, *, user: str, channel: str) -> dict:
    """`/paper <text>` through Bolt's dispatch; the one reply posted to its response_url."""
    from slack_bolt import BoltRequest

    url = fake.new_response_url(channel=channel, user=user)
    body = {"command": "/paper", "text": text, "user_id": user, "user_name": user.lower(),
            "channel_id": channel, "channel_name": "general", "team_id": "T1", "api_app_id": "A1",
            "response_url": url, "trigger_id": "1.2.3"}
    assert app.dispatch(BoltRequest(body=body, mode="socket_mode")).status == 200
    replies = fake.responses(url)
    assert len(replies) == 1, replies
    return replies[0]


def card_choices(blocks: list[dict]) -> list[list[str]]:
    """What a member can do on each card of a message, as action ids in the order Slack shows them:
    each button, then each entry of an overflow menu (⋯), whose value names the button it stands for."""
    from bot.blocks import menu_choice

    rows = []
    for b in blocks:
        if b["type"] != "actions":
            continue
        row = []
        for e in b["elements"]:
            if e["type"] == "overflow":
                row += [menu_choice(o["value"])[0] for o in e["options"]]
            else:
                row.append(e["action_id"])
        rows.append(row)
    return rows


def menu_action_body(option_value: str, url: str, *, user: str, channel: str) -> dict:
    """An entry chosen in a paper card's overflow menu, as Slack sends the block_actions payload."""
    body = block_action_body("paper_menu", "", url, user=user, channel=channel)
    body["actions"] = [{"action_id": "paper_menu", "block_id": "b", "type": "overflow",
                        "selected_option": {"text": {"type": "plain_text", "text": "x"}, "value": option_value},
                        "action_ts": "1.5"}]
    return body


def block_action_body(action_id: str, value: str, url: str, *, user: str, channel: str) -> dict:
    """A button click on an ephemeral reply, as Slack sends the block_actions payload."""
    return {"type": "block_actions", "user": {"id": user, "name": user.lower()}, "api_app_id": "A1",
            "team": {"id": "T1"}, "channel": {"id": channel, "name": "general"},
            "container": {"type": "message", "channel_id": channel, "is_ephemeral": True,
                          "message_ts": "1.000001"},
            "response_url": url, "trigger_id": "1.2.3",
            "actions": [{"action_id": action_id, "block_id": "b", "value": value, "type": "button"}]}


class Locker:
    """Another process's connection holding the store's write lock until released: SQLite's file
    lock (BEGIN IMMEDIATE); on PostgreSQL every paperclub table in EXCLUSIVE mode, which, as
    SQLite's lock in WAL mode, lets readers through and makes every writer wait."""

    def __init__(self, store):
        """`store`: an open Store, or a SQLite file's path (a bot process's database)."""
        if getattr(store, "backend", "sqlite") == "sqlite":
            self.conn = sqlite3.connect(getattr(store, "path", store), isolation_level=None, check_same_thread=False)
            self.conn.execute("BEGIN IMMEDIATE")
            self.conn.execute("insert into meta(key, value) values ('locker', 'x') "
                              "on conflict(key) do update set value = 'x'")
        else:
            import psycopg

            self.conn = psycopg.connect(store.url, autocommit=True)
            self.conn.execute("BEGIN")
            tables = self.conn.execute("select string_agg(format('%I', tablename), ', ') from pg_tables "
                                       "where schemaname = current_schema()").fetchone()[0]
            self.conn.execute(f"lock table {tables} in exclusive mode")
        self._lock = threading.Lock()
        self.held = True

    def release(self):
        with self._lock:
            if self.held:
                self.held = False
                self.conn.execute("COMMIT")
                self.conn.close()

    @contextmanager
    def until_retried(self):
        """Hold the lock until the bot says it will try a write the lock refused again (its "database
        busy ... retrying" warning), and free it then, so the retry finds the file free; freed on the way out in any case.
        Yields the retry warnings seen (none: nothing was retried)."""
        try:
            with until_retried("database busy", self.release) as seen:
                yield seen
        finally:
            self.release()


@contextmanager
def until_retried(says: str, then):
    """Call `then()` when the bot warns that it will try a refused write again (a warning holding
    `says`: "database busy", "database read-only"), so its retry finds the database free, with no
    sleep in the test. Yields the retry warnings seen (none: nothing was retried)."""
    seen: list[str] = []

    class OnRetry(logging.Handler):
        def emit(self, record):
            if says in record.getMessage():
                seen.append(record.getMessage())
                then()

    handler = OnRetry(logging.WARNING)
    logging.getLogger().addHandler(handler)
    try:
        yield seen
    finally:
        logging.getLogger().removeHandler(handler)


class Clock:
    """A clock a test can set (`clock.now = ...`); the wall clock until it does."""

    def __init__(self, now=None):
        self.now = now

    def __call__(self):
        from datetime import datetime, timezone

        return self.now if self.now is not None else datetime.now(timezone.utc)


def make_deps(settings, store, searcher, *, slack=True, clock=None, **kw):
    """The bot's wiring (bot.deps.build.build_deps) for a test: a Slack client for SLACK_API_URL unless
    slack=None, and a settable Clock unless one is given."""
    from bot.deps.build import make_client
    from bot.deps.build import build_deps

    client = make_client(settings) if slack is True else slack
    return build_deps(settings, store, searcher, clock=clock or Clock(), slack=client, **kw)
