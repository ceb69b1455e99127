"""The early-exit reader (``marlm.llm.backends.layers``) on the real embedded model and real
files: the derived weights are what they say, the states it stops at are block ``j``'s output for
every token (checked against the final states of a model cut after block ``j``), prefix reuse
changes nothing, and every build detail it depends on fails into one typed error that callers
turn into the final states."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from marlm.llm.backends import EmbeddedModel, LayerEmbedder
from marlm.llm.backends.layers import LayerReader, derive_weights
from marlm.llm.backends.spec import default_model_path
from marlm.llm.errors import LayerReadUnavailable
from marlm.llm.triage import Triage, probe_input

LAYER = 2  # a shallow layer: the same code as the default's, a quarter of the work


@pytest.fixture(scope="module")
def reader_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("reader-cache")


@pytest.fixture(scope="module")
def reader(reader_cache):
    return LayerReader(default_model_path(), LAYER, cache_dir=reader_cache)


def test_derived_weights_keep_the_first_blocks_as_q8_0_and_are_written_once(reader_cache):
    from gguf import GGMLQuantizationType as Q
    from gguf import GGUFReader

    path = derive_weights(default_model_path(), LAYER + 2, reader_cache)
    r = GGUFReader(str(path))
    assert int(r.fields["llama.block_count"].contents()) == LAYER + 2
    blocks = {int(t.name.split(".")[1]) for t in r.tensors if t.name.startswith("blk.")}
    assert blocks == set(range(LAYER + 2))
    kinds = {t.tensor_type for t in r.tensors if t.name.startswith("blk.")}
    assert kinds == {Q.Q8_0, Q.F32}  # matrices requantised, norms as shipped
    assert len(r.tensors) == 1 + 1 + 9 * (LAYER + 2)  # token table, output norm, 9 per block
    before = path.stat().st_mtime_ns
    assert derive_weights(default_model_path(), LAYER + 2, reader_cache) == path
    assert path.stat().st_mtime_ns == before  # reused, not written again
    assert not list(reader_cache.glob("*.tmp"))


def test_q4_0_weights_are_a_file_of_their_own_and_read_close_to_q8_0s(reader, reader_cache):
    from gguf import GGMLQuantizationType as Q
    from gguf import GGUFReader

    from marlm.llm.backends.layers import layer_feature

    q8 = derive_weights(default_model_path(), LAYER + 2, reader_cache)
    q4 = derive_weights(default_model_path(), LAYER + 2, reader_cache, "Q4_0")
    assert q4 != q8 and q4.stat().st_size < q8.stat().st_size  # the token table as shipped in both
    r = GGUFReader(str(q4))
    assert {t.tensor_type for t in r.tensors if t.name.startswith("blk.")} == {Q.Q4_0, Q.F32}
    light = LayerReader(default_model_path(), LAYER, cache_dir=reader_cache, weights="Q4_0")
    tokens = reader.tokenize(probe_input("Line 4 is stopped until this bearing arrives."))
    a, b = reader.states(tokens).mean(axis=0), light.states(tokens).mean(axis=0)
    light.close()
    cos = float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))
    assert 0.98 < cos < 1.0  # the same reading, rounded otherwise
    assert (layer_feature(9), layer_feature(9, "Q4_0")) == ("l_out-9", "l_out-9-q4_0")


@pytest.mark.parametrize("weights", ["Q4_1", "q4_0", "F16", ""])
def test_weights_other_than_q8_0_and_q4_0_are_refused(reader_cache, weights, embedded_model):
    with pytest.raises(ValueError, match="weights must be one of Q8_0, Q4_0"):
        derive_weights(default_model_path(), LAYER + 2, reader_cache, weights)
    with pytest.raises(ValueError, match="weights must be one of Q8_0, Q4_0"):
        embedded_model.embed_layer(["a note"], LAYER, cache_dir=reader_cache, weights=weights)


@pytest.mark.parametrize("layer", [-1, "9", None, True, 9.5, 9.0])
def test_a_layer_that_is_not_a_whole_number_is_refused_before_the_model_runs(
    reader_cache, layer, embedded_model
):
    with pytest.raises(ValueError, match=f"layer must be a whole number >= 0, got {layer!r}"):
        embedded_model.embed_layer(["a note"], layer, cache_dir=reader_cache)
    assert embedded_model.breaker.state().failures == 0  # the caller's mistake, not the model's


def test_a_refused_true_does_not_stand_for_block_1(reader_cache):
    model = EmbeddedModel(n_threads=1)
    with pytest.raises(ValueError):
        model.embed_layer(["a note"], True, cache_dir=reader_cache)
    assert model.embed_layer(["a note"], 1, cache_dir=reader_cache).shape == (1, 576)
    assert model.embed_layer(["a note"], np.int64(1), cache_dir=reader_cache).shape == (1, 576)
    with pytest.raises(ValueError, match="half of a UTF-16 surrogate pair"):
        model.embed_layer(["a\ud800"], 1, cache_dir=reader_cache)
    assert model.breaker.state().failures == 0
    model.close()


def test_the_states_are_block_j_output_for_every_token(reader, reader_cache):
    """RMSNorm of the captured states, times the output norm's weight, is what llama.cpp's
    embedding path gives for a model cut right after block ``j`` (its final states)."""
    from gguf import GGUFReader

    text = probe_input("Line 4 is stopped until this bearing arrives.")
    tokens = reader.tokenize(text)
    states = reader.states(tokens)
    assert states.shape == (len(tokens), 576) and states.dtype == np.float64
    cut = derive_weights(default_model_path(), LAYER + 1, reader_cache)
    weight = next(
        np.asarray(t.data, dtype=np.float64)
        for t in GGUFReader(str(cut)).tensors
        if t.name == "output_norm.weight"
    )
    normed = states / np.sqrt((states**2).mean(axis=1, keepdims=True) + 1e-5) * weight
    final = EmbeddedModel(cut, n_threads=1).embed([text])[0]
    np.testing.assert_allclose(normed.mean(axis=0), final, rtol=1e-3, atol=2e-3)


def test_prefix_reuse_gives_the_states_of_a_fresh_decode(reader):
    first = reader.tokenize(probe_input("Overnight express label attached."))
    second = reader.tokenize(probe_input("No rush."))
    reader._cache = ((), None)
    fresh = reader.states(second)
    reader.states(first)
    reused = reader.states(second)  # shares the template's opening with ``first``
    np.testing.assert_allclose(reused, fresh, rtol=1e-5, atol=1e-4)


def test_embed_layer_is_the_mean_of_the_states_and_different_from_embed(reader_cache):
    model = EmbeddedModel(n_threads=1)
    assert isinstance(model, LayerEmbedder)
    text = probe_input("Customer waiting at the counter, rush please.")
    got = model.embed_layer([text, text], LAYER, cache_dir=reader_cache)
    direct = LayerReader(default_model_path(), LAYER, cache_dir=reader_cache)
    want = direct.states(direct.tokenize(text)).mean(axis=0)
    assert got.shape == (2, 576) and got.dtype == np.float32
    np.testing.assert_allclose(got[0], want, rtol=1e-5, atol=1e-4)
    assert not np.allclose(got[0], model.embed([text])[0], atol=1e-2)


def test_a_layer_the_model_does_not_have_is_one_typed_error_and_not_a_failure(reader_cache):
    model = EmbeddedModel(n_threads=1)
    with pytest.raises(
        LayerReadUnavailable, match="has 30 blocks: early exit reads block 0 to 28, not 40"
    ):
        model.embed_layer(["a note"], 40, cache_dir=reader_cache)
    assert model.breaker.state().failures == 0  # a build detail, not the backend's health
    with pytest.raises(LayerReadUnavailable):  # remembered: not tried again at every note
        model.embed_layer(["a note"], 40, cache_dir=reader_cache)
    assert model.embed_layer(["a note"], LAYER, cache_dir=reader_cache).shape == (1, 576)


def test_without_the_gguf_package_the_reader_says_so(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "gguf", None)
    with pytest.raises(LayerReadUnavailable, match="gguf package is not installed"):
        derive_weights(default_model_path(), 3, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_a_tensor_name_this_build_does_not_have_is_caught_on_the_first_read(
    reader_cache, monkeypatch
):
    """Another llama.cpp that names the residual stream otherwise: the constructor's first read
    gets no rows and raises, instead of a probe trained on zeros."""
    real = LayerReader.__init__

    def renamed(self, *args, **kwargs):
        real(self, *args, **kwargs)
        name = b"l_out-99\0"
        self._state[8:16].view(np.uint8)[: len(name)] = np.frombuffer(name, np.uint8)
        self._cache = ((), None)
        self.states(self.tokenize("check"))

    monkeypatch.setattr(LayerReader, "__init__", renamed)
    with pytest.raises(LayerReadUnavailable, match="l_out-2 not read"):
        LayerReader(default_model_path(), LAYER, cache_dir=reader_cache)


class _NoEarlyExit(EmbeddedModel):
    """Fault injector: the real model, whose early exit is unavailable on this build."""

    def embed_layer(self, texts, layer, *, cache_dir=None, weights="Q8_0"):
        raise LayerReadUnavailable("l_out-9 not read (0 bytes, 0 rows for 3 tokens)")


def test_the_probe_reads_the_final_states_where_the_early_exit_cannot_run(reader_cache):
    from marlm.llm.triage.probe import FINAL, ProbeMode

    tri = Triage(_NoEarlyExit(n_threads=1), mode="probe", cache_dir=reader_cache)
    mode = tri._as(ProbeMode)
    with pytest.warns(RuntimeWarning) as caught:
        assert mode.feature() == FINAL
    (line,) = [str(w.message) for w in caught]
    assert line == (
        "triage probe reads the final states (about 4 times the CPU a note): "
        "l_out-9 not read (0 bytes, 0 rows for 3 tokens)"
    )
    assert mode.feature_note == "l_out-9 not read (0 bytes, 0 rows for 3 tokens)"
    model = EmbeddedModel(n_threads=1)
    layered = Triage(model, mode="probe", cache_dir=reader_cache)._as(ProbeMode)
    layered.layer = LAYER  # the weights derived above (the default, 9, derives 11 blocks)
    assert layered.feature() == f"l_out-{LAYER}" and layered.feature_note is None
    assert layered.embedding_key() != mode.embedding_key()  # separate disk caches
