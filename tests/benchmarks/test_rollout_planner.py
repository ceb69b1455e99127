"""Rollouts over PIBT: K = 1 is the wrapped mover exactly; every chosen joint move is PIBT's,
so safe; a fixed seed gives a fixed run."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rollout_planner import RolloutGuidance, RolloutMover, RolloutSetting

from hybrid.acting.test_learned_guidance import lifelong_steps, random_map
from marlm.envs.warehouse.dynamics import MOVES
from marlm.hybrid.acting.learned_guidance import N_PARAMS, PARAM_NAMES
from marlm.hybrid.rules.layer import is_safe
from marlm.hybrid.simulator import Guidance, random_instance, simulate

ROOMS = """\
.........
.#.##.#..
.#......#
.##.#.#..
.....#...
.#.#...#.
""".splitlines()
FREE = np.array([[c == "." for c in row] for row in ROOMS])


def learned() -> Guidance:
    """A learned scheme with every input of the mover in use: weights, a strong online update,
    the passage priority and the hindrance tie-break."""
    params = np.zeros(N_PARAMS)
    params[PARAM_NAMES.index("into_narrow")] = 1.5
    params[PARAM_NAMES.index("online_gain")] = 6.0
    return Guidance(params, period=2, narrow_priority=32.0, hindrance=True)


@pytest.mark.parametrize("guidance", [Guidance(), learned()], ids=["hand", "learned"])
def test_one_candidate_plays_the_wrapped_movers_moves_exactly(guidance):
    """K = 1: the same actions as the plain mover at every step of a 60-step lifelong episode."""
    n = 14
    inst = random_instance(FREE, n, 60, seed=5)
    plain = guidance.mover(FREE, n, 5)
    wrapped = RolloutGuidance(guidance, RolloutSetting(k=1)).mover(FREE, n, 5)
    for pos, goals, a in lifelong_steps(inst, plain):
        assert np.array_equal(wrapped.act(pos, goals), a)
    assert wrapped.rollouts == 0
    assert simulate(inst, RolloutGuidance(guidance, RolloutSetting(k=1))) == simulate(
        inst, guidance
    )


@settings(max_examples=10, deadline=None, derandomize=True)
@given(
    seed=st.integers(0, 2**31 - 1),
    n=st.integers(2, 14),
    k=st.integers(2, 6),
    horizon=st.integers(1, 6),
    persist=st.integers(1, 4),
    learned_scheme=st.booleans(),
    score_noise=st.sampled_from([0.0, 2.0]),
    keep=st.booleans(),
)
def test_every_rollout_chosen_joint_move_is_safe(
    seed, n, k, horizon, persist, learned_scheme, score_noise, keep
):
    """Random maps (walls, dead ends, one-wide passages): every joint move the rollouts choose in
    30 lifelong steps has no vertex or swap conflict and no move into a wall."""
    rng = np.random.default_rng(seed)
    free = random_map(rng, 7, 9, 0.3)
    n = min(n, int(free.sum()) - 2)
    inst = random_instance(free, n, 30, seed=seed)
    g = RolloutGuidance(learned() if learned_scheme else Guidance(),
                        RolloutSetting(k=k, horizon=horizon, persist=persist, scale=6.0,
                                       score_noise=score_noise, keep=keep))  # fmt: skip
    mover = g.mover(free, n, seed)
    for pos, _, a in lifelong_steps(inst, mover):
        ok, why = is_safe(pos, a, free)
        assert ok, why
        assert len({tuple(p) for p in (pos + MOVES[a]).tolist()}) == n  # no vertex conflict
    # the simulator, its checks on, plays the same run: the same targets reached
    reached = sum(
        int((pos + MOVES[a] == goals).all(axis=1).sum())
        for pos, goals, a in lifelong_steps(inst, g.mover(free, n, seed))
    )
    assert simulate(inst, g, check=True) * inst.steps == reached


def test_rollouts_are_deterministic_and_change_the_run_on_a_crowded_map():
    """A fixed seed gives the same throughput, exactly; the rollouts play other moves than PIBT's
    own there, and more targets are reached than by PIBT alone."""
    inst = random_instance(FREE, 20, 80, seed=3)
    g = RolloutGuidance(Guidance(), RolloutSetting(k=6, horizon=6))
    first = simulate(inst, g, check=True)
    assert simulate(inst, g, check=True) == first
    mover = g.mover(FREE, 20, 3)
    for _ in lifelong_steps(inst, mover):
        pass
    assert mover.changed > 0
    assert (simulate(inst, Guidance()), first) == (1.0625, 1.35)


@pytest.mark.parametrize(
    "field, value",
    [
        ("k", 0),
        ("horizon", 0),
        ("gamma", 0.0),
        ("scale", -1.0),
        ("persist", 0),
        ("score_noise", -1.0),
        ("margin", -0.5),
    ],
)
def test_a_knob_out_of_range_is_named(field, value):
    with pytest.raises(ValueError, match=f"rollout {field}="):
        RolloutSetting(**{field: value})


def test_the_mover_reads_the_goal_priority_once():
    mover = Guidance().mover(FREE, 3, 0)
    mover.goal_priority = 2.5
    assert RolloutMover(mover, RolloutSetting(k=2)).goal_priority == 2.5
