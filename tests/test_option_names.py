"""Every command-line option marlm's messages name exists: an error that says "pass --rollout 64"
is only a fix if some ``marlm`` command takes ``--rollout``.

Read from the source: each string constant of ``src/marlm`` (f-strings' literal parts included)
is searched for ``--option`` words, and each deep learner setting's option name
(:func:`marlm.rl.deep.common.option_name`, which the learners' errors and the checkpoint check
build at run time) is added. Each must be an option of some command, as typer builds them, or one
of the other programs' options listed below.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import typer

import marlm
import marlm.cli  # noqa: F401  (registers the commands)
from marlm.cli.app import app
from marlm.rl.deep.common import DeepConfig, option_name

SRC = Path(marlm.__file__).parent

#: Options of other programs that marlm's messages and docstrings name, by program.
OTHER_PROGRAMS = {
    "--force-reinstall": "pip",
    "--no-cache-dir": "pip",
    "--no-deps": "pip",
    "--embedding": "llama.cpp's llama-server",
    "--embeddings": "llama.cpp's llama-server",
    "--head": "ray start",
    "--help": "every command (typer's own, not a parameter)",
    "--nope": "an example of an unknown option in a docstring",
}

OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def command_options() -> set[str]:
    """Every option name of ``marlm`` and its commands (``--flag`` and ``--no-flag`` both)."""
    names: set[str] = set()

    def walk(command) -> None:
        for param in command.params:
            names.update(param.opts)
            names.update(param.secondary_opts)
        for sub in getattr(command, "commands", {}).values():  # a group's commands
            walk(sub)

    walk(typer.main.get_command(app))
    return names


def named_in_source() -> dict[str, set[str]]:
    """``{--option: {module, ...}}`` of the options the package's string constants name."""
    found: dict[str, set[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                for name in OPTION.findall(node.value):
                    found.setdefault(name, set()).add(path.relative_to(SRC).as_posix())
    return found


def test_every_option_a_message_names_exists():
    options = command_options()
    unknown = {
        name: sorted(modules)
        for name, modules in named_in_source().items()
        if name not in options and name not in OTHER_PROGRAMS
    }
    assert unknown == {}


def test_every_deep_learner_setting_is_reachable_by_the_option_its_errors_name():
    options = command_options()
    named = {f.name: option_name(f.name) for f in dataclasses.fields(DeepConfig)}
    unreachable = {k: v for k, v in named.items() if OPTION.findall(v)[0] not in options}
    assert unreachable == {}


def test_the_check_sees_an_unknown_option():
    assert OPTION.findall("pass e.g. --rollout 64, not --x-y; a-b--c") == ["--rollout", "--x-y"]
    assert "--rollout" not in command_options() and "--steps" in command_options()
