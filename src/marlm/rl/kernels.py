"""The numba kernels of the compiled training loops (:mod:`marlm.rl.fast` is their entry point).

Each kernel is the compiled twin of a plain-Python function: :func:`_epsilon_greedy_at` of
:func:`marlm.rl.qlearning.epsilon_greedy` (the same draws in the same order),
:func:`td_update_batch_kernel` of :func:`marlm.rl.qlearning.td_update`, :func:`race_transition` of
:func:`marlm.envs.grid_dynamics.race_transition` (compiled from that very function), and the
episode loops of the plain loops of :mod:`marlm.rl.train`. Importing this module imports numba;
:mod:`marlm.rl.fast` and :mod:`marlm.rl.qlearning` import it only when a kernel is first needed, so
a run whose GridRace loop was built ahead of time (:mod:`marlm.rl.aot`) never loads numba.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from marlm.envs.grid_dynamics import STAY
from marlm.envs.grid_dynamics import race_transition as _plain_race_transition
from marlm.rl.codes import (
    COUNTERFACTUAL_CREDIT,
    DIFFERENCE,
    DIFFERENCE_ABSENT,
    INDIVIDUAL,
    JAL,
    MIXED,
    SHARED,
    VDN,
)

#: :func:`marlm.envs.grid_dynamics.race_transition`, the rule ``GridRace.step`` applies, compiled.
race_transition = njit(cache=True)(_plain_race_transition)

# --------------------------------------------------------------------------------------------
# Q-learning (twins of marlm.rl.qlearning)
# --------------------------------------------------------------------------------------------


@njit(cache=True)
def td_update_batch_kernel(q, s, a, r, s_next, terminated, alpha, gamma, out):  # pragma: no cover
    for i in range(s.shape[0]):
        # Same target as td_update, applied in batch order (sequential semantics).
        boot = q[s_next[i], 0]
        for k in range(1, q.shape[1]):
            if q[s_next[i], k] > boot:
                boot = q[s_next[i], k]
        td_target = r[i] + gamma * (1.0 - terminated[i]) * boot
        td_error = td_target - q[s[i], a[i]]
        q[s[i], a[i]] += alpha * td_error
        out[i] = td_error


@njit(cache=True, inline="always")
def _argmax_random_tie_at(q, s, rng):  # pragma: no cover - compiled
    """Index of a maximum of ``q[s]``; among several maxima, one drawn with ``rng.random()``.

    Indexes ``q[s, k]`` directly instead of taking the row ``q[s]``: a row view costs a reference
    count per call, a third of the loop's time.
    """
    n = q.shape[1]
    best = q[s, 0]
    first = 0
    count = 1
    for k in range(1, n):
        v = q[s, k]
        if v > best:
            best = v
            first = k
            count = 1
        elif v == best:
            count += 1
    if count == 1:  # one pass when the maximum is unique (the common case once learning)
        return first
    pick = int(rng.random() * count)
    for k in range(n):
        if q[s, k] == best:
            if pick == 0:
                return k
            pick -= 1
    return n - 1


@njit(cache=True, inline="always")
def _epsilon_greedy_at(q, s, epsilon, rng):  # pragma: no cover - compiled
    """Compiled twin of :func:`epsilon_greedy` on row ``s`` of ``q``: same draws, same result."""
    if rng.random() < epsilon:
        return int(rng.random() * q.shape[1])
    return _argmax_random_tie_at(q, s, rng)


@njit(cache=True, inline="always")
def _row_max(q, s):  # pragma: no cover - compiled
    """``q[s].max()`` without a row view."""
    best = q[s, 0]
    for k in range(1, q.shape[1]):
        if q[s, k] > best:
            best = q[s, k]
    return best


@njit(cache=True)
def _epsilon_greedy_row(row, epsilon, rng):  # pragma: no cover - compiled
    """Compiled twin of :func:`epsilon_greedy` on a 1-D row."""
    return _epsilon_greedy_at(row.reshape(1, row.shape[0]), 0, epsilon, rng)


# --------------------------------------------------------------------------------------------
# Episode loops
# --------------------------------------------------------------------------------------------


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


def compile_race_loop(kind: int, family: int):
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
