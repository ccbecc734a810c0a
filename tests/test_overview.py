"""/paper overview and the summary / summarize / overview CLI commands."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_bot import all_text, app, command, module_store, one, searcher, slack  # noqa: F401 (fixtures)

ROOT = Path(__file__).resolve().parent.parent
VIDEO = ("video", "Video")


def test_overview_groups_the_topic_papers_into_named_themes(app, slack, module_store):
    reply = one(command(app, slack, "overview video language models"))
    blocks = reply["blocks"]
    assert blocks[0]["type"] == "header" and "video language models" in blocks[0]["text"]["text"]
    themes = [b for i, b in enumerate(blocks) if i and blocks[i - 1]["type"] == "divider"]
    assert 2 <= len(themes) <= 3
    assert all(t["text"]["text"].strip("* ") for t in themes)
    ids = [p.id for p in module_store.iter_papers()]
    shown = [i for i in ids if f"`{i}`" in all_text(reply)]
    assert 5 <= len(shown) <= 8
    # They are about the topic: most of the chosen abstracts talk about video.
    about_video = [module_store.get_paper(i) for i in shown]
    assert sum(any(v in p.abstract for v in VIDEO) for p in about_video) >= len(shown) - 1
    assert reply["response_type"] == "ephemeral"


def test_overview_without_a_topic_asks_for_one(app, slack):
    reply = one(command(app, slack, "overview"))
    assert "Which topic" in all_text(reply)


def cli(*args, db=None, stdin=None):
    env = {**os.environ, "PAPERCLUB_MODEL": "hashing-64"}
    if db:
        env["PAPERCLUB_DB"] = str(db)
    return subprocess.run([sys.executable, "-m", "bot", *args], input=stdin, capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=120)


@pytest.mark.slow  # starts a process
def test_summarize_batch_mode_writes_one_line_per_record_and_reports_bad_lines(tmp_path):
    abstract = ("Training large vision transformers is expensive. We propose TinyViT-Distill, which distils "
                "a large teacher into a 5M-parameter student. TinyViT-Distill reaches 84.8% top-1 accuracy "
                "on ImageNet-1k, 3.1% above the previous best small model. Code: https://github.com/x/tvd.")
    lines = [json.dumps({"id": "a", "title": "TinyViT-Distill", "abstract": abstract}),
             "{broken json", json.dumps({"id": "c"})]
    infile = tmp_path / "in.jsonl"
    infile.write_text("\n".join(lines) + "\n")
    out = cli("summarize", str(infile), db=tmp_path / "s.db")
    records = [json.loads(line) for line in out.stdout.splitlines()]
    assert len(records) == 3
    good = records[0]
    assert good["id"] == "a" and len(good["tldr"].split()) <= 30
    assert "84.8%" in json.dumps(good["points"]) and "https://github.com/x/tvd" in json.dumps(good["points"])
    assert "error" in records[1] and records[1].get("line") == 2
    assert "error" in records[2] and records[2].get("id") == "c"
    assert "Traceback" not in out.stderr


@pytest.mark.slow  # starts a process
def test_summary_command_prints_tldr_and_points(tmp_path):
    db = tmp_path / "c.db"
    assert cli("ingest", str(ROOT / "store" / "samples"), db=db).returncode == 0
    out = cli("summary", "SPIKE", "--json", db=db)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["name"] == "SPIKE" and data["tldr"] and set(data["points"]) >= {"problem", "approach", "results"}
    missing = cli("summary", "--json", db=db)
    assert missing.returncode != 0 and "Traceback" not in missing.stderr


def test_search_results_show_the_tldr_rather_than_the_headline(app, slack, module_store, searcher):
    import time

    from store import paper_summary

    reply = one(command(app, slack, "search surprise in videos"))
    spike = searcher.find_exact("SPIKE")
    tldr = paper_summary(module_store, spike, now=time.time()).tldr
    assert tldr and tldr != spike.headline
    assert tldr.replace("&", "&amp;")[:60] in all_text(reply)


def test_nonsense_gets_no_invented_overview_and_no_pretend_matches(app, slack, module_store):
    """Keyboard mash is about nothing: the overview finds no threads, search says there is no
    good match and offers at most the two closest as such, and no reason is a raw number."""
    overview = one(command(app, slack, "overview qwertyuiop"))
    assert "no papers about qwertyuiop" in all_text(overview).lower()
    assert "common" not in all_text(overview).lower()

    search = one(command(app, slack, "search qwertyuiop"))
    shown = [b for b in search["blocks"] if b.get("block_id", "").startswith("hit-")]
    assert search["blocks"][0]["text"]["text"].startswith("No good match")
    assert 1 <= len(shown) <= 2 and "closest" in all_text(search)


def test_a_long_topic_with_no_papers_is_not_repeated_back_in_full(app, slack, module_store):
    """"I found no papers about …" repeated up to 1,000 characters of what was typed."""
    overview = one(command(app, slack, "overview " + "qwertyuiop asdfghjkl " * 50))
    said = overview["text"]
    assert said.startswith("I found no papers about qwertyuiop asdfghjkl") and said.endswith("….")
    assert len(said) < 150 and all_text(overview).count("qwertyuiop") < 10, all_text(overview)


def test_reasons_are_words_in_rank_order_not_scores(app, slack, module_store):
    import re

    for text in ("search video grounding with actions", f"similar {module_store.list_papers(limit=1)[0].id}"):
        reply = one(command(app, slack, text))
        whys = [b for b in reply["blocks"] if b["type"] == "context" and "_why:_" in json.dumps(b)]
        assert len(whys) == 5
        assert not re.search(r"\(\d\.\d\d\)", json.dumps(whys)), whys  # no "meaning close (0.62)"


def test_each_phrase_is_named_as_the_texts_most_often_write_it():
    """`_Surfaces` reads the texts once per phrase length: each phrase's commonest written form, ties to
    the later in sort order, and the key itself for a phrase the texts never write, as a scan per
    phrase finds them."""
    import re
    from collections import Counter

    from store.overview import _PHRASE_TOKEN, _Surfaces, _key, _phrases

    def scanned(key: str, texts: list[str]) -> str:  # one phrase, every text read for it
        forms: Counter = Counter()
        n = len(key.split())
        for text in texts:
            for chunk in re.split(r"[.,;:!?()\[\]\"]", text):
                toks = _PHRASE_TOKEN.findall(chunk)
                for i in range(len(toks) - n + 1):
                    if " ".join(_key(w) for w in toks[i:i + n]) == key:
                        forms[" ".join(toks[i:i + n])] += 1
        return max(forms.items(), key=lambda kv: (kv[1], kv[0]))[0] if forms else key

    texts = [(ROOT / "store" / "samples" / "iclr2026-a.txt").read_text()[:20_000],
             "Large Language Models (LLMs) reason. large language models plan; large language models act, as a "
             "large language model does.",
             "Video Diffusion. video diffusion models, Video diffusion"]
    keys = sorted({k for t in texts for k in _phrases(t)}) + ["no such phrase", "llm", "video diffusion"]
    surfaces = _Surfaces(texts)
    assert [surfaces(k) for k in keys] == [scanned(k, texts) for k in keys]
    short = _Surfaces(texts[1:])
    assert short("large language model") == "large language models"  # 2 of 4: the plural is keyed alike
    assert short("video diffusion") == "video diffusion"  # one each: the later in sort order
    assert short("no such phrase") == "no such phrase"
