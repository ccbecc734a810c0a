"""Issue 13's privacy, injection and bad-input defects, as a Slack member or an operator sees them.

The real Bolt app answers through the fake Slack (which also fails the test if any message it
received carries <!...>, or a <@U>/<#C> the bot did not mean: see FakeSlack._check_markup);
the store is a real SQLite file with the weightless HashingEmbedder.
"""
from __future__ import annotations

import logging
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from bot import blocks as bk
from bot.later import SORRY
from conftest import OBEY_FILE_MODES, copy_db, dispatch_command, make_deps, make_settings, text_of

CH = "C1"
UTC = timezone.utc
NOON = datetime(2024, 6, 3, 12, 0, tzinfo=UTC)
EVIL_ABSTRACT = ("We study <!channel> alerts and <@UEVIL> pings at scale. <#CEVIL|general> links "
                 "are also sent. Our method &amp; its <b>bold</b> claims beat every baseline by 3 points.")


@pytest.fixture
def world(fake_slack, hashing_db, tmp_path):
    from bot.app import create_app
    from store import HashingEmbedder, Searcher, open_store

    store = open_store(copy_db(hashing_db, tmp_path / "world.db"))
    searcher = Searcher(store, HashingEmbedder())
    settings = make_settings(slack_api_url=fake_slack.api_url, timezone="UTC")
    deps = make_deps(settings, store, searcher)
    deps.clock.now = NOON
    app = create_app(deps, process_before_response=True)
    yield type("World", (), {"app": app, "deps": deps, "store": store, "fake": fake_slack,
                             "searcher": searcher, "path": tmp_path / "world.db"})
    store.close()


def mrkdwn_of(message: dict) -> str:
    """The text Slack parses for mentions: the top-level text and every mrkdwn string (plain_text,
    such as a header, is shown as typed and pings nobody)."""
    out = [message.get("text") or ""]

    def walk(v):
        if isinstance(v, dict):
            if v.get("type") == "mrkdwn":
                out.append(v.get("text", ""))
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)
    walk(message.get("blocks") or [])
    return "\n".join(out)


def say(world, text: str, user: str = "U1", channel: str = CH) -> dict:
    reply = dispatch_command(world.app, world.fake, text, user=user, channel=channel)
    assert SORRY not in text_of(reply), text
    return reply


def ingest_hostile(world, n: int = 1) -> list:
    from store import HashingEmbedder
    from store.ingest import Record, ingest_records

    records = [Record(abstract=EVIL_ABSTRACT.replace("scale", f"scale {i}"),
                      title=f"<!here> Ping-{i}: <@UEVIL> everyone &lt;!channel&gt; now",
                      url="https://evil.example/x|Official code (verified)", venue="ICLR", year=2024,
                      source="hostile") for i in range(n)]
    ingest_records(world.store, records, HashingEmbedder(), now=time.time())
    return [p for p in world.store.iter_papers() if "Ping-" in (p.title or "")]


# -- 8. digits that only look like digits -------------------------------------------------------
def _numbered_commands() -> list[str]:
    """Every subcommand word that takes a number, read from the usage lines users see: a new
    command that takes a number is covered without being listed here."""
    from bot.deps.build import command_table

    lines = []
    for sub in command_table().values():
        for m in re.finditer(r"(\w+ )?[<\[](?:n|days|page)[>\]]", sub.usage):
            verb = (m.group(1) or "").strip()
            lines.append(f"{sub.name} {verb} ".replace(f"{sub.name} {sub.name} ", f"{sub.name} ")
                         if verb != sub.name else f"{sub.name} ")
    return lines + ["schedule "]  # and a time of day: "schedule ³:00"


NUMBERED = _numbered_commands()
NOT_ASCII_DIGITS = st.characters(categories=["Nd", "No", "Nl"], exclude_characters="0123456789")


def _state(world) -> tuple:
    """What a number could change: the channel's interests, feeds, fresh days, schedule; U1's list."""
    from store import reading_list

    return ([r["id"] for r in world.store.interests(CH)], [r["id"] for r in world.store.feeds(CH)],
            world.store.get_meta(f"fresh_days:{CH}"), world.store.get_schedule(CH),
            [p.id for p, _ in reading_list(world.store, "U1")])


def test_every_command_that_takes_a_number_is_covered():
    assert {"interests remove ", "saved remove ", "digest ", "feed remove ", "feed fresh "} <= set(NUMBERED)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(line=st.sampled_from(NUMBERED),
       number=st.one_of(NOT_ASCII_DIGITS, st.text(NOT_ASCII_DIGITS, min_size=1, max_size=3),
                        st.tuples(st.sampled_from("12"), NOT_ASCII_DIGITS).map("".join),
                        st.sampled_from(["\u00a0²", "#²", "2²", "０９:００", "³:00", "9:⁰⁰", "１"])))
def test_unicode_digits_get_a_clear_answer_not_the_apology_and_change_nothing(world, line, number, caplog):
    if not world.store.interests(CH):
        say(world, "interests add video understanding")
        say(world, "feed add arxiv cs.LG")
        say(world, "schedule 09:30 UTC")
        world.store.save_paper("U1", next(world.store.iter_papers()).id, now=time.time())
    before = _state(world)
    caplog.clear()
    with caplog.at_level(logging.ERROR):
        reply = say(world, line + number)  # say() fails on the generic apology
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
    assert _state(world) == before, line + number
    text = text_of(reply)  # a clear answer: what is wrong, and how to write it
    assert any(k in text for k in ("There is no", "How many days?", "Give a number", "Give the number",
                                   "time of day", "time zone")), text[:300]


# -- 13. fifty long interests, every one visible with its number ----------------------------------
def test_fifty_long_interests_are_all_listed_whole_with_their_numbers(world):
    topics = [f"topic {n:02d} " + " ".join(f"word{n}x{k}" for k in range(18)) for n in range(1, 51)]
    for t in topics[:-1]:
        world.store.add_interest(CH, t, "U1", model="hashing-256", vector=world.searcher.embed_query(t),
                                 now=time.time())
    reply = say(world, f"interests add {topics[-1]}")
    sections = [b["text"]["text"] for b in reply["blocks"] if b["type"] == "section" and b.get("text")]
    assert all(len(s) <= bk.SECTION_TEXT for s in sections)
    shown = "\n".join(sections)
    numbers = []
    for t in topics:
        found = re.search(rf"^(\d+)\. \*{re.escape(t)}\* \(added by", shown, re.M)
        assert found, f"{t[:9]} is cut or missing"
        numbers.append(int(found.group(1)))
    assert sorted(numbers) == list(range(1, 51))  # every number a member needs to remove one
    assert "…" not in shown


# -- 5. link labels ---------------------------------------------------------------------------------
def test_an_ingested_url_with_a_pipe_cannot_set_its_own_link_label(world):
    [paper] = ingest_hostile(world)
    reply = say(world, f"summary {paper.id}")
    assert "Official code (verified)" not in text_of(reply)
    assert "evil.example/x|" not in text_of(reply)
    assert bk.link("javascript:alert(1)", "paper") == "paper"
    assert bk.link("https://ok.example/a b", "paper") == "paper"
    assert bk.link("https://ok.example/a?b=1&c=2", "paper") == "<https://ok.example/a?b=1&amp;c=2|paper>"


@pytest.mark.parametrize("pad", range(1950, 2001, 7))
def test_a_long_context_line_is_cut_between_links_never_inside_one(pad):
    part = "x" * pad
    links = " ".join(bk.link(f"https://example.com/{i}", f"label {i}") for i in range(5))
    text = bk.context(part, links, bk.mention("U123"), "a &amp; b").elements[0].text
    assert len(text) <= bk.CONTEXT_TEXT
    assert text.count("<") == text.count(">"), text[-80:]
    tail = text[text.rfind("&"):] if "&" in text else ";"
    assert ";" in tail or tail.startswith(("&amp;", "&lt;", "&gt;"))


# -- 4. mentions injected from text --------------------------------------------------------------------
def test_a_hostile_abstract_pings_nobody_in_the_daily_post_or_its_thread(world):
    from bot.posting import post_daily

    papers = ingest_hostile(world, 3)
    world.fake.add_members("U1")  # who added the interests below: the post may name them
    world.store.set_schedule(CH, hour=9, minute=0, tz="UTC", days="daily", set_by="U1", now=time.time())
    for p in papers:  # steer the pick to a hostile paper
        world.store.add_interest(CH, p.title, "U1", model="hashing-256",
                                 vector=world.searcher.embed_query(f"{p.headline}. {p.abstract}"), now=time.time())
    result = post_daily(world.deps.slack, world.store, world.searcher, CH, NOON, feedback=world.deps.feedback,
                        sleep=lambda s: None)
    assert result.status == "posted", result
    posted = [m for m in world.fake.messages(CH)]
    assert posted and any("Ping-" in m.get("text", "") or "Ping-" in text_of(m) for m in posted)
    for m in posted:
        for bad in ("<!channel>", "<!here>", "<@UEVIL>", "<#CEVIL"):
            assert bad not in m.get("text", ""), m["text"][:300]
            assert bad not in mrkdwn_of(m)
    for line in ("today", f"summary {papers[0].id}", "search ping everyone", "digest"):
        shown = mrkdwn_of(say(world, line))
        assert not re.search(r"<(!|@UEVIL|#CEVIL)", shown), re.search(r".{80}<(!|@UEVIL|#CEVIL).{80}", shown)
    assert not world.fake.injections


def test_interests_echo_escaped_markup_as_text_not_as_a_channel_ping(world):
    reply = say(world, "interests add &lt;!channel&gt; and &lt;@UEVIL&gt; diffusion")
    assert "<!channel>" not in mrkdwn_of(reply) and "<@UEVIL>" not in mrkdwn_of(reply)
    assert "&lt;!channel&gt;" in reply["text"]


def test_typed_text_a_command_cannot_use_is_shown_as_typed_escaped_once(world):
    """`interests remove <2>` answered "There is no interest &lt;2&gt;": the text was escaped, then
    problem_reply escaped it again, so Slack showed the entities themselves."""
    for paper in world.store.iter_papers():  # a calibration round with nothing left to ask
        world.store.save_paper("U1", paper.id, now=NOON.timestamp())
    for line, said in (("interests remove &lt;2&gt;", "There is no interest &lt;2&gt;;"),
                       ("saved R&amp;D", "I don't know “saved R&amp;D”."),
                       ("calibrate R&amp;D &lt;b&gt;", "nearest *R&amp;D &lt;b&gt;*: nothing left")):
        shown = mrkdwn_of(say(world, line))
        assert said in shown, (line, shown)
        assert "&amp;lt;" not in shown and "&amp;amp;" not in shown, (line, shown)


def test_the_send_path_defuses_broadcasts_that_escaped_their_builder(world):
    # A message built without esc() (the bug this guards against) still pings nobody: the bot never
    # sends <!...>, so the one gate every chat.*/views.*/respond() payload passes escapes it.
    world.deps.slack.chat_postMessage(channel=CH, text="raw <!channel> and <!subteam^S1|@team> <b>x</b>",
                                      blocks=[{"type": "section", "text": {"type": "mrkdwn", "text": "<!here>"}}])
    [msg] = world.fake.messages(CH)[-1:]
    assert msg["text"] == "raw &lt;!channel&gt; and &lt;!subteam^S1|@team&gt; &lt;b&gt;x&lt;/b&gt;"
    assert mrkdwn_of(msg).count("&lt;!here&gt;") == 1
    assert not world.fake.injections


# -- 3. forget-me forgets --------------------------------------------------------------------------------
def _traces(path: Path, who: str) -> list[str]:
    """Every table cell (and pick text) of the database file that still names `who`."""
    db = sqlite3.connect(path)
    found = []
    for (table,) in db.execute("select name from sqlite_master where type='table' and name not like 'sqlite_%'"
                               " and name not like '%fts%'"):
        for row in db.execute(f'select * from "{table}"'):
            if any(isinstance(v, str) and who in v for v in row):
                found.append(f"{table}: {row!r}"[:300])
    db.close()
    return found


def test_forget_me_leaves_no_trace_in_today_digest_home_a_restored_backup_or_the_log(world, caplog):
    from bot.home import home_blocks
    from store import feedback as fb
    from store import open_store, pick_for_day

    caplog.set_level(logging.INFO)
    world.fake.add_members("UDAN")
    say(world, "interests add video understanding", user="UDAN")
    say(world, "schedule 09:00 UTC", user="UDAN")
    day = NOON.date()
    pick = pick_for_day(world.store, world.searcher, CH, day, feedback=world.deps.feedback)
    pick.choice.member = "UDAN"
    pick.choice.feedback_why = "close to *SPIKE*, which got 🔥 from @UDAN"
    world.store.claim_post(CH, day.isoformat(), claimer="t", paper_id=pick.paper_id, pick=pick.to_dict(),
                           now=NOON.timestamp())
    world.store.finish_post(CH, day.isoformat(), claimer="t", ts="1717416000.000100", now=NOON.timestamp(),
                            claimed_at=NOON.timestamp())
    world.store.record_message_paper(CH, "1717416000.000100", pick.paper_id, kind="daily", posted_by=None,
                                     now=NOON.timestamp())
    fb.record_reaction(world.store, event_id="EvDAN", channel=CH, message_ts="1717416000.000100", user="UDAN",
                       emoji="fire", added=True, event_ts=NOON.timestamp(), now=NOON.timestamp())
    world.store.save_paper("UDAN", pick.paper_id, now=NOON.timestamp())
    assert "UDAN" in text_of(say(world, "today"))  # before: Dan is named
    backup = world.path.with_name("before.db")
    world.store.backup_to(backup)

    forgot = say(world, "forget-me confirm", user="UDAN")
    assert "Done." in text_of(forgot)

    assert "UDAN" not in text_of(say(world, "today"))
    assert "UDAN" not in text_of(say(world, "digest"))
    assert "UDAN" not in text_of(say(world, "interests"))
    home = [b.to_dict() for b in home_blocks(world.deps, "U1")]
    assert "UDAN" not in str(home)
    assert _traces(world.path, "UDAN") == []
    # An operator restores last night's backup over the live file and restarts: Dan stays forgotten.
    world.store.close()
    for suffix in ("-wal", "-shm"):
        Path(f"{world.path}{suffix}").unlink(missing_ok=True)
    shutil.copy(backup, world.path)
    assert _traces(world.path, "UDAN")  # the old file names him ...
    open_store(world.path).close()  # ... until paperclub starts on it
    assert _traces(world.path, "UDAN") == []
    assert "UDAN" not in Path(f"{world.path}.forgotten").read_text()  # the list holds hashes, not ids
    # A backup made afterwards carries the list, so restored anywhere it forgets him too.
    later = open_store(world.path)
    later.backup_to(world.path.with_name("after.db"))
    later.close()
    assert Path(f"{world.path.with_name('after.db')}.forgotten").read_text() == Path(
        f"{world.path}.forgotten").read_text()
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "UDAN" not in logged, [line for line in logged.splitlines() if "UDAN" in line][:5]


# -- 11 and 12: the operator's CLI -----------------------------------------------------------------------
def paperclub(*args, cwd, **env):
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "PAPERCLUB_", "LOG_"))}
    return subprocess.run([sys.executable, "-m", "bot", *args], cwd=cwd, capture_output=True, text=True,
                          env={**clean, "PAPERCLUB_MODEL": "hashing-256", **env}, timeout=120)


def _from_the_future(db) -> None:
    """Test setup only: mark the database as migrated by a newer paperclub (one migration more)."""
    if str(db).startswith("postgresql://"):
        import psycopg

        with psycopg.connect(str(db), autocommit=True) as con:
            con.execute("insert into _paperclub_migrations(name) values ('m099_from_the_future')")
        return
    con = sqlite3.connect(db)
    [(table,)] = con.execute("select name from sqlite_master where type = 'table' and name like '%migrations%'").fetchall()
    con.execute(f'insert into "{table}"(migration_set, name, applied_at) '
                "values ('paperclub', 'm099_from_the_future', '2030-01-01')")
    con.commit()
    con.close()


def _contents(db):
    """Everything the database holds: the file's bytes, or every paperclub table's rows on PostgreSQL."""
    if not str(db).startswith("postgresql://"):
        return Path(db).read_bytes()
    import psycopg

    with psycopg.connect(str(db), autocommit=True) as con:
        tables = [t for (t,) in con.execute("select tablename from pg_tables where schemaname = current_schema() "
                                            "order by tablename")]
        return {t: con.execute(f'select md5(coalesce(string_agg(r::text, \',\' order by r::text), \'\')) '
                               f'from "{t}" r').fetchone()[0] for t in tables}


@pytest.mark.slow  # starts a process
@pytest.mark.both_backends
def test_a_database_from_a_newer_paperclub_is_refused_for_writes_and_read_with_a_warning(
        seeded_hashing_db, backend, tmp_path):
    db = seeded_hashing_db
    _from_the_future(db)
    before = _contents(db)
    for write in (["ingest", str(tmp_path / "x.txt")], ["run"], ["reparse"]):
        (tmp_path / "x.txt").write_text("A short abstract about video grounding with actions and more.\n")
        out = paperclub("--db", str(db), *write, cwd=tmp_path)
        assert out.returncode == 1, (write, out.stdout, out.stderr)
        [line] = [ln for ln in out.stderr.strip().splitlines() if ln.startswith("error:")]
        assert "newer paperclub" in line and "m099_from_the_future" in line and "this one knows schema" in line
    read = paperclub("--db", str(db), "papers", "--limit", "2", cwd=tmp_path)
    assert read.returncode == 0, read.stderr
    assert "warning:" in read.stderr and "newer paperclub" in read.stderr
    assert read.stdout.strip()
    assert _contents(db) == before  # no paper, heartbeat, lease or migration written


@pytest.mark.slow  # starts a process
def test_on_a_read_only_volume_reading_works_and_writing_says_why(hashing_db, tmp_path):
    base = Path(tempfile_dir())
    try:
        data = base / "data"
        data.mkdir(mode=0o755)
        db = copy_db(hashing_db, data / "paperclub.db")
        for p in (db, data, base):
            os.chmod(p, 0o755 if p.is_dir() else 0o644)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "PAPERCLUB_", "LOG_"))}
        env["PAPERCLUB_MODEL"] = "hashing-256"
        code = OBEY_FILE_MODES + "import bot.cli\nbot.cli.main(['--db', sys.argv[1], *sys.argv[2:]])"

        def cli(*args):
            return subprocess.run([sys.executable, "-c", code, str(db), *args], cwd=base, env=env,
                                  capture_output=True, text=True, timeout=120)
        con = sqlite3.connect(db)
        first = con.execute("select id from papers limit 1").fetchone()[0]
        con.close()
        db.chmod(0o444)
        data.chmod(0o555)  # the volume is read-only: neither the file nor its folder can be written
        before = db.read_bytes()
        reads = {"papers": ["--limit", "3"], "search": ["video", "grounding"], "show": [first], "similar": [first],
                 "summary": [first], "feeds": [], "overview": ["video"], "pick": ["--channel", "C1"], "replay": [],
                 "backup": [str(base / "copy.db")]}
        for name, args in reads.items():
            out = cli(name, *args)
            assert out.returncode == 0, (name, out.stderr)
            assert "unable to open" not in out.stderr and "readonly" not in out.stderr, (name, out.stderr)
            assert (out.stdout + out.stderr).strip(), name
        out = cli("health")  # reads: the database answers, and what is wrong is the missing bot
        assert "database reachable" in out.stderr and "never connected" in out.stderr, out.stderr
        (base / "x.txt").write_text("An abstract about robots that learn to grasp objects from video.\n")
        writes = {"ingest": [str(base / "x.txt")], "fetch": ["arxiv", "cs.LG"], "reparse": [], "run": [],
                  "console": [], "enrich": ["openreview", "--venue", "ICLR.cc/2026/Conference"],
                  "restore": [str(base / "copy.db")]}
        for name, args in writes.items():
            out = cli(name, *args)
            assert out.returncode == 1, (name, out.stderr)
            assert out.stderr.strip().splitlines()[-1].startswith(f"error: cannot write the database {db}"), (name, out.stderr)
        # Every command is one or the other, or never opens the database.
        from bot.cli import cli as commands
        assert set(commands.commands) == {*reads, "health", *writes, "export-onnx", "summarize", "migrate"}
        assert db.read_bytes() == before  # nothing was written, not even a cached summary
    finally:
        for p in [base, *base.rglob("*")]:
            os.chmod(p, 0o755 if p.is_dir() else 0o644)
        shutil.rmtree(base)


def tempfile_dir() -> str:
    import tempfile

    path = tempfile.mkdtemp(prefix="paperclub-ro-", dir="/tmp")
    os.chmod(path, 0o755)
    return path
