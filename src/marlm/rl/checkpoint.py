"""Atomic checkpoints of a training run: tables, logs, random-generator state, episode counter.

A checkpoint is one ``.npz`` file: the arrays by name plus a JSON ``meta`` entry (the run's kind,
its config, the next episode index, and ``numpy.random.Generator.bit_generator.state``). It is
written to a temporary file in the same folder, flushed and fsynced, then renamed over the old one
(``os.replace`` is atomic on POSIX), so a crash leaves either the previous checkpoint or the new
one, never half of one. Resuming restores the generator state exactly, so a resumed run continues
draw for draw as the uninterrupted run with the same seed would.
"""

from __future__ import annotations

import json
import os
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from marlm.errors import InputError

FORMAT = "marlm-checkpoint-v1"


def save_checkpoint(
    path: str | Path,
    *,
    kind: str,
    config: dict[str, Any],
    episode: int,
    rng: np.random.Generator,
    arrays: dict[str, np.ndarray],
) -> Path:
    """Write a checkpoint atomically; returns its path.

    Args:
        path: the ``.npz`` file to (over)write.
        kind: the run's kind, e.g. ``"gridworld"`` or ``"race"``.
        config: the run's configuration as plain JSON values.
        episode: number of episodes completed (the next episode's 0-based index).
        rng: the run's generator; its bit-generator state is stored.
        arrays: tables and logs by name.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = {
        "format": FORMAT,
        "kind": kind,
        "config": config,
        "episode": int(episode),
        "rng_state": rng.bit_generator.state,
    }
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, __meta__=np.array(json.dumps(meta)), **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def load_checkpoint(path: str | Path, *, kind: str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Read a checkpoint written by :func:`save_checkpoint`.

    Returns:
        ``(meta, arrays)``; ``meta`` has ``kind``, ``config``, ``episode``, ``rng_state``.

    Raises:
        InputError: the file is missing, empty, unreadable, not a marlm checkpoint (e.g. a bare
            ``.npy`` or a text file), or of another kind.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError("checkpoint file not found", source=path, field="checkpoint")
    expected = "expected a .npz checkpoint written by 'marlm train ... --checkpoint FILE'"
    try:
        data = np.load(path, allow_pickle=False)
        if not isinstance(data, np.lib.npyio.NpzFile):  # a bare .npy array
            raise ValueError("a single array, not an .npz archive")
        with data:
            meta = json.loads(str(data["__meta__"]))
            arrays = {k: data[k] for k in data.files if k != "__meta__"}
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as e:
        # An empty file raises EOFError (which click would turn into "Aborted!").
        if path.stat().st_size == 0:
            reason = "the file is empty"
        elif isinstance(e, KeyError):
            reason = "an .npz archive without marlm's metadata"
        else:
            reason = "not an .npz archive"
        raise InputError(
            f"is not a marlm checkpoint ({reason}); {expected}", source=path, field="checkpoint"
        ) from e
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise InputError(f"is not a {FORMAT} file; {expected}", source=path, field="checkpoint")
    if meta.get("kind") != kind:
        raise InputError(
            f"checkpoint is for {meta.get('kind')!r}, this run trains {kind!r}",
            source=path,
            field="checkpoint",
        )
    return meta, arrays


def restore_rng(state: dict[str, Any]) -> np.random.Generator:
    """A generator whose bit generator is in ``state`` (from ``bit_generator.state``)."""
    bitgen = getattr(np.random, state["bit_generator"])()
    bitgen.state = state
    return np.random.Generator(bitgen)
