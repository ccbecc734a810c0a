"""The command line as someone scripting it sees it: --db anywhere, no silent empty databases,
one JSON document per --json, and errors that say what is wrong (issue 32, the command line)."""
from __future__ import annotations

import json

import click
import pytest
from click.testing import CliRunner

from bot.cli import cli
from conftest import copy_db

ENV = {"PAPERCLUB_MODEL": "hashing-256", "SLACK_BOT_TOKEN": "", "SLACK_APP_TOKEN": "", "PAPERCLUB_DB": ""}


def run(*args: str):
    return CliRunner().invoke(cli, list(args), env=ENV)


def test_db_is_taken_after_the_command_name_too(hashing_db, tmp_path):
    db = copy_db(hashing_db, tmp_path / "p.db")
    before, after = run("--db", str(db), "papers", "--limit", "3"), run("papers", "--limit", "3", "--db", str(db))
    assert before.exit_code == after.exit_code == 0, after.output
    assert after.output == before.output and len(after.output.splitlines()) == 3
    fetched = run("fetch", "arxiv", "--help")  # nested groups' commands take it too
    assert "--db" in fetched.output


def test_a_read_command_on_a_mistyped_db_says_so_and_creates_nothing(tmp_path):
    typo = tmp_path / "paperclib.db"
    for args in (["papers"], ["search", "video"], ["show", "SPIKE"]):
        out = run("--db", str(typo), *args)
        assert out.exit_code == 1 and f"no database at {typo}" in out.output and "--db" in out.output, out.output
    assert not typo.exists()


def test_an_unknown_collection_is_not_an_empty_library(hashing_db, tmp_path):
    db = copy_db(hashing_db, tmp_path / "p.db")
    out = run("--db", str(db), "papers", "--collection", "nope")
    assert "No papers in collection 'nope'" in out.output and "ICLR 2026" in out.output
    assert "No papers yet" not in out.output


def test_json_is_one_document_and_nl_is_lines(hashing_db, tmp_path):
    db = copy_db(hashing_db, tmp_path / "p.db")
    doc = json.loads(run("--db", str(db), "papers", "--limit", "4", "--json").output)
    assert isinstance(doc, list) and len(doc) == 4 and {"id", "name", "headline"} <= doc[0].keys()
    lines = run("--db", str(db), "papers", "--limit", "4", "--nl").output.splitlines()
    assert [json.loads(line)["id"] for line in lines] == [d["id"] for d in doc]


@pytest.mark.slow  # starts a process
def test_ingest_of_a_missing_path_says_it_is_missing(tmp_path):
    import os
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "bot", "--db", str(tmp_path / "p.db"), "ingest", "/nonexistent"],
                         capture_output=True, text=True, env={**os.environ, **ENV}, timeout=120)
    assert out.returncode == 1 and "/nonexistent: no such file or folder" in out.stderr, out.stderr
    assert "unknown format" not in out.stderr


def test_backup_into_a_missing_folder_is_refused_without_making_folders(hashing_db, tmp_path):
    db = copy_db(hashing_db, tmp_path / "p.db")
    target = tmp_path / "nope" / "dir" / "x.db"
    out = run("--db", str(db), "backup", str(target))
    assert out.exit_code == 1 and "does not exist" in out.output and "mkdir -p" in out.output
    assert not (tmp_path / "nope").exists()


def test_every_option_says_what_it_is_for():
    def options(group: click.Group, prefix: str):
        for name, command in group.commands.items():
            if isinstance(command, click.Group):
                yield from options(command, f"{prefix} {name}")
            else:
                for p in command.params:
                    if isinstance(p, click.Option):
                        yield f"{prefix} {name} {p.opts[0]}", p.help

    silent = [where for where, help_text in options(cli, "paperclub") if not help_text]
    assert not silent, f"options with no --help text: {silent}"


def paperclub_in(folder, *args: str, env: dict | None = None):
    """`paperclub ARGS` as an operator runs it from `folder` (which may hold a .env), the real entry point."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    base = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "PAPERCLUB_", "LOG_"))}
    base["PYTHONPATH"] = str(Path(__file__).resolve().parent.parent)
    return subprocess.run([sys.executable, "-m", "bot", *args], cwd=folder, capture_output=True, text=True,
                          env={**base, **(env or {})}, timeout=120)


@pytest.mark.parametrize("line, name", [
    ("PAPERCLUB_LEASE_SECONDS=-5", "PAPERCLUB_LEASE_SECONDS"),
    ("PAPERCLUB_DB_WAIT_SECONDS=sixty", "PAPERCLUB_DB_WAIT_SECONDS"),
    ("PAPERCLUB_QUERY_ENCODER=onxx", "PAPERCLUB_QUERY_ENCODER"),
    ("PAPERCLUB_CATCH_UP_HOURS=-3", "PAPERCLUB_CATCH_UP_HOURS"),
])
def test_a_bad_setting_in_dot_env_is_one_line_naming_it_without_any_value(tmp_path, line, name):
    (tmp_path / ".env").write_text(f"PAPERCLUB_DB=postgresql://club:hunter2pw@127.0.0.1:9/club\n{line}\n")
    out = paperclub_in(tmp_path, "health")
    said = out.stdout + out.stderr
    assert out.returncode == 1 and len(said.strip().splitlines()) == 1, said
    assert name in said and ".env" in said, said
    assert "hunter2pw" not in said and "input_value" not in said and "pydantic" not in said, said


def test_a_mistyped_time_zone_in_dot_env_stops_the_start_with_the_zone_it_meant(tmp_path, monkeypatch):
    """A typo must not quietly put every channel's paper of the day on UTC."""
    from bot.config import load_settings

    (tmp_path / ".env").write_text("PAPERCLUB_TIMEZONE=Europe/Pariss\n")
    out = paperclub_in(tmp_path, "run")
    said = out.stdout + out.stderr
    assert out.returncode == 1 and len(said.strip().splitlines()) == 1, said
    assert "PAPERCLUB_TIMEZONE" in said and "Did you mean Europe/Paris?" in said, said
    (tmp_path / ".env").write_text("PAPERCLUB_TIMEZONE=europe/paris\n")  # as people type it: fine
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PAPERCLUB_TIMEZONE", raising=False)
    assert load_settings().timezone == "Europe/Paris"
    (tmp_path / ".env").write_text("PAPERCLUB_TIMEZONE=America/New York\n")  # a space for the _: fine
    assert load_settings().timezone == "America/New_York"


@pytest.mark.parametrize("where", ["dot_env", "environment"])
@pytest.mark.parametrize("name, meant", [("PAPERCLUB_ADMIN", "PAPERCLUB_ADMINS"),
                                         ("PAPERCLUB_TIMEZON", "PAPERCLUB_TIMEZONE"),
                                         ("SLACK_BOT_TOKNE", "SLACK_BOT_TOKEN")])
def test_a_mistyped_setting_name_is_named_with_the_one_it_meant(tmp_path, where, name, meant):
    """PAPERCLUB_ADMIN for PAPERCLUB_ADMINS must not leave everyone an admin without a word."""
    value = "xoxb-1111-2222-SECRETBOTTOKEN"
    if where == "dot_env":
        (tmp_path / ".env").write_text(f"PAPERCLUB_DB=none.db\n{name}={value}\n")
        out = paperclub_in(tmp_path, "health")
    else:  # docker compose's env_file: the same lines arrive as environment variables
        out = paperclub_in(tmp_path, "health", env={"PAPERCLUB_DB": "none.db", name: value})
    [warning] = [line for line in out.stderr.splitlines() if name in line]
    assert warning.startswith("warning: ") and f"did you mean {meant}?" in warning, out.stderr
    assert "SECRET" not in out.stdout + out.stderr
    assert out.returncode == 1 and "no database at none.db" in out.stderr  # the command still ran


def test_the_example_dot_env_as_shipped_draws_no_warning(tmp_path):
    import shutil
    from pathlib import Path

    shutil.copy(Path(__file__).resolve().parent.parent / ".env.example", tmp_path / ".env")
    out = paperclub_in(tmp_path, "health", env={"PAPERCLUB_TEST_PG": "postgresql://x@h/db"})
    assert out.stderr.strip() == "unhealthy: no database at ./paperclub.db", out.stderr


def paperclub(capsys, *args: str) -> tuple[int, str, str]:
    """The entry point as a shell runs it: (exit code, stdout, stderr)."""
    from bot.cli import main

    with pytest.MonkeyPatch.context() as env:
        for key, value in ENV.items():
            env.setenv(key, value)
        with pytest.raises(SystemExit) as code:
            main(list(args))
    out = capsys.readouterr()
    return code.value.code, out.out, out.err


def test_reads_work_on_a_read_only_postgresql_and_writes_say_why(own_pg_database, capsys):
    """A standby (during a failover, or one kept for reports) refuses every write: the commands that
    only read answer from it, without trying to migrate it; those that write say it is read-only."""
    db = own_pg_database
    code, out, _ = paperclub(capsys, "--db", db.url, "papers", "--limit", "1", "--json")
    assert code == 0, out
    first = json.loads(out)[0]["id"]
    db.turn_read_only()
    reads = {"papers": ["--limit", "3"], "search": ["video", "grounding"], "show": [first], "similar": [first],
             "summary": [first], "feeds": [], "overview": ["video"], "pick": ["--channel", "C1"], "replay": []}
    for name, args in reads.items():
        code, out, err = paperclub(capsys, "--db", db.url, name, *args)
        assert code == 0 and (out + err).strip(), (name, out, err)
        assert "read-only" not in err, (name, err)
    code, _, err = paperclub(capsys, "--db", db.url, "reparse")
    assert code == 1 and "is read-only" in err and "primary" in err, err


def test_reads_on_a_read_only_postgresql_older_than_the_code_are_refused_clearly(own_pg_database, capsys):
    """A read-only database cannot be migrated: an older schema is refused at once, with what to do,
    rather than read until a column this code expects is missing."""
    import psycopg

    from store.backends.postgres_migrations import MIGRATIONS, MIGRATIONS_TABLE

    db = own_pg_database
    with psycopg.connect(db.url, autocommit=True) as conn:  # as an older paperclub left it
        conn.execute(f"delete from {MIGRATIONS_TABLE} where name = %s", [MIGRATIONS[-1][0]])
    db.turn_read_only()
    code, out, err = paperclub(capsys, "--db", db.url, "search", "video")
    assert code == 1 and not out, out
    [line] = err.strip().splitlines()
    assert line.startswith("error: ") and "older" in line and "cannot be migrated" in line, line
    assert f"{len(MIGRATIONS) - 1}" in line and f"{len(MIGRATIONS)}" in line
