"""GridRace training loops compiled ahead of time, so that a run loads them without numba.

A warm ``marlm train race`` spent about half of its CPU time in numba itself, not in the loop:
importing numba, and loading the JIT's cached machine code (numba rebuilds its typing and target
registries in every process). The same loop, compiled ahead of time into a CPython extension module
by numba's AOT compiler (``numba.pycc``, "Compiling code ahead of time" in numba's documentation),
imports in milliseconds and needs neither numba nor LLVM at run time. It is the function the JIT
compiles (:func:`marlm.rl.kernels.compile_race_loop`, same source, same compiler, same random
draws from the ``numpy.random.Generator`` passed in), so a run gives the same tables, logs and
generator state either way (tested).

Where: ``<cache>/aot/race_<kind>_<family>_<key><suffix>``, with ``<cache>`` the user's marlm cache
(``$MARLM_CACHE``, else ``$XDG_CACHE_HOME/marlm``, else ``~/.cache/marlm``: the folder of the
executor's cached policies). ``<key>`` hashes the sources the loop is compiled from (this module,
:mod:`marlm.rl.codes`, :mod:`marlm.rl.fast`, :mod:`marlm.rl.kernels`, :mod:`marlm.envs.grid_dynamics`), numba's and
numpy's versions and the Python version; ``<suffix>`` is the interpreter's extension suffix (ABI and
machine). A module built from other sources or with other versions has another name, so it is never
loaded.

When: the first run of a (learner, credit family) that finds no module builds it, in a child
process (tens of seconds, about what the JIT's first compilation costs; it needs a C compiler),
into a temporary file renamed into place, then uses it. ``python -m marlm.rl.aot`` builds all five
(:data:`LOOPS`) beforehand and removes stale ones. A build that fails leaves a note
``<name>.failed`` (the error), so later runs do not try again (``python -m marlm.rl.aot`` does).
The JIT of :mod:`marlm.rl.fast` runs the loop instead, as before, whenever no module is usable:
``MARLM_AOT=0``, a failed build, a cache folder that cannot be written, or arguments of other
types than the module was built for. A module that does not load (cut short, empty, other ABI)
is a damaged cache entry: it is removed and built again once (its note kept if that fails too).

Portability: the module is compiled for the generic CPU of its architecture (pycc's default), and
like the JIT without fast-math, so its floating-point results are those of the JIT's loop.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.machinery
import importlib.util
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from marlm.rl.codes import COUNTERFACTUAL_CREDIT, IQL, JAL, PLAIN_CREDIT, VDN

__all__ = ["build_race_loop", "module_path", "run_race_loop"]

#: What a compiled loop expects, in :func:`marlm.rl.fast.race_episodes`' order: ``(dtype, ndim)``
#: of a C-contiguous array, or the Python type of a scalar. Argument 4 (``moves``) may be read-only.
_F8, _I8, _B1, _I1 = (np.dtype(t) for t in (np.float64, np.int64, np.bool_, np.int8))
SIGNATURE: tuple = (
    (_F8, 2), (_F8, 2), (_F8, 2), (_F8, 2), (_I8, 2), int, int, int, bool, int, float, bool, bool,
    (_F8, 2), (_F8, 1), float, np.random.Generator,
    (_F8, 2), (_F8, 2), (_F8, 1), (_I8, 1), (_B1, 2), (_I8, 3), (_I1, 3),
)  # fmt: skip
_READ_ONLY = 4

#: The (learner, credit family) pairs a run can use (VDN learns from the team reward only).
LOOPS = (
    (IQL, PLAIN_CREDIT), (IQL, COUNTERFACTUAL_CREDIT), (VDN, PLAIN_CREDIT),
    (JAL, PLAIN_CREDIT), (JAL, COUNTERFACTUAL_CREDIT),
)  # fmt: skip

#: The files the loops are compiled from, relative to the ``marlm`` package.
_SOURCES = ("rl/aot.py", "rl/codes.py", "rl/fast.py", "rl/kernels.py", "envs/grid_dynamics.py")
_PACKAGE = Path(__file__).resolve().parents[1]

_LOADED: dict[Path, object] = {}


def cache_folder(environ=os.environ) -> Path:
    """``<cache>/aot``, the cache being ``$MARLM_CACHE``, else ``$XDG_CACHE_HOME/marlm``, else
    ``~/.cache/marlm`` (the rule of ``marlm.hybrid.build.cache_dir``; ``rl`` may not import it)."""
    if environ.get("MARLM_CACHE"):
        return Path(environ["MARLM_CACHE"]) / "aot"
    base = Path(environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "marlm" / "aot"


@functools.cache
def _key() -> str | None:
    """Hash of the loop's sources and of numba's, numpy's and Python's versions (numba's read
    from its version file, not by importing it); None where one of them cannot be read."""
    spec = importlib.util.find_spec("numba")
    if spec is None or spec.origin is None:
        return None
    h = hashlib.sha256()
    try:
        for rel in _SOURCES:
            h.update((_PACKAGE / rel).read_bytes())
        h.update((Path(spec.origin).parent / "_version.py").read_bytes())
    except OSError:  # sources not on disk (a zip) or numba without its version file
        return None
    h.update(f"{np.__version__}|{sys.version}".encode())
    return h.hexdigest()[:16]


def module_path(kind: int, family: int, folder: Path | None = None) -> Path | None:
    """Where the module of learner ``kind`` and credit ``family`` is (or would be) built; None
    where :func:`_key` cannot be made (numba not installed, sources not files)."""
    key = _key()
    if key is None:
        return None
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    return (folder or cache_folder()) / f"race_{kind}_{family}_{key}{suffix}"


def _module_name(path: Path) -> str:
    return path.name[: -len(importlib.machinery.EXTENSION_SUFFIXES[0])]


def _failure_note(path: Path) -> Path:
    return path.with_name(_module_name(path) + ".failed")


def _load(path: Path):
    """The module's ``race_loop``, or None if it does not load."""
    if path not in _LOADED:
        loop = None
        try:
            spec = importlib.util.spec_from_file_location(_module_name(path), path)
            if spec is None or spec.loader is None:
                raise ImportError(f"not a loadable module: {path}")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            loop = module.race_loop
        except (ImportError, OSError, AttributeError):
            loop = None  # corrupt, truncated or of another ABI: the JIT runs the loop
        _LOADED[path] = loop
    return _LOADED[path]


def _converted(args: tuple) -> tuple | None:
    """``args`` as the compiled loop takes them, or None where one does not fit :data:`SIGNATURE`.

    The module's wrapper converts each argument to its declared type without checking it (an
    array of another dtype would be read as float64), so every one is checked here. Scalars must
    already be of the JIT's type for the same result (a ``float32`` weight would compile another
    loop), so only Python's and numpy's 64-bit types pass.
    """
    if len(args) != len(SIGNATURE):
        return None
    out = []
    for i, (x, want) in enumerate(zip(args, SIGNATURE, strict=True)):
        if isinstance(want, tuple):
            ok = (
                type(x) is np.ndarray
                and (x.dtype, x.ndim) == want
                and x.flags.c_contiguous
                and x.flags.aligned
                and (x.flags.writeable or i == _READ_ONLY)
            )
        elif want is bool:
            ok = isinstance(x, bool | np.bool_)
            x = bool(x)
        elif want is int:
            ok = isinstance(x, int | np.int64) and not isinstance(x, bool)
            x = int(x) if ok else x
        elif want is float:
            ok = isinstance(x, float)  # np.float64 is a float
            x = float(x) if ok else x
        else:
            ok = type(x) is want
        if not ok:
            return None
        out.append(x)
    return tuple(out)


def run_race_loop(kind: int, family: int, args: tuple) -> bool:
    """Run the loop of learner ``kind`` and credit ``family`` built ahead of time on ``args``
    (those of :func:`marlm.rl.fast.race_episodes`), building it first if it was never built.

    Returns False, having done nothing, where no module is usable (see the module docstring);
    the caller then runs the JIT's loop.
    """
    if os.environ.get("MARLM_AOT", "1") == "0":
        return False
    call = _converted(args)
    if call is None:
        return False
    path = module_path(kind, family)
    if path is None:
        return False
    built = path.is_file() or (
        not _failure_note(path).exists()
        and _writable(path.parent)
        and _build_in_child(kind, family, path)
    )
    if not built:
        return False
    loop = _load(path)
    if loop is None:
        loop = _rebuild(kind, family, path)
    if loop is None:
        return False
    loop(*call)
    return True


def _rebuild(kind: int, family: int, path: Path):
    """A cached module that does not load (cut short, empty, overwritten) is removed and built
    again, once, like any other damaged cache entry; returns its ``race_loop``, or None (then
    a note keeps later runs from trying again, see :func:`_failure_note`)."""
    if not _writable(path.parent):
        return None
    try:
        path.unlink(missing_ok=True)
    except OSError:
        return None
    _LOADED.pop(path, None)
    loop = _load(path) if _build_in_child(kind, family, path) else None
    if loop is None and path.is_file():
        with contextlib.suppress(OSError):
            path.unlink()
            _failure_note(path).write_text(
                "built again after a damaged module; still does not load"
            )
    return loop


def _writable(folder: Path) -> bool:
    """Whether ``folder`` exists, or is made, and can be written (a read-only cache: no build,
    and no note of one, so every run would try again: it uses the JIT at once)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(folder, os.W_OK)


def _build_in_child(kind: int, family: int, path: Path) -> bool:
    """Build in a child process (numba and the C compiler stay out of this one); its output is
    kept in the ``.failed`` note if it fails."""
    pythonpath = [str(_PACKAGE.parent), *filter(None, [os.environ.get("PYTHONPATH")])]
    # The C the build compiles is numba's helper library (NRT, typed containers), which the loop
    # (compiled by LLVM from numba's IR, whatever these flags) hardly calls: built without debug
    # information and at -O1 (added after the interpreter's -g -O3, so they win), the build takes
    # a fifth less CPU.
    cflags = " ".join(filter(None, [os.environ.get("CFLAGS"), "-g0 -O1"]))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(pythonpath), "CFLAGS": cflags}
    cmd = [sys.executable, "-m", "marlm.rl.aot", str(kind), str(family), str(path)]
    try:
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
        error = None if done.returncode == 0 else f"exit {done.returncode}\n{done.stderr[-4000:]}"
    except (OSError, subprocess.SubprocessError) as e:
        error = repr(e)
    if error is None and path.is_file():
        return True
    with contextlib.suppress(OSError):  # the cache went read-only meanwhile: the next run checks
        _failure_note(path).write_text(error or "no module written")
    return False


def build_race_loop(kind: int, family: int, path: Path) -> Path:
    """Compile the loop of learner ``kind`` and credit ``family`` into the extension module
    ``path`` (from :func:`module_path`): built in a temporary folder beside it, then renamed into
    place, so no process ever sees a half-written module. Imports numba; raises whatever numba's
    compiler or the C toolchain raises."""
    import warnings

    from numba import from_dtype, typeof, types

    with warnings.catch_warnings():  # pycc is "pending deprecation" in numba 0.57+
        warnings.simplefilter("ignore")
        from numba.pycc import CC

    from marlm.rl import kernels

    scalars: dict[type, types.Type] = {bool: types.boolean, int: types.int64, float: types.float64}
    arg_types: list[types.Type] = []
    for i, want in enumerate(SIGNATURE):
        if isinstance(want, tuple):
            arg_types.append(
                types.Array(from_dtype(want[0]), want[1], "C", readonly=i == _READ_ONLY)
            )
        elif want is np.random.Generator:
            arg_types.append(typeof(np.random.default_rng(0)))
        else:
            arg_types.append(scalars[want])
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent, prefix=".build-") as tmp:
        cc = CC(_module_name(path), source_module=kernels)
        cc.output_dir = tmp
        cc.output_file = path.name
        cc.export("race_loop", types.void(*arg_types))(
            kernels.compile_race_loop(kind, family).py_func
        )
        cc.compile()
        os.replace(Path(tmp) / path.name, path)
    return path


def _main(argv: list[str]) -> int:
    """``python -m marlm.rl.aot``: build every learner's loops (a failed build's note is retried)
    and remove the modules and notes of other sources or versions; ``python -m marlm.rl.aot KIND
    FAMILY PATH``: build one (what a run does on first use)."""
    if argv:
        build_race_loop(int(argv[0]), int(argv[1]), Path(argv[2]))
        return 0
    key = _key()
    for old in cache_folder().glob("race_*"):
        if key is None or f"_{key}." not in old.name:
            old.unlink()
    for kind, family in LOOPS:
        path = module_path(kind, family)
        if path is None:
            print("numba is not installed", file=sys.stderr)
            return 1
        _failure_note(path).unlink(missing_ok=True)
        if not path.is_file():
            build_race_loop(kind, family, path)
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
