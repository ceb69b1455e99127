"""``marlm eval triage`` on a model that answers no note, and on notes of one class."""

from __future__ import annotations

from cli_run import run_main
from marlm.llm.errors import BackendError
from marlm.llm.triage import dev_notes_path


def test_a_model_that_answers_no_note_is_one_line_exit_2_and_no_result(
    tmp_path, capsys, monkeypatch
):
    # A server that refused every connection gave "accuracy 62.5%" (each note's listed
    # priority, the fallback) with exit code 0 and wrote it to --out as the model's result.
    import marlm.llm.backends as backends

    class Down:
        name = "down"

        def embed(self, texts):
            raise BackendError("failed after 3 attempts: connection refused", url="http://x/v1")

    monkeypatch.setattr(backends, "make_backend", lambda *a, **k: Down())
    notes = _four_notes(tmp_path)
    out = tmp_path / "triage.json"
    url = ["--llm", "http://127.0.0.1:9/v1"]
    code, err = run_main(["eval", "triage", "--notes", notes, *url, "--out", out], capsys)
    assert code == 2 and "Traceback" not in err, err
    (line,) = err.strip().splitlines()
    assert line.startswith("marlm: error: field '--llm': the model answered none of the 4 notes")
    assert "the first: " in line and "connection refused)" in line, line
    assert "pass --llm embedded" in line and not out.exists()


def _four_notes(tmp_path):
    notes = tmp_path / "notes.jsonl"
    lines = dev_notes_path().read_text().splitlines(True)
    notes.write_text(
        "".join(
            [x for x in lines if '"urgent"' in x][:2] + [x for x in lines if '"normal"' in x][:2]
        )
    )
    return notes


def test_the_embedded_model_answering_no_note_says_why_not_to_pass_itself(
    tmp_path, capsys, monkeypatch
):
    # --per-class 30 made every prompt longer than the embedded model's context; the error
    # said only "check that the model at this --llm answers ... or pass --llm embedded".
    import marlm.llm.backends as backends
    from marlm.llm.errors import ContextLengthExceeded

    class Short:  # a fault injector: the context error of the embedded model, for every note
        name = "embedded:short"

        def embed(self, texts):
            raise ContextLengthExceeded(
                "the prompt has at least 2834 tokens and does not fit the context of 2048 tokens"
            )

    monkeypatch.setattr(backends, "make_backend", lambda *a, **k: Short())
    code, err = run_main(["eval", "triage", "--notes", _four_notes(tmp_path)], capsys)
    assert code == 2 and "Traceback" not in err, err
    (line,) = err.strip().splitlines()
    assert "the first: " in line and "context of 2048 tokens)" in line, line
    assert "a smaller --per-class or --shots" in line and "--llm embedded" not in line, line


def test_notes_of_one_class_are_one_line_naming_the_file_and_the_fix(tmp_path, capsys):
    # Four urgent notes ended with "field 'fallback': fallback 'normal' is not one of
    # ['urgent']", an option nobody can set; four normal ones measured a one-class "accuracy".
    lines = dev_notes_path().read_text().splitlines(True)
    for label in ("urgent", "normal"):
        notes = tmp_path / f"{label}.jsonl"
        notes.write_text("".join([x for x in lines if f'"{label}"' in x][:4]))
        code, err = run_main(["eval", "triage", "--notes", notes], capsys)
        assert code == 2 and "Traceback" not in err, err
        (line,) = err.strip().splitlines()
        assert line.startswith(f"marlm: error: {notes}: field 'priority': every note is ")
        assert "two classes or more" in line and "order_notes_dev.jsonl" in line
