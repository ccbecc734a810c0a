"""The short name an abstract introduces: SPIKE, CoVoGAN, G-NLL (or None).

Candidates come from where papers name things: after a contribution verb ("we propose X"),
"called X", "X (Long Form)", a title's "Name: ...", acronyms spelled in bold; each is scored
and the best one kept. Pure functions over clean text (store/clean.py).
"""
from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass

from .clean import SENTINEL_RE
from .text import (
    ANALYSIS_VERBS, CONTRIBUTION_VERBS, GENERIC_NAMES, NAME_TOKEN, NOUN_HEADS, STOPWORDS, is_namey, strip_token,
    third_person,
)
from .text import _CONSONANT_Y as CONSONANT_Y

_TOKEN_RE = re.compile(NAME_TOKEN)


def _verb_forms(verbs, tenses: bool = True) -> str:
    forms = set()
    for v in verbs:
        forms.update({v, third_person(v)})
        if tenses:
            stem = v[:-1] if v.endswith("e") else v
            forms.update({stem + "ed", stem + "ing"})
            if CONSONANT_Y.search(v):
                forms.add(v[:-1] + "ied")
    if tenses:
        forms.update({"built", "found", "took", "sought"})
    return "|".join(sorted(forms, key=len, reverse=True))


# Case is spelled out ([Ww]e) rather than re.I: IGNORECASE makes these whole-text scans several times slower.
_SUBJECT = (r"(?:[Ww]e|us to|[Tt]his (?:paper|work|study|article|submission)"
            r"|[Oo]ur (?:work|paper|study|approach|method))")
_ADVERBS = (r"(?:(?:\w+ly|also|further|first|then|here|now|therefore|thus|hence|next|instead|finally|"
            r"additionally|subsequently|jointly|accordingly|can|will),?\s+){0,2}")
_ING = "|".join(v[:-1] + "ing" if v.endswith("e") else v + "ing" for v in CONTRIBUTION_VERBS)
# Matched only at _SUBJECT_START hits: anchored .match() calls are far cheaper than a full search.
_SUBJECT_START = re.compile(r"[WwTtOoBbvu](?:e|his|hrough|ur|y|ia|s to) ")
_INTRO = re.compile(rf"(?:{_SUBJECT}\s+{_ADVERBS}(?:{_verb_forms(CONTRIBUTION_VERBS)})|(?:[Bb]y|via|through)\s+(?:{_ING}))\b")
# "we analyse X and propose Y", "we aim to introduce Y": the subject is earlier in the sentence;
# a third-person form ("and develops") must follow "and" ("X introduces bias" is not ours).
_BASE_FORMS = frozenset(v for v in CONTRIBUTION_VERBS if " " not in v)
_LATER_FORMS = _BASE_FORMS | {third_person(v) for v in _BASE_FORMS}
_VERB_STEMS = tuple({v[:-1] if v.endswith("e") else v for v in _BASE_FORMS})
_HAS_SUBJECT = re.compile(rf"\b{_SUBJECT}\b")
CONTRIB = re.compile(
    rf"(?:[Ww]e|[Oo]ur (?:work|paper|study|results|analysis|findings|experiments|approach|method)"
    rf"|[Tt]his (?:paper|work|study|article))\s+{_ADVERBS}"
    rf"(?P<verb>(?:{_verb_forms(CONTRIBUTION_VERBS + ANALYSIS_VERBS)})(?:\s+and\s+[a-z]+)?)\b")
AND_THEN_VERB = re.compile(rf"\b(and|then)\s+({_verb_forms(CONTRIBUTION_VERBS + ANALYSIS_VERBS, tenses=False)})\b")
PROPOSE_START = re.compile(rf"^(?:{_verb_forms(CONTRIBUTION_VERBS)})$", re.I)
# No leading \b or lookbehind (they defeat the regex engine's first-character scan); checked in code.
_CALLED = re.compile(
    r"(?:called|named|termed|dubbed|coined|denoted(?: as| by)?|referred to as|[Ww]e\s+(?:call|term|name|dub|coin)"
    r"(?:\s+(?:it|this|them|these|our \w+))?)\s+(?:as\s+)?(?!entit)")
_PRE_CALLED = re.compile(r"\b(?:a|an|the)\s+((?:[\w\-]+\s+){0,5}?[\w\-]+),?\s*$")
_CALLED_WORDS = ("called", "named", "termed", "dubbed", "coined", "denoted", "referred to as", "we call", "we term",
                 "we name", "we dub", "we coin")
_FOR_SHORT = re.compile(
    rf",?\s*(?:or|abbreviated(?: as)?)\s+[“\"]?({NAME_TOKEN})[”\"]?"
    rf"(?:\s+(?:for short|in short)|(?=\s*[,;:)]|[.!?]?\s*$))")
_LEAD_DET = r"(?:(?:a|an|the|our|two|three|four|several)\s+)?"
_DIRECT_END = (r"(?=\s*[,(;:.—–]|\s+-\s|\s+(?:which|that|to|for|as|is|are|and|with|on|in|via|by|"
               r"achieves?|consists?|uses?)\b|\s*$)")
_NAME_LONG = re.compile(rf"^{_LEAD_DET}(?:[a-z][\w\-]*\s+){{0,3}}?[“\"]?({NAME_TOKEN})[”\"]?\s*\(([^()]{{3,160}})\)")
_APPOS_NAME = re.compile(
    rf"^{_LEAD_DET}((?:[\w\-]+\s+){{0,5}}?[a-z][\w\-]*),\s+[“\"]?({NAME_TOKEN})[”\"]?{_DIRECT_END}")
_DIRECT = re.compile(rf"^{_LEAD_DET}((?:[a-z][\w\-]*\s+){{0,5}}?)[“\"]?({NAME_TOKEN})[”\"]?{_DIRECT_END}")
_TITLE_PHRASE = re.compile(
    rf"^{_LEAD_DET}((?:[A-Z][\w\-]*\s+(?:(?:of|for|and|with|in|on|to|via|the|from)\s+)?){{1,5}}[A-Z][\w\-]*)"
    r"(?=\s*[,;:.(—–]|\s+(?:which|that|to|for|as)\b|\s*$)")
_NAME_HEAD = re.compile(  # "the COTIC method"
    rf"^{_LEAD_DET}(?:[a-z][\w\-]*\s+){{0,3}}?[“\"]?({NAME_TOKEN})[”\"]?\s+(?:{'|'.join(NOUN_HEADS)})s?\b")
_APPOSITION = re.compile(r"\s*[,(—–]|\s+-\s")
_PAREN = re.compile(r"\(([^()]{1,25})\)")
_OUR_PROPOSED = re.compile(
    rf"[Oo]ur\s+(?:(?P<adj>proposed|novel|new)\s+(?:[a-z][\w\-]*\s+)?"
    rf"|(?:[a-z][\w\-]*\s+){{0,3}}(?:{'|'.join(NOUN_HEADS)}|sampler|learner|solver|model),\s+)"
    rf"[“\"]?({NAME_TOKEN})[”\"]?")
_DEFINES = re.compile(
    rf"[“\"]?({NAME_TOKEN})[”\"]?(?:\s*\([^()]*\))?(?:,\s+(?:a|an|the)\s|(?P<is>\s+is\s+(?:a|an)\s))")
_LEADS = re.compile(rf"({NAME_TOKEN})\s+(?:also\s+|further\s+|first\s+)?[a-z]+s\s+(?!of\b|and\b|in\b)")
_CALLED_PHRASE = re.compile(
    r"[“\"]?([a-z][\w\-]*(?:\s+[a-z][\w\-]*){0,3})[”\"]?(?=\s*[,.;:(]|\s+(?:which|that|and|in|for)\b|$)")


def _is_capword(tok: str) -> bool:
    """A capitalised single word usable as a name in a naming position (Cascadia, Prism)."""
    return (len(tok) >= 3 and tok[0].isupper() and tok[1:].replace("-", "").isalpha()
            and tok.lower() not in STOPWORDS and tok.lower() not in GENERIC_NAMES)


def initials_match(acr: str, phrase: str) -> str | None:
    """Shortest tail of `phrase` whose letters spell `acr` in order; None if none does."""
    letters = [c.lower() for c in acr if c.isalnum()]
    words = phrase.split()
    if not letters or not words:
        return None
    for start in range(len(words) - 1, -1, -1):
        tail = " ".join(words[start:])
        if tail[0].lower() != letters[0]:
            continue
        chars = iter(tail.lower())
        if all(c in chars for c in letters):
            return tail.strip(" ,")
    return None


@dataclass
class Candidate:
    name: str
    score: float
    long_form: str = ""
    sentence: int = 0
    desc: str = ""  # what follows the name in its naming sentence
    pre: str = ""  # the noun phrase before it: "a novel architecture" in "a novel architecture, TripleSumm"


def _object_candidates(obj: str) -> list[Candidate]:
    """Names introduced at the start of a contribution verb's object."""
    obj = obj.lstrip(" :")
    out: list[Candidate] = []
    if obj.startswith("to "):
        return out  # "we propose to extend LSTM and ...": an infinitive, not a naming
    head = obj[:200]
    pm = _PAREN.search(head)
    if pm and not head[pm.end():pm.end() + 1] == "-":
        pre = head[:pm.start()].rstrip()
        if pre.count(",") == 1 and len(pre.split(",")[0].split()) <= 8 and pre.split(",")[1].strip()[:1].isupper():
            pre = pre.split(",")[1].strip()  # "a new method, Adversarial In-Context Learning (adv-ICL)"
        acr = strip_token(pm.group(1).strip())
        if (_TOKEN_RE.fullmatch(acr) and (is_namey(acr) or acr.isupper() and len(acr) >= 2)
                and not any(c in pre for c in ",;:") and len(pre.split()) <= 12):
            long_form = initials_match(acr, _LEAD_THE.sub("", pre))
            if long_form and len(long_form.split()) >= 2:
                out.append(Candidate(acr, 10, long_form, desc=obj[pm.end():]))
    m = _NAME_LONG.match(obj)
    if m:
        tok, inner = strip_token(m.group(1)), m.group(2)
        if (is_namey(tok) or _is_capword(tok)) and len(inner.split()) >= 2:
            out.append(Candidate(tok, 10, inner.strip(), desc=obj[m.end():]))
    m = _APPOS_NAME.match(obj)
    if m:
        tok = strip_token(m.group(2))
        if (is_namey(tok) or _is_capword(tok)) and m.group(1).split()[-1].lower() not in STOPWORDS:
            out.append(Candidate(tok, 10, desc=obj[m.end():], pre=m.group(1)))
    m = _DIRECT.match(obj)
    if m:
        tok = strip_token(m.group(2))
        if is_namey(tok) or (_is_capword(tok) and not m.group(1) and _APPOSITION.match(obj, m.end())):
            out.append(Candidate(tok, 10 if is_namey(tok) else 9, desc=obj[m.end():]))
    m = _NAME_HEAD.match(obj)
    if m and is_namey(strip_token(m.group(1))) and all(c.name != strip_token(m.group(1)) for c in out):
        out.append(Candidate(strip_token(m.group(1)), 9, desc=obj[m.end():]))
    if not out:
        m = _TITLE_PHRASE.match(obj)
        if m:
            words = m.group(1).split()
            if 2 <= len(words) <= 6 and words[0].lower() not in STOPWORDS:
                out.append(Candidate(" ".join(words), 8, desc=obj[m.end():]))
    for tok in obj[:240].split():
        if tok.islower() or tok.istitle() and not any(c.isdigit() for c in tok):
            continue  # cheap pre-check; is_namey decides
        tok = strip_token(tok.strip("()[]“”\"',;:"))
        if is_namey(tok) and all(c.name != tok for c in out):
            out.append(Candidate(tok, 3))
    return out


def _called_candidates(rest: str) -> list[Candidate]:
    """What follows 'called'/'termed': a name, 'X, or PPLLaVA for short', or a lowercase term."""
    short = _FOR_SHORT.search(rest[:120])
    if short and is_namey(strip_token(short.group(1))):
        return [Candidate(strip_token(short.group(1)), 10, rest[:short.start()].strip(" “”\""),
                           desc=rest[short.end():])]
    found = [c for c in _object_candidates(rest) if c.score >= 8]
    for c in found:
        c.score = 9
    if found:
        return found
    pm = _CALLED_PHRASE.match(rest)
    if pm and pm.group(1).split()[0] not in STOPWORDS and pm.group(1).split()[-1] not in STOPWORDS:
        return [Candidate(pm.group(1), 5, desc=rest[pm.end():])]
    return []


def subject_starts(text: str) -> list[int]:
    """Offsets where 'we', 'our', 'this', 'by', 'via' or 'through' starts a word."""
    return [m.start() for m in _SUBJECT_START.finditer(text) if m.start() == 0 or not text[m.start() - 1].isalnum()]


def _intro_points(text: str, spans: list[tuple[int, int]], starts: list[int],
                  subjects: list[int]) -> list[tuple[int, int]]:
    """(sentence, offset) just after every contribution verb: 'we propose|', 'and develop|'."""
    points = []
    scanned: set[int] = set()
    for pos in subjects:
        i = bisect_right(starts, pos) - 1
        m = _INTRO.match(text, pos)
        if m:
            points.append((i, m.end()))
        if i in scanned or not _HAS_SUBJECT.match(text, pos):
            continue
        scanned.add(i)
        offset = m.end() if m else pos
        if not any(stem in text[offset:spans[i][1]] for stem in _VERB_STEMS):
            continue
        prev = ""
        # A word loop beats a regex here: the verb alternation has no literal prefix to scan for.
        for word in text[offset:spans[i][1]].split(" "):
            bare = word.rstrip(",;:")
            if bare in _LATER_FORMS and (prev == "and" or bare in _BASE_FORMS) and offset > pos + 3:
                points.append((i, offset + len(bare)))  # "and develop|", "aim to introduce|"
            if not (bare.endswith("ly") or bare in ("also", "further", "then", "first", "additionally")):
                prev = bare
            offset += len(word) + 1
    return sorted(set(points))


def find_name(text: str, spans: list[tuple[int, int]], emph: set[str],
               acronyms: list[tuple[str, str]], subjects: list[int]) -> Candidate | None:
    """The method, model, benchmark or dataset the abstract introduces, if any."""
    if not spans:
        return None
    starts = [a for a, _ in spans]
    cands: list[Candidate] = []
    seen: list[int] = []
    for i, end in _intro_points(text, spans, starts, subjects):
        if i not in seen:
            seen.append(i)
        for c in _object_candidates(text[end:spans[i][1]]):
            c.sentence = i
            c.score -= 0.4 * min(len(seen) - 1, 5)  # the first contribution is the main one
            cands.append(c)
    low = text.lower()
    if any(w in low for w in _CALLED_WORDS):
        for m in _CALLED.finditer(text):
            if m.start() and (text[m.start() - 1].isalnum() or text[max(m.start() - 3, 0):m.start()] == "so-"):
                continue
            i = bisect_right(starts, m.start()) - 1
            pre = _PRE_CALLED.search(text, spans[i][0], m.start())  # "a new actor-critic algorithm called X"
            for c in _called_candidates(text[m.end():spans[i][1]]):
                c.sentence = i
                c.pre = c.pre or (pre.group(1) if pre else "")
                cands.append(c)
    if "ur " in text:
        for m in _OUR_PROPOSED.finditer(text):
            if m.start() and text[m.start() - 1].isalnum():
                continue  # "four", "hour"
            tok = strip_token(m.group(2))
            if is_namey(tok) or not m.group("adj") and _is_capword(tok):
                i = bisect_right(starts, m.start()) - 1
                cands.append(Candidate(tok, 6 if m.group("adj") else 8, sentence=i, desc=text[m.end():spans[i][1]]))
    for i, (a, b) in enumerate(spans):
        first = strip_token(text[a:text.find(" ", a, b)].strip("“”\"(,"))
        if not (is_namey(first) or _is_capword(first)):
            continue
        dm = _DEFINES.match(text, a, b)
        if dm:
            tok = strip_token(dm.group(1))
            if is_namey(tok) or _is_capword(tok) and dm.group("is"):
                cands.append(Candidate(tok, 6 if is_namey(tok) else 5, sentence=i, desc=text[dm.end() - 1:b]))
            continue
        lead = _LEADS.match(text, a, b)  # "NEFTune adds noise to ...": a name that acts from the start
        if lead and i > 0 and is_namey(strip_token(lead.group(1))) and text.count(lead.group(1)) >= 2:
            cands.append(Candidate(strip_token(lead.group(1)), 5, sentence=i, desc=text[lead.end(1):b]))
    intro_text = " ".join(text[spans[i][0]:spans[i][1]] for i in seen)
    for acronym, long_form in acronyms:
        cands.append(Candidate(acronym, 7 if long_form and long_form in intro_text else 4, long_form))
    best: Candidate | None = None
    for c in cands:
        c.name = c.name.strip(" “”\"'")
        if c.name.islower() and low.count(c.name) < 3:
            continue  # a lowercase term is a name only if the abstract keeps using it
        if (not c.name or c.name.lower() in GENERIC_NAMES or SENTINEL_RE.search(c.name)
                or c.name.split()[0].lower() in STOPWORDS):
            continue
        score = c.score + 0.5 * min(max(text.count(c.name) - 1, 0), 4)
        if c.name in emph:
            score += 1
        first = text.find(c.name)
        if 0 <= first < starts[c.sentence] and not c.long_form:
            score -= 8  # used before it is introduced: the field's term, not the paper's
        if best is None or score > best.score:
            best = Candidate(c.name, score, c.long_form, c.sentence, c.desc, c.pre)
    return best if best and best.score >= 5 else None
_LEAD_THE = re.compile(r"^(?:a|an|the|our)\s+", re.I)


_TITLE_HEAD = re.compile(r"^\s*([^:]{2,60}?)\s*:\s*\S")
_TITLE_ACRONYM = re.compile(r"(?<!\S)\(([A-Za-z][\w\-+]{1,15})\)(?=[\s:,]|$)")
_NOT_A_NAME_START = re.compile(
    r"^(?:beyond|towards?|on|when|why|what|how|do|does|is|are|can|should|rethinking|revisiting|"
    r"understanding|improving|learning|the|a|an|in|from|into|not|all|more|less|no)\b", re.I)


def name_in_title(title: str) -> str | None:
    """'SPIKE: ...' -> SPIKE; 'Outlier Weighed Layerwise Sparsity (OWL): ...' -> OWL."""
    acr = _TITLE_ACRONYM.search(title)
    if acr and is_namey(acr.group(1)):
        return acr.group(1)
    head = _TITLE_HEAD.match(title)
    if not head:
        return None
    words = head.group(1).split()
    namey = [w for w in words if is_namey(strip_token(w))]
    if len(words) <= 3 and namey and not title.isupper():
        return head.group(1).strip() if len(words) <= 2 and len(head.group(1)) <= 30 else strip_token(namey[-1])
    if len(words) <= 3 and not _NOT_A_NAME_START.match(head.group(1)) and not words[0].lower().endswith("ing"):
        return head.group(1).strip()
    return None
