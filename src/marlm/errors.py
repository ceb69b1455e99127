"""Errors that name what the user must fix.

Every error caused by user input (a map file, an order file, a command-line option, a checkpoint)
is a :class:`InputError`. The CLI prints ``str(error)`` on one line and exits with code 2; it never
shows a traceback for these.
"""

from __future__ import annotations

from pathlib import Path


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
