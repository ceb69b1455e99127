"""The run folder and checkpoint files of a training run (``marlm train gridworld|race|env``),
and the check of a folder given to ``marlm diagnose``.

:class:`TrainingOutputs` checks every output before any work (a run folder or checkpoint file is
never replaced unasked, see :mod:`marlm.eval.outputs`), claims the folder, and says after Ctrl-C
how to resume (:meth:`TrainingOutputs.resume_hint`).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from marlm.errors import InputError
from marlm.eval.outputs import (
    CLAIM_FILE,
    COMPARE_MARKERS,
    check_output_file,
    check_run_folder,
    claim_run_folder,
)


@dataclass(frozen=True)
class TrainingOutputs:
    """Where a training run writes, and what it resumes from.

    Attributes:
        out: the run folder, new or empty (or replaced with ``overwrite``).
        checkpoint: the checkpoint file rewritten atomically every ``chunk``: a new file, or the
            ``resume`` file; None: no checkpoint.
        resume: the checkpoint to continue from (an input, never deleted from ``out``).
        overwrite: replace the run in ``out`` and an existing ``checkpoint`` file.
        chunk: episodes (tabular) or joint steps (deep) between progress updates and
            checkpoints (>= 1).
    """

    out: Path
    checkpoint: Path | None = None
    resume: Path | None = None
    overwrite: bool = False
    chunk: int = 1000

    def resume_files(self) -> list[Path]:
        """The files of the ``resume`` checkpoint (itself and its episode log)."""
        from marlm.rl.checkpoint import checkpoint_files

        return checkpoint_files(self.resume)

    def check(self, *, kind: str, engine: str | None = None) -> None:
        """Check what the learner's config does not hold (``engine`` of the tabular learners,
        ``chunk``, the ``resume`` file of ``kind``) and refuse to overwrite a run folder or a
        checkpoint unasked, before any work and before the run folder is created.

        Raises:
            InputError: naming the option (``--engine``, ``--checkpoint-every``, ``--resume``,
                ``--out``, ``--checkpoint``) and the fix.
        """
        from marlm.rl.checkpoint import checkpoint_files, load_checkpoint
        from marlm.rl.train import ENGINES, check_checkpoint_every

        if engine is not None and engine not in ENGINES:
            raise InputError(f"got {engine!r}; allowed: {', '.join(ENGINES)}", field="--engine")
        check_checkpoint_every(self.chunk)
        if self.resume is not None:
            load_checkpoint(self.resume, kind=kind)
        check_run_folder(self.out, overwrite=self.overwrite, keep=checkpoint_files(self.resume))
        if self.checkpoint is not None:
            check_output_file(
                self.checkpoint, kind="checkpoint", overwrite=self.overwrite,
                option="--checkpoint", allow=[self.resume],
            )  # fmt: skip

    def claim(self, *, keep_log: bool = True) -> None:
        """Claim the run folder (:func:`marlm.eval.outputs.claim_run_folder`), keeping the
        ``resume`` checkpoint (and, with ``keep_log``, its episode log)."""
        keep = self.resume_files() if keep_log else [self.resume]
        claim_run_folder(self.out, overwrite=self.overwrite, keep=keep)

    def resume_hint(self, started: float, argv: Sequence[str]) -> str:
        """What to run after Ctrl-C: the command ``argv`` (as typed, without ``marlm``)
        resuming from the checkpoint this run wrote since ``started`` (seconds since the epoch;
        or the ``resume`` file it started from), with ``--overwrite`` when the run folder holds
        files of the stopped run; or, without a checkpoint, how to get one next time."""
        ck, out = self.checkpoint, self.out
        wrote = out.is_dir() and any(c.name != CLAIM_FILE for c in out.iterdir())
        folder = f"the run folder {out} is incomplete" if wrote else f"nothing was kept in {out}"
        ours = (
            ck is not None and ck.is_file() and (ck.stat().st_mtime >= started or ck == self.resume)
        )
        if not ours and ck is not None:  # asked for, but the run stopped before the first
            return (
                f"no checkpoint was written yet ({ck} is written every --checkpoint-every "
                f"{self.chunk}, and the run stopped before the first), so the run cannot "
                f"resume ({folder}); a smaller --checkpoint-every saves one sooner"
            )
        if not ours:
            return (
                f"no checkpoint was written, so the run cannot resume ({folder}); --checkpoint "
                "FILE saves one every --checkpoint-every"
            )
        args, rest = [], list(argv)
        while rest:  # the command as typed, without its --resume
            arg, rest = rest[0], rest[1:]
            if arg == "--resume":
                rest = rest[1:]
            elif not arg.startswith("--resume="):
                args.append(arg)
        from marlm.rl.checkpoint import checkpoint_files

        mine = {p.resolve() for p in [*checkpoint_files(ck), out / CLAIM_FILE]}
        leftover = out.is_dir() and any(c.resolve() not in mine for c in out.iterdir())
        if leftover and "--overwrite" not in args:
            args.append("--overwrite")
        command = shlex.join(["marlm", *args, "--resume", str(ck)])
        return f"the last checkpoint is {ck}; resume with: {command}"


#: What ``marlm diagnose`` reads, for its messages.
_DIAGNOSE_TAKES = (
    "marlm diagnose reads a training run folder of marlm train gridworld, race or env "
    "(metrics.json and episodes.npz)"
)


def check_training_run(path: Path) -> None:
    """Refuse, with what to run instead, a path that is not a training run folder: a demo or
    compare run (``marlm report`` shows those), a file, a missing path.

    Raises:
        InputError: naming ``RUN_FOLDER``, what ``marlm diagnose`` reads and the command to run.
    """

    def refuse(what: str, instead: str) -> None:
        raise InputError(f"{what}; {_DIAGNOSE_TAKES}; {instead}", source=path, field="RUN_FOLDER")

    if not path.exists():
        refuse("no such folder", "give the --out folder of such a run")
    if not path.is_dir():
        refuse("is a file, not a folder", "give the --out folder of such a run")
    if (path / "episodes.npz").exists():
        return
    if (path / "trace.jsonl").is_file():
        refuse(
            "is a warehouse run of marlm demo or marlm compare (it has trace.jsonl)",
            f"for this run use marlm report {path} (figures, plots, LLM calls) or marlm replay "
            f"{path} --scheme rule",
        )
    if any((path / m).is_file() for m in COMPARE_MARKERS):
        refuse("is a run of marlm compare", f"for this run use marlm report {path}")
    refuse("has no episodes.npz", "give the --out folder of such a run")


__all__ = ["TrainingOutputs", "check_training_run"]
