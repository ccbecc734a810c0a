"""What scripts meet: `search`/`similar`/`papers --nl` name each paper's source ids, and --limit goes to 1000."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow  # every test runs `paperclub` as a process
FILLER = ("We study how the method behaves on standard benchmarks and report consistent gains over "
          "strong baselines across settings.")
RECORDS = [
    {"id": "SkgsACVKPH", "title": "Graph Wavelets for Molecules",
     "abstract": "We propose graph wavelets that capture molecular structure. " + FILLER},
    {"id": "arXiv:2401.01234", "title": "Sparse Graph Attention",
     "abstract": "We introduce sparse graph attention for large citation networks. " + FILLER},
    {"id": "paper-7", "url": "https://doi.org/10.1234/Graph.Diff", "title": "Graph Diffusion Kernels",
     "abstract": "We present graph diffusion kernels for node classification. " + FILLER},
    {"url": "https://openreview.net/forum?id=Hy7fDog0b", "title": "Graph Pooling by Clustering",
     "abstract": "We describe a graph pooling layer learned by soft clustering of nodes. " + FILLER},
]
EXPECTED = {
    "Graph Wavelets for Molecules": {"id": "SkgsACVKPH"},
    "Sparse Graph Attention": {"id": "arXiv:2401.01234", "arxiv": "2401.01234"},
    "Graph Diffusion Kernels": {"id": "paper-7", "doi": "10.1234/graph.diff"},
    "Graph Pooling by Clustering": {"openreview": "hy7fdog0b"},
}


def paperclub(db: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "PAPERCLUB_"))}
    env["PAPERCLUB_MODEL"] = "hashing-64"
    return subprocess.run([sys.executable, "-m", "bot", "--db", str(db), *args], cwd=db.parent, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def library(tmp_path) -> Path:
    """A database ingested by the CLI from a JSON Lines file with ids of every kind, plus 150 more papers."""
    data = tmp_path / "papers.jsonl"
    more = [{"id": f"extra-{i}", "title": f"Graph Study Number {i}",
             "abstract": f"We analyse graph property {i} of random networks with {i} nodes. " + FILLER}
            for i in range(150)]
    data.write_text("".join(json.dumps(r) + "\n" for r in RECORDS + more))
    db = tmp_path / "paperclub.db"
    out = paperclub(db, "ingest", str(data))
    assert out.returncode == 0, out.stderr
    return db


def test_search_json_hits_carry_the_title_and_source_ids(library):
    out = paperclub(library, "search", "--json", "--limit", "1000", "graph")
    assert out.returncode == 0, out.stderr
    hits = json.loads(out.stdout)
    by_title = {h["title"]: h for h in hits}
    for title, ids in EXPECTED.items():
        assert by_title[title]["source_ids"] == ids, title
    assert by_title["Graph Study Number 42"]["source_ids"] == {"id": "extra-42"}
    # --limit is not capped by the searcher's 100 candidates: every paper holds 'graph'.
    assert len(hits) == len(RECORDS) + 150
    assert len({h["id"] for h in hits}) == len(hits)


def test_similar_and_papers_json_name_source_ids_too(library):
    out = paperclub(library, "similar", "--json", "--limit", "1000", "Sparse Graph Attention")
    assert out.returncode == 0, out.stderr
    hits = json.loads(out.stdout)
    assert "Sparse Graph Attention" not in {h["title"] for h in hits}
    assert {h["title"]: h["source_ids"] for h in hits}["Graph Wavelets for Molecules"] == {"id": "SkgsACVKPH"}
    assert len(hits) > 100
    listing = [json.loads(line) for line in paperclub(library, "papers", "--nl").stdout.splitlines()]
    assert {p["title"]: p["source_ids"] for p in listing if p["title"] in EXPECTED} == EXPECTED


def test_limit_above_1000_is_refused_with_a_clear_message(library):
    out = paperclub(library, "search", "--limit", "1001", "graph")
    assert out.returncode == 2 and "1001" in out.stderr and "Traceback" not in out.stderr
