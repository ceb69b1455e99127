"""The embedded backend: a GGUF model run in process through llama-cpp-python.

Chat under a grammar built from the answer's JSON schema, option scoring from llama.cpp's logits
(:func:`marlm.llm.scoring.score_llama`), and hidden states for a linear probe
(:meth:`EmbeddedModel.embed`), every call through one :class:`~.guard.Guard`. A call in flight
stops at its next token or decode batch when cancelled or closed; a model still decoding is
never freed (freeing it under a running decode crashes the process).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import json
import numbers
import os
import threading
import time
import weakref
from collections.abc import Generator, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ..actions import validate_answer
from ..breaker import CircuitBreaker, Clock, SystemClock
from ..errors import (
    BackendClosed,
    BackendError,
    BackendTimeout,
    CircuitOpen,
    ContextLengthExceeded,
    LayerReadUnavailable,
)
from ..scoring import OptionScores, check_options, score_llama
from .build import avoid_amx_repack
from .guard import Guard, check_timeout, default_breaker
from .hidden import EMBED_MAX_TOKENS, decode_hidden_states
from .protocols import ChatResult, Message
from .spec import default_model_path

if TYPE_CHECKING:
    from llama_cpp.llama_types import CreateChatCompletionStreamResponse

#: Prompt tokens per llama.cpp decode batch of the embedded model (see :class:`EmbeddedModel`).
EMBEDDED_N_BATCH = 64
#: How long :meth:`EmbeddedModel.close` waits for a call in flight (seconds) by default.
CLOSE_TIMEOUT_S = 30.0

_open_models: weakref.WeakSet[EmbeddedModel] = weakref.WeakSet()


@atexit.register
def _close_open_models() -> None:
    """At interpreter exit, before modules are torn down: stop every embedded model's call in
    flight (bounded wait) and refuse later calls, then keep the model alive for good. Freeing it
    is left to the operating system: a daemon thread still inside llama.cpp while the
    interpreter's teardown freed the model died with a segmentation fault (exit 139)."""
    for model in list(_open_models):
        model.close(free=False)


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
        self.timeout_s = check_timeout(timeout_s)
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
        avoid_amx_repack()
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
        # early-exit readers by (layer, weights) (embed_layer), and why one cannot run
        self._layer_readers: dict[tuple[int, str], Any] = {}
        self._layer_unavailable: dict[tuple[int, str], BackendError] = {}
        self.clock: Clock = clock or SystemClock()
        self.breaker = breaker or default_breaker(self.clock)
        self._guard = Guard(self.breaker, self.clock)
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
        # stream=True: the chunks; llama-cpp-python declares one return type for both shapes
        stream = cast(
            "Iterator[CreateChatCompletionStreamResponse]",
            self._llm.create_chat_completion(**kwargs, stream=True),
        )
        try:
            for chunk in stream:
                check()
                choice = chunk["choices"][0]
                piece = choice.get("delta", {}).get("content")
                if isinstance(piece, str) and piece:
                    parts.append(piece)
                    n_completion += 1
                finish = choice.get("finish_reason") or finish
        finally:
            # llama-cpp-python's stream is a generator today; an iterator that is not (another
            # version) has nothing to release.
            if isinstance(stream, Generator):
                stream.close()
        n_prompt = max(int(self._llm.n_tokens) - n_completion, 0)
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
            InputError: ``texts`` is not a non-empty list of non-empty strings (a ``ValueError``,
                raised before the model runs; the breaker does not count it).
            ContextLengthExceeded: a text has more than :data:`EMBED_MAX_TOKENS` tokens.
            BackendTimeout, CircuitOpen, BackendClosed, BackendError: as for :meth:`chat`.
        """
        import numpy as np

        from ..server_embed import check_texts

        texts = check_texts(texts, field="texts")
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

    def embed_layer(
        self,
        texts: Sequence[str],
        layer: int,
        *,
        cache_dir: str | Path | None = None,
        weights: str = "Q8_0",
    ) -> Any:
        """The mean over each text's tokens of the residual stream after block ``layer``
        (llama.cpp's ``l_out-<layer>``), decoding blocks ``0..layer`` only, on weights derived
        once from this model's file (:mod:`.layers`: the first ``layer + 2`` blocks as
        ``weights``, ``"Q8_0"`` or ``"Q4_0"``, written into ``cache_dir``, default
        :func:`.layers.default_cache_dir`). Prefix reuse as in :meth:`embed`; one thread; the
        same guard (lock, timeout per text, breaker, cancel, close).

        Returns:
            ``float32[len(texts), n_embd]``, unnormalised (the residual stream, before any norm).

        Raises:
            ValueError: ``layer`` is not a whole number >= 0, or ``weights`` is not one of
                :data:`.layers.READER_QTYPES` (neither counts against the breaker).
            LayerReadUnavailable: the early exit cannot run with this model or build (the
                reason says which step); the breaker does not count it. Callers fall back to
                :meth:`embed`.
            InputError, ContextLengthExceeded, BackendTimeout, CircuitOpen, BackendClosed,
                BackendError: as for :meth:`embed`.
        """
        import numpy as np

        from ..server_embed import check_texts
        from .layers import check_weights

        texts = check_texts(texts, field="texts")
        check_weights(weights)
        if isinstance(layer, bool) or not isinstance(layer, numbers.Integral) or layer < 0:
            raise ValueError(f"layer must be a whole number >= 0, got {layer!r}")
        key = (int(layer), weights)
        layer = key[0]
        if key in self._layer_unavailable:
            raise self._layer_unavailable[key]
        with self._guard.call(self.name, self._deadline(), self.timeout_s) as check:
            try:
                reader = self._make_layer_reader(layer, cache_dir, weights)
                reader.clear_abort()
                rows = []
                for text in texts:
                    check()
                    check.renew()
                    tokens = reader.tokenize(text)
                    if len(tokens) > EMBED_MAX_TOKENS:
                        raise ContextLengthExceeded(
                            f"{self.name}: a text of {len(tokens)} tokens is longer than the "
                            f"{EMBED_MAX_TOKENS} tokens embed_layer() takes; shorten it"
                        )
                    rows.append(reader.states(tokens).mean(axis=0))
            except LayerReadUnavailable as e:
                self._layer_unavailable[key] = e
                raise
            except (BackendClosed, BackendTimeout, CircuitOpen, ContextLengthExceeded):
                raise
            except Exception as e:
                raise self._failure(e) from e
        return np.asarray(rows, dtype=np.float32).reshape(len(texts), -1)

    def _make_layer_reader(self, layer: int, cache_dir: str | Path | None, weights: str) -> Any:
        """The early-exit reader of ``layer`` on ``weights``, created on first use (called
        holding the lock)."""
        from .layers import LayerReader, default_cache_dir

        reader = self._layer_readers.get((layer, weights))
        if reader is None:
            folder = default_cache_dir() if cache_dir is None else cache_dir
            reader = LayerReader(self.model_path, layer, cache_dir=folder, weights=weights)
            self._layer_readers[(layer, weights)] = reader
        return reader

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
        """:meth:`embed` with every text of the request in one multi-sequence decode; same shape
        and errors (see :func:`marlm.llm.embed_batch.embed_batched`). Not the default: measured
        no cheaper per note on CPU."""
        from ..embed_batch import embed_batched

        return embed_batched(self, texts)

    def _hidden_states(self, tokens: list[int]) -> Any:
        """Final hidden states of ``tokens`` on the embedding context (:func:`.hidden.
        decode_hidden_states`, reusing the previous text's shared opening): ``float64[len(tokens),
        n_embd]``."""
        cached, self._embed_cache = self._embed_cache, ((), None)  # until the decode succeeded
        out = decode_hidden_states(self._embedder, cached, tokens)
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
            null = llama_cpp.ggml_abort_callback()  # no address: the NULL callback
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
            self._request_abort()
            for reader in self._layer_readers.values():
                reader.abort()  # stops a long prompt evaluation between decode batches
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
            for reader in self._layer_readers.values():
                reader.abort()
        if not self._guard.lock.acquire(timeout=max(timeout_s, 0.0)):
            _keep_alive(self._llm)  # a decode is still running: never free the model
            _keep_alive(self._embedder)
            _keep_alive(self._layer_readers)
            return False
        try:
            self.closed = True
            if free:
                with contextlib.suppress(Exception):
                    self._llm.close()
                    if self._embedder is not None:
                        self._embedder.close()
                    for reader in self._layer_readers.values():
                        reader.close()
            else:
                _keep_alive(self._llm)
                _keep_alive(self._embedder)
                _keep_alive(self._layer_readers)
        finally:
            self._guard.lock.release()
        _open_models.discard(self)
        return True


def _keep_alive(obj: Any) -> None:
    """One reference that is never dropped: the interpreter's teardown never frees ``obj``."""
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(obj))


__all__ = [
    "CLOSE_TIMEOUT_S",
    "EMBEDDED_N_BATCH",
    "EMBED_MAX_TOKENS",
    "EmbeddedModel",
]
