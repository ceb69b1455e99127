"""The triage pool and what ``marlm eval triage`` prints name files that are in the repository."""

from __future__ import annotations

import re
from pathlib import Path

import marlm
from marlm.llm.triage import default_pool_path, dev_notes_path, load_labelled_notes
from marlm.llm.triage_eval import evaluate_triage

DATA = default_pool_path().parent
SRC = Path(marlm.__file__).parent.parent  # src/ in the repository


def test_every_pool_source_is_a_file_beside_the_pool() -> None:
    pool = load_labelled_notes(default_pool_path())
    counts: dict[str, int] = {}
    for x in pool:
        counts[x.source] = counts.get(x.source, 0) + 1
    assert counts == {
        "order_notes_dev.jsonl": 40, "examples.jsonl": 27, "written.jsonl": 202,
        "written_negation.jsonl": 33,
    }  # fmt: skip
    for source in counts:
        assert (DATA / source).is_file(), source
    # the development notes are the in-repository copy, line for line
    dev = load_labelled_notes(dev_notes_path())
    assert [(x.id, x.note, x.label) for x in pool[:40]] == [(x.id, x.note, x.label) for x in dev]


def test_the_data_readme_names_only_files_in_the_repository() -> None:
    text = (DATA / "README.md").read_text(encoding="utf-8")
    assert "shared/" not in text
    named = set(re.findall(r"`([\w./-]+\.jsonl)`", text))
    assert "src/marlm/data/triage/order_notes_dev.jsonl" in named
    for name in named:
        where = SRC.parent / name if name.startswith("src/") else DATA / name
        assert where.is_file(), name


def test_eval_triage_prints_the_shipped_pools_path_and_its_sources(
    embedded_model, tmp_path: Path
) -> None:
    from marlm.experiments.triage_accuracy import triage_eval_lines

    dev = load_labelled_notes(dev_notes_path())  # test notes are held out of the pool
    notes = [next(x for x in dev if x.label == c) for c in ("urgent", "normal")]
    result = evaluate_triage(notes, embedded_model, "generate", per_class=1, cache_dir=tmp_path)
    assert result["pool"]["file"] == str(default_pool_path())
    assert result["pool"]["by_source"] == {
        "order_notes_dev.jsonl": 38, "examples.jsonl": 27, "written.jsonl": 202,
        "written_negation.jsonl": 33,
    }  # fmt: skip
    line = next(x for x in triage_eval_lines(result) if x.startswith("protocol:"))
    assert line.endswith(
        f"pool: {default_pool_path()} (38 from order_notes_dev.jsonl, 27 from examples.jsonl, "
        "202 from written.jsonl, 33 from written_negation.jsonl)"
    )
    assert "shared/" not in line
