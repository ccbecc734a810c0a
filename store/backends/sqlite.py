"""SQLiteStore: the SQLite backend of the Store protocol: what SQLite does its own way (the
statements both backends share are in shared*.py).

Wraps sqlite_utils.Database; the schema is in sqlite_migrations. Every public
method is a complete unit of work: multi-row writes run in one transaction, so
a killed process leaves the file consistent. Each thread gets its own
connection (the bot answers commands on worker threads). SQLite's own errors
stop at this module: a locked database is StoreBusy, anything else StoreError.
"""
from __future__ import annotations

import itertools
import json
import os
import re
import sqlite3
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import numpy as np
import sqlite_utils

from ..base import BackupResult, RestoreResult
from ..errors import NewerSchema, NoDatabase, ReadOnlyStorage, StoreBusy, StoreError
from ..text import member_hash
from .rows import JSON_FIELDS as _JSON_FIELDS, newer_schema_line
from .shared import DIALECT, SharedTables, errors_stay_inside
from .sqlite_migrations import migrations


BUSY_TIMEOUT_MS = 15_000
CACHE_BUSY_MS = 100  # a cache write waits at most this long for another writer, then is skipped
# The FTS columns in m001's order; lexical_search weights are given in this order.
LEXICAL_FIELDS = ("short_name", "headline", "title", "abstract")
_PHRASE = re.compile(r"[^\W_]+(?: [^\W_]+)*", re.UNICODE)
_LISTED = re.compile(r"[0-9a-f]{64}")  # a line of a forget-me list: store.text.member_hash


def match_expression(phrases: Sequence[str]) -> str | None:
    """A safe FTS5 MATCH string: each phrase double-quoted, OR-joined; None for no phrases.

    Quoting makes AND/OR/NEAR, *, ^, :, -, brackets and stray quotes plain text, and
    phrases hold only letters, digits and spaces, so no user input can make FTS5 raise.
    """
    quoted = [f'"{p}"' for p in dict.fromkeys(phrases) if _PHRASE.fullmatch(p)]
    return " OR ".join(quoted) if quoted else None


def is_busy(error: BaseException) -> bool:
    """True for SQLite's 'database is locked' / 'busy' errors (another writer held on too long)."""
    text = str(error)
    return isinstance(error, sqlite3.OperationalError) and ("locked" in text or "busy" in text)


def _store_error(error: sqlite3.Error, path: str) -> StoreError:
    if is_busy(error):
        return StoreBusy(f"database {path} is busy (another writer held it too long): {error}")
    return StoreError(f"cannot read database {path}: {error}")


def _remove_db_files(path: Path) -> None:
    """Remove a database file and its WAL side files (stale ones would be replayed into a new copy)."""
    for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        p.unlink(missing_ok=True)


def _has_table(conn: sqlite3.Connection, name: str) -> bool:
    return conn.execute("select 1 from sqlite_master where type = 'table' and name = ?", [name]).fetchone() is not None


def _append_durably(path: Path, lines: list[str]) -> None:
    with open(path, "a", encoding="ascii") as f:
        f.write("".join(h + "\n" for h in lines))
        f.flush()
        os.fsync(f.fileno())


def _write_durably(path: Path, text: str) -> None:
    path.write_text(text, encoding="ascii")
    with open(path, "rb") as f:
        os.fsync(f.fileno())


@errors_stay_inside((sqlite3.Error,), lambda store, e: _store_error(e, store.path))
class SQLiteStore(SharedTables):
    """The paperclub database in one SQLite file; safe to share across threads."""

    backend = "sqlite"
    DIALECT = DIALECT  # what this backend writes its own way; the rest is SharedTables

    def __init__(self, path: str | Path, *, migrate: bool = True, must_exist: bool = False,
                 read_only: bool = False):
        self.path = str(path)
        # read_only: opened with mode=ro (immutable=1 on a read-only volume, where SQLite cannot
        # even make the -shm file); nothing is migrated and cache writes are skipped.
        self.read_only = read_only
        if read_only:
            migrate = False
            must_exist = True
        if must_exist and (self.path == ":memory:" or not Path(self.path).is_file()):
            raise NoDatabase(f"no database at {self.path}")
        # Why this process cannot write the database; opened without migrating (health, backup, a
        # copy's source: readers), an existing file that cannot be written is read read-only.
        self.unwritable = _unwritable(self.path)
        if self.unwritable and migrate:
            raise ReadOnlyStorage(self.unwritable)
        if self.unwritable and Path(self.path).is_file():
            self.read_only = True
        self._local = threading.local()
        self._write_lock = threading.RLock()
        if migrate:
            self.migrate()
            self.reapply_forgotten()

    # -- connections -------------------------------------------------------
    @property
    def db(self) -> sqlite_utils.Database:
        db = getattr(self._local, "db", None)
        if db is None:
            if self.read_only:
                path = Path(self.path).absolute()
                flag = "mode=ro" if os.access(path.parent, os.W_OK) else "immutable=1"
                conn = sqlite3.connect(f"{path.as_uri()}?{flag}", uri=True, timeout=BUSY_TIMEOUT_MS / 1000,
                                       check_same_thread=False)
                db = sqlite_utils.Database(conn)
                db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
                self._local.db = db
                return db
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False)
            db = sqlite_utils.Database(conn)
            db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            db.execute("PRAGMA foreign_keys = ON")
            db.execute("PRAGMA synchronous = NORMAL")
            self._local.db = db
        return db

    def close(self) -> None:
        db = getattr(self._local, "db", None)
        if db is not None:
            db.close()
            self._local.db = None

    @contextmanager
    def transaction(self) -> Iterator[sqlite_utils.Database]:
        """One write transaction (BEGIN IMMEDIATE, so writers queue instead of failing)."""
        if self.read_only:  # say why, rather than SQLite's "attempt to write a readonly database"
            raise ReadOnlyStorage(self.unwritable or f"cannot write the database {self.path}: it was opened "
                                  "read-only (written by a newer paperclub?)")
        db = self.db
        with self._write_lock:
            if db.conn.in_transaction:
                with db.atomic():
                    yield db
                return
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.rollback()
                raise
            else:
                db.conn.execute("COMMIT")

    def migrate(self) -> None:
        """Apply this version's migrations; a database from a newer paperclub is refused, untouched."""
        newer = self.newer_schema()
        if newer:
            raise NewerSchema(newer)
        db = self.db
        if self.path != ":memory:" and db.journal_mode != "wal":
            db.enable_wal()
        with self._write_lock:
            migrations.apply(db)

    def newer_schema(self) -> str | None:
        """One line naming both versions when a newer paperclub migrated this database; else None."""
        return newer_schema_line(self.path, {m.name for m in migrations.applied(self.db)},
                                 [m.name for m in migrations._migrations])

    def schema_version(self) -> tuple[int, int]:
        """(applied, known) migration counts; equal when the file is current."""
        applied = {m.name for m in migrations.applied(self.db)}
        known = {m.name for m in migrations._migrations}
        if applied - known:
            raise NewerSchema(self.newer_schema())
        return len(applied & known), len(known)

    # -- meta ----------------------------------------------------------------
    # -- reads for the shared SQL (shared_sql.py) -----------------------------
    def _rows(self, sql: str, args: list = ()) -> list[dict]:
        return list(self.db.query(sql, args))

    def _tuples(self, sql: str, args: list = ()) -> list[tuple]:
        return self.db.execute(sql, args).fetchall()

    def _read_one(self, sql: str, args: list = ()):
        return self.db.execute(sql, args).fetchone()

    def _stream(self, sql: str, args: list, batch: int) -> Iterator[list[tuple]]:
        cursor = self.db.execute(sql, args)
        while rows := cursor.fetchmany(batch):
            yield rows





    # -- papers --------------------------------------------------------------







    # -- identity keys (ingest) ---------------------------------------------





    def write_papers(self, rows: list[dict], keys: list[tuple[str, str]],
                     replace_keys_for: Iterable[str] = (),
                     embeddings: list[dict] = (), *, now: float) -> None:
        """Upsert paper rows, their identity keys and embeddings in one transaction."""
        with self.transaction() as db:
            version = self._bump(db, "papers_version") if rows or embeddings else 0
            for pid in replace_keys_for:
                db.execute(
                    "delete from paper_keys where paper_id = ? and (key like 'abs:%' or key like 'sent:%')",
                    [pid])
            prepared = []
            for row in rows:
                row = dict(row)
                for k in _JSON_FIELDS:
                    if not isinstance(row.get(k), str):
                        row[k] = json.dumps(row.get(k) or [], ensure_ascii=False)
                row.setdefault("created_at", now)
                row["updated_at"] = now
                row["changed"] = version
                prepared.append(row)
            # One upsert per run of rows with the same columns (a column a row lacks is kept as
            # it is, never set to null), in order: a bulk ingest is one statement per 100 rows.
            for _, run in itertools.groupby(prepared, key=lambda r: tuple(r)):
                db["papers"].upsert_all(list(run), pk="id", alter=False)
            if keys:
                db.conn.executemany(
                    "insert or ignore into paper_keys(key, paper_id) values (?, ?)", keys)
            if embeddings:
                self._put_embeddings(db, embeddings, version)

    # -- embeddings ----------------------------------------------------------
    @staticmethod
    def _put_embeddings(db, embeddings: list[dict], version: int) -> None:
        db.conn.executemany(
            "insert into embeddings(paper_id, model, dim, vector, content_hash, changed) "
            "values (?,?,?,?,?,?) on conflict(paper_id, model) do update set dim = excluded.dim, "
            "vector = excluded.vector, content_hash = excluded.content_hash, changed = excluded.changed",
            [(e["paper_id"], e["model"], int(len(e["vector"])),
              np.asarray(e["vector"], dtype=np.float32).tobytes(), e["content_hash"], version)
             for e in embeddings],
        )

    # -- lexical search (used by store/search.py) ----------------------------
    def lexical_search(self, terms: Sequence[str], *, limit: int = 100, collection: str | None = None,
                       year: int | None = None,
                       weights: Sequence[float] | None = None) -> list[tuple[str, float]]:
        """(paper id, score) for papers holding any of the terms, best first (higher is better).

        A term is a word or a space-joined phrase ('g nll'); anything but letters, digits
        and single spaces is dropped, so no text can make the search raise. weights are per
        field, in LEXICAL_FIELDS order. The score is FTS5's BM25, negated.
        """
        match = match_expression(terms)
        if match is None:
            return []
        weights = tuple(weights or (1.0,) * len(LEXICAL_FIELDS))
        return [(pid, -score) for pid, score in self._fts(match, weights, limit, collection, year)]

    def _fts(self, match: str, weights: tuple[float, ...], limit: int, collection: str | None,
             year: int | None) -> list[tuple[str, float]]:
        """(paper id, bm25) for an FTS5 MATCH expression (bm25 is negative; lower is better)."""
        if not collection and not year:
            # Rank inside FTS first and join only the top rows: half the time at 100k papers.
            sql = ("select p.id, f.score from (select rowid, bm25(papers_fts, ?, ?, ?, ?) as score "
                   "from papers_fts where papers_fts match ? order by score limit ?) f "
                   "join papers p on p.rowid = f.rowid order by f.score")
            rows = self.db.execute(sql, [*weights, match, int(limit)])
            return [(pid, float(score)) for pid, score in rows]
        sql = ("select p.id, bm25(papers_fts, ?, ?, ?, ?) as score from papers_fts "
               "join papers p on p.rowid = papers_fts.rowid where papers_fts match ?")
        args: list = [*weights, match]
        if collection:
            # 'ICLR' finds 'ICLR 2026': a venue without its year is what people type.
            sql += " and (p.collection = ? collate nocase or p.collection like ?)"
            args += [collection, collection + " %"]
        if year:
            sql += " and p.year = ?"
            args.append(int(year))
        sql += " order by score limit ?"
        args.append(int(limit))
        return [(pid, float(score)) for pid, score in self.db.execute(sql, args)]


    def term_stats(self, words: Iterable[str], *, counts: bool = True) -> dict[str, tuple[str, int]]:
        """word -> (the term the index keeps it under, how many papers hold it).

        The term is lower-cased and Porter-stemmed ('Videos' -> 'video'), '' when the
        tokenizer keeps nothing of the word (its count is then 0). counts=False skips
        the counting (every count 0): for callers that only need the terms.
        """
        words = list(dict.fromkeys(words))
        stems = self._stems(words)
        counts = self._doc_counts(t for t in stems.values() if t) if counts else {}
        return {w: (stems.get(w, ""), counts.get(stems.get(w, ""), 0)) for w in words}

    def _stems(self, words: Iterable[str]) -> dict[str, str]:
        """word -> its FTS term, from FTS5's own tokenizer in a private in-memory table."""
        words = [w for w in dict.fromkeys(words) if w]
        if not words:
            return {}
        probe = getattr(self._local, "stem_probe", None)
        if probe is None:
            probe = sqlite3.connect(":memory:", check_same_thread=False)
            # The tokenizer papers_fts was created with in m001.
            probe.execute("create virtual table probe using fts5(w, "
                          "tokenize='porter unicode61 remove_diacritics 2')")
            probe.execute("create virtual table probe_terms using fts5vocab(probe, instance)")
            self._local.stem_probe = probe
        with probe:
            probe.executemany("insert into probe(rowid, w) values (?, ?)", enumerate(words))
            terms = {words[doc]: term for doc, term in probe.execute("select doc, term from probe_terms")}
            probe.execute("delete from probe")
        return terms

    def _doc_counts(self, terms: Iterable[str]) -> dict[str, int]:
        """FTS term -> how many papers hold it (0 for unknown terms)."""
        terms = sorted(set(terms))
        if not getattr(self._local, "fts_vocab", False):
            self.db.execute("create virtual table if not exists temp.papers_fts_terms "
                            "using fts5vocab(main, papers_fts, row)")
            self._local.fts_vocab = True
        counts = dict.fromkeys(terms, 0)
        for i in range(0, len(terms), 500):
            chunk = terms[i : i + 500]
            marks = ",".join("?" * len(chunk))
            counts.update(self.db.execute(
                f"select term, doc from temp.papers_fts_terms where term in ({marks})", chunk).fetchall())
        return counts

    # -- summaries cache -----------------------------------------------------


    def put_summary(self, content_hash: str, backend: str, data: dict, *, now: float) -> bool:
        """Cache a summary; False (not cached) when another writer holds the database.

        Replies compute summaries on the way (search results show TL;DRs), so a cache
        write must not make a reply wait out someone else's long write, or fail after it.
        """
        return self._cache_write(self._SUMMARY_UPSERT,
                                [content_hash, backend, json.dumps(data, ensure_ascii=False), now])

    def _cache_write(self, sql: str, params: Sequence) -> bool:
        """Run one write a reply may skip (a cache); False, not an error, when the file is read-only
        or another writer holds it past CACHE_BUSY_MS: the reply goes on without it."""
        if self.read_only:  # a read-only volume: what was computed is shown, just not kept
            return False
        if not self._write_lock.acquire(timeout=CACHE_BUSY_MS / 1000):
            return False  # a thread of ours is queued for the write lock already
        conn = self.db.conn
        conn.execute(f"PRAGMA busy_timeout = {CACHE_BUSY_MS}")
        try:
            with self.transaction() as db:
                db.execute(sql, params)
            return True
        except sqlite3.OperationalError as e:
            if not is_busy(e):
                raise
            return False
        finally:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            self._write_lock.release()

    # -- maintenance ---------------------------------------------------------
    def integrity_ok(self) -> bool:
        return self.db.execute("pragma integrity_check").fetchone()[0] == "ok"

    def backup_to(self, target: str | Path, *, force: bool = False) -> BackupResult:
        """A consistent, verified copy of the live database; atomic, so target is never half-written.

        The forgotten list goes inside the copy (its forgotten_members table) and beside it
        (target.forgotten, written even when empty, so the restore steps can always copy it).
        """
        target = Path(target)
        if target.exists() and not force:
            raise StoreError(f"{target} exists; pass --force to overwrite it")
        if target.exists() and target.resolve() == Path(self.path).resolve():
            raise StoreError("the backup cannot overwrite the live database itself")
        # Copy to temporary names beside the target, verify, then rename: a crash, a full disk or
        # a failed check leaves any previous backup at target untouched and no new one half made.
        tmp = target.with_name(f".{target.name}.partial-{os.getpid()}")
        listed = target.with_name(f"{target.name}.forgotten")
        listed_tmp = target.with_name(f".{listed.name}.partial-{os.getpid()}")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            _remove_db_files(tmp)
            dest = sqlite3.connect(str(tmp))
            try:
                self.db.conn.backup(dest)  # SQLite's online backup: consistent while others write
                forgotten = self.forgotten_hashes()
                if _has_table(dest, "forgotten_members"):  # the list travels inside the copy too
                    with dest:
                        dest.executemany("insert or ignore into forgotten_members(hash) values (?)",
                                         [(h,) for h in sorted(forgotten)])
            finally:
                dest.close()
            result = self._verify(tmp, target)
            _write_durably(listed_tmp, "".join(h + "\n" for h in sorted(forgotten)))
            for side in ("-wal", "-shm"):
                Path(f"{target}{side}").unlink(missing_ok=True)
            os.replace(listed_tmp, listed)  # the list first: a lone list never looks like a backup
            os.replace(tmp, target)
            return result
        except (OSError, sqlite3.OperationalError) as e:  # a full disk, a folder it cannot write
            raise StoreError(f"cannot write the backup {target}: {getattr(e, 'strerror', None) or e}; "
                             "no backup was written there") from None
        finally:
            _remove_db_files(tmp)
            listed_tmp.unlink(missing_ok=True)

    @staticmethod
    def _verify(copy: Path, final: Path) -> BackupResult:
        store = SQLiteStore(copy, migrate=False)
        try:
            if not store.integrity_ok():
                raise StoreError(f"the copy failed SQLite's integrity check; {final} not written")
            return BackupResult(final, store.count_papers(), store.schema_version(), copy.stat().st_size)
        finally:
            store.close()

    # -- claims on the daily posts (bot/posting.py) ---------------------------------------












    # -- reactions as feedback: the log, the papers behind messages, reading lists (store/feedback.py) --










    # -- the forgotten-members list ----------------------------------------------------
    # In the database (forgotten_members, m012: a backup file carries it) and in a file beside it
    # (paperclub.db.forgotten: restoring an older file over the database cannot shorten it).
    def _forgotten_path(self) -> Path | None:
        return None if self.path == ":memory:" else Path(self.path + ".forgotten")

    def _forgotten_in_file(self) -> set[str]:
        path = self._forgotten_path()
        if path is None or not path.exists():
            return set()
        return {line.strip() for line in path.read_text().splitlines() if line.strip()}

    def _forgotten_in_table(self) -> set[str]:
        if not _has_table(self.db.conn, "forgotten_members"):  # a database from before m012
            return set()
        return {r[0] for r in self.db.execute("select hash from forgotten_members")}

    def forgotten_hashes(self) -> set[str]:
        """Hashes (store.text.member_hash) of every member who ran forget-me here: both lists."""
        return self._forgotten_in_file() | self._forgotten_in_table()

    def _merge_forgotten(self) -> None:
        # At start-up: a restored backup brings its list in the table, the volume keeps the file;
        # each gets what the other has, so the next backup and the next restore both keep it all.
        in_file, in_table = self._forgotten_in_file(), self._forgotten_in_table()
        path = self._forgotten_path()
        if path is not None and in_table - in_file:
            _append_durably(path, sorted(in_table - in_file))
        if in_file - in_table:
            with self.transaction() as db:
                db.conn.executemany("insert or ignore into forgotten_members(hash) values (?)",
                                    [(h,) for h in sorted(in_file - in_table)])

    def _remember_forgotten(self, db, user: str) -> None:
        # The file is written (and fsynced) before the transaction commits: a crash between
        # leaves the member listed, and the next start-up forgets them.
        digest = member_hash(user)
        path = self._forgotten_path()
        if path is not None and digest not in self._forgotten_in_file():
            _append_durably(path, [digest])
        db.execute("insert or ignore into forgotten_members(hash) values (?)", [digest])

    # -- sources: cursors and health, announcements, channel feeds ---------------------








    # -- the reading group (store/club.py holds the logic) -----------------------------



















def _unwritable(db: str) -> str | None:
    """Why this process cannot create or write the database at db (SQLite's own error names
    neither the path nor the cause); None when it can."""
    if db == ":memory:":
        return None
    path = Path(db).absolute()
    folder = next((p for p in path.parents if p.exists()), None)  # Store creates the rest
    for target in ([path] if path.exists() else []) + ([folder] if folder else []):
        if not os.access(target, os.W_OK):
            if os.statvfs(target).f_flag & os.ST_RDONLY:
                return (f"cannot write the database {path}: {target} is on a read-only file system. "
                        "Mount a writable volume there, or point PAPERCLUB_DB at a writable path.")
            st = target.stat()
            return (f"cannot write the database {path}: permission denied on {target} "
                    f"(owned by uid {st.st_uid}, mode {st.st_mode & 0o777:o}; paperclub runs as uid "
                    f"{os.getuid()}). Make it writable by that uid (for a Docker volume: "
                    f"chown -R {os.getuid()} on it), or point PAPERCLUB_DB at a writable path.")
    return None


def read_forgotten_list(path: Path) -> set[str]:
    """The hashes in a forget-me list file (PATH.forgotten); StoreError if it is not one."""
    try:
        lines = [line.strip() for line in path.read_text(encoding="ascii").splitlines() if line.strip()]
    except UnicodeDecodeError:
        raise StoreError(f"{path} is not a forget-me list (it is not text: a database?); "
                         "nothing was restored") from None
    except OSError as e:
        raise StoreError(f"cannot read the forget-me list {path}: {e.strerror or e}") from None
    bad = next((n for n, line in enumerate(lines, 1) if not _LISTED.fullmatch(line)), None)
    if bad is not None:
        raise StoreError(f"{path} is not a forget-me list (line {bad} is not a member's hash); nothing was restored")
    return set(lines)


def restore_sqlite(backup: str | Path, target: str | Path, *, lists: Iterable[str | Path] = ()) -> RestoreResult:
    """Put a verified copy of `backup` (made by backup_to) in place of the database at target,
    keeping every forget-me request, then migrate it and forget again everyone listed.

    The list kept is everything known: the live database's (its file and table), the backup's
    own (inside it and beside it), every *.forgotten list in the backup's folder (the other
    backups kept with it: the newest knows the latest requests) and each of `lists`. It goes
    into target.forgotten, which the restored database merges and re-applies as at every start
    (reapply_forgotten). Nothing changes at target until the copy has passed its checks.
    """
    backup, target = Path(backup), Path(target)
    if not backup.is_file():
        raise NoDatabase(f"no backup at {backup}")
    if target.exists() and backup.resolve() == target.resolve():
        raise StoreError(f"{backup} is the database itself: give a backup made by `paperclub backup`")
    if why := _unwritable(str(target)):  # a read-only volume: said as for any write, nothing read or changed
        raise ReadOnlyStorage(why)
    beside = sorted(p for p in backup.absolute().parent.glob("*.forgotten") if not p.name.startswith("."))
    read = [Path(p) for p in dict.fromkeys([*beside, *map(Path, lists)])]
    listed: set[str] = set()
    for path in read:
        listed |= read_forgotten_list(path)
    tmp = target.with_name(f".{target.name}.restore-{os.getpid()}")
    try:
        if target.is_file():  # the live list, its table included (a restore from a fresh volume has none)
            live = SQLiteStore(target, migrate=False)
            try:
                listed |= live.forgotten_hashes()
            except StoreError:  # a damaged database (the reason to restore): its file beside it still counts
                listed |= live._forgotten_in_file()
            finally:
                live.close()
        _remove_db_files(tmp)
        source = SQLiteStore(backup, migrate=False)
        try:
            source.schema_version()  # a newer paperclub's backup is refused here (NewerSchema), untouched
            listed |= source.forgotten_hashes()
            dest = sqlite3.connect(str(tmp))
            try:
                source.db.conn.backup(dest)
            finally:
                dest.close()
        finally:
            source.close()
        SQLiteStore._verify(tmp, target)
        own = Path(f"{target}.forgotten")
        # The list first, then the database: a crash between leaves the old database with a
        # longer list, never the restored one without it. The old -wal/-shm belong to the old file.
        missing = sorted(listed - (read_forgotten_list(own) if own.exists() else set()))
        if missing:
            _append_durably(own, missing)
        for side in ("-wal", "-shm"):
            Path(f"{target}{side}").unlink(missing_ok=True)
        os.replace(tmp, target)
    except (OSError, sqlite3.Error) as e:
        raise StoreError(f"cannot restore {backup} to {target}: {getattr(e, 'strerror', None) or e}") from None
    finally:
        _remove_db_files(tmp)
    restored = SQLiteStore(target, migrate=False)
    try:  # what every start does (SQLiteStore.__init__), here to count the members forgotten again
        restored.migrate()
        again = restored.reapply_forgotten()
        return RestoreResult(target, restored.count_papers(), restored.schema_version(),
                             len(restored.forgotten_hashes()), again, tuple(read))
    finally:
        restored.close()
