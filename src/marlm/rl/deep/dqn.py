"""Parameter-shared DQN with a target network and replay, alone or with VDN or QMIX mixing,
in the manner of CleanRL's ``dqn.py``.

One Q-network ``Q(o_i, id_i, .)`` serves every agent (discrete actions only). Three targets:

- ``dqn``: each agent learns its own ``Q_i`` from its own reward (independent learners with
  shared parameters; Mnih et al. 2015, "Human-level control through deep reinforcement
  learning", Methods: target network and experience replay; Tan 1993 for independent learners).
- ``dqn-vdn``: the team's ``Q_tot`` is the sum of the agents' ``Q_i`` (Sunehag et al. 2018,
  "Value-Decomposition Networks for Cooperative Multi-Agent Learning", section 3).
- ``qmix``: ``Q_tot`` is a monotonic mix of the ``Q_i`` whose weights are made from the global
  state by hypernetworks and kept non-negative (Rashid et al. 2018, "QMIX: Monotonic Value
  Function Factorisation for Deep Multi-Agent Reinforcement Learning", section 4.2), so that
  each agent's greedy action is the team's greedy action.

The team reward of a joint step is the shared reward when every agent gets it
(``DeepConfig.shared_reward``: the agents' mean, which is that reward) and otherwise the sum of
the agents' rewards. An agent that has left the episode adds nothing: its ``Q_i`` is masked to 0.
Feed-forward agents on transitions, not the paper's recurrent agents on episodes: the tasks
here are fully observed or nearly so (docs/deep-rl.md says so where it matters).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from torch import nn

from marlm.rl.deep.common import DeepConfig, EnvShape, VecParallelEnv
from marlm.rl.deep.nets import (
    linear_layers,
    load_module_arrays,
    load_optimizer_arrays,
    mlp,
    module_arrays,
    optimizer_arrays,
    set_threads,
)
from marlm.rl.normalise import RunningNormaliser

# --------------------------------------------------------------------------------------------
# Mixers
# --------------------------------------------------------------------------------------------


class VDNMixer(nn.Module):
    """``Q_tot = sum_i Q_i`` (Sunehag et al. 2018, eq. 1). ``q float32[B, N]`` -> ``float32[B]``."""

    def forward(self, q: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        del state
        return q.sum(-1)


class QMixer(nn.Module):
    """QMIX's mixing network (Rashid et al. 2018, section 4.2, figure 2a).

        W1 = |hyper_w1(s)|  [N, E]     b1 = hyper_b1(s)  [E]
        h  = elu(q @ W1 + b1)
        W2 = |hyper_w2(s)|  [E, 1]     b2 = V(s) = hyper_b2(s), two layers with ReLU
        Q_tot = h @ W2 + b2

    The absolute values keep every ``dQ_tot/dQ_i >= 0`` (the monotonicity constraint, eq. 5),
    whatever the state. ``q float32[B, N]``, ``state float32[B, S]`` -> ``float32[B]``.
    """

    def __init__(self, n_agents: int, state_dim: int, embed: int, generator: torch.Generator):
        super().__init__()
        self.n, self.embed = n_agents, embed
        self.hyper_w1 = nn.Linear(state_dim, n_agents * embed)
        self.hyper_b1 = nn.Linear(state_dim, embed)
        self.hyper_w2 = nn.Linear(state_dim, embed)
        self.hyper_b2 = nn.Sequential(nn.Linear(state_dim, embed), nn.ReLU(), nn.Linear(embed, 1))
        with torch.no_grad():
            for m in self.modules():
                if isinstance(m, nn.Linear):
                    bound = 1.0 / np.sqrt(m.in_features)
                    m.weight.uniform_(-bound, bound, generator=generator)
                    m.bias.uniform_(-bound, bound, generator=generator)
        # The Parameter objects (a state dict loads into them in place), in forward's order.
        v1, v2 = (m for m in self.hyper_b2 if isinstance(m, nn.Linear))
        mods = (self.hyper_w1, self.hyper_b1, self.hyper_w2, v1, v2)
        self._layers = tuple((m.weight, m.bias) for m in mods)

    def forward(self, q: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        # The layers' operations called directly (as MLP does): the same numbers, no module call.
        linear, n, e = nn.functional.linear, self.n, self.embed
        (w1_w, w1_b), (b1_w, b1_b), (w2_w, w2_b), (v1_w, v1_b), (v2_w, v2_b) = self._layers
        w1 = linear(state, w1_w, w1_b).abs().view(-1, n, e)
        b1 = linear(state, b1_w, b1_b).view(-1, 1, e)
        hidden = nn.functional.elu(torch.bmm(q.view(-1, 1, n), w1) + b1)
        w2 = linear(state, w2_w, w2_b).abs().view(-1, e, 1)
        b2 = linear(torch.relu(linear(state, v1_w, v1_b)), v2_w, v2_b).view(-1, 1, 1)
        return (torch.bmm(hidden, w2) + b2).view(-1)


def normalise_in_turn(norm: RunningNormaliser, rewards: list[float]) -> list[float]:
    """``[norm(r) for r in rewards]``, the same float operations in the same order (Welford's
    update, then ``r / std`` clipped), with the normaliser's fields held in locals: the training
    loop calls it once a step of all copies instead of once an agent and copy.

    :class:`RunningNormaliser` is the reference; a test checks that both give the same floats
    and leave the normaliser in the same state."""
    count, mean, m2 = norm.count, norm.mean, norm._m2
    clip, min_std = norm.clip, norm.min_std
    out = []
    for r in rewards:
        count += 1
        delta = r - mean
        mean += delta / count
        m2 += delta * (r - mean)
        std = math.sqrt(m2 / count) if count > 1 else 0.0
        scale = std if std > min_std else 1.0
        out.append(min(clip, max(-clip, r / scale)))
    norm.count, norm.mean, norm._m2 = count, mean, m2
    return out


# --------------------------------------------------------------------------------------------
# Replay
# --------------------------------------------------------------------------------------------


class Replay:
    """A ring buffer of joint transitions (Lin 1992; Mnih et al. 2015), arrays by name.

    ``obs``/``next_obs float32[C, N, D]``, ``state``/``next_state float32[C, S]``,
    ``actions int64[C, N]``, ``reward float32[C, N]`` (each agent's, normalised),
    ``team float32[C]``, ``terminated bool[C, N]``, ``alive``/``next_alive bool[C, N]``.
    """

    FIELDS = ("obs", "next_obs", "state", "next_state", "actions", "reward", "team",
              "terminated", "alive", "next_alive")  # fmt: skip

    def __init__(self, capacity: int, n: int, obs_dim: int, state_dim: int) -> None:
        c = capacity
        self.data: dict[str, np.ndarray] = {
            "obs": np.zeros((c, n, obs_dim), np.float32), "next_obs": np.zeros((c, n, obs_dim), np.float32),
            "state": np.zeros((c, state_dim), np.float32), "next_state": np.zeros((c, state_dim), np.float32),
            "actions": np.zeros((c, n), np.int64), "reward": np.zeros((c, n), np.float32),
            "team": np.zeros(c, np.float32), "terminated": np.zeros((c, n), bool),
            "alive": np.zeros((c, n), bool), "next_alive": np.zeros((c, n), bool),
        }  # fmt: skip
        self.capacity, self.pos, self.size = c, 0, 0

    def add(self, rows: dict[str, np.ndarray]) -> None:
        """Append ``rows`` (each field with a leading batch axis)."""
        b = len(rows["team"])
        # A slice where the rows do not wrap (nearly always): the same rows, no index array.
        idx: slice | np.ndarray = slice(self.pos, self.pos + b)
        if self.pos + b > self.capacity:
            idx = (self.pos + np.arange(b)) % self.capacity
        for k in self.FIELDS:
            self.data[k][idx] = rows[k]
        self.pos = int((self.pos + b) % self.capacity)
        self.size = int(min(self.size + b, self.capacity))

    def sample(self, batch: int, rng: np.random.Generator) -> dict[str, torch.Tensor]:
        idx = rng.integers(0, self.size, size=batch)
        return {k: torch.from_numpy(self.data[k][idx]) for k in self.FIELDS}


# --------------------------------------------------------------------------------------------
# The learner
# --------------------------------------------------------------------------------------------


class DQNLearner:
    """Parameter-shared DQN; ``config.learner`` picks the mixer (``dqn``: none, ``dqn-vdn``,
    ``qmix``). Q-network input ``float32[obs_dim + N]`` (observation, agent id one-hot).

    Raises:
        ValueError: a ``Box`` action space (value-based learners need discrete actions; the CLI
            checks this first and names ``--learner``).
    """

    def __init__(self, shape: EnvShape, config: DeepConfig) -> None:
        if not shape.discrete:
            raise ValueError("DQN, VDN and QMIX need a Discrete action space")
        set_threads(config.threads)
        self.shape, self.config = shape, config
        #: Steps the exploration schedule spans (``config.steps``; a resumed run's is the first's).
        self.schedule_steps = config.steps
        self.n = len(shape.agents)
        self.eye = np.eye(self.n, dtype=np.float32)
        # QMIX's hypernetworks read the global state, or all observations without state().
        self.state_dim = shape.state_dim if shape.state_dim else self.n * shape.obs_dim
        g = torch.Generator().manual_seed(config.seed)
        self.q = mlp(shape.obs_dim + self.n, shape.n_actions, config.hidden, 1.0, g)
        self.q_target = mlp(shape.obs_dim + self.n, shape.n_actions, config.hidden, 1.0, g)
        self.q_target.load_state_dict(self.q.state_dict())
        # (mixer, target mixer): QMIX's two hypernetwork mixers, VDN's sum (one module, nothing
        # to learn), or None for dqn (each agent's own TD error).
        self.mixers: tuple[nn.Module, nn.Module] | None = None
        if config.learner == "qmix":
            mixer = QMixer(self.n, self.state_dim, config.mixer_embed, g)
            mixer_target = QMixer(self.n, self.state_dim, config.mixer_embed, g)
            mixer_target.load_state_dict(mixer.state_dict())
            self.mixers = (mixer, mixer_target)
        elif config.learner == "dqn-vdn":
            vdn = VDNMixer()
            self.mixers = (vdn, vdn)
        params = list(self.q.parameters()) + (
            list(self.mixers[0].parameters()) if self.mixers is not None else []
        )
        self.params = params
        # foreach: Adam's update as one call per operation over all the parameters, the same
        # arithmetic as PyTorch's CPU default (a Python loop over them), bit for bit; a QMIX
        # update on simple_spread (batch 64) takes 1.95 ms instead of 2.10.
        self.opt = torch.optim.Adam(params, lr=config.effective_lr, foreach=True)
        self.replay = Replay(config.buffer, self.n, shape.obs_dim, self.state_dim)
        self.reward_norm = RunningNormaliser()
        self.steps = 0  # joint steps taken (the epsilon schedule's clock)
        self.updates = 0

    def _learned_mixers(self) -> tuple[nn.Module, nn.Module] | None:
        """QMIX's mixer and target mixer, whose weights are learned and saved; None otherwise."""
        if self.mixers is not None and isinstance(self.mixers[0], QMixer):
            return self.mixers
        return None

    def _input(self, obs: np.ndarray) -> np.ndarray:
        ids = np.broadcast_to(self.eye, (*obs.shape[:-2], self.n, self.n))
        return np.concatenate([obs, ids], axis=-1)

    def _mix_state(self, obs: np.ndarray, state: np.ndarray) -> np.ndarray:
        if self.shape.state_dim:
            return state
        return obs.reshape(*obs.shape[:-2], self.n * obs.shape[-1])

    def epsilon(self) -> float:
        """Linear from ``eps_start`` to ``eps_end`` over ``eps_fraction`` of
        :attr:`schedule_steps` (the run's steps; a resumed run keeps the schedule it started
        with, so a larger ``--steps`` does not raise exploration again)."""
        cfg = self.config
        span = max(1.0, cfg.eps_fraction * self.schedule_steps)
        frac = min(1.0, self.steps / span)
        return cfg.eps_start + frac * (cfg.eps_end - cfg.eps_start)

    @torch.no_grad()
    def act(self, obs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Epsilon-greedy joint actions ``int64[K, N]`` for ``obs float32[K, N, obs_dim]``."""
        q = self.q(torch.from_numpy(self._input(obs))).numpy()
        greedy = q.argmax(-1)
        explore = rng.random(greedy.shape) < self.epsilon()
        random = rng.integers(0, self.shape.n_actions, size=greedy.shape)
        return np.where(explore, random, greedy).astype(np.int64)

    def _team_reward(self, reward: np.ndarray, alive: np.ndarray) -> np.ndarray:
        total = (reward * alive).sum(-1)
        if self.config.shared_reward:
            return total / np.maximum(alive.sum(-1), 1)
        return total

    def update(self, rng: np.random.Generator) -> float:
        """One gradient step on a replayed batch; returns the mean squared TD error."""
        cfg = self.config
        b = self.replay.sample(cfg.batch, rng)
        x = torch.from_numpy(self._input(b["obs"].numpy()))
        x_next = torch.from_numpy(self._input(b["next_obs"].numpy()))
        alive, next_alive = b["alive"].float(), b["next_alive"].float()
        q_taken = self.q(x).gather(-1, b["actions"].unsqueeze(-1)).squeeze(-1) * alive
        with torch.no_grad():
            # Double Q-learning (van Hasselt et al. 2016, eq. 4; PyMARL's QMIX default): the
            # online network picks each agent's next action, the target network values it.
            a_next = self.q(x_next).argmax(-1, keepdim=True)
            q_next = self.q_target(x_next).gather(-1, a_next).squeeze(-1) * next_alive
        if self.mixers is None:
            # Per agent (Mnih et al. 2015): y_i = r_i + gamma * (1 - terminated_i) * Q'(o'_i, a'_i)
            not_terminated = 1.0 - b["terminated"].float()
            td_target = b["reward"] + cfg.gamma * not_terminated * q_next
            td_error = (q_taken - td_target) * alive
            loss = (td_error**2).sum() / alive.sum().clamp(min=1.0)
        else:
            # Team (Sunehag et al. 2018; Rashid et al. 2018 eq. 6):
            # y = r_team + gamma * (1 - terminated) * Q'_tot(Q'(o'_i, a'_i) for each i, s')
            # The team's episode ends when no agent would act again (all terminated).
            team_terminated = (next_alive.sum(-1) == 0).float()
            mixer, mixer_target = self.mixers
            with torch.no_grad():
                q_tot_next = mixer_target(q_next, b["next_state"])
            td_target = b["team"] + cfg.gamma * (1.0 - team_terminated) * q_tot_next
            td_error = mixer(q_taken, b["state"]) - td_target
            loss = (td_error**2).mean()
        for p in self.params:  # Optimizer.zero_grad()'s set_to_none, without its wrappers
            p.grad = None
        loss.backward()
        nn.utils.clip_grad_norm_(self.params, 10.0)
        self.opt.step()
        self.updates += 1
        if self.updates % cfg.target_every == 0:  # hard copy (Mnih et al. 2015)
            self.q_target.load_state_dict(self.q.state_dict())
            if (learned := self._learned_mixers()) is not None:
                learned[1].load_state_dict(learned[0].state_dict())
        return loss.item()

    def train_steps(self, vec: VecParallelEnv, rng: np.random.Generator, steps: int) -> dict:
        """Act, store and learn until ``steps`` joint steps are done: one gradient step per
        step of all copies once ``learning_starts`` steps are stored."""
        cfg = self.config
        losses = []
        left = steps
        while left > 0:
            actions = self.act(vec.obs, rng)
            s = vec.step(actions)
            reward = s["reward"].astype(np.float64)
            if cfg.reward_norm:  # each acting agent's reward, copy by copy, agent by agent
                alive = s["alive"]
                reward[alive] = normalise_in_turn(self.reward_norm, reward[alive].tolist())
            self.replay.add({
                "obs": s["obs"], "next_obs": s["next_obs"],
                "state": self._mix_state(s["obs"], s["state"]),
                "next_state": self._mix_state(s["next_obs"], s["next_state"]),
                "actions": actions, "reward": reward, "team": self._team_reward(reward, s["alive"]),
                "terminated": s["terminated"], "alive": s["alive"], "next_alive": s["next_alive"],
            })  # fmt: skip
            self.steps += vec.num_envs
            left -= vec.num_envs
            if self.steps >= cfg.learning_starts and self.replay.size >= cfg.batch:
                losses.append(self.update(rng))
        return {"losses/td_error": float(np.mean(losses)) if losses else float("nan"),
                "charts/epsilon": self.epsilon()}  # fmt: skip

    # -- state --------------------------------------------------------------------------------

    def state_arrays(self) -> dict[str, np.ndarray]:
        """Weights (online and target), Adam's moments, the replay buffer, the counters."""
        out = {**module_arrays("q", self.q), **module_arrays("q_target", self.q_target)}
        if (learned := self._learned_mixers()) is not None:
            out.update(module_arrays("mixer", learned[0]))
            out.update(module_arrays("mixer_target", learned[1]))
        out.update(optimizer_arrays("adam", self.opt))
        out.update({f"replay/{k}": v for k, v in self.replay.data.items()})
        rn = self.reward_norm
        out["counters"] = np.array(
            [
                self.replay.pos,
                self.replay.size,
                self.steps,
                self.updates,
                rn.count,
                rn.mean,
                rn._m2,
            ],
            dtype=np.float64,
        )
        return out

    def load_state_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        load_module_arrays("q", self.q, arrays)
        load_module_arrays("q_target", self.q_target, arrays)
        if (learned := self._learned_mixers()) is not None:
            load_module_arrays("mixer", learned[0], arrays)
            load_module_arrays("mixer_target", learned[1], arrays)
        load_optimizer_arrays("adam", self.opt, arrays)
        for k in Replay.FIELDS:
            self.replay.data[k][:] = arrays[f"replay/{k}"]
        c = arrays["counters"]
        self.replay.pos, self.replay.size = int(c[0]), int(c[1])
        self.steps, self.updates = int(c[2]), int(c[3])
        self.reward_norm.count, self.reward_norm.mean = int(c[4]), float(c[5])
        self.reward_norm._m2 = float(c[6])

    def policy_arrays(self) -> dict[str, Any]:
        """The Q-network for :class:`marlm.rl.deep.policy.NumpyPolicy` (greedy: argmax Q)."""
        return {
            "kind": "q",
            "layers": linear_layers(self.q),
            "n_agents": self.n,
            "obs_dim": self.shape.obs_dim,
        }
