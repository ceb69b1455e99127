"""Commands: ``marlm train gridworld|race|env`` and ``marlm diagnose RUN_FOLDER``. No logic
here: the learners' configs (:mod:`marlm.rl.train`), the run folders (:mod:`marlm.eval.runs`,
:mod:`marlm.eval.deep_runs`, :mod:`marlm.eval.training_folder`) and the other settings
(:mod:`marlm.experiments.training`) check the options (:class:`marlm.errors.InputError`)."""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from marlm.errors import RunError
from marlm.experiments.training import (  # noqa: F401  (BLAS_THREAD_VARIABLES: the tests' name)
    BLAS_THREAD_VARIABLES,
    DEEP_CHUNK,
    DEEP_LEARNERS,
    check_gridworld_reward,
    check_race_learner,
    gridrace_deep,
    import_numpy_without_blas_threads,
)
from marlm.rl.deep import DEFAULT_STEPS, MAX_ENVS, RACE_STEPS
from marlm.stops import console as rich_console

from .app import (
    LLM_HELP,
    SEED_BOUND,
    app,
    at_least,
    finite_at_least,
    input_file,
    llm_model_option,
    llm_option,
    llm_timeout_option,
    on_interrupt,
    opt,
    progress_bar,
    train_app,
)

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress

    from marlm.eval.training_folder import TrainingOutputs

EPISODES = opt(
    None, "Episodes to train (default: the seed note's settings, 3000 on gridworld, 30000 on "
    "race).", at_least(1, example=1000), "--episodes")  # fmt: skip
SEED = opt(0, "Seed of the run's random generator.", SEED_BOUND, "--seed")
ENGINE = opt("fast", "fast (compiled) or reference (plain Python).", None, "--engine")
CHECKPOINT = opt(
    None, "Checkpoint file rewritten atomically: a new file, or the --resume file.", None,
    "--checkpoint")  # fmt: skip
OVERWRITE = opt(
    False, "Replace the run already in --out (its files are deleted first) and an existing "
    "--checkpoint file.", None, "--overwrite")  # fmt: skip
RESUME = opt(
    None, "Continue from this checkpoint.",
    input_file("a checkpoint file (.npz) written by --checkpoint"), "--resume")  # fmt: skip
PLOT = opt(
    True, "Write curves.png (--no-plot: no plot, matplotlib not loaded).", None,
    "--plot/--no-plot")  # fmt: skip
CHUNK = opt(
    1000, "Episodes between progress updates/checkpoints.", at_least(1), "--checkpoint-every"
)
DIAGNOSE = opt(True, "Run the detectors.", None, "--diagnose/--no-diagnose")
GAMMA = "Discount in [0, 1]."
RUN_FOLDER = "Run folder to write: new or empty."
DEEP_STEPS = opt(
    None, "Deep learners (mappo, ippo, qmix, dqn-vdn, dqn): joint environment steps to train, "
    f"summed over the --envs copies (default {RACE_STEPS} on race, {DEFAULT_STEPS} on env).",
    at_least(1, example=RACE_STEPS), "--steps")  # fmt: skip
DEEP_LR = opt(
    None, "Deep learners: Adam's step size (default 0.001); halved when every agent gets the "
    "shared team reward.", finite_at_least(0.0, exclusive=True), "--lr")  # fmt: skip
DEEP_ENVS = opt(None, "Deep learners: copies of the environment stepped together (default 8, "
    f"at most {MAX_ENVS}).", at_least(1, high=MAX_ENVS, example=8), "--envs")  # fmt: skip
DEEP_SET = opt(None, "Deep learners: any other setting, repeatable (e.g. --set rollout=128 --set "
    "hidden=32; docs/deep-rl.md).", None, "--set", metavar="FIELD=VALUE")  # fmt: skip
WORKERS = opt(
    1, "Deep learners: Ray actors holding the environment's copies (1: this process). Same "
    "result for any number; pays when one step of the environment is slow.", at_least(1),
    "--workers")  # fmt: skip
RACE_LEARNERS = (
    "iql, vdn or jal (tables); mappo, ippo, qmix, dqn-vdn or dqn (networks, the deep extra)."
)
COUNTERFACTUAL = "--reward difference: absent (agent removed; the default), stay or average."
MIX_WEIGHT = "--reward mixed: weight of the individual part (default 0.5)."
SHARED_REWARD = (
    "Declares what the env gives, every agent the team reward (step size halved; QMIX and VDN "
    "take it once, not summed) or each its own; marlm does not change the rewards."
)


def _progress(console: Console) -> tuple[Progress, Callable[[int, int], None]]:
    bar = progress_bar(console, "[bold]training")
    task = bar.add_task("episodes", total=None)
    return bar, lambda done, total: bar.update(task, completed=done, total=total)


def _train(outputs: TrainingOutputs, work: Callable, *, deep: bool = False) -> Callable:
    """Claim the run folder and run ``work(progress)`` (which returns the metrics and findings)
    under a progress bar, Ctrl-C naming the command that resumes. A ``deep`` run keeps the
    ``--resume`` file in the folder, a tabular one its episode log too. Returns ``show(title,
    drop=..., diagnose=...)``, which prints the metrics but ``drop`` as a table, the findings
    (``diagnose`` None: as ``finding:`` lines; else marked, and "no findings" where diagnosed)
    and the run folder."""

    from marlm.experiments.training import metrics_table

    outputs.claim(keep_log=not deep)
    console = rich_console()
    bar, update = _progress(console)
    started = time.time()
    with on_interrupt(lambda: outputs.resume_hint(started, sys.argv[1:])), bar:
        try:
            metrics, findings = work(update)
        except RunError as e:  # e.g. a Ray actor died: what was saved, and how to go on
            raise RunError(f"{e}; {outputs.resume_hint(started, sys.argv[1:])}") from None

    def show(title: str, drop: tuple[str, ...] = ("config",), diagnose: bool | None = None):
        console.print(metrics_table(title, metrics, drop))
        for f in findings:
            console.print(f"finding: {f}" if diagnose is None else f"[yellow]finding[/] {f}")
        if diagnose and not findings:
            console.print("no findings")
        console.print(f"run folder: {outputs.out}")

    return show


def _outputs(out: Path, checkpoint: Path | None, resume: Path | None, overwrite: bool, chunk: int):
    from marlm.eval.training_folder import TrainingOutputs

    return TrainingOutputs(out, checkpoint, resume, overwrite, chunk)


@train_app.command("gridworld")
def train_gridworld_cmd(
    learner: str = opt("q", "q (tabular Q-learning).", None, "--learner"),
    reward: str = opt("env", "env (the env's reward) or llm (LLMReward).", None, "--reward"),
    llm_samples: int | None = opt(
        None, "With --reward llm: paraphrased prompts per distinct state (default 3).",
        at_least(1), "--llm-samples"),
    llm: str = llm_option("With --reward llm: " + LLM_HELP),
    llm_model: str = llm_model_option(),
    llm_timeout: float = llm_timeout_option(),
    episodes: int = EPISODES,
    seed: int = SEED,
    alpha: float = opt(0.1, "Learning rate.", None, "--alpha"),
    gamma: float = opt(0.95, GAMMA, None, "--gamma"),
    epsilon: float = opt(0.9, "Initial exploration rate.", None, "--epsilon"),
    epsilon_decay: float = opt(0.99, "Multiplier per episode.", None, "--epsilon-decay"),
    epsilon_floor: float = opt(0.02, "Lowest exploration rate.", None, "--epsilon-floor"),
    out: Path = opt(Path("runs/gridworld"), RUN_FOLDER, None, "--out"),
    overwrite: bool = OVERWRITE,
    engine: str = ENGINE,
    checkpoint: Path | None = CHECKPOINT,
    resume: Path | None = RESUME,
    chunk: int = CHUNK,
    plot: bool = PLOT,
) -> None:  # fmt: skip
    """Tabular Q-learning on the 4x4 GridWorld."""
    import_numpy_without_blas_threads()
    from marlm.experiments.tabular import check_tabular_run, run_gridworld
    from marlm.experiments.training import llm_reward
    from marlm.rl.train import GridWorldConfig

    check_gridworld_reward(reward, llm_samples=llm_samples, llm=llm, llm_model=llm_model)
    config = GridWorldConfig(
        learner=learner, episodes=3000 if episodes is None else episodes, alpha=alpha, gamma=gamma,
        epsilon_start=epsilon, epsilon_decay=epsilon_decay, epsilon_floor=epsilon_floor, seed=seed,
    )  # fmt: skip
    outputs = _outputs(out, checkpoint, resume, overwrite, chunk)
    check_tabular_run(outputs, config, engine=engine)
    reward_fn = llm_reward(llm_samples, llm, llm_model, llm_timeout) if reward == "llm" else None

    def work(update: Callable[[int, int], None]) -> tuple[dict, list]:
        _, metrics = run_gridworld(
            config, out, engine=engine, progress=update, checkpoint=checkpoint, resume=resume,
            chunk=chunk, reward_fn=reward_fn, plot=plot,
        )  # fmt: skip
        return metrics, metrics["findings"]

    _train(outputs, work)("GridWorld", drop=("config", "findings"))


@train_app.command("race")
def train_race_cmd(
    learner: str = opt("iql", RACE_LEARNERS, None, "--learner"),
    reward: str = opt("shared", "shared, individual, mixed or difference.", None, "--reward"),
    mix_weight: float | None = opt(None, MIX_WEIGHT, None, "--mix-weight"),
    counterfactual: str | None = opt(None, COUNTERFACTUAL, None, "--counterfactual"),
    episodes: int = EPISODES,
    seed: int = SEED,
    end: str = opt("any", "any (classic) or all: when the episode ends.", None, "--end"),
    alpha: float | None = opt(None, "Tables: learning rate (default 0.05).", None, "--alpha"),
    gamma: float = opt(0.95, GAMMA, None, "--gamma"),
    epsilon: float | None = opt(None, "Tables: initial exploration (default 0.6).", None),
    epsilon_decay: float | None = opt(None, "Tables: its multiplier per episode (default 0.999)."),
    epsilon_floor: float | None = opt(None, "Tables: lowest exploration (default 0.02)."),
    out: Path = opt(Path("runs/race"), RUN_FOLDER, None, "--out"),
    overwrite: bool = OVERWRITE,
    diagnose: bool = DIAGNOSE,
    engine: str = ENGINE,
    checkpoint: Path | None = CHECKPOINT,
    resume: Path | None = RESUME,
    chunk: int = CHUNK,
    plot: bool = PLOT,
    steps: int | None = DEEP_STEPS,
    lr: float | None = DEEP_LR,
    envs: int = DEEP_ENVS,
    extra: list[str] | None = DEEP_SET,
    workers: int = WORKERS,
) -> None:  # fmt: skip
    """Two agents on GridRace: IQL, VDN, JAL or a deep learner.

    Independent, value-decomposition or joint-action learners with a credit-assignment mode; or
    mappo, ippo, qmix, dqn-vdn, dqn (docs/deep-rl.md), which count --steps, not --episodes.
    """
    outputs = _outputs(out, checkpoint, resume, overwrite, chunk)
    table = check_race_learner(
        learner, reward, workers=workers, steps=steps, lr=lr, envs=envs, mix_weight=mix_weight,
        counterfactual=counterfactual, alpha=alpha, epsilon=epsilon, epsilon_decay=epsilon_decay,
        epsilon_floor=epsilon_floor, set=extra,
    )  # fmt: skip
    if learner in DEEP_LEARNERS:
        deep = gridrace_deep(
            learner=learner, reward=reward, end=end, episodes=episodes, steps=steps, seed=seed,
            gamma=gamma, lr=lr, num_envs=envs, chunk=chunk, extra=extra or (),
        )  # fmt: skip
        return _train_deep(*deep, outputs, diagnose, plot, workers)
    import_numpy_without_blas_threads()
    from marlm.eval.plots import PlotProcess

    # Forked first (before numba and the bar's thread): it imports matplotlib while we train.
    with PlotProcess() if plot else nullcontext() as plotter:
        from marlm.experiments.tabular import check_tabular_run, run_race
        from marlm.rl.train import RaceConfig

        episodes = 30000 if episodes is None else episodes
        config = RaceConfig(**table, episodes=episodes, gamma=gamma, seed=seed, end=end)
        check_tabular_run(outputs, config, engine=engine)
        show = _train(outputs, lambda update: run_race(
            config, out, diagnose=diagnose, engine=engine, progress=update, checkpoint=checkpoint,
            resume=resume, chunk=chunk, plot=plotter or False)[1:])  # fmt: skip
    show(f"GridRace {learner} / {reward}", diagnose=diagnose)


@app.command("diagnose")
def diagnose_cmd(
    run_folder: Path = typer.Argument(
        ..., help="A run folder written by marlm train gridworld, race or env "
        "(metrics.json and episodes.npz)."),
) -> None:  # fmt: skip
    """Print the findings of a training run's diagnostics."""
    from marlm.eval.diagnose import diagnose_run
    from marlm.eval.training_folder import check_training_run

    check_training_run(run_folder)
    findings = diagnose_run(run_folder)
    for finding in findings:
        typer.echo(str(finding))
    if not findings:
        typer.echo("no findings")


def _train_deep(
    env_fn,
    config,
    title: str,
    reached_fn,
    outputs: TrainingOutputs,
    diagnose: bool,
    plot: bool,
    workers: int = 1,
) -> None:
    """A network learner (:func:`marlm.eval.deep_runs.run_deep`): check the outputs (every
    ``config.chunk`` joint steps) and PyTorch, then train as :func:`_train` does."""
    from marlm.experiments.training import check_deep_run, probe_environment, require_torch

    outputs = dataclasses.replace(outputs, chunk=config.chunk)
    check_deep_run(outputs, config)
    require_torch()
    probe_environment(env_fn)  # before the claim, which deletes an old run with --overwrite
    from marlm.eval.deep_runs import run_deep

    work = lambda update: run_deep(  # noqa: E731
        env_fn, config, outputs.out, reached_fn=reached_fn, diagnose=diagnose, plot=plot,
        title=title, progress=update, checkpoint=outputs.checkpoint, resume=outputs.resume,
        workers=workers,
    )[1:]  # fmt: skip
    _train(outputs, work, deep=True)(title, drop=("config", "agents"), diagnose=diagnose)


@train_app.command("env")
def train_env_cmd(
    env: str = typer.Argument(
        ..., help="Your environment's factory as MODULE:NAME: a function or class that returns a "
        "PettingZoo ParallelEnv (e.g. marlm.envs.grid:GridRace)."),
    learner: str = opt("mappo", "mappo, ippo, qmix, dqn-vdn or dqn.", None, "--learner"),
    env_kwargs: str = opt(
        "{}", "Keyword arguments of the factory, as a JSON object.", None, "--env-kwargs"),
    steps: int | None = DEEP_STEPS,
    seed: int = SEED,
    gamma: float = opt(0.99, GAMMA, None, "--gamma"),
    lr: float | None = DEEP_LR,
    shared_reward: bool = opt(False, SHARED_REWARD, None, "--shared-reward/--individual-reward"),
    reward_norm: bool = opt(
        True, "Divide rewards by their running std.", None, "--reward-norm/--no-reward-norm"),
    envs: int = DEEP_ENVS,
    out: Path = opt(Path("runs/env"), RUN_FOLDER, None, "--out"),
    overwrite: bool = OVERWRITE,
    diagnose: bool = DIAGNOSE,
    checkpoint: Path | None = CHECKPOINT,
    resume: Path | None = RESUME,
    chunk: int = opt(
        DEEP_CHUNK, "Joint steps between progress updates/checkpoints (episodes carry over).",
        at_least(1), "--checkpoint-every"),
    plot: bool = PLOT,
    extra: list[str] | None = DEEP_SET,
    workers: int = WORKERS,
) -> None:  # fmt: skip
    """MAPPO, IPPO, QMIX, VDN or DQN on any PettingZoo ParallelEnv.

    Writes the run folder of `marlm train race` (curves.png, metrics.json, episodes.npz,
    tables.npz, findings.json); `marlm report` and `marlm diagnose` read it.
    """
    from marlm.experiments.training import deep_config, env_factory

    config = deep_config(  # refuses a learner that is not a network one, naming --learner
        learner, steps, lr, seed=seed, gamma=gamma, shared_reward=shared_reward,
        reward_norm=reward_norm, num_envs=envs, chunk=chunk, extra=extra or (),
    )  # fmt: skip
    env_fn = env_factory(env, env_kwargs)
    outputs = _outputs(out, checkpoint, resume, overwrite, chunk)
    _train_deep(env_fn, config, f"{env} {learner}", None, outputs, diagnose, plot, workers)
