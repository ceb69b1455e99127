"""``marlm train gridworld --reward llm`` when the reward's model fails during training."""

from __future__ import annotations

import pytest

from cli_run import run_main
from marlm.llm.errors import BackendError


@pytest.mark.parametrize("url", ["http://127.0.0.1:9/v1", ""])
def test_a_reward_backend_that_fails_ends_with_one_line_naming_llm(
    tmp_path, capsys, monkeypatch, url
):
    # A server that refused the connection ended the run with the HTTP client's traceback and
    # exit code 1.
    import marlm.llm.backends as backends

    class Down:
        name = "down"

        def chat(self, messages, **kwargs):
            raise BackendError("failed after 3 attempts: connection refused", url=url)

    monkeypatch.setattr(backends, "make_backend", lambda *a, **k: Down())
    argv = ["train", "gridworld", "--reward", "llm", "--episodes", "1", "--engine", "reference"]
    code, err = run_main([*argv, "--no-plot", "--out", tmp_path / "gw"], capsys)
    assert code == 2 and "Traceback" not in err, err
    (line,) = err.strip().splitlines()
    assert line.startswith("marlm: error: field '--llm': the LLM reward's model failed: ")
    assert ("--llm embedded" if url else "pass another --llm") in line
