"""Crashes: `kill -9` at random moments during an ingest and during a daily post, 20 times each.

Every trial starts from a copy of one prepared database, runs the real CLI
(`paperclub ingest`, `paperclub pick --post`) in its own process, kills it with
SIGKILL at a random moment, and checks what a restart would find:
`PRAGMA integrity_check` is ok, nothing is half-written (every paper has its
vector and its search index entry; a post row is either a claim or a finished
post), nothing is in Slack twice, and running the same command again completes
the work, ending exactly where an uninterrupted run ends.
"""
from __future__ import annotations

import hashlib
import json
import random
import sqlite3
import time
from pathlib import Path

import pytest

import forkrun
from conftest import APP_TOKEN, BOT_TOKEN, copy_db
from figures import record, scale

pytestmark = pytest.mark.slow

TRIALS = scale("CRASH_TRIALS", 20)
NEW_ABSTRACTS = scale("CRASH_ABSTRACTS", 300)  # two write chunks (256 records each)
CH, DAY = "C1", "2024-06-03"
EVENT_TYPE = "paperclub_daily"


@pytest.fixture(scope="module")
def ctx(fork_ctx):
    return fork_ctx


def run_to_end(ctx, argv, env, cwd, log, timeout=120) -> tuple[int, float]:
    started = time.monotonic()
    proc = forkrun.start(ctx, argv, env=env, cwd=cwd, log=log)
    proc.join(timeout)
    if proc.is_alive():
        proc.kill()
        proc.join()
        raise AssertionError(f"paperclub {' '.join(argv)} did not finish: {Path(log).read_text()[-2000:]}")
    return proc.exitcode, time.monotonic() - started


def kill_at(ctx, argv, env, cwd, log, after: float, once=None) -> bool:
    """Start the command, SIGKILL it `after` seconds later (counted from when `once()` first holds,
    if given); True if it was still running then."""
    proc = forkrun.start(ctx, argv, env=env, cwd=cwd, log=log)
    while once is not None and proc.is_alive() and not once():
        time.sleep(0.005)
    proc.join(after)
    alive = proc.is_alive()
    proc.kill()
    proc.join()  # reaped: a claim by this pid now belongs to a dead process
    return alive


def sql(db: Path, query: str, args=()) -> list[tuple]:
    conn = sqlite3.connect(db, timeout=30)
    try:
        return conn.execute(query, args).fetchall()
    finally:
        conn.close()


def integrity(db: Path) -> str:
    return sql(db, "pragma integrity_check")[0][0]


# -- ingest ----------------------------------------------------------------------------------------
def ingest_files(folder: Path, n: int) -> list[Path]:
    """Edits of three bundled abstracts (a .txt, as a reading group would paste them) and n new ones."""
    from store import bundled_sample_paths

    rng = random.Random(9)
    blocks = [b.strip() for p in bundled_sample_paths() for b in p.read_text().split("\n\n")[1:] if b.strip()]
    edits = [b + " We release code and checkpoints for all experiments reported here." for b in blocks[:3]]
    edited = folder / "edits.txt"
    edited.write_text("ICLR 2026 Papers\n\n" + "\n\n".join(edits) + "\n")
    sents = [s.strip() + "." for b in blocks for s in b.split(". ") if len(s) > 40]
    new = folder / "new.jsonl"
    with new.open("w") as f:
        for i in range(n):
            f.write(json.dumps({"id": f"crash-{i}", "title": f"Crash-test paper number {i}",
                                "abstract": " ".join(rng.sample(sents, 3))}) + "\n")
    return [edited, new]


def watch_first_chunk(proc, db: Path, seed_papers: int, started: float) -> float | None:
    """Seconds from `started` until the first chunk of new papers is in (None: the run ended first)."""
    while proc.is_alive():
        if papers_now(db) > seed_papers:
            return time.monotonic() - started
        time.sleep(0.005)
    return None


def papers_now(db: Path) -> int:
    try:
        return sql(db, "select count(*) from papers")[0][0]
    except sqlite3.OperationalError:  # mid-checkpoint, or not there yet
        return 0


def fingerprint(db: Path) -> str:
    """The content of papers, identity keys, vectors and the search index, timestamps left out."""
    h = hashlib.sha256()
    for query in ("select id, collection, year, title, short_name, headline, abstract, raw, url, authors, "
                  "keywords, code_urls, numbers, content_hash from papers order by id",
                  "select key, paper_id from paper_keys order by key, paper_id",
                  "select paper_id, model, dim, vector, content_hash from embeddings order by paper_id, model",
                  "select rowid, short_name, headline, title, abstract from papers_fts order by rowid"):
        for row in sql(db, query):
            h.update(repr(row).encode())
    return h.hexdigest()


def check_consistent(db: Path, model: str) -> int:
    """Nothing half-written: every paper has its current vector and an index entry; returns papers."""
    assert integrity(db) == "ok"
    assert sql(db, "pragma foreign_key_check") == []
    # FTS5's own check that the index matches the papers table it is built from.
    sql(db, "insert into papers_fts(papers_fts) values ('integrity-check')")
    missing = sql(db, "select p.id from papers p left join embeddings e on e.paper_id = p.id and e.model = ? "
                      "and e.content_hash = p.content_hash where e.paper_id is null", [model])
    assert missing == [], f"{len(missing)} papers without their vector"
    orphans = sql(db, "select count(*) from paper_keys k left join papers p on p.id = k.paper_id "
                      "where p.id is null")[0][0]
    assert orphans == 0
    return sql(db, "select count(*) from papers")[0][0]


def test_kill_9_at_random_moments_during_ingest_then_a_rerun_completes_it(ctx, hashing_db, tmp_path):
    model = "hashing-256"
    env = {"PAPERCLUB_MODEL": model, "OMP_NUM_THREADS": "1", "LOG_LEVEL": "WARNING"}
    files = [str(p) for p in ingest_files(tmp_path, NEW_ABSTRACTS)]
    seed_papers = sql(hashing_db, "select count(*) from papers")[0][0]

    # The uninterrupted run: what every killed-and-rerun trial must end up identical to.
    clean = copy_db(hashing_db, tmp_path / "clean.db")
    started = time.monotonic()
    proc = forkrun.start(ctx, ["--db", str(clean), "ingest", *files], env=env, cwd=tmp_path, log=tmp_path / "clean.log")
    first_chunk = watch_first_chunk(proc, clean, seed_papers, started)
    proc.join(120)
    code, duration = proc.exitcode, time.monotonic() - started
    assert code == 0, (tmp_path / "clean.log").read_text()
    assert first_chunk is not None, "the clean run wrote everything at once: no moment between chunks to kill at"
    rest = duration - first_chunk  # the run after its first chunk is in: the second chunk, the index, the exit
    assert f"{NEW_ABSTRACTS} added, 3 updated" in (tmp_path / "clean.log").read_text()
    expected = fingerprint(clean)
    total = check_consistent(clean, model)
    assert total == seed_papers + NEW_ABSTRACTS

    rng = random.Random()
    at_kill, mid_work, lost, differs = [], 0, 0, []
    for trial in range(TRIALS):
        db = copy_db(hashing_db, tmp_path / f"trial{trial}.db")
        log = tmp_path / f"trial{trial}.log"
        argv = ["--db", str(db), "ingest", *files]
        if trial % 2:
            # Any moment of the run, as measured in the clean run.
            after = rng.uniform(0.0, duration * 1.05)
            mid_work += kill_at(ctx, argv, env, tmp_path, log, after)
        else:
            # Once this run's first chunk is in, when the store is partly written: the moment is
            # observed progress, and the delay after it scales with how slowly this run got there
            # (a loaded machine is slow for the rest of the run too).
            started = time.monotonic()
            proc = forkrun.start(ctx, argv, env=env, cwd=tmp_path, log=log)
            seen = watch_first_chunk(proc, db, seed_papers, started)
            load = (seen / first_chunk) if seen else 1.0
            after = rng.uniform(0.0, 0.5) * rest * max(1.0, load)
            proc.join(after)
            mid_work += proc.is_alive()
            proc.kill()
            proc.join()
        papers = check_consistent(db, model)
        assert seed_papers <= papers <= total
        at_kill.append(papers)
        code, _ = run_to_end(ctx, argv, env, tmp_path, log)
        assert code == 0, log.read_text()[-2000:]
        final = check_consistent(db, model)
        if final != total or fingerprint(db) != expected:  # counted, and asserted once every trial has run
            lost += total - final
            differs.append((trial, round(after, 2), final))
        db.unlink()
    partial = sum(seed_papers < n < total for n in at_kill)
    record("crash_ingest", trials=TRIALS, killed_mid_work=mid_work, partial_at_kill=partial,
           papers_at_kill=at_kill, clean_run_seconds=round(duration, 2), lost=lost,
           differs_from_clean_run=len(differs))
    assert not differs, f"(trial, killed after s, papers) that differ from a clean run after the rerun: {differs}"
    # The moments were spread over the work: some kills left a partly written store.
    assert mid_work >= TRIALS // 2, at_kill
    assert partial >= 1 or TRIALS < 10, at_kill


# -- daily post --------------------------------------------------------------------------------------
def daily_posts(fake) -> list[dict]:
    return [m for m in fake.messages(CH) if (m.get("metadata") or {}).get("event_type") == EVENT_TYPE
            and m["metadata"]["event_payload"].get("date") == DAY]


def thread_replies(fake, ts: str) -> list[dict]:
    return [m for m in fake.messages(CH) if m.get("thread_ts") == ts and m["ts"] != ts]


def post_state(db: Path) -> dict | None:
    rows = sql(db, "select status, paper_id, pick, ts, abstract_ts from posts where channel = ? and day = ?",
               [CH, DAY])
    if not rows:
        return None
    status, paper_id, pick, ts, abstract_ts = rows[0]
    return {"status": status, "paper_id": paper_id, "pick": pick, "ts": ts, "abstract_ts": abstract_ts}


def test_kill_9_at_random_moments_during_a_daily_post_then_a_rerun_posts_it_exactly_once(
        ctx, hashing_db, tmp_path, fake_slack):
    fake = fake_slack
    env = {"PAPERCLUB_MODEL": "hashing-256", "OMP_NUM_THREADS": "1", "LOG_LEVEL": "INFO",
           "SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_APP_TOKEN": APP_TOKEN, "SLACK_API_URL": fake.api_url}
    argv = lambda db: ["--db", str(db), "pick", "--channel", CH, "--date", DAY, "--post"]  # noqa: E731

    def slow_slack(rng) -> float:
        """Slack answers slowly, sometimes after taking the post (the windows a crash can land in);
        returns the seconds this adds to a run (two chat.postMessage calls: digest and abstract)."""
        fake.reset()
        before, after = rng.uniform(0.05, 0.4), rng.uniform(0.1, 0.5) if rng.random() < 0.5 else 0.0
        fake.delay("chat.postMessage", before)
        if after:
            fake.delay("chat.postMessage", after, after=True)
        delays["before"] = before
        return 2 * (before + after)

    def settle():
        """Let Slack finish a post the dead process sent just before it died.

        Slack still makes a post whose sender died mid-request. A real restart takes
        seconds (a container restart, the model load), by which time it is in the
        channel's history, where the restarted process looks; so wait for it here.
        """
        calls = fake.calls("chat.postMessage")
        if calls:
            time.sleep(max(0.0, calls[-1].at + delays["before"] + 0.1 - time.monotonic()))

    delays = {"before": 0.0}

    rng = random.Random()
    fake.reset()
    clean = copy_db(hashing_db, tmp_path / "clean.db")
    code, duration = run_to_end(ctx, argv(clean), env, tmp_path, tmp_path / "clean.log")
    assert code == 0, (tmp_path / "clean.log").read_text()
    (post,) = daily_posts(fake)
    assert len(thread_replies(fake, post["ts"])) == 1
    assert post_state(clean)["ts"] == post["ts"]

    states: dict[str, int] = {}
    posted_twice = lost = 0  # counted from what the fake Slack and the database hold
    failed = []
    no_abstract = 0  # the digest went out, the thread reply with the abstract did not (see the report)
    for trial in range(TRIALS):
        slower = slow_slack(rng)
        db = copy_db(hashing_db, tmp_path / f"daily{trial}.db")
        log = tmp_path / f"daily{trial}.log"
        after = rng.uniform(0.0, (duration + slower) * 1.1)
        kill_at(ctx, argv(db), env, tmp_path, log, after)
        settle()

        assert integrity(db) == "ok"
        row = post_state(db)
        in_slack = daily_posts(fake)
        assert len(in_slack) <= 1, f"trial {trial}: posted {len(in_slack)} times before the restart"
        if row is None:
            state = "before the claim"
            assert not in_slack
        elif row["status"] == "claimed":
            # a claim: the pick is stored whole, and no ts was recorded for a post that may or may not be out
            assert row["paper_id"] and json.loads(row["pick"])["choice"]["paper_id"] == row["paper_id"]
            assert row["ts"] is None
            state = "claimed, in Slack" if in_slack else "claimed, not in Slack yet"
        else:
            assert row["status"] == "posted", row
            assert in_slack and row["ts"] == in_slack[0]["ts"]
            state = "posted, abstract recorded" if row["abstract_ts"] else "posted, abstract pending"
        states[state] = states.get(state, 0) + 1

        code, _ = run_to_end(ctx, argv(db), env, tmp_path, log)
        assert code == 0, log.read_text()[-2000:]
        in_slack, row = daily_posts(fake), post_state(db)
        twice = len(in_slack) > 1
        gone = not in_slack or row is None or row["status"] != "posted" or row["ts"] != in_slack[-1]["ts"]
        posted_twice, lost = posted_twice + twice, lost + gone
        if twice or gone:  # counted, and asserted once every trial has run
            failed.append((trial, len(in_slack), row))
            db.unlink()
            continue
        (post,) = in_slack  # exactly once, whatever moment the first process died at
        assert row["status"] == "posted" and row["ts"] == post["ts"]
        abstracts = len(thread_replies(fake, post["ts"]))
        assert abstracts <= 1
        no_abstract += abstracts == 0
        assert integrity(db) == "ok"
        db.unlink()
    record("crash_daily", trials=TRIALS, states_at_kill=states, clean_run_seconds=round(duration, 2),
           posted_twice=posted_twice, lost=lost, abstract_reply_missing=no_abstract)
    assert posted_twice == 0 and lost == 0, f"(trial, posts in Slack, row) after the rerun: {failed}"
    assert len(states) >= 2, states  # the kills landed at different stages


# -- restore from a backup ----------------------------------------------------------------------------
def test_after_restoring_a_backup_from_before_the_post_the_post_is_not_made_again(hashing_db, tmp_path, fake_slack):
    # The README's restore: a backup from last night, today's post already in the channel.
    from datetime import datetime, timezone

    from slack_sdk import WebClient

    from bot.deps import Feedback
    from bot.posting import Poster, post_daily
    from store import HashingEmbedder, Searcher, open_store

    client = WebClient(token=BOT_TOKEN, base_url=fake_slack.api_url)
    backup = copy_db(hashing_db, tmp_path / "backup.db")
    live = open_store(copy_db(hashing_db, tmp_path / "live.db"))
    first = post_daily(client, live, Searcher(live, HashingEmbedder()), CH,
                       datetime(2024, 6, 3, 9, 0, tzinfo=timezone.utc), feedback=Feedback(), poster=Poster("before-the-restore"))
    assert first.status == "posted"
    live.close()
    restored = open_store(backup)  # the post's row is not in it
    again = post_daily(client, restored, Searcher(restored, HashingEmbedder()), CH,
                       datetime(2024, 6, 3, 15, 0, tzinfo=timezone.utc), feedback=Feedback(), poster=Poster("after-the-restore"))
    (post,) = daily_posts(fake_slack)
    assert again.ts == post["ts"] and restored.get_post(CH, DAY)["ts"] == post["ts"]
    restored.close()
