"""Secrets: recognisable fake Slack tokens and an LLM API key appear in no log line, no reply and
no error message, whatever happens; `.env` (where people keep them) is git-ignored.

The real `paperclub run` process runs at DEBUG (the chattiest level) in text
and in JSON log format, once with the secrets in the environment and once in a
`.env` file, and is driven through replies, summaries from a fake LLM (working,
then failing), reactions, App Home, a reconnect, and a Slack error whose body
quotes the bot token back. Start-up failures (refused token, unreachable Slack,
a bad setting) are checked on their own.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from bot import blocks as bk
from botproc import ROOT, bot_env, start_bot
from conftest import copy_db

pytestmark = pytest.mark.slow

BOT = "xoxb-SECRET-BOT-TOKEN-1234"
APP = "xapp-SECRET-APP-TOKEN-5678"
LLM_KEY = "sk-SECRET-LLM-KEY-9012"
# Any of these in any output is a leak (parts too: a token cut in half is still a token).
FRAGMENTS = (BOT, APP, LLM_KEY, "SECRET-BOT-TOKEN", "SECRET-APP-TOKEN", "SECRET-LLM-KEY", "TOKEN-1234",
             "TOKEN-5678", "KEY-9012")
CH = "C1"


def leaks(text: str) -> list[str]:
    return [f for f in FRAGMENTS if f in text]


def slack_side(fake, urls: list[str]) -> str:
    """Everything the bot sent that people could read: messages, ephemerals, replies, App Home."""
    parts = [json.dumps(fake.messages(), ensure_ascii=False), json.dumps(fake.ephemeral_messages(), ensure_ascii=False)]
    parts += [json.dumps(fake.responses(u), ensure_ascii=False) for u in urls]
    parts += [json.dumps(fake.home_view(u) or {}, ensure_ascii=False) for u in ("U1", "U2")]
    return "\n".join(parts)


def drive(bot, llm) -> list[str]:
    """Use the bot the ways that log the most; returns the response URLs used."""
    fake = bot.fake
    urls = []

    def command(text, user="U1", channel=CH):
        url = fake.new_response_url(channel=channel, user=user)
        urls.append(url)
        fake.wait_ack(fake.slash_command(text, user=user, channel=channel, response_url=url), timeout=5)
        return fake.wait_for(lambda: fake.responses(url), timeout=20)[0]

    def click(action, value, channel=CH):
        url = fake.new_response_url(channel=channel)
        urls.append(url)
        fake.wait_ack(fake.block_action(action, value, channel=channel, response_url=url, is_ephemeral=True), timeout=5)
        return fake.wait_for(lambda: fake.responses(url), timeout=20)

    command("search video grounding")
    summary = command("summary speculative decoding")  # the TL;DR comes from the fake LLM
    assert "fake tl;dr" in json.dumps(summary)
    llm.status = 500  # the model server fails: logged, and the extractive TL;DR is used
    command("summary G-NLL")
    llm.status, llm.raw = 200, b"not json at all"
    command("similar gene expression prediction")
    llm.raw = None
    command("schedule 09:00 UTC", user="U2")
    command("interests add graph neural networks")
    command("no-such-command with words")
    paper_id = json.dumps(summary).split('"value": "', 1)[1].split('"', 1)[0]
    click(bk.ACTION_SHARE, paper_id, channel="C2")
    shared = fake.wait_for(lambda: fake.messages("C2"), timeout=10)[0]
    fake.wait_ack(fake.event({"type": "reaction_added", "user": "U2", "reaction": "fire", "item_user": "UBOT",
                              "item": {"type": "message", "channel": "C2", "ts": shared["ts"]}}), timeout=5)
    fake.wait_ack(fake.event({"type": "app_home_opened", "user": "U1", "tab": "home", "channel": "D1"}), timeout=5)
    fake.wait_for(lambda: fake.home_view("U1"), timeout=10)
    before = fake.connections_total
    fake.send_disconnect("refresh_requested")  # a reconnect: apps.connections.open with the app token
    fake.wait_connected(total=before + 1, timeout=15)
    fake.wait_for(lambda: fake.connections_open == 1, timeout=10)
    # Slack answers with an error that quotes the token back: it lands in an exception message.
    fake.respond_with("chat.postMessage", {"ok": False, "error": f"invalid_auth for {BOT} and {APP}"})
    apology = click(bk.ACTION_SHARE, paper_id, channel="C3")
    assert "Sorry, something went wrong" in apology[-1]["text"]
    return urls


@pytest.mark.parametrize("fmt, via", [("text", "env"), ("json", "dotenv")])
def test_tokens_and_the_llm_key_are_in_no_log_line_reply_or_error(fmt, via, hashing_db, tmp_path, fake_slack):
    from fake_llm import FakeLLM

    fake = fake_slack
    db = copy_db(hashing_db, tmp_path / "bot.db")
    with FakeLLM() as llm:
        secrets = {"SLACK_BOT_TOKEN": BOT, "SLACK_APP_TOKEN": APP, "PAPERCLUB_LLM_API_KEY": LLM_KEY}
        settings = {"PAPERCLUB_LLM_URL": llm.url, "PAPERCLUB_LLM_MODEL": "fake-model", "LOG_LEVEL": "DEBUG",
                    "LOG_FORMAT": fmt}
        if via == "dotenv":  # where people keep them: a .env next to where the bot runs
            (tmp_path / ".env").write_text("".join(f"{k}={v}\n" for k, v in secrets.items()))
            secrets = dict.fromkeys(secrets)  # and not in the environment
        bot = start_bot(fake, db, tmp_path / "bot.log", **secrets, **settings)
        try:
            urls = drive(bot, llm)
        finally:
            code = bot.stop()
        used_key = any(r["headers"].get("Authorization") == f"Bearer {LLM_KEY}" for r in llm.requests)
    logs = bot.logs()
    assert code == 0, logs[-3000:]
    # The secrets were really in use, so their absence below means something.
    assert used_key and any(c.token == BOT for c in fake.calls("auth.test"))
    assert any(c.token == APP for c in fake.calls("apps.connections.open"))
    assert " DEBUG " in logs or '"level": "debug"' in logs
    assert "HTTP 500 from the model server" in logs and "invalid_auth" in logs  # the failures were logged
    assert "xoxb-[redacted]" in logs  # Slack's error quoting the token was logged, scrubbed
    assert not leaks(logs), f"secret in the log: {leaks(logs)}"
    assert not leaks(slack_side(fake, urls)), "secret in a message"
    if fmt == "json":  # every line is one JSON record (a log shipper must not choke on a stray print)
        for line in logs.splitlines():
            if line.strip():
                json.loads(line)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("case", ["bot token refused", "app token refused", "slack unreachable", "bad setting"])
def test_start_up_failures_name_the_problem_without_the_secret(case, hashing_db, tmp_path, fake_slack):
    env = bot_env(fake_slack, copy_db(hashing_db, tmp_path / "bot.db"), SLACK_BOT_TOKEN=BOT, SLACK_APP_TOKEN=APP,
                  PAPERCLUB_LLM_URL="http://127.0.0.1:9/v1", PAPERCLUB_LLM_MODEL="m", PAPERCLUB_LLM_API_KEY=LLM_KEY,
                  LOG_LEVEL="DEBUG")
    expect = {"bot token refused": "invalid_auth", "app token refused": "SLACK_APP_TOKEN",
              "slack unreachable": "could not reach Slack", "bad setting": "PAPERCLUB_FEEDBACK_HALF_LIFE_DAYS"}[case]
    if case == "bot token refused":
        fake_slack.respond_with("auth.test", {"ok": False, "error": "invalid_auth"})
    elif case == "app token refused":
        fake_slack.respond_with("apps.connections.open", {"ok": False, "error": "invalid_auth"})
    elif case == "slack unreachable":
        env["SLACK_API_URL"] = f"http://127.0.0.1:{_free_port()}/api/"
    else:
        env["PAPERCLUB_FEEDBACK_HALF_LIFE_DAYS"] = "-1"
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "bot", "run"], cwd=tmp_path, env=env, capture_output=True,
                            text=True, timeout=120)
    out = result.stdout + result.stderr
    assert result.returncode != 0 and expect.lower() in out.lower(), out[-2000:]
    assert "Traceback" not in out
    assert not leaks(out), f"secret in the error: {leaks(out)}"
    assert time.monotonic() - started < 60


def test_dot_env_is_git_ignored_and_the_example_holds_no_secrets():
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    ignored = subprocess.run(["git", "check-ignore", "-q", ".env"], cwd=ROOT)
    assert ignored.returncode == 0, ".env is not git-ignored"
    tracked = subprocess.run(["git", "ls-files", "--error-unmatch", ".env"], cwd=ROOT, capture_output=True)
    assert tracked.returncode != 0, ".env is committed"
    example = (ROOT / ".env.example").read_text()
    for line in example.splitlines():
        if line.startswith(("SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "PAPERCLUB_LLM_API_KEY")):
            assert line.split("=", 1)[1].strip() == "", line
    assert os.path.exists(ROOT / ".gitignore")
