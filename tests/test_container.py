"""The image itself: built with deploy/Dockerfile as it is, run against the fake Slack.

Needs a Docker engine (`docker info`); skipped with the reason otherwise. CI sets one up
with deploy/ci-image-prereqs.sh, which also says what the build needs here: build args in
PAPERCLUB_BUILD_ARGS (a local CPU torch wheel server) and PAPERCLUB_BUILD_NETWORK=host.
The containers use host networking so they reach the fake Slack on 127.0.0.1.
One build, one volume: the bot starts, answers, is replaced (read-only, no capabilities) and
keeps its data; the failure modes that need no Slack run in throwaway containers.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from conftest import APP_TOKEN, BOT_TOKEN, TOKEN_SECRETS
from fake_slack import start_fake_slack

ROOT = Path(__file__).resolve().parent.parent
DOCKER = os.environ.get("PAPERCLUB_DOCKER", "docker")
TAG = os.environ.get("PAPERCLUB_TEST_IMAGE", "paperclub:test")
GRACE = 30  # compose's stop_grace_period
UID = "10001"


def _engine_problem() -> str | None:
    if os.environ.get("PAPERCLUB_CONTAINER_SKIP"):  # set by deploy/ci-image-prereqs.sh
        return os.environ["PAPERCLUB_CONTAINER_SKIP"]
    try:
        out = subprocess.run([DOCKER, "info", "--format", "{{.ServerVersion}}"], capture_output=True,
                             text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"no Docker engine ({DOCKER} info: {e})"
    if out.returncode != 0 or not out.stdout.strip():
        return f"no Docker engine answers `{DOCKER} info` (CI sets one up: deploy/ci-image-prereqs.sh)"
    return _buildkit_problem()


def _buildkit_problem() -> str | None:
    """The Dockerfile needs BuildKit (a secret mount): a client from Docker 23 on has it only
    through the buildx plugin; older ones (Debian's docker.io 20.10) have it built in."""
    if subprocess.run([DOCKER, "buildx", "version"], capture_output=True, timeout=30).returncode == 0:
        return None
    version = subprocess.run([DOCKER, "version", "--format", "{{.Client.Version}}"], capture_output=True,
                             text=True, timeout=30).stdout.strip()
    major = re.match(r"(\d+)\.", version)
    if major and int(major.group(1)) < 23:
        return None
    return (f"`{DOCKER}` (client {version or 'of unknown version'}) has no buildx, and the image needs "
            "BuildKit: install the buildx plugin, or set PAPERCLUB_DOCKER to a client with BuildKit "
            "(deploy/ci-image-prereqs.sh does)")


PROBLEM = _engine_problem()
pytestmark = [pytest.mark.slow, pytest.mark.skipif(PROBLEM is not None, reason=PROBLEM or "")]


def docker(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
    out = subprocess.run([DOCKER, *args], capture_output=True, text=True, timeout=timeout,
                         env={**os.environ, "DOCKER_BUILDKIT": "1"})
    if check and out.returncode != 0:
        raise AssertionError(f"docker {' '.join(args)} exited {out.returncode}: {out.stderr[-3000:]}")
    return out


@pytest.fixture(scope="module")
def image() -> str:
    """Built once per run from the project's Dockerfile, unchanged; only --build-arg's added."""
    args = shlex.split(os.environ.get("PAPERCLUB_BUILD_ARGS", ""))
    assert all(a == "--build-arg" or args[i - 1] == "--build-arg" for i, a in enumerate(args)), args
    network = os.environ.get("PAPERCLUB_BUILD_NETWORK")
    started = time.monotonic()
    docker("build", "-f", str(ROOT / "deploy" / "Dockerfile"), "-t", TAG, *args,
           *(["--network", network] if network else []), str(ROOT), timeout=1800)
    size = int(docker("image", "inspect", TAG, "--format", "{{.Size}}").stdout)
    print(f"\nimage {TAG}: built in {time.monotonic() - started:.0f} s, {size / 1e9:.2f} GB")
    return TAG


@pytest.fixture(scope="module")
def fake():
    with start_fake_slack() as fake:
        yield fake


class Names:
    """Containers and volumes made by this module, removed at its end."""

    def __init__(self):
        self.prefix = f"paperclub-test-{uuid.uuid4().hex[:8]}"
        self.containers: list[str] = []
        self.volumes: list[str] = []

    def container(self, what: str) -> str:
        self.containers.append(f"{self.prefix}-{what}")
        return self.containers[-1]

    def volume(self, what: str) -> str:
        self.volumes.append(f"{self.prefix}-{what}")
        docker("volume", "create", self.volumes[-1])
        return self.volumes[-1]


@pytest.fixture(scope="module")
def names():
    made = Names()
    yield made
    for c in made.containers:
        docker("rm", "-f", "-v", c, check=False)
    for v in made.volumes:
        docker("volume", "rm", "-f", v, check=False)


def start_bot(image: str, name: str, fake, *extra: str, **env: str) -> str:
    environ = {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_APP_TOKEN": APP_TOKEN, "SLACK_API_URL": fake.api_url,
               "LOG_FORMAT": "json", **env}
    flags = [f for k, v in environ.items() for f in ("-e", f"{k}={v}")]
    docker("run", "-d", "--name", name, "--network", "host", *flags, *extra, image)
    return name


def logs(name: str) -> str:
    out = docker("logs", name, check=False)
    return out.stdout + out.stderr


def wait_logged(name: str, text: str, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while text not in logs(name):
        state = json.loads(docker("inspect", name, "--format", "{{json .State}}").stdout)
        assert state["Running"], f"{name} exited {state['ExitCode']}: {logs(name)[-3000:]}"
        assert time.monotonic() < deadline, f"no {text!r} within {timeout} s: {logs(name)[-3000:]}"
        time.sleep(0.5)


def health(name: str) -> subprocess.CompletedProcess:
    return docker("exec", name, "paperclub", "health", check=False, timeout=60)


def command(fake, text: str, timeout: float = 20) -> tuple[dict, float]:
    url = fake.new_response_url(channel="C1", user="U1")
    _, ack = fake.wait_ack(fake.slash_command(text, response_url=url), timeout=10)
    return fake.wait_for(lambda: fake.responses(url), timeout=timeout)[0], ack


def stop(name: str) -> tuple[int, float]:
    started = time.monotonic()
    docker("stop", "--time", str(GRACE), name, timeout=GRACE + 30)
    seconds = time.monotonic() - started
    return int(docker("inspect", name, "--format", "{{.State.ExitCode}}").stdout), seconds


def json_records(text: str) -> list[dict]:
    records = []
    for line in text.splitlines():
        if line.strip():
            try:
                records.append(json.loads(line))
            except ValueError:
                raise AssertionError(f"not a JSON log line: {line!r}") from None
    assert not [s for s in TOKEN_SECRETS if s in text], "a token reached the log"
    return records


def test_the_bot_answers_keeps_its_data_across_a_replacement_and_stops_cleanly(image, fake, names):
    data = names.volume("data")
    first = start_bot(image, names.container("first"), fake, "-v", f"{data}:/data")
    out = health(first)
    assert out.returncode == 1 and out.stderr.startswith("unhealthy:"), out  # not connected yet
    wait_logged(first, "connected to Slack")
    fake.wait_connected(timeout=20)

    assert docker("exec", first, "id", "-u").stdout.strip() == UID
    status = docker("exec", first, "cat", "/proc/1/status").stdout  # PID 1 is the bot itself
    assert f"Uid:\t{UID}\t{UID}" in status and "(paperclub)" in docker("exec", first, "cat", "/proc/1/stat").stdout
    reply, ack = command(fake, "search speculative decoding")
    assert ack < 3.0 and "hit-1-" in json.dumps(reply["blocks"])
    reply, _ = command(fake, "schedule 09:30 UTC")
    assert "09:30" in json.dumps(reply)
    out = health(first)
    assert out.returncode == 0 and out.stdout.startswith("ok:"), out.stderr

    code, seconds = stop(first)
    assert code == 0 and seconds < GRACE, (code, seconds, logs(first)[-3000:])
    records = json_records(logs(first))
    assert any(r["msg"].startswith("bundled abstracts: 38 added") for r in records)
    assert records[-1]["msg"] == "stopped"

    # The replacement: same volume, read-only root, no capabilities, only /tmp writable.
    # Until it connects, the first bot's heartbeat on the volume must not make it healthy.
    fake.delay("apps.connections.open", 8, times=1)
    second = start_bot(image, names.container("second"), fake, "-v", f"{data}:/data",
                       "--read-only", "--cap-drop", "ALL", "--tmpfs", "/tmp")
    wait_logged(second, "papers ready")
    out = health(second)
    assert out.returncode == 1 and "has not connected" in out.stderr, out
    wait_logged(second, "connected to Slack")
    fake.wait_connected(timeout=20, total=2)
    out = health(second)
    assert out.returncode == 0, out.stderr
    assert "bundled abstracts" not in logs(second)  # the 38 papers were still there
    pick = docker("exec", second, "paperclub", "pick", "--channel", "C1").stdout
    assert "09:30 UTC" in pick  # and the schedule set through the first container
    reply, _ = command(fake, "search speculative decoding")
    assert "hit-1-" in json.dumps(reply["blocks"])
    code, seconds = stop(second)
    assert code == 0 and seconds < GRACE, (code, seconds, logs(second)[-3000:])
    assert not [r for r in json_records(logs(second)) if r["level"] == "error"]


def test_the_image_runs_as_uid_10001_and_holds_no_secret(image):
    config = json.loads(docker("image", "inspect", image, "--format", "{{json .Config}}").stdout)
    assert config["User"] == f"{UID}:{UID}" and config["Volumes"] == {"/data": {}}
    assert not [e for e in config["Env"] if e.startswith(("SLACK_", "PAPERCLUB_LLM_API_KEY"))]
    history = docker("history", "--no-trunc", image).stdout
    assert not [s for s in TOKEN_SECRETS if s in history]
    assert not re.search(r"://[^/\s]+@", history), "a URL with credentials in a layer's history"
    assert docker("run", "--rm", "--network", "none", "--entrypoint", "id", image, "-u").stdout.strip() == UID


def test_empty_tokens_exit_non_zero_with_the_missing_variable(image):
    # As after `cp .env.example .env` with the tokens left empty, detached (no terminal).
    out = docker("run", "--rm", "--network", "none", "-e", "SLACK_BOT_TOKEN=", "-e", "SLACK_APP_TOKEN=",
                 image, check=False, timeout=120)
    assert out.returncode == 1, out
    [line] = out.stderr.strip().splitlines()
    assert "SLACK_BOT_TOKEN and SLACK_APP_TOKEN are not set" in line, line

    out = docker("run", "--rm", "--network", "none", "-e", "LOG_FORMAT=json", "-e", f"SLACK_BOT_TOKEN={BOT_TOKEN}",
                 image, check=False, timeout=120)
    assert out.returncode == 1
    [record] = json_records(out.stderr)
    assert record["level"] == "error" and record["msg"].startswith("SLACK_APP_TOKEN is not set")


def test_an_unwritable_data_volume_names_the_path_and_the_fix(image):
    # A volume owned by root (here a root-owned tmpfs) under the image's unprivileged user.
    out = docker("run", "--rm", "--network", "none", "--tmpfs", "/data:mode=755",
                 "-e", f"SLACK_BOT_TOKEN={BOT_TOKEN}", "-e", f"SLACK_APP_TOKEN={APP_TOKEN}",
                 image, check=False, timeout=120)
    assert out.returncode == 1
    [line] = out.stderr.strip().splitlines()
    assert "/data/paperclub.db" in line and "permission denied on /data" in line, line
    assert f"uid {UID}" in line and "chown" in line, line
