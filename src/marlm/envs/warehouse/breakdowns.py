"""Robots out of service for a stretch: a breakdown, given as a line of the order file.

Besides its orders, an order file may hold lines such as::

    {"breakdown": "robot_1", "at": 30, "steps": 120}

From step ``at`` for ``steps`` steps the robot takes no order: an order it was sent for and has
not picked goes back to the queue (a ``released`` event); a shelf it carries it still delivers,
then takes nothing. It stays on the map and moves aside as an idle robot does (the movement
layer still plans it), and is back in service at step ``at + steps``. A mixin of
:class:`~marlm.envs.warehouse.WarehouseEnv` (its state is reset with the env's).
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StrictInt,
    StrictStr,
    ValidationError,
)

from marlm.errors import InputError


class Breakdown(BaseModel):
    """One robot out of service: ``breakdown`` (the robot, ``robot_<i>``) from step ``at``
    (a whole number >= 0) for ``steps`` steps (>= 1); JSON numbers only, as an order's steps."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    breakdown: StrictStr
    at: StrictInt = Field(ge=0)
    steps: StrictInt = Field(ge=1)
    #: where it was read (an order file and its line), for error messages; None: an option
    _source: str | None = PrivateAttr(None)
    _line: int | None = PrivateAttr(None)


def is_breakdown_line(obj: object) -> bool:
    """Whether a decoded order-file line is a breakdown (an object with a ``breakdown`` key)."""
    return isinstance(obj, dict) and "breakdown" in obj


def parse_breakdown(obj: dict, source: str = "<orders>", line: int | None = None) -> Breakdown:
    """Validate one breakdown line.

    Raises:
        InputError: a missing, unknown or bad field, named with the fix.
    """
    try:
        b = Breakdown.model_validate(obj)
    except ValidationError as e:
        err = e.errors()[0]
        field = str(err["loc"][0]) if err["loc"] else "breakdown"
        example = '{"breakdown": "robot_1", "at": 30, "steps": 120}'
        if err["type"] == "missing":
            msg = f"missing; a breakdown line is {example}"
        elif err["type"] == "extra_forbidden":
            msg = "unknown field in a breakdown line; allowed: breakdown, at, steps"
        elif field == "breakdown":
            msg = f"got {json.dumps(err.get('input'))}; name one robot, e.g. {example}"
        else:
            least = 1 if field == "steps" else 0
            msg = (f"got {json.dumps(err.get('input'))}; a whole number of steps, at least "
                   f"{least}, e.g. {example}")  # fmt: skip
        raise InputError(msg, source=source, line=line, field=field) from None
    b._source, b._line = source, line
    return b


def parse_breakdown_option(text: str, field: str = "--breakdown") -> tuple[Breakdown, ...]:
    """``ROBOTS@AT+STEPS`` (``robot_0,robot_1@30+120``: both robots out of service from step 30
    for 120 steps) as breakdowns; ``""``: none.

    Raises:
        InputError: another shape, naming ``field`` and an example.
    """
    if not text:
        return ()
    robots, at_sign, span = text.partition("@")
    at, plus, steps = span.partition("+")
    names = [r.strip() for r in robots.split(",") if r.strip()]
    whole = re.compile(r"\s*[0-9]+\s*")  # ASCII digits only ("²".isdigit() is true)
    if not (at_sign and plus and names and whole.fullmatch(at) and whole.fullmatch(steps)):
        raise InputError(
            f"got {text!r}; write ROBOTS@AT+STEPS, e.g. robot_0,robot_1@30+120 (out of service "
            "from step 30 for 120 steps)",
            field=field,
        )
    if int(steps) < 1:
        raise InputError(f"got {text!r}: a breakdown lasts at least 1 step", field=field)
    return tuple(Breakdown(breakdown=n, at=int(at), steps=int(steps)) for n in names)


def load_breakdowns(path: str | Path) -> list[Breakdown]:
    """The breakdown lines of an order file, in file order (the file is read as
    :func:`~marlm.envs.warehouse.orders.load_orders` reads it, which checks the rest).

    Raises:
        InputError: a bad breakdown line (file, line and field named).
    """
    path = Path(path)
    if not path.is_file():
        return []  # load_orders says it
    out = []
    text = path.read_bytes().removeprefix(codecs.BOM_UTF8).decode("utf-8", errors="replace")
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)  # every line: a key may be written with escapes
        except json.JSONDecodeError:
            continue  # load_orders says it
        if is_breakdown_line(obj):
            out.append(parse_breakdown(obj, str(path), lineno))
    return out


class BreakdownMixin:
    """Robots out of service (module docstring)."""

    # The env's state this mixin reads and changes (set by the env's constructor and reset).
    possible_agents: list[str]
    n_robots: int
    _index: dict[str, int]  # agent -> its index
    _task: list[str | None]
    _carrying: list[bool]
    _step_count: int
    _breakdowns: tuple[Breakdown, ...]

    if TYPE_CHECKING:  # the env's methods it calls

        def release(self, agent: str) -> str: ...

    def _check_breakdowns(self, breakdowns: Sequence[Breakdown], source: str) -> None:
        """Keep ``breakdowns`` after checking each names a robot of this env.

        Raises:
            InputError: a robot the env does not have.
        """
        for b in breakdowns:
            if b.breakdown not in self.possible_agents:
                one = "; a line names one robot" if "," in b.breakdown else ""
                raise InputError(
                    f"no robot {b.breakdown!r}: the robots are robot_0 ... "
                    f"robot_{self.n_robots - 1}{one}",
                    source=b._source or source,
                    line=b._line,
                    field="breakdown",
                )
        self._breakdowns = tuple(sorted(breakdowns, key=lambda b: b.at))

    def _reset_breakdowns(self) -> None:
        self._out_until = [0] * self.n_robots  # step at which each robot is back in service
        self._next_breakdown = 0

    @property
    def breakdowns(self) -> tuple[Breakdown, ...]:
        """Every breakdown of this env (the order file's and the given ones), by start step."""
        return self._breakdowns

    def in_service(self, agent: str) -> bool:
        """Whether ``agent`` may take an order now (not in a breakdown)."""
        return self._out_until[self._index[agent]] <= self._step_count

    @property
    def out_of_service(self) -> list[str]:
        """Robots in a breakdown now, in index order."""
        t = self._step_count
        return [a for i, a in enumerate(self.possible_agents) if self._out_until[i] > t]

    def _start_breakdowns(self) -> None:
        """The breakdowns that start at the current step: out of service, and an order not
        picked yet back in the queue."""
        t, plan = self._step_count, self._breakdowns
        while self._next_breakdown < len(plan) and plan[self._next_breakdown].at <= t:
            b = plan[self._next_breakdown]
            self._next_breakdown += 1
            i = self._index[b.breakdown]
            self._out_until[i] = max(self._out_until[i], b.at + b.steps)
            if self._out_until[i] > t and self._task[i] is not None and not self._carrying[i]:
                self.release(b.breakdown)


__all__ = [
    "Breakdown",
    "BreakdownMixin",
    "is_breakdown_line",
    "load_breakdowns",
    "parse_breakdown",
    "parse_breakdown_option",
]
