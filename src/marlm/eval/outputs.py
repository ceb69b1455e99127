"""Where a command writes: one rule for every run folder and output file marlm writes.

The rule (README, "Run folders are never overwritten"): a command refuses, before doing any work,
to write into

- a run folder that is not empty (it holds a run, or files marlm did not write), or
- an output file (a checkpoint, a policy table, a report, a JSON result) that already exists,

with exit code 2 and a message naming the path and the two ways on: choose a new path, or pass
``--overwrite``.

``--overwrite`` replaces a marlm run, or an output file of the kind the command writes
(:func:`check_output_file`: a report replaces a report, never a trace), and nothing else. A folder holds a marlm run when it holds
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

import errno
import html
import json
import os
import re
import shutil
import warnings
import zipfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from marlm.errors import InputError
from marlm.eval.claims import (
    CLAIM_FILE,
    CLAIMED,
    CREATED,
    claim_alive,
    claimed_error,
    claimed_here,
    command_name,
    read_claim,
    stale_claim_text,
    write_claim,
)

__all__ = [
    "CLAIM_FILE",
    "COMPARE_MARKERS",
    "DISK_ERRORS",
    "OUTPUT_KINDS",
    "RUN_FILES",
    "RUN_MARKERS",
    "atomic_path",
    "check_output_file",
    "check_run_folder",
    "claim_run_folder",
    "disk_error",
    "foreign_entries",
    "fresh_folder",
    "holds_run",
    "is_output_of_kind",
    "is_run_marker",
    "claimed_here",
    "release_claims",
    "wrote_nothing",
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
RUN_FILES = RUN_MARKERS | {"fixed_partner.npz", "replay.json", ".marlm-write-test", ".marlm-run"}
_COMPARE_FILES = RUN_FILES | {"compare.png", "orders.jsonl"}

#: The temporary file of a checkpoint being written (``tempfile.mkstemp``, see
#: :func:`marlm.rl.checkpoint.save_checkpoint`).
_CHECKPOINT_FORMAT = "marlm-checkpoint-"
_CHECKPOINT_TMP = re.compile(r".+\.(npz|episodes)\.[A-Za-z0-9_]+\.tmp")
#: The first bytes of a checkpoint's episode log (:data:`marlm.rl.checkpoint.LOG_MAGIC`), and
#: its name beside the checkpoint (:data:`marlm.rl.checkpoint.LOG_SUFFIX`).
_EPISODE_LOG_MAGIC = b"marlm-episode-log-v1\n"
_EPISODE_LOG_SUFFIX = ".episodes"

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


def _claim_only(folder: Path, keep: Iterable[str | Path | None]) -> dict | None:
    """The claim of ``folder`` when it holds nothing else (a run stopped before it wrote
    anything), else None."""
    entries = _entries(folder, keep)
    return read_claim(folder) if [c.name for c in entries] == [CLAIM_FILE] else None


def wrote_nothing(folder: str | Path) -> bool:
    """Whether ``folder`` holds nothing but marlm's claim: its run stopped before writing anything,
    and the same command takes the folder over (:func:`claim_run_folder`)."""
    return _claim_only(Path(folder), ()) is not None


def release_claims() -> None:
    """Release the run folders this process claimed (:func:`claim_run_folder`): the claim is
    removed where the folder holds the run's own markers (a trace with its ``run_start``, the
    metrics, a compare table, a checkpoint); where it holds nothing else, the claim is removed
    and so is the folder if the claim created it (the command wrote nothing: the folder is left
    as it was found); otherwise the claim is kept with ``pid`` null, so the folder of a run
    stopped early stays recognisable as marlm's. Called when every command ends, however it
    ends (:class:`marlm.cli.app.MarlmGroup`). Never raises."""
    while CLAIMED:
        folder = CLAIMED.pop()
        created = CREATED.pop(folder, [])
        claim = read_claim(folder)
        if claim is None or claim.get("pid") != os.getpid():
            continue
        try:
            path = folder / CLAIM_FILE
            others = [c for c in folder.iterdir() if c.name != CLAIM_FILE]
            if not others:
                path.unlink()
                for made in created:  # the run folder, then the parents made for it
                    made.rmdir()
            elif any(is_run_marker(c) for c in others):
                path.unlink()
            else:
                tmp = folder / (CLAIM_FILE + ".tmp")
                tmp.write_text(json.dumps({**claim, "pid": None}), encoding="utf-8")
                os.replace(tmp, path)
        except OSError:
            pass  # a full disk or a removed folder: the claim's dead process marks it stale


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
        if p.name == CLAIM_FILE:
            return read_claim(p.parent) is not None
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


def _is_episode_log(path: Path) -> bool:
    """Whether ``path`` is the episode log of a marlm checkpoint, by its first bytes."""
    try:
        with path.open("rb") as f:
            return f.read(len(_EPISODE_LOG_MAGIC)) == _EPISODE_LOG_MAGIC
    except OSError:
        return False


def _written_by_marlm(path: Path, names: frozenset[str]) -> bool:
    """Whether the file ``path`` is one marlm writes into a run folder: by name (``names``,
    empty outside a run folder), a report of this run (its title names the folder) or a replay
    by content under any name (in a run folder: ``report RUN --out RUN/other.html``), or a
    checkpoint or its episode log by content (anywhere)."""
    if path.is_symlink() or not path.is_file():
        return False
    name = path.name
    if name in names:
        return True
    if name.endswith(".tmp") and (name[: -len(".tmp")] in names or _CHECKPOINT_TMP.fullmatch(name)):
        return True
    if names and is_output_of_kind(path, "report"):
        return _report_folder_name(path) == path.parent.name  # of this run, not another's
    if names and is_output_of_kind(path, "replay"):
        return True
    return _is_checkpoint(path) or _is_episode_log(path)


def _report_folder_name(path: Path) -> str | None:
    """The run folder's name a report page's title carries (``<title>marlm report: NAME``,
    :func:`marlm.eval.page.page_head`), or None."""
    try:
        with path.open("rb") as f:
            head = f.read(8192)
    except OSError:
        return None
    start = head.find(_REPORT_TITLE)
    end = head.find(b"</title>", start)
    if start < 0 or end < 0:
        return None
    return html.unescape(head[start + len(_REPORT_TITLE) : end].decode("utf-8", "replace"))


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
    """The entries of ``folder`` that are not its run's, which ``--overwrite`` must not delete.

    Files are marlm's by name (:data:`RUN_FILES`), and a report or replay of the run by content
    under any name, only in a folder with a marker (:func:`is_run_marker`); without one, only
    marlm checkpoints are. In a compare run (a compare table at the top, recognised by content)
    a subfolder is marlm's when it holds only marlm run files (one more level for ``spread/``);
    elsewhere every subfolder is foreign (a separate run, or the user's). ``keep`` entries
    (inputs of this run) are left out.
    """
    p = Path(folder)
    entries = _entries(p, keep)
    markers = [c for c in entries if is_run_marker(c)]
    compare = any(c.name in COMPARE_MARKERS for c in markers)
    claim = read_claim(p) if any(c.name == CLAIM_FILE for c in markers) else None
    compare = compare or bool(claim and claim.get("compare"))
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
            holds an entry that is not a file of its run (:func:`foreign_entries`; refused even with
            ``overwrite``); it holds only the claim (:data:`CLAIM_FILE`) of a stopped run of
            another command and ``overwrite`` is false (the same command's is taken over by
            :func:`claim_run_folder`, with a warning).
    """
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise InputError(
            "is a file, not a folder; give a new folder for the run", source=p, field=option
        )
    if not p.is_dir():
        return p
    claim = read_claim(p)
    if claim is not None and claim_alive(claim):
        raise claimed_error(p, claim, option)
    entries = _entries(p, keep)
    if not entries:
        return p
    stale = _claim_only(p, keep)  # a run stopped before it wrote anything
    if stale is not None and (overwrite or stale.get("marlm_run") == command_name()):
        return p  # this command's own folder (taken over with a warning), or replaced
    if stale is not None:
        raise InputError(
            f"holds only the claim of a stopped run of {stale_claim_text(stale)}, another command; "
            "marlm does not take it over or delete it unasked: pass --overwrite to replace it, "
            "or give another folder",
            source=p,
            field=option,
        )
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
            f"holds a marlm run and entries that are not its files ({_listing(foreign)}); "
            "--overwrite replaces a marlm run and nothing else, so nothing here is deleted: "
            "move those entries out, or give a new or empty folder",
            source=p,
            field=option,
        )
    if not overwrite:
        stopped = (
            f" stopped before it finished, of {stale_claim_text(claim)}"
            if claim is not None
            else ""
        )
        raise InputError(
            f"already holds a run{stopped} ({_listing(entries)}); {_FIX}", source=p, field=option
        )
    return p


def claim_run_folder(
    path: str | Path,
    *,
    overwrite: bool = False,
    option: str = "--out",
    keep: Iterable[str | Path | None] = (),
    compare: bool = False,
) -> Path:
    """Make ``path`` a fresh, writable run folder: check it (:func:`check_run_folder`), empty it
    when ``overwrite`` allows, create it, and claim it (:data:`CLAIM_FILE`, which also probes
    that it is writable).

    Call it after every input is known to be good and before any work: with ``overwrite`` the old
    run is deleted here. The claim is released when the command ends (:func:`release_claims`).

    Args:
        compare: the folder will hold one run folder per scheme (``marlm compare``): a stopped
            compare's scheme folders are then replaced by ``--overwrite`` too.

    A folder holding only the claim of this same command's stopped run (its process no longer
    running, nothing written) is taken over with one warning naming that run.

    Raises:
        InputError: as :func:`check_run_folder`; or the folder cannot be created or written; or
            another command claimed it meanwhile (two runs started at once into one folder).
    """
    p = check_run_folder(path, overwrite=overwrite, option=option, keep=keep)
    stale = _claim_only(p, keep) if p.is_dir() and not overwrite else None
    if stale is not None:  # the same command's (check_run_folder refused another's)
        warnings.warn(
            f"{option} {p}: taking over the folder of a stopped run of {stale_claim_text(stale)}, which "
            "wrote nothing but its claim",
            stacklevel=2,
        )
    try:
        if p.is_dir():
            for child in _entries(p, keep):
                if child.name == CLAIM_FILE and claim_alive(read_claim(p) or {}):
                    raise FileExistsError(CLAIM_FILE)  # claimed since the check above
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child)
                else:
                    child.unlink()
        created, q = [], p
        while not q.exists() and q != q.parent:
            created.append(q)
            q = q.parent
        p.mkdir(parents=True, exist_ok=True)
        write_claim(p, compare=compare)
        CLAIMED.append(p)
        if created:
            CREATED[p] = created
    except FileExistsError as e:
        claim = read_claim(p) or {}
        raise claimed_error(p, claim, option) from e
    except OSError as e:
        raise InputError(
            f"cannot use it as the run folder ({e.strerror or type(e).__name__}); choose another path",
            source=p,
            field=option,
        ) from e
    return p


#: The kinds of output file marlm writes, and how each is recognised by its content
#: (:func:`is_output_of_kind`): ``--overwrite`` replaces a file of the kind the command writes
#: and nothing else (``marlm report --out RUN/trace.jsonl --overwrite`` is refused: a trace is not
#: a report).
OUTPUT_KINDS = {
    "report": "an HTML report of marlm report",
    "policy": "a Q-table of marlm train warehouse",
    "checkpoint": "a checkpoint of marlm train gridworld|race|env",
    "replay": "a replay report of marlm replay --out",
    "triage-eval": "a result of marlm eval triage --out",
}
#: The title line every report page carries (:func:`marlm.eval.page.page_head`).
_REPORT_TITLE = b"<title>marlm report: "
#: The format string a Q-table of ``marlm train warehouse`` carries
#: (:data:`marlm.hybrid.acting.executor.POLICY_FORMAT`, its version left out).
_POLICY_FORMAT = "marlm-warehouse-executor-"
#: The keys of marlm's JSON outputs, by kind.
_OUTPUT_KEYS = {
    "replay": {"measured", "estimated"},
    "triage-eval": {"task", "protocol", "mode", "predictions"},
}


def is_output_of_kind(path: str | Path, kind: str) -> bool:
    """Whether the file ``path`` is an output marlm writes of ``kind`` (:data:`OUTPUT_KINDS`),
    by its content: a report page whose head holds marlm's report title; a NumPy zip holding a
    Q-table of ``marlm train warehouse`` (its ``format`` entry) or a marlm checkpoint (its
    ``__meta__`` entry); a JSON object with the keys marlm writes. A symlink is never one.

    Raises:
        ValueError: an unknown ``kind``.
    """
    if kind not in OUTPUT_KINDS:
        raise ValueError(f"unknown output kind {kind!r}; allowed: {', '.join(OUTPUT_KINDS)}")
    p = Path(path)
    if p.is_symlink() or not p.is_file():
        return False
    try:
        if kind == "report":
            with p.open("rb") as f:
                return _REPORT_TITLE in f.read(8192)
        if kind == "checkpoint":
            return _is_checkpoint(p)
        if kind == "policy":
            return _npz_entry_holds(p, "format.npy", _POLICY_FORMAT)
        if p.stat().st_size > 64 * _MARKER_MAX_BYTES:
            return False
        data = json.loads(p.read_text(encoding="utf-8-sig"))
        return isinstance(data, dict) and _OUTPUT_KEYS[kind] <= data.keys()
    except (OSError, ValueError):
        return False


def _npz_entry_holds(path: Path, entry: str, text: str) -> bool:
    """Whether the NumPy zip ``path`` has an ``entry`` (a numpy str array) holding ``text``."""
    try:
        with zipfile.ZipFile(path) as z:
            data = z.read(entry)
        return any(text.encode(e) in data for e in ("utf-32-le", "utf-32-be"))
    except (OSError, KeyError, EOFError, RuntimeError, NotImplementedError, zipfile.BadZipFile):
        return False


def check_output_file(
    path: str | Path,
    *,
    kind: str,
    overwrite: bool = False,
    option: str = "--out",
    allow: Iterable[str | Path | None] = (),
) -> Path:
    """Refuse ``path`` as an output file if it exists, unless ``overwrite`` and it is a file
    marlm wrote of the same ``kind``. Changes nothing.

    Args:
        path: the file the command will write (atomically, when it is complete).
        kind: what the command writes there, one of :data:`OUTPUT_KINDS`; with ``overwrite``
            an existing file is replaced only when it is of this kind (:func:`is_output_of_kind`).
        overwrite: the user passed ``--overwrite``.
        option: the option that named ``path``, for the message.
        allow: paths this command may rewrite anyway (``--resume X --checkpoint X`` continues the
            run in X, as the user asked).

    Raises:
        InputError: ``path`` is a folder; or it exists and is not in ``allow``, and either
            ``overwrite`` is false or the file is not marlm's of this ``kind`` (refused even with
            ``overwrite``: no command replaces a file it did not write); or ``path`` is ``-``,
            which many tools read as standard output and marlm does not.
    """
    if str(path) == "-":
        raise InputError(
            "is '-': marlm writes its outputs to files, not to standard output; give a file path",
            field=option,
        )
    p = Path(path)
    if p.is_dir():
        raise InputError("is a folder; give the file to write", source=p, field=option)
    _check_companion(p, kind, option)
    if not (p.exists() or p.is_symlink()):
        return p
    allowed = {Path(a).resolve() for a in allow if a is not None}
    if p.resolve() in allowed:
        return p
    if not overwrite:
        raise InputError(f"already exists; {_FIX}", source=p, field=option)
    if not is_output_of_kind(p, kind):
        raise InputError(
            f"already exists and is not {OUTPUT_KINDS[kind]}; --overwrite replaces only such a "
            "file (marlm's own, of the kind this command writes), so nothing was changed: give "
            "a new path",
            source=p,
            field=option,
        )
    return p


def _check_companion(path: Path, kind: str, option: str) -> None:
    """A checkpoint's episode log (``<checkpoint>.episodes``) is replaced with it: refuse a
    file of that name that is not one."""
    if kind != "checkpoint":
        return
    log = path.with_name(path.name + _EPISODE_LOG_SUFFIX)
    if (log.exists() or log.is_symlink()) and (log.is_symlink() or not _is_episode_log(log)):
        raise InputError(
            f"the checkpoint's episode log {log.name} would replace a file that is not one; "
            "move it, or give another --checkpoint path",
            source=log,
            field=option,
        )


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """The temporary path ``<path>.tmp`` to write ``path`` through: renamed onto ``path`` when
    the block ends, removed when it raises (a full disk leaves no half-written file behind)."""
    p = Path(path)
    tmp = p.with_name(p.name + ".tmp")
    try:
        yield tmp
        os.replace(tmp, p)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


#: The system errors that mean "this disk or folder cannot take the output", which a command
#: ends with one ``marlm: error:`` line and exit code 2 (:func:`disk_error`), not a traceback.
DISK_ERRORS = {
    errno.ENOSPC: "no space left on the disk; free some space, or write to another disk",
    errno.EDQUOT: "the disk quota is exceeded; free some space, or write to another disk",
    errno.EFBIG: "the file grew too large for its file system; write to another disk",
    errno.EROFS: "the file system is read-only; give a folder on a writable disk",
    errno.EACCES: "permission denied; give a folder you can write to",
    errno.EPERM: "operation not permitted; give a folder you can write to",
}


def disk_error(error: OSError) -> InputError | None:
    """``error`` as the one line a command ends with (naming the file and the fix) when it is
    one of :data:`DISK_ERRORS`; else None."""
    fix = None if error.errno is None else DISK_ERRORS.get(error.errno)
    if fix is None or error.errno is None:
        return None
    source = None if error.filename is None else str(error.filename).removesuffix(".tmp")
    return InputError(f"cannot write ({os.strerror(error.errno)}): {fix}", source=source)


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
