"""Typed trace records: one frozen dataclass per kind of event a run writes.

The fields of each record are its event's fields in the order they are written
(docs/trace-schema.md documents them one by one); enumerated fields take the members of
:mod:`marlm.outcomes`, and a record made with a value outside its enumeration raises
``ValueError`` where it is made. A record is written with ``record.emit_to(emit)``, ``emit``
being :meth:`marlm.eval.trace.TraceWriter.write` or any ``emit(type, **fields)``.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from marlm.outcomes import (
    CallKind,
    CallStatus,
    FailureKind,
    IdleCause,
    OrderEvent,
    PlanOutcome,
    PlanSource,
    RunEndReason,
)

#: What records are written to: ``emit(type, **fields)`` (:meth:`TraceWriter.write`, the
#: controller's ``emit``, or a test's list).
Emit = Callable[..., None]


def _coerce(record: Any, name: str, enum_type: type[enum.Enum]) -> None:
    """Set ``record.name`` to its member of ``enum_type`` (``ValueError`` for an unknown value),
    so a typo in an outcome fails where the record is made, not in a later reading."""
    value = vars(record)[name]  # a field of the dataclass, by its declared name
    if value is not None and not isinstance(value, enum_type):
        object.__setattr__(record, name, enum_type(value))


@dataclass(frozen=True, kw_only=True)
class TraceRecord:
    """Base of the typed trace records: one frozen dataclass per kind of event.

    A record's fields are its event's fields, in the order they are written; :attr:`OMIT_IF_NONE`
    names the optional fields left out of the event while unknown. :meth:`fields` gives them
    (values as given: enum members are their strings), :meth:`emit_to` writes the event.
    """

    #: The trace ``type`` of the event.
    TYPE: ClassVar[str] = ""
    #: Optional fields written only when not ``None``.
    OMIT_IF_NONE: ClassVar[frozenset[str]] = frozenset()

    def fields(self) -> dict[str, Any]:
        """The event's fields in their written order, without the unknown optional ones."""
        values = vars(self)
        return {
            f.name: values[f.name]
            for f in dataclasses.fields(self)
            if not (f.name in self.OMIT_IF_NONE and values[f.name] is None)
        }

    def as_event(self) -> dict[str, Any]:
        """The event as :func:`read_trace` gives it back, without the version: ``{"type", ...}``."""
        return {"type": self.TYPE, **self.fields()}

    def emit_to(self, emit: Emit) -> None:
        """Write this record as one event: ``emit(TYPE, **fields())``."""
        emit(self.TYPE, **self.fields())


@dataclass(frozen=True, kw_only=True)
class RunStartRecord(TraceRecord):
    """``run_start``: the run's configuration, once, first (docs/trace-schema.md).

    ``backend`` and ``model`` name the model that made the run's decisions (``None`` for the
    rule planner): the backend as it names itself (``embedded:<file>``,
    ``openai:<model>@<url>``) and the model (the GGUF file, or the model name sent to the
    server); :func:`backend_and_model` splits one from the other.
    """

    TYPE: ClassVar[str] = "run_start"
    OMIT_IF_NONE: ClassVar[frozenset[str]] = frozenset({"n_states", "executor"})

    config: dict[str, Any]
    seeds: dict[str, int]
    layout: Any
    scheme: str
    agents: list[str]
    planner: str
    prompt_version: str | None
    orders: list[dict[str, Any]]
    positions: list[Any]
    backend: str | None = None
    model: str | None = None
    n_states: int | None = None
    executor: str | None = None


def backend_and_model(name: str | None) -> tuple[str | None, str | None]:
    """``(backend, model)`` of a chat backend from its ``name``
    (:attr:`marlm.llm.backends.ChatModel.name`): the name itself, and the model in it, the part
    after the kind (``embedded:<file>`` gives the file; ``openai:<model>@<url>`` gives the
    model). ``(None, None)`` without a backend (the rule planner); a name of another form is
    its own model."""
    if not name:
        return None, None
    kind, sep, rest = name.partition(":")
    if not sep:
        return name, name
    return name, rest.rpartition("@")[0] if kind == "openai" and "@" in rest else rest


@dataclass(frozen=True, kw_only=True)
class StepRecord(TraceRecord):
    """``step``: one control step: the joint action, rewards, cells, shield overrides."""

    TYPE: ClassVar[str] = "step"
    OMIT_IF_NONE: ClassVar[frozenset[str]] = frozenset({"states", "planning_ms"})

    step: int
    proposed: list[int]
    actions: list[int]
    rewards: list[float | None]
    positions: list[Any]
    overrides: list[str]
    collisions: int
    latency_ms: float
    states: list[int] | None = None
    planning_ms: float | None = None


@dataclass(frozen=True, kw_only=True)
class OrderRecord(TraceRecord):
    """``order``: one change in an order's life (``event``: :class:`OrderEvent`)."""

    TYPE: ClassVar[str] = "order"
    OMIT_IF_NONE: ClassVar[frozenset[str]] = frozenset({"station"})

    event: OrderEvent
    order: str
    robot: str | None
    step: int
    priority: str
    deadline: int
    station: str | None = None

    def __post_init__(self) -> None:
        _coerce(self, "event", OrderEvent)


@dataclass(frozen=True, kw_only=True)
class ChatCallRecord(TraceRecord):
    """``llm_call`` with ``call: "chat"``: one chat call to a model (each attempt).

    A planner makes it without ``call_id``, the steps, ``fallback`` and ``t_requested_s``; the
    plan scheduler fills those in (:func:`dataclasses.replace`) when it records the call.
    ``status`` (:class:`CallStatus`) is ``answered`` or ``invalid_answer`` from ``valid`` unless
    given; a failed backend gives ``backend_error`` or ``timeout``. ``latency_ms`` is the
    call's wall time in milliseconds, a failed call's included (a timeout counts its wait).
    :meth:`from_result` fills the answer's fields from a :class:`marlm.llm.backends.ChatResult`.
    A call without an answer keeps ``raw=""`` and zero tokens; ``None`` tokens: the backend did
    not count them (a run's token figures are then ``null``).
    """

    TYPE: ClassVar[str] = "llm_call"
    OMIT_IF_NONE: ClassVar[frozenset[str]] = frozenset({"t_requested_s"})

    call_id: int | str | None = None
    step_requested: int | None = None
    step_applied: int | None = None
    fallback: bool = False
    messages: list[dict[str, str]]
    raw: str = ""
    latency_ms: float
    prompt_tokens: int | None = 0
    completion_tokens: int | None = 0
    valid: bool
    error: str | None
    attempt: int
    finish_reason: str | None = "stop"
    t_requested_s: float | None = None
    call: CallKind = CallKind.CHAT
    status: CallStatus | None = None

    def __post_init__(self) -> None:
        _coerce(self, "call", CallKind)
        if self.status is None:
            status = CallStatus.ANSWERED if self.valid else CallStatus.INVALID_ANSWER
            object.__setattr__(self, "status", status)
        _coerce(self, "status", CallStatus)

    @classmethod
    def from_result(
        cls,
        messages: Sequence[dict[str, str]],
        result: Any,
        *,
        valid: bool,
        error: str | None,
        attempt: int,
        raw: str | None = None,
        status: CallStatus | None = None,
    ) -> ChatCallRecord:
        """The record of an answered call: ``result`` gives ``latency_s`` (seconds, recorded in
        ms), ``prompt_tokens``, ``completion_tokens``, ``finish_reason`` and, unless ``raw`` is
        given, ``text``."""
        return cls(
            messages=list(messages),
            raw=result.text if raw is None else raw,
            latency_ms=result.latency_s * 1e3,
            prompt_tokens=result.prompt_tokens,
            completion_tokens=result.completion_tokens,
            valid=valid,
            error=error,
            attempt=attempt,
            finish_reason=result.finish_reason,
            status=status,
        )


@dataclass(frozen=True, kw_only=True)
class TriageCallRecord(TraceRecord):
    """``llm_call`` with ``call: "triage"``: one order's note classified by the model.

    No chat message is sent (the probe embeds the note; the score modes score options), so
    the record holds no ``messages``: it names the ``order``, the class decided (``label``) and
    the classifier's whole ``decision`` (``marlm.llm.triage.TriageDecision.record()``: source,
    mode, scores, reason, failure, ...). ``status``: ``answered`` when the model decided,
    else ``backend_error`` or ``invalid_answer``. The plan scheduler fills in ``call_id``, the
    steps and ``t_requested_s`` as for a :class:`ChatCallRecord`.
    """

    TYPE: ClassVar[str] = "llm_call"
    OMIT_IF_NONE: ClassVar[frozenset[str]] = frozenset({"t_requested_s"})

    call_id: int | str | None = None
    step_requested: int | None = None
    step_applied: int | None = None
    fallback: bool = False
    order: str
    label: str
    decision: dict[str, Any]
    latency_ms: float
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    valid: bool
    error: str | None
    attempt: int = 0
    t_requested_s: float | None = None
    call: CallKind = CallKind.TRIAGE
    status: CallStatus | None = None

    def __post_init__(self) -> None:
        _coerce(self, "call", CallKind)
        if self.status is None:
            status = CallStatus.ANSWERED if self.valid else CallStatus.BACKEND_ERROR
            object.__setattr__(self, "status", status)
        _coerce(self, "status", CallStatus)

    @property
    def raw(self) -> str:
        """The decision as JSON text (what a chat call's ``raw`` answer is to a reader)."""
        return json.dumps({"order": self.order, **self.decision}, ensure_ascii=False)


@dataclass(frozen=True, kw_only=True)
class PlanRecord(TraceRecord):
    """``plan``: one plan and what of it took effect (``source``: :class:`PlanSource`,
    ``outcome``: :class:`PlanOutcome`)."""

    TYPE: ClassVar[str] = "plan"
    OMIT_IF_NONE: ClassVar[frozenset[str]] = frozenset({"call_ids", "situation"})

    step: int
    step_requested: int
    assignments: list[dict[str, str]]
    source: PlanSource
    outcome: PlanOutcome
    error: str | None
    preempted: list[dict[str, str]]
    pending: list[str]
    idle: list[str]
    applied: list[dict[str, str]]
    t_s: float
    t_requested_s: float
    call_ids: list[int | str] | None = None
    situation: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        _coerce(self, "source", PlanSource)
        _coerce(self, "outcome", PlanOutcome)


@dataclass(frozen=True, kw_only=True)
class FailureRecord(TraceRecord):
    """``failure``: something went wrong (``kind``: :class:`FailureKind`)."""

    TYPE: ClassVar[str] = "failure"

    kind: FailureKind
    step: int
    detail: str | None = None

    def __post_init__(self) -> None:
        _coerce(self, "kind", FailureKind)


@dataclass(frozen=True, kw_only=True)
class RecoveryRecord(TraceRecord):
    """``recovery``: a writer's own note that it recovered (the metrics do not trust it)."""

    TYPE: ClassVar[str] = "recovery"

    kind: FailureKind
    step: int
    steps_taken: int | None = None

    def __post_init__(self) -> None:
        _coerce(self, "kind", FailureKind)


@dataclass(frozen=True, kw_only=True)
class CircuitOpenRecord(TraceRecord):
    """``circuit_open``: the model backend's circuit breaker opened."""

    TYPE: ClassVar[str] = "circuit_open"

    step: int
    backend: str
    failures: int
    cooldown_s: float
    cause: str | None


@dataclass(frozen=True, kw_only=True)
class IdleRecord(TraceRecord):
    """``idle``: the robots without a task that stood idle this step while an order was
    unassigned, by cause (:class:`IdleCause`; a cause with no robot is left out)."""

    TYPE: ClassVar[str] = "idle"
    OMIT_IF_NONE: ClassVar[frozenset[str]] = frozenset(IdleCause)

    step: int
    waiting_for_model: list[str] | None = None
    no_order: list[str] | None = None
    blocked: list[str] | None = None


@dataclass(frozen=True, kw_only=True)
class RecalledRecord(TraceRecord):
    """``recalled``: an order's note was read before for another order (the same text as the
    model reads it: spacing cleaned, cut at 240 characters): the class the model read then is
    applied to this order at ``step``, with no model call."""

    TYPE: ClassVar[str] = "recalled"

    step: int
    order: str
    label: str


@dataclass(frozen=True, kw_only=True)
class RunEndRecord(TraceRecord):
    """``run_end``: once, last (``reason``: :class:`RunEndReason`)."""

    TYPE: ClassVar[str] = "run_end"

    step: int
    reason: RunEndReason

    def __post_init__(self) -> None:
        _coerce(self, "reason", RunEndReason)


#: Every record type, by the event ``type`` it writes (``llm_call`` has two: chat and triage).
RECORD_TYPES: dict[str, tuple[type[TraceRecord], ...]] = {
    "run_start": (RunStartRecord,),
    "step": (StepRecord,),
    "order": (OrderRecord,),
    "llm_call": (ChatCallRecord, TriageCallRecord),
    "plan": (PlanRecord,),
    "failure": (FailureRecord,),
    "recovery": (RecoveryRecord,),
    "circuit_open": (CircuitOpenRecord,),
    "idle": (IdleRecord,),
    "recalled": (RecalledRecord,),
    "run_end": (RunEndRecord,),
}


__all__ = [
    "RECORD_TYPES",
    "ChatCallRecord",
    "CircuitOpenRecord",
    "Emit",
    "FailureRecord",
    "IdleRecord",
    "OrderRecord",
    "PlanRecord",
    "RecalledRecord",
    "RecoveryRecord",
    "RunEndRecord",
    "RunStartRecord",
    "StepRecord",
    "TraceRecord",
    "TriageCallRecord",
    "backend_and_model",
]
