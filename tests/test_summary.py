"""Summaries: TL;DRs and key points of the seed abstracts, overviews, the LLM backend against a fake server, batch mode."""
from __future__ import annotations

import io
import json
import logging
import re
import time
from pathlib import Path

import numpy as np
import pytest

from fake_llm import FakeLLM
from store import LLMClient, LLMConfig, Paper, Summary, paper_summary, summarize_jsonl
from store.overview import overview
from store.clean import clean_text
from store.summary import compress, find_code_url, is_dangling, load_weights, split_sentences, summarize_paper
from store.text import content_hash

SAMPLES = Path(__file__).resolve().parent.parent / "store" / "samples"
API_KEY = "sk-test-SECRETLLMKEY"


def seed_abstracts() -> list[str]:
    """Every bundled abstract as clean text (first line of a file is the collection)."""
    out = []
    for path in sorted(SAMPLES.glob("*.txt")):
        blocks = path.read_text(encoding="utf-8").split("\n\n")[1:]
        out += [clean_text(b) for b in blocks if b.strip()]
    return out


def abstract_with(words: str) -> str:
    return next(a for a in seed_abstracts() if words in a)


ABSTRACTS = seed_abstracts()


def test_seed_files_hold_the_abstracts():
    assert len(ABSTRACTS) == 38


@pytest.mark.parametrize("i", range(len(ABSTRACTS)))
def test_every_seed_tldr_is_one_short_standalone_sentence(i):
    tldr = summarize_paper(ABSTRACTS[i]).tldr
    assert 5 <= len(tldr.split()) <= 30, tldr
    assert not is_dangling(tldr), tldr
    assert not re.match(r"(?i)(in this (paper|work)|this (paper|work)|we propose)\b", tldr), tldr
    assert not re.search(r"[\\$`{}]|\*\*|\]\(", tldr), tldr  # no TeX or markdown left
    assert tldr[0].isupper() and tldr.endswith("."), tldr
    assert len(split_sentences(tldr)) == 1, tldr


def test_tvg_results_keep_the_numbers_and_the_tldr_names_the_method():
    s = summarize_paper(abstract_with("Temporal Video Grounding (TVG)"))
    assert "7.1%" in s.points["results"] and "R1@0.7" in s.points["results"]
    assert "Charades-STA" in s.points["results"]
    assert s.tldr.startswith("Proposes a novel TVG framework")
    assert s.points["problem"] and "struggle" in s.points["problem"]
    assert s.points["code"] is None
    assert s.backend == "extractive"


def test_results_point_carries_percentages_where_the_abstract_reports_them():
    for text in ABSTRACTS:
        s = summarize_paper(text)
        if re.search(r"(?:improv|outperform|achiev|accuracy|speedup)[^.]*\d%", text):
            assert s.points["results"] and re.search(r"\d%", s.points["results"]), text[:80]


def test_code_links_are_found_and_trimmed():
    assert summarize_paper(abstract_with("PersonaX")).points["code"] == "https://github.com/lokali/PersonaX"
    assert summarize_paper(abstract_with("ST-GridPool")).points["code"] == \
        "https://anonymous.4open.science/r/ST-GridPool-85BE"
    assert find_code_url("Code: [here](https://github.com/a/b). More at https://x.org/page.") == \
        "https://github.com/a/b"
    assert find_code_url("No link in this one.") is None
    linked = summarize_paper("We propose X, a method for Y. Code: [our repo](https://github.com/a/b).")
    assert linked.points["code"] == "https://github.com/a/b" and "[" not in linked.tldr


@pytest.mark.parametrize("sentence, expected", [
    ("To address this challenge, we propose ChainMPQ, a training-free method that improves X.",
     "ChainMPQ is a training-free method that improves X."),
    ("In this paper, we study the loss landscape of linear networks.", "Studies the loss landscape of linear networks."),
    ("However, existing methods fail on long videos.", "Existing methods fail on long videos."),
    ("We explore and validate a similar idea.", "Explores and validates a similar idea."),
    ("We address this gap by introducing AdaBack, a curriculum method.", "Introduces AdaBack, a curriculum method."),
    ("This paper presents a new benchmark for video QA.", "Presents a new benchmark for video QA."),
    ("mRNA levels are predicted from DNA.", "mRNA levels are predicted from DNA."),
])
def test_compress_drops_lead_ins_and_rewrites_we(sentence, expected):
    assert compress(sentence)[0] == expected


def test_compress_fits_thirty_words_at_a_clause_boundary():
    long = ("We propose a method that learns robust features for video grounding, which combines temporal "
            "attention with a contrastive objective over many clips, and we evaluate it on five benchmarks "
            "with strong results across the board and more.")
    short, how = compress(long)
    assert len(short.split()) <= 30 and how == 1 and short.endswith("clips.")


def test_a_hard_cut_ends_at_the_last_whole_phrase_not_on_a_stranded_modifier():
    # no clause boundary to cut at, and word 30 is "deep", the start of "deep layer"
    long = ("The proposed model learns a shared space for text and images and aligns the modalities with a "
            "contrastive objective to control the smoothness of the learned representations in every deep layer "
            "of the network.")
    assert len(long.split()) > 30 and long.split()[29] == "deep"
    short, how = compress(long)
    assert how == 2 and len(short.split()) <= 30
    assert short.endswith("of the learned representations."), short
    assert summarize_paper(long).tldr == short
    # a window that ends where a phrase ends is kept whole
    whole = long.replace("in every deep layer of the network", "of every layer in the network")
    assert compress(whole)[0].endswith("representations of every layer."), compress(whole)[0]


def test_sentence_splitter_keeps_abbreviations_and_decimals():
    text = ("Prior work (Liao et al., 2016) uses e.g. cats. We gain 7.1% vs. 3.2% on X. "
            "Models like LLMs. Are essential. Done (a, b, etc.). Next (x, y etc). Last!")
    assert split_sentences(text) == ["Prior work (Liao et al., 2016) uses e.g. cats.",
                                     "We gain 7.1% vs. 3.2% on X.", "Models like LLMs.", "Are essential.",
                                     "Done (a, b, etc.).", "Next (x, y etc).", "Last!"]


def test_dangling_openers():
    assert is_dangling("These tasks are derived from TVG.")
    assert is_dangling("It then constructs questions.")
    assert not is_dangling("Theory predicts the curve.")
    assert not is_dangling("SPIKE localizes surprise.")


def test_degenerate_inputs():
    assert summarize_paper("", "A Title Only").tldr == "A Title Only"
    one = summarize_paper("We propose SPIKE, a framework that quantifies surprise in videos.")
    assert one.tldr == "SPIKE is a framework that quantifies surprise in videos."
    assert set(one.points) == {"problem", "approach", "results", "code"}


def test_packaged_weights_load_with_attribution():
    w = load_weights()
    assert "SciTLDR" in w.meta["attribution"] and "Apache-2.0" in w.meta["attribution"]
    assert len(w.w) == len(w.mean) == len(w.std)


# ---------------------------------------------------------------- overview
def _papers(store, words: list[str]) -> list[Paper]:
    papers = list(store.iter_papers())
    return [next(p for p in papers if w in p.abstract) for w in words]


VIDEO = ["Temporal Video Grounding (TVG)", "SPIKE", "TripleSumm", "CaReBench"]
LLM_SAFETY = ["unlearning", "Speculative Decoding", "G-NLL"]


def _clustered(n_a: int, n_b: int) -> np.ndarray:
    """Two clear clusters, a little spread so the choice of k is by silhouette, not by ties."""
    rng = np.random.default_rng(0)
    a, b = np.eye(16)[0], np.eye(16)[1]
    rows = [a + 0.1 * rng.standard_normal(16) for _ in range(n_a)] + \
           [b + 0.1 * rng.standard_normal(16) for _ in range(n_b)]
    return np.array(rows, dtype=np.float32)


def test_overview_groups_names_and_summarizes(hashing_store):
    papers = _papers(hashing_store, VIDEO + LLM_SAFETY)
    scored = [(p, 1.0 - 0.1 * i) for i, p in enumerate(papers)]
    ov = overview("efficient models", scored, _clustered(4, 3), summarizer=lambda p: summarize_paper(p.abstract))
    assert len(ov.themes) == 2
    groups = [{p.id for p, _ in t.papers} for t in ov.themes]
    assert groups == [{p.id for p in papers[:4]}, {p.id for p in papers[4:]}]
    assert "video" in ov.themes[0].name.lower()
    assert ov.themes[0].name != ov.themes[1].name
    for theme in ov.themes:
        assert 1 <= len(theme.name.replace("&", " ").split()) <= 4
        assert all(isinstance(s, Summary) and s.tldr for _, s in theme.papers)
    assert ov.common and "\n" not in ov.common and ov.backend == "extractive"


def test_overview_is_deterministic_with_real_vectors(hashing_store):
    from store import HashingEmbedder

    papers = list(hashing_store.iter_papers())[:8]
    vectors = HashingEmbedder().encode([p.abstract for p in papers])
    scored = [(p, 1.0 / (i + 1)) for i, p in enumerate(papers)]
    runs = [overview("video", scored, vectors, summarizer=lambda p: summarize_paper(p.abstract))
            for _ in range(2)]
    flat = [[(t.name, [p.id for p, _ in t.papers]) for t in ov.themes] for ov in runs]
    assert flat[0] == flat[1] and runs[0].common == runs[1].common
    assert 2 <= len(runs[0].themes) <= 3
    assert sorted(pid for _, ids in flat[0] for pid in ids) == sorted(p.id for p in papers)


# ------------------------------------------------------------- LLM backend
@pytest.fixture
def fake_llm():
    with FakeLLM() as fake:
        yield fake


def client(fake: FakeLLM, timeout: float = 5.0) -> LLMClient:
    return LLMClient(LLMConfig(url=fake.url, model="fake-model", api_key=API_KEY, timeout=timeout))


def paper_for(words: str) -> Paper:
    text = abstract_with(words)
    return Paper(id="p1", short_name="TVG", headline="TVG with inversion", abstract=text)


GOOD = "Inversion tasks keep a video grounding model's action understanding, gaining 7.1% R1@0.7 on Charades-STA."


def test_llm_tldr_is_used_and_cached(fake_llm, hashing_store, caplog):
    caplog.set_level(logging.DEBUG)
    fake_llm.reply = "TL;DR: " + GOOD
    paper = paper_for("Temporal Video Grounding (TVG)")
    s = paper_summary(hashing_store, paper, llm=client(fake_llm), now=time.time())
    assert s.tldr == GOOD and s.backend == "fake-model"
    assert "7.1%" in s.points["results"]  # key points stay extractive, numbers and all
    (req,) = fake_llm.requests
    assert req["path"] == "/v1/chat/completions"
    assert req["headers"]["Authorization"] == f"Bearer {API_KEY}"
    assert req["body"]["model"] == "fake-model"
    assert paper.abstract in req["body"]["messages"][-1]["content"]
    assert "only" in req["body"]["messages"][0]["content"].lower()  # grounded in the abstract only

    again = paper_summary(hashing_store, paper, llm=client(fake_llm), now=time.time())
    assert again == s and len(fake_llm.requests) == 1  # cached: no second request
    cached = hashing_store.get_summary(content_hash(paper.abstract), "fake-model")
    assert cached["tldr"] == GOOD
    assert hashing_store.get_summary(content_hash(paper.abstract), "extractive")["tldr"]
    assert API_KEY not in caplog.text and "SECRETLLMKEY" not in repr(client(fake_llm))


@pytest.mark.parametrize("setup", [
    {"status": 500},
    {"raw": b"<html>bad gateway</html>"},
    {"raw": b'{"choices": []}'},
    {"reply": ""},
    {"reply": "I'm sorry, but I cannot help with summarizing this."},
    {"reply": " ".join(["word"] * 45) + "."},
    {"reply": "Proposes TVG inversion that improves R1@0.7 by 12.5% on Charades-STA."},  # a number not in it
    {"reply": "Proposes a TVG framework.\nIt uses inversion tasks.\nIt works."},
], ids=["http500", "not-json", "no-choices", "empty", "refusal", "too-long", "made-up-number", "many-lines"])
def test_llm_failures_fall_back_to_extractive_and_are_not_cached(setup, fake_llm, hashing_store, caplog):
    caplog.set_level(logging.DEBUG)
    for key, value in setup.items():
        setattr(fake_llm, key, value)
    paper = paper_for("Temporal Video Grounding (TVG)")
    s = paper_summary(hashing_store, paper, llm=client(fake_llm), now=time.time())
    assert s.backend == "extractive" and s.tldr == summarize_paper(paper.abstract).tldr
    assert len(fake_llm.requests) == 1
    assert hashing_store.get_summary(content_hash(paper.abstract), "fake-model") is None
    assert "fake-model" in caplog.text and API_KEY not in caplog.text

    fake_llm.status, fake_llm.raw, fake_llm.reply = 200, None, GOOD  # the model recovers
    assert paper_summary(hashing_store, paper, llm=client(fake_llm), now=time.time()).tldr == GOOD


def test_llm_timeout_falls_back_quickly_and_cools_down(fake_llm, hashing_store, caplog):
    caplog.set_level(logging.DEBUG)
    fake_llm.delay = 3.0
    llm = client(fake_llm, timeout=0.3)
    paper = paper_for("Temporal Video Grounding (TVG)")
    start = time.monotonic()
    s = paper_summary(hashing_store, paper, llm=llm, now=time.time())
    assert s.backend == "extractive" and time.monotonic() - start < 2.0
    other = Paper(id="p2", short_name="SPIKE", headline="SPIKE", abstract=abstract_with("SPIKE"))
    start = time.monotonic()
    assert paper_summary(hashing_store, other, llm=llm, now=time.time()).backend == "extractive"
    assert time.monotonic() - start < 0.25 and len(fake_llm.requests) == 1  # no second wait
    assert "0.3 s" in caplog.text and API_KEY not in caplog.text


def test_unreachable_llm_falls_back():
    dead = LLMClient(LLMConfig(url="http://127.0.0.1:9/v1", model="gone", api_key=API_KEY, timeout=1))
    s = summarize_paper(ABSTRACTS[0])
    from store import summarize

    assert summarize(ABSTRACTS[0], llm=dead) == s


def test_overview_names_from_llm_and_fallback(fake_llm, hashing_store):
    papers = _papers(hashing_store, VIDEO + LLM_SAFETY)
    scored = [(p, 1.0 - 0.1 * i) for i, p in enumerate(papers)]
    vectors = _clustered(4, 3)

    def reply(body):
        if "Group 1" in body["messages"][-1]["content"]:
            return json.dumps({"themes": ["Video understanding", "Efficient LLM inference"],
                               "common": "All seven papers make large models more reliable or efficient."})
        return GOOD

    fake_llm.reply = reply
    ov = overview("models", scored, vectors, summarizer=lambda p: summarize_paper(p.abstract),
                  llm=client(fake_llm))
    assert [t.name for t in ov.themes] == ["Video understanding", "Efficient LLM inference"]
    assert ov.common.startswith("All seven papers") and ov.backend == "fake-model"
    fake_llm.reply = "Sure! Here are the themes: video and LLMs."
    plain = overview("models", scored, vectors, summarizer=lambda p: summarize_paper(p.abstract),
                     llm=client(fake_llm))
    assert plain.backend == "extractive" and "video" in plain.themes[0].name.lower()


# ------------------------------------------------------------------ batch mode
def test_batch_round_trip_with_bad_lines():
    tvg = abstract_with("Temporal Video Grounding (TVG)")
    lines = [json.dumps({"id": "tvg", "title": "TVG inversion", "abstract": tvg}),
             "{not json",
             json.dumps({"id": 7, "title": "No abstract"}),
             "",
             json.dumps(["a", "list"]),
             json.dumps({"id": "spike", "abstract": abstract_with("SPIKE")})]
    out = io.StringIO()
    done, failed = summarize_jsonl(io.StringIO("\n".join(lines) + "\n"), out)
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    assert (done, failed) == (2, 3) and len(records) == 5
    assert records[0]["id"] == "tvg" and "7.1%" in records[0]["points"]["results"]
    assert len(records[0]["tldr"].split()) <= 30
    assert records[1] == {"line": 2, "error": records[1]["error"]} and "JSON" in records[1]["error"]
    assert records[2]["id"] == 7 and records[2]["line"] == 3 and "abstract" in records[2]["error"]
    assert records[3]["line"] == 5 and "object" in records[3]["error"]
    assert records[4]["id"] == "spike" and records[4]["tldr"].startswith("SPIKE")


def test_batch_uses_the_llm_when_given(fake_llm):
    fake_llm.reply = GOOD
    out = io.StringIO()
    line = json.dumps({"id": "tvg", "abstract": abstract_with("Temporal Video Grounding (TVG)")})
    summarize_jsonl(io.StringIO(line + "\n"), out, llm=client(fake_llm))
    record = json.loads(out.getvalue())
    assert record["tldr"] == GOOD and record["backend"] == "fake-model"


@pytest.mark.slow  # starts a process
def test_fit_script_refits_weights_that_summarize(tmp_path):
    """bench/fit_summary.py on a slice of SciTLDR writes a weights file summarize_paper can use."""
    import subprocess
    import sys

    train = Path(__file__).resolve().parents[2] / "shared" / "eval" / "scitldr" / "train.jsonl"
    if not train.exists():
        pytest.skip("SciTLDR train split not beside the repo")
    small = tmp_path / "train.jsonl"
    small.write_text("".join(train.read_text(encoding="utf-8").splitlines(keepends=True)[:60]))
    out = tmp_path / "w.json"
    root = Path(__file__).resolve().parents[1]
    subprocess.run([sys.executable, str(root / "bench" / "fit_summary.py"), "--data", str(small), "--out", str(out)],
                   check=True, capture_output=True, timeout=120)
    data = json.loads(out.read_text())
    assert "SciTLDR" in data["attribution"] and data["n_abstracts"] == 60
    weights = load_weights(str(out))
    s = summarize_paper(abstract_with("SPIKE"), weights=weights)
    assert 5 <= len(s.tldr.split()) <= 30 and not is_dangling(s.tldr)


def test_stale_cached_summaries_are_remade(hashing_store):
    paper = paper_for("Temporal Video Grounding (TVG)")
    key = content_hash(paper.abstract)
    hashing_store.put_summary(key, "extractive", {"tldr": "Stale words.", "points": {}, "backend": "extractive",
                                                  "version": "made-by-older-code"}, now=time.time())
    fresh = paper_summary(hashing_store, paper, now=time.time())
    assert fresh.tldr == summarize_paper(paper.abstract).tldr
    assert hashing_store.get_summary(key, "extractive")["tldr"] == fresh.tldr


def test_any_text_gets_a_tldr_within_the_limit():
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    words = st.sampled_from(["We", "propose", "this", "However,", "7.1%", "(e.g.,", "et", "al.", "x).", "In",
                             "paper,", "https://github.com/a/b.", "$x$", "\\textbf{A}", "**B**", "—", ";", ":",
                             "These", "it", "model", "outperforms", "by", "3.2", "Fig.", "vs.", ".", "?", "\n"])

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.one_of(st.lists(words, max_size=120).map(" ".join), st.text(max_size=300)),
           st.one_of(st.none(), st.text(max_size=30)))
    def check(text, title):
        s = summarize_paper(text, title)
        assert len(s.tldr.split()) <= 30 and set(s.points) == {"problem", "approach", "results", "code"}

    check()


def test_a_tldr_never_opens_on_a_marker_that_needs_the_sentence_before():
    """'PettingZoo: Similarly introduces PettingZoo, ...' read as if a sentence were missing."""
    from store.summary import standalone

    for sentence in ("Similarly we introduce PettingZoo, a library of multi-agent environments.",
                     "Similar to Gym, we introduce PettingZoo, a library of multi-agent environments.",
                     "In the same spirit, we introduce PettingZoo, a library of multi-agent environments.",
                     "Analogously, we introduce PettingZoo, a library of multi-agent environments.",
                     "Moreover we introduce PettingZoo, a library of multi-agent environments."):
        out = standalone(sentence)
        assert out.startswith(("PettingZoo", "Introduces PettingZoo")), (sentence, out)
