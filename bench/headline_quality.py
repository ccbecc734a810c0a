"""Headlines of untitled abstracts against the real titles of SciTLDR dev.

    python bench/headline_quality.py --data /work/shared/eval/scitldr/dev.jsonl

Each abstract is parsed without its title; the derived headline is scored with
ROUGE-1/L F against the paper's real title, beside two baselines in the same
run: the first sentence cut to 12 words, and the headline of `--base` (a git
revision, default main: today's parser). It also counts, with
`store.headline.headline_problems`, the headlines that open on a verb fragment,
carry a dangling reference, stop mid-clause or run past 12 words, on the data
and on the 38 seed abstracts.
"""
from __future__ import annotations

import argparse
import atexit
import importlib
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from summary_quality import _load, rouge  # noqa: E402


def _parser_at(revision: str):
    """parse_abstract as store/ is at `revision` (None if git cannot tell): the parser's modules
    (store/parse.py and the modules beside it that it imports) are read from that revision into a
    package of their own, so the baseline never mixes in today's cleaning or headline code."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout
    try:
        files = [f for f in git("ls-tree", "--name-only", revision, "store/").split()
                 if f.endswith(".py") and f != "store/__init__.py"]
        sources = {Path(f).name: git("show", f"{revision}:{f}") for f in files}
    except (OSError, subprocess.CalledProcessError):
        return None
    folder = Path(tempfile.mkdtemp(prefix="headline-base-"))
    atexit.register(shutil.rmtree, folder, True)
    package = folder / "store_at_base"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for name, src in sources.items():
        (package / name).write_text(src, encoding="utf-8")
    sys.path.insert(0, str(folder))
    return importlib.import_module("store_at_base.parse").parse_abstract


def _seed() -> list[str]:
    import re
    from importlib.resources import files
    out = []
    for name in ("iclr2026-a.txt", "iclr2026-b.txt"):
        _, _, rest = files("store.samples").joinpath(name).read_text(encoding="utf-8").partition("\n")
        out += [b.strip() for b in re.split(r"\n\s*\n", rest) if b.strip()]
    return out


def main(argv: list[str] | None = None) -> None:
    from store.headline import headline_problems
    from store.parse import parse_abstract

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, help="SciTLDR-style JSON Lines file with titles")
    ap.add_argument("--base", default="main", help="git revision whose headline is the 'today' row")
    ap.add_argument("--show", type=int, default=0, help="print N headlines with their problems")
    args = ap.parse_args(argv)
    records = [r for r in _load(args.data) if r.get("title")]
    base = _parser_at(args.base)

    rows: dict[str, list[str]] = {"first sentence, 12 words": [], f"today's headline ({args.base})": [],
                                  "ours": []}
    names: dict[str, list[str | None]] = {k: [] for k in rows}
    for rec in records:
        text = " ".join(s.strip() for s in rec["source"])
        rows["first sentence, 12 words"].append(" ".join(rec["source"][0].split()[:12]))
        names["first sentence, 12 words"].append(None)
        if base:
            old = base(text)
            rows[f"today's headline ({args.base})"].append(old.headline)
            names[f"today's headline ({args.base})"].append(old.short_name)
        new = parse_abstract(text)
        rows["ours"].append(new.headline)
        names["ours"].append(new.short_name)

    print(f"{Path(args.data).name}: {len(records)} untitled abstracts against their real titles\n")
    print(f"{'':<30} {'R1':>6} {'RL':>6} {'words':>6} {'flagged':>8}")
    for label, heads in rows.items():
        if not heads:
            print(f"{label:<30} (git revision not found)")
            continue
        scores = [rouge(h, r["title"]) for h, r in zip(heads, records)]
        flagged = [bool(headline_problems(h, n)) for h, n in zip(heads, names[label])]
        print(f"{label:<30} {100 * statistics.fmean(s[0] for s in scores):6.1f} "
              f"{100 * statistics.fmean(s[2] for s in scores):6.1f} "
              f"{statistics.fmean(len(h.split()) for h in heads):6.1f} "
              f"{100 * statistics.fmean(flagged):7.1f}%")
    kinds = Counter(k for h, n in zip(rows["ours"], names["ours"]) for k in headline_problems(h, n))
    print(f"\nours, problems on {Path(args.data).name}: {dict(kinds) or 'none'}")
    seeds = [parse_abstract(a) for a in _seed()]
    bad = [(p.headline, headline_problems(p.headline, p.short_name)) for p in seeds]
    bad = [b for b in bad if b[1]]
    print(f"ours, seed abstracts flagged: {len(bad)}/{len(seeds)}")
    for h, why in bad:
        print(f"  {h}  <- {', '.join(why)}")
    for h, n, r in list(zip(rows["ours"], names["ours"], records))[: args.show]:
        print(f"{headline_problems(h, n) or ''}  {h}  ||  {r['title']}")


if __name__ == "__main__":
    main()
