"""Every way a command can be stopped ends with one line and the right exit status, keeping what
finished: a termination signal (SIGTERM, 143) like Ctrl-C, and a closed output pipe (141).
The signal is sent by the run itself at its first progress update (no timing)."""

from __future__ import annotations

import subprocess
import sys

#: ``marlm`` with a progress bar whose first update sends SIGTERM to its own process (run in a
#: child process: a test that fails must not take pytest down with the signal).
_SIGTERM_AT_FIRST_UPDATE = """
import os, signal, sys
from contextlib import nullcontext
import marlm.cli.train
from marlm.cli import main

def progress(console):
    return nullcontext(), lambda done, total: os.kill(os.getpid(), signal.SIGTERM)

marlm.cli.train._progress = progress
sys.argv = ["marlm", *sys.argv[1:]]
main()
"""


def test_sigterm_ends_a_training_run_like_ctrl_c_with_exit_143(tmp_path):
    # Before: the process died at once (exit -15), with no line and no hint.
    ck = tmp_path / "ck.npz"
    argv = ["train", "race", "--episodes", "40", "--checkpoint-every", "10", "--engine",
            "reference", "--no-plot", "--checkpoint", str(ck), "--out", str(tmp_path / "run")]  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-c", _SIGTERM_AT_FIRST_UPDATE, *argv], capture_output=True, text=True
    )
    assert proc.returncode == 143 and "Traceback" not in proc.stderr, proc.stderr
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("marlm:")]
    assert line.startswith(f"marlm: terminated; the last checkpoint is {ck}; resume with:"), line
    assert ck.is_file()


def test_a_closed_output_pipe_ends_with_one_line_and_exit_141(tmp_path):
    # Before: exit 1 and no word (rich's own handling), or a BrokenPipeError traceback.
    out = tmp_path / "run"
    argv = [sys.executable, "-m", "marlm", "train", "race", "--episodes", "200", "--no-plot",
            "--engine", "reference", "--out", str(out)]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader leaves before the run prints anything
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=300) == 141, err
    lines = [ln for ln in err.splitlines() if ln.startswith("marlm:")]
    assert lines == ["marlm: stopped: the output pipe was closed; files already written are kept"]
    assert "Traceback" not in err
    assert (out / "metrics.json").is_file()  # written before the table is printed


def test_a_stop_signal_inside_a_callback_from_c_is_raised_again_in_python():
    # Ctrl-C or SIGTERM while llama.cpp loaded the model (its log callback, called from C) was
    # dropped by ctypes ("Exception ignored"): the demo ran on to its end and exited 0.
    import signal
    import types

    import pytest

    from marlm import stops as app

    callback = types.SimpleNamespace(f_globals={"__name__": "llama_cpp._logger"})
    plain = types.SimpleNamespace(f_globals={"__name__": "marlm.hybrid.controller"})
    previous = signal.getsignal(signal.SIGALRM)
    signal.signal(signal.SIGALRM, signal.SIG_IGN)  # the armed timer must not fire in the test
    try:
        app._on_stop_signal(signal.SIGTERM, callback)  # deferred: no raise inside the callback
        assert app._DEFERRED == [signal.SIGTERM]
        assert signal.getitimer(signal.ITIMER_REAL)[0] > 0
        with pytest.raises(app.Terminated):
            app._on_timer(signal.SIGALRM, plain)
        assert app._DEFERRED == []
        app._on_timer(signal.SIGALRM, plain)  # nothing pending: nothing raised
        with pytest.raises(KeyboardInterrupt):
            app._on_stop_signal(signal.SIGINT, plain)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        app._DEFERRED.clear()
