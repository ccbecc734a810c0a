"""Ingest: formats, dedupe across them, updates on edit, bad files, limits, a killed ingest, fuzzed input files."""
from __future__ import annotations

import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from figures import scale
from store import HashingEmbedder, IngestError, bundled_sample_paths, ingest_paths, open_store, read_file
from store.ingest import MAX_FIELD_CHARS, MAX_FILE_BYTES, MAX_WHOLE_FILE_BYTES, ingest_records
from store.text import aspect_texts

ROOT = Path(__file__).resolve().parent.parent

ABSTRACT_A = (
    "Large language models often hallucinate when asked about rare entities. "
    "We introduce RareQA, a benchmark of 12,000 questions about long-tail entities drawn from Wikidata. "
    "Retrieval augmentation improves accuracy by 14.2% on RareQA but still lags far behind head entities. "
    "Code is available at https://github.com/example/rareqa."
)
ABSTRACT_B = (
    "Diffusion models generate images by iteratively denoising Gaussian noise. "
    "We propose FastDiff, a distillation scheme that reduces sampling to four steps. "
    "FastDiff matches the FID of the teacher on ImageNet 256 while being 12 times faster. "
    "We analyse why consistency losses fail at high guidance scales."
)


class CountingEmbedder(HashingEmbedder):
    """A weightless embedder that remembers how many texts it was asked to encode."""

    def __init__(self):
        super().__init__(dim=64, name="hashing-64")
        self.encoded = 0

    def encode(self, texts, *, progress=False):
        self.encoded += len(texts)
        return super().encode(texts)


@pytest.fixture
def emb():
    return CountingEmbedder()


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_bundled_seed_corpus_loads_38_abstracts_with_vectors(store, emb):
    result = ingest_paths(store, bundled_sample_paths(), emb, now=time.time())
    assert (result.added, result.skipped) == (38, 0)
    assert store.count_papers() == 38
    ids, mat = store.load_vectors(emb.name)
    assert len(ids) == 38 and mat.shape == (38, 64)
    assert np.allclose(np.linalg.norm(mat, axis=1), 1, atol=1e-5)
    papers = store.list_papers()
    assert {p.collection for p in papers} == {"ICLR 2026"}
    assert {p.year for p in papers} == {2026}
    # Ids are short, lowercase and unique: safe to type in Slack.
    assert len({p.id for p in papers}) == 38
    assert all(p.id.isalnum() and p.id.islower() and len(p.id) == 6 for p in papers)


def test_reingest_changes_nothing_and_encodes_nothing(store, emb):
    ingest_paths(store, bundled_sample_paths(), emb, now=time.time())
    before = emb.encoded
    version = store.papers_version()
    result = ingest_paths(store, bundled_sample_paths(), emb, now=time.time())
    assert (result.added, result.updated, result.unchanged) == (0, 0, 38)
    assert emb.encoded == before
    assert store.papers_version() == version


def test_other_collection_names_and_any_count(store, emb, tmp_path):
    f = write(tmp_path / "neurips.txt", f"NeurIPS 2025 Accepted Papers\n\n{ABSTRACT_A}\n\n\n{ABSTRACT_B}\n")
    assert ingest_paths(store, [f], emb, now=time.time()).added == 2
    assert {(p.collection, p.year) for p in store.list_papers()} == {("NeurIPS 2025", 2025)}
    one = write(tmp_path / "one.txt", "Workshop on Odd Ideas\n" + ABSTRACT_A.replace("RareQA", "OddQA") + "\n")
    assert ingest_paths(store, [one], emb, now=time.time()).added == 1
    assert store.list_papers(collection="Workshop on Odd Ideas")[0].year is None


def test_jsonl_csv_and_bibtex_load_with_metadata(store, emb, tmp_path):
    jl = write(tmp_path / "a.jsonl", json.dumps({
        "id": "https://openreview.net/forum?id=AbC123", "title": "RareQA: Questions about Rare Entities",
        "abstract": ABSTRACT_A, "authors": ["Ada Lovelace", "Alan Turing"], "venue": "ICLR 2024",
        "year": 2024, "keywords": ["benchmarks", "hallucination"]}) + "\n")
    csv_file = write(tmp_path / "b.csv", 'title,abstract,url,authors,year\n"FastDiff: Four-Step Diffusion",'
                     f'"{ABSTRACT_B}",https://arxiv.org/abs/2401.01234,"Grace Hopper; Edsger Dijkstra",2024\n')
    bib = write(tmp_path / "c.bib", """@inproceedings{kern2026,
  title = {{KERN}: Kernel Regression Networks},
  author = {Emmy Noether and Sofia Kovalevskaya},
  booktitle = {ICLR 2026},
  year = {2026},
  abstract = {Kernel methods are rarely used inside deep networks. We present KERN, a layer that performs
    kernel regression over learned prototypes, with 3.1\\% better accuracy on CIFAR-100 than a linear head.},
}
@article{noabstract, title={Plain reference}, year={1999}}
""")
    result = ingest_paths(store, [jl, csv_file, bib], emb, now=time.time())
    assert result.added == 3
    by_title = {p.title: p for p in store.list_papers()}
    rare = by_title["RareQA: Questions about Rare Entities"]
    assert rare.authors == ["Ada Lovelace", "Alan Turing"]
    assert rare.keywords == ["benchmarks", "hallucination"]
    assert (rare.collection, rare.year) == ("ICLR 2024", 2024)
    assert "https://github.com/example/rareqa" in rare.code_urls
    fast = by_title["FastDiff: Four-Step Diffusion"]
    assert fast.authors == ["Grace Hopper", "Edsger Dijkstra"]
    assert fast.url == "https://arxiv.org/abs/2401.01234"
    kern = next(p for p in store.list_papers() if "KERN" in (p.title or ""))
    assert kern.authors == ["Emmy Noether", "Sofia Kovalevskaya"]
    assert "\\" not in kern.abstract and "3.1%" in kern.abstract


def test_same_paper_across_formats_is_one_paper(store, emb, tmp_path):
    txt = write(tmp_path / "seed.txt", f"ICLR 2024 Papers\n\n{ABSTRACT_A}\n")
    ingest_paths(store, [txt], emb, now=time.time())
    (only,) = store.list_papers()
    # The same abstract from a richer export: merged into the same row, which gains a title.
    jl = write(tmp_path / "rich.jsonl", json.dumps({
        "title": "RareQA: Questions about Rare Entities", "abstract": "  " + ABSTRACT_A + " ",
        "url": "https://arxiv.org/abs/2402.00001"}) + "\n")
    result = ingest_paths(store, [jl], emb, now=time.time())
    assert (result.added, result.updated) == (0, 1)
    (merged,) = store.list_papers()
    assert merged.id == only.id
    assert merged.title == "RareQA: Questions about Rare Entities"
    assert merged.collection == "ICLR 2024"  # kept from the first source
    # Same arXiv id with a reworded abstract, and same title with other text: still one paper.
    csv_file = write(tmp_path / "arxiv.csv", "id,title,abstract\n"
                     f'2402.00001,"Something else entirely","{ABSTRACT_A.upper()} Extra sentence here."\n')
    ingest_paths(store, [csv_file], emb, now=time.time())
    jl2 = write(tmp_path / "title.jsonl", json.dumps({
        "title": "rareqa:  questions about RARE entities!", "abstract": ABSTRACT_B}) + "\n")
    ingest_paths(store, [jl2], emb, now=time.time())
    assert store.count_papers() == 1


def test_duplicates_inside_one_file_are_one_paper(store, emb, tmp_path):
    f = write(tmp_path / "dup.txt", f"Dups\n\n{ABSTRACT_A}\n\n{ABSTRACT_A}\n\n{ABSTRACT_B}\n")
    result = ingest_paths(store, [f], emb, now=time.time())
    assert store.count_papers() == 2
    assert result.added == 2


def test_edited_abstract_updates_its_row_and_reembeds(store, emb, tmp_path):
    f = write(tmp_path / "v1.txt", f"ICLR 2026 Papers\n\n{ABSTRACT_A}\n\n{ABSTRACT_B}\n")
    ingest_paths(store, [f], emb, now=time.time())
    (old,) = [p for p in store.list_papers() if p.abstract.startswith("Large language models often")]
    old_vec = store.get_vector(old.id, emb.name).copy()
    edited = ABSTRACT_A.replace("by 14.2% on RareQA", "by 17.5% on RareQA-v2")
    write(f, f"ICLR 2026 Papers\n\n{edited}\n\n{ABSTRACT_B}\n")
    before = emb.encoded
    result = ingest_paths(store, [f], emb, now=time.time())
    assert (result.added, result.updated, result.unchanged) == (0, 1, 1)
    new = store.get_paper(old.id)
    # only the edited paper is re-encoded: its text and its aspects (for "more like this")
    assert emb.encoded - before == 1 + sum(1 for t in aspect_texts(new.abstract) if t)
    assert "17.5%" in new.abstract and "14.2%" not in new.abstract
    assert not np.allclose(store.get_vector(old.id, emb.name), old_vec)
    assert store.count_papers() == 2
    assert store.papers_missing_embeddings(emb.name) == []


def test_changing_the_model_reencodes_once(store, tmp_path):
    f = write(tmp_path / "x.txt", f"C\n\n{ABSTRACT_A}\n\n{ABSTRACT_B}\n")
    ingest_paths(store, [f], CountingEmbedder(), now=time.time())
    other = HashingEmbedder(dim=32, name="hashing-32")
    ingest_paths(store, [f], other, now=time.time())
    assert store.load_vectors("hashing-32")[1].shape == (2, 32)
    assert store.load_vectors("hashing-64")[1].shape == (2, 64)


@pytest.mark.parametrize("name,content,where", [
    ("bad.jsonl", json.dumps({"title": "t", "abstract": ABSTRACT_A}) + "\n{not json\n", "bad.jsonl:2"),
    ("noabs.jsonl", json.dumps({"title": "t", "abstract": ABSTRACT_A}) + "\n" + json.dumps({"title": "x"}) + "\n",
     "noabs.jsonl:2"),
    ("nocol.csv", "title,summary_text\nx,y\n", "nocol.csv:1"),
    ("bad.bib", "@article{x, title={T}, abstract={unclosed \n", "bad.bib"),
    ("notes.docx", "whatever", "unknown format"),
    ("empty.txt", "", "empty.txt:1"),
    ("year.csv", f'title,abstract,year\nA,"{ABSTRACT_A}",soon\n', "year.csv:2"),
])
def test_bad_files_name_file_and_line_and_write_nothing(store, emb, tmp_path, name, content, where):
    good = write(tmp_path / "good.txt", f"Good\n\n{ABSTRACT_B}\n")
    bad = write(tmp_path / name, content)
    with pytest.raises(IngestError) as err:
        ingest_paths(store, [good, bad], emb, now=time.time())
    assert where in str(err.value)
    assert store.count_papers() == 0


def test_binary_and_non_utf8_files_are_refused(tmp_path):
    (tmp_path / "x.txt").write_bytes(b"Title\n\n\x00\x01\x02")
    with pytest.raises(IngestError, match="binary"):
        read_file(tmp_path / "x.txt")
    (tmp_path / "y.txt").write_bytes("Title\n\ncaf\xe9".encode("latin-1"))
    with pytest.raises(IngestError, match="y.txt:3: is not UTF-8"):
        read_file(tmp_path / "y.txt")


BIB_WITH_AT = """@inproceedings{kern2026,
  title = {{KERN}: Kernel Regression Networks},
  author = {Emmy Noether},
  abstract = {Kernel methods are rarely used inside deep networks. We thank @handle (a, b) and @misc{x} for
    discussions. We present KERN, a layer that performs kernel regression over learned prototypes.},
}
@article{fastdiff2024,
  title = "FastDiff: Four-Step Diffusion",
  abstract = {%s},
}
""" % ABSTRACT_B


def test_an_at_sign_inside_a_bibtex_abstract_is_text_not_a_new_entry(store, emb, tmp_path):
    bib = write(tmp_path / "at.bib", BIB_WITH_AT)
    result = ingest_paths(store, [bib], emb, now=time.time())
    assert result.added == 2
    kern = next(r for r in read_file(bib) if "KERN" in r.title)
    assert "We thank @handle (a, b) and @misc{x} for discussions." in kern.abstract
    assert [r.line for r in read_file(bib)] == [1, 7]
    # A real mistake after it is still blamed on its own line.
    broken = write(tmp_path / "broken.bib", BIB_WITH_AT + "@article{third,\n  title = {Third},\n  oops\n}\n")
    with pytest.raises(IngestError) as err:
        read_file(broken)
    assert str(err.value) == f"{broken}:13: expected 'field = value'"


def test_a_csv_abstract_over_128_kb_is_read_and_one_over_1_mb_names_its_own_line(store, emb, tmp_path):
    long = " ".join([ABSTRACT_B] * 700)  # about 200 KB: csv's default limit is 128 KB
    f = write(tmp_path / "long.csv", f'title,abstract\nRareQA,"{ABSTRACT_A}"\nFastDiff,"{long}"\n')
    assert ingest_paths(store, [f], emb, now=time.time()).added == 2
    assert len(max(read_file(f), key=lambda r: len(r.abstract)).abstract) == len(long)

    huge = "x" * (MAX_FIELD_CHARS + 1)
    too_long = write(tmp_path / "huge.csv", f'title,abstract\nRareQA,"{ABSTRACT_A}"\nHuge,"{huge}"\n')
    with pytest.raises(IngestError) as err:
        ingest_paths(store, [too_long], emb, now=time.time())
    assert str(err.value).startswith(f"{too_long}:3: a field is longer than the 1 MB limit for one field")
    # A quoted field over several lines: the line named is inside the field, not the record before it.
    multi = write(tmp_path / "multi.csv", f'title,abstract\nRareQA,"{ABSTRACT_A}"\nHuge,"start\nmore\n{huge}"\n')
    with pytest.raises(IngestError, match=r"multi.csv:5: a field is longer"):
        read_file(multi)


@pytest.mark.slow  # starts a process
@pytest.mark.parametrize("name,limit,stated", [("huge.jsonl", MAX_FILE_BYTES, "2 GB"),
                                               ("huge.bib", MAX_WHOLE_FILE_BYTES, "256 MB")])
def test_a_file_over_the_size_limit_is_refused_before_it_is_read(tmp_path, name, limit, stated):
    big = tmp_path / name
    with big.open("wb") as f:
        f.truncate(limit + 1)  # sparse: no disk used, and nothing to read if the limit is checked first
    started = time.monotonic()
    with pytest.raises(IngestError) as err:
        read_file(big)
    assert str(err.value) == (f"{big}: is larger than the {stated} limit for one {big.suffix} file "
                              f"({limit + 1:,} bytes): split it into smaller files")
    assert time.monotonic() - started < 1.0
    out = run_cli("--db", str(tmp_path / "cli.db"), "ingest", str(big))
    assert out.returncode == 1 and f"limit for one {big.suffix} file" in out.stderr and "Traceback" not in out.stderr


def _peak_bytes_reading(path: Path) -> tuple[int, list]:
    tracemalloc.start()
    try:
        records = read_file(path)
        return tracemalloc.get_traced_memory()[1], records
    finally:
        tracemalloc.stop()


def test_a_large_export_is_read_line_by_line_not_held_whole(tmp_path):
    """A 30 MB JSONL or CSV export with the full text beside each abstract costs memory for the abstracts only."""
    full_text = "Body text of the paper. " * 3000  # 72 KB a paper, ignored
    n = 400
    jl = tmp_path / "export.jsonl"
    with jl.open("w") as f:
        for i in range(n):
            f.write(json.dumps({"id": f"p{i}", "abstract": f"{ABSTRACT_A} ({i})", "full_text": full_text}) + "\n")
    cs = tmp_path / "export.csv"
    with cs.open("w") as f:
        f.write("id,abstract,full_text\n")
        for i in range(n):
            f.write(f'p{i},"{ABSTRACT_A} ({i})","{full_text}"\n')
    for path in (jl, cs):
        size = path.stat().st_size
        peak, records = _peak_bytes_reading(path)
        assert len(records) == n and records[-1].abstract.endswith(f"({n - 1})")
        assert peak < size / 4, (path.name, peak, size)
    txt = tmp_path / "many.txt"
    txt.write_text("Big Collection 2025\n\n" + "".join(f"{ABSTRACT_B} ({i})\n\n" for i in range(60_000)))
    peak, records = _peak_bytes_reading(txt)
    assert len(records) == 60_000
    assert peak < 3 * txt.stat().st_size  # the records themselves, not the file three times over


def run_cli(*args, env=None, **kw):
    full_env = {**os.environ, "PAPERCLUB_MODEL": "hashing-64", **(env or {})}
    return subprocess.run([sys.executable, "-m", "bot", *args], capture_output=True, text=True,
                          env=full_env, cwd=kw.pop("cwd", ROOT), timeout=kw.pop("timeout", 120), **kw)


@pytest.mark.slow  # starts a process
def test_cli_ingest_prints_counts_and_errors_in_one_line(tmp_path):
    db = str(tmp_path / "cli.db")
    out = run_cli("--db", db, "ingest", *map(str, bundled_sample_paths()))
    assert out.returncode == 0, out.stderr
    assert "38 added, 0 updated, 0 unchanged, 0 skipped" in out.stdout
    out = run_cli("--db", db, "ingest", str(tmp_path / "missing.jsonl"))
    assert out.returncode != 0
    assert "missing.jsonl: no such file" in out.stderr
    assert "Traceback" not in out.stderr
    listing = run_cli("--db", db, "papers")
    assert len(listing.stdout.strip().splitlines()) == 38
    first_id = listing.stdout.split()[0]
    shown = run_cli("--db", db, "show", first_id)
    assert shown.returncode == 0 and first_id in shown.stdout


def synthetic_jsonl(path: Path, n: int, seed: int = 0) -> Path:
    """n distinct abstracts recombined from the seed sentences."""
    rng = random.Random(seed)
    sents = []
    for p in bundled_sample_paths():
        for block in p.read_text().split("\n\n")[1:]:
            sents += [s.strip() + "." for s in block.split(". ") if len(s) > 40]
    with path.open("w") as f:
        for i in range(n):
            body = " ".join(rng.sample(sents, 5))
            f.write(json.dumps({"id": f"syn-{i}", "title": f"Synthetic paper {i}", "abstract": body}) + "\n")
    return path


@pytest.mark.slow  # starts a process
def test_killed_ingest_leaves_a_consistent_db_that_a_rerun_completes(tmp_path):
    data = synthetic_jsonl(tmp_path / "big.jsonl", 6000)
    db = tmp_path / "crash.db"
    env = {**os.environ, "PAPERCLUB_MODEL": "hashing-64"}
    proc = subprocess.Popen([sys.executable, "-m", "bot", "--db", str(db), "ingest", str(data)],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 60
    count = 0
    while time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
        try:
            with sqlite3.connect(db, timeout=5) as conn:
                count = conn.execute("select count(*) from papers").fetchone()[0]
        except sqlite3.OperationalError:
            continue  # not created yet
        if count > 0:
            break
    assert proc.poll() is None, "ingest finished before it could be killed: make the file bigger"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    s = open_store(db)
    assert s.integrity_ok()
    killed_at = s.count_papers()
    assert 0 < killed_at < 6000
    # Every stored paper has its vector: chunks are all-or-nothing.
    assert s.papers_missing_embeddings("hashing-64") == []
    assert len(s.load_vectors("hashing-64")[0]) == killed_at
    out = run_cli("--db", str(db), "ingest", str(data))
    assert out.returncode == 0, out.stderr
    assert f"{6000 - killed_at} added, 0 updated, {killed_at} unchanged" in out.stdout
    assert s.count_papers() == 6000
    assert s.integrity_ok()


# -- fuzzing the input files ----------------------------------------------------------------------------
# Text full of what breaks hand-written readers: '@' and braces (BibTeX), quotes, delimiters and
# line ends of every kind (CSV), JSON's own specials, and now and then a field far past csv's 128 KB.
INGEST_FUZZ_CASES = scale("INGEST_FUZZ_CASES", 120)
_NASTY_CHARS = "@{}\"',;\t\n\r()#%=\\ éü–\u2028\x85abcXYZ019."
_NASTY_BITS = ["@handle (a, b)", "@misc{x}", "@article{", "}", "{", '"', '""', "\\{", "#", "%", "=", "abstract = ",
               ",\n", "\r\n", "\n\n", "\u2028", "\ufeff", "{\\'e}", "$x$", "&amp;"]
nasty_text = st.lists(st.one_of(st.text(_NASTY_CHARS, max_size=12), st.sampled_from(_NASTY_BITS),
                                st.sampled_from(ABSTRACT_A.split())), max_size=40).map("".join)
FORMATS = [".bib", ".csv", ".tsv", ".jsonl", ".json", ".txt"]


def _huge(n: int) -> str:
    return ("long field with @ and {braces} " * (n // 30 + 1))[:n]


def _check_error(err: IngestError, path: Path, content: str) -> None:
    """What a user sees: 'file:line: what', the line one of the file's own."""
    assert err.path == str(path) and err.message.strip(), str(err)
    assert 1 <= err.line <= content.count("\n") + 1, (str(err), content.count("\n") + 1)
    assert str(err) == f"{path}:{err.line}: {err.message}"


def _read_or_explain(path: Path, content: str, outcomes: dict) -> list:
    try:
        records = read_file(path)
    except IngestError as err:
        _check_error(err, path, content)
        outcomes["error"] = outcomes.get("error", 0) + 1
        return []
    assert all(1 <= r.line <= content.count("\n") + 1 for r in records)
    outcomes["read" if records else "empty"] = outcomes.get("read" if records else "empty", 0) + 1
    return records


def test_random_bib_csv_jsonl_text_is_ingested_or_named_by_file_and_line(tmp_path):
    """Whatever is in the file: records, or one 'file:line: what' error; never a crash or a traceback."""
    emb = HashingEmbedder(dim=16, name="hashing-16")
    cases, outcomes = 0, {}

    @hsettings(max_examples=INGEST_FUZZ_CASES, deadline=None, database=None, derandomize=True,
               suppress_health_check=list(HealthCheck))
    @given(ext=st.sampled_from(FORMATS), body=nasty_text, header=st.sampled_from(
        ["", "title,abstract\n", "title\tabstract\n", "ICLR 2026 Papers\n", '{"abstract": "', "@article{k,\n abstract = {",
         "[", "abstract;title\n"]), big=st.integers(0, 9), mutate=st.booleans(),
           cuts=st.lists(st.tuples(st.floats(0, 1), st.sampled_from(_NASTY_BITS)), max_size=4))
    def one_file(ext, body, header, big, mutate, cuts):
        nonlocal cases
        if mutate:  # a good file with a few nasty bits dropped in anywhere
            content = _good_text(ext, [("A title", ABSTRACT_A), ("Other", body + " " + ABSTRACT_B)])
            for where, bit in cuts:
                at = int(where * len(content))
                content = content[:at] + bit + content[at:]
        else:
            content = header + body
        content += _huge(140_000) if big == 0 else ""
        path = tmp_path / f"fuzz{cases}{ext}"
        path.write_text(content, encoding="utf-8", newline="")
        records = _read_or_explain(path, content, outcomes)
        if records and cases % 10 == 0:  # now and then all the way into a store
            store = open_store(tmp_path / f"fuzz{cases}.db")
            try:
                result = ingest_records(store, records, emb, now=time.time())
                assert result.added + result.unchanged + result.skipped + result.updated >= 1
            finally:
                store.close()
        cases += 1

    one_file()
    assert cases >= INGEST_FUZZ_CASES * 0.9
    # both sides were tried: files that read, and files refused with a line
    assert outcomes.get("read", 0) >= INGEST_FUZZ_CASES // 10 and outcomes.get("error", 0) >= INGEST_FUZZ_CASES // 10, outcomes


def _good_text(ext: str, papers: list[tuple[str, str]]) -> str:
    """A well-formed file of this format holding these (title, abstract) pairs."""
    import csv
    import io

    if ext == ".jsonl":
        return "".join(json.dumps({"title": t, "abstract": a}, ensure_ascii=False) + "\n" for t, a in papers)
    if ext == ".json":
        return json.dumps([{"title": t, "abstract": a} for t, a in papers], ensure_ascii=False, indent=1)
    if ext in (".csv", ".tsv"):
        out = io.StringIO()
        writer = csv.writer(out, delimiter="\t" if ext == ".tsv" else ",")
        writer.writerow(["title", "abstract"])
        writer.writerows(papers)
        return out.getvalue()
    if ext == ".txt":
        return "Fuzz Papers 2025\n\n" + "".join(f"{a}\n\n" for _, a in papers)
    return "".join(f"@misc{{k{i},\n  title = {{{t}}},\n  abstract = {{{a}}},\n}}\n\n" for i, (t, a) in enumerate(papers))


def _write_good(path: Path, papers: list[tuple[str, str]]) -> None:
    path.write_text(_good_text(path.suffix, papers), encoding="utf-8", newline="")


def _balanced(text: str) -> str:
    """The text with its braces paired, as a BibTeX value must have them (an unopened '}' goes)."""
    out, depth = [], 0
    for c in text:
        if c == "}" and not depth:
            continue
        depth += {"{": 1, "}": -1}.get(c, 0)
        out.append(c)
    return "".join(out) + "}" * depth


@pytest.mark.parametrize("ext", [".bib", ".csv", ".tsv", ".jsonl", ".json"])
def test_good_files_with_nasty_text_are_read_back_exactly(tmp_path, ext):
    """A well-formed file is never refused, whatever its text: '@', quotes, braces, line ends, 200 KB fields."""
    cases = 0

    @hsettings(max_examples=max(10, INGEST_FUZZ_CASES // 4), deadline=None, database=None, derandomize=True,
               suppress_health_check=list(HealthCheck))
    @given(papers=st.lists(st.tuples(nasty_text, nasty_text, st.integers(0, 9)), min_size=1, max_size=4))
    def one_file(papers):
        nonlocal cases
        rows = []
        for title, abstract, big in papers:
            abstract = "Text " + abstract + (_huge(200_000) if big == 0 else "")
            if ext == ".bib":
                title, abstract = _balanced(title), _balanced(abstract)
            rows.append((title, abstract))
        path = tmp_path / f"good{cases}{ext}"
        _write_good(path, rows)
        cases += 1
        records = read_file(path)  # no IngestError: the file is good
        def norm(s):
            return re.sub(r"\s+", " ", s).strip() if ext == ".bib" else s.strip()
        assert [r.abstract for r in records] == [norm(a) for _, a in rows]
        assert [r.title or None for r in records] == [norm(t) or None for t, _ in rows]

    one_file()


def test_bibtex_string_macros_and_concatenation_expand_and_references_count_as_skipped(store, emb, tmp_path):
    bib = write(tmp_path / "macros.bib", """@string{neurips = "NeurIPS"}
@String(venue2 = {ICLR})
@inproceedings{kern2026,
  title = {KERN: kernels for everyone},
  booktitle = neurips # " 27",
  month = dec,
  abstract = {We propose KERN, a method that learns kernels for every task from a handful of examples, and show it matches tuned baselines.},
}
@article{plain, title = {A reference without an abstract}, journal = venue2}
""")
    [kern, plain] = read_file(bib)
    assert kern.venue == "NeurIPS 27"  # not "neurips 27"
    assert plain.abstract == "" and plain.line == 9
    result = ingest_paths(store, [bib], emb, now=time.time())
    assert (result.added, result.skipped) == (1, 1)
    assert any("macros.bib:9: no abstract, skipped" in w for w in result.warnings)
