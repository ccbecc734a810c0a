"""Robustness figures: the fuzz, fault, crash and load tests, run (optionally bigger) and summarised.

    .venv/bin/python bench/robustness.py             # the sizes `make test` runs, the posting race at 100
    .venv/bin/python bench/robustness.py --scale 5   # 5x fuzz cases, crash trials and commands
    .venv/bin/python bench/robustness.py --only post_race --trials 100   # the posting race alone
    .venv/bin/python bench/robustness.py --only replicas_chaos --chaos-trials 100   # replicas, kill -9, restarts
    .venv/bin/python bench/robustness.py --trust [--trust-only hostile,forget,dst,feeds,votes]   # issue 31 (bench/trust.py)

It runs tests/test_{fuzz,faults,crash,post_race,load,access,secrets,replicas_chaos}.py with pytest, the
sizes passed through the environment (tests/figures.py), collects the figures
those tests record, prints them, and writes bench/out/robustness.json.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
FILES = ["fuzz", "faults", "crash", "post_race", "load", "access", "secrets", "replicas_chaos"]
SIZES = {"FUZZ_CASES": 2000, "FUZZ_BUTTON_CASES": 250, "FUZZ_EVENT_CASES": 250, "CRASH_TRIALS": 20,
         "LOAD_COMMANDS": 50}
RACE_TRIALS = 100  # M processes retrying failed and orphaned posts (tests/test_post_race.py; make test runs 8)
CHAOS_TRIALS = 10  # three replicas on PostgreSQL, two kill -9 and a rolling restart each (make test runs 1; ~1 min each)


def run_tests(names: list[str], scale: float, figures: Path, race_trials: int,
              chaos_trials: int = CHAOS_TRIALS) -> tuple[int, float]:
    env = {**os.environ, "PAPERCLUB_ROBUSTNESS_OUT": str(figures), "PAPERCLUB_RACE_TRIALS": str(race_trials),
           "PAPERCLUB_CHAOS_TRIALS": str(chaos_trials)}
    for key, size in SIZES.items():
        env[f"PAPERCLUB_{key}"] = str(max(1, round(size * scale)))
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             *[f"tests/test_{n}.py" for n in names]], cwd=ROOT, env=env)
    return result.returncode, time.monotonic() - started


def summarise(rows: list[dict]) -> dict:
    by = {}
    for row in rows:
        by.setdefault(row["scenario"], []).append(row)
    last = {name: items[-1] for name, items in by.items()}
    out: dict = {}
    if "fuzz" in last:
        f = last["fuzz"]
        out["fuzz"] = {"command lines": f["cases"], "button clicks": last.get("fuzz_buttons", {}).get("cases", 0),
                       "events": last.get("fuzz_events", {}).get("cases", 0),
                       "apologies or errors": f["unexpected_errors"], "per subcommand": f["by_command"]}
    if "faults" in last:
        out["faults injected"] = last["faults"]["injected"]
    for name in ("socket_disconnect", "socket_killed_socket"):
        if name in last:
            out[f"{name.replace('_', ' ')}: seconds without a connection"] = last[name]["reconnect_seconds"]
    if "db_locked" in last:
        d = last["db_locked"]
        out["database locked 3 s"] = {"writes that waited": d["writes_waited"],
                                      "slowest write (s)": d["slowest_write_seconds"],
                                      "search meanwhile (s)": d["search_seconds"]}
    if "crash_ingest" in last:
        c = last["crash_ingest"]
        out["kill -9 during ingest"] = {"trials": c["trials"], "killed mid-work": c["killed_mid_work"],
                                        "left partly written": c["partial_at_kill"],
                                        "re-runs identical to a clean run": c["trials"] - c["differs_from_clean_run"],
                                        "papers lost": c["lost"]}
    if "crash_daily" in last:
        c = last["crash_daily"]
        out["kill -9 during a daily post"] = {"trials": c["trials"], "state at the kill": c["states_at_kill"],
                                              "posted twice": c["posted_twice"], "lost": c["lost"],
                                              "abstract reply missing": c["abstract_reply_missing"]}
    for scenario in sorted(k for k in last if k.startswith("race_")):  # race_<daily|club>_<backend>
        r = last[scenario]
        _, post, backend = (scenario.split("_") + ["", ""])[:3]
        out[f"processes racing on retries of a {post} post ({backend or 'sqlite'})"] = {
            "trials": r["trials"], "processes": r["processes"], "by kind": r["by_kind"],
            "trials with a failed try first": r["trials_with_a_failed_try"],
            "posted twice": r["posted_twice"], "lost": r["lost"]}
    if "load" in last:
        lo = last["load"]
        out["load"] = {"commands": lo["commands"], "during an ingest of": lo["abstracts"],
                       "ack p50 (s)": lo["ack_p50"], "ack p99 (s)": lo["ack_p99"], "ack max (s)": lo["ack_max"],
                       "reply p99 (s)": lo["reply_p99"]}
    chaos = by.get("replicas_chaos", [])
    if chaos:
        total = lambda key: sum(int(r[key]) for r in chaos)  # noqa: E731
        expiry = sorted(d for r in chaos for d in r["handover_after_expiry"])
        sigterm = sorted(d for r in chaos for d in r["handover_after_sigterm"])
        out["replicas (3 on PostgreSQL; kill -9 mid-post, of the lease holder and mid-harvest; rolling restart)"] = {
            "trials": len(chaos), "replicas started": total("replicas_started"), "kill -9": total("kills"),
            "SIGTERM": total("sigterms"),
            "daily posts landed once": total("posts_landed"), "posted twice": total("posts_duplicated"),
            "missing": total("posts_missing"), "rows matching Slack": total("rows_match"),
            "commands": total("commands"), "replied once": total("replied_once"),
            "answered twice": total("answered_twice"), "unanswered": total("unanswered"),
            "interests added twice": total("interests_twice"),
            "reactions sent": total("reactions_sent"), "reactions logged": total("reactions_logged"),
            "envelope deliveries": total("deliveries"), "redeliveries and duplicates": total("redelivered"),
            "lease handovers after kill -9": len(expiry),
            "handover after the lease's expiry (s) median/max": [expiry[len(expiry) // 2], expiry[-1]] if expiry else None,
            "lease handovers after SIGTERM": len(sigterm),
            "released on SIGTERM": total("released_on_sigterm"),
            "handover after the holder exited (s) max": sigterm[-1] if sigterm else None,
            "feed papers expected": total("papers_expected"), "feed papers stored once": total("papers_stored"),
            "feed papers stored twice": total("papers_duplicated"),
            "feed papers whole (vector, announcement)": total("papers_whole"),
            "feed channels' posts landed once": total("feed_posts_landed"),
            "feed posts twice": total("feed_posts_duplicated"), "feed posts missing": total("feed_posts_missing"),
            "feed posts with their feed's new paper": total("feed_posts_fresh"),
            "harvest finished after the kill (s) max": max(r["harvest_finished_after_kill"] for r in chaos)}
        for r in chaos:
            r["lost"] = (int(r["posts_missing"]) + int(r["unanswered"]) + int(r["reactions_sent"])
                         - int(r["reactions_logged"]) + int(r["papers_missing"]) + int(r["feed_posts_missing"]))
        last["replicas_chaos_total"] = {"lost": sum(r["lost"] for r in chaos)}
        last.pop("replicas_chaos", None)
    out["lost"] = sum(int(r.get("lost", 0)) for r in last.values())
    return out


def trust_figures(only: list[str]) -> int:
    """Issue 31's figures (bench/trust.py), printed beside what the issue reported before its fixes."""
    sys.path.insert(0, str(ROOT / "bench"))
    import trust

    figures = trust.run(only)
    (OUT / "robustness-trust.json").write_text(json.dumps(figures, indent=2, ensure_ascii=False) + "\n")
    trust.report(figures)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiply fuzz cases, crash trials, commands")
    parser.add_argument("--trials", type=int, default=RACE_TRIALS,
                        help="trials of the posting race (tests/test_post_race.py)")
    parser.add_argument("--chaos-trials", type=int, default=CHAOS_TRIALS,
                        help="trials of the replicas scenario (tests/test_replicas_chaos.py)")
    parser.add_argument("--only", default=",".join(FILES), help=f"comma-separated subset of {','.join(FILES)}")
    parser.add_argument("--trust", action="store_true",
                        help="only issue 31's figures (bench/trust.py): hostile inputs, forget-me, DST, bad feeds, votes")
    parser.add_argument("--trust-only", default="hostile,forget,dst,feeds,votes", help="a subset of the --trust figures")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    if args.trust:
        return trust_figures([n.strip() for n in args.trust_only.split(",") if n.strip()])
    figures = OUT / "robustness.jsonl"
    figures.unlink(missing_ok=True)
    code, seconds = run_tests([n.strip() for n in args.only.split(",") if n.strip()], args.scale, figures,
                              max(1, args.trials), max(1, args.chaos_trials))
    rows = [json.loads(line) for line in figures.read_text().splitlines()] if figures.exists() else []
    summary = {"scale": args.scale, "tests passed": code == 0, "seconds": round(seconds, 1), **summarise(rows)}
    (OUT / "robustness.json").write_text(json.dumps(summary, indent=2) + "\n")
    print()
    for key, value in summary.items():
        print(f"{key}: {json.dumps(value) if isinstance(value, (dict, list)) else value}")
    return code


if __name__ == "__main__":
    sys.exit(main())
