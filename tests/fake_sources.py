"""Local stand-ins for arXiv (Atom API and RSS listings) and OpenReview (API v2 JSON: notes, and the
venue groups and invitations), on loopback.

The shapes follow the services' public documentation (arXiv API user manual,
rss.arxiv.org listings, docs.openreview.net for API v2): opensearch paging
elements, `arxiv:` extension elements, `arxiv:announce_type`, `dc:creator`,
and OpenReview's `{"notes": [...], "count": N}` with every content field
wrapped as {"value": ...}. Faults are queued per path: a status with
Retry-After, a truncated body, or a gate that holds a request until released.
"""
from __future__ import annotations

import json
import random
import re
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse
from xml.sax.saxutils import escape


@dataclass
class FakePaper:
    arxiv_id: str | None
    title: str
    abstract: str
    authors: list[str]
    categories: list[str] = field(default_factory=lambda: ["cs.LG"])
    version: int = 1
    published: datetime = datetime(2026, 11, 30, 18, 0, tzinfo=timezone.utc)
    doi: str | None = None
    comment: str | None = None
    forum: str | None = None
    venueid: str | None = None
    venue: str | None = None
    keywords: list[str] = field(default_factory=list)
    pdate: datetime | None = None
    tmdate: datetime | None = None  # OpenReview's last change (an edit, a decision); pdate when None

    @property
    def primary(self) -> str:
        return self.categories[0]


_WORDS = ("diffusion transformer sparse attention token routing curriculum contrastive retrieval "
          "calibration uncertainty graph kernel policy reward offline robustness distillation "
          "quantization pruning spectral manifold equivariant operator benchmark latent").split()
_NAMES = ("Ada Lovelace|Alan Turing|Grace Hopper|Yoshua Bengio|Fei-Fei Li|Geoffrey Hinton|Jürgen Schmidhuber|"
          "Daphne Koller|Zoubin Ghahramani|Léon Bottou|Chelsea Finn|Percy Liang|Sergey Levine|Anima Anandkumar|"
          "Kyunghyun Cho|Ilya Sutskever|Oriol Vinyals|Shakir Mohamed|Timnit Gebru|Emily Denton").split("|")


def make_papers(n: int, *, seed: int = 0, start: datetime | None = None, prefix: str = "2611",
                categories=("cs.LG",)) -> list[FakePaper]:
    """n realistic papers: LaTeX in abstracts, many authors, some cross-lists and DOIs."""
    rng = random.Random(seed)
    start = start or datetime(2026, 11, 1, 12, 0, tzinfo=timezone.utc)
    out = []
    for i in range(n):
        w = rng.sample(_WORDS, 6)
        cats = list(categories)
        if rng.random() < 0.3:
            cats.append(rng.choice(["stat.ML", "cs.CV", "cs.CL", "math.OC"]))
        authors = rng.sample(_NAMES, rng.randint(1, 12))
        abstract = (f"We study {w[0]} {w[1]} for {w[2]} models with $O(n \\log n)$ cost. "
                    f"Our method, {w[3].title()}{w[4].title()}-{i}, bounds the error by "
                    f"$\\epsilon \\leq \\frac{{1}}{{\\sqrt{{T}}}}$ and improves {w[5]} by {rng.randint(2, 40)}% "
                    f"on {rng.randint(3, 12)} benchmarks (paper {seed}-{i}). Code is at "
                    f"https://github.com/example/{w[3]}{i}.")
        out.append(FakePaper(
            arxiv_id=f"{prefix}.{10000 + seed * 10000 + i:05d}",
            title=f"{w[3].title()} {w[4].title()} {i}: {w[0].title()} {w[1]} for {w[2]} models",
            abstract=abstract, authors=authors, categories=cats,
            version=rng.choice([1, 1, 1, 2, 3]),
            published=start + timedelta(hours=i),
            doi=f"10.48550/arXiv.{prefix}.{10000 + seed * 10000 + i:05d}" if rng.random() < 0.2 else None,
            comment="12 pages, 4 figures" if rng.random() < 0.5 else None,
        ))
    return out


# -- renderings ---------------------------------------------------------------------------
def _wrap(text: str, width: int = 40) -> str:
    """As the API prints titles: wrapped at spaces, continuation lines indented."""
    import textwrap

    return "\n  ".join(textwrap.wrap(text, width)) or text


def atom_entry(p: FakePaper) -> str:
    cats = "".join(f'<category term="{c}" scheme="http://arxiv.org/schemas/atom"/>' for c in p.categories)
    authors = "".join(f"<author><name>{escape(a)}</name></author>" for a in p.authors)
    extra = (f"<arxiv:doi>{p.doi}</arxiv:doi>" if p.doi else "") + (
        f"<arxiv:comment>{escape(p.comment)}</arxiv:comment>" if p.comment else "")
    ts = p.published.strftime("%Y-%m-%dT%H:%M:%SZ")
    # The API wraps titles and abstracts across lines with leading spaces, as here.
    return (f"<entry><id>http://arxiv.org/abs/{p.arxiv_id}v{p.version}</id><updated>{ts}</updated>"
            f"<published>{ts}</published><title>{escape(_wrap(p.title))}</title>"
            f"<summary>  {escape(p.abstract)}\n</summary>{authors}{extra}"
            f'<link href="http://arxiv.org/abs/{p.arxiv_id}v{p.version}" rel="alternate" type="text/html"/>'
            f'<link title="pdf" href="http://arxiv.org/pdf/{p.arxiv_id}v{p.version}" rel="related" '
            f'type="application/pdf"/><arxiv:primary_category term="{p.primary}" '
            f'scheme="http://arxiv.org/schemas/atom"/>{cats}</entry>')


def atom_feed(entries: list[FakePaper], total: int, start: int, query: str) -> str:
    body = "".join(atom_entry(p) for p in entries)
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<feed xmlns="http://www.w3.org/2005/Atom" '
            'xmlns:opensearch="http://a9.com/-/spec/opensearch/1.1/" xmlns:arxiv="http://arxiv.org/schemas/atom">'
            f'<link href="http://arxiv.org/api/query?{escape(query)}" rel="self" type="application/atom+xml"/>'
            f"<title>arXiv Query: {escape(query)}</title><id>http://arxiv.org/api/x</id>"
            f"<updated>2026-12-01T00:00:00-05:00</updated>"
            f"<opensearch:totalResults>{total}</opensearch:totalResults>"
            f"<opensearch:startIndex>{start}</opensearch:startIndex>"
            f"<opensearch:itemsPerPage>{len(entries)}</opensearch:itemsPerPage>{body}</feed>")


def atom_error(message: str) -> str:
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<feed xmlns="http://www.w3.org/2005/Atom" '
            'xmlns:opensearch="http://a9.com/-/spec/opensearch/1.1/"><title>arXiv Query</title>'
            "<opensearch:totalResults>1</opensearch:totalResults><opensearch:startIndex>0</opensearch:startIndex>"
            "<entry><id>http://arxiv.org/api/errors#incorrect_id_format</id><title>Error</title>"
            f"<summary>{escape(message)}</summary></entry></feed>")


def rss_listing(category: str, items: list[tuple[str, FakePaper]], announced: datetime | None) -> str:
    when = format_datetime(announced) if announced else format_datetime(datetime(2026, 11, 28, tzinfo=timezone.utc))
    body = []
    for kind, p in items:
        cats = "".join(f"<category>{c}</category>" for c in p.categories)
        body.append(
            f"<item><title>{escape(p.title)}</title><link>https://arxiv.org/abs/{p.arxiv_id}</link>"
            f"<description>arXiv:{p.arxiv_id}v{p.version} Announce Type: {kind} \nAbstract: "
            f"{escape(p.abstract)}</description><guid isPermaLink=\"false\">oai:arXiv.org:{p.arxiv_id}v{p.version}"
            f"</guid>{cats}<pubDate>{when}</pubDate><arxiv:announce_type>{kind}</arxiv:announce_type>"
            f"<dc:rights>http://creativecommons.org/licenses/by/4.0/</dc:rights>"
            f"<dc:creator>{escape(', '.join(p.authors))}</dc:creator></item>")
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<rss xmlns:arxiv="http://arxiv.org/schemas/atom" '
            'xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:atom="http://www.w3.org/2005/Atom" '
            'xmlns:content="http://purl.org/rss/1.0/modules/content/" version="2.0"><channel>'
            f"<title>{category} updates on arXiv.org</title><link>http://rss.arxiv.org/rss/{category}</link>"
            f"<description>{category} updates on the arXiv.org e-print archive.</description>"
            f"<lastBuildDate>{when}</lastBuildDate><managingEditor>rss-help@arxiv.org</managingEditor>"
            f"<pubDate>{when}</pubDate><skipDays><day>Saturday</day><day>Sunday</day></skipDays>"
            + "".join(body) + "</channel></rss>")


def or_note(p: FakePaper) -> dict:
    ms = int((p.pdate or p.published).timestamp() * 1000)
    return {
        "id": p.forum, "forum": p.forum, "number": abs(hash(p.forum)) % 20000, "cdate": ms - 86400000, "pdate": ms,
        "mdate": ms, "tcdate": ms - 86400000, "tmdate": _tmdate(p), "invitations": [f"{p.venueid}/-/Submission", f"{p.venueid}/-/Post_Submission"],
        "domain": p.venueid, "readers": ["everyone"], "signatures": [f"{p.venueid}/Submission1/Authors"],
        "content": {
            "title": {"value": p.title}, "abstract": {"value": p.abstract},
            "authors": {"value": p.authors}, "authorids": {"value": [f"~{a.replace(' ', '_')}1" for a in p.authors]},
            "keywords": {"value": p.keywords}, "venue": {"value": p.venue}, "venueid": {"value": p.venueid},
            "pdf": {"value": f"/pdf/{p.forum}.pdf"}, "primary_area": {"value": "unsupervised learning"},
        },
    }


def _tmdate(p: FakePaper) -> int:
    return int((p.tmdate or p.pdate or p.published).timestamp() * 1000)


# -- the server -------------------------------------------------------------------------------
@dataclass
class Fault:
    path: str  # a prefix of the request path, e.g. "/api/query"
    status: int = 503
    retry_after: str | None = None
    truncate: bool = False
    gate: threading.Event | None = None  # hold the request until set
    when: object = None  # callable(query dict) -> bool: which request it hits
    drip: float | None = None  # send the real body one byte per `drip` seconds
    size: int | None = None  # send a 200 page of this many bytes instead (streamed, no Content-Length)
    location: str | None = None  # answer 302 to this URL
    body: str | None = None  # send this body (status 200) instead of the real one


class FakeSources:
    """arXiv API at /api/query, RSS at /rss/<cat>, OpenReview v2 at /notes."""

    def __init__(self):
        self.papers: list[FakePaper] = []          # the arXiv corpus
        self.listings: dict[str, tuple[list[tuple[str, FakePaper]], datetime | None]] = {}
        self.notes: list[FakePaper] = []           # OpenReview notes
        self.venues: set[str] = set()              # OpenReview venue groups with no notes yet (those with notes exist too)
        self.faults: list[Fault] = []
        self.requests: list[tuple[str, dict, dict]] = []  # (path, query, headers)
        self.reached = threading.Event()
        self.sent = 0  # bytes sent by drip and size faults
        self._stop = threading.Event()
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                fake._serve(self)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    @property
    def api(self) -> str:
        return self.url + "/api/query"

    @property
    def rss(self) -> str:
        return self.url + "/rss/"

    def close(self) -> None:
        self._stop.set()
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def fail(self, path: str, status: int = 503, times: int = 1, **kw) -> None:
        for _ in range(times):
            self.faults.append(Fault(path, status, **kw))

    def calls(self, path: str = "") -> list[dict]:
        return [q for p, q, _ in self.requests if p.startswith(path)]

    # -- dispatch
    def _serve(self, h: BaseHTTPRequestHandler) -> None:
        u = urlparse(h.path)
        q = {k: v[0] for k, v in parse_qs(u.query, keep_blank_values=True).items()}
        with self._lock:
            self.requests.append((u.path, q, dict(h.headers)))
            fault = next((f for f in self.faults if u.path.startswith(f.path)
                          and (f.when is None or f.when(q))), None)
            if fault:
                self.faults.remove(fault)
        self.reached.set()
        if fault and fault.gate is not None:
            fault.gate.wait(30)
            fault = None
        if fault and fault.location:
            return self._send(h, 302, "text/plain", "moved", {"Location": fault.location})
        if fault and fault.size:
            return self._stream(h, fault.size)
        if fault and fault.body is not None:
            return self._send(h, 200, "application/json", fault.body)
        if fault and not fault.truncate and not fault.drip:
            headers = {"Retry-After": fault.retry_after} if fault.retry_after else {}
            return self._send(h, fault.status, "text/plain", "Rate exceeded.", headers)
        if u.path == "/api/query":
            ctype, body = "application/atom+xml", self._api(q)
        elif u.path.startswith("/rss/"):
            ctype, body = "application/rss+xml", self._rss(u.path[len("/rss/"):])
        elif u.path == "/notes":
            ctype, body = "application/json", self._notes(q)
        elif u.path in ("/groups", "/invitations"):
            ctype, body = "application/json", self._group(u.path[1:], q)
        else:
            return self._send(h, 404, "text/plain", "not found")
        if isinstance(body, tuple):
            return self._send(h, body[0], "application/json", body[1])
        if fault and fault.truncate:
            body = body[: len(body) * 2 // 3]
        self._send(h, 200, ctype, body, drip=fault.drip if fault else None)

    def _send(self, h, status: int, ctype: str, body: str, headers: dict | None = None,
              drip: float | None = None) -> None:
        data = body.encode()
        h.send_response(status)
        h.send_header("Content-Type", ctype + "; charset=utf-8")
        h.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.end_headers()
        if not drip:
            h.wfile.write(data)
            return
        for i in range(len(data)):  # a slow upstream: each byte alone, `drip` seconds apart
            try:
                h.wfile.write(data[i : i + 1])
                h.wfile.flush()
            except OSError:  # the client gave up: stop
                return
            self.sent += 1
            if self._stop.wait(drip):
                return

    def _stream(self, h, size: int) -> None:
        """A 200 page of `size` bytes, chunked (no Content-Length to refuse it by)."""
        h.send_response(200)
        h.send_header("Content-Type", "application/atom+xml")
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        block = b"<!-- " + b"x" * (1 << 16) + b" -->"
        left = size
        try:
            while left > 0:
                part = block[: min(len(block), left)]
                h.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
                left -= len(part)
                self.sent += len(part)
            h.wfile.write(b"0\r\n\r\n")
        except OSError:  # the client stopped reading: what a cap looks like from here
            return

    def _api(self, q: dict) -> str:
        start, size = int(q.get("start", 0)), int(q.get("max_results", 10))
        if q.get("id_list"):
            ids = [i.strip() for i in q["id_list"].split(",")]
            if any(not re.match(r"^\d{4}\.\d{4,5}(v\d+)?$", i) for i in ids):
                return atom_error("incorrect id format for " + ",".join(ids))
            bare = {re.sub(r"v\d+$", "", i) for i in ids}
            hits = [p for p in self.papers if p.arxiv_id in bare]
            return atom_feed(hits, len(hits), 0, f"id_list={q['id_list']}")
        query = q.get("search_query", "")
        cats = set(re.findall(r"cat:([\w.-]+)", query))
        rng = re.search(r"submittedDate:\[(\d{12}) TO (\d{12})\]", query)
        lo = hi = None
        if rng:
            lo = datetime.strptime(rng.group(1), "%Y%m%d%H%M").replace(tzinfo=timezone.utc)
            hi = datetime.strptime(rng.group(2), "%Y%m%d%H%M").replace(tzinfo=timezone.utc) + timedelta(minutes=1)
        hits = [p for p in self.papers if (not cats or cats & set(p.categories))
                and (lo is None or lo <= p.published < hi)]
        hits.sort(key=lambda p: p.published)
        return atom_feed(hits[start : start + size], len(hits), start, query)

    def _rss(self, category: str) -> str:
        items, announced = self.listings.get(category, ([], None))
        return rss_listing(category, items, announced)

    def _group(self, kind: str, q: dict):
        """GET /groups?id=<venue> or /invitations?id=<venue>/-/Submission: {"groups": [...]} for a venue
        OpenReview has (with or without notes), NotFoundError (404) for one it does not."""
        venues = self.venues | {p.venueid for p in self.notes if p.venueid}
        ident = q.get("id", "")
        known = ident in venues if kind == "groups" else ident.removesuffix("/-/Submission") in venues
        if not known:
            what = "Group" if kind == "groups" else "Invitation"
            return 404, json.dumps({"name": "NotFoundError", "message": f"{what} Not Found: {ident}"})
        return json.dumps({kind: [{"id": ident, "domain": ident.split("/-/")[0]}], "count": 1})

    def _notes(self, q: dict):
        if "id" in q:
            hits = [p for p in self.notes if p.forum == q["id"]]
            if not hits:
                return 404, json.dumps({"name": "NotFoundError", "message": f"The Note {q['id']} was not found"})
            return json.dumps({"notes": [or_note(hits[0])], "count": 1})
        venue = q.get("content.venueid")
        inv = q.get("invitation")
        hits = [p for p in self.notes if (venue and p.venueid == venue)
                or (inv and inv == f"{p.venueid}/-/Submission")]
        if q.get("sort") in ("tmdate:desc", "tmdate:asc"):  # API v2 sorts by a date field, either way
            hits.sort(key=_tmdate, reverse=q["sort"].endswith("desc"))
        elif "sort" in q:
            return 400, json.dumps({"name": "ValidationError", "message": f"sort {q['sort']!r} is not supported here"})
        off, lim = int(q.get("offset", 0)), int(q.get("limit", 1000))
        return json.dumps({"notes": [or_note(p) for p in hits[off : off + lim]], "count": len(hits)})


def on_openreview(papers: list[FakePaper], venueid: str = "ICLR.cc/2026/Conference",
                  venue: str = "ICLR 2026 Poster") -> list[FakePaper]:
    """The same papers as OpenReview notes of a venue (forum ids, keywords, a decision string)."""
    rng = random.Random(7)
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"
    out = []
    for p in papers:
        forum = "".join(rng.choice(alphabet) for _ in range(10))
        forum = forum[:9] + "7"  # a digit in it, as most real ids have
        out.append(FakePaper(None if p.arxiv_id is None else p.arxiv_id, p.title, p.abstract, p.authors,
                             p.categories, published=p.published, forum=forum, venueid=venueid, venue=venue,
                             keywords=["representation learning", p.title.split()[0].lower()],
                             pdate=p.published + timedelta(days=20)))
    return out


def lightly_edited(abstract: str, rng: random.Random) -> str:
    """The abstract as another copy has it: whitespace and line breaks, LaTeX, one sentence changed."""
    sentences = re.split(r"(?<=[.!?])\s+", abstract.strip())
    if len(sentences) > 3:
        k = rng.randrange(1, len(sentences) - 1)
        sentences[k] = "We further provide an extensive analysis of the proposed components and their interplay."
    text = "  ".join(sentences)
    words = text.split(" ")
    for _ in range(2):  # a word or two in a LaTeX macro
        j = rng.randrange(len(words))
        if words[j].isalpha():
            words[j] = rf"\emph{{{words[j]}}}"
    text = " ".join(words).replace("%", r"\%")
    cut = len(text) // 2
    cut = text.find(" ", cut)
    return text[:cut] + "\n  " + text[cut + 1:] if cut > 0 else text
