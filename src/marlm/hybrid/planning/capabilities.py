"""What a planner may offer besides ``plan``, declared, and read once when a run is built.

:class:`~marlm.hybrid.planning.planner.Planner` is the contract every planner meets (``name``, ``plan``).
The abilities below are optional; each is a runtime-checkable :class:`typing.Protocol`, and
:meth:`PlannerAbilities.of` checks them once, when the scheduler is built, so no loop probes a
planner for a method. The triage planner has them all; the rule planner none; the ``llm`` and
``team`` planners a model, a prompt version and ``cancel``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from marlm.llm.backends import Guarded, backend_name


@runtime_checkable
class CancelsCalls(Protocol):
    """Cancels the model calls a worker thread makes (``cancel(thread, timeout_s) -> bool``,
    ``True`` when the thread holds the model no more)."""

    def cancel(self, thread: threading.Thread, timeout_s: float = ...) -> bool: ...


@runtime_checkable
class Triaging(Protocol):
    """Decides each order's class once, apart from the assignment: ``unclassified(orders)`` (the
    orders still to read, in the order given) and ``raised(orders)`` (ids of orders read as more
    urgent than listed) on the control thread, ``classify(orders)`` on the worker (model
    calls), ``decide(snapshot)`` on the control thread (no model call). See
    :mod:`marlm.hybrid.planning.scheduler`."""

    def unclassified(self, orders: Sequence[Any]) -> list[Any]: ...

    def classify(self, orders: Sequence[Any]) -> list[Any]: ...

    def decide(self, snapshot: Any) -> Any: ...

    def raised(self, orders: Sequence[Any]) -> frozenset[str]: ...


@runtime_checkable
class Recalls(Protocol):
    """``recall(orders)``: on the control thread, with no model call, gives the orders whose
    note the model already read (the same text) that class; returns ``[(order_id, class)]``."""

    def recall(self, orders: Sequence[Any]) -> list[tuple[str, str]]: ...


@runtime_checkable
class RanksReadings(Protocol):
    """What the model's reading order reads (:func:`~marlm.hybrid.planning.scheduler.reading_queue`):
    ``unclassified(orders)``, the queue's classes ``view(orders) -> {order_id: class}``, its
    deadline terms ``deadlines(orders) -> {order_id: step} | None`` and each note's first
    reading ``first_urgent = {order_id: P(urgent) | None}``."""

    first_urgent: Mapping[str, float | None]

    def unclassified(self, orders: Sequence[Any]) -> list[Any]: ...

    def view(self, orders: Sequence[Any]) -> Mapping[str, str]: ...

    def deadlines(self, orders: Sequence[Any]) -> Mapping[str, float] | None: ...


@runtime_checkable
class ChoosesReadingOrder(Protocol):
    """``reading_order``: which notes the planner's model reads first (one of
    :data:`~marlm.hybrid.planning.scheduler.READING_ORDERS`)."""

    reading_order: str


@runtime_checkable
class RanksShelves(Protocol):
    """Orders the orders waiting for one shelf: ``shelf_precedence(order)`` is a sort key."""

    def shelf_precedence(self, order: Any) -> Any: ...


@runtime_checkable
class Classifies(Protocol):
    """Keeps the class read for each order: ``classes = {order_id: class}``."""

    classes: Mapping[str, str]


@runtime_checkable
class Preempts(Protocol):
    """``preempts``: whether the planner may be asked with no robot idle (it reassigns robots
    before pick-up)."""

    preempts: bool


@runtime_checkable
class Versioned(Protocol):
    """``prompt_version``: the version of the prompt the planner's model reads (recorded)."""

    prompt_version: str


@runtime_checkable
class HasModel(Protocol):
    """``model``: the backend the planner calls."""

    model: Any


@runtime_checkable
class HasTriage(Protocol):
    """``triage``: the classifier the planner reads notes with (whose ``model`` is the
    backend)."""

    triage: Any


@runtime_checkable
class WarmsUp(Protocol):
    """``warm_up(progress=None)``: load-time work before the control clock starts."""

    def warm_up(self, progress: Callable[[int, int], None] | None = None) -> None: ...


def planner_model(planner: Any) -> Any:
    """The planner's model backend (``planner.model``, or the triage planner's
    ``planner.triage.model``); ``None`` for a planner without one (the rule)."""
    if isinstance(planner, HasModel) and planner.model is not None:
        return planner.model
    if isinstance(planner, HasTriage) and isinstance(planner.triage, HasModel):
        return planner.triage.model
    return None


@dataclass(frozen=True)
class PlannerAbilities:
    """A planner's optional abilities, read once (:meth:`of`).

    Attributes:
        cancel: ``cancel(thread, timeout_s)`` (:class:`CancelsCalls`), else ``None``.
        triaging: it decides classes apart from the assignment (:class:`Triaging`).
        recall: its ``recall`` (:class:`Recalls`), else ``None``.
        precedence: its ``shelf_precedence`` (:class:`RanksShelves`), else ``None``.
        classifies: it keeps ``classes`` (:class:`Classifies`).
        preempts: it may be asked with no robot idle (:class:`Preempts`).
        model: its model backend (:func:`planner_model`), else ``None``.
        breaker: that backend's circuit breaker (:class:`~marlm.llm.backends.Guarded`), else
            ``None``; ``backend`` the backend's name (``""`` without a breaker).
    """

    cancel: Callable[[threading.Thread, float], bool] | None = None
    triaging: bool = False
    recall: Callable[[Sequence[Any]], list[tuple[str, str]]] | None = None
    precedence: Callable[[Any], Any] | None = None
    classifies: bool = False
    preempts: bool = False
    model: Any = None
    breaker: Any = None
    backend: str = ""

    @classmethod
    def of(cls, planner: Any) -> PlannerAbilities:
        """Check ``planner`` against each ability's protocol, once."""
        model = planner_model(planner)
        guarded = isinstance(model, Guarded) and model.breaker is not None
        return cls(
            cancel=planner.cancel if isinstance(planner, CancelsCalls) else None,
            triaging=isinstance(planner, Triaging),
            recall=planner.recall if isinstance(planner, Recalls) else None,
            precedence=planner.shelf_precedence if isinstance(planner, RanksShelves) else None,
            classifies=isinstance(planner, Classifies),
            preempts=isinstance(planner, Preempts) and bool(planner.preempts),
            model=model,
            breaker=model.breaker if guarded else None,
            backend=backend_name(model) if guarded else "",
        )


def prompt_version(planner: Any) -> str | None:
    """The planner's ``prompt_version`` (:class:`Versioned`), else ``None``."""
    return planner.prompt_version if isinstance(planner, Versioned) else None


__all__ = [
    "CancelsCalls",
    "ChoosesReadingOrder",
    "Classifies",
    "HasModel",
    "HasTriage",
    "PlannerAbilities",
    "Preempts",
    "RanksReadings",
    "RanksShelves",
    "Recalls",
    "Triaging",
    "Versioned",
    "WarmsUp",
    "planner_model",
    "prompt_version",
]
