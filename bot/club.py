"""The reading group in Slack: `/paper club ...`, `/paper nominate`, the setup modal, votes, swaps.

A handler parses, calls store/club.py, renders with bot/blocks.py. Votes arrive
as clicks on the agenda post, which is updated in place (chat.update) with the
counts; a click after the cutoff gets a polite ephemeral answer.
"""
from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING

from slack_sdk.errors import SlackApiError

from store import club as cl
from store.errors import StoreError
from store.text import member_tag

from . import blocks as bk
from .blocks import code, mention
from .commands import Call, Reply, Subcommand, channel_of, problem_reply, resolve
from .commands_daily import is_admin

if TYPE_CHECKING:
    from slack_bolt import App
    from slack_sdk import WebClient

    from .deps import Deps

log = logging.getLogger(__name__)

AGENDA_EVENT = "paperclub_club"  # message metadata on the club's posts: {"kind", "date"}
_MENTION = re.compile(r"<@([UW][A-Z0-9]+)(?:\|[^>]*)?>")
HISTORY_LISTED = 15


def _label(dt: datetime) -> str:
    return f"{dt:%a %-d %b} at {dt:%H:%M} {dt.tzinfo}"


def _spec(deps: Deps, channel: str) -> cl.ClubSpec:
    spec = cl.club_for(deps.store, channel)
    if spec is None or not spec.active:
        raise cl.ClubError(f"This channel has no reading group yet: {deps.command} club sets one up.")
    return spec


def _next(deps: Deps, channel: str, spec: cl.ClubSpec) -> datetime | None:
    return cl.next_session(spec, deps.clock(), skipped=cl.skipped_for(deps.store, channel))


# -- /paper club -------------------------------------------------------------------------------
def status_reply(deps: Deps, channel: str, user: str, *, note: str | None = None) -> Reply:
    """The next session: date, paper, presenter, votes so far, who is in."""
    spec = cl.club_for(deps.store, channel)
    members = [m["user"] for m in deps.store.club_members(channel)]
    lines = [bk.esc(note)] if note else []
    if spec is None or not spec.active:
        lines.append("This channel has no reading group yet." if spec is None else "The reading group is off.")
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
    lines.append(f"*Members:* {', '.join(mention(m) for m in members) if members else '_nobody yet_'}")
    cmd = deps.command
    footer = " · ".join(code(f"{cmd} {c}") for c in (
        "club join", "club leave", "club away <date or range>", "nominate <paper>", "club history"))
    blocks = bk.club_status_blocks(lines, setup_channel=channel if is_admin(deps, user) else None, footer=footer)
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
        changed = store.set_club_member(channel, call.user_id, active=word == "join", now=now.timestamp())
        if word == "join":
            note = "You are in the presenter rotation." if changed else "You were in the rotation already."
        else:
            note = "You left the presenter rotation." if changed else "You were not in the rotation."
        return status_reply(deps, channel, call.user_id, note=note)
    if word == "away":
        spec = _spec(deps, channel)
        start, end = cl.parse_away(rest, now.astimezone(_zone(spec)).date())
        store.add_club_away(channel, call.user_id, start.isoformat(), end.isoformat(), now=now.timestamp())
        span = start.isoformat() if start == end else f"{start.isoformat()} to {end.isoformat()}"
        return Reply(f"Noted: you are away {span}; you will not be asked to present then.")
    if word == "skip":
        spec = _spec(deps, channel)
        if not is_admin(deps, call.user_id):
            return problem_reply(deps, "Only the reading group's admins can skip a session.")
        try:
            day = date.fromisoformat(rest)
        except ValueError:
            return problem_reply(deps, f"Which session? Write its date: {deps.command} club skip 2026-12-10.")
        starts = cl.session_starts(spec, now, count=60)
        if day not in {s.date() for s in starts}:
            return problem_reply(deps, f"The club does not meet on {day.isoformat()}.")
        store.put_club_session(channel, day.isoformat(), state="skipped", now=now.timestamp())
        return status_reply(deps, channel, call.user_id, note=f"The session on {day.isoformat()} is cancelled.")
    if word == "off":
        spec = _spec(deps, channel)
        if not is_admin(deps, call.user_id):
            return problem_reply(deps, "Only the reading group's admins can stop the club.")
        store.set_club(channel, set_by=call.user_id, now=now.timestamp(), active=0)
        return Reply("The reading group is off. Its history stays; an admin can set it up again.")
    if word == "history":
        return history_reply(deps, channel)
    if word == "swap":
        return swap_reply(deps, call, channel)
    if word == "export":
        return export_reply(deps, channel, call.user_id)
    if word == "map":
        return map_reply(deps, channel)
    return problem_reply(deps, f"I don't know {code('club ' + word)}.",
                         hint=f"Try {code(deps.command + ' club')} for the next session.")


def _zone(spec: cl.ClubSpec):
    from zoneinfo import ZoneInfo

    return ZoneInfo(spec.tz)


def history_reply(deps: Deps, channel: str) -> Reply:
    """Past sessions: date, paper, presenter, votes, a link to the thread."""
    rows = [r for r in deps.store.club_sessions(channel) if r["state"] == "held"][-HISTORY_LISTED:]
    if not rows:
        return Reply("The club has no past sessions yet.", bk.message_blocks("The club has no past sessions yet."))
    lines = []
    for r in reversed(rows):
        paper = deps.store.get_paper(r["paper_id"]) if r["paper_id"] else None
        name = bk.esc(paper.short_name) if paper else "_a paper no longer in the library_"
        who = mention(r["presenter"]) if r["presenter"] else "_nobody_"
        thread = ""
        if r.get("thread_ts"):
            thread = " · " + bk.link(f"https://slack.com/archives/{channel}/p{r['thread_ts'].replace('.', '')}",
                                     "thread")
        lines.append(f"*{r['date']}* {name}, presented by {who} · {r.get('votes') or 0} votes{thread}")
    return Reply("\n".join(lines), bk.message_blocks("\n".join(lines), title="Reading group history"))


def export_reply(deps: Deps, channel: str, user: str) -> Reply:
    """The club's reading list as BibTeX and CSV, uploaded to the channel (files_upload_v2)."""
    rows = cl.export_rows(deps.store, channel)
    if not rows:
        return Reply("The club has not read any papers yet, so there is nothing to export.")
    client = deps.slack
    if client is None:
        return Reply(f"{len(rows)} papers; exports are uploaded to Slack (not available in the console).")
    client.files_upload_v2(
        channel=channel, initial_comment=f"The reading group's reading list ({len(rows)} papers), for {mention(user)}",
        file_uploads=[{"content": cl.to_bibtex(rows).encode(), "filename": "reading-group.bib",
                       "title": "Reading group (BibTeX)"},
                      {"content": cl.to_csv(rows).encode(), "filename": "reading-group.csv",
                       "title": "Reading group (CSV)"}])
    return Reply(f"Uploaded the reading list ({len(rows)} papers) as BibTeX and CSV to this channel.")


MAP_SIZE = (1200, 900)  # pixels of the uploaded PNG


def render_map(points: cl.MapPoints, *, size: tuple[int, int] = MAP_SIZE) -> bytes:
    """The map as PNG bytes (matplotlib, Agg backend: no display needed)."""
    import io

    import matplotlib
    import matplotlib.patches

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    dpi = 100
    fig = Figure(figsize=(size[0] / dpi, size[1] / dpi), dpi=dpi)
    ax = fig.add_subplot()
    if points.daily:
        ax.scatter(*zip(*points.daily), s=12, alpha=0.2, color="grey", label="paper of the day")
    for label, x, y in points.interests:  # a member's interest: a labelled region
        ax.add_patch(matplotlib.patches.Circle((x, y), 0.15, alpha=0.12, color="tab:orange"))
        ax.annotate(label[:40], (x, y), fontsize=8, color="tab:orange", ha="center")
    xs = [x for _, x, _ in points.sessions]
    ys = [y for _, _, y in points.sessions]
    ax.scatter(xs, ys, s=40, color="tab:blue", label="club sessions")
    for label, x, y in points.sessions:
        ax.annotate(label[:40], (x, y), fontsize=9, xytext=(4, 4), textcoords="offset points")
    ax.set_title("What the reading group has read")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.legend(loc="lower right", fontsize=8)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def map_reply(deps: Deps, channel: str) -> Reply:
    """A picture of the club's reading history, uploaded to the channel."""
    points = cl.map_points(deps.store, channel, deps.searcher.embedder.name)
    if points is None:
        return Reply("The club has not read any papers yet, so there is nothing to map.")
    png = render_map(points)
    if deps.slack is None:
        return Reply(f"A map of {len(points.sessions)} sessions; pictures are uploaded to Slack, not the console.")
    deps.slack.files_upload_v2(channel=channel, content=png, filename="reading-group-map.png",
                               title="Reading group map",
                               initial_comment=f"The reading group's {len(points.sessions)} sessions on one map")
    return Reply(f"Posted a map of the club's {len(points.sessions)} sessions to this channel.")


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
    if other not in {m["user"] for m in deps.store.club_members(channel)}:
        return problem_reply(deps, f"{mention(other)} is not in the rotation.")
    day = mine[0]["date"]
    if cl.is_away(other, date.fromisoformat(day), cl.aways_for(deps.store, channel)):
        return problem_reply(deps, f"{mention(other)} is away on {day}.")
    text = f"{mention(call.user_id)} asks {mention(other)} to present on {day} instead. {mention(other)}, will you?"
    return Reply(text, bk.swap_blocks(text, f"{day}|{call.user_id}|{other}"), in_channel=True)


def handle_nominate(deps: Deps, call: Call) -> Reply:
    if not call.args:
        return problem_reply(deps, f"Which paper? {deps.command} nominate <paper name or id>")
    paper, note = resolve(deps, call.args)
    return nominate_reply(deps, channel_of(call), paper, call.user_id, note=note)


def nominate_reply(deps: Deps, channel: str, paper, user: str, *, note: str | None = None) -> Reply:
    day, added = cl.nominate(deps.store, channel, paper.id, user, deps.clock())
    name = bk.esc(paper.short_name)
    text = (f"Nominated *{name}* for the session on {day.isoformat()}." if added
            else f"*{name}* is already nominated for {day.isoformat()}.")
    if note:
        text = f"{bk.esc(note)}\n{text}"
    return Reply(text, bk.message_blocks(text))


# -- the agenda ---------------------------------------------------------------------------------
def agenda_message(deps: Deps, channel: str, day: date, *, closed: bool = False) -> dict:
    """chat.postMessage / chat.update arguments for the session's agenda, counts included."""
    store = deps.store
    spec = _spec(deps, channel)
    noms = store.nominations(channel, day.isoformat())
    counts: dict[str, int] = {}
    for v in store.club_votes(channel, day.isoformat()):
        counts[v["paper_id"]] = counts.get(v["paper_id"], 0) + 1
    papers = {p.id: p for p in store.get_papers([n["paper_id"] for n in noms])}
    candidates = [(papers[n["paper_id"]], n["user"], counts.get(n["paper_id"], 0)) for n in noms
                  if n["paper_id"] in papers]
    start = [s for s in cl.session_starts(spec, deps.clock() - timedelta(days=15), count=6) if s.date() == day]
    cutoff = cl.timeline(spec, start[0]).cutoff if start else None
    chooser = chosen = None
    if spec.mode == cl.PRESENTER_CHOOSES:
        row = store.get_club_session(channel, day.isoformat()) or {}
        chooser, chosen = row.get("presenter"), row.get("paper_id")
    blocks = bk.agenda_blocks(f"{day:%a %-d %b}", candidates, session=day.isoformat(), note=None,
                              cutoff_label=_label(cutoff) if cutoff else "the cutoff", closed=closed,
                              chooser=chooser, chosen=chosen)
    what = "the presenter chooses from the agenda" if chooser else "vote on the agenda"
    return {"channel": channel, "text": bk.fallback_text(f"Reading group {day.isoformat()}: {what}"),
            "blocks": [b.to_dict() for b in blocks],
            "metadata": {"event_type": AGENDA_EVENT, "event_payload": {"kind": "agenda", "date": day.isoformat()}},
            "unfurl_links": False, "unfurl_media": False}


def post_agenda(deps: Deps, client: WebClient, channel: str, day: date) -> str | None:
    """Post the session's agenda now (once; the scheduler's path); its ts."""
    start = next(s for s in cl.session_starts(_spec(deps, channel), deps.clock() - timedelta(days=15), count=6)
                 if s.date() == day)
    result = _run_step(deps, client, channel, _spec(deps, channel), "agenda", start, deps.clock(), budget=60.0,
                       sleep=time.sleep)
    return result.ts


_VOTE_ANSWERS = {
    "already": "You have already voted for that paper; your vote counts once.",
    "full": f"You have used your {cl.MAX_VOTES} votes. Clear your votes to choose again.",
    "closed": "Voting for that session has closed, sorry: the winner is being announced.",
    "unknown": "That paper is not on this session's list.",
    "presenter": "In this reading group the presenter chooses the paper, so there is no vote.",
}
_CHOOSE_ANSWERS = {
    "already": "That paper is your choice already.",
    "closed": "The choice for that session has closed: the paper is being announced.",
    "unknown": "That paper is not on this session's list.",
}


# -- listeners ----------------------------------------------------------------------------------
def register(app: App, deps: Deps) -> None:
    """The club's buttons and the setup modal."""
    store = deps.store

    def ephemeral(respond, text: str) -> None:
        respond(text=text, response_type="ephemeral", replace_original=False)

    def user_of(body) -> str:
        return (body.get("user") or {}).get("id") or ""

    def channel_of_body(body) -> str:
        return (body.get("channel") or {}).get("id") or (body.get("container") or {}).get("channel_id") or ""

    @app.action(bk.ACTION_CLUB_SETUP)
    def handle_setup_button(ack, action, body, client):
        ack()
        channel = (action.get("value") or "").strip() or channel_of_body(body)
        if not is_admin(deps, user_of(body)):
            return
        # trigger_id expires ~3 s after the click: open the modal now, before anything slow.
        client.views_open(trigger_id=body["trigger_id"], view=bk.club_setup_view(channel, store.get_club(channel)))

    @app.view(bk.CLUB_SETUP_VIEW)
    def handle_setup_submission(ack, body, view):
        user = user_of(body)
        channel = view.get("private_metadata") or ""
        values = (view.get("state") or {}).get("values") or {}

        def val(block: str):
            v = (values.get(block) or {}).get("value") or {}
            return (v.get("selected_option") or {}).get("value") or v.get("selected_time") or v.get("value")

        if not is_admin(deps, user) or not channel:
            ack(response_action="errors", errors={"weekday": "Only the reading group's admins can set it up."})
            return
        try:
            hour, minute = (int(x) for x in (val("time") or "").split(":"))
            lead, cutoff = int(val("lead") or 0), int(val("cutoff") or 0)
        except ValueError:
            ack(response_action="errors", errors={"time": "Pick a time, and whole hours for the deadlines."})
            return
        try:
            from store.schedule import check_timezone

            tz = check_timezone((val("tz") or "").strip())
        except StoreError as exc:
            ack(response_action="errors", errors={"tz": str(exc)[:150]})
            return
        try:
            spec = cl.ClubSpec(int(val("weekday") or 0), hour, minute, tz, val("cadence") or cl.WEEKLY,
                               lead_hours=lead, cutoff_hours=cutoff, mode=val("mode") or cl.VOTE)
        except StoreError as exc:
            ack(response_action="errors", errors={"cutoff": str(exc)[:150]})
            return
        ack()  # the modal closes now; the write waits its turn in the work pool

        def job():
            cl.set_club(store, channel, spec, by=user, now=deps.clock())
            log.info("club set up in %s by %s: %s", channel, member_tag(user), spec.describe())
        deps.later(job)

    @app.action(bk.ACTION_NOMINATE)
    def handle_nominate_button(ack, action, body, respond):
        ack()

        def job():
            paper = store.get_paper((action.get("value") or "").strip())
            if paper is None:
                return ephemeral(respond, "That paper is no longer in the library.")
            try:
                reply = nominate_reply(deps, channel_of_body(body), paper, user_of(body))
            except cl.ClubError as exc:
                return ephemeral(respond, bk.esc(str(exc)))
            respond(**reply.to_message(), replace_original=False)
        deps.later(job, respond)

    @app.action(bk.ACTION_VOTE)
    def handle_vote(ack, action, body, respond, client):
        ack()
        day_text, _, paper_id = (action.get("value") or "").partition("|")
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

    @app.action(bk.ACTION_CLUB_CHOOSE)
    def handle_choose(ack, action, body, respond, client):
        ack()

        def job():
            day_text, _, paper_id = (action.get("value") or "").partition("|")
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
            if not cl.voting_open(store, channel, day, deps.clock()):
                return ephemeral(respond, _VOTE_ANSWERS["closed"])
            if store.clear_votes(channel, day.isoformat(), user_of(body)):
                _refresh(client, channel, (body.get("container") or {}).get("message_ts"), day)
            ephemeral(respond, "Your votes are cleared; vote again until the cutoff.")
        deps.later(job, respond)

    def _refresh(client, channel: str, ts: str | None, day: date) -> None:
        if not ts:
            return
        message = agenda_message(deps, channel, day)
        message.pop("unfurl_links"), message.pop("unfurl_media")
        client.chat_update(ts=ts, **message)

    def swap(body, action, respond, client, accept: bool) -> None:
        day, from_user, to_user = ((action.get("value") or "") + "||").split("|")[:3]
        user = user_of(body)
        channel = channel_of_body(body)
        if user != to_user:
            return ephemeral(respond, f"Only {mention(to_user)} can answer this offer.")
        row = store.get_club_session(channel, day)
        if row is None or row.get("presenter") != from_user:
            return ephemeral(respond, "That offer has expired: the slot changed hands already.")
        if accept:
            store.put_club_session(channel, day, presenter=to_user, now=deps.clock().timestamp())
            text = f"{mention(to_user)} presents on {day} instead of {mention(from_user)}. Thank you!"
            deps.later(lambda: dm_presenter(deps, client, channel, date.fromisoformat(day), deps.clock()))
        else:
            text = f"{mention(to_user)} can't take {day}; {mention(from_user)} still presents."
        ts = (body.get("container") or {}).get("message_ts")
        if ts and not (body.get("container") or {}).get("is_ephemeral"):
            client.chat_update(channel=channel, ts=ts, text=text, blocks=[bk.section(text).to_dict()])
        else:
            respond(text=text, response_type="in_channel", replace_original=True)

    @app.action(bk.ACTION_SWAP_ACCEPT)
    def handle_swap_accept(ack, body, action, respond, client):
        ack()
        swap(body, action, respond, client, True)

    @app.action(bk.ACTION_SWAP_DECLINE)
    def handle_swap_decline(ack, body, action, respond, client):
        ack()
        swap(body, action, respond, client, False)


SUBCOMMANDS = (
    Subcommand("club", handle_club,
               usage="club [join | leave | away <date or range> | skip <date> | off | history | swap @member | export | map]",
               example="club away 2026-12-10..2026-12-24",
               help="The reading group: the next session, the presenter rotation, and its history.",
               aliases=("meeting", "session")),
    Subcommand("nominate", handle_nominate, usage="nominate <paper>", example="nominate SPIKE",
               help="Put a paper on the list for the club's next session.", aliases=("propose",)),
)


# -- scheduled club posts: each through posting.post_once (claim row, metadata, lookup, retries) --
@dataclass(frozen=True)
class ClubContext:
    """What the club's jobs use: the scheduler builds one; a Deps has the same attributes."""

    store: object
    searcher: object
    llm: object
    clock: object
    command: str = "/paper"

    @property
    def embedder(self):
        return self.searcher.embedder


STEPS = ("agenda", "winner", "reminder", "thread", "recap")
CLUB_GRACE = timedelta(hours=3)  # a step missed by less than this is done on the next tick (catch-up)


def _moments(spec: cl.ClubSpec, start: datetime) -> dict[str, datetime]:
    t = cl.timeline(spec, start)
    return {"agenda": t.nominations_close, "winner": t.cutoff, "reminder": t.reminder, "thread": t.start,
            "recap": t.recap}


def due_steps(spec: cl.ClubSpec, now: datetime, *, skipped=(), grace: timedelta = CLUB_GRACE):
    """(step, session start) pairs whose moment is in (now - grace, now], oldest first."""
    out = []
    for start in cl.session_starts(spec, now - timedelta(days=14), skipped=skipped, count=4):
        for step, at in _moments(spec, start).items():
            if now - grace < at <= now or (step == "winner" and at <= now < start):
                out.append((at, step, start))
    return [(step, start) for at, step, start in sorted(out, key=lambda x: x[0])]


def club_tick(deps: Deps, client: WebClient, now: datetime, *, budget: float = 600.0, sleep=None) -> list:
    """Every due club post in every club, each exactly once (the scheduler calls this each minute)."""
    from . import posting

    results = []
    for row in deps.store.clubs():
        channel = row["channel"]
        spec = cl.ClubSpec.from_row(row)
        for step, start in due_steps(spec, now, skipped=cl.skipped_for(deps.store, channel)):
            try:
                result = _run_step(deps, client, channel, spec, step, start, now, budget=budget,
                                   sleep=sleep or time.sleep)
            except StoreError as exc:
                log.error("club %s for %s on %s failed: %s", step, channel, start.date(), exc)
                continue
            if result is not None:
                results.append((step, start.date(), result))
    return results


def _run_step(deps: Deps, client, channel: str, spec: cl.ClubSpec, step: str, start: datetime, now: datetime,
              *, budget: float, sleep):
    from . import posting

    store = deps.store
    day = start.date()
    key = f"{step}:{day.isoformat()}"
    once = lambda build, **kw: posting.post_once(client, store, channel, key, build, now, kind=step,  # noqa: E731
                                                 budget=budget, sleep=sleep, **kw)
    if step == "agenda":
        if spec.mode == cl.PRESENTER_CHOOSES:
            cl.assign_presenter(store, channel, day, now)
        note = None
        if not store.nominations(channel, day.isoformat()):
            for pid in cl.propose(store, deps.embedder, channel, day):
                store.add_nomination(channel, day.isoformat(), pid, None, now=now.timestamp())
            note = "Nobody nominated a paper, so here are three from the team's interests, none read before."

        def build():
            message = agenda_message(deps, channel, day)
            if note:
                message["blocks"].insert(1, bk.context(bk.esc(note)).to_dict())
            message.pop("metadata")
            return message
        result = once(build)
        if result.ts:
            store.put_club_session(channel, day.isoformat(), agenda_ts=result.ts, now=now.timestamp())
        return result
    if step == "winner":
        session = cl.decide(store, channel, day, now)
        paper = store.get_paper(session["paper_id"]) if session.get("paper_id") else None
        agenda_ts = session.get("agenda_ts")
        if agenda_ts and not (store.get_scheduled(channel, key) or {}).get("ts"):
            try:  # the agenda shows the final counts, without buttons
                closed = agenda_message(deps, channel, day, closed=True)
                client.chat_update(channel=channel, ts=agenda_ts, text=closed["text"], blocks=closed["blocks"])
            except Exception:
                log.warning("could not close the agenda for %s %s", channel, day, exc_info=True)
        who = mention(session["presenter"]) if session.get("presenter") else "nobody (everyone is away)"
        if paper is None:
            text = f"No paper was chosen for {day:%a %-d %b}. Presenter: {who}."
        elif spec.mode == cl.PRESENTER_CHOOSES:
            text = f"We read *{bk.esc(paper.short_name)}* on {day:%a %-d %b}. Presenter: {who}"
            if session.get("tiebreak") or not session.get("presenter"):
                text += (f".\n_The presenter did not choose by the cutoff, so the candidates were tied: "
                         f"{bk.esc(session.get('tiebreak') or 'the earlier nomination wins')} ({cl.TIEBREAK})._")
            else:
                text += ", who chose it."
        else:
            text = (f"We read *{bk.esc(paper.short_name)}* on {day:%a %-d %b} "
                    f"({session.get('votes') or 0} votes). Presenter: {who}.")
            if session.get("tiebreak"):
                text += f"\n_{bk.esc(session['tiebreak'])} ({cl.TIEBREAK})._"
        result = once(lambda: {"text": bk.fallback_text(text), "blocks": [b.to_dict() for b in
                               bk.club_note_blocks("The reading group has chosen", text)]})
        if paper is not None:  # reactions on the announcement, and on the agenda from now on, are about it
            _about(store, channel, result.ts, paper.id, now)
            _about(store, channel, agenda_ts, paper.id, now)
        if paper is not None and session.get("presenter") and result.status != "busy":
            dm_presenter(deps, client, channel, day, now, budget=min(budget, DM_BUDGET), sleep=sleep)
        return result
    session = store.get_club_session(channel, day.isoformat()) or {}
    paper = store.get_paper(session["paper_id"]) if session.get("paper_id") else None
    if paper is None:
        return None
    if step == "reminder":
        who = mention(session["presenter"]) if session.get("presenter") else "nobody yet"
        text = f"Reading group at {start:%H:%M}: *{bk.esc(paper.short_name)}*, presented by {who}."
        result = once(lambda: {"text": bk.fallback_text(text), "blocks": [b.to_dict() for b in
                               bk.club_note_blocks("Reading group soon", text)]})
        _about(store, channel, result.ts, paper.id, now)
        return result
    if step == "thread":
        def build():
            from .commands import paper_summary

            summary = paper_summary(store, paper, deps.llm, now=now.timestamp())
            blocks = bk.session_thread_blocks(paper, presenter=session.get("presenter"),
                                              tldr=summary.tldr if summary else None,
                                              points=summary.points if summary else None,
                                              questions=cl.session_questions(paper.abstract, paper.title,
                                                                             llm=deps.llm))
            return {"text": bk.fallback_text(f"Reading group: {bk.esc(paper.short_name)}"),
                    "blocks": [b.to_dict() for b in blocks], "unfurl_links": False, "unfurl_media": False}
        result = once(build)
        if result.ts:
            store.put_club_session(channel, day.isoformat(), thread_ts=result.ts, now=now.timestamp())
        _about(store, channel, result.ts, paper.id, now)
        return result
    if step == "recap":
        thread = session.get("thread_ts")
        if not thread:
            return None
        messages = _thread(client, channel, thread)
        recap = cl.thread_recap(messages, bot_user=_bot_user(client))
        result = once(lambda: {"text": bk.fallback_text(f"Recap of {bk.esc(paper.short_name)}"),
                               "blocks": [b.to_dict() for b in bk.recap_blocks(recap, paper_name=paper.short_name)]},
                      thread_ts=thread)
        if result.ts:
            store.put_club_session(channel, day.isoformat(), state="held", now=now.timestamp())
        _about(store, channel, result.ts, paper.id, now)
        return result
    return None


CLUB_KIND = "club"  # message_papers.kind of the club's posts about one paper


def _about(store, channel: str, ts: str | None, paper_id: str, now: datetime) -> None:
    """Remember that a club post is about `paper_id`: reactions on it are feedback like a daily post's."""
    # The winner step runs every tick until the session: read first, write only once.
    if ts and store.paper_for_message(channel, ts) is None:
        store.record_message_paper(channel, ts, paper_id, kind=CLUB_KIND, now=now.timestamp())


DM_BUDGET = 30.0  # seconds of retries for the presenter's DM; a later tick tries again
NO_DM = "no DM:"  # the error a claim row records for a member who can never be DMed
NO_DM_ERRORS = {"user_not_found", "cannot_dm_bot", "user_disabled", "user_not_visible"}


def dm_presenter(deps: Deps, client, channel: str, day: date, now: datetime, *, budget: float = DM_BUDGET,
                 sleep=time.sleep):
    """DM the session's presenter once: the paper's summary and a suggested outline.

    The claim row is the club channel's (`presenter:<date>:<member tag>`, so a swap's new presenter
    gets their own; a tag, not the id, as in the log lines that name the key), the message goes to the DM. Never raises: a DM that fails is logged, and the next
    tick tries again, without touching the announcement."""
    from . import posting
    from .commands import paper_summary

    store = deps.store
    try:
        session = store.get_club_session(channel, day.isoformat()) or {}
        presenter, paper = session.get("presenter"), None
        if session.get("paper_id"):
            paper = store.get_paper(session["paper_id"])
        if not presenter or paper is None:
            return None
        key = f"presenter:{day.isoformat()}:{member_tag(presenter)}"
        row = store.get_scheduled(channel, key)
        if row and row["status"] == "posted":
            return posting.PostResult("already", now.date(), ts=row["ts"])
        if row and row["status"] == "failed" and (row.get("error") or "").startswith(NO_DM):
            return posting.PostResult("failed", now.date(), detail=row["error"])  # said once, not every minute
        try:
            dm = client.conversations_open(users=presenter)["channel"]["id"]
        except SlackApiError as exc:
            if exc.response.get("error") not in NO_DM_ERRORS:
                raise
            # This member can never be DMed (deactivated, a bot, unknown): record it, stop asking.
            why = f"{NO_DM} {exc.response.get('error')}"
            if store.claim_scheduled(channel, key, kind="presenter_dm", claimer=posting.PROCESS_CLAIMER,
                                     now=now.timestamp()):
                store.fail_scheduled(channel, key, claimer=posting.PROCESS_CLAIMER, error=why)
            log.warning("cannot DM the presenter %s for %s on %s: %s", member_tag(presenter), channel, day, why)
            return posting.PostResult("failed", now.date(), detail=why)
        spec = _spec(deps, channel)
        start = next((s for s in cl.session_starts(spec, now - timedelta(days=15), count=6) if s.date() == day), None)

        def build():
            summary = paper_summary(store, paper, deps.llm, now=now.timestamp())
            blocks = bk.presenter_dm_blocks(
                paper, channel=channel, when=_label(start) if start else day.isoformat(),
                tldr=summary.tldr if summary else None, points=summary.points if summary else None,
                questions=cl.session_questions(paper.abstract, paper.title, llm=deps.llm))
            return {"text": bk.fallback_text(f"You present {bk.esc(paper.short_name)} at the reading group"),
                    "blocks": [b.to_dict() for b in blocks], "unfurl_links": False, "unfurl_media": False}
        result = posting.post_once(client, store, channel, key, build, now, kind="presenter_dm", post_to=dm,
                                   budget=budget, sleep=sleep)
        if result.status == "failed":
            log.warning("the presenter's DM for %s on %s failed (%s); trying again later", channel, day,
                        result.detail)
        return result
    except Exception as exc:  # the DM is a courtesy: it never fails the club's posts
        log.warning("could not DM the presenter for %s on %s: %s", channel, day, posting._describe(exc))
        return None


def _thread(client, channel: str, ts: str) -> list[dict]:
    """Every message of a thread (conversations.replies, paged on next_cursor)."""
    out, cursor = [], None
    for _ in range(20):
        resp = client.conversations_replies(channel=channel, ts=ts, limit=200, **({"cursor": cursor} if cursor else {}))
        out += resp.get("messages") or []
        cursor = (resp.get("response_metadata") or {}).get("next_cursor")
        if not cursor:
            break
    return out


def _bot_user(client) -> str | None:
    try:
        return client.auth_test().get("user_id")
    except Exception:
        return None
