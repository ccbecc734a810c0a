"""Text helpers shared by parse, ingest, search, summary and overview.

The one sentence splitter, the one stopword list (plus the abstract boilerplate
that search and summaries also skip), the contribution verbs and their third
person, what a coined name looks like, and the content hash. Pure functions, no state.
"""
from __future__ import annotations

import hashlib
import re

# -- hashing -------------------------------------------------------------------------


def content_hash(text: str) -> str:
    """sha256 of the text, 32 hex digits: the key of cached vectors and summaries."""
    # 32 digits is the length stored vectors are keyed by; a longer hash would re-encode them all.
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def short_hash(text: str, length: int = 20) -> str:
    """sha1 prefix for identity keys (abs:, sent:, title:) and minted ids."""
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:length]


def parse_number(text: str | None, lo: int, hi: int) -> int | None:
    """The whole number text writes in '0'-'9' when it lies in lo..hi, else None.

    The one place a typed number is read. Digits that only look like digits ('²', '①', '３',
    '٣') are not numbers here: str.isdigit() says yes to some, int() to others, and a check by
    one followed by the other ended in the generic apology."""
    text = (text or "").strip()
    if not (text.isascii() and text.isdigit()) or len(text) > 18:
        return None
    n = int(text)
    return n if lo <= n <= hi else None


def member_tag(user: str | None) -> str:
    """A member for a log line: a short hash, so logs follow one member without naming them."""
    return "member-" + hashlib.sha256((user or "").encode()).hexdigest()[:8] if user else "member-?"


def member_hash(user: str) -> str:
    """The forgotten-members list stores this, never the id itself."""
    return hashlib.sha256(f"paperclub-forgotten:{user}".encode()).hexdigest()


# -- sentences -----------------------------------------------------------------------
# Words that end in a dot without ending the sentence, lower-cased and without their
# last dot. Not "ms" ("runs in 10 ms. We ...") nor "no" ("the answer is no. We ...").
ABBREVIATIONS = frozenset({
    "e.g", "i.e", "al", "et", "vs", "cf", "etc", "fig", "figs", "eq", "eqs", "sec", "tab", "approx",
    "resp", "w.r.t", "wrt", "dr", "mr", "prof", "incl", "viz", "ref", "refs", "appx", "pp", "vol", "a.k.a",
})
# . ! ? (and closing quotes or brackets), whitespace, then what can start a sentence.
_BOUNDARY = re.compile(r"([.!?]+[\"'”’)\]]*)\s+(?=[\"'“(\[]?[A-Z0-9])")
_LAST_WORD = re.compile(r"([A-Za-z][A-Za-z.]*)\.$")


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each sentence of text, keeping e.g., et al., vs. and 7.1 inside theirs."""
    spans, start = [], 0
    for m in _BOUNDARY.finditer(text):
        if text[m.start()] == ".":
            word = _LAST_WORD.search(text[start:m.start() + 1])
            # none after "etc.)." or "2).": a bracket closes before the sentence ends
            if word and word.group(1).lower().rstrip(".") in ABBREVIATIONS:
                continue
        if text[start:m.end(1)].strip():
            spans.append((start, m.end(1)))
        start = m.end()
    end = len(text.rstrip())
    if text[start:end].strip():
        spans.append((start, end))
    return spans


def split_sentences(text: str) -> list[str]:
    """Whitespace-normalised text split at . ! ? before a capital or digit, abbreviations kept."""
    text = " ".join((text or "").split())
    return [text[a:b] for a, b in sentence_spans(text)]


# -- stopwords -----------------------------------------------------------------------
# English function words: never a name, a keyword or a search term on their own.
STOPWORDS = frozenset("""
    a an the of and or but nor for to in on at by with from into onto over under as than then
    that which who whom whose this these those it its they them their our we us you your is are
    was were be been being has have had do does did can could may might must shall should will
    would not no so such via per while whereas where when what how why if thus also both each
    either neither more most less least very much many some any all other another same own
    only just even further furthermore moreover however therefore hence yet still up out about
    across after before between through during without within upon among amongst toward towards
    against along around beyond despite i.e. e.g. etc. et al w.r.t. wrt
    above again am because below doing down few having he her here hers him his i instead itself
    me my off often once ours she since that's theirs there too until well whether yours
""".split())
# What nearly every abstract says: skipped as search terms and as summary/theme words.
BOILERPLATE = frozenset("""
    paper papers work method methods approach model models result results based new novel existing
    propose proposes proposed present presents presented introduce introduces introduced show shows
    shown demonstrate demonstrates achieve achieves achieving use uses used using including
    specifically significantly effectively one ones two three first second
""".split())

# -- verbs ---------------------------------------------------------------------------
# What authors do when they contribute something (a name usually follows).
CONTRIBUTION_VERBS = ("propose", "introduce", "present", "develop", "design", "build", "construct", "curate",
                      "create", "devise", "release", "contribute", "establish", "formulate", "offer", "unveil",
                      "collect", "assemble", "put forward", "describe", "provide")
# What they do when they study something.
ANALYSIS_VERBS = ("show", "find", "demonstrate", "reveal", "investigate", "study", "analyze",
                  "analyse", "examine", "explore", "identify", "prove", "characterize",
                  "characterise", "argue", "address", "revisit", "evaluate", "benchmark",
                  "tackle", "consider", "focus", "seek", "aim", "extend", "learn", "leverage",
                  "model", "frame", "cast", "reformulate", "take", "approach")
_CONSONANT_Y = re.compile(r"[^aeiou]y$")


def third_person(verb: str) -> str:
    """propose -> proposes, study -> studies, address -> addresses; already-inflected forms unchanged."""
    word = verb.lower()
    if word.endswith(("ed", "ing")) or word in ("built", "found", "took", "sought", "puts forward"):
        return word
    if word == "put forward":
        return "puts forward"
    if word.endswith("s") and not word.endswith(("ss", "us")):
        return word  # already third person: "this paper studies"
    if _CONSONANT_Y.search(word):
        return word[:-1] + "ies"
    if word.endswith(("s", "sh", "ch", "x", "z", "o")):
        return word + "es"
    return word + "s"


# -- aspects ("facets" in issue 19): background, method, result ------------------------
# An abstract says why (background), what the authors do (method) and what came of it
# (result). "More like this" embeds each part apart, so two papers solving one problem
# differently, or one method on two problems, still meet on the part they share.
ASPECTS = ("background", "method", "result")
_CONTRIBUTION = re.compile(
    r"\b(?:we|this (?:paper|work|study)|in this (?:paper|work)|our (?:method|approach|framework|model|work))\b"
    r"|\b(?:" + "|".join(v.replace(" ", r"\s+") for v in CONTRIBUTION_VERBS) + r")(?:s|d|ed)?\b",
    re.IGNORECASE)
_RESULT_CUE = re.compile(
    r"\b(?:experiment\w*|empirical\w*|results?|outperform\w*|state[- ]of[- ]the[- ]art|achiev\w*|"
    r"surpass\w*|benchmarks?|evaluat\w*|demonstrat\w*|show(?:s|n|ed)? that|improv\w*|extensive)\b",
    re.IGNORECASE)


def aspect_texts(abstract: str) -> tuple[str, str, str]:
    """The abstract cut in three running parts: background, method, result ('' when absent).

    The method starts at the first sentence where the authors speak ('we', 'this paper',
    a contribution verb), the result at the first later sentence with a result cue
    (experiments, outperforms, benchmarks, shows that); a one-sentence abstract is all method."""
    sents = split_sentences(abstract)
    n = len(sents)
    if n <= 1:
        return "", " ".join(sents), ""
    start = next((i for i, s in enumerate(sents) if _CONTRIBUTION.search(s)), min(1, n - 1))
    result = next((i for i in range(start + 1, n) if _RESULT_CUE.search(sents[i])), n)
    return " ".join(sents[:start]), " ".join(sents[start:result]), " ".join(sents[result:])


# -- what a coined name looks like (the name finder and author-macro resolution) ------------
# Words that never make a short name on their own: pronouns, connectives and the
# acronyms half the field uses without introducing them.
GENERIC_NAMES = frozenset("""
    we our this these the in on to however furthermore moreover specifically finally first
    second third additionally here recent existing prior previous current most many such
    llm llms mllm mllms vlm vlms lvlm lvlms lmm lmms slm slms ai agi ml nlp cv rl rlhf sft gpu gpus
    cpu cpus tpu sota api apis qa vqa cnn cnns rnn rnns gnn gnns mlp mlps gan gans vae vaes
    dnn dnns nn nns lm lms lstm lstms gru grus convnet convnets plm plms ood iid id kl mse map mle
    sgd pca svm knn bert gpt gpt-3 gpt-4
    chatgpt transformer transformers url urls github code arxiv dataset datasets benchmark
    benchmarks model models method methods framework approach i ii iii iv v
""".split())
NOUN_HEADS = (
    "framework", "method", "model", "benchmark", "dataset", "approach", "algorithm", "system",
    "technique", "strategy", "pipeline", "architecture", "network", "metric", "tool", "toolkit",
    "library", "suite", "agent", "module", "mechanism", "estimator", "loss", "objective",
    "paradigm", "protocol", "recipe", "procedure", "scheme", "attack", "defense", "optimizer",
    "tokenizer", "encoder", "decoder", "policy", "environment", "corpus", "collection", "task",
)


NAME_TOKEN = r"[A-Za-z0-9][\w\-+.’']*[\w+]|[A-Za-z]"


def is_namey(tok: str) -> bool:
    """Looks like a coined name: SPIKE, TripleSumm, G-NLL, VidBridge-R1, OGD+."""
    if not 2 <= len(tok) <= 40 or not tok[0].isalnum() or tok.lower() in GENERIC_NAMES:
        return False
    if tok.islower():
        return False
    upper = sum(map(str.isupper, tok))
    if upper >= 2:
        # "Primal-Dual", "Mixture-of-Experts": Title-Case words joined by hyphens are prose, not names
        return not ("-" in tok and all(p.istitle() and len(p) > 1 or p.islower() for p in tok.split("-") if p))
    if upper == 1 and not tok[0].isupper():
        return True  # camel case: dLLM-style names
    return upper == 1 and not tok.isalpha() and any(map(str.isdigit, tok))


def strip_token(tok: str) -> str:
    """'SPIKE's' -> 'SPIKE', 'ATA,' -> 'ATA'."""
    if tok.endswith(("'s", "’s")):
        tok = tok[:-2]
    return tok.rstrip(".,;:’'")
