"""The rule layer: one collision-free joint move chosen from the executor's scores, with the last word.

- :mod:`~marlm.hybrid.rules.shield`: the rule-layer protocol, PIBT and the local shield as its
  implementations, and the one shielded step.
- :mod:`~marlm.hybrid.rules.pibt`: PIBT over action scores (Okumura et al., AIJ 2022), compiled.
- :mod:`~marlm.hybrid.rules.graph`: the map as a graph (neighbour table, dead-end depth, BFS).
- :mod:`~marlm.hybrid.rules.wrappers`: the rule layer as a PettingZoo wrapper.
"""
