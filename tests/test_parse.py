"""Parsing abstracts: LaTeX/Markdown cleaning (store.clean), short names (store.names), headlines
(store.headline), URLs and numbers (store.extract), and store.parse that runs them all."""
from __future__ import annotations

import re
import time
from importlib.resources import files

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from store.clean import clean_text
from store.extract import extract_numbers, extract_urls
from store.headline import headline_problems
from store.parse import parse_abstract
from store.text import split_sentences

COMMAND = re.compile(r"\\[A-Za-z]")
STOP_ENDINGS = {"a", "an", "the", "of", "and", "or", "to", "in", "on", "for", "with", "by", "that", "which"}


def load_seed() -> list[str]:
    """All abstracts of the seed corpus (first line names the collection, blank lines separate)."""
    out = []
    for name in ("iclr2026-a.txt", "iclr2026-b.txt"):
        body = files("store.samples").joinpath(name).read_text(encoding="utf-8")
        _, _, rest = body.partition("\n")
        out += [block.strip() for block in re.split(r"\n\s*\n", rest) if block.strip()]
    return out


SEED = load_seed()


def seed(marker: str) -> str:
    """The one seed abstract containing `marker`."""
    found = [a for a in SEED if marker in a]
    assert len(found) == 1, marker
    return found[0]


def assert_clean(field: str) -> None:
    assert "\\" not in field and "$" not in field, field
    assert not COMMAND.search(field), field


def test_seed_corpus_has_all_38_abstracts():
    assert len(SEED) == 38


@pytest.mark.parametrize("raw", SEED, ids=[f"seed{i:02d}" for i in range(len(SEED))])
def test_every_seed_abstract_parses_cleanly(raw):
    p = parse_abstract(raw)
    for field in (p.text, p.short_name, p.headline, *p.numbers):
        assert_clean(field)
    assert "{" not in p.text and "}" not in p.text and "**" not in p.text
    assert p.short_name and len(p.short_name.split()) <= 6
    assert p.short_name.lower() not in {"we", "our", "this", "llms", "mllms", "grpo", "tvg", "the"}
    assert 0 < len(p.headline) <= 100 and "\n" not in p.headline
    last = p.headline.split()[-1].strip(".,;:").lower()
    assert last not in STOP_ENDINGS, p.headline
    # the headline ends on a whole word of the abstract, never a word cut in half
    assert re.search(rf"(?<!\w){re.escape(p.headline.split()[-1].rstrip('.,;:'))}(?!\w)", p.text), p.headline


EXPECTED_NAMES = {
    "Real-world videos often show routine activities": "SPIKE",
    "To overcome these limitations, we propose a novel architecture": "TripleSumm",
    "we propose ST-GridPool": "ST-GridPool",
    "we present VidBridge-R1": "VidBridge-R1",
    "we propose G-NLL": "G-NLL",
    "we introduce $\\mathtt{MotionSight}$": "MotionSight",
    "Kernel Inspired Router": "KERN",
    "\\textbf{ChainMPQ}": "ChainMPQ",
    "we propose UrbanFeel": "UrbanFeel",
    "We present SIGMA-GEN": "SIGMA-GEN",
    "(\\ourmes)": "CoVoGAN",
    "**ParallelBench**": "ParallelBench",
    "we present CaReBench": "CaReBench",
    "Universal Position Interpolation (UPI)": "UPI",
    "or PPLLaVA for short": "PPLLaVA",
    "we present PersonaX": "PersonaX",
    "we propose Prism": "Prism",
    "we propose ATA": "ATA",
    "Expert Divergence Learning, a novel": "Expert Divergence Learning",
    "(TTOM)": "TTOM",
    "Total Visual Integration (TVI)": "TVI",
    "we introduce Cascadia": "Cascadia",
    "training re-evaluation curve (TREC)": "TREC",
    "we introduce **CARE**": "CARE",
    "Dataset Distillation (SFDD)": "SFDD",
    "*Targeted Reasoning Unlearning* (TRU)": "TRU",
    "adaptive backtracking (AdaBack)": "AdaBack",
    "We propose EmotionThinker": "EmotionThinker",
    "Verifiable Iterative Refinement Framework (VIRF)": "VIRF",
    "we propose \\emph{OGD+}": "OGD+",
}


@pytest.mark.parametrize("marker,name", EXPECTED_NAMES.items(), ids=list(EXPECTED_NAMES.values()))
def test_short_name_is_what_the_abstract_introduces(marker, name):
    p = parse_abstract(seed(marker))
    assert p.short_name == name
    assert p.headline.startswith(f"{name}: ")


@pytest.mark.parametrize("marker,topic", [
    ("subliminal learning", "subliminal learning"),
    ("Maximal Update Parameterization", "transfer"),
    ("this paper introduces \\alg", "tokenization"),
    ("internal information flow of VideoLLMs", "information flow"),
    ("compression order", "progressive intensity"),
])
def test_abstracts_without_a_name_get_a_subject_headline(marker, topic):
    p = parse_abstract(seed(marker))
    assert topic in p.short_name.lower()
    assert len(p.short_name.split()) <= 6


@pytest.mark.parametrize("raw", SEED, ids=[f"seed{i:02d}" for i in range(len(SEED))])
def test_every_seed_headline_reads_like_a_title(raw):
    p = parse_abstract(raw)
    assert headline_problems(p.headline, p.short_name) == [], p.headline
    assert len(p.headline.split()) <= 12, p.headline


@pytest.mark.parametrize("headline,problem", [
    ("G-NLL: obtained using a single output sequence from greedy decoding", "verb fragment"),
    ("TRU: leverages reasoning-based unlearning target as guidance", "verb fragment"),
    ("Explores and validates a similar idea in our communication with LLMs", "verb fragment"),
    ("Explores and validates a similar idea in our communication with LLMs", "dangling reference"),
    ("NADST: can factor in potential dependencies among domains", "verb fragment"),
    ("RobustNorm: and experimentally show that it is not only resilient", "verb fragment"),
    ("Approach that addresses these issues", "dangling reference"),
    ("Improving the quality of scanned documents in order", "clause fragment"),
    ("Loss scaling: technique that works by scaling up the loss value before the start of backprop",
     "too long"),
])
def test_headline_check_names_what_reads_badly(headline, problem):
    assert problem in headline_problems(headline)


@pytest.mark.parametrize("headline", [
    "G-NLL: uncertainty of LLM answers from one greedy decode",
    "Learning Actionable Representations with Goal Conditioned Policies",
    "Skip Connections Eliminate Singularities",
    "Supervised learning with noisy labels",
])
def test_headline_check_passes_titles(headline):
    assert headline_problems(headline) == []


def test_short_name_never_a_field_acronym_the_abstract_only_uses():
    tvg = parse_abstract(seed("Temporal Video Grounding (TVG) aims"))
    assert tvg.short_name not in {"TVG", "IoU", "Charades-STA"}
    spike = parse_abstract(seed("Real-world videos often show routine activities"))
    assert spike.short_name != "GRPO"


@pytest.mark.parametrize("raw,expected", [
    ("the Maximal Update Parameterization ($\\mu$P) transfers", "the Maximal Update Parameterization (μP) transfers"),
    ("achieving $2.3\\times$ compression rates", "achieving 2.3× compression rates"),
    ("a 7.1\\% improvement in R1@0.7", "a 7.1% improvement in R1@0.7"),
    ("we propose \\emph{OGD+}, which projects", "we propose OGD+, which projects"),
    ("we propose **ParallelBench**, the first", "we propose ParallelBench, the first"),
    ("in compositional scenarios (\\eg, motion, numeracy)", "in compositional scenarios (e.g., motion, numeracy)"),
    ("i.e. \\ie and \\etal", "i.e. i.e. and et al."),
    ("Reward (GRPO-PTR}) for RL", "Reward (GRPO-PTR) for RL"),
    ("pre-training {objective}.", "pre-training objective."),
    ("use $\\ell_2$-normalization", "use ℓ₂-normalization"),
    ("$\\Theta{(40K)}$ video clips", "Θ(40K) video clips"),
    ("the $\\mathrm{KERN}$ router and $\\mathtt{MotionSight}$", "the KERN router and MotionSight"),
    ("cost $\\mathcal{O}(n^2 \\log n)$ time", "cost 𝒪(n² log n) time"),
    ("scale by $\\frac{1}{\\sqrt{d}}$ and $\\alpha \\leq \\beta$", "scale by 1/√d and α ≤ β"),
    ("with $x \\sim \\mathcal{N}(0, 1)$ and $\\epsilon \\to 0$", "with x ~ 𝒩(0, 1) and ε → 0"),
    ("G\\\"odel and Erd\\H{o}s", "Gödel and Erdős"),
    ("as shown before~\\cite{smith2020}. Next", "as shown before. Next"),
    ("costs \\$5 per run", "costs USD 5 per run"),
    ("a 2--3 point gain---robustly", "a 2–3 point gain—robustly"),
    ("``quoted''", "“quoted”"),
    ("avoidance.Our core contribution", "avoidance. Our core contribution"),
    ("mixed\n\n   whitespace\tand  lines", "mixed whitespace and lines"),
    ("runs in O(n \\log n) time", "runs in O(n log n) time"),
])
def test_clean_text(raw, expected):
    assert clean_text(raw) == expected


def test_bold_initials_name_an_unexpanded_macro():
    text = parse_abstract(seed("(\\ourmes)")).text
    assert "we propose Controllable Video Generative Adversarial Networks (CoVoGAN) to disentangle" in text
    assert "ourmes" not in text and "textbf" not in text


def test_macro_without_any_name_becomes_a_neutral_phrase():
    p = parse_abstract(seed("this paper introduces \\alg"))
    assert "this paper introduces a principled framework for adaptive video tokenization" in p.text
    assert "the proposed framework enables a more compressed" in p.text
    assert "alg" not in p.text.split()


def test_macro_takes_the_name_from_the_title_when_the_abstract_has_none():
    raw = "We present \\growlength, a method that speeds up pretraining. \\growlength is simple."
    p = parse_abstract(raw, title="GrowLength: Accelerating LLM Pretraining")
    assert p.text == "We present GrowLength, a method that speeds up pretraining. GrowLength is simple."
    assert p.short_name == "GrowLength"


def test_macro_named_by_its_own_long_form():
    raw = "We propose Directional Rank Reduction (\\method). \\method prunes neurons."
    assert clean_text(raw) == "We propose Directional Rank Reduction. Directional Rank Reduction prunes neurons."


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(
    st.sampled_from([
        "\\", "$", "$$", "{", "}", "\\textbf{", "\\emph{", "\\ours", "\\alg{}", "\\eg", "\\frac{",
        "\\sqrt", "^", "_", "\\mathcal{", "\\mu", "\\times", "**", "*", "`", "~", "%", "\\%", "\\$",
        "\\\\", "\\(", "\\)", "\\[", "\\]", "[", "](", "https://x.io/a_b", "\\url{", "\\href{", "\\'",
        '\\"', "--", "\ue100", "\ue001", "(", ")", ",", ".", " ", "We propose ", "X-Net", "called ",
        "\\begin{itemize}", "\\item", "\\cite{a}", "\\L", "\\c{c}", "\\textbf{Co}de", "(\\method)",
    ]),
    st.text(alphabet="aZ9 .,;:()-\\${}^_*~%#&'\"", max_size=8),
), max_size=40).map("".join), st.one_of(st.none(), st.text(alphabet="aB \\${}:()", max_size=30)))
def test_no_latex_command_or_dollar_ever_survives(raw, title):
    assert_clean(clean_text(raw))
    p = parse_abstract(raw, title=title)
    for field in (p.text, p.short_name, p.headline, *p.numbers):
        assert_clean(field)
        assert not re.search("[\ue000-\uf8ff]", field)
    assert p.short_name and len(p.headline) <= 100


def test_code_urls_are_extracted_intact():
    assert parse_abstract(seed("we propose ST-GridPool")).code_urls == [
        "https://anonymous.4open.science/r/ST-GridPool-85BE"]
    assert parse_abstract(seed("we present PersonaX")).code_urls == ["https://github.com/lokali/PersonaX"]
    assert parse_abstract(seed("Dataset Distillation (SFDD)")).code_urls == ["https://github.com/fjm9933/Flatness"]
    raw = ("Code: \\url{https://x.org/a\\_b~c}, data at (see https://example.com/d_e%20f). "
           "Mirror: github.com/u/repo_name.")
    p = parse_abstract(raw)
    assert p.code_urls == ["https://x.org/a_b~c", "https://example.com/d_e%20f", "github.com/u/repo_name"]
    assert "https://x.org/a_b~c" in p.text
    assert extract_urls("no links here") == []


def test_headline_numbers():
    tvg = parse_abstract(seed("Temporal Video Grounding (TVG) aims")).numbers
    assert "7.1% improvement in R1@0.7 on Charades-STA" in tvg
    assert "2.3× compression rates" in parse_abstract(seed("this paper introduces \\alg")).numbers
    cascadia = parse_abstract(seed("we introduce Cascadia")).numbers
    assert "up to 4× (2.3× on average) tighter latency SLOs" in cascadia
    assert "up to 5× (2.4× on average) higher throughput" in cascadia
    assert extract_numbers("Released in 2024 with 3 authors.") == []


def test_title_gives_headline_and_name():
    raw = seed("Real-world videos often show routine activities")
    p = parse_abstract(raw, title="SPIKE: Surprise-Guided Frame Sampling for Video LLMs")
    assert p.headline == "SPIKE: Surprise-Guided Frame Sampling for Video LLMs"
    assert p.short_name == "SPIKE"
    owl = parse_abstract("We prune LLMs.", title="Outlier Weighed Layerwise Sparsity (OWL): A Missing Secret Sauce")
    assert owl.short_name == "OWL"
    plain = parse_abstract(raw, title="Surprise in Video Understanding")
    assert plain.short_name == "SPIKE"  # no name in the title: the abstract's
    latex = parse_abstract("We study pruning.", title="$\\mathbb{D}^2$ Pruning: Message Passing for Coresets")
    assert latex.headline == "𝔻² Pruning: Message Passing for Coresets"
    long_title = "A " + " ".join(["very"] * 30) + " long title"
    headline = parse_abstract("We study things.", title=long_title).headline
    assert len(headline) <= 100 and headline.endswith("very")


def test_split_sentences_keeps_abbreviations_inside():
    text = "We test e.g. vision, i.e. images. Smith et al. Show it. Results hold (see Fig. 2). Done!"
    assert split_sentences(text) == [
        "We test e.g. vision, i.e. images.", "Smith et al. Show it.", "Results hold (see Fig. 2).", "Done!"]
    # words that merely end like an abbreviation still end their sentence; decimals never do
    assert split_sentences("This is essential. We study LLMs. Accuracy rose 7.1 points. Fine.") == [
        "This is essential.", "We study LLMs.", "Accuracy rose 7.1 points.", "Fine."]


def test_pathological_input_stays_fast():
    raw = "(" * 2000 + "{" * 2000 + "\\textbf{" * 500 + "$" * 501 + "a, " * 3000 + "We propose " * 200
    start = time.process_time()
    p = parse_abstract(raw)
    # Catches catastrophic regex backtracking (minutes), not speed: the bench measures that.
    assert time.process_time() - start < 5
    assert_clean(p.text)
