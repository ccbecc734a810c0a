"""`paperclub migrate --to postgresql://...`: a SQLite store copied whole, verified, and safe to re-run."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import copy_db
from store import HashingEmbedder, Searcher, open_store

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow  # every test runs `paperclub migrate` as a process
CH = "C1"


def paperclub(*args):
    env = {**os.environ, "PAPERCLUB_MODEL": "hashing-256"}
    return subprocess.run([sys.executable, "-m", "bot", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=120)


def lived_in(path: Path):
    """The seed store after a few days of use: an interest, a schedule, posts, a share,
    reactions, a reading list, a cached summary and a club session skipped."""
    s = open_store(path)
    ids = [p.id for p in s.list_papers(limit=3)]
    s.add_interest(CH, "video grounding", "U1", model="hashing", vector=np.ones(4), now=10.0)
    s.add_interest(CH, "diffusion", "U2", model="hashing", vector=np.arange(4.0), now=11.0)
    s.set_schedule(CH, hour=9, minute=30, tz="Europe/Paris", days="mon-fri", set_by="U1", now=12.0)
    assert s.claim_post(CH, "2026-11-30", claimer="r1", paper_id=ids[0], pick={"choice": {"member": "U1"}},
                        now=13.0)
    assert s.finish_post(CH, "2026-11-30", claimer="r1", ts="1764493200.000100", now=14.0, claimed_at=13.0)
    assert s.claim_post(CH, "2026-12-01", claimer="r1", paper_id=ids[1], pick=None, now=15.0)
    s.record_message_paper(CH, "1764500000.000200", ids[2], kind="share", posted_by="U2", now=16.0)
    for i, (user, emoji) in enumerate([("U1", "fire"), ("U2", "eyes")]):
        assert s.add_reaction({"event_id": f"Ev{i}", "channel": CH, "message_ts": "1764493200.000100",
                               "paper_id": ids[0], "user": user, "emoji": emoji, "base": emoji,
                               "action": "added", "event_ts": 20.0 + i, "recorded_at": 21.0 + i})
    s.save_paper("U2", ids[0], source="reaction", now=22.0)
    s.save_paper("U2", ids[2], now=23.0)
    s.put_summary("hash1", "extractive", {"tldr": "Short.", "points": ["a", "b"]}, now=24.0)
    s.add_nomination(CH, "2026-12-03", ids[1], "U1", now=25.0)
    s.skip_club_session(CH, "2026-12-03", "2026-12-10", now=26.0)  # carried over, and where from
    s.close()
    return ids


def test_migrate_copies_every_table_verifies_it_and_reruns_safely(hashing_db, tmp_path, pg_url):
    db = copy_db(hashing_db, tmp_path / "lab.db")
    ids = lived_in(db)

    out = paperclub("--db", str(db), "migrate", "--to", pg_url)
    assert out.returncode == 0, out.stderr
    assert "Copied and verified" in out.stdout and "38 papers" in out.stdout
    for table in ("papers", "paper_keys", "embeddings", "summaries", "interests", "schedules", "posts",
                  "reactions", "message_papers", "saved_papers", "meta"):
        line = next(x for x in out.stdout.splitlines() if x.startswith(table + " "))
        assert line.endswith("checksum ok"), line

    src, dst = open_store(db), open_store(pg_url)
    try:
        # What the bot reads on PostgreSQL is what it read on SQLite.
        assert [p.id for p in dst.list_papers()] == [p.id for p in src.list_papers()]
        assert dst.get_paper(ids[0]) == src.get_paper(ids[0])
        s_ids, s_mat = src.load_vectors("hashing-256")
        d_ids, d_mat = dst.load_vectors("hashing-256")
        assert d_ids == s_ids and np.array_equal(d_mat, s_mat)
        assert dst.paper_keys(ids) == src.paper_keys(ids)
        assert dst.get_summary("hash1", "extractive") == {"tldr": "Short.", "points": ["a", "b"]}
        assert [i["text"] for i in dst.interests(CH)] == ["video grounding", "diffusion"]
        assert np.array_equal(dst.interests(CH)[1]["vector"], np.arange(4.0, dtype=np.float32))
        assert dst.get_schedule(CH) == src.get_schedule(CH)
        assert dst.get_post(CH, "2026-11-30") == src.get_post(CH, "2026-11-30")
        assert dst.paper_for_message(CH, "1764500000.000200")["kind"] == "share"
        assert [r["emoji"] for r in dst.reactions(channel=CH)] == ["fire", "eyes"]
        assert dst.saved_papers("U2") == src.saved_papers("U2")
        assert dst.papers_version() == src.papers_version()
        assert [n["carried_from"] for n in dst.nominations(CH, "2026-12-10")] == ["2026-12-03"]
        assert dst.nominations(CH) == src.nominations(CH)
        # The claim made on SQLite still holds on PostgreSQL: nobody else posts that day.
        assert not dst.claim_post(CH, "2026-12-01", claimer="r2", paper_id=None, pick=None, now=30.0)
        assert dst.finish_post(CH, "2026-12-01", claimer="r1", ts="1764580000.000100", now=31.0, claimed_at=15.0)
        # New rows get new ids after the copied ones.
        assert dst.add_interest(CH, "graphs", None, model="hashing", vector=np.ones(4), now=32.0) > max(
            i["id"] for i in src.interests(CH))
        hits = Searcher(dst, HashingEmbedder()).search("video grounding", limit=3)
        assert [h.paper.id for h in hits] == [h.paper.id for h in Searcher(src, HashingEmbedder()).search(
            "video grounding", limit=3)]
        # Meanwhile the lab keeps using SQLite: one more save.
        src.save_paper("U1", ids[1], now=40.0)
    finally:
        src.close()
        dst.close()

    # Re-running brings the new save over and never overwrites what PostgreSQL already had...
    again = paperclub("--db", str(db), "migrate", "--to", pg_url)
    assert again.returncode != 0  # ...but the interest and post written on PostgreSQL are not in SQLite:
    assert "does not match the source in interests, posts" in again.stderr
    assert "Traceback" not in again.stderr
    dst = open_store(pg_url)
    try:
        assert [s["paper_id"] for s in dst.saved_papers("U1")] == [ids[1]]
        assert len(dst.interests(CH)) == 3
        assert dst.get_post(CH, "2026-12-01")["status"] == "posted"
    finally:
        dst.close()


def test_migrate_twice_from_an_unchanged_store_changes_nothing(hashing_db, tmp_path, pg_url):
    db = copy_db(hashing_db, tmp_path / "lab.db")
    lived_in(db)
    first = paperclub("--db", str(db), "migrate", "--to", pg_url)
    second = paperclub("--db", str(db), "migrate", "--to", pg_url)
    assert first.returncode == 0 and second.returncode == 0, second.stderr
    assert first.stdout == second.stdout


def test_migrate_wants_a_postgresql_target_and_an_existing_source(tmp_path):
    out = paperclub("--db", str(tmp_path / "lab.db"), "migrate", "--to", str(tmp_path / "other.db"))
    assert out.returncode == 1 and "--to must be a postgresql:// URL" in out.stderr
    out = paperclub("--db", str(tmp_path / "missing.db"), "migrate", "--to", "postgresql://u@127.0.0.1:1/x")
    assert out.returncode == 1 and "no database at" in out.stderr and "Traceback" not in out.stderr


def test_migrate_carries_the_forgotten_list_so_a_restored_member_is_forgotten_again(hashing_db, tmp_path, pg_url):
    db = copy_db(hashing_db, tmp_path / "lab.db")
    s = open_store(db)
    pid = s.list_papers(limit=1)[0].id
    s.save_paper("UGONE", pid, now=1.0)
    s.forget_user("UGONE")
    s.close()
    out = paperclub("--db", str(db), "migrate", "--to", pg_url)
    assert out.returncode == 0, out.stderr
    pg = open_store(pg_url)
    pg.save_paper("UGONE", pid, now=2.0)  # as a backup from before the request would bring back
    pg.close()
    pg = open_store(pg_url)  # start-up re-applies the forgotten list
    try:
        assert pg.saved_papers("UGONE") == []
    finally:
        pg.close()
