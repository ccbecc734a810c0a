"""The club's scheduled posts (agenda, winner, reminder, thread, recap) and the presenter's DM.

`club_tick` runs every minute; each due step goes through bot/posting.py's one
machine (claim row, message metadata, lookup before any re-post, retries).
"""
from __future__ import annotations

import logging
import time
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING

from slack_sdk.errors import SlackApiError

from store import club as cl
from store.errors import LeaseLost, StoreError
from store.text import member_tag

from .. import blocks as bk
from ..blocks import mention
from ..posting import SCHEDULED_EVENT, refused_lately

if TYPE_CHECKING:
    from slack_sdk import WebClient

    from ..deps import Deps

log = logging.getLogger("bot.club")



def _label(dt: datetime) -> str:
    return f"{dt:%a %-d %b} at {dt:%H:%M} {dt.tzinfo}"


SETUP_USAGE = "club setup <weekday> <HH:MM> [zone]"  # how a club starts, typed (the console has no form)


def _spec(deps: Deps, channel: str) -> cl.ClubSpec:
    spec = cl.club_for(deps.store, channel)
    if spec is None or not spec.active:  # plain text: the reply escapes it
        what = ("This channel has no reading group yet: an admin can set one up" if spec is None
                else "The reading group here is off: an admin can set it up again")
        raise cl.ClubError(f"{what} with `{deps.command} {SETUP_USAGE}`.")
    return spec


# -- the agenda ---------------------------------------------------------------------------------
def agenda_message(deps: Deps, channel: str, day: date, *, closed: bool = False) -> dict:
    """chat.postMessage / chat.update arguments for the session's agenda, counts included; a ballot of
    the bot's proposals alone (no nominator) says so, however often it is drawn; a skipped session's
    says it is cancelled, without buttons."""
    store = deps.store
    spec = _spec(deps, channel)
    skipped = cl.skipped_for(store, channel)
    if day in skipped:  # its ballot went on to the next session (store.club.skip_session)
        following = cl.next_session(spec, cl.session_start(spec, day), skipped=skipped)
        blocks = bk.cancelled_agenda_blocks(f"{day:%a %-d %b}", _label(following) if following else None)
        return _agenda(channel, day, "cancelled", blocks)
    noms = store.nominations(channel, day.isoformat())
    note = proposed_note(len(noms)) if noms and not any(n["user"] for n in noms) else None
    counts: dict[str, int] = {}
    for v in store.club_votes(channel, day.isoformat()):
        counts[v["paper_id"]] = counts.get(v["paper_id"], 0) + 1
    papers = {p.id: p for p in store.get_papers([n["paper_id"] for n in noms])}
    candidates = [(papers[n["paper_id"]], n["user"], counts.get(n["paper_id"], 0)) for n in noms
                  if n["paper_id"] in papers]
    start = [s for s in cl.session_starts(spec, deps.clock() - timedelta(days=15), count=6) if s.date() == day]
    cutoff = cl.timeline(spec, start[0]).cutoff if start else None
    row = store.get_club_session(channel, day.isoformat()) or {}
    chooser = chosen = None
    read = row.get("paper_id")  # the vote's winner (store.club.decide), as the announcement names it
    if spec.mode == cl.PRESENTER_CHOOSES:
        chooser = row.get("presenter")
        # A paper nobody chose (the only nomination, a tie-break: store.club.decide) is read, not chosen.
        chosen, read = (row.get("paper_id"), None) if row.get("chosen") else (None, row.get("paper_id"))
    blocks = bk.agenda_blocks(f"{day:%a %-d %b}", candidates, session=day.isoformat(),
                              note=bk.esc(note) if note else None,
                              cutoff_label=_label(cutoff) if cutoff else "the cutoff", closed=closed,
                              chooser=chooser, chosen=chosen, read=read if closed else None)
    # The notification text says what the blocks' last line says: open, or closed.
    what = (("the choice is closed" if closed else "the presenter chooses from the agenda") if chooser else
            "voting has closed" if closed else "vote on the agenda")
    return _agenda(channel, day, what, blocks)


def _agenda(channel: str, day: date, what: str, blocks) -> dict:
    return {"channel": channel, "text": bk.fallback_text(f"Reading group {day.isoformat()}: {what}"),
            "blocks": [b.to_dict() for b in blocks],
            # The machine's own marker: a refresh (chat.update) keeps the agenda findable by its claim.
            "metadata": {"event_type": SCHEDULED_EVENT,
                         "event_payload": {"kind": "agenda", "key": f"agenda:{day.isoformat()}"}},
            "unfurl_links": False, "unfurl_media": False}


def agenda_update(deps: Deps, channel: str, ts: str, day: date, *, closed: bool = False) -> dict:
    """chat.update arguments that redraw a posted agenda from the store (votes, the presenter who chooses)."""
    message = agenda_message(deps, channel, day, closed=closed)
    message.pop("unfurl_links"), message.pop("unfurl_media")
    return {**message, "ts": ts}


def redraw_agenda(deps: Deps, client: WebClient | None, channel: str, day: date, now: datetime) -> None:
    """Redraw the session's agenda from the store if it is in the channel (a skip cancels it, an
    unskip brings its ballot back, a new presenter chooses); a redraw that fails is logged, and
    what changed the session stands."""
    ts = (deps.store.get_club_session(channel, day.isoformat()) or {}).get("agenda_ts")
    if not ts or client is None:  # not posted yet, or the console
        return
    try:
        client.chat_update(**agenda_update(deps, channel, ts, day,
                                           closed=not cl.voting_open(deps.store, channel, day, now)))
    except Exception:
        log.warning("could not redraw the agenda for %s %s", channel, day, exc_info=True)


# -- the announcement ---------------------------------------------------------------------------
def winner_message(deps: Deps, channel: str, day: date, spec: cl.ClubSpec, *, stepped_in: bool = False) -> dict:
    """chat.postMessage / chat.update arguments for the session's announcement, from the store: its
    paper and whoever presents it now. `stepped_in`: the presenter first announced stepped down
    (store.club.step_down), so the one now did not choose the paper, and with none yet someone
    else will be asked."""
    session = deps.store.get_club_session(channel, day.isoformat()) or {}
    paper = deps.store.get_paper(session["paper_id"]) if session.get("paper_id") else None
    presenter = session.get("presenter")
    if presenter:
        who = f"Presenter: {mention(presenter)}" + (", who stepped in" if stepped_in else "")
    elif stepped_in:
        who = STEPPED_DOWN
    else:
        who = "Presenter: nobody (everyone is away)"
    if paper is None:
        text = f"No paper was chosen for {day:%a %-d %b}. {who}."
    elif spec.mode == cl.PRESENTER_CHOOSES:
        text = f"We read *{bk.esc(paper.short_name)}* on {day:%a %-d %b}. {who}"
        if session.get("tiebreak") or not (presenter or stepped_in):
            text += (f".\n_The presenter did not choose by the cutoff, so the candidates were tied: "
                     f"{bk.esc(session.get('tiebreak') or 'the earlier nomination wins')} ({cl.TIEBREAK})._")
        elif stepped_in:
            text += "."
        elif session.get("chosen") == cl.CHOSEN:  # they pressed Choose (store.club.choose_paper)
            text += ", who chose it."
        elif session.get("chosen") == cl.CHOSEN_BEFORE_SWAP:  # the one who chose swapped the slot away
            text += ", who took over after it was chosen."
        else:  # one candidate, never chosen: the tally had nothing to break
            text += ".\n_The presenter did not choose by the cutoff, and it was the only nomination._"
    else:
        text = f"We read *{bk.esc(paper.short_name)}* on {day:%a %-d %b} ({session.get('votes') or 0} votes). {who}."
        if session.get("tiebreak"):
            text += f"\n_{bk.esc(session['tiebreak'])} ({cl.TIEBREAK})._"
    return _note(channel, "winner", day, "The reading group has chosen", text)


def reminder_message(deps: Deps, channel: str, day: date, spec: cl.ClubSpec, *,
                     stepped_in: bool = False) -> dict | None:
    """chat.postMessage / chat.update arguments for the session's reminder, from the store (None
    without a paper); `stepped_in` as for winner_message."""
    session = deps.store.get_club_session(channel, day.isoformat()) or {}
    paper = deps.store.get_paper(session["paper_id"]) if session.get("paper_id") else None
    if paper is None:
        return None
    presenter = session.get("presenter")
    text = f"Reading group at {cl.session_start(spec, day):%H:%M}: *{bk.esc(paper.short_name)}*"
    if presenter:
        text += f", presented by {mention(presenter)}" + (", who stepped in." if stepped_in else ".")
    elif stepped_in:
        text += f". {STEPPED_DOWN}."
    else:
        text += ", presented by nobody yet."
    return _note(channel, "reminder", day, "Reading group soon", text)


def _note(channel: str, step: str, day: date, title: str, text: str) -> dict:
    return {"channel": channel, "text": bk.fallback_text(text),
            "blocks": [b.to_dict() for b in bk.club_note_blocks(title, text)],
            # The machine's own marker: a redraw (chat.update) keeps the post findable by its claim.
            "metadata": {"event_type": SCHEDULED_EVENT,
                         "event_payload": {"kind": step, "key": f"{step}:{day.isoformat()}"}}}


STEPPED_DOWN = "Its presenter stepped down; someone else will be asked"
NAMES_THE_PRESENTER = {"winner": winner_message, "reminder": reminder_message}  # the posts a redraw redraws


def redraw_announced(deps: Deps, client: WebClient | None, channel: str, day: date, *, stepped_in: bool) -> None:
    """Redraw the session's announcement and reminder from the store, each one that is in the channel
    (its presenter stepped down, or someone stepped in); a redraw that fails is logged, and the
    change stands."""
    spec = cl.club_for(deps.store, channel)
    if spec is None or client is None:
        return  # no club, or the console
    for step, build in NAMES_THE_PRESENTER.items():
        posted = deps.store.get_post(channel, f"{step}:{day.isoformat()}") or {}
        if posted.get("status") != "posted" or not posted.get("ts"):
            continue  # not out yet
        try:
            message = build(deps, channel, day, spec, stepped_in=stepped_in)
            if message:
                client.chat_update(**message, ts=posted["ts"])
        except Exception:
            log.warning("could not redraw the %s for %s %s", step, channel, day, exc_info=True)


def stepped_down(deps: Deps, client: WebClient | None, channel: str, days) -> None:
    """After store.club.step_down: the announcements and reminders of those sessions no longer name
    the presenter who left; the next tick asks someone else, and redraws them again naming them."""
    for day in days:
        redraw_announced(deps, client, channel, day, stepped_in=True)


def swapped(deps: Deps, client: WebClient | None, channel: str, day: date, now: datetime) -> None:
    """After store.club.accept_swap: the session's agenda (in a club where the presenter chooses, it
    names them), announcement and reminder in the channel name the member who took the slot."""
    redraw_agenda(deps, client, channel, day, now)
    redraw_announced(deps, client, channel, day, stepped_in=False)


def post_agenda(deps: Deps, client: WebClient, channel: str, day: date) -> str | None:
    """Post the session's agenda now (once; the scheduler's path); its ts."""
    start = next(s for s in cl.session_starts(_spec(deps, channel), deps.clock() - timedelta(days=15), count=6)
                 if s.date() == day)
    result = _run_step(deps, client, channel, _spec(deps, channel), "agenda", start, deps.clock(), budget=60.0,
                       sleep=time.sleep)
    return result.ts


# -- scheduled club posts: each through posting.Poster.post_once (claim, look, deliver, finish) --
STEPS = ("agenda", "winner", "reminder", "thread", "recap")
CLUB_GRACE = timedelta(hours=3)  # a step missed by less than this is done on the next tick (catch-up)


def _moments(spec: cl.ClubSpec, start: datetime) -> dict[str, datetime]:
    t = cl.timeline(spec, start)
    return {"agenda": t.nominations_close, "winner": t.cutoff, "reminder": t.reminder, "thread": t.start,
            "recap": t.recap}


def due_steps(spec: cl.ClubSpec, now: datetime, *, skipped=(), grace: timedelta = CLUB_GRACE):
    """(step, session start) pairs due now, oldest first: each from its moment on, for as long as it
    still means something to a team whose bot was down at that moment: the agenda while its votes are
    open (a club whose votes close with its nominations: for `grace`), the winner and the reminder
    until the session starts, the thread and the recap for `grace`."""
    out = []
    for start in cl.session_starts(spec, now - timedelta(days=14), skipped=skipped, count=4):
        moments = _moments(spec, start)
        until = {"agenda": moments["winner"] if moments["winner"] > moments["agenda"] else moments["agenda"] + grace,
                 "winner": start, "reminder": start}
        for step, at in moments.items():
            if at <= now < until.get(step, at + grace):
                out.append((at, step, start))
    return [(step, start) for at, step, start in sorted(out, key=lambda x: x[0])]


def club_tick(deps: Deps, client: WebClient, now: datetime, *, budget: float = 600.0, sleep=None) -> list:
    """Every due club post in every club, each exactly once (the scheduler calls this each minute)."""

    results = []
    for row in deps.store.clubs():
        channel = row["channel"]
        spec = cl.ClubSpec.from_row(row)
        try:
            for day in cl.settle_sessions(deps.store, channel, spec, now, grace=CLUB_GRACE):
                log.info("club session %s in %s had no recap; counted as held", day, channel)
        except LeaseLost:
            raise  # another replica runs the tick now (SweepLease.under says so)
        except StoreError as exc:
            log.error("club sessions of %s not settled: %s", channel, exc)
        for step, start in due_steps(spec, now, skipped=cl.skipped_for(deps.store, channel)):
            # Refused for the channel (an agenda is retried until its votes close, days at times): the
            # next try waits for the invite back, or posting.REFUSED_WAIT, not the next minute.
            if refused_lately(deps.store, channel, f"{step}:{start.date().isoformat()}", now):
                continue
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
    from .. import posting

    store = deps.store
    day = start.date()
    key = f"{step}:{day.isoformat()}"

    def once(build, *, thread_ts: str | None = None) -> posting.PostResult:
        post = posting.Post(channel, key, step, now.date(), lambda claim: build(), thread_ts=thread_ts)
        return deps.poster.post_once(client, store, post, now, budget=budget, sleep=sleep)
    if step == "agenda":
        chosen_now = False  # a presenter chosen for an agenda out already (store.club.step_down freed it)
        if spec.mode == cl.PRESENTER_CHOOSES:
            before = store.get_club_session(channel, day.isoformat()) or {}
            chosen_now = bool(cl.assign_presenter(store, channel, day, now)) and not before.get("presenter")
        _propose_if_empty(deps, channel, day, now)
        result = once(lambda: agenda_message(deps, channel, day))
        if result.ts:
            store.put_club_session(channel, day.isoformat(), agenda_ts=result.ts, now=now.timestamp())
        if chosen_now and result.status == "already":  # it names who chooses: the one chosen now
            redraw_agenda(deps, client, channel, day, now)
        return result
    if step == "winner":
        before = store.get_club_session(channel, day.isoformat()) or {}
        if not before.get("paper_id"):
            _propose_if_empty(deps, channel, day, now)  # an agenda the bot was down for proposed nothing
        session = cl.decide(store, channel, day, now)
        paper = store.get_paper(session["paper_id"]) if session.get("paper_id") else None
        agenda_ts = session.get("agenda_ts")
        if agenda_ts and not (store.get_post(channel, key) or {}).get("ts"):
            try:  # the agenda shows the final counts, without buttons
                closed = agenda_message(deps, channel, day, closed=True)
                client.chat_update(channel=channel, ts=agenda_ts, text=closed["text"], blocks=closed["blocks"])
            except Exception:
                log.warning("could not close the agenda for %s %s", channel, day, exc_info=True)
        # A presenter chosen now for a paper announced before: the one announced stepped down
        # (store.club.step_down keeps the paper), so whoever presents now stepped in.
        stepped_in = bool(before.get("paper_id")) and not before.get("presenter")
        result = once(lambda: winner_message(deps, channel, day, spec, stepped_in=stepped_in))
        if result.status == "already" and session.get("presenter") != before.get("presenter"):
            redraw_announced(deps, client, channel, day, stepped_in=stepped_in)  # they name who presents now
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
        result = once(lambda: reminder_message(deps, channel, day, spec))
        _about(store, channel, result.ts, paper.id, now)
        return result
    if step == "thread":
        def build():
            from ..commands import paper_summary

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


def proposed_note(count: int) -> str:
    """The agenda's line over the bot's proposals."""
    many = {1: "is one", 2: "are two", 3: "are three"}.get(count, f"are {count}")
    return f"Nobody nominated a paper, so here {many} from the team's interests, none read before."


def _propose_if_empty(deps: Deps, channel: str, day: date, now: datetime) -> bool:
    """With nothing on the session's ballot, put the bot's proposals there; whether it did."""
    store = deps.store
    if store.nominations(channel, day.isoformat()):
        return False
    for pid in cl.propose(store, deps.searcher, channel, day, feedback=deps.feedback, settings=deps.pick):
        store.add_nomination(channel, day.isoformat(), pid, None, now=now.timestamp())
    return True


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
    from .. import posting
    from ..commands import paper_summary

    store = deps.store
    try:
        session = store.get_club_session(channel, day.isoformat()) or {}
        presenter, paper = session.get("presenter"), None
        if session.get("paper_id"):
            paper = store.get_paper(session["paper_id"])
        if not presenter or paper is None:
            return None
        key = f"presenter:{day.isoformat()}:{member_tag(presenter)}"
        row = store.get_post(channel, key)
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
            if store.claim_post(channel, key, kind="presenter_dm", claimer=deps.poster.replica, now=now.timestamp()):
                store.fail_post(channel, key, claimer=deps.poster.replica, error=why, claimed_at=now.timestamp())
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
        post = posting.Post(channel, key, "presenter_dm", now.date(), lambda claim: build(), to=dm)
        result = deps.poster.post_once(client, store, post, now, budget=budget, sleep=sleep)
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
