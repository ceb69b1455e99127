"""The single-agent tool loop: a model calls typed tools through JSON actions until it finishes.

One run of :class:`ToolAgent` alternates model calls and tool calls. Whatever the model does, the run
ends in a value (:class:`AgentResult`) with one of these reasons:

- ``answer``: the model sent ``{"type": "finish", ...}``.
- ``max_iter``: the model asked for a tool call beyond ``max_iter`` executed calls (a backend
  that ignores the schema: the next reply's schema then holds ``finish`` only).
- ``max_retry``: more than ``max_retry`` replies that led to no tool call (not one valid JSON
  action, cut off, unknown tool, invalid arguments). Each was fed back with the reason.
- ``repeated_call``: the same call (tool + arguments after canonicalising key order, whitespace and
  pydantic coercion) was repeated ``2 * repeat_k`` times. From the ``repeat_k``-th repeat on, the
  observation tells the model not to call it again and to re-read the tool list.
- ``backend_error`` / ``timeout``: the backend failed (:class:`BackendError` /
  :class:`BackendTimeout`).

Model mistakes are recorded on the step and fed back; the loop continues. What a retry sends
stays bounded (:meth:`ToolAgent.render`): the task, the tool calls that ran, and only the last
rejected reply with its error, earlier rejections summarised in one line. Failures of our code
propagate. The transcript is a list of typed steps; the prompt is rendered from it
(:meth:`ToolAgent.render`), so the prompt is a view of the data. Loop shape after smolagents'
``MultiStepAgent`` (Hugging Face, 2024), with JSON actions instead of code.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from .actions import (
    ACTION_HELP,
    ActionError,
    CallTool,
    Finish,
    action_from_tool_call,
    action_schema,
    parse_action,
)
from .backends import BackendError, BackendTimeout, ChatModel, ChatResult, Message
from .tools import (
    ToolArgumentError,
    ToolRegistry,
    UnknownToolError,
    cut_middle,
    render_output,
    summarise_exception,
)

Reason = Literal["answer", "max_iter", "max_retry", "repeated_call", "backend_error", "timeout"]

DEFAULT_SYSTEM_PROMPT = (
    "You are an agent that solves the user's task by calling tools. "
    "Each reply is exactly one JSON action and nothing else."
)


#: Added to the last observation when the tool calls are spent (the schema holds ``finish``
#: only): what the answer is for, so a small model answers from the tool's output.
FINISH_NOW = (
    "You have made your tool calls. Now finish: answer the task '{task}' with what the tool "
    "returned."
)


@dataclass(frozen=True)
class CallStats:
    """Usage of one model call: tokens (``int``), latency in seconds, finish reason."""

    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    finish_reason: str

    @classmethod
    def of(cls, r: ChatResult) -> CallStats:
        return cls(r.prompt_tokens, r.completion_tokens, r.latency_s, r.finish_reason)


@dataclass
class ToolStep:
    """The model called a tool and it ran (``error`` set when the tool raised)."""

    reply: str
    stats: CallStats
    tool: str
    args: dict[str, Any]
    output: str
    error: str | None = None
    repeats: int = 0
    warning: str | None = None
    kind: Literal["tool"] = "tool"

    def observation(self) -> str:
        """What the model reads next: the output, or the error summary, plus any repeat warning."""
        if self.error is not None:
            text = f"Tool '{self.tool}' raised {self.error}. Fix the arguments or use another tool."
        else:
            text = f"Tool '{self.tool}' returned:\n{self.output}"
        if self.warning:
            text += "\n" + self.warning
        return text

    def to_messages(self) -> list[Message]:
        return [
            {"role": "assistant", "content": self.reply},
            {"role": "user", "content": self.observation()},
        ]


@dataclass
class RetryStep:
    """The reply led to no tool call; ``feedback`` told the model why (counts against max_retry).

    ``error_kind`` is an :class:`ActionError` kind, or ``unknown_tool`` / ``invalid_args``.
    """

    reply: str
    stats: CallStats
    error_kind: str
    feedback: str
    position: int | None = None
    kind: Literal["retry"] = "retry"

    def to_messages(self) -> list[Message]:
        return [
            {"role": "assistant", "content": self.reply},
            {"role": "user", "content": self.feedback},
        ]


@dataclass
class FinishStep:
    """The model finished with ``answer``."""

    reply: str
    stats: CallStats
    answer: str
    kind: Literal["finish"] = "finish"

    def to_messages(self) -> list[Message]:
        return [{"role": "assistant", "content": self.reply}]


@dataclass
class StopStep:
    """The run stopped for ``reason`` (a failure); ``reply`` is the last model text, if any."""

    reason: Reason
    detail: str
    reply: str = ""
    stats: CallStats | None = None
    kind: Literal["stop"] = "stop"

    def to_messages(self) -> list[Message]:
        return [{"role": "assistant", "content": self.reply}] if self.reply else []


Step = ToolStep | RetryStep | FinishStep | StopStep


@dataclass
class AgentResult:
    """The outcome of one run: never an exception for model misbehaviour.

    Attributes:
        reason: ``answer`` or a failure reason (see the module docstring).
        answer: the final answer when ``reason == "answer"``, else ``None``.
        task: the task text.
        steps: the typed transcript.
        calls: one :class:`CallStats` per model call, in order.
        n_iter: tool calls executed.
        n_retry: replies fed back without a tool call.
        detail: for failures, a one-line explanation.
    """

    reason: Reason
    answer: str | None
    task: str
    steps: list[Step]
    calls: list[CallStats]
    n_iter: int
    n_retry: int
    detail: str = ""
    messages: list[Message] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.reason == "answer"

    @property
    def prompt_tokens(self) -> int:
        return sum(c.prompt_tokens for c in self.calls)

    @property
    def completion_tokens(self) -> int:
        return sum(c.completion_tokens for c in self.calls)

    @property
    def latency_s(self) -> float:
        return sum(c.latency_s for c in self.calls)

    def to_records(self) -> list[dict[str, Any]]:
        """The transcript as JSON-ready dicts, one per step (``kind`` names the step type)."""
        return [asdict(s) for s in self.steps]

    def to_jsonl(self) -> str:
        """The transcript as JSON lines, non-ASCII characters kept as they are."""
        return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in self.to_records())


class ToolAgent:
    """A model that calls tools through JSON actions; see the module docstring for the loop.

    Args:
        model: any :class:`ChatModel`.
        tools: the registered tools.
        system_prompt: the role and rules; the tool list and the action format are appended.
        max_iter: most tool calls executed in one run (>= 1). Once they are spent, the schema
            sent holds the ``finish`` action only, so a schema-constrained backend answers from
            what its tools returned (smolagents asks for a final answer at ``max_steps`` the same
            way); a reply that asks for another tool anyway ends the run with ``max_iter``.
        max_retry: most replies fed back without a tool call (>= 0).
        repeat_k: repeats of one call before the warning; ``2 * repeat_k`` repeats stop the run.
        max_tokens: bound on each model answer.
        temperature: sampling temperature (0 = greedy).
        seed: sampler seed passed to the backend.
        max_output_chars: tool outputs longer than this are cut head-and-tail.
        max_reply_chars: a rejected reply shown again to the model is cut head-and-tail to this.
        use_schema: send the action schema to the backend (grammar / structured output).
        min_tool_calls: tool calls the model must make before it may finish (>= 0): until then
            the schema sent holds the tool calls only, so a schema-constrained backend (the
            embedded model's grammar) cannot finish at once with a made-up answer. Small models
            need it (SmolLM2-135M finishes at once without it); a reply that finishes anyway
            (a backend that ignores the schema) is taken as the answer.

    Raises:
        InputError: a limit out of range.
    """

    def __init__(
        self,
        model: ChatModel,
        tools: ToolRegistry,
        *,
        system_prompt: str = DEFAULT_SYSTEM_PROMPT,
        max_iter: int = 8,
        max_retry: int = 3,
        repeat_k: int = 2,
        max_tokens: int = 128,
        temperature: float = 0.0,
        seed: int | None = None,
        max_output_chars: int = 1500,
        max_reply_chars: int = 300,
        use_schema: bool = True,
        min_tool_calls: int = 0,
    ) -> None:
        from marlm.errors import InputError

        for name, value, low in (
            ("max_iter", max_iter, 1),
            ("max_retry", max_retry, 0),
            ("repeat_k", repeat_k, 1),
            ("max_tokens", max_tokens, 1),
            ("max_output_chars", max_output_chars, 80),
            ("max_reply_chars", max_reply_chars, 80),
            ("min_tool_calls", min_tool_calls, 0),
        ):
            if not isinstance(value, int) or value < low:
                raise InputError(f"must be an integer >= {low}, got {value!r}", field=name)
        if min_tool_calls > max_iter:
            raise InputError(
                f"must be at most max_iter ({max_iter}), got {min_tool_calls}",
                field="min_tool_calls",
            )
        self.model = model
        self.tools = tools
        self.system_prompt = system_prompt
        self.max_iter = max_iter
        self.max_retry = max_retry
        self.repeat_k = repeat_k
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.seed = seed
        self.max_output_chars = max_output_chars
        self.max_reply_chars = max_reply_chars
        self.min_tool_calls = min_tool_calls
        self.schema = action_schema(tools.schemas()) if use_schema else None
        self.tools_only = action_schema(tools.schemas(), finish=False) if use_schema else None
        self.finish_only = action_schema({}) if use_schema else None

    def system_message(self) -> str:
        """The system prompt with the tool list and the action format."""
        return (
            f"{self.system_prompt}\n\nTools:\n{self.tools.describe()}\n\n{ACTION_HELP}"
            ' When you know the answer, send {"type": "finish", "answer": "..."}.'
        )

    def schema_for(self, n_iter: int) -> dict[str, Any] | None:
        """The action schema of the next reply after ``n_iter`` tool calls: tool calls only
        before ``min_tool_calls``, ``finish`` only once ``max_iter`` are spent, else both
        (``None`` without ``use_schema``)."""
        if n_iter < self.min_tool_calls:
            return self.tools_only
        if n_iter >= self.max_iter:
            return self.finish_only
        return self.schema

    def render(self, task: str, steps: list[Step]) -> list[Message]:
        """The messages for the next model call: system, task, then the steps' messages.

        What a retry sends stays bounded: replies that led to no tool call are not replayed, except
        the last one when it is the latest step (its reply, cut to ``max_reply_chars``, and its
        feedback); the retries before it in the same run of failures are summarised in one line
        (their number and error kinds). Tool calls that ran are all kept (at most ``max_iter``).
        The transcript (:attr:`AgentResult.steps`) keeps every step; the prompt is a view of it.
        """
        messages: list[Message] = [
            {"role": "system", "content": self.system_message()},
            {"role": "user", "content": task},
        ]
        trailing = 0  # retries at the end of the transcript
        for s in reversed(steps):
            if not isinstance(s, RetryStep):
                break
            trailing += 1
        for i, s in enumerate(steps):
            if isinstance(s, RetryStep):
                if i == len(steps) - 1:
                    messages.extend(self._retry_messages(s, steps[i - trailing + 1 : i]))
                continue
            messages.extend(s.to_messages())
        return messages

    def _retry_messages(self, last: RetryStep, earlier: list[Step]) -> list[Message]:
        """The last rejected reply and its feedback, with earlier rejections in one line."""
        feedback = last.feedback
        if earlier:
            kinds = Counter(s.error_kind for s in earlier if isinstance(s, RetryStep))
            summary = ", ".join(f"{k} x{n}" for k, n in kinds.most_common())
            n = len(earlier)
            feedback += f"\n({n} earlier {'reply' if n == 1 else 'replies'} rejected: {summary}.)"
        return [
            {"role": "assistant", "content": cut_middle(last.reply, self.max_reply_chars)},
            {"role": "user", "content": feedback},
        ]

    def run(self, task: str) -> AgentResult:
        """Run the loop on ``task`` until an answer or a failure reason; never raises for the model.

        Raises:
            Exceptions from our own code only (a bug), never for model or backend misbehaviour.
        """
        steps: list[Step] = []
        calls: list[CallStats] = []
        seen: Counter[str] = Counter()
        n_iter = n_retry = 0

        def done(reason: Reason, answer: str | None = None, detail: str = "") -> AgentResult:
            return AgentResult(
                reason,
                answer,
                task,
                steps,
                calls,
                n_iter,
                n_retry,
                detail,
                self.render(task, steps),
            )

        while True:
            schema = self.schema_for(n_iter)
            messages = self.render(task, steps)
            if schema is not None and schema is self.finish_only:
                messages[-1] = {
                    **messages[-1],
                    "content": messages[-1]["content"] + "\n\n" + FINISH_NOW.format(task=task),
                }
            try:
                result = self.model.chat(
                    messages,
                    schema=schema,
                    max_tokens=self.max_tokens,
                    temperature=self.temperature,
                    seed=self.seed,
                )
            except BackendTimeout as e:
                steps.append(StopStep("timeout", str(e)))
                return done("timeout", detail=str(e))
            except BackendError as e:
                steps.append(StopStep("backend_error", str(e)))
                return done("backend_error", detail=str(e))
            stats = CallStats.of(result)
            calls.append(stats)
            step = self._step(result, stats, seen, n_iter)
            if isinstance(step, RetryStep):
                n_retry += 1
                if n_retry > self.max_retry:
                    detail = f"{n_retry} replies without a valid tool call; last: {step.feedback}"
                    steps.append(StopStep("max_retry", detail, step.reply, stats))
                    return done("max_retry", detail=detail)
            elif isinstance(step, ToolStep):
                n_iter += 1
            steps.append(step)
            if isinstance(step, FinishStep):
                return done("answer", answer=step.answer)
            if isinstance(step, StopStep):
                return done(step.reason, detail=step.detail)

    def _step(self, result: ChatResult, stats: CallStats, seen: Counter[str], n_iter: int) -> Step:
        """Turn one model reply into one step: parse, validate, check repeats, run the tool."""
        reply = result.text
        action = parse_action(reply, finish_reason=result.finish_reason)
        calls = result.extra.get("tool_calls") or []
        if isinstance(action, ActionError) and len(calls) == 1:
            # the server answered with a native tool call instead of text
            action = action_from_tool_call(calls[0]) or action
        if isinstance(action, ActionError):
            return RetryStep(reply, stats, action.kind, action.message, action.position)
        if isinstance(action, Finish):
            return FinishStep(reply, stats, action.answer)
        if not isinstance(action, CallTool):  # pragma: no cover - parse_action returns 3 types
            raise TypeError(f"unexpected action {action!r}")
        try:
            validated = self.tools.validate(action.tool, action.args)
        except UnknownToolError as e:
            return RetryStep(reply, stats, "unknown_tool", str(e))
        except ToolArgumentError as e:
            return RetryStep(reply, stats, "invalid_args", str(e))
        key = self.tools.canonical_call(action.tool, validated)
        repeats = seen[key]
        if repeats >= 2 * self.repeat_k:
            return StopStep(
                "repeated_call",
                f"call {key} repeated {repeats} times (limit {2 * self.repeat_k})",
                reply,
                stats,
            )
        if n_iter >= self.max_iter:
            return StopStep(
                "max_iter", f"{n_iter} tool calls made, limit {self.max_iter}", reply, stats
            )
        seen[key] += 1
        warning = None
        if repeats >= self.repeat_k:
            warning = (
                f"You have already made exactly this call {repeats} times and got the same kind "
                "of answer. Do not call it again with these arguments. Re-read the tool list: "
                f"{', '.join(self.tools.names)}. Call a different tool, or finish."
            )
        args = validated.model_dump(mode="json")
        try:
            output = self.tools.call(action.tool, validated)
        except Exception as e:  # the tool's failure is fed back to the model
            return ToolStep(
                reply, stats, action.tool, args, "", summarise_exception(e), repeats, warning
            )
        text = cut_middle(render_output(output), self.max_output_chars)
        return ToolStep(reply, stats, action.tool, args, text, None, repeats, warning)
