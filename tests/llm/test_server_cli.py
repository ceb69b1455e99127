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


def test_cli_refuses_non_loopback_with_exit_code_2():
    from typer.testing import CliRunner

    from marlm.cli import main  # noqa: F401  (registers the commands)
    from marlm.cli.app import app

    res = CliRunner().invoke(app, ["llm", "serve", "--host", "0.0.0.0", "--port", "8123"])
    assert isinstance(res.exception, InputError)
