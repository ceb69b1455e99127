"""Orders: shipped files, the seeded generator and bad order files (issue 2, section 5)."""

import json
from collections import Counter
from importlib import resources

import pytest

from marlm.envs.warehouse import Order, generate_orders, load_layout, load_notes, load_orders
from marlm.errors import InputError

SAMPLE = resources.files("marlm") / "data" / "orders" / "sample.jsonl"


@pytest.fixture(scope="module")
def small():
    return load_layout("small")


def _has_cjk(text: str) -> bool:
    return any("\u4e00" <= ch <= "\u9fff" for ch in text)


def test_shipped_sample_orders(small):
    orders = load_orders(SAMPLE, small)
    assert len(orders) >= 24
    assert set(Counter(o.priority for o in orders)) == {"urgent", "normal", "low"}
    assert any(_has_cjk(o.note) for o in orders) and any(not _has_cjk(o.note) for o in orders)
    assert max(o.arrival for o in orders) - min(o.arrival for o in orders) >= 300
    assert all(o.shelf in small.shelves for o in orders)  # "r,c" entries normalised to names
    urgent_words = ("immediately", "stops", "broken", "rush", "马上", "急")
    assert any(o.priority == "normal" and any(w in o.note for w in urgent_words) for o in orders)


def test_shipped_notes_cover_both_languages_and_tones():
    notes = load_notes()
    assert {n["lang"] for n in notes} == {"en", "zh"}
    assert {n["tone"] for n in notes} == {"urgent", "normal", "low"}


def test_generator_is_seeded(small):
    a = generate_orders(small, 30, seed=5, horizon=400)
    b = generate_orders(small, 30, seed=5, horizon=400)
    c = generate_orders(small, 30, seed=6, horizon=400)
    assert a == b and a != c
    assert [o.arrival for o in a] == sorted(o.arrival for o in a)
    assert all(0 <= o.arrival < 400 and o.deadline > o.arrival for o in a)
    assert len({o.id for o in a}) == 30
    assert all(o.shelf in small.shelves for o in a)


def test_order_is_frozen():
    order = Order(id="a", shelf="S3-2", priority="low", arrival=0, deadline=5)
    with pytest.raises(ValueError):
        order.arrival = 3


GOOD = {
    "id": "o1",
    "shelf": "S3-2",
    "priority": "normal",
    "arrival": 0,
    "deadline": 50,
    "note": "x",
}


def _line(**changes):
    obj = {**GOOD, **changes}
    return json.dumps({k: v for k, v in obj.items() if v is not None}, ensure_ascii=False)


BAD_ORDERS = [
    ("unknown_shelf", [_line(), _line(id="o2", shelf="S9-9")], 2, "shelf", "no shelf 'S9-9'"),
    ("bad_priority", [_line(priority="asap")], 1, "priority", "'asap'; use one of urgent"),
    ("duplicate_id", [_line(), _line(shelf="3,3")], 2, "id", "duplicate id 'o1'"),
    ("deadline_before", [_line(arrival=10, deadline=5)], 1, "deadline", "later than arrival"),
    ("deadline_equal", [_line(arrival=10, deadline=10)], 1, "deadline", "later than arrival"),
    ("missing_field", [_line(), _line(id="o2", deadline=None)], 2, "deadline", "missing"),
    ("unknown_field", [_line(deadine=3)], 1, "deadine", "unknown field"),
    ("bad_json", [_line(), '{"id": "o2", "shelf": '], 2, "json", "not valid JSON"),
    ("not_object", ["[1, 2]"], 1, "order", "JSON object"),
    ("negative_arrival", [_line(arrival=-1)], 1, "arrival", "greater than or equal to 0"),
]


@pytest.mark.parametrize(("name", "lines", "line", "field", "what"), BAD_ORDERS)
def test_bad_order_file_names_file_line_and_field(tmp_path, small, name, lines, line, field, what):
    path = tmp_path / f"{name}.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(InputError) as info:
        load_orders(path, small)
    message = str(info.value)
    assert message.startswith(f"{path}:{line}: field '{field}': "), message
    assert what in message
    assert "\n" not in message


def test_bytes_that_are_not_utf8_name_the_line_and_field(tmp_path, small):
    path = tmp_path / "latin1.jsonl"
    good = _line().encode() + b"\n\n"
    bad = _line(id="o2", note="caf\u00e9").encode("latin-1") + b"\n"
    path.write_bytes(good + bad)
    with pytest.raises(InputError) as info:
        load_orders(path, small)
    assert str(info.value).startswith(f"{path}:3: field 'note': bytes that are not UTF-8")


def test_blank_lines_are_skipped(tmp_path, small):
    path = tmp_path / "ok.jsonl"
    path.write_text("\n" + _line() + "\n\n" + _line(id="o2", shelf="3,3") + "\n", encoding="utf-8")
    orders = load_orders(path, small)
    assert [o.shelf for o in orders] == ["S3-2", "S3-3"]


ORDER = '"shelf": "S3-2", "priority": "normal", "arrival": 0, "deadline": 50'


@pytest.mark.parametrize(
    "second, field, code",
    [
        ('{"id": "o2", ' + ORDER + ', "note": "rush \\ud83d"}', "note", "\\ud83d at character 6"),
        ('{"id": "o2", ' + ORDER + ', "note": "\\ude9a ok"}', "note", "\\ude9a at character 1"),
        ('{"id": "o\\udfff", ' + ORDER + ', "note": "fine"}', "id", "\\udfff at character 2"),
    ],
)
def test_half_a_surrogate_pair_is_refused_at_the_door(tmp_path, small, second, field, code):
    # Valid JSON that no UTF-8 file can hold: it passed the loader, then crashed the trace writer.
    path = tmp_path / "orders.jsonl"
    path.write_text('{"id": "o1", ' + ORDER + "}\n" + second + "\n", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        load_orders(path, small)
    assert str(caught.value) == (
        f"{path}:2: field '{field}': holds half of a surrogate pair ({code}), which is not "
        "text; write the character itself, or both halves of its \\u escape pair"
    )


def test_a_whole_surrogate_pair_is_the_character(tmp_path, small):
    path = tmp_path / "orders.jsonl"
    order = '{"id": "o1", "shelf": "S3-2", "priority": "normal", "arrival": 0, "deadline": 50'
    path.write_text(order + ', "note": "truck \\ud83d\\ude9a"}\n', encoding="utf-8")
    (o,) = load_orders(path, small)
    assert o.note == "truck \U0001f69a"


def test_notes_with_half_a_pair_are_refused(tmp_path):
    path = tmp_path / "notes.jsonl"
    path.write_text('{"text": "ok", "tone": "normal"}\n\n{"text": "x\\udc80", "tone": "low"}\n')
    with pytest.raises(InputError, match=r"notes.jsonl:3: field 'text': holds half of a surrogate"):
        load_notes(path)
