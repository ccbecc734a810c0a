"""Abstract text -> clean Unicode text, short name, headline, code URLs and numbers.

`parse_abstract` runs the one pipeline: clean the LaTeX and Markdown (store/clean.py), name what
the paper introduces (store/names.py), write a one-line headline (store/headline.py) and pick out
code URLs and headline numbers (store/extract.py). Pure functions, well under 1 ms per abstract.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .clean import clean_markup, clean_text, resolve_macros, scrub
from .extract import extract_numbers, extract_urls
from .headline import (
    HEADLINE_MAX, capitalise, contributions, fit_line, keyphrase, lower_first, shorten, subject_phrase,
    title_subject, write_headline,
)
from .names import find_name, name_in_title, subject_starts
from .text import sentence_spans

__all__ = ["Parsed", "parse_abstract"]


@dataclass
class Parsed:
    text: str  # clean Unicode abstract: no backslash command, no `$`
    short_name: str  # SPIKE, CoVoGAN, or a short subject headline
    headline: str  # one line, <= 100 characters, what the paper does
    code_urls: list[str] = field(default_factory=list)
    numbers: list[str] = field(default_factory=list)  # headline numbers ("+7.1% R1@0.7 on Charades-STA")


def parse_abstract(raw: str, title: str | None = None) -> Parsed:
    """Clean an abstract and derive its short name, headline, code URLs and headline numbers."""
    clean_title = clean_text(title) if title else ""
    title_name = name_in_title(clean_title) if clean_title else None
    cleaned = clean_markup(raw)
    text = cleaned.text
    if cleaned.macros:
        text = resolve_macros(text, cleaned.macros, cleaned.acronyms, title_name)
    text = scrub(text)
    spans = sentence_spans(text)
    sentences = [text[a:b] for a, b in spans]
    subjects = subject_starts(text)
    name = find_name(text, spans, cleaned.emph, cleaned.acronyms, subjects)
    contribs = contributions(text, spans, subjects)
    if clean_title:
        headline = fit_line(clean_title)
        short = title_name or (name.name if name else title_subject(clean_title))
    else:
        short = name.name if name else subject_phrase(text, contribs, sentences)
        # with a name, the last resort is the name and the abstract's repeated topic ("G-NLL: uncertainty estimation")
        topic = lower_first(keyphrase(text)) if name else capitalise(short)
        headline = write_headline(name, contribs, sentences, fallback=topic)
    short = scrub(capitalise(short)) or scrub(shorten(headline)) or "Untitled"
    headline = scrub(headline) or short[:HEADLINE_MAX]
    return Parsed(text=text, short_name=short, headline=headline,
                  code_urls=extract_urls(text), numbers=[scrub(n) for n in extract_numbers(text)])
