"""Socket Mode ack delay across a `disconnect` refresh, per slack_sdk adapter, against tests/fake_slack.py.

Used by bench/ack_latency.py (--refreshes N); runnable alone:

    python bench/socket_refresh.py [--refreshes 5] [--adapters builtin,websocket_client,aiohttp,websockets]

Each adapter drives a minimal Bolt app whose `/paper` handler only acks, so the figure
is the transport's: the fake sends `disconnect` (as Slack does every few hours), then a
`/paper` envelope every --interval seconds for --window seconds on the newest open
connection. Printed per adapter: ack p50 / p95 / max over those probes, how many were
never acked (lost: an event is redelivered by Slack, a slash command is not), and how many
could not be sent because no socket was open at that instant (gap). `builtin` and `websocket_client` run with the
sync App that `paperclub run` uses (PAPERCLUB_SOCKET_MODE), built by bot.runner.socket_mode_handler
(`builtin` with its fix for the refresh); `aiohttp` and `websockets` need Bolt's AsyncApp, which
paperclub's listeners are not written for.

The fake sends each frame at once (TCP_NODELAY). Before it did, a probe sent right after the
`disconnect` waited for the client's ACK and then woke the old socket's reader, which hid the
builtin client's stall: here, 5 refreshes, max 105 ms with Nagle on, 3,088 ms with it off.
Without the fix, the builtin client acked the refresh's probes at p50 1,182, p95 2,941 and max
3,088 ms, against Slack's 3 s; with it, 11, 52 and 202 ms (websocket_client: 11, 11, 12 ms, but
5 of 345 probes never acked and 50 sent with no socket open).
"""
from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from fake_slack import FakeSlackError, start_fake_slack  # noqa: E402

BOT_TOKEN = "xoxb-bench-0000-BENCHBOTTOKEN"
APP_TOKEN = "xapp-1-A1-0000-BENCHAPPTOKEN"
ADAPTERS = ("builtin", "websocket_client", "aiohttp", "websockets")
PING_SECONDS = 3.0  # as bot/runner.py


def refresh_ack_delays(fake, *, refreshes: int, window: float = 4.0, interval: float = 0.05,
                       probe=None) -> tuple[list[float], int, int]:
    """Send `disconnect`, then probes for `window` s.

    Returns (ack delays in s, envelopes never acked, probes not sent because no connection
    was open at that instant: a gap between the old socket and the new one).
    Works with any client connected to `fake` (a bot process or an in-process handler).
    """
    probe = probe or (lambda f: f.slash_command("help"))
    delays: list[float] = []
    lost = unsent = 0
    for _ in range(refreshes):
        before = fake.connections_total
        sent: list[str] = []
        fake.send_disconnect("refresh_requested")
        started = time.monotonic()
        while time.monotonic() - started < window:
            try:
                sent.append(probe(fake))
            except FakeSlackError:
                unsent += 1  # between sockets: no open connection this instant
            time.sleep(interval)
        fake.wait_connected(total=before + 1, timeout=15)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and len(set(sent) & fake.acks().keys()) < len(sent):
            time.sleep(0.01)
        acked = fake.acks().keys()
        for envelope in sent:
            if envelope in acked:
                delays.append(fake.wait_ack(envelope, timeout=0)[1])
            else:
                lost += 1
        try:  # the old socket is gone before the next refresh
            fake.wait_for(lambda: fake.connections_open == 1, timeout=10)
        except TimeoutError:
            pass
    return delays, lost, unsent


class _Sync:
    def __init__(self, adapter: str, fake):
        from slack_bolt import App
        from slack_sdk import WebClient

        from bot.runner import socket_mode_handler

        app = App(token=BOT_TOKEN, client=WebClient(token=BOT_TOKEN, base_url=fake.api_url),
                  logger=logging.getLogger(f"bench.{adapter}"))

        @app.command("/paper")
        def _ack(ack):
            ack()

        self.handler = socket_mode_handler(app, APP_TOKEN, adapter)
        self.handler.connect()

    def close(self, fake) -> None:
        client = self.handler.client
        client.auto_reconnect_enabled = False
        fake.kill_socket(all_=True)
        client.close()


class _Async:
    def __init__(self, adapter: str, fake):
        from slack_bolt.async_app import AsyncApp
        from slack_sdk.web.async_client import AsyncWebClient

        if adapter == "aiohttp":
            from slack_bolt.adapter.socket_mode.aiohttp import AsyncSocketModeHandler
        else:
            from slack_bolt.adapter.socket_mode.websockets import AsyncSocketModeHandler
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=f"bench-{adapter}", daemon=True)
        self.thread.start()

        async def start():
            app = AsyncApp(token=BOT_TOKEN, client=AsyncWebClient(token=BOT_TOKEN, base_url=fake.api_url),
                           logger=logging.getLogger(f"bench.{adapter}"))

            @app.command("/paper")
            async def _ack(ack):
                await ack()

            handler = AsyncSocketModeHandler(app, APP_TOKEN, ping_interval=PING_SECONDS)
            await handler.connect_async()
            return handler

        self.handler = asyncio.run_coroutine_threadsafe(start(), self.loop).result(30)

    def close(self, fake) -> None:
        self.handler.client.auto_reconnect_enabled = False
        try:
            asyncio.run_coroutine_threadsafe(self.handler.close_async(), self.loop).result(10)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(5)


def missing_package(adapter: str) -> str | None:
    """The package an adapter needs that is not installed (the async ones run Bolt's AsyncApp, which
    imports aiohttp whichever socket library carries it), None when it can run."""
    needs = {"websocket_client": ("websocket",), "aiohttp": ("aiohttp",),
             "websockets": ("websockets", "aiohttp")}.get(adapter, ())
    for module in needs:
        try:
            __import__(module)
        except ImportError:
            return {"websocket": "websocket-client"}.get(module, module)
    return None


def measure_adapter(adapter: str, *, refreshes: int, window: float, interval: float) -> dict:
    """One adapter, its own fake Slack: a warm-up ack, then `refreshes` refreshes."""
    missing = missing_package(adapter)
    if missing:
        return {"adapter": adapter, "skipped": f"{missing} is not installed"}
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"):
        os.environ.pop(var, None)  # slack_sdk would tunnel the fake's loopback through it
    with start_fake_slack() as fake:
        client = (_Sync if adapter in ("builtin", "websocket_client") else _Async)(adapter, fake)
        try:
            fake.wait_connected(timeout=15)
            fake.wait_ack(fake.slash_command("help"), timeout=10)
            delays, lost, unsent = refresh_ack_delays(fake, refreshes=refreshes, window=window, interval=interval)
        finally:
            client.close(fake)
        errors = list(fake.protocol_errors)
    return {"adapter": adapter, **ack_stats(delays), "lost": lost, "gap": unsent, "protocol_errors": len(errors)}


def ack_stats(delays: list[float]) -> dict:
    if not delays:
        return {"n": 0, "p50": float("nan"), "p95": float("nan"), "max": float("nan")}
    ms = np.array(delays) * 1000
    return {"n": len(ms), "p50": float(np.percentile(ms, 50)), "p95": float(np.percentile(ms, 95)),
            "max": float(ms.max())}


def print_table(rows: list[dict], file=sys.stdout) -> None:
    print(f"{'ack across a disconnect refresh':34}{'n':>5}{'p50':>9}{'p95':>9}{'max':>9}{'lost':>6}{'gap':>5}"
          "   (ms; lost: never acked, gap: probes with no socket open)", file=file)
    for r in rows:
        if "skipped" in r:
            print(f"  {r['adapter']:32}skipped: {r['skipped']}", file=file)
            continue
        print(f"  {r['adapter']:32}{r['n']:>5}{r['p50']:>9.1f}{r['p95']:>9.1f}{r['max']:>9.1f}{r['lost']:>6}{r['gap']:>5}"
              + (f"  protocol errors: {r['protocol_errors']}" if r.get("protocol_errors") else ""), file=file)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--refreshes", type=int, default=5)
    ap.add_argument("--window", type=float, default=4.0, help="seconds of probes after each disconnect")
    ap.add_argument("--interval", type=float, default=0.05, help="seconds between probes")
    ap.add_argument("--adapters", default=",".join(ADAPTERS))
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    rows = [measure_adapter(a, refreshes=args.refreshes, window=args.window, interval=args.interval)
            for a in args.adapters.split(",") if a]
    print_table(rows)


if __name__ == "__main__":
    main()
