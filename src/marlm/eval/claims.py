"""The claim a command writes into the run folder it takes (:func:`marlm.eval.outputs.claim_run_folder`):
its record, whose process holds it, and the folders this process claimed.

Light on purpose (no numpy): every command reaches it before loading anything heavy.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path

from marlm.errors import InputError

__all__ = [
    "CLAIMED",
    "CLAIM_FILE",
    "CREATED",
    "claim_alive",
    "claimed_error",
    "claimed_here",
    "command_name",
    "proc_start",
    "read_claim",
    "stale_claim_text",
    "write_claim",
]


#: The claim a command writes into its run folder when it takes it (:func:`marlm.eval.outputs.claim_run_folder`):
#: ``{"marlm_run": "marlm demo", "compare": false, "pid": 123, "host": "...", "proc_start": ...}``.
#: It makes a run recognisable as marlm's from its first moment (a run stopped before its trace
#: or tables hold anything, a ``marlm compare`` stopped between schemes), and a folder whose
#: claim's process still runs is refused as claimed by that run. It is removed when the command
#: ends with the run's own markers written (:func:`marlm.eval.outputs.release_claims`), else kept with ``pid``
#: null: the folder of a stopped run, which ``--overwrite`` replaces. A command that ends before
#: writing anything (a refused input, an environment that breaks the API on its first steps,
#: Ctrl-C) leaves its folder as it found it: the claim removed, and the folder too where the
#: claim created it.
CLAIM_FILE = ".marlm-run"
#: Folders this process claimed and has not released yet.
CLAIMED: list[Path] = []
#: Those of them that did not exist before their claim: the folders the claim created, the run
#: folder first, then each parent it had to create.
CREATED: dict[Path, list[Path]] = {}


def proc_start(pid: int) -> str | None:
    """The start time of process ``pid`` in clock ticks since boot (Linux ``/proc``), to tell a
    claim's process from a later one given the same id; None where unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def read_claim(folder: Path) -> dict | None:
    """The claim record of ``folder`` (:data:`CLAIM_FILE`), or None if it has none."""
    path = folder / CLAIM_FILE
    if path.is_symlink() or not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and "marlm_run" in data else None


def claim_alive(claim: dict) -> bool:
    """Whether the process that wrote ``claim`` still runs (on this host, and not this process:
    one process runs its commands one after another)."""
    pid = claim.get("pid")
    if not isinstance(pid, int) or pid <= 0 or pid == os.getpid():
        return False
    if claim.get("host") != socket.gethostname():
        return False  # another machine's run on a shared disk: not known to be alive here
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, as another user
    except OSError:
        return False
    started = claim.get("proc_start")
    return started is None or proc_start(pid) in (None, started)


def claimed_error(path: Path, claim: dict, option: str) -> InputError:
    what = claim.get("marlm_run") or "marlm"
    return InputError(
        f"is claimed by another run still going ({what}, process {claim.get('pid')}); marlm "
        "does not write into it or delete it: wait for that run to end, or give another folder",
        source=path,
        field=option,
    )


def command_name() -> str:
    """This command's name as a claim records it (``marlm demo``, ``marlm train warehouse``)."""
    return " ".join(["marlm", *(a for a in sys.argv[1:3] if not a.startswith("-"))])


def stale_claim_text(claim: dict) -> str:
    """Who left a claim whose process no longer runs, for an error or warning: ``'marlm demo'
    (process 123, no longer running)``, or ``(stopped)`` for a claim released by a stopped run."""
    pid = claim.get("pid")
    how = f"process {pid}, no longer running" if pid is not None else "stopped"
    return f"{claim.get('marlm_run') or 'marlm'!r} ({how})"


def write_claim(folder: Path, *, compare: bool) -> None:
    """Create the claim file with ``O_EXCL``: of two commands claiming one folder at once, the
    second fails here."""
    record = {
        "marlm_run": command_name(),
        "compare": compare,
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "proc_start": proc_start(os.getpid()),
    }
    fd = os.open(folder / CLAIM_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(record, f)


def claimed_here(path: str | Path) -> bool:
    """Whether this process claimed the run folder ``path`` (:func:`marlm.eval.outputs.claim_run_folder`) and has
    not released it yet: a stopped command's hint may then speak of what it wrote there."""
    p = Path(path).resolve()
    return any(c.resolve() == p for c in CLAIMED)
