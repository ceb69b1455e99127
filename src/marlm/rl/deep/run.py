"""The deep learners' training loop: chunks, checkpoints, resume.

A run is ``config.steps`` joint steps in chunks of ``config.chunk``; the copies of the
environment start once and their episodes carry over from chunk to chunk. After a chunk the
whole run is in the learner's arrays, the run's generator and each copy's episode under way,
kept as its reset seed and the actions since (:meth:`VecParallelEnv.partial_arrays`): a
checkpoint written there (:mod:`marlm.rl.checkpoint`, kind ``"deep"``) resumes the run draw for
draw, replaying those actions to put every copy back where it was, and a resumed run ends with
the same weights and episode logs as the uninterrupted one (tested; the replay assumes what
PettingZoo's API asks, an environment deterministic given its seed and actions). That holds for a
checkpoint at a chunk's end; one written at the end of a shorter last chunk (a first run whose
``--steps`` is not a multiple of the chunk, extended later) goes on correctly but its updates
fall at other steps than one long run's (a warning says so). A checkpoint written before
episodes carried over restarts the copies. Seeding happens once, here:
``numpy.random.default_rng(config.seed)`` draws every action, minibatch and reset seed; the
weights' initialisation uses a ``torch.Generator`` seeded with the same number.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from marlm.errors import InputError, RunError
from marlm.rl.checkpoint import load_checkpoint, restore_rng, save_checkpoint
from marlm.rl.deep.common import (
    PPO_LEARNERS,
    DeepConfig,
    EnvShape,
    ReachedFn,
    VecParallelEnv,
    check_resume_config,
)
from marlm.rl.deep.episodes import EPISODE_FIELDS, stack_episodes

CHECKPOINT_KIND = "deep"
ProgressFn = Callable[[int, int], None]  # (joint steps done, total)


@dataclass
class DeepResult:
    """A finished (or stopped) deep run.

    ``episodes``: the arrays of :data:`marlm.rl.deep.episodes.EPISODE_FIELDS`; ``step``: joint
    steps done; ``losses``: the last update's ``losses/...`` figures; ``policy``: the actor (or
    Q-network) as arrays for :class:`marlm.rl.deep.policy.NumpyPolicy`; ``learner``: the
    PyTorch learner itself (for evaluation in the same process).
    """

    config: DeepConfig
    shape: EnvShape
    episodes: dict[str, np.ndarray]
    step: int
    losses: dict[str, float]
    policy: dict[str, Any]
    learner: Any
    rng: np.random.Generator
    history: list[dict[str, float]] = field(default_factory=list)

    @property
    def agents(self) -> list[str]:
        return self.shape.agents


def make_learner(shape: EnvShape, config: DeepConfig) -> Any:
    """The learner of ``config.learner`` for ``shape`` (imports PyTorch).

    Raises:
        InputError: a value-based learner on a ``Box`` action space.
    """
    if config.learner in PPO_LEARNERS:
        from marlm.rl.deep.ppo import PPOLearner

        return PPOLearner(shape, config)
    if not shape.discrete:
        raise InputError(
            f"{config.learner} needs a Discrete action space and this environment's is a Box "
            f"{shape.action_shape}; use --learner mappo or ippo (a Gaussian policy)",
            source="--learner",
            field="learner",
        )
    from marlm.rl.deep.dqn import DQNLearner

    return DQNLearner(shape, config)


def _meta_config(config: DeepConfig, shape: EnvShape) -> dict[str, Any]:
    return {**config.to_dict(), "env": shape.name, "agents": shape.agents, **_sizes(shape)}


def _sizes(shape: EnvShape) -> dict[str, Any]:
    """What the networks' sizes follow from: a checkpoint of other sizes cannot be loaded."""
    return {"obs_dim": shape.obs_dim, "n_actions": shape.n_actions,
            "action_shape": list(shape.action_shape), "state_dim": shape.state_dim}  # fmt: skip


def train_deep(
    env_fn: Callable[[], Any],
    config: DeepConfig,
    *,
    reached_fn: ReachedFn | None = None,
    progress: ProgressFn | None = None,
    checkpoint: str | Path | None = None,
    resume: str | Path | None = None,
    stop_after: int | None = None,
    workers: int = 1,
) -> DeepResult:
    """Train ``config.learner`` on ``config.num_envs`` copies of ``env_fn()``.

    Args:
        env_fn: makes one PettingZoo ParallelEnv.
        config: the run's settings.
        reached_fn: optional task-success test, logged as ``reached`` (GridRace: the goal).
        progress: called as ``progress(steps done, total)`` after each chunk.
        checkpoint: a ``.npz`` path rewritten atomically after each chunk.
        resume: a checkpoint of this kind to continue from (same settings and environment).
        stop_after: stop once this many joint steps are done (to simulate an interruption).
        workers: Ray actors that hold and step the copies (:mod:`marlm.rl.deep.copies`); 1
            steps them in this process. The result is the same for any number (the generator,
            the actions and the updates stay in this process); ``env_fn`` must then be
            picklable by reference (a module-level factory or a ``functools.partial`` of one).

    Raises:
        InputError: an environment the learners cannot take (see :class:`VecParallelEnv`), a
            value-based learner on Box actions, a resume checkpoint of another kind, setting,
            environment or agent set; ``workers`` below 1.
        RunError: the run reached ``config.steps`` without any episode finishing (nothing to log
            or compare), or a network weight turned NaN or inf.
    """
    rng = np.random.default_rng(config.seed)
    vec = VecParallelEnv(env_fn, config.num_envs, rng, reached_fn, workers=workers)
    try:
        return _train(vec, config, rng, progress, checkpoint, resume, stop_after)
    finally:
        vec.close()


def _train(
    vec: VecParallelEnv,
    config: DeepConfig,
    rng: np.random.Generator,
    progress: ProgressFn | None,
    checkpoint: str | Path | None,
    resume: str | Path | None,
    stop_after: int | None,
) -> DeepResult:
    shape = vec.shape
    learner = make_learner(shape, config)
    step, episodes, history = 0, [], []
    partial: dict[str, np.ndarray] = {}
    if resume is not None:
        meta, arrays = load_checkpoint(resume, kind=CHECKPOINT_KIND)
        saved = meta["config"]
        check_resume_config(saved, config, resume)
        for key, value in (("env", shape.name), ("agents", shape.agents)):
            if saved.get(key) != value:
                raise InputError(
                    f"checkpoint was trained on {key}={saved.get(key)!r}, this run has {value!r}",
                    source=resume,
                    field="checkpoint",
                )
        for key, value in _sizes(shape).items():  # checkpoints before sizes were kept: no check
            if key in saved and saved[key] != value:
                raise InputError(
                    f"checkpoint was trained on an environment with {key} {saved[key]!r}, this "
                    f"one has {value!r}: resume with the environment and --env-kwargs of the "
                    "checkpointed run, or start a new run",
                    source=resume,
                    field="checkpoint",
                )
        step = meta["episode"]  # the checkpoint format's counter: joint steps here
        if step > config.steps:
            raise InputError(
                f"checkpoint already has {step} steps, more than --steps {config.steps}; pass "
                f"--steps above {step} (the total to reach), or start a new run without --resume",
                source=resume,
                field="steps",
            )
        if step % config.chunk:
            warnings.warn(
                f"the checkpoint ends at step {step}, not a multiple of --checkpoint-every "
                f"{config.chunk} (the run it ended had --steps {step}): the run goes on from it "
                "correctly, but not draw for draw as one run of these --steps would (its updates "
                "fall at other steps)",
                RuntimeWarning, stacklevel=2,
            )  # fmt: skip
        learner.load_state_arrays({k[6:]: v for k, v in arrays.items() if k.startswith("state/")})
        if config.learner in VALUE_LEARNERS:  # the exploration schedule goes on as it started
            learner.schedule_steps = int(saved.get("schedule_steps", saved["steps"]))
        done = {f: arrays[f"episodes/{f}"] for f in EPISODE_FIELDS}
        episodes = [{f: done[f][j] for f in EPISODE_FIELDS} for j in range(len(done["length"]))]
        rng = vec.rng = restore_rng(meta["rng_state"])
        partial = {k[8:]: v for k, v in arrays.items() if k.startswith("partial/")}
    losses: dict[str, float] = {}
    end = config.steps if stop_after is None else min(config.steps, stop_after)
    if partial:
        vec.restore(partial["seeds"], partial["lengths"], partial["actions"])
    else:
        vec.reset()
    while step < end:
        n = min(config.chunk, end - step)
        vec.t = step
        losses = learner.train_steps(vec, rng, n)
        _check_finite(learner, step, n, checkpoint)
        episodes += vec.take_episodes()
        step += n
        history.append({"step": step, **losses})
        if checkpoint is not None:
            arrays = {f"state/{k}": v for k, v in learner.state_arrays().items()}
            logs = stack_episodes(episodes, len(shape.agents), shape.n_actions)
            arrays.update({f"episodes/{k}": v for k, v in logs.items()})
            arrays.update({f"partial/{k}": v for k, v in vec.partial_arrays().items()})
            save_checkpoint(
                checkpoint, kind=CHECKPOINT_KIND,
                config={**_meta_config(config, shape), "schedule_steps": _schedule(learner, config)},
                episode=step, rng=rng, arrays=arrays,
            )  # fmt: skip
        if progress is not None:
            progress(step, config.steps)
    if not episodes and step >= config.steps:
        per_copy = step // config.num_envs
        raise RunError(
            f"no episode finished in {step} joint steps ({per_copy} step"
            f"{'s' if per_copy != 1 else ''} per copy with --envs {config.num_envs}), fewer than "
            "one episode of this environment: "
            "nothing to log or compare; raise --steps or lower --envs"
        )
    return DeepResult(
        config, shape, stack_episodes(episodes, len(shape.agents), shape.n_actions), step,
        losses, learner.policy_arrays(), learner, rng, history,
    )  # fmt: skip


#: The learners with an exploration schedule over the run's steps (epsilon-greedy).
VALUE_LEARNERS = ("qmix", "dqn-vdn", "dqn")


def _schedule(learner: Any, config: DeepConfig) -> int:
    """The steps the learner's schedule spans (``config.steps`` for the policy-gradient ones)."""
    return int(learner.schedule_steps) if config.learner in VALUE_LEARNERS else config.steps


def _check_finite(learner: Any, step: int, n: int, checkpoint: str | Path | None) -> None:
    """Stop at the first non-finite network weight after a chunk, before it is saved (a loss
    is NaN by design before the first update: the weights are what a NaN spreads to).

    Raises:
        RunError: naming the weight array, the steps and what was kept.
    """
    kept = (
        f"the checkpoint {checkpoint} holds step {step}"
        if checkpoint is not None and step
        else "nothing was saved"
    )
    for name, array in learner.state_arrays().items():
        a = np.asarray(array)
        if name.startswith("replay/"):
            continue  # stored transitions: checked as they came from the environment
        if a.dtype.kind == "f" and not np.isfinite(a).all():
            raise RunError(
                f"the network weights {name} hold NaN or inf after steps {step + 1}-{step + n}; "
                f"{kept}. Lower --lr, or keep --reward-norm on, and try again"
            )


def evaluate(
    result: DeepResult,
    env_fn: Callable[[], Any],
    episodes: int,
    seed: int = 12345,
    reached_fn: ReachedFn | None = None,
) -> dict[str, np.ndarray]:
    """Run the trained policy's deterministic actions (:class:`NumpyPolicy`, no exploration)
    for ``episodes`` episodes on one fresh environment; returns the per-episode arrays of
    :data:`marlm.rl.deep.episodes.EPISODE_FIELDS`."""
    from marlm.rl.deep.policy import NumpyPolicy, policy_to_arrays

    policy = NumpyPolicy(policy_to_arrays(result.policy))
    rng = np.random.default_rng(seed)
    vec = VecParallelEnv(env_fn, 1, rng, reached_fn)
    vec.reset()
    n = len(vec.agents)
    ids = np.arange(n)
    while len(vec.episodes) < episodes:
        acts = policy.act(vec.obs[0], ids)
        vec.step(acts[None])
    return stack_episodes(vec.take_episodes()[:episodes], n, vec.shape.n_actions)


def curve_window(n: int) -> int:
    """Episodes averaged for the final metrics of an n-episode run: a tenth, at least 1 (the
    tabular runs' rule, :func:`marlm.rl.train.curve_window`)."""
    return max(1, n // 10)


def deep_metrics(res: DeepResult, *, reached: bool = False) -> dict[str, Any]:
    """Metrics of a deep run, fixed names: per agent first (``charts/<agent>/return``, its own
    part; ``charts/<agent>/learning_return``, the reward it learned from; with ``reached``,
    ``charts/<agent>/reached_goal_rate``), then the team (labelled ``sum``), then the last
    update's ``losses/...``; ``learning_rate`` is the step size used (halved for a shared
    reward, :attr:`DeepConfig.effective_lr`)."""
    ep = res.episodes
    n = len(ep["length"])
    w = curve_window(n)
    out: dict[str, Any] = {
        "env": res.shape.name,
        "config": res.config.to_dict(),
        "learner": res.config.learner,
        "agents": list(res.agents),
        "episodes": n,
        "steps": res.step,
        "learning_rate": res.config.effective_lr,
        "team_curve": "sum",
        "window": w,
    }
    if n == 0:
        return out
    for i, agent in enumerate(res.agents):
        out[f"charts/{agent}/return"] = float(ep["own_return"][n - w :, i].mean())
        out[f"charts/{agent}/learning_return"] = float(ep["learn_return"][n - w :, i].mean())
        if reached:
            out[f"charts/{agent}/reached_goal_rate"] = float(ep["reached"][n - w :, i].mean())
    out["charts/team_return_sum"] = float(ep["team_return"][n - w :].mean())
    out["charts/team_return_sum_first_window"] = float(ep["team_return"][:w].mean())
    out["charts/episodic_length"] = float(ep["length"][n - w :].mean())
    out.update({k: v for k, v in res.losses.items() if np.isfinite(v)})
    return out
