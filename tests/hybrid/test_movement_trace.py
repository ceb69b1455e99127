"""The movement path pinned: the trace of short rule-planner runs, timing masked, is the one that
main wrote before the executor and rule-layer seam was reshaped (scores in, choice out).

Each case runs the controller with one executor and one rule layer (dwell points on, so idle
robots are scored by the dwell executor) and compares the SHA-256 of the masked trace
(``tests/trace_diff.py``'s :func:`strip_timings`) with the digest recorded from main at commit
04c11c5. When a change is meant to alter movement, record the new digests and say why; to see
what changed, run ``python tests/trace_diff.py OLD/trace.jsonl NEW/trace.jsonl``.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

from marlm.hybrid.build import build_planner, cached_policy
from marlm.hybrid.controller import run, run_config

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from trace_diff import load  # noqa: E402

#: (executor, rule layer, dwell) -> (events, SHA-256 of the masked trace) from main at 04c11c5.
PINNED = {
    ("rl", "pibt", "points"): (153, "0b2a12ba449bad1915c974fd60aba60e82f883c0b4ef29a0aa4f5f83ddc83371"),
    ("rl", "local", "points"): (155, "89323af8aef754a7eabfa84076fad4f88e1c7d77d6d38009464f6bf90b4038f3"),
    ("rl", "none", "points"): (179, "3890bb10801207b927b0100dcfe31a67e77bdf58940b557f36b11c54bbed013c"),
    ("greedy", "pibt", "none"): (158, "42e75341c59ebd2b25e2c6cdb340d694f3bf4abf06e721037e910dddafd39722"),
    ("random", "local", "reserve"): (147, "75f9772d535571f12d7cbb203981193a9e325303543601b25a501157b343c9ab"),
}  # fmt: skip


def masked_digest(trace: Path) -> tuple[int, str]:
    """``(events, sha256)`` of the trace with every timing field removed."""
    events = load(trace)
    text = "\n".join(json.dumps(e) for e in events)
    return len(events), hashlib.sha256(text.encode()).hexdigest()


def movement_run(tmp_path: Path, executor: str, rule: str, dwell: str) -> Path:
    config = run_config(
        layout="small", n_orders=12, steps=120, seed=3, planner="rule", executor=executor,
        shield=rule != "none", shield_rule="pibt" if rule == "none" else rule, dwell=dwell,
        sync_planner=True, gif=False,
    )  # fmt: skip
    policy = cached_policy()[0] if executor == "rl" else None
    result = run(config, tmp_path / "run", planner=build_planner("rule"), policy=policy)
    return result.out_dir / "trace.jsonl"


@pytest.mark.parametrize(("executor", "rule", "dwell"), sorted(PINNED))
def test_the_movement_trace_is_the_one_main_wrote(tmp_path, warm_cache, executor, rule, dwell):
    trace = movement_run(tmp_path, executor, rule, dwell)
    assert masked_digest(trace) == PINNED[executor, rule, dwell]


if __name__ == "__main__":  # print the digests of this checkout: python tests/hybrid/test_...py
    import tempfile

    for key in sorted(PINNED):
        with tempfile.TemporaryDirectory() as d:
            print(key, masked_digest(movement_run(Path(d), *key)))
