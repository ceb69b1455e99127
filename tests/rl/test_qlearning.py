"""Known-answer tests for the Q-learning math and the schedules."""

from __future__ import annotations

import numpy as np
import pytest

from marlm.errors import InputError
from marlm.rl.qlearning import (
    EpsilonSchedule,
    LearningRateSchedule,
    epsilon_greedy,
    td_update,
    td_update_batch,
)


def test_td_update_hand_computed():
    q = np.zeros((3, 2))
    q[1] = [0.5, 2.0]
    # target = 1 + 0.9 * 2.0 = 2.8; error = 2.8 - 0 ; Q = 0.1 * 2.8
    err = td_update(q, 0, 1, 1.0, 1, False, alpha=0.1, gamma=0.9)
    assert err == pytest.approx(2.8)
    assert q[0, 1] == pytest.approx(0.28)
    assert q[0, 0] == 0.0


def test_terminated_does_not_bootstrap_but_truncation_does():
    q = np.zeros((2, 2))
    q[1] = [3.0, 1.0]
    err_term = td_update(q.copy(), 0, 0, 1.0, 1, True, alpha=0.5, gamma=0.9)
    err_trunc = td_update(q.copy(), 0, 0, 1.0, 1, False, alpha=0.5, gamma=0.9)
    assert err_term == pytest.approx(1.0)
    assert err_trunc == pytest.approx(1.0 + 0.9 * 3.0)


def test_batch_equals_sequential_loop_with_duplicates():
    rng = np.random.default_rng(0)
    q0 = rng.normal(size=(5, 3))
    s = np.array([0, 0, 1, 0, 2, 1], dtype=np.int64)
    a = np.array([1, 1, 2, 1, 0, 2], dtype=np.int64)
    r = rng.normal(size=6)
    sn = np.array([1, 0, 0, 3, 4, 0], dtype=np.int64)
    term = np.array([False, False, True, False, True, False])
    q_loop = q0.copy()
    errs = [
        td_update(q_loop, *t, alpha=0.3, gamma=0.9) for t in zip(s, a, r, sn, term, strict=True)
    ]
    q_batch = q0.copy()
    out = td_update_batch(q_batch, s, a, r, sn, term, alpha=0.3, gamma=0.9)
    np.testing.assert_allclose(q_batch, q_loop, rtol=0, atol=1e-15)
    np.testing.assert_allclose(out, errs, rtol=0, atol=1e-15)


def test_batch_rejects_bad_input():
    q = np.zeros((2, 2))
    one = np.zeros(1, dtype=np.int64)
    with pytest.raises(InputError, match="gamma"):
        td_update_batch(q, one, one, np.zeros(1), one, np.zeros(1, bool), alpha=0.1, gamma=1.5)
    with pytest.raises(InputError, match="Q-table"):
        td_update_batch(q, one + 5, one, np.zeros(1), one, np.zeros(1, bool), alpha=0.1, gamma=0.9)


def test_epsilon_greedy_breaks_ties_at_random():
    rng = np.random.default_rng(1)
    picks = [epsilon_greedy(np.zeros(4), 0.0, rng) for _ in range(400)]
    counts = np.bincount(picks, minlength=4)
    assert counts.min() > 50  # every tied action is chosen, not always action 0
    assert epsilon_greedy(np.array([0.0, 2.0, 1.0]), 0.0, rng) == 1


def test_epsilon_greedy_rows():
    rng = np.random.default_rng(2)
    rows = np.array([[0.0, 1.0], [5.0, -1.0], [0.0, 0.0]])
    acts = np.stack([epsilon_greedy(rows, 0.0, rng) for _ in range(200)])
    assert (acts[:, 0] == 1).all() and (acts[:, 1] == 0).all()
    assert set(acts[:, 2]) == {0, 1}
    explore = epsilon_greedy(np.tile(rows[:1], (2000, 1)), 1.0, rng)
    assert 0.4 < (explore == 0).mean() < 0.6


def test_epsilon_schedule_decays_to_floor():
    sched = EpsilonSchedule(0.9, 0.99, 0.02)
    assert sched(0) == 0.9
    assert sched(1) == pytest.approx(0.891)
    assert sched(10_000) == 0.02
    assert LearningRateSchedule(0.1)(500) == 0.1
    assert LearningRateSchedule(0.1, 0.5, 0.01)(10) == 0.01


@pytest.mark.parametrize("first,n", [(0, 30000), (2999, 700), (0, 1), (5, 0)])
def test_schedule_values_are_the_formula_element_by_element_whatever_the_chunk(first, n):
    # The values stop being computed at the floor: every one must still be exactly the formula's.
    for sched in (EpsilonSchedule(0.6, 0.999, 0.02), LearningRateSchedule(0.05)):
        expect = [max(sched.floor, sched.start * sched.decay ** float(first + k)) for k in range(n)]
        got = sched.values(n, first)
        assert got.dtype == np.float64 and got.tolist() == expect
    whole = EpsilonSchedule(0.6, 0.999, 0.02).values(5000)
    parts = [EpsilonSchedule(0.6, 0.999, 0.02).values(1000, k) for k in range(0, 5000, 1000)]
    assert np.array_equal(whole, np.concatenate(parts))


@pytest.mark.parametrize(
    "kwargs,field",
    [
        ({"start": 1.5}, "epsilon_start"),
        ({"decay": 0.0}, "epsilon_decay"),
        ({"floor": 0.95}, "epsilon_floor"),
    ],
)
def test_epsilon_schedule_bad_input(kwargs, field):
    with pytest.raises(InputError, match=field):
        EpsilonSchedule(**{"start": 0.9, "decay": 0.99, "floor": 0.02, **kwargs})
