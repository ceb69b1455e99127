"""Run folders: create them, and write what a user reads after a run.

Hybrid runs (``marlm demo``, :func:`marlm.hybrid.controller.run`; the command claims the folder
first with :func:`marlm.eval.outputs.claim_run_folder`): :func:`start_run_folder` opens it, the
controller streams ``trace.jsonl`` (and the frames of ``episode.gif``, :class:`GifStream`), and
:func:`finish_hybrid_run` writes ``metrics.json`` when the episode has ended (so a folder without
it is a run that did not finish), then ``reward_curves.png`` and the finished ``episode.gif``.

``marlm train gridworld|race`` (trained by :mod:`marlm.experiments.training`): one run writes one
folder: ``tables.npz`` (the learned tables), ``episodes.npz`` (per-episode logs), ``metrics.json``
(fixed names, see :func:`marlm.rl.train.gridworld_metrics` and :func:`marlm.rl.train.race_metrics`),
``curves.png`` (per-agent returns and the team curve, labelled sum; not with ``plot=False``, which
keeps matplotlib out of the process), ``findings.json`` (:mod:`marlm.eval.diagnose`), and for
GridRace with diagnostics ``fixed_partner.npz`` (each agent's returns learning alone against its
frozen partner).

Nothing here trains. JSON files are written atomically (temp, then rename).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from marlm.eval.gif import GifStream, save_episode_gif
from marlm.eval.outputs import atomic_path
from marlm.eval.plots import PlotProcess, plot_reward_curves
from marlm.rl.train import (
    GridWorldResult,
    RaceResult,
    curve_window,
    gridworld_metrics,
    race_metrics,
)


def start_run_folder(out: str | Path) -> Path:
    """Create the folder of a hybrid run and remove a ``metrics.json`` left in it, so that the
    folder reads as unfinished until :func:`finish_hybrid_run` writes it."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "metrics.json").unlink(missing_ok=True)
    return out


def finish_hybrid_run(
    out: str | Path,
    events: Sequence[dict[str, Any]],
    *,
    facts: dict[str, Any],
    frames: Sequence[np.ndarray] | GifStream = (),
    fps: int = 10,
) -> tuple[dict[str, Any], dict[str, Path]]:
    """Write the files of a finished hybrid run from its trace events: ``metrics.json`` first
    (the figures are what a user needs most, and the smallest file), then the pictures
    (``reward_curves.png``, ``episode.gif``).

    Args:
        out: the run folder (made by :func:`start_run_folder`).
        events: the run's trace events, in order (see ``docs/trace-schema.md``).
        facts: figures the trace does not hold (``scheme``, ``deadlock_breaks``,
            ``orders_total``), added to the metrics after :func:`marlm.eval.metrics.summarise`.
        frames: ``uint8[H, W, 3]`` episode frames (an ``episode.gif`` at ``fps`` when any), or
            the :class:`marlm.eval.gif.GifStream` they were streamed to during the run (its
            ``finish`` is called here, after the metrics).

    Returns:
        ``(metrics, files)``: the metrics written to ``metrics.json`` (with ``planner_deadlines``,
        the rule's stand-ins past the planning deadline) and the paths written, by name
        (``metrics``, ``reward_curves``, ``gif``).

    Raises:
        OSError: a file cannot be written (a full disk): every temporary file is removed, and
            what was written before it (the metrics, when there was room for them) is kept.
    """
    from marlm.eval.metrics import reward_curves, summarise  # (hybrid runs only)

    out = Path(out)
    stream = frames if isinstance(frames, GifStream) else None
    kept: Sequence[np.ndarray] = () if isinstance(frames, GifStream) else frames  # frames given
    try:
        metrics = summarise(events)
        metrics.update(facts)
        metrics["planner_deadlines"] = sum(
            1 for e in events if e["type"] == "plan" and e["source"] == "deadline"
        )
        files: dict[str, Path] = {}
        with atomic_path(out / "metrics.json") as tmp:
            tmp.write_text(json.dumps(metrics, indent=2, ensure_ascii=False), encoding="utf-8")
        files["metrics"] = out / "metrics.json"
        curves = reward_curves(events)
        if curves:
            files["reward_curves"] = plot_reward_curves(
                curves,
                out / "reward_curves.png",
                team="sum",
                cumulative=True,
                title="Per-robot cumulative reward (team = sum)",
            )
        if stream is not None and stream.offered:
            files["gif"] = stream.finish()
        elif len(kept):  # len: frames may be one array
            files["gif"] = save_episode_gif(list(kept), out / "episode.gif", fps=fps)
    finally:
        if stream is not None:
            stream.discard()  # a stream not finished (an error above): its temporary file goes
    return metrics, files


def _write_json(path: Path, data: Any) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def save_gridworld_run(
    res: GridWorldResult, out: str | Path, findings: list[dict] | None = None, *, plot: bool = True
) -> Path:
    """Write the run folder of a GridWorld run (``curves.png`` only with ``plot``); returns its path."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    np.savez(out / "tables.npz", q=res.q)
    np.savez(
        out / "episodes.npz", returns=res.returns[: res.episode], length=res.lengths[: res.episode]
    )
    metrics = gridworld_metrics(res)
    _write_json(out / "metrics.json", metrics)
    if plot:
        plot_reward_curves(
            {"agent": res.returns[: res.episode]}, out / "curves.png", team="sum",
            smooth=curve_window(res.episode) // 2 or 1, xlabel="episode",
            title="GridWorld return per episode",
        )  # fmt: skip
    _write_json(out / "findings.json", findings or [])
    return out


def save_race_run(
    res: RaceResult, out: str | Path, findings: list[dict] | None = None, *, plot: bool = True
) -> Path:
    """Write the run folder of a GridRace run; returns its path. ``findings`` None: the detectors
    were not run, and no ``findings.json`` is written.

    With ``plot``, ``curves.png`` plots each agent's own (individual) return per episode and the team return,
    labelled ``team (sum of 2 agents)``: the per-agent curves add up to it.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    # allow_pickle named (numpy's default) so that no array's name can stand for it
    np.savez(out / "tables.npz", allow_pickle=True, **res.tables)
    np.savez(out / "episodes.npz", allow_pickle=True, **res.log.arrays(res.episode))
    _write_json(out / "metrics.json", race_metrics(res))
    if plot:
        plot_race_curves(res, out, PlotProcess(fork=False))
    if findings is not None:  # None: the detectors were not run (--no-diagnose)
        _write_json(out / "findings.json", findings)
    return out


def plot_race_curves(res: RaceResult, out: Path, plotter: PlotProcess) -> None:
    """Submit ``curves.png`` of a GridRace run to ``plotter`` (see :func:`save_race_run`)."""
    own = res.log.own_return[: res.episode]
    plotter.submit(
        plot_reward_curves, {agent: own[:, i] for i, agent in enumerate(res.agents)},
        out / "curves.png", team="sum", smooth=max(1, curve_window(res.episode) // 5),
        xlabel="episode", tight=False,
        title=f"GridRace {res.config.learner}, reward {res.config.reward}: own return per agent",
    )  # fmt: skip
