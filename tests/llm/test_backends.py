"""Backends: the embedded model under a grammar, the real loopback server, and injected faults."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading

import pytest

from marlm.errors import InputError
from marlm.llm.agent import ToolAgent
from marlm.llm.backends import (
    BackendClosed,
    BackendError,
    BackendHTTPError,
    BackendTimeout,
    ChatModel,
    ContextLengthExceeded,
    EmbeddedModel,
    OpenAICompatible,
    make_backend,
)
from marlm.llm.breaker import FakeClock
from marlm.llm.reward import SCORE_SCHEMA

HELLO = [{"role": "user", "content": "Rate this: the robot reached its goal."}]


def test_embedded_model_follows_the_schema(embedded_model):
    assert isinstance(embedded_model, ChatModel)
    r = embedded_model.chat(HELLO, schema=SCORE_SCHEMA, max_tokens=12)
    assert r.structured == "grammar" and r.validation_error is None
    assert json.loads(r.text)["score"] in (-1, 0, 1)
    assert r.completion_tokens > 0 and r.latency_s > 0


def test_embedded_model_timeout_is_backend_timeout(embedded_model):
    slow = EmbeddedModel(embedded_model.model_path, timeout_s=1e-6)
    with pytest.raises(BackendTimeout):
        slow.chat(HELLO, max_tokens=8)


def test_embedded_model_missing_file_is_backend_error(tmp_path):
    with pytest.raises(BackendError, match="not found"):
        EmbeddedModel(tmp_path / "nope.gguf")


def test_embedded_prompt_longer_than_the_context_is_context_length_exceeded(embedded_model):
    small = EmbeddedModel(embedded_model.model_path, n_ctx=64)
    with pytest.raises(ContextLengthExceeded):
        small.chat([{"role": "user", "content": "word " * 200}], max_tokens=4)
    assert small.breaker.state().failures == 0
    assert small.chat(HELLO, max_tokens=2).completion_tokens > 0  # still usable


def test_close_cancels_the_call_in_flight_then_frees_the_model(embedded_model):
    model = EmbeddedModel(embedded_model.model_path)
    outcome: list[BaseException | object] = []

    def call() -> None:
        try:
            outcome.append(model.chat(HELLO, max_tokens=400))
        except BaseException as e:  # noqa: BLE001 - recorded for the assertion
            outcome.append(e)

    worker = threading.Thread(target=call)
    worker.start()
    for _ in range(2000):  # bounded: until the call holds the model
        if model.lock.locked() or outcome:
            break
        worker.join(0.005)
    assert model.close(timeout_s=60) is True
    worker.join(60)
    assert model.closed and not worker.is_alive()
    assert len(outcome) == 1
    assert isinstance(outcome[0], BackendClosed) or not isinstance(outcome[0], BaseException)
    with pytest.raises(BackendClosed):
        model.chat(HELLO, max_tokens=2)
    with pytest.raises(BackendClosed):
        model.score("Is it urgent?", [" yes", " no"])
    assert model.close() is True  # idempotent


def test_cancel_stops_the_threads_calls_and_the_model_stays_usable(embedded_model):
    outcome: list[object] = []

    def call() -> None:
        for _ in range(3):  # the call in flight and the later calls of this thread
            try:
                outcome.append(embedded_model.chat(HELLO, max_tokens=400))
            except BackendError as e:
                outcome.append(e)

    worker = threading.Thread(target=call)
    worker.start()
    for _ in range(2000):  # bounded: until the call holds the model
        if embedded_model.lock.locked() or outcome:
            break
        worker.join(0.005)
    assert embedded_model.cancel(timeout_s=60, thread=worker) is True
    worker.join(60)
    assert not worker.is_alive() and len(outcome) == 3
    assert all(isinstance(o, BackendClosed) and "cancelled" in str(o) for o in outcome[-2:])
    assert embedded_model.breaker.state().failures == 0
    # other threads are not cancelled
    assert embedded_model.chat(HELLO, max_tokens=2).completion_tokens > 0


EXIT_WITH_A_CALL_IN_FLIGHT = textwrap.dedent(
    """
    import atexit, threading, time

    # Registered first, so it runs after the backend's own exit hook (atexit is LIFO).
    atexit.register(lambda: print("at exit: closed", model.closed, "busy", model.lock.locked()))
    from marlm.llm.backends import EmbeddedModel

    model = EmbeddedModel()
    prompt = "The warehouse robot carried shelves. " * 150  # a long decode, as a batch prior's

    def work():
        for _ in range(50):
            model.score(prompt + "Is it urgent?", [" yes", " no"])

    threading.Thread(target=work, daemon=True).start()
    while not model.lock.locked():
        time.sleep(0.001)
    print("exiting with a call in flight", flush=True)
    """
)


def test_process_exit_with_a_call_in_flight_is_clean():  # backend case 7 (library side)
    # Without the exit hook the interpreter's teardown frees the model under the running decode
    # (seen as exit 139 from `marlm demo --steps 50`); with it the call is stopped first and the
    # model is never freed.
    for _ in range(2):
        proc = subprocess.run(
            [sys.executable, "-c", EXIT_WITH_A_CALL_IN_FLIGHT],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
        assert "exiting with a call in flight" in proc.stdout
        assert "at exit: closed True busy False" in proc.stdout


def test_embedded_score_is_a_method_under_the_same_guard(embedded_model):
    from marlm.llm.scoring import score

    got = embedded_model.score("Is the order urgent?\nAnswer:", [" yes", " no"])
    assert got.method == "embedded" and got.logprobs.shape == (2,)
    same = score(embedded_model, "Is the order urgent?\nAnswer:", [" yes", " no"])
    assert same.logprobs.tolist() == got.logprobs.tolist()
    slow = EmbeddedModel(embedded_model.model_path, timeout_s=1e-6)
    with pytest.raises(BackendTimeout):
        slow.score("Is the order urgent?\nAnswer:", [" yes", " no"])


@pytest.mark.parametrize("spec", ["embedded", None])
def test_the_factory_builds_the_embedded_model(spec):
    model = make_backend(spec)
    assert isinstance(model, EmbeddedModel) and model.timeout_s == 60.0  # DEFAULT_TIMEOUT_S
    model.close()


def test_the_factory_takes_a_gguf_path(embedded_model):
    model = make_backend(str(embedded_model.model_path), timeout_s=5)
    assert isinstance(model, EmbeddedModel) and model.timeout_s == 5.0
    model.close()


def test_llm_timeout_reaches_every_backend(fault_server):
    # --llm-timeout goes to build_planner (hybrid.build) for every command: one meaning, any
    # backend
    from marlm.hybrid.build import build_planner

    embedded = build_planner("llm", "embedded", timeout_s=7).model
    server = build_planner("llm", fault_server.base("ok~timeout"), timeout_s=7).model
    assert (embedded.timeout_s, server.timeout_s) == (7.0, 7.0)
    embedded.close()


@pytest.mark.parametrize("spec", ["ftp://x", "model.bin", "/nope/model.gguf", ""])
def test_the_factory_refuses_other_values_naming_the_option(spec):
    with pytest.raises(InputError) as e:
        make_backend(spec, check=False, option="--llm")
    assert e.value.field == "--llm"


# ----------------------------------------------------------------------------- real server


def test_our_server_takes_json_schema_at_once_and_answers_are_validated(llama_server):
    model = OpenAICompatible(llama_server, "smollm2", timeout_s=120)
    assert isinstance(model, ChatModel)
    r = model.chat(HELLO, schema=SCORE_SCHEMA, max_tokens=12)
    # llama-cpp-python's own request model allows text/json_object only; marlm's server maps
    # json_schema to json_object with the schema, so the first shape tried is accepted
    assert r.structured == "json_schema" and model.structured_mode == "json_schema"
    assert r.validation_error is None
    assert json.loads(r.text)["score"] in (-1, 0, 1)
    assert r.prompt_tokens > 0 and r.completion_tokens > 0


def test_tool_agent_over_http(llama_server, warehouse):
    model = OpenAICompatible(llama_server, "smollm2", timeout_s=120, structured="json_object")
    r = ToolAgent(model, warehouse.registry, max_iter=1, max_retry=0, max_tokens=40).run(
        "What is the status of robot 1?"
    )
    # Any valid ending: the reply text is the model's (see test_agent's real-model test).
    assert r.reason in {"answer", "max_iter", "repeated_call", "max_retry"}
    # the server's grammar keeps replies to valid actions; only a cut-off or bad args may retry
    assert all(s.error_kind in ("truncated", "invalid_args") for s in r.steps if s.kind == "retry")
    assert all(c.completion_tokens > 0 for c in r.calls)


# ----------------------------------------------------------------------------- faults


def test_refused_connection_is_backend_error_after_retries(refused_url, warehouse):
    model = OpenAICompatible(refused_url, timeout_s=2, max_retries=2, backoff_s=0.01)
    r = ToolAgent(model, warehouse.registry).run("x")
    assert r.reason == "backend_error"
    assert "3 attempts" in r.detail and "connection error" in r.detail


def test_never_answers_is_timeout_within_the_timeout(fault_server, warehouse):  # case 12
    model = OpenAICompatible(fault_server.base("hang~agent"), timeout_s=0.5, max_retries=2)
    r = ToolAgent(model, warehouse.registry).run("x")
    assert r.reason == "timeout" and "within 0.5 s" in r.detail
    assert fault_server.count("hang~agent") == 1  # timeouts are not retried


def test_server_error_is_retried_with_backoff_then_backend_error(fault_server):
    clock = FakeClock()
    model = OpenAICompatible(
        fault_server.base("500~retry"), timeout_s=5, max_retries=2, backoff_s=0.25, clock=clock
    )
    with pytest.raises(BackendHTTPError, match="HTTP 500") as e:
        model.chat(HELLO)
    assert e.value.status == 500 and "3 attempts" in str(e.value)
    assert fault_server.count("500~retry") == 3
    assert clock.sleeps == [0.25, 0.5]  # backoff_s * 2**attempt


def test_one_server_error_then_success(fault_server):
    model = OpenAICompatible(fault_server.base("flaky"), timeout_s=2, max_retries=1, backoff_s=0.01)
    assert json.loads(model.chat(HELLO).text)["type"] == "finish"


def test_whitespace_forever_is_timeout(fault_server, warehouse):
    model = OpenAICompatible(fault_server.base("whitespace~agent"), timeout_s=0.5)
    r = ToolAgent(model, warehouse.registry).run("x")
    assert r.reason == "timeout" and "kept sending" in r.detail and "0.5 s" in r.detail
    assert fault_server.count("whitespace~agent") == 1


def test_truncated_body_is_backend_error(fault_server, warehouse):
    model = OpenAICompatible(fault_server.base("truncated_body"), timeout_s=2)
    r = ToolAgent(model, warehouse.registry).run("x")
    assert r.reason == "backend_error" and "not complete JSON" in r.detail


def test_truncated_answer_is_fed_back_and_ends_in_max_retry(fault_server, warehouse):
    model = OpenAICompatible(fault_server.base("truncated_content"), timeout_s=2)
    r = ToolAgent(model, warehouse.registry, max_retry=1).run("x")
    assert r.reason == "max_retry"
    assert r.steps[0].error_kind == "truncated" and "cut off" in r.steps[0].feedback


def test_server_rejecting_both_shapes_gets_prompt_plus_validation(fault_server):
    model = OpenAICompatible(fault_server.base("picky"), timeout_s=2, max_retries=0)
    r = model.chat(HELLO, schema=SCORE_SCHEMA, max_tokens=12)
    assert r.structured == "prompt"
    bodies = fault_server.bodies("picky")[-3:]
    assert [b.get("response_format", {}).get("type") for b in bodies] == [
        "json_schema",
        "json_object",
        None,
    ]
    assert '"score"' in bodies[-1]["messages"][0]["content"]  # the schema went into the prompt
    # the scripted answer does not follow the score schema: the client-side check says so
    assert r.validation_error is not None and "score" in r.validation_error
    model.chat(HELLO, schema=SCORE_SCHEMA)
    assert fault_server.bodies("picky")[-1].get("response_format") is None  # mode was kept


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"base_url": "127.0.0.1:8000"}, "base_url"),
        ({"base_url": "http://x/v1", "timeout_s": 0}, "timeout_s"),
        ({"base_url": "http://x/v1", "structured": "grammar"}, "structured"),
    ],
)
def test_bad_backend_options_are_input_errors(kwargs, field):
    with pytest.raises(InputError) as e:
        OpenAICompatible(**kwargs)
    assert e.value.field == field


def test_embed_reuses_the_shared_opening_and_gives_llama_cpps_own_values(embedded_model):
    """Texts that open alike decode only their new tokens; the means equal ``Llama.embed``'s."""
    import numpy as np

    texts = [
        'Warehouse order note: "Line 3 is down."\nAnswer:',
        'Warehouse order note: "No hurry."\nAnswer:',
        'Warehouse order note: "No hurry."\nAnswer:',  # the same text again
        "Something else entirely.",
        'Warehouse order note: "No',  # a prefix of an earlier text
    ]
    embedded_model.embed(["warm-up"])  # makes the embedding context
    llama = embedded_model._embedder
    decoded = []
    set_batch = llama._batch.set_batch
    llama._batch.set_batch = lambda toks, n_past, all_: (
        decoded.append(len(toks)) or set_batch(toks, n_past, all_)
    )
    try:
        got = np.vstack([embedded_model.embed([t]) for t in texts])
    finally:
        del llama._batch.set_batch
    n_tokens = [len(llama.tokenize(t.encode())) for t in texts]
    opening = len(llama.tokenize(b'Warehouse order note: "'))
    assert decoded[0] == n_tokens[0]  # nothing in common with "warm-up"
    assert decoded[1] == n_tokens[1] - opening  # the template's opening is not decoded again
    assert decoded[2] == 1  # the same text: only its last token
    cached_tokens, states = embedded_model._embed_cache
    assert len(cached_tokens) == states.shape[0] == n_tokens[-1]
    want = [np.mean(llama.embed(t, normalize=False, truncate=False), axis=0) for t in texts]
    embedded_model._embed_cache = ((), None)  # Llama.embed cleared the KV cache
    assert np.allclose(got, np.asarray(want), rtol=0, atol=1e-4)
    assert np.array_equal(got[1], got[2])


def test_a_server_that_refuses_the_connection_is_said_at_once(capsys):
    # The backend stays usable (calls retry, the rule plans meanwhile), but the user is told
    # before the run that the URL did not answer, instead of a run that silently used the rule.
    from faultserver import free_port

    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    with pytest.warns(RuntimeWarning, match=r"did not answer \(ConnectError.*refused") as said:
        backend = make_backend(url, timeout_s=2.0, max_retries=0)
    # It said "the rule plans until the server answers" to every user of a backend, also to
    # a ToolAgent or an LLM reward, where no rule plans.
    assert "fail until the server answers (a planner falls back" in str(said[0].message)
    assert isinstance(backend, OpenAICompatible)


def test_the_command_shows_marlm_warnings_as_one_line_and_others_as_python_does(capsys):
    import warnings

    import marlm.llm.backends as backends
    from marlm.cli import show_warning

    show_warning(RuntimeWarning("no hidden states"), RuntimeWarning, backends.__file__, 12)
    assert capsys.readouterr().err == "marlm: warning: no hidden states\n"
    show_warning(RuntimeWarning("elsewhere"), RuntimeWarning, warnings.__file__, 7)
    err = capsys.readouterr().err
    assert "RuntimeWarning: elsewhere" in err and "marlm: warning" not in err


def test_embed_batched_decodes_a_request_at_once_with_embeds_values(embedded_model):
    """Four texts, one multi-sequence decode; their means are embed()'s (float32 attention over
    a longer cache moves them by well under 1%) and the shared opening is decoded once."""
    import llama_cpp
    import numpy as np

    texts = [
        'Warehouse order note: "Line 3 is down."\nIs this order urgent? Answer:',
        'Warehouse order note: "No hurry."\nIs this order urgent? Answer:',
        'Warehouse order note: "客户在柜台等着，请加急。"\nIs this order urgent? Answer:',
        'Warehouse order note: "Restock, next week is fine."\nIs this order urgent? Answer:',
    ]
    one_by_one = np.vstack([embedded_model.embed([t]) for t in texts])
    embedded_model.embed(["Something else entirely."])  # nothing shared in the cache
    decode = llama_cpp.llama_decode
    sizes: list[int] = []
    llama_cpp.llama_decode = lambda ctx, batch: sizes.append(batch.n_tokens) or decode(ctx, batch)
    try:
        got = embedded_model.embed_batched(texts)
    finally:
        llama_cpp.llama_decode = decode
    llama = embedded_model._embedder
    n_tokens = [len(llama.tokenize(t.encode())) for t in texts]
    opening = len(llama.tokenize(b'Warehouse order note: "'))
    assert got.shape == (4, llama.n_embd()) and got.dtype == np.float32
    assert sizes == [sum(n_tokens) - 3 * opening]  # one decode, the opening once
    rel = np.abs(got - one_by_one).max(axis=1) / np.abs(one_by_one).max(axis=1)
    assert rel[0] < 1e-5 and rel.max() < 0.01
    # the next request reuses the opening held in sequence 0
    again = embedded_model.embed_batched(texts[1:3])
    rel = np.abs(again - one_by_one[1:3]).max(axis=1) / np.abs(one_by_one[1:3]).max(axis=1)
    assert rel[0] < 1e-5 and rel.max() < 0.01
    assert embedded_model.embed_batched([]).shape == (0, llama.n_embd())
