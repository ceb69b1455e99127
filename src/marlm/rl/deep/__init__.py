"""Learners with neural networks for any PettingZoo ParallelEnv, one readable file each.

- :mod:`marlm.rl.deep.common`: the run's settings (:class:`DeepConfig`), the environment seen
  as arrays (:class:`VecParallelEnv`: flat observations, agent-id inputs, masks for agents that
  have left), the per-episode logs.
- :mod:`marlm.rl.deep.settings`: how each setting is named on the command line (its own option,
  or ``--set FIELD=VALUE``), so every error names words the user can type.
- :mod:`marlm.rl.deep.ppo`: IPPO and MAPPO with parameter sharing (GAE, clipped objective, value
  normalisation; MAPPO's critic reads ``env.state()``), Categorical or Gaussian policies.
- :mod:`marlm.rl.deep.dqn`: parameter-shared DQN (target network, replay) with VDN or QMIX mixing.
- :mod:`marlm.rl.deep.run`: the training loop in chunks, checkpoints and resume.
- :mod:`marlm.rl.deep.policy`: the trained actor as a NumPy forward pass (no PyTorch import).
- :mod:`marlm.rl.deep.adapters`: Gymnasium envs with per-agent tuples (RWARE) as ParallelEnvs.

PyTorch is an optional extra (``pip install -e '.[deep]'``); only ``ppo``, ``dqn`` and ``run``
import it, and nothing imports them at start-up.
"""

#: ``DeepConfig.steps`` and ``marlm train env --steps`` by default: joint environment steps.
DEFAULT_STEPS = 200_000
#: ``marlm train race --steps`` by default for a network learner (GridRace learns in fewer).
RACE_STEPS = 100_000

#: ``--envs`` / ``DeepConfig.num_envs`` at most: copies of the environment held in memory at once.
#: Measured on ``marlm train race --learner mappo`` (GridRace's default size, 64-step rollouts):
#: about 26 KB a copy above a 0.45 GB base, so 100,000 copies take about 3 GB; a WarehouseEnv copy
#: is about 70 KB alone (7 GB), both well within a 24 GiB machine. 10**8 ran for ever.
MAX_ENVS = 100_000
