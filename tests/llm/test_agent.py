"""ToolAgent: exact steps and reasons under scripted faults (cases 1-9), and a real-model run."""

from __future__ import annotations

import json

import pytest

from marlm.errors import InputError
from marlm.llm.agent import RetryStep, StopStep, ToolAgent, ToolStep
from marlm.llm.backends import BackendError, BackendTimeout
from marlm.llm.tools import ToolRegistry

FINISH = '{"type": "finish", "answer": "done"}'


def call(tool, **args):
    return json.dumps({"type": "call_tool", "tool": tool, "args": args}, ensure_ascii=False)


def test_single_quotes_count_against_max_retry_not_max_iter(scripted, warehouse):  # case 1
    bad = "{'type': 'call_tool', 'tool': 'robot_status', 'args': {'robot': 1}}"
    model = scripted([bad, bad, bad])
    r = ToolAgent(model, warehouse.registry, max_retry=2, max_iter=1).run("where is robot 1?")
    assert r.reason == "max_retry"
    assert (r.n_retry, r.n_iter) == (3, 0)
    assert warehouse.calls == []
    assert [s.kind for s in r.steps] == ["retry", "retry", "stop"]
    fed_back = model.received[1][-1]["content"]
    assert "not JSON" in fed_back and "line 1 column 2" in fed_back


@pytest.mark.parametrize(
    "reply",
    [
        'Action:\n{"type": "call_tool", "tool": "robot_status", "args": {"robot": 1}}\n\n'
        "This finds robot 1.",
        '```json\n{"type": "call_tool", "tool": "robot_status", "args": {"robot": 1}}\n```',
    ],
)
def test_prose_around_one_object_is_executed(scripted, warehouse, reply):  # case 2
    r = ToolAgent(scripted([reply, FINISH]), warehouse.registry).run("where is robot 1?")
    assert r.reason == "answer" and r.answer == "done"
    assert warehouse.calls == [("robot_status", {"robot": 1})]
    assert (r.n_iter, r.n_retry) == (1, 0)


def test_two_objects_rejected(scripted, warehouse):  # case 3
    two = call("robot_status", robot=1) + call("robot_status", robot=2)
    model = scripted([two, FINISH])
    r = ToolAgent(model, warehouse.registry).run("status")
    assert r.reason == "answer"
    assert warehouse.calls == []
    assert isinstance(r.steps[0], RetryStep) and r.steps[0].error_kind == "multiple_objects"
    assert "exactly one action" in model.received[1][-1]["content"]


def test_schema_as_reply_gets_missing_fields(scripted, warehouse):  # case 4
    agent = ToolAgent(scripted([]), warehouse.registry)
    schema_reply = json.dumps(agent.schema["anyOf"][0])
    model = scripted([schema_reply, FINISH])
    r = ToolAgent(model, warehouse.registry).run("status")
    assert r.reason == "answer" and r.n_retry == 1
    feedback = model.received[1][-1]["content"]
    assert "Missing fields: 'tool', 'args'" in feedback and "'answer'" in feedback


def test_repeated_call_warns_after_k_and_stops_after_2k(scripted, warehouse):  # case 5
    variants = [
        '{"type": "call_tool", "tool": "order_status", "args": {"order": "O7", "verbose": true}}',
        '{"type":"call_tool","tool":"order_status","args":{"verbose":true,"order":"O7"}}',
        '{ "args" : { "verbose" : true , "order" : "O7" } , "tool" : "order_status" , "type" : "call_tool" }',
    ]
    model = scripted([variants[i % 3] for i in range(10)])
    r = ToolAgent(model, warehouse.registry, repeat_k=2, max_iter=10).run("is O7 delivered?")
    assert r.reason == "repeated_call"
    assert r.n_iter == 4  # calls 1..4 ran; the 5th (4th repeat = 2k) stopped the run
    assert len(warehouse.calls) == 4
    tool_steps = [s for s in r.steps if isinstance(s, ToolStep)]
    assert [s.repeats for s in tool_steps] == [0, 1, 2, 3]
    assert [s.warning is not None for s in tool_steps] == [False, False, True, True]
    assert isinstance(r.steps[-1], StopStep) and r.steps[-1].reason == "repeated_call"
    # the message after the k-th repeat tells the model not to call it again, with the tool list
    after_k = model.received[3][-1]["content"]
    assert "Do not call it again" in after_k and "assign, order_status, robot_status" in after_k
    assert "Do not call it again" not in model.received[2][-1]["content"]
    assert len(r.calls) == 5


def test_unknown_tool_lists_valid_names(scripted, warehouse):  # case 6
    model = scripted(
        ['{"type": "call_tool", "tool": "assign | {\\"robot\\": 2}", "args": {}}', FINISH]
    )
    r = ToolAgent(model, warehouse.registry).run("assign")
    assert r.reason == "answer"
    assert r.steps[0].error_kind == "unknown_tool"
    assert (
        "Valid tool names: assign, order_status, robot_status" in model.received[1][-1]["content"]
    )


def test_cut_off_reply_counts_against_max_retry(scripted, warehouse):  # case 7
    cut = ('{"type": "call_tool", "tool": "assign", "args": {"robot": 3, "order": ', "length")
    model = scripted([cut, cut])
    r = ToolAgent(model, warehouse.registry, max_retry=1).run("assign")
    assert r.reason == "max_retry" and r.n_iter == 0 and r.n_retry == 2
    assert "cut off" in model.received[1][-1]["content"]


@pytest.mark.parametrize("args_part", [', "args": ""', ""])
def test_no_argument_tool_with_empty_or_missing_args(scripted, args_part):  # case 8
    reg = ToolRegistry()
    seen = []

    def list_robots() -> list[int]:
        """All robot ids."""
        seen.append(True)
        return [1, 2, 3]

    reg.register(list_robots)
    model = scripted(['{"type": "call_tool", "tool": "list_robots"' + args_part + "}", FINISH])
    r = ToolAgent(model, reg).run("list")
    assert r.reason == "answer" and seen == [True]
    assert r.steps[0].output == "[1, 2, 3]"


def test_non_ascii_goes_through_unchanged(scripted):  # case 9
    reg = ToolRegistry()
    got = []

    def shelf_status(shelf: str) -> str:
        """Delivery state of a shelf."""
        return "货架A-3 已送达 🚚"

    def assign(robot: int, order: str, note: str = "") -> str:
        """Assign with a note."""
        got.append(note)
        return "ok"

    reg.register(shelf_status)
    reg.register(assign)
    note_call = call("assign", robot=1, order="O1", note="机器人1号 优先")
    model = scripted([call("shelf_status", shelf="A-3"), note_call, FINISH])
    r = ToolAgent(model, reg).run("deliver")
    assert r.reason == "answer"
    assert got == ["机器人1号 优先"]
    observation = model.received[1][-1]["content"]
    assert "货架A-3 已送达 🚚" in observation and "\\u" not in observation
    assert "机器人1号 优先" in model.received[2][-2]["content"]
    trace = r.to_jsonl()
    assert "货架A-3 已送达 🚚" in trace and "机器人1号 优先" in trace and "\\u" not in trace


def test_tool_exception_is_summarised_and_counts_as_iteration(scripted, warehouse):
    model = scripted([call("robot_status", robot=12), FINISH])
    r = ToolAgent(model, warehouse.registry).run("robot 12?")
    assert r.reason == "answer" and r.n_iter == 1 and r.n_retry == 0
    obs = model.received[1][-1]["content"]
    assert "raised ValueError: no robot 12." in obs and "known robots" not in obs


def test_invalid_arguments_are_fed_back_with_the_field(scripted, warehouse):
    model = scripted([call("assign", robot="two"), FINISH])
    r = ToolAgent(model, warehouse.registry).run("assign")
    assert r.steps[0].error_kind == "invalid_args"
    fb = model.received[1][-1]["content"]
    assert "field 'robot'" in fb and "field 'order'" in fb
    assert warehouse.calls == []


def test_long_output_is_cut_head_and_tail(scripted):
    reg = ToolRegistry()

    def dump() -> str:
        """A long log."""
        return "START " + "x" * 5000 + " END"

    reg.register(dump)
    model = scripted([call("dump"), FINISH])
    ToolAgent(model, reg, max_output_chars=200).run("dump")
    obs = model.received[1][-1]["content"]
    assert "START" in obs and "END" in obs and "characters cut" in obs and len(obs) < 300


def test_max_iter_stops_before_the_extra_call(scripted, warehouse):
    model = scripted([call("robot_status", robot=i) for i in range(1, 5)])
    r = ToolAgent(model, warehouse.registry, max_iter=3).run("all robots")
    assert r.reason == "max_iter" and r.n_iter == 3 and len(warehouse.calls) == 3


@pytest.mark.parametrize(
    ("exc", "reason"),
    [(BackendTimeout("no answer in 1 s"), "timeout"), (BackendError("refused"), "backend_error")],
)
def test_backend_failures_are_reasons(scripted, warehouse, exc, reason):
    r = ToolAgent(scripted([call("robot_status", robot=1), exc]), warehouse.registry).run("x")
    assert r.reason == reason and r.n_iter == 1 and r.answer is None
    assert r.steps[-1].kind == "stop"


def test_limits_are_checked(scripted, warehouse):
    with pytest.raises(InputError, match="max_iter"):
        ToolAgent(scripted([]), warehouse.registry, max_iter=0)


def test_usage_is_recorded_per_call(scripted, warehouse):
    r = ToolAgent(scripted([call("robot_status", robot=1), FINISH]), warehouse.registry).run("x")
    assert len(r.calls) == 2 and r.prompt_tokens == 20 and r.completion_tokens == 10


def test_real_model_run_ends_in_a_reason_with_valid_actions(embedded_model, warehouse):
    agent = ToolAgent(embedded_model, warehouse.registry, max_iter=3, max_retry=2, max_tokens=64)
    r = agent.run("Find out the status of robot 1, then finish with a short answer.")
    # Any of the loop's own endings: the reply text is the embedded model's, which may differ
    # on another CPU or llama.cpp build; what is tested is that every ending is a valid one.
    assert r.reason in {"answer", "max_iter", "repeated_call"}
    # the grammar makes every reply one valid action: nothing was fed back as unparseable
    assert not any(isinstance(s, RetryStep) and s.error_kind != "invalid_args" for s in r.steps)
    assert len(r.calls) >= 1 and all(c.completion_tokens > 0 for c in r.calls)
    assert all(c.latency_s > 0 for c in r.calls)
    if r.reason == "answer":
        assert isinstance(r.answer, str)


def test_min_tool_calls_sends_the_tool_calls_schema_until_met(scripted, warehouse):
    call = '{"type": "call_tool", "tool": "robot_status", "args": {"robot": 3}}'
    model = scripted([call, '{"type": "finish", "answer": "at (2, 3)"}'])
    agent = ToolAgent(model, warehouse.registry, min_tool_calls=1, max_iter=4)
    out = agent.run("Where is robot 3?")
    assert (out.reason, out.answer, out.n_iter) == ("answer", "at (2, 3)", 1)
    first, second = model.schemas
    assert all(v["properties"]["type"] == {"const": "call_tool"} for v in first["anyOf"])
    assert [v["properties"]["tool"]["const"] for v in first["anyOf"]] == warehouse.registry.names
    assert second == agent.schema and len(second["anyOf"]) == len(first["anyOf"]) + 1


def test_spent_tool_calls_leave_the_finish_schema_only(scripted, warehouse):
    call = '{"type": "call_tool", "tool": "robot_status", "args": {"robot": 3}}'
    model = scripted([call, call])  # a backend that ignores the schema asks again
    out = ToolAgent(model, warehouse.registry, max_iter=1).run("Where is robot 3?")
    assert (out.reason, out.n_iter) == ("max_iter", 1)
    assert model.schemas[1] == {
        "anyOf": [
            {
                "type": "object",
                "properties": {"type": {"const": "finish"}, "answer": {"type": "string"}},
                "required": ["type", "answer"],
                "additionalProperties": False,
            }
        ]
    }


def test_min_tool_calls_beyond_max_iter_is_refused(scripted, warehouse):
    with pytest.raises(InputError) as e:
        ToolAgent(scripted([]), warehouse.registry, min_tool_calls=3, max_iter=2)
    assert e.value.field == "min_tool_calls"
