"""The backend spec: ``--llm``, ``--llm-model`` and ``--llm-timeout`` parsed once, one meaning."""

from __future__ import annotations

import dataclasses

import pytest

from marlm.errors import InputError
from marlm.llm.backends import DEFAULT_TIMEOUT_S, BackendSpec, default_model_path, make_backend


def test_each_form_parses_to_its_kind_with_the_same_timeout(tmp_path):
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"")
    url = BackendSpec.parse(" http://127.0.0.1:8000/v1 ", model="qwen", timeout_s=7)
    assert url == BackendSpec("http", "http://127.0.0.1:8000/v1", "qwen", 7.0, "--llm")
    assert BackendSpec.parse(None) == BackendSpec("embedded", "embedded", "local", 60.0)
    assert BackendSpec.parse(str(gguf), timeout_s=2).model_path == gguf
    assert BackendSpec.parse("embedded").timeout_s == DEFAULT_TIMEOUT_S == 60.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        url.timeout_s = 1.0  # type: ignore[misc]


@pytest.mark.parametrize(
    "llm,timeout,field,said",
    [
        ("foo", None, "--llm", "got 'foo'; use 'embedded', a .gguf file"),
        ("/nope/m.gguf", None, "--llm", "GGUF file not found"),
        ("embedded", 0, "--llm-timeout", "must be a finite number of seconds > 0, got 0"),
        ("http://x/v1", float("inf"), "--llm-timeout", "got inf"),
    ],
)
def test_a_bad_value_names_its_option(llm, timeout, field, said):
    with pytest.raises(InputError, match=said) as e:
        BackendSpec.parse(llm, timeout_s=timeout)
    assert e.value.field == field


def test_the_factory_takes_a_parsed_spec_and_gives_its_timeout_to_the_embedded_model():
    spec = BackendSpec.parse(str(default_model_path()), timeout_s=3.5)
    model = make_backend(spec)
    try:
        assert model.timeout_s == 3.5 and model.model_path == default_model_path()
    finally:
        model.close()
