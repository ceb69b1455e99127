"""Ray stops answered in one line: an actor killed mid-training ends the command with one
``marlm: error:`` line naming the checkpoint saved and the command that resumes (not Ray's
traceback), and an ``--address`` where something other than a Ray head listens is refused
before any work (not a wait of minutes inside ``ray.init``)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from marlm.errors import InputError
from marlm.scale.parallel import check_address

pytest.importorskip("ray")
TESTS = Path(__file__).resolve().parents[1]


def _marlm(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.run(
        [sys.executable, "-m", "marlm", *args],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600,
    )  # fmt: skip


def test_an_actor_killed_mid_training_ends_in_one_line_naming_the_checkpoint(tmp_path):
    pytest.importorskip("torch")
    ck, out = tmp_path / "ck.npz", tmp_path / "run"
    args = ["train", "env", "ray_faults:DyingRace", "--env-kwargs", '{"die_at": 150, "size": 3}']
    args += ["--learner", "mappo", "--steps", "300", "--checkpoint-every", "100", "--envs", "2"]
    args += ["--workers", "2", "--checkpoint", str(ck), "--out", str(out)]
    proc = _marlm(args, tmp_path)
    assert proc.returncode == 1, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    mine = [line for line in lines if line.startswith("marlm:")]
    assert len(mine) == 1, proc.stderr[-3000:]
    line = mine[0]
    assert line.startswith("marlm: error: a Ray actor holding copies of the environment died")
    assert f"the last checkpoint is {ck}; resume with: marlm train env" in line
    assert f"--resume {ck}" in line and ck.is_file()  # written after the first 100 steps


class _NotRay:
    """A loopback listener that is not a Ray head: ``answer`` is sent to whatever connects
    (``None``: accepts and stays silent)."""

    def __init__(self, answer: bytes | None) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.answer = answer
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            if self.answer is not None:
                conn.recv(1024)
                conn.sendall(self.answer)

    def close(self) -> None:
        for c in self.conns:
            c.close()
        self.sock.close()


@pytest.mark.parametrize(
    "answer, words",
    [
        (b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n", "answered as HTTP/1.1"),
        (b"SSH-2.0-OpenSSH_9.6\r\n", "not a Ray head"),
        (None, "did not answer"),
    ],
    ids=["http server", "ssh server", "silent"],
)
def test_an_address_where_something_else_listens_is_refused(answer, words):
    other = _NotRay(answer)
    try:
        with pytest.raises(InputError, match="field '--address'") as e:
            check_address(f"127.0.0.1:{other.port}", timeout_s=1.0)
        assert words in str(e.value) and "\n" not in str(e.value)
    finally:
        other.close()


def test_the_command_refuses_an_address_of_another_server_with_exit_2(tmp_path):
    other = _NotRay(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
    try:
        args = ["train", "warehouse", "--seeds", "2", "--workers", "2"]
        args += ["--address", f"127.0.0.1:{other.port}", "--out", str(tmp_path / "x.npz")]
        proc = _marlm(args, tmp_path)
    finally:
        other.close()
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.startswith("marlm: error: field '--address':")
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "x.npz").exists()


def test_a_real_ray_head_passes_the_check():
    import ray

    ray.init(
        num_cpus=1, include_dashboard=False, log_to_driver=False,
        object_store_memory=80 * 2**20, configure_logging=False,
    )  # fmt: skip
    try:
        address = ray.get_runtime_context().gcs_address
        check_address(address, timeout_s=5.0)
    finally:
        ray.shutdown()
