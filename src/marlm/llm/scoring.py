"""Log-likelihood scoring of a fixed set of option texts after a prompt.

Instead of asking a model to *generate* an answer, score every allowed answer: the score of option
``o`` after prompt ``p`` is ``log P(o | p) = sum_i log P(o_i | p, o_<i)`` over the tokens ``o_i``
of ``o`` (SayCan-style scoring, Ahn et al. 2022, "Do As I Can, Not As I Say", section 3). The
answer is the option with the highest score; it is one of the options by construction, whatever the
prompt says.

``calibrated`` subtracts the score the model gives the same prompt with a content-free input in
place of the real one ("Calibrate Before Use", Zhao et al. 2021, section 5): a small model's
preference for one label regardless of the input (majority-label, recency and common-token bias)
shows in the content-free scores and cancels out.

Scoring is a method of each backend (``backend.score(prompt, options, cache_prefix=...)``), so the
backend's timeout, retries, lock and circuit breaker apply to it as to ``chat``; :func:`score` here
only dispatches. This module holds the arithmetic both backends share:

- the embedded llama-cpp-python model (:func:`score_llama`): the prompt is evaluated once, its KV
  cache reused across options and across prompts that share a declared prefix (the few-shot
  block), and the log-softmax of the next-token logits read after each token through
  ``llama_get_logits_ith``. This works on the model's own ``Llama`` object, created without
  ``logits_all``.
- an OpenAI-compatible server: the legacy completions endpoint with ``echo=True, logprobs=1,
  max_tokens=1`` returns the log-probability of every prompt token (vLLM does). Before the first
  use, a probe (:func:`probe_verdict`) checks that the values are the log-probabilities of each
  token *given the tokens before it*: llama-cpp-python's server returns them shifted by one
  position (abetlen/llama-cpp-python issue #1983) or refuses without ``logits_all``. A server that
  fails the probe raises :class:`ScoringUnsupported`; callers fall back to generation and say so
  once.
"""

from __future__ import annotations

import math
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import BackendError, ContextLengthExceeded, ScoringUnsupported

#: Content-free inputs averaged for calibration (Zhao et al. 2021, section 5 uses "N/A", "" and
#: "[MASK]").
CONTENT_FREE_INPUTS: tuple[str, ...] = ("N/A", "", "[MASK]")


@dataclass(frozen=True)
class OptionScores:
    """Scores of a fixed set of options after one prompt.

    Attributes:
        options: the option texts, in the order scored.
        logprobs: ``float64[n_options]``, natural-log likelihood of each option's tokens after the
            prompt (for :func:`calibrated`: minus the content-free log-probability, see there).
        n_tokens: tokens in each option (``tuple[int, ...]``).
        latency_s: wall time in seconds (``float``).
        method: ``"embedded"``, ``"server-echo"`` or ``"calibrated(<method>)"``.
        calls: backend calls made (one ``eval`` batch or one HTTP request each).
    """

    options: tuple[str, ...]
    logprobs: np.ndarray
    n_tokens: tuple[int, ...]
    latency_s: float
    method: str
    calls: int = 1

    @property
    def best(self) -> str:
        """The option with the highest score (the first one on ties)."""
        return self.options[int(np.argmax(self.logprobs))]

    def probabilities(self) -> np.ndarray:
        """``float64[n_options]``: the scores renormalised over the options (softmax)."""
        z = self.logprobs - self.logprobs.max()
        p = np.exp(z)
        return p / p.sum()


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    x = logits.astype(np.float64)
    m = x.max()
    return x - (m + math.log(np.exp(x - m).sum()))


def check_options(options: Sequence[str]) -> tuple[str, ...]:
    opts = tuple(options)
    if not opts:
        raise ValueError("options is empty: give at least one option text to score")
    if any(not o for o in opts):
        raise ValueError("an option text is empty: every option needs at least one token")
    return opts


# --------------------------------------------------------------------------------------------
# Embedded llama-cpp-python model
# --------------------------------------------------------------------------------------------


def _last_logprobs(llama: Any) -> np.ndarray:
    """Log-softmax of the logits of the last token the context decoded: ``float64[n_vocab]``."""
    import llama_cpp

    ptr = llama_cpp.llama_get_logits_ith(llama.ctx, -1)
    logits = np.ctypeslib.as_array(ptr, shape=(llama.n_vocab(),))
    return _log_softmax(logits)


def _decode_all_logits(llama: Any, tokens: list[int]) -> list[np.ndarray]:
    """Decode ``tokens`` after the current context, keeping the logits of every position.

    ``Llama.eval`` keeps only the last position's logits unless the model was created with
    ``logits_all``; this builds the batch itself (llama.cpp's ``llama_batch`` with every
    ``logits`` flag set) and returns ``float64[n_vocab]`` log-softmax rows, one per token.
    """
    import llama_cpp

    n_past, n = llama.n_tokens, len(tokens)
    llama._ctx.kv_cache_seq_rm(-1, n_past, -1)
    batch = llama_cpp.llama_batch_init(n, 0, 1)
    try:
        batch.n_tokens = n
        for i, tok in enumerate(tokens):
            batch.token[i] = tok
            batch.pos[i] = n_past + i
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = 0
            batch.logits[i] = True
        if llama_cpp.llama_decode(llama.ctx, batch) != 0:
            raise BackendError("llama_decode failed while scoring an option")
        n_vocab = llama.n_vocab()
        rows = [
            _log_softmax(
                np.ctypeslib.as_array(
                    llama_cpp.llama_get_logits_ith(llama.ctx, i), shape=(n_vocab,)
                )
            )
            for i in range(n)
        ]
    finally:
        llama_cpp.llama_batch_free(batch)
    llama.input_ids[n_past : n_past + n] = tokens
    llama.n_tokens = n_past + n
    return rows


#: Per Llama object: the prefix tokens last evaluated alone by :func:`_eval_prompt`.
_prefix_state: weakref.WeakKeyDictionary[Any, tuple[int, ...]] = weakref.WeakKeyDictionary()


def _eval_prompt(llama: Any, prefix_tokens: list[int], rest_tokens: list[int]) -> int:
    """Evaluate ``prefix_tokens + rest_tokens``; return the number of decode batches.

    Deterministic: the same tokens give the same logits whatever was decoded before. The prefix
    is evaluated alone (once, then kept in the KV cache while the context still holds it) and
    the rest always in one batch after it; llama.cpp's results depend slightly on how tokens are
    split into batches, so nothing else is reused.
    """
    calls = 0
    prefix = tuple(prefix_tokens)
    held = tuple(int(t) for t in llama.input_ids[: min(llama.n_tokens, len(prefix))])
    if not prefix or held != prefix or _prefix_state.get(llama) != prefix:
        llama.reset()
        _prefix_state.pop(llama, None)
        if prefix:
            llama.eval(list(prefix))
            _prefix_state[llama] = prefix
            calls += 1
    llama.n_tokens = len(prefix)  # Llama.eval drops the KV cache from n_tokens on
    llama.eval(list(rest_tokens))
    return calls + 1


def score_llama(
    llama: Any,
    prompt: str,
    options: Sequence[str],
    cache_prefix: str | None = None,
    check: Callable[[], None] | None = None,
) -> OptionScores:
    """Score ``options`` after ``prompt`` on a ``llama_cpp.Llama`` (the caller holds its lock).

    Args:
        llama: the model's ``Llama`` object (created without ``logits_all``).
        prompt, options, cache_prefix: as for :func:`score`.
        check: called before every decode batch; raises to stop (a timeout or a close), leaving
            the model in a state the next call resets.

    Raises:
        ValueError: empty options.
        ContextLengthExceeded: the prompt and the longest option do not fit the context.
    """
    options = check_options(options)
    t0 = time.perf_counter()
    check = check or (lambda: None)
    prompt_tokens = llama.tokenize(prompt.encode("utf-8"), add_bos=True, special=True)
    n_prefix = 0
    if cache_prefix and prompt.startswith(cache_prefix):
        # The prompt's own tokens up to where the prefix's tokenisation departs from them
        # (a prefix ending in "\n\n" tokenises differently from the same text in context).
        alone = llama.tokenize(cache_prefix.encode("utf-8"), add_bos=True, special=True)
        while (
            n_prefix < min(len(alone), len(prompt_tokens))
            and alone[n_prefix] == prompt_tokens[n_prefix]
        ):
            n_prefix += 1
    prefix_tokens, rest_tokens = prompt_tokens[:n_prefix], prompt_tokens[n_prefix:]
    if not rest_tokens:  # the last prompt token must be decoded now, for its logits
        prefix_tokens, rest_tokens = prefix_tokens[:-1], prefix_tokens[-1:]
    option_tokens = [
        llama.tokenize(o.encode("utf-8"), add_bos=False, special=False) for o in options
    ]
    if len(prompt_tokens) + max(len(t) for t in option_tokens) > llama.n_ctx():
        raise ContextLengthExceeded(
            f"prompt of {len(prompt_tokens)} tokens does not fit the context of "
            f"{llama.n_ctx()} tokens: shorten the prompt or the few-shot block"
        )
    check()
    try:
        calls = _eval_prompt(llama, prefix_tokens, rest_tokens)
        after_prompt = _last_logprobs(llama)
        scores = np.zeros(len(options), dtype=np.float64)
        for k, toks in enumerate(option_tokens):
            total = float(after_prompt[toks[0]])
            if len(toks) > 1:
                check()
                # log P(o_i | p, o_<i) for i >= 2: one batch over o_1..o_{k-1} with all logits.
                llama.n_tokens = len(prompt_tokens)
                rows = _decode_all_logits(llama, toks[:-1])
                calls += 1
                total += float(sum(rows[i][toks[i + 1]] for i in range(len(toks) - 1)))
                llama.n_tokens = len(prompt_tokens)
            scores[k] = total
    except BaseException:
        _prefix_state.pop(llama, None)  # the context is in an unknown state: start afresh next time
        raise
    return OptionScores(
        options=options,
        logprobs=scores,
        n_tokens=tuple(len(t) for t in option_tokens),
        latency_s=time.perf_counter() - t0,
        method="embedded",
        calls=calls,
    )


# --------------------------------------------------------------------------------------------
# OpenAI-compatible server: prompt log-probabilities echoed by /completions
# --------------------------------------------------------------------------------------------

#: A text whose continuation is near-certain; with correct prompt log-probabilities its last
#: tokens are likely, with values shifted by one position (each token scored against the
#: distribution *after* it) they are not.
PROBE_TEXT = "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16"
_PROBE_MIN_MEAN_LOGPROB = -1.0


def echo_body(model: str, text: str) -> dict[str, Any]:
    """The ``/completions`` request that echoes ``text`` with one log-probability per token."""
    return {
        "model": model,
        "prompt": text,
        "max_tokens": 1,
        "temperature": 0.0,
        "echo": True,
        "logprobs": 1,
    }


def parse_echo(payload: Any, where: str) -> tuple[list[int], list[float | None]]:
    """(text offsets, token log-probabilities) from a ``/completions`` answer with echo.

    Raises:
        ScoringUnsupported: the answer holds no prompt log-probabilities.
    """
    try:
        lp = payload["choices"][0]["logprobs"]
        offsets = [int(o) for o in lp["text_offset"]]
        values = [None if v is None else float(v) for v in lp["token_logprobs"]]
    except (KeyError, IndexError, TypeError, ValueError) as e:
        raise ScoringUnsupported(f"{where} returned no prompt log-probabilities") from e
    if len(offsets) != len(values) or len(values) < 2:
        raise ScoringUnsupported(f"{where} echoed no prompt tokens")
    return offsets, values


def probe_verdict(offsets: list[int], values: list[float | None], where: str) -> str | None:
    """``None`` when the echoed log-probabilities of :data:`PROBE_TEXT` are P(token | before it);
    else the reason they are not (the mean over the second half of the counting sequence is too
    low, as with values shifted by one position)."""
    tail = [
        v
        for o, v in zip(offsets, values, strict=True)
        if v is not None and len(PROBE_TEXT) // 2 <= o < len(PROBE_TEXT)
    ]
    mean = sum(tail) / len(tail) if tail else -math.inf
    if mean >= _PROBE_MIN_MEAN_LOGPROB:
        return None
    return (
        f"{where} returns prompt log-probabilities that fail the probe "
        f"(mean {mean:.2f} on a counting sequence; llama-cpp-python's server "
        "shifts them by one token, abetlen/llama-cpp-python#1983)"
    )


def option_logprob(
    prompt: str, full: str, offsets: list[int], values: list[float | None], option: str, where: str
) -> tuple[float, int]:
    """Sum of the log-probabilities of the tokens that start inside the option text of ``full``
    (``prompt + option``), and their number. The one generated token starts at ``len(full)``."""
    picked = [v for o, v in zip(offsets, values, strict=True) if len(prompt) <= o < len(full)]
    if not picked or any(v is None for v in picked):
        raise ScoringUnsupported(f"{where}: no log-probability for option {option!r}")
    return float(sum(v for v in picked if v is not None)), len(picked)


# --------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------

_url_backends: dict[tuple[str, float], Any] = {}
_url_lock = threading.Lock()


def _backend_for_url(url: str, timeout_s: float) -> Any:
    """One :class:`~marlm.llm.backends.OpenAICompatible` per (URL, timeout), reused."""
    from .backends import OpenAICompatible

    with _url_lock:
        key = (url, float(timeout_s))
        if key not in _url_backends:
            _url_backends[key] = OpenAICompatible(url, timeout_s=timeout_s)
        return _url_backends[key]


def supports_scoring(model: Any) -> bool:
    """Whether ``model`` offers :meth:`score` (a backend of this package, or a server URL)."""
    from .backends.protocols import Scorer  # here: the backends import this module

    return isinstance(model, str | Scorer)


def score(
    model: Any,
    prompt: str,
    options: Sequence[str],
    *,
    cache_prefix: str | None = None,
    timeout_s: float = 30.0,
) -> OptionScores:
    """Log-likelihood of each option text after ``prompt``: ``model.score(...)``.

    Args:
        model: a backend with a ``score`` method (:class:`~marlm.llm.backends.EmbeddedModel`,
            :class:`~marlm.llm.backends.OpenAICompatible`), or the base URL of an
            OpenAI-compatible server.
        prompt: the text before the option, exactly as the model should read it (chat-template
            tokens such as ``<|im_start|>`` are parsed as special tokens).
        options: the option texts; each is scored as the continuation of ``prompt``, so put the
            separating space in the option (``" urgent"``), the way the model's tokenizer splits
            words.
        cache_prefix: a start of ``prompt`` shared by many calls (the few-shot block), kept in
            the embedded model's KV cache between calls. Scores are the same whatever was scored
            before, and the same as without ``cache_prefix`` up to float rounding.
        timeout_s: the call's timeout when ``model`` is a URL (a backend object has its own).

    Returns:
        :class:`OptionScores` with ``logprobs: float64[n_options]`` (natural log).

    Raises:
        ValueError: empty options.
        ContextLengthExceeded: a prompt longer than the model's context (also a ``ValueError``).
        ScoringUnsupported: the backend cannot return option log-likelihoods.
        BackendError: the backend failed (timeout, HTTP error, circuit open).
    """
    opts = check_options(options)
    if isinstance(model, str):
        model = _backend_for_url(model, timeout_s)
    from .backends.protocols import Scorer, backend_name  # here: the backends import this module

    if not isinstance(model, Scorer):
        raise ScoringUnsupported(f"{backend_name(model)} offers no log-probabilities")
    return model.score(prompt, opts, cache_prefix=cache_prefix)


def content_free_logprobs(
    model: Any,
    prompts: Sequence[str],
    options: Sequence[str],
    *,
    cache_prefix: str | None = None,
    timeout_s: float = 30.0,
) -> OptionScores:
    """Mean content-free distribution over ``options``, as log-probabilities.

    Each prompt in ``prompts`` is the real prompt with the input replaced by a content-free one
    (see :data:`CONTENT_FREE_INPUTS`). Following Zhao et al. (2021, section 5), each prompt's
    scores are renormalised over the options, the probabilities averaged, and the log taken:
    ``log p_cf: float64[n_options]``.
    """
    opts = check_options(options)
    if not prompts:
        raise ValueError("prompts is empty: give at least one content-free prompt")
    t0 = time.perf_counter()
    results = [
        score(model, p, opts, cache_prefix=cache_prefix, timeout_s=timeout_s) for p in prompts
    ]
    p_cf = np.mean([r.probabilities() for r in results], axis=0)
    return OptionScores(
        options=opts,
        logprobs=np.log(p_cf),
        n_tokens=results[0].n_tokens,
        latency_s=time.perf_counter() - t0,
        method=f"content-free({results[0].method})",
        calls=sum(r.calls for r in results),
    )


def calibrated(
    model: Any,
    prompt: str,
    options: Sequence[str],
    content_free: OptionScores | Sequence[str],
    *,
    cache_prefix: str | None = None,
    timeout_s: float = 30.0,
) -> OptionScores:
    """Contextual calibration: ``score(prompt) - log p_cf`` (Zhao et al. 2021, section 5).

    The paper's correction ``W = diag(p_cf)^-1`` applied to the label probabilities is, in log
    space, the subtraction of ``log p_cf`` from the log-likelihoods; renormalising either side
    over the options only shifts all options by the same constant, so the decision is unchanged.

    Args:
        model, prompt, options, timeout_s: as for :func:`score`.
        content_free: the content-free scores from :func:`content_free_logprobs` (compute once per
            prompt template and reuse), or the content-free prompts to score now.

    Returns:
        :class:`OptionScores` whose ``logprobs`` are the calibrated scores and whose ``calls`` and
        ``latency_s`` are those of this prompt alone when ``content_free`` was given precomputed.
    """
    opts = check_options(options)
    if not isinstance(content_free, OptionScores):
        content_free = content_free_logprobs(
            model, list(content_free), opts, cache_prefix=cache_prefix, timeout_s=timeout_s
        )
    if content_free.options != opts:
        raise ValueError(
            f"content-free scores are for options {content_free.options}, not {opts}: "
            "compute them with the same options"
        )
    raw = score(model, prompt, opts, cache_prefix=cache_prefix, timeout_s=timeout_s)
    return OptionScores(
        options=opts,
        logprobs=raw.logprobs - content_free.logprobs,
        n_tokens=raw.n_tokens,
        latency_s=raw.latency_s,
        method=f"calibrated({raw.method})",
        calls=raw.calls,
    )
