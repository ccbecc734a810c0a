"""PostgreSQL connection strings as an operator types them (issue 31 item 9): a password is
never printed, whatever it holds; libpq's key=value form and several hosts are taken as
psycopg takes them; what is neither a file nor a connection string gets one clear line and
creates nothing."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from store import database_address, open_store

SECRET = "se#cr/et?x"  # a '#' once made the whole URL print; '/' and '?' must be percent-encoded in a URL
URL_SECRET = "se#cr%2Fet%3Fx"


def paperclub(*args, cwd):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "PAPERCLUB_", "LOG_"))}
    return subprocess.run([sys.executable, "-m", "bot", *args], cwd=cwd, capture_output=True, text=True,
                          env={**env, "PAPERCLUB_MODEL": "hashing-256"}, timeout=120)


def with_password(pg_url: str, password: str, *, database: str | None = None) -> str:
    """pg_url (postgresql://user@host:port/db?options=...) with a password, and maybe another database."""
    scheme, rest = pg_url.split("://", 1)
    user, rest = rest.split("@", 1)
    if database is not None:
        host, query = rest.split("/", 1)[0], rest.split("?", 1)[1]
        rest = f"{host}/{database}?{query}"
    return f"{scheme}://{user}:{password}@{rest}"


def key_value(pg_url: str, password: str) -> str:
    """The same database as libpq's key=value string (the server trusts any password)."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    return make_conninfo("", **conninfo_to_dict(pg_url), password=password)


@pytest.mark.slow  # starts a process
def test_a_password_with_a_hash_is_never_printed_by_papers_or_health(pg_url, tmp_path):
    missing = with_password(pg_url, URL_SECRET, database="no_such_database")
    for command in (["papers"], ["health"]):
        out = paperclub("--db", missing, *command, cwd=tmp_path)
        assert out.returncode == 1, (command, out.stdout, out.stderr)
        said = out.stdout + out.stderr
        assert "no_such_database" in said and "***" in said
        assert "se#cr" not in said and URL_SECRET not in said and SECRET not in said
    open_store(pg_url).close()  # migrated: the commands reach it
    out = paperclub("--db", with_password(pg_url, URL_SECRET), "health", cwd=tmp_path)
    assert "never connected" in out.stderr and "se#cr" not in out.stdout + out.stderr


@pytest.mark.slow  # starts a process
def test_a_key_value_connection_string_reaches_postgresql_and_creates_no_file(pg_url, tmp_path):
    conninfo = key_value(pg_url, "hunter2")
    assert "://" not in conninfo and "password=hunter2" in conninfo
    store = open_store(conninfo)
    assert store.backend == "postgresql" and "hunter2" not in store.path
    store.set_meta("k", "v")
    store.close()
    out = paperclub("--db", conninfo, "papers", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "No papers yet" in out.stderr and "hunter2" not in out.stdout + out.stderr
    assert os.listdir(tmp_path) == []  # no file named after the string (password and all)


@pytest.mark.slow  # starts a process
def test_several_hosts_are_tried_in_turn_and_named_without_a_password(pg_url, tmp_path):
    # A URL with two hosts: the first refuses (nothing listens on 1), libpq goes on to the second.
    scheme, rest = with_password(pg_url, "hunter2").split("://", 1)
    userinfo, rest = rest.split("@", 1)
    host, rest = rest.split("/", 1)
    several = f"{scheme}://{userinfo}@127.0.0.1:1,{host}/{rest}"
    assert database_address(several) == f"127.0.0.1:1, {host}"
    open_store(several).close()
    for command in (["papers"], ["health"]):
        out = paperclub("--db", several, *command, cwd=tmp_path)
        said = out.stdout + out.stderr
        assert "ValueError" not in said and "hunter2" not in said, said
    assert "No papers yet" in paperclub("--db", several, "papers", cwd=tmp_path).stderr


@pytest.mark.slow  # starts a process
@pytest.mark.parametrize("db", ["hots=127.0.0.1 password=hunter2", "host=127.0.0.1 password hunter2",
                                "mysql://root:hunter2@127.0.0.1/db"])
def test_what_is_neither_a_file_nor_a_connection_string_gets_one_clear_line(db, tmp_path):
    for command in (["papers"], ["ingest", "x.txt"]):
        out = paperclub("--db", db, *command, cwd=tmp_path)
        assert out.returncode == 1, (command, out.stdout, out.stderr)
        [line] = [ln for ln in out.stderr.strip().splitlines() if ln]
        assert line.startswith("error:") and "hunter2" not in line, line
        assert "connection string" in line and "Traceback" not in out.stderr
    assert os.listdir(tmp_path) == []
