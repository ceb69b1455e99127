"""Urgency triage accuracy on labelled notes (``marlm eval triage``).

:class:`TriageEvalConfig` holds the settings, checked when made; :func:`run_triage_eval` loads the
notes and the backend and measures a mode with :func:`marlm.llm.triage_eval.evaluate_triage`
(never tuned on the notes it scores); :func:`triage_eval_lines` formats the result.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from marlm.errors import InputError


@dataclass(frozen=True)
class TriageEvalConfig:
    """The settings of one triage evaluation.

    Attributes:
        notes: JSONL of labelled notes (id, note, priority, lang).
        mode: ``generate``, ``score``, ``calibrated``, ``batch`` or ``probe`` (the demo's).
        llm, llm_model, llm_timeout_s: the backend (``--llm``), the model name sent to a server
            and the seconds one call may take.
        out: write the result as JSON here (a new file unless ``overwrite``); None: not written.
        examples: the labelled pool for few-shot examples and the batch prior (None: the
            shipped pool the demo uses).
        protocol: ``held-out`` or ``cross-validation``
            (:data:`marlm.llm.triage_eval.PROTOCOLS`).
        folds: k of the cross-validation (2 .. the number of notes; None: 5).
        select: ``balanced`` or ``similar`` few-shot examples.
        shots, per_class: similar examples per class and note (None: 2); balanced examples per
            class (>= 1; None: 4).
        seed: seed of the folds and the example draw.

    Raises:
        InputError: an order file given as ``notes`` or ``examples`` (:func:`refuse_order_file`),
            an unknown mode, protocol or selection, ``shots`` < 1, an option the
            evaluation would not read (``folds`` but with cross-validation, ``shots`` but with
            ``similar``, ``per_class`` but with ``balanced``), or an ``out`` file marlm may not
            replace, naming the option.
    """

    notes: Path
    mode: str = "probe"
    llm: str = "embedded"
    llm_model: str = "local"
    llm_timeout_s: float = 60.0
    out: Path | None = None
    overwrite: bool = False
    examples: Path | None = None
    protocol: str = "held-out"
    folds: int | None = None
    select: str = "balanced"
    shots: int | None = None
    per_class: int | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        for path, option in ((self.notes, "--notes"), (self.examples, "--examples")):
            if path is not None:  # before the classifiers' imports (about a CPU second, scipy)
                refuse_order_file(Path(path), option=option)
        from marlm.eval.outputs import check_output_file
        from marlm.llm.triage import MODES, SELECTIONS
        from marlm.llm.triage_eval import PROTOCOLS

        for option, value, allowed in (
            ("--mode", self.mode, MODES),
            ("--protocol", self.protocol, PROTOCOLS),
            ("--select", self.select, SELECTIONS),
        ):
            if value not in allowed:
                raise InputError(f"use one of {', '.join(allowed)}, got {value!r}", source=option)
        if self.shots is not None and self.shots < 1:
            raise InputError(f"must be 1 or more, got {self.shots}", source="--shots")
        for option, count, reader in (
            ("--folds", self.folds, ("--protocol", self.protocol, "cross-validation")),
            ("--shots", self.shots, ("--select", self.select, "similar")),
            ("--per-class", self.per_class, ("--select", self.select, "balanced")),
        ):
            if count is not None and reader[1] != reader[2]:
                raise InputError(
                    f"is read with {reader[0]} {reader[2]} only, so {reader[0]} {reader[1]} would "
                    f"ignore it; drop {option} {count}, or pass {reader[0]} {reader[2]}",
                    field=option,
                )
        if self.out is not None:
            check_output_file(self.out, kind="triage-eval", overwrite=self.overwrite)


#: The fields of an order (:mod:`marlm.envs.warehouse.orders`) that no labelled note carries.
ORDER_ONLY_FIELDS = ("shelf", "arrival", "deadline")


def refuse_order_file(path: Path, *, option: str) -> None:
    """Refuse an order file given as labelled notes: its lines carry ``id``, ``note`` and
    ``priority`` too, so :func:`marlm.llm.triage.load_labelled_notes` reads them, but an order's
    ``priority`` is what its sender set, not a label of the note's urgency (the demo's orders
    hide urgency in notes of ``normal`` orders). A file that cannot be read, or a line that is
    not a JSON object, is left to the notes' loader to refuse.

    Raises:
        InputError: naming the file, its first line with a field of :data:`ORDER_ONLY_FIELDS`,
            the field ``priority``, ``option`` and the fix.
    """
    import json

    try:
        lines = path.read_text(encoding="utf-8-sig").splitlines()
    except (OSError, UnicodeDecodeError):
        return
    for n, line in enumerate(lines, start=1):
        try:
            row = json.loads(line) if line.strip() else {}
        except json.JSONDecodeError:
            return
        found = [k for k in ORDER_ONLY_FIELDS if isinstance(row, dict) and k in row]
        if found:
            raise InputError(
                f"is an order file (its lines have {', '.join(found)}), and an order's priority "
                f"is its sender's, not a label of its note; give {option} a JSONL of labelled "
                "notes (id, note, priority, lang), e.g. src/marlm/data/triage/order_notes_dev.jsonl",
                source=path,
                line=n,
                field="priority",
            )


def run_triage_eval(config: TriageEvalConfig) -> dict[str, Any]:
    """Measure ``config.mode`` on ``config.notes``; write the result to ``config.out`` when set.

    Returns:
        The result of :func:`marlm.llm.triage_eval.evaluate_triage`, with ``warnings`` (the
        text of each warning raised while it ran), ``notes_file`` and, with ``examples``,
        ``pool.file``.

    Raises:
        InputError: an unreadable notes or pool file, notes of one class only, ``folds``
            outside 2 .. the number of notes (cross-validation), ``per_class`` < 1, a backend
            the factory refuses, a model that answered none of the notes (``--llm``; nothing
            is written).
    """
    from marlm.hybrid.build import cache_dir
    from marlm.llm.backends import make_backend
    from marlm.llm.triage import load_labelled_notes
    from marlm.llm.triage.pool import DEFAULT_SHOTS
    from marlm.llm.triage_eval import evaluate_triage, write_json

    c = config
    folds, per_class = 5 if c.folds is None else c.folds, 4 if c.per_class is None else c.per_class
    shots = DEFAULT_SHOTS if c.shots is None else c.shots
    labelled = load_labelled_notes(c.notes)
    labels = sorted({n.label for n in labelled})
    if len(labels) < 2:  # the classes measured are the notes' own: one class is no task
        raise InputError(
            f"every note is labelled {labels[0]!r}; an accuracy needs notes of two classes or "
            "more (the classes measured are the labels the notes hold), e.g. urgent and "
            "normal as in src/marlm/data/triage/order_notes_dev.jsonl",
            source=c.notes,
            field="priority",
        )
    pool = load_labelled_notes(c.examples) if c.examples is not None else None
    if c.protocol == "cross-validation" and not 2 <= folds <= len(labelled):
        raise InputError(
            f"must be between 2 and {len(labelled)} (the number of notes), got {folds}",
            source="--folds",
        )
    if per_class < 1:
        raise InputError(f"must be 1 or more, got {per_class}", source="--per-class")
    model = make_backend(c.llm, model=c.llm_model, timeout_s=c.llm_timeout_s)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = evaluate_triage(
            labelled, model, c.mode, examples=pool, protocol=c.protocol, folds=folds,
            select=c.select, shots=shots, per_class=per_class, seed=c.seed,
            cache_dir=cache_dir(),
        )  # fmt: skip
    if result["calls"]["fallbacks"] >= result["n_notes"] > 0:
        first = next((p["reason"] for p in result["predictions"] if p.get("reason")), None)
        other = "" if c.llm == "embedded" else ", or pass --llm embedded"
        raise InputError(
            f"the model answered none of the {result['n_notes']} notes (each fell back to its "
            f"listed priority{f'; the first: {first}' if first else ''}), so there is no "
            "accuracy of it to report; check that the model at this --llm answers (a server "
            "that is up, serving --llm-model), and that the prompt fits its context (fewer "
            f"few-shot examples: a smaller --per-class or --shots){other}",
            source="--llm",
        )
    result["warnings"] = [str(w.message) for w in caught]
    result["notes_file"] = str(c.notes)
    if c.examples is not None:
        result["pool"]["file"] = str(c.examples)
    if c.out is not None:
        write_json(result, c.out)
    return result


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def triage_eval_lines(r: dict[str, Any]) -> list[str]:
    """The result of :func:`run_triage_eval` as lines of text: mode, protocol and pool,
    accuracy against the always-majority baseline, urgent precision/recall/F1, the confusion
    matrix, latency and CPU time per note, and the calls made."""
    proto = r["protocol"] + (f" ({r['folds']} folds)" if r["folds"] else "")
    shots = (
        f"{r['shots']} similar examples per note"
        if r["select"] == "similar"
        else f"{r['per_class']} examples per class"
    )
    pool = ", ".join(f"{n} from {s}" for s, n in r["pool"]["by_source"].items())
    if r["pool"].get("file"):  # the sources are files beside it (the shipped pool's are)
        pool = f"{r['pool']['file']} ({pool})"
    classes = r["classes"]
    lines = [
        f"triage  mode={r['mode']}  modes used={','.join(r['modes_used'])}  model={r['model']}",
        f"protocol: {proto}; prompt {r['prompt_version']}; {shots}; pool: {pool}",
        f"accuracy {_pct(r['accuracy'])} on {r['n_notes']} notes "
        f"(always-majority baseline {_pct(r['majority_baseline_accuracy'])})",
        f"urgent: precision {_pct(r['urgent_precision'])}  recall {_pct(r['urgent_recall'])}  "
        f"F1 {_pct(r['urgent_f1'])}",
        "confusion (rows true, columns predicted):",
        "  " + " " * 8 + "".join(f"{c:>8}" for c in classes),
        *["  " + f"{t:<8}" + "".join(f"{r['confusion'][t][p]:>8}" for p in classes)
          for t in classes],
    ]  # fmt: skip
    lat = r["latency_ms"]
    if lat["mean"] is not None:
        lines.append(
            f"latency per note: mean {lat['mean']:.0f} ms, p95 {lat['p95']:.0f} ms, "
            f"max {lat['max']:.0f} ms"
        )
        cpu, load = r.get("cpu_ms") or {}, r.get("load_average")
        if cpu.get("p95") is not None:
            lines.append(
                f"CPU time per note (scoring thread): p50 {cpu['p50']:.0f} ms, p95 "
                f"{cpu['p95']:.0f} ms" + (f"; load average {load[0]:.1f}" if load else "")
            )
    c = r["calls"]
    lines.append(
        f"calls: {c['model']} model, {c['content_free']} content-free, {c['batch_prior']} "
        f"{'pool-embedding' if r['mode'] == 'probe' else 'batch-prior'}, "
        f"{c['cache_hits']} cache hits, {c['fallbacks']} fallbacks"
    )
    if r.get("truncated"):
        from marlm.llm.triage.notes import MAX_NOTE_CHARS

        lines.append(
            f"{r['truncated']} note(s) longer than {MAX_NOTE_CHARS} characters: each read as "
            "its beginning, cut with a mark (as the demo reads it)"
        )
    return lines


__all__ = ["TriageEvalConfig", "run_triage_eval", "triage_eval_lines"]
