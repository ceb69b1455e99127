"""Mean final hidden states of several texts in one batched forward pass of llama.cpp.

:meth:`marlm.llm.backends.EmbeddedModel.embed` reads a text's representation as the mean of the
model's final hidden states over its tokens. Decoding texts one after the other costs one
``llama_decode`` each, with a few dozen tokens in it; on a CPU the matrix products of a decode
are cheaper per token when more tokens share it. Here all the texts of a request go into one
``llama_batch`` as separate sequences (``seq_id`` 0, 1, ...; llama.cpp's multi-sequence batch,
the one ``llama_cpp.Llama.embed`` fills, on a context with a unified KV cache): a token attends
only to the earlier tokens of its own sequences, so each text's states are those it has alone.

The tokens every text of the request starts with (the probe template's opening) are decoded
once, as tokens that belong to every sequence (``n_seq_id`` > 1), and the opening the context
already holds from the previous request (in sequence 0) is copied to the other sequences
(``llama_memory_seq_cp``) instead of being decoded again: attention is causal, so a prefix's
states do not depend on what follows it.

Texts that do not fit one batch of ``n_batch`` tokens together are split over several decodes,
in order. The states are equal to the one-text-at-a-time path within float32 rounding of the
matrix products (tested).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np


def common_prefix(token_lists: Sequence[Sequence[int]]) -> int:
    """Length of the prefix that every list shares, at most ``min(len) - 1`` (each list keeps
    its last token to decode). ``0`` for an empty input."""
    if not token_lists:
        return 0
    first = token_lists[0]
    n = min(len(t) for t in token_lists) - 1
    keep = 0
    while keep < n and all(t[keep] == first[keep] for t in token_lists):
        keep += 1
    return max(keep, 0)


def chunks_by_tokens(token_lists: Sequence[Sequence[int]], n_batch: int) -> list[list[int]]:
    """Indices of ``token_lists`` grouped, in order, so that each group's tokens sum to at most
    ``n_batch`` (a list longer than ``n_batch`` alone in its group; the caller refuses it)."""
    groups: list[list[int]] = []
    size = 0
    for i, t in enumerate(token_lists):
        if groups and size + len(t) <= n_batch:
            groups[-1].append(i)
            size += len(t)
        else:
            groups.append([i])
            size = len(t)
    return groups


class BatchedStates:
    """The mean final hidden state of each text, several texts per decode (module docstring).

    Args:
        embedder: a ``llama_cpp.Llama`` made with ``embedding=True`` (so ``n_seq_max`` is at
            least ``n_batch`` and the KV cache is unified) and the model's own pooling (none:
            one output row per token).

    The context's sequence 0 keeps the last decoded text's tokens between calls (``cached``).
    """

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder
        self.cached: tuple[int, ...] = ()
        self.cached_states: np.ndarray | None = None
        self.n_seq_max = int(embedder.context_params.n_seq_max)
        self.n_batch = int(embedder.n_batch)

    def means(
        self, token_lists: Sequence[Sequence[int]], check: Callable[[], None] | None = None
    ) -> np.ndarray:
        """``float64[len(token_lists), n_embd]``: the mean final hidden state of each token list
        (each non-empty, at most ``n_batch`` tokens), in as few decodes as fit ``n_batch``.

        ``check()`` is called before each decode (the backend's timeout and close).

        Raises:
            ValueError: an empty token list or one longer than ``n_batch``.
            RuntimeError: llama.cpp's decode failed (its return code).
        """
        for t in token_lists:
            if not 0 < len(t) <= self.n_batch:
                raise ValueError(f"a text of {len(t)} tokens; need 1..{self.n_batch}")
        out = np.zeros((len(token_lists), self.embedder.n_embd()), dtype=np.float64)
        groups = chunks_by_tokens(token_lists, self.n_batch)
        for group in groups:
            for start in range(0, len(group), self.n_seq_max):
                part = group[start : start + self.n_seq_max]
                if check is not None:
                    check()
                states = self._decode([list(token_lists[i]) for i in part])
                for i, s in zip(part, states, strict=True):
                    out[i] = s.mean(axis=0)
        return out

    def _decode(self, texts: list[list[int]]) -> list[np.ndarray]:
        """One decode of ``texts`` as sequences ``0..len(texts)-1``; the hidden states of each
        text's tokens, ``float64[len(text), n_embd]``."""
        import llama_cpp

        emb = self.embedder
        ctx = emb._ctx
        n_embd = emb.n_embd()
        # The shared opening: what all texts share, of which the cache may hold a part.
        shared = common_prefix(texts) if len(texts) > 1 else len(texts[0]) - 1
        keep = 0
        for a, b in zip(self.cached, texts[0][:shared], strict=False):
            if a != b:
                break
            keep += 1
        ctx.kv_cache_seq_keep(0)  # drop the other sequences of the previous call
        if keep:
            ctx.kv_cache_seq_rm(0, keep, -1)
        else:
            ctx.kv_cache_clear()
        cached_states = self.cached_states
        self.cached, self.cached_states = (), None  # until the decode below has succeeded
        for s in range(1, len(texts) if keep else 1):
            ctx.kv_cache_seq_cp(0, s, 0, keep)
        b = emb._batch.batch
        n = 0
        all_seqs = list(range(len(texts)))
        for pos in range(keep, shared):  # the shared opening, once, in every sequence
            b.token[n] = texts[0][pos]
            b.pos[n] = pos
            for j, s in enumerate(all_seqs):
                b.seq_id[n][j] = s
            b.n_seq_id[n] = len(all_seqs)
            b.logits[n] = True
            n += 1
        spans = []
        for s, t in enumerate(texts):
            spans.append(n)
            for pos in range(shared, len(t)):
                b.token[n] = t[pos]
                b.pos[n] = pos
                b.seq_id[n][0] = s
                b.n_seq_id[n] = 1
                b.logits[n] = True
                n += 1
        b.n_tokens = n
        rc = llama_cpp.llama_decode(ctx.ctx, b)
        if rc != 0:
            raise RuntimeError(f"llama_decode returned {rc}")
        rows = np.ctypeslib.as_array(ctx.get_embeddings(), shape=(n * n_embd,))
        rows = rows.reshape(n, n_embd).astype(np.float64)
        opening = rows[: shared - keep]
        if keep and cached_states is not None:
            opening = np.concatenate([cached_states[:keep], opening])
        out = []
        for s, t in enumerate(texts):
            own = rows[spans[s] : spans[s] + len(t) - shared]
            out.append(np.concatenate([opening, own]))
        ctx.kv_cache_seq_keep(0)  # sequence 0 holds texts[0], the opening of the next call
        self.cached, self.cached_states = tuple(texts[0]), out[0]
        return out


def embed_batched(model: Any, texts: Sequence[str]) -> Any:
    """``model.embed(texts)`` (an :class:`marlm.llm.backends.EmbeddedModel`) with every text of
    the request in one multi-sequence decode (:class:`BatchedStates`), under the model's guard;
    its ``timeout_s`` bounds each decode: ``float32[len(texts), d]``. Same errors as ``embed``;
    the means agree with it within about 0.3% (relative, float32 attention over a longer
    cache). Measured no cheaper per note on CPU (``benchmarks/triage_batch_cost.py``), so not
    the default."""
    from .backends.embedded import EMBED_MAX_TOKENS
    from .errors import BackendClosed, BackendTimeout, CircuitOpen, ContextLengthExceeded

    with model._guard.call(model.name, model._deadline(), model.timeout_s) as check:
        try:
            model._make_embedder()
            tokens = [model._embedder.tokenize(t.encode("utf-8"), add_bos=True) for t in texts]
            for t in tokens:
                if len(t) > EMBED_MAX_TOKENS:
                    raise ContextLengthExceeded(
                        f"{model.name}: a text of {len(t)} tokens is longer than the "
                        f"{EMBED_MAX_TOKENS} tokens embed() takes; shorten it"
                    )
            batched = BatchedStates(model._embedder)
            batched.cached, batched.cached_states = model._embed_cache
            model._embed_cache = ((), None)

            def check_and_renew() -> None:  # each decode has the whole timeout
                check()
                check.renew()

            rows = batched.means(tokens, check_and_renew)
            model._embed_cache = (batched.cached, batched.cached_states)
        except (BackendClosed, BackendTimeout, CircuitOpen, ContextLengthExceeded):
            raise
        except Exception as e:
            raise model._failure(e) from e
    return np.asarray(rows, dtype=np.float32)


__all__ = ["BatchedStates", "chunks_by_tokens", "common_prefix"]
