"""Cheap `paperclub` processes for crash trials: forked from a server that has the imports done.

A fresh `python -m bot` spends about a second importing numpy, slack_sdk and
friends before it does anything; twenty trials would be mostly that. A
multiprocessing fork server imports them once, and every trial is a real,
separate process forked from it, running the real CLI entry point, which a
test can kill with SIGKILL at any moment. Our own modules (bot.*) are imported
after the fork, so per-process state (like the daily poster's claimer id) is
each process's own, as in production.
"""
from __future__ import annotations

import multiprocessing
import os
import sys

PRELOAD = ["numpy", "sqlite_utils", "slack_sdk", "slack_bolt", "apscheduler.schedulers.background", "click",
           "pydantic_settings", "store.backends.sqlite", "store.ingest", "store.parse", "store.embed", "store.search",
           "store.pick", "store.summary", "store.overview", "store.feedback", "store.schedule", "forkrun"]


def context():
    """The fork-server context (started on the first process, imports done once)."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    return ctx


def stop_server() -> None:
    """End the fork server, so no process outlives the tests that used it."""
    from multiprocessing import forkserver

    forkserver._forkserver._stop()


def _main(argv: list[str], env: dict, cwd: str, log: str) -> None:
    """Child: the environment and directory of a fresh process, output to `log`, then the CLI."""
    for key in [k for k in os.environ if k.startswith(("SLACK_", "PAPERCLUB_", "LOG_"))]:
        del os.environ[key]
    os.environ.update(env)
    os.chdir(cwd)  # no developer .env is read
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    sys.stdout = open(1, "w", buffering=1, closefd=False)
    sys.stderr = open(2, "w", buffering=1, closefd=False)
    from bot.cli import main

    main(argv)


def start(ctx, argv: list[str], *, env: dict, cwd, log):
    """Start `paperclub <argv>` in a forked process; returns the multiprocessing.Process."""
    proc = ctx.Process(target=_main, args=(list(argv), dict(env), str(cwd), str(log)), daemon=True)
    proc.start()
    return proc
