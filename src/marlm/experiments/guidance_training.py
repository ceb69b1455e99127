"""Training the learned guidance: CMA-ES on simulated lifelong throughput, with checkpoints.

Method: the guidance-graph optimisation of Zhang, Chen, Li, Koenig et al., "Guidance Graph
Optimization for Lifelong Multi-Agent Path Finding" (IJCAI 2024): the parameters of the guidance
(here the weights of :mod:`marlm.hybrid.acting.learned_guidance`, a linear model of move features plus the
gain of its online update) are searched with CMA-ES (Hansen and Ostermeier, "Completely
Derandomized Self-Adaptation in Evolution Strategies", Evolutionary Computation 9(2), 2001; the
``cmaes`` package) to maximise the throughput of PIBT under that guidance on simulated episodes.

Objective of a parameter vector ``x`` (minimised by CMA-ES, so negated)::

    score(x) = mean over training instances i of throughput(x, i) / throughput(hand, i)

so every robot count weighs the same and 1.0 means "as good as the hand guidance". Every
candidate is evaluated on the same instances (common random numbers: the objective is
deterministic). Each generation's samples are drawn from the seed ``SeedSequence([seed, g])``,
so a run resumed from its checkpoint after generation ``g`` draws what an uninterrupted run draws.

Files of a run folder: ``checkpoint.pkl`` (after every generation), ``result.json`` (at the end),
``curve.png`` (the learning curve). The training command for POGEMA maps is
``benchmarks/pogema/train.sh``.
"""

from __future__ import annotations

import json
import os
import pickle
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from marlm.hybrid.acting.learned_guidance import N_PARAMS, PARAM_NAMES
from marlm.hybrid.simulator import Guidance, LifelongInstance, simulate

LOWER = -2.0
UPPER = 8.0
"""Search box of every parameter (steps of extra cost per unit feature; the online gain is
clipped at 0 inside :class:`marlm.hybrid.simulator.Guidance`)."""


@dataclass(frozen=True)
class TrainConfig:
    """CMA-ES settings and the guidance's fixed settings.

    Args:
        generations: CMA-ES generations; population: candidates per generation;
        sigma0: initial step size; seed: of the search; penalty: the hand rule's penalty;
        period, bound: of the online update (steps between updates, largest extra cost);
        mean0: the search's initial mean (``N_PARAMS`` floats, e.g. a previous run's
        ``params`` to refine it; the result is never worse than it on the training instances);
        None = zeros, the hand guidance.
        search: names of the parameters CMA-ES searches (:data:`PARAM_NAMES`), the others
            fixed at ``mean0`` (0 without it), e.g. the online update's weights alone around
            shipped move weights; None = every parameter.
        narrow_priority, hindrance: of the learned guidance (:class:`Guidance`), so the search
            can score the shipped scheme (0 and False: PIBT's own order, as before they existed).
    """

    generations: int = 20
    population: int = 8
    sigma0: float = 1.0
    seed: int = 0
    penalty: int = 2
    period: int = 16
    bound: float = 2.0
    mean0: tuple[float, ...] | None = None
    search: tuple[str, ...] | None = None
    narrow_priority: float = 0.0
    hindrance: bool = False

    def __post_init__(self) -> None:
        if self.mean0 is not None and len(self.mean0) != N_PARAMS:
            raise ValueError(f"mean0 must have {N_PARAMS} entries, got {len(self.mean0)}")
        if self.search is not None:
            unknown = sorted(set(self.search) - set(PARAM_NAMES))
            if unknown or len(set(self.search)) < 2:
                raise ValueError(
                    f"search must name at least 2 distinct parameters of {', '.join(PARAM_NAMES)}"
                    f"; unknown: {unknown}"
                )
        for name, value in (("generations", self.generations), ("population", self.population)):
            if value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        if self.population < 2:
            raise ValueError(f"population must be >= 2, got {self.population}")
        if self.sigma0 <= 0:
            raise ValueError(f"sigma0 must be > 0, got {self.sigma0}")


def guidance_of(params: np.ndarray | None, config: TrainConfig) -> Guidance:
    """The :class:`Guidance` of ``params`` (None = the hand rule) under ``config``."""
    if params is None:
        return Guidance(None, config.penalty, config.period, config.bound)
    return Guidance(
        params, config.penalty, config.period, config.bound,
        narrow_priority=config.narrow_priority, hindrance=config.hindrance,
    )  # fmt: skip


def throughputs(
    params: np.ndarray | None,
    instances: Sequence[LifelongInstance],
    target_cells: np.ndarray | None,
    config: TrainConfig,
) -> np.ndarray:
    """``float64[len(instances)]`` throughput of ``params`` (None = hand) on each instance."""
    g = guidance_of(params, config)
    return np.array([simulate(inst, g, target_cells) for inst in instances])


def objective(
    params: np.ndarray,
    instances: Sequence[LifelongInstance],
    target_cells: np.ndarray | None,
    config: TrainConfig,
    hand: np.ndarray,
) -> float:
    """The training objective of ``params``: mean over ``instances`` of throughput / ``hand``."""
    return float(np.mean(throughputs(params, instances, target_cells, config) / hand))


def ray_scorer(
    instances: Sequence[LifelongInstance],
    target_cells: np.ndarray | None,
    config: TrainConfig,
    hand: np.ndarray,
    workers: int,
) -> Callable[[list[np.ndarray]], list[tuple[float, float]]]:
    """A ``score_many`` for :func:`train` that simulates each candidate as a Ray task.

    The instances and ``hand`` (``float64[len(instances)]``, the hand guidance's throughputs)
    go to Ray's object store once; each task scores one parameter vector (:func:`objective`)
    and ``(score, CPU seconds the task spent)`` come back in candidate order, so the run equals
    a serial one and its ``cpu_s`` counts the workers' CPU. A local Ray with ``workers`` CPUs
    is started unless one is running (Moritz et al. 2018, "Ray: A Distributed Framework for
    Emerging AI Applications", OSDI).

    Args:
        workers: CPUs of the local Ray (tasks at once).

    Raises:
        ValueError: ``workers`` < 1.
    """
    import ray

    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if not ray.is_initialized():
        ray.init(
            num_cpus=workers,
            include_dashboard=False,
            object_store_memory=80 * 2**20,  # the instances: a few MB
            log_to_driver=False,
            configure_logging=False,
        )
    shared = ray.put((list(instances), target_cells, config, hand))
    task = ray.remote(max_retries=2)(_objective_task)

    def score_many(xs: list[np.ndarray]) -> list[tuple[float, float]]:
        return ray.get([task.remote(np.asarray(x), shared) for x in xs])

    return score_many


def _objective_task(params: np.ndarray, shared: tuple) -> tuple[float, float]:
    instances, target_cells, config, hand = shared
    t0 = time.process_time()
    s = objective(params, instances, target_cells, config, hand)
    return s, time.process_time() - t0


def _generation_seed(seed: int, generation: int) -> int:
    return int(np.random.SeedSequence([seed, generation]).generate_state(1)[0])


def train(
    instances: Sequence[LifelongInstance],
    run_dir: str | Path,
    config: TrainConfig = TrainConfig(),
    target_cells: np.ndarray | None = None,
    *,
    progress: Callable[[int, int, float, float], None] | None = None,
    clock: Callable[[], float] = time.process_time,
    stop_after: int | None = None,
    workers: int = 1,
) -> dict | None:
    """Run (or resume) CMA-ES on ``instances``; write checkpoints, the result and the curve.

    Args:
        instances: the training episodes (disjoint from every reported seed).
        run_dir: the run's folder: created if missing; a ``checkpoint.pkl`` in it is resumed
            (it must come from the same config and instances).
        target_cells: ``bool[H, W]`` where targets are drawn (a feature of the model).
        progress: called after each generation with ``(generation, generations, best score so
            far, score of the search mean)``.
        clock: CPU seconds (injected: the spent budget is recorded in the result).
        stop_after: stop after this many generations in this call (a checkpoint remains), as if
            interrupted; None = run to the end.
        workers: above 1, a generation's candidates are simulated as Ray tasks on a local Ray
            with this many CPUs (:func:`ray_scorer`); 1 = one after the other in this process.
            The objective is deterministic and a generation's candidates are all drawn before
            any is scored, so the result is the same either way.

    Returns:
        the result (also ``result.json``): ``params``, ``weights`` (by feature name),
        ``score`` (training objective of ``params``), ``hand`` / ``learned`` training
        throughputs, ``history`` (per generation: best and mean-of-search score), ``cpu_s``;
        or None when stopped early.

    Raises:
        ValueError: the checkpoint in ``run_dir`` is from another config or instance set.
    """
    from cmaes import CMA

    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    ckpt = run_dir / "checkpoint.pkl"
    full0 = np.zeros(N_PARAMS) if config.mean0 is None else np.array(config.mean0, dtype=float)
    names = PARAM_NAMES if config.search is None else config.search
    searched = np.array(sorted(PARAM_NAMES.index(n) for n in names))

    def full(x: np.ndarray) -> np.ndarray:  # the searched entries into the fixed ones
        out = np.clip(full0, LOWER, UPPER)
        out[searched] = x
        return out

    key = _key(instances, config)
    t0 = clock()
    if ckpt.is_file():
        with ckpt.open("rb") as fh:
            state = pickle.load(fh)
        if state["key"] != key:
            raise ValueError(f"{ckpt} is from another config or instance set; use a new run_dir")
    else:
        bounds = np.tile([LOWER, UPPER], (len(searched), 1))
        state = {
            "key": key,
            "optimizer": CMA(
                mean=np.clip(full0, LOWER, UPPER)[searched],
                sigma=config.sigma0,
                bounds=bounds,
                seed=config.seed,
                population_size=config.population,
            ),
            "generation": 0,
            "hand": throughputs(None, instances, target_cells, config),
            "history": [],
            "best": (1.0, np.zeros(N_PARAMS)),  # zero weights = the hand guidance
            "cpu_s": 0.0,
        }
    opt = state["optimizer"]
    hand = state["hand"]

    def score(x: np.ndarray) -> float:
        return objective(x, instances, target_cells, config, hand)

    def score_here(xs: list[np.ndarray]) -> list[tuple[float, float]]:
        return [(score(x), 0.0) for x in xs]  # CPU spent here is the clock's

    score_many = (
        ray_scorer(instances, target_cells, config, hand, workers) if workers > 1 else score_here
    )

    if state["generation"] == 0 and config.mean0 is not None and not state["history"]:
        start = np.clip(np.array(config.mean0), LOWER, UPPER)
        state["best"] = max(state["best"], (score(start), start), key=lambda b: b[0])

    done_now = 0
    while state["generation"] < config.generations:
        g = state["generation"]
        opt.reseed_rng(_generation_seed(config.seed, g))
        xs = [opt.ask() for _ in range(opt.population_size)]  # scoring draws nothing
        told = []
        for x, (s, task_cpu_s) in zip(xs, score_many([full(x) for x in xs]), strict=True):
            told.append((x, -s))
            state["cpu_s"] += task_cpu_s  # spent by a Ray worker, not this process
            if s > state["best"][0]:
                state["best"] = (s, full(x))
        opt.tell(told)
        mean_x = full(opt.mean)
        mean_s = score(mean_x)
        if mean_s > state["best"][0]:
            state["best"] = (mean_s, mean_x)
        state["history"].append(
            {
                "generation": g + 1,
                "best": state["best"][0],
                "gen_best": -min(v for _, v in told),
                "mean": mean_s,
            }  # fmt: skip
        )
        state["generation"] = g + 1
        state["cpu_s"] += clock() - t0
        t0 = clock()
        _atomic_write(ckpt, pickle.dumps(state))
        if progress is not None:
            progress(g + 1, config.generations, state["best"][0], mean_s)
        done_now += 1
        if stop_after is not None and done_now >= stop_after and g + 1 < config.generations:
            return None
    best_s, best_x = state["best"]
    result = {
        "method": "CMA-ES over a linear guidance model (Zhang et al., IJCAI 2024)",
        "features": list(PARAM_NAMES),
        "params": [float(v) for v in best_x],
        "weights": {n: float(v) for n, v in zip(PARAM_NAMES, best_x, strict=True)},
        "score": best_s,
        "hand": [float(v) for v in hand],
        "learned": [float(v) for v in throughputs(best_x, instances, target_cells, config)],
        "instances": [{"robots": len(i.starts), "seed": i.seed} for i in instances],
        "config": asdict(config),
        "history": state["history"],
        "cpu_s": state["cpu_s"],
    }
    _atomic_write(run_dir / "result.json", (json.dumps(result, indent=1) + "\n").encode())
    plot_curve(state["history"], run_dir / "curve.png")
    return result


def plot_curve(history: list[dict], path: Path) -> None:
    """Learning curve: best score so far and score of the search mean, per generation."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    gens = [h["generation"] for h in history]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(gens, [h["best"] for h in history], label="best so far")
    ax.plot(gens, [h["mean"] for h in history], label="search mean")
    ax.plot(gens, [h["gen_best"] for h in history], ":", label="best of generation")
    ax.axhline(1.0, color="grey", lw=0.8, label="hand guidance")
    ax.set_xlabel("CMA-ES generation")
    ax.set_ylabel("throughput / hand (training seeds)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _key(instances: Sequence[LifelongInstance], config: TrainConfig) -> str:
    import hashlib

    h = hashlib.sha256(json.dumps(asdict(config), sort_keys=True).encode())
    for inst in instances:
        for arr in (inst.free, inst.starts, inst.targets):
            h.update(np.ascontiguousarray(arr).tobytes())
        h.update(f"{inst.steps},{inst.seed}".encode())
    return h.hexdigest()[:16]


def _atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file, so a kill never leaves half a file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
