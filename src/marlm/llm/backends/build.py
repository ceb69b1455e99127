"""What the installed llama.cpp build may run: its AMX matrix kernel is left out.

llama-cpp-python compiles llama.cpp on install, by default for the installing CPU
(``GGML_NATIVE``). On an AVX-512 Xeon with AMX (Sapphire Rapids class, here in a virtual machine)
that build repacks the weights into "extra buffer types" for its AMX matrix kernel, and the first
token of the shipped SmolLM2 (Q4_1) crashed the process with a segmentation fault: no exception,
no line, the run gone (reported upstream for other models as ggml-org/llama.cpp#20824).
Loading the model without extra buffer types (``llama_model_params.use_extra_bufts = False``)
leaves the weights as they are in the file and runs the same model on the AVX-512 kernels.

:func:`avoid_amx_repack` makes every model llama-cpp-python loads in this process (marlm's
:class:`~marlm.llm.backends.embedded.EmbeddedModel`, its layer readers and ``marlm llm serve``)
load that way when, and only when, the build has AMX kernels, with one warning. README's set-up
builds for AVX2 (``CMAKE_ARGS="-DGGML_NATIVE=OFF"``), which has no AMX kernels and gives the
answers the tests record.
"""

from __future__ import annotations

import functools
import threading
import warnings
from collections.abc import Callable
from typing import Any

#: What ``llama_print_system_info`` says of a build with AMX kernels.
AMX_MARK = "AMX_INT8 = 1"

_lock = threading.Lock()
#: Whether :func:`avoid_amx_repack` replaced the library's default model parameters.
_replaced = False


def system_info() -> str:
    """The build's features, as llama.cpp prints them (``"CPU : SSE3 = 1 | ... |"``)."""
    import llama_cpp

    return llama_cpp.llama_print_system_info().decode(errors="replace")


def without_extra_buffers(default_params: Callable[[], Any]) -> Callable[[], Any]:
    """``default_params`` (``llama_model_default_params``) whose result has
    ``use_extra_bufts = False``: weights stay as in the file, never repacked for AMX."""

    @functools.wraps(default_params)
    def params() -> Any:
        p = default_params()
        p.use_extra_bufts = False
        return p

    return params


def avoid_amx_repack(info: str | None = None) -> bool:
    """Where the build has AMX kernels, make llama-cpp-python load every model of this process
    without extra buffer types, and warn once. Idempotent and thread-safe.

    Args:
        info: the build's features (default: :func:`system_info`).

    Returns:
        True when loads are (now or already) made without extra buffer types.
    """
    import llama_cpp
    import llama_cpp.llama_cpp as low

    global _replaced
    with _lock:
        if _replaced:
            return True
        if AMX_MARK not in (system_info() if info is None else info):
            return False
        patched = without_extra_buffers(low.llama_model_default_params)
        low.llama_model_default_params = patched  # what llama_cpp.Llama calls
        llama_cpp.llama_model_default_params = patched  # the package's re-export
        _replaced = True
    from importlib.metadata import version

    warnings.warn(
        "llama-cpp-python was built with AMX kernels (for this CPU), whose repacked weights "
        "crashed this model; loading without them. README's set-up builds the AVX2 kernels the "
        'recorded answers come from: CMAKE_ARGS="-DGGML_NATIVE=OFF" .venv/bin/pip install '
        f"--no-cache-dir --force-reinstall --no-deps llama-cpp-python=={version('llama-cpp-python')}",
        RuntimeWarning,
        stacklevel=3,
    )
    return True
