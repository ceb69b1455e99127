"""The train and diagnose commands as a user runs them (real process, real files)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from cli_run import run_main
from marlm.cli.train import BLAS_THREAD_VARIABLES

CLI = [sys.executable, "-c", "from marlm.cli import main; main()"]


def run(*args, cwd):
    # No timeout of its own: pytest-timeout (pyproject) guards against a hang.
    return subprocess.run([*CLI, *args], capture_output=True, text=True, cwd=cwd)


def test_train_gridworld_writes_the_run_folder(tmp_path):
    p = run("train", "gridworld", "--out", "gw", "--seed", "1", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    metrics = json.loads((tmp_path / "gw" / "metrics.json").read_text())
    assert abs(metrics["value_start"] - 0.7285) < 0.005 and metrics["greedy_path_length"] == 6
    assert (tmp_path / "gw" / "curves.png").stat().st_size > 1000
    assert "value_start" in p.stdout


def test_train_gridworld_with_the_llm_reward_costs_one_evaluation_per_state(
    tmp_path, embedded_model
):
    # The real embedded model (SmolLM2-135M) scores every cell the agent steps into; the cache
    # keeps the cost at <= cells x paraphrased samples whatever the number of steps. A 2x2 grid
    # and 2 samples keep it to <= 8 model calls (the 4x4 run of the CLI took 300 s under load);
    # `marlm train gridworld --reward llm` builds exactly this reward (cli.train._llm_reward_fn).
    from marlm.experiments.tabular import run_gridworld
    from marlm.llm.reward import LLMReward
    from marlm.rl.train import GridWorldConfig

    reward = LLMReward(embedded_model, task="reach the goal cell in as few steps as possible", k=2)
    config = GridWorldConfig(size=2, episodes=3, max_steps=20, seed=0)
    _, metrics = run_gridworld(config, tmp_path / "gwllm", engine="reference", reward_fn=reward)
    calls, hits = metrics["llm/reward_calls"], metrics["llm/reward_cache_hits"]
    distinct, k = metrics["reward/distinct_states"], metrics["llm/reward_samples"]
    assert k == 2 and 1 <= distinct <= 4
    assert calls == k * metrics["llm/reward_evaluations"] <= distinct * k
    assert metrics["llm/reward_evaluations"] == distinct  # one evaluation per distinct state
    with np.load(tmp_path / "gwllm" / "episodes.npz") as episodes:
        steps = int(episodes["length"].sum())
        assert np.isfinite(episodes["returns"]).all()
    # every step asked the reward function once: a cache hit or a new evaluation
    assert hits == steps - distinct and hits > 0
    assert np.isfinite(metrics["value_start"])
    saved = json.loads((tmp_path / "gwllm" / "metrics.json").read_text())
    assert saved["llm/reward_calls"] == calls


def test_train_gridworld_llm_reward_options_are_checked_before_the_model_loads(tmp_path):
    p = run("train", "gridworld", "--reward", "llm", "--llm-samples", "0", cwd=tmp_path)
    assert p.returncode == 2 and "--llm-samples" in p.stderr and "Traceback" not in p.stderr


def test_train_race_then_diagnose(tmp_path):
    p = run("train", "race", "--out", "race", "--episodes", "30000", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "lazy_agent" in p.stdout
    d = run("diagnose", "race", cwd=tmp_path)
    assert d.returncode == 0 and d.stdout.startswith("lazy_agent [agent_")


NO_PLOT_RUN = """
import json, sys
from marlm.cli import main
sys.argv = ["marlm", "train", {command!r}, "--out", "run", "--episodes", "50", *{options!r}]
try:
    main()
except SystemExit as e:
    assert not e.code, e.code
heavy = ("matplotlib", "gymnasium", "pettingzoo", "pydantic")  # pydantic: see cli/plain_values
unused = ("marlm.eval.metrics", "marlm.rl.ctde", "marlm.rl.independent")  # hybrid, reference
print(json.dumps(sorted(m for m in heavy + unused if m in sys.modules)))
"""


def loaded_by_a_run(tmp_path, command, *options):
    """The heavy libraries, and the modules a training run does not need, that a ``marlm train``
    process imported (run in a fresh interpreter)."""
    p = subprocess.run(
        [sys.executable, "-c", NO_PLOT_RUN.format(command=command, options=list(options))],
        capture_output=True, text=True, cwd=tmp_path,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.splitlines()[-1])


@pytest.mark.parametrize(
    "command,loaded", [("gridworld", ["gymnasium", "pettingzoo"]), ("race", [])]
)  # fmt: skip
def test_no_plot_writes_no_curves_and_never_loads_matplotlib(tmp_path, command, loaded):
    # gridworld trains through envs.grid (Gymnasium env); a race run uses envs.grid_dynamics only
    # options of each plain type (int, Path, bool, str, float) convert without pydantic
    options = (
        "--no-plot",
        "--seed",
        "3",
        "--alpha",
        "0.25",
        "--learner",
        "iql" if command == "race" else "q",
    )
    assert loaded_by_a_run(tmp_path, command, *options) == loaded
    written = {f.name for f in (tmp_path / "run").iterdir()}
    assert "curves.png" not in written
    assert {"metrics.json", "tables.npz", "episodes.npz", "findings.json"} <= written


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the plot process forks")
def test_train_race_draws_its_curves_in_a_plot_process(tmp_path):
    # With the plot (the default), matplotlib is imported by the forked plot process only.
    assert loaded_by_a_run(tmp_path, "race") == []
    written = {f.name for f in (tmp_path / "run").iterdir()}
    assert {"curves.png", "metrics.json", "tables.npz", "episodes.npz", "findings.json"} <= written
    assert (tmp_path / "run" / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    "args,needle",
    [(["train", "race", "--learner", "ppo"], "allowed: iql, vdn, jal"),
     (["train", "race", "--reward", "selfish"], "allowed: shared, individual, mixed, difference"),
     (["train", "gridworld", "--episodes", "0"], "episodes"),
     (["train", "gridworld", "--gamma", "2"], "gamma"),
     (["diagnose", "nowhere"], "RUN_FOLDER")],
)  # fmt: skip
def test_bad_input_exits_2_with_one_line(tmp_path, args, needle):
    p = run(*args, cwd=tmp_path)
    assert p.returncode == 2
    assert needle in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert "Traceback" not in p.stderr


def test_resume_from_checkpoint_of_another_shape_exits_2(tmp_path):
    assert (
        run(
            "train",
            "race",
            "--episodes",
            "10",
            "--checkpoint",
            "ck.npz",
            "--out",
            "a",
            cwd=tmp_path,
        ).returncode
        == 0
    )
    p = run(
        "train",
        "race",
        "--learner",
        "jal",
        "--episodes",
        "20",
        "--resume",
        "ck.npz",
        "--out",
        "b",
        cwd=tmp_path,
    )
    assert p.returncode == 2 and "learner" in p.stderr


FROZEN_AT_EXIT = """
import atexit, gc, sys
atexit.register(lambda: print("frozen", gc.get_freeze_count() > 0))  # runs after main's own
from marlm.cli import main
sys.argv = ["marlm", "train", "race", "--help"]
main()
"""


def test_the_command_skips_the_final_garbage_collection(tmp_path):
    # The marlm entry point freezes the objects still alive at exit, so the interpreter's last
    # collection (half a second after a training run) does not walk them.
    p = subprocess.run(
        [sys.executable, "-c", FROZEN_AT_EXIT], capture_output=True, text=True, cwd=tmp_path
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[-1] == "frozen True"


BLAS_RUN = """
import ctypes, json, os, sys
from marlm.cli import main
sys.argv = ["marlm", "train", "race", "--out", "run", "--episodes", "5", "--no-plot"]
try:
    main()
except SystemExit as e:
    assert not e.code, e.code
libs = [line.split()[-1] for line in open("/proc/self/maps") if "openblas" in line]
names = ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads64_", "openblas_get_num_threads")
count = [getattr(ctypes.CDLL(libs[0]), n) for n in names if libs and hasattr(ctypes.CDLL(libs[0]), n)]
print(json.dumps([count[0]() if count else None, os.environ.get("OPENBLAS_NUM_THREADS")]))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps")
@pytest.mark.parametrize("chosen", [None, "2"])
def test_a_train_run_starts_no_blas_threads_unless_the_user_chose_a_count(tmp_path, chosen):
    # Tabular training multiplies no matrices: numpy's OpenBLAS is loaded on one thread, the
    # environment left as it was; a count the user set (OPENBLAS_NUM_THREADS) is kept.
    env = {k: v for k, v in os.environ.items() if k not in BLAS_THREAD_VARIABLES}
    if chosen:
        env["OPENBLAS_NUM_THREADS"] = chosen
    p = subprocess.run(
        [sys.executable, "-c", BLAS_RUN], capture_output=True, text=True, cwd=tmp_path, env=env
    )
    assert p.returncode == 0, p.stderr
    threads, variable = json.loads(p.stdout.splitlines()[-1])
    if threads is None:
        pytest.skip("numpy's BLAS here is not an OpenBLAS that reports its thread count")
    assert (threads, variable) == ((2, "2") if chosen else (1, None))


@pytest.mark.parametrize("command", ["race", "gridworld"])
@pytest.mark.parametrize(
    "option,value",
    [("--checkpoint-every", "0"), ("--checkpoint-every", "-1"), ("--seed", "-1")],
)
def test_bad_chunk_or_seed_is_exit_2_before_the_run_folder(
    tmp_path, capsys, command, option, value
):
    # --checkpoint-every 0 spun forever at 100% CPU; -1 and --seed -1 were numpy tracebacks.
    out = tmp_path / "run"
    args = ["train", command, "--episodes", "5", "--no-plot", option, value, "--out", out]
    code, err = run_main(args, capsys)
    assert code == 2 and option in err and "Traceback" not in err, err
    assert not out.exists()


@pytest.mark.parametrize("command", ["race", "gridworld"])
@pytest.mark.parametrize("content", ["empty", "text", "npz without metadata", "npy array"])
def test_resume_from_a_file_that_is_no_checkpoint_is_exit_2(tmp_path, capsys, command, content):
    # An empty file printed only "Aborted!" (click's answer to numpy's EOFError), exit 1.
    bad = tmp_path / "bad.npz"
    if content == "empty":
        bad.write_bytes(b"")
    elif content == "text":
        bad.write_text("hello\n")
    elif content == "npz without metadata":
        np.savez(bad, q=np.zeros(3))
    else:
        with bad.open("wb") as f:
            np.save(f, np.zeros(3))
    out = tmp_path / "run"
    args = ["train", command, "--episodes", "5", "--no-plot", "--resume", bad, "--out", out]
    code, err = run_main(args, capsys)
    assert code == 2 and str(bad) in err and "checkpoint" in err and "Traceback" not in err, err
    assert not out.exists()  # checked before the run folder is claimed


@pytest.mark.parametrize("option,value", [("--seed", "-1"), ("--seeds", "0")])
def test_train_warehouse_bad_seed_is_exit_2_before_training(tmp_path, capsys, option, value):
    # --seed -1 was numpy's ValueError after training started; --seeds 0 trained one seed anyway.
    out = tmp_path / "executor.npz"
    args = ["train", "warehouse", "--episodes", "1", option, value, "--out", out]
    code, err = run_main(args, capsys)
    assert code == 2 and option in err and "Traceback" not in err, err
    assert not out.exists()
