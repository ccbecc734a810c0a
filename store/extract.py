"""Code URLs and headline numbers picked out of clean abstract text."""
from __future__ import annotations

import re

from .clean import URL_TRAIL
from .headline import fit_line
from .text import STOPWORDS

_URL = re.compile(r"(?:https?://|www\.)[^\s<>\"'`{}|\\^\[\]]+")
_BARE_URL = re.compile(
    r"(?<![\w@./])(?:github\.com|gitlab\.com|huggingface\.co|bitbucket\.org)/[^\s<>\"'`{}|\\^\[\]]+")


def extract_urls(text: str) -> list[str]:
    """URLs in the text, trailing punctuation and unbalanced brackets stripped, in order."""
    out: list[str] = []
    text = text or ""
    found = list(_URL.finditer(text)) if "http" in text or "www." in text else []
    if ".com/" in text or ".co/" in text or ".org/" in text:
        found += [m for m in _BARE_URL.finditer(text) if not any(f.start() <= m.start() < f.end() for f in found)]
    for m in sorted(found, key=lambda m: m.start()):
        url = m.group(0).rstrip(URL_TRAIL + ")")
        if url.count("(") > url.count(")"):
            url = url[:url.rfind("(")].rstrip(URL_TRAIL)
        if len(url) > 10 and url not in out:
            out.append(url)
    return out


_NUM = r"(?:\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)"
_DIGITS = re.compile(r"\d+")
# Anchored at the first digit (a scan for digits first is ~10x faster than searching this everywhere).
_NUMBER_AT = re.compile(
    rf"(?:{_NUM}(?:[KMBT]|\s?%|\s?×|x)?\s*(?:to|–|-)\s*"
    rf"(?:(?:up to|more than|over|nearly|almost|about|around)\s+)?(?=\d))?"
    rf"(?:(?P<pct>{_NUM}\s?%)|(?P<times>{_NUM}(?:\s?×|x))(?![\w×])|(?P<fold>{_NUM}-fold)"
    rf"|(?P<mag>{_NUM}(?:[KMBT]\b\)?|\s(?:thousand|million|billion|trillion)\b))"
    rf"|(?P<int>\d{{1,3}}(?:,\d{{3}})+|[1-9]\d{{3,}})(?![\w.%×\-]))")
_NON_SPACE = re.compile(r"\S+")
_AVERAGE_PAREN = re.compile(r"\s*\(([^()]{1,30})\)")
_NUM_WORD = re.compile(r"\s+([^\s,;:()]+)")
_NUM_STOP = frozenset("""
    for while whereas without with compared than when which that and or but using by over against
    relative versus vs. thereby thus as at under if via through from across among where after
    before since because so despite although respectively
""".split())
_NUM_QUANT = re.compile(
    r"(?:(?:up to|more than|less than|at least|at most|over|nearly|almost|about|around|approximately|"
    r"only|just|roughly|within|under|above|below|from)\s+)+$", re.I)
_NUM_VERBS = frozenset(
    "achieves reduces improves saves boosts yields gains cuts increases attains reaches outperforms".split())
_NUM_LEAD = re.compile(r"^(?:(?:a|an|the|and|or|of|by|to|in|that|is|are|which|while|with|e\.g\.|i\.e\.)\s+)+", re.I)


def extract_numbers(text: str, limit: int = 6) -> list[str]:
    """Headline numbers as short phrases: '7.1% improvement in R1@0.7 on Charades-STA', '2.3× ...'."""
    primary: list[str] = []
    secondary: list[str] = []
    covered = 0
    text = text or ""
    for dm in _DIGITS.finditer(text):
        pos = dm.start()
        if pos < covered:
            continue
        prev = text[pos - 1] if pos else " "
        lead = pos
        if prev == "(" and pos >= 2 and text[pos - 2] in "ΘO𝒪~≈":
            lead = pos - 2  # Θ(40K)
        elif prev.isalnum() or prev in "-.@/_,:+′'’":
            continue  # part of a name or identifier: Qwen2.5-VL, R1@0.7, PG-19
        m = _NUMBER_AT.match(text, pos)
        if not m:
            continue
        is_primary = bool(m.group("pct") or m.group("times") or m.group("fold"))
        if m.group("int") and 1900 <= int(m.group("int").replace(",", "")) <= 2100 and "," not in m.group("int"):
            continue  # a year
        end, right = _number_right(text, m.end())
        if not is_primary and not any(w.endswith("s") and w.isalpha() for w in right):
            continue  # "3B model" is a model size, "14.3K visual questions" a headline count
        start = min(_number_left(text, m.start(), len(right), covered), lead)
        phrase = fit_line(_NUM_LEAD.sub("", text[start:end].strip(" ,;:")), 90)
        covered = end
        if not any(w.isalpha() and w.lower() not in STOPWORDS for w in phrase.split()):
            continue  # a bare "75.31%" or "than 95%" says nothing without what it measures
        if phrase not in primary and phrase not in secondary:
            (primary if is_primary else secondary).append(phrase)
    return (primary + secondary)[:limit]


def _number_right(text: str, pos: int) -> tuple[int, list[str]]:
    """End offset and words of what a number measures, up to a clause boundary (six words at most)."""
    end = pos
    paren = _AVERAGE_PAREN.match(text, pos, pos + 40)
    if paren and any(w in paren.group(1) for w in ("average", "avg", "mean", "median")):
        end = paren.end()
    words: list[str] = []
    for wm in _NUM_WORD.finditer(text, end, min(len(text), end + 160)):
        if wm.start() != end:
            break
        word = wm.group(1)
        bare = word.rstrip(".!?")
        if (not bare or bare.lower() in _NUM_STOP or len(words) >= 6
                or len(words) >= 2 and bare.endswith("ing")):
            break
        words.append(bare)
        end = wm.start(1) + len(bare)
        if bare != word:
            break
    return end, words


def _number_left(text: str, pos: int, n_right: int, floor: int) -> int:
    """Start of a number's phrase: quantifiers ('up to'), a verb, or the clause when nothing follows."""
    clause = max(max(text.rfind(c, 0, pos) for c in ",;:()—") + 1, text.rfind(". ", 0, pos) + 2, floor)
    q = _NUM_QUANT.search(text, clause, pos)
    start = q.start() if q else pos
    before = text[clause:start].split()
    if n_right >= 2:
        return start
    if n_right == 1:
        if before and (before[-1].endswith("ing") or before[-1].lower() in _NUM_VERBS):
            return text.rfind(before[-1], clause, start)
        return start
    word_starts = [m.start() for m in _NON_SPACE.finditer(text, clause, pos)]
    return word_starts[-7] if len(word_starts) >= 7 else (word_starts[0] if word_starts else pos)
