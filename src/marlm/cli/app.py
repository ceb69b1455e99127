"""The typer application and the sub-command groups every command module registers on.

Help is formatted by click (``rich_markup_mode=None``): typer's rich help formatter imports rich's
Markdown and traceback renderers, which cost more than typer itself on every ``--help``; the plain
formatter also wraps long option help instead of cutting it at the terminal width.

Option values are converted without pydantic where typer's conversion does not need it
(:mod:`marlm.cli.plain_values`).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer
from typer.core import TyperGroup

try:  # typer 0.2x parses with its own copy of click
    from typer._click.exceptions import UsageError
except ImportError:  # pragma: no cover - a typer on click itself
    from click.exceptions import UsageError

from marlm.errors import InputError

from . import plain_values

plain_values.install()


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during a command that knows how to go on from there (:func:`on_interrupt`)."""

    def __init__(self, hint: str) -> None:
        super().__init__(hint)
        self.hint = hint


@contextmanager
def on_interrupt(hint: Callable[[], str]) -> Iterator[None]:
    """Within the block, Ctrl-C (``KeyboardInterrupt``) ends the command with ``hint()`` (how to
    go on, e.g. resume from the last checkpoint) on the ``marlm: interrupted`` line
    (:class:`MarlmGroup`); a ``hint()`` of ``""`` leaves the line without one."""
    try:
        yield
    except Interrupted:
        raise
    except KeyboardInterrupt as e:
        text = hint()
        if not text:  # nothing to say yet (e.g. before the run folder is claimed)
            raise
        raise Interrupted(text) from e


class MarlmGroup(TyperGroup):
    """The ``marlm`` command group: Ctrl-C in any command ends it with exit code 130 (128 +
    SIGINT, the shell's convention) and one line on stderr, ``marlm: interrupted`` (with the
    command's hint, see :func:`on_interrupt`), never a traceback; a full disk or a folder that
    cannot be written ends it with one ``marlm: error:`` line and exit code 2
    (:func:`marlm.eval.outputs.disk_error`). Every run folder the command claimed is released
    however it ends (:func:`marlm.eval.outputs.release_claims`)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        """The top level's own options (``marlm --nope``) are refused like a command's: one
        ``marlm: error:`` line (:func:`_as_input_error`), never click's usage block."""
        try:
            return super().parse_args(ctx, args)
        except UsageError as e:
            if type(e).__name__ == "NoArgsIsHelpError":  # shows the help, as asked
                raise
            raise _as_input_error(e) from None

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except UsageError as e:
            if type(e).__name__ == "NoArgsIsHelpError":  # shows the help, as asked
                raise
            raise _as_input_error(e) from None
        except OSError as e:  # a full disk, a read-only folder: one line, exit code 2
            from marlm.eval.outputs import disk_error

            error = disk_error(e)
            if error is None:
                raise
            raise error from None
        except KeyboardInterrupt as e:
            hint = f"; {e.hint}" if isinstance(e, Interrupted) else ""
            print(f"marlm: interrupted{hint}", file=sys.stderr)
            raise SystemExit(130) from None
        finally:
            from marlm.eval.outputs import release_claims

            release_claims()  # however the command ended


def _as_input_error(error: UsageError) -> InputError:
    """A command-line error the parser found (a value of the wrong type, an unknown option, a
    missing argument) in marlm's one-line form, naming the option: ``field '--steps': Input
    should be a valid integer ...; see 'marlm demo --help'``, like every other input error."""
    where = f"; see '{error.ctx.command_path} --help'" if error.ctx is not None else ""
    param = getattr(error, "param", None)
    if isinstance(error, typer.BadParameter) and param is not None:
        option = param.param_type_name == "option"
        field = max(param.opts, key=len) if option else param.name.upper()
        message = error.message.rstrip(".") or "is required"  # a missing option or argument
        return InputError(message + where, field=field)
    return InputError(error.format_message().rstrip(".") + where)


app = typer.Typer(
    name="marlm",
    cls=MarlmGroup,
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


def _show_version(ctx: Any, param: Any, value: bool) -> None:
    """``marlm --version``: print ``marlm <version>`` and exit."""
    if value:
        # The package's own __version__ (marlm is loaded: this module is part of it).
        print(f"marlm {sys.modules['marlm'].__version__}")
        ctx.exit(0)


@app.callback()
def _top_level(
    version: bool = typer.Option(
        False,
        "--version",
        is_eager=True,
        expose_value=False,
        callback=_show_version,
        help="Show marlm's version and exit.",
    ),
) -> None:
    pass


app.add_typer(train_app, name="train")
app.add_typer(llm_app, name="llm")
app.add_typer(eval_app, name="eval")


#: What ``--llm`` takes, in every command's help.
LLM_HELP = "'embedded', a .gguf file, or an OpenAI-compatible base URL (http://HOST:PORT/v1)."


def llm_option(help: str = LLM_HELP) -> Any:
    """``--llm``: the backend, built by :func:`marlm.llm.backends.make_backend` (the one factory)
    with :func:`llm_model_option` and :func:`llm_timeout_option`. A new option object per use
    (typer fills in each command's default). Its form is checked at parse time
    (:func:`llm_value`)."""
    return typer.Option("--llm", help=help, callback=llm_value)


def llm_value(ctx: Any, param: Any, value: Any) -> Any:
    """A typer callback of ``--llm``: a value the factory would refuse without loading anything
    (an unknown form, a ``.gguf`` file that is not there) is refused while the command line is
    parsed, with the factory's own message, before a command creates its run folder (``marlm
    compare --llm foo`` left an empty one). Loading a model, or asking a server, stays with the
    command."""
    spec = str(value).strip()
    loadable = spec == "embedded" or spec.startswith(("http://", "https://"))
    loadable = loadable or (spec.lower().endswith(".gguf") and Path(spec).is_file())
    if not loadable:
        from marlm.llm.backends import make_backend

        make_backend(spec, check=False, option=max(param.opts, key=len))  # raises, loads nothing
    return value


def llm_model_option() -> Any:
    """``--llm-model``: the model name sent to an HTTP server."""
    return typer.Option("--llm-model", help="Model name sent to an HTTP server.")


def llm_timeout_option() -> Any:
    """``--llm-timeout``: seconds one model call may take, for every backend (finite, > 0)."""
    return typer.Option(
        "--llm-timeout",
        help="Seconds one model call may take, waiting for the model included (any backend).",
        callback=finite_at_least(0, exclusive=True, unit="seconds"),
    )


def at_least(
    minimum: int, *, why: str = "", example: int | None = None
) -> Callable[[Any, Any, Any], Any]:
    """A typer option callback: the value must be a whole number >= ``minimum`` (``None``, an
    option left out, passes).

    Checked while the command line is parsed, so a bad value stops the command before it reads
    or creates anything; the error is marlm's own (``field '--steps': must be a whole number >= 1,
    got 0; pass e.g. --steps 600``), the same for every command. ``why`` is added in brackets;
    the example is ``example``, else the option's default, else ``minimum``.
    """

    def check(ctx: Any, param: Any, value: Any) -> Any:
        if value is not None and value < minimum:
            what = f"a whole number >= {minimum}"
            raise _out_of_bounds(param, value, what, why, example=example, minimum=minimum)
        return value

    return check


#: The callback of every ``--seed``: numpy's generators take no negative seed.
SEED_BOUND = at_least(0, why="numpy's random generators take no negative seed")


def in_range(low: int, high: int) -> Callable[[Any, Any, Any], Any]:
    """A typer option callback: the value must be a whole number in ``low..high``."""

    def check(ctx: Any, param: Any, value: Any) -> Any:
        if value is not None and not low <= value <= high:
            what = f"a whole number in {low}..{high}"
            raise _out_of_bounds(param, value, what, "", example=None, minimum=low)
        return value

    return check


def finite_at_least(
    minimum: float, *, exclusive: bool = False, unit: str = ""
) -> Callable[[Any, Any, Any], Any]:
    """A typer option callback: the value must be a finite number >= ``minimum`` (> with
    ``exclusive``); ``inf`` and ``nan`` are refused (a time limit of ``inf`` overflowed)."""
    sign = ">" if exclusive else ">="

    def check(ctx: Any, param: Any, value: Any) -> Any:
        if value is None:
            return value
        if not math.isfinite(value) or value < minimum or (exclusive and value == minimum):
            what = f"a finite number{' of ' + unit if unit else ''} {sign} {_show(minimum)}"
            raise _out_of_bounds(param, value, what, "", example=None, minimum=None)
        return value

    return check


def _out_of_bounds(
    param: Any, value: Any, what: str, why: str, *, example: Any, minimum: Any
) -> InputError:
    """The error of an option value out of bounds, with an example: ``example``, else the
    option's default where it has one, else ``minimum``."""
    option = max(param.opts, key=len)
    if example is None:
        example = param.default if isinstance(param.default, int | float) else minimum
    fix = f"; pass e.g. {option} {_show(example)}" if example is not None else ""
    why = f" ({why})" if why else ""
    return InputError(f"must be {what}{why}, got {_show(value)}{fix}", field=option)


def _show(number: float) -> str:
    return f"{number:g}" if isinstance(number, float) else str(number)


def input_file(what: str) -> Callable[[Any, Any, Any], Any]:
    """A typer option callback: the value must be an existing file (``None`` passes).

    A folder, or a path that does not exist, stops the command while the command line is
    parsed, naming the option and ``what`` to give (``field '--orders': is a folder; give a JSONL
    order file``), instead of the reader's ``[Errno 21] Is a directory``.
    """

    def check(ctx: Any, param: Any, value: Any) -> Any:
        if value is not None:
            problem = _not_a_file(Path(value))
            if problem:
                option = max(param.opts, key=len)
                raise InputError(f"{problem}; give {what}", source=value, field=option)
        return value

    return check


def layout_value(ctx: Any, param: Any, value: Any) -> Any:
    """A typer callback of ``--layout``: a shipped layout name or a map file, not a folder."""
    if value is not None and Path(value).is_dir():
        from marlm.envs.warehouse.layout import list_layouts

        names = ", ".join(list_layouts())
        raise InputError(
            f"is a folder; give a map file or a shipped layout name ({names})",
            source=value,
            field=max(param.opts, key=len),
        )
    return value


def _not_a_file(path: Path) -> str:
    """Why ``path`` is not a file to read ('' when it is one)."""
    if path.is_dir():
        return "is a folder"
    if not path.exists():
        return "no such file"
    return ""
