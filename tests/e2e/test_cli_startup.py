"""The ``marlm`` command starts without its heavy dependencies; they load in the commands that use them.

Checked by the modules a fresh interpreter holds after importing the CLI (``sys.modules``), never by
timing: ``benchmarks/bench_cli.py`` measures the start-up time against ``import typer``.
"""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("numba", "matplotlib", "ray", "llama_cpp", "pettingzoo", "scipy", "openai")


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
