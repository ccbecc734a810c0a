"""Scale and figures for the robustness tests (fuzz, faults, crashes, load).

`make test` runs them at a size that fits CI; `bench/robustness.py` runs the
same tests with larger sizes (through the environment) and reads back the
figures they record here.
"""
from __future__ import annotations

import json
import math
import os
import time

OUT_VAR = "PAPERCLUB_ROBUSTNESS_OUT"  # a JSON Lines file the figures are appended to (unset: nowhere)


def scale(name: str, default: int) -> int:
    """A size knob: PAPERCLUB_<NAME> from the environment, else the CI default."""
    return int(os.environ.get(f"PAPERCLUB_{name}", default))


def record(scenario: str, **figures) -> None:
    """Append one scenario's figures for bench/robustness.py (a no-op in plain `make test`)."""
    path = os.environ.get(OUT_VAR)
    if not path:
        return
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps({"scenario": scenario, "at": time.time(), **figures}) + "\n")


def percentile(values, q: float) -> float:
    """The q-th percentile (0-100) by nearest rank; 0.0 for no values."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    rank = max(1, min(len(ordered), math.ceil(q / 100 * len(ordered))))
    return ordered[rank - 1]
