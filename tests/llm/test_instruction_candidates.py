"""The instruction parser on hand-written English and Chinese notes: exact candidates."""

from __future__ import annotations

import json

import numpy as np
import pytest

from marlm.errors import InputError
from marlm.llm.triage.candidates import (
    cn_number,
    find_candidates,
    named_alone,
    normalise_order_id,
    parse_clock,
    parse_stations,
    same_order_id,
)
from marlm.llm.triage.instructions import (
    HELDOUT_SETS,
    Accuracy,
    InstructionReader,
    Instructions,
    candidate_labels,
    dev_set_path,
    heldout_set_path,
    instruction_schema,
    load_instruction_notes,
    parse_instruction_answer,
    shipped_heads_dir,
    urgency_from,
)

ST = parse_stations("A=dock A,B=dock B,C=cold chain")


def deadlines(note: str, time: str = "10:00") -> list[int]:
    return [int(c.value) for c in find_candidates(note, time, ST).deadline]


@pytest.mark.parametrize(
    ("note", "time", "want"),
    [
        ("Before the 11:00 truck", "10:20", [40]),
        ("within 30 minutes", "10:00", [30]),
        ("in half an hour please", "10:00", [30]),
        ("deliver in 2 hours", "10:00", [120]),
        ("by 3pm", "13:00", [120]),
        ("by 3:30 pm", "13:00", [150]),
        ("deliver by noon", "10:00", [120]),
        ("received at 09:10, deliver by 11:30", "09:00", [10, 150]),
        ("半小时内送到", "10:00", [30]),
        ("20分钟内", "10:00", [20]),
        ("11点半前", "10:00", [90]),
        ("十一点三十分前", "10:00", [90]),
        ("下午3点前", "13:00", [120]),
        ("四点一刻前送到", "15:45", [30]),
        ("一刻钟之内", "10:00", [15]),
        ("两个小时内", "10:00", [120]),
        ("by 00:15", "23:30", [45]),  # after midnight: the next day's
        ("no time in this note", "10:00", []),
    ],
)
def test_deadline_candidates_in_minutes_after_the_orders_clock(note, time, want):
    assert deadlines(note, time) == want


def test_order_ids_are_normalised_and_the_orders_own_id_is_no_candidate():
    c = find_candidates("ship with O-12, not o5; 和o 7一起", "10:00", ST, own_id="o05")
    assert [x.value for x in c.with_] == ["o12", "o7"]
    assert normalise_order_id("O-12") == "o12"
    assert same_order_id("o7", "o07") and not same_order_id("o7", "o17")


def test_stations_from_letters_descriptions_and_chinese_words():
    c = find_candidates("cold chain only, not dock B; 送到A口; 走冷链; station C", "10:00", ST)
    assert [(x.value, x.text) for x in c.station] == [
        ("C", "cold chain"), ("B", "dock B"), ("A", "A口"), ("C", "冷链"), ("C", "station C"),
    ]  # fmt: skip
    assert find_candidates("dock B", "10:00", {}).station == []  # no stations given: none
    # a lone capital letter without a station word is no station
    assert find_candidates("Plan A is fine", "10:00", ST).station == []


def test_cancel_cues_keep_what_follows_them():
    c = find_candidates("Cancel this... no wait, keep it. Dock B.", "10:00", ST)
    assert [x.text for x in c.cancel] == ["Cancel"]
    assert c.cancel[0].context.startswith("Cancel this... no wait, keep it")
    assert [x.text for x in find_candidates("客户取消了", "10:00", ST).cancel] == ["取消"]
    assert find_candidates("customer waiting", "10:00", ST).cancel == []


def test_clause_context_of_a_candidate():
    c = find_candidates("Received at 09:10. Deliver before the 11:00 truck, dock B", "09:00", ST)
    assert [x.context for x in c.deadline] == [
        "Received at 09:10",
        "Deliver before the 11:00 truck",
    ]


def test_chinese_numbers():
    assert [cn_number(x) for x in ("三十", "二十五", "十", "两", "45", "十二")] == [
        30,
        25,
        10,
        2,
        45,
        12,
    ]
    assert cn_number("百") is None


@pytest.mark.parametrize("bad", ["9.30", "25:00", "10:61", "", "noon"])
def test_a_bad_clock_time_names_the_field_and_the_fix(bad):
    with pytest.raises(InputError, match=r"field 'time'.*HH:MM"):
        parse_clock(bad)


def test_stations_option_errors():
    assert parse_stations("A,B") == {"A": "", "B": ""}
    with pytest.raises(InputError, match="--stations.*given twice"):
        parse_stations("A=x,A=y")
    with pytest.raises(InputError, match="not 1 to 3 capital letters"):
        parse_stations("1=dock")
    # lower-case ids and stations joined by another separator than a comma read no station at
    # all ("B口" is station B, never "b"; "A=dock A;B=dock B" was one station A)
    with pytest.raises(InputError, match="'a' is not 1 to 3 capital letters"):
        parse_stations("a=dock A,b=dock B")
    with pytest.raises(InputError, match="holds '='; separate stations with commas"):
        parse_stations("A=dock A;B=dock B")
    assert parse_stations("A=dock A,AB=dock AB") == {"A": "dock A", "AB": "dock AB"}


def test_the_schema_offers_only_candidates_and_answers_outside_them_are_refused():
    c = find_candidates("ship with o12 before 11:00", "10:00", ST)
    schema = instruction_schema(c)
    assert schema["properties"]["with"] == {"enum": ["o12", None]}
    assert schema["properties"]["deadline_min"] == {"enum": [60, None]}
    assert schema["properties"]["cancel"] == {"enum": [False]}
    ok = parse_instruction_answer(
        json.dumps({"urgency": "urgent", "cancel": False, "deadline_min": 60, "with": "o12",
                    "station": None}), c)  # fmt: skip
    assert ok == Instructions("urgent", False, 60, "o12", None)
    with pytest.raises(ValueError, match="not a candidate"):
        parse_instruction_answer(json.dumps({"urgency": "low", "cancel": False,
                                             "deadline_min": None, "with": "o99",
                                             "station": None}), c)  # fmt: skip


def test_candidate_labels_and_accuracy():
    c = find_candidates("received at 09:10, before the 11:00 truck, ship with o3", "09:00", ST)
    lab = {"urgency": "normal", "cancel": False, "deadline_min": 120, "with": "o3", "station": None}
    assert candidate_labels(c, lab) == {
        "cancel": [],
        "deadline": [0, 1],
        "with": [1],
        "station": [],
    }
    acc = Accuracy()
    assert acc.add({**lab, "deadline_min": 121}, lab) == []  # within a minute
    assert acc.add({**lab, "with": None}, lab) == ["with"]
    assert acc.rates()["all"] == 0.5


class FixedEmbedder:
    """Hidden states that are a hash of the text: a model that embeds, without a model."""

    name = "fixed"

    def embed(self, texts):
        out = []
        for t in texts:
            rng = np.random.default_rng(abs(hash(t)) % 2**32)
            out.append(rng.normal(size=8))
        return np.array(out)

    def chat(self, *a, **k):  # pragma: no cover - not asked in this test
        raise AssertionError


def test_the_reader_never_answers_a_value_no_candidate_holds():
    notes = load_instruction_notes(dev_set_path())[:60]
    reader = InstructionReader(FixedEmbedder(), ST, dev_notes=notes)
    for row in notes:
        r = reader.read(row["note"], row["time"], row["id"])
        c = r.candidates
        got = r.instructions
        assert got.deadline_min is None or got.deadline_min in c.values("deadline")
        assert got.with_ is None or got.with_ in c.values("with")
        assert got.station is None or got.station in c.values("station")
        assert not got.cancel or c.cancel


def test_the_shipped_sets_are_apart_and_say_their_source():
    dev = load_instruction_notes(dev_set_path())
    held = [load_instruction_notes(heldout_set_path(k)) for k in HELDOUT_SETS]
    assert [len(dev), *map(len, held)] == [600, 60, 80, *[100] * 5, 99, *[100] * 4]
    texts = [{r["note"] for r in rows} for rows in (dev, *held)]
    for i, a in enumerate(texts):
        for b in texts[i + 1 :]:
            assert a.isdisjoint(b)
    assert all("marlm development set" in r["source"] for r in dev)
    for k, rows in enumerate(held, start=1):
        assert all(f"marlm held-out set{'' if k == 1 else f' {k}'} (" in r["source"] for r in rows)
    for rows in (dev, *held):
        assert {r["lang"] for r in rows} == {"en", "zh"}


def test_stations_are_named_in_reading_order_and_deliveries_name_them():
    from marlm.envs.warehouse import WarehouseEnv
    from marlm.envs.warehouse.layout import parse_layout, station_name

    assert [station_name(k) for k in (0, 1, 25, 26, 27)] == ["A", "B", "Z", "AA", "AB"]
    layout = parse_layout("P..P\n.RS.\nP...", name="three")
    assert layout.station_names == {(0, 0): "A", (0, 3): "B", (2, 0): "C"}
    from marlm.envs.warehouse.orders import Order

    env = WarehouseEnv(layout, orders=[Order(id="o1", shelf="S1-2", priority="normal",
                                             arrival=0, deadline=50)], max_steps=30)  # fmt: skip
    env.reset(seed=0)
    delivered = []
    for _ in range(30):
        if not env.agents:
            break
        target = env.target_of("robot_0")
        r, c = env._cell_rc[env._cells[0]]
        a = 0
        if target is not None:
            tr, tc = target
            a = 2 if tr > r else 1 if tr < r else 4 if tc > c else 3 if tc < c else 0
        env.step({"robot_0": a})
        delivered += [e for e in env._last_events if e["type"] == "delivered"]
    assert [(e["order"], e["station"]) for e in delivered] == [("o1", "B")]


@pytest.mark.parametrize(
    ("note", "tones"),
    [
        ("Urgent! The line is stopped.", ["urgent", "urgent"]),
        ("Not urgent, whenever you can.", ["low", "low"]),
        ("No rush, it can wait until next week.", ["low", "low", "low"]),
        ("asap please", ["urgent"]),
        ("加急，客户在等", ["urgent", "urgent"]),
        ("不急，明天也行", ["low", "low"]),
        ("别着急", ["low"]),
        ("一点都不急", ["low"]),
        ("Regular restock for aisle 4.", []),
        ("常规补货。", []),
    ],
)
def test_tone_cues_read_negation_as_low(note, tones):
    assert [x.value for x in find_candidates(note, "10:00").tone] == tones


@pytest.mark.parametrize(
    ("note", "deadline", "urgency"),
    [
        ("asap, the customer is waiting", None, "urgent"),
        ("No rush.", None, "low"),
        ("Before 10:20 please.", 20, "urgent"),  # a deadline within 30 minutes
        ("Before 10:40 please.", 40, "normal"),
        ("No rush, before 10:20.", 20, "low"),  # a tone word decides
        ("Customer cancelled.", None, "normal"),
    ],
)
def test_urgency_follows_the_labelling_rule(note, deadline, urgency):
    c = find_candidates(note, "10:00")
    assert urgency_from(c, deadline) == urgency


def test_a_little_in_chinese_is_no_clock_time():
    assert find_candidates("补货，一点都不急，哪个口都行。", "10:00").deadline == []
    assert find_candidates("快一点", "10:00").deadline == []
    assert [x.value for x in find_candidates("一点前送到", "10:00").deadline] == [180]
    assert [x.value for x in find_candidates("下午一点前送到", "10:00").deadline] == [180]


def test_the_shipped_heads_are_those_of_the_shipped_model_and_development_set(
    embedded_model, tmp_path
):
    # A change to the development set, the heads' inputs or the model file changes the key: the
    # heads must then be trained and shipped again (python benchmarks/instruction_notes.py ...;
    # docs/instructions.md), else every first reading embeds the whole development set.
    reader = InstructionReader(embedded_model, ST, cache_dir=tmp_path)
    assert reader.feature() == "final"
    shipped = shipped_heads_dir() / f"instructions-heads-{reader.heads_key()}.npz"
    assert shipped.is_file()
    heads = reader._load_heads()
    assert heads is not None and set(heads) == {"cancel", "deadline", "with", "station"}
    assert all(h is not None and h.weights.shape == (576, 2) for h in heads.values())
    assert list(tmp_path.iterdir()) == []  # nothing embedded, nothing written


def test_heads_trained_once_are_cached_and_read_back(tmp_path):
    notes = load_instruction_notes(dev_set_path())[:40]
    first = InstructionReader(FixedEmbedder(), ST, dev_notes=notes, cache_dir=tmp_path)
    trained = first.heads()
    assert [p.name.split("-")[1] for p in tmp_path.glob("instructions-heads-*.npz")] == ["heads"]
    again = InstructionReader(FixedEmbedder(), ST, dev_notes=notes, cache_dir=tmp_path)
    loaded = again._load_heads()
    assert loaded is not None
    for k, head in trained.items():
        if head is None:
            assert loaded[k] is None
        else:
            assert np.array_equal(head.weights, loaded[k].weights)
    other = InstructionReader(FixedEmbedder(), ST, dev_notes=notes[:30], cache_dir=tmp_path)
    assert other.heads_key() != again.heads_key() and other._load_heads() is None


@pytest.mark.parametrize(
    ("note", "time", "deadlines"),
    [
        # a clock time just before the order's own is a past event, not a deadline 11 hours on
        ("customer called at 9:30 asking about status", "09:50", []),
        ("Regular order. entered at 7:45 by night shift", "07:50", []),
        ("司机八点到的，货放C口冷库", "08:20", []),
        ("车是七点五十到的，卸完货再说", "08:10", []),
        ("the 07:10 batch was fine, ship by 11", "08:30", [150]),
        # a time passed by more than two hours keeps the reading of the next occurrence
        ("by 3", "13:25", [95]),
        ("by 11", "13:25", [575]),
        ("十二点半前送到A口", "11:50", [40]),
    ],
)
def test_clock_times_just_passed_are_not_deadline_candidates(note, time, deadlines):
    assert find_candidates(note, time, ST).values("deadline") == deadlines


@pytest.mark.parametrize(
    "note",
    ["keep it refrigerated", "Frozen goods, needs the fridge until pickup.", "keep it chilled",
     "冷冻品，需要冷藏", "放冷柜"],
)  # fmt: skip
def test_other_words_for_the_cold_chain_are_station_candidates(note):
    assert find_candidates(note, "10:00", ST).values("station") == ["C"]


@pytest.mark.parametrize("note", ["这单撤了，客户那边预算没批", "客户把单撤掉了"])
def test_a_withdrawn_order_in_chinese_is_a_cancellation_candidate(note):
    assert find_candidates(note, "10:00", ST).values("cancel") == [True]


@pytest.mark.parametrize(
    ("note", "tone"),
    [
        ("Hi there, this isn't urgent - any time tomorrow works", ["low"]),
        ("It is not that urgent", ["low"]),
        ("不是加急，慢慢来就行", ["low"]),
        ("这单不算急", ["low"]),
        ("this is urgent!", ["urgent"]),  # a plain "is" is no negation
        ("客户说是加急", ["urgent"]),
    ],
)
def test_a_negated_urgent_word_is_a_low_cue(note, tone):
    assert find_candidates(note, "10:00", ST).values("tone") == tone


@pytest.mark.parametrize(
    ("note", "time", "deadlines"),
    [
        # a clock time after a word for tomorrow is tomorrow's, to the minute
        ("明早八点前必须到店，今晚装A口。", "17:10", [890]),
        ("仓库五点半下班。这单要求明早八点前送到客户那", "15:30", [120, 990]),
        ("明天下午三点前送到", "10:00", [1740]),
        ("明早七点前到冷链区，客户明天早上九点开门", "18:00", [780, 900]),
        ("This one isn't urgent, tomorrow morning by 9 is fine.", "12:40", [1220]),
        ("now says tmrw 10am is fine", "15:40", [1100]),
        ("by 9:30 tomorrow", "10:00", [1410]),  # within two hours before now, but tomorrow's
        ("tomorrow by 4", "10:00", [1800]),  # 1 to 6 without a.m./p.m.: the afternoon's
        # no word for tomorrow in the clause: today's, as before
        ("tomorrow is fine, by 4", "10:00", [360]),
        ("明天也行，三点前", "10:00", [300]),
    ],
)
def test_a_clock_time_after_a_word_for_tomorrow_is_tomorrows(note, time, deadlines):
    assert find_candidates(note, time, ST).values("deadline") == deadlines


@pytest.mark.parametrize(
    ("note", "alone"),
    [
        ("十一点前出，A口，顺便跟o1457那单放同一车。", {"A": True}),
        ("same pallet as o1346 and not via cold chain pls. dock a", {"C": False, "A": True}),
        ("Dock B.", {"B": True}),
        ("not dock A, use dock B", {"A": False, "B": False}),
        ("别走C口", {"C": False}),
        ("o1465是冷链单，这单不是，普通货，B口。", {"C": False, "B": True}),
    ],
)
def test_a_station_named_alone_in_its_clause(note, alone):
    c = find_candidates(note, "10:00", ST)
    assert {x.value: named_alone(x) for x in c.station} == alone


def test_a_station_named_alone_holds_whatever_its_head_says():
    c = find_candidates("加急，A口，五点前", "16:00", ST)
    reader = InstructionReader(FixedEmbedder(), ST, dev_notes=[])
    no = {"cancel": np.zeros(0), "deadline": np.array([0.9]), "with": np.zeros(0),
          "station": np.array([0.1])}  # fmt: skip
    got = reader.choose(c, no)
    assert (got.station, got.deadline_min) == ("A", 60)
    ruled_out = find_candidates("not dock A", "16:00", ST)
    none = {**no, "deadline": np.zeros(0)}
    assert reader.choose(ruled_out, none).station is None
