"""``marlm llm serve`` stops at once on Ctrl-C or SIGTERM, even while a generation runs for a
client that has gone: it took ~35 s (uvicorn's graceful stop waits for the request in flight,
and a request without ``max_tokens`` generated to the end of the context). The stop is an event,
checked by llama-cpp-python's own stopping criteria at every token: these tests set it and count
tokens, with the real embedded model; no clock is read."""

from __future__ import annotations

import signal
import threading

from marlm.llm.server import _served_model, build_app, stop_generation_on, stopping_server

MESSAGES = [{"role": "user", "content": "Write a long story about a robot in a warehouse."}]


def test_a_stop_ends_the_served_models_generation_at_its_next_token():
    build_app(n_ctx=256, n_threads=1)  # the app of `marlm llm serve`, real model loaded
    llama = _served_model()
    stop = threading.Event()
    stop_generation_on(llama, stop)
    seen: list[int] = []

    def own(input_ids, logits) -> bool:  # a request's own criteria are kept
        seen.append(len(input_ids))
        return False

    def chat() -> dict:  # what the server's /v1/chat/completions calls
        return llama.create_chat_completion(MESSAGES, max_tokens=5, temperature=0.0)

    def complete() -> dict:
        return llama.create_completion(
            "One, two, three,", max_tokens=3, temperature=0.0, stopping_criteria=[own]
        )

    going, plain = chat(), complete()
    assert going["choices"][0]["finish_reason"] == "length"
    assert going["usage"]["completion_tokens"] == 5
    assert plain["usage"]["completion_tokens"] == 3 and len(seen) == 4  # a token each, the end
    stop.set()  # Ctrl-C: the next token is not generated
    stopped, cut = chat(), complete()
    assert stopped["choices"][0]["finish_reason"] == "stop"
    assert stopped["usage"]["completion_tokens"] == 0
    assert cut["usage"]["completion_tokens"] == 0 and cut["choices"][0]["finish_reason"] == "stop"


def test_the_servers_signal_handler_sets_the_stop_before_uvicorns_graceful_stop():
    async def app(scope, receive, send):  # never called: no request is made
        raise AssertionError

    stop = threading.Event()
    server, stopped = stopping_server(app, stop)
    assert not stop.is_set() and not server.should_exit
    server.handle_exit(signal.SIGTERM, None)
    assert stop.is_set() and server.should_exit and stopped == [signal.SIGTERM]
