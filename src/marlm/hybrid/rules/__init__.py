"""The rule layer: one collision-free joint move chosen from the executor's scores, with the last word.

- :mod:`~marlm.hybrid.rules.layer`: the rule-layer protocol, its result, the one shielded step,
  the safety check; :mod:`~marlm.hybrid.rules.factory`: the layers by name, their warm-up.
- :mod:`~marlm.hybrid.rules.pibt_layer`: PIBT as the rule layer (the default);
  :mod:`~marlm.hybrid.rules.pibt`: PIBT over action scores (Okumura et al., AIJ 2022), compiled.
- :mod:`~marlm.hybrid.rules.shield`: the local shield (conflicting moves held, deadlocks broken).
- :mod:`~marlm.hybrid.rules.wrappers`: the rule layer as a PettingZoo wrapper.

The map's tables (neighbours, BFS, distance tables) are on the floor below, :mod:`marlm.hybrid.core`.
"""
