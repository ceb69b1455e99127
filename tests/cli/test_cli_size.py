"""The command line stays thin: at most 1,400 lines in ``marlm.cli`` (1,300 before ``eval instructions``), and no function there
over 60 lines (options parsed into a config, one library call, a formatter from the library).
Read with :mod:`ast`, so a function's length is that of its source, decorators and signature
included."""

from __future__ import annotations

import ast
from pathlib import Path

import marlm.cli

CLI = Path(marlm.cli.__file__).parent
MAX_LINES = 1400
MAX_FUNCTION_LINES = 60


def _files() -> list[Path]:
    return sorted(CLI.glob("*.py"))


def test_the_cli_is_at_most_1400_lines() -> None:
    lines = {p.name: len(p.read_text(encoding="utf-8").splitlines()) for p in _files()}
    assert "demo.py" in lines  # the files the commands are in are the ones counted
    assert sum(lines.values()) <= MAX_LINES, lines


def long_functions(source: str) -> list[tuple[str, int]]:
    """``(name, lines)`` of every function (nested ones included) over the limit in ``source``,
    counted from its first decorator to its last line."""
    long = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            length = node.end_lineno - first + 1
            if length > MAX_FUNCTION_LINES:
                long.append((node.name, length))
    return long


def test_no_function_of_the_cli_is_over_60_lines() -> None:
    long = {p.name: long_functions(p.read_text(encoding="utf-8")) for p in _files()}
    assert {name: found for name, found in long.items() if found} == {}


def test_a_function_of_61_lines_counts_as_long_and_one_of_60_does_not() -> None:
    def source(lines: int) -> str:  # a decorator, the signature and lines - 2 statements
        body = "\n".join(f"    x{i} = {i}" for i in range(lines - 2))
        return f"@app.command()\ndef f():\n{body}\n"

    assert long_functions(source(60)) == []
    assert long_functions(source(61)) == [("f", 61)]
