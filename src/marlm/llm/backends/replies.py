"""What OpenAI-compatible servers send, read: reply bodies in every shape, error answers sorted
into what to retry and what to give up on, ``Retry-After`` hints, and the schema written into a
prompt for servers that take no structured-output request.

A server's reply is read in any shape OpenAI-compatible servers send (:func:`read_chat_reply`);
one that is no chat completion at all is the server's fault (:class:`MalformedReply`).
"""

from __future__ import annotations

import contextlib
import email.utils
import json
import re
import time
from typing import Any

from ..errors import BackendHTTPError, ContextLengthExceeded, EndpointNotFound, MalformedReply

#: Error texts of a prompt longer than the context (OpenAI, vLLM, llama.cpp, Ollama wordings).
_CONTEXT_LENGTH = re.compile(
    r"context[ _](length|window|size)|maximum context|exceeds? (the )?(available )?context"
    r"|prompt is too long|too many tokens|n_ctx",
    re.IGNORECASE,
)
#: Error texts that reject the structured-output request itself.
_STRUCTURED = re.compile(
    r"response_format|json[_ ]schema|json_object|structured output|guided_json|grammar",
    re.IGNORECASE,
)


class _Rejected(Exception):
    """The server refused the structured-output shape: try the next mode."""


class _Retryable(Exception):
    """A connection error, HTTP 429 or 5xx: worth another attempt after a wait.

    ``status`` is ``None`` for a connection error; ``retry_after`` the server's ``Retry-After``
    in seconds, when it sent one.
    """

    def __init__(self, message: str, status: int | None, retry_after: float | None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


#: Content-part types that carry the answer's text (OpenAI chat, OpenAI responses, vLLM, Mistral).
_TEXT_PARTS = ("text", "output_text")
#: Servers' words for an answer cut off by its token budget, and for a normal end.
_FINISH_WORDS = {
    "length": "length",
    "max_tokens": "length",
    "max_output_tokens": "length",
    "model_length": "length",
    "stop": "stop",
    "eos": "stop",
    "eos_token": "stop",
    "end_turn": "stop",
    "stop_sequence": "stop",
}


def content_text(content: Any, who: str = "the server") -> str:
    """The text of a message's ``content`` in any shape OpenAI-compatible servers send.

    A string is the text; ``None`` is ``""``; a list of content parts (OpenAI's array form,
    vLLM, Mistral's reasoning models) is the concatenation of its text parts (``{"type":
    "text" | "output_text", "text": str | {"value": str}}``, or bare strings), other parts
    (images, reasoning, ``refusal``) left out; a single part object counts as a list of one.

    Raises:
        MalformedReply: a content of another type (a number, a part whose text is not a string).
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = [content] if isinstance(content, dict) else content
    if not isinstance(parts, list):
        raise MalformedReply(
            f"{who} sent message content of type {type(content).__name__}: "
            f"{_short(repr(content))}; expected a string or a list of content parts"
        )
    out: list[str] = []
    for part in parts:
        if isinstance(part, str):
            out.append(part)
            continue
        if not isinstance(part, dict):
            raise MalformedReply(
                f"{who} sent a content part of type {type(part).__name__}: {_short(repr(part))}"
            )
        if part.get("type", "text") not in _TEXT_PARTS:
            continue  # an image, a reasoning trace, a refusal: not the answer's text
        text = part.get("text")
        if isinstance(text, dict):  # {"text": {"value": ..., "annotations": [...]}}
            text = text.get("value")
        if not isinstance(text, str):
            raise MalformedReply(f"{who} sent a text part without a string: {_short(repr(part))}")
        out.append(text)
    return "".join(out)


def _tool_calls(message: dict[str, Any]) -> list[dict[str, str]]:
    """``message``'s tool calls (``tool_calls``, or the older single ``function_call``) as
    ``{"name", "arguments"}`` with the arguments as JSON text; malformed entries left out."""
    calls = message.get("tool_calls")
    if not isinstance(calls, list):
        calls = [{"function": message["function_call"]}] if message.get("function_call") else []
    out = []
    for call in calls:
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            continue
        args = fn.get("arguments")
        if not isinstance(args, str):
            args = json.dumps({} if args is None else args, ensure_ascii=False)
        out.append({"name": fn["name"], "arguments": args})
    return out


def _count(value: Any) -> int:
    """A token count from a usage field: 0 for anything that is not a whole number."""
    try:
        return max(int(value), 0)
    except (TypeError, ValueError, OverflowError):
        return 0


#: Fields in which reasoning models and their servers put the thinking beside the answer
#: (vLLM and llama.cpp: ``reasoning_content``; OpenRouter, Ollama, LM Studio: ``reasoning``,
#: ``thinking``).
_REASONING_FIELDS = ("reasoning_content", "reasoning", "thinking")
#: A thinking block before the answer, as reasoning models write it into the content when the
#: server does not separate it: ``<think>...</think>`` (the opening tag may be in the prompt's
#: template, so only the closing one is required).
_THINK = re.compile(r"^\s*(?:<(think|thinking|reasoning)>)?(.*?)</(think|thinking|reasoning)>\s*",
                    re.DOTALL | re.IGNORECASE)  # fmt: skip
#: Keys under which servers that wrap answers put them (Ollama: ``response``, ``message``;
#: OpenAI's Responses API: ``output``, ``output_text``; proxies: ``result``, ``data``).
_WRAPPERS = ("response", "output_text", "output", "message", "result", "data")


def split_thinking(text: str) -> tuple[str, str]:
    """``(answer, thinking)`` of a text that may start with a thinking block
    (``<think>...</think>``, also ``<thinking>``/``<reasoning>``, the opening tag optional);
    ``(text, "")`` when it has none."""
    m = _THINK.match(text)
    if m is None:
        return text, ""
    return text[m.end() :], m.group(2).strip()


def _reasoning(message: dict[str, Any]) -> str:
    """The thinking a message carries beside its content (:data:`_REASONING_FIELDS`), as text."""
    for key in _REASONING_FIELDS:
        value = message.get(key)
        if isinstance(value, str) and value.strip():
            return value
        if isinstance(value, list | dict):  # parts, or {"text": ...} / {"content": ...}
            items = [value] if isinstance(value, dict) else value
            texts = [
                v if isinstance(v, str) else str(v.get("text") or v.get("content") or "")
                for v in items
                if isinstance(v, str | dict)
            ]
            if "".join(texts).strip():
                return "".join(texts)
    return ""


def _unwrap(data: dict[str, Any], who: str, depth: int = 0) -> dict[str, Any]:
    """A body without ``choices`` that wraps the answer, as a chat completion with one choice:
    Ollama's ``{"response": str}`` (``/api/generate``) and ``{"message": {...}}`` (``/api/chat``),
    OpenAI's Responses API (``{"output": [{"type": "message", "content": [parts]}]}`` or
    ``output_text``), a proxy's ``{"output"|"result"|"data"|"response": <chat completion>}``;
    ``data`` itself when it wraps nothing."""
    for key in _WRAPPERS:
        if key not in data or data.get("choices"):
            continue
        inner = data[key]
        if isinstance(inner, dict) and "choices" in inner and depth < 3:
            return inner  # a whole chat completion wrapped by a proxy
        if isinstance(inner, dict) and any(k in inner for k in _WRAPPERS) and depth < 3:
            return _unwrap(inner, who, depth + 1)
        message: Any
        if isinstance(inner, str):
            message = {"content": inner}
        elif isinstance(inner, dict) and ("content" in inner or "text" in inner):
            message = {**inner, "content": inner.get("content", inner.get("text"))}
        elif isinstance(inner, list) and key == "output":  # the Responses API's output items
            items = [i for i in inner if isinstance(i, dict)]
            contents = [i.get("content") for i in items if i.get("type", "message") == "message"]
            parts = [p for c in contents if isinstance(c, list) for p in c]
            message = {"content": parts, "reasoning": _summaries(items)}
        else:
            continue
        finish = data.get("finish_reason") or data.get("done_reason") or data.get("stop_reason")
        details = data.get("incomplete_details")
        if not finish and isinstance(details, dict):  # Responses API: status "incomplete"
            finish = details.get("reason")
        given = data.get("usage")
        usage: dict[str, Any] = given if isinstance(given, dict) else {}
        return {
            "model": data.get("model"),
            "choices": [{"message": message, "finish_reason": finish}],
            "usage": {
                "prompt_tokens": usage.get(
                    "prompt_tokens", usage.get("input_tokens", data.get("prompt_eval_count"))
                ),
                "completion_tokens": usage.get(
                    "completion_tokens", usage.get("output_tokens", data.get("eval_count"))
                ),
            },
        }
    return data


def _summaries(items: list[dict[str, Any]]) -> str:
    """The text of the Responses API's ``reasoning`` output items (their ``summary`` parts)."""
    out = []
    for item in items:
        if item.get("type") == "reasoning":
            for part in item.get("summary") or []:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    out.append(part["text"])
    return "\n".join(out)


def read_chat_reply(data: Any, who: str) -> dict[str, Any]:
    """Read a chat-completion body in any shape OpenAI-compatible servers send.

    Read: ``choices[0].message.content`` as a string, a list of content parts or ``None``
    (:func:`content_text`); with no content, the message's ``refusal`` (the model declined: its
    text is the answer, which fails validation as the model's mistake) or its tool calls (a
    single call's arguments are the text; every call is in ``tool_calls``); a choice with
    ``text`` (the completions shape) or ``delta`` (a streamed chunk sent whole); a ``usage``
    that is missing, ``null`` or holds non-numbers (counted 0); ``finish_reason`` in other words
    (``max_tokens``, ``eos``, ``end_turn``: :data:`_FINISH_WORDS`) or missing (``stop``).

    Reasoning models: the thinking in ``reasoning_content``, ``reasoning`` or ``thinking`` beside
    the content, or as a ``<think>...</think>`` block before the answer in the content, is not
    the answer: it is returned as ``reasoning`` and the text is what follows. A message whose only
    text is its reasoning (the server put everything there) has that as its text, for validation
    to judge. Bodies that wrap the answer (:func:`_unwrap`: Ollama's native ``response`` and
    ``message``, OpenAI's Responses API ``output``, a proxy's wrapped chat completion) are read too.

    Returns:
        ``{"text": str, "finish_reason": str, "prompt_tokens": int, "completion_tokens": int,
        "model": str, "tool_calls": list, "reasoning": str}``.

    Raises:
        ContextLengthExceeded: the body is an error object that says the prompt is too long.
        MalformedReply: no readable choice: the server's fault, named with the shape it sent.
    """
    if not isinstance(data, dict):
        raise MalformedReply(
            f"{who} answered a JSON {type(data).__name__} instead of a chat completion object: "
            f"{_short(repr(data))}"
        )
    if not data.get("choices") and not data.get("error"):
        data = _unwrap(data, who)
    choices = data.get("choices")
    if not choices and data.get("error"):
        error = data["error"]
        detail = _short(error.get("message") if isinstance(error, dict) else error)
        if _CONTEXT_LENGTH.search(detail):
            raise ContextLengthExceeded(f"{who}: the prompt does not fit the context ({detail})")
        raise MalformedReply(f"{who} answered HTTP 200 with an error: {detail}")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise MalformedReply(
            f"{who} answered without choices[0] (keys: {', '.join(map(str, data)) or 'none'}): "
            f"{_short(json.dumps(data, default=str))}"
        )
    choice = choices[0]
    message = choice.get("message", choice.get("delta"))
    calls: list[dict[str, str]] = []
    reasoning = ""
    if message is None and "text" in choice:
        text = content_text(choice["text"], who)
    elif isinstance(message, str):
        text = message
    elif isinstance(message, dict):
        text = content_text(message.get("content"), who)
        reasoning = _reasoning(message)
        calls = _tool_calls(message)
        if not text.strip():
            refusal = message.get("refusal")
            if isinstance(refusal, str) and refusal.strip():
                text = refusal
            elif len(calls) == 1:
                text = calls[0]["arguments"]
            elif reasoning:  # everything went to the reasoning field: let validation judge it
                text = reasoning
    else:
        raise MalformedReply(
            f"{who} answered a choice without a message object: {_short(json.dumps(choice))}"
        )
    text, thought = split_thinking(text)
    reasoning = "\n".join(t for t in (reasoning, thought) if t and t != text)
    finish = str(choice.get("finish_reason") or "stop").lower()
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    return {
        "text": text,
        "reasoning": reasoning,
        "finish_reason": _FINISH_WORDS.get(finish, finish),
        "prompt_tokens": _count(usage.get("prompt_tokens")),
        "completion_tokens": _count(usage.get("completion_tokens")),
        "model": str(data.get("model") or ""),
        "tool_calls": calls,
    }


def events_body(raw: bytes) -> dict[str, Any] | None:
    """A server-sent-events body (``data: {chunk}`` lines, what a server that streams whatever
    was asked sends) joined into one chat completion; ``None`` when ``raw`` is not one."""
    if not raw.lstrip().startswith(b"data:"):
        return None
    parts: list[str] = []
    last: dict[str, Any] = {}
    finish = None
    for line in raw.decode("utf-8", "replace").splitlines():
        line = line.strip()
        if not line.startswith("data:") or line[5:].strip() == "[DONE]":
            continue
        try:
            chunk = json.loads(line[5:])
        except (json.JSONDecodeError, RecursionError):
            return None
        if not isinstance(chunk, dict):
            return None
        last = chunk
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict):
                continue
            delta = choice.get("delta") or choice.get("message") or {}
            if isinstance(delta, dict):
                parts.append(content_text(delta.get("content")))
            finish = choice.get("finish_reason") or finish
    return {
        "model": last.get("model"),
        "usage": last.get("usage"),
        "choices": [{"message": {"content": "".join(parts)}, "finish_reason": finish}],
    }


#: HTTP statuses that never mean "this response_format is refused": authentication, a wrong
#: URL, a timeout, a rate limit.
_NOT_A_SHAPE_REFUSAL = (401, 403, 404, 408, 429)


def _may_refuse_shape(e: BackendHTTPError) -> bool:
    """Whether an HTTP error to a request with ``response_format`` may be the server refusing
    that shape without naming it (vLLM's or LM Studio's bare 500, a proxy's 502 after its
    backend choked on the schema): any 4xx or 5xx but :data:`_NOT_A_SHAPE_REFUSAL`. A prompt
    longer than the context is :class:`ContextLengthExceeded`, never this."""
    return not isinstance(e, ContextLengthExceeded) and e.status not in _NOT_A_SHAPE_REFUSAL


def schema_prompt(schema: dict[str, Any]) -> str:
    """The instruction appended to the system prompt when the schema cannot be sent to the server."""
    return (
        "Answer with exactly one JSON object and nothing else. It must follow this JSON schema: "
        + json.dumps(schema, ensure_ascii=False, separators=(",", ":"))
    )


def with_schema_prompt(
    messages: list[dict[str, str]], schema: dict[str, Any]
) -> list[dict[str, str]]:
    """``messages`` with :func:`schema_prompt` added to the system message (or as a new one)."""
    out = [dict(m) for m in messages]
    if out and out[0].get("role") == "system":
        out[0]["content"] = out[0]["content"] + "\n\n" + schema_prompt(schema)
    else:
        out.insert(0, {"role": "system", "content": schema_prompt(schema)})
    return out


def retry_after_s(headers: Any, now_epoch: float | None = None) -> float | None:
    """Seconds to wait from a response's ``retry-after-ms`` or ``Retry-After`` header (delta
    seconds or an HTTP date, RFC 9110 section 10.2.3); ``None`` when absent or unreadable."""
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms is not None:
        with contextlib.suppress(ValueError):
            return max(float(ms) / 1000.0, 0.0)
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    now = time.time() if now_epoch is None else now_epoch
    return max(when.timestamp() - now, 0.0)


def status_error(
    name: str, base_url: str, e: Any, kind: str, body: dict[str, Any], url: str
) -> Exception:
    """The typed error for ``e``, an HTTP error answer (an ``openai.APIStatusError``) of the
    server at ``base_url`` (called ``name``) to a ``kind`` request (``chat`` or
    ``completions``) of ``body`` sent to ``url``: :class:`ContextLengthExceeded`, a rejected
    structured-output shape, :class:`EndpointNotFound` for 404, a retryable 429 or 5xx (with
    the server's ``Retry-After``), else :class:`BackendHTTPError` (see
    :class:`~.http.OpenAICompatible`)."""
    status = int(e.status_code)
    detail = _short(e.response.text if e.response is not None else str(e))
    what = f"HTTP {status}: {detail}"
    if status in (400, 413, 422, 500) and _CONTEXT_LENGTH.search(detail):
        # first: a context-length complaint may well quote the request, schema and all
        return ContextLengthExceeded(
            f"{name}: the prompt does not fit the model's context ({what}); "
            "shorten the prompt or raise the server's context size",
            url=url,
        )
    if "response_format" in body and _STRUCTURED.search(detail):
        # llama-cpp-python 0.3.x answers a request-validation error with HTTP 500 (its error
        # handler wraps fastapi's RequestValidationError); a complaint that names the
        # structured-output request is a rejected shape, not a server fault worth retrying.
        return _Rejected(what)
    if status == 404:
        return not_found(base_url, url)
    if kind == "completions" and re.search(r"logprobs|logits_all|echo", detail):
        # llama-cpp-python's server answers 500 to logprobs without logits_all: a refusal
        return BackendHTTPError(f"{name} answered {what}", status=status, url=url)
    if status == 429 or status >= 500:
        headers = e.response.headers if e.response is not None else None
        return _Retryable(what, status, retry_after_s(headers))
    return BackendHTTPError(f"{name} answered {what}", status=status, url=url)


def not_found(base_url: str, url: str) -> EndpointNotFound:
    """The error for a 404 from ``url``, suggesting ``/v1`` when ``base_url`` lacks it."""
    hint = ""
    if not base_url.endswith("/v1"):
        hint = f"; the base URL {base_url} does not end in /v1: try {base_url}/v1"
    return EndpointNotFound(f"{url} answered HTTP 404 Not Found{hint}", status=404, url=url)


def _short(text: object, limit: int = 200) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit] + "..."
