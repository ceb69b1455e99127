"""Commands: ``marlm train gridworld``, ``marlm train race``, ``marlm diagnose RUN_FOLDER``.

No logic here: options are passed to :mod:`marlm.rl.train` (configs), :mod:`marlm.eval.runs`
(train and write the run folder) and :mod:`marlm.eval.diagnose`, which validate them (bad values
raise :class:`marlm.errors.InputError`, exit code 2).
"""

from __future__ import annotations

import os
import shlex
import sys
import time
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from marlm.errors import InputError
from marlm.eval.outputs import check_output_file, check_run_folder, claim_run_folder

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
    train_app,
)
from .app import console as rich_console

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress

EPISODES = typer.Option(
    None,
    "--episodes",
    help="Episodes to train (default: the seed note's settings, 3000 on gridworld, 30000 on race).",
    callback=at_least(1, example=1000),
)
SEED = typer.Option(
    0,
    "--seed",
    help="Seed of the run's random generator.",
    callback=SEED_BOUND,
)
ENGINE = typer.Option("fast", "--engine", help="fast (compiled) or reference (plain Python).")
CHECKPOINT = typer.Option(
    None,
    "--checkpoint",
    help="Checkpoint file rewritten atomically: a new file, or the --resume file.",
)
OVERWRITE = typer.Option(
    False,
    "--overwrite",
    help="Replace the run already in --out (its files are deleted first) and an existing "
    "--checkpoint file.",
)
RESUME = typer.Option(
    None,
    "--resume",
    help="Continue from this checkpoint.",
    callback=input_file("a checkpoint file (.npz) written by --checkpoint"),
)
PLOT = typer.Option(
    True, "--plot/--no-plot", help="Write curves.png (--no-plot: no plot, matplotlib not loaded)."
)
CHUNK = typer.Option(
    1000,
    "--checkpoint-every",
    help="Episodes between progress updates/checkpoints.",
    callback=at_least(1),
)

#: The learners with neural networks, as ``--learner`` takes them (the same tuple as
#: :data:`marlm.rl.deep.common.DEEP_LEARNERS`, kept here so that ``--help`` imports nothing).
DEEP_LEARNERS = ("mappo", "ippo", "qmix", "dqn-vdn", "dqn")
#: Joint steps between checkpoints of a deep run when ``--checkpoint-every`` is left at the
#: tabular default (1000 episodes).
DEEP_CHUNK = 10_240

DEEP_STEPS = typer.Option(
    None,
    "--steps",
    help="Deep learners (mappo, ippo, qmix, dqn-vdn, dqn): joint environment steps to train, "
    "summed over the --envs copies (default 100000 on race, 200000 on env).",
    callback=at_least(1, example=100000),
)
DEEP_LR = typer.Option(
    None,
    "--lr",
    help="Deep learners: Adam's step size (default 0.001); halved when every agent gets the "
    "shared team reward.",
    callback=finite_at_least(0.0, exclusive=True),
)
DEEP_ENVS = typer.Option(
    8,
    "--envs",
    help="Deep learners: copies of the environment stepped together.",
    callback=at_least(1),
)


#: The variables OpenBLAS reads its thread count from, in its order of precedence.
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")


def _import_numpy_without_blas_threads() -> None:
    """Import numpy with its BLAS (OpenBLAS in numpy's wheels) on one thread.

    Tabular training multiplies no matrices, but OpenBLAS starts a pool of one thread a core
    when numpy loads it, which cost about 0.1 s of CPU (a sixth of a ``train race --no-plot``
    process). Its thread count is read from the environment at that load only, so it is set
    for the import and removed again (the environment of the process and of its children stays
    as it was). Nothing changes where numpy is already imported or the user chose a count
    (any of :data:`BLAS_THREAD_VARIABLES` set), and a BLAS that reads none of them ignores it.
    """
    if "numpy" in sys.modules or any(name in os.environ for name in BLAS_THREAD_VARIABLES):
        return
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    try:
        import numpy  # noqa: F401
    finally:
        del os.environ["OPENBLAS_NUM_THREADS"]


def _console() -> Console:
    """The output console; rich is imported by the commands that print, not at start-up."""
    return rich_console()


def _progress(console: Console) -> tuple[Progress, callable]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(
        TextColumn("[bold]training"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=console, transient=False,
    )  # fmt: skip
    task = bar.add_task("episodes", total=None)

    def update(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total)

    return bar, update


def _table(console: Console, title: str, rows: dict[str, object]) -> None:
    from rich.table import Table

    table = Table(title=title)
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, value in rows.items():
        table.add_row(key, f"{value:.4f}" if isinstance(value, float) else str(value))
    console.print(table)


def _check_outputs(
    out: Path,
    checkpoint: Path | None,
    resume: Path | None,
    overwrite: bool,
    *,
    chunk: int,
    kind: str,
    engine: str | None = None,
):
    """Check the options the config does not hold (``--engine`` of the tabular learners,
    ``--checkpoint-every``, the ``--resume`` file) and refuse to overwrite a run folder or a
    checkpoint unasked (before any work, and before the run folder is created)."""
    from marlm.rl.checkpoint import checkpoint_files, load_checkpoint
    from marlm.rl.train import ENGINES, check_checkpoint_every

    if engine is not None and engine not in ENGINES:
        raise InputError(f"got {engine!r}; allowed: {', '.join(ENGINES)}", field="--engine")
    check_checkpoint_every(chunk)
    if resume is not None:
        load_checkpoint(resume, kind=kind)
    check_run_folder(out, overwrite=overwrite, keep=checkpoint_files(resume))
    if checkpoint is not None:
        check_output_file(
            checkpoint,
            kind="checkpoint",
            overwrite=overwrite,
            option="--checkpoint",
            allow=[resume],
        )


def _resume_files(resume: Path | None) -> list[Path]:
    """The files of the ``--resume`` checkpoint (itself and its episode log): inputs of the
    run, never deleted from its run folder."""
    from marlm.rl.checkpoint import checkpoint_files

    return checkpoint_files(resume)


def _resume_hint(checkpoint: Path | None, resume: Path | None, out: Path, started: float) -> str:
    """What to run after Ctrl-C: the same command resuming from the checkpoint this run wrote
    (or the ``--resume`` file it started from), with ``--overwrite`` when the run folder holds
    files of the stopped run; or, without a checkpoint, how to get one next time."""
    ours = checkpoint is not None and checkpoint.is_file()
    ours = ours and (checkpoint.stat().st_mtime >= started or checkpoint == resume)
    if not ours:
        return (
            f"no checkpoint was written, so the run cannot resume (the run folder {out} is "
            "incomplete); --checkpoint FILE saves one every --checkpoint-every episodes"
        )
    args, rest = [], sys.argv[1:]
    while rest:  # the command as typed, without its --resume
        arg, rest = rest[0], rest[1:]
        if arg == "--resume":
            rest = rest[1:]
        elif not arg.startswith("--resume="):
            args.append(arg)
    from marlm.eval.outputs import CLAIM_FILE

    mine = {p.resolve() for p in [*_resume_files(checkpoint), out / CLAIM_FILE]}
    leftover = out.is_dir() and any(c.resolve() not in mine for c in out.iterdir())
    if leftover and "--overwrite" not in args:
        args.append("--overwrite")
    command = shlex.join(["marlm", *args, "--resume", str(checkpoint)])
    return f"the last checkpoint is {checkpoint}; resume with: {command}"


def _llm_reward_fn(
    samples: int, llm: str = "embedded", model_name: str = "local", timeout_s: float = 10.0
):
    """The LLM reward function on the ``--llm`` backend (imported only when asked for)."""
    try:
        from marlm.llm.backends import make_backend
        from marlm.llm.reward import LLMReward
    except ImportError as e:  # pragma: no cover - depends on the installed extras
        raise InputError(f"the LLM reward is not available: {e}", source="--reward") from e
    if samples < 1:
        raise InputError(
            f"must be a whole number >= 1, got {samples}", source="--llm-samples", field="k"
        )
    model = make_backend(llm, model=model_name, timeout_s=timeout_s)
    return LLMReward(model, task="reach the goal cell in as few steps as possible", k=samples)


@train_app.command("gridworld")
def train_gridworld_cmd(
    learner: str = typer.Option("q", "--learner", help="q (tabular Q-learning)."),
    reward: str = typer.Option(
        "env", "--reward", help="env (the env's reward) or llm (LLMReward)."
    ),
    llm_samples: int = typer.Option(
        3,
        "--llm-samples",
        help="With --reward llm: paraphrased prompts per distinct state.",
        callback=at_least(1),
    ),
    llm: Annotated[str, llm_option("With --reward llm: " + LLM_HELP)] = "embedded",
    llm_model: Annotated[str, llm_model_option()] = "local",
    llm_timeout: Annotated[float, llm_timeout_option()] = 60.0,
    episodes: int = EPISODES,
    seed: int = SEED,
    alpha: float = typer.Option(0.1, "--alpha", help="Learning rate."),
    gamma: float = typer.Option(0.95, "--gamma", help="Discount in [0, 1]."),
    epsilon: float = typer.Option(0.9, "--epsilon", help="Initial exploration rate."),
    epsilon_decay: float = typer.Option(0.99, "--epsilon-decay", help="Multiplier per episode."),
    epsilon_floor: float = typer.Option(0.02, "--epsilon-floor", help="Lowest exploration rate."),
    out: Path = typer.Option(
        Path("runs/gridworld"), "--out", help="Run folder to write: new or empty."
    ),
    overwrite: bool = OVERWRITE,
    engine: str = ENGINE,
    checkpoint: Path | None = CHECKPOINT,
    resume: Path | None = RESUME,
    chunk: int = CHUNK,
    plot: bool = PLOT,
) -> None:
    """Tabular Q-learning on the 4x4 GridWorld."""
    _import_numpy_without_blas_threads()
    from marlm.experiments.training import run_gridworld
    from marlm.rl.train import GridWorldConfig

    if reward not in ("env", "llm"):
        raise InputError(
            f"unknown reward {reward!r}; allowed: env, llm", source="--reward", field="reward"
        )
    config = GridWorldConfig(
        learner=learner, episodes=3000 if episodes is None else episodes, alpha=alpha, gamma=gamma,
        epsilon_start=epsilon, epsilon_decay=epsilon_decay, epsilon_floor=epsilon_floor, seed=seed,
    )  # fmt: skip
    _check_outputs(out, checkpoint, resume, overwrite, chunk=chunk, kind="gridworld", engine=engine)
    reward_fn = (
        _llm_reward_fn(llm_samples, llm, llm_model, llm_timeout) if reward == "llm" else None
    )
    claim_run_folder(out, overwrite=overwrite, keep=_resume_files(resume))
    console = _console()
    bar, update = _progress(console)
    started = time.time()
    with on_interrupt(lambda: _resume_hint(checkpoint, resume, out, started)), bar:
        _, metrics = run_gridworld(
            config, out, engine=engine, progress=update, checkpoint=checkpoint, resume=resume,
            chunk=chunk, reward_fn=reward_fn, plot=plot,
        )  # fmt: skip
    _table(
        console, "GridWorld", {k: v for k, v in metrics.items() if k not in ("config", "findings")}
    )
    for finding in metrics["findings"]:
        console.print(f"finding: {finding}")
    console.print(f"run folder: {out}")


@train_app.command("race")
def train_race_cmd(
    learner: str = typer.Option(
        "iql",
        "--learner",
        help="iql, vdn or jal (tables); mappo, ippo, qmix, dqn-vdn or dqn (networks, the deep "
        "extra).",
    ),
    reward: str = typer.Option(
        "shared", "--reward", help="shared, individual, mixed or difference."
    ),
    mix_weight: float = typer.Option(
        0.5, "--mix-weight", help="Weight of the individual part (mixed)."
    ),
    counterfactual: str = typer.Option(
        "absent", "--counterfactual", help="difference: absent (agent removed), stay or average."
    ),
    episodes: int = EPISODES,
    seed: int = SEED,
    end: str = typer.Option("any", "--end", help="any (classic) or all: when the episode ends."),
    alpha: float = typer.Option(0.05, "--alpha", help="Learning rate."),
    gamma: float = typer.Option(0.95, "--gamma", help="Discount in [0, 1]."),
    epsilon: float = typer.Option(0.6, "--epsilon", help="Initial exploration rate."),
    epsilon_decay: float = typer.Option(0.999, "--epsilon-decay", help="Multiplier per episode."),
    epsilon_floor: float = typer.Option(0.02, "--epsilon-floor", help="Lowest exploration rate."),
    out: Path = typer.Option(Path("runs/race"), "--out", help="Run folder to write: new or empty."),
    overwrite: bool = OVERWRITE,
    diagnose: bool = typer.Option(True, "--diagnose/--no-diagnose", help="Run the detectors."),
    engine: str = ENGINE,
    checkpoint: Path | None = CHECKPOINT,
    resume: Path | None = RESUME,
    chunk: int = CHUNK,
    plot: bool = PLOT,
    steps: int | None = DEEP_STEPS,
    lr: float | None = DEEP_LR,
    envs: int = DEEP_ENVS,
) -> None:
    """Two agents on GridRace: IQL, VDN or JAL.

    Independent, value-decomposition or joint-action learners, with a credit-assignment mode.
    Or network learners (mappo, ippo, qmix, dqn-vdn, dqn; docs/deep-rl.md), which count --steps
    instead of --episodes.
    """
    if learner in DEEP_LEARNERS:
        return _train_race_deep(
            learner=learner, reward=reward, end=end, episodes=episodes, steps=steps, seed=seed,
            gamma=gamma, lr=lr, envs=envs, out=out, overwrite=overwrite, diagnose=diagnose,
            checkpoint=checkpoint, resume=resume, chunk=chunk, plot=plot,
        )  # fmt: skip
    _import_numpy_without_blas_threads()
    from marlm.eval.plots import PlotProcess

    # Forked first (before numba loads, before the progress bar's thread), the plot process
    # imports matplotlib while this process imports numba and trains.
    started = time.time()
    with (
        on_interrupt(lambda: _resume_hint(checkpoint, resume, out, started)),
        PlotProcess() if plot else nullcontext() as plotter,
    ):
        from marlm.experiments.training import run_race
        from marlm.rl.train import RaceConfig

        config = RaceConfig(
            learner=learner, reward=reward, mix_weight=mix_weight, counterfactual=counterfactual,
            episodes=30000 if episodes is None else episodes, alpha=alpha, gamma=gamma,
            epsilon_start=epsilon, epsilon_decay=epsilon_decay, epsilon_floor=epsilon_floor,
            seed=seed, end=end,
        )  # fmt: skip
        _check_outputs(out, checkpoint, resume, overwrite, chunk=chunk, kind="race", engine=engine)
        claim_run_folder(out, overwrite=overwrite, keep=_resume_files(resume))
        console = _console()
        bar, update = _progress(console)
        with bar:
            _, metrics, findings = run_race(
                config, out, diagnose=diagnose, engine=engine, progress=update,
                checkpoint=checkpoint, resume=resume, chunk=chunk, plot=plotter or False,
            )  # fmt: skip
    _table(
        console,
        f"GridRace {learner} / {reward}",
        {k: v for k, v in metrics.items() if k != "config"},
    )
    for finding in findings:
        console.print(f"[yellow]finding[/] {finding}")
    if diagnose and not findings:
        console.print("no findings")
    console.print(f"run folder: {out}")


@app.command("diagnose")
def diagnose_cmd(
    run_folder: Path = typer.Argument(
        ...,
        help="A run folder written by marlm train gridworld or marlm train race "
        "(metrics.json and episodes.npz).",
    ),
) -> None:
    """Print the findings of a training run's diagnostics."""
    from marlm.eval.diagnose import diagnose_run

    _check_training_run(run_folder)
    findings = diagnose_run(run_folder)
    for finding in findings:
        typer.echo(str(finding))
    if not findings:
        typer.echo("no findings")


#: What ``marlm diagnose`` reads, for its messages.
_DIAGNOSE_TAKES = (
    "marlm diagnose reads a training run folder of marlm train gridworld or marlm train race "
    "(metrics.json and episodes.npz)"
)


def _check_training_run(path: Path) -> None:
    """Refuse, with what to run instead, a path that is not a training run folder: a demo or
    compare run (``marlm report`` shows those), a file, a missing path.

    Raises:
        InputError: naming ``RUN_FOLDER``, what ``marlm diagnose`` reads and the command to run.
    """
    from marlm.eval.outputs import COMPARE_MARKERS

    def refuse(what: str, instead: str) -> None:
        raise InputError(f"{what}; {_DIAGNOSE_TAKES}; {instead}", source=path, field="RUN_FOLDER")

    if not path.exists():
        refuse("no such folder", "give the --out folder of such a run")
    if not path.is_dir():
        refuse("is a file, not a folder", "give the --out folder of such a run")
    if (path / "episodes.npz").exists():
        return
    if (path / "trace.jsonl").is_file():
        refuse(
            "is a warehouse run of marlm demo or marlm compare (it has trace.jsonl)",
            f"for this run use marlm report {path} (figures, plots, LLM calls) or marlm replay "
            f"{path} --scheme rule",
        )
    if any((path / m).is_file() for m in COMPARE_MARKERS):
        refuse("is a run of marlm compare", f"for this run use marlm report {path}")
    refuse("has no episodes.npz", "give the --out folder of such a run")


# --------------------------------------------------------------------------------------------
# The deep learners (marlm.rl.deep): `train race --learner mappo|...` and `train env`
# --------------------------------------------------------------------------------------------


def _require_torch() -> None:
    """Refuse a deep learner without PyTorch, with the install command.

    Raises:
        InputError: naming ``--learner`` and ``pip install -e '.[deep]'``.
    """
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        raise InputError(
            "the deep learners need PyTorch, which is not installed; install the deep extra: "
            "pip install -e '.[deep]' (torch==2.13.0, a CPU build)",
            source="--learner",
            field="learner",
        )


def _deep_config(learner: str, steps: int, lr: float | None, **kwargs):
    from marlm.rl.deep.common import DeepConfig

    return DeepConfig(
        learner=learner, steps=steps, lr=DeepConfig.lr if lr is None else lr, **kwargs
    )


def _run_deep_command(
    env_fn, config, out: Path, *, title: str, reached_fn=None, overwrite: bool,
    checkpoint: Path | None, resume: Path | None, diagnose: bool, plot: bool, workers: int = 1,
) -> None:  # fmt: skip
    """Check the outputs, train with a progress bar, write the run folder, print the table."""
    _check_outputs(out, checkpoint, resume, overwrite, chunk=config.chunk, kind="deep")
    _require_torch()
    from marlm.eval.deep_runs import run_deep

    claim_run_folder(out, overwrite=overwrite, keep=[resume])
    console = _console()
    bar, update = _progress(console)
    started = time.time()
    with on_interrupt(lambda: _resume_hint(checkpoint, resume, out, started)), bar:
        _, metrics, findings = run_deep(
            env_fn, config, out, reached_fn=reached_fn, diagnose=diagnose, plot=plot,
            title=title, progress=update, checkpoint=checkpoint, resume=resume, workers=workers,
        )  # fmt: skip
    _table(console, title, {k: v for k, v in metrics.items() if k not in ("config", "agents")})
    for finding in findings:
        console.print(f"[yellow]finding[/] {finding}")
    if diagnose and not findings:
        console.print("no findings")
    console.print(f"run folder: {out}")


def _gridrace_reached(agent: str, terminated: bool, info: dict, *, goal: int) -> bool:
    """GridRace's task: the agent terminated on the goal (as the tabular race logs ``reached``)."""
    return terminated and info.get("cell") == goal


def _train_race_deep(
    *, learner: str, reward: str, end: str, episodes: int | None, steps: int | None, seed: int,
    gamma: float, lr: float | None, envs: int, out: Path, overwrite: bool, diagnose: bool,
    checkpoint: Path | None, resume: Path | None, chunk: int, plot: bool,
) -> None:  # fmt: skip
    """``marlm train race --learner mappo|ippo|qmix|dqn-vdn|dqn``: a network learner on GridRace,
    writing the same run folder as the tabular learners (:mod:`marlm.eval.deep_runs`)."""
    import functools

    if reward not in ("shared", "individual"):
        raise InputError(
            f"the deep learners learn from GridRace's own rewards: shared or individual, not "
            f"{reward!r}",
            source="--reward",
            field="reward",
        )
    if episodes is not None:
        raise InputError(
            "the deep learners count joint environment steps; pass --steps instead (e.g. "
            "--steps 100000)",
            source="--episodes",
            field="episodes",
        )
    config = _deep_config(
        learner, 100_000 if steps is None else steps, lr, seed=seed, gamma=gamma,
        shared_reward=reward == "shared", num_envs=envs,
        chunk=DEEP_CHUNK if chunk == 1000 else chunk,
    )  # fmt: skip
    from marlm.envs.grid import GridRace

    _run_deep_command(
        functools.partial(GridRace, end=end, reward=reward), config, out,
        title=f"GridRace {learner} / {reward}",
        reached_fn=functools.partial(_gridrace_reached, goal=GridRace().goal),
        overwrite=overwrite, checkpoint=checkpoint, resume=resume, diagnose=diagnose, plot=plot,
    )  # fmt: skip


def _env_factory(spec: str, kwargs_json: str):
    """``MODULE:FACTORY`` (and its keyword arguments as JSON) -> a function making the env.

    Raises:
        InputError: naming ``ENV`` or ``--env-kwargs``: not of the form ``module:name``, a module
            that does not import, a missing or non-callable name, a factory that raises or
            returns something that is not a PettingZoo ParallelEnv.
    """
    import functools
    import importlib
    import json

    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise InputError(
            f"got {spec!r}; give the factory as MODULE:NAME, e.g. marlm.envs.grid:GridRace or "
            "pettingzoo.butterfly.pistonball_v6:parallel_env",
            field="ENV",
        )
    try:
        kwargs = json.loads(kwargs_json)
    except ValueError as e:
        raise InputError(
            f"is not JSON ({e}); pass an object, e.g. --env-kwargs '{{\"size\": 4}}'",
            field="--env-kwargs",
        ) from e
    if not isinstance(kwargs, dict):
        raise InputError(
            f"must be a JSON object of keyword arguments, got {kwargs_json!r}", field="--env-kwargs"
        )
    sys.path.insert(0, os.getcwd())  # a module next to the user, as `python -m` would find it
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise InputError(
            f"module {module_name!r} does not import ({e}); check the name and that it is "
            "installed or in the current folder",
            field="ENV",
        ) from e
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise InputError(f"{module_name} has no callable {attr!r}", field="ENV")
    env_fn = functools.partial(factory, **kwargs)
    try:
        env = env_fn()
    except Exception as e:
        raise InputError(f"{spec}(**{kwargs}) raised {type(e).__name__}: {e}", field="ENV") from e
    missing = [m for m in ("possible_agents", "reset", "step", "observation_space", "action_space")
               if not hasattr(env, m)]  # fmt: skip
    if missing or hasattr(env, "agent_selection"):
        what = "an AEC env (agent_selection)" if not missing else f"no {', '.join(missing)}"
        raise InputError(
            f"{spec} made {type(env).__name__}, {what}: not a PettingZoo ParallelEnv; give a "
            "factory of one (PettingZoo's modules have parallel_env)",
            field="ENV",
        )
    return env_fn


@train_app.command("env")
def train_env_cmd(
    env: str = typer.Argument(
        ...,
        help="Your environment's factory as MODULE:NAME: a function or class that returns a "
        "PettingZoo ParallelEnv (e.g. marlm.envs.grid:GridRace).",
    ),
    learner: str = typer.Option("mappo", "--learner", help="mappo, ippo, qmix, dqn-vdn or dqn."),
    env_kwargs: str = typer.Option(
        "{}", "--env-kwargs", help="Keyword arguments of the factory, as a JSON object."
    ),
    steps: int | None = DEEP_STEPS,
    seed: int = SEED,
    gamma: float = typer.Option(0.99, "--gamma", help="Discount in [0, 1]."),
    lr: float | None = DEEP_LR,
    shared_reward: bool = typer.Option(
        False,
        "--shared-reward/--individual-reward",
        help="Every agent gets the team reward (the step size is halved; QMIX and VDN take it "
        "once, not summed) or each agent its own.",
    ),
    reward_norm: bool = typer.Option(
        True, "--reward-norm/--no-reward-norm", help="Divide rewards by their running std."
    ),
    envs: int = DEEP_ENVS,
    out: Path = typer.Option(Path("runs/env"), "--out", help="Run folder to write: new or empty."),
    overwrite: bool = OVERWRITE,
    diagnose: bool = typer.Option(True, "--diagnose/--no-diagnose", help="Run the detectors."),
    checkpoint: Path | None = CHECKPOINT,
    resume: Path | None = RESUME,
    chunk: int = typer.Option(
        DEEP_CHUNK,
        "--checkpoint-every",
        help="Joint steps between progress updates/checkpoints (the copies restart there).",
        callback=at_least(1),
    ),
    plot: bool = PLOT,
    workers: int = typer.Option(
        1,
        "--workers",
        help="Ray actors holding the environment's copies (1: this process). Same result for "
        "any number; pays when one step of the environment is slow.",
        callback=at_least(1),
    ),
) -> None:
    """MAPPO, IPPO, QMIX, VDN or DQN on any PettingZoo ParallelEnv.

    Writes the run folder of `marlm train race` (curves.png, metrics.json, episodes.npz,
    tables.npz, findings.json); `marlm report` and `marlm diagnose` read it.
    """
    if learner not in DEEP_LEARNERS:
        raise InputError(
            f"unknown learner {learner!r}; allowed: {', '.join(DEEP_LEARNERS)}",
            source="--learner",
            field="learner",
        )
    config = _deep_config(
        learner, 200_000 if steps is None else steps, lr, seed=seed, gamma=gamma,
        shared_reward=shared_reward, reward_norm=reward_norm, num_envs=envs, chunk=chunk,
    )  # fmt: skip
    env_fn = _env_factory(env, env_kwargs)
    _run_deep_command(
        env_fn, config, out, title=f"{env} {learner}", overwrite=overwrite,
        checkpoint=checkpoint, resume=resume, diagnose=diagnose, plot=plot, workers=workers,
    )  # fmt: skip
