"""`marlm llm serve`: loopback only, bad options end with exit code 2."""

from __future__ import annotations

import pytest

from marlm.errors import InputError
from marlm.llm.server import build_app, check_loopback


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost", "127.0.0.2"])
def test_loopback_hosts_are_accepted(host):
    assert check_loopback(host) == host


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.5", "example.com"])
def test_other_hosts_are_refused(host):
    with pytest.raises(InputError) as e:
        check_loopback(host)
    assert e.value.source == "--host"


def test_missing_model_file_is_input_error(tmp_path):
    with pytest.raises(InputError, match="not found"):
        build_app(tmp_path / "missing.gguf")


def test_a_file_that_is_not_gguf_is_one_input_error(tmp_path):
    # Before: llama.cpp's "Failed to load model from file" traceback, exit 1.
    fake = tmp_path / "fake.gguf"
    fake.write_text("not a model")
    with pytest.raises(InputError, match="field '--model': .*is not a GGUF model file"):
        build_app(fake)


def test_cli_refuses_non_loopback_with_exit_code_2():
    from typer.testing import CliRunner

    from marlm.cli import main  # noqa: F401  (registers the commands)
    from marlm.cli.app import app

    res = CliRunner().invoke(app, ["llm", "serve", "--host", "0.0.0.0", "--port", "8123"])
    assert isinstance(res.exception, InputError)


# ----------------------------------------------------------------------------- a user's session

import json  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402

from faultserver import free_port  # noqa: E402
from marlm.llm.server import map_json_schema  # noqa: E402


def marlm(*args: str, before: str = "pass") -> subprocess.Popen:
    """``marlm ARGS`` in a new process, with ``before`` run first (to hide a module, say)."""
    code = (
        f"import sys; {before}; from marlm.cli import main; sys.argv = ['marlm', *{args!r}]; main()"
    )
    return subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def test_without_the_server_extra_one_install_line_and_exit_2():
    proc = marlm("llm", "serve", "--port", str(free_port()), before="sys.modules['uvicorn'] = None")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 2 and out == ""
    assert err == (
        "marlm: error: marlm llm serve needs the [server] extra (uvicorn is not installed): "
        ".venv/bin/pip install -e '.[server]'\n"
    )


def test_a_port_in_use_is_one_error_line_and_exit_2():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        proc = marlm("llm", "serve", "--port", str(port))
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 2 and out == ""
    assert err == (
        f"marlm: error: field '--port': port {port} on 127.0.0.1 is in use; pass another "
        f"--port, e.g. --port {port + 1}\n"
    )


def test_json_schema_requests_become_llama_cpp_pythons_json_object():
    schema = {"type": "object"}
    body = {
        "response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": schema}}
    }
    assert map_json_schema(body) is None
    assert body == {"response_format": {"type": "json_object", "schema": schema}}
    bad = {"response_format": {"type": "json_schema", "json_schema": {"name": "a"}}}
    assert "must be a JSON schema object, got null" in map_json_schema(bad)
    plain = {"response_format": {"type": "json_object"}}
    assert map_json_schema(plain) is None and plain == {"response_format": {"type": "json_object"}}


def test_serve_says_its_url_answers_marlms_first_request_and_stops_on_ctrl_c():
    from marlm.llm.backends import OpenAICompatible
    from marlm.llm.reward import SCORE_SCHEMA

    port = free_port()
    proc = marlm("llm", "serve", "--port", str(port), "--n-threads", "1", "--n-ctx", "512")
    try:
        first: list[str] = []
        reader = threading.Thread(target=lambda: first.append(proc.stdout.readline()))
        reader.start()
        reader.join(timeout=120)
        url = f"http://127.0.0.1:{port}/v1"
        assert first == [f"serving smollm2 at {url} (OpenAI-compatible; Ctrl-C stops)\n"]
        model = OpenAICompatible(url, "smollm2", timeout_s=60)
        r = model.chat([{"role": "user", "content": "Rate: goal reached."}], schema=SCORE_SCHEMA)
        assert r.structured == "json_schema" and r.validation_error is None  # accepted as is
        assert json.loads(r.text)["score"] in (-1, 0, 1)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130 and out == ""
    assert err == "marlm: interrupted\n"  # no FastAPI traceback, no uvicorn log


def test_a_context_over_the_models_training_is_refused_before_llama_cpp_tries():
    # --n-ctx 1000000000: llama.cpp's "Failed to create llama_context" traceback, then the
    # process hung freeing the model until it was killed.
    pytest.importorskip("llama_cpp.server")
    with pytest.raises(InputError) as e:
        build_app(n_ctx=100_000)
    assert str(e.value) == (
        "field '--n-ctx': must be at most 8192, the context SmolLM2-135M-Instruct.Q4_1.gguf was "
        "trained with (0: that context), got 100000"
    )
