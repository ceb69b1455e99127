"""The llama.cpp build's AMX kernel is left out: a native build on an AVX-512/AMX Xeon crashed on
the first token of the shipped model (a segmentation fault, no line) until its models were loaded
without extra buffer types."""

from __future__ import annotations

import warnings

import llama_cpp
import llama_cpp.llama_cpp as low
import pytest

from marlm.llm.backends.build import AMX_MARK, avoid_amx_repack, system_info

AMX_BUILD = "CPU : SSE3 = 1 | AVX2 = 1 | AVX512 = 1 | AMX_INT8 = 1 | REPACK = 1 | "


@pytest.fixture
def restored(monkeypatch):
    """The library's own default params, put back after the test (and marlm's record of them)."""
    from marlm.llm.backends import build

    monkeypatch.setattr(build, "_replaced", False)
    monkeypatch.setattr(low, "llama_model_default_params", low.llama_model_default_params)
    monkeypatch.setattr(
        llama_cpp, "llama_model_default_params", llama_cpp.llama_model_default_params
    )
    return low.llama_model_default_params


def test_a_build_without_amx_kernels_loads_as_the_library_does(restored):
    assert AMX_MARK not in system_info()  # README's set-up: the AVX2 build
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert avoid_amx_repack() is False
    assert low.llama_model_default_params is restored
    assert low.llama_model_default_params().use_extra_bufts is True


def test_an_amx_build_loads_every_model_without_extra_buffers_and_says_so_once(restored):
    with pytest.warns(RuntimeWarning, match="AMX kernels") as caught:
        assert avoid_amx_repack(AMX_BUILD) is True
        assert avoid_amx_repack(AMX_BUILD) is True  # already done: no second warning
    assert len(caught) == 1
    message = str(caught[0].message)  # the fix, at the installed version (never a newer one)
    assert "GGML_NATIVE=OFF" in message and f"llama-cpp-python=={llama_cpp.__version__}" in message
    for module in (low, llama_cpp):  # what Llama() calls, and the package's name for it
        params = module.llama_model_default_params()
        assert params.use_extra_bufts is False
        assert params.n_gpu_layers == restored().n_gpu_layers  # the rest is the library's


def test_the_embedded_model_loads_and_answers_after_the_change(restored):
    # The whole path on the installed build with extra buffers off: a model loads and scores.
    from marlm.llm import make_backend

    with pytest.warns(RuntimeWarning, match="AMX kernels"):
        avoid_amx_repack(AMX_BUILD)
    model = make_backend("embedded")
    try:
        scores = model.score("Is the order urgent?\nNote: blood for the lab, now\nUrgency:",
                             [" urgent", " normal"])  # fmt: skip
    finally:
        model.close()
    assert scores.logprobs.shape == (2,)
    assert scores.logprobs[0] > scores.logprobs[1]
