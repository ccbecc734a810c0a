"""What the bot says to Slack passes here: every Web API call (SafeClient), every respond()
(RetryingRespond) and every ack() (GatedAck) sends its text through the one gate, bot.blocks.outgoing.

SafeClient gates the fields members read (text, blocks, attachments, views, link unfurls, a file's
comment) whatever the method, so a new method cannot slip past it. Every client the bot holds is
one: gated() wraps any other (the one Bolt builds per request, a test's, the posting machine's copy
with its own retries, deps.slack), and tests/test_outgoing.py fails when bot/ builds a plain
WebClient. Its retries end in time: a call is over within SLACK_CALL_SECONDS of its first failure.
Each attempt ends in time too, and small: its answer (a file upload's as well) is read through
store.sources.http.fetch, the one HTTP helper, within the client's timeout for the whole exchange
and SLACK_MAX_BYTES, where urllib's timeout is per read and it reads any size whole.
RetryingRespond also retries a reply the response_url refuses (429, 5xx) for a few seconds.
"""
from __future__ import annotations

import http.client
import io
import json
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Callable
from urllib.request import Request

import httpx
from slack_bolt.context.ack import Ack
from slack_sdk import WebClient
from slack_sdk.errors import SlackRequestError
from slack_sdk.http_retry.handler import RetryHandler
from slack_sdk.web.file_upload_v2_result import FileUploadV2Result

from store.sources.http import DeadlineError, SourceError, fetch

from . import blocks as bk

RESPOND_TRIES = 4  # a reply the response_url refuses (429, 5xx) is sent again, for a few seconds
# One Web API call, its retries and their waits included, ends within this after its first failure
# (plus one attempt's timeout): a Retry-After of an hour, or a Slack that keeps failing, is an error
# to handle, not a worker thread asleep. A minute's Retry-After is honoured once.
SLACK_CALL_SECONDS = 120.0
# One answer's cap. The largest the bot reads, a conversations.history page of 999 messages with
# their blocks and metadata (bot.posting.HISTORY_PAGE), is a few MB; a body past ten times that is
# not Slack answering, and is dropped as it streams in rather than held whole in memory.
SLACK_MAX_BYTES = 32_000_000


# Payload fields Slack shows to members (as mrkdwn, or holding blocks or attachments that do).
SPEAKING_FIELDS = ("text", "blocks", "attachments", "view", "unfurls", "initial_comment", "user_auth_message",
                   "user_auth_blocks")
_STRINGS = ("text", "initial_comment", "user_auth_message")  # the others, sent form-encoded, are JSON
_PLAIN = {"errors"}  # a modal's field errors are plain text: escaping would show "&amp;"


class SafeClient(WebClient):
    """A WebClient whose every call sends its speaking fields through bk.outgoing first, whose
    retries stop in time for the call to end within SLACK_CALL_SECONDS (WithinDeadline), and
    each of whose attempts ends within `timeout` with at most `max_bytes` read (`fetch`)."""

    max_bytes = SLACK_MAX_BYTES

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.retry_handlers = within_deadline(self.retry_handlers, attempt_seconds=self.timeout)
        self._http: dict[str | None, httpx.Client] = {}  # by the proxy used (None: direct)
        self._http_lock = threading.Lock()

    def api_call(self, api_method: str, **kwargs):
        for part in ("json", "params", "data"):
            if isinstance(kwargs.get(part), dict):
                kwargs[part] = outgoing_fields(kwargs[part])
        return super().api_call(api_method, **kwargs)

    def _http_client(self, url: str) -> httpx.Client:
        """The httpx client for `url`, built at the first call that needs it: gated() builds a
        SafeClient per Bolt request, and one that calls nothing should not pay for an SSL context.
        Verified as urllib verifies (self.ssl, else the system's CAs); through slack_sdk's proxy
        (self.proxy, already read from the environment) unless the host is in no_proxy, as urllib's
        ProxyHandler skips it; one connection per call, as urllib makes, so none is left open when
        an unclosed SafeClient goes."""
        host = urllib.parse.urlsplit(url).hostname or ""
        proxy = self.proxy if self.proxy and not urllib.request.proxy_bypass(host) else None
        with self._http_lock:
            if proxy not in self._http:
                verify = self.ssl if isinstance(self.ssl, ssl.SSLContext) else ssl.create_default_context()
                self._http[proxy] = httpx.Client(verify=verify, proxy=proxy, trust_env=False, follow_redirects=False,
                                                 limits=httpx.Limits(max_keepalive_connections=0))
            return self._http[proxy]

    def _perform_urllib_http_request_internal(self, url: str, req: Request) -> dict:
        """One attempt, as slack_sdk's own sends it (urllib's Request: POST, its headers, its body),
        read through `fetch`. Returns what slack_sdk's returns for a 2xx; any other status raises
        urllib's HTTPError, so the SDK's 429 and 5xx handling (and WithinDeadline) run unchanged.

        A slow answer raises TimeoutError and a connection refused, broken or timed out before the
        request was through urllib's URLError, as urllib would (callers and the SDK's handlers
        already know both: bot.posting._classify; the SDK's connection handler sends a URLError
        again, not a TimeoutError, which Slack may have acted on); one over the cap, or a
        redirect, SlackRequestError: sending it again would not help."""
        if not url.lower().startswith("http"):  # as slack_sdk's: no file:// or ftp://
            raise SlackRequestError(f"Invalid URL detected: {url}")
        headers = {k: str(v) for k, v in req.header_items() if k.lower() != "content-length"}  # httpx counts
        if req.data is not None and not req.has_header("Content-type"):  # urllib's default (a file upload)
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        try:
            answer = fetch(self._http_client(url), req.get_method(), url, deadline=float(self.timeout),
                           max_bytes=self.max_bytes, max_redirects=0, content=req.data, headers=headers)
        except DeadlineError as e:
            if not e.sent:  # as urllib's: the SDK's connection handler sends it again, Slack never had it
                raise urllib.error.URLError(TimeoutError(f"could not reach Slack within {self.timeout:g} s")) from None
            raise TimeoutError(f"Slack sent no whole answer within {self.timeout:g} s") from None
        except SourceError as e:  # over the cap, or a redirect
            raise SlackRequestError(f"Slack API: {e}") from None
        except httpx.HTTPError as e:
            raise urllib.error.URLError(str(e) or type(e).__name__) from e
        message = http.client.HTTPMessage()  # the headers as urllib gives them (get_content_charset, items)
        for name, value in answer.headers.raw:
            message[name.decode("latin-1")] = value.decode("latin-1")
        if not 200 <= answer.status_code < 300:
            raise urllib.error.HTTPError(url, answer.status_code, answer.reason_phrase, message,
                                         io.BytesIO(answer.content))
        if message.get_content_type() == "application/gzip":  # admin.analytics.getFile, as slack_sdk
            return {"status": answer.status_code, "headers": message, "body": answer.content}
        body = answer.content.decode(message.get_content_charset() or "utf-8")
        return {"status": answer.status_code, "headers": message, "body": body}

    def _upload_file(self, *, url: str, data: bytes, **_) -> FileUploadV2Result:
        """files_upload_v2's upload of the file itself, which slack_sdk sends with urlopen past the
        method above: through it instead (its timeout, proxy and ssl are this client's own)."""
        answer = self._perform_urllib_http_request_internal(url, Request(method="POST", url=url, data=data))
        return FileUploadV2Result(status=answer["status"], body=answer["body"])


class WithinDeadline(RetryHandler):
    """`handler`'s retries, only while the call would end within `seconds` of its first failure:
    each retry's wait (Retry-After, or the handler's backoff) and one more attempt of up to
    `attempt_seconds` must fit. The SDK's handlers (slack_sdk.http_retry) have a count, not a clock."""

    def __init__(self, handler: RetryHandler, *, seconds: float = SLACK_CALL_SECONDS, attempt_seconds: float,
                 clock: Callable[[], float] = time.monotonic):
        super().__init__(handler.max_retry_count, handler.interval_calculator)
        self.handler, self.seconds, self.attempt_seconds, self.clock = handler, seconds, attempt_seconds, clock

    def can_retry(self, *, state, request, response=None, error=None) -> bool:
        if state.custom_values is None:
            state.custom_values = {}
        started = state.custom_values.setdefault("paperclub_first_failure", self.clock())
        if not self.handler.can_retry(state=state, request=request, response=response, error=error):
            return False
        wait = _retry_after(response)
        if wait is None:
            wait = self.handler.interval_calculator.calculate_sleep_duration(state.current_attempt)
        return self.clock() - started + wait + self.attempt_seconds <= self.seconds

    def prepare_for_next_attempt(self, *, state, request, response=None, error=None) -> None:
        self.handler.prepare_for_next_attempt(state=state, request=request, response=response, error=error)


def _retry_after(response) -> float | None:
    """A 429's Retry-After in seconds, as the SDK's handler waits it (the header plus under 1 s)."""
    for name, values in ((response.headers or {}).items() if response is not None else ()):
        if name.lower() == "retry-after":
            try:
                return float(values[0] if isinstance(values, list) else values) + 1.0
            except (TypeError, ValueError, IndexError):
                return None
    return None


def within_deadline(handlers: list[RetryHandler], *, attempt_seconds: float) -> list[RetryHandler]:
    """Each handler as a WithinDeadline (one already is stays as it is)."""
    return [h if isinstance(h, WithinDeadline) else WithinDeadline(h, attempt_seconds=attempt_seconds)
            for h in handlers]


def gated(client: WebClient | None, *, retry_handlers: list | None = None) -> SafeClient | None:
    """This client as a SafeClient (itself when it is one and keeps its retries)."""
    if client is None or (isinstance(client, SafeClient) and retry_handlers is None):
        return client
    return SafeClient(token=client.token, base_url=client.base_url, timeout=client.timeout, ssl=client.ssl,
                      proxy=client.proxy, headers=dict(client.headers or {}), logger=client.logger,
                      retry_handlers=client.retry_handlers if retry_handlers is None else retry_handlers)


def outgoing_fields(fields: dict) -> dict:
    """A call's or reply's fields with every speaking one through bk.outgoing (JSON strings too)."""
    out = dict(fields)
    for key in SPEAKING_FIELDS:
        value = out.get(key)
        if value is None:
            continue
        if isinstance(value, str) and key not in _STRINGS:
            try:  # sent form-encoded: JSON in a string
                out[key] = json.dumps(bk.outgoing(json.loads(value)))
            except ValueError:
                out[key] = bk.outgoing(value)
        else:
            out[key] = bk.outgoing(value)
    return out


def _plain(value):
    """Block Kit objects (slack_sdk models) as the dicts Slack receives, so the gate sees them."""
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


class GatedAck(Ack):
    """Bolt's ack(), its text, blocks and views through bk.outgoing (a modal's errors stay plain)."""

    def __call__(self, text="", blocks=None, attachments=None, **kwargs):
        fields = {"text": text, "blocks": _plain(blocks), "attachments": _plain(attachments),
                  **{k: _plain(v) for k, v in kwargs.items()}}
        plain = {k: fields.pop(k) for k in _PLAIN & fields.keys()}
        return super().__call__(**outgoing_fields(fields), **plain)


class ReplyNotDelivered(Exception):
    """The response_url kept refusing a reply: logged, since the user cannot be told that way."""


class RetryingRespond:
    """Bolt's respond(), except that a reply refused with 429 or 5xx is retried (Retry-After is
    honoured) and one that never gets through raises, instead of vanishing without a trace."""

    def __init__(self, respond, sleep: Callable[[float], None] = time.sleep):
        self.respond, self.sleep = respond, sleep
        self.response_url = respond.response_url

    def __call__(self, *args, **kwargs):
        kwargs = outgoing_fields(kwargs)
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
    """Middleware: every listener's respond() retries refused replies (see RetryingRespond), its
    client is a SafeClient and its ack a GatedAck: all three send through bk.outgoing."""
    if context.response_url:
        context["respond"] = RetryingRespond(context.respond)
    if context.client is not None:
        context["client"] = gated(context.client)
    # Bolt made an Ack already (a middleware's arguments are built eagerly); none has answered yet.
    if not isinstance(context.get("ack"), GatedAck) and getattr(context.get("ack"), "response", None) is None:
        context["ack"] = GatedAck()
    return next()
