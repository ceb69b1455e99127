"""The builds the recorded outputs depend on are pinned exactly, and the installed one is the pin:
a version range let a fresh install take a newer llama.cpp than the tests recorded (README's
LLMReward example then printed the opposite sign)."""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXACT = ("llama-cpp-python", "torch", "gguf")


def requirements() -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = [r for reqs in project["optional-dependencies"].values() for r in reqs]
    return [*project["dependencies"], *extras]


def test_every_requirement_of_a_recorded_build_is_an_exact_pin():
    for name in EXACT:
        found = [r for r in requirements() if re.match(rf"{re.escape(name)}(\[[a-z]+\])?\b", r)]
        assert found, name
        for req in found:
            assert re.fullmatch(rf"{re.escape(name)}(\[[a-z]+\])?==[0-9.]+", req), req


def test_the_installed_llama_cpp_python_is_the_pinned_one():
    pins = {r.split("==")[1] for r in requirements() if r.startswith("llama-cpp-python")}
    assert pins == {metadata.version("llama-cpp-python")}


def test_the_installed_llama_cpp_build_has_the_recorded_kernels():
    # The recorded outputs are the AVX2 build's (README's set-up: CMAKE_ARGS=-DGGML_NATIVE=OFF).
    # A build for an AVX-512/AMX CPU rounds otherwise, and its AMX kernel crashed on this model.
    import llama_cpp

    info = llama_cpp.llama_print_system_info().decode()
    assert "AVX2 = 1" in info or not info.startswith("CPU : SSE"), info
    assert "AVX512 = 1" not in info and "AMX_INT8 = 1" not in info, info
