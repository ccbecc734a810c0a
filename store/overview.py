"""Topic overviews: retrieve the most relevant papers, then group and name them (store.summary)."""
from __future__ import annotations

import numpy as np

from .summary import Overview, overview, summary_for

OVERVIEW_PAPERS = 8
MIN_RELEVANCE = 0.2  # dense cosine below this is not "about" the topic


def topic_overview(store, searcher, topic: str, *, llm=None, limit: int = OVERVIEW_PAPERS) -> Overview:
    """The 5-8 most relevant papers for a topic, grouped into named themes, each with its TL;DR."""
    hits = searcher.search(topic, limit=limit)
    # Keep the hits that are about the topic; always keep at least five when there are five.
    kept = [h for h in hits if (getattr(h, "dense_score", None) or 0) >= MIN_RELEVANCE or h.exact]
    if len(kept) < 5:
        kept = hits[: max(len(kept), 5)]
    model = searcher.embedder.name
    vectors, scored = [], []
    for h in kept:
        vec = store.get_vector(h.paper.id, model)
        if vec is None:
            continue
        vectors.append(vec)
        scored.append((h.paper, float(h.score)))
    if not scored:
        return overview(topic, [], np.zeros((0, 0), dtype=np.float32), summarizer=None)
    return overview(topic, scored, np.stack(vectors), llm=llm,
                    summarizer=lambda p: summary_for(store, p, llm=None))
