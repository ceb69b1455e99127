"""Parsing replies into exactly one action; client-side schema validation."""

from __future__ import annotations

import json

import pytest

from marlm.llm.actions import (
    ActionError,
    CallTool,
    Finish,
    action_schema,
    canonical_json,
    parse_action,
    validate_answer,
    validate_json,
)

VALID = '{"type": "call_tool", "tool": "robot_status", "args": {"robot": 1}}'


def test_single_quotes_are_not_json_and_the_position_is_given():  # case 1
    err = parse_action("{'type': 'call_tool', 'tool': 'robot_status', 'args': {'robot': 1}}")
    assert isinstance(err, ActionError)
    assert err.kind == "not_json"
    assert (err.position, err.line, err.column) == (1, 1, 2)
    assert "not JSON" in err.message and "double quotes" in err.message


@pytest.mark.parametrize(
    "text",
    [
        f"Action:\n{VALID}\n\nI call robot_status to learn where robot 1 is.",
        f"Here you go:\n```json\n{VALID}\n```\n",
    ],
)
def test_one_object_with_prose_or_fence_is_accepted(text):  # case 2
    assert parse_action(text) == CallTool("robot_status", {"robot": 1})


def test_two_objects_back_to_back_are_rejected():  # case 3
    err = parse_action(VALID + VALID)
    assert isinstance(err, ActionError)
    assert err.kind == "multiple_objects"
    assert err.position == len(VALID)
    assert "exactly one action" in err.message


def test_schema_instead_of_action_names_missing_fields():  # case 4
    schema_text = json.dumps(action_schema({"robot_status": {"type": "object"}})["anyOf"][0])
    err = parse_action(schema_text)
    assert isinstance(err, ActionError)
    assert err.kind == "invalid_action"
    assert "'tool'" in err.message and "'args'" in err.message and "'answer'" in err.message
    assert "schema itself" in err.message


def test_cut_off_reply_says_cut_off():  # case 7
    text = '{"type": "call_tool", "tool": "assign", "args": {"robot": 3, "order": '
    err = parse_action(text, finish_reason="length")
    assert isinstance(err, ActionError)
    assert err.kind == "truncated"
    assert "cut off" in err.message
    # also recognised without the finish reason: the error sits at the end of the text
    assert parse_action(text).kind == "truncated"


@pytest.mark.parametrize("args", ['""', "null", None])
def test_empty_or_missing_args_mean_no_arguments(args):  # case 8
    body = '{"type": "call_tool", "tool": "list_robots"' + (f', "args": {args}' if args else "")
    assert parse_action(body + "}") == CallTool("list_robots", {})


def test_args_as_json_string_is_decoded_but_other_types_rejected():
    assert parse_action('{"type":"call_tool","tool":"t","args":"{\\"a\\": 1}"}') == CallTool(
        "t", {"a": 1}
    )
    err = parse_action('{"type":"call_tool","tool":"t","args":[1]}')
    assert isinstance(err, ActionError) and "'args' must be a JSON object" in err.message


def test_finish_and_empty_and_no_object():
    assert parse_action('{"type": "finish", "answer": "机器人1号 已完成"}') == Finish(
        "机器人1号 已完成"
    )
    assert parse_action("   ").kind == "empty"
    assert parse_action("I will call robot_status now.").kind == "not_object"


def test_error_position_on_a_later_line():
    err = parse_action('Action:\n{"type": "finish",\n "answer": oops}')
    assert isinstance(err, ActionError)
    assert (err.line, err.column) == (3, 12)


def test_validate_json_subset():
    schema = action_schema(
        {
            "assign": {
                "type": "object",
                "properties": {"robot": {"type": "integer"}, "order": {"type": "string"}},
                "required": ["robot", "order"],
                "additionalProperties": False,
            }
        }
    )
    ok = {"type": "call_tool", "tool": "assign", "args": {"robot": 1, "order": "O1"}}
    assert validate_json(ok, schema) == []
    bad = {"type": "call_tool", "tool": "assign", "args": {"robot": "x"}}
    errors = validate_json(bad, schema)
    assert any("$.args.robot" in e for e in errors)
    assert any("missing field 'order'" in e for e in errors)
    assert validate_json(True, {"type": "integer"}) != []
    assert validate_answer('{"score": 2}', {"properties": {"score": {"enum": [-1, 0, 1]}}})
    assert "cut off" in validate_answer('{"score": ', {"type": "object"}, "length")


def test_canonical_json_ignores_order_and_spacing_and_keeps_non_ascii():
    a = json.loads('{"order": "O7", "verbose": true}')
    b = json.loads('{ "verbose":true,\n  "order" : "O7"}')
    assert canonical_json(a) == canonical_json(b) == '{"order":"O7","verbose":true}'
    assert canonical_json({"n": "货架"}) == '{"n":"货架"}'
