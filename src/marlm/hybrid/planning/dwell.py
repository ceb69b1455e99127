"""Where idle robots wait: dwell points learned online, and a reserve robot for urgent work.

A robot without a task does not stay where it happened to finish (usually on a station, where it
is in the way of the next drop). It drives to a *dwell point*, a parking cell chosen to shorten
the travel to the next pick, and the planner may assign it at any time on the way:

- **Demand, learned online.** Each order that has arrived adds its priority's weight
  (:data:`DEMAND_WEIGHT`) to its shelf; every shelf starts with one pseudo-order (Laplace's
  add-one prior), so before any order the demand is uniform over the shelves. Orders are counted
  once they arrive (status no longer ``future``), never before: the policy knows the past of the
  stream, not its future. Urgent orders are also counted apart, for the reserve.
- **Dwell points: the k-median of that demand.** With ``k`` idle robots the points minimise the
  demand-weighted travel from the nearest point to each shelf's pick cell, ``sum_s p(s) min_j
  d(point_j, access_s)`` (the p-median problem, Hakimi 1964; greedy addition, Kuehn & Hamburger
  1963). This is the dwell-point rule of unit-load AS/RS and AMR fleets: an idle vehicle waits
  where the expected travel to its next request is least (Egbelu, "Framework for dwell point
  location of automated storage/retrieval systems", IJPR 1991; Bozer & White, "Travel-time
  models for automated storage/retrieval systems", IIE Transactions 1984; Roy, Krishnamurthy,
  Heragu & Malmborg, "Queuing models to analyze dwell-point and cross-aisle location in
  autonomous vehicle-based warehouse systems", EJOR 2015). Robots are matched to points by
  ``scipy.optimize.linear_sum_assignment`` on their distances.
- **A reserve robot for urgent work** (``reserve=True``). One idle robot (the one nearest to the
  urgent demand's 1-median, kept while it stays idle) waits at that 1-median, and a plan that
  would give it a normal or low order while another idle robot is left without one gives that
  order to the nearest such robot instead (:meth:`DwellPolicy.keep_reserve`). Capacity is
  reserved only out of surplus: no order ever waits while a robot is idle, so the reserve costs
  a normal order at most the difference in travel between the reserve and the next idle robot.
  This is trunk reservation (guard channels), the standard way of giving one traffic class
  priority on shared servers (Hong & Rappaport, "Traffic model and performance analysis for
  cellular mobile radio telephone systems with prioritized and nonprioritized handoff
  procedures", IEEE Trans. Veh. Technol. 1986), in its work-conserving form.

Parking cells (:func:`parking_cells`) are floor cells that are not a station, not a shelf's pick
cell and not inside a one-wide passage, so a waiting robot blocks neither a drop, a pick nor an
aisle. Idle robots have the lowest priority in the rule layer, which still filters every move
and pushes them aside (:class:`marlm.hybrid.rules.pibt_layer.PibtShield`). The robots drive there
under :class:`marlm.hybrid.acting.dwell.DwellExecutor`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import linear_sum_assignment

from marlm.envs.warehouse.layout import Layout
from marlm.hybrid.planning.planner import UNREACHABLE_DISTANCE, OrderView, Plan, effective_class

Cell = tuple[int, int]

#: Weight of one arrived order in the demand the dwell points serve, by priority: an urgent
#: order's travel counts twice a normal one's, a low one's half (the triage planner's distance
#: weights, :data:`marlm.hybrid.planning.triage.DISTANCE_WEIGHT`).
DEMAND_WEIGHT = {"urgent": 2.0, "normal": 1.0, "low": 0.5}

#: Pseudo-orders per shelf before any order arrives (Laplace's add-one prior).
PRIOR_PER_SHELF = 1.0


def parking_cells(layout: Layout) -> list[Cell]:
    """Cells where an idle robot may wait, row-major.

    Floor cells that are not a station, not a shelf's pick (access) cell, and not inside a
    one-wide passage (blocked on both sides across the direction of travel: left and right, or
    up and down). If a map leaves none, every free cell that is not a station.
    """
    free = np.asarray(layout.free, dtype=bool)
    h, w = free.shape
    padded = np.pad(free, 1, constant_values=False)
    up, down = padded[:-2, 1:-1], padded[2:, 1:-1]
    left, right = padded[1:-1, :-2], padded[1:-1, 2:]
    one_wide = (~left & ~right) | (~up & ~down)
    avoid = set(layout.stations) | set(layout.access.values())
    cells = [(r, c) for r in range(h) for c in range(w) if free[r, c] and not one_wide[r, c]]
    cells = [cell for cell in cells if cell not in avoid]
    if not cells:
        stations = set(layout.stations)
        cells = [(r, c) for r in range(h) for c in range(w) if free[r, c]]
        cells = [cell for cell in cells if cell not in stations]
    return cells


def k_median(cost: np.ndarray, demand: np.ndarray, k: int, fixed: Sequence[int] = ()) -> list[int]:
    """Greedy k-median: ``k`` rows of ``cost`` that, with the ``fixed`` rows, minimise
    ``sum_s demand[s] * min_j cost[j, s]`` (Kuehn & Hamburger 1963, greedy addition).

    Args:
        cost: ``float64[n_points, n_sites]`` travel from each candidate point to each site.
        demand: ``float64[n_sites]`` non-negative weights.
        k: points to add (at most ``n_points - len(fixed)``).
        fixed: rows already placed (e.g. the reserve's point).

    Returns:
        the ``k`` added row indices, in the order they were added; ties go to the lower row.
    """
    best = np.full(cost.shape[1], np.inf)
    for j in fixed:
        best = np.minimum(best, cost[j])
    chosen: list[int] = []
    taken = set(fixed)
    for _ in range(k):
        totals = np.minimum(cost, best[None, :]) @ demand
        totals[list(taken)] = np.inf
        j = int(np.argmin(totals))
        if not np.isfinite(totals[j]):
            break
        chosen.append(j)
        taken.add(j)
        best = np.minimum(best, cost[j])
    return chosen


class GreedyMedians:
    """The greedy k-median additions (:func:`k_median`) for one ``cost``, ``demand`` and
    ``fixed``, extended as more are asked for: greedy addition does not depend on ``k``, so the
    first ``k`` of a longer run are ``k_median(cost, demand, k, fixed)``.

    Each addition updates the totals only over the sites the new point brings closer
    (``O(n_points * changed)`` instead of ``O(n_points * n_sites)``). With integer costs and
    demands in halves (:data:`DEMAND_WEIGHT`, :data:`PRIOR_PER_SHELF`) every total is exact in
    float64 (below 2**53), so the choices, ties included, are :func:`k_median`'s.

    Args:
        cost: ``float64[n_points, n_sites]``, finite.
        demand: ``float64[n_sites]`` (copied).
        fixed: rows already placed.
    """

    def __init__(self, cost: np.ndarray, demand: np.ndarray, fixed: Sequence[int] = ()) -> None:
        self.cost = cost
        self.demand = np.array(demand, dtype=np.float64)
        self.fixed = tuple(int(j) for j in fixed)
        best = np.full(cost.shape[1], np.inf)
        for j in self.fixed:
            best = np.minimum(best, cost[j])
        self._best0 = best  # before any addition
        self.chosen: list[int] = []
        # _history[t]: the totals before addition t (over all rows, taken ones included).
        self._history: list[np.ndarray] = []
        self._reset(0)

    def _reset(self, i: int, totals: np.ndarray | None = None) -> None:
        """Keep the first ``i`` additions (and their totals), forget the rest."""
        self.chosen = self.chosen[:i]
        self._history = self._history[:i]
        best = self._best0
        for j in self.chosen:
            best = np.minimum(best, self.cost[j])
        self._best = best
        self._taken = np.zeros(self.cost.shape[0], dtype=bool)
        self._taken[[*self.fixed, *self.chosen]] = True
        self._totals = totals  # sum_s demand[s] * min(cost[j, s], best[s]); None: not yet
        self._exhausted = False

    def first(self, k: int) -> list[int]:
        """The first ``k`` additions (fewer when the points run out)."""
        cost, demand = self.cost, self.demand
        while len(self.chosen) < k and not self._exhausted:
            if self._totals is None:
                self._totals = self._full_totals(self._best)
            totals = np.where(self._taken, np.inf, self._totals)
            j = int(np.argmin(totals))
            if not np.isfinite(totals[j]):
                self._exhausted = True
                break
            self._history.append(self._totals)
            self.chosen.append(j)
            self._taken[j] = True
            best = np.minimum(self._best, cost[j])
            changed = np.flatnonzero(best < self._best)
            if changed.size > cost.shape[1] // 4:  # most sites: recompute, fewer temporaries
                self._totals = self._full_totals(best)
            elif changed.size:
                sub = cost[:, changed]
                gain = np.minimum(sub, self._best[changed]) - np.minimum(sub, best[changed])
                self._totals = self._totals - gain @ demand[changed]
            self._best = best
        return self.chosen[:k]

    @property
    def exhausted(self) -> bool:
        """True once :meth:`first` found no point left to add."""
        return self._exhausted

    def _full_totals(self, best: np.ndarray) -> np.ndarray:
        if np.isinf(best).all():  # min(cost, inf) is cost
            return self.cost @ self.demand
        return np.minimum(self.cost, best[None, :]) @ self.demand

    def set_demand(self, demand: np.ndarray, max_changed: int = 64) -> bool:
        """Take a new ``demand`` that differs from the current one on at most ``max_changed``
        sites, keeping the additions that stay the greedy's choice under it: every stored
        total is corrected by the change (exactly, as above), and the run is cut at the first
        addition whose argmin moved. Returns False (nothing changed) when more sites differ."""
        demand = np.asarray(demand, dtype=np.float64)
        sites = np.flatnonzero(demand != self.demand)
        if sites.size == 0:
            return True
        if sites.size > max_changed:
            return False
        delta = demand[sites] - self.demand[sites]
        self.demand = np.array(demand, dtype=np.float64)
        cols = self.cost[:, sites]  # float64[n_points, changed]
        # bests[t]: best[sites] before addition t (t = 0 .. len(chosen)).
        rows = np.vstack([self._best0[sites][None, :], self.cost[self.chosen][:, sites]])
        bests = np.minimum.accumulate(rows, axis=0)
        history = [
            totals + np.minimum(cols, bests[t][None, :]) @ delta
            for t, totals in enumerate(self._history)
        ]
        following = None
        if self._totals is not None:
            following = self._totals + np.minimum(cols, bests[-1][None, :]) @ delta
        taken = np.zeros(self.cost.shape[0], dtype=bool)
        taken[list(self.fixed)] = True
        for t, j in enumerate(self.chosen):
            masked = np.where(taken, np.inf, history[t])
            if int(np.argmin(masked)) != j:  # a finite minimum: j itself was finite
                self._history = history
                self._reset(t, history[t])
                return True
            taken[j] = True
        self._history = history
        self._totals = following
        self._exhausted = False
        return True


@dataclass
class DwellPolicy:
    """Dwell points for the idle robots of one warehouse, and the reserve for urgent work.

    Args:
        layout: the warehouse layout.
        reserve: keep one idle robot for urgent orders (see the module docstring).
        exact_limit: with at most this many idle robots (besides the reserve) every call places
            them exactly: the greedy k-median of the demand seen so far, matched by least total
            distance from where the robots stand now. With more, the fleet-scale path
            (:meth:`targets`) keeps the work per step small.
        refresh_drift: fleet-scale path: the dwell points are recomputed once the demand has
            moved by this share of its total (L1) since they were computed.
        refresh_budget: fleet-scale path: greedy additions per call spent on that recomputation
            (the old points stay in use until the new ones are complete).
        rematch_budget: fleet-scale path: robots still driving to their point that are matched
            again at each call, with the robots that need a point (in turns, so that every
            driving robot comes round).
        full_every: fleet-scale path: every ``full_every``-th call matches all the idle robots
            again, as the exact path does at every call (0: never).

    Call :meth:`observe` with the orders that have arrived, then :meth:`targets` for the idle
    robots' cells; :meth:`keep_reserve` adjusts a plan before it is applied.
    """

    layout: Layout
    reserve: bool = True
    exact_limit: int = 64
    refresh_drift: float = 0.05
    refresh_budget: int = 32
    rematch_budget: int = 128
    full_every: int = 8

    def __post_init__(self) -> None:
        layout = self.layout
        self.cells = parking_cells(layout)
        self.shelves = list(layout.shelves)
        self._shelf_index = {s: i for i, s in enumerate(self.shelves)}
        # Column-major: the greedy reads the columns (sites) an addition changes, contiguous.
        cost = np.empty((len(self.cells), len(self.shelves)), dtype=np.float64, order="F")
        rows = np.array([r for r, _ in self.cells], dtype=np.intp)
        cols = np.array([c for _, c in self.cells], dtype=np.intp)
        for i, shelf in enumerate(self.shelves):
            d = layout.distance_from(layout.access[shelf])[rows, cols]
            cost[:, i] = np.where(d >= 0, d, UNREACHABLE_DISTANCE)
        self.cost = cost  # float64[n_cells, n_shelves]: steps from a parking cell to a pick cell
        self.demand = np.full(len(self.shelves), PRIOR_PER_SHELF)  # all orders, weighted
        self.urgent_demand = np.full(len(self.shelves), PRIOR_PER_SHELF)
        self._seen: set[str] = set()
        self.reserve_robot: str | None = None
        # Caches: the same demand gives the same points (the greedy's additions, the reserve's
        # point), so they are recomputed only when an order changes the demand.
        self._medians: GreedyMedians | None = None
        self._reserve_cache: tuple[bytes, int] | None = None
        self._matching: tuple[tuple, list[int], list[int]] | None = None  # key, rows, columns
        # Fleet-scale path: the greedy run in use, the one being computed, and who goes where.
        self._run: GreedyMedians | None = None
        self._next: GreedyMedians | None = None
        self.assigned: dict[str, int] = {}  # robot -> row of cells (not the reserve robot)
        self._turn = 0  # where the next call starts among the driving robots
        self._calls = 0  # fleet-scale matchings so far

    def observe(self, orders: Iterable[OrderView]) -> None:
        """Count the arrived ``orders`` not counted yet: ``DEMAND_WEIGHT[priority]`` on the
        shelf of each, and 1 on the urgent demand for an urgent one (listed priority). The
        scheduler passes the pending orders each step (an order waiting for its shelf is
        counted once the shelf is free)."""
        for order in orders:
            if order.id in self._seen:
                continue
            self._seen.add(order.id)
            i = self._shelf_index.get(order.shelf)
            if i is None:
                continue
            self.demand[i] += DEMAND_WEIGHT.get(order.priority, 1.0)
            if order.priority == "urgent":
                self.urgent_demand[i] += 1.0

    def reserve_point(self) -> int:
        """Row of :attr:`cells` that minimises the expected travel to the next urgent order."""
        key = self.urgent_demand.tobytes()
        if self._reserve_cache is None or self._reserve_cache[0] != key:
            self._reserve_cache = (key, int(np.argmin(self.cost @ self.urgent_demand)))
        return self._reserve_cache[1]

    def _points(self, k: int, fixed: Sequence[int]) -> list[int]:
        """``k_median(self.cost, self.demand, k, fixed)``, from the cached greedy run while the
        demand and ``fixed`` stay the same."""
        m = self._medians
        if m is None or tuple(fixed) != m.fixed or not m.set_demand(self.demand):
            m = self._medians = GreedyMedians(self.cost, self.demand, fixed)
        return m.first(k)

    def choose_reserve(self, idle: Mapping[str, Cell]) -> int:
        """Update :attr:`reserve_robot` as :meth:`targets` does (the idle robot nearest to the
        reserve's point, kept while idle; None when ``idle`` is empty or no cell exists) without
        placing the others; returns the point's row of :attr:`cells` (-1 when none)."""
        if not idle or not self.cells:
            self.reserve_robot = None
            return -1
        point = self.reserve_point()
        if self.reserve_robot not in idle:  # the robot nearest to the point; kept while idle
            d = self.layout.distance_from(self.cells[point])
            self.reserve_robot = min(idle, key=lambda r: _steps(d, idle[r]))
        return point

    def targets(self, idle: Mapping[str, Cell]) -> dict[str, Cell]:
        """A dwell cell for each idle robot.

        Args:
            idle: ``{robot: (row, col)}`` of the robots without a task, in agent order.

        Returns:
            ``{robot: (row, col)}``; the reserve robot (:attr:`reserve_robot`, updated here)
            gets the urgent demand's 1-median, the others the greedy k-median of all the demand
            given that point, matched by least total distance.
        """
        robots = list(idle)
        if not robots or not self.cells:
            self.reserve_robot = None
            return {}
        fixed: list[int] = []
        out: dict[str, Cell] = {}
        if self.reserve:
            point = self.choose_reserve(idle)
            reserve = self.reserve_robot
            if reserve is None:  # choose_reserve names one whenever a robot is idle and cells exist
                raise RuntimeError("dwell policy: no reserve robot among the idle robots")
            out[reserve] = self.cells[point]
            fixed.append(point)
            robots.remove(reserve)
        else:
            self.reserve_robot = None
        if len(robots) > self.exact_limit:
            for robot, j in self._rematch(idle, robots, self._fleet_points(len(robots), fixed)):
                out[robot] = self.cells[j]
            return out
        points = self._points(len(robots), fixed)
        self.assigned = {}
        if robots and points:
            rows = np.array([int(idle[r][0]) for r in robots], dtype=np.intp)
            cols = np.array([int(idle[r][1]) for r in robots], dtype=np.intp)
            # The same robots on the same cells for the same points: the same matching (robots
            # parked at their dwell points, step after step), so it is not solved again.
            key = (tuple(robots), rows.tobytes(), cols.tobytes(), tuple(points))
            if self._matching is None or self._matching[0] != key:
                matched = linear_sum_assignment(self._distances(rows, cols, points))
                self._matching = (key, matched[0].tolist(), matched[1].tolist())
            for i, j in zip(self._matching[1], self._matching[2], strict=True):
                out[robots[i]] = self.cells[points[j]]
                self.assigned[robots[i]] = points[j]
        return out

    def _distances(self, rows: np.ndarray, cols: np.ndarray, points: Sequence[int]) -> np.ndarray:
        """``float64[len(rows), len(points)]``: steps from the cell ``(rows[i], cols[i])`` to
        the parking cell ``points[j]`` (:func:`_steps`, for all of them at once)."""
        dist = np.empty((len(rows), len(points)), dtype=np.float64)
        for j, p in enumerate(points):
            dist[:, j] = self.layout.distance_from(self.cells[p])[rows, cols]
        dist[dist < 0] = UNREACHABLE_DISTANCE
        return dist

    def _fleet_points(self, k: int, fixed: Sequence[int]) -> list[int]:
        """The fleet-scale path's ``k`` dwell points: the first ``k`` (not in ``fixed``) of a
        greedy run (:class:`GreedyMedians`) computed for the demand and fixed rows of some
        earlier call.

        The run in use is replaced once the demand has drifted from its own by more than
        :attr:`refresh_drift` (L1 over its total) or ``fixed`` changed: a run for the demand of
        that call is extended by :attr:`refresh_budget` additions per call and takes over when
        it has ``k`` points (or no more). A larger ``k`` extends the run in use at once (greedy
        addition does not depend on ``k``, so the points of fewer robots stay)."""
        fixed = tuple(int(j) for j in fixed)
        run = self._run
        if run is None:
            run = self._run = GreedyMedians(self.cost, self.demand, fixed)
        elif self._next is None:
            drift = float(np.abs(self.demand - run.demand).sum()) / float(run.demand.sum())
            if drift > self.refresh_drift or run.fixed != fixed:
                self._next = GreedyMedians(self.cost, self.demand, fixed)
        if self._next is not None:
            nxt = self._next
            nxt.first(min(k, len(nxt.chosen) + max(1, self.refresh_budget)))
            if len(nxt.chosen) >= k or nxt.exhausted:
                run, self._run, self._next = nxt, nxt, None
        # A run made for other fixed rows may hold today's among its points.
        return [j for j in run.first(k + len(fixed)) if j not in fixed][:k]

    def _rematch(
        self, idle: Mapping[str, Cell], robots: list[str], points: list[int]
    ) -> list[tuple[str, int]]:
        """Fleet-scale matching of ``robots`` to ``points`` (rows of :attr:`cells`), changed
        only where needed.

        A robot keeps the point it had from the previous call while it stays idle (and is not
        the reserve) and the point stays among ``points``. The others, and up to
        :attr:`rematch_budget` robots still driving to their kept point (taken in turns), are
        matched to the points left by least total distance from where they stand now
        (``linear_sum_assignment`` over those rows and columns only: never worse for them than
        keeping their points), so a call costs ``O(len(robots))`` plus a matching of at most
        the robots that changed and the budget.

        Returns:
            ``[(robot, row of cells)]``: kept pairs first (in ``robots`` order), then the new
            ones; robots left over when the points run out get none. :attr:`assigned` is set to
            the same pairs.
        """
        wanted = set(points)
        before = self.assigned
        kept = [(r, before[r]) for r in robots if before.get(r, -1) in wanted]
        driving = [k for k, (r, j) in enumerate(kept) if idle[r] != self.cells[j]]
        if driving and self.rematch_budget > 0:
            start = self._turn % len(driving)
            again = set((driving[start:] + driving[:start])[: self.rematch_budget])
            self._turn = start + len(again)
            kept = [pair for k, pair in enumerate(kept) if k not in again]
        self._calls += 1
        if self.full_every > 0 and self._calls % self.full_every == 0:
            kept = []  # every full_every-th call: all of them, as the exact path does
        used = {j for _, j in kept}
        held = {r for r, _ in kept}
        loose = [r for r in robots if r not in held]
        free = [j for j in points if j not in used]
        pairs = list(kept)
        if loose and free:
            rows = np.array([int(idle[r][0]) for r in loose], dtype=np.intp)
            cols = np.array([int(idle[r][1]) for r in loose], dtype=np.intp)
            matched = linear_sum_assignment(self._distances(rows, cols, free))
            pairs += [(loose[i], free[j]) for i, j in zip(*matched, strict=True)]
        self.assigned = dict(pairs)
        return pairs

    def keep_reserve(self, plan: Plan, classes: Mapping[str, str]) -> Plan:
        """``plan`` with the reserve robot kept for urgent work.

        If the plan gives the reserve robot an order whose class (:func:`effective_class` of
        its listed priority and ``classes``) is not urgent while an idle robot of the snapshot
        is left without an order, that order goes to the nearest such robot instead (ties: the
        first listed) and the reserve stays idle. Otherwise the plan is returned unchanged.
        """
        robot = self.reserve_robot
        snap = plan.snapshot
        if not self.reserve or robot is None or robot not in snap.idle:
            return plan
        orders = {o.id: o for o in snap.pending}
        pairs = list(plan.assignments)
        mine = [k for k, (r, _) in enumerate(pairs) if r == robot]
        if not mine:
            return plan
        k = mine[0]
        order = orders.get(pairs[k][1])
        if order is None or effective_class(order.priority, classes.get(order.id)) == "urgent":
            return plan
        busy = {r for r, _ in pairs}
        spare = [r for r in snap.idle if r not in busy]
        if not spare:
            return plan
        far = UNREACHABLE_DISTANCE
        other = min(spare, key=lambda r: (snap.distance.get((r, order.id), far), spare.index(r)))
        if snap.distance.get((other, order.id), far) >= far:
            return plan
        pairs[k] = (other, order.id)
        return dataclasses.replace(plan, assignments=pairs)


def _steps(dist: np.ndarray, cell: Sequence[int]) -> int:
    d = int(dist[int(cell[0]), int(cell[1])])
    return d if d >= 0 else UNREACHABLE_DISTANCE


__all__ = [
    "DEMAND_WEIGHT",
    "PRIOR_PER_SHELF",
    "DwellPolicy",
    "GreedyMedians",
    "k_median",
    "parking_cells",
]
