"""`paperclub console` is wired like `paperclub run`: its own channel, the configured emoji weights.

Lines are piped into the real console loop (bot/console.py) over a weightless store.
"""
from __future__ import annotations

import io
import os
import re
import time
from pathlib import Path

import pytest

from bot.commands import CONSOLE_CHANNEL
from bot.console import run_console
from conftest import make_settings
from store import feedback as fb
from store.embed import HashingEmbedder

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def wide(monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")  # rich would wrap the replies at 80 columns
    monkeypatch.setenv("TZ", "UTC")  # the laptop's own zone, which the console schedules in


def console(store, lines: str, **settings) -> str:
    out = io.StringIO()
    run_console(make_settings(**settings), store, HashingEmbedder(), stdin=io.StringIO(lines), out=out)
    return out.getvalue()


def most_liked_line(text: str) -> str:
    return next(line for line in text.splitlines() if "Most liked" in line)


def test_the_console_weighs_reactions_with_the_configured_weights(hashing_store):
    # Two papers shared in the console's channel an hour ago: one slept through, one on fire.
    store, now = hashing_store, time.time()
    dull, hot = list(store.iter_papers())[:2]
    for n, (paper, user, emoji) in enumerate([(dull, "U1", "sleeping"), (hot, "U2", "fire")]):
        ts = f"{now - 3600 + n:.6f}"
        store.record_message_paper(CONSOLE_CHANNEL, ts, paper.id, kind="share", now=now - 3600 + n)
        fb.record_reaction(store, event_id=f"Ev{n}", channel=CONSOLE_CHANNEL, message_ts=ts, user=user,
                           emoji=emoji, added=True, event_ts=now - 1800, now=now - 1800)

    default = most_liked_line(console(store, "digest\n"))
    assert hot.short_name in default and dull.short_name not in default

    # PAPERCLUB_REACTION_WEIGHTS turns the verdicts round, in the console as in Slack.
    configured = most_liked_line(console(store, "digest\n", reaction_weights="sleeping=3,fire=-1"))
    assert dull.short_name in configured and hot.short_name not in configured


def test_a_newcomer_can_schedule_steer_and_preview_the_paper_of_the_day_in_the_console(hashing_store):
    text = console(hashing_store, "schedule 09:30 UTC weekdays\ninterests add video understanding\ntoday\n")
    assert "Schedules belong to a Slack channel" not in text
    assert "set the paper of the day to weekdays (Mon-Fri) at 09:30 UTC" in text
    row = hashing_store.get_schedule(CONSOLE_CHANNEL)
    assert (row["hour"], row["minute"], row["tz"], row["days"]) == (9, 30, "UTC", "weekdays")
    assert [r["text"] for r in hashing_store.interests(CONSOLE_CHANNEL)] == ["video understanding"]
    assert "Preview (only you see this): it posts" in text  # today's pick, as a channel would get it
    # The console runs on the wall clock, and about one day in ten is an exploration day.
    assert ("Paper of the day" in text or "Exploration day" in text)
    assert "video understanding" in text.split("Preview")[-1]


def test_the_console_takes_a_schedule_on_chosen_days_and_names_the_next_of_them(hashing_store):
    """"schedule 9:00 UTC mon and thu" was "I didn't understand “mon”" here as in Slack."""
    helped = console(hashing_store, "help schedule\n")
    assert "daily|weekdays|days" in helped and "mon and thu" in helped
    text = console(hashing_store, "schedule 9:00 UTC mon and thu\nschedule\n")
    assert "set the paper of the day to Mondays and Thursdays at 09:00 UTC" in text
    assert hashing_store.get_schedule(CONSOLE_CHANNEL)["days"] == "mon,thu"
    shown = text.split("comes Mondays and Thursdays at 09:00 UTC")[1]
    assert re.search(r"Next post: (Mon|Thu) \d+ \w+ at 09:00 UTC", shown)


def test_a_time_typed_without_a_zone_is_the_laptops_own_unless_the_setting_names_one(hashing_store, monkeypatch):
    """The console read "9am" as UTC (PAPERCLUB_TIMEZONE's default), not as the time on the laptop."""
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    assert "set the paper of the day to every day at 09:00 Asia/Tokyo" in console(hashing_store, "schedule 9am\n")
    monkeypatch.setenv("TZ", ":/usr/share/zoneinfo/Europe/Berlin")  # a zone file's path, as TZ may be
    assert "to every day at 08:00 Europe/Berlin" in console(hashing_store, "schedule off\nschedule 8am\n")
    assert "to every day at 07:00 Europe/Paris" in console(hashing_store, "schedule off\nschedule 7am\n",
                                                           timezone="Europe/Paris")
    monkeypatch.setenv("TZ", "EST5EDT4,M3.2.0,M11.1.0")  # a rule, no zone name: UTC, said as such
    assert "to every day at 06:00 UTC" in console(hashing_store, "schedule off\nschedule 6am\n")


def test_a_newcomer_can_answer_a_calibration_round_by_typing_what_its_buttons_say(hashing_store):
    """The console has no buttons: each card says what to type instead, and typing it is the member's
    verdict, as the button would have been (the round leaves it out next time; take-back undoes it)."""
    store = hashing_store
    text = console(store, "interests add video understanding\ncalibrate\n")
    typed = re.findall(r"→ type: for-me (\S+) \(or not-for-me\)", text)  # one line per card, its own paper
    assert len(typed) >= 6 and len(set(typed)) == len(typed)
    liked, disliked = typed[0], typed[1]

    text = console(store, f"for-me {liked}\nnot-for-me {disliked}\ncalibrate\n")
    assert "👍 Noted: more papers like" in text and "👎 Noted: fewer papers like" in text
    assert f"take-back {liked}" in text  # the Undo under each answer, typed
    standing = fb.current_reactions(store.reactions(channel=CONSOLE_CHANNEL))
    assert sorted((r["paper_id"], r["base"]) for r in standing) == sorted([(liked, "+1"), (disliked, "-1")])
    assert "2 papers you rated or saved before are left out" in text
    assert not {liked, disliked} & set(re.findall(r"→ type: for-me (\S+) \(or not-for-me\)",
                                                  text.split("Which would you read?")[-1]))

    text = console(store, f"take-back {disliked}\n")
    assert "no longer counts" in text
    assert [r["paper_id"] for r in fb.current_reactions(store.reactions(channel=CONSOLE_CHANNEL))] == [liked]


def test_a_card_number_typed_for_a_paper_judges_no_paper_and_says_to_type_its_id(hashing_store):
    """The round numbers its cards: `for-me 1` means its first card, not the paper whose abstract says
    "R1", which it used to judge; a number names no paper, so nothing is recorded and the reply says what
    to type."""
    store = hashing_store
    text = console(store, "interests add video understanding\ncalibrate\nfor-me 1\nnot-for-me #2\n")
    assert fb.current_reactions(store.reactions(channel=CONSOLE_CHANNEL)) == []
    assert "Noted" not in text and text.count("is a number in a list, not a paper") == 2
    assert "give the paper's id (as its card shows it)" in text


def test_every_way_a_newcomer_tries_the_reading_group_names_the_typed_setup(hashing_store):
    """The console has no Set up form: `club`, `club start`, `club join`, `nominate` and `help club` each
    say what to type instead, and `club start` is taken as setup."""
    paper = hashing_store.list_papers(limit=1)[0]
    setup = "club setup <weekday> <HH:MM> [zone]"
    replies = console(hashing_store, f"club\nclub start\nclub join\nnominate {paper.id}\nhelp club\n").split("\n\n")
    club, start, join, nominate, usage = (r for r in replies if r.strip())
    assert f"[Set up the club] → type: {setup}" in club and f"Set it up with /paper {setup}" in club
    assert "I don't know" not in start and "/paper club setup thursday 17:00" in start
    assert f"no reading group yet: an admin can set one up with /paper {setup}" in join
    assert f"no reading group yet: an admin can set one up with /paper {setup}" in nominate
    assert "setup <weekday> <HH:MM> [zone]" in usage
    text = console(hashing_store, "club start thursday 17:00 UTC\n")
    assert "The reading group is set up" in text and hashing_store.get_club(CONSOLE_CHANNEL)["weekday"] == 3


def test_the_console_keeps_the_servers_info_lines_out_of_the_replies(hashing_store, capsys, monkeypatch):
    """`make run` without tokens: a person reads replies in the terminal, and each command's and each
    verdict's INFO log line (what a server logs) used to come between them. Warnings still show."""
    import logging

    from bot.logs import configure

    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", list(root.handlers))  # configure() replaces them: put them back
    monkeypatch.setattr(root, "level", root.level)
    configure("INFO")
    text = console(hashing_store, "interests add video understanding\ntoday\n")
    logging.getLogger("bot.test").warning("a warning still shows")
    err = capsys.readouterr().err
    assert "Interests of this channel" in text
    assert " INFO " not in err and "a warning still shows" in err


class _Graph:
    """The ONNX query encoder's exported graph, standing in for OnnxQueryEncoder: on disk already or
    not, and exported by `load` (the hashing embedder's vectors, so searches still work)."""

    cache_dir = "onnx"

    def __init__(self, cached: bool):
        self.cached, self.exports = cached, 0

    def is_cached(self) -> bool:
        return self.cached

    def load(self, *, in_subprocess: bool = False):
        self.exports += not self.cached
        self.cached = True

    def encode(self, texts):
        return HashingEmbedder().encode(texts)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("cached", [False, True])
def test_the_console_says_it_prepares_the_fast_query_encoder_only_when_it_does(hashing_store, monkeypatch, cached):
    """`make run` without tokens said "Preparing the fast query encoder (once, about a minute)" on every
    start, also when the exported graph was already cached and only had to be opened."""
    from store.embed import OnnxQueryEmbedder

    monkeypatch.setenv("FORCE_COLOR", "1")  # a terminal, so rich draws its status line
    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # what the prompt reads: Ctrl-D at once
    graph, out = _Graph(cached), io.StringIO()
    embedder = OnnxQueryEmbedder(HashingEmbedder(), graph)
    run_console(make_settings(), hashing_store, embedder, stdin=_Terminal(), out=out)
    assert ("Preparing the fast query encoder" in out.getvalue()) is not cached, out.getvalue()
    assert graph.exports == (0 if cached else 1) and embedder.query_backend == "onnx"
    assert "paperclub console" in out.getvalue()


@pytest.mark.parametrize("quoted", ['"{}"', "“{}”", "'{}'", "‘{}’"])
def test_a_paper_name_in_quotes_is_found_by_its_name_as_without_them(hashing_store, quoted):
    """`search "CaReBench"` answered "No good match" above CaReBench itself, and `summary “SPIKE”`
    (the quotes a phone or a Mac types) was only a "Best match" with two runners-up."""
    names = {p.short_name: p for p in hashing_store.iter_papers()}
    bench, spike = names["CaReBench"], names["SPIKE"]
    text = console(hashing_store, f"search {quoted.format('CaReBench')}\nsummary {quoted.format('SPIKE')}\n")
    found, summary = text.split("TL;DR", 1)[0], text.split(f"id {bench.id}", 1)[1]
    assert "No good match" not in found and "name match" in found.split(f"id {bench.id}")[0]
    assert "Best match" not in summary and f"id {spike.id}" in summary


def test_slack_formatting_typed_into_an_interest_is_not_kept_as_its_words(hashing_store):
    """`interests add *diffusion* `models`` was kept with its marks and came back as "**diffusion*
    models*" in the list and as "near *…, diffusion* models, spread…*" in the calibration round, its
    asterisks pairing with the bot's own bold."""
    text = console(hashing_store, "interests add *diffusion* `models` for _video_ ~editing~\ncalibrate\n"
                                  "search *CaReBench*\n")
    assert [r["text"] for r in hashing_store.interests(CONSOLE_CHANNEL)] == ["diffusion models for video editing"]
    assert "*" not in text and "`" not in text and "~" not in text
    bench = next(p for p in hashing_store.iter_papers() if p.short_name == "CaReBench")
    assert "name match" in text.split("Top 5 for")[1].split(f"id {bench.id}")[0]


def test_a_time_typed_without_a_zone_is_the_laptops_own_after_copying_the_example_env(hashing_store, monkeypatch,
                                                                                    tmp_path):
    """The quick start copies .env.example to .env; its PAPERCLUB_TIMEZONE=UTC counted as a zone the
    operator chose, so the console read "9am" as 09:00 UTC, not the laptop's 9am as it promises."""
    from bot.config import load_settings

    (tmp_path / ".env").write_text((ROOT / ".env.example").read_text())
    monkeypatch.chdir(tmp_path)
    for name in [n for n in os.environ if n.startswith("PAPERCLUB_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    out = io.StringIO()
    run_console(load_settings(), hashing_store, HashingEmbedder(), stdin=io.StringIO("schedule 9am\n"), out=out)
    assert "set the paper of the day to every day at 09:00 Asia/Tokyo" in out.getvalue()
