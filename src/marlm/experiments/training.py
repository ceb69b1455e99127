"""The settings of the training commands that are not a learner's own config: the LLM reward of
``marlm train gridworld --reward llm``, the network learners on GridRace (``marlm train race
--learner mappo|...``) and on any PettingZoo ParallelEnv (``marlm train env MODULE:NAME``).

Each function checks its settings and raises :class:`marlm.errors.InputError` naming the option
and the fix; the learners themselves are in :mod:`marlm.rl` (:mod:`marlm.rl.deep` for the
networks: MAPPO/IPPO, Yu et al. 2022; QMIX, Rashid et al. 2018; VDN, Sunehag et al. 2018) and the
run folders they write in :mod:`marlm.eval.runs` and :mod:`marlm.eval.deep_runs`.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from marlm.errors import InputError
from marlm.rl.deep import RACE_STEPS

#: The variables OpenBLAS reads its thread count from, in its order of precedence.
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")

#: The learners with neural networks, as ``--learner`` takes them (the same tuple as
#: :data:`marlm.rl.deep.common.DEEP_LEARNERS`, kept here so that ``--help`` imports nothing).
DEEP_LEARNERS = ("mappo", "ippo", "qmix", "dqn-vdn", "dqn")
#: Joint steps between checkpoints of a deep run when ``--checkpoint-every`` is left at the
#: tabular default (1000 episodes).
DEEP_CHUNK = 10_240


def import_numpy_without_blas_threads() -> None:
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


def metrics_table(title: str, metrics: dict[str, Any], drop: tuple[str, ...] = ("config",)) -> Any:
    """A training run's metrics (but the keys in ``drop``) as a rich ``Table``: one row per
    metric, floats to 4 decimals."""
    from rich.table import Table

    table = Table(title=title)
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, value in metrics.items():
        if key not in drop:
            table.add_row(key, f"{value:.4f}" if isinstance(value, float) else str(value))
    return table


def check_gridworld_reward(reward: str, **given: Any) -> None:
    """``marlm train gridworld --reward``: ``env`` or ``llm``; the model's options (``given``:
    ``llm_samples``, ``llm``, ``llm_model``, as parsed, None or their defaults where not
    given) only with ``llm``, which reads them (``--reward env`` would ignore them).

    Raises:
        InputError: another reward (``--reward``), or a model option given with ``--reward env``,
            naming it and the fix.
    """
    if reward not in ("env", "llm"):
        raise InputError(f"unknown reward {reward!r}; allowed: env, llm", field="--reward")
    from marlm.experiments.settings import LLM_DEFAULT, LLM_MODEL_DEFAULT

    defaults = {"llm_samples": None, "llm": LLM_DEFAULT, "llm_model": LLM_MODEL_DEFAULT}
    for name, value in given.items():
        if reward == "env" and value not in (None, defaults[name]):
            option = "--" + name.replace("_", "-")
            raise InputError(
                f"is the LLM reward's option and --reward env asks no model, so it would be "
                f"ignored; drop {option} {value}, or pass --reward llm",
                field=option,
            )


def llm_reward(samples: int | None, llm: str, model_name: str, timeout_s: float) -> Any:
    """The LLM reward function (:class:`marlm.llm.reward.LLMReward`, ``samples`` paraphrased
    prompts per distinct state, None: 3) on the ``--llm`` backend, for GridWorld's task.

    Raises:
        InputError: ``samples`` < 1 (``--llm-samples``), the LLM extra missing (``--reward``),
            or a backend the factory refuses (``--llm``). The reward returned raises it too,
            naming ``--llm``, when its backend fails during training.
    """
    try:
        from marlm.llm.backends import make_backend
        from marlm.llm.reward import LLMReward
    except ImportError as e:  # pragma: no cover - depends on the installed extras
        raise InputError(f"the LLM reward is not available: {e}", source="--reward") from e
    samples = 3 if samples is None else samples
    if samples < 1:
        raise InputError(
            f"must be a whole number >= 1, got {samples}", source="--llm-samples", field="k"
        )
    model = make_backend(llm, model=model_name, timeout_s=timeout_s)
    return _command_reward(LLMReward)(
        model, task="reach the goal cell in as few steps as possible", k=samples
    )


def _command_reward(base: type) -> type:
    """``base`` (:class:`marlm.llm.reward.LLMReward`) for a command: a backend that fails (a
    server that is down, refuses the connection or never answers) ends the run with one
    ``marlm: error:`` line naming ``--llm`` and the fix, not a traceback of the HTTP client."""
    from marlm.llm.errors import BackendError

    class CommandReward(base):
        def __call__(self, state_text: str) -> float:
            try:
                return super().__call__(state_text)
            except BackendError as e:
                fix = (
                    "start the server (or check the URL and --llm-model), or pass --llm embedded"
                    if e.url  # the HTTP backend's errors carry the server's URL
                    else "pass another --llm: 'embedded', a .gguf file or a server URL"
                )
                raise InputError(
                    f"the LLM reward's model failed: {e}; {fix}", source="--llm"
                ) from e

    return CommandReward


def require_torch() -> None:
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


def check_deep_run(outputs: Any, config: Any) -> None:
    """Every refusal of a network learner's run before its run folder is claimed, so that a
    refused command leaves the folder as it found it: the outputs
    (:meth:`marlm.eval.training_folder.TrainingOutputs.check`, a ``TrainingOutputs``) and the
    settings of the ``--resume`` checkpoint against ``config`` (a
    :class:`marlm.rl.deep.common.DeepConfig`). The environment and its agents are checked
    against the checkpoint once the learner builds them, after the claim.

    Raises:
        InputError: naming ``--checkpoint-every``, ``--resume``, ``--out`` or ``--checkpoint``.
    """
    from marlm.rl.checkpoint import load_checkpoint
    from marlm.rl.deep.common import check_resume_config

    outputs.check(kind="deep")
    if outputs.resume is not None:
        meta, _ = load_checkpoint(outputs.resume, kind="deep")
        check_resume_config(meta["config"], config, outputs.resume)


def probe_environment(env_fn: Callable[[], Any]) -> None:
    """Build one copy of the environment and reset it as training will
    (:class:`marlm.rl.deep.common.VecParallelEnv`: spaces, agents, ``state()``, the first
    reset's answer), before the run folder is claimed: with ``--overwrite`` the old run is
    deleted at the claim, so an environment refused here leaves it in place. What only a step
    can show (a NaN at step 7) is still found during training. Draws nothing from the run's
    generator.

    Raises:
        InputError: as :class:`VecParallelEnv` and its ``reset`` do.
    """
    import numpy as np

    from marlm.rl.deep.common import VecParallelEnv

    vec = VecParallelEnv(env_fn, 1, np.random.default_rng(0))
    try:
        vec.reset()
    finally:
        vec.close()


def deep_config(
    learner: str, steps: int | None, lr: float | None, *, extra: Sequence[str] = (),
    **settings: Any,
) -> Any:  # fmt: skip
    """A :class:`marlm.rl.deep.common.DeepConfig` (``steps``, ``lr`` or a setting None such as
    ``num_envs``: its default), with ``extra``, the ``--set FIELD=VALUE`` pairs
    (:func:`marlm.rl.deep.settings.parse_settings`).

    Raises:
        InputError: naming ``--learner``: a tabular learner (``iql``, ``vdn``, ``jal``, whose
            command is ``marlm train race``; ``q``, ``marlm train gridworld``); naming
            ``--set``: a pair it refuses; or a setting :class:`DeepConfig` refuses.
    """
    from marlm.rl.configs import RACE_LEARNERS
    from marlm.rl.deep.common import DeepConfig
    from marlm.rl.deep.settings import parse_settings

    if learner in (*RACE_LEARNERS, "q"):
        env, command = ("GridWorld", "gridworld") if learner == "q" else ("GridRace", "race")
        raise InputError(
            f"{learner!r} is a tabular learner of {env}: run it with marlm train {command} "
            f"--learner {learner}; this command takes a network learner: "
            f"{', '.join(DEEP_LEARNERS[:-1])} or {DEEP_LEARNERS[-1]}",
            field="--learner",
        )
    defaults = {f.name: f.default for f in dataclasses.fields(DeepConfig)}
    given = {"steps": steps, "lr": lr, **settings}
    return DeepConfig(
        learner=learner,
        **{k: v for k, v in given.items() if v is not None},
        **parse_settings(extra, defaults, learner),
    )


def _gridrace_reached(agent: str, terminated: bool, info: dict, *, goal: int) -> bool:
    """GridRace's task: the agent terminated on the goal (as the tabular race logs ``reached``)."""
    return terminated and info.get("cell") == goal


def gridrace_deep(
    *, learner: str, reward: str, end: str, episodes: int | None, steps: int | None,
    chunk: int, lr: float | None, **settings: Any,
) -> tuple[Callable[[], Any], Any, str, Callable[..., bool]]:  # fmt: skip
    """A network learner on GridRace: ``(env_fn, DeepConfig, title, reached_fn)`` for
    :func:`marlm.eval.deep_runs.run_deep`. ``steps`` None: :data:`marlm.rl.deep.RACE_STEPS`;
    ``chunk`` 1000 (the tabular default): :data:`DEEP_CHUNK`; ``settings`` (``seed``, ``gamma``,
    ``num_envs``, ``extra``: the ``--set`` pairs) go to :func:`deep_config`.

    Raises:
        InputError: a reward other than GridRace's own (``shared`` or ``individual``), or
            ``episodes`` given (the deep learners count ``--steps``).
    """
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
    config = deep_config(
        learner, RACE_STEPS if steps is None else steps, lr, shared_reward=reward == "shared",
        chunk=DEEP_CHUNK if chunk == 1000 else chunk, **settings,
    )  # fmt: skip
    from marlm.envs.grid import GridRace

    env_fn = functools.partial(GridRace, end=end, reward=reward)
    reached = functools.partial(_gridrace_reached, goal=GridRace().goal)
    return env_fn, config, f"GridRace {learner} / {reward}", reached


def env_factory(spec: str, kwargs_json: str) -> Callable[[], Any]:
    """``MODULE:FACTORY`` (and its keyword arguments as JSON) -> a function making the env.

    The factory is called once here, to check that it makes a PettingZoo ParallelEnv.

    Raises:
        InputError: naming ``ENV`` or ``--env-kwargs``: not of the form ``module:name``, a module
            that does not import, a missing or non-callable name, a factory that raises (naming
            ``--env-kwargs`` for a ``ValueError`` or ``TypeError`` with keyword arguments given,
            e.g. ``GridRace`` with ``size`` 0) or returns something that is not a PettingZoo
            ParallelEnv.
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise InputError(
            f"got {spec!r}; give the factory as MODULE:NAME, e.g. marlm.envs.grid:GridRace or "
            "pettingzoo.butterfly.pistonball_v6:parallel_env",
            field="ENV",
        )
    kwargs = _env_kwargs(kwargs_json)
    sys.path.insert(0, os.getcwd())  # a module next to the user, as `python -m` would find it
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise InputError(
            f"module {module_name!r} does not import ({e}); check the name and that it is "
            "installed or in the current folder",
            field="ENV",
        ) from e
    except Exception as e:  # a SyntaxError, or the module's own code failing on import
        raise InputError(
            f"module {module_name!r} raised {type(e).__name__} on import: {e}", field="ENV"
        ) from e
    factory = getattr(module, attr, None)  # the user's "module:attr" names it
    if not callable(factory):
        raise InputError(f"{module_name} has no callable {attr!r}", field="ENV")
    env_fn = functools.partial(factory, **kwargs)
    try:
        env = env_fn()
    except Exception as e:  # a bad argument (ValueError, TypeError) is the --env-kwargs' fault
        field = "--env-kwargs" if kwargs and isinstance(e, ValueError | TypeError) else "ENV"
        raise InputError(f"{spec}(**{kwargs}) raised {type(e).__name__}: {e}", field=field) from e
    # The ParallelEnv contract checked on the object (PettingZoo declares no protocol for it).
    missing = [m for m in ("possible_agents", "reset", "step", "observation_space", "action_space")
               if not hasattr(env, m)]  # fmt: skip
    # An AEC env has agent_iter (and agent_selection once reset), a ParallelEnv neither.
    if missing or hasattr(env, "agent_iter") or hasattr(env, "agent_selection"):
        what = "an AEC env (agent_iter)" if not missing else f"no {', '.join(missing)}"
        raise InputError(
            f"{spec} made {type(env).__name__}, {what}: not a PettingZoo ParallelEnv; give a "
            "factory of one (PettingZoo's modules have parallel_env)",
            field="ENV",
        )
    return env_fn


def _env_kwargs(kwargs_json: str) -> dict[str, Any]:
    """``--env-kwargs`` parsed: a JSON object."""
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
    return kwargs


#: The options of ``marlm train race`` that only one kind of run reads: option -> (what reads
#: it, the ``(learner kind, reward)`` test of a run that reads it, the fix for another run).
_TABLES_ONLY = "a table's (iql, vdn, jal)"
_NETWORKS_ONLY = f"a network learner's ({', '.join(DEEP_LEARNERS)})"


def check_race_learner(learner: str, reward: str = "shared", **given: Any) -> dict[str, Any]:
    """``marlm train race``'s ``--learner`` and the options only one kind of run reads, each
    refused where it would be silently ignored: ``--workers`` above 1, ``--steps``, ``--lr``
    and ``--envs`` with a table (a network learner's), ``--alpha`` and the ``--epsilon`` schedule
    with a network learner (a table's), ``--mix-weight`` without ``--reward mixed`` and
    ``--counterfactual`` without ``--reward difference``.

    Args:
        learner, reward: the ``--learner`` and ``--reward`` values.
        given: the options as parsed, None where not given: ``workers`` (1 by default),
            ``steps``, ``lr``, ``envs``, ``mix_weight``, ``counterfactual``, ``alpha``,
            ``epsilon``, ``epsilon_decay``, ``epsilon_floor``.

    Returns:
        The settings of a table's :class:`marlm.rl.configs.RaceConfig`: ``learner``,
        ``reward``, ``mix_weight``, ``counterfactual``, ``alpha``, ``epsilon_start``,
        ``epsilon_decay``, ``epsilon_floor`` (the config's defaults where not given); for a
        network learner ``learner`` and ``reward`` only. A table's numpy is imported here, on
        one BLAS thread (:func:`import_numpy_without_blas_threads`).

    Raises:
        InputError: another learner, listing both kinds; an option the run would not read,
            naming it and the fix.
    """
    if learner not in ("iql", "vdn", "jal", *DEEP_LEARNERS):
        allowed = ", ".join(("iql", "vdn", "jal", *DEEP_LEARNERS))
        raise InputError(f"unknown learner {learner!r}; allowed: {allowed}", field="--learner")
    deep = learner in DEEP_LEARNERS
    workers = given.pop("workers", 1)
    if workers != 1 and not deep:
        raise InputError(
            f"--workers {workers} runs the copies of a network learner's environment in Ray "
            f"actors; the table of --learner {learner} trains in this process: drop --workers "
            f"or pass a network --learner ({', '.join(DEEP_LEARNERS)})",
            field="--workers",
        )
    explore = "pass a table --learner (a network learner explores by its own policy)"
    readers = {  # option: (read by this run, whose option it is, the other fix)
        "steps": (deep, _NETWORKS_ONLY, "pass a network --learner (a table counts --episodes)"),
        "lr": (deep, _NETWORKS_ONLY, "use --alpha, a table's step size"),
        "envs": (deep, _NETWORKS_ONLY, "pass a network --learner (a table steps one copy)"),
        "set": (deep, _NETWORKS_ONLY, "pass a network --learner (a table's settings are options)"),
        "alpha": (not deep, _TABLES_ONLY, "use --lr, a network learner's step size"),
        "epsilon": (not deep, _TABLES_ONLY, explore),
        "epsilon_decay": (not deep, _TABLES_ONLY, explore),
        "epsilon_floor": (not deep, _TABLES_ONLY, explore),
        "mix_weight": (reward == "mixed", "--reward mixed's", "pass --reward mixed"),
        "counterfactual": (
            reward == "difference",
            "--reward difference's",
            "pass --reward difference",
        ),
    }
    for name, (read, whose, fix) in readers.items():
        value = given.get(name)
        if isinstance(value, list | tuple):  # --set, repeated (an empty pair is given too)
            value = " --set ".join(value) or (repr(value[0]) if value else None)
        if value is not None and not read:
            option = "--" + name.replace("_", "-")
            run = f"--reward {reward}" if whose.startswith("--") else f"--learner {learner}"
            raise InputError(
                f"is {whose} option and this run ({run}) would ignore it; drop {option} "
                f"{value}, or {fix}",
                field=option,
            )
    if deep:  # the network learners' settings are gridrace_deep's
        return {"learner": learner, "reward": reward}
    import_numpy_without_blas_threads()  # before the config imports numpy (a table's BLAS: 1)
    from marlm.rl.configs import RaceConfig

    table = {"epsilon_start": given.get("epsilon"), **given}
    own = (
        "mix_weight",
        "counterfactual",
        "alpha",
        "epsilon_start",
        "epsilon_decay",
        "epsilon_floor",
    )
    settings = {k: RaceConfig.__dataclass_fields__[k].default for k in own}
    settings.update({k: table[k] for k in own if table.get(k) is not None})
    return {"learner": learner, "reward": reward, **settings}


__all__ = [
    "check_gridworld_reward",
    "check_race_learner",
    "BLAS_THREAD_VARIABLES",
    "DEEP_CHUNK",
    "DEEP_LEARNERS",
    "deep_config",
    "env_factory",
    "gridrace_deep",
    "import_numpy_without_blas_threads",
    "llm_reward",
    "metrics_table",
    "require_torch",
]
