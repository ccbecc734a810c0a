"""/paper calibrate and the "Rate a few papers" button: a calibration round, so a new interest learns fast.

After `/paper interests add <topic>` the private reply offers a round; the button (or the typed
command) answers, privately, in the channel it was asked in, with a few papers near the interest
and spread across it (store.calibrate). Each card carries the verdict buttons every paper card
has (bot/reactions.py records a press as the member's 👍 / 👎 on that paper, in that channel), so
the answers steer the member's own turns of that channel's paper of the day.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from store import StoreError, broad_interests
from store import feedback as fb
from store.calibrate import calibration_round

from . import blocks as bk
from .blocks import code
from .commands import Call, Reply, Subcommand, channel_of, has_words, paper_summaries, problem_reply

if TYPE_CHECKING:
    from slack_bolt import App

    from .deps import Deps

log = logging.getLogger(__name__)


def interests_broad(deps: Deps, rows: list[dict]) -> list[bool]:
    """Whether each interest (`rows`, as the store lists them) is as wide as the library
    (store.broad_interests); all False where the library can't be read (StoreError, StoreBusy among
    them): what is said of them stands either way. A fault of ours is not taken for that."""
    try:
        return broad_interests(deps.store, deps.searcher, rows, deps.pick)
    except StoreError:
        log.warning("could not tell how broad the interests are", exc_info=True)
        return [False] * len(rows)


def offer_blocks(deps: Deps, topic: str, *, broad: bool = False) -> list:
    """The offer under an added interest: one line and a button that opens the round (`broad`: the
    interest is as wide as the library, so the round's papers are not "near it")."""
    where = "from across the library" if broad else "near it"
    return bk.calibrate_offer(f"Want better picks for *{bk.esc(topic)}*? Say which of a few papers {where} "
                              "you would read.", topic, typed=f"{deps.command} calibrate {topic}")


def welcome_member(deps: Deps, client, channel: str, user: str) -> bool:
    """A person joined `channel`: where a paper of the day posts, tell them privately how to get turns
    (add a topic; the reply then offers a calibration round). True when the welcome went out."""
    if not deps.store.get_schedule(channel):
        return False  # no paper of the day here: nothing to calibrate, nothing to say
    cmd = deps.command
    topics = [r["text"] for r in deps.store.interests(channel)]
    follows = (f" It follows {bk.fit_items([f'*{bk.esc(t)}*' for t in dict.fromkeys(topics)], 300)}."
               if topics else "")
    text = (f"Welcome! This channel gets a paper of the day, picked for each member's interests in turn.{follows} "
            f"Add what you read to get turns too: {code(cmd + ' interests add <topic>')}; then rate a few "
            "papers near it, so your first picks fit. Only you see this.")
    client.chat_postEphemeral(channel=channel, user=user, text=text, blocks=bk.message_blocks(text))
    log.info("welcomed a member in %s", channel)
    return True


def calibrate_reply(deps: Deps, channel: str, user: str, topic: str | None = None) -> Reply:
    """The round for `user` in `channel`: near `topic`, or near every interest they added here."""
    cmd = deps.command
    now = deps.clock().timestamp()
    found = calibration_round(deps.store, deps.searcher, channel, user, now=now, topic=topic or None,
                              settings=deps.pick)
    if not found.interests:
        others = "" if not deps.store.interests(channel) else " of your own"
        return problem_reply(deps, f"You have no interests{others} in this channel yet, so there is nothing to "
                                   "calibrate against. Add a topic you read about, then rate a few papers near it.",
                             hint=f"{code(cmd + ' interests add <topic>')} · or {code(cmd + ' calibrate <topic>')}")
    named = bk.cut_chars(found.topic, 200)
    if not found.papers:  # problem_reply escapes its message itself
        return problem_reply(deps, f"You have already rated the papers nearest *{named}*: nothing left to ask.",
                             hint=f"{code(cmd + ' today')} shows today's pick.")
    about = bk.esc(named)
    where = (f"from across the library (*{about}* is as wide as it)" if found.broad
             else f"near *{about}*, spread across {'them' if len(found.interests) > 1 else 'it'}")
    note = (f"{len(found.papers)} papers {where}. Press *👍 For me* on the ones "
            "you would read and *👎 Not for me* on the rest you can judge: each answer steers your turns of "
            "this channel's paper of the day. Only you see this.")
    if found.judged:  # judged_by: a standing reaction or verdict, or on the reading list
        n = found.judged
        said = "1 paper you rated or saved before is" if n == 1 else f"{n} papers you rated or saved before are"
        note += f" ({said} left out.)"
    return _round_reply(deps, found.papers, note, now=now)


def redraw_round(deps: Deps, user: str, paper_ids: list[str]) -> Reply:
    """The round again after a press on one of its cards: each card the member answered says so (with
    Undo), so the answers land in the round itself rather than as a message each."""
    papers = {p.id: p for p in deps.store.get_papers(paper_ids)}
    shown = [papers[pid] for pid in paper_ids if pid in papers]
    verdicts = fb.verdicts_of(deps.store, user, [p.id for p in shown])
    answered = sum(1 for p in shown if p.id in verdicts)
    note = (f"{answered} of {len(shown)} answered. Each answer steers your turns of this channel's paper of "
            "the day; Undo takes one back. Only you see this.")
    return _round_reply(deps, shown, note, now=deps.clock().timestamp(), verdicts=verdicts)


def _round_reply(deps: Deps, papers: list, note: str, *, now: float, verdicts: dict | None = None) -> Reply:
    cmd = deps.command
    summaries = paper_summaries(deps.store, papers, deps.llm, now=now)
    tldrs = {pid: getattr(s, "tldr", None) for pid, s in summaries.items()}
    footer = (f"{code(cmd + ' calibrate')} asks again with papers you have not rated · "
              f"{code(cmd + ' calibrate <topic>')} for one topic")
    names = ", ".join(p.short_name for p in papers)
    return Reply(bk.esc(f"Which would you read? {names}"),
                 bk.calibration_blocks(papers, title="Which would you read?", note=note, footer=footer,
                                       tldrs=tldrs, verdicts=verdicts))


def handle_calibrate(deps: Deps, call: Call) -> Reply:
    topic = call.args.strip()
    return calibrate_reply(deps, channel_of(call), call.user_id, topic if has_words(topic) else None)


def register(app: App, deps: Deps) -> None:
    """The offer's button: the round, privately, where it was pressed."""
    @app.action(bk.ACTION_CALIBRATE)
    def handle_calibrate_button(ack, action, body, respond):
        ack()
        user = (body.get("user") or {}).get("id") or ""
        channel = (body.get("channel") or {}).get("id") or (body.get("container") or {}).get("channel_id") or ""
        topic = (action.get("value") or "").strip()

        def job():
            reply = calibrate_reply(deps, channel, user, topic or None)
            respond(**reply.to_message(), replace_original=False)
        deps.later(job, respond)


SUBCOMMANDS = (
    Subcommand("calibrate", handle_calibrate, usage="calibrate [topic]", example="calibrate machine learning",
               help="A few papers near your interests here (or a topic), spread across them: say which you "
                    "would read, and your turns of the paper of the day learn it.",
               aliases=("rate",)),
)
