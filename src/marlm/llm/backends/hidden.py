"""Hidden states of a text on a llama.cpp embedding context, decoding only what is new.

The context keeps the last text's tokens in its KV cache with their hidden states, and only the
tokens after the longest common prefix are decoded (attention is causal, so a prefix's states do
not depend on what follows it); the triage probe's notes share their template's opening, so each
note skips those tokens. This is the prefix reuse that ``llama_cpp.Llama`` does for generation,
applied to embeddings, through the same llama-cpp-python context and batch objects
``Llama.embed`` uses.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

#: Longest text :meth:`~.embedded.EmbeddedModel.embed` takes, in tokens (one decode batch per
#: text).
EMBED_MAX_TOKENS = 512


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


def decode_hidden_states(
    emb: Any, cached: tuple[tuple[int, ...], np.ndarray | None], tokens: list[int]
) -> np.ndarray:
    """Final hidden states of ``tokens`` on ``emb`` (a ``llama_cpp.Llama`` made with
    ``embedding=True``), whose KV cache holds ``cached = (tokens, states)`` of the previous
    text (``((), None)`` when it holds nothing known): ``float64[len(tokens), n_embd]``.

    Raises whatever llama.cpp raises (the caller turns it into a typed error).
    """
    old_tokens, states = cached
    keep = reusable_prefix(old_tokens, tokens)
    if keep:
        emb._ctx.kv_cache_seq_rm(0, keep, -1)
    else:
        emb._ctx.kv_cache_clear()
    rest = tokens[keep:]
    emb._batch.set_batch(rest, keep, True)
    emb._ctx.decode(emb._batch)
    n_embd = emb.n_embd()
    new = np.ctypeslib.as_array(emb._ctx.get_embeddings(), shape=(len(rest) * n_embd,))
    new = new.reshape(len(rest), n_embd).astype(np.float64)
    return np.concatenate([states[:keep], new]) if keep and states is not None else new


__all__ = ["EMBED_MAX_TOKENS", "decode_hidden_states", "reusable_prefix"]
