"""WarehouseEnv's exact trajectories, pinned by digest: a speed change must not change behaviour.

Each case plays fixed-seed episodes (a reset, then steps until 200 are taken, resetting when an
episode ends) with actions drawn from a fixed generator: mostly a step that the observation says
is closer to the target, otherwise uniform. Every value the API hands out is folded into one
SHA-256 digest: observations (dtype, shape, bytes), rewards, terminations, truncations and infos
(by ``repr``, so a float turned into a numpy scalar or a reordered key changes it too), the
events, ``state()`` and the delivery log. The digests were recorded on the env before its step
was made faster; the counts beside them show that picks, deliveries and resets are exercised.
"""

from __future__ import annotations

import contextlib
import hashlib

import numpy as np
import pytest

from marlm.envs.warehouse import WarehouseEnv
from marlm.envs.warehouse.dynamics import numpy_sum
from marlm.envs.warehouse.env import OBS_CLOSER, REWARD_PARTS

STEPS = 200
COUNTED = ("resets", "terminated", "released", "picked", "delivered", "collided", "blocked")


def _fold(h, obs, *rest) -> None:
    for agent, o in obs.items():
        h.update(f"{agent}:{o.dtype}:{o.shape}:".encode())
        h.update(o.tobytes())
    for part in rest:
        h.update(repr(part).encode())


def _actions(env, obs, rng) -> dict[str, int]:
    """Closer-first with probability 0.7, else uniform; some as numpy integers, and some agents
    left out (they stay)."""
    out = {}
    for agent in env.agents:
        closer = np.flatnonzero(obs[agent][OBS_CLOSER])
        if len(closer) and rng.random() < 0.7:
            action = int(closer[rng.integers(len(closer))]) + 1
        else:
            action = int(rng.integers(0, 5))
        kind = rng.random()
        if kind < 0.3:
            out[agent] = np.int64(action)
        elif kind < 0.95:
            out[agent] = action
    return out


def _plan(env, rng) -> None:
    """A scripted planner for ``auto_assign=False``: random assignments and rare releases."""
    for agent in env.idle_robots():
        pending = env.pending_orders()
        if pending and rng.random() < 0.5:
            with contextlib.suppress(ValueError):  # unreachable shelf: try again later
                env.assign(agent, pending[int(rng.integers(len(pending)))].id)
    for agent in env.possible_agents:
        if env.task_of(agent) is not None and not env.carrying(agent) and rng.random() < 0.02:
            env.release(agent)


def _events(env) -> list[dict]:
    """The env's last events as recorded: a delivery's station name is newer than the digests
    (it adds a field and changes no trajectory), so it is left out."""
    return [{k: v for k, v in e.items() if k != "station"} for e in env.last_events]


def _digest(layout: str, auto_assign: bool, seed: int, **kwargs) -> tuple[str, tuple]:
    """(digest, counts in the order of :data:`COUNTED`) of one case."""
    env = WarehouseEnv(layout, seed=seed, auto_assign=auto_assign, **kwargs)
    rng = np.random.default_rng(seed + 1000)
    h = hashlib.sha256()
    counts = dict.fromkeys(COUNTED, 0)
    obs, infos = env.reset()
    _fold(h, obs, infos, _events(env), env.state().tobytes())
    counts["resets"] += 1
    for _ in range(STEPS):
        if not auto_assign:
            _plan(env, rng)
            obs = env.current_observations()
            _fold(h, obs)
        obs, rewards, terms, truncs, infos = env.step(_actions(env, obs, rng))
        _fold(h, obs, rewards, terms, truncs, infos, _events(env), env.state().tobytes())
        for event in env.last_events:
            if event["type"] in counts:
                counts[event["type"]] += 1
        counts["collided"] += sum(i["collided"] for i in infos.values())
        counts["blocked"] += sum(i["blocked"] for i in infos.values())
        counts["terminated"] += all(terms.values())
        if not env.agents:
            _fold(h, {}, env.delivered, env.missed_deadlines)
            obs, infos = env.reset()
            _fold(h, obs, infos, _events(env), env.state().tobytes())
            counts["resets"] += 1
    _fold(h, {}, env.delivered, env.missed_deadlines, env.robot_positions.tobytes())
    return h.hexdigest()[:16], tuple(counts.values())


CASES = {
    "small-auto": (("small", True, 3), {}),
    "small-planner": (("small", False, 4), {}),
    "medium-auto": (("medium", True, 5), {}),
    "medium-planner": (("medium", False, 6), {"n_robots": 12}),
    "rware-tiny-auto-4-robots": (("rware-tiny", True, 7), {"n_robots": 4, "max_steps": 70}),
    "rware-tiny-planner": (("rware-tiny", False, 8), {"n_robots": 4, "n_orders": 5}),
    "small-crowded-short": (("small", True, 9), {"n_robots": 30, "max_steps": 40}),
    "small-few-orders": (("small", True, 10), {"n_orders": 2, "max_steps": 60}),
}

EXPECTED = {  # digest, counts of COUNTED
    "small-auto": ("9e9a9427d1ddc322", (1, 0, 0, 13, 12, 49, 160)),
    "small-planner": ("fe8a96c781961f94", (1, 0, 2, 5, 5, 3, 188)),
    "medium-auto": ("f6e086ef3737831d", (1, 0, 0, 12, 11, 70, 384)),
    "medium-planner": ("9405f14b90616c06", (1, 0, 4, 7, 6, 83, 432)),
    "rware-tiny-auto-4-robots": ("b317c2d7d3fb0a1d", (3, 0, 0, 31, 26, 51, 45)),
    "rware-tiny-planner": ("d9c128ba19b774c6", (1, 0, 1, 3, 3, 34, 185)),
    "small-crowded-short": ("c634a66987526c90", (6, 0, 0, 74, 16, 1900, 1225)),
    "small-few-orders": ("11fb9161bffd6d2e", (5, 3, 0, 8, 7, 29, 218)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_trajectory_digest_is_unchanged(case):
    args, kwargs = CASES[case]
    assert _digest(*args, **kwargs) == EXPECTED[case]


@pytest.mark.parametrize("n_robots", [1, 2, 3, 4, 7, 25, 26, 200, 1000])
def test_reward_sums_equal_numpys_bit_for_bit(n_robots):
    """The step sums reward parts in Python; numpy summed ``float64[n, 5]`` before (rows
    left to right, the team total pairwise), and the floats must be the same."""
    rng = np.random.default_rng(n_robots)
    values = np.array([0.0, -0.0, -0.01, 0.1, -0.1, 0.5, 1.0, -0.05, 0.3, 1e-9, 7.25])
    for _ in range(30):
        parts = rng.choice(values, size=(n_robots, len(REWARD_PARTS)))
        parts += rng.standard_normal(parts.shape) * (rng.random(parts.shape) < 0.3)
        rows = parts.tolist()
        assert [0.0 + p[0] + p[1] + p[2] + p[3] + p[4] for p in rows] == parts.sum(axis=1).tolist()
        team = numpy_sum([x for row in rows for x in row])
        assert repr(team) == repr(float(parts.sum()))
    assert repr(numpy_sum([-0.0] * 5 * n_robots)) == repr(float(np.full(5 * n_robots, -0.0).sum()))
