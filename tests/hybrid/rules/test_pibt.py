"""The PIBT rule layer: safety on any input, progress on maps with dead ends and corridors, and
the same moves as the short recursive reference (``pibt_reference.py``)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pibt_reference import reference_step

from marlm.envs.warehouse.dynamics import LEFT, MOVES, RIGHT, STAY, UP, resolve_moves
from marlm.hybrid.acting.guidance import BUSY, aisle_costs, guided_distance, traffic_costs
from marlm.hybrid.acting.scores import distance_scores
from marlm.hybrid.rules.layer import is_safe
from marlm.hybrid.rules.pibt import Pibt, bfs_distance, dead_end_depth, neighbour_table


def ring_map(rng: np.random.Generator, h: int = 9, w: int = 11) -> np.ndarray:
    """A one-wide ring, maybe a one-wide chord across it, and 1-5 dead-end corridors off it."""
    free = np.zeros((h, w), dtype=bool)
    r0, r1 = rng.integers(1, 3), rng.integers(h - 3, h - 1)
    c0, c1 = rng.integers(1, 3), rng.integers(w - 3, w - 1)
    free[r0, c0 : c1 + 1] = free[r1, c0 : c1 + 1] = True
    free[r0 : r1 + 1, c0] = free[r0 : r1 + 1, c1] = True
    if rng.random() < 0.5:
        free[r0 : r1 + 1, rng.integers(c0 + 1, c1)] = True
    for _ in range(rng.integers(1, 6)):
        cells = np.argwhere(free)
        r, c = cells[rng.integers(len(cells))]
        dr, dc = MOVES[rng.integers(1, 5)]
        for _ in range(rng.integers(1, 4)):
            r, c = r + dr, c + dc
            if not (0 <= r < h and 0 <= c < w):
                break
            free[r, c] = True
    return free


def check_joint(positions, actions, free):
    ok, why = is_safe(positions, actions, free)
    assert ok, why
    # and the warehouse dynamics execute it exactly as given
    new, blocked, collided = resolve_moves(positions, actions, free)
    assert not blocked.any() and not collided.any()
    np.testing.assert_array_equal(new, positions + MOVES[actions])
    return new


@settings(max_examples=60, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(1, 12), swap=st.booleans())
def test_never_a_vertex_or_swap_conflict(seed, n, swap):
    """Random maps (ring, chords, dead ends, plus random open cells), random scores, goals and
    idle robots: every joint action is safe, for 12 steps of the layer's own moves."""
    rng = np.random.default_rng(seed)
    free = ring_map(rng)
    free |= rng.random(free.shape) < 0.15
    cells = np.argwhere(free)
    n = min(n, len(cells))
    positions = cells[rng.choice(len(cells), size=n, replace=False)]
    goals = cells[rng.integers(len(cells), size=n)]
    goals[rng.random(n) < 0.3] = -1  # idle robots
    layer = Pibt(free, n, seed=seed, swap=swap)
    for _ in range(12):
        scores = rng.normal(size=(n, 5))
        scores[rng.random((n, 5)) < 0.1] = -np.inf
        actions = layer.step(positions, scores, goals)
        positions = check_joint(positions, actions, free)


def run_until_all_reached(free, positions, goals, seed, max_steps):
    """Greedy preferences (minus BFS distance, random in-between tie-breaks); a robot that has
    reached its target becomes idle (a movable obstacle). Returns steps until every robot has
    stood on its target, or None. Every step the recursive reference must choose the same
    joint action as the compiled layer."""
    rng = np.random.default_rng(seed)
    n = len(positions)
    layer, reference = Pibt(free, n, seed=seed), Pibt(free, n, seed=seed)
    w = free.shape[1]
    tables = np.stack([bfs_distance(layer.nbr, int(r * w + c)) for r, c in goals])
    reached = np.zeros(n, dtype=bool)
    for t in range(max_steps):
        scores = distance_scores(positions, tables, layer.nbr, w) + rng.random((n, 5)) * 0.5
        scores[reached] = rng.random((int(reached.sum()), 5)) * 0.5
        scores[reached, STAY] += 1.0
        now = np.where(reached[:, None], -1, goals)
        actions = layer.step(positions, scores, now)
        assert reference_step(reference, positions, scores, now).tolist() == actions.tolist()
        positions = check_joint(positions, actions, free)
        reached |= (positions == goals).all(axis=1)
        if reached.all():
            return t + 1
    return None


def targets_nested(free: np.ndarray, goals: np.ndarray) -> bool:
    """True if some robot's target lies behind another robot's target in a dead-end branch.

    That is: removing the cell of target j cuts target i off every cell of the map's cycles
    (``dead_end_depth == 0``). Then target i is unreachable while robot j stands on its own
    target, and the two robots must enter the branch in the right order (deeper first).
    """
    depth = dead_end_depth(free)
    nbr = neighbour_table(free)
    cell = goals[:, 0] * free.shape[1] + goals[:, 1]
    core = np.flatnonzero(free.reshape(-1) & (depth == 0))
    for j in np.flatnonzero(depth[cell] > 0):
        seen = np.zeros(len(depth), dtype=bool)
        seen[core] = True
        seen[cell[j]] = True
        stack = core.tolist()
        while stack:
            for u in nbr[stack.pop(), 1:]:
                if u >= 0 and not seen[u]:
                    seen[u] = True
                    stack.append(u)
        if not seen[np.delete(cell, j)].all():
            return True
    return False


@settings(max_examples=60, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(1, 14), swap=st.booleans())
def test_reference_and_compiled_pibt_choose_the_same_moves(seed, n, swap):
    """The recursive reference and the compiled explicit-stack kernel choose the same joint
    action at each of 40 steps of their own moves, on drawn maps (ring, chords, dead ends, some
    with random open cells), robots driving to drawn targets and idle once there (scores with
    ties, so the tie-breaks count), priority biases, and some draws with random scores."""
    rng = np.random.default_rng(seed)
    free = ring_map(rng)
    if seed % 5 == 0:
        free |= rng.random(free.shape) < 0.15
    cells = np.argwhere(free)
    n = min(n, len(cells) // 2)
    # dead-end cells (where the swap acts) twice as likely as others, for starts and targets
    weight = 1.0 + (dead_end_depth(free).reshape(free.shape)[tuple(cells.T)] > 0)
    idx = rng.choice(len(cells), size=2 * n, replace=False, p=weight / weight.sum())
    positions, goals = cells[idx[:n]], cells[idx[n:]]
    compiled, reference = Pibt(free, n, seed=seed, swap=swap), Pibt(free, n, seed=seed, swap=swap)
    w = free.shape[1]
    tables = np.stack([bfs_distance(compiled.nbr, int(r * w + c)) for r, c in goals])
    bias = rng.random(n) * 0.5 if seed % 2 else None
    reached = rng.random(n) < 0.3  # idle from the start
    for _ in range(40):
        scores = distance_scores(positions, tables, compiled.nbr, w)
        scores += rng.integers(0, 2, size=(n, 5)) * 0.5
        scores[reached] = rng.integers(0, 2, size=(int(reached.sum()), 5)) * 0.5
        scores[reached, STAY] += 1.0  # idle: rather stay
        if seed % 4 == 0:
            scores = np.round(rng.normal(size=(n, 5)), 1)
            scores[rng.random((n, 5)) < 0.1] = -np.inf
        now = np.where(reached[:, None], -1, goals)
        actions = compiled.step(positions, scores, now, bias)
        assert reference_step(reference, positions, scores, now, bias).tolist() == actions.tolist()
        positions = check_joint(positions, actions, free)
        reached |= (positions == goals).all(axis=1)


@settings(max_examples=30, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(1, 10))
def test_every_robot_reaches_its_target_within_the_bound(seed, n):
    """On a connected map with a one-wide ring and dead-end corridors, up to 10 robots (at most
    a third of the cells), nested targets included (one behind another in a dead-end branch,
    :func:`targets_nested`), every robot stands on its target within |V| * n steps (|V| = free
    cells; observed worst over 1,422 nested instances with 6-10 robots: 0.23 |V| n, none
    failed). Plain PIBT livelocks on part of these maps (a robot behind an idle one in a dead end;
    two robots with nested targets at the branch's mouth)."""
    rng = np.random.default_rng(seed)
    free = ring_map(rng)
    cells = np.argwhere(free)
    n = min(n, len(cells) // 3)
    idx = rng.choice(len(cells), size=2 * n, replace=False)
    bound = len(cells) * n
    steps = run_until_all_reached(free, cells[idx[:n]], cells[idx[n:]], seed, bound)
    assert steps is not None, f"not every robot reached its target within {bound} steps"


def parse_map(rows):
    return np.array([[ch == "." for ch in row] for row in rows])


# Two instances that livelocked before the corridor-room test of the swap (found by the search
# above, 8 and 6 robots): idle robots stacked in a dead end behind a robot's target (2 of them,
# no room deeper), and a robot that must leave a dead end whose mouth another robot wants.
LIVELOCKED = {
    1247: (
        ["###########", "#.........#", "#.######.##", "#....###.##", "#.##.###.##",
         "#.##.###.##", "#.######.##", "#........##", "###########"],
        [[7, 6], [7, 4], [1, 5], [5, 4], [4, 8], [6, 1], [7, 3], [7, 5]],
        [[1, 6], [1, 1], [3, 1], [3, 4], [4, 4], [1, 4], [2, 1], [7, 7]],
    ),
    5304: (
        ["###########", "##.........", "##.#####.##", "##.#####.##", "##.#####.##",
         "##.#####.##", "##.#####.##", "##.......##", "###########"],
        [[2, 2], [3, 2], [1, 6], [1, 10], [5, 8], [7, 7]],
        [[6, 2], [1, 3], [7, 8], [2, 8], [7, 4], [1, 9]],
    ),
}  # fmt: skip


# An instance that livelocked before idle robots on dead-end leaves counted as no way on (found by
# the property above with a random seed, 9 robots on 27 cells): robot 2's target is the tip (7, 1)
# of a dead end forking at (6, 1), whose other leaf (6, 0) an idle robot holds; robot 2 pushed the
# idle robot at the fork into the tip and pulled it back to the fork, forever (31 steps now).
FORKED_DEAD_END = {
    202177: (
        ["###########", "##........#", "##.######.#", "##.######.#", "##.######.#",
         "##.######.#", "..........#", "#.#########", "###########"],
        [[6, 5], [4, 9], [6, 3], [1, 7], [6, 4], [3, 2], [6, 0], [6, 9], [1, 3]],
        [[1, 8], [6, 2], [7, 1], [5, 9], [6, 8], [5, 2], [2, 9], [4, 2], [1, 2]],
    ),
}  # fmt: skip


@pytest.mark.parametrize("seed", sorted(FORKED_DEAD_END))
def test_dead_end_target_behind_an_idle_robot_finishes(seed):
    rows, starts, goals = FORKED_DEAD_END[seed]
    free = parse_map(rows)
    assert not targets_nested(free, np.array(goals))
    steps = run_until_all_reached(free, np.array(starts), np.array(goals), seed, 10 * free.sum())
    assert steps is not None and steps <= free.sum() * len(starts)


@pytest.mark.parametrize("seed", sorted(LIVELOCKED))
def test_dead_end_instances_that_livelocked_now_finish(seed):
    rows, starts, goals = LIVELOCKED[seed]
    free = parse_map(rows)
    steps = run_until_all_reached(free, np.array(starts), np.array(goals), seed, 10 * free.sum())
    assert steps is not None and steps <= free.sum() * len(starts)


# Instances that livelocked with nested targets (found by the property above without its old
# precondition, 8 and 10 robots): two robots whose targets lie one behind the other in a dead-end
# branch, an idle robot inside it; the robot with the shallower target kept taking the branch's
# mouth whenever the other pulled the idle robot out. Now the deeper target goes first.
NESTED_TARGETS = {
    2: (
        ["###########", "###########", "#........##", "#.#.####.##", "#.#.####.##",
         "#.######.##", "#........##", "###########", "###########"],
        [[6, 3], [6, 7], [4, 1], [5, 1], [4, 8], [2, 4], [6, 4], [6, 1]],
        [[2, 8], [3, 3], [2, 3], [3, 1], [4, 3], [6, 2], [2, 5], [6, 8]],
        13,
    ),
    9456: (
        ["##.########", "##.########", "#........##", "#.#.###..##", "#.#.###..##",
         "#.#.###..##", "#........##", "###########", "###########"],
        [[2, 8], [2, 7], [6, 6], [2, 6], [6, 7], [5, 8], [3, 7], [4, 8], [6, 1], [5, 1]],
        [[0, 2], [4, 3], [2, 1], [6, 2], [6, 3], [1, 2], [4, 7], [6, 5], [2, 5], [4, 1]],
        19,
    ),
}  # fmt: skip


@pytest.mark.parametrize("seed", sorted(NESTED_TARGETS))
def test_nested_targets_in_a_dead_end_finish_deeper_first(seed):
    rows, starts, goals, expected = NESTED_TARGETS[seed]
    free = parse_map(rows)
    assert targets_nested(free, np.array(goals))
    steps = run_until_all_reached(free, np.array(starts), np.array(goals), seed, 10 * free.sum())
    assert steps == expected


def test_a_shallower_target_waits_for_the_deeper_one():
    """Pibt.nested_behind: the robot whose target is on the way to another's deeper target (not
    reached) decides last; once the deeper one is reached, or it is idle, nobody waits."""
    free = parse_map(["#.##", "#.##", "....", ".##.", "...."])  # a ring, a dead end on top
    assert targets_nested(free, np.array([[0, 1], [1, 1]]))
    assert not targets_nested(free, np.array([[0, 1], [4, 0]]))
    layer = Pibt(free, 3)
    cell = {(r, c): r * 4 + c for r in range(5) for c in range(4)}
    pos = np.array([cell[2, 0], cell[2, 2], cell[4, 0]])
    tip, mouth = cell[0, 1], cell[1, 1]
    assert layer.nested_behind(pos, np.array([tip, mouth, -1])).tolist() == [False, True, False]
    assert not layer.nested_behind(
        np.array([tip, pos[1], pos[2]]), np.array([tip, mouth, -1])
    ).any()
    assert not layer.nested_behind(pos, np.array([-1, mouth, cell[4, 3]])).any()


LANE = ["###.####", "........", "###.####"]


def lane_free():
    return np.array([[ch == "." for ch in row] for row in LANE])


def test_idle_robot_in_a_dead_end_is_pulled_out_not_a_wall():
    """A lane ending in a dead end: an idle robot on the tip, a carrier behind it that must get
    there. The carrier backs out to the junction pulling the idle robot, they pass, it arrives."""
    free = lane_free()
    positions = np.array([[1, 7], [1, 6]])
    goals = np.array([[-1, -1], [1, 7]])
    layer = Pibt(free, 2, seed=0)
    w = free.shape[1]
    table = bfs_distance(layer.nbr, 1 * w + 7)
    steps = 0
    while steps < 30 and not (positions[1] == goals[1]).all():
        scores = distance_scores(positions, np.stack([table, table]), layer.nbr, w)
        scores[0] = [1, 0, 0, 0, 0]  # idle: would rather stay
        positions = check_joint(positions, layer.step(positions, scores, goals), free)
        steps += 1
    # 3 steps out to the junction, 1 to pass, 4 back in (1 fewer: it started 1 from the tip)
    assert (positions[1] == [1, 7]).all(), "the carrier never reached the dead end"
    assert steps == 9


def test_without_the_swap_the_same_lane_deadlocks():
    """The same instance with plain PIBT: the carrier never gets in (why the swap is there)."""
    free = lane_free()
    positions = np.array([[1, 7], [1, 6]])
    layer = Pibt(free, 2, seed=0, swap=False)
    w = free.shape[1]
    table = bfs_distance(layer.nbr, 1 * w + 7)
    for _ in range(30):
        scores = distance_scores(positions, np.stack([table, table]), layer.nbr, w)
        scores[0] = [1, 0, 0, 0, 0]
        positions = positions + MOVES[layer.step(positions, scores, [[-1, -1], [1, 7]])]
    assert not (positions[1] == [1, 7]).all()


def test_priority_inheritance_pushes_a_chain():
    """1x4 corridor, robots at 0,1,2 all idle except robot 0 that wants to go right: the whole
    chain moves right (each pushed robot inherits the priority)."""
    free = np.ones((1, 4), dtype=bool)
    positions = np.array([[0, 0], [0, 1], [0, 2]])
    scores = np.zeros((3, 5))
    scores[:, STAY] = 1
    scores[0] = [0, 0, 0, -1, 5]
    actions = Pibt(free, 3).step(positions, scores, bias=np.array([3.0, 1.0, 2.0]))
    assert actions.tolist() == [RIGHT, RIGHT, RIGHT]


def test_priority_decides_a_contested_cell_and_resets_on_arrival():
    free = np.ones((3, 3), dtype=bool)
    layer = Pibt(free, 2, seed=0)
    positions = np.array([[0, 1], [1, 0]])
    goals = np.array([[1, 1], [1, 2]])
    scores = np.array([[0, 0, 1, 0, 0], [0, 0, 0, 0, 1.0]])  # both want (1, 1)
    layer.step(positions, np.eye(5)[[0, 0]], goals)  # both stay; targets now known
    layer.elapsed[:] = [5, 0]
    actions = layer.step(positions, scores, goals)
    assert actions[0] == 2 and actions[1] != RIGHT  # robot 0 waited longer: it goes first
    positions = positions + MOVES[actions]
    layer.step(positions, scores, goals)
    assert layer.elapsed[0] == 0  # robot 0 stands on its target


def test_blocked_moves_are_never_chosen_and_bad_input_is_named():
    free = np.array([[True, False], [True, True]])
    layer = Pibt(free, 1)
    actions = layer.step(np.array([[0, 0]]), np.array([[0, 9, 1, 0, 9.0]]))
    assert actions.tolist() == [2]  # up (off map) and right (wall) are dropped
    with pytest.raises(ValueError, match="scores"):
        layer.step(np.array([[0, 0]]), np.zeros((1, 4)))
    with pytest.raises(ValueError, match="free cells"):
        layer.step(np.array([[0, 1]]), np.zeros((1, 5)))
    with pytest.raises(ValueError, match="free cells"):
        layer.step(np.array([[0, 2]]), np.zeros((1, 5)))  # off the map's right edge
    with pytest.raises(ValueError, match="goals"):
        layer.step(np.array([[0, 0]]), np.zeros((1, 5)), np.array([[0, 1]]))


def test_dead_end_depth_grows_towards_the_tip():
    depth = dead_end_depth(lane_free()).reshape(3, 8)
    assert depth[1, 4] < depth[1, 5] < depth[1, 6] < depth[1, 7]
    ring = np.ones((3, 3), dtype=bool)
    ring[1, 1] = False
    assert (dead_end_depth(ring) == 0).all()


def test_aisle_guidance_makes_lanes_one_way_but_never_cuts_a_target_off():
    free = np.ones((3, 6), dtype=bool)
    free[1, 1:5] = False  # two aisles (rows 0 and 2) around a shelf block
    cost = aisle_costs(free, penalty=2)
    nbr = neighbour_table(free)
    assert cost[0 * 6 + 2, RIGHT] == 1 and cost[0 * 6 + 2, LEFT] == 3  # row 0 runs east
    assert cost[2 * 6 + 2, LEFT] == 1 and cost[2 * 6 + 2, RIGHT] == 3  # row 2 runs west
    d = guided_distance(nbr, cost, 0 * 6 + 0)  # to the top-left corner
    assert d[0 * 6 + 3] == 3 * 3  # from (0, 3): 3 moves against the flow beat 19 round the block
    assert d[2 * 6 + 3] == 3 + 2 * 3  # from (2, 3): west with the flow, up against column 0
    assert (d[free.reshape(-1)] < 10**6).all()
    assert cost[0 * 6 + 0, UP] == 0  # blocked moves are never costed


def test_traffic_costs_make_rows_one_way_only_on_a_busy_floor():
    free = np.ones((3, 20), dtype=bool)
    free[1, 1:19] = False  # 42 free cells; columns 0 and 19 are the vertical aisles
    quiet, busy = traffic_costs(free, 2), traffic_costs(free, int(np.ceil(42 * BUSY)))
    assert quiet[0 * 20 + 2, LEFT] == 1 and busy[0 * 20 + 2, LEFT] == 3  # row 0 runs east if busy
    assert quiet[1 * 20 + 0, UP] == busy[1 * 20 + 0, UP] == 3  # column 0 runs south always
    with pytest.raises(ValueError, match="n_robots"):
        traffic_costs(free, -1)


def test_pibt_shield_keeps_the_shield_contract():
    """PibtShield.filter: same inputs and result type as the local shield; without scores the
    proposed action ranks first; a move into a wall is overridden with reason "static"; an idle
    robot in the way is pushed (reason "robot"), not a wall."""
    from marlm.hybrid.rules.pibt_layer import PibtShield

    free = np.ones((3, 3), dtype=bool)
    free[0, 2] = False
    shield = PibtShield(free, 2, seed=0)
    positions = np.array([[0, 0], [0, 1]])
    res = shield.filter(positions, np.array([RIGHT, RIGHT]), np.array([1.0, 0.0]))
    assert res.reasons[1] in ("static", "robot") and res.actions[1] != RIGHT
    check_joint(positions, res.actions, free)
    assert res.actions[0] == RIGHT  # robot 1 stepped aside (down): idle is movable
    assert res.reasons[1] == "static"
    assert shield.overrides.tolist() == [0, 1] and shield.deadlock_breaks == 0
    with pytest.raises(ValueError, match="positions"):
        shield.filter(np.array([[0, 0]]), np.array([0]))
