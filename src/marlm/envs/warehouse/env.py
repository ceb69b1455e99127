"""The multi-robot warehouse as a PettingZoo ParallelEnv."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv

from marlm.envs.warehouse.breakdowns import Breakdown, BreakdownMixin, load_breakdowns
from marlm.envs.warehouse.dynamics import MOVES, STAY, moving_robots, numpy_sum
from marlm.envs.warehouse.instructions import InstructionsMixin
from marlm.envs.warehouse.layout import Layout, load_layout
from marlm.envs.warehouse.observations import (
    OBS_BLOCKED,
    OBS_CARRYING,
    OBS_CLOSER,
    OBS_HAS_TASK,
    OBS_ROBOT_NEIGHBOUR,
    OBS_SIZE,
    OBS_TARGET_OFFSET,
    ObservationTables,
)
from marlm.envs.warehouse.orders import (
    ORDER_STATUSES,
    Order,
    dispatch_key,
    generate_orders,
    load_orders,
)
from marlm.envs.warehouse.render import render_ansi, render_rgb
from marlm.envs.warehouse.rewards import (
    PART_BLOCKED_MOVE,
    PART_DELIVERY,
    PART_PICK,
    PART_PROGRESS,
    PART_STEP_COST,
    REWARD_PARTS,
    RewardWeights,
)
from marlm.errors import InputError, check_count

ROBOT_STATE_SIZE = 6
N_ACTIONS = len(MOVES)
ORDER_STATE_SIZE = 6


class WarehouseEnv(InstructionsMixin, BreakdownMixin, ObservationTables, ParallelEnv):
    """Robots fetch shelves for orders and bring them to stations.

    Description:
        A grid warehouse (:mod:`marlm.envs.warehouse.layout`) with ``n_robots`` robots. Orders
        (:mod:`marlm.envs.warehouse.orders`) appear at their arrival step. A robot assigned to an
        order drives to the shelf's access cell (pick on arrival, it now carries the shelf), then
        to the station nearest to that access cell (drop on arrival: the order is delivered and
        the robot is idle again). With ``auto_assign=True`` the env assigns arrived orders itself
        at the end of every step and at reset: pending orders sorted by (priority urgent < normal
        < low, deadline, arrival, id) each go to the idle robot with the shortest path to the
        shelf's access cell (ties: lowest robot index). With ``auto_assign=False`` the caller
        assigns with :meth:`assign` (the planner does this).

        A shelf is one object in one place: from the assignment of an order to its delivery the
        order holds its shelf, and no other order for that shelf can be assigned; it waits
        (:meth:`waiting_orders`) and becomes assignable (:meth:`pending_orders`) when the shelf
        is delivered. Orders for the same shelf are served one trip each, in the rule order
        above. At the drop the shelf is back in its place for the next order (a warehouse
        abstraction: RWARE makes the robot carry it back).

    Action Space:
        ``Discrete(5)`` per robot: 0 stay, 1 up (row - 1), 2 down (row + 1), 3 left (col - 1),
        4 right (col + 1). A robot missing from the action dict stays. Moves are resolved jointly
        by the rules of :func:`marlm.envs.warehouse.dynamics.resolve_moves`, RWARE 2.0.0's:
        moves into walls, shelves and edges refused; the longest chain wins a contested cell
        (equal chains: lower index); a rotation of three or more moves; a swap, and any robot
        leading into a standing robot or a cycle, waits. Two differences to RWARE stay: moves
        are absolute (RWARE turns and drives forward) and a shelf always blocks (RWARE lets an
        unloaded robot drive under shelves).

    Observation Space:
        ``Box(-1, 1, (16,), float32)`` per robot:

        * 0-1: offset to the current target ``(drow / H, dcol / W)``; 0, 0 without a task.
        * 2-5: neighbour up, down, left, right is blocked by wall, shelf or the map edge.
        * 6-9: neighbour up, down, left, right is occupied by another robot.
        * 10-13: moving up, down, left, right shortens the shortest-path distance to the target.
        * 14: carrying a shelf (0/1).
        * 15: has a task (0/1).

        ``state()`` is ``Box(0, 1, (6 * n_robots + 6,), float32)``: per robot ``row / (H-1)``,
        ``col / (W-1)``, carrying, has_task, ``target_row / (H-1)``, ``target_col / (W-1)``
        (target 0, 0 without a task); then the order book as fractions of all orders: future,
        pending, assigned-or-picked, delivered, deadline missed; then ``step / max_steps``.

    Rewards:
        Per robot, the sum of the named parts of :class:`RewardWeights`: ``step_cost``
        (``-w.step_cost`` while the robot has a task), ``progress`` (``w.progress`` x cells of
        shortest-path distance gained towards the target held at the start of the step),
        ``pick`` (``+w.pick``), ``delivery`` (``+w.delivery``), ``blocked_move``
        (``-w.blocked_move`` when a requested move was refused). The team reward is the sum over
        robots.

    Episode End:
        Terminated (all robots) when every order is delivered (an episode without orders only
        ends by the time limit). Truncated (all robots, not
        terminated) when ``max_steps`` steps have been taken. All robots leave ``agents`` then,
        and later ``step()`` calls return empty dicts.

    Information:
        ``infos[agent]`` after ``reset()`` and ``step()`` has exactly these keys:

        * "reward_parts" (dict[str, float]): the signed reward parts of this step, keyed by the
          :class:`RewardWeights` field names.
        * "team_reward" (float): the sum of all robots' rewards this step.
        * "collided" (bool): this robot's move was refused because of another robot.
        * "blocked" (bool): this robot's move was refused by a wall, a shelf or the map edge.
        * "position" (tuple[int, int]): (row, col) after the step.
        * "task" (str | None): the order id the robot works on.
        * "carrying" (bool): the robot carries a shelf.

    Arguments:
        layout ("small"): a shipped layout name, a map file path or a :class:`Layout`.
        orders (None): None (``n_orders`` generated from the seed at every reset), a list of
            :class:`Order`, or a JSONL file path.
        n_orders (20): generated orders per episode when ``orders`` is None.
        n_robots (None): robots; None means the layout's default (its 'R' cells).
        max_steps (500): time limit (truncation). Generated arrivals fall in the first 80%.
        auto_assign (True): the env assigns orders itself (see Description).
        reward_weights (None): :class:`RewardWeights` or a dict of its fields.
        seed (None): seed used by the first ``reset()`` without a seed.
        render_mode (None): "rgb_array" or "ansi".
        breakdowns (None): robots out of service for a stretch
            (:class:`~marlm.envs.warehouse.breakdowns.Breakdown`); None: the ``breakdown``
            lines of the order file when ``orders`` is a path, else none. A robot in a
            breakdown takes no order (:meth:`idle_robots` leaves it out).

    References:
        Papoudakis, Christianos, Schäfer, Albrecht (2021), "Benchmarking Multi-Agent Deep
        Reinforcement Learning Algorithms in Cooperative Tasks", NeurIPS Datasets and Benchmarks
        (the RWARE environment: layouts, collision rules).

    Version History:
        * v1: RWARE 2.0.0's collision rules exactly (the longest chain wins a contested cell, tails
          into a cycle or a standing robot wait); an order holds its shelf until delivered, so a
          shelf is carried by one robot at a time; deliveries are numbered by the step that
          reaches the station (they were one step late).
        * v0: initial version.
    """

    # State set by reset (declared here: step reads it, reset's helpers assign it).
    _pending_events: list[dict]
    _last_events: list[dict]

    metadata: dict[str, Any] = {
        "name": "warehouse_v1",
        "render_modes": ["rgb_array", "ansi"],
        "is_parallelizable": True,
        "render_fps": 5,
    }

    def __init__(
        self,
        layout: str | Path | Layout = "small",
        orders: None | list[Order] | str | Path = None,
        n_orders: int = 20,
        n_robots: int | None = None,
        max_steps: int = 500,
        auto_assign: bool = True,
        reward_weights: RewardWeights | dict | None = None,
        seed: int | None = None,
        render_mode: str | None = None,
        breakdowns: list[Breakdown] | None = None,
    ) -> None:
        self.layout = layout if isinstance(layout, Layout) else load_layout(layout)
        self._fixed_orders = self._load_order_argument(orders)
        self.n_orders = check_count(n_orders, "n_orders", allow_zero=True)
        if orders is None and self.n_orders and not self.layout.shelves:
            raise InputError(
                "the map has no shelf to generate orders for; add an 'S' cell or pass orders=[]",
                source=self.layout.source,
                field="map",
            )
        self.n_robots = check_count(
            self.layout.default_robots if n_robots is None else n_robots, "n_robots"
        )
        self.layout.place_robots(self.n_robots, np.random.default_rng(0))  # checks the count
        self.max_steps = check_count(max_steps, "max_steps")
        self.auto_assign = bool(auto_assign)
        if isinstance(reward_weights, dict):
            try:
                reward_weights = RewardWeights(**reward_weights)
            except TypeError as e:
                raise InputError(str(e), source="reward_weights", field="reward_weights") from e
        self.reward_weights = reward_weights or RewardWeights()
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise InputError(
                f"unknown render_mode {render_mode!r}; use one of {self.metadata['render_modes']}",
                source="render_mode",
                field="render_mode",
            )
        self.render_mode = render_mode
        self._init_seed = seed
        self._rng: np.random.Generator | None = None

        self.possible_agents = [f"robot_{i}" for i in range(self.n_robots)]
        source = "breakdowns"  # given: the caller's; else the order file's lines, if any
        if breakdowns is None:
            breakdowns = []
            if isinstance(orders, str | Path):
                breakdowns, source = load_breakdowns(orders), str(orders)
        self._check_breakdowns(breakdowns, source)
        self.agents: list[str] = []
        self._index = {agent: i for i, agent in enumerate(self.possible_agents)}
        self._observation_space = spaces.Box(-1.0, 1.0, (OBS_SIZE,), np.float32)
        self._action_space = spaces.Discrete(len(MOVES))
        self.state_space = spaces.Box(
            0.0, 1.0, (ROBOT_STATE_SIZE * self.n_robots + ORDER_STATE_SIZE,), np.float32
        )
        self._init_step_tables()
        self._reset_state([])

    # ----------------------------------------------------------------- spaces
    def observation_space(self, agent: str) -> spaces.Box:
        return self._observation_space

    def action_space(self, agent: str) -> spaces.Discrete:
        return self._action_space

    # ------------------------------------------------------------ PettingZoo
    def reset(
        self, seed: int | None = None, options: dict | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, dict]]:
        """Start an episode. ``seed`` re-seeds; without it the generator continues (the first
        reset uses the constructor's seed). Returns ``(observations, infos)``."""
        if seed is not None or self._rng is None:
            self._rng = np.random.default_rng(seed if seed is not None else self._init_seed)
        if self._fixed_orders is None:
            horizon = max(1, int(0.8 * self.max_steps))
            orders = generate_orders(self.layout, self.n_orders, self._rng, horizon)
        else:
            orders = self._fixed_orders
        self._reset_state(orders)
        width = self.layout.width
        self._cells = [r * width + c for r, c in self.layout.place_robots(self.n_robots, self._rng)]
        self.agents = list(self.possible_agents)
        events: list[dict] = []
        self._advance_clock(events)
        self._last_events = events
        zero_parts = [[0.0] * len(REWARD_PARTS) for _ in range(self.n_robots)]
        no = [False] * self.n_robots
        return self._observations(), self._infos(zero_parts, no, no)

    def step(self, actions: dict[str, int]) -> tuple[dict, dict, dict, dict, dict]:
        """Advance one step; see the class docstring for the order of effects.

        Raises:
            ValueError: an action outside 0..4 or an unknown agent name.
        """
        if not self.agents:
            return {}, {}, {}, {}, {}
        joint = self._joint_action(actions)
        events, self._pending_events = self._pending_events, []
        old_cells, old_target = self._cells, list(self._target)
        # rule 1 (the map) from the table, rules 2-3 (other robots) by moving_robots
        dest, goal, blocked = self._dest, [], []
        for cell, a in zip(old_cells, joint, strict=True):
            d = dest[cell * N_ACTIONS + a]
            goal.append(cell if d < 0 else d)
            blocked.append(d < 0)
        moving = moving_robots(old_cells, goal)
        self._cells = [g if m else c for c, g, m in zip(old_cells, goal, moving, strict=True)]
        collided = [
            a != STAY and not b and not m for a, b, m in zip(joint, blocked, moving, strict=True)
        ]
        parts = self._reward_parts(old_cells, old_target, blocked, collided)
        self._advance_tasks(parts, events)
        self._step_count += 1
        self._advance_clock(events)
        self._last_events = events

        finished = len(self._delivered) + len(self._cancelled) - len(self._returning)
        done = bool(self._orders) and finished == len(self._orders)
        cut = not done and self._step_count >= self.max_steps
        agents = self.possible_agents
        observations = self._observations()
        infos = self._infos(parts, collided, blocked)
        # numpy's row sum of float64[n, 5] adds left to right from 0.0: the same bits
        rewards = {
            a: 0.0 + p[0] + p[1] + p[2] + p[3] + p[4] for a, p in zip(agents, parts, strict=True)
        }
        terminations = dict.fromkeys(agents, done)
        truncations = dict.fromkeys(agents, cut)
        if done or cut:
            self.agents = []
        return observations, rewards, terminations, truncations, infos

    def state(self) -> np.ndarray:
        """Global state, float32[6 * n_robots + 6] (layout in the class docstring)."""
        h, w = max(self.layout.height - 1, 1), max(self.layout.width - 1, 1)
        robots = np.zeros((self.n_robots, ROBOT_STATE_SIZE), dtype=np.float32)
        pos = self._pos
        robots[:, 0] = pos[:, 0] / h
        robots[:, 1] = pos[:, 1] / w
        robots[:, 2] = self._carrying
        for i, target in enumerate(self._target):
            if target is not None:
                robots[i, 3:6] = (1.0, target[0] / h, target[1] / w)
        counts = {s: 0 for s in (*ORDER_STATUSES, "cancelled")}
        for status in self._status.values():
            counts[status] += 1
        total = max(len(self._orders), 1)
        book = [
            counts["future"],
            counts["pending"],
            counts["assigned"] + counts["picked"],
            counts["delivered"],
            len(self._missed),
        ]
        tail = np.array([*(x / total for x in book), self._step_count / self.max_steps])
        return np.concatenate([robots.ravel(), tail.astype(np.float32)])

    def render(self) -> np.ndarray | str | None:
        """``rgb_array``: uint8[H*16, W*16, 3]; ``ansi``: str; None without a render mode."""
        if self.render_mode == "rgb_array":
            open_ = ("pending", "assigned")
            requested = {self._orders[o].shelf for o, s in self._status.items() if s in open_}
            return render_rgb(self.layout, self._pos, np.array(self._carrying), requested)
        if self.render_mode == "ansi":
            return render_ansi(self.layout, self._pos, np.array(self._carrying))
        return None

    def close(self) -> None:
        pass

    # ----------------------------------------------------------- planner API
    def current_observations(self) -> dict[str, np.ndarray]:
        """Every robot's observation now, as ``reset``/``step`` return them: after
        :meth:`assign` or :meth:`release` changed a task, the observations that ``step``
        returned are out of date (``has_task``, target offset and ``closer`` bits)."""
        return self._observations()

    @property
    def step_count(self) -> int:
        """Steps taken in this episode."""
        return self._step_count

    @property
    def robot_positions(self) -> np.ndarray:
        """int64[n_robots, 2] (row, col), a copy."""
        return self._pos.copy()

    @property
    def orders(self) -> Mapping[str, Order]:
        """All orders of the episode by id (including future ones): a read-only view, not a
        copy (a step reads it once per order event; copying 100,000 orders each time was
        most of a step)."""
        return MappingProxyType(self._orders)

    @property
    def last_events(self) -> list[dict]:
        """Events of the last ``step()`` (or ``reset()``): dicts ``{"type", "order", "robot",
        "step"}`` with type ``order_arrived | assigned | released | picked | delivered | deadline_missed``.
        Assignments made with :meth:`assign` between steps are reported in the next step's list
        (their ``step`` is the step count when they were made).

        Step numbering (one for all events): steps count from 0; ``picked`` and ``delivered``
        carry the number of the step whose moves brought the robot there (the step count before
        that ``step()``); arrivals, assignments and misses found after a step carry the number of
        the next step, the first that can act on them. An order is late if it is not delivered
        at a step ``<= deadline``; its ``deadline_missed`` then carries ``deadline + 1``."""
        return list(self._last_events)

    @property
    def delivered(self) -> list[tuple[str, int]]:
        """``(order id, delivery step)`` in delivery order (numbering as in :attr:`last_events`)."""
        return list(self._delivered.items())

    @property
    def missed_deadlines(self) -> list[str]:
        """Ids of orders not delivered by their deadline, in the order the deadlines passed."""
        return list(self._missed)

    def idle_robots(self) -> list[str]:
        """Robots without a task and in service (not in a breakdown), in index order."""
        t, out = self._step_count, self._out_until
        return [
            a for i, a in enumerate(self.possible_agents) if self._task[i] is None and out[i] <= t
        ]

    def target_of(self, agent: str) -> tuple[int, int] | None:
        """The cell the robot is heading for, or None when idle."""
        return self._target[self._agent_index(agent)]

    def task_of(self, agent: str) -> str | None:
        """The robot's order id, or None when idle."""
        return self._task[self._agent_index(agent)]

    def carrying(self, agent: str) -> bool:
        """Whether the robot carries a shelf."""
        return self._carrying[self._agent_index(agent)]

    def assign(self, agent: str, order_id: str) -> None:
        """Give a pending order to an idle robot.

        Any arrived, unassigned order whose shelf no order holds may be given, whichever order
        for that shelf :meth:`pending_orders` offers first (a planner may rank them its own way).

        Raises:
            ValueError: unknown robot or order, robot busy, order not pending (future, taken or
                delivered), another order holds its shelf, the shelf is unreachable from the
                robot, or the episode is over.
        """
        i = self._agent_index(agent)
        if not self.agents:
            raise ValueError("the episode is over; call reset() first")
        if order_id not in self._orders:
            raise ValueError(f"unknown order {order_id!r}")
        if self._task[i] is not None:
            raise ValueError(f"{agent} is busy with order {self._task[i]!r}")
        if self._out_until[i] > self._step_count:
            raise ValueError(f"{agent} is out of service until step {self._out_until[i]}")
        if self._status[order_id] != "pending":
            raise ValueError(f"order {order_id!r} is {self._status[order_id]}, not pending")
        shelf = self._orders[order_id].shelf
        holder = self._shelf_holder.get(shelf)
        if holder is not None:
            raise ValueError(
                f"order {order_id!r} waits for shelf {shelf}: order {holder!r} holds it"
            )
        if self._path_length(i, order_id) < 0:
            raise ValueError(f"{agent} cannot reach shelf {self._orders[order_id].shelf}")
        self._assign(i, order_id, self._pending_events)

    def release(self, agent: str) -> str:
        """Take a robot off its order before it picks the shelf up; the order is pending again
        (a planner may reassign the robot to a more urgent order). Reported as a ``released``
        event in the next step's events. Returns the order id.

        Raises:
            ValueError: unknown robot, robot idle, or the robot already carries the shelf.
        """
        i = self._agent_index(agent)
        order_id = self._task[i]
        if order_id is None:
            raise ValueError(f"{agent} has no order to release")
        if self._carrying[i]:
            raise ValueError(f"{agent} already carries the shelf of order {order_id!r}")
        self._task[i] = self._target[i] = None
        self._status[order_id] = "pending"
        self._n_pending += 1
        self._open_add(self._orders[order_id])
        self._shelf_holder.pop(self._orders[order_id].shelf, None)  # the shelf is unclaimed again
        self._pending_events.append(self._event("released", order_id, i))
        return order_id

    # -------------------------------------------------------------- internals
    def _reset_state(self, orders: list[Order]) -> None:
        self._orders = {o.id: o for o in orders}
        self._status = dict.fromkeys(self._orders, "future")
        self._by_arrival = sorted(orders, key=lambda o: o.arrival)
        self._by_deadline = sorted(orders, key=lambda o: o.deadline)
        self._next_arrival = self._next_deadline = 0
        self._delivered: dict[str, int] = {}
        self._shelf_holder: dict[str, str] = {}
        self._missed: list[str] = []
        self._step_count = 0
        self._n_pending = 0  # orders with status "pending"
        self._reset_book()
        self._cells = [0] * self.n_robots  # flat cell index row * width + col of each robot
        self._carrying = [False] * self.n_robots
        self._task: list[str | None] = [None] * self.n_robots
        self._target: list[tuple[int, int] | None] = [None] * self.n_robots
        self._pending_events: list[dict] = []
        self._last_events: list[dict] = []
        self._reset_instructions()
        self._reset_breakdowns()

    def _load_order_argument(self, orders) -> list[Order] | None:
        if orders is None:
            return None
        if isinstance(orders, str | Path):
            return load_orders(orders, self.layout)
        fixed, seen = [], set()
        for k, order in enumerate(orders):
            try:
                shelf = self.layout.shelf_name(order.shelf)
            except KeyError as e:
                raise InputError(e.args[0], source="orders", line=k + 1, field="shelf") from None
            if order.id in seen:
                raise InputError(
                    f"duplicate id {order.id!r}", source="orders", line=k + 1, field="id"
                )
            seen.add(order.id)
            fixed.append(order.model_copy(update={"shelf": shelf}))
        return fixed

    def _agent_index(self, agent: str) -> int:
        try:
            return self._index[agent]
        except KeyError:
            raise ValueError(
                f"unknown robot {agent!r}; robots are {self.possible_agents}"
            ) from None

    def _joint_action(self, actions: dict[str, int]) -> list[int]:
        joint = [STAY] * self.n_robots
        index = self._index
        for agent, action in actions.items():
            a = action if type(action) is int else int(action)
            if not 0 <= a < N_ACTIONS:
                raise ValueError(f"action {action!r} for {agent} is not in 0..{N_ACTIONS - 1}")
            i = index.get(agent)
            joint[self._agent_index(agent) if i is None else i] = a
        return joint

    def _path_length(self, i: int, order_id: str) -> int:
        access = self.layout.access[self._orders[order_id].shelf]
        return self._distances(access)[self._cells[i]]

    def _assign(self, i: int, order_id: str, events: list[dict]) -> None:
        self._open_remove(self._orders[order_id])
        self._shelf_holder[self._orders[order_id].shelf] = order_id
        self._task[i] = order_id
        self._target[i] = self.layout.access[self._orders[order_id].shelf]
        self._status[order_id] = "assigned"
        self._n_pending -= 1
        events.append(self._event("assigned", order_id, i))

    def _event(self, kind: str, order_id: str, robot: int | None) -> dict:
        agent = None if robot is None else self.possible_agents[robot]
        return {"type": kind, "order": order_id, "robot": agent, "step": self._step_count}

    def _reward_parts(
        self, old_cells: list[int], old_target: list, blocked: list[bool], collided: list[bool]
    ) -> list[list[float]]:
        """Per robot ``[step_cost, progress, pick, delivery, blocked_move]`` (pick and delivery
        are filled in later), Python floats with the values float64[n, 5] held before."""
        w = self.reward_weights
        step_cost, blocked_move = float(-w.step_cost), float(-w.blocked_move)
        parts, cells, cache = [], self._cells, self._distance_cache
        for i, target in enumerate(old_target):
            row = [0.0, 0.0, 0.0, 0.0, blocked_move if blocked[i] or collided[i] else 0.0]
            if target is not None:
                dist = cache.get(target) or self._distances(target)
                before, after = dist[old_cells[i]], dist[cells[i]]
                gain = before - after if before >= 0 and after >= 0 else 0
                row[PART_STEP_COST] = step_cost
                row[PART_PROGRESS] = float(w.progress * gain)
            parts.append(row)
        return parts

    def _advance_tasks(self, parts: list[list[float]], events: list[dict]) -> None:
        """Pick or drop for robots standing on their target (at most one per robot per step)."""
        for i, order_id in enumerate(self._task):
            if order_id is None or self._cell_rc[self._cells[i]] != self._target[i]:
                continue
            if order_id in self._returning:  # cancelled while carried: the shelf is back
                self._put_back(i, order_id)
            elif not self._carrying[i]:
                self._carrying[i] = True
                self._target[i] = self.drop_cell(order_id)
                self._status[order_id] = "picked"
                parts[i][PART_PICK] = float(self.reward_weights.pick)
                events.append(self._event("picked", order_id, i))
            else:
                self._carrying[i] = False
                self._task[i] = self._target[i] = None
                self._status[order_id] = "delivered"
                del self._shelf_holder[self._orders[order_id].shelf]
                self._book += 1  # the shelf is free: its first order is offered
                self._delivered[order_id] = self._step_count
                parts[i][PART_DELIVERY] = float(self.reward_weights.delivery)
                event = self._event("delivered", order_id, i)
                event["station"] = self.layout.station_names.get(self._cell_rc[self._cells[i]])
                events.append(event)

    def _advance_clock(self, events: list[dict]) -> None:
        """Arrivals and deadline misses at the current step count, then auto-assignment."""
        t = self._step_count
        while (
            self._next_arrival < len(self._by_arrival)
            and self._by_arrival[self._next_arrival].arrival <= t
        ):
            order = self._by_arrival[self._next_arrival]
            self._status[order.id] = "pending"
            self._n_pending += 1
            self._open_add(order)
            events.append(self._event("order_arrived", order.id, None))
            self._next_arrival += 1
        while (
            self._next_deadline < len(self._by_deadline)
            and self._by_deadline[self._next_deadline].deadline < t
        ):
            order = self._by_deadline[self._next_deadline]
            if self._status[order.id] not in ("delivered", "cancelled") and (
                order.id not in self._miss_checked and order.id not in self._returning
            ):
                self._missed.append(order.id)
                events.append(self._event("deadline_missed", order.id, None))
            self._miss_checked.add(order.id)
            self._next_deadline += 1
        self._start_breakdowns()
        if self.auto_assign:
            self._auto_assign(events)

    def _auto_assign(self, events: list[dict]) -> None:
        """Pending orders by (priority, deadline, arrival, id) to the nearest idle robot."""
        t = self._step_count
        idle = [i for i, task in enumerate(self._task) if task is None and self._out_until[i] <= t]
        if not idle or not self._n_pending:
            return  # nothing to assign or nobody to assign it to (pending_orders has no effect)
        # at most one order per shelf, and none for a held shelf
        pending = sorted(self.pending_orders(), key=dispatch_key)
        cells = self._cells
        for order in pending:
            dist = self._distances(self.layout.access[order.shelf])
            reachable = [i for i in idle if dist[cells[i]] >= 0]
            if not reachable:
                continue
            best = min(reachable, key=lambda i: (dist[cells[i]], i))
            self._assign(best, order.id, events)
            idle.remove(best)
            if not idle:
                break

    def _infos(self, parts: list[list[float]], collided: list[bool], blocked: list[bool]) -> dict:
        team = numpy_sum([x for row in parts for x in row])
        rc, cells, task, carrying = self._cell_rc, self._cells, self._task, self._carrying
        return {
            a: {
                "reward_parts": dict(zip(REWARD_PARTS, parts[i], strict=True)),
                "team_reward": team,
                "collided": collided[i],
                "blocked": blocked[i],
                "position": rc[cells[i]],
                "task": task[i],
                "carrying": carrying[i],
            }
            for i, a in enumerate(self.possible_agents)
        }


__all__ = [
    "OBS_BLOCKED",
    "OBS_CARRYING",
    "OBS_CLOSER",
    "OBS_HAS_TASK",
    "OBS_ROBOT_NEIGHBOUR",
    "OBS_SIZE",
    "OBS_TARGET_OFFSET",
    "PART_BLOCKED_MOVE",
    "PART_DELIVERY",
    "PART_PICK",
    "PART_PROGRESS",
    "PART_STEP_COST",
    "REWARD_PARTS",
    "RewardWeights",
    "WarehouseEnv",
]
