"""The floor under the three layers: what planning, acting and rules share, and nothing else.

- :mod:`~marlm.hybrid.core.view`: the per-step view (:class:`~marlm.hybrid.core.view.StepView`),
  the five actions, robot priority, one-hot scores.
- :mod:`~marlm.hybrid.core.graph`: the map as a graph (neighbour table, dead-end depth, BFS) and
  the store of distance tables to the targets in use.

``core`` imports only the environment; each layer imports ``core`` and never a sibling layer.
"""
