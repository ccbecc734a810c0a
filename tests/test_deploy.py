"""Shipping: health, backups while the bot writes, clean SIGTERM, and what the image would run.

No Docker engine runs here, so the container is tested by what it does: the
Dockerfile, compose file and Slack manifest are checked against the code, and
the wheel is built from exactly the files the Dockerfile copies, installed in a
clean venv and run against the fake Slack.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from fnmatch import fnmatch
from pathlib import Path

import pytest
import yaml

from bot import blocks as bk
from bot.health import DEFAULT_MAX_AGE, backup_database, check_health
from conftest import APP_TOKEN, BOT_TOKEN, TOKEN_SECRETS, copy_db, make_deps, make_settings
from store import StoreError, open_store

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
MODEL = "hashing-256"  # the weightless embedder the hashing_db fixture was built with
START_TIMEOUT = 60


def paperclub(*args: str, db: Path | None = None, cwd: Path, exe: str | None = None,
              timeout: float = 60) -> subprocess.CompletedProcess:
    """Run the CLI as a person would (a fresh process; cwd chosen so no .env is read)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "PAPERCLUB_"))}
    cmd = [exe] if exe else [sys.executable, "-m", "bot"]
    if db is not None:
        cmd += ["--db", str(db)]
    return subprocess.run([*cmd, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


# -- health ---------------------------------------------------------------------------------
@pytest.fixture
def live_db(tmp_path) -> Path:
    store = open_store(tmp_path / "live.db")
    store.close()
    return tmp_path / "live.db"


def beat(db: Path, at: float) -> None:
    """A heartbeat at `at` from a running bot (this test process stands in for it)."""
    from bot.health import write_heartbeat

    store = open_store(db, migrate=False)
    write_heartbeat(store, at)
    store.close()


def test_healthy_with_current_schema_and_a_recent_heartbeat(live_db):
    beat(live_db, 1_000_000.0)
    result = check_health(live_db, now=1_000_030.0)
    assert result.ok, result.message
    assert "heartbeat 30 s ago" in result.message


def test_stale_heartbeat_is_unhealthy_and_says_how_stale(live_db):
    beat(live_db, 1_000_000.0)
    assert check_health(live_db, now=1_000_000.0 + DEFAULT_MAX_AGE - 1).ok
    result = check_health(live_db, now=1_000_000.0 + 600)
    assert not result.ok
    assert "600 s ago" in result.message and "not connected" in result.message


def test_no_heartbeat_yet_is_unhealthy(live_db):
    result = check_health(live_db, now=time.time())
    assert not result.ok and "never connected" in result.message


def _migrations(db: Path, sql: str, *args) -> None:
    # Test setup only: fake what another paperclub version would leave in the file.
    conn = sqlite3.connect(db)
    with conn:
        conn.execute(sql, args)
    conn.close()


def test_a_newer_schema_is_unhealthy(live_db):
    beat(live_db, time.time())
    _migrations(live_db, "insert into _sqlite_migrations(migration_set, name, applied_at) "
                         "values ('paperclub', 'm999_from_the_future', 'now')")
    result = check_health(live_db, now=time.time())
    assert not result.ok
    assert "m999_from_the_future" in result.message and "newer paperclub" in result.message


def test_paperclub_health_says_a_newer_schema_once(live_db, tmp_path):
    beat(live_db, time.time())
    _migrations(live_db, "insert into _sqlite_migrations(migration_set, name, applied_at) "
                         "values ('paperclub', 'm999_from_the_future', 'now')")
    out = paperclub("health", db=live_db, cwd=tmp_path)
    assert out.returncode == 1 and not out.stdout
    [line] = out.stderr.splitlines()
    assert line.startswith("unhealthy: ") and "m999_from_the_future" in line, line
    assert line.count("newer") == 1, line


def test_an_unmigrated_schema_is_unhealthy(live_db):
    beat(live_db, time.time())
    _migrations(live_db, "delete from _sqlite_migrations where rowid = (select max(rowid) from "
                         "_sqlite_migrations)")
    result = check_health(live_db, now=time.time())
    assert not result.ok and "schema" in result.message


def test_not_a_database_is_unhealthy(tmp_path):
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite" * 100)
    result = check_health(junk, now=time.time())
    assert not result.ok and "cannot read database" in result.message


@pytest.mark.slow  # starts a process
def test_health_cli_exit_codes_one_line_no_db_created_and_no_torch(tmp_path, live_db):
    missing = tmp_path / "missing.db"
    out = paperclub("health", db=missing, cwd=tmp_path)
    assert out.returncode == 1
    assert out.stderr.strip() == f"unhealthy: no database at {missing}"
    assert not missing.exists()

    beat(live_db, time.time() - 20)
    out = paperclub("health", db=live_db, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ok:")
    out = paperclub("health", "--max-age", "10", db=live_db, cwd=tmp_path)
    assert out.returncode == 1 and "limit 10 s" in out.stderr

    # A HEALTHCHECK runs every minute: it must not pay for importing torch.
    probe = ("import sys, time; t = time.perf_counter(); from bot.cli import main\n"
             "try:\n    main(['--db', sys.argv[1], 'health'])\nexcept SystemExit as e:\n    code = e.code\n"
             "print(code, 'torch' in sys.modules, round(time.perf_counter() - t, 2))")
    code, torch_loaded, seconds = subprocess.run(
        [sys.executable, "-c", probe, str(live_db)], cwd=tmp_path, capture_output=True, text=True,
        timeout=60).stdout.split()[-3:]
    assert (code, torch_loaded) == ("0", "False")
    assert float(seconds) < 3.0  # about 0.5 s here; generous for a busy CI box


# -- backup ---------------------------------------------------------------------------------
BATCH = 10  # the writer adds papers ten at a time, one transaction each


def _paper_rows(start: int) -> list[dict]:
    return [{"id": f"w{i:05d}", "short_name": f"W{i}", "headline": f"Paper {i}",
             "abstract": f"Abstract of paper {i}.", "content_hash": f"h{i}", "collection": "test"}
            for i in range(start, start + BATCH)]


@pytest.mark.sqlite_only  # paperclub backup copies SQLite files (pg_dump backs up PostgreSQL)
def test_backup_while_the_bot_writes_is_consistent_and_restores(hashing_store, tmp_path):
    live = Path(hashing_store.path)
    base = hashing_store.count_papers()
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer():
        store = open_store(live, migrate=False)  # its own connection, as the bot's threads have
        i = 0
        try:
            while not stop.is_set():
                store.write_papers(_paper_rows(i), [], now=time.time())
                i += BATCH
        except BaseException as e:  # surfaced below: a backup must never break the writer
            errors.append(e)
        finally:
            store.close()

    thread = threading.Thread(target=writer)
    thread.start()
    results = []
    try:
        for n in range(5):
            time.sleep(0.05)
            results.append(backup_database(live, tmp_path / f"copy{n}.db"))
    finally:
        stop.set()
        thread.join(30)
    assert not errors, errors
    counts = [r.papers for r in results]
    assert counts == sorted(counts) and counts[-1] > counts[0] >= base, counts  # the writer really ran
    for r in results:
        assert (r.papers - base) % BATCH == 0, "a copy caught half a transaction"
        copy = open_store(r.path, migrate=False)
        assert copy.integrity_ok() and copy.count_papers() == r.papers
        copy.close()
    assert not list(tmp_path.glob(".copy*"))  # no partial files left beside the copies

    # The documented restore: stop the bot, copy over PAPERCLUB_DB, delete -wal/-shm, start.
    hashing_store.close()
    shutil.copyfile(results[0].path, live)
    for side in ("-wal", "-shm"):
        Path(f"{live}{side}").unlink(missing_ok=True)
    restored = open_store(live)
    assert restored.count_papers() == results[0].papers and restored.integrity_ok()
    restored.close()


@pytest.mark.slow  # starts a process
def test_backup_cli_refuses_to_overwrite_without_force(hashing_db, tmp_path):
    live = copy_db(hashing_db, tmp_path / "live.db")
    target = tmp_path / "backup.db"
    target.write_text("an older backup")
    out = paperclub("backup", str(target), db=live, cwd=tmp_path)
    assert out.returncode == 1 and "--force" in out.stderr
    assert target.read_text() == "an older backup"

    out = paperclub("backup", "--force", str(target), db=live, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert re.match(r"Backed up 38 papers to .*backup\.db \(.* MB, schema \d+/\d+, integrity ok\)",
                    out.stdout), out.stdout
    copy = open_store(target, migrate=False)
    assert copy.count_papers() == 38
    copy.close()


def test_backup_of_a_missing_database_creates_nothing(tmp_path):
    with pytest.raises(StoreError, match="no database at"):
        backup_database(tmp_path / "nope.db", tmp_path / "b.db")
    assert not (tmp_path / "nope.db").exists() and not (tmp_path / "b.db").exists()


@pytest.mark.sqlite_only
def test_backup_never_overwrites_the_live_database(hashing_store):
    with pytest.raises(StoreError, match="live database"):
        backup_database(hashing_store.path, hashing_store.path, force=True)
    assert hashing_store.count_papers() == 38


# -- Dockerfile, .dockerignore, compose -----------------------------------------------------
def dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", (DEPLOY / "Dockerfile").read_text())
    out = []
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            word, _, rest = line.strip().partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def copy_sources() -> list[str]:
    """What the Dockerfile COPYs from the build context (the repo root)."""
    sources = []
    for word, args in dockerfile():
        if word == "COPY":
            parts = [p for p in args.split() if not p.startswith("--")]
            sources += parts[:-1]
    return sources


def dockerignored(path: str) -> bool:
    """.dockerignore semantics for top-level paths: the last matching pattern wins."""
    ignored = False
    for line in (ROOT / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pattern = line.lstrip("!").rstrip("/")
        if fnmatch(path, pattern) or fnmatch(path, pattern.removeprefix("**/")):
            ignored = not negate
    return ignored


def test_dockerfile_runs_real_commands_as_a_non_root_user():
    from bot.cli import cli

    steps = dict(dockerfile())  # last one wins, as in Docker
    assert json.loads(steps["ENTRYPOINT"]) == ["paperclub"]
    cmd = json.loads(steps["CMD"])
    assert cmd[0] in cli.commands
    assert {o for p in cli.commands[cmd[0]].params for o in p.opts} >= set(cmd[1:])
    health = steps["HEALTHCHECK"].split("CMD", 1)[1].strip()
    assert json.loads(health) == ["paperclub", "health"] and "health" in cli.commands
    assert steps["USER"].split(":")[0] not in ("0", "root")
    assert steps.get("STOPSIGNAL", "SIGTERM") == "SIGTERM"  # Docker's default, which the bot handles
    env = steps["ENV"]
    for setting in ("HF_HUB_OFFLINE=1", "TRANSFORMERS_OFFLINE=1", "PAPERCLUB_DB=/data/"):
        assert setting in env
    torch_step = next(a for w, a in dockerfile() if w == "RUN" and "torch" in a)
    torch_index = next(a for w, a in dockerfile() if w == "ARG" and a.startswith("TORCH_INDEX="))
    assert "download.pytorch.org/whl/cpu" in torch_index  # never the CUDA build from PyPI
    assert "$TORCH_INDEX" in torch_step


def test_build_context_holds_what_the_dockerfile_copies_and_no_secrets():
    sources = copy_sources()
    assert {"pyproject.toml", "bot", "store"} <= set(sources)
    for src in sources:
        assert (ROOT / src).exists(), src
        assert not dockerignored(src), f".dockerignore drops {src}, which the Dockerfile copies"
    for secret in (".env", ".venv", "paperclub.db", ".git", "tests"):
        assert dockerignored(secret), f"{secret} would be sent to the Docker daemon"


def test_compose_keeps_data_restarts_and_allows_a_clean_stop():
    from bot import runner

    service = yaml.safe_load((DEPLOY / "compose.yaml").read_text())["services"]["bot"]
    assert service["build"]["dockerfile"] == "deploy/Dockerfile"
    assert (DEPLOY / service["build"]["context"] / "pyproject.toml").exists()
    assert service["env_file"] and service["restart"] == "unless-stopped"
    volume = next(v for v in service["volumes"] if v.endswith(":/data"))
    # environment beats env_file: a PAPERCLUB_DB=./paperclub.db copied from .env.example
    # would otherwise put the database outside the volume, lost on the next `up`.
    assert service["environment"]["PAPERCLUB_DB"].startswith("/data/")
    assert volume.split(":")[0] in yaml.safe_load((DEPLOY / "compose.yaml").read_text())["volumes"]
    grace = float(service["stop_grace_period"].rstrip("s"))
    assert grace >= runner.CLOSE_SECONDS + runner.DRAIN_SECONDS + 10  # closing the socket, the drain, room to spare


def compose_services(profiles: set[str] = frozenset()) -> dict:
    """The services `docker compose --profile P ...` enables: those with no profile or one of P."""
    services = yaml.safe_load((DEPLOY / "compose.yaml").read_text())["services"]
    return {name: s for name, s in services.items() if not s.get("profiles") or set(s["profiles"]) & profiles}


def test_compose_default_is_one_bot_on_sqlite():
    assert list(compose_services()) == ["bot"]
    assert not compose_services()["bot"]["environment"]["PAPERCLUB_DB"].startswith("postgres")


def test_compose_postgres_profile_runs_two_replicas_on_a_healthy_postgresql():
    from store import database_address

    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    services = compose_services({"postgres"})
    db, bots = services["postgres"], services["bot-pg"]
    assert re.fullmatch(r"postgres:1[56](\.\d+)*", db["image"])
    data = next(v for v in db["volumes"] if v.endswith(":/var/lib/postgresql/data"))
    assert data.split(":")[0] in compose["volumes"]  # a named volume: the store outlives the container
    check = db["healthcheck"]["test"]
    assert check[0] == "CMD" and check[1] == "pg_isready"
    assert f"--username={db['environment']['POSTGRES_USER']}" in check
    url = bots["environment"]["PAPERCLUB_DB"]
    assert url == (f"postgresql://{db['environment']['POSTGRES_USER']}@postgres:5432/"
                   f"{db['environment']['POSTGRES_DB']}")
    assert database_address(url) == "postgres:5432"
    assert bots["deploy"]["replicas"] == 2
    assert bots["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert "PAPERCLUB_REPLICA_ID" not in bots["environment"]  # one value would be shared by both replicas
    assert "volumes" not in bots  # nothing on a per-host volume: the replicas share only the database
    single = services["bot"]
    for key in ("build", "image", "env_file", "restart", "init", "stop_grace_period"):
        assert bots[key] == single[key], key
    # Without naming bot-pg, the profile would also start the SQLite bot beside the replicas.
    readme = "\n".join(f.read_text() for f in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))])
    assert "docker compose -f deploy/compose.yaml --profile postgres up -d --build bot-pg" in readme


# -- the Slack manifest ---------------------------------------------------------------------
# Bot scopes each Web API method needs (slack_sdk WebClient method names) and each event.
METHOD_SCOPES = {
    "auth_test": set(), "views_publish": set(), "views_open": set(), "apps_connections_open": set(),
    "chat_postMessage": {"chat:write"}, "chat_postEphemeral": {"chat:write"},
    "chat_update": {"chat:write"}, "chat_delete": {"chat:write"}, "chat_getPermalink": set(),
    "conversations_history": {"channels:history", "groups:history", "im:history"},
    "conversations_open": {"im:write"},
    "conversations_replies": {"channels:history", "groups:history"},
    "conversations_info": {"channels:read", "groups:read"},
    "conversations_members": {"channels:read", "groups:read"},
    "reactions_get": {"reactions:read"}, "reactions_add": {"reactions:write"},
    "users_info": {"users:read"}, "chat_unfurl": {"links:write"}, "files_upload_v2": {"files:write"},
}
EVENT_SCOPES = {
    "app_home_opened": set(),
    "reaction_added": {"reactions:read"}, "reaction_removed": {"reactions:read"},
    "member_joined_channel": {"channels:read", "groups:read"},
    "member_left_channel": {"channels:read", "groups:read"},
    "link_shared": {"links:read"},
    "channel_unarchive": {"channels:read"}, "group_unarchive": {"groups:read"},
}
SAMPLE_EVENTS = {
    "reaction_added": {"type": "reaction_added", "user": "U1", "reaction": "thumbsup", "item_user": "U2",
                       "item": {"type": "message", "channel": "C1", "ts": "1.1"}, "event_ts": "1.2"},
    "reaction_removed": {"type": "reaction_removed", "user": "U1", "reaction": "thumbsup", "item_user": "U2",
                         "item": {"type": "message", "channel": "C1", "ts": "1.1"}, "event_ts": "1.3"},
    "member_joined_channel": {"type": "member_joined_channel", "user": "W1", "channel": "C1",
                              "channel_type": "C", "team": "T1", "event_ts": "1.4"},
    "member_left_channel": {"type": "member_left_channel", "user": "W1", "channel": "C1",
                            "channel_type": "C", "team": "T1", "event_ts": "1.7"},
    "channel_unarchive": {"type": "channel_unarchive", "channel": "C1", "user": "U2", "event_ts": "1.8"},
    "group_unarchive": {"type": "group_unarchive", "channel": "G1", "actor_id": "U2", "event_ts": "1.9"},
    "app_home_opened": {"type": "app_home_opened", "user": "U9", "tab": "home", "channel": "D9",
                        "event_ts": "1.5"},
    # a listing page, not a paper: the listener answers it without fetching anything
    "link_shared": {"type": "link_shared", "channel": "C1", "user": "U1", "message_ts": "1.1",
                    "unfurl_id": "C1.11.x", "source": "conversations_history",
                    "links": [{"domain": "arxiv.org", "url": "https://arxiv.org/list/cs.LG/new"}], "event_ts": "1.6"},
}


@pytest.fixture(scope="module")
def manifest() -> dict:
    return yaml.safe_load((DEPLOY / "manifest.yml").read_text())


def web_api_calls() -> set[str]:
    """slack_sdk WebClient methods called anywhere in bot/ (store/ never talks to Slack)."""
    from slack_sdk import WebClient

    called = set()
    for path in (ROOT / "bot").rglob("*.py"):  # bot/club/ too
        for name in re.findall(r"\b(?:client|slack)\.(\w+)\(", path.read_text()):
            if callable(getattr(WebClient, name, None)) and name not in ("api_call",):
                called.add(name)
    return called


def test_manifest_is_socket_mode_with_the_default_command(manifest):
    features, settings = manifest["features"], manifest["settings"]
    assert settings["socket_mode_enabled"] is True and settings["interactivity"]["is_enabled"] is True
    assert features["app_home"]["home_tab_enabled"] is True
    # The presenter's DM shows in the Messages tab, which is read-only: nothing reads replies there.
    assert features["app_home"]["messages_tab_enabled"] is True
    assert features["app_home"]["messages_tab_read_only_enabled"] is True
    assert features["bot_user"]["display_name"]
    [command] = features["slash_commands"]
    assert command["command"] == make_settings().command == "/paper"
    assert command["should_escape"] is True and command["usage_hint"] and command["description"]
    assert "url" not in command  # Socket Mode: commands arrive over the socket
    # Limits from Slack's manifest schema (manifest.schema.1.0.0.json).
    assert 2 <= len(command["command"]) <= 32 and len(manifest["display_information"]["name"]) <= 35
    assert len(manifest["display_information"].get("description", "")) <= 140
    assert set(manifest) <= {"_metadata", "display_information", "features", "oauth_config", "settings"}


def test_manifest_asks_for_exactly_the_scopes_the_code_needs(manifest):
    called = web_api_calls()
    unknown = called - METHOD_SCOPES.keys()
    assert not unknown, f"add the scopes these Web API methods need to METHOD_SCOPES and the manifest: {unknown}"
    events = manifest["settings"]["event_subscriptions"]["bot_events"]
    needed = {"commands"}.union(*(METHOD_SCOPES[m] for m in called), *(EVENT_SCOPES[e] for e in events))
    assert set(manifest["oauth_config"]["scopes"]["bot"]) == needed
    assert "user" not in manifest["oauth_config"]["scopes"]  # a bot token only


def test_every_subscribed_event_has_a_listener_and_every_listener_is_subscribed(
        manifest, hashing_store, fake_slack):
    from slack_bolt.request import BoltRequest
    from slack_sdk import WebClient

    from bot.app import create_app
    from store import HashingEmbedder
    from store import Searcher

    events = manifest["settings"]["event_subscriptions"]["bot_events"]
    deps = make_deps(make_settings(), hashing_store, Searcher(hashing_store, HashingEmbedder()), slack=None)
    app = create_app(deps, client=WebClient(token=BOT_TOKEN, base_url=fake_slack.api_url),
                     process_before_response=True)
    for i, name in enumerate(events):
        body = {"type": "event_callback", "token": "t", "team_id": "T1", "api_app_id": "A1",
                "event_id": f"Ev{i}", "event_time": 1, "event": SAMPLE_EVENTS[name],
                "authorizations": [{"team_id": "T1", "user_id": "UBOT", "is_bot": True}]}
        response = app.dispatch(BoltRequest(body=body, mode="socket_mode"))
        assert response.status == 200, f"no listener for subscribed event {name}"
    listened = set()
    for path in (ROOT / "bot").rglob("*.py"):  # bot/club/ too
        listened |= set(re.findall(r"""\.event\(\s*["'](\w+)["']""", path.read_text()))
    assert listened <= set(events), f"listeners for events Slack will never send: {listened - set(events)}"


# -- the running bot: SIGTERM mid-command, heartbeat, JSON logs -----------------------------
class BotProcess:
    """`paperclub run` in its own process against the fake Slack; logs go to a file."""

    def __init__(self, fake, db: Path, cwd: Path, exe: list[str], args=("run",), **env):
        self.fake, self.db, self.log = fake, db, cwd / "bot.log"
        environ = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "PAPERCLUB_"))}
        environ.update(SLACK_BOT_TOKEN=BOT_TOKEN, SLACK_APP_TOKEN=APP_TOKEN, SLACK_API_URL=fake.api_url,
                       PAPERCLUB_DB=str(db), PAPERCLUB_MODEL=MODEL, LOG_FORMAT="json",
                       PYTHONUNBUFFERED="1", **env)
        with open(self.log, "w") as out:
            self.proc = subprocess.Popen([*exe, *args], cwd=cwd, env=environ, stdout=out,
                                         stderr=subprocess.STDOUT)

    def logs(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_connected(self) -> None:
        self.fake.wait_for(lambda: "connected to Slack" in self.logs() or self.proc.poll() is not None,
                           timeout=START_TIMEOUT)
        assert self.proc.poll() is None, self.logs()[-3000:]
        self.fake.wait_connected(timeout=10)

    def stop(self, timeout: float = 30) -> tuple[int, float]:
        """SIGTERM, then (exit code, seconds it took to exit)."""
        started = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout)
        return code, time.monotonic() - started

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@contextmanager
def running_bot(fake, db: Path, cwd: Path, exe: list[str] | None = None, **kw):
    bot = BotProcess(fake, db, cwd, exe or [sys.executable, "-m", "bot"], **kw)
    try:
        bot.wait_connected()
        yield bot
    finally:
        bot.kill()


def command(fake, text: str, timeout: float = 10) -> dict:
    """`/paper <text>` from U1 in C1; the first reply to its response_url."""
    url = fake.new_response_url(channel="C1", user="U1")
    fake.wait_ack(fake.slash_command(text, response_url=url), timeout=5)
    return fake.wait_for(lambda: fake.responses(url), timeout=timeout)[0]


def share(fake, paper_id: str) -> str:
    """Click "Share to channel" on an ephemeral reply; returns the click's response_url."""
    url = fake.new_response_url(channel="C1", user="U1")
    fake.wait_ack(fake.block_action(bk.ACTION_SHARE, paper_id, response_url=url, is_ephemeral=True),
                  timeout=5)
    return url


def assert_json_lines_without_tokens(logs: str) -> list[dict]:
    records = [json.loads(line) for line in logs.splitlines() if line.strip()]
    assert all({"ts", "level", "logger", "msg"} <= r.keys() for r in records)
    assert not [s for s in TOKEN_SECRETS if s in logs], "a token reached the log"
    return records


@pytest.mark.slow
def test_sigterm_during_a_command_finishes_it_then_exits(hashing_db, fake_slack, tmp_path):
    db = copy_db(hashing_db, tmp_path / "bot.db")
    with running_bot(fake_slack, db, tmp_path) as bot:
        out = paperclub("health", db=db, cwd=tmp_path)
        assert out.returncode == 0 and "heartbeat" in out.stdout, out.stderr

        paper = open_store(db, migrate=False).list_papers(limit=1)[0]
        fake_slack.delay("chat.postMessage", 3, times=1)
        url = share(fake_slack, paper.id)
        fake_slack.wait_for(lambda: fake_slack.calls("chat.postMessage"), timeout=10)
        code, seconds = bot.stop()  # while Slack is still holding the post

    assert code == 0, bot.logs()[-3000:]
    posts = fake_slack.messages("C1")
    assert len(posts) == 1 and paper.short_name in json.dumps(posts[0])
    assert "Shared" in fake_slack.responses(url)[-1]["text"]  # the user was told, too
    assert fake_slack.connections_open == 0
    records = assert_json_lines_without_tokens(bot.logs())
    messages = [r["msg"] for r in records]
    assert "received SIGTERM, shutting down" in messages and messages[-1] == "stopped"
    assert not [r for r in records if r["level"] == "error"]
    store = open_store(db, migrate=False)
    assert store.integrity_ok() and store.count_papers() == 38
    store.close()


# -- the wheel, installed clean, runs the bot ----------------------------------------------
def _package_files(root: Path) -> set[str]:
    """Every file of the two packages in a source tree, as wheel paths."""
    return {p.relative_to(root).as_posix() for pkg in ("bot", "store") for p in (root / pkg).rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"}


@pytest.mark.slow
def test_the_wheel_installed_in_a_clean_venv_runs_the_bot_with_its_bundled_data(tmp_path, fake_slack):
    import sysconfig
    import zipfile

    # Build from exactly what the Dockerfile copies, so a file the image would miss fails here.
    src = tmp_path / "src"
    for name in copy_sources():
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / name, src / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    # --no-build-isolation: the venv's setuptools builds it, with no network.
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", tmp_path / "dist", src],
                   check=True, timeout=120)
    [wheel] = (tmp_path / "dist").glob("paperclub-*.whl")
    shipped = set(zipfile.ZipFile(wheel).namelist())
    missing = _package_files(src) - shipped
    assert not missing, f"in the source tree but not in the wheel (pyproject packages/package-data): {missing}"

    # A clean venv (no system or project site-packages) with only our wheel in it; the
    # third-party dependencies come from the project venv by a .pth line, so torch is not
    # reinstalled but nothing of ours can leak in from the source tree.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True, timeout=60)
    python = venv / "bin" / "python"
    subprocess.run([*pip, "--python", python, "install", "--no-deps", wheel], check=True, timeout=120)
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    (Path(site) / "_project_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    where = subprocess.run([python, "-c", "import bot, store; print(bot.__file__, store.__file__)"],
                           cwd=tmp_path, capture_output=True, text=True, check=True).stdout.split()
    assert all(w.startswith(site) for w in where), where

    # From an empty directory, as the container's entry point: first start loads the bundled corpus.
    home = tmp_path / "empty"
    home.mkdir()
    db = home / "data" / "paperclub.db"
    exe = [str(venv / "bin" / "paperclub")]
    with running_bot(fake_slack, db, home, exe=exe, args=("run", "--load-samples")) as bot:
        assert open_store(db, migrate=False).count_papers() == 38
        reply = command(fake_slack, "search speculative decoding")
        assert "hit-1-" in json.dumps(reply["blocks"])
        paper = open_store(db, migrate=False).list_papers(limit=1)[0]
        reply = command(fake_slack, f"summary {paper.id}")
        assert "*TL;DR*" in json.dumps(reply["blocks"])  # store/data/summary_weights.json shipped
        out = paperclub("health", db=db, cwd=home, exe=exe[0])
        assert out.returncode == 0, out.stderr
        code, _ = bot.stop()
    assert code == 0
    records = assert_json_lines_without_tokens(bot.logs())
    assert any(r["msg"].startswith("bundled abstracts: 38 added") for r in records), bot.logs()[-2000:]
    assert not [r for r in records if r["level"] in ("warning", "error") and r["logger"] != "paperclub.slack"]


@pytest.mark.slow
def test_sigterm_during_a_daily_post_abandons_it_in_time_and_the_restart_posts_it_once(
        hashing_db, fake_slack, tmp_path):
    from datetime import datetime, timedelta, timezone

    from bot import runner
    from bot.posting import EVENT_TYPE

    db = copy_db(hashing_db, tmp_path / "bot.db")
    now = datetime.now(timezone.utc)
    due = now - timedelta(minutes=2)  # missed two minutes ago: start-up catches it up at once
    store = open_store(db, migrate=False)
    store.set_schedule("C1", hour=due.hour, minute=due.minute, tz="UTC", days="daily", set_by="U1",
                       now=(now - timedelta(hours=1)).timestamp())
    day = due.date().isoformat()

    def digests():
        return [m for m in fake_slack.messages("C1")
                if (m.get("metadata") or {}).get("event_type") == EVENT_TYPE]

    # Slack rate-limits for a minute both the daily post and a share clicked meanwhile:
    # SIGTERM arrives while both wait to retry, far longer than any stop grace period.
    fake_slack.fail("chat.postMessage", status=429, retry_after=60, times=2)
    with running_bot(fake_slack, db, tmp_path) as bot:
        fake_slack.wait_for(lambda: fake_slack.calls("chat.postMessage"), timeout=30)
        share(fake_slack, store.list_papers(limit=1)[0].id)
        fake_slack.wait_for(lambda: len(fake_slack.calls("chat.postMessage")) == 2, timeout=10)
        code, seconds = bot.stop(timeout=90)
    assert code == 0, bot.logs()[-3000:]
    # Inside compose's 30 s stop_grace_period, so Docker never has to SIGKILL the bot.
    assert seconds < runner.CLOSE_SECONDS + runner.DRAIN_SECONDS + 5, f"took {seconds:.1f} s to exit"
    assert any("gave up waiting for work in flight" in r["msg"]
               for r in assert_json_lines_without_tokens(bot.logs()))
    assert digests() == []
    assert store.get_post("C1", day)["status"] == "claimed"  # abandoned, left for the next start
    assert store.integrity_ok()

    with running_bot(fake_slack, db, tmp_path) as bot:  # the next start makes that post, once
        fake_slack.wait_for(lambda: (store.get_post("C1", day) or {}).get("status") == "posted",
                            timeout=30)
        code, _ = bot.stop()
    assert code == 0
    assert len(digests()) == 1
    assert_json_lines_without_tokens(bot.logs())
    store.close()
