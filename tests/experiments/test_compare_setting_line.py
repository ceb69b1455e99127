"""The setting line under ``marlm compare``'s table names the backend only when a scheme of the
table asked it: ``--schemes rules`` printed "LLM embedded" (and ``--llm URL`` that URL) though
no scheme asked any model."""

from __future__ import annotations

import pytest

from marlm.experiments.compare import COLUMNS, format_table


def _table(*schemes: str) -> str:
    rows = [{key: (n if key == "scheme" else 0) for key, _ in COLUMNS} for n in schemes]
    setting = {"layout": "small", "seed": 1, "steps": 60, "llm": "http://127.0.0.1:9/v1"}
    result = {"rows": rows, "columns": [k for k, _ in COLUMNS], "headers": dict(COLUMNS)}
    return " ".join(format_table({**result, "setting": setting, "notes": []}).split())


@pytest.mark.parametrize(
    "schemes,shown",
    [
        (("rules", "rl_shield", "learned_shield"), "60 steps, no scheme asks a model, planner"),
        (("rules", "hybrid_triage"), "60 steps, LLM http://127.0.0.1:9/v1, planner"),
        (("rules", "llm_only"), "60 steps, LLM http://127.0.0.1:9/v1, planner"),
    ],
    ids=["model-free", "a model planner", "the LLM executor"],
)
def test_the_setting_line_names_the_model_only_when_a_scheme_asked_it(schemes, shown):
    assert shown in _table(*schemes)
