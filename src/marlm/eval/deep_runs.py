"""Run folders of the deep learners (``marlm train race --learner mappo|ippo|qmix|dqn-vdn|dqn``,
``marlm train env MODULE:FACTORY``): the same files as the tabular runs, so ``marlm report`` and
``marlm diagnose`` read them.

- ``tables.npz``: the trained actor (or Q-network) as ``policy/...`` arrays, for
  :class:`marlm.rl.deep.policy.NumpyPolicy` (acting needs no PyTorch);
- ``episodes.npz``: per-episode logs (:data:`marlm.rl.deep.episodes.EPISODE_FIELDS`);
- ``metrics.json``: :func:`marlm.rl.deep.run.deep_metrics`;
- ``curves.png``: each agent's own return per episode and the team curve, labelled
  ``team (sum of N agents)`` (not with ``plot=False``);
- ``findings.json``: the lazy-agent detector's findings (:mod:`marlm.eval.diagnose`).

The non-stationarity detector needs a second run against a frozen partner
(``fixed_partner.npz`` of the tabular race); deep runs do not make one.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from marlm.eval.diagnose import ENV_REMEDY, RACE_REMEDY, Finding, detect_lazy_agent
from marlm.rl.deep.common import DeepConfig, ReachedFn
from marlm.rl.deep.policy import policy_to_arrays
from marlm.rl.deep.run import DeepResult, curve_window, deep_metrics, train_deep


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    tmp.replace(path)


def deep_findings(res: DeepResult, *, reached: bool) -> list[Finding]:
    """The lazy-agent detector on a deep run's logs (``reached`` when the run logged it)."""
    ep = res.episodes
    if len(res.agents) < 2 or len(ep["length"]) < 2:
        return []
    return detect_lazy_agent(
        ep["team_return"], ep["own_return"], res.agents,
        reached=ep["reached"] if reached else None,
        action_counts=ep["action_counts"] if res.shape.discrete else None,
        remedy=RACE_REMEDY if reached else ENV_REMEDY,  # train race logs arrivals, train env not
    )  # fmt: skip


def save_deep_run(
    res: DeepResult,
    out: str | Path,
    findings: list[Finding] | None,
    *,
    reached: bool = False,
    plot: bool = True,
    title: str | None = None,
) -> dict[str, Any]:
    """Write the run folder of a deep run (see the module); returns its metrics. ``findings``
    None: the detectors were not run, and no ``findings.json`` is written (a report then says
    the run has no diagnostics, not that none fired)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    # allow_pickle named (numpy's default) so that no array's name can stand for it
    np.savez(out / "tables.npz", allow_pickle=True, **policy_to_arrays(res.policy))
    np.savez(out / "episodes.npz", allow_pickle=True, **res.episodes)
    metrics = deep_metrics(res, reached=reached)
    _write_json(out / "metrics.json", metrics)
    n = len(res.episodes["length"])
    if plot and n:
        from marlm.eval.plots import plot_reward_curves

        own = res.episodes["own_return"]
        plot_reward_curves(
            {a: own[:, i] for i, a in enumerate(res.agents)}, out / "curves.png", team="sum",
            smooth=max(1, curve_window(n) // 5), xlabel="episode",
            title=title or f"{res.shape.name} {res.config.learner}: own return per agent",
        )  # fmt: skip
    if findings is not None:  # None: the detectors were not run (--no-diagnose)
        _write_json(out / "findings.json", [f.to_dict() for f in findings])
    return metrics


def run_deep(
    env_fn: Callable[[], Any],
    config: DeepConfig,
    out: str | Path,
    *,
    reached_fn: ReachedFn | None = None,
    diagnose: bool = True,
    plot: bool = True,
    title: str | None = None,
    **kwargs: Any,
) -> tuple[DeepResult, dict[str, Any], list[Finding]]:
    """Train a deep learner, run the lazy-agent detector, write the run folder.

    ``kwargs`` go to :func:`marlm.rl.deep.run.train_deep` (progress, checkpoint, resume).
    Returns ``(result, metrics, findings)``.
    """
    res = train_deep(env_fn, config, reached_fn=reached_fn, **kwargs)
    reached = reached_fn is not None
    findings = deep_findings(res, reached=reached) if diagnose else None
    metrics = save_deep_run(res, out, findings, reached=reached, plot=plot, title=title)
    return res, metrics, findings or []
