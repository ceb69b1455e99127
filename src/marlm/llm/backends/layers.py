"""Early exit: the residual stream after block ``j`` of a GGUF model, decoding blocks ``0..j`` only.

A linear probe reads urgency from an intermediate layer as well as from the last one (Alain and
Bengio 2016; Tenney et al. 2019), and a layer ``j`` of 30 costs a third of the model or less. Two
things make llama.cpp do only that work:

1. **Derived weights** (:func:`derive_weights`): the shipped GGUF written once into the cache with
   its first ``j + 2`` blocks, the block matrices requantised to Q8_0 or Q4_0 (the shipped Q4_1
   has no fast CPU kernel in this llama.cpp: 510 against 305 ms as Q8_0 for the whole model on
   one 18-token text, measured on an AVX2 core; Q4_0 is repacked on load for the AVX2 kernels, 13%
   less than Q8_0 through 10 blocks on an Intel Xeon), with the ``gguf`` package (no download).
   Block ``j + 1`` is kept because llama.cpp keeps only the output rows in the model's last block.
2. **A stop in the graph** (:class:`LayerReader`): a context with no embedding output (so the
   49,152-word output projection, 3.3 ms a token, is not computed for every token), whose eval
   callback (``llama_context_params.cb_eval``, ggml's ``ggml_backend_sched_eval_callback``) copies
   the tensor ``l_out-<j>`` and returns false, which ends the graph there. The callback is compiled
   with numba (``cfunc``), so the reading thread never takes the GIL per graph node.

Each step depends on a build detail (tensor names, the callback's contract, the block-count key);
each is checked, and any mismatch raises :class:`LayerReadUnavailable`, on which callers fall back
to the model's final states (:meth:`~.embedded.EmbeddedModel.embed`).
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import LayerReadUnavailable
from .build import avoid_amx_repack
from .hidden import EMBED_MAX_TOKENS, reusable_prefix

#: Quantisation of the derived blocks' matrices by default (norms stay float32, the token table
#: as shipped).
READER_QTYPE = "Q8_0"
#: The quantisations :func:`derive_weights` writes: those llama.cpp has fast CPU matrix kernels
#: for (Q4_0 is repacked on load for its AVX2 and NEON kernels; Q4_1, the shipped type, and Q5_0
#: are slower than Q8_0 here).
READER_QTYPES = ("Q8_0", "Q4_0")
#: Version of :func:`derive_weights`'s output: a new one is written when this changes.
DERIVE_VERSION = 1
_NAME_BYTES = 64  # GGML_MAX_NAME


def check_weights(weights: str) -> None:
    """Raises ValueError unless ``weights`` is one of :data:`READER_QTYPES`."""
    if weights not in READER_QTYPES:
        raise ValueError(f"weights must be one of {', '.join(READER_QTYPES)}, got {weights!r}")


def layer_feature(layer: int, weights: str = READER_QTYPE) -> str:
    """The name of block ``layer``'s early-exit reading on ``weights``: ``"l_out-9"`` on the
    default Q8_0, ``"l_out-9-q4_0"`` on Q4_0 (the name caches and ``marlm llm serve`` key it by)."""
    return f"l_out-{layer}" if weights == READER_QTYPE else f"l_out-{layer}-{weights.lower()}"


def derive_weights(
    src: str | Path, blocks: int, cache_dir: str | Path, weights: str = READER_QTYPE
) -> Path:
    """The GGUF at ``src`` cut to its first ``blocks`` blocks, block matrices as ``weights`` (one
    of :data:`READER_QTYPES`), written once into ``cache_dir`` (atomically) and reused:
    ``reader-<hash>-k<blocks>.gguf``.

    The hash covers the source file's size and modification time, :data:`DERIVE_VERSION` and the
    quantisation, so an updated model gets a new file. Writing takes about 2 s for 11 blocks of
    SmolLM2-135M (numpy quantisation in the ``gguf`` package).

    Raises:
        ValueError: ``weights`` is not one of :data:`READER_QTYPES`.
        LayerReadUnavailable: ``gguf`` is not installed, the file has no ``<arch>.block_count``
            or fewer blocks than asked, a tensor type cannot be requantised, or the file cannot
            be written.
    """
    check_weights(weights)
    src = Path(src)
    try:
        import gguf
        from gguf import GGMLQuantizationType as Q
        from gguf import GGUFReader, GGUFValueType, GGUFWriter
        from gguf import quants as gq
    except ImportError as e:
        raise LayerReadUnavailable(f"the gguf package is not installed ({e})") from e
    st = src.stat()
    key = f"{src.resolve()}|{st.st_size}|{st.st_mtime_ns}|{DERIVE_VERSION}|{weights}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    out = Path(cache_dir) / f"reader-{digest}-k{blocks}.gguf"
    if out.is_file():
        return out
    try:
        r = GGUFReader(str(src))
        arch = r.fields["general.architecture"].contents()
        n_blocks = int(r.fields[f"{arch}.block_count"].contents())
    except (KeyError, ValueError, OSError) as e:
        raise LayerReadUnavailable(f"{src.name}: no block count to cut ({e})") from e
    if not 1 <= blocks <= n_blocks:
        raise LayerReadUnavailable(  # blocks is j + 2 (module docstring): say it in j
            f"{src.name} has {n_blocks} blocks: early exit reads block 0 to {n_blocks - 2}, "
            f"not {blocks - 2}"
        )
    target = Q[weights]
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f"{out.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        w = GGUFWriter(str(tmp), arch=arch)
        for name, f in r.fields.items():
            if name.startswith("GGUF.") or name == "general.architecture":
                continue
            value = f.contents()
            if name == f"{arch}.block_count":
                value = blocks
            elif name == "general.file_type":
                value = int(gguf.LlamaFileType[f"MOSTLY_{weights}"])
            sub = f.types[-1] if f.types[0] == GGUFValueType.ARRAY else None
            w.add_key_value(name, value, f.types[0], sub_type=sub)
        for t in r.tensors:
            if t.name.startswith("blk.") and int(t.name.split(".")[1]) >= blocks:
                continue
            data = np.asarray(t.data)
            if t.tensor_type in (Q.F32, target) or not t.name.startswith("blk."):
                w.add_tensor(t.name, data, raw_dtype=t.tensor_type, raw_shape=data.shape)
                continue
            shape = [int(x) for x in reversed(t.shape.tolist())]
            x = gq.dequantize(data, t.tensor_type).reshape(shape).astype(np.float32)
            w.add_tensor(t.name, gq.quantize(x, target), raw_dtype=target)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        os.replace(tmp, out)
    except (NotImplementedError, ValueError, OSError) as e:
        raise LayerReadUnavailable(f"could not derive {out.name} from {src.name}: {e}") from e
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()
    return out


_CALLBACK: Any = None
_CALLBACK_LOCK = threading.Lock()


def _capture_callback() -> Any:
    """The compiled eval callback (made once a process, about a second of numba compilation).

    Its user data is an ``int64[16]`` state: ``[0]`` the destination's address, ``[1]`` its size
    in bytes, ``[2]`` bytes copied (out; -1 when the tensor did not fit), ``[3]`` its rows (out),
    ``[8:16]`` the wanted tensor's name, NUL-terminated. It asks for the wanted tensor only,
    copies it (``ggml_backend_tensor_get``) and returns false after it, which stops the graph.
    """
    global _CALLBACK
    with _CALLBACK_LOCK:
        if _CALLBACK is not None:
            return _CALLBACK
        import llama_cpp
        import numba
        from numba import carray, types

        lib = ctypes.CDLL(str(Path(llama_cpp.__file__).parent / "lib" / "libggml-base.so"))
        get_name = lib.ggml_get_name
        get_name.argtypes, get_name.restype = [ctypes.c_void_p], ctypes.POINTER(ctypes.c_uint8)
        nbytes = lib.ggml_nbytes
        nbytes.argtypes, nbytes.restype = [ctypes.c_void_p], ctypes.c_size_t
        nrows = lib.ggml_nrows
        nrows.argtypes, nrows.restype = [ctypes.c_void_p], ctypes.c_int64
        tensor_get = lib.ggml_backend_tensor_get
        tensor_get.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_size_t]
        tensor_get.restype = None

        # a C callback is compiled in nopython mode always (numba refuses object mode there)
        @numba.cfunc(types.boolean(types.voidptr, types.boolean, types.voidptr))
        def on_tensor(t, ask, data):
            st = carray(data, 16, dtype=np.int64)
            name = carray(get_name(t), _NAME_BYTES)
            want = st[8:16].view(np.uint8)
            for i in range(_NAME_BYTES):
                if name[i] != want[i]:
                    return not ask  # not wanted; after a compute, go on
                if want[i] == 0:
                    break
            if ask:
                return True
            size = nbytes(t)
            if size > st[1]:
                st[2] = -1
                return False
            tensor_get(t, st[0], 0, size)
            st[2] = size
            st[3] = nrows(t)
            return False  # nothing after this tensor is needed: stop the graph

        _CALLBACK = on_tensor
        return _CALLBACK


def default_cache_dir() -> Path:
    """Where derived weights go when the caller names no folder: ``$MARLM_CACHE``, else
    ``$XDG_CACHE_HOME/marlm`` (``~/.cache/marlm``), the folder of marlm's other caches."""
    if os.environ.get("MARLM_CACHE"):
        return Path(os.environ["MARLM_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "marlm"


class LayerReader:
    """Per-token residual stream after block ``layer`` of a GGUF model, through derived weights
    and a stop in the graph (module docstring).

    Not thread-safe: the caller serialises calls (the embedded backend's guard does).

    Args:
        model_path: the shipped GGUF.
        layer: the block ``j`` whose output is read (0-based; ``l_out-<j>``).
        cache_dir: where the derived weights are written once.
        n_ctx: context window in tokens (a text is at most :data:`EMBED_MAX_TOKENS`).
        n_threads: CPU threads of a decode (1: the reading runs beside a control loop).
        weights: the derived blocks' quantisation, one of :data:`READER_QTYPES`.

    Raises:
        ValueError: ``layer`` below 0 or ``weights`` unknown.
        LayerReadUnavailable: any step unavailable (:func:`derive_weights`, numba, loading the
            derived file, or a first read that does not give one row per token).
    """

    def __init__(
        self,
        model_path: str | Path,
        layer: int,
        *,
        cache_dir: str | Path,
        n_ctx: int = 2048,
        n_threads: int = 1,
        weights: str = READER_QTYPE,
    ) -> None:
        if layer < 0:
            raise ValueError(f"layer must be >= 0, got {layer}")
        self.layer = layer
        self.path = derive_weights(model_path, layer + 2, cache_dir, weights)
        try:
            import llama_cpp
            from llama_cpp import _internals

            callback = _capture_callback()
            avoid_amx_repack()
            self._llm = llama_cpp.Llama(
                model_path=str(self.path), n_ctx=64, n_threads=1, verbose=False
            )
            self.n_embd = int(self._llm.n_embd())
            self._out = np.zeros(EMBED_MAX_TOKENS * self.n_embd, dtype=np.float32)
            self._state = np.zeros(16, dtype=np.int64)
            self._state[0], self._state[1] = self._out.ctypes.data, self._out.nbytes
            name = f"l_out-{layer}".encode() + b"\0"
            self._state[8:16].view(np.uint8)[: len(name)] = np.frombuffer(name, np.uint8)
            p = llama_cpp.llama_context_default_params()
            p.n_ctx, p.n_batch, p.n_ubatch = n_ctx, EMBED_MAX_TOKENS, EMBED_MAX_TOKENS
            p.n_threads = p.n_threads_batch = n_threads
            p.embeddings, p.flash_attn_type = False, 0  # flash attention off, as Llama sets it
            p.yarn_attn_factor, p.yarn_beta_fast, p.yarn_beta_slow = 1.0, 32.0, 1.0
            p.cb_eval = ctypes.cast(callback.address, llama_cpp.ggml_backend_sched_eval_callback)
            p.cb_eval_user_data = ctypes.c_void_p(self._state.ctypes.data)
            self._ctx = _internals.LlamaContext(model=self._llm._model, params=p, verbose=False)
            self._batch = _internals.LlamaBatch(
                n_tokens=EMBED_MAX_TOKENS, embd=0, n_seq_max=1, verbose=False
            )
        except LayerReadUnavailable:
            raise
        except Exception as e:  # numba, the llama.cpp build or the file: no early exit here
            raise LayerReadUnavailable(f"early exit unavailable: {type(e).__name__}: {e}") from e
        self._cache: tuple[tuple[int, ...], np.ndarray | None] = ((), None)
        self._abort_cb = llama_cpp.ggml_abort_callback(lambda _data: True)
        first = self.tokenize("check")
        rows = self.states(first)
        if rows.shape != (len(first), self.n_embd):
            raise LayerReadUnavailable(
                f"l_out-{layer} gave {rows.shape[0]} rows for {len(first)} tokens"
            )

    def tokenize(self, text: str) -> list[int]:
        """The tokens of ``text`` with the beginning-of-sequence token (the shipped vocabulary)."""
        return list(self._llm.tokenize(text.encode("utf-8"), add_bos=True))

    def states(self, tokens: Sequence[int]) -> np.ndarray:
        """``float64[len(tokens), n_embd]``: block ``layer``'s output for every token, decoding
        only the tokens after the prefix shared with the previous call (causal attention: a
        prefix's states do not depend on what follows it).

        Raises:
            LayerReadUnavailable: the graph did not reach ``l_out-<layer>`` (another build's
                names) or the tensor did not fit.
            RuntimeError: llama.cpp's decode failed (or was aborted by :meth:`abort`).
        """
        tokens = list(tokens)
        if not 0 < len(tokens) <= EMBED_MAX_TOKENS:
            raise ValueError(f"1 to {EMBED_MAX_TOKENS} tokens, got {len(tokens)}")
        old, states = self._cache
        self._cache = ((), None)  # until this decode succeeded
        keep = reusable_prefix(old, tokens) if states is not None else 0
        if keep:
            self._ctx.kv_cache_seq_rm(0, keep, -1)
        else:
            self._ctx.kv_cache_clear()
        rest = tokens[keep:]
        self._state[2] = self._state[3] = 0
        self._batch.set_batch(rest, keep, False)
        with contextlib.suppress(RuntimeError):
            # The stop after l_out-<layer> ends the graph early; llama.cpp may report that
            # as a failed compute. Whether the states came is checked below.
            self._ctx.decode(self._batch)
        copied, rows = int(self._state[2]), int(self._state[3])
        if copied <= 0 or rows != len(rest):
            raise LayerReadUnavailable(
                f"l_out-{self.layer} not read ({copied} bytes, {rows} rows for {len(rest)} tokens)"
            )
        new = self._out[: rows * self.n_embd].reshape(rows, self.n_embd).astype(np.float64)
        out = np.concatenate([states[:keep], new]) if keep and states is not None else new
        self._cache = (tuple(tokens), out)
        return out

    def abort(self) -> None:
        """Make the decode in flight stop at its next batch (llama.cpp's abort callback)."""
        import llama_cpp

        with contextlib.suppress(Exception):
            llama_cpp.llama_set_abort_callback(self._ctx.ctx, self._abort_cb, None)

    def clear_abort(self) -> None:
        """Remove the abort callback (before the next call)."""
        import llama_cpp

        with contextlib.suppress(Exception):
            null = llama_cpp.ggml_abort_callback()  # no address: the NULL callback
            llama_cpp.llama_set_abort_callback(self._ctx.ctx, null, None)

    def close(self) -> None:
        """Free the context and the derived model (never while a decode runs)."""
        with contextlib.suppress(Exception):
            self._ctx.close()
            self._batch.close()
            self._llm.close()


__all__ = [
    "DERIVE_VERSION",
    "READER_QTYPE",
    "READER_QTYPES",
    "LayerReader",
    "check_weights",
    "default_cache_dir",
    "derive_weights",
    "layer_feature",
]
