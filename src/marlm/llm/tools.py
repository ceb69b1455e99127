"""Tools a model may call: typed Python functions, their JSON schema, and argument validation.

A tool is a plain function whose parameters all carry type annotations::

    def robot_status(robot: int) -> str:
        "Where robot ``robot`` is and what it carries."

:class:`ToolRegistry` derives a pydantic model from the signature (``extra="forbid"``, defaults kept),
uses its JSON schema in the action schema and the system prompt, and validates the model's
arguments before the function runs. Model mistakes come back as exceptions that carry feedback
written for the model (:class:`UnknownToolError`, :class:`ToolArgumentError`); a tool that raises is
summarised by :func:`summarise_exception` (error type, first line, offending field).
"""

from __future__ import annotations

import inspect
import json
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import pydantic

from marlm.errors import InputError

from .actions import canonical_json


class UnknownToolError(LookupError):
    """The model named a tool that is not registered. ``str(e)`` is the feedback for the model."""

    def __init__(self, name: str, valid: Iterable[str]) -> None:
        self.name = name
        self.valid = sorted(valid)
        super().__init__(
            f"Unknown tool {json.dumps(name, ensure_ascii=False)}. "
            f"Valid tool names: {', '.join(self.valid)}. Use one of these names exactly in 'tool' "
            "and put the arguments in 'args'."
        )


class ToolArgumentError(ValueError):
    """The arguments do not fit the tool's signature. ``str(e)`` is the feedback for the model.

    Attributes:
        tool: the tool name.
        fields: the offending argument names, in the order pydantic reported them.
    """

    def __init__(self, tool: str, errors: list[tuple[str, str]], signature: str) -> None:
        self.tool = tool
        self.fields = [f for f, _ in errors]
        parts = "; ".join(f"field '{f}': {m}" for f, m in errors)
        super().__init__(
            f"Invalid arguments for tool '{tool}': {parts}. The tool's signature is {signature}."
        )


@dataclass(frozen=True)
class Tool:
    """One registered tool.

    Attributes:
        name: the name the model uses.
        description: what the tool does (the function's docstring, first paragraph).
        fn: the Python function.
        args_model: pydantic model of the arguments (``extra="forbid"``).
    """

    name: str
    description: str
    fn: Callable[..., Any]
    args_model: type[pydantic.BaseModel]

    def args_schema(self) -> dict[str, Any]:
        """JSON schema of the ``args`` object: ``type``, ``properties``, ``required``, no extras."""
        full = self.args_model.model_json_schema()
        props = {
            k: {kk: vv for kk, vv in v.items() if kk != "title"}
            for k, v in full.get("properties", {}).items()
        }
        schema: dict[str, Any] = {
            "type": "object",
            "properties": props,
            "additionalProperties": False,
        }
        if full.get("required"):
            schema["required"] = list(full["required"])
        return schema

    def signature(self) -> str:
        """``name(a: int, b: str = 'x')`` for prompts and feedback."""
        params = []
        for p in inspect.signature(self.fn).parameters.values():
            ann = p.annotation
            # An annotation is a class (``int``: its name) or a typing object (``list[int]``,
            # ``int | None``, a string under postponed evaluation: as written).
            tname = ann.__name__ if isinstance(ann, type) else str(ann).replace("typing.", "")
            params.append(
                f"{p.name}: {tname}"
                + ("" if p.default is inspect.Parameter.empty else f" = {p.default!r}")
            )
        return f"{self.name}({', '.join(params)})"


class ToolRegistry:
    """Registered tools by name.

    Use :meth:`register` (also as a decorator: ``@registry.register``) and :meth:`call`.
    """

    def __init__(self, tools: Iterable[Callable[..., Any]] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for fn in tools:
            self.register(fn)

    def register(
        self, fn: Callable[..., Any], *, name: str | None = None, description: str | None = None
    ) -> Callable[..., Any]:
        """Register ``fn`` as a tool; returns ``fn`` unchanged.

        Raises:
            InputError: a parameter without a type annotation, a ``*args``/``**kwargs``
                parameter, or a name already registered.
        """
        tool_name = name or fn.__name__
        if tool_name in self._tools:
            raise InputError(f"tool '{tool_name}' is already registered", field="name")
        try:
            hints = typing.get_type_hints(fn)
        except Exception as e:
            raise InputError(f"cannot read the type hints of {fn!r}: {e}", field=tool_name) from e
        fields: dict[str, Any] = {}
        for p in inspect.signature(fn).parameters.values():
            if p.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
                raise InputError(
                    f"tool '{tool_name}' has *{p.name}; tools take named parameters only",
                    field=p.name,
                )
            if p.name not in hints:
                raise InputError(
                    f"tool '{tool_name}' parameter '{p.name}' has no type annotation; add one",
                    field=p.name,
                )
            default = ... if p.default is inspect.Parameter.empty else p.default
            fields[p.name] = (hints[p.name], default)
        model = pydantic.create_model(
            f"{tool_name}_args", __config__=pydantic.ConfigDict(extra="forbid"), **fields
        )
        doc = inspect.getdoc(fn) or ""
        desc = description or doc.split("\n\n")[0].replace("\n", " ").strip()
        self._tools[tool_name] = Tool(tool_name, desc, fn, model)
        return fn

    @property
    def names(self) -> list[str]:
        """Registered tool names, sorted."""
        return sorted(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def get(self, name: str) -> Tool:
        """The tool called ``name``. Raises :class:`UnknownToolError` (feedback lists valid names)."""
        try:
            return self._tools[name]
        except KeyError:
            raise UnknownToolError(name, self._tools) from None

    def schemas(self) -> dict[str, dict[str, Any]]:
        """Tool name -> JSON schema of its ``args`` (for :func:`marlm.llm.actions.action_schema`)."""
        return {n: self._tools[n].args_schema() for n in self.names}

    def describe(self) -> str:
        """One line per tool, ``signature: description``, for the system prompt."""
        return "\n".join(
            f"- {t.signature()}: {t.description}" for t in (self._tools[n] for n in self.names)
        )

    def validate(self, name: str, args: dict[str, Any]) -> pydantic.BaseModel:
        """Validate ``args`` for tool ``name``.

        Raises:
            UnknownToolError: no such tool.
            ToolArgumentError: missing, unexpected or ill-typed arguments (names each field).
        """
        tool = self.get(name)
        try:
            return tool.args_model.model_validate(args)
        except pydantic.ValidationError as e:
            errs = []
            for err in e.errors():
                field = ".".join(str(x) for x in err["loc"]) or "args"
                msg = err["msg"]
                if err["type"] != "missing" and "input" in err:
                    msg += f" (got {json.dumps(err['input'], ensure_ascii=False, default=str)})"
                errs.append((field, msg))
            raise ToolArgumentError(name, errs, tool.signature()) from e

    def canonical_call(self, name: str, validated: pydantic.BaseModel) -> str:
        """Canonical text of a validated call: ``name`` + arguments with sorted keys, no spaces.

        Two calls that differ only in key order, whitespace or a value pydantic coerces the same way
        (``"1"`` and ``1`` for an ``int``) have the same canonical text.
        """
        return f"{name}{canonical_json(validated.model_dump(mode='json'))}"

    def call(self, name: str, validated: pydantic.BaseModel) -> Any:
        """Run the tool with validated arguments; the tool's own exceptions propagate."""
        tool = self.get(name)
        fields = type(validated).model_fields
        kwargs = {k: v for k, v in validated if k in fields}  # field order, values as validated
        return tool.fn(**kwargs)


def summarise_exception(e: BaseException, limit: int = 300) -> str:
    """Feedback for the model about a tool that raised: error type, first line, offending field.

    ``KeyError`` names the missing key; a pydantic ``ValidationError`` names the first field.
    """
    field = None
    if isinstance(e, KeyError) and e.args:
        field = str(e.args[0])
        first = f"missing key {e.args[0]!r}"
    elif isinstance(e, pydantic.ValidationError) and e.errors():
        err = e.errors()[0]
        field = ".".join(str(x) for x in err["loc"])
        first = err["msg"]
    else:
        first = (str(e).strip().splitlines() or [""])[0]
    text = f"{type(e).__name__}: {first}" if first else type(e).__name__
    if field is not None:
        text += f" (field '{field}')"
    return cut_middle(text, limit)


def cut_middle(text: str, limit: int) -> str:
    """``text`` if it fits in ``limit`` characters, else its head and tail with a marker between.

    The marker says how many characters were cut; head gets 2/3 of the room, tail 1/3. Characters
    are kept as they are (no escaping), so non-ASCII text survives unchanged.
    """
    if len(text) <= limit:
        return text
    marker = f"\n[... {len(text) - limit} characters cut ...]\n"
    room = max(limit - len(marker), 2)
    head = (2 * room) // 3
    tail = room - head
    cut = len(text) - head - tail
    marker = f"\n[... {cut} characters cut ...]\n"
    return text[:head] + marker + text[len(text) - tail :]


def render_output(value: Any) -> str:
    """A tool's return value as text: strings as is, anything else as JSON with non-ASCII kept."""
    if isinstance(value, str):
        return value
    if isinstance(value, pydantic.BaseModel):
        return value.model_dump_json()
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(value)
