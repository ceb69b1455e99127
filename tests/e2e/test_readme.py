"""README's two set-up commands stay true: CI runs the test command verbatim, and the demo
command names options that exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from marlm.cli import app

ROOT = Path(__file__).resolve().parents[2]


def bash_blocks(text: str) -> list[str]:
    return re.findall(r"```bash\n(.*?)```", text, flags=re.S)


def test_ci_runs_the_readme_test_command_verbatim():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    commands = [ln for block in bash_blocks(readme) for ln in block.splitlines() if "pytest" in ln]
    assert len(commands) == 1, commands
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert commands[0].strip() in [ln.strip() for ln in ci]


def test_readme_demo_command_installs_and_runs_marlm_demo():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    setup = [ln for block in bash_blocks(readme) for ln in block.splitlines() if "venv" in ln]
    assert any(ln.strip().endswith("marlm demo") and "pip install -e ." in ln for ln in setup)


def test_every_demo_option_in_the_readme_exists():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    help_text = CliRunner().invoke(app, ["demo", "--help"], env={"COLUMNS": "200"}).output
    demo_lines = [
        ln for block in bash_blocks(readme) for ln in block.splitlines() if "marlm demo" in ln
    ]
    # the options after "marlm demo" (the set-up line's pip options are pip's)
    options = {o for ln in demo_lines
               for o in re.findall(r"(--[a-z][a-z-]+)", ln.split("#")[0].split("marlm demo", 1)[1])}  # fmt: skip
    options -= {"--upgrade"}
    assert options, demo_lines
    missing = sorted(o for o in options if o not in help_text)
    assert not missing, missing


def _command_lines() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    return [ln.split("#")[0].strip() for b in bash_blocks(readme) for ln in b.splitlines()]


def test_usage_commands_run_without_an_activated_venv():
    # After the set-up, a new shell has no `marlm` on its PATH and `pip` is the system's: every
    # command names the venv's own executable.
    lines = [ln for ln in _command_lines() if ln and not ln.startswith("python3 -m venv")]
    assert lines
    bare = [ln for ln in lines if not ln.startswith(".venv/bin/")]
    assert not bare, bare


def test_every_marlm_command_and_option_in_the_readme_exists():
    import typer.main

    root = typer.main.get_command(app)
    checked = 0
    for ln in _command_lines():
        if not ln.startswith(".venv/bin/marlm "):
            continue
        words = ln.split()[1:]
        cmd, path = root, []
        while getattr(cmd, "commands", None) and words and words[0] in cmd.commands:
            cmd = cmd.commands[words[0]]
            path.append(words.pop(0))
        assert not getattr(cmd, "commands", None), f"not a command: {ln}"
        known = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)}
        unknown = [w for w in words if w.startswith("--") and w not in known]
        assert not unknown, (ln, unknown)
        checked += 1
    assert checked >= 20


def test_readme_explains_the_demo_table():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("### What you should see")[1].split("\n### ")[0]
    for term in (
        "deadlock breaks",
        "counterfactual",
        "idle robot-steps",
        "on-time rate",
        "docs/metrics.md",
    ):
        assert term in section, term
    assert "orders delivered" in section and "control step p99 (ms)" in section  # the table


@pytest.mark.parametrize("shield", ["pibt", "local"])
def test_readme_case1_step_count_is_what_its_command_gives(
    tmp_path, monkeypatch, shield, warm_cache
):
    # README states the outcome of movement case 1 under the default rule layer and under
    # `--shield local`, and the command that makes its picture; the command, run as written
    # (only --out moved to a tmp folder, `--shield local` added for the second), must give them.
    import json
    import shlex

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("(docs/case1/lane.gif)")[1]
    paragraph = section.split("```")[0]
    if shield == "local":
        paragraph = paragraph.split("local shield")[1]
    stated = re.search(r"(\d+) of (\d+)(?: orders)? in (\d+) steps", paragraph)
    assert stated is not None, f"README's case-1 paragraph states no outcome for {shield}"
    words = shlex.split(bash_blocks(section)[0].strip())
    assert words[0] == ".venv/bin/marlm" and words[1] == "demo", words
    argv = words[1:]
    argv[argv.index("--out") + 1] = str(tmp_path / "case1")
    if shield == "local":
        argv += ["--shield", "local", "--no-gif"]
    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, result.output
    metrics = json.loads((tmp_path / "case1" / "metrics.json").read_text())
    delivered, total, steps = (int(g) for g in stated.groups())
    got = (metrics["delivered"], metrics["orders_total"], metrics["steps"])
    assert got == (delivered, total, steps)
    assert metrics["collisions"] == 0


def _readme_demo_table() -> dict[str, tuple[str, str]]:
    """README's "What you should see" table: ``{metric: (value, rule column)}``, a label that
    wraps onto the next line joined back into one."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("### What you should see")[1].split("```")[1]
    rows: dict[str, tuple[str, str]] = {}
    last = None
    for line in block.splitlines():
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if len(cells) != 3:
            continue
        label, value, rule = cells
        if last is not None and not value and not rule:  # the label's second line
            rows[f"{last} {label}"] = rows.pop(last)
            last = f"{last} {label}"
        else:
            rows[label], last = (value, rule), label
    return rows


def test_readme_demo_table_states_what_the_rule_planner_gives(tmp_path, monkeypatch, warm_cache):
    # README's table is `marlm demo` (seed 0, the defaults), with the rule planner's figures on
    # the same orders beside it, and says that on the shipped sample the hybrid equals the rule.
    # The rule planner's run is deterministic (no model): every figure of the table that does
    # not depend on a model or on timing must be what it gives, in both columns.
    import json

    monkeypatch.chdir(tmp_path)
    argv = ["demo", "--planner", "rule", "--seed", "0", "--sync", "--tick-ms", "0", "--no-gif"]
    result = CliRunner().invoke(app, [*argv, "--no-counterfactual", "--out", "run"])
    assert result.exit_code == 0, result.output
    m = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert (m["delivered"], m["orders_total"], m["steps"]) == (26, 26, 397)  # all, then it ends

    def fmt(v) -> str:  # as the demo's table prints a figure
        return f"{v:.3g}" if isinstance(v, float) and abs(v) < 100 else str(v)

    latency = m["order_latency_mean_steps"]
    both = {
        "orders delivered": f"{m['delivered']} / {m['orders_total']}",
        "throughput per 1000 steps": fmt(m["throughput_per_1000_steps"]),
        **{
            f"mean order latency, {c} by listed priority (steps)": fmt(latency[c])
            for c in ("urgent", "normal", "low")
        },
        **{
            f"idle robot-steps with an order waiting: {cause.replace('_', ' ')}": fmt(n)
            for cause, n in m["idle_robot_steps"].items()
        },
    }
    own = {
        "on-time rate": fmt(m["on_time_rate"]),
        "deadline misses": fmt(m["deadline_misses"]),
        "collisions": fmt(m["collisions"]),
        "shield overrides": fmt(m["shield_overrides"]),
        "deadlock breaks": fmt(m["deadlock_breaks"]),
        "longest still with a task (steps)": fmt(m["still_with_task_max_steps"]),
        "steps": fmt(m["steps"]),
    }
    table = _readme_demo_table()
    assert {k: table[k] for k in both} == {k: (v, v) for k, v in both.items()}
    assert {k: table[k][0] for k in own} == own
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"(step {m['steps']}; the time limit is 600)" in readme


def test_the_order_example_loads_on_the_default_layout(tmp_path):
    # It named shelf S2-3, which the default small layout does not have: pasted, it was refused.
    from marlm.envs.warehouse import load_layout
    from marlm.envs.warehouse.orders import load_orders

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("**Orders** (`--orders FILE`)", 1)[1].split("```json\n", 1)[1]
    (tmp_path / "orders.jsonl").write_text(block.split("```", 1)[0], encoding="utf-8")
    (order,) = load_orders(tmp_path / "orders.jsonl", load_layout("small"))
    assert (order.id, order.shelf, order.arrival, order.deadline) == ("o07", "S3-2", 40, 160)


def test_the_demo_options_list_names_every_demo_option():
    # README's "Options:" line of marlm demo left out --llm-timeout.
    import typer.main

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    listed = readme.split("\nOptions: `--layout`", 1)[1].split("It shows", 1)[0]
    listed = {"--layout", *re.findall(r"`(--[a-z][a-z-]+)", listed)}
    demo = typer.main.get_command(app).commands["demo"]
    missing = [
        p.opts[0]
        for p in demo.params
        if not p.hidden and p.opts[0] != "--help" and not {*p.opts, *p.secondary_opts} & listed
    ]
    assert not missing, missing


def test_both_setup_commands_build_the_portable_llama_cpp_never_from_the_cache():
    # pip's default build of llama-cpp-python is for the installing CPU: on an AVX-512 Xeon with
    # AMX it crashed on the first token, and a wheel built that way stays in pip's cache.
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    setup = [ln for block in bash_blocks(readme) for ln in block.splitlines() if "venv" in ln]
    installs = [ln for ln in setup if "python3 -m venv" in ln]
    assert len(installs) == 2, installs
    for ln in installs:
        assert (
            'CMAKE_ARGS="-DGGML_NATIVE=OFF" .venv/bin/pip install' in ln and "--no-cache-dir" in ln
        )
