"""The real `paperclub run` process against the fake Slack, for the fault, load and secret tests.

It runs with the weightless hashing model (no torch import, starts in seconds),
in a scratch directory (so no developer .env is read), with stdout and stderr
in one log file.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
START_TIMEOUT = 60


class BotProcess:
    """A running `paperclub run`; `stop()` sends SIGTERM and waits (then kills)."""

    def __init__(self, proc: subprocess.Popen, fake, db: Path, log: Path):
        self.proc, self.fake, self.db, self.log = proc, fake, db, log

    def logs(self) -> str:
        return self.log.read_text(errors="replace")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> int:
        if self.alive():
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def bot_env(fake, db: Path, **extra: str | None) -> dict:
    """The environment of a bot process: fake Slack, this database, the hashing model (None: unset)."""
    from conftest import APP_TOKEN, BOT_TOKEN

    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "PAPERCLUB_", "LOG_"))}
    env.update(SLACK_BOT_TOKEN=BOT_TOKEN, SLACK_APP_TOKEN=APP_TOKEN, SLACK_API_URL=fake.api_url,
               PAPERCLUB_DB=str(db), PAPERCLUB_MODEL="hashing-256", LOG_LEVEL="INFO", PYTHONUNBUFFERED="1",
               OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT),
               # Paper sources on a closed loopback port: a test's bot never reaches arXiv or OpenReview.
               PAPERCLUB_ARXIV_API="http://127.0.0.1:9/api/query", PAPERCLUB_ARXIV_RSS="http://127.0.0.1:9/rss/",
               PAPERCLUB_OPENREVIEW_API="http://127.0.0.1:9")
    env.update({k: v for k, v in extra.items() if v is not None})
    for key in [k for k, v in extra.items() if v is None]:
        env.pop(key, None)
    return env


def start_bot(fake, db: Path, log: Path, **extra: str | None) -> BotProcess:
    """Start `paperclub run` and wait until it is connected over Socket Mode."""
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "bot", "run"], cwd=log.parent, env=bot_env(fake, db, **extra),
                                stdout=out, stderr=subprocess.STDOUT)
    bot = BotProcess(proc, fake, db, log)
    try:
        fake.wait_for(lambda: "connected to Slack" in bot.logs() or not bot.alive(), timeout=START_TIMEOUT)
        assert bot.alive(), bot.logs()[-3000:]
        fake.wait_connected(timeout=5)
    except BaseException:
        bot.stop()
        raise
    return bot
