"""The triage probe over a server's /v1/embeddings: ``marlm llm serve`` answers with the embedded
model's own hidden-state means, and a server without embeddings is said in one line."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import warnings

import numpy as np
import pytest

from marlm.llm.backends import OpenAICompatible
from marlm.llm.server_embed import EmbeddingsUnavailable, read_inputs, unavailable_reason
from marlm.llm.triage import LabelledNote, Triage, clean_note, probe_input

POOL = [
    LabelledNote("u1", "Production line is down, we need this part now.", "urgent"),
    LabelledNote("u2", "急需！客户在柜台等着。", "urgent"),
    LabelledNote("u3", "Ambulance supplies, rush.", "urgent"),
    LabelledNote("n1", "Restock, next week is fine.", "normal"),
    LabelledNote("n2", "不着急，下周再送。", "normal"),
    LabelledNote("n3", "Regular monthly replenishment.", "normal"),
]
NOTES = ["The machine stopped, send it immediately!", "No hurry on this one."]


def test_marlm_llm_serve_embeds_as_the_embedded_model_does(llama_server, embedded_model):
    texts = [probe_input(clean_note(n)) for n in NOTES]
    got = OpenAICompatible(llama_server, "smollm2", timeout_s=120).embed(texts)
    want = embedded_model.embed(texts)
    assert got.shape == want.shape == (2, 576) and got.dtype == np.float32
    assert np.allclose(got, want, rtol=0, atol=1e-4)


def test_the_probe_through_the_server_decides_as_the_embedded_probe(llama_server, embedded_model):
    # On main a server had no embed(): the probe silently became 'batch' (another classifier).
    server = OpenAICompatible(llama_server, "smollm2", timeout_s=120)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback warning
        over_http = Triage(server, mode="probe", examples=POOL)
        over_http.warm_up()
    local = Triage(embedded_model, mode="probe", examples=POOL)
    a, b = over_http.classify_many(NOTES), local.classify_many(NOTES)
    assert over_http.mode == "probe" and [d.source for d in a] == ["model", "model"]
    assert [d.label for d in a] == [d.label for d in b]
    for x, y in zip(a, b, strict=True):
        assert x.scores == pytest.approx(y.scores, abs=1e-3)


def test_the_server_refuses_a_bad_embeddings_body_naming_input(llama_server):
    request = urllib.request.Request(
        llama_server + "/embeddings",
        data=json.dumps({"model": "smollm2", "input": [1, 2]}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(request, timeout=30)
    assert e.value.code == 400
    error = json.loads(e.value.read())["error"]
    assert error["param"] == "input" and "list of 1..256 strings" in error["message"]


def test_a_server_without_embeddings_is_said_once_and_triage_uses_batch(fault_server):
    base = fault_server.base("noembed~triage")
    model = OpenAICompatible(base, timeout_s=5, max_retries=2)
    with pytest.raises(EmbeddingsUnavailable, match=r"serves no embeddings \(HTTP 501"):
        model.embed(["a note"])
    assert fault_server.count("noembed~triage") == 1  # not retried
    triage = Triage(model, mode="probe", examples=POOL)
    with pytest.warns(RuntimeWarning) as caught:
        triage.warm_up()
    lines = [str(w.message) for w in caught if "probe" in str(w.message)]
    assert len(lines) == 1 and "\n" not in lines[0]
    assert lines[0].startswith("triage mode 'probe' uses 'batch' instead: ")
    assert f"{base}/embeddings serves no embeddings (HTTP 501" in lines[0]
    assert "--embeddings" in lines[0] and triage.mode == "batch"


@pytest.mark.parametrize(
    ("status", "detail", "unavailable"),
    [
        (404, "Not Found", True),
        (501, "This server does not support embeddings.", True),
        (500, "Llama model must be created with embedding=True to call this method", True),
        (500, "injected server error", False),
        (429, "rate limit reached", False),
    ],
)
def test_which_answers_mean_no_embeddings(status, detail, unavailable):
    assert unavailable_reason(status, detail) is unavailable


@pytest.mark.parametrize(
    ("body", "want"),
    [
        ({"input": "one"}, ["one"]),
        ({"input": ["a", "b"]}, ["a", "b"]),
        ({"input": []}, "input must be"),
        ({"input": [[1, 2]]}, "input must be"),
        (None, "the body must be a JSON object"),
    ],
)
def test_the_embeddings_body(body, want):
    got = read_inputs(body)
    assert got == want if isinstance(want, list) else got.startswith(want)
