"""Backend cases 1-6 (cases/llm-backend.md), the circuit breaker, and typed backend errors.

A scripted HTTP server (tests/faultserver.py) injects the exact faults; case 4 runs against our
real ``marlm llm serve`` server. Retry waits and cool-downs read an injected :class:`FakeClock`,
so nothing here depends on wall-clock speed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from marlm.errors import InputError
from marlm.llm.actions import parse_action, validate_answer
from marlm.llm.agent import ToolAgent
from marlm.llm.backends import OpenAICompatible, make_backend, retry_after_s
from marlm.llm.breaker import CircuitBreaker, FakeClock
from marlm.llm.errors import (
    BackendError,
    BackendHTTPError,
    CircuitOpen,
    ContextLengthExceeded,
    EndpointNotFound,
)
from marlm.llm.reward import SCORE_SCHEMA
from marlm.llm.server import map_max_completion_tokens

HELLO = [{"role": "user", "content": "Rate this: the robot reached its goal."}]
FINISH = '{"type": "finish", "answer": "ok"}'


# ----------------------------------------------------------------------------- case 1


def test_context_length_error_does_not_cost_the_structured_output(fault_server):
    mode = "ctxlen~case1"
    model = OpenAICompatible(fault_server.base(mode), timeout_s=5, max_retries=2)
    with pytest.raises(ContextLengthExceeded, match="context") as e:
        model.chat(HELLO, schema=SCORE_SCHEMA)
    assert isinstance(e.value, BackendError)  # a backend-kind failure for the planner
    r = model.chat(HELLO, schema=SCORE_SCHEMA)
    bodies = fault_server.bodies(mode)
    assert len(bodies) == 2  # the context-length error was not retried, nor another shape tried
    assert [b["response_format"]["type"] for b in bodies] == ["json_schema", "json_schema"]
    assert r.structured == "json_schema" and model.structured_mode == "json_schema"
    assert model.breaker.state().failures == 0  # says nothing about the server's health


# ----------------------------------------------------------------------------- case 2


def test_429_waits_as_retry_after_says_then_answers(fault_server):
    mode = "ratelimit~case2"
    clock = FakeClock()
    model = OpenAICompatible(fault_server.base(mode), timeout_s=5, max_retries=2, clock=clock)
    r = model.chat(HELLO)
    assert json.loads(r.text) == json.loads(FINISH)
    assert clock.sleeps == [1.0]  # exactly the header's wait, not the 0.25 s backoff
    assert fault_server.count(mode) == 2


def test_a_retry_after_past_the_calls_timeout_fails_at_once(fault_server):
    mode = "ratelimit_long~case2"
    clock = FakeClock()
    model = OpenAICompatible(fault_server.base(mode), timeout_s=5, max_retries=2, clock=clock)
    with pytest.raises(BackendHTTPError, match="120.00 s, past the call's 5.0 s timeout") as e:
        model.chat(HELLO)
    assert e.value.status == 429
    assert clock.sleeps == [] and fault_server.count(mode) == 1


def test_retry_after_header_forms():
    assert retry_after_s({"retry-after": "1"}) == 1.0
    assert retry_after_s({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    date = "Wed, 21 Oct 2015 07:28:30 GMT"  # RFC 9110 HTTP-date, 30 s after "now" below
    assert retry_after_s({"retry-after": date}, now_epoch=1445412480.0) == 30.0
    assert retry_after_s({"retry-after": "soon"}) is None
    assert retry_after_s({}) is None


# ----------------------------------------------------------------------------- case 3

DEEP_ARRAY = "[" * 3000 + "]" * 3000  # about 6 KB
DEEP_ANSWERS = [
    DEEP_ARRAY,
    '{"type": "call_tool", "tool": "assign", "args": {"robot": ' + DEEP_ARRAY + "}}",
    '{"a": ' * 3000 + "1" + "}" * 3000,
]


@pytest.mark.parametrize("text", DEEP_ANSWERS, ids=["array", "in_args", "objects"])
def test_3000_deep_nesting_is_a_model_facing_parse_error(text):
    err = parse_action(text)
    assert err.kind == "too_deep" and "64 levels" in err.message
    assert "nested" in validate_answer(text, SCORE_SCHEMA)


@pytest.mark.parametrize("text", DEEP_ANSWERS, ids=["array", "in_args", "objects"])
def test_3000_deep_nesting_is_fed_back_by_the_tool_loop(scripted, warehouse, text):
    model = scripted([text, FINISH])
    r = ToolAgent(model, warehouse.registry).run("x")
    assert r.reason == "answer" and r.n_retry == 1
    assert r.steps[0].error_kind == "too_deep"
    assert "64 levels" in model.received[1][-1]["content"]  # the feedback reached the model


def test_3000_deep_nesting_from_a_server_is_an_invalid_answer_not_an_exception(fault_server):
    model = OpenAICompatible(fault_server.base("deep"), timeout_s=5)
    r = model.chat(HELLO, schema=SCORE_SCHEMA)
    assert r.text == DEEP_ARRAY and r.validation_error is not None


# ----------------------------------------------------------------------------- case 4


def _post(url: str, body: dict) -> tuple[int, dict]:
    req = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


STORY = [{"role": "user", "content": "Write a very long story about a warehouse robot."}]


def test_llm_serve_honours_max_completion_tokens(llama_server):
    url = llama_server + "/chat/completions"
    for field in ("max_completion_tokens", "max_tokens"):
        status, data = _post(url, {"messages": STORY, field: 5, "temperature": 0})
        assert status == 200, data
        assert data["usage"]["completion_tokens"] == 5, field
    status, data = _post(
        url, {"messages": STORY, "max_tokens": 7, "max_completion_tokens": 5, "temperature": 0}
    )
    assert status == 400 and "max_completion_tokens" in data["error"]["message"]


def test_max_completion_tokens_mapping():
    body = {"max_completion_tokens": 5}
    assert map_max_completion_tokens(body) is None and body == {"max_tokens": 5}
    body = {"max_completion_tokens": 5, "max_tokens": 5}
    assert map_max_completion_tokens(body) is None and body == {"max_tokens": 5}
    assert "differ" in map_max_completion_tokens({"max_completion_tokens": 5, "max_tokens": 9})
    assert "positive integer" in map_max_completion_tokens({"max_completion_tokens": 0})
    assert "positive integer" in map_max_completion_tokens({"max_completion_tokens": "5"})
    body = {"max_tokens": 9}
    assert map_max_completion_tokens(body) is None and body == {"max_tokens": 9}


# ----------------------------------------------------------------------------- case 5


def test_a_base_url_without_v1_is_an_endpoint_error_naming_the_url(fault_server):
    root = fault_server.root("nov1~case5")
    model = OpenAICompatible(root, timeout_s=5, max_retries=2)
    with pytest.raises(EndpointNotFound) as e:
        model.chat(HELLO)
    assert isinstance(e.value, BackendError) and e.value.status == 404
    assert f"{root}/chat/completions" in str(e.value) and f"try {root}/v1" in str(e.value)
    assert fault_server.count("nov1~case5") == 1  # a 404 is not retried


def test_the_factory_refuses_a_base_url_without_v1_before_any_work(fault_server):
    root = fault_server.root("nov1~factory")
    with pytest.raises(InputError) as e:
        make_backend(root)
    assert e.value.field == "--llm" and f"try {root}/v1" in str(e.value)
    assert fault_server.count("nov1~factory") == 0  # only the model list was asked for
    assert isinstance(make_backend(fault_server.base("ok~factory")), OpenAICompatible)


@pytest.mark.parametrize("command", ["demo", "eval"])
def test_a_command_given_a_base_url_without_v1_exits_2_naming_it(fault_server, tmp_path, command):
    root = fault_server.root("nov1~cli")
    notes = tmp_path / "notes.jsonl"
    notes.write_text(
        "".join(
            json.dumps({"id": f"n{i}", "note": f"note {i}", "priority": p}) + "\n"
            for i, p in enumerate(["urgent", "normal", "low"] * 2)
        ),
        encoding="utf-8",
    )
    args = {
        "demo": ["demo", "--planner", "llm", "--steps", "5"],
        "eval": ["eval", "triage", "--notes", str(notes)],
    }[command]
    proc = subprocess.run(
        [sys.executable, "-m", "marlm.cli", *args, "--llm", root, "--out", str(tmp_path / "r")],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert f"{root}/models" in proc.stderr and f"try {root}/v1" in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()  # stopped before any work
    assert fault_server.count("nov1~cli") == 0  # no model call was made


def test_the_real_server_without_v1_names_the_url(llama_server):
    root = llama_server.removesuffix("/v1")
    with pytest.raises(EndpointNotFound, match=f"try {root}/v1"):
        OpenAICompatible(root, "smollm2", timeout_s=30).chat(HELLO, max_tokens=4)


# ----------------------------------------------------------------------------- case 6


def test_retries_send_a_bounded_context(scripted, warehouse):
    # A valid action with an invalid id, every time: robot must be an integer.
    bad = '{"type": "call_tool", "tool": "robot_status", "args": {"robot": "R7"}}'
    model = scripted(lambda messages: bad)
    r = ToolAgent(model, warehouse.registry, max_retry=10).run("What is the status of robot 1?")
    assert r.reason == "max_retry" and r.n_retry == 11 and len(model.received) == 11
    # the transcript keeps every attempt: 10 fed back, the 11th ends the run
    assert len(r.steps) == 11 and r.steps[-1].kind == "stop" and warehouse.calls == []
    sizes = [sum(len(m["content"]) for m in msgs) for msgs in model.received]
    assert sizes[-1] <= 1.5 * sizes[0], sizes
    assert [len(msgs) for msgs in model.received] == [2] + [4] * 10
    last = model.received[-1]
    assert last[1]["content"] == "What is the status of robot 1?"
    assert last[2] == {"role": "assistant", "content": bad}
    assert "robot" in last[3]["content"]  # the error of the last answer
    assert "(9 earlier replies rejected: invalid_args x9.)" in last[3]["content"]


def test_tool_calls_that_ran_stay_in_the_context(scripted, warehouse):
    call = '{"type": "call_tool", "tool": "robot_status", "args": {"robot": 1}}'
    model = scripted([call, "oops", "still no", FINISH])
    r = ToolAgent(model, warehouse.registry, max_retry=5).run("x")
    assert r.reason == "answer"
    last = model.received[-1]
    assert "robot 1 at (2, 3)" in last[3]["content"]  # the tool output is kept
    assert (
        last[4]["content"] == "still no"
        and "(1 earlier reply rejected: not_object x1.)" in last[5]["content"]
    )
    assert len(last) == 6


# ----------------------------------------------------------------------------- circuit breaker


def test_breaker_opens_after_n_failures_refuses_at_once_and_tries_again_after_cooldown(
    fault_server,
):
    mode = "500~breaker"
    clock = FakeClock()
    breaker = CircuitBreaker(3, 30.0, clock=clock)
    model = OpenAICompatible(
        fault_server.base(mode), timeout_s=5, max_retries=0, breaker=breaker, clock=clock
    )
    for _ in range(3):
        with pytest.raises(BackendHTTPError):
            model.chat(HELLO)
    assert fault_server.count(mode) == 3
    with pytest.raises(CircuitOpen) as first:
        model.chat(HELLO)
    with pytest.raises(CircuitOpen) as second:
        model.score("p", [" a"])  # scoring goes through the same breaker
    assert first.value.first and not second.value.first  # the outage is announced once
    assert first.value.failures == 3 and first.value.retry_in_s == 30.0
    assert "HTTP 500" in first.value.cause
    assert fault_server.count(mode) == 3  # refused without a request
    clock.advance(30.0)
    with pytest.raises(BackendHTTPError):  # the one trial call after the cool-down
        model.chat(HELLO)
    assert fault_server.count(mode) == 4
    with pytest.raises(CircuitOpen) as again:
        model.chat(HELLO)
    assert not again.value.first  # still the same outage
    assert breaker.opened == 1


def test_breaker_closes_on_success_and_counts_only_consecutive_failures():
    clock = FakeClock()
    b = CircuitBreaker(2, 10.0, clock=clock)
    b.failure("x")
    b.success()
    b.failure("y")
    assert b.state().state == "closed" and b.state().failures == 1
    b.failure("z")
    assert b.state().state == "open"
    clock.advance(10.0)
    assert b.state().state == "half_open"
    b.before_call()  # the trial
    with pytest.raises(CircuitOpen):
        b.before_call()  # only one trial at a time
    b.success()
    assert b.state().state == "closed" and b.state().failures == 0
    b.before_call()


@pytest.mark.parametrize(("failures", "cooldown"), [(0, 1.0), (1, 0.0)])
def test_breaker_settings_are_checked(failures, cooldown):
    with pytest.raises(ValueError):
        CircuitBreaker(failures, cooldown)


def test_the_tool_loop_reports_an_open_breaker_as_a_backend_error(fault_server, warehouse):
    clock = FakeClock()
    model = OpenAICompatible(
        fault_server.base("500~loop"),
        timeout_s=5,
        max_retries=0,
        breaker=CircuitBreaker(1, 60.0, clock=clock),
        clock=clock,
    )
    assert ToolAgent(model, warehouse.registry).run("x").reason == "backend_error"
    r = ToolAgent(model, warehouse.registry).run("x")
    assert r.reason == "backend_error" and "refused" in r.detail
    # one call tried each structured-output shape once (a bare 500 may be a refused shape),
    # then the open breaker refused the second run's call without a request
    assert fault_server.count("500~loop") == 3


def test_a_batch_call_gives_each_item_its_own_timeout_on_a_fake_clock():
    from marlm.llm.backends import _Guard
    from marlm.llm.breaker import CircuitBreaker, FakeClock
    from marlm.llm.errors import BackendTimeout

    clock = FakeClock()
    guard = _Guard(CircuitBreaker(3, 30.0, clock=clock), clock)
    timed_out = pytest.raises(BackendTimeout, match="within 5.0 s")
    with timed_out, guard.call("m", clock.now() + 5.0, 5.0) as check:
        for _ in range(3):  # three items of 4 s each: 12 s in all, each within its 5 s
            clock.advance(4.0)
            check()
            check.renew()
        clock.advance(5.5)  # one item past its own 5 s
        check()
    assert guard.breaker.state().failures == 1
