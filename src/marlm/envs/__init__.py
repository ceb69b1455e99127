"""Worlds that agents act in: PettingZoo ParallelEnvs (Gymnasium Env for one agent)."""

from marlm.envs.warehouse import WarehouseEnv  # noqa: F401  (public: marlm.envs.WarehouseEnv)
