"""The movement path pinned: every robot's moves and every order's life in short rule-planner
runs are the ones main made before the executor and rule-layer seam was reshaped (scores in,
choice out), the planning made never to wait for the model, and the trace records typed.

Each case runs the controller with one executor and one rule layer (dwell points on, so idle
robots are scored by the dwell executor) and compares the SHA-256 of its movement (the ``step``
events' proposed and chosen actions, positions, overrides, collisions and rewards, and the
``order`` events, timing masked) with the digest of the same runs of main at commit 04c11c5.
Other events may gain fields (``run_start`` names the model, ``idle`` counts idle robots, a
``delivered`` event names its station)
without touching movement. When a change is meant to alter movement, record the new digests and
say why; to see what changed, run ``python tests/trace_diff.py OLD/trace.jsonl NEW/trace.jsonl``.
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

#: (executor, rule layer, dwell) -> (movement events, SHA-256 of them) from main at 04c11c5.
PINNED = {
    ("rl", "pibt", "points"): (140, "5f8b5a19b96abd2fcfd62eb49464cce1db79b46cf6b50bbc75a251eca1cd0fff"),
    ("rl", "local", "points"): (139, "db41df8d06d9bcf01acc8f10afd5b52c8721f5e390d7a7c7056f2667e681592f"),
    ("rl", "none", "points"): (166, "e48b5dfc3634de03f258a15f798dcc348cbc5a2283a8b529f42f4905c52972fa"),
    ("greedy", "pibt", "none"): (145, "5ed335bc36fd2a410e5099c2875848add81a17c6806c68df441a52f61d067122"),
    ("random", "local", "reserve"): (141, "73b974e69337b718f8ee7c6c8e05252bbd194cb85e10b311b9b79d525409c0c0"),
}  # fmt: skip

#: The fields of a ``step`` event that say how robots moved.
MOVEMENT = ("step", "proposed", "actions", "positions", "overrides", "collisions", "rewards")


def masked_digest(trace: Path) -> tuple[int, str]:
    """``(events, sha256)`` of the trace's movement: the ``step`` events' :data:`MOVEMENT`
    fields and the ``order`` events, every timing field removed."""
    kept = []
    for event in load(trace):
        if event["type"] == "step":
            kept.append({k: event[k] for k in MOVEMENT})
        elif event["type"] == "order":  # a delivery's station name is new, not movement
            kept.append({k: v for k, v in event.items() if k != "station"})
    text = "\n".join(json.dumps(e, sort_keys=True) for e in kept)
    return len(kept), hashlib.sha256(text.encode()).hexdigest()


def movement_run(tmp_path: Path, executor: str, rule: str, dwell: str) -> Path:
    config = run_config(
        layout="small", n_orders=12, steps=120, seed=3, planner="rule", executor=executor,
        shield=rule != "none", shield_rule="pibt" if rule == "none" else rule, dwell=dwell,
        sync_planner=True, tick_ms=0, gif=False,
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
