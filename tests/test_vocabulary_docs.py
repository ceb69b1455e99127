"""Every enumeration that docs/trace-schema.md and docs/metrics.md list, compared with the code
both ways: a value the docs name that the code does not have fails, and so does a value the code
has that the docs do not name. The pages are read as their reader sees them: the backticked
values in a table cell, the bold required fields, the ``###`` event sections."""

from __future__ import annotations

import dataclasses
import enum
import re
from pathlib import Path
from typing import get_args

import pytest

from marlm import outcomes
from marlm.eval import metrics
from marlm.eval.metrics import REAL_PLAN_SOURCES, summarise
from marlm.eval.records import RECORD_TYPES
from marlm.eval.trace import EVENT_FIELDS

DOCS = Path(__file__).resolve().parents[1] / "docs"
SCHEMA = (DOCS / "trace-schema.md").read_text(encoding="utf-8")
METRICS = (DOCS / "metrics.md").read_text(encoding="utf-8")

#: A value as the pages write one: a backticked word of lower-case letters, digits, ``_``, ``-``.
VALUE = re.compile(r"^[a-z][a-z0-9_-]*$")


def section(text: str, heading: str) -> str:
    """The text under the first heading that starts with ``heading`` (``### `plan```), up to the
    next heading of the same or a higher level."""
    level = heading.split(" ", 1)[0]
    start = text.index("\n" + heading) + 1
    body = text[start:].split("\n", 1)[1]
    stop = re.search(rf"^#{{1,{len(level)}}} ", body, flags=re.M)
    return body[: stop.start()] if stop else body


def rows(text: str) -> list[list[str]]:
    """The cells of every table row in ``text`` (header and rule lines left out)."""
    out = []
    for line in text.splitlines():
        if line.startswith("|") and not set(line) <= set("|-: "):
            out.append([c.strip() for c in line.strip().strip("|").split("|")])
    return [r for r in out if r[0] not in ("field", "key", "`failure.kind`")]


def values(cell: str) -> set[str]:
    """The backticked values of a cell."""
    return {v for v in re.findall(r"`([^`]+)`", cell) if VALUE.match(v)}


def field_row(event: str, name: str) -> list[str]:
    (row,) = [r for r in rows(section(SCHEMA, f"### `{event}`")) if r[0].strip("*") == f"`{name}`"]
    return row


def codes(enum_type: type) -> set[str]:
    return {str(m) for m in enum_type}


#: (event, field) of docs/trace-schema.md -> the enumeration of marlm.outcomes it takes.
SCHEMA_ENUMS = {
    ("order", "event"): outcomes.OrderEvent,
    ("llm_call", "call"): outcomes.CallKind,
    ("llm_call", "status"): outcomes.CallStatus,
    ("plan", "source"): outcomes.PlanSource,
    ("plan", "outcome"): outcomes.PlanOutcome,
    ("failure", "kind"): outcomes.FailureKind,
    ("run_end", "reason"): outcomes.RunEndReason,
}


@pytest.mark.parametrize("where", sorted(SCHEMA_ENUMS), ids=lambda w: ".".join(w))
def test_each_enumerated_trace_field_lists_exactly_the_codes_values(where):
    event, name = where
    enum_type = SCHEMA_ENUMS[where]
    row = field_row(event, name)
    assert values(row[2]) == codes(enum_type)
    assert f"`{enum_type.__name__}`" in row[2]  # the page names the enumeration it lists


def test_every_enumeration_of_the_vocabulary_is_listed_in_the_docs():
    enums = {
        v
        for v in vars(outcomes).values()
        if isinstance(v, type) and issubclass(v, enum.Enum) and v.__module__ == outcomes.__name__
    }
    assert enums == set(SCHEMA_ENUMS.values()) | {outcomes.IdleCause}


def test_the_idle_event_has_one_field_per_idle_cause():
    table = rows(section(SCHEMA, "### `idle`"))
    causes = {r[0].strip("*").strip("`") for r in table} - {"step"}
    assert causes == codes(outcomes.IdleCause)
    assert "`IdleCause`" in section(SCHEMA, "### `idle`")


def test_event_sections_are_the_event_types_the_reader_and_the_records_know():
    documented = set(re.findall(r"^### `(\w+)`", SCHEMA, flags=re.M))
    assert documented == set(EVENT_FIELDS) == set(RECORD_TYPES)


@pytest.mark.parametrize("event", sorted(EVENT_FIELDS))
def test_documented_fields_are_the_record_fields_and_bold_ones_are_required(event):
    table = rows(section(SCHEMA, f"### `{event}`"))
    documented = {r[0].strip("*").strip("`") for r in table}
    required = {r[0].strip("*").strip("`") for r in table if r[0].startswith("**")}
    written = {f.name for cls in RECORD_TYPES[event] for f in dataclasses.fields(cls)}
    assert documented == written
    assert required == set(EVENT_FIELDS[event])


def test_run_start_names_the_seed_keys_and_the_planner_names_the_code_writes():
    from marlm.hybrid.controller import RunConfig, _run_start, make_env
    from marlm.hybrid.planning.planner import PlannerName, RulePlanner

    seeds_cell = field_row("run_start", "seeds")[2]
    documented = set(re.findall(r'"(\w+)":', seeds_cell))
    config = RunConfig(gif=False)
    assert documented == set(_run_start(config, make_env(config), RulePlanner())["seeds"])
    # A planner's name in the trace: --planner's values, with "triage" written as its mode.
    # ``--planner triage`` is written as the mode it selects, ``triage-probe``.
    names = set(get_args(PlannerName)) - {"triage"}
    assert values(field_row("run_start", "planner")[2]) == names


def test_priorities_are_the_environments():
    from marlm.envs.warehouse.orders import PRIORITY_RANK

    assert values(field_row("order", "priority")[2]) == set(PRIORITY_RANK)


# --- docs/metrics.md ---------------------------------------------------------------------------


def expand(key: str) -> list[str]:
    """``step_latency_{mean,p50}_ms`` -> ``step_latency_mean_ms``, ``step_latency_p50_ms``."""
    m = re.fullmatch(r"(.*)\{([^}]*)\}(.*)", key)
    return [m[1] + part + m[3] for part in m[2].split(",")] if m else [key]


def test_metric_keys_are_the_keys_summarise_returns():
    documented: set[str] = set()
    for heading in ("## Work done", "## Safety", "## Latency", "## LLM use", "## Who decided"):
        for row in rows(section(METRICS, heading)):
            for key in re.findall(r"`([^`]+)`", row[0]):
                documented.update(expand(key))
    summary = re.search(r"Summary keys: (.*?)\n\n", METRICS, flags=re.S)[1]
    documented |= values(summary)
    keys = set(summarise([{"type": "step", "step": 0, "actions": [0]}]))
    assert documented == keys


def test_plan_outcomes_in_who_decided_are_the_enumerations():
    text = section(METRICS, "## Who decided")
    listed = re.search(r"one of\s+`PlanOutcome`:(.*?)\. A trace", text, flags=re.S)[1]
    assert values(listed) == codes(outcomes.PlanOutcome)


def test_recovery_kinds_and_which_wait_for_the_planner_are_the_codes():
    table = rows(section(METRICS, "## Recovery cost"))
    kinds = {r[0].strip("`"): r[2] for r in table if len(r) == 3 and r[2] in ("yes", "no")}
    assert set(kinds) == codes(outcomes.FailureKind)
    waits = {k for k, w in kinds.items() if w == "yes"}
    assert waits == set(outcomes.LLM_SIDE_FAILURES)
    # Condition 1: the sources of a plan that ends an LLM-side failure.
    cond = section(METRICS, "## Recovery cost").split("1. *the plan in force", 1)[1]
    sources = re.search(r"\(`plan\.source` is `(\w+)` or `(\w+)`", cond)
    assert set(sources.groups()) == set(REAL_PLAN_SOURCES)


def test_call_statuses_in_llm_use_are_the_enumerations():
    table = rows(section(METRICS, "## LLM use"))
    (invalid,) = [r for r in table if r[0] == "`llm_invalid`"]
    (unanswered,) = [r for r in table if r[0] == "`llm_unanswered`"]
    # The answered, the invalid and the unanswered calls split the statuses, as the code does.
    invalid_codes = values(invalid[1].split("status` is", 1)[1])
    unanswered_codes = values(unanswered[1].split("status` is", 1)[1].split(")", 1)[0])
    assert invalid_codes == set(metrics.INVALID)
    assert unanswered_codes == set(metrics.UNANSWERED)
    assert not invalid_codes & unanswered_codes
    assert invalid_codes | unanswered_codes | {"answered"} == codes(outcomes.CallStatus)
