"""Compare two run traces event by event, ignoring wall-clock fields.

    python tests/trace_diff.py RUN_A/trace.jsonl RUN_B/trace.jsonl

Exit 0 and print ``identical apart from timings (N events)`` when the traces agree, field order
included, after :func:`strip_timings`; else print the first differing event of each and exit 1. Used to check
that a refactor leaves ``marlm demo --sync --seed 0`` writing the same trace.

Timing fields are the keys that measure wall time (``latency_ms``, ``latency_s``, ``wall_s``,
``waited_ms`` and any key ending in ``_ms`` or ``_s``); JSON text nested in a string field (the
``raw`` answer of a triage call records its latency) is parsed and stripped the same way.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def moves(events):
    """What the robots and orders did, and what each plan changed: everything but the records
    of model calls (``llm_call``, their ``failure`` and ``circuit_open``) and wall times."""
    out = []
    for e in events:
        if e["type"] == "step":
            out.append(("step", e["step"], e["actions"], e["positions"], e["rewards"]))
        elif e["type"] in ("order", "idle"):
            out.append(tuple(sorted((k, str(v)) for k, v in e.items() if k not in ("v", "t"))))
        elif e["type"] == "plan" and (e["applied"] or e["preempted"]):
            out.append(("plan", e["step"], str(e["applied"]), str(e["preempted"])))
    return out


def is_timing(key: str) -> bool:
    return key.endswith(("_ms", "_s")) or key in ("seconds", "elapsed")


def strip_timings(value: Any) -> Any:
    """``value`` without wall-clock fields, recursively (nested JSON strings included)."""
    if isinstance(value, dict):
        return {k: strip_timings(v) for k, v in value.items() if not is_timing(k)}
    if isinstance(value, list):
        return [strip_timings(v) for v in value]
    if isinstance(value, str) and value[:1] in "{[":
        try:
            return {"json": strip_timings(json.loads(value))}
        except ValueError:
            return value
    return value


def load(path: str | Path) -> list[Any]:
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return [strip_timings(json.loads(line)) for line in lines if line.strip()]


def diff(a: str | Path, b: str | Path) -> str | None:
    """None when the traces agree apart from timings, else a description of the first difference."""
    # Compared as JSON text (keys in the order written), so a change of field order counts.
    ea, eb = [json.dumps(e) for e in load(a)], [json.dumps(e) for e in load(b)]
    for i, (x, y) in enumerate(zip(ea, eb, strict=False)):
        if x != y:
            return f"event {i} differs:\n  {x[:2000]}\n  {y[:2000]}"
    if len(ea) != len(eb):
        return f"{len(ea)} events against {len(eb)}"
    return None


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__)
        return 2
    problem = diff(*argv)
    if problem is None:
        print(f"identical apart from timings ({len(load(argv[0]))} events)")
        return 0
    print(problem)
    return 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
