"""A local fake Slack for tests: Web API, response_url and Socket Mode on 127.0.0.1.

Start it with `start_fake_slack()` (or `with start_fake_slack() as fake:`), point
`WebClient(base_url=fake.api_url)` at it, connect a Socket Mode client with an
`xapp-` token, then drive it with `fake.slash_command(...)`, `fake.event(...)`,
`fake.block_action(...)` and read back `fake.calls()`, `fake.messages(channel)`,
`fake.responses(url)` and `fake.wait_ack(envelope_id)`.

It speaks the wire format that slack_sdk's builtin Socket Mode client needs
(see /work/shared/slack-protocol.md): a plain-TCP WebSocket (no extensions, so
no compression) whose server frames are unmasked, unfragmented text frames.
The WebSocket side is hand-rolled rather than built on `websockets` so the fake
can do what a library hides: refuse to pong, record pings, reset the TCP
connection with RST, and flag client frames that break RFC 6455.

`python tests/fake_slack.py` runs it standalone: it prints the URLs and turns
each stdin line into a slash command, for poking at `paperclub run` by hand.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import select
import socket
import struct
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable
from urllib.parse import parse_qsl, urlsplit

__all__ = [
    "FakeSlack", "FakeSlackError", "Call", "start_fake_slack", "stop_socket_mode",
    "BOT_USER_ID", "BOT_ID", "TEAM_ID", "APP_ID",
]

BOT_USER_ID = "UBOT"
BOT_ID = "B1"
TEAM_ID = "T1"
APP_ID = "A1"
TEAM_DOMAIN = "fake"
VERIFICATION_TOKEN = "fake-verification-token"

_WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
_OP_CONT, _OP_TEXT, _OP_BINARY, _OP_CLOSE, _OP_PING, _OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
_POLL = 0.05  # how often blocked server threads look at their stop flags
TRIGGER_SECONDS = 3.0  # a trigger_id opens a modal only this long after the click or command
# Form bodies carry structured params as JSON strings; decode them so tests read one shape.
_JSON_PARAMS = {"blocks", "attachments", "view", "files", "metadata", "outputs"}
# Methods that take an app-level (xapp-) token; every other method refuses one, as Slack does.
_APP_TOKEN_METHODS = {"apps.connections.open"}
# Slack's special markup in mrkdwn: <!here>, <@U1>, <@U1|name>, <#C1|general>.
_MARKUP = __import__("re").compile(r"<([!@#])([^<>|\s]*)[^<>]*>")
# Methods whose text members see: their payloads are checked for injected markup.
# Methods whose payload members read: the markup check (_check_markup) looks at every one.
_CHECKED = {"chat.postMessage", "chat.postEphemeral", "chat.update", "chat.scheduleMessage", "chat.unfurl",
            "views.publish", "views.open", "views.update", "views.push", "files.completeUploadExternal"}


class FakeSlackError(Exception):
    """The fake cannot do what the test asked (for example: no open Socket Mode connection)."""


class _ApiError(Exception):
    """A Web API error reply: HTTP 200 with {"ok": false, "error": ...}."""


class _Stop(Exception):
    """A WebSocket connection ended (peer closed, killed, or the fake is shutting down)."""


@dataclass(frozen=True)
class Call:
    """One Web API call as the fake received it; `at` is time.monotonic()."""

    method: str
    params: dict
    token: str | None
    at: float


@dataclass
class _Rule:
    """A fault or delay waiting for matching calls; times=None means forever."""

    method: str
    times: int | None
    status: int = 200
    error: str | None = None
    retry_after: int | None = None
    drop: bool = False
    seconds: float = 0.0
    after: bool = False  # delay the response after the call took effect (a slow reply, not a slow call)
    drip: float | None = None  # send the answer one byte per `drip` seconds
    size: int | None = None  # send an ok answer of this many bytes instead (streamed, no Content-Length)

    def take(self, method: str) -> bool:
        """Consume one use if this rule applies to `method`."""
        if self.method not in ("*", method) or self.times == 0:
            return False
        if self.times is not None:
            self.times -= 1
        return True


def start_fake_slack() -> FakeSlack:
    """Start a fake Slack on ephemeral 127.0.0.1 ports; close it with .close() or `with`."""
    return FakeSlack()


def stop_socket_mode(fake: FakeSlack, handler_or_client: Any) -> None:
    """Close a Bolt SocketModeHandler (or builtin SocketModeClient) in ~1 s instead of ~4 s.

    The builtin client's close() waits for its reader's 3 s recv timeout; resetting
    the socket first frees it, and turning reconnects off first stops a new one.
    """
    client = getattr(handler_or_client, "client", handler_or_client)
    client.auto_reconnect_enabled = False
    fake.kill_socket(all_=True)
    client.close()


class FakeSlack:
    """Web API + response_url + Socket Mode server; all public methods are thread-safe."""

    def __init__(self, host: str = "127.0.0.1"):
        self.host = host
        self._lock = threading.RLock()
        self._closing = threading.Event()
        self._ids = itertools.count(1)
        self._last_ts_us = 0
        self.answer_pings = True  # False simulates a half-dead link: the client must notice by itself
        self._users: dict[str, dict] = {}
        self._channels: dict[str, dict] = {}
        self._reset_state()
        self._conns: list[_WsConnection] = []  # open, in connection order
        self._conn_threads: list[threading.Thread] = []  # not yet known to have ended, for close()
        self._connections_total = 0
        self._tickets: set[str] = set()
        self._spread: dict | None = None  # spread(): several connections, redeliveries (None: newest only)
        self._pending: dict[str, dict] = {}  # spread mode: envelopes not acked yet, by id
        self._deliveries: list[tuple[str, int, float]] = []  # spread mode: (envelope id, connection, when)
        self.protocol_errors: list[str] = []
        # Markup a message carried that the bot did not mean (see _check_markup); the test
        # fixtures fail a test that leaves any. Kept across reset(), like protocol_errors.
        self.injections: list[str] = []
        self._members: set[str] = {BOT_USER_ID}  # who may be mentioned: whoever used the app
        self.sent = 0  # answer bytes sent by drip and size faults
        self._channels_seen: set[str] = set()  # channels something happened in: the bot may link them

        self._http = _HttpServer((host, 0), _HttpHandler)
        self._http.fake = self
        self.port = self._http.server_address[1]
        self._ws_listener = socket.create_server((host, 0))
        self.ws_port = self._ws_listener.getsockname()[1]
        self._threads = [
            threading.Thread(target=self._http.serve_forever, args=(_POLL,), name="fake-slack-http", daemon=True),
            threading.Thread(target=self._accept_loop, name="fake-slack-ws-accept", daemon=True),
            threading.Thread(target=self._redeliver_loop, name="fake-slack-redeliver", daemon=True),
        ]
        for t in self._threads:
            t.start()

    # ----------------------------------------------------------------- lifecycle

    @property
    def base_url(self) -> str:
        """Root URL of the HTTP side, e.g. http://127.0.0.1:PORT."""
        return f"http://{self.host}:{self.port}"

    @property
    def api_url(self) -> str:
        """What to pass as WebClient(base_url=...); ends with a slash as slack_sdk expects."""
        return f"{self.base_url}/api/"

    def __enter__(self) -> FakeSlack:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Stop both servers, drop every socket and join every thread the fake started."""
        if self._closing.is_set():
            return
        self._closing.set()
        self._http.shutdown()
        self._http.server_close()  # joins the request threads (daemon_threads is off)
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            conn.stop(reset=True)
        for t in self._threads:
            t.join(timeout=5)
        # Connections still mid-handshake see _closing themselves; join them all.
        for t in self._conn_threads:
            t.join(timeout=5)
        self._ws_listener.close()

    def reset(self) -> None:
        """Forget calls, messages, faults, acks and responses; keep sockets and users/channels."""
        with self._lock:
            self._reset_state()

    def _reset_state(self) -> None:
        """(Re)create everything that reset() clears."""
        self._calls: list[Call] = []
        self._rules: list[_Rule] = []
        self._delays: list[_Rule] = []
        self._overrides: dict[str, Callable[[dict], dict] | dict] = {}
        self._history: dict[str, list[dict]] = {}
        self._ephemeral: list[dict] = []
        self._views: dict[str, dict] = {}
        self._dms: dict[str, str] = {}  # DM channel id -> the member (conversations.open)
        self._modals: list[dict] = []
        self._triggers: dict[str, float] = {}  # trigger_id -> when (monotonic) the fake sent it
        self._uploads: dict[str, dict] = {}
        self._unfurls: list[dict] = []
        self._response_urls: dict[str, dict] = {}
        self._responses: dict[str, list[dict]] = {}
        self._sent: dict[str, float] = {}
        self._acks: dict[str, tuple[dict, float]] = {}
        self._socket_messages: list[dict] = []
        self._pings = 0
        self._pending = {}
        self._deliveries = []

    # --------------------------------------------------------- test-facing setup

    def fail(
        self,
        method: str,
        status: int | None = None,
        retry_after: int | None = 1,
        times: int | None = 1,
        error: str | None = None,
        drop: bool = False,
        drip: float | None = None,
        size: int | None = None,
    ) -> None:
        """Make the next `times` calls of `method` ("*" = any Web API method) fail.

        method="response_url": the next POSTs to any response_url fail the same way;
        method="upload": the next POSTs to an upload URL (files_upload_v2's file).

        No arguments: 429 + Retry-After + ratelimited. `status=500/503`: a server
        error. `error="x"`: HTTP 200 with ok:false. `drop=True`: close the
        connection without any response. `drip=s`: the real answer (the call takes
        effect), one byte every s seconds. `size=n`: an ok answer of n bytes, padded,
        streamed without a Content-Length (`sent` counts what got out). times=None:
        until reset().
        """
        if drop:
            rule = _Rule(method, times, drop=True)
        elif drip or size:
            rule = _Rule(method, times, drip=drip, size=size)
        elif error is not None:
            rule = _Rule(method, times, status=status or 200, error=error)
        else:
            status = status or 429
            rule = _Rule(
                method,
                times,
                status=status,
                error="ratelimited" if status == 429 else "internal_error",
                retry_after=retry_after if status == 429 else None,
            )
        with self._lock:
            self._rules.append(rule)

    def delay(self, method: str, seconds: float, times: int | None = None, after: bool = False) -> None:
        """Answer `method` ("*" = any) only after `seconds`; times=None: until reset().

        after=True: the call takes effect first (a message is posted) and only the
        reply is late, like a Slack that accepted a post but whose answer never arrived.
        """
        with self._lock:
            self._delays.append(_Rule(method, times, seconds=seconds, after=after))

    def respond_with(self, method: str, body: dict | Callable[[dict], dict]) -> None:
        """Serve `method` with this body, or body(params), verbatim (so include "ok" yourself)."""
        with self._lock:
            self._overrides[method] = body

    def add_user(self, user_id: str, **fields: Any) -> None:
        """Override fields users.info returns for `user_id` (e.g. real_name, tz, is_bot)."""
        with self._lock:
            self._users[user_id] = fields
            self._members.add(user_id)

    def add_members(self, *user_ids: str) -> None:
        """Members the bot may mention (besides everyone who sent a command, click or event)."""
        with self._lock:
            self._members.update(user_ids)

    def _check_markup(self, where: str, payload: dict, channel: str | None = None) -> None:
        """Record every <!...>, and every <@U>/<#C> naming someone who never used the app: text
        from an abstract, an interest or a headline that reached Slack unescaped."""
        texts = []

        def walk(value, plain=False):
            if isinstance(value, dict):
                plain = value.get("type") == "plain_text"
                for k, v in value.items():
                    if k in ("text", "initial_comment") and isinstance(v, str):
                        if not plain:
                            texts.append(v)
                    elif k in ("blocks", "view", "attachments", "unfurls") and isinstance(v, str):
                        try:
                            walk(json.loads(v))
                        except ValueError:
                            texts.append(v)
                    else:
                        walk(v, plain)
            elif isinstance(value, list):
                for v in value:
                    walk(v, plain)
        walk(payload)
        with self._lock:
            for text in texts:
                for m in _MARKUP.finditer(text):
                    kind, ident = m.group(1), m.group(2)
                    if kind == "!" or (kind == "@" and ident not in self._members) or (
                            kind == "#" and ident != channel and ident not in self._channels_seen
                            and ident not in self._channels):
                        self.injections.append(f"{where}: {m.group(0)} in {text[:200]!r}")

    def add_channel(self, channel_id: str, **fields: Any) -> None:
        """Override fields conversations.info returns for `channel_id` (e.g. name, is_member)."""
        with self._lock:
            self._channels[channel_id] = fields

    def add_message(self, channel: str, text: str, user: str = "U1", **fields: Any) -> str:
        """Put a message into a channel's history as if someone posted it; returns its ts."""
        with self._lock:
            msg = {"type": "message", "user": user, "text": text, "ts": self._next_ts(), **fields}
            self._history.setdefault(channel, []).append(msg)
            return msg["ts"]

    def add_reaction(self, channel: str, ts: str, name: str, user: str = "U1") -> None:
        """Record that `user` reacted with `name` on a message (what reactions.get will show)."""
        with self._lock:
            _react(self._find_message(channel, ts), name, user)

    # -------------------------------------------------------- test-facing reads

    def calls(self, method: str | None = None) -> list[Call]:
        """Web API calls received so far, oldest first, optionally of one method."""
        with self._lock:
            return [c for c in self._calls if method is None or c.method == method]

    def dm_messages(self, user: str) -> list[dict]:
        """Messages in the bot's DM with `user` (opened with conversations.open), in posting order."""
        with self._lock:
            dm = next((d for d, u in self._dms.items() if u == user), None)
        return self.messages(dm) if dm else []

    def messages(self, channel: str | None = None) -> list[dict]:
        """Messages in a channel's history (all channels if None), in posting order."""
        with self._lock:
            if channel is None:
                msgs = [m for ms in self._history.values() for m in ms]
            else:
                msgs = self._history.get(channel, [])
            return json.loads(json.dumps(msgs))

    def ephemeral_messages(self, channel: str | None = None) -> list[dict]:
        """Ephemeral messages (chat.postEphemeral and ephemeral response_url posts)."""
        with self._lock:
            return [dict(m) for m in self._ephemeral if channel is None or m["channel"] == channel]

    def home_view(self, user_id: str) -> dict | None:
        """The last view published to a user's App Home, or None."""
        with self._lock:
            return self._views.get(user_id)

    def unfurls(self) -> list[dict]:
        """Every accepted chat.unfurl: {channel, ts, unfurl_id, source, unfurls: {url: {blocks}}}."""
        with self._lock:
            return json.loads(json.dumps(self._unfurls))

    def link_shared(self, channel: str, ts: str, urls: list[str], user: str = "U1",
                    source: str = "conversations_history") -> str:
        """Deliver a link_shared event for urls in the message at ts (as Slack does for the app's domains)."""
        from urllib.parse import urlparse

        links = [{"domain": urlparse(u).hostname.removeprefix("www."), "url": u} for u in urls]
        return self.event({"type": "link_shared", "channel": channel, "is_bot_user_member": True, "user": user,
                           "message_ts": ts, "unfurl_id": f"{channel}.{ts.replace('.', '')}.{uuid.uuid4().hex[:8]}",
                           "source": source, "links": links})

    def modals(self) -> list[dict]:
        """Views opened with views.open (modals), oldest first."""
        with self._lock:
            return [dict(v) for v in self._modals]

    def uploads(self) -> dict[str, dict]:
        """Files uploaded through files_upload_v2, by file id."""
        with self._lock:
            return {k: dict(v) for k, v in self._uploads.items()}

    def responses(self, url_or_id: str) -> list[dict]:
        """JSON bodies POSTed to a response_url (given as the URL or its id)."""
        key = url_or_id.rstrip("/").rsplit("/", 1)[-1]
        with self._lock:
            return list(self._responses.get(key, []))

    def acks(self) -> dict[str, dict]:
        """Every ack received so far, by envelope id."""
        with self._lock:
            return {k: v[0] for k, v in self._acks.items()}

    def socket_messages(self) -> list[dict]:
        """Every JSON text frame the client sent, in order."""
        with self._lock:
            return list(self._socket_messages)

    @property
    def pings_received(self) -> int:
        """How many WebSocket pings clients sent."""
        with self._lock:
            return self._pings

    @property
    def connections_total(self) -> int:
        """Socket Mode connections ever opened (completed handshakes)."""
        with self._lock:
            return self._connections_total

    @property
    def connections_open(self) -> int:
        """Socket Mode connections open right now."""
        with self._lock:
            return len(self._conns)

    # ------------------------------------------------------------------ waiting

    def wait_for(self, predicate: Callable[[], Any], timeout: float = 5.0, interval: float = 0.01) -> Any:
        """Poll predicate() until it returns something truthy and return that; else TimeoutError."""
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() >= deadline:
                raise TimeoutError(f"condition not met within {timeout}s: {predicate}")
            time.sleep(interval)

    def wait_connected(self, timeout: float = 5.0, total: int = 1) -> int:
        """Wait until connection number `total` (counting from 1) is open; returns open count."""
        try:
            return self.wait_for(lambda: self._newest_number() >= total and self.connections_open, timeout)
        except TimeoutError:
            raise TimeoutError(
                f"no Socket Mode connection #{total} within {timeout}s "
                f"(total={self.connections_total}, open={self.connections_open})"
            ) from None

    def wait_ack(self, envelope_id: str, timeout: float = 3.0) -> tuple[dict, float]:
        """Wait for the ack of an envelope; returns (ack, seconds between send and ack)."""
        try:
            ack, at = self.wait_for(lambda: self._acks.get(envelope_id), timeout)
        except TimeoutError:
            raise TimeoutError(f"envelope {envelope_id} not acked within {timeout}s") from None
        return ack, at - self._sent[envelope_id]

    def _newest_number(self) -> int:
        """Ordinal of the newest open connection, 0 if none."""
        with self._lock:
            return self._conns[-1].number if self._conns else 0

    # ------------------------------------------------------------- Socket Mode

    def send(self, message: dict) -> None:
        """Send any JSON message on the newest open Socket Mode connection."""
        with self._lock:
            conn = self._conns[-1] if self._conns else None
        if conn is None:
            raise FakeSlackError("no open Socket Mode connection; call wait_connected() first")
        try:
            conn.send_frame(_OP_TEXT, json.dumps(message).encode())
        except OSError as e:
            raise FakeSlackError(f"Socket Mode connection #{conn.number} is gone: {e}") from e

    def send_envelope(self, type_: str, payload: dict, accepts_response_payload: bool = False, **extra: Any) -> str:
        """Send an envelope of `type_` (slash_commands, events_api, interactive); returns its id."""
        envelope_id = str(uuid.uuid4())
        with self._lock:  # whoever acts in an envelope is a member the bot may name
            inner = payload.get("event") or payload
            for who in (payload.get("user_id"), (payload.get("user") or {}).get("id")
                        if isinstance(payload.get("user"), dict) else None, inner.get("user"),
                        inner.get("item_user")):
                if isinstance(who, str) and who:
                    self._members.add(who)
            for where in (payload.get("channel_id"), inner.get("channel"),
                          (inner.get("item") or {}).get("channel") if isinstance(inner.get("item"), dict) else None):
                if isinstance(where, str) and where:
                    self._channels_seen.add(where)
        envelope = {
            "envelope_id": envelope_id,
            "type": type_,
            "accepts_response_payload": accepts_response_payload,
            "payload": payload,
            **extra,
        }
        with self._lock:
            self._sent[envelope_id] = time.monotonic()
            spread = self._spread
        if spread is None:
            self.send(envelope)
            return envelope_id
        with self._lock:
            self._pending[envelope_id] = {"envelope": envelope, "deliveries": 0, "last": None, "at": 0.0,
                                          "again": spread["rng"].random() < spread["duplicate"]}
        self._deliver(envelope_id)
        return envelope_id

    # ------------------------------------------------ several connections (spread mode)

    def spread(self, redeliver_after: float = 1.0, deliveries: int = 4, duplicate: float = 0.0,
               seed: int | None = None) -> None:
        """Serve several Socket Mode connections as Slack does: each envelope goes to one open
        connection chosen at random, and is delivered again (to another one where there is one)
        when it is not acked within `redeliver_after` seconds, up to `deliveries` times in all.
        An events_api redelivery carries retry_attempt/retry_reason, as Slack's retries do.
        `duplicate` is the chance an envelope is delivered once more even though it was acked
        (Slack delivers at least once). Envelopes sent with no connection open wait for one."""
        import random

        with self._lock:
            self._spread = {"after": redeliver_after, "deliveries": deliveries, "duplicate": duplicate,
                            "rng": random.Random(seed)}

    def deliveries(self, envelope_id: str | None = None) -> list[tuple[str, int, float]]:
        """Spread mode: every delivery as (envelope id, connection number, monotonic time)."""
        with self._lock:
            return [d for d in self._deliveries if envelope_id is None or d[0] == envelope_id]

    def pending(self) -> list[str]:
        """Spread mode: envelopes not acked yet (whatever their deliveries)."""
        with self._lock:
            return [e for e in self._pending if e not in self._acks]

    def _deliver(self, envelope_id: str) -> None:
        """Deliver a pending envelope once, to a random open connection (not the last one tried)."""
        with self._lock:
            item = self._pending.get(envelope_id)
            spread = self._spread
            if item is None or spread is None:
                return
            conns = [c for c in self._conns if c.number != item["last"]] or list(self._conns)
            if not conns:
                return  # the loop tries again once a connection is open
            conn = spread["rng"].choice(conns)
            envelope = dict(item["envelope"])
            if item["deliveries"] and envelope["type"] == "events_api":
                envelope["retry_attempt"] = item["deliveries"]
                envelope["retry_reason"] = "timeout"
            item["deliveries"] += 1
            item["last"], item["at"] = conn.number, time.monotonic()
            self._deliveries.append((envelope_id, conn.number, item["at"]))
        try:
            conn.send_frame(_OP_TEXT, json.dumps(envelope).encode())
        except OSError:
            pass  # not acked: delivered again elsewhere

    def _redeliver_loop(self) -> None:
        while not self._closing.wait(_POLL / 2):
            due = []
            with self._lock:
                spread = self._spread
                if spread is None:
                    continue
                now = time.monotonic()
                for eid, item in list(self._pending.items()):
                    acked = eid in self._acks
                    if acked and not item["again"]:
                        del self._pending[eid]
                    elif acked:  # the at-least-once duplicate, to another connection
                        item["again"] = False
                        due.append(eid)
                    elif item["deliveries"] >= spread["deliveries"]:
                        del self._pending[eid]  # Slack gives up too
                    elif item["deliveries"] == 0 or now - item["at"] >= spread["after"]:
                        due.append(eid)
            for eid in due:
                self._deliver(eid)

    def send_disconnect(self, reason: str = "refresh_requested") -> None:
        """Ask the client to reconnect, as Slack does every few hours."""
        self.send({"type": "disconnect", "reason": reason, "debug_info": {"host": "applink-fake"}})

    def kill_socket(self, all_: bool = False, reset: bool = True) -> int:
        """Drop the newest Socket Mode connection (or all) without a close frame; returns how many.

        reset=True sends a TCP RST (the client notices at once); reset=False a
        plain FIN, which the builtin client only notices through its ping check.
        """
        with self._lock:
            conns = list(self._conns) if all_ else self._conns[-1:]
        for conn in conns:
            conn.stop(reset=reset)
        for conn in conns:
            conn.thread.join(timeout=5)
        return len(conns)

    def slash_command(
        self, text: str, user: str = "U1", channel: str = "C1", command: str = "/paper", **fields: Any
    ) -> str:
        """Send a slash command envelope with a fresh response_url and trigger_id; returns its id."""
        payload = {
            "token": VERIFICATION_TOKEN,
            "team_id": TEAM_ID,
            "team_domain": TEAM_DOMAIN,
            "channel_id": channel,
            "channel_name": self._channel_info(channel)["name"],
            "user_id": user,
            "user_name": self._user_info(user)["name"],
            "command": command,
            "text": text,
            "api_app_id": APP_ID,
            "is_enterprise_install": "false",
            "response_url": self.new_response_url(channel=channel, user=user),
            "trigger_id": self._trigger_id(),
            **fields,
        }
        return self.send_envelope("slash_commands", payload, accepts_response_payload=True)

    def block_action(
        self,
        action_id: str,
        value: str | None = None,
        user: str = "U1",
        channel: str = "C1",
        response_url: str | None = None,
        message_ts: str | None = None,
        block_id: str = "b1",
        is_ephemeral: bool = False,
    ) -> str:
        """Send a button click (block_actions) on a message; returns the envelope id.

        The message defaults to the newest one in the channel's history; its
        response_url can replace or delete that message, as Slack's does.
        """
        with self._lock:
            history = self._history.get(channel, [])
            if message_ts is None and history and not is_ephemeral:
                message_ts = history[-1]["ts"]
            message = next((m for m in history if m["ts"] == message_ts), None)
            message = json.loads(json.dumps(message)) if message else None
        message_ts = message_ts or self._next_ts()
        action_ts = f"{time.time():.6f}"
        payload = {
            "type": "block_actions",
            "user": {"id": user, "username": self._user_info(user)["name"], "name": self._user_info(user)["name"],
                     "team_id": TEAM_ID},
            "api_app_id": APP_ID,
            "token": VERIFICATION_TOKEN,
            "container": {"type": "message", "message_ts": message_ts, "channel_id": channel,
                          "is_ephemeral": is_ephemeral},
            "trigger_id": self._trigger_id(),
            "team": {"id": TEAM_ID, "domain": TEAM_DOMAIN},
            "enterprise": None,
            "is_enterprise_install": False,
            "channel": {"id": channel, "name": self._channel_info(channel)["name"]},
            "state": {"values": {}},
            "response_url": response_url
            or self.new_response_url(channel=channel, user=user, message_ts=None if is_ephemeral else message_ts),
            "actions": [
                {
                    "action_id": action_id,
                    "block_id": block_id,
                    "text": {"type": "plain_text", "text": action_id, "emoji": True},
                    "value": value,
                    "type": "button",
                    "action_ts": action_ts,
                }
            ],
        }
        if value is None:
            del payload["actions"][0]["value"]
        if not is_ephemeral:
            payload["message"] = message or {"type": "message", "user": BOT_USER_ID, "bot_id": BOT_ID,
                                             "text": "", "ts": message_ts}
        return self.send_envelope("interactive", payload)

    def event(self, event: dict, event_id: str | None = None, retry_attempt: int = 0, retry_reason: str = "") -> str:
        """Send an Events API envelope wrapping `event` in an event_callback; returns the envelope id."""
        event = dict(event)
        event.setdefault("event_ts", f"{time.time():.6f}")
        payload = {
            "token": VERIFICATION_TOKEN,
            "team_id": TEAM_ID,
            "api_app_id": APP_ID,
            "event": event,
            "type": "event_callback",
            "event_id": event_id or f"Ev{uuid.uuid4().hex[:10].upper()}",
            "event_time": int(time.time()),
            "authorizations": [
                {"enterprise_id": None, "team_id": TEAM_ID, "user_id": BOT_USER_ID, "is_bot": True,
                 "is_enterprise_install": False}
            ],
            "is_ext_shared_channel": False,
            "event_context": f"4-fake-{uuid.uuid4().hex[:12]}",
        }
        return self.send_envelope("events_api", payload, retry_attempt=retry_attempt, retry_reason=retry_reason)

    def new_response_url(self, channel: str = "C1", user: str = "U1", message_ts: str | None = None) -> str:
        """Issue a response_url; posts to it land in responses() and, per Slack's rules, the channel."""
        rid = f"R{next(self._ids)}"
        with self._lock:
            self._response_urls[rid] = {"channel": channel, "user": user, "message_ts": message_ts}
            self._members.add(user)
            self._channels_seen.add(channel)
            self._responses[rid] = []
        return f"{self.base_url}/respond/{rid}"

    def _trigger_id(self) -> str:
        """A fresh trigger_id in Slack's shape, remembered so views.open can tell when it has expired."""
        trigger = f"{next(self._ids)}.{uuid.uuid4().int % 10**12}.{uuid.uuid4().hex[:32]}"
        with self._lock:
            self._triggers[trigger] = time.monotonic()
        return trigger

    # -------------------------------------------------- WebSocket server plumbing

    def _accept_loop(self) -> None:
        """Accept WebSocket clients until close()."""
        while not self._closing.is_set():
            ready, _, _ = select.select([self._ws_listener], [], [], _POLL)
            if not ready:
                continue
            try:
                sock, _ = self._ws_listener.accept()
            except OSError:
                continue
            # Each frame leaves at once, as from Slack's servers: with Nagle on, a frame sent right after
            # another waited for the client's ACK, and that delay hid clients stalling on a refresh.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = _WsConnection(self, sock)
            self._conn_threads = [t for t in self._conn_threads if t.is_alive()] + [conn.thread]
            conn.thread.start()

    def _handshake_ok(self, conn: _WsConnection, path: str) -> None:
        """Register a connection that completed the handshake and greet it with hello."""
        with conn.send_lock:  # held until hello is out, so no envelope can overtake it
            with self._lock:
                self._connections_total += 1
                conn.number = self._connections_total
                self._conns.append(conn)
                hello = {
                    "type": "hello",
                    "num_connections": len(self._conns),
                    "connection_info": {"app_id": APP_ID},
                    "debug_info": {"host": "applink-fake", "build_number": 1, "approximate_connection_time": 18060},
                }
            conn.send_frame(_OP_TEXT, json.dumps(hello).encode())

    def _connection_gone(self, conn: _WsConnection) -> None:
        """Forget a closed connection."""
        with self._lock:
            if conn in self._conns:
                self._conns.remove(conn)

    def _ticket_valid(self, path: str) -> bool:
        """Only URLs this fake issued through apps.connections.open may connect."""
        query = dict(parse_qsl(urlsplit(path).query))
        with self._lock:
            return urlsplit(path).path.rstrip("/") == "/link" and query.get("ticket") in self._tickets

    def _on_text(self, conn: _WsConnection, text: str) -> None:
        """Record a client text frame; an envelope_id makes it an ack."""
        now = time.monotonic()
        try:
            msg = json.loads(text)
        except ValueError:
            self._protocol_error(f"connection #{conn.number} sent non-JSON text: {text[:200]!r}")
            return
        with self._lock:
            self._socket_messages.append(msg)
            if isinstance(msg, dict) and "envelope_id" in msg:
                self._acks.setdefault(msg["envelope_id"], (msg, now))

    def _on_ping(self) -> None:
        """Count pings (the builtin client pings every ping_interval)."""
        with self._lock:
            self._pings += 1

    def _protocol_error(self, what: str) -> None:
        """Remember a client that broke the protocol; tests can assert there were none."""
        with self._lock:
            self.protocol_errors.append(what)

    # ------------------------------------------------------- Web API plumbing

    def _handle_api(self, method: str, params: dict, token: str | None,
                    header_token: bool) -> tuple[int, dict, dict, _Rule | None]:
        """Answer one Web API call: (HTTP status, JSON body, extra headers, the fault that says how to
        send it: drip or size); status 0 = drop."""
        with self._lock:
            self._calls.append(Call(method, params, token, time.monotonic()))
            if method in _CHECKED:
                if method == "views.publish" and isinstance(params.get("user_id"), str):
                    self._members.add(params["user_id"])  # a member's own Home tab may name them
                self._check_markup(method, params, params.get("channel"))
            rules = [r for r in self._delays if r.take(method)]
            delay = sum(r.seconds for r in rules if not r.after)
            delay_after = sum(r.seconds for r in rules if r.after)
            fault = next((r for r in self._rules if r.take(method)), None)
            self._rules = [r for r in self._rules if r.times != 0]
        if delay:
            self._closing.wait(delay)
        if delay_after and fault is None:
            reply = self._answer_api(method, params, token, header_token)
            self._closing.wait(delay_after)
            return *reply, None
        if fault is not None and (fault.drip or fault.size):
            return *self._answer_api(method, params, token, header_token), fault
        if fault is not None:
            if fault.drop:
                return 0, {}, {}, None
            headers = {"Retry-After": str(fault.retry_after)} if fault.retry_after is not None else {}
            return fault.status, {"ok": False, "error": fault.error}, headers, None
        return *self._answer_api(method, params, token, header_token), None

    def _answer_api(self, method: str, params: dict, token: str | None, header_token: bool) -> tuple[int, dict, dict]:
        """Run the method (or its override) and build the reply."""
        try:
            self._check_token(method, token, header_token)
            with self._lock:
                override = self._overrides.get(method)
                if override is not None:
                    return 200, override(params) if callable(override) else dict(override), {}
                handler = _METHODS.get(method)
                if handler is None:
                    raise _ApiError("unknown_method")
                return 200, {"ok": True, **handler(self, params)}, {}
        except _ApiError as e:
            return 200, {"ok": False, "error": str(e)}, {}

    def _check_token(self, method: str, token: str | None, header_token: bool) -> None:
        """Reject calls with the wrong kind of token, as Slack does."""
        if not token:
            raise _ApiError("not_authed")
        if method in _APP_TOKEN_METHODS:
            if not header_token:
                raise _ApiError("not_authed")  # apps.connections.open reads only the header
            if not token.startswith("xapp-"):
                raise _ApiError("not_allowed_token_type")
        elif token.startswith("xapp-"):
            raise _ApiError("not_allowed_token_type")
        elif not token.startswith("xox"):
            raise _ApiError("invalid_auth")

    def _route_fault(self, route: str) -> _Rule | None:
        """A fault queued with fail("response_url" or "upload", ...), consumed by this POST there."""
        with self._lock:
            fault = next((r for r in self._rules if r.method == route and r.take(route)), None)
            self._rules = [r for r in self._rules if r.times != 0]
        return fault

    def _handle_respond(self, rid: str, body: dict) -> int:
        """A POST to a response_url: record it and apply it to the channel like Slack."""
        with self._lock:
            ctx = self._response_urls.get(rid)
            if ctx is None:
                return 404
            self._responses[rid].append(body)
            self._check_markup("response_url", body, ctx["channel"])
            channel, ts = ctx["channel"], ctx["message_ts"]
            if body.get("delete_original") and ts:
                self._history[channel] = [m for m in self._history.get(channel, []) if m["ts"] != ts]
            elif body.get("replace_original") and ts:
                msg = self._find_message(channel, ts, missing=None)
                if msg is not None:
                    _apply_content(msg, body)
            elif body.get("response_type") == "in_channel":
                msg = {"type": "message", "user": BOT_USER_ID, "bot_id": BOT_ID, "ts": self._next_ts()}
                _apply_content(msg, body)
                if body.get("thread_ts"):
                    msg["thread_ts"] = body["thread_ts"]
                self._history.setdefault(channel, []).append(msg)
            else:
                msg = {"channel": channel, "user": ctx["user"], "ts": self._next_ts()}
                _apply_content(msg, body)
                self._ephemeral.append(msg)
        return 200

    def _handle_upload(self, file_id: str, data: bytes) -> int:
        """Bytes POSTed to an upload URL from files.getUploadURLExternal."""
        with self._lock:
            upload = self._uploads.get(file_id)
            if upload is None:
                return 404
            upload["content"] = data
        return 200

    def _next_ts(self) -> str:
        """A message ts: wall-clock microseconds, strictly increasing."""
        with self._lock:
            self._last_ts_us = max(int(time.time() * 1e6), self._last_ts_us + 1)
            return f"{self._last_ts_us // 10**6}.{self._last_ts_us % 10**6:06d}"

    def _find_message(self, channel: str, ts: str, missing: type[Exception] | None = _ApiError) -> dict | None:
        """The stored message dict (not a copy) or raise message_not_found."""
        for msg in self._history.get(channel, []):
            if msg["ts"] == ts:
                return msg
        if missing is None:
            return None
        raise _ApiError("message_not_found")

    def _user_info(self, user_id: str) -> dict:
        """users.info's user object; names derive from the id unless add_user() said otherwise."""
        name = "paperclub" if user_id == BOT_USER_ID else user_id.lower()
        real_name = "Paperclub" if user_id == BOT_USER_ID else f"User {user_id}"
        with self._lock:
            extra = self._users.get(user_id, {})
        user = {
            "id": user_id,
            "team_id": TEAM_ID,
            "name": name,
            "real_name": real_name,
            "deleted": False,
            "is_bot": user_id == BOT_USER_ID,
            "tz": "Europe/London",
            "tz_offset": 0,
            "profile": {"display_name": name, "real_name": real_name},
        }
        user.update(extra)
        return user

    def _channel_info(self, channel_id: str) -> dict:
        """conversations.info's channel object, derived from the id unless add_channel() said otherwise."""
        with self._lock:
            extra = self._channels.get(channel_id, {})
        channel = {
            "id": channel_id,
            "name": f"channel-{channel_id.lower()}",
            "is_channel": channel_id.startswith("C"),
            "is_group": channel_id.startswith("G"),
            "is_im": channel_id.startswith("D"),
            "is_private": channel_id.startswith(("G", "D")),
            "is_archived": False,
            "is_member": True,
        }
        channel.update(extra)
        return channel


# --------------------------------------------------------------- Web API methods
# Each takes (fake, params) under fake._lock and returns the reply minus "ok": true.


def _require(params: dict, name: str, error: str) -> Any:
    """A required param, or the error Slack gives when it is missing."""
    value = params.get(name)
    if value in (None, ""):
        raise _ApiError(error)
    return value


def _content(params: dict) -> dict:
    """The message content fields a post or update carries."""
    return {k: params[k] for k in ("text", "blocks", "attachments", "thread_ts", "metadata") if k in params}


def _apply_content(msg: dict, body: dict) -> None:
    """Copy text/blocks/attachments, and metadata (Slack replaces it too: message_metadata_updated
    carries previous_metadata), from a request body onto a stored message."""
    for key in ("text", "blocks", "attachments", "metadata"):
        if key in body:
            msg[key] = body[key]


def _react(msg: dict, name: str, user: str) -> None:
    """Add one user's reaction to a stored message."""
    reactions = msg.setdefault("reactions", [])
    entry = next((r for r in reactions if r["name"] == name), None)
    if entry is None:
        reactions.append({"name": name, "users": [user], "count": 1})
    elif user not in entry["users"]:
        entry["users"].append(user)
        entry["count"] += 1
    else:
        raise _ApiError("already_reacted")


def _auth_test(fake: FakeSlack, params: dict) -> dict:
    return {"url": f"https://{TEAM_DOMAIN}.slack.com/", "team": "Fake Team", "user": "paperclub",
            "team_id": TEAM_ID, "user_id": BOT_USER_ID, "bot_id": BOT_ID, "is_enterprise_install": False}


def _channel_for_post(fake: FakeSlack, params: dict) -> str:
    """The channel a post goes to; unknown id shapes are channel_not_found, an archived channel
    is_archived (as Slack answers chat.postMessage there)."""
    channel = _require(params, "channel", "channel_not_found")
    if not str(channel).startswith(("C", "G", "D")):
        raise _ApiError("channel_not_found")
    if fake._channels.get(channel, {}).get("is_archived"):
        raise _ApiError("is_archived")
    return channel


def _chat_post_message(fake: FakeSlack, params: dict) -> dict:
    channel = _channel_for_post(fake, params)
    if not any(params.get(k) for k in ("text", "blocks", "attachments")):
        raise _ApiError("no_text")
    msg = {"type": "message", "user": BOT_USER_ID, "bot_id": BOT_ID, "app_id": APP_ID, "text": "",
           **_content(params), "ts": fake._next_ts()}
    fake._history.setdefault(channel, []).append(msg)
    return {"channel": channel, "ts": msg["ts"], "message": dict(msg)}


def _chat_post_ephemeral(fake: FakeSlack, params: dict) -> dict:
    channel = _channel_for_post(fake, params)
    user = _require(params, "user", "user_not_in_channel")
    if not any(params.get(k) for k in ("text", "blocks", "attachments")):
        raise _ApiError("no_text")
    ts = fake._next_ts()
    fake._ephemeral.append({"channel": channel, "user": user, "ts": ts, **_content(params)})
    return {"message_ts": ts}


def _chat_update(fake: FakeSlack, params: dict) -> dict:
    channel = _channel_for_post(fake, params)
    msg = fake._find_message(channel, _require(params, "ts", "message_not_found"))
    _apply_content(msg, params)
    msg["edited"] = {"user": BOT_USER_ID, "ts": fake._next_ts()}
    return {"channel": channel, "ts": msg["ts"], "text": msg.get("text", ""), "message": dict(msg)}


def _chat_delete(fake: FakeSlack, params: dict) -> dict:
    channel = _channel_for_post(fake, params)
    msg = fake._find_message(channel, _require(params, "ts", "message_not_found"))
    fake._history[channel].remove(msg)
    return {"channel": channel, "ts": msg["ts"]}


def _views_publish(fake: FakeSlack, params: dict) -> dict:
    user_id = _require(params, "user_id", "invalid_arguments")
    view = _require(params, "view", "invalid_arguments")
    current = fake._views.get(user_id)
    if params.get("hash") and current and params["hash"] != current["hash"]:
        raise _ApiError("hash_conflict")
    stored = {**view, "id": f"V{next(fake._ids)}", "team_id": TEAM_ID, "app_id": APP_ID,
              "bot_id": BOT_ID, "hash": uuid.uuid4().hex[:20]}
    fake._views[user_id] = stored
    return {"view": dict(stored)}


def _views_open(fake: FakeSlack, params: dict) -> dict:
    """A modal: needs a trigger_id, sent by the fake at most TRIGGER_SECONDS ago (one a test wrote by
    hand is taken as fresh), and a view of type modal with at most 100 blocks."""
    trigger = _require(params, "trigger_id", "invalid_trigger_id")
    sent = fake._triggers.get(trigger)
    if sent is not None and time.monotonic() - sent > TRIGGER_SECONDS:
        raise _ApiError("expired_trigger_id")
    view = _require(params, "view", "invalid_arguments")
    if view.get("type") != "modal" or len(view.get("blocks") or []) > 100:
        raise _ApiError("invalid_arguments")
    if len((view.get("title") or {}).get("text") or "") > 24:
        raise _ApiError("invalid_arguments")
    stored = {**view, "id": f"V{next(fake._ids)}", "team_id": TEAM_ID, "app_id": APP_ID,
              "bot_id": BOT_ID, "hash": uuid.uuid4().hex[:20]}
    fake._modals.append(stored)
    return {"view": dict(stored)}


def _conversations_replies(fake: FakeSlack, params: dict) -> dict:
    """The parent and its replies, oldest first, as Slack returns them."""
    channel = _require(params, "channel", "channel_not_found")
    ts = _require(params, "ts", "thread_not_found")
    msgs = [m for m in fake._history.get(channel, []) if m["ts"] == ts or m.get("thread_ts") == ts]
    if not msgs:
        raise _ApiError("thread_not_found")
    return {"messages": json.loads(json.dumps(msgs)), "has_more": False, "response_metadata": {"next_cursor": ""}}


def _conversations_info(fake: FakeSlack, params: dict) -> dict:
    channel = _require(params, "channel", "channel_not_found")
    if not str(channel).startswith(("C", "G", "D")):
        raise _ApiError("channel_not_found")
    return {"channel": fake._channel_info(channel)}


def _conversations_open(fake: FakeSlack, params: dict) -> dict:
    """A DM with one member (`users`, comma-separated ids): `{"channel": {"id": "D..."}}`, the same id
    every time, with no_op/already_open once it exists, as Slack answers. A bot or an unknown id fails."""
    users = [u.strip() for u in str(params.get("users") or "").split(",") if u.strip()]
    if not users and not params.get("channel"):
        raise _ApiError("users_list_not_supplied")
    if params.get("channel"):
        return {"channel": {"id": params["channel"]}, "no_op": True, "already_open": True}
    if len(users) > 1:
        raise _ApiError("not_implemented")  # a group DM: the bot never opens one
    user = users[0]
    if user == BOT_USER_ID:
        raise _ApiError("cannot_dm_bot")
    if not user.startswith(("U", "W")):
        raise _ApiError("user_not_found")
    dm = f"D{user[1:]}"
    if dm in fake._dms:
        return {"no_op": True, "already_open": True, "channel": {"id": dm}}
    fake._dms[dm] = user
    return {"channel": {"id": dm}}


HISTORY_MAX_PAGE = 999  # conversations.history's largest limit


def _conversations_history(fake: FakeSlack, params: dict) -> dict:
    """Newest first, a page at a time, as Slack returns it: `oldest`/`latest` bound the range
    (exclusive unless `inclusive`), `limit` (at most 999) the page, `cursor` the next page;
    `metadata` only with include_all_metadata, as on Slack."""
    channel = _require(params, "channel", "channel_not_found")
    if not str(channel).startswith(("C", "G", "D")):
        raise _ApiError("channel_not_found")
    oldest = float(params.get("oldest") or 0)
    latest = float(params.get("latest") or "inf")
    inclusive = str(params.get("inclusive", "")).lower() in ("1", "true")
    limit = max(1, min(int(params.get("limit") or 100), HISTORY_MAX_PAGE))
    with_meta = str(params.get("include_all_metadata", "")).lower() in ("1", "true")
    cursor = str(params.get("cursor") or "")
    if cursor:
        try:
            latest = float(base64.b64decode(cursor.encode()).decode().removeprefix("before:"))
            inclusive = False
        except ValueError:
            raise _ApiError("invalid_cursor") from None

    def inside(ts: float) -> bool:
        return (oldest <= ts <= latest) if inclusive else (oldest < ts < latest)

    msgs = [m for m in fake._history.get(channel, []) if inside(float(m["ts"]))
            and (not m.get("thread_ts") or m.get("thread_ts") == m["ts"])]
    msgs = list(reversed(msgs))
    page, more = msgs[:limit], len(msgs) > limit
    page = json.loads(json.dumps(page))
    if not with_meta:
        for m in page:
            m.pop("metadata", None)
    next_cursor = base64.b64encode(f"before:{page[-1]['ts']}".encode()).decode() if more else ""
    return {"messages": page, "has_more": more, "response_metadata": {"next_cursor": next_cursor}}


def _chat_get_permalink(fake: FakeSlack, params: dict) -> dict:
    channel = _require(params, "channel", "channel_not_found")
    ts = _require(params, "message_ts", "message_not_found")
    fake._find_message(channel, ts)
    return {"channel": channel, "permalink": f"https://{TEAM_DOMAIN}.slack.com/archives/{channel}/p{ts.replace('.', '')}"}


def _users_info(fake: FakeSlack, params: dict) -> dict:
    user = _require(params, "user", "user_not_found")
    if not str(user).startswith(("U", "W")):
        raise _ApiError("user_not_found")
    return {"user": fake._user_info(user)}


def _reactions_get(fake: FakeSlack, params: dict) -> dict:
    channel = _require(params, "channel", "channel_not_found")
    msg = fake._find_message(channel, _require(params, "timestamp", "message_not_found"))
    return {"type": "message", "channel": channel, "message": json.loads(json.dumps(msg))}


def _reactions_add(fake: FakeSlack, params: dict) -> dict:
    channel = _require(params, "channel", "channel_not_found")
    msg = fake._find_message(channel, _require(params, "timestamp", "message_not_found"))
    _react(msg, _require(params, "name", "invalid_name"), BOT_USER_ID)
    return {}


def _files_get_upload_url(fake: FakeSlack, params: dict) -> dict:
    filename = _require(params, "filename", "invalid_arguments")
    length = int(_require(params, "length", "invalid_arguments"))
    file_id = f"F{next(fake._ids):08d}"
    fake._uploads[file_id] = {"filename": filename, "length": length, "content": None}
    return {"upload_url": f"{fake.base_url}/upload/{file_id}", "file_id": file_id}


def _files_complete_upload(fake: FakeSlack, params: dict) -> dict:
    files = _require(params, "files", "invalid_arguments")
    done = []
    for f in files:
        upload = fake._uploads.get(f.get("id"))
        if upload is None or upload["content"] is None:
            raise _ApiError("file_not_found")
        upload.update(title=f.get("title"), channel=params.get("channel_id"),
                      initial_comment=params.get("initial_comment"), thread_ts=params.get("thread_ts"))
        done.append({"id": f["id"], "name": upload["filename"], "title": f.get("title") or upload["filename"],
                     "size": len(upload["content"])})
    return {"files": done}


def _chat_unfurl(fake: FakeSlack, params: dict) -> dict:
    """channel + ts (a posted message) or unfurl_id + source (the composer), and unfurls {url: {blocks}}."""
    unfurls = params.get("unfurls")
    if isinstance(unfurls, str):
        try:
            unfurls = json.loads(unfurls)
        except ValueError:
            raise _ApiError("invalid_unfurls") from None
    if not isinstance(unfurls, dict) or not unfurls:
        raise _ApiError("invalid_unfurls")
    if params.get("unfurl_id") and params.get("source"):
        where = {"unfurl_id": params["unfurl_id"], "source": params["source"]}
    else:
        channel = _require(params, "channel", "channel_not_found")
        ts = _require(params, "ts", "cannot_find_message")
        if fake._find_message(channel, ts, missing=None) is None:
            raise _ApiError("cannot_find_message")
        where = {"channel": channel, "ts": ts}
    for body in unfurls.values():
        if not isinstance(body, dict) or not (body.get("blocks") or body.get("text")):
            raise _ApiError("cannot_unfurl_url")
    fake._unfurls.append({**where, "unfurls": unfurls})
    return {}


def _apps_connections_open(fake: FakeSlack, params: dict) -> dict:
    ticket = uuid.uuid4().hex
    fake._tickets.add(ticket)
    return {"url": f"ws://{fake.host}:{fake.ws_port}/link/?ticket={ticket}&app_id={APP_ID}"}


_METHODS: dict[str, Callable[[FakeSlack, dict], dict]] = {
    "auth.test": _auth_test,
    "chat.postMessage": _chat_post_message,
    "chat.postEphemeral": _chat_post_ephemeral,
    "chat.update": _chat_update,
    "chat.delete": _chat_delete,
    "views.publish": _views_publish,
    "views.open": _views_open,
    "conversations.replies": _conversations_replies,
    "conversations.info": _conversations_info,
    "conversations.history": _conversations_history,
    "conversations.open": _conversations_open,
    "chat.getPermalink": _chat_get_permalink,
    "users.info": _users_info,
    "reactions.get": _reactions_get,
    "reactions.add": _reactions_add,
    "files.getUploadURLExternal": _files_get_upload_url,
    "files.completeUploadExternal": _files_complete_upload,
    "chat.unfurl": _chat_unfurl,
    "apps.connections.open": _apps_connections_open,
}


# ------------------------------------------------------------------ HTTP server


class _HttpServer(ThreadingHTTPServer):
    """Threaded HTTP server whose request threads close() waits for."""

    daemon_threads = False  # so server_close() joins them: no thread outlives the fake
    # socketserver's default backlog of 5 dropped connections in a burst of 40 replies, each
    # costing the client a 1 s SYN retransmit that Slack's own servers never make it wait
    request_queue_size = 128
    fake: FakeSlack


class _HttpHandler(BaseHTTPRequestHandler):
    """Routes /api/<method>, /respond/<id> and /upload/<file_id>."""

    server: _HttpServer
    timeout = 5  # an idle client must not hold close() hostage

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep pytest output clean

    def do_GET(self) -> None:
        self._route(b"")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self._route(self.rfile.read(length) if length else b"")

    def _route(self, body: bytes) -> None:
        """Dispatch by path prefix."""
        fake = self.server.fake
        url = urlsplit(self.path)
        parts = url.path.strip("/").split("/")
        if len(parts) == 2 and parts[0] == "api":
            params = dict(parse_qsl(url.query))
            params.update(self._body_params(body))
            params = {k: _maybe_json(k, v) for k, v in params.items()}
            auth = self.headers.get("Authorization", "")
            header_token = auth[7:].strip() if auth.startswith("Bearer ") else None
            token = header_token or params.pop("token", None)
            status, reply, headers, how = fake._handle_api(parts[1], params, token, header_token is not None)
            if status == 0:
                self.close_connection = True  # drop: no status line at all
                return
            self._reply(status, reply, headers, how)
        elif len(parts) == 2 and parts[0] == "respond" and self.command == "POST":
            fault = fake._route_fault("response_url")
            if fault is not None and fault.drop:
                self.close_connection = True
                return
            if fault is not None:
                headers = {"Retry-After": str(fault.retry_after)} if fault.retry_after is not None else {}
                self._reply(fault.status, {"ok": False, "error": fault.error}, headers)
                return
            try:
                reply = json.loads(body or b"{}")
            except ValueError:
                self._reply(400, {"ok": False, "error": "invalid_json"})
                return
            status = fake._handle_respond(parts[1], reply)
            self._reply(status, {"ok": status == 200} if status == 200 else {"ok": False, "error": "no_such_url"})
        elif len(parts) == 2 and parts[0] == "upload" and self.command == "POST":
            how = fake._route_fault("upload")
            status = fake._handle_upload(parts[1], body)
            self._reply(status, {"ok": status == 200}, how=how)
        else:
            self._reply(404, {"ok": False, "error": "not_found"})

    def _body_params(self, body: bytes) -> dict:
        """Params from a JSON or form body (slack_sdk uses both)."""
        if not body:
            return {}
        ctype = self.headers.get("Content-Type", "")
        if ctype.startswith("application/json"):
            data = json.loads(body)
            return data if isinstance(data, dict) else {}
        if ctype.startswith("application/x-www-form-urlencoded"):
            return dict(parse_qsl(body.decode(), keep_blank_values=True))
        return {}

    def _reply(self, status: int, body: dict, headers: dict | None = None, how: _Rule | None = None) -> None:
        """Write a JSON response: whole, or as `how` says (a drip, or `size` bytes of padding)."""
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        if how is None or not how.size:
            self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if how is not None and how.size:
            self._stream(how.size)
        elif how is not None and how.drip:
            self._drip(data, how.drip)
        else:
            self.wfile.write(data)

    def _drip(self, data: bytes, seconds: float) -> None:
        """A slow Slack: each byte alone, `seconds` apart, until the client hangs up."""
        fake = self.server.fake
        for i in range(len(data)):
            try:
                self.wfile.write(data[i:i + 1])
            except OSError:
                return
            fake.sent += 1
            if fake._closing.wait(seconds):
                return

    def _stream(self, size: int) -> None:
        """An ok answer of `size` bytes, padded; its end is the connection's (HTTP/1.0)."""
        fake = self.server.fake
        head, tail, block = b'{"ok": true, "pad": "', b'"}', b"x" * (1 << 16)
        left = size - len(head) - len(tail)
        try:
            self.wfile.write(head)
            while left > 0 and not fake._closing.is_set():
                part = block[:min(len(block), left)]
                self.wfile.write(part)
                left -= len(part)
                fake.sent += len(part)
            self.wfile.write(tail)
        except OSError:  # the client stopped reading and hung up
            return


def _maybe_json(key: str, value: Any) -> Any:
    """Decode JSON-string params (form bodies) so tests see one shape."""
    if key in _JSON_PARAMS and isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


# ------------------------------------------------------------- WebSocket server


class _WsConnection:
    """One Socket Mode client: RFC 6455 handshake, then a frame loop in its own thread."""

    def __init__(self, fake: FakeSlack, sock: socket.socket):
        self.fake = fake
        self.sock = sock
        self.number = 0
        self.send_lock = threading.RLock()
        self._stop = threading.Event()
        self._reset = False
        self.thread = threading.Thread(target=self._run, name="fake-slack-ws", daemon=True)

    def stop(self, reset: bool) -> None:
        """Ask the connection thread to end; reset=True ends it with a TCP RST."""
        self._reset = reset
        self._stop.set()

    def send_frame(self, opcode: int, data: bytes) -> None:
        """Send one unmasked, unfragmented frame (what the builtin client can parse)."""
        n = len(data)
        if n <= 125:
            header = struct.pack("!BB", 0x80 | opcode, n)
        elif n <= 0xFFFF:
            header = struct.pack("!BBH", 0x80 | opcode, 126, n)
        else:
            header = struct.pack("!BBQ", 0x80 | opcode, 127, n)
        with self.send_lock:
            self.sock.sendall(header + data)  # one write: the client drops partial frames on a recv timeout

    def _run(self) -> None:
        """Handshake, then serve frames until the peer leaves or we are stopped."""
        registered = False
        try:
            path = self._handshake()
            if path is None:
                return
            self.fake._handshake_ok(self, path)
            registered = True
            self._frame_loop()
        except (_Stop, OSError):
            pass
        finally:
            if registered:
                self.fake._connection_gone(self)
            self._close()

    def _close(self) -> None:
        """Close the socket, with RST if asked (an abrupt network drop)."""
        try:
            if self._reset:
                self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.sock.close()
        except OSError:
            pass

    def _recv_exact(self, n: int) -> bytes:
        """Read exactly n bytes, waking up regularly to honour stop()."""
        buf = bytearray()
        while len(buf) < n:
            if self._stop.is_set() or self.fake._closing.is_set():
                raise _Stop()
            ready, _, _ = select.select([self.sock], [], [], _POLL)
            if not ready:
                continue
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise _Stop()
            buf += chunk
        return bytes(buf)

    def _handshake(self) -> str | None:
        """Answer the HTTP Upgrade; returns the request path, or None after refusing it."""
        raw = b""
        while b"\r\n\r\n" not in raw:
            raw += self._recv_exact(1)
            if len(raw) > 16384:
                return None
        lines = raw.decode("latin-1").split("\r\n")
        _, path, _ = (lines[0].split(" ") + ["", ""])[:3]
        headers = {}
        for line in lines[1:]:
            if ":" in line:
                k, v = line.split(":", 1)
                headers[k.strip().lower()] = v.strip()
        key = headers.get("sec-websocket-key")
        if headers.get("upgrade", "").lower() != "websocket" or not key or headers.get("sec-websocket-version") != "13":
            self._refuse(400, "Bad Request")
            return None
        if not self.fake._ticket_valid(path):
            self._refuse(403, "Forbidden")
            return None
        accept = base64.b64encode(hashlib.sha1((key + _WS_GUID).encode()).digest()).decode()
        # No Sec-WebSocket-Extensions in the reply: extensions (permessage-deflate) stay off.
        response = (
            "HTTP/1.1 101 Switching Protocols\r\n"
            "Upgrade: websocket\r\n"
            "Connection: Upgrade\r\n"
            f"Sec-WebSocket-Accept: {accept}\r\n\r\n"
        )
        with self.send_lock:
            self.sock.sendall(response.encode())
        return path

    def _refuse(self, status: int, reason: str) -> None:
        """Reject a handshake with a plain HTTP error."""
        self.fake._protocol_error(f"refused WebSocket handshake: {status} {reason}")
        with self.send_lock:
            self.sock.sendall(f"HTTP/1.1 {status} {reason}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".encode())

    def _frame_loop(self) -> None:
        """Read client frames: texts are recorded, pings answered, close echoed."""
        fragments: list[bytes] = []
        while True:
            b1, b2 = self._recv_exact(2)
            opcode, fin = b1 & 0x0F, b1 & 0x80
            n = b2 & 0x7F
            if n == 126:
                (n,) = struct.unpack("!H", self._recv_exact(2))
            elif n == 127:
                (n,) = struct.unpack("!Q", self._recv_exact(8))
            mask = self._recv_exact(4) if b2 & 0x80 else None
            data = self._recv_exact(n)
            if mask is None or b1 & 0x70:
                # RFC 6455 5.1/5.2: client frames must be masked; no extension was agreed, so no RSV bits.
                self.fake._protocol_error(f"connection #{self.number}: unmasked or RSV frame (byte1={b1:#x})")
                self.send_frame(_OP_CLOSE, struct.pack("!H", 1002))
                return
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
            if opcode in (_OP_TEXT, _OP_CONT):
                fragments.append(data)
                if fin:
                    self.fake._on_text(self, b"".join(fragments).decode("utf-8", "replace"))
                    fragments = []
            elif opcode == _OP_PING:
                self.fake._on_ping()
                if self.fake.answer_pings:
                    self.send_frame(_OP_PONG, data)
            elif opcode == _OP_CLOSE:
                self.send_frame(_OP_CLOSE, data[:2])
                return
            elif opcode == _OP_BINARY:
                self.fake._protocol_error(f"connection #{self.number}: binary frame")


def _main() -> None:
    """Run standalone: print the URLs, then send each stdin line as a /paper command."""
    with start_fake_slack() as fake:
        print(f"api_url: {fake.api_url}   (tokens: xoxb-anything / xapp-anything)", flush=True)
        print("Type a /paper command text per line; Ctrl-D to quit.", flush=True)
        for line in sys.stdin:
            try:
                fake.wait_connected(timeout=60)
                eid = fake.slash_command(line.strip())
                ack, latency = fake.wait_ack(eid)
                print(f"acked in {latency * 1000:.0f} ms: {ack.get('payload')}")
            except (FakeSlackError, TimeoutError) as e:
                print(f"error: {e}")
            for call in fake.calls():
                print(f"  {call.method} {json.dumps(call.params)[:300]}")
            fake.reset()


if __name__ == "__main__":
    try:
        _main()
    except KeyboardInterrupt:
        pass
