"""A fault injector standing in for :class:`marlm.llm.triage.Triage` in planner tests."""

from __future__ import annotations

from marlm.llm.triage import TriageDecision


class FixedTriage:
    """Answers each note from ``table`` (source ``model``; a note not in it gets its fallback),
    or raises ``error`` on every call. ``asked`` lists the notes in the order they were asked."""

    mode = "fixed"
    prompt_version = "fixed-v0"

    def __init__(self, table: dict[str, str] | None = None, error: Exception | None = None):
        self.table, self.error, self.asked = table or {}, error, []

    def classify(self, note: str, fallback: str | None = None) -> TriageDecision:
        self.asked.append(note)
        if self.error:
            raise self.error
        return TriageDecision(self.table.get(note, fallback), "model", "fixed")

    def classify_many(self, notes, fallbacks) -> list[TriageDecision]:
        return [self.classify(n, fallback=f) for n, f in zip(notes, fallbacks, strict=True)]

    def without(self, texts) -> FixedTriage:
        """The same table: a fixed table has no labelled pool to take ``texts`` out of
        (``Triage.without``'s contract)."""
        return self
