"""A local OpenAI-compatible chat-completions server for tests: it answers, stalls, fails or talks garbage.

    with FakeLLM() as llm:
        llm.reply = "Proposes ..."        # or a function of the request body
        llm.status, llm.delay, llm.raw = 500, 0.0, None
        llm.drip = 0.05                   # send the answer one byte at a time, this many seconds apart
        llm.redirect = (302, other.url)   # answer every request with a redirect there
        ... LLMConfig(url=llm.url, model="fake-model", api_key="...") ...
        llm.requests  # [{"method", "path", "headers", "body"}] as the server saw them, any method

The default reply is a TL;DR that restates the start of the abstract it was sent, so it
passes the grounding check the way a good model's answer does.

Binds 127.0.0.1 on an ephemeral port; stop() ends a stalled reply at once.
"""
from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable


class _Handler(BaseHTTPRequestHandler):
    server: "_Server"

    def log_message(self, *args):  # keep test output clean
        pass

    def do_GET(self):  # a client that followed a redirect as a GET is recorded too
        self.do_POST()

    def do_POST(self):
        fake = self.server.fake
        length = int(self.headers.get("Content-Length") or 0)
        raw_body = self.rfile.read(length)
        try:
            body = json.loads(raw_body)
        except ValueError:
            body = None
        with fake.lock:
            fake.requests.append({"method": self.command, "path": self.path, "headers": dict(self.headers),
                                  "body": body})
        if fake.delay and fake.stopping.wait(fake.delay):
            return
        if fake.redirect:
            status, to = fake.redirect
            self.send_response(status)
            self.send_header("Location", to.rstrip("/") + self.path.removeprefix("/v1"))
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.path.rstrip("/") != "/v1/chat/completions":
            return self._send(404, b'{"error": "not found"}')
        if fake.status != 200:
            return self._send(fake.status, b'{"error": {"message": "server error"}}')
        if fake.raw is not None:
            return self._send(200, fake.raw)
        content = fake.reply(body) if callable(fake.reply) else fake.reply
        answer = {"id": "chatcmpl-fake", "object": "chat.completion", "model": (body or {}).get("model"),
                  "choices": [{"index": 0, "finish_reason": "stop",
                               "message": {"role": "assistant", "content": content}}]}
        self._send(200, json.dumps(answer).encode())

    def _send(self, status: int, payload: bytes):
        drip = self.server.fake.drip
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if not drip:
                self.wfile.write(payload)
                return
            for i in range(len(payload)):  # each byte well within a per-read timeout
                self.wfile.write(payload[i : i + 1])
                self.wfile.flush()
                if self.server.fake.stopping.wait(drip):
                    return
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout test)
            pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    fake: "FakeLLM"


def restate(body: dict | None) -> str:
    """The default answer: 'The fake tl;dr says' and the abstract's first dozen words, as one
    sentence (lower case: a capitalised name the abstract lacks would fail the grounding check)."""
    prompt = ((body or {}).get("messages") or [{}])[-1].get("content") or ""
    abstract = re.search(r"<abstract>(.*?)</abstract>", prompt, re.S)
    words = re.findall(r"[A-Za-z][A-Za-z-]+", abstract.group(1) if abstract else prompt)[:12]
    return "The fake tl;dr says " + " ".join(words) + "."


class FakeLLM:
    """The fake server and the knobs a test turns."""

    def __init__(self):
        self.reply: str | Callable[[dict], str] = restate
        self.redirect: tuple[int, str] | None = None
        self.status = 200
        self.delay = 0.0
        self.drip = 0.0
        self.raw: bytes | None = None  # sent verbatim instead of a chat completion
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.fake = self
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> "FakeLLM":
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> "FakeLLM":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
