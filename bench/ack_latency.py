"""Ack and reply latency of the real `paperclub run` process, driven through the fake Slack.

    python bench/ack_latency.py [--sequential 200] [--concurrent 40] [--bursts 5] [--db FILE] [--json]
        [--query-encoder torch,onnx] [--socket-mode builtin] [--refreshes 3]
        [--refresh-adapters builtin,websocket_client,aiohttp,websockets]
        [--replicas 3 [--pg-url postgresql://postgres@127.0.0.1:5432]]

Starts the fake Slack (tests/fake_slack.py) and `python -m bot run` against it,
with the bundled ICLR abstracts (copied from --db, or loaded with --load-samples
into a fresh file). Every command is a different `/paper search ...` so the
query-embedding cache never helps. Measures, per command:
  ack    envelope sent -> ack received (the fake timestamps both);
  reply  envelope sent -> the reply POSTed to the response_url (polled every 1 ms).
Prints p50/p95/p99/max for 200 sequential commands and 5 bursts of 40 concurrent ones (pooled), once per query
encoder (PAPERCLUB_QUERY_ENCODER: torch and onnx by default, in one run, with the ratio).
Then the Socket Mode ack delay across `disconnect` refreshes (bench/socket_refresh.py):
the bot itself after its burst, and each slack_sdk adapter with a minimal app.
--replicas N: the same commands against one replica and then N replicas on one PostgreSQL
(the fake Slack spreads envelopes over the connections as Slack does), with the ratio.
Targets: ack p99 < 100 ms, search reply p95 < 300 ms.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

sys.path.insert(0, str(ROOT / "bench"))

from fake_slack import start_fake_slack  # noqa: E402
from socket_refresh import ADAPTERS, ack_stats, measure_adapter, print_table, refresh_ack_delays  # noqa: E402

BOT_TOKEN = "xoxb-bench-0000-BENCHBOTTOKEN"
APP_TOKEN = "xapp-1-A1-0000-BENCHAPPTOKEN"

TOPICS = [
    "temporal video grounding", "speculative decoding", "mixture of experts routing",
    "gene expression from DNA", "hallucination in vision language models", "continual learning",
    "diffusion language models", "video tokenization", "hyperparameter transfer", "LLM unlearning",
    "curriculum for pretraining data", "medical visual question answering", "speech emotion",
    "embodied planning with LLMs", "instruction following", "model compression order",
    "subliminal bias in distillation", "identity preserving image generation", "video summarization",
    "urban scene understanding", "human behaviour traits", "new word invention", "video motion",
    "hybrid Mamba transformer", "reasoning with reinforcement learning", "video captioning benchmark",
    "controllable video generation", "long video understanding", "compositional video generation",
    "efficient LLM serving", "sequence generation output space", "LLM evaluation",
]
ANGLES = ["", "benchmark", "efficient", "theory", "survey of", "failure modes", "at scale"]


def queries(n: int) -> list[str]:
    """n distinct search phrases (so no reply comes from the query cache)."""
    out = []
    for i in range(n):
        topic, angle = TOPICS[i % len(TOPICS)], ANGLES[(i // len(TOPICS)) % len(ANGLES)]
        rnd = i // (len(TOPICS) * len(ANGLES))
        out.append(" ".join(x for x in (angle, topic, f"v{rnd}" if rnd else "") if x))
    return out


def start_bot(fake, db: str | Path, log: Path, load_samples: bool, extra_env: dict | None = None) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLACK_", "PAPERCLUB_")) and "PROXY" not in k.upper()}
    env.update(SLACK_BOT_TOKEN=BOT_TOKEN, SLACK_APP_TOKEN=APP_TOKEN, SLACK_API_URL=fake.api_url,
               PAPERCLUB_DB=str(db), LOG_LEVEL="INFO", PYTHONUNBUFFERED="1", **(extra_env or {}))
    args = [sys.executable, "-m", "bot", "run"] + (["--load-samples"] if load_samples else [])
    with open(log, "w") as out:
        proc = subprocess.Popen(args, cwd=log.parent, env=env, stdout=out, stderr=subprocess.STDOUT)
    started = time.monotonic()
    while "connected to Slack" not in log.read_text(errors="replace"):
        if proc.poll() is not None:
            sys.exit(f"the bot exited during start-up:\n{log.read_text()[-3000:]}")
        if time.monotonic() - started > 300:
            proc.kill()
            sys.exit("the bot did not connect within 300 s")
        time.sleep(0.1)
    print(f"bot connected after {time.monotonic() - started:.1f} s (process start to Socket Mode)",
          file=sys.stderr)
    return proc


class ReplyWatcher:
    """Polls the fake's response_urls every millisecond and notes when each first got a reply."""

    def __init__(self, fake):
        self.fake = fake
        self.pending: dict[str, float] = {}  # url -> send time
        self.done: dict[str, float] = {}  # url -> latency
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def expect(self, url: str, sent: float) -> None:
        with self.lock:
            self.pending[url] = sent

    def _run(self) -> None:
        while not self.stop.is_set():
            with self.lock:
                items = list(self.pending.items())
            for url, sent in items:
                if self.fake.responses(url):
                    now = time.monotonic()
                    with self.lock:
                        self.pending.pop(url, None)
                        self.done[url] = now - sent
            time.sleep(0.001)

    def wait(self, urls: list[str], timeout: float = 60) -> list[float]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if all(u in self.done for u in urls):
                    return [self.done[u] for u in urls]
            time.sleep(0.005)
        raise TimeoutError(f"{sum(u not in self.done for u in urls)} replies missing after {timeout} s")


def send(fake, text: str) -> tuple[str, str, float]:
    url = fake.new_response_url()
    sent = time.monotonic()
    # `search` spelled out: a phrase starting "survey of" was the overview command (its alias),
    # and one starting with another word a search with a "not a command" note.
    envelope = fake.slash_command(f"search {text}", response_url=url)
    return envelope, url, sent


def run_sequential(fake, watcher: ReplyWatcher, texts: list[str]) -> tuple[list[float], list[float]]:
    acks, replies = [], []
    for text in texts:
        envelope, url, sent = send(fake, text)
        watcher.expect(url, sent)
        acks.append(fake.wait_ack(envelope, timeout=10)[1])
        replies.append(watcher.wait([url])[0])
    return acks, replies


def run_concurrent(fake, watcher: ReplyWatcher, texts: list[str]) -> tuple[list[float], list[float]]:
    sent = []
    for text in texts:  # sending is ~50 us each: all 40 are in flight together
        envelope, url, at = send(fake, text)
        watcher.expect(url, at)
        sent.append((envelope, url))
    acks = [fake.wait_ack(e, timeout=10)[1] for e, _ in sent]
    replies = watcher.wait([u for _, u in sent])
    return acks, replies


def stats(values: list[float]) -> dict:
    ms = np.array(values) * 1000
    return {"n": len(ms), "p50": float(np.percentile(ms, 50)), "p95": float(np.percentile(ms, 95)),
            "p99": float(np.percentile(ms, 99)), "max": float(ms.max())}


def bench_one(args, encoder: str, texts: list[str], *, replicas: int = 1, db_url: str | None = None) -> dict:
    """`paperclub run` with this query encoder, `replicas` processes on one database (db_url, else a
    fresh SQLite file): sequential and concurrent commands, then refreshes (one replica only)."""
    tmp = Path(tempfile.mkdtemp(prefix="paperclub-bench-"))
    db = db_url or tmp / "bench.db"
    if args.db and not db_url:
        shutil.copyfile(args.db, db)
    extra = {"PAPERCLUB_QUERY_ENCODER": encoder, "PAPERCLUB_SOCKET_MODE": args.socket_mode}
    if args.onnx_dir:
        extra["PAPERCLUB_ONNX_DIR"] = str(args.onnx_dir)
    fake = start_fake_slack()
    if replicas > 1:  # Slack's way with several connections: each envelope to one of them
        fake.spread(redeliver_after=2.5, duplicate=0.0)
    started = time.monotonic()
    procs = [start_bot(fake, db, tmp / "bot.log", load_samples=not args.db, extra_env=extra)]
    connected_s = time.monotonic() - started
    procs += [start_bot(fake, db, tmp / f"bot{i}.log", load_samples=False,
                        extra_env={**extra, "PAPERCLUB_REPLICA_ID": f"r{i}"}) for i in range(2, replicas + 1)]
    watcher = ReplyWatcher(fake)
    refresh = None
    try:
        first_ack, first_reply = run_sequential(fake, watcher, [texts[0]])
        seq = run_sequential(fake, watcher, texts[1 : args.sequential])
        seq = ([*first_ack, *seq[0]], [*first_reply, *seq[1]])
        con = ([], [])
        for b in range(args.bursts):  # each burst: args.concurrent new commands at once, then quiet
            start = args.sequential + b * args.concurrent
            acks, replies = run_concurrent(fake, watcher, texts[start : start + args.concurrent])
            con[0].extend(acks)
            con[1].extend(replies)
            time.sleep(0.5)
        if args.refreshes and replicas == 1:
            delays, lost, gap = refresh_ack_delays(fake, refreshes=args.refreshes)
            refresh = {"adapter": f"paperclub run ({args.socket_mode})", **ack_stats(delays), "lost": lost,
                       "gap": gap}
        spread = sorted({conn for _, conn, _ in fake.deliveries()}) if replicas > 1 else [0]
    finally:
        watcher.stop.set()
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
        fake.close()
    log = (tmp / "bot.log").read_text(errors="replace")
    leaked = any(t in f.read_text(errors="replace") for f in tmp.glob("bot*.log")
                 for t in ("BENCHBOTTOKEN", "BENCHAPPTOKEN"))
    shutil.rmtree(tmp, ignore_errors=True)
    # What the bot really used: the ONNX session, or torch after a logged fallback.
    used = "onnx" if "query encoder: ONNX Runtime" in log else "torch"
    return {
        "query_encoder": encoder, "used": used, "connected_s": connected_s, "replicas": replicas,
        "connections_used": len(spread),
        "sequential": {"ack_ms": stats(seq[0]), "reply_ms": stats(seq[1])},
        "concurrent": {"ack_ms": stats(con[0]), "reply_ms": stats(con[1])},
        "first_command_ms": {"ack": first_ack[0] * 1000, "reply": first_reply[0] * 1000},
        "refresh": refresh, "token_in_log": leaked,
    }


def bench_replicas(args, encoder: str, texts: list[str]) -> list[dict]:
    """One replica, then args.replicas, on one PostgreSQL database (a fresh schema each), same commands."""
    from search_quality import PostgresDatabase

    pg = PostgresDatabase(args.pg_url)
    try:
        return [bench_one(args, encoder, texts, replicas=n, db_url=pg.url(f"replicas{n}"))
                for n in (1, args.replicas)]
    finally:
        pg.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sequential", type=int, default=200)
    ap.add_argument("--concurrent", type=int, default=40)
    ap.add_argument("--bursts", type=int, default=5,
                    help="bursts of --concurrent commands, one after another; their figures are pooled "
                         "(one burst's p95 is its 38th reply: it varied by 50 ms from run to run)")
    ap.add_argument("--db", type=Path, default=None, help="a seeded database to copy (default: load samples)")
    ap.add_argument("--query-encoder", default="torch,onnx",
                    help="comma-separated PAPERCLUB_QUERY_ENCODER values, one bot run each (default: both)")
    ap.add_argument("--onnx-dir", type=Path, default=os.environ.get("PAPERCLUB_ONNX_DIR") or None,
                    help="PAPERCLUB_ONNX_DIR for the bot (default: its own, under the XDG cache)")
    ap.add_argument("--socket-mode", default="builtin", help="PAPERCLUB_SOCKET_MODE for the bot runs")
    ap.add_argument("--refreshes", type=int, default=3,
                    help="disconnect refreshes measured per bot run and per adapter (0: none)")
    ap.add_argument("--refresh-adapters", default=",".join(ADAPTERS),
                    help="slack_sdk Socket Mode adapters measured across a refresh with a minimal app")
    ap.add_argument("--replicas", type=int, default=1,
                    help="also measure this many replicas on one PostgreSQL against one replica there "
                         "(first query encoder; the ratio is the figure)")
    ap.add_argument("--pg-url", default="postgresql://postgres@127.0.0.1:5432",
                    help="PostgreSQL server for --replicas (a throwaway database is made there)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args()

    encoders = [e.strip() for e in args.query_encoder.split(",") if e.strip()]
    texts = queries(args.sequential + args.concurrent * args.bursts)
    runs = []
    for encoder in encoders:
        runs.append(bench_one(args, encoder, texts))
        print(f"{encoder}: done", file=sys.stderr)
    scaled = bench_replicas(args, encoders[0], texts) if args.replicas > 1 else []
    adapters = []
    if args.refreshes:
        adapters = [measure_adapter(a, refreshes=args.refreshes, window=4.0, interval=0.05)
                    for a in args.refresh_adapters.split(",") if a]
    result = {"runs": runs, "replicas": scaled, "refresh_adapters": adapters, "load_average": os.getloadavg()}
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"{'':30}{'n':>5}{'p50':>9}{'p95':>9}{'p99':>9}{'max':>9}   (ms)")
    for run in runs:
        label = run["query_encoder"] + ("" if run["used"] == run["query_encoder"] else f"->{run['used']}")
        for mode in ("sequential", "concurrent"):
            for kind in ("ack_ms", "reply_ms"):
                st = run[mode][kind]
                name = f"{label} {mode} {kind[:-3]}"
                print(f"{name:30}{st['n']:>5}{st['p50']:>9.1f}{st['p95']:>9.1f}{st['p99']:>9.1f}{st['max']:>9.1f}")
        print(f"{label}: first command ack {run['first_command_ms']['ack']:.1f} ms, reply "
              f"{run['first_command_ms']['reply']:.1f} ms; start to connected {run['connected_s']:.1f} s; "
              f"token in log: {run['token_in_log']}")
    if len(runs) == 2:
        a, b = runs
        ratio = b["concurrent"]["reply_ms"]["p95"] / max(a["concurrent"]["reply_ms"]["p95"], 1e-9)
        print(f"concurrent reply p95 {b['query_encoder']}/{a['query_encoder']}: {ratio:.2f}")
    if scaled:
        one, many = scaled
        print(f"\nPostgreSQL, {args.bursts} bursts of {args.concurrent} concurrent commands ({encoders[0]}): one replica against "
              f"{many['replicas']} (envelopes reached {many['connections_used']} connections)")
        label = f"{many['replicas']} replicas"
        print(f"{'':30}{'1 replica':>11}{label:>12}{'ratio':>8}")
        for kind, pct in (("ack_ms", "p99"), ("reply_ms", "p95")):
            a, b = one["concurrent"][kind][pct], many["concurrent"][kind][pct]
            print(f"{'concurrent ' + kind[:-3] + ' ' + pct:30}{a:>11.1f}{b:>12.1f}{b / max(a, 1e-9):>8.2f}")
    rows = [r["refresh"] for r in runs if r["refresh"]]
    for run, row in zip([r for r in runs if r["refresh"]], rows):
        row["adapter"] += f" [{run['query_encoder']}]"
    if rows or adapters:
        print_table(rows + adapters)
    print(f"targets: ack p99 < 100 ms, search reply p95 < 300 ms; load average "
          f"{', '.join(f'{x:.1f}' for x in result['load_average'])}")


if __name__ == "__main__":
    main()
