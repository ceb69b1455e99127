"""A trained actor (or Q-network) as a NumPy forward pass: acting needs no PyTorch.

The run folder's ``tables.npz`` of a deep run holds the network as plain arrays
(:func:`policy_to_arrays`); :class:`NumpyPolicy` reads them and computes the same outputs as the
PyTorch network (tested to 1e-5). The first layer's weight is split into the observation part
and the agent-id part, so the one-hot id is a column lookup instead of a concatenation.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

KINDS = ("categorical", "gaussian", "q")


def policy_to_arrays(policy: dict[str, Any]) -> dict[str, np.ndarray]:
    """A learner's ``policy_arrays()`` -> flat arrays for ``np.savez`` (``policy/...``)."""
    out = {
        "policy/kind": np.array(policy["kind"]),
        "policy/n_agents": np.array(policy["n_agents"]),
        "policy/obs_dim": np.array(policy["obs_dim"]),
        "policy/n_layers": np.array(len(policy["layers"])),
    }
    for i, (w, b) in enumerate(policy["layers"]):
        out[f"policy/w{i}"], out[f"policy/b{i}"] = w, b
    for key in ("log_std", "low", "high"):
        if policy.get(key) is not None:
            out[f"policy/{key}"] = np.asarray(policy[key], dtype=np.float32)
    return out


class NumpyPolicy:
    """The actor's deterministic action (argmax of the logits or of Q; the Gaussian's mean,
    clipped to the action bounds), computed with NumPy.

    Args:
        arrays: the ``policy/...`` arrays of :func:`policy_to_arrays` (``tables.npz``).

    Raises:
        ValueError: the arrays are not a marlm policy (a missing key or an unknown kind).
    """

    def __init__(self, arrays: dict[str, np.ndarray]) -> None:
        try:
            self.kind = str(arrays["policy/kind"])
            self.n_agents = int(arrays["policy/n_agents"])
            self.obs_dim = int(arrays["policy/obs_dim"])
            n_layers = int(arrays["policy/n_layers"])
            layers = [
                (np.asarray(arrays[f"policy/w{i}"], np.float32), np.asarray(arrays[f"policy/b{i}"], np.float32))
                for i in range(n_layers)
            ]  # fmt: skip
        except KeyError as e:
            raise ValueError(f"not a marlm policy: missing {e.args[0]!r}") from e
        if self.kind not in KINDS:
            raise ValueError(f"unknown policy kind {self.kind!r}; expected one of {KINDS}")
        w0, b0 = layers[0]
        self.w0_obs = np.ascontiguousarray(w0[:, : self.obs_dim].T)  # [D, H]
        self.w0_id = np.ascontiguousarray(w0[:, self.obs_dim :].T)  # [N, H]
        self.b0 = b0
        self.rest = [(np.ascontiguousarray(w.T), b) for w, b in layers[1:]]
        self.low = arrays.get("policy/low")
        self.high = arrays.get("policy/high")
        if (self.low is None) != (self.high is None):
            raise ValueError("not a marlm policy: 'policy/low' and 'policy/high' come together")

    @classmethod
    def load(cls, path: str | Path) -> NumpyPolicy:
        """From a run folder's ``tables.npz`` (or any ``.npz`` with the ``policy/`` arrays)."""
        with np.load(path, allow_pickle=False) as data:
            return cls({k: data[k] for k in data.files})

    def forward(self, obs: np.ndarray, agent: np.ndarray) -> np.ndarray:
        """``obs float32[B, obs_dim]``, ``agent int[B]`` (index in ``possible_agents``) ->
        the network's output ``float32[B, A]`` (logits, Q-values or the Gaussian's mean)."""
        h = np.tanh(obs @ self.w0_obs + self.w0_id[agent] + self.b0)
        for i, (w, b) in enumerate(self.rest):
            h = h @ w + b
            if i < len(self.rest) - 1:
                h = np.tanh(h)
        return h

    def act(self, obs: np.ndarray, agent: np.ndarray) -> np.ndarray:
        """Deterministic actions: ``int64[B]`` (discrete) or ``float32[B, A]`` (Box, clipped)."""
        out = self.forward(obs, agent)
        if self.kind != "gaussian":
            return out.argmax(-1)
        if self.low is None or self.high is None:  # saved without bounds: both are absent
            return out
        return np.clip(out, self.low.ravel(), self.high.ravel())

    def sample(self, obs: np.ndarray, agent: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Stochastic actions of a Categorical policy, ``int64[B]``: each row drawn from the
        softmax of its logits with ``rng`` (the Gumbel-max trick, one ``rng.gumbel`` call).

        Raises:
            ValueError: the policy is not ``categorical`` (Q-networks and Gaussians have
                :meth:`act`).
        """
        if self.kind != "categorical":
            raise ValueError(f"sample needs a categorical policy, this one is {self.kind!r}")
        logits = self.forward(obs, agent).astype(np.float64)
        return (logits + rng.gumbel(size=logits.shape)).argmax(-1)
