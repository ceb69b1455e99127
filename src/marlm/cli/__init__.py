"""The ``marlm`` command. Holds no logic of its own: each module registers the commands of one line.

The CLI is a package rather than one ``cli.py`` (as DESIGN.md drew it) so that each line of work
(hybrid demo, RL training, LLM, evaluation, benchmarks) keeps its commands in its own file.

User-input errors (:class:`marlm.errors.InputError`) end with one line on stderr and exit code 2;
a run that could not finish for another reason (:class:`marlm.errors.RunError`) with one line and
exit code 1; SIGTERM with ``marlm: terminated`` and 143; a closed output pipe with 141;
marlm's own warnings (a backend that did not answer its first check, a triage mode that stands in
for another) are one ``marlm: warning:`` line each, without Python's file and source line.
"""

from __future__ import annotations

import atexit
import gc
import sys
import warnings
from pathlib import Path

from marlm.errors import InputError, RunError
from marlm.experiments.settings import as_option_error
from marlm.stops import catch_termination

from . import bench, demo, eval_cmd, evaluation, llm_cmd, train  # noqa: F401  (register commands)
from .app import app

_PACKAGE = str(Path(__file__).resolve().parents[1])


def show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """``warnings.showwarning`` of the command: a warning raised in marlm's own code is one line,
    ``marlm: warning: <message>``, on stderr; any other is shown as Python shows it
    (``warnings.formatwarning``)."""
    if str(Path(filename).resolve()).startswith(_PACKAGE):
        print(f"marlm: warning: {message}", file=file or sys.stderr)
    else:
        text = warnings.formatwarning(message, category, filename, lineno, line)
        print(text, end="", file=file or sys.stderr)


def main() -> None:
    """Entry point of the ``marlm`` console script."""
    warnings.showwarning = show_warning
    # At exit the interpreter's last garbage collection walks every object still alive: after a
    # training run (numba's registries and LLVM handles) about half a second, for memory the
    # operating system takes back anyway. gc.freeze() at exit, after every command has closed
    # its files, leaves those objects out of it (what gc.freeze is documented for: objects that
    # live until the end).
    atexit.register(gc.freeze)
    catch_termination()
    try:
        app(prog_name="marlm")
    except InputError as e:
        print(f"marlm: error: {as_option_error(e)}", file=sys.stderr)
        sys.exit(2)
    except RunError as e:
        print(f"marlm: error: {e}", file=sys.stderr)
        sys.exit(1)


__all__ = ["app", "main"]
