"""Reactions as feedback, Slack side: reaction events -> the log.

A reaction on one of the bot's paper messages (a daily post, its abstract
reply, a shared paper) is logged once per Slack event_id; reactions on
anything else are acked and ignored. A write that meets a busy database
(`StoreBusy`) or a read-only one (`ReadOnlyStorage`: a failover) is retried for minutes
(bot.later.wait_out_busy), so it is not lost; a verdict, which is answered, says a read-only one at once. What the team reads
back lives elsewhere: /paper digest and saved in bot/reading.py, the App Home
in bot/home.py, the pick's feedback and the digest's tally in store/daily.py and bot/posting.py.
"""
from __future__ import annotations

import logging
import re
import threading
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Callable

from store import feedback as fb
from store.errors import StoreBusy
from store.text import member_tag

from . import blocks as bk
from .calibrate import interests_broad, redraw_round
from .commands import Call, Reply, Subcommand, channel_of, resolve
from .later import wait_out_busy

if TYPE_CHECKING:
    from slack_bolt import App

    from store import Store

    from .deps import Deps

log = logging.getLogger("paperclub.reactions")

UNKNOWN_MESSAGES = 5000  # bot messages we looked up and found no paper in (not asked about again)

class PaperlessMessages:
    """Bot messages already read and found to carry no paper (not asked about again): the last
    `size` of them. One per app (register), so two apps in one process share nothing."""

    def __init__(self, size: int = UNKNOWN_MESSAGES):
        self.size = size
        self._seen: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._lock = threading.Lock()

    def __contains__(self, key: tuple[str, str]) -> bool:
        with self._lock:
            return key in self._seen

    def add(self, key: tuple[str, str]) -> None:
        with self._lock:
            self._seen[key] = None
            while len(self._seen) > self.size:
                self._seen.popitem(last=False)


def register(app: App, deps: Deps) -> None:
    """The reaction listeners: each logs its event after the ack."""
    paperless = PaperlessMessages()

    @app.event("reaction_added")
    def handle_reaction_added_event(body, client, context):
        deps.later(lambda: handle_reaction_added(deps, body, client=client, bot_user_id=context.bot_user_id,
                                                 paperless=paperless))

    @app.event("reaction_removed")
    def handle_reaction_removed_event(body, client, context):
        deps.later(lambda: handle_reaction_removed(deps, body, client=client, bot_user_id=context.bot_user_id,
                                                   paperless=paperless))

    def verdict_button(action_id: str, verdict: str | None) -> None:
        @app.action(action_id)
        def handle_verdict_button(ack, action, body, respond):
            ack()
            deps.later(lambda: handle_verdict(deps, body, action, verdict, respond), respond)

    verdict_button(bk.ACTION_MORE, "more")
    verdict_button(bk.ACTION_LESS, "less")
    verdict_button(bk.ACTION_UNDO_VERDICT, None)


# -- verdict buttons -> the same log --------------------------------------------------------------
# A day's pick counts the feedback from before that day began (store.feedback.feedback_for_day), so
# it stays the same all day: a verdict steers the picks from the next day on, and says so.
_FROM = "from tomorrow's pick; today's stays as it is"
_NOTED = {"more": f"👍 Noted: more papers like *{{name}}* for you {_FROM}.",
          "less": f"👎 Noted: fewer papers like *{{name}}* for you {_FROM}."}


def handle_verdict(deps: Deps, body: dict, action: dict, verdict: str | None, respond=None, *,
                   sleep: Callable[[float], None] = time.sleep) -> fb.Recorded:
    """A "For me" / "Not for me" / Undo press: the clicker's verdict on the card's paper, logged like a
    reaction (store.feedback.record_verdict), then said privately with an Undo."""
    paper = deps.store.get_paper((action.get("value") or "").strip())
    user = (body.get("user") or {}).get("id") or ""
    if paper is None or not user:
        if respond is not None:
            respond(text="That paper is no longer in the library.", response_type="ephemeral",
                    replace_original=False)
        return fb.Recorded("ignored")
    container = body.get("container") or {}
    channel = (body.get("channel") or {}).get("id") or container.get("channel_id") or ""
    # Slack stamps each press; a redelivered payload carries the same stamp and is logged once.
    result = record_verdict(deps, user, channel, paper.id, verdict, message_ts=container.get("message_ts") or "",
                            press=action.get("action_ts"), sleep=sleep)
    round_ids = bk.calibration_ids(action.get("block_id"))
    if respond is not None and round_ids:  # a calibration round's card: the round shows the answer
        respond(**redraw_round(deps, user, round_ids).to_message(), replace_original=True)
    elif respond is not None:
        respond(**verdict_reply(deps, user, channel, paper, verdict, result).to_message(), replace_original=False)
    return result


def record_verdict(deps: Deps, user: str, channel: str, paper_id: str, verdict: str | None, *,
                   message_ts: str = "", press: str | None = None,
                   sleep: Callable[[float], None] = time.sleep) -> fb.Recorded:
    """Log a member's verdict (None: take it back) on a paper, from a button on a message
    (`message_ts`, `press`: Slack's stamp of the click) or typed (neither); a busy database is
    waited out, as for a reaction, so neither way loses it."""
    now = deps.clock().timestamp()  # once: each attempt writes the same event, so it counts once
    event_id = f"verdict:{user}:{paper_id}:{verdict or 'undo'}:{press or f'{now:.6f}'}"[:255]
    result = wait_out_busy(
        lambda: fb.record_verdict(deps.store, user=user, paper_id=paper_id, verdict=verdict, channel=channel,
                                  message_ts=message_ts, event_id=event_id, now=now),
        what=f"verdict {verdict or 'undo'} on {paper_id} by {member_tag(user)}", sleep=sleep)
    log.info("verdict %s by %s on %s: %s", verdict or "undo", member_tag(user), paper_id, result.status)
    return result


def verdict_reply(deps: Deps, user: str, channel: str, paper, verdict: str | None, result: fb.Recorded, *,
                  note: str | None = None) -> Reply:
    """What a verdict says back, privately: what was noted (Undo while it stands) and, after the third
    miss in a row picked for the member, what to do about it (`_offer_after_misses`)."""
    name = bk.esc(bk.cut_chars(paper.short_name, 120))
    if verdict is None:
        text = (f"Taken back: your verdict on *{name}* no longer counts {_FROM}." if result.status == "recorded"
                else f"You have no verdict on *{name}* to take back.")
    else:
        text = _NOTED[verdict].format(name=name)
        if result.status == "duplicate":
            text += " (You had said so already: it counts once.)"
    blocks = bk.verdict_blocks(text, paper, undo=verdict is not None)
    if note:  # typed, and the words were a best guess: which paper took it, and Undo under it
        blocks.insert(1, bk.context(note))
    if verdict == "less" and result.status == "recorded":
        blocks += _offer_after_misses(deps, user, channel, paper.id)[1]
    return Reply(text, blocks)


def _typed(verdict: str | None) -> Callable[[Deps, Call], Reply]:
    def handle(deps: Deps, call: Call) -> Reply:
        paper, note = resolve(deps, call.args)
        channel = channel_of(call)
        result = record_verdict(deps, call.user_id, channel, paper.id, verdict)
        return verdict_reply(deps, call.user_id, channel, paper, verdict, result, note=note)
    return handle


SUBCOMMANDS = (
    Subcommand("for-me", _typed("more"), usage="for-me <paper>", example="for-me SPIKE",
               help="Say a paper is for you, as its 👍 For me button does: your turns of this channel's paper "
                    "of the day learn it. `not-for-me <paper>` says the opposite, `take-back <paper>` "
                    "undoes either.", aliases=("forme",)),
    Subcommand("not-for-me", _typed("less"), usage="not-for-me <paper>", example="not-for-me SPIKE",
               help="Say a paper is not for you, as its 👎 Not for me button does.", aliases=("notforme",),
               hidden=True),
    Subcommand("take-back", _typed(None), usage="take-back <paper>", example="take-back SPIKE",
               help="Take back your For me or Not for me on a paper, as its Undo button does.",
               aliases=("takeback", "undo"), hidden=True),  # the button's label, typed
)


ASK_AFTER_MISSES = 3  # papers in a row a member judged against before the bot speaks up, once a run


def _offer_after_misses(deps: Deps, user: str, channel: str, paper_id: str) -> tuple[str, list]:
    """A member with interests here who just judged against (a 👎, a "not for me") the third paper in a
    row picked for them (`paper_id`: the one just judged; `misses_in_a_row`): their words may read
    differently here than they mean. Where every interest of theirs is as wide as the library
    (`broad_interests`), nothing in their words says where to look, so offer the calibration round
    for them; otherwise say how to put the topic another way (a second round for a specific topic
    made iclr2024's later days worse in bench/picks.py: docs/pick-tuning.md). Once a run; ("", [])
    otherwise."""
    try:
        mine = [r for r in deps.store.interests(channel) if r.get("added_by") == user]
        if not mine or fb.misses_in_a_row(deps.store, user, channel, deps.feedback.weights,
                                          judged=paper_id) != ASK_AFTER_MISSES:
            return "", []
    except StoreBusy:
        return "", []  # the verdict is logged; this can wait for the next one
    cmd = deps.command
    missed = f"That is {ASK_AFTER_MISSES} papers in a row here that were not for you"
    if all(interests_broad(deps, mine)):
        text = (f"{missed}, and your interests are as wide as this library. Say which of a few papers from "
                "across it you would read, and your next picks follow what you chose.")
        return text, bk.calibrate_offer(text, "", typed=f"{cmd} calibrate")
    text = (f"{missed}: your words may read differently here than you mean. Put your topic another way, "
            f"as a paper would name it ({bk.code(cmd + ' interests add <topic>')}), or name a paper you "
            f"liked ({bk.code(cmd + ' interests add like <paper>')}).")
    return text, [bk.section(text)]


# -- reaction events -> the log -----------------------------------------------------------------
def handle_reaction_added(deps: Deps, body: dict, *, client=None, bot_user_id: str | None = None,
                          sleep: Callable[[float], None] = time.sleep,
                          paperless: PaperlessMessages | None = None) -> fb.Recorded:
    return _handle(deps, body, True, client, bot_user_id, sleep, paperless)


def handle_reaction_removed(deps: Deps, body: dict, *, client=None, bot_user_id: str | None = None,
                            sleep: Callable[[float], None] = time.sleep,
                            paperless: PaperlessMessages | None = None) -> fb.Recorded:
    return _handle(deps, body, False, client, bot_user_id, sleep, paperless)


def _handle(deps: Deps, body: dict, added: bool, client, bot_user_id, sleep,
            paperless: PaperlessMessages | None) -> fb.Recorded:
    event = body.get("event") or {}
    item = event.get("item") or {}
    channel, ts, user = item.get("channel"), item.get("ts"), event.get("user")
    emoji = event.get("reaction")
    if item.get("type") != "message" or not (channel and ts and user and emoji):
        return fb.Recorded("ignored")  # files and file comments carry no paper
    now = deps.clock().timestamp()
    event_ts = _float(event.get("event_ts")) or _float(body.get("event_time")) or now
    # Slack always sends an event_id; the fallback still makes a re-sent copy collide with the first.
    event_id = body.get("event_id") or f"{'add' if added else 'rm'}:{channel}:{ts}:{user}:{emoji}:{event_ts}"
    store = deps.store

    def log_it() -> fb.Recorded:
        return fb.record_reaction(store, event_id=event_id, channel=channel, message_ts=ts, user=user,
                                  emoji=emoji, added=added, event_ts=event_ts,
                                  event_time=_float(body.get("event_time")), now=now)

    def record() -> fb.Recorded:
        result = log_it()  # looks the message up once; "ignored" when it shows no paper we know
        if result.status != "ignored":
            return result
        bot = bot_user_id or _authorized_user(body)
        if (client and bot and event.get("item_user") == bot
                and learn_message(store, client, channel, ts, now=now, paperless=paperless)):
            return log_it()
        return result

    # Nobody can be told to react again: a read-only database (a failover) is waited out too.
    result = wait_out_busy(record, what=f"reaction {event_id} ({emoji} by {member_tag(user)} on {channel}/{ts})",
                           sleep=sleep, no_reply=True)
    if result.status != "ignored":
        log.info("reaction %s %s by %s on %s: %s", emoji, "added" if added else "removed", member_tag(user),
                 result.paper_id, result.status)
    if (added and result.status == "recorded" and client is not None
            and fb.weight_of(emoji, deps.feedback.weights) < 0):
        text, offer = _offer_after_misses(deps, user, channel, result.paper_id or "")
        if offer:  # only they see it; the reaction counts whatever Slack says to this
            try:
                client.chat_postEphemeral(channel=channel, user=user, text=text, blocks=offer)
            except Exception:
                log.warning("could not tell %s in %s that their last papers missed", member_tag(user), channel,
                            exc_info=True)
    return result


def _float(value) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _authorized_user(body: dict) -> str | None:
    auths = body.get("authorizations") or []
    return auths[0].get("user_id") if auths else None


_SHARED_BY = re.compile(r"<@([UW][A-Z0-9]+)>")


def learn_message(store: Store, client, channel: str, ts: str, *, now: float,
                  paperless: PaperlessMessages | None = None) -> bool:
    """A bot message we have no record of (a share posted through a response_url): find its paper.

    The message is read once with reactions.get; its blocks carry the paper id.
    Messages without one are remembered in `paperless` so they cost no further calls.
    """
    key = (channel, ts)
    if paperless is not None and key in paperless:
        return False
    try:
        message = client.reactions_get(channel=channel, timestamp=ts).get("message") or {}
    except Exception as e:  # no scope, message gone, Slack down: the reaction is simply not ours to log
        log.info("could not read message %s/%s to find its paper: %s", channel, ts, e)
        return False
    paper_id, kind = _paper_in(store, message)
    if paper_id is None:
        if paperless is not None:
            paperless.add(key)
        return False
    shared_by = None
    for b in message.get("blocks") or []:
        if b.get("type") == "context":
            found = _SHARED_BY.search(" ".join(e.get("text", "") for e in b.get("elements") or []))
            if found:
                shared_by = found.group(1)
                break
    store.record_message_paper(channel, ts, paper_id, kind=kind, posted_by=shared_by,
                               now=_float(ts) or now)
    return True


def _paper_in(store: Store, message: dict) -> tuple[str | None, str]:
    """(paper id, kind) from a bot message's block ids ("shared-<id>", "daily-<id>") or button values."""
    candidates = []
    for b in message.get("blocks") or []:
        block_id = b.get("block_id") or ""
        for prefix, kind in ((bk.SHARED_BLOCK, "share"), (bk.DAILY_BLOCK, "daily")):
            if block_id.startswith(prefix) and not block_id.startswith((bk.RUNNER_BLOCK, bk.DAILY_ACT_BLOCK)):
                candidates.append((block_id[len(prefix):], kind))
        for e in b.get("elements") or []:
            if isinstance(e, dict) and e.get("type") == "button" and e.get("value"):
                candidates.append((e["value"], "share"))
    for paper_id, kind in candidates:
        if store.get_paper(paper_id) is not None:
            return paper_id, kind
    return None, "share"
