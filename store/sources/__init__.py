"""Fresh papers: arXiv (API and daily listings) and OpenReview, fetched into the store's ingest path.

The package's public face. clients.py holds each service's polite client,
http.py the one HTTP helper, arxiv.py and openreview.py the protocols
(HTTP in, records out), feeds.py the harvests, polls and freshness, and
papers.py one paper by reference (`/paper add`, pasted links).
"""
from __future__ import annotations

from .clients import Sources
from .feeds import (DEFAULT_FRESH_DAYS, FEED_KINDS, announce_source, check_feed, feed_source, feeds_due, fresh_days, fresh_label, fresh_papers,
                    harvest_arxiv, harvest_openreview, parse_feed, poll_arxiv, poll_feed, poll_feeds)
from .http import Fetcher, SourceError, user_agent
from .papers import Added, add_paper, add_papers, known_paper, paper_link, parse_ref

__all__ = ["Sources", "SourceError", "Fetcher", "user_agent", "harvest_arxiv", "poll_arxiv",
           "harvest_openreview", "add_paper", "add_papers", "Added", "known_paper", "paper_link", "parse_ref", "poll_feed", "parse_feed", "check_feed",
           "FEED_KINDS", "fresh_papers", "fresh_label", "fresh_days", "poll_feeds", "feed_source", "feeds_due",
           "DEFAULT_FRESH_DAYS", "announce_source"]
