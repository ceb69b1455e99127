"""Every endpoint of the HTTP backend holds one total deadline per call, however the server
answers: the status line and a header trickled a byte at a time (each read returns at once, so
the client's per-read timeout never fires), or the headers and then nothing.

The fault server (tests/faultserver.py) holds each request for 20 s and then hangs up without an
answer; with a 0.5 s timeout a call that holds its deadline ends in :class:`BackendTimeout`, one
that does not ends 20 s later in another error (the connection closed) or, for the model list,
without the warning that the server did not answer."""

from __future__ import annotations

import warnings

import pytest

from marlm.llm.backends import OpenAICompatible
from marlm.llm.errors import BackendTimeout

HELLO = [{"role": "user", "content": "hello"}]
CALLS = {
    "chat": lambda m: m.chat(HELLO),
    "completions (scoring)": lambda m: m.score("The answer is", [" yes", " no"]),
    "embeddings": lambda m: m.embed(["a note"]),
}


@pytest.mark.parametrize("mode", ["trickle", "silent_body"])
@pytest.mark.parametrize("endpoint", list(CALLS))
def test_every_endpoint_ends_at_its_deadline(fault_server, mode, endpoint):
    base = fault_server.base(f"{mode}~{endpoint.split()[0]}")
    model = OpenAICompatible(base, timeout_s=0.5, max_retries=0)
    with pytest.raises(BackendTimeout, match="within 0.5 s"):
        CALLS[endpoint](model)
    assert fault_server.count(f"{mode}~{endpoint.split()[0]}") == 1


@pytest.mark.parametrize("mode", ["trickle", "silent_body"])
def test_the_model_list_check_ends_at_its_deadline(fault_server, mode):
    model = OpenAICompatible(fault_server.base(mode), timeout_s=0.5, max_retries=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.check(timeout_s=0.5)
    said = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(said) == 1 and "Timeout" in said[0] and fault_server.base(mode) in said[0]
