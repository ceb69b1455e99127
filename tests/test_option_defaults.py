"""One declaration per setting: every ``marlm`` option whose setting a config field holds shows
that field's default.

Each command is read from the click command typer builds (the options as ``--help`` shows them)
and compared with the config it fills. An option whose default is ``None`` leaves the value to
the config; its help must then show the config's default (``[default: X]`` or ``default X`` in
the text), so that what a user reads is what runs.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pytest
import typer

import marlm.cli  # noqa: F401  (registers the commands)
from marlm.cli.app import app
from marlm.experiments.compare import CompareConfig
from marlm.experiments.demo import DemoConfig
from marlm.experiments.instructions_eval import InstructionsEvalConfig
from marlm.experiments.replay import ReplayConfig
from marlm.experiments.triage_accuracy import TriageEvalConfig
from marlm.experiments.warehouse_training import WarehouseTrainingConfig
from marlm.hybrid.controller import RunConfig
from marlm.rl.configs import GridWorldConfig, RaceConfig
from marlm.rl.deep.common import DeepConfig

#: command -> (the configs its options fill, first match wins: a config class, or an instance
#: whose values are the command's defaults; option name -> field name).
COMMANDS: dict[str, tuple[tuple[Any, ...], dict[str, str]]] = {
    "demo": (
        (RunConfig, DemoConfig),
        {"robots": "n_robots", "sync": "sync_planner", "plan_deadline": "plan_deadline_s",
         "shield": "shield_rule", "llm_timeout": "llm_timeout_s"},
    ),
    "compare": (
        (CompareConfig, CompareConfig().setting),
        {"llm_timeout": "llm_timeout_s", "shield": "shield_rule"},
    ),
    "replay": ((ReplayConfig,), {"llm_timeout": "llm_timeout_s"}),
    "train warehouse": ((WarehouseTrainingConfig,), {}),
    "train gridworld": ((GridWorldConfig,), {"epsilon": "epsilon_start"}),
    "train race": ((RaceConfig,), {"epsilon": "epsilon_start"}),
    "eval triage": ((TriageEvalConfig,), {"llm_timeout": "llm_timeout_s"}),
    "eval instructions": ((InstructionsEvalConfig,), {"llm_timeout": "llm_timeout_s"}),
    "train env": ((DeepConfig,), {"envs": "num_envs", "checkpoint_every": "chunk"}),
}  # fmt: skip


def commands() -> dict[str, Any]:
    """``{"train race": click command, ...}`` of every leaf command."""
    out: dict[str, Any] = {}

    def walk(command: Any, path: tuple[str, ...]) -> None:
        if hasattr(command, "commands"):  # a group (typer's click group type)
            for name, sub in command.commands.items():
                walk(sub, (*path, name))
        else:
            out[" ".join(path)] = command

    walk(typer.main.get_command(app), ())
    return out


def field_defaults(config: Any) -> dict[str, Any]:
    """``{field: default}`` of a dataclass or pydantic model (required fields left out), or
    ``{field: value}`` of an instance of one."""
    if not isinstance(config, type):
        if dataclasses.is_dataclass(config):
            return {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
        return dict(config)
    if dataclasses.is_dataclass(config):
        out = {}
        for f in dataclasses.fields(config):
            if f.default is not dataclasses.MISSING:
                out[f.name] = f.default
            elif f.default_factory is not dataclasses.MISSING:
                out[f.name] = f.default_factory()
        return out
    return {n: f.default for n, f in config.model_fields.items() if not f.is_required()}


def shown(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def mismatches(name: str) -> list[str]:
    configs, renames = COMMANDS[name]
    command = commands()[name]
    out = []
    for param in command.params:
        if param.hidden:  # a deprecated spelling of another option
            continue
        field = renames.get(param.name, param.name)
        found = [d[field] for d in map(field_defaults, configs) if field in d]
        if not found:
            continue
        want = found[0]
        if param.default is None and want is not None:
            help_text = " ".join((param.help or "").split())
            said = param.show_default if isinstance(param.show_default, str) else None
            in_text = "default" in help_text and re.search(
                rf"(?<![\w.]){re.escape(shown(want))}(?![\w.])", help_text
            )
            if said != shown(want) and not in_text:
                out.append(f"--{param.name}: help shows no default, the config's is {want!r}")
        elif param.default is not None and param.default != want:
            out.append(f"--{param.name}: option {param.default!r}, config {want!r}")
    return out


def test_every_mapped_command_exists():
    assert set(COMMANDS) <= set(commands())


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_an_options_default_is_its_config_fields(name):
    assert mismatches(name) == []
