"""One line that says what a paper does, and the phrase cutting it is made of.

`write_headline` turns the name and the contribution statements into a title-like line of at most
HEADLINE_WORDS words; `subject_phrase` and `keyphrase` give a short subject when the paper names
nothing; `fit_line`, `cut_words` and `ends_mid_phrase` cut a phrase at a clause boundary without
stranding a modifier (summaries use them too); `headline_problems` says why a line does not read
like a title.
"""
from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass

from .names import AND_THEN_VERB, CONTRIB, PROPOSE_START, Candidate, initials_match
from .text import ANALYSIS_VERBS, CONTRIBUTION_VERBS, STOPWORDS, is_namey, third_person

HEADLINE_MAX = 100
SUBJECT_MAX_WORDS = 6
DESC_ADJECTIVES = frozenset("""
    novel new simple effective efficient unified general principled systematic comprehensive
    lightweight flexible scalable robust powerful generic versatile practical first key
""".split())


_CLAUSE_BREAK = re.compile(r", |; | [—–] ")
_WEAK_BREAK = re.compile(r", |; | [—–] | (?=(?:that|which|to|with|by|using|via|for|while|where|through|and|in) )")
# After a cut, a phrase should not end on a modifier whose noun was cut off ("... as visual").
_MODIFIER_SUFFIXES = ("al", "ive", "ic", "ous", "ful", "less", "able", "ible", "ed", "ly", "-based",
                      "-grounded", "-aware", "-free", "-driven", "-level", "-specific", "-wise", "-scale",
                      "-style", "-like", "-of-the-art", "-agnostic", "-efficient", "-preserving", "-quality",
                      "-aware", "-centric", "-oriented", "-time", "-shot")
_MODIFIER_WORDS = frozenset("""
    new novel different various multiple several many large small high low fine-grained deep long
    short strong weak key main better worse more less higher lower greater fewer same whole public
    open first second third single given recent existing current prior previous best
""".split())
_NOT_MODIFIERS = frozenset("""
    signal signals proposal retrieval interval removal trial tutorial material manual potential
    individual animal terminal journal capital arrival approval survival rival objective
    objectives alternative incentive initiative narrative directive primitive representative
    derivative perspective logic topic metric metrics music traffic graphic clinic heuristic
    heuristics critic mechanic arithmetic dynamic rhetoric need speed seed feed bed embed
""".split())


def _is_modifier(word: str) -> bool:
    w = word.lower().strip(",;:")
    return (w in _MODIFIER_WORDS or w.endswith(_MODIFIER_SUFFIXES)) and w not in _NOT_MODIFIERS


def _trim_tail(s: str, truncated: bool = False) -> str:
    """Drop trailing function words, punctuation and unclosed parentheses (and modifiers after a cut)."""
    for _ in range(12):
        before = s
        s = s.rstrip(" ,;:—–-/(")
        if s.count("(") > s.count(")"):
            s = s[:s.rfind("(")]
        head, _, last = s.rpartition(" ")
        if head and (last.lower() in STOPWORDS or truncated and len(head) > 30 and _is_modifier(last)):
            s = head
        if s == before:
            break
    s = s.rstrip(" .,;:—–-")
    for abbrev in (" e.g", " i.e", " etc", " cf", " vs"):
        if s.endswith(abbrev):
            s = _trim_tail(s[:-len(abbrev)])
    return s


def ends_mid_phrase(s: str) -> bool:
    """Does a cut phrase end mid-thought: '... by utilizing', '... to quantify', "... the model's"?"""
    words = s.split()
    if len(words) < 3:
        return False
    last, prev = words[-1].lower(), words[-2].lower()
    return (_is_modifier(last) or last.endswith(("'s", "’s")) or last.replace(",", "").replace(".", "").isdigit()
            or prev in ("to", "by", "via", "through", "while", "when") or prev.endswith("ly") and last.endswith("s"))


def fit_line(s: str, limit: int = HEADLINE_MAX) -> str:
    """Trim to `limit` characters at a word (or late clause) boundary and end cleanly."""
    s = " ".join(s.split()).rstrip(".;:, ")
    if len(s) <= limit:
        return _trim_tail(s)
    cut = s[:limit + 1]
    cut = cut[:cut.rfind(" ")] if " " in cut else cut[:limit]
    breaks = [m.start() for m in _CLAUSE_BREAK.finditer(cut)]
    if breaks and breaks[-1] >= 0.75 * limit:
        cut = cut[:breaks[-1]]
    out = _trim_tail(cut, truncated=True)
    if ends_mid_phrase(out):  # back off to the last clause boundary that keeps most of the line
        breaks = [m.start() for m in _WEAK_BREAK.finditer(out) if m.start() >= 0.45 * limit]
        if breaks:
            out = _trim_tail(out[:breaks[-1]])
    return out[:limit]


def capitalise(s: str) -> str:
    return s[:1].upper() + s[1:] if s and not (len(s) > 1 and s[1].isupper()) else s


def lower_first(s: str) -> str:
    return s[:1].lower() + s[1:] if s and not (len(s) > 1 and s[1].isupper()) else s


@dataclass
class _Contribution:
    sentence: int
    phrase: str  # "Investigates the internal information flow of VideoLLMs ..."
    obj: str  # what the verb takes: "the internal information flow of VideoLLMs ..."
    proposes: bool  # propose/introduce/present rather than show/study


_TO_VERB = re.compile(r"to\s+([a-z]+)\s+")
_TAKES_INFINITIVE = ("propos", "aim", "seek", "attempt", "tr", "plan", "want", "striv", "choose", "intend")
_LEAD_ARTICLE_NOVEL = re.compile(r"^(?:a|an)\s+(?:(?:novel|new)\s+)?", re.I)


def contributions(text: str, spans: list[tuple[int, int]], subjects: list[int]) -> list[_Contribution]:
    """The first 'we <verb> ...' statement of each sentence, in order."""
    out: list[_Contribution] = []
    starts = [a for a, _ in spans]
    done: set[int] = set()
    for pos in subjects:
        m = CONTRIB.match(text, pos)
        if not m:
            continue
        i = bisect_right(starts, pos) - 1
        if i in done or i < 0:
            continue
        obj = text[m.end():spans[i][1]].strip().rstrip(".")
        if len(obj.split()) < 2:
            continue
        done.add(i)
        words = m.group("verb").split()
        proposes = bool(PROPOSE_START.match(words[0])) and not words[0].startswith(("provide", "describe"))
        infinitive = _TO_VERB.match(obj) if words[0].lower().startswith(_TAKES_INFINITIVE) else None
        if infinitive:  # "we propose to leverage X" -> "Leverages X"
            phrase = capitalise(f"{third_person(infinitive.group(1))} {obj[infinitive.end():]}")
        elif proposes and len(words) == 1 and not _CLAUSE_START.match(obj):
            phrase = capitalise(_LEAD_ARTICLE_NOVEL.sub("", obj))  # "we propose a X that ..." -> "X that ..."
        else:
            verbs = third_person(words[0]) + (f" and {third_person(words[2])}" if len(words) == 3 else "")
            rest = AND_THEN_VERB.sub(lambda x: f"{x.group(1)} {third_person(x.group(2))}", obj)
            phrase = capitalise(f"{verbs} {rest}")
        out.append(_Contribution(i, phrase, obj, proposes))
    return out


_LOWER_PHRASE = re.compile(r"[a-z][\w\- ]*")
_VERB_AFTER_NAME = re.compile(r"(?:also |further |then |first )?[a-z]+s\b(?! of\b)")


_DESC_PAREN = re.compile(r"^\([^()]*\)\s*")
_DESC_LEAD = re.compile(r"^[,:—–]\s*|^(?:is|are)\s+")
_DESC_NOUN_WHICH = re.compile(r"^([a-z][\w\-]*(?:\s+[a-z][\w\-]*){0,2}),?\s+(?:which|that)\s+(?:(?:is|are)\s+)?")
_DESC_WHICH = re.compile(r"^(?:which|that)\s+(?:(?:is|are)\s+)?")
_ARTICLE = re.compile(r"^(?:a|an)\s+")
_NOVEL = re.compile(r"^(?:novel|new)\s+")


def _describe(name: Candidate) -> str:
    """What the naming sentence says about the name: ', a benchmark for X' -> 'benchmark for X'."""
    d = _DESC_PAREN.sub("", name.desc.strip())
    d = _DESC_LEAD.sub("", d)
    noun = _DESC_NOUN_WHICH.match(d)
    if noun and noun.group(1).split()[0] not in ("which", "that"):
        d = f"{noun.group(1)} that {d[noun.end():]}"  # "estimator, which aggregates" -> "estimator that aggregates"
    which = _DESC_WHICH.match(d)
    if which:
        d = d[which.end():]
    d = _ARTICLE.sub("", d)
    if name.pre:
        pre = _ARTICLE.sub("", name.pre.strip())
        d = f"{pre} that {d}" if which and d else (f"{pre}, {d}" if d else pre)
    if d.startswith(("to ", "for ", "as ")) and name.long_form:
        d = f"{name.long_form} {d}"
    return _NOVEL.sub("", d)


_ENUMERATOR = re.compile(r"\s*\((?:i{1,3}|iv|vi{0,3}|[1-9]|[a-e])\)\s*")
_THAT_COLON = re.compile(r"\b(that|which|to):\s*")


def _tidy(phrase: str) -> str:
    """'a framework that: (i) provides X, and (ii) allows Y' -> 'a framework that provides X, and allows Y'."""
    if "(" in phrase:
        phrase = _ENUMERATOR.sub(" ", phrase)
    if ":" in phrase:
        phrase = _THAT_COLON.sub(r"\1 ", phrase)
    return phrase


def _draft_headline(name: Candidate | None, contribs: list[_Contribution], sentences: list[str]) -> str:
    """'SPIKE: inference-time framework that ...' or what the first contribution statement says."""
    if name is not None:
        desc = _describe(name)
        if len(desc) < 25:
            proposal = next((c for c in contribs if c.proposes and name.name not in c.obj), None)
            led = next((s[len(name.name) + 1:] for s in sentences[name.sentence + 1:]
                        if s.startswith(name.name + " ") and _VERB_AFTER_NAME.match(s, len(name.name) + 1)), None)
            if proposal:
                desc = lower_first(proposal.phrase)
            elif led:
                desc = led  # "CAMIL incorporates neighbour-constrained attention ..."
            elif name.long_form and name.long_form.lower() != name.name.lower():
                joiner = " " if _LOWER_PHRASE.fullmatch(desc) else ", "  # "CAMIL" + "architecture"
                desc = f"{name.long_form}{joiner + desc if desc else ''}"
        if len(desc) >= 12:
            return fit_line(_tidy(f"{name.name}: {desc}"))
    if contribs:
        return fit_line(_tidy(contribs[0].phrase))
    return fit_line(capitalise(sentences[0])) if sentences else ""


HEADLINE_WORDS = 12
# A headline that reads like a title names a thing; these words only point back at one.
_DANGLING_REFS = frozenset("""this these those our similar such it its they their them we us aforementioned
    latter former above""".split())
# What can never open a title: a clause or a predicate without its subject.
_CLAUSE_OPENERS = frozenset("""and or but nor that which who whose whom to by is are was were be been being has
    have had can could may might will would should must shall does do did also then thus hence further
    here however""".split())
_DETERMINERS = frozenset("""the a an that how whether why what when which it its this these those such
    both several two three some many our their""".split())
_NOT_AFTER_VERB = frozenset("of for and with in on , to from".split())
_HEADLINE_VERBS = frozenset(CONTRIBUTION_VERBS + ANALYSIS_VERBS + (
    "add", "adopt", "allow", "apply", "ask", "attempt", "augment", "bridge", "combine", "compare", "compute",
    "derive", "discuss", "employ", "enable", "encode", "enhance", "explain", "exploit", "generalize", "give",
    "improve", "incorporate", "integrate", "measure", "obtain", "outline", "perform", "project", "provide",
    "quantify", "rely", "replace", "report", "solve", "state", "suggest", "train", "treat", "try", "utilize",
    "verify", "view", "make", "use", "reduce", "apply", "conduct", "highlight", "demonstrate", "discover"))
# A predicate that lost its object: "... words that seem", "... the output sequence constitutes".
_END_VERBS = frozenset("""seem seems constitute constitutes become becomes remain remains work works lead leads
    make makes take takes yield yields allow allows""".split())
_PARTICIPLE_THEN = frozenset("to by using with via for from on in as through into".split())
_WORDS_RE = re.compile(r"[\w’'\-+.]+|[,;:]")


def _verb_stem(word: str) -> str | None:
    """'studies' -> 'study', 'proposes' -> 'propose', 'leverages' -> 'leverage'; None if no known verb."""
    w = word.lower()
    for stem in (w[:-3] + "y" if w.endswith("ies") else None, w[:-2] if w.endswith("es") else None,
                 w[:-1] if w.endswith("s") else None):
        if stem and stem in _HEADLINE_VERBS:
            return stem
    return None


def _body(headline: str, name: str | None = None) -> str:
    """The headline without its 'Name: ' prefix."""
    if name and headline.startswith(name + ": "):
        return headline[len(name) + 2:]
    head, sep, rest = headline.partition(": ")
    return rest if sep and len(head.split()) <= 4 and rest else headline


def headline_problems(headline: str, name: str | None = None) -> list[str]:
    """Why a derived headline does not read like a title: [] when it does.

    'verb fragment' (it opens on a predicate: 'Shows that', 'obtained using', 'can factor in', 'and show'),
    'dangling reference' (this, these, our, similar, ...), 'clause fragment' (it stops mid-thought)
    and 'too long' (more than HEADLINE_WORDS words).
    """
    problems = []
    body = _body(headline, name)
    words = [w.lower() for w in _WORDS_RE.findall(body)]
    if not words:
        return ["empty"]
    first, second = words[0], (words[1] if len(words) > 1 else "")
    stem = _verb_stem(first)
    if (first in _CLAUSE_OPENERS
            or stem and (second in _DETERMINERS or second not in _NOT_AFTER_VERB)
            or first.endswith("ed") and second in _PARTICIPLE_THEN
            or stem and second == "and" and len(words) > 2 and words[2].endswith("s")):  # "Explores and validates"
        problems.append("verb fragment")
    if any(w in _DANGLING_REFS for w in words):
        problems.append("dangling reference")
    plain = [w for w in words if w not in ",;:"]
    if (words[0] in ",;:" or " , " in body or plain[-1] in STOPWORDS or plain[-1] in _VAGUE
            or body.endswith(" in order") or ends_mid_phrase(body) and not body.split()[-1][:1].isupper()
            or plain[-1] in _END_VERBS or _verb_stem(plain[-1]) and len(plain) > 2):
        problems.append("clause fragment")
    if len(headline.split()) > HEADLINE_WORDS:
        problems.append("too long")
    return problems


def _gerund(stem: str) -> str:
    if stem.endswith("ie"):
        return stem[:-2] + "ying"
    if stem.endswith("e") and not stem.endswith(("ee", "ye")):
        return stem[:-1] + "ing"
    if re.fullmatch(r"[^aeiou]*[aeiou][bdgmnpt]", stem):
        return stem + stem[-1] + "ing"  # map -> mapping
    return stem + "ing"


_DROP_VERBS = frozenset("""study investigate explore examine analyze analyse revisit consider address tackle
    focus characterize characterise evaluate benchmark describe present propose introduce provide develop
    design build offer contribute establish formulate demonstrate""".split())
_LEAD_ART = re.compile(r"^(?:the|a|an|new|novel)\s+", re.I)
_PROBLEM_OF = re.compile(r"^(?:the\s+)?(?:problem|task|question|issue|concept|idea|notion)\s+of\s+", re.I)


def _as_title(phrase: str) -> str:
    """'Studies the X' -> 'X', 'Shows that X' -> 'X', 'Learns X' -> 'Learning X', 'focuses on X' -> 'X'."""
    words = phrase.split(" ", 1)
    stem = _verb_stem(words[0]) if len(words) == 2 else None
    if not stem:
        return phrase
    rest = words[1]
    if rest.startswith("that "):
        return capitalise(rest[5:])
    if rest.startswith(("how ", "why ", "when ", "whether ")):
        return capitalise(rest)  # "Shows how X can Y" -> "How X can Y"
    if stem == "focus" and rest.startswith("on "):
        rest = rest[3:]
    if rest.split(" ", 1)[0] in _PREPOSITIONS or rest.startswith(("on ", "upon ")):
        return capitalise(f"{_gerund(stem)} {rest}")  # "builds on X" -> "Building on X"
    if stem in _DROP_VERBS or re.match(r"(?:a|an)\s", rest):
        rest = _PROBLEM_OF.sub("", rest)
        for _ in range(2):
            rest = _LEAD_ART.sub("", rest)
        return capitalise(rest)
    return capitalise(f"{_gerund(stem)} {rest}")


_OUR = re.compile(r"\b(?:our|their|its)\s+", re.I)


def cut_words(s: str, limit: int) -> str:
    """At most `limit` words, cut at a clause boundary where one keeps most of the line (no end
    punctuation): the words past the limit are cut off mid-phrase ("... from selfish"), so it ends
    at the last whole one."""
    s = " ".join(s.split()).rstrip(".;:, ")
    words = s.split(" ")
    if len(words) <= limit:
        return s
    cut = " ".join(words[:limit])
    for pattern in (_CLAUSE_BREAK, _WEAK_BREAK):
        breaks = [m.start() for m in pattern.finditer(cut) if m.start() >= 0.5 * len(cut)]
        for b in reversed(breaks):
            out = _trim_tail(cut[:b], truncated=True)
            if not ends_mid_phrase(out):
                return out
    return _trim_tail(cut, truncated=True)


def _fit_words(s: str, limit: int = HEADLINE_WORDS) -> str:
    """At most `limit` words, cut at a clause boundary where one keeps most of the line."""
    return fit_line(cut_words(s, limit))


def write_headline(name: Candidate | None, contribs: list[_Contribution], sentences: list[str],
              fallback: str = "") -> str:
    """The first candidate headline that reads like a title, at most HEADLINE_WORDS words.

    Candidates in order: the name and what its sentence says of it, the name and the first proposal,
    each contribution statement turned into a noun phrase, the subject (`fallback`).
    """
    label = name.name if name is not None else None
    draft = _draft_headline(name, contribs, sentences)
    candidates = []
    if label and draft.startswith(label + ": "):
        candidates.append(f"{label}: {lower_first(_as_title(draft[len(label) + 2:]))}")
    elif draft:
        candidates.append(_as_title(draft))
    for c in contribs:
        phrase = _as_title(_OUR.sub("", _tidy(c.phrase)))
        if label and phrase.startswith(label) and phrase[len(label):len(label) + 1] in (",", "("):
            phrase = f"{label}: {_DESC_PAREN.sub('', phrase[len(label):].lstrip(', '))}"  # "G-NLL, obtained ..."
        candidates.append(f"{label}: {lower_first(phrase)}" if label and label not in phrase else phrase)
    if label and name.long_form and name.long_form.lower() != label.lower():
        candidates.append(f"{label}: {name.long_form}")
    if fallback:
        candidates.append(f"{label}: {fallback}" if label and label.lower() not in fallback.lower() else fallback)
    fitted = [_fit_words(c) for c in candidates if c]
    for c in fitted:
        if len(c) >= 12 and not headline_problems(c, label):
            return c
    return next((c for c in fitted if c), "")


_WORD = re.compile(r"[A-Za-z][\w\-]*")
_SUBJECT_GENERIC = frozenset("""
    model models method methods approach approaches result results performance task tasks data work
    paper framework frameworks analysis study problem problems setting settings experiment
    experiments existing state-of-the-art art propose proposed show shows novel new based using
    use used different various extensive demonstrate demonstrates significant significantly
    several multiple key first two three one able also well however despite even often
    generalization effectiveness efficiency challenge challenges benchmarks benchmark evaluation
    insight insights way ways inspired limited remain remains recent large high low strong
    better best effective efficient simple underlying given specific improve improves improved
    previous prior current similar
""".split())
_GENERIC_HEADS = frozenset("""
    framework method approach problem analysis study investigation example set family class way
    technique strategy algorithm benchmark dataset suite toolkit theory view perspective
    understanding evaluation examination exploration lens notion concept question issue task
    model paradigm pipeline tool collection role impact effect
""".split())
_VAGUE = frozenset("""similar various several some such certain this these that key different many both its
    their two three four five six multiple new""".split())
_PREPOSITIONS = frozenset("of for in on across under over with via from to into between among at by through".split())
_SUBJECT_CUT = re.compile(
    r"\s(?:that|which|who|whose|to|by|using|via|where|while|with|through|whereby|based|as|and thus|can|could|"
    r"may|might|will|would|should|must|is|are|was|were|has|have|does|do|designed|tailored|aimed|capable)\s"
    r"|[,;:(—–?]|\s-\s")
_PURPOSE_FOR = re.compile(r"\b(?:designed|tailored|built|developed|intended|aimed)\s+(?:\w+ly\s+)?for\b")
_CALLED_IN_NP = re.compile(r"^(?:(?:a|an|the)\s+)?(?:[\w\-]+\s+){0,3}?(?:called|named|termed|dubbed)\s+")
_ACRONYM_DEF = re.compile(r"\(([A-Za-z][\w\-]*?)(s?)\)")


def _acronym_expansions(text: str) -> dict[str, str]:
    """{'HP': 'hyperparameter', 'TVG': 'Temporal Video Grounding'} from 'long form (ACR)'."""
    out = {}
    for m in _ACRONYM_DEF.finditer(text):
        acr = m.group(1)
        if not (acr.isupper() or is_namey(acr)):
            continue
        before = text[max(0, m.start() - 80):m.start()].split()[-5:]
        long_form = initials_match(acr, " ".join(before))
        if long_form and len(long_form.split()) <= 3:
            out[acr] = long_form
            out[acr + "s"] = long_form + ("" if long_form.endswith("s") else "s")
    return out


_CLAUSE_START = re.compile(
    r"(?:that|how|whether|why|what|when|if|it|this|these|them|our|to|on|in|for|us|upon|from|with|into|onto|"
    r"about|across|over|by|through|toward|towards|at)\b", re.I)
_ADJECTIVE_LIST = re.compile(
    rf"^(?:(?:a|an|the)\s+)?(?:(?:{'|'.join(DESC_ADJECTIVES)}),?\s+(?:and\s+|or\s+)?)+", re.I)
_PARTICIPLE_CUT = re.compile(r"\s\w+ing\s(?=(?:from|in|to|with|by|on|under|over|between|among)\s)")


_KIND_OF = ("kind", "type", "form", "variant", "family", "class")


def _noun_phrase(obj: str, text: str) -> str:
    """Short subject from a contribution's object; '' when it is a clause or too vague."""
    o = obj.strip(" :,").replace('"', "").replace("“", "").replace("”", "")
    if _CLAUSE_START.match(o):
        return ""
    adjectives = _ADJECTIVE_LIST.match(o)
    if adjectives:
        o = o[adjectives.end():]  # "a novel, simple, and effective method" -> "method"
    verb = AND_THEN_VERB.search(o)
    if verb and verb.group(1) == "and":
        o = o[:verb.start()]  # "a toy game and compare to prior work" -> "a toy game"
    called = _CALLED_IN_NP.match(o)
    if called:
        o = o[called.end():]  # "a new concept called X" -> X
    if "for" in o:
        o = _PURPOSE_FOR.sub("for", o)  # "dataset designed explicitly for X" -> "dataset for X"
    o = _SUBJECT_CUT.split(" " + o + " ", maxsplit=1)[0]
    participle = _PARTICIPLE_CUT.search(o)
    if participle and len(o[:participle.start()].split()) >= 2:
        o = o[:participle.start()]  # "training dynamics arising from X" -> "training dynamics"
    words = o.split()
    while words and (words[0].lower() in ("a", "an", "the") or words[0].lower() in DESC_ADJECTIVES):
        words.pop(0)
    if len(words) > 2 and words[1] == "of" and words[0].lower() in _KIND_OF:
        words = words[2:]  # "a kind of conditional diffusion model"
    if not words or words[0].lower() in _VAGUE or words[0].endswith("ing") and len(words) > 1 and (
            words[1].lower() in ("the", "a", "an", "our", "their", "its", "this", "these", "them", "it")):
        return ""  # vague ("a similar idea") or a clause ("compressing the retrieved documents")
    for idx in range(1, min(len(words) - 1, 3)):
        if words[idx].lower() in ("of", "for", "on") and words[idx - 1].lower().rstrip("s") in _GENERIC_HEADS:
            rest = words[idx + 1:]
            while rest and (rest[0].lower() in ("a", "an", "the") or rest[0].endswith("ing") and len(rest) > 1):
                rest.pop(0)
            if rest:
                words = rest
            break
    words = _cap_words(words)
    if len(words) < 2 or all(w.lower() in _SUBJECT_GENERIC for w in words):
        return ""  # "Setup", "Proposed method": says too little
    expansions = _acronym_expansions(text)
    expanded = []
    for w in words:
        long_form = expansions.get(w)
        expanded += long_form.split() if long_form else [w]
    if len(expanded) <= SUBJECT_MAX_WORDS:
        words = expanded
    return capitalise(" ".join(words))


_KEY_CHUNKS = re.compile(r"[.,;:()!?“”\"—–]|\s(?:and|or|but|that|which|while)\s")


def keyphrase(text: str) -> str:
    """Most repeated two- or three-word content phrase, e.g. 'neologism learning'."""
    counts: dict[str, int] = {}
    display: dict[str, str] = {}
    for chunk in _KEY_CHUNKS.split(text.replace("’s", "").replace("'s", "")):
        words = _WORD.findall(chunk)
        low = [w.lower() for w in words]
        for n in (2, 3):
            for i in range(len(words) - n + 1):
                gram = low[i:i + n]
                if (gram[0] in STOPWORDS or gram[-1] in STOPWORDS or gram[0] in _SUBJECT_GENERIC
                        or gram[-1] in _SUBJECT_GENERIC or any(w in STOPWORDS and w != "of" for w in gram)
                        or _is_modifier(gram[-1])):
                    continue
                key = " ".join(w[:-1] if len(w) > 4 and w.endswith("s") else w for w in gram)
                counts[key] = counts.get(key, 0) + 1
                display.setdefault(key, " ".join(words[i:i + n]))
    best, best_score = "", 0.0
    for key, count in counts.items():
        score = count * (2.0 if key.count(" ") == 1 else 2.4)
        if count >= 2 and score > best_score:
            best, best_score = key, score
    return capitalise(display[best]) if best_score >= 4 else ""


_LEAD_CLAUSE = re.compile(
    r"^(?:as|while|although|though|with|since|because|despite|given|when|whereas|recently|however|"
    r"in recent years|nowadays|today)\b[^,]{0,150},\s*", re.I)
_LEAD_SUBJECT = re.compile(r"^(?:[Ww]e|[Oo]ur \w+|[Tt]his \w+)\s+(?:\w+ly\s+)?[a-z]+\s+(?:that\s+)?")


def subject_phrase(text: str, contribs: list[_Contribution], sentences: list[str]) -> str:
    """Short subject headline for abstracts that introduce no name."""
    for k, c in enumerate(contribs):
        phrase = _noun_phrase(c.obj, text)
        if phrase:
            return phrase
        if k == 0:  # the main statement is vague ("a similar idea"): the repeated topic says more
            phrase = keyphrase(text)
            if phrase:
                return phrase
    first = _LEAD_SUBJECT.sub("", sentences[0]) if sentences else text
    lead_in = _LEAD_CLAUSE.match(first)
    if lead_in:
        first = first[lead_in.end():]  # "As the capabilities of X grow, Y ..." -> "Y ..."
    return keyphrase(text) or _noun_phrase(first, text) or shorten(capitalise(first))


def _cap_words(words: list[str], max_words: int = SUBJECT_MAX_WORDS) -> list[str]:
    """At most `max_words`, cut before a preposition if possible; no dangling function word or modifier."""
    truncated = len(words) > max_words
    if truncated:
        if words[max_words].lower() in STOPWORDS:
            words = words[:max_words]
        else:
            cut = [i for i in range(2, max_words) if words[i].lower() in _PREPOSITIONS]
            words = words[:cut[-1]] if cut else words[:max_words]
    while words and (words[-1].lower() in STOPWORDS or truncated and len(words) > 2 and _is_modifier(words[-1])):
        words.pop()
    return words


def shorten(phrase: str, max_words: int = SUBJECT_MAX_WORDS) -> str:
    """First few words of a phrase, cut before a clause and never on a function word."""
    words = _SUBJECT_CUT.split(" " + phrase + " ", maxsplit=1)[0].split()
    while len(words) > 1 and words[0].lower() in ("on", "the", "a", "an", "towards", "toward"):
        words.pop(0)
    return capitalise(" ".join(_cap_words(words, max_words)))


_TITLE_SEGMENT = re.compile(r"[:?!]\s|\s[—–-]\s")
_TITLE_FILLER = frozenset("on the a an towards toward".split())


def title_subject(title: str) -> str:
    """A title without a name, cut to at most six words: 'Effect of Defection in Federated Learning'."""
    words = _TITLE_SEGMENT.split(title.rstrip("?!. "), maxsplit=1)[0].split()
    while len(words) > 2 and words[0].lower() in _TITLE_FILLER:
        words.pop(0)
    if len(words) > SUBJECT_MAX_WORDS:
        if words[SUBJECT_MAX_WORDS].lower() not in STOPWORDS:
            cut = [i for i in range(4, SUBJECT_MAX_WORDS) if words[i].lower() in STOPWORDS]
            words = words[:cut[-1]] if cut else words
        words = words[:SUBJECT_MAX_WORDS]
    while len(words) > 1 and words[-1].lower() in STOPWORDS:
        words.pop()
    return " ".join(words)
