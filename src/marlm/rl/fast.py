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
(:func:`_choose`) and the update (:func:`_learn`), compiled once per learner and credit family
(plain or counterfactual), on first use. Each episode writes one row of the ``RaceLog`` arrays.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from marlm.envs.grid_dynamics import STAY, race_transition
from marlm.rl.qlearning import _epsilon_greedy_at, _epsilon_greedy_row, _row_max

SHARED, INDIVIDUAL, MIXED, DIFFERENCE = 0, 1, 2, 3  # DIFFERENCE: counterfactual "stay"
DIFFERENCE_ABSENT, DIFFERENCE_AVERAGE = 4, 5  # counterfactuals "absent" and "average"


@njit(cache=True)
def gridworld_episodes(
    q, next_state, reward, terminal, start, max_steps, eps, alpha, gamma, rng, returns, lengths
):  # pragma: no cover - compiled
    """Tabular Q-learning for ``len(eps)`` episodes on a table-given MDP (GridWorld).

    ``q float64[S, A]`` (in place); ``eps, alpha float64[E]`` per episode; ``returns float64[E]``
    and ``lengths int64[E]`` are filled. Same update as :func:`marlm.rl.qlearning.td_update`.
    """
    for ep in range(eps.shape[0]):
        s = start
        g = 0.0
        t = 0
        while True:
            a = _epsilon_greedy_at(q, s, eps[ep], rng)
            s_next = next_state[s, a]
            r = reward[s, a]
            terminated = terminal[s_next]
            t += 1
            truncated = (not terminated) and t >= max_steps
            # Watkins & Dayan 1992: bootstrap unless terminated (truncation still bootstraps).
            td_target = r + gamma * (1.0 - terminated) * _row_max(q, s_next)
            td_error = td_target - q[s, a]
            q[s, a] += alpha[ep] * td_error
            g += r
            s = s_next
            if terminated or truncated:
                break
        returns[ep] = g
        lengths[ep] = t


@njit(cache=True)
def _team_reward(p0, p1, a0, a1, act0, act1, moves, goal):  # pragma: no cover - compiled
    _, _, r0, r1 = race_transition(p0, p1, a0, a1, act0, act1, moves, goal)
    return r0 + r1


@njit(cache=True)
def _difference_reward(mode, i, team, p0, p1, a0, a1, act0, act1, moves, goal):
    """Difference reward of agent ``i``, ``D_i = r(s, u) - r(s, counterfactual_i)`` (Wolpert &
    Tumer 2002), for the three counterfactuals of :mod:`marlm.rl.credit`."""
    no = False
    if mode == DIFFERENCE_ABSENT:  # agent i removed from the world for this step
        if i == 0:
            return team - _team_reward(p0, p1, a0, a1, no, act1, moves, goal)
        return team - _team_reward(p0, p1, a0, a1, act0, no, moves, goal)
    stay = STAY
    if mode == DIFFERENCE:  # agent i takes the default action stay
        if i == 0:
            return team - _team_reward(p0, p1, stay, a1, act0, act1, moves, goal)
        return team - _team_reward(p0, p1, a0, stay, act0, act1, moves, goal)
    base = 0.0  # DIFFERENCE_AVERAGE: mean over agent i's 5 actions
    for b in range(5):
        if i == 0:
            base += _team_reward(p0, p1, b, a1, act0, act1, moves, goal)
        else:
            base += _team_reward(p0, p1, a0, b, act0, act1, moves, goal)
    return team - base / 5.0


PLAIN_CREDIT, COUNTERFACTUAL_CREDIT = 0, 1  # credit families of the compiled loops


@njit(cache=True, inline="always")
def _race_step(p0, p1, a0, a1, act0, act1, moves, goal, end_any, mode, weight, family):
    n0, n1, r0, r1 = race_transition(p0, p1, a0, a1, act0, act1, moves, goal)
    team = r0 + r1
    # ``family`` is a constant of the compiled loop: a loop of the plain family (shared,
    # individual, mixed) holds no counterfactual step at all.
    if family == COUNTERFACTUAL_CREDIT:
        g0 = _difference_reward(mode, 0, team, p0, p1, a0, a1, act0, act1, moves, goal)
        g1 = _difference_reward(mode, 1, team, p0, p1, a0, a1, act0, act1, moves, goal)
    elif mode == INDIVIDUAL:
        g0 = r0
        g1 = r1
    elif mode == MIXED:
        g0 = (1.0 - weight) * team + weight * r0
        g1 = (1.0 - weight) * team + weight * r1
    else:  # SHARED
        g0 = team
        g1 = team
    reached0 = act0 and n0 == goal
    reached1 = act1 and n1 == goal
    if end_any:
        term0 = reached0 or reached1
        term1 = term0
    else:
        term0 = reached0
        term1 = reached1
    return n0, n1, r0, r1, team, g0, g1, term0, term1, reached0, reached1


IQL, VDN, JAL = 0, 1, 2  # learner codes of race_episodes


@njit(cache=True)
def jal_values(q, counts, o, out):  # pragma: no cover - compiled
    """Expected value of each own action under the empirical model of the partner.

    ``q float64[O * A, B]``: ``Q(o, a, b)`` at row ``o * A + a`` (the table ``float64[O, A, B]``
    seen as rows of partner actions, ``q.reshape(-1, B)``), ``counts float64[O, B]``,
    ``out float64[A]``; writes ``out[a] = sum_b Q(o, a, b) * counts[o, b] / sum_b counts[o, b]``
    (uniform if no counts yet).
    """
    n_partner = q.shape[1]
    total = 0.0
    for b in range(n_partner):
        total += counts[o, b]
    for a in range(out.shape[0]):
        v = 0.0
        for b in range(n_partner):
            w = counts[o, b] / total if total > 0.0 else 1.0 / n_partner
            v += q[o * out.shape[0] + a, b] * w
        out[a] = v


@njit(cache=True, inline="always")
def _choose(kind, q, counts, o, epsilon, rng, ev):  # pragma: no cover - compiled
    """One agent's epsilon-greedy action on its own table (JAL: on its expected values)."""
    if kind == JAL:
        jal_values(q, counts, o, ev)
        return _epsilon_greedy_row(ev, epsilon, rng)
    return _epsilon_greedy_at(q, o, epsilon, rng)


@njit(cache=True, inline="always")
def _jal_update(q, counts, o, a, b, o_next, r, term, alpha, gamma, ev):  # pragma: no cover
    """Claus & Boutilier 1998: count the partner's action ``b``, then
    ``y = r + gamma * (1 - term) * max_a' EV(o', a')``, ``Q(o, a, b) += alpha * (y - Q(o, a, b))``."""
    counts[o, b] += 1.0
    jal_values(q, counts, o_next, ev)
    td_target = r + gamma * (1.0 - term) * ev.max()
    row = o * ev.shape[0] + a
    q[row, b] += alpha * (td_target - q[row, b])


@njit(cache=True, inline="always")
def _learn(
    kind, q0, q1, c0, c1, o0, o1, a0, a1, x0, x1, g0, g1, team, term0, term1,
    act0, act1, learn0, learn1, alpha, gamma, ev,
):  # pragma: no cover - compiled  # fmt: skip
    """The learner's update for one joint step: ``x0, x1`` are the next observations."""
    if kind == VDN:
        # Sunehag et al. 2018: y = r_team + gamma * sum_i (1 - term_i) max Q_i(o_i'), one error
        # y - Q_tot shared by every acting agent's entry.
        q_tot = 0.0
        next_v = 0.0
        if act0:
            q_tot += q0[o0, a0]
            next_v += (1.0 - term0) * _row_max(q0, x0)
        if act1:
            q_tot += q1[o1, a1]
            next_v += (1.0 - term1) * _row_max(q1, x1)
        td_target = team + gamma * next_v
        td_error = td_target - q_tot
        if act0 and learn0:
            q0[o0, a0] += alpha * td_error
        if act1 and learn1:
            q1[o1, a1] += alpha * td_error
    elif kind == JAL:
        if act0 and learn0:
            _jal_update(q0, c0, o0, a0, a1, x0, g0, term0, alpha, gamma, ev)
        if act1 and learn1:
            _jal_update(q1, c1, o1, a1, a0, x1, g1, term1, alpha, gamma, ev)
    else:  # IQL (Tan 1993): each agent's own Q-learning update on its own learning reward.
        if act0 and learn0:
            td_target = g0 + gamma * (1.0 - term0) * _row_max(q0, x0)
            q0[o0, a0] += alpha * (td_target - q0[o0, a0])
        if act1 and learn1:
            td_target = g1 + gamma * (1.0 - term1) * _row_max(q1, x1)
            q1[o1, a1] += alpha * (td_target - q1[o1, a1])


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
    race_loop(kind, family)(*args)


_RACE_LOOPS: dict[tuple[int, int], object] = {}


def race_loop(kind: int, family: int):
    """The compiled episode loop of one learner ``kind`` and credit ``family``, made on first use."""
    key = (kind, family)
    if key not in _RACE_LOOPS:
        _RACE_LOOPS[key] = _compile_race_loop(kind, family)
    return _RACE_LOOPS[key]


def _compile_race_loop(kind: int, family: int):
    """The episode loop of :func:`race_episodes`, compiled for one learner ``kind`` and one credit
    ``family`` (``PLAIN_CREDIT``: shared, individual, mixed; ``COUNTERFACTUAL_CREDIT``: the
    difference rewards).

    One source for every learner, compiled per (learner, family) with both constants, so that each
    loop holds only its own branches (with ``kind`` an argument read at run time the loop ran a
    third slower) and a run compiles only the loop it uses (the plain family never compiles the
    counterfactual step; inlining that one too made the compile slower, not faster). numba caches each loop on disk apart (its cache
    key includes the closure's values).
    """

    @njit(cache=True)
    def race_loop(
        q0, q1, c0, c1, moves, goal, n_cells, max_steps, end_any, mode, weight, learn0, learn1,
        eps, alpha, gamma, rng, log_ret, log_own, log_team, log_len, log_reached, log_acts,
        log_seq,
    ):  # pragma: no cover - compiled  # fmt: skip
        if kind == VDN:
            mode = SHARED
            weight = 0.0
        ev = np.empty(q0.shape[1])  # JAL's expected values (5 own actions = 5 partner actions)
        for ep in range(eps.shape[0]):
            eps0 = eps[ep, 0]
            eps1 = eps[ep, 1]
            alpha_ep = alpha[ep]
            p0 = 0
            p1 = 0
            act0 = True
            act1 = True
            t = 0
            # The episode's sums stay in registers; the logs are written once, at its end.
            ret0 = ret1 = own0 = own1 = team_sum = 0.0
            reached0 = reached1 = False
            while True:
                o0 = p0 * n_cells + p1
                o1 = p1 * n_cells + p0
                a0 = _choose(kind, q0, c0, o0, eps0, rng, ev) if act0 else STAY
                a1 = _choose(kind, q1, c1, o1, eps1, rng, ev) if act1 else STAY
                n0, n1, r0, r1, team, g0, g1, term0, term1, got0, got1 = _race_step(
                    p0, p1, a0, a1, act0, act1, moves, goal, end_any, mode, weight, family
                )
                _learn(
                    kind, q0, q1, c0, c1, o0, o1, a0, a1, n0 * n_cells + n1, n1 * n_cells + n0,
                    g0, g1, team, term0, term1, act0, act1, learn0, learn1, alpha_ep, gamma, ev,
                )  # fmt: skip
                if act0:
                    ret0 += g0
                    own0 += r0
                    log_acts[ep, 0, a0] += 1
                    log_seq[ep, 0, t] = a0
                if act1:
                    ret1 += g1
                    own1 += r1
                    log_acts[ep, 1, a1] += 1
                    log_seq[ep, 1, t] = a1
                team_sum += team
                reached0 |= got0
                reached1 |= got1
                t += 1
                act0 = act0 and not term0
                act1 = act1 and not term1
                p0 = n0
                p1 = n1
                if t >= max_steps or not (act0 or act1):
                    break
            log_ret[ep, 0] += ret0
            log_ret[ep, 1] += ret1
            log_own[ep, 0] += own0
            log_own[ep, 1] += own1
            log_team[ep] += team_sum
            log_reached[ep, 0] |= reached0
            log_reached[ep, 1] |= reached1
            log_len[ep] = t

    return race_loop


@njit(cache=True)
def greedy_rollout_gridworld(q, next_state, terminal, start, max_steps):  # pragma: no cover
    """Length of the greedy path from ``start`` (first maximum on ties); ``max_steps`` if it loops."""
    s = start
    for t in range(1, max_steps + 1):
        s = next_state[s, np.argmax(q[s])]
        if terminal[s]:
            return t
    return max_steps


__all__ = [
    "DIFFERENCE",
    "DIFFERENCE_ABSENT",
    "DIFFERENCE_AVERAGE",
    "INDIVIDUAL",
    "MIXED",
    "SHARED",
    "IQL",
    "JAL",
    "VDN",
    "greedy_rollout_gridworld",
    "gridworld_episodes",
    "jal_values",
    "race_episodes",
]
