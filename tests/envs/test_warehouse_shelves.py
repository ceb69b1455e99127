"""Shelves are objects: one order holds a shelf from assignment to delivery (movement case 2)."""

import numpy as np
import pytest

from marlm.envs.warehouse import STAY, Order, WarehouseEnv, parse_layout
from marlm.envs.warehouse.batched import BatchedWarehouseEnv

# /work/shared/cases/inputs/shelf_far.txt: one shelf S3-7 far from the only station.
SHELF_FAR = """##########
#P.......#
#........#
#......S.#
#.....RR.#
##########
"""
SAME_SHELF = [
    Order(id="a1", shelf="S3-7", priority="normal", arrival=0, deadline=300),
    Order(id="a2", shelf="S3-7", priority="normal", arrival=0, deadline=300),
]


def greedy(env, obs):
    """Shortest-path moves from the observation, stay when the next cell is taken; an idle robot
    on a station steps off it to a free neighbour, other idle robots stay."""
    stations = set(env.layout.stations)
    actions = {}
    for i, (agent, o) in enumerate(obs.items()):
        if o[15]:
            moves = [k + 1 for k in range(4) if o[10 + k] and not o[6 + k]]
        elif tuple(env.robot_positions[i]) in stations:
            moves = [k + 1 for k in range(4) if not o[2 + k] and not o[6 + k]]
        else:
            moves = []
        actions[agent] = moves[0] if moves else STAY
    return actions


def test_a_planner_may_take_either_order_of_a_free_shelf_but_never_both():
    # which order of a shelf comes first is the planner's choice (it may read urgency in a note
    # that the listed priority does not show); one trip at a time stays the environment's rule
    env = WarehouseEnv(parse_layout(SHELF_FAR, "shelf_far"), orders=SAME_SHELF, auto_assign=False)
    env.reset(seed=0)
    env.assign("robot_1", "a2")
    assert env.shelf_holder("S3-7") == "a2"
    assert [o.id for o in env.waiting_orders()] == ["a1"]
    with pytest.raises(ValueError, match="waits for shelf S3-7: order 'a2' holds it"):
        env.assign("robot_0", "a1")


def carried_shelves(env):
    return [env.orders[env.task_of(a)].shelf for a in env.possible_agents if env.carrying(a)]


def test_an_order_for_a_held_shelf_waits():
    env = WarehouseEnv(parse_layout(SHELF_FAR, "shelf_far"), orders=SAME_SHELF, auto_assign=False)
    env.reset(seed=0)
    assert [o.id for o in env.pending_orders()] == ["a1"]
    assert [o.id for o in env.waiting_orders()] == ["a2"]
    env.assign("robot_0", "a1")
    assert env.shelf_holder("S3-7") == "a1"
    assert env.pending_orders() == [] and [o.id for o in env.waiting_orders()] == ["a2"]
    with pytest.raises(ValueError, match="waits for shelf S3-7: order 'a1' holds it"):
        env.assign("robot_1", "a2")


def test_two_orders_for_one_shelf_are_two_trips_one_after_the_other():
    # Case 2: robot_0 picked S3-7 at step 3 and robot_1 the same shelf at step 4.
    env = WarehouseEnv(parse_layout(SHELF_FAR, "shelf_far"), orders=SAME_SHELF, max_steps=200)
    obs, _ = env.reset(seed=0)
    events = list(env.last_events)
    while env.agents:
        obs, *_ = env.step(greedy(env, obs))
        events += env.last_events
        shelves = carried_shelves(env)
        assert len(shelves) == len(set(shelves)), (env.step_count, shelves)
    steps = {(e["type"], e["order"]): e["step"] for e in events}
    assert [o for o, _ in env.delivered] == ["a1", "a2"]
    assert steps[("assigned", "a2")] > steps[("delivered", "a1")]
    assert steps[("picked", "a2")] > steps[("delivered", "a1")]


def test_generated_orders_on_medium_never_share_a_carried_shelf():
    # Case 2 on the shipped medium layout, seed 0 (S3-2 was carried by robot_0 and robot_2).
    env = WarehouseEnv("medium", n_orders=24, max_steps=600, seed=0)
    obs, _ = env.reset(seed=0)
    repeated = len(env.orders) - len({o.shelf for o in env.orders.values()})
    trips = 0
    while env.agents:
        obs, *_ = env.step(greedy(env, obs))
        shelves = carried_shelves(env)
        assert len(shelves) == len(set(shelves)), (env.step_count, shelves)
        trips += sum(e["type"] == "picked" for e in env.last_events)
    assert repeated > 0  # the seed does ask for a shelf twice
    assert trips >= len(env.delivered) > 0


def test_batched_env_holds_shelves_like_the_env():
    layout = parse_layout(SHELF_FAR, "shelf_far")
    env = WarehouseEnv(layout, orders=SAME_SHELF, max_steps=200)
    benv = BatchedWarehouseEnv(1, layout, orders=SAME_SHELF, max_steps=200, autoreset=False)
    obs, _ = env.reset(seed=0)
    benv.reset(seed=0)
    while env.agents:
        actions = greedy(env, obs)
        obs, *_ = env.step(actions)
        benv.step(np.array([[actions[a] for a in env.possible_agents]]))
        for o in ("a1", "a2"):
            assert benv.order_status(0, o) == env.order_status(o), (env.step_count, o)


def test_delivery_step_is_the_step_that_reaches_the_station():
    # Case 4: one robot, one order; the robot stands on the station after the step numbered k,
    # and the delivered event says k (it said k + 1), the same numbering as the pick.
    layout = parse_layout("#######\n#P...R#\n#..S..#\n#######\n", "one")
    order = Order(id="o1", shelf="S2-3", priority="normal", arrival=0, deadline=50)
    env = WarehouseEnv(layout, orders=[order], max_steps=50)
    obs, _ = env.reset(seed=0)
    events, on_station = [], None
    while env.agents:
        step = env.step_count
        obs, *_ = env.step(greedy(env, obs))
        events += env.last_events
        if on_station is None and tuple(env.robot_positions[0]) == layout.stations[0]:
            on_station = step
    picked, delivered = (next(e for e in events if e["type"] == t) for t in ("picked", "delivered"))
    assert delivered["step"] == on_station == env.delivered[0][1]
    assert picked["step"] < delivered["step"]


def _offered_from_scratch(env, precedence=None):
    """pending_orders() and waiting_orders() as they were computed before the open book: sort
    every arrived, unassigned order, keep the first of each free shelf (order-list order)."""
    from marlm.envs.warehouse.orders import dispatch_key

    unassigned = [o for o in env.orders.values() if env.order_status(o.id) == "pending"]
    first: dict[str, str] = {}
    for order in sorted(unassigned, key=precedence or dispatch_key):
        if env.shelf_holder(order.shelf) is None:
            first.setdefault(order.shelf, order.id)
    offered = [o for o in env.orders.values() if first.get(o.shelf) == o.id]
    ready = {o.id for o in offered}
    return offered, [o for o in unassigned if o.id not in ready]


def test_the_open_book_offers_what_sorting_every_open_order_offered():
    # pending_orders() sorted every open order at every call (~4 s a step with 100,000 open):
    # the env now keeps each shelf's queue sorted as orders arrive, are assigned, released and
    # delivered. Random runs with a few shelves ordered many times: the same lists, for the
    # default key and for a planner's key (reversed priority), after every change.
    from marlm.envs.warehouse.orders import generate_orders

    rng = np.random.default_rng(5)
    layout = parse_layout(SHELF_FAR.replace("#......S.#", "#.S..S.S.#"), name="far3")
    by_note = lambda o: (-len(o.note), o.id)  # noqa: E731  (a planner's own key)
    for seed in range(6):
        orders = generate_orders(layout, 40, seed=seed, horizon=30)
        env = WarehouseEnv(layout=layout, orders=orders, max_steps=120, auto_assign=False)
        obs, _ = env.reset(seed=seed)
        checked = 0
        while env.agents:
            for key in (None, by_note):
                want_offered, want_waiting = _offered_from_scratch(env, key)
                assert env.pending_orders(key) == want_offered
                assert env.waiting_orders(key) == want_waiting
                checked += 1
            for agent in env.possible_agents:
                task = env.task_of(agent)
                if task is None and env.pending_orders() and rng.random() < 0.7:
                    offered = env.pending_orders(by_note if rng.random() < 0.5 else None)
                    env.assign(agent, offered[int(rng.integers(0, len(offered)))].id)
                elif task is not None and not env.carrying(agent) and rng.random() < 0.05:
                    env.release(agent)
            obs, *_ = env.step(greedy(env, env.current_observations()))
        assert checked > 100 and env.delivered  # deliveries free shelves along the way
