"""Where the copies of the environment live: in this process, or in Ray actors (``--workers N``).

:class:`marlm.rl.deep.common.VecParallelEnv` keeps everything random and everything learned in
the driver: it draws every action and every reset seed from the run's generator, and asks the
copies only to ``reset(copy, seed)`` and to ``step`` with the joint actions it chose. The
copies' answers are plain data (the raw observation dicts, rewards, flags, infos, the agents
still in the episode, the ``state()``), so a copy answers the same whether it lives here or in
another process, and a run with ``workers`` actors gives the serial run's result for the same
seed, number for number (tested). Each step is one round trip to every actor, all actors
stepping their copies at once; it pays when an environment's step costs more than the round
trip (a fraction of a millisecond on one machine).

Ray: Moritz et al. 2018, "Ray: A Distributed Framework for Emerging AI Applications", OSDI.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Sequence
from typing import Any

from marlm.errors import InputError, RunError

#: ``(obs, rewards, terminations, truncations, infos, agents after the step, state() or None)``
StepAnswer = tuple[dict, dict, dict, dict, dict, list, Any]

#: Object store of a local Ray started here (bytes): the answers are small.
LOCAL_OBJECT_STORE_BYTES = 80 * 2**20


def env_call(what: str, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``method(*args, **kwargs)``, a method of the user's environment. An exception of the
    environment's own becomes one :class:`InputError` naming the method and where it was raised
    (field ``what``, e.g. ``step()``), never a traceback through marlm's loop; marlm's own errors
    and ``KeyboardInterrupt`` pass as they are.

    Raises:
        InputError: the method raised.
    """
    try:
        return method(*args, **kwargs)
    except (InputError, RunError):
        raise
    except Exception as e:
        frames = traceback.extract_tb(e.__traceback__)
        at = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
        raise InputError(
            f"the environment's {what} raised {type(e).__name__}: {e}{at}; fix the environment",
            field=what,
        ) from e


def _state_of(env: Any, with_state: bool) -> Any:
    return env_call("state()", env.state) if with_state else None


class LocalCopies:
    """The copies as a list of environments in this process.

    Args:
        envs: the environments (copy ``k`` is ``envs[k]``).
        with_state: whether to read ``env.state()`` after every reset and step.
    """

    def __init__(self, envs: Sequence[Any], with_state: bool) -> None:
        self.envs = list(envs)
        self.with_state = with_state

    def __len__(self) -> int:
        return len(self.envs)

    def reset(self, seeds: dict[int, int]) -> dict[int, tuple[dict, list, Any]]:
        """Reset copy ``k`` with ``seeds[k]``; returns ``{k: (obs, agents, state)}``.

        Raises:
            InputError: ``reset`` did not return PettingZoo's pair (field ``reset``).
        """
        out = {}
        for k, seed in seeds.items():
            env = self.envs[k]
            got = env_call("reset()", env.reset, seed=seed)
            if not (isinstance(got, tuple) and len(got) == 2 and isinstance(got[0], dict)):
                raise InputError("reset() must return (observations, infos), two dicts keyed by "
                                 "agent (PettingZoo's API)", field="reset")  # fmt: skip
            out[k] = (got[0], list(env.agents), _state_of(env, self.with_state))
        return out

    def step(self, joints: Sequence[dict]) -> list[StepAnswer]:
        """Step copy ``k`` with ``joints[k]`` (``{agent: action}``), every copy once."""
        return [
            _step(env, joint, self.with_state) for env, joint in zip(self.envs, joints, strict=True)
        ]

    def step_only(self, joints: dict[int, dict]) -> dict[int, StepAnswer]:
        """Step only copies ``k in joints``, each with ``joints[k]`` (a replay)."""
        return {k: _step(self.envs[k], joint, self.with_state) for k, joint in joints.items()}

    def close(self) -> None:
        pass


def _step(env: Any, joint: dict, with_state: bool) -> StepAnswer:
    got = env_call("step()", env.step, joint)
    if not (isinstance(got, tuple) and len(got) == 5):
        raise InputError(
            f"step() returned {type(got).__name__}"
            f"{f' of {len(got)}' if isinstance(got, tuple) else ''}: PettingZoo's step returns "
            "(observations, rewards, terminations, truncations, infos)",
            field="step",
        )
    obs, rewards, terms, truncs, infos = got
    return obs, rewards, terms, truncs, infos, list(env.agents), _state_of(env, with_state)


class _CopiesActor:
    """The body of one Ray actor: the copies ``ks`` of the environment, made by ``env_fn``."""

    def __init__(self, env_fn: Callable[[], Any], ks: list[int], with_state: bool) -> None:
        self.local = LocalCopies([env_fn() for _ in ks], with_state)
        self.index = {k: i for i, k in enumerate(ks)}

    def reset(self, seeds: dict[int, int]) -> dict[int, tuple[dict, list, Any]]:
        got = self.local.reset({self.index[k]: s for k, s in seeds.items()})
        back = {i: k for k, i in self.index.items()}
        return {back[i]: v for i, v in got.items()}

    def step(self, joints: list[dict]) -> list[StepAnswer]:
        return self.local.step(joints)

    def step_only(self, joints: dict[int, dict]) -> dict[int, StepAnswer]:
        got = self.local.step_only({self.index[k]: j for k, j in joints.items()})
        back = {i: k for k, i in self.index.items()}
        return {back[i]: v for i, v in got.items()}


def check_workers(workers: Any) -> int:
    """``workers`` as a whole number >= 1, or an :class:`InputError` naming ``--workers``."""
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise InputError(
            f"must be a whole number >= 1 (1 steps the copies in this process, without Ray), "
            f"got {workers!r}",
            source="--workers",
            field="workers",
        )
    return workers


class RayCopies:
    """The copies spread over ``workers`` Ray actors (copy ``k`` on actor ``k % workers``).

    Starts a local Ray with ``workers`` CPUs unless this process already joined one. ``env_fn``
    is shipped to the actors with cloudpickle, so it must be importable there (a module-level
    factory, a class, a ``functools.partial`` of one).

    Raises:
        InputError: ``workers`` below 1 (field ``workers``).
        RunError: from :meth:`reset` and :meth:`step`, when an actor died.
    """

    def __init__(
        self, env_fn: Callable[[], Any], num_envs: int, workers: int, with_state: bool
    ) -> None:
        import ray

        workers = min(check_workers(workers), num_envs)
        if not ray.is_initialized():
            ray.init(
                num_cpus=workers, include_dashboard=False, log_to_driver=False,
                object_store_memory=LOCAL_OBJECT_STORE_BYTES, configure_logging=False,
            )  # fmt: skip
        self._ray = ray
        self.num_envs = num_envs
        self.groups = [list(range(w, num_envs, workers)) for w in range(workers)]
        actor = ray.remote(num_cpus=1)(_CopiesActor)
        self.actors = [actor.remote(env_fn, ks, with_state) for ks in self.groups]

    def __len__(self) -> int:
        return self.num_envs

    def reset(self, seeds: dict[int, int]) -> dict[int, tuple[dict, list, Any]]:
        refs = []
        for actor, ks in zip(self.actors, self.groups, strict=True):
            mine = {k: seeds[k] for k in ks if k in seeds}
            if mine:
                # Ray's stubs type ``.remote`` only on actor methods decorated with ``ray.method``.
                refs.append(actor.reset.remote(mine))  # type: ignore[attr-defined]
        out: dict[int, tuple[dict, list, Any]] = {}
        for got in self._get(refs):
            out.update(got)
        return out

    def _get(self, refs: list[Any]) -> list[Any]:
        """``ray.get(refs)``; an actor that died (killed, out of memory, its node lost) is a
        :class:`RunError` in one line: the run cannot go on without its copies."""
        try:
            return self._ray.get(refs)
        except self._ray.exceptions.RayActorError as e:
            detail = str(e).strip().splitlines()[0] if str(e).strip() else ""
            raise RunError(
                f"a Ray actor holding copies of the environment died mid-training "
                f"({type(e).__name__}{': ' + detail[:160] if detail else ''})"
            ) from None

    def step(self, joints: Sequence[dict]) -> list[StepAnswer]:
        refs = [
            # Ray's stubs type ``.remote`` only on actor methods decorated with ``ray.method``.
            actor.step.remote([joints[k] for k in ks])  # type: ignore[attr-defined]
            for actor, ks in zip(self.actors, self.groups, strict=True)
        ]
        out: list[Any] = [None] * self.num_envs
        for ks, answers in zip(self.groups, self._get(refs), strict=True):
            for k, answer in zip(ks, answers, strict=True):
                out[k] = answer
        return out

    def step_only(self, joints: dict[int, dict]) -> dict[int, StepAnswer]:
        refs = []
        for actor, ks in zip(self.actors, self.groups, strict=True):
            mine = {k: joints[k] for k in ks if k in joints}
            if mine:
                # Ray's stubs type ``.remote`` only on actor methods decorated with ``ray.method``.
                refs.append(actor.step_only.remote(mine))  # type: ignore[attr-defined]
        out: dict[int, StepAnswer] = {}
        for got in self._get(refs):
            out.update(got)
        return out

    def close(self) -> None:
        for actor in self.actors:
            # Ray types what ``ActorClass.remote`` returns as ``ActorHandle | type``, a stand-in
            # for the decorated methods; at run time it is the ActorHandle ``kill`` takes.
            self._ray.kill(actor)  # type: ignore[arg-type]
        self.actors = []
