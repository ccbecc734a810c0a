"""PostgreSQL connection strings as an operator writes them: a postgresql:// URL (one host or
several, a password with any character libpq takes, # included) or libpq's key=value form
(host=... password=...). Which text names a server, and the same text with every password
masked for messages and logs. No driver import: SQLite users never load psycopg.
"""
from __future__ import annotations

import re
from urllib.parse import unquote

URL_PREFIXES = ("postgresql://", "postgres://")
# A key=value connection string starts with a keyword (libpq then rejects one it does not know).
_KEY_VALUE = re.compile(r"^\s*[A-Za-z_]+\s*=")
# password=VALUE in key=value form (VALUE quoted '...' with \' escapes, or up to the next space),
# or in a URL's query (up to the next &); "password VALUE" too, a typo libpq refuses but quotes.
_PASSWORD = re.compile(r"""password\s*=?\s*('(?:[^'\\]|\\.)*'|[^\s&]+)""", re.IGNORECASE)


def is_server_database(url) -> bool:
    """True when url names a PostgreSQL server (a URL or a key=value string), False for a SQLite file."""
    text = str(url)
    return text.startswith(URL_PREFIXES) or bool(_KEY_VALUE.match(text))


def secrets_in(conninfo: str) -> set[str]:
    """Every password the connection string holds, as written and as libpq reads it."""
    found: set[str] = set()
    if "://" in conninfo:
        # libpq reads the user info up to the first '@', unless a '/' comes first.
        rest = conninfo.split("://", 1)[1]
        end = min((i for i in (rest.find("@"), rest.find("/")) if i >= 0), default=-1)
        if end >= 0 and rest[end] == "@" and ":" in rest[:end]:
            found.add(rest[:end].split(":", 1)[1])
    for m in _PASSWORD.finditer(conninfo):
        value = m.group(1)
        found.add(value)
        if value.startswith("'") and value.endswith("'") and len(value) > 1:
            found.add(re.sub(r"\\(.)", r"\1", value[1:-1]))
    return {s for secret in found for s in (secret, unquote(secret)) if s}


def redact(conninfo: str, text: str | None = None) -> str:
    """text (by default the connection string itself) with every password of conninfo as ***."""
    text = conninfo if text is None else text
    for secret in sorted(secrets_in(conninfo), key=len, reverse=True):
        text = text.replace(secret, "***")
    return text
