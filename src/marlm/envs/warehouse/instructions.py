"""Instructions the warehouse enforces on an order: cancelled, a required station, an earlier
deadline. A mixin of :class:`~marlm.envs.warehouse.WarehouseEnv` (the state it keeps is reset
with the env's; every method runs on the control thread, between steps).

- :meth:`InstructionsMixin.cancel`: a pending order is never assigned; an assigned one is
  released; a carried one goes back: its robot returns the shelf to its access cell and is idle
  again. The order's status is ``"cancelled"`` and an ``order_cancelled`` event is recorded.
- :meth:`InstructionsMixin.require_station`: the only drop of that order (a robot carrying it
  turns there at once).
- :meth:`InstructionsMixin.tighten_deadline`: the earlier of the listed and the given deadline.
"""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING

from marlm.envs.warehouse.order_book import OrderBookMixin

if TYPE_CHECKING:
    from marlm.envs.warehouse.layout import Layout


class InstructionsMixin(OrderBookMixin):
    """Enforcement of an order's instructions (module docstring)."""

    # The env's state this mixin reads and changes (set by the env's reset).
    layout: Layout
    possible_agents: list[str]
    _task: list[str | None]
    _target: list[tuple[int, int] | None]
    _carrying: list[bool]
    _step_count: int
    _n_pending: int
    _pending_events: list[dict]

    if TYPE_CHECKING:  # the env's methods it calls

        def release(self, agent: str) -> str: ...

        def _event(self, kind: str, order_id: str, robot: int | None) -> dict: ...

    def _reset_instructions(self) -> None:
        self._cancelled: set[str] = set()
        self._returning: set[str] = set()
        self._drop_of: dict[str, tuple[int, int]] = {}
        self._miss_checked: set[str] = set()

    @property
    def cancelled(self) -> list[str]:
        """Ids of the cancelled orders, in the order they were cancelled."""
        return sorted(self._cancelled, key=self._place.__getitem__)

    def station_cell(self, name: str) -> tuple[int, int]:
        """The cell of the station named ``name`` (``A``, ``B``, ... in reading order).

        Raises:
            ValueError: no station of that name on this map.
        """
        for cell, n in self.layout.station_names.items():
            if n == name:
                return cell
        raise ValueError(
            f"no station {name!r}; stations are {list(self.layout.station_names.values())}"
        )

    def drop_cell(self, order_id: str) -> tuple[int, int]:
        """Where ``order_id`` is dropped: its required station, else the station nearest its
        shelf."""
        return self._drop_of.get(order_id) or self.layout.drop[self._orders[order_id].shelf]

    def require_station(self, order_id: str, name: str) -> None:
        """Make station ``name`` the only drop of ``order_id`` (a carried shelf turns there).

        Raises:
            ValueError: an unknown order or station.
        """
        if order_id not in self._orders:
            raise ValueError(f"unknown order {order_id!r}")
        cell = self.station_cell(name)
        self._drop_of[order_id] = cell
        for i, task in enumerate(self._task):
            if task == order_id and self._carrying[i] and order_id not in self._returning:
                self._target[i] = cell

    def tighten_deadline(self, order_id: str, deadline: int) -> bool:
        """Set ``order_id``'s deadline to ``deadline`` when that is earlier (and later than its
        arrival); returns whether it changed. A deadline already past is reported missed at the
        next step.

        Raises:
            ValueError: an unknown order.
        """
        if order_id not in self._orders:
            raise ValueError(f"unknown order {order_id!r}")
        old = self._orders[order_id]
        deadline = max(int(deadline), old.arrival + 1)
        if deadline >= old.deadline or self._status[order_id] in ("delivered", "cancelled"):
            return False
        pending = self._status[order_id] == "pending"
        if pending:
            self._open_remove(old)
        new = old.model_copy(update={"deadline": deadline})
        self._orders[order_id] = new
        if pending:
            self._open_add(new)
        self._by_deadline = sorted(self._orders.values(), key=lambda o: o.deadline)
        # walk again from the first deadline not yet past; _miss_checked keeps one report each
        self._next_deadline = bisect.bisect_left(
            [o.deadline for o in self._by_deadline], min(deadline, self._step_count)
        )
        self._book += 1
        return True

    def cancel(self, order_id: str) -> str:
        """Cancel ``order_id``; returns what happened: ``"dropped"`` (pending: it is never
        assigned), ``"released"`` (its robot had not picked it), ``"returning"`` (its shelf goes
        back), or ``"too late"`` (delivered already) / ``"already"``.

        Raises:
            ValueError: an unknown order.
        """
        if order_id not in self._orders:
            raise ValueError(f"unknown order {order_id!r}")
        status = self._status[order_id]
        if status == "delivered":
            return "too late"
        if order_id in self._cancelled:
            return "already"
        order = self._orders[order_id]
        outcome = "dropped"
        for i, task in enumerate(self._task):
            if task != order_id:
                continue
            if self._carrying[i]:
                self._returning.add(order_id)
                self._target[i] = self.layout.access[order.shelf]
                outcome = "returning"
            else:
                self.release(self.possible_agents[i])
                outcome = "released"
        if self._status[order_id] == "pending":
            self._open_remove(order)
            self._n_pending -= 1
        self._cancelled.add(order_id)
        self._held.discard(order_id)
        if outcome != "returning":
            self._status[order_id] = "cancelled"
        self._pending_events.append(self._event("order_cancelled", order_id, None))
        self._book += 1
        return outcome

    def _put_back(self, i: int, order_id: str) -> None:
        """Robot ``i`` stands at the access cell of a cancelled order's shelf: the shelf is back
        in its place and the robot idle."""
        self._carrying[i] = False
        self._task[i] = self._target[i] = None
        self._returning.discard(order_id)
        self._status[order_id] = "cancelled"
        del self._shelf_holder[self._orders[order_id].shelf]
        self._book += 1


__all__ = ["InstructionsMixin"]
