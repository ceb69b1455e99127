"""The ``marlm`` command. Holds no logic of its own: each module registers the commands of one line.

The CLI is a package rather than one ``cli.py`` (as DESIGN.md drew it) so that each line of work
(hybrid demo, RL training, LLM, evaluation, benchmarks) keeps its commands in its own file.

User-input errors (:class:`marlm.errors.InputError`) end with one line on stderr and exit code 2;
marlm's own warnings (a backend that did not answer its first check, a triage mode that stands in
for another) are one ``marlm: warning:`` line each, without Python's file and source line.
"""

from __future__ import annotations

import atexit
import gc
import sys
import warnings
from pathlib import Path

from marlm.errors import InputError

from . import bench, demo, eval_cmd, evaluation, llm_cmd, train  # noqa: F401  (register commands)
from .app import app

_PACKAGE = str(Path(__file__).resolve().parents[1])

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
    try:
        app(prog_name="marlm")
    except InputError as e:
        print(f"marlm: error: {as_option_error(e)}", file=sys.stderr)
        sys.exit(2)


__all__ = ["app", "main"]
