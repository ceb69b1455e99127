"""Learners with neural networks for any PettingZoo ParallelEnv, one readable file each.

- :mod:`marlm.rl.deep.common`: the run's settings (:class:`DeepConfig`), the environment seen
  as arrays (:class:`VecParallelEnv`: flat observations, agent-id inputs, masks for agents that
  have left), the per-episode logs.
- :mod:`marlm.rl.deep.ppo`: IPPO and MAPPO with parameter sharing (GAE, clipped objective, value
  normalisation; MAPPO's critic reads ``env.state()``), Categorical or Gaussian policies.
- :mod:`marlm.rl.deep.dqn`: parameter-shared DQN (target network, replay) with VDN or QMIX mixing.
- :mod:`marlm.rl.deep.run`: the training loop in chunks, checkpoints and resume.
- :mod:`marlm.rl.deep.policy`: the trained actor as a NumPy forward pass (no PyTorch import).
- :mod:`marlm.rl.deep.adapters`: Gymnasium envs with per-agent tuples (RWARE) as ParallelEnvs.

PyTorch is an optional extra (``pip install -e '.[deep]'``); only ``ppo``, ``dqn`` and ``run``
import it, and nothing imports them at start-up.
"""
