"""LLMReward: anchors, samples that differ, fallbacks, clipping, cache counters."""

from __future__ import annotations

import math

import pytest

from marlm.errors import InputError
from marlm.llm.reward import DEFAULT_ANCHORS, SCORE_SCHEMA, LLMReward


def scores(*values):
    return [f'{{"score": {v}}}' if isinstance(v, int) else v for v in values]


def test_majority_of_k_and_prompts_differ(scripted):
    model = scripted(scores(1, 1, 0))
    reward = LLMReward(model, "reach the goal", k=3)
    assert reward("agent at (3, 3), goal at (3, 3)") == 1.0
    prompts = [m[-1]["content"] for m in model.received]
    assert len(set(prompts)) == 3  # paraphrases: the samples can differ
    for p in prompts:
        for text in DEFAULT_ANCHORS.values():
            assert text in p
    assert [k["seed"] for k in model.kwargs] == [0, 1, 2]
    assert model.schemas[0]["properties"]["score"] == {"enum": [-1, 0, 1]}


def test_disagreement_returns_previous_reward(scripted):
    model = scripted(scores(1, 1, 1, -1, 0, 1))
    reward = LLMReward(model, "goal", k=3)
    assert reward("s1") == 1.0
    assert reward("s2") == 1.0  # -1, 0, 1: disagreement 2/3 > 1/3 -> previous
    assert reward.disagreements == 1


def test_parse_failure_returns_previous_or_zero(scripted):
    model = scripted(["no idea", '{"score": 5}', "{'score': 1}"] + scores(-1, -1, -1) + ["?"] * 3)
    reward = LLMReward(model, "goal", k=3)
    assert reward("s1") == 0.0  # nothing parsed at the start -> 0
    assert reward("s2") == -1.0
    assert reward("s3") == -1.0  # nothing parsed -> previous
    assert reward.parse_failures == 2


def test_cache_by_state_text_counts_calls_and_hits(scripted):
    model = scripted(scores(1, 1, 1, 0, 0, 0))
    reward = LLMReward(model, "goal", k=3)
    values = [reward(s) for s in ["a", "b", "a", "a", "b"]]
    assert values == [1.0, 0.0, 1.0, 1.0, 0.0]
    assert (reward.calls, reward.cache_hits, reward.evaluations) == (6, 3, 2)
    assert reward.stats()["llm/reward_cache_hits"] == 3


def test_clip_and_always_finite_float(scripted):
    reward = LLMReward(scripted(scores(1)), "goal", k=1, clip=(-0.5, 0.5))
    v = reward("s")
    assert v == 0.5 and isinstance(v, float) and math.isfinite(v)


def test_identical_samples_are_refused(scripted):
    with pytest.raises(InputError, match="temperature"):
        LLMReward(scripted([]), "goal", k=3, paraphrase=False, temperature=0.0)
    r = LLMReward(scripted(scores(0, 0)), "goal", k=2, paraphrase=False, temperature=0.7, seed=5)
    r("s")
    assert r.temperature == 0.7


def test_real_model_reward_is_discrete_and_cached(embedded_model):
    reward = LLMReward(embedded_model, "move the agent to the goal cell", k=3, max_tokens=10)
    v = reward("agent at (0, 0), goal at (3, 3), the agent just moved away from the goal")
    assert v in (-1.0, 0.0, 1.0)
    assert reward.calls == 3 and reward.parse_failures == 0  # the grammar makes every answer parse
    assert reward("agent at (0, 0), goal at (3, 3), the agent just moved away from the goal") == v
    assert (reward.calls, reward.cache_hits) == (3, 1)


def test_real_model_samples_differ_only_with_temperature(embedded_model):
    # why the reward refuses k samples at temperature 0: every seed gives the same greedy decode;
    # with temperature > 0, different seeds give different samples
    reward = LLMReward(embedded_model, "reach the goal", k=1)
    messages = reward.prompts("agent at (1, 0), goal at (3, 3)")[0]

    def texts(temperature, seeds):
        return [
            embedded_model.chat(
                messages, schema=SCORE_SCHEMA, max_tokens=10, temperature=temperature, seed=s
            ).text
            for s in seeds
        ]

    assert len(set(texts(0.0, [0, 1, 2]))) == 1
    assert len(set(texts(1.5, range(6)))) > 1
