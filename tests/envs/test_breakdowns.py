"""Robots out of service for a stretch (``breakdown`` lines of an order file) and orders held
out of the offer (``hold``): what the arbitration of the instructions desk stands on."""

from __future__ import annotations

import json

import pytest

from marlm.envs.warehouse import Order, WarehouseEnv
from marlm.envs.warehouse.breakdowns import Breakdown
from marlm.errors import InputError


def _file(tmp_path, *extra):
    lines = [
        {"id": "a", "shelf": "S3-2", "priority": "normal", "arrival": 0, "deadline": 99},
        {"id": "b", "shelf": "S3-3", "priority": "normal", "arrival": 0, "deadline": 99},
        *extra,
    ]
    path = tmp_path / "orders.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


def test_a_robot_in_a_breakdown_takes_no_order_and_its_unpicked_order_goes_back(tmp_path):
    path = _file(tmp_path, {"breakdown": "robot_1", "at": 1, "steps": 3})
    env = WarehouseEnv(layout="small", orders=path, n_robots=2, auto_assign=False)
    env.reset(seed=0)
    assert env.idle_robots() == ["robot_0", "robot_1"]
    env.assign("robot_1", "b")
    env.step({})  # step 1: the breakdown starts; b was not picked: back in the queue
    assert env.out_of_service == ["robot_1"] and env.task_of("robot_1") is None
    assert env.order_status("b") == "pending" and env.idle_robots() == ["robot_0"]
    assert not env.in_service("robot_1")
    with pytest.raises(ValueError, match="robot_1 is out of service until step 4"):
        env.assign("robot_1", "b")
    for _ in range(3):
        env.step({})
    assert env.step_count == 4 and env.out_of_service == [] and "robot_1" in env.idle_robots()


@pytest.mark.parametrize(
    "line, field, fix",
    [
        ({"breakdown": "robot_9", "at": 1, "steps": 3}, "breakdown", "robot_0 ... robot_1"),
        ({"breakdown": "robot_0,robot_1", "at": 1, "steps": 3}, "breakdown",
         "a line names one robot"),
        ({"breakdown": "robot_1", "at": 1}, "steps", '"steps": 120'),
        ({"breakdown": "robot_1", "at": -1, "steps": 3}, "at", "got -1; a whole number of steps, "
         "at least 0"),
        ({"breakdown": "robot_1", "at": 30.5, "steps": 3}, "at", "got 30.5; a whole number"),
        # as strict as an order's steps: no booleans, strings or floats taken for numbers
        ({"breakdown": "robot_1", "at": True, "steps": 3}, "at", "got true; a whole number"),
        ({"breakdown": "robot_1", "at": "30", "steps": 3}, "at", 'got "30"; a whole number'),
        ({"breakdown": "robot_1", "at": 1, "steps": 1e2}, "steps", "got 100.0; a whole number"),
        ({"breakdown": 1, "at": 1, "steps": 3}, "breakdown", "name one robot"),
        ({"breakdown": "robot_1", "at": 1, "steps": 3, "why": "x"}, "why", "breakdown, at, steps"),
    ],
)  # fmt: skip
def test_a_bad_breakdown_line_is_one_clear_error_naming_its_line(tmp_path, line, field, fix):
    with pytest.raises(InputError) as e:
        WarehouseEnv(layout="small", orders=_file(tmp_path, line), n_robots=2)
    assert f"orders.jsonl:3: field '{field}'" in str(e.value) and fix in str(e.value)


def test_a_breakdown_key_written_with_an_escape_is_still_a_breakdown(tmp_path):
    path = _file(tmp_path)
    text = path.read_text(encoding="utf-8")
    path.write_text(text + '{"\\u0062reakdown": "robot_1", "at": 0, "steps": 9}\n', "utf-8")
    env = WarehouseEnv(layout="small", orders=path, n_robots=2, auto_assign=False)
    env.reset(seed=0)
    assert env.out_of_service == ["robot_1"]
    assert [b.model_dump() for b in env.breakdowns] == [
        {"breakdown": "robot_1", "at": 0, "steps": 9}
    ]


def test_a_file_of_breakdown_lines_only_says_it_needs_an_order(tmp_path):
    path = tmp_path / "only.jsonl"
    path.write_text(json.dumps({"breakdown": "robot_1", "at": 0, "steps": 9}) + "\n", "utf-8")
    with pytest.raises(InputError, match=r"no orders \(only 1 breakdown line\(s\)\); write one "
                       r'order a line, e\.g\. \{"id": "o1"'):  # fmt: skip
        WarehouseEnv(layout="small", orders=path, n_robots=2)


def test_a_held_order_is_not_offered_and_the_next_for_its_shelf_comes_forward():
    orders = [
        Order(id="a", shelf="S3-2", priority="urgent", arrival=0, deadline=50),
        Order(id="b", shelf="S3-2", priority="normal", arrival=0, deadline=60),
        Order(id="c", shelf="S3-3", priority="normal", arrival=0, deadline=70),
    ]
    env = WarehouseEnv(layout="small", orders=orders, n_robots=2, auto_assign=False,
                       breakdowns=[Breakdown(breakdown="robot_0", at=5, steps=1)])  # fmt: skip
    env.reset(seed=0)
    assert [o.id for o in env.pending_orders()] == ["a", "c"]
    assert env.hold("a") and not env.hold("a") and env.held == {"a"}
    assert [o.id for o in env.pending_orders()] == ["b", "c"]
    assert env.order_status("a") == "pending" and env.waiting_orders() == []
    assert env.tighten_deadline("a", 20) and env.orders["a"].deadline == 20  # held, still kept
    assert env.unhold("a") and not env.unhold("a")
    assert [o.id for o in env.pending_orders()] == ["a", "c"]
    env.hold("c")
    assert env.cancel("c") == "dropped" and env.held == frozenset()
    assert [o.id for o in env.pending_orders()] == ["a"]
