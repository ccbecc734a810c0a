"""paperclub's store: papers, search, picks, summaries and feedback, knowing nothing of Slack.

The way in is `open_store(url)`; everything else here takes the Store it returns::

    from store import open_store, Searcher, make_embedder
    store = open_store("paperclub.db")
    hits = Searcher(store, make_embedder()).search("video surprise", limit=5)
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from .backends import database_address, database_unreachable, open_store, restore_database
from .backends.conninfo import is_server_database
from .base import BackupResult, RestoreResult, Store
from .errors import EmptyQuery, IngestError, LeaseLost, NewerSchema, NoDatabase, PaperNotFound, ReadOnlyStorage, SchemaError, StoreBusy, StoreError
from .paper import Paper
from .posts import PostStatus

# Everything else loads on first use (PEP 562): `paperclub health` runs every minute in a
# container and must not pay for compiling the parser's and summariser's regexes.
_LAZY = {
    "store.embed": ["Embedder", "make_embedder", "HashingEmbedder", "SentenceTransformerEmbedder", "OnnxQueryEmbedder"],
    "store.ingest": ["Record", "IngestResult", "ingest_paths", "ingest_records", "embed_missing", "reparse",
                     "read_file", "bundled_sample_paths"],
    "store.search": ["Searcher", "Hit", "hits_json", "closeness", "loosely_related"],
    "store.daily": ["pick_for_day", "broad_interests", "interests_for"],
    "store.calibrate": ["calibration_round", "CalibrationRound"],
    "store.pick": ["pick_daily", "DailyPick", "PickSettings", "Interest", "PastPost", "like_text"],
    "store.taste": ["Reacted"],
    "store.summary": ["paper_summary", "paper_summaries", "Summary", "summarize", "summarize_jsonl"],
    "store.overview": ["topic_overview", "Overview"],
    "store.llm": ["LLMClient", "LLMConfig", "LLMError"],
    "store.feedback": ["Feedback", "parse_weights", "DEFAULT_WEIGHTS", "record_reaction", "sync_saved", "Recorded",
                       "channel_digest", "reading_list", "forget_member", "replay_channel"],
    "store.backends.copy": ["migrate_store", "TableCopy"],
    "store.lease": ["Lease", "FencedStore"],
    "store.schedule": ["ScheduleError", "ScheduleSpec", "parse_schedule", "next_fire", "catch_up",
                       "describe_next", "local_today"],
    "store.club": ["ClubError", "ClubSpec", "Timeline", "timeline", "next_session", "session_starts",
                   "choose_presenter", "tally", "Tally", "Nomination", "PastSession", "Away", "parse_away",
                   "club_for", "set_club", "nominate", "cast_vote", "decide", "propose", "MAX_VOTES",
                   "TIEBREAK"],
}
_WHERE = {name: module for module, names in _LAZY.items() for name in names}

__all__ = [
    "open_store", "restore_database", "is_server_database", "database_unreachable", "database_address", "Store",
    "BackupResult", "RestoreResult",
    "Paper", "PostStatus", "StoreError", "StoreBusy", "PaperNotFound", "IngestError", "SchemaError", "NewerSchema",
    "ReadOnlyStorage", "EmptyQuery", "LeaseLost", "NoDatabase",
    *_WHERE,
]

if TYPE_CHECKING:  # what a type checker and an editor see; at run time __getattr__ loads these
    from .club import (  # noqa: F401
        MAX_VOTES, TIEBREAK, Away, ClubError, ClubSpec, Nomination, PastSession, Tally, Timeline, cast_vote,
        choose_presenter, club_for, decide, next_session, nominate, parse_away, propose, session_starts,
        set_club, tally, timeline,
    )
    from .embed import Embedder, HashingEmbedder, OnnxQueryEmbedder, SentenceTransformerEmbedder, make_embedder  # noqa: F401
    from .feedback import (  # noqa: F401
        DEFAULT_WEIGHTS, Feedback, Recorded, channel_digest, forget_member, parse_weights, reading_list,
        record_reaction, replay_channel, sync_saved,
    )
    from .ingest import (  # noqa: F401
        IngestResult, Record, bundled_sample_paths, embed_missing, ingest_paths, ingest_records,
        read_file, reparse,
    )
    from .llm import LLMClient, LLMConfig, LLMError  # noqa: F401
    from .overview import Overview, topic_overview  # noqa: F401
    from .pick import (  # noqa: F401
        DailyPick, Interest, PastPost, PickSettings, like_text, pick_daily,
    )
    from .taste import Reacted  # noqa: F401
    from .daily import broad_interests, interests_for, pick_for_day  # noqa: F401
    from .calibrate import CalibrationRound, calibration_round  # noqa: F401
    from .schedule import (  # noqa: F401
        ScheduleError, ScheduleSpec, catch_up, describe_next, local_today, next_fire, parse_schedule,
    )
    from .backends.copy import TableCopy, migrate_store  # noqa: F401
    from .lease import FencedStore, Lease  # noqa: F401
    from .search import Hit, Searcher, closeness, hits_json, loosely_related  # noqa: F401
    from .summary import Summary, paper_summaries, paper_summary, summarize, summarize_jsonl  # noqa: F401


def __getattr__(name: str):
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'store' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
