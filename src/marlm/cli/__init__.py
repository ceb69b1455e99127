"""The ``marlm`` command. Holds no logic of its own: each module registers the commands of one line.

The CLI is a package rather than one ``cli.py`` (as DESIGN.md drew it) so that each line of work
(hybrid demo, RL training, LLM, evaluation, benchmarks) keeps its commands in its own file.

User-input errors (:class:`marlm.errors.InputError`) end with one line on stderr and exit code 2.
"""

from __future__ import annotations

import atexit
import gc
import sys

from marlm.errors import InputError

from . import bench, demo, eval_cmd, evaluation, llm_cmd, train  # noqa: F401  (register commands)
from .app import app


def main() -> None:
    """Entry point of the ``marlm`` console script."""
    # At exit the interpreter's last garbage collection walks every object still alive: after a
    # training run (numba's registries and LLVM handles) about half a second, for memory the
    # operating system takes back anyway. gc.freeze() at exit, after every command has closed
    # its files, leaves those objects out of it (what gc.freeze is documented for: objects that
    # live until the end).
    atexit.register(gc.freeze)
    try:
        app()
    except InputError as e:
        print(f"marlm: error: {e}", file=sys.stderr)
        sys.exit(2)


__all__ = ["app", "main"]
