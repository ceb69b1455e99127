"""Atomic checkpoints of a training run: tables, logs, random-generator state, episode counter.

A checkpoint is two files. ``<name>.npz`` holds the tables by name plus a JSON ``meta`` entry
(the run's kind, its config, the next episode index, and
``numpy.random.Generator.bit_generator.state``): it is written to a temporary file in the same
folder, flushed and fsynced, then renamed over the old one (``os.replace`` is atomic on POSIX),
so a crash leaves either the previous checkpoint or the new one, never half of one. Its size does
not grow with the run.

The per-episode log (returns, lengths, actions: one fixed-size record per episode) is appended to
``<name>.npz.episodes`` (:data:`LOG_SUFFIX`) instead of being rewritten at every save: a save
writes the records of the episodes since the last save, fsyncs them, then replaces the ``.npz``,
whose ``meta`` says how many records belong to it. Records past that count (written before a
crash that came before the ``.npz`` was replaced) are ignored on reading and cut off by the next
save. (A 3M-episode GridRace run rewrote 690 MB of logs at every save; now each save writes one
chunk's records.) Resuming restores the generator state exactly, so a resumed run continues draw
for draw as the uninterrupted run with the same seed would.
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
#: The episode log beside a checkpoint: ``<checkpoint>`` + this suffix.
LOG_SUFFIX = ".episodes"
#: The log file's first bytes, then a 4-byte little-endian header length and a JSON header
#: (``{"format", "kind", "fields"}``, ``fields`` one record's ``[[name, dtype, shape], ...]``).
LOG_MAGIC = b"marlm-episode-log-v1\n"


def log_path(path: str | Path) -> Path:
    """The episode log file of the checkpoint ``path`` (:data:`LOG_SUFFIX`)."""
    p = Path(path)
    return p.with_name(p.name + LOG_SUFFIX)


def checkpoint_files(path: str | Path | None) -> list[Path]:
    """The files of the checkpoint ``path``: itself and its episode log ([] for None)."""
    return [] if path is None else [Path(path), log_path(path)]


def _record_dtype(log: dict[str, np.ndarray]) -> np.dtype:
    """One episode's record: a field per log array, of its dtype and per-episode shape."""
    return np.dtype([(name, a.dtype, a.shape[1:]) for name, a in log.items()])


def _fields(dtype: np.dtype) -> list[list[Any]]:
    """A record dtype as JSON: ``[[name, dtype string, shape], ...]``.

    Raises:
        ValueError: ``dtype`` is not a record dtype.
    """
    fields, names = dtype.fields, dtype.names
    if fields is None or names is None:
        raise ValueError(f"not a record dtype: {dtype}")
    return [[name, fields[name][0].base.str, list(fields[name][0].shape)] for name in names]


def _from_fields(fields: list[list[Any]]) -> np.dtype:
    """The record dtype of :func:`_fields`."""
    return np.dtype(
        [(str(n), np.dtype(str(t)), tuple(int(k) for k in shape)) for n, t, shape in fields]
    )


def _log_header(kind: str, dtype: np.dtype) -> bytes:
    header = json.dumps({"format": FORMAT, "kind": kind, "fields": _fields(dtype)}).encode()
    return LOG_MAGIC + len(header).to_bytes(4, "little") + header


def _read_log_header(f: Any) -> tuple[dict[str, Any], int]:
    """``(header, offset of the first record)`` of an open episode log.

    Raises:
        ValueError: not an episode log.
    """
    if f.read(len(LOG_MAGIC)) != LOG_MAGIC:
        raise ValueError("not a marlm episode log")
    n = int.from_bytes(f.read(4), "little")
    header = json.loads(f.read(n))
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise ValueError("an episode log of another format")
    return header, len(LOG_MAGIC) + 4 + n


def is_episode_log(path: str | Path) -> bool:
    """Whether ``path`` is the episode log of a marlm checkpoint (by its first bytes)."""
    try:
        with open(path, "rb") as f:
            _read_log_header(f)
        return True
    except (OSError, ValueError, UnicodeDecodeError):
        return False


class CheckpointWriter:
    """The checkpoints of one run, all to ``path``: the tables replaced atomically at each save,
    the per-episode log appended (see the module docstring).

    Args:
        path: the checkpoint (``.npz``); its log is :func:`log_path`.
        kind: the run's kind (``"gridworld"``, ``"race"``).
        logged: records of this run already in the log (a run resumed from ``path`` itself:
            the resumed checkpoint's episode count); 0 starts the log anew at the first save.
    """

    def __init__(self, path: str | Path, *, kind: str, logged: int = 0) -> None:
        self.path = Path(path)
        self.kind = kind
        self.logged = logged
        #: Bytes written by the last :meth:`save` (the log's new records and the ``.npz``).
        self.last_bytes = 0

    def save(
        self,
        *,
        config: dict[str, Any],
        episode: int,
        rng: np.random.Generator,
        tables: dict[str, np.ndarray],
        log: dict[str, np.ndarray],
    ) -> Path:
        """Append the log's records ``[logged, episode)``, then replace the ``.npz``.

        Args:
            tables: the learned tables by name (written whole: their size is fixed).
            log: per-episode arrays by name, each of first dimension >= ``episode``.

        Raises:
            OSError: a file cannot be written (the previous checkpoint then still holds).
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)
        dtype = _record_dtype(log)
        rows = np.zeros(episode - self.logged, dtype=dtype)
        for name, a in log.items():
            rows[name] = a[self.logged : episode]
        target = log_path(self.path)
        if self.logged == 0:  # a new log: written whole, then renamed into place
            fd, tmp = tempfile.mkstemp(prefix=target.name + ".", suffix=".tmp", dir=target.parent)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(_log_header(self.kind, dtype))
                    f.write(rows.tobytes())
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, target)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        else:
            with open(target, "r+b") as f:
                _, offset = _read_log_header(f)
                f.seek(offset + self.logged * dtype.itemsize)
                f.truncate()  # records of a save that never completed
                f.write(rows.tobytes())
                f.flush()
                os.fsync(f.fileno())
        meta_log = {"file": target.name, "records": int(episode)}
        save_checkpoint(
            self.path, kind=self.kind, config=config, episode=episode, rng=rng, arrays=tables,
            log=meta_log,
        )  # fmt: skip
        self.last_bytes = rows.nbytes + self.path.stat().st_size
        self.logged = episode
        return self.path


def save_checkpoint(
    path: str | Path,
    *,
    kind: str,
    config: dict[str, Any],
    episode: int,
    rng: np.random.Generator,
    arrays: dict[str, np.ndarray],
    log: dict[str, Any] | None = None,
) -> Path:
    """Write a checkpoint's ``.npz`` atomically; returns its path.

    Args:
        path: the ``.npz`` file to (over)write.
        kind: the run's kind, e.g. ``"gridworld"`` or ``"race"``.
        config: the run's configuration as plain JSON values.
        episode: number of episodes completed (the next episode's 0-based index).
        rng: the run's generator; its bit-generator state is stored.
        arrays: arrays by name (tables; and logs, where they are not in an episode log).
        log: ``{"file", "records"}`` of the episode log written beside it
            (:class:`CheckpointWriter`), stored in the meta.
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
    if log is not None:
        meta["log"] = log
    # The arrays by name, ``__meta__`` first. ``Any`` values: numpy's stub types every ``**``
    # name of ``savez`` as possibly its ``allow_pickle`` flag (numpy >= 2.1), and none of the
    # checkpoints' names is that.
    named: dict[str, Any] = {"__meta__": np.array(json.dumps(meta)), **arrays}
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **named)
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
            f"checkpoint is for {meta.get('kind')!r}, this run trains {kind!r}; resume it with "
            f"the command that wrote it (marlm train {meta.get('kind')}), or give a checkpoint of "
            f"marlm train {kind}",
            source=path,
            field="checkpoint",
        )
    if isinstance(meta.get("log"), dict):
        arrays.update(_read_log(path, meta["log"]))
    return meta, arrays


def _read_log(path: Path, log: dict[str, Any]) -> dict[str, np.ndarray]:
    """The first ``log["records"]`` records of the checkpoint's episode log, as arrays by field.

    Raises:
        InputError: the log is missing, not an episode log, or holds fewer records.
    """
    target = log_path(path)  # beside the checkpoint under its own name, else the one it wrote
    if not target.is_file():
        target = path.with_name(str(log.get("file", "")))
    records = int(log.get("records", 0))
    fix = "keep the .episodes file beside its checkpoint, or start a new run"
    try:
        with open(target, "rb") as f:
            header, _ = _read_log_header(f)
            dtype = _from_fields(header["fields"])
            data = f.read(records * dtype.itemsize)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise InputError(
            f"its episode log {target.name} cannot be read ({type(e).__name__}); {fix}",
            source=path,
            field="checkpoint",
        ) from e
    if len(data) < records * dtype.itemsize:
        raise InputError(
            f"its episode log {target.name} holds {len(data) // dtype.itemsize} of its "
            f"{records} episodes (cut short); {fix}",
            source=path,
            field="checkpoint",
        )
    rows = np.frombuffer(data, dtype=dtype, count=records)
    return {name: np.array(rows[name]) for name in dtype.names or ()}


#: numpy's bit generators by the name their ``state`` records.
_BIT_GENERATORS: dict[str, type[np.random.BitGenerator]] = {
    "PCG64": np.random.PCG64,
    "PCG64DXSM": np.random.PCG64DXSM,
    "Philox": np.random.Philox,
    "SFC64": np.random.SFC64,
    "MT19937": np.random.MT19937,
}


def restore_rng(state: dict[str, Any]) -> np.random.Generator:
    """A generator whose bit generator is in ``state`` (from ``bit_generator.state``)."""
    kind = _BIT_GENERATORS.get(state["bit_generator"])
    if kind is None:
        raise InputError(
            f"unknown bit generator {state['bit_generator']!r} in a saved generator state; "
            f"known: {', '.join(_BIT_GENERATORS)}",
            field="bit_generator",
        )
    bitgen = kind()
    bitgen.state = state
    return np.random.Generator(bitgen)
