"""Fixtures for the LLM line: the real llama.cpp server on loopback, a fault-injecting HTTP server,
the warehouse tools of the cases file, and a scripted model (a fault injector for exact-step tests).

The embedded model itself comes from the session fixture ``embedded_model`` in tests/conftest.py.
"""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest

from faultserver import free_port
from marlm.llm.backends import ChatResult
from marlm.llm.tools import ToolRegistry

# ----------------------------------------------------------------------------- scripted model


class ScriptedModel:
    """Returns exact texts in order (or from a function of the messages); records what it got.

    Each script item is a text, a ``(text, finish_reason)`` pair, or an exception to raise.
    """

    name = "scripted"

    def __init__(self, script: list[Any] | Callable[[list[dict[str, str]]], Any]) -> None:
        self.script = script
        self.received: list[list[dict[str, str]]] = []
        self.schemas: list[Any] = []
        self.kwargs: list[dict[str, Any]] = []

    def chat(self, messages, *, schema=None, max_tokens=256, temperature=0.0, seed=None):
        self.received.append([dict(m) for m in messages])
        self.schemas.append(schema)
        self.kwargs.append({"max_tokens": max_tokens, "temperature": temperature, "seed": seed})
        if callable(self.script):
            item = self.script(messages)
        else:
            if not self.script:
                raise AssertionError("scripted model ran out of replies")
            item = self.script.pop(0)
        if isinstance(item, BaseException):
            raise item
        text, finish = item if isinstance(item, tuple) else (item, "stop")
        return ChatResult(text=text, prompt_tokens=10, completion_tokens=5, finish_reason=finish)


@pytest.fixture
def scripted():
    return ScriptedModel


# ----------------------------------------------------------------------------- warehouse tools


class WarehouseTools:
    """The tools of the cases file, recording every call they receive."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.registry = ToolRegistry()
        self.registry.register(self.robot_status, name="robot_status")
        self.registry.register(self.order_status, name="order_status")
        self.registry.register(self.assign, name="assign")

    def robot_status(self, robot: int) -> str:
        """Position and load of a robot."""
        self.calls.append(("robot_status", {"robot": robot}))
        if robot > 9:
            raise ValueError(f"no robot {robot}\nknown robots: 1..9")
        return f"robot {robot} at (2, 3), idle"

    def order_status(self, order: str, verbose: bool = False) -> str:
        """Status of an order: pending, assigned or delivered."""
        self.calls.append(("order_status", {"order": order, "verbose": verbose}))
        return "pending"

    def assign(self, robot: int, order: str, note: str = "") -> str:
        """Assign an order to a robot, with an optional note."""
        self.calls.append(("assign", {"robot": robot, "order": order, "note": note}))
        return f"robot {robot} assigned to {order}"


@pytest.fixture
def warehouse():
    return WarehouseTools()


# ----------------------------------------------------------------------------- real server


@pytest.fixture(scope="session")
def llama_server():
    """The embedded SmolLM2 served by llama_cpp.server on a free loopback port: yields base_url.

    One thread: llama.cpp's threads wait for each other at every operation, so two threads on
    two cores beside other busy processes took twice as long as one (measured with one CPU-bound
    process beside the tests: 139 s against 65 s for the same requests)."""
    port = free_port()
    code = (
        "from marlm.llm.server import serve; "
        f"serve(host='127.0.0.1', port={port}, n_ctx=2048, n_threads=1)"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    base = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 90
    try:
        while True:
            if proc.poll() is not None:
                err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
                pytest.fail(f"llama server exited with {proc.returncode}: {err[-2000:]}")
            try:
                with urllib.request.urlopen(base + "/models", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("llama server did not come up within 90 s")
            time.sleep(0.3)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


# ----------------------------------------------------------------------------- scripted server


@pytest.fixture(scope="session")
def scripted_server():
    """A :class:`scriptedserver.ScriptedServer` on loopback; ``route(fn)`` gives a base URL."""
    import threading

    from scriptedserver import ScriptedServer

    server = ScriptedServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
