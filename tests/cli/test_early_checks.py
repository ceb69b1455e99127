"""Checks that must come before any work: the cache folder, the engine, an empty scheme list,
the top-level options; each one ``marlm: error:`` line, exit code 2, no run folder made."""

from __future__ import annotations

import pytest

from cli_run import run_main


def test_an_unwritable_cache_is_reported_before_the_executor_is_trained(
    tmp_path, capsys, monkeypatch
):
    # A read-only $MARLM_CACHE was reported after 40 s of training. (A folder under a file
    # cannot be created even by root, as a read-only one can.)
    (tmp_path / "file").write_text("x")
    monkeypatch.setenv("MARLM_CACHE", str(tmp_path / "file" / "cache"))
    trained = []
    monkeypatch.setattr(
        "marlm.hybrid.acting.executor.train_executor", lambda **k: trained.append(k)
    )
    for argv in (
        ["demo", "--executor", "rl", "--planner", "rule", "--steps", "5", "--out", tmp_path / "r"],
        ["compare", "--schemes", "rules,rl_shield", "--steps", "5", "--out", tmp_path / "run"],
    ):
        code, err = run_main(argv, capsys)
        assert code == 2 and err.count("marlm: error:") == 1, err
        assert (
            f"{tmp_path / 'file' / 'cache'}: field '$MARLM_CACHE': cannot write the policy " in err
        )
        assert "set MARLM_CACHE to a writable folder" in err
        assert not trained and not (tmp_path / "run").exists() and not (tmp_path / "r").exists()


@pytest.mark.parametrize("command", ["gridworld", "race"])
def test_an_unknown_engine_is_refused_before_the_run_folder(tmp_path, capsys, command):
    code, err = run_main(["train", command, "--engine", "foo", "--out", tmp_path / "run"], capsys)
    assert code == 2 and err.strip() == (
        "marlm: error: field '--engine': got 'foo'; allowed: fast, reference"
    )
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("value", ["", " "])
def test_an_empty_scheme_list_is_an_error(tmp_path, capsys, value):
    # `compare --schemes ""` ran every scheme.
    code, err = run_main(["compare", "--schemes", value, "--out", tmp_path / "run"], capsys)
    assert code == 2 and "field '--schemes': item 1 of" in err and "is empty" in err, err
    assert not (tmp_path / "run").exists()


def test_a_top_level_option_error_is_one_marlm_line(capsys):
    code, err = run_main(["--nope"], capsys)
    assert code == 2
    assert err.strip() == "marlm: error: No such option: --nope; see 'marlm --help'"


def test_version(capsys, monkeypatch):
    import sys

    import marlm
    from marlm.cli import main

    monkeypatch.setattr(sys, "argv", ["marlm", "--version"])
    with pytest.raises(SystemExit) as stop:
        main()
    assert stop.value.code == 0 and capsys.readouterr().out == f"marlm {marlm.__version__}\n"
