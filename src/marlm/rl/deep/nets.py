"""PyTorch pieces the learners share: the MLP, its initialisation, state as NumPy arrays.

The MLP is CleanRL's (Huang et al. 2022, "CleanRL", ``ppo.py``'s ``layer_init``): two tanh
hidden layers, orthogonal weights (gain sqrt(2), the output layer's gain given), zero biases. The
weights are drawn from a ``torch.Generator`` seeded by the run, never from PyTorch's global
generator. Saving goes through NumPy arrays so that a checkpoint is the same ``.npz`` format as
the tabular learners' (:mod:`marlm.rl.checkpoint`).
"""

from __future__ import annotations

import contextlib
import math

import numpy as np
import torch
from torch import nn

#: CPU threads PyTorch may use: the machines this runs on are small and shared; a forward pass
#: of a 64-unit MLP gains nothing from more threads (docs/deep-rl.md, "Why PyTorch").
DEFAULT_THREADS = 1


def set_threads(n: int) -> None:
    """``torch.set_num_threads(n)`` (and one inter-op thread, set once per process)."""
    torch.set_num_threads(n)
    # Raises once set, or once work has started in this process: then it stays as it is.
    with contextlib.suppress(RuntimeError):
        torch.set_num_interop_threads(1)


class MLP(nn.Sequential):
    """``Linear - tanh - Linear - tanh - Linear`` as an ``nn.Sequential`` (its state-dict names,
    ``0.weight`` ... ``4.bias``), whose forward calls the three ``linear`` and two ``tanh``
    operations directly: the same operations on the same tensors, so the same numbers and the
    same autograd graph, without a module call per layer (about 15 microseconds a forward pass
    of the small networks here, where the learners make several a step).
    ``x float32[..., in]`` -> ``float32[..., out]``."""

    def __init__(self, n_in: int, n_out: int, hidden: int) -> None:
        super().__init__(
            nn.Linear(n_in, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(),
            nn.Linear(hidden, n_out),
        )  # fmt: skip
        # The Parameter objects themselves: loading a state dict copies into them in place.
        self._layers = tuple((m.weight, m.bias) for m in self if isinstance(m, nn.Linear))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        (w0, b0), (w1, b1), (w2, b2) = self._layers
        linear = nn.functional.linear
        return linear(torch.tanh(linear(torch.tanh(linear(x, w0, b0)), w1, b1)), w2, b2)


def mlp(n_in: int, n_out: int, hidden: int, out_gain: float, generator: torch.Generator) -> MLP:
    """``Linear(n_in, hidden) - tanh - Linear(hidden, hidden) - tanh - Linear(hidden, n_out)``,
    orthogonally initialised (gain sqrt(2) inside, ``out_gain`` on the output), biases 0."""
    net = MLP(n_in, n_out, hidden)
    layers = [m for m in net if isinstance(m, nn.Linear)]
    with torch.no_grad():
        for i, layer in enumerate(layers):
            gain = out_gain if i == len(layers) - 1 else math.sqrt(2)
            nn.init.orthogonal_(layer.weight, gain, generator=generator)
            layer.bias.zero_()
    return net


def module_arrays(prefix: str, module: nn.Module) -> dict[str, np.ndarray]:
    """The module's parameters and buffers as ``{prefix/name: float32 array}``."""
    return {
        f"{prefix}/{k}": v.detach().cpu().numpy().copy() for k, v in module.state_dict().items()
    }


def load_module_arrays(prefix: str, module: nn.Module, arrays: dict[str, np.ndarray]) -> None:
    """Load what :func:`module_arrays` wrote (shapes must match: same network)."""
    state = {k: torch.as_tensor(arrays[f"{prefix}/{k}"]) for k in module.state_dict()}
    module.load_state_dict(state)


def optimizer_arrays(prefix: str, opt: torch.optim.Optimizer) -> dict[str, np.ndarray]:
    """Adam's moments and step counts as arrays (``prefix/<param index>/<key>``)."""
    out = {}
    for idx, st in opt.state_dict()["state"].items():
        for key, value in st.items():
            out[f"{prefix}/{idx}/{key}"] = torch.as_tensor(value).cpu().numpy().copy()
    return out


def load_optimizer_arrays(prefix: str, opt: torch.optim.Optimizer, arrays: dict) -> None:
    """Load what :func:`optimizer_arrays` wrote into an optimizer over the same parameters."""
    sd = opt.state_dict()
    state: dict[int, dict[str, torch.Tensor]] = {}
    for name, value in arrays.items():
        if not name.startswith(prefix + "/"):
            continue
        idx, key = name[len(prefix) + 1 :].split("/")
        state.setdefault(int(idx), {})[key] = torch.as_tensor(value)
    sd["state"] = state
    opt.load_state_dict(sd)


def linear_layers(module: nn.Sequential) -> list[tuple[np.ndarray, np.ndarray]]:
    """``[(weight float32[out, in], bias float32[out]), ...]`` of an :func:`mlp`, in order."""
    return [
        (m.weight.detach().numpy().copy(), m.bias.detach().numpy().copy())
        for m in module
        if isinstance(m, nn.Linear)
    ]
