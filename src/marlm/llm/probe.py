"""A linear probe: multinomial logistic regression on a language model's hidden states.

A frozen model's representation of an input, read at one layer, is classified by a linear model
trained on labelled examples ("Understanding intermediate layers using linear classifier probes",
Alain and Bengio 2016). Here the features are standardised (zero mean, unit variance per
dimension, from the training set) and the weights minimise the mean cross-entropy plus an L2
penalty ``||W||^2 / (2 C n)`` (the bias is not penalised), which is scikit-learn's
``LogisticRegression(C=C)`` divided by ``n``; minimised by L-BFGS (Liu and Nocedal 1989,
``scipy.optimize.minimize``) from zero weights, so the result is deterministic.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.optimize import minimize

#: Inverse strength of the L2 penalty (scikit-learn's ``C``).
DEFAULT_C = 0.1


class LinearProbe:
    """Multinomial logistic regression on standardised features (module docstring).

    Args:
        X: ``float[n, d]`` training features.
        y: ``int[n]`` class indices in ``range(n_classes)``.
        n_classes: number of classes (a class without examples gets a low bias).
        C: inverse penalty strength (> 0).
        max_iter: L-BFGS iterations.

    Raises:
        ValueError: shapes disagree, no examples, a label out of range, or ``C <= 0``.
    """

    def __init__(
        self,
        X: np.ndarray,
        y: Sequence[int] | np.ndarray,
        n_classes: int,
        *,
        C: float = DEFAULT_C,
        max_iter: int = 500,
    ) -> None:
        X = np.asarray(X, dtype=np.float64)
        y = np.asarray(y, dtype=np.int64)
        if X.ndim != 2 or y.shape != (X.shape[0],) or X.shape[0] == 0:
            raise ValueError(f"need X[n, d] and y[n] with n > 0, got {X.shape} and {y.shape}")
        if y.min() < 0 or y.max() >= n_classes:
            raise ValueError(f"labels must be in range({n_classes})")
        if C <= 0:
            raise ValueError(f"C must be positive, got {C}")
        n, d = X.shape
        k = n_classes
        self.mean = X.mean(axis=0)
        self.scale = X.std(axis=0) + 1e-6
        Z = (X - self.mean) / self.scale
        Y = np.eye(k)[y]
        penalty = 1.0 / (C * n)

        def loss(w: np.ndarray) -> tuple[float, np.ndarray]:
            W, b = w[: d * k].reshape(d, k), w[d * k :]
            S = Z @ W + b
            S -= S.max(axis=1, keepdims=True)
            logp = S - np.log(np.exp(S).sum(axis=1, keepdims=True))
            G = (np.exp(logp) - Y) / n
            value = -float(np.sum(Y * logp)) / n + 0.5 * penalty * float(np.sum(W * W))
            grad = np.concatenate([(Z.T @ G + penalty * W).ravel(), G.sum(axis=0)])
            return value, grad

        r = minimize(loss, np.zeros(d * k + k), jac=True, method="L-BFGS-B",
                     options={"maxiter": max_iter})  # fmt: skip
        self.weights = r.x[: d * k].reshape(d, k)
        self.bias = r.x[d * k :]
        self.n_classes = k

    def state(self) -> dict[str, np.ndarray]:
        """The fitted parameters: ``mean`` and ``scale`` (``float64[d]``), ``weights``
        (``float64[d, n_classes]``) and ``bias`` (``float64[n_classes]``), for
        :meth:`from_state`."""
        return {"mean": self.mean, "scale": self.scale, "weights": self.weights, "bias": self.bias}

    @classmethod
    def from_state(cls, state: dict[str, np.ndarray]) -> LinearProbe:
        """A probe with the parameters :meth:`state` gave, without training.

        Raises:
            ValueError: shapes that disagree, or a value that is not finite.
        """
        mean, scale, weights, bias = (np.asarray(state[k], dtype=np.float64)
                                      for k in ("mean", "scale", "weights", "bias"))  # fmt: skip
        d = mean.shape[0] if mean.ndim == 1 else -1
        if scale.shape != (d,) or weights.ndim != 2 or weights.shape[0] != d:
            raise ValueError(f"bad probe shapes {mean.shape}, {scale.shape}, {weights.shape}")
        if bias.shape != (weights.shape[1],):
            raise ValueError(f"bias {bias.shape} does not match weights {weights.shape}")
        if not all(np.isfinite(a).all() for a in (mean, scale, weights, bias)):
            raise ValueError("a probe parameter is not finite")
        probe = cls.__new__(cls)
        probe.mean, probe.scale, probe.weights, probe.bias = mean, scale, weights, bias
        probe.n_classes = weights.shape[1]
        return probe

    def log_proba(self, X: np.ndarray) -> np.ndarray:
        """``float64[n, n_classes]``: log class probabilities of the rows of ``X`` (``float[n, d]``)."""
        S = ((np.asarray(X, dtype=np.float64) - self.mean) / self.scale) @ self.weights + self.bias
        S -= S.max(axis=1, keepdims=True)
        return S - np.log(np.exp(S).sum(axis=1, keepdims=True))


__all__ = ["DEFAULT_C", "LinearProbe"]
