"""The model as a reward function: state text in, a score in {-1, 0, 1} out.

:class:`LLMReward` asks the model to rate a state against a task, with anchors in the prompt that
say what each level means, and decodes the answer under a JSON schema (``{"score": -1 | 0 | 1}``).
It takes ``k`` samples that can actually differ, either paraphrased prompts (default, greedy) or a
small temperature with a different seed per sample (at temperature 0 every sample is the same
greedy decode whatever the seed, so a disagreement check would never fire; that configuration is
rejected). The majority score is returned unless the samples disagree more than ``max_disagreement``
(the fraction of valid samples that differ from the majority), in which case the previous reward is
returned. When no sample parses, the previous reward is returned (0 at the start). The result is
always a finite ``float`` clipped to ``clip``.

Verdicts are cached by state text (``None`` for "no verdict"), so a tabular task costs at most one
evaluation (``k`` model calls) per distinct state. Counters: :attr:`LLMReward.calls` (model calls),
:attr:`LLMReward.cache_hits`, :attr:`LLMReward.evaluations`, :attr:`LLMReward.parse_failures`,
:attr:`LLMReward.disagreements`.

Idea after "Reward Design with Language Models" (Kwon et al., ICLR 2023): an LLM as a proxy
reward from a textual description of the desired behaviour.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from typing import Any

from marlm.errors import InputError

from .actions import find_json_objects, validate_json
from .backends import ChatModel

SCORE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"score": {"enum": [-1, 0, 1]}},
    "required": ["score"],
    "additionalProperties": False,
}

DEFAULT_ANCHORS: dict[int, str] = {
    -1: "the state is worse for the task: moved away from the goal, hit an obstacle, or wasted a step",
    0: "neutral: no clear progress either way",
    1: "the state is better for the task: closer to the goal, or the goal is reached",
}

PARAPHRASES: tuple[str, ...] = (
    "Task: {task}\nState: {state}\nScore the state for the task.\n{anchors}",
    "Here is the current state of an agent.\n{state}\nThe agent's task: {task}\n"
    "How good is this state for the task?\n{anchors}",
    "Rate how well this situation serves the goal '{task}'.\nSituation: {state}\n{anchors}",
)

SYSTEM_PROMPT = 'You grade states. Answer with one JSON object {"score": -1 | 0 | 1}.'


class LLMReward:
    """A reward function backed by a chat model; see the module docstring.

    Args:
        model: any :class:`ChatModel`.
        task: what the agent should achieve, in words.
        anchors: score -> meaning, for -1, 0 and 1.
        k: samples per evaluation (>= 1).
        paraphrase: sample i uses paraphrase ``i % 3`` of the prompt.
        temperature: sampling temperature; must be > 0 when ``k > 1`` and not ``paraphrase``.
        seed: sample i uses seed ``seed + i``.
        max_disagreement: fraction in [0, 1]; more disagreement returns the previous reward.
        clip: ``(low, high)`` bounds of the returned reward.
        max_tokens: bound on each answer.

    Raises:
        InputError: a parameter out of range, or identical samples requested (see above).
    """

    def __init__(
        self,
        model: ChatModel,
        task: str,
        *,
        anchors: Mapping[int, str] | None = None,
        k: int = 3,
        paraphrase: bool = True,
        temperature: float = 0.0,
        seed: int = 0,
        max_disagreement: float = 1 / 3,
        clip: tuple[float, float] = (-1.0, 1.0),
        max_tokens: int = 12,
    ) -> None:
        if not isinstance(k, int) or k < 1:
            raise InputError(f"must be an integer >= 1, got {k!r}", field="k")
        if k > 1 and not paraphrase and not temperature > 0:
            raise InputError(
                "with k > 1 samples and no paraphrasing, temperature must be > 0: at temperature 0 "
                "every sample is the same greedy decode whatever the seed",
                field="temperature",
            )
        if not 0.0 <= max_disagreement <= 1.0:
            raise InputError(f"must be in [0, 1], got {max_disagreement}", field="max_disagreement")
        low, high = clip
        if not (math.isfinite(low) and math.isfinite(high) and low <= high):
            raise InputError(
                f"must be finite (low, high) with low <= high, got {clip}", field="clip"
            )
        anchors = dict(DEFAULT_ANCHORS if anchors is None else anchors)
        if sorted(anchors) != [-1, 0, 1]:
            raise InputError(
                f"must give a meaning for -1, 0 and 1, got {sorted(anchors)}", field="anchors"
            )
        self.model = model
        self.task = task
        self.anchors = anchors
        self.k = k
        self.paraphrase = paraphrase
        self.temperature = float(temperature)
        self.seed = seed
        self.max_disagreement = max_disagreement
        self.clip = (float(low), float(high))
        self.max_tokens = max_tokens
        self.previous = 0.0
        self.calls = 0
        self.cache_hits = 0
        self.evaluations = 0
        self.parse_failures = 0
        self.disagreements = 0
        self._cache: dict[str, float | None] = {}

    def prompts(self, state_text: str) -> list[list[dict[str, str]]]:
        """The ``k`` message lists for one state."""
        anchors = "\n".join(f"{s}: {self.anchors[s]}" for s in (-1, 0, 1))
        out = []
        for i in range(self.k):
            template = PARAPHRASES[i % len(PARAPHRASES)] if self.paraphrase else PARAPHRASES[0]
            user = template.format(task=self.task, state=state_text, anchors=anchors)
            out.append(
                [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]
            )
        return out

    def reset(self) -> None:
        """Start of an episode: the previous reward becomes 0 (the cache is kept)."""
        self.previous = 0.0

    def __call__(self, state_text: str) -> float:
        """Reward of ``state_text``: a finite float in ``clip``; never raises for model output.

        Raises:
            BackendError: the backend itself failed (not the model's answer).
        """
        if state_text in self._cache:
            self.cache_hits += 1
            verdict = self._cache[state_text]
        else:
            verdict = self._evaluate(state_text)
            self._cache[state_text] = verdict
        value = self.previous if verdict is None else verdict
        low, high = self.clip
        value = min(max(float(value), low), high) if math.isfinite(value) else 0.0
        self.previous = value
        return value

    def _evaluate(self, state_text: str) -> float | None:
        """``k`` samples -> majority score, or ``None`` (parse failure or disagreement)."""
        self.evaluations += 1
        scores: list[int] = []
        for i, messages in enumerate(self.prompts(state_text)):
            r = self.model.chat(
                messages,
                schema=SCORE_SCHEMA,
                max_tokens=self.max_tokens,
                temperature=self.temperature,
                seed=self.seed + i,
            )
            self.calls += 1
            score = parse_score(r.text)
            if score is not None:
                scores.append(score)
        if not scores:
            self.parse_failures += 1
            return None
        counts = Counter(scores)
        best, n_best = sorted(counts.items(), key=lambda kv: (-kv[1], abs(kv[0]), kv[0]))[0]
        disagreement = (len(scores) - n_best) / len(scores)
        if disagreement > self.max_disagreement + 1e-9:  # 1/3 must not exceed 1/3 by rounding
            self.disagreements += 1
            return None
        return float(best)

    def stats(self) -> dict[str, int]:
        """Counters under fixed names (``llm/reward_calls``, ``llm/reward_cache_hits``, ...)."""
        return {
            "llm/reward_samples": self.k,  # model calls per evaluation: calls <= k * evaluations
            "llm/reward_calls": self.calls,
            "llm/reward_cache_hits": self.cache_hits,
            "llm/reward_evaluations": self.evaluations,
            "llm/reward_parse_failures": self.parse_failures,
            "llm/reward_disagreements": self.disagreements,
        }


def parse_score(text: str) -> int | None:
    """The score in one answer, or ``None`` unless it holds exactly one valid ``{"score": s}``."""
    objects, _ = find_json_objects(text)
    if len(objects) != 1 or validate_json(objects[0][1], SCORE_SCHEMA):
        return None
    value = objects[0][1]["score"]
    return int(value) if not isinstance(value, bool) else None
