"""How a deep learner's settings are named on the command line, and ``--set KEY=VALUE`` read.

The settings a user changes most (``--learner``, ``--steps``, ``--seed``, ``--gamma``, ``--lr``,
``--shared-reward``, ``--reward-norm``, ``--envs``, ``--checkpoint-every``) have their own options
on ``marlm train env`` and ``marlm train race``; every other field of
:class:`marlm.rl.deep.common.DeepConfig` (``hidden``, ``rollout``, ``epochs``, ``buffer``, ...) is
set with ``--set FIELD=VALUE``, repeated as needed. The errors a config raises name a setting the
way the user sets it (:func:`option_name`, :func:`option_example`), so each fix they give can be
typed as written.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from marlm.errors import InputError

#: DeepConfig fields that have an option of their own -> that option.
OWN_OPTIONS: dict[str, str] = {
    "learner": "--learner",
    "steps": "--steps",
    "seed": "--seed",
    "gamma": "--gamma",
    "lr": "--lr",
    "shared_reward": "--shared-reward",
    "reward_norm": "--reward-norm",
    "num_envs": "--envs",
    "chunk": "--checkpoint-every",
}

#: The option that sets any other field.
SET_OPTION = "--set"

#: The most a setting may ask for: beyond these a run ends in an out-of-memory error or a crash of
#: PyTorch's thread pool (``threads=100000`` killed the process with SIGSEGV; ``hidden=100000``
#: asked for 40 GB), not in a result.
AT_MOST = {
    "hidden": 4096, "threads": 256, "rollout": 100_000, "epochs": 1000, "minibatches": 100_000,
    "buffer": 10_000_000, "batch": 100_000, "mixer_embed": 4096, "target_every": 10_000_000,
}  # fmt: skip

#: The fields only some learners read (the others would ignore them): PPO's, DQN's, QMIX's.
READ_BY: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(
        ("rollout", "epochs", "minibatches", "clip", "gae_lambda", "ent_coef", "vf_coef",
         "max_grad_norm"), ("mappo", "ippo")),
    **dict.fromkeys(
        ("buffer", "batch", "eps_start", "eps_end", "eps_fraction", "learning_starts",
         "target_every"), ("qmix", "dqn-vdn", "dqn")),
    "mixer_embed": ("qmix",),
}  # fmt: skip


def option_name(field: str) -> str:
    """How a user sets DeepConfig field ``field``: its own option (``"--envs"``), else
    ``"--set FIELD"``."""
    return OWN_OPTIONS.get(field, f"{SET_OPTION} {field}")


def option_example(field: str, value: Any) -> str:
    """The command-line words that set ``field`` to ``value``: ``"--envs 8"`` or
    ``"--set rollout=64"``."""
    own = OWN_OPTIONS.get(field)
    return f"{own} {value}" if own is not None else f"{SET_OPTION} {field}={value}"


def _parse_value(text: str, default: Any, key: str) -> Any:
    """``text`` read as the type of ``default`` (bool, int or float)."""
    try:
        if isinstance(default, bool):
            if text.lower() in ("true", "1", "yes"):
                return True
            if text.lower() in ("false", "0", "no"):
                return False
            raise ValueError(text)
        if isinstance(default, int):
            return int(text)
        return float(text)
    except ValueError:
        kind = (
            "true or false"
            if isinstance(default, bool)
            else "a whole number"
            if isinstance(default, int)
            else "a number"
        )
        raise InputError(
            f"{key}={text!r} is not {kind}; pass e.g. {option_example(key, default)}",
            field=SET_OPTION,
        ) from None


def parse_settings(
    pairs: Iterable[str], defaults: Mapping[str, Any], learner: str | None = None
) -> dict[str, Any]:
    """``--set`` values (``["rollout=128", "hidden=32"]``) as ``{field: value}``, each value of
    its field's type in ``defaults`` (DeepConfig's fields and default values). A field given
    twice keeps the last value, as options do.

    Raises:
        InputError: naming ``--set``: a pair without ``=``, an unknown field (the message lists
            the fields ``--set`` takes), a field that has its own option (naming it), a field
            ``learner`` does not read (:data:`READ_BY`), or a value that is not of the field's
            type.
    """
    out: dict[str, Any] = {}
    settable = sorted(k for k in defaults if k not in OWN_OPTIONS)
    for pair in pairs:
        key, eq, text = (s.strip() for s in pair.partition("="))
        if not eq or not key or not text:
            raise InputError(
                f"got {pair!r}; pass FIELD=VALUE, e.g. {option_example('rollout', 64)}",
                field=SET_OPTION,
            )
        if key in OWN_OPTIONS:
            raise InputError(
                f"{key} has its own option: pass {OWN_OPTIONS[key]} instead of {SET_OPTION} {key}",
                field=SET_OPTION,
            )
        if key not in defaults:
            raise InputError(
                f"unknown setting {key!r}; {SET_OPTION} takes {', '.join(settable)}",
                field=SET_OPTION,
            )
        readers = READ_BY.get(key)
        if learner is not None and readers is not None and learner not in readers:
            raise InputError(
                f"{key} is read by {' and '.join(readers)}; --learner {learner} would ignore it: "
                f"drop {SET_OPTION} {pair.strip()}",
                field=SET_OPTION,
            )
        out[key] = _parse_value(text, defaults[key], key)
    return out


__all__ = [
    "AT_MOST",
    "OWN_OPTIONS",
    "READ_BY",
    "SET_OPTION",
    "option_example",
    "option_name",
    "parse_settings",
]
