"""A small client for an OpenAI-compatible chat-completions endpoint (vLLM, Ollama, llama.cpp...).

Optional: summaries work without it. The caller builds the config (bot/config.py
reads the environment); anything that goes wrong here is an LLMError, and the
summary code falls back to the extractive TL;DR. The API key is sent as a
Bearer header and never appears in a repr, a log line or an error message.
"""
from __future__ import annotations

import http.client
import json
import logging
import re
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Callable

from store.errors import StoreError

log = logging.getLogger(__name__)


class LLMError(StoreError):
    """The model could not give a usable answer (timeout, HTTP error, malformed reply)."""


@dataclass(frozen=True)
class LLMConfig:
    url: str  # base URL such as http://localhost:11434/v1, or the full .../chat/completions
    model: str
    api_key: str | None = field(default=None, repr=False)
    timeout: float = 20.0

    def __repr__(self) -> str:
        return f"LLMConfig(url={_redact(self.url)!r}, model={self.model!r}, timeout={self.timeout!r})"


def _endpoint(url: str) -> str:
    url = url.rstrip("/")
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
        body = json.dumps({"model": self.config.model, "messages": messages, "temperature": 0,
                           "max_tokens": max_tokens, "stream": False}).encode("utf-8")
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.config.api_key:
            headers["Authorization"] = f"Bearer {self.config.api_key}"
        request = urllib.request.Request(_endpoint(self.config.url), data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.config.timeout) as response:
                raw = response.read(2_000_000)
        except urllib.error.HTTPError as e:
            raise LLMError(f"HTTP {e.code} from the model server") from None
        except (TimeoutError, OSError) as e:  # URLError, socket.timeout and refused connections are OSErrors
            reason = getattr(e, "reason", e)
            if isinstance(reason, TimeoutError) or "timed out" in str(reason):
                self._down_until = self._clock() + self.cooldown
                raise LLMError(f"no answer within {self.config.timeout:g} s") from None
            raise LLMError(f"cannot reach the model server: {reason}") from None
        except (http.client.HTTPException, ValueError) as e:  # garbled response, or a URL urllib rejects
            raise LLMError(f"bad exchange with the model server: {type(e).__name__}") from None
        try:
            content = json.loads(raw)["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise LLMError("the model server sent a reply that is not a chat completion") from None
        if not isinstance(content, str) or not content.strip():
            raise LLMError("the model sent an empty answer")
        return content


def describe(client: LLMClient) -> str:
    """Where the client points, safe to log."""
    return f"{client.config.model} at {_redact(client.config.url)}"
