"""Posting processes for the race trials: each a real OS process on the shared SQLite file.

A racer does what a replica's sweep (or `paperclub pick --post` run again) does:
call `post_daily` for the day, and while it is busy or failed, try again a
moment later, with its own claimer id, until the day is posted. Each try's
result is appended to a JSON Lines file for the test to read.
"""
from __future__ import annotations

import json
import random
import time


def racer(db: str, api_url: str, token: str, channel: str, day: str, out: str, *, start_at: float = 0.0,
          tries: int = 1000, deadline: float = 60.0, budget: float = 0.5) -> None:
    """Post `day` in `channel` until it is out (or `tries`/`deadline` run out)."""
    from datetime import date, datetime, timezone

    from slack_sdk import WebClient

    from bot.deps import Feedback
    from bot.posting import Poster, post_daily
    from store import HashingEmbedder, Searcher, open_store

    store = open_store(db)
    poster = Poster()  # this process: its replica id, host:pid
    searcher = Searcher(store, HashingEmbedder())
    client = WebClient(token=token, base_url=api_url, timeout=30)
    time.sleep(max(0.0, start_at - time.time()))  # the racers start together
    ends = time.monotonic() + deadline
    for _ in range(tries):
        result = post_daily(client, store, searcher, channel, datetime.now(timezone.utc),
                            day=date.fromisoformat(day), feedback=Feedback(), poster=poster, budget=budget)
        with open(out, "a") as f:
            f.write(json.dumps({"claimer": poster.replica, "status": result.status, "ts": result.ts,
                                "detail": result.detail}) + "\n")
        if result.status in ("posted", "recovered", "already") or time.monotonic() > ends:
            break
        time.sleep(random.uniform(0.02, 0.2))
    store.close()
