"""Every reply shape OpenAI-compatible servers send is read, and a failure is blamed on whoever
caused it: the server (an unreadable body: :class:`MalformedReply`, a backend error), the model
(a readable answer that is not a valid one: fed back, never raised), or marlm (only our bugs
raise). A scripted server (tests/llm/scriptedserver.py) sends each shape."""

from __future__ import annotations

import json

import pytest
from scriptedserver import completion

from marlm.llm.agent import ToolAgent
from marlm.llm.backends import ChatResult, OpenAICompatible, content_text, events_body
from marlm.llm.errors import BackendError, ContextLengthExceeded, MalformedReply
from marlm.llm.reward import SCORE_SCHEMA, LLMReward

HELLO = [{"role": "user", "content": "Rate this: the robot reached its goal."}]
FINISH = '{"type": "finish", "answer": "ok"}'
CALL = '{"type": "call_tool", "tool": "robot_status", "args": {"robot": 3}}'
FINISH_SCHEMA = {
    "type": "object",
    "properties": {"type": {"enum": ["finish"]}, "answer": {"type": "string"}},
    "required": ["type", "answer"],
    "additionalProperties": False,
}


def parts(text: str) -> list[dict[str, str]]:
    """``text`` as OpenAI's array of text content parts, cut in two."""
    half = len(text) // 2
    return [{"type": "text", "text": text[:half]}, {"type": "text", "text": text[half:]}]


def tool_call(name: str, arguments: object) -> dict[str, object]:
    return {"id": "call_0", "type": "function", "function": {"name": name, "arguments": arguments}}


# (message or whole body, the text read, the finish reason read)
SHAPES = {
    "string": ({"role": "assistant", "content": FINISH}, FINISH),
    "text parts": ({"role": "assistant", "content": parts(FINISH)}, FINISH),
    "output_text parts with value": (
        {"content": [{"type": "output_text", "text": {"value": FINISH, "annotations": []}}]},
        FINISH,
    ),
    "reasoning part before the text": (
        {"content": [{"type": "thinking", "thinking": [{"text": "hmm"}]}, *parts(FINISH)]},
        FINISH,
    ),
    "one part object": ({"content": {"type": "text", "text": FINISH}}, FINISH),
    "bare string parts": ({"content": ['{"type": "finish", ', '"answer": "ok"}']}, FINISH),
    "null content with one tool call": (
        {"role": "assistant", "content": None, "tool_calls": [tool_call("json", FINISH)]},
        FINISH,
    ),
    "tool call arguments as an object": (
        {"content": "", "tool_calls": [tool_call("json", json.loads(FINISH))]},
        json.dumps(json.loads(FINISH)),
    ),
    "legacy function_call": (
        {"content": None, "function_call": {"name": "json", "arguments": FINISH}},
        FINISH,
    ),
    "refusal": ({"content": None, "refusal": "I can't help with that."}, "I can't help with that."),
    "reasoning_content beside the content": (
        {"content": FINISH, "reasoning_content": "first I think"},
        FINISH,
    ),
    "message as a string": (FINISH, FINISH),
}


@pytest.mark.parametrize("shape", SHAPES, ids=list(SHAPES))
def test_every_message_shape_is_read_as_its_text(scripted_server, shape):
    message, text = SHAPES[shape]
    base = scripted_server.route(lambda body, n: (200, completion(message)))
    r = OpenAICompatible(base, timeout_s=5, max_retries=0).chat(HELLO)
    assert r.text == text and r.finish_reason == "stop"
    assert (r.prompt_tokens, r.completion_tokens) == (7, 3)


@pytest.mark.parametrize(
    "body, text, finish, tokens",
    [
        ({"choices": [{"text": FINISH, "finish_reason": "length"}]}, FINISH, "length", (0, 0)),
        (completion({"content": FINISH}, None, usage=None), FINISH, "stop", (0, 0)),
        (
            completion({"content": FINISH}, "max_tokens", usage={"prompt_tokens": "5"}),
            FINISH,
            "length",
            (5, 0),
        ),
        (completion({"content": FINISH}, "EOS"), FINISH, "stop", (7, 3)),
        ({"choices": [{"delta": {"content": parts(FINISH)}}]}, FINISH, "stop", (0, 0)),
    ],
    ids=["completions text", "null usage and finish", "max_tokens word", "eos word", "delta"],
)
def test_other_body_shapes_are_read(scripted_server, body, text, finish, tokens):
    base = scripted_server.route(lambda b, n: (200, body))
    r = OpenAICompatible(base, timeout_s=5, max_retries=0).chat(HELLO)
    assert (r.text, r.finish_reason, (r.prompt_tokens, r.completion_tokens)) == (
        text,
        finish,
        tokens,
    )


def test_a_streamed_body_sent_to_a_plain_request_is_joined(scripted_server):
    chunks = [
        {"choices": [{"delta": {"content": p}}]} for p in ('{"type": "finish", ', '"answer": "ok"}')
    ]
    chunks.append({"choices": [{"delta": {}, "finish_reason": "length"}], "model": "m"})
    raw = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    base = scripted_server.route(lambda b, n: (200, raw.encode()))
    r = OpenAICompatible(base, timeout_s=5, max_retries=0).chat(HELLO)
    assert (r.text, r.finish_reason, r.model) == (FINISH, "length", "m")
    assert events_body(b'{"choices": []}') is None


def test_a_schema_answer_in_parts_is_validated(scripted_server):
    base = scripted_server.route(lambda b, n: (200, completion({"content": parts('{"score": 1}')})))
    r = OpenAICompatible(base, timeout_s=5, max_retries=0).chat(HELLO, schema=SCORE_SCHEMA)
    assert r.text == '{"score": 1}' and r.validation_error is None
    assert LLMReward(OpenAICompatible(base, timeout_s=5), "reach the goal", k=1)("at goal") == 1.0


# ----------------------------------------------------------------------------- the tool loop


def test_the_tool_loop_reads_parts_and_native_tool_calls(scripted_server, warehouse):
    script = [
        {"content": parts(CALL)},  # the action as content parts
        {"content": None, "tool_calls": [tool_call("order_status", '{"order": "o7"}')]},
        {"content": [{"type": "text", "text": FINISH}]},
    ]
    base = scripted_server.route(lambda b, n: (200, completion(script[n - 1])))
    out = ToolAgent(OpenAICompatible(base, timeout_s=5), warehouse.registry).run("status?")
    assert (out.reason, out.answer, out.n_iter, out.n_retry) == ("answer", "ok", 2, 0)
    assert warehouse.calls == [
        ("robot_status", {"robot": 3}),
        ("order_status", {"order": "o7", "verbose": False}),
    ]


@pytest.mark.parametrize(
    "body, detail",
    [
        ({"choices": []}, "without choices[0]"),
        ({"object": "chat.completion"}, "without choices[0] (keys: object)"),
        ([FINISH], "a JSON list instead of a chat completion"),
        (completion({"content": 42}), "message content of type int"),
        (completion({"content": [{"type": "text", "text": 42}]}), "text part without a string"),
        ({"choices": [{"index": 0, "finish_reason": "stop"}]}, "a choice without a message"),
        ({"error": {"message": "upstream overloaded"}}, "HTTP 200 with an error: upstream"),
    ],
    ids=[
        "no choices",
        "no choices key",
        "a list",
        "content int",
        "part int",
        "no message",
        "error",
    ],
)
def test_an_unreadable_reply_is_the_servers_fault_not_an_exception(
    scripted_server, warehouse, body, detail
):
    base = scripted_server.route(lambda b, n: (200, body))
    model = OpenAICompatible(base, timeout_s=5, max_retries=0)
    with pytest.raises(MalformedReply, match="answered|sent") as e:
        model.chat(HELLO)
    assert detail in str(e.value) and isinstance(e.value, BackendError)
    assert e.value.url == f"{base}/chat/completions"
    out = ToolAgent(OpenAICompatible(base, timeout_s=5), warehouse.registry).run("status?")
    assert out.reason == "backend_error" and detail in out.detail and warehouse.calls == []


def test_a_context_error_in_a_200_body_is_a_context_error(scripted_server):
    error = {"error": {"message": "This model's maximum context length is 2048 tokens"}}
    base = scripted_server.route(lambda b, n: (200, error))
    model = OpenAICompatible(base, timeout_s=5, max_retries=0)
    with pytest.raises(ContextLengthExceeded):
        model.chat(HELLO)
    assert model.breaker.state().failures == 0


def test_a_refusal_is_the_models_mistake_fed_back(scripted_server, warehouse):
    refusal = {"content": None, "refusal": "I cannot do that."}
    base = scripted_server.route(lambda b, n: (200, completion(refusal if n == 1 else FINISH)))
    out = ToolAgent(OpenAICompatible(base, timeout_s=5), warehouse.registry).run("status?")
    assert (out.reason, out.n_retry) == ("answer", 1)
    assert out.steps[0].reply == "I cannot do that." and out.steps[0].error_kind == "not_object"


def test_chat_result_reads_parts_from_any_backend():
    assert ChatResult(text=parts(FINISH)).text == FINISH  # type: ignore[arg-type]
    assert ChatResult(text=None).text == ""  # type: ignore[arg-type]
    with pytest.raises(MalformedReply, match="the backend sent message content of type int"):
        ChatResult(text=3)  # type: ignore[arg-type]
    assert content_text([{"type": "image_url", "image_url": {"url": "x"}}, "a"]) == "a"


# ----------------------------------------------------------------------------- structured output


def refusing(statuses: dict[str, tuple[int, str]]):
    """A server that answers a request whose response_format type (or ``none``) is in
    ``statuses`` with that status and message, and every other with a finish."""

    def answer(body, n):
        kind = (body.get("response_format") or {}).get("type", "none")
        if kind in statuses:
            status, message = statuses[kind]
            return status, {"error": {"message": message, "type": "server_error"}}
        return 200, completion({"content": '{"score": 1}'})

    return answer


def types(bodies):
    return [(b.get("response_format") or {}).get("type", "none") for b in bodies]


@pytest.mark.parametrize("status", [500, 502, 503, 400, 422])
def test_a_server_refusing_json_schema_without_saying_why_is_downgraded(scripted_server, status):
    from marlm.llm.breaker import FakeClock

    base = scripted_server.route(refusing({"json_schema": (status, "Internal Server Error")}))
    clock = FakeClock()
    model = OpenAICompatible(base, timeout_s=5, max_retries=2, clock=clock)
    first = model.chat(HELLO, schema=SCORE_SCHEMA)
    second = model.chat(HELLO, schema=SCORE_SCHEMA)
    tries = 3 if status >= 500 else 1  # a 5xx is retried first: it may have been passing
    assert types(scripted_server.bodies(base)) == ["json_schema"] * tries + ["json_object"] * 2
    assert first.structured == second.structured == model.structured_mode == "json_object"
    assert first.validation_error is None and model.breaker.state().failures == 0


def test_refusing_both_shapes_without_saying_why_ends_in_the_prompt(scripted_server):
    refused = (500, "Internal Server Error")
    base = scripted_server.route(refusing({"json_schema": refused, "json_object": refused}))
    model = OpenAICompatible(base, timeout_s=5, max_retries=0)
    assert model.chat(HELLO, schema=SCORE_SCHEMA).structured == "prompt"
    assert model.chat(HELLO, schema=SCORE_SCHEMA).structured == "prompt"
    assert types(scripted_server.bodies(base)) == ["json_schema", "json_object", "none", "none"]


def test_a_refusal_naming_the_json_schema_drops_it_at_once(scripted_server):
    # llama.cpp's C++ server: HTTP 500 "JSON schema conversion failed"
    base = scripted_server.route(refusing({"json_schema": (500, "JSON schema conversion failed")}))
    model = OpenAICompatible(base, timeout_s=5, max_retries=2)
    assert model.chat(HELLO, schema=SCORE_SCHEMA).structured == "json_object"
    assert types(scripted_server.bodies(base)) == ["json_schema", "json_object"]


def test_a_server_failing_everything_keeps_its_modes(scripted_server):
    down = (500, "Internal Server Error")
    base = scripted_server.route(
        refusing({t: down for t in ("json_schema", "json_object", "none")})
    )
    model = OpenAICompatible(base, timeout_s=5, max_retries=0)
    with pytest.raises(BackendError, match="HTTP 500"):
        model.chat(HELLO, schema=SCORE_SCHEMA)
    assert model.structured_mode == "json_schema"  # the shape was not the cause
    assert types(scripted_server.bodies(base)) == ["json_schema", "json_object", "none"]


@pytest.mark.parametrize("status", [400, 500])
def test_a_context_length_error_quoting_the_schema_is_not_a_shape_refusal(scripted_server, status):
    message = "maximum context length is 2048 tokens; request: response_format json_schema"
    answers = iter([(status, {"error": {"message": message}})])
    base = scripted_server.route(
        lambda b, n: next(answers, (200, completion({"content": '{"score": 1}'})))
    )
    model = OpenAICompatible(base, timeout_s=5, max_retries=2)
    with pytest.raises(ContextLengthExceeded):
        model.chat(HELLO, schema=SCORE_SCHEMA)
    assert model.chat(HELLO, schema=SCORE_SCHEMA).structured == "json_schema"
    assert types(scripted_server.bodies(base)) == ["json_schema", "json_schema"]


@pytest.mark.parametrize("status", [401, 404, 429])
def test_statuses_that_never_refuse_a_shape_keep_the_mode(scripted_server, status):
    base = scripted_server.route(refusing({"json_schema": (status, "nope")}))
    model = OpenAICompatible(base, timeout_s=5, max_retries=0)
    with pytest.raises(BackendError):
        model.chat(HELLO, schema=SCORE_SCHEMA)
    assert model.structured_mode == "json_schema"
    assert types(scripted_server.bodies(base)) == ["json_schema"]


# ----------------------------------------------------------------------------- the demo


def test_the_demo_counts_and_uses_answers_sent_as_content_parts(scripted_server, tmp_path):
    # The demo blamed marlm (planner_error) and showed "LLM calls 0" while the server answered.
    import os
    import subprocess
    import sys

    from marlm.eval.trace import read_trace

    def assign(body, n):
        items = body["response_format"]["json_schema"]["schema"]["properties"]["assignments"]
        robots, orders = items["items"]["properties"]["robot"]["enum"], None
        orders = items["items"]["properties"]["order"]["enum"]
        pairs = [{"robot": r, "order": o} for r, o in zip(robots, orders, strict=False)]
        answer = json.dumps({"assignments": pairs[: items["minItems"]]})
        return 200, completion({"role": "assistant", "content": parts(answer)})

    base = scripted_server.route(assign)
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "marlm.cli", "demo", "--planner", "llm", "--llm", base,
         "--steps", "40", "--sync", "--tick-ms", "0", "--executor", "greedy", "--no-gif",
         "--out", str(out)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
        env={**os.environ, "MARLM_CACHE": str(tmp_path / "cache")},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    metrics = json.loads((out / "metrics.json").read_text())
    requests = len(scripted_server.bodies(base))
    assert requests > 0 and metrics["llm_calls"] == requests
    outcomes = [e["outcome"] for e in read_trace(out / "trace.jsonl").of_type("plan")]
    assert outcomes and set(outcomes) == {"answered"}


# ----------------------------------------------------------------------------- reasoning models

THOUGHT = 'The robot is at {"x": 1}; the goal is reached, so finish.'
# (body, the text read, the reasoning read): what reasoning models and their servers send
REASONING = {
    "reasoning_content beside the content": (
        completion({"content": FINISH, "reasoning_content": THOUGHT}),
        FINISH,
        THOUGHT,
    ),
    "reasoning beside the content": (
        completion({"content": FINISH, "reasoning": THOUGHT}),
        FINISH,
        THOUGHT,
    ),
    "think block before the JSON": (
        completion({"content": f"<think>\n{THOUGHT}\n</think>\n\n{FINISH}"}),
        FINISH,
        THOUGHT,
    ),
    "think block closed only (opened by the template)": (
        completion({"content": f"{THOUGHT}\n</think>\n{FINISH}"}),
        FINISH,
        THOUGHT,
    ),
    "think block in content parts": (
        completion({"content": parts(f"<think>{THOUGHT}</think>{FINISH}")}),
        FINISH,
        THOUGHT,
    ),
    "everything in reasoning_content, null content": (
        completion({"content": None, "reasoning_content": FINISH}),
        FINISH,
        "",
    ),
    "reasoning as parts, answer as parts": (
        completion({"content": parts(FINISH), "reasoning": [{"type": "text", "text": THOUGHT}]}),
        FINISH,
        THOUGHT,
    ),
}


@pytest.mark.parametrize("shape", REASONING, ids=list(REASONING))
def test_a_reasoning_models_answer_is_read_without_its_thinking(scripted_server, shape):
    body, text, thought = REASONING[shape]
    base = scripted_server.route(lambda b, n: (200, body))
    r = OpenAICompatible(base, timeout_s=5, max_retries=0).chat(HELLO, schema=FINISH_SCHEMA)
    assert r.text == text and r.validation_error is None
    assert r.extra.get("reasoning", "") == thought


# ----------------------------------------------------------------------------- wrapping servers

WRAPPED = {
    "ollama generate": (
        {"model": "m", "response": FINISH, "done": True, "done_reason": "length",
         "prompt_eval_count": 12, "eval_count": 5},
        "length",
        (12, 5),
    ),
    "ollama chat": (
        {"model": "m", "message": {"role": "assistant", "content": FINISH}, "done": True},
        "stop",
        (0, 0),
    ),
    "ollama chat with thinking": (
        {"message": {"role": "assistant", "content": FINISH, "thinking": THOUGHT}},
        "stop",
        (0, 0),
    ),
    "responses api": (
        {"object": "response", "status": "completed", "output": [
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": THOUGHT}]},
            {"type": "message", "role": "assistant",
             "content": [{"type": "output_text", "text": FINISH, "annotations": []}]}],
         "usage": {"input_tokens": 9, "output_tokens": 4}},
        "stop",
        (9, 4),
    ),
    "output as a string": ({"output": FINISH}, "stop", (0, 0)),
    "response wrapping a chat completion": (
        {"response": completion({"content": FINISH})},
        "stop",
        (7, 3),
    ),
    "output wrapping a completions body": (
        {"output": {"choices": [{"text": FINISH, "finish_reason": "stop"}]}},
        "stop",
        (0, 0),
    ),
    "data wrapping a chat completion": ({"data": completion({"content": FINISH})}, "stop", (7, 3)),
}  # fmt: skip


@pytest.mark.parametrize("shape", WRAPPED, ids=list(WRAPPED))
def test_a_wrapped_answer_is_read(scripted_server, shape):
    body, finish, tokens = WRAPPED[shape]
    base = scripted_server.route(lambda b, n: (200, body))
    r = OpenAICompatible(base, timeout_s=5, max_retries=0).chat(HELLO, schema=FINISH_SCHEMA)
    assert (r.text, r.finish_reason, (r.prompt_tokens, r.completion_tokens)) == (
        FINISH,
        finish,
        tokens,
    )
    assert r.validation_error is None
