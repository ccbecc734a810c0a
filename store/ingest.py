"""Files -> paper rows: formats, identity and dedupe, batched embedding.

Every file is read and validated before anything is written, so a bad file
writes nothing. JSONL, CSV/TSV and TXT are read line by line (up to
MAX_FILE_BYTES); JSON and BibTeX are parsed whole (up to MAX_WHOLE_FILE_BYTES).
Writing goes in chunks, each one transaction holding paper rows, identity keys
and vectors together: a killed ingest leaves complete chunks behind and a
re-run finishes the rest.
"""
from __future__ import annotations

import codecs
import csv
import hashlib
import itertools
import json
import os
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Callable, Iterable, Iterator

import numpy as np

from .base import Store
from .clean import clean_text
from .embed import Embedder, aspect_model
from .errors import IngestError
from .parse import parse_abstract
from .text import ASPECTS, aspect_texts, content_hash, short_hash

MIN_ABSTRACT_CHARS = 80
CHUNK = 256
_ID_ALPHABET = "abcdefghjkmnpqrstuvwxyz23456789"  # no 0/o, 1/l/i: easy to type


@dataclass
class Record:
    """One abstract as a source gave it."""

    abstract: str
    title: str | None = None
    id: str | None = None
    url: str | None = None
    authors: list[str] = field(default_factory=list)
    venue: str | None = None
    year: int | None = None
    keywords: list[str] = field(default_factory=list)
    source: str = ""
    line: int = 0

    def fingerprint(self) -> str:
        data = [self.abstract, self.title, self.id, self.url, self.authors, self.venue,
                self.year, self.keywords]
        return hashlib.sha1(json.dumps(data, ensure_ascii=False).encode()).hexdigest()[:24]


@dataclass
class IngestResult:
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    skipped: int = 0
    embedded: int = 0
    announced: int = 0  # papers a feed announced for the first time (store.sources.feeds)
    warnings: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return (f"{self.added} added, {self.updated} updated, {self.unchanged} unchanged, "
                f"{self.skipped} skipped")


# -- readers -------------------------------------------------------------------
# Limits a user can read in the README. JSONL, CSV/TSV and TXT are read line by line, so
# a large file costs memory for its records only; JSON and BibTeX are parsed whole.
MAX_FILE_BYTES = 2 * 1024**3          # one JSONL, CSV, TSV or TXT file
MAX_WHOLE_FILE_BYTES = 256 * 1024**2  # one JSON or BibTeX file
MAX_FIELD_CHARS = 1024**2             # one CSV field, and any abstract or title
_READ_CHUNK = 1024**2

_YEAR = re.compile(r"\b(19[5-9]\d|20\d\d)\b")

Lines = Iterable[tuple[int, str]]  # (physical line number from 1, the line with its newline)


def _numbered(source: str | Lines) -> Lines:
    """Text, or already numbered lines, as numbered lines."""
    if isinstance(source, str):
        return enumerate(source.splitlines(keepends=True), start=1)
    return source


def _size(n: float) -> str:
    for unit in ("bytes", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}".replace(".0 ", " ")
        n /= 1024
    return ""  # pragma: no cover


def _too_big(path, size: int, limit: int) -> IngestError:
    return IngestError(path, 0, f"is larger than the {_size(limit)} limit for one {path.suffix.lower()} file "
                       f"({size:,} bytes): split it into smaller files")


def _year_of(text: str | None) -> int | None:
    m = _YEAR.search(text or "")
    return int(m.group(1)) if m else None


def _venue_of(collection: str) -> str:
    """'ICLR 2026 Papers' -> 'ICLR 2026'."""
    return re.sub(r"(\s+(papers|abstracts|accepted|submissions|list))+\s*$", "", collection.strip(), flags=re.I)


def _as_list(value) -> list[str]:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [str(v).strip() for v in value if str(v).strip()]
    parts = re.split(r"\s*;\s*|\s+and\s+" if ";" in str(value) or " and " in str(value) else r"\s*,\s*",
                     str(value))
    return [p.strip() for p in parts if p.strip()]


def _int_or_none(value, path, line) -> int | None:
    if value in (None, ""):
        return None
    try:
        return int(str(value).strip()[:4])
    except ValueError:
        raise IngestError(path, line, f"year {value!r} is not a number") from None


def read_text(path: Path, data: str | Lines) -> list[Record]:
    """First line names the collection; abstracts are separated by blank lines."""
    # "\r", "\f" or "\u2028" end a line too, as str.splitlines() has always had them do here
    pieces = ((no, piece) for no, line in _numbered(data) for piece in (line.splitlines() or [""]))
    first = next(pieces, (1, ""))[1].strip()
    if not first:
        raise IngestError(path, 1, "the first line should name the collection (e.g. 'ICLR 2026 Papers')")
    if len(first) > 200:
        raise IngestError(path, 1, "the first line should name the collection, but it reads like an abstract")
    venue, year = _venue_of(first), _year_of(first)
    records, buf, start = [], [], 0
    for no, piece in itertools.chain(pieces, [(0, "")]):
        if piece.strip():
            if not buf:
                start = no
            buf.append(piece.strip())
        elif buf:
            records.append(Record(abstract=" ".join(buf), venue=venue, year=year, source=str(path), line=start))
            buf = []
    return records


_FIELD_ALIASES = {
    "title": ("title",),
    "abstract": ("abstract", "summary", "abstract_text"),
    "id": ("id", "paper_id", "doi", "arxiv_id", "openreview_id", "forum"),
    "url": ("url", "link", "pdf_url", "html_url"),
    "authors": ("authors", "author"),
    "venue": ("venue", "collection", "journal", "booktitle", "conference"),
    "year": ("year", "date", "published"),
    "keywords": ("keywords", "tags", "categories"),
}


def _record_from_mapping(obj: dict, path, line) -> Record:
    low = {str(k).strip().lower(): v for k, v in obj.items()}

    def get(name):
        for alias in _FIELD_ALIASES[name]:
            v = low.get(alias)
            if v not in (None, "", []):
                return v
        return None

    abstract = get("abstract")
    if isinstance(abstract, list):  # SciTLDR-style list of sentences
        abstract = " ".join(map(str, abstract))
    if not abstract or not str(abstract).strip():
        raise IngestError(path, line, "no 'abstract' field")
    title = get("title")
    for name, value in (("abstract", abstract), ("title", title)):
        if value is not None and len(str(value)) > MAX_FIELD_CHARS:
            raise IngestError(path, line, f"the {name} is longer than the {_size(MAX_FIELD_CHARS)} limit "
                              f"for one field ({_size(len(str(value)))})")
    return Record(
        abstract=str(abstract).strip(),
        title=str(title).strip() if title else None,
        id=str(get("id")).strip() if get("id") is not None else None,
        url=str(get("url")).strip() if get("url") else None,
        authors=_as_list(get("authors")),
        venue=str(get("venue")).strip() if get("venue") else None,
        year=_int_or_none(get("year"), path, line),
        keywords=_as_list(get("keywords")),
        source=str(path),
        line=line,
    )


def read_jsonl(path: Path, data: str | Lines) -> list[Record]:
    records = []
    for no, line in _numbered(data):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise IngestError(path, no, f"not valid JSON ({e.msg})") from None
        except RecursionError:
            raise IngestError(path, no, "JSON nested too deeply") from None
        if not isinstance(obj, dict):
            raise IngestError(path, no, "each line should be a JSON object")
        records.append(_record_from_mapping(obj, path, no))
    return records


def read_json(path: Path, data: str | Lines) -> list[Record]:
    if not isinstance(data, str):
        data = "".join(line for _, line in data)
    try:
        obj = json.loads(data)
    except json.JSONDecodeError as e:
        raise IngestError(path, e.lineno, f"not valid JSON ({e.msg})") from None
    except RecursionError:
        raise IngestError(path, 1, "JSON nested too deeply") from None
    items = obj if isinstance(obj, list) else obj.get("papers") if isinstance(obj, dict) else None
    if not isinstance(items, list):
        raise IngestError(path, 1, "expected a list of papers")
    return [_record_from_mapping(it, path, i + 1) for i, it in enumerate(items)
            if isinstance(it, dict) or _bad(path, i + 1)]


def _bad(path, line):
    raise IngestError(path, line, "each entry should be an object")


def _delimiter(path: Path, header: str) -> str:
    """Tab for .tsv; else whichever of , ; or tab the header row uses most (ties: comma)."""
    if path.suffix.lower() == ".tsv":
        return "\t"
    counts = {d: header.count(d) for d in (",", ";", "\t")}
    best = max(counts, key=lambda d: (counts[d], d == ","))
    return best if counts[best] else ","


def read_csv(path: Path, data: str | Lines) -> list[Record]:
    lines = iter(_numbered(data))
    at = [0]  # the physical line the csv reader last took: where an error is

    def feed():
        for no, line in lines:
            at[0] = no
            yield line

    fed = feed()
    first = next(fed, "")
    header_and_rest = itertools.chain([first], fed)
    old_limit = csv.field_size_limit(MAX_FIELD_CHARS)  # the default 128 KB turns a long abstract away
    try:
        reader = csv.DictReader(header_and_rest, delimiter=_delimiter(path, first))
        cols = {c.strip().lower() for c in (reader.fieldnames or [])}
        if not cols & set(_FIELD_ALIASES["abstract"]):
            raise IngestError(path, 1, "the header has no 'abstract' column")
        records, end = [], at[0]
        for row in reader:
            start, end = end + 1, at[0]
            if None in row:
                raise IngestError(path, start, "more values than header columns")
            if not any((v or "").strip() for v in row.values()):
                continue
            records.append(_record_from_mapping(row, path, start))
    except csv.Error as e:
        if "field larger than field limit" in str(e):
            raise IngestError(path, at[0], f"a field is longer than the {_size(MAX_FIELD_CHARS)} limit "
                              "for one field (a quote left open makes the rest of the file one field)") from None
        raise IngestError(path, at[0], f"bad CSV ({e})") from None
    finally:
        csv.field_size_limit(old_limit)
    return records


# BibTeX is scanned entry by entry: each scan resumes after the entry it parsed, so an '@'
# inside a value ("thanks to @handle (a, b)") is text, not the start of an entry.
_BIB_AT = re.compile(r"@\s*([A-Za-z][\w-]*)\s*([{(])")
_BIB_KEY = re.compile(r"[^,={}()\n]*")
_BIB_FIELD = re.compile(r"([^\s=,{}()\"#%@]+)\s*=\s*")
_BIB_BARE = re.compile(r"[^\s,{}()\"#%=]+")
_BIB_GAP = re.compile(r"(?:\s|,|%[^\n]*)*")
_BIB_SPACE = re.compile(r"\s*")
_BIB_BRACE = re.compile(r"[{}]")
_BIB_QUOTED = re.compile(r'[{}"]')
_BIB_PAREN = re.compile(r"[()]")


class _Lines:
    """Line numbers of positions in one text, counted forward from the last one asked."""

    def __init__(self, text: str):
        self.text, self.pos, self.line = text, 0, 1

    def at(self, pos: int) -> int:
        if pos < self.pos:
            self.pos, self.line = 0, 1
        self.line += self.text.count("\n", self.pos, pos)
        self.pos = pos
        return self.line


def _bib_close(s: str, i: int, pattern: re.Pattern, pair: str) -> int | None:
    """The index just past the delimiter that closes the one at s[i]; None if it never closes."""
    depth = 0
    for m in pattern.finditer(s, i):
        depth += 1 if m.group() == pair[0] else -1
        if depth == 0:
            return m.end()
    return None


# BibTeX's predefined macros; @string{name = value} adds a file's own.
_BIB_MONTHS = {m: m.capitalize() for m in
               ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")}


def _bib_value(s: str, i: int, path, line, macros: dict[str, str]) -> tuple[str, int]:
    """Read a braced, quoted or bare BibTeX value starting at s[i]; a bare name is a macro."""
    if i >= len(s):
        raise IngestError(path, line, "entry is not closed")
    if s[i] == "{":
        end = _bib_close(s, i, _BIB_BRACE, "{}")
        if end is None:
            raise IngestError(path, line, "unbalanced braces")
        return s[i + 1 : end - 1], end
    if s[i] == '"':
        depth = 0
        for m in _BIB_QUOTED.finditer(s, i + 1):
            c = m.group()
            if c == '"' and depth == 0:
                return s[i + 1 : m.start()], m.end()
            depth += {"{": 1, "}": -1}.get(c, 0)
        raise IngestError(path, line, "unterminated quoted value")
    m = _BIB_BARE.match(s, i)
    if not m:
        raise IngestError(path, line, f"unexpected {s[i]!r}")
    return macros.get(m.group(0).lower(), m.group(0)), m.end()  # an unknown name stays as written


def _bib_fields(s: str, i: int, path, line, lines: _Lines, macros: dict[str, str]) -> tuple[dict, int]:
    """The fields of the entry whose body starts at s[i] (after its key), and the index past its end."""
    fields = {}
    while True:
        i = _BIB_GAP.match(s, i).end()
        if i >= len(s):
            raise IngestError(path, line, "entry is not closed")
        if s[i] in "})":
            return fields, i + 1
        fm = _BIB_FIELD.match(s, i)
        if not fm:
            raise IngestError(path, lines.at(i), "expected 'field = value'")
        name, i = fm.group(1).lower(), fm.end()
        value, i = _bib_value(s, i, path, line, macros)
        while (j := _BIB_SPACE.match(s, i).end()) < len(s) and s[j] == "#":  # "a" # b # {c}
            more, i = _bib_value(s, _BIB_SPACE.match(s, j + 1).end(), path, line, macros)
            value += more
        fields[name] = re.sub(r"\s+", " ", value).strip()


def read_bibtex(path: Path, data: str | Lines) -> list[Record]:
    if not isinstance(data, str):
        data = "".join(line for _, line in data)
    records, lines, i, macros = [], _Lines(data), 0, dict(_BIB_MONTHS)
    while (at := data.find("@", i)) >= 0:
        m = _BIB_AT.match(data, at)
        if not m:  # text between entries is a comment in BibTeX, '@' and all
            i = at + 1
            continue
        kind, line = m.group(1).lower(), lines.at(at)
        if kind == "string":  # @string{neurips = "NeurIPS"}: later values may name it
            defined, i = _bib_fields(data, m.end(), path, line, lines, macros)
            macros.update(defined)
            continue
        if kind in ("comment", "preamble"):
            pattern, pair = (_BIB_BRACE, "{}") if m.group(2) == "{" else (_BIB_PAREN, "()")
            end = _bib_close(data, m.end() - 1, pattern, pair)
            if end is None and kind != "comment":
                raise IngestError(path, line, f"unbalanced {pair[0]} in @{kind}")
            i = end or m.end()
            continue
        key = _BIB_KEY.match(data, m.end())
        j = key.end()
        if j < len(data) and data[j] == "=":  # no key: the fields start at once
            j = m.end()
        elif j < len(data) and data[j] == ",":
            j += 1
        elif j < len(data) and data[j] in "})":
            i = j + 1  # an entry with a key and no fields
            continue
        else:
            raise IngestError(path, lines.at(j), "expected ',' after the entry's key")
        fields, i = _bib_fields(data, j, path, line, lines, macros)
        if not fields.get("abstract"):  # a plain reference: counted as skipped, not as nothing
            records.append(Record(abstract="", title=fields.get("title"), source=str(path), line=line))
            continue
        if "author" in fields:
            fields["author"] = [a.strip() for a in re.split(r"\s+and\s+", fields["author"])]
        if "eprint" in fields and "id" not in fields and "doi" not in fields:
            fields["id"] = "arXiv:" + fields["eprint"]
        records.append(_record_from_mapping(fields, path, line))
    if not any(r.abstract for r in records):
        raise IngestError(path, 1, "no BibTeX entries with an 'abstract' field")
    return records


READERS: dict[str, Callable[[Path, Lines], list[Record]]] = {
    ".txt": read_text, ".jsonl": read_jsonl, ".ndjson": read_jsonl, ".json": read_json,
    ".csv": read_csv, ".tsv": read_csv, ".bib": read_bibtex, ".bibtex": read_bibtex,
}
_READ_WHOLE = {read_json, read_bibtex}


def _file_lines(path: Path, f: BinaryIO, limit: int) -> Iterator[tuple[int, str]]:
    """The file's lines as text, numbered, read a chunk at a time; IngestError past `limit` bytes."""
    total, no, parts = 0, 0, []
    while True:
        chunk = f.readline(_READ_CHUNK)
        total += len(chunk)
        if total > limit:  # the file grew, or is no regular file
            raise _too_big(path, max(total, os.fstat(f.fileno()).st_size), limit)
        if chunk:
            parts.append(chunk)
            if not chunk.endswith(b"\n"):
                continue  # a line longer than one chunk
        if not parts:
            return
        line, parts = b"".join(parts), []
        no += 1
        if no == 1:
            line = line.removeprefix(codecs.BOM_UTF8)
        try:
            yield no, line.decode("utf-8")
        except UnicodeDecodeError:
            raise IngestError(path, no, "is not UTF-8 text") from None


def read_file(path: str | Path) -> list[Record]:
    """Parse a file of any known format into records; IngestError names file and line."""
    path = Path(path)
    reader = READERS.get(path.suffix.lower())
    if not path.exists():
        raise IngestError(path, 0, "no such file or folder")
    if reader is None:
        raise IngestError(path, 0, f"unknown format '{path.suffix or 'no extension'}' "
                          f"(known: {', '.join(sorted(READERS))})")
    limit = MAX_WHOLE_FILE_BYTES if reader in _READ_WHOLE else MAX_FILE_BYTES
    try:
        with path.open("rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size > limit:
                raise _too_big(path, size, limit)
            if b"\x00" in f.read(8192):
                raise IngestError(path, 0, "looks like a binary file, not text")
            f.seek(0)
            return reader(path, _file_lines(path, f, limit))
    except FileNotFoundError:
        raise IngestError(path, 0, "no such file") from None
    except IsADirectoryError:
        raise IngestError(path, 0, "is a directory") from None
    except OSError as e:
        raise IngestError(path, 0, e.strerror or str(e)) from None


def expand_paths(paths: Iterable[str | Path]) -> list[Path]:
    """Files named, and the known-format files inside directories named."""
    out = []
    for p in map(Path, paths):
        if p.is_dir():
            out += sorted(f for f in p.rglob("*") if f.suffix.lower() in READERS and f.is_file())
        else:
            out.append(p)
    return out


# -- identity -------------------------------------------------------------------
_NORM = re.compile(r"[^0-9a-z]+")
_EXT_PATTERNS = [
    (re.compile(r"\b(10\.\d{4,9}/[^\s\"<>]+)", re.I), "doi"),
    (re.compile(r"arxiv(?:\.org/(?:abs|pdf)/|:\s*)(\d{4}\.\d{4,5})", re.I), "arxiv"),
    (re.compile(r"^(\d{4}\.\d{4,5})(v\d+)?$"), "arxiv"),
    (re.compile(r"openreview\.net/(?:forum|pdf)\?id=([\w-]+)", re.I), "openreview"),
]


def normalize(text: str) -> str:
    text = unicodedata.normalize("NFKD", text).lower()
    return _NORM.sub(" ", text).strip()


def _h(text: str) -> str:
    return short_hash(text, 20)


def external_ids(rec: Record) -> list[str]:
    """DOI / arXiv / OpenReview ids from the id and url fields."""
    out = []
    for value in (rec.id, rec.url):
        if not value:
            continue
        for pattern, kind in _EXT_PATTERNS:
            m = pattern.search(value.strip())
            if m:
                out.append(f"ext:{kind}:{m.group(1).lower().rstrip('.')}")
    if rec.id and not out:
        out.append(f"ext:id:{rec.id.strip().lower()}")
    return list(dict.fromkeys(out))


def source_keys(rec: Record) -> list[str]:
    """src:<id exactly as the source gave it>: never matched on, kept so results can name it."""
    return [f"src:{rec.id.strip()}"] if rec.id and rec.id.strip() else []


def source_ids(keys: Iterable[str]) -> dict[str, str]:
    """A paper's source ids from its identity keys: {'id', 'arxiv', 'doi', 'openreview'} where known."""
    out: dict[str, str] = {}
    for key in sorted(keys):
        kind, _, value = key.partition(":")
        if kind == "src":
            out["id"] = value
        elif kind == "ext":
            sub, _, ident = value.partition(":")
            if sub == "id":
                out.setdefault("id", ident)
            elif sub in ("arxiv", "doi", "openreview"):
                out.setdefault(sub, ident)
    return out


def most_sentences(shared: int, of: int) -> bool:
    """Whether `shared` sentences in common make two abstracts one paper's, the shorter having `of`:
    at least two, and more than half of them (an edited abstract keeps most of its sentences)."""
    return shared >= 2 and 2 * shared > of


def sentence_keys(abstract_clean: str) -> list[str]:
    sents = [normalize(s) for s in re.split(r"(?<=[.!?])\s+", abstract_clean)]
    return [f"sent:{_h(s)}" for s in sents if len(s) > 40]


def identity_keys(rec: Record, clean: str) -> list[str]:
    keys = external_ids(rec)
    if rec.title and len(normalize(rec.title)) > 10:
        keys.append(f"title:{_h(normalize(rec.title))}")
    keys.append(f"abs:{_h(normalize(clean))}")
    return keys


def new_id(seed: str, taken: Callable[[str], bool]) -> str:
    """A 6-character id from a hash, lengthened on the rare collision."""
    digest = int(hashlib.sha256(seed.encode()).hexdigest(), 16)
    chars = []
    while digest:
        digest, r = divmod(digest, len(_ID_ALPHABET))
        chars.append(_ID_ALPHABET[r])
    for n in range(6, len(chars)):
        candidate = "".join(chars[:n])
        if not candidate.isdigit() and not taken(candidate):
            return candidate
    raise RuntimeError("could not mint an id")  # pragma: no cover


def embed_text(row: dict) -> str:
    """What gets embedded: the title (when real) and the clean abstract."""
    title = row.get("title")
    return f"{title}. {row['abstract']}" if title else row["abstract"]


# -- the pipeline ---------------------------------------------------------------
def _row_from(rec: Record, old: dict | None) -> dict:
    """Parse a record into a paper row, keeping old values the new source lacks."""
    parsed = parse_abstract(rec.abstract, title=clean_text(rec.title) if rec.title else None)
    new = {
        "collection": rec.venue,
        "year": rec.year,
        "title": clean_text(rec.title) if rec.title else None,
        "raw_title": rec.title,
        "raw": rec.abstract,
        "abstract": parsed.text,
        "url": rec.url,
        "authors": rec.authors or None,
        "keywords": rec.keywords or None,
        "source": rec.source,
    }
    row = dict(old or {})
    for k, v in new.items():
        if v not in (None, "", []) or k not in row:
            row[k] = v
    if old and old.get("title") and not new["title"]:
        # The richer source keeps naming the paper; reparse with its title.
        parsed = parse_abstract(row["raw"], title=old["title"])
    elif new["title"] is None and old and old.get("raw_title"):
        parsed = parse_abstract(row["raw"], title=clean_text(old["raw_title"]))
    row.update(short_name=parsed.short_name, headline=parsed.headline, abstract=parsed.text,
               code_urls=parsed.code_urls, numbers=parsed.numbers)
    for k in ("authors", "keywords"):
        row[k] = row.get(k) or []
    row["collection"] = row.get("collection") or ""
    row["content_hash"] = content_hash(embed_text(row))
    return row


def _comparable(row: dict) -> dict:
    keys = ("collection", "year", "title", "raw", "url", "authors", "keywords", "short_name",
            "headline", "abstract", "content_hash")
    out = {}
    for k in keys:
        v = row.get(k)
        out[k] = json.loads(v) if k in ("authors", "keywords") and isinstance(v, str) else v
    return out


def ingest_records(store: Store, records: list[Record], embedder: Embedder | None, *, now: float,
                   progress: Callable[[int], None] | None = None,
                   chunk: int = CHUNK) -> IngestResult:
    """Upsert records into the store, embedding new or changed text in the same chunk."""
    result = IngestResult()
    seen_records = store.record_keys()
    for start in range(0, len(records), chunk):
        batch = records[start : start + chunk]
        _ingest_chunk(store, batch, embedder, seen_records, result, now)
        if progress:
            progress(len(batch))
    if embedder is not None:
        # Papers left without a current vector (model changed, or an earlier
        # run had no embedder) are encoded once here.
        embed_missing(store, embedder, result=result)
    return result


def _ingest_chunk(store: Store, batch: list[Record], embedder: Embedder | None, seen_records: set,
                  result: IngestResult, now: float) -> None:
    rows: dict[str, dict] = {}  # paper id -> new row
    keys: list[tuple[str, str]] = []
    replace_keys: set[str] = set()
    local_keys: dict[str, str] = {}  # identity key -> paper id, within this chunk
    pending = []
    matched: list[tuple[Record, str]] = []
    for rec in batch:
        fp = f"rec:{rec.fingerprint()}"
        if fp in seen_records:
            result.unchanged += 1
            continue
        if len(rec.abstract.strip()) < MIN_ABSTRACT_CHARS:
            result.skipped += 1
            result.warnings.append(f"{rec.source}:{rec.line}: "
                                   f"{'abstract too short' if rec.abstract.strip() else 'no abstract'}, skipped")
            seen_records.add(fp)
            continue
        pending.append((rec, fp))
    if not pending:
        return
    clean = {id(rec): clean_text(rec.abstract) for rec, _ in pending}
    all_keys = []
    for rec, _ in pending:
        all_keys += identity_keys(rec, clean[id(rec)]) + sentence_keys(clean[id(rec)])
    known = store.lookup_keys(all_keys)
    old_rows = store.paper_rows({pid for ids in known.values() for pid in ids})
    for rec, fp in pending:
        ident = identity_keys(rec, clean[id(rec)])
        sents = sentence_keys(clean[id(rec)])
        pid = None
        for k in ident:
            hit = local_keys.get(k) or (known.get(k) or [None])[0]
            if hit:
                pid = hit
                break
        if pid is None and sents and not (rec.id or rec.title):
            # An edited abstract keeps most of its sentences. A record with its
            # own id or title that matched nothing is a different paper.
            votes: dict[str, int] = {}
            for k in sents:
                for hit in ([local_keys[k]] if k in local_keys else known.get(k, [])):
                    votes[hit] = votes.get(hit, 0) + 1
            # Only within the same collection, and only by a majority of sentences.
            venue = rec.venue or ""
            votes = {p: n for p, n in votes.items()
                     if ((rows.get(p) or old_rows.get(p) or {}).get("collection") or "") == venue}
            if votes:
                best, n = max(votes.items(), key=lambda kv: kv[1])
                if most_sentences(n, len(sents)):
                    pid = best
        old = rows.get(pid) or old_rows.get(pid) if pid else None
        row = _row_from(rec, old)
        if pid is None:
            pid = new_id(ident[-1], lambda c: c in rows or store.id_taken(c))
            row["id"] = pid
            result.added += 1
        elif old is not None and _comparable(old) == _comparable(row):
            result.unchanged += 1
        elif pid in rows:
            pass  # a second record of a paper first seen in this chunk: merged
        else:
            result.updated += 1
        row["id"] = pid
        rows[pid] = row
        replace_keys.add(pid)
        for k in ident + sents:
            local_keys[k] = pid
        keys.append((fp, pid))
        matched.append((rec, pid))
        seen_records.add(fp)
    # Keys are rebuilt from the final rows so an edit drops its stale sentences.
    for pid, row in rows.items():
        final = Record(abstract=row["raw"], title=row.get("raw_title"))
        keys += [(k, pid) for k in identity_keys(final, row["abstract"]) + sentence_keys(row["abstract"])]
    keys += [(k, pid) for rec, pid in matched for k in external_ids(rec) + source_keys(rec)]
    vectors = _vectors_for(store, list(rows.values()), embedder) if embedder else []
    result.embedded += len(vectors)
    if embedder:
        vectors += _aspects_for(store, list(rows.values()), embedder)
    store.write_papers(list(rows.values()), keys, replace_keys_for=replace_keys, embeddings=vectors,
                       now=now)


def _vectors_for(store: Store, rows: list[dict], embedder: Embedder) -> list[dict]:
    """Vectors for rows whose text is new to this model; cached text is reused, not re-encoded."""
    hashes = {r["content_hash"] for r in rows}
    cached = store.vectors_by_hash(embedder.name, hashes)
    todo = {}
    for r in rows:
        if r["content_hash"] not in cached:
            todo.setdefault(r["content_hash"], embed_text(r))
    if todo:
        mats = embedder.encode(list(todo.values()))
        cached.update(zip(todo.keys(), mats))
    return [{"paper_id": r["id"], "model": embedder.name, "vector": cached[r["content_hash"]],
             "content_hash": r["content_hash"]} for r in rows]


def _aspects_for(store: Store, rows: list[dict], embedder: Embedder) -> list[dict]:
    """Each row's aspect vectors (background, method, result; store.text.aspect_texts) as one
    flat (3 x d) vector under aspect_model(embedder.name), zeros for an absent aspect; "more
    like this" matches papers on them. Cached by content hash like the paper vectors."""
    model = aspect_model(embedder.name)
    cached = store.vectors_by_hash(model, {r["content_hash"] for r in rows})
    todo = {r["content_hash"]: aspect_texts(r["abstract"]) for r in rows if r["content_hash"] not in cached}
    texts = list(dict.fromkeys(t for parts in todo.values() for t in parts if t))
    if todo:
        encoded = dict(zip(texts, embedder.encode(texts))) if texts else {}
        for h, parts in todo.items():
            mat = np.zeros((len(ASPECTS), embedder.dim), dtype=np.float32)
            for i, t in enumerate(parts):
                if t:
                    mat[i] = encoded[t]
            cached[h] = mat.reshape(-1)
    return [{"paper_id": r["id"], "model": model, "vector": cached[r["content_hash"]],
             "content_hash": r["content_hash"]} for r in rows]


def embed_missing(store: Store, embedder: Embedder, *, result: IngestResult | None = None,
                  chunk: int = CHUNK) -> int:
    """Encode every paper lacking a current vector (or aspect vectors) for this model, one
    transaction per chunk; returns how many paper vectors were written."""
    done = 0
    for model, make in ((embedder.name, _vectors_for), (aspect_model(embedder.name), _aspects_for)):
        missing = store.papers_missing_embeddings(model)
        for start in range(0, len(missing), chunk):
            ids = [pid for pid, _ in missing[start : start + chunk]]
            rows = list(store.paper_rows(ids).values())
            vectors = make(store, rows, embedder)
            store.put_embeddings(vectors)
            if make is _vectors_for:
                done += len(vectors)
    if result is not None:
        result.embedded += done
    return done


def ingest_paths(store: Store, paths: Iterable[str | Path], embedder: Embedder | None, *, now: float,
                 progress_factory=None) -> IngestResult:
    """Read and validate every file first (a bad file writes nothing), then ingest."""
    files = expand_paths(paths)
    if not files:
        raise IngestError("(no files)", 0, "nothing to ingest")
    records: list[Record] = []
    for f in files:
        records += read_file(f)
    bar = progress_factory(len(records)) if progress_factory else None
    try:
        return ingest_records(store, records, embedder, now=now, progress=bar.update if bar else None)
    finally:
        if bar:
            bar.close()


def reparse(store: Store, embedder: Embedder | None, *, now: float) -> IngestResult:
    """Re-run the parser over every paper's raw text; re-embed what changed."""
    result = IngestResult()
    ids = [p.id for p in store.iter_papers()]
    for start in range(0, len(ids), CHUNK):
        old_rows = store.paper_rows(ids[start : start + CHUNK])
        rows = []
        for pid, old in old_rows.items():
            rec = Record(abstract=old["raw"], title=old.get("raw_title"))
            row = _row_from(rec, old)
            row["id"] = pid
            if _comparable(row) != _comparable(old):
                result.updated += 1
                rows.append(row)
            else:
                result.unchanged += 1
        vectors = (_vectors_for(store, rows, embedder) + _aspects_for(store, rows, embedder)
                   if (embedder and rows) else [])
        store.write_papers(rows, [], embeddings=vectors, now=now)
    return result


def bundled_sample_paths() -> list[Path]:
    """The ICLR 2026 abstracts shipped inside the package."""
    from importlib.resources import files

    root = files("store.samples")
    return sorted(Path(str(p)) for p in root.iterdir() if str(p).endswith(".txt"))
