"""The executor table of ``marlm train warehouse``: greedy, tabular and learned, each under PIBT,
on held-out seeds of a dense lifelong setting, with the spread over seeds."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from marlm.experiments.warehouse_training import (
    DenseSetting,
    ExecutorRow,
    WarehouseTraining,
    WarehouseTrainingConfig,
    dense_executors,
    dense_instances,
    executor_rows,
    executor_table,
)
from marlm.hybrid.acting.executor import train_executor

TINY = DenseSetting(rows=12, cols=16, robots=12, orders=60, steps=40, seeds=(7, 8))


def _text(renderable) -> str:
    out = io.StringIO()
    Console(file=out, width=160).print(renderable)
    return out.getvalue()


def test_the_table_has_greedy_tabular_hand_and_learned_with_exact_figures():
    q, _ = train_executor(layout="small", episodes=2, max_steps=50, seed=0)
    rows = executor_rows(TINY, dense_executors(q))
    assert [(r.name, r.delivered) for r in rows] == [
        ("greedy", (23, 22)),
        ("tabular (Q + distance)", (24, 22)),
        ("hand guidance", (23, 22)),
        ("learned guidance", (22, 21)),
    ]
    table = executor_table(TINY, rows)
    assert "12 robots, 60 orders, 40 steps; held-out seeds 7-8" in table.title
    text = _text(table)
    for cells in (
        ("greedy", "22.5 ± 0.7", "1.000"),
        ("tabular (Q + distance)", "23.0 ± 1.4", "1.022"),
        ("hand guidance", "22.5 ± 0.7", "1.000"),
        ("learned guidance", "21.5 ± 0.7", "0.956"),
    ):
        assert any(all(c in line for c in cells) for line in text.splitlines()), cells


def test_train_warehouse_prints_the_comparison_and_the_executor_table():
    config = WarehouseTrainingConfig(dense=TINY)
    rows = [ExecutorRow("greedy", (10, 12)), ExecutorRow("learned guidance", (11, 15))]
    text = _text(WarehouseTraining(config, rows=[], executors=rows).tables())
    assert "robot conflicts" in text  # the comparison of the trained table
    assert "11.0 ± 1.4" in text and "13.0 ± 2.8" in text and "1.182" in text


def test_training_episodes_never_use_a_reported_seed():
    with pytest.raises(ValueError, match=r"\[7\]"):
        dense_instances(TINY, [6, 7])
    (inst,) = dense_instances(TINY, [0])
    assert inst.starts.shape == (12, 2) and inst.targets.shape == (12, 42, 2)


@pytest.mark.parametrize("field,value", [("robots", 0), ("rows", 7), ("seeds", ())])
def test_a_dense_setting_out_of_bounds_names_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        DenseSetting(**{field: value})
