"""A first run compiles the numba kernels of the rule layer it uses, and only those, in a stage
of its own on screen (about 20 CPU s for PIBT's on an empty cache), not in a silent pause."""

from __future__ import annotations

import pytest

import marlm.cli.demo
from cli_run import run_main
from marlm.hybrid.rules import factory, pibt_layer, shield


@pytest.mark.parametrize(("rule", "ran"), [("pibt", ["pibt"]), ("local", ["local"]), ("none", [])])
def test_the_warm_up_compiles_the_rule_layer_of_the_run_only(monkeypatch, rule, ran):
    # It ran the local shield's kernels (4 of the 26 CPU s of a first `--steps 100` demo)
    # under PIBT, which never calls them.
    called = []
    monkeypatch.setattr(shield.Shield, "filter", lambda *a, **k: called.append("local"))
    monkeypatch.setattr(pibt_layer.PibtShield, "filter", lambda *a, **k: called.append("pibt"))
    factory.warm_up(rule)
    assert sorted(set(called)) == ran


class _Stages:
    """A progress bar that records its stages' descriptions."""

    def __init__(self, seen: list[str]) -> None:
        self.seen = seen

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def add_task(self, description, total=None):
        self.seen.append(description)
        return len(self.seen) - 1

    def update(self, task, **kwargs):
        pass


def test_the_demo_shows_the_rule_layer_compiling_before_the_run(tmp_path, capsys, monkeypatch):
    # A first demo paused about 20 CPU s before its first stage showed, compiling PIBT.
    seen: list[str] = []
    monkeypatch.setattr(marlm.cli.demo, "_progress", lambda console: _Stages(seen))
    argv = ["demo", "--planner", "rule", "--executor", "greedy", "--sync", "--no-gif",
            "--tick-ms", "0", "--steps", "3", "--no-counterfactual",
            "--out", tmp_path / "run"]  # fmt: skip
    code, err = run_main(argv, capsys)
    assert code == 0, err
    assert seen == ["rule layer pibt: compiled on a first run, cached after", "warehouse"]
