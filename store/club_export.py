"""The reading group's record as others read it: its reading list as BibTeX and CSV files
(`/paper club export`) and a map of what it read (`/paper club map`). Pure over the Store's rows."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    from .base import Store


# -- the reading list as files ----------------------------------------------------------
_BIB_ESCAPES = {"{": r"\textbraceleft{}", "}": r"\textbraceright{}", "\\": r"\textbackslash{}"}


def _bib(text: str) -> str:
    """A BibTeX field value that says what the text says and cannot end its field.

    BibTeX ends a braced value at the brace that balances its opening one, backslash or not, so
    a brace the text does not balance would close the field (and let the rest become new fields).
    Balanced pairs stay (they protect capitals: {BERT}); an unbalanced brace and a backslash are
    written as the LaTeX commands that print them. Whitespace is collapsed."""
    text = " ".join((text or "").split())
    pairs: set[int] = set()
    open_at: list[int] = []
    for i, ch in enumerate(text):
        if ch == "{":
            open_at.append(i)
        elif ch == "}" and open_at:
            pairs.update((open_at.pop(), i))
    return "".join(ch if i in pairs or ch not in _BIB_ESCAPES else _BIB_ESCAPES[ch] for i, ch in enumerate(text))


# A spreadsheet takes a cell for a formula when its first visible character is one of = + - @
# (after any run of whitespace or invisible characters: no-break or zero-width space, BOM, bidi
# marks...), NFKC folding the full-width forms (＝, ＋) onto them, or when it starts with a tab or
# a carriage return.
def csv_cell(value):
    """value as a CSV cell a spreadsheet shows as text: a would-be formula gets a leading quote."""
    if not isinstance(value, str):
        return value
    import unicodedata

    for ch in value:
        if ch in "\t\r":
            break
        if ch.isspace() or unicodedata.category(ch)[0] in "CZ":
            continue
        if unicodedata.normalize("NFKC", ch)[:1] in ("=", "+", "-", "@"):
            break
        return value
    else:
        return value
    return f"'{value}"


def export_rows(store: Store, channel: str) -> list[dict]:
    """The club's read papers, oldest session first: date, id, title, authors, venue, year, url, presenter."""
    out = []
    for r in store.club_sessions(channel):
        if r["state"] != "held" or not r["paper_id"]:
            continue
        p = store.get_paper(r["paper_id"])
        if p is None:
            continue
        out.append({"date": r["date"], "id": p.id, "title": p.title or p.headline, "short_name": p.short_name,
                    "authors": "; ".join(p.authors or ()) if not isinstance(p.authors, str) else p.authors,
                    "venue": p.collection or "", "year": p.year or "", "url": p.url or "",
                    "presenter": r["presenter"] or "", "votes": r["votes"] or 0})
    return out


def to_bibtex(rows: Sequence[dict]) -> str:
    """One @misc entry per read paper (key: the paper id), with the session in the note."""
    entries = []
    for r in rows:
        key = "".join(ch for ch in r["id"] if ch.isalnum() or ch in "-_:") or "paper"
        fields = {"title": r["title"], "author": r["authors"].replace("; ", " and "), "year": str(r["year"]),
                  "howpublished": r["venue"], "url": r["url"], "note": f"Reading group, {r['date']}"}
        body = ",\n".join(f"  {k} = {{{_bib(v)}}}" for k, v in fields.items() if v)
        entries.append(f"@misc{{{key},\n{body}\n}}")
    return "\n\n".join(entries) + ("\n" if entries else "")


def to_csv(rows: Sequence[dict]) -> str:
    import csv
    import io

    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=["date", "id", "short_name", "title", "authors", "venue", "year", "url",
                                             "presenter", "votes"], extrasaction="ignore")
    writer.writeheader()
    for r in rows:
        writer.writerow({k: csv_cell(v) for k, v in r.items()})
    return buf.getvalue()


# -- the map of the club's reading ------------------------------------------------------
@dataclass(frozen=True)
class MapPoints:
    """A 2-D PCA projection: session papers (labelled), daily posts (faint), members' interests."""

    sessions: list[tuple[str, float, float]]  # (paper's name, x, y), in the order the group read them
    daily: list[tuple[float, float]]
    interests: list[tuple[str, float, float]]  # (interest text, x, y): the topic, not who added it
    dates: list[str] = field(default_factory=list)  # each session's date, beside `sessions`


def map_points(store: Store, channel: str, model: str) -> MapPoints | None:
    """Project the club's papers, the channel's daily posts and its interests onto their top two
    principal components (numpy SVD: two axes of a few hundred vectors need no UMAP)."""
    import numpy as np

    held = sorted((r["date"], r["paper_id"]) for r in store.club_sessions(channel)
                  if r["state"] == "held" and r["paper_id"])
    session_ids = [pid for _, pid in held]
    when = {}
    for day, pid in held:
        when.setdefault(pid, day)
    daily_ids = [r["paper_id"] for r in store.post_history(channel) if r.get("paper_id")]
    vecs, kinds = [], []
    for kind, pid_list in (("s", session_ids), ("d", daily_ids)):
        for pid in pid_list:
            v = store.get_vector(pid, model)
            if v is not None:
                vecs.append(np.asarray(v, dtype=np.float32))
                kinds.append((kind, pid))
    for row in store.interests(channel):
        if row.get("vector") is not None and row.get("model") == model:
            vecs.append(np.asarray(row["vector"], dtype=np.float32))
            kinds.append(("i", row["text"]))  # a Slack member id means nothing on a picture
    if not any(k == "s" for k, _ in kinds):
        return None
    m = np.stack(vecs)
    centred = m - m.mean(axis=0)
    if len(m) >= 2:
        _, _, vt = np.linalg.svd(centred, full_matrices=False)
        xy = centred @ vt[:2].T if vt.shape[0] >= 2 else np.c_[centred @ vt[0], np.zeros(len(m))]
    else:
        xy = np.zeros((1, 2))
    names = {p.id: p.short_name for p in store.get_papers([pid for k, pid in kinds if k == "s"])}
    sessions, daily, interests, dates = [], [], [], []
    for (kind, ref), (x, y) in zip(kinds, xy.tolist()):
        if kind == "s":
            sessions.append((names.get(ref, ref), x, y))
            dates.append(when.get(ref, ""))
        elif kind == "d":
            daily.append((x, y))
        else:
            interests.append((ref, x, y))
    return MapPoints(sessions, daily, interests, dates)
