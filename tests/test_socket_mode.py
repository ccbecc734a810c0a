"""PAPERCLUB_SOCKET_MODE picks slack_sdk's Socket Mode client; each one answers through the fake Slack
and survives a `disconnect` refresh."""
from __future__ import annotations

import pytest
from pydantic import ValidationError

from conftest import APP_TOKEN, BOT_TOKEN, make_settings


def _connect(adapter: str, fake):
    from slack_bolt import App
    from slack_sdk import WebClient

    from bot.runner import socket_mode_handler

    app = App(token=BOT_TOKEN, client=WebClient(token=BOT_TOKEN, base_url=fake.api_url))

    @app.command("/paper")
    def _ack(ack):
        ack()

    handler = socket_mode_handler(app, APP_TOKEN, adapter)
    handler.connect()
    return handler


def _refreshed(fake) -> int:
    """Once the client answers, a `disconnect` refresh, until its new socket is open; the connections
    counted before it."""
    fake.wait_connected(timeout=10)
    fake.wait_ack(fake.slash_command("help"), timeout=5)
    before = fake.connections_total
    fake.send_disconnect("refresh_requested")
    fake.wait_connected(total=before + 1, timeout=15)
    return before


@pytest.mark.parametrize("adapter", ["builtin", "websocket_client"])
def test_each_socket_mode_client_acks_commands_before_and_after_a_refresh(adapter, fake_slack):
    from fake_slack import stop_socket_mode

    if adapter == "websocket_client":
        pytest.importorskip("websocket", reason="websocket-client is not installed")
    handler = _connect(adapter, fake_slack)
    try:
        before = _refreshed(fake_slack)
        fake_slack.wait_for(lambda: fake_slack.connections_open == 1, timeout=10)
        fake_slack.wait_ack(fake_slack.slash_command("help"), timeout=5)
        assert fake_slack.connections_total == before + 1  # one new socket, not a reconnect storm
    finally:
        stop_socket_mode(fake_slack, handler)
    assert not fake_slack.protocol_errors


def test_a_command_sent_as_a_refresh_opens_the_new_socket_is_acked_well_before_slacks_deadline(fake_slack):
    """Slack sends on the new socket once it is open. The builtin client read nothing there until its
    old socket's 3 s read timed out, so such a command was acked about 3 s late: past Slack's
    deadline, the member saw operation_timeout."""
    from fake_slack import stop_socket_mode

    handler = _connect("builtin", fake_slack)
    try:
        _refreshed(fake_slack)
        _, seconds = fake_slack.wait_ack(fake_slack.slash_command("help"), timeout=10)
        assert seconds < 1.5, f"acked after {seconds:.2f} s (Slack's deadline: 3 s)"
    finally:
        stop_socket_mode(fake_slack, handler)


def test_the_socket_mode_setting_defaults_to_builtin_and_refuses_unknown_clients():
    assert make_settings().socket_mode == "builtin"
    with pytest.raises(ValidationError, match="PAPERCLUB_SOCKET_MODE must be one of builtin, websocket_client"):
        make_settings(socket_mode="aiohttp")
