"""The typer application and the sub-command groups every command module registers on.

Help is formatted by click (``rich_markup_mode=None``): typer's rich help formatter imports rich's
Markdown and traceback renderers, which cost more than typer itself on every ``--help``; the plain
formatter also wraps long option help instead of cutting it at the terminal width.

Option values are converted without pydantic where typer's conversion does not need it
(:mod:`marlm.cli.plain_values`).
"""

from __future__ import annotations

import typer

from marlm.errors import InputError

from . import plain_values

plain_values.install()

app = typer.Typer(
    name="marlm",
    help="Multi-agent systems: RL for actions, an LLM for semantic decisions, rules as the safety net.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,
)
train_app = typer.Typer(
    help="Train a learner on one of the environments.", no_args_is_help=True, rich_markup_mode=None
)
llm_app = typer.Typer(
    help="The LLM backends: serve the embedded model.", no_args_is_help=True, rich_markup_mode=None
)
eval_app = typer.Typer(
    help="Evaluate LLM decision modes on labelled data.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(train_app, name="train")
app.add_typer(llm_app, name="llm")
app.add_typer(eval_app, name="eval")


def rule_layer(value: str, *, allow_none: bool = False) -> str:
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
