"""A small client for an OpenAI-compatible chat-completions endpoint (vLLM, Ollama, llama.cpp...).

Optional: summaries work without it. The caller builds the config (bot/config.py
reads the environment); anything that goes wrong here is an LLMError, and the
summary code falls back to the extractive TL;DR. The API key is sent as a
Bearer header and never appears in a repr, a log line or an error message.

The call goes through the one HTTP helper (store/sources/http.py: a total
deadline, a size cap) with redirects off: a redirect from the POST is an
LLMError, so the key never travels to a host other than the configured one.
Only http:// and https:// URLs are accepted, checked when the config is built.
"""
from __future__ import annotations

import json
import logging
import re
import time
from dataclasses import dataclass, field
from typing import Callable
from urllib.parse import urlsplit

import httpx

from store.errors import StoreError

log = logging.getLogger(__name__)

MAX_REPLY_BYTES = 2_000_000  # a chat completion of one sentence is a few KB; more is a broken server


class LLMError(StoreError):
    """The model could not give a usable answer (timeout, HTTP error, malformed reply), or its URL is unusable."""


@dataclass(frozen=True)
class LLMConfig:
    url: str  # base URL such as http://localhost:11434/v1, or the full .../chat/completions
    model: str
    api_key: str | None = field(default=None, repr=False)
    timeout: float = 20.0

    def __post_init__(self):
        parts = urlsplit(self.url.strip())
        if parts.scheme.lower() not in ("http", "https"):
            raise LLMError(f"the LLM URL must start with http:// or https://, not {_redact(self.url.strip())!r}")
        if not parts.hostname:
            raise LLMError("the LLM URL has no host name (expected e.g. http://localhost:11434/v1)")

    def __repr__(self) -> str:
        return f"LLMConfig(url={_redact(self.url)!r}, model={self.model!r}, timeout={self.timeout!r})"


def _endpoint(url: str) -> str:
    url = url.strip().rstrip("/")
    return url if url.endswith("/chat/completions") else url + "/chat/completions"


def _redact(url: str) -> str:
    """The URL without a user:password@ part or a query string (either may hold a key), for log lines."""
    return re.sub(r"//[^/@]*@", "//", url).split("?", 1)[0]


class LLMClient:
    """Chat completions with a timeout, and a cool-down after a timeout so a dead server costs one wait, not one per paper."""

    def __init__(self, config: LLMConfig, *, cooldown: float = 60.0,
                 clock: Callable[[], float] = time.monotonic):
        self.config = config
        self.cooldown = cooldown
        self._clock = clock
        self._down_until = float("-inf")

    @property
    def model(self) -> str:
        return self.config.model

    def __repr__(self) -> str:
        return f"LLMClient(url={_redact(self.config.url)!r}, model={self.config.model!r})"

    def chat(self, messages: list[dict], *, max_tokens: int = 200) -> str:
        """The assistant's reply text; LLMError on any failure."""
        if self._clock() < self._down_until:
            raise LLMError("the model timed out recently; not asking again yet")
        body = {"model": self.config.model, "messages": messages, "temperature": 0,
                "max_tokens": max_tokens, "stream": False}
        headers = {"Accept": "application/json"}
        if self.config.api_key:
            headers["Authorization"] = f"Bearer {self.config.api_key}"
        raw = self._post(body, headers)
        try:
            content = json.loads(raw)["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise LLMError("the model server sent a reply that is not a chat completion") from None
        if not isinstance(content, str) or not content.strip():
            raise LLMError("the model sent an empty answer")
        return content

    def _post(self, body: dict, headers: dict) -> bytes:
        # A new client per call: calls are seconds apart at most, and nothing is shared across threads.
        # fetch (the one HTTP helper) holds the call to a total deadline and the reply to a size cap.
        from store.sources.http import DeadlineError, SourceError, TooLargeError, fetch

        try:
            with httpx.Client(follow_redirects=False) as http:
                response = fetch(http, "POST", _endpoint(self.config.url), json=body, headers=headers,
                                 deadline=self.config.timeout, max_bytes=MAX_REPLY_BYTES, max_redirects=0)
        except DeadlineError:
            self._down_until = self._clock() + self.cooldown
            raise LLMError(f"no answer within {self.config.timeout:g} s") from None
        except TooLargeError:
            raise LLMError("the model server sent a reply of more than 2 MB") from None
        except SourceError:  # the only other one fetch raises: a redirect, never followed
            raise LLMError("the model server answered with a redirect; redirects are not followed, so the "
                           "key is never sent elsewhere: set the URL it redirects to") from None
        except httpx.TransportError as e:  # refused, DNS, TLS, a dropped connection, a garbled response
            raise LLMError(f"cannot reach the model server: {type(e).__name__}: {_reason(e)}") from None
        except httpx.HTTPError as e:
            raise LLMError(f"bad exchange with the model server: {type(e).__name__}") from None
        if response.status_code != 200:
            raise LLMError(f"HTTP {response.status_code} from the model server")
        return response.content


def _reason(e: Exception) -> str:
    """An httpx error's message without any URL in it (a URL may carry a key in its query)."""
    return re.sub(r"\S+://\S+", "<url>", str(e)) or "no detail"


def describe(client: LLMClient) -> str:
    """Where the client points, safe to log."""
    return f"{client.config.model} at {_redact(client.config.url)}"
