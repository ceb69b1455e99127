"""Several role agents on one backend, exchanging structured messages until the coordinator is done.

Each role keeps its own message list (its context). On its turn a role answers with one JSON object
``{"recipient": ..., "phase": ..., "content": ...}``; the team fills in ``sender`` (a role cannot
speak for another) and delivers the :class:`TeamMessage` to the recipient's context (or to every
other role for recipient ``all``). ``phase`` is one of ``discuss | decide | execute | done``.

Stopping is structural, never textual: the run ends only when the coordinator sends phase ``done``
(reason ``done``; its content is the team's answer). A ``done`` from any other role is delivered
like any message and ends nothing, and no word inside any content (``DONE``, ``任务完成``, ...) is
looked at. Rounds (every role speaks once, in the given order) are capped by ``max_rounds``
(reason ``max_rounds``). Backend failures end the run with ``backend_error`` / ``timeout``.

A role with tools is an executor: on its turn a :class:`~marlm.llm.agent.ToolAgent` runs on the
messages it received; the tool transcript stays in :attr:`TeamResult.tool_runs` and only the
executor's reply (phase ``execute``, to the coordinator) goes across. Pattern after the
coordinator/worker teams of AutoGen (Wu et al., 2023, "AutoGen: Enabling Next-Gen LLM Applications
via Multi-Agent Conversation") with explicit phases instead of a termination keyword.

Using it for a domain: give the coordinator instructions that say what its final ``done`` content
must hold and a ``content_schema`` (e.g. a ranked list of order ids), and a ``validate`` hook for
checks a schema cannot express (ids that exist); a failing check is fed back to that role and
retried. The caller reads :attr:`TeamResult.answer` (the coordinator's ``done`` content, decoded).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from marlm.errors import InputError

from .actions import find_json_objects, validate_json
from .agent import AgentResult, CallStats, ToolAgent
from .backends import BackendError, BackendTimeout, ChatModel, Message
from .tools import ToolRegistry

Phase = Literal["discuss", "decide", "execute", "done"]
PHASES: tuple[str, ...] = ("discuss", "decide", "execute", "done")
TeamReason = Literal["done", "max_rounds", "backend_error", "timeout"]


@dataclass(frozen=True)
class TeamMessage:
    """One message between roles. ``content`` is a string or, with a content schema, a JSON value."""

    sender: str
    recipient: str
    phase: Phase
    content: Any
    round: int = 0

    def render(self) -> str:
        """How the recipient reads it: ``[from X, phase P] content`` (non-ASCII kept as is)."""
        body = (
            self.content
            if isinstance(self.content, str)
            else json.dumps(self.content, ensure_ascii=False)
        )
        return f"[from {self.sender} to {self.recipient}, phase {self.phase}] {body}"


@dataclass
class Role:
    """One member of a team.

    Attributes:
        name: unique role name (``coordinator``, ``dispatcher``, ...); also the address.
        instructions: the role's system prompt (what it decides, what its content holds).
        tools: when set, the role is an executor that runs a ToolAgent on its turn.
        content_schema: JSON schema of ``content``; default a string.
        validate: optional domain check of a message; returns an error text (fed back, retried)
            or ``None``.
        agent_options: keyword arguments for the executor's :class:`ToolAgent`.
    """

    name: str
    instructions: str
    tools: ToolRegistry | None = None
    content_schema: dict[str, Any] | None = None
    validate: Callable[[TeamMessage], str | None] | None = None
    agent_options: dict[str, Any] = field(default_factory=dict)


@dataclass
class TeamEvent:
    """Something that happened on a turn besides a message: an invalid reply fed back, a skip."""

    round: int
    role: str
    kind: Literal["invalid_reply", "turn_skipped"]
    detail: str
    reply: str = ""


@dataclass
class TeamResult:
    """The outcome of :meth:`Team.run`.

    Attributes:
        reason: ``done`` (coordinator's ``done``), ``max_rounds``, ``backend_error``, ``timeout``.
        answer: the content of the coordinator's ``done`` message, else ``None``.
        messages: every delivered message, in order.
        rounds: rounds started.
        contexts: role -> its own message list as last sent to the model.
        tool_runs: executor role -> its ToolAgent results (kept out of other contexts).
        events: invalid replies and skipped turns.
        calls: one :class:`CallStats` per model call of the team's roles (not the executors').
        detail: for failures, one line.
    """

    reason: TeamReason
    answer: Any
    messages: list[TeamMessage]
    rounds: int
    contexts: dict[str, list[Message]]
    tool_runs: dict[str, list[AgentResult]]
    events: list[TeamEvent]
    calls: list[CallStats]
    detail: str = ""

    def transcript(self) -> str:
        """Human-readable log: one line per message, event and the final reason."""
        lines = []
        items: list[tuple[int, int, str]] = []
        for i, m in enumerate(self.messages):
            items.append((m.round, 2 * i, f"round {m.round}: {m.render()}"))
        for i, e in enumerate(self.events):
            items.append((e.round, 2 * i + 1, f"round {e.round}: ({e.role} {e.kind}: {e.detail})"))
        lines = [t for _, _, t in sorted(items, key=lambda x: (x[0], x[1]))]
        lines.append(f"=> reason={self.reason} answer={self.answer!r} {self.detail}".rstrip())
        return "\n".join(lines)


class Team:
    """Role agents on one backend; see the module docstring for the protocol.

    Args:
        model: the shared :class:`ChatModel` (its lock serialises the roles' calls).
        roles: the members, in speaking order (at least two, unique names).
        coordinator: the name of the role whose ``done`` ends the run.
        max_rounds: most rounds (>= 1).
        max_retry: invalid replies fed back per turn before the turn is skipped (>= 0).
        max_tokens: bound on each reply.
        temperature, seed: sampling, passed to the backend.

    Raises:
        InputError: fewer than two roles, duplicate names, unknown coordinator, bad limits.
    """

    def __init__(
        self,
        model: ChatModel,
        roles: Sequence[Role],
        *,
        coordinator: str,
        max_rounds: int = 4,
        max_retry: int = 2,
        max_tokens: int = 160,
        temperature: float = 0.0,
        seed: int | None = None,
    ) -> None:
        names = [r.name for r in roles]
        if len(roles) < 2:
            raise InputError("a team needs at least two roles", field="roles")
        if len(set(names)) != len(names) or "all" in names:
            raise InputError(f"role names must be unique and not 'all', got {names}", field="roles")
        if coordinator not in names:
            raise InputError(
                f"'{coordinator}' is not a role; choose one of {', '.join(names)}",
                field="coordinator",
            )
        if not isinstance(max_rounds, int) or max_rounds < 1:
            raise InputError(f"must be an integer >= 1, got {max_rounds!r}", field="max_rounds")
        if not isinstance(max_retry, int) or max_retry < 0:
            raise InputError(f"must be an integer >= 0, got {max_retry!r}", field="max_retry")
        self.model = model
        self.roles = list(roles)
        self.coordinator = coordinator
        self.max_rounds = max_rounds
        self.max_retry = max_retry
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.seed = seed

    def reply_schema(self, role: Role) -> dict[str, Any]:
        """JSON schema of one reply of ``role`` (recipient, phase, content)."""
        others = [r.name for r in self.roles if r.name != role.name]
        return {
            "type": "object",
            "properties": {
                "recipient": {"enum": [*others, "all"]},
                "phase": {"enum": list(PHASES)},
                "content": role.content_schema or {"type": "string"},
            },
            "required": ["recipient", "phase", "content"],
            "additionalProperties": False,
        }

    def system_message(self, role: Role) -> str:
        """The role's system prompt plus the team protocol."""
        others = ", ".join(r.name for r in self.roles if r.name != role.name)
        last = (
            "When the team's work is finished, send phase 'done'; its content is the final answer."
            if role.name == self.coordinator
            else f"Only the {self.coordinator} can end the work."
        )
        return (
            f"You are the {role.name} in a team with: {others}. {role.instructions}\n"
            'Reply with one JSON object: {"recipient": <role name or "all">, "phase": '
            '"discuss" | "decide" | "execute" | "done", "content": ...}. ' + last
        )

    def run(self, task: str) -> TeamResult:
        """Run rounds on ``task`` until the coordinator's ``done`` or a limit; never raises for the
        model's behaviour."""
        contexts: dict[str, list[Message]] = {
            r.name: [{"role": "system", "content": self.system_message(r)}] for r in self.roles
        }
        inbox: dict[str, list[TeamMessage]] = {r.name: [] for r in self.roles}
        first_turn = {r.name: True for r in self.roles}
        messages: list[TeamMessage] = []
        events: list[TeamEvent] = []
        calls: list[CallStats] = []
        tool_runs: dict[str, list[AgentResult]] = {r.name: [] for r in self.roles if r.tools}

        def result(
            reason: TeamReason, rounds: int, answer: Any = None, detail: str = ""
        ) -> TeamResult:
            return TeamResult(
                reason, answer, messages, rounds, contexts, tool_runs, events, calls, detail
            )

        for rnd in range(1, self.max_rounds + 1):
            for role in self.roles:
                incoming = "\n".join(m.render() for m in inbox[role.name])
                inbox[role.name] = []
                header = f"Task: {task}\n" if first_turn[role.name] else ""
                first_turn[role.name] = False
                user = (header + (incoming or "No new messages. Continue.")).strip()
                msg: TeamMessage | None
                try:
                    if role.tools is not None:
                        msg = self._executor_turn(role, rnd, user, tool_runs, contexts)
                    else:
                        msg = self._turn(role, rnd, user, contexts[role.name], events, calls)
                except BackendTimeout as e:
                    return result("timeout", rnd, detail=str(e))
                except BackendError as e:
                    return result("backend_error", rnd, detail=str(e))
                if msg is None:
                    continue
                messages.append(msg)
                for r in self.roles:
                    if r.name != role.name and msg.recipient in (r.name, "all"):
                        inbox[r.name].append(msg)
                if msg.sender == self.coordinator and msg.phase == "done":
                    return result("done", rnd, answer=msg.content)
        return result("max_rounds", self.max_rounds, detail=f"no 'done' from {self.coordinator}")

    def _turn(
        self,
        role: Role,
        rnd: int,
        user: str,
        context: list[Message],
        events: list[TeamEvent],
        calls: list[CallStats],
    ) -> TeamMessage | None:
        """One model reply from ``role``: parse, validate, feed errors back up to ``max_retry``."""
        schema = self.reply_schema(role)
        context.append({"role": "user", "content": user})
        for _attempt in range(self.max_retry + 1):
            r = self.model.chat(
                context,
                schema=schema,
                max_tokens=self.max_tokens,
                temperature=self.temperature,
                seed=self.seed,
            )
            calls.append(CallStats.of(r))
            context.append({"role": "assistant", "content": r.text})
            msg, error = self._parse(role, rnd, r.text, schema, r.finish_reason)
            if msg is not None and role.validate is not None:
                error = role.validate(msg)
            if error is None and msg is not None:
                return msg
            events.append(TeamEvent(rnd, role.name, "invalid_reply", error or "", r.text))
            context.append({"role": "user", "content": f"Your reply was not accepted: {error}"})
        events.append(
            TeamEvent(rnd, role.name, "turn_skipped", f"{self.max_retry + 1} invalid replies")
        )
        return None

    def _parse(
        self, role: Role, rnd: int, text: str, schema: dict[str, Any], finish_reason: str
    ) -> tuple[TeamMessage | None, str | None]:
        objects, err = find_json_objects(text)
        if len(objects) != 1:
            if not objects:
                cut = finish_reason == "length" or (
                    err is not None and err.pos >= len(text.rstrip())
                )
                why = "it was cut off before the JSON object closed" if cut else "it is not JSON"
                return None, f"{why}. Send one JSON object with recipient, phase and content."
            return None, "send exactly one JSON object, not several."
        value = objects[0][1]
        errors = validate_json(value, schema)
        if errors:
            return None, "; ".join(errors[:4])
        return TeamMessage(
            role.name, value["recipient"], value["phase"], value["content"], rnd
        ), None

    def _executor_turn(
        self,
        role: Role,
        rnd: int,
        user: str,
        tool_runs: dict[str, list[AgentResult]],
        contexts: dict[str, list[Message]],
    ) -> TeamMessage:
        """Run the executor's ToolAgent on what it received; only its reply goes across."""
        if role.tools is None:  # pragma: no cover - the caller checks
            raise TypeError(f"role {role.name} has no tools")
        agent = ToolAgent(
            self.model,
            role.tools,
            system_prompt=self.system_message(role).split("\nReply with")[0],
            **role.agent_options,
        )
        out = agent.run(user)
        tool_runs[role.name].append(out)
        contexts[role.name] = out.messages
        if out.reason in ("timeout", "backend_error"):
            raise (BackendTimeout if out.reason == "timeout" else BackendError)(out.detail)
        content = out.answer if out.ok else f"could not finish: {out.reason} ({out.detail})"
        return TeamMessage(role.name, self.coordinator, "execute", content, rnd)
