"""Nothing reaches Slack past the outgoing gate (issue 31.13): every Web API method that carries
text or blocks, the link unfurl, the posting machine, a listener's client, ack and respond. A
builder that forgets to escape ("<!channel>" from an abstract) still pings nobody."""
from __future__ import annotations

import ast
import json
import socket
import time
import urllib.error
from datetime import datetime, timezone
from pathlib import Path

import pytest
from slack_bolt import BoltRequest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackRequestError
from slack_sdk.http_retry.builtin_handlers import ConnectionErrorRetryHandler

from bot import blocks as bk
from bot.app import create_app
from bot.deps.build import make_client
from bot.outgoing import GatedAck, SafeClient
from conftest import BOT_TOKEN, Clock, make_deps, make_settings
from store import HashingEmbedder, Searcher

ROOT = Path(__file__).resolve().parent.parent
RAW = "<!channel> look <!here|here>"  # what an unescaping builder would pass on from an abstract
NOW = datetime(2026, 12, 1, 14, tzinfo=timezone.utc)


def test_bot_builds_no_web_client_and_makes_no_raw_api_call_outside_the_gate():
    """A new path cannot reach Slack without the gate: bot/ builds SafeClients only (bot.outgoing)."""
    found = []
    for path in sorted((ROOT / "bot").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call):
                name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                if name in ("WebClient", "AsyncWebClient") or (name == "api_call" and path.name != "outgoing.py"):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {name}(...)")
    assert found == [], "build clients with bot.outgoing (SafeClient, gated): " + ", ".join(found)


def _every_speaking_method(client):
    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": RAW}}]
    view = {"type": "modal", "title": {"type": "plain_text", "text": "x"}, "blocks": blocks}
    calls = [
        lambda: client.chat_postMessage(channel="C1", text=RAW, blocks=blocks),
        lambda: client.chat_update(channel="C1", ts=client.chat_postMessage(channel="C1", text="x")["ts"],
                                   text=RAW, blocks=blocks),
        lambda: client.chat_postEphemeral(channel="C1", user="U1", text=RAW, blocks=blocks),
        lambda: client.chat_scheduleMessage(channel="C1", post_at=2_000_000_000, text=RAW),
        lambda: client.chat_unfurl(channel="C1", ts=client.chat_postMessage(channel="C1", text="x")["ts"],
                                   unfurls={"https://arxiv.org/abs/2401.00001": {"blocks": blocks}}),
        lambda: client.views_open(trigger_id="1.2.3", view=view),
        lambda: client.views_update(view_id="V1", view=view),
        lambda: client.views_push(trigger_id="1.2.3", view=view),
        lambda: client.views_publish(user_id="U1", view={"type": "home", "blocks": blocks}),
        lambda: client.files_upload_v2(channel="C1", content="a,b\n", filename="x.csv", initial_comment=RAW),
    ]
    for call in calls:
        try:
            call()
        except SlackApiError:
            pass  # the fake may not know the method; what it received was checked on arrival


def test_every_web_api_method_that_carries_text_passes_the_gate(fake_slack):
    fake_slack.add_members("U1")
    _every_speaking_method(WebClient(token=BOT_TOKEN, base_url=fake_slack.api_url))
    caught = {line.split(":")[0] for line in fake_slack.injections}
    # The fake notices each method's raw markup when nothing gates it ...
    assert caught >= {"chat.postMessage", "chat.update", "chat.postEphemeral", "chat.scheduleMessage",
                      "chat.unfurl", "views.open", "views.update", "views.push", "views.publish",
                      "files.completeUploadExternal"}, caught
    fake_slack.injections.clear()
    # ... and through the bot's client none reaches it.
    _every_speaking_method(make_client(make_settings(slack_api_url=fake_slack.api_url)))
    assert fake_slack.injections == []
    [posted] = [c for c in fake_slack.calls("chat.postMessage") if c.params.get("text", "").endswith("here&gt;")]
    assert posted.params["text"].startswith("&lt;!channel&gt;")  # said, not obeyed


def test_a_call_slack_rate_limits_for_an_hour_ends_at_once_and_a_short_limit_is_waited_out(fake_slack):
    """Every Web API call ends in time (bot.outgoing.SLACK_CALL_SECONDS): a Retry-After of an hour is an
    error its caller handles now, not a worker thread asleep for an hour; a second's is waited out."""
    import threading

    client = make_client(make_settings(slack_api_url=fake_slack.api_url))
    fake_slack.fail("chat.postMessage", status=429, retry_after=3600, times=1)
    outcome = []

    def call():
        try:
            client.chat_postMessage(channel="C1", text="hello")
            outcome.append("posted")
        except SlackApiError as e:
            outcome.append(e.response["error"])

    caller = threading.Thread(target=call, daemon=True)
    caller.start()
    caller.join(timeout=60)
    assert outcome == ["ratelimited"]
    assert len(fake_slack.calls("chat.postMessage")) == 1  # not sent again

    fake_slack.fail("chat.postMessage", status=429, retry_after=1, times=1)
    client.chat_postMessage(channel="C1", text="hello again")
    texts = [c.params.get("text") for c in fake_slack.calls("chat.postMessage")]
    assert texts[1:] == ["hello again", "hello again"]  # refused once, then sent


def test_a_slack_answer_over_the_cap_ends_the_call_at_once_without_reading_it_whole(fake_slack):
    """One attempt reads at most SafeClient.max_bytes (SLACK_MAX_BYTES): a 40 MB answer with no
    Content-Length to refuse it by is cut as it streams in, and the call is not sent again."""
    client = SafeClient(token=BOT_TOKEN, base_url=fake_slack.api_url, timeout=10)
    client.max_bytes = 1_000_000
    fake_slack.fail("conversations.history", size=40_000_000)
    started = time.monotonic()
    with pytest.raises(SlackRequestError, match="1,000,000-byte cap") as caught:
        client.conversations_history(channel="C1")
    assert time.monotonic() - started < 5
    assert BOT_TOKEN not in str(caught.value)
    assert fake_slack.sent < 20_000_000  # we hung up: the rest never left the server
    assert len(fake_slack.calls("conversations.history")) == 1


def test_a_slack_answer_dripping_in_ends_the_call_at_its_timeout_not_per_read(fake_slack):
    """A byte every 0.2 s never trips urllib's per-read timeout (1 s here), so the whole answer took
    ~30 s; the client's timeout is now the whole exchange's, and a slow answer is a TimeoutError,
    which the SDK's handlers do not send again and bot.posting._classify retries after a look."""
    client = SafeClient(token=BOT_TOKEN, base_url=fake_slack.api_url, timeout=1)
    fake_slack.fail("chat.postMessage", drip=0.2)
    started = time.monotonic()
    with pytest.raises(TimeoutError, match="within 1 s"):
        client.chat_postMessage(channel="C1", text="hello")
    took = time.monotonic() - started
    assert took < 10, f"held {took:.1f} s by a 1 s timeout"
    assert len(fake_slack.calls("chat.postMessage")) == 1


def test_a_connection_that_times_out_is_tried_again_but_a_slow_answer_is_not(fake_slack):
    """Slack never had a request whose connection timed out, so the SDK's connection handler may
    send it again, as it did when urllib raised URLError for it; an answer that times out may mean
    Slack posted it, so that one is not sent again (the test above: one call)."""
    asked = []

    class Counting(ConnectionErrorRetryHandler):
        def _can_retry(self, **kw):
            asked.append(type(kw["error"]))
            return super()._can_retry(**kw)

    with socket.socket() as full:
        full.bind(("127.0.0.1", 0))
        full.listen(0)
        with socket.create_connection(full.getsockname()):  # fills the backlog: the next SYNs are dropped
            client = SafeClient(token=BOT_TOKEN, base_url=f"http://127.0.0.1:{full.getsockname()[1]}/api/",
                                timeout=1, retry_handlers=[Counting(max_retry_count=1)])
            started = time.monotonic()
            with pytest.raises(urllib.error.URLError, match="could not reach Slack within 1 s"):
                client.chat_postMessage(channel="C1", text="hello")
            took = time.monotonic() - started
    assert asked == [urllib.error.URLError]  # asked once, after the first of two attempts
    assert took >= 2, f"one attempt of 1 s, not two ({took:.1f} s)"
    client = SafeClient(token=BOT_TOKEN, base_url=fake_slack.api_url, timeout=1,
                        retry_handlers=[Counting(max_retry_count=1)])
    fake_slack.fail("chat.postMessage", drip=0.2)
    with pytest.raises(TimeoutError):
        client.chat_postMessage(channel="C1", text="hello")
    assert asked[1:] == [TimeoutError] and len(fake_slack.calls("chat.postMessage")) == 1


def test_a_file_uploads_answer_dripping_in_ends_at_the_timeout_too(fake_slack):
    """files_upload_v2 sends the file itself past the Web API path (slack_sdk's own urlopen)."""
    client = SafeClient(token=BOT_TOKEN, base_url=fake_slack.api_url, timeout=1)
    fake_slack.fail("upload", drip=0.2)
    started = time.monotonic()
    with pytest.raises(TimeoutError, match="within 1 s"):
        client.files_upload_v2(channel="C1", content="title,year\n" * 100, filename="reading.csv")
    assert time.monotonic() - started < 10
    [upload] = fake_slack.uploads().values()
    assert upload["content"] == b"title,year\n" * 100  # sent as before: the bytes as they are
    fake_slack.reset()
    client.files_upload_v2(channel="C1", content="a,b\n", filename="x.csv")  # and without the drip, through
    assert [u["content"] for u in fake_slack.uploads().values()] == [b"a,b\n"]


def test_slacks_answers_read_through_the_cap_are_what_the_sdk_made_of_them_before(fake_slack):
    """Unchanged by the cap (and so passing before it too): an answer, ok:false, a 503 and a dropped
    connection, the last retried by the SDK's handler as before. 429s: the rate-limit test above."""
    client = SafeClient(token=BOT_TOKEN, base_url=fake_slack.api_url, timeout=5)
    posted = client.chat_postMessage(channel="C1", text="hello")
    assert posted["ok"] and posted.status_code == 200 and posted["message"]["text"] == "hello"
    assert posted.headers["Content-Type"].startswith("application/json")
    fake_slack.fail("chat.postMessage", error="channel_not_found")
    with pytest.raises(SlackApiError) as caught:
        client.chat_postMessage(channel="C1", text="hello")
    assert caught.value.response.status_code == 200 and caught.value.response["error"] == "channel_not_found"
    fake_slack.fail("chat.postMessage", status=503)
    with pytest.raises(SlackApiError) as caught:
        client.chat_postMessage(channel="C1", text="hello")
    assert caught.value.response.status_code == 503 and caught.value.response["error"] == "internal_error"
    fake_slack.fail("chat.postMessage", drop=True)
    assert client.chat_postMessage(channel="C1", text="again")["ok"]
    assert [c.params["text"] for c in fake_slack.calls("chat.postMessage")][-2:] == ["again", "again"]


def test_a_proxy_carries_slacks_calls_except_to_a_host_in_no_proxy(fake_slack, monkeypatch):
    """A proxy from the environment is skipped for a host no_proxy names, as urllib skipped it:
    behind a company proxy, a Slack reached directly (here the local fake) must still answer."""
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    dead = "http://127.0.0.1:9"  # the discard port: nothing that speaks HTTP listens there
    client = SafeClient(token=BOT_TOKEN, base_url=fake_slack.api_url, timeout=5, proxy=dead, retry_handlers=[])
    assert client.chat_postMessage(channel="C1", text="direct")["ok"]
    monkeypatch.delenv("no_proxy")
    monkeypatch.delenv("NO_PROXY")
    with pytest.raises(OSError):  # now through the proxy, which is not there
        SafeClient(token=BOT_TOKEN, base_url=fake_slack.api_url, timeout=5, proxy=dead,
                   retry_handlers=[]).chat_postMessage(channel="C1", text="via the proxy")
    assert [c.params["text"] for c in fake_slack.calls("chat.postMessage")] == ["direct"]


def _world(fake_slack, store, **kw):
    settings = make_settings(slack_api_url=fake_slack.api_url)
    deps = make_deps(settings, store, Searcher(store, HashingEmbedder()), clock=Clock(NOW), **kw)
    return deps


def test_a_pasted_link_unfurls_through_the_gate(fake_slack, hashing_store, monkeypatch):
    """chat.unfurl went out on a client of its own, past the gate: a card builder that forgot
    to escape would have pinged the channel."""
    # The forgetful card maker: the abstract's text as it came.
    monkeypatch.setattr("bot.unfurl.unfurls_for", lambda deps, events: [
        {link["url"]: {"blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": RAW}}]}
         for link in e["links"]} for e in events])
    deps = _world(fake_slack, hashing_store, slack=None)
    app = create_app(deps, client=WebClient(token=BOT_TOKEN, base_url=fake_slack.api_url),
                     process_before_response=True)
    ts = fake_slack.add_message("C1", "https://arxiv.org/abs/2401.00001")
    body = {"type": "event_callback", "token": "t", "team_id": "T1", "api_app_id": "A1", "event_id": "EvU1",
            "event_time": 1, "event": {"type": "link_shared", "channel": "C1", "user": "U1", "message_ts": ts,
                                       "unfurl_id": "u", "source": "conversations_history", "event_ts": ts,
                                       "links": [{"domain": "arxiv.org", "url": "https://arxiv.org/abs/2401.00001"}]},
            "authorizations": [{"team_id": "T1", "user_id": "UBOT", "is_bot": True}]}
    assert app.dispatch(BoltRequest(body=body, mode="socket_mode")).status == 200
    [unfurl] = fake_slack.calls("chat.unfurl")
    assert "&lt;!channel&gt;" in json.dumps(unfurl.params["unfurls"]) and fake_slack.injections == []


def test_the_posting_machine_posts_through_the_gate(fake_slack, hashing_store):
    from bot.posting import Post, Poster

    deps = _world(fake_slack, hashing_store)
    post = Post(channel="C1", key="agenda:2026-12-03", kind="agenda", day=NOW.date(),
                build=lambda claim: {"text": RAW, "blocks": [bk.section(RAW).to_dict()]})
    result = Poster("r1").post_once(deps.slack, hashing_store, post, NOW, sleep=lambda s: None, budget=5)
    assert result.ts and fake_slack.injections == []
    [message] = [m for m in fake_slack.messages("C1") if m["ts"] == result.ts]
    assert message["text"].startswith("&lt;!channel&gt;")


def test_a_listeners_client_ack_and_respond_pass_the_gate(fake_slack, hashing_store):
    deps = _world(fake_slack, hashing_store)
    app = create_app(deps, client=WebClient(token=BOT_TOKEN, base_url=fake_slack.api_url),
                     process_before_response=True)

    @app.action("probe")
    def probe(ack, client, respond, body):
        ack()
        client.chat_postMessage(channel="C1", text=RAW)
        respond(text=RAW, response_type="ephemeral")

    @app.view("probe_view")
    def probe_view(ack):
        ack(response_action="update", view={"type": "modal", "title": {"type": "plain_text", "text": "x"},
                                            "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": RAW}}]})

    url = fake_slack.new_response_url(channel="C1", user="U1")
    click = {"type": "block_actions", "user": {"id": "U1"}, "api_app_id": "A1", "team": {"id": "T1"},
             "channel": {"id": "C1"}, "trigger_id": "1.2.3", "response_url": url,
             "container": {"type": "message", "channel_id": "C1", "message_ts": "1.000001"},
             "actions": [{"action_id": "probe", "block_id": "b", "value": "x", "type": "button"}]}
    assert app.dispatch(BoltRequest(body=click, mode="socket_mode")).status == 200
    assert fake_slack.responses(url) and fake_slack.calls("chat.postMessage")
    assert fake_slack.injections == []
    submit = {"type": "view_submission", "user": {"id": "U1"}, "api_app_id": "A1", "team": {"id": "T1"},
              "trigger_id": "1.2.3", "view": {"id": "V1", "type": "modal", "callback_id": "probe_view", "state": {"values": {}}}}
    answer = app.dispatch(BoltRequest(body=submit, mode="socket_mode"))
    assert answer.status == 200 and "<!channel>" not in answer.body and "&lt;!channel&gt;" in answer.body


def test_a_modals_field_errors_stay_plain_text():
    ack = GatedAck()
    ack(response_action="errors", errors={"tz": "I don't know “A&B”."})
    assert json.loads(ack.response.body)["errors"] == {"tz": "I don't know “A&B”."}
