"""The trace's run configuration states the run's real order count."""

from __future__ import annotations

from pathlib import Path

import marlm
from marlm.eval.trace import read_trace
from marlm.hybrid.build import build_planner
from marlm.hybrid.controller import run, run_config

SAMPLE_ORDERS = Path(marlm.__file__).parent / "data" / "orders" / "sample.jsonl"


def _run_start(tmp_path: Path, **settings) -> dict:
    config = run_config(
        layout="small", steps=3, seed=0, planner="rule", executor="greedy", sync_planner=True,
        tick_ms=0, gif=False, **settings,
    )  # fmt: skip
    result = run(config, tmp_path, planner=build_planner("rule"))
    return next(e for e in read_trace(result.out_dir).events if e["type"] == "run_start")


def test_a_run_on_an_order_file_records_the_files_count_of_orders(tmp_path: Path) -> None:
    # The shipped sample holds 26 orders; the trace used to say the unused default, 24.
    assert len(SAMPLE_ORDERS.read_text(encoding="utf-8").splitlines()) == 26
    start = _run_start(tmp_path / "file", orders=str(SAMPLE_ORDERS))
    assert start["config"]["orders"] == str(SAMPLE_ORDERS)
    assert start["config"]["n_orders"] == 26 == len(start["orders"])


def test_a_generated_run_records_the_count_it_generated(tmp_path: Path) -> None:
    start = _run_start(tmp_path / "gen", n_orders=7)
    assert start["config"]["orders"] is None
    assert start["config"]["n_orders"] == 7 == len(start["orders"])
