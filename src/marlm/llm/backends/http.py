"""The HTTP backend: a chat model behind an OpenAI-compatible server (vLLM, Ollama, llama.cpp,
OpenAI), with structured output negotiated per server, retries, and scoring from echoed prompt
log-probabilities; every call through one :class:`~.guard.Guard`. Replies are read by
:mod:`.replies`; one deadline bounds each call's socket operations (:mod:`.deadlines`).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from marlm.errors import InputError

from ..actions import validate_answer
from ..breaker import CircuitBreaker, Clock, SystemClock
from ..errors import (
    BackendError,
    BackendHTTPError,
    BackendTimeout,
    ContextLengthExceeded,
    EndpointNotFound,
    MalformedReply,
    ScoringUnsupported,
)
from ..scoring import (
    PROBE_TEXT,
    OptionScores,
    check_options,
    echo_body,
    option_logprob,
    parse_echo,
    probe_verdict,
)
from .deadlines import hold_deadlines, http_timeouts, total_deadline
from .guard import Guard, check_timeout, default_breaker
from .protocols import ChatResult, Message
from .replies import (
    _may_refuse_shape,
    _Rejected,
    _Retryable,
    _short,
    events_body,
    not_found,
    read_chat_reply,
    status_error,
    with_schema_prompt,
)

if TYPE_CHECKING:
    from openai import APIResponse

#: Longest wait of :meth:`OpenAICompatible.cancel` for the call in flight (seconds).
HTTP_CANCEL_WAIT_S = 1.0


StructuredMode = Literal["auto", "json_schema", "json_object", "prompt"]
_MODE_ORDER: tuple[str, ...] = ("json_schema", "json_object", "prompt")


class OpenAICompatible:
    """A chat model behind an OpenAI-compatible HTTP server (vLLM, Ollama, llama.cpp, OpenAI).

    Structured output: with ``structured="auto"`` the first call with a schema tries, in order,
    ``response_format={"type": "json_schema", ...}`` (vLLM, Ollama, llama.cpp's C++ server, OpenAI),
    then ``{"type": "json_object", "schema": ...}`` (llama-cpp-python's server, whose request model
    accepts only ``text``/``json_object``), then plain prompting with the schema in the system
    prompt. A mode is dropped when the server's error names the structured-output request
    (``response_format``, ``json_schema``, ``JSON schema``, ``grammar``, ...), whatever the status
    (llama-cpp-python's server reports its request-validation error as HTTP 500), and when the
    server refuses it without saying why (any 4xx or 5xx but 401, 403, 404, 408, 429, after the
    usual retries) while the next mode is accepted; the first accepted mode is kept for later
    calls. When even the plainest request fails, that failure is reported as it is and the modes
    stay. A prompt longer than the context (:class:`ContextLengthExceeded`, recognised before
    anything else) never changes the mode. Every answer is validated client-side
    (:attr:`ChatResult.validation_error`).

    Failures: connection errors, HTTP 429 and 5xx are retried up to ``max_retries`` times. The
    wait before a retry is the server's ``Retry-After`` when it sends one, else exponential
    backoff (``backoff_s * 2**attempt``); a wait that would pass the call's timeout is not taken
    and the call fails at once. ``timeout_s`` bounds the whole call: waiting for the lock, every
    attempt (no answer at all, or a body that keeps trickling in, such as whitespace sent
    forever) and every wait; passing it raises :class:`BackendTimeout`, which is not retried.
    HTTP 404 raises :class:`EndpointNotFound` (naming the URL, suggesting ``/v1`` when the base
    URL lacks it); other HTTP errors :class:`BackendHTTPError`; a prompt too long for the
    server's context :class:`ContextLengthExceeded`. After ``breaker.max_failures`` consecutive
    failures the circuit breaker refuses calls for its cool-down (:class:`CircuitOpen`).

    Args:
        base_url: the server's API root, e.g. ``http://127.0.0.1:8000/v1``.
        model: the model name the server expects.
        api_key_env: environment variable holding the API key; unset means ``"not-needed"``
            (local servers ignore it).
        timeout_s: wall-time limit of one call in seconds (all attempts and waits).
        max_retries: retries after a connection error, 429 or 5xx (0 = one attempt only).
        backoff_s: first backoff delay in seconds, when the server sends no ``Retry-After``.
        structured: ``"auto"`` or one fixed mode (``json_schema``, ``json_object``, ``prompt``).
        breaker: the circuit breaker (default: opens after 3 consecutive failures for 30 s).
        clock: where the timeout, retry waits and the breaker read time (default: the
            monotonic clock and ``time.sleep``).

    Raises:
        InputError: a bad ``base_url``, ``timeout_s``, ``max_retries`` or ``structured``.
    """

    def __init__(
        self,
        base_url: str,
        model: str = "local",
        *,
        api_key_env: str = "OPENAI_API_KEY",
        timeout_s: float = 30.0,
        max_retries: int = 2,
        backoff_s: float = 0.25,
        structured: StructuredMode = "auto",
        breaker: CircuitBreaker | None = None,
        clock: Clock | None = None,
    ) -> None:
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise InputError(
                f"must be an http(s) URL such as http://127.0.0.1:8000/v1, got {base_url!r}",
                field="base_url",
            )
        check_timeout(timeout_s)
        if not isinstance(max_retries, int) or max_retries < 0:
            raise InputError(f"must be 0 or more, got {max_retries}", field="max_retries")
        if structured not in ("auto", *_MODE_ORDER):
            raise InputError(
                f"must be one of auto, {', '.join(_MODE_ORDER)}; got {structured!r}",
                field="structured",
            )
        import openai

        self._openai = openai
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.timeout_s = float(timeout_s)
        self.max_retries = int(max_retries)
        self.backoff_s = float(backoff_s)
        self.name = f"openai:{model}@{self.base_url}"
        self.clock: Clock = clock or SystemClock()
        self.breaker = breaker or default_breaker(self.clock)
        self._guard = Guard(self.breaker, self.clock)
        self._modes = list(_MODE_ORDER) if structured == "auto" else [structured]
        self._probe: str | None = None
        self._probed = False
        self._client = openai.OpenAI(
            base_url=self.base_url,
            api_key=os.environ.get(api_key_env) or "not-needed",
            max_retries=0,
            timeout=self.timeout_s,
        )
        hold_deadlines(self._client._client)  # one total deadline per call: total_deadline()
        self._timeouts = http_timeouts(self._client._client)

    @property
    def structured_mode(self) -> str:
        """The structured-output mode the next call with a schema will try first."""
        return self._modes[0]

    @property
    def lock(self) -> threading.Lock:
        """The lock that serialises calls to the server."""
        return self._guard.lock

    # -- chat ----------------------------------------------------------------------------------

    def chat(
        self,
        messages: list[Message],
        *,
        schema: dict[str, Any] | None = None,
        max_tokens: int = 256,
        temperature: float = 0.0,
        seed: int | None = None,
    ) -> ChatResult:
        """Answer ``messages``; see :class:`ChatModel` and the class docstring for failures."""
        t0 = time.perf_counter()
        deadline = self.clock.now() + self.timeout_s
        with self._guard.call(self.name, deadline, self.timeout_s):
            skipped = 0  # modes passed over in this call after an unexplained refusal
            while True:
                mode = self._modes[skipped] if schema is not None else ""
                body: dict[str, Any] = {
                    "model": self.model,
                    "messages": messages,
                    "max_tokens": int(max_tokens),
                    "temperature": float(temperature),
                }
                if seed is not None:
                    body["seed"] = int(seed)
                if mode == "json_schema":
                    body["response_format"] = {
                        "type": "json_schema",
                        "json_schema": {"name": "answer", "schema": schema, "strict": True},
                    }
                elif mode == "json_object":
                    body["response_format"] = {"type": "json_object", "schema": schema}
                elif mode == "prompt":
                    body["messages"] = with_schema_prompt(messages, schema or {})
                try:
                    data = self._request("chat", body, deadline)
                except _Rejected as e:  # the error names the structured-output request
                    if "response_format" in body and len(self._modes) > skipped + 1:
                        self._modes.pop(skipped)
                        continue
                    raise BackendError(
                        f"{self.name} rejected the structured-output request: {e}",
                        url=self._url("chat"),
                    ) from e
                except BackendHTTPError as e:
                    # A refusal that does not say why (a bare 500 that retries did not cure):
                    # try the next mode; only its success shows that the shape was refused.
                    if (
                        "response_format" in body
                        and len(self._modes) > skipped + 1
                        and _may_refuse_shape(e)
                    ):
                        skipped += 1
                        continue
                    raise  # the plainest request failed too: the shape was not the cause
                if mode and len(self._modes) > 1:
                    self._modes = [mode]  # the server accepted it: keep it
                break
            result = self._result(data, schema, mode, time.perf_counter() - t0)
        return result

    def _result(
        self, data: Any, schema: dict[str, Any] | None, mode: str, latency: float
    ) -> ChatResult:
        try:
            reply = read_chat_reply(data, self.name)
        except BackendError as e:
            e.url = e.url or self._url("chat")
            raise
        text, finish = reply["text"], reply["finish_reason"]
        return ChatResult(
            text=text,
            prompt_tokens=reply["prompt_tokens"],
            completion_tokens=reply["completion_tokens"],
            latency_s=latency,
            finish_reason=finish,
            model=reply["model"] or self.model,
            extra={
                k: reply[k] for k in ("tool_calls", "reasoning") if reply[k]
            },  # what else the reply held: tool calls, a reasoning model's thinking
            structured=mode,
            validation_error=validate_answer(text, schema, finish) if schema is not None else None,
        )

    # -- scoring -------------------------------------------------------------------------------

    def score(
        self, prompt: str, options: Sequence[str], *, cache_prefix: str | None = None
    ) -> OptionScores:
        """Log-likelihood of each option from the server's echoed prompt log-probabilities
        (``/completions`` with ``echo``, ``logprobs``; one request per option). See
        :func:`marlm.llm.scoring.score`. ``cache_prefix`` is ignored (the server keeps its own
        cache). The first call probes that the values are correct (:func:`probe_verdict`).

        Raises:
            ScoringUnsupported: the server has no prompt log-probabilities, or wrong ones.
            BackendTimeout, BackendHTTPError, CircuitOpen, BackendError: as for :meth:`chat`.
        """
        opts = check_options(options)
        t0 = time.perf_counter()
        deadline = self.clock.now() + self.timeout_s
        with self._guard.call(self.name, deadline, self.timeout_s):
            if not self._probed:
                try:
                    offsets, values = self._echo(PROBE_TEXT, deadline)
                    self._probe = probe_verdict(offsets, values, f"server at {self.base_url}")
                except ScoringUnsupported as e:
                    self._probe = str(e)
                self._probed = True
            if self._probe is not None:
                raise ScoringUnsupported(self._probe, url=self.base_url)
            scores: list[float] = []
            n_tokens: list[int] = []
            for option in opts:
                full = prompt + option
                offsets, values = self._echo(full, deadline)
                lp, n = option_logprob(
                    prompt, full, offsets, values, option, f"server at {self.base_url}"
                )
                scores.append(lp)
                n_tokens.append(n)
        import numpy as np

        return OptionScores(
            options=opts,
            logprobs=np.asarray(scores, dtype=np.float64),
            n_tokens=tuple(n_tokens),
            latency_s=time.perf_counter() - t0,
            method="server-echo",
            calls=len(opts),
        )

    def embed(self, texts: Sequence[str]) -> Any:
        """The server's embedding of each text (``POST {base_url}/embeddings``), in one request
        of at most ``timeout_s`` per text: ``float32[len(texts), d]``; see
        :func:`marlm.llm.server_embed.request_embeddings`.

        Raises:
            InputError: ``texts`` is not a non-empty list of non-empty strings (nothing sent).
            ContextLengthExceeded, RequestRefused: the server refused a text as too long, or
                the request as malformed (HTTP 400, 413, 422; not counted by the breaker).
            EmbeddingsUnavailable: the server serves no embeddings (a 404, 405, 501, or an error
                saying so; not retried).
            BackendTimeout, BackendHTTPError, CircuitOpen, BackendClosed, BackendError: as for
                :meth:`chat`.
        """
        from ..server_embed import request_embeddings

        return request_embeddings(self, texts)

    def embed_layer(
        self,
        texts: Sequence[str],
        layer: int,
        *,
        cache_dir: str | Path | None = None,
        weights: str = "Q8_0",
    ) -> Any:
        """Block ``layer``'s output by early exit, from a server that serves it under the model
        name ``<model>:l_out-<layer>`` on Q8_0 weights, ``<model>:l_out-<layer>-q4_0`` on Q4_0
        (``marlm llm serve`` does: :data:`marlm.llm.server_embed.LAYER_SUFFIX`):
        ``float32[len(texts), d]``. ``cache_dir`` is the server's business (accepted for the
        protocol, unused).

        A server that serves only its final states may also ignore the name and answer them:
        the probe trains and reads on whatever this call returns, so its features stay
        consistent either way.

        Raises:
            LayerReadUnavailable: the server does not serve that name (a 404, or a refusal
                naming the model); callers then use :meth:`embed`.
            the rest: as :meth:`embed`.
        """
        from ..server_embed import request_embeddings
        from .layers import layer_feature

        return request_embeddings(
            self, texts, model=f"{self.model}:{layer_feature(layer, weights)}"
        )

    def score_batch(
        self, prompts: Sequence[str], options: Sequence[str], *, cache_prefix: str | None = None
    ) -> list[OptionScores]:
        """:meth:`score` for each prompt (one timeout each)."""
        return [self.score(p, options, cache_prefix=cache_prefix) for p in prompts]

    def _echo(self, text: str, deadline: float) -> tuple[list[int], list[float | None]]:
        where = f"server at {self.base_url}"
        try:
            data = self._request("completions", echo_body(self.model, text), deadline)
        except (BackendHTTPError, _Rejected) as e:
            if isinstance(e, EndpointNotFound) and not self.base_url.endswith("/v1"):
                raise
            if isinstance(e, ContextLengthExceeded):
                raise
            raise ScoringUnsupported(f"{where} refused echo+logprobs ({e})", url=where) from e
        return parse_echo(data, where)

    # -- HTTP ----------------------------------------------------------------------------------

    def _url(self, kind: str) -> str:
        return f"{self.base_url}/{'chat/completions' if kind == 'chat' else 'completions'}"

    def _request(self, kind: str, body: dict[str, Any], deadline: float) -> Any:
        """POST with retries: waits from ``Retry-After`` or backoff, never past ``deadline``."""
        attempt = 0
        while True:
            try:
                return self._attempt(kind, body, deadline)
            except _Retryable as e:
                attempts = attempt + 1
                if attempt >= self.max_retries:
                    raise self._final(e, f"failed after {attempts} attempts: {e}", kind) from e
                wait = e.retry_after if e.retry_after is not None else self.backoff_s * 2**attempt
                left = deadline - self.clock.now()
                if wait >= left:
                    raise self._final(
                        e,
                        f"failed after {attempts} attempts: {e}; the next retry would wait "
                        f"{wait:.2f} s, past the call's {self.timeout_s} s timeout",
                        kind,
                    ) from e
                self.clock.sleep(wait)
                stop = self._guard.stopped(self.name)
                if stop is not None:
                    raise stop from e
                attempt += 1

    def _final(self, e: _Retryable, detail: str, kind: str) -> BackendError:
        message = f"{self.name} {detail}"
        if e.status is None:
            return BackendError(message, url=self._url(kind))
        return BackendHTTPError(message, status=e.status, url=self._url(kind))

    def _attempt(self, kind: str, body: dict[str, Any], deadline: float) -> Any:
        """One HTTP attempt, reading the body under the call's deadline."""
        openai = self._openai
        url = self._url(kind)
        left = deadline - self.clock.now()
        if left <= 0:
            raise BackendTimeout(f"{self.name} did not answer within {self.timeout_s} s", url=url)
        try:
            with total_deadline(left):
                return self._send(kind, body, deadline, left)
        except (openai.APITimeoutError, self._timeouts) as e:  # the latter while reading the body
            raise BackendTimeout(
                f"{self.name} did not answer within {self.timeout_s} s", url=url
            ) from e

    def _send(self, kind: str, body: dict[str, Any], deadline: float, left: float) -> Any:
        openai = self._openai
        url = self._url(kind)
        ctx: contextlib.AbstractContextManager[APIResponse[Any]]
        try:
            if kind == "chat":
                extra = {k: v for k, v in body.items() if k in ("response_format", "seed")}
                ctx = self._client.chat.completions.with_streaming_response.create(
                    model=body["model"],
                    messages=body["messages"],
                    max_tokens=body["max_tokens"],
                    temperature=body["temperature"],
                    extra_body=extra or None,
                    timeout=left,
                )
            else:
                ctx = self._client.completions.with_streaming_response.create(
                    model=body["model"],
                    prompt=body["prompt"],
                    max_tokens=body["max_tokens"],
                    temperature=body["temperature"],
                    echo=body["echo"],
                    logprobs=body["logprobs"],
                    timeout=left,
                )
            with ctx as response:
                chunks: list[bytes] = []
                kept_sending = BackendTimeout(
                    f"{self.name} kept sending without finishing an answer within "
                    f"{self.timeout_s} s",
                    url=url,
                )
                try:
                    for chunk in response.iter_bytes():
                        chunks.append(chunk)
                        if self.clock.now() > deadline:
                            raise kept_sending
                        stop = self._guard.stopped(self.name)
                        if stop is not None:
                            raise stop
                except self._timeouts as e:  # the deadline fell while the body came in
                    if any(chunks):
                        raise kept_sending from e
                    raise
        except openai.APITimeoutError as e:
            raise BackendTimeout(
                f"{self.name} did not answer within {self.timeout_s} s", url=url
            ) from e
        except openai.APIConnectionError as e:
            raise _Retryable(f"connection error: {e.__cause__ or e}", None, None) from e
        except openai.APIStatusError as e:
            raise status_error(self.name, self.base_url, e, kind, body, url) from e
        raw = b"".join(chunks)
        try:
            return json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as e:
            streamed = events_body(raw) if kind == "chat" else None
            if streamed is not None:
                return streamed
            raise MalformedReply(
                f"{self.name} answered with a body that is not complete JSON "
                f"({len(raw)} bytes, {e}): {_short(raw.decode('utf-8', 'replace'))}",
                url=url,
            ) from e

    # -- checks and close ----------------------------------------------------------------------

    def check(self, timeout_s: float = 10.0) -> None:
        """Ask the server for its model list (``GET {base_url}/models``) once, to catch a wrong
        base URL before any work. Only a 404 is decisive; any other outcome (the server is busy,
        has no model list, refuses the connection) is left to the calls themselves, which retry.
        A server that cannot be reached at all (connection refused, no answer within the
        timeout) is worth saying at once, though: a ``RuntimeWarning`` names the URL and the
        error, so that a run planned by the rule throughout does not look like a model's run.

        Raises:
            EndpointNotFound: the server answered 404 (names the URL, suggests ``/v1``).
        """
        url = f"{self.base_url}/models"
        limit = min(timeout_s, self.timeout_s)
        try:
            with total_deadline(limit):
                self._client.models.with_raw_response.list(timeout=limit)
        except self._openai.NotFoundError as e:
            raise not_found(self.base_url, url) from e
        except self._openai.APIConnectionError as e:  # refused, unresolvable, timed out
            cause = e.__cause__ or e
            warnings.warn(
                f"{self.base_url} did not answer ({type(cause).__name__}: {cause}); every model "
                "call will try it again and fail until the server answers (a planner falls back "
                "to the rule meanwhile)",
                RuntimeWarning,
                stacklevel=2,
            )
        except self._openai.OpenAIError:
            return

    def cancel(self, timeout_s: float = 1.0, thread: threading.Thread | None = None) -> bool:
        """Cancel the calls of ``thread`` (default: the thread whose call runs now): its call in
        flight raises :class:`BackendClosed` at its next body chunk or retry wait, its later
        calls at once. Waits at most ``min(timeout_s, 1)`` seconds for that: a call blocked on a
        silent server ends only at its own timeout (the socket is not interrupted), and an
        abandoned HTTP call holds nothing that could crash the process. The openai client
        offers no clean way to interrupt a request still waiting for the response headers
        from another thread: closing the client (``OpenAI.close()``, which closes its httpx
        connection pool) left such a call blocked (measured: still blocked 10 s after the
        close), and reaching its socket would take the client's private internals.

        Returns:
            ``True`` when ``thread`` holds the backend no more.
        """
        return self._guard.cancel(min(timeout_s, HTTP_CANCEL_WAIT_S), thread)

    def close(self, timeout_s: float = 1.0) -> bool:
        """Stop taking calls; a call in flight stops at its next chunk or retry wait. Waits at
        most ``timeout_s`` for it, then closes the HTTP client. Idempotent.

        Returns:
            ``True`` when no call was left in flight.
        """
        self._guard.closing.set()
        idle = self._guard.lock.acquire(timeout=max(timeout_s, 0.0))
        try:
            with contextlib.suppress(Exception):
                self._client.close()
        finally:
            if idle:
                self._guard.lock.release()
        return idle


__all__ = ["HTTP_CANCEL_WAIT_S", "OpenAICompatible", "StructuredMode"]
