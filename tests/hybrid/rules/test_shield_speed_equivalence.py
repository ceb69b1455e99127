"""The compiled shield returns exactly what the dict-based reference returns, step after step.

The reference is the first, dict-based version (``reference_shield.py`` beside this test). Both get the
same seed, positions, proposals and priorities for several steps in a row, so the deadlock memory
and the random yield choices must agree too. Speed is measured in ``benchmarks/bench_shield.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reference_shield import ReferenceShield

from marlm.envs.warehouse.dynamics import MOVES, RIGHT
from marlm.hybrid.rules.layer import is_safe
from marlm.hybrid.rules.shield import Shield


@st.composite
def crowded_worlds(draw):
    """A small map with many robots (conflicts are the rule), proposals and priorities per step."""
    h = draw(st.integers(1, 6))
    w = draw(st.integers(1, 6))
    free = np.array(draw(st.lists(st.booleans(), min_size=h * w, max_size=h * w))).reshape(h, w)
    cells = [tuple(c) for c in np.argwhere(free).tolist()]
    if not cells:
        free[0, 0] = True
        cells = [(0, 0)]
    idx = draw(
        st.lists(st.integers(0, len(cells) - 1), min_size=1, max_size=len(cells), unique=True)
    )
    n = len(idx)
    positions = np.array([cells[i] for i in idx], dtype=np.int64)
    steps = draw(st.integers(1, 6))
    proposals = [
        np.array(draw(st.lists(st.integers(-1, 5), min_size=n, max_size=n))) for _ in range(steps)
    ]
    priority = None
    if draw(st.booleans()):
        # few distinct values, so ties (broken by index) are common
        priority = np.array(
            draw(st.lists(st.sampled_from([0.0, 1.0, 2.0]), min_size=n, max_size=n))
        )
    k = draw(st.integers(1, 3))
    seed = draw(st.integers(0, 3))
    return free, positions, proposals, priority, k, seed


def assert_same(new, ref):
    assert new.actions.tolist() == ref.actions.tolist()
    assert new.overridden.tolist() == ref.overridden.tolist()
    assert new.reasons == ref.reasons
    assert new.deadlock_breaks == ref.deadlock_breaks


@settings(max_examples=500, deadline=None)
@given(crowded_worlds())
def test_compiled_shield_equals_reference(world):
    free, positions, proposals, priority, k, seed = world
    new = Shield(free, len(positions), deadlock_steps=k, seed=seed)
    ref = ReferenceShield(free, len(positions), deadlock_steps=k, seed=seed)
    pos = positions
    for proposed in proposals:
        a = new.filter(pos, proposed, priority)
        b = ref.filter(pos, proposed, priority)
        assert_same(a, b)
        assert is_safe(pos, a.actions, free)[0]
        pos = pos + MOVES[a.actions]
    assert new.overrides.tolist() == ref.overrides.tolist()
    assert new.deadlock_breaks == ref.deadlock_breaks


def test_equal_on_a_large_crowded_map_over_many_steps():
    """200 robots on a 60x60 map with shelf blocks, random proposals for 60 steps."""
    rng = np.random.default_rng(7)
    free = np.ones((60, 60), dtype=bool)
    free[2:58:4, 3:57] = False  # shelf rows with gaps every 6 columns
    free[:, 9::6] = True
    cells = np.argwhere(free)
    positions = cells[rng.choice(len(cells), size=200, replace=False)]
    priority = rng.integers(0, 3, size=200).astype(float)
    new = Shield(free, 200, seed=1)
    ref = ReferenceShield(free, 200, seed=1)
    for _ in range(60):
        proposed = rng.integers(0, 5, size=200)
        a = new.filter(positions, proposed, priority)
        b = ref.filter(positions, proposed, priority)
        assert_same(a, b)
        positions = positions + MOVES[a.actions]
    assert new.deadlock_breaks == ref.deadlock_breaks > 0  # yields were exercised


def test_scratch_grids_are_clean_after_each_call():
    """The kernels restore their occupancy grids, so a later call cannot see stale robots."""
    free = np.ones((1, 4), dtype=bool)
    shield = Shield(free, 2)
    shield.filter(np.array([[0, 0], [0, 1]]), np.array([RIGHT, RIGHT]))
    assert (shield._cell_of == -1).all() and (shield._claim == -1).all()
    res = shield.filter(np.array([[0, 2], [0, 3]]), np.array([RIGHT, 0]))
    assert res.actions.tolist() == [0, 0]


def test_position_outside_the_map_is_refused():
    shield = Shield(np.ones((2, 2), dtype=bool), 1)
    with pytest.raises(ValueError, match="inside the 2x2 map"):
        shield.filter(np.array([[2, 0]]), np.array([0]))
