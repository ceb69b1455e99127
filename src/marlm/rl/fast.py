"""Compiled training loops (numba) for GridWorld and GridRace.

Why numba and not many environments stepped as numpy arrays: tabular Q-learning updates one table
entry per step, and the textbook algorithm is *sequential* (each update sees the previous ones).
Stepping thousands of environments as arrays changes the algorithm (batched, synchronous updates
with a different epsilon per episode count) and so the converged numbers; a JIT keeps the exact
algorithm of the plain loop and removes the interpreter. These loops make the same random draws in
the same order as the plain-Python reference loops in :mod:`marlm.rl.train` (see
:func:`marlm.rl.qlearning.epsilon_greedy`), so with one seed both give the same Q-tables; the tests
check that, and ``benchmarks/bench_rl.py`` measures the speed ratio (several hundred times).

The environment dynamics come from :mod:`marlm.envs.grid` (``GridWorld.transition_table``) and
:mod:`marlm.envs.grid_dynamics` (:func:`~marlm.envs.grid_dynamics.race_transition`, the function
``GridRace.step`` itself uses), so the compiled loops cannot drift from the environments; this
module imports neither Gymnasium nor PettingZoo.

Reward modes (credit assignment, see :mod:`marlm.rl.credit`): 0 shared, 1 individual, 2 mixed,
3/4/5 difference with the counterfactual stay/absent/average (:func:`marlm.rl.credit.mode_code`).
Learners: IQL (Tan 1993), VDN (Sunehag et al. 2018), JAL (Claus & Boutilier 1998), all run by one
episode loop (:func:`race_episodes`) that differs only in each agent's action choice
(``_choose``) and the update (``_learn``), compiled once per learner and credit family (plain or
counterfactual), on first use. Each episode writes one row of the ``RaceLog`` arrays.

The kernels themselves are in :mod:`marlm.rl.kernels`, which imports numba; this module imports it
only when a kernel is first used (:pep:`562` module attributes). A GridRace loop is run from the
module built ahead of time for it (:mod:`marlm.rl.aot`) where one is usable, else compiled by the
JIT as before: the same machine code from the same source, so the same tables and logs.
"""

from __future__ import annotations

from marlm.rl.codes import (
    COUNTERFACTUAL_CREDIT,
    DIFFERENCE,
    DIFFERENCE_ABSENT,
    DIFFERENCE_AVERAGE,
    INDIVIDUAL,
    IQL,
    JAL,
    MIXED,
    PLAIN_CREDIT,
    SHARED,
    VDN,
)

#: Kernels of :mod:`marlm.rl.kernels` offered here, imported (with numba) on first access.
_KERNELS = ("gridworld_episodes", "greedy_rollout_gridworld", "jal_values")


def __getattr__(name: str):
    """:pep:`562`: ``fast.jal_values`` etc. import :mod:`marlm.rl.kernels` (numba) on first read."""
    if name not in _KERNELS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from marlm.rl import kernels

    offered = {
        "gridworld_episodes": kernels.gridworld_episodes,
        "greedy_rollout_gridworld": kernels.greedy_rollout_gridworld,
        "jal_values": kernels.jal_values,
    }
    value = globals()[name] = offered[name]
    return value


def race_episodes(kind: int, *args) -> None:
    """GridRace episodes of one two-agent learner, ``kind`` = ``IQL`` | ``VDN`` | ``JAL``.

    ``args``: ``q0, q1, c0, c1, moves, goal, n_cells, max_steps, end_any, mode, weight, learn0,
    learn1, eps, alpha, gamma, rng, log_ret, log_own, log_team, log_len, log_reached, log_acts,
    log_seq``.

    Learners: IQL (Tan 1993), one table per agent over the joint state, each learning from its own
    credit-assigned reward; VDN (Sunehag et al. 2018), ``Q_tot = Q_0(o_0, a_0) + Q_1(o_1, a_1)``
    trained on the team reward (``mode`` and ``weight`` are ignored); JAL (Claus & Boutilier 1998),
    a CTDE learner whose agent i learns ``Q_i(o_i, a_i, a_j)`` and counts its partner's actions.
    Acting is decentralised: each agent epsilon-greedy on its own table (JAL: on the expected value
    :func:`jal_values`). Tables, updated in place: ``q0, q1 float64[n_cells**2, 5]`` (JAL:
    ``float64[n_cells**2 * 5, 5]``, the ``[O, 5, 5]`` table reshaped) and, for JAL only,
    ``c0, c1 float64[n_cells**2, 5]`` (others: any ``float64[1, 5]``). ``moves int64[n_cells, 5]``
    (:func:`marlm.envs.grid_dynamics.move_table`); ``mode``: a credit code (``SHARED`` ...).

    ``eps float64[E, 2]`` (per agent, so a frozen partner can act with a fixed epsilon),
    ``alpha float64[E]``; ``learn0/1``: whether each agent updates its table. Log arrays, zero
    (``seq``: -1) on entry and added to: ``ret/own float64[E, 2]``, ``team float64[E]``,
    ``len int64[E]``, ``reached bool[E, 2]``, ``acts int64[E, 2, 5]``, ``seq int8[E, 2, T]`` (the
    action taken at each step, -1 where the agent did not act).
    """
    mode = args[9]
    family = COUNTERFACTUAL_CREDIT if mode >= DIFFERENCE else PLAIN_CREDIT
    from marlm.rl import aot

    if not aot.run_race_loop(kind, family, args):  # the loop built ahead of time, if usable
        race_loop(kind, family)(*args)


_RACE_LOOPS: dict[tuple[int, int], object] = {}


def race_loop(kind: int, family: int):
    """The JIT-compiled episode loop of one learner ``kind`` and credit ``family``, made on first
    use (:func:`marlm.rl.kernels.compile_race_loop`; numba loads it from its disk cache)."""
    key = (kind, family)
    if key not in _RACE_LOOPS:
        from marlm.rl.kernels import compile_race_loop

        _RACE_LOOPS[key] = compile_race_loop(kind, family)
    return _RACE_LOOPS[key]


__all__ = [
    "COUNTERFACTUAL_CREDIT",
    "PLAIN_CREDIT",
    "DIFFERENCE",
    "DIFFERENCE_ABSENT",
    "DIFFERENCE_AVERAGE",
    "INDIVIDUAL",
    "MIXED",
    "SHARED",
    "IQL",
    "JAL",
    "VDN",
    "race_episodes",
    *_KERNELS,
]
