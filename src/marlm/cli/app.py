"""The typer application and the sub-command groups every command module registers on.

Help is formatted by click (``rich_markup_mode=None``): typer's rich help formatter imports rich's
Markdown and traceback renderers, which cost more than typer itself on every ``--help``; the plain
formatter also wraps long option help instead of cutting it at the terminal width.

Option values are converted without pydantic where typer's conversion does not need it
(:mod:`marlm.cli.plain_values`).
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
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


class Terminated(KeyboardInterrupt):
    """A termination signal (SIGTERM: ``kill``, a job scheduler, a container stopping), raised
    where the command is, so that it ends through the same path as Ctrl-C: what finished is
    kept, the run folder is released, and one line says so (exit code 143, 128 + SIGTERM)."""


#: Stop signals that arrived while the main thread ran a function C code had called back (the
#: llama.cpp log callback, called many times while a model loads): ctypes prints and drops an
#: exception raised there, so the run went on. Such a signal is raised again 50 ms later.
_DEFERRED: list[int] = []
_CALLED_FROM_C = ("llama_cpp._logger",)


def _on_stop_signal(signum: int, frame: Any) -> None:
    """SIGINT raises ``KeyboardInterrupt`` and SIGTERM :class:`Terminated`, where the main
    thread is; inside a callback from C the raise waits for plain Python (a 50 ms timer)."""
    if frame is not None and frame.f_globals.get("__name__") in _CALLED_FROM_C:
        _DEFERRED.append(signum)
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        return
    _DEFERRED.clear()
    raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


def _on_timer(signum: int, frame: Any) -> None:
    if _DEFERRED:
        _on_stop_signal(_DEFERRED[-1], frame)


def catch_termination() -> None:
    """In the ``marlm`` command's process (main thread only): SIGTERM ends a command as Ctrl-C
    does (:class:`Terminated`), and neither signal is lost in a callback from C
    (:func:`_on_stop_signal`). A handler someone else installed first is left alone."""
    if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
        signal.signal(signal.SIGTERM, _on_stop_signal)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _on_stop_signal)
    if signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, None):
        signal.signal(signal.SIGALRM, _on_timer)


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during a command that knows how to go on from there (:func:`on_interrupt`)."""

    def __init__(self, hint: str) -> None:
        super().__init__(hint)
        self.hint = hint


@contextmanager
def on_interrupt(hint: Callable[[], str]) -> Iterator[None]:
    """Within the block, Ctrl-C (``KeyboardInterrupt``) ends the command with ``hint()`` (how to
    go on, e.g. resume from the last checkpoint) on the ``marlm: interrupted`` line
    (:class:`MarlmGroup`)."""
    try:
        yield
    except Interrupted:
        raise
    except KeyboardInterrupt as e:
        raise Interrupted(hint()) from e


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
        except BrokenPipeError:  # `marlm ... | head`: the reader left; stop as SIGPIPE would
            _stop_writing_to_the_closed_pipe()
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


def console(stderr: bool = False) -> Any:
    """A rich console for a command's output (``stderr``: for progress bars). A closed pipe is
    raised as ``BrokenPipeError`` (rich itself exits silently with code 1), so that every command
    stops on it the same way (:class:`MarlmGroup`: one line, exit code 141)."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            raise BrokenPipeError(32, "Broken pipe")

    return _Console(stderr=stderr)


def _stop_writing_to_the_closed_pipe() -> None:
    """After the reader of stdout left: point stdout at the null device (so the interpreter's
    last flush cannot fail again) and say on stderr, if it is still open, that output stopped."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    with contextlib.suppress(OSError, ValueError):
        print("marlm: stopped: the output pipe was closed; files already written are kept",
              file=sys.stderr)  # fmt: skip


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
    parsed, with the factory's own message (:meth:`marlm.llm.backends.BackendSpec.parse`, the
    one place ``--llm`` is read), before a command creates its run folder (``marlm
    compare --llm foo`` left an empty one). Loading a model, or asking a server, stays with the
    command."""
    from marlm.llm.backends import BackendSpec

    BackendSpec.parse(value, option=max(param.opts, key=len))  # raises, loads nothing
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


def check_server(llm: str, model_name: str, timeout_s: float) -> None:
    """Ask a ``--llm`` server once, before a command that builds its backend late creates its
    run folder: a URL that answers 404 (a base URL without ``/v1``) is refused with the
    factory's own error. A server that cannot be reached is left to the command, which says so
    once. Other ``--llm`` forms are checked by :func:`llm_value`.

    Raises:
        InputError: naming ``--llm`` (see :func:`marlm.llm.backends.make_backend`).
    """
    from marlm.llm.backends import BackendSpec, make_backend

    if BackendSpec.parse(llm, model=model_name, timeout_s=timeout_s).kind != "http":
        return

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the command's own check warns
        make_backend(llm, model=model_name, timeout_s=timeout_s, check=True).close()


def rule_layer(value: str, *, allow_none: bool = False) -> str:
    """The ``--shield`` value checked: ``pibt`` or ``local`` (see
    :data:`marlm.hybrid.rules.shield.SHIELD_RULES`), or ``none`` where ``allow_none``.

    Raises:
        InputError: another value, naming ``--shield`` and the allowed values.
    """
    from marlm.hybrid.rules.shield import SHIELD_RULES

    allowed = (*SHIELD_RULES, "none") if allow_none else SHIELD_RULES
    if value not in allowed:
        raise InputError(f"got {value!r}; allowed: {', '.join(allowed)}", field="--shield")
    return value


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


def warn_if_robots_drawn(layout: str, robots: int | None) -> None:
    """One ``marlm: warning:`` line when the robot count comes from nowhere the user wrote: no
    ``--robots``, and a map without ``R`` cells or a ``robots:`` line (RWARE's maps), so RWARE's
    default of 2 robots start on free cells drawn from the seed. Call after the map is checked.
    """
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
