"""The ``marlm`` command starts without its heavy dependencies; they load in the commands that use them.

Checked by the modules a fresh interpreter holds after importing the CLI (``sys.modules``), never by
timing: ``benchmarks/bench_cli.py`` measures the start-up time against ``import typer``.
"""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("numba", "matplotlib", "ray", "llama_cpp", "pettingzoo", "scipy", "openai", "pydantic")


def _top_level_modules_after(code: str) -> set[str]:
    probe = f"{code}\nimport sys\nprint('\\n'.join(sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    return {name.split(".")[0] for name in out.split()}


def test_importing_the_cli_loads_no_heavy_dependency():
    loaded = _top_level_modules_after("import marlm.cli.app")
    assert sorted(loaded & set(HEAVY)) == []
    assert "typer" in loaded  # the probe does see what the CLI imports


def test_help_registers_every_command_without_heavy_dependencies():
    probe = (
        "from typer.main import get_command\n"
        "import marlm.cli\n"
        "print(sorted(get_command(marlm.cli.app).commands))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    for command in ("demo", "train", "compare", "replay", "report", "bench", "llm", "eval"):
        assert f"'{command}'" in out
    assert sorted(_top_level_modules_after(probe) & set(HEAVY)) == []


def test_plain_option_values_convert_as_typer_converts_them_without_pydantic():
    # marlm.cli.plain_values converts plain values itself; each must come out as typer's own
    # (pydantic) conversion gives it: the same value of the same type, or the same error.
    from pathlib import Path

    import typer.core
    from typer._click.exceptions import BadParameter
    from typer._coercion import build_runtime_param as typers_own
    from typer._coercion import resolve_type_descriptor
    from typer.models import OptionInfo

    import marlm.cli.app  # noqa: F401  (installs the conversion)

    class Param:  # what RuntimeParam.coerce reads of a click parameter
        multiple, nargs, name = False, 1, "opt"

    def outcome(build, annotation, value):
        try:
            got = build(resolve_type_descriptor(annotation, OptionInfo())).coerce(
                value, param=Param(), ctx=None
            )
        except BadParameter as e:
            return "error", e.message
        return type(got), repr(got)  # repr: tells -0.0 from 0.0, and nan equals nan

    texts = [
        "0", "7", "-3", "123456789012345678", "1234567890123456789", "007", "+5", " 5", "1_000",
        "-0", "1.0", "0.1", "-2.5e-3", "1e3", "1E+07", "1e400", ".5", "5.", "nan", "inf", "abc",
        "", ".", "runs/race", "a//b/", "./x", "/tmp/x", "-", "~/x", "true",
    ]  # fmt: skip
    values = [*texts, None, 0, 3, 2.5, 1, True, False, Path("runs/race")]
    for annotation in (bool, str, int, float, Path):
        for value in values:
            ours = outcome(typer.core.build_runtime_param, annotation, value)
            assert ours == outcome(typers_own, annotation, value), (annotation, value)
    # A repeated option (--set, --breakdown): its strings as a list.
    lists = [(), ("rollout=64",), ["a", "b"], ("a", 1), ("a", None), [Path("x")], "ab", 3]
    for value in lists:
        ours = outcome(typer.core.build_runtime_param, list[str], value)
        assert ours == outcome(typers_own, list[str], value), value


def test_a_typer_that_builds_runtime_parameters_otherwise_keeps_its_own_conversion():
    # Stand-in for a later typer whose RuntimeParam takes another field: plain_values checks
    # its parameters on an int and a Path at install, and leaves typer as it is.
    probe = (
        "import dataclasses, typer._coercion, typer.core\n"
        "@dataclasses.dataclass(frozen=True)\n"
        "class Changed(typer._coercion.RuntimeParam):\n"
        "    strict: bool\n"
        "typer._coercion.RuntimeParam = Changed\n"
        "own = typer.core.build_runtime_param\n"
        "from marlm.cli import plain_values\n"
        "print('installed:', plain_values.install())\n"
        "print('typer kept its own:', typer.core.build_runtime_param is own)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    assert "installed: False" in out and "typer kept its own: True" in out
