"""Worlds that agents act in: PettingZoo ParallelEnvs (Gymnasium Env for one agent).

``marlm.envs.WarehouseEnv`` is :class:`marlm.envs.warehouse.env.WarehouseEnv`, loaded on first
access (PEP 562), so importing one small env (``marlm.envs.grid``) does not load the warehouse.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from marlm.envs.warehouse import WarehouseEnv

__all__ = ["WarehouseEnv"]


def __getattr__(name: str) -> Any:
    if name == "WarehouseEnv":
        from marlm.envs.warehouse import WarehouseEnv

        return WarehouseEnv
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
