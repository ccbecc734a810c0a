"""Named errors of the store; the CLI and the bot turn them into one friendly line."""


class StoreError(Exception):
    """Base class for errors a user can act on."""


class PaperNotFound(StoreError):
    """No paper matches the reference."""


class PaperNotInLibrary(PaperNotFound):
    """The reference is an arXiv id or link, or an OpenReview link, of a paper the library lacks."""

    WHERE = {"arxiv": "arXiv", "openreview": "OpenReview"}

    def __init__(self, kind: str, ident: str):
        self.kind, self.ident, self.where = kind, ident, self.WHERE.get(kind, kind)
        super().__init__(f"{self.where} paper {ident} is not in the library yet.")


class IngestError(StoreError):
    """A file could not be read; names the file and line."""

    def __init__(self, path, line, message):
        self.path, self.line, self.message = str(path), line, message
        where = f"{self.path}:{line}" if line else self.path
        super().__init__(f"{where}: {message}")


class NoDatabase(StoreError):
    """There is no database where one was expected, and this call must not create one."""


class SchemaError(StoreError):
    """The database is at a schema this code does not know."""


class ReadOnlyStorage(StoreError):
    """The database cannot be written here (a read-only volume, or no permission)."""


class NewerSchema(SchemaError):
    """A newer paperclub migrated the database: this one refuses to write to it."""


class EmptyQuery(StoreError):
    """The query has nothing to search for."""


class StoreBusy(StoreError):
    """Another writer held the database for longer than the store waits; try again shortly."""


class LeaseLost(StoreError):
    """A write made under a lease was refused: another replica holds it now (or it lapsed)."""
