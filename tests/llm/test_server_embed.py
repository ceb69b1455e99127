"""The triage probe over a server's /v1/embeddings: ``marlm llm serve`` answers with the embedded
model's own hidden-state means, and a server without embeddings is said in one line."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
import warnings

import numpy as np
import pytest

from marlm.errors import InputError
from marlm.llm.backends import OpenAICompatible
from marlm.llm.errors import ContextLengthExceeded, LayerReadUnavailable
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


def test_marlm_llm_serve_reads_block_j_by_early_exit_as_the_embedded_model_does(
    llama_server, embedded_model
):
    texts = [probe_input(clean_note(n)) for n in NOTES]
    server = OpenAICompatible(llama_server, "smollm2", timeout_s=120)
    got = server.embed_layer(texts, 9)
    want = embedded_model.embed_layer(texts, 9)
    assert got.shape == want.shape == (2, 576) and got.dtype == np.float32
    assert np.allclose(got, want, rtol=0, atol=1e-3)
    assert not np.allclose(got, server.embed(texts), atol=1e-2)  # not the final states


def test_marlm_llm_serve_reads_block_j_on_q4_0_weights_under_its_own_name(
    llama_server, embedded_model
):
    texts = [probe_input(clean_note(n)) for n in NOTES]
    server = OpenAICompatible(llama_server, "smollm2", timeout_s=120)
    got = server.embed_layer(texts, 9, weights="Q4_0")
    want = embedded_model.embed_layer(texts, 9, weights="Q4_0")
    assert np.allclose(got, want, rtol=0, atol=1e-3)
    assert not np.allclose(got, server.embed_layer(texts, 9), atol=1e-3)  # not the Q8_0 read


def test_a_layer_the_server_cannot_read_is_a_404_and_the_probe_reads_the_final_states(
    llama_server,
):
    status, body = _post(llama_server, {"model": "smollm2:l_out-40", "input": ["a note"]})
    assert status == 404 and body["error"]["code"] == "model_not_found"
    assert body["error"]["param"] == "model"
    assert '"smollm2:l_out-40" is not served here' in body["error"]["message"]
    assert "has 30 blocks: early exit reads block 0 to 28, not 40" in body["error"]["message"]
    server = OpenAICompatible(llama_server, "smollm2", timeout_s=120)
    with pytest.raises(LayerReadUnavailable, match="does not serve smollm2:l_out-40"):
        server.embed_layer(["a note"], 40)
    assert server.breaker.state().failures == 0  # the server is healthy
    from marlm.llm.triage.probe import FINAL, ProbeMode

    probe = Triage(server, mode="probe", examples=POOL)._as(ProbeMode)
    probe.layer = 40
    assert probe.feature() == FINAL and "l_out-40" in probe.feature_note


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
    assert error["param"] == "input" and "token array" in error["message"]


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
        ({"input": []}, "field 'input': must hold at least one text"),
        ({"input": [[1, 2]]}, "field 'input[0]': is a token array"),
        (None, "the body must be a JSON object"),
    ],
)
def test_the_embeddings_body(body, want):
    got = read_inputs(body)
    assert got == want if isinstance(want, list) else got.startswith(want)


# ------------------------------------------------------------------- the client's mistakes

LONG = "word " * 600  # more than the 512 tokens one text may have
# (input, the field named, words of the message): what clients send by mistake
MISTAKES = {
    "empty list": ([], "input", "at least one text"),
    "empty string": ("", "input[0]", "empty string"),
    "empty string in a list": (["a", ""], "input[1]", "empty string"),
    "blank string": ([" \n"], "input[0]", "blank string"),
    "a number among the texts": (["a", 3], "input[1]", "must be a string"),
    "a null": ([None], "input[0]", "must be a string"),
    "token array": ([1, 2, 3], "input", "token array"),
    "token arrays": ([[1, 2], [3]], "input[0]", "token array"),
    "too many": (["a"] * 257, "input", "more than the 256"),
    "an object": ({"text": "a"}, "input", "must be a string or a list"),
    "half a surrogate pair": (["a\ud800b"], "input[0]", "half of a UTF-16 surrogate pair"),
}

#: Model names that ask for a layer in a form not served: a 404 each, never the final states.
LAYER_LIKE_NAMES = [
    "SMOLLM2:L_OUT-9",
    "smollm2:L_out-9",
    "smollm2:l_out_9",
    "smollm2:l-out-9",
    "smollm2:layer-9",
    "smollm2: l_out-9",
    "l_out-9",
    "smollm2:l_out\u22129",
    "smollm2\uff1al_out-9",
    "smollm2:l_out-9:l_out-8",
    "smollm2:l_out-009",
    "smollm2:l_out-9\n",
    "smollm2:l_out-\uff19",
    "smollm2:l_out-9-Q4_0",
    "smollm2:l_out-9-q4_0-q4_0",
    "smollm2:l_out-9 ",
    "smollm2:l_out-9-q4_1",
    "smollm2:l_out-x",
    "smollm2:l_out-9:q4_0",
]


def _post(base: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(
        base + "/embeddings",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=120) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_the_clients_mistakes_are_400s_in_openais_shape_and_the_server_stays_healthy(llama_server):
    for name, (value, field, words) in MISTAKES.items():
        status, body = _post(llama_server, {"model": "smollm2", "input": value})
        error = body["error"]
        assert status == 400, name
        assert set(error) == {"message", "type", "param", "code"}, name
        assert error["type"] == "invalid_request_error" and error["param"] == "input", name
        assert f"field '{field}'" in error["message"] and words in error["message"], name
    status, body = _post(llama_server, {"model": "smollm2", "input": ["fine", LONG]})
    assert status == 400  # over-long: the client's mistake, never a 5xx a client would retry
    assert body["error"]["code"] == "context_length_exceeded"
    assert "field 'input[1]'" in body["error"]["message"] and "512" in body["error"]["message"]
    status, body = _post(llama_server, {"model": "smollm2", "input": "fine"})
    assert status == 200 and len(body["data"][0]["embedding"]) == 576


@pytest.mark.parametrize("name", LAYER_LIKE_NAMES)
def test_a_name_that_asks_for_a_layer_in_another_form_is_a_404_naming_the_served_forms(
    llama_server, name
):
    status, body = _post(llama_server, {"model": name, "input": ["a note"]})
    assert status == 404 and body["error"]["param"] == "model"
    assert body["error"]["message"] == (
        f"field 'model': {json.dumps(name)} is not served here (a block is read as "
        "<model>:l_out-<j> or <model>:l_out-<j>-q4_0)"
    )


def test_the_name_s_prefix_is_any_alias_and_a_name_without_a_layer_gives_the_final_states(
    llama_server,
):
    texts = ["a note"]
    got = {}
    for name in ("gpt-4:l_out-9", "smollm2:l_out-9", "text-embedding-3-small", "my-player-model"):
        status, body = _post(llama_server, {"model": name, "input": texts})
        assert status == 200 and body["model"] == name
        got[name] = np.asarray(body["data"][0]["embedding"])
    assert np.array_equal(got["gpt-4:l_out-9"], got["smollm2:l_out-9"])
    assert np.array_equal(got["text-embedding-3-small"], got["my-player-model"])
    assert not np.allclose(got["smollm2:l_out-9"], got["my-player-model"], atol=1e-2)


@pytest.mark.parametrize(
    "extra, param, words",
    [
        ({"model": 123}, "model", "field 'model': must be a string, got 123"),
        ({"model": ["smollm2"]}, "model", "field 'model': must be a string"),
        ({"dimensions": 10}, "dimensions", "have 576 dimensions, got 10; drop dimensions or pass"),
        ({"dimensions": -1}, "dimensions", "have 576 dimensions, got -1"),
        ({"dimensions": "576"}, "dimensions", 'have 576 dimensions, got "576"'),
        ({"encoding_format": 0}, "encoding_format", "must be one of float, base64, got 0"),
        ({"encoding_format": False}, "encoding_format", "got false"),
        ({"encoding_format": ""}, "encoding_format", 'got ""'),
        ({"encoding_format": {}}, "encoding_format", "got {}"),
    ],
)
def test_a_bad_model_dimensions_or_format_is_a_400_naming_it(llama_server, extra, param, words):
    status, body = _post(llama_server, {"model": "smollm2", "input": ["a note"], **extra})
    assert status == 400 and body["error"]["param"] == param
    assert words in body["error"]["message"]


def test_dimensions_equal_to_the_model_s_are_answered(llama_server):
    status, body = _post(llama_server, {"input": ["a note"], "dimensions": 576})
    assert status == 200 and len(body["data"][0]["embedding"]) == 576


def test_the_last_block_early_exit_reads_is_named_in_the_refusal(llama_server):
    status, body = _post(llama_server, {"model": "smollm2:l_out-29", "input": ["a note"]})
    assert status == 404
    assert "early exit reads block 0 to 28, not 29" in body["error"]["message"]


def test_base64_is_little_endian_float32_and_an_unknown_format_is_refused(llama_server):
    text = "Restock, next week is fine."
    _, floats = _post(llama_server, {"input": [text], "encoding_format": "float"})
    status, packed = _post(llama_server, {"input": [text], "encoding_format": "base64"})
    assert status == 200
    got = np.frombuffer(base64.b64decode(packed["data"][0]["embedding"]), dtype="<f4")
    want = np.asarray(floats["data"][0]["embedding"], dtype=np.float32)
    assert got.shape == (576,) and np.array_equal(got, want)
    status, body = _post(llama_server, {"input": [text], "encoding_format": "int8"})
    assert status == 400 and body["error"]["param"] == "encoding_format"
    assert "float, base64" in body["error"]["message"]


def test_the_http_client_refuses_the_mistakes_before_sending_and_stays_healthy(llama_server):
    model = OpenAICompatible(llama_server, "smollm2", timeout_s=120, max_retries=0)
    for name, (value, _, words) in MISTAKES.items():
        if name == "too many":
            continue  # the server's limit, not the client's
        with pytest.raises(InputError, match=words if not isinstance(value, str) else "one string"):
            model.embed(value)
    for _ in range(4):  # more than the breaker's 3 failures
        with pytest.raises(ContextLengthExceeded, match="HTTP 400"):
            model.embed(["fine", LONG])
    assert model.breaker.state().failures == 0
    assert model.embed(["fine"]).shape == (1, 576)


def test_the_embedded_model_refuses_the_mistakes_as_value_errors(embedded_model):
    for name, (value, _, words) in MISTAKES.items():
        if name == "too many":
            continue  # in process any number of texts is fine
        with pytest.raises(ValueError, match=words if not isinstance(value, str) else "one string"):
            embedded_model.embed(value)
    with pytest.raises(InputError, match="one string"):
        embedded_model.embed("a note")  # would be read as one text per character
    with pytest.raises(ContextLengthExceeded, match="512"):
        embedded_model.embed([LONG])
    assert embedded_model.breaker.state().failures == 0
