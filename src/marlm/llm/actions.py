"""The JSON action a tool-using model may send, how a reply is parsed, and what it is told when wrong.

A model answers with exactly one JSON object, one of:

    {"type": "call_tool", "tool": "<registered name>", "args": {...}}
    {"type": "finish", "answer": "<text>"}

:func:`parse_action` turns a reply text into a :class:`CallTool` or :class:`Finish`, or into an
:class:`ActionError` whose ``message`` is written for the model (what was wrong, where, and what a
valid reply looks like). Parsing is strict JSON (no Python-literal guessing: a reply in single quotes
is rejected and the model is told why), but tolerant of what surrounds the one object: prose before
or after it, or a fenced code block, as long as exactly one JSON object is present.

:func:`validate_json` checks a decoded value against the subset of JSON Schema that the action and
team schemas use (``type``, ``properties``, ``required``, ``additionalProperties``, ``enum``,
``const``, ``items``, ``anyOf``/``oneOf``, ``minimum``/``maximum``, ``minLength``/``maxLength``);
backends use it to validate every structured answer client-side, whatever the server promised.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

ErrorKind = Literal[
    "empty", "not_json", "truncated", "multiple_objects", "not_object", "invalid_action", "too_deep"
]

_DECODER = json.JSONDecoder()

#: Deepest nesting of arrays and objects accepted in a model's answer. Python's JSON decoder and
#: every recursive check after it fail on deep nesting (``RecursionError`` near 1000 levels); no
#: answer of ours needs more than a handful of levels.
MAX_JSON_DEPTH = 64


class TooDeep(json.JSONDecodeError):
    """The text nests arrays/objects deeper than :data:`MAX_JSON_DEPTH` (at ``pos``)."""


def nesting_depth(text: str, limit: int = MAX_JSON_DEPTH) -> tuple[int, int]:
    """Deepest nesting of ``[``/``{`` in ``text`` outside JSON strings, scanning left to right.

    Returns:
        ``(depth, pos)``: the depth reached, and the offset where it first exceeded ``limit``
        (``-1`` when it did not). Stops scanning at the first excess.
    """
    depth = best = 0
    in_str = escaped = False
    for i, ch in enumerate(text):
        if in_str:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            if depth > best:
                best = depth
                if best > limit:
                    return best, i
        elif ch in "]}" and depth > 0:
            depth -= 1
    return best, -1


def _too_deep(text: str) -> TooDeep | None:
    _, pos = nesting_depth(text)
    if pos < 0:
        return None
    return TooDeep(f"arrays/objects nested more than {MAX_JSON_DEPTH} levels deep", text, pos)


def loads_answer(text: str) -> Any:
    """``json.loads`` for a model's answer: never a ``RecursionError``.

    Raises:
        json.JSONDecodeError: not JSON, or nested deeper than :data:`MAX_JSON_DEPTH`
            (:class:`TooDeep`, a subclass).
    """
    deep = _too_deep(text)
    if deep is not None:
        raise deep
    return json.loads(text)


@dataclass(frozen=True)
class CallTool:
    """The model asks to call ``tool`` with ``args`` (a JSON object, keys are parameter names)."""

    tool: str
    args: dict[str, Any]


@dataclass(frozen=True)
class Finish:
    """The model ends the run with ``answer``."""

    answer: str


Action = CallTool | Finish


@dataclass(frozen=True)
class ActionError:
    """Why a reply is not exactly one valid action.

    Attributes:
        kind: one of ``empty``, ``not_json``, ``truncated`` (cut off by ``max_tokens``),
            ``multiple_objects``, ``not_object``, ``invalid_action``, ``too_deep`` (brackets
            nested deeper than :data:`MAX_JSON_DEPTH`).
        message: the feedback for the model (one paragraph, names the position or the fields).
        position: 0-based character offset in the reply where the error was found, or ``None``.
        line: 1-based line of ``position`` in the reply, or ``None``.
        column: 1-based column of ``position``, or ``None``.
    """

    kind: ErrorKind
    message: str
    position: int | None = None
    line: int | None = None
    column: int | None = None


ACTION_HELP = (
    'Reply with exactly one JSON object, either {"type": "call_tool", "tool": "<tool name>", '
    '"args": {...}} or {"type": "finish", "answer": "<text>"}.'
)


def _line_col(text: str, pos: int) -> tuple[int, int]:
    line = text.count("\n", 0, pos) + 1
    col = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return line, col


def find_json_objects(text: str) -> tuple[list[tuple[int, Any]], json.JSONDecodeError | None]:
    """Find the JSON objects that appear in ``text``, in order.

    Scans for ``{``; at each one tries a strict JSON decode; a decoded object is recorded with its
    start offset and the scan continues after it. Text between objects is skipped.

    Returns:
        ``(objects, first_error)``: ``objects`` is a list of ``(start_offset, value)``;
        ``first_error`` is the decode error at the first ``{`` that did not start valid JSON
        (``None`` if every ``{`` tried started a valid object). Positions in the error are offsets
        into ``text``. A text nested deeper than :data:`MAX_JSON_DEPTH` gives no objects and a
        :class:`TooDeep` error (nothing is decoded, so nothing raises ``RecursionError``).
    """
    deep = _too_deep(text)
    if deep is not None:
        return [], deep
    found: list[tuple[int, Any]] = []
    first_error: json.JSONDecodeError | None = None
    pos = text.find("{")
    while pos != -1:
        try:
            value, end = _DECODER.raw_decode(text, pos)
        except json.JSONDecodeError as e:
            if first_error is None:
                first_error = e
            pos = text.find("{", pos + 1)
            continue
        found.append((pos, value))
        pos = text.find("{", end)
    return found, first_error


def parse_action(text: str, *, finish_reason: str = "stop") -> Action | ActionError:
    """Parse a model reply into exactly one action.

    Args:
        text: the reply as the model produced it.
        finish_reason: the backend's finish reason; ``"length"`` means the reply was cut off by
            ``max_tokens``, which turns an incomplete object into an error of kind ``truncated``.

    Returns:
        :class:`CallTool` or :class:`Finish` when the reply holds exactly one valid action object
        (surrounding prose and code fences are ignored); otherwise an :class:`ActionError`.
        Never raises for model output.
    """
    if not text.strip():
        return ActionError("empty", f"Your reply was empty. {ACTION_HELP}")
    objects, error = find_json_objects(text)
    if isinstance(error, TooDeep):
        line, col = _line_col(text, error.pos)
        return ActionError(
            "too_deep",
            f"Your reply nests brackets more than {MAX_JSON_DEPTH} levels deep (at line {line} "
            f"column {col}). An action needs only a few levels. {ACTION_HELP}",
            error.pos,
            line,
            col,
        )
    if not objects:
        start = text.find("{")
        if error is not None:
            line, col = _line_col(text, error.pos)
            cut = error.pos >= len(text.rstrip()) or finish_reason == "length"
            if cut:
                end_line, end_col = _line_col(text, len(text))
                return ActionError(
                    "truncated",
                    "Your reply was cut off before the JSON object was complete (it stops at "
                    f"line {end_line} column {end_col}; {error.msg} at line {line} column {col}). "
                    f"Send a shorter action. {ACTION_HELP}",
                    error.pos,
                    line,
                    col,
                )
            hint = ""
            if text[error.pos : error.pos + 1] == "'" or "'" in text[start : error.pos + 1]:
                hint = " JSON needs double quotes around keys and strings, not single quotes."
            return ActionError(
                "not_json",
                f"Your reply is not JSON: {error.msg} at line {line} column {col} "
                f"(character {error.pos}).{hint} {ACTION_HELP}",
                error.pos,
                line,
                col,
            )
        return ActionError("not_object", f"Your reply holds no JSON object. {ACTION_HELP}")
    if len(objects) > 1:
        pos = objects[1][0]
        line, col = _line_col(text, pos)
        return ActionError(
            "multiple_objects",
            f"Your reply holds {len(objects)} JSON objects (the second starts at line {line} "
            f"column {col}). Send exactly one action per reply.",
            pos,
            line,
            col,
        )
    pos, value = objects[0]
    line, col = _line_col(text, pos)
    return action_from_value(value, position=pos, line=line, column=col)


def action_from_value(
    value: Any, *, position: int | None = None, line: int | None = None, column: int | None = None
) -> Action | ActionError:
    """Check one decoded JSON value as an action; see :func:`parse_action`.

    ``args`` given as ``""``, ``null`` or missing means no arguments; ``args`` given as a string that
    holds a JSON object is decoded.
    """

    def bad(msg: str) -> ActionError:
        return ActionError("invalid_action", msg, position, line, column)

    if not isinstance(value, dict):
        return bad(f"Your reply must be a JSON object, not {type(value).__name__}. {ACTION_HELP}")
    kind = value.get("type")
    if kind == "finish":
        if "answer" not in value:
            return bad(f"Missing field 'answer' in the finish action. {ACTION_HELP}")
        answer = value["answer"]
        if not isinstance(answer, str):
            answer = json.dumps(answer, ensure_ascii=False)
        return Finish(answer)
    if kind == "call_tool":
        tool = value.get("tool")
        if not isinstance(tool, str) or not tool.strip():
            return bad(
                "Missing field 'tool' (a tool name as a string) in the call_tool action. "
                + ACTION_HELP
            )
        args = value.get("args")
        if args is None or (isinstance(args, str) and not args.strip()):
            args = {}
        elif isinstance(args, str):
            try:
                args = loads_answer(args)
            except json.JSONDecodeError:
                return bad("Field 'args' must be a JSON object of argument names to values.")
        if not isinstance(args, dict):
            return bad(
                f"Field 'args' must be a JSON object of argument names to values, "
                f"not {type(args).__name__}."
            )
        return CallTool(tool.strip(), args)
    missing = [f for f in ("type", "tool", "args") if f not in value]
    if kind is None:
        msg = "Missing field 'type'"
    else:
        msg = f"Field 'type' must be 'call_tool' or 'finish', got {json.dumps(kind, ensure_ascii=False)}"
    if "properties" in value or kind == "object":
        msg += (
            "; your reply looks like a JSON schema. Send an action that follows the schema, "
            "not the schema itself"
        )
    present = sorted(k for k in value if k not in ("type",))
    msg += (
        f". Missing fields: {', '.join(repr(m) for m in missing) or 'none'} for call_tool, "
        f"or 'answer' for finish (fields present: {', '.join(map(repr, present)) or 'none'}). "
        + ACTION_HELP
    )
    return bad(msg)


def action_from_tool_call(call: dict[str, Any]) -> Action | None:
    """The action in a server's native tool call (``{"name", "arguments"}``, arguments as JSON
    text), for a reply that came as a tool call instead of text: arguments that are themselves
    an action object are that action; a call named ``finish`` finishes with its ``answer``; any
    other call is a :class:`CallTool` of that name. ``None`` when the arguments are not a JSON
    object (the reply's text is then fed back as it is)."""
    try:
        args = loads_answer(call.get("arguments") or "{}")
    except json.JSONDecodeError:
        return None
    if not isinstance(args, dict):
        return None
    name = str(call.get("name") or "").strip()
    if args.get("type") in ("call_tool", "finish"):
        action = action_from_value(args)
        return None if isinstance(action, ActionError) else action
    if name == "finish" and isinstance(args.get("answer"), str):
        return Finish(args["answer"])
    return CallTool(name, args) if name else None


def action_schema(tools: dict[str, dict[str, Any]], *, finish: bool = True) -> dict[str, Any]:
    """JSON schema of one action, given each tool's argument schema.

    Args:
        tools: tool name -> JSON schema of its ``args`` object (as produced by the tool registry);
            ``{}`` for the ``finish`` action alone.
        finish: include the ``finish`` action; without it the schema allows tool calls only (what
            OpenAI's ``tool_choice="required"`` asks of a server).

    Returns:
        An ``anyOf`` of one ``call_tool`` object per tool (``tool`` a ``const`` of that name, so the
        names form an enum, and ``args`` that tool's schema) plus the ``finish`` object. Suitable for
        ``LlamaGrammar.from_json_schema`` and for a server's structured-output request.
    """
    variants: list[dict[str, Any]] = []
    for name, args_schema in tools.items():
        variants.append(
            {
                "type": "object",
                "properties": {
                    "type": {"const": "call_tool"},
                    "tool": {"const": name},
                    "args": args_schema,
                },
                "required": ["type", "tool", "args"],
                "additionalProperties": False,
            }
        )
    if finish:
        variants.append(
            {
                "type": "object",
                "properties": {"type": {"const": "finish"}, "answer": {"type": "string"}},
                "required": ["type", "answer"],
                "additionalProperties": False,
            }
        )
    return {"anyOf": variants}


_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
}


def validate_json(value: Any, schema: dict[str, Any], path: str = "$") -> list[str]:
    """Check ``value`` against ``schema`` (the subset listed in the module docstring).

    Returns:
        A list of error strings, each naming the JSON path (``$.args.robot``); empty when valid.
        ``$ref`` and keywords outside the subset are not checked.
    """
    errors: list[str] = []
    if "anyOf" in schema or "oneOf" in schema:
        options = schema.get("anyOf") or schema.get("oneOf") or []
        branch_errors = [validate_json(value, s, path) for s in options]
        if not any(not e for e in branch_errors):
            best = min(branch_errors, key=len) if branch_errors else []
            errors.append(f"{path}: matches none of the {len(options)} allowed shapes")
            errors.extend(best)
        return errors
    if "const" in schema and value != schema["const"]:
        return [f"{path}: must be {json.dumps(schema['const'], ensure_ascii=False)}"]
    if "enum" in schema and value not in schema["enum"]:
        allowed = ", ".join(json.dumps(v, ensure_ascii=False) for v in schema["enum"])
        return [f"{path}: must be one of {allowed}, got {json.dumps(value, ensure_ascii=False)}"]
    typ = schema.get("type")
    if typ is not None:
        types = [typ] if isinstance(typ, str) else list(typ)
        ok = False
        for t in types:
            py = _TYPES.get(t)
            if py is None:
                ok = True
                break
            if isinstance(value, bool) and t in ("integer", "number"):
                continue
            if t == "integer" and isinstance(value, float) and value.is_integer():
                ok = True
                break
            if isinstance(value, py):
                ok = True
                break
        if not ok:
            return [f"{path}: must be of type {'/'.join(types)}, got {type(value).__name__}"]
    if isinstance(value, dict):
        props = schema.get("properties", {})
        for req in schema.get("required", []):
            if req not in value:
                errors.append(f"{path}: missing field '{req}'")
        for key, sub in value.items():
            if key in props:
                errors.extend(validate_json(sub, props[key], f"{path}.{key}"))
            elif schema.get("additionalProperties") is False:
                errors.append(f"{path}: unexpected field '{key}'")
            elif isinstance(schema.get("additionalProperties"), dict):
                errors.extend(validate_json(sub, schema["additionalProperties"], f"{path}.{key}"))
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            errors.extend(validate_json(item, schema["items"], f"{path}[{i}]"))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(f"{path}: must be >= {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            errors.append(f"{path}: must be <= {schema['maximum']}")
    if isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            errors.append(f"{path}: must have at least {schema['minLength']} characters")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errors.append(f"{path}: must have at most {schema['maxLength']} characters")
    return errors


def validate_answer(text: str, schema: dict[str, Any], finish_reason: str = "stop") -> str | None:
    """Client-side check of a structured answer: exactly one JSON value that follows ``schema``.

    Returns:
        ``None`` when valid, else a one-line reason (not JSON / cut off / schema errors).
    """
    stripped = text.strip()
    try:
        value = loads_answer(stripped)
    except TooDeep as e:
        return f"answer is not usable JSON: {e.msg} at character {e.pos}"
    except json.JSONDecodeError as e:
        objects, _ = find_json_objects(text)
        if len(objects) != 1:
            where = "cut off" if finish_reason == "length" or e.pos >= len(stripped) else "not JSON"
            return f"answer is {where}: {e.msg} at character {e.pos}"
        value = objects[0][1]
    errs = validate_json(value, schema)
    return "; ".join(errs[:5]) if errs else None


def canonical_json(value: Any) -> str:
    """Canonical text of a JSON value: sorted keys, no whitespace, non-ASCII kept as is."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def names_list(names: Sequence[str]) -> str:
    """``"a, b, c"`` for feedback messages."""
    return ", ".join(names)
