"""A user's order file with a ``label`` per line: the demo's figures by those labels, and the
model's reading (notes read in time) on the real embedded model."""

from __future__ import annotations

import json

import pytest

from cli_run import run_main

pytestmark = pytest.mark.timeout(1200)

NOTES = [
    ("The line is down until this part arrives, rush it.", "urgent"),
    ("Monthly restock, no hurry at all.", "normal"),
    ("病人在等这批药，马上送。", "urgent"),
    ("例行补货，下周也可以。", "normal"),
    ("Routine transfer to the other depot.", "normal"),
    ("Customer at the counter waiting, needed now.", "urgent"),
]


def _orders(path, label=True):
    shelves = ["S3-2", "S3-5", "S4-8", "S4-2", "S3-2", "S4-9"]
    lines = []
    for k, ((note, lab), shelf) in enumerate(zip(NOTES, shelves, strict=True)):
        line = {"id": f"o{k}", "shelf": shelf, "priority": "normal", "arrival": 4 * k,
                "deadline": 4 * k + 150, "note": note}  # fmt: skip
        if label:
            line["label"] = lab
        lines.append(line)
    path.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines), "utf-8")
    return path


def test_a_labelled_order_file_gives_latency_and_readings_by_its_labels(tmp_path, capsys):
    orders = _orders(tmp_path / "orders.jsonl")
    out = tmp_path / "run"
    code, err = run_main(
        ["demo", "--orders", str(orders), "--executor", "greedy", "--sync", "--tick-ms", "0",
         "--steps", "300", "--no-gif", "--out", str(out)], capsys,
    )  # fmt: skip
    assert code == 0, err
    m = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    assert m["true_class_source"] == "the order's label"
    assert m["true_class"] == {f"o{k}": lab for k, (_, lab) in enumerate(NOTES)}
    assert m["by_true_class"]["delivered_by_class"] == {"urgent": 3, "normal": 3}
    r = m["reading"]
    # --sync: each plan reads its notes first, so every class is applied by the assignment.
    assert r["read_in_time"] == {"orders": 6, "in_time": 6, "share": 1.0}
    assert r["read_in_time_by_true_class"]["urgent"] == {"orders": 3, "in_time": 3, "share": 1.0}
    assert r["model_read"] == 6
    assert r["unread_backlog"]["max"] == 0
    assert set(m["counterfactual_rule"]["latency_mean_steps"]) == {"urgent", "normal"}
    assert "fell behind" not in capsys.readouterr().out


def test_a_label_outside_the_classes_is_one_line_exit_2(tmp_path, capsys):
    orders = _orders(tmp_path / "orders.jsonl")
    text = orders.read_text(encoding="utf-8").replace('"label": "urgent"', '"label": "asap"', 1)
    orders.write_text(text, encoding="utf-8")
    code, err = run_main(
        ["demo", "--orders", str(orders), "--planner", "rule", "--sync", "--tick-ms", "0",
         "--out", str(tmp_path / "run")], capsys,
    )  # fmt: skip
    assert code == 2 and f"{orders}:1: field 'label': 'asap' is not urgent, normal" in err
    assert "Traceback" not in err


def test_an_order_line_error_names_the_users_file_not_its_copy(tmp_path, capsys):
    orders = _orders(tmp_path / "orders.jsonl")
    orders.write_text(orders.read_text("utf-8").replace("S4-8", "S9-9"), encoding="utf-8")
    code, err = run_main(
        ["demo", "--orders", str(orders), "--planner", "rule", "--sync", "--tick-ms", "0",
         "--out", str(tmp_path / "run")], capsys,
    )  # fmt: skip
    assert code == 2 and err.startswith(f"marlm: error: {orders}:3: field 'shelf'"), err
