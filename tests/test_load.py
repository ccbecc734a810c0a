"""Load: 50 concurrent /paper commands while a separate `paperclub ingest` of 5,000 abstracts
writes to the same database file.

The real `paperclub run` process (hashing model) answers over Socket Mode;
the commands mix reads (search, summary, similar, today, digest, saved, help)
with writes (interests, schedule) that compete with the ingest's write
transactions. Every command must be acked within 3 s (Slack's limit), every
reply must arrive, and none may tell the user the database was locked, or
apologise for an error; and the ingest must keep going.
"""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bot.later import SORRY
from botproc import ROOT, start_bot
from conftest import copy_db
from figures import percentile, record, scale

pytestmark = pytest.mark.slow

COMMANDS = scale("LOAD_COMMANDS", 50)
ABSTRACTS = scale("LOAD_ABSTRACTS", 5000)
ACK_LIMIT = 3.0


def command_mix(n: int) -> list[tuple[str, str, str]]:
    """(text, user, channel) for n commands, reads and writes interleaved across channels."""
    texts = ["search video grounding with actions", "summary speculative decoding", "similar G-NLL",
             "search hallucination in vision language models", "today", "digest 7", "saved", "help",
             "interests add topic {i}", "schedule 09:{i:02d} UTC", "search mixture of experts routing",
             "interests", "s diffusion models for video", "show gene expression prediction"]
    return [(texts[i % len(texts)].format(i=i % 60), f"U{i % 7}", f"C{i % 5}") for i in range(n)]


def count_papers(db: Path) -> int:
    conn = sqlite3.connect(db, timeout=30)
    try:
        return conn.execute("select count(*) from papers").fetchone()[0]
    finally:
        conn.close()


def test_50_commands_during_a_5000_abstract_ingest_are_acked_within_3_s_and_never_see_a_lock(
        hashing_db, tmp_path, fake_slack):
    from test_ingest import synthetic_jsonl

    fake = fake_slack
    db = copy_db(hashing_db, tmp_path / "load.db")
    data = synthetic_jsonl(tmp_path / "big.jsonl", ABSTRACTS, seed=50)
    bot = start_bot(fake, db, tmp_path / "bot.log", PAPERCLUB_ADMINS="")
    ingest = None
    try:
        env = {**os.environ, "PAPERCLUB_MODEL": "hashing-256", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
        ingest = subprocess.Popen([sys.executable, "-m", "bot", "--db", str(db), "ingest", str(data)],
                                  cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        # Start once the ingest is writing (its first chunk is in), not while it is still reading files.
        fake.wait_for(lambda: count_papers(db) > 38 or ingest.poll() is not None, timeout=120, interval=0.05)
        assert ingest.poll() is None, "the ingest finished before the commands: make it bigger"

        sent = []
        for text, user, channel in command_mix(COMMANDS):  # all in flight at once
            url = fake.new_response_url(channel=channel, user=user)
            sent.append((text, url, fake.slash_command(text, user=user, channel=channel, response_url=url),
                         time.monotonic()))
        acks = [fake.wait_ack(envelope, timeout=30)[1] for _, _, envelope, _ in sent]
        ingest_running = ingest.poll() is None

        replies, reply_seconds = {}, []
        deadline = time.monotonic() + 120
        while len(replies) < len(sent) and time.monotonic() < deadline:
            for _text, url, _, at in sent:
                if url not in replies and fake.responses(url):
                    replies[url] = fake.responses(url)[0]
                    reply_seconds.append(time.monotonic() - at)
            time.sleep(0.02)
        # The ingest is not waited for (another half minute of parsing): it must still be going,
        # or have finished cleanly. tests/test_crash.py shows a stopped ingest leaves no damage.
        ingest_ok = ingest.poll() is None or ingest.returncode == 0
        if ingest.poll() is None:
            ingest.terminate()
        out, _ = ingest.communicate(timeout=60)
    finally:
        if ingest is not None and ingest.poll() is None:
            ingest.kill()
            ingest.wait()
        bot.stop()

    p50, p99 = percentile(acks, 50), percentile(acks, 99)
    record("load", commands=len(sent), abstracts=ABSTRACTS, ack_p50=round(p50, 3), ack_p99=round(p99, 3),
           ack_max=round(max(acks), 3), reply_p50=round(percentile(reply_seconds, 50), 2),
           reply_p99=round(percentile(reply_seconds, 99), 2), replies=len(replies),
           ingest_running_during_acks=ingest_running, lost=len(sent) - len(replies))
    assert ingest_running, "the ingest ended before the commands were acked: nothing was tested"
    assert max(acks) < ACK_LIMIT, f"ack p50 {p50:.2f} s, p99 {p99:.2f} s, max {max(acks):.2f} s"
    assert len(replies) == len(sent), f"{len(sent) - len(replies)} commands got no reply"
    for text, url, _, _ in sent:
        body = json.dumps(replies[url], ensure_ascii=False)
        assert "database is locked" not in body and SORRY not in body, (text, body[:300])
    assert ingest_ok and "database is locked" not in out, out[-2000:]
    assert count_papers(db) > 38
    logs = bot.logs()
    assert "listener failed" not in logs and "Traceback" not in logs, logs[-3000:]
    written = sqlite3.connect(db)
    try:
        assert written.execute("pragma integrity_check").fetchone()[0] == "ok"
        interests = written.execute("select count(*) from interests where text like 'topic %'").fetchone()[0]
    finally:
        written.close()
    assert interests == sum(1 for t, _, _ in command_mix(COMMANDS) if t.startswith("interests add"))
