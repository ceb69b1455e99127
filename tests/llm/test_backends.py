"""Backends: the embedded model under a grammar, the real loopback server, and injected faults."""

from __future__ import annotations

import json
import time

import pytest

from marlm.errors import InputError
from marlm.llm.agent import ToolAgent
from marlm.llm.backends import (
    BackendError,
    BackendTimeout,
    ChatModel,
    EmbeddedModel,
    OpenAICompatible,
)
from marlm.llm.reward import SCORE_SCHEMA

HELLO = [{"role": "user", "content": "Rate this: the robot reached its goal."}]


def test_embedded_model_follows_the_schema(embedded_model):
    assert isinstance(embedded_model, ChatModel)
    r = embedded_model.chat(HELLO, schema=SCORE_SCHEMA, max_tokens=12)
    assert r.structured == "grammar" and r.validation_error is None
    assert json.loads(r.text)["score"] in (-1, 0, 1)
    assert r.completion_tokens > 0 and r.latency_s > 0


def test_embedded_model_timeout_is_backend_timeout(embedded_model):
    slow = EmbeddedModel(embedded_model.model_path, timeout_s=1e-6)
    with pytest.raises(BackendTimeout):
        slow.chat(HELLO, max_tokens=8)


def test_embedded_model_missing_file_is_backend_error(tmp_path):
    with pytest.raises(BackendError, match="not found"):
        EmbeddedModel(tmp_path / "nope.gguf")


# ----------------------------------------------------------------------------- real server


def test_server_auto_mode_falls_back_to_json_object_and_validates(llama_server):
    model = OpenAICompatible(llama_server, "smollm2", timeout_s=120)
    assert isinstance(model, ChatModel)
    r = model.chat(HELLO, schema=SCORE_SCHEMA, max_tokens=12)
    # llama-cpp-python's server rejects json_schema (its request model allows text/json_object)
    assert r.structured == "json_object" and model.structured_mode == "json_object"
    assert r.validation_error is None
    assert json.loads(r.text)["score"] in (-1, 0, 1)
    assert r.prompt_tokens > 0 and r.completion_tokens > 0


def test_tool_agent_over_http(llama_server, warehouse):
    model = OpenAICompatible(llama_server, "smollm2", timeout_s=120, structured="json_object")
    r = ToolAgent(model, warehouse.registry, max_iter=1, max_retry=0, max_tokens=40).run(
        "What is the status of robot 1?"
    )
    assert r.reason in {"answer", "max_iter", "repeated_call", "max_retry"}
    # the server's grammar keeps replies to valid actions; only a cut-off or bad args may retry
    assert all(s.error_kind in ("truncated", "invalid_args") for s in r.steps if s.kind == "retry")
    assert all(c.completion_tokens > 0 for c in r.calls)


# ----------------------------------------------------------------------------- faults


def test_refused_connection_is_backend_error_after_retries(refused_url, warehouse):
    model = OpenAICompatible(refused_url, timeout_s=2, max_retries=2, backoff_s=0.01)
    r = ToolAgent(model, warehouse.registry).run("x")
    assert r.reason == "backend_error"
    assert "3 attempts" in r.detail and "connection error" in r.detail


def test_never_answers_is_timeout_within_the_timeout(fault_server, warehouse):  # case 12
    model = OpenAICompatible(fault_server.base("hang"), timeout_s=1.0, max_retries=2)
    before = fault_server.count("hang")  # the server is shared by the whole session
    t0 = time.monotonic()
    r = ToolAgent(model, warehouse.registry).run("x")
    elapsed = time.monotonic() - t0
    assert r.reason == "timeout"
    assert elapsed < 1.0 + 5.0  # timeouts are not retried
    assert fault_server.count("hang") - before == 1


def test_server_error_is_retried_then_backend_error(fault_server):
    before = fault_server.count("500")
    model = OpenAICompatible(fault_server.base("500"), timeout_s=2, max_retries=2, backoff_s=0.01)
    with pytest.raises(BackendError, match="HTTP 500"):
        model.chat(HELLO)
    assert fault_server.count("500") - before == 3


def test_one_server_error_then_success(fault_server):
    model = OpenAICompatible(fault_server.base("flaky"), timeout_s=2, max_retries=1, backoff_s=0.01)
    assert json.loads(model.chat(HELLO).text)["type"] == "finish"


def test_whitespace_forever_is_timeout(fault_server, warehouse):
    model = OpenAICompatible(fault_server.base("whitespace"), timeout_s=1.0)
    t0 = time.monotonic()
    r = ToolAgent(model, warehouse.registry).run("x")
    assert r.reason == "timeout" and "kept sending" in r.detail
    assert time.monotonic() - t0 < 6.0


def test_truncated_body_is_backend_error(fault_server, warehouse):
    model = OpenAICompatible(fault_server.base("truncated_body"), timeout_s=2)
    r = ToolAgent(model, warehouse.registry).run("x")
    assert r.reason == "backend_error" and "not complete JSON" in r.detail


def test_truncated_answer_is_fed_back_and_ends_in_max_retry(fault_server, warehouse):
    model = OpenAICompatible(fault_server.base("truncated_content"), timeout_s=2)
    r = ToolAgent(model, warehouse.registry, max_retry=1).run("x")
    assert r.reason == "max_retry"
    assert r.steps[0].error_kind == "truncated" and "cut off" in r.steps[0].feedback


def test_server_rejecting_both_shapes_gets_prompt_plus_validation(fault_server):
    model = OpenAICompatible(fault_server.base("picky"), timeout_s=2, max_retries=0)
    r = model.chat(HELLO, schema=SCORE_SCHEMA, max_tokens=12)
    assert r.structured == "prompt"
    bodies = fault_server.bodies("picky")[-3:]
    assert [b.get("response_format", {}).get("type") for b in bodies] == [
        "json_schema",
        "json_object",
        None,
    ]
    assert '"score"' in bodies[-1]["messages"][0]["content"]  # the schema went into the prompt
    # the scripted answer does not follow the score schema: the client-side check says so
    assert r.validation_error is not None and "score" in r.validation_error
    model.chat(HELLO, schema=SCORE_SCHEMA)
    assert fault_server.bodies("picky")[-1].get("response_format") is None  # mode was kept


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"base_url": "127.0.0.1:8000"}, "base_url"),
        ({"base_url": "http://x/v1", "timeout_s": 0}, "timeout_s"),
        ({"base_url": "http://x/v1", "structured": "grammar"}, "structured"),
    ],
)
def test_bad_backend_options_are_input_errors(kwargs, field):
    with pytest.raises(InputError) as e:
        OpenAICompatible(**kwargs)
    assert e.value.field == field
