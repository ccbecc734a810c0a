"""What the bot says to Slack passes here: every chat.* and views.* call (SafeClient) and every
respond() (RetryingRespond) sends its text through the one gate, bot.blocks.outgoing.

RetryingRespond also retries a reply the response_url refuses (429, 5xx) for a few seconds.
"""
from __future__ import annotations

import json
import time
from typing import Callable

from slack_sdk import WebClient

from . import blocks as bk

RESPOND_TRIES = 4  # a reply the response_url refuses (429, 5xx) is sent again, for a few seconds


# Web API methods that carry text members see; SafeClient sends their payloads through bk.outgoing.
_SPEAKING = ("chat.", "views.")


class SafeClient(WebClient):
    """A WebClient whose messages and views pass bk.outgoing first: no injected <!channel> or <@U>."""

    def api_call(self, api_method: str, **kwargs):
        if api_method.startswith(_SPEAKING):
            for part in ("json", "params", "data"):
                if isinstance(kwargs.get(part), dict):
                    kwargs[part] = _outgoing_fields(kwargs[part])
        return super().api_call(api_method, **kwargs)


def _outgoing_fields(fields: dict) -> dict:
    out = dict(fields)
    for key in ("text", "blocks", "view", "attachments"):
        value = out.get(key)
        if isinstance(value, str) and key != "text":  # sent form-encoded: JSON in a string
            try:
                out[key] = json.dumps(bk.outgoing(json.loads(value)))
            except ValueError:
                pass
        elif value is not None:
            out[key] = bk.outgoing(value)
    return out


class ReplyNotDelivered(Exception):
    """The response_url kept refusing a reply: logged, since the user cannot be told that way."""


class RetryingRespond:
    """Bolt's respond(), except that a reply refused with 429 or 5xx is retried (Retry-After is
    honoured) and one that never gets through raises, instead of vanishing without a trace."""

    def __init__(self, respond, sleep: Callable[[float], None] = time.sleep):
        self.respond, self.sleep = respond, sleep
        self.response_url = respond.response_url

    def __call__(self, *args, **kwargs):
        kwargs = _outgoing_fields(kwargs)
        if args and isinstance(args[0], str):
            args = (bk.outgoing(args[0]), *args[1:])
        for attempt in range(1, RESPOND_TRIES + 1):
            response = self.respond(*args, **kwargs)
            status = response.status_code
            if status < 400:
                return response
            if status != 429 and status < 500:
                break  # e.g. 404: the response_url expired; sending again will not help
            if attempt < RESPOND_TRIES:
                try:
                    wait = float((response.headers or {}).get("Retry-After"))
                except (TypeError, ValueError):
                    wait = 0.5 * 2 ** (attempt - 1)
                self.sleep(min(wait, 10.0))
        raise ReplyNotDelivered(f"Slack refused the reply (HTTP {status}: {str(response.body)[:100]})")


def gate_middleware(context, next):
    """Middleware: every listener's respond() retries refused replies (see RetryingRespond), and
    its client is a SafeClient: both send what they say through bk.outgoing."""
    if context.response_url:
        context["respond"] = RetryingRespond(context.respond)
    client = context.client
    if client is not None and not isinstance(client, SafeClient):
        context["client"] = SafeClient(token=client.token, base_url=client.base_url, timeout=client.timeout,
                                       retry_handlers=client.retry_handlers, logger=client.logger,
                                       headers=client.headers)
    return next()
