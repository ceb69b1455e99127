"""Known answers for the deep learners' math: GAE on a hand-computed episode, PPO's clipped loss
on a fixed batch, the value normaliser, the value learners' reward normaliser in one call, QMIX's
monotonicity, VDN's sum, the NumPy actor."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from marlm.rl.deep.dqn import QMixer, VDNMixer, normalise_in_turn
from marlm.rl.deep.nets import linear_layers, mlp
from marlm.rl.deep.policy import NumpyPolicy, policy_to_arrays
from marlm.rl.deep.ppo import ValueNorm, clipped_policy_loss, gae
from marlm.rl.normalise import RunningNormaliser

GAMMA, LAM = 0.9, 0.8
REWARD = np.array([1.0, 0.0, 2.0])
VALUE = np.array([0.5, 0.4, 0.3])


def test_gae_on_a_terminated_episode_by_hand():
    # delta_2 = 2 - 0.3 = 1.7 (terminated: the next value 9.9 is not used)
    # delta_1 = 0 + 0.9 * 0.3 - 0.4 = -0.13;  A_1 = -0.13 + 0.72 * 1.7 = 1.094
    # delta_0 = 1 + 0.9 * 0.4 - 0.5 = 0.86;   A_0 = 0.86 + 0.72 * 1.094 = 1.64768
    adv, ret = gae(
        REWARD, VALUE, [0.4, 0.3, 9.9], [False, False, True], [False, False, True], GAMMA, LAM
    )
    np.testing.assert_allclose(adv, [1.64768, 1.094, 1.7], atol=1e-12)
    np.testing.assert_allclose(ret, [2.14768, 1.494, 2.0], atol=1e-12)


def test_gae_bootstraps_a_time_limit():
    # Truncated at t=2 with V(final observation) = 1.0: delta_2 = 2 + 0.9 - 0.3 = 2.6,
    # A_1 = -0.13 + 0.72 * 2.6 = 1.742, A_0 = 0.86 + 0.72 * 1.742 = 2.11424.
    adv, _ = gae(
        REWARD, VALUE, [0.4, 0.3, 1.0], [False, False, False], [False, False, True], GAMMA, LAM
    )
    np.testing.assert_allclose(adv, [2.11424, 1.742, 2.6], atol=1e-12)


def test_gae_does_not_leak_across_an_episode_boundary():
    # Episode ends (terminated) at t=0; t=1 starts a new one: A_0 is its own delta alone.
    adv, _ = gae([1.0, 5.0], [0.2, 0.0], [7.0, 0.0], [True, False], [True, False], GAMMA, LAM)
    np.testing.assert_allclose(adv, [0.8, 5.0], atol=1e-12)


def test_gae_runs_per_column():
    cols = gae(
        np.stack([REWARD, REWARD], 1), np.stack([VALUE, VALUE], 1),
        np.array([[0.4, 0.4], [0.3, 0.3], [9.9, 1.0]]),
        np.array([[0, 0], [0, 0], [1, 0]], bool), np.array([[0, 0], [0, 0], [1, 1]], bool),
        GAMMA, LAM,
    )[0]  # fmt: skip
    np.testing.assert_allclose(cols[:, 0], [1.64768, 1.094, 1.7], atol=1e-12)
    np.testing.assert_allclose(cols[:, 1], [2.11424, 1.742, 2.6], atol=1e-12)


def test_clipped_policy_loss_on_a_fixed_batch():
    # ratios 1.5, 0.5, 1.1, 0.7; advantages 1, 1, -1, -1; clip 0.2:
    # min(1.5, 1.2) = 1.2; min(0.5, 0.8) = 0.5; min(-1.1, -1.1) = -1.1; min(-0.7, -0.8) = -0.8
    # objective = (1.2 + 0.5 - 1.1 - 0.8) / 4 = -0.05, loss = 0.05
    old = torch.zeros(4)
    new = torch.log(torch.tensor([1.5, 0.5, 1.1, 0.7])).requires_grad_()
    adv = torch.tensor([1.0, 1.0, -1.0, -1.0])
    loss = clipped_policy_loss(new, old, adv, 0.2)
    assert loss.item() == pytest.approx(0.05, abs=1e-6)
    loss.backward()
    # The clipped terms (1 and 4) give no gradient; the others -ratio * A / 4.
    np.testing.assert_allclose(new.grad.numpy(), [0.0, -0.125, 0.275, 0.0], atol=1e-6)


def test_value_norm_matches_numpy_over_all_batches():
    rng = np.random.default_rng(0)
    batches = [rng.normal(3.0, 2.0, size=n) for n in (5, 17, 1, 40)]
    norm = ValueNorm()
    for b in batches:
        norm.update(b)
    allx = np.concatenate(batches)
    assert norm.mean == pytest.approx(allx.mean(), abs=1e-12)
    assert norm.std == pytest.approx(allx.std(), abs=1e-12)
    np.testing.assert_allclose(norm.denormalize(norm.normalize(allx)), allx, atol=1e-12)


def test_value_norm_of_a_constant_target_does_not_divide_by_zero():
    norm = ValueNorm()
    norm.update(np.full(10, 0.7))
    assert np.isfinite(norm.normalize(np.array([0.7, 1.0]))).all()


def _mixer(seed: int = 0) -> QMixer:
    return QMixer(3, 5, 8, torch.Generator().manual_seed(seed))


def test_reward_normaliser_in_one_call_gives_the_reference_floats():
    # A constant start (std 0: passed through), 200 small rewards, an outlier (5 / std 0.37)
    # clipped at 10, then spread; in two calls, the second from the state the first left.
    rewards = [-1.0, -1.0, -1.0] + [0.01 * (i % 2) for i in range(200)]
    rewards += [5.0, -1.25, 0.5, -2.25, 3.0, 1e-9]
    reference, fast = RunningNormaliser(), RunningNormaliser()
    expected = [reference(r) for r in rewards]
    got = normalise_in_turn(fast, rewards[:100]) + normalise_in_turn(fast, rewards[100:])
    assert got == expected  # the same floats, bit for bit
    assert got[:3] == [-1.0, -1.0, -1.0] and got[203] == 10.0
    assert (fast.count, fast.mean, fast._m2) == (reference.count, reference.mean, reference._m2)


def test_qmix_mixer_is_monotonic_in_every_agent_q():
    mixer = _mixer()
    g = torch.Generator().manual_seed(1)
    state = torch.randn(256, 5, generator=g) * 3
    q = (torch.randn(256, 3, generator=g) * 5).requires_grad_()
    q_tot = mixer(q, state)
    (grad,) = torch.autograd.grad(q_tot.sum(), q)
    assert (grad >= 0).all()  # Rashid et al. 2018, eq. 5
    # Raising any agent's Q never lowers Q_tot, in any state.
    bump = torch.rand(256, 3, generator=g) * 4
    with torch.no_grad():
        assert (mixer(q + bump, state) >= mixer(q, state) - 1e-6).all()


def test_qmix_greedy_joint_action_is_each_agents_greedy_action():
    # Monotonic mixing: argmax over joint actions of Q_tot = each agent's own argmax.
    mixer = _mixer(2)
    g = torch.Generator().manual_seed(3)
    state = torch.randn(1, 5, generator=g)
    q = torch.randn(3, 4, generator=g)  # 3 agents, 4 actions
    joint = torch.cartesian_prod(*[torch.arange(4)] * 3)  # [64, 3]
    with torch.no_grad():
        totals = mixer(q[torch.arange(3), joint], state.expand(64, 5))
    best = joint[totals.argmax()]
    assert best.tolist() == q.argmax(-1).tolist()


def test_vdn_mixer_is_the_sum():
    q = torch.tensor([[1.0, -2.0, 0.5]])
    assert VDNMixer()(q, torch.zeros(1, 0)).item() == pytest.approx(-0.5)


@pytest.mark.parametrize("kind", ["categorical", "q", "gaussian"])
def test_numpy_policy_equals_the_torch_network(kind):
    n_agents, obs_dim, act_dim = 3, 7, 4
    net = mlp(obs_dim + n_agents, act_dim, 16, 1.0, torch.Generator().manual_seed(4))
    policy = {"kind": kind, "layers": linear_layers(net), "n_agents": n_agents, "obs_dim": obs_dim}
    if kind == "gaussian":
        policy |= {"log_std": np.zeros(act_dim), "low": -np.ones(act_dim), "high": np.ones(act_dim)}
    np_policy = NumpyPolicy(policy_to_arrays(policy))
    rng = np.random.default_rng(5)
    obs = rng.normal(size=(10, obs_dim)).astype(np.float32)
    agent = rng.integers(0, n_agents, size=10)
    x = np.concatenate([obs, np.eye(n_agents, dtype=np.float32)[agent]], axis=1)
    with torch.no_grad():
        expected = net(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(np_policy.forward(obs, agent), expected, atol=1e-5)
    acts = np_policy.act(obs, agent)
    if kind == "gaussian":
        np.testing.assert_allclose(acts, np.clip(expected, -1, 1), atol=1e-5)
    else:
        np.testing.assert_array_equal(acts, expected.argmax(-1))


def test_direct_forwards_equal_the_layers_run_one_by_one():
    """MLP and QMixer call their operations directly: the same numbers, bit for bit, and the
    same gradients as running their modules in order, also after a state dict is loaded."""
    g = torch.Generator().manual_seed(3)
    net, other = mlp(7, 4, 16, 1.0, g), mlp(7, 4, 16, 1.0, g)
    net.load_state_dict(other.state_dict())  # loads in place: the direct path sees the new weights
    x = torch.randn(32, 7, generator=g)
    layered = x
    for m in other:
        layered = m(layered)
    assert torch.equal(net(x), layered)
    mixer = QMixer(3, 5, 8, g)
    q, s = torch.randn(16, 3, generator=g), torch.randn(16, 5, generator=g)
    w1 = mixer.hyper_w1(s).abs().view(-1, 3, 8)
    hidden = torch.nn.functional.elu(
        torch.bmm(q.view(-1, 1, 3), w1) + mixer.hyper_b1(s).view(-1, 1, 8)
    )
    ref = (
        torch.bmm(hidden, mixer.hyper_w2(s).abs().view(-1, 8, 1)) + mixer.hyper_b2(s).view(-1, 1, 1)
    ).view(-1)
    out = mixer(q, s)
    assert torch.equal(out, ref)
    out.sum().backward()
    direct = [p.grad.clone() for p in mixer.parameters()]
    mixer.zero_grad()
    ref.sum().backward()
    assert all(torch.equal(a, p.grad) for a, p in zip(direct, mixer.parameters(), strict=True))
