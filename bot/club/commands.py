"""`/paper club ...`, `/paper nominate`, the setup modal, votes and swaps.

A handler parses, calls store/club.py, renders with bot/blocks.py. Votes arrive
as clicks on the agenda post, which is updated in place (chat.update) with the
counts; a click after the cutoff gets a polite ephemeral answer. The club's
scheduled posts and DMs are in bot/club/posts.py, its history, exports and map in
bot/club/reports.py.
"""
from __future__ import annotations

import hashlib
import hmac
import logging
import re
import threading
from datetime import date, datetime
from typing import TYPE_CHECKING, Callable

from slack_sdk.errors import SlackApiError

from store import club as cl
from store.dates import days_label
from store.errors import StoreError
from store.text import member_tag

from .. import blocks as bk
from ..blocks import code, mention
from ..commands import (
    Call,
    Reply,
    Subcommand,
    admins_only,
    channel_of,
    is_admin,
    problem_reply,
    resolve,
)
from ..confirm import ask_first, split_confirm
from ..later import wait_out_busy
from .posts import (SETUP_USAGE, _label, _spec, agenda_update, dm_presenter, redraw_agenda, stepped_down,
                    swapped)
from .reports import export_reply, history_reply, map_reply

if TYPE_CHECKING:
    from slack_bolt import App

    from ..deps import Deps, Later

log = logging.getLogger("bot.club")

_MENTION = re.compile(r"<@([UW][A-Z0-9]+)(?:\|[^>]*)?>")


def _next(deps: Deps, channel: str, spec: cl.ClubSpec) -> datetime | None:
    return cl.next_session(spec, deps.clock(), skipped=cl.skipped_for(deps.store, channel))


# -- /paper club -------------------------------------------------------------------------------
def status_reply(deps: Deps, channel: str, user: str, *, note: str | None = None) -> Reply:
    """The next session: date, paper, presenter, votes so far, who is in, and when `user` is away."""
    spec = cl.club_for(deps.store, channel)
    members = [m["user"] for m in deps.store.club_members(channel)]
    lines = [bk.esc(note)] if note else []
    admin = is_admin(deps, user)
    cmd = deps.command
    setup = code(f"{cmd} {SETUP_USAGE}")
    meets = spec is not None and spec.active
    if not meets:
        lines.append(("This channel has no reading group yet. " if spec is None else "The reading group is off. ")
                     + (f"Set it up with {setup}." if admin else f"An admin sets it up with {setup}."))
    else:
        start = _next(deps, channel, spec)
        lines.append(f"Meets {bk.esc(spec.describe())}.")
        if start is not None:
            day = start.date().isoformat()
            row = deps.store.get_club_session(channel, day) or {}
            paper = deps.store.get_paper(row["paper_id"]) if row.get("paper_id") else None
            noms = deps.store.nominations(channel, day)
            votes = deps.store.club_votes(channel, day)
            lines.append(f"*Next session:* {bk.esc(_label(start))}")
            lines.append(f"*Paper:* {bk.esc(paper.short_name) if paper else '_not chosen yet_'}")
            lines.append(f"*Presenter:* {mention(row['presenter']) if row.get('presenter') else '_not chosen yet_'}")
            if spec.mode == cl.PRESENTER_CHOOSES:
                lines.append(f"*Nominations:* {len(noms)} · the presenter chooses among them")
            else:
                lines.append(f"*Nominations:* {len(noms)} · *votes so far:* {len(votes)}")
        today = cl.local_today(spec.tz, deps.clock())
        away = [a for a in cl.aways_for(deps.store, channel) if a.user == user and a.end >= today]
        if away:  # as the away reply said them, so the member sees what they told the club
            spans = [days_label(a.start, a.end) for a in sorted(away, key=lambda a: (a.start, a.end))]
            lines.append("*You are away:* " + bk.fit_items(spans, 600))
    if members:  # as many as the message holds, and how many more there are
        label = f"*Members ({len(members)}):* "
        room = bk.SECTION_TEXT - len("\n".join(lines)) - len(label) - 1
        lines.append(label + bk.fit_items([mention(m) for m in members], room))
    else:
        lines.append("*Members:* _nobody yet_")
    words = ("club join", "club leave", "club away <date or range>", "nominate <paper>", "club history") if meets \
        else ("help club",)
    footer = " · ".join(code(f"{cmd} {c}") for c in (*words, *((SETUP_USAGE,) if admin else ())))
    blocks = bk.club_status_blocks(lines, setup_channel=channel if admin else None, footer=footer)
    return Reply("\n".join(lines), blocks)


def handle_club(deps: Deps, call: Call) -> Reply:
    channel = channel_of(call)
    word, _, rest = call.args.partition(" ")
    word, rest = word.lower(), rest.strip()
    now = deps.clock()
    store = deps.store
    if not word:
        return status_reply(deps, channel, call.user_id)
    if word in ("join", "leave"):
        _spec(deps, channel)
        if word == "join":
            changed = store.set_club_member(channel, call.user_id, active=True, now=now.timestamp())
            note = "You are in the presenter rotation." if changed else "You were in the rotation already."
        else:
            changed, freed = cl.leave_rotation(store, channel, call.user_id, now)
            stepped_down(deps, deps.slack, channel, freed)
            note = ("You left the presenter rotation." if changed else "You were not in the rotation.") \
                + _stepped_down(freed)
        return status_reply(deps, channel, call.user_id, note=note)
    if word == "away":
        spec = _spec(deps, channel)
        try:
            start, end = cl.parse_away(rest, now.astimezone(_zone(spec)).date())
        except cl.ClubError as exc:
            return problem_reply(deps, str(exc), hint=f"For example {code(deps.command + ' club away next week')} "
                                                      f"or {code(deps.command + ' club away 10 Dec - 24 Dec')}.")
        freed = cl.add_away(store, channel, call.user_id, start, end, now)
        stepped_down(deps, deps.slack, channel, freed)
        return Reply(f"Noted: you are away {days_label(start, end)}; you will not be asked to present then.{_stepped_down(freed)}")
    if word in ("skip", "unskip"):
        return skip_reply(deps, call, channel, word, rest)
    if word == "off":
        spec = _spec(deps, channel)
        if not is_admin(deps, call.user_id):
            return admins_only(deps, "stop the reading group")
        extra, confirmed = split_confirm(rest)
        if extra:
            return problem_reply(deps, "club off takes nothing after it: it stops this channel's reading group.")
        if not confirmed:
            return ask_first(deps, call, "off", title="Stop the reading group?", button="Stop the club",
                             text="This stops this channel's reading group: no more agendas, votes, presenter "
                                  "reminders or session threads. Its history stays, and an admin can set it "
                                  "up again.")
        store.set_club(channel, set_by=call.user_id, now=now.timestamp(), active=0)
        return Reply("The reading group is off. Its history stays; an admin can set it up again.")
    if word in ("setup", "start", "create"):
        return setup_reply(deps, call, channel, rest)
    if word == "history":
        return history_reply(deps, channel)
    if word == "swap":
        return swap_reply(deps, call, channel)
    if word == "export":
        return export_reply(deps, channel, call.user_id)
    if word == "map":
        return map_reply(deps, channel)
    return problem_reply(deps, f"I don't know `club {word.replace('`', chr(39))}`.",  # escaped there
                         hint=f"Try {code(deps.command + ' club')} for the next session, or "
                              f"{code(deps.command + ' help club')} for every club word.")


def _stepped_down(days: list[date]) -> str:
    """The sessions a member was just taken off (store.club.step_down), as the reply's last sentence."""
    if not days:
        return ""
    return f" You were to present on {' and '.join(f'{d:%a %-d %b}' for d in days)}; someone else will be asked."


def skip_reply(deps: Deps, call: Call, channel: str, word: str, rest: str) -> Reply:
    """`club skip <date>` cancels a session, its nominations carried to the next; `club unskip <date>`
    holds it after all."""
    spec = _spec(deps, channel)
    if not is_admin(deps, call.user_id):
        return admins_only(deps, "skip a session" if word == "skip" else "hold a skipped session")
    now = deps.clock()

    def refuse(message: str) -> Reply:
        example = code(f"{deps.command} club {word} {_example_day(deps, channel, spec, word, now)}")
        return problem_reply(deps, message, hint=f"For example {example}.")

    if not rest:
        return refuse("Which session? Give its date or its weekday.")
    try:
        day = cl.session_day(spec, rest, now)
    except cl.ClubError as exc:
        return refuse(str(exc))
    when = days_label(day)
    undo = f"`{deps.command} club unskip {day.isoformat()}`"  # plain: status_reply escapes its note
    if word == "unskip":
        unskip = cl.unskip_session(deps.store, spec, channel, day, now)
        if unskip.outcome == "no_session":
            return problem_reply(deps, f"The club does not meet on {when}.")
        if unskip.outcome == "not_skipped":
            return status_reply(deps, channel, call.user_id,
                                note=f"The session on {when} was not cancelled: nothing to undo.")
        log.info("club session %s restored in %s by %s", day, channel, member_tag(call.user_id))
        redraw_agenda(deps, deps.slack, channel, day, deps.clock())
        return status_reply(deps, channel, call.user_id, note=f"The session on {when} is on again. {_back(unskip)}")
    skip = cl.skip_session(deps.store, spec, channel, day, now)
    if skip.outcome == "no_session":
        return problem_reply(deps, f"The club does not meet on {when}.")
    if skip.outcome == "already":
        return status_reply(deps, channel, call.user_id,
                            note=f"The session on {when} was already cancelled. Undo with {undo}.")
    carried = ("It had no nominations." if not skip.carried else
               f"Its {skip.carried} nomination{'s' if skip.carried != 1 else ''} carried over to "
               f"{_label(skip.next) if skip.next else 'the next session'}"
               + (f"; the {_votes(skip.votes_dropped)} cast for it {'do' if skip.votes_dropped != 1 else 'does'} not."
                  if skip.votes_dropped else "."))
    log.info("club session %s skipped in %s by %s", day, channel, member_tag(call.user_id))
    redraw_agenda(deps, deps.slack, channel, day, deps.clock())
    return status_reply(deps, channel, call.user_id, note=f"The session on {when} is cancelled. {carried} "
                                                          f"Undo with {undo}.")


def _example_day(deps: Deps, channel: str, spec: cl.ClubSpec, word: str, now: datetime) -> str:
    """The date a refused skip (or unskip) shows in its example: the next session (or skipped one)."""
    skipped = cl.skipped_for(deps.store, channel)
    if word == "unskip":
        ahead = [s.date() for s in cl.session_starts(spec, now, count=60) if s.date() in skipped]
    else:
        ahead = [s.date() for s in cl.session_starts(spec, now, skipped=skipped)]
    return ahead[0].isoformat() if ahead else "2026-12-10"


def _votes(n: int) -> str:
    return f"{n} vote{'s' if n != 1 else ''}"


def _back(unskip: cl.Unskip) -> str:
    """What came back with a restored session: its nominations, from where, and the votes withdrawn."""
    n = unskip.back
    if not n:
        return "It has no nominations."
    nominations = f"Its {n} nomination{'s' if n != 1 else ''}"
    if not unskip.came_from:
        return f"{nominations} {'are' if n != 1 else 'is'} on its ballot again."
    k = unskip.votes_withdrawn
    votes = f"; the {_votes(k)} cast for them there {'are' if k != 1 else 'is'} withdrawn" if k else ""
    return f"{nominations} came back from {' and '.join(_label(t) for t in unskip.came_from)}{votes}."


SETUP_EXAMPLE = "club setup thursday 17:00 Europe/Berlin weekly vote nominations 72 votes 24"
_FIELD_WORDS = {"weekday": "weekday", "time": "time", "tz": "zone", "cadence": "weekly or fortnightly",
                "lead": "nominations <hours>", "cutoff": "votes <hours>", "mode": "vote or presenter", "words": ""}


def setup_reply(deps: Deps, call: Call, channel: str, rest: str) -> Reply:
    """`club setup <weekday> <HH:MM> [zone] ...`: the setup modal's typed twin (the console has no
    modals), checked field by field by the same store.club.club_from_form."""
    if not is_admin(deps, call.user_id):
        return admins_only(deps, "set up the reading group")
    if not rest:
        return problem_reply(deps, "When does the group meet?", hint=f"For example {code(deps.command + ' ' + SETUP_EXAMPLE)}; "
                             "anything left out keeps its current value.")
    try:
        form = cl.setup_form(deps.store, channel, deps.settings.timezone)
        spec = cl.club_from_form(cl.form_from_words(rest, form))
    except cl.ClubFormError as e:
        wrong = "\n".join(f"• {(_FIELD_WORDS.get(f) + ': ') if _FIELD_WORDS.get(f) else ''}{m}"
                          for f, m in e.errors.items())  # problem_reply escapes it
        return problem_reply(deps, "The club is not set up:\n" + wrong,
                             hint=f"For example {code(deps.command + ' ' + SETUP_EXAMPLE)}.")
    cl.set_club(deps.store, channel, spec, by=call.user_id, now=deps.clock())
    log.info("club set up in %s by %s: %s", channel, member_tag(call.user_id), spec.describe())
    return set_up_reply(deps, channel, call.user_id)


def set_up_reply(deps: Deps, channel: str, user: str) -> Reply:
    """What an admin sees once the club is set up, typed or by the form: the club's card, which says when."""
    return status_reply(deps, channel, user, note="The reading group is set up:")


def _zone(spec: cl.ClubSpec):
    from zoneinfo import ZoneInfo

    return ZoneInfo(spec.tz)


CHANNEL_ID = re.compile(r"[CG][A-Z0-9]{1,20}")  # a channel a club can meet in


def _seal(deps: Deps, channel: str, user: str) -> str:
    """The setup modal's private_metadata: its channel and opener, signed, so a submission acts
    only on the channel the bot opened the modal for, and only for the admin it opened it for."""
    return f"{channel}|{user}|{_signature(deps, channel, user)}"


def _unseal(deps: Deps, metadata: str, user: str) -> str | None:
    """The channel a sealed private_metadata names, if this bot sealed it for `user`; else None."""
    channel, opener, signature = (metadata + "||").split("|")[:3]
    if opener != user or not CHANNEL_ID.fullmatch(channel):
        return None
    return channel if hmac.compare_digest(signature, _signature(deps, channel, user)) else None


def _signature(deps: Deps, channel: str, user: str) -> str:
    token = deps.settings.slack_bot_token
    secret = token.get_secret_value() if hasattr(token, "get_secret_value") else (token or "")
    key = hashlib.sha256(f"paperclub-club-setup:{secret}".encode()).digest()
    return hmac.new(key, f"{channel}|{user}".encode(), hashlib.sha256).hexdigest()[:32]


SWAP_REFUSED = {  # why cl.accept_swap said no, as the member who clicked Accept reads it
    "started": "That offer has expired: the session on {day} has begun or is over, and who presented stays as it was.",
    "changed": "That offer has expired: the slot on {day} changed hands already.",
    "not_member": "{me}, you are not in the presenter rotation now; `club join` first, then ask for a new offer.",
    "away": "{me}, you are away on {day}, so I left the slot as it was.",
}


def _chosen_value(action: dict) -> str:
    """A Vote or Choose button's value, or the option picked in the agenda's menu of more nominations."""
    return action.get("value") or (action.get("selected_option") or {}).get("value") or ""


def swap_reply(deps: Deps, call: Call, channel: str) -> Reply:
    """Offer my next presenting slot to another member; nothing changes until they accept."""
    found = _MENTION.search(call.raw)
    if not found:
        return problem_reply(deps, f"Whom should I ask? {deps.command} club swap @member")
    other = found.group(1)
    _spec(deps, channel)
    now = deps.clock()
    mine = [r for r in deps.store.club_sessions(channel)
            if r["state"] == "planned" and r["presenter"] == call.user_id and r["date"] >= now.date().isoformat()]
    if not mine:
        return problem_reply(deps, "You have no session to present yet.")
    if other == call.user_id:
        return problem_reply(deps, "That is you.")
    # problem_reply escapes its message, so a mention goes in the hint, which is mrkdwn.
    if other not in {m["user"] for m in deps.store.club_members(channel)}:
        return problem_reply(deps, "Only a member of the presenter rotation can take your slot.",
                             hint=f"{mention(other)} is not in it; they join with {code(deps.command + ' club join')}.")
    day = mine[0]["date"]
    if cl.is_away(other, date.fromisoformat(day), cl.aways_for(deps.store, channel)):
        return problem_reply(deps, f"They are away on {day}, the session you present.",
                             hint=f"{mention(other)} can't take it; offer it to someone else.")
    text = f"{mention(call.user_id)} asks {mention(other)} to present on {day} instead. {mention(other)}, will you?"
    return Reply(text, bk.swap_blocks(text, f"{day}|{call.user_id}|{other}"), in_channel=True)


def handle_nominate(deps: Deps, call: Call) -> Reply:
    if not call.args:
        return problem_reply(deps, f"Which paper? {deps.command} nominate <paper name or id>")
    _spec(deps, channel_of(call))  # no club here: that first, whatever the paper
    paper, note = resolve(deps, call.args)
    return nominate_reply(deps, channel_of(call), paper, call.user_id, note=note)


def nominate_reply(deps: Deps, channel: str, paper, user: str, *, note: str | None = None) -> Reply:
    _spec(deps, channel)  # no club: say how one starts
    day, added = cl.nominate(deps.store, channel, paper.id, user, deps.clock())
    name = bk.esc(paper.short_name)
    text = (f"Nominated *{name}* for the session on {day.isoformat()}." if added
            else f"*{name}* is already nominated for {day.isoformat()}.")
    if note:
        text = f"{bk.esc(note)}\n{text}"
    return Reply(text, bk.message_blocks(text))


_VOTE_ANSWERS = {
    "already": "You have already voted for that paper; your vote counts once.",
    "full": f"You have used your {cl.MAX_VOTES} votes. Clear your votes to choose again.",
    "closed": "Voting for that session has closed, sorry: the winner is being announced.",
    "cancelled": "That session was cancelled, so it takes no votes: vote on the next session's agenda.",
    "unknown": "That paper is not on this session's list.",
    "presenter": "In this reading group the presenter chooses the paper, so there is no vote.",
}
_CHOOSE_ANSWERS = {
    "already": "That paper is your choice already.",
    "closed": "The choice for that session has closed: the paper is being announced.",
    "cancelled": "That session was cancelled, so there is no paper to choose for it.",
    "unknown": "That paper is not on this session's list.",
}


# -- listeners ----------------------------------------------------------------------------------
class MessageUpdates:
    """Redraws of one Slack message, folded: a redraw asked for while one waits for the work pool is
    that one (it reads the store when it runs), and one asked for while one runs runs once after it.
    So a burst of clicks costs one or two chat.update calls, not one each, and none on the claim pool."""

    def __init__(self, later: Later):
        self.later = later
        self._lock = threading.Lock()
        self._state: dict[tuple[str, str], str] = {}  # message -> "waiting" | "running" | "again"

    def __call__(self, key: tuple[str, str], update: Callable[[], None]) -> None:
        with self._lock:
            state = self._state.get(key)
            if state in ("waiting", "again"):
                return  # the redraw on its way reads the store when it runs
            self._state[key] = "again" if state == "running" else "waiting"
            if state == "running":
                return
        self.later(lambda: self._run(key, update))

    def _run(self, key: tuple[str, str], update: Callable[[], None]) -> None:
        again = True
        while again:  # in this worker: once more for the clicks that came while it ran
            with self._lock:
                self._state[key] = "running"
            try:
                update()
            finally:
                with self._lock:
                    again = self._state.pop(key) == "again"


def nominate_paper(deps: Deps, respond, paper_id: str, body: dict) -> None:
    """Nominate on a paper card (bot/app.py routes the button and the menu entry here): put the paper
    on the next session's list in the clicker's channel, and say so privately."""
    def ephemeral(text: str) -> None:
        respond(text=text, response_type="ephemeral", replace_original=False)

    paper = deps.store.get_paper(paper_id)
    if paper is None:
        return ephemeral("That paper is no longer in the library.")
    channel = (body.get("channel") or {}).get("id") or (body.get("container") or {}).get("channel_id") or ""
    try:
        reply = nominate_reply(deps, channel, paper, (body.get("user") or {}).get("id") or "")
    except cl.ClubError as exc:
        return ephemeral(bk.esc(str(exc)))
    respond(**reply.to_message(), replace_original=False)


def register(app: App, deps: Deps) -> None:
    """The club's buttons (but Nominate, a paper card's: bot/app.py) and the setup modal."""
    store = deps.store

    def ephemeral(respond, text: str) -> None:
        respond(text=text, response_type="ephemeral", replace_original=False)

    def user_of(body) -> str:
        return (body.get("user") or {}).get("id") or ""

    def channel_of_body(body) -> str:
        return (body.get("channel") or {}).get("id") or (body.get("container") or {}).get("channel_id") or ""

    @app.action(bk.ACTION_CLUB_SETUP)
    def handle_setup_button(ack, action, body, client, respond):
        ack()
        user, here = user_of(body), channel_of_body(body)
        # The channel the button was clicked in, not the one its value names (a value can be forged).
        channel = here or (action.get("value") or "").strip()
        if not is_admin(deps, user) or not CHANNEL_ID.fullmatch(channel):
            return
        # trigger_id expires ~3 s after the click: open the modal now, before anything slow (the
        # runner opens it before the click's claim too: bot.claims.OPENS_A_MODAL).
        try:
            client.views_open(trigger_id=body["trigger_id"],
                              view=bk.club_setup_view(_seal(deps, channel, user),
                                                      cl.setup_form(store, channel, deps.settings.timezone)))
        except SlackApiError as e:
            log.warning("the club setup form did not open: %s", e.response.get("error"))
            ephemeral(respond, "The setup form did not open in time. Press *Set up the club* again.")

    @app.view(bk.CLUB_SETUP_VIEW)
    def handle_setup_submission(ack, body, view, client):
        user = user_of(body)
        channel = _unseal(deps, view.get("private_metadata") or "", user)
        values = (view.get("state") or {}).get("values") or {}

        def val(block: str):
            v = (values.get(block) or {}).get("value") or {}
            return (v.get("selected_option") or {}).get("value") or v.get("selected_time") or v.get("value")

        if channel is None or not is_admin(deps, user):
            # Not a form this bot opened for this admin: change nothing, and say so in the modal.
            log.warning("refused a club setup form not opened for %s", member_tag(user))
            ack(response_action="update", view=bk.notice_view(
                "Reading group", "This form was not opened for you here, so nothing was saved. "
                f"Open it again with {deps.command} club in the club's channel."))
            return
        try:
            spec = cl.club_from_form({field: val(field) for field in bk.CLUB_SETUP_FIELDS})
        except cl.ClubFormError as exc:
            ack(response_action="errors", errors=exc.errors)
            return
        ack()  # the modal closes now; the write waits its turn in the work pool

        def tell(said: dict) -> None:  # the form closed on its ack: the admin reads, privately, where the club is
            try:
                client.chat_postEphemeral(channel=channel, user=user, text=said["text"], blocks=said["blocks"])
            except SlackApiError as e:
                log.warning("could not tell %s how the club's setup went: %s", member_tag(user),
                            e.response.get("error"))

        def job():
            try:  # the form is gone, so a busy database is waited out rather than the setup lost
                wait_out_busy(lambda: cl.set_club(store, channel, spec, by=user, now=deps.clock()),
                              what=f"the club's setup in {channel} by {member_tag(user)}")
            except StoreError:
                tell(problem_reply(deps, "The reading group was not set up: I could not save the form just now.",
                                   hint=f"Open it again with {code(deps.command + ' club')}.").to_message())
                raise  # logged
            log.info("club set up in %s by %s: %s", channel, member_tag(user), spec.describe())
            tell(set_up_reply(deps, channel, user).to_message())
        deps.later(job)

    @app.action(bk.ACTION_VOTE)
    def handle_vote(ack, action, body, respond, client):
        ack()  # this listener runs on the claim pool: everything else on the work pool

        def job():
            day_text, _, paper_id = _chosen_value(action).partition("|")
            channel = channel_of_body(body)
            ts = (body.get("container") or {}).get("message_ts") or (body.get("message") or {}).get("ts")
            try:
                day = date.fromisoformat(day_text)
            except ValueError:
                return ephemeral(respond, "That vote button is broken; ask for a fresh agenda.")
            result = cl.cast_vote(store, channel, day, user_of(body), paper_id, deps.clock())
            if result != "added":
                return ephemeral(respond, _VOTE_ANSWERS[result])
            _refresh(client, channel, ts, day)
        deps.later(job, respond)

    @app.action(bk.ACTION_CLUB_CHOOSE)
    def handle_choose(ack, action, body, respond, client):
        ack()

        def job():
            day_text, _, paper_id = _chosen_value(action).partition("|")
            channel, user = channel_of_body(body), user_of(body)
            ts = (body.get("container") or {}).get("message_ts") or (body.get("message") or {}).get("ts")
            try:
                day = date.fromisoformat(day_text)
            except ValueError:
                return ephemeral(respond, "That button belongs to an agenda I no longer know.")
            result = cl.choose_paper(store, channel, day, user, paper_id, deps.clock())
            if result == "not_presenter":
                row = store.get_club_session(channel, day.isoformat()) or {}
                who = mention(row["presenter"]) if row.get("presenter") else "the presenter"
                return ephemeral(respond, f"Thanks, but in this reading group {who} chooses the paper for "
                                          f"{day:%a %-d %b}. You can still nominate one: "
                                          f"{code(deps.command + ' nominate <paper>')}.")
            if result != "chosen":
                return ephemeral(respond, _CHOOSE_ANSWERS[result])
            _refresh(client, channel, ts, day)
            paper = store.get_paper(paper_id)
            ephemeral(respond, f"You chose *{bk.esc(paper.short_name) if paper else paper_id}*; you can change "
                               "your mind until the cutoff, when it is announced.")
        deps.later(job, respond)

    @app.action(bk.ACTION_CLEAR_VOTES)
    def handle_clear_votes(ack, action, body, respond, client):
        ack()

        def job():
            channel = channel_of_body(body)
            try:
                day = date.fromisoformat((action.get("value") or "").strip())
            except ValueError:
                return ephemeral(respond, "That button belongs to an agenda I no longer know.")
            state = cl.ballot_state(store, channel, day, deps.clock())
            if state != "open":
                return ephemeral(respond, _VOTE_ANSWERS[state])
            if store.clear_votes(channel, day.isoformat(), user_of(body)):
                _refresh(client, channel, (body.get("container") or {}).get("message_ts"), day)
            ephemeral(respond, "Your votes are cleared; vote again until the cutoff.")
        deps.later(job, respond)

    @app.event("member_left_channel")
    def handle_member_left_channel(event, context):
        channel, user = event.get("channel"), event.get("user")
        if not channel or not user or user == context.get("bot_user_id"):
            return

        def job():  # nobody typed it, so nobody could retry it: a busy or read-only database is waited out
            freed = wait_out_busy(lambda: cl.left_channel(store, channel, user, deps.clock()),
                                  what=f"{member_tag(user)} leaving {channel}'s rotation", no_reply=True)
            if freed:
                log.info("%s left %s: no longer presents on %s", member_tag(user), channel,
                         ", ".join(d.isoformat() for d in freed))
                stepped_down(deps, deps.slack, channel, freed)
        deps.later(job, None)

    updates = MessageUpdates(deps.later)

    def _refresh(client, channel: str, ts: str | None, day: date) -> None:
        """Redraw the agenda from the store; a burst of votes on one agenda redraws it once or twice."""
        if not ts:
            return

        def update():
            client.chat_update(**agenda_update(deps, channel, ts, day))
        updates((channel, ts), update)

    def swap(body, action, respond, client, accept: bool) -> None:
        day, from_user, to_user = ((action.get("value") or "") + "||").split("|")[:3]
        user = user_of(body)
        channel = channel_of_body(body)
        if user != to_user:
            return ephemeral(respond, f"Only {mention(to_user)} can answer this offer.")
        try:
            when = date.fromisoformat(day)
        except ValueError:
            return ephemeral(respond, "That offer has expired.")
        now = deps.clock()
        if accept:
            outcome = cl.accept_swap(store, channel, when, from_user, to_user, now)
            if outcome != "swapped":
                return ephemeral(respond, SWAP_REFUSED[outcome].format(day=day, me=mention(to_user)))
            text = f"{mention(to_user)} presents on {day} instead of {mention(from_user)}. Thank you!"
            swapped(deps, client, channel, when, now)  # the posts out already name who presents now
            deps.later(lambda: dm_presenter(deps, client, channel, when, deps.clock()))
        else:
            row = store.get_club_session(channel, day) or {}
            if row.get("presenter") != from_user:
                return ephemeral(respond, SWAP_REFUSED["changed"].format(day=day, me=mention(to_user)))
            text = f"{mention(to_user)} can't take {day}; {mention(from_user)} still presents."
        ts = (body.get("container") or {}).get("message_ts")
        if ts and not (body.get("container") or {}).get("is_ephemeral"):
            client.chat_update(channel=channel, ts=ts, text=text, blocks=[bk.section(text).to_dict()])
        else:
            respond(text=text, response_type="in_channel", replace_original=True)

    @app.action(bk.ACTION_SWAP_ACCEPT)
    def handle_swap_accept(ack, body, action, respond, client):
        ack()
        deps.later(lambda: swap(body, action, respond, client, True), respond)

    @app.action(bk.ACTION_SWAP_DECLINE)
    def handle_swap_decline(ack, body, action, respond, client):
        ack()
        deps.later(lambda: swap(body, action, respond, client, False), respond)


def uploading_line(args: str) -> str | None:
    """The ack of `/paper club export` and `club map`: their reply waits for files uploaded to Slack (a
    Web API call per file, its upload, one call to finish), the map for its drawing first (0.15 s, the
    first one in a process 0.45 s: bench/command_latency.py)."""
    word = args.split()[0].lower() if args.split() else ""
    return {"export": "Uploading the reading group's reading list…",
            "map": "Drawing the reading group's map…"}.get(word)


SUBCOMMANDS = (
    Subcommand("club", handle_club,
               usage="club [join | leave | away <date or range> | setup <weekday> <HH:MM> [zone] | skip <date> "
                     "| unskip <date> | off | history | swap @member | export | map]",
               example="club away 10 Dec - 24 Dec",
               help="The reading group: the next session, the presenter rotation, and its history.",
               aliases=("meeting", "session"), working=uploading_line),
    Subcommand("nominate", handle_nominate, usage="nominate <paper>", example="nominate SPIKE",
               help="Put a paper on the list for the club's next session.", aliases=("propose",)),
)
