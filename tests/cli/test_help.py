"""What ``--help`` shows a new user: every command's summary whole in its group's list, every
option with a help text, and the same LLM options (``--llm``, ``--llm-model``,
``--llm-timeout``) on every command that takes a model, all reaching the one backend factory."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

import marlm.llm.backends
from cli_run import run_main
from marlm.errors import InputError


def _commands():
    """``(argv path, click command)`` of every group and command of ``marlm``."""
    import typer.main

    from marlm.cli import app

    todo = [((), typer.main.get_command(app))]
    while todo:
        path, cmd = todo.pop()
        yield path, cmd
        todo += [((*path, n), sub) for n, sub in (getattr(cmd, "commands", None) or {}).items()]


def test_every_command_summary_is_shown_whole_on_an_80_column_terminal():
    # marlm --help cut bench, report, replay and compare ("...with its...").
    from marlm.cli import app

    for path, cmd in _commands():
        if not getattr(cmd, "commands", None):
            continue
        shown = CliRunner().invoke(app, [*path, "--help"], terminal_width=80)
        listing = shown.output.split("Commands:")[1]
        assert "..." not in listing, (path, listing)
        for name, sub in cmd.commands.items():
            first = sub.help.strip().splitlines()[0]
            assert f"{name}  " in listing and first in listing, (path, name, first)


def test_every_option_has_a_help_text():
    # compare --robots and --llm had none.
    missing = [
        f"{' '.join(path)} {p.opts[0]}"
        for path, cmd in _commands()
        for p in cmd.params
        if not getattr(cmd, "commands", None) and not p.hidden and not getattr(p, "help", "x")
    ]
    assert not missing, missing


def test_every_command_with_llm_has_its_model_name_and_timeout():
    # compare, replay and eval triage had --llm only, demo had all three.
    with_llm = {
        " ".join(path): {o for p in cmd.params for o in p.opts}
        for path, cmd in _commands()
        if any("--llm" in p.opts for p in cmd.params)
    }
    assert {"demo", "compare", "replay", "eval triage", "train gridworld"} <= set(with_llm)
    lacking = [c for c, opts in with_llm.items() if not {"--llm-model", "--llm-timeout"} <= opts]
    assert not lacking, lacking


def _demo_trace(tmp_path, capsys):
    out = tmp_path / "demo"
    argv = ["demo", "--planner", "rule", "--executor", "greedy", "--sync", "--no-gif",
            "--tick-ms", "0", "--steps", "30", "--out", out]  # fmt: skip
    assert run_main(argv, capsys)[0] == 0
    return out


@pytest.mark.parametrize("command", ["compare", "replay", "eval triage", "train gridworld"])
def test_llm_model_and_timeout_reach_the_backend_factory(tmp_path, capsys, monkeypatch, command):
    seen = {}

    def factory(spec, **kwargs):
        seen.update(spec=spec, **kwargs)
        raise InputError("stop here", field="--llm")

    # marlm.hybrid.build first: imported here while marlm.llm.backends held the fake, it would
    # keep the fake as its own make_backend, and monkeypatch would restore the fake to it
    monkeypatch.setattr("marlm.hybrid.build.make_backend", factory)
    monkeypatch.setattr(marlm.llm.backends, "make_backend", factory)
    url = "http://127.0.0.1:9/v1"
    llm = ["--llm", url, "--llm-model", "qwen", "--llm-timeout", "7.5"]
    argv = {
        "compare": ["compare", "--schemes", "llm_only", *llm, "--out", tmp_path / "c"],
        "replay": ["replay", "TRACE", "--scheme", "llm", *llm],
        "eval triage": ["eval", "triage", "--notes", "NOTES", *llm],
        "train gridworld": ["train", "gridworld", "--reward", "llm", *llm, "--out", tmp_path / "g"],
    }[command]
    if command == "replay":
        argv[1] = _demo_trace(tmp_path, capsys)
    if command == "eval triage":
        notes = tmp_path / "notes.jsonl"
        notes.write_text(
            '{"id": "n1", "note": "Soon.", "priority": "urgent"}\n'
            '{"id": "n2", "note": "Whenever.", "priority": "normal"}\n'
        )
        argv[3] = notes
    code, err = run_main(argv, capsys)
    assert code == 2 and "stop here" in err, err
    assert seen["spec"] == url and seen["model"] == "qwen" and seen["timeout_s"] == 7.5


def test_the_demo_summary_names_its_default_executor():
    # marlm --help said "LLM planner, RL executor" after learned became the default executor.
    cmd = dict(_commands())[("demo",)]
    (default,) = [p.default for p in cmd.params if "--executor" in p.opts]
    first = cmd.help.strip().splitlines()[0]
    assert f"{default} executor" in first, first
