"""No robot waits for the model: with a model that never answers, or a backend that fails every
call, a run's robots, orders and plans are the rule planner's step for step; idle robot-steps
are counted by cause, and none waits for the model. The models here are fault injectors."""

from __future__ import annotations

import threading

import pytest

from faultserver import DownModel
from marlm.eval.trace import read_trace
from marlm.hybrid.controller import run, run_config
from marlm.hybrid.planning.planner import LLMPlanner, RulePlanner
from marlm.hybrid.planning.team import TeamPlanner
from marlm.hybrid.planning.triage import TriagePlanner
from marlm.llm.errors import BackendClosed
from marlm.llm.triage import Triage
from trace_diff import moves


class SilentModel:
    """Fault injector: every call (chat or embed) hangs until the run ends and cancels it."""

    name = "silent"

    def __init__(self) -> None:
        self.released = threading.Event()
        self.calls = 0

    def cancel(self, timeout_s: float, thread=None) -> bool:
        self.released.set()
        return True

    def _hang(self):
        self.calls += 1
        self.released.wait(600)  # a hang guard only: the run's end releases it
        raise BackendClosed("cancelled at the end of the run")

    def chat(self, messages, **kwargs):
        self._hang()

    def embed(self, texts):
        self._hang()


def _run(tmp_path, name, planner, *, sync=False):
    config = run_config(
        steps=160, tick_ms=0, planner="rule" if planner is None else "triage", executor="greedy",
        gif=False, seed=3, sync_planner=sync,
    )  # fmt: skip
    result = run(config, tmp_path / name, planner=planner or RulePlanner())
    return result, read_trace(result.files["trace"]).events


@pytest.fixture(scope="module")
def rule_run(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("rule"), "rule", None, sync=True)


def _triage(model):
    return TriagePlanner(Triage(model, mode="probe"))


@pytest.mark.parametrize(
    "name, make",
    [
        ("triage-silent", lambda: _triage(SilentModel())),
        ("triage-down", lambda: _triage(DownModel())),
        ("llm-silent", lambda: LLMPlanner(SilentModel())),
        ("llm-down", lambda: LLMPlanner(DownModel())),
        ("team-down", lambda: TeamPlanner(DownModel())),
    ],
)
def test_without_the_model_the_run_is_the_rule_planners_step_for_step(
    tmp_path, rule_run, name, make
):
    planner = make()
    result, events = _run(tmp_path, name, planner)
    rule_result, rule_events = rule_run
    assert moves(events) == moves(rule_events)
    assert result.metrics["delivered"] == rule_result.metrics["delivered"] == 24
    assert result.metrics["idle_robot_steps"] == rule_result.metrics["idle_robot_steps"]
    assert result.metrics["idle_robot_steps"]["waiting_for_model"] == 0
    model = getattr(planner, "model", None) or planner.triage.model
    assert model.calls >= 1  # the model was asked, and cost no robot a step


def test_idle_robot_steps_by_cause_on_the_rule_run(rule_run):
    result, events = rule_run
    idle = [e for e in events if e["type"] == "idle"]
    counts = result.metrics["idle_robot_steps"]
    assert counts == {"waiting_for_model": 0, "no_order": 43, "blocked": 0}
    assert sum(len(e.get("no_order", [])) for e in idle) == 43
