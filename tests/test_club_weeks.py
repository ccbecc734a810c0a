"""A reading group lived over several weeks, against the fake Slack with an injected clock: the bot
down at the wrong moment, the club changed with `club setup` after nominations, a presenter who
leaves. Each test says what the team would see in the channel."""
from __future__ import annotations

from datetime import date, datetime, timedelta, timezone


from conftest import text_of
from store.club import ClubSpec, set_club
from test_club_posts import CH, MOMENTS, MONDAY, SESSION, scheduled, tick, world  # noqa: F401 (world: a fixture)

DAY = SESSION.date()
MEMBERS = ("UANN", "UBOB", "UCY")  # the world fixture's club members


def kinds(fake, day: date = DAY) -> dict[str, int]:
    """How many of each scheduled post the session on `day` got."""
    out: dict[str, int] = {}
    for kind, posts in scheduled(fake).items():
        for m in posts:
            if m["metadata"]["event_payload"]["key"].endswith(day.isoformat()):
                out[kind] = out.get(kind, 0) + 1
    return out


def test_a_bot_restarted_after_the_session_began_posts_the_thread_but_no_stale_reminder(world):
    fake, store, clock, deps = world
    tick(deps, MOMENTS["agenda"] + timedelta(minutes=1))
    tick(deps, MOMENTS["winner"] + timedelta(minutes=1))
    # Down from before the reminder until half an hour into the session.
    tick(deps, SESSION + timedelta(minutes=30))
    assert kinds(fake) == {"agenda": 1, "winner": 1, "thread": 1}  # "Reading group soon" would be news from the past


def test_an_agenda_missed_by_downtime_goes_out_late_while_votes_are_still_open(world):
    fake, store, clock, deps = world
    # Down from before nominations closed (Tue 17:00) until Wednesday morning: the cutoff is Wed 17:00.
    tick(deps, MOMENTS["agenda"] + timedelta(hours=15))
    assert kinds(fake) == {"agenda": 1}
    [agenda] = scheduled(fake)["agenda"]
    assert "Vote" in str(agenda["blocks"])


def test_no_agenda_after_its_votes_closed(world):
    fake, store, clock, deps = world
    set_club(store, CH, ClubSpec(3, 17, 0, "Europe/Berlin", lead_hours=25, cutoff_hours=24), by="U0", now=MONDAY)
    # Down from before nominations closed until two hours later, past the cutoff an hour after them.
    tick(deps, SESSION - timedelta(hours=23))
    assert kinds(fake) == {"winner": 1}  # an agenda whose votes had closed would ask for votes it refuses
    session = store.get_club_session(CH, DAY.isoformat())
    assert session["paper_id"] and session["presenter"]  # the bot proposed, as the agenda would have
    name = store.get_paper(session["paper_id"]).short_name
    assert name.replace("&", "&amp;") in text_of(scheduled(fake)["winner"][0])


def test_an_agenda_refused_for_the_channel_waits_for_the_invite_and_then_goes_out_at_once(world):
    """The agenda is retried until its votes close (a day here): with the bot removed from the channel,
    each minute's tick asked Slack again, 1,440 refusals and as many errors in the log; then every ten
    minutes, and invited back, the team still waited for the next ten."""
    from fake_slack import BOT_USER_ID
    from test_daily_e2e import joined

    fake, store, clock, deps = world
    for method in ("chat.postMessage", "conversations.history"):
        fake.fail(method, error="not_in_channel", times=None)
    for minute in range(1, 46):  # three quarters of an hour of the scheduler's ticks
        tick(deps, MOMENTS["agenda"] + timedelta(minutes=minute))
    assert not scheduled(fake)
    assert len(fake.calls("chat.postMessage")) == 1  # the refusal, not a retry every few minutes
    fake.reset()
    clock.now = MOMENTS["agenda"] + timedelta(minutes=45, seconds=30)
    joined(_app(deps), BOT_USER_ID)  # /invite @paperclub
    tick(deps, MOMENTS["agenda"] + timedelta(minutes=46))  # the next tick, not the next hour
    assert kinds(fake) == {"agenda": 1}


def _app(deps):
    from bot.app import create_app

    return create_app(deps, process_before_response=True)


def test_a_fortnightly_club_set_to_a_new_time_keeps_its_weeks(world):
    from conftest import dispatch_command

    fake, store, clock, deps = world
    app = _app(deps)
    assert "Thu 3 Dec at 17:00" in text_of(dispatch_command(app, fake, "club setup fortnightly", user="UANN",
                                                            channel=CH))
    clock.now = SESSION + timedelta(days=1)  # the day after the first session, the group wants 18:00
    reply = dispatch_command(app, fake, "club setup 18:00", user="UANN", channel=CH)
    assert "Thu 17 Dec at 18:00" in text_of(reply)  # not Thu 10 Dec, the week off



def test_nominations_follow_the_session_when_club_setup_moves_it_to_another_day(world):
    from conftest import dispatch_command

    fake, store, clock, deps = world
    app = _app(deps)
    paper = next(iter(store.iter_papers()))
    assert "2026-12-03" in text_of(dispatch_command(app, fake, f"nominate {paper.id}", user="UANN", channel=CH))
    # Thursdays no longer suit: the group meets on Friday 4 Dec instead, nominations closing Wed 17:00.
    reply = dispatch_command(app, fake, "club setup friday", user="UBOB", channel=CH)
    assert "Fri 4 Dec at 17:00" in text_of(reply) and "Nominations:* 1" in text_of(reply)
    tick(deps, datetime(2026, 12, 2, 16, 1, tzinfo=timezone.utc))
    [agenda] = scheduled(fake)["agenda"]
    assert "Nobody nominated" not in text_of(agenda)
    assert "nominated by <@UANN>" in text_of(agenda)


def test_a_presenter_who_runs_forget_me_after_the_announcement_is_replaced_and_the_paper_stays(world):
    from conftest import dispatch_command

    fake, store, clock, deps = world
    app = _app(deps)
    first, second = list(store.iter_papers())[:2]
    at = MONDAY.timestamp()
    store.add_nomination(CH, DAY.isoformat(), first.id, "UBOB", now=at)
    store.add_nomination(CH, DAY.isoformat(), second.id, "UCY", now=at + 60)
    tick(deps, MOMENTS["agenda"] + timedelta(minutes=1))
    for user, paper in (("UANN", second), ("UCY", second), ("UBOB", first)):
        assert store.add_vote(CH, DAY.isoformat(), user, paper.id, limit=3, now=at) == "added"
    tick(deps, MOMENTS["winner"] + timedelta(minutes=1))
    [winner] = scheduled(fake)["winner"]
    assert second.short_name.replace("&", "&amp;") in text_of(winner)
    presenter = store.get_club_session(CH, DAY.isoformat())["presenter"]
    assert presenter == "UCY"  # the winning paper's nominator, as nobody has presented yet
    clock.now = MOMENTS["winner"] + timedelta(hours=2)
    assert "out of the reading group" in text_of(dispatch_command(app, fake, "forget-me confirm", user="UCY",
                                                                  channel=CH))
    tick(deps, MOMENTS["winner"] + timedelta(hours=2, minutes=1))
    tick(deps, MOMENTS["reminder"] + timedelta(minutes=1))
    session = store.get_club_session(CH, DAY.isoformat())
    assert session["paper_id"] == second.id  # the paper the channel was told it reads
    [reminder] = scheduled(fake)["reminder"]
    assert second.short_name.replace("&", "&amp;") in text_of(reminder)
    assert session["presenter"] in ("UANN", "UBOB") and f"<@{session['presenter']}>" in text_of(reminder)
    assert [m for m in fake.dm_messages(session["presenter"])
            if (m.get("metadata") or {}).get("event_payload", {}).get("kind") == "presenter_dm"]


def test_a_session_the_bot_was_down_for_still_counts_so_the_rotation_moves_on(world):
    from conftest import dispatch_command

    fake, store, clock, deps = world
    tick(deps, MOMENTS["agenda"] + timedelta(minutes=1))
    tick(deps, MOMENTS["winner"] + timedelta(minutes=1))
    first = store.get_club_session(CH, DAY.isoformat())
    # Down from before the session until the next morning: no thread, no recap. The team met anyway.
    week = timedelta(days=7)
    tick(deps, SESSION + timedelta(hours=16))
    tick(deps, MOMENTS["agenda"] + week + timedelta(minutes=1))
    tick(deps, MOMENTS["winner"] + week + timedelta(minutes=1))
    second = store.get_club_session(CH, (DAY + week).isoformat())
    assert second["presenter"] != first["presenter"]  # not the same member two weeks running
    history = text_of(dispatch_command(_app(deps), fake, "club history", user="UANN", channel=CH))
    assert "2026-12-03" in history and f"<@{first['presenter']}>" in history


def test_the_agenda_says_the_papers_are_proposals_after_votes_redraw_it_and_after_an_outage(world):
    from slack_bolt import BoltRequest

    from bot import blocks as bk

    fake, store, clock, deps = world
    app = _app(deps)
    fake.fail("chat.postMessage", status=500, times=None)  # Slack down past the retry budget
    tick(deps, MOMENTS["agenda"] + timedelta(minutes=1))
    assert scheduled(fake) == {} and len(store.nominations(CH, DAY.isoformat())) == 3
    fake.reset()
    tick(deps, MOMENTS["agenda"] + timedelta(minutes=2))  # the next tick posts it
    [agenda] = scheduled(fake)["agenda"]
    assert "Nobody nominated" in text_of(agenda)
    paper = store.nominations(CH, DAY.isoformat())[0]["paper_id"]
    clock.now = MOMENTS["agenda"] + timedelta(minutes=5)
    body = {"type": "block_actions", "user": {"id": "UANN"}, "api_app_id": "A1", "team": {"id": "T1"},
            "channel": {"id": CH}, "trigger_id": "1.2.3", "response_url": fake.new_response_url(channel=CH, user="UANN"),
            "container": {"type": "message", "channel_id": CH, "message_ts": agenda["ts"], "is_ephemeral": False},
            "actions": [{"action_id": bk.ACTION_VOTE, "block_id": "b", "value": f"{DAY.isoformat()}|{paper}",
                         "type": "button"}]}
    assert app.dispatch(BoltRequest(body=body, mode="socket_mode")).status == 200
    redrawn = fake.wait_for(lambda: next((m for m in fake.messages(CH) if m["ts"] == agenda["ts"]
                                          and "*1* vote" in text_of(m)), None))
    assert "Nobody nominated" in text_of(redrawn)


def test_a_presenter_who_leaves_the_channel_is_replaced_and_out_of_the_rotation(world):
    from slack_bolt import BoltRequest

    from conftest import dispatch_command

    fake, store, clock, deps = world
    app = _app(deps)
    tick(deps, MOMENTS["agenda"] + timedelta(minutes=1))
    tick(deps, MOMENTS["winner"] + timedelta(minutes=1))
    gone = store.get_club_session(CH, DAY.isoformat())["presenter"]
    clock.now = MOMENTS["winner"] + timedelta(hours=3)
    body = {"type": "event_callback", "team_id": "T1", "api_app_id": "A1", "event_id": "EvLeft1", "event_time": 1,
            "authorizations": [{"team_id": "T1", "user_id": "UBOT", "is_bot": True}],
            "event": {"type": "member_left_channel", "user": gone, "channel": CH, "channel_type": "C", "team": "T1",
                      "event_ts": f"{clock.now.timestamp():.6f}"}}
    assert app.dispatch(BoltRequest(body=body, mode="socket_mode")).status == 200
    fake.wait_for(lambda: gone not in {m["user"] for m in store.club_members(CH)})
    tick(deps, MOMENTS["winner"] + timedelta(hours=3, minutes=1))
    tick(deps, MOMENTS["reminder"] + timedelta(minutes=1))
    now_presenting = store.get_club_session(CH, DAY.isoformat())["presenter"]
    assert now_presenting not in (None, gone)
    [reminder] = scheduled(fake)["reminder"]
    assert f"<@{now_presenting}>" in text_of(reminder) and f"<@{gone}>" not in text_of(reminder)
    assert [m for m in fake.dm_messages(now_presenting)
            if (m.get("metadata") or {}).get("event_payload", {}).get("kind") == "presenter_dm"]
    assert f"<@{gone}>" not in text_of(dispatch_command(app, fake, "club", user="UANN", channel=CH))


def test_a_presenter_who_runs_forget_me_is_off_the_announcement_and_reminder_at_once(world):
    """Cy, announced and reminded as the presenter, runs forget-me: both posts in the channel say
    someone else will be asked straight away, not at the next tick, and no longer name Cy."""
    from conftest import dispatch_command

    fake, store, clock, deps = world
    app = _app(deps)
    paper = next(iter(store.iter_papers()))
    store.add_nomination(CH, DAY.isoformat(), paper.id, "UCY", now=MONDAY.timestamp())
    for step in ("agenda", "winner", "reminder"):
        tick(deps, MOMENTS[step] + timedelta(minutes=1))
    assert store.get_club_session(CH, DAY.isoformat())["presenter"] == "UCY"  # the nominator, nobody presented yet
    clock.now = MOMENTS["reminder"] + timedelta(minutes=5)
    assert "out of the reading group" in text_of(dispatch_command(app, fake, "forget-me confirm", user="UCY",
                                                                  channel=CH))
    name = paper.short_name.replace("&", "&amp;")
    for step in ("winner", "reminder"):
        [post] = scheduled(fake)[step]
        assert "<@UCY>" not in text_of(post) and "someone else will be asked" in text_of(post)
        assert name in text_of(post)
