"""Logging: one line per event, text or JSON, with Slack tokens scrubbed from every record."""
from __future__ import annotations

import json
import logging
import os
import re
import sys
import time

_TOKEN = re.compile(r"\b(xox[abposr]|xapp|xoxe(?:\.xox[bp])?)-[A-Za-z0-9-]+")
_BEARER = re.compile(r"(Bearer\s+)\S+", re.I)


def redact(text: str) -> str:
    """Hide anything shaped like a Slack token or a bearer credential."""
    return _BEARER.sub(r"\1[redacted]", _TOKEN.sub(r"\1-[redacted]", text))


class RedactingFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return redact(json.dumps(out, ensure_ascii=False))


def configure(level: str = "INFO", fmt: str = "text") -> None:
    handler = logging.StreamHandler(sys.stderr)
    if fmt.lower() == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(RedactingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(getattr(logging, str(level).upper(), logging.INFO))
    # Third-party chatter stays at WARNING unless asked for.
    for noisy in ("sentence_transformers", "transformers", "urllib3", "httpx", "apscheduler",
                  "slack_sdk.socket_mode", "filelock"):
        logging.getLogger(noisy).setLevel(max(root.level, logging.WARNING))


def json_mode() -> bool:
    """True when log lines are JSON (LOG_FORMAT=json): then every line on stderr must be one."""
    handlers = logging.getLogger().handlers
    if handlers:
        return any(isinstance(h.formatter, JsonFormatter) for h in handlers)
    return os.environ.get("LOG_FORMAT", "").lower() == "json"  # failed before logging was set up
