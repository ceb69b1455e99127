"""Option errors say what is wrong with the value as typed: an empty or repeated item of a
comma-separated list, a folder where a file is read (and a file where a folder is written), and
the option's name, never the library's name for the setting. Each is exit 2 before anything is
created."""

from __future__ import annotations

import pytest

from cli_run import run_main

LISTS = [
    (["compare", "--schemes", "rules,,rules"], "--schemes", "item 2 of 'rules,,rules' is empty"),
    (["compare", "--schemes", "rules,"], "--schemes", "item 2 of 'rules,' is empty"),
    (["compare", "--schemes", "rules,hybrid,rules"], "--schemes", "'rules' given more than once"),
    (
        ["compare", "--scenario", "notes-only", "--schemes", "rule,rule"],
        "--schemes",
        "'rule' given more than once",
    ),
    (["bench", "--only", "env,,pibt"], "--only", "item 2 of 'env,,pibt' is empty"),
    (["bench", "--only", "env,env"], "--only", "'env' given more than once"),
]


@pytest.mark.parametrize("argv,option,said", LISTS, ids=[" ".join(a) for a, _, _ in LISTS])
def test_an_empty_or_repeated_list_item_is_named(tmp_path, capsys, argv, option, said):
    # "rules,,rules" said "unknown scheme(s) ;" (an empty name), "rules,rules" ran rules twice.
    out = tmp_path / "out"
    code, err = run_main([*argv, *(["--out", out] if argv[0] == "compare" else [])], capsys)
    assert code == 2 and err.startswith(f"marlm: error: field '{option}': {said}"), err
    assert not out.exists()


FILE_OPTIONS = [
    (["demo", "--planner", "rule"], "--orders"),
    (["demo", "--planner", "rule"], "--layout"),
    (["demo", "--planner", "rule", "--executor", "rl"], "--policy"),
    (["compare", "--schemes", "rules"], "--orders"),
    (["compare", "--schemes", "rules"], "--layout"),
    (["train", "warehouse"], "--layout"),
    (["train", "gridworld"], "--resume"),
    (["train", "race"], "--resume"),
    (["eval", "triage"], "--notes"),
    (["eval", "triage", "--notes", "NOTES"], "--examples"),
    (["llm", "serve"], "--model"),
]


@pytest.mark.parametrize(
    "argv,option", FILE_OPTIONS, ids=[f"{' '.join(a[:2])} {o}" for a, o in FILE_OPTIONS]
)
def test_a_folder_where_a_file_is_read_is_named_as_a_folder(tmp_path, capsys, argv, option):
    # --notes DIR was "[Errno 21] Is a directory", --orders DIR "no order file", --resume DIR
    # "field 'checkpoint': checkpoint file not found".
    folder = tmp_path / "folder"
    folder.mkdir()
    notes = tmp_path / "notes.jsonl"
    notes.write_text('{"id": "n1", "note": "Soon.", "priority": "urgent"}\n', encoding="utf-8")
    argv = [str(notes) if a == "NOTES" else a for a in argv]
    out = tmp_path / "out"
    outs = ["--out", out] if argv[0] in ("demo", "compare", "train") else []
    code, err = run_main([*argv, option, folder, *outs], capsys)
    assert code == 2, err
    assert err.startswith(f"marlm: error: {folder}: field '{option}': is a folder; give "), err
    assert not out.exists()


@pytest.mark.parametrize(
    "argv", [["demo", "--planner", "rule"], ["train", "race"], ["compare", "--schemes", "rules"]]
)
def test_a_file_where_a_run_folder_is_written_is_named_as_a_file(tmp_path, capsys, argv):
    a_file = tmp_path / "a_file"
    a_file.write_text("mine\n")
    code, err = run_main([*argv, "--out", a_file], capsys)
    assert code == 2 and "field '--out': is a file, not a folder" in err, err
    assert a_file.read_text() == "mine\n"


def test_compare_checks_its_order_file_and_robots_before_the_run_folder(tmp_path, capsys):
    # A bad --orders file was found by the first scheme, after the run folder was created.
    bad = tmp_path / "orders.jsonl"
    bad.write_text("not json\n")
    out = tmp_path / "cmp"
    code, err = run_main(["compare", "--schemes", "rules", "--orders", bad, "--out", out], capsys)
    assert code == 2 and err.startswith(f"marlm: error: {bad}:1: "), err
    assert not out.exists()
    tiny = tmp_path / "tiny.txt"
    tiny.write_text("#####\n#R.P#\n#.S.#\n#####\n")
    code, err = run_main(
        ["compare", "--schemes", "rules", "--layout", tiny, "--robots", "9", "--out", out], capsys
    )
    assert code == 2 and "field '--robots'" in err, err
    assert not out.exists()


def test_compare_notes_only_refuses_an_order_file_it_would_ignore(tmp_path, capsys):
    orders = tmp_path / "orders.jsonl"
    orders.write_text('{"id": "o1", "shelf": "S1-1"}\n')
    out = tmp_path / "cmp"
    argv = ["compare", "--scenario", "notes-only", "--orders", orders, "--out", out]
    code, err = run_main(argv, capsys)
    assert code == 2 and err.startswith("marlm: error: field '--orders': the notes-only"), err
    assert not out.exists()


@pytest.mark.parametrize(
    "argv,said",
    [
        (["compare", "--schemes", "hybrid", "--llm", "foo"], "field '--llm': got 'foo'; use"),
        (
            ["compare", "--scenario", "notes-only", "--llm", "no-such.gguf"],
            "no-such.gguf: field '--llm': GGUF file not found",
        ),
        (["demo", "--llm", "no-such.gguf"], "no-such.gguf: field '--llm': GGUF file not found"),
    ],
    ids=["compare unknown form", "notes-only missing gguf", "demo missing gguf"],
)
def test_an_llm_value_the_factory_refuses_is_refused_before_the_run_folder(
    tmp_path, capsys, argv, said
):
    # compare --llm foo created its run folder, then failed when the schemes loaded the model.
    out = tmp_path / "out"
    code, err = run_main([*argv, "--out", out], capsys)
    assert code == 2 and err.startswith(f"marlm: error: {said}"), err
    assert not out.exists()


PARSE_ERRORS = [
    (
        ["demo", "--steps", "abc"],
        "field '--steps': Input should be a valid integer, unable to parse string as an integer; "
        "pass e.g. --steps 600; see 'marlm demo --help'",
    ),
    (
        ["compare", "--robots", "1.5"],
        "field '--robots': Input should be a valid integer, unable to parse string as an integer; "
        "pass e.g. --robots 1; see 'marlm compare --help'",
    ),
    (
        ["demo", "--tick-ms", "x"],
        "field '--tick-ms': Input should be a valid number, unable to parse string as a number; "
        "pass e.g. --tick-ms 40; see 'marlm demo --help'",
    ),
    (["demo", "--stepz", "3"], "No such option: --stepz"),
    (["eval", "triage"], "field '--notes': is required; see 'marlm eval triage --help'"),
    (["replay"], "field 'TRACE': is required; see 'marlm replay --help'"),
    (["nosuch"], "No such command 'nosuch'; see 'marlm --help'"),
]


@pytest.mark.parametrize("argv,said", PARSE_ERRORS, ids=[" ".join(a) for a, _ in PARSE_ERRORS])
def test_a_value_the_parser_refuses_is_one_marlm_line(capsys, argv, said):
    # These were click's "Usage: ... Error: Invalid value for '--steps'" box, unlike every
    # other input error.
    code, err = run_main(argv, capsys)
    assert code == 2 and err.startswith(f"marlm: error: {said}"), err
    assert len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize(
    "argv",
    [["--schemes", "hybrid"], ["--scenario", "notes-only", "--schemes", "rule,triage-score"]],
)
def test_compare_refuses_a_server_url_that_answers_404_before_the_run_folder(
    tmp_path, capsys, fault_server, argv
):
    # The URL without /v1 was found by the first scheme with a model, after --out was created.
    out = tmp_path / "cmp"
    url = fault_server.root("nov1~compare")
    code, err = run_main(["compare", *argv, "--llm", url, "--out", out], capsys)
    assert code == 2 and err.startswith("marlm: error: field '--llm': ") and "/v1" in err, err
    assert not out.exists()


def test_an_unknown_race_learner_lists_the_network_learners_too(capsys):
    # It listed only iql, vdn, jal although mappo, qmix, ... are accepted.
    code, err = run_main(["train", "race", "--learner", "ppo"], capsys)
    assert code == 2
    assert err.strip() == (
        "marlm: error: field '--learner': unknown learner 'ppo'; allowed: iql, vdn, jal, mappo, "
        "ippo, qmix, dqn-vdn, dqn"
    )


def test_an_unknown_demo_executor_is_not_told_to_use_llm(capsys):
    # The message offered 'llm', which the demo then refused ("runs in 'marlm compare'").
    code, err = run_main(["demo", "--executor", "foo"], capsys)
    assert code == 2
    assert (
        err.strip()
        == "marlm: error: field '--executor': got 'foo'; use rl, learned, greedy or random"
    )


#: (order line, what marlm says of it): pydantic's message, the value it got and one that passes.
BAD_ORDERS = [
    (
        '{"id": "a", "shelf": "S3-4", "priority": "urgent", "arrival": -1, "deadline": 5}',
        "field 'arrival': Input should be greater than or equal to 0, got -1; "
        'pass e.g. "arrival": 0',
    ),
    (
        '{"id": "a", "shelf": "S3-4", "priority": "urgent", "arrival": "3", "deadline": 5}',
        'field \'arrival\': Input should be a valid integer, got "3"; pass e.g. "arrival": 0',
    ),
    (
        '{"id": "", "shelf": "S3-4", "priority": "urgent", "arrival": 3, "deadline": 5}',
        'field \'id\': String should have at least 1 character, got ""; pass e.g. "id": "o01"',
    ),
    (
        '{"id": "a", "shelf": "S3-4", "priority": "urgent", "arrival": 3, "deadline": 5.5}',
        "field 'deadline': Input should be a valid integer, got 5.5; pass e.g. \"deadline\": 63",
    ),
    (
        '{"id": "a", "shelf": "S3-4", "priority": "urgent", "arrival": 10, "deadline": 5}',
        "field 'deadline': deadline 5 must be later than arrival 10; pass e.g. \"deadline\": 70",
    ),
    (
        '{"id": "a", "shelf": "S3-4", "priority": "urgent", "arrival": 3, "deadline": 9, "note": 3}',
        "field 'note': Input should be a valid string, got 3; "
        'pass e.g. "note": "customer waiting at the counter"',
    ),
]


@pytest.mark.parametrize("line,said", BAD_ORDERS, ids=[s.split(":")[0] for _, s in BAD_ORDERS])
def test_a_bad_order_value_is_named_with_one_that_passes(tmp_path, capsys, line, said):
    # pydantic's "Input should be greater than or equal to 0" came without the value or a fix.
    orders = tmp_path / "orders.jsonl"
    orders.write_text(line + "\n", encoding="utf-8")
    out = tmp_path / "out"
    code, err = run_main(["demo", "--planner", "rule", "--orders", orders, "--out", out], capsys)
    assert code == 2 and err == f"marlm: error: {orders}:1: {said}\n", err
    assert not out.exists()


@pytest.mark.parametrize(
    "setting,said",
    [
        ({"steps": 0}, "field '--steps': Input should be greater than 0 (got 0); pass e.g. --steps 600"),
        ({"n_robots": 0}, "field '--robots': Input should be greater than 0 (got 0); pass e.g. --robots 1"),
        ({"tick_ms": -1}, "field '--tick-ms': Input should be greater than or equal to 0 (got -1); pass e.g. --tick-ms 40"),
        ({"dwell": "x"}, "field '--dwell': Input should be 'reserve', 'points' or 'none' (got 'x')"),
    ],
)  # fmt: skip
def test_a_run_setting_pydantic_refuses_names_the_option_and_a_value_that_passes(setting, said):
    from marlm.errors import InputError
    from marlm.hybrid.controller import run_config

    with pytest.raises(InputError) as e:
        run_config(**setting)
    assert str(e.value) == said


CONFLICTS = [
    (["demo", "--executor", "learned", "--policy", "missing.npz"], "--policy", "--executor rl"),
    (["demo", "--executor", "greedy", "--policy", "missing.npz"], "--policy", "--executor rl"),
    (["demo", "--scenario", "congested", "--orders", "missing.jsonl"], "--orders", "--scenario"),
    (
        ["compare", "--scenario", "notes-only", "--orders", "missing.jsonl"],
        "--orders",
        "--scenario",
    ),
]


@pytest.mark.parametrize("argv,option,other", CONFLICTS, ids=[" ".join(a) for a, _, _ in CONFLICTS])
def test_a_conflict_is_named_before_a_missing_file(tmp_path, capsys, argv, option, other):
    # `demo --executor learned --policy missing.npz` said "no such file" of the Q-table, and
    # once the file was there, that the learned executor takes none.
    code, err = run_main([*argv, "--out", tmp_path / "out"], capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith(f"marlm: error: field '{option}': ") and other in err, err
    assert "no such file" not in err and not (tmp_path / "out").exists()


def test_order_every_without_the_congested_scenario_is_refused(tmp_path, capsys):
    # --order-every paces the congested scenario's generated stream; without it the value was
    # ignored without a word.
    code, err = run_main(["demo", "--order-every", "5", "--out", tmp_path / "out"], capsys)
    assert code == 2 and err.strip() == (
        "marlm: error: field '--order-every': sets the pace of the congested scenario's generated "
        "orders; add --scenario congested, or drop --order-every"
    )
    assert not (tmp_path / "out").exists()


def test_step_seconds_without_the_instructions_scenario_is_refused(tmp_path, capsys):
    # --step-seconds maps steps to the clock of the instructions scenario's notes only.
    code, err = run_main(["demo", "--step-seconds", "3", "--out", tmp_path / "out"], capsys)
    assert code == 2 and err.strip() == (
        "marlm: error: field '--step-seconds': maps steps to the clock of the instructions "
        "scenario's notes; add --scenario instructions, or drop --step-seconds"
    )
    assert not (tmp_path / "out").exists()


def test_compare_shield_none_points_to_the_scheme_without_a_rule_layer(tmp_path, capsys):
    # `demo --shield none` runs without a rule layer; `compare --shield none` said only
    # "allowed: pibt, local", not where compare's run without one is.
    code, err = run_main(["compare", "--shield", "none", "--out", tmp_path / "out"], capsys)
    assert code == 2 and err.strip() == (
        "marlm: error: field '--shield': got 'none'; allowed: pibt, local (the rule layer of the "
        "schemes with a shield; the rl_no_shield scheme runs without one)"
    )
    assert not (tmp_path / "out").exists()
