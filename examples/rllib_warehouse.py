"""Train the warehouse robots with RLlib's PPO through its PettingZoo wrapper.

The marlm :class:`~marlm.envs.warehouse.WarehouseEnv` is a PettingZoo ``ParallelEnv``, so RLlib
takes it as it is: ``ParallelPettingZooEnv(WarehouseEnv(...))``. All robots share one policy
(parameter sharing, Gupta et al. 2017), trained with PPO (Schulman et al. 2017, "Proximal Policy
Optimization Algorithms") for a few iterations. This is a wiring example, not a tuned run: the
tabular executor (``marlm train warehouse``) is what the hybrid controller uses.

Needs RLlib and a deep-learning backend, which marlm does not install:

    pip install "ray[rllib]>=2.60" torch

Run (a few minutes on 2 cores):

    python examples/rllib_warehouse.py --iterations 3

``tests/scale/test_rllib_example.py`` runs it with one iteration when ``MARLM_SLOW=1``.
"""

from __future__ import annotations

import argparse
import json


def build_config(layout: str = "small", max_steps: int = 100, seed: int = 0):
    """A PPO config on the warehouse, one policy shared by every robot, local sampling."""
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec
    from ray.rllib.env.wrappers.pettingzoo_env import ParallelPettingZooEnv
    from ray.tune.registry import register_env

    from marlm.envs.warehouse import WarehouseEnv

    def make_env(env_config):
        env = WarehouseEnv(
            layout=env_config.get("layout", layout),
            n_orders=20,
            max_steps=env_config.get("max_steps", max_steps),
            seed=env_config.get("seed", seed),
        )
        return ParallelPettingZooEnv(env)

    register_env("marlm_warehouse", make_env)
    return (
        PPOConfig()
        .environment("marlm_warehouse", env_config={"layout": layout, "max_steps": max_steps})
        .framework("torch")
        .env_runners(num_env_runners=0, rollout_fragment_length="auto")
        .multi_agent(
            policies={"shared"},
            policy_mapping_fn=lambda agent_id, episode, **kwargs: "shared",
        )
        .rl_module(rl_module_spec=MultiRLModuleSpec(rl_module_specs={"shared": RLModuleSpec()}))
        .training(train_batch_size_per_learner=800, minibatch_size=200, num_epochs=2, lr=3e-4)
        .debugging(seed=seed)
    )


def train(iterations: int = 3, layout: str = "small", max_steps: int = 100, seed: int = 0):
    """Run PPO for ``iterations``; return one summary dict per iteration."""
    import ray

    started = not ray.is_initialized()
    if started:
        ray.init(
            num_cpus=2,
            include_dashboard=False,
            object_store_memory=100 * 2**20,
            log_to_driver=False,
        )
    try:
        algo = build_config(layout, max_steps, seed).build_algo()
        rows = []
        for i in range(iterations):
            result = algo.train()
            runners = result.get("env_runners", {})
            rows.append(
                {
                    "iteration": i + 1,
                    "episode_return_mean": runners.get("episode_return_mean"),
                    "env_steps": result.get("num_env_steps_sampled_lifetime")
                    or runners.get("num_env_steps_sampled_lifetime"),
                }
            )
        algo.stop()
        return rows
    finally:
        if started:
            ray.shutdown()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--layout", default="small")
    parser.add_argument("--max-steps", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    a = parser.parse_args()
    for row in train(a.iterations, a.layout, a.max_steps, a.seed):
        print(json.dumps(row, default=float))
