"""Tabular training runs of the RL line: train a learner, diagnose it, write its run folder.

``marlm train gridworld|race`` calls these. Each composes a learner of :mod:`marlm.rl.train` with
the detectors of :mod:`marlm.eval.diagnose` and the run-folder writers of :mod:`marlm.eval.runs`
(``tables.npz``, ``episodes.npz``, ``metrics.json``, ``findings.json``, ``curves.png``, and for
GridRace with diagnostics ``fixed_partner.npz``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import DTypeLike

from marlm.errors import InputError
from marlm.eval.diagnose import detect_goal_not_reached, detect_lazy_agent, detect_non_stationarity
from marlm.eval.plots import PlotProcess
from marlm.eval.runs import plot_race_curves, save_gridworld_run, save_race_run
from marlm.eval.training_folder import TrainingOutputs
from marlm.rl.train import (
    GridWorldConfig,
    GridWorldResult,
    RaceConfig,
    RaceResult,
    fixed_partner_run,
    gridworld_metrics,
    race_metrics,
    train_gridworld,
    train_race,
)


@contextmanager
def _episodes_in_memory(episodes: int) -> Iterator[None]:
    """A ``MemoryError`` inside (numpy's, allocating the per-episode logs of a tabular run:
    ``--episodes 1000000000000`` asked for 14.6 TiB) as one error naming ``--episodes``."""
    try:
        yield
    except MemoryError as e:
        raise InputError(
            f"the per-episode logs of {episodes} episodes do not fit in memory ({e}); pass "
            "fewer, e.g. --episodes 30000",
            field="--episodes",
        ) from None


def check_tabular_run(
    outputs: TrainingOutputs, config: GridWorldConfig | RaceConfig, *, engine: str
) -> None:
    """Every refusal of a tabular run (``marlm train gridworld|race``) before its run folder is
    claimed, so that a refused command leaves the folder as it found it: the outputs
    (:meth:`marlm.eval.training_folder.TrainingOutputs.check`), the ``--resume`` checkpoint
    against ``config`` (its kind, settings and episode count), and the per-episode logs of
    ``config.episodes`` against the memory (allocated, untouched, and dropped at once).

    Raises:
        InputError: naming ``--engine``, ``--checkpoint-every``, ``--resume``, ``--out``,
            ``--checkpoint`` or ``--episodes``, and the fix.
    """
    from marlm.rl.checkpoint import load_checkpoint
    from marlm.rl.train import RaceLog, check_resume_config

    kind = "gridworld" if isinstance(config, GridWorldConfig) else "race"
    outputs.check(kind=kind, engine=engine)
    if outputs.resume is not None:
        meta, _ = load_checkpoint(outputs.resume, kind=kind)
        check_resume_config(meta, config, Path(outputs.resume))
    n = config.episodes
    logs: list[tuple[tuple[int, ...], DTypeLike]]  # (shape, dtype) of each log array
    if kind == "gridworld":  # GridWorldResult's returns float64[n] and lengths int64[n]
        logs = [((n,), np.float64), ((n,), np.int64)]
    else:  # the fields of RaceLog.zeros(n, max_steps)
        one = RaceLog.zeros(1, config.max_steps).arrays().values()
        logs = [((n, *a.shape[1:]), a.dtype) for a in one]
    with _episodes_in_memory(n):
        held = [np.empty(shape, dtype) for shape, dtype in logs]
    del held


def run_gridworld(
    config: GridWorldConfig, out: str | Path, *, plot: bool = True, **kwargs: Any
) -> tuple[GridWorldResult, dict[str, Any]]:
    """Train on GridWorld and write the run folder; returns the result and its metrics.

    ``plot``: write ``curves.png`` (matplotlib is imported only then). ``kwargs`` go to :func:`train_gridworld` (engine, progress, checkpoint, resume, reward_fn).
    """
    with _episodes_in_memory(config.episodes):
        res = train_gridworld(config, **kwargs)
    source = "llm" if kwargs.get("reward_fn") is not None else "env"
    findings = detect_goal_not_reached(
        res.greedy_path_length, config.max_steps, reward_source=source
    )
    save_gridworld_run(res, out, [f.to_dict() for f in findings], plot=plot)
    metrics = gridworld_metrics(res)
    metrics["findings"] = [str(f) for f in findings]
    return res, metrics


def run_race(
    config: RaceConfig,
    out: str | Path,
    *,
    diagnose: bool = True,
    plot: bool | PlotProcess = True,
    **kwargs: Any,
) -> tuple[RaceResult, dict[str, Any], list[Any]]:
    """Train on GridRace, run the diagnostics, and write the run folder.

    ``plot``: write ``curves.png``, drawn by a :class:`marlm.eval.plots.PlotProcess` (``True``:
    one forked here, before training; or the caller's, started earlier and not yet given a
    call), so that matplotlib's import and the drawing run beside the training, the diagnostics
    and the other files (matplotlib is never imported in this process).
    With ``diagnose``, each agent also learns alone against its partner frozen at the end of the
    joint run (:func:`fixed_partner_run`, saved as ``fixed_partner.npz``) so the non-stationarity
    detector can compare. Returns ``(result, metrics, findings)``.
    """
    out = Path(out)
    own_plotter = PlotProcess() if plot is True else nullcontext(plot or None)
    with own_plotter as plotter:
        with _episodes_in_memory(config.episodes):
            res = train_race(config, **kwargs)
        if plotter is not None:
            out.mkdir(parents=True, exist_ok=True)
            plot_race_curves(res, out, plotter)
        findings: list[Any] = []
        if diagnose:
            n = res.episode
            log = res.log
            findings += detect_lazy_agent(
                log.team_return[:n], log.own_return[:n], res.agents,
                reached=log.reached[:n], action_counts=log.action_counts[:n],
                action_sequences=log.actions[:n],
            )  # fmt: skip
            if n == config.episodes:
                alone = {
                    a: fixed_partner_run(res, i).own_return[:, i] for i, a in enumerate(res.agents)
                }
                out.mkdir(parents=True, exist_ok=True)
                # allow_pickle named (numpy's default) so that no array's name can stand for it
                np.savez(out / "fixed_partner.npz", allow_pickle=True, **alone)
                findings += detect_non_stationarity(log.own_return[:n], alone, res.agents)
        save_race_run(res, out, [f.to_dict() for f in findings] if diagnose else None, plot=False)
        if plotter is not None:
            plotter.result()
    return res, race_metrics(res), findings
