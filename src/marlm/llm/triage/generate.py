"""``generate``: the model writes ``{"urgency": "<class>"}`` under a JSON schema whose enum is
the class set (the path for capable chat servers, and the score modes' fallback)."""

from __future__ import annotations

from ..errors import BackendError
from .decision import TriageDecision
from .mode import Mode
from .prompts import answer_schema, parse_answer, render_messages


class GenerateMode(Mode):
    """The few-shot examples as earlier chat turns, the answer as JSON under a schema
    (:func:`render_messages`, :func:`answer_schema`), validated by :func:`parse_answer`."""

    name = "generate"

    def decide(self, text: str, fb: str, truncated: bool) -> TriageDecision:
        """Ask for ``{"urgency": <class>}`` under the answer schema; validate the answer."""
        examples = self.pool.examples_for(text)
        messages = render_messages(text, examples, self.classes)
        t0 = self.clock()
        try:
            result = self.model.chat(
                messages,
                schema=answer_schema(self.classes),
                max_tokens=self.max_tokens,
                temperature=0.0,
            )
        except BackendError as e:
            return TriageDecision(
                fb,
                "fallback",
                "generate",
                reason=f"backend error: {e}",
                failure="backend_error",
                truncated=truncated,
                latency_s=self.clock() - t0,  # a timed-out call counts its real time
            )
        latency = self.clock() - t0
        self.stats.model_calls += 1
        self.stats.latencies_s.append(latency)
        try:
            label = parse_answer(result.text, self.classes)
        except ValueError as e:
            return TriageDecision(
                fb,
                "fallback",
                "generate",
                reason=f"invalid answer: {e}",
                failure="invalid_answer",
                latency_s=latency,
                prompt_tokens=result.prompt_tokens,
                completion_tokens=result.completion_tokens,
                truncated=truncated,
            )
        return TriageDecision(
            label,
            "model",
            "generate",
            latency_s=latency,
            prompt_tokens=result.prompt_tokens,
            completion_tokens=result.completion_tokens,
            truncated=truncated,
            examples=tuple(e.id for e in examples),
        )


__all__ = ["GenerateMode"]
