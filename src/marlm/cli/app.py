"""The typer application and the sub-command groups every command module registers on.

Help is formatted by click (``rich_markup_mode=None``): typer's rich help formatter imports rich's
Markdown and traceback renderers, which cost more than typer itself on every ``--help``; the plain
formatter also wraps long option help instead of cutting it at the terminal width.

Option values are converted without pydantic where typer's conversion does not need it
(:mod:`marlm.cli.plain_values`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import typer
from typer.core import TyperGroup

if TYPE_CHECKING:  # the installed typer (0.2x), which mypy reads, parses with its own click
    from typer._click.exceptions import UsageError
else:
    try:  # typer 0.2x parses with its own copy of click
        from typer._click.exceptions import UsageError
    except ImportError:  # pragma: no cover - a typer on click itself
        from click.exceptions import UsageError

from marlm.errors import InputError
from marlm.stops import Terminated, stop_writing_to_the_closed_pipe

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
            raise _as_input_error(e) from None

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except UsageError as e:
            raise _as_input_error(e) from None
        except BrokenPipeError:  # `marlm ... | head`: the reader left; stop as SIGPIPE would
            stop_writing_to_the_closed_pipe()
            raise SystemExit(141) from None
        except OSError as e:  # a full disk, a read-only folder: one line, exit code 2
            from marlm.eval.outputs import disk_error

            error = disk_error(e)
            if error is None:
                raise
            raise error from None
        except KeyboardInterrupt as e:
            hint = f"; {e.hint}" if isinstance(e, Interrupted) else ""
            if isinstance(e, Terminated) or isinstance(e.__cause__, Terminated):
                print(f"marlm: terminated{hint}", file=sys.stderr)
                raise SystemExit(143) from None
            print(f"marlm: interrupted{hint}", file=sys.stderr)
            raise SystemExit(130) from None
        finally:
            from marlm.eval.outputs import release_claims

            release_claims()  # however the command ended


def progress_bar(console: Any, label: str = "{task.description}") -> Any:
    """A rich ``Progress`` on ``console``, kept on screen: ``label``, the bar, done/total and
    the time elapsed (rich is imported when a command runs)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=console, transient=False,
    )  # fmt: skip


def stages(start: Callable[[], Any]) -> Callable[[str, int | None], Callable]:
    """A command's progress stages (:data:`marlm.experiments.demo.Stage`): each a task of one
    progress bar, which ``start()`` opens with the first stage."""
    bars: list[Any] = []

    def stage(description: str, total: int | None) -> Callable[[int, int | None], None]:
        if not bars:
            bars.append(start())
        bar = bars[0]
        task = bar.add_task(description, total=total)

        def advance(done: int, total: int | None = None) -> None:
            bar.update(task, completed=done, total=total)

        return advance

    return stage


def _as_input_error(error: UsageError) -> UsageError | InputError:
    """A command-line error the parser found (a value of the wrong type, an unknown option, a
    missing argument) in marlm's one-line form, naming the option: ``field '--steps': Input
    should be a valid integer ...; see 'marlm demo --help'``, like every other input error. A
    command run without arguments shows its help, as asked (the error itself)."""
    if type(error).__name__ == "NoArgsIsHelpError":
        return error
    where = f"; see '{error.ctx.command_path} --help'" if error.ctx is not None else ""
    param = error.param if isinstance(error, typer.BadParameter) else None
    if param is not None:
        from marlm.experiments.settings import example_of

        option = param.param_type_name == "option"
        field = max(param.opts, key=len) if option else param.name.upper()
        message = error.message.rstrip(".") or "is required"  # a missing option or argument
        return InputError(message + example_of(param, field) + where, field=field)
    return InputError(error.format_message().rstrip(".") + where)


def opt(default: Any, help: str | None = None, check: Any = None, *names: str, **kw: Any) -> Any:
    """An option in one line: ``typer.Option(default, *names, help=help, callback=check)``
    (``names`` default to the parameter's, ``--steps`` for ``steps``)."""
    return typer.Option(default, *names, help=help, callback=check, **kw)


app = typer.Typer(
    name="marlm", cls=MarlmGroup,
    help="Multi-agent systems: RL for actions, an LLM for semantic decisions, rules as the safety net.",
    no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False,
    rich_markup_mode=None,
)  # fmt: skip
#: The sub-command groups: ``marlm train ...``, ``marlm llm ...``, ``marlm eval ...``.
train_app, llm_app, eval_app = (
    typer.Typer(help=text, no_args_is_help=True, rich_markup_mode=None)
    for text in (
        "Train a learner on one of the environments.",
        "The LLM backends: serve the embedded model.",
        "Evaluate LLM decision modes on labelled data.",
    )
)


def _show_version(ctx: Any, param: Any, value: bool) -> None:
    """``marlm --version``: print ``marlm <version>`` (the package's own ``__version__``; marlm
    is loaded, this module is part of it) and exit."""
    if value:
        print(f"marlm {sys.modules['marlm'].__version__}")
        ctx.exit(0)


@app.callback()
def _top_level(
    version: bool = opt(
        False, "Show marlm's version and exit.", _show_version, "--version", is_eager=True,
        expose_value=False),
) -> None:  # fmt: skip
    pass


app.add_typer(train_app, name="train")
app.add_typer(llm_app, name="llm")
app.add_typer(eval_app, name="eval")


#: What ``--llm`` takes, in every command's help.
LLM_HELP = "'embedded', a .gguf file, or an OpenAI-compatible base URL (http://HOST:PORT/v1)."


def llm_option(help: str = LLM_HELP) -> Any:
    """``--llm`` (default ``embedded``): the backend, built by
    :func:`marlm.llm.backends.make_backend` (the one factory) with :func:`llm_model_option` and
    :func:`llm_timeout_option`. Its form is checked at parse time (:func:`llm_value`)."""
    return opt("embedded", help, llm_value, "--llm")


def llm_value(ctx: Any, param: Any, value: Any) -> Any:
    """A typer callback of ``--llm``: a value the factory would refuse without loading anything
    (an unknown form, a ``.gguf`` file that is not there) is refused while the command line is
    parsed, with the factory's own message (:meth:`marlm.llm.backends.BackendSpec.parse`, the
    one place ``--llm`` is read), before a command creates its run folder (``marlm
    compare --llm foo`` left an empty one). Loading a model, or asking a server, stays with the
    command."""
    from marlm.experiments.settings import check_llm_form

    check_llm_form(str(value), option=max(param.opts, key=len))  # BackendSpec.parse, loads nothing
    return value


def llm_model_option() -> Any:
    """``--llm-model`` (default ``local``): the model name sent to an HTTP server."""
    return opt("local", "Model name sent to an HTTP server.", None, "--llm-model")


def llm_timeout_option() -> Any:
    """``--llm-timeout`` (default 60): seconds one model call may take, for every backend
    (> 0, at most a day: 1e308 overflowed the wait)."""
    return opt(
        60.0, "Seconds one model call may take, waiting for the model included (any backend).",
        finite_at_least(0, exclusive=True, high=86_400, unit="seconds"), "--llm-timeout",
    )  # fmt: skip


def _checked(check: Callable[..., None], **how: Any) -> Callable[[Any, Any, Any], Any]:
    """A typer option callback running ``check(value, option=..., **how)`` on a value given
    (``None``, an option left out, passes) while the command line is parsed, so a bad value
    stops the command before it reads or creates anything, with marlm's own error."""

    def callback(ctx: Any, param: Any, value: Any) -> Any:
        if value is not None:
            check(value, option=max(param.opts, key=len), **how)
        return value

    return callback


def _bounded(**bound: Any) -> Callable[[Any, Any, Any], Any]:
    """A typer option callback: the value within :class:`marlm.experiments.settings.Bound`
    (the option's default is the error's example unless ``example`` is given)."""
    from marlm.experiments.settings import Bound

    def callback(ctx: Any, param: Any, value: Any) -> Any:
        if value is not None:
            Bound(**bound).check(value, option=max(param.opts, key=len), default=param.default)
        return value

    return callback


def at_least(minimum: int, *, why: str = "", example: int | None = None, **kw: Any) -> Callable:
    """A typer option callback: a whole number >= ``minimum`` (``why`` in the error; ``kw``:
    the other fields of :class:`marlm.experiments.settings.Bound`, e.g. ``off``)."""
    return _bounded(low=minimum, why=why, example=example, **kw)


#: The callback of every ``--seed``: numpy's generators take no negative seed.
SEED_BOUND = at_least(0, why="numpy's random generators take no negative seed")


def in_range(low: int, high: int) -> Callable:
    """A typer option callback: a whole number in ``low..high``."""
    return _bounded(low=low, high=high)


def finite_at_least(minimum: float, **kw: Any) -> Callable:
    """A typer option callback: a finite number >= ``minimum`` (``kw``: ``exclusive``, ``high``)."""
    return _bounded(low=minimum, whole=False, **kw)


def input_file(what: str) -> Callable[[Any, Any, Any], Any]:
    """A typer option callback: an existing file, else an error naming ``what`` to give
    (:func:`marlm.experiments.settings.check_input_file`)."""
    from marlm.experiments.settings import check_input_file

    return _checked(check_input_file, what=what)


def layout_value(ctx: Any, param: Any, value: Any) -> Any:
    """A typer callback of ``--layout``: a shipped layout name or a map file, not a folder."""
    from marlm.experiments.settings import check_layout

    return _checked(check_layout)(ctx, param, value)
