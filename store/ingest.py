"""Files -> paper rows: formats, identity and dedupe, batched embedding.

A file is read whole and validated before anything is written, so a bad file
writes nothing. Writing goes in chunks, each one transaction holding paper
rows, identity keys and vectors together: a killed ingest leaves complete
chunks behind and a re-run finishes the rest.
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator

from .base import Store
from .embed import Embedder
from .errors import IngestError
from .parse import clean_text, parse_abstract
from .text import content_hash, short_hash

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
    warnings: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return (f"{self.added} added, {self.updated} updated, {self.unchanged} unchanged, "
                f"{self.skipped} skipped")


# -- readers -------------------------------------------------------------------
_YEAR = re.compile(r"\b(19[5-9]\d|20\d\d)\b")


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


def read_text(path: Path, data: str) -> list[Record]:
    """First line names the collection; abstracts are separated by blank lines."""
    lines = data.splitlines()
    if not lines or not lines[0].strip():
        raise IngestError(path, 1, "the first line should name the collection (e.g. 'ICLR 2026 Papers')")
    collection = lines[0].strip()
    if len(collection) > 200:
        raise IngestError(path, 1, "the first line should name the collection, but it reads like an abstract")
    venue, year = _venue_of(collection), _year_of(collection)
    records, buf, start = [], [], 0
    for no, line in enumerate(lines[1:] + [""], start=2):
        if line.strip():
            if not buf:
                start = no
            buf.append(line.strip())
        elif buf:
            records.append(Record(abstract=" ".join(buf), venue=venue, year=year,
                                  source=str(path), line=start))
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


def read_jsonl(path: Path, data: str) -> list[Record]:
    records = []
    for no, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise IngestError(path, no, f"not valid JSON ({e.msg})") from None
        if not isinstance(obj, dict):
            raise IngestError(path, no, "each line should be a JSON object")
        records.append(_record_from_mapping(obj, path, no))
    return records


def read_json(path: Path, data: str) -> list[Record]:
    try:
        obj = json.loads(data)
    except json.JSONDecodeError as e:
        raise IngestError(path, e.lineno, f"not valid JSON ({e.msg})") from None
    items = obj if isinstance(obj, list) else obj.get("papers") if isinstance(obj, dict) else None
    if not isinstance(items, list):
        raise IngestError(path, 1, "expected a list of papers")
    return [_record_from_mapping(it, path, i + 1) for i, it in enumerate(items)
            if isinstance(it, dict) or _bad(path, i + 1)]


def _bad(path, line):
    raise IngestError(path, line, "each entry should be an object")


def read_csv(path: Path, data: str) -> list[Record]:
    try:
        dialect = csv.Sniffer().sniff(data[:4096], delimiters=",;\t")
    except csv.Error:
        dialect = csv.excel
    reader = csv.DictReader(io.StringIO(data), dialect=dialect)
    cols = {c.strip().lower() for c in (reader.fieldnames or [])}
    if not cols & set(_FIELD_ALIASES["abstract"]):
        raise IngestError(path, 1, "the header has no 'abstract' column")
    records = []
    try:
        for row in reader:
            if None in row:
                raise IngestError(path, reader.line_num, "more values than header columns")
            if not any((v or "").strip() for v in row.values()):
                continue
            records.append(_record_from_mapping(row, path, reader.line_num))
    except csv.Error as e:
        raise IngestError(path, reader.line_num, f"bad CSV ({e})") from None
    return records


_BIB_ENTRY = re.compile(r"@(\w+)\s*[{(]", re.M)


def _bib_value(s: str, i: int, path, line) -> tuple[str, int]:
    """Read a braced, quoted or bare BibTeX value starting at s[i]."""
    if s[i] == "{":
        depth, j = 0, i
        while j < len(s):
            if s[j] == "{":
                depth += 1
            elif s[j] == "}":
                depth -= 1
                if depth == 0:
                    return s[i + 1 : j], j + 1
            j += 1
        raise IngestError(path, line, "unbalanced braces")
    if s[i] == '"':
        j, depth = i + 1, 0
        while j < len(s):
            if s[j] == "{":
                depth += 1
            elif s[j] == "}":
                depth -= 1
            elif s[j] == '"' and depth == 0:
                return s[i + 1 : j], j + 1
            j += 1
        raise IngestError(path, line, "unterminated quoted value")
    m = re.match(r"[\w.:-]+", s[i:])
    if not m:
        raise IngestError(path, line, f"unexpected {s[i]!r}")
    return m.group(0), i + m.end()


def read_bibtex(path: Path, data: str) -> list[Record]:
    records = []
    for m in _BIB_ENTRY.finditer(data):
        kind = m.group(1).lower()
        if kind in ("comment", "preamble", "string"):
            continue
        line = data.count("\n", 0, m.start()) + 1
        i = m.end()
        key_end = data.find(",", i)
        if key_end < 0:
            raise IngestError(path, line, "entry has no fields")
        fields, i = {}, key_end + 1
        while True:
            while i < len(data) and data[i] in " \t\r\n,":
                i += 1
            if i >= len(data):
                raise IngestError(path, line, "entry is not closed")
            if data[i] in "})":
                break
            fm = re.match(r"([\w-]+)\s*=\s*", data[i:])
            if not fm:
                raise IngestError(path, data.count("\n", 0, i) + 1, "expected 'field = value'")
            name, i = fm.group(1).lower(), i + fm.end()
            value, i = _bib_value(data, i, path, line)
            fields[name] = re.sub(r"\s+", " ", value).strip()
        if "abstract" not in fields:
            continue  # a plain reference with no abstract: nothing to read
        if "author" in fields:
            fields["author"] = [a.strip() for a in re.split(r"\s+and\s+", fields["author"])]
        if "eprint" in fields and "id" not in fields and "doi" not in fields:
            fields["id"] = "arXiv:" + fields["eprint"]
        records.append(_record_from_mapping(fields, path, line))
    if not records:
        raise IngestError(path, 1, "no BibTeX entries with an 'abstract' field")
    return records


READERS: dict[str, Callable[[Path, str], list[Record]]] = {
    ".txt": read_text, ".jsonl": read_jsonl, ".ndjson": read_jsonl, ".json": read_json,
    ".csv": read_csv, ".tsv": read_csv, ".bib": read_bibtex, ".bibtex": read_bibtex,
}


def read_file(path: str | Path) -> list[Record]:
    """Parse a file of any known format into records; IngestError names file and line."""
    path = Path(path)
    reader = READERS.get(path.suffix.lower())
    if reader is None:
        raise IngestError(path, 0, f"unknown format '{path.suffix or 'no extension'}' "
                          f"(known: {', '.join(sorted(READERS))})")
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise IngestError(path, 0, "no such file") from None
    except IsADirectoryError:
        raise IngestError(path, 0, "is a directory") from None
    except OSError as e:
        raise IngestError(path, 0, e.strerror or str(e)) from None
    if b"\x00" in raw[:8192]:
        raise IngestError(path, 0, "looks like a binary file, not text")
    try:
        data = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise IngestError(path, line, "is not UTF-8 text") from None
    return reader(path, data)


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
            result.warnings.append(f"{rec.source}:{rec.line}: abstract too short, skipped")
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
                if n >= 2 and 2 * n > len(sents):
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


def embed_missing(store: Store, embedder: Embedder, *, result: IngestResult | None = None,
                  chunk: int = CHUNK) -> int:
    """Encode every paper lacking a current vector for this model, one transaction per chunk."""
    missing = store.papers_missing_embeddings(embedder.name)
    done = 0
    for start in range(0, len(missing), chunk):
        ids = [pid for pid, _ in missing[start : start + chunk]]
        rows = list(store.paper_rows(ids).values())
        vectors = _vectors_for(store, rows, embedder)
        store.put_embeddings(vectors)
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
        vectors = _vectors_for(store, rows, embedder) if (embedder and rows) else []
        store.write_papers(rows, [], embeddings=vectors, now=now)
    return result


def bundled_sample_paths() -> list[Path]:
    """The ICLR 2026 abstracts shipped inside the package."""
    from importlib.resources import files

    root = files("store.samples")
    return sorted(Path(str(p)) for p in root.iterdir() if str(p).endswith(".txt"))
