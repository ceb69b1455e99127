"""The open order book of :class:`~marlm.envs.warehouse.WarehouseEnv`: which arrived,
unassigned orders are offered for assignment and which wait. A mixin (its state is reset with
the env's; it reads the env's ``_orders``, ``_status`` and ``_shelf_holder``).

Each shelf keeps a queue of its pending orders sorted by
:func:`~marlm.envs.warehouse.orders.dispatch_key`; a shelf no order holds offers the head of its
queue. ``_book`` counts changes of status or shelf holder, so that the default key's offer is
computed once per change.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from typing import Any

from marlm.envs.warehouse.orders import Order, dispatch_key


class OrderBookMixin:
    """Pending orders by shelf, offered and waiting (module docstring)."""

    _orders: dict[str, Order]
    _status: dict[str, str]
    _shelf_holder: dict[str, str]

    def _reset_book(self) -> None:
        # shelf -> [(dispatch_key, id)] of its pending orders, sorted; each order's place in the
        # order list; _offered keeps pending_orders() of the default key for the current _book.
        self._open: dict[str, list[tuple[tuple, str]]] = {}
        self._place = {o: k for k, o in enumerate(self._orders)}
        self._book = 0
        self._offered: tuple[int, list[Order]] = (-1, [])
        self._held: set[str] = set()  # pending orders kept out of the book (hold)

    def order_status(self, order_id: str) -> str:
        """``"future" | "pending" | "assigned" | "picked" | "delivered"``. Raises KeyError."""
        return self._status[order_id]

    def pending_orders(self, precedence: Callable[[Order], Any] | None = None) -> list[Order]:
        """Orders offered for assignment now, in order-list order: arrived, unassigned, their
        shelf free (no order holds it), and, per shelf, only the first by ``precedence`` (a sort
        key over orders; default :func:`dispatch_key`: listed priority urgent < normal < low,
        deadline, arrival, id). A planner that reads urgency from the notes passes its own key,
        so that an order it finds urgent is not offered behind a routine order for the same
        shelf. The other arrived, unassigned orders wait (:meth:`waiting_orders`)."""
        orders, holder = self._orders, self._shelf_holder
        if precedence is None or precedence is dispatch_key:
            # Each shelf's queue is kept sorted by dispatch_key: its head is the first.
            book = self._book
            if self._offered[0] == book:
                return list(self._offered[1])
            first = [q[0][1] for shelf, q in self._open.items() if shelf not in holder]
        else:  # a planner's key may change between calls: the least of each free shelf's queue
            place = self._place
            first = [
                min((e[1] for e in q), key=lambda o: (precedence(orders[o]), place[o]))
                for shelf, q in self._open.items()
                if shelf not in holder
            ]
        first.sort(key=self._place.__getitem__)
        offered = [orders[o] for o in first]
        if precedence is None or precedence is dispatch_key:
            self._offered = (self._book, offered)
            return list(offered)
        return offered

    def waiting_orders(self, precedence: Callable[[Order], Any] | None = None) -> list[Order]:
        """Arrived, unassigned orders not offered now (:meth:`pending_orders` with the same
        ``precedence``): their shelf is held by another order, or another order for it comes
        first; in order-list order."""
        ready = {o.id for o in self.pending_orders(precedence)}
        waiting = [e[1] for q in self._open.values() for e in q if e[1] not in ready]
        waiting.sort(key=self._place.__getitem__)
        return [self._orders[o] for o in waiting]

    def open_orders(self) -> list[Order]:
        """Arrived, unassigned orders, offered or waiting (:meth:`pending_orders` and
        :meth:`waiting_orders` together), in no stated order; ``O(open orders)``."""
        orders = self._orders
        return [orders[e[1]] for q in self._open.values() for e in q]

    def hold(self, order_id: str) -> bool:
        """Keep a pending order out of the offer (:meth:`pending_orders`, :meth:`waiting_orders`)
        until :meth:`unhold`: it stays pending and keeps its deadline; the orders behind it for
        its shelf come forward. Returns whether it was held now (False: not pending, or held
        already). Raises KeyError for an unknown order."""
        if self._status[order_id] != "pending" or order_id in self._held:
            return False
        self._open_remove(self._orders[order_id])
        self._held.add(order_id)
        return True

    def unhold(self, order_id: str) -> bool:
        """Offer a held order again; returns whether it was held."""
        if order_id not in self._held:
            return False
        self._held.discard(order_id)
        if self._status[order_id] == "pending":
            self._open_add(self._orders[order_id])
        return True

    @property
    def held(self) -> frozenset[str]:
        """The orders held out of the offer now (:meth:`hold`)."""
        return frozenset(self._held)

    def shelf_holder(self, shelf: str) -> str | None:
        """Id of the order that holds ``shelf`` (assigned or picked, not yet delivered), or None
        when the shelf stands in its place unclaimed."""
        return self._shelf_holder.get(shelf)

    def _open_add(self, order: Order) -> None:
        """Put a pending order in its shelf's queue (``O(log q + q)`` for ``q`` on that shelf);
        a held order stays out."""
        if order.id in self._held:
            return
        bisect.insort(self._open.setdefault(order.shelf, []), (dispatch_key(order), order.id))
        self._book += 1

    def _open_remove(self, order: Order) -> None:
        """Take an order that stops being pending out of its shelf's queue (a held one is out
        already)."""
        if order.id in self._held:
            return
        queue = self._open[order.shelf]
        del queue[bisect.bisect_left(queue, (dispatch_key(order), order.id))]
        if not queue:
            del self._open[order.shelf]
        self._book += 1


__all__ = ["OrderBookMixin"]
