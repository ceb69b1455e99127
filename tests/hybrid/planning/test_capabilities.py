"""Planner and backend abilities are declared protocols, checked once; not found by getattr."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

from fixed_triage import FixedTriage
from marlm.hybrid.planning.capabilities import PlannerAbilities, planner_model, prompt_version
from marlm.hybrid.planning.planner import LLMPlanner, RulePlanner
from marlm.hybrid.planning.triage import TriagePlanner
from marlm.llm.backends import Cancellable, ChatModel, Embedder, Guarded, OpenAICompatible, Scorer
from marlm.llm.breaker import CircuitBreaker, FakeClock
from marlm.llm.triage import MODE_CLASSES, BatchMode, Triage

SRC = Path(__file__).resolve().parents[3] / "src" / "marlm"


def test_at_most_seventeen_getattr_sites_in_hybrid_and_llm_each_saying_why():
    # 5 until the reading order (a triaging planner's optional view, deadlines and first
    # readings) and the HTTP backend's total deadline (httpx's private transport) came; each site
    # says why, and the count may only go down.
    sites = []
    for path in sorted([*(SRC / "hybrid").rglob("*.py"), *(SRC / "llm").rglob("*.py")]):
        lines = path.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            if re.search(r"\b(getattr|hasattr)\(", line.split("#")[0]):
                said = "#" in line or lines[i - 1].lstrip().startswith("#")
                sites.append((path.relative_to(SRC), i + 1, said))
    assert len(sites) <= 17, sites
    assert all(said for *_, said in sites), [s for s in sites if not s[2]]


def test_the_rule_planner_has_no_optional_ability():
    assert PlannerAbilities.of(RulePlanner()) == PlannerAbilities()
    assert prompt_version(RulePlanner()) is None and planner_model(RulePlanner()) is None


def test_the_triage_planner_declares_what_the_scheduler_reads():
    planner = TriagePlanner(FixedTriage({"n": "urgent"}))
    able = PlannerAbilities.of(planner)
    assert able.triaging and able.classifies and able.preempts
    assert able.precedence == planner.shelf_precedence and able.cancel == planner.cancel
    # the stand-in classifier has no model: no backend, no breaker
    assert (able.model, able.breaker, able.backend) == (None, None, "")
    assert prompt_version(planner) == "fixed-v0"


def test_an_llm_planner_on_a_server_exposes_its_model_and_breaker_without_a_call():
    clock = FakeClock()
    breaker = CircuitBreaker(3, 30.0, clock=clock)
    model = OpenAICompatible("http://127.0.0.1:9/v1", "m", breaker=breaker, clock=clock)
    able = PlannerAbilities.of(LLMPlanner(model))
    assert not able.triaging and not able.preempts and able.precedence is None
    assert able.model is model and able.breaker is breaker
    assert able.backend == "openai:m@http://127.0.0.1:9/v1"
    assert all(isinstance(model, p) for p in (ChatModel, Scorer, Cancellable, Guarded))
    # /v1/embeddings: a server that serves none is found at warm-up (the probe then uses batch)
    assert isinstance(model, Embedder)


class _ChatOnly:
    """A backend that can only chat (no hidden states, no scores): what the probe cannot use."""

    name = "chat-only"

    def chat(self, messages, **kwargs):
        raise NotImplementedError


def test_a_backend_without_hidden_states_gets_the_batch_mode_class():
    # A server is an Embedder (/v1/embeddings); one that serves none is found at warm-up
    # (tests/llm/test_server_embed.py). A backend that cannot embed at all is known at once.
    model = _ChatOnly()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # said once per model, maybe before
        tri = Triage(model, mode="probe", examples=SRC / "data/triage/examples.jsonl")
    assert tri.mode == "batch" and isinstance(tri._mode, BatchMode)
    assert list(MODE_CLASSES) == ["generate", "score", "calibrated", "batch", "probe"]
