"""The environment's observations (and global state) as the networks' input vectors.

Each sample is flattened (``gymnasium.spaces.flatten``: a ``Discrete`` becomes a one-hot), each
feature with finite bounds scaled to [0, 1]; a sample that is not one of its space's (another
shape, a ``Discrete`` value out of range, a ``Dict`` missing a key, a feature outside its
finite bounds such as a ``MultiBinary`` 7) is an :class:`InputError` naming the space's role,
never a wrong input passed on.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from marlm.errors import InputError


class Flattener:
    """``space`` sample -> ``float32[flatdim]``, features with finite bounds scaled to [0, 1].

    Raises:
        InputError: a space that does not flatten to a vector (a ``Graph`` or ``Sequence`` in
            it), naming ``field`` (the space's role: ``observation_space``, ``state_space``);
            from a call, a sample that is not one of the space's (another shape, a
            ``Discrete`` value out of range or not whole, a structure that does not flatten, a
            feature outside its finite bounds by more than :attr:`TOLERANCE` of its range).
    """

    #: How far past a bound a feature may lie, as a share of its range (float rounding in the
    #: environment: 1.0000001 for a bound of 1 passes; a ``MultiBinary`` 7 does not).
    TOLERANCE = 1e-5

    def __init__(self, space: spaces.Space, field: str = "observation_space") -> None:
        self.space, self.field = space, field
        if not isinstance(space, spaces.Space):
            raise InputError(
                f"is {space!r:.60}, not a gymnasium space; return one (Box, Discrete, Dict, ...)",
                field=field,
            )
        flat = spaces.flatten_space(space)
        if not isinstance(flat, spaces.Box):
            raise InputError(
                f"{space} does not flatten to a vector of features (gymnasium.spaces."
                "flatten_space gives no Box for it); use spaces of fixed size",
                field=field,
            )
        low = np.asarray(flat.low, dtype=np.float64)
        high = np.asarray(flat.high, dtype=np.float64)
        bounded = np.isfinite(low) & np.isfinite(high) & (high > low)
        self.dim = int(flat.shape[0])
        self.low, self.high, self.bounded = low, high, bounded
        self.offset = np.where(bounded, low, 0.0).astype(np.float32)
        self.scale = np.where(bounded, 1.0 / np.where(bounded, high - low, 1.0), 1.0).astype(
            np.float32
        )
        # No feature bounded on both sides (MPE's observations): nothing to scale, and
        # ``(x - 0) * 1`` is ``x`` to the bit, so the sample is passed on as it is.
        self.scaled = bool(bounded.any())

    def __call__(self, x: Any) -> np.ndarray:
        if isinstance(self.space, spaces.Discrete):  # the one-hot of spaces.flatten, directly
            v = np.asarray(x)
            k = int(v) - int(self.space.start) if v.ndim == 0 and v.dtype.kind in "iu" else -1
            if not 0 <= k < self.dim:
                raise self._wrong(f"the value {x!r} (a whole number in its range is wanted)")
            flat = np.zeros(self.dim, dtype=np.float32)
            flat[k] = 1.0
            return flat
        box = isinstance(self.space, spaces.Box)
        try:
            flat = np.asarray(x if box else spaces.flatten(self.space, x), dtype=np.float32)
        except (KeyError, IndexError, TypeError, ValueError) as e:
            raise self._wrong(f"{x!r:.80} ({type(e).__name__}: {e})") from None
        if box and flat.shape != self.space.shape:
            raise self._wrong(f"a value of shape {flat.shape}")
        flat = flat.reshape(-1)
        if flat.shape[0] != self.dim:
            raise self._wrong(f"a sample of {flat.shape[0]} features ({self.dim} wanted)")
        if not self.scaled:
            return flat
        y = (flat - self.offset) * self.scale
        t = self.TOLERANCE
        outside = ((y < -t) | (y > 1.0 + t)) & self.bounded  # one mask, read once
        if outside.any():
            j = int(np.flatnonzero(outside)[0])
            raise self._wrong(
                f"{flat[j]:g} at feature {j}, outside its bounds [{self.low[j]:g}, "
                f"{self.high[j]:g}]"
            )
        return y

    def _wrong(self, what: str) -> InputError:
        return InputError(
            f"the environment returned {what} where its {self.field} is {self.space}: each value "
            f"must be one of the space's (fix the environment or its {self.field})",
            field=self.field,
        )


class ObservationEncoder:
    """An environment's observations as the networks' input, outside a training run.

    The encoding of :class:`marlm.rl.deep.common.VecParallelEnv`: each agent's observation
    flattened, features with finite bounds scaled to [0, 1], zero-padded to the widest agent's
    size; for acting with a trained :class:`marlm.rl.deep.policy.NumpyPolicy` in another loop
    (a controller, a benchmark).

    Args:
        env: a ParallelEnv of the kind trained on (its ``possible_agents`` and
            ``observation_space``).

    Raises:
        InputError: an observation space that does not flatten to a vector.
    """

    def __init__(self, env: Any) -> None:
        self.agents = list(env.possible_agents)
        self.index = {a: i for i, a in enumerate(self.agents)}
        self.flat = {a: Flattener(env.observation_space(a)) for a in self.agents}
        self.obs_dim = max(f.dim for f in self.flat.values())

    def __call__(self, obs: Any, agents: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """``obs[agent]`` for ``agents`` -> ``(float32[len(agents), obs_dim], int64[len(agents)])``,
        the encoded observations and each agent's index in ``possible_agents`` (its id input).

        Raises:
            KeyError: an agent that is not in ``possible_agents`` or not in ``obs``.
        """
        out = np.zeros((len(agents), self.obs_dim), dtype=np.float32)
        for j, a in enumerate(agents):
            x = self.flat[a](obs[a])
            out[j, : x.shape[0]] = x
        return out, np.array([self.index[a] for a in agents], dtype=np.int64)
