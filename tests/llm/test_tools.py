"""Tool registry: schemas from typed functions, argument validation, error summaries."""

from __future__ import annotations

import pydantic
import pytest

from marlm.errors import InputError
from marlm.llm.tools import (
    ToolArgumentError,
    ToolRegistry,
    UnknownToolError,
    cut_middle,
    render_output,
    summarise_exception,
)


def test_schema_from_signature(warehouse):
    schemas = warehouse.registry.schemas()
    assert list(schemas) == ["assign", "order_status", "robot_status"]
    assert schemas["assign"]["required"] == ["robot", "order"]
    assert schemas["assign"]["properties"]["robot"] == {"type": "integer"}
    assert schemas["order_status"]["properties"]["verbose"]["default"] is False
    assert schemas["assign"]["additionalProperties"] is False
    assert "assign(robot: int, order: str, note: str = '')" in warehouse.registry.describe()


def test_validation_names_the_field(warehouse):
    with pytest.raises(ToolArgumentError) as e:
        warehouse.registry.validate("assign", {"robot": "two", "colour": 1})
    assert set(e.value.fields) == {"order", "robot", "colour"}
    assert "field 'robot'" in str(e.value) and '"two"' in str(e.value)
    assert "assign(robot: int" in str(e.value)


def test_unknown_tool_lists_valid_names(warehouse):
    with pytest.raises(UnknownToolError) as e:
        warehouse.registry.validate('assign | {"robot": 2}', {})
    assert "Valid tool names: assign, order_status, robot_status" in str(e.value)


def test_canonical_call_after_coercion(warehouse):
    r = warehouse.registry
    a = r.canonical_call("assign", r.validate("assign", {"robot": "1", "order": "O1"}))
    b = r.canonical_call("assign", r.validate("assign", {"order": "O1", "robot": 1}))
    assert a == b


def test_registration_errors_are_input_errors():
    reg = ToolRegistry()

    def untyped(x):  # noqa: ANN001
        return x

    def star(*args: int) -> int:
        return 0

    with pytest.raises(InputError, match="no type annotation"):
        reg.register(untyped)
    with pytest.raises(InputError, match=r"\*args"):
        reg.register(star)

    def ok(a: int) -> int:
        return a

    reg.register(ok)
    with pytest.raises(InputError, match="already registered"):
        reg.register(ok)


def test_summarise_exception():
    assert summarise_exception(ValueError("no robot 12\nknown robots: 1..9")) == (
        "ValueError: no robot 12"
    )
    assert summarise_exception(KeyError("order")) == "KeyError: missing key 'order' (field 'order')"

    class M(pydantic.BaseModel):
        robot: int

    try:
        M(robot="x")
    except pydantic.ValidationError as e:
        assert "(field 'robot')" in summarise_exception(e)


def test_cut_middle_keeps_head_and_tail():
    text = "H" * 500 + "货" * 1000 + "T" * 500
    cut = cut_middle(text, 300)
    assert len(cut) <= 300
    assert cut.startswith("HHH") and cut.endswith("TTT")
    assert "characters cut" in cut
    assert cut_middle("short", 300) == "short"


def test_render_output_keeps_non_ascii():
    assert render_output({"msg": "货架A-3 已送达 🚚"}) == '{"msg": "货架A-3 已送达 🚚"}'
    assert render_output("货架") == "货架"
