"""Where a command writes: one rule for every run folder and output file marlm writes.

The rule (README, "Run folders are never overwritten"): a command refuses, before doing any work,
to write into

- a run folder that is not empty (it holds a run, or files marlm did not write), or
- an output file (a checkpoint, a policy table, a report, a JSON result) that already exists,

with exit code 2 and a message naming the path and the two ways on: choose a new path, or pass
``--overwrite``.

``--overwrite`` replaces a marlm run and nothing else. A folder holds a marlm run when it holds
one of marlm's markers, recognised by content, not by name alone (:func:`is_run_marker`): a
``trace.jsonl`` that starts with a ``run_start`` event, a ``metrics.json`` with the keys marlm
writes, a ``compare.json`` / ``compare_notes_only.json`` table, or a marlm checkpoint. In such a
folder it deletes only files marlm writes (:data:`RUN_FILES`, their temporary files, and marlm
checkpoints), plus, in a ``marlm compare`` run (a folder with a compare table), its scheme
subfolders when each holds only such files. Without a marker no file counts as marlm's: a
``metrics.json`` of the user's own alone does not make a folder a run. A folder that
holds anything else (a file or folder marlm did not write, or subfolders that are separate runs
when the folder itself is not a compare run) is refused even with ``--overwrite``, with a message
naming the path and a few of the foreign entries, and nothing in it is touched. So no file of
the old run (e.g. an ``episode.gif`` the new run does not write) survives next to the new one,
and no file of the user's is ever deleted. An existing output file is replaced atomically when
the new one is complete.

Light on purpose (no numpy, no plotting): every command calls it before loading anything heavy.
"""

from __future__ import annotations

import json
import re
import shutil
import zipfile
from collections.abc import Iterable
from pathlib import Path

from marlm.errors import InputError

__all__ = [
    "COMPARE_MARKERS",
    "RUN_FILES",
    "RUN_MARKERS",
    "check_output_file",
    "check_run_folder",
    "claim_run_folder",
    "foreign_entries",
    "fresh_folder",
    "holds_run",
    "is_run_marker",
]

#: Files whose presence marks a folder as a marlm run: the trace and metrics of ``marlm demo``
#: (and of each scheme under ``marlm compare``), the tables and logs of ``marlm train gridworld``
#: and ``race``, the results of ``marlm compare``.
RUN_MARKERS = frozenset(
    {
        "trace.jsonl",
        "metrics.json",
        "episode.gif",
        "reward_curves.png",
        "tables.npz",
        "episodes.npz",
        "findings.json",
        "curves.png",
        "compare.json",
        "compare.txt",
        "compare_notes_only.json",
        "report.html",
    }
)

#: Files whose presence marks a folder as a ``marlm compare`` run (its scheme runs are subfolders).
COMPARE_MARKERS = frozenset({"compare.json", "compare.txt", "compare_notes_only.json"})

#: Every file name marlm writes into a run folder: the markers, ``fixed_partner.npz`` of
#: ``train race``, ``replay.json`` of ``marlm replay --out``; in a compare run also
#: ``compare.png`` and (notes-only scenario) ``orders.jsonl``.
RUN_FILES = RUN_MARKERS | {"fixed_partner.npz", "replay.json", ".marlm-write-test"}
_COMPARE_FILES = RUN_FILES | {"compare.png", "orders.jsonl"}

#: The temporary file of a checkpoint being written (``tempfile.mkstemp``, see
#: :func:`marlm.rl.checkpoint.save_checkpoint`).
_CHECKPOINT_FORMAT = "marlm-checkpoint-"
_CHECKPOINT_TMP = re.compile(r".+\.npz\.[A-Za-z0-9_]+\.tmp")

_FIX = "choose a new path, or pass --overwrite to replace it"

#: The keys marlm's JSON markers hold, by file name (any one set of a file's list suffices):
#: ``metrics.json`` of a hybrid run (:func:`marlm.eval.runs.finish_hybrid_run`) or of a training
#: run (``env`` and ``config``), and the tables of ``marlm compare``.
_MARKER_KEYS = {
    "metrics.json": ({"scheme", "delivered", "steps"}, {"env", "config", "episodes"}),
    "compare.json": ({"rows", "setting"},),
    "compare_notes_only.json": ({"rows", "setting"},),
}
#: The trace's first event (docs/trace-schema.md).
_TRACE = "trace.jsonl"
#: Markers are small; a larger file of that name is not marlm's.
_MARKER_MAX_BYTES = 16 * 2**20


def is_run_marker(path: str | Path) -> bool:
    """Whether ``path`` is a file that marks a folder as a marlm run, by its content: a
    ``trace.jsonl`` whose first line is a ``run_start`` event, a ``metrics.json``,
    ``compare.json`` or ``compare_notes_only.json`` object with the keys marlm writes
    (:data:`_MARKER_KEYS`), or a marlm checkpoint (any name). A file of the user's with one of
    these names is not a marker."""
    p = Path(path)
    if p.is_symlink() or not p.is_file():
        return False
    try:
        if p.name == _TRACE:
            with p.open("rb") as f:
                first = json.loads(f.readline(2**20).removeprefix(b"\xef\xbb\xbf"))
            return isinstance(first, dict) and first.get("type") == "run_start"
        if p.name in _MARKER_KEYS:
            if p.stat().st_size > _MARKER_MAX_BYTES:
                return False
            data = json.loads(p.read_text(encoding="utf-8-sig"))
            return isinstance(data, dict) and any(k <= data.keys() for k in _MARKER_KEYS[p.name])
    except (OSError, ValueError):
        return False
    return _is_checkpoint(p)


def holds_run(folder: str | Path) -> bool:
    """Whether ``folder`` holds a marlm run: a marker (:func:`is_run_marker`) in it or one level
    down (``marlm compare`` writes one run folder per scheme). It may hold other files too: see
    :func:`foreign_entries` for what ``--overwrite`` may delete."""
    p = Path(folder)
    if not p.is_dir():
        return False
    for child in p.iterdir():
        if is_run_marker(child):
            return True
        if child.is_dir() and any(is_run_marker(c) for c in child.iterdir()):
            return True
    return False


def _is_checkpoint(path: Path) -> bool:
    """Whether ``path`` is a marlm checkpoint (:mod:`marlm.rl.checkpoint`: an ``.npz`` zip whose
    ``__meta__`` entry names the format), whatever the file's name."""
    try:
        with zipfile.ZipFile(path) as z:
            meta = z.read("__meta__.npy")  # a numpy str array: UTF-32 code units
        return any(_CHECKPOINT_FORMAT.encode(e) in meta for e in ("utf-32-le", "utf-32-be"))
    except (OSError, KeyError, EOFError, RuntimeError, NotImplementedError, zipfile.BadZipFile):
        return False


def _written_by_marlm(path: Path, names: frozenset[str]) -> bool:
    """Whether the file ``path`` is one marlm writes into a run folder."""
    if path.is_symlink() or not path.is_file():
        return False
    name = path.name
    if name in names:
        return True
    if name.endswith(".tmp") and (name[: -len(".tmp")] in names or _CHECKPOINT_TMP.fullmatch(name)):
        return True
    return _is_checkpoint(path)


def _only_run_files(folder: Path, depth: int) -> bool:
    """Whether ``folder`` holds only marlm run files, or (``depth`` > 0) folders of them
    (``compare``'s ``spread/<scheme>-seed<s>/``)."""
    for child in folder.iterdir():
        if child.is_dir() and not child.is_symlink():
            if depth <= 0 or not _only_run_files(child, depth - 1):
                return False
        elif not _written_by_marlm(child, RUN_FILES):
            return False
    return True


def foreign_entries(folder: str | Path, keep: Iterable[str | Path | None] = ()) -> list[Path]:
    """The entries of ``folder`` that marlm did not write, which ``--overwrite`` must not delete.

    Files are marlm's by name (:data:`RUN_FILES`) only in a folder with a marker
    (:func:`is_run_marker`); without one, only marlm checkpoints are. In a compare run (a compare
    table at the top, recognised by content) a subfolder is marlm's when it holds only marlm run
    files (one more level for ``spread/``); elsewhere every subfolder is foreign (a separate run,
    or the user's). ``keep`` entries (inputs of this run) are left out.
    """
    p = Path(folder)
    entries = _entries(p, keep)
    markers = [c for c in entries if is_run_marker(c)]
    compare = any(c.name in COMPARE_MARKERS for c in markers)
    names = _COMPARE_FILES if compare else RUN_FILES if markers else frozenset()
    foreign = []
    for child in entries:
        if child.is_dir() and not child.is_symlink():
            if not (compare and _only_run_files(child, depth=1)):
                foreign.append(child)
        elif not _written_by_marlm(child, names):
            foreign.append(child)
    return foreign


def _entries(folder: Path, keep: Iterable[str | Path | None]) -> list[Path]:
    """The folder's entries, without the ``keep`` files (inputs of this run, e.g. ``--resume``)."""
    kept = {Path(k).resolve() for k in keep if k is not None}
    return [c for c in folder.iterdir() if c.resolve() not in kept]


def _listing(entries: list[Path], limit: int = 4) -> str:
    names = sorted(c.name + ("/" if c.is_dir() else "") for c in entries)
    return ", ".join(names[:limit]) + (
        f" and {len(names) - limit} more" if len(names) > limit else ""
    )


def check_run_folder(
    path: str | Path,
    *,
    overwrite: bool = False,
    option: str = "--out",
    keep: Iterable[str | Path | None] = (),
) -> Path:
    """Refuse ``path`` as a new run folder unless it is new or empty (or ``overwrite`` and it
    holds a marlm run and nothing else, see :func:`foreign_entries`). Changes nothing on disk.

    ``keep``: files in the folder that are inputs of this run (``--resume`` of an interrupted
    run whose checkpoint sits in its run folder); they do not count and are never deleted.

    Raises:
        InputError: ``path`` is a file; it is a non-empty folder and ``overwrite`` is false; it
            holds an entry marlm did not write (:func:`foreign_entries`; refused even with
            ``overwrite``).
    """
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise InputError(
            "is a file, not a folder; give a new folder for the run", source=p, field=option
        )
    if not p.is_dir():
        return p
    entries = _entries(p, keep)
    if not entries:
        return p
    foreign = foreign_entries(p, keep)
    if len(foreign) == len(entries) and holds_run(p):  # runs in subfolders, none of its own
        raise InputError(
            f"holds separate runs in its subfolders ({_listing(foreign)}); --overwrite replaces "
            "one run, never a folder of runs: give that run's own folder, or a new or empty one",
            source=p,
            field=option,
        )
    if len(foreign) == len(entries):
        raise InputError(
            f"is not empty ({_listing(entries)}) and holds no marlm run; marlm does not write into it "
            "or delete its files, even with --overwrite: give a new or empty folder",
            source=p,
            field=option,
        )
    if foreign:
        raise InputError(
            f"holds a marlm run and entries marlm did not write ({_listing(foreign)}); "
            "--overwrite replaces a marlm run and nothing else, so nothing here is deleted: "
            "move those entries out, or give a new or empty folder",
            source=p,
            field=option,
        )
    if not overwrite:
        raise InputError(
            f"already holds a run ({_listing(entries)}); {_FIX}", source=p, field=option
        )
    return p


def claim_run_folder(
    path: str | Path,
    *,
    overwrite: bool = False,
    option: str = "--out",
    keep: Iterable[str | Path | None] = (),
) -> Path:
    """Make ``path`` a fresh, writable run folder: check it (:func:`check_run_folder`), empty it
    when ``overwrite`` allows, create it, and probe that it is writable.

    Call it after every input is known to be good and before any work: with ``overwrite`` the old
    run is deleted here.

    Raises:
        InputError: as :func:`check_run_folder`; or the folder cannot be created or written.
    """
    p = check_run_folder(path, overwrite=overwrite, option=option, keep=keep)
    try:
        if p.is_dir():
            for child in _entries(p, keep):
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child)
                else:
                    child.unlink()
        p.mkdir(parents=True, exist_ok=True)
        probe = p / ".marlm-write-test"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        raise InputError(
            f"cannot use it as the run folder ({e.strerror or type(e).__name__}); choose another path",
            source=p,
            field=option,
        ) from e
    return p


def check_output_file(
    path: str | Path,
    *,
    overwrite: bool = False,
    option: str = "--out",
    allow: Iterable[str | Path | None] = (),
) -> Path:
    """Refuse ``path`` as an output file if it exists, unless ``overwrite``. Changes nothing.

    Args:
        path: the file the command will write (atomically, when it is complete).
        overwrite: the user passed ``--overwrite``.
        option: the option that named ``path``, for the message.
        allow: paths this command may rewrite anyway (``--resume X --checkpoint X`` continues the
            run in X, as the user asked).

    Raises:
        InputError: ``path`` is a folder; or it exists, ``overwrite`` is false and it is not in
            ``allow``.
    """
    p = Path(path)
    if p.is_dir():
        raise InputError("is a folder; give the file to write", source=p, field=option)
    if p.exists() and not overwrite:
        allowed = {Path(a).resolve() for a in allow if a is not None}
        if p.resolve() not in allowed:
            raise InputError(f"already exists; {_FIX}", source=p, field=option)
    return p


def fresh_folder(path: str | Path) -> Path:
    """``path`` if nothing is there, else the first free sibling ``path-2``, ``path-3``, ...

    For default run folders named by the clock (``runs/demo-<time>``): two runs started in the same
    second get two folders. A path the user gave is checked with :func:`check_run_folder` instead.
    """
    p = Path(path)
    k = 2
    while p.exists():
        p = Path(path).with_name(f"{Path(path).name}-{k}")
        k += 1
    return p
