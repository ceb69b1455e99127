"""The lazy agent on GridRace (shared reward) and its removal; the detectors on known curves."""

from __future__ import annotations

import json

import numpy as np
import pytest

from marlm.eval.diagnose import (
    detect_lazy_agent,
    detect_non_stationarity,
    diagnose_run,
    dominant_sequence,
)
from marlm.experiments.tabular import run_race
from marlm.rl.train import RaceConfig, fixed_partner_run, train_race

AGENTS = ["agent_0", "agent_1"]


def _lazy(res):
    n = res.episode
    return detect_lazy_agent(
        res.log.team_return[:n], res.log.own_return[:n], AGENTS,
        reached=res.log.reached[:n], action_counts=res.log.action_counts[:n],
        action_sequences=res.log.actions[:n],
    )  # fmt: skip


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_shared_reward_iql_has_a_lazy_agent_and_individual_rewards_remove_it(seed):
    shared = train_race(RaceConfig(reward="shared", seed=seed))  # the 30000-episode IQL
    findings = _lazy(shared)
    assert len(findings) == 1 and findings[0].kind == "lazy_agent"
    lazy = AGENTS.index(findings[0].agent)
    assert shared.log.reached[-3000:, lazy].mean() < 0.05
    assert "--reward individual" in findings[0].suggestion
    individual = train_race(RaceConfig(reward="individual", seed=seed))
    assert _lazy(individual) == []
    assert individual.log.reached[-3000:].mean(axis=0).min() > 0.8  # both agents arrive


@pytest.mark.parametrize("seed", range(8))
def test_difference_rewards_with_the_agent_absent_remove_it(seed):
    # Measured over seeds 0-7 (see marlm.rl.credit): shared 8/8 lazy, difference with the agent
    # removed from the counterfactual 0/8, with the default action 'stay' 6/8 (the step cost
    # cancels out of D_i, so the lazy agent sees zeros), with the average action 8/8.
    assert _lazy(train_race(RaceConfig(reward="shared", seed=seed)))
    res = train_race(RaceConfig(reward="difference", counterfactual="absent", seed=seed))
    assert _lazy(res) == []
    assert res.log.reached[-3000:].mean(axis=0).min() > 0.8  # both agents arrive


def test_difference_rewards_with_stay_leave_most_seeds_lazy():
    stay = [
        bool(_lazy(train_race(RaceConfig(reward="difference", counterfactual="stay", seed=s))))
        for s in range(8)
    ]
    assert stay == [True, False, True, True, True, True, False, True]


def test_lazy_agent_detector_on_collapsed_actions():
    n = 100
    team = np.linspace(0.0, 1.0, n)
    own = np.stack([team, np.zeros(n)], axis=1)
    acts = np.zeros((n, 2, 5), dtype=np.int64)
    acts[:, 0, :] = 2
    acts[:, 1, 4] = 6  # agent_1 only ever stays
    reached = np.stack([np.ones(n, bool), np.ones(n, bool)], axis=1)  # arrival shares are equal
    findings = detect_lazy_agent(team, own, AGENTS, reached=reached, action_counts=acts)
    assert [f.agent for f in findings] == ["agent_1"] and "repeats one action" in findings[
        0
    ].message
    assert (
        detect_lazy_agent(team[::-1].copy(), own, AGENTS, reached=reached, action_counts=acts) == []
    )


def test_an_agent_repeating_an_action_that_pays_is_not_called_lazy():
    # Individual rewards, both agents earning half of a rising team return, agent_0 taking one
    # action every step (its best: a corridor run east). It was named lazy on the frequency alone.
    n = 100
    team = np.linspace(0.0, 1.0, n)
    own = np.stack([0.5 * team + 0.01, 0.5 * team - 0.01], axis=1)
    acts = np.zeros((n, 2, 5), dtype=np.int64)
    acts[:, 0, 1] = 6  # agent_0: east, always
    acts[:, 1, :] = [2, 1, 1, 1, 1]
    assert detect_lazy_agent(team, own, AGENTS, action_counts=acts) == []
    # Both earning the same by the end (each its own reward for one fixed best action) was read
    # as a shared reward, and both were named lazy: their returns differed while they learned.
    equal_at_end = np.stack([0.5 * team, 0.5 * team], axis=1)
    equal_at_end[: n // 2, 1] *= 0.5
    assert detect_lazy_agent(team, equal_at_end, AGENTS, action_counts=acts) == []
    # The same frequency with no return of its own is lazy, as is any collapse under a shared
    # reward (every own return the team's: nothing tells the agents apart but their actions).
    own[:, 0] = 0.0
    assert [f.agent for f in detect_lazy_agent(team, own, AGENTS, action_counts=acts)] == [
        "agent_0"
    ]
    shared = np.stack([team, team], axis=1)
    assert [f.agent for f in detect_lazy_agent(team, shared, AGENTS, action_counts=acts)] == [
        "agent_0"
    ]


def _episodes(pattern, n, steps=6):
    """``int8[n, steps]`` holding ``pattern`` cycled, padded with -1 after ``steps`` actions."""
    out = np.full((n, 8), -1, dtype=np.int8)
    out[:, :steps] = [pattern[t % len(pattern)] for t in range(steps)]
    return out


def test_dominant_sequence_known_answer():
    seqs = np.concatenate([_episodes([2, 3], 3), _episodes([4], 1, steps=2)])
    sequence, share, rows = dominant_sequence(seqs)
    assert sequence == (2, 3, 2, 3, 2, 3) and share == 0.75
    assert rows.tolist() == [True, True, True, False]


@pytest.mark.parametrize("dtype", [np.int8, np.int64])
def test_dominant_sequence_is_numpy_uniques_most_frequent_row(dtype):
    # The sort-and-count implementation against np.unique(axis=0) on small random logs with many
    # ties (3 actions and -1 over 1-4 steps): same sequence (smallest on ties), share and rows.
    rng = np.random.default_rng(7)
    for _ in range(200):
        seqs = rng.integers(-1, 3, size=(int(rng.integers(1, 40)), int(rng.integers(1, 5))))
        seqs = seqs.astype(dtype)
        rows, inverse, counts = np.unique(seqs, axis=0, return_inverse=True, return_counts=True)
        best = int(np.argmax(counts))
        sequence, share, where = dominant_sequence(seqs)
        assert sequence == tuple(int(a) for a in rows[best] if a >= 0)
        assert share == counts[best] / len(seqs)
        assert where.tolist() == (inverse.reshape(-1) == best).tolist()


def test_dominant_sequence_of_episodes_without_steps():
    sequence, share, rows = dominant_sequence(np.zeros((3, 0), dtype=np.int8))
    assert sequence == () and share == 1.0 and rows.tolist() == [True] * 3


def test_lazy_agent_detector_on_a_repeated_action_sequence():
    # agent_1 walks left, right, left, ... (each action 50%: the frequency check cannot see it)
    # in 80% of the last episodes and never arrives then; in the other 20% it arrives, so its
    # share of the arrivals (1/6) is above max_share: only the repeated sequence names it.
    n = 100
    team = np.linspace(0.0, 1.0, n)
    own = np.stack([team, np.zeros(n)], axis=1)
    seqs = np.zeros((n, 2, 8), dtype=np.int8)
    seqs[:, 0] = _episodes([3, 1], n)  # agent_0: right, down, ... a path to the goal
    seqs[:, 1] = _episodes([2, 3], n)
    seqs[::5, 1] = _episodes([1, 3], n // 5)
    reached = np.ones((n, 2), dtype=bool)
    reached[:, 1] = False
    reached[::5, 1] = True
    counts = np.stack([(seqs == a).sum(axis=2) for a in range(5)], axis=2)
    kw = dict(reached=reached, action_counts=counts)
    assert detect_lazy_agent(team, own, AGENTS, **kw) == []  # without sequences: missed
    findings = detect_lazy_agent(team, own, AGENTS, action_sequences=seqs, **kw)
    assert [f.agent for f in findings] == ["agent_1"]
    assert "repeats one action sequence [2, 3, 2, 3, 2, 3] in 80%" in findings[0].message
    assert findings[0].evidence["top_sequence_share"] == pytest.approx(0.8)
    # The same repetition that reaches the goal is a converged policy, not a lazy agent.
    reached[:, 1] = True
    assert detect_lazy_agent(team, own, AGENTS, action_sequences=seqs, **kw) == []


def test_non_stationarity_detector():
    rng = np.random.default_rng(0)
    n = 2000
    wave = 0.3 * np.sign(np.sin(np.arange(n) / 40.0))
    joint = np.stack([wave + rng.normal(0, 0.05, n), rng.normal(0, 0.05, n)], axis=1)
    alone = {"agent_0": rng.normal(0, 0.05, n), "agent_1": rng.normal(0, 0.05, n)}
    findings = detect_non_stationarity(joint, alone, AGENTS)
    assert [f.agent for f in findings] == ["agent_0"] and "--learner jal" in findings[0].suggestion


# Learning never stops (alpha 0.2, constant epsilon 0.2), so mutual adaptation can show.
KEEP_LEARNING = dict(alpha=0.2, epsilon_start=0.2, epsilon_decay=1.0, epsilon_floor=0.2)


def _non_stationary(res):
    alone = {a: fixed_partner_run(res, i).own_return[:, i] for i, a in enumerate(AGENTS)}
    return detect_non_stationarity(res.log.own_return, alone, AGENTS)


@pytest.mark.parametrize("seed", [0, 2, 3])
def test_non_stationarity_fires_on_shared_iql_and_not_on_jal(seed):
    # Shared-reward IQL: the agents keep swapping who runs to the goal while both learn; each one
    # learning alone against its partner frozen at the end of the run settles (measured: 6 of 8
    # seeds fire; seeds 0, 2, 3 with oscillation together / alone 0.21/0.03, 0.18/0.03, 0.26/0.03).
    iql = train_race(RaceConfig(reward="shared", seed=seed, episodes=20000, **KEEP_LEARNING))
    findings = _non_stationary(iql)
    assert findings and all(f.kind == "non_stationarity" for f in findings)
    for f in findings:
        assert f.evidence["oscillation_together"] > 3 * f.evidence["oscillation_alone"]
    # The suggested fix, joint-action learners (CTDE), and individual rewards remove it.
    jal = train_race(
        RaceConfig(learner="jal", reward="shared", seed=seed, episodes=20000, **KEEP_LEARNING)
    )
    assert _non_stationary(jal) == []
    individual = train_race(
        RaceConfig(reward="individual", seed=seed, episodes=20000, **KEEP_LEARNING)
    )
    assert _non_stationary(individual) == []


def test_non_stationarity_in_a_run_folder(tmp_path):
    cfg = RaceConfig(reward="shared", seed=0, episodes=20000, **KEEP_LEARNING)
    _, _, findings = run_race(cfg, tmp_path / "run")
    assert "non_stationarity" in [f.kind for f in findings]
    assert [f.to_dict() for f in diagnose_run(tmp_path / "run")] == [f.to_dict() for f in findings]


def test_run_folder_and_diagnose_run(tmp_path):
    res, metrics, findings = run_race(RaceConfig(episodes=30000, seed=0), tmp_path / "run")
    assert [f.kind for f in findings if f.kind == "lazy_agent"] == ["lazy_agent"]
    assert metrics["team_curve"] == "sum"
    for name in ("tables.npz", "episodes.npz", "metrics.json", "curves.png", "findings.json"):
        assert (tmp_path / "run" / name).is_file()
    again = diagnose_run(tmp_path / "run")
    assert [f.to_dict() for f in again] == [f.to_dict() for f in findings]
    del res


def test_diagnose_agrees_with_train_env_on_a_healthy_gridrace_run(tmp_path, capsys):
    """``train env`` logs no goal arrivals for a generic environment; diagnose read its all-False
    column as "nobody arrived" and called both agents of a healthy run lazy, naming
    ``--reward individual``, which ``train env`` does not have."""
    from cli_run import run_main

    out = tmp_path / "run"
    argv = ["train", "env", "marlm.envs.grid:GridRace", "--steps", "6000", "--no-plot"]
    code, err = run_main([*argv, "--out", out], capsys)
    assert code == 0, err
    trained = json.loads((out / "findings.json").read_text())
    assert trained == []
    assert diagnose_run(out) == []
