"""How a ``marlm`` command stops, whatever stops it: a termination signal, Ctrl-C inside a
callback from C, a closed output pipe.

The CLI (:class:`marlm.cli.app.MarlmGroup`) turns each into one line on stderr and its exit
status: Ctrl-C 130, SIGTERM 143 (:class:`Terminated`), a closed pipe 141. Nothing of marlm is
imported here.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from typing import Any


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


def stop_writing_to_the_closed_pipe() -> None:
    """After the reader of stdout left: point stdout at the null device (so the interpreter's
    last flush cannot fail again) and say on stderr, if it is still open, that output stopped."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    with contextlib.suppress(OSError, ValueError):
        print("marlm: stopped: the output pipe was closed; files already written are kept",
              file=sys.stderr)  # fmt: skip


__all__ = ["Terminated", "catch_termination", "console", "stop_writing_to_the_closed_pipe"]
