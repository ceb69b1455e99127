"""`marlm demo` end to end, through the installed console script, on the embedded defaults."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli_run import run_main
from marlm.eval.trace import read_trace

MARLM = [sys.executable, "-m", "marlm.cli"]

#: The first test here starts the session's cold demo (tests/conftest.py: it trains the
#: executor and embeds the triage pool); on 2 cores shared with other work that took longer than
#: the suite's 600 s hang guard. The subprocess keeps its own 900 s guard.
pytestmark = pytest.mark.timeout(1200)


def marlm(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*MARLM, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **(env or {})},
    )


#: Steps of each demo run: the default planner's is the cold first run (tests/conftest.py); the
#: LLM planner's run costs a model call per change, and 120 steps give it several (and deliveries).
DEMO_STEPS = {"default": 300, "llm": 120}


@pytest.fixture(scope="module", params=["default", "llm"])
def demo_run(request, cold_demo, tmp_path_factory):
    """Short demo runs with the real embedded model and the rl executor (the figures pinned
    below are its): the default planner (the model triages notes, a solver assigns) and
    ``--planner llm`` (the model assigns robots under a schema). The default planner's is the
    session's cold first run (``cold_demo``: an empty cache, so it trains the executor and embeds
    the pool); the LLM one reuses the executor it trained (``warm_cache``). Returns ``(process,
    run folder, steps asked for)``."""
    if request.param == "default":
        proc, out, _ = cold_demo
        return proc, out, DEMO_STEPS["default"]
    request.getfixturevalue("warm_cache")
    root = tmp_path_factory.mktemp("demo")
    out = root / "run"
    steps = DEMO_STEPS[request.param]
    proc = marlm(
        "demo", "--steps", str(steps), "--tick-ms", "0", "--sync", "--seed", "0", "--out",
        str(out), "--planner", request.param, "--executor", "rl",
        cwd=root,
    )  # fmt: skip
    return proc, out, steps


def test_the_first_rl_demo_trains_the_executor_and_embeds_the_pool_in_an_empty_cache(cold_demo):
    # The cold path: the cache was empty, the run wrote the Q-table and the pool's hidden states.
    proc, out, cache = cold_demo
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert len(list(cache.glob("executor-*.npz"))) == 1
    assert len(list(cache.glob("triage-embed-*.npz"))) == 1
    assert json.loads((out / "metrics.json").read_text())["executor"] == "rl"


def test_the_default_executor_is_learned_and_trains_no_q_table(tmp_path, capsys, monkeypatch):
    # The default executor is the learned one (README: it ties rl on the demo's settings and
    # wins where they differ); on small, which has no weights of its own, it runs the hand
    # guidance, says so, and a first demo trains no Q-table.
    cache = tmp_path / "empty-cache"
    monkeypatch.setenv("MARLM_CACHE", str(cache))
    out = tmp_path / "run"
    argv = ["demo", "--planner", "rule", "--sync", "--tick-ms", "0", "--no-gif", "--steps", "10"]
    code, err = run_main([*argv, "--no-counterfactual", "--out", str(out)], capsys)
    assert code == 0, err
    m = json.loads((out / "metrics.json").read_text())
    assert (m["scheme"], m["executor"]) == ("rule+learned+shield", "learned: hand guidance")
    assert not cache.exists() or not list(cache.glob("executor-*.npz"))  # nothing trained


def test_demo_writes_a_complete_run_folder(demo_run):
    proc, out, _ = demo_run
    assert proc.returncode == 0, proc.stderr[-2000:]
    for name in ("trace.jsonl", "metrics.json", "reward_curves.png", "episode.gif"):
        assert (out / name).stat().st_size > 0, name
    assert (out / "episode.gif").read_bytes()[:6] in (b"GIF87a", b"GIF89a")
    assert (out / "reward_curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    metrics = json.loads((out / "metrics.json").read_text())
    for key in (
        "delivered",
        "collisions",
        "steps",
        "llm_calls",
        "llm_fallbacks",
        "shield_overrides",
        "step_latency_p99_ms",
    ):
        assert key in metrics, key
    # The table is printed with the figures of metrics.json.
    assert "orders delivered" in proc.stdout and "control step p99" in proc.stdout


#: Measured on each demo run. With ``--sync`` a run is deterministic: the planner's answers come
#: from the embedded model (greedy decoding) on the same notes, and are applied in the step that
#: asked for them. (The model's float output could differ on another CPU or llama.cpp build;
#: that would change these figures, and the test says so.)
DEMO_FIGURES = {
    "default": {
        "delivered": 18, "steps": 300, "collisions": 0, "llm_calls": 13, "llm_invalid": 0,
        "llm_fallbacks": 0, "llm_unanswered": 0, "shield_overrides": 76,
        "still_with_task_max_steps": 1, "plans_effective": 16,
    },
    "llm": {
        "delivered": 7, "steps": 120, "collisions": 0, "llm_calls": 8, "llm_invalid": 2,
        "llm_fallbacks": 1, "llm_unanswered": 0, "shield_overrides": 17,
        "still_with_task_max_steps": 0, "plans_effective": 7,
    },
}  # fmt: skip


def test_demo_delivers_without_collisions_and_calls_the_llm_rarely(demo_run, request):
    _, out, steps = demo_run
    m = json.loads((out / "metrics.json").read_text())
    figures = DEMO_FIGURES[request.node.callspec.params["demo_run"]]
    assert {k: m[k] for k in figures} == figures
    # The time limit ended both runs; the model is called on change, never every step; the PIBT
    # layer pushes whoever is in the way, so no robot with a task stands still more than a step.
    assert figures["steps"] == steps and m["orders_total"] == 26


def test_the_default_demo_equals_the_rule_planner_on_the_shipped_sample(cold_demo):
    # README: on the shipped sample the notes agree with the listed priorities, so reading them
    # cannot pay: the hybrid equals the rule planner run beside it (the counterfactual).
    _, out, _ = cold_demo
    m = json.loads((out / "metrics.json").read_text())
    rule = m["counterfactual_rule"]
    assert rule["scheme"] == "rule+rl+shield"
    assert m["by_true_class"] == {k: rule[k] for k in m["by_true_class"]}
    assert m["by_true_class"]["delivered"] == 18


def test_demo_trace_matches_its_metrics(demo_run):
    _, out, _ = demo_run
    trace = read_trace(out / "trace.jsonl")
    assert not trace.truncated_last_line and not trace.warnings
    m = json.loads((out / "metrics.json").read_text())
    types = [e["type"] for e in trace.events]
    assert types[0] == "run_start" and types[-1] == "run_end"
    assert types.count("step") == m["steps"]
    assert types.count("llm_call") == m["llm_calls"]
    delivered = [e for e in trace.events if e["type"] == "order" and e["event"] == "delivered"]
    assert len(delivered) == m["delivered"]
    for call in trace.of_type("llm_call"):
        assert call["latency_ms"] > 0 and "valid" in call and "status" in call
        # A chat call records the messages it sent; a triage sent none and names its order.
        assert call["messages"] if call["call"] == "chat" else call["order"] in _order_ids(trace)
    start = trace.run_start
    assert start["backend"].startswith("embedded:") and start["model"].endswith(".gguf")


def _order_ids(trace) -> set[str]:
    return {o["id"] for o in trace.run_start["orders"]}


GOOD_MAP = "#######\n#R.S.P#\n#R....#\n#######\n"
BAD_MAPS = {
    "unknown character": ("#####\n#R.Z#\n#P..#\n#####\n", [], "'Z'"),
    "no station": ("#####\n#R.S#\n#...#\n#####\n", [], "station"),
    "unreachable shelf": ("#######\n#R.P###\n#...#S#\n#######\n", [], "S2-5"),
    "more robots than free cells": (GOOD_MAP, ["--robots", "50"], "robots"),
}


@pytest.mark.parametrize("case", sorted(BAD_MAPS))
def test_bad_map_is_one_line_exit_2_and_no_complete_run_folder(tmp_path, capsys, case):
    text, extra, needle = BAD_MAPS[case]
    map_file = tmp_path / "bad_map.txt"
    map_file.write_text(text)
    out = tmp_path / "run"
    code, err = run_main(
        ["demo", "--layout", str(map_file), "--planner", "rule", "--out", str(out), *extra], capsys
    )
    assert code == 2, err
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("marlm: error:"), err
    assert "bad_map.txt" in lines[0] and needle in lines[0], err
    assert not (out / "metrics.json").exists()


CUT_OFF_MAPS = {
    # The robot's room has a station; shelf S2-5 is served only from the other room's station.
    "rooms": ("#######\n#R.P#P#\n#...#S#\n#######\n", "S2-5"),
    # The shelf stands between the robot and the station.
    "one line": ("RSP\n", "S0-1"),
}


@pytest.mark.parametrize("command", ["demo", "compare"])
@pytest.mark.parametrize("case", sorted(CUT_OFF_MAPS))
def test_map_where_a_robot_cannot_reach_a_shelf_exits_2_and_claims_no_run_folder(
    tmp_path, capsys, monkeypatch, command, case
):
    # Both used to run, then fail with a ValueError traceback on the first assignment, leaving a
    # run folder (demo: only trace.jsonl). The map is refused when it is loaded.
    text, shelf = CUT_OFF_MAPS[case]
    (tmp_path / "rooms.txt").write_text(text)
    monkeypatch.chdir(tmp_path)
    smallest = {
        "demo": ["--planner", "rule", "--executor", "greedy"],
        "compare": ["--schemes", "rules"],
    }
    argv = [command, "--layout", "rooms.txt", "--steps", "30", *smallest[command]]
    code, err = run_main(argv, capsys)
    assert code == 2, err
    lines = [ln for ln in err.splitlines() if ln.strip() and ln.startswith("marlm: error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("marlm: error: rooms.txt:"), err
    assert "robot start 'R'" in lines[0] and f"shelf {shelf}" in lines[0], err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rooms.txt"]


GOOD_ORDER = {"id": "A", "shelf": "S1-3", "priority": "urgent", "arrival": 0, "deadline": 50}
BAD_ORDERS = {
    "unknown shelf": ({"shelf": "S9-9"}, "shelf"),
    "bad priority": ({"priority": "asap"}, "priority"),
    "duplicate id": ({"id": "A"}, "id"),
    "deadline before arrival": ({"arrival": 30, "deadline": 10}, "deadline"),
}


@pytest.mark.parametrize("case", sorted(BAD_ORDERS))
def test_bad_order_file_names_file_line_and_field(tmp_path, capsys, case):
    change, field = BAD_ORDERS[case]
    map_file = tmp_path / "map.txt"
    map_file.write_text(GOOD_MAP)
    orders = tmp_path / "orders.jsonl"
    second = {**GOOD_ORDER, "id": "B", **change}
    orders.write_text(json.dumps(GOOD_ORDER) + "\n" + json.dumps(second) + "\n")
    out = tmp_path / "run"
    code, err = run_main(
        ["demo", "--layout", str(map_file), "--orders", str(orders), "--planner", "rule",
         "--out", str(out)],
        capsys,
    )  # fmt: skip
    assert code == 2, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert "orders.jsonl:2:" in lines[0] and f"'{field}'" in lines[0], err
    assert not (out / "metrics.json").exists()


def test_order_file_that_is_not_utf8_names_the_line(tmp_path, capsys):
    orders = tmp_path / "orders.jsonl"
    orders.write_bytes(json.dumps(GOOD_ORDER).encode() + b"\n" + b'{"id": "\xff\xfe"}\n')
    map_file = tmp_path / "map.txt"
    map_file.write_text(GOOD_MAP)
    code, err = run_main(["demo", "--layout", str(map_file), "--orders", str(orders),
                          "--planner", "rule", "--out", str(tmp_path / "run")], capsys)  # fmt: skip
    assert code == 2 and "Traceback" not in err
    assert "orders.jsonl:2" in err and "UTF-8" in err


def test_bad_option_value_exits_2_through_the_console_script(tmp_path):
    proc = marlm("demo", "--steps", "0", "--planner", "rule", cwd=tmp_path)
    assert proc.returncode == 2
    assert "--steps" in proc.stderr and "Traceback" not in proc.stderr


def test_a_server_that_never_answers_is_recorded_and_does_not_hold_the_process(
    tmp_path, fault_server
):
    out = tmp_path / "run"
    # The server answers nothing for 600 s and the HTTP timeout is 900 s: a process that waited
    # for the in-flight request at exit would outlive the generous subprocess guard below (which
    # bounds a stuck process, not the speed of a run).
    proc = subprocess.run(
        [*MARLM, "demo", "--planner", "llm", "--llm", fault_server.base("hang~demo"),
         "--llm-timeout", "900", "--steps", "80", "--tick-ms", "0", "--plan-deadline", "0.1",
         "--executor", "greedy", "--no-gif", "--no-counterfactual", "--out", str(out)],
        capture_output=True, text=True, timeout=400, cwd=tmp_path,
        env={**os.environ, "MARLM_CACHE": str(tmp_path / "cache")},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    m = json.loads((out / "metrics.json").read_text())
    # The model never answers, so the outcome does not depend on timing: the run is the rule
    # planner's, step for step. No robot waited for the silent model: the rule assigned at once,
    # both times the situation changed; the second request waited behind the first, unsent.
    assert (m["steps"], m["delivered"], m["collisions"], m["shield_overrides"]) == (80, 3, 0, 6)
    assert m["llm_calls"] == 1 and m["plans_effective"] == 2
    assert m["plans_by_outcome"] == {
        "answered": 0, "rule": 2, "deadline": 0, "backend_error": 0, "invalid_answer": 0,
        "planner_error": 0,
    }  # fmt: skip
    assert m["idle_robot_steps"]["waiting_for_model"] == 0
    (call,) = read_trace(out / "trace.jsonl").of_type("llm_call")
    assert call["status"] == "unanswered" and not call["valid"]


def test_unusable_run_folder_or_model_file_is_one_line_exit_2(tmp_path, capsys):
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    code, err = run_main(["demo", "--planner", "rule", "--out", str(a_file)], capsys)
    assert code == 2 and "'--out'" in err and "Traceback" not in err
    fake = tmp_path / "fake.gguf"
    fake.write_bytes(b"\x00not a model\xff" * 10)
    code, err = run_main(["demo", "--llm", str(fake), "--out", str(tmp_path / "r")], capsys)
    assert code == 2 and "'--llm'" in err and "Traceback" not in err
    assert not (tmp_path / "r").exists()  # checked before the run folder was made


def test_a_q_table_with_the_default_executor_is_exit_2_before_any_work(tmp_path, capsys):
    # --policy was the default executor's table; the default is now learned, which has none:
    # the table would be ignored without a word.
    table, out = tmp_path / "mine.npz", tmp_path / "run"
    table.write_bytes(b"not read")
    code, err = run_main(["demo", "--policy", str(table), "--out", str(out)], capsys)
    assert code == 2 and err.startswith("marlm: error: field '--policy': a Q-table is the rl "), err
    assert "add --executor rl" in err and not out.exists()


FAST_DEMO = ["demo", "--planner", "rule", "--executor", "greedy", "--sync", "--no-gif", "--steps", "10"]  # fmt: skip
BAD_TIMING = {
    "negative seed": (["--tick-ms", "0", "--seed", "-1"], "--seed"),
    "infinite tick": (["--tick-ms", "inf"], "--tick-ms"),
    "nan tick": (["--tick-ms", "nan"], "--tick-ms"),
    "negative tick": (["--tick-ms", "-5"], "--tick-ms"),
    "infinite plan deadline": (["--tick-ms", "0", "--plan-deadline", "inf"], "--plan-deadline"),
    "infinite llm timeout": (["--tick-ms", "0", "--llm-timeout", "inf"], "--llm-timeout"),
    "zero llm timeout": (["--tick-ms", "0", "--llm-timeout", "0"], "--llm-timeout"),
}


@pytest.mark.parametrize("case", sorted(BAD_TIMING))
def test_bad_seed_or_timing_value_is_exit_2_before_any_work(tmp_path, capsys, case):
    # --seed -1 was a numpy traceback and left an empty run folder; --tick-ms inf an
    # OverflowError in the control loop.
    extra, option = BAD_TIMING[case]
    out = tmp_path / "run"
    code, err = run_main([*FAST_DEMO, *extra, "--out", str(out)], capsys)
    assert code == 2 and option in err and "Traceback" not in err, err
    assert not out.exists()


def test_compare_with_a_negative_seed_is_exit_2_before_any_work(tmp_path, capsys):
    out = tmp_path / "cmp"
    code, err = run_main(
        ["compare", "--schemes", "rules", "--seed", "-3", "--out", str(out)], capsys
    )
    assert code == 2 and "--seed" in err and "Traceback" not in err, err
    assert not out.exists()
