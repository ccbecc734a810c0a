"""Text helpers shared by parse, ingest, search and summary: hashing (more to come here)."""
from __future__ import annotations

import hashlib


def content_hash(text: str) -> str:
    """sha256 of the text, 32 hex digits: the key of cached vectors and summaries."""
    # 32 digits is the length stored vectors are keyed by; a longer hash would re-encode them all.
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def short_hash(text: str, length: int = 20) -> str:
    """sha1 prefix for identity keys (abs:, sent:, title:) and minted ids."""
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:length]
