"""Checks shared by the experiments' configs: the rule layer's name, a comma-separated list of
names, a robot count drawn from the seed, a ``--llm`` server that answers.

Each error names the command-line option (``field '--shield'``) and what is allowed.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

from marlm.errors import InputError


def check_rule_layer(value: str, *, allow_none: bool = False) -> str:
    """The ``--shield`` value checked: ``pibt`` or ``local`` (see
    :data:`marlm.hybrid.shield.SHIELD_RULES`), or ``none`` where ``allow_none``.

    Raises:
        InputError: another value, naming ``--shield`` and the allowed values.
    """
    from marlm.hybrid.shield import SHIELD_RULES

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


def check_server(llm: str, model_name: str, timeout_s: float) -> None:
    """Ask a ``--llm`` server once, before a command that builds its backend late claims its
    run folder: a URL that answers 404 (a base URL without ``/v1``) is refused with the
    factory's own error. A server that cannot be reached is left to the command, which says so
    once. Other ``--llm`` forms are checked while the command line is parsed.

    Raises:
        InputError: naming ``--llm`` (see :func:`marlm.llm.backends.make_backend`).
    """
    if not llm.strip().startswith(("http://", "https://")):
        return
    from marlm.llm.backends import make_backend

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the command's own check warns
        make_backend(llm, model=model_name, timeout_s=timeout_s, check=True).close()


__all__ = ["check_rule_layer", "check_server", "comma_list", "warn_if_robots_drawn"]
