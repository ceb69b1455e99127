"""Option log-likelihood scoring on the real embedded model and on real loopback servers."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from marlm.llm.backends import OpenAICompatible, default_model_path
from marlm.llm.scoring import (
    CONTENT_FREE_INPUTS,
    OptionScores,
    ScoringUnsupported,
    calibrated,
    content_free_logprobs,
    score,
)

PROMPT = 'Is the order urgent or normal?\n\nNote: "The truck leaves at 11."\nUrgency:'
OPTIONS = (" urgent", " normal", " low", " not urgent at all")


@pytest.fixture(scope="module")
def reference_llama():
    """A second Llama over the same file, keeping the logits of every position (logits_all).
    One thread, as the embedded model: llama-cpp-python's default evaluates prompts on every core,
    whose threads wait for each other, and beside one busy process that took past 30 s."""
    from llama_cpp import Llama

    return Llama(
        model_path=str(default_model_path()), n_ctx=512, logits_all=True, verbose=False,
        n_threads=1, n_threads_batch=1,
    )  # fmt: skip


def reference_logprob(llama, prompt: str, option: str) -> float:
    """sum_i log softmax(logits at position before o_i)[o_i], from one full-sequence eval."""
    p = llama.tokenize(prompt.encode(), add_bos=True, special=True)
    o = llama.tokenize(option.encode(), add_bos=False, special=False)
    llama.reset()
    llama.eval(p + o)
    total = 0.0
    for i, tok in enumerate(o):
        logits = llama.scores[len(p) - 1 + i].astype(np.float64)
        total += logits[tok] - (logits.max() + np.log(np.exp(logits - logits.max()).sum()))
    return float(total)


def test_embedded_scores_match_a_full_sequence_reference(embedded_model, reference_llama):
    got = score(embedded_model, PROMPT, OPTIONS)
    assert got.options == OPTIONS
    assert got.logprobs.shape == (4,) and got.logprobs.dtype == np.float64
    assert got.n_tokens[0] == 1 and got.n_tokens[3] > 1
    want = [reference_logprob(reference_llama, PROMPT, o) for o in OPTIONS]
    # Same weights; only the batch split differs (KV reuse), which moves the float sums a little.
    np.testing.assert_allclose(got.logprobs, want, atol=0.15)
    assert np.all(got.logprobs < 0)


def test_scores_do_not_depend_on_what_was_scored_before(embedded_model):
    prefix = PROMPT[: PROMPT.index("Note:")]
    first = score(embedded_model, PROMPT, OPTIONS, cache_prefix=prefix)
    plain = score(embedded_model, PROMPT, OPTIONS)
    score(embedded_model, "Something else entirely, 全然不同的文字。", OPTIONS)
    other = score(embedded_model, prefix + 'Note: "x"\nUrgency:', OPTIONS, cache_prefix=prefix)
    again = score(embedded_model, PROMPT, OPTIONS, cache_prefix=prefix)
    assert other.calls == 3  # prefix alone, then the rest, then the 4-token option
    assert again.calls == 2  # the prefix stayed in the KV cache: the rest, the option
    np.testing.assert_array_equal(again.logprobs, first.logprobs)
    np.testing.assert_array_equal(score(embedded_model, PROMPT, OPTIONS).logprobs, plain.logprobs)
    # With or without a cached prefix: the same model, split into batches differently.
    np.testing.assert_allclose(first.logprobs, plain.logprobs, atol=0.15)


def test_a_longer_option_is_less_likely_than_its_own_prefix(embedded_model):
    got = score(embedded_model, PROMPT, (" not", " not urgent", " not urgent at all"))
    assert got.logprobs[0] > got.logprobs[1] > got.logprobs[2]


def test_chat_after_scoring_still_answers(embedded_model):
    score(embedded_model, PROMPT, OPTIONS)
    out = embedded_model.chat([{"role": "user", "content": "Say hi."}], max_tokens=8)
    assert out.completion_tokens > 0


def test_content_free_is_a_distribution_and_calibration_subtracts_it(embedded_model):
    prompts = [PROMPT.replace("The truck leaves at 11.", cf) for cf in CONTENT_FREE_INPUTS]
    cf = content_free_logprobs(embedded_model, prompts, OPTIONS)
    assert np.exp(cf.logprobs).sum() == pytest.approx(1.0)
    assert cf.calls >= len(prompts)
    raw = score(embedded_model, PROMPT, OPTIONS)
    cal = calibrated(embedded_model, PROMPT, OPTIONS, cf)
    np.testing.assert_allclose(cal.logprobs, raw.logprobs - cf.logprobs, atol=0.15)
    assert cal.method == "calibrated(embedded)"
    # Given as prompts instead of precomputed scores: the same result.
    cal2 = calibrated(embedded_model, PROMPT, OPTIONS, prompts)
    np.testing.assert_allclose(cal2.logprobs, cal.logprobs, atol=0.15)


def test_calibration_known_answer():
    # Zhao et al. (2021): p_cf = (0.8, 0.2) means a note scored (0.6, 0.4) leans to class 2.
    cf = OptionScores((" a", " b"), np.log([0.8, 0.2]), (1, 1), 0.0, "x")
    note = np.log([0.6, 0.4])
    corrected = note - cf.logprobs
    assert corrected.argmax() == 1
    q = np.exp(corrected) / np.exp(corrected).sum()
    np.testing.assert_allclose(q, [0.6 / 0.8, 0.4 / 0.2] / np.sum([0.6 / 0.8, 0.4 / 0.2]))


def test_calibration_refuses_content_free_scores_of_other_options(embedded_model):
    cf = OptionScores((" a", " b"), np.log([0.5, 0.5]), (1, 1), 0.0, "x")
    with pytest.raises(ValueError, match="same options"):
        calibrated(embedded_model, PROMPT, (" urgent", " normal"), cf)


def test_bad_options_and_oversized_prompts_raise_value_error(embedded_model):
    with pytest.raises(ValueError, match="empty"):
        score(embedded_model, PROMPT, ())
    with pytest.raises(ValueError, match="empty"):
        score(embedded_model, PROMPT, (" urgent", ""))
    with pytest.raises(ValueError, match="does not fit the context"):
        score(embedded_model, "word " * 5000, OPTIONS)


def test_a_model_without_logprobs_is_unsupported(scripted):
    with pytest.raises(ScoringUnsupported):
        score(scripted(["{}"]), PROMPT, OPTIONS)


# ----------------------------------------------------------------------------- servers


# llama-cpp-python's own server (wrong or no prompt log-probabilities): scoring is unsupported and
# the verdict kept, asserted in tests/llm/test_triage.py's
# test_real_server_without_prompt_logprobs_falls_back_to_generate_and_warns_once, on the backend
# whose triage then falls back (its probe takes seconds, so it runs once for both).


class _EchoHandler(BaseHTTPRequestHandler):
    """``/v1/completions`` with ``echo`` and ``logprobs`` as vLLM answers it, computed by a real
    llama.cpp model: ``token_logprobs[i] = log P(token_i | tokens before it)``. With
    ``shift=True`` it answers as llama-cpp-python's server does (one position late, #1983)."""

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        llama, shift = self.server.llama, self.server.shift
        with self.server.lock:
            toks = llama.tokenize(body["prompt"].encode(), add_bos=True, special=True)
            llama.reset()
            llama.eval(toks)
            logits = np.asarray(llama.scores[: len(toks)], dtype=np.float64)
        logz = logits.max(axis=1) + np.log(np.exp(logits - logits.max(axis=1)[:, None]).sum(axis=1))
        logp = logits - logz[:, None]
        values, offsets, text = [None], [0], b""
        for i in range(1, len(toks)):
            text = llama.detokenize(toks[:i])
            offsets.append(len(text.decode("utf-8", errors="ignore")))
            row = i if shift else i - 1
            values.append(float(logp[row, toks[i]]))
        offsets[0] = 0
        values.append(-0.1)  # the one generated token
        offsets.append(len(body["prompt"]))
        data = json.dumps(
            {
                "choices": [
                    {
                        "text": body["prompt"] + " x",
                        "logprobs": {"text_offset": offsets, "token_logprobs": values},
                    }
                ]
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture(scope="module")
def echo_server(reference_llama):
    servers = {}
    for shift in (False, True):
        srv = ThreadingHTTPServer(("127.0.0.1", 0), _EchoHandler)
        srv.llama, srv.shift, srv.lock = reference_llama, shift, threading.Lock()
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers[shift] = srv
    yield {k: f"http://127.0.0.1:{s.server_address[1]}/v1" for k, s in servers.items()}
    for s in servers.values():
        s.shutdown()
        s.server_close()


def test_server_echo_logprobs_give_the_embedded_scores(echo_server, embedded_model):
    # A generous timeout: it bounds a hang, not the speed of the machine.
    got = score(OpenAICompatible(echo_server[False], "m", timeout_s=600), PROMPT, OPTIONS)
    assert got.method == "server-echo"
    assert got.calls == len(OPTIONS)
    want = score(embedded_model, PROMPT, OPTIONS)
    np.testing.assert_allclose(got.logprobs, want.logprobs, atol=0.15)
    assert got.n_tokens == want.n_tokens


def test_server_with_shifted_logprobs_fails_the_probe(echo_server):
    with pytest.raises(ScoringUnsupported, match="probe"):
        score(echo_server[True], PROMPT, OPTIONS)
