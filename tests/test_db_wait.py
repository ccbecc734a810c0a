"""`paperclub run` on a PostgreSQL that is not there yet: it waits, says so, and gives up cleanly.

Real processes (tests/botproc.py's environment) against a real PostgreSQL server, reached
through a local TCP relay that the test opens only once the bot is already waiting: the way a
database container comes up after the bot's.
"""
from __future__ import annotations

import socket
import subprocess
import sys
import threading
from urllib.parse import urlsplit, urlunsplit

import pytest

from botproc import BotProcess, bot_env

pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def via_port(url: str, port: int, password: str | None = None) -> str:
    """The same database URL, reached at 127.0.0.1:port instead (with a password, if given)."""
    parts = urlsplit(url)
    user = f"{parts.username}{':' + password if password else ''}@" if parts.username else ""
    return urlunsplit(parts._replace(netloc=f"{user}127.0.0.1:{port}"))


class Relay:
    """A TCP relay from 127.0.0.1:port to the real server, opened when the test says so."""

    def __init__(self, port: int, upstream: tuple[str, int]):
        self.port, self.upstream = port, upstream
        self.listener: socket.socket | None = None
        self.sockets: list[socket.socket] = []

    def open(self) -> None:
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", self.port))
        self.listener.listen(16)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            self.sockets += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        for s in [self.listener, *self.sockets]:
            if s is not None:
                s.close()


def run_bot(fake, db: str, log, **extra) -> subprocess.Popen:
    with open(log, "w") as out:
        return subprocess.Popen([sys.executable, "-m", "bot", "run"], cwd=log.parent,
                                env=bot_env(fake, db, **extra), stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)


def test_with_no_server_run_waits_says_so_then_gives_up_in_one_line(tmp_path, fake_slack, pg_url):
    port = free_port()  # nothing listens there
    log = tmp_path / "bot.log"
    proc = run_bot(fake_slack, via_port(pg_url, port, password="SECRETPGPASS"), log, PAPERCLUB_DB_WAIT_SECONDS="3")
    assert proc.wait(120) != 0
    out = log.read_text()
    assert f"waiting for PostgreSQL at 127.0.0.1:{port} ..." in out and "Connection refused" in out
    assert f"PostgreSQL at 127.0.0.1:{port} did not answer within 3 s" in out
    assert "PAPERCLUB_DB_WAIT_SECONDS" in out
    assert "Traceback" not in out and "SECRETPGPASS" not in out
    assert "connected to Slack" not in out


def test_run_waits_for_a_server_that_comes_up_late_then_answers(tmp_path, fake_slack, pg_url):
    upstream = urlsplit(pg_url)
    relay = Relay(free_port(), (upstream.hostname, upstream.port or 5432))
    log = tmp_path / "bot.log"
    proc = run_bot(fake_slack, via_port(pg_url, relay.port), log, PAPERCLUB_DB_WAIT_SECONDS="120")
    try:
        fake_slack.wait_for(lambda: "waiting for PostgreSQL" in log.read_text() or proc.poll() is not None,
                            timeout=60)
        assert proc.poll() is None, log.read_text()
        relay.open()  # the database "container" is up now
        fake_slack.wait_for(lambda: "connected to Slack" in log.read_text() or proc.poll() is not None,
                            timeout=90)
        out = log.read_text()
        assert proc.poll() is None and "connected to Slack" in out, out[-3000:]
        assert f"PostgreSQL at 127.0.0.1:{relay.port} answered after" in out
        fake_slack.wait_connected(timeout=10)
    finally:
        BotProcess(proc, fake_slack, via_port(pg_url, relay.port), log).stop()  # SIGTERM, then kill
        relay.close()
    assert proc.returncode == 0, log.read_text()[-3000:]
    assert "Traceback" not in log.read_text()


def test_a_refusal_waiting_cannot_fix_fails_at_once_with_the_servers_reason(tmp_path, fake_slack, pg_database):
    parts = urlsplit(pg_database)
    missing = urlunsplit(parts._replace(path="/paperclub_no_such_database"))
    log = tmp_path / "bot.log"
    proc = run_bot(fake_slack, missing, log, PAPERCLUB_DB_WAIT_SECONDS="600")
    assert proc.wait(120) == 1  # long before the 600 s wait: nothing to wait for
    out = log.read_text()
    assert 'database "paperclub_no_such_database" does not exist' in out
    assert "waiting for PostgreSQL" not in out and "Traceback" not in out


def test_a_replica_starting_while_another_migrates_waits_for_it_says_so_then_connects(
        tmp_path, fake_slack, pg_url):
    """Another replica holds the schema's migration lock (it is migrating): this one waits for it,
    within PAPERCLUB_DB_WAIT_SECONDS, saying what it waits for, rather than exiting "busy"."""
    import psycopg

    other = psycopg.connect(pg_url)  # the other replica's migration: its transaction holds the lock
    other.execute("select pg_advisory_xact_lock(hashtext('paperclub-migrate'))")
    log = tmp_path / "bot.log"
    proc = run_bot(fake_slack, pg_url, log, PAPERCLUB_DB_WAIT_SECONDS="300")
    try:
        fake_slack.wait_for(lambda: "migrating the schema" in log.read_text() or proc.poll() is not None,
                            timeout=60)
        out = log.read_text()
        assert proc.poll() is None, out[-3000:]
        assert "another paperclub process is migrating the schema" in out and "up to 300 s" in out, out
        other.rollback()  # its migration is done
        fake_slack.wait_for(lambda: "connected to Slack" in log.read_text() or proc.poll() is not None,
                            timeout=90)
        assert proc.poll() is None and "connected to Slack" in log.read_text(), log.read_text()[-3000:]
    finally:
        other.close()
        BotProcess(proc, fake_slack, pg_url, log).stop()
    assert "busy" not in log.read_text() and "Traceback" not in log.read_text()


def test_a_replica_that_waited_its_whole_wait_for_a_migration_says_why_it_gives_up(
        tmp_path, fake_slack, pg_url):
    import psycopg

    other = psycopg.connect(pg_url)
    other.execute("select pg_advisory_xact_lock(hashtext('paperclub-migrate'))")
    log = tmp_path / "bot.log"
    try:
        proc = run_bot(fake_slack, pg_url, log, PAPERCLUB_DB_WAIT_SECONDS="2")
        assert proc.wait(120) == 1
    finally:
        other.close()
    out = log.read_text()
    assert "another paperclub process has been migrating the schema" in out, out
    assert "PAPERCLUB_DB_WAIT_SECONDS" in out and "Traceback" not in out
    assert "connected to Slack" not in out
