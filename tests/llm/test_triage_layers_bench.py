"""The layer reader of ``benchmarks/triage_layers.py`` reads what the figures in docs/triage.md
say it reads: exactly the asked tensors of the real embedded model, the final one equal to
``EmbeddedModel.embed``, and the same states with and without prefix reuse."""

from __future__ import annotations

import numpy as np

from marlm.llm.triage import probe_input
from script_module import load_script


def _bench():
    return load_script("benchmarks/triage_layers.py")


def test_layer_reader_reads_the_asked_layers_and_the_final_state_of_embed(embedded_model):
    bench = _bench()
    wanted = ["l_out-0", "l_out-14", bench.FINAL]
    reader = bench.LayerReader(embedded_model, wanted)
    first, second = probe_input("Overnight express label attached."), probe_input("No rush.")
    fresh = reader.states(second)
    n_tokens = embedded_model.count_tokens([second])[0]
    assert sorted(fresh) == sorted(wanted)
    for states in fresh.values():
        assert states.dtype == np.float32 and states.shape == (n_tokens, 576)
    assert not np.allclose(fresh["l_out-0"], fresh["l_out-14"])  # distinct layers
    np.testing.assert_allclose(
        fresh[bench.FINAL].astype(np.float64).mean(axis=0),
        embedded_model.embed([second])[0],
        atol=1e-4,
    )
    reader.states(first)
    reused = reader.states(second, reuse=True)
    decoded = len(reader.got["l_out-14"][0])
    assert 0 < decoded < n_tokens  # the template's opening came from the KV cache
    for name in wanted:
        np.testing.assert_allclose(reused[name], fresh[name], rtol=1e-5, atol=1e-4)
