"""Errors that name what the user must fix.

Every error caused by user input (a map file, an order file, a command-line option, a checkpoint)
is a :class:`InputError`. The CLI prints ``str(error)`` on one line and exits with code 2; it never
shows a traceback for these.
"""

from __future__ import annotations

import zipfile
import zlib
from numbers import Integral
from pathlib import Path
from typing import Any

#: What reading a damaged cache file can raise (a file cut short by a full disk or a killed
#: process, an empty one, one of another version): ``OSError``, ``ValueError`` (bad JSON, bad
#: UTF-8, a NumPy header), ``KeyError``/``TypeError`` (an entry or field missing),
#: ``EOFError`` (NumPy on an empty file), ``zipfile.BadZipFile`` (an ``.npz`` cut short) and
#: ``zlib.error``. Every cache reader treats them as "no entry": it computes the entry again
#: and replaces the file.
CACHE_READ_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    ValueError,
    KeyError,
    TypeError,
    EOFError,
    zipfile.BadZipFile,
    zlib.error,
)


class RunError(RuntimeError):
    """A run that could not finish for a reason outside the user's input (a worker process that
    died on every attempt). The message says what finished and was kept. The CLI prints it on one
    line, ``marlm: error: <message>``, and exits with code 1."""


class InputError(ValueError):
    """Bad user input: names the source (file and line, or option), the field, and the fix.

    Args:
        message: what is wrong and how to fix it, for a person.
        source: the file path or the command-line option the bad value came from.
        line: 1-based line number in ``source``, when the input is a text file.
        field: the field, key or option name holding the bad value.

    ``str(error)`` is one line: ``"<source>:<line>: field '<field>': <message>"``.
    """

    def __init__(
        self,
        message: str,
        *,
        source: str | Path | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.message = message
        self.source = str(source) if source is not None else None
        self.line = line
        self.field = field
        super().__init__(self._render())

    def _render(self) -> str:
        where = ""
        if self.source is not None:
            where = self.source if self.line is None else f"{self.source}:{self.line}"
            where += ": "
        what = f"field '{self.field}': " if self.field else ""
        return " ".join(f"{where}{what}{self.message}".split())


def unencodable_text(value: object, field: str = "") -> tuple[str, str] | None:
    """The first string in ``value`` (a decoded JSON value: strings, numbers, lists, dicts; keys
    too) that cannot be written as UTF-8, as ``(field, problem)``, or None when all can.

    JSON text may hold half a surrogate pair (``"\\ud83d"``, valid JSON, from a ``\\u`` escape
    cut in two): Python decodes it to a lone surrogate, which no UTF-8 file (the trace, a report)
    can hold. ``field`` is the key path (``note``, ``tags[2]``); ``problem`` names the character
    and its position for :class:`InputError`'s message.
    """
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as e:
            code = ord(value[e.start])
            return field or "text", (
                f"holds half of a surrogate pair (\\u{code:04x} at character {e.start + 1}), "
                "which is not text; write the character itself, or both halves of its \\u "
                "escape pair"
            )
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            name = f"{field}.{key}" if field else str(key)
            found = unencodable_text(key, name) or unencodable_text(item, name)
            if found:
                return found
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found = unencodable_text(item, f"{field or 'item'}[{i}]")
            if found:
                return found
    return None


def check_count(value: Any, name: str, allow_zero: bool = False) -> int:
    """``value`` as an ``int`` when it is a whole number >= 1 (>= 0 with ``allow_zero``).

    Raises:
        InputError: anything else (a bool, a float, a negative number), naming ``name``.
    """
    low = 0 if allow_zero else 1
    if isinstance(value, bool) or not isinstance(value, Integral) or value < low:
        raise InputError(f"must be an integer >= {low}, got {value!r}", source=name, field=name)
    return int(value)


def check_text(value: object, *, source: str | Path, line: int | None = None) -> None:
    """Refuse a decoded value from a user's text file that holds text no UTF-8 file can hold
    (:func:`unencodable_text`), naming the file, the line and the field.

    Raises:
        InputError: ``<source>:<line>: field '<field>': holds half of a surrogate pair ...``.
    """
    found = unencodable_text(value)
    if found is not None:
        field, problem = found
        raise InputError(problem, source=source, line=line, field=field)


def check_path_text(path: str | Path, *, field: str) -> None:
    """Refuse a file path whose name is not UTF-8 text (the system's undecodable bytes reach
    Python as lone surrogates, and the path is written into the run's trace).

    Raises:
        InputError: naming ``field`` and the fix (rename the file).
    """
    text = str(path)
    if unencodable_text(text) is not None:
        shown = text.encode("utf-8", "backslashreplace").decode("ascii", "replace")
        raise InputError(
            f"the path {shown} is not UTF-8 text; rename the file (or folder) with UTF-8 "
            "characters",
            field=field,
        )
