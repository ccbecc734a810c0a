"""The SQLite schema: every migration of the paperclub database, oldest first (sqlite-utils Migrations)."""
from __future__ import annotations

import sqlite_utils
from sqlite_utils.migrations import Migrations

from .posts import POSTS_INDEXES, POSTS_TABLE

migrations = Migrations("paperclub")


@migrations()
def m001_papers(db: sqlite_utils.Database):
    db["papers"].create(
        {
            "id": str,
            "collection": str,
            "year": int,
            "title": str,
            "short_name": str,
            "headline": str,
            "abstract": str,
            "raw": str,
            "raw_title": str,
            "url": str,
            "authors": str,
            "keywords": str,
            "code_urls": str,
            "numbers": str,
            "content_hash": str,  # hash of the text that gets embedded
            "source": str,
            "created_at": float,
            "updated_at": float,
        },
        pk="id",
        not_null={"short_name", "headline", "abstract", "content_hash"},
    )
    db["papers"].create_index(["short_name"])
    db["papers"].create_index(["collection", "year"])
    # Identity keys: ext:<doi/arxiv/openreview>, title:<norm>, abs:<hash>,
    # sent:<hash> (edit detection) and rec:<hash> (exact source record seen).
    db["paper_keys"].create(
        {"key": str, "paper_id": str},
        pk=("key", "paper_id"),
        foreign_keys=[("paper_id", "papers", "id")],
    )
    db["paper_keys"].create_index(["paper_id"])
    db["papers"].enable_fts(
        ["short_name", "headline", "title", "abstract"],
        create_triggers=True,
        tokenize="porter unicode61 remove_diacritics 2",
    )
    db["embeddings"].create(
        {"paper_id": str, "model": str, "dim": int, "vector": bytes, "content_hash": str},
        pk=("paper_id", "model"),
        foreign_keys=[("paper_id", "papers", "id")],
    )
    db["embeddings"].create_index(["model", "content_hash"])
    db["summaries"].create(
        {"content_hash": str, "backend": str, "data": str, "created_at": float},
        pk=("content_hash", "backend"),
    )
    db["meta"].create({"key": str, "value": str}, pk="key")



@migrations()
def m002_daily(db: sqlite_utils.Database):
    """Paper of the day: channel interests, post schedules, and one claim row per (channel, day)."""
    db["interests"].create(
        {"id": int, "channel": str, "text": str, "paper_id": str, "added_by": str, "model": str,
         "vector": bytes, "created_at": float},
        pk="id", not_null={"channel", "text"},
    )
    db["interests"].create_index(["channel"])
    db["schedules"].create(
        {"channel": str, "hour": int, "minute": int, "tz": str, "days": str, "set_by": str,
         "updated_at": float},
        pk="channel", not_null={"hour", "minute", "tz", "days"},
    )
    # status: claimed -> posted, or failed (retried later), or empty (nothing left to pick).
    db["posts"].create(
        {"channel": str, "day": str, "status": str, "paper_id": str, "pick": str, "claimed_by": str,
         "claimed_at": float, "attempts": int, "error": str, "ts": str, "abstract_ts": str,
         "posted_at": float},
        pk=("channel", "day"), not_null={"status"},
    )
    # A paper is the paper of the day at most once per channel, whatever the code above does.
    db.execute("create unique index posts_channel_paper on posts(channel, paper_id) "
               "where paper_id is not null")
    db["posts"].create_index(["channel", "ts"])


@migrations()
def m003_reactions(db: sqlite_utils.Database):
    """Reactions as feedback: an append-only log (one row per Slack event, deduplicated by
    event_id), the papers behind the bot's other messages (shares), and members' reading lists."""
    db["reactions"].create(
        {"id": int, "event_id": str, "channel": str, "message_ts": str, "paper_id": str, "user": str,
         "emoji": str, "base": str, "action": str, "event_ts": float, "event_time": float,
         "recorded_at": float},
        pk="id",
        not_null={"event_id", "channel", "message_ts", "paper_id", "user", "emoji", "base", "action",
                  "event_ts"},
    )
    # Slack delivers at least once: the same event_id (retries, redelivery) is stored once.
    db.execute("create unique index reactions_event_id on reactions(event_id)")
    db["reactions"].create_index(["channel", "paper_id"])
    db["reactions"].create_index(["user"])
    db["message_papers"].create(
        {"channel": str, "ts": str, "paper_id": str, "kind": str, "posted_by": str, "posted_at": float},
        pk=("channel", "ts"), not_null={"paper_id", "kind"},
    )
    db["message_papers"].create_index(["channel", "posted_at"])
    db["saved_papers"].create(
        {"user": str, "paper_id": str, "source": str, "saved_at": float},
        pk=("user", "paper_id"), not_null={"source"},
    )


@migrations()
def m004_short_name_nocase(db: sqlite_utils.Database):
    # find_exact matches short names case-insensitively; without this index it
    # scanned the whole table (about 120 ms at 100k papers).
    db.execute("create index if not exists papers_short_name_nocase on papers(short_name collate nocase)")


@migrations()
def m005_sources(db: sqlite_utils.Database):
    """Fresh papers: each source's cursor and health, when a paper was announced, channels' feeds."""
    # One row per source ("arxiv-rss:cs.LG", "arxiv-api:cs.LG", "openreview:ICLR.cc/2026/Conference"):
    # the cursor (JSON) is written after each page's papers are committed, so a killed harvest
    # resumes at the page it was on and re-reads at most that page (deduplicated by ingest).
    db["source_state"].create(
        {"source": str, "cursor": str, "last_success": float, "last_error": str, "last_error_at": float,
         "failing_since": float, "updated_at": float},
        pk="source",
    )
    # The first announcement of a paper by a source: what "new on arXiv today" is measured from.
    db["paper_announcements"].create(
        {"paper_id": str, "source": str, "announced_at": float},
        pk=("paper_id", "source"), foreign_keys=[("paper_id", "papers", "id")],
    )
    db["paper_announcements"].create_index(["source", "announced_at"])
    db["feeds"].create(
        {"id": int, "channel": str, "kind": str, "target": str, "added_by": str, "created_at": float},
        pk="id", not_null={"channel", "kind", "target"},
    )
    db.execute("create unique index feeds_channel_target on feeds(channel, kind, target)")


@migrations()
def m006_replicas(db: sqlite_utils.Database):
    """Several bot processes on one database: Slack events handled once (event_id ->
    the replica that took it) and named leases with an epoch fence for periodic sweeps."""
    db["processed_events"].create({"event_id": str, "replica": str, "seen_at": float}, pk="event_id",
                                  not_null={"replica", "seen_at"})
    db["processed_events"].create_index(["seen_at"])
    db["leases"].create({"name": str, "holder": str, "epoch": int, "expires_at": float}, pk="name",
                        not_null={"holder", "epoch", "expires_at"})


@migrations()
def m007_club(db: sqlite_utils.Database):
    """The reading group (issue 17): a channel's club, its members and aways, sessions,
    nominations and approval votes."""
    db["clubs"].create(
        {"channel": str, "weekday": int, "hour": int, "minute": int, "tz": str, "cadence": str,
         "anchor": str, "lead_hours": int, "cutoff_hours": int, "mode": str, "active": int,
         "set_by": str, "updated_at": float},
        pk="channel", not_null={"weekday", "hour", "minute", "tz", "cadence", "mode", "active"},
    )
    db["club_members"].create(
        {"channel": str, "user": str, "active": int, "joined_at": float},
        pk=("channel", "user"), not_null={"active"},
    )
    db["club_aways"].create(
        {"id": int, "channel": str, "user": str, "start": str, "end": str, "added_at": float},
        pk="id", not_null={"channel", "user", "start", "end"},
    )
    db["club_aways"].create_index(["channel", "user"])
    # state: planned -> held, or skipped; votes are frozen into the row at the cutoff.
    db["club_sessions"].create(
        {"channel": str, "date": str, "state": str, "paper_id": str, "presenter": str, "nominator": str,
         "thread_ts": str, "agenda_ts": str, "votes": int, "tiebreak": str, "updated_at": float},
        pk=("channel", "date"), not_null={"state"},
    )
    # A paper is read by a club once: the store refuses a second held session with it.
    db.execute("create unique index club_sessions_paper on club_sessions(channel, paper_id) "
               "where paper_id is not null and state != 'skipped'")
    db["club_nominations"].create(
        {"channel": str, "session": str, "paper_id": str, "user": str, "nominated_at": float},
        pk=("channel", "session", "paper_id"), not_null={"nominated_at"},
    )
    # Approval voting: one row per (member, paper, session), so a double click is one vote.
    db["club_votes"].create(
        {"channel": str, "session": str, "user": str, "paper_id": str, "voted_at": float},
        pk=("channel", "session", "user", "paper_id"),
    )


@migrations()
def m008_scheduled_posts(db: sqlite_utils.Database):
    """Claim rows for the club's scheduled posts (agenda, winner, reminder, thread, recap): one per
    (channel, key), key = '<kind>:<session date>', with the same states as the daily posts."""
    db["scheduled_posts"].create(
        {"channel": str, "key": str, "kind": str, "status": str, "claimed_by": str, "claimed_at": float,
         "error": str, "ts": str, "posted_at": float},
        pk=("channel", "key"), not_null={"kind", "status"},
    )


@migrations()
def m009_changes(db: sqlite_utils.Database):
    """A change counter on papers and vectors: each write stamps its rows with the papers_version
    it bumped to, so a searcher refreshes its in-memory index from the rows changed since the
    version it loaded (store.vectors), never by reloading every vector after each ingest."""
    db.execute("alter table papers add column changed integer not null default 0")
    db.execute("alter table embeddings add column changed integer not null default 0")
    db.execute("create index papers_changed on papers(changed)")
    db.execute("create index embeddings_model_changed on embeddings(model, changed)")


@migrations()
def m010_one_claims_table(db: sqlite_utils.Database):
    """One claims table: the club's scheduled posts join the daily posts in `posts`, keyed by
    (channel, key). A daily post's key is its day (kind 'daily', at most one per channel and day);
    a club post's is '<kind>:<session date>', its day null. Every row is kept."""
    db.execute(POSTS_TABLE.format(name="posts_new"))
    db.execute("insert into posts_new(channel, key, kind, day, status, paper_id, pick, claimed_by, claimed_at, "
               "attempts, error, ts, abstract_ts, posted_at) select channel, day, 'daily', day, status, paper_id, "
               "pick, claimed_by, claimed_at, attempts, error, ts, abstract_ts, posted_at from posts")
    db.execute("insert into posts_new(channel, key, kind, status, claimed_by, claimed_at, attempts, error, ts, "
               "posted_at) select channel, key, kind, status, claimed_by, claimed_at, 0, error, ts, posted_at "
               "from scheduled_posts")
    db.execute("drop table posts")
    db.execute("drop table scheduled_posts")
    db.execute("alter table posts_new rename to posts")
    for statement in POSTS_INDEXES:
        db.execute(statement)


@migrations()
def m011_carried_nominations(db: sqlite_utils.Database):
    """Where a nomination was carried from: the session it was made for, set when a skip carries it to
    the next ballot (null: it is on the ballot it was made for), so undoing the skip can bring it back.
    Nominations carried before this migration read as made for the session they are on."""
    db.execute("alter table club_nominations add column carried_from text")


@migrations()
def m012_forgotten_members(db: sqlite_utils.Database):
    """The forgotten list (store.text.member_hash of each member who ran forget-me) inside the database
    too, as on PostgreSQL, so a backup file carries it; the file beside the database
    (paperclub.db.forgotten) stays, so a restore of an older file cannot shorten it. Each start merges
    the two. A database restored from before this migration gets the table, filled from the file."""
    db.execute("create table forgotten_members (hash text primary key)")


@migrations()
def m013_post_permalinks(db: sqlite_utils.Database):
    """A post's permalink, kept once Slack gave it (chat.getPermalink), so that `/paper today` links
    the day's post without asking Slack again on every ask. Null until first asked."""
    db.execute("alter table posts add column permalink text")


@migrations()
def m014_presenter_choice(db: sqlite_utils.Database):
    """Whether the presenter chose the session's paper (store.club.choose_paper): a presenter who never
    pressed Choose is not announced as the one who chose it. Sessions decided before this migration in a
    club where the presenter chooses, with no tie-break, read as chosen, as their announcement said."""
    db.execute("alter table club_sessions add column chosen integer not null default 0")
    db.execute("update club_sessions set chosen = 1 where paper_id is not null and tiebreak is null "
               "and channel in (select channel from clubs where mode = 'presenter')")


@migrations()
def m015_source_papers(db: sqlite_utils.Database):
    """How many papers a feed's latest read brought that it had not announced before (its night's
    news), so `/paper feed` can show a working feed alive. Null until the next read of each feed."""
    db.execute("alter table source_state add column last_papers integer")
