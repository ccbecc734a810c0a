"""`paperclub` command line: a thin click layer that builds the parts and passes them down."""
from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from pathlib import Path
from functools import cached_property

import click

from store.errors import StoreError

from .health import DEFAULT_MAX_AGE
from .logs import json_mode

log = logging.getLogger("paperclub")
MAX_LIMIT = 1000  # search/similar --limit: enough for a script to take a whole shortlist


class Ctx:
    """Everything a command needs, built once on first use (the model loads lazily)."""

    def __init__(self, db: str | None = None):
        self._db = db

    def use_db(self, db: str) -> None:
        """`--db` given after the command's name (before anything was opened)."""
        self._db = db
        if "settings" in self.__dict__:
            self.settings.db = db

    @cached_property
    def settings(self):
        from .config import BadSetting, LogSettings, load_settings

        try:
            settings = load_settings()
        except BadSetting as e:
            # Logging as LOG_FORMAT asks (environment or .env) before saying so: with JSON logs,
            # this line is JSON too.
            logs = LogSettings()
            setup_logging(logs.log_level, logs.log_format)
            raise click.ClickException(str(e)) from None
        if self._db:
            settings.db = self._db
        return settings

    @cached_property
    def store(self):
        from store import open_store

        # A replica starting while another migrates the schema waits for it as for the server.
        return open_store(self.settings.db, migrate_wait=self.settings.db_wait_seconds)

    @cached_property
    def reader(self):
        """The store for a command that only reads: opened read-only when it cannot be written
        (a read-only volume, a PostgreSQL standby: refused if its schema is older than this code)
        or must not be (a newer paperclub's schema, with a warning)."""
        from store import NewerSchema, NoDatabase, ReadOnlyStorage, StoreError, is_server_database, open_store

        try:  # a read never creates a database: a mistyped --db must not look like an empty one
            open_store(self.settings.db, must_exist=True, migrate=False).close()
        except NoDatabase as e:
            raise click.ClickException(f"{e}. Check --db or PAPERCLUB_DB; `paperclub ingest FILE` "
                                       "creates one.") from None
        except StoreError:
            pass  # a newer schema, a read-only volume ...: handled below as before
        try:
            return self.store
        except ReadOnlyStorage:
            db = str(self.settings.db)
            if not (is_server_database(db) or os.path.isfile(db)):
                raise  # nothing to read: say why it cannot be made
        except NewerSchema as e:
            say(f"{e} Reading it anyway; commands that write refuse.", prefix="warning: ", level=logging.WARNING)
        return open_store(self.settings.db, read_only=True)

    @cached_property
    def embedder(self):
        from store.embed import make_embedder

        s = self.settings
        return make_embedder(s.model, bf16=s.embed_bf16, query_encoder=s.query_encoder, onnx_dir=s.onnx_cache_dir)

    @cached_property
    def searcher(self):
        from store.search import Searcher

        return Searcher(self.store, self.embedder)

    @cached_property
    def read_searcher(self):
        from store.search import Searcher

        return Searcher(self.reader, self.embedder)

    @cached_property
    def sources(self):
        from .deps.build import make_sources

        return make_sources(self.settings, store=self.store)

    @cached_property
    def llm(self):
        from .deps.build import make_llm

        return make_llm(self.settings)


pass_ctx = click.make_pass_decorator(Ctx)


def setup_logging(level: str = "INFO", fmt: str = "text") -> None:
    from .logs import configure

    configure(level, fmt)


DB_HELP = "SQLite file (default ./paperclub.db) or postgresql://user@host/db."


def _db_after_name(ctx: click.Context, param, value):
    if value is not None:
        ctx.find_object(Ctx).use_db(value)


class Commands(click.Group):
    """A group whose every command also takes --db after its name (`paperclub search --db x q`)."""

    group_class = type  # nested groups (fetch, enrich) are Commands too

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        if not isinstance(cmd, click.Group) and not any("--db" in p.opts for p in cmd.params):
            cmd.params.append(click.Option(["--db"], default=None, expose_value=False, is_eager=True,
                                           callback=_db_after_name, help=DB_HELP))
        super().add_command(cmd, name)


@click.group(cls=Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--db", envvar="PAPERCLUB_DB", default=None, help=DB_HELP)
@click.version_option(package_name="paperclub")
@click.pass_context
def cli(ctx, db):
    """paperclub: a Slack bot that runs your ML reading group."""
    from .config import unknown_settings

    ctx.obj = Ctx(db)
    setup_logging(ctx.obj.settings.log_level, ctx.obj.settings.log_format)
    for line in unknown_settings():  # a typo'd name would otherwise leave its default without a word
        say(line, prefix="warning: ", level=logging.WARNING)


def _progress(total: int):
    if not sys.stderr.isatty():
        return None
    from tqdm import tqdm

    return tqdm(total=total, unit="abstract", desc="ingest", file=sys.stderr)


def _progress_factory():
    return _progress if sys.stderr.isatty() else None


@cli.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--no-embed", is_flag=True, help="Store the papers now, embed later.")
@pass_ctx
def ingest(c: Ctx, paths, no_embed):
    """Load abstracts from text, JSON Lines, CSV or BibTeX files (or folders of them)."""
    from store.ingest import ingest_paths

    result = ingest_paths(c.store, paths, None if no_embed else c.embedder, now=time.time(),
                          progress_factory=_progress_factory())
    for w in result.warnings:
        click.echo(f"warning: {w}", err=True)
    click.echo(str(result))


def _source_bar(desc: str):
    """An update(n, total) callback drawing a progress bar on a terminal; None elsewhere."""
    if not sys.stderr.isatty():
        return None, lambda: None
    from tqdm import tqdm

    bar = tqdm(unit="paper", desc=desc, file=sys.stderr)

    def update(n: int, total: int) -> None:
        bar.total = total
        bar.update(n)

    return update, bar.close


@cli.group()
def fetch():
    """Bring papers in from arXiv or OpenReview (PAPERCLUB_ARXIV_API, PAPERCLUB_OPENREVIEW_API)."""


@fetch.command("arxiv")
@click.argument("category")
@click.option("--since", type=click.DateTime(["%Y-%m-%d"]), default=None, metavar="YYYY-MM-DD",
              help="Submitted on or after this day (default: the last stored announcement, else 7 days ago).")
@click.option("--until", type=click.DateTime(["%Y-%m-%d"]), default=None, metavar="YYYY-MM-DD",
              help="Last submission date to fetch (default: today).")
@click.option("--no-embed", is_flag=True, help="Store the papers now, embed later.")
@pass_ctx
def fetch_arxiv(c: Ctx, category, since, until, no_embed):
    """Papers of an arXiv CATEGORY (cs.LG, or cs.CV+cs.CL) by date range, through the API; resumable."""
    from datetime import date, datetime, timedelta, timezone

    from store.sources import harvest_arxiv, parse_feed

    category = parse_feed("arxiv", category)[1]  # as arXiv writes it: cs.lg is cs.LG
    now = time.time()
    if since is None:
        last = (c.store.source_state(f"arxiv-rss:{category}") or {}).get("cursor", {}).get("announced")
        since = date.fromisoformat(last) - timedelta(days=3) if last else (
            datetime.fromtimestamp(now, timezone.utc).date() - timedelta(days=7))
    else:
        since = since.date()
    update, close = _source_bar(f"arXiv {category}")
    try:
        result = harvest_arxiv(c.store, c.sources, category, None if no_embed else c.embedder, now=now,
                               since=since, until=until.date() if until else None, progress=update)
    finally:
        close()
    click.echo(f"arXiv {category} since {since}: {result}")


@fetch.command("openreview")
@click.argument("venue")
@click.option("--restart", is_flag=True, help="Read the venue from its first page again.")
@click.option("--no-embed", is_flag=True, help="Store the papers now, embed later.")
@pass_ctx
def fetch_openreview(c: Ctx, venue, restart, no_embed):
    """A VENUE's notes (ICLR.cc/2026/Conference, or an invitation such as …/-/Submission); resumable."""
    from store.sources import harvest_openreview

    update, close = _source_bar(f"OpenReview {venue}")
    try:
        result = harvest_openreview(c.store, c.sources, venue, None if no_embed else c.embedder,
                                    now=time.time(), restart=restart, progress=update)
    finally:
        close()
    click.echo(f"OpenReview {venue}: {result}")


@cli.group()
def enrich():
    """Fill in papers from a richer source."""


@enrich.command("openreview")
@click.option("--venue", required=True, help="The venue whose notes hold the papers, e.g. ICLR.cc/2026/Conference.")
@click.option("--no-embed", is_flag=True, help="Store the changes now, embed later.")
@pass_ctx
def enrich_openreview_cmd(c: Ctx, venue, no_embed):
    """Match untitled papers (the bundled seeds) to a venue's OpenReview notes; fill titles, authors, links."""
    from store.sources.enrich import enrich_openreview

    update, close = _source_bar(f"OpenReview {venue}")
    try:
        result = enrich_openreview(c.store, c.sources, venue, None if no_embed else c.embedder,
                                   now=time.time(), progress=update)
    finally:
        close()
    click.echo(str(result))


def _ago(t: float | None, now: float) -> str:
    if not t:
        return "never"
    s = max(0, now - t)
    return f"{s / 86400:.1f} d ago" if s >= 86400 else f"{s / 3600:.1f} h ago" if s >= 3600 else f"{s / 60:.0f} min ago"


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="One JSON document: each source with its channels.")
@pass_ctx
def feeds(c: Ctx, as_json):
    """Each source's cursor, last success (and the new papers it brought), last error, and its channels."""
    from .commands_feeds import new_papers
    from store.sources import feed_source

    now = time.time()
    states = {s["source"]: s for s in c.reader.source_states()}
    followers: dict[str, list[str]] = {}
    for f in c.reader.feeds():
        followers.setdefault(feed_source(f["kind"], f["target"]), []).append(f["channel"])
    names = sorted(set(states) | set(followers))
    if as_json:
        click.echo(json.dumps([{**(states.get(n) or {"source": n}), "channels": followers.get(n, [])}
                               for n in names], indent=2))
        return
    if not names:
        click.echo("No feeds yet: /paper feed add arxiv cs.LG in a channel, or paperclub fetch arxiv cs.LG.")
        return
    for n in names:
        st = states.get(n) or {}
        cur = ", ".join(f"{k}={v}" for k, v in sorted((st.get("cursor") or {}).items()) if k != "listing") or "-"
        # The last read's news, as /paper feed tells it (none before a read since the count was kept).
        brought = f" ({new_papers(st['last_papers'])})" if st.get("last_papers") is not None else ""
        click.echo(f"{n}\n  cursor: {cur}\n  last success: {_ago(st.get('last_success'), now)}{brought}")
        if st.get("failing_since"):
            click.echo(f"  last error: {st['last_error']} ({_ago(st.get('last_error_at'), now)}, "
                       f"failing since {_ago(st['failing_since'], now)})")
        elif st.get("last_error"):
            click.echo(f"  last error (since recovered): {st['last_error']}")
        if followers.get(n):
            click.echo(f"  channels: {', '.join(followers[n])}")


def load_samples_if_empty(c: Ctx) -> None:
    """First start: fill an empty database with the bundled ICLR 2026 abstracts."""
    from store.ingest import bundled_sample_paths, ingest_paths

    if c.store.count_papers():
        return
    # Logged, not echoed: in a container with LOG_FORMAT=json every line must be a JSON record.
    log.info("loading the bundled ICLR 2026 abstracts into an empty database")
    result = ingest_paths(c.store, bundled_sample_paths(), c.embedder, now=time.time(),
                          progress_factory=_progress_factory())
    log.info("bundled abstracts: %s", result)
    # They come without titles, authors or links: fetched from OpenReview meanwhile, when it answers.
    # Everything the fetch needs is built and imported here, on this thread: while it runs, this
    # thread goes on to import Slack's modules, and two threads importing one package at once can
    # each see it half-initialised (an ImportError that stopped the bot at start in a container).
    enrich = enrich_samples(c.store, c.sources, c.embedder)
    threading.Thread(target=enrich, name="enrich-samples", daemon=True).start()


SAMPLE_VENUE = "ICLR.cc/2026/Conference"  # where the bundled abstracts' notes are


def enrich_samples(store, sources, embedder):
    """A call that fills the bundled papers' titles, authors and links from OpenReview, and says
    so; offline, says once how to do it later. Its imports are done here, by the caller."""
    from store.sources import SourceError
    from store.sources.enrich import enrich_openreview

    how = f"paperclub enrich openreview --venue {SAMPLE_VENUE}"

    def enrich() -> None:
        try:
            result = enrich_openreview(store, sources, SAMPLE_VENUE, embedder, now=time.time())
        except SourceError as e:
            log.info("the bundled papers have no titles or links yet (OpenReview: %s); when online, run: %s",
                     e, how)
            return
        except Exception as e:  # never let this take the first start down
            log.warning("could not fill in the bundled papers (%s: %s); run: %s", type(e).__name__, e, how)
            return
        log.info("filled in titles, authors and links of the bundled papers from OpenReview: %s", result)

    return enrich


def _paper_line(p) -> str:
    return f"{p.id}  {p.short_name[:28]:<28}  {p.headline}"


@cli.command()
@click.option("--limit", type=int, default=None, help="At most this many.")
@click.option("--collection", default=None, help="Only this collection/venue.")
@click.option("--json", "as_json", is_flag=True, help="One JSON document: a list of papers.")
@click.option("--nl", "as_lines", is_flag=True, help="JSON Lines: one paper per line (for streaming).")
@pass_ctx
def papers(c: Ctx, limit, collection, as_json, as_lines):
    """List papers: id, short name, headline."""
    from store.ingest import source_ids

    rows = c.reader.list_papers(limit=limit, collection=collection)
    keys = c.reader.paper_keys(p.id for p in rows) if as_json or as_lines else {}
    docs = [{"id": p.id, "name": p.short_name, "title": p.title, "headline": p.headline,
             "collection": p.collection, "source_ids": source_ids(keys.get(p.id, []))} for p in rows]
    if as_json:
        click.echo(json.dumps(docs, ensure_ascii=False, indent=2))
    elif as_lines:
        for doc in docs:
            click.echo(json.dumps(doc, ensure_ascii=False))
    else:
        for p in rows:
            click.echo(_paper_line(p))
    if rows or as_json or as_lines:
        return
    if collection and c.reader.count_papers():
        known = ", ".join(repr(n) for n in sorted({name for name, _, _ in c.reader.collections()})) or "none"
        click.echo(f"No papers in collection {collection!r}. Collections: {known}.", err=True)
    else:
        click.echo("No papers yet. Load some with: paperclub ingest FILE", err=True)


def resolve_ref(c: Ctx, ref: str):
    """A paper by id, short name, or best match for words; (paper, exact?)."""
    return c.read_searcher.resolve(ref)


def _echo_hits(c: Ctx, hits, as_json: bool, empty: str) -> None:
    if as_json:
        from store.search import hits_json

        click.echo(json.dumps(hits_json(c.reader, hits), ensure_ascii=False, indent=2))
    elif not hits:
        click.echo(empty, err=True)
    for h in [] if as_json else hits:
        click.echo(f"{h.paper.id}  {h.paper.short_name[:28]:<28}  {h.paper.headline}")
        click.echo(f"        {h.score:.3f}  {h.why}")


@cli.command()
@click.argument("query", nargs=-1, required=True)
@click.option("--limit", type=click.IntRange(1, MAX_LIMIT), default=5, show_default=True, help="How many papers.")
@click.option("--collection", default=None, help="Only this collection/venue (e.g. 'ICLR 2026').")
@click.option("--year", type=int, default=None, help="Only papers from this year.")
@click.option("--json", "as_json", is_flag=True,
              help="JSON list of {id, name, title, headline, score, why, source_ids, ...}.")
@pass_ctx
def search(c: Ctx, query, limit, collection, year, as_json):
    """Find papers by words, acronyms or a description of what they do."""
    hits = c.read_searcher.search(" ".join(query), limit=limit, collection=collection, year=year)
    if hits and not as_json and not any(h.relevant for h in hits):
        click.echo("No good match; the closest papers, though not close:", err=True)
    _echo_hits(c, hits, as_json, "No papers match." if hits or c.reader.count_papers() else
               "No papers yet. Load some with: paperclub ingest FILE (or paperclub run --load-samples)")


@cli.command()
@click.argument("ref", nargs=-1, required=True)
@click.option("--limit", type=click.IntRange(1, MAX_LIMIT), default=5, show_default=True, help="How many papers.")
@click.option("--json", "as_json", is_flag=True,
              help="JSON list of {id, name, title, headline, score, why, source_ids, ...}.")
@pass_ctx
def similar(c: Ctx, ref, limit, as_json):
    """Papers like REF (id, short name, or words)."""
    paper, exact = resolve_ref(c, " ".join(ref))
    if not exact and not as_json:
        click.echo(f"(papers like {paper.id} {paper.short_name}, the best match for '{' '.join(ref)}')",
                   err=True)
    _echo_hits(c, c.read_searcher.similar(paper.id, limit=limit), as_json, "No other papers yet.")


@cli.command()
@click.argument("ref", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True, help="The paper as one JSON document.")
@pass_ctx
def show(c: Ctx, ref, as_json):
    """Show one paper (REF: id, short name, or words)."""
    paper, exact = resolve_ref(c, " ".join(ref))
    if as_json:
        click.echo(json.dumps(paper.to_dict(), ensure_ascii=False, indent=2))
        return
    if not exact:
        click.echo(f"(best match for '{' '.join(ref)}')", err=True)
    click.echo(f"{paper.short_name}  [{paper.id}]  {paper.collection}")
    click.echo(paper.headline)
    if paper.title and paper.title != paper.headline:
        click.echo(paper.title)
    click.echo()
    click.echo(paper.abstract)
    for url in paper.code_urls:
        click.echo(f"code: {url}")
    if paper.url:
        click.echo(f"url: {paper.url}")


@cli.command()
@click.argument("ref", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True, help="{id, name, tldr, points, backend}.")
@pass_ctx
def summary(c: Ctx, ref, as_json):
    """A paper's TL;DR and key points (REF: id, short name, or words)."""
    from store.summary import paper_summary

    paper, exact = resolve_ref(c, " ".join(ref))
    s = paper_summary(c.reader, paper, llm=c.llm, now=time.time())
    if as_json:
        click.echo(json.dumps({"id": paper.id, "name": paper.short_name, **s.to_dict()},
                              ensure_ascii=False, indent=2))
        return
    if not exact:
        click.echo(f"(best match for '{' '.join(ref)}')", err=True)
    click.echo(f"{paper.short_name}  [{paper.id}]  {paper.collection}")
    click.echo(f"TL;DR: {s.tldr}")
    for key in ("problem", "approach", "results", "code"):
        if s.points.get(key):
            click.echo(f"  {key.capitalize()}: {s.points[key]}")


@cli.command()
@click.argument("infile", type=click.File("r", encoding="utf-8"))
@pass_ctx
def summarize(c: Ctx, infile):
    """Batch mode: read {id, title?, abstract} JSON Lines, write {id, tldr, points} to stdout."""
    from store.summary import summarize_jsonl

    done, failed = summarize_jsonl(infile, click.get_text_stream("stdout"), llm=c.llm)
    click.echo(f"{done} summarized, {failed} failed", err=True)
    if failed and not done:
        raise SystemExit(1)


@cli.command()
@click.argument("topic", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True, help="The overview as one JSON document.")
@pass_ctx
def overview(c: Ctx, topic, as_json):
    """The most relevant papers on TOPIC, grouped into named themes with TL;DRs."""
    from store.overview import topic_overview

    ov = topic_overview(c.reader, c.read_searcher, " ".join(topic), llm=c.llm, now=time.time())
    if as_json:
        click.echo(json.dumps({"topic": ov.topic, "common": ov.common, "backend": ov.backend, "themes": [
            {"name": t.name, "papers": [{"id": p.id, "name": p.short_name, "tldr": s.tldr}
                                        for p, s in t.papers]} for t in ov.themes]},
            ensure_ascii=False, indent=2))
        return
    if not ov.themes:
        click.echo(f"No papers about {ov.topic}.", err=True)
        return
    click.echo(f"Overview: {ov.topic}")
    click.echo(ov.common)
    for t in ov.themes:
        click.echo(f"\n{t.name}")
        for p, s in t.papers:
            click.echo(f"  {p.id}  {p.short_name}: {s.tldr}")


@cli.command()
@click.option("--no-embed", is_flag=True, help="Store the re-parsed papers now, embed later.")
@pass_ctx
def reparse(c: Ctx, no_embed):
    """Re-run the abstract parser over the stored raw text."""
    from store.ingest import reparse as do_reparse

    result = do_reparse(c.store, None if no_embed else c.embedder, now=time.time())
    click.echo(f"{result.updated} updated, {result.unchanged} unchanged")


@cli.command()
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--force", is_flag=True, help="Overwrite PATH if it exists.")
@pass_ctx
def backup(c: Ctx, path, force):
    """Write a consistent, verified copy of the live database to PATH (safe while the bot runs).

    The forget-me list goes inside it and beside it (PATH.forgotten). Restore with
    `paperclub restore PATH`.
    """
    from .health import backup_database

    folder = Path(path).absolute().parent
    if not folder.is_dir():  # a mistyped path must not grow folders without a word
        raise click.ClickException(f"the folder {folder} does not exist: create it first "
                                   f"(mkdir -p {folder}) or give another PATH.")
    click.echo(str(backup_database(c.settings.db, path, force=force)))


@cli.command()
@click.argument("backup_path", metavar="BACKUP", type=click.Path(exists=True, dir_okay=False))
@click.option("--forgotten", "lists", multiple=True, type=click.Path(exists=True, dir_okay=False),
              metavar="LIST", help="A forget-me list kept elsewhere (another backup's BACKUP.forgotten); "
                                   "every *.forgotten beside BACKUP is read anyway. Repeatable.")
@click.option("--force", is_flag=True, help="Restore even though the bot looks to be running.")
@pass_ctx
def restore(c: Ctx, backup_path, lists, force):
    """Put BACKUP (made by `paperclub backup`) in place of the database; stop the bot first.

    Members who ran forget-me stay forgotten: the live database's list, BACKUP's own and every
    *.forgotten beside BACKUP (the newest backup's knows the latest requests) are kept, and
    the restored database forgets them again. Then start the bot.
    """
    from store import database_address, is_server_database, restore_database

    from .health import bot_running

    db = c.settings.db
    # PostgreSQL is refused by restore_database itself, before any connection is tried.
    if not force and not is_server_database(db) and (why := bot_running(db, time.time())):
        raise click.ClickException(f"the bot looks to be running on {database_address(db)}: {why}. Stop it first "
                                   "(docker compose stop bot), or pass --force if it is not running.")
    click.echo(str(restore_database(backup_path, db, lists=lists)))


@cli.command()
@click.option("--to", "target", required=True, metavar="postgresql://USER@HOST/DB",
              help="The PostgreSQL database to copy into (tables created; rows already there kept).")
@pass_ctx
def migrate(c: Ctx, target):
    """Copy this SQLite store (--db) into PostgreSQL, then verify every table's rows and checksum.

    Safe to re-run: one transaction, so an interrupted copy changes nothing; a second run
    adds only rows PostgreSQL lacks and never overwrites one (it reports tables that differ).
    """
    from store import migrate_store

    copies = migrate_store(c.settings.db, target)
    for copy in copies:
        click.echo(str(copy))
    bad = [copy.table for copy in copies if not copy.ok]
    if bad:
        raise click.ClickException(f"the copy does not match the source in {', '.join(bad)} "
                                   "(rows there the SQLite store does not have?)")
    click.echo(f"Copied and verified {len(copies)} tables, "
               f"{next((x.target_rows for x in copies if x.table == 'papers'), 0)} papers.")


@cli.command()
@click.option("--max-age", type=click.FloatRange(min=1), default=DEFAULT_MAX_AGE, show_default=True,
              help="Seconds since the bot's last heartbeat before it counts as disconnected.")
@pass_ctx
def health(c: Ctx, max_age):
    """Exit 0 if the database is at the current schema and the bot is connected to Slack."""
    import time

    from .health import check_health

    result = check_health(c.settings.db, time.time(), max_age, replica=c.settings.replica_id)
    if not result.ok:
        click.echo(f"unhealthy: {result.message}", err=True)
        sys.exit(1)
    click.echo(result.message)


@cli.command("export-onnx")
@pass_ctx
def export_onnx(c: Ctx):
    """Export the model's ONNX query encoder into PAPERCLUB_ONNX_DIR now (the image does this at build time)."""
    from store.embed import OnnxQueryEmbedder
    from store.embed_onnx import OnnxUnavailable

    embedder = c.embedder
    if not isinstance(embedder, OnnxQueryEmbedder):
        raise click.ClickException(f"model {c.settings.model!r} with PAPERCLUB_QUERY_ENCODER="
                                   f"{c.settings.query_encoder} has no ONNX query encoder to export.")
    try:
        embedder.queries.load()
    except OnnxUnavailable as e:
        raise click.ClickException(f"ONNX export failed: {e}") from None
    click.echo(str(embedder.queries.path()))


@cli.command()
@click.option("--load-samples", is_flag=True, help="Load the bundled abstracts if the database is empty.")
@pass_ctx
def run(c: Ctx, load_samples):
    """Start the bot (Socket Mode); with no Slack tokens, the local console."""
    from .runner import wait_for_database

    from store import is_server_database

    wait_for_database(c.settings.db, c.settings.db_wait_seconds)  # a database container still starting
    if os.path.isfile(str(c.settings.db)) or is_server_database(c.settings.db):
        _ = c.store  # a newer paperclub's schema or a read-only volume refuses here, before anything starts
    if not c.settings.has_slack_tokens:
        missing = " and ".join(name for name, value in [("SLACK_BOT_TOKEN", c.settings.slack_bot_token),
                                                        ("SLACK_APP_TOKEN", c.settings.slack_app_token)]
                               if not value)
        verb = "are" if " and " in missing else "is"
        if not _has_input():  # a detached container: a console would read nothing, exit 0, restart
            raise click.ClickException(f"{missing} {verb} not set (environment or .env), and there is "
                                       "no terminal for the local console: set the Slack tokens.")
        say(f"{missing} {verb} not set (environment or .env): starting the local console instead.",
            level=logging.WARNING)
    elif problem := c.settings.token_problem():
        raise click.ClickException(problem)
    if load_samples:
        load_samples_if_empty(c)
    if not c.settings.has_slack_tokens:
        return start_console(c)
    from .runner import run_bot

    if not run_bot(c.settings, c.store, c.embedder):
        # Work still in flight after the drain would hold the exit (Python joins pool threads
        # at exit) past Docker's stop grace period. Abandon it: every store write is a single
        # transaction, so an unfinished one simply never happened.
        logging.shutdown()
        os._exit(0)


def _has_input() -> bool:
    """A terminal or piped lines on stdin; not /dev/null or a closed stdin (docker run -d)."""
    import stat

    try:
        mode = os.fstat(sys.stdin.fileno()).st_mode
    except (AttributeError, OSError, ValueError):
        return False
    return sys.stdin.isatty() or not stat.S_ISCHR(mode)


def say(line: str, *, prefix: str = "", level: int = logging.ERROR) -> None:
    """One line to stderr for a person; a JSON record when LOG_FORMAT=json (every line is JSON)."""
    if json_mode():
        log.log(level, line)
    else:
        click.echo(prefix + line, err=True)


def start_console(c: Ctx):
    from .console import run_console

    return run_console(c.settings, c.store, c.embedder)


@cli.command()
@click.option("--load-samples", is_flag=True, help="Load the bundled abstracts if the database is empty.")
@pass_ctx
def console(c: Ctx, load_samples):
    """A local prompt that speaks the same /paper commands as Slack."""
    if load_samples:
        load_samples_if_empty(c)
    start_console(c)


@cli.command()
@click.option("--channel", required=True, help="Slack channel id, e.g. C0123456789.")
@click.option("--date", "day", default=None, metavar="YYYY-MM-DD",
              help="The day to pick for (default: today in the channel's time zone).")
@click.option("--post", is_flag=True, help="Post it to the channel now (once per channel and day). "
                                           "Without it: a dry run that changes nothing.")
@click.option("--json", "as_json", is_flag=True, help="The pick as JSON.")
@pass_ctx
def pick(c: Ctx, channel, day, post, as_json):
    """A channel's paper of the day: a dry run with the reasons, or --post to post it."""
    from datetime import date as date_cls

    from store.pick import DailyPick
    from store.daily import pick_for_day
    from store.schedule import ScheduleSpec, channel_tz, local_today

    from .deps.build import build_deps, make_client
    from .posting import post_day
    from .replica import replica_id
    from .runner import utc_now

    now = utc_now()
    # A dry run only reads (it works on a read-only volume); --post writes.
    store, searcher = (c.store, c.searcher) if post else (c.reader, c.read_searcher)
    tz = channel_tz(store, channel, c.settings.timezone)
    try:
        when = date_cls.fromisoformat(day) if day else local_today(tz, now)
    except ValueError:
        raise click.BadParameter(f"{day!r} is not a date like 2024-03-12.", param_hint="--date") from None
    if post and not c.settings.has_slack_tokens:
        raise click.ClickException("--post needs SLACK_BOT_TOKEN and SLACK_APP_TOKEN (environment or .env).")
    # The same wiring as the bot, so the dry run weighs reactions as the bot does.
    # Its own identity (host:pid), never the bot's PAPERCLUB_REPLICA_ID: a claim this run holds is
    # not the running bot's to take over, nor the other way round.
    deps = build_deps(c.settings, store, searcher, clock=utc_now,
                      slack=make_client(c.settings) if post else None, replica=replica_id())
    if post:
        result = post_day(deps, deps.slack, channel, when, now)
        click.echo(f"{when} {channel}: {result.status}"
                   + (f" {result.paper_id}" if result.paper_id else "")
                   + (f" ts={result.ts}" if result.ts else "") + (f" ({result.detail})" if result.detail else ""))
        if result.status == "failed":
            sys.exit(1)
        return
    row = store.get_post(channel, when.isoformat())
    chosen = DailyPick.from_dict(row["pick"], channel, when) if row and row.get("pick") else pick_for_day(
        store, searcher, channel, when, feedback=deps.feedback, settings=deps.pick)
    if as_json:
        data = chosen.to_dict() if chosen else None
        click.echo(json.dumps({"day": when.isoformat(), "channel": channel, "pick": data,
                               "status": row["status"] if row else None}, ensure_ascii=False, indent=2))
        return
    schedule = ScheduleSpec.from_row(store.get_schedule(channel))
    where = schedule.describe() if schedule else f"no schedule ({tz})"
    click.echo(f"{when} {channel} ({where})" + (f": {row['status']}" + (f" ts={row['ts']}" if row.get("ts") else "")
                                                 if row else ": dry run, nothing posted"))
    if chosen is None:
        click.echo("Nothing left to pick: every paper has been shown in this channel.")
        return
    slots = [("paper of the day", chosen.choice), *[("runner-up", r) for r in chosen.runners_up],
             *([("exploration", chosen.also)] if chosen.also else [])]
    for label, choice in slots:
        paper = store.get_paper(choice.paper_id)
        click.echo(f"{label:>16}: {_paper_line(paper) if paper else choice.paper_id}")
        click.echo(f"{'':>16}  why: {choice.explain(main=choice is chosen.choice)}")


@cli.command()
@click.option("--channel", default=None, help="Only this channel (default: every channel with reactions).")
@click.option("--half-life", type=click.FloatRange(min=0.1), default=None, metavar="DAYS",
              help="A candidate half-life to compare with the configured one.")
@click.option("--strength", type=click.FloatRange(min=0), default=None,
              help="A candidate feedback strength to compare with the current one.")
@click.option("--horizon", type=click.IntRange(2, 60), default=7, show_default=True,
              help="Posts ranked at each step.")
@click.option("--json", "as_json", is_flag=True, help="The scores as one JSON document.")
@pass_ctx
def replay(c: Ctx, channel, half_life, strength, horizon, as_json):
    """Score rankings on this database's logged reactions before switching one on.

    At each past post, the next HORIZON posted papers are ranked using only what
    was known before it (interests, earlier reactions) and judged by the reactions
    they got: P@1 (the top one was liked) and nDCG. Compared: the order the channel
    saw, the pick without feedback, with the configured feedback, and (with
    --half-life/--strength) a candidate setting.
    """
    from store.feedback import replay_channel
    from store.daily import interests_for
    from store.pick import PickSettings

    from .deps import Feedback

    weights = Feedback.from_settings(c.settings).weights
    current = c.settings.feedback_half_life_days
    pickers = {"as posted": {"as_posted": True}, "no feedback": {"feedback": False},
               f"feedback, half-life {current:g} d": {"half_life_days": current}}
    if half_life is not None or strength is not None:
        settings = PickSettings(feedback_strength=strength) if strength is not None else PickSettings()
        pickers[f"candidate: half-life {half_life or current:g} d, strength {settings.feedback_strength:g}"] = {
            "half_life_days": half_life or current, "settings": settings}
    channels = [channel] if channel else c.reader.reaction_channels()
    if not channels:
        click.echo("No reactions logged yet, so there is nothing to replay.", err=True)
        return
    ids, matrix = c.reader.load_vectors(c.embedder.name)
    results = {}
    for ch in channels:
        rows = c.reader.interests(ch)
        interests = list(zip(interests_for(c.reader, ch, c.embedder), [r["created_at"] for r in rows]))
        results[ch] = replay_channel(c.reader, ch, ids, matrix, interests, pickers, weights=weights,
                                     horizon=horizon)
    if as_json:
        click.echo(json.dumps({ch: [{"picker": s.name, "points": s.points, "precision_at_1": round(s.precision_at_1, 4),
                                     "ndcg": round(s.ndcg, 4)} for s in scores]
                               for ch, scores in results.items()}, indent=2))
        return
    for ch, scores in results.items():
        points = scores[0].points if scores else 0
        click.echo(f"{ch}: {points} ranking steps with a liked paper among the next {horizon} posts")
        if not points:
            continue
        for s in scores:
            click.echo(f"  {s.name:<44} P@1 {s.precision_at_1:.2f}   nDCG {s.ndcg:.2f}")


def main(argv=None):
    """Entry point: store errors become one friendly line and exit 1, never a traceback."""
    try:
        cli.main(args=argv, prog_name="paperclub", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        sys.exit(130)
    except click.ClickException as e:
        if json_mode():
            say(e.format_message())
        else:
            e.show()
        sys.exit(e.exit_code)
    except StoreError as e:
        say(str(e), prefix="error: ")
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(0)
    except Exception as e:  # the last line of defence: say what broke, in one line
        log.debug("unexpected error", exc_info=True)
        say(f"{type(e).__name__}: {e}", prefix="error: ")
        sys.exit(1)
    sys.exit(0)
