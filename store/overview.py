"""Topic overviews: retrieve the most relevant papers, group them by embedding and name the groups.

The per-paper TL;DRs come from store.summary; an LLM (when configured) may rename
the themes and write the common line, and is checked against the extractive ones.
"""
from __future__ import annotations

import json
import logging
import math
import re
from collections import Counter
from dataclasses import dataclass

import numpy as np

from .base import Store
from .search import Searcher
from .summary import (
    _REFUSAL, _STOP, _VERB_SET, EXTRACTIVE, WORD_LIMIT, Weights, _end, _tidy, load_weights, n_words,
    paper_summary,
)

log = logging.getLogger(__name__)

@dataclass
class Theme:
    name: str
    papers: list  # [(Paper, Summary)], most relevant first


@dataclass
class Overview:
    topic: str
    themes: list[Theme]
    common: str
    backend: str = EXTRACTIVE


def _kmeans(x: np.ndarray, k: int, order: list[int], iters: int = 50) -> np.ndarray:
    """Spherical k-means, seeded deterministically: the most relevant paper, then farthest-first."""
    centers = [order[0]]
    while len(centers) < k:
        dist = 1 - x @ x[centers].T
        centers.append(max(order, key=lambda i: (dist[i].min(), -order.index(i))))
    c = x[centers].copy()
    labels = np.full(len(x), -1)
    for _ in range(iters):
        new = np.argmax(x @ c.T, axis=1)
        if (new == labels).all():
            break
        labels = new
        for j in range(k):
            members = x[labels == j]
            if len(members):
                c[j] = members.sum(axis=0) / (np.linalg.norm(members.sum(axis=0)) or 1.0)
    return labels


def _silhouette(x: np.ndarray, labels: np.ndarray) -> float:
    dist = 1 - x @ x.T
    values = []
    for i in range(len(x)):
        same = labels == labels[i]
        if same.sum() <= 1:
            values.append(0.0)  # a singleton's silhouette is 0 by convention
            continue
        a = dist[i, same].sum() / (same.sum() - 1)
        b = min(dist[i, labels == j].mean() for j in set(labels.tolist()) if j != labels[i])
        values.append((b - a) / max(a, b, 1e-12))
    return float(np.mean(values))


def group_papers(embeddings: np.ndarray, relevance: list[float]) -> list[list[int]]:
    """2 or 3 groups (by silhouette) of paper indices; one group when there are fewer than 4 papers."""
    n = len(relevance)
    order = sorted(range(n), key=lambda i: (-relevance[i], i))
    if n < 4:
        return [order]
    x = np.asarray(embeddings, dtype=np.float64)
    x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    best = None
    for k in (2, 3):
        labels = _kmeans(x, k, order)
        if len(set(labels.tolist())) < k:
            continue
        # a theme of one paper is barely a theme: prefer groupings without, then the better silhouette
        whole = n < 5 or min(np.bincount(labels)) >= 2
        key = (whole, _silhouette(x, labels))
        if best is None or key > best[0]:
            best = (key, labels)
    labels = best[1] if best else np.zeros(n, dtype=int)
    groups = [[i for i in order if labels[i] == j] for j in sorted(set(labels.tolist()))]
    return sorted(groups, key=lambda g: order.index(g[0]))


_PHRASE_TOKEN = re.compile(r"[A-Za-z][A-Za-z0-9\-']*[A-Za-z0-9]|[A-Za-z]{2,}")
_GENERIC = _STOP | frozenset("""paper papers method methods model models approach approaches framework
frameworks task tasks performance results result data dataset datasets benchmark benchmarks experiments
experiment existing recent prior current state art state-of-the-art significant significantly various
different key extensive strong effective effectiveness efficient improve improves improved improvement
improvements achieve achieves achieving demonstrate demonstrates enable enables first one two three
however while across including learning large work study studies problem problems able general specific
way ways such novel new propose proposed introduce introduced show shows capability capabilities ability
abilities gap gaps example examples answer answers strategy strategies setting settings scenario scenarios
component components level levels aspect aspects issue issues challenge challenges limitation limitations
evidence insight insights information quality accuracy efficiency cost costs baseline baselines variant
variants domain domains application applications property properties factor factors process step steps
stage stages type types form forms set sets number amount range scale size sizes signal signals space
analysis analyses understanding technique techniques practice manner terms fact case cases lack need use
user users human humans world gains gain training trained inference time times input inputs output outputs
evaluation evaluations experimental empirical theoretical previous prior traditional conventional popular
widely often typically recently further well better best high low small simple single multiple diverse
many most key crucial critical important fundamental explicit implicit unified joint overall real
framework-agnostic plug-and-play training-free existing remains remain across""".split())
# multiword names may end in these ("large language models", "graph neural networks")
_HEAD_OK = frozenset("model models network networks learning".split())
_ADJECTIVE_END = ("ive", "ous", "able", "ible", "ful", "less", "ly")
_ADJECTIVES = frozenset("""visual temporal neural spatial optimal general multimodal causal global local textual
final original additional several potential external internal structural practical fine-grained dynamic static
open linguistic semantic statistical computational physical medical clinical relational compositional
spatiotemporal cross-modal multi-modal end-to-end large-scale state-of-the-art challenging interesting promising
existing emerging underlying corresponding leading growing increasing remaining following resulting like""".split())


_GERUND_NOUNS = frozenset("""learning training pretraining pre-training fine-tuning tuning pruning embedding
sampling modeling modelling planning reasoning understanding clustering prompting encoding forecasting scaling
editing steering caching routing matching tracking ranking labeling labelling mapping rendering parsing
inpainting denoising captioning grounding decoding unlearning distillation""".split())


def _verbish(word: str, verbs: frozenset) -> bool:
    """'address', 'aligns', 'identifying': a verb form ('learning', 'decoding' count as nouns)."""
    if word.endswith("ing") and word not in _GERUND_NOUNS:
        return word[:-3] in verbs or word[:-3] + "e" in verbs or word[:-4] in verbs
    return word in verbs or (word.endswith("s") and (word[:-1] in verbs or word[:-2] in verbs))


_COMPOUND_ADJECTIVE_END = ("-quality", "-based", "-free", "-aware", "-level", "-scale", "-specific", "-grained",
                           "-centric", "-agnostic", "-efficient", "-like", "-wise", "-driven", "-guided",
                           "-preserving", "-consistent", "-dependent", "-independent", "-time", "-shot", "-style")
_NOUN_END = ("tion", "tions", "sion", "sions", "ment", "ments", "ness", "ity", "ities", "ance", "ence", "ing",
             "ics", "ure", "ures", "ism", "isms", "ship", "er", "ers", "or", "ors", "ogy", "phy", "ization")


def _nounish(words: list[str], verbs: frozenset = frozenset()) -> bool:
    """A rough noun-phrase test without a tagger: no generic ends, no adjective, participle or verb last."""
    first, last = words[0].lower(), words[-1].lower()
    if _verbish(last, verbs) or (len(words) > 1 and _verbish(first, verbs)) or last.endswith(("izes", "ises")):
        return False
    # a lone word must look like a name (LLMs, VBench; not just "Language" from a title) or carry a
    # noun ending (motion, reasoning)
    if len(words) == 1 and not (any(c.isupper() for c in words[0][1:]) or last in _GERUND_NOUNS
                                or (last.endswith(_NOUN_END) and not last.endswith("ing"))):
        return False
    if first in _GENERIC or first.endswith("ly") or any(w.lower() in _STOP for w in words):
        return False
    if last in _GENERIC and not (len(words) > 1 and last in _HEAD_OK):
        return False
    if last in _ADJECTIVES or last.endswith(_ADJECTIVE_END) or last.endswith(_COMPOUND_ADJECTIVE_END):
        return False
    return not (last.endswith("ed") and words[-1].islower())


def _key(token: str) -> str:
    t = token.lower()
    return t[:-1] if len(t) > 3 and t.endswith("s") and not t.endswith(("ss", "is", "us")) else t


def _phrases(text: str, verbs: frozenset = frozenset()) -> Counter:
    """Candidate name phrases (1-3 words that look like a noun phrase), keyed by normalized form."""
    found: Counter = Counter()
    for chunk in re.split(r"[.,;:!?()\[\]\"]", text):
        toks = _PHRASE_TOKEN.findall(chunk)
        for n in (1, 2, 3):
            for i in range(len(toks) - n + 1):
                words = toks[i:i + n]
                if _nounish(words, verbs):
                    found[" ".join(_key(w) for w in words)] += 1
    return found


class _Surfaces:
    """The commonest way each phrase is written in some texts: `_Surfaces(texts)(key)`.

    Naming a group asks this of every candidate phrase: the texts are split and keyed once for
    each phrase length, not once per phrase (which was most of an overview's time at 10k papers)."""

    def __init__(self, texts: list[str]):
        self._chunks = [(toks, [_key(w) for w in toks]) for text in texts
                        for toks in (_PHRASE_TOKEN.findall(c) for c in re.split(r"[.,;:!?()\[\]\"]", text))]
        self._forms: dict[int, dict[str, Counter]] = {}  # phrase length -> key -> how it is written

    def __call__(self, key: str) -> str:
        n = len(key.split())
        if n not in self._forms:
            forms: dict[str, Counter] = {}
            for toks, keys in self._chunks:
                for i in range(len(toks) - n + 1):
                    forms.setdefault(" ".join(keys[i:i + n]), Counter())[" ".join(toks[i:i + n])] += 1
            self._forms[n] = forms
        found = self._forms[n].get(key)
        if not found:
            return key
        return max(found.items(), key=lambda kv: (kv[1], kv[0]))[0]


def _plain_case(phrase: str) -> str:
    """'Language Models' -> 'language models' mid-sentence; 'LLMs' and 'VBench' stay."""
    return " ".join(w.lower() if w[:1].isupper() and w[1:].islower() else w for w in phrase.split())


def _paper_text(paper) -> str:
    return " . ".join(t for t in (paper.title, paper.headline, paper.abstract) if t)


def _verbs(weights: Weights) -> frozenset:
    return frozenset(weights.meta.get("verbs", [])) | _VERB_SET


def _phrase_weight(key: str, surface: str) -> float:
    """Names read best as two or three words; a single word only if it is a name like 'LLMs'."""
    n = len(key.split())
    return (1.3 if any(c.isupper() for c in surface) else 0.7) if n == 1 else (1.0, 1.8, 2.0)[n - 1]


def name_themes(groups: list[list], weights: Weights, topic: str = "") -> list[str]:
    """A 1-4 word name per group of papers: its most distinctive noun phrases (class-based TF-IDF)."""
    idf, verbs = weights.idf, _verbs(weights)
    topic_keys = {_key(w) for w in _PHRASE_TOKEN.findall(topic)}
    texts = [[_paper_text(p) for p in g] for g in groups]
    surfaces = [_Surfaces(t) for t in texts]
    heads = [set().union(*(_phrases(" . ".join(t for t in (p.title, p.short_name, p.headline) if t), verbs)
                           for p in g)) for g in groups]
    df = [Counter(k for t in ts for k in set(_phrases(t, verbs))) for ts in texts]
    total = Counter()
    for d in df:
        total.update(d)
    n_docs = sum(len(g) for g in groups)
    default = max(idf.values()) if idf else 1.0
    names: list[str] = []
    for gi, d in enumerate(df):
        size = len(groups[gi])

        def score(key: str) -> float:  # called in this iteration only
            words = key.split()
            background = _mean(idf.get(w, default) for w in words) / default
            distinct = math.log(1 + n_docs / total[key])
            title = 1.3 if key in heads[gi] else 1.0  # titles and headlines say what a paper is about  # noqa: B023
            return (d[key] / size) * distinct * background * title * _phrase_weight(key, surfaces[gi](key))  # noqa: B023

        cands = [k for k in d if d[k] >= 2 and not set(k.split()) <= topic_keys]  # the reader knows the topic
        if not cands:  # one paper, or nothing shared: the papers' own names say more than any phrase
            label = " & ".join(p.short_name for p in groups[gi][:2])
            if n_words(label) <= 6:
                names.append(label)
                continue
        ranked = sorted(cands or list(d), key=lambda k: (-score(k), k))
        chosen: list[str] = []
        for k in ranked:
            if chosen and (len(chosen[0].split()) > 1 or len(k.split()) > 2):
                continue
            if any(set(k.split()) & set(c.split()) for c in chosen):
                continue
            label = " & ".join(surfaces[gi](c) for c in chosen + [k])
            if not chosen and label.lower() in (n.lower() for n in names):
                continue  # two themes must not share a name
            chosen.append(k)
            if len(chosen) == 2 or len(k.split()) > 1:
                break
        label = " & ".join(surfaces[gi](k) for k in chosen) or f"Group {gi + 1}"
        names.append(label[:1].upper() + label[1:])
    return names


def _mean(values) -> float:
    values = list(values)
    return sum(values) / len(values) if values else 0.0


def common_line(papers: list, topic: str, weights: Weights) -> str:
    """One line on what the papers share: the specific noun phrases that most of them use."""
    idf, verbs = weights.idf, _verbs(weights)
    n = len(papers)
    texts = [_paper_text(p) for p in papers]
    surface = _Surfaces(texts)
    df = Counter(k for t in texts for k in set(_phrases(t, verbs)))
    default = max(idf.values()) if idf else 1.0
    topic_keys = {_key(w) for w in _PHRASE_TOKEN.findall(topic)}
    cands = [k for k, c in df.items() if c >= max(2, math.ceil(n / 3)) and not set(k.split()) <= topic_keys]
    ranked = sorted(cands, key=lambda k: (-df[k] * _mean(idf.get(w, default) for w in k.split())
                                          * _phrase_weight(k, surface(k)), k))
    chosen: list[str] = []
    for k in ranked:
        if not any(set(k.split()) & set(c.split()) for c in chosen):
            chosen.append(k)
        if len(chosen) == 3:
            break
    if not chosen:
        return f"All {n} papers are about {topic}, each from its own angle."
    parts = [f"{_plain_case(surface(k))} ({'all' if df[k] == n else f'{df[k]} of {n}'}{' papers' if i == 0 else ''})"
             for i, k in enumerate(chosen)]
    listed = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    return f"Common threads beyond {topic}: {listed}."


OVERVIEW_SYSTEM = (
    "You name groups of machine-learning papers for a reading group. Use only the titles and TL;DRs given: "
    "no outside facts. Reply with JSON only, no markdown: {\"themes\": [one 2-4 word name per group, in order], "
    "\"common\": \"one sentence, at most 30 words, on what all the papers have in common\"}.")


def _llm_overview(llm, topic: str, themes: list[Theme]) -> tuple[list[str], str]:
    from store.llm import LLMError

    lines = [f"Topic: {topic}"]
    for i, theme in enumerate(themes, 1):
        lines.append(f"Group {i}:")
        lines += [f"- {p.display_title}: {s.tldr}" for p, s in theme.papers]
    answer = llm.chat([{"role": "system", "content": OVERVIEW_SYSTEM},
                       {"role": "user", "content": "\n".join(lines)}], max_tokens=300)
    answer = re.sub(r"<think>.*?</think>", "", answer, flags=re.S | re.I).strip()
    answer = re.sub(r"^```(?:json)?\s*|\s*```$", "", answer)
    try:
        data = json.loads(answer)
        names, common = data["themes"], data["common"]
    except (ValueError, KeyError, TypeError):
        raise LLMError("the model's overview is not the JSON asked for") from None
    if not isinstance(names, list) or len(names) != len(themes) or not isinstance(common, str):
        raise LLMError("the model's overview does not match the groups")
    names = [_tidy(str(x)).strip(" .\"'") for x in names]
    common = _end(_tidy(common)) if common.strip() else ""
    if any(not 1 <= n_words(x) <= 6 for x in names) or not common or n_words(common) > WORD_LIMIT \
            or _REFUSAL.search(common):
        raise LLMError("the model's theme names or common line are out of bounds")
    return names, common


def overview(topic: str, papers_with_scores: list, embeddings, *, summarizer, llm=None,
             weights: Weights | None = None) -> Overview:
    """Group the most relevant papers into named themes, each paper with its TL;DR, plus a common line."""
    from store.llm import LLMError, describe

    papers = [p for p, _ in papers_with_scores]
    if not papers:
        return Overview(topic, [], f"No papers found for {topic}.")
    relevance = [float(s) for _, s in papers_with_scores]
    groups = group_papers(np.asarray(embeddings), relevance)
    weights = weights or load_weights()
    names = name_themes([[papers[i] for i in g] for g in groups], weights, topic) if len(groups) > 1 else [topic]
    themes = [Theme(name, [(papers[i], summarizer(papers[i])) for i in g]) for name, g in zip(names, groups)]
    result = Overview(topic, themes, common_line(papers, topic, weights))
    if llm is not None:
        try:
            names, result.common = _llm_overview(llm, topic, themes)
        except LLMError as e:
            log.warning("LLM %s gave no usable overview (%s); using the extractive one", describe(llm), e)
            return result
        for theme, name in zip(themes, names):
            theme.name = name
        result.backend = llm.model
    return result


# -- the entry point ---------------------------------------------------------------
OVERVIEW_PAPERS = 8


def topic_overview(store: Store, searcher: Searcher, topic: str, *, now: float, llm=None,
                   limit: int = OVERVIEW_PAPERS) -> Overview:
    """The 5-8 most relevant papers for a topic, grouped into named themes, each with its TL;DR."""
    hits = searcher.search(topic, limit=limit)
    # Only the papers that are about the topic: themes drawn from the merely closest papers
    # would be invented ("qwertyuiop" has no common threads).
    kept = [h for h in hits if h.relevant]
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
                    summarizer=lambda p: paper_summary(store, p, now=now))
