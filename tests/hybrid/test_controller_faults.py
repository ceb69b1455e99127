"""Backend faults during a run (cases file, case 12): the planner falls back, robots keep moving."""

from __future__ import annotations

import pytest

from marlm.eval.trace import read_trace
from marlm.hybrid.controller import run, run_config
from marlm.hybrid.planner import LLMPlanner
from marlm.llm.backends import OpenAICompatible


@pytest.mark.parametrize("mode", ["hang", "500", "whitespace", "refused"])
def test_backend_fault_falls_back_to_the_rule_and_robots_keep_moving(
    tmp_path, fault_server, refused_url, mode
):
    url = refused_url if mode == "refused" else fault_server.base(mode)
    model = OpenAICompatible(url, timeout_s=1.0, max_retries=0)
    config = run_config(
        steps=400, tick_ms=5, planner="llm", executor="greedy", shield=True, gif=False, seed=1
    )
    result = run(config, tmp_path / mode, planner=LLMPlanner(model))
    m = result.metrics
    # The control loop never stalled: it ran to the time limit or until every order was delivered.
    assert m["steps"] == 400 or m["delivered"] == m["orders_total"]
    assert m["collisions"] == 0
    assert m["llm_fallbacks"] >= 1 and m["llm_fallbacks"] == m["llm_calls"]
    assert m["delivered"] > 0  # the rule's plans were executed

    events = read_trace(result.files["trace"]).events
    calls = [e for e in events if e["type"] == "llm_call"]
    assert calls and all(not c["valid"] and c["fallback"] for c in calls)
    reason = "timeout" if mode in ("hang", "whitespace") else "backend error"
    assert all(c["error"].startswith(reason + ":") for c in calls), [c["error"] for c in calls]
    # Robots moved while the first request was in flight: steps went on in between.
    first_plan = next(e for e in events if e["type"] == "plan")
    if mode == "hang":
        assert first_plan["step"] > first_plan["step_requested"]
    kinds = {f["kind"] for f in events if f["type"] == "failure"} - {"deadlock_break"}
    assert kinds == {reason.replace(" ", "_")}
