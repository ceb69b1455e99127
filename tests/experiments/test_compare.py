"""`compare_schemes` on the schemes that need no model (real env, real policy, real shield), and
the LLM move executor's error handling with a scripted model as fault injector."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from marlm.errors import InputError
from marlm.experiments.compare import (
    CompareConfig,
    compare_schemes,
    format_table,
    plot_comparison,
)
from marlm.hybrid.acting.llm_executor import LLMMoveExecutor
from marlm.llm.backends import BackendError, ChatResult


def test_compare_without_llm_shows_the_shield_trade_off(tmp_path: Path, warm_cache) -> None:
    lines: list[str] = []
    # A spread of two seeds (one more run per scheme, the RL policy's too) instead of the
    # default five: no figure here reads the spread, whose own tests are below.
    config = CompareConfig.of(
        steps=150, seed=1, schemes=["rules", "rl_no_shield", "rl_shield"], spread_seeds=2
    )
    result = compare_schemes(config, tmp_path, progress=lines.append)
    rows = {r["scheme"]: r for r in result["rows"]}
    assert list(rows) == ["rules", "rl_no_shield", "rl_shield"]
    # Under the PIBT rule layer both shielded schemes deliver all 24 orders of the stream before
    # the 150-step limit (the run then ends); the unshielded policy gets there only by colliding
    # (7 conflicts the environment refused). Measured: (delivered, steps, collisions, overrides).
    figures = {
        s: (r["delivered"], r["steps"], r["collisions"], r["shield_overrides"])
        for s, r in rows.items()
    }
    assert figures == {
        "rules": (24, 128, 0, 42),
        "rl_no_shield": (24, 133, 7, 0),
        "rl_shield": (24, 128, 0, 18),
    }
    assert all(r["llm_calls"] == 0 for r in rows.values())
    assert any("trained on seed 0; table seed 1" in n for n in result["notes"])
    saved = json.loads((tmp_path / "compare.json").read_text(encoding="utf-8"))
    assert [r["scheme"] for r in saved["rows"]] == list(rows)
    table = (tmp_path / "compare.txt").read_text(encoding="utf-8")
    assert table == format_table(result) + "\n"
    assert table.splitlines()[0].split()[:3] == ["scheme", "delivered", "on-time"]
    assert (tmp_path / "compare.png").is_file()
    for name in rows:
        assert (tmp_path / name / "trace.jsonl").is_file() and (
            tmp_path / name / "metrics.json"
        ).is_file()
    assert any(line.startswith("running rl_shield") for line in lines)


def test_compare_runs_the_shielded_schemes_on_the_chosen_rule_layer(tmp_path: Path) -> None:
    for rule in ("pibt", "local"):
        config = CompareConfig.of(steps=10, schemes=["rules"], spread_seeds=0, shield_rule=rule)
        result = compare_schemes(config, tmp_path / rule)
        start = json.loads((tmp_path / rule / "rules" / "trace.jsonl").read_text().split("\n")[0])
        assert start["config"]["shield_rule"] == rule
        assert f"shield {rule}" in format_table(result)


def test_compare_names_the_guidance_its_learned_executor_ran(tmp_path: Path) -> None:
    # compare.txt named the scheme learned_shield and no guidance, where metrics.json said
    # "learned: hand guidance" (small has no learned weights of its own).
    config = CompareConfig.of(steps=5, schemes=["rules", "learned_shield"], spread_seeds=0)
    result = compare_schemes(config, tmp_path)
    assert [r["executor"] for r in result["rows"]] == ["greedy", "learned: hand guidance"]
    said = "learned_shield: the learned executor ran hand guidance"
    assert [n for n in result["notes"] if "learned executor" in n] == [said]
    assert f"note: {said}" in (tmp_path / "compare.txt").read_text(encoding="utf-8")


def test_the_table_says_which_schemes_ran_without_a_rule_layer() -> None:
    # The footer said "shield pibt" of every row, rl_no_shield's included.
    rows = [{"scheme": "rules"}, {"scheme": "rl_no_shield"}]
    result = {"rows": rows, "columns": ["scheme"], "setting": {"shield_rule": "pibt"}}
    words = lambda result: " ".join(format_table(result).split())  # noqa: E731  (unwrapped)
    assert words(result).endswith(", shield pibt (rl_no_shield: none)")
    assert words({**result, "rows": rows[:1]}).endswith(", shield pibt")


def test_compare_rejects_unknown_schemes(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="unknown scheme"):
        CompareConfig.of(schemes=["rules", "magic"])


class Scripted:
    """Returns fixed texts in order; raises BackendError for the text None."""

    def __init__(self, texts: list[str | None]) -> None:
        self.texts = list(texts)
        self.seen: list[list[dict]] = []

    def chat(self, messages, *, schema=None, max_tokens=256, temperature=0.0, seed=None):
        self.seen.append(messages)
        text = self.texts.pop(0)
        if text is None:
            raise BackendError("connection refused")
        return ChatResult(text, prompt_tokens=100, completion_tokens=10, latency_s=0.5)


def _obs(has_task: bool, closer: int | None = None) -> np.ndarray:
    o = np.zeros(16, dtype=np.float32)
    o[15] = float(has_task)
    if closer is not None:
        o[10 + closer] = 1.0
    return o


def test_llm_move_executor_applies_valid_moves_and_stays_on_errors() -> None:
    agents = ["robot_0", "robot_1", "robot_2"]
    obs = {"robot_0": _obs(True, 3), "robot_1": _obs(False), "robot_2": _obs(True, 0)}
    model = Scripted(
        [
            '{"moves": [{"robot": "robot_2", "action": "up"}, {"robot": "robot_0", "action": "right"}]}',
            '{"moves": [{"robot": "robot_0", "action": "right"}]}',  # robot_2 missing
            "not json",
            None,
        ]
    )
    ex = LLMMoveExecutor(model)
    rng = np.random.default_rng(0)
    assert ex.act(obs, agents, rng).tolist() == [4, 0, 1]
    user = model.seen[0][1]["content"]
    assert "robot_0: closer: right" in user and "robot_1" not in user  # idle robots not sent
    for _ in range(3):
        assert ex.act(obs, agents, rng).tolist() == [0, 0, 0]
    assert ex.calls == 4 and ex.invalid == 3
    assert ex.prompt_tokens == 300 and ex.completion_tokens == 30
    # Nobody busy: no call at all.
    idle = {a: _obs(False) for a in agents}
    assert ex.act(idle, agents, rng).tolist() == [0, 0, 0] and ex.calls == 4


def test_compare_png_marks_the_capped_scheme_and_not_one_that_finished_early(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from marlm.eval import plots

    made = []
    figure = plots._figure
    monkeypatch.setattr(plots, "_figure", lambda *a, **k: made.append(figure(*a, **k)) or made[-1])
    rows = [  # as compare_schemes writes them: rules delivered all 24 orders by step 140
        {"scheme": "rules", "delivered": 24, "steps": 140, "step_limit": 300},
        {"scheme": "llm_only", "delivered": 0, "steps": 30, "step_limit": 30},
    ]
    plot_comparison(rows, tmp_path / "compare.png")
    (fig,) = made
    delivered = fig.axes[0]
    assert delivered.get_title() == "orders delivered"
    assert [t.get_text() for t in delivered.get_xticklabels()] == [
        "rules", "llm_only (capped at 30 of 300 steps)",
    ]  # fmt: skip
    for ax in fig.axes:  # in every panel, the capped bar alone is hatched
        assert [bar.get_hatch() for bar in ax.patches] == [None, "//"], ax.get_title()
    assert [t.get_text() for t in fig.texts] == [
        "Schemes on one seeded order stream",
        "Hatched: llm_only ran fewer steps than the other schemes (capped, --llm-only-steps); "
        "its counts cover only the steps it ran.",
    ]
    assert (tmp_path / "compare.png").is_file() and not list(tmp_path.glob("*.tmp"))


def test_llm_only_progress_line_and_table_give_one_llm_call_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The progress line said the planner's calls only (the trace's), the table also the move
    # executor's: "LLM calls 2" above a row of 8. Both now give every call the model got.
    import marlm.experiments.compare as compare
    from faultserver import DownModel

    model = DownModel()  # fault injector: every call fails at once, each one counted
    monkeypatch.setattr(compare, "make_backend", lambda *a, **k: model)
    lines: list[str] = []
    config = CompareConfig.of(steps=300, schemes=["llm_only"], llm_only_steps=6, spread_seeds=0)
    result = compare_schemes(config, tmp_path, progress=lines.append)
    (row,) = result["rows"]
    said = [line for line in lines if line.startswith("  llm_only:")]
    assert row["llm_calls"] == model.calls == 7  # 1 planner call (then its fallback), 6 moves
    assert len(said) == 1 and f"LLM calls {model.calls}," in said[0], said


@pytest.mark.parametrize("bad", [1, -1])
def test_a_spread_of_one_seed_is_refused_with_the_fix(bad: int) -> None:
    # --spread-seeds 1 ran no other seed and left the spread column a silent "—".
    with pytest.raises(InputError) as e:
        CompareConfig.of(schemes=["rules"], spread_seeds=bad)
    assert str(e.value) == (
        "field '--spread-seeds': must be a whole number >= 2 (a spread needs 2 seeds, the "
        f"table's and one more), or 0 for none, got {bad}; pass e.g. --spread-seeds 5, or 0 "
        "for none"
    )


def test_a_spread_of_two_seeds_runs_one_more_seed_and_zero_none(tmp_path: Path) -> None:
    for n, spread in ((2, "24.0±0.0"), (0, None)):
        config = CompareConfig.of(steps=150, schemes=["rules"], spread_seeds=n)
        (row,) = compare_schemes(config, tmp_path / str(n))["rows"]
        assert row.get("delivered_spread") == spread
        seeds = sorted(p.name for p in (tmp_path / str(n) / "spread").glob("*"))
        assert seeds == (["rules-seed2"] if n else [])
