"""The fake Slack speaks the real protocol: checked with the real slack_sdk and slack_bolt clients."""

import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from types import SimpleNamespace

import pytest
from slack_bolt import App
from slack_bolt.adapter.socket_mode import SocketModeHandler
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler, ServerErrorRetryHandler
from slack_sdk.socket_mode.builtin import SocketModeClient
from slack_sdk.socket_mode.response import SocketModeResponse

from fake_slack import BOT_USER_ID, start_fake_slack, stop_socket_mode

PING_INTERVAL = 1  # seconds; small so a dead socket is noticed quickly (Bolt's default is 10)


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch):
    """slack_sdk honours HTTP(S)_PROXY but not NO_PROXY, so a proxy would swallow 127.0.0.1."""
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def fake():
    with start_fake_slack() as f:
        yield f


@pytest.fixture
def client(fake):
    return WebClient(token="xoxb-test", base_url=fake.api_url)


@pytest.fixture
def bolt(fake):
    """A real Bolt app on Socket Mode against the fake; `seen` collects what listeners got."""
    app = App(client=WebClient(token="xoxb-test", base_url=fake.api_url))
    seen = []

    @app.command("/paper")
    def handle_paper(ack, respond, command):
        ack()
        seen.append(command)
        respond(f"searching for {command['text']}")

    @app.event("reaction_added")
    def handle_reaction(body):
        seen.append(body)

    @app.action("save")
    def handle_save(ack, body, respond):
        ack()
        seen.append(body)
        respond(replace_original=True, text=f"saved {body['actions'][0]['value']}")

    handler = SocketModeHandler(app, "xapp-test", ping_interval=PING_INTERVAL)
    handler.connect()
    fake.wait_connected()
    yield SimpleNamespace(app=app, handler=handler, seen=seen)
    stop_socket_mode(fake, handler)


# ------------------------------------------------------------------ Web API


def test_auth_test_gives_the_bot_identity(fake, client):
    resp = client.auth_test()
    assert (resp["user_id"], resp["bot_id"], resp["team_id"]) == ("UBOT", "B1", "T1")
    (call,) = fake.calls("auth.test")
    assert call.token == "xoxb-test"


def test_post_message_returns_increasing_ts_and_fills_history(fake, client):
    first = client.chat_postMessage(channel="C1", text="one", blocks=[{"type": "divider"}])
    second = client.chat_postMessage(channel="C1", text="two", thread_ts=first["ts"])
    client.chat_postMessage(channel="C2", text="elsewhere")

    assert float(second["ts"]) > float(first["ts"])
    assert [m["text"] for m in fake.messages("C1")] == ["one", "two"]
    assert fake.messages("C1")[0]["blocks"] == [{"type": "divider"}]
    assert fake.messages("C1")[1]["thread_ts"] == first["ts"]
    assert fake.calls("chat.postMessage")[0].params["channel"] == "C1"

    client.chat_update(channel="C1", ts=first["ts"], text="one, edited")
    client.chat_delete(channel="C1", ts=second["ts"])
    assert [m["text"] for m in fake.messages("C1")] == ["one, edited"]


def test_form_encoded_methods_are_parsed(fake, client):
    assert client.users_info(user="U42")["user"]["real_name"] == "User U42"
    assert client.conversations_info(channel="C9")["channel"]["is_member"] is True
    ts = fake.add_message("C1", "a paper", user="U2")
    fake.add_reaction("C1", ts, "thumbsup", user="U3")
    reactions = client.reactions_get(channel="C1", timestamp=ts)["message"]["reactions"]
    assert reactions == [{"name": "thumbsup", "users": ["U3"], "count": 1}]
    assert fake.calls("users.info")[0].params == {"user": "U42"}


def test_views_publish_and_files_upload_v2(fake, client):
    client.views_publish(user_id="U1", view={"type": "home", "blocks": []})
    assert fake.home_view("U1")["type"] == "home"

    client.files_upload_v2(channel="C1", content="title,year\n", filename="papers.csv", title="Papers")
    (upload,) = fake.uploads().values()
    assert (upload["content"], upload["channel"], upload["title"]) == (b"title,year\n", "C1", "Papers")


def test_errors_look_like_slack_errors(fake, client):
    with pytest.raises(SlackApiError) as unknown:
        client.api_call("papers.levitate")
    assert unknown.value.response["error"] == "unknown_method"

    with pytest.raises(SlackApiError) as wrong_token:
        WebClient(token="xapp-test", base_url=fake.api_url).chat_postMessage(channel="C1", text="x")
    assert wrong_token.value.response["error"] == "not_allowed_token_type"

    fake.fail("chat.postMessage", error="channel_not_found")
    with pytest.raises(SlackApiError) as not_found:
        client.chat_postMessage(channel="C1", text="x")
    assert (not_found.value.response.status_code, not_found.value.response["error"]) == (200, "channel_not_found")
    client.chat_postMessage(channel="C1", text="x")  # times=1: only the first call failed


def test_429_is_raised_by_default_and_retried_after_retry_after(fake, client):
    fake.fail("chat.postMessage", status=429, retry_after=1)
    with pytest.raises(SlackApiError) as limited:
        client.chat_postMessage(channel="C1", text="x")
    assert limited.value.response.status_code == 429
    assert limited.value.response["error"] == "ratelimited"
    assert limited.value.response.headers["Retry-After"] == "1"

    fake.reset()
    fake.fail("chat.postMessage", status=429, retry_after=1)
    client.retry_handlers.append(RateLimitErrorRetryHandler(max_retry_count=1))
    client.chat_postMessage(channel="C1", text="x")
    first, second = fake.calls("chat.postMessage")
    assert second.at - first.at >= 1.0  # the client honoured Retry-After
    assert len(fake.messages("C1")) == 1


def test_500_is_retried_by_server_error_handler(fake, client):
    fake.fail("auth.test", status=500)
    client.retry_handlers.append(ServerErrorRetryHandler(max_retry_count=1))
    assert client.auth_test()["user_id"] == BOT_USER_ID
    assert len(fake.calls("auth.test")) == 2


def test_dropped_connection_is_retried_by_the_default_client(fake, client):
    fake.fail("auth.test", drop=True)
    assert client.auth_test()["ok"]  # ConnectionErrorRetryHandler is on by default
    assert len(fake.calls("auth.test")) == 2


def test_delay_slows_a_method_down(fake, client):
    fake.delay("users.info", 0.3, times=1)
    start = time.monotonic()
    client.users_info(user="U1")
    assert time.monotonic() - start >= 0.3
    start = time.monotonic()
    client.users_info(user="U1")
    assert time.monotonic() - start < 0.3


def test_response_url_posts_are_recorded(fake):
    url = fake.new_response_url(channel="C1")
    request = urllib.request.Request(
        url, data=json.dumps({"text": "hi all", "response_type": "in_channel"}).encode(), method="POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=5) as resp:
        assert resp.status == 200
    assert fake.responses(url) == [{"text": "hi all", "response_type": "in_channel"}]
    assert [m["text"] for m in fake.messages("C1")] == ["hi all"]  # in_channel posts show in the channel


# -------------------------------------------------------------- Socket Mode


def test_raw_client_gets_hello_first_and_its_pings_are_ponged(fake):
    received = []

    def ack_with_big_payload(client, req):
        client.send_socket_mode_response(SocketModeResponse(req.envelope_id, payload={"text": "y" * 70_000}))

    web = WebClient(base_url=fake.api_url)
    sm = SocketModeClient(app_token="xapp-test", web_client=web, ping_interval=PING_INTERVAL,
                          on_message_listeners=[received.append])
    sm.socket_mode_request_listeners.append(ack_with_big_payload)
    try:
        sm.connect()
        fake.wait_for(lambda: received)
        assert json.loads(received[0])["type"] == "hello"
        # The client only accepts a pong that echoes its "<session>:<time>" ping payload.
        assert fake.wait_for(lambda: sm.current_session.last_ping_pong_time, timeout=3)
        assert fake.calls("apps.connections.open")[0].token == "xapp-test"

        # Frames over 64 KiB use the 8-byte length form, both ways.
        ack, _ = fake.wait_ack(fake.event({"type": "message", "text": "x" * 100_000}))
        assert len(json.loads(received[-1])["payload"]["event"]["text"]) == 100_000
        assert len(ack["payload"]["text"]) == 70_000
        assert fake.protocol_errors == []
    finally:
        stop_socket_mode(fake, sm)


def test_slash_command_is_acked_quickly_and_respond_reaches_response_url(fake, bolt):
    envelope_id = fake.slash_command("attention is all you need", user="U7", channel="C3")
    ack, latency = fake.wait_ack(envelope_id)
    assert ack == {"envelope_id": envelope_id}
    assert latency < 3.0

    (command,) = fake.wait_for(lambda: bolt.seen)
    assert (command["user_id"], command["channel_id"], command["command"]) == ("U7", "C3", "/paper")
    assert command["trigger_id"]
    responses = fake.wait_for(lambda: fake.responses(command["response_url"]))
    assert responses == [{"text": "searching for attention is all you need"}]
    assert fake.ephemeral_messages("C3")[0]["text"] == "searching for attention is all you need"


def test_unhandled_command_is_never_acked(fake, bolt):
    envelope_id = fake.slash_command("x", command="/other")
    with pytest.raises(TimeoutError):
        fake.wait_ack(envelope_id, timeout=0.5)


def test_events_are_wrapped_acked_and_own_events_dropped(fake, bolt):
    ts = fake.add_message("C1", "a paper")
    reaction = {"type": "reaction_added", "user": "U2", "reaction": "thumbsup", "item_user": BOT_USER_ID,
                "item": {"type": "message", "channel": "C1", "ts": ts}}
    first = fake.event(reaction)
    second = fake.event(reaction)
    own = fake.event({**reaction, "user": BOT_USER_ID})
    for envelope_id in (first, second, own):
        fake.wait_ack(envelope_id)

    time.sleep(0.2)  # give the (ignored) self event a chance to reach a listener
    bodies = fake.wait_for(lambda: len(bolt.seen) >= 2 and bolt.seen)
    assert [b["event"]["user"] for b in bodies] == ["U2", "U2"]  # Bolt drops the bot's own event
    assert bodies[0]["event_id"] != bodies[1]["event_id"]
    assert bodies[0]["authorizations"][0]["user_id"] == BOT_USER_ID


def test_button_click_can_replace_the_original_message(fake, bolt, client):
    posted = client.chat_postMessage(channel="C1", text="paper of the day", blocks=[{"type": "divider"}])
    envelope_id = fake.block_action("save", value="arxiv:1706.03762", user="U5", channel="C1")
    fake.wait_ack(envelope_id)

    (body,) = fake.wait_for(lambda: bolt.seen)
    assert body["container"]["message_ts"] == posted["ts"]
    assert body["message"]["text"] == "paper of the day"
    fake.wait_for(lambda: fake.messages("C1")[0]["text"] == "saved arxiv:1706.03762")


@pytest.mark.slow  # waits out a reconnect: `make test` only
def test_disconnect_makes_the_client_reconnect(fake, bolt):
    fake.send_disconnect("refresh_requested")
    fake.wait_connected(total=2)
    assert len(fake.calls("apps.connections.open")) == 2
    # The builtin client reads the new socket only once the old one is closed (up to 3 s later).
    fake.wait_for(lambda: fake.connections_open == 1, timeout=5)

    envelope_id = fake.slash_command("after refresh")
    _, latency = fake.wait_ack(envelope_id)
    assert latency < 3.0
    assert fake.protocol_errors == []


def test_killed_socket_is_recovered(fake, bolt):
    assert fake.kill_socket() == 1
    fake.wait_connected(total=2, timeout=4 * PING_INTERVAL + 2)
    assert len(fake.calls("apps.connections.open")) == 2

    envelope_id = fake.slash_command("after the outage")
    _, latency = fake.wait_ack(envelope_id)
    assert latency < 3.0


@pytest.mark.slow  # waits out a reconnect: `make test` only
def test_silent_server_makes_the_client_reconnect(fake, bolt):
    fake.answer_pings = False  # TCP stays up but nothing answers: only the ping check can notice
    fake.wait_connected(total=2, timeout=6 * PING_INTERVAL + 2)
    fake.answer_pings = True
    envelope_id = fake.slash_command("still there?")
    fake.wait_ack(envelope_id, timeout=5)  # the old socket may hold the reader for up to 3 s


@pytest.mark.slow  # starts a process
def test_works_across_processes(fake):
    """What `paperclub run` needs: a separate process reaching the fake over TCP."""
    script = (
        "import os, time\n"
        "from slack_bolt import App\n"
        "from slack_bolt.adapter.socket_mode import SocketModeHandler\n"
        "from slack_sdk import WebClient\n"
        "app = App(client=WebClient(token='xoxb-test', base_url=os.environ['FAKE_API']))\n"
        "@app.command('/paper')\n"
        "def handle_paper(ack, say):\n"
        "    ack()\n"
        "    say('hello from a child process')\n"
        "SocketModeHandler(app, 'xapp-test').connect()\n"
        "time.sleep(30)\n"
    )
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env["FAKE_API"] = fake.api_url
    child = subprocess.Popen([sys.executable, "-c", script], env=env)
    try:
        fake.wait_connected(timeout=15)
        fake.wait_ack(fake.slash_command("hi", channel="C4"))
        fake.wait_for(lambda: fake.messages("C4"))
        assert fake.messages("C4")[0]["text"] == "hello from a child process"
    finally:
        child.kill()
        child.wait(timeout=5)


def test_close_leaves_no_threads_and_restarts_cleanly():
    before = set(threading.enumerate())
    for _ in range(3):
        with start_fake_slack() as f:
            WebClient(token="xoxb-test", base_url=f.api_url).auth_test()
            # A client that connects and never finishes its handshake must not keep a thread alive.
            idle = socket.create_connection(("127.0.0.1", f.ws_port))
            f.wait_for(lambda: [t for t in threading.enumerate() if t.name == "fake-slack-ws"])
        idle.close()
    assert set(threading.enumerate()) - before == set()

