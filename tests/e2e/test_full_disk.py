"""A disk that fills up during ``marlm demo``: one ``marlm: error:`` line, exit code 2, the
metrics written before the pictures, no temporary file left.

The full disk is injected where the bytes are written (``OSError(ENOSPC)``, as the system raises
it); the run itself is a real, cheap one.
"""

from __future__ import annotations

import errno
import json
import sys
from pathlib import Path

import pytest

from marlm.cli import main

DEMO = ["demo", "--planner", "rule", "--executor", "greedy", "--steps", "15", "--tick-ms", "0", "--sync"]  # fmt: skip


def marlm(monkeypatch, capsys, *args) -> tuple[int, str]:
    monkeypatch.setattr(sys, "argv", ["marlm", *map(str, args)])
    try:
        main()
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    return code, capsys.readouterr().err


def _no_space(path: str) -> OSError:
    return OSError(errno.ENOSPC, "No space left on device", path)


def test_a_full_disk_while_the_gif_is_written_keeps_the_metrics(tmp_path, monkeypatch, capsys):
    # Two chained tracebacks (exit 1), episode.gif.tmp left, no metrics.json, no table.
    import marlm.eval.gif as plots

    real, frames = plots._gif_frame, []

    def frame_then_full(frame, delay):
        frames.append(1)
        if len(frames) > 5:
            raise _no_space(str(tmp_path / "run" / "episode.gif.tmp"))
        return real(frame, delay)

    monkeypatch.setattr(plots, "_gif_frame", frame_then_full)
    code, err = marlm(monkeypatch, capsys, *DEMO, "--out", tmp_path / "run")
    assert code == 2, err
    lines = err.strip().splitlines()
    assert lines[-1] == (
        f"marlm: error: {tmp_path / 'run' / 'episode.gif'}: cannot write (No space left on "
        "device): no space left on the disk; free some space, or write to another disk"
    )
    assert "Traceback" not in err and err.count("marlm: error:") == 1
    names = sorted(p.name for p in (tmp_path / "run").iterdir())
    assert names == ["metrics.json", "reward_curves.png", "trace.jsonl"]
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["steps"] == 15


def test_a_full_disk_at_the_metrics_leaves_no_temporary_file(tmp_path, monkeypatch, capsys):
    real = Path.write_text

    def full(self, *args, **kwargs):
        if self.name == "metrics.json.tmp":
            real(self, "{", encoding="utf-8")  # a part was written, then the disk was full
            raise _no_space(str(self))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", full)
    code, err = marlm(monkeypatch, capsys, *DEMO, "--out", tmp_path / "run")
    assert code == 2 and "metrics.json: cannot write (No space left on device)" in err, err
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["trace.jsonl"]


@pytest.mark.parametrize("code_", [errno.EROFS, errno.EDQUOT])
def test_a_read_only_or_full_quota_folder_is_one_line(tmp_path, monkeypatch, capsys, code_):
    import marlm.eval.trace as trace

    def refuse(*args, **kwargs):
        raise OSError(code_, "refused", str(tmp_path / "run" / "trace.jsonl"))

    monkeypatch.setattr(trace.TraceWriter, "__init__", refuse)
    code, err = marlm(monkeypatch, capsys, *DEMO, "--out", tmp_path / "run")
    assert code == 2 and err.count("marlm: error:") == 1 and "Traceback" not in err, err
    assert "trace.jsonl: cannot write" in err


def test_a_full_disk_while_the_trace_is_written_names_the_trace(tmp_path, monkeypatch, capsys):
    # A write or the last flush of the trace names no file: the line said "cannot write" alone.
    from marlm.eval.trace import TraceWriter

    class FullFile:
        closed = False

        def write(self, line):
            raise OSError(errno.ENOSPC, "No space left on device")

        def flush(self):
            pass

        def close(self):
            self.closed = True
            raise OSError(errno.ENOSPC, "No space left on device")

    real_init = TraceWriter.__init__

    def init(self, path, **kwargs):
        real_init(self, path, **kwargs)
        self._file.close()
        self._file = FullFile()

    monkeypatch.setattr(TraceWriter, "__init__", init)
    code, err = marlm(monkeypatch, capsys, *DEMO, "--out", tmp_path / "run")
    trace = tmp_path / "run" / "trace.jsonl"
    assert code == 2 and err.strip().splitlines()[-1].startswith(
        f"marlm: error: {trace}: cannot write (No space left on device)"
    ), err
    # Nothing of the run could be written: its claim keeps the folder recognisable as marlm's.
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == [".marlm-run", "trace.jsonl"]
