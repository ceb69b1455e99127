"""Every whole-number and decimal option of every ``marlm`` command is checked the same way: a
value out of bounds is one ``marlm: error: field '--option': ...`` line naming the fix, exit 2,
before anything is read or created (``--limit 0`` was click's usage box, ``train warehouse
--episodes 0`` started its progress bar, ``compare --workers 0`` created the run folder,
``bench --seed -1`` was a gymnasium traceback)."""

from __future__ import annotations

from pathlib import Path

import pytest

import marlm
from cli_run import run_main

#: (command, option, bad value). Each command runs in process; every case is refused while the
#: command line is parsed, so none of them reads a file or loads a model.
CASES = [
    (["demo"], "--robots", "0"),
    (["demo"], "--robots", "-1"),
    (["demo"], "--steps", "0"),
    (["demo"], "--seed", "-1"),
    (["demo"], "--llm-timeout", "0"),
    (["demo"], "--tick-ms", "-5"),
    (["demo"], "--tick-ms", "inf"),
    (["demo"], "--tick-ms", "1e308"),  # was an OverflowError traceback from the tick's sleep
    (["demo"], "--plan-deadline", "nan"),
    (["demo", "--scenario", "instructions"], "--step-seconds", "0"),
    (["demo", "--scenario", "instructions"], "--step-seconds", "nan"),
    (["compare"], "--robots", "0"),
    (["compare"], "--steps", "0"),
    (["compare"], "--seed", "-3"),
    (["compare"], "--llm-only-steps", "0"),
    (["compare"], "--spread-seeds", "1"),
    (["compare"], "--spread-seeds", "-1"),
    (["compare"], "--workers", "0"),
    (["compare"], "--llm-timeout", "0"),
    (["replay", "TRACE"], "--limit", "0"),
    (["replay", "TRACE"], "--sweeps", "-2"),
    (["replay", "TRACE"], "--llm-timeout", "inf"),
    (["train", "warehouse"], "--episodes", "0"),
    (["train", "warehouse"], "--max-steps", "-1"),
    (["train", "warehouse"], "--seed", "-1"),
    (["train", "warehouse"], "--seeds", "0"),
    (["train", "warehouse"], "--workers", "0"),
    (["train", "gridworld"], "--episodes", "0"),
    (["train", "gridworld"], "--llm-samples", "0"),
    (["train", "gridworld"], "--seed", "-2"),
    (["train", "gridworld"], "--checkpoint-every", "0"),
    (["train", "gridworld"], "--llm-timeout", "-1"),
    (["train", "race"], "--episodes", "-5"),
    (["train", "race"], "--seed", "-1"),
    (["train", "race"], "--checkpoint-every", "-1"),
    (["train", "race"], "--steps", "0"),
    (["train", "race"], "--envs", "0"),
    (["train", "race"], "--envs", "100000000"),  # ran for ever, one copy after another
    (["train", "race"], "--lr", "0"),
    (["train", "race"], "--workers", "0"),
    (["train", "env", "marlm.envs.grid:GridRace"], "--lr", "nan"),
    (["train", "env", "marlm.envs.grid:GridRace"], "--steps", "0"),
    (["train", "env", "marlm.envs.grid:GridRace"], "--seed", "-1"),
    (["train", "env", "marlm.envs.grid:GridRace"], "--envs", "0"),
    (["train", "env", "marlm.envs.grid:GridRace"], "--envs", "100001"),
    (["train", "env", "marlm.envs.grid:GridRace"], "--checkpoint-every", "0"),
    (["train", "env", "marlm.envs.grid:GridRace"], "--workers", "0"),
    (["demo"], "--order-every", "0"),
    (["eval", "triage", "--notes", "NOTES"], "--folds", "1"),
    (["eval", "triage", "--notes", "NOTES"], "--shots", "0"),
    (["eval", "triage", "--notes", "NOTES"], "--per-class", "0"),
    (["eval", "triage", "--notes", "NOTES"], "--seed", "-1"),
    (["eval", "triage", "--notes", "NOTES"], "--llm-timeout", "0"),
    (["eval", "triage", "--notes", "NOTES"], "--llm-timeout", "1e308"),  # overflowed the wait
    (["eval", "instructions", "--notes", "NOTES", "--out", "OUT"], "--llm-timeout", "0"),
    (["llm", "serve"], "--port", "0"),
    (["llm", "serve"], "--port", "70000"),
    (["llm", "serve"], "--n-ctx", "-1"),
    (["llm", "serve"], "--n-threads", "0"),
    (["bench"], "--seed", "-1"),
]

#: Decimal options whose range the command's config checks (one place for the rule: the
#: learner's own check), each with a value it refuses; the error names the option all the same.
CONFIG_RANGES = [
    (["train", "gridworld"], "--alpha", "0"),
    (["train", "gridworld"], "--gamma", "2"),
    (["train", "gridworld"], "--epsilon", "2"),
    (["train", "gridworld"], "--epsilon-decay", "0"),
    (["train", "gridworld"], "--epsilon-floor", "-1"),
    (["train", "race"], "--alpha", "2"),
    (["train", "race"], "--gamma", "-1"),
    (["train", "race"], "--epsilon", "-0.5"),
    (["train", "race"], "--epsilon-decay", "1.5"),
    (["train", "race"], "--epsilon-floor", "2"),
    (["train", "race"], "--mix-weight", "2"),
    (["train", "env", "marlm.envs.grid:GridRace"], "--gamma", "2"),
]


#: A file that exists outside the test's folder (the folder must stay empty).
NOTES = Path(marlm.__file__).parent / "data" / "triage" / "order_notes_dev.jsonl"


def _argv(command: list, tmp_path) -> list:
    swap = {"TRACE": str(tmp_path / "trace.jsonl"), "NOTES": str(NOTES)}
    return [swap.get(a, a) for a in command]


@pytest.mark.parametrize(
    "command,option,value", CASES, ids=[f"{' '.join(c[:2])} {o} {v}" for c, o, v in CASES]
)
def test_an_option_out_of_bounds_is_one_marlm_line_before_any_work(
    tmp_path, capsys, command, option, value
):
    out = tmp_path / "out"
    argv = [*_argv(command, tmp_path), option, value]
    if command[0] in ("demo", "compare", "train"):
        argv += ["--out", out]
    code, err = run_main(argv, capsys)
    assert code == 2, err
    assert err.startswith(f"marlm: error: field '{option}': must be a "), err
    assert f"pass e.g. {option} " in err or "finite number" in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert list(tmp_path.iterdir()) == []  # nothing read or created


@pytest.mark.parametrize(
    "command,option,value",
    CONFIG_RANGES,
    ids=[f"{' '.join(c[:2])} {o} {v}" for c, o, v in CONFIG_RANGES],
)
def test_a_learner_setting_out_of_range_names_the_option_not_the_config_field(
    tmp_path, capsys, command, option, value
):
    # --epsilon 2 said "field 'epsilon_start'", --checkpoint-every 0 "field 'chunk'".
    out = tmp_path / "out"
    code, err = run_main([*command, option, value, "--no-plot", "--out", out], capsys)
    assert code == 2 and err.startswith(f"marlm: error: field '{option}': "), err
    assert "_" not in err.split(":")[2], err  # no internal field name such as epsilon_start
    assert not out.exists()


def _numeric_options():
    """``(command path, option)`` of every whole-number or decimal option of every command."""
    import typer.main

    from marlm.cli import app

    todo = [((), typer.main.get_command(app))]
    while todo:
        path, cmd = todo.pop()
        if getattr(cmd, "commands", None):
            todo += [((*path, name), sub) for name, sub in cmd.commands.items()]
            continue
        for param in cmd.params:
            if param.type_descriptor.annotation in (int, float) and not param.hidden:
                yield path, max(param.opts, key=len), param


def test_every_numeric_option_of_every_command_is_in_the_tables():
    # A new option with a bound joins the table (and gets a bound callback from cli.app).
    covered = {
        (tuple(c[:2]) if c[0] in ("train", "eval", "llm") else (c[0],), o) for c, o, _ in CASES
    }
    ranged = {(tuple(c[:2]), o) for c, o, _ in CONFIG_RANGES}
    missing = []
    for path, option, param in _numeric_options():
        if (path, option) in ranged:
            continue
        if (path, option) not in covered or param.callback is None:
            missing.append(f"{' '.join(path)} {option}")
    assert not missing, missing
