"""The HTML report without a browser: self-contained, escaped, honest about what it could read."""

from __future__ import annotations

import base64
import io
import json
import re
from html import escape
from pathlib import Path

import numpy as np
import pytest

from cli_run import run_main
from marlm.errors import InputError
from marlm.eval.gif import save_episode_gif
from marlm.eval.report import write_report
from marlm.eval.trace import TraceWriter


def _png() -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (8, 8), (200, 30, 30)).save(buf, format="PNG")
    return buf.getvalue()


def _run_folder(path: Path, *, gif: bool = True, end: bool = True, llm: bool = True) -> Path:
    rng = np.random.default_rng(0)
    with TraceWriter(path / "trace.jsonl") as t:
        t.write(
            "run_start",
            config={"layout": "small"},
            agents=["robot_0", "robot_1"],
            scheme="hybrid",
            layout="small",
        )
        for s in range(60):
            t.write(
                "step",
                step=s,
                proposed=[1, 2],
                actions=[1, 0],
                rewards=rng.normal(size=2),
                positions=[[0, s % 5], [1, 1]],
                overrides=["robot_1"],
                collisions=0,
                latency_ms=0.2,
            )
        t.write("order", event="arrived", order="O1", step=0, priority="urgent")
        if llm:
            t.write(
                "llm_call",
                call_id=1,
                step_requested=0,
                step_applied=2,
                latency_ms=300.0,
                valid=False,
                error="bad <id>",
                prompt_tokens=200,
                completion_tokens=20,
                messages=[{"role": "user", "content": "<script>alert(1)</script> 货架A-3 🚚"}],
                raw='{"robot": "</pre><img src=x onerror=alert(1)>"}',
                attempt=0,
                fallback=True,
            )
        t.write(
            "plan",
            step=2,
            step_requested=0,
            source="fallback",
            assignments=[{"robot": "robot_0", "order": "O1"}],
            pending=["O1"],
            idle=["robot_0"],
        )
        t.write("failure", kind="invalid_llm_answer", step=2, detail="bad")
        t.write("order", event="delivered", order="O1", step=30, priority="urgent", robot="robot_0")
        if end:
            t.write("run_end", step=60, reason="time_limit")
    if gif:
        save_episode_gif(
            [np.full((20, 30, 3), 25 * i, np.uint8) for i in range(6)], path / "episode.gif"
        )
    return path


def test_report_is_self_contained_and_escapes_model_text(tmp_path: Path) -> None:
    page, warnings = write_report(_run_folder(tmp_path))
    assert page == tmp_path / "report.html" and warnings == []
    html = page.read_text(encoding="utf-8")
    assert html.count('src="data:image/png;base64,') == 4
    assert html.count('src="data:image/gif;base64,') == 1
    assert not re.search(r'(src|href)="(?!data:)', html)  # nothing loaded from outside
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<img src=x" not in html
    assert "货架A-3 🚚" in html  # characters, not escapes
    for label in (
        "orders delivered",
        "on-time rate",
        "control-step latency p99 (ms)",
        "invalid_llm_answer",
        "Diagnostics",
        "Episode animation",
    ):
        assert label in html
    assert not list(tmp_path.glob("*.tmp"))


def test_report_names_the_guidance_the_learned_executor_ran(tmp_path: Path) -> None:
    # The page said "Scheme rule+learned+shield" and not which guidance ran, where run_start
    # and metrics.json said "learned: hand guidance" (small has no learned weights of its own).
    from marlm.hybrid.build import build_planner
    from marlm.hybrid.controller import run, run_config

    config = run_config(
        layout="small",
        steps=3,
        planner="rule",
        executor="learned",
        sync_planner=True,
        gif=False,
        tick_ms=0,
    )
    result = run(config, tmp_path / "run", planner=build_planner("rule"))
    html = write_report(result.out_dir)[0].read_text(encoding="utf-8")
    assert "<b>rule+learned+shield</b>, executor <b>learned: hand guidance</b>, layout" in html


def test_report_of_a_run_without_llm_calls_draws_no_llm_chart(tmp_path: Path) -> None:
    page, _ = write_report(_run_folder(tmp_path, llm=False))
    html = page.read_text(encoding="utf-8")
    alts = re.findall(r'<img alt="([^"]*)"', html)
    assert alts == [
        "Per-agent reward curves", "Throughput over time", "Latency histograms",
        "episode animation",
    ]  # fmt: skip
    assert "No LLM calls in this run: no LLM-call chart." in html
    # and with one call, the chart is there
    page, _ = write_report(_run_folder(tmp_path / "llm"))
    alts = re.findall(r'<img alt="([^"]*)"', page.read_text(encoding="utf-8"))
    assert "LLM calls on the control timeline" in alts


def test_report_of_a_crashed_run_says_so(tmp_path: Path) -> None:
    _run_folder(tmp_path, gif=False, end=False)
    with open(tmp_path / "trace.jsonl", "ab") as f:
        f.write(b'{"v":1,"type":"step","step":60,"act')
    page, warnings = write_report(tmp_path, tmp_path / "out" / "r.html")
    assert page == tmp_path / "out" / "r.html"
    assert len(warnings) == 1 and "last line is cut off" in warnings[0]
    html = page.read_text(encoding="utf-8")
    assert "last line is cut off" in html
    assert "no run_end event: the run crashed or was stopped" in html
    assert "No episode.gif in the run folder." in html


def test_report_without_a_trace_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(
        InputError, match="holds none of the files of a marlm run; marlm report takes"
    ):
        write_report(tmp_path)
    assert not (tmp_path / "report.html").exists()


def test_demo_report_shows_a_saved_replay_and_no_findings_file_it_does_not_read(
    tmp_path: Path,
) -> None:
    _run_folder(tmp_path, gif=False)
    (tmp_path / "replay.json").write_text(json.dumps({"exact_agreement": 0.75, "rows": []}))
    html = write_report(tmp_path)[0].read_text(encoding="utf-8")
    assert "Offline replay" in html and "0.75" in html
    # marlm writes no diagnostics for a demo run; the page says where the detectors apply
    assert "read training runs" in html and "<li><b>" not in html


def _race_folder(path: Path, **config) -> Path:
    """A real GridRace run folder (marlm train race), with a checkpoint saved inside it."""
    from marlm.experiments.tabular import run_race
    from marlm.rl.train import RaceConfig

    run_race(RaceConfig(**config), path, checkpoint=path / "ckpt.npz")
    return path


def test_report_of_a_train_race_folder_shows_its_curves_findings_and_checkpoint(
    tmp_path: Path, capsys
) -> None:
    # Seed 0, 1000 episodes of IQL on the shared reward: agent_1 turns lazy and oscillates.
    run = _race_folder(tmp_path / "race", episodes=1000, seed=0)
    findings = json.loads((run / "findings.json").read_text())
    assert {f["kind"] for f in findings} == {"lazy_agent", "non_stationarity"}
    code, err = run_main(["report", run], capsys)
    assert code == 0, err
    html = (run / "report.html").read_text(encoding="utf-8")
    curves = base64.b64encode((run / "curves.png").read_bytes()).decode("ascii")
    assert f'src="data:image/png;base64,{curves}"' in html
    assert html.count("data:image/") == 1
    for f in findings:  # each finding of findings.json, as the demo page renders findings
        assert f"<b>{f['kind']}</b> [{f['agent']}]: {escape(f['message'])}" in html
        assert escape(f["suggestion"]) in html
    assert "<td>ckpt.npz</td>" in html and "checkpoint (race, 1000 of 1000 episodes)" in html
    assert "<td>learner</td><td>iql</td>" in html  # the settings
    assert "<td>agent_1</td>" in html and "reached_goal_rate" in html  # the final figures
    assert not re.search(r'(src|href)="(?!data:)', html)
    # The report is an output file: never overwritten unasked.
    code, err = run_main(["report", run], capsys)
    assert code == 2 and "report.html" in err and "--overwrite" in err
    assert run_main(["report", run, "--overwrite"], capsys)[0] == 0


def test_report_of_a_no_plot_gridworld_folder_draws_the_curve_from_its_logs(tmp_path: Path) -> None:
    from marlm.experiments.tabular import run_gridworld
    from marlm.rl.train import GridWorldConfig

    run_gridworld(GridWorldConfig(episodes=60, seed=0), tmp_path, plot=False)
    assert not (tmp_path / "curves.png").exists()
    page, warnings = write_report(tmp_path)
    html = page.read_text(encoding="utf-8")
    assert warnings == [] and html.count('src="data:image/png;base64,') == 1
    assert "gridworld_v0" in html and "No known failure mode detected." in html
    assert "<td>greedy_path_length</td>" in html


def test_report_of_an_unfinished_training_folder_says_what_is_missing(tmp_path: Path) -> None:
    np.savez(tmp_path / "episodes.npz", returns=np.linspace(-1, 1, 40), length=np.ones(40))
    page, warnings = write_report(tmp_path)
    html = page.read_text(encoding="utf-8")
    assert any("no metrics.json: the training did not finish" in w for w in warnings)
    assert any("no findings.json" in w for w in warnings)
    assert html.count('src="data:image/png;base64,') == 1


def test_report_of_a_compare_folder_shows_the_table_plot_and_each_scheme(tmp_path: Path) -> None:
    for scheme in ("rules", "hybrid"):
        _run_folder(tmp_path / scheme, gif=False)
        save_episode_gif([np.zeros((4, 4, 3), np.uint8)], tmp_path / scheme / "episode.gif")
    (tmp_path / "hybrid" / "reward_curves.png").write_bytes(_png())
    (tmp_path / "compare.png").write_bytes(_png())
    (tmp_path / "compare.json").write_text(
        json.dumps(
            {
                "columns": ["scheme", "delivered"],
                "headers": {"scheme": "scheme", "delivered": "orders delivered"},
                "rows": [{"scheme": "hybrid", "delivered": 9}, {"scheme": "rules", "delivered": 7}],
                "setting": {"layout": "small", "seed": 1},
                "notes": ["RL executor trained on seed 0"],
            }
        )
    )
    html = write_report(tmp_path)[0].read_text(encoding="utf-8")
    assert "<th>orders delivered</th>" in html and '<td>rules</td><td class="num">7</td>' in html
    assert html.count('src="data:image/png;base64,') == 2  # compare.png, hybrid's curves
    assert html.index("<h3>hybrid</h3>") < html.index("<h3>rules</h3>")  # the table's order
    assert f"marlm report {tmp_path.name}/rules" in html
    assert "RL executor trained on seed 0" in html and "<td>layout</td>" in html


@pytest.mark.parametrize("entry", ["empty", "notes.txt", "table.npz"])
def test_report_refuses_what_is_not_a_run_and_names_what_it_takes(
    tmp_path: Path, capsys, entry: str
) -> None:
    target = tmp_path / "folder"
    target.mkdir()
    if entry == "notes.txt":
        (target / "notes.txt").write_text("mine")
    elif entry == "table.npz":
        np.savez(target / "table.npz", q=np.zeros((2, 2)))
        target = target / "table.npz"
    code, err = run_main(["report", target], capsys)
    assert code == 2 and "Traceback" not in err
    assert (
        "trace.jsonl" in err and "marlm train gridworld|race|env" in err and "compare.json" in err
    )
    assert not list(tmp_path.rglob("report.html"))


@pytest.mark.parametrize(
    "name, content",
    [
        ("metrics.json", {"accuracy": 0.91, "loss": 0.2}),
        ("compare.json", {"models": ["a", "b"], "winner": "a"}),
        ("compare_notes_only.json", [1, 2, 3]),
    ],
)
def test_report_refuses_a_folder_holding_only_a_users_json_file(
    tmp_path: Path, capsys, name: str, content: object
) -> None:
    # A folder with the user's own metrics.json or compare.json was reported as a marlm run.
    (tmp_path / name).write_text(json.dumps(content), encoding="utf-8")
    code, err = run_main(["report", tmp_path], capsys)
    assert code == 2 and err.count("marlm: error:") == 1 and "Traceback" not in err, err
    assert f"holds {name} but not as marlm writes them" in err
    assert not (tmp_path / "report.html").exists()
