"""What the first real image build found (issue 16), checked without a Docker engine.

tests/test_container.py runs the image itself where an engine answers; these run everywhere:
the build's inputs (build args, the lock file, the compose note) and the bot's behaviour in a
container's situation (no terminal, a stale heartbeat on the volume, JSON logs, a volume it
cannot write, an empty database).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from bot import runner
from bot.health import DEFAULT_MAX_AGE, check_health
from conftest import APP_TOKEN, BOT_TOKEN, OBEY_FILE_MODES, TOKEN_SECRETS, copy_db
from store import open_store

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"


def paperclub(*args: str, cwd: Path, timeout: float = 60, **env: str) -> subprocess.CompletedProcess:
    """A fresh `paperclub` process with no terminal: stdin is /dev/null, as in `docker run -d`."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "PAPERCLUB_", "LOG_"))}
    environ.update({"PAPERCLUB_MODEL": "hashing-64", **env})
    return subprocess.run([sys.executable, "-m", "bot", *args], cwd=cwd, env=environ, text=True,
                          stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)


def dockerfile_steps() -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", (DEPLOY / "Dockerfile").read_text())
    return [(w.upper(), rest.strip()) for w, _, rest in
            (line.strip().partition(" ") for line in text.splitlines())
            if w and not w.startswith("#")]


def build_args() -> dict[str, str]:
    return dict(a.partition("=")[::2] for w, a in dockerfile_steps() if w == "ARG")


# -- 1. build arguments for the base image and the torch index ---------------------------------
def test_the_base_image_and_the_torch_index_are_build_arguments():
    steps = dockerfile_steps()
    args = build_args()
    assert args["BASE_IMAGE"].startswith("python:3.11-")
    assert args["TORCH_INDEX"] == "https://download.pytorch.org/whl/cpu"
    assert steps[0] == ("ARG", f"BASE_IMAGE={args['BASE_IMAGE']}")  # usable in FROM
    assert ("FROM", "${BASE_IMAGE}") in steps
    [torch_step] = [a for w, a in steps if w == "RUN" and "torch==" in a]
    assert '--index-url "$TORCH_INDEX"' in torch_step and "download.pytorch.org" not in torch_step
    # A URL with credentials must not go in an argument: the Dockerfile offers a secret instead.
    assert "--mount=type=secret,id=pip.conf" in torch_step
    assert "docker history" in (DEPLOY / "Dockerfile").read_text()


# -- 2. no tokens, no terminal ---------------------------------------------------------------
@pytest.mark.slow  # starts a process
def test_run_without_tokens_or_a_terminal_exits_non_zero_naming_the_variable(tmp_path):
    started = time.monotonic()
    out = paperclub("run", "--load-samples", cwd=tmp_path, PAPERCLUB_DB=str(tmp_path / "p.db"),
                    SLACK_BOT_TOKEN="", SLACK_APP_TOKEN="")
    assert out.returncode == 1, out
    [line] = out.stderr.strip().splitlines()
    assert "SLACK_BOT_TOKEN and SLACK_APP_TOKEN are not set" in line and "no terminal" in line
    assert not (tmp_path / "p.db").exists()  # failed before loading anything
    assert time.monotonic() - started < 30

    out = paperclub("run", cwd=tmp_path, PAPERCLUB_DB=str(tmp_path / "p.db"), SLACK_BOT_TOKEN=BOT_TOKEN)
    assert out.returncode == 1
    [line] = out.stderr.strip().splitlines()
    assert line.startswith("Error: SLACK_APP_TOKEN is not set") and "SLACK_BOT_TOKEN" not in line


# -- 3. health is this process's connection ----------------------------------------------------
@pytest.mark.slow  # starts a process
def test_a_heartbeat_left_by_a_stopped_process_is_not_healthy(tmp_path):
    from bot.replica import write_heartbeat

    db = tmp_path / "p.db"
    open_store(db).close()
    # Another process beats, as the bot of an earlier container did, and exits.
    subprocess.run([sys.executable, "-c", "import sys, time; from store import open_store; "
                    "from bot.replica import write_heartbeat; write_heartbeat(open_store(sys.argv[1]), time.time())",
                    str(db)], check=True, timeout=60)
    result = check_health(db, now=time.time())
    assert not result.ok
    assert "has stopped" in result.message and "has not connected" in result.message

    store = open_store(db, migrate=False)  # the running bot (this process) beats: healthy
    write_heartbeat(store, time.time())
    store.close()
    assert check_health(db, now=time.time()).ok


def test_a_bot_that_cannot_write_its_heartbeat_is_not_said_to_be_off_slack(tmp_path):
    """The bot is running and connected, but the database refuses its writes (locked by another
    writer for minutes, a full disk): health must point at the database, not at Slack."""
    from bot.replica import write_heartbeat

    db = tmp_path / "p.db"
    store = open_store(db)
    now = time.time()
    write_heartbeat(store, now - 60, replica="r1")  # this live process's last beat that went in
    stuck = check_health(db, now=now, replica="r1")
    assert not stuck.ok and "60 s" in stuck.message
    assert "not connected to Slack" not in stuck.message and "database" in stuck.message.split(";", 1)[1]

    write_heartbeat(store, now, replica="r1", connected_at=now - 60)  # beating, but off Slack: says so
    store.close()
    off = check_health(db, now=now, replica="r1")
    assert not off.ok and "the bot is not connected to Slack" in off.message


def test_a_lost_connection_shows_within_about_a_minute():
    from bot.cli import cli

    assert DEFAULT_MAX_AGE <= 60 and DEFAULT_MAX_AGE >= 3 * runner.HEARTBEAT_SECONDS
    [max_age] = [p for p in cli.commands["health"].params if p.name == "max_age"]
    assert max_age.default == DEFAULT_MAX_AGE
    [check] = [a for w, a in dockerfile_steps() if w == "HEALTHCHECK"]
    seconds = {k: float(v) for k, v in re.findall(r"--(interval|retries)=(\d+)", check)}
    # Docker marks it unhealthy after `retries` failed checks, one each interval.
    assert DEFAULT_MAX_AGE + seconds["interval"] * seconds["retries"] <= 90


# -- 4. LOG_FORMAT=json means every line ----------------------------------------------------------
def json_lines(text: str) -> list[dict]:
    assert text.strip(), "nothing logged"
    records = [json.loads(line) for line in text.splitlines() if line.strip()]
    assert not [s for s in TOKEN_SECRETS if s in text]
    return records


@pytest.mark.slow  # starts a process
def test_json_logs_hold_the_fatal_lines_too(tmp_path, fake_slack):
    out = paperclub("run", cwd=tmp_path, LOG_FORMAT="json", PAPERCLUB_DB=str(tmp_path / "p.db"))
    assert out.returncode == 1
    [record] = json_lines(out.stderr)
    assert record["level"] == "error" and "SLACK_BOT_TOKEN and SLACK_APP_TOKEN are not set" in record["msg"]

    fake_slack.respond_with("auth.test", {"ok": False, "error": "invalid_auth"})
    out = paperclub("run", cwd=tmp_path, LOG_FORMAT="json", PAPERCLUB_DB=str(tmp_path / "p.db"),
                    SLACK_BOT_TOKEN=BOT_TOKEN, SLACK_APP_TOKEN=APP_TOKEN, SLACK_API_URL=fake_slack.api_url)
    assert out.returncode == 1
    records = json_lines(out.stderr)
    assert "refused the bot token" in records[-1]["msg"] and "invalid_auth" in records[-1]["msg"]
    assert records[-1]["level"] == "error"


@pytest.mark.slow  # starts a process
def test_a_bad_setting_is_a_json_line_with_log_format_json_and_plain_text_without(tmp_path):
    bad = {"PAPERCLUB_CATCH_UP_HOURS": "three"}
    out = paperclub("papers", cwd=tmp_path, LOG_FORMAT="json", **bad)
    assert out.returncode == 1
    [record] = json_lines(out.stderr)
    assert record["level"] == "error" and "PAPERCLUB_CATCH_UP_HOURS" in record["msg"], record
    assert record["msg"].startswith("bad setting in the environment or .env")

    (tmp_path / ".env").write_text("LOG_FORMAT=json\nPAPERCLUB_CATCH_UP_HOURS=three\n")  # both from .env
    out = paperclub("papers", cwd=tmp_path)
    assert out.returncode == 1
    [record] = json_lines(out.stderr)
    assert "PAPERCLUB_CATCH_UP_HOURS" in record["msg"], record

    (tmp_path / ".env").unlink()
    out = paperclub("papers", cwd=tmp_path, **bad)
    assert out.returncode == 1
    [line] = out.stderr.splitlines()
    assert line.startswith("Error: bad setting in the environment or .env: PAPERCLUB_CATCH_UP_HOURS"), line


@pytest.mark.slow  # starts a process
def test_swapped_or_wrong_kind_tokens_stop_the_start_with_a_line_that_names_the_fix(tmp_path):
    for bot, app, says in [(APP_TOKEN, BOT_TOKEN, "are swapped"),
                           (APP_TOKEN, APP_TOKEN, "SLACK_BOT_TOKEN is not a bot token"),
                           (BOT_TOKEN, BOT_TOKEN, "SLACK_APP_TOKEN is not an app-level token")]:
        out = paperclub("run", cwd=tmp_path, LOG_FORMAT="json", PAPERCLUB_DB=str(tmp_path / "p.db"),
                        SLACK_BOT_TOKEN=bot, SLACK_APP_TOKEN=app, SLACK_API_URL="http://127.0.0.1:9/api/")
        assert out.returncode == 1
        records = json_lines(out.stderr)  # and no token in them
        assert says in records[-1]["msg"], records[-1]["msg"]


@pytest.mark.slow  # starts a process
def test_tokens_pasted_with_quotes_or_spaces_reach_slack_as_the_tokens(tmp_path, fake_slack, monkeypatch):
    """`docker run --env-file .env` keeps quotes as part of the value, and a copy can bring a space:
    the start must not call a quoted xoxb- token "not a bot token", nor send Slack the quotes."""
    from bot.config import load_settings

    fake_slack.respond_with("auth.test", {"ok": False, "error": "invalid_auth"})  # so the start ends
    (tmp_path / ".env").write_text(f"SLACK_APP_TOKEN=' {APP_TOKEN} '\n")
    out = paperclub("run", cwd=tmp_path, PAPERCLUB_DB=str(tmp_path / "p.db"),
                    SLACK_BOT_TOKEN=f'"{BOT_TOKEN}"', SLACK_API_URL=fake_slack.api_url)
    assert out.returncode == 1 and "not a bot token" not in out.stderr, out.stderr
    assert [call.token for call in fake_slack.calls("auth.test")] == [BOT_TOKEN]
    assert not any(secret in out.stderr for secret in TOKEN_SECRETS), out.stderr
    monkeypatch.chdir(tmp_path)
    for name in ("SLACK_APP_TOKEN", "SLACK_BOT_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    assert load_settings().slack_app_token.get_secret_value() == APP_TOKEN


@pytest.mark.slow  # starts a process
def test_a_slack_that_cannot_be_reached_or_is_not_slack_is_not_blamed_on_the_token(tmp_path):
    """A wrong SLACK_API_URL or a proxy's page is not a bad token: the line says what to check."""
    import http.server
    import threading

    class Proxy(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(b"<html>Access denied by proxy</html>")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        cases = [(f"http://127.0.0.1:{server.server_port}/api/", "did not answer as Slack"),
                 ("http://127.0.0.1:9/api/", "could not reach Slack"),
                 ("slack.com/api", "SLACK_API_URL")]
        for url, says in cases:
            out = paperclub("run", cwd=tmp_path, PAPERCLUB_DB=str(tmp_path / "p.db"), SLACK_BOT_TOKEN=BOT_TOKEN,
                            SLACK_APP_TOKEN=APP_TOKEN, SLACK_API_URL=url)
            last = out.stderr.strip().splitlines()[-1]
            assert out.returncode == 1 and says in last and "SLACK_API_URL" in last, (url, last)
            assert "refused the bot token" not in last and "Traceback" not in out.stderr, (url, last)
            assert not any(secret in out.stderr for secret in TOKEN_SECRETS), out.stderr
    finally:
        server.shutdown()


# -- 5. the compose file needs Compose v2 ---------------------------------------------------------
def test_the_readme_says_the_compose_file_needs_compose_v2():
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    readme = "\n".join(f.read_text() for f in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))])
    if "name" in compose:  # Compose v1 rejects a top-level name
        assert "Compose v2" in readme and "docker-compose" in readme


# -- 6. the image installs exactly the locked versions ------------------------------------------
def lock(file: str = "requirements.lock") -> dict[str, tuple[Version, set[str]]]:
    """name -> (pinned version, what requires it) from a lock in deploy/ (uv's format)."""
    out, name = {}, None
    for line in (DEPLOY / file).read_text().splitlines():
        if m := re.match(r"^([A-Za-z0-9._-]+)==(\S+)$", line):
            name = canonicalize_name(m[1])
            out[name] = (Version(m[2]), set())
        elif m := re.match(r"^\s+#\s+(?:via\s+)?(\S.*)$", line):
            if name and m[1] != "via":
                out[name][1].add(m[1].strip())
        elif line.strip() and not line.startswith("#"):
            raise AssertionError(f"not a pinned line: {line!r}")
    return out


def test_the_lock_pins_exactly_pyproject_dependencies_and_what_they_need():
    deps = [Requirement(d) for d in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]]
    pins = lock()
    direct = {n for n, (_, via) in pins.items() if "paperclub (pyproject.toml)" in via}
    assert direct == {canonicalize_name(d.name) for d in deps}, "run `make lock` after editing pyproject.toml"
    for d in deps:
        version = pins[canonicalize_name(d.name)][0]
        assert d.specifier.contains(version, prereleases=True), f"{d} but the lock has {version}"
    for name, (_, via) in pins.items():  # nothing stray: each is needed by something locked
        parents = {canonicalize_name(v.split()[0]) for v in via if not v.startswith(("paperclub", "-r"))}
        assert via and parents <= pins.keys(), (name, via)
    # The CPU torch the Makefile installs, never PyPI's CUDA one.
    makefile = (ROOT / "Makefile").read_text()
    makefile_torch = re.search(r"^TORCH\s*\?=\s*torch==(\S+)", makefile, re.M)[1]
    assert pins["torch"][0] == Version(f"{makefile_torch}+cpu")
    # On a user's machine `make run` takes it from PyTorch's CPU index, as the image does, and
    # installs it alone, so no dependency drags in PyPI's CUDA build.
    assert re.search(r"^TORCH_INDEX\s*\?=\s*https://download.pytorch.org/whl/cpu$", makefile, re.M)
    assert "--no-deps" in makefile and "--index-url $(TORCH_INDEX)" in makefile
    runs = " ".join(a for w, a in dockerfile_steps() if w == "RUN")
    assert "pip install -r /tmp/requirements.lock" in runs and "--no-deps --no-build-isolation /tmp/src" in runs


def test_make_test_installs_what_ships_and_pinned_test_tools():
    """A new release of pytest or a plugin cannot turn a green tree red: `make test` installs the
    image's pins and the test extra's, both from deploy/requirements-test.lock."""
    spec = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["test"]
    image, tests = lock(), lock("requirements-test.lock")
    assert {n: v for n, (v, _) in tests.items() if n in image} == {n: v for n, (v, _) in image.items()}, \
        "run `make lock`: the test lock must hold the image's pins unchanged"
    for d in map(Requirement, spec):
        name = canonicalize_name(d.name)
        assert name in tests, f"{d.name} is not in deploy/requirements-test.lock: run `make lock`"
        assert d.specifier.contains(tests[name][0], prereleases=True), f"{d} but the test lock has {tests[name][0]}"
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"grep -v -E '\^\(torch\|pip\)==' deploy/requirements-test\.lock > \$\(VENV\)/constraints\.txt",
                     makefile), "the venv is constrained by the test lock"


def test_any_python_from_3_11_up_is_accepted_and_the_makefile_finds_one(tmp_path):
    spec = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    from packaging.specifiers import SpecifierSet

    assert all(Version(v) in SpecifierSet(spec) for v in ("3.11", "3.12", "3.13")), spec
    # The Makefile's choice, where only a `python3` of 3.11 or newer is on the path.
    shims = tmp_path / "bin"
    shims.mkdir()
    (shims / "python3").symlink_to(sys.executable)
    import shutil

    out = subprocess.run([shutil.which("make"), "-s", "-f", str(ROOT / "Makefile"), "--eval=print-python: ; $(info $(PYTHON))",
                          "print-python"], capture_output=True, text=True, cwd=tmp_path,
                         env={"PATH": str(shims)})
    assert out.stdout.strip() == "python3", out.stderr


def test_the_lock_agrees_with_what_the_tests_run_on():
    """The venv running these tests has the locked versions, so the image runs tested code."""
    from importlib.metadata import PackageNotFoundError, version

    differ = []
    for name, (pinned, _) in lock().items():
        if name in ("pip", "setuptools"):  # the installer's own tools, whatever made the venv
            continue
        try:
            installed = Version(version(name))
        except PackageNotFoundError:
            differ.append(f"{name}: lock {pinned}, not installed")
            continue
        if name == "torch":  # the Makefile takes PyTorch's CPU or default build
            installed, pinned = Version(installed.public), Version(pinned.public)
        if installed != pinned:
            differ.append(f"{name}: lock {pinned}, installed {installed}")
    assert not differ, differ


# -- 7. a /data the bot cannot write -------------------------------------------------------------
@pytest.mark.slow  # starts a process
def test_an_unwritable_data_folder_names_the_path_the_problem_and_the_fix():
    base = Path(tempfile.mkdtemp(prefix="paperclub-ro-", dir="/tmp"))
    try:
        base.chmod(0o755)
        data = base / "data"
        data.mkdir(mode=0o755)
        db = data / "paperclub.db"
        data.chmod(0o555)  # a folder paperclub's user cannot write (root obeys its mode: OBEY_FILE_MODES)
        (base / "x.txt").write_text("An abstract about robots that learn to grasp objects from video.\n")
        # The first ingest creates the database: in a folder it cannot write, it says why.
        code = OBEY_FILE_MODES + "import bot.cli\nbot.cli.main(['--db', sys.argv[1], 'ingest', sys.argv[2]])"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "PAPERCLUB_", "LOG_"))}
        out = subprocess.run([sys.executable, "-c", code, str(db), str(base / "x.txt")], cwd=base,
                             env={**env, "PAPERCLUB_MODEL": "hashing-64"}, capture_output=True, text=True,
                             timeout=60)
        assert out.returncode == 1, out
        [line] = out.stderr.strip().splitlines()
        assert line.startswith(f"error: cannot write the database {db}: permission denied on {data}"), line
        assert f"paperclub runs as uid {os.getuid()}" in line and "chown" in line and "PAPERCLUB_DB" in line
        assert not db.exists()
    finally:
        (base / "data").chmod(0o755)
        for p in sorted(base.rglob("*"), reverse=True):
            p.unlink() if p.is_file() else p.rmdir()
        base.rmdir()


# -- 8. small things ---------------------------------------------------------------------------
@pytest.mark.slow  # starts a process
def test_search_on_an_empty_database_says_to_ingest(tmp_path):
    from store import open_store

    missing = paperclub("--db", str(tmp_path / "missing.db"), "search", "diffusion", cwd=tmp_path)
    assert missing.returncode == 1 and "paperclub ingest" in missing.stderr  # and creates nothing
    assert not (tmp_path / "missing.db").exists()
    open_store(tmp_path / "empty.db").close()
    out = paperclub("--db", str(tmp_path / "empty.db"), "search", "diffusion", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "paperclub ingest" in out.stderr and "No papers match" not in out.stderr


@pytest.mark.slow  # starts a process
def test_search_with_papers_but_no_hit_still_says_no_match(hashing_db, tmp_path):
    db = copy_db(hashing_db, tmp_path / "p.db")
    out = paperclub("--db", str(db), "search", "--collection", "nowhere", "diffusion", cwd=tmp_path,
                    PAPERCLUB_MODEL="hashing-256")
    assert out.returncode == 0, out.stderr
    assert "No papers match." in out.stderr


def test_the_dockerfile_keeps_docker_s_default_stop_signal():
    assert "STOPSIGNAL" not in dict(dockerfile_steps())  # SIGTERM is the default
