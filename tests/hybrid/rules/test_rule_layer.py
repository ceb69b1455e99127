"""Scores in, choice out: the executor protocol, the rule-layer protocol, the shielded step."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from marlm.envs.warehouse import WarehouseEnv
from marlm.envs.warehouse.dynamics import DOWN, LEFT, RIGHT, STAY
from marlm.hybrid.acting.executor import GreedyExecutor, QExecutor, RandomExecutor
from marlm.hybrid.acting.scores import distance_scores, downhill_scores, greedy_scores
from marlm.hybrid.core.view import StepView, one_hot, robot_priority, step_view
from marlm.hybrid.rules.factory import make_shield
from marlm.hybrid.rules.layer import shielded_step
from marlm.hybrid.rules.pibt import neighbour_table

HYBRID = Path(__file__).resolve().parents[3] / "src" / "marlm" / "hybrid"


def module_imports(name: str) -> set[str]:
    """marlm.hybrid modules that ``hybrid/<name>.py`` imports anywhere (lazy imports included),
    as ``layer.module`` (``rules.shield``); ``name`` is such a path too."""
    tree = ast.parse((HYBRID / f"{name.replace('.', '/')}.py").read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            module = ("marlm.hybrid." if node.level else "") + node.module
            found.add(module.removeprefix("marlm.hybrid."))
    return found


def test_scores_in_choice_out_has_no_import_circle():
    """The view (core) imports no layer; the rule layer imports the view but no executor; the
    executors import the view and the scores, and no rule layer: the controller and the
    evaluation compose them."""
    view = module_imports("core.view")
    assert "core.graph" in view
    assert not {m for m in view if m.startswith(("acting.", "planning.", "rules."))}
    for rule in ("rules.layer", "rules.shield", "rules.pibt_layer", "rules.factory"):
        assert "core.view" in module_imports(rule) or rule == "rules.factory"
        assert not {m for m in module_imports(rule) if m.startswith(("acting.", "planning."))}
    executor = module_imports("acting.executor")
    assert {"core.view", "acting.scores"} <= executor
    assert not {m for m in executor if m.startswith(("rules.", "planning."))}
    assert {"rules.factory", "rules.layer", "acting.scores"} <= module_imports("evaluate")


def test_no_isinstance_on_executor_or_rule_layer_types_in_hybrid():
    names = ("Executor", "Shield", "PibtShield", "Unshielded", "DwellExecutor", "RandomExecutor")
    found = [
        f"{path.name}: {ast.unparse(node)}"
        for path in HYBRID.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        and getattr(node.func, "id", "") == "isinstance"
        and any(n in ast.unparse(node.args[1]) for n in names)
    ]
    assert found == []


def test_one_distance_to_go_score_from_observations_and_from_tables():
    """greedy_scores (observation bits) and distance_scores (BFS tables) agree for every robot
    with a task, on a real warehouse after a few steps."""
    env = WarehouseEnv(layout="small", max_steps=50, n_orders=8)
    obs, _ = env.reset(seed=2)
    for _ in range(6):
        obs, *_ = env.step(dict.fromkeys(env.agents, STAY))
    view = step_view(env, obs)
    busy = [i for i, a in enumerate(view.agents) if env.target_of(a) is not None]
    assert busy, "no robot has a task to score"
    free = env.layout.free
    tables = np.stack(
        [env.layout.distance_from(env.target_of(view.agents[i])).reshape(-1) for i in busy]
    )
    from_tables = distance_scores(
        view.positions[busy], tables, neighbour_table(free), free.shape[1]
    )
    np.testing.assert_array_equal(from_tables, greedy_scores(view.stacked())[busy])


def test_downhill_scores_and_one_hot_known_answers():
    closer = np.array([[True, False, False, False], [False, False, False, False]])
    blocked = np.array([[False, False, True, False], [False, True, False, False]])
    scores = downhill_scores(closer, blocked, np.array([True, False]))
    assert scores.tolist() == [[0, 1, -1, -np.inf, -1], [0, -1, -np.inf, -1, -1]]
    assert one_hot(np.array([RIGHT, 9])).tolist() == [[0, 0, 0, 0, 1], [1, 0, 0, 0, 0]]


def test_robot_priority_carrying_then_task_then_idle():
    env = WarehouseEnv(layout="small", max_steps=50, n_orders=8)
    env.reset(seed=2)
    prio = robot_priority(env, env.possible_agents)
    expected = [2.0 * env.carrying(a) + (env.task_of(a) is not None) for a in env.possible_agents]
    assert prio.tolist() == expected and step_view(env).priority.tolist() == expected


@pytest.mark.parametrize(
    "executor", [QExecutor(noise=0.5), GreedyExecutor(noise=0.5), RandomExecutor()]
)
def test_exploring_scores_name_the_action_act_takes_with_the_same_draws(executor):
    env = WarehouseEnv(layout="small", max_steps=50, n_orders=8)
    obs, _ = env.reset(seed=2)
    view = step_view(env, obs)
    acted = executor.act(obs, view.agents, np.random.default_rng(5))
    scored = executor.scores(view, np.random.default_rng(5), explore=True)
    assert scored.argmax(axis=1).tolist() == acted.tolist()


def test_every_rule_layer_through_the_shielded_step():
    """Two robots heading at each other on a 2x3 floor: PIBT pushes the idle one aside (off the
    carrier's way, down), the local shield holds both (a swap), unshielded sends both."""
    free = np.ones((2, 3), dtype=bool)
    view = StepView(
        ["a", "b"], np.array([[0, 0], [0, 1]]), np.array([[0, 2], [-1, -1]]), np.array([1.0, 0.0])
    )
    scores = one_hot(np.array([RIGHT, LEFT]))
    pibt = shielded_step(make_shield("pibt", free, 2, 0), view, scores)
    local = shielded_step(make_shield("local", free, 2, 0), view, scores)
    none = shielded_step(make_shield("none", free, 2, 0), view, scores)
    assert (
        pibt.proposed.tolist() == local.proposed.tolist() == none.proposed.tolist() == [RIGHT, LEFT]
    )
    assert pibt.actions.tolist() == [RIGHT, DOWN]  # b is pushed off a's way
    assert local.actions.tolist() == [STAY, STAY] and local.reasons == ["robot", "robot"]
    assert none.actions.tolist() == [RIGHT, LEFT] and not none.overridden.any()
    with pytest.raises(ValueError, match="scores"):
        shielded_step(make_shield("none", free, 2, 0), view, np.zeros((2, 4)))
