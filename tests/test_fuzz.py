"""Bad input: thousands of generated /paper lines, button values and events through the real Bolt app.

Every registered subcommand (and alias, and near-miss) gets generated arguments:
empty, huge, FTS5 and SQL syntax, control characters and NUL, emoji, Slack
markup (<@U123>, <#C1|x>, <!here>, &amp;), right-to-left text, paper ids and
names. Each line goes through `app.dispatch` (process_before_response=True) and
its reply through the fake Slack's response_url. Properties:

- exactly one reply, ephemeral unless the command posts for everyone, never the
  apology for an unexpected exception, and one Slack would accept (block limits);
- no user text turns into a channel-wide ping (<!here>, <!channel>);
- the database changes only as that command may change it (row counts per
  table), and `PRAGMA quick_check` stays ok after every case.

The weightless HashingEmbedder keeps each case at a few milliseconds.
"""
from __future__ import annotations

import json
import logging
import math

import pytest
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st
from slack_bolt import BoltRequest

from bot import blocks as bk
from bot.later import SORRY
from bot.commands import clean_input
from bot.deps.build import command_table
from conftest import make_deps, make_settings
from figures import record, scale

SUBCOMMANDS = command_table()  # the table the bot answers from
lookup = SUBCOMMANDS.lookup

FUZZ_CASES = scale("FUZZ_CASES", 2000)
BUTTON_CASES = scale("FUZZ_BUTTON_CASES", 250)
EVENT_CASES = scale("FUZZ_EVENT_CASES", 250)
USERS = ("U1", "U2", "UADMIN")
CHANNELS = ("C1", "C2", "D1")
INF = math.inf

# What each subcommand may change: table -> (least, most) change in its row count.
# Summaries are a cache any reply showing a paper may fill; everything else stays put.
CACHE = {"summaries": (0, INF)}
MAY_CHANGE = {
    "interests": {"interests": (-1, 1)},
    "schedule": {"schedules": (-1, 1), "meta": (0, 1)},  # meta: schedules_version appears once
    "add": {"meta": (0, 1)},  # meta: the shared arXiv request slot appears once
    "save": {"saved_papers": (0, 1)},
    # A verdict is logged as rows: the one it replaces taken back, then itself; take-back, the one standing.
    "for-me": {"reactions": (0, 2)},
    "not-for-me": {"reactions": (0, 2)},
    "take-back": {"reactions": (0, 1)},
    "saved": {"saved_papers": (-1, 0)},
    "forget-me": {"reactions": (-INF, 0), "saved_papers": (-INF, 0)},
}


# -- the world: one store, one app, seeded with posts, reactions and reading lists -----------------
class World:
    def __init__(self, app, store, fake):
        self.app, self.store, self.fake = app, store, fake
        self.cases = self.replies = 0
        self.by_command: dict[str, int] = {}
        self.errors: list[str] = []


@pytest.fixture(scope="module")
def world(hashing_db, tmp_path_factory, module_fake_slack):
    from bot.app import create_app
    from conftest import copy_db
    from store import feedback as fb
    from store import open_store
    from store import HashingEmbedder
    from store import Searcher

    store = open_store(copy_db(hashing_db, tmp_path_factory.mktemp("fuzz") / "fuzz.db"))
    from store.ingest import Record, ingest_records

    ingest_records(store, [Record(abstract=a, title=t, url="https://evil.example/x|Official code (verified)",
                                  venue="ICLR", year=2024, source="hostile") for t, a in HOSTILE],
                   HashingEmbedder(), now=1.7e9)
    hostile = [p for p in store.iter_papers() if "Ping-" in (p.title or "")]
    papers = hostile + [p for p in store.iter_papers() if p not in hostile]
    for i, paper in enumerate(papers[:4]):  # two posted days per channel, reacted to and saved
        channel, day, ts = CHANNELS[i % 2], f"2024-06-0{i + 1}", f"17000000{i}.000100"
        store.claim_post(channel, day, claimer="seed", paper_id=paper.id, pick=None, now=1.7e9 + i)
        store.finish_post(channel, day, claimer="seed", ts=ts, now=1.7e9 + i, claimed_at=1.7e9 + i)
        for user, emoji in (("U1", "fire"), ("U2", "eyes"), ("U1", "eyes")):
            fb.record_reaction(store, event_id=f"seed-{i}-{user}-{emoji}", channel=channel, message_ts=ts,
                               user=user, emoji=emoji, added=True, event_ts=1.7e9 + i, now=1.7e9 + i)
        store.save_paper("U1", paper.id, now=1.7e9 + i)
    for channel in CHANNELS[:2]:  # an interest whose text is hostile too: `today` explains picks with it
        text = "<!channel> <@UEVIL> attention &amp; pings"
        store.add_interest(channel, text, "U2", model=HashingEmbedder().name,
                           vector=HashingEmbedder().encode([text])[0], now=1.7e9)
    settings = make_settings(slack_api_url=module_fake_slack.api_url, admins="UADMIN", timezone="UTC")
    module_fake_slack.add_members(*USERS)  # the members the bot may name; hostile text names others
    for channel in CHANNELS[:2]:  # the channels the seeded days were posted in: App Home links them
        module_fake_slack.add_channel(channel)
    deps = make_deps(settings, store, Searcher(store, HashingEmbedder()))
    app = create_app(deps, process_before_response=True)
    # Log records at ERROR mean a listener raised (the user got the apology): collect them.
    world = World(app, store, module_fake_slack)
    handler = _Collect(world.errors)
    logging.getLogger().addHandler(handler)
    yield world
    logging.getLogger().removeHandler(handler)
    assert store.integrity_ok()
    assert store.db.execute("pragma foreign_key_check").fetchall() == []
    record("fuzz", cases=world.cases, replies=world.replies, by_command=world.by_command,
           unexpected_errors=len(world.errors))
    store.close()


class _Collect(logging.Handler):
    def __init__(self, sink: list[str]):
        super().__init__(logging.ERROR)
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        self.sink.append(record.getMessage())


def table_counts(store) -> dict[str, int]:
    names = [r[0] for r in store.db.execute(
        "select name from sqlite_master where type = 'table' and name not like 'sqlite_%'")]
    return {n: store.db.execute(f'select count(*) from "{n}"').fetchone()[0] for n in names}


def check_counts(name: str, before: dict, after: dict) -> None:
    allowed = {**CACHE, **MAY_CHANGE.get(name, {})}
    for table in before.keys() | after.keys():
        change = after.get(table, 0) - before.get(table, 0)
        low, high = allowed.get(table, (0, 0))
        assert low <= change <= high, f"/paper {name or '?'} changed {table} by {change:+d}"


# -- what Slack would accept -----------------------------------------------------------------------
def check_message(msg: dict) -> None:
    """Slack's limits for a message (what it would refuse as invalid_blocks or cut)."""
    assert isinstance(msg.get("text"), str) and msg["text"].strip(), msg
    assert len(msg["text"]) <= bk.FALLBACK_TEXT + 10
    blocks = msg.get("blocks") or []
    assert len(blocks) <= bk.MAX_MESSAGE_BLOCKS
    ids = [b["block_id"] for b in blocks if b.get("block_id")]
    assert len(ids) == len(set(ids)), f"duplicate block_id in {ids}"
    assert all(len(i) <= 255 for i in ids)
    for b in blocks:
        if b["type"] == "header":
            assert len(b["text"]["text"]) <= bk.HEADER_TEXT
        if b["type"] == "section":
            assert len((b.get("text") or {}).get("text", "")) <= bk.SECTION_TEXT
            assert len(b.get("fields") or []) <= 10
            assert all(len(f["text"]) <= bk.FIELD_TEXT for f in b.get("fields") or [])
        if b["type"] == "context":
            assert 1 <= len(b["elements"]) <= 10
        if b["type"] == "actions":
            assert 1 <= len(b["elements"]) <= 25
            action_ids = [e["action_id"] for e in b["elements"]]
            assert len(action_ids) == len(set(action_ids))
            for e in b["elements"]:
                if e["type"] == "overflow":  # a card's menu: 2 to 5 options, text and value within 75
                    assert 2 <= len(e["options"]) <= 5
                    assert all(len(o["text"]["text"]) <= 75 and len(o["value"]) <= 75 for o in e["options"])
                else:
                    assert len(e["text"]["text"]) <= 75 and len(e.get("value") or "") <= 2000
    # User text must never become a channel-wide ping: the bot writes no <!...> itself.
    everything = msg["text"] + json.dumps(blocks, ensure_ascii=False)
    assert "<!" not in everything, everything[:500]


def check_reply(world: World, replies: list[dict], what: str) -> dict:
    assert len(replies) == 1, f"{what!r}: {len(replies)} replies"
    reply = replies[0]
    assert SORRY not in reply.get("text", ""), f"{what!r} raised: {world.errors[-1:]}"
    assert "Traceback" not in json.dumps(reply)
    check_message(reply)
    world.replies += 1
    return reply


# -- generated input -----------------------------------------------------------------------------------
NASTY = [
    "", " ", "\x00", "\x00\x00search", "\x07\x1b[31m\x1b[0m", "\r\n", "\t", "\u200b", "\u200d", "\ufeff",
    "\u202e", "\u2066", "مرحبا بالعالم", "שלום עולם", "\u202egnidoc\u202c", "日本語の論文", "ẞ", "İ", "ﬁ",
    "🎉", "🔥🔥", "👍🏽", "👨‍👩‍👧", ":tada:", ":skin-tone-3:", ":+1:",
    "<@U123>", "<@U123|bob>", "<#C0EVIL|general>", "<#C0EVIL>", "<!here>", "<!channel>", "<!everyone>",
    "<!subteam^S1|@team>", "<https://example.com|a link>", "<mailto:a@b.c|mail>", "<https://x.y>",
    "&amp;", "&lt;", "&gt;", "&amp;lt;", "&", "<", ">", "<>", "<<@U1>>", "<@", "<#",
    '"', '""', "'", "`", "```", "*", "_", "~", "\\", "%", "%s", "{}", "{0}", "$(id)", "../../etc/passwd",
    'NEAR(', 'a NEAR/2 b', '"unbalanced', "title:", "abstract:x", "^", "-", "--", "+", "(", ")", "AND",
    "OR", "NOT", "* OR *", "col:*", "a AND (b OR", "'); DROP TABLE papers; --", "1; DELETE FROM posts",
    "' OR 1=1 --", "\" OR \"\"=\"", "null", "None", "NaN", "-1", "0", "1", "2", "3", "50", "51",
    "99999999999999999999", "1e308", "#1", "#0", "09:30", "9:30", "25:99", "24:00", "00:00", "9am",
    "noon", "Europe/Berlin", "europe/berlin", "America/New_York", "Mars/Olympus", "UTC", "UTC+14",
    "Etc/GMT-14", "off", "OFF", "weekdays", "daily", "weekends", "mon-fri", "add", "remove", "rm", "confirm",
    "like", "add like", "list", "days", "7d", "90", "91", "list", "help", "summary", "search",
    # Digits that are not ASCII: str.isdigit() says yes to some, int() to others.
    "²", "³", "¹", "①", "⑩", "１", "２３", "٣", "۷", "१", "௫", "๓", "𝟐", "Ⅳ", "½", "2²", "#²", "1\u200b", "\u200b1",
    "\u00a01", "1\u00a0", "\u20282", "\u2009", "\u3000", "O", "l", "Ｏ",
]
# Ingested into the world: text from abstracts, titles and headlines that must not ping anyone.
HOSTILE = [
    ("<!channel> Ping-A: <@UEVIL> wants <#CEVIL|general>", "We show <!here> that <!everyone> and <@UEVIL|x> "
     "mentions &amp; <b>tags</b> survive parsing. Our model beats <!subteam^S1|@team> by 3 points."),
    ("&lt;!channel&gt; Ping-B | <https://evil.example|Official code (verified)>", "Attention <@W0EVIL> "
     "is all you need <!date^1|x>. Results improve by 10 points over <#C0EVIL>."),
]
PAPER_REFS = ["G-NLL", "g-nll", "SD", "TVG", "video grounding", "speculative decoding", "Ping-A", "Ping-B",
              "ping everyone mentions", "<!channel> Ping-A"]


def _paper_refs(store) -> list[str]:
    papers = list(store.iter_papers())
    hostile = [p for p in papers if "Ping-" in (p.title or "")]
    return PAPER_REFS + [p.id for p in papers[:10] + hostile] + [p.short_name for p in papers[:10] + hostile]


def words():
    # Pick the subcommand first, then one of its names, so one with many aliases is not
    # drawn more often than one with none (that made the coverage check below flaky).
    subs = sorted(SUBCOMMANDS.values(), key=lambda s: s.name)
    name = st.sampled_from(subs).flatmap(lambda s: st.sampled_from((s.name, *s.aliases)))
    return st.one_of(  # mostly real subcommands, so each one sees plenty of arguments
        name, name, name, name,
        name.map(str.upper),
        st.sampled_from(["serach", "summry", "simlar", "intrests", "shedule", "todya", "forgetme", "sav"]),
        st.sampled_from(NASTY),
        st.text(max_size=12),
    )


def arguments(refs: list[str]):
    piece = st.one_of(
        st.sampled_from(NASTY),
        st.sampled_from(refs),
        st.text(max_size=24),
        st.integers(-3, 60).map(str),
    )
    joined = st.tuples(st.lists(piece, max_size=8), st.sampled_from([" ", "  ", "\t", "\n", " \u00a0 "])).map(
        lambda t: t[1].join(t[0]))
    huge = st.tuples(st.sampled_from(["attention ", "ü", "🎉", "<@U1> ", "\x00", "& ", "a", "x" * 100]),
                     st.integers(200, 12_000)).map(lambda t: (t[0] * t[1])[:20_000])
    return st.one_of(st.just(""), joined, joined, joined, huge)


def dispatch(world: World, body: dict) -> int:
    return world.app.dispatch(BoltRequest(body=body, mode="socket_mode")).status


def run_line(world: World, text: str, user: str, channel: str) -> dict:
    url = world.fake.new_response_url(channel=channel, user=user)
    body = {"command": "/paper", "text": text, "user_id": user, "user_name": user.lower(),
            "channel_id": channel, "channel_name": "general", "team_id": "T1", "api_app_id": "A1",
            "response_url": url, "trigger_id": "1.2.3"}
    assert dispatch(world, body) == 200
    return check_reply(world, world.fake.responses(url), text[:80])


# -- the properties ---------------------------------------------------------------------------------------
@pytest.mark.slow  # 2,000 generated command lines: half a minute
def test_every_generated_command_line_gets_one_valid_reply_and_writes_only_what_it_should(world):
    refs = _paper_refs(world.store)
    lines = st.tuples(words(), st.sampled_from([" ", "  ", "\t"]), arguments(refs)).map(
        lambda t: f"{t[0]}{t[1]}{t[2]}")

    @hsettings(max_examples=FUZZ_CASES, deadline=None, database=None, derandomize=True,
               suppress_health_check=list(HealthCheck))
    @given(line=lines, user=st.sampled_from(USERS), channel=st.sampled_from(CHANNELS))
    def one_line(line, user, channel):
        word = clean_input(line).partition(" ")[0]
        sub = lookup(word) if word else SUBCOMMANDS["help"]
        name = sub.name if sub else ""
        before = table_counts(world.store)
        reply = run_line(world, line, user, channel)
        check_counts(name, before, table_counts(world.store))
        assert world.store.db.execute("pragma quick_check").fetchone()[0] == "ok"
        if reply["response_type"] == "in_channel":  # only deliberate posts go to everyone
            assert name in ("share", "schedule"), (line[:80], reply["text"][:200])
        world.cases += 1
        world.by_command[name or "?"] = world.by_command.get(name or "?", 0) + 1

    one_line()
    assert world.cases >= FUZZ_CASES * 0.9
    # Every subcommand was exercised many times, not just the first few in the table.
    least = FUZZ_CASES // (len(SUBCOMMANDS) * 6)
    assert all(world.by_command.get(s, 0) >= least for s in SUBCOMMANDS), sorted(world.by_command.items())


def test_button_clicks_with_garbage_values_get_a_reply_and_write_nothing_unexpected(world):
    from bot.blocks import ACTION_SAVE

    refs = [p.id for p in list(world.store.iter_papers())[:5]]
    values = st.one_of(st.sampled_from(refs), st.sampled_from(NASTY), st.text(max_size=300), st.none())
    actions = st.sampled_from([bk.ACTION_SUMMARY, bk.ACTION_SIMILAR, bk.ACTION_SHARE, ACTION_SAVE])
    clicks = 0

    @hsettings(max_examples=BUTTON_CASES, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(action=actions, value=values, user=st.sampled_from(USERS), channel=st.sampled_from(CHANNELS + ("",)))
    def one_click(action, value, user, channel):
        nonlocal clicks
        url = world.fake.new_response_url(channel=channel or "C1", user=user)
        container = {"type": "message", "is_ephemeral": True, "message_ts": "1.000001"}
        if channel:
            container["channel_id"] = channel
        body = {"type": "block_actions", "user": {"id": user, "name": user.lower()}, "api_app_id": "A1",
                "team": {"id": "T1"}, "container": container, "response_url": url, "trigger_id": "1.2.3",
                "actions": [{"action_id": action, "block_id": "b", "type": "button",
                             **({"value": value} if value is not None else {})}]}
        if channel:
            body["channel"] = {"id": channel, "name": "general"}
        before = table_counts(world.store)
        assert dispatch(world, body) == 200
        replies = world.fake.responses(url)
        if action == bk.ACTION_SHARE and replies and replies[0].get("response_type") == "in_channel":
            replies = replies[1:]  # a share outside a channel the bot is in goes via the response_url first
        check_reply(world, replies, f"{action}={value!r}")
        after = table_counts(world.store)
        # A share claims its post (once a day per channel and paper: a posts row) and records it.
        allowed = {**CACHE, "message_papers": (0, 1), "saved_papers": (0, 1),
                   **({"posts": (0, 1)} if action == bk.ACTION_SHARE else {})}
        for table in before:
            low, high = allowed.get(table, (0, 0))
            assert low <= after[table] - before[table] <= high, (action, value, table)
        clicks += 1

    one_click()
    record("fuzz_buttons", cases=clicks)


def test_reaction_and_home_events_with_garbage_fields_are_handled_without_errors(world):
    posted = world.store.db.execute("select channel, ts from posts where ts is not null").fetchall()
    # Slack's event shapes are fixed (a user id is always there); what varies is the strings in
    # them: custom emoji names, items that are files or unknown messages, other tabs.
    field = st.one_of(st.sampled_from(NASTY), st.text(max_size=40), st.none())
    item = st.one_of(
        st.sampled_from([{"type": "message", "channel": c, "ts": t} for c, t in posted]),
        st.fixed_dictionaries({"type": st.sampled_from(["message", "file", "file_comment"]), "channel": field,
                               "ts": field}),
        st.just({}),
    )
    seen = 0

    @hsettings(max_examples=EVENT_CASES, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(kind=st.sampled_from(["reaction_added", "reaction_removed", "app_home_opened"]),
           user=st.sampled_from(USERS + ("W0123ABC",)), reaction=st.one_of(st.sampled_from(
               ["fire", "+1", "-1", "eyes", "thumbsup::skin-tone-2"]), field),
           item=item, item_user=st.one_of(st.just("UBOT"), field), tab=st.one_of(st.just("home"), field),
           event_id=st.one_of(st.uuids().map(str), st.text(max_size=20)))
    def one_event(kind, user, reaction, item, item_user, tab, event_id):
        nonlocal seen
        event = {"type": kind, "user": user, "reaction": reaction, "item": item, "item_user": item_user,
                 "tab": tab, "event_ts": "1717400000.000200"}
        body = {"type": "event_callback", "team_id": "T1", "api_app_id": "A1", "event_id": event_id,
                "event_time": 1717400000, "event": event,
                "authorizations": [{"team_id": "T1", "user_id": "UBOT", "is_bot": True}]}
        errors = len(world.errors)
        before = table_counts(world.store)
        assert dispatch(world, body) == 200
        assert len(world.errors) == errors, world.errors[-1]
        after = table_counts(world.store)
        allowed = {"reactions": (0, 1), "saved_papers": (-1, 1), "message_papers": (0, 1),
                   "processed_events": (0, 1)}  # the event claimed as handled (several replicas)
        for table in before:
            low, high = allowed.get(table, (0, 0))
            assert low <= after[table] - before[table] <= high, (event, table)
        seen += 1

    one_event()
    record("fuzz_events", cases=seen)
