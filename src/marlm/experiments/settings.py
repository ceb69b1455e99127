"""Checks shared by the experiments' configs: the rule layer's name, a comma-separated list of
names, a robot count drawn from the seed, orders that arrive when the run is over, the seeds
of a comparison's spread, the form of a ``--llm`` value and a ``--llm`` server that answers (the two checks of ``--llm`` before the
backend is built, kept together here).

Each error names the command-line option (``field '--shield'``) and what is allowed.
"""

from __future__ import annotations

import contextlib
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from marlm.errors import InputError


@dataclass(frozen=True)
class Bound:
    """The bounds of a numeric option: a whole number >= ``low`` (and <= ``high`` when set), or
    with ``whole=False`` a finite number >= ``low`` (> with ``exclusive``; <= ``high`` when set;
    ``inf`` and ``nan`` refused: a time limit of ``inf`` overflowed). ``unit`` names what the number counts, ``why``
    is added to the error in brackets, ``example`` is the value the error suggests. ``off``, when
    set, is one more value allowed below ``low`` that turns the option off (``--spread-seeds 0``:
    none; 1 is refused, a spread needs 2 seeds)."""

    low: float
    high: float | None = None
    whole: bool = True
    exclusive: bool = False
    unit: str = ""
    why: str = ""
    example: float | None = None
    off: float | None = None

    def check(self, value: float, *, option: str, default: object = None) -> None:
        """Refuse ``value`` out of bounds with marlm's one error for it (``field '--steps':
        must be a whole number >= 1, got 0; pass e.g. --steps 600``): the example is
        ``example``, else ``default`` where it is a number, else ``low`` (a whole number's).

        Raises:
            InputError: naming ``option``, the bounds, the value and an example.
        """
        low, high = self.low, self.high
        if self.off is not None and value == self.off:
            return
        if self.whole:
            bad = value < low or (high is not None and value > high)
            what = (
                f"a whole number in {low}..{high}"
                if high is not None
                else f"a whole number >= {low}"
            )
        else:
            bad = not math.isfinite(value) or value < low or (self.exclusive and value == low)
            bad = bad or (high is not None and value > high)
            unit = f" of {self.unit}" if self.unit else ""
            what = f"a finite number{unit} {'>' if self.exclusive else '>='} {_show(low)}"
            what += f" and <= {_show(high)}" if high is not None else ""
        if not bad:
            return
        example = self.example
        if example is None and isinstance(default, int | float):
            example = default
        elif example is None:
            example = low if self.whole else None
        fix = f"; pass e.g. {option} {_show(example)}" if example is not None else ""
        why = f" ({self.why})" if self.why else ""
        if self.off is not None:
            why += f", or {_show(self.off)} for none"
            fix += f", or {_show(self.off)} for none"
        raise InputError(f"must be {what}{why}, got {_show(value)}{fix}", field=option)


#: ``--spread-seeds``: the seeds of the spread in all, the table's seed included; 0 for none.
SPREAD_SEEDS = Bound(low=2, off=0, why="a spread needs 2 seeds, the table's and one more")


def example_of(param: object, option: str) -> str:
    """``"; pass e.g. --steps 600"`` for a whole-number or decimal option the parser refused
    (``--steps abc``): its default where that is a number, else 1; ``""`` for other options.
    ``param`` is typer's parameter (a :class:`typer.core.TyperOption`: its
    ``type_descriptor.annotation`` and ``default``); any other object gives ``""``."""
    from typer.core import TyperOption

    if not isinstance(param, TyperOption) or not option.startswith("--"):
        return ""
    # typer releases before 0.2x have no type descriptor on their options (then no example)
    descriptor = getattr(param, "type_descriptor", None)
    kind = descriptor.annotation if descriptor is not None else None
    if kind not in (int, float):
        return ""
    default = param.default
    if default is None:  # a default the command resolves itself, shown in the help as text
        shown = param.show_default
        with contextlib.suppress(TypeError, ValueError):
            default = kind(shown) if isinstance(shown, str) else None
    if isinstance(default, int | float) and not isinstance(default, bool):
        return f"; pass e.g. {option} {_show(default)}"
    return f"; pass e.g. {option} {_show(kind(1))}"


def _show(number: float) -> str:
    return f"{number:g}" if isinstance(number, float) else str(number)


def check_input_file(path: str | Path, *, option: str, what: str) -> None:
    """Refuse a folder, or a path that does not exist, where ``option`` takes a file to read,
    naming ``what`` to give (``field '--orders': is a folder; give a JSONL order file``)
    instead of the reader's ``[Errno 21] Is a directory``.

    Raises:
        InputError: naming the path and ``option``.
    """
    p = Path(path)
    problem = "is a folder" if p.is_dir() else "" if p.exists() else "no such file"
    if problem:
        raise InputError(f"{problem}; give {what}", source=path, field=option)


def check_layout(value: str, *, option: str = "--layout") -> None:
    """Refuse a folder where a shipped layout name or a map file is expected.

    Raises:
        InputError: naming the folder, ``option`` and the shipped layouts.
    """
    if Path(value).is_dir():
        from marlm.envs.warehouse.layout import list_layouts

        names = ", ".join(list_layouts())
        raise InputError(
            f"is a folder; give a map file or a shipped layout name ({names})",
            source=value, field=option,
        )  # fmt: skip


def check_rule_layer(value: str, *, allow_none: bool = False) -> str:
    """The ``--shield`` value checked: ``pibt`` or ``local`` (see
    :data:`marlm.hybrid.rules.factory.SHIELD_RULES`), or ``none`` where ``allow_none``.

    Raises:
        InputError: another value, naming ``--shield`` and the allowed values.
    """
    from marlm.hybrid.rules.factory import SHIELD_RULES

    allowed = (*SHIELD_RULES, "none") if allow_none else SHIELD_RULES
    if value not in allowed:
        raise InputError(f"got {value!r}; allowed: {', '.join(allowed)}", field="--shield")
    return value


def comma_list(value: str, allowed: Sequence[str], *, option: str, what: str) -> list[str]:
    """The names of a comma-separated option (``--schemes rules,hybrid``), each checked.

    Raises:
        InputError: naming ``option``: an empty item (``rules,,hybrid``, a trailing comma), a
            name given twice, or a name not in ``allowed``, with the allowed names.
    """
    allowed = list(allowed)
    names = [n.strip() for n in value.split(",")]
    example = ",".join(allowed[:2])
    if "" in names:
        raise InputError(
            f"item {names.index('') + 1} of {value!r} is empty; give {what} names separated by "
            f"single commas, e.g. {option} {example}",
            field=option,
        )
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise InputError(
            f"{', '.join(map(repr, twice))} given more than once in {value!r}; give each "
            f"{what} once",
            field=option,
        )
    unknown = [n for n in names if n not in allowed]
    if unknown:
        raise InputError(
            f"unknown {what}(s) {', '.join(map(repr, unknown))}; allowed: {', '.join(allowed)}",
            field=option,
        )
    return names


def warn_if_robots_drawn(layout: str, robots: int | None) -> None:
    """One warning (``marlm: warning:`` on the command line) when the robot count comes from
    nowhere the user wrote: no ``--robots``, and a map without ``R`` cells or a ``robots:`` line
    (RWARE's maps), so RWARE's default of 2 robots start on free cells drawn from the seed. Call
    after the map is checked."""
    if robots is not None:
        return
    from marlm.envs.warehouse.layout import load_layout

    lay = load_layout(layout)
    if lay.starts or lay.robots_line is not None:
        return
    warnings.warn(
        f"--layout {layout}: the map has no 'R' cells and no 'robots:' line, so {lay.default_robots} "
        "robots (RWARE's default) start on free cells drawn from --seed; pass --robots N to "
        "choose how many",
        stacklevel=1,
    )


def warn_if_orders_after_the_end(orders: str | Path | None, layout: str, steps: int) -> None:
    """One warning (``marlm: warning:`` on the command line) when orders of an ``--orders`` file
    arrive at or after the time limit (``arrival >= steps``): no robot can take them, yet they
    count in the run's orders total (``orders delivered 0 / 1``) and the table does not say why.
    Call after the map and the file are checked (:func:`marlm.hybrid.controller.make_env`).

    Args:
        orders: the order file; None (generated orders) warns of nothing.
        layout: the map the orders' shelves are on (a shipped name or a map file).
        steps: the run's time limit in control steps (``--steps``).
    """
    if orders is None:
        return
    from marlm.envs.warehouse.layout import load_layout
    from marlm.envs.warehouse.orders import load_orders

    late = [o for o in load_orders(orders, load_layout(layout)) if o.arrival >= steps]
    if not late:
        return
    last = max(late, key=lambda o: o.arrival)
    warnings.warn(
        f"--orders {orders}: {len(late)} order(s) arrive at step {steps} or later, when the run "
        f"is over (--steps {steps}), so no robot can take them (the latest, {last.id!r}, at step "
        f"{last.arrival}); pass --steps above {last.arrival} to include them",
        stacklevel=1,
    )


def warn_if_breakdowns_after_the_end(breakdowns: Sequence[Any], steps: int) -> None:
    """One warning when breakdowns (:class:`~marlm.envs.warehouse.breakdowns.Breakdown`) start at
    or after the time limit: no robot is out of service for them, and the run says nothing else.

    Args:
        breakdowns: the run's (``WarehouseEnv.breakdowns``).
        steps: the run's time limit in control steps (``--steps``).
    """
    late = [b for b in breakdowns if b.at >= steps]
    if not late:
        return
    names = ", ".join(f"{b.breakdown} at step {b.at}" for b in late[:3])
    more = f" and {len(late) - 3} more" if len(late) > 3 else ""
    warnings.warn(
        f"{len(late)} breakdown(s) start at step {steps} or later, when the run is over "
        f"(--steps {steps}): {names}{more}; no robot is out of service for them",
        stacklevel=1,
    )


def spread_seeds(notes: bool, **settings: Any) -> int:
    """The spread's seeds of ``marlm compare`` (``settings``: ``spread_seeds``, None where not
    given, ``workers``, ``address``): 5 by default, 0 in the notes-only scenario, which runs
    every planner on one seed.

    Raises:
        InputError: ``--spread-seeds``, ``--workers`` or ``--address`` given in the notes-only
            scenario, or ``--workers``/``--address`` with ``--spread-seeds 0`` (the Ray tasks run
            the spread's seeds only), naming the option.
    """
    spread = settings.get("spread_seeds")
    ray = (
        ("--workers", settings.get("workers", 1), 1),
        ("--address", settings.get("address"), None),
    )
    given = [(o, v) for o, v, default in ray if v != default]
    if notes and spread is not None:
        given.insert(0, ("--spread-seeds", spread))
    if given and (notes or spread == 0):
        option, value = given[0]
        why = (
            "the notes-only scenario runs every planner on one seed, with no spread"
            if notes
            else "the Ray tasks run the spread's seeds, and --spread-seeds 0 runs none"
        )
        fix = "" if notes else ", or pass --spread-seeds 2 or more"
        raise InputError(f"{why}; drop {option} {value}{fix}", field=option)
    return (0 if notes else 5) if spread is None else spread


def check_llm_form(spec: str, *, option: str = "--llm") -> None:
    """Refuse, without loading anything, a ``--llm`` value the backend factory would refuse (an
    unknown form, a ``.gguf`` file that is not there), with the one parser of ``--llm``
    (:meth:`marlm.llm.backends.BackendSpec.parse`). Loading a model, or asking a server
    (:func:`check_server`), is left to the command.

    Raises:
        InputError: naming ``option``.
    """
    plain = spec.strip()
    if plain == "embedded" or plain.startswith(("http://", "https://")):
        return  # the default and servers: nothing to parse yet (keeps marlm.llm out of start-up)
    from marlm.llm.backends import BackendSpec

    BackendSpec.parse(spec, option=option)  # raises, loads nothing


def check_server(llm: str, model_name: str, timeout_s: float) -> None:
    """Ask a ``--llm`` server once, before a command that builds its backend late claims its
    run folder: a URL that answers 404 (a base URL without ``/v1``) is refused with the
    factory's own error. A server that cannot be reached is left to the command, which says so
    once. Other ``--llm`` forms are checked while the command line is parsed.

    Raises:
        InputError: naming ``--llm`` (see :func:`marlm.llm.backends.make_backend`).
    """
    from marlm.llm.backends import BackendSpec, make_backend

    if BackendSpec.parse(llm, model=model_name, timeout_s=timeout_s).kind != "http":
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the command's own check warns
        make_backend(llm, model=model_name, timeout_s=timeout_s, check=True).close()


#: The defaults of the model options the commands share (``--llm``, ``--llm-model``,
#: ``--llm-timeout`` in :mod:`marlm.cli.app`; a test keeps them equal).
LLM_DEFAULT, LLM_MODEL_DEFAULT, LLM_TIMEOUT_S = "embedded", "local", 60.0


def model_options(
    llm: str, llm_model: str, llm_timeout_s: float
) -> list[tuple[str, object, object]]:
    """``(option, value, default)`` of the model options, for :func:`unused_options_note`."""
    return [("--llm", llm, LLM_DEFAULT), ("--llm-model", llm_model, LLM_MODEL_DEFAULT),
            ("--llm-timeout", llm_timeout_s, LLM_TIMEOUT_S)]  # fmt: skip


def unused_options_note(why: str, given: Sequence[tuple[str, object, object]]) -> str | None:
    """The one-line note of options a run does not use, ``note: {why}: --llm URL and
    --llm-timeout 5 are not used.`` (``why``: e.g. ``--planner rule asks no model``), naming
    those of ``given`` (``(option, value, default)``) whose value is not the default; ``None``
    when every one is. A value left at its default is never named: only what the user set."""
    unused = [f"{option} {value:g}" if isinstance(value, float) else f"{option} {value}"
              for option, value, default in given if value != default]  # fmt: skip
    if not unused:
        return None
    listed = unused[0] if len(unused) == 1 else ", ".join(unused[:-1]) + " and " + unused[-1]
    return f"note: {why}: {listed} {'is' if len(unused) == 1 else 'are'} not used."


def model_name_note(llm: str, llm_model: str) -> str | None:
    """The note of a ``--llm-model`` the user set for a model run in process (``--llm
    embedded`` or a ``.gguf`` file, which read no model name: the name is sent to a server
    only), by :func:`unused_options_note`; None for a server or the default name.

    Raises:
        InputError: a ``--llm`` value :meth:`marlm.llm.backends.BackendSpec.parse` refuses.
    """
    from marlm.llm.backends import BackendSpec

    if BackendSpec.parse(llm).kind == "http":
        return None
    why = f"--llm {llm} runs its model in process, without a server"
    return unused_options_note(why, [("--llm-model", llm_model, LLM_MODEL_DEFAULT)])


#: The command-line option of each setting the library's checks name by its own field name
#: (``GridWorldConfig.epsilon_start`` is ``--epsilon``): an error shows the option the user typed.
OPTION_OF_FIELD = {
    "alpha": "--alpha", "gamma": "--gamma", "epsilon_start": "--epsilon",
    "epsilon_decay": "--epsilon-decay", "epsilon_floor": "--epsilon-floor",
    "mix_weight": "--mix-weight", "counterfactual": "--counterfactual", "learner": "--learner",
    "reward": "--reward", "engine": "--engine", "end": "--end", "episodes": "--episodes",
    "max_steps": "--max-steps", "seed": "--seed", "chunk": "--checkpoint-every",
    "k": "--llm-samples", "n_robots": "--robots", "layout": "--layout", "orders": "--orders",
    "policy": "--policy", "checkpoint": "--resume",
}  # fmt: skip


def as_option_error(error: InputError) -> InputError:
    """``error`` as the command line's user reads it: an error about an option names the option
    as its field (``field '--epsilon'``), not the library's name for the setting
    (``epsilon_start``), nor the option as if it were a file (``--seed: field 'seed'``). An
    error at a line of a file keeps the file's own field name (``orders.jsonl:3: field
    'priority'``)."""
    if error.source is not None and error.source.startswith("--"):
        return InputError(error.message, field=error.source)
    option = OPTION_OF_FIELD.get(error.field or "")
    if option is None or error.line is not None:
        return error
    return InputError(error.message, source=error.source, field=option)


__all__ = [
    "LLM_DEFAULT",
    "LLM_MODEL_DEFAULT",
    "LLM_TIMEOUT_S",
    "OPTION_OF_FIELD",
    "SPREAD_SEEDS",
    "Bound",
    "as_option_error",
    "check_llm_form",
    "check_rule_layer",
    "check_server",
    "comma_list",
    "model_name_note",
    "model_options",
    "unused_options_note",
    "warn_if_robots_drawn",
]
