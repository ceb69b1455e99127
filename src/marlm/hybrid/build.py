"""The parts of a hybrid run built from plain settings (the CLI's options).

Commands hold no logic: :func:`build_planner` picks a planner on the chat backend
:func:`marlm.llm.backends.make_backend` builds from ``--llm``, and :func:`cached_policy` loads or
trains the executor's Q-table.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, get_args

from marlm.errors import InputError
from marlm.hybrid.defaults import DEFAULT_TRAINING
from marlm.hybrid.planning.planner import LLMPlanner, Planner, PlannerName, RulePlanner
from marlm.llm.backends import ChatModel, check_timeout_option, make_backend

if TYPE_CHECKING:
    from marlm.hybrid.acting.executor import QExecutor


#: Planner names ``--planner`` accepts. ``triage`` is ``triage-probe``, the best mode measured
#: (docs/triage.md). The values of :data:`marlm.hybrid.planning.planner.PlannerName`, the type the run
#: config validates, so the two lists cannot drift.
PLANNERS: tuple[str, ...] = get_args(PlannerName)


def build_planner(
    name: str, llm: str = "embedded", *, model_name: str = "local", timeout_s: float | None = None
) -> Planner:
    """A planner by name, on the backend :func:`marlm.llm.backends.make_backend` builds from
    ``llm`` (``model_name``: the model name sent to a server; ``timeout_s``: one call's limit in
    seconds, ``--llm-timeout``; None: :data:`marlm.llm.backends.spec.DEFAULT_TIMEOUT_S`).

    ``"llm"``: one model call assigns robots (:class:`LLMPlanner`); ``"rule"``: no model;
    ``"team"``: a coordinator ranks and a dispatcher assigns (:class:`TeamPlanner`);
    ``"triage[-MODE]"``: the model classifies each order's urgency from its note in MODE
    (generate, score, calibrated, batch, probe; default probe) and a solver matches robots
    (:class:`TriagePlanner`).

    Raises:
        InputError: an unknown planner; a ``timeout_s`` that is not a finite number > 0
            (``--llm-timeout``), checked for every planner so a bad value never passes unseen;
            an ``llm`` :func:`~marlm.llm.backends.make_backend` refuses.
    """
    if timeout_s is not None:
        check_timeout_option(timeout_s)  # for every planner, the rule's too
    if name == "rule":
        return RulePlanner()

    def model() -> ChatModel:
        return make_backend(llm, model=model_name, timeout_s=timeout_s)

    if name == "llm":
        return LLMPlanner(model())
    if name == "team":
        from marlm.hybrid.planning.team import TeamPlanner

        return TeamPlanner(model())
    if name in PLANNERS and name.startswith("triage"):
        from marlm.hybrid.planning.triage import TriagePlanner
        from marlm.llm.triage import Triage

        mode = name.partition("-")[2] or "probe"
        return TriagePlanner(Triage(model(), mode=mode, cache_dir=cache_dir()))
    raise InputError(f"got {name!r}; allowed: {', '.join(PLANNERS)}", field="--planner")


def cache_dir() -> Path:
    """Where trained policies are cached: ``$MARLM_CACHE``, else ``$XDG_CACHE_HOME/marlm``."""
    if os.environ.get("MARLM_CACHE"):
        return Path(os.environ["MARLM_CACHE"])
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "marlm"


def _policy_path(settings: dict | None) -> tuple[dict, Path]:
    """The training settings (``DEFAULT_TRAINING`` when None) and their cache file."""
    settings = dict(DEFAULT_TRAINING if settings is None else settings)
    key = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:12]
    return settings, cache_dir() / f"executor-{key}.npz"


def _unwritable_cache(folder: Path, error: OSError) -> InputError:
    return InputError(
        f"cannot write the policy cache ({error.strerror or type(error).__name__}); set "
        "MARLM_CACHE to a writable folder",
        source=folder,
        field="$MARLM_CACHE",
    )


def check_policy_cache(settings: dict | None = None) -> None:
    """Refuse, before any work, a cache folder the executor trained with ``settings`` could not
    be saved to: when the cache holds no readable table for them, the folder is created and a
    probe file written and removed there. (A read-only ``$MARLM_CACHE`` was reported only after
    the training it was to keep.)

    Raises:
        InputError: naming ``$MARLM_CACHE``, the folder and the system's reason.
    """
    from marlm.hybrid.acting.executor import QExecutor

    _, path = _policy_path(settings)
    if path.is_file():
        try:
            QExecutor.load(path)
            return
        except InputError:
            pass  # rebuilt by cached_policy: the folder must be writable
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=path.parent, prefix=".marlm-write-test-")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise _unwritable_cache(path.parent, e) from e


def cached_policy(
    settings: dict | None = None, progress: Callable[[int, int], None] | None = None
) -> tuple[QExecutor, bool]:
    """Load the executor trained with ``settings`` from the cache, or train and cache it.

    A cache entry that cannot be read (cut short, empty, of another version) is trained again
    and replaced. Call :func:`check_policy_cache` first to refuse an unwritable cache before
    the training.

    Returns:
        ``(policy, trained_now)``.

    Raises:
        InputError: the trained table cannot be written to the cache (``$MARLM_CACHE``).
    """
    from marlm.hybrid.acting.executor import QExecutor, train_executor

    settings, path = _policy_path(settings)
    if path.is_file():
        try:
            return QExecutor.load(path), False
        except InputError:
            pass  # a stale or broken cache entry: train again and overwrite it
    policy, _ = train_executor(progress=progress, **settings)
    try:
        policy.save(path)
    except OSError as e:
        raise _unwritable_cache(path.parent, e) from e
    return policy, True


def default_orders(layout: str) -> str | None:
    """The shipped order file when ``layout`` is the shipped ``small`` one (it names its shelves),
    else None (orders are generated from the seed)."""
    from marlm.envs.warehouse import sample_orders_path

    return str(sample_orders_path()) if layout == "small" else None


__all__ = [
    "DEFAULT_TRAINING",
    "PLANNERS",
    "build_planner",
    "cache_dir",
    "cached_policy",
    "check_policy_cache",
    "default_orders",
]
