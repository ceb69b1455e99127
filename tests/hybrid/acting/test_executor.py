"""The RL executor: it learns to deliver (seeded), and its Q-table file round-trips safely."""

from __future__ import annotations

import numpy as np
import pytest

from marlm.errors import InputError
from marlm.hybrid.acting.executor import (
    N_STATES,
    GreedyExecutor,
    QExecutor,
    RandomExecutor,
    discretise,
    train_executor,
)
from marlm.hybrid.evaluate import evaluate_executor


@pytest.fixture(scope="module")
def trained(warm_cache) -> QExecutor:
    """The demo's executor (``DEFAULT_TRAINING``: 60 episodes on ``small``, seed 0), from the
    session's cache (tests/conftest.py): the same table, not a second training of it."""
    from marlm.hybrid.build import cached_policy
    from marlm.hybrid.defaults import DEFAULT_TRAINING

    assert DEFAULT_TRAINING == {"layout": "small", "episodes": 60, "max_steps": 400, "seed": 0}
    return cached_policy()[0]


#: The default table's TD updates in training (60 episodes, seed 0), measured.
UPDATES = 89076


def test_trained_policy_beats_random_and_plain_greedy_on_held_out_seeds(trained):
    # Held-out seeds 1000-1002, 40 orders each on about 20 shelves (repeats wait their turn);
    # without a shield, the environment's collision rules refuse conflicting moves. Measured:
    policy = trained
    assert policy.info["updates"] == UPDATES and np.isfinite(policy.q).all()
    rl = evaluate_executor(policy)
    greedy = evaluate_executor(GreedyExecutor())
    random = evaluate_executor(RandomExecutor())
    assert rl == {"delivered": 35.0, "delivery_rate": 0.875, "collisions": 81.0}
    assert (greedy["delivered"], greedy["delivery_rate"]) == (8.0, 0.2)
    assert (random["delivered"], random["delivery_rate"]) == (3.0, 0.075)


def test_the_shield_removes_every_robot_conflict(trained):
    policy = trained
    shielded = evaluate_executor(policy, shield=True)
    assert (shielded["delivered"], shielded["collisions"]) == (40.0, 0.0)


def test_under_the_pibt_layer_the_table_needs_no_random_actions(trained):
    # Held-out seeds 1000-1002, no noise: the PIBT layer (the default rule layer) ranks the
    # table's scores and delivers all 40 orders on each seed; the local shield, which only
    # filters the argmax, leaves symmetric standoffs standing (74 of 120 orders, measured).
    policy = trained
    plain = QExecutor(q=policy.q, noise=0.0)
    pibt = evaluate_executor(plain, shield=True)
    local = evaluate_executor(plain, shield=True, shield_rule="local")
    assert pibt["delivered"] == 40 and pibt["collisions"] == 0
    assert local["delivered"] == pytest.approx(74 / 3, rel=1e-12)  # a mean over 3 seeds
    assert local["collisions"] == 0


def test_discretise_reads_the_documented_observation_indices():
    obs = np.zeros((2, 16), dtype=np.float32)
    obs[0, 10] = 1.0  # moving up gets closer
    obs[1, 6 + 3] = 1.0  # a robot to the right
    obs[1, 15] = 1.0  # has a task
    assert discretise(obs).tolist() == [1, 16 * 8 + 256]
    assert discretise(obs[0]) == 1
    assert discretise(np.ones((1, 16))).item() == N_STATES - 1


def test_policy_file_round_trip_and_bad_files(tmp_path, trained):
    policy = trained
    path = policy.save(tmp_path / "p.npz")
    loaded = QExecutor.load(path)
    assert np.array_equal(loaded.q, policy.q) and loaded.info["episodes"] == 60
    np.savez(
        tmp_path / "bad.npz", q=np.zeros((3, 5)), format="marlm-warehouse-executor-v1", info="{}"
    )
    with pytest.raises(InputError, match="shape"):
        QExecutor.load(tmp_path / "bad.npz")
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(InputError, match="not a marlm policy") as junk:
        QExecutor.load(tmp_path / "junk.npz")
    # the one error line named neither the field nor the fix ("not a marlm policy file (EOFError)")
    assert junk.value.field == "policy" and "marlm train warehouse" in str(junk.value)
    with pytest.raises(InputError, match="not found"):
        QExecutor.load(tmp_path / "missing.npz")


def test_bad_training_settings_name_the_field():
    with pytest.raises(InputError, match="episodes"):
        train_executor(episodes=0)
