"""marlm: multi-agent systems that put each decision where it belongs.

Three layers, three kinds of decision:

- ``marlm.rl``: reinforcement learning for high-frequency actions (every robot, every step);
- ``marlm.llm``: a language model for low-frequency semantic decisions (what an order's note means,
  which order goes first), called only when the situation changes;
- ``marlm.hybrid``: the two wired together with a rule-based shield that has the last word.

Importing ``marlm`` loads none of the heavy dependencies (numba, matplotlib, ray, llama.cpp,
PettingZoo): each module imports what it uses, and the ``marlm`` command imports a command's
modules only when that command runs.
"""

import os as _os
from collections.abc import Callable as _Callable
from collections.abc import Mapping as _Mapping

__version__ = "0.1.0"


def _writable(path: str) -> bool:
    return _os.access(path, _os.W_OK)


def numba_cache_dir(
    environ: _Mapping[str, str] = _os.environ, writable: _Callable[[str], bool] = _writable
) -> str | None:
    """The folder numba must cache compiled kernels in, or None where its own choice works.

    The kernels are compiled with ``@njit(cache=True)``: numba writes the machine code next to the
    source (``__pycache__``), or else in the user's cache folder (``$XDG_CACHE_HOME/numba``,
    ``~/.cache/numba``), and refuses to import a cached kernel's module where neither is writable
    (a read-only install and home). Then, and only if ``NUMBA_CACHE_DIR`` is unset, this returns a
    per-user folder under the temporary directory. ``writable(path)`` says whether ``path`` (an
    existing folder) can be written.
    """
    if environ.get("NUMBA_CACHE_DIR"):
        return None
    if writable(_os.path.dirname(__file__)):
        return None
    home_cache = environ.get("XDG_CACHE_HOME") or _os.path.join(_os.path.expanduser("~"), ".cache")
    folder = _os.path.join(home_cache, "numba")
    while not _os.path.isdir(folder) and _os.path.dirname(folder) != folder:
        folder = _os.path.dirname(folder)  # the nearest existing folder numba would create in
    if writable(folder):
        return None
    import sys
    import tempfile

    user = "user" if sys.platform == "win32" else _os.getuid()  # getuid: POSIX only
    return _os.path.join(tempfile.gettempdir(), f"marlm-numba-{user}")


if (_cache := numba_cache_dir()) is not None:  # before any module imports numba
    _os.environ["NUMBA_CACHE_DIR"] = _cache
