"""Posting processes for the race trials: each a real OS process on the shared database.

A racer does what a replica's sweep (or `paperclub pick --post` run again) does:
post the day's paper (`post_daily`), or a club post (a reminder, through the one
machine, `Poster.post_once`), and while it is busy or failed, try again a moment
later, as its own replica (host:pid), until it is out. Each try's result is
appended to a JSON Lines file for the test to read.
"""
from __future__ import annotations

import json
import random
import time

CLUB_KEY = "reminder:2024-06-06"  # the club post the racers race on


def racer(db: str, api_url: str, token: str, channel: str, day: str, out: str, *, post: str = "daily",
          start_at: float = 0.0, tries: int = 1000, deadline: float = 60.0, budget: float = 0.5) -> None:
    """Post `day`'s paper (post="daily") or the club's reminder (post="club") in `channel` until
    it is out (or `tries`/`deadline` run out)."""
    from datetime import date, datetime, timezone

    from slack_sdk import WebClient

    from bot.deps import Feedback
    from bot.posting import Post, Poster, post_daily
    from store import HashingEmbedder, Searcher, open_store

    store = open_store(db)
    searcher = Searcher(store, HashingEmbedder())
    client = WebClient(token=token, base_url=api_url, timeout=30)
    poster = Poster()  # this process: its replica id, host:pid
    reminder = Post(channel, CLUB_KEY, "reminder", date.fromisoformat(day),
                    lambda claim: {"text": "Reading group at 16:00: *the paper*, presented by nobody yet."})
    time.sleep(max(0.0, start_at - time.time()))  # the racers start together
    ends = time.monotonic() + deadline
    for _ in range(tries):
        now = datetime.now(timezone.utc)
        if post == "club":
            result = poster.post_once(client, store, reminder, now, budget=budget)
        else:
            result = post_daily(client, store, searcher, channel, now, day=date.fromisoformat(day),
                                feedback=Feedback(), poster=poster, budget=budget)
        with open(out, "a") as f:
            f.write(json.dumps({"claimer": poster.replica, "status": result.status, "ts": result.ts,
                                "detail": result.detail}) + "\n")
        if result.status in ("posted", "recovered", "already") or time.monotonic() > ends:
            break
        time.sleep(random.uniform(0.02, 0.2))
    store.close()
