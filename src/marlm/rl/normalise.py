"""Reward normalisation that keeps the sign and never divides by zero.

- :class:`RangeNormaliser`: maps a known reward range onto [-1, 1] by dividing by the largest
  absolute bound, ``r / max(|low|, |high|)``: zero stays zero and the sign is kept (centring the
  range instead would turn a small negative step cost into a positive reward).
- :class:`RunningNormaliser`: divides by the running standard deviation (Welford 1962), without
  subtracting the mean, as Stable-Baselines3's ``VecNormalize`` does for rewards; while the spread
  is below ``min_std`` (e.g. a constant reward) the scale is 1, so a constant reward passes through
  unchanged: no NaN, no sign flip. The result is clipped to ``[-clip, clip]``.
"""

from __future__ import annotations

import math

from marlm.errors import InputError


class RangeNormaliser:
    """``r -> clip(r / max(|low|, |high|), -1, 1)`` for rewards known to lie in [low, high]."""

    def __init__(self, low: float, high: float) -> None:
        if (
            not (math.isfinite(low) and math.isfinite(high))
            or low > high
            or max(abs(low), abs(high)) == 0
        ):
            raise InputError(
                f"reward range [{low}, {high}] must be finite with low <= high and not both 0",
                field="reward_range",
            )
        self.scale = max(abs(low), abs(high))

    def __call__(self, reward: float) -> float:
        return min(1.0, max(-1.0, reward / self.scale))


class RunningNormaliser:
    """``r -> clip(r / std, -clip, clip)`` with the running std of all rewards seen (incl. ``r``)."""

    def __init__(self, clip: float = 10.0, min_std: float = 1e-8) -> None:
        self.clip = clip
        self.min_std = min_std
        self.count = 0
        self.mean = 0.0
        self._m2 = 0.0

    @property
    def std(self) -> float:
        return math.sqrt(self._m2 / self.count) if self.count > 1 else 0.0

    def update(self, reward: float) -> None:
        """Welford's online update of the mean and variance."""
        self.count += 1
        delta = reward - self.mean
        self.mean += delta / self.count
        self._m2 += delta * (reward - self.mean)

    def __call__(self, reward: float) -> float:
        self.update(reward)
        std = self.std
        scale = std if std > self.min_std else 1.0
        return min(self.clip, max(-self.clip, reward / scale))
